//! Applets placed in the engine, driven on the test's thread: attached
//! through the real control path (the class verified on a thread of its
//! own, the answer once the engine has run its constructor), run on every
//! send and arrival, each kind of fault reported with its kind and counted,
//! detached after 16 faults in a row; refusals (a class outside the
//! subset, limits above the engine's maxima, an endpoint closed while its
//! class is verified) leave the endpoint as it was.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

mod common;
use common::*;
use unet_abi::*;
use unet_control::{ErrorCode, Reply, Request};
use unet_engine::invoker::{InvokerError, RawEndpoint};
use unet_engine::EngineConfig;
use unet_sys::Segment;

/// An engine, a sender `a` and a receiver `b` (1 KiB buffers, all posted),
/// `a`'s channel to `b` and `b`'s tag for it.
fn pair(rig: &mut Rig) -> (RawEndpoint, RawEndpoint, u16, u16) {
    let a = rig.endpoint(small());
    let mut b = rig.receiver(small());
    let (ch, from_a) = rig.open(&a, &mut b);
    (a, b, ch, from_a)
}

fn attach(rig: &mut Rig, ep: &RawEndpoint, class: &str, fuel: u64) {
    rig.client
        .attach_applet(&mut rig.engine, ep.id(), applet(class), fuel, 0)
        .unwrap_or_else(|e| panic!("attach {class}: {e}"));
}

/// Push `data` from `ep` on `chan` and step until the engine has written
/// its status (an applet may be held back for a while after a long
/// invocation).
fn send_now(rig: &mut Rig, ep: &mut RawEndpoint, chan: u16, data: &[u8]) -> SendStatus {
    let pos = send(ep, chan, 0, data);
    step_until(&mut rig.engine, "the send's status", || {
        ep.send_status(pos) != 0
    });
    // Whatever it sent arrives in the same pass.
    rig.settle();
    status(ep, pos)
}

/// Step until `ep` has received a message, and take it (an applet on it
/// may be held back for a while after its attach or a long invocation).
fn arrival(rig: &mut Rig, ep: &mut RawEndpoint, what: &str) -> Msg {
    let mut got = None;
    step_until(&mut rig.engine, what, || {
        got = take(ep, true);
        got.is_some()
    });
    got.expect("taken")
}

/// The applet-fault counters of endpoint `id`, by kind.
fn faults(rig: &Rig, id: u32) -> Vec<(FaultKind, u64)> {
    FaultKind::ALL
        .iter()
        .map(|&k| (k, rig.stats.ep(id, k.counter())))
        .filter(|&(_, n)| n > 0)
        .collect()
}

fn event(kind: EventKind, fault: FaultKind) -> (EventKind, FaultKind) {
    (kind, fault)
}

/// Events of `ep` as (kind, fault kind of the argument).
fn fault_events(ep: &mut RawEndpoint) -> Vec<(EventKind, FaultKind)> {
    events(ep)
        .into_iter()
        .map(|e| {
            let k = EventKind::from_u16(e.kind).expect("a known event kind");
            (k, FaultKind::from_u32(e.arg))
        })
        .collect()
}

/// Generate on the sender (its messages are its own: a sequence number
/// and zeros), StdUnet on the receiver (arrivals spread over buffers):
/// the engine runs them on every send and arrival, and a detach brings
/// plain U-Net back.
#[test]
fn attached_applets_run_on_every_send_and_arrival() {
    let mut rig = Rig::new();
    let (mut a, mut b, ch, from_a) = pair(&mut rig);
    attach(&mut rig, &a, "Generate", 0);
    attach(&mut rig, &b, "StdUnet", 0);
    for id in [a.id(), b.id()] {
        assert_eq!(rig.stats.ep(id, EndpointCounter::AppletAttached), 1);
    }
    let mut seq = 0u32;
    for (i, len) in [20usize, 8, 100, 3000, 15, 16].into_iter().enumerate() {
        let user = pattern(i + 1, len);
        assert_eq!(send_now(&mut rig, &mut a, ch, &user), SendStatus::Sent);
        let m = arrival(&mut rig, &mut b, &format!("{len} bytes to arrive"));
        assert_eq!(m.channel, from_a);
        if len < 16 {
            assert!(m.data == user, "a {len}-byte send goes out as written");
        } else {
            let mut want = vec![0u8; len];
            want[..4].copy_from_slice(&seq.to_be_bytes());
            seq += 1;
            assert!(m.data == want, "a {len}-byte send is generated");
        }
        assert!(take(&mut b, true).is_none());
    }
    assert_eq!(rig.stats.ep(a.id(), EndpointCounter::AppletTxCalls), 6);
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::AppletRxCalls), 6);
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::AppletTxCalls), 0);
    assert_eq!(rig.stats.ep(a.id(), EndpointCounter::TxMsgs), 6);
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxMsgs), 6);
    assert!(events(&mut a).is_empty() && events(&mut b).is_empty());
    // Detached: the user's bytes go out again.
    rig.client
        .detach_applet(&mut rig.engine, a.id())
        .expect("detach");
    let user = pattern(9, 300);
    assert_eq!(send_now(&mut rig, &mut a, ch, &user), SendStatus::Sent);
    assert!(arrival(&mut rig, &mut b, "a plain message").data == user);
    assert_eq!(rig.stats.ep(a.id(), EndpointCounter::AppletTxCalls), 6);
    assert_eq!(rig.stats.ep(a.id(), EndpointCounter::AppletCompiled), 0);
    match rig.client.detach_applet(&mut rig.engine, a.id()) {
        Err(InvokerError::Engine(ErrorCode::NoApplet)) => {}
        r => panic!("a second detach: {r:?}"),
    }
}

/// Each kind of fault stops its invocation: the send's status says so,
/// the owner gets an `AppletFault` event naming the kind, the kind's
/// counter counts it, nothing goes out; the next good send goes.
#[test]
fn each_kind_of_fault_is_reported_with_its_kind() {
    let mut rig = Rig::new();
    for kind in [
        FaultKind::Fuel,
        FaultKind::Memory,
        FaultKind::Arith,
        FaultKind::Depth,
        FaultKind::Heap,
        FaultKind::Native,
    ] {
        let (mut a, mut b, ch, from_a) = pair(&mut rig);
        attach(&mut rig, &a, "Faulty", faulty_fuel(kind));
        let bad = pattern(1, faulty_len(kind) as usize);
        assert_eq!(
            send_now(&mut rig, &mut a, ch, &bad),
            SendStatus::AppletFault,
            "{kind}"
        );
        assert_eq!(
            fault_events(&mut a),
            [event(EventKind::AppletFault, kind)],
            "{kind}"
        );
        assert_eq!(faults(&rig, a.id()), [(kind, 1)], "{kind}");
        assert!(take(&mut b, true).is_none(), "{kind}: nothing goes out");
        assert_eq!(rig.stats.ep(a.id(), EndpointCounter::TxMsgs), 0, "{kind}");
        let good = pattern(2, 40);
        assert_eq!(
            send_now(&mut rig, &mut a, ch, &good),
            SendStatus::Sent,
            "{kind}"
        );
        let m = take(&mut b, true).expect("the next good send");
        assert_eq!(m.channel, from_a);
        assert!(m.data == good, "{kind}");
        assert_eq!(rig.stats.ep(a.id(), EndpointCounter::AppletTxCalls), 2);
        assert_eq!(rig.stats.ep(a.id(), EndpointCounter::AppletDetached), 0);
        rig.close_endpoint(a.id());
        rig.close_endpoint(b.id());
    }
}

/// Faults in a row detach the applet at the sixteenth: fifteen
/// `AppletFault` events, then `AppletDetached`; a completed invocation in
/// between starts the count again. Detached, the endpoint is plain U-Net.
#[test]
fn sixteen_faults_in_a_row_detach_the_applet() {
    let mut rig = Rig::new();
    let (mut a, mut b, ch, from_a) = pair(&mut rig);
    attach(&mut rig, &a, "Faulty", 0);
    let memory = pattern(1, faulty_len(FaultKind::Memory) as usize);
    let arith = pattern(2, faulty_len(FaultKind::Arith) as usize);
    for i in 0..15 {
        let st = send_now(&mut rig, &mut a, ch, &memory);
        assert_eq!(st, SendStatus::AppletFault, "fault {i}");
    }
    assert_eq!(
        fault_events(&mut a),
        vec![event(EventKind::AppletFault, FaultKind::Memory); 15]
    );
    // A good one: the count starts again.
    assert_eq!(
        send_now(&mut rig, &mut a, ch, &pattern(3, 30)),
        SendStatus::Sent
    );
    assert!(take(&mut b, true).is_some());
    // Sixteen in a row: pushed together, taken over several turns.
    let pos: Vec<u64> = (0..16).map(|_| send(&mut a, ch, 0, &arith)).collect();
    step_until(&mut rig.engine, "sixteen faults", || {
        a.sends_taken() == pos[15] + 1
    });
    rig.settle();
    for p in &pos {
        assert_eq!(status(&a, *p), SendStatus::AppletFault);
    }
    let mut want = vec![event(EventKind::AppletFault, FaultKind::Arith); 15];
    want.push(event(EventKind::AppletDetached, FaultKind::Arith));
    assert_eq!(fault_events(&mut a), want);
    assert_eq!(
        faults(&rig, a.id()),
        [(FaultKind::Memory, 15), (FaultKind::Arith, 16)]
    );
    let id = a.id();
    assert_eq!(rig.stats.ep(id, EndpointCounter::AppletDetached), 1);
    assert_eq!(rig.stats.ep(id, EndpointCounter::AppletTxCalls), 32);
    assert_eq!(rig.stats.ep(id, EndpointCounter::AppletCompiled), 0);
    assert!(take(&mut b, true).is_none(), "no faulted send went out");
    // Plain U-Net: what would fault goes out as written.
    assert_eq!(send_now(&mut rig, &mut a, ch, &memory), SendStatus::Sent);
    let m = take(&mut b, true).expect("plain U-Net after the detach");
    assert_eq!(m.channel, from_a);
    assert!(m.data == memory);
    assert_eq!(rig.stats.ep(id, EndpointCounter::AppletTxCalls), 32);
    assert!(events(&mut a).is_empty());
    match rig.client.detach_applet(&mut rig.engine, id) {
        Err(InvokerError::Engine(ErrorCode::NoApplet)) => {}
        r => panic!("detach after the engine detached it: {r:?}"),
    }
}

/// A class the engine refuses (outside the JIVE subset, not a class at
/// all, empty) comes back as a rejection that says why, and leaves the
/// endpoint as it was: without an applet, plain U-Net; with one, that
/// applet.
#[test]
fn a_rejected_class_leaves_the_endpoint_as_it_was() {
    let mut rig = Rig::new();
    let (mut a, mut b, ch, _) = pair(&mut rig);
    let refused: [(&str, &[u8], &str); 3] = [
        ("UsesLong", applet("UsesLong"), "doTx"),
        ("garbage", b"\xca\xfe\xba\xbe not a class", "rejected"),
        ("nothing", b"", "0 bytes"),
    ];
    let attempt = |rig: &mut Rig, a: &RawEndpoint| {
        for (what, class, says) in refused {
            match rig
                .client
                .attach_applet(&mut rig.engine, a.id(), class, 0, 0)
            {
                Err(InvokerError::Rejected(why)) => {
                    assert!(why.contains(says), "{what}: {why}")
                }
                r => panic!("{what}: expected a rejection, got {r:?}"),
            }
        }
    };
    attempt(&mut rig, &a);
    assert_eq!(rig.stats.ep(a.id(), EndpointCounter::AppletAttached), 0);
    let user = pattern(4, 100);
    assert_eq!(send_now(&mut rig, &mut a, ch, &user), SendStatus::Sent);
    assert!(take(&mut b, true).expect("plain U-Net").data == user);
    assert_eq!(rig.stats.ep(a.id(), EndpointCounter::AppletTxCalls), 0);
    // With Generate attached, the refusals leave Generate.
    attach(&mut rig, &a, "Generate", 0);
    assert_eq!(send_now(&mut rig, &mut a, ch, &user), SendStatus::Sent);
    let first = take(&mut b, true).expect("generated");
    assert_eq!(first.data[..4], 0u32.to_be_bytes());
    attempt(&mut rig, &a);
    assert_eq!(send_now(&mut rig, &mut a, ch, &user), SendStatus::Sent);
    let next = take(&mut b, true).expect("still generated");
    let mut want = vec![0u8; 100];
    want[..4].copy_from_slice(&1u32.to_be_bytes());
    assert!(next.data == want, "Generate still runs, its state kept");
    assert_eq!(rig.stats.ep(a.id(), EndpointCounter::AppletAttached), 1);
    assert!(events(&mut a).is_empty());
}

/// Work budgets and heap quotas above the engine's maxima are refused
/// with a rejection that names the request and the maximum; at the
/// maxima the applet is attached.
#[test]
fn limits_above_the_engines_maxima_are_refused() {
    let mut rig = Rig::with(EngineConfig {
        applet_fuel_max: 10_000,
        applet_heap_max: 1 << 20,
        ..EngineConfig::default()
    });
    let (mut a, mut b, ch, _) = pair(&mut rig);
    let class = applet("Generate");
    for (fuel, heap, says) in [
        (10_001u64, 0u32, ["10001", "10000", "applet_fuel_max"]),
        (
            u64::MAX,
            0,
            ["18446744073709551615", "10000", "applet_fuel_max"],
        ),
        (0, (1 << 20) + 1, ["1048577", "1048576", "applet_heap_max"]),
        (
            10_000,
            u32::MAX,
            ["4294967295", "1048576", "applet_heap_max"],
        ),
    ] {
        match rig
            .client
            .attach_applet(&mut rig.engine, a.id(), class, fuel, heap)
        {
            Err(InvokerError::Rejected(why)) => {
                for s in says {
                    assert!(why.contains(s), "fuel {fuel}, heap {heap}: {why}");
                }
            }
            r => panic!("fuel {fuel}, heap {heap}: expected a rejection, got {r:?}"),
        }
        assert_eq!(rig.stats.ep(a.id(), EndpointCounter::AppletAttached), 0);
    }
    let user = pattern(5, 64);
    assert_eq!(send_now(&mut rig, &mut a, ch, &user), SendStatus::Sent);
    assert!(take(&mut b, true).expect("plain").data == user);
    // At the maxima.
    rig.client
        .attach_applet(&mut rig.engine, a.id(), class, 10_000, 1 << 20)
        .expect("attach at the maxima");
    assert_eq!(rig.stats.ep(a.id(), EndpointCounter::AppletAttached), 1);
    assert_eq!(send_now(&mut rig, &mut a, ch, &user), SendStatus::Sent);
    assert_eq!(take(&mut b, true).expect("generated").data[..4], [0; 4]);
}

/// The engine's time limit bounds an invocation whatever fuel it was
/// given: with the fuel maximum lifted, an endless loop attached with fuel
/// `u64::MAX` is stopped after `applet_time_max` with a fault of kind
/// `Timeout` (reported, counted), and the endpoint sends again. Without
/// the limit the engine would spin in the loop for good.
#[test]
fn an_endless_applet_is_stopped_by_the_time_limit() {
    let limit = Duration::from_millis(20);
    let mut rig = Rig::with(EngineConfig {
        applet_fuel_max: u64::MAX,
        applet_time_max: limit,
        ..EngineConfig::default()
    });
    let (mut a, mut b, ch, from_a) = pair(&mut rig);
    attach(&mut rig, &a, "Faulty", u64::MAX);
    let endless = pattern(1, faulty_len(FaultKind::Fuel) as usize);
    let t = Instant::now();
    assert_eq!(
        send_now(&mut rig, &mut a, ch, &endless),
        SendStatus::AppletFault
    );
    let took = t.elapsed();
    assert!(took >= limit, "stopped after {took:?}, before the limit");
    assert!(took < Duration::from_secs(2), "stopped only after {took:?}");
    assert_eq!(
        fault_events(&mut a),
        [event(EventKind::AppletFault, FaultKind::Timeout)]
    );
    assert_eq!(faults(&rig, a.id()), [(FaultKind::Timeout, 1)]);
    assert!(take(&mut b, true).is_none(), "nothing goes out");
    let good = pattern(2, 40);
    assert_eq!(send_now(&mut rig, &mut a, ch, &good), SendStatus::Sent);
    let m = take(&mut b, true).expect("the next good send");
    assert_eq!(m.channel, from_a);
    assert!(m.data == good);
}

// ---------------------------------------------------------------------------
// A raw control connection, to pipeline requests
// ---------------------------------------------------------------------------

fn request(sock: &OwnedFd, id: u32, req: &Request, fds: &[std::os::fd::RawFd]) {
    unet_sys::send_packet(sock.as_raw_fd(), &req.encode(id), fds).expect("send a request");
}

/// Step `rig`'s engine until `n` replies came on `sock`; they come back
/// in the order they came, with their descriptors.
fn replies(rig: &mut Rig, sock: &OwnedFd, n: usize) -> Vec<(u32, Reply, Vec<OwnedFd>)> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; unet_control::MAX_PACKET];
    let start = Instant::now();
    while got.len() < n {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "only {} of {n} replies: {:?}",
            got.len(),
            got.iter()
                .map(|r: &(u32, Reply, _)| &r.1)
                .collect::<Vec<_>>()
        );
        rig.engine.step();
        let mut fds = Vec::new();
        match unet_sys::recv_packet(sock.as_raw_fd(), &mut buf, &mut fds, true) {
            Ok(n) if n > 0 => {
                let (id, r) = Reply::decode(&buf[..n]).expect("a reply");
                got.push((id, r, fds));
            }
            Ok(_) => panic!("the engine closed the connection"),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
    }
    got
}

/// An endpoint closed while its class is being verified: the close is
/// answered at once, the attach once the verification ends, with
/// `NoSuchEndpoint`; an endpoint created meanwhile (in the closed one's
/// place in the engine's table) does not get the applet.
#[test]
fn an_endpoint_closed_during_verification_gets_no_such_endpoint() {
    let mut rig = Rig::new();
    let sock = rig.engine.connect().expect("a control connection");
    let create = Request::CreateEndpoint {
        geometry: small(),
        accept: true,
        buffer_limit: 0,
    };
    request(&sock, 1, &create, &[]);
    let e = match &replies(&mut rig, &sock, 1)[..] {
        [(1, Reply::EndpointCreated { endpoint }, fds)] if fds.len() == 2 => *endpoint,
        r => panic!("create: {r:?}"),
    };
    let class = applet("StdUnet");
    let seg = Segment::create("class", class.len()).unwrap();
    // SAFETY: the fresh segment has class.len() bytes, mapped only here.
    unsafe { std::ptr::copy_nonoverlapping(class.as_ptr(), seg.ptr().as_ptr(), class.len()) };
    // Three requests before the engine looks: attach, close, create.
    let attach = Request::AttachApplet {
        endpoint: e,
        len: class.len() as u32,
        fuel: 0,
        heap: 0,
    };
    request(&sock, 2, &attach, &[seg.fd().as_raw_fd()]);
    request(&sock, 3, &Request::CloseEndpoint { endpoint: e }, &[]);
    request(&sock, 4, &create, &[]);
    let mut got = replies(&mut rig, &sock, 3);
    // The close is answered at once; the attach (verified on a thread of
    // its own) and the create (its segment made on the set-up thread)
    // when each is done, in either order.
    assert_eq!(got[0].0, 3, "the close is answered first: {got:?}");
    got.sort_by_key(|r| r.0);
    assert_eq!(got[1].1, Reply::Ok);
    let f = match &got[2] {
        (4, Reply::EndpointCreated { endpoint }, _) => *endpoint,
        r => panic!("create: {r:?}"),
    };
    assert_ne!(f, e);
    assert_eq!(
        (got[0].0, &got[0].1),
        (2, &Reply::Error(ErrorCode::NoSuchEndpoint))
    );
    rig.settle();
    assert_eq!(rig.stats.ep(f, EndpointCounter::AppletAttached), 0);
    // Nor is there one to detach (asked by another client of the same
    // user, which may attach and detach applets on it).
    let (r, _) = rig
        .client
        .call(&mut rig.engine, &Request::DetachApplet { endpoint: f }, &[])
        .expect("detach");
    assert_eq!(r, Reply::Error(ErrorCode::NoApplet));
}

/// RawUnet on the receiver pushes its descriptors itself (`dmaRxd` for a
/// message in a buffer, `dmaRxdPayload` inline), which the engine writes
/// straight into the receive queue. With the queue full, both are
/// dropped and counted, and the buffer `dmaRxd` named stays the
/// endpoint's: every buffer is still there for the messages after.
#[test]
fn rawunets_pushes_on_a_full_queue_are_counted_and_keep_their_buffer() {
    let mut rig = Rig::new();
    let (mut a, mut b, ch, from_a) = pair(&mut rig);
    attach(&mut rig, &b, "RawUnet", 0);
    // The first arrival waits out the pause after the attach.
    assert_eq!(send_now(&mut rig, &mut a, ch, b"first"), SendStatus::Sent);
    assert!(arrival(&mut rig, &mut b, "the first message").data == b"first");
    let cap = small().recv_cap as usize;
    // Fill the queue: buffers and inline in turn (half the buffers).
    let len = |i: usize| if i.is_multiple_of(2) { 1000 } else { 40 };
    for i in 0..cap {
        assert_eq!(
            send_now(&mut rig, &mut a, ch, &pattern(i, len(i))),
            SendStatus::Sent
        );
    }
    // One of each more: no room.
    for i in cap..cap + 2 {
        assert_eq!(
            send_now(&mut rig, &mut a, ch, &pattern(i, len(i))),
            SendStatus::Sent
        );
    }
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxDropRingFull), 2);
    assert_eq!(
        rig.stats.ep(b.id(), EndpointCounter::AppletRxCalls),
        cap as u64 + 3
    );
    for i in 0..cap {
        let m = take(&mut b, true).unwrap_or_else(|| panic!("message {i}"));
        assert_eq!(m.channel, from_a);
        assert!(m.data == pattern(i, len(i)), "message {i} intact");
        let inline = m.desc.flags & RECV_INLINE != 0;
        assert_eq!(inline, len(i) <= INLINE_MAX, "message {i} inline or not");
    }
    assert!(take(&mut b, true).is_none(), "the dropped ones are gone");
    // Every buffer is the endpoint's again: as many 1000-byte messages as
    // it has buffers arrive, none refused for want of one.
    let nbufs = small().free_cap as usize;
    for i in 0..nbufs {
        assert_eq!(
            send_now(&mut rig, &mut a, ch, &pattern(100 + i, 1000)),
            SendStatus::Sent
        );
    }
    for i in 0..nbufs {
        let m = take(&mut b, false).unwrap_or_else(|| panic!("buffered message {i}"));
        assert!(
            m.data == pattern(100 + i, 1000),
            "buffered message {i} intact"
        );
    }
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxDropRingFull), 2);
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxDropNoBuffer), 0);
    assert!(
        faults(&rig, b.id()).is_empty(),
        "{:?}",
        faults(&rig, b.id())
    );
}

/// Which applets read each arriving message where it is, lent to their
/// `RxBuf` (`unet_sle::Verified::lends_rx`): those whose code passes
/// `RxBuf` to natives only, in `doRx` only. `PingPong` answers from
/// `RxBuf` and writes into it, `PacketBuffers` reads a header from it,
/// and `FlowControl` and `ReceiverAck` read its bytes (and pass it to
/// natives from methods besides `doRx`), so each message is copied into
/// theirs. Both kinds deliver every message intact: the
/// conformance and delivery tests run `RawUnet` and `StdUnet` receives
/// through the engine, and `jive`'s `tests/lend.rs` compares lent and
/// copied bytes method by method.
#[test]
fn applets_that_only_pass_rxbuf_to_natives_in_dorx_get_each_message_lent() {
    let lends = |name: &str| {
        let bytes = &classes()[name];
        unet_sle::Applet::verify(bytes)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .lends_rx()
    };
    for name in ["RawUnet", "StdUnet", "Generate", "Burst"] {
        assert!(lends(name), "{name} should read each message where it is");
    }
    for name in ["PingPong", "PacketBuffers", "FlowControl", "ReceiverAck"] {
        assert!(!lends(name), "{name} reads RxBuf itself: copied");
    }
}

/// In the engine, RawUnet's receive gets each message of `LEND_MIN` bytes
/// or more lent to its `RxBuf` (counted in `applet_rx_lent`) and shorter
/// ones copied in, and every message arrives intact either way.
#[test]
fn rawunet_reads_long_arrivals_where_they_are_and_all_arrive_intact() {
    let mut rig = Rig::new();
    let (mut a, mut b, ch, from_a) = pair(&mut rig);
    attach(&mut rig, &b, "RawUnet", 0);
    let lens = [40, 1000, 255, 256, 300, 56, 57, 1024];
    for (i, &len) in lens.iter().enumerate() {
        assert_eq!(
            send_now(&mut rig, &mut a, ch, &pattern(i, len)),
            SendStatus::Sent
        );
        let m = arrival(&mut rig, &mut b, "a message through RawUnet");
        assert_eq!(m.channel, from_a);
        assert!(m.data == pattern(i, len), "message {i} of {len} bytes");
    }
    rig.settle();
    let long = lens.iter().filter(|&&l| l >= unet_sle::LEND_MIN).count() as u64;
    assert_eq!(long, 4);
    assert_eq!(
        rig.stats.ep(b.id(), EndpointCounter::AppletRxCalls),
        lens.len() as u64
    );
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::AppletRxLent), long);
}
