//! `unet bench udm --svg DIR`: Tables 4, 5 and 6 drawn as SVG files, our
//! figures beside the paper's own where the paper gives one (its cycles at
//! 20 MHz, 50 ns each; no point where it gives none). The rows are
//! numbered along the x axis (the axis' description names them) and the
//! times are on a log axis: the paper's machine is far slower.

use super::*;

/// One row of a table to draw: its short name (the key of its JSON row),
/// our time (ns), and the paper's cycles if it gives them.
pub(super) struct Row<'a> {
    pub name: &'a str,
    pub ns: f64,
    pub paper_cycles: Option<f64>,
}

/// The x axis' description: each row's number and name.
fn legend(names: &[&str]) -> String {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{} {}", i + 1, n.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Draw `rows` as `dir/file`: ours as one line over the rows, the
/// paper's as points at the rows it has.
pub(super) fn rows_svg(dir: &Path, file: &str, title: &str, rows: &[Row]) -> Res<()> {
    let x = |i: usize| (i + 1) as f64;
    let ours = Series {
        name: "measured here (ns)".into(),
        points: rows.iter().enumerate().map(|(i, r)| (x(i), r.ns)).collect(),
    };
    let paper: Vec<(f64, f64)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.paper_cycles.map(|c| (x(i), c * PAPER_NS_PER_CYCLE)))
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
    write(
        dir,
        file,
        &Figure {
            title,
            x_desc: &format!("row: {}", legend(&names)),
            y_desc: "ns per message",
            lines: vec![ours],
            paper: paper_series("the paper (cycles x 50 ns)", paper),
            scale: Scale::LogLog,
        },
    )
}

/// One application's row of Table 6 to draw: our times between
/// communication events and per handler (ns), and the paper's (cycles).
pub(super) struct AppRow<'a> {
    pub name: &'a str,
    pub between_ns: f64,
    pub handler_ns: f64,
    pub paper: Option<(f64, f64)>,
}

/// Draw Table 6's times as `dir/table6.svg`.
pub(super) fn table6_svg(dir: &Path, nodes: u32, rows: &[AppRow]) -> Res<()> {
    let x = |i: usize| (i + 1) as f64;
    let ours = |name: &str, f: fn(&AppRow) -> f64| Series {
        name: name.into(),
        points: rows.iter().enumerate().map(|(i, r)| (x(i), f(r))).collect(),
    };
    let theirs = |f: fn((f64, f64)) -> f64| -> Vec<(f64, f64)> {
        rows.iter()
            .enumerate()
            .filter_map(|(i, r)| r.paper.map(|p| (x(i), f(p) * PAPER_NS_PER_CYCLE)))
            .collect()
    };
    let mut paper = paper_series("the paper: between events", theirs(|p| p.0));
    paper.extend(paper_series("the paper: per handler", theirs(|p| p.1)));
    let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
    write(
        dir,
        "table6.svg",
        &Figure {
            title: &format!(
                "Table 6: time between communication events and per handler ({nodes} nodes; \
                 the paper: 8)"
            ),
            x_desc: &format!("application: {}", legend(&names)),
            y_desc: "ns",
            lines: vec![
                ours("here: between events", |r| r.between_ns),
                ours("here: per handler", |r| r.handler_ns),
            ],
            paper,
            scale: Scale::LogLog,
        },
    )
}

/// The paper's points as a series, none if it gives none.
fn paper_series(name: &str, points: Vec<(f64, f64)>) -> Vec<Series> {
    if points.is_empty() {
        return Vec::new();
    }
    vec![Series {
        name: name.into(),
        points,
    }]
}

fn write(dir: &Path, file: &str, f: &Figure) -> Res<()> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    plot::write_svg(f, &dir.join(file))
}
