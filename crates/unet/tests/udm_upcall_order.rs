//! UDM with handlers under random schedules: two senders inject data of
//! random lengths in random bursts to a node with upcalls; its handlers
//! extract and sometimes answer, while its main code makes random atomic
//! sections (some held past the atomicity timeout, so that messages take
//! the buffered case), extracting some messages itself. Every message must
//! arrive exactly once, in its sender's order, with its words intact, and
//! so must every answer; no handler may overlap an atomic section of the
//! main code or another handler (each side records its entry and exit
//! with atomics and looks at the other's); and handlers, the main code's
//! extracts, the buffered case and answers must all have happened.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::Rng;
use unet::udm::*;
use unet::*;

const SENDERS: u32 = 2;
const RECEIVER: u32 = 2;
const DATA: u16 = 1;
const DONE: u16 = 2;
const ANSWER: u16 = 3;

/// Word `k` of message `seq` from `src`.
fn word(src: u32, seq: u64, k: usize) -> u64 {
    let mut x = (src as u64) << 48 ^ seq << 8 ^ k as u64;
    x ^= x >> 29;
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// What the receiver saw and did.
#[derive(Default)]
struct Book {
    next: [u64; SENDERS as usize],
    announced: [Option<u64>; SENDERS as usize],
    /// Answers sent to each sender.
    answers: [u64; SENDERS as usize],
    by_handler: u64,
    by_main: u64,
    errors: Vec<String>,
}

impl Book {
    /// Check a message just extracted.
    fn check(&mut self, h: Header, w: &[u64]) {
        let s = h.src as usize;
        if s >= SENDERS as usize {
            self.errors.push(format!("a message from node {s}"));
            return;
        }
        match h.handler {
            DATA => {
                if h.len == 0 || w[0] != self.next[s] {
                    self.errors.push(format!(
                        "from {s}: got {:?}, expected {}",
                        w.first(),
                        self.next[s]
                    ));
                    return;
                }
                for (k, v) in w.iter().enumerate().skip(1) {
                    if *v != word(h.src, w[0], k) {
                        self.errors
                            .push(format!("from {s}: message {} word {k}", w[0]));
                    }
                }
                if self.announced[s].is_some() {
                    self.errors.push(format!("from {s}: data after DONE"));
                }
                self.next[s] += 1;
            }
            DONE => self.announced[s] = Some(w[0]),
            other => self.errors.push(format!("handler {other}")),
        }
    }

    fn complete(&self) -> bool {
        self.announced
            .iter()
            .zip(&self.next)
            .all(|(a, n)| *a == Some(*n))
    }
}

/// Entry and exit of the main code's atomic sections and of handlers.
#[derive(Default)]
struct Watch {
    main_in: AtomicBool,
    handlers_in: AtomicU32,
    overlaps: AtomicU64,
}

/// A sender: `msgs` data messages in random bursts, then DONE; meanwhile
/// and afterwards it takes the answers, which must come in order.
fn sender(mut node: Node, seed: u64, msgs: u64, answers_sent: Arc<Mutex<Option<u64>>>) -> u64 {
    let me = node.rank();
    let mut rng = Rng(seed);
    let mut next_answer = 0u64;
    let take = |node: &mut Node, next_answer: &mut u64| {
        let mut w = [0u64; MAX_WORDS];
        while let Ok(h) = node.extract(&mut w) {
            assert_eq!((h.src, h.handler, h.len), (RECEIVER, ANSWER, 1));
            assert_eq!(w[0], *next_answer, "node {me}: answers once, in order");
            *next_answer += 1;
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seq = 0u64;
    while seq < msgs {
        // Mostly short bursts, now and then one that fills the fast ring.
        let burst = if rng.below(16) == 0 {
            1 + rng.below(32)
        } else {
            1 + rng.below(4)
        };
        for _ in 0..burst.min(msgs - seq) {
            let len = 1 + rng.below(MAX_WORDS as u64) as usize;
            let mut w = [0u64; MAX_WORDS];
            w[0] = seq;
            for (k, x) in w.iter_mut().enumerate().take(len).skip(1) {
                *x = word(me, seq, k);
            }
            while !node.injectc(RECEIVER, DATA, &w[..len]).unwrap() {
                take(&mut node, &mut next_answer);
                assert!(Instant::now() < deadline, "node {me} stuck sending");
                thread::yield_now();
            }
            seq += 1;
        }
        take(&mut node, &mut next_answer);
        if rng.below(4) == 0 {
            thread::sleep(Duration::from_micros(rng.below(300)));
        }
    }
    node.inject(RECEIVER, DONE, &[msgs]).unwrap();
    // The answers: all of those the receiver says it sent.
    loop {
        take(&mut node, &mut next_answer);
        let sent = *answers_sent.lock().unwrap();
        if sent.is_some_and(|n| n <= next_answer) {
            break;
        }
        assert!(Instant::now() < deadline, "node {me}: answers missing");
        node.wait(Some(Duration::from_millis(5)));
    }
    next_answer
}

fn run(seed: u64, msgs: u64) {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    let t = s
        .udm_create_job(&JobConfig {
            nodes: 3,
            atomicity_timeout: Duration::from_millis(1),
            ..JobConfig::default()
        })
        .unwrap();
    let book = Arc::new(Mutex::new(Book::default()));
    let watch = Arc::new(Watch::default());
    let mut r = s.udm_join(t, RECEIVER).unwrap().into_upcalls().unwrap();
    {
        let (bk, wt) = (book.clone(), watch.clone());
        let mut rng = Rng(seed ^ 0x5555);
        r.set_handler(DATA, move |u| {
            if wt.handlers_in.fetch_add(1, Ordering::SeqCst) != 0
                || wt.main_in.load(Ordering::SeqCst)
            {
                wt.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            let mut w = [0u64; MAX_WORDS];
            let h = u.extract(&mut w).expect("the message of the upcall");
            let mut b = bk.lock().unwrap();
            b.check(h, &w[..h.len]);
            b.by_handler += 1;
            // Sometimes answer (numbered per sender), or take one more.
            let s = h.src as usize;
            if s < SENDERS as usize && rng.below(4) == 0 {
                let n = b.answers[s];
                if u.injectc(h.src, ANSWER, &[n]).unwrap() {
                    b.answers[s] += 1;
                }
            }
            if rng.below(8) == 0 {
                if let Ok(h2) = u.extract(&mut w) {
                    b.check(h2, &w[..h2.len]);
                    b.by_handler += 1;
                }
            }
            drop(b);
            if rng.below(256) == 0 {
                // A slow handler now and then: past the atomicity timeout.
                thread::sleep(Duration::from_millis(2));
            }
            if wt.main_in.load(Ordering::SeqCst) {
                wt.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            wt.handlers_in.fetch_sub(1, Ordering::SeqCst);
        });
        let (bk, wt) = (book.clone(), watch.clone());
        r.set_handler(DONE, move |u| {
            if wt.handlers_in.fetch_add(1, Ordering::SeqCst) != 0
                || wt.main_in.load(Ordering::SeqCst)
            {
                wt.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            let mut w = [0u64; MAX_WORDS];
            let h = u.extract(&mut w).expect("the message of the upcall");
            let mut b = bk.lock().unwrap();
            b.check(h, &w[..h.len]);
            b.by_handler += 1;
            drop(b);
            wt.handlers_in.fetch_sub(1, Ordering::SeqCst);
        });
    }
    let answered: Vec<Arc<Mutex<Option<u64>>>> =
        (0..SENDERS).map(|_| Arc::new(Mutex::new(None))).collect();
    let senders: Vec<_> = (0..SENDERS)
        .map(|rank| {
            let node = s.udm_join(t, rank).unwrap();
            let a = answered[rank as usize].clone();
            thread::spawn(move || sender(node, seed + rank as u64, msgs, a))
        })
        .collect();

    // The receiver's main code: random atomic sections.
    let mut rng = Rng(seed ^ 0xAAAA);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut sections = 0u64;
    while !book.lock().unwrap().complete() {
        assert!(
            Instant::now() < deadline,
            "the receiver never got everything"
        );
        match rng.below(4) {
            0 | 1 => {
                let force = rng.below(3) == 0;
                let mask = ATOM_DISABLE | if force { ATOM_TIMER_FORCE } else { 0 };
                r.beginatom(mask);
                watch.main_in.store(true, Ordering::SeqCst);
                if watch.handlers_in.load(Ordering::SeqCst) != 0 {
                    watch.overlaps.fetch_add(1, Ordering::SeqCst);
                }
                let mut w = [0u64; MAX_WORDS];
                for _ in 0..rng.below(6) {
                    if let Ok(h) = r.extract(&mut w) {
                        let mut b = book.lock().unwrap();
                        b.check(h, &w[..h.len]);
                        b.by_main += 1;
                    }
                }
                // Sometimes held past the atomicity timeout.
                if rng.below(8) == 0 {
                    thread::sleep(Duration::from_micros(500 + rng.below(3000)));
                } else {
                    for _ in 0..rng.below(2000) {
                        std::hint::spin_loop();
                    }
                }
                if watch.handlers_in.load(Ordering::SeqCst) != 0 {
                    watch.overlaps.fetch_add(1, Ordering::SeqCst);
                }
                watch.main_in.store(false, Ordering::SeqCst);
                r.endatom(mask);
                sections += 1;
            }
            2 => thread::sleep(Duration::from_micros(rng.below(1000))),
            _ => thread::yield_now(),
        }
    }
    let b = book.lock().unwrap();
    assert!(
        b.errors.is_empty(),
        "seed {seed}: {:?}",
        &b.errors[..b.errors.len().min(10)]
    );
    for (k, a) in answered.iter().enumerate() {
        *a.lock().unwrap() = Some(b.answers[k]);
    }
    let answers = b.answers;
    let (by_handler, by_main) = (b.by_handler, b.by_main);
    drop(b);
    for (k, th) in senders.into_iter().enumerate() {
        let got = th.join().unwrap();
        assert_eq!(got, answers[k], "seed {seed}: answers to node {k}");
    }
    assert_eq!(
        watch.overlaps.load(Ordering::SeqCst),
        0,
        "seed {seed}: overlaps"
    );
    assert_eq!(r.take_error(), None);
    let st = r.stats();
    let total = SENDERS as u64 * (msgs + 1);
    assert_eq!(by_handler + by_main, total, "seed {seed}");
    assert_eq!(st.fast_msgs + st.buffered_taken, total);
    assert_eq!(
        (st.no_handler, st.dispose_failures, st.handler_panics),
        (0, 0, 0)
    );
    // The schedule exercised what it is for.
    assert!(
        by_handler > msgs / 4 && by_main > 0,
        "seed {seed}: {by_handler} {by_main}"
    );
    assert!(st.buffered_taken > 0, "seed {seed}: never buffered: {st:?}");
    assert!(st.fast_msgs > 0, "seed {seed}: never fast: {st:?}");
    assert!(answers.iter().all(|&a| a > 0), "seed {seed}: no answers");
    assert!(sections > 10, "seed {seed}: {sections} sections");
    eprintln!(
        "seed {seed:#x}: {by_handler} by handlers, {by_main} by the main code in {sections} \
         sections, {} fast, {} buffered, answers {answers:?}",
        st.fast_msgs, st.buffered_taken
    );
}

#[test]
fn random_schedules_with_handlers() {
    for seed in [0x1234_5678_9abc_def1, 0x0fed_cba9_8765_4321, 3, 4] {
        run(seed, 20_000);
    }
}
