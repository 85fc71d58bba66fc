//! Endpoints on an embedded engine: the direct path, the engine path and the
//! UDP path carry messages of every size intact, and channel events arrive.

use std::time::Duration;

mod common;
use common::{endpoint_counter, engine_counter};
use unet::*;

fn pattern(i: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| (i.wrapping_mul(31) + k * 7) as u8)
        .collect()
}

const T: Option<Duration> = Some(Duration::from_secs(10));

fn exchange(a: &mut Endpoint, b: &mut Endpoint, ch: Channel, sizes: &[usize], rounds: usize) {
    let mut buf = vec![0u8; 1 << 20];
    let mut b_chan = None;
    for r in 0..rounds {
        for (k, &len) in sizes.iter().enumerate() {
            let msg = pattern(r * 100 + k, len);
            a.send_blocking(ch, &msg, Duration::from_secs(10))
                .expect("send");
            let got = b.recv(&mut buf, T).expect("recv");
            assert_eq!(got.len, len, "round {r} size {len}");
            assert!(buf[..len] == msg[..], "content of round {r} size {len}");
            if let Some(c) = b_chan {
                assert_eq!(got.channel, c, "source channel is stable");
            }
            b_chan = Some(got.channel);
            // And back.
            let echo = buf[..len].to_vec();
            b.send_blocking(got.channel, &echo, Duration::from_secs(10))
                .expect("reply");
            let back = a.recv(&mut buf, T).expect("recv reply");
            assert_eq!(back.channel, ch);
            assert_eq!(back.len, len);
            assert!(buf[..len] == msg[..]);
        }
    }
}

const SIZES: &[usize] = &[
    1, 8, 55, 56, 57, 64, 1000, 4096, 8191, 8192, 8193, 65536, 100_000,
];

#[test]
fn direct_path_carries_every_size() {
    let engine = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&engine).unwrap();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    let ch = a
        .open_channel(
            b.addr(),
            ChannelOptions {
                path: PathChoice::Direct,
            },
        )
        .unwrap();
    match b.poll_event() {
        Some(Event::ChannelOpened { peer, direct, .. }) => {
            assert_eq!(peer.id, a.id());
            assert!(direct);
        }
        e => panic!("expected ChannelOpened, got {e:?}"),
    }
    exchange(&mut a, &mut b, ch, SIZES, 3);
    assert!(a.client_counter(ClientCounter::DirectTxMsgs) >= (SIZES.len() * 3) as u64);
}

#[test]
fn engine_path_carries_every_size() {
    let engine = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&engine).unwrap();
    let (mut a, mut b, ch) = common::engine_channel(&s, EndpointConfig::default());
    exchange(&mut a, &mut b, ch, SIZES, 3);
    assert_eq!(a.client_counter(ClientCounter::DirectTxMsgs), 0);
}

#[test]
fn udp_path_between_two_engines() {
    let cfg = EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    };
    let e1 = Engine::start(cfg.clone()).unwrap();
    let e2 = Engine::start(cfg).unwrap();
    let s1 = Session::embedded(&e1).unwrap();
    let s2 = Session::embedded(&e2).unwrap();
    let mut a = s1.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s2.create_endpoint(EndpointConfig::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    match b.poll_event() {
        Some(Event::ChannelOpened { peer, direct, .. }) => {
            assert_eq!(peer, a.addr());
            assert!(!direct);
        }
        e => panic!("expected ChannelOpened, got {e:?}"),
    }
    exchange(&mut a, &mut b, ch, SIZES, 2);
}

#[test]
fn refused_and_unknown_destinations() {
    let engine = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&engine).unwrap();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let b = s
        .create_endpoint(EndpointConfig {
            accept: false,
            ..Default::default()
        })
        .unwrap();
    match a.open_channel(b.addr(), ChannelOptions::default()) {
        Err(Error::Engine(ErrorCode::Refused)) => {}
        r => panic!("expected a refusal, got {r:?}"),
    }
    match a.open_channel(EndpointAddr::local(9999), ChannelOptions::default()) {
        Err(Error::Engine(ErrorCode::NoSuchEndpoint)) => {}
        r => panic!("expected no such endpoint, got {r:?}"),
    }
    assert_eq!(a.send(Channel(7), b"x"), Err(SendError::BadChannel));
}

#[test]
fn peer_gone_is_reported_on_both_paths() {
    let engine = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&engine).unwrap();
    for path in [PathChoice::Direct, PathChoice::Engine] {
        let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
        let b = s.create_endpoint(EndpointConfig::default()).unwrap();
        let ch = a.open_channel(b.addr(), ChannelOptions { path }).unwrap();
        drop(b);
        let mut gone = false;
        for _ in 0..1000 {
            if let Some(Event::PeerGone { channel }) = a.poll_event() {
                assert_eq!(channel, ch);
                gone = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(gone, "{path:?}: no PeerGone event");
        let mut failed = false;
        for _ in 0..100 {
            if a.send(ch, b"x") == Err(SendError::PeerGone) {
                failed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(failed, "{path:?}: sending to a gone peer must fail");
    }
}

/// The engine bounds the shared memory one client holds: endpoints beyond
/// the quota are refused (and the refusal leaves nothing behind), closing
/// one makes room again, and a direct connection that would not fit falls
/// back to the engine path (or is refused when the direct path was asked
/// for).
#[test]
fn a_client_cannot_take_more_shared_memory_than_its_quota() {
    let seg = unet_abi::Layout::new(unet_abi::Geometry::default())
        .unwrap()
        .segment_size;
    let conn = unet_abi::conn_segment_size(unet_abi::CONN_RING_DEFAULT) as u64;
    let engine = Engine::start(EngineConfig {
        // Two endpoints and one direct connection, not a third endpoint.
        client_memory: 2 * seg + conn + conn / 2,
        ..Default::default()
    })
    .unwrap();
    let s = Session::embedded(&engine).unwrap();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    match s.create_endpoint(EndpointConfig::default()) {
        Err(Error::Quota(ErrorCode::QuotaExceeded)) => {}
        other => panic!("a third endpoint must exceed the quota: {:?}", other.err()),
    }
    let c1 = a
        .open_channel(
            b.addr(),
            ChannelOptions {
                path: PathChoice::Direct,
            },
        )
        .expect("one direct connection fits");
    match next_opened(&mut b) {
        Some(true) => {}
        e => panic!("expected a direct ChannelOpened, got {e:?}"),
    }
    // A second direct connection does not fit: asked for, it is refused;
    // on Auto the channel takes the engine path.
    match a.open_channel(
        b.addr(),
        ChannelOptions {
            path: PathChoice::Direct,
        },
    ) {
        Err(Error::Quota(ErrorCode::QuotaExceeded)) => {}
        r => panic!("a second direct connection must exceed the quota: {r:?}"),
    }
    let c2 = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    match next_opened(&mut b) {
        Some(false) => {}
        e => panic!("expected an engine-path ChannelOpened, got {e:?}"),
    }
    let mut buf = vec![0u8; 1 << 16];
    for (ch, msg) in [(c1, &b"direct"[..]), (c2, &b"through the engine"[..])] {
        a.send_blocking(ch, msg, Duration::from_secs(10)).unwrap();
        let r = b.recv(&mut buf, T).unwrap();
        assert_eq!(&buf[..r.len], msg);
    }
    // Closing an endpoint gives its memory back.
    drop(a);
    let again = s.create_endpoint(EndpointConfig::default());
    assert!(again.is_ok(), "room again after a close: {:?}", again.err());
}

/// The next ChannelOpened event's `direct` flag (other events skipped).
fn next_opened(ep: &mut Endpoint) -> Option<bool> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        match ep.poll_event() {
            Some(Event::ChannelOpened { direct, .. }) => return Some(direct),
            Some(_) => {}
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    None
}

#[test]
fn direct_receive_takes_connections_in_turn() {
    // Two senders with full rings: the receiver alternates between them
    // instead of draining one first.
    let engine = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&engine).unwrap();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut c = s.create_endpoint(EndpointConfig::default()).unwrap();
    let direct = ChannelOptions {
        path: PathChoice::Direct,
    };
    let ca = a.open_channel(c.addr(), direct).unwrap();
    let cb = b.open_channel(c.addr(), direct).unwrap();
    for i in 0..50u8 {
        a.send(ca, &[b'a', i]).unwrap();
        b.send(cb, &[b'b', i]).unwrap();
    }
    let mut buf = [0u8; 8];
    let mut got = Vec::new();
    while got.len() < 100 {
        let r = c.recv(&mut buf, T).expect("recv");
        assert_eq!(r.len, 2);
        got.push((buf[0], buf[1]));
    }
    for (k, pair) in got.chunks(2).enumerate() {
        let mut p = pair.to_vec();
        p.sort();
        assert_eq!(p, [(b'a', k as u8), (b'b', k as u8)], "turn {k}: {got:?}");
    }
    assert_eq!(c.client_counter(ClientCounter::DirectRxMsgs), 100);
    assert_eq!(c.client_counter(ClientCounter::DirectRxBytes), 200);
    assert_eq!(a.client_counter(ClientCounter::DirectTxMsgs), 50);
    assert_eq!(b.client_counter(ClientCounter::DirectTxBytes), 100);
}

/// A small direct ring filled until it refuses a send, then drained, again
/// and again, with sizes that make records wrap round its end: each fill
/// takes at least half the ring before it refuses, and every message
/// arrives once, in order, intact.
#[test]
fn a_full_direct_ring_refuses_then_takes_again() {
    const RING: usize = 4096;
    let (_e, _s, mut a, mut b, ch) = pair(RING as u32, PathChoice::Direct);
    let (mut sent, mut got) = (0usize, 0usize);
    let mut buf = vec![0u8; 512];
    for round in 0..300 {
        let mut bytes = 0;
        loop {
            let len = 1 + (sent * 37 + round) % 300;
            match a.send(ch, &pattern(sent, len)) {
                Ok(()) => {
                    sent += 1;
                    bytes += unet_abi::record_span(len);
                }
                Err(SendError::Full) => break,
                Err(e) => panic!("round {round}, message {sent}: {e:?}"),
            }
        }
        assert!(
            bytes >= RING / 2,
            "round {round}: refused after {bytes} bytes of a {RING}-byte ring"
        );
        while let Some(r) = b.try_recv(&mut buf).unwrap() {
            let want = pattern(got, 1 + (got * 37 + round) % 300);
            assert!(buf[..r.len] == want[..], "round {round}, message {got}");
            got += 1;
        }
        assert_eq!(got, sent, "round {round}: all that was sent arrived");
    }
    assert!(sent > 300 * 10, "{sent} messages in 300 fills");
}

/// Two endpoints on an embedded engine with a channel on `path`; the
/// engine's direct rings hold `ring` bytes.
fn pair(ring: u32, path: PathChoice) -> (Engine, Session, Endpoint, Endpoint, Channel) {
    let engine = Engine::start(EngineConfig {
        conn_ring_size: ring,
        ..Default::default()
    })
    .unwrap();
    let s = Session::embedded(&engine).unwrap();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions { path }).unwrap();
    assert_eq!(next_opened(&mut b), Some(path == PathChoice::Direct));
    (engine, s, a, b, ch)
}

#[test]
fn the_first_look_finds_a_message_on_a_direct_channel_just_opened() {
    let engine = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&engine).unwrap();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut c = s.create_endpoint(EndpointConfig::default()).unwrap();
    let direct = ChannelOptions {
        path: PathChoice::Direct,
    };
    let ab = a.open_channel(b.addr(), direct).unwrap();
    let ac = a.open_channel(c.addr(), direct).unwrap();
    a.send(ab, b"one").unwrap();
    a.send_many(ac, &[b"two"]).unwrap();
    let mut buf = [0u8; 8];
    // Neither b nor c has looked at its events: the connection is attached
    // by the receive itself.
    let r = b.try_recv(&mut buf).unwrap().expect("b's message at once");
    assert_eq!(&buf[..r.len], b"one");
    let mut got = Vec::new();
    let n = c
        .recv_many(&mut buf, 8, |_, m| {
            got.push(m.to_vec());
            true
        })
        .unwrap();
    assert_eq!((n, got), (1, vec![b"two".to_vec()]), "c's message at once");
    // The opening is still reported.
    assert_eq!(next_opened(&mut b), Some(true));
}

#[test]
fn batches_arrive_whole_and_in_order_on_both_local_paths() {
    const N: usize = 3000;
    let len_of = |i: usize| 1 + (i * 53) % 700;
    for path in [PathChoice::Direct, PathChoice::Engine] {
        let (_e, s, mut a, mut b, ch) = pair(64 << 10, path);
        let msgs: Vec<Vec<u8>> = (0..N).map(|i| pattern(i, len_of(i))).collect();
        let (mut sent, mut got, mut calls) = (0usize, 0usize, 0usize);
        let start = std::time::Instant::now();
        let mut buf = vec![0u8; 1024];
        let mut from = None;
        while got < N {
            // At most 100 outstanding, well within the receiver's free
            // buffers: the engine drops (and counts) what they cannot take.
            if sent < N && sent - got < 100 {
                // Batches of 1 to 97 messages; a full queue or ring takes
                // part of one or none.
                let end = N.min(sent + 1 + (calls * 13) % 97);
                match a.send_many(ch, &msgs[sent..end]) {
                    Ok(n) => {
                        assert!(n >= 1 && n <= end - sent, "{path:?}: {n} of {}", end - sent);
                        sent += n;
                    }
                    Err(SendError::Full) => {}
                    Err(e) => panic!("{path:?}, message {sent}: {e:?}"),
                }
            }
            // Limits of 1 to 61, and a handler that stops at every 50th.
            let limit = 1 + (calls * 7) % 61;
            let mut handed = 0;
            let n = b
                .recv_many(&mut buf, limit, |r, m| {
                    let i = got + handed;
                    assert_eq!(r.len, m.len());
                    assert!(
                        m == &msgs[i][..],
                        "{path:?}: message {i} of {} bytes, {} came; counters:\n{}",
                        msgs[i].len(),
                        m.len(),
                        common::nonzero_counters(&s)
                    );
                    assert_eq!(*from.get_or_insert(r.channel), r.channel);
                    handed += 1;
                    (i + 1) % 50 != 0
                })
                .unwrap();
            assert_eq!(n, handed, "{path:?}: the count is what the handler saw");
            assert!(n <= limit);
            if n > 0 {
                let last = got + n - 1;
                assert!(
                    n == limit
                        || (last + 1) % 50 == 0
                        || last + 1 == sent
                        || path == PathChoice::Engine,
                    "{path:?}: a pass stopped early at {last} ({n} of {limit}, {sent} sent)"
                );
            }
            got += n;
            assert!(got <= sent);
            calls += 1;
            if n == 0 && got < sent {
                // The engine has not delivered yet: give it the CPU.
                b.wait(Some(Duration::from_millis(10)));
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{path:?}: stuck at {got} of {N}; counters:\n{}",
                common::nonzero_counters(&s)
            );
        }
        assert_eq!(b.recv_many(&mut buf, 10, |_, _| true).unwrap(), 0);
        if path == PathChoice::Direct {
            let bytes: u64 = (0..N).map(|i| len_of(i) as u64).sum();
            assert_eq!(a.client_counter(ClientCounter::DirectTxMsgs), N as u64);
            assert_eq!(a.client_counter(ClientCounter::DirectTxBytes), bytes);
            assert_eq!(b.client_counter(ClientCounter::DirectRxMsgs), N as u64);
            assert_eq!(b.client_counter(ClientCounter::DirectRxBytes), bytes);
        }
    }
}

#[test]
fn send_many_fills_a_direct_ring_and_stops_where_it_is_full() {
    const RING: usize = 4096;
    let (_e, _s, mut a, mut b, ch) = pair(RING as u32, PathChoice::Direct);
    let msgs: Vec<Vec<u8>> = (0..100).map(|i| pattern(i, 100)).collect();
    let n = a.send_many(ch, &msgs).unwrap();
    let span = unet_abi::record_span(100);
    assert!(
        n * span <= RING && (n + 1) * span > RING / 2,
        "{n} records of {span} bytes"
    );
    assert_eq!(a.send_many(ch, &msgs[n..]), Err(SendError::Full));
    assert_eq!(a.send_many::<&[u8]>(ch, &[]), Ok(0));
    let mut buf = [0u8; 128];
    let mut seen = 0;
    let got = b
        .recv_many(&mut buf, 1000, |_, m| {
            assert!(m == &msgs[seen][..], "message {seen}");
            seen += 1;
            true
        })
        .unwrap();
    assert_eq!(got, n, "everything sent, nothing more");
    assert_eq!(a.send_many(ch, &msgs[n..]).map(|k| k > 0), Ok(true));
}

#[test]
fn recv_many_leaves_a_message_too_large_for_the_buffer_queued() {
    for path in [PathChoice::Direct, PathChoice::Engine] {
        let (_e, _s, mut a, mut b, ch) = pair(1 << 20, path);
        let msgs = [
            pattern(0, 10),
            pattern(1, 20),
            pattern(2, 200),
            pattern(3, 30),
        ];
        assert_eq!(a.send_many(ch, &msgs), Ok(4));
        let mut small = [0u8; 64];
        let mut lens = Vec::new();
        // The engine path may not have delivered everything yet.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while lens.len() < 2 {
            assert!(
                b.wait(Some(deadline - std::time::Instant::now())),
                "{path:?}: {lens:?}"
            );
            b.recv_many(&mut small, 10, |r, _| {
                lens.push(r.len);
                true
            })
            .unwrap();
        }
        assert_eq!(lens, [10, 20], "{path:?}");
        let mut e = b.recv_many(&mut small, 10, |_, _| true);
        while e == Ok(0) {
            assert!(
                b.wait(Some(deadline - std::time::Instant::now())),
                "{path:?}"
            );
            e = b.recv_many(&mut small, 10, |_, _| true);
        }
        assert_eq!(e, Err(RecvError::BufferTooSmall(200)), "{path:?}");
        assert_eq!(
            b.recv_many(&mut small, 0, |_, _| true),
            Ok(0),
            "{path:?}: a limit of 0"
        );
        let mut big = [0u8; 256];
        let r = b.recv(&mut big, T).unwrap();
        assert!(
            big[..r.len] == msgs[2][..],
            "{path:?}: the large one stayed queued"
        );
        let r = b.recv(&mut big, T).unwrap();
        assert!(big[..r.len] == msgs[3][..], "{path:?}");
    }
}

/// Pin the calling thread (and the threads it starts from now on) to one CPU
/// it may run on.
fn pin_to_one_cpu() -> usize {
    // SAFETY: cpu_set_t is plain data; the calls read and write the set we
    // own, for the calling thread (pid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        assert_eq!(libc::sched_getaffinity(0, size, &mut set), 0, "getaffinity");
        let cpu = (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .expect("some allowed CPU");
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(libc::sched_setaffinity(0, size, &set), 0, "setaffinity");
        cpu
    }
}

/// A client waiting on the engine's own CPU cannot answer before the engine
/// leaves it: the engine then sleeps at once after delivering to it (a
/// handoff, counted) instead of polling on, and the traffic is intact.
#[test]
fn the_engine_leaves_the_cpu_to_a_client_waiting_on_it() {
    // The engine's thread starts from this one, pinned: all on one CPU.
    pin_to_one_cpu();
    let engine = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&engine).unwrap();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    let engine_path = ChannelOptions {
        path: PathChoice::Engine,
    };
    let ab = a.open_channel(b.addr(), engine_path).unwrap();
    let ba = b.open_channel(a.addr(), engine_path).unwrap();
    let before = engine_counter(&s, unet_abi::EngineCounter::Handoffs);
    let mut buf = [0u8; 256];
    const ROUNDS: usize = 500;
    for i in 0..ROUNDS {
        let msg = pattern(i, 100);
        a.send(ab, &msg).expect("a sends");
        let r = b.recv(&mut buf, T).expect("b receives");
        assert_eq!(&buf[..r.len], &msg[..], "round {i} to b");
        b.send(ba, &buf[..r.len]).expect("b answers");
        let r = a.recv(&mut buf, T).expect("a receives");
        assert_eq!(&buf[..r.len], &msg[..], "round {i} back to a");
    }
    let handoffs = engine_counter(&s, unet_abi::EngineCounter::Handoffs) - before;
    // Each of the 1 000 deliveries finds its client on the engine's CPU;
    // most are the last work of a turn, followed by a handoff.
    assert!(
        handoffs >= ROUNDS as u64,
        "{handoffs} handoffs in {ROUNDS} round trips on one CPU"
    );
}

/// A receiver that falls behind while awake costs its sender one message
/// per engine turn, not a whole queue: the engine stops taking that
/// sender's descriptors and yields its CPU (counted), and the rest wait in
/// the sender's queue until the receiver has room again.
#[test]
fn the_engine_yields_to_an_awake_receiver_that_fell_behind() {
    use unet_abi::{EndpointCounter as C, EngineCounter};
    let engine = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&engine).unwrap();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    const CAP: usize = 16;
    let mut b = s
        .create_endpoint(EndpointConfig {
            geometry: unet_abi::Geometry {
                recv_cap: CAP as u32,
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
    let engine_path = ChannelOptions {
        path: PathChoice::Engine,
    };
    let ab = a.open_channel(b.addr(), engine_path).unwrap();
    let yields_before = engine_counter(&s, EngineCounter::ReceiverYields);
    // b never waits, so it counts as awake; it reads nothing yet.
    const SENT: usize = 1000;
    for i in 0..SENT {
        a.send_blocking(ab, &pattern(i, 100), Duration::from_secs(10))
            .expect("a sends");
    }
    let dropped = |b: &Endpoint| {
        endpoint_counter(&s, b, C::RxDropRingFull) + endpoint_counter(&s, b, C::RxDropNoBuffer)
    };
    let start = std::time::Instant::now();
    while endpoint_counter(&s, &b, C::RxMsgs) + dropped(&b) < SENT as u64 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the engine took {} of {SENT} messages",
            endpoint_counter(&s, &b, C::RxMsgs) + dropped(&b)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(endpoint_counter(&s, &b, C::RxMsgs), CAP as u64);
    let drops = dropped(&b);
    assert_eq!(drops, (SENT - CAP) as u64);
    let yields = engine_counter(&s, EngineCounter::ReceiverYields) - yields_before;
    assert!(
        yields >= drops,
        "{drops} messages dropped in {yields} yielding turns: more than one per turn"
    );
    // The first CAP arrived intact and in order; once b has read them,
    // messages get through again.
    let mut buf = [0u8; 256];
    for i in 0..CAP {
        let r = b.recv(&mut buf, T).expect("b receives");
        assert_eq!(&buf[..r.len], &pattern(i, 100)[..], "message {i}");
    }
    a.send(ab, &pattern(SENT, 100)).expect("a sends again");
    let r = b.recv(&mut buf, T).expect("b receives again");
    assert_eq!(&buf[..r.len], &pattern(SENT, 100)[..]);
}

#[test]
fn wait_any_sleeps_on_several_endpoints_and_wakes_for_the_one_a_message_comes_to() {
    for path in [PathChoice::Direct, PathChoice::Engine] {
        let engine = Engine::start(EngineConfig::default()).unwrap();
        let s = Session::embedded(&engine).unwrap();
        let quiet = EndpointConfig {
            spin: Duration::ZERO,
            ..EndpointConfig::default()
        };
        let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
        let mut b = s.create_endpoint(quiet).unwrap();
        let mut c = s.create_endpoint(quiet).unwrap();
        let ch = a.open_channel(c.addr(), ChannelOptions { path }).unwrap();
        assert_eq!(next_opened(&mut c), Some(path == PathChoice::Direct));

        // Nothing comes: the whole wait passes, asleep.
        let t = std::time::Instant::now();
        assert_eq!(
            Endpoint::wait_any(&mut [&mut b, &mut c], Some(Duration::from_millis(50))),
            None
        );
        assert!(t.elapsed() >= Duration::from_millis(50), "{path:?}");

        // A message for the second, sent while both sleep.
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            a.send_blocking(ch, b"wake", Duration::from_secs(5))
                .unwrap();
            a
        });
        let t = std::time::Instant::now();
        let woke = Endpoint::wait_any(&mut [&mut b, &mut c], Some(Duration::from_secs(10)));
        let waited = t.elapsed();
        assert_eq!(woke, Some(1), "{path:?}");
        assert!(waited >= Duration::from_millis(40), "{path:?}: {waited:?}");
        assert!(waited < Duration::from_secs(5), "{path:?}: woke late");
        let mut buf = [0u8; 16];
        let r = c.try_recv(&mut buf).unwrap().expect("the message");
        assert_eq!(&buf[..r.len], b"wake");
        assert!(b.try_recv(&mut buf).unwrap().is_none());
        drop(sender.join().unwrap());
    }
}

/// The handler of `a_signal_cuts_wait_any_short`: nothing to do; being
/// installed without `SA_RESTART` is what interrupts the sleep.
extern "C" fn noted(_: libc::c_int) {}

#[test]
fn a_signal_cuts_wait_any_short_and_leaves_a_plain_wait_asleep() {
    let engine = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&engine).unwrap();
    let quiet = EndpointConfig {
        spin: Duration::ZERO,
        ..EndpointConfig::default()
    };
    let mut b = s.create_endpoint(quiet).unwrap();
    let mut c = s.create_endpoint(quiet).unwrap();
    // SAFETY: a zeroed sigaction is valid (no flags, so no SA_RESTART;
    // an empty mask), its handler an `extern "C"` fn of one int that does
    // nothing; SIGUSR2 is not otherwise used by the tests.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = noted as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut act.sa_mask);
        assert_eq!(
            libc::sigaction(libc::SIGUSR2, &act, std::ptr::null_mut()),
            0
        );
    }
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() };
    let kick = move || {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            // SAFETY: `me` is the test's thread, alive until the join
            // below; the signal's handler is installed.
            unsafe { libc::pthread_kill(me, libc::SIGUSR2) };
        })
    };
    let k = kick();
    let t = std::time::Instant::now();
    let woke = Endpoint::wait_any(&mut [&mut b, &mut c], Some(Duration::from_secs(20)));
    let waited = t.elapsed();
    k.join().unwrap();
    assert_eq!(woke, None);
    assert!(
        waited < Duration::from_secs(10),
        "not cut short: {waited:?}"
    );
    // A plain wait sleeps on through the signal to its timeout.
    let k = kick();
    let t = std::time::Instant::now();
    assert!(!b.wait(Some(Duration::from_millis(400))));
    k.join().unwrap();
    assert!(t.elapsed() >= Duration::from_millis(400));
}
