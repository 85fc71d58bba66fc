//! Who may open channels over the wire, and for how long they hold them:
//! the allowlist of peers, the cluster key (MACs, replays), the bound on
//! one peer's channels, and liveness (a silent peer's channels close and
//! their owners are told). Engines are joined by a `MemoryHub` (each at an
//! address of its own) and stepped on the test's thread; a forger is a
//! bare port of the hub, or a plain UDP socket.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

mod hub;
use hub::{addr, geometry, post_buffers, settle};
use unet_abi::*;
use unet_control::{EndpointAddr, ErrorCode, Reply, Request};
use unet_engine::invoker::{LocalClient, RawEndpoint};
use unet_engine::wire::auth::{seal, wall_ns};
use unet_engine::wire::{
    Body, ClusterKey, Data, Frame, MemoryHub, MemoryPort, OpenRequest, PortConfig, SendBatch,
    Transport,
};
use unet_engine::{Dispatcher, EngineConfig, IpNet, PathChoice};

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

/// An engine on the hub at `at`.
fn engine(hub: &MemoryHub, at: SocketAddr, cfg: EngineConfig) -> Dispatcher {
    let port = hub.bind(at, PortConfig::loopback()).unwrap();
    Dispatcher::with_transport(cfg, Box::new(port)).unwrap()
}

/// A configuration that allows the engines of `10.0.0.1` (all ports of
/// the test's engines).
fn allowing(nets: &[&str]) -> EngineConfig {
    EngineConfig {
        allow_peers: nets.iter().map(|n| net(n)).collect(),
        ..EngineConfig::default()
    }
}

/// Ask engine `ea` to open a channel from `src` to endpoint `id` of the
/// engine at `to`, stepping `eb` meanwhile.
fn open_remote(
    ca: &mut LocalClient,
    ea: &mut Dispatcher,
    eb: &mut Dispatcher,
    src: u32,
    to: SocketAddr,
    id: u32,
) -> Reply {
    let req = Request::OpenChannel {
        endpoint: src,
        dst: EndpointAddr { host: Some(to), id },
        path: PathChoice::Auto,
    };
    let (rep, _) = ca
        .call_while(ea, &req, &[], || {
            eb.step();
        })
        .unwrap();
    rep
}

fn channel(r: Reply) -> u16 {
    match r {
        Reply::ChannelOpened { channel, .. } => channel,
        r => panic!("open: {r:?}"),
    }
}

/// Send `msg` on `ch` of `a` and check it arrives at `b` (on `b`'s tag
/// `b_ch`).
fn carries(
    ea: &mut Dispatcher,
    eb: &mut Dispatcher,
    a: &mut RawEndpoint,
    b: &mut RawEndpoint,
    ch: u16,
    b_ch: u16,
    msg: &[u8],
) {
    a.write_area(0, msg);
    a.push_send(SendDesc {
        offset: 0,
        len: msg.len() as u32,
        channel: ch,
        ..Default::default()
    })
    .unwrap();
    settle(ea, eb);
    let d = b.pop_recv().expect("the message arrives");
    assert_eq!((d.channel, d.len as usize), (b_ch, msg.len()));
    assert!(d.flags & RECV_INLINE != 0);
    assert_eq!(&d.data[..msg.len()], msg);
}

/// The ChannelOpened events waiting at `ep`: the tags.
fn opened(ep: &mut RawEndpoint) -> Vec<u16> {
    let mut v = Vec::new();
    while let Some(ev) = ep.pop_event() {
        if ev.kind == EventKind::ChannelOpened as u16 {
            v.push(ev.channel);
        }
    }
    v
}

fn open_request(dst_endpoint: u32, request_id: u32) -> Vec<u8> {
    let f = Frame {
        src_engine: 0x5eed,
        body: Body::OpenRequest(OpenRequest {
            src_endpoint: 1,
            dst_endpoint,
            request_id,
            src_channel: 0,
            src_token: 0x1111,
            flags: 0,
        }),
    };
    let mut b = vec![0u8; f.len()];
    f.emit(&mut b).unwrap();
    b
}

/// Send raw datagrams from a bare port.
fn inject(port: &mut MemoryPort, to: SocketAddr, datagrams: &[Vec<u8>]) {
    let mut batch = SendBatch::for_port(&PortConfig::loopback());
    for d in datagrams {
        if batch
            .push_with(to, |buf| {
                buf[..d.len()].copy_from_slice(d);
                Ok(d.len())
            })
            .is_err()
        {
            port.send_batch(&mut batch).unwrap();
            batch
                .push_with(to, |buf| {
                    buf[..d.len()].copy_from_slice(d);
                    Ok(d.len())
                })
                .unwrap();
        }
    }
    port.send_batch(&mut batch).unwrap();
}

/// The datagrams waiting at a bare port.
fn received(port: &mut MemoryPort) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    while port
        .recv_batch_until(&mut |_, d| {
            v.push(d.to_vec());
            true
        })
        .unwrap()
        > 0
    {}
    v
}

fn count(e: &Dispatcher, c: EngineCounter) -> u64 {
    e.counters().engine_value(c)
}

/// (a) Opens forged from an address that is not allowed are dropped,
/// counted and never answered; the endpoint's channel table stays free,
/// and real opens (from an allowed engine and from a local endpoint) work
/// afterwards.
#[test]
fn opens_from_addresses_not_allowed_are_refused() {
    let hub = MemoryHub::new();
    // b allows a (10.0.0.1:1) only; a allows nobody, but may hear the
    // answers of b, which it named.
    let mut ea = engine(&hub, addr(1), allowing(&[]));
    let mut eb = engine(&hub, addr(2), allowing(&["10.0.0.1/32"]));
    let forger_at = SocketAddr::from(([10, 0, 0, 9], 5));
    let mut forger = hub.bind(forger_at, PortConfig::loopback()).unwrap();
    let mut ca = LocalClient::new(&mut ea).unwrap();
    let mut cb = LocalClient::new(&mut eb).unwrap();
    let mut a = ca.create_endpoint(&mut ea, geometry()).unwrap();
    let mut b = cb.create_endpoint(&mut eb, geometry()).unwrap();
    let b2 = cb.create_endpoint(&mut eb, geometry()).unwrap();
    post_buffers(&mut b);

    let forged: Vec<Vec<u8>> = (1..=5000).map(|i| open_request(b.id(), i)).collect();
    for chunk in forged.chunks(500) {
        inject(&mut forger, addr(2), chunk);
        settle(&mut ea, &mut eb);
    }
    assert!(received(&mut forger).is_empty(), "the forger got answers");
    assert_eq!(count(&eb, EngineCounter::WireDropPeerNotAllowed), 5000);
    assert_eq!(count(&eb, EngineCounter::WireOpenRequests), 0);
    assert!(opened(&mut b).is_empty(), "forged channels were opened");

    // Forged data and closes from there are dropped the same way.
    let f = Frame {
        src_engine: 0x5eed,
        body: Body::Data(Data {
            dst_endpoint: b.id(),
            dst_channel: 0,
            flags: 0,
            token: 0,
            msg_id: 0,
            frag_index: 0,
            frag_count: 1,
            msg_len: 3,
            frag_offset: 0,
            payload: b"bad",
            ack: None,
        }),
    };
    let mut d = vec![0u8; f.len()];
    f.emit(&mut d).unwrap();
    inject(&mut forger, addr(2), &vec![d; 10]);
    settle(&mut ea, &mut eb);
    assert_eq!(count(&eb, EngineCounter::WireDropPeerNotAllowed), 5010);
    assert!(b.pop_recv().is_none());

    // The allowed engine opens, and its message arrives.
    let ch = channel(open_remote(
        &mut ca,
        &mut ea,
        &mut eb,
        a.id(),
        addr(2),
        b.id(),
    ));
    settle(&mut ea, &mut eb);
    let from_a = opened(&mut b);
    assert_eq!(from_a.len(), 1);
    carries(&mut ea, &mut eb, &mut a, &mut b, ch, from_a[0], b"hello");
    // So does a local endpoint.
    cb.open_channel(&mut eb, b2.id(), b.id(), PathChoice::Engine)
        .expect("a local open works");
    assert_eq!(count(&ea, EngineCounter::WireDropPeerNotAllowed), 0);

    // a allows nobody: b's engine cannot open to a.
    let r = open_remote(&mut cb, &mut eb, &mut ea, b2.id(), addr(1), a.id());
    assert_eq!(r, Reply::Error(ErrorCode::Unreachable));
    assert!(count(&ea, EngineCounter::WireDropPeerNotAllowed) > 0);
}

/// (a) The same over UDP, from an ordinary socket on loopback, against an
/// engine that does not allow loopback.
#[test]
fn opens_from_a_plain_udp_socket_are_refused() {
    let cfg = EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        allow_peers: vec![net("192.0.2.0/24")],
        ..EngineConfig::default()
    };
    let mut e = Dispatcher::new(cfg).unwrap();
    let at = e.udp_addr().unwrap();
    let mut c = LocalClient::new(&mut e).unwrap();
    let mut ep = c.create_endpoint(&mut e, geometry()).unwrap();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_nonblocking(true).unwrap();
    for i in 1..=300 {
        sock.send_to(&open_request(ep.id(), i), at).unwrap();
        if i % 50 == 0 {
            for _ in 0..200 {
                e.step();
            }
        }
    }
    let t = Instant::now();
    while count(&e, EngineCounter::WireDropPeerNotAllowed) < 300 && t.elapsed().as_secs() < 5 {
        e.step();
    }
    assert_eq!(count(&e, EngineCounter::WireDropPeerNotAllowed), 300);
    let mut buf = [0u8; 2048];
    assert!(
        sock.recv_from(&mut buf).is_err(),
        "the socket got an answer"
    );
    assert!(opened(&mut ep).is_empty());
}

/// (b) With a cluster key: an open without a valid MAC, or replayed, is
/// dropped, counted and not answered; two engines with the same key
/// talk; with different keys they do not.
#[test]
fn with_a_cluster_key_only_fresh_authenticated_opens_are_answered() {
    let key = ClusterKey::from_bytes([0x42; 32]);
    let keyed = |k: &ClusterKey| EngineConfig {
        cluster_key: Some(k.clone()),
        ..allowing(&["10.0.0.0/8"])
    };
    let hub = MemoryHub::new();
    let mut ea = engine(&hub, addr(1), keyed(&key));
    let mut eb = engine(&hub, addr(2), keyed(&key));
    let forger_at = SocketAddr::from(([10, 0, 0, 9], 5));
    let mut forger = hub.bind(forger_at, PortConfig::loopback()).unwrap();
    let mut ca = LocalClient::new(&mut ea).unwrap();
    let mut cb = LocalClient::new(&mut eb).unwrap();
    let mut a = ca.create_endpoint(&mut ea, geometry()).unwrap();
    let mut b = cb.create_endpoint(&mut eb, geometry()).unwrap();
    post_buffers(&mut b);

    // No MAC, a MAC of another key, a MAC that does not cover the frame.
    let other = ClusterKey::from_bytes([0x43; 32]);
    let mut altered = seal(&key, &open_request(b.id(), 3), wall_ns(), 3);
    altered[20] ^= 1;
    inject(
        &mut forger,
        addr(2),
        &[
            open_request(b.id(), 1),
            seal(&other, &open_request(b.id(), 2), wall_ns(), 2),
            altered,
        ],
    );
    settle(&mut ea, &mut eb);
    assert_eq!(count(&eb, EngineCounter::WireDropBadMac), 3);
    assert!(received(&mut forger).is_empty(), "an answer without a MAC");
    assert!(opened(&mut b).is_empty());

    // A holder of the key is answered once; the same datagram again is a
    // replay, and so is one stamped long ago.
    let good = seal(&key, &open_request(b.id(), 4), wall_ns(), 4);
    inject(&mut forger, addr(2), std::slice::from_ref(&good));
    settle(&mut ea, &mut eb);
    assert_eq!(received(&mut forger).len(), 1, "the key holder is answered");
    assert_eq!(opened(&mut b).len(), 1);
    let stale = seal(
        &key,
        &open_request(b.id(), 5),
        wall_ns() - 600_000_000_000,
        5,
    );
    inject(&mut forger, addr(2), &[good, stale]);
    settle(&mut ea, &mut eb);
    assert_eq!(count(&eb, EngineCounter::WireDropReplay), 2);
    assert!(received(&mut forger).is_empty(), "a replay was answered");
    assert!(opened(&mut b).is_empty());

    // Two engines with the same key.
    let ch = channel(open_remote(
        &mut ca,
        &mut ea,
        &mut eb,
        a.id(),
        addr(2),
        b.id(),
    ));
    settle(&mut ea, &mut eb);
    let from_a = opened(&mut b);
    assert_eq!(from_a.len(), 1);
    carries(&mut ea, &mut eb, &mut a, &mut b, ch, from_a[0], b"keyed");

    // An engine with another key is not answered.
    let mut ec = engine(&hub, addr(3), keyed(&other));
    let mut cc = LocalClient::new(&mut ec).unwrap();
    let c = cc.create_endpoint(&mut ec, geometry()).unwrap();
    let macs = count(&eb, EngineCounter::WireDropBadMac);
    let r = open_remote(&mut cc, &mut ec, &mut eb, c.id(), addr(2), b.id());
    assert_eq!(r, Reply::Error(ErrorCode::Unreachable));
    assert!(count(&eb, EngineCounter::WireDropBadMac) > macs);
    assert!(opened(&mut b).is_empty());
}

/// (c) One peer holds at most `peer_channels_max` channels: the next open
/// is refused and counted, the channels it has still work, and another
/// peer and local endpoints are not held back. A peer that never confirms
/// holds at most `peer_half_open_max` channels, for a while.
#[test]
fn a_peer_holds_a_bounded_number_of_channels() {
    const MAX: u32 = 4;
    let hub = MemoryHub::new();
    let cfg = EngineConfig {
        peer_channels_max: MAX,
        peer_half_open_max: 2,
        liveness_timeout: Duration::from_millis(300),
        ..allowing(&["10.0.0.0/8"])
    };
    // a would refuse its fifth open itself (the bound holds on both
    // sides): let it ask, so that b's bound is what refuses.
    let roomy = EngineConfig {
        peer_channels_max: 100,
        ..cfg.clone()
    };
    let mut ea = engine(&hub, addr(1), roomy);
    let mut eb = engine(&hub, addr(2), cfg.clone());
    let mut ec = engine(&hub, addr(3), cfg.clone());
    let mut ca = LocalClient::new(&mut ea).unwrap();
    let mut cb = LocalClient::new(&mut eb).unwrap();
    let mut cc = LocalClient::new(&mut ec).unwrap();
    let mut a = ca.create_endpoint(&mut ea, geometry()).unwrap();
    let mut b = cb.create_endpoint(&mut eb, geometry()).unwrap();
    let b2 = cb.create_endpoint(&mut eb, geometry()).unwrap();
    let c = cc.create_endpoint(&mut ec, geometry()).unwrap();
    post_buffers(&mut b);

    let mut chans = Vec::new();
    for _ in 0..MAX {
        chans.push(channel(open_remote(
            &mut ca,
            &mut ea,
            &mut eb,
            a.id(),
            addr(2),
            b.id(),
        )));
    }
    settle(&mut ea, &mut eb);
    let tags = opened(&mut b);
    assert_eq!(tags.len(), MAX as usize);
    let r = open_remote(&mut ca, &mut ea, &mut eb, a.id(), addr(2), b.id());
    assert_eq!(r, Reply::Error(ErrorCode::NoResources));
    assert_eq!(count(&eb, EngineCounter::WireDropPeerChannelsFull), 1);
    assert!(opened(&mut b).is_empty());
    for (i, (&ch, &tag)) in chans.iter().zip(&tags).enumerate() {
        carries(&mut ea, &mut eb, &mut a, &mut b, ch, tag, &[i as u8; 8]);
    }
    // a's own engine holds its side to the same bound.
    let mut ea2 = engine(&hub, addr(4), cfg.clone());
    let mut ca2 = LocalClient::new(&mut ea2).unwrap();
    let a2 = ca2.create_endpoint(&mut ea2, geometry()).unwrap();
    for _ in 0..MAX {
        channel(open_remote(
            &mut ca2,
            &mut ea2,
            &mut ec,
            a2.id(),
            addr(3),
            c.id(),
        ));
    }
    let r = open_remote(&mut ca2, &mut ea2, &mut ec, a2.id(), addr(3), c.id());
    assert_eq!(r, Reply::Error(ErrorCode::NoResources));
    assert_eq!(count(&ea2, EngineCounter::WireDropPeerChannelsFull), 1);
    assert_eq!(count(&ec, EngineCounter::WireOpenRequests), MAX as u64);
    // Another peer, and a local endpoint, still open channels.
    channel(open_remote(
        &mut cc,
        &mut ec,
        &mut eb,
        c.id(),
        addr(2),
        b.id(),
    ));
    cb.open_channel(&mut eb, b2.id(), b.id(), PathChoice::Engine)
        .expect("a local open works");
    // Closing one makes room again.
    ca.close_channel(&mut ea, a.id(), chans[0]).unwrap();
    settle(&mut ea, &mut eb);
    channel(open_remote(
        &mut ca,
        &mut ea,
        &mut eb,
        a.id(),
        addr(2),
        b.id(),
    ));

    // A peer that never confirms what it is granted (say, one whose
    // source address is forged): two half-open channels, then refusals;
    // the two close after the liveness timeout, their owner told.
    let forger_at = SocketAddr::from(([10, 0, 0, 9], 5));
    let mut forger = hub.bind(forger_at, PortConfig::loopback()).unwrap();
    let _ = opened(&mut b);
    let reqs: Vec<Vec<u8>> = (1..=5).map(|i| open_request(b.id(), i)).collect();
    inject(&mut forger, addr(2), &reqs);
    settle(&mut ea, &mut eb);
    assert_eq!(opened(&mut b).len(), 2);
    assert_eq!(count(&eb, EngineCounter::WireDropPeerHalfOpenFull), 3);
    let expired = count(&eb, EngineCounter::WireChannelsExpired);
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(800) {
        ea.step();
        eb.step();
        ec.step();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(count(&eb, EngineCounter::WireChannelsExpired), expired + 2);
    let mut gone = 0;
    while let Some(ev) = b.pop_event() {
        if ev.kind == EventKind::PeerGone as u16 {
            gone += 1;
        }
    }
    assert_eq!(gone, 2, "the owner is told of the two half-open channels");
    // The confirmed channels of a and c are alive (their engines stepped).
    carries(
        &mut ea, &mut eb, &mut a, &mut b, chans[1], tags[1], b"alive",
    );
}

/// (d) A peer engine that goes silent: after the liveness timeout the
/// channel is closed on the other side and its owner gets `PeerGone`;
/// while both run, keepalives keep an idle channel open.
#[test]
fn a_silent_peer_engine_loses_its_channels() {
    let hub = MemoryHub::new();
    let cfg = EngineConfig {
        liveness_timeout: Duration::from_millis(300),
        ..allowing(&["10.0.0.0/8"])
    };
    let mut ea = engine(&hub, addr(1), cfg.clone());
    let mut eb = engine(&hub, addr(2), cfg);
    let mut ca = LocalClient::new(&mut ea).unwrap();
    let mut cb = LocalClient::new(&mut eb).unwrap();
    let mut a = ca.create_endpoint(&mut ea, geometry()).unwrap();
    let mut b = cb.create_endpoint(&mut eb, geometry()).unwrap();
    post_buffers(&mut b);
    let ch = channel(open_remote(
        &mut ca,
        &mut ea,
        &mut eb,
        a.id(),
        addr(2),
        b.id(),
    ));
    settle(&mut ea, &mut eb);
    let tag = opened(&mut b)[0];

    // Idle for three timeouts, both engines running: still open.
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(900) {
        ea.step();
        eb.step();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(count(&ea, EngineCounter::WireKeepalivesSent) >= 2);
    assert_eq!(count(&ea, EngineCounter::WireChannelsExpired), 0);
    assert!(a.pop_event().is_none() && b.pop_event().is_none());
    carries(&mut ea, &mut eb, &mut a, &mut b, ch, tag, b"still");

    // b's engine stops: a's channel closes after the timeout.
    let t = Instant::now();
    let mut ev = None;
    while ev.is_none() && t.elapsed() < Duration::from_secs(3) {
        ea.step();
        ev = a.pop_event();
        std::thread::sleep(Duration::from_millis(1));
    }
    let waited = t.elapsed();
    let ev = ev.expect("a is told its peer is gone");
    assert_eq!((ev.kind, ev.channel), (EventKind::PeerGone as u16, ch));
    // b's last keepalive may be up to a third of the timeout old, and
    // peers are looked at every sixth of it.
    assert!(waited >= Duration::from_millis(150), "{waited:?}");
    assert_eq!(count(&ea, EngineCounter::WirePeersSilent), 1);
    assert_eq!(count(&ea, EngineCounter::WireChannelsExpired), 1);

    // And the other way: a's engine stopped too (no close was sent: a
    // peer found silent is not told), b's side closes after the timeout.
    let t = Instant::now();
    let mut ev = None;
    while ev.is_none() && t.elapsed() < Duration::from_secs(3) {
        eb.step();
        ev = b.pop_event();
        std::thread::sleep(Duration::from_millis(1));
    }
    let ev = ev.expect("b is told its peer is gone");
    assert_eq!((ev.kind, ev.channel), (EventKind::PeerGone as u16, tag));
    assert_eq!(count(&eb, EngineCounter::WirePeersSilent), 1);
    assert_eq!(count(&eb, EngineCounter::WireChannelsExpired), 1);
}

/// (e) Issue 39: the bounds per peer were per `IP:PORT`, so one host
/// acting as many peers (one port each) was held back by none. The peers
/// of one IP address now hold at most `peer_ip_channels_max` channels and
/// `peer_ip_half_open_max` unconfirmed ones together, counted; another
/// address is not held back.
#[test]
fn the_peers_of_one_ip_address_share_its_bounds() {
    let hub = MemoryHub::new();
    let cfg = EngineConfig {
        peer_ip_channels_max: 4,
        peer_ip_half_open_max: 3,
        ..allowing(&["10.0.0.0/8"])
    };
    // Two engines of one host (10.0.0.1, two ports), and b.
    let mut ea = engine(&hub, addr(1), cfg.clone());
    let mut ea2 = engine(&hub, addr(4), cfg.clone());
    let mut eb = engine(&hub, addr(2), cfg.clone());
    let mut ca = LocalClient::new(&mut ea).unwrap();
    let mut ca2 = LocalClient::new(&mut ea2).unwrap();
    let mut cb = LocalClient::new(&mut eb).unwrap();
    let a = ca.create_endpoint(&mut ea, geometry()).unwrap();
    let a2 = ca2.create_endpoint(&mut ea2, geometry()).unwrap();
    let mut b = cb.create_endpoint(&mut eb, geometry()).unwrap();
    let mut chans = Vec::new();
    for _ in 0..3 {
        chans.push(channel(open_remote(
            &mut ca,
            &mut ea,
            &mut eb,
            a.id(),
            addr(2),
            b.id(),
        )));
    }
    channel(open_remote(
        &mut ca2,
        &mut ea2,
        &mut eb,
        a2.id(),
        addr(2),
        b.id(),
    ));
    // The host's fifth, from either port, is refused.
    let r = open_remote(&mut ca2, &mut ea2, &mut eb, a2.id(), addr(2), b.id());
    assert_eq!(r, Reply::Error(ErrorCode::NoResources));
    assert_eq!(count(&eb, EngineCounter::WireDropPeerIpChannelsFull), 1);
    settle(&mut ea, &mut eb);
    assert_eq!(opened(&mut b).len(), 4);
    // Closing one makes room for the host again.
    ca.close_channel(&mut ea, a.id(), chans[0]).unwrap();
    settle(&mut ea, &mut eb);
    channel(open_remote(
        &mut ca2,
        &mut ea2,
        &mut eb,
        a2.id(),
        addr(2),
        b.id(),
    ));
    settle(&mut ea, &mut eb);
    let _ = opened(&mut b);

    // A host that never confirms, from many ports (one open each): three
    // unconfirmed channels in all, then refusals.
    let mut forgers: Vec<MemoryPort> = (1..=6)
        .map(|p| {
            hub.bind(SocketAddr::from(([10, 0, 0, 9], p)), PortConfig::loopback())
                .unwrap()
        })
        .collect();
    for (i, f) in forgers.iter_mut().enumerate() {
        inject(f, addr(2), &[open_request(b.id(), i as u32 + 1)]);
    }
    settle(&mut ea, &mut eb);
    assert_eq!(opened(&mut b).len(), 3);
    assert_eq!(count(&eb, EngineCounter::WireDropPeerIpHalfOpenFull), 3);
    // Another address still opens.
    let mut other = hub
        .bind(
            SocketAddr::from(([10, 0, 0, 10], 1)),
            PortConfig::loopback(),
        )
        .unwrap();
    inject(&mut other, addr(2), &[open_request(b.id(), 99)]);
    settle(&mut ea, &mut eb);
    assert_eq!(opened(&mut b).len(), 1);
}
