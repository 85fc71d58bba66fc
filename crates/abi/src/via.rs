//! The numbers of VIA (the Virtual Interface Architecture, as Javia uses
//! it) that cross a process boundary: reliability levels, error reasons
//! and the limits of a descriptor.
//!
//! A local VI is a direct connection segment (see the crate
//! documentation, "Direct connection segment") whose two sides are VIs:
//! each message is one record, gathered by the sender from its registered
//! memory and scattered by the receiver into the buffers of its next
//! posted receive descriptor. Two fields of that segment are VIA's: each
//! direction's consumer counts the messages it has placed
//! ([`ConnPlaced::placed`](crate::ConnPlaced::placed), what a send of
//! reliable reception waits for), and each side says why it broke the
//! connection ([`ConnHeader::a_error`](crate::ConnHeader::a_error), a
//! [`ViError`] code) before it marks itself closed.
//!
//! A VI to another engine is carried by the engine: its queues are rings in
//! a segment of its own ([`ViHeader`]).

use core::mem::{offset_of, size_of};
use core::sync::atomic::{AtomicU32, AtomicU64};

/// The reliability level of a VI (VIA 1.0, section 2.5; Javia section 2.1).
/// Both ends of a connection must choose the same one.
#[repr(u8)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Reliability {
    /// A message may be lost (every loss is counted); a send completes once
    /// the message has left.
    Unreliable = 0,
    /// A send completes once the message has reached the receiving side's
    /// interface; every message arrives exactly once and in order, or the
    /// VI breaks.
    #[default]
    ReliableDelivery = 1,
    /// A send completes only once the message is in a receive buffer the
    /// receiver posted.
    ReliableReception = 2,
}

impl Reliability {
    /// Decode; `None` for an unknown number.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Unreliable,
            1 => Self::ReliableDelivery,
            2 => Self::ReliableReception,
            _ => return None,
        })
    }

    /// A short name (`unreliable`, `reliable-delivery`,
    /// `reliable-reception`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Unreliable => "unreliable",
            Self::ReliableDelivery => "reliable-delivery",
            Self::ReliableReception => "reliable-reception",
        }
    }
}

/// Why a VI is in the error state, and the status of each descriptor it
/// completed with an error. VIA makes every error of a connection
/// catastrophic: the VI stays broken, and every descriptor outstanding on
/// it completes with the reason.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ViError {
    /// The peer closed its VI, or its process died.
    PeerGone = 1,
    /// A message arrived with no receive descriptor posted, on a VI that
    /// asked for VIA's strict behaviour (`strict_rnr`).
    ReceiverNotReady = 2,
    /// A message did not fit the receive descriptor it was given.
    TooLong = 3,
    /// A descriptor named memory it may not: an unknown region handle, an
    /// offset or length past its region, too many segments, or a message
    /// longer than the VI carries.
    BadDescriptor = 4,
    /// The peer did not acknowledge in time (retransmissions exhausted).
    Timeout = 5,
    /// The peer wrote something impossible into the shared ring.
    Broken = 6,
    /// The VI was closed by its owner with descriptors outstanding.
    Closed = 7,
}

impl ViError {
    /// Every reason, in the order of their numbers.
    pub const ALL: [ViError; 7] = [
        ViError::PeerGone,
        ViError::ReceiverNotReady,
        ViError::TooLong,
        ViError::BadDescriptor,
        ViError::Timeout,
        ViError::Broken,
        ViError::Closed,
    ];

    /// Decode; `None` for 0 (no error) or an unknown number.
    pub fn from_u32(v: u32) -> Option<Self> {
        Self::ALL.get((v as usize).wrapping_sub(1)).copied()
    }

    /// A short name (`peer-gone`, `receiver-not-ready`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::PeerGone => "peer-gone",
            Self::ReceiverNotReady => "receiver-not-ready",
            Self::TooLong => "too-long",
            Self::BadDescriptor => "bad-descriptor",
            Self::Timeout => "timeout",
            Self::Broken => "broken",
            Self::Closed => "closed",
        }
    }
}

impl core::fmt::Display for ViError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::PeerGone => "the peer VI is gone (closed, or its process died)",
            Self::ReceiverNotReady => {
                "a message arrived with no receive descriptor posted (strict VIA behaviour)"
            }
            Self::TooLong => "a message was longer than the receive descriptor's buffers",
            Self::BadDescriptor => {
                "a descriptor named memory outside its registered region, an unknown \
                 region, too many segments or too many bytes"
            }
            Self::Timeout => "the peer did not acknowledge in time",
            Self::Broken => "the peer corrupted the connection",
            Self::Closed => "the VI was closed",
        })
    }
}

/// Most data segments one descriptor may gather or scatter.
pub const VI_MAX_SEGMENTS: usize = 8;
/// Largest message a VI carries (VIA's maximum transfer size).
pub const VI_MAX_TRANSFER: usize = 256 * 1024;

// -------------------------------------------------------------------------
// The segment of a VI the engine carries (a VI to another engine)
// -------------------------------------------------------------------------

/// Magic of a VI segment: `b"UNETVI01"`.
pub const VI_MAGIC: u64 = u64::from_le_bytes(*b"UNETVI01");
/// Size of a [`ViHeader`].
pub const VI_HEADER_SIZE: usize = crate::PAGE;
/// Number of counter slots in a VI header.
pub const VI_COUNTERS: usize = 24;

/// The first page of the segment of a VI whose data the engine carries.
///
/// ```text
///  0x0000 ViHeader: identity and geometry (read-only), doorbell line
///         (engine_armed), client-wait line (cq_futex, client_sleeping),
///         state line (state), the engine's counters of the VI
///  0x1000 send queue:        RingHeader + cap × ViDesc   client → engine
///         receive queue:     RingHeader + cap × ViDesc   client → engine
///         send completions:  RingHeader + cap × ViCompl  engine → client
///         receive completions: RingHeader + cap × ViCompl engine → client
/// ```
///
/// A descriptor names its data by region handle; the engine reads it once
/// into a copy and checks every segment against its own table of the
/// owner's regions. It completes each descriptor of a queue in order, on
/// the matching completion ring, which it never fills past the capacity
/// (it takes a descriptor only when its completion will have room).
#[repr(C, align(4096))]
pub struct ViHeader {
    /// [`VI_MAGIC`].
    pub magic: u64,
    /// [`crate::VERSION`].
    pub version: u32,
    /// [`VI_HEADER_SIZE`].
    pub header_size: u32,
    /// Total size of the segment.
    pub segment_size: u64,
    /// The VI's id in its engine.
    pub vi_id: u32,
    /// Its [`Reliability`].
    pub reliability: u8,
    /// 1: strict receiver-not-ready.
    pub strict_rnr: u8,
    /// Reserved, zero.
    pub _reserved0: u16,
    /// Capacity of each of the four rings (power of two).
    pub queue_cap: u32,
    /// Reserved, zero.
    pub _reserved1: u32,
    /// Offset of the send queue's ring header.
    pub sq_off: u64,
    /// Offset of the receive queue's ring header.
    pub rq_off: u64,
    /// Offset of the send completion ring's header.
    pub scq_off: u64,
    /// Offset of the receive completion ring's header.
    pub rcq_off: u64,
    /// Engine incarnation id.
    pub engine_id: u64,
    _pad0: [u8; 0x100 - 0x50],
    /// Doorbell line (0x100), as an endpoint's: the engine sets it to 1
    /// before it sleeps; a client that posts swaps it to 0 and, if it was
    /// 1, writes the VI's eventfd.
    pub engine_armed: AtomicU32,
    _pad1: [u8; 60],
    /// Client-wait line (0x140): the engine increments `cq_futex` and wakes
    /// it after pushing a completion while `client_sleeping` is 1.
    pub cq_futex: AtomicU32,
    /// 1 while the client sleeps (or is about to) on `cq_futex`.
    pub client_sleeping: AtomicU32,
    _pad2: [u8; 56],
    /// State line (0x180): 0 while connected, else the [`ViError`] code
    /// of the error state (written by the engine before the completions
    /// that carry it).
    pub state: AtomicU32,
    _pad3: [u8; 60],
    /// The engine's counters of the VI (0x1C0), indexed by [`ViCounter`].
    pub counters: [AtomicU64; VI_COUNTERS],
    _pad4: [u8; 4096 - 0x1C0 - 8 * VI_COUNTERS],
}

/// One segment of a descriptor in shared memory.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ViSegDesc {
    /// The region's handle.
    pub handle: u32,
    /// Length in bytes.
    pub len: u32,
    /// Byte offset in the region.
    pub offset: u64,
}

/// A descriptor in shared memory (send or receive queue).
///
/// ```text
///  0 id: u64         the client's number, echoed in the completion
///  8 nsegs: u32      1..=VI_MAX_SEGMENTS (0: an empty message, sends only)
/// 12 flags: u32      reserved, zero
/// 16 segs: [ViSegDesc; 8]
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ViDesc {
    /// The client's number for it.
    pub id: u64,
    /// Segments used.
    pub nsegs: u32,
    /// Reserved, zero.
    pub flags: u32,
    /// The segments.
    pub segs: [ViSegDesc; VI_MAX_SEGMENTS],
}

/// A completion in shared memory.
///
/// ```text
///  0 id: u64       the descriptor's number
///  8 status: i32   0 done, or -(ViError code)
/// 12 len: u32      bytes sent or received
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ViCompl {
    /// The descriptor's number.
    pub id: u64,
    /// 0, or minus a [`ViError`] code.
    pub status: i32,
    /// Message length.
    pub len: u32,
}

// SAFETY: repr(C) structs of integers; any bit pattern is a valid value.
unsafe impl crate::ShmSafe for ViDesc {}
// SAFETY: as above.
unsafe impl crate::ShmSafe for ViCompl {}

const _: () = {
    assert!(size_of::<ViHeader>() == VI_HEADER_SIZE);
    assert!(offset_of!(ViHeader, vi_id) == 0x18);
    assert!(offset_of!(ViHeader, queue_cap) == 0x20);
    assert!(offset_of!(ViHeader, sq_off) == 0x28);
    assert!(offset_of!(ViHeader, engine_id) == 0x48);
    assert!(offset_of!(ViHeader, engine_armed) == 0x100);
    assert!(offset_of!(ViHeader, cq_futex) == 0x140);
    assert!(offset_of!(ViHeader, client_sleeping) == 0x144);
    assert!(offset_of!(ViHeader, state) == 0x180);
    assert!(offset_of!(ViHeader, counters) == 0x1C0);
    assert!(size_of::<ViSegDesc>() == 16);
    assert!(size_of::<ViDesc>() == 16 + 16 * VI_MAX_SEGMENTS);
    assert!(offset_of!(ViDesc, segs) == 16);
    assert!(size_of::<ViCompl>() == 16);
};

/// Offsets of everything in a VI segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViLayout {
    /// Capacity of each ring.
    pub cap: u32,
    /// Send queue ring header.
    pub sq_off: u64,
    /// Receive queue ring header.
    pub rq_off: u64,
    /// Send completion ring header.
    pub scq_off: u64,
    /// Receive completion ring header.
    pub rcq_off: u64,
    /// Total size (a page multiple).
    pub segment_size: u64,
}

impl ViLayout {
    /// The layout for rings of `cap` entries (a power of two in
    /// 2..=65536); None otherwise. The one place offsets are computed.
    pub fn new(cap: u32) -> Option<ViLayout> {
        if !cap.is_power_of_two() || !(2..=65536).contains(&cap) {
            return None;
        }
        let d = crate::ring_bytes(cap, size_of::<ViDesc>()) as u64;
        let c = crate::ring_bytes(cap, size_of::<ViCompl>()) as u64;
        let sq_off = VI_HEADER_SIZE as u64;
        let rq_off = sq_off + d;
        let scq_off = rq_off + d;
        let rcq_off = scq_off + c;
        let end = rcq_off + c;
        Some(ViLayout {
            cap,
            sq_off,
            rq_off,
            scq_off,
            rcq_off,
            segment_size: end.div_ceil(crate::PAGE as u64) * crate::PAGE as u64,
        })
    }
}

macro_rules! vi_counters {
    ($($(#[$m:meta])* $v:ident = $n:expr => $s:expr),* $(,)?) => {
        /// The engine's counters of a VI it carries ([`ViHeader::counters`]).
        #[repr(usize)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum ViCounter { $($(#[$m])* $v = $n),* }
        impl ViCounter {
            /// Every counter, in slot order.
            pub const ALL: &'static [ViCounter] = &[$(ViCounter::$v),*];
            /// Name shown by `unet stat`.
            pub const fn name(self) -> &'static str { match self { $(ViCounter::$v => $s),* } }
        }
    };
}

vi_counters! {
    /// Messages sent (first transmissions).
    TxMsgs = 0 => "tx_msgs",
    /// Bytes sent (first transmissions).
    TxBytes = 1 => "tx_bytes",
    /// Messages placed into posted receive buffers.
    RxMsgs = 2 => "rx_msgs",
    /// Bytes placed.
    RxBytes = 3 => "rx_bytes",
    /// Messages sent again (retransmissions).
    Retransmits = 4 => "retransmits",
    /// Arrivals discarded as duplicates.
    Duplicates = 5 => "duplicates",
    /// Arrivals after a gap (kept inside the window until the gap fills).
    OutOfOrder = 6 => "out_of_order",
    /// Arrivals discarded: past the window the receiver advertised.
    OverWindow = 7 => "over_window",
    /// Messages lost on an unreliable VI (sequence gaps).
    Lost = 8 => "lost",
    /// Retransmission timeouts.
    Timeouts = 9 => "timeouts",
    /// Acknowledgements sent.
    AcksTx = 10 => "acks_tx",
    /// Acknowledgements received.
    AcksRx = 11 => "acks_rx",
    /// Acknowledgements ignored: naming messages never sent.
    BogusAcks = 12 => "bogus_acks",
    /// Messages held for want of a posted receive (a level: now).
    Held = 13 => "held",
    /// Messages that waited for a receive to be posted.
    HeldTotal = 14 => "held_total",
    /// Descriptors completed with an error.
    Errors = 15 => "errors",
    /// Descriptors refused as bad (unknown region, outside it, ...).
    BadDescriptors = 16 => "bad_descriptors",
    /// Zero-window probes sent.
    Probes = 17 => "probes",
    /// Acknowledgements older than one already taken (reordered on the
    /// wire, or replayed): ignored.
    StaleAcks = 18 => "stale_acks",
    /// Retransmissions of part of a message: the fragments the receiver
    /// said it missed.
    PartialRetransmits = 19 => "partial_retransmits",
    /// Fragments refused as not agreeing with the others of their
    /// message (or too long for a VI).
    BadFragments = 20 => "bad_fragments",
    /// Arrivals not kept for want of the VI's held-bytes budget (the
    /// sender resends them; a reliable level's window closed meanwhile).
    BudgetRefused = 21 => "budget_refused",
    /// Bytes the engine keeps for the VI now: held for want of a
    /// receive, arrived after a gap, or in reassembly (a level).
    KeptBytes = 22 => "kept_bytes",
    /// Fragments of a message of several that came again (its first
    /// fragment also counts the message in `duplicates`).
    DuplicateFragments = 23 => "duplicate_fragments",
}

const _: () = assert!(ViCounter::ALL.len() <= VI_COUNTERS);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for e in ViError::ALL {
            assert_eq!(ViError::from_u32(e as u32), Some(e));
        }
        assert_eq!(ViError::from_u32(0), None);
        assert_eq!(ViError::from_u32(8), None);
        for r in [
            Reliability::Unreliable,
            Reliability::ReliableDelivery,
            Reliability::ReliableReception,
        ] {
            assert_eq!(Reliability::from_u8(r as u8), Some(r));
        }
        assert_eq!(Reliability::from_u8(3), None);
    }
}
