//! A full fast ring blocks its sender, as a blocked network does: it never
//! switches the receiver. The engine switches a receiver to buffered mode
//! only when it has messages waiting and takes none for the atomicity
//! timeout, whatever keeps it from taking them. So a receiver that stops
//! extracting is switched after the timeout and loses nothing, and two
//! nodes each waiting in an inject to the other do not deadlock.

use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use unet::udm::*;
use unet::*;

fn engine() -> (Engine, Session) {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    (e, s)
}

#[test]
fn a_receiver_that_stops_extracting_with_a_full_ring_is_switched_after_the_timeout() {
    let (_e, s) = engine();
    let timeout = Duration::from_millis(100);
    let cfg = JobConfig {
        fast_queue: 4,
        atomicity_timeout: timeout,
        ..JobConfig::default()
    };
    let t = s.udm_create_job(&cfg).unwrap();
    let mut a = s.udm_join(t, 0).unwrap();
    let mut b = s.udm_join(t, 1).unwrap();
    // b took two, then stops extracting.
    let mut w = [0u64; MAX_WORDS];
    for i in 0..2u64 {
        a.inject(1, 5, &[i]).unwrap();
        assert_eq!(b.extract(&mut w).unwrap().src, 0);
        assert_eq!(w[0], i);
    }
    // Nothing waits for b before this instant.
    let full = Instant::now();
    for i in 2..6u64 {
        a.inject(1, 5, &[i]).unwrap();
    }
    // The ring is full: injectc says not now, and b is not switched.
    for _ in 0..64 {
        assert!(!a.injectc(1, 5, &[6]).unwrap(), "the ring is full");
    }
    if full.elapsed() < timeout / 2 {
        assert_eq!(b.mode(), Mode::Fast, "a full ring switches nothing");
    }
    assert_eq!(b.stats().switch_queue_full, 0);
    // inject waits until the engine switches b, a timeout after it was
    // told (the injectc above told it).
    for i in 6..300u64 {
        a.inject(1, 5, &[i]).unwrap();
    }
    assert!(full.elapsed() >= timeout, "switched before the timeout");
    assert_eq!(b.mode(), Mode::Buffered);
    let st = b.stats();
    assert_eq!(st.engine(UdmCounter::SwitchTimeout), 1, "{st:?}");
    assert_eq!(st.engine(UdmCounter::SwitchDescheduled), 0, "{st:?}");
    assert_eq!(st.switch_queue_full, 0, "{st:?}");
    // Nothing lost, each once, in order: the four fast ones first.
    for i in 2..300u64 {
        assert!(b.wait(Some(Duration::from_secs(5))), "message {i}");
        let h = b.extract(&mut w).unwrap();
        assert_eq!((h.src, h.handler, h.len), (0, 5, 1));
        assert_eq!(w[0], i, "in order");
    }
    assert!(!b.message_available());
    assert_eq!(b.mode(), Mode::Fast);
    let st = b.stats();
    assert_eq!(st.fast_msgs, 6, "{st:?}");
    assert_eq!(st.buffered_taken, 294, "{st:?}");
    assert_eq!(st.engine(UdmCounter::BufferedMsgs), 294, "{st:?}");
}

/// One node of the pair: inject `n` messages to the other (waiting in
/// inject whenever its ring is full), then take the other's `n`, none
/// before its own injects are done.
fn both_ways(mut node: Node, n: u64, start: Arc<Barrier>) -> (Node, Vec<u64>) {
    let peer = 1 - node.rank();
    start.wait();
    for i in 0..n {
        node.inject(peer, node.rank() as u16, &[i, !i]).unwrap();
    }
    let mut got = Vec::new();
    let mut w = [0u64; MAX_WORDS];
    while (got.len() as u64) < n {
        assert!(
            node.wait(Some(Duration::from_secs(10))),
            "lost after {}",
            got.len()
        );
        let h = node.extract(&mut w).unwrap();
        assert_eq!((h.src, h.handler, h.len), (peer, peer as u16, 2));
        assert_eq!(w[1], !w[0], "words intact");
        got.push(w[0]);
    }
    (node, got)
}

#[test]
fn two_nodes_each_blocked_injecting_to_the_other_both_finish() {
    let (_e, s) = engine();
    let cfg = JobConfig {
        fast_queue: 4,
        atomicity_timeout: Duration::from_millis(2),
        ..JobConfig::default()
    };
    let n = 2000u64;
    for round in 0..3 {
        let t = s.udm_create_job(&cfg).unwrap();
        let start = Arc::new(Barrier::new(2));
        let (done, finished) = mpsc::channel();
        for r in 0..2 {
            let node = s.udm_join(t, r).unwrap();
            let (start, done) = (start.clone(), done.clone());
            thread::spawn(move || {
                let _ = done.send(Box::new(both_ways(node, n, start)));
            });
        }
        drop(done);
        // A deadlock fails the test instead of hanging it (a node that
        // panicked ends its thread without sending).
        let pair: Vec<_> = (0..2)
            .map(|_| {
                finished
                    .recv_timeout(Duration::from_secs(60))
                    .unwrap_or_else(|e| {
                        panic!("round {round}: {e:?} (deadlocked, or a node failed)")
                    })
            })
            .collect();
        let mut switches = 0;
        for finished in pair {
            let (mut node, got) = *finished;
            let want: Vec<u64> = (0..n).collect();
            assert!(got == want, "round {round}: not each once in order");
            assert!(!node.message_available(), "round {round}: one too many");
            let st = node.stats();
            assert_eq!(st.switch_queue_full, 0, "{st:?}");
            switches += st.engine(UdmCounter::SwitchTimeout);
        }
        // Both rings were full with neither taking: only the timeout can
        // have let them go.
        assert!(switches >= 1, "round {round}: no switch");
    }
}
