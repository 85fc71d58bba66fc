//! Prometheus metrics: `unet daemon --metrics ADDR` serves, and `unet stat
//! --prometheus` prints, every counter of `unet stat --json` in the
//! Prometheus text format; a real parser (`prometheus-parse`) reads the
//! scrape, and its values agree with the JSON (equal where nothing moves
//! between the two reads, never above it for the engine's counters, which
//! only grow).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use common::*;
use prometheus_parse::{Sample, Scrape, Value};
use unet::{ChannelOptions, EndpointConfig, PathChoice, Session};

/// `GET path` on `addr`: the status line and the body.
fn get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the metrics address");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // HTTP/1.0: the answer comes whole, not in chunks.
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

fn parse(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("the Prometheus text format")
}

fn value(s: &Sample) -> f64 {
    match s.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
        _ => panic!("{} is not a single value", s.metric),
    }
}

/// The sample of `metric` whose labels include `labels`.
fn find<'a>(scrape: &'a Scrape, metric: &str, labels: &[(&str, String)]) -> Option<&'a Sample> {
    scrape.samples.iter().find(|s| {
        s.metric == metric
            && labels
                .iter()
                .all(|(k, v)| s.labels.get(k) == Some(v.as_str()))
    })
}

#[test]
fn the_scrape_parses_and_agrees_with_stat_json() {
    let mut d = Daemon::start(&["--metrics", "127.0.0.1:0", "--client-vis", "9"]);
    let line = d
        .proc
        .line_starting("unet daemon: metrics at http://", Duration::from_secs(10));
    let addr = line
        .trim()
        .trim_start_matches("unet daemon: metrics at http://")
        .trim_end_matches("/metrics")
        .to_string();

    let s = Session::connect(&d.socket).expect("connect");
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let b = s.create_endpoint(EndpointConfig::default()).unwrap();
    let engine = ChannelOptions {
        path: PathChoice::Engine,
    };
    let c = a.open_channel(b.addr(), engine).unwrap();
    a.open_channel(b.addr(), engine).unwrap();
    a.close_channel(c).unwrap();

    let (status, body) = get(&addr, "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    let scrape = parse(&body);
    let st = d.stat();

    // Types and names: counters end in _total, levels are gauges.
    let me = std::process::id().to_string();
    let ea = endpoint_stats(&st, a.id()).expect("endpoint a");
    let mine = [("endpoint", a.id().to_string()), ("pid", me.clone())];
    let opened = find(&scrape, "unet_endpoint_channels_opened_total", &mine)
        .unwrap_or_else(|| panic!("channels_opened of endpoint a in\n{body}"));
    assert!(matches!(opened.value, Value::Counter(_)), "{body}");
    assert_eq!(value(opened), 2.0);
    let open = find(&scrape, "unet_endpoint_channels_open", &mine).expect("channels_open");
    assert!(matches!(open.value, Value::Gauge(_)), "{body}");
    assert_eq!(value(open), 1.0);

    // Every number of the endpoint, its client counters included, is there
    // with the JSON's value.
    let mut checked = 0;
    for (k, v) in ea.as_object().unwrap() {
        let (section, fields) = match v {
            serde_json::Value::Object(o) => ("unet_endpoint_client", o.clone()),
            _ => (
                "unet_endpoint",
                [(k.clone(), v.clone())].into_iter().collect(),
            ),
        };
        for (name, n) in fields {
            if ["id", "pid", "engine_id", "version"].contains(&name.as_str()) {
                continue;
            }
            let Some(n) = n.as_f64() else { continue };
            let counter = format!("{section}_{name}_total");
            let gauge = format!("{section}_{name}");
            let s = find(&scrape, &counter, &mine)
                .or_else(|| find(&scrape, &gauge, &mine))
                .unwrap_or_else(|| panic!("{gauge} of endpoint a in\n{body}"));
            assert_eq!(value(s), n, "{gauge}");
            checked += 1;
        }
    }
    assert!(checked > 40, "only {checked} endpoint numbers");

    // The engine's counters only grow: the scrape came first.
    for (k, v) in st["engine"].as_object().unwrap() {
        let s = find(&scrape, &format!("unet_engine_{k}_total"), &[])
            .unwrap_or_else(|| panic!("engine counter {k} in\n{body}"));
        assert!(value(s) <= v.as_f64().unwrap(), "{k}");
    }
    let vis = find(&scrape, "unet_limit_client_vis", &[]).expect("the VI limit");
    assert_eq!(value(vis), 9.0);
    let p = find(&scrape, "unet_process_endpoints", &[("pid", me.clone())]).expect("this process");
    assert_eq!(value(p), 2.0);

    // The same from `unet stat --prometheus`.
    let out = Command::new(unet_bin())
        .arg("stat")
        .arg("--socket")
        .arg(&d.socket)
        .arg("--prometheus")
        .output()
        .unwrap();
    assert!(out.status.success());
    let printed = parse(&String::from_utf8(out.stdout).unwrap());
    let again = find(&printed, "unet_endpoint_channels_opened_total", &mine).expect("printed");
    assert_eq!(value(again), 2.0);
    assert_eq!(printed.samples.len(), scrape.samples.len());

    let (status, _) = get(&addr, "/other");
    assert!(status.contains(" 404 "), "{status}");
    drop((a, b, s));
    d.stop();
}

#[test]
fn an_address_in_use_stops_the_daemon_with_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = taken.local_addr().unwrap().to_string();
    let dir = TempDir::new("metrics-busy");
    let out = Command::new(unet_bin())
        .arg("daemon")
        .arg("--socket")
        .arg(dir.0.join("unet.sock"))
        .args(["--metrics", &at])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("cannot serve metrics on {at}")),
        "{err}"
    );
}
