//! The engine proper: one single-threaded, message-driven loop that owns
//! every endpoint of one adapter (SPINE section 3.2's dispatcher).
//!
//! Each turn polls the sources — send rings of all endpoints, the UDP wire,
//! control sockets, timers — and runs what it finds. When a turn finds
//! nothing for `idle_spin`, the engine arms every endpoint's doorbell, looks
//! once more, and sleeps in `epoll_wait` until a doorbell, a control socket,
//! a datagram or a timer wakes it. An idle engine uses no CPU.
//!
//! The turn after a delivery, nothing new found, usually polls once more
//! (a client on another CPU often answers within a microsecond, which saves
//! it ringing the doorbell, a wake-up of several). Not when the client just
//! served waits on the engine's own CPU (`client_cpu`): it cannot run, let
//! alone answer, until the engine leaves that CPU, so the engine sleeps at
//! once (a *handoff*, counted).
//!
//! A delivery that finds the receiver without room (its receive queue or
//! its free buffers exhausted) drops the message, as U-Net does. If that
//! receiver's client is awake, it is behind and needs a CPU to catch up,
//! and on a machine with few cores that is often the engine's: the engine
//! then cuts the turn short (the rest of that sender's descriptors wait in
//! its queue, the rest of the datagrams received in the wire's port or the
//! socket's buffer) and yields its CPU once (counted as `receiver_yields`).
//! Without this, a fast sender kept the engine dropping for a whole time
//! slice while the receiver waited for the CPU: over UDP, 64-byte streams
//! delivered about half as many messages. A client that claims to be awake
//! and never reads costs the engine no more than a yield per turn, which
//! returns at once when nothing else wants the CPU; every turn still does
//! its work up to the first such drop.
//!
//! Trust: everything read from an endpoint segment, a control socket or the
//! wire is hostile. Each descriptor is copied out once, then checked against
//! the engine's own copy of the endpoint's geometry and channel table. A bad
//! descriptor gets an error status and a counter on that endpoint only.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use unet_abi::ring::Ring;
use unet_abi::*;

use crate::counters::Counters;
use crate::remote::Wire;
use crate::EngineConfig;
use unet_control::{self as control, EndpointAddr, ErrorCode, PathChoice, Reply, Request};
use unet_sle::{Applet, FaultKind, SleEndpoint, MAX_CONSECUTIVE_FAULTS};
use unet_sys::{self as sys, Epoll, EventFd, Segment};

const TOK_KIND_SHIFT: u32 = 56;
const TOK_LISTENER: u64 = 1;
const TOK_CLIENT: u64 = 2;
const TOK_DOORBELL: u64 = 3;
const TOK_UDP: u64 = 4;
const TOK_ADMIN: u64 = 5;

fn token(kind: u64, idx: usize) -> u64 {
    (kind << TOK_KIND_SHIFT) | idx as u64
}

/// Send descriptors taken from one endpoint per turn (fairness).
const SEND_BUDGET: u64 = 64;

/// The same for an endpoint whose applet runs on every descriptor.
const APPLET_SEND_BUDGET: u64 = 4;
/// Most channels per endpoint.
pub const MAX_CHANNELS: usize = 4096;

/// What a channel tag of an endpoint leads to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Chan {
    /// Unused tag.
    Free,
    /// A local peer through the engine.
    Local {
        peer_idx: usize,
        peer_id: u32,
        peer_chan: u16,
    },
    /// A local peer on a direct connection (the engine still delivers
    /// descriptors pushed to its send ring, through the peer's queues).
    Direct {
        conn_id: u32,
        peer_idx: usize,
        peer_id: u32,
        peer_chan: u16,
    },
    /// A peer behind the wire.
    Remote {
        peer: SocketAddr,
        peer_ep: u32,
        peer_chan: u16,
        peer_token: u64,
        my_token: u64,
        next_msg: u32,
    },
    /// Waiting for a remote engine to accept.
    Opening,
    /// The peer is gone; sends fail until the application closes the tag.
    Gone,
}

pub(crate) struct Ep {
    pub id: u32,
    pub client: usize,
    pub seg: Segment,
    pub layout: Layout,
    pub send: Ring<SendDesc>,
    pub recv: Ring<RecvDesc>,
    pub free: Ring<u32>,
    pub events: Ring<EventDesc>,
    pub send_tail: u64,
    pub recv_head: u64,
    pub event_head: u64,
    pub bad_head: u64,
    pub doorbell: EventFd,
    pub channels: Vec<Chan>,
    pub accept: bool,
    pub spare: Vec<u32>,
    pub slot: usize,
    /// The U-Net/SLE applet, if one is attached (boxed: taken out of the
    /// endpoint while it runs).
    pub applet: Option<Box<Applet>>,
    /// The applet is not run again before this instant: after a long
    /// invocation it waits nine times as long, so one endpoint's applet
    /// gets at most a tenth of the engine (see [`unet_sle::pause_after`]).
    pub applet_pause: Option<Instant>,
}

impl Ep {
    fn header(&self) -> &EndpointHeader {
        // SAFETY: the segment starts with an EndpointHeader (we created it),
        // page aligned; its shared fields are atomics.
        unsafe { self.seg.ptr().cast::<EndpointHeader>().as_ref() }
    }
    fn area(&self) -> NonNull<u8> {
        // SAFETY: buffer_area_off + size == segment size, from Layout.
        unsafe { self.seg.ptr().add(self.layout.buffer_area_off as usize) }
    }
    fn area_size(&self) -> u64 {
        self.layout.geometry.buffer_area_size
    }
    /// A free channel tag (reusing a closed one first), or None when the
    /// endpoint holds MAX_CHANNELS.
    pub(crate) fn alloc_chan(&mut self) -> Option<u16> {
        if let Some(i) = self.channels.iter().position(|c| matches!(c, Chan::Free)) {
            return Some(i as u16);
        }
        if self.channels.len() < MAX_CHANNELS {
            self.channels.push(Chan::Free);
            return Some((self.channels.len() - 1) as u16);
        }
        None
    }
}

struct Client {
    sock: OwnedFd,
    pid: u32,
    uid: u32,
    endpoints: Vec<usize>,
}

pub(crate) struct Conn {
    pub seg: Segment,
    /// The client that opened it (its memory counts against that client's
    /// quota).
    pub owner: usize,
}

impl Conn {
    fn header(&self) -> &ConnHeader {
        // SAFETY: the segment starts with a ConnHeader we initialised.
        unsafe { self.seg.ptr().cast::<ConnHeader>().as_ref() }
    }
}

/// State shared between the engine thread and its handle.
pub(crate) struct Shared {
    pub stop: AtomicBool,
    pub admin: EventFd,
    pub new_clients: Mutex<Vec<OwnedFd>>,
}

/// The engine's state and loop.
pub struct Core {
    cfg: EngineConfig,
    pub(crate) engine_id: u64,
    epoll: Epoll,
    listener: Option<OwnedFd>,
    clients: Vec<Option<Client>>,
    pub(crate) eps: Vec<Option<Ep>>,
    pub(crate) by_id: HashMap<u32, usize>,
    next_ep_id: u32,
    conns: HashMap<u32, Conn>,
    next_conn_id: u32,
    pub(crate) counters: Counters,
    free_slots: Vec<usize>,
    pub(crate) wire: Option<Wire>,
    shared: Arc<Shared>,
    events: Vec<u64>,
    pkt: Vec<u8>,
    turn: u64,
    /// Arrivals for endpoints with applets that could not run at once
    /// (see [`Core::deliver`]), run by the loop: an applet's txPush never
    /// runs another applet inside it.
    pending_rx: VecDeque<(usize, u32, u16, Vec<u8>)>,
    /// Arrivals taken out of `pending_rx` by the pass running them (see
    /// [`Core::run_pending_rx`]): they count against [`MAX_PENDING_RX`].
    pending_rx_taken: usize,
    /// Applet timers, earliest first; equal due times in the order set.
    timers: BinaryHeap<Reverse<Timer>>,
    /// The sequence number of the next timer set (or set again).
    timer_seq: u64,
    rx_pool: Vec<Vec<u8>>,
    /// A client served in this turn waits on our CPU (see the module docs).
    handoff: bool,
    /// A delivery of this turn found an awake client without room (see
    /// the module docs): the turn ends early and the engine yields.
    pub(crate) behind: bool,
}

/// An applet timer: (due, sequence, endpoint index, endpoint id, applet id,
/// argument).
type Timer = (Instant, u64, usize, u32, u64, i32);

/// Most arrivals queued for applets before new ones are dropped.
const MAX_PENDING_RX: usize = 4096;

impl Core {
    pub(crate) fn new(cfg: EngineConfig, shared: Arc<Shared>) -> io::Result<Core> {
        let engine_id = sys::random_u64() | 1;
        let epoll = Epoll::new()?;
        let counters = Counters::create(cfg.max_endpoints, engine_id)?;
        let listener = match &cfg.control_socket {
            Some(p) => Some(sys::listen_seqpacket(p)?),
            None => None,
        };
        if let Some(l) = &listener {
            epoll.add(l.as_raw_fd(), token(TOK_LISTENER, 0))?;
        }
        epoll.add(shared.admin.fd().as_raw_fd(), token(TOK_ADMIN, 0))?;
        let wire = match cfg.udp_bind {
            Some(a) => {
                let w = Wire::bind(a, &cfg, engine_id)?;
                epoll.add(w.raw_fd(), token(TOK_UDP, 0))?;
                Some(w)
            }
            None => None,
        };
        Ok(Core {
            free_slots: (0..cfg.max_endpoints as usize).rev().collect(),
            cfg,
            engine_id,
            epoll,
            listener,
            clients: Vec::new(),
            eps: Vec::new(),
            by_id: HashMap::new(),
            next_ep_id: 1,
            conns: HashMap::new(),
            next_conn_id: 1,
            counters,
            wire,
            shared,
            events: Vec::with_capacity(64),
            pkt: vec![0; control::MAX_PACKET],
            turn: 0,
            pending_rx: VecDeque::new(),
            pending_rx_taken: 0,
            timers: BinaryHeap::new(),
            timer_seq: 0,
            rx_pool: Vec::new(),
            handoff: false,
            behind: false,
        })
    }

    /// The engine's UDP address, if it has a wire.
    pub fn udp_addr(&self) -> Option<SocketAddr> {
        self.wire.as_ref().map(|w| w.local_addr())
    }

    /// Run until stopped.
    pub(crate) fn run(&mut self) {
        let mut idle_since: Option<Instant> = None;
        while !self.shared.stop.load(Ordering::Relaxed) {
            // Set by the deliveries of the last turn only.
            let handoff = std::mem::take(&mut self.handoff);
            let mut work = self.poll_data();
            self.turn += 1;
            if work == 0 && handoff {
                self.counters.engine(EngineCounter::Handoffs, 1);
                self.sleep();
                idle_since = None;
                continue;
            }
            if work == 0 || self.turn.is_multiple_of(64) {
                work += self.poll_fds(0);
            }
            if work > 0 {
                self.counters.engine(EngineCounter::BusyPolls, 1);
                idle_since = None;
                continue;
            }
            let now = Instant::now();
            match idle_since {
                None => idle_since = Some(now),
                Some(t) if now.duration_since(t) >= self.cfg.idle_spin => {
                    self.sleep();
                    idle_since = None;
                }
                Some(_) => std::hint::spin_loop(),
            }
        }
        self.shutdown();
    }

    /// One turn of the loop without sleeping (for tests driving the engine
    /// step by step). Returns the work done.
    pub fn step(&mut self) -> usize {
        self.poll_data() + self.poll_fds(0)
    }

    fn sleep(&mut self) {
        for ep in self.eps.iter().flatten() {
            ep.header().engine_armed.store(1, Ordering::Relaxed);
        }
        // Pairs with the fence a client issues between publishing a send
        // descriptor and reading `engine_armed`: either we see its
        // descriptor below, or it sees our armed flag and rings.
        fence(Ordering::SeqCst);
        if self.poll_data() > 0 {
            self.disarm();
            return;
        }
        if let Some(w) = self.wire.as_mut() {
            w.before_sleep(&self.counters);
        }
        self.counters.engine(EngineCounter::Sleeps, 1);
        let timeout = self.next_timer_ms();
        let work = self.poll_fds(timeout);
        self.counters.engine(EngineCounter::Wakeups, 1);
        self.disarm();
        if work == 0 && self.poll_data() == 0 {
            self.counters.engine(EngineCounter::SpuriousWakeups, 1);
        }
    }

    fn disarm(&self) {
        for ep in self.eps.iter().flatten() {
            ep.header().engine_armed.store(0, Ordering::Relaxed);
        }
    }

    fn next_timer_ms(&self) -> i32 {
        let wire = self.wire.as_ref().and_then(|w| w.next_deadline());
        let applet = self.timers.peek().map(|Reverse(t)| t.0);
        let pause = self
            .eps
            .iter()
            .flatten()
            .filter_map(|e| e.applet_pause)
            .min();
        let next = [wire, applet, pause].into_iter().flatten().min();
        match next {
            Some(d) => {
                let now = Instant::now();
                if d <= now {
                    0
                } else {
                    (d - now).as_millis().min(1000) as i32 + 1
                }
            }
            None => -1,
        }
    }

    /// Poll every data source once. Returns the work done.
    fn poll_data(&mut self) -> usize {
        let mut work = 0;
        for idx in 0..self.eps.len() {
            if self.eps[idx].is_some() {
                work += self.poll_send_ring(idx);
            }
        }
        if self.wire.is_some() {
            work += crate::remote::poll_wire(self);
        }
        if !self.pending_rx.is_empty() {
            work += self.run_pending_rx();
        }
        if !self.timers.is_empty() {
            work += self.run_timers();
        }
        if std::mem::take(&mut self.behind) {
            // A receiver is behind (see the module docs).
            self.counters.engine(EngineCounter::ReceiverYields, 1);
            std::thread::yield_now();
        }
        work
    }

    /// Wait up to `timeout_ms` for file-descriptor events and handle them.
    fn poll_fds(&mut self, timeout_ms: i32) -> usize {
        let mut evs = std::mem::take(&mut self.events);
        if self.epoll.wait(&mut evs, timeout_ms).is_err() {
            self.events = evs;
            return 0;
        }
        let n = evs.len();
        for &t in &evs {
            let idx = (t & ((1 << TOK_KIND_SHIFT) - 1)) as usize;
            match t >> TOK_KIND_SHIFT {
                TOK_LISTENER => self.accept_clients(),
                TOK_CLIENT => self.read_client(idx),
                TOK_DOORBELL => {
                    // Edge-triggered: nothing to read back (the counter
                    // only grows; 2^64 doorbells are far away).
                    if let Some(Some(ep)) = self.eps.get(idx) {
                        self.counters.ep(ep.slot, EndpointCounter::Doorbells, 1);
                    }
                }
                TOK_ADMIN => {
                    self.shared.admin.drain();
                    let fresh: Vec<OwnedFd> = std::mem::take(
                        &mut *self
                            .shared
                            .new_clients
                            .lock()
                            .unwrap_or_else(|p| p.into_inner()),
                    );
                    for fd in fresh {
                        self.add_client(fd);
                    }
                }
                _ => {} // UDP: read by poll_data
            }
        }
        self.events = evs;
        n
    }

    // ---------------------------------------------------------------------
    // Clients and the control protocol
    // ---------------------------------------------------------------------

    fn accept_clients(&mut self) {
        let Some(l) = self.listener.as_ref().map(|l| l.as_raw_fd()) else {
            return;
        };
        loop {
            // SAFETY: accept4 on our listening socket; returns a new fd or -1.
            let fd = unsafe {
                libc::accept4(
                    l,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                )
            };
            if fd < 0 {
                return;
            }
            // SAFETY: fresh descriptor from accept4.
            let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
            self.add_client(fd);
        }
    }

    pub(crate) fn add_client(&mut self, sock: OwnedFd) {
        let _ = sys::set_nonblocking(sock.as_raw_fd());
        let (pid, uid) = sys::peer_cred(sock.as_raw_fd()).unwrap_or((0, u32::MAX));
        let idx = match self.clients.iter().position(|c| c.is_none()) {
            Some(i) => i,
            None => {
                self.clients.push(None);
                self.clients.len() - 1
            }
        };
        if self
            .epoll
            .add(sock.as_raw_fd(), token(TOK_CLIENT, idx))
            .is_err()
        {
            return;
        }
        self.clients[idx] = Some(Client {
            sock,
            pid,
            uid,
            endpoints: Vec::new(),
        });
        self.counters.engine(EngineCounter::ControlAccepted, 1);
    }

    fn read_client(&mut self, ci: usize) {
        let mut pkt = std::mem::take(&mut self.pkt);
        // A bounded number of packets per wake-up, so one chatty client
        // cannot starve the loop.
        for _ in 0..32 {
            let Some(c) = self.clients.get(ci).and_then(|c| c.as_ref()) else {
                break;
            };
            let mut fds = Vec::new();
            match sys::recv_packet(c.sock.as_raw_fd(), &mut pkt, &mut fds, true) {
                Ok(0) => {
                    self.drop_client(ci);
                    break;
                }
                Ok(n) => match Request::decode(&pkt[..n]) {
                    Ok((req_id, req)) => self.handle_request(ci, req_id, req, fds),
                    Err(_) => {
                        self.counters.engine(EngineCounter::ControlBad, 1);
                        self.reply(ci, 0, Reply::Error(ErrorCode::BadRequest), &[]);
                    }
                },
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    self.counters.engine(EngineCounter::ControlBad, 1);
                }
                Err(_) => {
                    self.drop_client(ci);
                    break;
                }
            }
        }
        self.pkt = pkt;
    }

    pub(crate) fn reply(&self, ci: usize, req_id: u32, r: Reply, fds: &[RawFd]) {
        if let Some(Some(c)) = self.clients.get(ci) {
            // Non-blocking: a client that does not read its control socket
            // loses its own replies, never stalls the engine.
            let _ = sys::send_packet(c.sock.as_raw_fd(), &r.encode(req_id), fds);
        }
    }

    fn handle_request(&mut self, ci: usize, req_id: u32, req: Request, mut fds: Vec<OwnedFd>) {
        match req {
            Request::Hello { version } => {
                let r = if version == control::PROTOCOL_VERSION {
                    Reply::Hello {
                        engine_id: self.engine_id,
                        udp: self.udp_addr(),
                    }
                } else {
                    Reply::Error(ErrorCode::Version)
                };
                self.reply(ci, req_id, r, &[]);
            }
            Request::CreateEndpoint { geometry, accept } => {
                match self.create_endpoint(ci, geometry, accept) {
                    Ok(idx) => {
                        let ep = self.eps[idx].as_ref().expect("just created");
                        let fds = [ep.seg.fd().as_raw_fd(), ep.doorbell.fd().as_raw_fd()];
                        self.reply(ci, req_id, Reply::EndpointCreated { endpoint: ep.id }, &fds);
                    }
                    Err(code) => self.reply(ci, req_id, Reply::Error(code), &[]),
                }
            }
            Request::OpenChannel {
                endpoint,
                dst,
                path,
            } => match self.owned(ci, endpoint) {
                Ok(src) => self.open_channel(ci, req_id, src, dst, path),
                Err(code) => self.reply(ci, req_id, Reply::Error(code), &[]),
            },
            Request::CloseChannel { endpoint, channel } => {
                let r = match self.owned(ci, endpoint) {
                    Ok(src) => self.close_channel(src, channel),
                    Err(code) => Reply::Error(code),
                };
                self.reply(ci, req_id, r, &[]);
            }
            Request::CloseEndpoint { endpoint } => {
                let r = match self.owned(ci, endpoint) {
                    Ok(idx) => {
                        self.close_endpoint(idx);
                        Reply::Ok
                    }
                    Err(code) => Reply::Error(code),
                };
                self.reply(ci, req_id, r, &[]);
            }
            Request::SetAccept { endpoint, accept } => {
                let r = match self.owned(ci, endpoint) {
                    Ok(idx) => {
                        if let Some(ep) = self.eps[idx].as_mut() {
                            ep.accept = accept;
                        }
                        Reply::Ok
                    }
                    Err(code) => Reply::Error(code),
                };
                self.reply(ci, req_id, r, &[]);
            }
            Request::Stat => {
                let allowed = self.clients[ci].as_ref().is_some_and(|c| {
                    // SAFETY: geteuid has no preconditions.
                    let me = unsafe { libc::geteuid() };
                    c.uid == 0 || c.uid == me
                });
                if allowed {
                    for ep in self.eps.iter().flatten() {
                        self.counters
                            .mirror_client(ep.slot, &ep.header().client_counters);
                    }
                    let fd = self.counters.fd();
                    self.reply(
                        ci,
                        req_id,
                        Reply::Stat {
                            max_endpoints: self.cfg.max_endpoints,
                        },
                        &[fd],
                    );
                } else {
                    self.reply(ci, req_id, Reply::Error(ErrorCode::NotOwner), &[]);
                }
            }
            Request::AttachApplet {
                endpoint,
                len,
                fuel,
                heap,
            } => {
                let r = match self.owned_or_same_user(ci, endpoint) {
                    Ok(idx) => self.attach_applet(idx, fds.pop(), len, fuel, heap),
                    Err(code) => Reply::Error(code),
                };
                self.reply(ci, req_id, r, &[]);
            }
            Request::DetachApplet { endpoint } => {
                let r = match self.owned_or_same_user(ci, endpoint) {
                    Ok(idx) => match self.eps[idx].as_mut().and_then(|e| e.applet.take()) {
                        Some(_) => {
                            self.set_applet_compiled(idx, false);
                            Reply::Ok
                        }
                        None => Reply::Error(ErrorCode::NoApplet),
                    },
                    Err(code) => Reply::Error(code),
                };
                self.reply(ci, req_id, r, &[]);
            }
        }
    }

    /// The endpoint, if client `ci` owns it or runs as the owner's user (or
    /// root): `unet applet attach` works on another process's endpoint.
    fn owned_or_same_user(&self, ci: usize, endpoint: u32) -> Result<usize, ErrorCode> {
        let idx = *self.by_id.get(&endpoint).ok_or(ErrorCode::NoSuchEndpoint)?;
        let owner = self.eps[idx]
            .as_ref()
            .map(|e| e.client)
            .ok_or(ErrorCode::NoSuchEndpoint)?;
        let uid = |c: usize| self.clients.get(c).and_then(|c| c.as_ref()).map(|c| c.uid);
        match (uid(ci), uid(owner)) {
            _ if owner == ci => Ok(idx),
            (Some(0), _) => Ok(idx),
            (Some(a), Some(b)) if a == b && a != u32::MAX => Ok(idx),
            _ => Err(ErrorCode::NotOwner),
        }
    }

    fn owned(&self, ci: usize, endpoint: u32) -> Result<usize, ErrorCode> {
        let idx = *self.by_id.get(&endpoint).ok_or(ErrorCode::NoSuchEndpoint)?;
        match &self.eps[idx] {
            Some(ep) if ep.client == ci => Ok(idx),
            Some(_) => Err(ErrorCode::NotOwner),
            None => Err(ErrorCode::NoSuchEndpoint),
        }
    }

    fn create_endpoint(
        &mut self,
        ci: usize,
        g: Geometry,
        accept: bool,
    ) -> Result<usize, ErrorCode> {
        let layout = Layout::new(g).map_err(|_| ErrorCode::BadGeometry)?;
        if !self.within_quota(ci, layout.segment_size) {
            return Err(ErrorCode::QuotaExceeded);
        }
        let slot = self.free_slots.pop().ok_or(ErrorCode::NoResources)?;
        let id = self.next_ep_id;
        let made = (|| -> io::Result<Ep> {
            let seg = Segment::create(&format!("unet-ep-{id}"), layout.segment_size as usize)?;
            init_endpoint(&seg, &layout, id, self.engine_id);
            let at = |off: u64| seg.ptr().as_ptr().wrapping_add(off as usize);
            // SAFETY: offsets come from Layout, inside the segment we just
            // created, each ring header 64-byte aligned.
            let (send, recv, free, events) = unsafe {
                (
                    Ring::from_raw(NonNull::new_unchecked(at(layout.send_off)), g.send_cap),
                    Ring::from_raw(NonNull::new_unchecked(at(layout.recv_off)), g.recv_cap),
                    Ring::from_raw(NonNull::new_unchecked(at(layout.free_off)), g.free_cap),
                    Ring::from_raw(NonNull::new_unchecked(at(layout.event_off)), g.event_cap),
                )
            };
            Ok(Ep {
                id,
                client: ci,
                seg,
                layout,
                send,
                recv,
                free,
                events,
                send_tail: 0,
                recv_head: 0,
                event_head: 0,
                bad_head: u64::MAX,
                doorbell: EventFd::new()?,
                channels: Vec::new(),
                accept,
                spare: Vec::new(),
                slot,
                applet: None,
                applet_pause: None,
            })
        })();
        let ep = match made {
            Ok(ep) => ep,
            Err(_) => {
                self.free_slots.push(slot);
                return Err(ErrorCode::NoResources);
            }
        };
        let idx = match self.eps.iter().position(|e| e.is_none()) {
            Some(i) => i,
            None => {
                self.eps.push(None);
                self.eps.len() - 1
            }
        };
        if self
            .epoll
            .add_edge(ep.doorbell.fd().as_raw_fd(), token(TOK_DOORBELL, idx))
            .is_err()
        {
            self.free_slots.push(slot);
            return Err(ErrorCode::NoResources);
        }
        let pid = self.clients[ci].as_ref().map_or(0, |c| c.pid);
        self.counters.open_slot(slot, id, pid);
        self.next_ep_id += 1;
        self.by_id.insert(id, idx);
        self.eps[idx] = Some(ep);
        if let Some(c) = self.clients[ci].as_mut() {
            c.endpoints.push(idx);
        }
        self.counters.engine(EngineCounter::EndpointsCreated, 1);
        Ok(idx)
    }

    /// Shared memory held by client `ci`: its endpoints' segments and the
    /// direct connections it opened.
    fn client_memory(&self, ci: usize) -> u64 {
        let eps = self
            .eps
            .iter()
            .flatten()
            .filter(|e| e.client == ci)
            .map(|e| e.seg.len() as u64);
        let conns = self
            .conns
            .values()
            .filter(|c| c.owner == ci)
            .map(|c| c.seg.len() as u64);
        eps.chain(conns).sum()
    }

    /// True if client `ci` may take `more` bytes of shared memory.
    fn within_quota(&self, ci: usize, more: u64) -> bool {
        self.client_memory(ci).saturating_add(more) <= self.cfg.client_memory
    }

    fn open_channel(
        &mut self,
        ci: usize,
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
                return self.reply(ci, req_id, Reply::Error(ErrorCode::DirectUnavailable), &[]);
            }
            return crate::remote::open_remote(self, ci, req_id, src, dst);
        }
        let Some(&di) = self.by_id.get(&dst.id) else {
            return self.reply(ci, req_id, Reply::Error(ErrorCode::NoSuchEndpoint), &[]);
        };
        let accepts = self.eps[di].as_ref().is_some_and(|e| e.accept);
        if !accepts {
            if let Some(d) = self.eps[di].as_ref() {
                self.counters
                    .ep(d.slot, EndpointCounter::ChannelsRefused, 1);
            }
            return self.reply(ci, req_id, Reply::Error(ErrorCode::Refused), &[]);
        }
        let has_applet = |i: usize| self.eps[i].as_ref().is_some_and(|e| e.applet.is_some());
        let direct = match path {
            PathChoice::Engine => false,
            PathChoice::Auto | PathChoice::Direct => {
                di != src && !has_applet(src) && !has_applet(di)
            }
        };
        if path == PathChoice::Direct && !direct {
            return self.reply(ci, req_id, Reply::Error(ErrorCode::DirectUnavailable), &[]);
        }
        // A direct connection is a segment of its own, charged to the
        // opener: beyond the quota, Auto falls back to the engine path.
        let direct = if direct
            && !self.within_quota(ci, conn_segment_size(self.cfg.conn_ring_size) as u64)
        {
            if path == PathChoice::Direct {
                return self.reply(ci, req_id, Reply::Error(ErrorCode::QuotaExceeded), &[]);
            }
            false
        } else {
            direct
        };
        // Allocate both tags first so a failure leaves nothing behind.
        let Some(cs) = self.eps[src].as_mut().and_then(|e| e.alloc_chan()) else {
            return self.reply(ci, req_id, Reply::Error(ErrorCode::NoResources), &[]);
        };
        self.eps[src].as_mut().expect("src").channels[cs as usize] = Chan::Opening;
        let Some(cd) = self.eps[di].as_mut().and_then(|e| e.alloc_chan()) else {
            self.eps[src].as_mut().expect("src").channels[cs as usize] = Chan::Free;
            return self.reply(ci, req_id, Reply::Error(ErrorCode::NoResources), &[]);
        };
        let src_id = self.eps[src].as_ref().expect("src").id;
        let mut conn_id = 0;
        if direct {
            let ring = self.cfg.conn_ring_size;
            let id = self.next_conn_id;
            match Segment::create(&format!("unet-conn-{id}"), conn_segment_size(ring)) {
                Ok(seg) => {
                    init_conn(&seg, id, ring, src_id, dst.id);
                    self.next_conn_id += 1;
                    conn_id = id;
                    self.conns.insert(id, Conn { seg, owner: ci });
                    self.counters.engine(EngineCounter::DirectConns, 1);
                }
                Err(_) => {
                    self.eps[src].as_mut().expect("src").channels[cs as usize] = Chan::Free;
                    return self.reply(ci, req_id, Reply::Error(ErrorCode::NoResources), &[]);
                }
            }
        }
        let (s_chan, d_chan) = if direct {
            (
                Chan::Direct {
                    conn_id,
                    peer_idx: di,
                    peer_id: dst.id,
                    peer_chan: cd,
                },
                Chan::Direct {
                    conn_id,
                    peer_idx: src,
                    peer_id: src_id,
                    peer_chan: cs,
                },
            )
        } else {
            (
                Chan::Local {
                    peer_idx: di,
                    peer_id: dst.id,
                    peer_chan: cd,
                },
                Chan::Local {
                    peer_idx: src,
                    peer_id: src_id,
                    peer_chan: cs,
                },
            )
        };
        self.eps[src].as_mut().expect("src").channels[cs as usize] = s_chan;
        self.eps[di].as_mut().expect("dst").channels[cd as usize] = d_chan;
        for i in [src, di] {
            let slot = self.eps[i].as_ref().expect("ep").slot;
            self.counters.ep(slot, EndpointCounter::ChannelsOpened, 1);
            self.counters.set_channels(
                slot,
                self.eps[i].as_ref().expect("ep").channels.len() as u32,
            );
        }
        // The destination learns first (its fd travels before the event that
        // tells it to collect the fd), then the opener gets its reply.
        let d_client = self.eps[di].as_ref().expect("dst").client;
        if direct {
            let fd = self.conns[&conn_id].seg.fd().as_raw_fd();
            self.reply(
                d_client,
                0,
                Reply::DirectConn {
                    endpoint: dst.id,
                    channel: cd,
                    conn_id,
                    side: 1,
                },
                &[fd],
            );
        }
        self.push_event(
            di,
            EventDesc {
                kind: EventKind::ChannelOpened as u16,
                channel: cd,
                peer_endpoint: src_id,
                arg: conn_id,
                ..Default::default()
            },
        );
        let fds: Vec<RawFd> = if direct {
            vec![self.conns[&conn_id].seg.fd().as_raw_fd()]
        } else {
            vec![]
        };
        self.reply(
            ci,
            req_id,
            Reply::ChannelOpened {
                channel: cs,
                conn_id,
                side: 0,
            },
            &fds,
        );
    }

    fn close_channel(&mut self, idx: usize, channel: u16) -> Reply {
        let Some(ep) = self.eps[idx].as_mut() else {
            return Reply::Error(ErrorCode::NoSuchEndpoint);
        };
        let Some(&c) = ep.channels.get(channel as usize) else {
            return Reply::Error(ErrorCode::NoSuchChannel);
        };
        if matches!(c, Chan::Free) {
            return Reply::Error(ErrorCode::NoSuchChannel);
        }
        ep.channels[channel as usize] = Chan::Free;
        self.notify_peer_gone(c);
        Reply::Ok
    }

    /// Tell the other side of a channel that it is gone.
    fn notify_peer_gone(&mut self, c: Chan) {
        match c {
            Chan::Local {
                peer_idx,
                peer_id,
                peer_chan,
            } => self.peer_gone(peer_idx, peer_id, peer_chan),
            Chan::Direct {
                conn_id,
                peer_idx,
                peer_id,
                peer_chan,
            } => {
                if let Some(conn) = self.conns.remove(&conn_id) {
                    let h = conn.header();
                    h.a_closed.store(1, Ordering::Release);
                    h.b_closed.store(1, Ordering::Release);
                    for cons in [&h.a_to_b, &h.b_to_a] {
                        cons.futex.fetch_add(1, Ordering::Release);
                        sys::futex_wake(&cons.futex, i32::MAX);
                    }
                }
                self.peer_gone(peer_idx, peer_id, peer_chan);
            }
            Chan::Remote {
                peer,
                peer_ep,
                peer_chan,
                peer_token,
                ..
            } => {
                if let Some(w) = self.wire.as_mut() {
                    w.send_close(peer, peer_ep, peer_chan, peer_token);
                }
            }
            Chan::Free | Chan::Opening | Chan::Gone => {}
        }
    }

    pub(crate) fn peer_gone(&mut self, peer_idx: usize, peer_id: u32, peer_chan: u16) {
        let Some(p) = self.eps.get_mut(peer_idx).and_then(|e| e.as_mut()) else {
            return;
        };
        if p.id != peer_id {
            return;
        }
        if let Some(ch) = p.channels.get_mut(peer_chan as usize) {
            if !matches!(ch, Chan::Free) {
                *ch = Chan::Gone;
                self.push_event(
                    peer_idx,
                    EventDesc {
                        kind: EventKind::PeerGone as u16,
                        channel: peer_chan,
                        ..Default::default()
                    },
                );
            }
        }
    }

    fn close_endpoint(&mut self, idx: usize) {
        let Some(ep) = self.eps[idx].take() else {
            return;
        };
        self.epoll.remove(ep.doorbell.fd().as_raw_fd());
        self.by_id.remove(&ep.id);
        for &c in &ep.channels {
            self.notify_peer_gone(c);
        }
        if let Some(Some(cl)) = self.clients.get_mut(ep.client) {
            cl.endpoints.retain(|&i| i != idx);
        }
        self.counters.close_slot(ep.slot);
        self.free_slots.push(ep.slot);
        self.counters.engine(EngineCounter::EndpointsReclaimed, 1);
        // Dropping `ep` unmaps the segment and closes its memory file; the
        // memory is freed once the client's mapping is gone too.
    }

    /// A client's control connection closed: the process is gone or done.
    /// Reclaim everything it held and tell its peers.
    fn drop_client(&mut self, ci: usize) {
        let Some(c) = self.clients.get_mut(ci).and_then(|c| c.take()) else {
            return;
        };
        self.epoll.remove(c.sock.as_raw_fd());
        for idx in c.endpoints {
            self.close_endpoint(idx);
        }
        crate::remote::forget_client(self, ci);
        self.counters.engine(EngineCounter::ControlClosed, 1);
    }

    fn shutdown(&mut self) {
        for ci in 0..self.clients.len() {
            self.drop_client(ci);
        }
        if let Some(p) = &self.cfg.control_socket {
            let _ = std::fs::remove_file(p);
        }
    }

    // ---------------------------------------------------------------------
    // The data path
    // ---------------------------------------------------------------------

    fn poll_send_ring(&mut self, idx: usize) -> usize {
        if self.paused(idx) {
            return 0;
        }
        let (head, tail, cap) = {
            let ep = self.eps[idx].as_ref().expect("live endpoint");
            (
                ep.send.head(),
                ep.send_tail,
                ep.layout.geometry.send_cap as u64,
            )
        };
        let avail = head.wrapping_sub(tail);
        if avail == 0 {
            return 0;
        }
        if avail > cap {
            // The client wrote an impossible head: count it once per value.
            let ep = self.eps[idx].as_mut().expect("live");
            if ep.bad_head != head {
                ep.bad_head = head;
                self.counters.ep(ep.slot, EndpointCounter::RingCorrupt, 1);
            }
            return 0;
        }
        // An endpoint with an applet gets fewer descriptors per turn: each
        // may cost a whole work budget, and the other endpoints must not wait
        // behind a long run of them.
        let budget = if self.eps[idx].as_ref().is_some_and(|e| e.applet.is_some()) {
            APPLET_SEND_BUDGET
        } else {
            SEND_BUDGET
        };
        let n = avail.min(budget);
        if avail > budget {
            let slot = self.eps[idx].as_ref().expect("live").slot;
            self.counters.ep(slot, EndpointCounter::TxDeferred, 1);
        }
        let mut done = 0;
        for pos in tail..tail + n {
            let desc = self.eps[idx].as_ref().expect("live").send.read(pos);
            let status = self.process_send(idx, desc);
            let ep = self.eps[idx].as_ref().expect("live");
            // SAFETY: slot_ptr(pos) is an in-bounds, aligned SendDesc in the
            // endpoint's mapping; writing one i32 field through a raw pointer.
            unsafe {
                std::ptr::addr_of_mut!((*ep.send.slot_ptr(pos)).status)
                    .write_volatile(status as i32);
            }
            done += 1;
            if ep.applet_pause.is_some() || self.behind {
                // Its applet just used up its share, or a receiver is
                // behind (see the module docs): the rest waits.
                break;
            }
        }
        let n = done;
        let ep = self.eps[idx].as_mut().expect("live");
        ep.send_tail = tail + n;
        ep.send.set_tail(tail + n);
        if let Some(w) = self.wire.as_mut() {
            w.flush(&self.counters);
        }
        n as usize
    }

    fn process_send(&mut self, idx: usize, d: SendDesc) -> SendStatus {
        let ep = self.eps[idx].as_ref().expect("live");
        let slot = ep.slot;
        let bad = |s: &Self, c: EndpointCounter, st: SendStatus| {
            s.counters.ep(slot, c, 1);
            st
        };
        if d.flags != 0 {
            return bad(self, EndpointCounter::TxBadFlags, SendStatus::BadFlags);
        }
        if d.len == 0 || d.len as usize > MAX_MESSAGE {
            return bad(self, EndpointCounter::TxBadLength, SendStatus::BadLength);
        }
        if d.offset as u64 + d.len as u64 > ep.area_size() {
            return bad(self, EndpointCounter::TxBadBuffer, SendStatus::BadBuffer);
        }
        let Some(&chan) = ep.channels.get(d.channel as usize) else {
            return bad(self, EndpointCounter::TxBadChannel, SendStatus::BadChannel);
        };
        if ep.applet.is_some() {
            // U-Net/SLE: the applet decides what goes out (doTx).
            return match self.run_applet(idx, |a, e| a.tx(e, d.len, d.channel, d.offset)) {
                true => SendStatus::Sent,
                false => SendStatus::AppletFault,
            };
        }
        // SAFETY: offset + len is inside the buffer area (checked above).
        let src = unsafe { ep.area().add(d.offset as usize) };
        match chan {
            Chan::Local {
                peer_idx,
                peer_id,
                peer_chan,
            }
            | Chan::Direct {
                peer_idx,
                peer_id,
                peer_chan,
                ..
            } => {
                self.counters.ep(slot, EndpointCounter::TxMsgs, 1);
                self.counters
                    .ep(slot, EndpointCounter::TxBytes, d.len as u64);
                let len = d.len as usize;
                self.deliver(peer_idx, peer_id, peer_chan, src.as_ptr(), len, true);
                SendStatus::Sent
            }
            Chan::Remote { .. } => {
                self.counters.ep(slot, EndpointCounter::TxMsgs, 1);
                self.counters
                    .ep(slot, EndpointCounter::TxBytes, d.len as u64);
                crate::remote::send_remote(self, idx, d.channel, src.as_ptr(), d.len as usize);
                SendStatus::Sent
            }
            Chan::Gone => bad(self, EndpointCounter::TxPeerGone, SendStatus::PeerGone),
            Chan::Free | Chan::Opening => {
                bad(self, EndpointCounter::TxBadChannel, SendStatus::BadChannel)
            }
        }
    }

    /// Deliver `len` bytes at `src` to endpoint `di` as arriving on its
    /// channel `chan`: inline when small, otherwise into free buffers popped
    /// from its free ring; then push the receive descriptor and wake it if it
    /// sleeps. Drops are counted on the receiver.
    ///
    /// An endpoint with an applet gets the message through its `doRx`:
    /// run at once when `may_run` (the caller is the loop's send path, not
    /// an applet and not the wire's receive path), nothing is queued before
    /// it and the applet is not paused; queued for the loop otherwise.
    ///
    /// `src` points into a live mapping held by the engine (a sender's
    /// buffer area or a wire buffer) with at least `len` readable bytes.
    pub(crate) fn deliver(
        &mut self,
        di: usize,
        dst_id: u32,
        chan: u16,
        src: *const u8,
        len: usize,
        may_run: bool,
    ) -> bool {
        let Some(dst) = self.eps.get_mut(di).and_then(|e| e.as_mut()) else {
            return false;
        };
        if dst.id != dst_id {
            return false;
        }
        let slot = dst.slot;
        if dst.applet.is_some() {
            if may_run
                && self.pending_rx.is_empty()
                && !self.paused(di)
                && self.rx_now(di, chan, src, len)
            {
                return true;
            }
            // The applet's doRx runs from the loop, not inside this call.
            if self.pending_rx.len() + self.pending_rx_taken >= MAX_PENDING_RX {
                self.counters.ep(slot, EndpointCounter::AppletRxDropped, 1);
                return false;
            }
            let mut buf = self.rx_pool.pop().unwrap_or_default();
            buf.clear();
            // SAFETY: src has len readable bytes (caller's contract).
            buf.extend_from_slice(unsafe { std::slice::from_raw_parts(src, len) });
            self.pending_rx.push_back((di, dst_id, chan, buf));
            return true;
        }
        // Ring space first, so no buffer is consumed for a message we drop.
        let cap = dst.layout.geometry.recv_cap as u64;
        if dst.recv_head.wrapping_sub(dst.recv.tail()) >= cap {
            self.behind |= client_awake(dst);
            self.counters.ep(slot, EndpointCounter::RxDropRingFull, 1);
            return false;
        }
        let mut desc = RecvDesc {
            len: len as u32,
            channel: chan,
            ..Default::default()
        };
        if len <= INLINE_MAX {
            desc.flags = RECV_INLINE;
            // SAFETY: src has len readable bytes (caller's contract); data
            // has INLINE_MAX >= len bytes.
            unsafe { std::ptr::copy(src, desc.data.as_mut_ptr(), len) };
        } else {
            let bs = dst.layout.geometry.buffer_size as usize;
            let nbufs = unet_abi::buffers_spanned(len, bs);
            if nbufs > MAX_RX_BUFFERS {
                self.counters.ep(slot, EndpointCounter::RxDropTooLarge, 1);
                return false;
            }
            let mut got = [0u32; MAX_RX_BUFFERS];
            for i in 0..nbufs {
                match pop_free(dst, &self.counters) {
                    Some(o) => got[i] = o,
                    None => {
                        dst.spare.extend_from_slice(&got[..i]);
                        self.behind |= client_awake(dst);
                        self.counters.ep(slot, EndpointCounter::RxDropNoBuffer, 1);
                        return false;
                    }
                }
            }
            let area = dst.area();
            for (i, &off) in got[..nbufs].iter().enumerate() {
                let n = bs.min(len - i * bs);
                // SAFETY: pop_free checked off + buffer_size <= area size;
                // src has len bytes. ptr::copy tolerates overlap (a client
                // may post a free buffer overlapping its own send buffer).
                unsafe { std::ptr::copy(src.add(i * bs), area.as_ptr().add(off as usize), n) };
                desc.set_offset(i, off);
            }
            desc.nbufs = nbufs as u8;
        }
        self.handoff |= publish_recv(dst, &self.counters, desc);
        true
    }

    /// Set endpoint `idx`'s `AppletCompiled` level.
    fn set_applet_compiled(&self, idx: usize, on: bool) {
        if let Some(ep) = self.eps[idx].as_ref() {
            self.counters
                .set_ep(ep.slot, EndpointCounter::AppletCompiled, on as u64);
        }
    }

    pub(crate) fn push_event(&mut self, idx: usize, ev: EventDesc) {
        let Some(ep) = self.eps.get_mut(idx).and_then(|e| e.as_mut()) else {
            return;
        };
        let cap = ep.layout.geometry.event_cap as u64;
        if ep.event_head.wrapping_sub(ep.events.tail()) >= cap {
            self.counters
                .ep(ep.slot, EndpointCounter::EventDropRingFull, 1);
            return;
        }
        ep.events.write(ep.event_head, ev);
        ep.event_head += 1;
        ep.events.set_head(ep.event_head);
        wake_client(ep, &self.counters);
    }
}

/// Pop one free buffer of `ep`: the engine's spare stash first, then the
/// shared free ring (which the client's direct path also pops, so the claim
/// is a compare-and-swap, retried a bounded number of times).
fn pop_free(ep: &mut Ep, counters: &Counters) -> Option<u32> {
    if let Some(o) = ep.spare.pop() {
        return Some(o);
    }
    let cap = ep.layout.geometry.free_cap as u64;
    let limit = ep.area_size() - ep.layout.geometry.buffer_size as u64;
    for _ in 0..8 {
        let t = ep.free.tail();
        let h = ep.free.head();
        let n = h.wrapping_sub(t);
        if n == 0 {
            return None;
        }
        if n > cap {
            counters.ep(ep.slot, EndpointCounter::RingCorrupt, 1);
            return None;
        }
        let off = ep.free.read(t);
        if ep.free.cas_tail(t) {
            if off as u64 > limit {
                counters.ep(ep.slot, EndpointCounter::FreeBadOffset, 1);
                continue;
            }
            return Some(off);
        }
    }
    None
}

/// Push a receive descriptor (the caller checked there is room), count the
/// message and wake the client if it sleeps. True if the client waits on
/// this CPU without sleeping (see [`wake_client`]).
fn publish_recv(ep: &mut Ep, counters: &Counters, desc: RecvDesc) -> bool {
    ep.recv.write(ep.recv_head, desc);
    ep.recv_head += 1;
    ep.recv.set_head(ep.recv_head);
    counters.ep(ep.slot, EndpointCounter::RxMsgs, 1);
    counters.ep(ep.slot, EndpointCounter::RxBytes, desc.len as u64);
    wake_client(ep, counters)
}

/// Whether the endpoint's client is awake (not sleeping in a wait). A
/// hint from shared memory: a wrong value only decides whether the engine
/// yields its CPU once.
fn client_awake(ep: &Ep) -> bool {
    ep.header().client_sleeping.load(Ordering::Relaxed) == 0
}

/// Wake the endpoint's client if it sleeps. The fence pairs with the one the
/// client issues between setting `client_sleeping` and re-checking its rings.
/// If it does not sleep: true if it last ran on this CPU (its `client_cpu`
/// hint, which it may set to anything: it only decides when the engine
/// sleeps).
fn wake_client(ep: &Ep, counters: &Counters) -> bool {
    fence(Ordering::SeqCst);
    let h = ep.header();
    if h.client_sleeping.load(Ordering::Relaxed) != 0 {
        h.rx_futex.fetch_add(1, Ordering::Release);
        sys::futex_wake(&h.rx_futex, i32::MAX);
        counters.ep(ep.slot, EndpointCounter::ClientWakeups, 1);
        return false;
    }
    let cpu = h.client_cpu.load(Ordering::Relaxed);
    cpu != 0 && cpu == sys::current_cpu().wrapping_add(1)
}

fn init_endpoint(seg: &Segment, l: &Layout, id: u32, engine_id: u64) {
    let g = &l.geometry;
    let base = seg.ptr().as_ptr();
    // SAFETY: the segment is fresh (zeroed), private to us until its fd is
    // sent, and at least l.segment_size bytes; we write plain fields of the
    // header and the ring headers at offsets from Layout.
    unsafe {
        let h = base as *mut EndpointHeader;
        (*h).magic = ENDPOINT_MAGIC;
        (*h).version = VERSION;
        (*h).header_size = ENDPOINT_HEADER_SIZE as u32;
        (*h).segment_size = l.segment_size;
        (*h).endpoint_id = id;
        (*h).buffer_size = g.buffer_size;
        (*h).send_cap = g.send_cap;
        (*h).recv_cap = g.recv_cap;
        (*h).free_cap = g.free_cap;
        (*h).event_cap = g.event_cap;
        (*h).send_off = l.send_off;
        (*h).recv_off = l.recv_off;
        (*h).free_off = l.free_off;
        (*h).event_off = l.event_off;
        (*h).buffer_area_off = l.buffer_area_off;
        (*h).buffer_area_size = g.buffer_area_size;
        (*h).engine_id = engine_id;
        let ring = |off: u64, cap: u32, es: usize| {
            let r: Ring<u32> = Ring::from_raw(NonNull::new_unchecked(base.add(off as usize)), cap);
            r.init(es as u32);
        };
        ring(l.send_off, g.send_cap, std::mem::size_of::<SendDesc>());
        ring(l.recv_off, g.recv_cap, std::mem::size_of::<RecvDesc>());
        ring(l.free_off, g.free_cap, 4);
        ring(l.event_off, g.event_cap, std::mem::size_of::<EventDesc>());
    }
}

fn init_conn(seg: &Segment, id: u32, ring: u32, a: u32, b: u32) {
    // SAFETY: fresh zeroed segment of conn_segment_size(ring) bytes, not yet
    // shared; plain field writes.
    unsafe {
        let h = seg.ptr().as_ptr() as *mut ConnHeader;
        (*h).magic = CONN_MAGIC;
        (*h).version = VERSION;
        (*h).ring_size = ring;
        (*h).conn_id = id;
        (*h).a_endpoint = a;
        (*h).b_endpoint = b;
    }
}

impl Core {
    /// Time budget check used by the idle loop (exposed for tests).
    pub fn idle_spin(&self) -> Duration {
        self.cfg.idle_spin
    }
}

// -------------------------------------------------------------------------
// U-Net/SLE applets in the engine
// -------------------------------------------------------------------------

/// One endpoint of the engine, as its applet's natives see it.
struct EngineEp<'a> {
    core: &'a mut Core,
    idx: usize,
    epoch: Instant,
    applet_id: u64,
}

impl EngineEp<'_> {
    fn ep(&self) -> &Ep {
        self.core.eps[self.idx]
            .as_ref()
            .expect("the running applet's endpoint is live")
    }
    fn ep_mut(&mut self) -> &mut Ep {
        self.core.eps[self.idx]
            .as_mut()
            .expect("the running applet's endpoint is live")
    }
}

impl SleEndpoint for EngineEp<'_> {
    fn area_size(&self) -> u64 {
        self.ep().area_size()
    }
    fn area(&mut self) -> NonNull<u8> {
        self.ep().area()
    }
    fn buffer_size(&self) -> u32 {
        self.ep().layout.geometry.buffer_size
    }
    fn pop_free(&mut self) -> Option<u32> {
        let counters = &self.core.counters;
        let ep = self.core.eps[self.idx].as_mut().expect("live");
        pop_free(ep, counters)
    }
    fn push_free(&mut self, off: u32) -> bool {
        // The free ring has one producer, the client: buffers the applet
        // gives back go to the engine's stash, which is popped first.
        let ep = self.ep_mut();
        if ep.spare.len() >= ep.layout.geometry.free_cap as usize {
            return false;
        }
        ep.spare.push(off);
        true
    }
    fn tx_push(&mut self, chan: u16, data: &[u8]) -> Result<(), String> {
        self.core.transmit(self.idx, chan, data)
    }
    fn try_tx_push(&mut self, chan: u16, data: &[u8]) -> bool {
        self.core.transmit_held(self.idx, chan, data)
    }
    fn push_recv(&mut self, desc: RecvDesc) -> bool {
        let counters = &self.core.counters;
        let ep = self.core.eps[self.idx].as_mut().expect("live");
        let cap = ep.layout.geometry.recv_cap as u64;
        if ep.recv_head.wrapping_sub(ep.recv.tail()) >= cap {
            counters.ep(ep.slot, EndpointCounter::RxDropRingFull, 1);
            if desc.flags & RECV_INLINE == 0 {
                // The buffers the dropped descriptor named are not lost.
                for i in 0..(desc.nbufs as usize).min(MAX_RX_BUFFERS) {
                    ep.spare.push(desc.offset(i));
                }
            }
            return false;
        }
        self.core.handoff |= publish_recv(ep, counters, desc);
        true
    }
    fn now_us(&self) -> i32 {
        unet_sle::now_us_since(self.epoch)
    }
    fn set_timer(&mut self, delay_us: u32, arg: i32) -> Result<(), String> {
        if self.core.timers.len() >= 65536 {
            return Err("too many timers".into());
        }
        let id = self.ep().id;
        let due = Instant::now() + Duration::from_micros(delay_us as u64);
        let seq = self.core.timer_seq;
        self.core.timer_seq += 1;
        self.core
            .timers
            .push(Reverse((due, seq, self.idx, id, self.applet_id, arg)));
        Ok(())
    }
}

impl Core {
    /// True while endpoint `idx`'s applet waits out its pause (see
    /// [`unet_sle::pause_after`]); clears the pause once it is over.
    fn paused(&mut self, idx: usize) -> bool {
        let Some(ep) = self.eps.get_mut(idx).and_then(|e| e.as_mut()) else {
            return false;
        };
        match ep.applet_pause {
            Some(t) if ep.applet.is_some() && Instant::now() < t => true,
            Some(_) => {
                ep.applet_pause = None;
                false
            }
            None => false,
        }
    }

    /// Run endpoint `idx`'s `doRx` on `len` bytes at `src`, copied once,
    /// straight into its `RxBuf`. False (nothing done) if `RxBuf` cannot
    /// be made large enough: the caller queues the message, and the
    /// queued run reports the fault.
    ///
    /// `src` has `len` readable bytes (as for [`Core::deliver`]).
    fn rx_now(&mut self, idx: usize, chan: u16, src: *const u8, len: usize) -> bool {
        let Some(applet) = self.eps[idx].as_mut().and_then(|e| e.applet.as_mut()) else {
            return false;
        };
        let Ok(buf) = applet.rx_buffer(len) else {
            return false;
        };
        // SAFETY: src has len readable bytes (caller's contract) in a
        // mapping the engine holds; buf is the applet's own array of at
        // least len bytes, so the two do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src, buf.as_mut_ptr(), len) };
        self.run_applet(idx, |a, e| a.rx_in_place(e, len, chan));
        true
    }

    /// Send `data` from endpoint `idx` on its channel `chan` (an applet's
    /// txPush).
    fn transmit(&mut self, idx: usize, chan: u16, data: &[u8]) -> Result<(), String> {
        if self.transmit_held(idx, chan, data) {
            return Ok(());
        }
        let held = self.eps[idx]
            .as_ref()
            .and_then(|ep| ep.channels.get(chan as usize).copied());
        Err(match held {
            Some(Chan::Gone) => format!("the peer of channel {chan} is gone"),
            _ => format!("channel {chan} is not held by this endpoint"),
        })
    }

    /// [`Core::transmit`] if endpoint `idx` holds `chan`; false, having
    /// done nothing, if not.
    fn transmit_held(&mut self, idx: usize, chan: u16, data: &[u8]) -> bool {
        let Some(ep) = self.eps[idx].as_ref() else {
            return false;
        };
        let slot = ep.slot;
        let Some(&c) = ep.channels.get(chan as usize) else {
            return false;
        };
        match c {
            Chan::Local {
                peer_idx,
                peer_id,
                peer_chan,
            }
            | Chan::Direct {
                peer_idx,
                peer_id,
                peer_chan,
                ..
            } => {
                self.counters.ep(slot, EndpointCounter::TxMsgs, 1);
                self.counters
                    .ep(slot, EndpointCounter::TxBytes, data.len() as u64);
                // Inside an applet's txPush: the receiver's doRx is queued.
                self.deliver(
                    peer_idx,
                    peer_id,
                    peer_chan,
                    data.as_ptr(),
                    data.len(),
                    false,
                );
                true
            }
            Chan::Remote { .. } => {
                self.counters.ep(slot, EndpointCounter::TxMsgs, 1);
                self.counters
                    .ep(slot, EndpointCounter::TxBytes, data.len() as u64);
                crate::remote::send_remote(self, idx, chan, data.as_ptr(), data.len());
                true
            }
            Chan::Gone | Chan::Free | Chan::Opening => false,
        }
    }

    /// Run one invocation of endpoint `idx`'s applet. Returns false on a
    /// fault (counted, reported to the owner; the applet is detached after
    /// [`MAX_CONSECUTIVE_FAULTS`] in a row).
    fn run_applet(
        &mut self,
        idx: usize,
        f: impl FnOnce(&mut Applet, &mut dyn SleEndpoint) -> Result<(), jive::Fault>,
    ) -> bool {
        let Some(mut applet) = self.eps[idx].as_mut().and_then(|e| e.applet.take()) else {
            return false;
        };
        let before = applet.stats;
        let epoch = applet.epoch();
        let r = {
            let mut e = EngineEp {
                core: self,
                idx,
                epoch,
                applet_id: applet.id,
            };
            f(&mut applet, &mut e)
        };
        let Some(ep) = self.eps[idx].as_mut() else {
            return r.is_ok();
        };
        let spent = Duration::from_nanos(applet.stats.total_ns - before.total_ns);
        if let Some(p) = unet_sle::pause_after(spent, applet.stats.fuel - before.fuel) {
            ep.applet_pause = Some(Instant::now() + p);
        }
        let slot = ep.slot;
        let c = &self.counters;
        if let Some(sl) = c.slot(slot) {
            // One slot lookup, then plain adds: this runs after every
            // invocation. (One writer per counter: load + store.)
            let s = applet.stats;
            let add = |k: EndpointCounter, n: u64| {
                let a = &sl.counters[k as usize];
                a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
            };
            let get = |k: EndpointCounter| sl.counters[k as usize].load(Ordering::Relaxed);
            add(EndpointCounter::AppletTxCalls, s.tx_calls - before.tx_calls);
            add(EndpointCounter::AppletRxCalls, s.rx_calls - before.rx_calls);
            add(
                EndpointCounter::AppletTimerCalls,
                s.timer_calls - before.timer_calls,
            );
            add(EndpointCounter::AppletTimeNs, s.total_ns - before.total_ns);
            add(EndpointCounter::AppletFuel, s.fuel - before.fuel);
            let max = get(EndpointCounter::AppletMaxNs);
            if s.max_ns > max {
                add(EndpointCounter::AppletMaxNs, s.max_ns - max);
            }
            let compiled = &sl.counters[EndpointCounter::AppletCompiled as usize];
            compiled.store(applet.is_compiled() as u64, Ordering::Relaxed);
        }
        match r {
            Ok(()) => {
                ep.applet = Some(applet);
                true
            }
            Err(fault) => {
                let kind = FaultKind::of(&fault);
                let counter = match kind {
                    FaultKind::Fuel => EndpointCounter::AppletFaultFuel,
                    FaultKind::Memory => EndpointCounter::AppletFaultMemory,
                    FaultKind::Arith => EndpointCounter::AppletFaultArith,
                    FaultKind::Depth => EndpointCounter::AppletFaultDepth,
                    FaultKind::Heap => EndpointCounter::AppletFaultHeap,
                    FaultKind::Native => EndpointCounter::AppletFaultNative,
                    FaultKind::Other => EndpointCounter::AppletFaultOther,
                };
                c.ep(slot, counter, 1);
                let detach = applet.consecutive_faults >= MAX_CONSECUTIVE_FAULTS;
                let kind_ev = if detach {
                    EventKind::AppletDetached
                } else {
                    EventKind::AppletFault
                };
                if detach {
                    c.ep(slot, EndpointCounter::AppletDetached, 1);
                    c.set_ep(slot, EndpointCounter::AppletCompiled, 0);
                } else {
                    ep.applet = Some(applet);
                }
                self.push_event(
                    idx,
                    EventDesc {
                        kind: kind_ev as u16,
                        arg: kind as u32,
                        ..Default::default()
                    },
                );
                false
            }
        }
    }

    fn run_pending_rx(&mut self) -> usize {
        // The queue is taken for the pass: nothing run from here delivers
        // with `may_run` (only the send path does), so `deliver` cannot
        // mistake the empty field for "nothing queued".
        let mut queue = std::mem::take(&mut self.pending_rx);
        self.pending_rx_taken = queue.len();
        // Bounded per turn; arrivals queued by these runs wait for the next.
        let n = pass_in_order(
            &mut queue,
            256,
            |e| e.0,
            |(idx, id, chan, buf)| {
                let live = self
                    .eps
                    .get(idx)
                    .and_then(|e| e.as_ref())
                    .is_some_and(|e| e.id == id);
                if live && self.paused(idx) {
                    return Some((idx, id, chan, buf));
                }
                if live {
                    if self.eps[idx].as_ref().is_some_and(|e| e.applet.is_some()) {
                        self.run_applet(idx, |a, e| a.rx(e, &buf, chan));
                    } else {
                        // Detached meanwhile: plain U-Net delivery.
                        self.deliver(idx, id, chan, buf.as_ptr(), buf.len(), false);
                    }
                }
                if self.rx_pool.len() < 64 {
                    self.rx_pool.push(buf);
                }
                None
            },
        );
        // What the runs queued goes behind what still waits.
        queue.append(&mut self.pending_rx);
        self.pending_rx = queue;
        self.pending_rx_taken = 0;
        if let Some(w) = self.wire.as_mut() {
            w.flush(&self.counters);
        }
        n
    }

    fn run_timers(&mut self) -> usize {
        let now = Instant::now();
        let mut n = 0;
        // Endpoints found paused in this pass, and until when: their later
        // timers wait too, even if the pause ends during the pass (or they
        // would run before the earlier ones set again).
        let mut held: Vec<(usize, Instant)> = Vec::new();
        while let Some(Reverse((due, _, idx, id, applet_id, arg))) = self.timers.peek().copied() {
            if due > now || n >= 256 {
                break;
            }
            self.timers.pop();
            let live = self.eps.get(idx).and_then(|e| e.as_ref()).is_some_and(|e| {
                e.id == id && e.applet.as_ref().is_some_and(|a| a.id == applet_id)
            });
            if live {
                let until = match held.iter().find(|h| h.0 == idx) {
                    Some(&(_, t)) => Some(t),
                    None if self.paused(idx) => {
                        let t = self.eps[idx]
                            .as_ref()
                            .and_then(|e| e.applet_pause)
                            .unwrap_or(now);
                        held.push((idx, t));
                        Some(t)
                    }
                    None => None,
                };
                if let Some(until) = until {
                    // Set again in the order they fall due: all wait until
                    // the same instant, and go on in that order.
                    let seq = self.timer_seq;
                    self.timer_seq += 1;
                    self.timers
                        .push(Reverse((until, seq, idx, id, applet_id, arg)));
                    continue;
                }
                self.run_applet(idx, |a, e| a.timer(e, arg));
            }
            n += 1;
        }
        if n > 0 {
            if let Some(w) = self.wire.as_mut() {
                w.flush(&self.counters);
            }
        }
        n
    }

    fn attach_applet(
        &mut self,
        idx: usize,
        fd: Option<OwnedFd>,
        len: u32,
        fuel: u64,
        heap: u32,
    ) -> Reply {
        let Some(fd) = fd else {
            return Reply::Error(ErrorCode::BadRequest);
        };
        if len == 0 || len as usize > jive::MAX_CLASS_BYTES {
            return Reply::Rejected(format!(
                "class file of {len} bytes (at most {})",
                jive::MAX_CLASS_BYTES
            ));
        }
        let has_direct = self.eps[idx]
            .as_ref()
            .is_some_and(|e| e.channels.iter().any(|c| matches!(c, Chan::Direct { .. })));
        if has_direct {
            return Reply::Error(ErrorCode::DirectChannelsOpen);
        }
        let bytes = match Segment::read_untrusted(&fd, len as usize) {
            Ok(b) if b.len() == len as usize => b,
            Ok(b) => {
                return Reply::Rejected(format!("class file has {} bytes, not {len}", b.len()))
            }
            Err(e) => return Reply::Rejected(format!("cannot read the class file: {e}")),
        };
        let mut limits = unet_sle::default_limits();
        if fuel != 0 {
            limits.fuel = fuel;
        }
        if heap != 0 {
            limits.heap_quota = heap as usize;
        }
        let t0 = Instant::now();
        let loaded = {
            let mut e = EngineEp {
                core: self,
                idx,
                epoch: t0,
                applet_id: 0,
            };
            Applet::load(&bytes, limits, &mut e)
        };
        match loaded {
            Ok(mut a) => {
                a.set_time_sampling(unet_sle::ENGINE_TIME_SAMPLE, unet_sle::ENGINE_EXACT_FUEL);
                if let Some(ep) = self.eps[idx].as_mut() {
                    // Loading and verifying is applet work too: it counts
                    // against the endpoint's share like an invocation.
                    if let Some(p) = unet_sle::pause_after_load(t0.elapsed()) {
                        ep.applet_pause = Some(Instant::now() + p);
                    }
                    ep.applet = Some(Box::new(a));
                    self.counters
                        .ep(ep.slot, EndpointCounter::AppletAttached, 1);
                }
                // The new applet starts interpreted.
                self.set_applet_compiled(idx, false);
                Reply::Ok
            }
            Err(e) => Reply::Rejected(e.to_string()),
        }
    }
}

/// One pass over a queue of work for several owners (`key`), in order:
/// `step` runs an entry (`None`) or hands it back because its owner is held
/// back (`Some`). At most `budget` entries run. Once an owner is held back
/// in a pass, the rest of its entries are not offered to `step` in that
/// pass, so a pause that ends during the pass cannot let a later entry
/// overtake an earlier one; entries handed back keep their order, ahead of
/// those the pass did not reach. Returns the entries run.
fn pass_in_order<T>(
    queue: &mut VecDeque<T>,
    budget: usize,
    key: impl Fn(&T) -> usize,
    mut step: impl FnMut(T) -> Option<T>,
) -> usize {
    let mut held: Vec<usize> = Vec::new();
    let mut kept = VecDeque::new();
    let mut ran = 0;
    for _ in 0..queue.len() {
        if ran == budget {
            break;
        }
        let Some(e) = queue.pop_front() else {
            break;
        };
        let k = key(&e);
        if held.contains(&k) {
            kept.push_back(e);
            continue;
        }
        match step(e) {
            None => ran += 1,
            Some(e) => {
                held.push(k);
                kept.push_back(e);
            }
        }
    }
    while let Some(e) = kept.pop_back() {
        queue.push_front(e);
    }
    ran
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pass that holds nothing back: what it ran, in order.
    fn run_all(q: &mut VecDeque<(usize, u32)>) -> Vec<(usize, u32)> {
        let mut ran = Vec::new();
        pass_in_order(
            q,
            256,
            |e| e.0,
            |e| {
                ran.push(e);
                None
            },
        );
        ran
    }

    /// Owner 1 is held back when the pass reaches its first entry and its
    /// pause ends right after: its later entries still wait, in order.
    #[test]
    fn a_pause_ending_during_a_pass_keeps_the_order() {
        let mut q: VecDeque<(usize, u32)> = [(1, 0), (2, 0), (1, 1), (1, 2), (2, 1), (1, 3)]
            .into_iter()
            .collect();
        let mut asked = 0;
        let mut ran = Vec::new();
        let n = pass_in_order(
            &mut q,
            256,
            |e| e.0,
            |e| {
                if e.0 == 1 {
                    asked += 1;
                    if asked == 1 {
                        return Some(e);
                    }
                }
                ran.push(e);
                None
            },
        );
        assert_eq!(n, 2);
        assert_eq!(asked, 1, "a held owner is asked once per pass");
        assert_eq!(ran, [(2, 0), (2, 1)]);
        assert_eq!(q, [(1, 0), (1, 1), (1, 2), (1, 3)]);
        // The next pass, the pause over: all of owner 1's, in order.
        assert_eq!(run_all(&mut q), [(1, 0), (1, 1), (1, 2), (1, 3)]);
        assert!(q.is_empty());
    }

    /// Random owners, arrivals between passes, budgets and pauses that
    /// start and end at any entry: every entry runs exactly once, and each
    /// owner's in the order they came.
    #[test]
    fn random_pauses_never_reorder_or_lose_an_owners_entries() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut q: VecDeque<(usize, u32)> = VecDeque::new();
        let mut next = [0u32; 4];
        let mut ran: Vec<(usize, u32)> = Vec::new();
        for pass in 0..2_000 {
            for _ in 0..rnd(6) {
                let o = rnd(4) as usize;
                q.push_back((o, next[o]));
                next[o] += 1;
            }
            // The last passes hold nothing back, so the queue drains.
            let quiet = pass >= 1_990;
            let budget = 1 + rnd(8) as usize;
            let mut coin = rnd(1 << 20);
            pass_in_order(
                &mut q,
                budget,
                |e| e.0,
                |e| {
                    coin = coin.rotate_left(7) ^ 0x5bd1_e995;
                    if !quiet && coin % 3 == 0 {
                        return Some(e);
                    }
                    ran.push(e);
                    None
                },
            );
        }
        while !q.is_empty() {
            ran.extend(run_all(&mut q));
        }
        let total: u32 = next.iter().sum();
        assert_eq!(ran.len(), total as usize, "every entry runs once");
        let mut seen = [0u32; 4];
        for (o, k) in ran {
            assert_eq!(k, seen[o], "owner {o} out of order");
            seen[o] += 1;
        }
    }

    /// A pass that stops at its budget leaves the entries it handed back
    /// ahead of those it did not reach.
    #[test]
    fn a_pass_cut_by_its_budget_keeps_the_order() {
        let mut q: VecDeque<(usize, u32)> = (0..10u32).map(|i| (i as usize % 2, i)).collect();
        let mut ran = Vec::new();
        let n = pass_in_order(
            &mut q,
            3,
            |e| e.0,
            |e| {
                if e.0 == 0 {
                    return Some(e);
                }
                ran.push(e.1);
                None
            },
        );
        assert_eq!(n, 3);
        assert_eq!(ran, [1, 3, 5]);
        let rest: Vec<u32> = q.iter().map(|e| e.1).collect();
        assert_eq!(rest, [0, 2, 4, 6, 7, 8, 9]);
    }
}
