//! U-Net endpoints with two-case delivery (`EndpointConfig::buffered`,
//! `docs/udm.md`): what the receive queue cannot take waits in the
//! endpoint's virtual buffer, in order, instead of being dropped; the
//! buffer's pages are given back once read; at its limit local senders are
//! held back; and without the option the endpoint drops, as U-Net does.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{endpoint_counter, nonzero_counters};
use unet::{
    Channel, ChannelOptions, Endpoint, EndpointConfig, Engine, EngineConfig, PathChoice, Session,
};
use unet_abi::{EndpointCounter as C, Geometry};

const T: Option<Duration> = Some(Duration::from_secs(20));
const SEND_WAIT: Duration = Duration::from_secs(30);

/// Message `i`: its length varies (inline and in receive buffers), its
/// bytes name it.
fn msg(i: usize) -> Vec<u8> {
    let len = match i % 5 {
        0 => 8,
        1 => 56,
        2 => 300,
        3 => 1500,
        _ => 3000,
    };
    let mut m: Vec<u8> = (0..len)
        .map(|k| (i.wrapping_mul(131) + k * 7) as u8)
        .collect();
    m[..8].copy_from_slice(&(i as u64).to_le_bytes());
    m
}

/// A small receiver: 16 receive-queue entries, 16 receive buffers of 4 KiB
/// (half the area goes to sending).
fn small(buffered: Option<u64>) -> EndpointConfig {
    EndpointConfig {
        geometry: Geometry {
            buffer_size: 4096,
            buffer_area_size: 128 << 10,
            recv_cap: 16,
            ..Geometry::default()
        },
        buffered,
        ..EndpointConfig::default()
    }
}

fn engine_path() -> ChannelOptions {
    ChannelOptions {
        path: PathChoice::Engine,
    }
}

/// Wait until `f` holds (at most 20 s), or fail with `what` and the
/// counters.
fn wait_for(s: &Session, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{what}\n{}",
            nonzero_counters(s)
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Receive `n` messages, numbered from `first`, each intact and on `ch`.
fn receive_in_order(s: &Session, b: &mut Endpoint, first: usize, n: usize) {
    let mut buf = vec![0u8; 1 << 16];
    let mut ch = None;
    for i in first..first + n {
        let r = b
            .recv(&mut buf, T)
            .unwrap_or_else(|e| panic!("message {i}: {e}\n{}", nonzero_counters(s)));
        assert_eq!(&buf[..r.len], &msg(i)[..], "message {i}");
        assert_eq!(
            *ch.get_or_insert(r.channel),
            r.channel,
            "message {i}'s channel"
        );
    }
}

fn drops(s: &Session, b: &Endpoint) -> u64 {
    [
        C::RxDropRingFull,
        C::RxDropNoBuffer,
        C::RxDropTooLarge,
        C::RxDropBufferLimit,
    ]
    .iter()
    .map(|&c| endpoint_counter(s, b, c))
    .sum()
}

/// A fast sender, a receiver that reads nothing until the sender is done:
/// with the option every message arrives once, in order, intact (far more
/// than its queue and buffers hold); without it, the same run drops.
#[test]
fn a_buffered_endpoint_gets_every_message_a_plain_one_drops() {
    const N: usize = 2000;
    let engine = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&engine).unwrap();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();

    // Buffered.
    let mut b = s
        .create_endpoint(small(Some(unet::BUFFERED_DEFAULT)))
        .unwrap();
    assert_eq!(
        endpoint_counter(&s, &b, C::BufferLimit),
        unet::BUFFERED_DEFAULT
    );
    let ab = a.open_channel(b.addr(), engine_path()).unwrap();
    for i in 0..N {
        a.send_blocking(ab, &msg(i), SEND_WAIT).expect("a sends");
    }
    wait_for(&s, "the engine takes every message", || {
        endpoint_counter(&s, &b, C::RxMsgs) + endpoint_counter(&s, &b, C::RxBuffered) >= N as u64
    });
    let buffered = endpoint_counter(&s, &b, C::RxBuffered);
    assert!(
        buffered >= (N - 32) as u64,
        "{buffered} buffered of {N}: the queue and buffers hold 16"
    );
    receive_in_order(&s, &mut b, 0, N);
    assert_eq!(drops(&s, &b), 0, "{}", nonzero_counters(&s));
    assert_eq!(endpoint_counter(&s, &b, C::RxMsgs), N as u64);
    let mut buf = [0u8; 16];
    assert!(b.try_recv(&mut buf).unwrap().is_none(), "one more message");

    // The default: U-Net's drop.
    let mut p = s.create_endpoint(small(None)).unwrap();
    assert_eq!(endpoint_counter(&s, &p, C::BufferLimit), 0);
    let ap = a.open_channel(p.addr(), engine_path()).unwrap();
    for i in 0..N {
        a.send_blocking(ap, &msg(i), SEND_WAIT).expect("a sends");
    }
    wait_for(&s, "the engine takes every message", || {
        endpoint_counter(&s, &p, C::RxMsgs) + drops(&s, &p) >= N as u64
    });
    let dropped = drops(&s, &p);
    assert!(dropped > 0, "nothing dropped without the option");
    assert_eq!(endpoint_counter(&s, &p, C::RxBuffered), 0);
    let mut got = 0;
    let mut big = vec![0u8; 1 << 16];
    while p.try_recv(&mut big).unwrap().is_some() {
        got += 1;
    }
    assert_eq!(got as u64 + dropped, N as u64);
}

/// The virtual buffer's pages: taken as it fills, given back as it is read,
/// none held once it is empty.
#[test]
fn a_drained_virtual_buffer_gives_its_pages_back() {
    const N: usize = 3000;
    let engine = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&engine).unwrap();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(small(Some(64 << 20))).unwrap();
    let ab = a.open_channel(b.addr(), engine_path()).unwrap();
    for i in 0..N {
        a.send_blocking(ab, &msg(i), SEND_WAIT).expect("a sends");
    }
    wait_for(&s, "the engine takes every message", || {
        endpoint_counter(&s, &b, C::RxMsgs) + endpoint_counter(&s, &b, C::RxBuffered) >= N as u64
    });
    let pages = endpoint_counter(&s, &b, C::BufferPages);
    // About 1 KiB a message on average: well over a page per 4 messages.
    assert!(pages >= (N / 8) as u64, "{pages} pages for {N} messages");
    assert_eq!(endpoint_counter(&s, &b, C::BufferPagesMax), pages);
    assert_eq!(endpoint_counter(&s, &b, C::PagesReturned), 0);
    receive_in_order(&s, &mut b, 0, N);
    wait_for(&s, "the pages go back", || {
        endpoint_counter(&s, &b, C::BufferPages) == 0
    });
    let returned = endpoint_counter(&s, &b, C::PagesReturned);
    assert!(
        returned >= pages,
        "{returned} pages given back, {pages} were in use"
    );
    assert_eq!(drops(&s, &b), 0);
    // It works again as before, and the counters agree.
    for i in N..N + 100 {
        a.send_blocking(ab, &msg(i), SEND_WAIT).expect("a sends");
    }
    receive_in_order(&s, &mut b, N, 100);
}

/// Overflow control: a receiver that reads nothing, with a small limit,
/// holds its local sender back (its sends stop completing) with the
/// buffer at its limit and nothing dropped; once it reads, everything
/// arrives, in order.
#[test]
fn a_full_virtual_buffer_holds_the_local_sender_back() {
    const N: usize = 1000;
    let engine = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&engine).unwrap();
    // A send queue of 64: it fills long before the N sends are done.
    let mut a = s
        .create_endpoint(EndpointConfig {
            geometry: Geometry {
                send_cap: 64,
                ..Geometry::default()
            },
            ..EndpointConfig::default()
        })
        .unwrap();
    // 1 KiB buffers: the engine's floor (two of its largest messages) is
    // below 64 KiB, so the limit is 64 KiB: 16 pages.
    let mut b = s
        .create_endpoint(EndpointConfig {
            geometry: Geometry {
                buffer_size: 1024,
                buffer_area_size: 64 << 10,
                recv_cap: 16,
                ..Geometry::default()
            },
            buffered: Some(1),
            ..EndpointConfig::default()
        })
        .unwrap();
    assert_eq!(endpoint_counter(&s, &b, C::BufferLimit), 64 << 10);
    let ab = a.open_channel(b.addr(), engine_path()).unwrap();
    let sent = Arc::new(AtomicUsize::new(0));
    let sender = {
        let sent = sent.clone();
        std::thread::spawn(move || {
            for i in 0..N {
                a.send_blocking(ab, &msg(i), Duration::from_secs(60))
                    .expect("a sends");
                sent.store(i + 1, Ordering::Relaxed);
            }
            a
        })
    };
    wait_for(&s, "the sender is held back", || {
        endpoint_counter(&s, &b, C::RxHeld) > 0
    });
    // Held: its sends stop completing, the engine takes nothing more.
    std::thread::sleep(Duration::from_millis(200));
    let (n1, buf1) = (
        sent.load(Ordering::Relaxed),
        endpoint_counter(&s, &b, C::RxBuffered),
    );
    std::thread::sleep(Duration::from_millis(300));
    let (n2, buf2) = (
        sent.load(Ordering::Relaxed),
        endpoint_counter(&s, &b, C::RxBuffered),
    );
    assert!(n2 < N, "all {N} sends completed against a full buffer");
    assert_eq!((n1, buf1), (n2, buf2), "the sender moved while held");
    // The buffer at its limit: 64 KiB of ~1 KiB messages, 16 pages.
    assert!(buf2 >= 40, "{buf2} messages buffered");
    let pages = endpoint_counter(&s, &b, C::BufferPages);
    assert!((15..=16).contains(&pages), "{pages} pages at the limit");
    assert!(endpoint_counter(&s, &b, C::BufferPagesMax) <= 16);
    assert_eq!(drops(&s, &b), 0, "{}", nonzero_counters(&s));
    assert_eq!(endpoint_counter(&s, &b, C::RxHeld), 1, "once per stall");
    // The receiver reads: everything arrives.
    receive_in_order(&s, &mut b, 0, N);
    let a = sender.join().expect("the sender");
    drop(a);
    assert_eq!(drops(&s, &b), 0, "{}", nonzero_counters(&s));
    assert!(endpoint_counter(&s, &b, C::RxHeld) >= 1);
    wait_for(&s, "the pages go back", || {
        endpoint_counter(&s, &b, C::BufferPages) == 0
    });
}

/// Over UDP between two engines: a burst far beyond the receiver's queue
/// arrives whole, in order, with the option (the receiving engine buffers
/// what the wire brings).
#[test]
fn a_udp_burst_reaches_a_buffered_endpoint_whole() {
    const N: usize = 1500;
    let cfg = EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    };
    let e1 = Engine::start(cfg.clone()).unwrap();
    let e2 = Engine::start(cfg).unwrap();
    let s1 = Session::embedded(&e1).unwrap();
    let s2 = Session::embedded(&e2).unwrap();
    let mut a = s1.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s2
        .create_endpoint(small(Some(unet::BUFFERED_DEFAULT)))
        .unwrap();
    let ch: Channel = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    // The channel is open at b's side before the burst.
    let _ = b.poll_event();
    // Smaller messages: the burst goes out faster than b's engine could
    // be drained by a reader, and no datagram is fragmented.
    let m = |i: usize| {
        let mut v = msg(i);
        v.truncate(600);
        v
    };
    for i in 0..N {
        a.send_blocking(ch, &m(i), SEND_WAIT).expect("a sends");
    }
    wait_for(&s2, "the burst arrives", || {
        endpoint_counter(&s2, &b, C::RxMsgs) + endpoint_counter(&s2, &b, C::RxBuffered) >= N as u64
    });
    assert!(endpoint_counter(&s2, &b, C::RxBuffered) > 0);
    let mut buf = vec![0u8; 1 << 16];
    for i in 0..N {
        let r = b
            .recv(&mut buf, T)
            .unwrap_or_else(|e| panic!("message {i}: {e}\n{}", nonzero_counters(&s2)));
        assert_eq!(&buf[..r.len], &m(i)[..], "message {i}");
    }
    assert_eq!(drops(&s2, &b), 0, "{}", nonzero_counters(&s2));
}

/// The limit is checked: 0 or more than 1 GiB is refused by the library,
/// a limit beyond the process's memory quota by the engine (the buffer is
/// charged at its limit), a small one is raised to the engine's floor.
#[test]
fn the_limit_is_checked_and_charged() {
    let engine = Engine::start(EngineConfig {
        client_memory: 64 << 20,
        ..EngineConfig::default()
    })
    .unwrap();
    let s = Session::embedded(&engine).unwrap();
    for bad in [0, unet_abi::MAX_BUFFER_LIMIT + 1] {
        match s.create_endpoint(small(Some(bad))) {
            Err(unet::Error::Config(_)) => {}
            r => panic!("limit {bad}: {:?}", r.map(|e| e.id())),
        }
    }
    match s.create_endpoint(small(Some(unet_abi::MAX_BUFFER_LIMIT))) {
        Err(unet::Error::Quota(unet::ErrorCode::QuotaExceeded)) => {}
        r => panic!("1 GiB against a 64 MiB quota: {:?}", r.map(|e| e.id())),
    }
    // Room for two of its largest messages (14 buffers of 4 KiB, and a
    // record header each), in whole pages: more than the 64 KiB floor.
    let b = s.create_endpoint(small(Some(5000))).unwrap();
    let floor = (2 * (14 * 4096 + 8) as u64).next_multiple_of(4096);
    assert_eq!(endpoint_counter(&s, &b, C::BufferLimit), floor);
    assert_eq!(endpoint_counter(&s, &b, C::BufferPages), 0);
}

/// Over UDP past the limit: the wire's sender cannot be held back, so what
/// the full buffer cannot take is dropped, counted under its own reason
/// (`rx_drop_buffer_limit`) and no other; what arrives is in order.
#[test]
fn past_the_limit_the_wire_drops_under_its_own_reason() {
    const N: usize = 1000;
    let cfg = EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    };
    let e1 = Engine::start(cfg.clone()).unwrap();
    let e2 = Engine::start(cfg).unwrap();
    let s1 = Session::embedded(&e1).unwrap();
    let s2 = Session::embedded(&e2).unwrap();
    let mut a = s1.create_endpoint(EndpointConfig::default()).unwrap();
    // The smallest limit, 64 KiB: about a hundred 600-byte messages.
    let mut b = s2
        .create_endpoint(EndpointConfig {
            geometry: Geometry {
                buffer_size: 1024,
                buffer_area_size: 64 << 10,
                recv_cap: 16,
                ..Geometry::default()
            },
            buffered: Some(1),
            ..EndpointConfig::default()
        })
        .unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let m = |i: usize| {
        let mut v = msg(i);
        v.resize(600, 0x5a);
        v
    };
    for i in 0..N {
        a.send_blocking(ch, &m(i), SEND_WAIT).expect("a sends");
    }
    let wire_rx = |b: &Endpoint| endpoint_counter(&s2, b, C::WireRxMsgs);
    wait_for(&s2, "the burst arrives or is dropped", || {
        let st = endpoint_counter(&s2, &b, C::RxMsgs)
            + endpoint_counter(&s2, &b, C::RxBuffered)
            + endpoint_counter(&s2, &b, C::RxDropBufferLimit);
        st >= wire_rx(&b) && wire_rx(&b) > 0
    });
    std::thread::sleep(Duration::from_millis(50));
    let limit_drops = endpoint_counter(&s2, &b, C::RxDropBufferLimit);
    assert!(limit_drops > 0, "{}", nonzero_counters(&s2));
    assert_eq!(drops(&s2, &b), limit_drops, "{}", nonzero_counters(&s2));
    assert_eq!(endpoint_counter(&s2, &b, C::RxHeld), 0);
    let mut buf = vec![0u8; 1 << 16];
    let mut last = None;
    let mut got = 0u64;
    while let Ok(r) = b.recv(&mut buf, Some(Duration::from_millis(200))) {
        let i = u64::from_le_bytes(buf[..8].try_into().unwrap()) as usize;
        assert_eq!(&buf[..r.len], &m(i)[..], "message {i}");
        assert!(last.is_none_or(|l| i > l), "{i} after {last:?}");
        last = Some(i);
        got += 1;
    }
    assert_eq!(got + limit_drops, wire_rx(&b));
}
