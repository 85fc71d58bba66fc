//! The wire port: the one place frames enter and leave the engine.
//!
//! A [`WirePort`] owns the transport, the batch of datagrams to send, the
//! reassembler, admission and authentication ([`crate::wire::admission`],
//! [`crate::wire::auth`]) and per-peer liveness. Every datagram received
//! is admitted (an allowed address, or a peer something is held with),
//! authenticated (with a cluster key, every control frame), parsed, and
//! then sorted **once** to the system it belongs to:
//!
//! - frames of U-Net's remote channels (Data to an endpoint, the channel
//!   handshake, Close, Confirm) to the [`Channels`] the caller passes in,
//!   handled there and then (whole messages are never copied into a
//!   queue);
//! - frames of connections (VIs, and UDM's links, whose ids have
//!   [`LINK_BIT`]) to their system's [`Inbox`] as [`ConnIn`]s: [`PortState::vis`]
//!   and [`PortState::links`];
//! - SPINE's frames (kinds `0x30..=0x3F`, which [`Frame::parse`] does not
//!   know) whole to [`PortState::spine`], where SPINE's turn checks them
//!   against its links (token and sender) and takes their messages.
//!
//! The token-and-sender check is written once ([`PortState::check`]):
//! connections register (id → peer address, token) with
//! [`WirePort::route`], remote channels name theirs through
//! [`Channels::named`]; a frame that names nothing known, or carries
//! another token, or comes from another address, is dropped and counted
//! (`wire_drop_unknown_*`, `wire_drop_forged_token`) before anything of
//! it is reassembled.
//!
//! Liveness (Aeron's model): each engine sends a Keepalive to every peer
//! it holds confirmed channels with, every third of the timeout; a peer
//! from which no valid frame at all came for the timeout is taken as
//! gone ([`WirePort::check_peers`]): every inbox is told
//! ([`Inbox::silent`]), and it is not (it is silent).

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use unet_abi::EngineCounter;
use unet_sys as sys;

use crate::counters::Counters;
use crate::wire::admission::{Admission, AdmissionConfig};
use crate::wire::frag::FragIn;
use crate::wire::frame::spine as spine_frame;
use crate::wire::frame::{
    UdmAccept, UdmJoin, ViAccept, ViAck, ViClose, ViOpen, ViRefuse, KIND_OFFSET, VI_DATA_CHANNEL,
};
use crate::wire::reliable::{Ack, Sack};
use crate::wire::{
    auth, udp::DataTarget, udp::PushError, Body, ClusterKey, Data, Frame, FrameError, Message,
    Reassembler, ReassemblyConfig, SendBatch, Transport, WireDrop, WireStats, DATA_FLAG_VI,
};

/// The bit of a connection id that makes it a UDM link's: VIs and links
/// share the connection frames, and a frame goes to the inbox its id
/// names.
pub(crate) const LINK_BIT: u32 = 1 << 31;

/// The other end of a connection carried on the wire (a VI, a UDM link).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConnPeer {
    /// The peer engine's wire address.
    pub addr: SocketAddr,
    /// The connection there.
    pub vi: u32,
    /// Our frames to it carry this token.
    pub peer_token: u64,
    /// Its frames to us must carry this one.
    pub my_token: u64,
}

/// A connection's message to put on the wire, and the ack of the other
/// direction to carry along if it fits (the port says whether it took
/// it).
pub(crate) struct ConnOut<'a> {
    pub to: ConnPeer,
    pub seq: u32,
    pub bytes: &'a [u8],
    pub ack: Option<Ack>,
    /// A retransmission: the fragments the receiver said it holds are
    /// left out (and no ack goes along).
    pub held: Option<Sack>,
}

/// A connection frame (a VI's or a UDM link's) that came from the wire.
/// Those that name a connection (Data, Frag, Ack, Close) passed the
/// token-and-sender check; the set-up frames were admitted (an open or a
/// join only from an allowed peer) and, with a cluster key,
/// authenticated.
pub(crate) enum ConnIn {
    /// A whole message for connection `dst_vi`, sequence number `seq`.
    Data { dst_vi: u32, seq: u32, msg: Vec<u8> },
    /// A fragment of a message of several for VI `dst_vi` (not a UDM
    /// link), sequence number `seq`: the VI reassembles its own.
    Frag { dst_vi: u32, seq: u32, frag: FragIn },
    /// An acknowledgement.
    Ack(ViAck),
    /// A connection gone or broken.
    Close(ViClose),
    /// A connection request (with the requesting engine's incarnation).
    Open(SocketAddr, u64, ViOpen),
    /// An open accepted.
    Accept(SocketAddr, ViAccept),
    /// An open refused.
    Refuse(SocketAddr, ViRefuse),
    /// A UDM join.
    UdmJoin(SocketAddr, UdmJoin),
    /// A UDM join granted.
    UdmAccept(SocketAddr, UdmAccept),
}

/// What the wire brought one system since it last looked.
#[derive(Default)]
pub(crate) struct Inbox {
    /// Its frames, in the order they came.
    pub frames: Vec<ConnIn>,
    /// Peers found silent (what it holds with them breaks).
    pub silent: Vec<SocketAddr>,
}

/// Most SPINE frames, and bytes of them, the port holds for SPINE's turn
/// (more in one turn are dropped and counted in [`SpineInbox::overflow`]).
const SPINE_INBOX_MAX: usize = 4096;
const SPINE_INBOX_BYTES: usize = 4 << 20;

/// SPINE's frames as they came, whole (parsed again and checked by
/// SPINE's turn, which knows its links' tokens and peers).
#[derive(Default)]
pub(crate) struct SpineInbox {
    /// The frames' bytes, one after the other.
    pub bytes: Vec<u8>,
    /// Each frame: its sender, where its bytes start, its length.
    pub frames: Vec<(SocketAddr, usize, usize)>,
    /// Peers found silent (the links with them break).
    pub silent: Vec<SocketAddr>,
    /// Frames dropped because the inbox was full.
    pub overflow: u64,
}

impl SpineInbox {
    /// Whether SPINE has anything to take.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.frames.is_empty() && self.silent.is_empty()
    }

    /// Empty it, keeping its memory.
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.frames.clear();
        self.silent.clear();
    }
}

/// U-Net's remote channels, as the port sees them while it receives: the
/// port asks them what a frame's channel is, makes the check, reassembles
/// the message and hands over what passed. Called for each frame (a
/// generic, not a trait object: no dynamic dispatch per frame).
pub(crate) trait Channels {
    /// What a checked frame names (the channel, found in the caller's
    /// tables).
    type Named: Copy;
    /// Channel `chan` of endpoint `ep`: what it is, its peer's address and
    /// the token its frames carry; or why there is none to take frames
    /// (None: dropped without a count).
    fn named(
        &mut self,
        ep: u32,
        chan: u16,
    ) -> Result<(Self::Named, SocketAddr, u64), Option<WireDrop>>;
    /// A Data frame of channel `n` passed the check (before its message
    /// is reassembled): a first message confirms an accepted channel.
    fn data_checked(&mut self, st: &mut PortState, n: Self::Named);
    /// A whole message came on channel `n` (`counters`: the engine's).
    fn message(&mut self, counters: &Counters, n: Self::Named, msg: &[u8]);
    /// A checked Close (`confirm`: false) or Confirm (true) of channel
    /// `n` from `from`.
    fn close_or_confirm(
        &mut self,
        st: &mut PortState,
        from: SocketAddr,
        n: Self::Named,
        confirm: bool,
    );
    /// The channel handshake (OpenRequest, OpenAccept, OpenRefuse; `bytes`
    /// the frame, authenticated).
    fn handshake(
        &mut self,
        st: &mut PortState,
        from: SocketAddr,
        src_engine: u64,
        body: Body<'_>,
        bytes: &[u8],
    );
    /// A receiver is behind: the rest of the batch waits in the transport.
    fn behind(&self) -> bool;
}

/// Queue control frame `f` for `to`, with its authentication trailer when
/// there is a key.
fn push_control(batch: &mut SendBatch, key: Option<&ClusterKey>, to: SocketAddr, f: &Frame<'_>) {
    let _ = match key {
        None => batch.push_frame(to, f),
        Some(k) => batch.push_with(to, |buf| {
            let n = f.emit(buf)?;
            auth::seal_in_place(k, buf, n, auth::wall_ns(), sys::random_u64())
                .ok_or(FrameError::BufferTooSmall)
        }),
    };
}

/// Everything of the port but its transport: what handling a received
/// datagram works with while the transport is receiving.
pub(crate) struct PortState {
    pub(crate) counters: Arc<Counters>,
    pub(crate) batch: SendBatch,
    pub(crate) reasm: Reassembler,
    pub(crate) engine_id: u64,
    pub(crate) adm: Admission,
    /// The connections that may receive: id → the peer's address and the
    /// token its frames must carry.
    conns: HashMap<u32, (SocketAddr, u64)>,
    /// Frames for the engine's VIs.
    pub(crate) vis: Inbox,
    /// Frames for UDM's links.
    pub(crate) links: Inbox,
    /// Frames for SPINE.
    pub(crate) spine: SpineInbox,
    epoch: Instant,
    /// The wire clock, read once per batch received.
    pub(crate) now_ns: u64,
    /// The wall clock, read once per batch when a stamp needs it (0: not
    /// yet).
    wall_ns: u64,
}

impl PortState {
    /// The wire's clock: ns since the port started.
    pub(crate) fn clock_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Count a frame dropped.
    pub(crate) fn drop(&mut self, why: WireDrop) {
        self.reasm.stats.count_drop(why);
    }

    /// Queue a control frame `body` for `to` (authenticated with a cluster
    /// key).
    pub(crate) fn send_control(&mut self, to: SocketAddr, body: Body<'_>) {
        let f = Frame {
            src_engine: self.engine_id,
            body,
        };
        push_control(&mut self.batch, self.adm.key.as_ref(), to, &f);
    }

    /// A valid frame came from `from`.
    pub(crate) fn heard(&mut self, from: SocketAddr) {
        if let Some(p) = self.adm.peers.get_mut(&from) {
            p.last_rx = self.now_ns;
        }
    }

    /// The token-and-sender check of every frame that names a channel or
    /// a connection: `found` is what that is known as (its peer's address
    /// and token) or why it is not. What fails is counted.
    pub(crate) fn check<T>(
        &mut self,
        from: SocketAddr,
        token: u64,
        found: Result<(T, SocketAddr, u64), Option<WireDrop>>,
    ) -> Option<T> {
        match found {
            Ok((t, peer, tok)) if tok == token && peer == from => Some(t),
            Ok(_) => {
                self.drop(WireDrop::ForgedToken);
                None
            }
            Err(why) => {
                if let Some(w) = why {
                    self.drop(w);
                }
                None
            }
        }
    }

    /// Connection `id`, as registered.
    fn conn(&self, id: u32) -> Result<((), SocketAddr, u64), Option<WireDrop>> {
        match self.conns.get(&id) {
            Some(&(peer, token)) => Ok(((), peer, token)),
            None => Err(Some(WireDrop::UnknownEndpoint)),
        }
    }

    /// The inbox of connection `id`'s system.
    fn inbox(&mut self, id: u32) -> &mut Inbox {
        if id & LINK_BIT != 0 {
            &mut self.links
        } else {
            &mut self.vis
        }
    }

    /// One datagram from `from`: admitted, authenticated, parsed, sorted.
    fn datagram<C: Channels>(&mut self, chans: &mut C, from: SocketAddr, bytes: &[u8]) {
        // Admission: a peer we hold channels with (or opened one to), or
        // an allowed address.
        let known = self.adm.peers.contains_key(&from);
        if !known && !self.adm.allowed(from.ip()) {
            return self.drop(WireDrop::PeerNotAllowed);
        }
        // Authentication: with a key, every frame but Data carries a MAC
        // and a stamp, checked before anything else is read.
        let mut bytes = bytes;
        let mut stamp = None;
        if let Some(key) = &self.adm.key {
            if auth::carries_trailer(bytes) {
                match auth::open(key, bytes) {
                    Ok((frame, st, nonce)) => {
                        bytes = frame;
                        stamp = Some((st, nonce));
                    }
                    Err(auth::AuthError::BadMac) => return self.drop(WireDrop::BadMac),
                }
            }
        }
        let f = match Frame::parse(bytes) {
            Ok(f) => f,
            Err(FrameError::UnknownKind) if spine_frame::is_spine_kind(bytes[KIND_OFFSET]) => {
                return self.spine_frame(from, bytes, stamp)
            }
            Err(e) => return self.drop(WireDrop::from(e)),
        };
        if let Some((st, nonce)) = stamp {
            if self.wall_ns == 0 {
                self.wall_ns = auth::wall_ns();
            }
            if !self.adm.replay.fresh(f.src_engine, st, nonce, self.wall_ns) {
                return self.drop(WireDrop::Replay);
            }
        }
        if !matches!(f.body, Body::Data(_)) {
            // A valid control frame: the peer is alive.
            self.heard(from);
        }
        match f.body {
            Body::Data(d) if d.is_vi() => self.conn_data(from, f.src_engine, &d),
            Body::Data(d) => self.channel_data(chans, from, f.src_engine, &d),
            Body::OpenRequest(_) | Body::OpenAccept(_) | Body::OpenRefuse(_) => {
                chans.handshake(self, from, f.src_engine, f.body, bytes)
            }
            Body::Close(c) | Body::Confirm(c) => {
                let found = chans.named(c.dst_endpoint, c.dst_channel);
                if let Some(n) = self.check(from, c.token, found) {
                    let confirm = matches!(f.body, Body::Confirm(_));
                    chans.close_or_confirm(self, from, n, confirm);
                }
            }
            // Its work (the peer heard from) is done above.
            Body::Keepalive => {}
            Body::ViAck(a) => {
                if self.check(from, a.token, self.conn(a.dst_vi)).is_some() {
                    self.inbox(a.dst_vi).frames.push(ConnIn::Ack(a));
                }
            }
            Body::ViClose(c) => {
                if self.check(from, c.token, self.conn(c.dst_vi)).is_some() {
                    self.inbox(c.dst_vi).frames.push(ConnIn::Close(c));
                }
            }
            Body::ViOpen(o) => {
                // A peer named by a local client may answer, not open.
                if !self.adm.allowed(from.ip()) {
                    return self.drop(WireDrop::PeerNotAllowed);
                }
                self.vis.frames.push(ConnIn::Open(from, f.src_engine, o))
            }
            Body::ViAccept(a) => self.vis.frames.push(ConnIn::Accept(from, a)),
            Body::ViRefuse(r) => self.inbox(r.dst_vi).frames.push(ConnIn::Refuse(from, r)),
            Body::UdmJoin(j) => {
                // As a ViOpen: only an allowed peer may ask.
                if !self.adm.allowed(from.ip()) {
                    return self.drop(WireDrop::PeerNotAllowed);
                }
                self.links.frames.push(ConnIn::UdmJoin(from, j))
            }
            Body::UdmAccept(a) => self.links.frames.push(ConnIn::UdmAccept(from, a)),
        }
    }

    /// A SPINE frame (authenticated with a key, unless a message): an
    /// open only from an allowed peer, as a ViOpen; the rest is SPINE's
    /// turn's to check.
    fn spine_frame(&mut self, from: SocketAddr, bytes: &[u8], stamp: Option<(u64, u64)>) {
        let kind = bytes[KIND_OFFSET];
        if let Some((st, nonce)) = stamp {
            let src = spine_frame::src_engine(bytes).unwrap_or(0);
            if self.wall_ns == 0 {
                self.wall_ns = auth::wall_ns();
            }
            if !self.adm.replay.fresh(src, st, nonce, self.wall_ns) {
                return self.drop(WireDrop::Replay);
            }
        }
        if kind == spine_frame::KIND_OPEN && !self.adm.allowed(from.ip()) {
            return self.drop(WireDrop::PeerNotAllowed);
        }
        let inbox = &mut self.spine;
        if inbox.frames.len() >= SPINE_INBOX_MAX
            || inbox.bytes.len() + bytes.len() > SPINE_INBOX_BYTES
        {
            inbox.overflow += 1;
            return;
        }
        inbox.frames.push((from, inbox.bytes.len(), bytes.len()));
        inbox.bytes.extend_from_slice(bytes);
    }

    /// A Data frame of a connection: checked before anything of it is
    /// reassembled; a VI keeps its own fragments, a link's message is
    /// reassembled here.
    fn conn_data(&mut self, from: SocketAddr, src_engine: u64, d: &Data<'_>) {
        let id = d.dst_endpoint;
        if self.check(from, d.token, self.conn(id)).is_none() {
            return;
        }
        self.heard(from);
        if let Some(ack) = d.ack {
            // The ack it carries, checked as the message was: taken
            // before the message (it may complete sends, and open the
            // window for an answer).
            let a = ViAck::from_ack(id, d.token, ack);
            self.inbox(id).frames.push(ConnIn::Ack(a));
        }
        if d.frag_count > 1 && id & LINK_BIT == 0 {
            // A VI keeps the fragments of what is in its window.
            let Some(frag) = FragIn::of(d) else {
                return self.drop(WireDrop::BadLength);
            };
            let seq = d.msg_id;
            self.vis.frames.push(ConnIn::Frag {
                dst_vi: id,
                seq,
                frag,
            });
        } else if let Ok(Some(msg)) = self.reasm.push(from, src_engine, d, self.now_ns) {
            let m = ConnIn::Data {
                dst_vi: id,
                seq: d.msg_id,
                msg: msg.as_slice().to_vec(),
            };
            if let Message::Owned(v) = msg {
                self.reasm.recycle(v);
            }
            self.inbox(id).frames.push(m);
        }
    }

    /// A Data frame of a remote channel: checked, then its message
    /// reassembled and handed over.
    fn channel_data<C: Channels>(
        &mut self,
        chans: &mut C,
        from: SocketAddr,
        src_engine: u64,
        d: &Data<'_>,
    ) {
        let found = chans.named(d.dst_endpoint, d.dst_channel);
        let Some(n) = self.check(from, d.token, found) else {
            return;
        };
        chans.data_checked(self, n);
        self.heard(from);
        if let Ok(Some(msg)) = self.reasm.push(from, src_engine, d, self.now_ns) {
            chans.message(&self.counters, n, msg.as_slice());
            if let Message::Owned(v) = msg {
                self.reasm.recycle(v);
            }
        }
    }
}

/// The engine's port on the wire (see the module documentation).
pub(crate) struct WirePort {
    transport: Box<dyn Transport>,
    /// Everything else of it.
    pub(crate) st: PortState,
    reported: WireStats,
    /// Datagrams received when the socket's drop count was last read.
    drops_read_at: u64,
    /// Whether a datagram may wait: the last receive took some, or the
    /// engine's poller saw the transport readable since. While false,
    /// a turn skips the receive system call (see [`WirePort::recv_batch`]).
    readable: bool,
    /// Receives skipped since the last one made.
    skipped: u32,
}

/// Turns a port known empty skips its receive before it looks anyway: a
/// safety net, and the longest a datagram waits for a busy engine, whose
/// poller looks at the file descriptors only now and then.
const RECV_SKIP_MAX: u32 = 16;

impl WirePort {
    /// A port on `transport`, for engine `engine_id`.
    pub(crate) fn new(
        transport: Box<dyn Transport>,
        adm: AdmissionConfig,
        engine_id: u64,
        counters: Arc<Counters>,
    ) -> WirePort {
        WirePort {
            st: PortState {
                counters,
                batch: SendBatch::for_port(transport.config()),
                reasm: Reassembler::new(ReassemblyConfig::default()),
                engine_id,
                adm: Admission::new(adm),
                conns: HashMap::new(),
                vis: Inbox::default(),
                links: Inbox::default(),
                spine: SpineInbox::default(),
                epoch: Instant::now(),
                now_ns: 0,
                wall_ns: 0,
            },
            transport,
            reported: WireStats::default(),
            drops_read_at: 0,
            readable: true,
            skipped: 0,
        }
    }

    /// The engine's poller found the transport readable: the next turn
    /// receives.
    pub(crate) fn readable(&mut self) {
        self.readable = true;
    }

    /// Whether the next turn receives (see [`WirePort::readable`]).
    pub(crate) fn is_readable(&self) -> bool {
        self.readable
    }

    /// Connection `id` now takes frames from `peer` (its address and the
    /// token its frames carry); None: no more.
    pub(crate) fn route(&mut self, id: u32, peer: Option<(SocketAddr, u64)>) {
        match peer {
            Some(p) => {
                self.st.conns.insert(id, p);
            }
            None => {
                self.st.conns.remove(&id);
            }
        }
    }

    /// The wire's clock: ns since the port started.
    pub(crate) fn clock_ns(&self) -> u64 {
        self.st.clock_ns()
    }

    /// A connection with `addr` begins (or an open to it): it counts as a
    /// channel of that peer (its bound, keepalives, liveness). False when
    /// the peer holds its most channels.
    pub(crate) fn peer_add(&mut self, addr: SocketAddr) -> bool {
        let now_ns = self.clock_ns();
        let adm = &mut self.st.adm;
        let peer = adm
            .peers
            .entry(addr)
            .or_insert_with(|| crate::wire::admission::PeerState::new(now_ns));
        if peer.channels + peer.opening >= adm.channels_max {
            self.st
                .counters
                .engine(WireDrop::PeerChannelsFull.counter(), 1);
            return false;
        }
        if peer.channels == 0 {
            peer.last_rx = now_ns;
        }
        if let Some(c) = adm.ip_full(addr, false) {
            self.st.counters.engine(c, 1);
            return false;
        }
        if let Some(peer) = adm.peers.get_mut(&addr) {
            peer.channels += 1;
        }
        adm.ip_change(addr, 1, 0);
        true
    }

    /// A connection with `addr` ended.
    pub(crate) fn peer_remove(&mut self, addr: SocketAddr) {
        self.st.adm.channel_gone(addr, true);
    }

    /// Queue a connection's message (and the ack it carries along, if it
    /// fits); true if the ack went with it.
    pub(crate) fn send_conn(&mut self, o: ConnOut<'_>) -> bool {
        let t = DataTarget {
            dst_endpoint: o.to.vi,
            // Above every endpoint channel (MAX_CHANNELS): the reassembler
            // keys fragments by channel too, and never mixes a VI's with an
            // endpoint's of the same id.
            dst_channel: VI_DATA_CHANNEL,
            token: o.to.peer_token,
            flags: DATA_FLAG_VI,
        };
        let (to, id) = (o.to.addr, self.st.engine_id);
        if let Some(held) = o.held {
            // A retransmission of what the receiver misses.
            let _ = self.queue(|b| b.push_vi_fragments(to, id, t, o.seq, o.bytes, &held));
            return false;
        }
        self.queue(|b| b.push_vi_message(to, id, t, o.seq, o.bytes, o.ack))
            .unwrap_or(false)
    }

    /// Queue a message's Data frames for `to`. False (counted) if it did
    /// not go (see [`WirePort::queue`]).
    pub(crate) fn queue_message(
        &mut self,
        to: SocketAddr,
        t: DataTarget,
        msg_id: u32,
        msg: &[u8],
    ) -> bool {
        let id = self.st.engine_id;
        self.queue(|b| b.push_message(to, id, t, msg_id, msg))
            .is_some()
    }

    /// Queue with `push`; when the batch is full, send it and try once
    /// more. None (counted) if it still did not go.
    fn queue<T>(&mut self, push: impl Fn(&mut SendBatch) -> Result<T, PushError>) -> Option<T> {
        if let Ok(v) = push(&mut self.st.batch) {
            return Some(v);
        }
        // Queue full: send what we have and try once more.
        let _ = self.transport.send_batch(&mut self.st.batch);
        match push(&mut self.st.batch) {
            Ok(v) => Some(v),
            Err(_) => {
                self.st.batch.stats.count_drop(WireDrop::SendQueueFull);
                None
            }
        }
    }

    /// Largest datagram the port sends.
    pub(crate) fn max_datagram(&self) -> usize {
        self.transport.config().max_datagram
    }

    /// Queue a SPINE frame for `to`, written by `write` (a handshake
    /// frame, `control`, sealed with the cluster key if there is one).
    /// False (counted) if it did not go.
    pub(crate) fn send_spine(
        &mut self,
        to: SocketAddr,
        control: bool,
        write: impl Fn(&mut [u8]) -> Result<usize, FrameError>,
    ) -> bool {
        let key = if control {
            self.st.adm.key.clone()
        } else {
            None
        };
        match key {
            None => self.queue(|b| b.push_with(to, &write)).is_some(),
            Some(k) => self
                .queue(|b| {
                    b.push_with(to, |buf| {
                        let n = write(buf)?;
                        auth::seal_in_place(&k, buf, n, auth::wall_ns(), sys::random_u64())
                            .ok_or(FrameError::BufferTooSmall)
                    })
                })
                .is_some(),
        }
    }

    /// Queue a connection's control frame (authenticated with a cluster
    /// key).
    pub(crate) fn send_control(&mut self, to: SocketAddr, body: Body<'_>) {
        self.st.send_control(to, body);
    }

    /// Queue an ack (a data-path frame: not authenticated, protected by
    /// the connection's token and the peer's address).
    pub(crate) fn send_ack(&mut self, to: SocketAddr, ack: ViAck) {
        let f = Frame {
            src_engine: self.st.engine_id,
            body: Body::ViAck(ack),
        };
        if self.st.batch.push_frame(to, &f).is_err() {
            let _ = self.transport.send_batch(&mut self.st.batch);
            let _ = self.st.batch.push_frame(to, &f);
        }
    }

    pub(crate) fn raw_fd(&self) -> i32 {
        self.transport.raw_fd()
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.transport
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// The next time the port's timers (reassembly, peers) are due, or
    /// `also`'s (a system's on it) if sooner.
    pub(crate) fn next_deadline(&self, also: Option<Instant>) -> Option<Instant> {
        if !self.st.batch.is_empty() {
            // Datagrams wait for room in the socket: come back soon.
            return Some(Instant::now() + Duration::from_micros(200));
        }
        let epoch = self.st.epoch;
        let reasm = self
            .st
            .reasm
            .next_deadline()
            .map(|ns| epoch + Duration::from_nanos(ns));
        let peers = (!self.st.adm.peers.is_empty())
            .then(|| epoch + Duration::from_nanos(self.st.adm.next_check));
        [also, reasm, peers].into_iter().flatten().min()
    }

    /// Receive one batch: each datagram handled ([`PortState`]), frames of
    /// remote channels handed to `chans`, until none waits or a receiver
    /// is behind. Returns the datagrams handled and the transport's
    /// answer.
    pub(crate) fn recv_batch<C: Channels>(&mut self, chans: &mut C) -> (usize, io::Result<usize>) {
        // What the turn queued so far leaves first: a receive (a system
        // call, and what it delivers) must not hold it back.
        if !self.st.batch.is_empty() {
            let _ = self.transport.send_batch(&mut self.st.batch);
        }
        // A transport that had nothing at the last look and has not been
        // seen readable since is left alone for a few turns: an idle or
        // lightly used wire costs no system call per turn, and the
        // engine's poller (level-triggered, at every empty turn and before
        // every sleep) says when something arrives.
        if !self.readable && self.skipped < RECV_SKIP_MAX {
            self.skipped += 1;
            return (0, Ok(0));
        }
        self.skipped = 0;
        let mut handled = 0;
        let st = &mut self.st;
        st.now_ns = st.clock_ns();
        st.wall_ns = 0;
        // A receiver without room (see the dispatcher's docs): the rest
        // of the batch waits in the port, the rest of the datagrams in
        // the socket's buffer.
        let r = self.transport.recv_batch_until(&mut |from, bytes| {
            handled += 1;
            st.datagram(chans, from, bytes);
            !chans.behind()
        });
        // Empty: nothing until the poller says so. An error is retried.
        self.readable = !matches!(r, Ok(0));
        (handled, r)
    }

    /// Drop the messages whose reassembly timed out; whether any did.
    pub(crate) fn expire(&mut self, now_ns: u64) -> bool {
        self.st.reasm.expire(now_ns) > 0
    }

    /// Whether the peers are due to be looked at.
    pub(crate) fn peers_due(&self, now_ns: u64) -> bool {
        now_ns >= self.st.adm.next_check && !self.st.adm.peers.is_empty()
    }

    /// Keepalives to the peers we hold confirmed channels with; the peers
    /// silent past the timeout forgotten, and each inbox told. Returns the
    /// keepalives sent and the silent peers.
    pub(crate) fn check_peers(&mut self, now_ns: u64) -> (usize, Vec<SocketAddr>) {
        let st = &mut self.st;
        let adm = &mut st.adm;
        adm.next_check = now_ns + adm.check_every();
        let mut work = 0;
        let mut silent = Vec::new();
        let (liveness, every) = (adm.liveness_ns, adm.liveness_ns / 3);
        let key = adm.key.clone();
        let mut forgotten = Vec::new();
        let (batch, counters, engine_id) = (&mut st.batch, &st.counters, st.engine_id);
        adm.peers.retain(|&addr, p| {
            if p.channels == 0 {
                // Nothing held: forget it once no open waits either.
                return p.opening > 0;
            }
            if now_ns.saturating_sub(p.last_rx) > liveness {
                silent.push(addr);
                forgotten.push((addr, *p));
                return false;
            }
            if p.channels > p.half_open && now_ns.saturating_sub(p.last_keepalive) >= every {
                p.last_keepalive = now_ns;
                let f = Frame {
                    src_engine: engine_id,
                    body: Body::Keepalive,
                };
                push_control(batch, key.as_ref(), addr, &f);
                counters.engine(EngineCounter::WireKeepalivesSent, 1);
                work += 1;
            }
            true
        });
        for (addr, p) in forgotten {
            adm.forget_share(addr, p);
        }
        if !silent.is_empty() {
            st.vis.silent.extend_from_slice(&silent);
            st.links.silent.extend_from_slice(&silent);
            st.spine.silent.extend_from_slice(&silent);
            st.counters
                .engine(EngineCounter::WirePeersSilent, silent.len() as u64);
        }
        (work, silent)
    }

    /// Before the engine sleeps: if datagrams came since the last time, read
    /// the kernel's drop count at the socket, for drops no later datagram
    /// told of (the end of a burst), and publish the counters.
    pub(crate) fn before_sleep(&mut self) {
        let rx = self.transport.stats().datagrams_received;
        if rx != self.drops_read_at {
            self.drops_read_at = rx;
            self.transport.sync_drops();
            self.publish();
        }
    }

    /// Send what is queued (one sendmmsg per 64 datagrams) and publish the
    /// wire counters.
    pub(crate) fn flush(&mut self) {
        if !self.st.batch.is_empty() {
            let _ = self.transport.send_batch(&mut self.st.batch);
        }
        self.publish();
    }

    fn publish(&mut self) {
        let counters = &*self.st.counters;
        let mut now = self.transport.stats();
        now.add(&self.st.reasm.stats);
        now.add(&self.st.batch.stats);
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
        counters.engine(EngineCounter::WireGsoRuns, now.gso_runs - was.gso_runs);
        counters.engine(EngineCounter::WireGroRuns, now.gro_runs - was.gro_runs);
        counters.engine(
            EngineCounter::WireReassembled,
            now.messages_reassembled - was.messages_reassembled,
        );
        counters.engine(
            EngineCounter::WireInjectedDuplicates,
            now.injected_duplicates - was.injected_duplicates,
        );
        counters.engine(
            EngineCounter::WireInjectedReorders,
            now.injected_reorders - was.injected_reorders,
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
}

#[cfg(test)]
mod tests;
