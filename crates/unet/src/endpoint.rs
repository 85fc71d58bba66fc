//! Endpoints: the application's interface to the network (U-Net/SLE
//! Figure 1) — a buffer area, send, receive and free queues in a segment
//! shared with the engine, plus the direct connections the endpoint is party
//! to. Both paths present the same calls.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::OwnedFd;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use unet_abi::ring::Ring;
use unet_abi::view::EndpointView;
use unet_abi::*;
use unet_control::{EndpointAddr, PathChoice, Reply, Request};
use unet_sys::{self as sys, EventFd, Segment};

use crate::direct::{DirectConn, DirectRecv, DirectSendError};

#[cfg(feature = "inline")]
mod inline;
#[cfg(feature = "inline")]
use inline::InlineRunner;
#[cfg(not(feature = "inline"))]
mod no_inline;
use crate::session::Session;
use crate::{Error, RecvError, SendError};
#[cfg(not(feature = "inline"))]
use no_inline::InlineRunner;

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
    /// The channel it came on (assigned by the engine).
    pub channel: Channel,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChanState {
    Free,
    Engine,
    Direct(usize),
    Gone,
}

/// How often a spinning wait yields the CPU.
const SPIN_YIELD_EVERY: Duration = Duration::from_micros(5);

/// An endpoint.
pub struct Endpoint {
    session: Session,
    id: u32,
    seg: Segment,
    layout: Layout,
    send: Ring<SendDesc>,
    recv: Ring<RecvDesc>,
    free: Ring<u32>,
    events: Ring<EventDesc>,
    doorbell: EventFd,
    send_head: u64,
    recv_tail: u64,
    event_tail: u64,
    free_head: u64,
    chans: Vec<ChanState>,
    /// The direct connections in use, no closed one among them: a
    /// connection is unmapped (its segment and descriptor released) when
    /// its channel is closed, when it is found broken, and when its peer
    /// is gone and everything the peer sent has been read.
    conns: Vec<DirectConn>,
    /// How many of `conns` have a peer that is gone but still hold
    /// messages (released once drained).
    conns_gone: usize,
    rr: usize,
    user_events: VecDeque<Event>,
    managed: bool,
    tx_region: u64,
    tx_head: u64,
    /// `tx_head` modulo the tx region's span, kept as it goes (a division
    /// per send costs more than the rest of the bookkeeping).
    tx_at: u64,
    tx_tail: u64,
    inflight: VecDeque<(u64, u64)>,
    spin: Duration,
    /// Bytes at the start of the buffer area kept for an inline applet's
    /// doTx (the data of `send` is placed there); the tx allocator starts
    /// after it.
    tx_base: u64,
    inline: Option<Box<InlineRunner>>,
    /// Receives go through the inline path: an inline applet is attached,
    /// or messages its `doRx` delivered are still queued (they outlive a
    /// detach).
    inline_rx: bool,
    inline_rxq: VecDeque<RecvDesc>,
    /// Receive buffers the user has read, kept here for the inline
    /// applet's next `getFreeBuffer` instead of going back through the
    /// shared free ring (at most [`INLINE_SPARE`]; returned at detach).
    #[cfg_attr(not(feature = "inline"), allow(dead_code))]
    inline_spare: Vec<u32>,
    #[cfg_attr(not(feature = "inline"), allow(dead_code))]
    rx_scratch: Vec<u8>,
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
        // SAFETY: the mapping lives in `seg`, which the endpoint owns
        // beside its rings.
        let view = unsafe { EndpointView::from_segment(seg.ptr(), seg.len()) }
            .map_err(|e| Error::Protocol(format!("endpoint segment: {e}")))?;
        if view.layout != layout {
            return Err(Error::Protocol(
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
        let g = cfg.geometry;
        let mut ep = Endpoint {
            session,
            id,
            seg,
            layout,
            send,
            recv,
            free,
            events,
            doorbell: EventFd::from_fd(bell),
            send_head: 0,
            recv_tail: 0,
            event_tail: 0,
            free_head: 0,
            chans: Vec::new(),
            conns: Vec::new(),
            conns_gone: 0,
            rr: 0,
            user_events: VecDeque::new(),
            managed: cfg.managed_buffers,
            tx_region: 0,
            tx_head: 0,
            tx_at: 0,
            tx_tail: 0,
            inflight: VecDeque::new(),
            spin: cfg.spin,
            tx_base: 0,
            inline: None,
            inline_rx: false,
            inline_rxq: VecDeque::new(),
            inline_spare: Vec::new(),
            rx_scratch: Vec::new(),
        };
        if ep.managed {
            let bs = g.buffer_size as u64;
            let area = g.buffer_area_size;
            let nbufs = ((area / 2) / bs).max(1).min(g.free_cap as u64);
            ep.tx_region = area - nbufs * bs;
            ep.tx_base = (ep.tx_region / 4).min(1 << 16) & !63;
            for i in 0..nbufs {
                ep.post_free_raw((ep.tx_region + i * bs) as u32);
            }
        }
        Ok(ep)
    }

    fn header(&self) -> &EndpointHeader {
        // SAFETY: checked in create(); lives as long as self.seg.
        unsafe { self.seg.ptr().cast::<EndpointHeader>().as_ref() }
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
                    self.set_chan(channel, ChanState::Engine);
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
        if let Some(ChanState::Direct(i)) = self.chans.get(ch.0 as usize).copied() {
            self.release_conn(i);
        }
        self.set_chan(ch.0, ChanState::Free);
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
        if self.inline.take().is_some() {
            self.end_inline();
        }
        self.session
            .attach_applet(self.id, class, opts.fuel, opts.heap)
    }

    /// Detach this endpoint's applet.
    pub fn detach_applet(&mut self) -> Result<(), Error> {
        self.flush_counters();
        if self.inline.take().is_some() {
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

    fn set_chan(&mut self, ch: u16, st: ChanState) {
        let i = ch as usize;
        if self.chans.len() <= i {
            self.chans.resize(i + 1, ChanState::Free);
        }
        self.chans[i] = st;
    }

    fn attach_conn(&mut self, fd: OwnedFd, channel: u16, side_b: bool) -> Result<(), Error> {
        let seg = Segment::open(fd, CONN_HEADER_SIZE, true)?;
        let c = DirectConn::open(seg, channel, side_b, &self.header().client_counters)
            .map_err(Error::Protocol)?;
        // A channel tag the engine hands out again replaces what it named.
        if let Some(ChanState::Direct(old)) = self.chans.get(channel as usize).copied() {
            self.release_conn(old);
        }
        self.conns.push(c);
        self.set_chan(channel, ChanState::Direct(self.conns.len() - 1));
        Ok(())
    }

    /// Close direct connection `i` (our side: the peer sees it closed)
    /// and unmap it; its channel keeps whatever state the caller gives
    /// it. The last connection takes its place.
    fn release_conn(&mut self, i: usize) {
        let c = self.conns.swap_remove(i);
        c.close();
        if c.gone {
            self.conns_gone -= 1;
        }
        drop(c);
        if let Some(moved) = self.conns.get(i) {
            let ch = moved.channel as usize;
            if self.chans.get(ch) == Some(&ChanState::Direct(self.conns.len())) {
                self.chans[ch] = ChanState::Direct(i);
            }
        }
        if self.rr >= self.conns.len() {
            self.rr = 0;
        }
    }

    /// Release the connections whose peer is gone and that hold nothing
    /// more: their channels are gone.
    #[cold]
    fn release_drained(&mut self) {
        let mut i = self.conns.len();
        while i > 0 && self.conns_gone > 0 {
            i -= 1;
            let c = &self.conns[i];
            if c.gone && !c.ready() {
                let ch = c.channel;
                self.release_conn(i);
                self.set_chan(ch, ChanState::Gone);
            }
        }
    }

    // ---------------------------------------------------------------------
    // Events
    // ---------------------------------------------------------------------

    fn drain_events(&mut self) {
        let head = self.events.head();
        while self.event_tail < head {
            let e = self.events.read(self.event_tail);
            self.event_tail += 1;
            self.handle_event(e);
        }
        if self.event_tail == head {
            self.events.set_tail(self.event_tail);
        }
    }

    fn handle_event(&mut self, e: EventDesc) {
        match EventKind::from_u16(e.kind) {
            Some(EventKind::ChannelOpened) => {
                let mut direct = false;
                if e.arg != 0 {
                    if let Some((Reply::DirectConn { channel, side, .. }, mut fds)) =
                        self.session.inner.take_notice(e.arg)
                    {
                        if let Some(fd) = fds.pop() {
                            direct = self.attach_conn(fd, channel, side == 1).is_ok();
                        }
                    }
                }
                if !direct {
                    self.set_chan(e.channel, ChanState::Engine);
                }
                let host = match e.family {
                    4 => Some(SocketAddr::new(
                        IpAddr::V4(Ipv4Addr::new(e.addr[0], e.addr[1], e.addr[2], e.addr[3])),
                        e.port,
                    )),
                    6 => Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(e.addr)), e.port)),
                    _ => None,
                };
                self.user_events.push_back(Event::ChannelOpened {
                    channel: Channel(e.channel),
                    peer: EndpointAddr {
                        host,
                        id: e.peer_endpoint,
                    },
                    direct,
                });
            }
            Some(EventKind::AppletFault) => {
                self.user_events.push_back(Event::AppletFault {
                    kind: FaultKind::from_u32(e.arg),
                });
            }
            Some(EventKind::AppletDetached) => {
                self.user_events.push_back(Event::AppletDetached {
                    kind: FaultKind::from_u32(e.arg),
                });
            }
            Some(EventKind::PeerGone) => {
                // A direct ring stays readable until drained: what the peer
                // sent before it went is still delivered, and the
                // connection is released after.
                match self.chans.get(e.channel as usize).copied() {
                    Some(ChanState::Direct(i)) if self.conns[i].ready() => {
                        let c = &mut self.conns[i];
                        self.conns_gone += usize::from(!c.gone);
                        c.gone = true;
                    }
                    Some(ChanState::Direct(i)) => {
                        self.release_conn(i);
                        self.chans[e.channel as usize] = ChanState::Gone;
                    }
                    Some(_) => self.chans[e.channel as usize] = ChanState::Gone,
                    None => {}
                }
                self.user_events.push_back(Event::PeerGone {
                    channel: Channel(e.channel),
                });
            }
            _ => {}
        }
    }

    /// The next channel event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.drain_events();
        self.user_events.pop_front()
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
        if self.inline.is_none() {
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
        if self.inline.is_none() {
            if let Some(&ChanState::Direct(i)) = self.chans.get(ch.0 as usize) {
                if let Some(c) = self.conns.get_mut(i) {
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

    /// A send on `ch` if it is a direct channel (None if not). A send that
    /// fails changes nothing.
    #[inline(always)]
    fn try_send_direct(&mut self, ch: Channel, data: &[u8]) -> Option<Result<(), SendError>> {
        let &ChanState::Direct(i) = self.chans.get(ch.0 as usize)? else {
            return None;
        };
        let c = self.conns.get_mut(i)?;
        Some(match c.send(data) {
            Ok(false) => Ok(()),
            r => self.direct_sent(r),
        })
    }

    /// Everything `send` does not do inline.
    #[inline(never)]
    fn send_other(&mut self, ch: Channel, data: &[u8]) -> Result<(), SendError> {
        if self.inline.is_some() {
            return self.send_inline(ch, data);
        }
        self.send_plain(ch, data)
    }

    /// The outcome of a direct send other than "sent, nobody woken".
    #[cold]
    fn direct_sent(&self, r: Result<bool, DirectSendError>) -> Result<(), SendError> {
        match r {
            Ok(woke) => {
                if woke {
                    bump(
                        &self.header().client_counters[ClientCounter::PeerWakeups as usize],
                        1,
                    );
                }
                Ok(())
            }
            Err(DirectSendError::Full) => Err(SendError::Full),
            Err(DirectSendError::TooLarge) => Err(SendError::TooLarge),
            Err(DirectSendError::Closed) => Err(SendError::PeerGone),
        }
    }

    #[inline]
    fn send_plain(&mut self, ch: Channel, data: &[u8]) -> Result<(), SendError> {
        match self.chans.get(ch.0 as usize).copied() {
            Some(ChanState::Direct(i)) => self.send_direct(i, data),
            Some(ChanState::Engine) => self.send_engine(ch, data),
            Some(ChanState::Gone) => Err(SendError::PeerGone),
            _ => {
                self.drain_events();
                match self.chans.get(ch.0 as usize).copied() {
                    Some(ChanState::Direct(_) | ChanState::Engine) => self.send_plain(ch, data),
                    Some(ChanState::Gone) => Err(SendError::PeerGone),
                    _ => Err(SendError::BadChannel),
                }
            }
        }
    }

    #[inline]
    fn send_direct(&mut self, i: usize, data: &[u8]) -> Result<(), SendError> {
        match self.conns[i].send(data) {
            Ok(false) => Ok(()),
            r => self.direct_sent(r),
        }
    }

    fn send_engine(&mut self, ch: Channel, data: &[u8]) -> Result<(), SendError> {
        if !self.managed {
            return Err(SendError::Unmanaged);
        }
        let len = data.len() as u64;
        if len == 0 || len as usize > MAX_MESSAGE {
            return Err(SendError::TooLarge);
        }
        let need = len.div_ceil(64) * 64;
        let span = self.tx_region - self.tx_base;
        if need > span {
            return Err(SendError::TooLarge);
        }
        self.reclaim();
        if self.send_head.wrapping_sub(self.send.tail()) >= self.layout.geometry.send_cap as u64 {
            return Err(SendError::Full);
        }
        debug_assert_eq!(self.tx_at, self.tx_head % span);
        let mut at = self.tx_at;
        let mut skip = 0;
        if at + need > span {
            skip = span - at;
            at = 0;
        }
        if self.tx_head + skip + need - self.tx_tail > span {
            return Err(SendError::Full);
        }
        self.tx_head += skip + need;
        self.tx_at = if at + need == span { 0 } else { at + need };
        let at = self.tx_base + at;
        // SAFETY: at + len <= tx_region <= buffer area size: inside our
        // mapping. The engine only reads this region after we publish.
        unsafe {
            let dst = self
                .seg
                .ptr()
                .as_ptr()
                .add(self.layout.buffer_area_off as usize + at as usize);
            std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len());
        }
        self.inflight.push_back((self.send_head, self.tx_head));
        self.push_desc(SendDesc {
            offset: at as u32,
            len: len as u32,
            channel: ch.0,
            flags: 0,
            status: 0,
        });
        Ok(())
    }

    fn reclaim(&mut self) {
        let done = self.send.tail();
        while let Some(&(pos, end)) = self.inflight.front() {
            if pos >= done {
                break;
            }
            self.tx_tail = end;
            self.inflight.pop_front();
        }
    }

    fn push_desc(&mut self, d: SendDesc) -> u64 {
        let pos = self.send_head;
        self.send.write(pos, d);
        self.send_head += 1;
        self.send.set_head(self.send_head);
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
        match self.chans.get(ch.0 as usize).copied() {
            Some(ChanState::Direct(i)) => {
                let mut tmp = vec![0u8; len as usize];
                self.read_buffer(offset, &mut tmp);
                self.send_direct(i, &tmp).map(|_| u64::MAX)
            }
            _ => {
                if self.send_head.wrapping_sub(self.send.tail())
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
        if pos >= self.send.tail() || pos + (self.layout.geometry.send_cap as u64) < self.send_head
        {
            return SendStatus::Pending;
        }
        SendStatus::from_i32(self.send.read(pos).status).unwrap_or(SendStatus::Pending)
    }

    /// Push a raw send descriptor exactly as given, without any checking:
    /// for tests of the engine's defences.
    #[doc(hidden)]
    pub fn push_raw_desc(&mut self, d: SendDesc) -> bool {
        if self.send_head.wrapping_sub(self.send.tail()) >= self.layout.geometry.send_cap as u64 {
            return false;
        }
        self.push_desc(d);
        true
    }

    /// The raw bytes of this endpoint's segment, for tests of the engine's
    /// defences (a hostile client scribbling on its own queues).
    #[doc(hidden)]
    pub fn raw_segment(&self) -> (*mut u8, usize) {
        (self.seg.ptr().as_ptr(), self.seg.len())
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
        if !self.inline_rx {
            let i = self.rr;
            if let Some(c) = self.conns.get_mut(i) {
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
        if !self.inline_rx {
            let i = self.rr;
            if let Some(c) = self.conns.get_mut(i) {
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
                    self.turn_after(i);
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

    /// The next receive starts at the connection after `i`.
    #[inline(always)]
    fn turn_after(&mut self, i: usize) {
        self.rr = if i + 1 == self.conns.len() { 0 } else { i + 1 };
    }

    /// A message of `len` bytes was taken from connection `i`: the next
    /// receive starts at the connection after it.
    #[inline(always)]
    fn took_direct(&mut self, i: usize, len: usize) -> Recv {
        self.turn_after(i);
        Recv {
            len,
            channel: Channel(self.conns[i].channel),
        }
    }

    /// Everything `try_recv` does not do inline.
    #[inline(never)]
    fn try_recv_other(&mut self, buf: &mut [u8]) -> Result<Option<Recv>, RecvError> {
        if self.inline_rx {
            return self.try_recv_inline(buf);
        }
        self.try_recv_plain(buf)
    }

    #[inline]
    fn try_recv_plain(&mut self, buf: &mut [u8]) -> Result<Option<Recv>, RecvError> {
        // The direct connections first, on a path of their own: the engine
        // queue's part (cold on the direct path) stays out of its way.
        if !self.conns.is_empty() {
            if let Some(r) = self.try_recv_direct(buf)? {
                return Ok(Some(r));
            }
        }
        // A direct connection that opened since the last look may already
        // hold messages: attach it (by taking the events) and look again.
        if self.events.head() != self.event_tail {
            let before = self.conns.len();
            self.drain_events();
            if self.conns.len() > before {
                if let Some(r) = self.try_recv_direct(buf)? {
                    return Ok(Some(r));
                }
            }
        }
        self.try_recv_engine(buf)
    }

    #[inline]
    fn try_recv_direct(&mut self, buf: &mut [u8]) -> Result<Option<Recv>, RecvError> {
        let n = self.conns.len();
        for k in 0..n {
            let mut i = self.rr + k;
            if i >= n {
                i -= n;
            }
            let c = &mut self.conns[i];
            match c.recv(buf) {
                DirectRecv::Empty => {}
                DirectRecv::Message(len) => return Ok(Some(self.took_direct(i, len))),
                DirectRecv::TooSmall(need) => return Err(RecvError::BufferTooSmall(need)),
                DirectRecv::Broken => {
                    let ch = c.channel;
                    bump(
                        &self.header().client_counters[ClientCounter::DirectRxBad as usize],
                        1,
                    );
                    // Nothing more can be read from it: close our side
                    // (the peer's sends fail) and unmap it.
                    self.release_conn(i);
                    self.set_chan(ch, ChanState::Gone);
                    return Err(RecvError::Broken(Channel(ch)));
                }
            }
        }
        if self.conns_gone > 0 {
            self.release_drained();
        }
        Ok(None)
    }

    /// The engine's receive queue (and the event queue).
    #[inline(never)]
    fn try_recv_engine(&mut self, buf: &mut [u8]) -> Result<Option<Recv>, RecvError> {
        if self.events.head() != self.event_tail {
            self.drain_events();
        }
        let head = self.recv.head();
        if head == self.recv_tail {
            return Ok(None);
        }
        let d = self.recv.read(self.recv_tail);
        let len = d.len as usize;
        if len > buf.len() {
            return Err(RecvError::BufferTooSmall(len));
        }
        if d.flags & RECV_INLINE != 0 {
            let n = len.min(INLINE_MAX);
            buf[..n].copy_from_slice(&d.data[..n]);
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
        self.recv_tail += 1;
        self.recv.set_tail(self.recv_tail);
        Ok(Some(Recv {
            len,
            channel: Channel(d.channel),
        }))
    }

    /// U-Net's receive: the next receive descriptor, for applications that
    /// manage their buffers (`managed_buffers: false`). Messages on direct
    /// channels are copied into a free buffer so they look the same.
    pub fn poll_recv_desc(&mut self) -> Option<RecvDesc> {
        if self.conns_gone > 0 {
            self.release_drained();
        }
        let mut next = 0;
        while next < self.conns.len() {
            let i = next;
            next += 1;
            if !self.conns[i].ready() {
                continue;
            }
            let ch = self.conns[i].channel;
            let bs = self.layout.geometry.buffer_size as usize;
            let mut desc = RecvDesc {
                channel: ch,
                ..Default::default()
            };
            let mut tmp = Vec::new();
            let got = self.conns[i].recv_with(|src, len| {
                tmp.resize(len, 0);
                // SAFETY: src has len readable bytes (DirectConn's contract).
                unsafe { std::ptr::copy_nonoverlapping(src, tmp.as_mut_ptr(), len) };
                Ok(())
            });
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
                self.release_conn(i);
                self.set_chan(ch, ChanState::Gone);
                next = i;
            }
        }
        self.drain_events();
        if self.recv.head() == self.recv_tail {
            return None;
        }
        let d = self.recv.read(self.recv_tail);
        self.recv_tail += 1;
        self.recv.set_tail(self.recv_tail);
        Some(d)
    }

    fn pop_free_client(&mut self) -> Option<u32> {
        loop {
            let t = self.free.tail();
            if self.free.head() == t {
                return None;
            }
            let off = self.free.read(t);
            if self.free.cas_tail(t) {
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
        if self.free_head.wrapping_sub(self.free.tail()) >= self.layout.geometry.free_cap as u64 {
            return Err(Error::Config("free queue full".into()));
        }
        self.post_free_raw(offset);
        Ok(())
    }

    fn post_free_raw(&mut self, offset: u32) {
        self.free.write(self.free_head, offset);
        self.free_head += 1;
        self.free.set_head(self.free_head);
    }

    /// Copy out of the buffer area (bounds are clamped to the area).
    pub fn read_buffer(&self, offset: u32, out: &mut [u8]) {
        let area = self.layout.geometry.buffer_area_size as usize;
        let off = (offset as usize).min(area);
        let n = out.len().min(area - off);
        // SAFETY: off + n <= area size, inside the mapping.
        unsafe {
            let src = self
                .seg
                .ptr()
                .as_ptr()
                .add(self.layout.buffer_area_off as usize + off);
            std::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), n);
        }
    }

    /// Copy into the buffer area (bounds are clamped to the area).
    pub fn write_buffer(&mut self, offset: u32, data: &[u8]) {
        let area = self.layout.geometry.buffer_area_size as usize;
        let off = (offset as usize).min(area);
        let n = data.len().min(area - off);
        // SAFETY: off + n <= area size, inside the mapping.
        unsafe {
            let dst = self
                .seg
                .ptr()
                .as_ptr()
                .add(self.layout.buffer_area_off as usize + off);
            std::ptr::copy_nonoverlapping(data.as_ptr(), dst, n);
        }
    }

    /// True when a message or event is waiting.
    #[inline]
    pub fn ready(&self) -> bool {
        !self.inline_rxq.is_empty()
            || self.inline_timer_at().is_some_and(|t| t <= Instant::now())
            || self.conns.iter().any(|c| !c.broken && c.ready())
            || self.recv.head() != self.recv_tail
            || self.events.head() != self.event_tail
    }

    /// Wait until a message or an event is waiting, at most `timeout`:
    /// spin for the endpoint's spin time, then sleep on a futex (the engine
    /// or a direct peer wakes us only when we sleep).
    pub fn wait(&mut self, timeout: Option<Duration>) -> bool {
        // A first short spin reads no clock (a clock read costs about as
        // much as a whole direct-path message).
        for _ in 0..256 {
            if self.ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        self.flush_counters();
        let start = Instant::now();
        // Spin, then sleep. The engine sleeps as soon as it has nothing to
        // do, so a spinning client does not keep it from a CPU; a client
        // that is already awake when its message comes saves a wake-up of
        // several microseconds.
        let spin = self.spin;
        let mut last_yield = start;
        loop {
            for _ in 0..64 {
                if self.ready() {
                    return true;
                }
                std::hint::spin_loop();
            }
            let now = Instant::now();
            if now.duration_since(start) >= spin {
                break;
            }
            // If the peer shares our CPU (the other one is busy), spinning
            // only delays it: give it the CPU now and then. When the CPU is
            // ours alone, sched_yield returns at once.
            if now.duration_since(last_yield) >= SPIN_YIELD_EVERY {
                std::thread::yield_now();
                last_yield = now;
            }
        }
        loop {
            let next_timer = self
                .inline_timer_at()
                .map(|t| t.saturating_duration_since(Instant::now()));
            for c in self.conns.iter_mut() {
                c.set_sleeping(true);
            }
            let h = self.header();
            let mut words = Vec::with_capacity(1 + self.conns.len());
            words.push((&h.rx_futex, h.rx_futex.load(Ordering::Acquire)));
            h.client_sleeping.store(1, Ordering::Relaxed);
            for c in self.conns.iter() {
                if !c.broken {
                    words.push(c.wait_word());
                }
            }
            // Pairs with the fences of the engine and of direct peers after
            // they publish: either we see their message now, or they see
            // our sleeping flags and wake us. Direct peers publish with a
            // light fence; the heavy one here (membarrier) completes it.
            if self.conns.is_empty() {
                fence(Ordering::SeqCst);
            } else {
                sys::heavy_fence();
            }
            let ready = self.ready();
            if !ready {
                let mut left = timeout.map(|t| t.saturating_sub(start.elapsed()));
                if let Some(t) = next_timer {
                    left = Some(left.map_or(t, |l| l.min(t)));
                }
                if left != Some(Duration::ZERO) {
                    bump(&h.client_counters[ClientCounter::Sleeps as usize], 1);
                    sys::futex_wait_any(&words, left.map(|l| l.min(Duration::from_secs(1))));
                }
            }
            drop(words);
            self.header().client_sleeping.store(0, Ordering::Relaxed);
            for c in self.conns.iter_mut() {
                c.set_sleeping(false);
            }
            if self.ready() {
                return true;
            }
            if timeout.is_some_and(|t| start.elapsed() >= t) {
                return false;
            }
        }
    }

    /// Receive the next message into `buf`, waiting at most `timeout`
    /// (None: forever). `Err(RecvError::Timeout)` when nothing came.
    #[inline]
    pub fn recv(&mut self, buf: &mut [u8], timeout: Option<Duration>) -> Result<Recv, RecvError> {
        // The common case, a message already waiting, reads no clock (and
        // is inlined into the caller; the waiting is not).
        if let Some(r) = self.try_recv(buf)? {
            return Ok(r);
        }
        self.recv_waiting(buf, timeout)
    }

    #[inline(never)]
    fn recv_waiting(
        &mut self,
        buf: &mut [u8],
        timeout: Option<Duration>,
    ) -> Result<Recv, RecvError> {
        // First a short spin that reads no clock: when the two cores share
        // a cache, a ping-pong's answer comes within a few tens of
        // nanoseconds, about what a clock read costs.
        // Between full looks (every eighth turn), only the direct
        // connection whose turn it is is looked at: a load of its next
        // record's header.
        if timeout != Some(Duration::ZERO) {
            for k in 0..64 {
                std::hint::spin_loop();
                let cheap = self.conns.get(self.rr).is_some_and(|c| c.ready());
                if cheap || k % 8 == 7 {
                    if let Some(r) = self.try_recv(buf)? {
                        return Ok(r);
                    }
                }
            }
        }
        let start = Instant::now();
        loop {
            if let Some(r) = self.try_recv(buf)? {
                return Ok(r);
            }
            let left = timeout.map(|t| t.saturating_sub(start.elapsed()));
            if left == Some(Duration::ZERO) || !self.wait(left) {
                if let Some(r) = self.try_recv(buf)? {
                    return Ok(r);
                }
                if timeout.is_some_and(|t| start.elapsed() >= t) {
                    return Err(RecvError::Timeout);
                }
            }
        }
    }

    /// Send, retrying while the queue is full (waiting up to `timeout`;
    /// still `Err(SendError::Full)` after it). The retries spin and give
    /// the CPU up every few microseconds: the engine or the peer that makes
    /// room may share it.
    #[inline]
    pub fn send_blocking(
        &mut self,
        ch: Channel,
        data: &[u8],
        timeout: Duration,
    ) -> Result<(), SendError> {
        match self.send(ch, data) {
            Err(SendError::Full) => self.send_when_room(ch, data, timeout),
            r => r,
        }
    }

    #[cold]
    #[inline(never)]
    fn send_when_room(
        &mut self,
        ch: Channel,
        data: &[u8],
        timeout: Duration,
    ) -> Result<(), SendError> {
        let start = Instant::now();
        let mut last_yield = start;
        loop {
            for _ in 0..64 {
                match self.send(ch, data) {
                    Err(SendError::Full) => std::hint::spin_loop(),
                    r => return r,
                }
            }
            let now = Instant::now();
            if now.duration_since(start) >= timeout {
                return Err(SendError::Full);
            }
            if now.duration_since(last_yield) >= SPIN_YIELD_EVERY {
                std::thread::yield_now();
                last_yield = now;
            }
        }
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
        for c in &self.conns {
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
