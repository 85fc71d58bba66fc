//! The remote side: remote channels over the engine's UDP wire.
//!
//! It owns the wire (the port, the batch of datagrams to send, the
//! reassembler) and the handshake state; it is given the endpoint table to
//! look channels up in and an `arrive` function to hand whole messages to,
//! never the whole engine. Replies owed to clients (an open accepted,
//! refused or timed out) come back as [`Completion`]s.
//!
//! A channel to an endpoint of another engine is opened with a handshake
//! (`OpenRequest` → `OpenAccept`/`OpenRefuse`, retransmitted until answered
//! or timed out). Each side picks a random token for its end of the channel;
//! a Data or Close frame is accepted only when it names an open remote
//! channel, carries that channel's token and comes from the peer engine's
//! address. Everything else is dropped and counted.
//!
//! Admission: an open request is taken only from an address of
//! `EngineConfig::allow_peers`; any other datagram only from such an
//! address or from a peer a local client opened a channel to (it may
//! answer and use the channel, not open its own). With a cluster key,
//! every control frame is authenticated and fresh ([`crate::wire::auth`])
//! before anything of it is used, so a token is handed out only to a
//! holder of the key. One peer (by address) holds at most
//! `peer_channels_max` channels, in both directions, opening ones
//! included; of those at most `peer_half_open_max` accepted and not yet
//! confirmed (the requester sends a Confirm on the accept; a first
//! message confirms too), and an unconfirmed one is closed after the
//! liveness timeout (its requester is sent a Close: should only its
//! Confirm have been lost, and it sent nothing since, it is told). As one
//! host can send from many ports, the peers of one IP address together
//! hold at most `peer_ip_channels_max` channels and VIs, and
//! `peer_ip_half_open_max` unconfirmed ones (`wire_drop_peer_ip_*`).
//!
//! Liveness (Aeron's model): each engine sends a Keepalive to every peer
//! it holds confirmed channels with, every third of the timeout; a peer
//! from which no valid frame at all came for the timeout is taken as
//! gone: its channels close, their owners get `PeerGone`, and it is not
//! told (it is silent).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use unet_abi::{EndpointCounter, EngineCounter, EventDesc, EventKind};
use unet_control::{ErrorCode, Reply};
use unet_sys as sys;

use crate::config::EngineConfig;
use crate::counters::Counters;
use crate::unet::endpoints::{ClientId, EndpointTable};
use crate::unet::routes::{RemotePeer, Route};
use crate::wire::{
    auth, auth::ReplayGuard, udp::DataTarget, udp::PushError, Body, ClusterKey, Frame, FrameError,
    OpenAccept, OpenRefuse, OpenRequest, PortConfig, Reassembler, ReassemblyConfig, RefuseReason,
    SendBatch, Transport, UdpPort, WireDrop, WireStats,
};
use ipnet::IpNet;

/// Retransmit interval of an unanswered channel open.
const OPEN_RETRY: Duration = Duration::from_millis(200);
/// Attempts before an open fails as unreachable.
const OPEN_TRIES: u32 = 10;

struct Pending {
    client: ClientId,
    req_id: u32,
    src_idx: usize,
    src_id: u32,
    chan: u16,
    my_token: u64,
    dst: SocketAddr,
    dst_ep: u32,
    next_try: Instant,
    tries: u32,
}

/// Where whole messages from the wire go: (the endpoint table, table
/// index, endpoint id, channel, the message).
pub(crate) type Arrive<'a> = dyn FnMut(&mut EndpointTable, usize, u32, u16, &[u8]) + 'a;

/// What this engine knows of one peer engine (by address).
#[derive(Debug, Clone, Copy)]
struct PeerState {
    /// Remote channels with it (routes), confirmed or not.
    channels: u32,
    /// Of those, accepted here and not yet confirmed by it.
    half_open: u32,
    /// Opens of ours waiting for its answer.
    opening: u32,
    /// When a valid frame last came from it (ns since the epoch).
    last_rx: u64,
    /// When we last sent it a keepalive (ns since the epoch).
    last_keepalive: u64,
}

impl PeerState {
    fn new(now_ns: u64) -> PeerState {
        PeerState {
            channels: 0,
            half_open: 0,
            opening: 0,
            last_rx: now_ns,
            last_keepalive: now_ns,
        }
    }
}

/// A channel accepted here, waiting for its requester's confirmation.
struct Unconfirmed {
    deadline: u64,
    idx: usize,
    id: u32,
    chan: u16,
    token: u64,
}

/// Who may talk to this engine, and what each peer holds.
struct Admission {
    allow: Vec<IpNet>,
    key: Option<ClusterKey>,
    replay: ReplayGuard,
    peers: HashMap<SocketAddr, PeerState>,
    unconfirmed: VecDeque<Unconfirmed>,
    channels_max: u32,
    half_open_max: u32,
    /// What the peers of each IP address hold together (channels and
    /// VIs with opening ones, unconfirmed ones), and its bounds.
    per_ip: HashMap<IpAddr, IpShare>,
    ip_channels_max: u32,
    ip_half_open_max: u32,
    liveness_ns: u64,
    /// When peers are looked at next (keepalives, silence, expiry).
    next_check: u64,
}

/// What the peers of one IP address hold together.
#[derive(Debug, Clone, Copy, Default)]
struct IpShare {
    /// Channels and VIs (opening ones included).
    held: u32,
    /// Of those, accepted here and not yet confirmed.
    half_open: u32,
}

impl Admission {
    /// Count a change of what peer `addr` holds against its IP address:
    /// `held` channels (or opens) and `half_open` unconfirmed ones, each
    /// +1 or -1.
    fn ip_change(&mut self, addr: SocketAddr, held: i32, half_open: i32) {
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
    fn ip_full(&self, addr: SocketAddr, half_open: bool) -> Option<EngineCounter> {
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

    fn allowed(&self, ip: std::net::IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.allow.iter().any(|n| n.contains(&ip))
    }

    fn check_every(&self) -> u64 {
        (self.liveness_ns / 6).max(1_000_000)
    }

    /// A remote channel with `addr` went away (closed here, closed by the
    /// peer, expired).
    fn channel_gone(&mut self, addr: SocketAddr, confirmed: bool) {
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

    fn open_done(&mut self, addr: SocketAddr) {
        if let Some(p) = self.peers.get_mut(&addr) {
            let held = p.opening > 0;
            p.opening = p.opening.saturating_sub(1);
            self.ip_change(addr, -(held as i32), 0);
        }
    }
}

/// Queue control frame `f` for `to`, with its authentication trailer when
/// there is a key.
fn push_control(batch: &mut SendBatch, key: Option<&ClusterKey>, to: SocketAddr, f: &Frame<'_>) {
    let _ = match key {
        None => batch.push_frame(to, f),
        Some(k) => batch.push_with(to, |buf| {
            let n = f.emit(buf)?;
            auth::seal_in_place(k, buf, n, auth::wall_ns(), sys::random_u64())
                .ok_or(FrameError::BufferTooSmall)
        }),
    };
}

/// A VIA frame (or a VI's whole message) that came from the wire, for the
/// engine's VIA part to check against its tables and act on. Only the
/// admission (an allowed peer, or one we hold connections with) and, with
/// a cluster key, the authentication of control frames were checked.
pub(crate) enum ViIn {
    /// A whole message for VI `dst_vi`, sequence number `seq`.
    Data {
        from: SocketAddr,
        dst_vi: u32,
        token: u64,
        seq: u32,
        msg: Vec<u8>,
    },
    /// A fragment of a message of several for VI `dst_vi` (not a UDM
    /// link), sequence number `seq`: the VI reassembles its own.
    Frag {
        from: SocketAddr,
        dst_vi: u32,
        token: u64,
        seq: u32,
        frag: crate::wire::frag::FragIn,
    },
    /// An acknowledgement.
    Ack(SocketAddr, crate::wire::frame::ViAck),
    /// A VI gone or broken.
    Close(SocketAddr, crate::wire::frame::ViClose),
    /// A connection request (with the requesting engine's incarnation).
    Open(SocketAddr, u64, crate::wire::frame::ViOpen),
    /// An open accepted.
    Accept(SocketAddr, crate::wire::frame::ViAccept),
    /// An open refused.
    Refuse(SocketAddr, crate::wire::frame::ViRefuse),
    /// A UDM join.
    UdmJoin(SocketAddr, crate::wire::frame::UdmJoin),
    /// A UDM join granted.
    UdmAccept(SocketAddr, crate::wire::frame::UdmAccept),
}

/// A reply owed to a client for an open it asked for.
pub(crate) struct Completion {
    pub client: ClientId,
    pub req_id: u32,
    pub reply: Reply,
}

/// The wire state of one engine.
pub(crate) struct RemoteSide {
    counters: Arc<Counters>,
    port: Box<dyn Transport>,
    batch: SendBatch,
    reasm: Reassembler,
    engine_id: u64,
    pending: HashMap<u32, Pending>,
    next_request: u32,
    /// Accepted opens, so a retransmitted request gets the same answer.
    accepted: HashMap<(SocketAddr, u64, u32), (u16, u64)>,
    epoch: Instant,
    reported: WireStats,
    /// Datagrams received when the socket's drop count was last read.
    drops_read_at: u64,
    adm: Admission,
    /// VIA frames received, for the engine's VIA part.
    pub(crate) vi_in: Vec<ViIn>,
    /// The engine-carried VIs that may receive data: VI id → the peer's
    /// address and the token its frames must carry (checked before a
    /// fragment is reassembled, as an endpoint channel's are).
    vi_routes: HashMap<u32, (SocketAddr, u64)>,
    /// Peers found silent (their VIs break).
    pub(crate) silent: Vec<SocketAddr>,
}

impl RemoteSide {
    pub(crate) fn bind(
        addr: SocketAddr,
        cfg: &EngineConfig,
        engine_id: u64,
        counters: Arc<Counters>,
    ) -> io::Result<RemoteSide> {
        let pc = PortConfig {
            max_datagram: cfg.max_datagram,
            drop_rate_ppm: cfg.wire_drop_ppm,
            dup_rate_ppm: cfg.wire_dup_ppm,
            reorder_rate_ppm: cfg.wire_reorder_ppm,
            drop_seed: cfg.wire_drop_seed,
            ..PortConfig::default()
        };
        let port = UdpPort::bind(addr, pc)?;
        Ok(RemoteSide::new(Box::new(port), cfg, engine_id, counters))
    }

    /// The remote side of an engine over any transport.
    pub(crate) fn new(
        port: Box<dyn Transport>,
        cfg: &EngineConfig,
        engine_id: u64,
        counters: Arc<Counters>,
    ) -> RemoteSide {
        RemoteSide {
            counters,
            batch: SendBatch::for_port(port.config()),
            port,
            reasm: Reassembler::new(ReassemblyConfig::default()),
            engine_id,
            pending: HashMap::new(),
            next_request: 1,
            accepted: HashMap::new(),
            epoch: Instant::now(),
            reported: WireStats::default(),
            drops_read_at: 0,
            adm: Admission {
                allow: cfg.allow_peers.clone(),
                key: cfg.cluster_key.clone(),
                replay: ReplayGuard::new(),
                peers: HashMap::new(),
                unconfirmed: VecDeque::new(),
                channels_max: cfg.peer_channels_max,
                half_open_max: cfg.peer_half_open_max,
                per_ip: HashMap::new(),
                ip_channels_max: cfg.peer_ip_channels_max,
                ip_half_open_max: cfg.peer_ip_half_open_max,
                liveness_ns: cfg
                    .liveness_timeout
                    .as_nanos()
                    .clamp(1_000_000, u64::MAX as u128) as u64,
                next_check: 0,
            },
            vi_in: Vec::new(),
            vi_routes: HashMap::new(),
            silent: Vec::new(),
        }
    }

    /// VI `vi` now takes data from `peer` (its address and the token its
    /// frames carry); None: no more.
    pub(crate) fn vi_route(&mut self, vi: u32, peer: Option<(SocketAddr, u64)>) {
        match peer {
            Some(p) => {
                self.vi_routes.insert(vi, p);
            }
            None => {
                self.vi_routes.remove(&vi);
            }
        }
    }

    /// The wire's clock: ns since the remote side started.
    pub(crate) fn clock_ns(&self) -> u64 {
        self.now_ns()
    }

    /// A VI connection with `addr` begins (or an open to it): it counts
    /// as a channel of that peer (its bound, keepalives, liveness). False
    /// when the peer holds its most channels.
    pub(crate) fn vi_peer_add(&mut self, addr: SocketAddr) -> bool {
        let now_ns = self.now_ns();
        let peer = self
            .adm
            .peers
            .entry(addr)
            .or_insert_with(|| PeerState::new(now_ns));
        if peer.channels + peer.opening >= self.adm.channels_max {
            self.counters
                .engine(WireDrop::PeerChannelsFull.counter(), 1);
            return false;
        }
        if peer.channels == 0 {
            peer.last_rx = now_ns;
        }
        if let Some(c) = self.adm.ip_full(addr, false) {
            self.counters.engine(c, 1);
            return false;
        }
        if let Some(peer) = self.adm.peers.get_mut(&addr) {
            peer.channels += 1;
        }
        self.adm.ip_change(addr, 1, 0);
        true
    }

    /// A VI connection with `addr` ended.
    pub(crate) fn vi_peer_remove(&mut self, addr: SocketAddr) {
        self.adm.channel_gone(addr, true);
    }

    /// Queue a VI's message (and the ack it carries along, if it fits);
    /// true if the ack went with it.
    pub(crate) fn send_vi(&mut self, o: crate::via::vi_path::Outgoing<'_>) -> bool {
        let t = DataTarget {
            dst_endpoint: o.to.vi,
            // Above every endpoint channel (MAX_CHANNELS): the reassembler
            // keys fragments by channel too, and never mixes a VI's with an
            // endpoint's of the same id.
            dst_channel: crate::wire::frame::VI_DATA_CHANNEL,
            token: o.to.peer_token,
            flags: crate::wire::frame::DATA_FLAG_VI,
        };
        let (to, id) = (o.to.addr, self.engine_id);
        if let Some(held) = o.held {
            // A retransmission of what the receiver misses.
            let _ = self.queue(|b| b.push_vi_fragments(to, id, t, o.seq, o.bytes, &held));
            return false;
        }
        self.queue(|b| b.push_vi_message(to, id, t, o.seq, o.bytes, o.ack))
            .unwrap_or(false)
    }

    /// Queue a message's Data frames for `to`. False (counted) if it did
    /// not go (see [`RemoteSide::queue`]).
    fn queue_message(&mut self, to: SocketAddr, t: DataTarget, msg_id: u32, msg: &[u8]) -> bool {
        let id = self.engine_id;
        self.queue(|b| b.push_message(to, id, t, msg_id, msg))
            .is_some()
    }

    /// Queue with `push`; when the batch is full, send it and try once
    /// more. None (counted) if it still did not go.
    fn queue<T>(&mut self, push: impl Fn(&mut SendBatch) -> Result<T, PushError>) -> Option<T> {
        if let Ok(v) = push(&mut self.batch) {
            return Some(v);
        }
        // Queue full: send what we have and try once more.
        let _ = self.port.send_batch(&mut self.batch);
        match push(&mut self.batch) {
            Ok(v) => Some(v),
            Err(_) => {
                self.batch.stats.count_drop(WireDrop::SendQueueFull);
                None
            }
        }
    }

    /// Queue a VIA control frame (authenticated with a cluster key).
    pub(crate) fn send_vi_control(&mut self, to: SocketAddr, body: Body<'_>) {
        let f = Frame {
            src_engine: self.engine_id,
            body,
        };
        push_control(&mut self.batch, self.adm.key.as_ref(), to, &f);
    }

    /// Queue an ack (a data-path frame: not authenticated, protected by
    /// the VI's token and the peer's address).
    pub(crate) fn send_vi_ack(&mut self, to: SocketAddr, ack: crate::wire::frame::ViAck) {
        let f = Frame {
            src_engine: self.engine_id,
            body: Body::ViAck(ack),
        };
        if self.batch.push_frame(to, &f).is_err() {
            let _ = self.port.send_batch(&mut self.batch);
            let _ = self.batch.push_frame(to, &f);
        }
    }

    pub(crate) fn raw_fd(&self) -> i32 {
        self.port.raw_fd()
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.port
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// The next time a timer (open retry, reassembly timeout) is due.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        if !self.batch.is_empty() {
            // Datagrams wait for room in the socket: come back soon.
            return Some(Instant::now() + Duration::from_micros(200));
        }
        let open = self.pending.values().map(|p| p.next_try).min();
        let reasm = self
            .reasm
            .next_deadline()
            .map(|ns| self.epoch + Duration::from_nanos(ns));
        let peers = (!self.adm.peers.is_empty())
            .then(|| self.epoch + Duration::from_nanos(self.adm.next_check));
        [open, reasm, peers].into_iter().flatten().min()
    }

    /// A remote channel closed here: tell its peer.
    pub(crate) fn send_close(&mut self, r: &RemotePeer) {
        self.adm.channel_gone(r.addr, r.confirmed);
        let f = Frame {
            src_engine: self.engine_id,
            body: Body::Close(crate::wire::Close {
                dst_endpoint: r.ep,
                dst_channel: r.chan,
                token: r.peer_token,
            }),
        };
        push_control(&mut self.batch, self.adm.key.as_ref(), r.addr, &f);
    }

    /// Before the engine sleeps: if datagrams came since the last time, read
    /// the kernel's drop count at the socket, for drops no later datagram
    /// told of (the end of a burst), and publish the counters.
    pub(crate) fn before_sleep(&mut self) {
        let rx = self.port.stats().datagrams_received;
        if rx != self.drops_read_at {
            self.drops_read_at = rx;
            self.port.sync_drops();
            self.publish();
        }
    }

    /// Send what is queued (one sendmmsg per 64 datagrams) and publish the
    /// wire counters.
    pub(crate) fn flush(&mut self) {
        if !self.batch.is_empty() {
            let _ = self.port.send_batch(&mut self.batch);
        }
        self.publish();
    }

    fn publish(&mut self) {
        let counters = &*self.counters;
        let mut now = self.port.stats();
        now.add(&self.reasm.stats);
        now.add(&self.batch.stats);
        let was = self.reported;
        if now == was {
            return;
        }
        counters.engine(
            EngineCounter::WireTxDatagrams,
            now.datagrams_sent - was.datagrams_sent,
        );
        counters.engine(EngineCounter::WireTxBytes, now.bytes_sent - was.bytes_sent);
        counters.engine(
            EngineCounter::WireRxDatagrams,
            now.datagrams_received - was.datagrams_received,
        );
        counters.engine(
            EngineCounter::WireRxBytes,
            now.bytes_received - was.bytes_received,
        );
        counters.engine(
            EngineCounter::WireTxBatches,
            now.send_syscalls - was.send_syscalls,
        );
        counters.engine(
            EngineCounter::WireRxBatches,
            now.recv_syscalls - was.recv_syscalls,
        );
        counters.engine(
            EngineCounter::WireReassembled,
            now.messages_reassembled - was.messages_reassembled,
        );
        counters.engine(
            EngineCounter::WireInjectedDuplicates,
            now.injected_duplicates - was.injected_duplicates,
        );
        counters.engine(
            EngineCounter::WireInjectedReorders,
            now.injected_reorders - was.injected_reorders,
        );
        for w in WireDrop::ALL {
            let d = now.drops[w as usize] - was.drops[w as usize];
            if d > 0 {
                counters.engine(w.counter(), d);
            }
        }
        let d = now.socket_overflows - was.socket_overflows;
        if d > 0 {
            counters.engine(EngineCounter::WireDropSocketOverflow, d);
        }
        self.reported = now;
    }

    /// Start opening a channel from endpoint `src_idx` to endpoint
    /// `dst_ep` of the engine at `dst`: the tag is held (opening) until
    /// the peer answers or the tries run out; the answer comes back as a
    /// [`Completion`] for (`client`, `req_id`).
    pub(crate) fn open(
        &mut self,
        eps: &mut EndpointTable,
        client: ClientId,
        req_id: u32,
        src_idx: usize,
        dst: SocketAddr,
        dst_ep: u32,
    ) -> Result<Vec<Completion>, ErrorCode> {
        let ep = eps.get_mut(src_idx).ok_or(ErrorCode::NoSuchEndpoint)?;
        let src_id = ep.id;
        let now_ns = self.epoch.elapsed().as_nanos() as u64;
        let peer = self
            .adm
            .peers
            .entry(dst)
            .or_insert_with(|| PeerState::new(now_ns));
        if peer.channels + peer.opening >= self.adm.channels_max {
            // Counted now (the wire's own counts are published when it
            // is polled).
            self.counters
                .engine(WireDrop::PeerChannelsFull.counter(), 1);
            return Err(ErrorCode::NoResources);
        }
        if peer.channels == 0 {
            // A peer not heard of lately: its silence counts from now.
            peer.last_rx = now_ns;
        }
        if let Some(c) = self.adm.ip_full(dst, false) {
            self.counters.engine(c, 1);
            return Err(ErrorCode::NoResources);
        }
        let chan = ep.alloc_route().ok_or(ErrorCode::NoResources)?;
        if let Some(peer) = self.adm.peers.get_mut(&dst) {
            peer.opening += 1;
        }
        self.adm.ip_change(dst, 1, 0);
        ep.routes[chan as usize] = Route::Opening;
        let request = self.next_request;
        self.next_request = self.next_request.wrapping_add(1).max(1);
        let my_token = sys::random_u64();
        self.pending.insert(
            request,
            Pending {
                client,
                req_id,
                src_idx,
                src_id,
                chan,
                my_token,
                dst,
                dst_ep,
                next_try: Instant::now(),
                tries: 0,
            },
        );
        Ok(self.retry_opens(eps))
    }

    /// (Re)send due open requests; fail those out of tries.
    fn retry_opens(&mut self, eps: &mut EndpointTable) -> Vec<Completion> {
        let now = Instant::now();
        let mut failed = Vec::new();
        for (&request, p) in self.pending.iter_mut() {
            if p.next_try > now {
                continue;
            }
            if p.tries >= OPEN_TRIES {
                failed.push(request);
                continue;
            }
            p.tries += 1;
            p.next_try = now + OPEN_RETRY;
            let f = Frame {
                src_engine: self.engine_id,
                body: Body::OpenRequest(OpenRequest {
                    src_endpoint: p.src_id,
                    dst_endpoint: p.dst_ep,
                    request_id: request,
                    src_channel: p.chan,
                    src_token: p.my_token,
                    flags: 0,
                }),
            };
            push_control(&mut self.batch, self.adm.key.as_ref(), p.dst, &f);
        }
        let mut done = Vec::new();
        for request in failed {
            if let Some(p) = self.pending.remove(&request) {
                self.adm.open_done(p.dst);
                self.counters.engine(EngineCounter::WireOpenTimeouts, 1);
                free_opening(eps, p.src_idx, p.src_id, p.chan);
                done.push(Completion {
                    client: p.client,
                    req_id: p.req_id,
                    reply: Reply::Error(ErrorCode::Unreachable),
                });
            }
        }
        done
    }

    /// Forget the pending opens of a client that went away.
    pub(crate) fn forget_client(&mut self, client: ClientId) {
        let adm = &mut self.adm;
        self.pending.retain(|_, p| {
            if p.client == client {
                adm.open_done(p.dst);
            }
            p.client != client
        });
    }

    /// Queue message `msg` of endpoint counter slot `slot` on the remote
    /// channel `r` (whose message id moves on).
    pub(crate) fn send(&mut self, slot: usize, r: &mut RemotePeer, msg: &[u8]) {
        let msg_id = r.next_msg;
        r.next_msg = r.next_msg.wrapping_add(1);
        let to = DataTarget {
            dst_endpoint: r.ep,
            dst_channel: r.chan,
            token: r.peer_token,
            flags: 0,
        };
        if self.queue_message(r.addr, to, msg_id, msg) {
            self.counters.ep(slot, EndpointCounter::WireTxMsgs, 1);
        }
    }

    /// Receive and handle datagrams, run the wire's timers, send what is
    /// queued. Whole messages go to `arrive` (table, index, endpoint id,
    /// channel, bytes). Returns the work done and the replies owed.
    pub(crate) fn poll(
        &mut self,
        eps: &mut EndpointTable,
        arrive: &mut Arrive<'_>,
    ) -> (usize, Vec<Completion>) {
        let mut work = 0;
        let mut done = Vec::new();
        // Up to a few batches per turn, so the wire cannot starve endpoints.
        for _ in 0..4 {
            let mut answers: Vec<(SocketAddr, Vec<u8>)> = Vec::new();
            let mut handled = 0;
            let now_ns = self.now_ns();
            let RemoteSide {
                counters,
                port,
                reasm,
                batch,
                engine_id,
                pending,
                accepted,
                adm,
                vi_in,
                vi_routes,
                ..
            } = self;
            let mut rx = Rx {
                counters,
                reasm,
                batch,
                engine_id: *engine_id,
                pending,
                accepted,
                adm,
                answers: &mut answers,
                vi_in,
                vi_routes,
                now_ns,
                wall_ns: 0,
            };
            // A receiver without room (see the dispatcher's docs): the rest
            // of the batch waits in the port, the rest of the datagrams in
            // the socket's buffer.
            let r = port.recv_batch_until(&mut |from, bytes| {
                handled += 1;
                rx.datagram(eps, arrive, from, bytes);
                !eps.behind
            });
            // Completions that need the client side (accept/refuse replies).
            for (from, f) in answers {
                done.extend(self.finish_open(eps, from, &f));
            }
            work += handled;
            if eps.behind || !matches!(r, Ok(n) if n > 0) {
                break;
            }
        }
        let now_ns = self.now_ns();
        if self.reasm.expire(now_ns) > 0 {
            work += 1;
        }
        if !self.pending.is_empty() {
            done.extend(self.retry_opens(eps));
        }
        if now_ns >= self.adm.next_check && !self.adm.peers.is_empty() {
            work += self.check_peers(eps, now_ns);
        }
        self.flush();
        (work, done)
    }

    /// Keepalives to the peers we hold confirmed channels with; the
    /// channels of a peer silent past the timeout, and those accepted and
    /// never confirmed, closed (their owners told).
    fn check_peers(&mut self, eps: &mut EndpointTable, now_ns: u64) -> usize {
        let adm = &mut self.adm;
        adm.next_check = now_ns + adm.check_every();
        let mut work = 0;
        let mut silent = Vec::new();
        let (liveness, every) = (adm.liveness_ns, adm.liveness_ns / 3);
        let key = adm.key.clone();
        let mut forgotten = Vec::new();
        adm.peers.retain(|&addr, p| {
            if p.channels == 0 {
                // Nothing held: forget it once no open waits either.
                return p.opening > 0;
            }
            if now_ns.saturating_sub(p.last_rx) > liveness {
                silent.push(addr);
                forgotten.push((addr, *p));
                return false;
            }
            if p.channels > p.half_open && now_ns.saturating_sub(p.last_keepalive) >= every {
                p.last_keepalive = now_ns;
                let f = Frame {
                    src_engine: self.engine_id,
                    body: Body::Keepalive,
                };
                push_control(&mut self.batch, key.as_ref(), addr, &f);
                self.counters.engine(EngineCounter::WireKeepalivesSent, 1);
                work += 1;
            }
            true
        });
        // A silent peer's share of its IP address goes with it.
        for (addr, p) in forgotten {
            let ip = addr.ip().to_canonical();
            if let Some(e) = adm.per_ip.get_mut(&ip) {
                e.held = e.held.saturating_sub(p.channels + p.opening);
                e.half_open = e.half_open.saturating_sub(p.half_open);
                if e.held == 0 && e.half_open == 0 {
                    adm.per_ip.remove(&ip);
                }
            }
        }
        let mut expired = 0;
        if !silent.is_empty() {
            self.silent.extend_from_slice(&silent);
            self.counters
                .engine(EngineCounter::WirePeersSilent, silent.len() as u64);
            let mut gone = Vec::new();
            for (idx, ep) in eps.iter() {
                for (chan, r) in ep.routes.iter().enumerate() {
                    if let Route::Remote(r) = r {
                        if silent.contains(&r.addr) {
                            gone.push(crate::unet::routes::Peer {
                                idx,
                                id: ep.id,
                                chan: chan as u16,
                            });
                        }
                    }
                }
            }
            expired += gone.len();
            for p in gone {
                eps.peer_gone(p);
            }
            self.accepted.retain(|k, _| !silent.contains(&k.0));
        }
        while self
            .adm
            .unconfirmed
            .front()
            .is_some_and(|u| u.deadline <= now_ns)
        {
            let Some(u) = self.adm.unconfirmed.pop_front() else {
                break;
            };
            let route = eps.live_mut(u.idx, u.id).and_then(|ep| ep.route(u.chan));
            if let Some(Route::Remote(r)) = route {
                if !r.confirmed && r.my_token == u.token {
                    // Its requester may be there and have lost our accept
                    // or its Confirm: tell it (a frame as small as the
                    // request, to an address that sent one).
                    self.send_close(&r);
                    eps.peer_gone(crate::unet::routes::Peer {
                        idx: u.idx,
                        id: u.id,
                        chan: u.chan,
                    });
                    expired += 1;
                }
            }
        }
        if expired > 0 {
            self.counters
                .engine(EngineCounter::WireChannelsExpired, expired as u64);
        }
        work + expired
    }

    /// Complete an open with the answer that arrived.
    fn finish_open(
        &mut self,
        eps: &mut EndpointTable,
        from: SocketAddr,
        bytes: &[u8],
    ) -> Option<Completion> {
        let Ok(f) = Frame::parse(bytes) else {
            return None;
        };
        match f.body {
            Body::OpenAccept(a) => {
                let p = self.pending.remove(&a.request_id)?;
                self.adm.open_done(from);
                let ep = eps.live_mut(p.src_idx, p.src_id)?;
                ep.routes[p.chan as usize] = Route::Remote(RemotePeer {
                    addr: from,
                    ep: a.src_endpoint,
                    chan: a.accept_channel,
                    peer_token: a.accept_token,
                    my_token: p.my_token,
                    next_msg: 0,
                    confirmed: true,
                });
                eps.count_opened(p.src_idx);
                let now_ns = self.now_ns();
                let peer = self
                    .adm
                    .peers
                    .entry(from)
                    .or_insert_with(|| PeerState::new(now_ns));
                peer.channels += 1;
                self.adm.ip_change(from, 1, 0);
                let c = Frame {
                    src_engine: self.engine_id,
                    body: Body::Confirm(crate::wire::Close {
                        dst_endpoint: a.src_endpoint,
                        dst_channel: a.accept_channel,
                        token: a.accept_token,
                    }),
                };
                push_control(&mut self.batch, self.adm.key.as_ref(), from, &c);
                Some(Completion {
                    client: p.client,
                    req_id: p.req_id,
                    reply: Reply::ChannelOpened {
                        channel: p.chan,
                        conn_id: 0,
                        side: 0,
                    },
                })
            }
            Body::OpenRefuse(r) => {
                let p = self.pending.remove(&r.request_id)?;
                self.adm.open_done(from);
                free_opening(eps, p.src_idx, p.src_id, p.chan);
                let code = match r.reason {
                    RefuseReason::NoSuchEndpoint => ErrorCode::NoSuchEndpoint,
                    RefuseReason::Refused => ErrorCode::Refused,
                    RefuseReason::NoResources => ErrorCode::NoResources,
                    // A ViOpen's reasons: never in an OpenRefuse.
                    RefuseReason::NoListener | RefuseReason::AttributesMismatch => {
                        ErrorCode::Refused
                    }
                };
                Some(Completion {
                    client: p.client,
                    req_id: p.req_id,
                    reply: Reply::Error(code),
                })
            }
            _ => None,
        }
    }
}

fn free_opening(eps: &mut EndpointTable, idx: usize, id: u32, chan: u16) {
    if let Some(ep) = eps.live_mut(idx, id) {
        if let Some(c) = ep.routes.get_mut(chan as usize) {
            if matches!(c, Route::Opening) {
                *c = Route::Free;
            }
        }
    }
}

/// What handling one received datagram needs of the remote side (its
/// parts borrowed apart from the port that is receiving).
struct Rx<'a> {
    counters: &'a Counters,
    reasm: &'a mut Reassembler,
    batch: &'a mut SendBatch,
    engine_id: u64,
    pending: &'a mut HashMap<u32, Pending>,
    accepted: &'a mut HashMap<(SocketAddr, u64, u32), (u16, u64)>,
    adm: &'a mut Admission,
    /// Answers to our opens (the frames), completed after the batch.
    answers: &'a mut Vec<(SocketAddr, Vec<u8>)>,
    /// VIA frames, for the engine's VIA part.
    vi_in: &'a mut Vec<ViIn>,
    vi_routes: &'a HashMap<u32, (SocketAddr, u64)>,
    now_ns: u64,
    /// The wall clock, read once per batch when a stamp needs it (0: not
    /// yet).
    wall_ns: u64,
}

impl Rx<'_> {
    fn datagram(
        &mut self,
        eps: &mut EndpointTable,
        arrive: &mut Arrive<'_>,
        from: SocketAddr,
        bytes: &[u8],
    ) {
        // Admission: a peer we hold channels with (or opened one to), or
        // an allowed address.
        let known = self.adm.peers.contains_key(&from);
        if !known && !self.adm.allowed(from.ip()) {
            return self.reasm.stats.count_drop(WireDrop::PeerNotAllowed);
        }
        // Authentication: with a key, every frame but Data carries a MAC
        // and a stamp, checked before anything else is read.
        let mut bytes = bytes;
        let mut stamp = None;
        if let Some(key) = &self.adm.key {
            if auth::carries_trailer(bytes) {
                match auth::open(key, bytes) {
                    Ok((frame, st, nonce)) => {
                        bytes = frame;
                        stamp = Some((st, nonce));
                    }
                    Err(auth::AuthError::BadMac) => {
                        return self.reasm.stats.count_drop(WireDrop::BadMac)
                    }
                }
            }
        }
        let f = match Frame::parse(bytes) {
            Ok(f) => f,
            Err(e) => {
                self.reasm.stats.count_drop(WireDrop::from(e));
                return;
            }
        };
        if let Some((st, nonce)) = stamp {
            if self.wall_ns == 0 {
                self.wall_ns = auth::wall_ns();
            }
            if !self.adm.replay.fresh(f.src_engine, st, nonce, self.wall_ns) {
                return self.reasm.stats.count_drop(WireDrop::Replay);
            }
        }
        if !matches!(f.body, Body::Data(_)) {
            // A valid control frame: the peer is alive.
            self.heard(from);
        }
        match f.body {
            Body::Data(d) if d.is_vi() => {
                // The VI's token and peer, before anything is reassembled.
                match self.vi_routes.get(&d.dst_endpoint) {
                    Some(&(peer, token)) if peer == from && token == d.token => {}
                    Some(_) => return self.reasm.stats.count_drop(WireDrop::ForgedToken),
                    None => return self.reasm.stats.count_drop(WireDrop::UnknownEndpoint),
                }
                self.heard(from);
                if let Some(ack) = d.ack {
                    // The ack it carries, checked as the message was: taken
                    // before the message (it may complete sends, and open
                    // the window for an answer).
                    self.vi_in.push(ViIn::Ack(
                        from,
                        crate::wire::frame::ViAck::from_ack(d.dst_endpoint, d.token, ack),
                    ));
                }
                if d.frag_count > 1 && d.dst_endpoint & crate::via::vias::LINK_BIT == 0 {
                    // A VI keeps the fragments of what is in its window.
                    let Some(frag) = crate::wire::frag::FragIn::of(&d) else {
                        return self.reasm.stats.count_drop(WireDrop::BadLength);
                    };
                    self.vi_in.push(ViIn::Frag {
                        from,
                        dst_vi: d.dst_endpoint,
                        token: d.token,
                        seq: d.msg_id,
                        frag,
                    });
                } else if let Ok(Some(msg)) = self.reasm.push(from, f.src_engine, &d, self.now_ns) {
                    self.vi_in.push(ViIn::Data {
                        from,
                        dst_vi: d.dst_endpoint,
                        token: d.token,
                        seq: d.msg_id,
                        msg: msg.as_slice().to_vec(),
                    });
                    if let crate::wire::Message::Owned(v) = msg {
                        self.reasm.recycle(v);
                    }
                }
            }
            Body::Data(d) => {
                let Some(di) = eps.index_of(d.dst_endpoint) else {
                    return self.reasm.stats.count_drop(WireDrop::UnknownEndpoint);
                };
                let Some(ep) = eps.get(di) else {
                    return;
                };
                match ep.route(d.dst_channel) {
                    Some(Route::Remote(r)) => {
                        if r.my_token != d.token || r.addr != from {
                            return self.reasm.stats.count_drop(WireDrop::ForgedToken);
                        }
                        if !r.confirmed {
                            self.confirm(eps, di, d.dst_channel);
                        }
                    }
                    _ => return self.reasm.stats.count_drop(WireDrop::UnknownChannel),
                }
                self.heard(from);
                let Some(ep) = eps.get(di) else {
                    return;
                };
                let (dst_id, slot) = (ep.id, ep.slot);
                if let Ok(Some(msg)) = self.reasm.push(from, f.src_engine, &d, self.now_ns) {
                    let s = msg.as_slice();
                    self.counters.ep(slot, EndpointCounter::WireRxMsgs, 1);
                    arrive(eps, di, dst_id, d.dst_channel, s);
                    if let crate::wire::Message::Owned(v) = msg {
                        self.reasm.recycle(v);
                    }
                }
            }
            Body::OpenRequest(o) => self.open_request(eps, f.src_engine, from, o),
            Body::OpenAccept(a) => {
                if self
                    .pending
                    .get(&a.request_id)
                    .is_some_and(|p| p.dst == from && p.dst_ep == a.src_endpoint)
                {
                    self.answers.push((from, bytes.to_vec()));
                } else {
                    self.reasm.stats.count_drop(WireDrop::ForgedToken);
                }
            }
            Body::OpenRefuse(r) => {
                if self
                    .pending
                    .get(&r.request_id)
                    .is_some_and(|p| p.dst == from && p.dst_ep == r.src_endpoint)
                {
                    self.answers.push((from, bytes.to_vec()));
                } else {
                    self.reasm.stats.count_drop(WireDrop::ForgedToken);
                }
            }
            Body::Close(c) => {
                if let Some((di, id, r)) =
                    self.named_remote(eps, from, c.dst_endpoint, c.dst_channel, c.token)
                {
                    self.adm.channel_gone(from, r.confirmed);
                    eps.peer_gone(crate::unet::routes::Peer {
                        idx: di,
                        id,
                        chan: c.dst_channel,
                    });
                }
            }
            Body::Confirm(c) => {
                if let Some((di, _, r)) =
                    self.named_remote(eps, from, c.dst_endpoint, c.dst_channel, c.token)
                {
                    if !r.confirmed {
                        self.confirm(eps, di, c.dst_channel);
                    }
                }
            }
            // Its work (the peer heard from) is done above.
            Body::Keepalive => {}
            Body::ViAck(a) => self.vi_in.push(ViIn::Ack(from, a)),
            Body::ViClose(c) => self.vi_in.push(ViIn::Close(from, c)),
            Body::ViOpen(o) => {
                // A peer named by a local client may answer, not open.
                if !self.adm.allowed(from.ip()) {
                    return self.reasm.stats.count_drop(WireDrop::PeerNotAllowed);
                }
                self.vi_in.push(ViIn::Open(from, f.src_engine, o))
            }
            Body::ViAccept(a) => self.vi_in.push(ViIn::Accept(from, a)),
            Body::ViRefuse(r) => self.vi_in.push(ViIn::Refuse(from, r)),
            Body::UdmJoin(j) => {
                // As a ViOpen: only an allowed peer may ask.
                if !self.adm.allowed(from.ip()) {
                    return self.reasm.stats.count_drop(WireDrop::PeerNotAllowed);
                }
                self.vi_in.push(ViIn::UdmJoin(from, j))
            }
            Body::UdmAccept(a) => self.vi_in.push(ViIn::UdmAccept(from, a)),
        }
    }

    /// The remote channel a Close or Confirm from `from` names, when the
    /// frame is its peer's (the channel's token, from its peer's address):
    /// the endpoint's index and id and the route. Anything else is counted
    /// by reason.
    fn named_remote(
        &mut self,
        eps: &EndpointTable,
        from: SocketAddr,
        endpoint: u32,
        chan: u16,
        token: u64,
    ) -> Option<(usize, u32, crate::unet::routes::RemotePeer)> {
        let Some(di) = eps.index_of(endpoint) else {
            self.reasm.stats.count_drop(WireDrop::UnknownEndpoint);
            return None;
        };
        let ep = eps.get(di)?;
        match ep.route(chan) {
            Some(Route::Remote(r)) if r.my_token == token && r.addr == from => Some((di, ep.id, r)),
            Some(Route::Remote(_)) => {
                self.reasm.stats.count_drop(WireDrop::ForgedToken);
                None
            }
            _ => {
                self.reasm.stats.count_drop(WireDrop::UnknownChannel);
                None
            }
        }
    }

    /// A valid frame came from `from`.
    fn heard(&mut self, from: SocketAddr) {
        if let Some(p) = self.adm.peers.get_mut(&from) {
            p.last_rx = self.now_ns;
        }
    }

    /// The requester of channel `chan` of endpoint `di` confirmed it.
    fn confirm(&mut self, eps: &mut EndpointTable, di: usize, chan: u16) {
        let Some(ep) = eps.get_mut(di) else {
            return;
        };
        if let Some(Route::Remote(r)) = ep.routes.get_mut(chan as usize) {
            if !r.confirmed {
                r.confirmed = true;
                let addr = r.addr;
                if let Some(p) = self.adm.peers.get_mut(&addr) {
                    let half = p.half_open > 0;
                    p.half_open = p.half_open.saturating_sub(1);
                    self.adm.ip_change(addr, 0, -(half as i32));
                }
            }
        }
    }

    fn open_request(
        &mut self,
        eps: &mut EndpointTable,
        src_engine: u64,
        from: SocketAddr,
        o: OpenRequest,
    ) {
        // A peer named by a local client may answer, not open.
        if !self.adm.allowed(from.ip()) {
            return self.reasm.stats.count_drop(WireDrop::PeerNotAllowed);
        }
        self.counters.engine(EngineCounter::WireOpenRequests, 1);
        let key = (from, src_engine, o.request_id);
        let engine_id = self.engine_id;
        let mac = self.adm.key.clone();
        let mac = mac.as_ref();
        let refuse = |batch: &mut SendBatch, reason| {
            let r = Frame {
                src_engine: engine_id,
                body: Body::OpenRefuse(OpenRefuse {
                    request_id: o.request_id,
                    src_endpoint: o.dst_endpoint,
                    dst_endpoint: o.src_endpoint,
                    reason,
                }),
            };
            push_control(batch, mac, from, &r);
        };
        let accept = |batch: &mut SendBatch, chan: u16, token: u64| {
            let a = Frame {
                src_engine: engine_id,
                body: Body::OpenAccept(OpenAccept {
                    request_id: o.request_id,
                    src_endpoint: o.dst_endpoint,
                    dst_endpoint: o.src_endpoint,
                    accept_channel: chan,
                    accept_token: token,
                }),
            };
            push_control(batch, mac, from, &a);
        };
        if let Some(&(chan, token)) = self.accepted.get(&key) {
            // A retransmitted request: the same answer, if the channel is
            // still there.
            let live = eps.index_of(o.dst_endpoint).is_some_and(|di| {
                eps.get(di).and_then(|ep| ep.route(chan)).is_some_and(
                    |r| matches!(r, Route::Remote(r) if r.my_token == token && r.addr == from),
                )
            });
            if live {
                return accept(self.batch, chan, token);
            }
            self.accepted.remove(&key);
        }
        let now_ns = self.now_ns;
        let peer = *self
            .adm
            .peers
            .entry(from)
            .or_insert_with(|| PeerState::new(now_ns));
        if peer.channels + peer.opening >= self.adm.channels_max {
            self.reasm.stats.count_drop(WireDrop::PeerChannelsFull);
            self.counters.engine(EngineCounter::WireOpenRefused, 1);
            return refuse(self.batch, RefuseReason::NoResources);
        }
        if peer.half_open >= self.adm.half_open_max {
            self.reasm.stats.count_drop(WireDrop::PeerHalfOpenFull);
            self.counters.engine(EngineCounter::WireOpenRefused, 1);
            return refuse(self.batch, RefuseReason::NoResources);
        }
        if let Some(c) = self.adm.ip_full(from, true) {
            self.counters.engine(c, 1);
            self.counters.engine(EngineCounter::WireOpenRefused, 1);
            return refuse(self.batch, RefuseReason::NoResources);
        }
        let Some(di) = eps.index_of(o.dst_endpoint) else {
            self.counters.engine(EngineCounter::WireOpenRefused, 1);
            return refuse(self.batch, RefuseReason::NoSuchEndpoint);
        };
        let Some(ep) = eps.get_mut(di) else {
            return;
        };
        if !ep.accept {
            self.counters.engine(EngineCounter::WireOpenRefused, 1);
            self.counters
                .ep(ep.slot, EndpointCounter::ChannelsRefused, 1);
            return refuse(self.batch, RefuseReason::Refused);
        }
        let Some(chan) = ep.alloc_route() else {
            self.counters.engine(EngineCounter::WireOpenRefused, 1);
            return refuse(self.batch, RefuseReason::NoResources);
        };
        let my_token = sys::random_u64();
        ep.routes[chan as usize] = Route::Remote(RemotePeer {
            addr: from,
            ep: o.src_endpoint,
            chan: o.src_channel,
            peer_token: o.src_token,
            my_token,
            next_msg: 0,
            confirmed: false,
        });
        let id = ep.id;
        if let Some(p) = self.adm.peers.get_mut(&from) {
            p.channels += 1;
            p.half_open += 1;
            if p.channels == 1 {
                p.last_rx = now_ns;
            }
            self.adm.ip_change(from, 1, 1);
        }
        self.adm.unconfirmed.push_back(Unconfirmed {
            deadline: now_ns + self.adm.liveness_ns,
            idx: di,
            id,
            chan,
            token: my_token,
        });
        eps.count_opened(di);
        if self.accepted.len() > 65536 {
            self.accepted.clear();
        }
        self.accepted.insert(key, (chan, my_token));
        eps.push_event(di, opened_event(chan, o.src_endpoint, from));
        accept(self.batch, chan, my_token);
    }
}

fn opened_event(chan: u16, peer_ep: u32, from: SocketAddr) -> EventDesc {
    let mut ev = EventDesc {
        kind: EventKind::ChannelOpened as u16,
        channel: chan,
        peer_endpoint: peer_ep,
        port: from.port(),
        ..Default::default()
    };
    match from.ip() {
        std::net::IpAddr::V4(v) => {
            ev.family = 4;
            ev.addr[..4].copy_from_slice(&v.octets());
        }
        std::net::IpAddr::V6(v) => {
            ev.family = 6;
            ev.addr = v.octets();
        }
    }
    ev
}
