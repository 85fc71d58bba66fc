//! The forwarders `unet bench router forward` and `graph` set up in the
//! router namespace `r`, each in turn (`Case`): SPINE's router, on one
//! adapter or on two (an adapter a port) handing packets over peer queues
//! (the paper's "PCI" case) or over the UDP wire (its "Wire" case), and
//! Linux's own IPv4 forwarding, in the generator's system calls or
//! steered to the other core. `Running` stops what a case started.
//!
//! The router's adapters run in a `unet daemon` pinned to core 1 (the
//! generator has core 0). Two adapters share that core, where the paper
//! had a processor on each adapter: they take turns on one thread of one
//! daemon (`unet daemon --adapter`), or with `--apart` each is a daemon
//! of its own and the scheduler switches between them. The host
//! application (`unet router run`) is not pinned: it does nothing per
//! packet.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Cmd, Stdio};
use std::time::{Duration, Instant};

use super::super::child::{pin_child, TempDir};
use super::lab::{self, ip, sysctl, Lab, MAC1};
use super::Res;

/// Next hops on `h2`'s subnet.
pub(super) const NEXT_HOPS: u32 = 4;
/// The router's first handler number.
const HANDLERS: u16 = 200;

/// How the router's adapters run (`unet daemon`'s options).
#[derive(clap::Args, Clone, Debug)]
pub struct AdapterArgs {
    /// Microseconds the router's adapters keep polling after their last
    /// work before they sleep (`unet daemon --idle-spin-us`).
    #[arg(long, value_name = "US", default_value_t = 0)]
    pub spin_us: u64,
    /// How the adapters' ports send: auto, xdp or ring (`unet daemon
    /// --spine-port-tx`).
    #[arg(long, value_name = "HOW", default_value = "auto")]
    pub port_tx: unet_engine::PortTx,
    /// Run each of two adapters (unet-pci, unet-wire) as a daemon process
    /// of its own, both on core 1, instead of both in one daemon taking
    /// turns on one thread (`unet daemon --adapter`).
    #[arg(long)]
    pub apart: bool,
}

/// A forwarder in `r`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Case {
    /// The router, both ports on one adapter.
    Unet,
    /// The same with receive packet steering on the ingress interface to
    /// the adapter's core: veth's delivery into the port's ring (the copy
    /// a NIC's DMA would make) leaves the generator's core, as it does for
    /// `LinuxRps`.
    UnetRps,
    /// The router on two adapters, a port each, joined by peer queues.
    UnetPci,
    /// The router on two adapters joined by a SPINE link over UDP.
    UnetWire,
    Linux,
    LinuxRps,
}

/// Every forwarder's name, for errors.
const NAMES: &str = "unet, unet-rps, unet-pci, unet-wire, linux, linux-rps";

impl Case {
    pub(super) fn parse(s: &str) -> Res<Case> {
        match s {
            "unet" => Ok(Case::Unet),
            "unet-rps" => Ok(Case::UnetRps),
            "unet-pci" => Ok(Case::UnetPci),
            "unet-wire" => Ok(Case::UnetWire),
            "linux" => Ok(Case::Linux),
            "linux-rps" => Ok(Case::LinuxRps),
            _ => Err(format!("unknown forwarder {s:?} ({NAMES})")),
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Case::Unet => "unet",
            Case::UnetRps => "unet-rps",
            Case::UnetPci => "unet-pci",
            Case::UnetWire => "unet-wire",
            Case::Linux => "linux",
            Case::LinuxRps => "linux-rps",
        }
    }

    pub(super) fn is_linux(self) -> bool {
        matches!(self, Case::Linux | Case::LinuxRps)
    }

    /// Where the generator and the forwarder run; `apart`: two adapters
    /// in two processes ([`AdapterArgs::apart`]).
    pub(super) fn placement(self, apart: bool) -> &'static str {
        match self {
            Case::UnetPci | Case::UnetWire if apart => {
                "generator core 0, both adapters core 1, a process each"
            }
            Case::Unet => "generator core 0, adapter core 1",
            Case::UnetRps => "generator core 0, adapter and ingress delivery core 1 (RPS)",
            Case::UnetPci | Case::UnetWire => "generator core 0, both adapters core 1, one thread",
            Case::Linux => "generator core 0, forwarding in the generator's system calls",
            Case::LinuxRps => "generator core 0, forwarding on core 1 (RPS)",
        }
    }

    /// Set the forwarder up in `r`; `dir` holds its files; the router's
    /// adapters run as `adapters` says.
    pub(super) fn start(
        self,
        lab: &Lab,
        lines: &[(String, String)],
        class: &Path,
        dir: &Path,
        adapters: &AdapterArgs,
    ) -> Res<Running> {
        match self {
            Case::Unet | Case::UnetRps | Case::UnetPci | Case::UnetWire => {
                let r = unet_up(self, lab, lines, class, adapters)?;
                if self == Case::UnetRps {
                    if let Err(e) = set_rps(lab, "2") {
                        let mut r = r;
                        r.stop(lab);
                        return Err(e);
                    }
                }
                Ok(r)
            }
            Case::Linux | Case::LinuxRps => {
                let r = Running {
                    case: self,
                    daemons: Vec::new(),
                    router: None,
                    sockets: Vec::new(),
                    _dir: None,
                };
                if let Err(e) = linux_up(lab, lines, self == Case::LinuxRps, dir) {
                    let _ = linux_down(lab);
                    return Err(e);
                }
                Ok(r)
            }
        }
    }
}

/// A running forwarder.
pub(super) struct Running {
    case: Case,
    /// The router's processes (unet only): the adapters, the host
    /// application.
    daemons: Vec<Child>,
    router: Option<Child>,
    /// The adapters' control sockets (the router only).
    pub(super) sockets: Vec<PathBuf>,
    _dir: Option<TempDir>,
}

impl Running {
    pub(super) fn stop(&mut self, lab: &Lab) {
        // The host application first: it leaves its peer queues.
        if let Some(c) = self.router.take() {
            stop_child(c);
        }
        for c in self.daemons.drain(..) {
            stop_child(c);
        }
        if self.case.is_linux() {
            let _ = linux_down(lab);
        } else if self.case == Case::UnetRps {
            let _ = set_rps(lab, "0");
        }
    }

    /// The host application's and the adapters' CPU time so far, ns, per
    /// thread (none for Linux).
    pub(super) fn cpu(&self) -> (Option<Threads>, Option<Threads>) {
        let host = self.router.as_ref().map(|c| threads_ns(&[c.id()]));
        let ids: Vec<u32> = self.daemons.iter().map(Child::id).collect();
        let adapters = (!ids.is_empty()).then(|| threads_ns(&ids));
        (host, adapters)
    }

    /// The adapters' drops by reason, summed over them: their raw-frame
    /// ports' (`kernel`, `tx_full`, ...), their runtimes' (`runtime
    /// dest_full`: a full peer queue or link refused a frame handed over,
    /// ...) and their wires' (`wire inbox_full`, ...); and how the ports
    /// send (`af_xdp`, `tx_ring`, or both joined by `+`; none for Linux).
    pub(super) fn drops(&self) -> Res<(BTreeMap<String, u64>, String)> {
        let mut m = BTreeMap::new();
        let mut tx = std::collections::BTreeSet::new();
        let mut add = |k: String, v: u64| *m.entry(k).or_insert(0) += v;
        for socket in &self.sockets {
            let s = unet::Session::connect(socket).map_err(|e| format!("an adapter: {e}"))?;
            let l = s
                .spine_ports()
                .map_err(|e| format!("an adapter's ports: {e}"))?;
            for p in &l.ports {
                tx.insert(p.tx.clone());
                for (k, v) in &p.drops {
                    add(k.clone(), *v);
                }
            }
            let rt = s
                .list_extensions()
                .map_err(|e| format!("an adapter's runtime: {e}"))?;
            for (k, v) in &rt.drops {
                add(format!("runtime {k}"), *v);
            }
            let w = s
                .spine_links()
                .map_err(|e| format!("an adapter's links: {e}"))?;
            for (k, v) in &w.drops {
                add(format!("wire {k}"), *v);
            }
        }
        Ok((m, tx.into_iter().collect::<Vec<_>>().join("+")))
    }
}

fn stop_child(mut c: Child) {
    // SAFETY: kill on a child's pid this process has not yet reaped (so
    // the pid is still this child's).
    unsafe {
        libc::kill(c.id() as i32, libc::SIGTERM);
    }
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        if let Ok(Some(_)) = c.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    let _ = c.wait();
}

/// CPU time of each live thread of some processes, ns (`schedstat`'s
/// first field), by (process, thread).
pub(super) struct Threads(BTreeMap<(u32, String), u64>);

impl Threads {
    /// The CPU time the threads of `later` used since `self`: a thread
    /// that has ended since is not counted (its time cannot be read), one
    /// that began since counts whole, so that a helper thread that ends
    /// never makes the sum go back.
    pub(super) fn since(&self, later: &Threads) -> u64 {
        later
            .0
            .iter()
            .map(|(k, v)| v.saturating_sub(self.0.get(k).copied().unwrap_or(0)))
            .sum()
    }
}

fn threads_ns(pids: &[u32]) -> Threads {
    let mut m = BTreeMap::new();
    for &pid in pids {
        let Ok(d) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in d.flatten() {
            let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) else {
                continue;
            };
            if let Some(ns) = s.split_whitespace().next().and_then(|x| x.parse().ok()) {
                m.insert((pid, t.file_name().to_string_lossy().into_owned()), ns);
            }
        }
    }
    Threads(m)
}

pub(super) fn mac_text(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Linux forwards in `r`: addresses, static neighbours, the routes
/// (`ip -batch`), forwarding on; with `rps`, the ingress interface's
/// packets steered to core 1.
fn linux_up(lab: &Lab, lines: &[(String, String)], rps: bool, dir: &Path) -> Res<()> {
    let r = &lab.r;
    ip(&[
        "-n",
        r,
        "addr",
        "add",
        &format!("{}/24", lab.gw1()),
        "dev",
        &lab.r1,
    ])?;
    ip(&[
        "-n",
        r,
        "addr",
        "add",
        &format!("{}/24", lab.gw2()),
        "dev",
        &lab.r2,
    ])?;
    let a1 = std::net::Ipv4Addr::from(lab.addr1()).to_string();
    ip(&[
        "-n",
        r,
        "neigh",
        "replace",
        &a1,
        "lladdr",
        &mac_text(&MAC1),
        "dev",
        &lab.r1,
        "nud",
        "permanent",
    ])?;
    for k in 0..NEXT_HOPS {
        let nh = lab.next_hop(k);
        ip(&[
            "-n",
            r,
            "neigh",
            "replace",
            &nh,
            "lladdr",
            &mac_text(&lab.next_hop_mac()),
            "dev",
            &lab.r2,
            "nud",
            "permanent",
        ])?;
    }
    let batch = dir.join("linux-routes");
    let text: String = lines
        .iter()
        .map(|(p, nh)| format!("route replace {p} via {nh}\n"))
        .collect();
    std::fs::write(&batch, text).map_err(|e| format!("{}: {e}", batch.display()))?;
    let b = batch.to_string_lossy().to_string();
    ip(&["-n", r, "-force", "-batch", &b])?;
    if rps {
        set_rps(lab, "2")?;
    }
    sysctl(r, "net.ipv4.ip_forward=1")
}

fn set_rps(lab: &Lab, mask: &str) -> Res<()> {
    let f = format!("/sys/class/net/{}/queues/rx-0/rps_cpus", lab.r1);
    lab::run(
        "ip",
        &[
            "netns",
            "exec",
            &lab.r,
            "sh",
            "-c",
            &format!("echo {mask} > {f}"),
        ],
    )
}

fn linux_down(lab: &Lab) -> Res<()> {
    let r = &lab.r;
    sysctl(r, "net.ipv4.ip_forward=0")?;
    set_rps(lab, "0")?;
    ip(&["-n", r, "-4", "route", "flush", "table", "main"])?;
    ip(&["-n", r, "neigh", "flush", "all"])?;
    ip(&["-n", r, "addr", "flush", "dev", &lab.r1])?;
    ip(&["-n", r, "addr", "flush", "dev", &lab.r2])
}

/// A daemon in `r` on core 1 with an adapter for each of `sockets` (its
/// control socket; more than one take turns on its thread) and, for the
/// wire, a UDP port each on `r`'s loopback.
fn daemon(lab: &Lab, exe: &Path, sockets: &[PathBuf], udp: bool, a: &AdapterArgs) -> Res<Child> {
    let mut d = Cmd::new("ip");
    d.args(["netns", "exec", &lab.r])
        .arg(exe)
        .args(["daemon", "--socket"])
        .arg(&sockets[0])
        .args(["--idle-spin-us", &a.spin_us.to_string()])
        .args(["--spine-port-tx", a.port_tx.name()])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for s in &sockets[1..] {
        d.arg("--adapter").arg(s);
    }
    if udp {
        // r's loopback carries 64 KiB datagrams: a frame crosses whole,
        // as over the paper's switch fabric, not cut to an Ethernet MTU.
        d.args(["--udp", "127.0.0.1:0", "--max-datagram", "9000"]);
    }
    pin_child(&mut d, 1);
    d.spawn().map_err(|e| format!("starting a daemon: {e}"))
}

/// The router's adapters and host application in `r` (module
/// documentation); returns once the table is loaded.
fn unet_up(
    case: Case,
    lab: &Lab,
    lines: &[(String, String)],
    class: &Path,
    adapters: &AdapterArgs,
) -> Res<Running> {
    let dir = TempDir::new()?;
    let exe = std::env::current_exe().map_err(|e| format!("this program: {e}"))?;
    let two = matches!(case, Case::UnetPci | Case::UnetWire);
    let wire = case == Case::UnetWire;
    if wire {
        ip(&["-n", &lab.r, "link", "set", "lo", "up"])?;
    }
    let sockets: Vec<PathBuf> = (0..if two { 2 } else { 1 })
        .map(|k| dir.0.join(format!("adapter{k}.sock")))
        .collect();
    let mut run = Running {
        case,
        daemons: Vec::new(),
        router: None,
        sockets: sockets.clone(),
        _dir: None,
    };
    let daemons: Vec<&[PathBuf]> = if adapters.apart {
        sockets.chunks(1).collect()
    } else {
        vec![&sockets]
    };
    for s in daemons {
        match daemon(lab, &exe, s, wire, adapters) {
            Ok(c) => run.daemons.push(c),
            Err(e) => {
                run.stop(lab);
                return Err(e);
            }
        }
    }
    let end = Instant::now() + Duration::from_secs(20);
    for s in &sockets {
        while unet::Session::connect(s).is_err() {
            if Instant::now() >= end {
                run.stop(lab);
                return Err("a daemon did not come up".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let tfile = dir.0.join("routes.txt");
    let text: String = lines.iter().map(|(p, nh)| format!("{p} {nh}\n")).collect();
    std::fs::write(&tfile, text).map_err(|e| format!("{}: {e}", tfile.display()))?;
    let mut r = Cmd::new("ip");
    r.args(["netns", "exec", &lab.r])
        .arg(&exe)
        .args(["router", "run"]);
    for s in &sockets {
        r.arg("--socket").arg(s);
    }
    let at = if two { "@1" } else { "" };
    r.arg("--table")
        .arg(&tfile)
        .arg("--class")
        .arg(class)
        .args(["--handlers", &HANDLERS.to_string()])
        .args(["--port", &format!("{}={}/24", lab.r1, lab.gw1())])
        .args(["--port", &format!("{}={}/24{at}", lab.r2, lab.gw2())]);
    if two {
        r.args(["--between", if wire { "wire" } else { "peer" }]);
    }
    if let Some((p1, p2)) = lab.router_port_macs() {
        r.args(["--port-mac", &format!("{}={}", lab.r1, mac_text(&p1))]);
        r.args(["--port-mac", &format!("{}={}", lab.r2, mac_text(&p2))]);
    }
    let a1 = std::net::Ipv4Addr::from(lab.addr1());
    r.args(["--neighbour", &format!("{a1}={}", mac_text(&MAC1))]);
    for k in 0..NEXT_HOPS {
        r.args([
            "--neighbour",
            &format!("{}={}", lab.next_hop(k), mac_text(&lab.next_hop_mac())),
        ]);
    }
    r.stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = match r.spawn() {
        Ok(c) => c,
        Err(e) => {
            run.stop(lab);
            return Err(format!("starting the router: {e}"));
        }
    };
    let out = child.stdout.take();
    run.router = Some(child);
    run._dir = Some(dir);
    let Some(out) = out else {
        run.stop(lab);
        return Err("the router's output".into());
    };
    let (tx, rx) = std::sync::mpsc::channel();
    // Its lines, read to the end (a full pipe would stop it).
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let end = Instant::now() + Duration::from_secs(300);
    loop {
        match rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
            Ok(l) if l.starts_with("router: table version") => return Ok(run),
            Ok(_) => {}
            Err(_) => {
                run.stop(lab);
                return Err("the router did not load its table".into());
            }
        }
    }
}
