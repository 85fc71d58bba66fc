//! `unet bench spine-graph`: SPINE's priority effect (section 6), shown
//! with the event graph. The same pipeline runs on an engine under each
//! priority setting given: a host streams active messages, a window of
//! them in flight, through two handlers of the worked example
//! (`extensions/Echo.java`: `onForward` hands each to `onDeliver`, which
//! sends it back to the host), while the engine records its events. For
//! each setting the command writes the graph as Chrome JSON and as an SVG
//! in Figure 6's style, and prints what the graph shows:
//!
//! - the period between messages and the latency of one through the
//!   adapter (median, p10, p90; `trace/analysis.rs`);
//! - the latency over time: the median of each run of `window` messages,
//!   and the spread of those medians (a pipeline that oscillates between
//!   a fast and a slow state has a wide one);
//! - the receive bursts: how many host messages the adapter took in
//!   (`host_tx`) between two deliveries to the host (`deliver_host`), in
//!   the order it ran them. The paper: "several incoming packets are
//!   serviced before any outgoing packets are sent"; one-for-one is 1.
//!
//! By default the two settings are the engine's (what takes messages out
//! of the adapter runs first) and the paper's (deliveries below taking
//! messages in: `deliver_host=7`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use unet::spine::ExtensionOptions;
use unet::{EndpointConfig, Engine, EngineConfig, Session};
use unet_engine::{parse_spine_priorities, TraceDump, DEFAULT_SPINE_PRIORITIES};

use crate::bench::applet_build::{self, BuildDir};
use crate::trace::analysis::{analyse, is_loop, Spread};
use crate::trace::{chrome, svg};

/// The first handler number Echo is installed at: `onForward` is one
/// more, `onDeliver` two more.
pub const BASE: u16 = 64;
/// The graph's type of a host's message taken in and of a delivery.
const HOST_TX: u16 = 0;
const DELIVER_HOST: u16 = 3;

#[derive(clap::Args)]
pub struct Args {
    /// A priority setting: `type=n,...` over the engine's defaults
    /// (`default` for none); give it twice (default: `default` and
    /// `deliver_host=7`).
    #[arg(long = "priority", value_name = "SETTING")]
    pub priority: Vec<String>,
    /// Write each setting's graph here (`<i>-<setting>.json`, `.svg`).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Messages through the pipeline per setting (recorded).
    #[arg(long, default_value_t = 4000)]
    pub messages: usize,
    /// Messages the host keeps in flight.
    #[arg(long, default_value_t = 16)]
    pub window: usize,
    /// Print the figures as JSON rows.
    #[arg(long)]
    pub json: bool,
}

/// What one setting's graph shows.
#[derive(Clone, Debug)]
pub struct Figures {
    /// The setting as given.
    pub setting: String,
    /// Messages the host got back, and events the graph holds.
    pub messages: usize,
    pub events: usize,
    pub period: Option<Spread>,
    pub latency: Option<Spread>,
    /// The spread of the per-window medians of the latency.
    pub latency_over_time: Option<Spread>,
    /// Host messages taken in between two deliveries.
    pub bursts: Bursts,
}

/// The receive bursts of a graph: runs of host messages taken in with no
/// delivery between them, in the order the adapter ran its events.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Bursts {
    /// Runs (one per delivery that ended one).
    pub runs: usize,
    /// The longest.
    pub max: u64,
    /// Runs of more than one message: the slow state's episodes.
    pub slow: usize,
    /// The share of the messages taken in a run of more than one.
    pub slow_share: f64,
}

impl Bursts {
    /// The bursts of `runs` (see [`bursts`]).
    pub fn of(runs: &[u64]) -> Bursts {
        let total: u64 = runs.iter().sum();
        let slow: u64 = runs.iter().filter(|&&r| r > 1).sum();
        Bursts {
            runs: runs.len(),
            max: runs.iter().copied().max().unwrap_or(0),
            slow: runs.iter().filter(|&&r| r > 1).count(),
            slow_share: if total == 0 {
                0.0
            } else {
                slow as f64 / total as f64
            },
        }
    }
}

/// The graph of one run of the pipeline under one setting.
pub struct Run {
    pub figures: Figures,
    pub dump: TraceDump,
}

pub fn run(a: Args) -> ExitCode {
    match go(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("unet bench spine-graph: {e}");
            ExitCode::FAILURE
        }
    }
}

fn go(a: &Args) -> Result<(), String> {
    let settings = match a.priority.len() {
        0 => vec!["default".to_string(), "deliver_host=7".to_string()],
        _ => a.priority.clone(),
    };
    if a.window == 0 || a.messages < 2 * a.window {
        return Err("--messages must be at least twice --window, and --window at least 1".into());
    }
    let class = echo_class()?;
    if let Some(d) = &a.out_dir {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let mut rows = Vec::new();
    for (i, s) in settings.iter().enumerate() {
        eprintln!(
            "[spine-graph] {s}: {} messages, {} in flight",
            a.messages, a.window
        );
        let r = measure(&class, s, a.messages, a.window)?;
        if let Some(d) = &a.out_dir {
            let stem = format!("{}-{}", i + 1, file_safe(s));
            let an = analyse(&r.dump.events);
            let json = d.join(format!("{stem}.json"));
            let svg_path = d.join(format!("{stem}.svg"));
            std::fs::write(&json, chrome::write(&r.dump))
                .map_err(|e| format!("{}: {e}", json.display()))?;
            // Wide enough for a few bursts either side of the message
            // followed: twice the slowest tenth's latency.
            let pad = an.latency.map(|l| l.p90.saturating_mul(2));
            std::fs::write(&svg_path, svg::render_padded(&r.dump, &an, pad))
                .map_err(|e| format!("{}: {e}", svg_path.display()))?;
        }
        rows.push(r.figures);
    }
    if a.json {
        let v: Vec<serde_json::Value> = rows.iter().map(to_json).collect();
        println!("{}", serde_json::Value::Array(v));
    } else {
        print!("{}", table(&rows));
    }
    Ok(())
}

/// `s` with what a file name should not hold replaced.
fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The worked example compiled (javac against the SDK's sources).
pub fn echo_class() -> Result<Vec<u8>, String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("extensions/Echo.java"))
        .map_err(|e| format!("extensions/Echo.java: {e}"))?;
    Ok(compile(&[("Echo", &text)])?.remove(0))
}

/// Extensions given as (class, Java source) compiled against the SDK's
/// sources: their class files, in order.
pub fn compile(sources: &[(&str, &str)]) -> Result<Vec<Vec<u8>>, String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let sdk = root.join("java/applet-sdk/src/main/java");
    let dir = BuildDir::new("spine-graph", false)?;
    let mut files = Vec::new();
    for (class, text) in sources {
        let f = dir.path.join(format!("{class}.java"));
        std::fs::write(&f, text).map_err(|e| format!("{}: {e}", f.display()))?;
        files.push(f);
    }
    applet_build::javac(&sdk, &dir.path, &files)?;
    sources
        .iter()
        .map(|(class, _)| {
            let f = dir.path.join(format!("{class}.class"));
            std::fs::read(&f).map_err(|e| format!("{}: {e}", f.display()))
        })
        .collect()
}

/// Run the pipeline under priority `setting` on an engine of its own,
/// `messages` recorded with `window` in flight.
pub fn measure(class: &[u8], setting: &str, messages: usize, window: usize) -> Result<Run, String> {
    let prio = match setting {
        "default" => DEFAULT_SPINE_PRIORITIES,
        s => parse_spine_priorities(s, DEFAULT_SPINE_PRIORITIES)?,
    };
    let e = |x: unet::Error| x.to_string();
    let engine = Engine::start(EngineConfig {
        spine_priorities: prio,
        ..EngineConfig::default()
    })
    .map_err(|x| x.to_string())?;
    let s = Session::embedded(&engine).map_err(e)?;
    let ext = s
        .load_extension(
            class,
            ExtensionOptions {
                name: "echo".into(),
                arg: i32::from(BASE),
                ..ExtensionOptions::default()
            },
        )
        .map_err(e)?;
    let mut ep = s.create_endpoint(EndpointConfig::default()).map_err(e)?;
    // Warm: the handlers compiled, the pools grown.
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        stream(&mut ep, 2 * window, window)?;
        let l = s.list_extensions().map_err(e)?;
        if l.extensions.iter().all(|x| x.compiled) {
            break;
        }
        if Instant::now() > end {
            return Err("the extension was not compiled within 20 s".into());
        }
    }
    let cap = (messages * 16)
        .next_power_of_two()
        .min(unet_engine::TRACE_MAX_CAPACITY as usize);
    s.trace_set(true, cap as u32).map_err(e)?;
    let got = stream(&mut ep, messages, window)?;
    s.trace_set(false, 0).map_err(e)?;
    let dump = TraceDump::decode(&s.trace_dump().map_err(e)?).map_err(|x| x.to_string())?;
    let _ = s.unload_extension(ext.id);
    drop(ep);
    drop(s);
    engine.stop();
    let figures = figures(setting, got, &dump, window);
    Ok(Run { figures, dump })
}

/// Send `n` messages to `onForward` with `window` in flight, each sent
/// when one came back; returns how many came back.
pub fn stream(ep: &mut unet::Endpoint, n: usize, window: usize) -> Result<usize, String> {
    let mut buf = vec![0u8; 4096];
    let (mut sent, mut got) = (0usize, 0usize);
    let args = [0u8; 16];
    while got < n {
        while sent < n && sent - got < window {
            match ep.send_am(BASE + 1, &args, &[]) {
                Ok(_) => sent += 1,
                Err(unet::SendError::Full) => break,
                Err(x) => return Err(x.to_string()),
            }
        }
        match ep.recv(&mut buf, Some(Duration::from_secs(5))) {
            Ok(r) if r.am() => got += 1,
            Ok(_) => {}
            Err(x) => return Err(format!("after {got} of {n} back: {x}")),
        }
    }
    Ok(got)
}

/// What `dump` shows (see the module documentation).
pub fn figures(setting: &str, messages: usize, dump: &TraceDump, window: usize) -> Figures {
    let an = analyse(&dump.events);
    let lat: Vec<u64> = an.messages.iter().map(|m| m.end - m.begin).collect();
    let medians: Vec<u64> = lat
        .chunks_exact(window.max(1))
        .map(|c| {
            let mut c = c.to_vec();
            c.sort_unstable();
            c[c.len() / 2]
        })
        .collect();
    Figures {
        setting: setting.to_string(),
        messages,
        events: dump.events.iter().filter(|e| !is_loop(e.ty)).count(),
        period: an.period,
        latency: an.latency,
        latency_over_time: Spread::of(medians),
        bursts: Bursts::of(&bursts(dump)),
    }
}

/// The runs of host messages taken in between deliveries, in the order
/// the adapter ran its events.
pub fn bursts(dump: &TraceDump) -> Vec<u64> {
    let mut evs: Vec<_> = dump
        .events
        .iter()
        .filter(|e| e.ty == HOST_TX || e.ty == DELIVER_HOST)
        .collect();
    evs.sort_by_key(|e| (e.start_ns, e.id));
    let mut out = Vec::new();
    let mut run = 0u64;
    for e in evs {
        if e.ty == HOST_TX {
            run += 1;
        } else if run > 0 {
            out.push(run);
            run = 0;
        }
    }
    out
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

fn spread_cells(s: &Option<Spread>, f: impl Fn(u64) -> f64) -> String {
    match s {
        Some(s) => format!("{:>8.2} {:>8.2} {:>8.2}", f(s.median), f(s.p10), f(s.p90)),
        None => format!("{:>8} {:>8} {:>8}", "-", "-", "-"),
    }
}

/// The figures as a table.
pub fn table(rows: &[Figures]) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:<18} {:>6} | {:^26} | {:^26} | {:^26} | {:^22}\n",
        "setting",
        "msgs",
        "period us (med p10 p90)",
        "latency us (med p10 p90)",
        "window medians (p50 p10 p90)",
        "bursts >1 (n, share, max)"
    ));
    for r in rows {
        let b = r.bursts;
        s.push_str(&format!(
            "{:<18} {:>6} | {} | {} | {} | {:>6} {:>6.1}% {:>6}\n",
            r.setting,
            r.messages,
            spread_cells(&r.period, us),
            spread_cells(&r.latency, us),
            spread_cells(&r.latency_over_time, us),
            b.slow,
            100.0 * b.slow_share,
            b.max,
        ));
    }
    s.push_str(
        "window medians: the latency's median over each run of --window messages (its spread \
         shows an oscillation); bursts: host messages taken in before a delivery, runs of more \
         than one (the slow state), the share of messages taken in them, the longest.\n\
         Figures from a machine shared with other work.\n",
    );
    s
}

fn spread_json(s: &Option<Spread>) -> serde_json::Value {
    match s {
        None => serde_json::Value::Null,
        Some(s) => serde_json::json!({
            "n": s.n, "p10": s.p10, "median": s.median, "p90": s.p90, "mean": s.mean, "max": s.max,
        }),
    }
}

/// One row as JSON (times in ns).
pub fn to_json(r: &Figures) -> serde_json::Value {
    serde_json::json!({
        "setting": r.setting,
        "messages": r.messages,
        "events": r.events,
        "period_ns": spread_json(&r.period),
        "latency_ns": spread_json(&r.latency),
        "latency_window_medians_ns": spread_json(&r.latency_over_time),
        "rx_bursts": {
            "runs": r.bursts.runs, "slow": r.bursts.slow, "slow_share": r.bursts.slow_share,
            "max": r.bursts.max,
        },
    })
}

#[cfg(test)]
mod tests;
