//! `unet bench router graph`: SPINE's Figure 6 (section 5.2): the event
//! graph of the router under load, and the period between packets and the
//! latency of one through the adapter that it shows, beside the paper's
//! (a packet every 55 µs, 100 µs through the router).
//!
//! The network and the router are `forward.rs`'s (`lab.rs`'s namespaces,
//! a daemon pinned to core 1 and `unet router run` with both ports on
//! it). The generator sends at a steady `--rate` (the paper's graph is of
//! a router "under high load", forwarding, not dropping) while the engine
//! records its events for `--ms` (`unet trace`'s recording, started after
//! a warm-up); the graph is written as Chrome JSON and as an SVG in
//! Figure 6's style, and the figures are read off it as `unet trace`
//! does (`trace/analysis.rs`): a packet is a SPINE message, from its
//! frame taken off the port's ring (`wire_rx`) through the router's
//! handler to the frame placed on the egress ring (`wire_tx`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use unet_engine::TraceDump;
use unet_router::table::generated;

use super::super::report::{warn_if_busy, Progress};
use super::forward::{destinations, pool_of, table_lines};
use super::forwarders::{AdapterArgs, Case, NEXT_HOPS};
use super::lab::{generate, Generator, Lab, PortMacs, Sink};
use super::Res;
use crate::trace::analysis::{analyse, is_loop, Spread};
use crate::trace::{chrome, svg};

/// The paper's Figure 6: the period between packets and a packet's
/// latency through the router, µs ("roughly").
const PAPER_PERIOD_US: f64 = 55.0;
const PAPER_LATENCY_US: f64 = 100.0;

#[derive(clap::Args)]
pub struct GraphArgs {
    /// Packets a second the generator sends (one a `send`) while the
    /// graph is recorded.
    #[arg(long, default_value_t = 50_000.0)]
    pub rate: f64,
    /// IP packet size in bytes (28 to 1500).
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    /// The router: unet (one adapter), unet-pci or unet-wire (two; the
    /// ingress adapter's graph).
    #[arg(long, default_value = "unet", value_parser = Case::parse)]
    case: Case,
    /// How long to record, milliseconds.
    #[arg(long, default_value_t = 20)]
    pub ms: u64,
    /// Write the events as Chrome trace-event JSON (Perfetto opens it).
    #[arg(long, value_name = "F.json")]
    pub out: Option<PathBuf>,
    /// Draw the event graph (Figure 6's style) as SVG.
    #[arg(long, value_name = "F.svg")]
    pub svg: Option<PathBuf>,
    /// Print the figures as one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub adapters: AdapterArgs,
    /// The extension's source (default: the checkout's
    /// `extensions/router/Router.java`).
    #[arg(long, value_name = "FILE")]
    pub java: Option<PathBuf>,
}

fn us(s: &Option<Spread>) -> Option<f64> {
    s.map(|s| s.median as f64 / 1000.0)
}

/// The adapter's work per packet, µs: in the packets' own events, and
/// in its turns (the packets' events, the loop's and the ports' system
/// calls between them).
fn work_per_packet(d: &TraceDump, packets: usize) -> (Option<f64>, Option<f64>) {
    if packets == 0 {
        return (None, None);
    }
    let sum = |loops: bool| -> u64 {
        d.events
            .iter()
            .filter(|e| is_loop(e.ty) == loops && (loops || e.msg != 0))
            .map(|e| e.len_ns)
            .sum()
    };
    let per = |ns: u64| Some(ns as f64 / 1000.0 / packets as f64);
    (per(sum(false)), per(sum(true)))
}

pub fn graph(a: GraphArgs) -> Res<()> {
    if !(28..=1500).contains(&a.size) {
        return Err(format!("packet size {} is not within 28 to 1500", a.size));
    }
    if a.rate.is_nan() || a.rate <= 0.0 {
        return Err("--rate must be above 0".into());
    }
    warn_if_busy();
    let p = Progress::new();
    let routes = generated(1000, 1, NEXT_HOPS);
    p.show("compiling the extension");
    let dir = super::super::child::TempDir::new()?;
    let class = dir.0.join("Router.class");
    let bytes = super::compile_java(a.java.as_deref())?;
    std::fs::write(&class, bytes).map_err(|e| format!("{}: {e}", class.display()))?;
    p.show("making the namespaces, starting the router");
    let lab = Lab::new(Sink::Host, PortMacs::Kernel)?;
    let lines = table_lines(&lab, &routes);
    let pool = pool_of(
        &lab,
        &destinations(&lab, &routes)?,
        a.size,
        lab.gateway_mac(true),
    );
    let mut run = a.case.start(&lab, &lines, &class, &dir.0, &a.adapters)?;
    // The ingress adapter's events (with two adapters the egress one's
    // are its own graph).
    let socket = run
        .sockets
        .first()
        .cloned()
        .ok_or("the router has no socket")?;
    let warm = Duration::from_millis(200);
    let n = (a.rate * (warm.as_secs_f64() * 2.0 + a.ms as f64 / 1000.0)) as u64 + 1;
    p.show("recording");
    let res = std::thread::scope(|s| -> Res<(TraceDump, f64)> {
        let g = s.spawn(|| generate(&lab, Arc::clone(&pool), n, a.rate, 1, Generator::Auto));
        let rec = (|| -> Res<TraceDump> {
            std::thread::sleep(warm);
            let ses = unet::Session::connect(&socket).map_err(|e| e.to_string())?;
            ses.trace_set(true, unet_engine::TRACE_DEFAULT_CAPACITY)
                .map_err(|e| e.to_string())?;
            std::thread::sleep(Duration::from_millis(a.ms));
            ses.trace_set(false, 0).map_err(|e| e.to_string())?;
            let b = ses.trace_dump().map_err(|e| e.to_string())?;
            TraceDump::decode(&b).map_err(|e| e.to_string())
        })();
        let sent = g.join().map_err(|_| "the generator panicked")??;
        Ok((rec?, sent.rate()))
    });
    run.stop(&lab);
    p.clear();
    let (d, sent) = res?;
    let an = analyse(&d.events);
    if let Some(f) = &a.out {
        std::fs::write(f, chrome::write(&d)).map_err(|e| format!("{}: {e}", f.display()))?;
    }
    if let Some(f) = &a.svg {
        std::fs::write(f, svg::render(&d, &an)).map_err(|e| format!("{}: {e}", f.display()))?;
    }
    let (period, latency) = (us(&an.period), us(&an.latency));
    let (events_us, turns_us) = work_per_packet(&d, an.messages.len());
    if a.json {
        let mut o = an.to_json(&d);
        o["figure"] = json!("spine6");
        o["size"] = json!(a.size);
        o["rate_asked_pps"] = json!(a.rate);
        o["rate_sent_pps"] = json!(sent);
        o["paper_period_us"] = json!(PAPER_PERIOD_US);
        o["paper_latency_us"] = json!(PAPER_LATENCY_US);
        o["events_us_per_packet"] = json!(events_us);
        o["turns_us_per_packet"] = json!(turns_us);
        o["period_ratio_to_paper"] = json!(period.map(|v| v / PAPER_PERIOD_US));
        o["latency_ratio_to_paper"] = json!(latency.map(|v| v / PAPER_LATENCY_US));
        println!("{o}");
    } else {
        println!(
            "SPINE Figure 6: the router's event graph, {} B packets at {:.0} pkt/s (sent {:.0}), {} ms",
            a.size, a.rate, sent, a.ms
        );
        print!("{}", an.text(&d));
        let cmp = |v: Option<f64>, paper: f64| {
            v.map_or("-".into(), |v| {
                format!("{v:.3} µs, {:.4}x the paper's {paper} µs", v / paper)
            })
        };
        println!("period   {}", cmp(period, PAPER_PERIOD_US));
        println!("latency  {}", cmp(latency, PAPER_LATENCY_US));
        let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3} µs"));
        println!(
            "work     {} a packet in its events (taking the frame, the handler, placing it on the \
             egress ring); {} a packet of the adapter's turns (its events and the ports' system calls)",
            f(events_us),
            f(turns_us)
        );
        println!(
            "the period is the generator's: the router takes a packet as it comes; \
             the adapter's own limit is `unet bench router forward`'s"
        );
    }
    Ok(())
}
