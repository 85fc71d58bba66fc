//! `unet bench via`: VIA between two VIs, beside unet's endpoint path
//! that carries the same messages, measured in the same invocation.
//!
//! `--path remote`: two VIs in two processes, each with an engine of its
//! own on UDP loopback, connected by discriminator from one engine to the
//! other; the engines carry the messages with the VI's reliability level.
//! For each size, runs alternate a TCP loopback baseline (a `TCP_NODELAY`
//! ping-pong, a bulk stream; see [`super::tcp`]) and a VI of each level,
//! the unreliable one always among them: each reliable row also says how
//! it compares with the unreliable one run beside it. Streams add each
//! reliable level with `--loss-pct` of the datagrams dropped by each
//! engine (seeded), against the same level without loss. An unreliable
//! stream's figure is what was delivered.
//!
//! `--path local`: two VIs in two processes
//! of this host, connected by discriminator through an embedded engine
//! and then joined by a direct ring (no engine in the data path). The
//! baseline is unet's endpoint direct path, run by the same code as
//! `unet bench pingpong|stream --path direct`, with the same placement:
//! this process starts an embedded engine with a control socket in a
//! fresh temporary directory, and a child (`unet bench __child via-…`)
//! connects to it; `--pin` puts this process on core 0 and the child on
//! core 1. Runs alternate baseline, VI, baseline, VI… so that both see
//! the same noise. A ping-pong's runs are turns of one pair of processes:
//! the child echoes on an endpoint of its own until STOP, then on its VI
//! until STOP, and so on (END on the endpoint ends it), so that the
//! baseline and the VI see the same placement on the host's cores; a
//! stream's runs are a pair of processes each.
//!
//! Ping-pong: each side keeps receive descriptors posted in a registered
//! region and posts a new one for each that completes (this side while
//! its next message travels; the echoing side once the echo, sent from
//! the buffer it landed in, has completed). Each round trip is timed on
//! its own ([`stats::time_round_trips`]); the figure is the median over
//! the round trips of all runs, as `unet bench pingpong` reports it.
//!
//! Stream: the receiver keeps `--window` receive descriptors posted and
//! posts a new one for each that completes; the sender keeps `--window`
//! sends outstanding (its send queue full) from one registered buffer, as
//! the endpoint sender sends one buffer over and over, and takes their
//! completions back. The protocol is `unet bench stream`'s: a warm-up,
//! then SYNC (the receiver zeroes its count), the timed part, then STOP,
//! answered with the bytes placed into the receiver's registered memory
//! since SYNC; the time runs until that answer. The figure is the median
//! over runs of those bytes per second.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use serde_json::{json, Value};
use unet::{
    Channel, ChannelOptions, Endpoint, EndpointAddr, EndpointConfig, Engine, EngineConfig,
    MemRegion, PathChoice, PostError, Reliability, Session, Vi, ViAttributes, ViCompletion,
    ViError, ViSeg, WaitError, VI_MAX_TRANSFER,
};
use unet_engine::wire::udp::LOOPBACK_DATAGRAM;

use super::child::{
    self, spawn_child, stop_len, ChildArgs, ChildKind, ChildProc, PathArg, TempDir, DATA, PATIENCE,
    STOP, SYNC,
};
use super::floor::StreamRun;
use super::report::{self, Progress};
use super::stats::{self, fmt_size, median_f64, Samples};
use super::tcp;
use super::unet_paths;

type Res<T> = Result<T, String>;

/// Round trip and one-way bandwidth between two VIs.
#[derive(clap::Args)]
#[command(after_help = "\
Runs alternate the baseline and the VIs: direct, VI, direct, VI… (--runs \
pairs); a stream's run is this process and a child it starts, a local \
ping-pong's runs are turns of one such pair (the same placement on the \
cores for both). Baseline: unet's endpoint direct path (the code of `unet \
bench pingpong|stream --path direct`). via-pingpong: each side keeps \
receive descriptors posted in a registered region, reposting each that \
completes; every round trip timed on its own, median over all round trips \
of all runs, ratio = VI / direct (lower is better; the issue's target for \
64 B: <= 1.15). via-stream: the receiver keeps --window receives posted, the \
sender --window sends outstanding; GB/s delivered into the receiver's \
registered memory, median of the runs, ratio = VI / direct (higher is \
better; target >= 0.9). ratio_paired (JSON, and the last column) is the \
median of the ratios of each VI run to the direct run beside it. \
--path remote: the baseline is TCP loopback (a TCP_NODELAY ping-pong, a bulk \
stream) and runs alternate TCP, unreliable, then each other level asked for; \
reliable rows add vs_unreliable (ratio of medians, and paired; target for \
delivery: round trip <= 1.2, stream >= 0.9), and each reliable stream is run \
again with --loss-pct dropped by each engine, its row's baseline being the \
same level without loss (target >= 0.5).")]
pub struct Args {
    /// Where the two VIs are: `local`, two processes of this host joined
    /// by a direct ring (baseline: the endpoint direct path); `remote`,
    /// two processes with an engine each, over UDP loopback (baseline: TCP
    /// loopback).
    #[arg(long, value_enum, default_value = "local")]
    pub path: ViaPath,
    /// The VIs' reliability level; `all` measures each in turn.
    #[arg(long, value_enum, default_value = "delivery")]
    pub reliability: RelArg,
    /// Ping-pong message sizes (comma list; 8, 64, 1K, 4K forms; at most
    /// 256K, the most a VI carries).
    #[arg(long, value_delimiter = ',', value_parser = stats::parse_size,
          default_value = "64,4096")]
    pub sizes: Vec<usize>,
    /// Stream message sizes (comma list, as --sizes).
    #[arg(long, value_delimiter = ',', value_parser = stats::parse_size,
          default_value = "4096")]
    pub stream_sizes: Vec<usize>,
    /// Interleaved pairs of runs (direct, VI) per point [default: 5; 1
    /// with --quick].
    #[arg(long)]
    pub runs: Option<usize>,
    /// Stream: receive descriptors the receiver keeps posted, and sends the
    /// sender keeps outstanding (its send queue's length).
    #[arg(long, default_value_t = 256,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub window: u32,
    /// Ping-pong: timed round trips per run for sizes up to 4 KiB (scaled
    /// down above) [default: 20000; 300 with --quick].
    #[arg(long)]
    pub iters: Option<usize>,
    /// Ping-pong: untimed round trips before each run [default: 1000; 30
    /// with --quick].
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Ping-pong: upper bound on the timed part of each run, in
    /// milliseconds [default: 500; 50 with --quick].
    #[arg(long)]
    pub time_ms: Option<u64>,
    /// Stream: length of the timed part of each run, in milliseconds
    /// [default: 200; 20 with --quick].
    #[arg(long)]
    pub stream_ms: Option<u64>,
    /// Stream: warm-up before each run, in milliseconds [default: 30; 5
    /// with --quick].
    #[arg(long)]
    pub stream_warmup_ms: Option<u64>,
    /// Remote streams: the share of datagrams each engine drops on purpose
    /// (seeded) in the runs of each reliable level under loss, in percent
    /// (0: no such runs).
    #[arg(long, default_value_t = 1.0,
          value_parser = parse_pct)]
    pub loss_pct: f64,
    /// Pin this process to core 0 and the other to core 1.
    #[arg(long)]
    pub pin: bool,
    /// Print one JSON object per line per measured point.
    #[arg(long)]
    pub json: bool,
    /// Short runs (for tests): the defaults marked "with --quick".
    #[arg(long)]
    pub quick: bool,
}

fn parse_pct(s: &str) -> Res<f64> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=50.0).contains(&p) => Ok(p),
        _ => Err(format!("{s:?} is not a percentage from 0 to 50")),
    }
}

/// Where the two VIs are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ViaPath {
    /// Two processes of this host, one direct ring each way.
    Local,
    /// Two engines over UDP loopback.
    #[value(alias = "udp")]
    Remote,
}

impl ViaPath {
    fn name(self) -> &'static str {
        match self {
            ViaPath::Local => "local",
            ViaPath::Remote => "remote",
        }
    }

    /// The endpoint path measured beside it.
    fn baseline(self) -> PathArg {
        match self {
            ViaPath::Local => PathArg::Direct,
            ViaPath::Remote => PathArg::Udp,
        }
    }
}

/// `--reliability`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RelArg {
    /// Unreliable: a send completes once the message has left.
    Unreliable,
    /// Reliable delivery: a send completes once the message reached the
    /// receiving side.
    Delivery,
    /// Reliable reception: a send completes once the receiver placed the
    /// message into a posted buffer.
    Reception,
    /// Each of the three in turn.
    All,
}

impl RelArg {
    fn levels(self) -> Vec<Reliability> {
        match self {
            RelArg::Unreliable => vec![Reliability::Unreliable],
            RelArg::Delivery => vec![Reliability::ReliableDelivery],
            RelArg::Reception => vec![Reliability::ReliableReception],
            RelArg::All => vec![
                Reliability::Unreliable,
                Reliability::ReliableDelivery,
                Reliability::ReliableReception,
            ],
        }
    }
}

fn rel_name(r: Reliability) -> &'static str {
    match r {
        Reliability::Unreliable => "unreliable",
        Reliability::ReliableDelivery => "delivery",
        Reliability::ReliableReception => "reception",
    }
}

/// `unet bench stream`'s default `--batch`: the endpoint stream baseline
/// hands its messages over 256 at a time, as `stream --path direct` does.
const ENDPOINT_BATCH: usize = 256;
/// Ping-pong: receive descriptors each side keeps posted.
const PING_POSTED: usize = 4;
/// Stream sender: receive descriptors posted for the receiver's answers.
const CTRL_POSTED: usize = 4;
/// Descriptor numbers of the stream sender's sends.
const DATA_ID: u64 = 0;
const CTRL_ID: u64 = 1;
/// Bytes of the receiver's answer to SYNC and STOP: kind, number, u64
/// count.
const ANSWER: usize = 10;
/// A stream's control message without an answer this long is sent again
/// (an unreliable VI may lose it).
const RESEND: Duration = Duration::from_millis(200);

/// What the options make of a run.
struct Settings {
    runs: usize,
    iters: usize,
    warmup: usize,
    limit: Duration,
    stream: Duration,
    stream_warmup: Duration,
    window: usize,
    pin: bool,
}

impl Settings {
    fn of(a: &Args) -> Res<Settings> {
        let q = a.quick;
        let pick =
            |v: Option<u64>, normal: u64, quick: u64| v.unwrap_or(if q { quick } else { normal });
        let runs = a.runs.unwrap_or(if q { 1 } else { 5 });
        if runs == 0 {
            return Err("--runs must be at least 1".into());
        }
        for &s in a.sizes.iter().chain(&a.stream_sizes) {
            if s > VI_MAX_TRANSFER {
                return Err(format!(
                    "size {}: a VI carries messages of at most {}",
                    fmt_size(s),
                    fmt_size(VI_MAX_TRANSFER)
                ));
            }
        }
        let iters = a.iters.unwrap_or(if q { 300 } else { 20_000 });
        if iters == 0 {
            return Err("--iters must be at least 1".into());
        }
        Ok(Settings {
            runs,
            iters,
            warmup: a.warmup.unwrap_or(if q { 30 } else { 1_000 }),
            limit: Duration::from_millis(pick(a.time_ms, 500, 50)),
            stream: Duration::from_millis(pick(a.stream_ms, 200, 20)),
            stream_warmup: Duration::from_millis(pick(a.stream_warmup_ms, 30, 5)),
            window: a.window as usize,
            pin: a.pin,
        })
    }
}

/// One point: a path, a reliability level and a size.
struct Point<'a> {
    path: ViaPath,
    reliability: Reliability,
    size: usize,
    s: &'a Settings,
}

impl Point<'_> {
    /// Ping-pong: timed round trips, and untimed ones before.
    fn iters(&self) -> (usize, usize) {
        let iters = stats::iters_for(self.s.iters, self.size);
        (iters, self.s.warmup.min(iters))
    }

    /// The endpoint stream that is a local stream's baseline (`unet bench
    /// stream --path direct` with its defaults).
    fn endpoint_stream(&self) -> unet_paths::Run {
        unet_paths::Run {
            path: self.path.baseline(),
            size: self.size,
            burst: 0,
            batch: ENDPOINT_BATCH,
            warmup: 0,
            iters: 0,
            limit: self.s.stream,
            warmup_time: self.s.stream_warmup,
            pin: self.s.pin,
            max_datagram: LOOPBACK_DATAGRAM,
            spin_us: None,
            applet: None,
            counters: false,
            buffered: None,
        }
    }

    fn what(&self, bench: &str) -> String {
        format!(
            "{bench} {} {} {}",
            self.path.name(),
            rel_name(self.reliability),
            fmt_size(self.size)
        )
    }
}

/// One row: a VI figure beside its baseline.
struct Row {
    bench: &'static str,
    path: ViaPath,
    reliability: Reliability,
    size: usize,
    /// Median µs per round trip, or GB/s.
    value: f64,
    unit: &'static str,
    baseline: &'static str,
    baseline_value: f64,
    /// Each run's figure (a ping-pong run's median), in order.
    value_runs: Vec<f64>,
    baseline_runs: Vec<f64>,
    /// Ping-pong: 99th percentiles, and round trips timed.
    p99: Option<(f64, f64)>,
    samples: Option<(usize, usize)>,
    /// Stream: the window.
    window: Option<usize>,
    /// Remote, reliable levels: this level against the unreliable one
    /// measured beside it (ratio of medians, median of paired ratios).
    vs_unreliable: Option<(f64, f64)>,
    /// Remote streams: the share of datagrams each engine dropped on
    /// purpose, in percent (the baseline is then the same VIs with none).
    loss_pct: Option<f64>,
}

impl Row {
    fn ratio(&self) -> f64 {
        self.value / self.baseline_value
    }

    /// The median of the ratios of each VI run to the baseline run beside
    /// it ([`stats::paired_ratio`]).
    fn paired_ratio(&self) -> f64 {
        stats::paired_ratio(&self.value_runs, &self.baseline_runs).unwrap_or(f64::NAN)
    }

    fn json(&self) -> Value {
        json!({
            "bench": self.bench,
            "path": self.path.name(),
            "size": self.size,
            "reliability": rel_name(self.reliability),
            "value": self.value,
            "unit": self.unit,
            "baseline": self.baseline,
            "baseline_value": self.baseline_value,
            "ratio": self.ratio(),
            "ratio_paired": self.paired_ratio(),
            "runs": self.value_runs.len(),
            "value_runs": self.value_runs,
            "baseline_value_runs": self.baseline_runs,
            "p99": self.p99.map(|p| p.0),
            "baseline_p99": self.p99.map(|p| p.1),
            "samples": self.samples.map(|s| s.0),
            "baseline_samples": self.samples.map(|s| s.1),
            "window": self.window,
            "vs_unreliable": self.vs_unreliable.map(|v| v.0),
            "vs_unreliable_paired": self.vs_unreliable.map(|v| v.1),
            "loss_pct": self.loss_pct,
        })
    }

    fn header() {
        println!(
            "{:<12} {:<6} {:<11} {:>6}  {:>12} {:>8}  {:<8} {:>12} {:>8}  {:>6} {:>6}  note",
            "bench",
            "path",
            "reliability",
            "size",
            "VI",
            "p99",
            "baseline",
            "value",
            "p99",
            "ratio",
            "paired"
        );
    }

    fn line(&self) {
        let p99 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3}"));
        let mut note = Vec::new();
        if let Some(l) = self.loss_pct {
            note.push(format!(
                "{l}% loss each way, baseline: the same VIs with none"
            ));
        }
        if let Some((r, pr)) = self.vs_unreliable {
            note.push(format!("vs unreliable {r:.2} (paired {pr:.2})"));
        }
        println!(
            "{:<12} {:<6} {:<11} {:>6}  {:>12} {:>8}  {:<8} {:>12} {:>8}  {:>6.2} {:>6.2}  {}",
            self.bench,
            self.path.name(),
            rel_name(self.reliability),
            fmt_size(self.size),
            format!("{:.3} {}", self.value, self.unit),
            p99(self.p99.map(|p| p.0)),
            self.baseline,
            format!("{:.3} {}", self.baseline_value, self.unit),
            p99(self.p99.map(|p| p.1)),
            self.ratio(),
            self.paired_ratio(),
            note.join("; ")
        );
    }
}

pub fn run(a: Args) -> ExitCode {
    report::finish(bench(a))
}

fn bench(a: Args) -> Res<()> {
    let s = Settings::of(&a)?;
    report::warn_if_busy();
    if s.pin {
        child::pin_to(0)?;
    }
    let prog = Progress::new();
    if !a.json {
        Row::header();
    }
    let emit = |r: Row| {
        if a.json {
            println!("{}", r.json());
        } else {
            r.line();
        }
    };
    if a.path == ViaPath::Remote {
        return remote(&a, &s, &prog, &emit);
    }
    for reliability in a.reliability.levels() {
        for &size in &a.sizes {
            let p = Point {
                path: a.path,
                reliability,
                size,
                s: &s,
            };
            emit(pingpong_row(&p, &prog)?);
        }
        for &size in &a.stream_sizes {
            let p = Point {
                path: a.path,
                reliability,
                size,
                s: &s,
            };
            emit(stream_row(&p, &prog)?);
        }
    }
    Ok(())
}

/// `--path remote`: for each size, runs alternate the TCP baseline and a
/// VI of each level (unreliable always among them, the reference of the
/// reliable ones); streams add each reliable level under seeded loss.
fn remote(a: &Args, s: &Settings, prog: &Progress, emit: &dyn Fn(Row)) -> Res<()> {
    let mut levels = a.reliability.levels();
    if !levels.contains(&Reliability::Unreliable) {
        levels.insert(0, Reliability::Unreliable);
    }
    let point = |reliability, size| Point {
        path: ViaPath::Remote,
        reliability,
        size,
        s,
    };
    let runs = s.runs;
    for &size in &a.sizes {
        let what = format!("via-pingpong remote {}", fmt_size(size));
        let (iters, warmup) = point(Reliability::Unreliable, size).iters();
        let mut tcp = (Samples::default(), Vec::new());
        let mut vis: Vec<(Samples, Vec<f64>)> = levels.iter().map(|_| Default::default()).collect();
        for rep in 0..runs {
            prog.show(&format!("{what}: TCP {}/{runs}", rep + 1));
            let t = tcp::pingpong(size, iters, warmup, s.limit, s.pin)?;
            tcp.1.push(t.median_us());
            tcp.0.extend(t);
            for (i, &r) in levels.iter().enumerate() {
                prog.show(&format!("{what}: {} {}/{runs}", rel_name(r), rep + 1));
                let v = vi_pingpong(&point(r, size))?;
                vis[i].1.push(v.median_us());
                vis[i].0.extend(v);
            }
        }
        prog.clear();
        report::note_if_unsteady(&what, "TCP", &tcp.1, "us (median of each)");
        let unrel = (vis[0].0.median_us(), vis[0].1.clone());
        for (i, &r) in levels.iter().enumerate() {
            let (v, v_runs) = (&vis[i].0, &vis[i].1);
            emit(Row {
                bench: "via-pingpong",
                path: ViaPath::Remote,
                reliability: r,
                size,
                value: v.median_us(),
                unit: "us",
                baseline: "tcp",
                baseline_value: tcp.0.median_us(),
                value_runs: v_runs.clone(),
                baseline_runs: tcp.1.clone(),
                p99: Some((v.p99_us(), tcp.0.p99_us())),
                samples: Some((v.ns.len(), tcp.0.ns.len())),
                window: None,
                vs_unreliable: (i > 0).then(|| vs(v.median_us(), unrel.0, v_runs, &unrel.1)),
                loss_pct: None,
            });
        }
    }
    let loss_ppm = (a.loss_pct * 10_000.0).round() as u32;
    for &size in &a.stream_sizes {
        let what = format!("via-stream remote {}", fmt_size(size));
        let gb = |r: &StreamRun| r.msgs_per_s() * size as f64 / 1e9;
        let mut tcp_runs = Vec::new();
        let mut clean: Vec<Vec<f64>> = levels.iter().map(|_| Vec::new()).collect();
        let mut lossy: Vec<Vec<f64>> = levels.iter().map(|_| Vec::new()).collect();
        for rep in 0..runs {
            prog.show(&format!("{what}: TCP {}/{runs}", rep + 1));
            tcp_runs.push(gb(&tcp::stream(size, s.stream_warmup, s.stream, s.pin)?));
            for (i, &r) in levels.iter().enumerate() {
                prog.show(&format!("{what}: {} {}/{runs}", rel_name(r), rep + 1));
                clean[i].push(gb(&vi_stream(&point(r, size), 0)?));
                if r != Reliability::Unreliable && loss_ppm > 0 {
                    prog.show(&format!(
                        "{what}: {} with {}% loss {}/{runs}",
                        rel_name(r),
                        a.loss_pct,
                        rep + 1
                    ));
                    lossy[i].push(gb(&vi_stream(&point(r, size), loss_ppm)?));
                }
            }
        }
        prog.clear();
        report::note_if_unsteady(&what, "TCP", &tcp_runs, "GB/s");
        let row = |r, value_runs: &[f64], baseline, baseline_runs: &[f64]| Row {
            bench: "via-stream",
            path: ViaPath::Remote,
            reliability: r,
            size,
            value: median_f64(value_runs),
            unit: "GB/s",
            baseline,
            baseline_value: median_f64(baseline_runs),
            value_runs: value_runs.to_vec(),
            baseline_runs: baseline_runs.to_vec(),
            p99: None,
            samples: None,
            window: Some(s.window),
            vs_unreliable: None,
            loss_pct: None,
        };
        for (i, &r) in levels.iter().enumerate() {
            let mut row_clean = row(r, &clean[i], "tcp", &tcp_runs);
            if i > 0 {
                row_clean.vs_unreliable = Some(vs(
                    median_f64(&clean[i]),
                    median_f64(&clean[0]),
                    &clean[i],
                    &clean[0],
                ));
            }
            emit(row_clean);
        }
        for (i, &r) in levels.iter().enumerate() {
            if !lossy[i].is_empty() {
                let mut row_lossy = row(r, &lossy[i], "no loss", &clean[i]);
                row_lossy.loss_pct = Some(a.loss_pct);
                emit(row_lossy);
            }
        }
    }
    Ok(())
}

/// A figure against a reference measured beside it: the ratio of the
/// medians and the median of the run-by-run ratios.
fn vs(value: f64, reference: f64, runs: &[f64], ref_runs: &[f64]) -> (f64, f64) {
    let paired = stats::paired_ratio(runs, ref_runs).unwrap_or(f64::NAN);
    (value / reference, paired)
}

fn pingpong_row(p: &Point, prog: &Progress) -> Res<Row> {
    let what = p.what("via-pingpong");
    let blocks = local_pingpong(p, &|rep, kind| {
        prog.show(&format!("{what}: {kind} {}/{}", rep + 1, p.s.runs));
    })?;
    let (mut base, mut vi) = (Samples::default(), Samples::default());
    let (mut base_runs, mut vi_runs) = (Vec::new(), Vec::new());
    for (b, v) in blocks {
        base_runs.push(b.median_us());
        base.extend(b);
        vi_runs.push(v.median_us());
        vi.extend(v);
    }
    prog.clear();
    report::note_if_unsteady(&what, "direct path", &base_runs, "us (median of each)");
    Ok(Row {
        bench: "via-pingpong",
        path: p.path,
        reliability: p.reliability,
        size: p.size,
        value: vi.median_us(),
        unit: "us",
        baseline: p.path.baseline().name(),
        baseline_value: base.median_us(),
        value_runs: vi_runs,
        baseline_runs: base_runs,
        p99: Some((vi.p99_us(), base.p99_us())),
        samples: Some((vi.ns.len(), base.ns.len())),
        window: None,
        vs_unreliable: None,
        loss_pct: None,
    })
}

fn stream_row(p: &Point, prog: &Progress) -> Res<Row> {
    let what = p.what("via-stream");
    let runs = p.s.runs;
    let gb = |r: &StreamRun| r.msgs_per_s() * p.size as f64 / 1e9;
    let (mut base_runs, mut vi_runs) = (Vec::new(), Vec::new());
    for rep in 0..runs {
        prog.show(&format!("{what}: direct {}/{runs}", rep + 1));
        base_runs.push(gb(&unet_paths::stream(&p.endpoint_stream())?));
        prog.show(&format!("{what}: VI {}/{runs}", rep + 1));
        vi_runs.push(gb(&vi_stream(p, 0)?));
    }
    prog.clear();
    report::note_if_unsteady(&what, "direct path", &base_runs, "GB/s");
    Ok(Row {
        bench: "via-stream",
        path: p.path,
        reliability: p.reliability,
        size: p.size,
        value: median_f64(&vi_runs),
        unit: "GB/s",
        baseline: p.path.baseline().name(),
        baseline_value: median_f64(&base_runs),
        value_runs: vi_runs,
        baseline_runs: base_runs,
        p99: None,
        samples: None,
        window: Some(p.s.window),
        vs_unreliable: None,
        loss_pct: None,
    })
}

// -------------------------------------------------------------------------
// The VI runs
// -------------------------------------------------------------------------

fn err(what: &str) -> impl Fn(unet::Error) -> String + '_ {
    move |e| format!("unet {what}: {e}")
}

fn post_err(what: &'static str) -> impl Fn(PostError) -> String {
    move |e| format!("VI {what}: {e}")
}

/// The number and length of a completed descriptor, or why it failed.
#[inline]
fn done(c: ViCompletion, what: &str) -> Res<(u64, usize)> {
    match c.status {
        Ok(n) => Ok((c.id, n)),
        Err(e) => Err(format!("VI {what} descriptor {} failed: {e}", c.id)),
    }
}

/// The next completed receive.
#[inline]
fn recv_next(vi: &mut Vi) -> Res<(u64, usize)> {
    let c = vi
        .recv_wait(Some(PATIENCE))
        .map_err(|e| format!("VI receive: {e}"))?;
    done(c, "receive")
}

/// The next completed send.
fn send_next(vi: &mut Vi) -> Res<(u64, usize)> {
    let c = vi
        .send_wait(Some(PATIENCE))
        .map_err(|e| format!("VI send: {e}"))?;
    done(c, "send")
}

/// `n` rounded up to a cache line.
fn line_up(n: usize) -> usize {
    n.next_multiple_of(64)
}

/// Receive buffers in a region: `n` slots of `stride` bytes from `base`,
/// each posted with its index as the descriptor number.
struct Slots<'r> {
    region: &'r MemRegion,
    base: usize,
    stride: usize,
    n: usize,
}

impl<'r> Slots<'r> {
    fn offset(&self, k: u64) -> usize {
        self.base + k as usize * self.stride
    }

    #[inline]
    fn post(&self, vi: &mut Vi, k: u64) -> Res<()> {
        let seg = [ViSeg::new(self.region, self.offset(k), self.stride)];
        vi.post_recv(k, &seg).map_err(post_err("post_recv"))
    }

    fn post_all(&self, vi: &mut Vi) -> Res<()> {
        (0..self.n as u64).try_for_each(|k| self.post(vi, k))
    }
}

/// This process's side of a run. Field order is drop order: session,
/// engine, directory.
struct Side {
    session: Session,
    _engine: Engine,
    /// Local runs: the directory of the engine's control socket.
    dir: Option<TempDir>,
    /// Remote runs: the loss injected by each engine, in parts per million.
    drop_ppm: u32,
}

/// Seeds of the two engines' loss injectors (a remote run's losses are the
/// same from one run to the next).
const PARENT_SEED: u64 = 0x5eed_0001;
const CHILD_SEED: u64 = 0x5eed_0002;

impl Side {
    /// Local: an embedded engine with a control socket in a fresh
    /// directory, which the child connects to. Remote: an embedded engine
    /// on UDP loopback dropping `drop_ppm` of what it sends; the child
    /// starts its own.
    fn start(path: ViaPath, drop_ppm: u32) -> Res<Side> {
        let (cfg, dir) = match path {
            ViaPath::Local => {
                let dir = TempDir::new()?;
                let cfg = EngineConfig {
                    control_socket: Some(dir.0.join("control")),
                    ..EngineConfig::default()
                };
                (cfg, Some(dir))
            }
            ViaPath::Remote => (remote_engine(drop_ppm, PARENT_SEED), None),
        };
        let engine = Engine::start(cfg).map_err(|e| format!("starting the unet engine: {e}"))?;
        let session = Session::embedded(&engine).map_err(err("session"))?;
        Ok(Side {
            session,
            _engine: engine,
            dir,
            drop_ppm,
        })
    }

    /// Starts the child that plays the other VI (`posted`: the receives it
    /// keeps posted); it prints the discriminator it listens on (and, when
    /// remote, its engine's UDP address).
    fn spawn(&self, kind: ChildKind, size: usize, posted: usize, pin: bool) -> Res<ChildProc> {
        let mut extra = vec!["--batch".to_string(), posted.to_string()];
        match &self.dir {
            Some(d) => {
                extra.push("--socket".into());
                extra.push(d.0.join("control").display().to_string());
            }
            None => {
                extra.extend(["--path".into(), "udp".into(), "--drop-ppm".into()]);
                extra.push(self.drop_ppm.to_string());
            }
        }
        spawn_child(kind, size, 0, &extra, None, pin)
    }

    /// Connects a VI of `attrs` to the child's. The child's ready line is
    /// its discriminator, then its engine's UDP address (remote), or the
    /// id of an endpoint of its own (a local ping-pong): returned too.
    fn connect(&self, ch: &ChildProc, attrs: &ViAttributes) -> Res<(Vi, Option<u32>)> {
        let mut words = ch.info.split_whitespace();
        let tag: u64 = words
            .next()
            .and_then(|t| t.parse().ok())
            .ok_or("the child sent no discriminator")?;
        let (mut host, mut ep) = (None, None);
        if let Some(w) = words.next() {
            let bad = || format!("the child sent a bad address {w:?}");
            if self.dir.is_some() {
                ep = Some(w.parse().map_err(|_| bad())?);
            } else {
                host = Some(w.parse().map_err(|_| bad())?);
            }
        }
        let vi = self
            .session
            .vi_connect(host, tag, attrs, Some(PATIENCE))
            .map_err(err("vi_connect"))?;
        Ok((vi, ep))
    }

    fn register(&self, len: usize) -> Res<MemRegion> {
        self.session
            .register_memory(len)
            .map_err(err("register_memory"))
    }
}

/// The configuration of an engine of a remote run: UDP loopback, dropping
/// `drop_ppm` of the datagrams it sends (seeded).
fn remote_engine(drop_ppm: u32, seed: u64) -> EngineConfig {
    EngineConfig {
        udp_bind: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
        wire_drop_ppm: drop_ppm,
        wire_drop_seed: seed,
        ..EngineConfig::default()
    }
}

fn attrs(r: Reliability) -> ViAttributes {
    ViAttributes {
        reliability: r,
        ..ViAttributes::default()
    }
}

/// Ping-pong between two VIs (this process sends first), in a process
/// pair of its own (`--path remote`).
fn vi_pingpong(p: &Point) -> Res<Samples> {
    let side = Side::start(p.path, 0)?;
    let ch = side.spawn(ChildKind::ViaPingpong, p.size, PING_POSTED, p.s.pin)?;
    let (iters, warmup) = p.iters();
    let res = (|| {
        let mut vi = side.connect(&ch, &attrs(p.reliability))?.0;
        let mut pinger = Pinger::new(&side, &mut vi, p.size)?;
        let samples = pinger.block(&mut vi, warmup, iters, p.s.limit)?;
        pinger.stop(&mut vi, p.path)?;
        Ok(samples)
    })();
    ch.wait(res)
}

/// `--path local`: the endpoint direct path and the VIs measured in
/// turns by one pair of processes, `--runs` blocks of each (direct, VI,
/// direct, VI…): both see the same placement of the two processes on the
/// host's cores, which can change a round trip 3-4x between pairs of
/// processes. `show(block, kind)` tells which block runs. Returns each
/// turn's round trips, direct and VI.
fn local_pingpong(p: &Point, show: &dyn Fn(usize, &str)) -> Res<Vec<(Samples, Samples)>> {
    let side = Side::start(p.path, 0)?;
    let ch = side.spawn(ChildKind::ViaPingpong, p.size, PING_POSTED, p.s.pin)?;
    let (iters, warmup) = p.iters();
    let size = p.size;
    let res = (|| {
        let (mut vi, ep_id) = side.connect(&ch, &attrs(p.reliability))?;
        let ep_id = ep_id.ok_or("the child sent no endpoint")?;
        let mut ep = side
            .session
            .create_endpoint(EndpointConfig::default())
            .map_err(err("endpoint"))?;
        let c = ep
            .open_channel(
                EndpointAddr {
                    host: None,
                    id: ep_id,
                },
                ChannelOptions {
                    path: PathChoice::Direct,
                },
            )
            .map_err(err("open_channel"))?;
        let mut pinger = Pinger::new(&side, &mut vi, size)?;
        let mut turns = Vec::new();
        for rep in 0..p.s.runs {
            show(rep, "direct");
            let b = unet_paths::time_pingpong(&mut ep, c, size, warmup, iters, p.s.limit)?;
            // The child turns to its VI.
            send_ep(&mut ep, c, &vec![STOP; stop_len(size)])?;
            show(rep, "VI");
            let v = pinger.block(&mut vi, warmup, iters, p.s.limit)?;
            pinger.stop(&mut vi, p.path)?;
            turns.push((b, v));
        }
        send_ep(&mut ep, c, &vec![END; stop_len(size)])?;
        Ok(turns)
    })();
    ch.wait(res)
}

/// A message on the endpoint's direct channel (the ends of the
/// endpoint's turns).
fn send_ep(ep: &mut Endpoint, c: Channel, m: &[u8]) -> Res<()> {
    ep.send_blocking(c, m, PATIENCE)
        .map_err(|e| format!("unet send: {e}"))
}

/// The first byte of the message that ends the child's last turn (on the
/// endpoint; STOP ends the others).
const END: u8 = 3;

/// The sending end of a VI ping-pong. Region: the message at 0, the STOP
/// message, then the receive slots.
struct Pinger {
    region: MemRegion,
    size: usize,
    stop_at: usize,
    base: usize,
    stride: usize,
    /// The receive slot that completed last: posted again while the next
    /// message travels.
    pending: Option<u64>,
}

impl Pinger {
    fn new(side: &Side, vi: &mut Vi, size: usize) -> Res<Pinger> {
        let stop_at = line_up(size);
        let base = stop_at + 64;
        let stride = line_up(size.max(16));
        let region = side.register(base + PING_POSTED * stride)?;
        region.write(0, &vec![DATA; size]);
        region.write(stop_at, &vec![STOP; stop_len(size)]);
        let p = Pinger {
            region,
            size,
            stop_at,
            base,
            stride,
            pending: None,
        };
        p.slots().post_all(vi)?;
        Ok(p)
    }

    fn slots(&self) -> Slots<'_> {
        Slots {
            region: &self.region,
            base: self.base,
            stride: self.stride,
            n: PING_POSTED,
        }
    }

    /// `warmup` untimed round trips, then up to `iters` timed one by one
    /// (fewer if `limit` passes first).
    fn block(&mut self, vi: &mut Vi, warmup: usize, iters: usize, limit: Duration) -> Res<Samples> {
        let size = self.size;
        let mut pending = self.pending.take();
        let rx = self.slots();
        let out = [ViSeg::new(&self.region, 0, size)];
        let mut rt = || -> Res<()> {
            vi.post_send(0, &out).map_err(post_err("post_send"))?;
            // While the message travels: the receive that completed last
            // time goes back, and completed sends are taken back.
            if let Some(k) = pending.take() {
                rx.post(vi, k)?;
            }
            while let Some(c) = vi.send_done() {
                done(c, "send")?;
            }
            let (k, n) = recv_next(vi)?;
            if n != size {
                return Err(format!("VI ping-pong: a {n}-byte answer, not {size}"));
            }
            pending = Some(k);
            Ok(())
        };
        for _ in 0..warmup {
            rt()?;
        }
        let samples = stats::time_round_trips(iters, limit, &mut rt)?;
        self.pending = pending;
        Ok(samples)
    }

    /// STOP, and its completion: then it is in the ring (or placed),
    /// where the child finds it even once this VI is closed.
    fn stop(&mut self, vi: &mut Vi, path: ViaPath) -> Res<()> {
        const STOP_ID: u64 = 1;
        let stop = [ViSeg::new(&self.region, self.stop_at, stop_len(self.size))];
        vi.post_send(STOP_ID, &stop)
            .map_err(post_err("post_send"))?;
        loop {
            let c = vi
                .send_wait(Some(PATIENCE))
                .map_err(|e| format!("VI send: {e}"))?;
            match c.status {
                Ok(_) if c.id == STOP_ID => return Ok(()),
                Ok(_) => {}
                // Through the engines, the child may have had STOP and
                // closed its VI before our sends were acknowledged (its
                // exit status says whether it ended well).
                Err(ViError::PeerGone) if path == ViaPath::Remote => return Ok(()),
                Err(e) => return Err(format!("VI send descriptor {} failed: {e}", c.id)),
            }
        }
    }
}

/// A one-way stream between two VIs (this process sends), with
/// `drop_ppm` of the datagrams lost (remote only).
///
/// Region: the message at 0, the control message, then the receive slots
/// for the answers.
fn vi_stream(p: &Point, drop_ppm: u32) -> Res<StreamRun> {
    let window = p.s.window;
    let side = Side::start(p.path, drop_ppm)?;
    let ch = side.spawn(ChildKind::ViaStream, p.size, window, p.s.pin)?;
    let size = p.size;
    let res = (|| {
        let (mut vi, _) = side.connect(
            &ch,
            &ViAttributes {
                send_queue: window as u32,
                ..attrs(p.reliability)
            },
        )?;
        let ctrl_at = line_up(size);
        let base = ctrl_at + 64;
        let len = base + CTRL_POSTED * 64;
        let region = side.register(len)?;
        let rx = Slots {
            region: &region,
            base,
            stride: 64,
            n: CTRL_POSTED,
        };
        region.write(0, &vec![DATA; size]);
        rx.post_all(&mut vi)?;
        let mut tx = Sender {
            vi,
            data: [ViSeg::new(&region, 0, size)],
            window,
            outstanding: 0,
            seq: 0,
        };
        tx.phase(p.s.stream_warmup)?;
        tx.control(SYNC, &rx, ctrl_at)?;
        let start = Instant::now();
        let sent = tx.phase(p.s.stream)?;
        let bytes = tx.control(STOP, &rx, ctrl_at)?;
        let elapsed = start.elapsed();
        // Only an unreliable VI may lose messages (it counts them).
        let lossy = p.reliability == Reliability::Unreliable;
        if bytes > sent * size as u64 || (!lossy && bytes != sent * size as u64) {
            return Err(format!(
                "VI stream: {bytes} bytes placed of {} sent",
                sent * size as u64
            ));
        }
        Ok(StreamRun {
            msgs: bytes as f64 / size as f64,
            elapsed,
            sent: Some(sent),
        })
    })();
    ch.wait(res)
}

/// A stream's sending VI.
struct Sender<'r> {
    vi: Vi,
    data: [ViSeg<'r>; 1],
    window: usize,
    /// Sends posted and not yet taken back.
    outstanding: usize,
    /// The last control message's number.
    seq: u8,
}

impl Sender<'_> {
    /// Keeps the send queue full for `d`, taking completions back;
    /// returns the data messages posted.
    fn phase(&mut self, d: Duration) -> Res<u64> {
        let start = Instant::now();
        let (mut sent, mut idle, mut rounds) = (0u64, 0u32, 0u32);
        loop {
            while self.outstanding < self.window {
                match self.vi.post_send(DATA_ID, &self.data) {
                    Ok(()) => {
                        self.outstanding += 1;
                        sent += 1;
                    }
                    Err(PostError::QueueFull) => break,
                }
            }
            let before = self.outstanding;
            while let Some(c) = self.vi.send_done() {
                done(c, "send")?;
                self.outstanding -= 1;
            }
            if self.outstanding < before {
                idle = 0;
            } else {
                // Nothing completed: the ring is full. Give the core up
                // now and then, for when the receiver shares it (as the
                // endpoint's blocking send does).
                idle += 1;
                if idle.is_multiple_of(64) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            rounds += 1;
            if rounds.is_multiple_of(16) && start.elapsed() >= d {
                return Ok(sent);
            }
        }
    }

    /// Sends control message `[kind, seq]` (after every data message
    /// posted), waits until every send completed and the receiver
    /// answered `[kind, seq, u64 bytes]`; returns the bytes it counted.
    /// An unreliable VI may lose the message or its answer: it is sent
    /// again after [`RESEND`] without an answer, and answers to earlier
    /// ones are passed over.
    fn control(&mut self, kind: u8, rx: &Slots, at: usize) -> Res<u64> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let start = Instant::now();
        loop {
            while self.outstanding >= self.window {
                send_next(&mut self.vi)?;
                self.outstanding -= 1;
            }
            // The previous control message's send has completed (below).
            rx.region.write(at, &[kind, seq]);
            self.vi
                .post_send(CTRL_ID, &[ViSeg::new(rx.region, at, 2)])
                .map_err(post_err("post_send"))?;
            self.outstanding += 1;
            // Every send in the ring first: a VI waiting on its receive
            // queue sleeps on the receive ring, which room in the send
            // ring does not wake.
            while self.outstanding > 0 {
                send_next(&mut self.vi)?;
                self.outstanding -= 1;
            }
            let sent_at = Instant::now();
            while sent_at.elapsed() < RESEND {
                let c = match self.vi.recv_wait(Some(RESEND)) {
                    Ok(c) => c,
                    Err(WaitError::Timeout) => break,
                    Err(e) => return Err(format!("VI receive: {e}")),
                };
                let (k, n) = done(c, "receive")?;
                let mut b = [0u8; ANSWER];
                if n == ANSWER {
                    rx.region.read(rx.offset(k), &mut b);
                }
                rx.post(&mut self.vi, k)?;
                if n != ANSWER {
                    return Err(format!("VI stream: a bad answer to control message {kind}"));
                }
                if b[..2] == [kind, seq] {
                    return Ok(u64::from_le_bytes(b[2..].try_into().expect("8 bytes")));
                }
                // An answer to an earlier control message sent twice:
                // passed over.
            }
            if start.elapsed() > PATIENCE {
                return Err(format!("VI stream: no answer to control message {kind}"));
            }
        }
    }
}

// -------------------------------------------------------------------------
// The child
// -------------------------------------------------------------------------

/// The child's half of a local VI run: connect to the engine at
/// `--socket`, listen on a discriminator and print it after `ready`,
/// accept one VI (of the reliability the other side asks for), then echo
/// (ping-pong) or receive and count (stream), with `--batch` receives
/// posted.
pub fn child(a: &ChildArgs, ready: fn(&str)) -> Res<()> {
    // Remote: an engine of its own on UDP loopback; local: the parent's.
    let (_engine, session) = if a.path == Some(PathArg::Udp) {
        let e = Engine::start(remote_engine(a.drop_ppm, CHILD_SEED))
            .map_err(|e| format!("starting the unet engine: {e}"))?;
        let s = Session::embedded(&e).map_err(err("session"))?;
        (Some(e), s)
    } else {
        let sock = a.socket.as_ref().ok_or("--socket is required")?;
        (None, Session::connect(sock).map_err(err("connect"))?)
    };
    let tag = u64::from(std::process::id());
    let server = session.vi_listen(tag).map_err(err("vi_listen"))?;
    let remote = a.path == Some(PathArg::Udp);
    // A local ping-pong also echoes on an endpoint, in turns with the VI
    // (the baseline, measured by the same pair of processes).
    let mut ep = if !remote && a.kind == ChildKind::ViaPingpong {
        Some(
            session
                .create_endpoint(EndpointConfig::default())
                .map_err(err("endpoint"))?,
        )
    } else {
        None
    };
    match (session.udp_addr(), &ep) {
        (Some(u), _) if remote => ready(&format!("{tag} {u}")),
        (_, Some(ep)) => ready(&format!("{tag} {}", ep.id())),
        _ => ready(&tag.to_string()),
    }
    let req = server
        .wait_request(Some(PATIENCE))
        .map_err(err("wait_request"))?;
    let posted = a.batch.max(1);
    let attrs = ViAttributes {
        recv_queue: posted.max(1024) as u32,
        ..attrs(req.reliability())
    };
    let mut vi = req.accept(&attrs).map_err(err("accept"))?;
    let stride = line_up(a.size.max(16));
    match a.kind {
        ChildKind::ViaPingpong => {
            let region = session
                .register_memory(posted * stride)
                .map_err(err("register_memory"))?;
            let rx = Slots {
                region: &region,
                base: 0,
                stride,
                n: posted,
            };
            rx.post_all(&mut vi)?;
            let mut posted = rx.n;
            let Some(ep) = &mut ep else {
                return echo(&mut vi, &rx, a.size, &mut posted).map(|_| ());
            };
            // Turns: the endpoint's until STOP, then the VI's until STOP,
            // until END on the endpoint.
            let mut buf = vec![0u8; a.size.max(16)];
            loop {
                if unet_paths::echo(ep, &mut buf, a.size)? == END {
                    return Ok(());
                }
                if echo(&mut vi, &rx, a.size, &mut posted)? {
                    return Err("the VI's peer went before its last turn".into());
                }
            }
        }
        ChildKind::ViaStream => {
            let region = session
                .register_memory(64 + posted * stride)
                .map_err(err("register_memory"))?;
            let rx = Slots {
                region: &region,
                base: 64,
                stride,
                n: posted,
            };
            count(&mut vi, &rx)
        }
        k => Err(format!("not a VI child: {k:?}")),
    }
}

/// The next completed receive; `None` once the other side has gone (the
/// end of a run whose last message an unreliable VI lost).
fn recv_or_gone(vi: &mut Vi, timeout: Duration) -> Res<Option<(u64, usize)>> {
    match vi.recv_wait(Some(timeout)) {
        Ok(c) => done(c, "receive").map(Some),
        Err(WaitError::Empty(Some(ViError::PeerGone))) => Ok(None),
        Err(e) => Err(format!("VI receive: {e}")),
    }
}

/// Echoes every `size`-byte message from the buffer it landed in, until
/// one of another length (false) or the other side's going (true); a slot
/// is posted again once its echo completed (the slot of the message that
/// ended the turn at once). `posted`: the slots posted, kept from one turn
/// to the next.
fn echo(vi: &mut Vi, rx: &Slots, size: usize, posted: &mut usize) -> Res<bool> {
    loop {
        // A send through the engines completes later (once acknowledged,
        // for the reliable levels): with every slot waiting for its echo
        // to complete, wait for one.
        if *posted == 0 {
            let (j, _) = send_next(vi)?;
            rx.post(vi, j)?;
            *posted += 1;
        }
        let Some((k, n)) = recv_or_gone(vi, PATIENCE)? else {
            return Ok(true);
        };
        if n != size {
            rx.post(vi, k)?;
            return Ok(false);
        }
        *posted -= 1;
        vi.post_send(k, &[ViSeg::new(rx.region, rx.offset(k), n)])
            .map_err(post_err("post_send"))?;
        while let Some(c) = vi.send_done() {
            let (j, _) = done(c, "send")?;
            rx.post(vi, j)?;
            *posted += 1;
        }
    }
}

/// Counts the bytes placed into the slots, posting each slot again once
/// counted; answers SYNC and STOP (two-byte messages `[kind, number]`)
/// with `[kind, number, u64 bytes since the last SYNC]` from the region's
/// first bytes. After STOP, an unreliable VI stays a while to answer the
/// STOP sent again if its answer was lost.
fn count(vi: &mut Vi, rx: &Slots) -> Res<()> {
    rx.post_all(vi)?;
    let lossy = vi.attributes().reliability == Reliability::Unreliable;
    let mut bytes = 0u64;
    let mut stopped = false;
    loop {
        let wait = if stopped { 2 * RESEND } else { PATIENCE };
        let (k, n) = match recv_or_gone(vi, wait) {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(()),
            Err(_) if stopped => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut ctrl = [0u8; 2];
        if n == 2 {
            rx.region.read(rx.offset(k), &mut ctrl);
        }
        rx.post(vi, k)?;
        if n != 2 || (ctrl[0] != SYNC && ctrl[0] != STOP) {
            bytes += n as u64;
            continue;
        }
        let mut ans = [0u8; ANSWER];
        ans[..2].copy_from_slice(&ctrl);
        ans[2..].copy_from_slice(&bytes.to_le_bytes());
        // The previous answer's send has completed (below).
        rx.region.write(0, &ans);
        vi.post_send(0, &[ViSeg::new(rx.region, 0, ANSWER)])
            .map_err(post_err("post_send"))?;
        // Completed: in the ring (or placed, or with the engine), where
        // the sender finds it even once this VI is closed. Through the
        // engines, the sender may have had the answer to STOP and closed
        // before this send was acknowledged.
        let c = vi
            .send_wait(Some(PATIENCE))
            .map_err(|e| format!("VI send: {e}"))?;
        match c.status {
            Ok(_) => {}
            Err(ViError::PeerGone) if ctrl[0] == STOP => return Ok(()),
            Err(e) => return Err(format!("VI send descriptor {} failed: {e}", c.id)),
        }
        match ctrl[0] {
            STOP if !lossy => return Ok(()),
            STOP => stopped = true,
            _ => bytes = 0,
        }
    }
}
