//! A gang scheduler for `unet bench udm`: two jobs share the nodes, one
//! time slice each in turn, by SIGSTOP and SIGCONT, the way the UDM
//! paper's section 5.1 multiprograms an application against a null job.
//!
//! Node `i` runs one process of each job. Its schedule is the same
//! alternation (job 0, job 1, job 0, …, `slice` each) shifted later by
//! `skew × slice × i / (nodes − 1)`: node 0 switches first, the last node
//! a fraction `skew` of a slice after it, as if each node's clock were
//! skewed (the paper skews the cycle counters the scheduler reads). So
//! for a fraction `skew` of every slice the application's nodes are not
//! all running together. Before its first switch a shifted node is still
//! in the slice before, the null job's.
//!
//! At every switch the outgoing process is stopped before the incoming
//! one is continued, so a node never runs both. The scheduler keeps a log
//! of what it did (when, which node, which job now runs) and continues
//! every process when it stops, so that they can be ended.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How the slices go.
#[derive(Clone, Copy, Debug)]
pub struct GangConfig {
    /// One job's turn.
    pub slice: Duration,
    /// How much later the last node switches than the first, as a
    /// fraction of a slice (0 ≤ skew < 1).
    pub skew: f64,
}

/// One switch: at `at` (since the scheduler started), node `node` began
/// running job `job`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Switch {
    pub at: Duration,
    pub node: usize,
    pub job: usize,
}

/// A running scheduler (a thread of this process).
pub struct Gang {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Switch>>>,
}

/// Node `i`'s shift of its slices, for `nodes` nodes.
pub fn offset(cfg: &GangConfig, i: usize, nodes: usize) -> Duration {
    if nodes < 2 {
        return Duration::ZERO;
    }
    cfg.slice.mul_f64(cfg.skew * i as f64 / (nodes - 1) as f64)
}

/// The job node `i` runs at `t` after the start (0 or 1), and when that
/// turn ends.
pub fn turn(cfg: &GangConfig, i: usize, nodes: usize, t: Duration) -> (usize, Duration) {
    let off = offset(cfg, i, nodes);
    let slice = cfg.slice.as_nanos();
    if t < off {
        return (1, off);
    }
    let k = (t - off).as_nanos() / slice;
    let end = off + Duration::from_nanos(((k + 1) * slice) as u64);
    ((k % 2) as usize, end)
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on a process id we started and still hold (not yet
    // reaped, so the id is not reused); an exited one is a zombie and the
    // signal is ignored.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

impl Gang {
    /// Starts scheduling `jobs[0][i]` and `jobs[1][i]` on node `i`. The
    /// processes must be this process's children, not yet waited for.
    pub fn start(jobs: [Vec<u32>; 2], cfg: GangConfig) -> Gang {
        assert_eq!(
            jobs[0].len(),
            jobs[1].len(),
            "one process of each job a node"
        );
        assert!(
            (0.0..1.0).contains(&cfg.skew) && !cfg.slice.is_zero(),
            "skew in [0, 1), a slice longer than zero"
        );
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let n = jobs[0].len();
            let t0 = Instant::now();
            let mut log = Vec::new();
            let mut running: Vec<Option<usize>> = vec![None; n];
            while !flag.load(Ordering::Acquire) {
                let now = t0.elapsed();
                let mut next = now + cfg.slice;
                for (i, run) in running.iter_mut().enumerate() {
                    let (job, end) = turn(&cfg, i, n, now);
                    next = next.min(end);
                    if *run != Some(job) {
                        signal(jobs[1 - job][i], libc::SIGSTOP);
                        signal(jobs[job][i], libc::SIGCONT);
                        *run = Some(job);
                        log.push(Switch {
                            at: t0.elapsed(),
                            node: i,
                            job,
                        });
                    }
                }
                // Sleep to the next switch, waking at least every 5 ms to
                // see whether to stop.
                let wait = next.saturating_sub(t0.elapsed());
                std::thread::sleep(wait.min(Duration::from_millis(5)));
            }
            for p in jobs.iter().flatten() {
                signal(*p, libc::SIGCONT);
            }
            log
        });
        Gang {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops scheduling, continues every process, and returns the log.
    pub fn finish(mut self) -> Vec<Switch> {
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
        assert_eq!(turn(&cfg, 0, 3, ms(0)), (0, ms(100)));
        assert_eq!(turn(&cfg, 0, 3, ms(150)), (1, ms(200)));
        assert_eq!(turn(&cfg, 0, 3, ms(200)), (0, ms(300)));
        // Node 2 is still in the null job's slice for its first 20 ms.
        assert_eq!(turn(&cfg, 2, 3, ms(5)), (1, ms(20)));
        assert_eq!(turn(&cfg, 2, 3, ms(20)), (0, ms(120)));
        assert_eq!(turn(&cfg, 2, 3, ms(119)), (0, ms(120)));
        assert_eq!(turn(&cfg, 2, 3, ms(125)), (1, ms(220)));
        // No skew: every node switches together.
        let cfg0 = GangConfig { skew: 0.0, ..cfg };
        for i in 0..3 {
            assert_eq!(turn(&cfg0, i, 3, ms(250)), (0, ms(300)));
        }
        assert_eq!(offset(&cfg, 0, 1), ms(0));
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
        let gang = Gang::start(jobs.clone(), cfg);
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
        let log = gang.finish();
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
