//! The UDP port: one non-blocking socket, batched system calls.
//!
//! Datagrams to send are queued in a [`SendBatch`], a fixed arena of bytes
//! allocated once, into which frames are written directly
//! ([`SendBatch::push_message`] fragments a message; [`SendBatch::push_frame`]
//! writes a control frame). [`UdpPort::send_batch`] hands them to the kernel
//! with `sendmmsg`, up to [`MAX_BATCH`] per system call, and never blocks:
//! what the kernel does not take (`EAGAIN`) stays queued for the next call.
//! [`UdpPort::recv_batch`] receives up to [`MAX_BATCH`] datagrams with one
//! `recvmmsg` into buffers allocated at bind time.
//!
//! Where the kernel offers them, two offloads cut the cost per datagram, the
//! real cost on loopback and fast links once system calls are batched:
//! segmentation (`UDP_SEGMENT`: a run of equal-size datagrams to one peer,
//! such as the fragments of a message, goes through the stack once) and
//! receive coalescing (`UDP_GRO`: such a run arrives in one buffer, which
//! `recv_batch` cuts back into datagrams). Both are on by default
//! ([`PortConfig::gso`], [`PortConfig::gro`]), invisible to callers, and
//! fall back to plain datagrams when refused.
//!
//! Fault injection: with [`PortConfig::drop_rate_ppm`] set, a generator
//! seeded by [`PortConfig::drop_seed`] drops that share of outgoing datagrams
//! before they reach the kernel, counted as [`WireDrop::InjectedDrop`].
//! [`PortConfig::dup_rate_ppm`] sends a share twice, the copy right after
//! the original, and [`PortConfig::reorder_rate_ppm`] holds a share back
//! behind the next one to three datagrams queued (counted in
//! [`WireStats::injected_duplicates`] and [`WireStats::injected_reorders`]).
//! A datagram held back with fewer than that queued behind it waits, last
//! in the queue, for later calls of [`UdpPort::send_batch`] to let what is
//! queued meanwhile go first (up to the rest of its count), and is sent
//! when its count is reached or, whatever came, once it has waited
//! [`REORDER_HOLD_MAX`]: nothing held back is lost (the engine comes back
//! within a fraction of a millisecond while anything is queued). Only
//! data-path frames are judged (Data and ViAck,
//! [`Kind::is_data_path`](super::Kind::is_data_path)); control frames,
//! whose number and order depend on timing, such as keepalives, pass
//! untouched and draw nothing, so the decisions depend only on the seed and
//! the order of the data-path datagrams: each one draws whether it is
//! dropped, else whether it is held back (and behind how many), else
//! whether it is duplicated.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use super::frag::{fragments, FragmentError};
use super::frame::{Body, Data, Frame, FrameError, ACK_TRAILER_LEN, DATA_HEADER_LEN, MAX_DATAGRAM};
use super::reliable::{Ack, Sack};
use super::{WireDrop, WireStats, XorShift};

/// Most datagrams per `sendmmsg`/`recvmmsg` call.
pub const MAX_BATCH: usize = 64;
/// Default datagram payload: an Ethernet MTU of 1500 less IPv4 and UDP headers.
pub const ETHERNET_DATAGRAM: usize = 1472;
/// Datagram payload of [`PortConfig::loopback`]: loopback's MTU is 64 KiB,
/// and fewer, larger datagrams are much cheaper there.
pub const LOOPBACK_DATAGRAM: usize = 65000;
/// Longest a datagram held back by injected reordering waits for the
/// datagrams it lets go first ([`PortConfig::reorder_rate_ppm`]).
pub const REORDER_HOLD_MAX: Duration = Duration::from_millis(1);
/// Smallest allowed [`PortConfig::max_datagram`]: a stride of 17 bytes still
/// fits a 1 MiB message in `u16::MAX` fragments.
pub const MIN_DATAGRAM: usize = DATA_HEADER_LEN + 17;

/// Settings of a [`UdpPort`] (and of the [`SendBatch`] made for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortConfig {
    /// Largest UDP payload sent and received, headers included
    /// ([`MIN_DATAGRAM`]..=[`MAX_DATAGRAM`]). Default [`ETHERNET_DATAGRAM`].
    /// Engines on one path must agree: a larger datagram from a peer is
    /// dropped as [`WireDrop::TruncatedDatagram`].
    pub max_datagram: usize,
    /// Datagrams per system call, 1..=[`MAX_BATCH`] (default 64).
    pub batch: usize,
    /// `SO_SNDBUF`/`SO_RCVBUF` asked for, best effort (default 4 MiB).
    pub socket_buffer: usize,
    /// Bytes of the send queue arena (default 4 MiB; must hold the largest
    /// message with its headers).
    pub send_queue_bytes: usize,
    /// Share of outgoing datagrams dropped on purpose, in parts per million
    /// (default 0).
    pub drop_rate_ppm: u32,
    /// Seed of the fault generator (drops, duplicates, reordering).
    pub drop_seed: u64,
    /// Share of outgoing datagrams sent twice, in parts per million
    /// (default 0).
    pub dup_rate_ppm: u32,
    /// Share of outgoing datagrams held back behind the next one to three
    /// queued, in parts per million (default 0).
    pub reorder_rate_ppm: u32,
    /// Send runs of equal-size datagrams with UDP segmentation offload
    /// (`UDP_SEGMENT`, Linux 4.18+): one trip through the stack per run
    /// instead of per datagram. Default true; turned off by the port when
    /// the kernel refuses it. The receiver sees ordinary datagrams.
    pub gso: bool,
    /// Let the kernel coalesce received runs of equal-size datagrams from
    /// one source (`UDP_GRO`, Linux 5.0+); [`UdpPort::recv_batch`] cuts
    /// them apart again, so callers still see one datagram at a time.
    /// Default true; receive buffers are then 64 KiB each.
    pub gro: bool,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            max_datagram: ETHERNET_DATAGRAM,
            batch: MAX_BATCH,
            socket_buffer: 4 << 20,
            send_queue_bytes: 4 << 20,
            drop_rate_ppm: 0,
            drop_seed: 0,
            dup_rate_ppm: 0,
            reorder_rate_ppm: 0,
            gso: true,
            gro: true,
        }
    }
}

impl PortConfig {
    /// Settings for a real link with an Ethernet MTU (the default).
    pub fn ethernet() -> Self {
        PortConfig::default()
    }

    /// Settings for loopback: [`LOOPBACK_DATAGRAM`]-byte datagrams.
    pub fn loopback() -> Self {
        PortConfig {
            max_datagram: LOOPBACK_DATAGRAM,
            ..PortConfig::default()
        }
    }

    /// Payload bytes per Data fragment (`max_datagram - DATA_HEADER_LEN`).
    pub fn stride(&self) -> usize {
        self.max_datagram.saturating_sub(DATA_HEADER_LEN)
    }

    fn validate(&self) -> io::Result<()> {
        let bad = |what: &str| {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                what.to_string(),
            ))
        };
        if !(MIN_DATAGRAM..=MAX_DATAGRAM).contains(&self.max_datagram) {
            return bad("max_datagram out of range");
        }
        if !(1..=MAX_BATCH).contains(&self.batch) {
            return bad("batch out of range");
        }
        if self.send_queue_bytes < self.max_datagram {
            return bad("send_queue_bytes smaller than a datagram");
        }
        if self.drop_rate_ppm > 1_000_000
            || self.dup_rate_ppm > 1_000_000
            || self.reorder_rate_ppm > 1_000_000
        {
            return bad("a fault rate is above 1000000 ppm");
        }
        Ok(())
    }
}

/// Where a Data message goes on the receiving engine (from the channel
/// table of the sending endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataTarget {
    /// Endpoint id on the receiving engine.
    pub dst_endpoint: u32,
    /// Channel index on the receiving engine.
    pub dst_channel: u16,
    /// Token of that channel, chosen by the receiver.
    pub token: u64,
    /// Reserved flags (0).
    pub flags: u16,
}

/// Why [`SendBatch`] did not queue a message or frame. Nothing was queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushError {
    /// Not enough room now: send the batch, then try again. Not counted by
    /// the batch; a caller that gives the message up counts
    /// [`WireDrop::SendQueueFull`].
    Full,
    /// Can never be queued: longer than [`MAX_MESSAGE`](super::MAX_MESSAGE)
    /// or than the queue, or an invalid frame.
    TooLarge,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    dst: SocketAddr,
    start: usize,
    len: usize,
    dropped: bool,
    /// Had its fault-injection draw (entries are judged in queue order,
    /// but one held back moves behind entries not judged yet).
    judged: bool,
    /// Held back by injected reordering: how many more datagrams queued
    /// after it go first.
    hold: u8,
    /// Went behind a later datagram (injected reordering; counted once).
    reordered: bool,
}

impl Entry {
    fn new(dst: SocketAddr, start: usize, len: usize) -> Entry {
        Entry {
            dst,
            start,
            len,
            dropped: false,
            judged: false,
            hold: 0,
            reordered: false,
        }
    }
}

/// Datagrams waiting to be sent, in an arena allocated once.
pub struct SendBatch {
    arena: Vec<u8>,
    /// End of the bytes in use.
    tail: usize,
    entries: Vec<Entry>,
    /// First entry not yet sent.
    head: usize,
    /// Entries before this index had their fault-injection draw.
    judged: usize,
    /// The entry held back by injected reordering, and since when: always
    /// the last one queued when a send returns.
    held: Option<(usize, Instant)>,
    max_datagram: usize,
    max_entries: usize,
    /// Counters: `messages_queued` and the `message_too_large` drops.
    pub stats: WireStats,
}

impl SendBatch {
    /// A batch for datagrams of at most `max_datagram` bytes, in an arena of
    /// `queue_bytes` (clamped to at least one datagram).
    pub fn new(max_datagram: usize, queue_bytes: usize) -> Self {
        let max_datagram = max_datagram.clamp(1, MAX_DATAGRAM);
        let queue_bytes = queue_bytes.max(max_datagram);
        let max_entries = queue_bytes / 16 + MAX_BATCH;
        SendBatch {
            arena: vec![0; queue_bytes],
            tail: 0,
            entries: Vec::with_capacity(max_entries.min(8192)),
            head: 0,
            judged: 0,
            held: None,
            max_datagram,
            max_entries,
            stats: WireStats::default(),
        }
    }

    /// A batch sized for a port with these settings.
    pub fn for_port(cfg: &PortConfig) -> Self {
        SendBatch::new(cfg.max_datagram, cfg.send_queue_bytes)
    }

    /// Datagrams queued and not yet sent.
    pub fn len(&self) -> usize {
        self.entries.len() - self.head
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of datagrams queued.
    pub fn queued_bytes(&self) -> usize {
        self.entries[self.head..].iter().map(|e| e.len).sum()
    }

    /// Drops everything queued (for example when the peer is gone) and
    /// returns how many datagrams were discarded.
    pub fn clear(&mut self) -> usize {
        let n = self.len();
        self.reset();
        n
    }

    fn reset(&mut self) {
        self.entries.clear();
        self.head = 0;
        self.judged = 0;
        self.held = None;
        self.tail = 0;
    }

    /// Makes room for `bytes` more bytes in `datagrams` more entries, moving
    /// unsent datagrams to the front of the arena if needed.
    fn reserve(&mut self, bytes: usize, datagrams: usize) -> Result<(), PushError> {
        if bytes > self.arena.len() || datagrams > self.max_entries {
            return Err(PushError::TooLarge);
        }
        if self.head == self.entries.len() {
            self.reset();
        }
        let fits = |s: &Self| {
            s.tail + bytes <= s.arena.len() && s.entries.len() + datagrams <= s.max_entries
        };
        if fits(self) {
            return Ok(());
        }
        if self.head > 0 {
            // Injected reordering may leave entries out of arena order.
            let from = self.entries[self.head..]
                .iter()
                .map(|e| e.start)
                .min()
                .unwrap_or(self.tail);
            self.arena.copy_within(from..self.tail, 0);
            self.tail -= from;
            self.entries.drain(..self.head);
            for e in &mut self.entries {
                e.start -= from;
            }
            self.judged = self.judged.saturating_sub(self.head);
            // The held entry is at or after `head`, never sent yet.
            self.held = self.held.map(|(h, since)| (h - self.head, since));
            self.head = 0;
        }
        if fits(self) {
            Ok(())
        } else {
            Err(PushError::Full)
        }
    }

    /// Counts a push that can never succeed. `Full` is not counted here:
    /// the caller may send the batch and retry, and counts
    /// [`WireDrop::SendQueueFull`] itself if it gives the message up.
    fn fail(&mut self, e: PushError) -> PushError {
        if e == PushError::TooLarge {
            self.stats.count_drop(WireDrop::MessageTooLarge);
        }
        e
    }

    /// Queues one datagram written by `write`, which gets a buffer of
    /// `max_datagram` bytes and returns how many it wrote (or an error, in
    /// which case nothing is queued).
    pub fn push_with(
        &mut self,
        dst: SocketAddr,
        write: impl FnOnce(&mut [u8]) -> Result<usize, FrameError>,
    ) -> Result<(), PushError> {
        let room = self.max_datagram;
        if let Err(e) = self.reserve(room, 1) {
            return Err(self.fail(e));
        }
        let start = self.tail;
        match write(&mut self.arena[start..start + room]) {
            Ok(len) if len <= room => {
                self.tail += len;
                self.entries.push(Entry::new(dst, start, len));
                Ok(())
            }
            _ => Err(self.fail(PushError::TooLarge)),
        }
    }

    /// Queues one frame (a control frame, or a Data frame made by hand).
    pub fn push_frame(&mut self, dst: SocketAddr, frame: &Frame<'_>) -> Result<(), PushError> {
        self.push_with(dst, |buf| frame.emit(buf))
    }

    /// Cuts `msg` into Data frames of at most `max_datagram` bytes and queues
    /// all of them for `dst`, or none. Returns the number of fragments.
    pub fn push_message(
        &mut self,
        dst: SocketAddr,
        src_engine: u64,
        to: DataTarget,
        msg_id: u32,
        msg: &[u8],
    ) -> Result<u16, PushError> {
        self.push_with_ack(dst, src_engine, to, msg_id, msg, (None, None))
    }

    /// Whether a message of `len` bytes and an ack fit in one datagram
    /// ([`DATA_FLAG_ACK`](super::frame::DATA_FLAG_ACK)).
    pub fn carries_ack(&self, len: usize) -> bool {
        len + DATA_HEADER_LEN + ACK_TRAILER_LEN <= self.max_datagram
    }

    /// As [`SendBatch::push_message`], for a VI's message (`to.flags` has
    /// [`DATA_FLAG_VI`](super::frame::DATA_FLAG_VI)), carrying `ack` along
    /// when the message and the ack fit in one datagram
    /// ([`SendBatch::carries_ack`]). Returns whether the ack went with it.
    pub fn push_vi_message(
        &mut self,
        dst: SocketAddr,
        src_engine: u64,
        to: DataTarget,
        msg_id: u32,
        msg: &[u8],
        ack: Option<Ack>,
    ) -> Result<bool, PushError> {
        let ack = ack.filter(|_| self.carries_ack(msg.len()));
        self.push_with_ack(dst, src_engine, to, msg_id, msg, (ack, None))?;
        Ok(ack.is_some())
    }

    /// Queue the fragments of a VI's message that `held` does not cover
    /// (a retransmission of what the receiver misses of it), with no ack.
    pub fn push_vi_fragments(
        &mut self,
        dst: SocketAddr,
        src_engine: u64,
        to: DataTarget,
        msg_id: u32,
        msg: &[u8],
        held: &Sack,
    ) -> Result<u16, PushError> {
        self.push_with_ack(dst, src_engine, to, msg_id, msg, (None, Some(held)))
    }

    fn push_with_ack(
        &mut self,
        dst: SocketAddr,
        src_engine: u64,
        to: DataTarget,
        msg_id: u32,
        msg: &[u8],
        // The ack to carry, and the fragments to leave out.
        (ack, skip): (Option<Ack>, Option<&Sack>),
    ) -> Result<u16, PushError> {
        let stride = self.max_datagram.saturating_sub(DATA_HEADER_LEN);
        let pieces = match fragments(msg.len(), stride) {
            Ok(p) => p,
            Err(FragmentError::MessageTooLarge | FragmentError::StrideTooSmall) => {
                return Err(self.fail(PushError::TooLarge))
            }
        };
        let count = pieces.len();
        let trailer = if ack.is_some() { ACK_TRAILER_LEN } else { 0 };
        if let Err(e) = self.reserve(msg.len() + count * DATA_HEADER_LEN + trailer, count) {
            return Err(self.fail(e));
        }
        let (first_entry, first_tail) = (self.entries.len(), self.tail);
        for p in pieces {
            if skip.is_some_and(|k| k.has_frag(p.index)) {
                continue;
            }
            let (off, len) = (p.offset as usize, p.len as usize);
            let frame = Frame {
                src_engine,
                body: Body::Data(Data {
                    dst_endpoint: to.dst_endpoint,
                    dst_channel: to.dst_channel,
                    flags: to.flags,
                    token: to.token,
                    msg_id,
                    frag_index: p.index,
                    frag_count: p.count,
                    msg_len: msg.len() as u32,
                    frag_offset: p.offset,
                    payload: &msg[off..off + len],
                    // On one fragment only: a message with an ack fits one
                    // datagram (carries_ack), or has none.
                    ack,
                }),
            };
            let start = self.tail;
            // Room was reserved above for every fragment with its header.
            let Ok(n) = frame.emit(&mut self.arena[start..]) else {
                // Not reached for pieces made by `fragments`; undo and report.
                self.entries.truncate(first_entry);
                self.tail = first_tail;
                return Err(self.fail(PushError::TooLarge));
            };
            self.tail += n;
            self.entries.push(Entry::new(dst, start, n));
        }
        self.stats.messages_queued += 1;
        Ok(count as u16)
    }

    /// The queued datagrams, oldest first (for tests and tracing).
    pub fn datagrams(&self) -> impl Iterator<Item = (SocketAddr, &[u8])> + '_ {
        self.entries[self.head..]
            .iter()
            .filter(|e| !e.dropped)
            .map(|e| (e.dst, &self.arena[e.start..e.start + e.len]))
    }
}

/// A non-blocking UDP socket of the engine.
pub struct UdpPort {
    sock: UdpSocket,
    cfg: PortConfig,
    rng: XorShift,
    /// `cfg.batch` receive buffers of `cfg.max_datagram` bytes each.
    rx: Vec<u8>,
    /// Counters: datagrams and bytes, system calls, and the drops of the port.
    pub stats: WireStats,
    /// The last error `sendmmsg` reported for a datagram it refused.
    pub last_send_error: Option<io::ErrorKind>,
    /// Segmentation offload in use (see [`PortConfig::gso`]).
    gso: bool,
    /// Receive coalescing in use (see [`PortConfig::gro`]).
    gro: bool,
    /// Bytes per receive buffer.
    rx_slot: usize,
    /// The kernel reports its drops at this socket (`SO_RXQ_OVFL`).
    drops_reported: bool,
    /// The kernel's drop count last seen (see [`RxControl::socket_drops`]).
    socket_drops: u32,
    /// What the last `recvmmsg` filled, one entry per receive buffer.
    rx_entries: Vec<RxEntry>,
    /// The next datagram to hand over: entry index, byte offset in it.
    rx_next: (usize, usize),
}

/// One receive buffer filled by `recvmmsg`: a datagram, or a run of them
/// (`UDP_GRO`) of `seg` bytes each (the last may be shorter).
#[derive(Clone, Copy, Debug)]
struct RxEntry {
    /// None when the datagram is dropped already (cut short by the kernel,
    /// or an unknown kind of source address).
    src: Option<SocketAddr>,
    len: usize,
    seg: usize,
    /// Datagrams in the entry.
    count: usize,
}

/// Room for the control messages of one received datagram (`UDP_GRO` and
/// `SO_RXQ_OVFL`, 24 bytes each).
const CMSG_SPACE_BYTES: usize = 64;

/// A control message buffer, aligned for `cmsghdr`.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct CmsgSpace([u8; CMSG_SPACE_BYTES]);

/// What the control messages of one received datagram say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct RxControl {
    /// `UDP_GRO`: the segment size of a coalesced run.
    gro_segment: Option<usize>,
    /// `SO_RXQ_OVFL`: how many packets the kernel had dropped at this
    /// socket (its receive buffer full) when this one was queued; a running
    /// count that wraps.
    socket_drops: Option<u32>,
}

/// Reads the control bytes the kernel wrote (walked as `CMSG_NXTHDR` does,
/// without pointers); anything malformed ends the walk.
fn parse_control(ctl: &[u8]) -> RxControl {
    const HDR: usize = size_of::<libc::cmsghdr>();
    const ALIGN: usize = size_of::<usize>();
    let mut out = RxControl::default();
    let mut off = 0;
    while off + HDR <= ctl.len() {
        let word = |at: usize, n: usize| -> Option<u64> {
            let b = ctl.get(off + at..off + at + n)?;
            let mut a = [0u8; 8];
            a[..n].copy_from_slice(b);
            Some(u64::from_ne_bytes(a) & (u64::MAX >> (64 - 8 * n)))
        };
        let Some(len) = word(0, size_of::<usize>()) else {
            break;
        };
        let len = len as usize;
        let (Some(level), Some(ty)) = (word(ALIGN, 4), word(ALIGN + 4, 4)) else {
            break;
        };
        let (level, ty) = (level as u32 as i32, ty as u32 as i32);
        if len < HDR || len > ctl.len() - off {
            break;
        }
        let data = HDR.div_ceil(ALIGN) * ALIGN;
        if len >= data + 4 {
            let v = word(data, 4).map(|v| v as u32);
            if level == libc::SOL_UDP && ty == libc::UDP_GRO {
                out.gro_segment = v.map(|v| v as usize);
            } else if level == libc::SOL_SOCKET && ty == libc::SO_RXQ_OVFL {
                out.socket_drops = v;
            }
        }
        off += len.div_ceil(ALIGN) * ALIGN;
    }
    out
}

/// Most datagrams sent as one segmented run (the kernel's
/// `UDP_MAX_SEGMENTS` is 64 on older kernels).
pub const GSO_MAX_SEGMENTS: usize = 64;

/// A control message `UDP_SEGMENT` carrying the segment size, laid out as
/// `CMSG_FIRSTHDR`/`CMSG_DATA` expect: the header, then the `u16` at
/// `CMSG_LEN(0)`.
#[derive(Clone, Copy)]
#[repr(C)]
struct SegCmsg {
    hdr: libc::cmsghdr,
    seg: u16,
}

// SAFETY: CMSG_LEN and CMSG_SPACE are pure arithmetic on their argument.
const SEG_CMSG_LEN: usize = unsafe { libc::CMSG_LEN(2) } as usize;
// SAFETY: as above.
const SEG_CMSG_SPACE: usize = unsafe { libc::CMSG_SPACE(2) } as usize;
// SAFETY: as above.
const _: () = assert!(std::mem::offset_of!(SegCmsg, seg) == unsafe { libc::CMSG_LEN(0) } as usize);
const _: () = assert!(size_of::<SegCmsg>() <= SEG_CMSG_SPACE);

impl SegCmsg {
    fn new(seg: u16) -> Self {
        // SAFETY: cmsghdr is a C struct of integers (and, on some C
        // libraries, padding fields); all-zero bytes are a valid value.
        let mut hdr: libc::cmsghdr = unsafe { std::mem::zeroed() };
        hdr.cmsg_len = SEG_CMSG_LEN as _;
        hdr.cmsg_level = libc::SOL_UDP;
        hdr.cmsg_type = libc::UDP_SEGMENT;
        SegCmsg { hdr, seg }
    }
}

/// A socket address in the form the kernel takes.
#[derive(Clone, Copy)]
#[repr(C)]
union RawAddr {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
    storage: libc::sockaddr_storage,
}

impl RawAddr {
    fn empty() -> Self {
        RawAddr {
            v6: libc::sockaddr_in6 {
                sin6_family: 0,
                sin6_port: 0,
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr { s6_addr: [0; 16] },
                sin6_scope_id: 0,
            },
        }
    }

    fn set(&mut self, a: &SocketAddr) -> libc::socklen_t {
        match a {
            SocketAddr::V4(a) => {
                self.v4 = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                size_of::<libc::sockaddr_in>() as libc::socklen_t
            }
            SocketAddr::V6(a) => {
                self.v6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                size_of::<libc::sockaddr_in6>() as libc::socklen_t
            }
        }
    }

    fn get(&self, len: libc::socklen_t) -> Option<SocketAddr> {
        // SAFETY: every variant is plain old data for which any bit pattern
        // is valid, and the union is at least as large as each of them, so
        // reading any field reads initialised bytes of the right size. The
        // family field sits at the same offset in all of them.
        let family = unsafe { self.v4.sin_family } as libc::c_int;
        let len = len as usize;
        match family {
            libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
                // SAFETY: as above; the kernel wrote an AF_INET address.
                let a = unsafe { self.v4 };
                Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes()),
                    u16::from_be(a.sin_port),
                )))
            }
            libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as above; the kernel wrote an AF_INET6 address.
                let a = unsafe { self.v6 };
                let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
                let port = u16::from_be(a.sin6_port);
                // An IPv4 peer of a dual-stack socket has one identity: its
                // IPv4 address, as when it is reached through an IPv4 socket.
                Some(match ip.to_ipv4_mapped() {
                    Some(v4) => SocketAddr::V4(SocketAddrV4::new(v4, port)),
                    None => SocketAddr::V6(SocketAddrV6::new(
                        ip,
                        port,
                        a.sin6_flowinfo,
                        a.sin6_scope_id,
                    )),
                })
            }
            _ => None,
        }
    }
}

fn empty_iovec() -> libc::iovec {
    libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }
}

fn empty_mmsghdr() -> libc::mmsghdr {
    // SAFETY: mmsghdr is a C struct of integers and raw pointers; all-zero
    // bytes are a valid value of it (null pointers, zero lengths).
    unsafe { std::mem::zeroed() }
}

/// `SO_MEMINFO` (asm-generic/socket.h, the number on the engine's targets)
/// and the length of the array it fills (`SK_MEMINFO_VARS`).
const SO_MEMINFO: libc::c_int = 55;
const SK_MEMINFO_VARS: usize = 9;

/// Receive buffer size with `UDP_GRO`: a coalesced run is at most 64 KiB.
const GRO_SLOT: usize = 65535;

/// Turns a boolean socket option on; false when the kernel refuses it.
fn enable(fd: RawFd, level: libc::c_int, option: libc::c_int) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: `fd` is an open socket owned by the caller; the option value
    // points at a live c_int whose size is passed as the length.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            option,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

impl UdpPort {
    /// Binds a non-blocking UDP socket on `addr` (port 0 picks a free one)
    /// and asks for large socket buffers (best effort: `SO_*BUFFORCE` when
    /// privileged, else capped by the system limits).
    pub fn bind(addr: SocketAddr, cfg: PortConfig) -> io::Result<UdpPort> {
        cfg.validate()?;
        let sock = UdpSocket::bind(addr)?;
        sock.set_nonblocking(true)?;
        unet_sys::set_socket_buffers(&sock, cfg.socket_buffer);
        let fd = sock.as_raw_fd();
        let gro = cfg.gro && enable(fd, libc::SOL_UDP, libc::UDP_GRO);
        let drops_reported = enable(fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL);
        let rx_slot = if gro { GRO_SLOT } else { cfg.max_datagram };
        Ok(UdpPort {
            sock,
            rng: XorShift::new(cfg.drop_seed),
            rx: vec![0; cfg.batch * rx_slot],
            gro,
            rx_slot,
            cfg,
            stats: WireStats::default(),
            last_send_error: None,
            gso: cfg.gso,
            drops_reported,
            socket_drops: 0,
            rx_entries: Vec::with_capacity(MAX_BATCH),
            rx_next: (0, 0),
        })
    }

    /// The socket, for the engine's epoll (readable: call `recv_batch`;
    /// writable after a partial send: call `send_batch` again).
    pub fn raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// The settings in force.
    pub fn config(&self) -> &PortConfig {
        &self.cfg
    }

    /// Sends what `batch` holds until it is empty or the kernel would block.
    /// Never blocks.
    ///
    /// One `sendmmsg` carries up to [`PortConfig::batch`] messages. With
    /// [`PortConfig::gso`], each message may be a run of up to
    /// [`GSO_MAX_SEGMENTS`] datagrams of one size (the last may be shorter)
    /// for one destination, contiguous in the batch (the fragments of one
    /// message are), which the kernel cuts into datagrams (`UDP_SEGMENT`).
    /// If the kernel or the route does not support it, the port turns
    /// segmentation off and carries on without.
    ///
    /// Returns the number of datagrams the kernel took. Datagrams the kernel
    /// refused (an error other than `EAGAIN`/`ENOBUFS`) are removed and
    /// counted as [`WireDrop::SendFailed`]; those dropped by fault injection
    /// as [`WireDrop::InjectedDrop`]. What remains in `batch` afterwards
    /// ([`SendBatch::len`]) was not sent yet: call again when the socket is
    /// writable. `Err` only for a broken socket (`EBADF`, `ENOTSOCK`, …).
    pub fn send_batch(&mut self, batch: &mut SendBatch) -> io::Result<usize> {
        if batch.is_empty() {
            return Ok(0);
        }
        self.stats.send_batches += 1;
        let c = &self.cfg;
        if c.drop_rate_ppm > 0 || c.dup_rate_ppm > 0 || c.reorder_rate_ppm > 0 {
            self.inject_faults(batch, Instant::now());
        } else {
            batch.judged = batch.entries.len();
        }
        // A datagram held back by injected reordering stays, last, for the
        // next call.
        let end = batch.entries.len() - usize::from(batch.held.is_some());

        let mut addrs = [RawAddr::empty(); MAX_BATCH];
        let mut iovs = [empty_iovec(); MAX_BATCH];
        let mut msgs = [empty_mmsghdr(); MAX_BATCH];
        let mut cmsgs = [SegCmsg::new(0); MAX_BATCH];
        // Per message: index of its last entry, and its number of datagrams.
        let mut last = [0usize; MAX_BATCH];
        let mut segs = [0usize; MAX_BATCH];
        let mut sent = 0;
        loop {
            while batch.head < end && batch.entries[batch.head].dropped {
                batch.head += 1;
            }
            if batch.head == end {
                if end == batch.entries.len() {
                    batch.reset();
                }
                break;
            }
            let gso = self.gso;
            let mut n = 0;
            let mut i = batch.head;
            while n < self.cfg.batch && i < end {
                let e = batch.entries[i];
                if e.dropped {
                    i += 1;
                    continue;
                }
                // Extend a run of equal-size, contiguous datagrams to one
                // destination; a shorter one ends it.
                let (mut k, mut total, mut j) = (1, e.len, i + 1);
                if gso && e.len > 0 {
                    while k < GSO_MAX_SEGMENTS && j < end {
                        let f = &batch.entries[j];
                        if f.dropped
                            || f.dst != e.dst
                            || f.start != e.start + total
                            || f.len > e.len
                            || f.len == 0
                            || total + f.len > MAX_DATAGRAM
                        {
                            break;
                        }
                        total += f.len;
                        k += 1;
                        j += 1;
                        if f.len < e.len {
                            break;
                        }
                    }
                }
                let slice = &mut batch.arena[e.start..e.start + total];
                iovs[n] = libc::iovec {
                    iov_base: slice.as_mut_ptr().cast(),
                    iov_len: slice.len(),
                };
                let alen = addrs[n].set(&e.dst);
                let m = &mut msgs[n].msg_hdr;
                m.msg_name = (&mut addrs[n] as *mut RawAddr).cast();
                m.msg_namelen = alen;
                m.msg_iov = &mut iovs[n];
                m.msg_iovlen = 1;
                if k > 1 {
                    cmsgs[n] = SegCmsg::new(e.len as u16);
                    m.msg_control = (&mut cmsgs[n] as *mut SegCmsg).cast();
                    m.msg_controllen = SEG_CMSG_SPACE as _;
                } else {
                    m.msg_control = std::ptr::null_mut();
                    m.msg_controllen = 0;
                }
                msgs[n].msg_len = 0;
                last[n] = j - 1;
                segs[n] = k;
                n += 1;
                i = j;
            }
            // SAFETY: `msgs[..n]` are initialised headers whose name, iov and
            // control pointers point into `addrs`, `iovs`, `cmsgs` and
            // `batch.arena`, all alive and not otherwise borrowed until the
            // call returns; each iov covers bytes inside the arena and each
            // control length is that of its `SegCmsg`. The kernel only reads
            // them (and writes `msg_len`).
            let rc = unsafe {
                libc::sendmmsg(
                    self.sock.as_raw_fd(),
                    msgs.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            self.stats.send_syscalls += 1;
            if rc < 0 {
                let err = io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN | libc::ENOBUFS) => break,
                    Some(libc::EBADF | libc::ENOTSOCK | libc::EFAULT) => return Err(err),
                    Some(
                        libc::EINVAL
                        | libc::EIO
                        | libc::EMSGSIZE
                        | libc::ENOPROTOOPT
                        | libc::EOPNOTSUPP,
                    ) if segs[0] > 1 => {
                        // Segmentation refused (old kernel, no checksum
                        // offload on the route): send datagram by datagram.
                        self.gso = false;
                        continue;
                    }
                    _ => {
                        // The first message was refused: drop its datagrams
                        // (one destination) and go on.
                        self.last_send_error = Some(err.kind());
                        self.stats.drops[WireDrop::SendFailed as usize] += segs[0] as u64;
                        batch.head = last[0] + 1;
                        continue;
                    }
                }
            }
            let done = (rc as usize).min(n);
            if done == 0 {
                break;
            }
            for (m, k) in msgs.iter().zip(segs).take(done) {
                self.stats.bytes_sent += u64::from(m.msg_len);
                self.stats.datagrams_sent += k as u64;
                self.stats.gso_runs += u64::from(k > 1);
                sent += k;
            }
            batch.head = last[done - 1] + 1;
        }
        Ok(sent)
    }

    /// Draws the injected faults of the datagrams queued since the last
    /// call (see the module documentation), once the datagram held back
    /// last has let those queued since go first (up to the rest of its
    /// count). `now` tells whether it waited long enough.
    fn inject_faults(&mut self, batch: &mut SendBatch, now: Instant) {
        if let Some((h, since)) = batch.held.take() {
            let queued_since = batch.entries.len() - 1 - h;
            let e = &mut batch.entries[h];
            let k = usize::from(e.hold).min(queued_since);
            e.hold -= k as u8;
            if k > 0 && !e.reordered {
                e.reordered = true;
                self.stats.injected_reorders += 1;
            }
            if e.hold > 0 && now.duration_since(since) < REORDER_HOLD_MAX {
                // Still waiting, last again.
                batch.held = Some((h + k, since));
            } else {
                e.hold = 0;
            }
            if k > 0 {
                batch.entries[h..=h + k].rotate_left(1);
                // The entries that moved up are those not judged yet.
                batch.judged = batch.judged.min(h);
            }
        }
        let c = self.cfg;
        if c.drop_rate_ppm == 0 && c.dup_rate_ppm == 0 && c.reorder_rate_ppm == 0 {
            batch.judged = batch.entries.len();
            return;
        }
        let mut i = batch.judged;
        while i < batch.entries.len() {
            let e = &mut batch.entries[i];
            if e.judged {
                i += 1;
                continue;
            }
            e.judged = true;
            let kind = batch.arena.get(e.start + 3).copied();
            if !kind
                .and_then(super::Kind::from_u8)
                .is_some_and(super::Kind::is_data_path)
            {
                i += 1;
                continue;
            }
            if self.rng.chance_ppm(c.drop_rate_ppm) {
                e.dropped = true;
                self.stats.count_drop(WireDrop::InjectedDrop);
                i += 1;
                continue;
            }
            if self.rng.chance_ppm(c.reorder_rate_ppm) {
                // Behind the next one to three datagrams.
                let want = 1 + (self.rng.next_u64() % 3) as usize;
                let last = batch.entries.len() - 1;
                let k = want.min(last - i);
                if k > 0 {
                    batch.entries[i..=i + k].rotate_left(1);
                    batch.entries[i + k].reordered = true;
                    self.stats.injected_reorders += 1;
                }
                if k < want {
                    // Now last: it waits for more. One held back before
                    // (last until now) was just passed, and goes.
                    if let Some((h, _)) = batch.held.take() {
                        debug_assert_eq!(h, last);
                        batch.entries[last - 1].hold = 0;
                    }
                    batch.entries[last].hold = (want - k) as u8;
                    batch.held = Some((last, now));
                }
                // Entry `i` is now the next one (not judged yet), or this
                // one again if nothing followed (judged: skipped).
                continue;
            }
            if self.rng.chance_ppm(c.dup_rate_ppm) {
                // The copy points at the same bytes; it is judged no further.
                let copy = *e;
                batch.entries.insert(i + 1, copy);
                if let Some((h, _)) = batch.held.as_mut() {
                    // Held back, hence last: after the copy.
                    *h += 1;
                }
                self.stats.injected_duplicates += 1;
                i += 1;
            }
            i += 1;
        }
        batch.judged = batch.entries.len();
    }

    /// Whether received runs may arrive coalesced (`UDP_GRO` accepted).
    pub fn gro_active(&self) -> bool {
        self.gro
    }

    /// Whether sends still use UDP segmentation offload (it is turned off
    /// when the kernel refuses it).
    pub fn gso_active(&self) -> bool {
        self.gso
    }

    /// Receives up to [`PortConfig::batch`] datagrams with one `recvmmsg`
    /// (non-blocking) and calls `f(source, datagram)` for each. Datagrams
    /// larger than [`PortConfig::max_datagram`] are dropped as
    /// [`WireDrop::TruncatedDatagram`]. On a dual-stack IPv6 socket, an IPv4
    /// source comes back as a plain IPv4 address (not `::ffff:a.b.c.d`).
    /// Returns the number of datagrams taken (0 when none was waiting); when
    /// it equals the batch size, more may be waiting.
    pub fn recv_batch(&mut self, mut f: impl FnMut(SocketAddr, &[u8])) -> io::Result<usize> {
        self.recv_batch_until(|src, d| {
            f(src, d);
            true
        })
    }

    /// As [`UdpPort::recv_batch`], but `f` may stop the hand-over by
    /// returning false: the datagrams after that one stay with the port and
    /// come first in the next call, before any new `recvmmsg`. Returns the
    /// number of datagrams taken in this call (handed over or dropped).
    pub fn recv_batch_until(
        &mut self,
        f: impl FnMut(SocketAddr, &[u8]) -> bool,
    ) -> io::Result<usize> {
        if self.rx_next.0 >= self.rx_entries.len() && self.receive()? == 0 {
            return Ok(0);
        }
        Ok(self.hand_over(f))
    }

    /// Reads the kernel's drop count at this socket now (`SO_MEMINFO`) and
    /// counts what it grew by. The control messages of arriving datagrams
    /// carry the same count, but only a datagram queued after the drops
    /// tells of them: this is for the end of a burst (the engine calls it
    /// before it sleeps, when datagrams came since the last call).
    pub fn sync_socket_drops(&mut self) {
        let mut info = [0u32; SK_MEMINFO_VARS];
        let mut len = size_of_val(&info) as libc::socklen_t;
        // SAFETY: `info` is a live, writable buffer of `len` bytes, and the
        // kernel writes at most `len` bytes there and the length to `len`.
        let rc = unsafe {
            libc::getsockopt(
                self.sock.as_raw_fd(),
                libc::SOL_SOCKET,
                SO_MEMINFO,
                info.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let at = libc::SK_MEMINFO_DROPS as usize;
        if rc == 0 && len as usize >= (at + 1) * size_of::<u32>() {
            self.note_socket_drops(info[at]);
        }
    }

    /// The kernel's running count of drops at this socket was `n` (it
    /// wraps): what it grew by since last seen was lost there. A count
    /// older than the one last seen (a datagram queued before an
    /// `SO_MEMINFO` reading) is ignored.
    fn note_socket_drops(&mut self, n: u32) {
        let new = n.wrapping_sub(self.socket_drops);
        if new != 0 && new < 1 << 31 {
            self.stats.socket_overflows += new as u64;
            self.socket_drops = n;
        }
    }

    /// Whether datagrams received are still waiting to be handed over.
    pub fn has_pending(&self) -> bool {
        self.rx_next.0 < self.rx_entries.len()
    }

    /// One `recvmmsg` into the receive buffers; fills `rx_entries` and
    /// counts. Returns the number of buffers filled.
    fn receive(&mut self) -> io::Result<usize> {
        self.rx_entries.clear();
        self.rx_next = (0, 0);
        let slot = self.rx_slot;
        let n = self.cfg.batch;
        let mut addrs = [RawAddr::empty(); MAX_BATCH];
        let mut iovs = [empty_iovec(); MAX_BATCH];
        let mut msgs = [empty_mmsghdr(); MAX_BATCH];
        let mut ctl = [CmsgSpace([0; CMSG_SPACE_BYTES]); MAX_BATCH];
        for (i, chunk) in self.rx.chunks_exact_mut(slot).take(n).enumerate() {
            iovs[i] = libc::iovec {
                iov_base: chunk.as_mut_ptr().cast(),
                iov_len: chunk.len(),
            };
            let m = &mut msgs[i].msg_hdr;
            m.msg_name = (&mut addrs[i] as *mut RawAddr).cast();
            m.msg_namelen = size_of::<RawAddr>() as libc::socklen_t;
            m.msg_iov = &mut iovs[i];
            m.msg_iovlen = 1;
            if self.gro || self.drops_reported {
                m.msg_control = (&mut ctl[i] as *mut CmsgSpace).cast();
                m.msg_controllen = CMSG_SPACE_BYTES as _;
            }
        }
        let rc = loop {
            // SAFETY: `msgs[..n]` point at `n` distinct, live buffers of
            // `slot` bytes in `self.rx`, at `addrs` entries large enough for
            // any socket address and at `ctl` buffers (lengths passed in
            // `msg_namelen`, `msg_controllen`); nothing else borrows them
            // during the call. The kernel writes at most those lengths. A
            // null timeout is allowed.
            let rc = unsafe {
                libc::recvmmsg(
                    self.sock.as_raw_fd(),
                    msgs.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            self.stats.recv_syscalls += 1;
            if rc >= 0 {
                break rc as usize;
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => {
                    self.stats.recv_empty += 1;
                    return Ok(0);
                }
                // An ICMP error reported for an earlier send: not about
                // anything waiting here.
                Some(libc::ECONNREFUSED | libc::EHOSTUNREACH | libc::ENETUNREACH) => return Ok(0),
                _ => return Err(err),
            }
        };
        for (i, m) in msgs.iter().enumerate().take(rc.min(n)) {
            let len = (m.msg_len as usize).min(slot);
            let h = &m.msg_hdr;
            let control = if self.gro || self.drops_reported {
                // `msg_controllen` is a size_t with glibc, a socklen_t with musl.
                #[allow(clippy::unnecessary_cast)]
                let used = (h.msg_controllen as usize).min(CMSG_SPACE_BYTES);
                parse_control(&ctl[i].0[..used])
            } else {
                RxControl::default()
            };
            if let Some(n) = control.socket_drops {
                self.note_socket_drops(n);
            }
            // With UDP_GRO, the kernel may hand over a run of datagrams of
            // one size (the last may be shorter) in one buffer.
            let seg = control
                .gro_segment
                .filter(|&g| g > 0 && self.gro)
                .unwrap_or(len.max(1));
            let count = len.div_ceil(seg).max(1);
            if count > 1 {
                self.stats.gro_runs += 1;
            }
            self.stats.datagrams_received += count as u64;
            self.stats.bytes_received += len as u64;
            let src = if h.msg_flags & libc::MSG_TRUNC != 0 {
                self.stats.drops[WireDrop::TruncatedDatagram as usize] += count as u64;
                None
            } else {
                addrs[i].get(h.msg_namelen)
            };
            self.rx_entries.push(RxEntry {
                src,
                len,
                seg,
                count,
            });
        }
        Ok(self.rx_entries.len())
    }

    /// Hands the received datagrams over from `rx_next` on, until `f`
    /// returns false or none is left. Returns the number taken.
    fn hand_over(&mut self, mut f: impl FnMut(SocketAddr, &[u8]) -> bool) -> usize {
        let size = self.cfg.max_datagram;
        let slot = self.rx_slot;
        let mut taken = 0;
        while let Some(&e) = self.rx_entries.get(self.rx_next.0) {
            let i = self.rx_next.0;
            let Some(src) = e.src else {
                taken += e.count;
                self.rx_next = (i + 1, 0);
                continue;
            };
            let buf = &self.rx[i * slot..i * slot + e.len];
            if e.len == 0 {
                taken += 1;
                self.rx_next = (i + 1, 0);
                if !f(src, buf) {
                    return taken;
                }
                continue;
            }
            // Each datagram is judged alone, as if it came by itself.
            let mut at = self.rx_next.1;
            while at < e.len {
                let end = (at + e.seg).min(e.len);
                let d = &buf[at..end];
                at = end;
                taken += 1;
                if d.len() > size {
                    self.stats.count_drop(WireDrop::TruncatedDatagram);
                } else if !f(src, d) {
                    self.rx_next = if at < e.len { (i, at) } else { (i + 1, 0) };
                    return taken;
                }
            }
            self.rx_next = (i + 1, 0);
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::frag::{Message, Reassembler, ReassemblyConfig};
    use crate::wire::testutil::pattern;
    use crate::wire::MAX_MESSAGE;
    use std::time::{Duration, Instant};

    const LO: &str = "127.0.0.1:0";

    fn target(ch: u16) -> DataTarget {
        DataTarget {
            dst_endpoint: 1,
            dst_channel: ch,
            token: 0x7070,
            flags: 0,
        }
    }

    /// The receive path of the engine, reduced: parse, check the token,
    /// reassemble. Counts drops in `stats`.
    struct Rx {
        reasm: Reassembler,
        stats: WireStats,
        got: Vec<(u32, Vec<u8>)>,
        /// Every msg_id of which a Data frame arrived.
        seen: std::collections::HashSet<u32>,
    }

    impl Rx {
        fn new() -> Self {
            Rx {
                reasm: Reassembler::new(ReassemblyConfig::default()),
                stats: WireStats::default(),
                got: Vec::new(),
                seen: Default::default(),
            }
        }

        fn drain(&mut self, port: &mut UdpPort, now: u64) -> usize {
            let mut total = 0;
            loop {
                let Rx {
                    reasm,
                    stats,
                    got,
                    seen,
                } = self;
                let n = port
                    .recv_batch(|src, dgram| match Frame::parse(dgram) {
                        Err(e) => stats.count_drop(e.into()),
                        Ok(Frame {
                            src_engine,
                            body: Body::Data(d),
                        }) => {
                            if d.token != 0x7070 {
                                stats.count_drop(WireDrop::ForgedToken);
                                return;
                            }
                            seen.insert(d.msg_id);
                            if let Ok(Some(m)) = reasm.push(src, src_engine, &d, now) {
                                got.push((d.msg_id, m.as_slice().to_vec()));
                                if let Message::Owned(v) = m {
                                    reasm.recycle(v);
                                }
                            }
                        }
                        Ok(_) => {}
                    })
                    .unwrap();
                total += n;
                if n == 0 {
                    return total;
                }
            }
        }
    }

    fn size_of_msg(i: u32) -> usize {
        // Sizes around the fragment edges, plus some large ones.
        let s = ETHERNET_DATAGRAM - DATA_HEADER_LEN;
        [0, 1, s - 1, s, s + 1, 3 * s + 5, 20_000, 100_000][i as usize % 8]
    }

    #[test]
    fn loopback_exchange_of_fragmented_messages() {
        let mut a = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
        let mut b = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
        let dst = b.local_addr().unwrap();
        let mut batch = SendBatch::for_port(a.config());
        let mut rx = Rx::new();
        let total = 200u32;
        let mut frags = 0usize;
        for id in 0..total {
            let msg = pattern(size_of_msg(id), u64::from(id));
            frags += usize::from(batch.push_message(dst, 77, target(3), id, &msg).unwrap());
            if id % 4 == 3 {
                a.send_batch(&mut batch).unwrap();
                assert!(batch.is_empty());
                rx.drain(&mut b, 0);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while rx.got.len() < total as usize && Instant::now() < deadline {
            a.send_batch(&mut batch).unwrap();
            rx.drain(&mut b, 0);
        }
        assert_eq!(rx.got.len(), total as usize, "stats {:?}", b.stats);
        for (id, m) in &rx.got {
            assert_eq!(m, &pattern(size_of_msg(*id), u64::from(*id)), "msg {id}");
        }
        assert_eq!(a.stats.datagrams_sent as usize, frags);
        assert_eq!(b.stats.datagrams_received as usize, frags);
        assert_eq!(a.stats.bytes_sent, b.stats.bytes_received);
        assert!(
            a.stats.send_syscalls < frags as u64 / 8,
            "batched: {:?}",
            a.stats
        );
        assert_eq!(
            rx.stats.total_drops() + a.stats.total_drops() + b.stats.total_drops(),
            0
        );
    }

    /// Sends `total` messages of 1 to 5 fragments from a port dropping
    /// `ppm` of its datagrams; returns (receiver, sender stats, fragments).
    fn lossy_run(ppm: u32, seed: u64, total: u32) -> (Rx, WireStats, u64) {
        let cfg = PortConfig {
            drop_rate_ppm: ppm,
            drop_seed: seed,
            ..PortConfig::default()
        };
        let mut a = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
        let mut b = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
        let dst = b.local_addr().unwrap();
        let mut batch = SendBatch::for_port(a.config());
        let mut rx = Rx::new();
        let mut frags = 0u64;
        for id in 0..total {
            let msg = pattern(lossy_len(id), 99 + u64::from(id));
            frags += u64::from(batch.push_message(dst, 5, target(1), id, &msg).unwrap());
            if id % 8 == 7 || id + 1 == total {
                a.send_batch(&mut batch).unwrap();
                rx.drain(&mut b, 0);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while b.stats.datagrams_received < a.stats.datagrams_sent && Instant::now() < deadline {
            rx.drain(&mut b, 0);
        }
        assert_eq!(b.stats.datagrams_received, a.stats.datagrams_sent);
        (rx, a.stats, frags)
    }

    /// 1 to 5 fragments at the default datagram size.
    fn lossy_len(id: u32) -> usize {
        1000 + (id as usize % 5) * 1400
    }

    #[test]
    fn injected_drops_lose_whole_messages_never_corrupt() {
        let total = 400u32;
        // (drop rate, expected share of messages delivered: mean of (1-p)^k
        // over k = 1..=5 fragments).
        for (ppm, seed) in [(0, 1), (10_000, 2), (100_000, 3), (300_000, 4)] {
            let (mut rx, tx, frags) = lossy_run(ppm, seed, total);
            let injected = tx.drop_count(WireDrop::InjectedDrop);
            assert_eq!(tx.datagrams_sent + injected, frags);
            let p = f64::from(ppm) / 1e6;
            let rate = injected as f64 / frags as f64;
            assert!((rate - p).abs() < 0.05, "ppm {ppm}: dropped {rate}");
            // Every delivered message is intact; the others are lost whole.
            for (id, m) in &rx.got {
                assert_eq!(m, &pattern(lossy_len(*id), 99 + u64::from(*id)), "msg {id}");
            }
            let delivered = rx.got.len() as u64;
            let expect = (1..=5).map(|k| (1.0 - p).powi(k)).sum::<f64>() / 5.0;
            let share = delivered as f64 / f64::from(total);
            assert!(
                (share - expect).abs() < 0.1,
                "ppm {ppm}: {share} vs {expect}"
            );
            if ppm == 0 {
                assert_eq!(delivered, u64::from(total));
            }
            // Every message that arrived in part is counted once as lost
            // when its time is up; messages of which nothing arrived leave
            // no trace at the receiver.
            let partial = rx.seen.len() as u64 - delivered;
            assert_eq!(rx.reasm.in_flight() as u64, partial);
            rx.reasm.expire(ReassemblyConfig::default().timeout_ns);
            assert_eq!(
                rx.reasm.stats.drop_count(WireDrop::ReassemblyTimeout),
                partial
            );
            assert_eq!(rx.reasm.in_flight(), 0);
            assert!(ppm < 100_000 || partial > 0);
        }
        // Same seed, same drops.
        let (_, t1, _) = lossy_run(100_000, 3, 100);
        let (_, t2, _) = lossy_run(100_000, 3, 100);
        assert_eq!(t1.drops, t2.drops);
        assert_eq!(t1.datagrams_sent, t2.datagrams_sent);
    }

    #[test]
    fn injected_duplicates_and_reordering_never_lose_or_corrupt() {
        let cfg = PortConfig {
            dup_rate_ppm: 100_000,
            reorder_rate_ppm: 100_000,
            drop_seed: 11,
            ..PortConfig::default()
        };
        let mut a = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
        let mut b = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
        let dst = b.local_addr().unwrap();
        // A small queue, often full.
        let mut batch = SendBatch::new(cfg.max_datagram, 64 << 10);
        let mut rx = Rx::new();
        let total = 300u32;
        let mut frags = 0u64;
        for id in 0..total {
            let msg = pattern(lossy_len(id), u64::from(id));
            loop {
                match batch.push_message(dst, 5, target(1), id, &msg) {
                    Ok(n) => {
                        frags += u64::from(n);
                        break;
                    }
                    Err(PushError::Full) => {
                        a.send_batch(&mut batch).unwrap();
                        rx.drain(&mut b, 0);
                    }
                    Err(e) => panic!("{e:?}"),
                }
            }
            if id % 5 == 4 {
                a.send_batch(&mut batch).unwrap();
                rx.drain(&mut b, 0);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while !batch.is_empty() || b.stats.datagrams_received < a.stats.datagrams_sent {
            a.send_batch(&mut batch).unwrap();
            rx.drain(&mut b, 0);
            assert!(Instant::now() < deadline, "{:?} {:?}", a.stats, b.stats);
        }
        let dups = a.stats.injected_duplicates;
        assert!(dups > 0 && a.stats.injected_reorders > 0, "{:?}", a.stats);
        assert_eq!(a.stats.datagrams_sent, frags + dups);
        // Every message arrives intact; one-fragment messages may arrive
        // twice, duplicate fragments of longer ones are counted.
        let mut ids: Vec<u32> = rx.got.iter().map(|(id, _)| *id).collect();
        for (id, m) in &rx.got {
            assert_eq!(m, &pattern(lossy_len(*id), u64::from(*id)), "msg {id}");
        }
        ids.sort_unstable();
        let extra = ids.len() as u64 - {
            ids.dedup();
            ids.len() as u64
        };
        assert_eq!(ids, (0..total).collect::<Vec<_>>());
        let dup_frags = rx.reasm.stats.drop_count(WireDrop::DuplicateFragment);
        assert_eq!(extra + dup_frags, dups);
        assert_eq!(rx.reasm.in_flight(), 0);
    }

    /// Queues a bare frame header of `kind` carrying `id` (all the fault
    /// injector reads is the kind).
    fn push_raw(batch: &mut SendBatch, dst: SocketAddr, kind: crate::wire::Kind, id: u32) {
        batch
            .push_with(dst, |b| {
                b[..16].fill(0);
                b[..4].copy_from_slice(&[0x55, 0x4E, 1, kind as u8]);
                b[4..8].copy_from_slice(&id.to_le_bytes());
                Ok(16)
            })
            .unwrap();
    }

    fn raw_id(d: &[u8]) -> u32 {
        u32::from_le_bytes(d[4..8].try_into().unwrap())
    }

    /// The kind of datagram `id` in the sequences below: mostly Data, some
    /// ViAck (both judged), some control frames (never judged).
    fn raw_kind(id: u32) -> crate::wire::Kind {
        use crate::wire::Kind;
        match id % 10 {
            3 | 7 => Kind::ViAck,
            5 => Kind::Keepalive,
            9 => Kind::ViClose,
            _ => Kind::Data,
        }
    }

    /// What the injector of a port with `cfg` lets out of `n` datagrams
    /// queued `chunk` at a time, one send per chunk, in order, without a
    /// socket: the send path's bookkeeping, the kernel taking everything,
    /// the clock stopped (a datagram held back waits until enough others
    /// are queued) but for the last send. Then the port's counters.
    fn injected(cfg: PortConfig, n: u32, chunk: u32) -> (Vec<u32>, WireStats) {
        let mut port = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
        let dst: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut batch = SendBatch::new(64, 1 << 20);
        let mut out = Vec::new();
        let t0 = Instant::now();
        let mut send = |port: &mut UdpPort, batch: &mut SendBatch, now: Instant| {
            port.inject_faults(batch, now);
            let end = batch.entries.len() - usize::from(batch.held.is_some());
            for e in &batch.entries[batch.head..end] {
                if !e.dropped {
                    out.push(raw_id(&batch.arena[e.start..e.start + e.len]));
                }
            }
            batch.head = end;
            if end == batch.entries.len() {
                batch.reset();
            }
        };
        for id in 0..n {
            push_raw(&mut batch, dst, raw_kind(id), id);
            if id % chunk == chunk - 1 {
                send(&mut port, &mut batch, t0);
            }
        }
        // What is left; one held back last of all waits until its time is
        // up, then goes.
        send(&mut port, &mut batch, t0);
        send(&mut port, &mut batch, t0);
        assert!(batch.len() <= 1);
        if batch.len() == 1 {
            assert!(batch.held.is_some());
        }
        send(&mut port, &mut batch, t0 + REORDER_HOLD_MAX);
        assert!(batch.is_empty(), "a datagram held back past its time");
        (out, port.stats)
    }

    /// Ids that appear twice or more, and ids missing.
    fn dups_and_missing(out: &[u32], n: u32) -> (Vec<u32>, Vec<u32>) {
        let mut count = vec![0u32; n as usize];
        for &id in out {
            count[id as usize] += 1;
        }
        let dups = (0..n).filter(|&i| count[i as usize] > 1).collect();
        let missing = (0..n).filter(|&i| count[i as usize] == 0).collect();
        (dups, missing)
    }

    const FAULTS: PortConfig = PortConfig {
        max_datagram: ETHERNET_DATAGRAM,
        batch: MAX_BATCH,
        socket_buffer: 4 << 20,
        send_queue_bytes: 4 << 20,
        drop_rate_ppm: 50_000,
        drop_seed: 7,
        dup_rate_ppm: 10_000,
        reorder_rate_ppm: 10_000,
        gso: true,
        gro: true,
    };

    #[test]
    fn injected_faults_depend_on_the_seed_only() {
        const N: u32 = 20_000;
        let (a, sa) = injected(FAULTS, N, 64);
        let (b, sb) = injected(FAULTS, N, 64);
        assert_eq!(a, b, "same seed, same sends: same datagrams out");
        assert_eq!(sa, sb);
        // Sent one by one or in other batches, the same datagrams are
        // dropped and the same duplicated (the decisions follow the
        // data-path datagrams, not the batching).
        let (da, ma) = dups_and_missing(&a, N);
        for chunk in [1, 7, 1000] {
            let (c, sc) = injected(FAULTS, N, chunk);
            assert_eq!(
                dups_and_missing(&c, N),
                (da.clone(), ma.clone()),
                "chunk {chunk}"
            );
            assert_eq!(sc.drops, sa.drops, "chunk {chunk}");
            assert_eq!(sc.injected_duplicates, sa.injected_duplicates);
            // One held back last of all has nothing left to go behind.
            assert!(sa.injected_reorders.abs_diff(sc.injected_reorders) <= 1);
        }
        // Another seed, other decisions.
        let (c, _) = injected(
            PortConfig {
                drop_seed: 8,
                ..FAULTS
            },
            N,
            64,
        );
        assert_ne!(dups_and_missing(&c, N).1, ma);
        // Control frames are never judged: each goes out once.
        for id in (0..N).filter(|&i| i % 10 == 5 || i % 10 == 9) {
            assert!(!ma.contains(&id) && !da.contains(&id), "control frame {id}");
        }
    }

    #[test]
    fn injected_fault_rates_are_close_to_asked() {
        const N: u32 = 200_000;
        let cfg = PortConfig {
            drop_rate_ppm: 50_000,
            dup_rate_ppm: 20_000,
            reorder_rate_ppm: 30_000,
            ..FAULTS
        };
        let (out, st) = injected(cfg, N, 64);
        // Data and ViAck: 8 in 10.
        let judged = f64::from(N) * 0.8;
        let (pd, pr, pu) = (0.05, 0.03, 0.02);
        let near = |got: u64, p: f64| {
            let want = judged * p;
            (got as f64 - want).abs() < want * 0.1
        };
        let drops = st.drop_count(WireDrop::InjectedDrop);
        assert!(near(drops, pd), "{drops} dropped");
        assert!(near(st.injected_reorders, (1.0 - pd) * pr), "{st:?}");
        assert!(
            near(st.injected_duplicates, (1.0 - pd) * (1.0 - pr) * pu),
            "{st:?}"
        );
        let (dups, missing) = dups_and_missing(&out, N);
        assert_eq!(missing.len() as u64, drops);
        assert_eq!(dups.len() as u64, st.injected_duplicates);
        assert_eq!(
            out.len() as u64,
            u64::from(N) - drops + st.injected_duplicates
        );
        // A datagram held back goes behind one to three others: at most
        // three later datagrams leave before it, and every distance occurs.
        let mut by_distance = [0u64; 4];
        let mut seen = std::collections::BTreeSet::new();
        for &id in &out {
            if !seen.insert(id) {
                continue;
            }
            let overtaken = seen.range(id + 1..).count();
            assert!(
                overtaken <= 3,
                "datagram {id} behind {overtaken} later ones"
            );
            by_distance[overtaken] += 1;
        }
        assert!(by_distance[1..].iter().all(|&n| n > 0), "{by_distance:?}");
        // Each counted once. (One that went behind nothing but another
        // held back before it, an earlier datagram, has no later one
        // ahead: a few.)
        let late: u64 = by_distance[1..].iter().sum();
        assert!(
            late <= st.injected_reorders && late * 100 >= st.injected_reorders * 95,
            "{by_distance:?} {st:?}"
        );
    }

    #[test]
    fn datagrams_held_back_always_go_out() {
        // One datagram per send, a third held back: each waits, last in
        // the queue, for the next one to three to go first, and at most
        // REORDER_HOLD_MAX.
        let cfg = PortConfig {
            drop_rate_ppm: 0,
            dup_rate_ppm: 100_000,
            reorder_rate_ppm: 300_000,
            drop_seed: 3,
            ..PortConfig::default()
        };
        let mut a = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
        let b = UdpSocket::bind(LO).unwrap();
        b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let dst = b.local_addr().unwrap();
        let mut batch = SendBatch::for_port(a.config());
        const N: u32 = 2000;
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        let mut recv = |a: &UdpPort, got: &mut Vec<u32>| {
            while got.len() < a.stats.datagrams_sent as usize {
                let (n, _) = b.recv_from(&mut buf).unwrap();
                got.push(raw_id(&buf[..n]));
            }
        };
        let mut held = 0;
        for id in 0..N {
            push_raw(&mut batch, dst, crate::wire::Kind::Data, id);
            a.send_batch(&mut batch).unwrap();
            if !batch.is_empty() {
                assert_eq!(batch.len(), 1, "only the one held back waits");
                held += 1;
            }
            recv(&a, &mut got);
        }
        // The last one held back goes when its time is up, nothing new
        // queued.
        let t = Instant::now();
        while !batch.is_empty() {
            a.send_batch(&mut batch).unwrap();
            std::thread::sleep(Duration::from_micros(100));
            assert!(t.elapsed() < Duration::from_secs(1));
        }
        recv(&a, &mut got);
        assert!(held > N / 5, "{held} sends left one held back");
        let (dups, missing) = dups_and_missing(&got, N);
        assert_eq!(missing, Vec::<u32>::new(), "{:?}", a.stats);
        assert_eq!(dups.len() as u64, a.stats.injected_duplicates);
        assert_eq!(got.len() as u64, u64::from(N) + a.stats.injected_duplicates);
        let out_of_order = got.windows(2).filter(|w| w[1] < w[0]).count() as u64;
        assert!(out_of_order > 0 && a.stats.injected_reorders >= out_of_order);
    }

    #[test]
    fn a_datagram_held_back_waits_for_others_then_its_time() {
        let cfg = PortConfig {
            reorder_rate_ppm: 1_000_000,
            ..PortConfig::default()
        };
        let mut port = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
        let dst: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut batch = SendBatch::new(64, 1 << 20);
        let t0 = Instant::now();
        // Alone: held, nothing to send, even when asked again in time.
        push_raw(&mut batch, dst, crate::wire::Kind::ViAck, 0);
        port.inject_faults(&mut batch, t0);
        let (h, since) = batch.held.unwrap();
        assert_eq!((h, since), (0, t0));
        let want = usize::from(batch.entries[0].hold);
        assert!((1..=3).contains(&want));
        port.inject_faults(&mut batch, t0 + REORDER_HOLD_MAX / 2);
        assert_eq!(batch.held, Some((0, t0)));
        assert_eq!(port.stats.injected_reorders, 0);
        // A control frame queued after it goes first (and is not judged).
        push_raw(&mut batch, dst, crate::wire::Kind::ViClose, 1);
        port.inject_faults(&mut batch, t0 + REORDER_HOLD_MAX / 2);
        assert_eq!(raw_id(batch.datagrams().next().unwrap().1), 1);
        assert_eq!(port.stats.injected_reorders, 1);
        if want > 1 {
            assert_eq!(batch.held, Some((1, t0)), "it waits for more");
        }
        // Its time is up: it goes, nothing more having come.
        port.inject_faults(&mut batch, t0 + REORDER_HOLD_MAX);
        assert_eq!(batch.held, None);
        let ids: Vec<u32> = batch.datagrams().map(|(_, d)| raw_id(d)).collect();
        assert_eq!(ids, [1, 0]);
        assert_eq!(port.stats.injected_reorders, 1);
    }

    #[test]
    fn oversized_datagram_is_counted_as_truncated() {
        let small = PortConfig {
            max_datagram: 200,
            ..PortConfig::default()
        };
        let mut a = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
        let mut b = UdpPort::bind(LO.parse().unwrap(), small).unwrap();
        let dst = b.local_addr().unwrap();
        let mut batch = SendBatch::for_port(a.config());
        batch
            .push_message(dst, 1, target(0), 1, &[7u8; 1000])
            .unwrap();
        batch
            .push_message(dst, 1, target(0), 2, &[7u8; 100])
            .unwrap();
        assert_eq!(a.send_batch(&mut batch).unwrap(), 2);
        let mut rx = Rx::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while b.stats.datagrams_received < 2 && Instant::now() < deadline {
            rx.drain(&mut b, 0);
        }
        assert_eq!(b.stats.drop_count(WireDrop::TruncatedDatagram), 1);
        assert_eq!(rx.got, vec![(2, vec![7u8; 100])]);
    }

    #[test]
    fn garbage_and_forged_datagrams_are_counted() {
        let mut a = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
        let mut b = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
        let dst = b.local_addr().unwrap();
        let mut batch = SendBatch::for_port(a.config());
        batch
            .push_with(dst, |buf| {
                buf[..3].copy_from_slice(b"UN\x01");
                Ok(3)
            })
            .unwrap();
        batch
            .push_with(dst, |buf| {
                buf[..20].fill(0xEE);
                Ok(20)
            })
            .unwrap();
        let forged = DataTarget {
            token: 1,
            ..target(0)
        };
        batch.push_message(dst, 1, forged, 1, b"forged").unwrap();
        batch.push_message(dst, 1, target(0), 2, b"good").unwrap();
        assert_eq!(a.send_batch(&mut batch).unwrap(), 4);
        let mut rx = Rx::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while b.stats.datagrams_received < 4 && Instant::now() < deadline {
            rx.drain(&mut b, 0);
        }
        assert_eq!(rx.stats.drop_count(WireDrop::TruncatedFrame), 1);
        assert_eq!(rx.stats.drop_count(WireDrop::BadMagic), 1);
        assert_eq!(rx.stats.drop_count(WireDrop::ForgedToken), 1);
        assert_eq!(rx.got, vec![(2, b"good".to_vec())]);
    }

    #[test]
    fn refused_datagram_is_counted_and_the_rest_still_sent() {
        let mut a = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
        let mut b = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
        let dst = b.local_addr().unwrap();
        // An IPv6 destination on an IPv4 socket: the kernel refuses that one
        // datagram, in the middle of a batch (a partial sendmmsg).
        let bad: SocketAddr = "[::1]:9".parse().unwrap();
        let mut batch = SendBatch::for_port(a.config());
        batch.push_message(dst, 1, target(0), 1, b"one").unwrap();
        batch.push_message(bad, 1, target(0), 2, b"lost").unwrap();
        batch.push_message(dst, 1, target(0), 3, b"three").unwrap();
        assert_eq!(a.send_batch(&mut batch).unwrap(), 2);
        assert!(batch.is_empty());
        assert_eq!(a.stats.drop_count(WireDrop::SendFailed), 1);
        assert!(a.last_send_error.is_some());
        assert!(a.stats.send_syscalls >= 2);
        let mut rx = Rx::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while rx.got.len() < 2 && Instant::now() < deadline {
            rx.drain(&mut b, 0);
        }
        assert_eq!(rx.got, vec![(1, b"one".to_vec()), (3, b"three".to_vec())]);
    }

    #[test]
    fn dual_stack_port_reports_ipv4_sources_as_ipv4() {
        // Skipped where the host has no IPv6.
        let Ok(mut b) = UdpPort::bind("[::]:0".parse().unwrap(), PortConfig::default()) else {
            return;
        };
        let mut a = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
        let port = b.local_addr().unwrap().port();
        let dst = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let mut batch = SendBatch::for_port(a.config());
        batch.push_message(dst, 1, target(0), 1, b"v4").unwrap();
        assert_eq!(a.send_batch(&mut batch).unwrap(), 1);
        let mut from = None;
        let deadline = Instant::now() + Duration::from_secs(5);
        while from.is_none() && Instant::now() < deadline {
            b.recv_batch(|src, _| from = Some(src)).unwrap();
        }
        assert_eq!(from, Some(a.local_addr().unwrap()));
        // And the reply goes out of the IPv6 socket to that IPv4 address.
        let mut back = SendBatch::for_port(b.config());
        back.push_message(from.unwrap(), 2, target(0), 2, b"back")
            .unwrap();
        assert_eq!(b.send_batch(&mut back).unwrap(), 1);
        let mut rx = Rx::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while rx.got.is_empty() && Instant::now() < deadline {
            rx.drain(&mut a, 0);
        }
        assert_eq!(rx.got, vec![(2, b"back".to_vec())]);
    }

    #[test]
    fn segmented_runs_arrive_as_the_same_datagrams() {
        // The same batch, with and without segmentation offload, must give
        // the receiver the same datagrams in the same order.
        let mut seen = Vec::new();
        for (gso, gro) in [(true, true), (true, false), (false, true), (false, false)] {
            let cfg = PortConfig {
                gso,
                gro,
                ..PortConfig::default()
            };
            let mut a = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
            let mut b = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
            let dst = b.local_addr().unwrap();
            let mut batch = SendBatch::for_port(&cfg);
            let close = Frame {
                src_engine: 3,
                body: Body::Close(crate::wire::Close {
                    dst_endpoint: 1,
                    dst_channel: 2,
                    token: 3,
                }),
            };
            batch.push_frame(dst, &close).unwrap();
            batch
                .push_message(dst, 3, target(0), 1, &pattern(100_000, 5))
                .unwrap();
            batch
                .push_message(dst, 3, target(0), 2, &pattern(2 * 1424, 6))
                .unwrap();
            batch.push_frame(dst, &close).unwrap();
            batch.push_frame(dst, &close).unwrap();
            let want: Vec<Vec<u8>> = batch.datagrams().map(|(_, d)| d.to_vec()).collect();
            assert_eq!(a.send_batch(&mut batch).unwrap(), want.len());
            if gso && a.gso_active() {
                assert!(a.stats.send_syscalls <= 2, "{:?}", a.stats);
            }
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(5);
            while got.len() < want.len() && Instant::now() < deadline {
                b.recv_batch(|_, d| got.push(d.to_vec())).unwrap();
            }
            assert_eq!(got, want, "gso {gso} gro {gro}");
            assert_eq!(b.stats.datagrams_received as usize, want.len());
            assert!(gso || a.stats.gso_runs == 0);
            assert!(gro || b.stats.gro_runs == 0);
            assert_eq!(b.stats.total_drops(), 0);
            seen.push(got);
        }
        assert!(seen.windows(2).all(|w| w[0] == w[1]));
    }

    #[test]
    fn gro_control_message_parsing() {
        const W: usize = size_of::<usize>();
        fn cmsg(level: i32, ty: i32, data: &[u8]) -> Vec<u8> {
            let hdr = size_of::<libc::cmsghdr>();
            let mut v = Vec::new();
            v.extend_from_slice(&(hdr + data.len()).to_ne_bytes());
            v.extend_from_slice(&level.to_ne_bytes());
            v.extend_from_slice(&ty.to_ne_bytes());
            v.resize(hdr, 0);
            v.extend_from_slice(data);
            v.resize(v.len().div_ceil(W) * W, 0);
            v
        }
        let seg = |c: &[u8]| parse_control(c).gro_segment;
        let gro = cmsg(libc::SOL_UDP, libc::UDP_GRO, &1472i32.to_ne_bytes());
        assert_eq!(seg(&gro), Some(1472));
        // After another control message.
        let mut two = cmsg(libc::SOL_IP, 8, &[1, 2, 3, 4]);
        two.extend_from_slice(&gro);
        assert_eq!(seg(&two), Some(1472));
        // With the socket's drop count, in either order.
        let drops = cmsg(libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &7u32.to_ne_bytes());
        for both in [
            [&gro[..], &drops[..]].concat(),
            [&drops[..], &gro[..]].concat(),
        ] {
            assert_eq!(
                parse_control(&both),
                RxControl {
                    gro_segment: Some(1472),
                    socket_drops: Some(7)
                }
            );
        }
        // Missing, cut short, or malformed: nothing, no panic.
        assert_eq!(parse_control(&[]), RxControl::default());
        assert_eq!(seg(&cmsg(libc::SOL_IP, 8, &[0; 4])), None);
        // Cut before the end of its data (padding may be left out).
        for n in 0..size_of::<libc::cmsghdr>() + 4 {
            assert_eq!(seg(&gro[..n]), None, "cut at {n}");
        }
        let mut zero_len = gro.clone();
        zero_len[..W].fill(0);
        assert_eq!(seg(&zero_len), None);
        let mut huge_len = gro.clone();
        huge_len[..W].copy_from_slice(&usize::MAX.to_ne_bytes());
        assert_eq!(seg(&huge_len), None);
    }

    #[test]
    fn a_stopped_hand_over_resumes_where_it_stopped() {
        let mut b = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
        let dst = b.local_addr().unwrap();
        // A run sent with segmentation offload (kept whole by UDP_GRO where
        // the kernel coalesces it) and datagrams sent one by one.
        let mut a = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
        let mut batch = SendBatch::for_port(a.config());
        for k in 0..8u8 {
            batch
                .push_with(dst, |buf| {
                    buf[..100].fill(k);
                    Ok(100)
                })
                .unwrap();
        }
        assert_eq!(a.send_batch(&mut batch).unwrap(), 8);
        let plain = UdpSocket::bind(LO).unwrap();
        for k in 8..12u8 {
            plain.send_to(&[k; 100], dst).unwrap();
        }
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        // Stop after every third datagram; each call resumes without a new
        // recvmmsg while some are left.
        while got.len() < 12 && Instant::now() < deadline {
            let pending = b.has_pending();
            let calls = b.stats.recv_syscalls;
            let mut n = 0;
            let taken = b
                .recv_batch_until(|_, d| {
                    got.push(d[0]);
                    n += 1;
                    n < 3
                })
                .unwrap();
            assert_eq!(taken, n);
            if pending {
                assert_eq!(
                    b.stats.recv_syscalls, calls,
                    "a resumed call reads the socket"
                );
            }
        }
        assert_eq!(got, (0..12u8).collect::<Vec<_>>());
        assert!(!b.has_pending());
        // The run came coalesced, so a hand-over stopped inside it.
        assert_eq!(b.stats.gro_runs, 1, "the run was not coalesced");
    }

    #[test]
    fn datagrams_lost_at_a_full_socket_are_counted() {
        // A receive buffer of a few KiB (the kernel doubles what it is
        // asked for, and takes at least 2 KiB), which 300 datagrams of
        // 1 000 bytes overflow.
        let small = PortConfig {
            socket_buffer: 4096,
            ..PortConfig::default()
        };
        let mut b = UdpPort::bind(LO.parse().unwrap(), small).unwrap();
        assert!(b.drops_reported, "SO_RXQ_OVFL refused");
        let dst = b.local_addr().unwrap();
        let a = UdpSocket::bind(LO).unwrap();
        const SENT: u64 = 300;
        for _ in 0..SENT {
            a.send_to(&[1u8; 1000], dst).unwrap();
        }
        let mut got = 0u64;
        while b.recv_batch(|_, _| got += 1).unwrap() > 0 {}
        assert!(got < SENT, "the buffer held all {got}");
        // Asked for at once; then told again, with the same count, by the
        // next datagram the kernel queues: counted once.
        b.sync_socket_drops();
        assert_eq!(b.stats.socket_overflows, SENT - got);
        a.send_to(&[2u8; 1000], dst).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut last = Vec::new();
        while last.is_empty() && Instant::now() < deadline {
            b.recv_batch(|_, d| last.push(d[0])).unwrap();
        }
        assert_eq!(last, [2]);
        assert_eq!(b.stats.socket_overflows, SENT - got);
    }

    #[test]
    fn refused_segmentation_falls_back_to_plain_datagrams() {
        let mut a = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
        let mut b = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
        // Without UDP checksums the kernel refuses segmentation (EINVAL).
        let on: libc::c_int = 1;
        // SAFETY: the port's socket is open; the value points at a live
        // c_int whose size is passed.
        let rc = unsafe {
            libc::setsockopt(
                a.raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_NO_CHECK,
                (&on as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0);
        let dst = b.local_addr().unwrap();
        let mut batch = SendBatch::for_port(a.config());
        let msg = pattern(20_000, 8);
        let n = batch.push_message(dst, 1, target(0), 1, &msg).unwrap();
        assert_eq!(a.send_batch(&mut batch).unwrap(), usize::from(n));
        assert!(!a.gso_active());
        assert_eq!(a.stats.gso_runs, 0);
        assert_eq!(a.stats.total_drops(), 0);
        let mut rx = Rx::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while rx.got.is_empty() && Instant::now() < deadline {
            rx.drain(&mut b, 0);
        }
        assert_eq!(rx.got, vec![(1, msg)]);
    }

    #[test]
    fn send_batch_queue_is_bounded_and_compacts() {
        let dst: SocketAddr = "127.0.0.1:9".parse().unwrap();
        // Room for 3 datagrams of 1000 bytes.
        let mut batch = SendBatch::new(1000, 3000);
        let stride = 1000 - DATA_HEADER_LEN;
        assert_eq!(
            batch.push_message(dst, 1, target(0), 1, &vec![1; 2 * stride]),
            Ok(2)
        );
        assert_eq!(
            batch.push_message(dst, 1, target(0), 2, &vec![2; 2 * stride]),
            Err(PushError::Full)
        );
        assert_eq!(
            batch.push_message(dst, 1, target(0), 3, &vec![3; 4 * stride]),
            Err(PushError::TooLarge)
        );
        assert_eq!(
            batch.push_message(dst, 1, target(0), 4, &vec![0; MAX_MESSAGE + 1]),
            Err(PushError::TooLarge)
        );
        assert_eq!(batch.len(), 2);
        assert_eq!(batch.stats.drop_count(WireDrop::SendQueueFull), 0);
        assert_eq!(batch.stats.drop_count(WireDrop::MessageTooLarge), 2);
        // Sending the first datagram only (as after a partial sendmmsg) lets
        // the queue move the rest to the front and take a new message.
        batch.head = 1;
        assert_eq!(
            batch.push_message(dst, 1, target(0), 5, &vec![5; 2 * stride]),
            Ok(2)
        );
        assert_eq!(batch.len(), 3);
        let ids: Vec<u32> = batch
            .datagrams()
            .map(|(_, d)| match Frame::parse(d).unwrap().body {
                Body::Data(d) => d.msg_id,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(ids, vec![1, 5, 5]);
        assert_eq!(batch.clear(), 3);
        assert!(batch.is_empty());

        // Compaction with entries out of arena order (injected reordering):
        // every queued datagram keeps its bytes.
        let mut batch = SendBatch::new(1000, 3000);
        for id in 0..3u8 {
            batch
                .push_with(dst, |b| {
                    b[..900].fill(id);
                    Ok(900)
                })
                .unwrap();
        }
        batch.entries.swap(1, 2);
        batch.head = 1;
        // 2700 bytes used, 1000 needed: only fits after compaction.
        batch
            .push_with(dst, |b| {
                b[..900].fill(3);
                Ok(900)
            })
            .unwrap();
        let got: Vec<Vec<u8>> = batch.datagrams().map(|(_, d)| d.to_vec()).collect();
        assert_eq!(got, vec![vec![2; 900], vec![1; 900], vec![3; 900]]);
    }

    #[test]
    fn a_vi_message_carries_an_ack_when_both_fit_one_datagram() {
        let dst: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut batch = SendBatch::new(1000, 8000);
        let to = DataTarget {
            flags: super::super::frame::DATA_FLAG_VI,
            ..target(super::super::frame::VI_DATA_CHANNEL)
        };
        let ack = Ack {
            cum_ack: 5,
            cum_placed: 4,
            window_end: 69,
            nack: false,
        };
        let room = 1000 - DATA_HEADER_LEN - ACK_TRAILER_LEN;
        assert!(batch.carries_ack(room) && !batch.carries_ack(room + 1));
        assert_eq!(
            batch.push_vi_message(dst, 1, to, 1, &[1; 64], Some(ack)),
            Ok(true)
        );
        assert_eq!(
            batch.push_vi_message(dst, 1, to, 2, &[2; 64], None),
            Ok(false)
        );
        // Too long to carry it (or cut in fragments): the message goes
        // alone, and the caller keeps its ack for a frame of its own.
        assert_eq!(
            batch.push_vi_message(dst, 1, to, 3, &vec![3; room + 1], Some(ack)),
            Ok(false)
        );
        assert_eq!(
            batch.push_vi_message(dst, 1, to, 4, &vec![4; 3000], Some(ack)),
            Ok(false)
        );
        let got: Vec<(u32, Option<Ack>, usize)> = batch
            .datagrams()
            .map(|(_, d)| {
                assert!(d.len() <= 1000);
                match Frame::parse(d).unwrap().body {
                    Body::Data(f) => (f.msg_id, f.ack, f.payload.len()),
                    _ => unreachable!(),
                }
            })
            .collect();
        assert_eq!(got[0], (1, Some(ack), 64));
        assert_eq!(got[1], (2, None, 64));
        assert_eq!(got[2], (3, None, room + 1));
        assert!(got[3..].iter().all(|&(id, a, _)| id == 4 && a.is_none()));
    }

    #[test]
    fn bind_rejects_bad_settings() {
        for cfg in [
            PortConfig {
                max_datagram: MIN_DATAGRAM - 1,
                ..PortConfig::default()
            },
            PortConfig {
                max_datagram: MAX_DATAGRAM + 1,
                ..PortConfig::default()
            },
            PortConfig {
                batch: 0,
                ..PortConfig::default()
            },
            PortConfig {
                batch: MAX_BATCH + 1,
                ..PortConfig::default()
            },
            PortConfig {
                drop_rate_ppm: 1_000_001,
                ..PortConfig::default()
            },
            PortConfig {
                dup_rate_ppm: 1_000_001,
                ..PortConfig::default()
            },
            PortConfig {
                reorder_rate_ppm: 1_000_001,
                ..PortConfig::default()
            },
        ] {
            let e = UdpPort::bind(LO.parse().unwrap(), cfg).err().unwrap();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        }
        let p = UdpPort::bind("[::1]:0".parse().unwrap(), PortConfig::loopback());
        // IPv6 loopback may be missing in containers; when present, it works.
        if let Ok(mut p6) = p {
            let dst = p6.local_addr().unwrap();
            let mut batch = SendBatch::for_port(p6.config());
            batch
                .push_message(dst, 1, target(0), 9, &pattern(100_000, 1))
                .unwrap();
            assert_eq!(p6.send_batch(&mut batch).unwrap(), 2);
            let mut rx = Rx::new();
            let deadline = Instant::now() + Duration::from_secs(5);
            while rx.got.is_empty() && Instant::now() < deadline {
                rx.drain(&mut p6, 0);
            }
            assert_eq!(rx.got, vec![(9, pattern(100_000, 1))]);
        }
    }

    /// Drains `port` on another thread until `stop`; returns datagrams and
    /// bytes received.
    fn sink(
        mut port: UdpPort,
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> std::thread::JoinHandle<(u64, u64)> {
        use std::sync::atomic::Ordering;
        std::thread::spawn(move || {
            let mut reasm = Reassembler::new(ReassemblyConfig::default());
            let mut msgs = 0u64;
            // Acquire: pairs with the Release store of the sender when done.
            while !stop.load(Ordering::Acquire) {
                let n = port
                    .recv_batch(|src, d| {
                        if let Ok(Frame {
                            src_engine,
                            body: Body::Data(d),
                        }) = Frame::parse(d)
                        {
                            if let Ok(Some(m)) = reasm.push(src, src_engine, &d, 0) {
                                msgs += 1;
                                if let Message::Owned(v) = m {
                                    reasm.recycle(v);
                                }
                            }
                        }
                    })
                    .unwrap();
                if n == 0 {
                    std::thread::yield_now();
                }
            }
            (port.stats.datagrams_received, msgs)
        })
    }

    /// Datagrams per second through `sendmmsg` against one `send_to` per
    /// datagram, and message throughput of 1 MiB messages at Ethernet and
    /// loopback datagram sizes. Run with
    /// `cargo test --release -p unet-engine wire::udp::tests::bench -- --ignored --nocapture`.
    #[test]
    #[ignore = "measurement; run by hand in release"]
    fn bench_sendmmsg_vs_send_to() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        const N: usize = 400_000;
        let frame = Frame {
            src_engine: 1,
            body: Body::Close(crate::wire::Close {
                dst_endpoint: 1,
                dst_channel: 1,
                token: 1,
            }),
        };
        let mut bytes = [0u8; 64];
        let len = frame.emit(&mut bytes).unwrap();

        for round in 0..2 {
            // Plain: one send_to per datagram.
            let rx = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
            let dst = rx.local_addr().unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let h = sink(rx, stop.clone());
            let plain = UdpSocket::bind(LO).unwrap();
            let t = Instant::now();
            for _ in 0..N {
                plain.send_to(&bytes[..len], dst).unwrap();
            }
            let plain_s = t.elapsed().as_secs_f64();
            std::thread::sleep(Duration::from_millis(50));
            stop.store(true, Ordering::Release);
            let (plain_rx, _) = h.join().unwrap();

            // Batched: sendmmsg, 64 per call, without and with segmentation.
            let mut line = format!(
                "round {round}: {len}-byte datagrams: send_to {:.0}/s (received {plain_rx})",
                N as f64 / plain_s
            );
            for gso in [false, true] {
                let cfg = PortConfig {
                    gso,
                    ..PortConfig::default()
                };
                let rx = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
                let dst = rx.local_addr().unwrap();
                let stop = Arc::new(AtomicBool::new(false));
                let h = sink(rx, stop.clone());
                let mut tx = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
                let mut batch = SendBatch::for_port(tx.config());
                let t = Instant::now();
                let mut sent = 0;
                while sent < N {
                    for _ in 0..MAX_BATCH.min(N - sent) {
                        batch.push_frame(dst, &frame).unwrap();
                    }
                    let want = batch.len();
                    let mut got = 0;
                    while got < want {
                        got += tx.send_batch(&mut batch).unwrap();
                    }
                    sent += got;
                }
                let secs = t.elapsed().as_secs_f64();
                std::thread::sleep(Duration::from_millis(50));
                stop.store(true, Ordering::Release);
                let (received, _) = h.join().unwrap();
                assert_eq!(tx.stats.datagrams_sent as usize, N);
                line += &format!(
                    "; sendmmsg gso {} {:.0}/s (x{:.2}, received {received}, {} syscalls)",
                    tx.gso_active(),
                    N as f64 / secs,
                    plain_s / secs,
                    tx.stats.send_syscalls,
                );
            }
            println!("{line}");
        }

        // 1 MiB messages, fragmented, through the receiving reassembler.
        let no_gso = PortConfig {
            gso: false,
            ..PortConfig::ethernet()
        };
        let no_gro = PortConfig {
            gro: false,
            ..PortConfig::ethernet()
        };
        for cfg in [
            no_gso,
            no_gro,
            PortConfig::ethernet(),
            PortConfig::loopback(),
        ] {
            let rx = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
            let dst = rx.local_addr().unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let h = sink(rx, stop.clone());
            let mut tx = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
            let mut batch = SendBatch::for_port(&cfg);
            let msg = pattern(MAX_MESSAGE, 3);
            let count = 200;
            let t = Instant::now();
            for id in 0..count {
                batch.push_message(dst, 1, target(0), id, &msg).unwrap();
                while !batch.is_empty() {
                    tx.send_batch(&mut batch).unwrap();
                }
                // Pace so that a slow receiver is not simply overrun.
                std::thread::sleep(Duration::from_micros(200));
            }
            let secs = t.elapsed().as_secs_f64();
            std::thread::sleep(Duration::from_millis(100));
            stop.store(true, Ordering::Release);
            let (_, msgs) = h.join().unwrap();
            println!(
                "1 MiB messages, {}-byte datagrams, gso {} gro {}: sent {:.0} MB/s, {} syscalls, \
                 {msgs}/{count} reassembled",
                cfg.max_datagram,
                tx.gso_active(),
                cfg.gro,
                (count as usize * MAX_MESSAGE) as f64 / secs / 1e6,
                tx.stats.send_syscalls
            );
            assert!(msgs > 0);
        }
    }
}
