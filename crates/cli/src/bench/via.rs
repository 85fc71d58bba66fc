//! `unet bench via`: VIA between two VIs, beside unet's endpoint path
//! that carries the same messages, measured in the same invocation.
//!
//! `--path local` (the only one built so far): two VIs in two processes
//! of this host, connected by discriminator through an embedded engine
//! and then joined by a direct ring (no engine in the data path). The
//! baseline is unet's endpoint direct path, run by the same code as
//! `unet bench pingpong|stream --path direct`, with the same placement:
//! this process starts an embedded engine with a control socket in a
//! fresh temporary directory, and a child (`unet bench __child via-…`)
//! connects to it; `--pin` puts this process on core 0 and the child on
//! core 1. Runs alternate baseline, VI, baseline, VI… so that both see
//! the same noise.
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
    Engine, EngineConfig, MemRegion, PostError, Reliability, Session, Vi, ViAttributes,
    ViCompletion, ViSeg, VI_MAX_TRANSFER,
};
use unet_engine::wire::udp::LOOPBACK_DATAGRAM;

use super::floor::StreamRun;
use super::net::{self, spawn_child, ChildArgs, ChildKind, ChildProc, PathArg};
use super::report::Progress;
use super::stats::{self, fmt_size, median_f64, Samples};
use super::unet_paths::{self, stop_len, TempDir, DATA, PATIENCE, STOP, SYNC};

type Res<T> = Result<T, String>;

/// Round trip and one-way bandwidth between two VIs.
#[derive(clap::Args)]
#[command(after_help = "\
Each run is this process and a child it starts; runs alternate the \
baseline and the VIs: direct, VI, direct, VI… (--runs pairs). Baseline: \
unet's endpoint direct path (the code of `unet bench pingpong|stream --path \
direct`, same process and core placement). via-pingpong: each side keeps \
receive descriptors posted in a registered region, reposting each that \
completes; every round trip timed on its own, median over all round trips \
of all runs, ratio = VI / direct (lower is better; the issue's target for \
64 B: <= 1.15). via-stream: the receiver keeps --window receives posted, the \
sender --window sends outstanding; GB/s delivered into the receiver's \
registered memory, median of the runs, ratio = VI / direct (higher is \
better; target >= 0.9). ratio_paired (JSON, and the last column) is the \
median of the ratios of each VI run to the direct run beside it.")]
pub struct Args {
    /// Where the two VIs are: `local`, two processes of this host joined
    /// by a direct ring. (`remote`, through two engines over UDP, is not
    /// built yet.)
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

/// Where the two VIs are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ViaPath {
    /// Two processes of this host, one direct ring each way.
    Local,
    /// Two engines over UDP (not built yet).
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

    fn check(self) -> Res<()> {
        match self {
            ViaPath::Local => Ok(()),
            ViaPath::Remote => Err("--path remote: the remote VI path is not built yet \
                 (only --path local is)"
                .into()),
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
/// Bytes of the receiver's answer to SYNC and STOP: kind, u64 count.
const ANSWER: usize = 9;

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
        let iters = net::iters_for(self.s.iters, self.size);
        (iters, self.s.warmup.min(iters))
    }

    /// The endpoint run that is the baseline (`unet bench pingpong` with
    /// `stream = false`, `unet bench stream` otherwise, on the baseline
    /// path, with their defaults).
    fn endpoint_run(&self, stream: bool) -> unet_paths::Run {
        let (iters, warmup) = self.iters();
        unet_paths::Run {
            path: self.path.baseline(),
            size: self.size,
            burst: 0,
            batch: if stream { ENDPOINT_BATCH } else { 1 },
            warmup: if stream { 0 } else { warmup },
            iters: if stream { 0 } else { iters },
            limit: if stream { self.s.stream } else { self.s.limit },
            warmup_time: if stream {
                self.s.stream_warmup
            } else {
                Duration::ZERO
            },
            pin: self.s.pin,
            max_datagram: LOOPBACK_DATAGRAM,
            spin_us: None,
            applet: None,
            counters: false,
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
}

impl Row {
    fn ratio(&self) -> f64 {
        self.value / self.baseline_value
    }

    /// The median of the ratios of each VI run to the baseline run beside
    /// it (see `report::StreamRow::paired_ratio`).
    fn paired_ratio(&self) -> f64 {
        let r: Vec<f64> = self
            .value_runs
            .iter()
            .zip(&self.baseline_runs)
            .map(|(v, b)| v / b)
            .collect();
        median_f64(&r)
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
        })
    }

    fn header() {
        println!(
            "{:<12} {:<6} {:<11} {:>6}  {:>12} {:>8}  {:<8} {:>12} {:>8}  {:>6} {:>6}",
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
        println!(
            "{:<12} {:<6} {:<11} {:>6}  {:>12} {:>8}  {:<8} {:>12} {:>8}  {:>6.2} {:>6.2}",
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
            self.paired_ratio()
        );
    }
}

pub fn run(a: Args) -> ExitCode {
    net::finish(bench(a))
}

fn bench(a: Args) -> Res<()> {
    a.path.check()?;
    let s = Settings::of(&a)?;
    net::warn_if_busy();
    if s.pin {
        net::pin_to(0)?;
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

fn pingpong_row(p: &Point, prog: &Progress) -> Res<Row> {
    let what = p.what("via-pingpong");
    let runs = p.s.runs;
    let (mut base, mut vi) = (Samples::default(), Samples::default());
    let (mut base_runs, mut vi_runs) = (Vec::new(), Vec::new());
    for rep in 0..runs {
        prog.show(&format!("{what}: direct {}/{runs}", rep + 1));
        let b = unet_paths::pingpong(&p.endpoint_run(false))?;
        base_runs.push(b.median_us());
        base.extend(b);
        prog.show(&format!("{what}: VI {}/{runs}", rep + 1));
        let v = vi_pingpong(p)?;
        vi_runs.push(v.median_us());
        vi.extend(v);
    }
    prog.clear();
    net::note_if_unsteady(&what, "direct path", &base_runs, "us (median of each)");
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
    })
}

fn stream_row(p: &Point, prog: &Progress) -> Res<Row> {
    let what = p.what("via-stream");
    let runs = p.s.runs;
    let gb = |r: &StreamRun| r.msgs_per_s() * p.size as f64 / 1e9;
    let (mut base_runs, mut vi_runs) = (Vec::new(), Vec::new());
    for rep in 0..runs {
        prog.show(&format!("{what}: direct {}/{runs}", rep + 1));
        base_runs.push(gb(&unet_paths::stream(&p.endpoint_run(true))?));
        prog.show(&format!("{what}: VI {}/{runs}", rep + 1));
        vi_runs.push(gb(&vi_stream(p)?));
    }
    prog.clear();
    net::note_if_unsteady(&what, "direct path", &base_runs, "GB/s");
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
    })
}

/// One VI ping-pong run on `p.path`.
fn vi_pingpong(p: &Point) -> Res<Samples> {
    match p.path {
        ViaPath::Local => local_pingpong(p),
        ViaPath::Remote => Err("the remote VI path is not built yet".into()),
    }
}

/// One VI stream run on `p.path`.
fn vi_stream(p: &Point) -> Res<StreamRun> {
    match p.path {
        ViaPath::Local => local_stream(p),
        ViaPath::Remote => Err("the remote VI path is not built yet".into()),
    }
}

// -------------------------------------------------------------------------
// The local path
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

/// This process's side of a local run. Field order is drop order:
/// session, engine, directory.
struct LocalSide {
    session: Session,
    _engine: Engine,
    dir: TempDir,
}

impl LocalSide {
    /// An embedded engine with a control socket in a fresh directory.
    fn start() -> Res<LocalSide> {
        let dir = TempDir::new()?;
        let engine = Engine::start(EngineConfig {
            control_socket: Some(dir.0.join("control")),
            ..EngineConfig::default()
        })
        .map_err(|e| format!("starting the unet engine: {e}"))?;
        let session = Session::embedded(&engine).map_err(err("session"))?;
        Ok(LocalSide {
            session,
            _engine: engine,
            dir,
        })
    }

    /// Starts the child that plays the other VI (`posted`: the receives it
    /// keeps posted); it prints the discriminator it listens on.
    fn spawn(&self, kind: ChildKind, size: usize, posted: usize, pin: bool) -> Res<ChildProc> {
        let extra = [
            "--socket".to_string(),
            self.dir.0.join("control").display().to_string(),
            "--batch".to_string(),
            posted.to_string(),
        ];
        spawn_child(kind, size, 0, &extra, None, pin)
    }

    /// Connects a VI of `attrs` to the child's.
    fn connect(&self, ch: &ChildProc, attrs: &ViAttributes) -> Res<Vi> {
        let tag: u64 = ch
            .info
            .parse()
            .map_err(|_| "the child sent no discriminator")?;
        self.session
            .vi_connect(None, tag, attrs, Some(PATIENCE))
            .map_err(err("vi_connect"))
    }

    fn register(&self, len: usize) -> Res<MemRegion> {
        self.session
            .register_memory(len)
            .map_err(err("register_memory"))
    }
}

fn attrs(r: Reliability) -> ViAttributes {
    ViAttributes {
        reliability: r,
        ..ViAttributes::default()
    }
}

/// Ping-pong between two local VIs (this process sends first).
///
/// Region: the message at 0, the STOP message, then the receive slots.
fn local_pingpong(p: &Point) -> Res<Samples> {
    let side = LocalSide::start()?;
    let ch = side.spawn(ChildKind::ViaPingpong, p.size, PING_POSTED, p.s.pin)?;
    let (iters, warmup) = p.iters();
    let size = p.size;
    let res = (|| {
        let mut vi = side.connect(&ch, &attrs(p.reliability))?;
        let stop_at = line_up(size);
        let base = stop_at + 64;
        let stride = line_up(size.max(16));
        let region = side.register(base + PING_POSTED * stride)?;
        let rx = Slots {
            region: &region,
            base,
            stride,
            n: PING_POSTED,
        };
        region.write(0, &vec![DATA; size]);
        region.write(stop_at, &vec![STOP; stop_len(size)]);
        rx.post_all(&mut vi)?;
        let out = [ViSeg::new(&region, 0, size)];
        let mut pending = None;
        let mut rt = || -> Res<()> {
            vi.post_send(0, &out).map_err(post_err("post_send"))?;
            // While the message travels: the receive that completed last
            // time goes back, and completed sends are taken back.
            if let Some(k) = pending.take() {
                rx.post(&mut vi, k)?;
            }
            while let Some(c) = vi.send_done() {
                done(c, "send")?;
            }
            let (k, n) = recv_next(&mut vi)?;
            if n != size {
                return Err(format!("VI ping-pong: a {n}-byte answer, not {size}"));
            }
            pending = Some(k);
            Ok(())
        };
        for _ in 0..warmup {
            rt()?;
        }
        let samples = stats::time_round_trips(iters, p.s.limit, &mut rt)?;
        // STOP, and its completion: then it is in the ring (or placed),
        // where the child finds it even once this VI is closed.
        const STOP_ID: u64 = 1;
        vi.post_send(STOP_ID, &[ViSeg::new(&region, stop_at, stop_len(size))])
            .map_err(post_err("post_send"))?;
        while send_next(&mut vi)?.0 != STOP_ID {}
        Ok(samples)
    })();
    ch.wait(res)
}

/// A one-way stream between two local VIs (this process sends).
///
/// Region: the message at 0, the control message, then the receive slots
/// for the answers.
fn local_stream(p: &Point) -> Res<StreamRun> {
    let window = p.s.window;
    let side = LocalSide::start()?;
    let ch = side.spawn(ChildKind::ViaStream, p.size, window, p.s.pin)?;
    let size = p.size;
    let res = (|| {
        let mut vi = side.connect(
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
        };
        tx.phase(p.s.stream_warmup)?;
        tx.control(SYNC, &rx, ctrl_at)?;
        let start = Instant::now();
        let sent = tx.phase(p.s.stream)?;
        let bytes = tx.control(STOP, &rx, ctrl_at)?;
        let elapsed = start.elapsed();
        if bytes != sent * size as u64 {
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

    /// Sends control message `kind` (after every data message posted),
    /// waits until every send completed and the receiver answered; returns
    /// the bytes it counted.
    fn control(&mut self, kind: u8, rx: &Slots, at: usize) -> Res<u64> {
        while self.outstanding >= self.window {
            send_next(&mut self.vi)?;
            self.outstanding -= 1;
        }
        // The previous control message's send has completed (below).
        rx.region.write(at, &[kind]);
        self.vi
            .post_send(CTRL_ID, &[ViSeg::new(rx.region, at, 1)])
            .map_err(post_err("post_send"))?;
        self.outstanding += 1;
        // Every send in the ring first: a VI waiting on its receive queue
        // sleeps on the receive ring, which room in the send ring does not
        // wake.
        while self.outstanding > 0 {
            send_next(&mut self.vi)?;
            self.outstanding -= 1;
        }
        let (k, n) = recv_next(&mut self.vi)?;
        let mut b = [0u8; ANSWER];
        if n == ANSWER {
            rx.region.read(rx.offset(k), &mut b);
        }
        rx.post(&mut self.vi, k)?;
        if n != ANSWER || b[0] != kind {
            return Err(format!("VI stream: a bad answer to control message {kind}"));
        }
        Ok(u64::from_le_bytes(b[1..].try_into().expect("8 bytes")))
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
    let sock = a.socket.as_ref().ok_or("--socket is required")?;
    let session = Session::connect(sock).map_err(err("connect"))?;
    let tag = u64::from(std::process::id());
    let server = session.vi_listen(tag).map_err(err("vi_listen"))?;
    ready(&tag.to_string());
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
            echo(&mut vi, &rx, a.size)
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

/// Echoes every `size`-byte message from the buffer it landed in, until
/// one of another length; a slot is posted again once its echo completed.
fn echo(vi: &mut Vi, rx: &Slots, size: usize) -> Res<()> {
    rx.post_all(vi)?;
    loop {
        let (k, n) = recv_next(vi)?;
        if n != size {
            return Ok(());
        }
        vi.post_send(k, &[ViSeg::new(rx.region, rx.offset(k), n)])
            .map_err(post_err("post_send"))?;
        while let Some(c) = vi.send_done() {
            let (j, _) = done(c, "send")?;
            rx.post(vi, j)?;
        }
    }
}

/// Counts the bytes placed into the slots, posting each slot again once
/// counted; answers SYNC and STOP (one-byte messages) with `[kind, u64
/// bytes since the last answer]` from the region's first bytes.
fn count(vi: &mut Vi, rx: &Slots) -> Res<()> {
    rx.post_all(vi)?;
    let mut bytes = 0u64;
    loop {
        let (k, n) = recv_next(vi)?;
        let mut kind = [0u8];
        if n == 1 {
            rx.region.read(rx.offset(k), &mut kind);
        }
        rx.post(vi, k)?;
        if n != 1 || (kind[0] != SYNC && kind[0] != STOP) {
            bytes += n as u64;
            continue;
        }
        let mut ans = [0u8; ANSWER];
        ans[0] = kind[0];
        ans[1..].copy_from_slice(&bytes.to_le_bytes());
        // The previous answer's send has completed (below).
        rx.region.write(0, &ans);
        vi.post_send(0, &[ViSeg::new(rx.region, 0, ANSWER)])
            .map_err(post_err("post_send"))?;
        // Completed: in the ring (or placed), where the sender finds it
        // even once this VI is closed.
        send_next(vi)?;
        if kind[0] == STOP {
            return Ok(());
        }
        bytes = 0;
    }
}
