//! Invoker mode: an engine driven on the caller's thread (Aeron's
//! `ThreadingMode.INVOKER`).
//!
//! A [`Dispatcher`] runs nothing by itself: [`Dispatcher::step`] runs one
//! turn of the engine's loop (the same turns its own thread runs). A
//! [`LocalClient`] asks it for set-up through the real control protocol
//! and steps it until the answer comes; a [`RawEndpoint`] is the endpoint
//! segment the engine handed back, its rings driven by hand. For VIA, a
//! [`RawRegion`] is a memory region the client registered and a [`RawVi`]
//! the segment of a VI the engine carries to another engine (made by
//! [`connect_vis`] between two engines stepped together), its queues
//! driven by hand. Tests, fuzz targets and benchmarks use them to run the
//! engine's real per-message code deterministically, on one thread.
//!
//! ```
//! use unet_engine::invoker::LocalClient;
//! use unet_engine::{Dispatcher, EngineConfig, PathChoice};
//! use unet_abi::{Geometry, SendDesc};
//!
//! let mut engine = Dispatcher::new(EngineConfig::default())?;
//! let mut client = LocalClient::new(&mut engine)?;
//! let mut a = client.create_endpoint(&mut engine, Geometry::default())?;
//! let mut b = client.create_endpoint(&mut engine, Geometry::default())?;
//! let ch = client.open_channel(&mut engine, a.id(), b.id(), PathChoice::Engine)?;
//! a.write_area(0, b"hello");
//! a.push_send(SendDesc { offset: 0, len: 5, channel: ch, ..Default::default() });
//! while engine.step() > 0 {}
//! let d = b.pop_recv().expect("delivered");
//! assert_eq!(&d.data[..5], b"hello");
//! # Ok::<(), unet_engine::invoker::InvokerError>(())
//! ```
//!
//! `unsafe` is allowed here: a raw endpoint, region or VI is a segment
//! mapped from the engine's reply and driven by hand, as a client library
//! would (views over the mapping, bytes copied in and out of it).

#![allow(unsafe_code)]

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use unet_abi::ring::Ring;
use unet_abi::view::{EndpointView, ViView};
use unet_abi::*;
use unet_control::{
    self as control, EndpointAddr, ErrorCode, PathChoice, Reply, Request, ViParams,
};
use unet_sys::{self as sys, EventFd, Segment};

use crate::dispatch::dispatcher::Dispatcher;

/// Why a set-up request of a [`LocalClient`] failed.
#[derive(Debug)]
pub enum InvokerError {
    /// A system call failed (or the engine did not answer in time).
    Io(io::Error),
    /// The engine refused.
    Engine(ErrorCode),
    /// The engine refused an applet; the text says why.
    Rejected(String),
    /// The answer made no sense.
    Protocol(String),
}

impl fmt::Display for InvokerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvokerError::Io(e) => write!(f, "{e}"),
            InvokerError::Engine(c) => write!(f, "the engine refused: {c}"),
            InvokerError::Rejected(s) => write!(f, "applet {s}"),
            InvokerError::Protocol(s) => write!(f, "control protocol error: {s}"),
        }
    }
}

impl std::error::Error for InvokerError {}

impl From<io::Error> for InvokerError {
    fn from(e: io::Error) -> Self {
        InvokerError::Io(e)
    }
}

fn unexpected(what: &str, r: Reply) -> InvokerError {
    match r {
        Reply::Error(c) => InvokerError::Engine(c),
        Reply::Rejected(s) => InvokerError::Rejected(s),
        r => InvokerError::Protocol(format!("unexpected answer to {what}: {r:?}")),
    }
}

/// A client of a [`Dispatcher`] on the thread that steps it: its control
/// socket, and the notices the engine sent it.
pub struct LocalClient {
    sock: OwnedFd,
    next_req: u32,
    /// Notices (replies with request id 0, such as a direct connection's
    /// segment for the accepting side) received while waiting for replies.
    pub notices: Vec<(Reply, Vec<OwnedFd>)>,
}

impl LocalClient {
    /// A new client of `engine`.
    pub fn new(engine: &mut Dispatcher) -> io::Result<LocalClient> {
        Ok(LocalClient {
            sock: engine.connect()?,
            next_req: 0,
            notices: Vec::new(),
        })
    }

    /// Send `req` (with descriptors `fds`) and step `engine` until its
    /// reply comes: set-up through the real control path, on the caller's
    /// thread. Notices that arrive meanwhile are kept in
    /// [`LocalClient::notices`]. Fails with `TimedOut` if no reply comes
    /// within five seconds of steps.
    pub fn call(
        &mut self,
        engine: &mut Dispatcher,
        req: &Request,
        fds: &[RawFd],
    ) -> io::Result<(Reply, Vec<OwnedFd>)> {
        self.call_while(engine, req, fds, || {})
    }

    /// [`LocalClient::call`], running `between` after each step of
    /// `engine`: where the answer needs another engine to move too (a
    /// remote open), `between` steps it.
    pub fn call_while(
        &mut self,
        engine: &mut Dispatcher,
        req: &Request,
        fds: &[RawFd],
        mut between: impl FnMut(),
    ) -> io::Result<(Reply, Vec<OwnedFd>)> {
        self.next_req = self.next_req.wrapping_add(1).max(1);
        let id = self.next_req;
        sys::send_packet(self.sock.as_raw_fd(), &req.encode(id), fds)?;
        let start = Instant::now();
        let mut buf = vec![0u8; control::MAX_PACKET];
        loop {
            engine.step();
            between();
            loop {
                let mut got = Vec::new();
                match sys::recv_packet(self.sock.as_raw_fd(), &mut buf, &mut got, true) {
                    Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                    Ok(n) => {
                        let (rid, rep) = Reply::decode(&buf[..n])
                            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                        if rid == id {
                            return Ok((rep, got));
                        }
                        self.notices.push((rep, got));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
            if start.elapsed() > Duration::from_secs(5) {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the engine did not answer the request",
                ));
            }
        }
    }

    /// Create an endpoint that accepts channels.
    pub fn create_endpoint(
        &mut self,
        engine: &mut Dispatcher,
        geometry: Geometry,
    ) -> Result<RawEndpoint, InvokerError> {
        self.create_endpoint_buffered(engine, geometry, 0)
    }

    /// Create an endpoint that accepts channels, buffered with a virtual
    /// buffer of `buffer_limit` bytes (0: not buffered, U-Net's drop).
    pub fn create_endpoint_buffered(
        &mut self,
        engine: &mut Dispatcher,
        geometry: Geometry,
        buffer_limit: u64,
    ) -> Result<RawEndpoint, InvokerError> {
        let req = Request::CreateEndpoint {
            geometry,
            accept: true,
            buffer_limit,
        };
        match self.call(engine, &req, &[])? {
            (Reply::EndpointCreated { endpoint }, fds) if fds.len() == 2 => {
                let mut fds = fds.into_iter();
                let (seg, bell) = (fds.next(), fds.next());
                match (seg, bell) {
                    (Some(seg), Some(bell)) => RawEndpoint::open(endpoint, geometry, seg, bell),
                    _ => Err(InvokerError::Protocol(
                        "create: two descriptors expected".into(),
                    )),
                }
            }
            (r, _) => Err(unexpected("create", r)),
        }
    }

    /// Open a channel from endpoint `src` to local endpoint `dst` over
    /// `path`; returns `src`'s tag for it. (A direct connection's segment
    /// comes back with the reply and is dropped here: the engine path
    /// still works on such a channel, through the peer's queues.)
    pub fn open_channel(
        &mut self,
        engine: &mut Dispatcher,
        src: u32,
        dst: u32,
        path: PathChoice,
    ) -> Result<u16, InvokerError> {
        self.open_channel_to(engine, src, EndpointAddr::local(dst), path)
    }

    /// [`LocalClient::open_channel`] to any address (a remote one is
    /// answered once the peer engine has answered, while this steps).
    pub fn open_channel_to(
        &mut self,
        engine: &mut Dispatcher,
        src: u32,
        dst: EndpointAddr,
        path: PathChoice,
    ) -> Result<u16, InvokerError> {
        let req = Request::OpenChannel {
            endpoint: src,
            dst,
            path,
        };
        match self.call(engine, &req, &[])? {
            (Reply::ChannelOpened { channel, .. }, _) => Ok(channel),
            (r, _) => Err(unexpected("open", r)),
        }
    }

    /// Attach an applet (a class file) to endpoint `ep`, run in the engine
    /// (fuel and heap 0: the defaults). Returns once the engine has
    /// verified it and run its constructor.
    pub fn attach_applet(
        &mut self,
        engine: &mut Dispatcher,
        ep: u32,
        class: &[u8],
        fuel: u64,
        heap: u32,
    ) -> Result<(), InvokerError> {
        let seg = Segment::create("unet-applet", class.len().max(1))?;
        // SAFETY: the fresh segment has at least class.len() bytes and
        // nobody else maps it yet.
        unsafe { std::ptr::copy_nonoverlapping(class.as_ptr(), seg.ptr().as_ptr(), class.len()) };
        let req = Request::AttachApplet {
            endpoint: ep,
            len: class.len() as u32,
            fuel,
            heap,
        };
        match self.call(engine, &req, &[seg.fd().as_raw_fd()])? {
            (Reply::Ok, _) => Ok(()),
            (r, _) => Err(unexpected("attach", r)),
        }
    }

    /// Detach endpoint `ep`'s applet.
    pub fn detach_applet(&mut self, engine: &mut Dispatcher, ep: u32) -> Result<(), InvokerError> {
        match self.call(engine, &Request::DetachApplet { endpoint: ep }, &[])? {
            (Reply::Ok, _) => Ok(()),
            (r, _) => Err(unexpected("detach", r)),
        }
    }

    /// Close channel `chan` of endpoint `ep`.
    pub fn close_channel(
        &mut self,
        engine: &mut Dispatcher,
        ep: u32,
        chan: u16,
    ) -> Result<(), InvokerError> {
        let req = Request::CloseChannel {
            endpoint: ep,
            channel: chan,
        };
        match self.call(engine, &req, &[])? {
            (Reply::Ok, _) => Ok(()),
            (r, _) => Err(unexpected("close", r)),
        }
    }

    /// Send `req` (with descriptors `fds`) without waiting for its reply;
    /// its request id, for [`LocalClient::take_reply`]. For a request
    /// answered only once another engine or client has moved (a VI
    /// connection), while the caller steps them.
    pub fn send_request(&mut self, req: &Request, fds: &[RawFd]) -> io::Result<u32> {
        self.next_req = self.next_req.wrapping_add(1).max(1);
        let id = self.next_req;
        sys::send_packet(self.sock.as_raw_fd(), &req.encode(id), fds)?;
        Ok(id)
    }

    /// Read what the engine sent, without stepping it: the reply to
    /// request `id` if it came; notices and other replies go to
    /// [`LocalClient::notices`].
    pub fn take_reply(&mut self, id: u32) -> io::Result<Option<(Reply, Vec<OwnedFd>)>> {
        let mut buf = vec![0u8; control::MAX_PACKET];
        loop {
            let mut got = Vec::new();
            match sys::recv_packet(self.sock.as_raw_fd(), &mut buf, &mut got, true) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    let (rid, rep) = Reply::decode(&buf[..n])
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    if rid == id && id != 0 {
                        return Ok(Some((rep, got)));
                    }
                    self.notices.push((rep, got));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }

    /// Take the first connection request on discriminator `tag` among the
    /// notices (reading what waits first): its request id, to accept or
    /// reject.
    pub fn take_vi_request(&mut self, tag: u64) -> io::Result<Option<u32>> {
        self.take_reply(0)?;
        let at = self
            .notices
            .iter()
            .position(|(r, _)| matches!(r, Reply::ViRequest { tag: t, .. } if *t == tag));
        Ok(at.map(|i| match self.notices.remove(i).0 {
            Reply::ViRequest { request, .. } => request,
            _ => unreachable!("a ViRequest was found at this position"),
        }))
    }

    /// Register a fresh memory file of `len` bytes (its size sealed) as a
    /// region: VIA's `VipRegisterMem`.
    pub fn register_memory(
        &mut self,
        engine: &mut Dispatcher,
        len: usize,
    ) -> Result<RawRegion, InvokerError> {
        let fd = Segment::create_file("unet-region", len)?;
        let req = Request::RegisterMemory { len: len as u64 };
        match self.call(engine, &req, &[fd.as_raw_fd()])? {
            (Reply::MemoryRegistered { handle }, _) => Ok(RawRegion {
                handle,
                seg: Segment::open(fd, len, true)?,
            }),
            (r, _) => Err(unexpected("register", r)),
        }
    }

    /// Deregister region `handle` (the caller's mapping of it stays).
    pub fn deregister_memory(
        &mut self,
        engine: &mut Dispatcher,
        handle: u32,
    ) -> Result<(), InvokerError> {
        match self.call(engine, &Request::DeregisterMemory { handle }, &[])? {
            (Reply::Ok, _) => Ok(()),
            (r, _) => Err(unexpected("deregister", r)),
        }
    }

    /// Accept VI connections on discriminator `tag`.
    pub fn vi_listen(&mut self, engine: &mut Dispatcher, tag: u64) -> Result<(), InvokerError> {
        match self.call(engine, &Request::ViListen { tag }, &[])? {
            (Reply::Ok, _) => Ok(()),
            (r, _) => Err(unexpected("listen", r)),
        }
    }

    /// Close VI `vi` (its peer is told).
    pub fn close_vi(&mut self, engine: &mut Dispatcher, vi: u32) -> Result<(), InvokerError> {
        match self.call(engine, &Request::ViClose { vi }, &[])? {
            (Reply::Ok, _) => Ok(()),
            (r, _) => Err(unexpected("close VI", r)),
        }
    }
}

/// Connect a VI of client `ca` of engine `a` to one that client `cb` of
/// engine `b` accepts on discriminator `tag` (listening on it first),
/// both with `attrs`: the VIs the engines carry, `a`'s side first. `to`
/// is where `a` sends its request: `b`'s wire address, or a relay in
/// between. Both engines are stepped on the caller's thread, and
/// `between` runs after each round (a relay moves datagrams there). Fails
/// with `TimedOut` if the connection is not made within five seconds.
pub fn connect_vis(
    (a, ca): (&mut Dispatcher, &mut LocalClient),
    (b, cb): (&mut Dispatcher, &mut LocalClient),
    to: SocketAddr,
    tag: u64,
    attrs: ViParams,
    between: &mut dyn FnMut(),
) -> Result<(RawVi, RawVi), InvokerError> {
    cb.vi_listen(b, tag)?;
    let req = Request::ViConnect {
        host: Some(to),
        tag,
        attrs,
        timeout_ms: 5000,
    };
    let connect = ca.send_request(&req, &[])?;
    let mut accept = None;
    let (mut va, mut vb) = (None, None);
    let start = Instant::now();
    while va.is_none() || vb.is_none() {
        a.step();
        between();
        b.step();
        between();
        if accept.is_none() {
            if let Some(request) = cb.take_vi_request(tag)? {
                let r = Request::ViAccept { request, attrs };
                accept = Some(cb.send_request(&r, &[])?);
            }
        }
        if va.is_none() {
            va = ca.take_reply(connect)?;
            if let Some((r @ Reply::Error(_), _)) = va {
                return Err(unexpected("connect", r));
            }
        }
        if let (Some(id), None) = (accept, &vb) {
            vb = cb.take_reply(id)?;
        }
        if start.elapsed() > Duration::from_secs(5) {
            return Err(InvokerError::Io(io::Error::new(
                io::ErrorKind::TimedOut,
                "the VI connection was not made",
            )));
        }
    }
    let open = |r: Option<(Reply, Vec<OwnedFd>)>, what: &str| match r {
        Some((Reply::ViConnected { vi, conn_id: 0, .. }, fds)) if fds.len() == 2 => {
            let mut fds = fds.into_iter();
            match (fds.next(), fds.next()) {
                (Some(seg), Some(bell)) => RawVi::open(vi, seg, bell),
                _ => Err(InvokerError::Protocol(format!("{what}: two descriptors"))),
            }
        }
        Some((r, _)) => Err(unexpected(what, r)),
        None => Err(InvokerError::Protocol(format!("{what}: no answer"))),
    };
    Ok((open(va, "connect")?, open(vb, "accept")?))
}

/// An endpoint segment driven by hand: what a client library does, without
/// its conveniences (and without its care: nothing stops a test from
/// writing what a hostile client would).
pub struct RawEndpoint {
    id: u32,
    layout: Layout,
    send: Ring<SendDesc>,
    recv: Ring<RecvDesc>,
    free: Ring<u32>,
    events: Ring<EventDesc>,
    send_head: u64,
    recv_tail: u64,
    free_head: u64,
    event_tail: u64,
    _doorbell: OwnedFd,
    /// Keeps the mapping the rings point into; dropped last.
    seg: Segment,
}

impl RawEndpoint {
    fn open(
        id: u32,
        g: Geometry,
        seg: OwnedFd,
        bell: OwnedFd,
    ) -> Result<RawEndpoint, InvokerError> {
        let layout = Layout::new(g).map_err(|e| InvokerError::Protocol(e.to_string()))?;
        let seg = Segment::open(seg, layout.segment_size as usize, true)?;
        // SAFETY: the mapping lives as long as `seg`, which the rings never
        // outlive (dropped with it).
        let view = unsafe { EndpointView::from_segment(seg.ptr(), seg.len()) }
            .map_err(|e| InvokerError::Protocol(format!("endpoint segment: {e}")))?;
        if view.layout != layout {
            return Err(InvokerError::Protocol(
                "endpoint segment does not match the expected layout".into(),
            ));
        }
        let EndpointView {
            send,
            recv,
            free,
            events,
            ..
        } = view;
        Ok(RawEndpoint {
            id,
            layout,
            send,
            recv,
            free,
            events,
            send_head: 0,
            recv_tail: 0,
            free_head: 0,
            event_tail: 0,
            _doorbell: bell,
            seg,
        })
    }

    /// The endpoint's id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Its layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The whole segment, for tests that scribble on it as a hostile
    /// client would.
    pub fn segment(&self) -> &Segment {
        &self.seg
    }

    fn area_ptr(&self) -> NonNull<u8> {
        // SAFETY: the buffer area lies inside the mapping (Layout).
        unsafe { self.seg.ptr().add(self.layout.buffer_area_off as usize) }
    }

    /// Copy `data` into the buffer area at `off` (clamped to the area).
    pub fn write_area(&mut self, off: u64, data: &[u8]) {
        let size = self.layout.geometry.buffer_area_size;
        let off = off.min(size);
        let n = data.len().min((size - off) as usize);
        // SAFETY: off + n <= area size, inside the mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.area_ptr().as_ptr().add(off as usize),
                n,
            )
        };
    }

    /// Copy out of the buffer area at `off` (clamped to the area).
    pub fn read_area(&self, off: u64, out: &mut [u8]) {
        let size = self.layout.geometry.buffer_area_size;
        let off = off.min(size);
        let n = out.len().min((size - off) as usize);
        // SAFETY: off + n <= area size, inside the mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.area_ptr().as_ptr().add(off as usize),
                out.as_mut_ptr(),
                n,
            )
        };
    }

    /// Push a send descriptor as given; its queue position, or `None` if
    /// the send ring is full.
    pub fn push_send(&mut self, d: SendDesc) -> Option<u64> {
        if self.send_head.wrapping_sub(self.send.tail()) >= self.layout.geometry.send_cap as u64 {
            return None;
        }
        let pos = self.send_head;
        self.send.write(pos, d);
        self.send_head += 1;
        self.send.set_head(self.send_head);
        Some(pos)
    }

    /// The send descriptors the engine has taken.
    pub fn sends_taken(&self) -> u64 {
        self.send.tail()
    }

    /// The status the engine wrote into the send descriptor at `pos`
    /// (a [`SendStatus`] number; 0 while pending).
    pub fn send_status(&self, pos: u64) -> i32 {
        self.send.read(pos).status
    }

    /// The next receive descriptor, if one is waiting.
    pub fn pop_recv(&mut self) -> Option<RecvDesc> {
        if self.recv.head() == self.recv_tail {
            return None;
        }
        let d = self.recv.read(self.recv_tail);
        self.recv_tail += 1;
        self.recv.set_tail(self.recv_tail);
        Some(d)
    }

    /// Post a free receive buffer (its offset); false if the ring is full.
    pub fn post_free(&mut self, off: u32) -> bool {
        if self.free_head.wrapping_sub(self.free.tail()) >= self.layout.geometry.free_cap as u64 {
            return false;
        }
        self.free.write(self.free_head, off);
        self.free_head += 1;
        self.free.set_head(self.free_head);
        true
    }

    /// The next event, if one is waiting.
    pub fn pop_event(&mut self) -> Option<EventDesc> {
        if self.events.head() == self.event_tail {
            return None;
        }
        let e = self.events.read(self.event_tail);
        self.event_tail += 1;
        self.events.set_tail(self.event_tail);
        Some(e)
    }

    /// The endpoint's header (flags shared with the engine, client
    /// counters).
    pub fn header(&self) -> &EndpointHeader {
        // SAFETY: the segment starts with the header the engine wrote,
        // page aligned; its shared fields are atomics.
        unsafe { self.seg.ptr().cast::<EndpointHeader>().as_ref() }
    }
}

/// A memory region a [`LocalClient`] registered: its handle, and the
/// client's own mapping of it.
pub struct RawRegion {
    handle: u32,
    seg: Segment,
}

impl RawRegion {
    /// The handle descriptors name it by.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.seg.len()
    }

    /// Never empty (present for clippy's sake).
    pub fn is_empty(&self) -> bool {
        self.seg.is_empty()
    }

    /// Copy `data` into the region at `off` (clamped to the region).
    pub fn write(&self, off: usize, data: &[u8]) {
        let off = off.min(self.seg.len());
        let n = data.len().min(self.seg.len() - off);
        // SAFETY: off + n <= the mapping's length.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.seg.ptr().as_ptr().add(off), n)
        };
    }

    /// Copy out of the region at `off` (clamped to the region).
    pub fn read(&self, off: usize, out: &mut [u8]) {
        let off = off.min(self.seg.len());
        let n = out.len().min(self.seg.len() - off);
        // SAFETY: off + n <= the mapping's length.
        unsafe {
            std::ptr::copy_nonoverlapping(self.seg.ptr().as_ptr().add(off), out.as_mut_ptr(), n)
        };
    }
}

/// The segment of a VI the engine carries (layout in
/// [`unet_abi::ViHeader`]), its queues driven by hand: what the client
/// library does, without its care. Descriptors are pushed as given,
/// whatever they name, and the queue heads can be published at any value,
/// as a hostile client would; completions are read as they come.
pub struct RawVi {
    id: u32,
    layout: ViLayout,
    sq: Ring<ViDesc>,
    rq: Ring<ViDesc>,
    scq: Ring<ViCompl>,
    rcq: Ring<ViCompl>,
    sq_head: u64,
    rq_head: u64,
    scq_tail: u64,
    rcq_tail: u64,
    doorbell: EventFd,
    /// Keeps the mapping the rings point into; dropped last.
    seg: Segment,
}

impl RawVi {
    /// Map VI `vi`'s segment `seg` (its doorbell `bell`) as the engine
    /// handed it over, checking its header against the layout.
    pub fn open(vi: u32, seg: OwnedFd, bell: OwnedFd) -> Result<RawVi, InvokerError> {
        let seg = Segment::open(seg, VI_HEADER_SIZE, true)?;
        // SAFETY: the mapping lives as long as `seg`, which the rings never
        // outlive.
        let ViView {
            layout,
            sq,
            rq,
            scq,
            rcq,
        } = unsafe { ViView::from_segment(seg.ptr(), seg.len(), vi) }
            .map_err(|e| InvokerError::Protocol(format!("VI segment: {e}")))?;
        Ok(RawVi {
            id: vi,
            layout,
            sq,
            rq,
            scq,
            rcq,
            sq_head: 0,
            rq_head: 0,
            scq_tail: 0,
            rcq_tail: 0,
            doorbell: EventFd::from_fd(bell),
            seg,
        })
    }

    /// The VI's id in its engine.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Its layout.
    pub fn layout(&self) -> &ViLayout {
        &self.layout
    }

    /// The whole segment, for tests that scribble on it.
    pub fn segment(&self) -> &Segment {
        &self.seg
    }

    /// The header (state, doorbell flag, the engine's counters of the VI).
    pub fn header(&self) -> &ViHeader {
        // SAFETY: checked in open(); its shared fields are atomics.
        unsafe { self.seg.ptr().cast::<ViHeader>().as_ref() }
    }

    /// The state the engine published: 0 while connected, else a
    /// [`ViError`] code.
    pub fn state(&self) -> u32 {
        self.header()
            .state
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// One of the engine's counters of the VI.
    pub fn counter(&self, c: ViCounter) -> u64 {
        self.header().counters[c as usize].load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The counters that are not zero, as (name, value): what a failing
    /// test prints.
    pub fn nonzero_counters(&self) -> Vec<(&'static str, u64)> {
        ViCounter::ALL
            .iter()
            .map(|&c| (c.name(), self.counter(c)))
            .filter(|&(_, v)| v != 0)
            .collect()
    }

    /// Ring the doorbell if the engine sleeps, as a client does after
    /// posting.
    pub fn ring(&self) {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        let armed = &self.header().engine_armed;
        if armed.swap(0, std::sync::atomic::Ordering::AcqRel) != 0 {
            self.doorbell.notify();
        }
    }

    fn push(ring: &Ring<ViDesc>, head: &mut u64, cap: u32, d: ViDesc) -> Option<u64> {
        if head.wrapping_sub(ring.tail()) >= cap as u64 {
            return None;
        }
        let pos = *head;
        ring.write(pos, d);
        *head = pos.wrapping_add(1);
        ring.set_head(*head);
        Some(pos)
    }

    /// Post a send descriptor as given (and ring); its queue position, or
    /// `None` if the queue is full.
    pub fn push_send(&mut self, d: ViDesc) -> Option<u64> {
        let pos = Self::push(&self.sq, &mut self.sq_head, self.layout.cap, d);
        self.ring();
        pos
    }

    /// Post a receive descriptor as given (and ring); its queue position,
    /// or `None` if the queue is full.
    pub fn push_recv(&mut self, d: ViDesc) -> Option<u64> {
        let pos = Self::push(&self.rq, &mut self.rq_head, self.layout.cap, d);
        self.ring();
        pos
    }

    /// Write `d` into the send queue's slot for position `pos` without
    /// publishing it (a client scribbling on its ring).
    pub fn write_send_slot(&self, pos: u64, d: ViDesc) {
        self.sq.write(pos, d);
    }

    /// Write `d` into the receive queue's slot for position `pos` without
    /// publishing it.
    pub fn write_recv_slot(&self, pos: u64, d: ViDesc) {
        self.rq.write(pos, d);
    }

    /// Publish send queue head `pos`, whatever it is (later pushes go on
    /// from it).
    pub fn set_send_head(&mut self, pos: u64) {
        self.sq_head = pos;
        self.sq.set_head(pos);
        self.ring();
    }

    /// Publish receive queue head `pos`, whatever it is.
    pub fn set_recv_head(&mut self, pos: u64) {
        self.rq_head = pos;
        self.rq.set_head(pos);
        self.ring();
    }

    /// The send queue's head as this side last published it.
    pub fn send_head(&self) -> u64 {
        self.sq_head
    }

    /// The receive queue's head as this side last published it.
    pub fn recv_head(&self) -> u64 {
        self.rq_head
    }

    /// The send descriptors the engine has taken (the queue's tail).
    pub fn sends_taken(&self) -> u64 {
        self.sq.tail()
    }

    /// The receive descriptors the engine has taken.
    pub fn recvs_taken(&self) -> u64 {
        self.rq.tail()
    }

    fn pop(ring: &Ring<ViCompl>, tail: &mut u64) -> Option<ViCompl> {
        // Nothing when the tail is at the head, or past it (a tail
        // scribbled ahead reads nothing until the engine's head passes
        // it).
        let waiting = ring.head().wrapping_sub(*tail);
        if waiting == 0 || waiting > ring.capacity() as u64 {
            return None;
        }
        let c = ring.read(*tail);
        *tail = tail.wrapping_add(1);
        ring.set_tail(*tail);
        Some(c)
    }

    /// The next send completion, if one is waiting.
    pub fn send_done(&mut self) -> Option<ViCompl> {
        Self::pop(&self.scq, &mut self.scq_tail)
    }

    /// The next receive completion, if one is waiting.
    pub fn recv_done(&mut self) -> Option<ViCompl> {
        Self::pop(&self.rcq, &mut self.rcq_tail)
    }

    /// Publish the tails of the completion rings at `send` and `recv`,
    /// whatever they are (a client scribbling on its positions; later
    /// reads go on from them, and find nothing while they are ahead of
    /// what the engine published).
    pub fn set_completion_tails(&mut self, send: u64, recv: u64) {
        self.scq_tail = send;
        self.scq.set_tail(send);
        self.rcq_tail = recv;
        self.rcq.set_tail(recv);
    }

    /// The completions the engine has published on each ring (send,
    /// receive): the rings' heads.
    pub fn completions_published(&self) -> (u64, u64) {
        (self.scq.head(), self.rcq.head())
    }
}
