//! The way back to the fast case under senders that never pause: a
//! receiver switched to buffered mode returns to the fast case as soon as
//! it runs and finds its buffer empty, even while its senders keep
//! sending and diverted messages are still on their way to it. Each fast
//! message carries the count of messages its sender diverted before it,
//! and waits for them: nothing is lost, nothing reordered, and the
//! receiver is back in the fast case long before its senders stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use unet::udm::*;
use unet::*;

/// Words of message `seq` from sender `src`: a length that varies with
/// the sequence, every word checked.
fn words(src: u32, seq: u64) -> Vec<u64> {
    let len = 1 + (seq % MAX_WORDS as u64) as usize;
    (0..len as u64)
        .map(|k| seq << 8 | (src as u64) << 4 | k)
        .collect()
}

#[test]
fn a_receiver_returns_to_the_fast_case_while_its_senders_keep_sending() {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    let timeout = Duration::from_millis(1);
    let cfg = JobConfig {
        nodes: 3,
        fast_queue: 8,
        buffer_size: 1 << 20,
        atomicity_timeout: timeout,
    };
    let t = s.udm_create_job(&cfg).unwrap();
    let mut rx = s.udm_join(t, 0).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    // Two senders that never pause: inject waits only while its message
    // cannot go (a full ring, a full buffer).
    let senders: Vec<_> = (1..3u32)
        .map(|r| {
            let mut tx = s.udm_join(t, r).unwrap();
            let done = done.clone();
            thread::spawn(move || {
                let mut seq = 0u64;
                while !done.load(Ordering::Relaxed) {
                    tx.inject(0, 3, &words(r, seq)).unwrap();
                    seq += 1;
                }
                (tx, seq)
            })
        })
        .collect();
    let mut next = [0u64; 3];
    let mut w = [0u64; MAX_WORDS];
    let mut take = |rx: &mut Node, next: &mut [u64; 3]| -> bool {
        let Ok(h) = rx.extract(&mut w) else {
            return false;
        };
        let src = h.src as usize;
        assert!((1..3).contains(&src), "{h:?}");
        assert_eq!(
            &w[..h.len],
            &words(h.src, next[src])[..],
            "from {src}: once, in order, whole"
        );
        next[src] += 1;
        true
    };
    let (mut stalls, mut returns) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while returns < 8 {
        assert!(Instant::now() < deadline, "{:?}", rx.stats());
        // Run a while in the fast case.
        let until = Instant::now() + Duration::from_millis(5);
        while Instant::now() < until {
            take(&mut rx, &mut next);
        }
        // Stop extracting past the timeout: the rings fill, the engine
        // switches us, the senders go on through the engine.
        rx.beginatom(ATOM_DISABLE);
        thread::sleep(timeout * 20);
        rx.endatom(ATOM_DISABLE);
        if rx.mode() != Mode::Buffered {
            continue;
        }
        stalls += 1;
        // Drain: back in the fast case while the senders still send.
        let back = Instant::now() + Duration::from_secs(10);
        while rx.mode() != Mode::Fast {
            assert!(Instant::now() < back, "never back: {:?}", rx.stats());
            take(&mut rx, &mut next);
        }
        assert!(!senders.iter().any(|h| h.is_finished()));
        returns += 1;
    }
    let st = rx.stats();
    done.store(true, Ordering::Relaxed);
    let ends: Vec<(Node, u64)> = senders.into_iter().map(|h| h.join().unwrap()).collect();
    // Everything sent arrives.
    let total: u64 = ends.iter().map(|(_, n)| n).sum();
    let end = Instant::now() + Duration::from_secs(30);
    while next[1] + next[2] < total {
        assert!(
            Instant::now() < end,
            "{next:?} of {total}: {:?}",
            rx.stats()
        );
        if !take(&mut rx, &mut next) {
            rx.wait(Some(Duration::from_millis(10)));
        }
    }
    assert_eq!([next[1], next[2]], [ends[0].1, ends[1].1]);
    assert!(!rx.message_available());
    assert!(stalls >= 8, "{stalls}");
    assert!(st.buffered_taken > 0 && st.fast_msgs > 0, "{st:?}");
    assert_eq!(st.switch_queue_full, 0);
    assert!(st.engine(UdmCounter::SwitchTimeout) >= 8, "{st:?}");
    let st = rx.stats();
    assert_eq!(st.buffered_taken, st.engine(UdmCounter::BufferedMsgs));
    assert_eq!(st.engine(UdmCounter::BadPosition), 0);
}

/// A fast message sent after diverted ones waits for them even when it
/// is visible first: the receiver, back in the fast case, sees the fast
/// message before the engine has moved the earlier diverted ones into
/// its buffer, and takes them in order.
#[test]
fn a_fast_message_waits_for_the_diverted_ones_before_it() {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    let cfg = JobConfig {
        nodes: 2,
        fast_queue: 2,
        buffer_size: 64 << 10,
        atomicity_timeout: Duration::from_millis(1),
    };
    let t = s.udm_create_job(&cfg).unwrap();
    let mut rx = s.udm_join(t, 0).unwrap();
    let mut tx = s.udm_join(t, 1).unwrap();
    let mut w = [0u64; MAX_WORDS];
    let mut sent = 0u64;
    let mut got = 0u64;
    for round in 0..200 {
        // Fill the ring and hold it past the timeout: switched.
        let deadline = Instant::now() + Duration::from_secs(10);
        while rx.mode() != Mode::Buffered {
            assert!(
                Instant::now() < deadline,
                "round {round}: never switched: {:?}",
                rx.stats()
            );
            if !tx.injectc(0, 1, &words(1, sent)).unwrap() {
                thread::sleep(Duration::from_micros(200));
                continue;
            }
            sent += 1;
        }
        // Some diverted, then the receiver drains and goes back at once
        // (its buffer empty) while more diverted ones may be on their
        // way; the sender's next ones go fast, stamped.
        for _ in 0..(round % 5) {
            tx.inject(0, 1, &words(1, sent)).unwrap();
            sent += 1;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut extra = 0;
        while got < sent {
            assert!(
                Instant::now() < deadline,
                "round {round}: {got} of {sent}, {:?} {:?}",
                rx.mode(),
                rx.stats()
            );
            if let Ok(h) = rx.extract(&mut w) {
                assert_eq!(&w[..h.len], &words(1, got)[..], "in order");
                got += 1;
                // Interleave: the sender goes on while we take (a
                // few, fast now, stamped past its diverted ones).
                if extra < 16 && tx.injectc(0, 1, &words(1, sent)).unwrap() {
                    sent += 1;
                    extra += 1;
                }
            }
        }
        // Everything taken: the receiver is back in the fast case.
        assert!(!rx.message_available());
        assert_eq!(rx.mode(), Mode::Fast, "round {round}");
    }
    assert!(rx.stats().buffered_taken > 0);
    assert!(!rx.message_available());
}
