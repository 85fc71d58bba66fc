//! VIA between two engines over UDP loopback: the connection granted by
//! the remote engine, messages carried by the engines with the VI's
//! reliability level, losses on the wire repaired (reliable levels) or
//! counted (unreliable), the error state when the peer goes.

use std::thread;
use std::time::Duration;

use unet::*;

const T: Option<Duration> = Some(Duration::from_secs(10));

fn engine(drop_ppm: u32) -> (Engine, Session) {
    let e = Engine::start(EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        wire_drop_ppm: drop_ppm,
        wire_drop_seed: 7,
        ..Default::default()
    })
    .unwrap();
    let s = Session::embedded(&e).unwrap();
    (e, s)
}

/// The two reliable levels.
const RELIABLE: [Reliability; 2] = [
    Reliability::ReliableDelivery,
    Reliability::ReliableReception,
];

fn attrs(r: Reliability) -> ViAttributes {
    ViAttributes {
        reliability: r,
        ..ViAttributes::default()
    }
}

/// A VI from engine A's session to a VI accepted at engine B on `tag`.
fn connect(sa: &Session, sb: &Session, tag: u64, r: Reliability) -> (Vi, Vi) {
    let server = sb.vi_listen(tag).unwrap();
    let host = sb.udp_addr();
    let sa = sa.clone();
    let t = thread::spawn(move || sa.vi_connect(host, tag, &attrs(r), T));
    let req = server.wait_request(T).unwrap();
    assert!(
        req.host().is_some(),
        "the request comes from another engine"
    );
    let b = req.accept(&attrs(r)).unwrap();
    let a = t.join().unwrap().unwrap();
    (a, b)
}

/// Message `i`: its number in the first 8 bytes, then a pattern.
fn pattern(i: usize, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len).map(|j| (i * 13 + j * 3) as u8).collect();
    v[..8].copy_from_slice(&(i as u64).to_le_bytes());
    v
}

fn size(i: usize) -> usize {
    [8usize, 100, 1400, 5000, 65_000][i % 5]
}

/// Send `n` messages of mixed sizes from `a` to `b`, the receiver keeping
/// receives posted; check that what arrives is in order and intact, and
/// (`lossless`) that every message arrives exactly once. Returns how many
/// arrived.
fn stream(sa: &Session, sb: &Session, a: &mut Vi, b: &mut Vi, n: usize, lossless: bool) -> usize {
    const SLOT: usize = 70_000;
    const WINDOW: usize = 32;
    let ra = sa.register_memory(WINDOW * 2 * SLOT).unwrap();
    let rb = sb.register_memory(WINDOW * SLOT).unwrap();
    let (mut posted, mut sent, mut sends_done, mut got, mut next) = (0, 0, 0, 0, 0);
    let mut quiet = 0;
    while next < n {
        while posted - got < WINDOW {
            let at = (posted % WINDOW) * SLOT;
            b.post_recv(posted as u64, &[ViSeg::new(&rb, at, SLOT)])
                .unwrap();
            posted += 1;
        }
        while sent < n && sent - sends_done < WINDOW {
            let at = (sent % (2 * WINDOW)) * SLOT;
            ra.write(at, &pattern(sent, size(sent)));
            a.post_send(sent as u64, &[ViSeg::new(&ra, at, size(sent))])
                .unwrap();
            sent += 1;
        }
        while let Some(c) = a.send_done() {
            assert_eq!(c.id, sends_done as u64);
            assert_eq!(
                c.status,
                Ok(size(sends_done)),
                "send {sends_done}: sender {:?} receiver {:?}",
                a.engine_counters(),
                b.engine_counters()
            );
            sends_done += 1;
        }
        match b.recv_wait(Some(Duration::from_millis(20))) {
            Ok(c) => {
                quiet = 0;
                assert_eq!(c.id, got as u64);
                let len = c.status.unwrap_or_else(|e| {
                    panic!(
                        "receive {got}: {e}: sender {:?} receiver {:?}",
                        a.engine_counters(),
                        b.engine_counters()
                    )
                });
                let mut v = vec![0u8; len];
                rb.read((got % WINDOW) * SLOT, &mut v);
                let i = u64::from_le_bytes(v[..8].try_into().unwrap()) as usize;
                if lossless {
                    assert_eq!(i, next, "exactly once, in order");
                } else {
                    assert!(i >= next && i < n, "message {i} after {next}");
                }
                assert_eq!(v, pattern(i, size(i)), "message {i}");
                next = i + 1;
                got += 1;
            }
            Err(WaitError::Timeout) => {
                quiet += 1;
                if !lossless && sent == n && quiet > 10 {
                    break;
                }
            }
            Err(e) => panic!("after {got} messages: {e} ({:?})", b.state()),
        }
    }
    while sends_done < n {
        let c = a.send_wait(T).unwrap();
        assert_eq!(c.status, Ok(size(sends_done)));
        sends_done += 1;
    }
    got
}

fn counter(vi: &mut Vi, name: &str) -> u64 {
    vi.engine_counters()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
        .unwrap()
}

#[test]
fn every_level_carries_a_stream_between_engines() {
    let (_ea, sa) = engine(0);
    let (_eb, sb) = engine(0);
    for (k, r) in RELIABLE.into_iter().enumerate() {
        let (mut a, mut b) = connect(&sa, &sb, 100 + k as u64, r);
        assert!(!a.is_direct() && !b.is_direct(), "through the engines");
        assert_eq!(stream(&sa, &sb, &mut a, &mut b, 2000, true), 2000, "{r:?}");
        // And back.
        assert_eq!(stream(&sb, &sa, &mut b, &mut a, 500, true), 500, "{r:?}");
        assert_eq!(counter(&mut a, "tx_msgs"), 2000);
        assert_eq!(counter(&mut b, "rx_msgs"), 2000);
    }
    // Unreliable: the sender is never held back; what the receiving engine
    // cannot hold is dropped and counted, what arrives is in order.
    let (mut a, mut b) = connect(&sa, &sb, 102, Reliability::Unreliable);
    let got = stream(&sa, &sb, &mut a, &mut b, 2000, false) as u64;
    assert!(got > 0);
    // A loss at the very end of the stream is a gap only once a later
    // message arrives: send fences until one does.
    let lost_fences = fence(&sa, &sb, &mut a, &mut b, got);
    let dropped = counter(&mut b, "lost") + counter(&mut b, "over_window");
    assert_eq!(
        got + dropped,
        2000 + lost_fences,
        "every message arrived or was counted: sender {:?} receiver {:?}",
        a.engine_counters(),
        b.engine_counters()
    );
}

/// Sends small messages from `a` until one arrives at `b` (whose receives
/// `stream` left posted, `got` of them used); returns how many were lost.
fn fence(sa: &Session, sb: &Session, a: &mut Vi, b: &mut Vi, got: u64) -> u64 {
    let ra = sa.register_memory(4096).unwrap();
    let rb = sb.register_memory(4096).unwrap();
    // A receive of our own too, in case `stream` left none posted.
    b.post_recv(u64::MAX, &[ViSeg::new(&rb, 0, 4096)]).unwrap();
    for k in 0..100u64 {
        a.post_send(k, &[ViSeg::new(&ra, 0, 8)]).unwrap();
        assert_eq!(a.send_wait(T).unwrap().status, Ok(8));
        if let Ok(c) = b.recv_wait(Some(Duration::from_millis(100))) {
            assert!(c.id == got || c.id == u64::MAX, "the fence lands next");
            assert_eq!(c.status, Ok(8));
            return k;
        }
    }
    panic!("no fence arrived in 100 tries");
}

#[test]
fn reliable_levels_repair_a_lossy_wire() {
    // 2 % of the datagrams each engine sends are dropped.
    let (_ea, sa) = engine(20_000);
    let (_eb, sb) = engine(20_000);
    for (k, r) in RELIABLE.into_iter().enumerate() {
        let (mut a, mut b) = connect(&sa, &sb, 200 + k as u64, r);
        assert_eq!(stream(&sa, &sb, &mut a, &mut b, 3000, true), 3000);
        assert!(counter(&mut a, "retransmits") > 0);
        assert!(counter(&mut b, "out_of_order") + counter(&mut b, "duplicates") > 0);
    }
}

#[test]
fn a_message_with_no_receive_posted_is_held_at_the_receiving_engine() {
    let (_ea, sa) = engine(0);
    let (_eb, sb) = engine(0);
    let (mut a, mut b) = connect(&sa, &sb, 300, Reliability::ReliableDelivery);
    let ra = sa.register_memory(1 << 20).unwrap();
    let rb = sb.register_memory(1 << 20).unwrap();
    // More than the receiver holds: the sender is held back, nothing lost.
    for i in 0..200usize {
        ra.write(i * 1024, &pattern(i, 1024));
        a.post_send(i as u64, &[ViSeg::new(&ra, i * 1024, 1024)])
            .unwrap();
    }
    thread::sleep(Duration::from_millis(100));
    let mut done = 0;
    while a.send_done().is_some() {
        done += 1;
    }
    assert!(done < 200, "every send completed with no receive posted");
    assert_eq!(a.state(), ViState::Connected);
    for i in 0..200usize {
        b.post_recv(i as u64, &[ViSeg::new(&rb, i * 1024, 1024)])
            .unwrap();
    }
    for i in 0..200usize {
        let c = b.recv_wait(T).unwrap();
        assert_eq!(
            c,
            ViCompletion {
                id: i as u64,
                status: Ok(1024)
            }
        );
        let mut v = vec![0u8; 1024];
        rb.read(i * 1024, &mut v);
        assert_eq!(v, pattern(i, 1024));
    }
    while done < 200 {
        assert_eq!(a.send_wait(T).unwrap().status, Ok(1024));
        done += 1;
    }
    // The strict option breaks instead.
    let server = sb.vi_listen(301).unwrap();
    let host = sb.udp_addr();
    let c = sa.clone();
    let t = thread::spawn(move || c.vi_connect(host, 301, &ViAttributes::default(), T));
    let mut s = server
        .accept(
            &ViAttributes {
                strict_rnr: true,
                ..ViAttributes::default()
            },
            T,
        )
        .unwrap();
    let mut c = t.join().unwrap().unwrap();
    c.post_send(1, &[ViSeg::new(&ra, 0, 10)]).unwrap();
    let e = c.send_wait(T).unwrap();
    assert_eq!(e.status, Err(ViError::ReceiverNotReady));
    s.post_recv(1, &[ViSeg::new(&rb, 0, 10)]).unwrap();
    assert_eq!(
        s.recv_wait(T).unwrap().status,
        Err(ViError::ReceiverNotReady)
    );
}

#[test]
fn closing_one_end_breaks_the_other() {
    let (_ea, sa) = engine(0);
    let (_eb, sb) = engine(0);
    let (mut a, mut b) = connect(&sa, &sb, 400, Reliability::ReliableDelivery);
    let rb = sb.register_memory(4096).unwrap();
    b.post_recv(1, &[ViSeg::new(&rb, 0, 64)]).unwrap();
    // The engines read registered memory only: a send from plain memory
    // is refused, and nothing is sent.
    assert!(!a.send_copied(9, b"plain"));
    a.close().unwrap();
    assert_eq!(
        b.recv_wait(T).unwrap(),
        ViCompletion {
            id: 1,
            status: Err(ViError::PeerGone)
        }
    );
    assert_eq!(b.state(), ViState::Error(ViError::PeerGone));
    // Nobody listening there.
    let e = sa
        .vi_connect(sb.udp_addr(), 999, &ViAttributes::default(), T)
        .unwrap_err();
    assert_eq!(
        unet::via::engine_code(&e),
        Some(ErrorCode::NoListener),
        "{e}"
    );
}

/// Messages that reached the receiving engine before any receive was
/// posted are not lost when the sender then closes its VI: they are placed
/// as receives come, in order, and only then does the VI break with the
/// peer gone (the sender's sends completed: they did arrive).
#[test]
fn messages_held_when_the_peer_closes_are_still_delivered() {
    let (_ea, sa) = engine(0);
    let (_eb, sb) = engine(0);
    for r in RELIABLE {
        let tag = 60 + r as u64;
        let (mut a, mut b) = connect(&sa, &sb, tag, r);
        let ra = sa.register_memory(4096).unwrap();
        for i in 0..3u64 {
            ra.write(i as usize * 100, &pattern(i as usize, 100));
            a.post_send(i, &[ViSeg::new(&ra, i as usize * 100, 100)])
                .unwrap();
        }
        if r == Reliability::ReliableDelivery {
            // Each send completes once it reached engine B (held there).
            for i in 0..3u64 {
                let c = a.send_wait(T).unwrap();
                assert_eq!((c.id, c.status), (i, Ok(100)), "{r:?}");
            }
        } else {
            // Reception: nothing is placed yet; give the messages time
            // to arrive at B.
            thread::sleep(Duration::from_millis(200));
        }
        a.close().unwrap();
        thread::sleep(Duration::from_millis(100));
        let rb = sb.register_memory(4096).unwrap();
        for i in 0..3u64 {
            b.post_recv(i, &[ViSeg::new(&rb, i as usize * 100, 100)])
                .unwrap();
        }
        for i in 0..3u64 {
            let c = b.recv_wait(T).unwrap();
            assert_eq!((c.id, c.status), (i, Ok(100)), "{r:?}: message {i}");
            let mut got = [0u8; 100];
            rb.read(i as usize * 100, &mut got);
            assert_eq!(got.to_vec(), pattern(i as usize, 100), "{r:?}");
        }
        // Then the break, with the reason; nothing more completes as
        // success.
        b.post_recv(9, &[ViSeg::new(&rb, 0, 100)]).unwrap();
        let c = b.recv_wait(T).unwrap();
        assert_eq!((c.id, c.status), (9, Err(ViError::PeerGone)), "{r:?}");
        assert_eq!(b.state(), ViState::Error(ViError::PeerGone));
    }
}

/// A receiver that takes a message and closes at once still acknowledges
/// it first: the sender's send completes as delivered, not with the peer
/// gone (the acknowledgement would otherwise wait for its delay and be
/// overtaken by the close).
#[test]
fn a_message_taken_just_before_the_close_completes_as_sent() {
    let (_ea, sa) = engine(0);
    let (_eb, sb) = engine(0);
    for (k, r) in RELIABLE.into_iter().enumerate() {
        let (mut a, mut b) = connect(&sa, &sb, 500 + k as u64, r);
        let ra = sa.register_memory(4096).unwrap();
        let rb = sb.register_memory(4096).unwrap();
        b.post_recv(1, &[ViSeg::new(&rb, 0, 64)]).unwrap();
        a.post_send(2, &[ViSeg::new(&ra, 0, 1)]).unwrap();
        assert_eq!(b.recv_wait(T).unwrap().status, Ok(1));
        b.close().unwrap();
        let c = a.send_wait(T).unwrap();
        assert_eq!((c.id, c.status), (2, Ok(1)), "{r:?}");
    }
}
