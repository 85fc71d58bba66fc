//! Set-up of VIA: registering memory, listening on a discriminator,
//! connecting, accepting, rejecting and closing VIs (see [`crate::vias`]).

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use unet_abi::*;
use unet_control::{ErrorCode, Reply, Request, ViParams};

use crate::endpoints::ClientId;
use crate::setup::Setup;
use crate::vias::{self, Pending, BACKLOG, CONNECT_TIMEOUT_MAX};

/// Largest region one request may register (the quota decides the rest).
const REGION_MAX: u64 = 1 << 40;

/// The ring of a VI's direct connection: large enough for two of the
/// largest messages a VI carries.
fn vi_ring(cfg_ring: u32) -> u32 {
    let need = 2 * record_span(VI_MAX_TRANSFER) as u32;
    cfg_ring.max(need.next_power_of_two())
}

impl Setup<'_> {
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
                    self.vias.regions.remove(&handle);
                    Reply::Ok
                }
                _ => Reply::Error(ErrorCode::NoSuchRegion),
            },
            Request::ViListen { tag } => match self.vias.listeners.get(&tag) {
                Some(&c) if c != ci => Reply::Error(ErrorCode::TagInUse),
                _ => {
                    self.vias.listeners.insert(tag, ci);
                    Reply::Ok
                }
            },
            Request::ViUnlisten { tag } => match self.vias.listeners.get(&tag) {
                Some(&c) if c == ci => {
                    self.vias.listeners.remove(&tag);
                    self.refuse_waiting(|p| p.tag == tag, ErrorCode::Refused);
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
                    let p = self.vias.pending.remove(&request).expect("present");
                    self.count(EngineCounter::ViRefused);
                    self.reply_to(p.connector, p.req_id, Reply::Error(ErrorCode::Refused));
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
            _ => Reply::Error(ErrorCode::BadRequest),
        };
        self.reply_to(ci, req_id, r);
    }

    fn count(&self, c: EngineCounter) {
        self.eps.counters().engine(c, 1);
    }

    fn reply_to(&self, ci: ClientId, req_id: u32, r: Reply) {
        self.server.reply(ci, req_id, r, &[]);
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
        if len == 0 || len > REGION_MAX || size < len {
            return Reply::Error(ErrorCode::BadMemory);
        }
        if let Err(code) = self.check_memory_for(ci, len) {
            return Reply::Error(code);
        }
        let handle = self.vias.add_region(ci, fd, len);
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
        if !vias::is_local(host, self.udp_addr()) {
            // VIs between engines come with VIA's reliability on the wire.
            return Err(if self.udp_addr().is_none() {
                ErrorCode::NoWire
            } else {
                ErrorCode::Unreachable
            });
        }
        let &listener = self.vias.listeners.get(&tag).ok_or(ErrorCode::NoListener)?;
        if self.vias.backlog(tag) >= BACKLOG {
            return Err(ErrorCode::NoResources);
        }
        let ring = vi_ring(self.cfg.conn_ring_size);
        self.check_memory_for(ci, conn_segment_size(ring) as u64)?;
        let wait = match timeout_ms {
            0 => CONNECT_TIMEOUT_MAX,
            ms => Duration::from_millis(ms as u64).min(CONNECT_TIMEOUT_MAX),
        };
        let request = self.vias.add_pending(Pending {
            tag,
            listener,
            connector: ci,
            req_id,
            attrs,
            deadline: Instant::now() + wait,
        });
        let pid = self.server.client(ci).map_or(0, |c| c.pid);
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
        let p = self.vias.pending.remove(&request).expect("present");
        if p.attrs.reliability != attrs.reliability {
            self.count(EngineCounter::ViRefused);
            let no = Reply::Error(ErrorCode::AttributesMismatch);
            self.reply_to(p.connector, p.req_id, no.clone());
            return Some(no);
        }
        let ring = vi_ring(self.cfg.conn_ring_size);
        let conn_id = match self.conns.create_vi(p.connector, ring) {
            Ok(id) => id,
            Err(_) => {
                let no = Reply::Error(ErrorCode::NoResources);
                self.reply_to(p.connector, p.req_id, no.clone());
                return Some(no);
            }
        };
        let a = self.vias.add_vi(p.connector, conn_id, p.attrs);
        let b = self.vias.add_vi(ci, conn_id, attrs);
        self.vias.vis.get_mut(&a).expect("a").peer = b;
        self.vias.vis.get_mut(&b).expect("b").peer = a;
        self.conns.set_ends(conn_id, a, b);
        self.count(EngineCounter::ViConnected);
        let fd = self.conns.fd(conn_id).map(|f| f.as_raw_fd());
        let fds: Vec<_> = fd.into_iter().collect();
        let to_a = Reply::ViConnected {
            vi: a,
            conn_id,
            side: 0,
        };
        self.server.reply(p.connector, p.req_id, to_a, &fds);
        let to_b = Reply::ViConnected {
            vi: b,
            conn_id,
            side: 1,
        };
        self.server.reply(ci, req_id, to_b, &fds);
        None
    }

    /// Close VI `vi`: its connection is marked closed on both sides (the
    /// peer wakes and finds it gone) and released.
    pub(crate) fn close_vi(&mut self, vi: u32) {
        let Some(v) = self.vias.vis.remove(&vi) else {
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

    /// Refuse (and forget) the waiting requests that `which` picks.
    fn refuse_waiting(&mut self, which: impl Fn(&Pending) -> bool, code: ErrorCode) {
        let ids: Vec<u32> = self
            .vias
            .pending
            .iter()
            .filter(|(_, p)| which(p))
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            if let Some(p) = self.vias.pending.remove(&id) {
                self.count(EngineCounter::ViRefused);
                self.reply_to(p.connector, p.req_id, Reply::Error(code));
            }
        }
    }

    /// Answer the requests nobody accepted in time.
    pub(crate) fn expire_requests(&mut self, now: Instant) {
        for p in self.vias.take_expired(now) {
            self.count(EngineCounter::ViRefused);
            self.reply_to(
                p.connector,
                p.req_id,
                Reply::Error(ErrorCode::NoSuchRequest),
            );
        }
    }

    /// Everything client `ci` held of VIA goes: its regions, its
    /// discriminators (requests waiting on them are refused), its requests
    /// and its VIs (their peers find them gone).
    pub(crate) fn drop_client_vias(&mut self, ci: ClientId) {
        self.vias.regions.retain(|_, r| r.owner != ci);
        self.vias.listeners.retain(|_, c| *c != ci);
        self.refuse_waiting(|p| p.listener == ci, ErrorCode::Refused);
        self.vias.pending.retain(|_, p| p.connector != ci);
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
    }
}
