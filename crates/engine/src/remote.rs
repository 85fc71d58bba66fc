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

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use unet_abi::{EndpointCounter, EngineCounter, EventDesc, EventKind};
use unet_control::{ErrorCode, Reply};
use unet_sys as sys;

use crate::config::EngineConfig;
use crate::counters::Counters;
use crate::endpoints::{ClientId, EndpointTable};
use crate::routes::{RemotePeer, Route};
use crate::wire::{
    udp::DataTarget, Body, Frame, OpenAccept, OpenRefuse, OpenRequest, PortConfig, Reassembler,
    ReassemblyConfig, RefuseReason, SendBatch, Transport, UdpPort, WireDrop, WireStats,
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
            drop_seed: cfg.wire_drop_seed,
            ..PortConfig::default()
        };
        let port = UdpPort::bind(addr, pc)?;
        Ok(RemoteSide::new(Box::new(port), engine_id, counters))
    }

    /// The remote side of an engine over any transport.
    pub(crate) fn new(
        port: Box<dyn Transport>,
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
        match (open, reasm) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Tell the peer of a remote channel that it is closed.
    pub(crate) fn send_close(&mut self, r: &RemotePeer) {
        let f = Frame {
            src_engine: self.engine_id,
            body: Body::Close(crate::wire::Close {
                dst_endpoint: r.ep,
                dst_channel: r.chan,
                token: r.peer_token,
            }),
        };
        let _ = self.batch.push_frame(r.addr, &f);
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
        let chan = ep.alloc_route().ok_or(ErrorCode::NoResources)?;
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
            let _ = self.batch.push_frame(p.dst, &f);
        }
        let mut done = Vec::new();
        for request in failed {
            if let Some(p) = self.pending.remove(&request) {
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
        self.pending.retain(|_, p| p.client != client);
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
        if self
            .batch
            .push_message(r.addr, self.engine_id, to, msg_id, msg)
            .is_err()
        {
            // Queue full: send what we have and try once more.
            let _ = self.port.send_batch(&mut self.batch);
            if self
                .batch
                .push_message(r.addr, self.engine_id, to, msg_id, msg)
                .is_err()
            {
                self.batch.stats.count_drop(WireDrop::SendQueueFull);
                return;
            }
        }
        self.counters.ep(slot, EndpointCounter::WireTxMsgs, 1);
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
                ..
            } = self;
            let mut rx = Rx {
                counters,
                reasm,
                batch,
                engine_id: *engine_id,
                pending,
                accepted,
                answers: &mut answers,
                now_ns,
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
        self.flush();
        (work, done)
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
                let ep = eps.live_mut(p.src_idx, p.src_id)?;
                ep.routes[p.chan as usize] = Route::Remote(RemotePeer {
                    addr: from,
                    ep: a.src_endpoint,
                    chan: a.accept_channel,
                    peer_token: a.accept_token,
                    my_token: p.my_token,
                    next_msg: 0,
                });
                eps.count_opened(p.src_idx);
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
                free_opening(eps, p.src_idx, p.src_id, p.chan);
                let code = match r.reason {
                    RefuseReason::NoSuchEndpoint => ErrorCode::NoSuchEndpoint,
                    RefuseReason::Refused => ErrorCode::Refused,
                    RefuseReason::NoResources => ErrorCode::NoResources,
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
    /// Answers to our opens, completed after the batch.
    answers: &'a mut Vec<(SocketAddr, Vec<u8>)>,
    now_ns: u64,
}

impl Rx<'_> {
    fn datagram(
        &mut self,
        eps: &mut EndpointTable,
        arrive: &mut Arrive<'_>,
        from: SocketAddr,
        bytes: &[u8],
    ) {
        let f = match Frame::parse(bytes) {
            Ok(f) => f,
            Err(e) => {
                self.reasm.stats.count_drop(WireDrop::from(e));
                return;
            }
        };
        match f.body {
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
                    }
                    _ => return self.reasm.stats.count_drop(WireDrop::UnknownChannel),
                }
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
                let Some(di) = eps.index_of(c.dst_endpoint) else {
                    return self.reasm.stats.count_drop(WireDrop::UnknownEndpoint);
                };
                let Some(ep) = eps.get(di) else {
                    return;
                };
                match ep.route(c.dst_channel) {
                    Some(Route::Remote(r)) if r.my_token == c.token && r.addr == from => {
                        let id = ep.id;
                        eps.peer_gone(crate::routes::Peer {
                            idx: di,
                            id,
                            chan: c.dst_channel,
                        });
                    }
                    Some(Route::Remote(_)) => self.reasm.stats.count_drop(WireDrop::ForgedToken),
                    _ => self.reasm.stats.count_drop(WireDrop::UnknownChannel),
                }
            }
            Body::Keepalive | Body::Confirm(_) => {}
        }
    }

    fn open_request(
        &mut self,
        eps: &mut EndpointTable,
        src_engine: u64,
        from: SocketAddr,
        o: OpenRequest,
    ) {
        self.counters.engine(EngineCounter::WireOpenRequests, 1);
        let key = (from, src_engine, o.request_id);
        let engine_id = self.engine_id;
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
            let _ = batch.push_frame(from, &r);
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
            let _ = batch.push_frame(from, &a);
        };
        if let Some(&(chan, token)) = self.accepted.get(&key) {
            return accept(self.batch, chan, token);
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
