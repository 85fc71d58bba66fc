//! Remote channels: the engine's side of the UDP wire.
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
use std::time::{Duration, Instant};

use unet_abi::{EndpointCounter, EngineCounter, EventDesc, EventKind, WIRE_DROP_BASE};

use crate::core::{Chan, Core};
use crate::wire::{
    udp::DataTarget, Body, Frame, OpenAccept, OpenRefuse, OpenRequest, PortConfig, Reassembler,
    ReassemblyConfig, RefuseReason, SendBatch, UdpPort, WireDrop, WireStats,
};
use crate::EngineConfig;
use unet_control::{EndpointAddr, ErrorCode, Reply};
use unet_sys as sys;

/// Retransmit interval of an unanswered channel open.
const OPEN_RETRY: Duration = Duration::from_millis(200);
/// Attempts before an open fails as unreachable.
const OPEN_TRIES: u32 = 10;

struct Pending {
    client: usize,
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

/// The wire state of one engine.
pub(crate) struct Wire {
    port: UdpPort,
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

impl Wire {
    pub(crate) fn bind(addr: SocketAddr, cfg: &EngineConfig, engine_id: u64) -> io::Result<Wire> {
        let pc = PortConfig {
            max_datagram: cfg.max_datagram,
            drop_rate_ppm: cfg.wire_drop_ppm,
            drop_seed: cfg.wire_drop_seed,
            ..PortConfig::default()
        };
        let port = UdpPort::bind(addr, pc)?;
        Ok(Wire {
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
        })
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

    pub(crate) fn send_close(
        &mut self,
        peer: SocketAddr,
        peer_ep: u32,
        peer_chan: u16,
        token: u64,
    ) {
        let f = Frame {
            src_engine: self.engine_id,
            body: Body::Close(crate::wire::Close {
                dst_endpoint: peer_ep,
                dst_channel: peer_chan,
                token,
            }),
        };
        let _ = self.batch.push_frame(peer, &f);
    }

    /// Before the engine sleeps: if datagrams came since the last time, read
    /// the kernel's drop count at the socket, for drops no later datagram
    /// told of (the end of a burst), and publish the counters.
    pub(crate) fn before_sleep(&mut self, counters: &crate::counters::Counters) {
        let rx = self.port.stats.datagrams_received;
        if rx != self.drops_read_at {
            self.drops_read_at = rx;
            self.port.sync_socket_drops();
            self.publish(counters);
        }
    }

    /// Send what is queued (one sendmmsg per 64 datagrams) and publish the
    /// wire counters.
    pub(crate) fn flush(&mut self, counters: &crate::counters::Counters) {
        if !self.batch.is_empty() {
            let _ = self.port.send_batch(&mut self.batch);
        }
        self.publish(counters);
    }

    fn publish(&mut self, counters: &crate::counters::Counters) {
        let mut now = self.port.stats;
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
                counters.engine_idx(WIRE_DROP_BASE + w as usize, d);
            }
        }
        let d = now.socket_overflows - was.socket_overflows;
        if d > 0 {
            counters.engine(EngineCounter::WireDropSocketOverflow, d);
        }
        self.reported = now;
    }
}

/// Start opening a channel from endpoint `src` to a remote endpoint.
pub(crate) fn open_remote(core: &mut Core, ci: usize, req_id: u32, src: usize, dst: EndpointAddr) {
    let Some(host) = dst.host else { return };
    if core.wire.is_none() {
        return core.reply(ci, req_id, Reply::Error(ErrorCode::NoWire), &[]);
    }
    let Some(ep) = core.eps[src].as_mut() else {
        return;
    };
    let src_id = ep.id;
    let Some(chan) = ep.alloc_chan() else {
        return core.reply(ci, req_id, Reply::Error(ErrorCode::NoResources), &[]);
    };
    ep.channels[chan as usize] = Chan::Opening;
    let w = core.wire.as_mut().expect("wire");
    let request = w.next_request;
    w.next_request = w.next_request.wrapping_add(1).max(1);
    let my_token = sys::random_u64();
    w.pending.insert(
        request,
        Pending {
            client: ci,
            req_id,
            src_idx: src,
            src_id,
            chan,
            my_token,
            dst: host,
            dst_ep: dst.id,
            next_try: Instant::now(),
            tries: 0,
        },
    );
    retry_opens(core);
}

/// (Re)send due open requests; fail those out of tries.
fn retry_opens(core: &mut Core) {
    let now = Instant::now();
    let Some(w) = core.wire.as_mut() else { return };
    let mut failed = Vec::new();
    for (&request, p) in w.pending.iter_mut() {
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
            src_engine: w.engine_id,
            body: Body::OpenRequest(OpenRequest {
                src_endpoint: p.src_id,
                dst_endpoint: p.dst_ep,
                request_id: request,
                src_channel: p.chan,
                src_token: p.my_token,
                flags: 0,
            }),
        };
        let _ = w.batch.push_frame(p.dst, &f);
    }
    let mut done = Vec::new();
    for request in failed {
        if let Some(p) = w.pending.remove(&request) {
            done.push(p);
        }
    }
    for p in done {
        core.counters.engine(EngineCounter::WireOpenTimeouts, 1);
        free_opening(core, p.src_idx, p.src_id, p.chan);
        core.reply(
            p.client,
            p.req_id,
            Reply::Error(ErrorCode::Unreachable),
            &[],
        );
    }
}

fn free_opening(core: &mut Core, idx: usize, id: u32, chan: u16) {
    if let Some(ep) = core.eps.get_mut(idx).and_then(|e| e.as_mut()) {
        if ep.id == id {
            if let Some(c) = ep.channels.get_mut(chan as usize) {
                if matches!(c, Chan::Opening) {
                    *c = Chan::Free;
                }
            }
        }
    }
}

/// Forget the pending opens of a client that went away.
pub(crate) fn forget_client(core: &mut Core, ci: usize) {
    if let Some(w) = core.wire.as_mut() {
        w.pending.retain(|_, p| p.client != ci);
    }
}

/// Queue a message on a remote channel.
pub(crate) fn send_remote(core: &mut Core, idx: usize, chan: u16, src: *const u8, len: usize) {
    let Some(ep) = core.eps[idx].as_mut() else {
        return;
    };
    let slot = ep.slot;
    let Some(Chan::Remote {
        peer,
        peer_ep,
        peer_chan,
        peer_token,
        next_msg,
        ..
    }) = ep.channels.get_mut(chan as usize)
    else {
        return;
    };
    let msg_id = *next_msg;
    *next_msg = next_msg.wrapping_add(1);
    let (peer, to) = (
        *peer,
        DataTarget {
            dst_endpoint: *peer_ep,
            dst_channel: *peer_chan,
            token: *peer_token,
            flags: 0,
        },
    );
    let w = core.wire.as_mut().expect("remote channel without a wire");
    // SAFETY: src/len were checked by process_send to lie inside the
    // sender's buffer area, a live mapping. The client may scribble on it
    // concurrently; then only its own message carries garbage.
    let msg = unsafe { std::slice::from_raw_parts(src, len) };
    if w.batch
        .push_message(peer, w.engine_id, to, msg_id, msg)
        .is_err()
    {
        // Queue full: send what we have and try once more.
        let _ = w.port.send_batch(&mut w.batch);
        if w.batch
            .push_message(peer, w.engine_id, to, msg_id, msg)
            .is_err()
        {
            w.batch.stats.count_drop(WireDrop::SendQueueFull);
            return;
        }
    }
    core.counters.ep(slot, EndpointCounter::WireTxMsgs, 1);
}

/// Receive and handle datagrams; run timers; send what is queued.
pub(crate) fn poll_wire(core: &mut Core) -> usize {
    let Some(mut w) = core.wire.take() else {
        return 0;
    };
    let mut work = 0;
    // Up to a few batches per turn, so the wire cannot starve endpoints.
    for _ in 0..4 {
        let mut frames: Vec<(SocketAddr, Vec<u8>)> = Vec::new();
        let mut handled = 0;
        let now_ns = w.now_ns();
        let Wire {
            port,
            reasm,
            batch,
            engine_id,
            pending,
            accepted,
            ..
        } = &mut w;
        // A receiver without room (see the core module's docs): the rest
        // of the batch waits in the port, the rest of the datagrams in the
        // socket's buffer.
        let r = port.recv_batch_until(|from, bytes| {
            handled += 1;
            handle_datagram(
                core,
                reasm,
                batch,
                *engine_id,
                pending,
                accepted,
                &mut frames,
                from,
                bytes,
                now_ns,
            );
            !core.behind
        });
        // Completions that need the client side (accept/refuse replies).
        for (from, f) in frames {
            finish_open(core, &mut w, from, &f);
        }
        work += handled;
        if core.behind || !matches!(r, Ok(n) if n > 0) {
            break;
        }
    }
    let now_ns = w.now_ns();
    if w.reasm.expire(now_ns) > 0 {
        work += 1;
    }
    core.wire = Some(w);
    if core.wire.as_ref().is_some_and(|w| !w.pending.is_empty()) {
        retry_opens(core);
    }
    if let Some(w) = core.wire.as_mut() {
        w.flush(&core.counters);
    }
    work
}

#[allow(clippy::too_many_arguments)]
fn handle_datagram(
    core: &mut Core,
    reasm: &mut Reassembler,
    batch: &mut SendBatch,
    engine_id: u64,
    pending: &mut HashMap<u32, Pending>,
    accepted: &mut HashMap<(SocketAddr, u64, u32), (u16, u64)>,
    later: &mut Vec<(SocketAddr, Vec<u8>)>,
    from: SocketAddr,
    bytes: &[u8],
    now_ns: u64,
) {
    let f = match Frame::parse(bytes) {
        Ok(f) => f,
        Err(e) => {
            reasm.stats.count_drop(WireDrop::from(e));
            return;
        }
    };
    match f.body {
        Body::Data(d) => {
            let Some(&di) = core.by_id.get(&d.dst_endpoint) else {
                return reasm.stats.count_drop(WireDrop::UnknownEndpoint);
            };
            let Some(ep) = core.eps[di].as_ref() else {
                return;
            };
            match ep.channels.get(d.dst_channel as usize) {
                Some(Chan::Remote { peer, my_token, .. }) => {
                    if *my_token != d.token || *peer != from {
                        return reasm.stats.count_drop(WireDrop::ForgedToken);
                    }
                }
                _ => return reasm.stats.count_drop(WireDrop::UnknownChannel),
            }
            let (dst_id, slot) = (ep.id, ep.slot);
            if let Ok(Some(msg)) = reasm.push(from, f.src_engine, &d, now_ns) {
                let s = msg.as_slice();
                core.counters.ep(slot, EndpointCounter::WireRxMsgs, 1);
                // The wire is taken out of the core meanwhile: an applet's
                // doRx (whose txPush may need it) is queued for the loop.
                core.deliver(di, dst_id, d.dst_channel, s.as_ptr(), s.len(), false);
                if let crate::wire::Message::Owned(v) = msg {
                    reasm.recycle(v);
                }
            }
        }
        Body::OpenRequest(o) => {
            core.counters.engine(EngineCounter::WireOpenRequests, 1);
            let key = (from, f.src_engine, o.request_id);
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
            if let Some(&(chan, token)) = accepted.get(&key) {
                return accept(batch, chan, token);
            }
            let Some(&di) = core.by_id.get(&o.dst_endpoint) else {
                core.counters.engine(EngineCounter::WireOpenRefused, 1);
                return refuse(batch, RefuseReason::NoSuchEndpoint);
            };
            let Some(ep) = core.eps[di].as_mut() else {
                return;
            };
            if !ep.accept {
                core.counters.engine(EngineCounter::WireOpenRefused, 1);
                core.counters
                    .ep(ep.slot, EndpointCounter::ChannelsRefused, 1);
                return refuse(batch, RefuseReason::Refused);
            }
            let Some(chan) = ep.alloc_chan() else {
                core.counters.engine(EngineCounter::WireOpenRefused, 1);
                return refuse(batch, RefuseReason::NoResources);
            };
            let my_token = sys::random_u64();
            ep.channels[chan as usize] = Chan::Remote {
                peer: from,
                peer_ep: o.src_endpoint,
                peer_chan: o.src_channel,
                peer_token: o.src_token,
                my_token,
                next_msg: 0,
            };
            let slot = ep.slot;
            let n = ep.channels.len() as u32;
            core.counters.ep(slot, EndpointCounter::ChannelsOpened, 1);
            core.counters.set_channels(slot, n);
            if accepted.len() > 65536 {
                accepted.clear();
            }
            accepted.insert(key, (chan, my_token));
            core.push_event(di, opened_event(chan, o.src_endpoint, from));
            accept(batch, chan, my_token);
        }
        Body::OpenAccept(a) => {
            if pending
                .get(&a.request_id)
                .is_some_and(|p| p.dst == from && p.dst_ep == a.src_endpoint)
            {
                later.push((from, bytes.to_vec()));
            } else {
                reasm.stats.count_drop(WireDrop::ForgedToken);
            }
        }
        Body::OpenRefuse(r) => {
            if pending
                .get(&r.request_id)
                .is_some_and(|p| p.dst == from && p.dst_ep == r.src_endpoint)
            {
                later.push((from, bytes.to_vec()));
            } else {
                reasm.stats.count_drop(WireDrop::ForgedToken);
            }
        }
        Body::Close(c) => {
            let Some(&di) = core.by_id.get(&c.dst_endpoint) else {
                return reasm.stats.count_drop(WireDrop::UnknownEndpoint);
            };
            let Some(ep) = core.eps[di].as_ref() else {
                return;
            };
            match ep.channels.get(c.dst_channel as usize) {
                Some(Chan::Remote { peer, my_token, .. })
                    if *my_token == c.token && *peer == from =>
                {
                    let id = ep.id;
                    core.peer_gone(di, id, c.dst_channel);
                }
                Some(Chan::Remote { .. }) => reasm.stats.count_drop(WireDrop::ForgedToken),
                _ => reasm.stats.count_drop(WireDrop::UnknownChannel),
            }
        }
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

/// Complete an open with the answer that arrived.
fn finish_open(core: &mut Core, w: &mut Wire, from: SocketAddr, bytes: &[u8]) {
    let Ok(f) = Frame::parse(bytes) else { return };
    match f.body {
        Body::OpenAccept(a) => {
            let Some(p) = w.pending.remove(&a.request_id) else {
                return;
            };
            let Some(ep) = core.eps.get_mut(p.src_idx).and_then(|e| e.as_mut()) else {
                return;
            };
            if ep.id != p.src_id {
                return;
            }
            ep.channels[p.chan as usize] = Chan::Remote {
                peer: from,
                peer_ep: a.src_endpoint,
                peer_chan: a.accept_channel,
                peer_token: a.accept_token,
                my_token: p.my_token,
                next_msg: 0,
            };
            let slot = ep.slot;
            let n = ep.channels.len() as u32;
            core.counters.ep(slot, EndpointCounter::ChannelsOpened, 1);
            core.counters.set_channels(slot, n);
            core.reply(
                p.client,
                p.req_id,
                Reply::ChannelOpened {
                    channel: p.chan,
                    conn_id: 0,
                    side: 0,
                },
                &[],
            );
        }
        Body::OpenRefuse(r) => {
            let Some(p) = w.pending.remove(&r.request_id) else {
                return;
            };
            free_opening(core, p.src_idx, p.src_id, p.chan);
            let code = match r.reason {
                RefuseReason::NoSuchEndpoint => ErrorCode::NoSuchEndpoint,
                RefuseReason::Refused => ErrorCode::Refused,
                RefuseReason::NoResources => ErrorCode::NoResources,
            };
            core.reply(p.client, p.req_id, Reply::Error(code), &[]);
        }
        _ => {}
    }
}
