//! The direct path: one side of a connection segment shared by two local
//! processes only (layout in `unet_abi`, "Direct connection segment").
//!
//! Each direction is a single-producer, single-consumer byte ring of
//! variable-length records. The producer copies the payload in and publishes
//! the 8-byte record header with one Release store; the consumer spins on the
//! header at its position, copies the payload out, and publishes its position
//! now and then so the producer knows the space is free. The peer is not
//! trusted: every header is checked (tag, length, padding) before use, and a
//! bad one marks the connection broken rather than reading out of bounds or
//! skipping padding for as long as the peer writes it.
//!
//! The segment's header and its lines are mapped in `crate::shm`.
//! `unsafe` is allowed here for the rings: memory shared with the peer,
//! reached through raw pointers into the mapping the connection owns, and
//! every message is copied in and out at offsets the record rules above
//! bound, with no second check on the hot path.
//!
//! This file holds the connection, its set-up and teardown and the
//! helpers the others share; `send` the sending side, `recv` the
//! receiving side, `wait` the wait and wake policy, `loan` lending the
//! connection to a VI's data path.

use std::sync::atomic::{AtomicU64, Ordering};

use unet_abi::*;
use unet_sys::{self as sys, Segment};

use crate::shm::{ConnLines, ConnRings, Mapped};

mod loan;
mod recv;
mod send;
mod wait;

pub(crate) use loan::ConnLoan;

/// Why a direct send did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DirectSendError {
    /// No room until the peer consumes.
    Full,
    /// Larger than half the ring.
    TooLarge,
    /// The peer closed or died.
    Closed,
}

/// What polling the receive direction found.
pub(crate) enum DirectRecv {
    /// Nothing yet.
    Empty,
    /// A message of this length was copied into the buffer.
    Message(usize),
    /// The next message needs a buffer of this many bytes; it stays queued.
    TooSmall(usize),
    /// The peer wrote something impossible; the connection is unusable.
    Broken,
}

// `DirectConn::count` updates a message counter and the byte counter
// that follows it.
const _: () = assert!(
    ClientCounter::DirectTxBytes as usize == ClientCounter::DirectTxMsgs as usize + 1
        && ClientCounter::DirectRxBytes as usize == ClientCounter::DirectRxMsgs as usize + 1
        && (ClientCounter::DirectRxBytes as usize) < CLIENT_COUNTERS
);

pub(crate) struct DirectConn {
    /// The mapping and the header's lines as this side sees them; `tx`
    /// and `rx` point into it.
    map: Mapped<ConnHeader, ConnLines>,
    pub channel: u16,
    size: u64,
    /// `size - 1`: positions to offsets.
    mask: u64,
    /// Largest payload of one record (half the ring, less a header).
    max_len: u64,
    tx: *mut u8,
    rx: *const u8,
    tx_pos: u64,
    /// The room last seen: the consumer's position then, plus the ring.
    tx_limit: u64,
    /// Records end at or before this position without a look at the
    /// consumer or padding: the lesser of `tx_limit` and the end of the
    /// current lap (one test on the send path).
    tx_fit: u64,
    rx_pos: u64,
    /// The span of the last record received (see [`DirectConn::advance_rx`]).
    rx_span: u64,
    rx_published: u64,
    pub broken: bool,
    /// The engine said the peer is gone (the endpoint releases the
    /// connection once it is drained).
    pub gone: bool,
    /// This endpoint's client counters (`ClientCounter` order), in its own
    /// segment's header: written by this process only, read by the engine
    /// when it answers a Stat request, so `unet stat` sees every message.
    counters: *const AtomicU64,
    /// This process publishes with a compiler fence only (see
    /// `sys::asymmetric_fences`).
    asym: bool,
    /// A message came since we last sent (see [`DirectConn::take_ahead`]).
    answered: bool,
}

/// Lines [`DirectConn::take_ahead`] writes at most: those of a record of
/// up to about 256 bytes.
const AHEAD_LINES: u64 = 4;

/// A cache line.
const LINE: u64 = 64;

/// How far past its new position a one-message receive asks for the
/// ring's line to be fetched (see [`DirectConn::recv_record`]).
const RX_AHEAD: u64 = 128;

/// A tag with this bit flipped is another position's.
const NOT_A_TAG: u32 = 0x8000_0000;

/// Ask for the cache line at `p` to read soon: a hint only, which never
/// faults and changes no memory.
#[inline(always)]
fn prefetch_read(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing into the program and cannot fault,
    // whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

// SAFETY: `tx` and `rx` point into `map`, which DirectConn owns, and
// `counters` into an endpoint's header (or `map`) that outlives it; the
// memory is shared memory accessed with atomics and byte copies.
unsafe impl Send for DirectConn {}

impl DirectConn {
    /// Map a connection segment; `side_b` tells which direction is ours.
    pub fn open(
        seg: Segment,
        channel: u16,
        side_b: bool,
        counters: &[AtomicU64; CLIENT_COUNTERS],
    ) -> Result<DirectConn, String> {
        let (map, rings) = Mapped::conn(seg, side_b)?;
        Ok(DirectConn::with(map, rings, channel, counters.as_ptr()))
    }

    /// [`DirectConn::open`] for a connection that counts in its own
    /// header (a VI's: this side's `a_counters` or `b_counters`, where the
    /// engine reads them for `unet stat`).
    pub fn open_counting_in_header(seg: Segment, side_b: bool) -> Result<DirectConn, String> {
        let (map, rings) = Mapped::conn(seg, side_b)?;
        // A pointer kept beside the mapping it points into.
        let counters = rings.own_counters;
        Ok(DirectConn::with(map, rings, 0, counters))
    }

    /// The connection over `map` and its `rings`, counting in the
    /// CLIENT_COUNTERS atomics at `counters`.
    fn with(
        map: Mapped<ConnHeader, ConnLines>,
        rings: ConnRings,
        channel: u16,
        counters: *const AtomicU64,
    ) -> DirectConn {
        let ConnRings { tx, rx, ring, .. } = rings;
        DirectConn {
            map,
            channel,
            size: ring,
            mask: ring - 1,
            max_len: ring / 2 - RECORD_HEADER as u64,
            tx,
            rx,
            tx_pos: 0,
            tx_limit: ring,
            tx_fit: ring,
            rx_pos: 0,
            rx_span: 0,
            rx_published: 0,
            broken: false,
            gone: false,
            counters,
            asym: sys::asymmetric_fences(),
            answered: false,
        }
    }

    /// The consumer line of the direction we send on (written by the peer).
    #[inline(always)]
    fn tx_consumer(&self) -> &ConnConsumer {
        self.map.tx_consumer()
    }

    /// Our consumer line (direction we receive on).
    #[inline(always)]
    pub fn rx_consumer(&self) -> &ConnConsumer {
        self.map.rx_consumer()
    }

    /// True when the peer (or the engine on its behalf) closed.
    #[inline(always)]
    pub fn peer_closed(&self) -> bool {
        self.map.peer_closed().load(Ordering::Acquire) != 0
    }

    /// Mark our side closed and wake the peer.
    pub fn close(&self) {
        self.map.own_closed().store(1, Ordering::Release);
        let peer = self.tx_consumer();
        peer.futex.fetch_add(1, Ordering::Release);
        sys::futex_wake(&peer.futex, i32::MAX);
    }

    /// Why the peer broke the connection: a `ViError` code, 0 if it did not
    /// say (read after [`DirectConn::peer_closed`]).
    pub fn peer_error(&self) -> u32 {
        self.map.peer_error().load(Ordering::Acquire)
    }

    /// Say why we break the connection (a `ViError` code), then close.
    pub fn close_with_error(&self, code: u32) {
        self.map.own_error().store(code, Ordering::Release);
        self.close();
    }

    /// Add a message of `len` bytes to the counters `msgs` and `msgs + 1`.
    #[inline(always)]
    fn count(&self, msgs: ClientCounter, len: usize) {
        self.count_many(msgs, 1, len as u64);
    }

    /// Add `n` messages of `bytes` bytes in all to the counters `msgs` and
    /// `msgs + 1`.
    #[inline(always)]
    fn count_many(&self, msgs: ClientCounter, n: u64, bytes: u64) {
        // SAFETY: `counters` points at the CLIENT_COUNTERS atomics of the
        // endpoint header, which outlives every connection of the endpoint
        // (the endpoint owns both and only calls send/recv while alive);
        // msgs + 1 < CLIENT_COUNTERS for the two direct-path pairs.
        let (m, b) = unsafe {
            (
                &*self.counters.add(msgs as usize),
                &*self.counters.add(msgs as usize + 1),
            )
        };
        // One writer: a load and a store, no atomic read-modify-write.
        m.store(m.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        b.store(
            b.load(Ordering::Relaxed).wrapping_add(bytes),
            Ordering::Relaxed,
        );
    }

    #[inline]
    fn hdr_at(base: *const u8, off: u64) -> &'static AtomicU64 {
        // SAFETY: off is 8-aligned (records are RECORD_ALIGN-aligned) and
        // < ring size, so the u64 lies inside the ring; the mapping outlives
        // every use (the reference does not escape the calling method).
        unsafe { &*(base.add(off as usize) as *const AtomicU64) }
    }
}

#[cfg(test)]
mod tests;
