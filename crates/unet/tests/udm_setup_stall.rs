//! Making UDM jobs never holds up the data path: while one client creates
//! (and drops) the largest jobs it may, one after another, another
//! client's ping-pong through the engine keeps its pace.
//!
//! The engine used to make a job's memory on its own thread: the job
//! segment (`nodes²` fast rings, zeroed and initialised), and a node
//! segment and a virtual buffer for every rank. For a job of 64 nodes
//! with large fast rings that is tens of MiB of zeroing, during which
//! every other client's engine-path traffic stood still. Now the memory is
//! made on the engine's set-up thread (and a retired job's is unmapped
//! there), and the request is answered when it is ready.

use std::time::{Duration, Instant};

use unet::udm::*;
use unet::*;

mod common;
use common::{pct, PingPong};

/// The largest job `engine` makes: every node, and the largest fast
/// rings whose job segment it accepts (asked from the largest down).
fn largest_job(engine: &Engine) -> JobConfig {
    let s =
        Session::from_fd_with(engine.connect().unwrap(), SessionOptions { timeout: None }).unwrap();
    let mut cfg = JobConfig {
        nodes: MAX_NODES,
        fast_queue: 1024,
        // The virtual buffers are sparse (reserved, not touched): their
        // size costs the engine nothing when the job is made.
        buffer_size: 4096,
        ..JobConfig::default()
    };
    loop {
        match s.udm_create_job(&cfg) {
            Ok(_) => return cfg,
            Err(e) if cfg.fast_queue > 2 => {
                eprintln!("fast rings of {}: {e}", cfg.fast_queue);
                cfg.fast_queue /= 2;
            }
            Err(e) => panic!("no job of {MAX_NODES} nodes: {e}"),
        }
    }
}

#[test]
fn making_the_largest_udm_jobs_does_not_stall_another_clients_ping_pong() {
    let engine = Engine::start(EngineConfig::default()).unwrap();
    let cfg = largest_job(&engine);
    let pp = PingPong::start(&engine);

    // Warm up and measure the baseline; then, from other connections,
    // create the largest jobs one after another for a while, each dropped
    // (its creator's session closed) as soon as it is made; then measure
    // the baseline again (the load of a shared machine comes and goes).
    std::thread::sleep(Duration::from_millis(1000));
    let t0 = Instant::now();
    let mut made = 0;
    let mut slowest = Duration::ZERO;
    while made < 3 || (t0.elapsed() < Duration::from_millis(1500) && made < 100) {
        // A create may take long on a loaded machine (the memory is made at
        // a lowered priority): what is measured is the ping-pong, so this
        // session waits as long as the create takes.
        let other =
            Session::from_fd_with(engine.connect().unwrap(), SessionOptions { timeout: None })
                .unwrap();
        let t = Instant::now();
        let job = other.udm_create_job(&cfg).expect("the largest job");
        slowest = slowest.max(t.elapsed());
        assert_eq!(job.nodes, MAX_NODES);
        made += 1;
        drop(other);
    }
    let t1 = Instant::now();
    // The last jobs' segments are unmapped after their creators went.
    std::thread::sleep(Duration::from_millis(300));
    let t2 = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    let t3 = Instant::now();
    let trips = pp.stop();
    let before: Vec<Duration> = trips
        .iter()
        .filter(|(t, d)| *t + *d < t0)
        .map(|&(_, d)| d)
        .collect();
    // Every round trip that overlaps the creates, the drops and what
    // follows them.
    let during: Vec<Duration> = trips
        .iter()
        .filter(|(t, d)| *t + *d >= t0 && *t <= t2)
        .map(|&(_, d)| d)
        .collect();
    let after: Vec<Duration> = trips
        .iter()
        .filter(|(t, d)| *t > t2 && *t + *d <= t3)
        .map(|&(_, d)| d)
        .collect();
    // The time the ping-pong stood still: the part of each round trip
    // beyond two milliseconds, as a share of the time measured. A loop busy
    // making a job adds one round trip as long as the making: counted by
    // time, not by round trips, however many quick ones the moments
    // between two jobs hold.
    let stalled = |v: &[Duration]| -> Duration {
        v.iter()
            .map(|d| d.saturating_sub(Duration::from_millis(2)))
            .sum()
    };
    let first = trips.first().map_or(t0, |&(t, _)| t);
    let share = |stalled: Duration, window: Duration| {
        stalled.as_secs_f64() / window.as_secs_f64().max(1e-3)
    };
    let (stalled_before, stalled_during, stalled_after) =
        (stalled(&before), stalled(&during), stalled(&after));
    let share_during = share(stalled_during, t2 - t0);
    // The baseline: the worse of before and after.
    let baseline = share(stalled_before, t0 - first).max(share(stalled_after, t3 - t2));
    let max_before = before.iter().max().copied().unwrap_or_default();
    let max_during = during.iter().max().copied().unwrap_or_default();
    let (p99_before, p99_during) = (pct(before.clone(), 0.99), pct(during.clone(), 0.99));
    eprintln!(
        "{made} jobs of {} nodes, fast rings of {}, in {:?} (slowest create {slowest:?}); \
         round trips before: {} (p50 {:?}, p99 {p99_before:?}, max {max_before:?}); \
         during: {} (p50 {:?}, p99 {p99_during:?}, max {max_during:?}); \
         stood still before: {stalled_before:?} of {:?}, during: {stalled_during:?} of {:?}, \
         after: {stalled_after:?} of {:?}",
        cfg.nodes,
        cfg.fast_queue,
        t1 - t0,
        before.len(),
        pct(before.clone(), 0.5),
        during.len(),
        pct(during.clone(), 0.5),
        t0 - first,
        t2 - t0,
        t3 - t2,
    );
    assert!(
        before.len() > 100 && during.len() > 100 && after.len() > 100,
        "too few round trips"
    );
    // Made on the loop, each job stalled the ping-pong for as long as it
    // took to make (and its drop for the unmapping): most of the time
    // (four fifths of it here, whatever the load). Off the loop, a stall
    // is a scheduling accident, as before and after the jobs: on a quiet
    // machine a few hundredths of the time (the threads being more than
    // the cores), on a loaded one up to a third, before and after alike.
    // The bound leaves room for the load to change between the windows,
    // far below the old stall.
    //
    // (The p99 of the round trips, as `setup_stall.rs` bounds it, cannot
    // tell: a loop making a job stalls one round trip per job, and the
    // quick ones between two jobs are many more than a hundred times as
    // many; the p99 stayed at a few hundred microseconds with the jobs
    // made on the loop.)
    assert!(
        share_during < baseline + 0.3,
        "the ping-pong stood still for {stalled_during:?} of {:?} while {made} jobs were \
         made ({:.0}% of the time; {:.0}% before or after)",
        t2 - t0,
        share_during * 100.0,
        baseline * 100.0,
    );
}
