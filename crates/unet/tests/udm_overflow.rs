//! UDM's virtual buffer and overflow control: a receiver that does not
//! extract holds its senders back at its buffer's limit (nothing lost,
//! memory bounded); the buffer's pages are touched only as used and given
//! back when it drains.

use std::thread;
use std::time::{Duration, Instant};

use unet::udm::*;
use unet::*;

const PAGE: u64 = 4096;

#[test]
fn a_receiver_that_never_extracts_holds_its_senders_with_bounded_memory() {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    let cfg = JobConfig {
        nodes: 3,
        fast_queue: 4,
        buffer_size: 64 << 10, // 512 messages
        ..JobConfig::default()
    };
    let cap = (cfg.buffer_size / 128) as usize;
    let t = s.udm_create_job(&cfg).unwrap();
    let mut rx = s.udm_join(t, 0).unwrap();
    assert_eq!(rx.buffer_memory().unwrap(), 0, "nothing touched yet");

    // Two senders, each as far as the receiver takes (injectc) ...
    let mut a = s.udm_join(t, 1).unwrap();
    let mut b = s.udm_join(t, 2).unwrap();
    let mut sent = [0u64; 3];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut went = false;
        for (node, r) in [(&mut a, 1usize), (&mut b, 2usize)] {
            if node.injectc(0, r as u16, &msg(r as u64, sent[r])).unwrap() {
                sent[r] += 1;
                went = true;
            }
        }
        if !went {
            // Held: the buffer is full, or the engine has yet to take a
            // diverted message (then a moment later it goes).
            thread::sleep(Duration::from_millis(20));
            let more = a.injectc(0, 1, &msg(1, sent[1])).unwrap();
            if more {
                sent[1] += 1;
                continue;
            }
            break;
        }
        assert!(Instant::now() < deadline, "never held");
    }
    let total = (sent[1] + sent[2]) as usize;
    // Each sender's fast ring, then the buffer's limit.
    assert_eq!(total, 2 * 4 + cap, "sent {sent:?}");
    assert_eq!(rx.mode(), Mode::Buffered);
    let st = rx.stats();
    assert!(st.overflow_holds >= 1, "{st:?}");
    assert_eq!(st.engine(UdmCounter::BufferedMsgs), cap as u64);
    // The limit's messages, 120 bytes each in the buffer, and no more.
    let full = (cap as u64 * 120).div_ceil(PAGE) * PAGE;
    let mem = rx.buffer_memory().unwrap();
    assert_eq!(mem, full, "the limit's records and no more");
    assert_eq!(st.engine(UdmCounter::BufferPages), full / PAGE);

    // ... and a blocking inject waits.
    let t2 = thread::spawn(move || {
        let r = a.inject(0, 1, &msg(1, sent[1]));
        (r, a)
    });
    thread::sleep(Duration::from_millis(200));
    assert!(!t2.is_finished(), "inject did not wait");
    assert_eq!(rx.buffer_memory().unwrap(), full);

    // The receiver takes everything: each sender's messages once, in
    // order, then the held one.
    let mut next = [0u64; 3];
    let mut w = [0u64; MAX_WORDS];
    let mut got = 0;
    while got < total + 1 {
        assert!(rx.wait(Some(Duration::from_secs(10))), "after {got}");
        let h = rx.extract(&mut w).unwrap();
        let r = h.src as usize;
        assert_eq!((h.handler as usize, h.len, w[0]), (r, MAX_WORDS, r as u64));
        assert_eq!(w[1], next[r], "sender {r} in order, once");
        next[r] += 1;
        got += 1;
    }
    let (r, _a) = t2.join().unwrap();
    r.unwrap();
    assert_eq!(next[1], sent[1] + 1);
    assert_eq!(next[2], sent[2]);
    assert!(!rx.message_available());
    assert_eq!(rx.mode(), Mode::Fast, "back to the fast case once drained");

    // Drained: every page given back (the engine does so on its next
    // turns, and counts it just after).
    let deadline = Instant::now() + Duration::from_secs(5);
    while rx.buffer_memory().unwrap() != 0 || rx.stats().engine(UdmCounter::BufferPages) != 0 {
        assert!(
            Instant::now() < deadline,
            "{} bytes kept, {:?}",
            rx.buffer_memory().unwrap(),
            rx.stats()
        );
        thread::sleep(Duration::from_millis(5));
    }
    let st = rx.stats();
    assert_eq!(st.engine(UdmCounter::BufferPages), 0);
    assert_eq!(st.engine(UdmCounter::BufferPagesMax), full / PAGE);
    assert!(st.engine(UdmCounter::PagesReturned) >= full / PAGE);
}

#[test]
fn pages_are_taken_as_used_and_given_back_behind_the_reader() {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    let cfg = JobConfig {
        nodes: 2,
        fast_queue: 2,
        buffer_size: 1 << 20,
        ..JobConfig::default()
    };
    let t = s.udm_create_job(&cfg).unwrap();
    let mut rx = s.udm_join(t, 0).unwrap();
    let mut tx = s.udm_join(t, 1).unwrap();
    let mut w = [0u64; MAX_WORDS];
    let mut next = 0u64;
    let mut sent = 0u64;
    // Several rounds around the ring: 1000 messages (of 14 words, 120
    // bytes in the buffer: 34 a page) in, all out, each round.
    for round in 0..20 {
        for _ in 0..1000 {
            tx.inject(0, 0, &msg(sent, 0)).unwrap();
            sent += 1;
        }
        // Wait until the engine has taken everything.
        let deadline = Instant::now() + Duration::from_secs(5);
        while rx.stats().engine(UdmCounter::BufferedMsgs) + 2 * (round + 1) < sent {
            assert!(Instant::now() < deadline);
            thread::sleep(Duration::from_millis(1));
        }
        let mem = rx.buffer_memory().unwrap();
        // About 1000 / 34 pages: taken as used, far below the 1 MiB reserved.
        assert!(
            (28 * PAGE..=34 * PAGE).contains(&mem),
            "round {round}: {mem}"
        );
        // Half out: the pages behind the reader go back.
        for _ in 0..500 {
            rx.wait(Some(Duration::from_secs(5)));
            rx.extract(&mut w).unwrap();
            assert_eq!(w[0], next);
            next += 1;
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while rx.buffer_memory().unwrap() > 18 * PAGE {
            assert!(Instant::now() < deadline, "{}", rx.buffer_memory().unwrap());
            thread::sleep(Duration::from_millis(1));
        }
        while next < sent {
            rx.wait(Some(Duration::from_secs(5)));
            rx.extract(&mut w).unwrap();
            assert_eq!(w[0], next);
            next += 1;
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while rx.buffer_memory().unwrap() != 0 {
            assert!(Instant::now() < deadline, "{}", rx.buffer_memory().unwrap());
            thread::sleep(Duration::from_millis(1));
        }
    }
    let st = rx.stats();
    assert!(st.buffered_taken > 15_000, "{st:?}");
    assert!(st.engine(UdmCounter::BufferPagesMax) <= 34, "{st:?}");
}

/// A message of 14 words (120 bytes in a virtual buffer): `w0`, `w1`,
/// then zeros.
fn msg(w0: u64, w1: u64) -> [u64; MAX_WORDS] {
    let mut m = [0u64; MAX_WORDS];
    m[0] = w0;
    m[1] = w1;
    m
}
