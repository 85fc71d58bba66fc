//! `unet report --quick`: every figure of the papers run into one HTML
//! page (about a minute here), which headless Chromium loads: each figure
//! ran and drew its plots, or was skipped with the requirement it lacks;
//! the page's own count of figures agrees; the screenshot is a rendered
//! page (not blank).

mod common;

use std::process::Command;

use common::browser::{browse, chromium, screenshot};
use common::*;

/// The figures `unet report --list` names, in order.
fn figure_ids() -> Vec<String> {
    let out = Command::new(unet_bin())
        .args(["report", "--list"])
        .output()
        .unwrap();
    assert!(out.status.success(), "unet report --list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// The `<section>` of figure `id` in `html`, and whether it ran.
fn section<'a>(html: &'a str, id: &str) -> (&'a str, bool) {
    for class in ["ran", "skipped", "failed"] {
        let open = format!("<section class=\"figure {class}\" id=\"{id}\">");
        if let Some(rest) = html.split(&open).nth(1) {
            let body = rest.split("</section>").next().unwrap_or_default();
            assert_ne!(class, "failed", "{id} failed: {body:.3000}");
            return (body, class == "ran");
        }
    }
    panic!("no section for {id} in the page");
}

#[test]
fn a_quick_report_of_every_figure_renders_in_a_browser() {
    // Fails at once, clearly, without it.
    chromium();
    let ids = figure_ids();
    assert!(ids.len() >= 14, "{ids:?}");
    let dir = TempDir::new("report");
    let page = dir.0.join("report.html");
    let out = Command::new(unet_bin())
        .args(["report", "--quick", "--out"])
        .arg(&page)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "unet report failed:\n{err}");
    let n = ids.len();
    assert!(
        err.contains("[1/") && err.contains(&format!("[{n}/{n}]")),
        "progress: {err}"
    );
    let html = std::fs::read_to_string(&page).unwrap();

    // Each figure ran and drew at least one plot, or says which of its
    // requirements this machine lacks.
    let mut ran = 0;
    let mut plots = 0;
    for id in &ids {
        let (body, did) = section(&html, id);
        if did {
            ran += 1;
            let svgs = body.matches("<svg").count();
            assert!(svgs >= 1, "{id} ran but drew no plot");
            plots += svgs;
        } else {
            assert!(
                ["root", "JDK", "Maven", "full Internet table"]
                    .iter()
                    .any(|need| body.contains(need)),
                "{id} skipped without a reason: {body:.2000}"
            );
        }
    }
    // Tests run as root with a JDK (`scripts/test` sees to it): only the
    // full Internet table may be absent.
    assert!(ran + 1 >= n, "{ran} of {n} figures ran:\n{err}");

    // U-Net/SLE Figure 7's bars: ours beside the paper's LanAI figures.
    let (fig7, _) = section(&html, "sle-fig7");
    assert!(
        fig7.contains("paper (LanAI), 40 B") && fig7.contains("unet, 1000 B"),
        "Figure 7's plot: {fig7:.2000}"
    );
    // JIVE's Figures 3 and 4 beside the paper's runtimes.
    let (jive, _) = section(&html, "jive-fig3-4");
    assert!(
        jive.contains("paper: Kaffe (JIT)") && jive.contains("HotSpot JIT (this machine)"),
        "Figures 3 and 4: {jive:.2000}"
    );

    // The browser runs the page's script: its count of the figures.
    let url = format!("file://{}", page.display());
    let dom = browse(&url, &dir.0, "--dump-dom", (1200, 1600), 2000);
    let count = dom
        .split("<p id=\"count\">")
        .nth(1)
        .and_then(|s| s.split('<').next())
        .unwrap_or_else(|| panic!("no count in the rendered page:\n{dom:.2000}"));
    assert!(
        count.starts_with(&format!("figures: {n}; ran: {ran}; plots: ")),
        "{count}"
    );
    let drawn: usize = count.rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(drawn, plots, "{count}");

    // A screenshot: a page with text and plots, not a blank one.
    let (w, h, px) = screenshot(&url, &dir.0, "report.png", (1200, 1600), 2000);
    let dark = px.iter().filter(|p| p.iter().all(|&c| c < 128)).count();
    let all = (w * h) as usize;
    assert!(
        dark > all / 200,
        "the screenshot is nearly blank: {dark} dark pixels of {all}"
    );
}
