//! The pages of a UDM virtual buffer with a real engine: a buffer used
//! again starts again at its first page and writes the pages it kept
//! (none taken anew, none given back while it is in use); they go back
//! once it has been idle; and a small buffer that wraps and empties many
//! times while a sender streams messages of every size into it (each
//! takes its own size, one that does not fit at the end goes at the
//! start) loses nothing and keeps order.

use std::thread;
use std::time::{Duration, Instant};

use unet::udm::*;
use unet::*;

const PAGE: u64 = 4096;

/// Fill `rx`'s fast ring and wait until the engine switches it (it takes
/// nothing for the atomicity timeout), then send `n` more; wait until the
/// engine has them all in the buffer.
fn send_buffered(tx: &mut Node, rx: &Node, next: &mut u64, n: u64) {
    let before = rx.stats().engine(UdmCounter::BufferedMsgs);
    let mut buffered = 0;
    for _ in 0..n + 3 {
        // 14 words: 120 bytes a message in the buffer.
        let mut m = [0u64; MAX_WORDS];
        m[0] = *next;
        tx.inject(0, 1, &m).unwrap();
        *next += 1;
        if rx.mode() == Mode::Buffered {
            buffered += 1;
        }
    }
    assert!(buffered >= n, "switched late: {buffered} of {n}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while rx.stats().engine(UdmCounter::BufferedMsgs) < before + buffered {
        assert!(Instant::now() < deadline, "{:?}", rx.stats());
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_buffer_used_again_writes_the_pages_it_kept() {
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
    let (mut sent, mut got) = (0u64, 0u64);
    // 320 messages of 120 bytes a round: 10 pages.
    let mut kept_rounds = 0;
    for round in 0..10 {
        let returned = rx.stats().engine(UdmCounter::PagesReturned);
        send_buffered(&mut tx, &rx, &mut sent, 317);
        let mem = rx.buffer_memory().unwrap();
        assert!(mem <= 11 * PAGE, "round {round}: {mem} bytes");
        while got < sent {
            assert!(rx.wait(Some(Duration::from_secs(5))));
            rx.extract(&mut w).unwrap();
            assert_eq!(w[0], got, "once, in order");
            got += 1;
        }
        assert_eq!(rx.mode(), Mode::Fast);
        // Emptied, and its pages still there (unless the machine stalled
        // this thread past the idle time: then they went back).
        let after = rx.buffer_memory().unwrap();
        if rx.stats().engine(UdmCounter::PagesReturned) == returned {
            assert!(after >= 8 * PAGE, "round {round}: {after} bytes kept");
            if round > 0 {
                kept_rounds += 1;
            }
        }
    }
    assert!(kept_rounds >= 5, "pages kept in {kept_rounds} rounds of 9");
    let st = rx.stats();
    assert!(st.engine(UdmCounter::BufferPagesMax) <= 11, "{st:?}");
    // Idle: every page goes back.
    let deadline = Instant::now() + Duration::from_secs(5);
    while rx.buffer_memory().unwrap() != 0 || rx.stats().engine(UdmCounter::BufferPages) != 0 {
        assert!(Instant::now() < deadline, "{:?}", rx.stats());
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_small_buffer_wrapping_under_a_stream_loses_nothing() {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    let cfg = JobConfig {
        nodes: 2,
        fast_queue: 2,
        buffer_size: 16 << 10, // 4 pages: 128 messages of 14 words
        atomicity_timeout: Duration::from_micros(500),
    };
    let t = s.udm_create_job(&cfg).unwrap();
    let mut rx = s.udm_join(t, 0).unwrap();
    let mut tx = s.udm_join(t, 1).unwrap();
    const N: u64 = 60_000;
    let sender = thread::spawn(move || {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..N {
            // Of every size: records that do not fit at the buffer's
            // end go at its start, after a pad.
            let len = 1 + (i % MAX_WORDS as u64) as usize;
            let m: Vec<u64> = (0..len as u64).map(|k| i << 4 | k).collect();
            tx.inject(0, 2, &m).unwrap();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x.is_multiple_of(512) {
                thread::sleep(Duration::from_micros(x % 3000));
            }
        }
        tx
    });
    let mut w = [0u64; MAX_WORDS];
    let mut got = 0u64;
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let deadline = Instant::now() + Duration::from_secs(60);
    while got < N {
        assert!(Instant::now() < deadline, "got {got}: {:?}", rx.stats());
        if !rx.wait(Some(Duration::from_millis(100))) {
            continue;
        }
        let h = rx.extract(&mut w).unwrap();
        let len = 1 + (got % MAX_WORDS as u64) as usize;
        assert_eq!((h.handler, h.len), (2, len));
        for (k, x) in w[..len].iter().enumerate() {
            assert_eq!(
                *x,
                got << 4 | k as u64,
                "message {got}: once, in order, whole"
            );
        }
        got += 1;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Now and then the receiver stops a while: the buffer fills.
        if x.is_multiple_of(4096) {
            thread::sleep(Duration::from_millis(3));
        }
    }
    let _tx = sender.join().unwrap();
    assert!(!rx.message_available());
    let st = rx.stats();
    // The buffer went round its file many times.
    assert!(st.buffered_taken > 2 * 128, "{st:?}");
    assert!(st.engine(UdmCounter::BufferPagesMax) <= 4, "{st:?}");
    assert_eq!(st.engine(UdmCounter::BadPosition), 0);
    assert_eq!(st.buffered_taken, st.engine(UdmCounter::BufferedMsgs));
}
