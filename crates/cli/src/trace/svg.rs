//! The event graph drawn in the style of SPINE's Figure 6: event types
//! down the side, time across, a box per event (its width is the
//! event's length), and arrows following one message (the middle one of
//! the trace) through its events. The window is that message's way with
//! two periods either side, so that its neighbours show the pipeline's
//! rhythm; at most [`MAX_BOXES`] boxes are drawn.

use std::collections::BTreeSet;
use std::fmt::Write;

use unet_engine::TraceDump;

use super::analysis::Analysis;
use super::chrome::{predecessors, type_name};

/// Most boxes drawn (the earliest in the window).
pub const MAX_BOXES: usize = 5000;
const LEFT: f64 = 150.0;
const PLOT_W: f64 = 1000.0;
const TOP: f64 = 40.0;
const ROW_H: f64 = 24.0;
const BOTTOM: f64 = 50.0;

/// `s` with XML's special characters escaped.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The time window drawn, ns: the followed message's way and `pad` ns
/// either side (None: two periods), or the whole trace.
fn window(d: &TraceDump, an: &Analysis, pad: Option<u64>) -> (u64, u64) {
    let first = d.events.iter().map(|e| e.start_ns).min().unwrap_or(0);
    let last = d
        .events
        .iter()
        .map(|e| e.start_ns.saturating_add(e.len_ns))
        .max()
        .unwrap_or(1);
    match (an.followed(), an.period) {
        (Some(m), Some(p)) => {
            let pad = pad.unwrap_or_else(|| p.median.max(1).saturating_mul(2));
            (
                m.begin.saturating_sub(pad).max(first),
                m.end.saturating_add(pad).min(last),
            )
        }
        _ => (first, last),
    }
}

/// A tick step of 1, 2 or 5 times a power of ten, about a tenth of `span`.
fn tick_step(span: u64) -> u64 {
    let raw = (span / 10).max(1);
    let mut p = 1u64;
    while let Some(q) = p.checked_mul(10).filter(|&q| q <= raw) {
        p = q;
    }
    [1, 2, 5, 10]
        .into_iter()
        .filter_map(|k| p.checked_mul(k))
        .find(|&s| s >= raw)
        .unwrap_or(raw)
}

/// The SVG document.
pub fn render(d: &TraceDump, an: &Analysis) -> String {
    render_padded(d, an, None)
}

/// [`render`] with `pad` ns drawn either side of the followed message's
/// way (None: two periods), to show more of the pipeline's rhythm.
pub fn render_padded(d: &TraceDump, an: &Analysis, pad: Option<u64>) -> String {
    let types: Vec<u16> = d
        .events
        .iter()
        .map(|e| e.ty)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let row = |ty: u16| types.iter().position(|&t| t == ty).unwrap_or(0) as f64;
    let (w0, w1) = window(d, an, pad);
    let span = (w1 - w0).max(1);
    let scale = PLOT_W / span as f64;
    let x = |ns: u64| LEFT + (ns.saturating_sub(w0)) as f64 * scale;
    let height = TOP + ROW_H * types.len().max(1) as f64 + BOTTOM;
    let width = LEFT + PLOT_W + 20.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r#"<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="crimson"/></marker></defs>"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="{width}" height="{height}" fill="white"/>"#
    );
    let title = match (an.period, an.latency) {
        (Some(p), Some(l)) => format!(
            "period {:.3} us (p10 {:.3}, p90 {:.3}), latency {:.3} us (p10 {:.3}, p90 {:.3})",
            p.median as f64 / 1e3,
            p.p10 as f64 / 1e3,
            p.p90 as f64 / 1e3,
            l.median as f64 / 1e3,
            l.p10 as f64 / 1e3,
            l.p90 as f64 / 1e3
        ),
        _ => format!("{} events", d.events.len()),
    };
    let _ = writeln!(s, r#"<text x="{LEFT}" y="20">{}</text>"#, esc(&title));
    // The rows: a label and a faint line per event type.
    for (i, &ty) in types.iter().enumerate() {
        let y = TOP + ROW_H * i as f64;
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" text-anchor="end">{}</text><line x1="{LEFT}" y1="{}" x2="{}" y2="{}" stroke="#ddd"/>"##,
            LEFT - 8.0,
            y + ROW_H * 0.65,
            esc(&type_name(d, ty)),
            y + ROW_H / 2.0,
            LEFT + PLOT_W,
            y + ROW_H / 2.0
        );
    }
    // The time axis, in microseconds from the window's start.
    let axis_y = TOP + ROW_H * types.len() as f64 + 4.0;
    let _ = writeln!(
        s,
        r#"<line x1="{LEFT}" y1="{axis_y}" x2="{}" y2="{axis_y}" stroke="black"/>"#,
        LEFT + PLOT_W
    );
    let step = tick_step(span);
    let mut t = 0;
    while t <= span {
        let tx = LEFT + t as f64 * scale;
        let _ = writeln!(
            s,
            r#"<line x1="{tx:.2}" y1="{axis_y}" x2="{tx:.2}" y2="{}" stroke="black"/><text x="{tx:.2}" y="{}" text-anchor="middle">{}</text>"#,
            axis_y + 5.0,
            axis_y + 18.0,
            t as f64 / 1e3
        );
        match t.checked_add(step) {
            Some(n) => t = n,
            None => break,
        }
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">time (us)</text>"#,
        LEFT + PLOT_W / 2.0,
        axis_y + 36.0
    );
    // The boxes.
    let followed = an.followed().map(|m| m.id);
    let mut drawn = 0;
    for e in &d.events {
        if e.start_ns.saturating_add(e.len_ns) < w0 || e.start_ns > w1 || drawn == MAX_BOXES {
            continue;
        }
        drawn += 1;
        let y = TOP + ROW_H * row(e.ty) + 4.0;
        let fill = if Some(e.msg) == followed && e.msg != 0 {
            "crimson"
        } else {
            "#333"
        };
        let _ = writeln!(
            s,
            r#"<rect x="{:.2}" y="{y}" width="{:.2}" height="{}" fill="{fill}"><title>{} id {} msg {} cause {}: {:.3} us</title></rect>"#,
            x(e.start_ns),
            (e.len_ns as f64 * scale).max(0.5),
            ROW_H - 8.0,
            esc(&type_name(d, e.ty)),
            e.id,
            e.msg,
            e.cause,
            e.len_ns as f64 / 1e3
        );
    }
    // The arrows: the followed message, each event from the one before
    // it on the message's way.
    if let Some(m) = followed {
        for (i, p) in predecessors(&d.events).into_iter().enumerate() {
            let (Some(p), e) = (p, &d.events[i]) else {
                continue;
            };
            if e.msg != m {
                continue;
            }
            let from = &d.events[p];
            let _ = writeln!(
                s,
                r#"<line x1="{:.2}" y1="{:.2}" x2="{:.2}" y2="{:.2}" stroke="crimson" stroke-width="1.5" marker-end="url(#arrow)"/>"#,
                x(from.start_ns.saturating_add(from.len_ns)),
                TOP + ROW_H * row(from.ty) + ROW_H / 2.0,
                x(e.start_ns),
                TOP + ROW_H * row(e.ty) + ROW_H / 2.0
            );
        }
    }
    s.push_str("</svg>\n");
    s
}
