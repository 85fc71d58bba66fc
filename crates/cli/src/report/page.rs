//! `unet report`'s page: one self-contained HTML file (no script, style
//! or image from elsewhere): the machine and the date, a summary of every
//! figure (ran, skipped and why, failed and why), then each figure with
//! its command, its SVG, its rows and its other output. A line of script
//! counts the figures that ran and the plots drawn, and writes the count
//! into the page (`#count`), for a reader and for the browser test.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

use serde_json::Value;

use super::{Done, Outcome};

/// Most rows shown of one figure.
const MAX_ROWS: usize = 400;

/// The page for `done`.
pub(crate) fn render(done: &[Done], quick: bool, took: Duration) -> String {
    let mut h = String::new();
    h.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <title>unet report</title>\n<style>\n\
         body{font-family:sans-serif;margin:2em;max-width:1100px;color:#111}\n\
         table{border-collapse:collapse;font-size:12px;margin:0.5em 0}\n\
         td,th{border:1px solid #bbb;padding:2px 6px;text-align:right}\n\
         th{background:#eee}td.t{text-align:left}\n\
         pre{background:#f6f6f6;padding:0.5em;font-size:12px;overflow-x:auto}\n\
         section.figure{border-top:2px solid #333;margin-top:2em}\n\
         .skipped{color:#8a6d00}.failed{color:#b00}td.ran{color:#060}\n\
         .rows{max-height:420px;overflow:auto}\n\
         </style></head><body>\n<h1>unet report</h1>\n",
    );
    let _ = writeln!(
        h,
        "<p>{} run, {}, {:.0} s. {}</p>",
        if quick { "A quick (rough)" } else { "A full" },
        esc(&now()),
        took.as_secs_f64(),
        esc(&machine())
    );
    h.push_str("<p id=\"count\">(the figures are counted by the page's script)</p>\n");
    h.push_str(
        "<table><tr><th>figure</th><th>paper</th><th>what</th><th>result</th><th>s</th></tr>\n",
    );
    for d in done {
        let (class, what) = match &d.outcome {
            Outcome::Ran { rows, .. } => ("ran", format!("ran: {} rows", rows.len())),
            Outcome::Skipped(why) => ("skipped", format!("skipped: {why}")),
            Outcome::Failed(why) => (
                "failed",
                format!("failed: {}", why.lines().last().unwrap_or("")),
            ),
        };
        let _ = writeln!(
            h,
            "<tr><td class=t><a href=\"#{id}\">{id}</a></td><td class=t>{}</td><td class=t>{}</td>\
             <td class=\"t {class}\">{}</td><td>{:.0}</td></tr>",
            esc(d.spec.paper),
            esc(d.spec.what),
            esc(&what),
            d.secs,
            id = d.spec.id,
        );
    }
    h.push_str("</table>\n");
    for d in done {
        let class = match d.outcome {
            Outcome::Ran { .. } => "ran",
            Outcome::Skipped(_) => "skipped",
            Outcome::Failed(_) => "failed",
        };
        let _ = writeln!(
            h,
            "<section class=\"figure {class}\" id=\"{}\">\n<h2>{}: {}</h2>\n<p><code>{}</code></p>",
            d.spec.id,
            esc(d.spec.paper),
            esc(d.spec.what),
            esc(&d.command)
        );
        if !d.spec.paper_text.is_empty() {
            let _ = writeln!(
                h,
                "<p class=paper><b>The paper:</b> {}</p>",
                esc(d.spec.paper_text)
            );
        }
        match &d.outcome {
            Outcome::Skipped(why) => {
                let _ = writeln!(h, "<p class=skipped>Skipped: {}</p>", esc(why));
            }
            Outcome::Failed(why) => {
                let _ = writeln!(h, "<p class=failed>Failed:</p><pre>{}</pre>", esc(why));
            }
            Outcome::Ran { rows, text, svgs } => {
                for svg in svgs {
                    // The plot inline, without its XML declaration.
                    let body = svg.find("<svg").map_or(svg.as_str(), |i| &svg[i..]);
                    h.push_str("<div class=plot>");
                    h.push_str(body);
                    h.push_str("</div>\n");
                }
                table(&mut h, rows);
                if !text.trim().is_empty() {
                    let _ = writeln!(h, "<pre>{}</pre>", esc(text));
                }
            }
        }
        h.push_str("</section>\n");
    }
    h.push_str(
        "<script>\n\
         const all = document.querySelectorAll('section.figure').length;\n\
         const ran = document.querySelectorAll('section.figure.ran').length;\n\
         const plots = document.querySelectorAll('section.figure svg').length;\n\
         document.getElementById('count').textContent =\n\
         `figures: ${all}; ran: ${ran}; plots: ${plots}`;\n\
         </script>\n</body></html>\n",
    );
    h
}

/// `rows` as a table: a column for every key, in the order first seen.
fn table(h: &mut String, rows: &[Value]) {
    if rows.is_empty() {
        return;
    }
    let mut keys: Vec<&str> = Vec::new();
    let mut seen = BTreeSet::new();
    for r in rows {
        if let Some(o) = r.as_object() {
            for k in o.keys() {
                if seen.insert(k.as_str()) {
                    keys.push(k);
                }
            }
        }
    }
    h.push_str("<div class=rows><table><tr>");
    for k in &keys {
        let _ = write!(h, "<th>{}</th>", esc(k));
    }
    h.push_str("</tr>\n");
    for r in rows.iter().take(MAX_ROWS) {
        h.push_str("<tr>");
        for k in &keys {
            match r.get(*k) {
                None | Some(Value::Null) => h.push_str("<td></td>"),
                Some(Value::String(s)) => {
                    let _ = write!(h, "<td class=t>{}</td>", esc(s));
                }
                Some(Value::Number(n)) => {
                    let _ = write!(h, "<td>{}</td>", number(n));
                }
                Some(v) => {
                    let mut s = v.to_string();
                    if s.len() > 120 {
                        s.truncate(s.char_indices().nth(117).map_or(s.len(), |(i, _)| i));
                        s.push('…');
                    }
                    let _ = write!(h, "<td class=t>{}</td>", esc(&s));
                }
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table></div>\n");
    if rows.len() > MAX_ROWS {
        let _ = writeln!(h, "<p>(the first {MAX_ROWS} of {} rows)</p>", rows.len());
    }
}

/// A number as a reader wants it: integers whole, others to 4 significant
/// digits.
fn number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    match n.as_f64() {
        Some(f) if f.abs() >= 1000.0 => format!("{f:.0}"),
        Some(f) if f.abs() >= 1.0 => format!("{f:.3}"),
        Some(f) => format!("{f:.4}"),
        None => n.to_string(),
    }
}

/// `s` with HTML's special characters escaped.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            c => o.push(c),
        }
    }
    o
}

/// The date and time now (UTC), from `date`.
fn now() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "(date unknown)".into())
}

/// The machine: CPU model, cores, kernel, unet's version, the JDK's.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "an unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let jdk = crate::jdk::Jdk::find().map_or("no JDK 22+".into(), |j| format!("JDK {}", j.version));
    format!(
        "Machine: {cpu}, {cores} cores, Linux {kernel}; unet {}; {jdk}.",
        env!("CARGO_PKG_VERSION")
    )
}
