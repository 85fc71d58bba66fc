//! The direct connection segment (a connection between two local
//! endpoints, or a local VI connection) and the records of its rings.
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

use core::mem::{offset_of, size_of};
use core::sync::atomic::{AtomicU32, AtomicU64};

use crate::{CLIENT_COUNTERS, PAGE};

/// Magic of a direct connection segment: `b"UNETCN01"`.
pub const CONN_MAGIC: u64 = u64::from_le_bytes(*b"UNETCN01");

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
    /// [`VERSION`](crate::VERSION).
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
    /// Why side A broke the connection, a [`ViError`](crate::ViError) code (0: it did not;
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
    /// [`ClientCounter`](crate::ClientCounter): messages and bytes each way, bad records), for
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
