//! `unet bench jive --svg DIR`: the U-Net/SLE paper's Figures 3 and 4 as
//! the paper draws them, each runtime's time over unoptimised C's (gcc
//! -O0) per benchmark: ours for JIVE interpreted and compiled and HotSpot
//! `-Xint` and JIT, and the paper's own ratios for its runtimes (JIVE,
//! Kaffe with its JIT, Sun's JVM 1.1.5, Kaffe interpreted), computed from
//! the tables of its section 4 where they give both figures (field-read
//! and field-write have no C figure there, so no paper bar).

use std::path::Path;

use super::super::bars::{write_bars_svg, BarChart, Bars};
use super::report::{Report, PAPER_ROWS};
use super::{Runtime, BENCHES};

/// The paper's runtimes, in the order of the tables' columns below.
const PAPER_RUNTIMES: [&str; 4] = [
    "JIVE",
    "Kaffe (JIT)",
    "Kaffe (interpreted)",
    "Sun JVM 1.1.5",
];

/// The paper's microbenchmark table (section 4.1, us per operation):
/// unoptimised C, then the four runtimes of [`PAPER_RUNTIMES`]; `None`
/// where the paper has no C figure (N/A).
const PAPER_MICRO: [(&str, Option<f64>, [f64; 4]); 9] = [
    ("null-loop", Some(0.08), [0.75, 0.09, 0.95, 0.41]),
    ("null-call", Some(0.12), [2.32, 0.28, 9.47, 1.07]),
    ("field-read", None, [1.38, 0.13, 2.02, 0.57]),
    ("field-write", None, [1.41, 0.12, 2.03, 0.58]),
    ("array-read", Some(0.11), [1.46, 0.16, 1.8, 0.76]),
    ("array-write", Some(0.11), [1.51, 0.15, 2.2, 0.76]),
    ("math", Some(0.20), [4.07, 0.17, 4.86, 2.03]),
    ("math-field", Some(0.20), [7.55, 0.47, 13.6, 2.28]),
    ("math-array", Some(0.32), [8.35, 0.62, 10.0, 4.23]),
];

/// The paper's macrobenchmark table (section 4.2, us per execution), as
/// [`PAPER_MICRO`] (its optimised C column is not drawn in Figure 4).
const PAPER_MACRO: [(&str, Option<f64>, [f64; 4]); 3] = [
    ("qsort", Some(2130.0), [24800.0, 2750.0, 46800.0, 11700.0]),
    ("rand", Some(3.8), [11.8, 3.2, 11.0, 5.5]),
    ("fibonacci", Some(0.19), [2.15, 0.16, 2.52, 1.04]),
];

/// Our runtimes drawn, with their names in the legend (see
/// [`PAPER_RUNTIMES`] for the order).
const OURS: [(Runtime, &str); 4] = [
    (Runtime::JiveCompiled, "JIVE compiled"),
    (Runtime::JiveInterpreted, "JIVE interpreted"),
    (Runtime::Jit, "HotSpot JIT"),
    (Runtime::Xint, "HotSpot -Xint"),
];

/// The paper's ratios to unoptimised C in `table`, one series per runtime,
/// a value per benchmark in the table's order (`None` where the paper
/// has no C figure).
fn paper_series(table: &[(&str, Option<f64>, [f64; 4])]) -> Vec<Bars> {
    PAPER_RUNTIMES
        .iter()
        .enumerate()
        .map(|(k, name)| Bars {
            name: format!("paper: {name}"),
            values: table.iter().map(|(_, c, v)| Some(v[k] / (*c)?)).collect(),
        })
        .collect()
}

/// Our ratios to gcc -O0 over `rows` (indices into the report), one series
/// per runtime of [`OURS`] that was measured.
fn our_series(r: &Report, rows: std::ops::Range<usize>) -> Vec<Bars> {
    OURS.iter()
        .filter(|(rt, _)| r.has(*rt))
        .map(|(rt, name)| Bars {
            name: format!("{name} (this machine)"),
            values: r.rows[rows.clone()]
                .iter()
                .map(|row| r.ratio(row, *rt, Runtime::GccO0))
                .collect(),
        })
        .collect()
}

/// Writes `dir/figure3.svg` (the microbenchmarks) and `dir/figure4.svg`
/// (the macrobenchmarks): for each benchmark a bar per runtime, ours and
/// then the paper's, on a log axis.
pub(super) fn write(r: &Report, dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let micro: Vec<&str> = BENCHES[..9].iter().map(|b| b.0).collect();
    let macro_: Vec<&str> = BENCHES[9..PAPER_ROWS].iter().map(|b| b.0).collect();
    debug_assert!(micro.iter().zip(PAPER_MICRO).all(|(a, b)| *a == b.0));
    debug_assert!(macro_.iter().zip(PAPER_MACRO).all(|(a, b)| *a == b.0));
    for (file, title, names, rows, paper) in [
        (
            "figure3.svg",
            "U-Net/SLE Figure 3: microbenchmarks, time over unoptimised C",
            &micro,
            0..9,
            paper_series(&PAPER_MICRO),
        ),
        (
            "figure4.svg",
            "U-Net/SLE Figure 4: macrobenchmarks, time over unoptimised C",
            &macro_,
            9..PAPER_ROWS,
            paper_series(&PAPER_MACRO),
        ),
    ] {
        let mut series = our_series(r, rows);
        series.extend(paper);
        write_bars_svg(
            &BarChart {
                title,
                y_desc: "execution time / unoptimised C (gcc -O0), log",
                categories: names.iter().map(|n| n.to_string()).collect(),
                series,
                log: true,
            },
            &dir.join(file),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_ratios_come_from_its_tables_only() {
        let s = paper_series(&PAPER_MICRO);
        assert_eq!(s.len(), 4);
        // JIVE's null-call: 2.32 us over C's 0.12 us.
        let jive = &s[0].values;
        assert!((jive[1].unwrap() - 2.32 / 0.12).abs() < 1e-9);
        // field-read and field-write have no C figure: no bar there.
        assert_eq!(jive.len(), 9);
        assert_eq!(jive.iter().flatten().count(), 7);
        assert!(jive[2].is_none() && jive[3].is_none());
        let m = paper_series(&PAPER_MACRO);
        assert!((m[1].values[0].unwrap() - 2750.0 / 2130.0).abs() < 1e-9);
    }
}
