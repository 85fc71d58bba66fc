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

mod socket;

pub use socket::{UdpPort, GSO_MAX_SEGMENTS};

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
