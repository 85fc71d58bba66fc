//! `unet bench jive`'s report: the per-operation figures of every runtime,
//! their ratios, geometric means, the compile cost and the host's call, as
//! a table or as `--json` rows.

use std::fmt::Write as _;
use std::time::Duration;

use super::{Raw, Runtime, BENCHES};

/// How many of [`BENCHES`] are the paper's (Figures 3 and 4; the null
/// native call after them is not).
pub(super) const PAPER_ROWS: usize = 12;

/// A host's call of `ret` (which returns its argument at once), in ns:
/// through `Vm::invoke` (every argument checked per call), through
/// `Vm::invoke_prepared` (checked once by `Vm::prepare`: the direct
/// interface a host that calls on every packet uses), and the baseline,
/// an indirect call of a Rust `extern "C"` function that returns its
/// argument. Medians over batches of calls, the three interleaved.
#[derive(Clone, Copy, Default)]
pub(super) struct HostCall {
    pub(super) checked: f64,
    pub(super) prepared: f64,
    pub(super) floor: f64,
}

/// What compiling the benchmark class cost (`--compile`): the whole class
/// and its slowest method, beside loading and verifying it.
pub(super) struct CompileCost {
    pub(super) methods: usize,
    pub(super) total: Duration,
    pub(super) slowest: Duration,
    pub(super) load: Duration,
}

pub(super) struct Row {
    pub(super) name: &'static str,
    pub(super) unit: &'static str,
    pub(super) n: i32,
    pub(super) checksum: i32,
    /// per runtime (the report's `cols`), in `unit`
    pub(super) values: Vec<f64>,
    /// per runtime, the smallest of its `values` that is measured rather
    /// than timing noise (see [`RESOLUTION`] and [`NULL_LOOP_SHARE`])
    pub(super) floors: Vec<f64>,
}

pub(super) struct Report {
    /// The runtimes, in the order of each row's values; the first is the
    /// JIVE column that sized the runs (compiled if JIVE was compiled).
    pub(super) cols: Vec<Runtime>,
    pub(super) rows: Vec<Row>,
    pub(super) host_call_ns: HostCall,
    pub(super) compile: Option<CompileCost>,
}

/// Figures below this many nanoseconds (per operation or per execution)
/// are beyond the resolution of the method: shown as `~0`, and no ratio is
/// formed with them. (A macrobenchmark's execution is timed over many
/// calls: HotSpot's JIT runs fibonacci's in about 10 ns.)
pub(super) const RESOLUTION: f64 = 0.01;

/// A microbenchmark's figure is the difference of two timings of loops
/// (its loop, and the null loop per iteration), each a little noisy; a
/// difference below this share of the runtime's null-loop iteration (an
/// operation that a superscalar CPU hides in the loop's overhead, or the
/// noise of the two timings) is beyond the method's resolution, as below
/// [`RESOLUTION`].
pub(super) const NULL_LOOP_SHARE: f64 = 0.1;

/// `a / b` where both are at least their floor.
fn ratio_over(a: f64, fa: f64, b: f64, fb: f64) -> Option<f64> {
    (a >= fa && b >= fb && a.is_finite() && b.is_finite()).then_some(a / b)
}

/// A geometric mean over the paper's benchmarks: its value (where any
/// ratio exists), how many benchmarks it covers, and the largest ratio
/// with its benchmark.
pub(super) struct Geomean {
    pub(super) value: Option<f64>,
    pub(super) of: usize,
    pub(super) worst: Option<(&'static str, f64)>,
}

impl Report {
    pub(super) fn new(cols: Vec<Runtime>, columns: &[Vec<Raw>], host_call_ns: HostCall) -> Report {
        let mut rows = Vec::new();
        for (i, (name, _, micro)) in BENCHES.iter().enumerate() {
            let floors = columns
                .iter()
                .map(|col| {
                    let null = col[0].median_ns / col[0].timed_n.max(1) as f64;
                    if *micro && i > 0 {
                        RESOLUTION.max(NULL_LOOP_SHARE * null)
                    } else if *micro {
                        RESOLUTION
                    } else {
                        // Macro figures are in µs.
                        RESOLUTION / 1000.0
                    }
                })
                .collect();
            let values = columns
                .iter()
                .map(|col| {
                    let null = col[0].median_ns / col[0].timed_n.max(1) as f64;
                    let per = col[i].median_ns / col[i].timed_n.max(1) as f64;
                    let net = if i == 0 { per } else { (per - null).max(0.0) };
                    if *micro {
                        net
                    } else {
                        net / 1000.0
                    }
                })
                .collect();
            rows.push(Row {
                name,
                unit: if *micro { "ns/op" } else { "us/run" },
                n: columns[0][i].n,
                checksum: columns[0][i].checksum,
                values,
                floors,
            });
        }
        Report {
            cols,
            rows,
            host_call_ns,
            compile: None,
        }
    }

    /// Whether runtime `r` was measured.
    pub(super) fn has(&self, r: Runtime) -> bool {
        self.cols.contains(&r)
    }

    /// Row `row`'s `a / b`, where both are measured and measurable.
    pub(super) fn ratio(&self, row: &Row, a: Runtime, b: Runtime) -> Option<f64> {
        let ca = self.cols.iter().position(|x| *x == a)?;
        let cb = self.cols.iter().position(|x| *x == b)?;
        ratio_over(
            row.values[ca],
            row.floors[ca],
            row.values[cb],
            row.floors[cb],
        )
    }

    /// JIVE interpreted over `java -Xint` (the interpreter's target).
    fn geomean_vs_xint(&self) -> Geomean {
        self.geomean(Runtime::JiveInterpreted, Runtime::Xint)
    }

    /// The first JIVE column (compiled, if it was) over HotSpot's JIT.
    fn geomean_vs_jit(&self) -> Geomean {
        self.geomean(self.cols[0], Runtime::Jit)
    }

    /// The geometric mean of `a / b` over the paper's benchmarks where
    /// both are measurable.
    pub(super) fn geomean(&self, a: Runtime, b: Runtime) -> Geomean {
        let rs: Vec<(&'static str, f64)> = self.rows[..PAPER_ROWS]
            .iter()
            .filter_map(|r| Some((r.name, self.ratio(r, a, b)?)))
            .filter(|(_, x)| *x > 0.0)
            .collect();
        let of = rs.len();
        let value =
            (of > 0).then(|| (rs.iter().map(|(_, r)| r.ln()).sum::<f64>() / of as f64).exp());
        let worst = rs.iter().copied().max_by(|x, y| x.1.total_cmp(&y.1));
        Geomean { value, of, worst }
    }

    pub(super) fn print_json(&self) {
        let first = self.cols[0];
        let compiled = self.has(Runtime::JiveCompiled);
        for r in &self.rows {
            let mut o = serde_json::json!({
                "bench": "jive",
                "name": r.name,
                "unit": r.unit,
                "n": r.n,
                "checksum": r.checksum,
            });
            o["jive"] = serde_json::json!(r.values[0]);
            for (rt, v) in self.cols.iter().zip(&r.values) {
                o[rt.key()] = serde_json::json!(v);
            }
            for (k, b) in [
                ("jive_over_hotspot_xint", Runtime::Xint),
                ("jive_over_gcc_O0", Runtime::GccO0),
                ("jive_over_gcc_O2", Runtime::GccO2),
                ("jive_over_hotspot_jit", Runtime::Jit),
            ] {
                o[k] = serde_json::json!(self.ratio(r, first, b));
            }
            o["interpreted_over_hotspot_xint"] =
                serde_json::json!(self.ratio(r, Runtime::JiveInterpreted, Runtime::Xint));
            if compiled {
                o["compiled_over_hotspot_jit"] =
                    serde_json::json!(self.ratio(r, Runtime::JiveCompiled, Runtime::Jit));
            }
            o["ratio"] = if compiled {
                o["compiled_over_hotspot_jit"].clone()
            } else {
                o["jive_over_hotspot_xint"].clone()
            };
            println!("{o}");
        }
        for (name, g, target) in [
            ("geomean jive/xint", self.geomean_vs_xint(), Some(0.7)),
            (
                "geomean jive/jit",
                self.geomean_vs_jit(),
                compiled.then_some(1.5),
            ),
        ] {
            println!(
                "{}",
                serde_json::json!({
                    "bench": "jive",
                    "name": name,
                    "unit": "ratio",
                    "jive": g.value,
                    "of": g.of,
                    "worst": g.worst.map(|w| w.1),
                    "worst_bench": g.worst.map(|w| w.0),
                    "target": target,
                })
            );
        }
        if let Some(c) = &self.compile {
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            println!(
                "{}",
                serde_json::json!({
                    "bench": "jive",
                    "name": "compile",
                    "unit": "ms",
                    "jive": ms(c.total),
                    "methods": c.methods,
                    "slowest_method_ms": ms(c.slowest),
                    "baseline": "load and verify the class",
                    "baseline_ms": ms(c.load),
                    "ratio": ms(c.total) / ms(c.load).max(1e-6),
                    "target": 50.0,
                })
            );
        }
        let h = self.host_call_ns;
        for (name, v, target) in [
            ("host-to-applet call", h.prepared, Some(5.0)),
            ("host-to-applet call, checked", h.checked, None),
        ] {
            println!(
                "{}",
                serde_json::json!({
                    "bench": "jive",
                    "name": name,
                    "unit": "ns/call",
                    "jive": v,
                    "mode": if compiled { "compiled" } else { "interpreted" },
                    "baseline": "indirect call of a Rust extern \"C\" fn",
                    "baseline_ns": h.floor,
                    "ratio": v / h.floor,
                    "target": target,
                })
            );
        }
    }

    /// The ratio columns of the table: (header, numerator, denominator).
    fn ratio_columns(&self) -> Vec<(&'static str, Runtime, Runtime)> {
        use Runtime::*;
        if self.has(JiveCompiled) {
            vec![
                ("int/-Xint", JiveInterpreted, Xint),
                ("jit/JIT", JiveCompiled, Jit),
                ("jit/-O0", JiveCompiled, GccO0),
                ("jit/-O2", JiveCompiled, GccO2),
            ]
        } else {
            vec![
                ("/-Xint", JiveInterpreted, Xint),
                ("/-O0", JiveInterpreted, GccO0),
                ("/-O2", JiveInterpreted, GccO2),
                ("/JIT", JiveInterpreted, Jit),
            ]
        }
    }

    pub(super) fn print_table(&self, reps: usize, rounds: usize) {
        let fmt = |v: f64, floor: f64| -> String {
            if v < floor {
                "~0".to_string()
            } else if v >= 100.0 {
                format!("{v:.0}")
            } else if v >= 1.0 {
                format!("{v:.2}")
            } else {
                format!("{v:.3}")
            }
        };
        let fmt_ratio = |r: Option<f64>| match r {
            Some(r) if r >= 100.0 => format!("{r:.0}"),
            Some(r) => format!("{r:.2}"),
            None => "-".to_string(),
        };
        let compiled = self.has(Runtime::JiveCompiled);
        let ratios = self.ratio_columns();
        let mut s = String::new();
        let _ = writeln!(
            s,
            "JIVE benchmarks (U-Net/SLE Figures 3 and 4): medians of {reps} calls, over {rounds} round{}; loop overhead subtracted (~0: below a tenth of the runtime's null loop, or 0.01 ns); JIVE {}",
            if rounds == 1 { "" } else { "s" },
            if compiled {
                "compiled (--compile) and interpreted"
            } else {
                "interpreted"
            }
        );
        let _ = write!(s, "{:<17} {:>7}", "benchmark", "unit");
        for rt in &self.cols {
            let _ = write!(s, " {:>10}", rt.header());
        }
        let _ = write!(s, " |");
        for (h, _, _) in &ratios {
            let _ = write!(s, " {h:>9}");
        }
        let _ = writeln!(s);
        for (i, r) in self.rows.iter().enumerate() {
            if i == 9 || i == PAPER_ROWS {
                let _ = writeln!(s);
            }
            let _ = write!(s, "{:<17} {:>7}", r.name, r.unit);
            for (v, f) in r.values.iter().zip(&r.floors) {
                let _ = write!(s, " {:>10}", fmt(*v, *f));
            }
            let _ = write!(s, " |");
            for (_, a, b) in &ratios {
                let _ = write!(s, " {:>9}", fmt_ratio(self.ratio(r, *a, *b)));
            }
            let mut mark = String::new();
            if matches!(self.ratio(r, Runtime::JiveInterpreted, Runtime::Xint), Some(x) if x > 1.2)
            {
                mark.push_str(" *");
            }
            if matches!(self.ratio(r, Runtime::JiveCompiled, Runtime::Jit), Some(x) if x > 3.0) {
                mark.push_str(" +");
            }
            let _ = writeln!(s, "{mark}");
        }
        let _ = writeln!(s);
        let worst = |g: &Geomean| match g.worst {
            Some((n, w)) => format!("; the largest {w:.2} ({n})"),
            None => String::new(),
        };
        let g = self.geomean_vs_xint();
        let _ = writeln!(
            s,
            "geometric mean of JIVE interpreted / java -Xint over {} of the {PAPER_ROWS} benchmarks: {} (target <= 0.7; none above 1.2, marked *){}",
            g.of,
            fmt_ratio(g.value),
            worst(&g)
        );
        let g = self.geomean_vs_jit();
        let _ = writeln!(
            s,
            "geometric mean of JIVE {} / java JIT over {} of the {PAPER_ROWS} benchmarks: {} (target for compiled JIVE <= 1.5, none above 3, marked +){}",
            if compiled { "compiled" } else { "interpreted" },
            g.of,
            fmt_ratio(g.value),
            worst(&g)
        );
        if let Some(c) = &self.compile {
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            let _ = writeln!(
                s,
                "compiling the class: {} methods in {:.1} ms (target < 50), the slowest {:.2} ms; loading and verifying it: {:.1} ms ({:.1}x)",
                c.methods,
                ms(c.total),
                ms(c.slowest),
                ms(c.load),
                ms(c.total) / ms(c.load).max(1e-6)
            );
        }
        let h = self.host_call_ns;
        let _ = writeln!(
            s,
            "host-to-applet call of a method that returns at once ({}): {:.1} ns through Vm::invoke_prepared (target <= 5), {:.1} ns through Vm::invoke (arguments checked per call); baseline, an indirect call of a Rust function: {:.1} ns ({:.1}x, {:.1}x)",
            if compiled { "compiled" } else { "interpreted" },
            h.prepared,
            h.checked,
            h.floor,
            h.prepared / h.floor,
            h.checked / h.floor
        );
        print!("{s}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One column: the null loop at `null` ns per iteration, every other
    /// benchmark at `null + net` ns per operation (macro: µs per run).
    fn column(null: f64, net: f64) -> Vec<Raw> {
        (0..BENCHES.len())
            .map(|i| Raw {
                n: 1000,
                checksum: 7,
                timed_n: 1000,
                median_ns: 1000.0 * if i == 0 { null } else { null + net },
            })
            .collect()
    }

    #[test]
    fn a_difference_below_a_tenth_of_the_null_loop_forms_no_ratio() {
        use Runtime::*;
        let cols = vec![JiveCompiled, JiveInterpreted, GccO0, GccO2, Xint, Jit];
        // Compiled JIVE: a 1 ns loop, 0.05 ns more per operation (noise);
        // the JIT: a 0.1 ns loop, 0.05 ns more (half its loop: measured).
        let columns = vec![
            column(1.0, 0.05),
            column(7.0, 2.0),
            column(0.7, 0.3),
            column(0.5, 0.3),
            column(8.0, 3.0),
            column(0.1, 0.05),
        ];
        let r = Report::new(cols.clone(), &columns, HostCall::default());
        let read = &r.rows[2];
        assert!((read.values[5] - 0.05).abs() < 1e-9);
        assert_eq!(r.ratio(read, JiveCompiled, Jit), None);
        let x = r.ratio(read, JiveInterpreted, Xint).unwrap();
        assert!((x - 2.0 / 3.0).abs() < 1e-9);
        // The null loop itself and the macro benchmarks (per run, in µs)
        // keep the absolute resolution, 0.01 ns.
        assert!((r.ratio(&r.rows[0], JiveCompiled, Jit).unwrap() - 10.0).abs() < 1e-9);
        assert!(r.rows[9..PAPER_ROWS]
            .iter()
            .all(|row| row.floors.iter().all(|f| *f == RESOLUTION / 1000.0)));
        // Only the paper's rows where both are measured count (here the
        // null loop and the macro rows, whose 0.05 ns a run is above
        // 0.01 ns: the micro rows are hidden in their loops); the largest
        // is named.
        let g = r.geomean(JiveCompiled, Jit);
        assert_eq!(g.of, 1 + (PAPER_ROWS - 9));
        assert_eq!(g.worst.unwrap().0, "null-loop");
        assert_eq!(r.geomean(JiveInterpreted, Xint).of, PAPER_ROWS);
        // A macro row under 0.01 ns a run forms no ratio.
        let tiny = vec![
            column(1.0, 0.005),
            column(7.0, 2.0),
            column(0.7, 0.3),
            column(0.5, 0.3),
            column(8.0, 3.0),
            column(0.1, 0.05),
        ];
        let t = Report::new(cols, &tiny, HostCall::default());
        assert_eq!(t.ratio(&t.rows[9], JiveCompiled, Jit), None);
    }
}
