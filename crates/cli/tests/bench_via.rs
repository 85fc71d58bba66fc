//! `unet bench via --quick`: the rows are there, one per point, with their
//! keys, positive figures and ratios consistent with them, on the local
//! path and through two engines (beside TCP, against the unreliable level,
//! and under seeded loss); the table, the help, and bad options refused.
//! Behaviour only, no timing thresholds (the figures are shown by running
//! the bench).

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

/// Checks one local row's fields; `runs` is how many pairs were asked for.
fn check(r: &Value, bench: &str, size: f64, reliability: &str, runs: usize) {
    check_on(r, "local", "direct", bench, size, reliability, runs)
}

fn check_on(
    r: &Value,
    path: &str,
    baseline: &str,
    bench: &str,
    size: f64,
    reliability: &str,
    runs: usize,
) {
    assert_eq!(r["bench"], bench, "{r}");
    assert_eq!(r["path"], path, "{r}");
    assert_eq!(num(r, "size"), size, "{r}");
    assert_eq!(r["reliability"], reliability, "{r}");
    assert_eq!(r["baseline"], baseline, "{r}");
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

    for bad in [
        &["--path", "elsewhere"][..],
        &["--loss-pct", "60"],
        &["--loss-pct", "some"],
        &["--sizes", "512K"],
        &["--runs", "0"],
        &["--reliability", "maybe"],
    ] {
        let out = unet_bench(bad);
        assert!(!out.status.success(), "{bad:?} accepted");
    }
}

/// Through two engines over UDP loopback: each level beside TCP, the
/// reliable ones also against the unreliable one run beside them, and the
/// reliable streams again under 1 % seeded loss against themselves without.
#[test]
fn remote_rows_beside_tcp_against_unreliable_and_under_loss() {
    let rows = rows(&[
        "--path",
        "remote",
        "--sizes",
        "64",
        "--stream-sizes",
        "4K",
        "--runs",
        "2",
    ]);
    assert_eq!(rows.len(), 5, "{rows:?}");
    check_on(
        &rows[0],
        "remote",
        "tcp",
        "via-pingpong",
        64.0,
        "unreliable",
        2,
    );
    check_on(
        &rows[1],
        "remote",
        "tcp",
        "via-pingpong",
        64.0,
        "delivery",
        2,
    );
    check_on(
        &rows[2],
        "remote",
        "tcp",
        "via-stream",
        4096.0,
        "unreliable",
        2,
    );
    check_on(
        &rows[3],
        "remote",
        "tcp",
        "via-stream",
        4096.0,
        "delivery",
        2,
    );
    check_on(
        &rows[4],
        "remote",
        "no loss",
        "via-stream",
        4096.0,
        "delivery",
        2,
    );
    // The unreliable rows are the reference; the reliable ones say how
    // they compare with it, consistently with the two medians.
    for r in [&rows[0], &rows[2], &rows[4]] {
        assert!(r["vs_unreliable"].is_null(), "{r}");
    }
    for (rel, unrel) in [(&rows[1], &rows[0]), (&rows[3], &rows[2])] {
        let v = num(rel, "vs_unreliable");
        assert!(close(v, num(rel, "value") / num(unrel, "value")), "{rel}");
        assert!(num(rel, "vs_unreliable_paired") > 0.0, "{rel}");
        assert_eq!(rel["baseline_value"], unrel["baseline_value"], "{rel}");
    }
    // The lossy stream's baseline is the loss-free stream of its level.
    assert_eq!(num(&rows[4], "loss_pct"), 1.0, "{}", rows[4]);
    assert!(rows[3]["loss_pct"].is_null());
    assert_eq!(rows[4]["baseline_value_runs"], rows[3]["value_runs"]);
}
