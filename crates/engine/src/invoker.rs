//! Invoker mode: an engine driven on the caller's thread (Aeron's
//! `ThreadingMode.INVOKER`).
//!
//! A [`Dispatcher`] runs nothing by itself: [`Dispatcher::step`] runs one
//! turn of the engine's loop (the same turns its own thread runs). A
//! [`LocalClient`] asks it for set-up through the real control protocol
//! and steps it until the answer comes; a [`RawEndpoint`] is the endpoint
//! segment the engine handed back, its rings driven by hand. Tests, fuzz
//! targets and benchmarks use them to run the engine's real per-message
//! code deterministically, on one thread.
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

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use unet_abi::ring::Ring;
use unet_abi::*;
use unet_control::{self as control, EndpointAddr, ErrorCode, PathChoice, Reply, Request};
use unet_sys::{self as sys, Segment};

use crate::dispatcher::Dispatcher;

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
        let req = Request::CreateEndpoint {
            geometry,
            accept: true,
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
        let at = |off: u64| seg.at(off as usize, RING_HEADER_SIZE);
        let (Some(s), Some(r), Some(f), Some(e)) = (
            at(layout.send_off),
            at(layout.recv_off),
            at(layout.free_off),
            at(layout.event_off),
        ) else {
            return Err(InvokerError::Protocol(
                "segment smaller than its layout".into(),
            ));
        };
        // SAFETY: each offset comes from the layout the engine used, inside
        // the mapping (checked by `at`), 64-byte aligned; the mapping lives
        // as long as `seg`, which the rings never outlive (dropped with it).
        let (send, recv, free, events) = unsafe {
            (
                Ring::from_raw(s, g.send_cap),
                Ring::from_raw(r, g.recv_cap),
                Ring::from_raw(f, g.free_cap),
                Ring::from_raw(e, g.event_cap),
            )
        };
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
