//! `unet report --quick`: a few figures run into one HTML page, which
//! headless Chromium loads: the page's own count of figures says every
//! one ran or was skipped with its reason, each SVG plot is drawn, and the
//! screenshot is a rendered page (not blank).

mod common;

use std::process::Command;

use common::browser::{browse, chromium, screenshot};
use common::*;

#[test]
fn a_quick_report_renders_in_a_browser() {
    // Fails at once, clearly, without it.
    chromium();
    let dir = TempDir::new("report");
    let page = dir.0.join("report.html");
    let out = Command::new(unet_bin())
        .args([
            "report",
            "--quick",
            "--only",
            "udm-table6,udm-fig9-10,spine-lookup,sle-fig7",
        ])
        .arg("--out")
        .arg(&page)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "unet report failed:\n{err}");
    assert!(
        err.contains("[1/4]") && err.contains("[4/4]"),
        "progress: {err}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    for id in ["udm-table6", "udm-fig9-10", "spine-lookup", "sle-fig7"] {
        assert!(html.contains(&format!("id=\"{id}\"")), "{id} in the page");
    }
    // The full table may be absent on this machine: then the page says so.
    let lookup_ran = html.contains("<section class=\"figure ran\" id=\"spine-lookup\">");
    assert!(
        lookup_ran || html.contains("needs the full Internet table"),
        "the lookup ran or says why not"
    );
    let plots = 3 + usize::from(lookup_ran);
    assert!(html.matches("<svg").count() >= plots, "the SVGs are inline");
    // U-Net/SLE Figure 7's bars: ours beside the paper's LanAI figures.
    let fig7 = html
        .split("id=\"sle-fig7\"")
        .nth(1)
        .and_then(|s| s.split("</section>").next())
        .unwrap_or_default();
    assert!(
        fig7.contains("<svg")
            && fig7.contains("paper (LanAI), 40 B")
            && fig7.contains("unet, 1000 B"),
        "Figure 7's plot: {fig7:.2000}"
    );

    // The browser runs the page's script: its count of the figures.
    let url = format!("file://{}", page.display());
    let dom = browse(&url, &dir.0, "--dump-dom", (1200, 1600), 1000);
    let count = dom
        .split("<p id=\"count\">")
        .nth(1)
        .and_then(|s| s.split('<').next())
        .unwrap_or_else(|| panic!("no count in the rendered page:\n{dom}"));
    let ran = if lookup_ran { 4 } else { 3 };
    assert!(
        count.starts_with(&format!("figures: 4; ran: {ran}; plots: ")),
        "{count}"
    );
    let drawn: usize = count.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(drawn >= plots, "{count}");

    // A screenshot: a page with text and plots, not a blank one.
    let (w, h, px) = screenshot(&url, &dir.0, "report.png", (1200, 1600), 1000);
    let dark = px.iter().filter(|p| p.iter().all(|&c| c < 128)).count();
    let all = (w * h) as usize;
    assert!(
        dark > all / 200,
        "the screenshot is nearly blank: {dark} dark pixels of {all}"
    );
}
