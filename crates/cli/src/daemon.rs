//! `unet daemon`: an engine that client processes reach over a Unix socket.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use unet::{Engine, EngineConfig};

mod config;

#[derive(clap::Args)]
pub struct Args {
    /// Read the options from this TOML file (keys are the long options,
    /// e.g. `client_memory = "512M"`); the command line and `UNET_SOCKET`
    /// override it; an unknown key or a bad value stops the daemon.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Serve the engine's counters in the Prometheus text format at
    /// `http://ADDR/metrics` (e.g. 127.0.0.1:9100; port 0 picks one: the
    /// address is printed on the line after the ready line).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// Print the options in force (a file `--config` reads, each line
    /// saying where its value came from) and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Control socket path (clients connect here).
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Bind the UDP wire to this address (e.g. 0.0.0.0:7700). No wire if
    /// absent.
    #[arg(long)]
    pub udp: Option<SocketAddr>,
    /// Run one more adapter (engine) in this process, its control socket
    /// at SOCKET; repeatable. All the adapters take turns on one thread,
    /// for a host with fewer cores than adapters (SPINE's two-adapter
    /// router on two cores): what one hands another over a peer queue
    /// then costs no switch between threads. Each is whole, with the
    /// options given here; with `--udp`, each further adapter's wire is
    /// bound to the same address on a port the system picks. `--metrics`
    /// serves the first adapter's counters.
    #[arg(long, value_name = "SOCKET")]
    pub adapter: Vec<PathBuf>,
    /// Largest UDP datagram to send (1472 suits a 1500-byte MTU).
    #[arg(long, default_value_t = 1472)]
    pub max_datagram: usize,
    /// Fault injection: drop this many outgoing datagrams per million.
    #[arg(long, default_value_t = 0)]
    pub drop_ppm: u32,
    /// Fault injection: send this many outgoing datagrams per million
    /// twice.
    #[arg(long, default_value_t = 0)]
    pub dup_ppm: u32,
    /// Fault injection: hold this many outgoing datagrams per million back
    /// behind the next one to three.
    #[arg(long, default_value_t = 0)]
    pub reorder_ppm: u32,
    /// Seed of the fault injector (drops, duplicates, reordering; data
    /// datagrams and VI acks only).
    #[arg(long, default_value_t = 1)]
    pub drop_seed: u64,
    /// Endpoint slots.
    #[arg(long, default_value_t = 256)]
    pub max_endpoints: u32,
    /// Microseconds the engine keeps polling after its last work before it
    /// sleeps.
    #[arg(long, default_value_t = 0)]
    pub idle_spin_us: u64,
    /// Most shared memory one client process may hold (its endpoints and
    /// the direct connections it opens, over all its connections), e.g.
    /// 512M or 4G; requests beyond are refused (UNET_EQUOTA).
    #[arg(long, default_value = "4G", value_parser = crate::units::parse_size)]
    pub client_memory: usize,
    /// Most shared memory all the processes of one user may hold together,
    /// e.g. 8G; requests beyond are refused (UNET_EQUOTA). No limit if
    /// absent.
    #[arg(long, value_parser = crate::units::parse_size)]
    pub user_memory: Option<usize>,
    /// Most endpoints one client process may hold; requests beyond are
    /// refused (UNET_EQUOTA). Default: a quarter of --max-endpoints, at
    /// least 4.
    #[arg(long)]
    pub client_endpoints: Option<u32>,
    /// Most control connections with no endpoint one process may hold; a
    /// new one beyond is closed at once.
    #[arg(long, default_value_t = unet_engine::DEFAULT_CLIENT_IDLE_CONNECTIONS)]
    pub client_idle_connections: u32,
    /// Most control connections with no endpoint the processes of one user
    /// may hold together.
    #[arg(long, default_value_t = unet_engine::DEFAULT_USER_IDLE_CONNECTIONS)]
    pub user_idle_connections: u32,
    /// The largest work budget per applet invocation (JIVE fuel units) a
    /// client may ask for; larger requests are refused.
    #[arg(long, default_value_t = unet_engine::DEFAULT_APPLET_FUEL_MAX)]
    pub applet_fuel_max: u64,
    /// The largest applet heap quota a client may ask for, e.g. 16M.
    #[arg(long, default_value = "16M", value_parser = crate::units::parse_size)]
    pub applet_heap_max: usize,
    /// Wall-clock time one applet invocation may take, in microseconds,
    /// whatever its work budget: past it the invocation faults (counted as
    /// applet_fault_timeout). 0: no time limit, the work budget alone.
    #[arg(long, value_name = "US", default_value_t = unet_sle::DEFAULT_MAX_TIME.as_micros() as u64)]
    pub applet_time_max_us: u64,
    /// SPINE: the priority of event types, e.g. `host_tx=0,deliver_host=3`
    /// (0 runs first, up to 7; types not named keep their default:
    /// deliver_host, peer_tx and wire_tx 0, timer 1, handler 2, host_tx,
    /// wire_rx and peer_rx 3).
    #[arg(long, value_name = "TYPE=N,...", value_parser = parse_priorities)]
    pub spine_priority: Option<[u8; 8]>,
    /// SPINE: time one handler invocation in this many, at random
    /// (rounded up to a power of two; 1: every one, for exact times per
    /// handler at the cost of two clock reads an invocation).
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub spine_time_every: u32,
    /// SPINE: how raw-frame ports send: `xdp` (a transmit-only AF_XDP
    /// socket in copy mode: one linear copy a frame, past the queueing
    /// discipline; a port that cannot have one is refused), `ring` (the
    /// AF_PACKET transmit ring), or `auto` (AF_XDP where the kernel gives
    /// it, else the ring). `unet spine ports` shows which each port uses.
    #[arg(long, value_name = "HOW", default_value = "auto")]
    pub spine_port_tx: unet_engine::PortTx,
    /// SPINE: slots of a raw-frame port's receive ring (2 KiB each). The
    /// ring holds the frames that come while the adapter is not running:
    /// 8 192 last 8 ms at a million frames a second (16 MiB a port).
    #[arg(long, value_name = "N", default_value_t = unet_engine::DEFAULT_SPINE_PORT_RX_FRAMES,
          value_parser = clap::value_parser!(u32).range(64..=65_536))]
    pub spine_port_rx_frames: u32,
    /// An address or network (CIDR, e.g. 10.1.0.0/16 or 192.0.2.7)
    /// whose engines may open channels to this one over the wire;
    /// repeatable. Loopback (127.0.0.0/8 and ::1) is always allowed.
    #[arg(long = "allow-peer", value_name = "CIDR", value_parser = parse_net)]
    pub allow_peer: Vec<unet_engine::IpNet>,
    /// A file holding the cluster key (32 raw bytes or 64 hexadecimal
    /// digits, readable by its owner only): control frames between
    /// engines are then authenticated. Every engine of the cluster needs
    /// the same key.
    #[arg(long, value_name = "PATH")]
    pub cluster_key_file: Option<PathBuf>,
    /// Most channels one peer engine may hold with this one (half-open
    /// and open).
    #[arg(long, default_value_t = unet_engine::DEFAULT_PEER_CHANNELS_MAX)]
    pub peer_channels_max: u32,
    /// Most channels one peer engine may hold accepted but not yet
    /// confirmed.
    #[arg(long, default_value_t = unet_engine::DEFAULT_PEER_HALF_OPEN_MAX)]
    pub peer_half_open_max: u32,
    /// A peer engine silent this long (milliseconds) is taken as gone:
    /// its channels are closed and their owners told.
    #[arg(long, value_name = "MS", default_value_t = unet_engine::DEFAULT_LIVENESS_TIMEOUT.as_millis() as u64)]
    pub liveness_timeout_ms: u64,
    /// Most UDM jobs one process may have made and not yet retired.
    #[arg(long, default_value_t = unet_engine::DEFAULT_CLIENT_UDM_JOBS)]
    pub client_udm_jobs: u32,
    /// Most UDM nodes one process may have joined at once.
    #[arg(long, default_value_t = unet_engine::DEFAULT_CLIENT_UDM_NODES)]
    pub client_udm_nodes: u32,
    /// Most memory regions one process may hold.
    #[arg(long, default_value_t = unet_engine::DEFAULT_CLIENT_REGIONS)]
    pub client_regions: u32,
    /// Most VIs one process may hold.
    #[arg(long, default_value_t = unet_engine::DEFAULT_CLIENT_VIS)]
    pub client_vis: u32,
    /// Most discriminators one process may listen on.
    #[arg(long, default_value_t = unet_engine::DEFAULT_CLIENT_LISTENERS)]
    pub client_listeners: u32,
    /// File descriptors kept free for others: with no more than this
    /// many left, new objects are refused.
    #[arg(long, default_value_t = unet_engine::DEFAULT_FD_RESERVE)]
    pub fd_reserve: u32,
    /// Most VI connection requests waiting in the whole engine.
    #[arg(long, default_value_t = unet_engine::DEFAULT_VI_PENDING_MAX)]
    pub vi_pending_max: u32,
    /// Most VI connection requests one connecting process or peer
    /// address (IP:PORT) may have waiting.
    #[arg(long, default_value_t = unet_engine::DEFAULT_VI_PENDING_PER_PEER)]
    pub vi_pending_per_peer: u32,
    /// Most VI connection requests the peers of one IP address may have
    /// waiting together.
    #[arg(long, default_value_t = unet_engine::DEFAULT_VI_PENDING_PER_IP)]
    pub vi_pending_per_ip: u32,
    /// Most channels and VIs the peers of one IP address may hold with
    /// this engine together.
    #[arg(long, default_value_t = unet_engine::DEFAULT_PEER_IP_CHANNELS_MAX)]
    pub peer_ip_channels_max: u32,
    /// Most channels the peers of one IP address may hold accepted but
    /// not yet confirmed, together.
    #[arg(long, default_value_t = unet_engine::DEFAULT_PEER_IP_HALF_OPEN_MAX)]
    pub peer_ip_half_open_max: u32,
    /// How long the peer of a reliable VI may stay silent (milliseconds)
    /// while the VI waits for it before the VI breaks (a VI's attributes
    /// may ask for another time).
    #[arg(long, value_name = "MS", default_value_t = unet_engine::DEFAULT_VI_BREAK_TIMEOUT.as_millis() as u64)]
    pub vi_break_timeout_ms: u64,
    /// Bytes each VI carried between engines may keep for its owner
    /// (held, out of order, in reassembly), e.g. 4M: reserved and charged
    /// to the owner at creation (at least 264K).
    #[arg(long, default_value = "4M", value_parser = crate::units::parse_size)]
    pub vi_held_budget: usize,
}

/// An address (a host's network of one) or a network in CIDR notation.
fn parse_net(s: &str) -> Result<unet_engine::IpNet, String> {
    if let Ok(n) = s.parse::<unet_engine::IpNet>() {
        return Ok(n.trunc());
    }
    s.parse::<std::net::IpAddr>()
        .map(unet_engine::IpNet::from)
        .map_err(|_| format!("{s:?} is not an address or a network (CIDR, like 10.0.0.0/8)"))
}

pub fn run(a: Args) -> ExitCode {
    let a = if a.config.is_some() || a.print_config {
        // The daemon's own arguments, after `unet daemon`.
        let cli: Vec<_> = std::env::args_os().skip(2).collect();
        match config::resolve(a.config.as_deref(), cli) {
            Ok(r) if a.print_config => {
                print!("{}", r.print());
                return ExitCode::SUCCESS;
            }
            Ok(r) => r.args,
            Err(e) => {
                eprintln!("unet daemon: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        a
    };
    // Block SIGINT/SIGTERM in every thread so that sigwait below receives
    // them (the engine thread inherits the mask).
    // SAFETY: sigset manipulation on a local; pthread_sigmask on this thread.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    let cluster_key = match &a.cluster_key_file {
        None => None,
        Some(p) => match unet_engine::wire::ClusterKey::from_file(p) {
            Ok(k) => Some(k),
            Err(e) => {
                eprintln!("unet daemon: the cluster key: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let cfg = EngineConfig {
        control_socket: Some(a.socket.clone()),
        udp_bind: a.udp,
        max_datagram: a.max_datagram,
        wire_drop_ppm: a.drop_ppm,
        wire_dup_ppm: a.dup_ppm,
        wire_reorder_ppm: a.reorder_ppm,
        wire_drop_seed: a.drop_seed,
        max_endpoints: a.max_endpoints,
        idle_spin: Duration::from_micros(a.idle_spin_us),
        client_memory: a.client_memory as u64,
        user_memory: a.user_memory.map_or(u64::MAX, |m| m as u64),
        client_endpoints: a.client_endpoints.unwrap_or(0),
        client_idle_connections: a.client_idle_connections,
        user_idle_connections: a.user_idle_connections,
        applet_fuel_max: a.applet_fuel_max,
        applet_heap_max: a.applet_heap_max.min(u32::MAX as usize) as u32,
        applet_time_max: Duration::from_micros(a.applet_time_max_us),
        allow_peers: unet_engine::default_allow_peers()
            .into_iter()
            .chain(a.allow_peer.iter().copied())
            .collect(),
        cluster_key,
        peer_channels_max: a.peer_channels_max,
        peer_half_open_max: a.peer_half_open_max,
        liveness_timeout: Duration::from_millis(a.liveness_timeout_ms.max(1)),
        client_udm_jobs: a.client_udm_jobs,
        client_udm_nodes: a.client_udm_nodes,
        client_regions: a.client_regions,
        client_vis: a.client_vis,
        client_listeners: a.client_listeners,
        fd_reserve: a.fd_reserve,
        vi_pending_max: a.vi_pending_max,
        vi_pending_per_peer: a.vi_pending_per_peer,
        vi_pending_per_ip: a.vi_pending_per_ip,
        peer_ip_channels_max: a.peer_ip_channels_max,
        peer_ip_half_open_max: a.peer_ip_half_open_max,
        vi_break_timeout: Duration::from_millis(a.vi_break_timeout_ms.max(1)),
        vi_held_budget: a.vi_held_budget as u64,
        spine_priorities: a
            .spine_priority
            .unwrap_or(unet_engine::DEFAULT_SPINE_PRIORITIES),
        spine_time_every: a.spine_time_every,
        spine_port_tx: a.spine_port_tx,
        spine_port_rx_frames: a.spine_port_rx_frames,
        ..Default::default()
    };
    let engine = match Running::start(cfg, &a.adapter) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("unet daemon: cannot start the engine on {e}");
            return ExitCode::from(1);
        }
    };
    for (socket, udp) in std::iter::once(&a.socket)
        .chain(&a.adapter)
        .zip(engine.udp_addrs())
    {
        match udp {
            Some(u) => println!(
                "unet daemon: control socket {}, UDP wire {u}",
                socket.display()
            ),
            None => println!(
                "unet daemon: control socket {}, no UDP wire",
                socket.display()
            ),
        }
    }
    if let Some(addr) = a.metrics {
        match crate::metrics::serve(addr, a.socket.clone(), crate::stat::collect) {
            Ok(at) => println!("unet daemon: metrics at http://{at}/metrics"),
            Err(e) => {
                eprintln!("unet daemon: {e}");
                engine.stop();
                return ExitCode::from(1);
            }
        }
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let mut sig: libc::c_int = 0;
    // SAFETY: waits for one of the blocked signals; writes to a local.
    unsafe { libc::sigwait(&set, &mut sig) };
    eprintln!("unet daemon: stopping (signal {sig})");
    engine.stop();
    ExitCode::SUCCESS
}

/// The daemon's engine, or its adapters on one thread (`--adapter`).
enum Running {
    One(Engine),
    Group(unet_engine::EngineGroup),
}

impl Running {
    /// Start `cfg`'s engine, and one more for each of `more` (a control
    /// socket each); an error names the socket it is about.
    fn start(cfg: EngineConfig, more: &[PathBuf]) -> Result<Running, String> {
        let name = |c: &EngineConfig| {
            c.control_socket
                .as_deref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        };
        if more.is_empty() {
            let n = name(&cfg);
            return Engine::start(cfg)
                .map(Running::One)
                .map_err(|e| format!("{n}: {e}"));
        }
        let mut cfgs = vec![cfg.clone()];
        for socket in more {
            let mut c = cfg.clone();
            c.control_socket = Some(socket.clone());
            if let Some(u) = &mut c.udp_bind {
                u.set_port(0);
            }
            cfgs.push(c);
        }
        let names: Vec<String> = cfgs.iter().map(name).collect();
        unet_engine::EngineGroup::start(cfgs)
            .map(Running::Group)
            .map_err(|e| format!("{}: {e}", names.join(", ")))
    }

    fn udp_addrs(&self) -> Vec<Option<SocketAddr>> {
        match self {
            Running::One(e) => vec![e.udp_addr()],
            Running::Group(g) => g.udp_addrs().to_vec(),
        }
    }

    fn stop(self) {
        match self {
            Running::One(e) => e.stop(),
            Running::Group(g) => g.stop(),
        }
    }
}

/// `--spine-priority`: over the defaults.
fn parse_priorities(s: &str) -> Result<[u8; 8], String> {
    unet_engine::parse_spine_priorities(s, unet_engine::DEFAULT_SPINE_PRIORITIES)
}
