//! `unet bench stream --applet` and `--figure6` with the U-Net/SLE paper's
//! Figure 6 applets (StdUnet, ReceiverAck, Burst, Generate), compiled from
//! `applets/` at test time (a JDK >= 22 is needed), with tiny durations:
//! one JSON row per applet and size with every key, and the usage errors;
//! and `unet bench pingpong --figure5`. Behaviour only, no timing
//! thresholds.

mod tools;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;
use tools::{applet_source, close, json_rows, num};

const FIGURE6: [&str; 4] = ["StdUnet", "ReceiverAck", "Burst", "Generate"];

/// The Figure 6 applets, compiled once, under the build directory: kept for
/// the whole test run (the classes are shared by the tests), gone with
/// `cargo clean`.
fn classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("figure6-{}", std::process::id()));
        tools::javac(&dir, &FIGURE6.map(applet_source));
        dir
    })
}

fn class(name: &str) -> String {
    classes()
        .join(format!("{name}.class"))
        .display()
        .to_string()
}

fn stream(extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_unet"))
        .args(["bench", "stream", "--time-ms", "20", "--warmup-ms", "5"])
        .args(["--reps", "1"])
        .args(extra)
        .output()
        .expect("run unet")
}

/// All four applets in one command on `path` with `placement`: one row per
/// applet and size, in order, each complete and consistent. The engine
/// path runs `--figure6` (the command compiles the applets itself, and an
/// applet in the engine takes the engine path by default); the others name
/// the class files.
fn figure6(path: &str, placement: &str) {
    let list = FIGURE6.map(class).join(",");
    let mut args = vec!["--sizes", "64,4K", "--json"];
    if path == "engine" && placement == "engine" {
        args.push("--figure6");
    } else {
        args.extend(["--path", path, "--placement", placement]);
        args.extend(["--pattern", "burst25", "--applet", &list]);
    }
    let out = stream(&args);
    assert!(
        out.status.success(),
        "{path} {placement}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = json_rows(&out.stdout);
    assert_eq!(rows.len(), 8, "{rows:?}");
    let baseline = if path == "udp" { "raw_udp" } else { "floor" };
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["bench"], "stream");
        assert_eq!(r["applet"], FIGURE6[i / 2], "{r}");
        assert_eq!(r["placement"], placement, "{r}");
        assert_eq!(r["path"], path, "{r}");
        assert_eq!(r["baseline"], baseline, "{r}");
        assert_eq!(num(r, "burst"), 25.0, "{r}");
        let size = num(r, "size");
        assert_eq!(size, [64.0, 4096.0][i % 2], "{r}");
        for pre in ["", "baseline_"] {
            let m = num(r, &format!("{pre}msgs_per_s"));
            let g = num(r, &format!("{pre}gb_per_s"));
            assert!(m > 0.0, "{r}");
            assert!(close(g, m * size / 1e9), "{r}");
        }
        let want = num(r, "msgs_per_s") / num(r, "baseline_msgs_per_s");
        assert!(close(num(r, "ratio"), want), "{r}");
    }
}

#[test]
fn figure6_on_the_engine_path() {
    figure6("engine", "engine");
}

#[test]
fn figure6_over_udp() {
    figure6("udp", "engine");
}

#[test]
fn figure6_inline_on_the_direct_path() {
    figure6("direct", "inline");
}

#[test]
fn figure6_table_and_usage_errors() {
    let list = [class("StdUnet"), class("Burst")].join(",");
    let out = stream(&[
        "--path",
        "engine",
        "--pattern",
        "burst25",
        "--sizes",
        "64",
        "--applet",
        &list,
    ]);
    assert!(out.status.success());
    let t = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines[0].starts_with("applet"), "{t}");
    assert!(
        lines[1].starts_with("StdUnet") && lines[2].starts_with("Burst"),
        "{t}"
    );
    // Burst and ReceiverAck work in bursts of 25 only; Generate needs 16
    // bytes or more; PingPong belongs to `unet bench pingpong`.
    for (applet, args, says) in [
        ("Burst", ["--pattern", "stream", "--sizes", "64"], "burst25"),
        ("ReceiverAck", ["--burst", "10", "--sizes", "64"], "burst25"),
        (
            "Generate",
            ["--pattern", "burst25", "--sizes", "8"],
            "16 bytes",
        ),
    ] {
        let c = class(applet);
        let mut a = vec!["--path", "engine", "--applet", &c];
        a.extend(args);
        let out = stream(&a);
        assert!(!out.status.success(), "{applet} {args:?}");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(applet) && e.contains(says), "{applet}: {e}");
    }
    let out = stream(&["--figure6", "--applets-dir", "/nonexistent-applets"]);
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("StdUnet.java") && e.contains("--applets-dir"),
        "{e}"
    );
    let help = Command::new(env!("CARGO_BIN_EXE_unet"))
        .args(["bench", "stream", "--help"])
        .output()
        .unwrap();
    let h = String::from_utf8(help.stdout).unwrap();
    for w in [
        "ReceiverAck",
        "Burst",
        "Generate",
        "comma list",
        "--figure6",
    ] {
        assert!(h.contains(w), "--help names {w}:\n{h}");
    }
}

/// `unet bench pingpong --figure5`: a no-applet row, then RawUnet, StdUnet
/// and PingPong (compiled by the command), each a complete row.
#[test]
fn figure5_pingpong_rows() {
    for placement in ["engine", "inline"] {
        let out = Command::new(env!("CARGO_BIN_EXE_unet"))
            .args(["bench", "pingpong", "--figure5", "--placement", placement])
            .args(["--sizes", "64", "--reps", "1", "--iters", "200"])
            .args(["--warmup", "20", "--time-ms", "50", "--json"])
            .output()
            .expect("run unet");
        assert!(
            out.status.success(),
            "{placement}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rows: Vec<Value> = json_rows(&out.stdout);
        let path = if placement == "engine" {
            "engine"
        } else {
            "direct"
        };
        let names = [
            Value::Null,
            "RawUnet".into(),
            "StdUnet".into(),
            "PingPong".into(),
        ];
        assert_eq!(rows.len(), names.len(), "{rows:?}");
        for (r, name) in rows.iter().zip(&names) {
            assert_eq!(r["bench"], "pingpong", "{r}");
            assert_eq!(&r["applet"], name, "{r}");
            assert_eq!(r["path"], path, "{r}");
            assert_eq!(num(r, "size"), 64.0, "{r}");
            assert!(num(r, "median_us") > 0.0, "{r}");
            assert!(num(r, "p99_us") >= num(r, "median_us"), "{r}");
            let want = num(r, "median_us") / num(r, "baseline_median_us");
            assert!(close(num(r, "ratio"), want), "{r}");
        }
    }
}
