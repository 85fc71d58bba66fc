//! `unet bench via --quick`: the rows are there, one per point, with their
//! keys, positive figures and ratios consistent with them; the table, the
//! help, and the refusal of the remote path. Behaviour only, no timing
//! thresholds (the figures are shown by running the bench).

mod tools;

use std::process::{Command, Output};

use serde_json::Value;
use tools::{close, json_rows, num};

fn unet_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_unet"))
        .args(["bench", "via"])
        .args(args)
        .output()
        .expect("run unet")
}

/// Runs `unet bench via --quick --json ARGS`, which must succeed.
fn rows(args: &[&str]) -> Vec<Value> {
    let mut a = vec!["--quick", "--json"];
    a.extend_from_slice(args);
    let out = unet_bench(&a);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "unet bench via {a:?} failed: {stderr}"
    );
    json_rows(&out.stdout)
}

/// Checks one row's fields; `runs` is how many pairs were asked for.
fn check(r: &Value, bench: &str, size: f64, reliability: &str, runs: usize) {
    assert_eq!(r["bench"], bench, "{r}");
    assert_eq!(r["path"], "local", "{r}");
    assert_eq!(num(r, "size"), size, "{r}");
    assert_eq!(r["reliability"], reliability, "{r}");
    assert_eq!(r["baseline"], "direct", "{r}");
    let unit = if bench == "via-pingpong" {
        "us"
    } else {
        "GB/s"
    };
    assert_eq!(r["unit"], unit, "{r}");
    let (v, b) = (num(r, "value"), num(r, "baseline_value"));
    assert!(v > 0.0 && v.is_finite() && b > 0.0 && b.is_finite(), "{r}");
    let ratio = num(r, "ratio");
    assert!(ratio > 0.0 && close(ratio, v / b), "{r}");
    assert!(num(r, "ratio_paired") > 0.0, "{r}");
    assert_eq!(num(r, "runs"), runs as f64, "{r}");
    for k in ["value_runs", "baseline_value_runs"] {
        let each = r[k].as_array().unwrap_or_else(|| panic!("{k} in {r}"));
        assert_eq!(each.len(), runs, "{k}: {r}");
        assert!(
            each.iter().all(|x| x.as_f64().is_some_and(|x| x > 0.0)),
            "{k}: {r}"
        );
    }
    if bench == "via-pingpong" {
        assert!(num(r, "p99") >= v && num(r, "baseline_p99") >= b, "{r}");
        assert!(num(r, "samples") > 0.0 && num(r, "baseline_samples") > 0.0);
    } else {
        assert_eq!(num(r, "window"), 256.0, "{r}");
    }
}

#[test]
fn default_points_one_row_each() {
    let rows = rows(&[]);
    assert_eq!(rows.len(), 3, "{rows:?}");
    check(&rows[0], "via-pingpong", 64.0, "delivery", 1);
    check(&rows[1], "via-pingpong", 4096.0, "delivery", 1);
    check(&rows[2], "via-stream", 4096.0, "delivery", 1);
}

#[test]
fn every_reliability_level_with_interleaved_runs() {
    let rows = rows(&[
        "--reliability",
        "all",
        "--sizes",
        "1,64",
        "--stream-sizes",
        "1,64K",
        "--runs",
        "2",
    ]);
    assert_eq!(rows.len(), 12, "{rows:?}");
    let mut i = 0;
    for rel in ["unreliable", "delivery", "reception"] {
        for size in [1.0, 64.0] {
            check(&rows[i], "via-pingpong", size, rel, 2);
            i += 1;
        }
        for size in [1.0, 65536.0] {
            check(&rows[i], "via-stream", size, rel, 2);
            i += 1;
        }
    }
}

#[test]
fn table_help_and_refusals() {
    let out = unet_bench(&["--quick", "--sizes", "64", "--stream-sizes", "64"]);
    assert!(out.status.success());
    let t = String::from_utf8(out.stdout).unwrap();
    let mut lines = t.lines();
    let head = lines.next().unwrap();
    assert!(head.contains("baseline") && head.contains("ratio"), "{t}");
    assert_eq!(lines.clone().count(), 2, "{t}");
    assert!(
        t.contains("via-pingpong") && t.contains("via-stream"),
        "{t}"
    );
    assert!(t.contains("direct") && t.contains("GB/s"), "{t}");

    let out = unet_bench(&["--help"]);
    assert!(out.status.success());
    let h = String::from_utf8(out.stdout).unwrap();
    for opt in [
        "--sizes",
        "--stream-sizes",
        "--reliability",
        "--runs",
        "--json",
        "--quick",
        "--path",
    ] {
        assert!(h.contains(opt), "{opt}: {h}");
    }

    let out = unet_bench(&["--quick", "--path", "remote"]);
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("the remote VI path is not built yet"), "{e}");
    assert!(out.stdout.is_empty());

    for bad in [
        &["--path", "elsewhere"][..],
        &["--sizes", "512K"],
        &["--runs", "0"],
        &["--reliability", "maybe"],
    ] {
        let out = unet_bench(bad);
        assert!(!out.status.success(), "{bad:?} accepted");
    }
}
