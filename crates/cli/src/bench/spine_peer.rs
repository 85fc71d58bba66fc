//! Handler ping-pong between two extensions on two adapters over SPINE's
//! peer queue, beside the same exchange between two host processes on
//! unet's direct path, measured in the same run ([`peer_pingpong`]; `unet
//! bench spine` calls it, and `unet bench spine-peer` runs it alone).
//!
//! Two engines run in this process (each on its thread of its own: two
//! adapters), joined by a peer queue, each with `extensions/PeerPing.java`
//! loaded (compiled with the JDK). One host message starts a rally of
//! [`ROUNDS`] round trips between `onVolley` on B and `onReturn` on A
//! (4 bytes of arguments each way, no host on the path); A's handler
//! tells the host when they are done, and a sample is the rally's time
//! over its rounds. The baseline is `unet bench pingpong --path direct`'s
//! round trip of 8 bytes between this process and a child. Runs alternate
//! baseline, peer queue, baseline, peer queue...

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde_json::{json, Value};
use unet::spine::ExtensionOptions;
use unet::{EndpointConfig, Engine, EngineConfig, RecvError, Session};

use super::applet_build::{self, BuildDir};
use super::child::PathArg;
use super::report::{finish, warn_if_busy, Progress};
use super::stats::{self, Samples};
use super::unet_paths;

/// Round trips of one rally (one sample).
pub(crate) const ROUNDS: u32 = 1000;
/// PeerPing's first handler number on both adapters.
const BASE: u16 = 100;
/// Bytes of the baseline's messages.
const BASELINE_SIZE: usize = 8;
/// How long a rally may take before the run fails.
const PATIENCE: Duration = Duration::from_secs(10);

type Res<T> = Result<T, String>;

/// `unet bench spine-peer`.
#[derive(Args)]
pub struct PeerArgs {
    /// Runs of each, interleaved.
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Rallies (samples) per run.
    #[arg(long, default_value_t = 50)]
    pub rallies: usize,
    /// Print one JSON object per line per row.
    #[arg(long)]
    pub json: bool,
}

/// How long the polling adapters of the second row poll after their
/// last work before they sleep.
const POLL: Duration = Duration::from_micros(200);

/// One row: the peer queue's round trip beside the direct path's.
pub(crate) struct PeerRow {
    /// The adapters poll for [`POLL`] before they sleep (the engine's
    /// default is to sleep as soon as a turn finds nothing).
    pub polling: bool,
    pub median_us: f64,
    pub p99_us: f64,
    pub samples: usize,
    pub baseline_median_us: f64,
    pub baseline_p99_us: f64,
    pub baseline_samples: usize,
}

impl PeerRow {
    /// Peer queue median / direct path median.
    pub(crate) fn ratio(&self) -> f64 {
        self.median_us / self.baseline_median_us
    }

    pub(crate) fn json(&self) -> Value {
        json!({
            "bench": "spine",
            "what": "peer_pingpong",
            "path": "peer_queue",
            "adapters": if self.polling { "polling" } else { "default" },
            "idle_spin_us": if self.polling { POLL.as_micros() as u64 } else { 0 },
            "args_bytes": 4,
            "rounds_per_sample": ROUNDS,
            "median_us": self.median_us,
            "p99_us": self.p99_us,
            "samples": self.samples,
            "baseline": "direct_host_pingpong",
            "baseline_size": BASELINE_SIZE,
            "baseline_median_us": self.baseline_median_us,
            "baseline_p99_us": self.baseline_p99_us,
            "baseline_samples": self.baseline_samples,
            "ratio": self.ratio(),
        })
    }

    pub(crate) fn line(&self) -> String {
        format!(
            "{:<36} {:>10.3} {:>10.3}  {:<22} {:>10.3} {:>10.3}  {:>6.2}",
            if self.polling {
                "handler pingpong, peer, polling"
            } else {
                "handler pingpong, peer queue"
            },
            self.median_us,
            self.p99_us,
            "host pingpong, direct",
            self.baseline_median_us,
            self.baseline_p99_us,
            self.ratio()
        )
    }
}

pub fn run(a: PeerArgs) -> ExitCode {
    finish((|| {
        let rows = peer_pingpong(a.reps, a.rallies)?;
        if !a.json {
            println!(
                "{:<36} {:>10} {:>10}  {:<22} {:>10} {:>10}  {:>6}",
                "what", "median_us", "p99_us", "baseline", "median_us", "p99_us", "ratio"
            );
        }
        for r in &rows {
            if a.json {
                println!("{}", r.json());
            } else {
                println!("{}", r.line());
            }
        }
        Ok(())
    })())
}

/// The checkout's `rel`.
fn checkout(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// PeerPing's class file, compiled into `dir`.
fn peer_ping_class(dir: &BuildDir) -> Res<Vec<u8>> {
    let src = checkout("extensions/PeerPing.java");
    let sdk = checkout("java/applet-sdk/src/main/java");
    applet_build::javac(&sdk, &dir.path, &[src])?;
    let f = dir.path.join("PeerPing.class");
    std::fs::read(&f).map_err(|e| format!("{}: {e}", f.display()))
}

/// Handler ping-pong over the peer queue beside host ping-pong on the
/// direct path: `reps` runs of each, interleaved, of `rallies` samples
/// (each [`ROUNDS`] round trips) and 20 times as many direct round trips;
/// one row with the engines' default configuration (they sleep as soon
/// as a turn finds nothing), one with adapters that poll (as a network
/// interface's processor does).
pub(crate) fn peer_pingpong(reps: usize, rallies: usize) -> Res<Vec<PeerRow>> {
    if reps == 0 || rallies == 0 {
        return Err("--reps and --rallies must be at least 1".into());
    }
    warn_if_busy();
    let dir = BuildDir::new("spine-peer", false)?;
    let class = peer_ping_class(&dir)?;
    let prog = Progress::new();
    let mut rows = Vec::new();
    for polling in [false, true] {
        let mut peer = Samples::default();
        let mut base = Samples::default();
        for rep in 0..reps {
            prog.show(&format!("spine peer: direct baseline {}/{reps}", rep + 1));
            base.extend(direct(rallies * 20)?);
            prog.show(&format!("spine peer: peer queue {}/{reps}", rep + 1));
            peer.extend(rally_run(&class, rallies, polling)?);
        }
        rows.push(PeerRow {
            polling,
            median_us: peer.median_us(),
            p99_us: peer.p99_us(),
            samples: peer.ns.len(),
            baseline_median_us: base.median_us(),
            baseline_p99_us: base.p99_us(),
            baseline_samples: base.ns.len(),
        });
    }
    prog.clear();
    Ok(rows)
}

/// One run of the baseline: `iters` round trips of 8 bytes between two
/// host processes on the direct path.
fn direct(iters: usize) -> Res<Samples> {
    let cfg = unet_paths::Run {
        path: PathArg::Direct,
        size: BASELINE_SIZE,
        burst: 0,
        batch: 1,
        warmup: 1000.min(iters),
        iters,
        limit: Duration::from_millis(500),
        warmup_time: Duration::ZERO,
        pin: false,
        max_datagram: unet_engine::wire::udp::LOOPBACK_DATAGRAM,
        spin_us: None,
        counters: false,
        applet: None,
        buffered: None,
    };
    unet_paths::pingpong(&cfg)
}

fn e(what: &'static str) -> impl Fn(unet::Error) -> String {
    move |e| format!("{what}: {e}")
}

/// One run over the peer queue: two fresh adapters joined (`polling`:
/// they poll for [`POLL`] before they sleep), PeerPing on each,
/// `rallies` timed rallies after one untimed.
fn rally_run(class: &[u8], rallies: usize, polling: bool) -> Res<Samples> {
    let cfg = EngineConfig {
        idle_spin: if polling { POLL } else { Duration::ZERO },
        ..EngineConfig::default()
    };
    let ea = Engine::start(cfg.clone()).map_err(|x| format!("engine: {x}"))?;
    let eb = Engine::start(cfg).map_err(|x| format!("engine: {x}"))?;
    let sa = Session::embedded(&ea).map_err(e("session"))?;
    let sb = Session::embedded(&eb).map_err(e("session"))?;
    let opts = ExtensionOptions {
        arg: BASE as i32,
        ..ExtensionOptions::named("PeerPing")
    };
    sa.load_extension(class, opts.clone())
        .map_err(e("load on A"))?;
    sb.load_extension(class, opts).map_err(e("load on B"))?;
    let pair = unet::peer::join(&sa, &sb).map_err(e("peer join"))?;
    let mut ep = sa
        .create_endpoint(EndpointConfig::default())
        .map_err(e("endpoint"))?;
    let mut args = ((2u32 << 24) | pair.a).to_le_bytes().to_vec();
    args.extend_from_slice(&ROUNDS.to_le_bytes());
    let mut buf = [0u8; 512];
    let mut rally = || -> Res<()> {
        ep.send_am(BASE + 4, &args, &[])
            .map_err(|x| format!("send_am: {x}"))?;
        match ep.recv(&mut buf, Some(PATIENCE)) {
            Ok(r) if r.handler() == Some(BASE + 6) => {
                let (a, _) = unet::spine::split_am(&buf[..r.len]).ok_or("bad framing")?;
                match a
                    .get(..4)
                    .map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()))
                {
                    Some(ROUNDS) => Ok(()),
                    n => Err(format!("a rally played {n:?} rounds, not {ROUNDS}")),
                }
            }
            Ok(r) => Err(format!("the rally was refused (handler {:?})", r.handler())),
            Err(RecvError::Timeout) => Err("a rally did not end (a message was lost)".into()),
            Err(x) => Err(format!("recv: {x}")),
        }
    };
    rally()?;
    let mut s = stats::time_round_trips(rallies, Duration::from_secs(30), &mut rally)?;
    for ns in s.ns.iter_mut() {
        *ns /= ROUNDS as u64;
    }
    Ok(s)
}
