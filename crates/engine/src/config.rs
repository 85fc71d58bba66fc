//! How an engine is set up.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;

use crate::wire::ClusterKey;

/// How an engine is set up.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Listen for client processes on this Unix socket path (daemon mode, or
    /// an embedded engine shared with child processes).
    pub control_socket: Option<PathBuf>,
    /// Bind the UDP wire here (e.g. `0.0.0.0:7700`, or port 0 for any).
    pub udp_bind: Option<SocketAddr>,
    /// Largest UDP datagram the wire sends (1472 for an Ethernet MTU;
    /// larger on loopback).
    pub max_datagram: usize,
    /// Fault injection: drop this many outgoing datagrams per million.
    /// Like the two below, it judges only data-path datagrams (Data and
    /// ViAck), in order, with a generator seeded by
    /// [`EngineConfig::wire_drop_seed`]: the same seed makes the same
    /// decisions (see [`crate::wire::udp`]).
    pub wire_drop_ppm: u32,
    /// Fault injection: send this many outgoing datagrams per million
    /// twice (counted as `wire_injected_duplicates`).
    pub wire_dup_ppm: u32,
    /// Fault injection: hold this many outgoing datagrams per million back
    /// behind the next one to three (counted as `wire_injected_reorders`).
    pub wire_reorder_ppm: u32,
    /// Seed of the fault injector (drops, duplicates, reordering).
    pub wire_drop_seed: u64,
    /// Endpoint slots (and counter slots).
    pub max_endpoints: u32,
    /// Bytes of each ring of a direct connection (power of two).
    pub conn_ring_size: u32,
    /// How long the engine keeps polling after its last work before it
    /// sleeps, beyond the 4 µs it always looks ([`crate::LOOK_AFTER_WORK`];
    /// it yields its CPU between looks). Zero by default: on small machines
    /// a polling engine takes the CPU its clients need (they spin while
    /// they wait), and its wake-up through a doorbell costs a few
    /// microseconds.
    pub idle_spin: Duration,
    /// Most bytes of shared memory one client process may hold, over all
    /// its control connections (processes are told apart by the peer
    /// credentials of their control sockets): its endpoints' segments and
    /// the direct connections it opened, and those it is being given. The
    /// engine allocates these segments for the client and commits every
    /// page of them when it makes them (they are pre-faulted, and sealed
    /// against growing), so the bytes charged are the bytes committed;
    /// without a bound one process could make the engine take all the
    /// host's memory. A request beyond it is refused with
    /// `ErrorCode::QuotaExceeded`.
    pub client_memory: u64,
    /// Most bytes of shared memory all the processes of one user may hold
    /// together (counted as for [`EngineConfig::client_memory`]). A request
    /// beyond it is refused with `ErrorCode::UserQuota`. Default: no limit
    /// (`u64::MAX`).
    pub user_memory: u64,
    /// Most endpoints one client process may hold (with those being made),
    /// so that one process cannot take every slot: a request beyond it is
    /// refused with `ErrorCode::EndpointQuota`. 0 (the default): a quarter
    /// of [`EngineConfig::max_endpoints`], at least 4
    /// ([`EngineConfig::endpoints_per_client`]).
    pub client_endpoints: u32,
    /// Most control connections with no endpoint (idle) one process may
    /// hold; a new connection beyond it is closed at once and counted
    /// (`control_drop_idle_limit`). Default: 32.
    pub client_idle_connections: u32,
    /// Most idle control connections all the processes of one user may
    /// hold together. Default: 128.
    pub user_idle_connections: u32,
    /// The largest work budget per invocation (JIVE fuel) a client may
    /// ask for when it attaches an applet: a larger request is refused.
    pub applet_fuel_max: u64,
    /// The largest heap quota a client may ask for an applet.
    pub applet_heap_max: u32,
    /// Wall-clock time one applet invocation may take, whatever its work
    /// budget (JIVE's `Limits::max_time`): past it the invocation faults
    /// (`FaultKind::Timeout`). Zero: no time limit, the budget alone.
    /// Default: [`unet_sle::DEFAULT_MAX_TIME`] (10 ms).
    pub applet_time_max: Duration,
    /// Compile applets to machine code (JIVE's compiler runs on a thread
    /// of its own after attach; the code is installed at a later
    /// invocation). False keeps every applet interpreted, which behaves
    /// the same: for benchmarks that compare the two. Default: true.
    pub applet_compile: bool,
    /// Addresses and networks whose engines may open channels to this
    /// one over the wire. An open request from elsewhere is dropped and
    /// counted (`wire_drop_peer_not_allowed`), with no answer; so is any
    /// other datagram from an address that is neither allowed nor a peer
    /// a local client opened a channel to (a peer named in an open may
    /// answer it and use the channel, not open channels of its own).
    /// Default: loopback, `127.0.0.0/8` and `::1`
    /// ([`default_allow_peers`]).
    pub allow_peers: Vec<IpNet>,
    /// The key shared by the engines of a cluster: with one, every
    /// control frame on the wire (open, accept, refuse, confirm, close,
    /// keepalive) carries a MAC and a stamp, and one without a valid MAC
    /// (`wire_drop_bad_mac`) or seen before (`wire_drop_replay`) is
    /// dropped. Every engine of the cluster needs the same key (or
    /// none). See [`crate::wire::auth`]. Default: none.
    pub cluster_key: Option<ClusterKey>,
    /// Most channels one peer engine (by address) may hold with this
    /// engine, half-open and open, in both directions: an open beyond it
    /// is refused (`wire_drop_peer_channels_full`). Default: 256.
    pub peer_channels_max: u32,
    /// Most channels one peer may hold accepted but not yet confirmed
    /// (its Confirm or a first message not yet here): an open beyond it
    /// is refused (`wire_drop_peer_half_open_full`). An unconfirmed
    /// channel is closed after [`EngineConfig::liveness_timeout`].
    /// Default: 64.
    pub peer_half_open_max: u32,
    /// A peer engine silent this long (no frame at all; engines send a
    /// keepalive to each peer they hold channels with every third of
    /// it) is taken as gone: the channels with it are closed and their
    /// owners told (`PeerGone`), counted as `wire_peers_silent` and
    /// `wire_channels_expired`. Default: 5 s.
    pub liveness_timeout: Duration,
    /// UDM jobs one process may have made and not yet retired (a job is
    /// counted against the process that made it for as long as it lives):
    /// beyond it, a create is refused with `ErrorCode::ObjectQuota`,
    /// counted as `quota_refused_udm_jobs`. Default: 32.
    pub client_udm_jobs: u32,
    /// UDM nodes one process may have joined at once (over every job and
    /// connection): beyond it, a join is refused with
    /// `ErrorCode::ObjectQuota`, counted as `quota_refused_udm_nodes`.
    /// Default: 256.
    pub client_udm_nodes: u32,
    /// Most memory regions one process may hold (over all its control
    /// connections): each costs the engine a file descriptor. A region
    /// beyond it is refused with `ErrorCode::ObjectQuota`
    /// (`quota_refused_regions`). Default: 1024.
    pub client_regions: u32,
    /// Most VIs one process may hold, connected or being connected
    /// (local and engine-carried): a VI beyond it is refused with
    /// `ErrorCode::ObjectQuota` (`quota_refused_vis`). Default: 1024.
    pub client_vis: u32,
    /// Most discriminators one process may listen on: one beyond it is
    /// refused with `ErrorCode::ObjectQuota`
    /// (`quota_refused_listeners`). Default: 64.
    pub client_listeners: u32,
    /// File descriptors the engine keeps free for others: when no more
    /// than this many are left below its `RLIMIT_NOFILE` (whose soft
    /// value the engine raises to the hard one when it starts), a new
    /// endpoint, region, VI or UDM job or node is refused with
    /// `ErrorCode::NoResources` (`fd_reserve_refused`) unless its process
    /// holds fewer than 8 endpoints, regions, VIs, UDM jobs and nodes, so
    /// that one process
    /// cannot take the descriptors new clients connect and work with. At
    /// most a quarter of the limit is kept. Default: 64.
    pub fd_reserve: u32,
    /// Most VI connection requests waiting for an answer in the whole
    /// engine: one beyond it is refused (`vi_pending_refused_total`).
    /// Default: 4096.
    pub vi_pending_max: u32,
    /// Most VI connection requests one connecting process (local) or
    /// peer address (`IP:PORT`, remote) may have waiting: one beyond it
    /// is refused (`vi_pending_refused_peer`; a local one with
    /// `ErrorCode::ObjectQuota`). Default: 256.
    pub vi_pending_per_peer: u32,
    /// Most VI connection requests the engines of one IP address may
    /// have waiting together, whatever their ports: one beyond it is
    /// refused (`vi_pending_refused_ip`). Default: 1024.
    pub vi_pending_per_ip: u32,
    /// Most channels and VIs the peers of one IP address may hold with
    /// this engine together, whatever their ports (as
    /// [`EngineConfig::peer_channels_max`] bounds one `IP:PORT`): an open
    /// beyond it is refused (`wire_drop_peer_ip_channels_full`).
    /// Default: 1024.
    pub peer_ip_channels_max: u32,
    /// Most channels the peers of one IP address may hold accepted but
    /// not yet confirmed, together (as
    /// [`EngineConfig::peer_half_open_max`] bounds one `IP:PORT`): an
    /// open beyond it is refused (`wire_drop_peer_ip_half_open_full`).
    /// Default: 256.
    pub peer_ip_half_open_max: u32,
    /// How long the peer of an engine-carried reliable VI may stay silent
    /// (no acknowledgement) while the VI waits for it before the VI
    /// breaks (`ViError::Timeout`), unless the VI's attributes ask for
    /// another time. Default: 5 s, [`EngineConfig::liveness_timeout`]'s.
    pub vi_break_timeout: Duration,
    /// Bytes each engine-carried VI may keep for its owner in the engine:
    /// messages held for want of a receive, arrived after a gap, or in
    /// reassembly. Reserved at creation, charged to the owner with the
    /// VI's segment (so the memory limit covers it); a receiver whose
    /// budget is used up closes its window and the sender waits
    /// (`budget_refused`). At least 264 KiB (a message of the largest
    /// size). Default: 4 MiB. (A UDM link keeps at most 160 KiB, a fixed
    /// bound.)
    pub vi_held_budget: u64,
    /// SPINE: the priority of each event type (0 runs first, up to 7),
    /// in the order of [`SPINE_EVENT_TYPES`]. Default:
    /// [`DEFAULT_SPINE_PRIORITIES`].
    pub spine_priorities: [u8; 8],
    /// SPINE: most events queued at once; an event that does not fit is
    /// dropped and counted. Default: 65 536.
    pub spine_events_max: u32,
    /// SPINE: message slots (256 bytes each). Default: 8 192.
    pub spine_msgs_max: u32,
    /// SPINE: bulk data buffers. Default: 1 024.
    pub spine_bufs_max: u32,
    /// SPINE: the largest bulk data buffer, in bytes. Default: 64 KiB.
    pub spine_buf_size: u32,
    /// SPINE: handler numbers (extension handlers take 64 up to this
    /// less one; at most 1 024). Default: 1 024.
    pub spine_handlers: u16,
    /// SPINE: time one handler invocation in this many, picked at random
    /// (rounded up to a power of two; 1: every one). A handler's listed
    /// time is that of its timed invocations (`timed` of them). Two reads
    /// of the processor's clock cost about as much as a null handler's
    /// invocation; an extension that calls other extensions' exports is
    /// timed always (its calls are bounded by its budget). Default: 64.
    pub spine_time_every: u32,
    /// SPINE: how a raw-frame port sends. Default: [`PortTx::Auto`].
    pub spine_port_tx: PortTx,
    /// SPINE: slots (2 KiB each) of a raw-frame port's receive ring,
    /// rounded up to whole 64 KiB blocks. Default:
    /// [`DEFAULT_SPINE_PORT_RX_FRAMES`] (8 192).
    pub spine_port_rx_frames: u32,
}

/// SPINE: slots of a raw-frame port's receive ring by default
/// ([`EngineConfig::spine_port_rx_frames`], `unet daemon
/// --spine-port-rx-frames`; 2 KiB each: 16 MiB a port, 128 MiB for an
/// adapter's eight). The ring is all that holds frames
/// while the adapter's thread is not running, and on a shared machine
/// (a virtual CPU the hypervisor takes away for milliseconds at a time)
/// that is often: 8 192 frames cover 8 ms at a million frames a second,
/// where 1 024 covered 1 ms: with 1 024, the router on two adapters
/// lost more than 0.5 % of its 64-byte frames to the kernel's full ring
/// above 0.17 million a second, with 8 192 above 0.76 million (`unet
/// bench router forward --cases unet-pci`, medians of three interleaved
/// rounds on a 2-core virtual machine).
pub const DEFAULT_SPINE_PORT_RX_FRAMES: u32 = 8192;

/// How a SPINE raw-frame port sends (the way in is always the port's
/// `AF_PACKET` receive ring).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PortTx {
    /// A transmit-only `AF_XDP` socket where the kernel gives one, else
    /// the `AF_PACKET` transmit ring.
    #[default]
    Auto,
    /// A transmit-only `AF_XDP` socket in copy mode: one linear copy a
    /// frame, past the queueing discipline; a port that cannot have one
    /// is refused.
    Xdp,
    /// The `AF_PACKET` transmit ring: frames point into the ring's pages,
    /// and pass the queueing discipline.
    Ring,
}

impl PortTx {
    /// Every choice, in the order the option lists them.
    pub const ALL: [PortTx; 3] = [PortTx::Auto, PortTx::Xdp, PortTx::Ring];

    /// Its name on the command line (`unet daemon --spine-port-tx`).
    pub const fn name(self) -> &'static str {
        match self {
            PortTx::Auto => "auto",
            PortTx::Xdp => "xdp",
            PortTx::Ring => "ring",
        }
    }
}

impl std::str::FromStr for PortTx {
    type Err = String;
    fn from_str(s: &str) -> Result<PortTx, String> {
        PortTx::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("{s:?}: auto, xdp or ring"))
    }
}

/// The names of SPINE's event types, in the order of
/// [`EngineConfig::spine_priorities`].
pub const SPINE_EVENT_TYPES: [&str; 8] = [
    "host_tx",
    "wire_rx",
    "peer_rx",
    "deliver_host",
    "peer_tx",
    "wire_tx",
    "timer",
    "handler",
];

/// Default [`EngineConfig::spine_priorities`]: what takes messages out
/// of the adapter (delivery to a host, forwarding to a peer or the wire)
/// runs first, then timers, then handlers, then what brings new messages
/// in, so that the adapter drains before it fills.
pub const DEFAULT_SPINE_PRIORITIES: [u8; 8] = [3, 3, 3, 0, 0, 0, 1, 2];

/// Parse `type=priority[,type=priority...]` (the daemon's flag) over
/// `base`; the error says which item is wrong and why.
pub fn parse_spine_priorities(s: &str, mut base: [u8; 8]) -> Result<[u8; 8], String> {
    for item in s.split(',').filter(|i| !i.trim().is_empty()) {
        let item = item.trim();
        let (name, p) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?}: expected type=priority"))?;
        let k = SPINE_EVENT_TYPES
            .iter()
            .position(|k| *k == name.trim())
            .ok_or_else(|| {
                format!(
                    "{:?}: not an event type ({})",
                    name.trim(),
                    SPINE_EVENT_TYPES.join(", ")
                )
            })?;
        let p: u8 = p
            .trim()
            .parse()
            .ok()
            .filter(|&p| p < 8)
            .ok_or_else(|| format!("{item:?}: a priority is 0..=7"))?;
        base[k] = p;
    }
    Ok(base)
}

/// Default [`EngineConfig::vi_break_timeout`].
pub const DEFAULT_VI_BREAK_TIMEOUT: Duration = Duration::from_secs(5);

/// Default [`EngineConfig::vi_held_budget`]: 4 MiB.
pub const DEFAULT_VI_HELD_BUDGET: u64 = 4 << 20;

/// The default [`EngineConfig::allow_peers`]: loopback only.
pub fn default_allow_peers() -> Vec<IpNet> {
    vec![
        IpNet::new(IpAddr::from([127, 0, 0, 0]), 8).expect("a valid prefix"),
        IpNet::new(IpAddr::from(std::net::Ipv6Addr::LOCALHOST), 128).expect("a valid prefix"),
    ]
}

/// Default [`EngineConfig::peer_channels_max`].
pub const DEFAULT_PEER_CHANNELS_MAX: u32 = 256;

/// Default [`EngineConfig::peer_half_open_max`].
pub const DEFAULT_PEER_HALF_OPEN_MAX: u32 = 64;

/// Default [`EngineConfig::liveness_timeout`].
pub const DEFAULT_LIVENESS_TIMEOUT: Duration = Duration::from_secs(5);

/// Default [`EngineConfig::client_udm_jobs`].
pub const DEFAULT_CLIENT_UDM_JOBS: u32 = 32;

/// Default [`EngineConfig::client_udm_nodes`].
pub const DEFAULT_CLIENT_UDM_NODES: u32 = 256;
/// Default [`EngineConfig::client_regions`].
pub const DEFAULT_CLIENT_REGIONS: u32 = 1024;

/// Default [`EngineConfig::client_vis`].
pub const DEFAULT_CLIENT_VIS: u32 = 1024;

/// Default [`EngineConfig::client_listeners`].
pub const DEFAULT_CLIENT_LISTENERS: u32 = 64;

/// Default [`EngineConfig::fd_reserve`].
pub const DEFAULT_FD_RESERVE: u32 = 64;

/// Default [`EngineConfig::vi_pending_max`].
pub const DEFAULT_VI_PENDING_MAX: u32 = 4096;

/// Default [`EngineConfig::vi_pending_per_peer`].
pub const DEFAULT_VI_PENDING_PER_PEER: u32 = 256;

/// Default [`EngineConfig::vi_pending_per_ip`].
pub const DEFAULT_VI_PENDING_PER_IP: u32 = 1024;

/// Default [`EngineConfig::peer_ip_channels_max`].
pub const DEFAULT_PEER_IP_CHANNELS_MAX: u32 = 1024;

/// Default [`EngineConfig::peer_ip_half_open_max`].
pub const DEFAULT_PEER_IP_HALF_OPEN_MAX: u32 = 256;

/// Default [`EngineConfig::client_memory`]: 4 GiB.
pub const DEFAULT_CLIENT_MEMORY: u64 = 4 << 30;

/// Default [`EngineConfig::client_idle_connections`].
pub const DEFAULT_CLIENT_IDLE_CONNECTIONS: u32 = 32;

/// Default [`EngineConfig::user_idle_connections`].
pub const DEFAULT_USER_IDLE_CONNECTIONS: u32 = 128;

/// Default [`EngineConfig::applet_fuel_max`]: 50 times the default budget
/// (a millisecond or so of applet work per invocation).
pub const DEFAULT_APPLET_FUEL_MAX: u64 = 50 * unet_sle::DEFAULT_FUEL;

/// Default [`EngineConfig::applet_heap_max`]: 16 MiB.
pub const DEFAULT_APPLET_HEAP_MAX: u32 = 16 << 20;

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            control_socket: None,
            udp_bind: None,
            max_datagram: 1472,
            wire_drop_ppm: 0,
            wire_dup_ppm: 0,
            wire_reorder_ppm: 0,
            wire_drop_seed: 0,
            max_endpoints: 256,
            conn_ring_size: unet_abi::CONN_RING_DEFAULT,
            idle_spin: Duration::ZERO,
            client_memory: DEFAULT_CLIENT_MEMORY,
            user_memory: u64::MAX,
            client_endpoints: 0,
            client_idle_connections: DEFAULT_CLIENT_IDLE_CONNECTIONS,
            user_idle_connections: DEFAULT_USER_IDLE_CONNECTIONS,
            applet_fuel_max: DEFAULT_APPLET_FUEL_MAX,
            applet_heap_max: DEFAULT_APPLET_HEAP_MAX,
            applet_time_max: unet_sle::DEFAULT_MAX_TIME,
            applet_compile: true,
            allow_peers: default_allow_peers(),
            cluster_key: None,
            peer_channels_max: DEFAULT_PEER_CHANNELS_MAX,
            peer_half_open_max: DEFAULT_PEER_HALF_OPEN_MAX,
            liveness_timeout: DEFAULT_LIVENESS_TIMEOUT,
            client_udm_jobs: DEFAULT_CLIENT_UDM_JOBS,
            client_udm_nodes: DEFAULT_CLIENT_UDM_NODES,
            client_regions: DEFAULT_CLIENT_REGIONS,
            client_vis: DEFAULT_CLIENT_VIS,
            client_listeners: DEFAULT_CLIENT_LISTENERS,
            fd_reserve: DEFAULT_FD_RESERVE,
            vi_pending_max: DEFAULT_VI_PENDING_MAX,
            vi_pending_per_peer: DEFAULT_VI_PENDING_PER_PEER,
            vi_pending_per_ip: DEFAULT_VI_PENDING_PER_IP,
            peer_ip_channels_max: DEFAULT_PEER_IP_CHANNELS_MAX,
            peer_ip_half_open_max: DEFAULT_PEER_IP_HALF_OPEN_MAX,
            vi_break_timeout: DEFAULT_VI_BREAK_TIMEOUT,
            vi_held_budget: DEFAULT_VI_HELD_BUDGET,
            spine_priorities: DEFAULT_SPINE_PRIORITIES,
            spine_events_max: 65_536,
            spine_time_every: 64,
            spine_msgs_max: 8_192,
            spine_bufs_max: 1_024,
            spine_buf_size: 64 << 10,
            spine_handlers: 1_024,
            spine_port_tx: PortTx::Auto,
            spine_port_rx_frames: DEFAULT_SPINE_PORT_RX_FRAMES,
        }
    }
}

impl EngineConfig {
    /// Whether an engine at `ip` may open channels to this one (it is in
    /// [`EngineConfig::allow_peers`]; an IPv4 address mapped into IPv6
    /// counts as the IPv4 address).
    pub fn peer_allowed(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.allow_peers.iter().any(|n| n.contains(&ip))
    }

    /// The endpoints one process may hold: [`EngineConfig::client_endpoints`],
    /// or, when it is 0, a quarter of the slots but at least 4 (all of
    /// them in an engine of 4 slots or fewer: a small engine for one
    /// process or a test).
    pub fn endpoints_per_client(&self) -> u32 {
        match self.client_endpoints {
            0 => (self.max_endpoints / 4).max(self.max_endpoints.min(4)),
            n => n,
        }
    }

    /// The limits in force, as `unet stat` shows them.
    pub fn limits(&self) -> unet_control::Limits {
        unet_control::Limits {
            client_memory: self.client_memory,
            user_memory: self.user_memory,
            client_endpoints: self.endpoints_per_client(),
            client_idle_connections: self.client_idle_connections,
            user_idle_connections: self.user_idle_connections,
            client_regions: self.client_regions,
            client_vis: self.client_vis,
            client_listeners: self.client_listeners,
            client_udm_jobs: self.client_udm_jobs,
            client_udm_nodes: self.client_udm_nodes,
            vi_held_budget: self.vi_held_budget,
        }
    }

    /// The limits of an applet whose owner asked for `fuel` and `heap`
    /// (0: the default), or why they are refused (above the engine's
    /// maxima). The time limit is the engine's `applet_time_max`.
    pub fn applet_limits(&self, fuel: u64, heap: u32) -> Result<jive::Limits, String> {
        let mut limits = unet_sle::default_limits();
        if fuel > self.applet_fuel_max {
            return Err(format!(
                "a work budget of {fuel} units per invocation is above this engine's \
                 maximum of {} (its applet_fuel_max)",
                self.applet_fuel_max
            ));
        }
        if heap > self.applet_heap_max {
            return Err(format!(
                "a heap quota of {heap} bytes is above this engine's maximum of {} \
                 (its applet_heap_max)",
                self.applet_heap_max
            ));
        }
        if fuel != 0 {
            limits.fuel = fuel;
        }
        if heap != 0 {
            limits.heap_quota = heap as usize;
        }
        limits.max_time = (!self.applet_time_max.is_zero()).then_some(self.applet_time_max);
        Ok(limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applets_get_the_engines_time_limit() {
        let cfg = EngineConfig::default();
        let l = cfg.applet_limits(0, 0).expect("defaults");
        assert_eq!(l.max_time, Some(unet_sle::DEFAULT_MAX_TIME));
        let cfg = EngineConfig {
            applet_time_max: Duration::from_micros(250),
            ..EngineConfig::default()
        };
        let l = cfg.applet_limits(1_000, 0).expect("within maxima");
        assert_eq!(
            (l.fuel, l.max_time),
            (1_000, Some(Duration::from_micros(250)))
        );
        let cfg = EngineConfig {
            applet_time_max: Duration::ZERO,
            ..EngineConfig::default()
        };
        assert_eq!(cfg.applet_limits(0, 0).expect("defaults").max_time, None);
    }
}
