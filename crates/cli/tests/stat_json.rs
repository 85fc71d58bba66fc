//! `unet stat`: endpoints as structured records (id, pid, engine id,
//! version) rather than keys made of display strings, the channel
//! counters named for what they count, the limits in force and how close
//! each process is to them.

mod common;

use std::process::Command;

use common::*;
use unet::{ChannelOptions, EndpointConfig, PathChoice, Session};

#[test]
fn stat_json_has_structured_endpoints_and_the_limits_in_force() {
    let d = Daemon::start(&["--client-endpoints", "5", "--client-memory", "64M"]);
    let s = Session::connect(&d.socket).expect("connect");
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let b = s.create_endpoint(EndpointConfig::default()).unwrap();
    let c1 = a
        .open_channel(
            b.addr(),
            ChannelOptions {
                path: PathChoice::Engine,
            },
        )
        .unwrap();
    a.open_channel(
        b.addr(),
        ChannelOptions {
            path: PathChoice::Engine,
        },
    )
    .unwrap();
    a.close_channel(c1).unwrap();

    let st = d.stat();
    let me = std::process::id() as u64;
    let ea = endpoint_stats(&st, a.id()).unwrap_or_else(|| panic!("endpoint a in {st}"));
    assert_eq!(ea["pid"], me, "{st}");
    assert_eq!(ea["engine_id"], st["engine_id"]);
    assert!(ea["engine_id"].as_u64().is_some_and(|v| v != 0), "{st}");
    assert_eq!(ea["version"], unet_abi::VERSION, "{st}");
    assert_eq!(ea["channels_peak"], 2, "{st}");
    assert_eq!(ea["channels_open"], 1, "{st}");
    assert_eq!(ea["channels_opened"], 2, "{st}");
    assert!(ea["client"].is_object(), "{st}");
    assert_eq!(endpoints_of_pid(&st, me as u32).len(), 2, "{st}");
    assert_eq!(st["engine_pid"], d.pid(), "{st}");

    let seg = unet_abi::Layout::new(unet_abi::Geometry::default())
        .unwrap()
        .segment_size;
    assert_eq!(ea["memory_bytes"], seg, "{st}");
    let l = &st["limits"];
    assert_eq!(l["client_endpoints"], 5, "{st}");
    assert_eq!(l["client_memory"], 64u64 << 20, "{st}");
    assert!(l["user_memory"].is_null(), "no user limit: {st}");
    let p = st["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == me)
        .unwrap_or_else(|| panic!("this process in {st}"));
    assert_eq!(p["endpoints"], 2, "{st}");
    assert_eq!(p["endpoints_limit"], 5, "{st}");
    assert_eq!(p["memory_bytes"], 2 * seg, "{st}");
    assert_eq!(p["memory_limit"], 64u64 << 20, "{st}");

    // The table says the same in words.
    let out = Command::new(unet_bin())
        .args(["stat", "--socket"])
        .arg(&d.socket)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("limits:"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(&format!("pid {me} ")) && l.contains("endpoints    2 / 5")),
        "{text}"
    );
    assert!(text.contains("channels_peak"), "{text}");
}
