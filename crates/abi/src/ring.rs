//! The header every descriptor ring in shared memory starts with, and
//! access to a ring.
//!
//! [`Ring`] is a view (base pointer, capacity) over a [`RingHeader`] and its
//! entries. It offers the primitive operations; the protocols (who owns which
//! position, what is checked) live with the parties that use them. Nothing
//! read through a `Ring` is trusted: entries are copied out once with a
//! volatile read and positions are plain numbers that callers check.
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

use core::marker::PhantomData;
use core::mem::{offset_of, size_of};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::{ShmSafe, CACHE_LINE};

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

/// A view of a ring of `T` in shared memory.
pub struct Ring<T: ShmSafe> {
    hdr: NonNull<RingHeader>,
    entries: NonNull<T>,
    mask: u64,
    _t: PhantomData<T>,
}

// SAFETY: a Ring only hands out copies of entries and atomics; the memory it
// points to is shared memory designed for concurrent access.
unsafe impl<T: ShmSafe> Send for Ring<T> {}
// SAFETY: as above.
unsafe impl<T: ShmSafe> Sync for Ring<T> {}

impl<T: ShmSafe> Ring<T> {
    /// View the ring whose header is at `hdr`, with `cap` entries.
    ///
    /// # Safety
    /// `hdr` must point to a mapping that stays valid for the life of the
    /// `Ring`, 64-byte aligned, holding a `RingHeader` followed by `cap`
    /// entries of `T`; `cap` must be a power of two.
    pub unsafe fn from_raw(hdr: NonNull<u8>, cap: u32) -> Ring<T> {
        debug_assert!(cap.is_power_of_two());
        Ring {
            hdr: hdr.cast(),
            // SAFETY: the caller guarantees the entries follow the header.
            entries: unsafe { hdr.add(RING_HEADER_SIZE).cast() },
            mask: cap as u64 - 1,
            _t: PhantomData,
        }
    }

    /// Initialise the header of a fresh ring (engine, at creation).
    pub fn init(&self, entry_size: u32) {
        // SAFETY: `hdr` is valid for writes by the constructor's contract;
        // the segment is not shared with anyone yet.
        unsafe {
            let h = self.hdr.as_ptr();
            (*h).head.store(0, Ordering::Relaxed);
            (*h).tail.store(0, Ordering::Relaxed);
            core::ptr::addr_of_mut!((*h).capacity).write_volatile(self.capacity());
            core::ptr::addr_of_mut!((*h).entry_size).write_volatile(entry_size);
        }
    }

    #[inline]
    fn header(&self) -> &RingHeader {
        // SAFETY: valid by the constructor's contract; RingHeader's shared
        // fields are atomics.
        unsafe { self.hdr.as_ref() }
    }

    /// Capacity in entries.
    #[inline]
    pub fn capacity(&self) -> u32 {
        (self.mask + 1) as u32
    }

    /// Producer position, Acquire: entries below it are published.
    #[inline]
    pub fn head(&self) -> u64 {
        self.header().head.load(Ordering::Acquire)
    }
    /// Publish entries below `pos` (Release: pairs with [`Ring::head`]).
    #[inline]
    pub fn set_head(&self, pos: u64) {
        self.header().head.store(pos, Ordering::Release)
    }
    /// Consumer position, Acquire: entries below it are free to reuse.
    #[inline]
    pub fn tail(&self) -> u64 {
        self.header().tail.load(Ordering::Acquire)
    }
    /// Release entries below `pos` to the producer (Release: pairs with
    /// [`Ring::tail`], so our reads of them happen before the producer's
    /// rewrite).
    #[inline]
    pub fn set_tail(&self, pos: u64) {
        self.header().tail.store(pos, Ordering::Release)
    }
    /// Claim the entry at `current` for a consumer sharing the ring with
    /// another consumer: compare-and-swap the tail to `current + 1`.
    #[inline]
    pub fn cas_tail(&self, current: u64) -> bool {
        self.header()
            .tail
            .compare_exchange(current, current + 1, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    fn slot(&self, pos: u64) -> *mut T {
        // SAFETY: the index is masked into 0..cap, inside the mapping.
        unsafe { self.entries.as_ptr().add((pos & self.mask) as usize) }
    }

    /// Copy the entry at `pos` out of shared memory, once.
    ///
    /// An entry of whole 8-byte words (a receive descriptor, a VI
    /// descriptor) is copied a word at a time: a volatile read of the
    /// whole struct is lowered field by field, and a field that is a byte
    /// array byte by byte (64 loads and 64 stores for a receive
    /// descriptor, which the caller's wider loads then stall on).
    #[inline]
    pub fn read(&self, pos: u64) -> T {
        let slot = self.slot(pos);
        if !Self::WORDS {
            // SAFETY: slot is in bounds and aligned; T is valid for any
            // bits (ShmSafe). A concurrent hostile write can only give us
            // other bits.
            return unsafe { slot.read_volatile() };
        }
        let mut out = core::mem::MaybeUninit::<T>::uninit();
        let (src, dst) = (slot.cast::<u64>(), out.as_mut_ptr().cast::<u64>());
        for i in 0..size_of::<T>() / 8 {
            // SAFETY: T is a whole number of 8-byte words and 8-aligned
            // (WORDS), so word i < size/8 lies in the slot and in `out`,
            // aligned.
            unsafe { dst.add(i).write(src.add(i).read_volatile()) };
        }
        // SAFETY: every byte of `out` was written; T is valid for any bits
        // (ShmSafe).
        unsafe { out.assume_init() }
    }
    /// Write the entry at `pos`. (Not a word at a time as [`Ring::read`]:
    /// the words of `v` would include its padding, which may be
    /// uninitialised. Writers on a hot path fill the slot in place, as
    /// [`crate::RecvSlot`] does.)
    #[inline]
    pub fn write(&self, pos: u64, v: T) {
        // SAFETY: slot is in bounds and aligned.
        unsafe { self.slot(pos).write_volatile(v) }
    }
    /// Whether entries are read a word at a time (see [`Ring::read`]).
    const WORDS: bool = size_of::<T>().is_multiple_of(8) && core::mem::align_of::<T>() >= 8;
    /// Raw pointer to the entry at `pos`, for writing a field in place.
    #[inline]
    pub fn slot_ptr(&self, pos: u64) -> *mut T {
        self.slot(pos)
    }
}
