//! U-Net's remote channels, on the engine's wire port.
//!
//! The port ([`crate::wire::port::WirePort`]) owns the transport, the
//! batch of datagrams to send, reassembly, admission, authentication and
//! per-peer liveness, and belongs to the loop (which flushes it once a
//! turn); U-Net keeps the channels' handshake state ([`RemoteChannels`]:
//! opens pending, opens accepted), and [`RemoteSide`] borrows the two
//! together for a turn or a set-up request. It is given the endpoint
//! table to look channels up in and an `arrive` function to hand whole
//! messages to, never the whole engine. Replies owed to clients (an open
//! accepted, refused or timed out) are [`Completion`]s: those a turn
//! finds are kept for control ([`RemoteSide::take_done`]). VIs and UDM links
//! take their frames from the port's inboxes; the methods they set up
//! with (`vi_route`, `vi_peer_add`, `send_vi_control` …) are the port's,
//! reached through this side.
//!
//! A channel to an endpoint of another engine is opened with a handshake
//! (`OpenRequest` → `OpenAccept`/`OpenRefuse`, retransmitted until answered
//! or timed out). Each side picks a random token for its end of the channel;
//! a Data or Close frame is accepted only when it names an open remote
//! channel, carries that channel's token and comes from the peer engine's
//! address (the port's check, [`Channels::named`]). Everything else is
//! dropped and counted.
//!
//! Admission ([`crate::wire::admission`]): an open request is taken only
//! from an address of `EngineConfig::allow_peers`; any other datagram only
//! from such an address or from a peer a local client opened a channel to
//! (it may answer and use the channel, not open its own). With a cluster
//! key, every control frame is authenticated and fresh
//! ([`crate::wire::auth`]) before anything of it is used, so a token is
//! handed out only to a holder of the key. One peer (by address) holds at
//! most `peer_channels_max` channels, in both directions, opening ones
//! included; of those at most `peer_half_open_max` accepted and not yet
//! confirmed (the requester sends a Confirm on the accept; a first
//! message confirms too), and an unconfirmed one is closed after the
//! liveness timeout (its requester is sent a Close: should only its
//! Confirm have been lost, and it sent nothing since, it is told). As one
//! host can send from many ports, the peers of one IP address together
//! hold at most `peer_ip_channels_max` channels and VIs, and
//! `peer_ip_half_open_max` unconfirmed ones (`wire_drop_peer_ip_*`).
//!
//! Liveness (Aeron's model, kept by the port): a peer from which no valid
//! frame at all came for the timeout is taken as gone: its channels
//! close, their owners get `PeerGone`, and it is not told (it is silent).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use unet_abi::{EndpointCounter, EngineCounter, EventDesc, EventKind};
use unet_control::{ErrorCode, Reply};
use unet_sys as sys;

use crate::config::EngineConfig;
use crate::counters::Counters;
use crate::unet::endpoints::{ClientId, EndpointTable};
use crate::unet::routes::{Peer, RemotePeer, Route};
use crate::wire::admission::{AdmissionConfig, PeerState};
use crate::wire::port::{Channels, PortState, WirePort};
use crate::wire::{
    udp::DataTarget, Body, Frame, OpenAccept, OpenRefuse, OpenRequest, PortConfig, RefuseReason,
    Transport, UdpPort, ViAck, WireDrop,
};

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

/// A channel accepted here, waiting for its requester's confirmation.
struct Unconfirmed {
    deadline: u64,
    idx: usize,
    id: u32,
    chan: u16,
    token: u64,
}

/// A reply owed to a client for an open it asked for.
pub(crate) struct Completion {
    pub client: ClientId,
    pub req_id: u32,
    pub reply: Reply,
}

/// The handshake state of one engine's remote channels (opens pending,
/// opens accepted, channels not yet confirmed), kept by U-Net beside the
/// engine's wire port (which the loop owns).
pub(crate) struct RemoteChannels {
    pending: HashMap<u32, Pending>,
    next_request: u32,
    /// Accepted opens, so a retransmitted request gets the same answer.
    accepted: HashMap<(SocketAddr, u64, u32), (u16, u64)>,
    /// Channels accepted here and not yet confirmed, oldest first.
    unconfirmed: VecDeque<Unconfirmed>,
    /// Replies owed for opens answered or given up on the loop's turns,
    /// for control to send after the turn.
    done: Vec<Completion>,
}

impl Default for RemoteChannels {
    fn default() -> Self {
        RemoteChannels {
            pending: HashMap::new(),
            next_request: 1,
            accepted: HashMap::new(),
            unconfirmed: VecDeque::new(),
            done: Vec::new(),
        }
    }
}

impl RemoteChannels {
    /// Whether replies are owed to clients for opens that finished
    /// ([`RemoteSide::take_done`] takes them).
    #[inline]
    pub(crate) fn has_done(&self) -> bool {
        !self.done.is_empty()
    }

    /// The next time an open not yet answered is sent again.
    pub(crate) fn next_retry(&self) -> Option<Instant> {
        self.pending.values().map(|p| p.next_try).min()
    }
}

/// The engine's wire port on a UDP socket bound to `addr`, with the
/// engine's wire settings.
pub(crate) fn bind_port(
    addr: SocketAddr,
    cfg: &EngineConfig,
    engine_id: u64,
    counters: Arc<Counters>,
) -> io::Result<WirePort> {
    let pc = PortConfig {
        max_datagram: cfg.max_datagram,
        drop_rate_ppm: cfg.wire_drop_ppm,
        dup_rate_ppm: cfg.wire_dup_ppm,
        reorder_rate_ppm: cfg.wire_reorder_ppm,
        drop_seed: cfg.wire_drop_seed,
        ..PortConfig::default()
    };
    let port = UdpPort::bind(addr, pc)?;
    Ok(new_port(Box::new(port), cfg, engine_id, counters))
}

/// The engine's wire port over any transport, with the engine's
/// admission settings.
pub(crate) fn new_port(
    port: Box<dyn Transport>,
    cfg: &EngineConfig,
    engine_id: u64,
    counters: Arc<Counters>,
) -> WirePort {
    let adm = AdmissionConfig {
        allow: cfg.allow_peers.clone(),
        key: cfg.cluster_key.clone(),
        channels_max: cfg.peer_channels_max,
        half_open_max: cfg.peer_half_open_max,
        ip_channels_max: cfg.peer_ip_channels_max,
        ip_half_open_max: cfg.peer_ip_half_open_max,
        liveness_timeout: cfg.liveness_timeout,
    };
    WirePort::new(port, adm, engine_id, counters)
}

/// Queue message `msg` of endpoint counter slot `slot` on the remote
/// channel `r` (whose message id moves on).
pub(crate) fn send(port: &mut WirePort, slot: usize, r: &mut RemotePeer, msg: &[u8]) {
    let msg_id = r.next_msg;
    r.next_msg = r.next_msg.wrapping_add(1);
    let to = DataTarget {
        dst_endpoint: r.ep,
        dst_channel: r.chan,
        token: r.peer_token,
        flags: 0,
    };
    if port.queue_message(r.addr, to, msg_id, msg) {
        port.st.counters.ep(slot, EndpointCounter::WireTxMsgs, 1);
    }
}

/// The remote channels of one engine with its wire port, borrowed
/// together (by U-Net's turn, by set-up).
pub(crate) struct RemoteSide<'a> {
    /// The engine's port on the wire.
    pub(crate) port: &'a mut WirePort,
    ch: &'a mut RemoteChannels,
}

impl<'a> RemoteSide<'a> {
    pub(crate) fn new(port: &'a mut WirePort, ch: &'a mut RemoteChannels) -> RemoteSide<'a> {
        RemoteSide { port, ch }
    }

    /// The same, borrowed for less long (to lend on).
    pub(crate) fn reborrow(&mut self) -> RemoteSide<'_> {
        RemoteSide {
            port: &mut *self.port,
            ch: &mut *self.ch,
        }
    }

    /// VI (or UDM link) `vi` now takes data from `peer` (its address and
    /// the token its frames carry); None: no more.
    pub(crate) fn vi_route(&mut self, vi: u32, peer: Option<(SocketAddr, u64)>) {
        self.port.route(vi, peer);
    }

    /// A VI connection with `addr` begins (or an open to it): it counts
    /// as a channel of that peer (its bound, keepalives, liveness). False
    /// when the peer holds its most channels.
    pub(crate) fn vi_peer_add(&mut self, addr: SocketAddr) -> bool {
        self.port.peer_add(addr)
    }

    /// A VI connection with `addr` ended.
    pub(crate) fn vi_peer_remove(&mut self, addr: SocketAddr) {
        self.port.peer_remove(addr);
    }

    /// Queue a VIA control frame (authenticated with a cluster key).
    pub(crate) fn send_vi_control(&mut self, to: SocketAddr, body: Body<'_>) {
        self.port.send_control(to, body);
    }

    /// Queue an ack (a data-path frame: not authenticated, protected by
    /// the VI's token and the peer's address).
    pub(crate) fn send_vi_ack(&mut self, to: SocketAddr, ack: ViAck) {
        self.port.send_ack(to, ack);
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.port.local_addr()
    }

    /// A remote channel closed here: tell its peer.
    pub(crate) fn send_close(&mut self, r: &RemotePeer) {
        self.port.st.adm.channel_gone(r.addr, r.confirmed);
        let c = crate::wire::Close {
            dst_endpoint: r.ep,
            dst_channel: r.chan,
            token: r.peer_token,
        };
        self.port.send_control(r.addr, Body::Close(c));
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
        let now_ns = self.port.clock_ns();
        let peer = self
            .port
            .st
            .adm
            .peers
            .entry(dst)
            .or_insert_with(|| PeerState::new(now_ns));
        if peer.channels + peer.opening >= self.port.st.adm.channels_max {
            // Counted now (the wire's own counts are published when it
            // is polled).
            self.port
                .st
                .counters
                .engine(WireDrop::PeerChannelsFull.counter(), 1);
            return Err(ErrorCode::NoResources);
        }
        if peer.channels == 0 {
            // A peer not heard of lately: its silence counts from now.
            peer.last_rx = now_ns;
        }
        if let Some(c) = self.port.st.adm.ip_full(dst, false) {
            self.port.st.counters.engine(c, 1);
            return Err(ErrorCode::NoResources);
        }
        let chan = ep.alloc_route().ok_or(ErrorCode::NoResources)?;
        if let Some(peer) = self.port.st.adm.peers.get_mut(&dst) {
            peer.opening += 1;
        }
        self.port.st.adm.ip_change(dst, 1, 0);
        ep.routes[chan as usize] = Route::Opening;
        let request = self.ch.next_request;
        self.ch.next_request = self.ch.next_request.wrapping_add(1).max(1);
        let my_token = sys::random_u64();
        self.ch.pending.insert(
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
        for (&request, p) in self.ch.pending.iter_mut() {
            if p.next_try > now {
                continue;
            }
            if p.tries >= OPEN_TRIES {
                failed.push(request);
                continue;
            }
            p.tries += 1;
            p.next_try = now + OPEN_RETRY;
            let o = OpenRequest {
                src_endpoint: p.src_id,
                dst_endpoint: p.dst_ep,
                request_id: request,
                src_channel: p.chan,
                src_token: p.my_token,
                flags: 0,
            };
            self.port.send_control(p.dst, Body::OpenRequest(o));
        }
        let mut done = Vec::new();
        for request in failed {
            if let Some(p) = self.ch.pending.remove(&request) {
                self.port.st.adm.open_done(p.dst);
                self.port
                    .st
                    .counters
                    .engine(EngineCounter::WireOpenTimeouts, 1);
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
        let adm = &mut self.port.st.adm;
        self.ch.pending.retain(|_, p| {
            if p.client == client {
                adm.open_done(p.dst);
            }
            p.client != client
        });
    }

    /// Receive and handle datagrams, run the wire's timers. Whole
    /// messages go to `arrive` (table, index, endpoint id, channel,
    /// bytes); the replies owed are kept for control
    /// ([`RemoteSide::take_done`]); what is queued leaves when the loop
    /// flushes the port. Returns the work done.
    pub(crate) fn poll(&mut self, eps: &mut EndpointTable, arrive: &mut Arrive<'_>) -> usize {
        let mut work = 0;
        // Up to a few batches per turn, so the wire cannot starve endpoints.
        for _ in 0..4 {
            let mut answers: Vec<(SocketAddr, Vec<u8>)> = Vec::new();
            let RemoteSide { port, ch } = self;
            let RemoteChannels {
                pending,
                accepted,
                unconfirmed,
                ..
            } = &mut **ch;
            let mut rx = UnetRx {
                eps,
                arrive,
                pending,
                accepted,
                unconfirmed,
                answers: &mut answers,
            };
            let (handled, r) = port.recv_batch(&mut rx);
            // Completions that need the client side (accept/refuse replies).
            for (from, f) in answers {
                if let Some(c) = self.finish_open(eps, from, &f) {
                    self.ch.done.push(c);
                }
            }
            work += handled;
            if eps.behind || !matches!(r, Ok(n) if n > 0) {
                break;
            }
        }
        let now_ns = self.port.clock_ns();
        if self.port.expire(now_ns) {
            work += 1;
        }
        if !self.ch.pending.is_empty() {
            let failed = self.retry_opens(eps);
            self.ch.done.extend(failed);
        }
        if self.port.peers_due(now_ns) {
            work += self.check_peers(eps, now_ns);
        }
        work
    }

    /// The replies owed for opens that the loop's turns found (answered,
    /// or out of tries), if any.
    pub(crate) fn take_done(&mut self) -> Option<Vec<Completion>> {
        (!self.ch.done.is_empty()).then(|| std::mem::take(&mut self.ch.done))
    }

    /// The port's look at its peers (keepalives, silence); then the
    /// channels of a peer silent past the timeout, and those accepted and
    /// never confirmed, closed (their owners told).
    fn check_peers(&mut self, eps: &mut EndpointTable, now_ns: u64) -> usize {
        let (work, silent) = self.port.check_peers(now_ns);
        let mut expired = 0;
        if !silent.is_empty() {
            let mut gone = Vec::new();
            for (idx, ep) in eps.iter() {
                for (chan, r) in ep.routes.iter().enumerate() {
                    if let Route::Remote(r) = r {
                        if silent.contains(&r.addr) {
                            gone.push(Peer {
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
            self.ch.accepted.retain(|k, _| !silent.contains(&k.0));
        }
        while self
            .ch
            .unconfirmed
            .front()
            .is_some_and(|u| u.deadline <= now_ns)
        {
            let Some(u) = self.ch.unconfirmed.pop_front() else {
                break;
            };
            let route = eps.live_mut(u.idx, u.id).and_then(|ep| ep.route(u.chan));
            if let Some(Route::Remote(r)) = route {
                if !r.confirmed && r.my_token == u.token {
                    // Its requester may be there and have lost our accept
                    // or its Confirm: tell it (a frame as small as the
                    // request, to an address that sent one).
                    self.send_close(&r);
                    eps.peer_gone(Peer {
                        idx: u.idx,
                        id: u.id,
                        chan: u.chan,
                    });
                    expired += 1;
                }
            }
        }
        if expired > 0 {
            self.port
                .st
                .counters
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
                let p = self.ch.pending.remove(&a.request_id)?;
                self.port.st.adm.open_done(from);
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
                let now_ns = self.port.clock_ns();
                let peer = self
                    .port
                    .st
                    .adm
                    .peers
                    .entry(from)
                    .or_insert_with(|| PeerState::new(now_ns));
                peer.channels += 1;
                self.port.st.adm.ip_change(from, 1, 0);
                let c = crate::wire::Close {
                    dst_endpoint: a.src_endpoint,
                    dst_channel: a.accept_channel,
                    token: a.accept_token,
                };
                self.port.send_control(from, Body::Confirm(c));
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
                let p = self.ch.pending.remove(&r.request_id)?;
                self.port.st.adm.open_done(from);
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

/// A remote channel a frame named: the endpoint (table index, id,
/// counter slot), the channel and its route.
#[derive(Clone, Copy)]
struct Named {
    di: usize,
    id: u32,
    slot: usize,
    chan: u16,
    r: RemotePeer,
}

/// The remote channels as the port sees them while it receives (the
/// parts of the remote side borrowed apart from the port).
struct UnetRx<'a, 'f> {
    eps: &'a mut EndpointTable,
    arrive: &'a mut Arrive<'f>,
    pending: &'a mut HashMap<u32, Pending>,
    accepted: &'a mut HashMap<(SocketAddr, u64, u32), (u16, u64)>,
    unconfirmed: &'a mut VecDeque<Unconfirmed>,
    /// Answers to our opens (the frames), completed after the batch.
    answers: &'a mut Vec<(SocketAddr, Vec<u8>)>,
}

impl Channels for UnetRx<'_, '_> {
    type Named = Named;

    fn named(&mut self, ep: u32, chan: u16) -> Result<(Named, SocketAddr, u64), Option<WireDrop>> {
        let Some(di) = self.eps.index_of(ep) else {
            return Err(Some(WireDrop::UnknownEndpoint));
        };
        let Some(e) = self.eps.get(di) else {
            return Err(None);
        };
        match e.route(chan) {
            Some(Route::Remote(r)) => {
                let n = Named {
                    di,
                    id: e.id,
                    slot: e.slot,
                    chan,
                    r,
                };
                Ok((n, r.addr, r.my_token))
            }
            _ => Err(Some(WireDrop::UnknownChannel)),
        }
    }

    fn data_checked(&mut self, st: &mut PortState, n: Named) {
        if !n.r.confirmed {
            confirm(st, self.eps, n.di, n.chan);
        }
    }

    fn message(&mut self, counters: &Counters, n: Named, msg: &[u8]) {
        counters.ep(n.slot, EndpointCounter::WireRxMsgs, 1);
        (self.arrive)(self.eps, n.di, n.id, n.chan, msg);
    }

    fn close_or_confirm(
        &mut self,
        st: &mut PortState,
        from: SocketAddr,
        n: Named,
        confirm_it: bool,
    ) {
        if confirm_it {
            if !n.r.confirmed {
                confirm(st, self.eps, n.di, n.chan);
            }
        } else {
            st.adm.channel_gone(from, n.r.confirmed);
            self.eps.peer_gone(Peer {
                idx: n.di,
                id: n.id,
                chan: n.chan,
            });
        }
    }

    fn handshake(
        &mut self,
        st: &mut PortState,
        from: SocketAddr,
        src_engine: u64,
        body: Body<'_>,
        bytes: &[u8],
    ) {
        let (request_id, src_endpoint) = match body {
            Body::OpenRequest(o) => return self.open_request(st, src_engine, from, o),
            Body::OpenAccept(a) => (a.request_id, a.src_endpoint),
            Body::OpenRefuse(r) => (r.request_id, r.src_endpoint),
            _ => return,
        };
        if self
            .pending
            .get(&request_id)
            .is_some_and(|p| p.dst == from && p.dst_ep == src_endpoint)
        {
            self.answers.push((from, bytes.to_vec()));
        } else {
            st.drop(WireDrop::ForgedToken);
        }
    }

    fn behind(&self) -> bool {
        self.eps.behind
    }
}

/// The requester of channel `chan` of endpoint `di` confirmed it.
fn confirm(st: &mut PortState, eps: &mut EndpointTable, di: usize, chan: u16) {
    let Some(ep) = eps.get_mut(di) else {
        return;
    };
    if let Some(Route::Remote(r)) = ep.routes.get_mut(chan as usize) {
        if !r.confirmed {
            r.confirmed = true;
            let addr = r.addr;
            if let Some(p) = st.adm.peers.get_mut(&addr) {
                let half = p.half_open > 0;
                p.half_open = p.half_open.saturating_sub(1);
                st.adm.ip_change(addr, 0, -(half as i32));
            }
        }
    }
}

impl UnetRx<'_, '_> {
    fn open_request(
        &mut self,
        st: &mut PortState,
        src_engine: u64,
        from: SocketAddr,
        o: OpenRequest,
    ) {
        // A peer named by a local client may answer, not open.
        if !st.adm.allowed(from.ip()) {
            return st.drop(WireDrop::PeerNotAllowed);
        }
        st.counters.engine(EngineCounter::WireOpenRequests, 1);
        let key = (from, src_engine, o.request_id);
        let refuse = |st: &mut PortState, reason| {
            let r = OpenRefuse {
                request_id: o.request_id,
                src_endpoint: o.dst_endpoint,
                dst_endpoint: o.src_endpoint,
                reason,
            };
            st.send_control(from, Body::OpenRefuse(r));
        };
        let accept = |st: &mut PortState, chan: u16, token: u64| {
            let a = OpenAccept {
                request_id: o.request_id,
                src_endpoint: o.dst_endpoint,
                dst_endpoint: o.src_endpoint,
                accept_channel: chan,
                accept_token: token,
            };
            st.send_control(from, Body::OpenAccept(a));
        };
        let eps = &mut *self.eps;
        if let Some(&(chan, token)) = self.accepted.get(&key) {
            // A retransmitted request: the same answer, if the channel is
            // still there.
            let live = eps.index_of(o.dst_endpoint).is_some_and(|di| {
                eps.get(di).and_then(|ep| ep.route(chan)).is_some_and(
                    |r| matches!(r, Route::Remote(r) if r.my_token == token && r.addr == from),
                )
            });
            if live {
                return accept(st, chan, token);
            }
            self.accepted.remove(&key);
        }
        let now_ns = st.now_ns;
        let peer = *st
            .adm
            .peers
            .entry(from)
            .or_insert_with(|| PeerState::new(now_ns));
        if peer.channels + peer.opening >= st.adm.channels_max {
            st.drop(WireDrop::PeerChannelsFull);
            st.counters.engine(EngineCounter::WireOpenRefused, 1);
            return refuse(st, RefuseReason::NoResources);
        }
        if peer.half_open >= st.adm.half_open_max {
            st.drop(WireDrop::PeerHalfOpenFull);
            st.counters.engine(EngineCounter::WireOpenRefused, 1);
            return refuse(st, RefuseReason::NoResources);
        }
        if let Some(c) = st.adm.ip_full(from, true) {
            st.counters.engine(c, 1);
            st.counters.engine(EngineCounter::WireOpenRefused, 1);
            return refuse(st, RefuseReason::NoResources);
        }
        let Some(di) = eps.index_of(o.dst_endpoint) else {
            st.counters.engine(EngineCounter::WireOpenRefused, 1);
            return refuse(st, RefuseReason::NoSuchEndpoint);
        };
        let Some(ep) = eps.get_mut(di) else {
            return;
        };
        if !ep.accept {
            st.counters.engine(EngineCounter::WireOpenRefused, 1);
            st.counters.ep(ep.slot, EndpointCounter::ChannelsRefused, 1);
            return refuse(st, RefuseReason::Refused);
        }
        let Some(chan) = ep.alloc_route() else {
            st.counters.engine(EngineCounter::WireOpenRefused, 1);
            return refuse(st, RefuseReason::NoResources);
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
        if let Some(p) = st.adm.peers.get_mut(&from) {
            p.channels += 1;
            p.half_open += 1;
            if p.channels == 1 {
                p.last_rx = now_ns;
            }
            st.adm.ip_change(from, 1, 1);
        }
        self.unconfirmed.push_back(Unconfirmed {
            deadline: now_ns + st.adm.liveness_ns,
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
        accept(st, chan, my_token);
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
