//! The daemon at its file-descriptor limit, and connections that never
//! create anything.
//!
//! With `RLIMIT_NOFILE` at 64 and 100 connections waiting, `accept`
//! failed with `EMFILE` while the listener stayed readable: the daemon
//! spun at 100 % CPU and new clients hung. It now takes such a connection
//! on a descriptor kept in reserve and closes it (counted), and serves the
//! clients it has. And one process may hold only so many connections with
//! no endpoint.

mod common;

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use common::*;
use unet::{ChannelOptions, EndpointConfig, PathChoice, Session};
use unet_abi::EngineCounter;

/// An engine counter, through a session's counters segment.
fn counter(s: &Session, c: EngineCounter) -> u64 {
    let (seg, _) = s.counters().expect("counters");
    // SAFETY: the segment starts with the counters header (mapped with its
    // full size by counters()); the values are atomics.
    let h = unsafe { seg.ptr().cast::<unet_abi::CountersHeader>().as_ref() };
    h.engine[c as usize].load(std::sync::atomic::Ordering::Relaxed)
}

/// How many of `conns` the daemon has closed (they read end-of-file).
fn closed(conns: &[OwnedFd]) -> usize {
    let mut buf = [0u8; 64];
    conns
        .iter()
        .filter(|c| {
            let mut fds = Vec::new();
            matches!(
                unet_sys::recv_packet(c.as_raw_fd(), &mut buf, &mut fds, true),
                Ok(0)
            )
        })
        .count()
}

/// `n` raw connections to the daemon (no hello, nothing sent).
fn connect_many(socket: &std::path::Path, n: usize) -> Vec<OwnedFd> {
    (0..n)
        .map(|_| unet_sys::connect_seqpacket(socket).expect("connect"))
        .collect()
}

#[test]
fn at_its_descriptor_limit_the_daemon_does_not_spin_and_serves_its_clients() {
    let d = Daemon::start_with_nofile(
        64,
        &[
            "--client-idle-connections",
            "1000",
            "--user-idle-connections",
            "1000",
        ],
    );
    // A client with two endpoints and an engine-path channel, before.
    let s = Session::connect(&d.socket).expect("connect");
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    let ch = a
        .open_channel(
            b.addr(),
            ChannelOptions {
                path: PathChoice::Engine,
            },
        )
        .unwrap();
    let conns = connect_many(&d.socket, 100);
    std::thread::sleep(Duration::from_millis(300));
    let t0 = cpu_ticks(d.pid());
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_ticks(d.pid()) - t0;
    let window = start.elapsed();
    let dropped = counter(&s, EngineCounter::ControlDropFdLimit);
    let shut = closed(&conns);
    eprintln!(
        "daemon used {used} clock ticks in {window:?} with 100 connections at a limit of 64 \
         descriptors; control_drop_fd_limit {dropped}, connections closed {shut}"
    );
    // A spinning daemon uses about 100 ticks (a whole CPU) a second.
    assert!(used <= 10, "the daemon used {used} ticks in {window:?}");
    assert!(dropped > 0, "nothing counted in control_drop_fd_limit");
    assert_eq!(shut as u64, dropped, "each connection dropped is closed");
    // The client it had is served.
    let mut buf = [0u8; 64];
    a.send_blocking(ch, b"still here", Duration::from_secs(10))
        .unwrap();
    let r = b.recv(&mut buf, Some(Duration::from_secs(10))).unwrap();
    assert_eq!(&buf[..r.len], b"still here");
    // Once connections go, new clients get in.
    drop(conns);
    std::thread::sleep(Duration::from_millis(200));
    let s2 = Session::connect(&d.socket).expect("a new client after connections left");
    s2.create_endpoint(EndpointConfig::default())
        .expect("and an endpoint");
}

#[test]
fn one_process_holds_only_so_many_idle_connections() {
    let d = Daemon::start(&["--client-idle-connections", "8"]);
    let s = Session::connect(&d.socket).expect("connect");
    let _ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    // `s` holds an endpoint: it is not idle. Of 12 idle connections, 8
    // are served and 4 closed at once.
    let conns = connect_many(&d.socket, 12);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(counter(&s, EngineCounter::ControlDropIdleLimit), 4);
    assert_eq!(closed(&conns), 4);
    let st = d.stat();
    assert_eq!(engine_counter(&st, "control_drop_idle_limit"), 4, "{st}");
}
