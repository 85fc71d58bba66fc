//! Who may talk to this engine over the wire, and what each peer holds.
//!
//! Admission: a datagram is taken only from an address of the engine's
//! allowed networks or from a peer it holds channels (or opens) with. One
//! peer (by address) holds at most `channels_max` channels, VIs and UDM
//! links together, opening ones included; of those at most
//! `half_open_max` accepted and not yet confirmed. As one host can send
//! from many ports, the peers of one IP address together hold at most
//! `ip_channels_max` of them, and `ip_half_open_max` unconfirmed ones
//! (`wire_drop_peer_ip_*`).
//!
//! Liveness (Aeron's model) reads and writes the same peer records: when a
//! valid frame last came from a peer, when it was last sent a keepalive.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use ipnet::IpNet;
use unet_abi::EngineCounter;

use crate::wire::auth::ReplayGuard;
use crate::wire::ClusterKey;

/// The bounds and keys admission works with (from the engine's
/// configuration).
#[derive(Debug, Clone)]
pub struct AdmissionConfig {
    /// Networks whose addresses may open channels, VIs and joins.
    pub allow: Vec<IpNet>,
    /// The cluster key that authenticates control frames, if any.
    pub key: Option<ClusterKey>,
    /// Channels (and VIs, links) one peer holds at most.
    pub channels_max: u32,
    /// Of those, accepted and not yet confirmed.
    pub half_open_max: u32,
    /// Channels and VIs the peers of one IP address hold together.
    pub ip_channels_max: u32,
    /// Of those, unconfirmed.
    pub ip_half_open_max: u32,
    /// A peer silent this long is gone.
    pub liveness_timeout: Duration,
}

/// What this engine knows of one peer engine (by address).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PeerState {
    /// Remote channels with it (routes, VIs, links), confirmed or not.
    pub(crate) channels: u32,
    /// Of those, accepted here and not yet confirmed by it.
    pub(crate) half_open: u32,
    /// Opens of ours waiting for its answer.
    pub(crate) opening: u32,
    /// When a valid frame last came from it (ns since the epoch).
    pub(crate) last_rx: u64,
    /// When we last sent it a keepalive (ns since the epoch).
    pub(crate) last_keepalive: u64,
}

impl PeerState {
    pub(crate) fn new(now_ns: u64) -> PeerState {
        PeerState {
            channels: 0,
            half_open: 0,
            opening: 0,
            last_rx: now_ns,
            last_keepalive: now_ns,
        }
    }
}

/// What the peers of one IP address hold together.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct IpShare {
    /// Channels and VIs (opening ones included).
    pub(crate) held: u32,
    /// Of those, accepted here and not yet confirmed.
    pub(crate) half_open: u32,
}

/// Who may talk to this engine, and what each peer holds.
pub(crate) struct Admission {
    pub(crate) allow: Vec<IpNet>,
    pub(crate) key: Option<ClusterKey>,
    pub(crate) replay: ReplayGuard,
    pub(crate) peers: HashMap<SocketAddr, PeerState>,
    pub(crate) channels_max: u32,
    pub(crate) half_open_max: u32,
    /// What the peers of each IP address hold together (channels and
    /// VIs with opening ones, unconfirmed ones), and its bounds.
    pub(crate) per_ip: HashMap<IpAddr, IpShare>,
    pub(crate) ip_channels_max: u32,
    pub(crate) ip_half_open_max: u32,
    pub(crate) liveness_ns: u64,
    /// When peers are looked at next (keepalives, silence, expiry).
    pub(crate) next_check: u64,
}

impl Admission {
    pub(crate) fn new(cfg: AdmissionConfig) -> Admission {
        Admission {
            allow: cfg.allow,
            key: cfg.key,
            replay: ReplayGuard::new(),
            peers: HashMap::new(),
            channels_max: cfg.channels_max,
            half_open_max: cfg.half_open_max,
            per_ip: HashMap::new(),
            ip_channels_max: cfg.ip_channels_max,
            ip_half_open_max: cfg.ip_half_open_max,
            liveness_ns: cfg
                .liveness_timeout
                .as_nanos()
                .clamp(1_000_000, u64::MAX as u128) as u64,
            next_check: 0,
        }
    }

    /// Count a change of what peer `addr` holds against its IP address:
    /// `held` channels (or opens) and `half_open` unconfirmed ones, each
    /// +1 or -1.
    pub(crate) fn ip_change(&mut self, addr: SocketAddr, held: i32, half_open: i32) {
        let ip = addr.ip().to_canonical();
        let e = self.per_ip.entry(ip).or_default();
        e.held = e.held.saturating_add_signed(held);
        e.half_open = e.half_open.saturating_add_signed(half_open);
        if e.held == 0 && e.half_open == 0 {
            self.per_ip.remove(&ip);
        }
    }

    /// Why peer `addr`'s IP address may not hold one more channel
    /// (`half_open`: an unconfirmed one), if it may not.
    pub(crate) fn ip_full(&self, addr: SocketAddr, half_open: bool) -> Option<EngineCounter> {
        let e = self
            .per_ip
            .get(&addr.ip().to_canonical())
            .copied()
            .unwrap_or_default();
        if e.held >= self.ip_channels_max {
            return Some(EngineCounter::WireDropPeerIpChannelsFull);
        }
        if half_open && e.half_open >= self.ip_half_open_max {
            return Some(EngineCounter::WireDropPeerIpHalfOpenFull);
        }
        None
    }

    pub(crate) fn allowed(&self, ip: std::net::IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.allow.iter().any(|n| n.contains(&ip))
    }

    pub(crate) fn check_every(&self) -> u64 {
        (self.liveness_ns / 6).max(1_000_000)
    }

    /// A remote channel with `addr` went away (closed here, closed by the
    /// peer, expired).
    pub(crate) fn channel_gone(&mut self, addr: SocketAddr, confirmed: bool) {
        if let Some(p) = self.peers.get_mut(&addr) {
            let half = !confirmed && p.half_open > 0;
            let held = p.channels > 0;
            p.channels = p.channels.saturating_sub(1);
            if !confirmed {
                p.half_open = p.half_open.saturating_sub(1);
            }
            self.ip_change(addr, -(held as i32), -(half as i32));
        }
    }

    /// An open of ours to `addr` was answered or given up.
    pub(crate) fn open_done(&mut self, addr: SocketAddr) {
        if let Some(p) = self.peers.get_mut(&addr) {
            let held = p.opening > 0;
            p.opening = p.opening.saturating_sub(1);
            self.ip_change(addr, -(held as i32), 0);
        }
    }

    /// A silent peer's share of its IP address goes with it.
    pub(crate) fn forget_share(&mut self, addr: SocketAddr, p: PeerState) {
        let ip = addr.ip().to_canonical();
        if let Some(e) = self.per_ip.get_mut(&ip) {
            e.held = e.held.saturating_sub(p.channels + p.opening);
            e.half_open = e.half_open.saturating_sub(p.half_open);
            if e.held == 0 && e.half_open == 0 {
                self.per_ip.remove(&ip);
            }
        }
    }
}
