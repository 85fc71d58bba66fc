//! `unet bench spine`: what SPINE's runtime costs and how promptly its
//! watchdog stops a runaway handler, each figure beside a baseline
//! measured in the same run.
//!
//! Everything runs the engine's own code in this process, as `unet bench
//! overhead` does: each engine is a [`Dispatcher`] in invoker mode, set
//! up through the real control path (a [`LocalClient`] creates two
//! endpoints A and B, opens an engine-path channel from A to B and loads
//! the extensions), and stepped on this thread. The benchmark plays the
//! host by hand ([`RawEndpoint`]): it pushes send descriptors on A (active
//! messages, `SEND_AM`, or plain U-Net messages to B), steps the engine
//! until it is idle, and takes what arrived. Two engines are measured,
//! one running the extensions compiled (JIVE's machine code, the default)
//! and one interpreted.
//!
//! The extensions (compiled with javac against the applet SDK):
//! `SpBench` with `onNull` (returns), `onFan` (sends its context handler
//! `k` small messages, `k` the message's first argument byte; installed
//! twice, once aimed at `onNull` and once at a number no handler has, so
//! that each send is refused at once), and `onEcho` (replies with no
//! arguments); `Runaway` with `onSpin` (an endless loop) under the
//! default 10 µs budget.
//!
//! Rows (per message or per event; a batch is [`BATCH`] messages pushed
//! on A, then turns of the engine until it is idle, timed; a repetition's
//! figure is the median over `--batches` batches, the variants
//! interleaved; every figure is the median over `--reps` repetitions of
//! the figure within each, and a ratio is the median of the ratios within
//! each repetition):
//!
//! - `host_null`: a host's active message to `onNull` (U-Net's send
//!   checks, SPINE's inbox, a `host_tx` event and the handler's), per
//!   message, beside `plain`: a U-Net message from A to B on the engine
//!   path (the same loop's own delivery).
//! - `host_echo`: host -> `host_tx` -> `onEcho` -> `deliver_host` -> the
//!   host's receive ring, per message, and `per_event` (a third of it),
//!   beside `plain`.
//! - `event`: one message a handler sends to `onNull` and its run:
//!   `onFan` with `k` = 32 less `k` = 0, divided by 32: the `send` native,
//!   a message slot, the event queued and popped, the handler looked up
//!   and `onNull` invoked. Beside a direct Rust call of the same work (an
//!   `#[inline(never)]` function of the handler's two arguments that does
//!   nothing with them).
//! - `invoke`: the dispatcher's cost per handler invocation: `onFan` with
//!   32 sends to `onNull` less 32 sends to no handler (each refused in the
//!   native, no message made), divided by 32: the message slot, the
//!   event, its dispatch and the null handler's invocation (the engine's
//!   time and statistics around it included: one read of its time-stamp
//!   counter an invocation when handlers run back to back, as here). Beside
//!   the same direct Rust call; target at most 30 ns compiled.
//! - `watchdog`: `onSpin` stopped [`STOPS`] times, each stop's time from
//!   the invocation's start to its return as the engine measures it (its
//!   handler statistics, read through the control path after each stop):
//!   p50, p99 and max, beside the budget; target p99 at most 20 µs.
//! - `neighbour`: `onEcho`'s messages per CPU second of this thread (the
//!   engine's) while `onSpin` gets one message every millisecond of that
//!   CPU time and is
//!   stopped each time, beside its rate alone, phases interleaved; target
//!   at least 90 %. The runaway's offered load is this benchmark's choice:
//!   the figure says how much of the adapter a stop costs, not the share a
//!   runaway fed without pause would take (the whole of its budget per
//!   message).
//!
//! - `peer_pingpong`, `wire_pingpong_*`: handler ping-pong between two
//!   extensions on two adapters over the peer queue and over the UDP
//!   wire, beside host ping-pong on the direct path: the rows of
//!   `unet bench spine-peer` and `unet bench spine-wire`, run here after
//!   this file's own ([`MORE_ROWS`]).
//!
//! Every batch checks what the engine did (each descriptor's status, the
//! replies on A, the messages on B), and the listing is checked after
//! each part: no handler but `onSpin` stopped, no drop but the refused
//! sends. The SPINE paper gives few numbers to set beside these: its
//! watchdog example of 10 µs, which the budget here is.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::json;
use unet_abi::spine::SEND_AM;
use unet_abi::{Geometry, SendDesc, SendStatus};
use unet_control::spine::{HandlerInfo, SpineListing};
use unet_control::{Reply, Request};
use unet_engine::invoker::{LocalClient, RawEndpoint};
use unet_engine::{Dispatcher, EngineConfig, PathChoice};

use super::applet_build::{javac, BuildDir};
use super::plot::{self, Figure, Scale, Series};
use super::report::Progress;
use super::stats::{median_f64, percentile};

mod rig;
use rig::*;

#[derive(clap::Args)]
pub struct Args {
    /// Repetitions of every cost measurement; medians are reported.
    #[arg(long, default_value_t = 7)]
    pub reps: usize,
    /// Timed batches (of 32 messages) per variant and repetition.
    #[arg(long, default_value_t = 200)]
    pub batches: usize,
    /// A fast, rough run (3 repetitions of 30 batches, 1 000 stops).
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object per row.
    #[arg(long)]
    pub json: bool,
    /// Draw the watchdog's stop times (their distribution) as an SVG.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Source directory of the applet SDK (default: the source checkout's
    /// `java/applet-sdk/src/main/java`).
    #[arg(long, value_name = "DIR")]
    pub sdk_dir: Option<PathBuf>,
}

/// What the rows of other parts of SPINE are given.
pub(super) struct Opts {
    pub reps: usize,
    pub quick: bool,
}

/// One row of the report: a figure, its baseline from the same run, the
/// target and the paper's figure where there is one.
pub(super) struct Row {
    pub name: String,
    /// `compiled`, `interpreted` or what the row's engines run.
    pub mode: &'static str,
    pub value: f64,
    pub unit: &'static str,
    /// What the figure is set beside, and its value (same unit).
    pub baseline: Option<(String, f64)>,
    /// Median ratio to the baseline within repetitions (or value/baseline).
    pub ratio: Option<f64>,
    /// The target, as text, and whether the figure meets it.
    pub target: Option<(String, bool)>,
    /// The paper's figure, as text.
    pub paper: Option<&'static str>,
    /// More figures of the row (percentiles, counts).
    pub more: Vec<(&'static str, f64)>,
}

/// A measurement another part of SPINE adds to this benchmark.
pub(super) type RowFn = fn(&Opts) -> Result<Vec<Row>, String>;

/// The rows other parts add, run after this file's own, in this order:
/// handler ping-pong between two adapters over the peer queue
/// (`spine_peer::peer_pingpong`) and over the UDP wire
/// (`spine_wire::wire_pingpong`), each beside the hosts' direct path.
const MORE_ROWS: &[(&str, RowFn)] = &[
    ("peer queue ping-pong", peer_rows),
    ("wire ping-pong", wire_rows),
];

/// `spine_peer::peer_pingpong`'s rows (its own defaults: 50 rallies; 10
/// with `--quick`).
fn peer_rows(o: &Opts) -> Result<Vec<Row>, String> {
    let rallies = if o.quick { 10 } else { 50 };
    let rows = super::spine_peer::peer_pingpong(o.reps.min(3), rallies)?;
    Ok(rows
        .into_iter()
        .map(|r| Row {
            name: if r.polling {
                "peer_pingpong_polling".into()
            } else {
                "peer_pingpong".into()
            },
            mode: "compiled",
            value: r.median_us,
            unit: "us",
            baseline: Some(("host direct path".into(), r.baseline_median_us)),
            ratio: Some(r.ratio()),
            target: None,
            paper: None,
            more: vec![("p99_us", r.p99_us), ("baseline_p99_us", r.baseline_p99_us)],
        })
        .collect())
}

/// `spine_wire::wire_pingpong`'s rows (its own defaults; one size, 64
/// bytes, and fewer rounds with `--quick`).
fn wire_rows(o: &Opts) -> Result<Vec<Row>, String> {
    let a = super::spine_wire::WireArgs {
        sizes: if o.quick {
            vec![64]
        } else {
            vec![8, 64, 236, 1024, 16384]
        },
        rounds: 100,
        iters: if o.quick { 50 } else { 200 },
        reps: o.reps.min(3),
        time_ms: if o.quick { 100 } else { 500 },
        json: false,
    };
    Ok(super::spine_wire::wire_pingpong(&a)?
        .into_iter()
        .map(|r| Row {
            name: format!("wire_pingpong_{}B", r.size),
            mode: "compiled",
            value: r.spine_median_us,
            unit: "us",
            baseline: Some(("host direct path".into(), r.direct_median_us)),
            ratio: Some(r.ratio_direct()),
            target: None,
            paper: None,
            more: vec![
                ("p99_us", r.spine_p99_us),
                ("raw_udp_us", r.raw_udp_median_us),
            ],
        })
        .collect())
}

/// Messages per timed batch.
const BATCH: usize = 32;
/// Sends per `onFan` invocation.
const FAN: u8 = 32;
/// Runaway invocations stopped per mode.
const STOPS: usize = 10_000;
/// The watchdog's budget (the engine's default, and the paper's example).
const BUDGET: Duration = Duration::from_micros(10);
/// Targets: ns per handler invocation, µs to a stop (p99), the
/// neighbour's share of its rate.
const TARGET_INVOKE_NS: f64 = 30.0;
const TARGET_STOP_US: f64 = 20.0;
const TARGET_SHARE: f64 = 0.9;
/// How often the runaway gets a message while the neighbour is measured
/// (in this thread's CPU time).
const RUNAWAY_EVERY: Duration = Duration::from_millis(1);
/// How long set-up may take before the command gives up.
const SETUP_LIMIT: Duration = Duration::from_secs(30);

/// Handler numbers.
const H_NULL: u16 = 100;
const H_FAN: u16 = 101;
const H_FAN_BAD: u16 = 102;
const H_ECHO: u16 = 103;
const H_SPIN: u16 = 200;
// `onFan`'s refused sends go to 1000, a number no handler has.

const SOURCES: [(&str, &str); 2] = [
    (
        "SpBench",
        "import unet.spine.Spine;\n\
         public class SpBench {\n\
           static byte[] args;\n\
           static void init(int base) {\n\
             args = new byte[Spine.ARGS_MAX];\n\
             Spine.addHandler(\"onNull\", base, 0);\n\
             Spine.addHandler(\"onFan\", base + 1, base);\n\
             Spine.addHandler(\"onFan\", base + 2, 1000);\n\
             Spine.addHandler(\"onEcho\", base + 3, base + 3);\n\
           }\n\
           static void onNull(int ctx, int msg) { }\n\
           static void onFan(int to, int msg) {\n\
             int k = Spine.argByte(msg, 0);\n\
             for (int i = 0; i < k; i++) { Spine.send(Spine.DEST_LOCAL, to, args, 0, 0); }\n\
           }\n\
           static void onEcho(int self, int msg) { Spine.reply(msg, self, args, 0, 0); }\n\
         }\n",
    ),
    (
        "Runaway",
        "import unet.spine.Spine;\n\
         public class Runaway {\n\
           static int spins;\n\
           static void init(int n) { Spine.addHandler(\"onSpin\", n, 0); }\n\
           static void onSpin(int ctx, int msg) { while (true) { spins++; } }\n\
         }\n",
    ),
];

pub fn run(a: Args) -> ExitCode {
    match bench(a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("unet bench spine: {e}");
            ExitCode::from(1)
        }
    }
}

/// The class files of [`SOURCES`].
fn classes(sdk: Option<&Path>) -> Result<Vec<Vec<u8>>, String> {
    let sdk = sdk.map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../java/applet-sdk/src/main/java"),
        Path::to_path_buf,
    );
    if !sdk.join("unet/spine/Spine.java").is_file() {
        return Err(format!(
            "{} is not the applet SDK source directory (no unet/spine/Spine.java; use --sdk-dir)",
            sdk.display()
        ));
    }
    let dir = BuildDir::new("spine", false)?;
    let mut files = Vec::new();
    for (class, text) in SOURCES {
        let p = dir.path.join(format!("{class}.java"));
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
        files.push(p);
    }
    javac(&sdk, &dir.path, &files)?;
    SOURCES
        .iter()
        .map(|(c, _)| {
            let p = dir.path.join(format!("{c}.class"));
            std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))
        })
        .collect()
}

// -------------------------------------------------------------------------
// The engines
// -------------------------------------------------------------------------

/// The handler's work, done by Rust: take the two arguments, do nothing.
#[inline(never)]
fn null_handler(ctx: i32, msg: i32) {
    std::hint::black_box((ctx, msg));
}

/// A direct call of [`null_handler`], ns (the median of 9 runs).
fn direct_call_ns() -> f64 {
    const N: usize = 1 << 20;
    let runs: Vec<f64> = (0..9)
        .map(|_| {
            let t = Instant::now();
            for i in 0..N {
                null_handler(std::hint::black_box(i as i32), std::hint::black_box(7));
            }
            t.elapsed().as_nanos() as f64 / N as f64
        })
        .collect();
    median_f64(&runs)
}

/// Per-message times of one repetition, by variant key, and the direct
/// call.
struct Rep {
    ns: Vec<(&'static str, f64)>,
    direct: f64,
}

impl Rep {
    fn get(&self, k: &str) -> f64 {
        self.ns
            .iter()
            .find(|(key, _)| *key == k)
            .map_or(f64::NAN, |(_, v)| *v)
    }
}

fn variants(rig: &Rig) -> Vec<Variant> {
    vec![
        rig.plain,
        am("host_null", OFF_EMPTY, 2, H_NULL, 0),
        am("host_echo", OFF_EMPTY, 2, H_ECHO, 1),
        am("fan", OFF_FAN, 3, H_FAN, 0),
        am("fan0", OFF_FAN0, 3, H_FAN, 0),
        am("fan_bad", OFF_FAN, 3, H_FAN_BAD, 0),
    ]
}

/// One repetition on `rig`: every variant's median per message over
/// `batches` batches, the variants interleaved batch by batch.
fn rep(rig: &mut Rig, batches: usize) -> Result<Rep, String> {
    let vs = variants(rig);
    let mut ns: Vec<Vec<f64>> = vec![Vec::with_capacity(batches); vs.len()];
    for v in &vs {
        rig.batch(v, BATCH, false)?;
    }
    for _ in 0..batches {
        for (i, v) in vs.iter().enumerate() {
            ns[i].push(rig.batch(v, BATCH, false)? / BATCH as f64);
        }
    }
    Ok(Rep {
        ns: vs
            .iter()
            .zip(&ns)
            .map(|(v, s)| (v.key, median_f64(s)))
            .collect(),
        direct: direct_call_ns(),
    })
}

/// The cost rows of one engine from its repetitions.
fn cost_rows(mode: &'static str, reps: &[Rep]) -> Vec<Row> {
    let med = |f: &dyn Fn(&Rep) -> f64| median_f64(&reps.iter().map(f).collect::<Vec<_>>());
    let row = |name: &str, f: &dyn Fn(&Rep) -> f64, base: &dyn Fn(&Rep) -> f64, bname: &str| {
        let value = med(f);
        Row {
            name: name.into(),
            mode,
            value,
            unit: "ns",
            baseline: Some((bname.into(), med(base))),
            ratio: Some(med(&|r| f(r) / base(r))),
            target: None,
            paper: None,
            more: Vec::new(),
        }
    };
    let fan = f64::from(FAN);
    let mut invoke = row(
        "invoke",
        &|r| (r.get("fan") - r.get("fan_bad")) / fan,
        &|r| r.direct,
        "direct Rust call",
    );
    if mode == "compiled" {
        invoke.target = Some((
            format!("<= {TARGET_INVOKE_NS} ns"),
            invoke.value <= TARGET_INVOKE_NS,
        ));
    }
    let mut echo = row(
        "host_echo",
        &|r| r.get("host_echo"),
        &|r| r.get("plain"),
        "U-Net engine path",
    );
    echo.more.push(("per_event_ns", echo.value / 3.0));
    echo.paper = Some("about 0.5 us per event estimated for a 200 MHz StrongARM (section 6)");
    vec![
        row(
            "host_null",
            &|r| r.get("host_null"),
            &|r| r.get("plain"),
            "U-Net engine path",
        ),
        echo,
        row(
            "event",
            &|r| (r.get("fan") - r.get("fan0")) / fan,
            &|r| r.direct,
            "direct Rust call",
        ),
        invoke,
    ]
}

/// `n` runaway invocations on `rig`, each stopped: their times as the
/// engine measured them, ns.
fn stops(rig: &mut Rig, n: usize, p: &Progress) -> Result<Vec<u64>, String> {
    let spin = am("spin", OFF_EMPTY, 2, H_SPIN, 0);
    // Every stop timed (by default one invocation in 64 is).
    rig.engine.set_spine_time_every(1);
    let mut last = rig.check()?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if i % 500 == 0 {
            p.show(&format!("{}: watchdog, stop {i} of {n}", rig.mode));
        }
        rig.batch(&spin, 1, false)?;
        let h = rig.check()?;
        if h.invocations != last.invocations + 1
            || h.timed != last.timed + 1
            || h.terminated_for("timeout") != last.terminated_for("timeout") + 1
        {
            return Err(format!(
                "{}: a runaway invocation was not stopped by its budget: {h:?}",
                rig.mode
            ));
        }
        out.push(h.total_ns - last.total_ns);
        last = h;
    }
    rig.engine
        .set_spine_time_every(EngineConfig::default().spine_time_every);
    Ok(out)
}

fn watchdog_row(mode: &'static str, ns: &[u64]) -> Row {
    let us = |q: f64| percentile(ns, q) / 1e3;
    let (p50, p99) = (us(0.5), us(0.99));
    let max = ns.iter().copied().max().unwrap_or(0) as f64 / 1e3;
    let budget = BUDGET.as_secs_f64() * 1e6;
    Row {
        name: "watchdog_p99".into(),
        mode,
        value: p99,
        unit: "us",
        baseline: Some(("budget".into(), budget)),
        ratio: Some(p99 / budget),
        target: Some((format!("<= {TARGET_STOP_US} us"), p99 <= TARGET_STOP_US)),
        paper: Some("a timeout \"safely set as low as 10 microseconds\" (section 3)"),
        more: vec![("p50_us", p50), ("max_us", max), ("stops", ns.len() as f64)],
    }
}

/// This thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own; the clock is
    // this thread's, which exists while it runs.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The neighbour's rate: `onEcho` batches for `phase` of this thread's
/// CPU time, alone and beside the runaway (one message each
/// [`RUNAWAY_EVERY`] of CPU time), interleaved `reps` times. Returns
/// (alone, beside) rates in messages per CPU second, per repetition, and
/// the stops made. Time in CPU seconds: a preempted thread neither runs
/// the neighbour nor feeds the runaway.
fn neighbour(
    rig: &mut Rig,
    reps: usize,
    phase: Duration,
) -> Result<(Vec<f64>, Vec<f64>, u64), String> {
    let echo = am("host_echo", OFF_EMPTY, 2, H_ECHO, 1);
    let before = rig.check()?;
    let (phase, every) = (phase.as_nanos() as u64, RUNAWAY_EVERY.as_nanos() as u64);
    let (mut alone, mut beside) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        for with in [false, true] {
            let cpu = thread_cpu_ns();
            let (mut now, mut next_spin) = (cpu, cpu + every);
            let mut msgs = 0usize;
            while now - cpu < phase {
                let spin = with && now >= next_spin;
                if spin {
                    next_spin += every;
                }
                rig.batch(&echo, BATCH, spin)?;
                msgs += BATCH;
                now = thread_cpu_ns();
            }
            let rate = msgs as f64 / ((now - cpu) as f64 / 1e9);
            if with {
                beside.push(rate);
            } else {
                alone.push(rate);
            }
        }
    }
    let after = rig.check()?;
    let stopped = after.terminated_for("timeout") - before.terminated_for("timeout");
    if after.invocations - before.invocations != stopped {
        return Err(format!(
            "{}: a runaway invocation ended otherwise",
            rig.mode
        ));
    }
    Ok((alone, beside, stopped))
}

fn bench(a: Args) -> Result<(), String> {
    let (reps, batches, nstops) = if a.quick {
        (3, 30, STOPS / 10)
    } else {
        (a.reps.max(1), a.batches.max(1), STOPS)
    };
    let phase = Duration::from_millis(if a.quick { 30 } else { 100 });
    let p = Progress::new();
    p.show("compiling the extensions");
    let classes = classes(a.sdk_dir.as_deref())?;
    let mut rigs = [
        Rig::new("compiled", true, &classes)?,
        Rig::new("interpreted", false, &classes)?,
    ];
    let vs = variants(&rigs[0]);
    rigs[0].wait_compiled(&vs)?;
    let mut by_rig: Vec<Vec<Rep>> = vec![Vec::new(), Vec::new()];
    for r in 0..reps {
        for (i, rig) in rigs.iter_mut().enumerate() {
            p.show(&format!(
                "{}: costs, repetition {} of {reps}",
                rig.mode,
                r + 1
            ));
            by_rig[i].push(rep(rig, batches)?);
        }
    }
    let mut rows = Vec::new();
    for (rig, reps) in rigs.iter().zip(&by_rig) {
        rows.extend(cost_rows(rig.mode, reps));
    }
    let mut stop_ns = Vec::new();
    for rig in rigs.iter_mut() {
        let ns = stops(rig, nstops, &p)?;
        rows.push(watchdog_row(rig.mode, &ns));
        stop_ns.push((rig.mode, ns));
    }
    p.show("compiled: the neighbour's rate");
    let (alone, beside, stopped) = neighbour(&mut rigs[0], reps, phase)?;
    let share = median_f64(
        &beside
            .iter()
            .zip(&alone)
            .map(|(b, a)| b / a)
            .collect::<Vec<_>>(),
    );
    rows.push(Row {
        name: "neighbour_rate".into(),
        mode: "compiled",
        value: median_f64(&beside) / 1e6,
        unit: "M msg/cpu-s",
        baseline: Some(("alone".into(), median_f64(&alone) / 1e6)),
        ratio: Some(share),
        target: Some((
            format!(">= {:.0} % of alone", TARGET_SHARE * 100.0),
            share >= TARGET_SHARE,
        )),
        paper: None,
        more: vec![
            ("runaway_every_ms", RUNAWAY_EVERY.as_secs_f64() * 1e3),
            ("stops", stopped as f64),
        ],
    });
    let opts = Opts {
        reps,
        quick: a.quick,
    };
    for (what, f) in MORE_ROWS {
        p.show(what);
        rows.extend(f(&opts)?);
    }
    p.clear();
    if a.json {
        for r in &rows {
            println!("{}", row_json(r));
        }
    } else {
        print_table(&rows, reps, batches);
    }
    if let Some(path) = &a.svg {
        write_svg(&stop_ns, path)?;
    }
    Ok(())
}

fn row_json(r: &Row) -> serde_json::Value {
    let mut v = json!({
        "row": r.name,
        "mode": r.mode,
        "value": r.value,
        "unit": r.unit,
        "baseline": r.baseline.as_ref().map(|b| &b.0),
        "baseline_value": r.baseline.as_ref().map(|b| b.1),
        "ratio": r.ratio,
        "target": r.target.as_ref().map(|t| &t.0),
        "target_met": r.target.as_ref().map(|t| t.1),
        "paper": r.paper,
    });
    for (k, x) in &r.more {
        v[*k] = json!(x);
    }
    v
}

fn print_table(rows: &[Row], reps: usize, batches: usize) {
    println!(
        "SPINE's runtime in the engine (medians of {reps} interleaved repetitions of \
         {batches} batches of {BATCH}; release build, this machine)"
    );
    println!(
        "{:<22} {:<12} {:>12} {:<6} {:>20} {:>12} {:>8}  target",
        "row", "mode", "value", "unit", "baseline", "", "ratio"
    );
    for r in rows {
        let (bn, bv) = r
            .baseline
            .as_ref()
            .map_or((String::new(), String::new()), |(n, v)| {
                (n.clone(), format!("{v:.2}"))
            });
        let target = r.target.as_ref().map_or(String::new(), |(t, met)| {
            format!("{t} ({})", if *met { "met" } else { "missed" })
        });
        println!(
            "{:<22} {:<12} {:>12.2} {:<6} {:>20} {:>12} {:>8}  {target}",
            r.name,
            r.mode,
            r.value,
            r.unit,
            bn,
            bv,
            r.ratio.map_or(String::new(), |x| format!("{x:.2}x")),
        );
        for (k, x) in &r.more {
            println!("{:<22} {:<12} {:>12.2} {k}", "", "", x);
        }
        if let Some(paper) = r.paper {
            println!("{:<22} {:<12} paper: {paper}", "", "");
        }
    }
}

/// Stop times the plot shows, µs (a few stops of a preempted thread
/// take milliseconds: they are counted in the legend, not drawn).
const PLOT_MAX_US: f64 = 40.0;

/// The distribution of the stop times, per mode, as an SVG.
fn write_svg(stops: &[(&'static str, Vec<u64>)], path: &Path) -> Result<(), String> {
    let lines = stops
        .iter()
        .map(|(mode, ns)| {
            let mut s = ns.clone();
            s.sort_unstable();
            let n = s.len().max(1) as f64;
            let step = (s.len() / 500).max(1);
            let beyond = s.iter().filter(|&&v| v as f64 / 1e3 > PLOT_MAX_US).count();
            let points = s
                .iter()
                .enumerate()
                .filter(|(i, _)| i % step == 0 || *i + 1 == s.len())
                .map(|(i, v)| (*v as f64 / 1e3, 100.0 * (i + 1) as f64 / n))
                .filter(|(us, _)| *us <= PLOT_MAX_US)
                .collect();
            Series {
                name: format!("{mode} ({beyond} of {} beyond {PLOT_MAX_US} us)", s.len()),
                points,
            }
        })
        .collect();
    plot::write_svg(
        &Figure {
            title: "SPINE watchdog: a runaway's stop time from its start (budget 10 us)",
            x_desc: "stop time (us)",
            y_desc: "stops within (%)",
            lines,
            paper: Vec::new(),
            scale: Scale::Linear,
        },
        path,
    )
}
