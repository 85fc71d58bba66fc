//! `unet bench jive --quick`: the paper's benchmarks run end to end on JIVE,
//! gcc -O0/-O2 and HotSpot -Xint/JIT (needs gcc and a JDK >= 22), with the
//! checksums of all five agreeing (the command fails otherwise); with
//! `--compile --svg`, on JIVE compiled and interpreted, drawing Figures 3
//! and 4.

use std::process::Command;

use serde_json::Value;

const NAMES: [&str; 13] = [
    "null-loop",
    "null-call",
    "field-read",
    "field-write",
    "array-read",
    "array-write",
    "math",
    "math-field",
    "math-array",
    "qsort",
    "rand",
    "fibonacci",
    "null native call",
];

/// Runs `unet bench jive ARGS` (which must succeed and report progress on
/// stderr): its JSON rows, and its stdout.
fn run_json(args: &[&str]) -> (Vec<Value>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_unet"))
        .args(["bench", "jive"])
        .args(args)
        .output()
        .expect("run unet");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "unet bench jive failed:\n{stderr}");
    assert!(stderr.contains("[bench jive]"), "no progress on stderr");
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let rows = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("`{l}`: {e}")))
        .collect();
    (rows, stdout)
}

#[test]
fn quick_json_run_reports_every_benchmark_on_every_runtime() {
    let (rows, stdout) = run_json(&["--quick", "--json"]);
    assert_eq!(rows.len(), NAMES.len() + 4, "{stdout}");
    for (row, name) in rows.iter().zip(NAMES) {
        assert_eq!(row["bench"], "jive");
        assert_eq!(row["name"], name);
        let unit = if matches!(name, "qsort" | "rand" | "fibonacci") {
            "us/run"
        } else {
            "ns/op"
        };
        assert_eq!(row["unit"], unit, "{row}");
        assert_eq!(row["jive"], row["jive_interpreted"], "{row}");
        assert!(row.get("jive_compiled").is_none(), "{row}");
        for k in ["jive", "gcc_O0", "gcc_O2", "hotspot_xint", "hotspot_jit"] {
            let v = row[k]
                .as_f64()
                .unwrap_or_else(|| panic!("{name}: {k} in {row}"));
            assert!(v >= 0.0 && v.is_finite(), "{name}: {k} = {v}");
        }
        assert!(row["n"].as_i64().unwrap() > 0);
    }
    // The macro benchmarks do real work on every runtime; quicksort of 1000
    // reverse-ordered ints (quadratic) costs far more than 40 Fibonacci
    // numbers.
    let by_name = |n: &str| rows.iter().find(|r| r["name"] == n).unwrap();
    for n in ["qsort", "rand", "fibonacci"] {
        for k in ["jive", "gcc_O0", "hotspot_xint"] {
            assert!(by_name(n)[k].as_f64().unwrap() > 0.0, "{n}: {k}");
        }
    }
    for k in ["jive", "gcc_O0", "gcc_O2", "hotspot_xint"] {
        assert!(
            by_name("qsort")[k].as_f64().unwrap()
                > 10.0 * by_name("fibonacci")[k].as_f64().unwrap(),
            "{k}: qsort vs fibonacci"
        );
    }
    let geo = &rows[NAMES.len()];
    assert_eq!(geo["name"], "geomean jive/xint");
    assert!(geo["jive"].as_f64().is_some_and(|g| g > 0.0), "{geo}");
    // Against the JIT: over the benchmarks whose JIT time is measurable
    // (each runtime sizes its own runs, so the macro benchmarks are).
    let jit = &rows[NAMES.len() + 1];
    assert_eq!(jit["name"], "geomean jive/jit");
    let of = jit["of"].as_u64().unwrap_or_else(|| panic!("{jit}"));
    assert!((3..=12).contains(&of), "{jit}");
    assert!(jit["jive"].as_f64().is_some_and(|g| g > 0.0), "{jit}");
    // The host's call, prepared and checked, each beside the same
    // run's indirect call of a Rust function.
    for (i, name) in ["host-to-applet call", "host-to-applet call, checked"]
        .iter()
        .enumerate()
    {
        let host = &rows[NAMES.len() + 2 + i];
        assert_eq!(host["name"], *name);
        let ns = host["jive"].as_f64().unwrap_or_else(|| panic!("{host}"));
        let floor = host["baseline_ns"]
            .as_f64()
            .unwrap_or_else(|| panic!("{host}"));
        assert!(ns > 0.0 && ns < 100_000.0, "{host}");
        assert!(floor > 0.0 && floor < ns, "{host}");
    }
}

/// `--compile --svg DIR`: JIVE runs compiled and interpreted in the same
/// run; compiled JIVE is set against HotSpot's JIT (whose null-call, a call
/// it is told not to inline, is measurable), the interpreter against
/// -Xint; the two figures are written with the paper's points beside ours.
#[test]
fn quick_compiled_run_compares_both_modes_and_draws_figures_3_and_4() {
    let dir = std::env::temp_dir().join(format!("unet-jive-svg-{}", std::process::id()));
    let d = dir.to_str().expect("a UTF-8 temporary directory");
    let (rows, stdout) = run_json(&["--quick", "--json", "--compile", "--svg", d]);
    assert_eq!(rows.len(), NAMES.len() + 5, "{stdout}");
    for (row, name) in rows.iter().zip(NAMES) {
        assert_eq!(row["name"], name);
        assert_eq!(row["jive"], row["jive_compiled"], "{row}");
        for k in ["jive_compiled", "jive_interpreted", "hotspot_jit"] {
            let v = row[k].as_f64().unwrap_or_else(|| panic!("{k} in {row}"));
            assert!(v >= 0.0 && v.is_finite(), "{name}: {k} = {v}");
        }
        assert_eq!(row["ratio"], row["compiled_over_hotspot_jit"], "{row}");
    }
    let by_name = |n: &str| rows.iter().find(|r| r["name"] == n).unwrap();
    // The JIT's null-call is a real call (not inlined), ten times its
    // null loop's iteration; the macro benchmarks are measurable on every
    // runtime even in a rough run.
    let call = by_name("null-call");
    assert!(call["hotspot_jit"].as_f64().unwrap() > 0.0, "{call}");
    for n in ["qsort", "rand", "fibonacci"] {
        let r = by_name(n);
        assert!(r["hotspot_jit"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["compiled_over_hotspot_jit"].as_f64().is_some(), "{r}");
        assert!(r["interpreted_over_hotspot_xint"].as_f64().is_some(), "{r}");
    }
    let jit = by_name("geomean jive/jit");
    assert_eq!(jit["target"], 1.5, "{jit}");
    assert!(jit["of"].as_u64().unwrap() >= 3, "{jit}");
    assert!(jit["worst"].as_f64().unwrap() >= jit["jive"].as_f64().unwrap());
    let xint = by_name("geomean jive/xint");
    assert_eq!(xint["target"], 0.7, "{xint}");
    assert!(xint["jive"].as_f64().is_some_and(|g| g > 0.0), "{xint}");
    let compile = by_name("compile");
    assert!(compile["methods"].as_u64().unwrap() > 10, "{compile}");
    for (file, title, paper) in [
        ("figure3.svg", "Figure 3", "paper: Kaffe (JIT)"),
        ("figure4.svg", "Figure 4", "paper: Sun JVM 1.1.5"),
    ] {
        let svg = std::fs::read_to_string(dir.join(file)).expect(file);
        assert!(svg.starts_with("<svg"), "{file}");
        for want in [
            title,
            paper,
            "JIVE compiled",
            "JIVE interpreted",
            "HotSpot JIT",
        ] {
            assert!(svg.contains(want), "{file}: no {want}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
