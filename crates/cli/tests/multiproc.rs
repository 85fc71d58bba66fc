//! A daemon and two client processes exchange 100 000 messages of mixed
//! sizes (1 byte to 64 KiB) on each path — direct, engine, and UDP between
//! two daemons — every byte, the order and the count checked by the
//! receiver.

mod common;

use std::time::{Duration, Instant};

use common::*;

const COUNT: u64 = 100_000;

#[test]
fn child() {
    if let Some(role) = role() {
        assert!(stream_role(&role), "unknown role {role}");
    }
}

fn counter(st: &serde_json::Value, id: u32, name: &str) -> u64 {
    endpoint_stats(st, id).unwrap_or_else(|| panic!("endpoint {id} not live in {st}"))[name]
        .as_u64()
        .unwrap_or_else(|| panic!("{name} missing"))
}

fn local(path: &str) {
    let t = Instant::now();
    let mut d = Daemon::start(&[]);
    let mut x = run_stream((None, None), &d.socket, &d.socket, None, path, COUNT);
    let st = d.stat();
    x.sender.finish(Duration::from_secs(10));
    x.receiver.finish(Duration::from_secs(10));
    d.stop();
    eprintln!(
        "{path}: {COUNT} messages, {} bytes in {:?}",
        x.bytes,
        t.elapsed()
    );
    assert_eq!(engine_counter(&st, "endpoints_created"), 2, "{st}");
    let engine_tx = counter(&st, x.sender_id, "tx_msgs");
    let engine_rx = counter(&st, x.receiver_id, "rx_msgs");
    if path == "direct" {
        assert_eq!(engine_tx, 0, "the direct path bypasses the engine: {st}");
        assert_eq!(engine_rx, 0, "{st}");
        assert_eq!(engine_counter(&st, "direct_conns"), 1, "{st}");
        // The client library counts the direct path itself, in its
        // endpoint's header, as each message goes; the engine copies the
        // counts into `unet stat`.
        let client = |id: u32, name: &str| {
            endpoint_stats(&st, id).unwrap()["client"][name]
                .as_u64()
                .unwrap_or_else(|| panic!("client.{name} missing in {st}"))
        };
        assert_eq!(client(x.sender_id, "direct_tx_msgs"), COUNT, "{st}");
        assert_eq!(client(x.receiver_id, "direct_rx_msgs"), COUNT, "{st}");
        assert_eq!(client(x.receiver_id, "direct_rx_bytes"), x.bytes, "{st}");
        assert_eq!(client(x.receiver_id, "direct_rx_bad"), 0, "{st}");
    } else {
        assert_eq!(engine_tx, COUNT, "{st}");
        assert_eq!(engine_rx, COUNT, "{st}");
    }
    for id in [x.sender_id, x.receiver_id] {
        assert_eq!(counter(&st, id, "rx_drop_no_buffer"), 0, "{st}");
        assert_eq!(counter(&st, id, "rx_drop_ring_full"), 0, "{st}");
    }
}

#[test]
fn direct_path_between_processes() {
    local("direct");
}

#[test]
fn engine_path_between_processes() {
    local("engine");
}

#[test]
fn udp_path_between_daemons() {
    let t = Instant::now();
    let mut a = Daemon::start(&["--udp", "127.0.0.1:0"]);
    let mut b = Daemon::start(&["--udp", "127.0.0.1:0"]);
    let mut x = run_stream((None, None), &b.socket, &a.socket, b.udp, "auto", COUNT);
    let sa = a.stat();
    let sb = b.stat();
    x.sender.finish(Duration::from_secs(10));
    x.receiver.finish(Duration::from_secs(10));
    a.stop();
    b.stop();
    eprintln!(
        "udp: {COUNT} messages, {} bytes in {:?}",
        x.bytes,
        t.elapsed()
    );
    assert!(engine_counter(&sa, "wire_tx_datagrams") > COUNT, "{sa}");
    assert!(engine_counter(&sb, "wire_reassembled") > 0, "{sb}");
    assert_eq!(counter(&sa, x.sender_id, "wire_tx_msgs"), COUNT, "{sa}");
    assert_eq!(counter(&sb, x.receiver_id, "wire_rx_msgs"), COUNT, "{sb}");
}
