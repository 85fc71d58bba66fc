//! Output: one JSON object per line per measured point (`--json`), or a
//! readable table with each unet figure beside its baseline and the ratio;
//! and a single updating progress line on stderr when it is a terminal;
//! a command's notes and its error on stderr.

use std::io::IsTerminal;
use std::process::ExitCode;

use serde_json::{json, Value};

use super::plot::{write_svg, Figure, Scale, Series};
use super::stats::{self, fmt_size};

type Res<T> = Result<T, String>;

/// One ping-pong point. `median_us`/`p99_us` are `None` with `--baseline-only`.
pub struct PingRow {
    pub path: &'static str,
    /// The U-Net/SLE applet on both endpoints and where it runs, if any.
    pub applet: Option<(String, &'static str)>,
    pub size: usize,
    pub median_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub samples: usize,
    pub baseline: &'static str,
    pub baseline_median_us: f64,
    pub baseline_p99_us: f64,
    pub baseline_samples: usize,
    /// Cost of one clock read, subtracted from every sample.
    pub clock_ns: f64,
    /// The path's third party alone (median, p99 in µs): the engine
    /// path's forwarder floor, the UDP path's relay floor.
    pub forwarder: Option<(f64, f64)>,
    /// The host floors of the runs (`--host-floor`).
    pub hosts: Option<HostFloors>,
    /// Processes that only spin beside the runs (`--load`).
    pub load: usize,
    /// Round trips per sample (`--group`).
    pub group: usize,
}

/// The host floor taken before each run of a point (`--host-floor`), in
/// nanoseconds (None where the probe had no figure), and the ratio of
/// unet's runs to the baseline's paired by it.
pub struct HostFloors {
    pub unet: Vec<Option<f64>>,
    pub baseline: Vec<Option<f64>>,
    pub forwarder: Vec<Option<f64>>,
    pub ratio_placed: Option<f64>,
}

impl HostFloors {
    fn json(&self) -> Value {
        json!({
            "host_ns_runs": self.unet,
            "baseline_host_ns_runs": self.baseline,
            "forwarder_host_ns_runs": self.forwarder,
            "ratio_placed": self.ratio_placed,
        })
    }

    /// The line printed under a point.
    fn line(&self) -> String {
        let list = |v: &[Option<f64>]| {
            v.iter()
                .map(|h| h.map_or("-".into(), |h| format!("{h:.0}")))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut s = format!(
            "  host floor (2-line round trip, cores 0-1), ns before each run: unet {}; baseline {}",
            list(&self.unet),
            list(&self.baseline)
        );
        if !self.forwarder.is_empty() {
            s += &format!("; forwarder {}", list(&self.forwarder));
        }
        s + &format!("; ratio by placement {}", opt(self.ratio_placed, 2))
    }
}

/// `row`'s JSON with the fields of `hosts` added.
fn with_hosts(mut row: Value, hosts: &Option<HostFloors>) -> Value {
    if let (Some(h), Value::Object(m)) = (hosts, &mut row) {
        if let Value::Object(extra) = h.json() {
            m.extend(extra);
        }
    }
    row
}

/// One stream point; throughputs are medians over the repetitions.
pub struct StreamRow {
    pub path: &'static str,
    /// The U-Net/SLE applet on both endpoints and where it runs, if any.
    pub applet: Option<(String, &'static str)>,
    pub size: usize,
    pub burst: usize,
    /// Messages per `send_many` / `recv_many` call on unet's side.
    pub batch: usize,
    pub msgs_per_s: Option<f64>,
    pub baseline: &'static str,
    pub baseline_msgs_per_s: f64,
    /// msgs/s of each run, in order (the figures above are their medians).
    pub runs: Vec<f64>,
    pub baseline_runs: Vec<f64>,
    /// Median share of the messages sent that the receiver got (None when
    /// not measured, or when the sends are not the messages counted).
    pub delivered: Option<f64>,
    pub baseline_delivered: Option<f64>,
    /// The host floors of the runs (`--host-floor`).
    pub hosts: Option<HostFloors>,
    /// Processes that only spin beside the runs (`--load`).
    pub load: usize,
}

fn gb(msgs_per_s: f64, size: usize) -> f64 {
    msgs_per_s * size as f64 / 1e9
}

impl PingRow {
    pub fn ratio(&self) -> Option<f64> {
        self.median_us.map(|m| m / self.baseline_median_us)
    }

    /// The path against its third-party floor (forwarder or relay).
    pub fn forwarder_ratio(&self) -> Option<f64> {
        Some(self.median_us? / self.forwarder?.0)
    }

    pub fn json(&self) -> Value {
        let row = json!({
            "bench": "pingpong",
            "path": self.path,
            "applet": self.applet.as_ref().map(|a| a.0.clone()),
            "placement": self.applet.as_ref().map(|a| a.1),
            "size": self.size,
            "median_us": self.median_us,
            "p99_us": self.p99_us,
            "samples": self.samples,
            "baseline": self.baseline,
            "baseline_median_us": self.baseline_median_us,
            "baseline_p99_us": self.baseline_p99_us,
            "baseline_samples": self.baseline_samples,
            "clock_ns": self.clock_ns,
            "ratio": self.ratio(),
            "forwarder_median_us": self.forwarder.map(|f| f.0),
            "forwarder_p99_us": self.forwarder.map(|f| f.1),
            "ratio_forwarder": self.forwarder_ratio(),
            "load": self.load,
            "group": self.group,
        });
        with_hosts(row, &self.hosts)
    }
}

impl StreamRow {
    pub fn ratio(&self) -> Option<f64> {
        self.msgs_per_s.map(|m| m / self.baseline_msgs_per_s)
    }

    /// The median of the ratios of each unet run to the baseline run
    /// beside it ([`stats::paired_ratio`]).
    pub fn paired_ratio(&self) -> Option<f64> {
        stats::paired_ratio(&self.runs, &self.baseline_runs)
    }

    pub fn json(&self) -> Value {
        let row = json!({
            "bench": "stream",
            "path": self.path,
            "applet": self.applet.as_ref().map(|a| a.0.clone()),
            "placement": self.applet.as_ref().map(|a| a.1),
            "size": self.size,
            "burst": self.burst,
            "batch": self.batch,
            "msgs_per_s": self.msgs_per_s,
            "gb_per_s": self.msgs_per_s.map(|m| gb(m, self.size)),
            "baseline": self.baseline,
            "baseline_msgs_per_s": self.baseline_msgs_per_s,
            "baseline_gb_per_s": gb(self.baseline_msgs_per_s, self.size),
            "reps": self.baseline_runs.len(),
            "msgs_per_s_runs": self.runs,
            "baseline_msgs_per_s_runs": self.baseline_runs,
            "delivered": self.delivered,
            "baseline_delivered": self.baseline_delivered,
            "ratio": self.ratio(),
            "ratio_paired": self.paired_ratio(),
            "load": self.load,
        });
        with_hosts(row, &self.hosts)
    }
}

fn opt(v: Option<f64>, prec: usize) -> String {
    match v {
        Some(x) => format!("{x:.prec$}"),
        None => "-".into(),
    }
}

/// The first column of a table with applets: the applet's class name
/// (`-` for none).
fn applet_col(on: bool, a: &Option<(String, &'static str)>) -> String {
    if !on {
        return String::new();
    }
    let name = a.as_ref().map_or("-", |a| a.0.as_str());
    format!("{name:<12} ")
}

pub fn ping_header(with_applet: bool) {
    let first = if with_applet {
        format!("{:<12} ", "applet")
    } else {
        String::new()
    };
    println!(
        "{first}{:<7} {:>6}  {:>10} {:>10}  {:<8} {:>10} {:>10}  {:>6}",
        "path", "size", "median_us", "p99_us", "baseline", "median_us", "p99_us", "ratio"
    );
}

pub fn ping_line(r: &PingRow, with_applet: bool) {
    println!(
        "{}{:<7} {:>6}  {:>10} {:>10}  {:<8} {:>10.3} {:>10.3}  {:>6}",
        applet_col(with_applet, &r.applet),
        r.path,
        fmt_size(r.size),
        opt(r.median_us, 3),
        opt(r.p99_us, 3),
        r.baseline,
        r.baseline_median_us,
        r.baseline_p99_us,
        opt(r.ratio(), 2)
    );
    if let Some((median, p99)) = r.forwarder {
        let (what, short) = if r.path == "udp" {
            (
                "relay floor (raw UDP through a third process relaying each datagram, \
                 blocking recvfrom and sendto)",
                "relay",
            )
        } else {
            (
                "forwarder floor (a third thread relaying, spin then sleep as the engine)",
                "forwarder",
            )
        };
        println!(
            "  {what}: median {median:.3} us, p99 {p99:.3} us; {} / {short} {}",
            r.path,
            opt(r.forwarder_ratio(), 2)
        );
    }
    load_note(r.load);
    if r.group > 1 {
        println!(
            "  round trips timed {} at a time (--group): medians and p99 are of groups",
            r.group
        );
    }
    if let Some(h) = &r.hosts {
        println!("{}", h.line());
    }
}

/// The line under a point measured beside `--load` busy processes.
fn load_note(n: usize) {
    if n > 0 {
        println!("  with {n} busy process(es) beside the runs (--load)");
    }
}

pub fn stream_header(with_applet: bool) {
    let first = if with_applet {
        format!("{:<12} ", "applet")
    } else {
        String::new()
    };
    println!(
        "{first}{:<7} {:>6}  {:>12} {:>8} {:>6}  {:<8} {:>12} {:>8} {:>6}  {:>6}",
        "path", "size", "Mmsg/s", "GB/s", "deliv", "baseline", "Mmsg/s", "GB/s", "deliv", "ratio"
    );
}

/// A share as a percentage (`-` when unknown).
fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{:.0}%", x * 100.0))
}

pub fn stream_line(r: &StreamRow, with_applet: bool) {
    println!(
        "{}{:<7} {:>6}  {:>12} {:>8} {:>6}  {:<8} {:>12.3} {:>8.3} {:>6}  {:>6}",
        applet_col(with_applet, &r.applet),
        r.path,
        fmt_size(r.size),
        opt(r.msgs_per_s.map(|m| m / 1e6), 3),
        opt(r.msgs_per_s.map(|m| gb(m, r.size)), 3),
        pct(r.delivered),
        r.baseline,
        r.baseline_msgs_per_s / 1e6,
        gb(r.baseline_msgs_per_s, r.size),
        pct(r.baseline_delivered),
        opt(r.ratio(), 2)
    );
    load_note(r.load);
    if let Some(h) = &r.hosts {
        println!("{}", h.line());
    }
}

/// A single updating progress line on stderr (a spinner, the time the
/// step has taken and the step), shown only on a terminal. `clear` takes
/// it off the screen before results are printed; the next `show` starts a
/// new one.
pub struct Progress {
    on: bool,
    bar: std::cell::RefCell<Option<indicatif::ProgressBar>>,
}

impl Progress {
    pub fn new() -> Progress {
        Progress {
            on: std::io::stderr().is_terminal(),
            bar: std::cell::RefCell::new(None),
        }
    }

    pub fn show(&self, msg: &str) {
        if !self.on {
            return;
        }
        let mut bar = self.bar.borrow_mut();
        let b = bar.get_or_insert_with(|| {
            let b = indicatif::ProgressBar::new_spinner();
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("{spinner} [{elapsed}] {msg}")
            {
                b.set_style(style);
            }
            b.enable_steady_tick(std::time::Duration::from_millis(200));
            b
        });
        b.set_message(msg.to_string());
    }

    pub fn clear(&self) {
        if let Some(b) = self.bar.borrow_mut().take() {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

pub(super) fn finish(r: Res<()>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("unet bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Busy polling needs both cores: say so when other work is running.
pub(super) fn warn_if_busy() {
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(l) = load {
        if l > 0.5 * cpus as f64 {
            eprintln!(
                "unet bench: note: load average {l:.2} on {cpus} CPUs; \
                 other work is running and the figures will be noisy"
            );
        }
    }
}

/// Say so when the baseline's runs of one point lie too far apart for its
/// ratio to mean much (this machine changes speed now and then).
pub(super) fn note_if_unsteady(point: &str, baseline: &str, runs: &[f64], unit: &str) {
    if let Some((lo, hi)) = stats::unsteady(runs) {
        eprintln!(
            "unet bench: note: {point}: the {baseline}'s {} runs ranged {lo:.3} to {hi:.3} {unit}, \
             {:.1}x apart; the machine changed speed during the measurement and the ratio is \
             unreliable: run it again",
            runs.len(),
            hi / lo
        );
    }
}

/// A row's curve name: its path and applet.
fn curve(path: &str, applet: &Option<(String, &'static str)>) -> String {
    match applet {
        Some((name, placement)) => format!("{path}: {name} ({placement})"),
        None => format!("{path}: no applet"),
    }
}

/// Points of `rows` by curve name, in the order the curves first appear.
fn curves<R>(rows: &[R], mut point: impl FnMut(&R) -> Option<(String, f64, f64)>) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for r in rows {
        let Some((name, x, y)) = point(r) else {
            continue;
        };
        match out.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((x, y)),
            None => out.push(Series {
                name,
                points: vec![(x, y)],
            }),
        }
    }
    out
}

/// `unet bench pingpong --svg`: the round trip against size, unet's
/// curves and their baselines'.
pub fn ping_svg(rows: &[PingRow], figure5: bool, file: &std::path::Path) -> Result<(), String> {
    let mut lines = curves(rows, |r| {
        Some((curve(r.path, &r.applet), r.size as f64, r.median_us?))
    });
    lines.extend(curves(rows, |r| {
        Some((
            format!("{} (baseline)", r.baseline),
            r.size as f64,
            r.baseline_median_us,
        ))
    }));
    let title = if figure5 {
        "U-Net/SLE Figure 5: round trip against message size"
    } else {
        "unet bench pingpong: round trip against message size"
    };
    write_svg(
        &Figure {
            title,
            x_desc: "message size (bytes)",
            y_desc: "round trip, median (µs)",
            lines,
            paper: Vec::new(),
            scale: Scale::LogLog,
        },
        file,
    )
}

/// `unet bench stream --svg`: the bandwidth against size, unet's curves
/// and their baselines'.
pub fn stream_svg(rows: &[StreamRow], figure6: bool, file: &std::path::Path) -> Result<(), String> {
    let mb = |m: f64, size: usize| m * size as f64 / 1e6;
    let mut lines = curves(rows, |r| {
        Some((
            curve(r.path, &r.applet),
            r.size as f64,
            mb(r.msgs_per_s?, r.size),
        ))
    });
    lines.extend(curves(rows, |r| {
        Some((
            format!("{} (baseline)", r.baseline),
            r.size as f64,
            mb(r.baseline_msgs_per_s, r.size),
        ))
    }));
    let title = if figure6 {
        "U-Net/SLE Figure 6: bandwidth against message size, bursts of 25"
    } else {
        "unet bench stream: bandwidth against message size"
    };
    write_svg(
        &Figure {
            title,
            x_desc: "message size (bytes)",
            y_desc: "bandwidth (MB/s)",
            lines,
            paper: Vec::new(),
            scale: Scale::LogLog,
        },
        file,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::stats::median_f64;

    #[test]
    fn the_paired_ratio_is_the_median_of_the_runs_side_by_side() {
        let row = |runs: Vec<f64>, base: Vec<f64>| StreamRow {
            path: "direct",
            applet: None,
            size: 64,
            burst: 0,
            batch: 1,
            msgs_per_s: (!runs.is_empty()).then(|| median_f64(&runs)),
            baseline: "floor",
            baseline_msgs_per_s: median_f64(&base),
            runs,
            baseline_runs: base,
            delivered: None,
            baseline_delivered: None,
            hosts: None,
            load: 0,
        };
        // The machine's fast state in runs 0 and 2, slow in 1, 3 and 4:
        // every pair is 1.0, while the medians (20 and 80) give 0.25.
        let r = row(
            vec![80.0, 20.0, 80.0, 20.0, 20.0],
            vec![80.0, 20.0, 80.0, 20.0, 20.0],
        );
        assert_eq!(r.paired_ratio(), Some(1.0));
        let r = row(
            vec![80.0, 20.0, 80.0, 20.0, 20.0],
            vec![20.0, 80.0, 80.0, 80.0, 80.0],
        );
        assert_eq!(r.ratio(), Some(0.25));
        assert_eq!(r.paired_ratio(), Some(0.25));
        let j = row(vec![30.0, 60.0], vec![20.0, 40.0]).json();
        assert_eq!(j["ratio_paired"], 1.5);
        assert_eq!(j["batch"], 1);
        assert!(row(vec![], vec![20.0]).paired_ratio().is_none());
    }
}
