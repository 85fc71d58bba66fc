//! `unet trace`: SPINE's event graph (section 6, Figure 6) of a running
//! daemon. It switches the engine's event trace on, waits, switches it
//! off, takes the events, and writes them as Chrome trace-event JSON
//! (`chrome.rs`; it opens in Perfetto), draws them in the style of Figure
//! 6 (`svg.rs`), and prints what the paper reads off the graph by eye:
//! the period between packets and the time of one packet through the
//! adapter, each with its spread (`analysis.rs`). `--from` re-renders a
//! saved JSON trace.
//!
//! With SPINE's extensions at work the graph holds SPINE's events (the
//! system handlers', and each handler's invocation under its number),
//! each caused by the event that queued it: the arrows follow one
//! message from the host's send through its handlers to its delivery,
//! and the period and latency are SPINE's messages'. `unet bench
//! spine-graph` draws two such graphs side by side (section 6's priority
//! effect).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use unet_engine::TraceDump;

pub(crate) mod analysis;
pub(crate) mod chrome;
pub(crate) mod svg;
#[cfg(test)]
mod tests;

use analysis::analyse;

#[derive(clap::Args)]
pub struct Args {
    /// Control socket of the engine.
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// How long to record, milliseconds.
    #[arg(long, default_value_t = 100)]
    pub ms: u64,
    /// Events the engine's ring holds (rounded up to a power of two; the
    /// oldest are overwritten when it is full).
    #[arg(long, default_value_t = unet_engine::TRACE_DEFAULT_CAPACITY,
          value_parser = clap::value_parser!(u32).range(1..=unet_engine::TRACE_MAX_CAPACITY as i64))]
    pub capacity: u32,
    /// Write the events as Chrome trace-event JSON (Perfetto opens it).
    #[arg(long, value_name = "F.json")]
    pub out: Option<PathBuf>,
    /// Draw the event graph (Figure 6's style) as SVG.
    #[arg(long, value_name = "F.svg")]
    pub svg: Option<PathBuf>,
    /// Read the events from a JSON trace `unet trace --out` wrote instead
    /// of a daemon.
    #[arg(long, value_name = "F.json")]
    pub from: Option<PathBuf>,
    /// Print the figures as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Give up when the daemon does not answer a request in this many
    /// milliseconds (0: wait forever; default 5000 or `UNET_TIMEOUT_MS`).
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,
}

pub fn run(a: Args) -> ExitCode {
    match go(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("unet trace: {e}");
            ExitCode::FAILURE
        }
    }
}

fn go(a: &Args) -> Result<(), String> {
    let d = match &a.from {
        Some(f) => {
            let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
            chrome::read(&text).map_err(|e| format!("{}: {e}", f.display()))?
        }
        None => record(a)?,
    };
    let an = analyse(&d.events);
    if let Some(f) = &a.out {
        std::fs::write(f, chrome::write(&d)).map_err(|e| format!("{}: {e}", f.display()))?;
    }
    if let Some(f) = &a.svg {
        std::fs::write(f, svg::render(&d, &an)).map_err(|e| format!("{}: {e}", f.display()))?;
    }
    if a.json {
        println!("{}", an.to_json(&d));
    } else {
        print!("{}", an.text(&d));
    }
    Ok(())
}

/// Switch the daemon's trace on for `a.ms`, switch it off, and take its
/// events (off, the engine hands its ring to the dump without a copy).
fn record(a: &Args) -> Result<TraceDump, String> {
    let mut opts = unet::SessionOptions::default();
    if let Some(ms) = a.timeout_ms {
        opts.timeout = (ms > 0).then(|| Duration::from_millis(ms));
    }
    let s = unet::Session::connect_with(&a.socket, opts).map_err(|e| e.to_string())?;
    s.trace_set(true, a.capacity).map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(a.ms));
    s.trace_set(false, 0).map_err(|e| e.to_string())?;
    let b = s.trace_dump().map_err(|e| e.to_string())?;
    TraceDump::decode(&b).map_err(|e| e.to_string())
}
