//! SPINE over the UDP wire: links between two adapters (engines), and
//! the active messages a handler sends over one (`DEST_WIRE | link`).
//!
//! # Links
//!
//! A client of adapter A makes a link that *listens* with a token; a
//! client of adapter B makes one that *connects* to A's wire address with
//! that token: B sends a SpineOpen (its link id and the token A's frames
//! to it must carry), A answers with a SpineAccept (its link id and the
//! token B's frames must carry) and both links are `up`. Each side's link
//! id is `DEST_WIRE`'s id for the handlers of its adapter. A close (a
//! client's, or its process gone) sends a SpineClose; a peer silent past
//! the wire's liveness timeout makes the link `silent`. Caps:
//! [`LINKS_MAX`] per adapter, [`LINKS_PER_PROCESS`] per process. The
//! control requests that make, close and list links are in
//! `wire/setup.rs`.
//!
//! # Messages
//!
//! A handler's send to `DEST_WIRE | link` is a `WireTx` event: the runtime
//! frames the message (`[AmHeader][arguments][bulk data]`, frame kind
//! 0x34, see `wire::frame::spine`) onto the port, cut into fragments of
//! the port's datagram when a bulk message is larger than one. A SPINE
//! frame from the port is checked as hostile before anything of it is
//! used: the link it names must exist, be up, and the frame must come from
//! the link's peer with the link's token; a message's header must be
//! valid (a handler number of an installed extension handler, arguments
//! that fit a slot, lengths that add up, bulk data no longer than the
//! runtime's buffers); every drop is counted by reason, on the link when
//! the frame named one ([`LinkDrop`]), on the adapter otherwise
//! ([`AdapterDrop`]). A message that passes takes a message slot (and a
//! bulk buffer) from the pools and becomes a `WireRx` event with
//! `src_kind = AM_SRC_WIRE` and `src = link`, so that `reply` answers
//! over the same link.
//!
//! Delivery is best effort, as SPINE's wire is: a message lost, or one a
//! full queue or pool refuses, is gone (and counted); nothing is resent,
//! and nothing waits. A link reassembles one fragmented message at a
//! time: a fragment of a newer message abandons the one under way
//! (counted `incomplete`), one of an older message is dropped (`stale`).

use std::net::SocketAddr;

use unet_abi::spine::{
    AmHeader, AM_HEADER_SIZE, AM_SRC_WIRE, SPINE_FIRST_EXT_HANDLER, SYS_PORT_OUT,
};
use unet_sys as sys;

use crate::clients::{ClientId, ProcKey};
use crate::spine::events::{DropReason, Event, EventKind};
use crate::spine::port::{port_out, PortOutRefused, Ports, RtParts};
use crate::spine::rt::{Rt, E_BAD_DEST, E_DEAD};
use crate::spine::SpinePart;
use crate::wire::frame::spine::{
    self as frame, MsgHead, SpineFrame, SpineMsg, MSG_HEADER_LEN, REFUSE_FULL, REFUSE_NO_LISTENER,
};
use crate::wire::frame::MAX_MESSAGE;
use crate::wire::port::WirePort;

/// Links one adapter holds at most.
pub(crate) const LINKS_MAX: usize = 16;
/// Links one process may hold at most.
pub(crate) const LINKS_PER_PROCESS: usize = 4;
/// Most messages a turn takes from the wire.
const RX_MAX: usize = 4096;

/// A link's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LinkState {
    /// Waiting for a connect with its token.
    Listening,
    /// Its open sent, no answer yet.
    Connecting,
    /// Both sides joined.
    Up,
    /// The listening side refused the open.
    Refused,
    /// The peer closed it.
    Closed,
    /// The peer went silent past the liveness timeout.
    Silent,
}

impl LinkState {
    /// The name the listing shows.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            LinkState::Listening => "listening",
            LinkState::Connecting => "connecting",
            LinkState::Up => "up",
            LinkState::Refused => "refused",
            LinkState::Closed => "closed",
            LinkState::Silent => "silent",
        }
    }
}

/// Defines a drop-reason enum with its names, in one list.
macro_rules! reasons {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal),* $(,)? }) => {
        $(#[$m])*
        #[repr(u8)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum $name { $($(#[$vm])* $v),* }
        impl $name {
            /// Every reason, in number order.
            pub(crate) const ALL: &'static [$name] = &[$($name::$v),*];
            /// The name the listing shows.
            pub(crate) const fn name(self) -> &'static str {
                match self { $($name::$v => $s),* }
            }
        }
    };
}

reasons! {
    /// Why a link dropped a frame or a message, counted on the link.
    LinkDrop {
        /// The frame carried another token than the link's.
        ForgedToken = "forged_token",
        /// The frame came from another address than the link's peer.
        WrongSender = "wrong_sender",
        /// The link is not up (listening, connecting, or gone).
        NotUp = "not_up",
        /// The message's header is not valid (flags, source kind,
        /// arguments' length, a handler number out of range).
        BadHeader = "bad_header",
        /// The message's lengths do not add up, or its fragments disagree.
        BadLength = "bad_length",
        /// Its bulk data is longer than the runtime's buffers, or it is
        /// longer than a wire message.
        TooLong = "too_long",
        /// No extension handler has the message's number.
        NoHandler = "no_handler",
        /// No message slot was free.
        NoSlot = "no_slot",
        /// No bulk buffer was free.
        NoBuffer = "no_buffer",
        /// The event queue was full.
        QueueFull = "queue_full",
        /// A fragment received twice.
        Duplicate = "duplicate",
        /// A fragment of a message older than the one being reassembled.
        Stale = "stale",
        /// A message abandoned before all its fragments came.
        Incomplete = "incomplete",
        /// A message the port could not queue for sending.
        SendFailed = "send_failed",
        /// A message for `SYS_PORT_OUT` named no open port of this
        /// adapter, or carried no frame.
        BadPort = "bad_port",
    }
}

reasons! {
    /// Why the adapter dropped a SPINE frame that no link took.
    AdapterDrop {
        /// The frame named no link of this adapter.
        UnknownLink = "unknown_link",
        /// The frame did not parse (truncated, bad lengths, unknown kind).
        BadFrame = "bad_frame",
        /// An open showed a token nobody listens with.
        NoListener = "no_listener",
        /// An open came when the adapter held its most links.
        Full = "full",
        /// More SPINE frames came in one turn than the port holds.
        Overflow = "inbox_overflow",
    }
}

/// A message being reassembled from its fragments.
#[derive(Default)]
struct Reasm {
    active: bool,
    msg_id: u32,
    msg_len: u32,
    count: u16,
    got: u16,
    stride: u32,
    bits: Vec<u64>,
    data: Vec<u8>,
}

/// One link.
pub(crate) struct Link {
    pub id: u32,
    pub state: LinkState,
    pub owner: ClientId,
    proc: Option<ProcKey>,
    /// The peer adapter's wire address (once known).
    pub peer: Option<SocketAddr>,
    /// The peer's id of the link.
    pub peer_link: u32,
    /// Our frames to the peer carry this.
    peer_token: u64,
    /// The peer's frames must carry this.
    my_token: u64,
    /// What a connect must show (a listening link's).
    listen_token: u64,
    /// Counted as a channel of the peer by the port (keepalives,
    /// liveness, admission).
    peer_held: bool,
    next_msg_id: u32,
    reasm: Reasm,
    pub msgs_in: u64,
    pub msgs_out: u64,
    /// Messages for `SYS_PORT_OUT` queued for their port.
    pub port_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub drops: [u64; LinkDrop::ALL.len()],
}

impl Link {
    fn count(&mut self, why: LinkDrop) {
        self.drops[why as usize] += 1;
    }
}

/// Which links a handler may send to (what `Rt::send` checks).
#[derive(Default)]
pub(crate) struct WireDests {
    /// Ids of the links that are up.
    up: Vec<u32>,
    /// Ids of every link.
    known: Vec<u32>,
}

impl WireDests {
    /// 0 if link `id` is up; `E_DEAD` if it exists but is not up;
    /// `E_BAD_DEST` if there is no such link.
    #[inline]
    pub(crate) fn check(&self, id: u32) -> i32 {
        if self.up.contains(&id) {
            0
        } else if self.known.contains(&id) {
            E_DEAD
        } else {
            E_BAD_DEST
        }
    }
}

/// The adapter's links (see the module documentation).
#[derive(Default)]
pub(crate) struct WireLinks {
    slots: Vec<Option<Link>>,
    gens: Vec<u16>,
    /// Messages handlers sent to links, to frame at the end of the turn.
    pub out: Vec<(u32, u32)>,
    /// A message cut into fragments, laid out whole.
    scratch: Vec<u8>,
    pub drops: [u64; AdapterDrop::ALL.len()],
}

impl WireLinks {
    /// Whether there is anything to send.
    #[inline]
    pub(crate) fn has_out(&self) -> bool {
        !self.out.is_empty()
    }

    fn index(id: u32) -> usize {
        (id & 0xFF) as usize
    }

    /// Link `id`, if it exists.
    pub(crate) fn get(&self, id: u32) -> Option<&Link> {
        self.slots
            .get(Self::index(id))
            .and_then(|s| s.as_ref())
            .filter(|l| l.id == id)
    }

    fn get_mut(&mut self, id: u32) -> Option<&mut Link> {
        self.slots
            .get_mut(Self::index(id))
            .and_then(|s| s.as_mut())
            .filter(|l| l.id == id)
    }

    /// Every link.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Link> {
        self.slots.iter().flatten()
    }

    fn count(&mut self, why: AdapterDrop) {
        self.drops[why as usize] += 1;
    }

    /// Tell the runtime which links handlers may send to.
    fn sync(&self, rt: &mut Rt) {
        rt.wire.up.clear();
        rt.wire.known.clear();
        for l in self.iter() {
            rt.wire.known.push(l.id);
            if l.state == LinkState::Up {
                rt.wire.up.push(l.id);
            }
        }
    }

    /// A new link in state `state` (None: the adapter holds its most).
    fn add(&mut self, state: LinkState, owner: ClientId, proc: Option<ProcKey>) -> Option<u32> {
        let i = match self.slots.iter().position(|s| s.is_none()) {
            Some(i) => i,
            None if self.slots.len() < LINKS_MAX => {
                self.slots.push(None);
                self.gens.push(0);
                self.slots.len() - 1
            }
            None => return None,
        };
        let id = i as u32 | u32::from(self.gens[i]) << 8;
        self.slots[i] = Some(Link {
            id,
            state,
            owner,
            proc,
            peer: None,
            peer_link: 0,
            peer_token: 0,
            my_token: token(),
            listen_token: 0,
            peer_held: false,
            next_msg_id: 0,
            reasm: Reasm::default(),
            msgs_in: 0,
            msgs_out: 0,
            port_out: 0,
            bytes_in: 0,
            bytes_out: 0,
            drops: [0; LinkDrop::ALL.len()],
        });
        Some(id)
    }

    /// Remove link `id`: its peer is told if it was up, the port forgets
    /// it as a channel of the peer.
    fn remove(&mut self, id: u32, port: Option<&mut WirePort>) {
        let i = Self::index(id);
        let Some(l) = self.slots.get_mut(i).and_then(|s| s.take()) else {
            return;
        };
        self.gens[i] = self.gens[i].wrapping_add(1);
        if let (Some(port), Some(peer)) = (port, l.peer) {
            if l.state == LinkState::Up {
                let engine = port.st.engine_id;
                port.send_spine(peer, true, |b| {
                    frame::emit_close(b, engine, l.peer_link, l.peer_token)
                });
            }
            if l.peer_held {
                port.peer_remove(peer);
            }
        }
    }
}

/// A token: random, never 0.
fn token() -> u64 {
    sys::random_u64() | 1
}

// ---------------------------------------------------------------------
// The data path.

/// Take what the port received for SPINE: handshake frames change links,
/// messages become `WireRx` events. Returns the frames handled.
pub(crate) fn take_in(sp: &mut SpinePart, port: &mut WirePort) -> usize {
    let mut inbox = std::mem::take(&mut port.st.spine);
    let links = &mut sp.wire;
    let n = inbox.frames.len();
    if inbox.overflow > 0 {
        links.drops[AdapterDrop::Overflow as usize] += std::mem::take(&mut inbox.overflow);
    }
    let mut changed = false;
    for (i, &(from, at, len)) in inbox.frames.iter().enumerate() {
        if i >= RX_MAX {
            links.drops[AdapterDrop::Overflow as usize] += (n - i) as u64;
            break;
        }
        let Some(b) = inbox.bytes.get(at..at + len) else {
            continue;
        };
        match SpineFrame::parse(b) {
            Ok(SpineFrame::Msg(m)) => {
                // The event graph shows a `PORT_OUT` frame's `WireTx` event.
                let now = (!sp.trace.on()).then_some(&mut sp.ports);
                msg_in(links, &mut sp.rt, now, port, from, &m)
            }
            Ok(f) => changed |= handshake(links, port, from, f),
            Err(_) => links.count(AdapterDrop::BadFrame),
        }
    }
    for addr in inbox.silent.drain(..) {
        for l in links.slots.iter_mut().flatten() {
            if l.peer == Some(addr) && matches!(l.state, LinkState::Up | LinkState::Connecting) {
                l.state = LinkState::Silent;
                // The port forgot the peer itself.
                l.peer_held = false;
                changed = true;
            }
        }
    }
    if changed {
        links.sync(&mut sp.rt);
    }
    inbox.clear();
    port.st.spine = inbox;
    n
}

/// A handshake frame from `from`: whether a link changed state.
fn handshake(links: &mut WireLinks, port: &mut WirePort, from: SocketAddr, f: SpineFrame) -> bool {
    let engine = port.st.engine_id;
    match f {
        SpineFrame::Open {
            src_link,
            listen_token,
            src_token,
        } => {
            // The open again (our accept was lost): accept again.
            let again = links.iter().find(|l| {
                l.state == LinkState::Up
                    && l.peer == Some(from)
                    && l.peer_link == src_link
                    && l.peer_token == src_token
            });
            if let Some(l) = again {
                let (id, mine) = (l.id, l.my_token);
                port.send_spine(from, true, |b| {
                    frame::emit_accept(b, engine, src_link, src_token, id, mine)
                });
                return false;
            }
            let listening = links
                .slots
                .iter_mut()
                .flatten()
                .find(|l| l.state == LinkState::Listening && l.listen_token == listen_token);
            let Some(l) = listening else {
                links.count(AdapterDrop::NoListener);
                port.send_spine(from, true, |b| {
                    frame::emit_refuse(b, engine, src_link, src_token, REFUSE_NO_LISTENER)
                });
                return false;
            };
            if !port.peer_add(from) {
                links.count(AdapterDrop::Full);
                port.send_spine(from, true, |b| {
                    frame::emit_refuse(b, engine, src_link, src_token, REFUSE_FULL)
                });
                return false;
            }
            l.peer_held = true;
            l.peer = Some(from);
            l.peer_link = src_link;
            l.peer_token = src_token;
            l.state = LinkState::Up;
            let (id, mine) = (l.id, l.my_token);
            port.send_spine(from, true, |b| {
                frame::emit_accept(b, engine, src_link, src_token, id, mine)
            });
            true
        }
        SpineFrame::Accept {
            dst_link,
            token,
            src_link,
            accept_token,
        } => {
            let Some(l) = checked(links, from, dst_link, token) else {
                return false;
            };
            if l.state != LinkState::Connecting {
                // A repeated accept (our open went twice).
                return false;
            }
            l.peer_link = src_link;
            l.peer_token = accept_token;
            l.state = LinkState::Up;
            true
        }
        SpineFrame::Refuse {
            dst_link, token, ..
        } => {
            let Some(l) = checked(links, from, dst_link, token) else {
                return false;
            };
            if l.state != LinkState::Connecting {
                return false;
            }
            l.state = LinkState::Refused;
            if std::mem::take(&mut l.peer_held) {
                port.peer_remove(from);
            }
            true
        }
        SpineFrame::Close { dst_link, token } => {
            let Some(l) = checked(links, from, dst_link, token) else {
                return false;
            };
            if l.state != LinkState::Up {
                return false;
            }
            l.state = LinkState::Closed;
            if std::mem::take(&mut l.peer_held) {
                port.peer_remove(from);
            }
            true
        }
        SpineFrame::Msg(_) => false,
    }
}

/// Link `id` if the frame naming it came from its peer with its token;
/// the failure counted otherwise.
fn checked(links: &mut WireLinks, from: SocketAddr, id: u32, token: u64) -> Option<&mut Link> {
    if links.get(id).is_none() {
        links.count(AdapterDrop::UnknownLink);
        return None;
    }
    let l = links.get_mut(id)?;
    if l.peer != Some(from) {
        l.count(LinkDrop::WrongSender);
        return None;
    }
    if l.my_token != token {
        l.count(LinkDrop::ForgedToken);
        return None;
    }
    Some(l)
}

/// A message fragment from `from`: checked, reassembled, handed on.
fn msg_in(
    links: &mut WireLinks,
    rt: &mut Rt,
    now: Option<&mut Ports>,
    port: &mut WirePort,
    from: SocketAddr,
    m: &SpineMsg,
) {
    let Some(l) = checked(links, from, m.dst_link, m.token) else {
        return;
    };
    if l.state != LinkState::Up {
        l.count(LinkDrop::NotUp);
        return;
    }
    port.st.heard(from);
    if m.frag_count == 1 {
        deliver(l, rt, now, m.payload);
        return;
    }
    let max = AM_HEADER_SIZE + unet_abi::spine::AM_ARGS_MAX + rt.bufs.max_len();
    let mut r = std::mem::take(&mut l.reasm);
    if r.active && r.msg_id != m.msg_id {
        if (m.msg_id.wrapping_sub(r.msg_id) as i32) < 0 {
            l.reasm = r;
            return l.count(LinkDrop::Stale);
        }
        // A newer message: the one under way is abandoned.
        r.active = false;
        l.count(LinkDrop::Incomplete);
    }
    match place(&mut r, m, max) {
        Ok(true) => {
            r.active = false;
            deliver(l, rt, now, &r.data[..r.msg_len as usize]);
        }
        Ok(false) => {}
        Err(why) => l.count(why),
    }
    l.reasm = r;
}

/// Place fragment `m` in `r` (its message, or none, under way): whether
/// its message is now whole.
fn place(r: &mut Reasm, m: &SpineMsg, max: usize) -> Result<bool, LinkDrop> {
    if !r.active {
        if m.msg_len as usize > max {
            return Err(LinkDrop::TooLong);
        }
        let stride = m.stride();
        if stride == 0 || (m.msg_len as u64).div_ceil(u64::from(stride)) != u64::from(m.frag_count)
        {
            return Err(LinkDrop::BadLength);
        }
        r.active = true;
        r.msg_id = m.msg_id;
        r.msg_len = m.msg_len;
        r.count = m.frag_count;
        r.got = 0;
        r.stride = stride;
        r.bits.clear();
        r.bits.resize(usize::from(m.frag_count).div_ceil(64), 0);
        r.data.resize(m.msg_len as usize, 0);
    }
    if m.msg_len != r.msg_len || m.frag_count != r.count || m.stride() != r.stride {
        return Err(LinkDrop::BadLength);
    }
    let i = usize::from(m.frag_index);
    let bit = 1u64 << (i % 64);
    if r.bits[i / 64] & bit != 0 {
        return Err(LinkDrop::Duplicate);
    }
    r.bits[i / 64] |= bit;
    let off = m.frag_offset as usize;
    r.data[off..off + m.payload.len()].copy_from_slice(m.payload);
    r.got += 1;
    Ok(r.got == r.count)
}

/// A whole message from link `l`: checked, then a `WireRx` event (or,
/// for [`SYS_PORT_OUT`], the port's frame: [`port_out`], `now` its
/// ports).
fn deliver(l: &mut Link, rt: &mut Rt, now: Option<&mut Ports>, bytes: &[u8]) {
    let Some(hb) = bytes.first_chunk::<AM_HEADER_SIZE>() else {
        return l.count(LinkDrop::BadLength);
    };
    let mut hdr = AmHeader::from_bytes(hb);
    if !hdr.check() {
        return l.count(LinkDrop::BadHeader);
    }
    let (args_len, bulk_len) = (usize::from(hdr.args_len), hdr.bulk_len as usize);
    if AM_HEADER_SIZE + args_len + bulk_len != bytes.len() {
        return l.count(LinkDrop::BadLength);
    }
    if bulk_len > rt.bufs.max_len() {
        return l.count(LinkDrop::TooLong);
    }
    let args = &bytes[AM_HEADER_SIZE..AM_HEADER_SIZE + args_len];
    // Empty unless the header says bulk (`check`, and the lengths above).
    let bulk = &bytes[AM_HEADER_SIZE + args_len..];
    if hdr.handler == SYS_PORT_OUT {
        let parts = RtParts {
            msgs: &mut rt.msgs,
            bufs: &mut rt.bufs,
            queue: &mut rt.queue,
            ports: &rt.ports,
        };
        return match port_out(parts, now, args, bulk) {
            Ok(()) => {
                l.port_out += 1;
                l.msgs_in += 1;
                l.bytes_in += bytes.len() as u64;
            }
            Err(PortOutRefused::BadPort) => l.count(LinkDrop::BadPort),
            Err(PortOutRefused::NoBuffer) => l.count(LinkDrop::NoBuffer),
            Err(PortOutRefused::NoSlot) => l.count(LinkDrop::NoSlot),
            Err(PortOutRefused::QueueFull) => l.count(LinkDrop::QueueFull),
            // Counted on the port by reason.
            Err(PortOutRefused::TxRefused) => {}
        };
    }
    if hdr.handler < SPINE_FIRST_EXT_HANDLER
        || rt
            .handlers
            .get(usize::from(hdr.handler))
            .is_none_or(|h| h.is_none())
    {
        return l.count(LinkDrop::NoHandler);
    }
    let buf = if hdr.flags & unet_abi::spine::AM_BULK != 0 {
        match rt.bufs.alloc(bulk) {
            Some(b) => Some(b),
            None => {
                rt.queue.count_drop(DropReason::NoBuffer);
                return l.count(LinkDrop::NoBuffer);
            }
        }
    } else {
        None
    };
    hdr.src_kind = AM_SRC_WIRE;
    hdr.src = l.id;
    let Some(msg) = rt.msgs.alloc(hdr, args, buf) else {
        if let Some(b) = buf {
            rt.bufs.release(b);
        }
        rt.queue.count_drop(DropReason::NoSlot);
        return l.count(LinkDrop::NoSlot);
    };
    let ev = Event {
        kind: EventKind::WireRx,
        msg,
        arg: l.id,
    };
    if rt.queue.push(ev).is_err() {
        rt.msgs.free(msg, &mut rt.bufs);
        return l.count(LinkDrop::QueueFull);
    }
    l.msgs_in += 1;
    l.bytes_in += bytes.len() as u64;
}

/// Frame the messages handlers sent to links onto the port (none goes
/// without one: they are dropped, counted).
pub(crate) fn send_out(sp: &mut SpinePart, mut port: Option<&mut WirePort>) {
    let links = &mut sp.wire;
    let rt = &mut sp.rt;
    let out = std::mem::take(&mut links.out);
    let mut scratch = std::mem::take(&mut links.scratch);
    for &(id, msg) in &out {
        let sent = match (port.as_deref_mut(), links.get(id)) {
            (Some(p), Some(l)) if l.state == LinkState::Up => {
                frame_msg(p, l, rt, msg, &mut scratch)
            }
            (_, Some(_)) => Err(LinkDrop::NotUp),
            (_, None) => {
                rt.queue.count_drop(DropReason::BadDest);
                rt.msgs.free(msg, &mut rt.bufs);
                continue;
            }
        };
        if let Some(l) = links.get_mut(id) {
            match sent {
                Ok(n) => {
                    l.msgs_out += 1;
                    l.bytes_out += n as u64;
                    l.next_msg_id = l.next_msg_id.wrapping_add(1);
                }
                Err(why) => {
                    rt.queue.count_drop(DropReason::BadDest);
                    l.count(why);
                }
            }
        }
        rt.msgs.free(msg, &mut rt.bufs);
    }
    links.out = out;
    links.out.clear();
    links.scratch = scratch;
}

/// Frame message `msg` for link `l` onto the port: its bytes, or why not.
fn frame_msg(
    port: &mut WirePort,
    l: &Link,
    rt: &Rt,
    msg: u32,
    scratch: &mut Vec<u8>,
) -> Result<usize, LinkDrop> {
    let Some(m) = rt.msgs.get(msg) else {
        return Err(LinkDrop::SendFailed);
    };
    let bulk: &[u8] = match m.bulk {
        Some(b) => rt.bufs.data(b).unwrap_or(&[]),
        None => &[],
    };
    let mut hdr = m.hdr;
    hdr.bulk_len = bulk.len() as u32;
    let hb = hdr.to_bytes();
    let args = m.args();
    let len = AM_HEADER_SIZE + args.len() + bulk.len();
    if len > MAX_MESSAGE {
        return Err(LinkDrop::TooLong);
    }
    let (to, engine) = (l.peer.ok_or(LinkDrop::NotUp)?, port.st.engine_id);
    let stride = port.max_datagram().saturating_sub(MSG_HEADER_LEN);
    let mut h = MsgHead {
        dst_link: l.peer_link,
        token: l.peer_token,
        msg_id: l.next_msg_id,
        frag_index: 0,
        frag_count: 1,
        msg_len: len as u32,
        frag_offset: 0,
    };
    if len <= stride {
        // The common case: one datagram, written straight into the
        // port's batch.
        let ok = port.send_spine(to, false, |b| {
            frame::emit_msg(b, engine, &h, &[&hb, args, bulk])
        });
        return if ok {
            Ok(len)
        } else {
            Err(LinkDrop::SendFailed)
        };
    }
    let count = len.div_ceil(stride.max(1));
    if stride == 0 || count > usize::from(u16::MAX) {
        return Err(LinkDrop::TooLong);
    }
    scratch.clear();
    scratch.extend_from_slice(&hb);
    scratch.extend_from_slice(args);
    scratch.extend_from_slice(bulk);
    h.frag_count = count as u16;
    for (i, piece) in scratch.chunks(stride).enumerate() {
        h.frag_index = i as u16;
        h.frag_offset = (i * stride) as u32;
        if !port.send_spine(to, false, |b| frame::emit_msg(b, engine, &h, &[piece])) {
            return Err(LinkDrop::SendFailed);
        }
    }
    Ok(len)
}

mod setup;

pub(crate) use setup::{drop_client, handle};
