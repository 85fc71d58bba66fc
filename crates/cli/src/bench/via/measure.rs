//! Each point measured beside its baseline: the remote path's alternation
//! of levels, a ping-pong's row, a stream's row.

use unet::Reliability;

use super::args::{rel_name, Args, Settings, ViaPath};
use super::pingpong::{local_pingpong, vi_pingpong};
use super::row::{Point, Row};
use super::stream::vi_stream;
use super::Res;
use crate::bench::floor::StreamRun;
use crate::bench::report::{self, Progress};
use crate::bench::stats::{self, fmt_size, median_f64, Samples};
use crate::bench::tcp;
use crate::bench::unet_paths;

/// `--path remote`: for each size, runs alternate the TCP baseline and a
/// VI of each level (unreliable always among them, the reference of the
/// reliable ones); streams add each reliable level under seeded loss.
pub(super) fn remote(a: &Args, s: &Settings, prog: &Progress, emit: &dyn Fn(Row)) -> Res<()> {
    let mut levels = a.reliability.levels();
    if !levels.contains(&Reliability::Unreliable) {
        levels.insert(0, Reliability::Unreliable);
    }
    let point = |reliability, size| Point {
        path: ViaPath::Remote,
        reliability,
        size,
        s,
    };
    let runs = s.runs;
    for &size in &a.sizes {
        let what = format!("via-pingpong remote {}", fmt_size(size));
        let (iters, warmup) = point(Reliability::Unreliable, size).iters();
        let mut tcp = (Samples::default(), Vec::new());
        let mut vis: Vec<(Samples, Vec<f64>)> = levels.iter().map(|_| Default::default()).collect();
        for rep in 0..runs {
            prog.show(&format!("{what}: TCP {}/{runs}", rep + 1));
            let t = tcp::pingpong(size, iters, warmup, s.limit, s.pin)?;
            tcp.1.push(t.median_us());
            tcp.0.extend(t);
            for (i, &r) in levels.iter().enumerate() {
                prog.show(&format!("{what}: {} {}/{runs}", rel_name(r), rep + 1));
                let v = vi_pingpong(&point(r, size))?;
                vis[i].1.push(v.median_us());
                vis[i].0.extend(v);
            }
        }
        prog.clear();
        report::note_if_unsteady(&what, "TCP", &tcp.1, "us (median of each)");
        let unrel = (vis[0].0.median_us(), vis[0].1.clone());
        for (i, &r) in levels.iter().enumerate() {
            let (v, v_runs) = (&vis[i].0, &vis[i].1);
            emit(Row {
                bench: "via-pingpong",
                path: ViaPath::Remote,
                reliability: r,
                size,
                value: v.median_us(),
                unit: "us",
                baseline: "tcp",
                baseline_value: tcp.0.median_us(),
                value_runs: v_runs.clone(),
                baseline_runs: tcp.1.clone(),
                p99: Some((v.p99_us(), tcp.0.p99_us())),
                samples: Some((v.ns.len(), tcp.0.ns.len())),
                window: None,
                vs_unreliable: (i > 0).then(|| vs(v.median_us(), unrel.0, v_runs, &unrel.1)),
                loss_pct: None,
            });
        }
    }
    let loss_ppm = (a.loss_pct * 10_000.0).round() as u32;
    for &size in &a.stream_sizes {
        let what = format!("via-stream remote {}", fmt_size(size));
        let gb = |r: &StreamRun| r.msgs_per_s() * size as f64 / 1e9;
        let mut tcp_runs = Vec::new();
        let mut clean: Vec<Vec<f64>> = levels.iter().map(|_| Vec::new()).collect();
        let mut lossy: Vec<Vec<f64>> = levels.iter().map(|_| Vec::new()).collect();
        for rep in 0..runs {
            prog.show(&format!("{what}: TCP {}/{runs}", rep + 1));
            tcp_runs.push(gb(&tcp::stream(size, s.stream_warmup, s.stream, s.pin)?));
            for (i, &r) in levels.iter().enumerate() {
                prog.show(&format!("{what}: {} {}/{runs}", rel_name(r), rep + 1));
                clean[i].push(gb(&vi_stream(&point(r, size), 0)?));
                if r != Reliability::Unreliable && loss_ppm > 0 {
                    prog.show(&format!(
                        "{what}: {} with {}% loss {}/{runs}",
                        rel_name(r),
                        a.loss_pct,
                        rep + 1
                    ));
                    lossy[i].push(gb(&vi_stream(&point(r, size), loss_ppm)?));
                }
            }
        }
        prog.clear();
        report::note_if_unsteady(&what, "TCP", &tcp_runs, "GB/s");
        let row = |r, value_runs: &[f64], baseline, baseline_runs: &[f64]| Row {
            bench: "via-stream",
            path: ViaPath::Remote,
            reliability: r,
            size,
            value: median_f64(value_runs),
            unit: "GB/s",
            baseline,
            baseline_value: median_f64(baseline_runs),
            value_runs: value_runs.to_vec(),
            baseline_runs: baseline_runs.to_vec(),
            p99: None,
            samples: None,
            window: Some(s.window),
            vs_unreliable: None,
            loss_pct: None,
        };
        for (i, &r) in levels.iter().enumerate() {
            let mut row_clean = row(r, &clean[i], "tcp", &tcp_runs);
            if i > 0 {
                row_clean.vs_unreliable = Some(vs(
                    median_f64(&clean[i]),
                    median_f64(&clean[0]),
                    &clean[i],
                    &clean[0],
                ));
            }
            emit(row_clean);
        }
        for (i, &r) in levels.iter().enumerate() {
            if !lossy[i].is_empty() {
                let mut row_lossy = row(r, &lossy[i], "no loss", &clean[i]);
                row_lossy.loss_pct = Some(a.loss_pct);
                emit(row_lossy);
            }
        }
    }
    Ok(())
}

/// A figure against a reference measured beside it: the ratio of the
/// medians and the median of the run-by-run ratios.
fn vs(value: f64, reference: f64, runs: &[f64], ref_runs: &[f64]) -> (f64, f64) {
    let paired = stats::paired_ratio(runs, ref_runs).unwrap_or(f64::NAN);
    (value / reference, paired)
}

pub(super) fn pingpong_row(p: &Point, prog: &Progress) -> Res<Row> {
    let what = p.what("via-pingpong");
    let blocks = local_pingpong(p, &|rep, kind| {
        prog.show(&format!("{what}: {kind} {}/{}", rep + 1, p.s.runs));
    })?;
    let (mut base, mut vi) = (Samples::default(), Samples::default());
    let (mut base_runs, mut vi_runs) = (Vec::new(), Vec::new());
    for (b, v) in blocks {
        base_runs.push(b.median_us());
        base.extend(b);
        vi_runs.push(v.median_us());
        vi.extend(v);
    }
    prog.clear();
    report::note_if_unsteady(&what, "direct path", &base_runs, "us (median of each)");
    Ok(Row {
        bench: "via-pingpong",
        path: p.path,
        reliability: p.reliability,
        size: p.size,
        value: vi.median_us(),
        unit: "us",
        baseline: p.path.baseline().name(),
        baseline_value: base.median_us(),
        value_runs: vi_runs,
        baseline_runs: base_runs,
        p99: Some((vi.p99_us(), base.p99_us())),
        samples: Some((vi.ns.len(), base.ns.len())),
        window: None,
        vs_unreliable: None,
        loss_pct: None,
    })
}

pub(super) fn stream_row(p: &Point, prog: &Progress) -> Res<Row> {
    let what = p.what("via-stream");
    let runs = p.s.runs;
    let gb = |r: &StreamRun| r.msgs_per_s() * p.size as f64 / 1e9;
    let (mut base_runs, mut vi_runs) = (Vec::new(), Vec::new());
    for rep in 0..runs {
        prog.show(&format!("{what}: direct {}/{runs}", rep + 1));
        base_runs.push(gb(&unet_paths::stream(&p.endpoint_stream())?));
        prog.show(&format!("{what}: VI {}/{runs}", rep + 1));
        vi_runs.push(gb(&vi_stream(p, 0)?));
    }
    prog.clear();
    report::note_if_unsteady(&what, "direct path", &base_runs, "GB/s");
    Ok(Row {
        bench: "via-stream",
        path: p.path,
        reliability: p.reliability,
        size: p.size,
        value: median_f64(&vi_runs),
        unit: "GB/s",
        baseline: p.path.baseline().name(),
        baseline_value: median_f64(&base_runs),
        value_runs: vi_runs,
        baseline_runs: base_runs,
        p99: None,
        samples: None,
        window: Some(p.s.window),
        vs_unreliable: None,
        loss_pct: None,
    })
}
