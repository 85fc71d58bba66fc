//! `unet bench router forward`: SPINE's Figure 5 (the SPINE paper,
//! section 5.2): the rate at which the router forwards packets with less
//! than 0.5 % of them lost, and the time per packet it implies, beside
//! Linux's own IP forwarding in the same namespaces, in the same run.
//!
//! The network is `lab.rs`'s: a generator in `h1` sends IPv4/UDP packets
//! through the router namespace `r` to `h2`, where veth counts what
//! arrives. Packets go to destinations drawn from the routing table (the
//! paper's 1 000 routes, generated, or the full Internet table), each
//! route's next hop one of four addresses on `h2`'s subnet (a hash of the
//! prefix), all at `h2`'s MAC. The forwarders, each set up in `r` in turn,
//! interleaved, each repetition in a new order:
//!
//! - `unet`: a `unet daemon` (the adapter) pinned to core 1 and `unet
//!   router run` (the host application) with both ports on that adapter.
//! - `unet-rps`: the same with receive packet steering on the ingress
//!   interface to the adapter's core, so that veth's delivery into the
//!   port's receive ring (the copy a NIC's DMA would make) leaves the
//!   generator's core, as Linux's forwarding does with `linux-rps`.
//! - `linux`: Linux's IPv4 forwarding between the same two interfaces, the
//!   same routes (`ip route`), the same static neighbours. veth hands a
//!   frame to the next namespace in the sender's own system call, so
//!   Linux forwards on the generator's core.
//! - `linux-rps`: the same with receive packet steering on the ingress
//!   interface to core 1, so that Linux forwards on the other core, as the
//!   adapter does.
//!
//! For each forwarder and packet size a trial sends `--packets` packets
//! at a rate and counts what arrived. The first trial sends as fast as
//! the generator goes; if more than `--loss` % is lost, a search over the
//! rate (`--steps` trials, halving the interval between the best rate
//! that passed and the least that failed) finds the highest rate that
//! loses less. The figure is that rate (the median over repetitions);
//! the generator's own rate, with nothing forwarding, is measured beside
//! it, so that a rate the generator limits says so (`generator_bound`).
//! While the router forwards, the CPU time its host application and its
//! adapter take is read from the kernel (`/proc/PID/task/*/schedstat`):
//! the paper's claim is zero for the host.
//!
//! Needs root (namespaces, raw sockets) and `ip`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use unet_router::table::{self, generated, hashed_next_hop, Route, SplitMix};
use unet_router::LcTrie;

use super::super::plot::{self, Figure, Scale, Series};
use super::super::report::{warn_if_busy, Progress};
use super::super::stats::median_f64;
use super::forwarders::{AdapterArgs, Case, Threads, NEXT_HOPS};
use super::lab::{self, generate, Lab};
use super::Res;

/// Destinations in the generator's pool.
const POOL: usize = 4096;

/// The paper's Figure 5 (packets a second; it gives no packet size).
const PAPER: [(&str, f64); 2] = [("PCI", 11_300.0), ("Wire", 14_100.0)];

#[derive(clap::Args)]
pub struct ForwardArgs {
    /// IP packet sizes in bytes (the frame is 14 more), 28 to 1500.
    #[arg(long, value_delimiter = ',', default_value = "64,1500")]
    pub sizes: Vec<usize>,
    /// Forwarders, in the order of the first repetition: unet (one
    /// adapter), unet-rps (the same, ingress delivery steered to the
    /// adapter's core), unet-pci and unet-wire (two adapters, over peer
    /// queues or the UDP wire), linux, linux-rps.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "unet,unet-pci,unet-wire,linux,linux-rps"
    )]
    pub cases: Vec<String>,
    /// Packets a trial (the paper forwarded two million).
    #[arg(long, default_value_t = 200_000)]
    pub packets: u64,
    /// Repetitions of every forwarder, interleaved; medians are reported.
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Trials of the rate search after the first.
    #[arg(long, default_value_t = 7)]
    pub steps: usize,
    /// Most packets lost, percent, at the rate reported.
    #[arg(long, default_value_t = 0.5)]
    pub loss: f64,
    /// The routing table: `1000` (generated, the paper's size) or `full`
    /// (the full Internet table beside the repository).
    #[arg(long, default_value = "1000")]
    pub table: String,
    /// A fast, rough run (50 000 packets a trial, one repetition, five
    /// search steps).
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object per row.
    #[arg(long)]
    pub json: bool,
    /// Print every trial (rate asked, rate sent, loss) to stderr.
    #[arg(long)]
    pub verbose: bool,
    /// Draw the rates as an SVG, the paper's beside them.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    #[command(flatten)]
    pub adapters: AdapterArgs,
    /// The extension's source (default: the checkout's
    /// `extensions/router/Router.java`).
    #[arg(long, value_name = "FILE")]
    pub java: Option<PathBuf>,
    /// What the receiving host does with the frames: `wire` (they are for
    /// a MAC it does not own, and its kernel drops them at the door, as a
    /// wire's far end takes them at no cost to the forwarder) or `host`
    /// (its IP stack takes each one, and that work lands on the
    /// forwarder's core: veth runs the receiver in the sender's call).
    #[arg(long, value_enum, default_value = "wire")]
    pub sink: lab::Sink,
    /// The MACs of SPINE's router's ports: `own` (`unet router run
    /// --port-mac`: the adapter's port has a MAC of its own, and `r`'s
    /// kernel drops the frames sent to it at the door) or `kernel` (the
    /// interfaces' own MACs: `r`'s kernel also takes each frame through
    /// its IP input, on the generator's core).
    #[arg(long, value_enum, default_value = "own")]
    pub port_macs: lab::PortMacs,
    /// How the generator sends: `auto` (a transmit-only `AF_XDP` socket
    /// where the kernel gives one, else the transmit ring), `xdp` or
    /// `ring` (the `TPACKET_V2` transmit ring, slower: veth copies its
    /// frames again).
    #[arg(long, value_enum, default_value = "auto")]
    pub generator: lab::Generator,
}

/// One search's result.
#[derive(Clone, Debug)]
struct Found {
    /// The highest rate that lost less than the limit (0 if none).
    rate: f64,
    /// Its loss, percent.
    loss: f64,
    /// Whether that was the generator's own full rate.
    generator_bound: bool,
    /// Frames that arrived over the whole search.
    arrived: u64,
    /// CPU of the host application and of the adapter, percent of one
    /// core, over the search (the router only).
    host_cpu: Option<f64>,
    adapter_cpu: Option<f64>,
    /// The adapters' CPU time over the search per frame that arrived, ns
    /// (the router only; with `--spin-us`, their polling while idle too).
    adapter_ns: Option<f64>,
    /// The adapters' drops over the search, by reason: their ports',
    /// runtimes' and wires' (`Running::drops`; the router only;
    /// reasons with none left out).
    drops: BTreeMap<String, u64>,
    /// How the adapter's ports sent (the router only).
    port_tx: String,
}

/// The table's routes with their next hops (`h2`'s four addresses by a
/// hash of the prefix), as lines of a table file.
pub(super) fn table_lines(lab: &Lab, routes: &[Route]) -> Vec<(String, String)> {
    routes
        .iter()
        .map(|r| {
            let p = std::net::Ipv4Addr::from(r.prefix);
            let nh = lab.next_hop(hashed_next_hop(r.prefix, r.len, NEXT_HOPS));
            (format!("{p}/{}", r.len), nh)
        })
        .collect()
}

/// Destinations for the generator: addresses inside routes of the table
/// (random routes, random hosts), none of the lab's own subnets,
/// multicast or reserved, or a network Linux does not forward (0/8,
/// 127/8).
pub(super) fn destinations(lab: &Lab, routes: &[Route]) -> Res<Vec<u32>> {
    let t = LcTrie::build(routes).map_err(|e| format!("{e:?}"))?;
    let own = [
        u32::from_be_bytes([10, 79, lab.n as u8, 0]),
        u32::from_be_bytes([10, 80, lab.n as u8, 0]),
    ];
    let mut rng = SplitMix(SEED);
    let mut out = Vec::with_capacity(POOL);
    let mut tries = 0usize;
    while out.len() < POOL {
        tries += 1;
        if tries > 100 * POOL {
            return Err("the table has too few forwardable destinations".into());
        }
        let r = routes[rng.below(routes.len() as u32) as usize];
        let host = rng.next_u32() & !table::mask(r.len);
        let a = r.prefix | host;
        let top = a >> 24;
        if a >> 28 >= 14 || top == 0 || top == 127 || own.contains(&(a & 0xffff_ff00)) {
            continue;
        }
        if t.lookup(a).is_some() {
            out.push(a);
        }
    }
    Ok(out)
}

/// The destinations' seed (the same every run).
const SEED: u64 = 0x5eed_f025;

/// One trial: `n` packets at `rate` (0: the generator's fastest): what
/// was sent, the share lost (percent) and the frames that arrived.
fn trial(
    lab: &Lab,
    pool: &Arc<Vec<Vec<u8>>>,
    n: u64,
    rate: f64,
    a: &ForwardArgs,
) -> Res<(lab::Sent, f64, u64)> {
    let before = lab.settled()?;
    let batch = if rate > 0.0 && rate < 20_000.0 {
        1
    } else {
        lab::BATCH
    };
    let s = generate(lab, Arc::clone(pool), n, rate, batch, a.generator)?;
    let got = lab.settled()?.saturating_sub(before).min(s.frames);
    let loss = 100.0 * (s.frames - got) as f64 / s.frames.max(1) as f64;
    if a.verbose {
        eprintln!(
            "unet bench: trial: {} B, asked {:.0} pkt/s, sent {:.0} pkt/s, {got} of {} arrived ({loss:.3} % lost)",
            pool.first().map_or(0, |f| f.len() - 14),
            rate,
            s.rate(),
            s.frames
        );
    }
    Ok((s, loss, got))
}

/// The highest rate that loses less than `max_loss` percent (module
/// documentation).
fn search(lab: &Lab, pool: &Arc<Vec<Vec<u8>>>, a: &ForwardArgs, gen_rate: f64) -> Res<Found> {
    let (blast, loss, got) = trial(lab, pool, a.packets, 0.0, a)?;
    let mut f = Found {
        rate: 0.0,
        loss: 100.0,
        generator_bound: false,
        arrived: got,
        host_cpu: None,
        adapter_cpu: None,
        adapter_ns: None,
        drops: BTreeMap::new(),
        port_tx: String::new(),
    };
    if loss < a.loss {
        f.rate = blast.rate();
        f.loss = loss;
        f.generator_bound = true;
        return Ok(f);
    }
    // What arrived of the blast is a first guess.
    let top = blast.rate().max(gen_rate);
    let (mut lo, mut hi) = (0.0f64, top);
    let mut r = top * (1.0 - loss / 100.0) * 0.95;
    for _ in 0..a.steps {
        let (s, l, got) = trial(lab, pool, a.packets, r, a)?;
        f.arrived += got;
        if l < a.loss {
            // The rate achieved (not asked): the generator may fall short.
            if s.rate() > f.rate {
                f.rate = s.rate();
                f.loss = l;
            }
            lo = r;
        } else {
            hi = r;
        }
        r = if lo == 0.0 { r / 2.0 } else { (lo + hi) / 2.0 };
    }
    Ok(f)
}

/// One row: a forwarder at a size, over the repetitions.
struct Row {
    case: Case,
    size: usize,
    found: Vec<Found>,
}

impl Row {
    fn rate(&self) -> f64 {
        median_f64(&self.found.iter().map(|f| f.rate).collect::<Vec<_>>())
    }

    /// The median over the repetitions of the adapters' CPU time per
    /// frame that arrived, ns.
    fn adapter_ns(&self) -> Option<f64> {
        let v: Vec<f64> = self.found.iter().filter_map(|f| f.adapter_ns).collect();
        (!v.is_empty()).then(|| median_f64(&v))
    }

    fn cpu(&self, host: bool) -> Option<f64> {
        let v: Vec<f64> = self
            .found
            .iter()
            .filter_map(|f| if host { f.host_cpu } else { f.adapter_cpu })
            .collect();
        (!v.is_empty()).then(|| median_f64(&v))
    }
}

pub fn forward(mut a: ForwardArgs) -> Res<()> {
    if a.quick {
        a.packets = 50_000;
        a.reps = 1;
        a.steps = 5;
    }
    a.reps = a.reps.max(1);
    a.packets = a.packets.max(1_000);
    let cases = a
        .cases
        .iter()
        .map(|c| Case::parse(c))
        .collect::<Res<Vec<_>>>()?;
    if cases.is_empty() {
        return Err("no forwarder to measure".into());
    }
    for &s in &a.sizes {
        if !(28..=1500).contains(&s) {
            return Err(format!("packet size {s} is not within 28 to 1500"));
        }
    }
    warn_if_busy();
    let p = Progress::new();
    let routes = match a.table.as_str() {
        "1000" => generated(1000, 1, NEXT_HOPS),
        "full" => {
            p.show("reading the full table");
            table::full_table(NEXT_HOPS).map_err(|e| e.to_string())?
        }
        t => return Err(format!("--table {t}: 1000 or full")),
    };
    p.show("compiling the extension");
    let class_dir = super::super::child::TempDir::new()?;
    let class = class_dir.0.join("Router.class");
    let bytes = super::compile_java(a.java.as_deref())?;
    std::fs::write(&class, bytes).map_err(|e| format!("{}: {e}", class.display()))?;
    p.show("making the namespaces");
    let lab = Lab::new(a.sink, a.port_macs)?;
    let lines = table_lines(&lab, &routes);
    let dsts = destinations(&lab, &routes)?;
    let mut rows: Vec<Row> = Vec::new();
    let mut gen: Vec<Vec<f64>> = vec![Vec::new(); a.sizes.len()];
    let mut gen_path = None;
    for rep in 0..a.reps {
        // The generator alone: nothing forwards in `r` (its kernel drops
        // what it is sent).
        for (k, &size) in a.sizes.iter().enumerate() {
            p.show(&format!(
                "rep {}/{}: the generator alone, {size} B",
                rep + 1,
                a.reps
            ));
            let pool = pool_of(&lab, &dsts, size, lab.gateway_mac(false));
            let (s, _, _) = trial(&lab, &pool, a.packets, 0.0, &a)?;
            gen[k].push(s.rate());
            gen_path = Some(s.path);
        }
        let n = cases.len();
        for j in 0..n {
            let case = cases[(j + rep) % n];
            p.show(&format!(
                "rep {}/{}: setting up {}",
                rep + 1,
                a.reps,
                case.name()
            ));
            let mut run = case.start(&lab, &lines, &class, &class_dir.0, &a.adapters)?;
            let res = (|| -> Res<()> {
                for (k, &size) in a.sizes.iter().enumerate() {
                    p.show(&format!(
                        "rep {}/{}: {} at {size} B",
                        rep + 1,
                        a.reps,
                        case.name()
                    ));
                    let pool = pool_of(&lab, &dsts, size, lab.gateway_mac(!case.is_linux()));
                    let cpu0 = run.cpu();
                    let (drops0, _) = run.drops()?;
                    let t0 = Instant::now();
                    let mut f = search(&lab, &pool, &a, median_f64(&gen[k]))?;
                    let wall = t0.elapsed().as_nanos() as f64;
                    let cpu1 = run.cpu();
                    let pct = |c0: Option<Threads>, c1: Option<Threads>| {
                        Some(100.0 * c0?.since(&c1?) as f64 / wall)
                    };
                    if let (Some(c0), Some(c1)) = (&cpu0.1, &cpu1.1) {
                        f.adapter_ns = Some(c0.since(c1) as f64 / f.arrived.max(1) as f64);
                    }
                    f.host_cpu = pct(cpu0.0, cpu1.0);
                    f.adapter_cpu = pct(cpu0.1, cpu1.1);
                    let (drops1, port_tx) = run.drops()?;
                    f.port_tx = port_tx;
                    for (k, v) in drops1 {
                        let n = v.saturating_sub(drops0.get(&k).copied().unwrap_or(0));
                        if n > 0 {
                            f.drops.insert(k, n);
                        }
                    }
                    match rows.iter_mut().find(|r| r.case == case && r.size == size) {
                        Some(r) => r.found.push(f),
                        None => rows.push(Row {
                            case,
                            size,
                            found: vec![f],
                        }),
                    }
                }
                Ok(())
            })();
            run.stop(&lab);
            res?;
        }
    }
    p.clear();
    rows.sort_by_key(|r| (r.size, cases.iter().position(|&c| c == r.case)));
    let sends = gen_path.map_or("-", lab::Generator::path_name);
    report(&a, &rows, &gen, sends, routes.len())
}

/// The generator's frames of `size` bytes, one per destination.
pub(super) fn pool_of(lab: &Lab, dsts: &[u32], size: usize, to: [u8; 6]) -> Arc<Vec<Vec<u8>>> {
    Arc::new(
        dsts.iter()
            .enumerate()
            .map(|(i, &d)| lab::frame(size, lab.addr1(), d, i as u32, to))
            .collect(),
    )
}

/// The adapters' drops of a row's searches, summed: `reason n, ...`.
fn drops_text(r: &Row) -> String {
    let mut m: BTreeMap<&str, u64> = BTreeMap::new();
    for f in &r.found {
        for (k, v) in &f.drops {
            *m.entry(k).or_insert(0) += v;
        }
    }
    m.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Print the rows (and the SVG), each beside the better Linux forwarder
/// at its size.
fn report(a: &ForwardArgs, rows: &[Row], gen: &[Vec<f64>], sends: &str, routes: usize) -> Res<()> {
    let linux_best = |size: usize| -> Option<f64> {
        rows.iter()
            .filter(|r| r.size == size && r.case.is_linux())
            .map(Row::rate)
            .max_by(f64::total_cmp)
    };
    if !a.json {
        println!(
            "SPINE Figure 5: forwarding rate at < {} % loss, {} routes, {} packets a trial, \
             {} repetition(s) (medians), {:?} sink, router ports' MACs: {:?}, the generator \
             sends by {sends}",
            a.loss, routes, a.packets, a.reps, a.sink, a.port_macs
        );
        println!(
            "{:>6} {:>10} {:>12} {:>11} {:>9} {:>10} {:>9} {:>9}  placement",
            "size",
            "forwarder",
            "pkt/s",
            "µs/packet",
            "vs linux",
            "generator",
            "host CPU",
            "adapter"
        );
    }
    for r in rows {
        let k = a.sizes.iter().position(|&s| s == r.size).unwrap_or(0);
        let g = median_f64(&gen[k]);
        let rate = r.rate();
        let base = linux_best(r.size);
        let ratio = base.filter(|&b| b > 0.0).map(|b| rate / b);
        let bound = r.found.iter().filter(|f| f.generator_bound).count() * 2 > r.found.len();
        if a.json {
            println!(
                "{}",
                json!({
                    "figure": "spine5",
                    "routes": routes,
                    "sink": format!("{:?}", a.sink).to_lowercase(),
                    "port_macs": format!("{:?}", a.port_macs).to_lowercase(),
                    "size": r.size,
                    "frame_bytes": r.size + 14,
                    "forwarder": r.case.name(),
                    "rate_pps": rate,
                    "us_per_packet": if rate > 0.0 { 1e6 / rate } else { f64::NAN },
                    "runs_pps": r.found.iter().map(|f| f.rate).collect::<Vec<_>>(),
                    "loss_pct": r.found.iter().map(|f| f.loss).collect::<Vec<_>>(),
                    "generator_bound": bound,
                    "generator_pps": g,
                    "generator_tx": sends,
                    "linux_best_pps": base,
                    "ratio_to_linux": ratio,
                    "host_cpu_pct": r.cpu(true),
                    "adapter_cpu_pct": r.cpu(false),
                    "adapter_ns_per_packet": r.adapter_ns(),
                    "adapter_drops": r.found.iter().map(|f| json!(f.drops)).collect::<Vec<_>>(),
                    "port_tx": r.found.first().map(|f| f.port_tx.clone()).filter(|t| !t.is_empty()),
                    "placement": r.case.placement(a.adapters.apart),
                    "packets": a.packets,
                    "max_loss_pct": a.loss,
                })
            );
        } else {
            let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1} %"));
            println!(
                "{:>6} {:>10} {:>12.0} {:>11.2} {:>9} {:>10.0} {:>9} {:>9}  {}{}",
                r.size,
                r.case.name(),
                rate,
                if rate > 0.0 { 1e6 / rate } else { f64::NAN },
                ratio.map_or("-".into(), |x| format!("{x:.2}x")),
                g,
                pct(r.cpu(true)),
                pct(r.cpu(false)),
                r.case.placement(a.adapters.apart),
                if bound { " (the generator's rate)" } else { "" }
            );
            let d = drops_text(r);
            if let Some(f) = r.found.first().filter(|f| !f.port_tx.is_empty()) {
                let d = if d.is_empty() { "none".into() } else { d };
                let ns = r.adapter_ns().map_or(String::new(), |n| {
                    format!("; their CPU {n:.0} ns a frame forwarded")
                });
                println!(
                    "{:>17} adapters' ports send by {}; their drops over the search: {d}{ns}",
                    "", f.port_tx
                );
            }
        }
    }
    if !a.json {
        println!(
            "paper (SPINE, 33 MHz LANai adapters, packet size not given): {} pkt/s over PCI, \
             {} over the switch fabric (Wire), zero host CPU; a host-based router on the same \
             hardware 12 000 pkt/s at 100 % host CPU",
            PAPER[0].1, PAPER[1].1
        );
    }
    if let Some(svg) = &a.svg {
        let (x0, x1) = (
            *a.sizes.iter().min().unwrap_or(&64) as f64,
            *a.sizes.iter().max().unwrap_or(&1500) as f64,
        );
        let mut lines: Vec<Series> = Vec::new();
        for r in rows {
            let name = r.case.name().to_string();
            let pt = (r.size as f64, r.rate());
            match lines.iter_mut().find(|s| s.name == name) {
                Some(s) => s.points.push(pt),
                None => lines.push(Series {
                    name,
                    points: vec![pt],
                }),
            }
        }
        let paper = PAPER
            .iter()
            .map(|(n, v)| Series {
                name: format!("SPINE {n} (paper; size not given)"),
                points: vec![(x0, *v), (x1, *v)],
            })
            .collect();
        plot::write_svg(
            &Figure {
                title: "SPINE Figure 5: forwarding rate at < 0.5 % loss",
                x_desc: "IP packet size (bytes)",
                y_desc: "packets per second",
                lines,
                paper,
                scale: Scale::LogLog,
            },
            svg,
        )?;
    }
    Ok(())
}
