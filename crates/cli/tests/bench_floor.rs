//! `unet bench floor --quick`: every mode runs both tests, its rows carry
//! the figures, the host floor of each run and ratios to the `threads`
//! mode that agree with the figures. Behaviour only, no timing thresholds.

mod tools;

use std::process::Command;

use serde_json::Value;
use tools::{close, json_rows, num};

const MODES: [&str; 5] = [
    "threads",
    "threads-two-maps",
    "fork",
    "fork-own-map",
    "exec",
];

fn floor(args: &[&str]) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_unet"))
        .args(["bench", "floor", "--quick", "--json"])
        .args(args)
        .output()
        .expect("run unet");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "unet bench floor failed: {stderr}");
    json_rows(&out.stdout)
}

#[test]
fn every_mode_has_a_pingpong_and_a_stream_row() {
    let rows = floor(&[]);
    assert_eq!(rows.len(), 2 * MODES.len(), "{rows:?}");
    let find = |test: &str, mode: &str| {
        rows.iter()
            .find(|r| r["test"] == test && r["mode"] == mode)
            .unwrap_or_else(|| panic!("no {test} row for {mode}"))
    };
    for test in ["pingpong", "stream"] {
        let key = if test == "pingpong" {
            "median_us"
        } else {
            "msgs_per_s"
        };
        let reference = num(find(test, "threads"), key);
        for mode in MODES {
            let r = find(test, mode);
            assert_eq!(r["bench"], "floor");
            assert_eq!(num(r, "size"), 64.0);
            assert_eq!(r["reference"], "threads");
            let v = num(r, key);
            assert!(v > 0.0, "{r}");
            // One run (--quick), with the host floor taken before it.
            let runs = r["runs"].as_array().unwrap();
            assert_eq!(runs.len(), 1, "{r}");
            assert_eq!(r["host_floor_ns"].as_array().unwrap().len(), 1, "{r}");
            assert!(close(num(r, "ratio"), v / reference), "{r}");
            // One run each: the paired ratio is the runs' ratio.
            let ref_run = find(test, "threads")["runs"][0].as_f64().unwrap();
            let run = runs[0].as_f64().unwrap();
            assert!(close(num(r, "ratio_paired"), run / ref_run), "{r}");
            if test == "pingpong" {
                assert!(num(r, "p99_us") >= v, "{r}");
            } else {
                assert!(r["p99_us"].is_null(), "{r}");
            }
        }
        assert!(close(num(find(test, "threads"), "ratio"), 1.0));
    }
}

/// Without the `threads` mode there is no reference: the ratios are null.
#[test]
fn without_the_reference_the_ratios_are_null() {
    let rows = floor(&["--modes", "fork,exec", "--size", "8"]);
    assert_eq!(rows.len(), 4, "{rows:?}");
    for r in &rows {
        assert!(r["mode"] == "fork" || r["mode"] == "exec", "{r}");
        assert_eq!(num(r, "size"), 8.0);
        assert!(r["ratio"].is_null() && r["ratio_paired"].is_null(), "{r}");
    }
}
