//! `unet bench overhead --quick --json`: the Figure 7 breakdown runs end to
//! end on engines stepped in the process (javac compiles the micro applets
//! and RawUnet, so a JDK >= 22 is needed) and reports every step, both
//! directions, both sizes, with and without an applet, with the applets
//! compiled and interpreted. Shape only: no timing thresholds.

#[path = "../src/jdk.rs"]
#[allow(dead_code)]
mod jdk;

use std::process::Command;

use serde_json::Value;

fn require_jdk() {
    if let Err(e) = jdk::Jdk::find() {
        panic!(
            "this test needs a JDK >= {} to compile the applets: {e}",
            jdk::MIN_VERSION
        );
    }
}

/// Run `unet bench overhead --quick --json` with `extra` arguments; its
/// rows.
fn quick_json(extra: &[&str]) -> Vec<Value> {
    // From a directory outside the checkout: the command finds applets/
    // and the SDK through its own source location.
    let o = Command::new(env!("CARGO_BIN_EXE_unet"))
        .args(["bench", "overhead", "--quick", "--json"])
        .args(extra)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run unet");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "unet bench overhead failed:\n{stderr}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("`{l}`: {e}")))
        .collect();
    assert!(!rows.is_empty(), "no output");
    for r in &rows {
        for k in [
            "bench",
            "direction",
            "size",
            "applet",
            "step",
            "ns",
            "reps",
            "batches",
            "batch",
            "load_average",
            "clock_ns",
            "jive",
        ] {
            assert!(!r[k].is_null(), "{k} missing in {r}");
        }
        assert!(r.get("target_ns").is_some(), "target_ns missing in {r}");
        assert_eq!(r["bench"], "overhead", "{r}");
        assert!(r["direction"] == "tx" || r["direction"] == "rx", "{r}");
        assert!(r["applet"] == "RawUnet" || r["applet"] == "none", "{r}");
        let ns = r["ns"].as_f64().unwrap_or_else(|| panic!("ns in {r}"));
        assert!(ns.is_finite(), "{r}");
    }
    rows
}

fn find<'a>(
    rows: &'a [Value],
    dir: &str,
    size: u64,
    applet: &str,
    step: &str,
) -> Option<&'a Value> {
    rows.iter().find(|r| {
        r["direction"] == dir && r["size"] == size && r["applet"] == applet && r["step"] == step
    })
}

#[test]
fn quick_json_run_reports_every_step() {
    require_jdk();
    let rows = quick_json(&[]);
    let all: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
    let all = all.join("\n");
    for r in &rows {
        assert_eq!(r["jive"], "compiled", "{r}");
    }
    for dir in ["tx", "rx"] {
        for size in [40, 1000] {
            for applet in ["RawUnet", "none"] {
                let t = find(&rows, dir, size, applet, "total")
                    .unwrap_or_else(|| panic!("no total for {dir} {size} {applet}:\n{all}"));
                let ns = t["ns"].as_f64().unwrap();
                assert!(ns > 0.0, "total {dir} {size} {applet} = {ns}");
                // The descriptor checks (a send on a closed channel): a
                // real cost on every message.
                let v = find(&rows, dir, size, applet, "validate")
                    .unwrap_or_else(|| panic!("no validate for {dir} {size} {applet}"));
                assert!(v["ns"].as_f64().unwrap() > 0.0, "{v}");
            }
            assert_eq!(
                find(&rows, dir, size, "RawUnet", "total").unwrap()["target_ns"],
                30.0
            );
            assert!(find(&rows, dir, size, "none", "total").unwrap()["target_ns"].is_null());
            // Running an applet costs something on every message.
            let e2e = find(&rows, dir, size, "RawUnet", "end_to_end")
                .unwrap_or_else(|| panic!("no end_to_end for {dir} {size}"));
            assert!(e2e["ns"].as_f64().unwrap() > 0.0, "{e2e}");
            // find_applet and call_return are one row (applet_call).
            for step in ["applet_call", "null_native"] {
                assert!(
                    find(&rows, dir, size, "RawUnet", step).is_some(),
                    "no {step} for {dir} {size}"
                );
            }
            for step in ["find_applet", "call_return", "rxbuf_copy"] {
                assert!(find(&rows, dir, size, "RawUnet", step).is_none(), "{step}");
            }
            assert!(find(&rows, dir, size, "none", "deliver").is_some());
        }
    }
    for step in ["dma_setup", "data_movement", "tx_push"] {
        assert!(
            find(&rows, "tx", 1000, "RawUnet", step).is_some(),
            "no tx {step}"
        );
    }
    for step in [
        "get_free_buffer",
        "dma_setup",
        "data_movement",
        "descriptor_push",
    ] {
        assert!(
            find(&rows, "rx", 1000, "RawUnet", step).is_some(),
            "no rx {step}"
        );
    }
    assert!(find(&rows, "rx", 40, "RawUnet", "descriptor_push").is_some());
    // A 40-byte message goes inline: no free buffer is taken.
    assert!(find(&rows, "rx", 40, "RawUnet", "get_free_buffer").is_none());
}

#[test]
fn quick_json_run_interpreted() {
    require_jdk();
    let rows = quick_json(&["--interpret"]);
    for r in &rows {
        assert_eq!(r["jive"], "interpreted", "{r}");
    }
    for dir in ["tx", "rx"] {
        for size in [40, 1000] {
            let e2e = find(&rows, dir, size, "RawUnet", "end_to_end")
                .unwrap_or_else(|| panic!("no end_to_end for {dir} {size}"));
            assert!(e2e["ns"].as_f64().unwrap() > 0.0, "{e2e}");
        }
    }
}

#[test]
fn missing_applets_dir_is_a_clear_error() {
    let o = Command::new(env!("CARGO_BIN_EXE_unet"))
        .args(["bench", "overhead", "--quick", "--applets-dir"])
        .arg(std::env::temp_dir().join("unet-no-such-applets-dir"))
        .output()
        .expect("run unet");
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("RawUnet.java") && stderr.contains("--applets-dir"),
        "{stderr}"
    );
}
