//! `unet bench router forward` (SPINE's Figure 5) runs end to end: it
//! makes its three namespaces, starts the router (on one adapter, and on
//! two over peer queues and over the UDP wire: daemons and `unet router
//! run` with the extension javac compiles) and Linux's forwarding in
//! turn, and reports a row for each beside the generator's own rate
//! and the better Linux forwarder, with the host application's CPU, and
//! draws its SVG. Shape and sense only, no timing thresholds (this build
//! is not a release build, and the machine is shared): every forwarder
//! moved packets at the loss it reports, and the router's host
//! application did nothing per packet. Needs root, `ip` and a JDK >= 22;
//! fails, never skips.

#[path = "../src/jdk.rs"]
#[allow(dead_code)]
mod jdk;

use std::process::Command;

use serde_json::Value;

#[test]
fn bench_router_forward_reports_the_router_beside_linux() {
    if let Err(e) = jdk::Jdk::find() {
        panic!(
            "this test needs a JDK >= {} to compile the router extension: {e}",
            jdk::MIN_VERSION
        );
    }
    let svg = std::env::temp_dir().join(format!("unet-bench-fwd-{}.svg", std::process::id()));
    let o = Command::new(env!("CARGO_BIN_EXE_unet"))
        .args(["bench", "router", "forward", "--json", "--reps", "1"])
        .args(["--packets", "20000", "--steps", "4", "--sizes", "64,1500"])
        .args(["--cases", "unet,unet-pci,unet-wire,linux", "--svg"])
        .arg(&svg)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run unet");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "unet bench router forward failed (it needs root and `ip`):\n{stderr}"
    );
    let rows: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("`{l}`: {e}")))
        .collect();
    let got: Vec<(u64, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["size"].as_u64().unwrap(),
                r["forwarder"].as_str().unwrap(),
            )
        })
        .collect();
    let mut want = Vec::new();
    for size in [64, 1500] {
        for f in ["unet", "unet-pci", "unet-wire", "linux"] {
            want.push((size, f));
        }
    }
    assert_eq!(got, want, "{rows:?}");
    for r in &rows {
        assert_eq!(r["figure"], "spine5", "{r}");
        assert_eq!(r["routes"], 1000, "{r}");
        let rate = r["rate_pps"].as_f64().unwrap();
        assert!(rate > 0.0, "nothing forwarded below the loss limit: {r}");
        assert!(r["generator_pps"].as_f64().unwrap() > 0.0, "{r}");
        // The generator sends over AF_XDP where the kernel gives it (as
        // the ports do: `spine_port.rs` checks theirs).
        assert_eq!(r["generator_tx"], "af_xdp", "{r}");
        let loss = r["loss_pct"][0].as_f64().unwrap();
        assert!(loss < 0.5, "{r}");
        let linux = r["linux_best_pps"].as_f64().unwrap();
        let ratio = r["ratio_to_linux"].as_f64().unwrap();
        assert!((ratio - rate / linux).abs() < 1e-9 * ratio.max(1.0), "{r}");
        if r["forwarder"] != "linux" {
            // The host application serves the host path only: a share of
            // a core far below one packet's worth of work each.
            let host = r["host_cpu_pct"].as_f64().unwrap();
            assert!(host < 5.0, "the host application used {host} % CPU: {r}");
            assert!(r["adapter_cpu_pct"].as_f64().unwrap() > 0.0, "{r}");
            // The adapters' work a frame forwarded: some, and less than a
            // millisecond.
            let ns = r["adapter_ns_per_packet"].as_f64().unwrap();
            assert!(ns > 0.0 && ns < 1e6, "{r}");
            // Two adapters take turns on one thread of one daemon.
            let place = r["placement"].as_str().unwrap();
            assert_eq!(
                place.ends_with("both adapters core 1, one thread"),
                r["forwarder"] != "unet",
                "{r}"
            );
        } else {
            assert!(r["host_cpu_pct"].is_null(), "{r}");
            assert!(r["adapter_ns_per_packet"].is_null(), "{r}");
        }
    }
    let text = std::fs::read_to_string(&svg).expect("the SVG");
    let _ = std::fs::remove_file(&svg);
    assert!(
        text.contains("<svg") && text.contains("SPINE Figure 5"),
        "{text}"
    );
    assert!(
        text.contains("PCI (paper"),
        "the paper's rates are not drawn"
    );
}

/// `unet bench router graph` (SPINE's Figure 6): the router's event
/// graph under load, each packet a message from its frame taken in to
/// its frame sent, with the period and latency beside the paper's.
#[test]
fn bench_router_graph_follows_packets_through_the_router() {
    let svg = std::env::temp_dir().join(format!("unet-bench-g6-{}.svg", std::process::id()));
    let o = Command::new(env!("CARGO_BIN_EXE_unet"))
        .args(["bench", "router", "graph", "--json", "--rate", "20000"])
        .args(["--ms", "20", "--svg"])
        .arg(&svg)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run unet");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "unet bench router graph failed:\n{stderr}"
    );
    let r: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(r["figure"], "spine6", "{r}");
    // 20 ms at 20 000 packets a second: about 400 packets, each its own
    // message of three events (taken in, the handler, sent).
    let msgs = r["messages"].as_u64().unwrap();
    assert!((100..=1000).contains(&msgs), "{r}");
    assert!(r["events"].as_u64().unwrap() >= 3 * msgs, "{r}");
    assert_eq!(r["paper_period_us"], 55.0, "{r}");
    assert_eq!(r["paper_latency_us"], 100.0, "{r}");
    assert!(r["latency"]["median_ns"].as_u64().unwrap() > 0, "{r}");
    assert!(r["events_us_per_packet"].as_f64().unwrap() > 0.0, "{r}");
    let text = std::fs::read_to_string(&svg).expect("the SVG");
    let _ = std::fs::remove_file(&svg);
    assert!(
        text.contains("<svg") && text.contains("onFrame"),
        "no handler drawn"
    );
}
