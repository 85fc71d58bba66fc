//! One side's view of a direct connection's segment (layout in
//! `unet_abi`, "Direct connection segment"): the header checked once (by
//! `unet_abi`'s `ConnView`), the lines each side writes reached through
//! safe accessors, and where the two rings are.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

use unet_abi::view::{ConnView, LayoutError, Side};
use unet_abi::{ConnConsumer, ConnHeader, CONN_HEADER_SIZE};
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

/// What a refused connection segment is reported as.
fn conn_error(e: LayoutError) -> String {
    match e {
        LayoutError::BadMagic(_) | LayoutError::BadVersion(_) => {
            "connection segment has a bad magic or version".into()
        }
        LayoutError::BadRingSize(ring) => format!("connection segment ring size {ring} is invalid"),
        LayoutError::TooShort { need, .. } if need <= CONN_HEADER_SIZE as u64 => {
            "connection segment too small".into()
        }
        e => format!("connection segment: {e}"),
    }
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
    /// The header the engine wrote is checked by
    /// [`ConnView::from_segment`] (magic, version, ring size, against the
    /// mapping's length).
    pub fn conn(seg: Segment, side_b: bool) -> Result<(Self, ConnRings), String> {
        // SAFETY: the mapping lives in `seg`, kept beside every pointer
        // taken from the view (in the Mapped and the ConnRings, which the
        // caller keeps with it).
        let view = unsafe { ConnView::from_segment(seg.ptr(), seg.len()) }.map_err(conn_error)?;
        let s = view.side(Side::of(side_b));
        let rings = ConnRings {
            tx: s.tx.as_ptr(),
            rx: s.rx.as_ptr(),
            ring: view.ring_size as u64,
            own_counters: s.own_counters.as_ptr(),
        };
        let lines = ConnLines {
            tx_cons: NonNull::from(s.tx_consumer),
            rx_cons: NonNull::from(s.rx_consumer),
            tx_placed: NonNull::from(s.tx_placed),
            rx_placed: NonNull::from(s.rx_placed),
            peer_closed: NonNull::from(s.peer_closed),
            own_closed: NonNull::from(s.own_closed),
            peer_error: NonNull::from(s.peer_error),
            own_error: NonNull::from(s.own_error),
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
