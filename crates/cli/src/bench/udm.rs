//! `unet bench udm`: the UDM paper's Tables 4 and 5 and Figures 7-10,
//! regenerated.
//!
//! - `table4`: the fast path's cost to send (`inject`) and to receive
//!   (`extract`, polling) a null message: batches of messages between two
//!   nodes of one job in this thread (a fast ring of 1024 messages, so
//!   none waits), per message. Beside it, in the same run and interleaved,
//!   the one-way time (half a round trip) between two processes, UDM
//!   against the endpoint direct path (`unet bench pingpong --path
//!   direct`'s code, 8-byte messages).
//! - `table5`: the buffered path. The receiver is switched to buffered
//!   mode the way the tests do it (its fast ring, of 2 messages, is
//!   filled); then batches of null messages go through the engine into its
//!   virtual buffer (insertion: from the first inject until the engine's
//!   `buffered_msgs` says all are in) and are extracted from there; the
//!   same messages by the fast path in the same run. The first write to a
//!   page of a memory file like the buffer's, and its return, are measured
//!   beside, each on its own (the buffer takes a fresh page every 32
//!   messages): the insert less a 32nd of a first write is the typical
//!   insert the paper's 180 cycles count. Ratios: buffered (inject,
//!   insert, extract, pages back) over fast (inject, extract) per null
//!   message; and in the paper's terms, typical insert and extract over
//!   the fast receive with the upcall. The target is 2.5 or less.
//! - `fig7-8`: `barrier`, `enum` and `kv` (see `udm_node`) multiprogrammed
//!   against a null job under the gang scheduler (`gang`), for each skew:
//!   the share of messages taken from the virtual buffer, the runtime
//!   relative to zero skew, and the most buffer pages any node used.
//! - `fig9-10`: synth-N for N = 10, 100, 1000 at a small skew: the share
//!   buffered against the mean interval between sends, and against an
//!   added cost per buffered message.
//!
//! Node processes are `unet bench __udm-node`, joined by the job's ticket
//! through the control socket of an engine embedded in this process.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use serde_json::{json, Value};
use unet::udm::{JobConfig, Mode, Node, UdmCounter, MAX_WORDS};
use unet::{Engine, EngineConfig, Session};

use super::child::{PathArg, TempDir};
use super::gang::{Gang, GangConfig};
use super::plot::{self, Figure, Scale, Series};
use super::report::Progress;
use super::stats::{self, median_f64};
use super::udm_node::{self, App};
use super::unet_paths;

type Res<T> = Result<T, String>;

/// The paper's processor: a 20 MHz Sparcle (50 ns a cycle).
const PAPER_NS_PER_CYCLE: f64 = 50.0;

/// What to regenerate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum What {
    Table4,
    Table5,
    #[value(name = "fig7-8")]
    Fig78,
    #[value(name = "fig9-10")]
    Fig910,
    All,
}

/// The UDM paper's Tables 4-5 and Figures 7-10.
#[derive(clap::Args)]
#[command(after_help = "\
Table 4: inject and extract (polling) of a null message in ns, beside the \
one-way time of UDM and of the endpoint direct path between two processes, \
measured in the same run; the paper's cycle counts (20 MHz Sparcle) as \
given and in ns. Table 5: insertion into the virtual buffer and extraction \
from it beside the fast path; target: buffered <= 2.5x fast per null \
message (the paper: 232 against 87 cycles, 2.7x). Figures 7-10 run the \
applications as real processes under a gang scheduler (SIGSTOP/SIGCONT) \
against a null job; SVGs go to --out.")]
pub struct Args {
    /// Which table or figure.
    #[arg(value_enum, default_value = "all")]
    pub what: What,
    /// Nodes of the applications' job (each node runs one process of the
    /// application and one of the null job) [default: the cores, at least
    /// 2].
    #[arg(long)]
    pub nodes: Option<u32>,
    /// Interleaved runs of every measurement [default: 5; 1 with --quick].
    #[arg(long)]
    pub runs: Option<usize>,
    /// Gang scheduler: one job's time slice, ms (the paper: 500 000
    /// cycles, 25 ms at 20 MHz).
    #[arg(long, default_value_t = 20)]
    pub slice_ms: u64,
    /// Figures 7-10: messages in each fast ring of the applications' job
    /// (the paper's network interface buffer; a sender that finds it full
    /// waits, and the engine switches a receiver that takes nothing for
    /// the atomicity timeout to buffered mode).
    #[arg(long, default_value_t = 64)]
    pub fast_queue: u32,
    /// Figures 7-8: skews in percent of a slice (comma list) [default:
    /// 0,2,5,10,20,40; 0,20 with --quick].
    #[arg(long, value_delimiter = ',')]
    pub skews: Option<Vec<f64>>,
    /// Figures 7-8: the applications (comma list).
    #[arg(long, value_delimiter = ',', default_value = "barrier,enum,kv")]
    pub apps: Vec<AppArg>,
    /// barrier: barriers [default: 1000000 (the paper: 10 000, but a
    /// barrier takes about a microsecond here, and the run must span many
    /// slices: some 30 of 20 ms, or the slices' phase swamps the skew's
    /// effect); 200 with --quick].
    #[arg(long)]
    pub barriers: Option<u64>,
    /// enum: pegs a side [default: 6; 5 with --quick].
    #[arg(long)]
    pub pegs: Option<u32>,
    /// kv: requests per node [default: 1000000, some 35 slices of 20 ms;
    /// 300 with --quick].
    #[arg(long)]
    pub kv_requests: Option<u64>,
    /// synth-N: N (comma list).
    #[arg(long, value_delimiter = ',', default_value = "10,100,1000")]
    pub synth_n: Vec<u64>,
    /// synth-N: requests per node [default: 20000; 1000 with --quick].
    #[arg(long)]
    pub synth_requests: Option<u64>,
    /// synth-N: time to serve one request, ns.
    #[arg(long, default_value_t = 2000)]
    pub handler_ns: u64,
    /// Figure 9: mean intervals between sends, ns (comma list) [default:
    /// 500,1000,2000,4000,8000,16000; 1000,8000 with --quick].
    #[arg(long, value_delimiter = ',')]
    pub intervals_ns: Option<Vec<u64>>,
    /// Figure 10: added costs per buffered message, ns (comma list)
    /// [default: 0,1000,2000,4000,8000; 0,4000 with --quick].
    #[arg(long, value_delimiter = ',')]
    pub costs_ns: Option<Vec<u64>>,
    /// Figure 10: the mean interval between sends, ns.
    #[arg(long, default_value_t = 3000)]
    pub cost_interval_ns: u64,
    /// Figures 9-10: the skew, percent of a slice (the paper: 1).
    #[arg(long, default_value_t = 1.0)]
    pub synth_skew: f64,
    /// Few, short runs: checks that everything works, measures little.
    #[arg(long)]
    pub quick: bool,
    /// One JSON object per line instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Directory for the SVG figures.
    #[arg(long, default_value = "udm-figures")]
    pub out: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AppArg {
    Barrier,
    Enum,
    Kv,
}

impl AppArg {
    fn app(self) -> App {
        match self {
            AppArg::Barrier => App::Barrier,
            AppArg::Enum => App::Enum,
            AppArg::Kv => App::Kv,
        }
    }
}

/// The settings after defaults.
struct Plan {
    a: Args,
    nodes: u32,
    runs: usize,
}

impl Plan {
    fn q<T>(&self, v: Option<T>, full: T, quick: T) -> T {
        v.unwrap_or(if self.a.quick { quick } else { full })
    }
}

pub fn run(a: Args) -> ExitCode {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get()) as u32;
    let p = Plan {
        nodes: a.nodes.unwrap_or(cores.max(2)),
        runs: a.runs.unwrap_or(if a.quick { 1 } else { 5 }).max(1),
        a,
    };
    match run_plan(&p) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("unet bench udm: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_plan(p: &Plan) -> Res<()> {
    if !(2..=64).contains(&p.nodes) {
        return Err(format!("--nodes {}: 2 to 64", p.nodes));
    }
    let all = p.a.what == What::All;
    if all || p.a.what == What::Table4 {
        table4(p)?;
    }
    if all || p.a.what == What::Table5 {
        table5(p)?;
    }
    if all || p.a.what == What::Fig78 {
        fig78(p)?;
    }
    if all || p.a.what == What::Fig910 {
        fig910(p)?;
    }
    Ok(())
}

fn err(what: &str) -> impl Fn(unet::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// An engine embedded in this process with a control socket in a fresh
/// directory (field order is drop order).
struct Host {
    session: Session,
    _engine: Engine,
    dir: TempDir,
}

impl Host {
    fn start() -> Res<Host> {
        let dir = TempDir::new()?;
        let engine = Engine::start(EngineConfig {
            control_socket: Some(dir.0.join("control")),
            ..EngineConfig::default()
        })
        .map_err(|e| format!("starting the engine: {e}"))?;
        let session = Session::embedded(&engine).map_err(err("session"))?;
        Ok(Host {
            session,
            _engine: engine,
            dir,
        })
    }

    fn socket(&self) -> PathBuf {
        self.dir.0.join("control")
    }
}

// ---------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------

/// The rows of Table 4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum T4 {
    /// inject of a null message (fast path).
    Send,
    /// extract of a null message by polling (fast path).
    ReceivePoll,
    /// Receive with an asynchronous upcall (the paper's interrupt column:
    /// 87 cycles with hard atomicity): the polling extract plus what the
    /// upcall adds to a round trip between two threads of one process
    /// (the spinning upcall's less polling's; no less than nothing).
    ReceiveUpcall,
    /// A round trip between two threads of one process, each taking the
    /// message by polling (the base of the upcall rows).
    ThreadsPoll,
    /// The same, the far thread answering from an upcall on a spinning
    /// handler thread.
    ThreadsUpcall,
    /// The same, the upcall waking a sleeping handler thread (futex).
    ThreadsUpcallWake,
    /// Half a round trip between two processes, UDM.
    OneWay,
    /// Half a round trip between two processes, endpoint direct path.
    DirectOneWay,
}

impl T4 {
    /// Every row, in the table's order.
    const ALL: [T4; 8] = [
        T4::Send,
        T4::ReceivePoll,
        T4::ReceiveUpcall,
        T4::ThreadsPoll,
        T4::ThreadsUpcall,
        T4::ThreadsUpcallWake,
        T4::OneWay,
        T4::DirectOneWay,
    ];

    fn name(self) -> &'static str {
        match self {
            T4::Send => "send (inject)",
            T4::ReceivePoll => "receive (extract, polling)",
            T4::ReceiveUpcall => "receive (upcall)",
            T4::ThreadsPoll => "round trip, two threads, polling",
            T4::ThreadsUpcall => "round trip, two threads, upcall",
            T4::ThreadsUpcallWake => "round trip, two threads, woken upcall",
            T4::OneWay => "one-way, UDM, two processes",
            T4::DirectOneWay => "one-way, endpoint direct path",
        }
    }

    fn key(self) -> &'static str {
        match self {
            T4::Send => "send",
            T4::ReceivePoll => "receive_polling",
            T4::ReceiveUpcall => "receive_upcall",
            T4::ThreadsPoll => "round_trip_threads_polling",
            T4::ThreadsUpcall => "round_trip_threads_upcall",
            T4::ThreadsUpcallWake => "round_trip_threads_upcall_woken",
            T4::OneWay => "one_way_udm",
            T4::DirectOneWay => "one_way_direct",
        }
    }

    /// The paper's cycles (hard atomicity column).
    fn paper(self) -> Option<f64> {
        match self {
            T4::Send => Some(7.0),
            T4::ReceivePoll => Some(9.0),
            T4::ReceiveUpcall => Some(87.0),
            _ => None,
        }
    }
}

fn paper_cols(c: Option<f64>) -> (String, String) {
    match c {
        Some(c) => (format!("{c:.0}"), format!("{:.0}", c * PAPER_NS_PER_CYCLE)),
        None => ("-".into(), "-".into()),
    }
}

fn emit_row(p: &Plan, v: Value) {
    if p.a.json {
        println!("{v}");
    }
}

// ---------------------------------------------------------------------------
// Table 4
// ---------------------------------------------------------------------------

/// Null messages per timed batch.
const BATCH: usize = 1000;

/// Per-message inject and extract times (ns) of `batches` batches between
/// two nodes of one job in this thread.
fn fast_batches(h: &Host, batches: usize) -> Res<(Vec<f64>, Vec<f64>)> {
    let t = h
        .session
        .udm_create_job(&JobConfig {
            nodes: 2,
            fast_queue: 1024,
            ..JobConfig::default()
        })
        .map_err(err("udm job"))?;
    let mut a = h.session.udm_join(t, 0).map_err(err("join"))?;
    let mut b = h.session.udm_join(t, 1).map_err(err("join"))?;
    let mut w = [0u64; MAX_WORDS];
    let (mut inj, mut ext) = (Vec::new(), Vec::new());
    for i in 0..batches + 2 {
        let t0 = Instant::now();
        for _ in 0..BATCH {
            a.inject(1, 7, &[]).map_err(|e| format!("inject: {e}"))?;
        }
        let t1 = Instant::now();
        for _ in 0..BATCH {
            b.extract(&mut w).map_err(|e| format!("extract: {e}"))?;
        }
        let t2 = Instant::now();
        // The first two batches warm up.
        if i >= 2 {
            inj.push((t1 - t0).as_nanos() as f64 / BATCH as f64);
            ext.push((t2 - t1).as_nanos() as f64 / BATCH as f64);
        }
    }
    if b.stats().fast_msgs != ((batches + 2) * BATCH) as u64 {
        return Err("the fast batches did not all take the fast path".into());
    }
    Ok((inj, ext))
}

/// A node process (`unet bench __udm-node`), killed when dropped.
struct NodeProc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl NodeProc {
    /// Starts one running `app` as rank `rank` of job `t` of `h`'s engine
    /// (no job for the null application) and waits for its `ready`.
    fn spawn(
        job: Option<(&Host, unet::udm::JobTicket)>,
        rank: u32,
        extra: &[String],
        app: App,
    ) -> Res<NodeProc> {
        let exe = std::env::current_exe().map_err(|e| format!("current executable: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.args(["bench", "__udm-node", "--app", app.name()])
            .args(["--rank", &rank.to_string()])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        if let Some((h, t)) = job {
            cmd.arg("--socket").arg(h.socket());
            cmd.args(["--ticket", &t.to_string()]);
        }
        let mut child = cmd.spawn().map_err(|e| format!("starting a node: {e}"))?;
        let out = child.stdout.take().ok_or("no stdout")?;
        let stdin = child.stdin.take();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut n = NodeProc {
            child,
            stdin,
            lines: rx,
        };
        n.expect("ready", Duration::from_secs(20))?;
        Ok(n)
    }

    /// Waits for a line starting with `what`; returns the rest.
    fn expect(&mut self, what: &str, t: Duration) -> Res<String> {
        let end = Instant::now() + t;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    if let Some(rest) = l.strip_prefix(what) {
                        return Ok(rest.trim().to_string());
                    }
                }
                Err(_) => {
                    return Err(format!(
                        "a node process did not say {what:?} (exit: {:?})",
                        self.child.try_wait().ok().flatten()
                    ))
                }
            }
        }
    }

    fn go(&mut self) -> Res<()> {
        let s = self.stdin.as_mut().ok_or("stdin")?;
        s.write_all(b"go\n")
            .and_then(|()| s.flush())
            .map_err(|e| format!("starting a node: {e}"))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for NodeProc {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child, not yet reaped (so its id is
        // not reused): a process left stopped by the gang scheduler is
        // continued before it is killed.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGCONT);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Round trips (ns) of a null message between this process and a `pong`
/// node in another.
fn udm_pingpong(iters: usize) -> Res<Vec<u64>> {
    let h = Host::start()?;
    let t = h
        .session
        .udm_create_job(&JobConfig {
            nodes: 2,
            ..JobConfig::default()
        })
        .map_err(err("udm job"))?;
    let mut me = h.session.udm_join(t, 0).map_err(err("join"))?;
    let mut peer = NodeProc::spawn(Some((&h, t)), 1, &[], App::Pong)?;
    peer.go()?;
    let mut w = [0u64; MAX_WORDS];
    let mut rt = |me: &mut Node| -> Res<()> {
        me.inject(1, udm_node::PING, &[])
            .map_err(|e| format!("inject: {e}"))?;
        let t = Instant::now();
        while !me.message_available() {
            if t.elapsed() > Duration::from_secs(10) {
                return Err("no answer from the pong node".into());
            }
        }
        me.extract(&mut w).map_err(|e| format!("extract: {e}"))?;
        Ok(())
    };
    for _ in 0..iters / 10 + 10 {
        rt(&mut me)?;
    }
    let s = stats::time_round_trips(iters, Duration::from_secs(5), || rt(&mut me))?;
    me.inject(1, udm_node::FIN, &[])
        .map_err(|e| format!("inject: {e}"))?;
    peer.expect("done", Duration::from_secs(10))?;
    Ok(s.ns)
}

fn direct_pingpong(iters: usize) -> Res<Vec<u64>> {
    let r = unet_paths::Run {
        path: PathArg::Direct,
        size: 8,
        burst: 0,
        batch: 1,
        warmup: iters / 10 + 10,
        iters,
        limit: Duration::from_secs(5),
        warmup_time: Duration::ZERO,
        pin: false,
        max_datagram: 1472,
        spin_us: None,
        applet: None,
        counters: false,
        buffered: None,
    };
    Ok(unet_paths::pingpong(&r)?.ns)
}

fn table4(p: &Plan) -> Res<()> {
    let prog = Progress::new();
    let batches = if p.a.quick { 20 } else { 200 };
    let iters = if p.a.quick { 2000 } else { 20000 };
    let h = Host::start()?;
    let (mut inj, mut ext, mut ow, mut dow) = (vec![], vec![], vec![], vec![]);
    let (mut tp, mut tu, mut tw, mut rup) = (vec![], vec![], vec![], vec![]);
    for r in 0..p.runs {
        prog.show(&format!("table 4: run {}/{}", r + 1, p.runs));
        let (i, e) = fast_batches(&h, batches)?;
        let e = median_f64(&e);
        inj.push(median_f64(&i));
        ext.push(e);
        let u = unet::udm::bench::upcall_latency(&h.session, iters / 4)
            .map_err(err("upcall latency"))?;
        tp.push(u.poll_round_trip_ns);
        tu.push(u.upcall_round_trip_ns);
        tw.push(u.upcall_wake_round_trip_ns);
        // One of the two ways differs: the upcall's cost over polling.
        rup.push(e + (u.upcall_round_trip_ns - u.poll_round_trip_ns).max(0.0));
        let u = udm_pingpong(iters)?;
        ow.push(stats::percentile(&u, 0.5) / 2.0);
        let d = direct_pingpong(iters)?;
        dow.push(stats::percentile(&d, 0.5) / 2.0);
    }
    prog.clear();
    // The rows measured.
    let measured = |k: T4| -> Option<&Vec<f64>> {
        match k {
            T4::Send => Some(&inj),
            T4::ReceivePoll => Some(&ext),
            T4::ReceiveUpcall => Some(&rup),
            T4::ThreadsPoll => Some(&tp),
            T4::ThreadsUpcall => Some(&tu),
            T4::ThreadsUpcallWake => Some(&tw),
            T4::OneWay => Some(&ow),
            T4::DirectOneWay => Some(&dow),
        }
    };
    let rows: Vec<(T4, f64, &Vec<f64>)> = T4::ALL
        .iter()
        .filter_map(|&k| measured(k).map(|r| (k, median_f64(r), r)))
        .collect();
    let direct = median_f64(&dow);
    if !p.a.json {
        println!(
            "Table 4: the fast path, null message (median of {} runs; ns)",
            p.runs
        );
        println!(
            "{:<36} {:>9}  {:>10} {:>10}  {:>8}",
            "", "ns", "paper cyc", "paper ns", "/direct"
        );
    }
    for (k, ns, runs) in rows {
        let (pc, pn) = paper_cols(k.paper());
        let vs = ns / direct;
        if !p.a.json {
            println!(
                "{:<36} {:>9.1}  {:>10} {:>10}  {:>8.3}",
                k.name(),
                ns,
                pc,
                pn,
                vs
            );
        }
        emit_row(
            p,
            json!({
                "bench": "udm", "table": 4, "row": k.key(), "ns": ns, "runs_ns": runs,
                "paper_cycles": k.paper(), "paper_ns": k.paper().map(|c| c * PAPER_NS_PER_CYCLE),
                "baseline": "one_way_direct", "baseline_ns": direct, "ratio": vs,
            }),
        );
    }
    if !p.a.json {
        println!(
            "send + receive = {:.1} ns against the direct path's one way {:.1} ns ({:.3}x); \
             the paper: send 7 + receive 9 cycles (polling), 87 with the upcall",
            median_f64(&inj) + median_f64(&ext),
            direct,
            (median_f64(&inj) + median_f64(&ext)) / direct
        );
        println!();
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Table 5
// ---------------------------------------------------------------------------

/// Messages in a node's divert ring to the engine.
const DIVERT_RING: u64 = 256;

/// A CPU-time clock's reading, ns.
fn cpu_clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own; a clock that
    // does not exist (a thread gone) leaves it zero.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// This thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    cpu_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The CPU clocks of this process's engine threads (named `unet-engine`):
/// Linux's clock for thread `tid` is `(!tid << 3) | 6` (its scheduler
/// clock, per thread), read exactly even while the thread runs.
fn engine_clocks() -> Vec<libc::clockid_t> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return vec![];
    };
    dir.flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("comm"))
                .is_ok_and(|c| c.trim_end() == "unet-engine")
        })
        .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .map(|tid| (!tid << 3) | 6)
        .collect()
}

fn engines_cpu_ns(clocks: &[libc::clockid_t]) -> u64 {
    clocks.iter().map(|&c| cpu_clock_ns(c)).sum()
}

/// One run of the buffered path: per message, the sender's injects, the
/// insertion (first inject until the engine has them all in the buffer)
/// and the extraction from the buffer; and the same messages' fast path
/// (inject + extract) beside.
struct T5Run {
    /// CPU time per message: the sender's injects in buffered mode, the
    /// engine's insertion, the receiver's extraction from the buffer, and
    /// the fast path's inject + extract.
    divert_inject: f64,
    insert: f64,
    extract: f64,
    /// The engine's CPU while the receiver extracts: giving pages back.
    page_return: f64,
    fast: f64,
    /// Wall time per message from the first inject until the engine had
    /// them all in the buffer.
    insert_wall: f64,
    pages_max: u64,
}

fn buffered_run(h: &Host, k: usize) -> Res<T5Run> {
    let t = h
        .session
        .udm_create_job(&JobConfig {
            nodes: 2,
            fast_queue: 2,
            buffer_size: 16 << 20,
            ..JobConfig::default()
        })
        .map_err(err("udm job"))?;
    let mut a = h.session.udm_join(t, 0).map_err(err("join"))?;
    let mut b = h.session.udm_join(t, 1).map_err(err("join"))?;
    let inject = |a: &mut Node| a.inject(1, 7, &[]).map_err(|e| format!("inject: {e}"));
    let mut w = [0u64; MAX_WORDS];
    // Fill the fast ring; the next inject waits until the engine switches
    // node 1 to buffered mode (it takes nothing for the atomicity timeout).
    inject(&mut a)?;
    inject(&mut a)?;
    inject(&mut a)?;
    if b.mode() != Mode::Buffered {
        return Err("node 1 did not switch to buffered mode".into());
    }
    let base = b.stats().engine(UdmCounter::BufferedMsgs);
    let clocks = engine_clocks();
    if clocks.is_empty() {
        return Err("no engine thread found in /proc/self/task".into());
    }
    let e0 = engines_cpu_ns(&clocks);
    // Batches of the divert ring's size: the sender fills the ring, then
    // waits (yielding its core, which the engine may need) until the
    // engine has moved the batch into the buffer. The sender never waits
    // for room in the ring, so the figure is the two costs, not a wait
    // policy's.
    let t0 = Instant::now();
    let mut sending = 0u64;
    let mut sent = 0u64;
    while sent < k as u64 {
        let n = (k as u64 - sent).min(DIVERT_RING);
        let s = thread_cpu_ns();
        for _ in 0..n {
            let mut tries = 0u32;
            while !a.injectc(1, 7, &[]).map_err(|e| format!("inject: {e}"))? {
                tries += 1;
                if tries.is_multiple_of(64) {
                    std::thread::yield_now();
                }
            }
        }
        sending += thread_cpu_ns() - s;
        sent += n;
        let mut polls = 0u32;
        while b.stats().engine(UdmCounter::BufferedMsgs) < base + sent {
            if t0.elapsed() > Duration::from_secs(20) {
                return Err("the engine did not buffer the messages".into());
            }
            polls += 1;
            if polls.is_multiple_of(64) {
                std::thread::yield_now();
            }
        }
    }
    let inserted = t0.elapsed();
    let engine_ns = engines_cpu_ns(&clocks) - e0;
    // The two fast ones and the one that switched, untimed.
    for _ in 0..3 {
        b.extract(&mut w).map_err(|e| format!("extract: {e}"))?;
    }
    let before = b.stats().buffered_taken;
    let e1 = engines_cpu_ns(&clocks);
    let t3 = thread_cpu_ns();
    for _ in 0..k {
        b.extract(&mut w).map_err(|e| format!("extract: {e}"))?;
    }
    let extracted = thread_cpu_ns() - t3;
    // The engine gives the pages read back meanwhile, and all of them once
    // the buffer is empty.
    let t4 = Instant::now();
    while b.stats().engine(UdmCounter::BufferPages) > 0 {
        if t4.elapsed() > Duration::from_secs(20) {
            return Err("the engine did not give the buffer's pages back".into());
        }
        std::thread::yield_now();
    }
    let returned = engines_cpu_ns(&clocks) - e1;
    let st = b.stats();
    if st.buffered_taken - before != k as u64 {
        return Err(format!(
            "{} of {k} messages came from the buffer",
            st.buffered_taken - before
        ));
    }
    // Back in the fast case: as many messages, in pieces the ring holds.
    let f0 = thread_cpu_ns();
    let mut left = k;
    while left > 0 {
        let n = left.min(2);
        for _ in 0..n {
            inject(&mut a)?;
        }
        for _ in 0..n {
            b.extract(&mut w).map_err(|e| format!("extract: {e}"))?;
        }
        left -= n;
    }
    let fast = thread_cpu_ns() - f0;
    if b.mode() != Mode::Fast {
        return Err("node 1 did not return to the fast case".into());
    }
    let per = |ns: u64| ns as f64 / k as f64;
    Ok(T5Run {
        divert_inject: per(sending),
        insert: per(engine_ns),
        extract: per(extracted),
        page_return: per(returned),
        fast: per(fast),
        insert_wall: per(inserted.as_nanos() as u64),
        pages_max: st.engine(UdmCounter::BufferPagesMax),
    })
}

/// What a page of a virtual buffer costs, in ns: its first write (a
/// fresh memory file's shared mapping faulting in a zeroed page, as the
/// engine's insert meets it) and its return (`fallocate(PUNCH_HOLE)`, as
/// the engine gives pages back behind the reader), each the best of three
/// passes over `pages` pages.
struct PageCost {
    first_write: f64,
    given_back: f64,
}

fn fresh_page_ns(pages: usize) -> Res<PageCost> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    const PAGE: usize = 4096;
    let len = pages * PAGE;
    // SAFETY: memfd_create with a valid C string; the result is checked.
    let raw = unsafe { libc::memfd_create(c"unet-bench-page".as_ptr(), libc::MFD_CLOEXEC) };
    if raw < 0 {
        return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: a descriptor just made, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ftruncate on our memory file.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
        return Err(format!("ftruncate: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: a fresh shared mapping of our file, checked below, unmapped
    // at the end; nothing else maps it.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(format!("mmap: {}", std::io::Error::last_os_error()));
    }
    let mut best = PageCost {
        first_write: f64::MAX,
        given_back: f64::MAX,
    };
    for _ in 0..3 {
        let t = Instant::now();
        for i in 0..pages {
            // SAFETY: inside the mapping (i < pages): 128 bytes of page i.
            unsafe { std::ptr::write_bytes(p.cast::<u8>().add(i * PAGE), 1, 128) };
        }
        let written = t.elapsed();
        // SAFETY: fallocate on our memory file, within its size.
        unsafe {
            libc::fallocate(
                fd.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                0,
                len as libc::off_t,
            )
        };
        let per = |d: std::time::Duration| d.as_nanos() as f64 / pages as f64;
        best.first_write = best.first_write.min(per(written));
        best.given_back = best.given_back.min(per(t.elapsed() - written));
    }
    // SAFETY: the mapping made above, no longer used.
    unsafe { libc::munmap(p, len) };
    Ok(best)
}

fn table5(p: &Plan) -> Res<()> {
    let prog = Progress::new();
    let k = if p.a.quick { 4096 } else { 32768 };
    // The engine sleeps as soon as it has nothing to do (the default), so
    // its CPU time is the insertion's, wake-ups included.
    let h = Host::start()?;
    let mut runs = Vec::new();
    let mut page = Vec::new();
    let mut recv_upcall = Vec::new();
    for r in 0..p.runs * 3 {
        prog.show(&format!("table 5: run {}/{}", r + 1, p.runs * 3));
        runs.push(buffered_run(&h, k)?);
        page.push(fresh_page_ns(256)?);
        // The paper's fast path: a receive with the upcall (Table 4).
        let (_, e) = fast_batches(&h, 10)?;
        let u =
            unet::udm::bench::upcall_latency(&h.session, 2000).map_err(err("upcall latency"))?;
        recv_upcall.push(median_f64(&e) + (u.upcall_round_trip_ns - u.poll_round_trip_ns).max(0.0));
    }
    prog.clear();
    let m = |f: fn(&T5Run) -> f64| median_f64(&runs.iter().map(f).collect::<Vec<_>>());
    let (di, ins, ex, ret, fast, wall) = (
        m(|r| r.divert_inject),
        m(|r| r.insert),
        m(|r| r.extract),
        m(|r| r.page_return),
        m(|r| r.fast),
        m(|r| r.insert_wall),
    );
    let page_ns = median_f64(&page.iter().map(|c| c.first_write).collect::<Vec<_>>());
    let page_back_ns = median_f64(&page.iter().map(|c| c.given_back).collect::<Vec<_>>());
    let pages_max = runs.iter().map(|r| r.pages_max).max().unwrap_or(0);
    let buffered = di + ins + ex + ret;
    let ratio = buffered / fast;
    // In the paper's terms: a typical insert (its fresh page's share
    // left out, as the paper's 180 cycles leave it: a page's first write
    // every UDM_MSGS_PER_PAGE messages; its return is the engine's
    // `page_return`, not the insert's) and the extract, against the fast
    // path's receive with the upcall (its 87 cycles).
    let typical_insert = (ins - page_ns / unet_abi::udm::UDM_MSGS_PER_PAGE as f64).max(0.0);
    let fast_upcall = median_f64(&recv_upcall);
    let paper_terms = (typical_insert + ex) / fast_upcall;
    // Rows: (key, name, ns, paper cycles).
    let rows: [(&str, &str, f64, Option<f64>); 10] = [
        (
            "insert",
            "insert into the buffer (engine)",
            ins,
            Some(180.0),
        ),
        (
            "insert_typical",
            "  less the fresh pages' share",
            typical_insert,
            None,
        ),
        (
            "insert_fresh_page",
            "insert with a fresh page",
            typical_insert + page_ns,
            Some(3162.0),
        ),
        (
            "fresh_page",
            "  of which the page's first write",
            page_ns,
            None,
        ),
        (
            "page_back",
            "a page given back (fallocate)",
            page_back_ns,
            None,
        ),
        (
            "divert_inject",
            "inject in buffered mode (sender)",
            di,
            None,
        ),
        (
            "extract_buffered",
            "extract from the buffer",
            ex,
            Some(52.0),
        ),
        ("page_return", "pages given back (engine)", ret, None),
        ("fast", "fast path: inject + extract", fast, Some(87.0)),
        (
            "insert_wall",
            "insert, wall time (sender to buffer)",
            wall,
            None,
        ),
    ];
    if !p.a.json {
        println!(
            "Table 5: the buffered path, null message ({} messages a run, median of {} runs; \
             ns of CPU per message)",
            k,
            runs.len()
        );
        println!(
            "{:<36} {:>9}  {:>10} {:>10}",
            "", "ns", "paper cyc", "paper ns"
        );
        for (_, name, ns, pc) in rows {
            let (c, n) = paper_cols(pc);
            println!("{name:<36} {ns:>9.1}  {c:>10} {n:>10}");
        }
        println!(
            "buffered (inject + insert + extract + pages back) {buffered:.1} ns, fast (inject + \
             extract) \
             {fast:.1} ns: {ratio:.2}x (target <= 2.5x; the paper 232/87 cycles = 2.67x): {}",
            if ratio <= 2.5 { "met" } else { "missed" }
        );
        println!(
            "in the paper's terms: typical insert {typical_insert:.1} + extract {ex:.1} ns \
             against the fast receive with the upcall {fast_upcall:.1} ns: {paper_terms:.2}x \
             (the paper 2.67x; target <= 2.5x): {}",
            if paper_terms <= 2.5 { "met" } else { "missed" }
        );
        println!("buffer pages at most {pages_max} (16 MiB buffer, {k} messages)");
        println!();
    }
    for (key, _, ns, pc) in rows {
        emit_row(
            p,
            json!({"bench": "udm", "table": 5, "row": key, "ns": ns,
                   "paper_cycles": pc, "paper_ns": pc.map(|c| c * PAPER_NS_PER_CYCLE)}),
        );
    }
    emit_row(
        p,
        json!({"bench": "udm", "table": 5, "row": "ratio", "buffered_ns": buffered,
               "fast_ns": fast, "ratio": ratio, "target": 2.5, "met": ratio <= 2.5,
               "paper_ratio": 232.0 / 87.0, "messages": k, "runs": runs.len()}),
    );
    emit_row(
        p,
        json!({"bench": "udm", "table": 5, "row": "ratio_paper_terms",
               "typical_insert_ns": typical_insert, "extract_ns": ex,
               "fast_receive_upcall_ns": fast_upcall, "ratio": paper_terms, "target": 2.5,
               "met": paper_terms <= 2.5, "paper_ratio": 232.0 / 87.0}),
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Figures 7-10: applications under the gang scheduler
// ---------------------------------------------------------------------------

/// What one gang-scheduled run of an application gave.
#[derive(Clone, Debug)]
struct GangRun {
    runtime: f64,
    fast: u64,
    buffered: u64,
    pages_max: u64,
    /// Switches to buffered mode: a full fast ring (none since a full
    /// ring holds its sender instead), the atomicity timeout (messages
    /// waiting, none taken), a stopped node.
    switch_full: u64,
    switch_timeout: u64,
    switch_stopped: u64,
    results: Vec<Value>,
}

impl GangRun {
    fn buffered_pct(&self) -> f64 {
        100.0 * self.buffered as f64 / (self.fast + self.buffered).max(1) as f64
    }
}

/// Runs `app` on `p.nodes` node processes against as many null
/// processes, under the gang scheduler with `skew` (fraction of a slice).
fn gang_run(p: &Plan, app: App, extra: &[String], skew: f64) -> Res<GangRun> {
    let h = Host::start()?;
    let t = h
        .session
        .udm_create_job(&JobConfig {
            nodes: p.nodes,
            fast_queue: p.a.fast_queue,
            buffer_size: 16 << 20,
            ..JobConfig::default()
        })
        .map_err(err("udm job"))?;
    let mut apps = Vec::new();
    for r in 0..p.nodes {
        apps.push(NodeProc::spawn(Some((&h, t)), r, extra, app)?);
    }
    let mut nulls = Vec::new();
    for r in 0..p.nodes {
        nulls.push(NodeProc::spawn(None, r, &[], App::Null)?);
    }
    let gang = Gang::start(
        [
            apps.iter().map(NodeProc::pid).collect(),
            nulls.iter().map(NodeProc::pid).collect(),
        ],
        GangConfig {
            slice: Duration::from_millis(p.a.slice_ms),
            skew,
        },
    );
    let t0 = Instant::now();
    for a in &mut apps {
        a.go()?;
    }
    let mut rows = Vec::new();
    let mut end = t0;
    let limit = Duration::from_secs(if p.a.quick { 60 } else { 600 });
    for a in &mut apps {
        let rest = limit.saturating_sub(t0.elapsed());
        let line = a.expect("done", rest)?;
        end = end.max(Instant::now());
        rows.push(
            serde_json::from_str::<Value>(&line).map_err(|e| format!("a node's report: {e}"))?,
        );
    }
    gang.finish();
    drop(nulls);
    let u = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    Ok(GangRun {
        runtime: (end - t0).as_secs_f64(),
        fast: rows.iter().map(|v| u(v, "fast_msgs")).sum(),
        buffered: rows.iter().map(|v| u(v, "buffered_taken")).sum(),
        pages_max: rows
            .iter()
            .map(|v| u(v, "buffer_pages_max"))
            .max()
            .unwrap_or(0),
        switch_full: rows.iter().map(|v| u(v, "switch_queue_full")).sum(),
        switch_timeout: rows.iter().map(|v| u(v, "switch_atomicity_timeout")).sum(),
        switch_stopped: rows.iter().map(|v| u(v, "switch_descheduled")).sum(),
        results: rows.iter().map(|v| v["result"].clone()).collect(),
    })
}

/// A point of a figure: medians over the runs.
struct Point {
    x: f64,
    buffered_pct: f64,
    runtime: f64,
    msgs: f64,
    pages_max: u64,
    switch_full: f64,
    switch_timeout: f64,
    switch_stopped: f64,
}

fn median_point(x: f64, runs: &[GangRun]) -> Point {
    let med = |f: &dyn Fn(&GangRun) -> f64| median_f64(&runs.iter().map(f).collect::<Vec<_>>());
    Point {
        x,
        buffered_pct: med(&GangRun::buffered_pct),
        runtime: med(&|r| r.runtime),
        msgs: med(&|r| (r.fast + r.buffered) as f64),
        pages_max: runs.iter().map(|r| r.pages_max).max().unwrap_or(0),
        switch_full: med(&|r| r.switch_full as f64),
        switch_timeout: med(&|r| r.switch_timeout as f64),
        switch_stopped: med(&|r| r.switch_stopped as f64),
    }
}

fn app_extra(p: &Plan, app: App) -> Vec<String> {
    let (k, v) = match app {
        App::Barrier => ("--count", p.q(p.a.barriers, 1_000_000, 200)),
        App::Enum => ("--pegs", p.q(p.a.pegs, 6, 5) as u64),
        App::Kv => ("--count", p.q(p.a.kv_requests, 1_000_000, 300)),
        _ => return vec![],
    };
    vec![k.to_string(), v.to_string()]
}

/// What an application's run must have computed.
fn check_results(app: App, p: &Plan, r: &GangRun) -> Res<()> {
    if app == App::Enum {
        let got: u64 = r
            .results
            .iter()
            .map(|v| v["positions"].as_u64().unwrap_or(0))
            .sum();
        let want = match p.q(p.a.pegs, 6, 5) {
            5 => Some(3016),
            6 => Some(291_987),
            _ => None,
        };
        if want.is_some_and(|w| w != got) {
            return Err(format!("enum found {got} positions, not {want:?}"));
        }
    }
    Ok(())
}

fn fig78(p: &Plan) -> Res<()> {
    let prog = Progress::new();
    let skews = p.a.skews.clone().unwrap_or(if p.a.quick {
        vec![0.0, 20.0]
    } else {
        vec![0.0, 2.0, 5.0, 10.0, 20.0, 40.0]
    });
    if skews.iter().any(|s| !(0.0..100.0).contains(s)) {
        return Err("--skews: percentages from 0 to below 100".into());
    }
    let mut series = Vec::new();
    for &arg in &p.a.apps {
        let app = arg.app();
        let extra = app_extra(p, app);
        let mut by_skew: Vec<Vec<GangRun>> = vec![Vec::new(); skews.len()];
        for r in 0..p.runs {
            for (i, &s) in skews.iter().enumerate() {
                prog.show(&format!(
                    "figures 7-8: {} skew {s}% run {}/{}",
                    app.name(),
                    r + 1,
                    p.runs
                ));
                let g = gang_run(p, app, &extra, s / 100.0)?;
                check_results(app, p, &g)?;
                by_skew[i].push(g);
            }
        }
        let pts: Vec<Point> = skews
            .iter()
            .zip(&by_skew)
            .map(|(&s, runs)| median_point(s, runs))
            .collect();
        series.push((app, pts));
    }
    prog.clear();
    if !p.a.json {
        println!(
            "Figures 7-8: applications against a null job, gang-scheduled ({} nodes, {} ms slices, \
             fast rings of {}, median of {} runs; switches to buffered mode by cause)",
            p.nodes, p.a.slice_ms, p.a.fast_queue, p.runs
        );
        println!(
            "{:<8} {:>6}  {:>10} {:>10}  {:>9} {:>9}  {:>6}  {:>8} {:>8} {:>8}",
            "app",
            "skew%",
            "buffered%",
            "messages",
            "runtime s",
            "relative",
            "pages",
            "sw full",
            "sw time",
            "sw stop"
        );
    }
    for (app, pts) in &series {
        let base = pts.first().map_or(f64::NAN, |q| q.runtime);
        for q in pts {
            let rel = q.runtime / base;
            if !p.a.json {
                println!(
                    "{:<8} {:>6.1}  {:>10.2} {:>10.0}  {:>9.3} {:>9.3}  {:>6}  {:>8.0} {:>8.0} {:>8.0}",
                    app.name(),
                    q.x,
                    q.buffered_pct,
                    q.msgs,
                    q.runtime,
                    rel,
                    q.pages_max,
                    q.switch_full,
                    q.switch_timeout,
                    q.switch_stopped
                );
            }
            emit_row(
                p,
                json!({"bench": "udm", "figure": "7-8", "app": app.name(), "nodes": p.nodes,
                       "slice_ms": p.a.slice_ms, "skew_pct": q.x, "buffered_pct": q.buffered_pct,
                       "messages": q.msgs, "runtime_s": q.runtime, "relative_runtime": rel,
                       "pages_max": q.pages_max, "runs": p.runs, "paper_pages_max_below": 7,
                       "fast_queue": p.a.fast_queue, "switch_queue_full": q.switch_full,
                       "switch_atomicity_timeout": q.switch_timeout,
                       "switch_descheduled": q.switch_stopped}),
            );
        }
    }
    let pages = series
        .iter()
        .flat_map(|(_, v)| v.iter().map(|q| q.pages_max))
        .max()
        .unwrap_or(0);
    if !p.a.json {
        println!("most virtual buffer pages any node used: {pages} (the paper: under seven)");
        println!();
    }
    let lines = |f: fn(&Point, f64) -> f64| -> Vec<Series> {
        series
            .iter()
            .map(|(app, pts)| {
                let base = pts.first().map_or(f64::NAN, |q| q.runtime);
                Series {
                    name: app.name().to_string(),
                    points: pts.iter().map(|q| (q.x, f(q, base))).collect(),
                }
            })
            .collect()
    };
    std::fs::create_dir_all(&p.a.out).map_err(|e| format!("{}: {e}", p.a.out.display()))?;
    plot::write_svg(
        &Figure {
            title: &format!(
                "Figure 7: messages buffered against skew ({} nodes)",
                p.nodes
            ),
            x_desc: "skew (% of a time slice)",
            y_desc: "messages buffered (%)",
            lines: lines(|q, _| q.buffered_pct),
            paper: vec![],
            scale: Scale::Linear,
        },
        &p.a.out.join("figure7.svg"),
    )?;
    plot::write_svg(
        &Figure {
            title: &format!(
                "Figure 8: runtime relative to zero skew ({} nodes)",
                p.nodes
            ),
            x_desc: "skew (% of a time slice)",
            y_desc: "relative runtime",
            lines: lines(|q, base| q.runtime / base),
            paper: vec![],
            scale: Scale::Linear,
        },
        &p.a.out.join("figure8.svg"),
    )?;
    Ok(())
}

fn fig910(p: &Plan) -> Res<()> {
    let prog = Progress::new();
    let intervals = p.a.intervals_ns.clone().unwrap_or(if p.a.quick {
        vec![1000, 8000]
    } else {
        vec![500, 1000, 2000, 4000, 8000, 16000]
    });
    let costs = p.a.costs_ns.clone().unwrap_or(if p.a.quick {
        vec![0, 4000]
    } else {
        vec![0, 1000, 2000, 4000, 8000]
    });
    let reqs = p.q(p.a.synth_requests, 20_000, 1000);
    let skew = p.a.synth_skew / 100.0;
    if !(0.0..1.0).contains(&skew) {
        return Err("--synth-skew: a percentage from 0 to below 100".into());
    }
    let extra = |n: u64, interval: u64, cost: u64| -> Vec<String> {
        [
            ("--count", reqs),
            ("--group", n),
            ("--interval-ns", interval),
            ("--handler-ns", p.a.handler_ns),
            ("--buffer-cost-ns", cost),
        ]
        .iter()
        .flat_map(|(k, v)| [k.to_string(), v.to_string()])
        .collect()
    };
    // Per figure: per N, the points.
    type Curves = Vec<(u64, Vec<Point>)>;
    let mut figs: Vec<(u8, Curves)> = vec![(9, vec![]), (10, vec![])];
    for (fig, out) in figs.iter_mut() {
        let xs = if *fig == 9 { &intervals } else { &costs };
        for &n in &p.a.synth_n {
            let mut by_x: Vec<Vec<GangRun>> = vec![Vec::new(); xs.len()];
            for r in 0..p.runs {
                for (i, &x) in xs.iter().enumerate() {
                    prog.show(&format!(
                        "figure {fig}: synth-{n} x {x} run {}/{}",
                        r + 1,
                        p.runs
                    ));
                    let e = if *fig == 9 {
                        extra(n, x, 0)
                    } else {
                        extra(n, p.a.cost_interval_ns, x)
                    };
                    by_x[i].push(gang_run(p, App::Synth, &e, skew)?);
                }
            }
            let pts = xs
                .iter()
                .zip(&by_x)
                .map(|(&x, runs)| median_point(x as f64, runs))
                .collect();
            out.push((n, pts));
        }
    }
    prog.clear();
    std::fs::create_dir_all(&p.a.out).map_err(|e| format!("{}: {e}", p.a.out.display()))?;
    for (fig, out) in &figs {
        let (xname, xkey) = if *fig == 9 {
            ("mean interval between sends (ns)", "interval_ns")
        } else {
            ("added cost per buffered message (ns)", "added_cost_ns")
        };
        if !p.a.json {
            println!(
                "Figure {fig}: synth-N, messages buffered against the {} ({} nodes, skew {}%, \
                 handler {} ns{}, {} requests a node, median of {} runs)",
                if *fig == 9 {
                    "send interval"
                } else {
                    "buffered path's added cost"
                },
                p.nodes,
                p.a.synth_skew,
                p.a.handler_ns,
                if *fig == 10 {
                    format!(", interval {} ns", p.a.cost_interval_ns)
                } else {
                    String::new()
                },
                reqs,
                p.runs
            );
            println!(
                "{:<11} {:>13}  {:>10} {:>10}  {:>9}  {:>6}",
                "", xkey, "buffered%", "messages", "runtime s", "pages"
            );
        }
        for (n, pts) in out {
            for q in pts {
                if !p.a.json {
                    println!(
                        "synth-{n:<5} {:>13.0}  {:>10.2} {:>10.0}  {:>9.3}  {:>6}",
                        q.x, q.buffered_pct, q.msgs, q.runtime, q.pages_max
                    );
                }
                emit_row(
                    p,
                    json!({"bench": "udm", "figure": fig, "app": format!("synth-{n}"),
                           "nodes": p.nodes, "skew_pct": p.a.synth_skew, xkey: q.x,
                           "handler_ns": p.a.handler_ns, "buffered_pct": q.buffered_pct,
                           "messages": q.msgs, "runtime_s": q.runtime, "pages_max": q.pages_max,
                           "runs": p.runs, "fast_queue": p.a.fast_queue,
                           "switch_queue_full": q.switch_full,
                           "switch_atomicity_timeout": q.switch_timeout,
                           "switch_descheduled": q.switch_stopped}),
                );
            }
        }
        if !p.a.json {
            println!();
        }
        let lines: Vec<Series> = out
            .iter()
            .map(|(n, pts)| Series {
                name: format!("synth-{n}"),
                points: pts.iter().map(|q| (q.x, q.buffered_pct)).collect(),
            })
            .collect();
        plot::write_svg(
            &Figure {
                title: &format!(
                    "Figure {fig}: synth-N, messages buffered ({} nodes)",
                    p.nodes
                ),
                x_desc: xname,
                y_desc: "messages buffered (%)",
                lines,
                paper: vec![],
                scale: Scale::Linear,
            },
            &p.a.out.join(format!("figure{fig}.svg")),
        )?;
    }
    Ok(())
}
