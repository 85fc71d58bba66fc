//! `unet bench overhead`'s rows and its table: the steps in order, their
//! labels, and the paper's Figure 7 figures beside ours.

use super::{Args, BATCH, SIZES, TARGET_NS};
use crate::bench::bars::{write_bars_svg, BarChart, Bars};

/// One reported step.
pub(super) struct Row {
    pub(super) dir: &'static str,
    pub(super) size: usize,
    pub(super) applet: &'static str,
    pub(super) step: &'static str,
    pub(super) ns: f64,
}

/// Order of the steps in the table.
const STEP_ORDER: [&str; 11] = [
    "validate",
    "applet_call",
    "null_native",
    "get_free_buffer",
    "dma_setup",
    "data_movement",
    "deliver",
    "tx_push",
    "descriptor_push",
    "end_to_end",
    "total",
];

/// The paper's Figure 7 (LanAI, µs) for the steps that have a
/// counterpart there: direction, step, and at 40 and 1000 bytes the rows
/// of the paper the step sums (`applet_call` merges two; empty where the
/// paper has no such row at that size). `null_native` is per call and not
/// part of the paper's sums.
const PAPER: &[(&str, &str, [&[f64]; 2])] = &[
    ("tx", "applet_call", [&[0.7, 3.9], &[0.7, 3.9]]),
    ("tx", "null_native", [&[5.5], &[5.5]]),
    ("tx", "dma_setup", [&[11.8], &[11.8]]),
    ("tx", "tx_push", [&[8.1], &[8.1]]),
    ("tx", "total", [&[24.5], &[24.5]]),
    ("rx", "applet_call", [&[0.6, 3.2], &[0.6, 3.2]]),
    ("rx", "null_native", [&[5.5], &[5.5]]),
    ("rx", "get_free_buffer", [&[], &[5.85]]),
    ("rx", "dma_setup", [&[], &[11.8]]),
    ("rx", "descriptor_push", [&[12.9], &[21.0]]),
    ("rx", "total", [&[16.7], &[42.5]]),
];

/// The paper's rows for a step at each size, if it has any.
fn paper_rows(dir: &str, step: &str) -> Option<[&'static [f64]; 2]> {
    PAPER
        .iter()
        .find(|(d, s, _)| *d == dir && *s == step)
        .map(|(_, _, v)| *v)
}

/// The paper's figure for a step at `size` (one of `SIZES`), µs.
pub(super) fn paper_us(dir: &str, step: &str, size: usize) -> Option<f64> {
    let k = SIZES.iter().position(|&s| s == size)?;
    let parts = paper_rows(dir, step)?[k];
    (!parts.is_empty()).then(|| parts.iter().sum())
}

/// The paper's column of the table: "40-byte / 1000-byte", the rows a
/// merged step sums joined by `+`.
fn paper(dir: &str, step: &str) -> String {
    let Some(rows) = paper_rows(dir, step) else {
        return String::new();
    };
    let cell = |parts: &[f64]| {
        if parts.is_empty() {
            return "-".to_string();
        }
        parts
            .iter()
            .map(|v| {
                if v.fract() == 0.0 {
                    format!("{v:.1}")
                } else {
                    format!("{v}")
                }
            })
            .collect::<Vec<_>>()
            .join("+")
    };
    let text = format!("{} / {}", cell(rows[0]), cell(rows[1]));
    if step == "null_native" {
        format!("({text})")
    } else {
        text
    }
}

/// The label of a step in the table (merged steps say what they hold).
fn label(dir: &str, applet: &str, step: &str) -> &'static str {
    match (dir, applet, step) {
        (_, "RawUnet", "applet_call") => "find_applet + call_return",
        ("rx", _, "validate") => "validate (sending side)",
        (_, _, "deliver") => "deliver (route, U-Net delivery)",
        (_, "RawUnet", "total") => "total (added)",
        (_, _, "null_native") => "(null_native)",
        _ => match STEP_ORDER.iter().find(|s| **s == step) {
            Some(s) => s,
            None => "?",
        },
    }
}

pub(super) fn print_table(rows: &[Row], a: &Args, load: &str, clock_ns: f64) {
    println!(
        "U-Net/SLE per-message overhead, ns, of the engine stepped in this process: median of \
         {} repetitions x {} batches of {} (load average {load}; one clock read {clock_ns:.0} ns); \
         applets {}",
        a.reps,
        a.batches,
        BATCH,
        if a.interpret {
            "interpreted (--interpret)"
        } else {
            "compiled by JIVE"
        }
    );
    let width = rows
        .iter()
        .map(|r| label(r.dir, r.applet, r.step).len())
        .max()
        .unwrap_or(0)
        .max(36);
    for (dir, title) in [("tx", "Transmit"), ("rx", "Receive")] {
        for applet in ["RawUnet", "none"] {
            println!();
            let who = if applet == "none" {
                "no applet".to_string()
            } else {
                format!("{applet} applet")
            };
            let paper_head = if applet == "none" { "" } else { "paper, us" };
            let head = format!(
                "{:<w$}   {:>9} {:>9}   {paper_head}",
                format!("{title} overhead, {who}"),
                "40-byte",
                "1000-byte",
                w = width
            );
            println!("{}", head.trim_end());
            let steps = STEP_ORDER.iter().copied().filter(|step| {
                rows.iter()
                    .any(|r| r.dir == dir && r.applet == applet && r.step == *step)
            });
            for step in steps {
                let cell = |size: usize| {
                    rows.iter()
                        .find(|r| {
                            r.dir == dir && r.applet == applet && r.step == step && r.size == size
                        })
                        .map_or("-".to_string(), |r| format!("{:.1}", r.ns))
                };
                let mut line = format!(
                    "  {:<w$} {:>9} {:>9}",
                    label(dir, applet, step),
                    cell(SIZES[0]),
                    cell(SIZES[1]),
                    w = width
                );
                if applet != "none" {
                    line.push_str(&format!("   {}", paper(dir, step)));
                }
                if step == "total" && applet != "none" {
                    let ok = SIZES.iter().all(|&s| {
                        rows.iter().any(|r| {
                            r.dir == dir
                                && r.applet == applet
                                && r.step == "total"
                                && r.size == s
                                && r.ns <= TARGET_NS
                        })
                    });
                    line.push_str(&format!(
                        "   target <= {TARGET_NS:.0} ns: {}",
                        if ok { "met" } else { "NOT met" }
                    ));
                }
                println!("{}", line.trim_end());
            }
        }
    }
    println!();
    println!(
        "end_to_end: RawUnet through the engine, per message; total (added) = end_to_end - \
         no-applet total."
    );
    println!(
        "validate: a send on a channel whose peer closed its end: every check the engine makes, \
         no delivery."
    );
    println!(
        "The engine finds and calls an applet in one piece of code: the paper's find_applet and \
         call_return are one row."
    );
    println!(
        "On receive the message is lent to RxBuf, not copied (the paper's rxbuf_copy): these \
         applets pass RxBuf only to natives, in doRx only."
    );
    println!(
        "Every figure holds its share of the engine loop's turns (up to 64 descriptors a turn \
         from an endpoint, fewer once its applet used 20 000 units of work in the turn)."
    );
    println!(
        "Each step and total is the median over repetitions of a difference taken within one \
         repetition."
    );
    println!("(null_native) is per call and, as in the paper, not part of the sum.");
}

/// Figure 7 as bars: each RawUnet step, ours and the paper's at both
/// sizes, µs on a log axis (today's nanoseconds beside the LanAI's
/// microseconds).
pub(super) fn write_svg(rows: &[Row], path: &std::path::Path) -> Result<(), String> {
    let mut cats = Vec::new();
    let mut series: Vec<Bars> = [
        "unet, 40 B",
        "unet, 1000 B",
        "paper (LanAI), 40 B",
        "paper (LanAI), 1000 B",
    ]
    .iter()
    .map(|n| Bars {
        name: n.to_string(),
        values: Vec::new(),
    })
    .collect();
    for dir in ["tx", "rx"] {
        for step in STEP_ORDER {
            let ours = |size: usize| {
                rows.iter()
                    .find(|r| {
                        r.dir == dir && r.applet == "RawUnet" && r.step == step && r.size == size
                    })
                    .map(|r| r.ns / 1000.0)
            };
            let vals = [
                ours(SIZES[0]),
                ours(SIZES[1]),
                paper_us(dir, step, SIZES[0]),
                paper_us(dir, step, SIZES[1]),
            ];
            if vals.iter().all(Option::is_none) {
                continue;
            }
            cats.push(format!("{dir} {}", label(dir, "RawUnet", step)));
            for (s, v) in series.iter_mut().zip(vals) {
                s.values.push(v);
            }
        }
    }
    write_bars_svg(
        &BarChart {
            title: "U-Net/SLE Figure 7: RawUnet's overhead per message, step by step",
            y_desc: "microseconds (log)",
            categories: cats,
            series,
            log: true,
        },
        path,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_column_reads_as_the_paper_prints_it() {
        assert_eq!(paper("tx", "applet_call"), "0.7+3.9 / 0.7+3.9");
        assert_eq!(paper("rx", "descriptor_push"), "12.9 / 21.0");
        assert_eq!(paper("rx", "get_free_buffer"), "- / 5.85");
        assert_eq!(paper("tx", "null_native"), "(5.5 / 5.5)");
        assert_eq!(paper("tx", "deliver"), "");
        assert_eq!(paper_us("tx", "applet_call", 40), Some(4.6));
        assert_eq!(paper_us("rx", "dma_setup", 40), None);
        assert_eq!(paper_us("rx", "total", 1000), Some(42.5));
    }
}
