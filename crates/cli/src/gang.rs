//! A gang scheduler for UDM jobs (`unet gang`, and `unet bench udm`'s
//! Figures 7-10): several jobs share the nodes, one time slice each in
//! turn, by SIGSTOP and SIGCONT, the way the UDM paper's section 5.1
//! multiprograms an application against a null job; and it tells the
//! engine what it did (section 4.2).
//!
//! Node `i` runs one process of each job. Its schedule is the same round
//! (job 0, job 1, …, `slice` each, then again) shifted later by
//! `skew × slice × i / (nodes − 1)`: node 0 switches first, the last node
//! a fraction `skew` of a slice after it, as if each node's clock were
//! skewed (the paper skews the cycle counters the scheduler reads). So
//! for a fraction `skew` of every slice a job's nodes are not all running
//! together. Before its first switch a shifted node is still in the
//! slice before, the last job's.
//!
//! At every switch the outgoing processes are stopped before the
//! incoming ones are continued, so a node never runs two jobs. For a UDM
//! job (one with a ticket and a session to its engine) the scheduler
//! tells the engine: once they are stopped, that the stopped nodes are
//! descheduled (their input goes to buffered mode at once, with no
//! `/proc` read); before they are continued, that they run again (what
//! came meanwhile is in their buffers, and a node to which nothing came
//! starts in the fast case). The
//! engine's answer is overflow control's advice: the nodes whose buffers
//! are near their limit. The scheduler acts on it by giving those nodes
//! their job's next slice first: they switch to it when the unskewed
//! schedule does (with node 0), not at their skewed time, so the
//! receivers drain before their senders run — the paper's advice to gang
//! schedule the job, for the nodes that need it. The advice holds until
//! an answer no longer names the node.
//!
//! The scheduler keeps a log of what it did (switches, advice, notices
//! the engine refused) and continues every process when it stops, so
//! that they can be ended.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use unet::udm::JobTicket;
use unet::Session;

/// How the slices go.
#[derive(Clone, Copy, Debug)]
pub struct GangConfig {
    /// One job's turn.
    pub slice: Duration,
    /// How much later the last node switches than the first, as a
    /// fraction of a slice (0 ≤ skew < 1).
    pub skew: f64,
}

/// One job under the scheduler: its process on each node (by rank), and
/// for a UDM job the session and ticket its notices go by.
pub struct GangJob {
    pub pids: Vec<u32>,
    pub udm: Option<(Session, JobTicket)>,
    /// Each pid leads a process group, signalled whole (a node started
    /// through a shell).
    pub groups: bool,
}

impl GangJob {
    fn signal(&self, i: usize, sig: libc::c_int) {
        let p = self.pids[i] as libc::pid_t;
        signal(if self.groups { -p } else { p }, sig);
    }
}

/// One switch: at `at` (since the scheduler started), node `node` began
/// running job `job` (`first`: before its skewed time, on overflow
/// control's advice).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Switch {
    pub at: Duration,
    pub node: usize,
    pub job: usize,
    pub first: bool,
}

/// What the scheduler did and heard.
#[derive(Clone, Debug, Default)]
pub struct Log {
    pub switches: Vec<Switch>,
    /// Notices the engine acted on.
    pub notices: u64,
    /// Advice that named nodes: when, which job, which nodes (a bit per
    /// rank).
    pub advice: Vec<(Duration, usize, u64)>,
    /// Notices that failed, and why.
    pub errors: Vec<String>,
}

/// A running scheduler (a thread of this process).
pub struct Gang {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Log>>,
}

/// Node `i`'s shift of its slices, for `nodes` nodes.
pub fn offset(cfg: &GangConfig, i: usize, nodes: usize) -> Duration {
    if nodes < 2 {
        return Duration::ZERO;
    }
    cfg.slice.mul_f64(cfg.skew * i as f64 / (nodes - 1) as f64)
}

/// The job (of `jobs`) node `i` runs at `t` after the start, and when
/// that turn ends.
pub fn turn(
    cfg: &GangConfig,
    jobs: usize,
    i: usize,
    nodes: usize,
    t: Duration,
) -> (usize, Duration) {
    shifted(cfg.slice, jobs, offset(cfg, i, nodes), t)
}

fn shifted(slice: Duration, jobs: usize, off: Duration, t: Duration) -> (usize, Duration) {
    let jobs = jobs.max(1) as u128;
    let slice_ns = slice.as_nanos();
    if t < off {
        return ((jobs - 1) as usize, off);
    }
    let k = (t - off).as_nanos() / slice_ns;
    let end = off + Duration::from_nanos(((k + 1) * slice_ns) as u64);
    ((k % jobs) as usize, end)
}

/// What node `i` runs at `t`, given the nodes each job was advised to
/// run first (`first[job]`, a bit per node), and until when.
fn choose(
    cfg: &GangConfig,
    first: &[u64],
    i: usize,
    nodes: usize,
    t: Duration,
) -> (usize, Duration, bool) {
    let (job, end) = turn(cfg, first.len(), i, nodes, t);
    let (lead, lead_end) = shifted(cfg.slice, first.len(), Duration::ZERO, t);
    if lead != job && first[lead] & (1 << i) != 0 {
        return (lead, end.min(lead_end), true);
    }
    (job, end, false)
}

fn signal(pid: libc::pid_t, sig: libc::c_int) {
    // SAFETY: kill(2) sends a signal and touches no memory of ours. The
    // processes are the caller's to schedule (its children, or processes
    // it was told to attach to); one that has exited makes it fail with
    // ESRCH, or, as a zombie child not yet waited for, ignore it.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// What the scheduler knows of each job's engine: the nodes it was
/// advised to run first, the notices it accepted, and whether the job
/// has ended (every node left: the engine no longer knows it).
struct Told {
    first: Vec<u64>,
    accepted: Vec<u64>,
    /// Notices refused as for no such job before any was accepted.
    unknown: Vec<u32>,
    ended: Vec<bool>,
}

/// Refusals of a job's first notices taken as a job not yet ready (its
/// nodes still joining) before the ticket is taken as wrong.
const UNKNOWN_MAX: u32 = 50;

impl Told {
    fn new(jobs: usize) -> Told {
        Told {
            first: vec![0; jobs],
            accepted: vec![0; jobs],
            unknown: vec![0; jobs],
            ended: vec![false; jobs],
        }
    }

    /// Tells job `j`'s engine that `mask`'s nodes stopped or run, and
    /// takes its advice.
    fn notify(
        &mut self,
        jobs: &[GangJob],
        j: usize,
        mask: u64,
        running: bool,
        at: Duration,
        log: &mut Log,
    ) {
        let Some((session, ticket)) = &jobs[j].udm else {
            return;
        };
        if self.ended[j] {
            return;
        }
        match session.udm_schedule(*ticket, mask, running) {
            Ok(a) => {
                log.notices += 1;
                self.accepted[j] += 1;
                if a.near_full != 0 {
                    log.advice.push((at, j, a.near_full));
                }
                self.first[j] = a.near_full;
            }
            // A job no longer known that accepted notices, or whose
            // processes have all exited (a short job can end before its
            // first notice), has ended: its nodes all left. One that has
            // accepted none yet may still be setting up (told again at
            // the next switch); refused for longer, its ticket is wrong.
            Err(unet::Error::Engine(unet_control::ErrorCode::NoSuchJob))
                if self.accepted[j] > 0 || all_exited(&jobs[j].pids) =>
            {
                self.ended[j] = true;
                self.first[j] = 0;
            }
            Err(unet::Error::Engine(unet_control::ErrorCode::NoSuchJob))
                if self.unknown[j] < UNKNOWN_MAX =>
            {
                self.unknown[j] += 1;
            }
            Err(e) => {
                self.ended[j] = true;
                log.errors.push(format!("job {j}: {e}"));
            }
        }
    }
}

/// Whether every process of `pids` has exited (gone, or a zombie not yet
/// reaped).
fn all_exited(pids: &[u32]) -> bool {
    pids.iter().all(|p| {
        std::fs::read_to_string(format!("/proc/{p}/stat")).map_or(true, |st| {
            // The state follows the command's closing parenthesis.
            st.rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next())
                .is_some_and(|c| c == 'Z' || c == 'X')
        })
    })
}

impl Gang {
    /// Starts scheduling `jobs[k].pids[i]` on node `i`, for every job
    /// `k`: each job has one process per node.
    pub fn start(jobs: Vec<GangJob>, cfg: GangConfig) -> Gang {
        let n = jobs.first().map_or(0, |j| j.pids.len());
        assert!(
            jobs.len() >= 2 && jobs.iter().all(|j| j.pids.len() == n) && n <= 64,
            "two jobs or more, one process of each job a node, at most 64 nodes"
        );
        assert!(
            (0.0..1.0).contains(&cfg.skew) && !cfg.slice.is_zero(),
            "skew in [0, 1), a slice longer than zero"
        );
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut log = Log::default();
            let mut told = Told::new(jobs.len());
            let mut running: Vec<Option<usize>> = vec![None; n];
            while !flag.load(Ordering::Acquire) {
                let now = t0.elapsed();
                let mut next = now + cfg.slice;
                let mut stops = vec![0u64; jobs.len()];
                let mut starts = vec![0u64; jobs.len()];
                for (i, run) in running.iter_mut().enumerate() {
                    let (job, end, early) = choose(&cfg, &told.first, i, n, now);
                    next = next.min(end);
                    if *run == Some(job) {
                        continue;
                    }
                    // Every other job's process on the node stops (at the
                    // start, none has been stopped yet).
                    for (k, s) in stops.iter_mut().enumerate() {
                        if k != job && run.is_none_or(|r| r == k) {
                            *s |= 1 << i;
                        }
                    }
                    starts[job] |= 1 << i;
                    *run = Some(job);
                    log.switches.push(Switch {
                        at: now,
                        node: i,
                        job,
                        first: early,
                    });
                }
                for (k, &m) in stops.iter().enumerate() {
                    for i in bits(m) {
                        jobs[k].signal(i, libc::SIGSTOP);
                    }
                }
                for (k, &m) in stops.iter().enumerate() {
                    if m != 0 {
                        told.notify(&jobs, k, m, false, now, &mut log);
                    }
                }
                // Told before they run: a node with nothing diverted to
                // it meanwhile starts its slice in the fast case.
                for (k, &m) in starts.iter().enumerate() {
                    if m != 0 {
                        told.notify(&jobs, k, m, true, now, &mut log);
                    }
                    for i in bits(m) {
                        jobs[k].signal(i, libc::SIGCONT);
                    }
                }
                // Sleep to the next switch, waking at least every 5 ms to
                // see whether to stop.
                let wait = next.saturating_sub(t0.elapsed());
                std::thread::sleep(wait.min(Duration::from_millis(5)));
            }
            for j in &jobs {
                for i in 0..j.pids.len() {
                    j.signal(i, libc::SIGCONT);
                }
            }
            // Every node runs: the engine is told so.
            let all = u64::MAX >> (64 - n.max(1));
            let end = t0.elapsed();
            for k in 0..jobs.len() {
                told.notify(&jobs, k, all, true, end, &mut log);
            }
            // A job refused from its first notice to its last, whose
            // processes still run, was never known: a wrong ticket.
            for (k, j) in jobs.iter().enumerate() {
                if told.unknown[k] > 0 && told.accepted[k] == 0 && !all_exited(&j.pids) {
                    log.errors.push(format!(
                        "job {k}: the engine refused every notice: no such UDM job (or a wrong key)"
                    ));
                }
            }
            log
        });
        Gang {
            stop,
            thread: Some(thread),
        }
    }

    /// Whether the scheduler is still running.
    pub fn running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops scheduling, continues every process, and returns the log.
    pub fn finish(mut self) -> Log {
        self.stop.store(true, Ordering::Release);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Gang {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The set bits of `m`, lowest first.
fn bits(mut m: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (m != 0).then(|| {
            let b = m.trailing_zeros() as usize;
            m &= m - 1;
            b
        })
    })
}

// ---------------------------------------------------------------------------
// `unet gang`
// ---------------------------------------------------------------------------

/// `unet gang`: gang schedule UDM jobs (and others) on a running daemon's
/// nodes.
#[derive(clap::Args)]
#[command(after_help = "\
A job is `[TICKET@]PIDS` (attach to its processes, one a node, in rank \
order: `PID,PID,...`) or `[TICKET@]exec:COMMAND` (start COMMAND with sh -c \
once a node, `{rank}` and `{ticket}` replaced and UNET_GANG_RANK set; its \
output goes to standard error). With the job's ticket (`JOB:KEY:NODES`, as \
`Display` prints it) the scheduler tells the engine at every switch which \
nodes stopped and which run, and gives the nodes whose buffers near their \
limit (the engine's answer) their next slice first. Runs until the first \
job's processes have all exited, or for --rounds rounds; then continues \
every process, ends those it started, and prints what it did.")]
pub struct Args {
    /// Control socket of the engine.
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    pub socket: std::path::PathBuf,
    /// A job (two or more; see below).
    #[arg(long = "job", required = true, num_args = 1)]
    pub jobs: Vec<String>,
    /// Nodes of the jobs started with exec [default: as many as the
    /// attached jobs' processes, or 2].
    #[arg(long)]
    pub nodes: Option<usize>,
    /// One job's time slice, ms.
    #[arg(long, default_value_t = 20)]
    pub slice_ms: u64,
    /// How much later the last node switches than the first, percent of a
    /// slice.
    #[arg(long, default_value_t = 0.0)]
    pub skew: f64,
    /// Stop after this many rounds (a slice of every job); 0: when the
    /// first job's processes have all exited.
    #[arg(long, default_value_t = 0)]
    pub rounds: u64,
    /// Print every switch, not only the advice and the totals.
    #[arg(long)]
    pub verbose: bool,
    /// One JSON object (the totals) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One `--job`: its ticket, and its processes or the command that
/// starts them.
struct Spec {
    ticket: Option<JobTicket>,
    procs: Procs,
}

enum Procs {
    Pids(Vec<u32>),
    Exec(String),
}

fn parse_spec(s: &str) -> Result<Spec, String> {
    let (ticket, rest) = match s.split_once('@') {
        Some((t, rest)) => (
            Some(
                t.parse::<JobTicket>()
                    .map_err(|e| format!("ticket {t:?}: {e}"))?,
            ),
            rest,
        ),
        None => (None, s),
    };
    let procs = if let Some(c) = rest.strip_prefix("exec:") {
        Procs::Exec(c.to_string())
    } else {
        let pids = rest
            .split(',')
            .map(|p| {
                p.trim()
                    .parse::<u32>()
                    .map_err(|e| format!("pid {p:?}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Procs::Pids(pids)
    };
    Ok(Spec { ticket, procs })
}

/// Processes `unet gang` started, each leading its own process group,
/// ended when dropped: the whole group (the shell and what it started),
/// continued first (it may be stopped).
struct Started(Vec<std::process::Child>);

impl Drop for Started {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let g = -(c.id() as libc::pid_t);
            signal(g, libc::SIGCONT);
            signal(g, libc::SIGKILL);
            let _ = c.wait();
        }
    }
}

fn start_node(
    cmd: &str,
    rank: usize,
    ticket: Option<JobTicket>,
) -> Result<std::process::Child, String> {
    use std::os::fd::AsFd;
    let t = ticket.map_or_else(String::new, |t| t.to_string());
    let line = cmd
        .replace("{rank}", &rank.to_string())
        .replace("{ticket}", &t);
    let err = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| format!("stderr: {e}"))?;
    use std::os::unix::process::CommandExt;
    let mut c = std::process::Command::new("sh");
    c.args(["-c", &line])
        .env("UNET_GANG_RANK", rank.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(err)
        .process_group(0);
    // SAFETY: prctl(2) is async-signal-safe and touches no memory of the
    // parent; nothing else runs between fork and exec. The shell (and, if
    // the command starts with `exec`, the command) is killed if this
    // process dies without ending it.
    unsafe {
        c.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    c.spawn().map_err(|e| format!("starting {line:?}: {e}"))
}

/// Whether process `pid` still exists (a child: not yet exited).
fn alive(pid: u32, started: &mut Started) -> bool {
    if let Some(c) = started.0.iter_mut().find(|c| c.id() == pid) {
        return matches!(c.try_wait(), Ok(None));
    }
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

pub fn run(a: Args) -> std::process::ExitCode {
    match run_gang(&a) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("unet gang: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run_gang(a: &Args) -> Result<(), String> {
    let specs = a
        .jobs
        .iter()
        .map(|s| parse_spec(s))
        .collect::<Result<Vec<_>, _>>()?;
    if specs.len() < 2 {
        return Err("two jobs or more (--job, --job)".into());
    }
    if !(0.0..100.0).contains(&a.skew) || a.slice_ms == 0 {
        return Err("--skew from 0 to below 100, --slice-ms above 0".into());
    }
    let attached = specs.iter().find_map(|s| match &s.procs {
        Procs::Pids(p) => Some(p.len()),
        Procs::Exec(_) => None,
    });
    let nodes = a.nodes.or(attached).unwrap_or(2);
    if !(1..=64).contains(&nodes) {
        return Err(format!("{nodes} nodes: 1 to 64"));
    }
    let session = if specs.iter().any(|s| s.ticket.is_some()) {
        Some(Session::connect(&a.socket).map_err(|e| {
            format!(
                "{e} (is `unet daemon --socket {}` running?)",
                a.socket.display()
            )
        })?)
    } else {
        None
    };
    let mut started = Started(Vec::new());
    let mut jobs = Vec::new();
    for (k, s) in specs.iter().enumerate() {
        let pids = match &s.procs {
            Procs::Pids(p) => p.clone(),
            Procs::Exec(c) => (0..nodes)
                .map(|r| {
                    let c = start_node(c, r, s.ticket)?;
                    let id = c.id();
                    started.0.push(c);
                    Ok(id)
                })
                .collect::<Result<Vec<_>, String>>()?,
        };
        if pids.len() != nodes {
            return Err(format!(
                "job {k}: {} processes for {nodes} nodes",
                pids.len()
            ));
        }
        let udm = s.ticket.zip(session.clone()).map(|(t, ses)| (ses, t));
        let groups = matches!(s.procs, Procs::Exec(_));
        jobs.push(GangJob { pids, udm, groups });
    }
    let cfg = GangConfig {
        slice: Duration::from_millis(a.slice_ms),
        skew: a.skew / 100.0,
    };
    let first: Vec<u32> = jobs[0].pids.clone();
    let round = cfg.slice * jobs.len() as u32 + cfg.slice;
    let t0 = Instant::now();
    let gang = Gang::start(jobs, cfg);
    loop {
        std::thread::sleep(Duration::from_millis(10));
        let done = if a.rounds > 0 {
            t0.elapsed() >= round * a.rounds.min(u32::MAX as u64) as u32
        } else {
            !first.iter().any(|&p| alive(p, &mut started))
        };
        if done || !gang.running() {
            break;
        }
    }
    let log = gang.finish();
    let secs = t0.elapsed().as_secs_f64();
    drop(started);
    print_log(a, &log, secs);
    if log.errors.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the engine refused notices: {}",
            log.errors.join("; ")
        ))
    }
}

fn print_log(a: &Args, log: &Log, secs: f64) {
    let early = log.switches.iter().filter(|s| s.first).count();
    if a.json {
        let advice: Vec<serde_json::Value> = log
            .advice
            .iter()
            .map(|(at, j, m)| serde_json::json!({"at_ms": at.as_secs_f64() * 1e3, "job": j, "near_full": m}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"seconds": secs, "switches": log.switches.len(),
                "switches_first": early, "notices": log.notices, "advice": advice,
                "errors": log.errors})
        );
        return;
    }
    if a.verbose {
        for s in &log.switches {
            println!(
                "{:>10.3} ms  node {:>2} runs job {}{}",
                s.at.as_secs_f64() * 1e3,
                s.node,
                s.job,
                if s.first {
                    " (first: its buffer nears its limit)"
                } else {
                    ""
                }
            );
        }
    }
    for (at, j, m) in &log.advice {
        println!(
            "{:>10.3} ms  job {j}: buffers near their limit on nodes {:?}",
            at.as_secs_f64() * 1e3,
            bits(*m).collect::<Vec<_>>()
        );
    }
    println!(
        "{secs:.3} s: {} switches ({early} on overflow advice), {} notices to the engine, \
         {} pieces of advice",
        log.switches.len(),
        log.notices,
        log.advice.len()
    );
    for e in &log.errors {
        println!("refused: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};

    #[test]
    fn turns_alternate_and_later_nodes_are_shifted_by_the_skew() {
        let cfg = GangConfig {
            slice: Duration::from_millis(100),
            skew: 0.2,
        };
        let ms = Duration::from_millis;
        // Three nodes: shifts 0, 10 and 20 ms.
        assert_eq!(offset(&cfg, 0, 3), ms(0));
        assert_eq!(offset(&cfg, 1, 3), ms(10));
        assert_eq!(offset(&cfg, 2, 3), ms(20));
        assert_eq!(turn(&cfg, 2, 0, 3, ms(0)), (0, ms(100)));
        assert_eq!(turn(&cfg, 2, 0, 3, ms(150)), (1, ms(200)));
        assert_eq!(turn(&cfg, 2, 0, 3, ms(200)), (0, ms(300)));
        // Node 2 is still in the null job's slice for its first 20 ms.
        assert_eq!(turn(&cfg, 2, 2, 3, ms(5)), (1, ms(20)));
        assert_eq!(turn(&cfg, 2, 2, 3, ms(20)), (0, ms(120)));
        assert_eq!(turn(&cfg, 2, 2, 3, ms(119)), (0, ms(120)));
        assert_eq!(turn(&cfg, 2, 2, 3, ms(125)), (1, ms(220)));
        // No skew: every node switches together.
        let cfg0 = GangConfig { skew: 0.0, ..cfg };
        for i in 0..3 {
            assert_eq!(turn(&cfg0, 2, i, 3, ms(250)), (0, ms(300)));
        }
        assert_eq!(offset(&cfg, 0, 1), ms(0));
    }

    #[test]
    fn an_advised_node_starts_its_jobs_slice_with_node_0_and_three_jobs_take_turns() {
        let cfg = GangConfig {
            slice: Duration::from_millis(100),
            skew: 0.5,
        };
        let ms = Duration::from_millis;
        // Two nodes: node 1 is shifted by 50 ms. Not advised, it is still
        // in job 1's slice for its first 50 ms.
        assert_eq!(choose(&cfg, &[0, 0], 1, 2, ms(10)), (1, ms(50), false));
        // Advised for job 0, it starts job 0's slice with node 0, and ends
        // it at its own time.
        assert_eq!(choose(&cfg, &[0b10, 0], 1, 2, ms(10)), (0, ms(50), true));
        assert_eq!(choose(&cfg, &[0b10, 0], 1, 2, ms(60)), (0, ms(150), false));
        // Job 1's turn is not moved for advice about job 0.
        assert_eq!(choose(&cfg, &[0b10, 0], 1, 2, ms(120)), (0, ms(150), false));
        assert_eq!(choose(&cfg, &[0b10, 0], 1, 2, ms(160)), (1, ms(250), false));
        // Advice for another node changes nothing for this one.
        assert_eq!(choose(&cfg, &[0b01, 0], 1, 2, ms(10)), (1, ms(50), false));
        // Three jobs: each a slice in turn; before its shift, the last.
        let three = GangConfig { skew: 0.0, ..cfg };
        assert_eq!(turn(&three, 3, 0, 2, ms(50)), (0, ms(100)));
        assert_eq!(turn(&three, 3, 0, 2, ms(150)), (1, ms(200)));
        assert_eq!(turn(&three, 3, 0, 2, ms(250)), (2, ms(300)));
        assert_eq!(turn(&three, 3, 0, 2, ms(350)), (0, ms(400)));
        assert_eq!(turn(&cfg, 3, 1, 2, ms(10)), (2, ms(50)));
    }

    /// The state letter of process `pid` in /proc (R, S, T, …).
    fn state(pid: u32) -> char {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        // After the command name in parentheses.
        let rest = &s[s.rfind(')').unwrap() + 2..];
        rest.chars().next().unwrap()
    }

    struct Procs(Vec<Child>);
    impl Drop for Procs {
        fn drop(&mut self) {
            for c in &mut self.0 {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    #[test]
    fn it_stops_and_continues_the_right_processes_with_the_skew() {
        // Two nodes, two jobs: four sleeping processes (sleeping, so the
        // test costs no CPU; a stopped one reads T in /proc).
        let mut procs = Procs(Vec::new());
        for _ in 0..4 {
            procs
                .0
                .push(Command::new("sleep").arg("60").spawn().unwrap());
        }
        let pids: Vec<u32> = procs.0.iter().map(|c| c.id()).collect();
        let jobs = [vec![pids[0], pids[1]], vec![pids[2], pids[3]]];
        let cfg = GangConfig {
            slice: Duration::from_millis(200),
            skew: 0.5,
        };
        let t0 = Instant::now();
        let gang = Gang::start(
            jobs.iter()
                .map(|p| GangJob {
                    pids: p.clone(),
                    udm: None,
                    groups: false,
                })
                .collect(),
            cfg,
        );
        // Sample in the middle of stretches where the schedule is known,
        // away from the switches (node 1 switches 100 ms after node 0):
        // 0-100 ms node 0 runs job 0, node 1 job 1; 100-200 both job 0;
        // 200-300 node 0 job 1, node 1 job 0; 300-400 both job 1.
        let expect = [(50, [0, 1]), (150, [0, 0]), (250, [1, 0]), (350, [1, 1])];
        let mut seen = Vec::new();
        for (at, want) in expect {
            let at = Duration::from_millis(at);
            std::thread::sleep(at.saturating_sub(t0.elapsed()));
            let got: Vec<[char; 2]> = (0..2)
                .map(|i| [state(jobs[0][i]), state(jobs[1][i])])
                .collect();
            seen.push((t0.elapsed(), want, got));
        }
        let log = gang.finish().switches;
        // Continued at the end: nothing left stopped.
        std::thread::sleep(Duration::from_millis(20));
        for p in &pids {
            assert_ne!(state(*p), 'T', "process {p} left stopped");
        }
        // Timing on a loaded machine can slip: judge a sample only if it
        // was taken within 30 ms of its moment; most must be.
        let mut judged = 0;
        for (i, (when, want, got)) in seen.iter().enumerate() {
            let target = Duration::from_millis(50 + 100 * i as u64);
            if when.abs_diff(target) > Duration::from_millis(30) {
                continue;
            }
            judged += 1;
            for node in 0..2 {
                let run = want[node];
                assert_ne!(
                    got[node][run], 'T',
                    "sample {i}: node {node} job {run} stopped: {seen:?}"
                );
                assert_eq!(
                    got[node][1 - run],
                    'T',
                    "sample {i}: node {node} job {} runs: {seen:?}",
                    1 - run
                );
            }
        }
        assert!(judged >= 2, "the samples came too late to judge: {seen:?}");
        // The log: node 0 starts with job 0 at once, node 1 with job 1
        // and switches to job 0 half a slice later; then they alternate.
        let node = |k: usize| log.iter().filter(|s| s.node == k).collect::<Vec<_>>();
        let (n0, n1) = (node(0), node(1));
        assert_eq!((n0[0].job, n1[0].job), (0, 1));
        for w in n0.windows(2).chain(n1.windows(2)) {
            assert_ne!(w[0].job, w[1].job, "turns alternate: {log:?}");
        }
        let first1 = n1.iter().find(|s| s.job == 0).expect("node 1 ran job 0");
        assert!(
            first1.at >= Duration::from_millis(100) && first1.at < Duration::from_millis(160),
            "node 1's first turn of job 0 at {:?}",
            first1.at
        );
        let second0 = n0.iter().find(|s| s.job == 1).expect("node 0 ran job 1");
        assert!(
            second0.at >= Duration::from_millis(200) && second0.at < Duration::from_millis(260),
            "node 0's turn of job 1 at {:?}",
            second0.at
        );
    }
}
