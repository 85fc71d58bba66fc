//! One side's view of a direct connection's segment (layout in
//! `unet_abi`, "Direct connection segment"): the header checked once,
//! the lines each side writes reached through safe accessors, and where
//! the two rings are.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

use unet_abi::{
    conn_segment_size, ConnConsumer, ConnHeader, CONN_HEADER_SIZE, CONN_MAGIC, VERSION,
};
use unet_sys::Segment;

use super::{Header, Mapped, Views};

// SAFETY: a #[repr(C)] layout of unet_abi of integers and atomics only.
unsafe impl Header for ConnHeader {}

/// The lines of a connection's header as one side sees them: ours and
/// the peer's, by direction.
pub(crate) struct ConnLines {
    /// The consumer line of the direction we send on (the peer writes it).
    tx_cons: NonNull<ConnConsumer>,
    /// Our consumer line (the direction we receive on).
    rx_cons: NonNull<ConnConsumer>,
    /// What the peer has placed of what we sent (its own line).
    tx_placed: NonNull<AtomicU64>,
    /// What we have placed of what we received (our own line).
    rx_placed: NonNull<AtomicU64>,
    /// The peer's closed flag.
    peer_closed: NonNull<AtomicU32>,
    /// Our closed flag.
    own_closed: NonNull<AtomicU32>,
    /// Why the peer broke the connection (VIs; 0: it did not).
    peer_error: NonNull<AtomicU32>,
    /// Why we broke it.
    own_error: NonNull<AtomicU32>,
}

/// Where one side's rings and counters are in a connection's segment
/// (raw: whoever keeps them keeps the [`Mapped`] they point into).
pub(crate) struct ConnRings {
    /// The ring we write.
    pub tx: *mut u8,
    /// The ring we read.
    pub rx: *const u8,
    /// Their size in bytes.
    pub ring: u64,
    /// What this side counts of a VI connection (`a_counters` or
    /// `b_counters`, CLIENT_COUNTERS words), for `unet stat`.
    pub own_counters: *const AtomicU64,
}

// SAFETY: every pointer points into the segment the lines were made from.
unsafe impl Views for ConnLines {}

impl Mapped<ConnHeader, ConnLines> {
    /// Map a connection segment; `side_b` tells which direction is ours.
    pub fn conn(seg: Segment, side_b: bool) -> Result<(Self, ConnRings), String> {
        if seg.len() < CONN_HEADER_SIZE {
            return Err("connection segment too small".into());
        }
        // SAFETY: at least a header's worth of mapped, page-aligned memory.
        let h = unsafe { seg.ptr().cast::<ConnHeader>().as_ref() };
        let ring = h.ring_size as u64;
        if h.magic != CONN_MAGIC || h.version != VERSION {
            return Err("connection segment has a bad magic or version".into());
        }
        if !ring.is_power_of_two() || ring < 4096 || seg.len() < conn_segment_size(h.ring_size) {
            return Err(format!("connection segment ring size {ring} is invalid"));
        }
        let base = seg.ptr().as_ptr();
        // SAFETY: both rings lie inside the segment (checked above).
        let (a_to_b, b_to_a) = unsafe {
            (
                base.add(CONN_HEADER_SIZE),
                base.add(CONN_HEADER_SIZE + ring as usize),
            )
        };
        let (ab, ba) = (NonNull::from(&h.a_to_b), NonNull::from(&h.b_to_a));
        let (ac, bc) = (NonNull::from(&h.a_closed), NonNull::from(&h.b_closed));
        let (ae, be) = (NonNull::from(&h.a_error), NonNull::from(&h.b_error));
        let abp = NonNull::from(&h.a_to_b_placed.placed);
        let bap = NonNull::from(&h.b_to_a_placed.placed);
        let (acn, bcn) = (h.a_counters.as_ptr(), h.b_counters.as_ptr());
        let rings = if side_b {
            ConnRings {
                tx: b_to_a,
                rx: a_to_b,
                ring,
                own_counters: bcn,
            }
        } else {
            ConnRings {
                tx: a_to_b,
                rx: b_to_a,
                ring,
                own_counters: acn,
            }
        };
        let lines = if side_b {
            ConnLines {
                tx_cons: ba,
                rx_cons: ab,
                tx_placed: bap,
                rx_placed: abp,
                peer_closed: ac,
                own_closed: bc,
                peer_error: ae,
                own_error: be,
            }
        } else {
            ConnLines {
                tx_cons: ab,
                rx_cons: ba,
                tx_placed: abp,
                rx_placed: bap,
                peer_closed: bc,
                own_closed: ac,
                peer_error: be,
                own_error: ae,
            }
        };
        let map = Mapped::with(seg, lines).ok_or("connection segment too small")?;
        Ok((map, rings))
    }

    /// The consumer line of the direction we send on (written by the peer).
    #[inline(always)]
    pub fn tx_consumer(&self) -> &ConnConsumer {
        // SAFETY: points into the header page of `seg` (checked in conn),
        // mapped as long as self; every field is atomic.
        unsafe { self.view.tx_cons.as_ref() }
    }

    /// Our consumer line (the direction we receive on).
    #[inline(always)]
    pub fn rx_consumer(&self) -> &ConnConsumer {
        // SAFETY: as in tx_consumer.
        unsafe { self.view.rx_cons.as_ref() }
    }

    /// What the peer has placed of what we sent.
    #[inline(always)]
    pub fn tx_placed(&self) -> &AtomicU64 {
        // SAFETY: as in tx_consumer (a word of the mapped header).
        unsafe { self.view.tx_placed.as_ref() }
    }

    /// What we have placed of what we received.
    #[inline(always)]
    pub fn rx_placed(&self) -> &AtomicU64 {
        // SAFETY: as in tx_placed.
        unsafe { self.view.rx_placed.as_ref() }
    }

    /// The peer's closed flag.
    #[inline(always)]
    pub fn peer_closed(&self) -> &AtomicU32 {
        // SAFETY: as in tx_consumer.
        unsafe { self.view.peer_closed.as_ref() }
    }

    /// Our closed flag.
    #[inline(always)]
    pub fn own_closed(&self) -> &AtomicU32 {
        // SAFETY: as in tx_consumer.
        unsafe { self.view.own_closed.as_ref() }
    }

    /// Why the peer broke the connection.
    #[inline(always)]
    pub fn peer_error(&self) -> &AtomicU32 {
        // SAFETY: as in tx_consumer.
        unsafe { self.view.peer_error.as_ref() }
    }

    /// Why we broke it.
    #[inline(always)]
    pub fn own_error(&self) -> &AtomicU32 {
        // SAFETY: as in tx_consumer.
        unsafe { self.view.own_error.as_ref() }
    }
}
