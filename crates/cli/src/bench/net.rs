//! `unet bench pingpong` and `unet bench stream`: unet's direct, engine and
//! UDP paths, each measured beside its baseline in the same invocation (the
//! floor ring for `direct` and `engine`, raw UDP for `udp`), runs
//! interleaved baseline, unet, baseline, unet… so both see the same noise.
//!
//! Every run uses two processes: this one and a child started by
//! re-executing the current binary as `unet bench __child …`. This process
//! drives and times; the child echoes (ping-pong) or receives (stream).
//!
//! Ping-pong: each round trip is timed on its own with `Instant` (one vDSO
//! clock read per round trip, whose cost, measured in each run, is
//! subtracted: `clock_ns` in the JSON); median and p99 are over all timed
//! round trips of all repetitions. Stream: the sender sends for a
//! fixed time after a warm-up, then asks the receiver for its count; the
//! time runs from the start until that final acknowledgment arrives, so the
//! figure is what was received. msgs/s is the median over repetitions;
//! GB/s = msgs/s × size / 10⁹.
//!
//! `--applet` attaches U-Net/SLE applets, each in turn; the sample applets
//! that change what the users do (PingPong, and the Figure 6 applets
//! ReceiverAck, Burst, Generate) are recognised by class name and get their
//! own user protocol (see `unet_paths`). `stream --figure6` compiles the
//! four Figure 6 applets and runs them in bursts of 25.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use unet_engine::wire::udp::LOOPBACK_DATAGRAM;

use super::applet_build;
use super::child::{pin_to, spawn_child, ChildArgs, ChildKind, Load, PathArg, PlacementArg};
use super::floor::{self, Geometry, Shm, StreamRun};
use super::forwarder;
use super::host_floor;
use super::report::{
    self, finish, note_if_unsteady, warn_if_busy, HostFloors, PingRow, Progress, StreamRow,
};
use super::stats::{self, fmt_size, iters_for, median_f64, median_of_all, Samples};
use super::udp_raw;
use super::unet_paths;
use super::via;

/// Options both benchmarks share.
#[derive(Args, Clone)]
pub struct Common {
    /// Paths to measure (comma list) [default: direct, or engine with an
    /// applet placed in the engine].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub path: Vec<PathArg>,
    /// Runs of unet and of the baseline per size, interleaved [default:
    /// 3 for pingpong, 5 for stream].
    #[arg(long)]
    pub reps: Option<usize>,
    /// Print one JSON object per line per measured point.
    #[arg(long)]
    pub json: bool,
    /// Draw the figure as an SVG: unet's curves (each path and applet)
    /// beside their baselines', against message size.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<std::path::PathBuf>,
    /// Pin this process to core 0 and the other to core 1.
    #[arg(long)]
    pub pin: bool,
    /// Measure only the baseline (unet figures are null / "-").
    #[arg(long)]
    pub baseline_only: bool,
    /// Bytes of each floor ring (rounded to whole slots, at least two).
    #[arg(long, default_value = "1M", value_parser = stats::parse_size)]
    pub ring_bytes: usize,
    /// Floor ring record alignment in bytes (a power of two, 8 to 4096).
    #[arg(long, default_value_t = 64, value_parser = parse_align)]
    pub floor_align: usize,
    /// UDP path: largest datagram unet's engines send (both agree).
    #[arg(long, default_value_t = LOOPBACK_DATAGRAM)]
    pub max_datagram: usize,
    /// Measure the host's own floor just before each run: a ping-pong of
    /// two cache lines between two threads on cores 0 and 1 (its round
    /// trip changes with where a virtual machine's host places the two
    /// cores). Printed beside each figure, with `ratio_placed`: each unet
    /// run against the baseline run of the nearest host floor.
    #[arg(long)]
    pub host_floor: bool,
    /// How long unet's blocking receive spins before it sleeps, in
    /// microseconds (default: the library's).
    #[arg(long)]
    pub spin_us: Option<u64>,
    /// After each unet run, print the non-zero counters of its engines on
    /// stderr (as `unet stat` names them; the whole run, warm-up included):
    /// drops by reason, wake-ups, yields. The sending side's engine holds both endpoints on the direct
    /// and engine paths; over UDP each side's engine prints its own.
    #[arg(long)]
    pub counters: bool,
    /// Attach this U-Net/SLE applet (a class file) to both endpoints (the
    /// paper's Figures 5 and 6); a comma list measures each in turn. Sample
    /// applets that change what the users do are recognised by name:
    /// `PingPong` (pingpong) runs round trips between the applets only, one
    /// user message starting 100 of them, each sample their time / 100;
    /// with stream, `ReceiverAck` leaves the acknowledgments to the applets
    /// (the sender just streams), `Burst` sends each user message 25 times
    /// (one user send per burst), `Generate` sends data of its own (sizes
    /// 16 B to 64 KiB). ReceiverAck and Burst need --pattern burst25.
    #[arg(long, value_name = "FILE.class", value_delimiter = ',')]
    pub applet: Vec<std::path::PathBuf>,
    /// Where the applet runs: in the engine (engine and udp paths) or
    /// inline in each process (any path).
    #[arg(long, value_enum, default_value = "engine")]
    pub placement: PlacementArg,
    /// Run N processes that only spin beside every run (baselines and
    /// floors included), placed by the scheduler: the figures of a busy
    /// machine. Each row says how many (`load` in `--json`).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub load: usize,
}

/// The paths to measure: `--path`, or by default the direct path, the
/// engine path when an applet runs in the engine.
fn paths_of(c: &Common, applets: bool) -> Vec<PathArg> {
    if !c.path.is_empty() {
        c.path.clone()
    } else if applets && c.placement == PlacementArg::Engine {
        vec![PathArg::Engine]
    } else {
        vec![PathArg::Direct]
    }
}

/// The applets of a run (class bytes, file, placement, kind), each in
/// turn; `[None]` without `--applet`.
fn applets_of(c: &Common) -> Res<Vec<Option<unet_paths::AppletRun>>> {
    if c.applet.is_empty() {
        return Ok(vec![None]);
    }
    if c.placement == PlacementArg::Engine && c.path.contains(&PathArg::Direct) {
        return Err("an applet placed in the engine takes the engine path: use --path engine or udp, or --placement inline".into());
    }
    c.applet
        .iter()
        .map(|p| {
            let class =
                std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            Ok(Some(unet_paths::AppletRun {
                kind: unet_paths::AppletKind::of_file(p),
                file: p.clone(),
                class,
                placement: c.placement,
            }))
        })
        .collect()
}

/// The `applet` of a report row: class name and placement.
fn applet_label(a: &Option<unet_paths::AppletRun>) -> Option<(String, &'static str)> {
    a.as_ref().map(|a| {
        (
            a.file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            a.placement.name(),
        )
    })
}

/// Round-trip time against message size.
#[derive(Args)]
#[command(after_help = "\
Each run is this process and a child it starts; runs alternate baseline, \
unet, baseline, unet… Each round trip is timed on its own (one clock read \
per round trip, its cost measured in each run and subtracted: clock_ns); \
median and p99 are over all timed round trips of a size. \
Baselines: `floor` (direct, engine) is a busy-polled single-producer/\
single-consumer shared-memory ring with copies in and out; `raw_udp` (udp) \
is blocking send_to/recv_from on 127.0.0.1, 65507-byte datagrams at most. \
ratio = unet median / baseline median.")]
pub struct PingArgs {
    /// Message sizes (comma list; 8, 64, 1K, 4K, 64K forms).
    #[arg(long, value_delimiter = ',', value_parser = stats::parse_size,
          default_value = "8,64,256,1K,4K,16K,64K")]
    pub sizes: Vec<usize>,
    /// Timed round trips per run for sizes up to 4 KiB (scaled down above).
    #[arg(long, default_value_t = 20_000)]
    pub iters: usize,
    /// Untimed round trips before each run.
    #[arg(long, default_value_t = 1_000)]
    pub warmup: usize,
    /// Upper bound on the timed part of each run, in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub time_ms: u64,
    /// Time round trips N at a time, unet's and the baselines' alike: each
    /// sample is the time of N round trips over N (the median is then of
    /// groups). A clock that moves in 10 ns steps, as a virtual machine's
    /// may, makes each single round trip's sample a multiple of 10 ns;
    /// groups of N resolve 10/N ns.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub group: usize,
    /// The U-Net/SLE paper's Figure 5: compile RawUnet, StdUnet and
    /// PingPong from the applets' sources with the JDK (22 or later) and
    /// measure no applet, then each applet in turn, with the placement of
    /// --placement (engine: on the engine path, or udp with --path udp;
    /// inline: on the direct path).
    #[arg(long, conflicts_with = "applet")]
    pub figure5: bool,
    /// With --figure5: the directory holding the applets' sources (default:
    /// the source checkout's `applets/`).
    #[arg(long, value_name = "DIR", requires = "figure5")]
    pub applets_dir: Option<std::path::PathBuf>,
    /// With --figure5: the applet SDK's source directory (default: the
    /// source checkout's `java/applet-sdk/src/main/java`).
    #[arg(long, value_name = "DIR", requires = "figure5")]
    pub sdk_dir: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

/// The applets of the U-Net/SLE paper's Figure 5 (`pingpong --figure5`).
const FIGURE5: [&str; 3] = ["RawUnet", "StdUnet", "PingPong"];

/// One-way bandwidth against message size.
#[derive(Args)]
#[command(after_help = "\
Each run is this process (sender) and a child it starts (receiver); runs \
alternate baseline, unet, baseline, unet… The sender sends for --time-ms \
after a warm-up, then asks the receiver for its count: only what was \
received counts, and the time runs until that answer arrives. msgs/s is \
the median over runs; GB/s = msgs/s × size / 10^9. Baselines: `floor` \
(direct, engine) is a busy-polled shared-memory ring; `raw_udp` (udp) is \
one send_to per datagram on 127.0.0.1. ratio = unet msgs/s / baseline msgs/s. \
With an applet the count is what the receiving user got; see --applet for the \
applets that change the users' protocol, and --figure6.")]
pub struct StreamArgs {
    /// Message sizes (comma list; 8, 64, 1K, 4K, 64K forms) [default:
    /// 8,64,256,1K,4K,16K,64K; with --figure6 64,256,1K,4K,16K,64K].
    #[arg(long, value_delimiter = ',', value_parser = stats::parse_size)]
    pub sizes: Vec<usize>,
    /// The U-Net/SLE paper's Figure 6: compile StdUnet, ReceiverAck, Burst
    /// and Generate from the applets' sources with the JDK (22 or later)
    /// and measure each in turn, in bursts of 25 (as `--applet` with the
    /// four class files and `--pattern burst25`).
    #[arg(long, conflicts_with_all = ["applet", "pattern", "burst"])]
    pub figure6: bool,
    /// With --figure6: the directory holding the applets' sources (default:
    /// the source checkout's `applets/`).
    #[arg(long, value_name = "DIR", requires = "figure6")]
    pub applets_dir: Option<std::path::PathBuf>,
    /// With --figure6: the applet SDK's source directory (default: the
    /// source checkout's `java/applet-sdk/src/main/java`).
    #[arg(long, value_name = "DIR", requires = "figure6")]
    pub sdk_dir: Option<std::path::PathBuf>,
    /// Wait for an acknowledgment after every N messages (25 is the
    /// U-Net/SLE paper's Figure 6 pattern); 0 streams without acknowledgments
    /// until the end.
    #[arg(long, default_value_t = 0)]
    pub burst: usize,
    /// Same as `--burst 25` when `burst25`, `--burst 0` when `stream`.
    #[arg(long, value_enum, conflicts_with = "burst")]
    pub pattern: Option<Pattern>,
    /// Messages unet's sender hands over per `send_many` call and its
    /// receiver takes per `recv_many` call, as a streaming application
    /// would; 1 sends and receives one at a time (`send` and `recv`). The
    /// floor moves one message at a time either way.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub batch: u32,
    /// Length of the timed part of each run, in milliseconds.
    #[arg(long, default_value_t = 200)]
    pub time_ms: u64,
    /// Warm-up before each run, in milliseconds.
    #[arg(long, default_value_t = 30)]
    pub warmup_ms: u64,
    /// unet's receiving endpoint is buffered (two-case delivery, UDM's):
    /// a virtual buffer of this many bytes (16M, 1G forms) keeps what the
    /// receive queue cannot take instead of dropping it. The path column
    /// says `+vbuf`; compare its `delivered` with a run without the option
    /// (over `udp`, U-Net's drop loses what a fast sender outruns).
    #[arg(long, value_name = "BYTES", value_parser = stats::parse_size)]
    pub buffered: Option<usize>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Pattern {
    /// Stream without acknowledgments until the end.
    Stream,
    /// Bursts of 25 messages, each followed by an acknowledgment.
    Burst25,
}

type Res<T> = Result<T, String>;

/// `unet bench stream`'s default sizes.
const STREAM_SIZES: [usize; 7] = [8, 64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10];
/// With `--figure6` (Generate sends 16 bytes or more).
const FIGURE6_SIZES: [usize; 6] = [64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10];

pub(super) fn parse_align(s: &str) -> Res<usize> {
    match s.parse::<usize>() {
        Ok(a) if a.is_power_of_two() && (8..=4096).contains(&a) => Ok(a),
        _ => Err(format!("{s:?} is not a power of two from 8 to 4096")),
    }
}

pub fn run_pingpong(a: PingArgs) -> ExitCode {
    finish(pingpong(a))
}

pub fn run_stream(a: StreamArgs) -> ExitCode {
    finish(stream(a))
}

pub fn run_child(a: ChildArgs) -> ExitCode {
    finish(child(a))
}

/// The repetitions, and the `--load` processes (stopped when dropped).
fn setup(c: &Common, default_reps: usize) -> Res<(usize, Load)> {
    let reps = c.reps.unwrap_or(default_reps);
    if reps == 0 {
        return Err("--reps must be at least 1".into());
    }
    warn_if_busy();
    if c.pin {
        pin_to(0)?;
    }
    Ok((reps, Load::start(c.load)?))
}

fn pingpong(mut a: PingArgs) -> Res<()> {
    // Kept until the runs are over: the children read the class files.
    let _figure5 = if a.figure5 {
        let (dir, files) =
            applet_build::compile(a.applets_dir.as_deref(), a.sdk_dir.as_deref(), &FIGURE5)?;
        a.common.applet = files;
        Some(dir)
    } else {
        None
    };
    if a.group == 0 {
        return Err("--group must be at least 1".into());
    }
    let c = &a.common;
    let (reps, _load) = setup(c, 3)?;
    stats::set_group(a.group);
    let prog = Progress::new();
    let limit = Duration::from_millis(a.time_ms);
    let mut applets = applets_of(c)?;
    if a.figure5 {
        // The figure's "standard U-Net without SLE", on the same path.
        applets.insert(0, None);
    }
    let with_applet = applets.iter().any(Option::is_some);
    if !c.json {
        report::ping_header(with_applet);
    }
    let mut rows = Vec::new();
    for path in paths_of(c, with_applet) {
        for applet in &applets {
            for &size in &a.sizes {
                let iters = iters_for(a.iters, size);
                let warm = a.warmup.min(iters);
                let mut base = Samples::default();
                let mut base_medians = Vec::new();
                let mut un = Samples::default();
                let mut un_medians = Vec::new();
                // The path's third party alone, beside its baseline: the
                // engine path's forwarder, the UDP path's relay.
                let mut fwd = (matches!(path, PathArg::Engine | PathArg::Udp) && applet.is_none())
                    .then(Samples::default);
                let mut hosts = Hosts::default();
                let label = applet_label(applet);
                let what = match &label {
                    Some((n, _)) => format!("pingpong {path} {n} {}", fmt_size(size)),
                    None => format!("pingpong {path} {}", fmt_size(size)),
                };
                for rep in 0..reps {
                    prog.show(&format!("{what}: baseline {}/{}", rep + 1, reps));
                    hosts.base.push(host(c));
                    let b = baseline_pingpong(path, size, warm, iters, limit, c)?;
                    base_medians.push(b.median_us());
                    base.extend(b);
                    if let Some(f) = fwd.as_mut() {
                        let third = if path == PathArg::Udp {
                            "relay"
                        } else {
                            "forwarder"
                        };
                        prog.show(&format!("{what}: {third} {}/{}", rep + 1, reps));
                        hosts.forwarder.push(host(c));
                        f.extend(match path {
                            PathArg::Udp => relay_pingpong((size, warm, iters), limit, c)?,
                            _ => forwarder_pingpong((size, warm, iters), limit, c)?,
                        });
                    }
                    if !c.baseline_only {
                        prog.show(&format!("{what}: unet {}/{}", rep + 1, reps));
                        hosts.unet.push(host(c));
                        let cfg = unet_paths::Run {
                            path,
                            size,
                            burst: 0,
                            batch: 1,
                            warmup: warm,
                            iters,
                            limit,
                            warmup_time: Duration::ZERO,
                            pin: c.pin,
                            max_datagram: c.max_datagram,
                            spin_us: c.spin_us,
                            counters: c.counters,
                            applet: applet.clone(),
                            buffered: None,
                        };
                        let u = unet_paths::pingpong(&cfg)?;
                        un_medians.push(u.median_us());
                        un.extend(u);
                    }
                }
                prog.clear();
                note_if_unsteady(&what, path.baseline(), &base_medians, "us (median of each)");
                let row = PingRow {
                    path: path.name(),
                    applet: label,
                    size,
                    median_us: (!c.baseline_only).then(|| un.median_us()),
                    p99_us: (!c.baseline_only).then(|| un.p99_us()),
                    samples: un.ns.len(),
                    baseline: path.baseline(),
                    baseline_median_us: base.median_us(),
                    baseline_p99_us: base.p99_us(),
                    baseline_samples: base.ns.len(),
                    clock_ns: {
                        let mut all = base.clone();
                        all.extend(un.clone());
                        all.clock_ns()
                    },
                    forwarder: fwd.map(|f| (f.median_us(), f.p99_us())),
                    load: c.load,
                    group: a.group,
                    hosts: c
                        .host_floor
                        .then(|| hosts.placed(&un_medians, &base_medians)),
                };
                if c.json {
                    println!("{}", row.json());
                } else {
                    report::ping_line(&row, with_applet);
                }
                rows.push(row);
            }
        }
    }
    match &c.svg {
        Some(f) => report::ping_svg(&rows, a.figure5, f),
        None => Ok(()),
    }
}

fn stream(mut a: StreamArgs) -> Res<()> {
    // Kept until the runs are over: the children read the class files.
    let _figure6 = if a.figure6 {
        if a.sizes.is_empty() {
            a.sizes = FIGURE6_SIZES.to_vec();
        }
        let (dir, files) = applet_build::compile(
            a.applets_dir.as_deref(),
            a.sdk_dir.as_deref(),
            &unet_paths::FIGURE6,
        )?;
        a.common.applet = files;
        Some(dir)
    } else {
        None
    };
    if a.sizes.is_empty() {
        a.sizes = STREAM_SIZES.to_vec();
    }
    let c = &a.common;
    let (reps, _load) = setup(c, 5)?;
    let burst = match a.pattern {
        Some(Pattern::Burst25) => 25,
        Some(Pattern::Stream) => 0,
        None if a.figure6 => 25,
        None => a.burst,
    };
    let applets = applets_of(c)?;
    if !c.baseline_only {
        for ap in applets.iter().flatten() {
            for &size in &a.sizes {
                ap.kind
                    .check_stream(size, burst)
                    .map_err(|e| format!("{}: {e}", ap.file.display()))?;
            }
        }
    }
    let with_applet = applets[0].is_some();
    let prog = Progress::new();
    if !c.json {
        report::stream_header(with_applet);
    }
    let mut rows = Vec::new();
    let dur = Duration::from_millis(a.time_ms);
    let warm = Duration::from_millis(a.warmup_ms);
    for path in paths_of(c, with_applet) {
        for applet in &applets {
            for &size in &a.sizes {
                let mut base = Vec::new();
                let mut un = Vec::new();
                let (mut base_deliv, mut un_deliv) = (Vec::new(), Vec::new());
                let mut hosts = Hosts::default();
                let label = applet_label(applet);
                let what = match &label {
                    Some((n, _)) => format!("stream {path} {n} {}", fmt_size(size)),
                    None => format!("stream {path} {}", fmt_size(size)),
                };
                for rep in 0..reps {
                    prog.show(&format!("{what}: baseline {}/{}", rep + 1, reps));
                    hosts.base.push(host(c));
                    let b = baseline_stream(path, size, burst, warm, dur, c)?;
                    base.push(b.msgs_per_s());
                    base_deliv.push(b.delivered());
                    if !c.baseline_only {
                        prog.show(&format!("{what}: unet {}/{}", rep + 1, reps));
                        hosts.unet.push(host(c));
                        let cfg = unet_paths::Run {
                            path,
                            size,
                            burst,
                            batch: a.batch as usize,
                            warmup: 0,
                            iters: 0,
                            limit: dur,
                            warmup_time: warm,
                            pin: c.pin,
                            max_datagram: c.max_datagram,
                            spin_us: c.spin_us,
                            counters: c.counters,
                            applet: applet.clone(),
                            buffered: a.buffered.map(|b| b as u64),
                        };
                        let u = unet_paths::stream(&cfg)?;
                        un.push(u.msgs_per_s());
                        un_deliv.push(u.delivered());
                    }
                }
                prog.clear();
                let mmsgs: Vec<f64> = base.iter().map(|v| v / 1e6).collect();
                note_if_unsteady(&what, path.baseline(), &mmsgs, "Mmsg/s");
                let hosts = c.host_floor.then(|| hosts.placed(&un, &base));
                let row = StreamRow {
                    path: match (a.buffered.is_some(), path) {
                        (false, p) => p.name(),
                        (true, PathArg::Udp) => "udp+vbuf",
                        (true, PathArg::Engine) => "engine+vbuf",
                        (true, PathArg::Direct) => "direct+vbuf",
                    },
                    applet: label,
                    size,
                    burst,
                    batch: a.batch as usize,
                    msgs_per_s: (!c.baseline_only).then(|| median_f64(&un)),
                    baseline: path.baseline(),
                    baseline_msgs_per_s: median_f64(&base),
                    runs: un,
                    baseline_runs: base,
                    delivered: median_of_all(&un_deliv),
                    baseline_delivered: median_of_all(&base_deliv),
                    hosts,
                    load: c.load,
                };
                if c.json {
                    println!("{}", row.json());
                } else {
                    report::stream_line(&row, with_applet);
                }
                rows.push(row);
            }
        }
    }
    match &c.svg {
        Some(f) => report::stream_svg(&rows, a.figure6, f),
        None => Ok(()),
    }
}

/// The host floor before a run, if `--host-floor` asks for it (None
/// too when the probe had no figure).
fn host(c: &Common) -> Option<f64> {
    if c.host_floor {
        host_floor::probe()
    } else {
        None
    }
}

/// The host floors taken before each run of a point, by kind of run.
#[derive(Default)]
struct Hosts {
    unet: Vec<Option<f64>>,
    base: Vec<Option<f64>>,
    forwarder: Vec<Option<f64>>,
}

impl Hosts {
    /// What a row reports of them: each run's floor and the ratio of unet's
    /// runs (`runs`, one figure each) to the baseline's (`base`) paired by
    /// placement.
    fn placed(self, runs: &[f64], base: &[f64]) -> HostFloors {
        HostFloors {
            ratio_placed: stats::placed_ratio(runs, &self.unet, base, &self.base),
            unet: self.unet,
            baseline: self.base,
            forwarder: self.forwarder,
        }
    }
}

fn baseline_pingpong(
    path: PathArg,
    size: usize,
    warm: usize,
    iters: usize,
    limit: Duration,
    c: &Common,
) -> Res<Samples> {
    match path {
        PathArg::Udp => {
            let s = udp_raw::socket().map_err(|e| format!("raw UDP socket: {e}"))?;
            let ch = spawn_child(ChildKind::UdpPingpong, size, 0, &[], None, c.pin)?;
            let peer: SocketAddr = ch.info.parse().map_err(|_| "child sent a bad address")?;
            let r = udp_raw::pingpong(&s, peer, size, warm, iters, limit)
                .map_err(|e| format!("raw UDP ping-pong: {e}"));
            ch.wait(r)
        }
        PathArg::Direct | PathArg::Engine => {
            let g = Geometry::new(size, size, c.ring_bytes, c.floor_align);
            let shm = Shm::create(g.total_len()).map_err(|e| format!("shared memory: {e}"))?;
            let extra = ["--geom".to_string(), g.to_arg()];
            let ch = spawn_child(ChildKind::FloorPingpong, size, 0, &extra, Some(&shm), c.pin)?;
            let r = floor::pingpong(&shm, g, (size, warm, iters), limit, || {})
                .map_err(|e| e.to_string());
            ch.wait(r)
        }
    }
}

/// The forwarder floor's ping-pong (the engine path's fair baseline).
fn forwarder_pingpong(
    (size, warm, iters): (usize, usize, usize),
    limit: Duration,
    c: &Common,
) -> Res<Samples> {
    let g = Geometry::new(size, size, c.ring_bytes, c.floor_align);
    let shm =
        |who: &str| Shm::create(g.total_len()).map_err(|e| format!("shared memory ({who}): {e}"));
    let (a, b) = (shm("parent")?, shm("child")?);
    let extra = ["--geom".to_string(), g.to_arg()];
    let ch = spawn_child(
        ChildKind::ForwarderPingpong,
        size,
        0,
        &extra,
        Some(&b),
        c.pin,
    )?;
    let r = forwarder::pingpong((&a, &b), g, (size, warm, iters), limit).map_err(|e| e.to_string());
    ch.wait(r)
}

/// The relay floor's ping-pong (the UDP path's third-party baseline): raw
/// UDP through a third process that relays each datagram
/// ([`udp_raw::relay_child`]) to the echoing child and back.
fn relay_pingpong(
    (size, warm, iters): (usize, usize, usize),
    limit: Duration,
    c: &Common,
) -> Res<Samples> {
    let s = udp_raw::socket().map_err(|e| format!("raw UDP socket: {e}"))?;
    let echo = spawn_child(ChildKind::UdpPingpong, size, 0, &[], None, c.pin)?;
    let extra = ["--peer".to_string(), echo.info.clone()];
    let relay = match spawn_child(ChildKind::UdpRelay, size, 0, &extra, None, c.pin) {
        Ok(r) => r,
        Err(e) => return echo.wait(Err(e)),
    };
    let peer: Res<SocketAddr> = relay
        .info
        .parse()
        .map_err(|_| "the relay sent a bad address".to_string());
    let r = peer.and_then(|p| {
        udp_raw::pingpong(&s, p, size, warm, iters, limit)
            .map_err(|e| format!("relayed UDP ping-pong: {e}"))
    });
    echo.wait(relay.wait(r))
}

fn baseline_stream(
    path: PathArg,
    size: usize,
    burst: usize,
    warm: Duration,
    dur: Duration,
    c: &Common,
) -> Res<StreamRun> {
    match path {
        PathArg::Udp => {
            let s = udp_raw::socket().map_err(|e| format!("raw UDP socket: {e}"))?;
            let ch = spawn_child(ChildKind::UdpStream, size, burst, &[], None, c.pin)?;
            let peer: SocketAddr = ch.info.parse().map_err(|_| "child sent a bad address")?;
            let r = udp_raw::stream(&s, peer, size, burst, warm, dur)
                .map_err(|e| format!("raw UDP stream: {e}"));
            ch.wait(r)
        }
        PathArg::Direct | PathArg::Engine => {
            let g = Geometry::new(size, 8, c.ring_bytes, c.floor_align);
            let shm = Shm::create(g.total_len()).map_err(|e| format!("shared memory: {e}"))?;
            let extra = ["--geom".to_string(), g.to_arg()];
            let ch = spawn_child(
                ChildKind::FloorStream,
                size,
                burst,
                &extra,
                Some(&shm),
                c.pin,
            )?;
            let r = floor::stream(&shm, g, size, burst, warm, dur).map_err(|e| e.to_string());
            ch.wait(r)
        }
    }
}

fn ready(info: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "ready {info}");
    let _ = o.flush();
}

fn child(a: ChildArgs) -> Res<()> {
    if let Some(cpu) = a.pin_cpu {
        pin_to(cpu)?;
    }
    match a.kind {
        ChildKind::FloorPingpong | ChildKind::FloorStream | ChildKind::ForwarderPingpong => {
            let fd = a.fd.ok_or("--fd is required")?;
            let g = Geometry::parse(a.geom.as_deref().ok_or("--geom is required")?)?;
            let shm = Shm::open(fd).map_err(|e| format!("mapping shared memory: {e}"))?;
            ready("");
            let r = match a.kind {
                ChildKind::FloorPingpong => floor::pingpong_child(&shm, g, a.size),
                ChildKind::ForwarderPingpong => forwarder::pingpong_child(&shm, g, a.size),
                _ => floor::stream_child(&shm, g, a.size, a.burst),
            };
            r.map_err(|e| e.to_string())
        }
        ChildKind::UdpPingpong | ChildKind::UdpStream => {
            let s = udp_raw::socket().map_err(|e| format!("raw UDP socket: {e}"))?;
            let addr = s.local_addr().map_err(|e| e.to_string())?;
            ready(&addr.to_string());
            let r = if a.kind == ChildKind::UdpPingpong {
                udp_raw::pingpong_child(&s, a.size)
            } else {
                udp_raw::stream_child(&s)
            };
            r.map_err(|e| format!("raw UDP child: {e}"))
        }
        ChildKind::UdpRelay => {
            let peer: SocketAddr = a
                .peer
                .as_deref()
                .ok_or("--peer is required")?
                .parse()
                .map_err(|_| "--peer: not an address")?;
            let s = udp_raw::socket().map_err(|e| format!("raw UDP socket: {e}"))?;
            let addr = s.local_addr().map_err(|e| e.to_string())?;
            ready(&addr.to_string());
            udp_raw::relay_child(&s, peer).map_err(|e| format!("UDP relay: {e}"))
        }
        ChildKind::Spin => super::child::spin(ready),
        ChildKind::UnetPingpong | ChildKind::UnetStream => unet_paths::child(&a, ready),
        ChildKind::ViaPingpong | ChildKind::ViaStream => via::child(&a, ready),
    }
}
