//! `unet bench floor`: the same floor ring round trip and stream run
//! between two threads and between two processes, in modes that each
//! change one thing, to find what makes two processes slower than two
//! threads:
//!
//! - `threads`: two threads of this process, one mapping (the reference);
//! - `threads-two-maps`: two threads, each with its own mapping of the
//!   same `memfd` (two virtual addresses, the same pages), as two
//!   processes have;
//! - `fork`: a child forked without exec, which keeps the parent's
//!   mapping at the same address (two address spaces, the same layout);
//! - `fork-own-map`: a forked child that maps the `memfd` again, at
//!   another address, and uses that mapping;
//! - `exec`: a child started as `pingpong` and `stream` start theirs
//!   (`unet bench __child`, the descriptor inherited across exec).
//!
//! The modes run interleaved: each repetition runs every mode's round
//! trip and stream once, in an order rotated by one each repetition, and
//! the host's own floor (two cache lines between the two cores, see
//! `host_floor`) is measured just before every run, so that runs can be
//! compared with runs of the same placement of the two virtual cores.
//! This process is pinned to core 0 and the other side to core 1.

use std::process::ExitCode;
use std::time::Duration;

use clap::ValueEnum;
use serde_json::{json, Value};

use super::super::child::{pin_to, set_affinity, spawn_child, ChildKind};
use super::super::host_floor;
use super::super::net::parse_align;
use super::super::report::{finish, warn_if_busy};
use super::super::stats::{self, median_f64, percentile};
use super::{Geometry, Shm, Stalled};

type Res<T> = Result<T, String>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    Threads,
    ThreadsTwoMaps,
    Fork,
    ForkOwnMap,
    Exec,
}

impl Mode {
    const ALL: [Mode; 5] = [
        Mode::Threads,
        Mode::ThreadsTwoMaps,
        Mode::Fork,
        Mode::ForkOwnMap,
        Mode::Exec,
    ];

    fn name(self) -> &'static str {
        match self {
            Mode::Threads => "threads",
            Mode::ThreadsTwoMaps => "threads-two-maps",
            Mode::Fork => "fork",
            Mode::ForkOwnMap => "fork-own-map",
            Mode::Exec => "exec",
        }
    }
}

#[derive(clap::Args)]
#[command(after_help = "\
Each row: the mode's median round trip (pingpong) or messages per second \
(stream), each run's figure and the host floor measured just before it, and \
ratios to the `threads` mode: `ratio` of the medians, `ratio_paired` the \
median of each run against the threads run of the same repetition, \
`ratio_placed` each run against the threads run of the nearest host floor. \
For pingpong a ratio above 1 is slower, for stream below 1.")]
pub struct Args {
    /// Modes to run (comma list) [default: all].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub modes: Vec<Mode>,
    /// Message size in bytes.
    #[arg(long, default_value_t = 64, value_parser = stats::parse_size)]
    pub size: usize,
    /// Repetitions (each runs every mode once).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Timed round trips per run.
    #[arg(long, default_value_t = 20_000)]
    pub iters: usize,
    /// Untimed round trips before each run.
    #[arg(long, default_value_t = 1_000)]
    pub warmup: usize,
    /// Length of each stream run's timed part, in milliseconds (after a
    /// warm-up of a fifth of it).
    #[arg(long, default_value_t = 200)]
    pub time_ms: u64,
    /// Bytes of each ring (rounded to whole slots).
    #[arg(long, default_value = "1M", value_parser = stats::parse_size)]
    pub ring_bytes: usize,
    /// Record alignment in bytes (a power of two, 8 to 4096).
    #[arg(long, default_value_t = 64, value_parser = parse_align)]
    pub floor_align: usize,
    /// A short run (one repetition, few round trips) that checks the modes work.
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object per line per mode and test.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Test {
    Pingpong,
    Stream,
}

impl Test {
    fn name(self) -> &'static str {
        match self {
            Test::Pingpong => "pingpong",
            Test::Stream => "stream",
        }
    }
}

/// What a run is given: the test, the message size and how long to run.
#[derive(Clone, Copy)]
struct Plan {
    test: Test,
    size: usize,
    g: Geometry,
    warmup: usize,
    iters: usize,
    time: Duration,
}

/// One run's figure: the median round trip in µs (and every round trip
/// in ns), or messages per second.
struct Run {
    value: f64,
    ns: Vec<u64>,
}

pub fn run(a: Args) -> ExitCode {
    finish(bench(a))
}

fn bench(mut a: Args) -> Res<()> {
    if a.quick {
        a.reps = 1;
        a.iters = a.iters.min(500);
        a.warmup = a.warmup.min(50);
        a.time_ms = a.time_ms.min(20);
    }
    if a.reps == 0 || a.iters == 0 {
        return Err("--reps and --iters must be at least 1".into());
    }
    let modes = if a.modes.is_empty() {
        Mode::ALL.to_vec()
    } else {
        a.modes.clone()
    };
    warn_if_busy();
    pin_to(0)?;
    let load = loadavg();
    let mut rows = Vec::new();
    for test in [Test::Pingpong, Test::Stream] {
        let back = if test == Test::Pingpong { a.size } else { 8 };
        let plan = Plan {
            test,
            size: a.size,
            g: Geometry::new(a.size, back, a.ring_bytes, a.floor_align),
            warmup: a.warmup,
            iters: a.iters,
            time: Duration::from_millis(a.time_ms),
        };
        // runs[m][rep] and the host floor before each.
        let mut runs: Vec<Vec<Run>> = modes.iter().map(|_| Vec::new()).collect();
        let mut hosts: Vec<Vec<Option<f64>>> = modes.iter().map(|_| Vec::new()).collect();
        for rep in 0..a.reps {
            for k in 0..modes.len() {
                let m = (k + rep) % modes.len();
                hosts[m].push(host_floor::probe());
                runs[m].push(run_mode(modes[m], plan)?);
            }
        }
        let reference = modes.iter().position(|&m| m == Mode::Threads);
        for (m, &mode) in modes.iter().enumerate() {
            let base = reference.map(|r| (&runs[r], &hosts[r]));
            let row = row(plan, mode, (&runs[m], &hosts[m]), base, load);
            if a.json {
                println!("{row}");
            } else {
                print_line(&row);
            }
            rows.push(row);
        }
    }
    if !a.json {
        println!(
            "ratio: to `threads` (pingpong: time, above 1 is slower; stream: rate, below 1 is \
             slower); host: the host floor's median round trip before the mode's runs; \
             load average {}",
            load.map_or("-".into(), |l| format!("{l:.2}"))
        );
    }
    Ok(())
}

/// A mode's JSON row: its figures beside the reference's (`threads`).
fn row(
    p: Plan,
    mode: Mode,
    (runs, hosts): (&[Run], &[Option<f64>]),
    base: Option<(&Vec<Run>, &Vec<Option<f64>>)>,
    load: Option<f64>,
) -> Value {
    let vals: Vec<f64> = runs.iter().map(|r| r.value).collect();
    let median = figure(p.test, runs, 0.5);
    let p99 = (p.test == Test::Pingpong).then(|| figure(p.test, runs, 0.99));
    let (ratio, paired, placed) = match base {
        Some((b, bh)) => {
            let bv: Vec<f64> = b.iter().map(|r| r.value).collect();
            (
                Some(median / figure(p.test, b, 0.5)),
                stats::paired_ratio(&vals, &bv),
                stats::placed_ratio(&vals, hosts, &bv, bh),
            )
        }
        None => (None, None, None),
    };
    let (unit, median_key) = match p.test {
        Test::Pingpong => ("us", "median_us"),
        Test::Stream => ("msgs_per_s", "msgs_per_s"),
    };
    json!({
        "bench": "floor",
        "test": p.test.name(),
        "mode": mode.name(),
        "size": p.size,
        median_key: median,
        "p99_us": p99,
        "unit": unit,
        "runs": vals,
        "host_floor_ns": hosts,
        "host_floor_median_ns": stats::median_of_all(hosts),
        "reference": "threads",
        "ratio": ratio,
        "ratio_paired": paired,
        "ratio_placed": placed,
        "load": load,
    })
}

/// A mode's figure over its runs: the `q` percentile of every round
/// trip of every run in µs, as `pingpong` reports it, or the median of
/// the runs' messages per second.
fn figure(test: Test, runs: &[Run], q: f64) -> f64 {
    match test {
        Test::Pingpong => {
            let all: Vec<u64> = runs.iter().flat_map(|r| r.ns.iter().copied()).collect();
            percentile(&all, q) / 1000.0
        }
        Test::Stream => median_f64(&runs.iter().map(|r| r.value).collect::<Vec<_>>()),
    }
}

fn print_line(r: &Value) {
    let f = |k: &str, d: usize| {
        r[k].as_f64()
            .map_or("-".to_string(), |v| format!("{v:.d$}"))
    };
    let figure = if r["test"] == "pingpong" {
        format!("{} µs (p99 {})", f("median_us", 3), f("p99_us", 3))
    } else {
        format!(
            "{:.3} M msgs/s",
            r["msgs_per_s"].as_f64().unwrap_or(0.0) / 1e6
        )
    };
    println!(
        "{:<9} {:<17} {:<28} ratio {} paired {} placed {}  host {} ns",
        r["test"].as_str().unwrap_or(""),
        r["mode"].as_str().unwrap_or(""),
        figure,
        f("ratio", 2),
        f("ratio_paired", 2),
        f("ratio_placed", 2),
        f("host_floor_median_ns", 0),
    );
}

fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// This side of a run (the sender, which times).
fn near(p: Plan, shm: &Shm) -> Result<Run, Stalled> {
    match p.test {
        Test::Pingpong => {
            let limit = Duration::from_secs(5);
            let s = super::pingpong(shm, p.g, (p.size, p.warmup, p.iters), limit, || {})?;
            Ok(Run {
                value: s.median_us(),
                ns: s.ns,
            })
        }
        Test::Stream => {
            let r = super::stream(shm, p.g, p.size, 0, p.time / 5, p.time)?;
            Ok(Run {
                value: r.msgs_per_s(),
                ns: Vec::new(),
            })
        }
    }
}

/// The other side of a run (echo or receiver), on core 1.
fn far(p: Plan, shm: &Shm) -> Result<(), String> {
    set_affinity(1).map_err(|e| format!("pinning to core 1: {e}"))?;
    match p.test {
        Test::Pingpong => super::pingpong_child(shm, p.g, p.size),
        Test::Stream => super::stream_child(shm, p.g, p.size, 0),
    }
    .map_err(|e| e.to_string())
}

fn run_mode(mode: Mode, p: Plan) -> Res<Run> {
    let shm = Shm::create(p.g.total_len()).map_err(|e| format!("shared memory: {e}"))?;
    match mode {
        Mode::Threads => threads(p, &shm, &shm),
        Mode::ThreadsTwoMaps => {
            let other = shm.alias().map_err(|e| format!("second mapping: {e}"))?;
            assert_ne!(other.addr(), shm.addr());
            threads(p, &shm, &other)
        }
        Mode::Fork => forked(p, &shm, false),
        Mode::ForkOwnMap => forked(p, &shm, true),
        Mode::Exec => {
            let kind = match p.test {
                Test::Pingpong => ChildKind::FloorPingpong,
                Test::Stream => ChildKind::FloorStream,
            };
            let extra = ["--geom".to_string(), p.g.to_arg()];
            let ch = spawn_child(kind, p.size, 0, &extra, Some(&shm), true)?;
            let r = near(p, &shm).map_err(|e| e.to_string());
            ch.wait(r)
        }
    }
}

/// A run between this thread (on `mine`) and a thread on core 1 (on `its`).
fn threads(p: Plan, mine: &Shm, its: &Shm) -> Res<Run> {
    std::thread::scope(|s| {
        let other = s.spawn(|| far(p, its));
        let r = near(p, mine).map_err(|e| e.to_string());
        let o = other
            .join()
            .unwrap_or_else(|_| Err("the other thread panicked".into()));
        let r = r?;
        o.map(|()| r)
    })
}

/// A run between this process and a child forked without exec, which
/// uses the inherited mapping or (`own_map`) a mapping of its own.
fn forked(p: Plan, shm: &Shm, own_map: bool) -> Res<Run> {
    wait_single_threaded()?;
    // SAFETY: this process has one thread (checked just above), so no
    // lock of the allocator or of the standard library is held by a
    // thread that the child would not have; the child runs only the
    // far side of the ring (allocating, pinning, spinning) and leaves
    // with _exit, never returning into the caller's frames.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let r = if own_map {
                shm.alias()
                    .map_err(|e| format!("mapping again: {e}"))
                    .and_then(|m| far(p, &m))
            } else {
                far(p, shm)
            };
            if let Err(e) = &r {
                eprintln!("unet bench floor: forked child: {e}");
            }
            r.is_ok()
        }));
        // SAFETY: _exit ends the child at once, without running the
        // parent's atexit handlers or flushing its copied buffers.
        unsafe { libc::_exit(if ok.unwrap_or(false) { 0 } else { 1 }) };
    }
    let r = near(p, shm).map_err(|e| e.to_string());
    if r.is_err() {
        // SAFETY: signals our own child, which has not been reaped yet.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let mut st = 0;
    // SAFETY: waits for our own child; `st` is a valid out-parameter.
    if unsafe { libc::waitpid(pid, &mut st, 0) } != pid {
        return Err(format!("waitpid: {}", std::io::Error::last_os_error()));
    }
    let r = r?;
    if !(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0) {
        return Err(format!("the forked child failed (status {st:#x})"));
    }
    Ok(r)
}

/// Waits (up to a second) until this process has one thread: the host
/// floor's threads have been joined but may take a moment to leave.
fn wait_single_threaded() -> Res<()> {
    for _ in 0..1000 {
        let n = std::fs::read_dir("/proc/self/task")
            .map_err(|e| format!("/proc/self/task: {e}"))?
            .count();
        if n == 1 {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Err("cannot fork: this process still has other threads".into())
}
