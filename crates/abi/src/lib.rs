//! The shared-memory ABI of unet: every byte that a client, the engine, a
//! direct-path peer or `unet stat` reads or writes in shared memory is laid
//! out here, and only here.
//!
//! Java and C bindings follow this module field by field; the golden vector
//! ([`golden`]) is a small segment built by this module whose bytes every
//! language checks.
//!
//! All multi-byte fields are little-endian (the native order of every
//! supported host) and naturally aligned. Positions in rings are `u64` byte or
//! entry counts that only grow, so they never wrap in practice and an index is
//! `position % capacity` (capacities are powers of two).
//!
//! # Endpoint segment
//!
//! One segment per endpoint (U-Net/SLE Figure 1): a header page, four rings
//! and the buffer area. The engine creates it (a `memfd`), maps it, and hands
//! the file descriptor to the owning process. Offsets are from the start of the
//! segment.
//!
//! ```text
//!  0x0000 ┌──────────────────────────────────────────────┐
//!         │ EndpointHeader (4096 B)                      │
//!         │   0x000 identity and geometry (read-only)    │
//!         │   0x100 doorbell line   (engine_armed)       │
//!         │   0x140 client-wait line (rx_futex,          │
//!         │         client_sleeping, client_cpu)         │
//!         │   0x180 client counters (direct path)        │
//!  0x1000 ├──────────────────────────────────────────────┤
//!         │ send ring:  RingHeader + send_cap × SendDesc │  client → engine
//!         ├──────────────────────────────────────────────┤
//!         │ recv ring:  RingHeader + recv_cap × RecvDesc │  engine → client
//!         ├──────────────────────────────────────────────┤
//!         │ free ring:  RingHeader + free_cap × u32      │  client → engine
//!         ├──────────────────────────────────────────────┤      (and client)
//!         │ event ring: RingHeader + event_cap × Event   │  engine → client
//!         ├──────────────────────────────────────────────┤
//!         │ buffer area (page aligned, buffer_area_size) │
//!         └──────────────────────────────────────────────┘
//! ```
//!
//! # Ring header
//!
//! ```text
//!  0x00 head: u64   producer position (entries pushed so far)   own cache line
//!  0x40 tail: u64   consumer position (entries popped so far)   own cache line
//!  0x80 capacity: u32, entry_size: u32                          read-only
//!  0xC0 entries …
//! ```
//! Push: check `head - tail < capacity`, write the entry at `head % capacity`,
//! then store `head + 1` with Release. Pop: load `head` with Acquire, read the
//! entry at `tail % capacity` once into a local copy, store `tail + 1` with
//! Release. The free ring has two consumers (the engine, and the client's own
//! direct path), so its pop is a compare-and-swap on `tail` after reading the
//! entry.
//!
//! # Direct connection segment
//!
//! Two local endpoints that need no engine processing share a connection
//! segment mapped by those two processes only: a header page and two byte
//! rings of variable-length records (side A → B, side B → A).
//!
//! ```text
//!  0x0000 ConnHeader: identity; per direction one cache line written by the
//!         consumer (position, sleeping flag, futex word) and the closed flags
//!  0x1000 ring A→B (ring_size bytes)
//!         ring B→A (ring_size bytes)
//! ```
//! A record is an 8-byte header `(tag: u32, len: u32)` followed by the
//! payload, padded to [`RECORD_ALIGN`]. The producer writes the payload, then
//! stores the header with one Release store; the consumer spins on the header
//! at its position and accepts it when `tag == record_tag(position)`, so stale
//! records from an earlier lap never look ready and nothing is zeroed. A
//! record that would cross the end of the ring is preceded by a padding record
//! (`len` has [`RECORD_PAD`] set) that fills the ring to its end. A record
//! always fits at the start of a lap (it is at most half the ring), so
//! padding never starts one: a consumer treats padding at offset 0 as a
//! broken peer.
//!
//! # Counters segment
//!
//! Owned and written by the engine only; `unet stat` maps it read-only.
//! See [`CountersHeader`], [`EngineCounter`] and [`EndpointCounter`].

#![no_std]
#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

use core::mem::{align_of, offset_of, size_of};
use core::sync::atomic::{AtomicU32, AtomicU64};

/// A counter enum with its slot numbers and the names `unet stat` shows
/// (used by this module and its submodules).
macro_rules! counter_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $n:expr => $s:expr),* $(,)? }) => {
        $(#[$m])*
        #[repr(usize)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name { $($(#[$vm])* $v = $n),* }
        impl $name {
            /// Every counter, in slot order.
            pub const ALL: &'static [$name] = &[$($name::$v),*];
            /// Name shown by `unet stat`.
            pub const fn name(self) -> &'static str { match self { $($name::$v => $s),* } }
        }
    };
}

pub mod copy;
pub mod golden;
pub mod ring;
pub mod udm;
pub mod via;

pub use via::{
    Reliability, ViCompl, ViCounter, ViDesc, ViError, ViHeader, ViLayout, ViSegDesc, VI_COUNTERS,
    VI_HEADER_SIZE, VI_MAGIC, VI_MAX_SEGMENTS, VI_MAX_TRANSFER,
};

/// ABI version; bump on any layout change.
pub const VERSION: u32 = 1;
/// Magic of an endpoint segment: `b"UNETEP01"` read as a little-endian u64.
pub const ENDPOINT_MAGIC: u64 = u64::from_le_bytes(*b"UNETEP01");
/// Magic of a direct connection segment: `b"UNETCN01"`.
pub const CONN_MAGIC: u64 = u64::from_le_bytes(*b"UNETCN01");
/// Magic of the counters segment: `b"UNETCT01"`.
pub const COUNTERS_MAGIC: u64 = u64::from_le_bytes(*b"UNETCT01");

/// Size of a cache line, the unit of separation between fields written by
/// different parties.
pub const CACHE_LINE: usize = 64;
/// Page size assumed for segment geometry.
pub const PAGE: usize = 4096;
/// Size of the endpoint header.
pub const ENDPOINT_HEADER_SIZE: usize = PAGE;
/// Largest payload carried inline in a receive descriptor (U-Net/SLE: 56).
pub const INLINE_MAX: usize = 56;
/// Most receive buffers one message may span (U-Net/SLE: 14).
pub const MAX_RX_BUFFERS: usize = 14;
/// A buffered endpoint's virtual buffer: the default limit (16 MiB).
pub const DEFAULT_BUFFER_LIMIT: u64 = 16 << 20;
/// A buffered endpoint's virtual buffer: the smallest limit (smaller asks
/// are raised to it, and to room for two of the endpoint's largest
/// messages).
pub const MIN_BUFFER_LIMIT: u64 = 64 << 10;
/// A buffered endpoint's virtual buffer: the largest limit (1 GiB).
pub const MAX_BUFFER_LIMIT: u64 = 1 << 30;
/// Largest message unet carries on any path.
pub const MAX_MESSAGE: usize = 1 << 20;

/// Receive buffers of `buffer_size` bytes (0 counts as 1) a message of `len` bytes spans
/// (at least 1), up to `MAX_RX_BUFFERS + 1` ("more than one descriptor
/// can name"). Counted rather than divided: on the receive path of every
/// message a division costs more than this loop, which almost always stops
/// at once.
#[inline]
pub fn buffers_spanned(len: usize, buffer_size: usize) -> usize {
    let (mut n, mut covered) = (1, buffer_size.max(1));
    while covered < len && n <= MAX_RX_BUFFERS {
        covered += buffer_size.max(1);
        n += 1;
    }
    n
}
/// Channel tag value meaning "no channel".
pub const NO_CHANNEL: u16 = u16::MAX;

/// Alignment of records in a direct-path ring.
pub const RECORD_ALIGN: usize = 32;
/// Size of a record header in a direct-path ring.
pub const RECORD_HEADER: usize = 8;
/// Flag in a record's `len`: this record is padding up to the end of the ring.
pub const RECORD_PAD: u32 = 1 << 31;
/// Flag in a record's `len` (VI connections only): the payload is not the
/// message but where it lies in the sender's memory regions, for the
/// receiver to read from there ([`VI_REF_SEGMENT`] bytes a segment). On
/// an endpoint's connection a record with it is a broken peer.
pub const RECORD_REF: u32 = 1 << 30;
/// Bytes a segment takes in a [`RECORD_REF`] record: the region's handle
/// (u32), the length (u32) and the offset in the region (u64), little
/// endian.
pub const VI_REF_SEGMENT: usize = 16;

/// Tag a record at byte `position` of a direct ring must carry to be ready.
///
/// The tag changes every lap (position / 8, plus one so that zeroed memory at
/// position 0 is never ready).
#[inline]
pub const fn record_tag(position: u64) -> u32 {
    ((position >> 3) as u32).wrapping_add(1)
}

/// Bytes a record with `len` payload bytes occupies in a direct ring.
#[inline]
pub const fn record_span(len: usize) -> usize {
    (RECORD_HEADER + len + RECORD_ALIGN - 1) & !(RECORD_ALIGN - 1)
}

/// Marker for types that may live in shared memory: `#[repr(C)]`, no
/// pointers, no padding that matters, valid for any bit pattern written by a
/// hostile peer (integers and atomics only).
///
/// # Safety
/// Implementors must be plain old data: every bit pattern is a valid value.
pub unsafe trait ShmSafe: Copy {}

// -------------------------------------------------------------------------
// Endpoint header
// -------------------------------------------------------------------------

/// The first page of an endpoint segment.
///
/// Fields up to `doorbell` are written once by the engine at creation and
/// never change; the engine keeps its own copy and never re-reads them (the
/// client could overwrite them).
#[repr(C, align(4096))]
pub struct EndpointHeader {
    /// [`ENDPOINT_MAGIC`].
    pub magic: u64,
    /// [`VERSION`].
    pub version: u32,
    /// Size of this header: [`ENDPOINT_HEADER_SIZE`].
    pub header_size: u32,
    /// Total size of the segment in bytes.
    pub segment_size: u64,
    /// The endpoint's id in its engine.
    pub endpoint_id: u32,
    /// Reserved flags, zero.
    pub flags: u32,
    /// Size of each receive buffer (the free-buffer length of U-Net/SLE).
    pub buffer_size: u32,
    /// Capacity of the send ring (entries, power of two).
    pub send_cap: u32,
    /// Capacity of the receive ring.
    pub recv_cap: u32,
    /// Capacity of the free ring.
    pub free_cap: u32,
    /// Capacity of the event ring.
    pub event_cap: u32,
    /// Reserved, zero.
    pub _reserved0: u32,
    /// Offset of the send ring's [`RingHeader`].
    pub send_off: u64,
    /// Offset of the receive ring's [`RingHeader`].
    pub recv_off: u64,
    /// Offset of the free ring's [`RingHeader`].
    pub free_off: u64,
    /// Offset of the event ring's [`RingHeader`].
    pub event_off: u64,
    /// Offset of the buffer area.
    pub buffer_area_off: u64,
    /// Size of the buffer area.
    pub buffer_area_size: u64,
    /// Engine incarnation id (random per engine start).
    pub engine_id: u64,
    _pad0: [u8; 0x100 - 0x70],
    /// Doorbell line (offset 0x100). The engine sets `engine_armed` to 1
    /// before it sleeps; a client that pushes work swaps it to 0 and, if it
    /// was 1, writes the endpoint's eventfd to wake the engine.
    pub engine_armed: AtomicU32,
    _pad1: [u8; 60],
    /// Client-wait line (offset 0x140): the engine increments `rx_futex` and
    /// wakes it after pushing a receive descriptor or event while
    /// `client_sleeping` is 1.
    pub rx_futex: AtomicU32,
    /// 1 while the client sleeps (or is about to) on `rx_futex`.
    pub client_sleeping: AtomicU32,
    /// 1 + the CPU the client ran on when it last pushed a send descriptor
    /// (0: not known). A scheduling hint: after delivering to a client that
    /// does not sleep and last ran on the engine's own CPU, the engine
    /// sleeps at once rather than polling a little longer, since that
    /// client cannot run (and answer) until the engine leaves the CPU. Any
    /// value is safe: a wrong one only makes the engine sleep a little
    /// sooner or later.
    pub client_cpu: AtomicU32,
    _pad2: [u8; 52],
    /// Counters kept by the client library for its direct path (offset
    /// 0x180), indexed by [`ClientCounter`]. Self-reported: the engine never
    /// trusts them.
    pub client_counters: [AtomicU64; CLIENT_COUNTERS],
    _pad3: [u8; 4096 - 0x180 - 8 * CLIENT_COUNTERS],
}

/// Number of client counter slots.
pub const CLIENT_COUNTERS: usize = 16;

/// Counters the client library keeps in its own segment.
#[repr(usize)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientCounter {
    /// Messages sent on direct channels (`DirectTxBytes` follows: the
    /// client library updates each pair together).
    DirectTxMsgs = 0,
    /// Bytes sent on direct channels.
    DirectTxBytes = 1,
    /// Messages received on direct channels.
    DirectRxMsgs = 2,
    /// Bytes received on direct channels.
    DirectRxBytes = 3,
    /// Direct records rejected as malformed (the peer broke the ring).
    DirectRxBad = 4,
    /// Times the client slept in a blocking wait.
    Sleeps = 5,
    /// Times the client woke a sleeping direct peer.
    PeerWakeups = 6,
    /// Invocations of an inline applet.
    AppletCalls = 7,
    /// Time spent in an inline applet, ns (one invocation in 16 is timed
    /// and counted 16 times: an estimate).
    AppletTimeNs = 8,
    /// Faults of an inline applet.
    AppletFaults = 9,
    /// Inline applet `doTx` invocations.
    AppletTxCalls = 10,
    /// Inline applet `doRx` invocations.
    AppletRxCalls = 11,
    /// Inline applet `doTimer` invocations.
    AppletTimerCalls = 12,
    /// Longest inline applet invocation, ns.
    AppletMaxNs = 13,
    /// Work (fuel) used by the inline applet.
    AppletFuel = 14,
}

impl ClientCounter {
    /// Every client counter, in slot order.
    pub const ALL: [ClientCounter; 15] = [
        Self::DirectTxMsgs,
        Self::DirectTxBytes,
        Self::DirectRxMsgs,
        Self::DirectRxBytes,
        Self::DirectRxBad,
        Self::Sleeps,
        Self::PeerWakeups,
        Self::AppletCalls,
        Self::AppletTimeNs,
        Self::AppletFaults,
        Self::AppletTxCalls,
        Self::AppletRxCalls,
        Self::AppletTimerCalls,
        Self::AppletMaxNs,
        Self::AppletFuel,
    ];
    /// Name shown by `unet stat`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::DirectTxMsgs => "direct_tx_msgs",
            Self::DirectTxBytes => "direct_tx_bytes",
            Self::DirectRxMsgs => "direct_rx_msgs",
            Self::DirectRxBytes => "direct_rx_bytes",
            Self::DirectRxBad => "direct_rx_bad",
            Self::Sleeps => "sleeps",
            Self::PeerWakeups => "peer_wakeups",
            Self::AppletCalls => "applet_calls",
            Self::AppletTimeNs => "applet_time_ns",
            Self::AppletFaults => "applet_faults",
            Self::AppletTxCalls => "applet_tx_calls",
            Self::AppletRxCalls => "applet_rx_calls",
            Self::AppletTimerCalls => "applet_timer_calls",
            Self::AppletMaxNs => "applet_max_ns",
            Self::AppletFuel => "applet_fuel",
        }
    }
}

const _: () = {
    assert!(size_of::<EndpointHeader>() == ENDPOINT_HEADER_SIZE);
    assert!(offset_of!(EndpointHeader, version) == 8);
    assert!(offset_of!(EndpointHeader, segment_size) == 0x10);
    assert!(offset_of!(EndpointHeader, endpoint_id) == 0x18);
    assert!(offset_of!(EndpointHeader, buffer_size) == 0x20);
    assert!(offset_of!(EndpointHeader, send_cap) == 0x24);
    assert!(offset_of!(EndpointHeader, event_cap) == 0x30);
    assert!(offset_of!(EndpointHeader, send_off) == 0x38);
    assert!(offset_of!(EndpointHeader, buffer_area_off) == 0x58);
    assert!(offset_of!(EndpointHeader, buffer_area_size) == 0x60);
    assert!(offset_of!(EndpointHeader, engine_id) == 0x68);
    assert!(offset_of!(EndpointHeader, engine_armed) == 0x100);
    assert!(offset_of!(EndpointHeader, rx_futex) == 0x140);
    assert!(offset_of!(EndpointHeader, client_sleeping) == 0x144);
    assert!(offset_of!(EndpointHeader, client_cpu) == 0x148);
    assert!(offset_of!(EndpointHeader, client_counters) == 0x180);
};

// -------------------------------------------------------------------------
// Rings
// -------------------------------------------------------------------------

/// Header of every descriptor ring; the entries follow at offset
/// [`RING_HEADER_SIZE`].
#[repr(C, align(64))]
pub struct RingHeader {
    /// Producer position (entries pushed so far).
    pub head: AtomicU64,
    _pad0: [u8; 56],
    /// Consumer position (entries popped so far).
    pub tail: AtomicU64,
    _pad1: [u8; 56],
    /// Capacity in entries (power of two). Informational for readers; the
    /// engine uses its own copy.
    pub capacity: u32,
    /// Size of one entry in bytes.
    pub entry_size: u32,
    _pad2: [u8; 56],
}

/// Size of a [`RingHeader`]; entries start at this offset from the header.
pub const RING_HEADER_SIZE: usize = 192;

const _: () = {
    assert!(size_of::<RingHeader>() == RING_HEADER_SIZE);
    assert!(offset_of!(RingHeader, tail) == 64);
    assert!(offset_of!(RingHeader, capacity) == 128);
    assert!(offset_of!(RingHeader, entry_size) == 132);
};

/// Bytes a ring of `cap` entries of `entry_size` bytes occupies, rounded up to
/// a cache line.
pub const fn ring_bytes(cap: u32, entry_size: usize) -> usize {
    let b = RING_HEADER_SIZE + cap as usize * entry_size;
    (b + CACHE_LINE - 1) & !(CACHE_LINE - 1)
}

/// A send (transmit) descriptor, pushed by the client, consumed by the engine.
///
/// ```text
///  0 offset: u32   buffer-area offset of the message
///  4 len: u32      message length in bytes
///  8 channel: u16  channel tag to send on
/// 10 flags: u16    reserved, zero
/// 12 status: i32   written by the engine: 0 pending, 1 sent, <0 -SendStatus
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendDesc {
    /// Buffer-area offset of the message.
    pub offset: u32,
    /// Message length in bytes.
    pub len: u32,
    /// Channel tag.
    pub channel: u16,
    /// Reserved flags, zero.
    pub flags: u16,
    /// Completion status written by the engine (see [`SendStatus`]).
    pub status: i32,
}

/// Completion of a send descriptor (the `status` field).
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendStatus {
    /// Not processed yet.
    Pending = 0,
    /// Handed to the destination (or the wire).
    Sent = 1,
    /// The channel tag is not one this endpoint holds.
    BadChannel = -1,
    /// Offset or length outside the buffer area.
    BadBuffer = -2,
    /// Length is zero or above [`MAX_MESSAGE`].
    BadLength = -3,
    /// The channel's peer is gone.
    PeerGone = -4,
    /// Reserved flags were set.
    BadFlags = -5,
    /// The endpoint's applet faulted while handling it.
    AppletFault = -6,
}

impl SendStatus {
    /// Decode a status word written to shared memory.
    pub fn from_i32(v: i32) -> Option<Self> {
        Some(match v {
            0 => Self::Pending,
            1 => Self::Sent,
            -1 => Self::BadChannel,
            -2 => Self::BadBuffer,
            -3 => Self::BadLength,
            -4 => Self::PeerGone,
            -5 => Self::BadFlags,
            -6 => Self::AppletFault,
            _ => return None,
        })
    }
}

/// Receive descriptor, pushed by the engine (or synthesised by the client
/// library for the direct path), consumed by the client.
///
/// ```text
///  0 len: u32          message length
///  4 channel: u16      source channel tag (assigned by the engine)
///  6 flags: u8         RECV_INLINE: payload is in `data`
///  7 nbufs: u8         number of buffer offsets in `data` (1..=14)
///  8 data: [u8; 56]    inline payload, or nbufs little-endian u32 offsets
/// ```
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvDesc {
    /// Message length in bytes.
    pub len: u32,
    /// Source channel tag.
    pub channel: u16,
    /// [`RECV_INLINE`] or 0.
    pub flags: u8,
    /// Number of buffers used (0 when inline).
    pub nbufs: u8,
    /// Inline payload or buffer offsets.
    pub data: [u8; INLINE_MAX],
}

/// `RecvDesc::flags`: the payload is inline in `data`.
pub const RECV_INLINE: u8 = 1;

impl Default for RecvDesc {
    fn default() -> Self {
        RecvDesc {
            len: 0,
            channel: 0,
            flags: 0,
            nbufs: 0,
            data: [0; INLINE_MAX],
        }
    }
}

impl RecvDesc {
    /// Buffer offset number `i` (< 14).
    #[inline]
    pub fn offset(&self, i: usize) -> u32 {
        let b = &self.data[i * 4..i * 4 + 4];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
    /// Set buffer offset number `i` (< 14).
    #[inline]
    pub fn set_offset(&mut self, i: usize, off: u32) {
        self.data[i * 4..i * 4 + 4].copy_from_slice(&off.to_le_bytes());
    }
}

/// An event from the engine to the client (channel life cycle).
///
/// ```text
///  0 kind: u16        EventKind
///  2 channel: u16     the channel concerned
///  4 peer_endpoint: u32
///  8 port: u16        peer engine's UDP port (0 = local)
/// 10 family: u16      0 local, 4 IPv4, 6 IPv6
/// 12 arg: u32         kind-specific (e.g. a reason)
/// 16 addr: [u8; 16]   peer engine's IP address
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventDesc {
    /// [`EventKind`] as u16.
    pub kind: u16,
    /// Channel concerned.
    pub channel: u16,
    /// Peer endpoint id.
    pub peer_endpoint: u32,
    /// Peer engine's UDP port, 0 for a local peer.
    pub port: u16,
    /// Address family of `addr`: 0 local, 4, 6.
    pub family: u16,
    /// Kind-specific argument.
    pub arg: u32,
    /// Peer engine's address bytes.
    pub addr: [u8; 16],
}

/// Kinds of [`EventDesc`].
#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A peer opened a channel to this endpoint; `channel` is its tag here.
    /// `arg` is the direct connection id (0 for the engine path); when it is
    /// not 0 the client collects the connection segment from its control
    /// socket, where the engine sent it before this event.
    ChannelOpened = 1,
    /// The peer of `channel` is gone (closed its endpoint or died).
    PeerGone = 2,
    /// Messages were dropped for this endpoint (`arg`: count since last).
    Dropped = 4,
    /// An invocation of the endpoint's applet faulted (`arg`: the fault
    /// class, a [`FaultKind`]); the invocation stopped.
    AppletFault = 5,
    /// The applet was detached after repeated faults (`arg`: fault class of
    /// the last one, a [`FaultKind`]).
    AppletDetached = 6,
}

/// Why an invocation of an applet was stopped: the `arg` of the
/// [`EventKind::AppletFault`] and [`EventKind::AppletDetached`] events,
/// and the applet fault counters.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// The work budget of the invocation ran out (the watchdog).
    Fuel = 0,
    /// An array index out of bounds, a null reference, a negative size.
    Memory = 1,
    /// Division by zero.
    Arith = 2,
    /// Call depth (or frame space) exceeded.
    Depth = 3,
    /// The heap quota was exceeded.
    Heap = 4,
    /// A native refused its arguments.
    Native = 5,
    /// Anything else.
    Other = 6,
    /// The invocation ran past its time limit (the engine's
    /// `applet_time_max`), whatever work budget it had left.
    Timeout = 7,
}

impl FaultKind {
    /// Every kind, in the order of their numbers.
    pub const ALL: [FaultKind; 8] = [
        FaultKind::Fuel,
        FaultKind::Memory,
        FaultKind::Arith,
        FaultKind::Depth,
        FaultKind::Heap,
        FaultKind::Native,
        FaultKind::Other,
        FaultKind::Timeout,
    ];

    /// Decode an event's `arg`; an unknown number reads as `Other`.
    pub fn from_u32(v: u32) -> FaultKind {
        FaultKind::ALL
            .get(v as usize)
            .copied()
            .unwrap_or(FaultKind::Other)
    }

    /// A short name (`fuel`, `memory`, ...).
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Fuel => "fuel",
            FaultKind::Memory => "memory",
            FaultKind::Arith => "arith",
            FaultKind::Depth => "depth",
            FaultKind::Heap => "heap",
            FaultKind::Native => "native",
            FaultKind::Other => "other",
            FaultKind::Timeout => "timeout",
        }
    }

    /// The engine's per-endpoint counter of faults of this kind.
    pub fn counter(self) -> EndpointCounter {
        match self {
            FaultKind::Fuel => EndpointCounter::AppletFaultFuel,
            FaultKind::Memory => EndpointCounter::AppletFaultMemory,
            FaultKind::Arith => EndpointCounter::AppletFaultArith,
            FaultKind::Depth => EndpointCounter::AppletFaultDepth,
            FaultKind::Heap => EndpointCounter::AppletFaultHeap,
            FaultKind::Native => EndpointCounter::AppletFaultNative,
            FaultKind::Other => EndpointCounter::AppletFaultOther,
            FaultKind::Timeout => EndpointCounter::AppletFaultTimeout,
        }
    }
}

impl core::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl EventKind {
    /// Decode.
    pub fn from_u16(v: u16) -> Option<Self> {
        Some(match v {
            1 => Self::ChannelOpened,
            2 => Self::PeerGone,
            4 => Self::Dropped,
            5 => Self::AppletFault,
            6 => Self::AppletDetached,
            _ => return None,
        })
    }
}

// SAFETY: all four are repr(C) structs of integers and byte arrays; any bit
// pattern is a valid value.
unsafe impl ShmSafe for SendDesc {}
// SAFETY: as above.
unsafe impl ShmSafe for RecvDesc {}
// SAFETY: as above.
unsafe impl ShmSafe for EventDesc {}
// SAFETY: an integer.
unsafe impl ShmSafe for u32 {}

const _: () = {
    assert!(size_of::<SendDesc>() == 16);
    assert!(offset_of!(SendDesc, channel) == 8);
    assert!(offset_of!(SendDesc, status) == 12);
    assert!(size_of::<RecvDesc>() == 64);
    assert!(align_of::<RecvDesc>() == 64);
    assert!(offset_of!(RecvDesc, channel) == 4);
    assert!(offset_of!(RecvDesc, flags) == 6);
    assert!(offset_of!(RecvDesc, nbufs) == 7);
    assert!(offset_of!(RecvDesc, data) == 8);
    assert!(size_of::<EventDesc>() == 32);
    assert!(offset_of!(EventDesc, port) == 8);
    assert!(offset_of!(EventDesc, arg) == 12);
    assert!(offset_of!(EventDesc, addr) == 16);
};

// -------------------------------------------------------------------------
// Endpoint geometry
// -------------------------------------------------------------------------

/// Parameters an endpoint is created with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Size of each receive buffer.
    pub buffer_size: u32,
    /// Size of the buffer area (multiple of the page size).
    pub buffer_area_size: u64,
    /// Send ring capacity (power of two).
    pub send_cap: u32,
    /// Receive ring capacity (power of two).
    pub recv_cap: u32,
    /// Free ring capacity (power of two).
    pub free_cap: u32,
    /// Event ring capacity (power of two).
    pub event_cap: u32,
}

impl Default for Geometry {
    fn default() -> Self {
        Geometry {
            buffer_size: 8192,
            buffer_area_size: 4 << 20,
            send_cap: 1024,
            recv_cap: 1024,
            free_cap: 1024,
            event_cap: 256,
        }
    }
}

/// Why a [`Geometry`] was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeometryError {
    /// A ring capacity is not a power of two in 2..=65536.
    BadRingCapacity(u32),
    /// Buffer size not a multiple of 64 in 64..=1 MiB.
    BadBufferSize(u32),
    /// Buffer area not a page multiple, too small for one buffer, or above 1 GiB.
    BadBufferArea(u64),
}

impl core::fmt::Display for GeometryError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::BadRingCapacity(c) => {
                write!(f, "ring capacity {c} is not a power of two in 2..=65536")
            }
            Self::BadBufferSize(s) => {
                write!(f, "buffer size {s} is not a multiple of 64 in 64..=1048576")
            }
            Self::BadBufferArea(s) => write!(
                f,
                "buffer area size {s} is not a multiple of 4096 holding at least one buffer, at most 1 GiB"
            ),
        }
    }
}

/// Offsets of everything in an endpoint segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The geometry this layout was computed from.
    pub geometry: Geometry,
    /// Offset of the send ring header.
    pub send_off: u64,
    /// Offset of the receive ring header.
    pub recv_off: u64,
    /// Offset of the free ring header.
    pub free_off: u64,
    /// Offset of the event ring header.
    pub event_off: u64,
    /// Offset of the buffer area.
    pub buffer_area_off: u64,
    /// Total segment size.
    pub segment_size: u64,
}

impl Layout {
    /// Check a geometry and compute the layout. The one place offsets are
    /// computed.
    pub fn new(g: Geometry) -> Result<Layout, GeometryError> {
        for cap in [g.send_cap, g.recv_cap, g.free_cap, g.event_cap] {
            if !cap.is_power_of_two() || !(2..=65536).contains(&cap) {
                return Err(GeometryError::BadRingCapacity(cap));
            }
        }
        if g.buffer_size < 64 || g.buffer_size > (1 << 20) || !g.buffer_size.is_multiple_of(64) {
            return Err(GeometryError::BadBufferSize(g.buffer_size));
        }
        if !g.buffer_area_size.is_multiple_of(PAGE as u64)
            || g.buffer_area_size < g.buffer_size as u64
            || g.buffer_area_size > (1 << 30)
        {
            return Err(GeometryError::BadBufferArea(g.buffer_area_size));
        }
        let mut off = ENDPOINT_HEADER_SIZE as u64;
        let mut take = |bytes: usize| {
            let at = off;
            off += bytes as u64;
            at
        };
        let send_off = take(ring_bytes(g.send_cap, size_of::<SendDesc>()));
        let recv_off = take(ring_bytes(g.recv_cap, size_of::<RecvDesc>()));
        let free_off = take(ring_bytes(g.free_cap, size_of::<u32>()));
        let event_off = take(ring_bytes(g.event_cap, size_of::<EventDesc>()));
        let buffer_area_off = off.div_ceil(PAGE as u64) * PAGE as u64;
        Ok(Layout {
            geometry: g,
            send_off,
            recv_off,
            free_off,
            event_off,
            buffer_area_off,
            segment_size: buffer_area_off + g.buffer_area_size,
        })
    }
}

// -------------------------------------------------------------------------
// Direct connection segment
// -------------------------------------------------------------------------

/// Per-direction state written by that direction's consumer.
#[repr(C, align(64))]
pub struct ConnConsumer {
    /// Consumer position in bytes (records consumed so far, padded spans).
    pub position: AtomicU64,
    /// 1 while the consumer sleeps (or is about to) on `futex`.
    pub sleeping: AtomicU32,
    /// Futex word the consumer sleeps on; the producer increments and wakes.
    pub futex: AtomicU32,
    _pad: [u8; 48],
}

/// A count written by one direction's consumer after every message, on a
/// cache line of its own (the producer reads [`ConnConsumer::sleeping`] at
/// every publish: a word stored per message beside it would take that
/// line from the producer each time).
#[repr(C, align(64))]
pub struct ConnPlaced {
    /// Messages the consumer has placed where they were going (a VI's
    /// posted receive buffers), counted from 0; stored with Release after
    /// each one when the connection is a VI of reliable reception, whose
    /// sends complete only then. Unused (0) on endpoint channels.
    pub placed: AtomicU64,
    _pad: [u8; 56],
}

/// First page of a direct connection segment.
///
/// Side A is the endpoint that opened the channel, side B the one that
/// accepted. Ring A→B starts at [`CONN_HEADER_SIZE`], ring B→A right after it.
#[repr(C, align(4096))]
pub struct ConnHeader {
    /// [`CONN_MAGIC`].
    pub magic: u64,
    /// [`VERSION`].
    pub version: u32,
    /// Size of each of the two rings in bytes (power of two).
    pub ring_size: u32,
    /// Connection id in the engine.
    pub conn_id: u32,
    /// Endpoint id of side A.
    pub a_endpoint: u32,
    /// Endpoint id of side B.
    pub b_endpoint: u32,
    /// Reserved, zero.
    pub _reserved: u32,
    /// Why side A broke the connection, a [`ViError`] code (0: it did not;
    /// VI connections only). Written before `a_closed`.
    pub a_error: AtomicU32,
    /// Why side B broke the connection (as `a_error`).
    pub b_error: AtomicU32,
    _pad0: [u8; 64 - 40],
    /// Consumer of ring A→B (side B).
    pub a_to_b: ConnConsumer,
    /// Consumer of ring B→A (side A).
    pub b_to_a: ConnConsumer,
    /// Set to 1 by side A when it closes, by the engine when A dies.
    pub a_closed: AtomicU32,
    /// Set to 1 by side B when it closes, by the engine when B dies.
    pub b_closed: AtomicU32,
    _pad1: [u8; 0x100 - 200],
    /// What the consumer of ring A→B (side B) has placed (offset 0x100).
    pub a_to_b_placed: ConnPlaced,
    /// What the consumer of ring B→A (side A) has placed (offset 0x140).
    pub b_to_a_placed: ConnPlaced,
    _pad1b: [u8; 0x400 - 0x180],
    /// What side A counts of a VI connection (offset 0x400, indexed by
    /// [`ClientCounter`]: messages and bytes each way, bad records), for
    /// `unet stat`; unused on an endpoint's connection, whose counts go to
    /// the endpoint's header. Self-reported: the engine never trusts them.
    pub a_counters: [AtomicU64; CLIENT_COUNTERS],
    /// What side B counts (offset 0x480).
    pub b_counters: [AtomicU64; CLIENT_COUNTERS],
    _pad2: [u8; 4096 - 0x500],
}

/// Size of a [`ConnHeader`].
pub const CONN_HEADER_SIZE: usize = PAGE;
/// Default size of each ring of a direct connection.
pub const CONN_RING_DEFAULT: u32 = 1 << 20;

/// Total size of a connection segment with rings of `ring_size` bytes.
pub const fn conn_segment_size(ring_size: u32) -> usize {
    CONN_HEADER_SIZE + 2 * ring_size as usize
}

const _: () = {
    assert!(size_of::<ConnHeader>() == CONN_HEADER_SIZE);
    assert!(offset_of!(ConnHeader, ring_size) == 12);
    assert!(offset_of!(ConnHeader, conn_id) == 16);
    assert!(offset_of!(ConnHeader, a_to_b) == 64);
    assert!(offset_of!(ConnHeader, b_to_a) == 128);
    assert!(offset_of!(ConnHeader, a_closed) == 192);
    assert!(offset_of!(ConnHeader, b_closed) == 196);
    assert!(offset_of!(ConnHeader, a_counters) == 0x400);
    assert!(offset_of!(ConnHeader, b_counters) == 0x480);
    assert!(size_of::<ConnConsumer>() == 64);
    assert!(offset_of!(ConnConsumer, sleeping) == 8);
    assert!(offset_of!(ConnConsumer, futex) == 12);
    assert!(offset_of!(ConnHeader, a_to_b_placed) == 0x100);
    assert!(offset_of!(ConnHeader, b_to_a_placed) == 0x140);
    assert!(size_of::<ConnPlaced>() == 64);
    assert!(offset_of!(ConnHeader, a_error) == 32);
    assert!(offset_of!(ConnHeader, b_error) == 36);
};

// -------------------------------------------------------------------------
// Counters segment
// -------------------------------------------------------------------------

/// Header of the counters segment.
///
/// ```text
///  0x000 magic u64, version u32, max_endpoints u32
///  0x010 engine_id u64, pid u32, reserved u32
///  0x040 engine counters: ENGINE_COUNTERS × u64
///  0x400 endpoint slots: max_endpoints × EndpointSlot (1 KiB each):
///        0x000 live u32, endpoint_id u32, pid u32, channels_peak u32
///        0x010 counters: ENDPOINT_COUNTERS × u64 (EndpointCounter)
///        0x380 client: CLIENT_COUNTERS × u64 (ClientCounter, copied on Stat)
/// ```
#[repr(C)]
pub struct CountersHeader {
    /// [`COUNTERS_MAGIC`].
    pub magic: u64,
    /// [`VERSION`].
    pub version: u32,
    /// Number of endpoint slots.
    pub max_endpoints: u32,
    /// Engine incarnation id.
    pub engine_id: u64,
    /// Engine process id.
    pub pid: u32,
    /// Reserved.
    pub _reserved: u32,
    _pad: [u8; 32],
    /// Engine-wide counters, indexed by [`EngineCounter`].
    pub engine: [AtomicU64; ENGINE_COUNTERS],
}

/// Number of engine counter slots.
pub const ENGINE_COUNTERS: usize = 112;
/// Offset of the first endpoint slot in the counters segment.
pub const ENDPOINT_SLOTS_OFF: usize = 0x400;

/// Counters of one endpoint, owned by the engine.
#[repr(C)]
pub struct EndpointSlot {
    /// 1 while the slot describes a live endpoint.
    pub live: AtomicU32,
    /// Endpoint id.
    pub endpoint_id: AtomicU32,
    /// Process id of the owner (0 if unknown).
    pub pid: AtomicU32,
    /// The most channel tags the endpoint held at once (a high-water
    /// mark; the current count is the `ChannelsOpen` level).
    pub channels_peak: AtomicU32,
    /// Counters indexed by [`EndpointCounter`].
    pub counters: [AtomicU64; ENDPOINT_COUNTERS],
    /// The endpoint's client counters (indexed by [`ClientCounter`]), as
    /// the client library last reported them in its endpoint header: the
    /// engine copies them here when a `Stat` request comes. They are the
    /// client's word, not the engine's.
    pub client: [AtomicU64; CLIENT_COUNTERS],
}

/// Number of endpoint counter slots.
pub const ENDPOINT_COUNTERS: usize = 110;

const _: () = {
    assert!(offset_of!(CountersHeader, engine) == 0x40);
    assert!(0x40 + 8 * ENGINE_COUNTERS <= ENDPOINT_SLOTS_OFF);
    assert!(size_of::<EndpointSlot>() == 1024);
    assert!(offset_of!(EndpointSlot, client) == 0x380);
};

/// Bytes of a counters segment with `max_endpoints` endpoint slots (and
/// [`VI_SLOTS`] VI slots, then [`udm::UDM_SLOTS`] UDM node slots, after
/// them).
pub const fn counters_segment_size(max_endpoints: u32) -> usize {
    let b = udm_slots_off(max_endpoints) + udm::UDM_SLOTS * size_of::<udm::UdmSlot>();
    (b + PAGE - 1) & !(PAGE - 1)
}

/// Offset of the first UDM node slot in a counters segment with
/// `max_endpoints` endpoint slots.
pub const fn udm_slots_off(max_endpoints: u32) -> usize {
    let b = vi_slots_off(max_endpoints) + VI_SLOTS * size_of::<ViSlot>();
    (b + PAGE - 1) & !(PAGE - 1)
}

/// Number of VI slots in the counters segment: the first this many VIs
/// (by id) are shown by `unet stat`.
pub const VI_SLOTS: usize = 1024;

/// Offset of the first VI slot in a counters segment with
/// `max_endpoints` endpoint slots.
pub const fn vi_slots_off(max_endpoints: u32) -> usize {
    let b = ENDPOINT_SLOTS_OFF + max_endpoints as usize * size_of::<EndpointSlot>();
    (b + PAGE - 1) & !(PAGE - 1)
}

/// What `unet stat` shows of one VI (256 bytes), filled by the engine
/// when a `Stat` request comes.
///
/// ```text
///  0x00 live u32, vi_id u32, pid u32, state u32 (0 or a ViError code)
///  0x10 reliability u8, carried u8 (1: by the engine to another engine,
///       0: a local VI on a direct ring), strict_rnr u8, family u8
///       (0 local, 4, 6), port u16, reserved u16, peer_vi u32,
///       reserved u32
///  0x20 addr [u8; 16]  the peer engine's address
///  0x30 counters: VI_COUNTERS × u64 (ViCounter; a local VI fills the
///       first four, as its two processes count them)
/// ```
#[repr(C)]
pub struct ViSlot {
    /// 1 while the slot describes a VI.
    pub live: AtomicU32,
    /// The VI's id.
    pub vi_id: AtomicU32,
    /// Its owner's process id (0 if unknown).
    pub pid: AtomicU32,
    /// 0 while connected, else the `ViError` code.
    pub state: AtomicU32,
    /// Reliability (u8), carried (u8), strict_rnr (u8), family (u8).
    pub kind: AtomicU32,
    /// Peer engine's port (low 16 bits).
    pub port: AtomicU32,
    /// The peer VI's id (0: not known).
    pub peer_vi: AtomicU32,
    /// Reserved.
    pub _reserved: AtomicU32,
    /// The peer engine's address (IPv4 in the first 4 bytes), as 4 words.
    pub addr: [AtomicU32; 4],
    /// Counters, indexed by `ViCounter`.
    pub counters: [AtomicU64; VI_COUNTERS],
    _pad: [u8; 256 - 0x30 - 8 * VI_COUNTERS],
}

const _: () = {
    assert!(size_of::<ViSlot>() == 256);
    assert!(offset_of!(ViSlot, kind) == 0x10);
    assert!(offset_of!(ViSlot, addr) == 0x20);
    assert!(offset_of!(ViSlot, counters) == 0x30);
};

counter_enum! {
    /// Engine-wide counters.
    EngineCounter {
        /// Loop iterations that found work.
        BusyPolls = 0 => "busy_polls",
        /// Times the engine went to sleep.
        Sleeps = 1 => "sleeps",
        /// Wakeups from sleep.
        Wakeups = 2 => "wakeups",
        /// Wakeups that found nothing to do.
        SpuriousWakeups = 3 => "spurious_wakeups",
        /// Endpoints created.
        EndpointsCreated = 4 => "endpoints_created",
        /// Endpoints reclaimed (closed or owner died).
        EndpointsReclaimed = 5 => "endpoints_reclaimed",
        /// Control connections accepted.
        ControlAccepted = 6 => "control_accepted",
        /// Control connections closed.
        ControlClosed = 7 => "control_closed",
        /// Control messages refused as malformed.
        ControlBad = 8 => "control_bad",
        /// Direct connections set up.
        DirectConns = 9 => "direct_conns",
        /// Datagrams sent.
        WireTxDatagrams = 10 => "wire_tx_datagrams",
        /// Bytes sent on the wire.
        WireTxBytes = 11 => "wire_tx_bytes",
        /// Datagrams received.
        WireRxDatagrams = 12 => "wire_rx_datagrams",
        /// Bytes received from the wire.
        WireRxBytes = 13 => "wire_rx_bytes",
        /// sendmmsg calls.
        WireTxBatches = 14 => "wire_tx_batches",
        /// recvmmsg calls.
        WireRxBatches = 15 => "wire_rx_batches",
        /// Messages reassembled from several fragments.
        WireReassembled = 16 => "wire_reassembled",
        /// Wire drop: the datagram is shorter than its frame header says.
        WireDropTruncatedFrame = 17 => "wire_drop_truncated_frame",
        /// Wire drop: not a unet frame.
        WireDropBadMagic = 18 => "wire_drop_bad_magic",
        /// Wire drop: unsupported frame version.
        WireDropBadVersion = 19 => "wire_drop_bad_version",
        /// Wire drop: unknown frame kind.
        WireDropUnknownKind = 20 => "wire_drop_unknown_kind",
        /// Wire drop: inconsistent message or fragment lengths.
        WireDropBadLength = 21 => "wire_drop_bad_length",
        /// Wire drop: unknown refusal reason.
        WireDropBadReason = 22 => "wire_drop_bad_reason",
        /// Wire drop: wrong channel token or source address.
        WireDropForgedToken = 23 => "wire_drop_forged_token",
        /// Wire drop: no such endpoint.
        WireDropUnknownEndpoint = 24 => "wire_drop_unknown_endpoint",
        /// Wire drop: no such open channel.
        WireDropUnknownChannel = 25 => "wire_drop_unknown_channel",
        /// Wire drop: a message lost a fragment (one per message).
        WireDropReassemblyTimeout = 26 => "wire_drop_reassembly_timeout",
        /// Wire drop: fragment already received.
        WireDropDuplicateFragment = 27 => "wire_drop_duplicate_fragment",
        /// Wire drop: fragment disagrees with the rest of its message.
        WireDropInconsistent = 28 => "wire_drop_inconsistent",
        /// Wire drop: reassembly memory exhausted.
        WireDropMemoryBudget = 29 => "wire_drop_memory_budget",
        /// Wire drop: too many messages in reassembly.
        WireDropInFlightLimit = 30 => "wire_drop_in_flight_limit",
        /// Wire drop: datagram larger than the receive buffer.
        WireDropTruncatedDatagram = 31 => "wire_drop_truncated_datagram",
        /// Wire drop: dropped on purpose by fault injection.
        WireDropInjectedDrop = 32 => "wire_drop_injected_drop",
        /// Wire drop: the kernel refused the datagram.
        WireDropSendFailed = 33 => "wire_drop_send_failed",
        /// Wire drop: the engine's send queue was full.
        WireDropSendQueueFull = 34 => "wire_drop_send_queue_full",
        /// Wire drop: message too large for the wire.
        WireDropMessageTooLarge = 35 => "wire_drop_message_too_large",
        /// Channel-open requests received over the wire.
        WireOpenRequests = 36 => "wire_open_requests",
        /// Channel-open requests refused.
        WireOpenRefused = 37 => "wire_open_refused",
        /// Channel opens that got no answer.
        WireOpenTimeouts = 38 => "wire_open_timeouts",
        /// Sleeps taken at once, without the usual last polls, because the
        /// client just served spins on the engine's CPU (`client_cpu`): it
        /// cannot run, and answer, until the engine leaves that CPU.
        Handoffs = 39 => "handoffs",
        /// Turns cut short, and the CPU given away once (`sched_yield`),
        /// because a delivery found the receive queue or the free buffers
        /// of a client that does not sleep exhausted: it needs a CPU to
        /// catch up, perhaps this one, and what the engine would take next
        /// (send descriptors, datagrams) would only be dropped.
        ReceiverYields = 40 => "receiver_yields",
        /// Wire drop: packets the kernel dropped because the UDP socket's
        /// receive buffer was full (`SO_RXQ_OVFL`; a segmented run kept
        /// whole counts once). Learnt from the next packet that arrives,
        /// or read from the socket before the engine sleeps.
        WireDropSocketOverflow = 41 => "wire_drop_socket_overflow",
        /// Requests refused: the asking process would hold more shared
        /// memory than its quota (`client_memory`).
        QuotaRefusedMemory = 42 => "quota_refused_memory",
        /// Requests refused: the asking user's processes would hold more
        /// shared memory than the user's quota (`user_memory`).
        QuotaRefusedUserMemory = 43 => "quota_refused_user_memory",
        /// Endpoints refused: the asking process holds its most endpoints
        /// (`client_endpoints`).
        QuotaRefusedEndpoints = 44 => "quota_refused_endpoints",
        /// Connections the engine could not take because it had no file
        /// descriptor left (`EMFILE`, `ENFILE`): each was accepted on a
        /// descriptor kept in reserve and closed at once. (Should even
        /// the reserve be spent, the engine stops watching its listener
        /// until a client leaves; the connections wait in its backlog.)
        ControlDropFdLimit = 45 => "control_drop_fd_limit",
        /// `accept` on the control listener failed for another reason
        /// (out of kernel memory, a connection aborted before it was
        /// taken).
        ControlAcceptErrors = 46 => "control_accept_errors",
        /// Connections closed at once: their process (or user) already
        /// held its most idle connections, those with no endpoint
        /// (`client_idle_connections`, `user_idle_connections`).
        ControlDropIdleLimit = 47 => "control_drop_idle_limit",
        /// Zero-length control packets (refused with `BadRequest`).
        ControlDropEmpty = 48 => "control_drop_empty",
        /// Control packets longer than the protocol's largest (refused
        /// with `BadRequest`).
        ControlDropOversize = 49 => "control_drop_oversize",
        /// Replies and notices the engine could not send: the client's
        /// socket was full (it does not read it) or gone.
        ControlRepliesLost = 50 => "control_replies_lost",
        /// Wire drop: a datagram from an address that is neither on the
        /// engine's allowlist (`allow_peers`) nor a peer it opened a
        /// channel to; or an open request from an address not on the
        /// allowlist.
        WireDropPeerNotAllowed = 51 => "wire_drop_peer_not_allowed",
        /// Wire drop: with a cluster key, a control frame without a valid
        /// MAC (another key, none, or altered).
        WireDropBadMac = 52 => "wire_drop_bad_mac",
        /// Wire drop: with a cluster key, a control frame seen before, or
        /// stamped outside the replay window.
        WireDropReplay = 53 => "wire_drop_replay",
        /// Wire drop: an open refused, the peer holding its most channels
        /// (`peer_channels_max`, half-open and open).
        WireDropPeerChannelsFull = 54 => "wire_drop_peer_channels_full",
        /// Wire drop: an open refused, the peer holding its most channels
        /// accepted but not yet confirmed (`peer_half_open_max`).
        WireDropPeerHalfOpenFull = 55 => "wire_drop_peer_half_open_full",
        /// Peer engines found silent past the liveness timeout (their
        /// channels closed, their owners told).
        WirePeersSilent = 56 => "wire_peers_silent",
        /// Remote channels closed by the engine: their peer silent past the
        /// liveness timeout, or accepted and never confirmed.
        WireChannelsExpired = 57 => "wire_channels_expired",
        /// Keepalive frames sent to peers with channels.
        WireKeepalivesSent = 58 => "wire_keepalives_sent",
        /// VI connections granted (each counts once, for both its VIs).
        ViConnected = 59 => "vi_connected",
        /// VI connection requests refused: rejected by the listener, with
        /// the wrong attributes, not answered in time, or their listener
        /// gone.
        ViRefused = 60 => "vi_refused",
        /// VIs closed (by their owner, or reclaimed when it died).
        ViClosed = 61 => "vi_closed",
        /// Memory regions registered.
        MemoryRegistered = 62 => "memory_registered",
        /// Datagrams sent twice by the wire's fault injection
        /// (`wire_dup_ppm`).
        WireInjectedDuplicates = 63 => "wire_injected_duplicates",
        /// Datagrams held back behind later ones by the wire's fault
        /// injection (`wire_reorder_ppm`).
        WireInjectedReorders = 64 => "wire_injected_reorders",
        /// UDM jobs created.
        UdmJobs = 65 => "udm_jobs",
        /// UDM job creations refused: the process has made as many jobs
        /// as the engine allows one process (`client_udm_jobs`).
        QuotaRefusedUdmJobs = 72 => "quota_refused_udm_jobs",
        /// UDM joins refused: the process has joined as many nodes as the
        /// engine allows one process (`client_udm_nodes`).
        QuotaRefusedUdmNodes = 73 => "quota_refused_udm_nodes",
        /// UDM nodes the engine visited for their divert rings, buffers
        /// and the atomicity timeout (what its UDM work per turn follows).
        UdmNodeVisits = 74 => "udm_node_visits",
        /// Reads of `/proc` to tell whether a UDM node's process is
        /// stopped.
        UdmProcReads = 75 => "udm_proc_reads",
        /// Engine-carried VIs the engine visited for their queues, timers
        /// and acks (what its VI work per turn follows).
        ViVisits = 66 => "vi_visits",
        /// Memory regions refused: the process held its most
        /// (`client_regions`).
        QuotaRefusedRegions = 80 => "quota_refused_regions",
        /// VIs refused: the process held its most (`client_vis`).
        QuotaRefusedVis = 81 => "quota_refused_vis",
        /// Discriminators refused: the process listened on its most
        /// (`client_listeners`).
        QuotaRefusedListeners = 82 => "quota_refused_listeners",
        /// New objects (endpoints, regions, VIs, UDM jobs and nodes)
        /// refused: the engine's free file descriptors were down to its
        /// reserve (`fd_reserve`).
        FdReserveRefused = 83 => "fd_reserve_refused",
        /// VI connection requests refused: their connecting process or
        /// peer address had its most waiting (`vi_pending_per_peer`).
        ViPendingRefusedPeer = 84 => "vi_pending_refused_peer",
        /// VI connection requests refused: the peer's IP address had its
        /// most waiting (`vi_pending_per_ip`).
        ViPendingRefusedIp = 85 => "vi_pending_refused_ip",
        /// VI connection requests refused: the engine had its most
        /// waiting (`vi_pending_max`).
        ViPendingRefusedTotal = 86 => "vi_pending_refused_total",
        /// VI connection requests refused: their discriminator had its
        /// backlog waiting.
        ViPendingRefusedBacklog = 87 => "vi_pending_refused_backlog",
        /// Wire drop: an open refused, the peer's IP address holding its
        /// most channels (`peer_ip_channels_max`).
        WireDropPeerIpChannelsFull = 88 => "wire_drop_peer_ip_channels_full",
        /// Wire drop: an open refused, the peer's IP address holding its
        /// most channels accepted but not confirmed
        /// (`peer_ip_half_open_max`).
        WireDropPeerIpHalfOpenFull = 89 => "wire_drop_peer_ip_half_open_full",
        /// Region grants ended because the VI they were made for closed
        /// or broke.
        ViGrantsEnded = 90 => "vi_grants_ended",
        /// Peer-region lookups refused: no live connection, or no grant.
        ViPeerRegionRefused = 91 => "vi_peer_region_refused",
    }
}

counter_enum! {
    /// Counters of one endpoint (engine side).
    EndpointCounter {
        /// Messages sent through the engine.
        TxMsgs = 0 => "tx_msgs",
        /// Bytes sent through the engine.
        TxBytes = 1 => "tx_bytes",
        /// Messages delivered to this endpoint.
        RxMsgs = 2 => "rx_msgs",
        /// Bytes delivered to this endpoint.
        RxBytes = 3 => "rx_bytes",
        /// Send descriptors rejected: channel not held.
        TxBadChannel = 4 => "tx_bad_channel",
        /// Send descriptors rejected: buffer outside the buffer area.
        TxBadBuffer = 5 => "tx_bad_buffer",
        /// Send descriptors rejected: bad length.
        TxBadLength = 6 => "tx_bad_length",
        /// Send descriptors rejected: reserved flags set.
        TxBadFlags = 7 => "tx_bad_flags",
        /// Send descriptors on a channel whose peer is gone.
        TxPeerGone = 8 => "tx_peer_gone",
        /// Ring positions found corrupt (head/tail out of range).
        RingCorrupt = 9 => "ring_corrupt",
        /// Incoming messages dropped: no free buffer.
        RxDropNoBuffer = 10 => "rx_drop_no_buffer",
        /// Incoming messages dropped: receive ring full.
        RxDropRingFull = 11 => "rx_drop_ring_full",
        /// Incoming messages dropped: too large for 14 buffers.
        RxDropTooLarge = 12 => "rx_drop_too_large",
        /// Free-ring entries rejected: offset outside the buffer area.
        FreeBadOffset = 13 => "free_bad_offset",
        /// Events dropped: event ring full.
        EventDropRingFull = 14 => "event_drop_ring_full",
        /// Times the engine woke the sleeping client.
        ClientWakeups = 15 => "client_wakeups",
        /// Doorbells rung by the client.
        Doorbells = 16 => "doorbells",
        /// Channels opened.
        ChannelsOpened = 17 => "channels_opened",
        /// Channel-open requests refused.
        ChannelsRefused = 18 => "channels_refused",
        /// Messages sent over the wire.
        WireTxMsgs = 19 => "wire_tx_msgs",
        /// Messages received from the wire.
        WireRxMsgs = 20 => "wire_rx_msgs",
        /// Send descriptors deferred: engine send budget exhausted this round.
        TxDeferred = 21 => "tx_deferred",
        /// Applet doTx invocations.
        AppletTxCalls = 22 => "applet_tx_calls",
        /// Applet doRx invocations.
        AppletRxCalls = 23 => "applet_rx_calls",
        /// Applet doTimer invocations.
        AppletTimerCalls = 24 => "applet_timer_calls",
        /// Time spent in the applet, ns: invocations that used more than
        /// 2 000 units of work are timed exactly, one short one in 16 is
        /// timed and counted 16 times (an estimate).
        AppletTimeNs = 25 => "applet_time_ns",
        /// Longest timed applet invocation, ns.
        AppletMaxNs = 26 => "applet_max_ns",
        /// Work (fuel) used by the applet.
        AppletFuel = 27 => "applet_fuel",
        /// Applet faults: work budget exhausted.
        AppletFaultFuel = 28 => "applet_fault_fuel",
        /// Applet faults: array bounds, null or negative size.
        AppletFaultMemory = 29 => "applet_fault_memory",
        /// Applet faults: division by zero.
        AppletFaultArith = 30 => "applet_fault_arith",
        /// Applet faults: call depth.
        AppletFaultDepth = 31 => "applet_fault_depth",
        /// Applet faults: heap quota.
        AppletFaultHeap = 32 => "applet_fault_heap",
        /// Applet faults: a native refused its arguments.
        AppletFaultNative = 33 => "applet_fault_native",
        /// Applet faults: other.
        AppletFaultOther = 34 => "applet_fault_other",
        /// Applets detached after repeated faults.
        AppletDetached = 35 => "applet_detached",
        /// Applets attached.
        AppletAttached = 36 => "applet_attached",
        /// Arrivals dropped: the applet's queue was full.
        AppletRxDropped = 37 => "applet_rx_dropped",
        /// A level, not a count: 1 while the attached applet runs as
        /// machine code (JIVE compiles it on a thread of its own after
        /// attach; the engine installs the code at a later invocation), 0
        /// while it runs interpreted or no applet is attached.
        AppletCompiled = 38 => "applet_compiled",
        /// Applet faults: the invocation ran past its time limit.
        AppletFaultTimeout = 39 => "applet_fault_timeout",
        /// A level, set when `unet stat` asks: the channels of the
        /// endpoint open now, their peer still there (`channels_peak`, in
        /// the slot's header, is the most channel tags it held at once,
        /// those whose peer left and that it has not closed included).
        ChannelsOpen = 40 => "channels_open",
        /// A level, set when `unet stat` asks: bytes of shared memory
        /// charged to the endpoint's process for it: its segment and the
        /// direct connections opened from it.
        MemoryBytes = 41 => "memory_bytes",
        /// Buffered endpoints (two-case delivery): messages that found no
        /// room in the receive queue or no free buffer (or came while
        /// earlier ones waited) and were put in the endpoint's virtual
        /// buffer instead of dropped.
        RxBuffered = 42 => "rx_buffered",
        /// Buffered endpoints: times a local sender was held back (its
        /// send queue not taken further) because the virtual buffer was at
        /// its limit; counted once per stall.
        RxHeld = 43 => "rx_held",
        /// Buffered endpoints: messages dropped because the virtual buffer
        /// was at its limit and their sender could not be held back (an
        /// arrival from the wire, or what an applet sends).
        RxDropBufferLimit = 44 => "rx_drop_buffer_limit",
        /// A level: pages of the virtual buffer holding memory now.
        BufferPages = 45 => "buffer_pages",
        /// A level: the most pages the virtual buffer held at once.
        BufferPagesMax = 46 => "buffer_pages_max",
        /// Pages of the virtual buffer given back to the system.
        PagesReturned = 47 => "pages_returned",
        /// A level: the virtual buffer's limit in bytes (0: not buffered,
        /// U-Net's drop).
        BufferLimit = 48 => "buffer_limit",
    }
}

/// Index of the first wire-drop counter; the first
/// [`WIRE_DROP_FIRST_RUN`] wire drop reasons `r` (in the engine's
/// `WireDrop` order) are counted at `WIRE_DROP_BASE + r`, the later ones at
/// `WIRE_DROP_BASE_2 + (r - WIRE_DROP_FIRST_RUN)`. The engine names each
/// reason's counter (`WireDrop::counter`) and checks, when it compiles,
/// that it sits at this slot.
pub const WIRE_DROP_BASE: usize = 17;
/// Wire drop reasons counted from [`WIRE_DROP_BASE`] on.
pub const WIRE_DROP_FIRST_RUN: usize = 19;
/// Index of the counter of wire drop reason [`WIRE_DROP_FIRST_RUN`] (the
/// reasons added later, after other counters had taken the slots).
pub const WIRE_DROP_BASE_2: usize = 51;

/// The counter slot of wire drop reason `r` (see [`WIRE_DROP_BASE`]).
pub const fn wire_drop_slot(r: usize) -> usize {
    if r < WIRE_DROP_FIRST_RUN {
        WIRE_DROP_BASE + r
    } else {
        WIRE_DROP_BASE_2 + (r - WIRE_DROP_FIRST_RUN)
    }
}

const _: () = {
    assert!(EngineCounter::ALL.len() <= ENGINE_COUNTERS);
    assert!(EndpointCounter::ALL.len() <= ENDPOINT_COUNTERS);
};
