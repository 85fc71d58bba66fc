//! `unet bench spine --quick --json --svg F`: SPINE's benchmark runs end to
//! end on engines stepped in the process (javac compiles its extensions,
//! so a JDK >= 22 is needed) and reports every row, compiled and
//! interpreted, then the peer queue's and the wire's ping-pong rows, each
//! beside its baseline, the targets with whether they
//! are met, and draws the watchdog's figure. Shape only: no timing
//! thresholds (this build is not a release build, and the machine is
//! shared), but the counts it checks are exact.

#[path = "../src/jdk.rs"]
#[allow(dead_code)]
mod jdk;

use std::process::Command;

use serde_json::Value;

#[test]
fn bench_spine_reports_every_row_beside_its_baseline() {
    if let Err(e) = jdk::Jdk::find() {
        panic!(
            "this test needs a JDK >= {} to compile the extensions: {e}",
            jdk::MIN_VERSION
        );
    }
    let svg = std::env::temp_dir().join(format!("unet-bench-spine-{}.svg", std::process::id()));
    let o = Command::new(env!("CARGO_BIN_EXE_unet"))
        .args(["bench", "spine", "--quick", "--json", "--svg"])
        .arg(&svg)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run unet");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "unet bench spine failed:\n{stderr}");
    let rows: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("`{l}`: {e}")))
        .collect();
    let names: Vec<(String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["row"].as_str().unwrap().to_string(),
                r["mode"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut want = Vec::new();
    for mode in ["compiled", "interpreted"] {
        for row in ["host_null", "host_echo", "event", "invoke"] {
            want.push((row.to_string(), mode.to_string()));
        }
    }
    for mode in ["compiled", "interpreted"] {
        want.push(("watchdog_p99".into(), mode.into()));
    }
    want.push(("neighbour_rate".into(), "compiled".into()));
    // Then the peer queue's and the wire's ping-pong rows.
    for row in [
        "peer_pingpong",
        "peer_pingpong_polling",
        "wire_pingpong_64B",
    ] {
        want.push((row.into(), "compiled".into()));
    }
    assert_eq!(names, want);
    for r in &rows {
        assert!(r["value"].as_f64().is_some_and(f64::is_finite), "{r}");
        assert!(r["baseline_value"].as_f64().is_some_and(|b| b > 0.0), "{r}");
        assert!(r["ratio"].as_f64().is_some_and(|x| x > 0.0), "{r}");
    }
    let get = |row: &str, mode: &str| {
        rows.iter()
            .find(|r| r["row"] == row && r["mode"] == mode)
            .unwrap()
    };
    let invoke = get("invoke", "compiled");
    assert_eq!(invoke["target"], "<= 30 ns");
    assert!(invoke["target_met"].is_boolean());
    for mode in ["compiled", "interpreted"] {
        let w = get("watchdog_p99", mode);
        assert_eq!(w["stops"], 1000.0, "{w}");
        assert_eq!(w["baseline_value"], 10.0, "the budget: {w}");
        // Never before the budget ran out.
        assert!(w["p50_us"].as_f64().unwrap() >= 10.0, "{w}");
    }
    let n = get("neighbour_rate", "compiled");
    assert!(n["stops"].as_f64().unwrap() > 0.0, "{n}");
    let text = std::fs::read_to_string(&svg).expect("the SVG");
    let _ = std::fs::remove_file(&svg);
    assert!(text.starts_with("<svg") && text.contains("SPINE watchdog"));
}
