//! A long-lived server whose direct peers come and go must not keep their
//! connections: each dead connection's segment (a descriptor and a
//! mapping of about 2 MiB) has to be released, whether the server closes
//! the channel when it learns the peer is gone or only reads what the
//! peer left.
//!
//! This file holds one test so that nothing else runs in the process
//! while it counts the process's descriptors and shared mappings.

use std::time::{Duration, Instant};

use unet::{ChannelOptions, EndpointConfig, Engine, EngineConfig, Event, PathChoice, Session};

/// The process's open descriptors.
fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The process's memfd mappings (every unet segment is a memfd): their
/// count, their size, and how much of them is resident, in bytes.
fn shared_mappings() -> (usize, u64, u64) {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let (mut n, mut size, mut rss) = (0, 0u64, 0u64);
    let mut in_memfd = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            in_memfd = line.contains("/memfd:");
            if in_memfd {
                let (a, b) = first.split_once('-').unwrap();
                let a = u64::from_str_radix(a, 16).unwrap();
                let b = u64::from_str_radix(b, 16).unwrap();
                n += 1;
                size += b - a;
            }
        } else if in_memfd && first == "Rss:" {
            let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
            rss += kb * 1024;
        }
    }
    (n, size, rss)
}

/// The next event of `ep`, waiting up to 10 s.
fn next_event(ep: &mut unet::Endpoint) -> Event {
    let t0 = Instant::now();
    loop {
        if let Some(e) = ep.poll_event() {
            return e;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no event in 10 s");
        ep.wait(Some(Duration::from_millis(100)));
    }
}

/// One peer: a session and endpoint of its own opens a direct channel to
/// the server, sends one message, and goes away. The server reads the
/// message, sees the peer gone, and (if `close`) closes the channel; if
/// not, it only reads on until the channel is found gone.
fn one_peer(engine: &Engine, server: &mut unet::Endpoint, i: u32, close: bool) {
    let session = Session::embedded(engine).unwrap();
    let mut peer = session.create_endpoint(EndpointConfig::default()).unwrap();
    let direct = ChannelOptions {
        path: PathChoice::Direct,
    };
    let ch = peer.open_channel(server.addr(), direct).unwrap();
    let msg = format!("peer {i}");
    peer.send(ch, msg.as_bytes()).unwrap();
    drop(peer);
    drop(session);

    let mut buf = [0u8; 64];
    let r = server
        .recv(&mut buf, Some(Duration::from_secs(10)))
        .unwrap_or_else(|e| panic!("peer {i}'s message: {e}"));
    assert_eq!(&buf[..r.len], msg.as_bytes(), "peer {i}'s message");
    let opened = next_event(server);
    assert!(
        matches!(opened, Event::ChannelOpened { direct: true, channel, .. } if channel == r.channel),
        "peer {i}: {opened:?}"
    );
    let gone = next_event(server);
    assert_eq!(
        gone,
        Event::PeerGone { channel: r.channel },
        "peer {i}: expected its channel gone"
    );
    if close {
        server.close_channel(r.channel).unwrap();
    } else {
        // Nothing more comes; a send on the channel says the peer is gone.
        assert!(server.try_recv(&mut buf).unwrap().is_none());
        assert_eq!(
            server.send(r.channel, b"anyone?"),
            Err(unet::SendError::PeerGone)
        );
    }
}

/// Growth allowed in mapped and resident shared memory.
const SLACK: u64 = 16 << 20;

/// 1 000 short-lived direct peers against one server endpoint (an
/// embedded engine in the same process; the server closes the channel of
/// every other peer on `PeerGone` and only reads on for the rest). After
/// a warm-up of 50 peers, the process's descriptors may grow by at most 4
/// and its memfd mappings by at most 4 in number and 16 MiB in size and
/// in resident memory over the 1 000 (what the engine, which unmaps on a
/// thread of its own, may not have unmapped yet): a leak of one
/// connection per peer would be 1 000 descriptors and about 2 GiB of
/// mappings.
#[test]
fn a_thousand_short_lived_direct_peers_leave_nothing_behind() {
    let engine = Engine::start(EngineConfig::default()).unwrap();
    let session = Session::embedded(&engine).unwrap();
    let mut server = session.create_endpoint(EndpointConfig::default()).unwrap();
    for i in 0..50 {
        one_peer(&engine, &mut server, i, i % 2 == 0);
    }
    let fds0 = fd_count();
    let (maps0, size0, rss0) = shared_mappings();
    for i in 50..1050 {
        one_peer(&engine, &mut server, i, i % 2 == 0);
    }
    // The engine unmaps a closed endpoint's segment on a thread of its
    // own: give the last few a moment.
    let t0 = Instant::now();
    let (fds1, (maps1, size1, rss1)) = loop {
        let now = (fd_count(), shared_mappings());
        let (fds, (maps, size, rss)) = now;
        let flat =
            fds <= fds0 + 4 && maps <= maps0 + 4 && size <= size0 + SLACK && rss <= rss0 + SLACK;
        if flat || t0.elapsed() > Duration::from_secs(2) {
            break now;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let report = format!(
        "descriptors {fds0} -> {fds1}; memfd mappings {maps0} -> {maps1}, \
         {size0} -> {size1} bytes mapped, {rss0} -> {rss1} bytes resident"
    );
    eprintln!("{report}");
    assert!(fds1 <= fds0 + 4, "descriptors leak: {report}");
    assert!(maps1 <= maps0 + 4, "mappings leak: {report}");
    assert!(size1 <= size0 + SLACK, "mapped memory leaks: {report}");
    assert!(rss1 <= rss0 + SLACK, "resident memory leaks: {report}");
}
