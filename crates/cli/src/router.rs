//! `unet router run|stat`: SPINE's IP router (the SPINE paper, section
//! 5.2). The host application loads the router extension
//! (`extensions/router/Router.java`) onto a running daemon's adapter,
//! opens its raw-frame ports (`--port IFACE=ADDR/LEN`), configures the
//! ports' addresses and MACs and the next hops' ports and MACs
//! (`--neighbour ADDR=MAC`, or else resolved here with ARP, once a
//! second until answered: the extension answers ARP for its own
//! addresses but resolves no neighbour itself), builds the LC-trie of
//! the table file (`router/table.rs`) and loads it as route table 0.
//! Then it serves the host path only (`router/icmp.rs`): the frames the
//! extension hands it (for the router itself, TTL expiring, no route,
//! options), never a forwarded packet. SIGHUP re-reads the table file:
//! a new trie is built and loaded while packets flow, and the extension
//! switches to it between two packets. The router stops when its
//! extension is unloaded from elsewhere (`unet spine unload`).
//!
//! Several adapters (the paper's router has one a port): `--socket` once
//! a daemon, `--port IFACE=ADDR/LEN@K` on the adapter of the `K`th
//! socket, and `--between peer|wire` for how a frame routed on one
//! adapter reaches the adapter that owns its egress port (a peer queue
//! for each pair of adapters, or a SPINE link over their UDP wire:
//! `router/adapters.rs`). The extension is loaded onto every adapter and
//! told about every port (its own by engine port id, the others' by the
//! adapter that owns them), every next hop and the table; the ingress
//! adapter does all a packet's work and hands the rewritten frame to the
//! egress adapter, which sends it out. The host application serves the
//! host path of every adapter (an endpoint each) and still nothing per
//! forwarded packet. SIGINT or SIGTERM stops it then (leaving the peer
//! queues it joined).
//!
//! `unet router stat` asks the extension for its counters (forwarded,
//! ARP answered, to and from the host, drops by reason, frames handed to
//! and received from other adapters), on each `--socket` given.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use unet::spine::{split_am, ExtensionOptions};
use unet::{Endpoint, RecvError};
use unet_router::LcTrie;

mod adapters;
mod icmp;
mod signals;
mod stat;
mod table;

use adapters::{Adapters, Between};
use icmp::Port;
use signals::Signals;
use table::{Hops, PortSpec};

#[derive(Subcommand)]
pub enum Command {
    /// Run the router: load its extension and table onto one running
    /// daemon or several (one adapter each), open its ports, serve the
    /// host path until interrupted (SIGHUP re-reads the table).
    Run(RunArgs),
    /// Print the router extension's counters.
    Stat(stat::StatArgs),
}

#[derive(Args)]
pub struct RunArgs {
    /// Control socket of an engine: one adapter of the router
    /// (repeatable: adapter K is the Kth given).
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    socket: Vec<PathBuf>,
    /// How adapters reach each other: a peer queue for each pair, or a
    /// SPINE link over their engines' UDP wire (each daemon started with
    /// `--udp ADDR`).
    #[arg(long, value_enum, default_value = "peer")]
    between: Between,
    /// The routing table: `a.b.c.d/len next-hop [port]` a line.
    #[arg(long, value_name = "FILE")]
    table: PathBuf,
    /// A port: a network interface (in the engine's and this process's
    /// network namespace) and the router's address on it, on the adapter
    /// of the Kth `--socket` (default 0) (repeatable, at most 4; a table's
    /// port index counts these in order).
    #[arg(long = "port", value_name = "IFACE=ADDR/LEN[@K]", required = true)]
    ports: Vec<String>,
    /// The MAC the router's port on IFACE uses instead of the interface's
    /// own (repeatable): the port's frames are then the adapter's alone,
    /// and the host's kernel, seeing frames for another host, drops them
    /// at the door instead of taking each through its IP input. On an
    /// interface that filters unicast (a NIC, not veth), put it in
    /// promiscuous mode (`ip link set IFACE promisc on`).
    #[arg(long = "port-mac", value_name = "IFACE=MAC")]
    port_macs: Vec<String>,
    /// A neighbour's MAC (repeatable): a next hop's, or a host's on a
    /// port's subnet, which gets a route of its own. A next hop without
    /// one is resolved with ARP.
    #[arg(long = "neighbour", value_name = "ADDR=MAC")]
    neighbours: Vec<String>,
    /// The extension's class file (default: `extensions/router/Router.java`
    /// of the source checkout, compiled with the JDK found).
    #[arg(long, value_name = "FILE.class")]
    class: Option<PathBuf>,
    /// The extension's first handler number (it takes four).
    #[arg(long, default_value_t = 200)]
    handlers: u16,
    /// Time budget of one handler invocation, µs (default: the engine's).
    #[arg(long, value_name = "US", default_value_t = 0)]
    budget_us: u32,
}

pub fn run(c: Command) -> ExitCode {
    let r = match c {
        Command::Run(a) => serve(a),
        Command::Stat(a) => stat::stat(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => crate::spine::fail(e),
    }
}

/// The router's class file: `--class`, or the checkout's source compiled.
fn class_bytes(class: Option<&Path>) -> Result<Vec<u8>, String> {
    crate::jdk::extension_class(class, "router/Router.java", "Router")
}

/// An interface's MAC, from sysfs (this process's network namespace).
fn mac_of(iface: &str) -> Result<[u8; 6], String> {
    let p = format!("/sys/class/net/{iface}/address");
    let s = std::fs::read_to_string(&p).map_err(|e| format!("{p}: {e}"))?;
    table::parse_mac(&s)
}

fn mac_text(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A port of the router: the adapter that owns it, the engine's port id
/// there, and the host's view.
#[derive(Clone, Copy)]
struct PortAt {
    adapter: usize,
    id: u32,
    port: Port,
}

/// The running router: its adapters, ports and next hops.
struct Router {
    adapters: Adapters,
    base: u16,
    specs: Vec<PortSpec>,
    /// By table port index.
    ports: Vec<PortAt>,
    neighbours: BTreeMap<Ipv4Addr, [u8; 6]>,
    hops: Hops,
    /// Next-hop numbers the extensions have been given.
    configured: usize,
    /// Next hops without a MAC, being resolved (ARP).
    unresolved: Vec<usize>,
    /// Next hops whose ARP reply came, to configure.
    learned: Vec<(usize, [u8; 6])>,
    /// The table now loaded (the slow path's lookups).
    trie: Option<LcTrie>,
    /// Frames handed to the host, by reason; answers sent; sends refused.
    seen: [u64; 8],
    answered: u64,
    refused: u64,
    buf: Vec<u8>,
}

impl Router {
    /// Send configuration `[op, k, v]`, `mac` and `extra` to adapter
    /// `a`; wait for its answer (frames that arrive meanwhile on that
    /// adapter's endpoint are served).
    fn config(
        &mut self,
        a: usize,
        op: i32,
        k: u32,
        v: u32,
        mac: &[u8; 6],
        extra: &[u32],
    ) -> Result<(), String> {
        let mut args = Vec::with_capacity(18 + 4 * extra.len());
        args.extend_from_slice(&op.to_le_bytes());
        args.extend_from_slice(&k.to_le_bytes());
        args.extend_from_slice(&v.to_le_bytes());
        args.extend_from_slice(mac);
        for w in extra {
            args.extend_from_slice(&w.to_le_bytes());
        }
        self.adapters.list[a]
            .ep
            .send_am(self.base + 1, &args, &[])
            .map_err(|e| format!("configuration: {e}"))?;
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if self.step(a, Some(Duration::from_millis(100)))? == Some(self.base + 1) {
                return Ok(());
            }
        }
        Err("the extension did not answer its configuration".into())
    }

    /// Tell every adapter about every port: its own by engine port id,
    /// another's by a slot with the owner's destination and port id.
    fn config_ports(&mut self) -> Result<(), String> {
        for a in 0..self.adapters.list.len() {
            for p in 0..self.ports.len() {
                let PortAt { adapter, id, port } = self.ports[p];
                let slot = adapters::slot(a, p, adapter, id);
                if adapter == a {
                    self.config(a, 1, slot, port.addr, &port.mac, &[])?;
                } else {
                    let to = self.adapters.dest(a, adapter);
                    self.config(a, 4, slot, port.addr, &port.mac, &[to, id])?;
                }
            }
        }
        Ok(())
    }

    /// Configure next hop `k` at `mac` on every adapter.
    fn config_hop(&mut self, k: usize, mac: &[u8; 6]) -> Result<(), String> {
        let p = self.hops.list[k].port;
        for a in 0..self.adapters.list.len() {
            let at = self.ports[p];
            let slot = adapters::slot(a, p, at.adapter, at.id);
            self.config(a, 2, k as u32, slot, mac, &[])?;
        }
        Ok(())
    }

    /// Configure next hops not yet given to the extensions (those with a
    /// known MAC; the others stay unresolved: host unreachable).
    fn config_hops(&mut self) -> Result<(), String> {
        while self.configured < self.hops.list.len() {
            let k = self.configured;
            let h = self.hops.list[k];
            self.configured += 1;
            let Some(mac) = self.neighbours.get(&h.addr).copied() else {
                println!("router: resolving next hop {}", h.addr);
                self.unresolved.push(k);
                self.ask(k);
                continue;
            };
            self.config_hop(k, &mac)?;
        }
        Ok(())
    }

    /// Send an ARP request for next hop `k` out of its port.
    fn ask(&mut self, k: usize) {
        let h = self.hops.list[k];
        let at = self.ports[h.port];
        let f = icmp::arp_request(&at.port, u32::from(h.addr));
        if self.adapters.list[at.adapter]
            .ep
            .send_am(self.base + 2, &at.id.to_le_bytes(), &f)
            .is_err()
        {
            self.refused += 1;
        }
    }

    /// Configure the next hops whose ARP replies came.
    fn config_learned(&mut self) -> Result<(), String> {
        while let Some((k, mac)) = self.learned.pop() {
            let h = self.hops.list[k];
            self.neighbours.insert(h.addr, mac);
            self.config_hop(k, &mac)?;
            println!("router: next hop {} is at {}", h.addr, mac_text(&mac));
        }
        Ok(())
    }

    /// Read the table file, build its trie and load it as table 0 onto
    /// every adapter. If an adapter refuses it, the adapters that took it
    /// get the table before it back, so that all forward by one table
    /// (the error says which adapters, if any, could not be put back).
    fn load_table(&mut self, path: &Path) -> Result<String, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let lines = table::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let routes = self.hops.routes(&lines, &self.specs, &self.neighbours)?;
        let t = LcTrie::build(&routes).map_err(|e| format!("{e:?}"))?;
        self.config_hops()?;
        let old = self.trie.as_ref().map(LcTrie::to_le_bytes);
        let ads = &self.adapters.list;
        let loaded = load_everywhere(ads.len(), &t.to_le_bytes(), old.as_deref(), |i, b| {
            let ad = &ads[i];
            ad.session
                .load_table(ad.ext.id, 0, b)
                .map_err(|e| e.to_string())
        })?;
        self.trie = Some(t);
        Ok(format!(
            "router: table version {}: {} routes, {} next hops, {} bytes",
            loaded
                .iter()
                .map(|l| l.version.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            routes.len(),
            self.hops.list.len(),
            loaded.last().map_or(0, |l| l.bytes)
        ))
    }

    /// Serve what arrives on any adapter's endpoint within `wait`: what
    /// waits now, else one sleep on all the endpoints at once (no spin:
    /// the host application uses no CPU while nothing comes to it).
    fn serve_all(&mut self, wait: Duration) -> Result<(), String> {
        let n = self.adapters.list.len();
        let mut got = false;
        for a in 0..n {
            while self.step(a, None)?.is_some() {
                got = true;
            }
        }
        if !got {
            let mut eps: Vec<&mut Endpoint> =
                self.adapters.list.iter_mut().map(|a| &mut a.ep).collect();
            if let Some(a) = Endpoint::wait_any(&mut eps, Some(wait)) {
                while self.step(a, None)?.is_some() {}
            }
        }
        Ok(())
    }

    /// Serve what arrives on adapter `a`'s endpoint within `wait` (None:
    /// what is waiting now): the handler number of the active message
    /// taken, if any.
    fn step(&mut self, a: usize, wait: Option<Duration>) -> Result<Option<u16>, String> {
        let ep = &mut self.adapters.list[a].ep;
        let r = match wait {
            Some(w) => match ep.recv(&mut self.buf, Some(w)) {
                Ok(r) => r,
                Err(RecvError::Timeout) => return Ok(None),
                Err(e) => return Err(e.to_string()),
            },
            None => match ep.try_recv(&mut self.buf) {
                Ok(Some(r)) => r,
                Ok(None) => return Ok(None),
                Err(e) => return Err(e.to_string()),
            },
        };
        let Some(h) = r.handler() else {
            return Ok(None);
        };
        if h == self.base {
            let len = r.len;
            let frame = self.buf[..len].to_vec();
            if let Some((args, f)) = split_am(&frame) {
                if args.len() >= 2 {
                    self.host_frame(a, args[0], args[1].into(), f);
                }
            }
        }
        Ok(Some(h))
    }

    /// Send `frame` out of port `id` of adapter `a` (through its
    /// extension's `onHostSend`).
    fn host_send(&mut self, a: usize, id: u32, frame: &[u8]) {
        match self.adapters.list[a]
            .ep
            .send_am(self.base + 2, &id.to_le_bytes(), frame)
        {
            Ok(_) => self.answered += 1,
            Err(_) => self.refused += 1,
        }
    }

    /// A frame adapter `a`'s extension handed the host for reason `why`,
    /// from the engine's port `pid` there.
    fn host_frame(&mut self, a: usize, why: u8, pid: u32, f: &[u8]) {
        self.seen[usize::from(why).min(7)] += 1;
        let Some(k) = self
            .ports
            .iter()
            .position(|p| p.adapter == a && p.id == pid)
        else {
            return;
        };
        let port = self.ports[k].port;
        if why == 7 {
            // An ARP reply: a next hop being resolved, on its own port.
            if let Some((addr, mac)) = icmp::arp_reply(f) {
                let hops = &self.hops.list;
                if let Some(i) = self
                    .unresolved
                    .iter()
                    .position(|&n| u32::from(hops[n].addr) == addr && hops[n].port == k)
                {
                    self.learned.push((self.unresolved.remove(i), mac));
                }
            }
            return;
        }
        let own: Vec<u32> = self.ports.iter().map(|p| p.port.addr).collect();
        let is_own = |a: u32| own.contains(&a);
        if why == icmp::why::OPTIONS {
            if let Some((out, g)) = self.slow_path(f, &is_own) {
                let at = self.ports[out];
                self.host_send(at.adapter, at.id, &g);
                return;
            }
        }
        // TTL expiring, or no route (with options too: answered as the
        // fast path's), for the router, ...: answered out of the ingress
        // port.
        let answer = if why == icmp::why::OPTIONS {
            self.options_answer(f, &port, &is_own)
        } else {
            icmp::answer(why, f, &port, is_own)
        };
        if let Some(g) = answer {
            self.host_send(a, pid, &g);
        }
    }

    /// A packet with options forwarded by the host: (egress port index,
    /// frame).
    fn slow_path(&self, f: &[u8], own: &dyn Fn(u32) -> bool) -> Option<(usize, Vec<u8>)> {
        let dst = icmp::destination(f)?;
        if own(dst) || dst >> 28 >= 14 {
            return None;
        }
        let nh = self.trie.as_ref()?.lookup(dst)? as usize;
        let h = self.hops.list.get(nh)?;
        let mac = self.neighbours.get(&h.addr)?;
        let p = self.ports[h.port].port;
        Some((h.port, icmp::forward(f, (p.mac, *mac))?))
    }

    /// What a packet with options that the slow path did not forward gets.
    fn options_answer(&self, f: &[u8], port: &Port, own: &dyn Fn(u32) -> bool) -> Option<Vec<u8>> {
        let dst = icmp::destination(f)?;
        let why = if own(dst) || dst >> 28 >= 14 {
            icmp::why::FOR_ME
        } else if f.get(icmp::ETH + 8).is_some_and(|&t| t <= 1) {
            icmp::why::TTL
        } else if self.trie.as_ref().and_then(|t| t.lookup(dst)).is_none() {
            icmp::why::NO_ROUTE
        } else {
            icmp::why::NO_NEIGHBOUR
        };
        icmp::answer(why, f, port, own)
    }

    /// The extension that is no longer loaded on its adapter, if any.
    fn unloaded(&self) -> Result<Option<String>, String> {
        for (k, ad) in self.adapters.list.iter().enumerate() {
            let l = ad.session.list_extensions().map_err(|e| e.to_string())?;
            if !l.extensions.iter().any(|x| x.id == ad.ext.id) {
                return Ok(Some(if self.adapters.list.len() == 1 {
                    format!("router: extension {} was unloaded", ad.ext.id)
                } else {
                    format!(
                        "router: extension {} on adapter {k} was unloaded",
                        ad.ext.id
                    )
                }));
            }
        }
        Ok(None)
    }
}

fn serve(a: RunArgs) -> Result<(), String> {
    let several = a.socket.len() > 1;
    let sigs = Signals::block(several);
    let mut specs = Vec::new();
    let mut owners = Vec::new();
    for s in &a.ports {
        let (p, k) = adapters::owner_of(s)?;
        if k >= a.socket.len() {
            return Err(format!(
                "{s:?}: adapter {k}, but {} --socket",
                a.socket.len()
            ));
        }
        specs.push(PortSpec::parse(p)?);
        owners.push(k);
    }
    let neighbours = a
        .neighbours
        .iter()
        .map(|s| table::parse_neighbour(s))
        .collect::<Result<BTreeMap<_, _>, _>>()?;
    let mut own = BTreeMap::new();
    for s in &a.port_macs {
        let (iface, mac) = s
            .split_once('=')
            .ok_or_else(|| format!("--port-mac {s:?}: want IFACE=MAC"))?;
        let mac = table::parse_mac(mac).map_err(|e| format!("--port-mac {s:?}: {e}"))?;
        if mac[0] & 1 != 0 || mac == [0; 6] {
            return Err(format!("--port-mac {s:?}: not a unicast MAC"));
        }
        if !specs.iter().any(|p| p.iface == iface) {
            return Err(format!("--port-mac {s:?}: {iface} is not a --port"));
        }
        own.insert(iface.to_string(), mac);
    }
    let macs = specs
        .iter()
        .map(|p| {
            own.get(&p.iface)
                .copied()
                .map_or_else(|| mac_of(&p.iface), Ok)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let class = class_bytes(a.class.as_deref())?;
    let opts = ExtensionOptions {
        name: "router".into(),
        budget_us: a.budget_us,
        arg: i32::from(a.handlers),
        domains: Vec::new(),
    };
    let adapters = Adapters::open(&a.socket, &class, &opts)?;
    let mut r = Router {
        adapters,
        base: a.handlers,
        specs,
        ports: Vec::new(),
        neighbours,
        hops: Hops::default(),
        configured: 0,
        unresolved: Vec::new(),
        learned: Vec::new(),
        trie: None,
        seen: [0; 8],
        answered: 0,
        refused: 0,
        buf: vec![0u8; 1 << 16],
    };
    let end = run_router(&mut r, &a, &owners, &macs, &sigs);
    r.adapters.leave();
    end
}

/// Set the router up on its adapters and serve until it stops.
fn run_router(
    r: &mut Router,
    a: &RunArgs,
    owners: &[usize],
    macs: &[[u8; 6]],
    sigs: &Signals,
) -> Result<(), String> {
    // Claim each extension's configuration (and host path) for this
    // application's endpoint before anything else can.
    for k in 0..r.adapters.list.len() {
        r.config(k, 3, 0, 0, &[0; 6], &[])?;
    }
    r.adapters.join(a.between)?;
    for ((p, mac), &owner) in r.specs.clone().iter().zip(macs).zip(owners) {
        let id = r.adapters.list[owner]
            .session
            .spine_port_open(&p.iface, a.handlers)
            .map_err(|e| format!("port on {}: {e}", p.iface))?;
        r.ports.push(PortAt {
            adapter: owner,
            id,
            port: Port {
                addr: u32::from(p.addr),
                mac: *mac,
            },
        });
    }
    let exts: Vec<String> = r
        .adapters
        .list
        .iter()
        .enumerate()
        .map(|(k, ad)| {
            let on = if several(r) {
                format!(" on adapter {k} ({})", ad.socket.display())
            } else {
                String::new()
            };
            format!(
                "extension {} with handlers {:?}{on}",
                ad.ext.id, ad.ext.handlers
            )
        })
        .collect();
    let mut line = format!("router: {}", exts.join(", "));
    for (k, at) in r.ports.iter().enumerate() {
        let s = &r.specs[k];
        line += &format!(
            "; port {} on {} {}/{} {}",
            at.id,
            s.iface,
            s.addr,
            s.len,
            mac_text(&at.port.mac)
        );
        if several(r) {
            line += &format!(" (adapter {})", at.adapter);
        }
    }
    r.config_ports()?;
    println!("{line}");
    for j in &r.adapters.joins {
        println!("{j}");
    }
    println!("{}", r.load_table(&a.table)?);
    // From here a signal cuts the sleep short: a second at a time.
    sigs.catch()?;
    let mut look = Instant::now();
    loop {
        r.serve_all(Duration::from_secs(1))?;
        r.config_learned()?;
        // Now and then: whether the extensions are still loaded (one
        // unloaded from elsewhere, or an engine gone, the router stops).
        if look.elapsed() >= Duration::from_secs(1) {
            look = Instant::now();
            if let Some(l) = r.unloaded()? {
                println!("{l}");
                return Ok(());
            }
            for k in r.unresolved.clone() {
                r.ask(k);
            }
        }
        match sigs.take() {
            Some(libc::SIGHUP) => {
                match r.load_table(&a.table) {
                    Ok(l) => println!("{l}"),
                    Err(e) => println!("router: table not replaced: {e}"),
                }
                let seen: Vec<String> = icmp::why::NAMES
                    .iter()
                    .zip(r.seen)
                    .skip(1)
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                println!(
                    "router: host path: {}; answers {}, refused {}",
                    seen.join(", "),
                    r.answered,
                    r.refused
                );
            }
            Some(s) => {
                println!("router: stopped by signal {s}");
                return Ok(());
            }
            None => {}
        }
    }
}

/// Whether the router has several adapters.
fn several(r: &Router) -> bool {
    r.adapters.list.len() > 1
}

/// Loads `new` onto adapters `0..n` in turn with `load`. When adapter `i`
/// refuses it, adapters `0..i` get `old` back (with no old table they keep
/// the new one: there is nothing to forward by but it), and the error
/// names the refusal and any adapter that refused the old table too.
fn load_everywhere<T>(
    n: usize,
    new: &[u8],
    old: Option<&[u8]>,
    mut load: impl FnMut(usize, &[u8]) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let mut done = Vec::with_capacity(n);
    for i in 0..n {
        match load(i, new) {
            Ok(l) => done.push(l),
            Err(e) => {
                let Some(old) = old else {
                    return Err(format!("loading the table onto adapter {i}: {e}"));
                };
                let stuck: Vec<String> = (0..i)
                    .filter_map(|j| load(j, old).err().map(|e| format!("adapter {j}: {e}")))
                    .collect();
                return Err(if stuck.is_empty() {
                    format!("loading the table onto adapter {i}: {e}; every adapter keeps the previous table")
                } else {
                    format!(
                        "loading the table onto adapter {i}: {e}; the previous table could not be put back on {}: the adapters forward by different tables",
                        stuck.join(", ")
                    )
                });
            }
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::load_everywhere;

    /// What was loaded, and each load asked for: (adapter, table).
    type Outcome = (Result<Vec<usize>, String>, Vec<(usize, u8)>);

    /// A loader that records what it loaded where and refuses the loads
    /// listed in `refuse` (adapter, table).
    fn run(n: usize, old: Option<&[u8]>, refuse: &[(usize, u8)]) -> Outcome {
        let mut calls = Vec::new();
        let r = load_everywhere(n, b"N", old, |i, b| {
            calls.push((i, b[0]));
            if refuse.contains(&(i, b[0])) {
                Err("refused".into())
            } else {
                Ok(i)
            }
        });
        (r, calls)
    }

    #[test]
    fn every_adapter_takes_the_new_table() {
        let (r, calls) = run(3, Some(b"O"), &[]);
        assert_eq!(r.unwrap(), vec![0, 1, 2]);
        assert_eq!(calls, vec![(0, b'N'), (1, b'N'), (2, b'N')]);
    }

    #[test]
    fn a_refusal_puts_the_previous_table_back_on_the_adapters_before_it() {
        let (r, calls) = run(3, Some(b"O"), &[(2, b'N')]);
        let e = r.unwrap_err();
        assert!(
            e.contains("adapter 2") && e.contains("keeps the previous table"),
            "{e}"
        );
        assert_eq!(
            calls,
            vec![(0, b'N'), (1, b'N'), (2, b'N'), (0, b'O'), (1, b'O')]
        );
    }

    #[test]
    fn a_failed_put_back_is_named() {
        let (r, _) = run(3, Some(b"O"), &[(2, b'N'), (1, b'O')]);
        let e = r.unwrap_err();
        assert!(
            e.contains("adapter 1: refused") && e.contains("different tables"),
            "{e}"
        );
        assert!(!e.contains("adapter 0:"), "{e}");
    }

    #[test]
    fn the_first_table_has_nothing_to_put_back() {
        let (r, calls) = run(2, None, &[(1, b'N')]);
        assert!(r.unwrap_err().contains("adapter 1"));
        assert_eq!(calls, vec![(0, b'N'), (1, b'N')]);
    }
}
