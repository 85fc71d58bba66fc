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
//! `unet router stat` asks the extension for its counters (forwarded,
//! ARP answered, to and from the host, drops by reason).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitCode};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use unet::spine::{split_am, ExtensionOptions};
use unet::{Endpoint, EndpointConfig, RecvError, Session};
use unet_router::LcTrie;

mod icmp;
mod table;

use icmp::Port;
use table::{Hops, PortSpec};

#[derive(Subcommand)]
pub enum Command {
    /// Run the router: load its extension and table onto a running
    /// daemon, open its ports, serve the host path until interrupted
    /// (SIGHUP re-reads the table).
    Run(RunArgs),
    /// Print the router extension's counters.
    Stat(StatArgs),
}

#[derive(Args)]
pub struct RunArgs {
    /// Control socket of the engine.
    #[arg(long, env = "UNET_SOCKET", default_value = crate::daemon::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The routing table: `a.b.c.d/len next-hop [port]` a line.
    #[arg(long, value_name = "FILE")]
    table: PathBuf,
    /// A port: a network interface (in the engine's and this process's
    /// network namespace) and the router's address on it (repeatable, at
    /// most 4; a table's port index counts these in order).
    #[arg(long = "port", value_name = "IFACE=ADDR/LEN", required = true)]
    ports: Vec<String>,
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

#[derive(Args)]
pub struct StatArgs {
    /// Control socket of the engine.
    #[arg(long, env = "UNET_SOCKET", default_value = crate::daemon::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The extension's first handler number.
    #[arg(long, default_value_t = 200)]
    handlers: u16,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    json: bool,
}

/// `Router.java`'s counters, in its order (`C_FORWARDED` ...).
const COUNTERS: [&str; 17] = [
    "forwarded",
    "arp_answered",
    "to_host",
    "from_host",
    "short_frame",
    "short_header",
    "version",
    "header_length",
    "checksum",
    "length",
    "bad_arp",
    "arp_not_mine",
    "other_mac",
    "unconfigured",
    "send_refused",
    "bad_config",
    "no_host",
];
/// Of those, the first that are not drops.
const NOT_DROPS: usize = 4;

pub fn run(c: Command) -> ExitCode {
    let r = match c {
        Command::Run(a) => serve(a),
        Command::Stat(a) => stat(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => crate::spine::fail(e),
    }
}

fn stat(a: StatArgs) -> Result<(), String> {
    let s = Session::connect(&a.socket).map_err(|e| e.to_string())?;
    let mut ep = s
        .create_endpoint(EndpointConfig::default())
        .map_err(|e| e.to_string())?;
    let h = a.handlers + 3;
    ep.send_am(h, &[], &[]).map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 1 << 16];
    let r = ep
        .recv(&mut buf, Some(Duration::from_secs(5)))
        .map_err(|e| format!("no answer from handler {h}: {e}"))?;
    let (args, _) = split_am(&buf[..r.len]).ok_or("bad framing")?;
    let vals: Vec<u32> = args
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if vals.len() != COUNTERS.len() {
        return Err(format!("{} counters, not {}", vals.len(), COUNTERS.len()));
    }
    if a.json {
        let drops: serde_json::Map<String, serde_json::Value> = COUNTERS[NOT_DROPS..]
            .iter()
            .zip(&vals[NOT_DROPS..])
            .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
            .collect();
        let mut o: serde_json::Map<String, serde_json::Value> = COUNTERS[..NOT_DROPS]
            .iter()
            .zip(&vals)
            .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
            .collect();
        o.insert("drops".into(), drops.into());
        println!("{}", serde_json::Value::Object(o));
    } else {
        for (k, v) in COUNTERS.iter().zip(&vals) {
            println!("{k:>14} {v}");
        }
    }
    Ok(())
}

/// The router's class file: `--class`, or the checkout's source compiled.
fn class_bytes(class: Option<&Path>) -> Result<Vec<u8>, String> {
    if let Some(c) = class {
        return std::fs::read(c).map_err(|e| format!("{}: {e}", c.display()));
    }
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let src = checkout.join("extensions/router/Router.java");
    if !src.is_file() {
        return Err(format!("{} not found: give --class", src.display()));
    }
    let jdk = crate::jdk::Jdk::find()?;
    let dir = std::env::temp_dir().join(format!("unet-router-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let o = Process::new(jdk.bin("javac"))
        .args(["--release", "8", "-Xlint:all,-options", "-Werror", "-d"])
        .arg(&dir)
        .arg("-sourcepath")
        .arg(checkout.join("java/applet-sdk/src/main/java"))
        .arg(&src)
        .output()
        .map_err(|e| format!("javac: {e}"))?;
    let r = if o.status.success() {
        std::fs::read(dir.join("Router.class")).map_err(|e| format!("Router.class: {e}"))
    } else {
        Err(format!("javac: {}", String::from_utf8_lossy(&o.stderr)))
    };
    let _ = std::fs::remove_dir_all(&dir);
    r
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

/// The running router: its session, endpoint, ports and next hops.
struct Router {
    session: Session,
    ep: Endpoint,
    ext: u32,
    base: u16,
    specs: Vec<PortSpec>,
    /// By table port index: the engine's port id and the host's view.
    ports: Vec<(u32, Port)>,
    neighbours: BTreeMap<Ipv4Addr, [u8; 6]>,
    hops: Hops,
    /// Next-hop numbers the extension has been given.
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
    /// Send configuration `[op, k, v]` and `mac`; wait for its answer
    /// (frames that arrive meanwhile are served).
    fn config(&mut self, op: i32, k: i32, v: u32, mac: &[u8; 6]) -> Result<(), String> {
        let mut args = Vec::with_capacity(18);
        args.extend_from_slice(&op.to_le_bytes());
        args.extend_from_slice(&k.to_le_bytes());
        args.extend_from_slice(&v.to_le_bytes());
        args.extend_from_slice(mac);
        self.ep
            .send_am(self.base + 1, &args, &[])
            .map_err(|e| format!("configuration: {e}"))?;
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if self.step(Duration::from_millis(100))? == Some(self.base + 1) {
                return Ok(());
            }
        }
        Err("the extension did not answer its configuration".into())
    }

    /// Configure next hops not yet given to the extension (those with a
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
            let port = self.ports[h.port].0;
            self.config(2, k as i32, port, &mac)?;
        }
        Ok(())
    }

    /// Send an ARP request for next hop `k` out of its port.
    fn ask(&mut self, k: usize) {
        let h = self.hops.list[k];
        let (id, p) = self.ports[h.port];
        let f = icmp::arp_request(&p, u32::from(h.addr));
        if self
            .ep
            .send_am(self.base + 2, &id.to_le_bytes(), &f)
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
            self.config(2, k as i32, self.ports[h.port].0, &mac)?;
            println!("router: next hop {} is at {}", h.addr, mac_text(&mac));
        }
        Ok(())
    }

    /// Read the table file, build its trie and load it as table 0.
    fn load_table(&mut self, path: &Path) -> Result<String, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let lines = table::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let routes = self.hops.routes(&lines, &self.specs, &self.neighbours)?;
        let t = LcTrie::build(&routes).map_err(|e| format!("{e:?}"))?;
        self.config_hops()?;
        let loaded = self
            .session
            .load_table(self.ext, 0, &t.to_le_bytes())
            .map_err(|e| format!("loading the table: {e}"))?;
        self.trie = Some(t);
        Ok(format!(
            "router: table version {}: {} routes, {} next hops, {} bytes",
            loaded.version,
            routes.len(),
            self.hops.list.len(),
            loaded.bytes
        ))
    }

    /// Serve what arrives within `wait`: the handler number of the
    /// active message taken, if any.
    fn step(&mut self, wait: Duration) -> Result<Option<u16>, String> {
        let r = match self.ep.recv(&mut self.buf, Some(wait)) {
            Ok(r) => r,
            Err(RecvError::Timeout) => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        let Some(h) = r.handler() else {
            return Ok(None);
        };
        if h == self.base {
            let len = r.len;
            let frame = self.buf[..len].to_vec();
            if let Some((args, f)) = split_am(&frame) {
                if args.len() >= 2 {
                    self.host_frame(args[0], usize::from(args[1]), f);
                }
            }
        }
        Ok(Some(h))
    }

    /// A frame the extension handed the host for reason `why`, from the
    /// engine's port `pid`.
    fn host_frame(&mut self, why: u8, pid: usize, f: &[u8]) {
        self.seen[usize::from(why).min(7)] += 1;
        let Some(k) = self.ports.iter().position(|p| p.0 as usize == pid) else {
            return;
        };
        let port = self.ports[k].1;
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
        let own: Vec<u32> = self.ports.iter().map(|p| p.1.addr).collect();
        let is_own = |a: u32| own.contains(&a);
        let (out, frame) = if why == icmp::why::OPTIONS {
            match self.slow_path(f, &is_own) {
                Some((out, g)) => (out, Some(g)),
                // TTL expiring, or no route: answered as the fast path's.
                None => (pid as u32, self.options_answer(f, &port, &is_own)),
            }
        } else {
            (pid as u32, icmp::answer(why, f, &port, is_own))
        };
        if let Some(g) = frame {
            match self.ep.send_am(self.base + 2, &out.to_le_bytes(), &g) {
                Ok(_) => self.answered += 1,
                Err(_) => self.refused += 1,
            }
        }
    }

    /// A packet with options forwarded by the host: (egress port id, frame).
    fn slow_path(&self, f: &[u8], own: &dyn Fn(u32) -> bool) -> Option<(u32, Vec<u8>)> {
        let dst = icmp::destination(f)?;
        if own(dst) || dst >> 28 >= 14 {
            return None;
        }
        let nh = self.trie.as_ref()?.lookup(dst)? as usize;
        let h = self.hops.list.get(nh)?;
        let mac = self.neighbours.get(&h.addr)?;
        let (id, p) = self.ports[h.port];
        Some((id, icmp::forward(f, (p.mac, *mac))?))
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
}

/// SIGHUP, blocked so that [`hup_pending`] takes it.
fn block_hup() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise the local set;
    // pthread_sigmask changes this thread's mask only (called before the
    // session starts any thread, which inherit it).
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Whether a SIGHUP was pending (taken if so).
fn hup_pending(set: &libc::sigset_t) -> bool {
    let zero = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `set` is an initialised signal set; the info pointer may be
    // null; a zero timeout makes the call return at once.
    unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &zero) == libc::SIGHUP }
}

fn serve(a: RunArgs) -> Result<(), String> {
    let hup = block_hup();
    let specs = a
        .ports
        .iter()
        .map(|s| PortSpec::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let neighbours = a
        .neighbours
        .iter()
        .map(|s| table::parse_neighbour(s))
        .collect::<Result<BTreeMap<_, _>, _>>()?;
    let macs = specs
        .iter()
        .map(|p| mac_of(&p.iface))
        .collect::<Result<Vec<_>, _>>()?;
    let class = class_bytes(a.class.as_deref())?;
    let session = Session::connect(&a.socket).map_err(|e| e.to_string())?;
    let opts = ExtensionOptions {
        name: "router".into(),
        budget_us: a.budget_us,
        arg: i32::from(a.handlers),
        domains: Vec::new(),
    };
    let ext = session
        .load_extension(&class, opts)
        .map_err(|e| format!("loading the router extension: {e}"))?;
    let ep = session
        .create_endpoint(EndpointConfig::default())
        .map_err(|e| e.to_string())?;
    let mut r = Router {
        session,
        ep,
        ext: ext.id,
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
    // Claim the extension's configuration (and host path) for this
    // endpoint before anything else can.
    r.config(3, 0, 0, &[0; 6])?;
    let mut ports = Vec::new();
    for (p, mac) in r.specs.iter().zip(&macs) {
        let id = r
            .session
            .spine_port_open(&p.iface, a.handlers)
            .map_err(|e| format!("port on {}: {e}", p.iface))?;
        ports.push((
            id,
            Port {
                addr: u32::from(p.addr),
                mac: *mac,
            },
        ));
    }
    r.ports = ports;
    let mut line = format!(
        "router: extension {} with handlers {:?}",
        ext.id, ext.handlers
    );
    for k in 0..r.ports.len() {
        let (id, p) = r.ports[k];
        r.config(1, id as i32, p.addr, &p.mac)?;
        let s = &r.specs[k];
        line += &format!(
            "; port {id} on {} {}/{} {}",
            s.iface,
            s.addr,
            s.len,
            mac_text(&p.mac)
        );
    }
    println!("{line}");
    println!("{}", r.load_table(&a.table)?);
    let mut look = Instant::now();
    loop {
        r.step(Duration::from_millis(100))?;
        r.config_learned()?;
        // Now and then: whether the extension is still loaded (unloaded
        // from elsewhere, or the engine gone, the router stops).
        if look.elapsed() >= Duration::from_secs(1) {
            look = Instant::now();
            let l = r.session.list_extensions().map_err(|e| e.to_string())?;
            if !l.extensions.iter().any(|x| x.id == r.ext) {
                println!("router: extension {} was unloaded", r.ext);
                return Ok(());
            }
            for k in r.unresolved.clone() {
                r.ask(k);
            }
        }
        if hup_pending(&hup) {
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
    }
}
