//! `unet bench udm`: the UDM paper's Tables 4, 5 and 6 and Figures 7-10,
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
//!   same messages by the fast path in the same run; twice on one job, the
//!   buffer's first use (fresh pages, a page's first write every 32
//!   messages, all given back once the buffer is idle) and its use again
//!   (it starts again at its first page, whose memory it kept). The first
//!   write to a page of a memory file like the buffer's, and its return,
//!   are measured beside, each on its own. Ratios: buffered (inject,
//!   insert, extract, the engine's work meanwhile) over fast (inject,
//!   extract) per null message, the buffer used again and on its first
//!   use (then with its pages' return); and in the paper's terms, the
//!   insert into kept pages and the extract over the fast receive with the
//!   upcall. The target is 2.5 or less.
//! - `table6`: the applications of Figures 7-8 standalone (their node
//!   processes alone): runtime, messages, the mean time between
//!   communication events (runtime × nodes / messages, as the paper's) and
//!   per handler (extract to the handler's return, timed in the nodes),
//!   beside the paper's columns for `barrier` and `enum`.
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
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use serde_json::{json, Value};
use unet::udm::{JobConfig, Mode, Node, UdmCounter, MAX_WORDS};
use unet::{Engine, EngineConfig, Session};

use super::child::{PathArg, TempDir};
use super::plot::{self, Figure, Scale, Series};
use super::report::Progress;
use super::stats::{self, median_f64};
use super::udm_node::{self, App};
use super::unet_paths;
use crate::gang::{Gang, GangConfig, GangJob};

mod figures;
mod table5;
mod table6;
mod tables_svg;

use figures::{fig78, fig910};
use table5::table5;
use table6::table6;

type Res<T> = Result<T, String>;

/// The paper's processor: a 20 MHz Sparcle (50 ns a cycle).
const PAPER_NS_PER_CYCLE: f64 = 50.0;

/// What to regenerate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum What {
    Table4,
    Table5,
    Table6,
    #[value(name = "fig7-8")]
    Fig78,
    #[value(name = "fig9-10")]
    Fig910,
    All,
}

/// The UDM paper's Tables 4-6 and Figures 7-10.
#[derive(clap::Args)]
#[command(after_help = "\
Table 4: inject and extract (polling) of a null message in ns, beside the \
one-way time of UDM and of the endpoint direct path between two processes, \
measured in the same run; the paper's cycle counts (20 MHz Sparcle) as \
given and in ns. Table 5: insertion into the virtual buffer and extraction \
from it beside the fast path; target: buffered <= 2.5x fast per null \
message (the paper: 232 against 87 cycles, 2.7x). Table 6: the \
applications of Figures 7-8 standalone: runtime, messages, mean time between \
communication events and per handler, beside the paper's. Figures 7-10 run the \
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
    /// Figures 7-10 and Table 6: each node's virtual buffer, KiB (a power
    /// of two, 4 to 1 048 576): overflow control holds a node's senders
    /// once `buffer-kib × 8` messages are on their way to it or waiting.
    #[arg(long, default_value_t = 16384)]
    pub buffer_kib: u64,
    /// Figures 7-10: the gang scheduler tells the engine nothing (no
    /// deschedule notices, no overflow advice): the engine then tells a
    /// stopped node only by the atomicity timeout and `/proc`, as before
    /// the scheduler talked to it.
    #[arg(long)]
    pub silent_scheduler: bool,
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
    /// enum: work spun per position expanded, ns. The paper's enum has
    /// about 525 communication events a node per slice (a slice of
    /// 500 000 cycles, 953 cycles between events, Table 6); ours, with
    /// nothing added, some 20 times as many per 20 ms slice. Adding work
    /// brings the ratio to the paper's without changing what is computed.
    #[arg(long, default_value_t = 0)]
    pub enum_expand_ns: u64,
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
    /// Tables 4, 5 and 6: also draw them as SVG files in this directory
    /// (`table4.svg`, `table5.svg`, `table6.svg`), our figures beside the
    /// paper's own where it gives them.
    #[arg(long)]
    pub svg: Option<PathBuf>,
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
    if all || p.a.what == What::Table6 {
        table6(p)?;
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
/// A job of the plan's nodes and fast queue, with virtual buffers of
/// `--buffer-kib`, on `h`'s engine (the applications' runs).
fn plan_job(h: &Host, p: &Plan) -> Res<unet::udm::JobTicket> {
    h.session
        .udm_create_job(&JobConfig {
            nodes: p.nodes,
            fast_queue: p.a.fast_queue,
            buffer_size: p.a.buffer_kib << 10,
            ..JobConfig::default()
        })
        .map_err(err("udm job"))
}

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

/// A job of two nodes made with `cfg` (its `nodes` set to 2), both
/// joined from this process: nodes 0 and 1.
fn two_nodes(h: &Host, cfg: JobConfig) -> Res<(Node, Node)> {
    let t = h
        .session
        .udm_create_job(&JobConfig { nodes: 2, ..cfg })
        .map_err(err("udm job"))?;
    let a = h.session.udm_join(t, 0).map_err(err("join"))?;
    let b = h.session.udm_join(t, 1).map_err(err("join"))?;
    Ok((a, b))
}

/// Per-message inject and extract times (ns) of `batches` batches between
/// two nodes of one job in this thread.
fn fast_batches(h: &Host, batches: usize) -> Res<(Vec<f64>, Vec<f64>)> {
    let (mut a, mut b) = two_nodes(
        h,
        JobConfig {
            fast_queue: 1024,
            ..JobConfig::default()
        },
    )?;
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

/// Start every node, then take each one's final report (its `done`
/// line, as JSON) within 60 s (`quick`) or 600 s of the start: when they
/// started, when the last report came, and the reports.
fn go_and_collect(nodes: &mut [NodeProc], quick: bool) -> Res<(Instant, Instant, Vec<Value>)> {
    let t0 = Instant::now();
    for n in nodes.iter_mut() {
        n.go()?;
    }
    let mut rows = Vec::new();
    let mut end = t0;
    let limit = Duration::from_secs(if quick { 60 } else { 600 });
    for n in nodes.iter_mut() {
        let rest = limit.saturating_sub(t0.elapsed());
        let line = n.expect("done", rest)?;
        end = end.max(Instant::now());
        rows.push(
            serde_json::from_str::<Value>(&line).map_err(|e| format!("a node's report: {e}"))?,
        );
    }
    Ok((t0, end, rows))
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
    if let Some(dir) = &p.a.svg {
        let svg: Vec<tables_svg::Row> = rows
            .iter()
            .map(|(k, ns, _)| tables_svg::Row {
                name: k.key(),
                ns: *ns,
                paper_cycles: k.paper(),
            })
            .collect();
        tables_svg::rows_svg(
            dir,
            "table4.svg",
            "Table 4: the fast path, null message",
            &svg,
        )?;
    }
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
