//! Set-up of VIA: registering memory, listening on a discriminator,
//! connecting, accepting, rejecting and closing VIs (see [`crate::via::vias`]).
//! Control hands each VIA request to a [`ViaSetup`], which borrows the
//! parts VIA changes and answers through [`Clients`]; the one module of
//! VIA that talks to the clients.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use unet_abi::*;
use unet_control::{ErrorCode, Reply, Request, ViParams};

use crate::clients::{self, Charges, Clients};
use crate::config::EngineConfig;
use crate::counters::Counters;
use crate::poller::{Poller, Token};
use crate::unet::direct::DirectConns;
use crate::unet::endpoints::ClientId;
use crate::unet::remote::RemoteSide;
use crate::via::vi_path::{EngineVi, RemoteVi};
use crate::via::vias::{
    self, Asker, Connector, Pending, PendingFull, PendingLimits, RemoteOpen, Vias,
    CONNECT_TIMEOUT_MAX,
};
use crate::wire::frame::{
    Body, RefuseReason, ViAccept as ViAcceptFrame, ViAck, ViClose, ViOpen, ViRefuse,
};
use crate::wire::port::ConnIn;

mod engines;

/// Retransmit interval of an unanswered ViOpen.
const OPEN_RETRY: Duration = Duration::from_millis(200);
/// Holding bound a VI advertises (messages).
const HOLD: u16 = 64;

/// What a process holds a bounded number of.
#[derive(Clone, Copy)]
enum Object {
    Region,
    Vi,
    Listener,
}

/// Most VIs one region may be granted to at once.
const GRANTS_MAX: usize = 256;

/// Largest region one request may register (the quota decides the rest).
const REGION_MAX: u64 = 1 << 40;

/// The ring of a VI's direct connection: large enough for two of the
/// largest messages a VI carries.
fn vi_ring(cfg_ring: u32) -> u32 {
    let need = 2 * record_span(VI_MAX_TRANSFER) as u32;
    cfg_ring.max(need.next_power_of_two())
}

/// The parts a VIA request changes, and what it reads of the rest of the
/// engine, borrowed from control for one request (or one batch of the
/// VIA wire's set-up frames) at a time.
pub(crate) struct ViaSetup<'a> {
    pub cfg: &'a EngineConfig,
    pub engine_id: u64,
    pub poller: &'a Poller,
    pub counters: &'a Counters,
    /// The clients: who they are, where replies go.
    pub clients: &'a dyn Clients,
    /// What the parts other than VIA's and the direct connections charge
    /// to a process and its user.
    pub rest: &'a dyn Charges,
    pub conns: &'a mut DirectConns,
    pub remote: Option<RemoteSide<'a>>,
    pub vias: &'a mut Vias,
}

/// How many of `what` client `ci`'s process holds (over all its
/// connections).
fn objects_of(vias: &Vias, clients: &dyn Clients, ci: ClientId, what: Object) -> u32 {
    let key = clients.proc_key(ci);
    let mine = |owner: ClientId| clients.proc_key(owner) == key;
    // The process's connections, and what each holds (kept as
    // objects come and go): no scan of the engine's objects.
    (0..clients.slots())
        .filter(|&c| key.is_some() && mine(c))
        .map(|c| {
            let h = vias.held(c);
            match what {
                Object::Region => h.regions,
                Object::Vi => h.vis,
                Object::Listener => h.listeners,
            }
        })
        .fold(0u32, u32::saturating_add)
}

/// The regions and VIs client `ci`'s process holds: objects that cost
/// the engine descriptors.
pub(crate) fn descriptor_objects_of(vias: &Vias, clients: &dyn Clients, ci: ClientId) -> u32 {
    let regions = objects_of(vias, clients, ci, Object::Region);
    regions.saturating_add(objects_of(vias, clients, ci, Object::Vi))
}

impl ViaSetup<'_> {
    /// The engine's UDP address, if it has a wire.
    fn udp_addr(&self) -> Option<std::net::SocketAddr> {
        self.remote.as_ref().map(|w| w.local_addr())
    }

    /// Whether client `ci`'s process and user may take `more` bytes of
    /// shared memory: the refusal (counted) if not.
    fn check_memory_for(&self, ci: ClientId, more: u64) -> Result<(), ErrorCode> {
        let u = clients::usage(self.clients, ci, |t| {
            self.rest.charge(t);
            for (owner, bytes) in self.conns.charges() {
                t.add(owner, bytes, false);
            }
            for (owner, bytes) in self.vias.charges() {
                t.add(owner, bytes, false);
            }
        });
        u.check(more, self.cfg, self.counters)
    }

    /// Do what a VIA request asks and answer it.
    pub(crate) fn handle_via(
        &mut self,
        ci: ClientId,
        req_id: u32,
        req: Request,
        fds: &mut Vec<OwnedFd>,
    ) {
        let r = match req {
            Request::RegisterMemory { len } => self.register_memory(ci, len, fds.pop()),
            Request::DeregisterMemory { handle } => match self.vias.regions.get(&handle) {
                Some(r) if r.owner == ci => {
                    self.vias.remove_region(handle);
                    Reply::Ok
                }
                _ => Reply::Error(ErrorCode::NoSuchRegion),
            },
            Request::ViListen { tag } => match self.vias.listeners.get(&tag) {
                Some(&c) if c != ci => Reply::Error(ErrorCode::TagInUse),
                None if self.objects_of(ci, Object::Listener) >= self.cfg.client_listeners => {
                    self.count(EngineCounter::QuotaRefusedListeners);
                    Reply::Error(ErrorCode::ObjectQuota)
                }
                _ => {
                    self.vias.listen(tag, ci);
                    Reply::Ok
                }
            },
            Request::ViUnlisten { tag } => match self.vias.listeners.get(&tag) {
                Some(&c) if c == ci => {
                    self.vias.unlisten(tag);
                    let ids = self.vias.pending.on_tag(tag);
                    self.refuse_ids(ids, ErrorCode::Refused);
                    Reply::Ok
                }
                _ => Reply::Error(ErrorCode::NoListener),
            },
            Request::ViConnect {
                host,
                tag,
                attrs,
                timeout_ms,
            } => match self.vi_connect(ci, req_id, host, tag, attrs, timeout_ms) {
                Ok(()) => return, // answered when the listener does
                Err(code) => Reply::Error(code),
            },
            Request::ViAccept { request, attrs } => {
                match self.vi_accept(ci, req_id, request, attrs) {
                    Some(r) => r,
                    None => return, // answered with the segment
                }
            }
            Request::ViReject { request } => match self.vias.pending.get(&request) {
                Some(p) if p.listener == ci => {
                    let p = self.vias.pending.remove(request).expect("present");
                    self.refuse(p.connector, ErrorCode::Refused);
                    Reply::Ok
                }
                _ => Reply::Error(ErrorCode::NoSuchRequest),
            },
            Request::ViClose { vi } => match self.vias.vis.get(&vi) {
                Some(v) if v.owner == ci => {
                    self.close_vi(vi);
                    Reply::Ok
                }
                _ => Reply::Error(ErrorCode::NoSuchVi),
            },
            Request::ViGrantRegion { vi, handle } => self.grant_region(ci, vi, handle),
            Request::ViPeerRegion { vi, handle } => match self.peer_region(ci, vi, handle) {
                Ok((len, fd)) => {
                    self.clients
                        .reply(ci, req_id, Reply::PeerRegion { len }, &[fd.as_raw_fd()]);
                    return;
                }
                Err(code) => Reply::Error(code),
            },
            _ => Reply::Error(ErrorCode::BadRequest),
        };
        self.reply_to(ci, req_id, r);
    }

    /// Let the peer of `ci`'s local VI `vi` read `ci`'s region `handle`,
    /// for as long as their connection lives.
    fn grant_region(&mut self, ci: ClientId, vi: u32, handle: u32) -> Reply {
        let peer = match self.live_local_peer(vi) {
            Some(peer) if self.vias.vis.get(&vi).is_some_and(|v| v.owner == ci) => peer,
            _ => return Reply::Error(ErrorCode::NoSuchVi),
        };
        let vis = &self.vias.vis;
        match self.vias.regions.get_mut(&handle) {
            Some(r) if r.owner == ci => {
                if !r.granted.contains(&peer) {
                    // Grants to VIs that are gone are let go first.
                    if r.granted.len() >= GRANTS_MAX {
                        r.granted.retain(|g| vis.contains_key(g));
                    }
                    if r.granted.len() >= GRANTS_MAX {
                        return Reply::Error(ErrorCode::NoResources);
                    }
                    r.granted.push(peer);
                    if let Some(p) = self.vias.vis.get_mut(&peer) {
                        if !p.grants.contains(&handle) {
                            p.grants.push(handle);
                        }
                    }
                }
                Reply::Ok
            }
            _ => Reply::Error(ErrorCode::NoSuchRegion),
        }
    }

    /// The peer of local VI `vi` while their connection lives: both VIs
    /// there, each the other's peer, the connection open and neither side
    /// closed or in error.
    fn live_local_peer(&self, vi: u32) -> Option<u32> {
        let v = self.vias.vis.get(&vi)?;
        if v.conn_id == 0 || v.peer == 0 {
            return None;
        }
        let p = self.vias.vis.get(&v.peer)?;
        if p.peer != vi || p.conn_id != v.conn_id {
            return None;
        }
        for side in [false, true] {
            match self.conns.vi_side(v.conn_id, side) {
                Some((0, false, _)) => {}
                _ => return None,
            }
        }
        Some(v.peer)
    }

    /// A read-only descriptor of region `handle`, if it was granted to
    /// `ci`'s VI `vi` and their connection lives, and the region's length.
    fn peer_region(&self, ci: ClientId, vi: u32, handle: u32) -> Result<(u64, OwnedFd), ErrorCode> {
        let refused = |code| {
            self.count(EngineCounter::ViPeerRegionRefused);
            Err(code)
        };
        match self.vias.vis.get(&vi) {
            Some(v) if v.owner == ci => {}
            _ => return refused(ErrorCode::NoSuchVi),
        }
        let Some(peer) = self.live_local_peer(vi) else {
            return refused(ErrorCode::NoSuchVi);
        };
        let granter = self.vias.vis.get(&peer).map(|p| p.owner);
        match self.vias.regions.get(&handle) {
            Some(r) if r.granted.contains(&vi) && Some(r.owner) == granter => {
                let fd =
                    unet_sys::reopen_read_only(r.seg.fd()).map_err(|_| ErrorCode::NoResources)?;
                Ok((r.len, fd))
            }
            _ => refused(ErrorCode::NoSuchRegion),
        }
    }

    fn count(&self, c: EngineCounter) {
        self.counters.engine(c, 1);
    }

    fn reply_to(&self, ci: ClientId, req_id: u32, r: Reply) {
        self.clients.reply(ci, req_id, r, &[]);
    }

    /// Refuse a connection request: a local connector gets `code`, a
    /// remote one a ViRefuse.
    fn refuse(&mut self, c: Connector, code: ErrorCode) {
        self.count(EngineCounter::ViRefused);
        match c {
            Connector::Local { client, req_id } => {
                self.reply_to(client, req_id, Reply::Error(code))
            }
            Connector::Remote {
                addr,
                request_id,
                src_vi,
                ..
            } => {
                let reason = match code {
                    ErrorCode::NoListener => RefuseReason::NoListener,
                    ErrorCode::AttributesMismatch => RefuseReason::AttributesMismatch,
                    ErrorCode::NoResources => RefuseReason::NoResources,
                    _ => RefuseReason::Refused,
                };
                if let Some(w) = self.remote.as_mut() {
                    w.send_vi_control(
                        addr,
                        Body::ViRefuse(ViRefuse {
                            request_id,
                            dst_vi: src_vi,
                            reason,
                        }),
                    );
                }
            }
        }
    }

    /// Register the memory file `fd` as a region of `len` bytes: it must
    /// be a memory file whose size is sealed against shrinking (so that
    /// the engine's mapping can never fault) and at least `len` long, and
    /// it counts against the process's memory quota.
    fn register_memory(&mut self, ci: ClientId, len: u64, fd: Option<OwnedFd>) -> Reply {
        let Some(fd) = fd else {
            return Reply::Error(ErrorCode::BadMemory);
        };
        let size = unet_sys::Segment::sealed_len(&fd).unwrap_or(0);
        if len == 0 || len > REGION_MAX || size < len || len > usize::MAX as u64 {
            return Reply::Error(ErrorCode::BadMemory);
        }
        if self.objects_of(ci, Object::Region) >= self.cfg.client_regions {
            self.count(EngineCounter::QuotaRefusedRegions);
            return Reply::Error(ErrorCode::ObjectQuota);
        }
        // Charged in whole pages, as `Vias::charges` counts it.
        if let Err(code) = self.check_memory_for(ci, len.div_ceil(4096) * 4096) {
            return Reply::Error(code);
        }
        let Ok(seg) = unet_sys::Segment::open_sealed(fd, len as usize) else {
            return Reply::Error(ErrorCode::BadMemory);
        };
        let handle = self.vias.add_region(ci, seg, len);
        self.count(EngineCounter::MemoryRegistered);
        Reply::MemoryRegistered { handle }
    }

    /// Queue a connection request to the listener of `tag` and tell it.
    fn vi_connect(
        &mut self,
        ci: ClientId,
        req_id: u32,
        host: Option<std::net::SocketAddr>,
        tag: u64,
        attrs: ViParams,
        timeout_ms: u32,
    ) -> Result<(), ErrorCode> {
        self.expire_requests(Instant::now());
        self.check_vis(ci)?;
        let wait = match timeout_ms {
            0 => CONNECT_TIMEOUT_MAX,
            ms => Duration::from_millis(ms as u64).min(CONNECT_TIMEOUT_MAX),
        };
        if !vias::is_local(host, self.udp_addr()) {
            let Some(to) = host else {
                return Err(ErrorCode::NoWire);
            };
            return self.vi_connect_remote(ci, req_id, to, tag, attrs, wait);
        }
        let &listener = self.vias.listeners.get(&tag).ok_or(ErrorCode::NoListener)?;
        let ring = vi_ring(self.cfg.conn_ring_size);
        self.check_memory_for(ci, conn_segment_size(ring) as u64)?;
        let request = self.queue_request(Pending {
            tag,
            listener,
            connector: Connector::Local { client: ci, req_id },
            attrs,
            deadline: Instant::now() + wait,
            who: self.asker(ci),
        })?;
        let pid = self.clients.pid(ci).unwrap_or(0);
        let notice = Reply::ViRequest {
            tag,
            request,
            attrs,
            pid,
            host: None,
        };
        self.reply_to(listener, 0, notice);
        Ok(())
    }

    /// Accept request `request` with a VI of `attrs`: both sides get their
    /// VI and the connection segment they share. None when the acceptor
    /// was answered (with the segment), the refusal otherwise.
    fn vi_accept(
        &mut self,
        ci: ClientId,
        req_id: u32,
        request: u32,
        attrs: ViParams,
    ) -> Option<Reply> {
        self.expire_requests(Instant::now());
        match self.vias.pending.get(&request) {
            Some(p) if p.listener == ci => {}
            _ => return Some(Reply::Error(ErrorCode::NoSuchRequest)),
        }
        // The acceptor at its most VIs: refused, the request left waiting
        // (it may close one and accept, or reject).
        if let Err(code) = self.check_vis(ci) {
            return Some(Reply::Error(code));
        }
        let p = self.vias.pending.remove(request).expect("present");
        if p.attrs.reliability != attrs.reliability {
            self.refuse(p.connector, ErrorCode::AttributesMismatch);
            return Some(Reply::Error(ErrorCode::AttributesMismatch));
        }
        let (client, req_id_c) = match p.connector {
            Connector::Local { client, req_id } => (client, req_id),
            Connector::Remote {
                addr,
                request_id,
                src_vi,
                src_token,
                ..
            } => {
                return self
                    .vi_accept_remote(ci, req_id, attrs, addr, request_id, src_vi, src_token)
            }
        };
        let ring = vi_ring(self.cfg.conn_ring_size);
        let conn_id = match self.conns.create_vi(client, ring) {
            Ok(id) => id,
            Err(_) => {
                self.refuse(p.connector, ErrorCode::NoResources);
                return Some(Reply::Error(ErrorCode::NoResources));
            }
        };
        let a = self.vias.add_vi(client, conn_id, p.attrs);
        let b = self.vias.add_vi(ci, conn_id, attrs);
        self.vias.vis.get_mut(&a).expect("a").peer = b;
        let vb = self.vias.vis.get_mut(&b).expect("b");
        vb.peer = a;
        vb.side_b = true;
        self.conns.set_ends(conn_id, a, b);
        self.count(EngineCounter::ViConnected);
        let fd = self.conns.fd(conn_id).map(|f| f.as_raw_fd());
        let fds: Vec<_> = fd.into_iter().collect();
        let to_a = Reply::ViConnected {
            vi: a,
            conn_id,
            side: 0,
        };
        self.clients.reply(client, req_id_c, to_a, &fds);
        let to_b = Reply::ViConnected {
            vi: b,
            conn_id,
            side: 1,
        };
        self.clients.reply(ci, req_id, to_b, &fds);
        None
    }

    /// Make an engine-carried VI for client `ci` (its segment, doorbell
    /// and VI table entry); its id.
    fn new_engine_vi(
        &mut self,
        ci: ClientId,
        attrs: ViParams,
        peer: Option<RemoteVi>,
    ) -> Result<u32, ErrorCode> {
        let layout = ViLayout::new(crate::via::vi_path::VI_QUEUE_CAP).expect("valid");
        let limits = crate::via::vi_path::ViLimits::of(self.cfg, &attrs);
        self.check_memory_for(ci, layout.segment_size.saturating_add(limits.held_budget))?;
        let id = self.vias.add_vi(ci, 0, attrs);
        let vi = EngineVi::new(
            id,
            ci,
            self.engine_id,
            attrs.reliability,
            attrs.strict_rnr,
            peer,
            limits,
        );
        let vi = match vi {
            Ok(v) => v,
            Err(_) => {
                self.vias.remove_vi(id);
                return Err(ErrorCode::NoResources);
            }
        };
        let _ = self
            .poller
            .add_edge(vi.doorbell.fd().as_raw_fd(), Token::ViDoorbell(id as usize));
        self.vias.engine.insert(id, vi);
        crate::via::via_loop::touch(self.vias, id);
        Ok(id)
    }

    /// Hand engine-carried VI `id` to its client, answering `req_id`.
    fn hand_over(&self, ci: ClientId, req_id: u32, id: u32) {
        if let Some(v) = self.vias.engine.get(&id) {
            let fds = [v.seg.fd().as_raw_fd(), v.doorbell.fd().as_raw_fd()];
            let r = Reply::ViConnected {
                vi: id,
                conn_id: 0,
                side: 0,
            };
            self.clients.reply(ci, req_id, r, &fds);
        }
    }

    /// Close VI `vi`: its connection is marked closed on both sides (the
    /// peer wakes and finds it gone) and released.
    pub(crate) fn close_vi(&mut self, vi: u32) {
        if self.vias.engine.contains_key(&vi) {
            self.drop_engine_vi(vi, 0);
            self.count(EngineCounter::ViClosed);
            return;
        }
        // The regions granted over this connection, either way, end with
        // it.
        let peer = self.vias.vis.get(&vi).map_or(0, |v| v.peer);
        let ended = self.vias.end_grants(vi) + self.vias.end_grants(peer);
        if ended > 0 {
            self.counters.engine(EngineCounter::ViGrantsEnded, ended);
        }
        let Some(v) = self.vias.remove_vi(vi) else {
            return;
        };
        if v.conn_id != 0 {
            self.conns.close(v.conn_id);
        }
        if let Some(peer) = self.vias.vis.get_mut(&v.peer) {
            peer.peer = 0;
            peer.conn_id = 0;
        }
        self.count(EngineCounter::ViClosed);
    }

    /// Refuse (and forget) the waiting requests `ids`.
    fn refuse_ids(&mut self, ids: Vec<u32>, code: ErrorCode) {
        for id in ids {
            if let Some(p) = self.vias.pending.remove(id) {
                self.refuse(p.connector, code);
            }
        }
    }

    /// Whom client `ci`'s requests count against: its process.
    fn asker(&self, ci: ClientId) -> Asker {
        let (pid, conn) = self.clients.proc_key(ci).unwrap_or((0, ci));
        Asker::Process(pid, conn)
    }

    /// Queue a connection request within the engine's bounds; its id, or
    /// the refusal (counted by the bound it would cross).
    fn queue_request(&mut self, p: Pending) -> Result<u32, ErrorCode> {
        let local = matches!(p.who, Asker::Process(..));
        let limits = PendingLimits {
            total: self.cfg.vi_pending_max,
            per_peer: self.cfg.vi_pending_per_peer,
            per_ip: self.cfg.vi_pending_per_ip,
        };
        self.vias.pending.add(p, limits).map_err(|full| {
            let (counter, code) = match full {
                PendingFull::Backlog => (
                    EngineCounter::ViPendingRefusedBacklog,
                    ErrorCode::NoResources,
                ),
                PendingFull::Peer if local => {
                    (EngineCounter::ViPendingRefusedPeer, ErrorCode::ObjectQuota)
                }
                PendingFull::Peer => (EngineCounter::ViPendingRefusedPeer, ErrorCode::NoResources),
                PendingFull::Ip => (EngineCounter::ViPendingRefusedIp, ErrorCode::NoResources),
                PendingFull::Total => {
                    (EngineCounter::ViPendingRefusedTotal, ErrorCode::NoResources)
                }
            };
            self.count(counter);
            code
        })
    }

    /// How many of `what` client `ci`'s process holds (over all its
    /// connections).
    fn objects_of(&self, ci: ClientId, what: Object) -> u32 {
        objects_of(self.vias, self.clients, ci, what)
    }

    /// Whether client `ci`'s process may have one VI more (counting the
    /// connections it waits for): the refusal (counted) if not.
    fn check_vis(&self, ci: ClientId) -> Result<(), ErrorCode> {
        let n = self.objects_of(ci, Object::Vi) + self.vias.pending.asked_by(self.asker(ci));
        if n >= self.cfg.client_vis {
            self.count(EngineCounter::QuotaRefusedVis);
            return Err(ErrorCode::ObjectQuota);
        }
        Ok(())
    }

    /// Answer the requests nobody accepted in time.
    pub(crate) fn expire_requests(&mut self, now: Instant) {
        for p in self.vias.pending.take_expired(now) {
            self.refuse(p.connector, ErrorCode::NoSuchRequest);
        }
        if self.vias.opens_waiting() {
            self.retry_opens(now);
        }
    }

    /// Fill the VI slots of the counters segment (for `unet stat`): the
    /// first `VI_SLOTS` VIs by id.
    pub(crate) fn fill_vi_slots(&self) {
        let c = self.counters;
        let mut ids: Vec<u32> = self.vias.vis.keys().copied().collect();
        ids.sort_unstable();
        for i in 0..VI_SLOTS {
            let Some(slot) = c.vi_slot(i) else {
                break;
            };
            let Some(v) = ids
                .get(i)
                .and_then(|id| self.vias.vis.get(id).map(|v| (*id, v)))
            else {
                slot.live.store(0, Ordering::Relaxed);
                continue;
            };
            let (id, v) = v;
            let pid = self.clients.pid(v.owner).unwrap_or(0);
            let mut counters = [0u64; VI_COUNTERS];
            let (mut state, mut carried, mut peer_vi) = (0u32, 0u32, v.peer);
            let (mut family, mut port, mut addr) = (0u32, 0u32, [0u8; 16]);
            if let Some(e) = self.vias.engine.get(&id) {
                carried = 1;
                state = e.state;
                counters = e.counters();
                if let Some(p) = e.peer {
                    peer_vi = p.vi;
                    port = p.addr.port() as u32;
                    match p.addr.ip() {
                        std::net::IpAddr::V4(a) => {
                            family = 4;
                            addr[..4].copy_from_slice(&a.octets());
                        }
                        std::net::IpAddr::V6(a) => {
                            family = 6;
                            addr = a.octets();
                        }
                    }
                }
            } else if v.conn_id != 0 {
                let side_b = v.side_b;
                if let Some((err, closed, mine)) = self.conns.vi_side(v.conn_id, side_b) {
                    let peer = self.conns.vi_side(v.conn_id, !side_b);
                    state = if err != 0 {
                        err
                    } else if closed {
                        ViError::Closed as u32
                    } else {
                        match peer {
                            Some((e, _, _)) if e != 0 && e != ViError::Closed as u32 => e,
                            Some((_, true, _)) => ViError::PeerGone as u32,
                            _ => 0,
                        }
                    };
                    counters[ViCounter::TxMsgs as usize] =
                        mine[ClientCounter::DirectTxMsgs as usize];
                    counters[ViCounter::TxBytes as usize] =
                        mine[ClientCounter::DirectTxBytes as usize];
                    counters[ViCounter::RxMsgs as usize] =
                        mine[ClientCounter::DirectRxMsgs as usize];
                    counters[ViCounter::RxBytes as usize] =
                        mine[ClientCounter::DirectRxBytes as usize];
                }
            } else {
                state = ViError::PeerGone as u32;
            }
            let kind = v.attrs.reliability as u32
                | carried << 8
                | (v.attrs.strict_rnr as u32) << 16
                | family << 24;
            slot.vi_id.store(id, Ordering::Relaxed);
            slot.pid.store(pid, Ordering::Relaxed);
            slot.state.store(state, Ordering::Relaxed);
            slot.kind.store(kind, Ordering::Relaxed);
            slot.port.store(port, Ordering::Relaxed);
            slot.peer_vi.store(peer_vi, Ordering::Relaxed);
            for (k, w) in slot.addr.iter().enumerate() {
                w.store(
                    u32::from_le_bytes(addr[4 * k..4 * k + 4].try_into().expect("4 bytes")),
                    Ordering::Relaxed,
                );
            }
            for (k, n) in counters.iter().enumerate() {
                slot.counters[k].store(*n, Ordering::Relaxed);
            }
            slot.live.store(1, Ordering::Release);
        }
    }

    /// Everything client `ci` held of VIA goes: its regions, its
    /// discriminators (requests waiting on them are refused), its requests
    /// and its VIs (their peers find them gone).
    pub(crate) fn drop_client_vias(&mut self, ci: ClientId) {
        let ids = self.vias.pending.ids_where(|p| p.listener == ci);
        self.refuse_ids(ids, ErrorCode::Refused);
        let ids = self
            .vias
            .pending
            .ids_where(|p| matches!(p.connector, Connector::Local { client, .. } if client == ci));
        for id in ids {
            self.vias.pending.remove(id);
        }
        let opens: Vec<u32> = self
            .vias
            .opens
            .iter()
            .filter(|(_, o)| o.client == ci)
            .map(|(&id, _)| id)
            .collect();
        for id in opens {
            if let Some(o) = self.vias.opens.remove(&id) {
                self.drop_engine_vi(o.vi, 0);
                if let Some(w) = self.remote.as_mut() {
                    w.vi_peer_remove(o.to);
                }
            }
        }
        let mine: Vec<u32> = self
            .vias
            .vis
            .iter()
            .filter(|(_, v)| v.owner == ci)
            .map(|(&id, _)| id)
            .collect();
        for vi in mine {
            self.close_vi(vi);
        }
        self.vias.drop_client(ci);
    }
}
