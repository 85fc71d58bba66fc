//! The checked mapping of a direct connection's segment: [`ConnView`]
//! hands out its header and, for either side ([`Side`]), the lines that
//! side writes and reads and the two rings as that side uses them
//! ([`ConnSide`]) (layout in [`crate::conn`]).
//!
//! As for an endpoint, a view is made once, when a connection is made or
//! a side maps it, never per message, and its constructor names the
//! first check that fails ([`LayoutError`]):
//!
//! ```text
//!  the mapping        starts on a page, holds the header
//!  the header         magic, version                        (from_segment)
//!  the geometry       each ring a power of two of at least a page
//!  the segment        its size fits the mapping
//! ```
//!
//! A connection's header states no offsets: the rings lie right after
//! the header page, A→B first, so once the ring size is checked every
//! part is where the layout puts it.
//!
//! `from_segment` reads the header a peer wrote (a client mapping what
//! the engine made); `new` maps by a ring size the caller chose itself
//! (the engine); `init` lays a fresh segment out. After any of them the
//! accessors need no further check.

use core::ptr::{addr_of, addr_of_mut, NonNull};
use core::sync::atomic::{AtomicU32, AtomicU64};

use super::{check_mapping, check_spans, LayoutError, Part, Span};
use crate::conn::{ConnConsumer, ConnHeader, CONN_HEADER_SIZE, CONN_MAGIC};
use crate::{CLIENT_COUNTERS, PAGE, VERSION};

/// The smallest ring a connection may have: a page, so that both rings
/// start on one.
const MIN_RING: u32 = PAGE as u32;

/// A side of a direct connection: A opened it, B accepted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The side that opened the connection (it writes ring A→B).
    A,
    /// The side that accepted it (it writes ring B→A).
    B,
}

impl Side {
    /// Side B if `side_b`, else side A.
    #[inline]
    pub const fn of(side_b: bool) -> Side {
        if side_b {
            Side::B
        } else {
            Side::A
        }
    }
}

/// A direct connection's segment (header, two rings), checked once.
pub struct ConnView {
    /// Each ring's size in bytes (a power of two of at least a page).
    pub ring_size: u32,
    base: NonNull<u8>,
}

// SAFETY: a view only hands out atomics, ring addresses and a header
// whose shared words are atomics; the memory is shared memory made for
// concurrent use.
unsafe impl Send for ConnView {}
// SAFETY: as above.
unsafe impl Sync for ConnView {}

/// What one side of a connection reaches in its segment: the rings as it
/// uses them and the lines of the header, its own and its peer's.
pub struct ConnSide<'a> {
    /// The ring this side writes (`ring_size` bytes).
    pub tx: NonNull<u8>,
    /// The ring this side reads (`ring_size` bytes).
    pub rx: NonNull<u8>,
    /// The consumer line of the ring this side writes (the peer's).
    pub tx_consumer: &'a ConnConsumer,
    /// The consumer line of the ring this side reads (its own).
    pub rx_consumer: &'a ConnConsumer,
    /// What the peer has placed of what this side sent.
    pub tx_placed: &'a AtomicU64,
    /// What this side has placed of what it received.
    pub rx_placed: &'a AtomicU64,
    /// This side's closed flag.
    pub own_closed: &'a AtomicU32,
    /// The peer's closed flag.
    pub peer_closed: &'a AtomicU32,
    /// Why this side broke the connection (VIs; 0: it did not).
    pub own_error: &'a AtomicU32,
    /// Why the peer broke it.
    pub peer_error: &'a AtomicU32,
    /// What this side counts of a VI connection, for `unet stat`.
    pub own_counters: &'a [AtomicU64; CLIENT_COUNTERS],
}

fn conn_spans(ring: u32) -> (u64, [Span; 3]) {
    let (h, r) = (CONN_HEADER_SIZE as u64, ring as u64);
    let page = PAGE as u64;
    (
        h + 2 * r,
        [
            (Part::Header, 0, h, page),
            (Part::RingAToB, h, r, page),
            (Part::RingBToA, h + r, r, page),
        ],
    )
}

impl ConnView {
    /// The view of the connection segment mapped at `base` (`len`
    /// bytes), by the ring size its header states: magic and version,
    /// then the ring size, against `len`.
    ///
    /// # Safety
    /// `base` must point to `len` bytes mapped readable and writable
    /// that stay mapped as long as the view and every address taken from
    /// it.
    pub unsafe fn from_segment(base: NonNull<u8>, len: usize) -> Result<ConnView, LayoutError> {
        check_mapping(base, len, CONN_HEADER_SIZE)?;
        let h = base.as_ptr().cast::<ConnHeader>();
        // SAFETY: the header lies in the mapping (checked), page aligned;
        // each field is read once, volatile: a peer may write anything.
        let ring = unsafe {
            let magic = addr_of!((*h).magic).read_volatile();
            if magic != CONN_MAGIC {
                return Err(LayoutError::BadMagic(magic));
            }
            let version = addr_of!((*h).version).read_volatile();
            if version != VERSION {
                return Err(LayoutError::BadVersion(version));
            }
            addr_of!((*h).ring_size).read_volatile()
        };
        // SAFETY: the caller's contract.
        unsafe { Self::new(base, len, ring) }
    }

    /// The view of the connection segment mapped at `base` (`len` bytes)
    /// with rings of `ring` bytes, a size the caller chose itself (the
    /// header is not read): the ring size, against `len`.
    ///
    /// # Safety
    /// As [`ConnView::from_segment`].
    pub unsafe fn new(base: NonNull<u8>, len: usize, ring: u32) -> Result<ConnView, LayoutError> {
        check_mapping(base, len, CONN_HEADER_SIZE)?;
        if !ring.is_power_of_two() || ring < MIN_RING {
            return Err(LayoutError::BadRingSize(ring));
        }
        let (size, spans) = conn_spans(ring);
        check_spans(size, &spans, len)?;
        Ok(ConnView {
            ring_size: ring,
            base,
        })
    }

    /// Lay a fresh segment of connection `conn_id` out at `base` (`len`
    /// bytes, zeroed, shared with nobody yet) with rings of `ring` bytes
    /// between endpoints (or VIs) `a` and `b`: write the header's
    /// identity, and return the view. The rings need no initialising: a
    /// zeroed record is never ready.
    ///
    /// # Safety
    /// As [`ConnView::from_segment`]; nobody else reads or writes the
    /// segment during the call.
    pub unsafe fn init(
        base: NonNull<u8>,
        len: usize,
        ring: u32,
        conn_id: u32,
        a: u32,
        b: u32,
    ) -> Result<ConnView, LayoutError> {
        // SAFETY: the caller's contract; `new` checks the mapping.
        let mut view = unsafe { Self::new(base, len, ring)? };
        // SAFETY: the header lies in the mapping (checked by `new`), page
        // aligned, private to the caller: plain field writes.
        unsafe {
            let h = base.as_ptr().cast::<ConnHeader>();
            (*h).magic = CONN_MAGIC;
            (*h).version = VERSION;
            (*h).ring_size = ring;
            (*h).conn_id = conn_id;
        }
        view.set_ends(a, b);
        Ok(view)
    }

    /// Write the ids of the two sides into the header. Their owner (the
    /// engine) writes them before it hands the segment to either side.
    pub fn set_ends(&mut self, a: u32, b: u32) {
        let h = self.base.as_ptr().cast::<ConnHeader>();
        // SAFETY: the header lies at the start of the mapping (checked),
        // page aligned; two plain u32s, written through the view borrowed
        // mutably, so no reference to the header is alive.
        unsafe {
            addr_of_mut!((*h).a_endpoint).write(a);
            addr_of_mut!((*h).b_endpoint).write(b);
        }
    }

    /// The connection's header. Its shared words (the consumer lines, the
    /// closed flags, the errors, the counters) are atomics; the rest was
    /// checked when the view was made.
    #[inline]
    pub fn header(&self) -> &ConnHeader {
        // SAFETY: the header lies at the start of the mapping (checked),
        // page aligned; the mapping outlives the view.
        unsafe { self.base.cast::<ConnHeader>().as_ref() }
    }

    /// What `side` reaches: the ring it writes, the ring it reads, and
    /// its lines and its peer's. The ring addresses must not be used
    /// past the mapping.
    #[inline]
    pub fn side(&self, side: Side) -> ConnSide<'_> {
        let h = self.header();
        // SAFETY: both rings lie inside the mapping (checked: the segment
        // of two rings of `ring_size` bytes after the header fits it).
        let (a_to_b, b_to_a) = unsafe {
            let a_to_b = self.base.add(CONN_HEADER_SIZE);
            (a_to_b, a_to_b.add(self.ring_size as usize))
        };
        match side {
            Side::A => ConnSide {
                tx: a_to_b,
                rx: b_to_a,
                tx_consumer: &h.a_to_b,
                rx_consumer: &h.b_to_a,
                tx_placed: &h.a_to_b_placed.placed,
                rx_placed: &h.b_to_a_placed.placed,
                own_closed: &h.a_closed,
                peer_closed: &h.b_closed,
                own_error: &h.a_error,
                peer_error: &h.b_error,
                own_counters: &h.a_counters,
            },
            Side::B => ConnSide {
                tx: b_to_a,
                rx: a_to_b,
                tx_consumer: &h.b_to_a,
                rx_consumer: &h.a_to_b,
                tx_placed: &h.b_to_a_placed.placed,
                rx_placed: &h.a_to_b_placed.placed,
                own_closed: &h.b_closed,
                peer_closed: &h.a_closed,
                own_error: &h.b_error,
                peer_error: &h.a_error,
                own_counters: &h.b_counters,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::super::tests::Mem;
    use super::*;
    use crate::conn::conn_segment_size;
    use core::sync::atomic::Ordering;

    const RING: u32 = 1 << 13;

    fn set<T>(m: &Mem, off: usize, v: T) {
        // SAFETY: a field of the header page, aligned for T.
        unsafe { m.field::<T>(off).write(v) }
    }

    fn conn() -> Mem {
        let m = Mem::new(conn_segment_size(RING));
        // SAFETY: the memory is ours, the segment's size, page aligned.
        assert!(unsafe { ConnView::init(m.0, m.1, RING, 4, 11, 12) }.is_ok());
        m
    }

    fn attach(m: &Mem) -> Result<ConnView, LayoutError> {
        // SAFETY: the memory outlives the view in each test.
        unsafe { ConnView::from_segment(m.0, m.1) }
    }

    #[test]
    fn a_good_segment_gives_each_side_its_rings_and_lines() {
        let m = conn();
        let v = attach(&m).unwrap();
        assert_eq!(v.ring_size, RING);
        let h = v.header();
        assert_eq!((h.conn_id, h.a_endpoint, h.b_endpoint), (4, 11, 12));
        let (a, b) = (v.side(Side::A), v.side(Side::B));
        let at = |p: NonNull<u8>| p.as_ptr() as usize - m.0.as_ptr() as usize;
        assert_eq!(at(a.tx), CONN_HEADER_SIZE);
        assert_eq!(at(a.rx), CONN_HEADER_SIZE + RING as usize);
        assert_eq!((a.tx, a.rx), (b.rx, b.tx));
        // What one side writes, the other reads as its peer's.
        a.own_closed.store(1, Ordering::Relaxed);
        b.own_error.store(7, Ordering::Relaxed);
        a.rx_placed.store(3, Ordering::Relaxed);
        assert_eq!(b.peer_closed.load(Ordering::Relaxed), 1);
        assert_eq!(a.peer_error.load(Ordering::Relaxed), 7);
        assert_eq!(b.tx_placed.load(Ordering::Relaxed), 3);
        assert!(core::ptr::eq(a.tx_consumer, b.rx_consumer));
        assert!(core::ptr::eq(a.own_counters, &h.a_counters));
        assert!(core::ptr::eq(b.own_counters, &h.b_counters));
        assert_eq!(Side::of(true), Side::B);
    }

    #[test]
    fn each_check_refuses_its_own_fault() {
        let m = conn();
        set(&m, 0, 0x55u64);
        assert_eq!(attach(&m).err(), Some(LayoutError::BadMagic(0x55)));
        set(&m, 0, CONN_MAGIC);
        set(&m, 8, 2u32);
        assert_eq!(attach(&m).err(), Some(LayoutError::BadVersion(2)));
        set(&m, 8, VERSION);
        for bad in [0, RING + 1, PAGE as u32 / 2, 3 << 12] {
            set(&m, 12, bad);
            assert_eq!(attach(&m).err(), Some(LayoutError::BadRingSize(bad)));
        }
        // A ring twice as big: the segment no longer fits the mapping.
        set(&m, 12, RING * 2);
        assert_eq!(
            attach(&m).err(),
            Some(LayoutError::TooShort {
                len: m.1,
                need: conn_segment_size(RING * 2) as u64
            })
        );
        // The largest ring a header can state: refused, not wrapped.
        set(&m, 12, 1u32 << 31);
        assert!(matches!(
            attach(&m).err(),
            Some(LayoutError::TooShort { .. })
        ));
        set(&m, 12, RING);
        assert!(attach(&m).is_ok());
    }

    #[test]
    fn the_mapping_is_checked_first() {
        let m = conn();
        // SAFETY: a shorter length of the same memory.
        let short = unsafe { ConnView::from_segment(m.0, 100) };
        assert_eq!(
            short.err(),
            Some(LayoutError::TooShort {
                len: 100,
                need: CONN_HEADER_SIZE as u64
            })
        );
        // SAFETY: a cache line in, the rest still inside the memory.
        let off = unsafe { ConnView::from_segment(m.0.add(64), m.1 - 64) };
        assert_eq!(off.err(), Some(LayoutError::Misaligned));
        // SAFETY: the whole memory, by the engine's own ring size.
        unsafe {
            assert!(ConnView::new(m.0, m.1, RING).is_ok());
            assert!(matches!(
                ConnView::new(m.0, m.1 - PAGE, RING).err(),
                Some(LayoutError::TooShort { .. })
            ));
            assert_eq!(
                ConnView::new(m.0, m.1, 5000).err(),
                Some(LayoutError::BadRingSize(5000))
            );
        }
        let e = LayoutError::BadRingSize(5000);
        assert_eq!(
            std::format!("{e}"),
            "ring size 5000 is not a power of two of at least 4096"
        );
    }
}
