//! The peer segment: the shared memory that joins two adapters (engines)
//! on one host, SPINE's peer-to-peer message queues, and the active
//! message header its slots carry.
//!
//! # Peer segment
//!
//! A peer segment joins side 0 and side 1. Each side writes one
//! direction (side `d` produces ring `d` and data area `d`, the other
//! side consumes them), so every ring has one producer and one consumer.
//!
//! ```text
//!  0x0000 PeerHeader (one page)
//!         0x000 identity: magic, version, header_size, slots, data_size, link_id
//!         0x080 side 0's line: pid, epoch, closed, heartbeat   (written by side 0)
//!         0x100 side 1's line                                  (written by side 1)
//!         0x200 ring 0's producer line: head                   (side 0)
//!         0x280 ring 0's consumer line: tail, data_tail,
//!               sleeping, futex                                (side 1)
//!         0x300 ring 1's producer line                         (side 1)
//!         0x380 ring 1's consumer line                         (side 0)
//!  0x1000 ring 0: `slots` slots of 256 bytes (side 0 → side 1)
//!         ring 1: `slots` slots (side 1 → side 0)       (each a page multiple)
//!         data area 0: `data_size` bytes (bulk data, side 0 → side 1)
//!         data area 1: `data_size` bytes
//! ```
//! Every line is 128 bytes apart from the next, so the adjacent-line
//! prefetcher never pairs lines that different parties write.
//!
//! # A ring's protocol
//!
//! A slot is an [`AmHeader`] and up to [`AM_ARGS_MAX`] bytes of
//! arguments ([`PeerSlot`], [`AM_SLOT`] bytes). Positions count slots
//! and only grow. Push: check `head - tail < slots` (reading the
//! consumer's `tail` only when a cached copy says the ring is full),
//! write the bulk data, then the slot at `head % slots`, then store
//! `head + 1` with Release. Pop: load `head` with Acquire, read each
//! slot's header once into a local copy, check it, hand the message on,
//! and store the new `tail` (and `data_tail`) with Release once per
//! batch. Each party keeps its own positions: a position is written to
//! shared memory but never read back from it, and what it reads of the
//! other party's (`head`, `tail`, `data_tail`) must lie between what it
//! saw last and what it knows was sent, or the segment is broken.
//!
//! # Bulk data
//!
//! A bulk message's data travels in the data area of its direction, a
//! byte ring whose positions only grow, in the order of the slots. The
//! slot carries only `bulk_len`: both parties compute where the data
//! lies from their own data position with [`bulk_place`] (aligned to
//! [`BULK_ALIGN`], moved to the start of the area when it would cross
//! its end), so a hostile `bulk_len` can only move the consumer inside
//! the area, never outside it. A message carries at most half the
//! area, so it always fits once the area is empty. The data is always one
//! contiguous slice (a handler reads it in place, with no reassembly),
//! and the ring of slots keeps its size whatever the bulk load. The
//! consumer stores `data_tail` with its `tail`; the producer reads it
//! only when the area seems full.
//!
//! # Liveness
//!
//! Each side writes its process id and bumps its `epoch` when it
//! attaches, bumps its `heartbeat` on every pop, and sets `closed` when
//! it goes. Its peer watches the process (a pidfd), the `closed` flag,
//! and the heartbeat while messages wait for it.

use core::mem::{offset_of, size_of};
use core::ptr::{addr_of, NonNull};
use core::sync::atomic::{AtomicU32, AtomicU64};

use crate::{ShmSafe, MAX_MESSAGE, PAGE, VERSION};

pub use crate::spine::{
    AmHeader, AM_ARGS_MAX, AM_BULK, AM_SLOT, AM_SRC_HANDLER, AM_SRC_HOST, AM_SRC_PEER,
    AM_SRC_SYSTEM, AM_SRC_WIRE,
};

/// One slot of a peer ring: a header and the arguments.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub struct PeerSlot {
    /// The message's header.
    pub hdr: AmHeader,
    /// Its arguments (`hdr.args_len` bytes of them are the message's).
    pub args: [u8; AM_ARGS_MAX],
}

// SAFETY: integers and bytes only, no padding: any bit pattern is valid.
unsafe impl ShmSafe for PeerSlot {}

const _: () = {
    assert!(size_of::<PeerSlot>() == AM_SLOT);
    assert!(offset_of!(PeerSlot, args) == 16);
};

// -------------------------------------------------------------------------
// The segment
// -------------------------------------------------------------------------

/// Magic of a peer segment: `b"UNETPR01"`.
pub const PEER_MAGIC: u64 = u64::from_le_bytes(*b"UNETPR01");
/// Size of a [`PeerHeader`]; ring 0 starts here.
pub const PEER_HEADER_SIZE: usize = PAGE;
/// Fewest slots a ring may have.
pub const PEER_MIN_SLOTS: u32 = 2;
/// Most slots a ring may have.
pub const PEER_MAX_SLOTS: u32 = 1 << 16;
/// Largest data area (per direction).
pub const PEER_MAX_DATA: u32 = 1 << 26;
/// Alignment of a bulk message's data in its data area.
pub const BULK_ALIGN: u64 = 64;

/// What one side writes about itself (a line of its own).
#[repr(C, align(128))]
pub struct PeerSideLine {
    /// The side's process id (0: not attached yet).
    pub pid: AtomicU32,
    /// Bumped each time the side attaches (0: never).
    pub epoch: AtomicU32,
    /// Set to 1 when the side goes (it dropped its end, or its owner saw
    /// it die).
    pub closed: AtomicU32,
    _r: u32,
    /// Bumped by the side on every pop: it is consuming.
    pub heartbeat: AtomicU64,
    _pad: [u8; 104],
}

/// What a ring's producer writes.
#[repr(C, align(128))]
pub struct PeerProducerLine {
    /// Slots published so far.
    pub head: AtomicU64,
    _pad: [u8; 120],
}

/// What a ring's consumer writes.
#[repr(C, align(128))]
pub struct PeerConsumerLine {
    /// Slots consumed so far.
    pub tail: AtomicU64,
    /// Bytes of the data area consumed so far (with alignment and the
    /// skips at its end).
    pub data_tail: AtomicU64,
    /// 1 while the consumer sleeps (or is about to) on `futex`.
    pub sleeping: AtomicU32,
    /// Futex word the consumer sleeps on: the consumer bumps it as it
    /// begins a sleep (before setting `sleeping`), the producer as it
    /// rings; a producer rings once a sleep (while the word reads what
    /// its ring left, the consumer has not slept again).
    pub futex: AtomicU32,
    _pad: [u8; 104],
}

/// First page of a peer segment.
#[repr(C, align(4096))]
pub struct PeerHeader {
    /// [`PEER_MAGIC`].
    pub magic: u64,
    /// [`VERSION`].
    pub version: u32,
    /// [`PEER_HEADER_SIZE`].
    pub header_size: u32,
    /// Slots of each ring (a power of two in
    /// [`PEER_MIN_SLOTS`]..=[`PEER_MAX_SLOTS`]).
    pub slots: u32,
    /// Bytes of each data area (0, or a power of two from a page to
    /// [`PEER_MAX_DATA`]).
    pub data_size: u32,
    /// The link's id, as its maker names it (informational).
    pub link_id: u32,
    _r: u32,
    _pad0: [u8; 0x80 - 32],
    /// Each side's line (0x080, 0x100).
    pub sides: [PeerSideLine; 2],
    _pad1: [u8; 0x80],
    /// Ring 0's producer line (0x200), its consumer line (0x280).
    pub ring0: PeerRingLines,
    /// Ring 1's producer line (0x300), its consumer line (0x380).
    pub ring1: PeerRingLines,
    _pad2: [u8; PAGE - 0x400],
}

/// The two lines of one ring.
#[repr(C)]
pub struct PeerRingLines {
    /// Written by the producer.
    pub producer: PeerProducerLine,
    /// Written by the consumer.
    pub consumer: PeerConsumerLine,
}

const _: () = {
    assert!(size_of::<PeerHeader>() == PEER_HEADER_SIZE);
    assert!(offset_of!(PeerHeader, version) == 8);
    assert!(offset_of!(PeerHeader, header_size) == 12);
    assert!(offset_of!(PeerHeader, slots) == 16);
    assert!(offset_of!(PeerHeader, data_size) == 20);
    assert!(offset_of!(PeerHeader, link_id) == 24);
    assert!(offset_of!(PeerHeader, sides) == 0x80);
    assert!(size_of::<PeerSideLine>() == 128);
    assert!(offset_of!(PeerSideLine, epoch) == 4);
    assert!(offset_of!(PeerSideLine, closed) == 8);
    assert!(offset_of!(PeerSideLine, heartbeat) == 16);
    assert!(offset_of!(PeerHeader, ring0) == 0x200);
    assert!(offset_of!(PeerHeader, ring1) == 0x300);
    assert!(size_of::<PeerRingLines>() == 256);
    assert!(offset_of!(PeerRingLines, consumer) == 128);
    assert!(offset_of!(PeerConsumerLine, data_tail) == 8);
    assert!(offset_of!(PeerConsumerLine, sleeping) == 16);
    assert!(offset_of!(PeerConsumerLine, futex) == 20);
};

/// The geometry of the peer segments clients make to join two adapters:
/// 256 slots a direction and 256 KiB of bulk data (a message carries at
/// most 128 KiB).
pub const DEFAULT_PEER_GEOMETRY: PeerGeometry = PeerGeometry {
    slots: 256,
    data_size: 256 << 10,
};

/// The geometry of a peer segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerGeometry {
    /// Slots of each ring.
    pub slots: u32,
    /// Bytes of each data area (0: the link carries no bulk data).
    pub data_size: u32,
}

/// Why a peer segment was refused: one variant per check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerLayoutError {
    /// The mapping does not start on a page.
    Misaligned,
    /// The mapping is shorter than the header, or than the segment.
    TooShort {
        /// Bytes mapped.
        len: usize,
        /// Bytes needed.
        need: u64,
    },
    /// The header's magic is not [`PEER_MAGIC`].
    BadMagic(u64),
    /// The header's version is not [`VERSION`].
    BadVersion(u32),
    /// The header's `header_size` is not [`PEER_HEADER_SIZE`].
    BadHeaderSize(u32),
    /// The slot count is not a power of two in range.
    BadSlots(u32),
    /// The data area's size is neither 0 nor a power of two in range.
    BadDataSize(u32),
}

impl core::fmt::Display for PeerLayoutError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::Misaligned => f.write_str("the mapping does not start on a page"),
            Self::TooShort { len, need } => {
                write!(f, "too small: {len} bytes mapped, {need} needed")
            }
            Self::BadMagic(m) => write!(f, "bad magic {m:#018x}"),
            Self::BadVersion(v) => write!(f, "version {v}, not {VERSION}"),
            Self::BadHeaderSize(s) => write!(f, "bad header size {s}"),
            Self::BadSlots(s) => write!(
                f,
                "{s} slots is not a power of two in {PEER_MIN_SLOTS}..={PEER_MAX_SLOTS}"
            ),
            Self::BadDataSize(s) => write!(
                f,
                "data area of {s} bytes is neither 0 nor a power of two in {PAGE}..={PEER_MAX_DATA}"
            ),
        }
    }
}

impl PeerGeometry {
    /// Check the slot count and the data area's size.
    pub const fn check(&self) -> Result<(), PeerLayoutError> {
        if !self.slots.is_power_of_two()
            || self.slots < PEER_MIN_SLOTS
            || self.slots > PEER_MAX_SLOTS
        {
            return Err(PeerLayoutError::BadSlots(self.slots));
        }
        let d = self.data_size;
        if d != 0 && (!d.is_power_of_two() || d < PAGE as u32 || d > PEER_MAX_DATA) {
            return Err(PeerLayoutError::BadDataSize(d));
        }
        Ok(())
    }

    /// Bytes of one ring (a page multiple).
    pub const fn ring_bytes(&self) -> usize {
        (self.slots as usize * AM_SLOT).next_multiple_of(PAGE)
    }

    /// Offset of ring `d` (0 or 1).
    pub const fn ring_off(&self, d: usize) -> usize {
        PEER_HEADER_SIZE + d * self.ring_bytes()
    }

    /// Offset of data area `d` (0 or 1).
    pub const fn data_off(&self, d: usize) -> usize {
        PEER_HEADER_SIZE + 2 * self.ring_bytes() + d * self.data_size as usize
    }

    /// Bytes of the whole segment.
    pub const fn segment_size(&self) -> usize {
        self.data_off(2)
    }

    /// The largest bulk data one message may carry on this link: half
    /// the data area (so that it always fits in an empty one, see
    /// [`bulk_place`]), at most [`MAX_MESSAGE`].
    pub const fn bulk_max(&self) -> u32 {
        let half = self.data_size / 2;
        if (half as usize) < MAX_MESSAGE {
            half
        } else {
            MAX_MESSAGE as u32
        }
    }
}

/// Where `len` bytes of bulk data lie in a data area of `size` bytes
/// (a power of two) when its position is `pos`: `(start, end)`
/// positions, `end` being the position after it. Both are aligned to
/// [`BULK_ALIGN`] (a position from an earlier call always is); the start
/// moves to the start of the next lap when the data would cross the
/// area's end; no data (`len` 0) takes no room. Both parties compute it
/// from their own position.
///
/// With `len` at most half the area ([`PeerGeometry::bulk_max`]), a
/// message always fits in an empty area: a skip happens only from an
/// offset past `size - len >= len`, so `end - pos <= size`.
#[inline]
pub const fn bulk_place(pos: u64, len: u32, size: u32) -> (u64, u64) {
    if len == 0 {
        return (pos, pos);
    }
    let mut start = align(pos);
    let off = start & (size as u64 - 1);
    if off + len as u64 > size as u64 {
        start = start.wrapping_add(size as u64 - off);
    }
    (start, align(start.wrapping_add(len as u64)))
}

/// `pos` rounded up to [`BULK_ALIGN`].
#[inline]
const fn align(pos: u64) -> u64 {
    pos.wrapping_add(BULK_ALIGN - 1) & !(BULK_ALIGN - 1)
}

/// A peer segment's mapping, checked once: the header, the two rings and
/// the two data areas lie inside it with the geometry it was checked
/// with.
pub struct PeerView {
    /// The geometry (a copy: the header's may change under us).
    pub geometry: PeerGeometry,
    base: NonNull<u8>,
}

// SAFETY: a view hands out atomics and addresses in shared memory made
// for concurrent use.
unsafe impl Send for PeerView {}
// SAFETY: as above.
unsafe impl Sync for PeerView {}

impl PeerView {
    /// The view of the peer segment mapped at `base` (`len` bytes), by
    /// the geometry its header states: the mapping, magic, version,
    /// header size, geometry, then the segment's size against `len`.
    ///
    /// # Safety
    /// `base` must point to `len` bytes mapped readable and writable that
    /// stay mapped as long as the view and every address taken from it.
    pub unsafe fn from_segment(base: NonNull<u8>, len: usize) -> Result<PeerView, PeerLayoutError> {
        check_mapping(base, len)?;
        let h = base.as_ptr().cast::<PeerHeader>();
        // SAFETY: the header lies in the mapping (checked), page aligned;
        // each field is read once, volatile: anyone may write anything.
        let geometry = unsafe {
            let magic = addr_of!((*h).magic).read_volatile();
            if magic != PEER_MAGIC {
                return Err(PeerLayoutError::BadMagic(magic));
            }
            let version = addr_of!((*h).version).read_volatile();
            if version != VERSION {
                return Err(PeerLayoutError::BadVersion(version));
            }
            let hs = addr_of!((*h).header_size).read_volatile();
            if hs != PEER_HEADER_SIZE as u32 {
                return Err(PeerLayoutError::BadHeaderSize(hs));
            }
            PeerGeometry {
                slots: addr_of!((*h).slots).read_volatile(),
                data_size: addr_of!((*h).data_size).read_volatile(),
            }
        };
        // SAFETY: the caller's contract.
        unsafe { Self::new(base, len, geometry) }
    }

    /// The view of a segment at `base` (`len` bytes) with `geometry`,
    /// which the caller chose (the header is not read).
    ///
    /// # Safety
    /// As [`PeerView::from_segment`].
    pub unsafe fn new(
        base: NonNull<u8>,
        len: usize,
        geometry: PeerGeometry,
    ) -> Result<PeerView, PeerLayoutError> {
        check_mapping(base, len)?;
        geometry.check()?;
        let need = geometry.segment_size() as u64;
        if need > len as u64 {
            return Err(PeerLayoutError::TooShort { len, need });
        }
        Ok(PeerView { geometry, base })
    }

    /// Lay a fresh segment out at `base` (`len` bytes, zeroed, shared
    /// with nobody yet): write the header's identity and geometry.
    ///
    /// # Safety
    /// As [`PeerView::from_segment`]; nobody else reads or writes the
    /// segment during the call.
    pub unsafe fn init(
        base: NonNull<u8>,
        len: usize,
        geometry: PeerGeometry,
        link_id: u32,
    ) -> Result<PeerView, PeerLayoutError> {
        // SAFETY: the caller's contract; `new` checks the mapping.
        let view = unsafe { Self::new(base, len, geometry)? };
        // SAFETY: the header lies in the mapping (checked by `new`), page
        // aligned, private to the caller: plain field writes.
        unsafe {
            let h = base.as_ptr().cast::<PeerHeader>();
            (*h).magic = PEER_MAGIC;
            (*h).version = VERSION;
            (*h).header_size = PEER_HEADER_SIZE as u32;
            (*h).slots = geometry.slots;
            (*h).data_size = geometry.data_size;
            (*h).link_id = link_id;
        }
        Ok(view)
    }

    fn header(&self) -> &PeerHeader {
        // SAFETY: the header lies at the start of the mapping (checked),
        // page aligned; its shared words are atomics, and its other fields
        // are only read by `from_segment` (volatile).
        unsafe { self.base.cast::<PeerHeader>().as_ref() }
    }

    /// Side `s`'s line (`s` is taken modulo 2).
    pub fn side(&self, s: usize) -> &PeerSideLine {
        &self.header().sides[s & 1]
    }

    /// Ring `d`'s lines (`d` is taken modulo 2).
    pub fn lines(&self, d: usize) -> &PeerRingLines {
        let h = self.header();
        if d & 1 == 0 {
            &h.ring0
        } else {
            &h.ring1
        }
    }

    /// The first slot of ring `d` (`geometry.slots` slots follow).
    pub fn ring(&self, d: usize) -> NonNull<PeerSlot> {
        // SAFETY: the ring lies inside the mapping (segment_size <= len,
        // checked), at a page multiple.
        unsafe { self.base.add(self.geometry.ring_off(d & 1)).cast() }
    }

    /// The start of data area `d` (`geometry.data_size` bytes).
    pub fn data(&self, d: usize) -> NonNull<u8> {
        // SAFETY: the area lies inside the mapping (checked), possibly
        // empty (data_size 0: one past the rings, still in or at the end
        // of the mapping).
        unsafe { self.base.add(self.geometry.data_off(d & 1)) }
    }
}

fn check_mapping(base: NonNull<u8>, len: usize) -> Result<(), PeerLayoutError> {
    if !(base.as_ptr() as usize).is_multiple_of(PAGE) {
        return Err(PeerLayoutError::Misaligned);
    }
    if len < PEER_HEADER_SIZE {
        return Err(PeerLayoutError::TooShort {
            len,
            need: PEER_HEADER_SIZE as u64,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_place_stays_inside_the_area_and_never_overlaps() {
        let size = 4096u32;
        let mut pos = 0u64;
        for len in [0u32, 1, 63, 64, 65, 1000, 2048, 2000, 100, 2047, 7, 1999] {
            let (s, e) = bulk_place(pos, len, size);
            assert!(
                s >= pos && e - s >= len as u64 && e - s < len as u64 + 64,
                "len {len}"
            );
            assert!(
                e - pos <= size as u64,
                "len {len} does not fit an empty area"
            );
            if len > 0 {
                assert_eq!((s % BULK_ALIGN, e % BULK_ALIGN), (0, 0));
                assert!(
                    (s % size as u64) + len as u64 <= size as u64,
                    "crosses the end"
                );
            }
            pos = e;
        }
        // From every aligned offset, the largest message fits an empty area.
        for off in (0..size as u64).step_by(64) {
            let (_, e) = bulk_place(off, size / 2, size);
            assert!(e - off <= size as u64, "from {off}");
        }
    }

    #[test]
    fn geometry_bounds() {
        let ok = PeerGeometry {
            slots: 64,
            data_size: 1 << 16,
        };
        assert_eq!(ok.check(), Ok(()));
        assert_eq!(ok.segment_size(), PAGE + 2 * 64 * 256 + 2 * 65536);
        for s in [0, 1, 3, 1 << 17] {
            let g = PeerGeometry { slots: s, ..ok };
            assert_eq!(g.check(), Err(PeerLayoutError::BadSlots(s)));
        }
        for d in [1, 100, 2048, 1 << 27] {
            let g = PeerGeometry { data_size: d, ..ok };
            assert_eq!(g.check(), Err(PeerLayoutError::BadDataSize(d)));
        }
        assert_eq!(PeerGeometry { data_size: 0, ..ok }.check(), Ok(()));
    }
}
