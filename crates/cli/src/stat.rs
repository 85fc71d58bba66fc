//! `unet stat`: read a running engine's counters from shared memory, like
//! AeronStat reads Aeron's.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use unet_abi::*;

#[derive(clap::Args)]
pub struct Args {
    /// Control socket of the engine.
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Refresh every this many milliseconds until interrupted.
    #[arg(long, value_name = "MS", num_args = 0..=1, default_missing_value = "1000")]
    pub watch: Option<u64>,
    /// Show counters that are zero too.
    #[arg(long)]
    pub all: bool,
    /// Print one JSON object instead of a table.
    #[arg(long, conflicts_with = "prometheus")]
    pub json: bool,
    /// Print every counter in the Prometheus text format (what `unet
    /// daemon --metrics ADDR` serves).
    #[arg(long)]
    pub prometheus: bool,
    /// Give up when the daemon does not answer a request in this many
    /// milliseconds (0: wait forever); the default is 5000, or
    /// `UNET_TIMEOUT_MS` from the environment.
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,
}

/// What `unet stat` says when a request to the daemon fails.
fn report(a: &Args, e: &unet::Error) {
    match e {
        unet::Error::Timeout(t) => eprintln!(
            "unet stat: the daemon at {} is not answering (no reply in {} ms)",
            a.socket.display(),
            t.as_millis()
        ),
        e => eprintln!("unet stat: {e}"),
    }
}

/// A snapshot of every counter, as (scope, name, value).
pub(crate) fn snapshot(seg: &unet_sys::Segment, max: u32) -> Vec<(String, String, u64)> {
    let mut out = Vec::new();
    // SAFETY: the segment holds counters_segment_size(max) bytes (checked
    // when it was mapped); the header and slots are atomics read with
    // Relaxed loads, each value independent.
    let h = unsafe { seg.ptr().cast::<CountersHeader>().as_ref() };
    for &c in EngineCounter::ALL {
        out.push((
            "engine".to_string(),
            c.name().to_string(),
            h.engine[c as usize].load(Ordering::Relaxed),
        ));
    }
    for Slot { id, pid, s } in live_slots(seg, max) {
        let scope = format!("endpoint {id} (pid {pid})");
        out.push((
            scope.clone(),
            "channels_peak".to_string(),
            s.channels_peak.load(Ordering::Relaxed) as u64,
        ));
        for &c in EndpointCounter::ALL {
            out.push((
                scope.clone(),
                c.name().to_string(),
                s.counters[c as usize].load(Ordering::Relaxed),
            ));
        }
        // Counted by the client library (the direct path, inline applets)
        // and reported through its endpoint header.
        for c in ClientCounter::ALL {
            out.push((
                scope.clone(),
                format!("client.{}", c.name()),
                s.client[c as usize].load(Ordering::Relaxed),
            ));
        }
    }
    out
}

/// One live endpoint slot: who owns it and its counters.
struct Slot<'a> {
    id: u32,
    pid: u32,
    s: &'a EndpointSlot,
}

/// The live endpoint slots of a counters segment with `max` slots.
fn live_slots(seg: &unet_sys::Segment, max: u32) -> Vec<Slot<'_>> {
    let mut out = Vec::new();
    for i in 0..max as usize {
        let off = ENDPOINT_SLOTS_OFF + i * std::mem::size_of::<EndpointSlot>();
        let Some(p) = seg.at(off, std::mem::size_of::<EndpointSlot>()) else {
            break;
        };
        // SAFETY: in bounds (checked by at()), 8-byte aligned; the slot's
        // fields are atomics.
        let s = unsafe { p.cast::<EndpointSlot>().as_ref() };
        if s.live.load(Ordering::Acquire) == 0 {
            continue;
        }
        out.push(Slot {
            id: s.endpoint_id.load(Ordering::Relaxed),
            pid: s.pid.load(Ordering::Relaxed),
            s,
        });
    }
    out
}

/// One VI as the engine last described it.
struct Vi {
    id: u32,
    pid: u32,
    state: u32,
    reliability: u8,
    carried: bool,
    strict: bool,
    peer: Option<std::net::SocketAddr>,
    peer_vi: u32,
    counters: [u64; VI_COUNTERS],
}

impl Vi {
    fn state_name(&self) -> &'static str {
        ViError::from_u32(self.state).map_or("connected", |e| e.name())
    }
    fn reliability_name(&self) -> &'static str {
        Reliability::from_u8(self.reliability).map_or("?", |r| r.name())
    }
}

/// The live VI slots of a counters segment with `max` endpoint slots.
fn live_vis(seg: &unet_sys::Segment, max: u32) -> Vec<Vi> {
    let mut out = Vec::new();
    for i in 0..VI_SLOTS {
        let off = vi_slots_off(max) + i * std::mem::size_of::<ViSlot>();
        let Some(p) = seg.at(off, std::mem::size_of::<ViSlot>()) else {
            break;
        };
        // SAFETY: in bounds (checked by at()), 8-byte aligned; the slot's
        // fields are atomics.
        let s = unsafe { p.cast::<ViSlot>().as_ref() };
        if s.live.load(Ordering::Acquire) == 0 {
            continue;
        }
        let kind = s.kind.load(Ordering::Relaxed);
        let mut addr = [0u8; 16];
        for (k, w) in s.addr.iter().enumerate() {
            addr[4 * k..4 * k + 4].copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
        }
        let port = s.port.load(Ordering::Relaxed) as u16;
        let peer = match (kind >> 24) & 0xff {
            4 => Some(std::net::SocketAddr::from((
                [addr[0], addr[1], addr[2], addr[3]],
                port,
            ))),
            6 => Some(std::net::SocketAddr::from((addr, port))),
            _ => None,
        };
        out.push(Vi {
            id: s.vi_id.load(Ordering::Relaxed),
            pid: s.pid.load(Ordering::Relaxed),
            state: s.state.load(Ordering::Relaxed),
            reliability: kind as u8,
            carried: (kind >> 8) & 1 == 1,
            strict: (kind >> 16) & 1 == 1,
            peer,
            peer_vi: s.peer_vi.load(Ordering::Relaxed),
            counters: std::array::from_fn(|k| s.counters[k].load(Ordering::Relaxed)),
        });
    }
    out
}

/// VIs as text: one line each, then its nonzero counters.
fn print_vis(seg: &unet_sys::Segment, max: u32, all: bool) {
    let vis = live_vis(seg, max);
    if vis.is_empty() {
        return;
    }
    println!("VIs:");
    for v in &vis {
        let path = match v.peer {
            Some(a) => format!("to {a}/vi {}", v.peer_vi),
            None if v.carried => "connecting".to_string(),
            None => format!("local, peer vi {}", v.peer_vi),
        };
        println!(
            "  vi {} (pid {}): {}, {}{}, {path}",
            v.id,
            v.pid,
            v.state_name(),
            v.reliability_name(),
            if v.strict { ", strict" } else { "" },
        );
        for &c in ViCounter::ALL {
            let n = v.counters[c as usize];
            if n != 0 || all {
                println!("    {:<30} {n:>16}", c.name());
            }
        }
    }
}

/// VIs as JSON rows.
fn vis_json(seg: &unet_sys::Segment, max: u32) -> Vec<serde_json::Value> {
    use serde_json::{json, Map, Value};
    live_vis(seg, max)
        .into_iter()
        .map(|v| {
            let mut counters = Map::new();
            for &c in ViCounter::ALL {
                counters.insert(c.name().into(), json!(v.counters[c as usize]));
            }
            json!({
                "id": v.id,
                "pid": v.pid,
                "state": v.state_name(),
                "reliability": v.reliability_name(),
                "strict_rnr": v.strict,
                "path": if v.carried { "engine" } else { "direct" },
                "peer": v.peer.map(|a| a.to_string()),
                "peer_vi": v.peer_vi,
                "counters": Value::Object(counters),
            })
        })
        .collect()
}

/// One UDM node as the engine last described it.
struct UdmNodeRow {
    job: u32,
    rank: u32,
    pid: u32,
    mode: u32,
    nodes: u32,
    counters: [u64; udm::UDM_COUNTERS],
    client: [u64; udm::UDM_CLIENT_COUNTERS],
}

impl UdmNodeRow {
    fn mode_name(&self) -> &'static str {
        match self.mode {
            0 => "fast",
            1 => "buffered",
            3 => "remote",
            _ => "gone",
        }
    }
}

/// The live UDM node slots of a counters segment with `max` endpoint
/// slots.
fn live_udm(seg: &unet_sys::Segment, max: u32) -> Vec<UdmNodeRow> {
    let mut out = Vec::new();
    for i in 0..udm::UDM_SLOTS {
        let off = udm_slots_off(max) + i * std::mem::size_of::<udm::UdmSlot>();
        let Some(p) = seg.at(off, std::mem::size_of::<udm::UdmSlot>()) else {
            break;
        };
        // SAFETY: in bounds (checked by at()), 8-byte aligned; the slot's
        // fields are atomics.
        let s = unsafe { p.cast::<udm::UdmSlot>().as_ref() };
        if s.live.load(Ordering::Acquire) == 0 {
            continue;
        }
        out.push(UdmNodeRow {
            job: s.job.load(Ordering::Relaxed),
            rank: s.rank.load(Ordering::Relaxed),
            pid: s.pid.load(Ordering::Relaxed),
            mode: s.mode.load(Ordering::Relaxed),
            nodes: s.nodes.load(Ordering::Relaxed),
            counters: std::array::from_fn(|k| s.counters[k].load(Ordering::Relaxed)),
            client: std::array::from_fn(|k| s.client[k].load(Ordering::Relaxed)),
        });
    }
    out
}

/// UDM nodes as text: one line each, then their nonzero counters (the
/// engine's, then the nodes' own).
fn print_udm(seg: &unet_sys::Segment, max: u32, all: bool) {
    let rows = live_udm(seg, max);
    if rows.is_empty() {
        return;
    }
    println!("UDM nodes:");
    for r in &rows {
        println!(
            "  job {} node {}/{} (pid {}): {}",
            r.job,
            r.rank,
            r.nodes,
            r.pid,
            r.mode_name()
        );
        let own = udm::UdmClientCounter::ALL
            .iter()
            .map(|&c| (c.name(), r.client[c as usize]));
        let engine = udm::UdmCounter::ALL
            .iter()
            .map(|&c| (c.name(), r.counters[c as usize]));
        for (name, n) in own.chain(engine) {
            if n != 0 || all {
                println!("    {name:<30} {n:>16}");
            }
        }
    }
}

/// The buffered endpoints (two-case delivery) as a table: their virtual
/// buffer's limit, pages in use and at most, pages given back, messages
/// buffered, senders held and messages dropped at the limit.
fn print_buffered(seg: &unet_sys::Segment, max: u32) {
    use EndpointCounter as C;
    let v = |sl: &Slot<'_>, c: C| sl.s.counters[c as usize].load(Ordering::Relaxed);
    let rows: Vec<_> = live_slots(seg, max)
        .into_iter()
        .filter(|sl| v(sl, C::BufferLimit) > 0)
        .collect();
    if rows.is_empty() {
        return;
    }
    println!("buffered endpoints:");
    println!(
        "  {:>8} {:>8} {:>10} {:>8} {:>9} {:>10} {:>12} {:>8} {:>10}",
        "endpoint",
        "pid",
        "limit",
        "pages",
        "pages_max",
        "returned",
        "rx_buffered",
        "rx_held",
        "drop_limit"
    );
    for sl in &rows {
        println!(
            "  {:>8} {:>8} {:>10} {:>8} {:>9} {:>10} {:>12} {:>8} {:>10}",
            sl.id,
            sl.pid,
            bytes(v(sl, C::BufferLimit)),
            v(sl, C::BufferPages),
            v(sl, C::BufferPagesMax),
            v(sl, C::PagesReturned),
            v(sl, C::RxBuffered),
            v(sl, C::RxHeld),
            v(sl, C::RxDropBufferLimit)
        );
    }
}

/// UDM nodes as JSON rows.
fn udm_json(seg: &unet_sys::Segment, max: u32) -> Vec<serde_json::Value> {
    use serde_json::{json, Map, Value};
    live_udm(seg, max)
        .into_iter()
        .map(|r| {
            let mut counters = Map::new();
            for &c in udm::UdmClientCounter::ALL {
                counters.insert(c.name().into(), json!(r.client[c as usize]));
            }
            for &c in udm::UdmCounter::ALL {
                counters.insert(c.name().into(), json!(r.counters[c as usize]));
            }
            json!({
                "job": r.job,
                "rank": r.rank,
                "nodes": r.nodes,
                "pid": r.pid,
                "mode": r.mode_name(),
                "counters": Value::Object(counters),
            })
        })
        .collect()
}

/// What each client process holds, by process id: (endpoints, bytes).
fn per_process(slots: &[Slot<'_>]) -> std::collections::BTreeMap<u32, (u64, u64)> {
    let mut m = std::collections::BTreeMap::new();
    for sl in slots {
        let e = m.entry(sl.pid).or_insert((0, 0));
        e.0 += 1;
        e.1 += sl.s.counters[EndpointCounter::MemoryBytes as usize].load(Ordering::Relaxed);
    }
    m
}

/// `unet stat --json`: one object with the engine's identity and
/// counters, the limits in force, what each process holds against them,
/// and each endpoint with structured fields.
fn to_json(seg: &unet_sys::Segment, max: u32, limits: &unet::Limits) -> serde_json::Value {
    use serde_json::{json, Map, Value};
    // SAFETY: the segment holds counters_segment_size(max) bytes (checked
    // when it was mapped); the header's counters are atomics.
    let h = unsafe { seg.ptr().cast::<CountersHeader>().as_ref() };
    let mut engine = Map::new();
    for &c in EngineCounter::ALL {
        engine.insert(
            c.name().into(),
            json!(h.engine[c as usize].load(Ordering::Relaxed)),
        );
    }
    let slots = live_slots(seg, max);
    let mut endpoints = Vec::new();
    for sl in &slots {
        let mut e = Map::new();
        e.insert("id".into(), json!(sl.id));
        e.insert("pid".into(), json!(sl.pid));
        e.insert("engine_id".into(), json!(h.engine_id));
        e.insert("version".into(), json!(h.version));
        e.insert(
            "channels_peak".into(),
            json!(sl.s.channels_peak.load(Ordering::Relaxed)),
        );
        for &c in EndpointCounter::ALL {
            e.insert(
                c.name().into(),
                json!(sl.s.counters[c as usize].load(Ordering::Relaxed)),
            );
        }
        let mut client = Map::new();
        for c in ClientCounter::ALL {
            client.insert(
                c.name().into(),
                json!(sl.s.client[c as usize].load(Ordering::Relaxed)),
            );
        }
        e.insert("client".into(), Value::Object(client));
        endpoints.push(Value::Object(e));
    }
    let processes: Vec<Value> = per_process(&slots)
        .into_iter()
        .map(|(pid, (n, bytes))| {
            json!({
                "pid": pid,
                "endpoints": n,
                "endpoints_limit": limits.client_endpoints,
                "memory_bytes": bytes,
                "memory_limit": limits.client_memory,
            })
        })
        .collect();
    json!({
        "engine_id": h.engine_id,
        "engine_pid": h.pid,
        "version": h.version,
        "max_endpoints": max,
        "engine": engine,
        "limits": {
            "client_memory": limits.client_memory,
            "user_memory": (limits.user_memory != u64::MAX).then_some(limits.user_memory),
            "client_endpoints": limits.client_endpoints,
            "client_idle_connections": limits.client_idle_connections,
            "user_idle_connections": limits.user_idle_connections,
            "client_regions": limits.client_regions,
            "client_vis": limits.client_vis,
            "client_listeners": limits.client_listeners,
            "client_udm_jobs": limits.client_udm_jobs,
            "client_udm_nodes": limits.client_udm_nodes,
            "vi_held_budget": limits.vi_held_budget,
        },
        "processes": processes,
        "endpoints": endpoints,
        "vis": vis_json(seg, max),
        "udm_nodes": udm_json(seg, max),
    })
}

/// `n` bytes in the largest binary unit that keeps it whole or short.
fn bytes(n: u64) -> String {
    match n {
        u64::MAX => "no limit".into(),
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

/// The limits in force and how close each process is to them, as text.
fn print_limits(seg: &unet_sys::Segment, max: u32, l: &unet::Limits) {
    println!("limits:");
    println!(
        "  per process: {} endpoints of {max}, {} of shared memory, {} idle connections",
        l.client_endpoints,
        bytes(l.client_memory),
        l.client_idle_connections
    );
    println!(
        "  per process: {} memory regions, {} VIs ({} held for each between engines), \
         {} discriminators, {} UDM jobs, {} UDM nodes",
        l.client_regions,
        l.client_vis,
        bytes(l.vi_held_budget),
        l.client_listeners,
        l.client_udm_jobs,
        l.client_udm_nodes
    );
    println!(
        "  per user: {} of shared memory, {} idle connections",
        bytes(l.user_memory),
        l.user_idle_connections
    );
    for (pid, (n, b)) in per_process(&live_slots(seg, max)) {
        println!(
            "  pid {pid:<10} endpoints {n:>4} / {:<4} memory {:>10} / {} ({:.0}%)",
            l.client_endpoints,
            bytes(b),
            bytes(l.client_memory),
            100.0 * b as f64 / l.client_memory.max(1) as f64
        );
    }
}

/// `unet stat --json`'s object: the counters, the limits in force, and
/// SPINE's extensions, peer queues and links if the engine says (an older
/// one may not).
pub(crate) fn collect(session: &unet::Session) -> Result<serde_json::Value, unet::Error> {
    // Asked anew each time: the request also has the engine copy the
    // client-side counters and the levels into the segment.
    let (seg, max, limits) = session.stat()?;
    let mut v = to_json(&seg, max, &limits);
    if let Some(o) = v.as_object_mut() {
        if let Ok(l) = session.list_extensions() {
            o.insert("spine".into(), crate::spine::to_json(&l));
        }
        if let Ok(l) = session.list_peers() {
            o.insert("peers".into(), crate::spine::peers_json(&l));
        }
        if let Ok(l) = session.spine_links() {
            o.insert("spine_links".into(), crate::spine::link::to_json(&l));
        }
    }
    Ok(v)
}

pub fn run(a: Args) -> ExitCode {
    let mut opts = unet::SessionOptions::default();
    if let Some(ms) = a.timeout_ms {
        opts.timeout = (ms > 0).then(|| Duration::from_millis(ms));
    }
    let session = match unet::Session::connect_with(&a.socket, opts) {
        Ok(s) => s,
        Err(e @ unet::Error::Timeout(_)) => {
            report(&a, &e);
            return ExitCode::from(1);
        }
        Err(e) => {
            eprintln!(
                "unet stat: {e} (is `unet daemon --socket {}` running?)",
                a.socket.display()
            );
            return ExitCode::from(1);
        }
    };
    loop {
        if a.json || a.prometheus {
            let v = match collect(&session) {
                Ok(v) => v,
                Err(e) => {
                    report(&a, &e);
                    return ExitCode::from(1);
                }
            };
            if a.prometheus {
                print!("{}", crate::metrics::encode(&v));
            } else {
                println!("{v}");
            }
        } else {
            // Asked anew each time: the request also has the engine copy
            // the client-side counters and the levels into the segment.
            let (seg, max, limits) = match session.stat() {
                Ok(x) => x,
                Err(e) => {
                    report(&a, &e);
                    return ExitCode::from(1);
                }
            };
            let spine = session.list_extensions().ok();
            let peers = session.list_peers().ok();
            let links = session.spine_links().ok();
            if a.watch.is_some() {
                print!("\x1b[2J\x1b[H");
            }
            print_limits(&seg, max, &limits);
            let mut last = String::new();
            for (scope, name, v) in &snapshot(&seg, max) {
                if *v == 0 && !a.all {
                    continue;
                }
                if *scope != last {
                    println!("{scope}:");
                    last = scope.clone();
                }
                println!("  {name:<32} {v:>16}");
            }
            print_buffered(&seg, max);
            print_vis(&seg, max, a.all);
            print_udm(&seg, max, a.all);
            if let Some(l) = &spine {
                crate::spine::print_listing(l, a.all);
            }
            if let Some(l) = &peers {
                crate::spine::print_peers(l, a.all);
            }
            if let Some(l) = &links {
                crate::spine::link::print_links(l, a.all);
            }
        }
        match a.watch {
            Some(ms) => std::thread::sleep(Duration::from_millis(ms.max(50))),
            None => return ExitCode::SUCCESS,
        }
    }
}
