//! One measured point, and the row it gives: its JSON and its line of the
//! table.

use serde_json::{json, Value};
use unet::Reliability;
use unet_engine::wire::udp::LOOPBACK_DATAGRAM;

use super::args::{rel_name, Settings, ViaPath};
use crate::bench::stats::{self, fmt_size};
use crate::bench::unet_paths;

/// `unet bench stream`'s default `--batch`: the endpoint stream baseline
/// hands its messages over 256 at a time, as `stream --path direct` does.
const ENDPOINT_BATCH: usize = 256;

/// One point: a path, a reliability level and a size.
pub(super) struct Point<'a> {
    pub(super) path: ViaPath,
    pub(super) reliability: Reliability,
    pub(super) size: usize,
    pub(super) s: &'a Settings,
}

impl Point<'_> {
    /// Ping-pong: timed round trips, and untimed ones before.
    pub(super) fn iters(&self) -> (usize, usize) {
        let iters = stats::iters_for(self.s.iters, self.size);
        (iters, self.s.warmup.min(iters))
    }

    /// The endpoint stream that is a local stream's baseline (`unet bench
    /// stream --path direct` with its defaults).
    pub(super) fn endpoint_stream(&self) -> unet_paths::Run {
        unet_paths::Run {
            path: self.path.baseline(),
            size: self.size,
            burst: 0,
            batch: ENDPOINT_BATCH,
            warmup: 0,
            iters: 0,
            limit: self.s.stream,
            warmup_time: self.s.stream_warmup,
            pin: self.s.pin,
            max_datagram: LOOPBACK_DATAGRAM,
            spin_us: None,
            applet: None,
            counters: false,
            buffered: None,
        }
    }

    pub(super) fn what(&self, bench: &str) -> String {
        format!(
            "{bench} {} {} {}",
            self.path.name(),
            rel_name(self.reliability),
            fmt_size(self.size)
        )
    }
}

/// One row: a VI figure beside its baseline.
pub(super) struct Row {
    pub(super) bench: &'static str,
    pub(super) path: ViaPath,
    pub(super) reliability: Reliability,
    pub(super) size: usize,
    /// Median µs per round trip, or GB/s.
    pub(super) value: f64,
    pub(super) unit: &'static str,
    pub(super) baseline: &'static str,
    pub(super) baseline_value: f64,
    /// Each run's figure (a ping-pong run's median), in order.
    pub(super) value_runs: Vec<f64>,
    pub(super) baseline_runs: Vec<f64>,
    /// Ping-pong: 99th percentiles, and round trips timed.
    pub(super) p99: Option<(f64, f64)>,
    pub(super) samples: Option<(usize, usize)>,
    /// Stream: the window.
    pub(super) window: Option<usize>,
    /// Remote, reliable levels: this level against the unreliable one
    /// measured beside it (ratio of medians, median of paired ratios).
    pub(super) vs_unreliable: Option<(f64, f64)>,
    /// Remote streams: the share of datagrams each engine dropped on
    /// purpose, in percent (the baseline is then the same VIs with none).
    pub(super) loss_pct: Option<f64>,
}

impl Row {
    fn ratio(&self) -> f64 {
        self.value / self.baseline_value
    }

    /// The median of the ratios of each VI run to the baseline run beside
    /// it ([`stats::paired_ratio`]).
    fn paired_ratio(&self) -> f64 {
        stats::paired_ratio(&self.value_runs, &self.baseline_runs).unwrap_or(f64::NAN)
    }

    pub(super) fn json(&self) -> Value {
        json!({
            "bench": self.bench,
            "path": self.path.name(),
            "size": self.size,
            "reliability": rel_name(self.reliability),
            "value": self.value,
            "unit": self.unit,
            "baseline": self.baseline,
            "baseline_value": self.baseline_value,
            "ratio": self.ratio(),
            "ratio_paired": self.paired_ratio(),
            "runs": self.value_runs.len(),
            "value_runs": self.value_runs,
            "baseline_value_runs": self.baseline_runs,
            "p99": self.p99.map(|p| p.0),
            "baseline_p99": self.p99.map(|p| p.1),
            "samples": self.samples.map(|s| s.0),
            "baseline_samples": self.samples.map(|s| s.1),
            "window": self.window,
            "vs_unreliable": self.vs_unreliable.map(|v| v.0),
            "vs_unreliable_paired": self.vs_unreliable.map(|v| v.1),
            "loss_pct": self.loss_pct,
        })
    }

    pub(super) fn header() {
        println!(
            "{:<12} {:<6} {:<11} {:>6}  {:>12} {:>8}  {:<8} {:>12} {:>8}  {:>6} {:>6}  note",
            "bench",
            "path",
            "reliability",
            "size",
            "VI",
            "p99",
            "baseline",
            "value",
            "p99",
            "ratio",
            "paired"
        );
    }

    pub(super) fn line(&self) {
        let p99 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3}"));
        let mut note = Vec::new();
        if let Some(l) = self.loss_pct {
            note.push(format!(
                "{l}% loss each way, baseline: the same VIs with none"
            ));
        }
        if let Some((r, pr)) = self.vs_unreliable {
            note.push(format!("vs unreliable {r:.2} (paired {pr:.2})"));
        }
        println!(
            "{:<12} {:<6} {:<11} {:>6}  {:>12} {:>8}  {:<8} {:>12} {:>8}  {:>6.2} {:>6.2}  {}",
            self.bench,
            self.path.name(),
            rel_name(self.reliability),
            fmt_size(self.size),
            format!("{:.3} {}", self.value, self.unit),
            p99(self.p99.map(|p| p.0)),
            self.baseline,
            format!("{:.3} {}", self.baseline_value, self.unit),
            p99(self.p99.map(|p| p.1)),
            self.ratio(),
            self.paired_ratio(),
            note.join("; ")
        );
    }
}
