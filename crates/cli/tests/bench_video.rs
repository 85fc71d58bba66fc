//! `unet bench video --json --svg F` at small sizes: every run's row
//! (one and two streams, then the "1080p" run, here a small frame) with
//! each stream's frames all completed, none lost, no row dropped, the
//! last frames as the pattern, the throughput the frames carried, and
//! the CPU times; the summary names the largest clean total; the SVG is
//! drawn. Shape and exact counts only, no timing thresholds (this build
//! is not a release build, and the machine is shared).

use std::process::Command;

use serde_json::Value;

#[test]
fn bench_video_reports_a_row_a_run_with_every_frame_whole() {
    let svg = std::env::temp_dir().join(format!("unet-bench-video-{}.svg", std::process::id()));
    let o = Command::new(env!("CARGO_BIN_EXE_unet"))
        .args(["bench", "video", "--streams", "1,2", "--size", "64x48"])
        .args(["--rate", "50", "--hd", "96x64@30", "--seconds", "1"])
        .args(["--move-every", "50", "--json", "--svg"])
        .arg(&svg)
        .output()
        .expect("run unet");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "unet bench video failed:\n{stderr}");
    let rows: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("`{l}`: {e}")))
        .collect();
    assert_eq!(rows.len(), 4, "{rows:#?}");
    let want: [(u32, u32, u32, u32); 3] = [(1, 64, 48, 50), (2, 64, 48, 50), (1, 96, 64, 30)];
    for (r, (n, w, h, frames)) in rows.iter().zip(want) {
        assert_eq!(r["streams"], n, "{r}");
        assert_eq!(r["width"], w, "{r}");
        assert_eq!(r["height"], h, "{r}");
        assert_eq!(r["frames"], frames, "{r}");
        assert_eq!(r["clean"], true, "{r}");
        assert_eq!(r["lost"], 0, "{r}");
        let per = r["per_stream"].as_array().unwrap();
        assert_eq!(per.len(), n as usize, "{r}");
        for s in per {
            assert_eq!(s["completed"], frames, "{r}");
            assert_eq!(s["rows_dropped"], 0, "{r}");
            assert_eq!(s["last_frame_as_pattern"], true, "{r}");
        }
        // The throughput is the completed frames' bits over the sending.
        let secs = r["seconds"].as_f64().unwrap();
        let bits = f64::from(n * frames * w * h * 32);
        let mbit = r["mbit_per_s"].as_f64().unwrap();
        assert!(
            (mbit - bits / secs / 1e6).abs() < 1e-6 * mbit.max(1.0),
            "{r}"
        );
        for k in ["client", "client_adapter", "server_adapter", "server"] {
            assert!(r["cpu_ms"][k].as_f64().unwrap() >= 0.0, "{k}: {r}");
        }
        assert_eq!(r["sender"]["frames"], frames, "{r}");
    }
    let summary = rows[3]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("largest total with no frame lost") && summary.contains("(2 streams"),
        "{summary}"
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("<svg"), "{text}");
    let _ = std::fs::remove_file(&svg);
}
