//! The event graph's recorder on a working engine, stepped on the test's
//! thread: switched on and off through the control protocol, dumped into
//! a memory file, and what it recorded agrees with the counters and with
//! the test's own clock.

use std::time::{Duration, Instant};

mod common;
use common::*;
use unet_abi::*;
use unet_control::{Reply, Request};
use unet_engine::TraceDump;

fn call(rig: &mut Rig, req: Request) -> (Reply, Vec<std::os::fd::OwnedFd>) {
    rig.client
        .call(&mut rig.engine, &req, &[])
        .expect("a reply")
}

fn dump(rig: &mut Rig) -> TraceDump {
    let (r, mut fds) = call(rig, Request::TraceDump);
    let Reply::TraceDump { events, len } = r else {
        panic!("{r:?}");
    };
    assert_eq!(fds.len(), 1, "the dump's memory file");
    let fd = fds.remove(0);
    let b = unet_sys::Segment::read_untrusted(&fd, len as usize).unwrap();
    assert_eq!(b.len() as u64, len);
    let d = TraceDump::decode(&b).expect("a dump");
    assert_eq!(d.events.len(), events as usize);
    d
}

/// Spin (not sleep: the gaps are the point, not a wait) for `d`.
fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[test]
fn the_turns_that_carried_messages_are_recorded_one_event_each() {
    let mut rig = Rig::new();
    let mut a = rig.endpoint(small());
    let mut b = rig.receiver(small());
    let (ch, _) = rig.open(&a, &mut b);
    let (r, _) = call(
        &mut rig,
        Request::TraceSet {
            on: true,
            capacity: 1000,
        },
    );
    assert_eq!(
        r,
        Reply::TraceState {
            on: true,
            capacity: 1024,
            recorded: 0,
            overwritten: 0
        }
    );
    let sent_before = rig.stats.ep(a.id(), EndpointCounter::TxMsgs);
    const N: usize = 40;
    const GAP: Duration = Duration::from_micros(300);
    let mut stepped = Vec::new();
    for i in 0..N {
        send(&mut a, ch, 0, &pattern(i, 64));
        stepped.push(Instant::now());
        assert!(rig.engine.step() > 0);
        assert!(take(&mut b, true).is_some(), "message {i} arrives");
        spin(GAP);
    }
    let d = dump(&mut rig);
    let unet = *d
        .names
        .iter()
        .find(|(_, n)| *n == "unet turn")
        .expect("the loop's parts are named")
        .0;
    let turns: Vec<_> = d.events.iter().filter(|e| e.ty == unet).collect();
    // One event per message, numbered as the engine handled them.
    let msgs: Vec<u32> = turns.iter().map(|e| e.msg).collect();
    assert_eq!(msgs, (1..=N as u32).collect::<Vec<_>>());
    assert_eq!(
        rig.stats.ep(a.id(), EndpointCounter::TxMsgs) - sent_before,
        N as u64,
        "the counters saw as many"
    );
    // The period the events show is the one the test's clock shows.
    let median = |mut v: Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    let traced = median(
        turns
            .windows(2)
            .map(|w| w[1].start_ns - w[0].start_ns)
            .collect(),
    );
    let clock = median(
        stepped
            .windows(2)
            .map(|w| (w[1] - w[0]).as_nanos() as u64)
            .collect(),
    );
    assert!(clock >= GAP.as_nanos() as u64);
    let off = traced.abs_diff(clock) as f64 / clock as f64;
    assert!(
        off < 0.1,
        "traced period {traced} ns, the clock's {clock} ns"
    );
    // Each event ran within its step, and no longer than a gap.
    assert!(turns
        .iter()
        .all(|e| e.len_ns > 0 && e.len_ns < GAP.as_nanos() as u64));

    // Off: what was recorded stays, nothing more is.
    let (r, _) = call(
        &mut rig,
        Request::TraceSet {
            on: false,
            capacity: 0,
        },
    );
    assert!(matches!(r, Reply::TraceState { on: false, .. }), "{r:?}");
    send(&mut a, ch, 0, b"more");
    assert!(rig.engine.step() > 0);
    let again = dump(&mut rig);
    assert_eq!(again.events.len(), d.events.len());
    assert_eq!(again.recorded, d.recorded);
}

#[test]
fn a_small_ring_keeps_the_newest_events_and_counts_the_rest() {
    let mut rig = Rig::new();
    let mut a = rig.endpoint(small());
    let mut b = rig.receiver(small());
    let (ch, _) = rig.open(&a, &mut b);
    call(
        &mut rig,
        Request::TraceSet {
            on: true,
            capacity: 8,
        },
    );
    for i in 0..20 {
        send(&mut a, ch, 0, &pattern(i, 16));
        rig.engine.step();
        assert!(take(&mut b, true).is_some());
    }
    let d = dump(&mut rig);
    assert_eq!((d.capacity, d.recorded, d.overwritten), (8, 20, 12));
    let msgs: Vec<u32> = d.events.iter().map(|e| e.msg).collect();
    assert_eq!(msgs, (13..=20).collect::<Vec<_>>());
    // A ring beyond the cap is refused, and changes nothing.
    let (r, _) = call(
        &mut rig,
        Request::TraceSet {
            on: true,
            capacity: unet_engine::TRACE_MAX_CAPACITY + 1,
        },
    );
    assert_eq!(r, Reply::Error(unet_control::ErrorCode::BadRequest));
    assert_eq!(dump(&mut rig).recorded, 20);
}

/// Two engines joined by a memory transport, both traced: each message
/// sent on a remote channel is one event of the sender's U-Net turn and
/// one of the receiver's, in the order sent, and whatever else the turns
/// did (control's share, the port's flush) names the event that caused
/// it, in the same trace and for the same message.
#[test]
fn a_remote_message_is_an_event_on_each_engine_and_effects_name_their_causes() {
    use unet_control::EndpointAddr;
    use unet_engine::invoker::LocalClient;
    use unet_engine::wire::{MemoryHub, PortConfig};
    use unet_engine::{Dispatcher, EngineConfig, PathChoice};

    let hub = MemoryHub::new();
    let pc = PortConfig::loopback();
    let at = |port: u16| std::net::SocketAddr::from(([10, 0, 0, 1], port));
    let cfg = EngineConfig {
        allow_peers: vec!["10.0.0.0/24".parse().unwrap()],
        ..EngineConfig::default()
    };
    let bind = |port, cfg| {
        Dispatcher::with_transport(cfg, Box::new(hub.bind(at(port), pc).unwrap())).unwrap()
    };
    let (mut ea, mut eb) = (bind(1, cfg.clone()), bind(2, cfg));
    let mut ca = LocalClient::new(&mut ea).unwrap();
    let mut cb = LocalClient::new(&mut eb).unwrap();
    let mut a = ca.create_endpoint(&mut ea, small()).unwrap();
    let mut b = cb.create_endpoint(&mut eb, small()).unwrap();
    post_all(&mut b);
    let req = Request::OpenChannel {
        endpoint: a.id(),
        dst: EndpointAddr {
            host: Some(at(2)),
            id: b.id(),
        },
        path: PathChoice::Auto,
    };
    let (rep, _) = ca
        .call_while(&mut ea, &req, &[], || {
            eb.step();
        })
        .unwrap();
    let Reply::ChannelOpened { channel: ch, .. } = rep else {
        panic!("{rep:?}");
    };
    while ea.step() + eb.step() + ea.step() + eb.step() > 0 {}
    let trace_on = Request::TraceSet {
        on: true,
        capacity: 0,
    };
    for (c, e) in [(&mut ca, &mut ea), (&mut cb, &mut eb)] {
        let (r, _) = c.call(e, &trace_on, &[]).unwrap();
        assert!(matches!(r, Reply::TraceState { on: true, .. }), "{r:?}");
    }
    const N: u32 = 12;
    for i in 0..N {
        send(&mut a, ch, 0, &pattern(i as usize, 100));
        assert!(ea.step() > 0);
        assert!(eb.step() > 0);
        let m = take(&mut b, true).expect("the message arrives");
        assert_eq!(m.data, pattern(i as usize, 100));
    }
    let dump = |c: &mut LocalClient, e: &mut Dispatcher| {
        let (r, mut fds) = c.call(e, &Request::TraceDump, &[]).unwrap();
        let Reply::TraceDump { len, .. } = r else {
            panic!("{r:?}");
        };
        let b = unet_sys::Segment::read_untrusted(&fds.remove(0), len as usize).unwrap();
        TraceDump::decode(&b).unwrap()
    };
    let (da, db) = (dump(&mut ca, &mut ea), dump(&mut cb, &mut eb));
    // The sender's port sends each message when the turn ends: a flush
    // per message, caused by the turn that took it.
    let flush = *da.names.iter().find(|(_, n)| *n == "wire flush").unwrap().0;
    assert_eq!(
        da.events.iter().filter(|e| e.ty == flush).count(),
        N as usize
    );
    for d in [da, db] {
        let unet = *d.names.iter().find(|(_, n)| *n == "unet turn").unwrap().0;
        let msgs: Vec<u32> = d
            .events
            .iter()
            .filter(|e| e.ty == unet)
            .map(|e| e.msg)
            .collect();
        assert_eq!(msgs, (1..=N).collect::<Vec<_>>());
        for e in d.events.iter().filter(|e| e.ty != unet) {
            let cause = d.events.iter().find(|c| c.id == e.cause);
            let cause = cause.unwrap_or_else(|| panic!("{e:?} names no event of the trace"));
            assert_eq!(cause.msg, e.msg, "{e:?}");
            assert!(cause.start_ns <= e.start_ns, "{e:?} before its cause");
        }
    }
}
