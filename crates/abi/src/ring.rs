//! Access to a descriptor ring in shared memory.
//!
//! [`Ring`] is a view (base pointer, capacity) over a [`RingHeader`] and its
//! entries. It offers the primitive operations; the protocols (who owns which
//! position, what is checked) live with the parties that use them. Nothing
//! read through a `Ring` is trusted: entries are copied out once with a
//! volatile read and positions are plain numbers that callers check.

use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::Ordering;

use crate::{RingHeader, ShmSafe, RING_HEADER_SIZE};

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
    #[inline]
    pub fn read(&self, pos: u64) -> T {
        // SAFETY: slot is in bounds and aligned; T is valid for any bits
        // (ShmSafe). A concurrent hostile write can only give us other bits.
        unsafe { self.slot(pos).read_volatile() }
    }
    /// Write the entry at `pos`.
    #[inline]
    pub fn write(&self, pos: u64, v: T) {
        // SAFETY: slot is in bounds and aligned.
        unsafe { self.slot(pos).write_volatile(v) }
    }
    /// Raw pointer to the entry at `pos`, for writing a field in place.
    #[inline]
    pub fn slot_ptr(&self, pos: u64) -> *mut T {
        self.slot(pos)
    }
}
