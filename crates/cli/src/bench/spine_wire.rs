//! SPINE over the UDP wire: a handler ping-pong between two adapters
//! (two engines, each on a loopback UDP port of its own, joined by a
//! link), beside two host processes' ping-pong on unet's direct path and
//! raw UDP between two processes, measured in the same run, interleaved
//! (raw UDP, direct, SPINE; again for each repetition).
//!
//! The extension is `extensions/WirePingPong.java` (compiled with the
//! JDK for the run), loaded on both adapters: a host on adapter A serves
//! a ball with a count of `2n - 1`, and the handlers bounce it `n` round
//! trips between the adapters over the link with no host on the path;
//! the last hands it back to the host. A sample is that time divided by
//! `n` (the host's two local hops are spread over the `n` round trips).
//! Sizes up to 236 bytes travel as arguments (a small message); larger
//! ones as 4 bytes of arguments and bulk data (fragmented at the
//! engines' datagram, which is loopback's largest, as raw UDP's).
//!
//! Both adapters run in this process, each on its engine's thread; the
//! baselines' other side is a child process. On the project's 2-core
//! machines the three threads share the cores.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde_json::{json, Value};
use unet::spine::ExtensionOptions;
use unet::{Endpoint, EndpointConfig, Engine, EngineConfig, Session};
use unet_engine::wire::udp::LOOPBACK_DATAGRAM;

use super::applet_build::{self, BuildDir};
use super::child::{spawn_child, ChildKind, PathArg};
use super::report::{finish, warn_if_busy, Progress};
use super::stats::{self, fmt_size, iters_for, Samples};
use super::{udp_raw, unet_paths};

type Res<T> = Result<T, String>;

/// Handler numbers of WirePingPong on both adapters.
const BASE: u16 = 300;
/// Largest size sent as arguments alone (the host's message adds the
/// link's 4 bytes to the 240 a slot holds).
const SMALL_MAX: usize = 236;

/// `unet bench spine-wire`.
#[derive(Args, Clone)]
pub struct WireArgs {
    /// Message sizes (comma list; 8, 64, 1K, 16K forms; at least 8).
    #[arg(long, value_delimiter = ',', value_parser = stats::parse_size,
          default_value = "8,64,236,1K,16K")]
    pub sizes: Vec<usize>,
    /// Handler round trips per host message.
    #[arg(long, default_value_t = 100)]
    pub rounds: u32,
    /// Timed host messages per run (the baselines time this many times
    /// `--rounds` round trips), scaled down above 4 KiB.
    #[arg(long, default_value_t = 200)]
    pub iters: usize,
    /// Runs of each per size, interleaved.
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Upper bound on the timed part of each run, in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub time_ms: u64,
    /// Print one JSON object per line per size.
    #[arg(long)]
    pub json: bool,
}

/// One size's figures: round-trip medians and p99s, µs.
#[derive(Clone, Debug)]
pub(crate) struct WireRow {
    pub size: usize,
    pub spine_median_us: f64,
    pub spine_p99_us: f64,
    pub spine_samples: usize,
    pub direct_median_us: f64,
    pub raw_udp_median_us: f64,
}

impl WireRow {
    /// The handler ping-pong over the wire against the hosts' direct path.
    pub fn ratio_direct(&self) -> f64 {
        self.spine_median_us / self.direct_median_us
    }

    /// Against raw UDP.
    pub fn ratio_udp(&self) -> f64 {
        self.spine_median_us / self.raw_udp_median_us
    }

    pub fn json(&self) -> Value {
        json!({
            "bench": "spine_wire_pingpong",
            "size": self.size,
            "spine_wire_median_us": self.spine_median_us,
            "spine_wire_p99_us": self.spine_p99_us,
            "spine_wire_samples": self.spine_samples,
            "direct_median_us": self.direct_median_us,
            "raw_udp_median_us": self.raw_udp_median_us,
            "ratio_direct": self.ratio_direct(),
            "ratio_raw_udp": self.ratio_udp(),
        })
    }
}

pub fn run(a: WireArgs) -> ExitCode {
    finish(run_rows(&a))
}

fn run_rows(a: &WireArgs) -> Res<()> {
    if !a.json {
        print_header();
    }
    for row in wire_pingpong(a)? {
        if a.json {
            println!("{}", row.json());
        } else {
            print_line(&row);
        }
    }
    Ok(())
}

pub(crate) fn print_header() {
    println!(
        "{:>8} {:>14} {:>12} {:>12} {:>12} {:>10} {:>10}",
        "size", "spine wire us", "p99 us", "direct us", "raw udp us", "/direct", "/raw udp"
    );
}

pub(crate) fn print_line(r: &WireRow) {
    println!(
        "{:>8} {:>14.2} {:>12.2} {:>12.2} {:>12.2} {:>10.2} {:>10.2}",
        fmt_size(r.size),
        r.spine_median_us,
        r.spine_p99_us,
        r.direct_median_us,
        r.raw_udp_median_us,
        r.ratio_direct(),
        r.ratio_udp()
    );
}

/// The rows of `a`'s sizes (see the module documentation).
pub(crate) fn wire_pingpong(a: &WireArgs) -> Res<Vec<WireRow>> {
    if a.reps == 0 || a.rounds == 0 {
        return Err("--reps and --rounds must be at least 1".into());
    }
    if let Some(s) = a.sizes.iter().find(|&&s| s < 8) {
        return Err(format!("size {s}: at least 8 bytes"));
    }
    warn_if_busy();
    let (_dir, class) = compile()?;
    let mut pair = Pair::new(&class)?;
    let prog = Progress::new();
    let limit = Duration::from_millis(a.time_ms);
    let mut rows = Vec::new();
    for &size in &a.sizes {
        let iters = iters_for(a.iters, size);
        let base_iters = iters * a.rounds as usize;
        let warm = (base_iters / 10).min(1000);
        let (mut sp, mut direct, mut udp) =
            (Samples::default(), Samples::default(), Samples::default());
        for rep in 0..a.reps {
            let what = format!("spine-wire {} {}/{}", fmt_size(size), rep + 1, a.reps);
            prog.show(&format!("{what}: raw udp"));
            udp.extend(raw_udp(size, warm, base_iters, limit)?);
            prog.show(&format!("{what}: direct"));
            direct.extend(direct_path(size, warm, base_iters, limit)?);
            prog.show(&format!("{what}: spine"));
            sp.extend(pair.pingpong(size, a.rounds, iters, limit)?);
        }
        prog.clear();
        rows.push(WireRow {
            size,
            spine_median_us: sp.median_us(),
            spine_p99_us: sp.p99_us(),
            spine_samples: sp.ns.len(),
            direct_median_us: direct.median_us(),
            raw_udp_median_us: udp.median_us(),
        });
    }
    Ok(rows)
}

/// WirePingPong compiled: the build directory and the class's bytes.
fn compile() -> Res<(BuildDir, Vec<u8>)> {
    let ext = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../extensions");
    let (sources, sdk) = applet_build::sources(Some(&ext), None, &["WirePingPong"])?;
    let dir = BuildDir::new("spine-wire", false)?;
    applet_build::javac(&sdk, &dir.path, &sources)?;
    let class = std::fs::read(dir.path.join("WirePingPong.class"))
        .map_err(|e| format!("WirePingPong.class: {e}"))?;
    Ok((dir, class))
}

/// Raw UDP between this process and a child.
fn raw_udp(size: usize, warm: usize, iters: usize, limit: Duration) -> Res<Samples> {
    let s = udp_raw::socket().map_err(|e| format!("raw UDP socket: {e}"))?;
    let ch = spawn_child(ChildKind::UdpPingpong, size, 0, &[], None, false)?;
    let peer: SocketAddr = ch.info.parse().map_err(|_| "child sent a bad address")?;
    let r = udp_raw::pingpong(&s, peer, size, warm, iters, limit)
        .map_err(|e| format!("raw UDP ping-pong: {e}"));
    ch.wait(r)
}

/// unet's direct path between this process and a child.
fn direct_path(size: usize, warm: usize, iters: usize, limit: Duration) -> Res<Samples> {
    unet_paths::pingpong(&unet_paths::Run {
        path: PathArg::Direct,
        size,
        burst: 0,
        batch: 1,
        warmup: warm,
        iters,
        limit,
        warmup_time: Duration::ZERO,
        pin: false,
        max_datagram: LOOPBACK_DATAGRAM,
        spin_us: None,
        counters: false,
        applet: None,
        buffered: None,
    })
}

/// Two adapters joined by a link, WirePingPong on both, a host endpoint
/// on A. Field order is drop order.
struct Pair {
    ep: Endpoint,
    link: u32,
    _sa: Session,
    _sb: Session,
    _ea: Engine,
    _eb: Engine,
}

impl Pair {
    fn new(class: &[u8]) -> Res<Pair> {
        let err = |what: &'static str| move |e: unet::Error| format!("{what}: {e}");
        let start = || {
            let e = Engine::start(EngineConfig {
                udp_bind: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
                max_datagram: LOOPBACK_DATAGRAM,
                ..EngineConfig::default()
            })
            .map_err(|e| format!("engine: {e}"))?;
            let s = Session::embedded(&e).map_err(err("session"))?;
            let opts = ExtensionOptions {
                name: "wire-pingpong".into(),
                arg: i32::from(BASE),
                ..ExtensionOptions::default()
            };
            s.load_extension(class, opts).map_err(err("load"))?;
            Ok::<_, String>((e, s))
        };
        let (ea, sa) = start()?;
        let (eb, sb) = start()?;
        let (link, token) = sa.spine_link_listen(0).map_err(err("listen"))?;
        let at = sa.udp_addr().ok_or("adapter A has no wire")?;
        sb.spine_link_connect(at, token, Duration::from_secs(5))
            .map_err(err("connect"))?;
        let ep = sa
            .create_endpoint(EndpointConfig::default())
            .map_err(err("endpoint"))?;
        Ok(Pair {
            ep,
            link,
            _sa: sa,
            _sb: sb,
            _ea: ea,
            _eb: eb,
        })
    }

    /// Timed host messages of `rounds` handler round trips each; samples
    /// per round trip.
    fn pingpong(
        &mut self,
        size: usize,
        rounds: u32,
        iters: usize,
        limit: Duration,
    ) -> Res<Samples> {
        let ep = &mut self.ep;
        let count = (2 * rounds - 1) as i32;
        let (args_len, bulk_len) = if size <= SMALL_MAX {
            (size, 0)
        } else {
            (4, size - 4)
        };
        let mut args = self.link.to_le_bytes().to_vec();
        args.extend_from_slice(&count.to_le_bytes());
        args.resize(4 + args_len, 0);
        let bulk = vec![0x5au8; bulk_len];
        let mut buf = vec![0u8; size + 64];
        let mut ball = || -> Res<()> {
            ep.send_am(BASE, &args, &bulk)
                .map_err(|e| format!("send_am: {e:?}"))?;
            let r = ep
                .recv(&mut buf, Some(Duration::from_secs(5)))
                .map_err(|e| format!("the ball did not come back: {e}"))?;
            if !r.am() || r.handler() != Some(BASE + 2) {
                return Err(format!("not the ball: {} bytes", r.len));
            }
            Ok(())
        };
        for _ in 0..(iters / 10).clamp(1, 20) {
            ball()?;
        }
        let mut s = stats::time_round_trips(iters, limit, &mut ball)?;
        for v in &mut s.ns {
            *v /= u64::from(rounds);
        }
        Ok(s)
    }
}
