//! Results: a path's medians, printed as a table, as JSON rows, against
//! the targets and as the SVG figures.

use std::path::Path;

use serde_json::{json, Value};

use super::args::{Kind, Where};
use super::runs::{Floor, Point};
use super::Res;
use crate::bench::plot::{self, Figure, Scale, Series};
use crate::bench::stats::{self, fmt_size, median_f64};

/// A path's medians: `rt[k][s]` in microseconds, `bw[k][s]` in bytes/s.
pub(super) struct Table {
    pub(super) w: Where,
    pub(super) kinds: Vec<Kind>,
    pub(super) sizes: Vec<usize>,
    pub(super) rt: Vec<Vec<f64>>,
    pub(super) bw: Vec<Vec<f64>>,
    pub(super) rt_runs: Vec<Vec<Vec<f64>>>,
    pub(super) bw_runs: Vec<Vec<Vec<f64>>>,
    /// What one downcall costs (measured for the local path).
    pub(super) floor: Option<Floor>,
}

/// The paper's numbers (two 300 MHz Pentium-II hosts, GigaNet cards):
/// (figure, series, size, round trip in µs or bandwidth in MB/s).
const PAPER: &[(u8, &str, usize, f64)] = &[
    (1, "raw C VIA", 4, 18.0),
    (1, "Javia-I (copy)", 4, 22.0),
    (1, "Javia-I (pinned)", 4, 32.0),
    (3, "Javia-II", 4, 21.0),
    (2, "Javia-I pinned = copy (crossover)", 7000, 0.0),
    (4, "Javia-II", 4096, 95.0),
];

impl Table {
    pub(super) fn new(
        w: Where,
        kinds: &[Kind],
        sizes: &[usize],
        results: &[Vec<Vec<Point>>],
    ) -> Table {
        let runs = |k: usize, s: usize, f: fn(&Point) -> f64| -> Vec<f64> {
            results[k].iter().map(|r| f(&r[s])).collect()
        };
        let mut t = Table {
            w,
            kinds: kinds.to_vec(),
            sizes: sizes.to_vec(),
            rt: vec![],
            bw: vec![],
            rt_runs: vec![],
            bw_runs: vec![],
            floor: None,
        };
        for k in 0..kinds.len() {
            let rr: Vec<Vec<f64>> = (0..sizes.len())
                .map(|s| runs(k, s, |p| p.rt_ns / 1000.0))
                .collect();
            let br: Vec<Vec<f64>> = (0..sizes.len()).map(|s| runs(k, s, |p| p.bw)).collect();
            t.rt.push(rr.iter().map(|v| median_f64(v)).collect());
            t.bw.push(br.iter().map(|v| median_f64(v)).collect());
            t.rt_runs.push(rr);
            t.bw_runs.push(br);
        }
        t
    }

    fn index(&self, k: Kind) -> Option<usize> {
        self.kinds.iter().position(|&x| x == k)
    }

    fn size_index(&self, s: usize) -> Option<usize> {
        self.sizes.iter().position(|&x| x == s)
    }

    /// Ratio of kind `k` to the Rust client at size index `s`.
    pub(super) fn vs_rust(&self, v: &[Vec<f64>], k: usize, s: usize) -> Option<f64> {
        let r = self.index(Kind::Rust)?;
        (v[r][s] > 0.0).then(|| v[k][s] / v[r][s])
    }

    /// As [`Table::vs_rust`], paired: the median over runs of each run's
    /// figure against the Rust client's run of the same round (run just
    /// before or after it), so that a run of the host's other placement
    /// (round trips change 2-3x between them) is compared within itself.
    pub(super) fn vs_rust_paired(&self, runs: &[Vec<Vec<f64>>], k: usize, s: usize) -> Option<f64> {
        let r = self.index(Kind::Rust)?;
        stats::paired_ratio(&runs[k][s], &runs[r][s])
    }

    /// Kind `k`'s round trips against Aeron IPC's of the same round
    /// (the median of the runs' ratios), as [`Self::vs_rust_paired`].
    fn rt_vs_aeron_paired(&self, k: usize, s: usize) -> Option<f64> {
        let a = self.index(Kind::Aeron)?;
        stats::paired_ratio(&self.rt_runs[k][s], &self.rt_runs[a][s])
    }

    pub(super) fn print(&self) {
        println!(
            "\n{} path: round trip (us, median; x = / rust)",
            self.w.name()
        );
        let mut head = format!("{:>8}", "size");
        for k in &self.kinds {
            head += &format!(" {:>19}", k.label());
        }
        println!("{head}");
        for s in 0..self.sizes.len() {
            let mut l = format!("{:>8}", fmt_size(self.sizes[s]));
            for k in 0..self.kinds.len() {
                let x = self
                    .vs_rust(&self.rt, k, s)
                    .filter(|_| self.kinds[k] != Kind::Rust)
                    .map_or(String::new(), |x| format!(" ({x:.2}x)"));
                l += &format!(" {:>19}", format!("{:.3}{x}", self.rt[k][s]));
            }
            println!("{l}");
        }
        println!(
            "{} path: bandwidth (MB/s, median; x = / rust)",
            self.w.name()
        );
        println!("{head}");
        for s in 0..self.sizes.len() {
            let mut l = format!("{:>8}", fmt_size(self.sizes[s]));
            for k in 0..self.kinds.len() {
                let x = self
                    .vs_rust(&self.bw, k, s)
                    .filter(|_| self.kinds[k] != Kind::Rust)
                    .map_or(String::new(), |x| format!(" ({x:.2}x)"));
                l += &format!(" {:>19}", format!("{:.0}{x}", self.bw[k][s] / 1e6));
            }
            println!("{l}");
        }
    }

    pub(super) fn json(&self) {
        for (k, kind) in self.kinds.iter().enumerate() {
            for (s, &size) in self.sizes.iter().enumerate() {
                let row: Value = json!({
                    "bench": "javia",
                    "path": self.w.name(),
                    "series": kind.name(),
                    "label": kind.label(),
                    "size": size,
                    "rt_us": self.rt[k][s],
                    "rt_us_runs": self.rt_runs[k][s],
                    "rt_vs_rust": self.vs_rust(&self.rt, k, s),
                    "rt_vs_rust_paired": self.vs_rust_paired(&self.rt_runs, k, s),
                    "rt_vs_aeron_paired": self.rt_vs_aeron_paired(k, s),
                    "mb_per_s": self.bw[k][s] / 1e6,
                    "mb_per_s_runs": self.bw_runs[k][s].iter().map(|b| b / 1e6).collect::<Vec<_>>(),
                    "bw_vs_rust": self.vs_rust(&self.bw, k, s),
                    "bw_vs_rust_paired": self.vs_rust_paired(&self.bw_runs, k, s),
                    "figures": figures_of(*kind),
                });
                println!("{row}");
            }
        }
        if let Some(f) = self.floor {
            println!(
                "{}",
                json!({"bench": "javia", "path": self.w.name(), "series": "downcall",
                       "label": "one downcall to a trivial function", "ns": f.ns})
            );
        }
        if self.w == Where::Local {
            for &(fig, series, size, v) in PAPER {
                let (rt, bw) = if fig % 2 == 1 {
                    (Some(v), None)
                } else {
                    (None, Some(v))
                };
                println!(
                    "{}",
                    json!({"bench": "javia", "source": "paper", "figure": fig, "series": series,
                           "size": size, "rt_us": rt, "mb_per_s": bw})
                );
            }
        }
    }

    /// The crossover of Figure 2: the smallest size from which the in-place
    /// send's bandwidth is at least the copying one's at every larger size.
    pub(super) fn crossover(&self) -> Option<usize> {
        let (c, p) = (self.index(Kind::Copy)?, self.index(Kind::Inplace)?);
        let mut from = None;
        for s in (0..self.sizes.len()).rev() {
            if self.bw[p][s] >= self.bw[c][s] {
                from = Some(self.sizes[s]);
            } else {
                break;
            }
        }
        from
    }

    pub(super) fn targets(&self) {
        // The value, its ratio of medians and the paired ratio.
        let at = |k: Kind, size: usize, rt: bool| -> Option<(f64, f64, String)> {
            let (ki, si) = (self.index(k)?, self.size_index(size)?);
            let (v, runs) = if rt {
                (&self.rt, &self.rt_runs)
            } else {
                (&self.bw, &self.bw_runs)
            };
            let paired = self
                .vs_rust_paired(runs, ki, si)
                .map_or(String::new(), |p| format!(" (paired by run {p:.2}x)"));
            Some((v[ki][si], self.vs_rust(v, ki, si)?, paired))
        };
        let rust = |size: usize, rt: bool| at(Kind::Rust, size, rt).map(|(v, _, _)| v);
        println!("\n{} path, against the issue's targets:", self.w.name());
        if let Some((v, x, p)) = at(Kind::Buffer, 64, true) {
            let aeron = at(Kind::Aeron, 64, true).map(|(a, _, _)| a);
            // Paired by run as the ratios to the Rust client are.
            let vs_aeron = self
                .index(Kind::Buffer)
                .zip(self.size_index(64))
                .and_then(|(k, s)| self.rt_vs_aeron_paired(k, s))
                .map_or(String::new(), |r| format!(", {r:.2}x it paired by run"));
            println!(
                "  Javia-II 64 B round trip {v:.3} us = {x:.2}x rust{p} (target <= 1.1){}",
                aeron.map_or(String::new(), |a| format!(
                    "; Aeron IPC {a:.3} us{vs_aeron} (target: below it: {})",
                    if v < a { "yes" } else { "no" }
                ))
            );
        }
        if let Some((v, x, p)) = at(Kind::Copy, 64, true) {
            println!(
                "  Javia-I (copy) 64 B round trip {v:.3} us = {x:.2}x rust{p} (target <= 1.3)"
            );
            // Javia-II reads and writes a local VI's ring itself; Javia-I
            // calls the library: what its calls alone cost against what
            // the target leaves above the Rust client.
            if let (Some(f), Some(r)) = (self.floor, rust(64, true)) {
                println!(
                    "    under it: one downcall costs {:.1} ns in a JVM here; Javia-I's round \
                     trip makes at least 4 (each end takes the message and sends the next): \
                     {:.0} ns of the {:.0} ns that 1.3x rust leaves",
                    f.ns,
                    4.0 * f.ns,
                    0.3 * r * 1000.0
                );
            }
        }
        if let Some((v, x, p)) = at(Kind::Buffer, 4096, false) {
            println!(
                "  Javia-II 4 KiB bandwidth {:.0} MB/s = {x:.2}x rust{p} (target >= 0.95)",
                v / 1e6
            );
        }
        match self.crossover() {
            Some(s) => println!(
                "  Javia-I in place is at least as fast as copying from {} on (the paper: above ~7000 B)",
                fmt_size(s)
            ),
            None if self.index(Kind::Copy).is_some() && self.index(Kind::Inplace).is_some() => {
                println!("  Javia-I in place is slower than copying at the largest size")
            }
            None => {}
        }
    }

    pub(super) fn figures(&self, dir: &Path) -> Res<()> {
        let specs: [(u8, &str, &[Kind]); 4] = [
            (
                1,
                "round trip",
                &[Kind::Rust, Kind::Copy, Kind::Inplace, Kind::Aeron],
            ),
            (
                2,
                "bandwidth",
                &[Kind::Rust, Kind::Copy, Kind::Inplace, Kind::Aeron],
            ),
            (
                3,
                "round trip",
                &[Kind::Rust, Kind::Copy, Kind::Buffer, Kind::Aeron],
            ),
            (
                4,
                "bandwidth",
                &[Kind::Rust, Kind::Copy, Kind::Buffer, Kind::Aeron],
            ),
        ];
        for (fig, what, kinds) in specs {
            let rt = fig % 2 == 1;
            let lines: Vec<Series> = kinds
                .iter()
                .filter_map(|&k| {
                    let ki = self.index(k)?;
                    let v = if rt { &self.rt[ki] } else { &self.bw[ki] };
                    Some(Series {
                        name: k.label().to_string(),
                        points: self
                            .sizes
                            .iter()
                            .zip(v)
                            .map(|(&s, &y)| (s as f64, if rt { y } else { y / 1e6 }))
                            .collect(),
                    })
                })
                .collect();
            if lines.is_empty() {
                continue;
            }
            let paper = PAPER
                .iter()
                .filter(|p| p.0 == fig && p.3 > 0.0)
                .map(|&(_, name, size, v)| Series {
                    name: format!("paper: {name}"),
                    points: vec![(size as f64, v)],
                })
                .collect();
            let title = format!(
                "Figure {fig}: {what}, {} path ({})",
                self.w.name(),
                if fig <= 2 { "Javia-I" } else { "Javia-II" }
            );
            let f = Figure {
                title: &title,
                x_desc: "message size (bytes)",
                y_desc: if rt {
                    "round trip (us)"
                } else {
                    "bandwidth (MB/s)"
                },
                lines,
                paper,
                scale: Scale::LogLog,
            };
            plot::write_svg(&f, &dir.join(format!("figure{fig}-{}.svg", self.w.name())))?;
        }
        Ok(())
    }
}

fn figures_of(k: Kind) -> &'static [u8] {
    match k {
        Kind::Rust | Kind::Copy | Kind::Aeron => &[1, 2, 3, 4],
        Kind::Inplace => &[1, 2],
        Kind::Buffer => &[3, 4],
    }
}
