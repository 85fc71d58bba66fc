//! A scheduler's notices (the UDM paper's section 4.2): a deschedule
//! notice switches a node's input to buffered mode at once and a
//! schedule notice lets it drain what came meanwhile (or, if nothing
//! came, puts it back in the fast case), with no read of `/proc`; an idle engine whose nodes are all descheduled sleeps; the
//! answer to a notice carries overflow control's advice; a notice with a
//! wrong key is refused and counted.

use std::thread;
use std::time::{Duration, Instant};

mod common;
use common::engine_counter;
use unet::udm::*;
use unet::*;
use unet_abi::EngineCounter;

/// Waits up to 10 s for `f`.
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        thread::sleep(Duration::from_micros(200));
    }
}

/// Takes every message `n` has, waiting for `count` of them; returns
/// their first words.
fn take(n: &mut Node, count: usize) -> Vec<u64> {
    let mut w = [0u64; MAX_WORDS];
    let mut got = Vec::new();
    until("the messages", || {
        while let Ok(h) = n.extract(&mut w) {
            assert_eq!(h.len, 1);
            got.push(w[0]);
        }
        got.len() >= count
    });
    got
}

#[test]
fn notices_switch_modes_without_reading_proc() {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    let t = s
        .udm_create_job(&JobConfig {
            nodes: 2,
            fast_queue: 2,
            ..JobConfig::default()
        })
        .unwrap();
    let mut a = s.udm_join(t, 0).unwrap();
    let mut b = s.udm_join(t, 1).unwrap();
    assert_eq!(b.mode(), Mode::Fast);

    // Descheduled: buffered at once, counted as descheduled.
    let adv = s.udm_schedule(t, 0b10, false).unwrap();
    assert_eq!(adv.descheduled, 0b10);
    assert_eq!(adv.near_full, 0);
    assert_eq!(b.mode(), Mode::Buffered, "switched by the notice itself");
    assert_eq!(b.stats().engine(UdmCounter::SwitchDescheduled), 1);
    // What a sends meanwhile goes to b's virtual buffer (more than its
    // fast ring holds: nobody waits).
    for i in 0..10u64 {
        a.inject(1, 3, &[i]).unwrap();
    }
    until("the engine to buffer them", || {
        b.stats().engine(UdmCounter::BufferedMsgs) == 10
    });
    // Scheduled again: b takes them, in order, from its buffer, and goes
    // back to the fast case once it is empty.
    let adv = s.udm_schedule(t, 0b10, true).unwrap();
    assert_eq!(adv.descheduled, 0);
    assert_eq!(take(&mut b, 10), (0..10).collect::<Vec<_>>());
    assert_eq!(b.stats().buffered_taken, 10);
    let mut w = [0u64; MAX_WORDS];
    assert!(b.extract(&mut w).is_err());
    until("the fast case again", || {
        let _ = b.extract(&mut w);
        b.mode() == Mode::Fast
    });
    a.inject(1, 3, &[10]).unwrap();
    assert_eq!(take(&mut b, 1), vec![10]);
    assert_eq!(b.stats().fast_msgs, 1);

    // A running node of a scheduled job that takes nothing is switched by
    // the atomicity timeout, counted as such: its scheduler said it runs.
    for i in 0..2u64 {
        a.inject(1, 3, &[i]).unwrap();
    }
    // The ring is full: the sender is told not now, and rings the engine.
    assert!(!a.injectc(1, 3, &[2]).unwrap());
    until("the timeout's switch", || b.mode() == Mode::Buffered);
    assert_eq!(b.stats().engine(UdmCounter::SwitchTimeout), 1);
    assert_eq!(b.stats().engine(UdmCounter::SwitchDescheduled), 1);
    assert_eq!(take(&mut b, 2), vec![0, 1]);

    // A node to which nothing came while it was descheduled starts its
    // slice in the fast case: the schedule notice itself says so.
    s.udm_schedule(t, 0b01, false).unwrap();
    assert_eq!(a.mode(), Mode::Buffered);
    s.udm_schedule(t, 0b01, true).unwrap();
    assert_eq!(a.mode(), Mode::Fast);
    assert_eq!(a.stats().engine(UdmCounter::SwitchDescheduled), 1);

    assert_eq!(engine_counter(&s, EngineCounter::UdmProcReads), 0);
    assert_eq!(engine_counter(&s, EngineCounter::UdmSchedNotices), 4);
    assert_eq!(engine_counter(&s, EngineCounter::UdmSchedRefused), 0);
}

/// What the engine did over `window`: wake-ups, busy turns, UDM node
/// visits.
fn window(s: &Session, window: Duration) -> (u64, u64, u64) {
    let read = || {
        [
            EngineCounter::Wakeups,
            EngineCounter::BusyPolls,
            EngineCounter::UdmNodeVisits,
        ]
        .map(|c| engine_counter(s, c))
    };
    let before = read();
    thread::sleep(window);
    let after = read();
    (
        after[0] - before[0],
        after[1] - before[1],
        after[2] - before[2],
    )
}

/// Defect: an engine with UDM nodes joined woke at least once a second to
/// sweep them, even when every node was stopped by its scheduler. Now the
/// nodes a scheduler descheduled are not swept (their input is already
/// diverted and they do not run): with every node descheduled, the
/// engine's UDM part visits no node, and the engine turns and wakes no
/// more than with no job at all.
#[test]
fn an_idle_engine_with_descheduled_nodes_sleeps() {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    let span = Duration::from_millis(2200);
    thread::sleep(Duration::from_millis(200));
    let (woke_alone, turned_alone, _) = window(&s, span);
    let t = s
        .udm_create_job(&JobConfig {
            nodes: 4,
            ..JobConfig::default()
        })
        .unwrap();
    let mut nodes: Vec<Node> = (0..4).map(|r| s.udm_join(t, r).unwrap()).collect();
    // Some traffic first, both cases: a message each way round the ring,
    // then one diverted to a descheduled node and taken once it runs.
    for r in 0..4u32 {
        nodes[r as usize]
            .inject((r + 1) % 4, 1, &[r as u64])
            .unwrap();
    }
    for r in 0..4u32 {
        assert_eq!(take(&mut nodes[r as usize], 1), vec![((r + 3) % 4) as u64]);
    }
    s.udm_schedule(t, 0b1000, false).unwrap();
    nodes[0].inject(3, 1, &[7]).unwrap();
    s.udm_schedule(t, 0b1000, true).unwrap();
    assert_eq!(take(&mut nodes[3], 1), vec![7]);
    // Running and idle: swept once a second.
    thread::sleep(Duration::from_millis(300));
    let (_, _, swept) = window(&s, span);
    assert!(swept >= 4, "{swept} node visits while the nodes run");
    // Now every node is descheduled.
    let adv = s.udm_schedule(t, 0b1111, false).unwrap();
    assert_eq!(adv.descheduled, 0b1111);
    // Past the buffer's idle time (its pages go back) and a sweep.
    thread::sleep(Duration::from_millis(1200));
    let (woke, turned, visited) = window(&s, span);
    eprintln!(
        "over {span:?}: no job {woke_alone} wake-ups, {turned_alone} busy turns; the nodes running {swept} node visits; \
         descheduled {woke} wake-ups, {turned} busy turns, {visited} node visits"
    );
    // The window's own counter reads are control requests: an engine in
    // its look window serves them in busy turns, with or without a job.
    // They are six requests (three counters, before and after), and how
    // many turns serve them depends on when each arrives, so one turn
    // more is allowed (as one wake-up more is below): a CI run saw 3
    // against 2, with as many wake-ups as with no job. A sweep once a
    // second, the defect, would add two or three turns over the window,
    // and would visit nodes (checked next).
    assert!(
        turned <= turned_alone + 1,
        "{turned} busy turns against {turned_alone} with no job"
    );
    assert_eq!(visited, 0, "{visited} node visits");
    assert!(woke <= woke_alone + 1, "{woke} wake-ups");
    assert_eq!(engine_counter(&s, EngineCounter::UdmProcReads), 0);
    for n in &nodes {
        assert_eq!(n.mode(), Mode::Buffered);
    }
}

#[test]
fn overflow_advice_reaches_the_scheduler() {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    // 4 KiB buffers: 32 messages; advice from 24.
    let t = s
        .udm_create_job(&JobConfig {
            nodes: 2,
            fast_queue: 2,
            buffer_size: 4096,
            ..JobConfig::default()
        })
        .unwrap();
    let mut a = s.udm_join(t, 0).unwrap();
    let mut b = s.udm_join(t, 1).unwrap();
    s.udm_schedule(t, 0b10, false).unwrap();
    for i in 0..20u64 {
        assert!(a.injectc(1, 3, &[i]).unwrap());
    }
    until("20 buffered", || {
        b.stats().engine(UdmCounter::BufferedMsgs) == 20
    });
    // Below three quarters: no advice.
    assert_eq!(s.udm_schedule(t, 0b10, false).unwrap().near_full, 0);
    for i in 20..26u64 {
        assert!(a.injectc(1, 3, &[i]).unwrap());
    }
    until("26 buffered", || {
        b.stats().engine(UdmCounter::BufferedMsgs) == 26
    });
    let adv = s.udm_schedule(t, 0b10, false).unwrap();
    assert_eq!(adv.near_full, 0b10, "node 1's buffer is near its limit");
    assert_eq!(b.stats().engine(UdmCounter::OverflowAdvice), 1);
    assert_eq!(engine_counter(&s, EngineCounter::UdmOverflowAdvice), 1);
    // Once it runs (the notice that lets it run still advises: its
    // buffer is as full) and drains, the advice stops.
    let adv = s.udm_schedule(t, 0b10, true).unwrap();
    assert_eq!(adv.near_full, 0b10);
    assert_eq!(take(&mut b, 26), (0..26).collect::<Vec<_>>());
    let adv = s.udm_schedule(t, 0b10, true).unwrap();
    assert_eq!(adv.near_full, 0);
    assert_eq!(b.stats().engine(UdmCounter::OverflowAdvice), 2);
    assert_eq!(engine_counter(&s, EngineCounter::UdmOverflowAdvice), 2);
}

#[test]
fn notices_with_a_wrong_key_are_refused_and_counted() {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    let t = s.udm_create_job(&JobConfig::default()).unwrap();
    let b = s.udm_join(t, 1).unwrap();
    let forged = JobTicket {
        key: t.key ^ 1,
        ..t
    };
    match s.udm_schedule(forged, 0b10, false) {
        Err(Error::Engine(unet_control::ErrorCode::NoSuchJob)) => {}
        r => panic!("a wrong key: {r:?}"),
    }
    let other = JobTicket {
        job: t.job + 100,
        ..t
    };
    assert!(s.udm_schedule(other, 0b10, false).is_err());
    assert_eq!(engine_counter(&s, EngineCounter::UdmSchedRefused), 2);
    assert_eq!(engine_counter(&s, EngineCounter::UdmSchedNotices), 0);
    assert_eq!(b.mode(), Mode::Fast, "nothing switched");
}
