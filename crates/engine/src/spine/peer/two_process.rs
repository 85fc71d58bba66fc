//! The peer link between two processes: this test binary, re-executed
//! with an environment variable, is the sending adapter's process. It
//! streams numbered messages; the parent checks their order and content,
//! kills it mid-stream, must report it dead within a deadline, and then
//! joins a fresh process over a new segment.

use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use unet_abi::peer::{AmHeader, PeerGeometry, AM_SRC_PEER};

use super::tests::msg;
use super::*;

/// The segment the child attaches (a `/proc/PID/fd/N` path).
const SEG: &str = "UNET_PEER_TEST_SEG";
/// How many messages the child sends (then it closes its end and exits).
const COUNT: &str = "UNET_PEER_TEST_COUNT";

const G: PeerGeometry = PeerGeometry {
    slots: 64,
    data_size: 1 << 16,
};

/// The sending process: side 0 of the segment named by `SEG`, `COUNT`
/// messages numbered in `src`. It gives up (exit 3) if the receiver dies
/// or stops taking messages.
#[test]
#[ignore = "the sending process of the two-process test, started by it"]
fn peer_child() {
    let seg = std::env::var(SEG).expect("run by the two-process test");
    let count: u64 = std::env::var(COUNT).unwrap().parse().unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(seg)
        .unwrap();
    let mut l = PeerLink::attach(file.into(), 0, PeerConfig::default()).unwrap();
    let bm = l.bulk_max();
    let (mut i, mut full) = (0u64, 0u64);
    while i < count {
        let (handler, args, bulk) = msg(i, bm);
        let h = AmHeader {
            handler,
            src_kind: AM_SRC_PEER,
            src: i as u32,
            ..AmHeader::default()
        };
        match l.push(h, &args, &bulk) {
            Ok(()) => i += 1,
            Err(PeerError::Full) => {
                full += 1;
                if full.is_multiple_of(256) {
                    if let PeerState::Dead(_) = l.check(Instant::now()) {
                        std::process::exit(3);
                    }
                    std::thread::yield_now();
                }
            }
            Err(e) => panic!("push {i}: {e:?}"),
        }
    }
}

fn spawn_sender(fd: &OwnedFd, count: u64) -> Child {
    let path = format!("/proc/{}/fd/{}", std::process::id(), fd.as_raw_fd());
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "spine::peer::two_process::peer_child",
            "--ignored",
            "--test-threads=1",
        ])
        .env(SEG, path)
        .env(COUNT, count.to_string())
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// Pop what waits, checking each message against the stream at `next`.
fn take(l: &mut PeerLink, next: &mut u64) -> usize {
    let bm = l.bulk_max();
    l.pop(64, |h, a, b| {
        let (handler, args, bulk) = msg(*next, bm);
        assert_eq!((h.src_kind, h.src), (AM_SRC_PEER, *next as u32), "order");
        assert_eq!(h.handler, handler, "message {next}");
        assert_eq!(a, &args[..], "message {next}'s arguments");
        assert_eq!(b, &bulk[..], "message {next}'s bulk data");
        *next += 1;
    })
}

/// Receive until `until` holds, waiting at most `deadline`; panics past it.
fn receive(
    l: &mut PeerLink,
    next: &mut u64,
    deadline: Duration,
    mut until: impl FnMut(&mut PeerLink, u64) -> bool,
) {
    let start = Instant::now();
    while !until(l, *next) {
        assert!(start.elapsed() < deadline, "gave up after {next} messages");
        if take(l, next) == 0 {
            l.wait(Duration::from_millis(5));
        }
    }
}

#[test]
fn a_peer_killed_mid_stream_is_reported_dead_and_a_new_link_recovers() {
    let fd = PeerLink::create(G, 1).unwrap();
    let mut rx = PeerLink::attach(fd.try_clone().unwrap(), 1, PeerConfig::default()).unwrap();
    let mut child = spawn_sender(&fd, u64::MAX);
    let mut next = 0;
    receive(&mut rx, &mut next, Duration::from_secs(60), |l, n| {
        assert_eq!(l.check(Instant::now()), PeerState::Alive);
        n >= 20_000
    });
    // The sender's process is watched through a pidfd.
    assert!(rx.death_fd().is_some() && rx.side() == 1);
    // Kill it mid-stream: it is reported dead promptly.
    child.kill().unwrap();
    let killed = Instant::now();
    // What the engine's poller would wait on: the pidfd polls readable.
    let fd = rx.death_fd().unwrap().as_raw_fd();
    assert!(unet_sys::wait_readable(fd, Some(Duration::from_secs(10))).unwrap());
    let mut state = PeerState::Alive;
    receive(&mut rx, &mut next, Duration::from_secs(10), |l, _| {
        state = l.check(Instant::now());
        state != PeerState::Alive
    });
    let noticed = killed.elapsed();
    assert_eq!(state, PeerState::Dead(Death::Exited));
    assert!(
        noticed < Duration::from_secs(2),
        "noticed after {noticed:?}"
    );
    // What it published before it died is whole and in order.
    while take(&mut rx, &mut next) > 0 {}
    let s = *rx.stats();
    assert_eq!(s.received, next);
    assert_eq!(s.drops, [0; 4], "nothing dropped");
    child.wait().unwrap();
    eprintln!("peer killed after {next} messages, noticed in {noticed:?}");

    // A fresh process over a new segment: everything arrives, then its
    // end closes.
    let fd = PeerLink::create(G, 2).unwrap();
    let mut rx = PeerLink::attach(fd.try_clone().unwrap(), 1, PeerConfig::default()).unwrap();
    let mut child = spawn_sender(&fd, 5_000);
    let mut next = 0;
    receive(&mut rx, &mut next, Duration::from_secs(60), |_, n| {
        n == 5_000
    });
    assert!(child.wait().unwrap().success());
    let mut state = PeerState::Alive;
    receive(&mut rx, &mut next, Duration::from_secs(10), |l, _| {
        state = l.check(Instant::now());
        state != PeerState::Alive
    });
    assert!(
        matches!(state, PeerState::Dead(Death::Closed | Death::Exited)),
        "{state:?}"
    );
    assert_eq!((next, rx.stats().drops), (5_000, [0; 4]));
}
