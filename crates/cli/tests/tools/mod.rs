//! Helpers of the tests that compile applets or read `unet bench --json`:
//! the source checkout, javac of a JDK >= 22 against the applet SDK, JSON
//! rows and their numbers.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The source checkout.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Compiles `files` for Java 8, every lint an error, against the applet
/// SDK's sources, into `out`, with the JDK `scripts/find-jdk` finds.
pub fn javac(out: &Path, files: &[PathBuf]) {
    let o = Command::new("bash")
        .arg(repo().join("scripts/find-jdk"))
        .output()
        .expect("bash");
    assert!(
        o.status.success(),
        "these tests need a JDK 22 or later: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let jdk = PathBuf::from(String::from_utf8(o.stdout).unwrap().trim());
    std::fs::create_dir_all(out).unwrap();
    let st = Command::new(jdk.join("bin/javac"))
        .args(["--release", "8", "-Xlint:all,-options", "-Werror", "-d"])
        .arg(out)
        .arg("-sourcepath")
        .arg(repo().join("java/applet-sdk/src/main/java"))
        .args(files)
        .status()
        .expect("javac");
    assert!(st.success(), "javac failed");
}

/// The sample applet `applets/NAME.java`.
pub fn applet_source(name: &str) -> PathBuf {
    repo().join(format!("applets/{name}.java"))
}

/// One JSON object per line of `stdout`.
pub fn json_rows(stdout: &[u8]) -> Vec<Value> {
    std::str::from_utf8(stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

/// The number under key `k` of `v` (fails the test if absent).
pub fn num(v: &Value, k: &str) -> f64 {
    v.get(k)
        .unwrap_or_else(|| panic!("key {k} missing in {v}"))
        .as_f64()
        .unwrap_or_else(|| panic!("key {k} not a number in {v}"))
}

/// Equal but for rounding.
pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs())
}
