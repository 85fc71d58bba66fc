//! One process cannot take the engine's file descriptors from the others
//! (issue 39, defect 6). The engine keeps a descriptor open per region,
//! and a one-byte region was charged one byte with no count of regions
//! per process: 1 011 one-byte regions took a daemon at the usual 1 024
//! descriptors to its limit, and other clients then failed to connect.
//! Now a region is charged whole pages, a process holds at most
//! `client_regions` regions (refused with `ErrorCode::ObjectQuota`,
//! counted), and when the engine's free descriptors are down to
//! `fd_reserve` new objects are refused (counted) while new clients still
//! connect. The daemons here run at 256 descriptors, so that the limits
//! are reached quickly.

mod common;

use std::time::{Duration, Instant};

use common::*;
use unet::{ChannelOptions, EndpointConfig, Error, ErrorCode, PathChoice, Session};

/// The daemons' descriptor limit (soft and hard).
const NOFILE: u64 = 256;

/// The honest child: connects, makes two endpoints and an engine-path
/// channel each way, and makes 100 round trips.
#[test]
fn child() {
    let Some(role) = role() else { return };
    assert_eq!(role, "honest", "unknown role");
    watchdog(60);
    let s = Session::connect(env("UNET_SOCKET")).unwrap_or_else(|e| fail(&format!("connect: {e}")));
    let cfg = EndpointConfig::default();
    let mut a = s
        .create_endpoint(cfg)
        .unwrap_or_else(|e| fail(&format!("endpoint: {e}")));
    let mut b = s
        .create_endpoint(cfg)
        .unwrap_or_else(|e| fail(&format!("endpoint: {e}")));
    let engine = ChannelOptions {
        path: PathChoice::Engine,
    };
    let ab = a
        .open_channel(b.addr(), engine)
        .unwrap_or_else(|e| fail(&format!("channel: {e}")));
    let ba = b
        .open_channel(a.addr(), engine)
        .unwrap_or_else(|e| fail(&format!("channel: {e}")));
    let t = Duration::from_secs(5);
    let mut buf = [0u8; 64];
    for _ in 0..100 {
        a.send_blocking(ab, b"ping", t)
            .unwrap_or_else(|e| fail(&format!("send: {e:?}")));
        b.recv(&mut buf, Some(t))
            .unwrap_or_else(|e| fail(&format!("recv: {e:?}")));
        b.send_blocking(ba, b"pong", t)
            .unwrap_or_else(|e| fail(&format!("send: {e:?}")));
        a.recv(&mut buf, Some(t))
            .unwrap_or_else(|e| fail(&format!("recv: {e:?}")));
    }
    say("OK");
}

/// Another process connects to `d` and makes its round trips.
fn honest_process_is_served(d: &Daemon) {
    let mut c = child_cmd(None, "honest");
    c.env("UNET_SOCKET", &d.socket);
    let mut p = Proc::spawn("honest", c);
    p.expect("OK", Duration::from_secs(30));
    p.finish(Duration::from_secs(10));
}

/// Make one-byte regions on `s` until one is refused: how many were
/// made, and the refusal.
fn regions_until_refused(s: &Session, most: usize) -> (Vec<unet::MemRegion>, Error) {
    let mut held = Vec::new();
    let start = Instant::now();
    loop {
        match s.register_memory(1) {
            Ok(r) => held.push(r),
            Err(e) => return (held, e),
        }
        assert!(
            held.len() <= most,
            "{} regions, none refused (the daemon has {NOFILE} descriptors)",
            held.len()
        );
        assert!(start.elapsed() < Duration::from_secs(30), "too slow");
    }
}

#[test]
fn small_regions_stop_at_the_process_cap_and_others_still_connect() {
    let d = Daemon::start_with_nofile(NOFILE, &["--client-regions", "100"]);
    let s = Session::connect(&d.socket).expect("connect");
    let (held, e) = regions_until_refused(&s, 4 * NOFILE as usize);
    assert!(
        matches!(e, Error::Quota(ErrorCode::ObjectQuota)),
        "the refusal: {e}"
    );
    assert_eq!(held.len(), 100, "the count reached is the cap");
    let st = d.stat();
    assert_eq!(engine_counter(&st, "quota_refused_regions"), 1, "{st}");
    honest_process_is_served(&d);
    // Closing one makes room for one.
    drop(held.into_iter().next());
    std::thread::sleep(Duration::from_millis(100));
    s.register_memory(1).expect("room for one again");
}

#[test]
fn the_engines_last_descriptors_are_kept_for_others() {
    let d = Daemon::start_with_nofile(
        NOFILE,
        &["--client-regions", "100000", "--fd-reserve", "64"],
    );
    let s = Session::connect(&d.socket).expect("connect");
    let (held, e) = regions_until_refused(&s, NOFILE as usize);
    assert!(
        matches!(e, Error::Engine(ErrorCode::NoResources)),
        "the refusal: {e}"
    );
    // The engine's own descriptors (listener, poller, doorbells,
    // counters, the session) come first; the reserve is left.
    assert!(
        held.len() <= (NOFILE - 64) as usize,
        "{} regions took the reserve",
        held.len()
    );
    let st = d.stat();
    assert!(engine_counter(&st, "fd_reserve_refused") >= 1, "{st}");
    // Another process connects and works on what was kept.
    honest_process_is_served(&d);
    honest_process_is_served(&d);
    drop(held);
}

/// A one-byte region is charged a page: a 64 KiB memory quota holds 16
/// of them.
#[test]
fn a_one_byte_region_is_charged_a_page() {
    let d = Daemon::start(&["--client-memory", "65536"]);
    let s = Session::connect(&d.socket).expect("connect");
    let (held, e) = regions_until_refused(&s, 65_536);
    assert!(
        matches!(e, Error::Quota(ErrorCode::QuotaExceeded)),
        "the refusal: {e}"
    );
    assert_eq!(held.len(), 16);
}

/// UDM jobs and nodes cost the engine descriptors too (a job's segment,
/// a node's segment and virtual buffer): a process that holds only jobs
/// and nodes is held to the reserve as one that holds regions is, and
/// others still work on what is kept.
#[test]
fn udm_jobs_and_nodes_do_not_take_the_reserve() {
    let d = Daemon::start_with_nofile(
        NOFILE,
        &[
            "--client-udm-jobs",
            "100000",
            "--client-udm-nodes",
            "100000",
            "--client-memory",
            "1G",
            "--fd-reserve",
            "64",
        ],
    );
    let s = Session::connect(&d.socket).expect("connect");
    let small = unet::udm::JobConfig {
        nodes: 2,
        buffer_size: 4096,
        ..unet::udm::JobConfig::default()
    };
    let mut nodes = Vec::new();
    let start = Instant::now();
    let e = loop {
        let made = s
            .udm_create_job(&small)
            .and_then(|t| s.udm_join(t, 0).map(|n| nodes.push(n)));
        if let Err(e) = made {
            break e;
        }
        assert!(
            nodes.len() <= NOFILE as usize,
            "{} jobs joined, none refused (the daemon has {NOFILE} descriptors)",
            nodes.len()
        );
        assert!(start.elapsed() < Duration::from_secs(30), "too slow");
    };
    assert!(
        matches!(e, Error::Engine(ErrorCode::NoResources)),
        "the refusal: {e}"
    );
    let refused = engine_counter(&d.stat(), "fd_reserve_refused");
    assert!(
        refused >= 1,
        "{} jobs joined, none refused by the reserve",
        nodes.len()
    );
    honest_process_is_served(&d);
    drop(nodes);
}
