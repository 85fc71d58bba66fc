//! Endpoints: the application's interface to the network (U-Net/SLE
//! Figure 1) — a buffer area, send, receive and free queues in a segment
//! shared with the engine, plus the direct connections the endpoint is party
//! to. Both paths present the same calls.
//!
//! This file holds the endpoint's types, its creation and set-up calls,
//! and its U-Net queues (sending on them, receiving from them, the free
//! buffers and the buffer area); its other parts each have a file:
//!
//! - `channels`: the channel tags and the direct connections behind
//!   them, with sending and receiving on those connections;
//! - `arena`: the send arena, where `send` copies messages for the
//!   engine path;
//! - `events`: the event queue, turned into [`Event`]s;
//! - `wait`: waiting (spin, then sleep on the doorbells) and the blocking
//!   receive and send;
//! - `inline` (or `no_inline` without the feature): an applet run in this
//!   process.

use std::collections::VecDeque;
use std::sync::atomic::{fence, Ordering};
use std::time::Duration;

use unet_abi::view::EndpointView;
use unet_abi::*;
use unet_control::{EndpointAddr, PathChoice, Reply, Request};
use unet_sys::{self as sys, EventFd, Segment};

use crate::direct::DirectRecv;
use crate::shm::Mapped;

#[allow(unsafe_code)]
mod arena;
mod channels;
mod events;
#[cfg(feature = "inline")]
mod inline;
#[cfg(not(feature = "inline"))]
mod no_inline;
mod wait;

use arena::TxArena;
use channels::{ChanState, Channels};
#[cfg(feature = "inline")]
use inline::InlineState;
#[cfg(not(feature = "inline"))]
use no_inline::InlineState;

use crate::session::Session;
use crate::{Error, RecvError, SendError};

/// A channel tag: names a destination for sends, and the source of what
/// arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Channel(pub u16);

/// Options of a new endpoint.
#[derive(Clone, Copy, Debug)]
pub struct EndpointConfig {
    /// Segment geometry (buffer size, buffer area, ring sizes).
    pub geometry: Geometry,
    /// Accept channels opened by others.
    pub accept: bool,
    /// Let the library manage the buffer area: half of it for outgoing
    /// messages, the rest posted as receive buffers and re-posted after each
    /// receive. Turn off to drive the U-Net queues yourself
    /// ([`Endpoint::push_send`], [`Endpoint::poll_recv_desc`],
    /// [`Endpoint::post_free`]).
    pub managed_buffers: bool,
    /// How long a blocking receive spins before it sleeps.
    pub spin: Duration,
    /// Two-case delivery (UDM's, `docs/udm.md`, "U-Net endpoints with
    /// two-case delivery"): `Some(limit)` gives the endpoint a virtual
    /// buffer of `limit` bytes in the engine, where a message that finds
    /// no room in the receive queue or no free buffer waits, in order,
    /// instead of being dropped; at the limit local senders are held back
    /// and arrivals from the wire are dropped (`rx_drop_buffer_limit`).
    /// Nothing changes for the receiver's API. `None` (the default):
    /// U-Net's drop. [`BUFFERED_DEFAULT`] is 16 MiB; the engine raises a
    /// small limit to its minimum and rounds it to whole pages; more than
    /// `unet_abi::MAX_BUFFER_LIMIT` (1 GiB), or 0, is refused.
    pub buffered: Option<u64>,
}

/// The default limit of a buffered endpoint's virtual buffer (16 MiB):
/// `EndpointConfig { buffered: Some(BUFFERED_DEFAULT), .. }`.
pub const BUFFERED_DEFAULT: u64 = unet_abi::DEFAULT_BUFFER_LIMIT;

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            geometry: Geometry::default(),
            accept: true,
            managed_buffers: true,
            spin: Duration::from_micros(50),
            buffered: None,
        }
    }
}

/// Options of a new channel.
#[derive(Clone, Copy, Debug, Default)]
pub struct ChannelOptions {
    /// Which path to take.
    pub path: PathChoice,
}

/// A message that arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recv {
    /// Its length.
    pub len: usize,
    /// The channel it came on (assigned by the engine); for an active
    /// message ([`Recv::am`]), [`crate::spine::AM_CHANNEL`] with the
    /// number of the handler it names ([`Recv::handler`]).
    pub channel: Channel,
}

impl Recv {
    /// An active message from a SPINE handler: the payload is in the host
    /// framing (`[args_len: u16 LE][args][bulk]`, see
    /// [`crate::spine::split_am`]). It is marked in the channel rather
    /// than in a field of its own: a third field changes the code of the
    /// receive loop, and the direct path's round trip took 40 ns longer.
    #[inline]
    pub fn am(&self) -> bool {
        self.channel.0 & crate::spine::AM_CHANNEL != 0
    }

    /// The handler number an active message names (None for a message
    /// on a channel).
    #[inline]
    pub fn handler(&self) -> Option<u16> {
        self.am()
            .then_some(self.channel.0 & !crate::spine::AM_CHANNEL)
    }
}

/// Something that happened to the endpoint's channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A peer opened a channel to this endpoint.
    ChannelOpened {
        /// Our tag for it.
        channel: Channel,
        /// Who opened it.
        peer: EndpointAddr,
        /// Whether it uses the direct path.
        direct: bool,
    },
    /// The peer of this channel is gone (closed or died).
    PeerGone {
        /// The channel.
        channel: Channel,
    },
    /// An invocation of this endpoint's applet faulted and was stopped.
    AppletFault {
        /// Why it was stopped.
        kind: FaultKind,
    },
    /// The applet faulted too often in a row and was detached; the
    /// endpoint works on as plain U-Net.
    AppletDetached {
        /// Why its last invocation was stopped.
        kind: FaultKind,
    },
}

/// Where an applet runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// In the engine, as in the U-Net/SLE paper's network interface; the
    /// endpoint's traffic takes the engine path.
    #[default]
    Engine,
    /// In this process's client library, on the direct path: safe because
    /// an applet can touch only its own endpoint, exactly what this process
    /// may touch anyway, and it saves the hop through the engine. Timers
    /// fire while the application sends, receives or waits.
    Inline,
}

/// How an applet is attached.
#[derive(Clone, Copy, Debug, Default)]
pub struct AppletOptions {
    /// Work budget per invocation (0: the default, 20 000 units of JIVE
    /// fuel, some tens of microseconds).
    pub fuel: u64,
    /// Heap quota in bytes (0: JIVE's default, 1 MiB).
    pub heap: u32,
    /// Where it runs.
    pub placement: Placement,
}

/// An endpoint.
pub struct Endpoint {
    session: Session,
    id: u32,
    layout: Layout,
    /// The segment, the U-Net queues in it and our positions in them.
    queues: Queues,
    doorbell: EventFd,
    /// The channels and the direct connections behind them.
    chans: Channels,
    user_events: VecDeque<Event>,
    managed: bool,
    /// Where `send` copies messages for the engine path.
    tx: TxArena,
    spin: Duration,
    /// An inline applet and what it delivered.
    inline: InlineState,
}

/// An endpoint's segment with its four rings, and the positions this
/// side of each has reached.
struct Queues {
    map: Mapped<EndpointHeader, EndpointView>,
    send_head: u64,
    recv_tail: u64,
    event_tail: u64,
    free_head: u64,
}

impl Session {
    /// Create an endpoint.
    pub fn create_endpoint(&self, cfg: EndpointConfig) -> Result<Endpoint, Error> {
        Endpoint::create(self.clone(), cfg)
    }
}

impl Endpoint {
    pub(crate) fn create(session: Session, cfg: EndpointConfig) -> Result<Endpoint, Error> {
        let layout = Layout::new(cfg.geometry).map_err(|e| Error::Config(e.to_string()))?;
        let buffer_limit = match cfg.buffered {
            None => 0,
            Some(l) if l == 0 || l > unet_abi::MAX_BUFFER_LIMIT => {
                return Err(Error::Config(format!(
                    "a buffered endpoint's limit must be 1 byte to {} bytes (1 GiB), not {l}",
                    unet_abi::MAX_BUFFER_LIMIT
                )))
            }
            Some(l) => l,
        };
        let (rep, mut fds) = session.inner.request(&Request::CreateEndpoint {
            geometry: cfg.geometry,
            accept: cfg.accept,
            buffer_limit,
        })?;
        let id = match rep {
            Reply::EndpointCreated { endpoint } if fds.len() == 2 => endpoint,
            Reply::Error(c) => return Err(c.into()),
            r => {
                return Err(Error::Protocol(format!(
                    "unexpected answer to create: {r:?}"
                )))
            }
        };
        let bell = fds.pop().expect("two fds");
        let seg = Segment::open(
            fds.pop().expect("two fds"),
            layout.segment_size as usize,
            true,
        )?;
        let map =
            Mapped::endpoint(seg).map_err(|e| Error::Protocol(format!("endpoint segment: {e}")))?;
        if map.layout != layout {
            return Err(Error::Protocol(
                "endpoint segment does not match the expected layout".into(),
            ));
        }
        let g = cfg.geometry;
        let mut ep = Endpoint {
            session,
            id,
            layout,
            queues: Queues {
                map,
                send_head: 0,
                recv_tail: 0,
                event_tail: 0,
                free_head: 0,
            },
            doorbell: EventFd::from_fd(bell),
            chans: Channels::default(),
            user_events: VecDeque::new(),
            managed: cfg.managed_buffers,
            tx: TxArena::default(),
            spin: cfg.spin,
            inline: InlineState::default(),
        };
        if ep.managed {
            let bs = g.buffer_size as u64;
            let area = g.buffer_area_size;
            let nbufs = ((area / 2) / bs).max(1).min(g.free_cap as u64);
            ep.tx.region = area - nbufs * bs;
            ep.tx.base = (ep.tx.region / 4).min(1 << 16) & !63;
            for i in 0..nbufs {
                ep.post_free_raw((ep.tx.region + i * bs) as u32);
            }
        }
        Ok(ep)
    }

    fn header(&self) -> &EndpointHeader {
        self.queues.map.header()
    }

    /// This endpoint's id in its engine.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// This endpoint's address as a peer on another host would name it
    /// (with the engine's UDP address when it has a wire).
    pub fn addr(&self) -> EndpointAddr {
        EndpointAddr {
            host: self.session.udp_addr(),
            id: self.id,
        }
    }

    /// The geometry the endpoint was created with.
    pub fn geometry(&self) -> Geometry {
        self.layout.geometry
    }

    /// Open a channel to `dst`. The destination's engine may refuse.
    pub fn open_channel(
        &mut self,
        dst: EndpointAddr,
        opts: ChannelOptions,
    ) -> Result<Channel, Error> {
        let (rep, mut fds) = self.session.inner.request(&Request::OpenChannel {
            endpoint: self.id,
            dst,
            path: opts.path,
        })?;
        match rep {
            Reply::ChannelOpened {
                channel,
                conn_id,
                side,
            } => {
                if conn_id != 0 {
                    let fd = fds.pop().ok_or_else(|| {
                        Error::Protocol("direct channel without a segment".into())
                    })?;
                    self.attach_conn(fd, channel, side == 1)?;
                } else {
                    self.chans.set_chan(channel, ChanState::Engine);
                }
                self.drain_events();
                Ok(Channel(channel))
            }
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!("unexpected answer to open: {r:?}"))),
        }
    }

    /// Close a channel (the peer sees it gone).
    pub fn close_channel(&mut self, ch: Channel) -> Result<(), Error> {
        if let Some(ChanState::Direct(i)) = self.chans.state.get(ch.0 as usize).copied() {
            self.chans.release_conn(i);
        }
        self.chans.set_chan(ch.0, ChanState::Free);
        match self
            .session
            .inner
            .request(&Request::CloseChannel {
                endpoint: self.id,
                channel: ch.0,
            })?
            .0
        {
            Reply::Ok => Ok(()),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to close: {r:?}"
            ))),
        }
    }

    /// Attach a U-Net/SLE applet (a Java class file) to this endpoint: the
    /// engine loads it with JIVE, runs its constructor, and from then on runs
    /// `doTx` for every send and `doRx` for every arrival. Replaces an
    /// applet already attached. A class JIVE refuses comes back as
    /// `Error::Rejected(reason)` and leaves the endpoint as it was. Channels
    /// of an endpoint with an applet take the engine path.
    pub fn attach_applet(&mut self, class: &[u8], opts: AppletOptions) -> Result<(), Error> {
        if opts.placement == Placement::Inline {
            return self.attach_inline(class, opts);
        }
        self.flush_counters();
        if self.inline.runner.take().is_some() {
            self.end_inline();
        }
        self.session
            .attach_applet(self.id, class, opts.fuel, opts.heap)
    }

    /// Detach this endpoint's applet.
    pub fn detach_applet(&mut self) -> Result<(), Error> {
        self.flush_counters();
        if self.inline.runner.take().is_some() {
            self.end_inline();
            return Ok(());
        }
        self.session.detach_applet(self.id)
    }

    /// Accept or refuse channels opened to this endpoint from now on.
    pub fn set_accept(&mut self, accept: bool) -> Result<(), Error> {
        match self
            .session
            .inner
            .request(&Request::SetAccept {
                endpoint: self.id,
                accept,
            })?
            .0
        {
            Reply::Ok => Ok(()),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!("unexpected answer: {r:?}"))),
        }
    }

    // ---------------------------------------------------------------------
    // Sending
    // ---------------------------------------------------------------------

    /// Send a copy of `data` on `ch`. On the direct path the bytes go
    /// straight into the connection ring; on the engine path into the
    /// buffer area and a send descriptor. `Err(SendError::Full)` means "try
    /// again" after the peer or the engine has caught up.
    #[inline]
    pub fn send(&mut self, ch: Channel, data: &[u8]) -> Result<(), SendError> {
        // The direct path's common case, inlined into the caller: a direct
        // channel, no inline applet, room in the ring, the peer awake.
        if self.inline.runner.is_none() {
            if let Some(r) = self.try_send_direct(ch, data) {
                return r;
            }
        }
        self.send_other(ch, data)
    }

    /// Send a copy of each message of `msgs` on `ch`, in order, until one
    /// does not go. Returns how many went; `Err` only when not even the
    /// first did (`SendError::Full`: try again later). On a direct channel
    /// the batch costs less per message than `send` in a loop: the channel
    /// is looked up, the peer's state checked and the counters updated
    /// once per batch.
    #[inline]
    pub fn send_many<M: AsRef<[u8]>>(
        &mut self,
        ch: Channel,
        msgs: &[M],
    ) -> Result<usize, SendError> {
        if self.inline.runner.is_none() {
            if let Some(&ChanState::Direct(i)) = self.chans.state.get(ch.0 as usize) {
                if let Some(c) = self.chans.conns.get_mut(i) {
                    let (n, r) = c.send_many(msgs);
                    return match (n, self.direct_sent(r)) {
                        (0, Err(e)) => Err(e),
                        _ => Ok(n),
                    };
                }
            }
        }
        for (n, m) in msgs.iter().enumerate() {
            if let Err(e) = self.send(ch, m.as_ref()) {
                return if n == 0 { Err(e) } else { Ok(n) };
            }
        }
        Ok(msgs.len())
    }

    /// Everything `send` does not do inline.
    #[inline(never)]
    fn send_other(&mut self, ch: Channel, data: &[u8]) -> Result<(), SendError> {
        if self.inline.runner.is_some() {
            return self.send_inline(ch, data);
        }
        self.send_plain(ch, data)
    }

    #[inline]
    fn send_plain(&mut self, ch: Channel, data: &[u8]) -> Result<(), SendError> {
        match self.chans.state.get(ch.0 as usize).copied() {
            Some(ChanState::Direct(i)) => self.send_direct(i, data),
            Some(ChanState::Engine) => self.send_engine::<0>(ch, data).map(|_| ()),
            Some(ChanState::Gone) => Err(SendError::PeerGone),
            _ => {
                self.drain_events();
                match self.chans.state.get(ch.0 as usize).copied() {
                    Some(ChanState::Direct(_) | ChanState::Engine) => self.send_plain(ch, data),
                    Some(ChanState::Gone) => Err(SendError::PeerGone),
                    _ => Err(SendError::BadChannel),
                }
            }
        }
    }

    fn push_desc(&mut self, d: SendDesc) -> u64 {
        let pos = self.queues.send_head;
        self.queues.map.send.write(pos, d);
        self.queues.send_head += 1;
        self.queues.map.send.set_head(self.queues.send_head);
        // Where we run, for the engine's scheduling (`client_cpu`).
        self.header()
            .client_cpu
            .store(sys::current_cpu().wrapping_add(1), Ordering::Relaxed);
        // Pairs with the engine's fence between arming and re-polling.
        fence(Ordering::SeqCst);
        let armed = &self.header().engine_armed;
        if armed.load(Ordering::Relaxed) != 0 && armed.swap(0, Ordering::AcqRel) != 0 {
            self.doorbell.notify();
        }
        pos
    }

    /// U-Net's transmit: send `len` bytes at `offset` of the buffer area on
    /// `ch`. On an engine channel this pushes a send descriptor and returns
    /// its queue position (see [`Endpoint::send_status`]); on a direct
    /// channel the bytes are copied to the peer at once.
    pub fn push_send(&mut self, ch: Channel, offset: u32, len: u32) -> Result<u64, SendError> {
        if offset as u64 + len as u64 > self.layout.geometry.buffer_area_size {
            return Err(SendError::BadBuffer);
        }
        match self.chans.state.get(ch.0 as usize).copied() {
            Some(ChanState::Direct(i)) => {
                let mut tmp = vec![0u8; len as usize];
                self.read_buffer(offset, &mut tmp);
                self.send_direct(i, &tmp).map(|_| u64::MAX)
            }
            _ => {
                if self
                    .queues
                    .send_head
                    .wrapping_sub(self.queues.map.send.tail())
                    >= self.layout.geometry.send_cap as u64
                {
                    return Err(SendError::Full);
                }
                Ok(self.push_desc(SendDesc {
                    offset,
                    len,
                    channel: ch.0,
                    flags: 0,
                    status: 0,
                }))
            }
        }
    }

    /// Completion of the send descriptor at `pos` (from
    /// [`Endpoint::push_send`]).
    pub fn send_status(&self, pos: u64) -> SendStatus {
        if pos == u64::MAX {
            return SendStatus::Sent;
        }
        if pos >= self.queues.map.send.tail()
            || pos + (self.layout.geometry.send_cap as u64) < self.queues.send_head
        {
            return SendStatus::Pending;
        }
        SendStatus::from_i32(self.queues.map.send.read(pos).status).unwrap_or(SendStatus::Pending)
    }

    /// Push a raw send descriptor exactly as given, without any checking:
    /// for tests of the engine's defences.
    #[doc(hidden)]
    pub fn push_raw_desc(&mut self, d: SendDesc) -> bool {
        if self
            .queues
            .send_head
            .wrapping_sub(self.queues.map.send.tail())
            >= self.layout.geometry.send_cap as u64
        {
            return false;
        }
        self.push_desc(d);
        true
    }

    /// The raw bytes of this endpoint's segment, for tests of the engine's
    /// defences (a hostile client scribbling on its own queues).
    #[doc(hidden)]
    pub fn raw_segment(&self) -> (*mut u8, usize) {
        let seg = self.queues.map.segment();
        (seg.ptr().as_ptr(), seg.len())
    }

    // ---------------------------------------------------------------------
    // Receiving
    // ---------------------------------------------------------------------

    /// Take the next message if one is waiting, copying it into `buf`.
    /// Direct connections and the engine's receive queue are polled in turn.
    #[inline(always)]
    pub fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<Recv>, RecvError> {
        // The direct path's common case, inlined into the caller: a message
        // waiting on the connection whose turn it is, no inline applet.
        if !self.inline.rx {
            let i = self.chans.rr;
            if let Some(c) = self.chans.conns.get_mut(i) {
                if let DirectRecv::Message(len) = c.recv(buf) {
                    return Ok(Some(self.took_direct(i, len)));
                }
            }
        }
        self.try_recv_other(buf)
    }

    /// Take up to `limit` messages that are already waiting, without
    /// waiting: each is copied into `buf` and handed to `f` with its
    /// `Recv`; `f` returns false to stop after it. Returns how many `f` was
    /// given (0: nothing was waiting). Messages waiting on one direct
    /// connection are taken in one pass that costs less per message than
    /// `try_recv` in a loop (the connection is looked up and the counters
    /// updated once per pass); everything else is taken one at a time, as
    /// `try_recv` takes it. A message too large for `buf` ends the batch
    /// before it and stays queued: the next call returns
    /// `RecvError::BufferTooSmall` for it. Any other error ends the call
    /// with the error; the messages `f` was given before it stand.
    ///
    /// ```
    /// use unet::{ChannelOptions, EndpointConfig, Engine, EngineConfig, PathChoice, Session};
    /// let engine = Engine::start(EngineConfig::default())?;
    /// let session = Session::embedded(&engine)?;
    /// let mut a = session.create_endpoint(EndpointConfig::default())?;
    /// let mut b = session.create_endpoint(EndpointConfig::default())?;
    /// let direct = ChannelOptions { path: PathChoice::Direct };
    /// let ch = a.open_channel(b.addr(), direct)?;
    /// let batch: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; 64]).collect();
    /// assert_eq!(a.send_many(ch, &batch), Ok(100));
    /// let (mut buf, mut sum) = ([0u8; 64], 0u64);
    /// let n = b.recv_many(&mut buf, 256, |_, m| {
    ///     sum += m[0] as u64;
    ///     true
    /// })?;
    /// assert_eq!((n, sum), (100, 4950));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline(always)]
    pub fn recv_many(
        &mut self,
        buf: &mut [u8],
        limit: usize,
        mut f: impl FnMut(Recv, &[u8]) -> bool,
    ) -> Result<usize, RecvError> {
        if !self.inline.rx {
            let i = self.chans.rr;
            if let Some(c) = self.chans.conns.get_mut(i) {
                let channel = Channel(c.channel);
                let n = c.recv_many(buf, limit, |m| {
                    f(
                        Recv {
                            len: m.len(),
                            channel,
                        },
                        m,
                    )
                });
                if n > 0 {
                    self.chans.turn_after(i);
                    return Ok(n);
                }
            }
        }
        self.recv_many_other(buf, limit, f)
    }

    /// `recv_many` one message at a time.
    fn recv_many_other(
        &mut self,
        buf: &mut [u8],
        limit: usize,
        mut f: impl FnMut(Recv, &[u8]) -> bool,
    ) -> Result<usize, RecvError> {
        let mut n = 0;
        while n < limit {
            let r = match self.try_recv_other(buf) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                // It stays queued: the next call reports it.
                Err(RecvError::BufferTooSmall(_)) if n > 0 => break,
                Err(e) => return Err(e),
            };
            n += 1;
            if !f(r, &buf[..r.len]) {
                break;
            }
        }
        Ok(n)
    }

    /// Everything `try_recv` does not do inline.
    #[inline(never)]
    fn try_recv_other(&mut self, buf: &mut [u8]) -> Result<Option<Recv>, RecvError> {
        if self.inline.rx {
            return self.try_recv_inline(buf);
        }
        self.try_recv_plain(buf)
    }

    #[inline]
    fn try_recv_plain(&mut self, buf: &mut [u8]) -> Result<Option<Recv>, RecvError> {
        // The direct connections first, on a path of their own: the engine
        // queue's part (cold on the direct path) stays out of its way.
        if !self.chans.conns.is_empty() {
            if let Some(r) = self.try_recv_direct(buf)? {
                return Ok(Some(r));
            }
        }
        // A direct connection that opened since the last look may already
        // hold messages: attach it (by taking the events) and look again.
        if self.queues.map.events.head() != self.queues.event_tail {
            let before = self.chans.conns.len();
            self.drain_events();
            if self.chans.conns.len() > before {
                if let Some(r) = self.try_recv_direct(buf)? {
                    return Ok(Some(r));
                }
            }
        }
        self.try_recv_engine(buf)
    }

    /// The engine's receive queue (and the event queue).
    #[inline(never)]
    fn try_recv_engine(&mut self, buf: &mut [u8]) -> Result<Option<Recv>, RecvError> {
        if self.queues.map.events.head() != self.queues.event_tail {
            self.drain_events();
        }
        let head = self.queues.map.recv.head();
        if head == self.queues.recv_tail {
            return Ok(None);
        }
        let d = self.queues.map.recv.read(self.queues.recv_tail);
        let len = d.len as usize;
        if len > buf.len() {
            return Err(RecvError::BufferTooSmall(len));
        }
        if d.flags & RECV_INLINE != 0 {
            let n = len.min(INLINE_MAX);
            // From the slot itself, not from `d`: the copy's wide loads
            // would stall on the word stores that just filled `d`.
            self.queues
                .map
                .recv
                .read_inline(self.queues.recv_tail, &mut buf[..n]);
        } else {
            let bs = self.layout.geometry.buffer_size as usize;
            for i in 0..(d.nbufs as usize).min(MAX_RX_BUFFERS) {
                let off = d.offset(i);
                let n = bs.min(len.saturating_sub(i * bs));
                self.read_buffer(off, &mut buf[i * bs..i * bs + n]);
                if self.managed {
                    self.post_free_raw(off);
                }
            }
        }
        self.queues.recv_tail += 1;
        self.queues.map.recv.set_tail(self.queues.recv_tail);
        Ok(Some(Recv {
            len,
            channel: crate::spine::recv_channel(&d),
        }))
    }

    /// U-Net's receive: the next receive descriptor, for applications that
    /// manage their buffers (`managed_buffers: false`). Messages on direct
    /// channels are copied into a free buffer so they look the same.
    pub fn poll_recv_desc(&mut self) -> Option<RecvDesc> {
        if self.chans.conns_gone > 0 {
            self.chans.release_drained();
        }
        let mut next = 0;
        while next < self.chans.conns.len() {
            let i = next;
            next += 1;
            if !self.chans.conns[i].ready() {
                continue;
            }
            let ch = self.chans.conns[i].channel;
            let bs = self.layout.geometry.buffer_size as usize;
            let mut desc = RecvDesc {
                channel: ch,
                ..Default::default()
            };
            let mut tmp = Vec::new();
            let got = self.chans.conns[i].recv_vec(&mut tmp);
            if let DirectRecv::Message(len) = got {
                desc.len = len as u32;
                if len <= INLINE_MAX {
                    desc.flags = RECV_INLINE;
                    desc.data[..len].copy_from_slice(&tmp);
                    return Some(desc);
                }
                let nbufs = len.div_ceil(bs);
                if nbufs > MAX_RX_BUFFERS {
                    continue;
                }
                let mut offs = Vec::with_capacity(nbufs);
                for _ in 0..nbufs {
                    match self.pop_free_client() {
                        Some(o) => offs.push(o),
                        None => break,
                    }
                }
                if offs.len() < nbufs {
                    for o in offs {
                        self.post_free_raw(o);
                    }
                    continue; // dropped: no buffer, as U-Net does
                }
                for (k, &o) in offs.iter().enumerate() {
                    let n = bs.min(len - k * bs);
                    self.write_buffer(o, &tmp[k * bs..k * bs + n]);
                    desc.set_offset(k, o);
                }
                desc.nbufs = nbufs as u8;
                return Some(desc);
            }
            if let DirectRecv::Broken = got {
                bump(
                    &self.header().client_counters[ClientCounter::DirectRxBad as usize],
                    1,
                );
                // The last connection moves into slot i: look at it next.
                self.chans.release_conn(i);
                self.chans.set_chan(ch, ChanState::Gone);
                next = i;
            }
        }
        self.drain_events();
        if self.queues.map.recv.head() == self.queues.recv_tail {
            return None;
        }
        let d = self.queues.map.recv.read(self.queues.recv_tail);
        self.queues.recv_tail += 1;
        self.queues.map.recv.set_tail(self.queues.recv_tail);
        Some(d)
    }

    fn pop_free_client(&mut self) -> Option<u32> {
        loop {
            let t = self.queues.map.free.tail();
            if self.queues.map.free.head() == t {
                return None;
            }
            let off = self.queues.map.free.read(t);
            if self.queues.map.free.cas_tail(t) {
                return Some(off);
            }
        }
    }

    /// Post a free receive buffer (its offset in the buffer area).
    pub fn post_free(&mut self, offset: u32) -> Result<(), Error> {
        if offset as u64 + self.layout.geometry.buffer_size as u64
            > self.layout.geometry.buffer_area_size
        {
            return Err(Error::Config(format!(
                "free buffer offset {offset} outside the buffer area"
            )));
        }
        if self
            .queues
            .free_head
            .wrapping_sub(self.queues.map.free.tail())
            >= self.layout.geometry.free_cap as u64
        {
            return Err(Error::Config("free queue full".into()));
        }
        self.post_free_raw(offset);
        Ok(())
    }

    fn post_free_raw(&mut self, offset: u32) {
        self.queues.map.free.write(self.queues.free_head, offset);
        self.queues.free_head += 1;
        self.queues.map.free.set_head(self.queues.free_head);
    }

    /// Copy out of the buffer area (bounds are clamped to the area).
    #[inline]
    pub fn read_buffer(&self, offset: u32, out: &mut [u8]) {
        self.queues.map.read_area(offset, out);
    }

    /// Copy into the buffer area (bounds are clamped to the area).
    #[inline]
    pub fn write_buffer(&mut self, offset: u32, data: &[u8]) {
        self.queues.map.write_area(offset, data);
    }

    /// Direct-path counters kept by this library in the segment (up to
    /// date: pending counts are flushed first).
    pub fn client_counter(&mut self, c: ClientCounter) -> u64 {
        self.flush_counters();
        self.header().client_counters[c as usize].load(Ordering::Relaxed)
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.flush_counters();
        for c in &self.chans.conns {
            c.close();
        }
        let _ = self
            .session
            .inner
            .request(&Request::CloseEndpoint { endpoint: self.id });
    }
}

#[inline]
fn bump(a: &std::sync::atomic::AtomicU64, n: u64) {
    // One writer (this library, for its own endpoint): load + store.
    a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}
