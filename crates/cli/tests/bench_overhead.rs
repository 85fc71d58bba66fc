//! `unet bench overhead --quick --json`: the Figure 7 breakdown runs end to
//! end (javac compiles the micro applets and RawUnet, so a JDK >= 22 is
//! needed) and reports every step, both directions, both sizes, with and
//! without an applet. Shape only: no timing thresholds.

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

#[test]
fn quick_json_run_reports_every_step() {
    require_jdk();
    // From a directory outside the checkout: the command finds applets/
    // and the SDK through its own source location.
    let o = Command::new(env!("CARGO_BIN_EXE_unet"))
        .args(["bench", "overhead", "--quick", "--json"])
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
        for k in ["bench", "direction", "size", "applet", "step", "ns"] {
            assert!(!r[k].is_null(), "{k} missing in {r}");
        }
        assert_eq!(r["bench"], "overhead", "{r}");
        assert!(r["direction"] == "tx" || r["direction"] == "rx", "{r}");
        assert!(r["applet"] == "RawUnet" || r["applet"] == "none", "{r}");
        let ns = r["ns"].as_f64().unwrap_or_else(|| panic!("ns in {r}"));
        assert!(ns.is_finite(), "{r}");
    }
    let find = |dir: &str, size: u64, applet: &str, step: &str| {
        rows.iter().find(|r| {
            r["direction"] == dir && r["size"] == size && r["applet"] == applet && r["step"] == step
        })
    };
    for dir in ["tx", "rx"] {
        for size in [40, 1000] {
            for applet in ["RawUnet", "none"] {
                let t = find(dir, size, applet, "total")
                    .unwrap_or_else(|| panic!("no total for {dir} {size} {applet}:\n{stdout}"));
                let ns = t["ns"].as_f64().unwrap();
                assert!(ns > 0.0, "total {dir} {size} {applet} = {ns}");
            }
            // Running an applet costs something on every message.
            let e2e = find(dir, size, "RawUnet", "end_to_end")
                .unwrap_or_else(|| panic!("no end_to_end for {dir} {size}"));
            assert!(e2e["ns"].as_f64().unwrap() > 0.0, "{e2e}");
            for step in ["find_applet", "call_return", "null_native"] {
                assert!(
                    find(dir, size, "RawUnet", step).is_some(),
                    "no {step} for {dir} {size}"
                );
            }
        }
    }
    for step in ["dma_setup", "data_movement", "tx_push"] {
        assert!(find("tx", 1000, "RawUnet", step).is_some(), "no tx {step}");
    }
    for step in ["get_free_buffer", "data_movement", "descriptor_push"] {
        assert!(find("rx", 1000, "RawUnet", step).is_some(), "no rx {step}");
    }
    assert!(find("rx", 40, "RawUnet", "descriptor_push").is_some());
    // A 40-byte message goes inline: no free buffer is taken.
    assert!(find("rx", 40, "RawUnet", "get_free_buffer").is_none());
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
