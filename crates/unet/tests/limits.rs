//! The limits an engine sets each client process and user: shared memory
//! counted by process over all its control connections (peer credentials),
//! and by user; endpoints counted by process, so that one process cannot
//! take every slot from the others. Each refusal is `Error::Quota` with
//! its own code, and counted.

use std::path::PathBuf;
use std::process::Command;

mod common;
use common::engine_counter;
use unet::*;
use unet_abi::EngineCounter;

/// Bytes of an endpoint of the default geometry.
fn seg() -> u64 {
    unet_abi::Layout::new(Geometry::default())
        .unwrap()
        .segment_size
}

/// The smallest endpoint.
fn small() -> EndpointConfig {
    EndpointConfig {
        geometry: Geometry {
            buffer_size: 4096,
            buffer_area_size: 4096,
            send_cap: 2,
            recv_cap: 2,
            free_cap: 2,
            event_cap: 2,
        },
        managed_buffers: false,
        ..EndpointConfig::default()
    }
}

/// The role of a child process (`UNET_LIMITS_CHILD` = the engine's
/// socket): connect, create one endpoint, report how it went through the
/// exit status (0 created, 3 refused by a quota, 4 another error).
#[test]
fn child() {
    let Some(sock) = std::env::var_os("UNET_LIMITS_CHILD") else {
        return;
    };
    let s = Session::connect(PathBuf::from(sock)).expect("connect");
    let code = match s.create_endpoint(small()) {
        Ok(_) => 0,
        Err(Error::Quota(_)) => 3,
        Err(e) => {
            eprintln!("child: {e}");
            4
        }
    };
    std::process::exit(code);
}

/// Run the child role against the engine at `sock`; its exit status.
fn child_creates(sock: &std::path::Path) -> i32 {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("UNET_LIMITS_CHILD", sock)
        .output()
        .expect("run the child");
    out.status.code().unwrap_or(-1)
}

fn socket_path(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("unet-limits-{what}-{}.sock", std::process::id()))
}

/// Item: the memory quota was per connection, so one process with two
/// sessions held twice its quota. It is per process now.
#[test]
fn one_process_is_one_memory_quota_over_all_its_connections() {
    let engine = Engine::start(EngineConfig {
        // Two endpoints of the default geometry, not three.
        client_memory: 2 * seg() + seg() / 2,
        ..Default::default()
    })
    .unwrap();
    let s1 = Session::embedded(&engine).unwrap();
    let s2 = Session::embedded(&engine).unwrap();
    let _a = s1.create_endpoint(EndpointConfig::default()).unwrap();
    let b = s2.create_endpoint(EndpointConfig::default()).unwrap();
    for s in [&s1, &s2] {
        match s.create_endpoint(EndpointConfig::default()) {
            Err(Error::Quota(ErrorCode::QuotaExceeded)) => {}
            r => panic!(
                "a third endpoint of this process, on any connection, must exceed its \
                 quota: {:?}",
                r.err()
            ),
        }
    }
    assert_eq!(engine_counter(&s1, EngineCounter::QuotaRefusedMemory), 2);
    // Closing one, on either connection, makes room on the other.
    drop(b);
    s1.create_endpoint(EndpointConfig::default())
        .expect("room again after a close");
}

/// The processes of one user share a memory limit of their own
/// (`user_memory`): refused with `UserQuota`.
#[test]
fn a_user_memory_limit_bounds_the_users_processes() {
    let engine = Engine::start(EngineConfig {
        user_memory: seg() + seg() / 2,
        ..Default::default()
    })
    .unwrap();
    let s = Session::embedded(&engine).unwrap();
    let _a = s.create_endpoint(EndpointConfig::default()).unwrap();
    match s.create_endpoint(EndpointConfig::default()) {
        Err(Error::Quota(ErrorCode::UserQuota)) => {}
        r => panic!("the user's quota is used up: {:?}", r.err()),
    }
    assert_eq!(engine_counter(&s, EngineCounter::QuotaRefusedUserMemory), 1);
    let (_, _, limits) = s.stat().unwrap();
    assert_eq!(limits.user_memory, seg() + seg() / 2);
}

/// Item: one connection could take all 256 endpoint slots, after which
/// every other client got "out of resources". A process may hold a
/// quarter of the slots by default (here 4 of 16); the rest stay
/// available to other processes.
#[test]
fn one_process_cannot_take_every_endpoint_slot() {
    let sock = socket_path("slots");
    let engine = Engine::start(EngineConfig {
        control_socket: Some(sock.clone()),
        max_endpoints: 16,
        ..Default::default()
    })
    .unwrap();
    let s = Session::embedded(&engine).unwrap();
    let mut mine = Vec::new();
    let refusal = loop {
        match s.create_endpoint(small()) {
            Ok(ep) => mine.push(ep),
            Err(e) => break e,
        }
        assert!(mine.len() <= 16, "no limit at all");
    };
    assert_eq!(mine.len(), 4, "a quarter of 16 slots: {refusal}");
    match refusal {
        Error::Quota(ErrorCode::EndpointQuota) => {}
        e => panic!("the refusal names the process's endpoint limit: {e:?}"),
    }
    assert!(refusal.to_string().contains("endpoints"), "{refusal}");
    assert_eq!(engine_counter(&s, EngineCounter::QuotaRefusedEndpoints), 1);
    // Another connection of the same process is the same process.
    let s2 = Session::embedded(&engine).unwrap();
    assert!(matches!(
        s2.create_endpoint(small()),
        Err(Error::Quota(ErrorCode::EndpointQuota))
    ));
    // Other processes can still create endpoints.
    assert_eq!(child_creates(&sock), 0, "another process gets an endpoint");
    assert_eq!(child_creates(&sock), 0, "and another");
    let (_, _, limits) = s.stat().unwrap();
    assert_eq!(limits.client_endpoints, 4);
    drop(mine);
    engine.stop();
}
