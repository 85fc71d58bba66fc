//! Set-up of U-Net: creating an endpoint (its segment made on the set-up
//! threads), opening channels (locally, as a direct connection, or to
//! another engine) and closing them, closing an endpoint and tearing down
//! its routes, attaching an applet (its class verified off the loop) and
//! detaching it, and U-Net's part of the stat reply. Control hands each
//! U-Net request to a [`UnetSetup`], which borrows the U-Net parts and
//! answers through [`Clients`]; the one module of U-Net that talks to the
//! clients. An endpoint's segment is made and unmapped off the loop
//! through [`Work`] (the set-up threads).
//!
//! Ownership: a client may use only the endpoints it created (an applet
//! may also be attached by another process of the same user, or root:
//! `unet applet attach`). Channels are granted here and nowhere else.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use unet_abi::*;
use unet_control::{EndpointAddr, ErrorCode, PathChoice, Reply, Request};
use unet_sys::Segment;

use crate::clients::{self, Charges, Clients, Tally, Usage};
use crate::config::EngineConfig;
use crate::counters::Counters;
use crate::poller::{Poller, Token};
use crate::unet::applets::{AppletHost, Loaded};
use crate::unet::datapath::DataPath;
use crate::unet::direct::DirectConns;
use crate::unet::endpoints::{ClientId, EndpointTable};
use crate::unet::remote::{Completion, RemoteSide};
use crate::unet::routes::{Peer, Route, Teardown};

/// An endpoint whose segment is being made (on the set-up thread).
pub(crate) struct PendingCreate {
    /// The set-up thread's ticket for it.
    pub(crate) ticket: u64,
    /// The client that asked, and its request.
    pub client: ClientId,
    pub req_id: u32,
    pub layout: Layout,
    pub accept: bool,
    /// Its virtual buffer's limit in bytes (0: not buffered).
    pub buffer_limit: u64,
    /// The counter slot and id reserved for it.
    pub slot: usize,
    pub id: u32,
}

/// What U-Net's set-up asks of the set-up threads: an endpoint's segment
/// made ([`EndpointTable::make_segment`]) and unmapped off the engine's
/// loop; and, as [`Charges`], what the parts outside U-Net charge to a
/// process and its user (the endpoints being made among them).
pub(crate) trait Work: Charges {
    /// Start making the segment of the endpoint whose counter slot and id
    /// are `reserved`, for client `client`'s request `req_id`; it comes
    /// back to [`UnetSetup::finish_create`] when it is ready.
    fn start_endpoint(
        &mut self,
        engine_id: u64,
        client: (ClientId, u32),
        layout: Layout,
        params: (bool, u64),
        reserved: (usize, u32),
    );
    /// Unmap `seg` off the loop.
    fn discard(&mut self, seg: Segment);
}

/// The parts a U-Net request changes, and what it reads of the rest of
/// the engine, borrowed from control for one request (or one batch of
/// finished creations, loads or remote opens) at a time.
pub(crate) struct UnetSetup<'a> {
    pub cfg: &'a EngineConfig,
    pub engine_id: u64,
    pub poller: &'a Poller,
    /// The clients: who they are, where replies go, which endpoints each
    /// owns.
    pub clients: &'a mut dyn Clients,
    /// The set-up threads, and the charges outside U-Net.
    pub work: &'a mut dyn Work,
    pub eps: &'a mut EndpointTable,
    pub conns: &'a mut DirectConns,
    pub remote: Option<RemoteSide<'a>>,
    pub applets: &'a mut AppletHost,
}

/// What the endpoints charge to their owners' processes and users: each
/// one's segment and its virtual buffer, charged at its limit (as UDM's
/// are).
pub(crate) fn charge_endpoints(eps: &EndpointTable, t: &mut Tally<'_>) {
    for (_, e) in eps.iter() {
        t.add(e.owner, e.seg.len() as u64 + e.buffer_limit(), true);
    }
}

/// The endpoints client `ci`'s process holds (over all its connections):
/// objects that cost the engine descriptors.
pub(crate) fn endpoints_of(eps: &EndpointTable, clients: &dyn Clients, ci: ClientId) -> u32 {
    let key = clients.proc_key(ci);
    eps.iter()
        .filter(|(_, e)| clients.proc_key(e.owner) == key)
        .count() as u32
}

impl UnetSetup<'_> {
    fn counters(&self) -> &Counters {
        self.eps.counters()
    }

    /// The engine's UDP address, if it has a wire.
    fn udp_addr(&self) -> Option<std::net::SocketAddr> {
        self.remote.as_ref().map(|w| w.local_addr())
    }

    fn reply(&self, ci: ClientId, req_id: u32, r: Reply) {
        self.clients.reply(ci, req_id, r, &[]);
    }

    /// What the process of client `ci` (over all its connections) and its
    /// user hold: the segments of their endpoints, of those being made,
    /// and of the direct connections they opened, with what the parts
    /// outside U-Net charge them.
    fn usage(&self, ci: ClientId) -> Usage {
        clients::usage(&*self.clients, ci, |t| {
            self.work.charge(t);
            charge_endpoints(self.eps, t);
            for (owner, bytes) in self.conns.charges() {
                t.add(owner, bytes, false);
            }
        })
    }

    /// Whether client `ci`'s process and user may take `more` bytes of
    /// shared memory: the refusal (counted) if not.
    fn check_memory(&self, u: &Usage, more: u64) -> Result<(), ErrorCode> {
        u.check(more, self.cfg, self.counters())
    }

    /// Send the replies owed for remote opens.
    pub(crate) fn complete(&self, done: Vec<Completion>) {
        for c in done {
            self.clients.reply(c.client, c.req_id, c.reply, &[]);
        }
    }

    /// Do what a U-Net request asks and answer it.
    pub(crate) fn handle_unet(
        &mut self,
        ci: ClientId,
        req_id: u32,
        req: Request,
        fds: &mut Vec<OwnedFd>,
    ) {
        match req {
            Request::CreateEndpoint {
                geometry,
                accept,
                buffer_limit,
            } => {
                // Answered when the segment is ready (finish_create).
                if let Err(code) =
                    self.create_endpoint(ci, req_id, geometry, (accept, buffer_limit))
                {
                    self.reply(ci, req_id, Reply::Error(code));
                }
            }
            Request::OpenChannel {
                endpoint,
                dst,
                path,
            } => match self.owned(ci, endpoint) {
                Ok(src) => self.open_channel(ci, req_id, src, dst, path),
                Err(code) => self.reply(ci, req_id, Reply::Error(code)),
            },
            Request::CloseChannel { endpoint, channel } => {
                let r = match self.owned(ci, endpoint) {
                    Ok(src) => self.close_channel(src, channel),
                    Err(code) => Reply::Error(code),
                };
                self.reply(ci, req_id, r);
            }
            Request::CloseEndpoint { endpoint } => {
                let r = match self.owned(ci, endpoint) {
                    Ok(idx) => {
                        self.close_endpoint(idx);
                        Reply::Ok
                    }
                    Err(code) => Reply::Error(code),
                };
                self.reply(ci, req_id, r);
            }
            Request::SetAccept { endpoint, accept } => {
                let r = match self.owned(ci, endpoint) {
                    Ok(idx) => {
                        if let Some(ep) = self.eps.get_mut(idx) {
                            ep.accept = accept;
                        }
                        Reply::Ok
                    }
                    Err(code) => Reply::Error(code),
                };
                self.reply(ci, req_id, r);
            }
            Request::AttachApplet {
                endpoint,
                len,
                fuel,
                heap,
            } => {
                let r = match self.owned_or_same_user(ci, endpoint) {
                    Ok(idx) => self.attach_applet(ci, req_id, idx, fds.pop(), len, fuel, heap),
                    Err(code) => Some(Reply::Error(code)),
                };
                if let Some(r) = r {
                    self.reply(ci, req_id, r);
                }
            }
            Request::DetachApplet { endpoint } => {
                let r = match self.owned_or_same_user(ci, endpoint) {
                    Ok(idx) => {
                        // What it did this turn is published first.
                        crate::unet::datapath::flush_stats(self.applets, self.eps);
                        if self.applets.remove(idx) {
                            if let Some(ep) = self.eps.get(idx) {
                                self.counters()
                                    .set_ep(ep.slot, EndpointCounter::AppletCompiled, 0);
                            }
                            Reply::Ok
                        } else {
                            Reply::Error(ErrorCode::NoApplet)
                        }
                    }
                    Err(code) => Reply::Error(code),
                };
                self.reply(ci, req_id, r);
            }
            _ => self.reply(ci, req_id, Reply::Error(ErrorCode::BadRequest)),
        }
    }

    /// The endpoint, if client `ci` owns it.
    fn owned(&self, ci: ClientId, endpoint: u32) -> Result<usize, ErrorCode> {
        let idx = self
            .eps
            .index_of(endpoint)
            .ok_or(ErrorCode::NoSuchEndpoint)?;
        match self.eps.get(idx) {
            Some(ep) if ep.owner == ci => Ok(idx),
            Some(_) => Err(ErrorCode::NotOwner),
            None => Err(ErrorCode::NoSuchEndpoint),
        }
    }

    /// The endpoint, if client `ci` owns it or runs as the owner's user (or
    /// root): `unet applet attach` works on another process's endpoint.
    fn owned_or_same_user(&self, ci: ClientId, endpoint: u32) -> Result<usize, ErrorCode> {
        let idx = self
            .eps
            .index_of(endpoint)
            .ok_or(ErrorCode::NoSuchEndpoint)?;
        let owner = self
            .eps
            .get(idx)
            .map(|e| e.owner)
            .ok_or(ErrorCode::NoSuchEndpoint)?;
        let uid = |c: ClientId| self.clients.uid(c);
        match (uid(ci), uid(owner)) {
            _ if owner == ci => Ok(idx),
            (Some(0), _) => Ok(idx),
            (Some(a), Some(b)) if a == b && a != u32::MAX => Ok(idx),
            _ => Err(ErrorCode::NotOwner),
        }
    }

    /// U-Net's part of the stat reply: each endpoint's counter slot gets
    /// its client's counters, its open channels and the memory it holds.
    pub(crate) fn fill_endpoint_slots(&self) {
        let c = self.counters();
        for (_, ep) in self.eps.iter() {
            c.mirror_client(ep.slot, &ep.header().client_counters);
            let open = ep
                .routes
                .iter()
                .filter(|r| r.in_use() && !matches!(r, Route::Gone))
                .count();
            c.set_ep(ep.slot, EndpointCounter::ChannelsOpen, open as u64);
            let memory =
                ep.seg.len() as u64 + ep.buffer_limit() + self.conns.memory_opened_by(ep.id);
            c.set_ep(ep.slot, EndpointCounter::MemoryBytes, memory);
        }
    }

    /// Start creating an endpoint for client `ci`: checked against its
    /// process's and user's limits, its slot and id reserved, its segment
    /// made on the set-up thread. The reply comes when the segment is
    /// ready ([`UnetSetup::finish_create`]).
    fn create_endpoint(
        &mut self,
        ci: ClientId,
        req_id: u32,
        g: Geometry,
        (accept, buffer_limit): (bool, u64),
    ) -> Result<(), ErrorCode> {
        let layout = Layout::new(g).map_err(|_| ErrorCode::BadGeometry)?;
        let buffer_limit = buffer_limit_for(&g, buffer_limit)?;
        let u = self.usage(ci);
        if u.endpoints >= self.cfg.endpoints_per_client() {
            self.counters()
                .engine(EngineCounter::QuotaRefusedEndpoints, 1);
            return Err(ErrorCode::EndpointQuota);
        }
        // The virtual buffer is charged at its limit, as UDM's are.
        self.check_memory(&u, layout.segment_size.saturating_add(buffer_limit))?;
        let reserved = self.eps.reserve()?;
        self.work.start_endpoint(
            self.engine_id,
            (ci, req_id),
            layout,
            (accept, buffer_limit),
            reserved,
        );
        Ok(())
    }

    /// Finish a creation whose segment is ready: the endpoint is entered
    /// and its client gets the segment and the doorbell.
    pub(crate) fn finish_create(&mut self, p: PendingCreate, seg: io::Result<Segment>) {
        let (ci, req_id) = (p.client, p.req_id);
        let pid = self.clients.pid(ci).unwrap_or(0);
        let seg = match seg {
            Ok(seg) => seg,
            Err(_) => {
                self.eps.unreserve(p.slot);
                self.reply(ci, req_id, Reply::Error(ErrorCode::NoResources));
                return;
            }
        };
        let poller = self.poller;
        let made = self.eps.insert(
            ci,
            pid,
            (p.slot, p.id),
            p.layout,
            (p.accept, p.buffer_limit),
            seg,
            |idx, bell| poller.add_edge(bell.fd().as_raw_fd(), Token::Doorbell(idx)),
        );
        match made {
            Ok(idx) => {
                self.clients.endpoint_owned(ci, idx);
                let ep = self.eps.get(idx).expect("just entered");
                let fds = [ep.seg.fd().as_raw_fd(), ep.doorbell.fd().as_raw_fd()];
                let r = Reply::EndpointCreated { endpoint: ep.id };
                self.clients.reply(ci, req_id, r, &fds);
            }
            Err(seg) => {
                self.work.discard(seg);
                self.reply(ci, req_id, Reply::Error(ErrorCode::NoResources));
            }
        }
    }

    /// Give back the slots reserved for the creations of a client that
    /// went away (their segments are unmapped when they are ready).
    pub(crate) fn creates_forgotten(&mut self, gone: Vec<PendingCreate>) {
        for p in gone {
            self.eps.unreserve(p.slot);
        }
    }

    fn open_channel(
        &mut self,
        ci: ClientId,
        req_id: u32,
        src: usize,
        dst: EndpointAddr,
        path: PathChoice,
    ) {
        let local = match dst.host {
            None => true,
            Some(h) => self.udp_addr().is_some_and(|me| {
                me == h
                    || (h.ip().is_loopback() && me.port() == h.port() && me.ip().is_unspecified())
            }),
        };
        if !local {
            if path == PathChoice::Direct {
                return self.reply(ci, req_id, Reply::Error(ErrorCode::DirectUnavailable));
            }
            let Some(host) = dst.host else {
                return;
            };
            let Some(w) = self.remote.as_mut() else {
                return self.reply(ci, req_id, Reply::Error(ErrorCode::NoWire));
            };
            match w.open(self.eps, ci, req_id, src, host, dst.id) {
                Ok(done) => self.complete(done),
                Err(code) => self.reply(ci, req_id, Reply::Error(code)),
            }
            return;
        }
        match self.open_local(ci, src, dst.id, path) {
            Ok(r) => {
                let fds: Vec<RawFd> = match r {
                    Reply::ChannelOpened { conn_id, .. } if conn_id != 0 => self
                        .conns
                        .fd(conn_id)
                        .map(|f| f.as_raw_fd())
                        .into_iter()
                        .collect(),
                    _ => vec![],
                };
                self.clients.reply(ci, req_id, r, &fds);
            }
            Err(code) => self.reply(ci, req_id, Reply::Error(code)),
        }
    }

    /// Open a channel between two endpoints of this engine: a direct
    /// connection when both may have one, the engine path otherwise. The
    /// destination learns first; the reply for the opener comes back.
    fn open_local(
        &mut self,
        ci: ClientId,
        src: usize,
        dst_id: u32,
        path: PathChoice,
    ) -> Result<Reply, ErrorCode> {
        let di = self.eps.index_of(dst_id).ok_or(ErrorCode::NoSuchEndpoint)?;
        let d = self.eps.get(di).ok_or(ErrorCode::NoSuchEndpoint)?;
        if !d.accept {
            self.counters()
                .ep(d.slot, EndpointCounter::ChannelsRefused, 1);
            return Err(ErrorCode::Refused);
        }
        let direct = match path {
            PathChoice::Engine => false,
            PathChoice::Auto | PathChoice::Direct => {
                di != src && !self.applets.attached(src) && !self.applets.attached(di)
            }
        };
        if path == PathChoice::Direct && !direct {
            return Err(ErrorCode::DirectUnavailable);
        }
        // A direct connection is a segment of its own, charged to the
        // opener's process: beyond its quota (or its user's), Auto falls
        // back to the engine path.
        let direct = if direct {
            let size = conn_segment_size(self.cfg.conn_ring_size) as u64;
            match self.check_memory(&self.usage(ci), size) {
                Ok(()) => true,
                Err(code) if path == PathChoice::Direct => return Err(code),
                Err(_) => false,
            }
        } else {
            false
        };
        // Allocate both tags first so a failure leaves nothing behind.
        let s = self.eps.get_mut(src).ok_or(ErrorCode::NoSuchEndpoint)?;
        let cs = s.alloc_route().ok_or(ErrorCode::NoResources)?;
        s.routes[cs as usize] = Route::Opening;
        let src_id = s.id;
        let Some(cd) = self.eps.get_mut(di).and_then(|e| e.alloc_route()) else {
            self.eps.get_mut(src).expect("src").routes[cs as usize] = Route::Free;
            return Err(ErrorCode::NoResources);
        };
        let mut conn_id = 0;
        if direct {
            match self
                .conns
                .create(ci, self.cfg.conn_ring_size, src_id, dst_id)
            {
                Ok(id) => {
                    conn_id = id;
                    self.counters().engine(EngineCounter::DirectConns, 1);
                }
                Err(_) => {
                    self.eps.get_mut(src).expect("src").routes[cs as usize] = Route::Free;
                    return Err(ErrorCode::NoResources);
                }
            }
        }
        let to_dst = Peer {
            idx: di,
            id: dst_id,
            chan: cd,
        };
        let to_src = Peer {
            idx: src,
            id: src_id,
            chan: cs,
        };
        let (s_route, d_route) = if direct {
            (
                Route::Direct {
                    conn_id,
                    peer: to_dst,
                },
                Route::Direct {
                    conn_id,
                    peer: to_src,
                },
            )
        } else {
            (Route::Local(to_dst), Route::Local(to_src))
        };
        self.eps.get_mut(src).expect("src").routes[cs as usize] = s_route;
        self.eps.get_mut(di).expect("dst").routes[cd as usize] = d_route;
        self.eps.count_opened(src);
        self.eps.count_opened(di);
        // The destination learns first (its fd travels before the event that
        // tells it to collect the fd), then the opener gets its reply.
        let d_client = self.eps.get(di).expect("dst").owner;
        if direct {
            let fd = self.conns.fd(conn_id).map(|f| f.as_raw_fd());
            self.clients.reply(
                d_client,
                0,
                Reply::DirectConn {
                    endpoint: dst_id,
                    channel: cd,
                    conn_id,
                    side: 1,
                },
                &fd.into_iter().collect::<Vec<_>>(),
            );
        }
        self.eps.push_event(
            di,
            EventDesc {
                kind: EventKind::ChannelOpened as u16,
                channel: cd,
                peer_endpoint: src_id,
                arg: conn_id,
                ..Default::default()
            },
        );
        Ok(Reply::ChannelOpened {
            channel: cs,
            conn_id,
            side: 0,
        })
    }

    fn close_channel(&mut self, idx: usize, channel: u16) -> Reply {
        let Some(ep) = self.eps.get_mut(idx) else {
            return Reply::Error(ErrorCode::NoSuchEndpoint);
        };
        let Some(r) = ep.routes.get_mut(channel as usize) else {
            return Reply::Error(ErrorCode::NoSuchChannel);
        };
        if !r.in_use() {
            return Reply::Error(ErrorCode::NoSuchChannel);
        }
        let t = std::mem::replace(r, Route::Free).teardown();
        self.tear_down(t);
        Reply::Ok
    }

    /// Tell the other side of a route that it is gone.
    fn tear_down(&mut self, t: Teardown) {
        match t {
            Teardown::None => {}
            Teardown::Peer(p) => self.eps.peer_gone(p),
            Teardown::Direct { conn_id, peer } => {
                self.conns.close(conn_id);
                self.eps.peer_gone(peer);
            }
            Teardown::Remote(r) => {
                if let Some(w) = self.remote.as_mut() {
                    w.send_close(&r);
                }
            }
        }
    }

    /// Close endpoint `idx` and everything it holds; its peers are told.
    pub(crate) fn close_endpoint(&mut self, idx: usize) {
        self.applets.remove(idx);
        let Some(ep) = self.eps.remove(idx) else {
            return;
        };
        self.poller.remove(ep.doorbell.fd().as_raw_fd());
        for r in &ep.routes {
            self.tear_down(r.teardown());
        }
        self.clients.endpoint_gone(ep.owner, idx);
        // Unmapping a large segment takes a while: off the loop.
        self.work.discard(ep.seg);
        if let Some(b) = ep.backlog {
            self.work.discard((*b).into_segment());
        }
    }

    /// Forget what client `ci` had under way on U-Net's remote side and in
    /// the applet host (its remote opens, its applets being verified).
    pub(crate) fn drop_client_unet(&mut self, ci: ClientId) {
        if let Some(w) = self.remote.as_mut() {
            w.forget_client(ci);
        }
        self.applets.forget_client(ci);
    }

    /// Start attaching an applet to endpoint `idx`: the class is read from
    /// the memory file `fd` the client sent and verified on a thread of
    /// its own ([`AppletHost::start_load`]); the reply comes when that is
    /// done ([`UnetSetup::finish_loads`]). `Some(reply)` when the request is
    /// answered now (refused).
    #[allow(clippy::too_many_arguments)]
    fn attach_applet(
        &mut self,
        ci: ClientId,
        req_id: u32,
        idx: usize,
        fd: Option<OwnedFd>,
        len: u32,
        fuel: u64,
        heap: u32,
    ) -> Option<Reply> {
        let Some(fd) = fd else {
            return Some(Reply::Error(ErrorCode::BadRequest));
        };
        if len == 0 || len as usize > jive::MAX_CLASS_BYTES {
            return Some(Reply::Rejected(format!(
                "class file of {len} bytes (at most {})",
                jive::MAX_CLASS_BYTES
            )));
        }
        let ep = self.eps.get(idx)?;
        if ep.has_direct() {
            return Some(Reply::Error(ErrorCode::DirectChannelsOpen));
        }
        let endpoint = ep.id;
        let limits = match self.cfg.applet_limits(fuel, heap) {
            Ok(l) => l,
            Err(why) => return Some(Reply::Rejected(why)),
        };
        let bytes = match Segment::read_untrusted(&fd, len as usize) {
            Ok(b) if b.len() == len as usize => b,
            Ok(b) => {
                return Some(Reply::Rejected(format!(
                    "class file has {} bytes, not {len}",
                    b.len()
                )))
            }
            Err(e) => return Some(Reply::Rejected(format!("cannot read the class file: {e}"))),
        };
        match self
            .applets
            .start_load(ci, req_id, idx, endpoint, bytes, limits)
        {
            Ok(()) => None,
            Err(()) => Some(Reply::Error(ErrorCode::NoResources)),
        }
    }

    /// Finish the attaches whose class is verified: the applet's
    /// constructor runs now, on the engine's thread, and the client gets
    /// its answer.
    pub(crate) fn finish_loads(&mut self, loaded: Vec<Loaded>) {
        for l in loaded {
            let (ci, req_id) = (l.client, l.req_id);
            let r = match self.eps.get(l.idx).filter(|e| e.id == l.endpoint) {
                None => Reply::Error(ErrorCode::NoSuchEndpoint),
                Some(ep) if ep.has_direct() => Reply::Error(ErrorCode::DirectChannelsOpen),
                Some(_) => {
                    let mut dp = DataPath {
                        eps: self.eps,
                        port: self.remote.as_mut().map(|w| &mut *w.port),
                        applets: self.applets,
                    };
                    match dp.instantiate(l, self.cfg.applet_compile) {
                        Ok(()) => Reply::Ok,
                        Err(why) => Reply::Rejected(why),
                    }
                }
            };
            self.reply(ci, req_id, r);
        }
    }
}

/// The virtual buffer limit an endpoint of geometry `g` gets for the
/// `asked` bytes of its request (0: not buffered): rounded up to whole
/// pages and to at least [`unet_abi::MIN_BUFFER_LIMIT`] and room for two
/// of the largest messages the endpoint can receive (so one always fits
/// once the buffer drains); more than [`unet_abi::MAX_BUFFER_LIMIT`] is
/// refused (`BadGeometry`). The process's memory quota decides the rest.
pub(crate) fn buffer_limit_for(g: &Geometry, asked: u64) -> Result<u64, ErrorCode> {
    if asked == 0 {
        return Ok(0);
    }
    if asked > unet_abi::MAX_BUFFER_LIMIT {
        return Err(ErrorCode::BadGeometry);
    }
    let largest = (g.buffer_size as u64 * unet_abi::MAX_RX_BUFFERS as u64)
        .min(unet_abi::MAX_MESSAGE as u64)
        .max(unet_abi::INLINE_MAX as u64);
    let floor = 2 * crate::unet::backlog::record_len(largest as usize);
    let limit = asked
        .max(floor)
        .max(unet_abi::MIN_BUFFER_LIMIT)
        .next_multiple_of(unet_abi::PAGE as u64);
    Ok(limit.min(unet_abi::MAX_BUFFER_LIMIT))
}
