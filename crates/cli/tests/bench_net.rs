//! `unet bench pingpong` / `unet bench stream` with tiny iteration counts:
//! JSON keys present, values positive, ratios consistent. Behaviour only,
//! no timing thresholds.

mod tools;

use std::process::Command;

use serde_json::Value;
use tools::{close, json_rows, num};

const PATHS: [&str; 3] = ["direct", "engine", "udp"];

/// Runs `unet bench ARGS`, which must succeed and print JSON rows.
fn bench(args: &[&str]) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_unet"))
        .arg("bench")
        .args(args)
        .output()
        .expect("run unet");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "unet bench {args:?} failed: {stderr}");
    let rows = json_rows(&out.stdout);
    assert!(!rows.is_empty());
    rows
}

/// Runs `unet bench ARGS`, which must succeed, and returns its table.
fn table(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_unet"))
        .arg("bench")
        .args(args)
        .output()
        .expect("run unet");
    assert!(out.status.success(), "unet bench {args:?} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ping(path: &str, baseline_only: bool) -> Vec<Value> {
    let mut a = vec![
        "pingpong", "--path", path, "--sizes", "64", "--iters", "200", "--warmup", "20", "--reps",
        "1", "--json",
    ];
    if baseline_only {
        a.push("--baseline-only");
    }
    bench(&a)
}

fn check_ping_baseline(r: &Value, path: &str) {
    assert_eq!(r["bench"], "pingpong");
    assert_eq!(r["path"], path);
    assert_eq!(num(r, "size"), 64.0);
    let want = if path == "udp" { "raw_udp" } else { "floor" };
    assert_eq!(r["baseline"], want);
    let (m, p) = (num(r, "baseline_median_us"), num(r, "baseline_p99_us"));
    assert!(m > 0.0 && p >= m, "{r}");
    assert!(num(r, "clock_ns") >= 0.0, "{r}");
}

#[test]
fn pingpong_baselines() {
    for path in PATHS {
        let rows = ping(path, true);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        check_ping_baseline(r, path);
        assert!(r["median_us"].is_null() && r["ratio"].is_null(), "{r}");
    }
}

#[test]
fn pingpong_unet() {
    for path in PATHS {
        let rows = ping(path, false);
        let r = &rows[0];
        check_ping_baseline(r, path);
        let (m, p) = (num(r, "median_us"), num(r, "p99_us"));
        assert!(m > 0.0 && p >= m, "{r}");
        assert!(
            close(num(r, "ratio"), m / num(r, "baseline_median_us")),
            "{r}"
        );
    }
}

/// The engine path's row carries the forwarder floor beside the floor
/// ring, the UDP path's the relay floor beside raw UDP, each with its
/// ratio; the direct path's has none. With `--host-floor` every run has
/// its host floor, in the JSON and under the table's row.
#[test]
fn pingpong_forwarder_floor_and_host_floor() {
    for path in ["engine", "udp", "direct"] {
        let rows = bench(&[
            "pingpong",
            "--path",
            path,
            "--sizes",
            "64",
            "--iters",
            "200",
            "--warmup",
            "20",
            "--reps",
            "2",
            "--host-floor",
            "--json",
        ]);
        let r = &rows[0];
        if path != "direct" {
            let (m, p) = (num(r, "forwarder_median_us"), num(r, "forwarder_p99_us"));
            assert!(m > 0.0 && p >= m, "{r}");
            assert!(
                close(num(r, "ratio_forwarder"), num(r, "median_us") / m),
                "{r}"
            );
            let runs = r["forwarder_host_ns_runs"].as_array().unwrap();
            assert_eq!(runs.len(), 2, "{r}");
        } else {
            assert!(r["forwarder_median_us"].is_null(), "{r}");
            assert!(r["forwarder_host_ns_runs"].as_array().unwrap().is_empty());
        }
        for key in ["host_ns_runs", "baseline_host_ns_runs"] {
            let runs = r[key].as_array().unwrap_or_else(|| panic!("{key}: {r}"));
            assert_eq!(runs.len(), 2, "{r}");
            assert!(
                runs.iter().all(|h| h.as_f64().is_some_and(|h| h > 0.0)),
                "{r}"
            );
        }
        assert!(num(r, "ratio_placed") > 0.0, "{r}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_unet"))
        .args([
            "bench", "pingpong", "--path", "engine", "--sizes", "64", "--iters", "200",
        ])
        .args(["--warmup", "20", "--reps", "1", "--host-floor"])
        .output()
        .expect("run unet");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("forwarder floor") && text.contains("engine / forwarder"),
        "{text}"
    );
    assert!(
        text.contains("host floor") && text.contains("ratio by placement"),
        "{text}"
    );
    let text = table(&[
        "pingpong", "--path", "udp", "--sizes", "64", "--iters", "200", "--warmup", "20", "--reps",
        "1",
    ]);
    assert!(
        text.contains("relay floor") && text.contains("udp / relay"),
        "{text}"
    );
}

/// `--group N` times round trips N at a time, unet's and the baseline's:
/// every row says so, and the table says what its figures are.
#[test]
fn pingpong_in_groups() {
    let args = [
        "pingpong", "--path", "direct", "--sizes", "64", "--iters", "400", "--warmup", "20",
        "--reps", "1", "--group", "8",
    ];
    let rows = bench(&[&args[..], &["--json"]].concat());
    for r in &rows {
        assert_eq!(num(r, "group"), 8.0, "{r}");
        assert!(num(r, "median_us") > 0.0 && num(r, "baseline_median_us") > 0.0);
    }
    let text = table(&args);
    assert!(text.contains("timed 8 at a time"), "{text}");
    let bad = Command::new(env!("CARGO_BIN_EXE_unet"))
        .args(["bench", "pingpong", "--group", "0"])
        .output()
        .expect("run unet");
    assert!(!bad.status.success());
}

/// The processes of the spinning children of `unet bench` now running
/// (`--load`), by their command lines.
fn spinners() -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
        if args
            .windows(2)
            .any(|w| w == [&b"__child"[..], &b"spin"[..]])
        {
            v.push(pid);
        }
    }
    v
}

/// `--load N` runs N spinning processes while the benchmark runs (every
/// row says so), and none is left when it ends.
#[test]
fn load_runs_busy_processes_beside_the_benchmark_and_stops_them() {
    let child = Command::new(env!("CARGO_BIN_EXE_unet"))
        .args(["bench", "pingpong", "--path", "udp", "--sizes", "64"])
        .args(["--iters", "300", "--warmup", "20", "--reps", "2"])
        .args(["--load", "2", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run unet");
    let parent = child.id();
    // Both spinners are seen while it runs, as its children.
    let mut seen = 0;
    for _ in 0..500 {
        let mine = spinners()
            .into_iter()
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .ok()
                    .and_then(|s| s.rsplit(") ").next()?.split(' ').nth(1)?.parse().ok())
                    == Some(parent)
            })
            .count();
        seen = seen.max(mine);
        if seen == 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("wait for unet");
    assert!(out.status.success());
    assert_eq!(seen, 2, "two spinning children while the benchmark ran");
    let rows = json_rows(&out.stdout);
    assert!(!rows.is_empty());
    for r in &rows {
        assert_eq!(num(r, "load"), 2.0, "{r}");
    }
    // Killed and reaped when the benchmark ended.
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(
        spinners().is_empty(),
        "spinning children left: {:?}",
        spinners()
    );
}

fn stream(path: &str, pattern: &str, baseline_only: bool) -> Vec<Value> {
    let mut a = vec![
        "stream",
        "--path",
        path,
        "--sizes",
        "64,4K",
        "--time-ms",
        "20",
        "--warmup-ms",
        "5",
        "--reps",
        "1",
        "--pattern",
        pattern,
        "--json",
    ];
    if baseline_only {
        a.push("--baseline-only");
    }
    bench(&a)
}

fn check_stream(r: &Value, path: &str, unet: bool) {
    assert_eq!(r["bench"], "stream");
    assert_eq!(r["path"], path);
    let size = num(r, "size");
    let mut keys = vec!["baseline"];
    if unet {
        keys.push("");
    }
    for pre in keys {
        let k = |s: &str| {
            if pre.is_empty() {
                s.to_string()
            } else {
                format!("{pre}_{s}")
            }
        };
        let m = num(r, &k("msgs_per_s"));
        let g = num(r, &k("gb_per_s"));
        assert!(m > 0.0, "{r}");
        assert!(close(g, m * size / 1e9), "{r}");
    }
    if unet {
        let want = num(r, "msgs_per_s") / num(r, "baseline_msgs_per_s");
        assert!(close(num(r, "ratio"), want), "{r}");
    } else {
        assert!(r["msgs_per_s"].is_null() && r["ratio"].is_null(), "{r}");
        assert!(r["delivered"].is_null(), "{r}");
    }
    // The share of the messages sent that arrived: all of them through
    // the floor ring and unet's direct path, which lose nothing; some over
    // the others, which may drop (and raw UDP).
    let lossless = |name: &str| name == "floor" || (name.is_empty() && path == "direct");
    for (key, name) in [
        ("baseline_delivered", r["baseline"].as_str().unwrap()),
        ("delivered", ""),
    ] {
        if key == "delivered" && !unet {
            continue;
        }
        let d = num(r, key);
        if lossless(name) {
            assert_eq!(d, 1.0, "{key}: {r}");
        } else {
            assert!(d > 0.0 && d <= 1.0, "{key}: {r}");
        }
    }
}

#[test]
fn stream_baselines() {
    for path in PATHS {
        for pattern in ["stream", "burst25"] {
            let rows = stream(path, pattern, true);
            assert_eq!(rows.len(), 2);
            assert_eq!(num(&rows[0], "size"), 64.0);
            assert_eq!(num(&rows[1], "size"), 4096.0);
            let burst = if pattern == "burst25" { 25.0 } else { 0.0 };
            for r in &rows {
                assert_eq!(num(r, "burst"), burst);
                check_stream(r, path, false);
            }
        }
    }
}

#[test]
fn stream_unet() {
    for path in PATHS {
        let rows = stream(path, "stream", false);
        for r in &rows {
            check_stream(r, path, true);
        }
    }
}

#[test]
fn table_and_help() {
    let out = Command::new(env!("CARGO_BIN_EXE_unet"))
        .args([
            "bench", "pingpong", "--sizes", "8", "--iters", "50", "--reps", "1",
        ])
        .args(["--baseline-only"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(t.lines().next().unwrap().contains("baseline"), "{t}");
    assert!(t.contains("floor"), "{t}");
    for sub in ["pingpong", "stream"] {
        let out = Command::new(env!("CARGO_BIN_EXE_unet"))
            .args(["bench", sub, "--help"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let h = String::from_utf8(out.stdout).unwrap();
        assert!(h.contains("--sizes") && h.contains("--path") && h.contains("--json"));
    }
    let bad = Command::new(env!("CARGO_BIN_EXE_unet"))
        .args(["bench", "pingpong", "--sizes", "0"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
}

/// Whether this kernel takes UDP socket option `opt` (`UDP_SEGMENT`,
/// `UDP_GRO`) on a UDP socket.
fn udp_offload(opt: libc::c_int, v: libc::c_int) -> bool {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: a valid socket, an int option of the size given.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_UDP,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// `--counters` prints the engines' counters after each unet run: over UDP
/// one engine per side, on the engine path the one engine of both. A
/// stream's equal-size datagrams to one peer go as segmented runs (UDP
/// GSO) and arrive coalesced (UDP GRO) where the kernel has them, and
/// both counts are shown.
#[test]
fn counters_after_each_run() {
    let mut udp = vec![
        "counters of the sending side's engine",
        "counters of the receiving side's engine",
        "wire_tx_datagrams",
        "wire_rx_datagrams",
    ];
    if udp_offload(libc::UDP_SEGMENT, 1400) {
        udp.push("wire_gso_runs");
    }
    if udp_offload(libc::UDP_GRO, 1) {
        udp.push("wire_gro_runs");
    }
    for (path, want) in [
        ("udp", &udp[..]),
        (
            "engine",
            &["counters of the engine (both endpoints)", "rx_msgs"][..],
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_unet"))
            .args(["bench", "stream", "--path", path, "--sizes", "64"])
            .args(["--time-ms", "20", "--warmup-ms", "5", "--reps", "1"])
            .arg("--counters")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        for w in want {
            assert!(err.contains(w), "{path}: no {w:?} in {err}");
        }
    }
}
