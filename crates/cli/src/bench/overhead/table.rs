//! `unet bench overhead`'s rows and its table: the steps in order, their
//! labels, and the paper's Figure 7 figures beside ours.

use super::{Args, BATCH, SIZES, TARGET_NS};

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

/// The paper's Figure 7 (LanAI, µs), 40-byte / 1000-byte, for the steps
/// that have a counterpart there (`applet_call`: the sum of the two rows
/// it merges).
fn paper(dir: &str, step: &str) -> &'static str {
    match (dir, step) {
        ("tx", "applet_call") => "0.7+3.9 / 0.7+3.9",
        ("tx", "null_native") | ("rx", "null_native") => "(5.5 / 5.5)",
        ("tx", "dma_setup") => "11.8 / 11.8",
        ("tx", "tx_push") => "8.1 / 8.1",
        ("tx", "total") => "24.5 / 24.5",
        ("rx", "applet_call") => "0.6+3.2 / 0.6+3.2",
        ("rx", "get_free_buffer") => "- / 5.85",
        ("rx", "dma_setup") => "- / 11.8",
        ("rx", "descriptor_push") => "12.9 / 21.0",
        ("rx", "total") => "16.7 / 42.5",
        _ => "",
    }
}

/// The label of a step in the table (merged steps say what they hold).
fn label(dir: &str, applet: &str, step: &str) -> &'static str {
    match (dir, applet, step) {
        ("tx", "RawUnet", "applet_call") => "find_applet + call_return",
        ("rx", "RawUnet", "applet_call") => "rxbuf_copy + find_applet + call_return",
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
         call_return (on receive, with the copy into RxBuf) are one row."
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
