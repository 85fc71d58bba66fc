//! UDM handlers run as asynchronous upcalls (`Node::into_upcalls`), and
//! the UDM paper's Table 1, row by row: `beginatom` holds handlers off and
//! waits for a running one; `endatom` with `dispose-pending` is a
//! `dispose-failure` (reported, counted, the message kept); `endatom` with
//! `atomicity-extend` does the deferred work; a plain `endatom` lets the
//! messages that waited run; `dispose` in buffered mode, and with nothing
//! to dispose of. Also a message for no handler, a panicking handler, and
//! a slow handler that runs into the atomicity timeout.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use unet::udm::*;
use unet::*;

fn engine() -> (Engine, Session) {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    (e, s)
}

/// A job of two nodes: node 0 polls, node 1 has upcalls.
fn pair(s: &Session, cfg: JobConfig) -> (Node, UpcallNode) {
    let t = s.udm_create_job(&cfg).unwrap();
    let a = s.udm_join(t, 0).unwrap();
    let b = s.udm_join(t, 1).unwrap().into_upcalls().unwrap();
    (a, b)
}

/// Wait (at most 10 s) until `f` holds.
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What handlers took: (src, words) each.
type Log = Arc<Mutex<Vec<(u32, Vec<u64>)>>>;

/// A handler that extracts and records (src, words) in `log`.
fn recorder(log: &Log) -> impl FnMut(&mut Upcall<'_>) + Send {
    let log = log.clone();
    move |u| {
        let mut w = [0u64; MAX_WORDS];
        let h = u
            .extract(&mut w)
            .expect("the message that raised the upcall");
        log.lock().unwrap().push((h.src, w[..h.len].to_vec()));
    }
}

#[test]
fn handlers_run_on_their_own_thread_in_order() {
    let (_e, s) = engine();
    let (mut a, mut b) = pair(&s, JobConfig::default());
    let log = Arc::new(Mutex::new(Vec::new()));
    b.set_handler(7, recorder(&log));
    let main = std::thread::current().id();
    let other = Arc::new(AtomicBool::new(false));
    let o = other.clone();
    b.set_handler(8, move |u| {
        let h = u.header();
        assert_eq!((h.src, h.handler, h.len), (0, 8, 0));
        o.store(std::thread::current().id() != main, Ordering::Relaxed);
        u.dispose().unwrap();
    });
    for i in 0..200u64 {
        a.inject(1, 7, &[i, i * 3]).unwrap();
    }
    a.inject(1, 8, &[]).unwrap();
    until("200 upcalls", || log.lock().unwrap().len() == 200);
    until("handler 8", || b.stats().upcalls == 201);
    assert!(
        other.load(Ordering::Relaxed),
        "the handler ran on the main thread"
    );
    for (i, (src, w)) in log.lock().unwrap().iter().enumerate() {
        let i = i as u64;
        assert_eq!((*src, &w[..]), (0, &[i, i * 3][..]), "upcall {i}");
    }
    let st = b.stats();
    assert_eq!(st.upcalls, 201);
    assert_eq!(st.fast_msgs + st.buffered_taken, 201);
    assert_eq!((st.no_handler, st.dispose_failures), (0, 0));
    assert!(!b.message_available());
    assert_eq!(b.take_error(), None);
    // Handlers may send: a reply from node 1's handler to node 0.
    b.set_handler(9, |u| {
        let mut w = [0u64; MAX_WORDS];
        let h = u.extract(&mut w).unwrap();
        u.inject(h.src, 10, &[w[0] + 1]).unwrap();
    });
    a.inject(1, 9, &[41]).unwrap();
    assert!(a.wait(Some(Duration::from_secs(10))));
    let mut w = [0u64; MAX_WORDS];
    assert_eq!(a.extract(&mut w).unwrap().handler, 10);
    assert_eq!(w[0], 42);
    // Back to polling: the handler thread stops, the node stays.
    let mut b = b.into_node();
    a.inject(1, 7, &[5]).unwrap();
    assert!(b.wait(Some(Duration::from_secs(10))));
    assert_eq!(b.extract(&mut w).unwrap().handler, 7);
    assert_eq!(log.lock().unwrap().len(), 200);
}

/// Table 1, `beginatom` and the plain `endatom`: no handler runs in the
/// main code's atomic section; the messages that waited run at `endatom`.
/// `ATOM_TIMER_FORCE` alone does not disable interrupts.
#[test]
fn no_handler_runs_inside_an_atomic_section() {
    let (_e, s) = engine();
    let cfg = JobConfig {
        atomicity_timeout: Duration::from_secs(10),
        ..JobConfig::default()
    };
    let (mut a, mut b) = pair(&s, cfg);
    let log = Arc::new(Mutex::new(Vec::new()));
    b.set_handler(1, recorder(&log));
    b.beginatom(ATOM_DISABLE);
    assert_eq!(b.atomicity(), ATOM_DISABLE);
    for i in 0..5 {
        a.inject(1, 1, &[i]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    assert!(log.lock().unwrap().is_empty(), "a handler ran while atomic");
    // Polling inside the section takes the first message.
    assert!(b.message_available());
    let mut w = [0u64; MAX_WORDS];
    assert_eq!(b.extract(&mut w).unwrap().len, 1);
    assert_eq!(w[0], 0);
    assert!(log.lock().unwrap().is_empty());
    b.endatom(ATOM_DISABLE);
    until("the waiting messages' handlers", || {
        log.lock().unwrap().len() == 4
    });
    let got: Vec<u64> = log.lock().unwrap().iter().map(|(_, w)| w[0]).collect();
    assert_eq!(got, [1, 2, 3, 4]);
    // timer-force alone leaves interrupts enabled.
    b.beginatom(ATOM_TIMER_FORCE);
    a.inject(1, 1, &[9]).unwrap();
    until("a handler under timer-force", || {
        log.lock().unwrap().len() == 5
    });
    b.endatom(ATOM_TIMER_FORCE);
    assert_eq!(b.atomicity(), 0);
}

/// Table 1, `beginatom` with a handler running: it waits for the handler
/// to return, and no handler overlaps the section that follows.
#[test]
fn beginatom_waits_for_a_running_handler() {
    let (_e, s) = engine();
    let cfg = JobConfig {
        atomicity_timeout: Duration::from_secs(10),
        ..JobConfig::default()
    };
    let (mut a, mut b) = pair(&s, cfg);
    let inside = Arc::new(AtomicU64::new(0));
    let ins = inside.clone();
    b.set_handler(2, move |u| {
        ins.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(100));
        u.dispose().unwrap();
        ins.fetch_sub(1, Ordering::SeqCst);
    });
    a.inject(1, 2, &[]).unwrap();
    a.inject(1, 2, &[]).unwrap();
    until("the handler to start", || {
        inside.load(Ordering::SeqCst) == 1
    });
    let t0 = Instant::now();
    b.beginatom(ATOM_DISABLE);
    assert_eq!(
        inside.load(Ordering::SeqCst),
        0,
        "beginatom returned inside a handler"
    );
    assert!(t0.elapsed() >= Duration::from_millis(20));
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(
        inside.load(Ordering::SeqCst),
        0,
        "a handler ran in the section"
    );
    // The second message is still there.
    assert!(b.message_available());
    assert_eq!(b.stats().upcalls, 1);
    b.endatom(ATOM_DISABLE);
    until("the second handler", || b.stats().upcalls == 2);
}

/// Table 1, `endatom` with `dispose-pending`: a handler that returns
/// without extracting or disposing is a `dispose-failure`: counted,
/// reported to the main code, the message kept; upcalls wait until the
/// error is taken (the handler is not run again and again meanwhile).
#[test]
fn dispose_pending_is_a_dispose_failure_and_keeps_the_message() {
    let (_e, s) = engine();
    let (mut a, mut b) = pair(&s, JobConfig::default());
    let peeks = Arc::new(AtomicU64::new(0));
    let p = peeks.clone();
    b.set_handler(3, move |u| {
        // Looks, takes nothing.
        let m = u.peek().unwrap();
        assert_eq!(m.words(), &[77]);
        p.fetch_add(1, Ordering::SeqCst);
    });
    let log = Arc::new(Mutex::new(Vec::new()));
    b.set_handler(4, recorder(&log));
    a.inject(1, 3, &[77]).unwrap();
    a.inject(1, 4, &[78]).unwrap();
    until("the dispose-failure", || b.stats().dispose_failures == 1);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(
        peeks.load(Ordering::SeqCst),
        1,
        "the failing handler ran again"
    );
    assert!(
        log.lock().unwrap().is_empty(),
        "upcalls went on after the error"
    );
    // Not lost: the main code takes it.
    let mut w = [0u64; MAX_WORDS];
    let h = b.extract(&mut w).unwrap();
    assert_eq!((h.src, h.handler, w[0]), (0, 3, 77));
    assert_eq!(
        b.take_error(),
        Some(UpcallError::DisposeFailure { handler: 3, src: 0 })
    );
    assert_eq!(b.take_error(), None);
    until("upcalls to resume", || log.lock().unwrap().len() == 1);
    assert_eq!(log.lock().unwrap()[0], (0, vec![78]));
    let st = b.stats();
    assert_eq!((st.upcalls, st.dispose_failures), (2, 1));
}

/// Table 1, `endatom` with `atomicity-extend`: the handler's atomic
/// section goes on in the main code; messages wait; the main code's
/// `endatom` does the deferred work. `dispose-pending` comes first: a
/// handler that extends without taking a message is a dispose-failure.
#[test]
fn atomicity_extend_defers_to_endatom() {
    let (_e, s) = engine();
    let cfg = JobConfig {
        atomicity_timeout: Duration::from_secs(10),
        ..JobConfig::default()
    };
    let (mut a, mut b) = pair(&s, cfg);
    let extended = Arc::new(AtomicBool::new(false));
    let x = extended.clone();
    b.set_handler(1, move |u| {
        u.dispose().unwrap();
        u.extend_atomicity();
        x.store(true, Ordering::SeqCst);
    });
    let log = Arc::new(Mutex::new(Vec::new()));
    b.set_handler(2, recorder(&log));
    a.inject(1, 1, &[]).unwrap();
    until("the extending handler", || extended.load(Ordering::SeqCst));
    until("the extended section", || b.atomicity() & ATOM_DISABLE != 0);
    a.inject(1, 2, &[5]).unwrap();
    a.inject(1, 2, &[6]).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        log.lock().unwrap().is_empty(),
        "a handler ran in the extended section"
    );
    // The main code owns the section: it may poll.
    assert!(b.message_available());
    b.endatom(ATOM_DISABLE);
    until("the deferred handlers", || log.lock().unwrap().len() == 2);
    assert_eq!(b.atomicity(), 0);
    assert_eq!(b.take_error(), None);

    // Extend without disposing: dispose-failure, and no extension.
    b.set_handler(3, |u| u.extend_atomicity());
    a.inject(1, 3, &[]).unwrap();
    until("the dispose-failure", || b.stats().dispose_failures == 1);
    assert_eq!(b.atomicity(), 0);
    assert_eq!(
        b.take_error(),
        Some(UpcallError::DisposeFailure { handler: 3, src: 0 })
    );
    b.dispose().unwrap();
}

/// Table 1, `dispose`: with nothing current it is `bad-dispose`
/// (`ExtractError::Empty`); in buffered mode (`divert-mode`) it is
/// emulated, the same for the handler.
#[test]
fn dispose_in_a_handler_bad_and_buffered() {
    let (_e, s) = engine();
    let cfg = JobConfig {
        atomicity_timeout: Duration::from_millis(5),
        ..JobConfig::default()
    };
    let (mut a, mut b) = pair(&s, cfg);
    let bad = Arc::new(Mutex::new(Vec::new()));
    let bd = bad.clone();
    b.set_handler(1, move |u| {
        u.dispose().unwrap();
        // The only message is gone: a second dispose is bad-dispose.
        if !u.message_available() {
            bd.lock().unwrap().push(u.dispose());
        }
    });
    a.inject(1, 1, &[]).unwrap();
    until("the handler", || b.stats().upcalls == 1);
    assert_eq!(bad.lock().unwrap()[..], [Err(ExtractError::Empty)]);

    // Held atomic past the timeout with messages waiting: buffered mode;
    // the handlers then dispose of buffered messages.
    b.beginatom(ATOM_DISABLE);
    // Fewer than a fast ring holds: the engine's timer makes the switch.
    for i in 0..5u64 {
        a.inject(1, 1, &[i]).unwrap();
    }
    until("the switch to buffered mode", || b.mode() == Mode::Buffered);
    for i in 5..40u64 {
        a.inject(1, 1, &[i]).unwrap();
    }
    b.endatom(ATOM_DISABLE);
    until("41 upcalls", || b.stats().upcalls == 41);
    let st = b.stats();
    assert!(st.buffered_taken >= 20, "{st:?}");
    assert!(st.engine(UdmCounter::SwitchTimeout) >= 1);
    assert_eq!(st.dispose_failures, 0);
    until("the fast case again", || b.mode() == Mode::Fast);
}

/// A message for a handler index with nothing registered: counted,
/// reported, kept; a panicking handler: counted, reported, and the
/// handler thread goes on.
#[test]
fn no_handler_and_a_panicking_handler_are_reported() {
    let (_e, s) = engine();
    let (mut a, mut b) = pair(&s, JobConfig::default());
    a.inject(1, 9, &[1, 2]).unwrap();
    until("the no-handler error", || b.stats().no_handler == 1);
    // Kept: the main code extracts it, then takes the error (taking it
    // first would resume upcalls, and the message would fault again).
    let mut w = [0u64; MAX_WORDS];
    assert_eq!(b.extract(&mut w).unwrap().handler, 9);
    assert_eq!(&w[..2], &[1, 2]);
    assert_eq!(
        b.take_error(),
        Some(UpcallError::NoHandler { handler: 9, src: 0 })
    );
    assert_eq!(b.stats().no_handler, 1, "the kept message ran once");

    b.set_handler(5, |u| {
        u.dispose().unwrap();
        panic!("a handler's bug");
    });
    a.inject(1, 5, &[]).unwrap();
    until("the panic", || b.stats().handler_panics == 1);
    assert_eq!(
        b.take_error(),
        Some(UpcallError::Panicked { handler: 5, src: 0 })
    );
    let log = Arc::new(Mutex::new(Vec::new()));
    b.set_handler(6, recorder(&log));
    a.inject(1, 6, &[3]).unwrap();
    until("the next handler", || log.lock().unwrap().len() == 1);
    // Removing a handler: its messages are no-handler errors again.
    b.clear_handler(6);
    a.inject(1, 6, &[4]).unwrap();
    until("the second no-handler error", || b.stats().no_handler == 2);
    assert_eq!(
        b.take_error(),
        Some(UpcallError::NoHandler { handler: 6, src: 0 })
    );
    b.dispose().unwrap();
}

/// A slow handler is an atomic section the engine times: messages that
/// wait past the atomicity timeout switch the node to buffered mode, and
/// every message still runs its handler once, in order.
#[test]
fn a_slow_handler_runs_into_the_atomicity_timeout() {
    let (_e, s) = engine();
    let cfg = JobConfig {
        atomicity_timeout: Duration::from_millis(5),
        ..JobConfig::default()
    };
    let (mut a, mut b) = pair(&s, cfg);
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut rec = recorder(&log);
    b.set_handler(1, move |u| {
        let first = u.header().len == 0;
        rec(u);
        if first {
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    a.inject(1, 1, &[]).unwrap();
    until("the slow handler", || log.lock().unwrap().len() == 1);
    // Fewer than a fast ring holds, so the switch is the engine's timer's.
    for i in 0..5u64 {
        a.inject(1, 1, &[i]).unwrap();
    }
    until("the switch to buffered mode", || {
        a.mode_of(1) == Mode::Buffered
    });
    assert!(
        log.lock().unwrap().len() == 1,
        "the slow handler was not slow"
    );
    for i in 5..30u64 {
        a.inject(1, 1, &[i]).unwrap();
    }
    until("every handler", || log.lock().unwrap().len() == 31);
    let got: Vec<u64> = log.lock().unwrap()[1..].iter().map(|(_, w)| w[0]).collect();
    assert_eq!(got, (0..30).collect::<Vec<_>>());
    let st = b.stats();
    assert!(
        st.engine(UdmCounter::SwitchTimeout) >= 1,
        "no atomicity-timeout switch during the slow handler: {st:?}"
    );
    assert!(st.buffered_taken >= 1, "{st:?}");
    assert_eq!(st.upcalls, 31);
}

/// The measurement `unet bench udm` uses: every column is measured and
/// the round trips are positive.
#[test]
fn upcall_latency_measures_every_column() {
    let (_e, s) = engine();
    let m = bench::upcall_latency(&s, 200).unwrap();
    assert!(m.rounds >= 200, "{m:?}");
    for v in [
        m.poll_round_trip_ns,
        m.upcall_round_trip_ns,
        m.upcall_wake_round_trip_ns,
        m.poll_ns,
    ] {
        assert!(v > 0.0, "{m:?}");
    }
    assert!(m.upcall_wake_round_trip_ns < 1e9, "{m:?}");
}
