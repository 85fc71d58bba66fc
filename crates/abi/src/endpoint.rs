//! The endpoint segment: its header page, the descriptors of its four
//! rings (send, receive, free, event), and the geometry and [`Layout`]
//! that place the rings and the buffer area.
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
//! See [`crate::ring`] for the ring header and the push/pop protocol.

use core::mem::{align_of, offset_of, size_of};
use core::sync::atomic::{AtomicU32, AtomicU64};

use crate::{ring_bytes, EndpointCounter, ShmSafe, CLIENT_COUNTERS, PAGE};

/// Magic of an endpoint segment: `b"UNETEP01"` read as a little-endian u64.
pub const ENDPOINT_MAGIC: u64 = u64::from_le_bytes(*b"UNETEP01");

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
    /// [`VERSION`](crate::VERSION).
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
    /// Offset of the send ring's [`RingHeader`](crate::RingHeader).
    pub send_off: u64,
    /// Offset of the receive ring's [`RingHeader`](crate::RingHeader).
    pub recv_off: u64,
    /// Offset of the free ring's [`RingHeader`](crate::RingHeader).
    pub free_off: u64,
    /// Offset of the event ring's [`RingHeader`](crate::RingHeader).
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
    /// 0x180), indexed by [`ClientCounter`](crate::ClientCounter). Self-reported: the engine never
    /// trusts them.
    pub client_counters: [AtomicU64; CLIENT_COUNTERS],
    _pad3: [u8; 4096 - 0x180 - 8 * CLIENT_COUNTERS],
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

/// A send (transmit) descriptor, pushed by the client, consumed by the engine.
///
/// ```text
///  0 offset: u32   buffer-area offset of the message
///  4 len: u32      message length in bytes
///  8 channel: u16  channel tag to send on
/// 10 flags: u16    SEND_AM (an active message for SPINE) or zero
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
    /// [`SEND_AM`](crate::spine::SEND_AM) or zero.
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
    /// Length is zero or above [`MAX_MESSAGE`](crate::MAX_MESSAGE).
    BadLength = -3,
    /// The channel's peer is gone.
    PeerGone = -4,
    /// Reserved flags were set.
    BadFlags = -5,
    /// The endpoint's applet faulted while handling it.
    AppletFault = -6,
    /// An active message ([`SEND_AM`](crate::spine::SEND_AM)) that SPINE
    /// could not take now: its queue or pools are full (try again).
    SpineFull = -7,
    /// An active message that SPINE refused: the adapter runs no SPINE,
    /// the handler number is out of range, or the framing is bad.
    SpineRefused = -8,
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
            -7 => Self::SpineFull,
            -8 => Self::SpineRefused,
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
///  6 flags: u8         RECV_INLINE: payload is in `data`;
///                     RECV_AM: an active message (channel = handler)
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
    /// [`RECV_INLINE`], [`RECV_AM`](crate::spine::RECV_AM), both or 0.
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

impl crate::ring::Ring<RecvDesc> {
    /// Copy the first `out.len()` (at most [`INLINE_MAX`]) bytes of the
    /// inline payload of the descriptor at `pos` into `out`, straight from
    /// the slot: a copy out of a descriptor just read whole
    /// ([`Ring::read`](crate::ring::Ring::read)) would stall on the stores
    /// that filled it. The slot is shared memory; a concurrent write can
    /// only give other bytes.
    #[inline]
    pub fn read_inline(&self, pos: u64, out: &mut [u8]) {
        let n = out.len().min(INLINE_MAX);
        let slot = self.slot_ptr(pos);
        // SAFETY: the slot is in the ring (masked index); its data has
        // INLINE_MAX >= n bytes and `out` at least n; shared memory and
        // our buffer do not overlap.
        unsafe {
            crate::copy::copy_bytes(
                core::ptr::addr_of!((*slot).data).cast::<u8>(),
                out.as_mut_ptr(),
                n,
            )
        };
    }
}

/// A receive descriptor written in place, in its slot of a receive ring,
/// before the ring's head publishes it.
///
/// The producer fills the slot field by field instead of building a
/// [`RecvDesc`] and copying it in: a descriptor assembled with narrow
/// stores and then copied with wide loads stalls the processor's
/// store-to-load forwarding (several nanoseconds a message, the largest
/// single cost of a delivery after the fence that wakes the client).
pub struct RecvSlot(*mut RecvDesc);

impl RecvSlot {
    /// The slot at `p`.
    ///
    /// # Safety
    ///
    /// `p` is an aligned slot of a live receive ring that the caller
    /// produces into and has not published (the consumer does not read
    /// it until the head moves past it), valid for as long as the
    /// `RecvSlot` is used.
    #[inline]
    pub unsafe fn new(p: *mut RecvDesc) -> RecvSlot {
        RecvSlot(p)
    }

    /// The slot's `data` bytes ([`INLINE_MAX`]).
    #[inline]
    pub fn data(&self) -> *mut u8 {
        // SAFETY: the slot is a live RecvDesc (`new`'s contract); no
        // reference is made, only the field's address.
        unsafe { core::ptr::addr_of_mut!((*self.0).data).cast::<u8>() }
    }

    /// Set buffer offset number `i` (< 14), little-endian.
    #[inline]
    pub fn set_offset(&self, i: usize, off: u32) {
        assert!(i < MAX_RX_BUFFERS);
        // SAFETY: i < 14, so bytes 4i..4i+4 are inside `data`'s 56;
        // unaligned writes need no alignment.
        unsafe {
            self.data()
                .add(i * 4)
                .cast::<u32>()
                .write_unaligned(off.to_le())
        }
    }

    /// Finish the descriptor: zero `data` from byte `used` on and write
    /// the header fields. Ready for the ring's head to publish.
    #[inline]
    pub fn finish(self, len: u32, channel: u16, flags: u8, nbufs: u8, used: usize) {
        let used = used.min(INLINE_MAX);
        let p = self.0;
        // SAFETY: `data() + used .. + INLINE_MAX` is inside the slot's
        // data; the header fields are in the slot (`new`'s contract).
        // Volatile for the header: the slot is shared memory its consumer
        // reads once published.
        unsafe {
            core::ptr::write_bytes(self.data().add(used), 0, INLINE_MAX - used);
            core::ptr::addr_of_mut!((*p).len).write_volatile(len);
            core::ptr::addr_of_mut!((*p).channel).write_volatile(channel);
            core::ptr::addr_of_mut!((*p).flags).write_volatile(flags);
            core::ptr::addr_of_mut!((*p).nbufs).write_volatile(nbufs);
        }
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

// SAFETY: all three are repr(C) structs of integers and byte arrays; any bit
// pattern is a valid value.
unsafe impl ShmSafe for SendDesc {}
// SAFETY: as above.
unsafe impl ShmSafe for RecvDesc {}
// SAFETY: as above.
unsafe impl ShmSafe for EventDesc {}

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
