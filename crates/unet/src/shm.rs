//! The client's mappings of shared segments: a segment kept together with
//! its typed header and the views found in it ([`Mapped`]: an endpoint's
//! rings and buffer area, a VI's queues, and in `conn` a direct
//! connection's lines, in `udm` a UDM node's rings, lines and message
//! slots); a memory region's bytes ([`Area`]); bytes lent between a ring
//! and a region ([`Bytes`]); and byte copies at checked offsets.
//!
//! `unsafe` is allowed here (and in the other modules `lib.rs` names)
//! because a mapping is reached through raw pointers, and the ring views
//! of `unet_abi` are made from them. Every constructor checks what makes
//! that sound once, when the segment is mapped (its length, its page
//! alignment, its layout), and the views stay beside the mapping they
//! point into, reached through a borrow of it, so that the modules using
//! them need no `unsafe`.

use std::marker::PhantomData;
use std::ops::Deref;
use std::os::fd::OwnedFd;
use std::ptr::NonNull;

mod conn;
mod udm;

pub(crate) use conn::{ConnLines, ConnRings};
pub(crate) use udm::{Buffer, JobRings, NodeRings, Slot, Words};

use unet_abi::peer::{PeerGeometry, PeerView};
use unet_abi::view::{EndpointView, LayoutError, ViView};
use unet_abi::{EndpointHeader, ViHeader, PAGE};
use unet_sys::Segment;

/// The header at the start of a kind of shared segment.
///
/// # Safety
/// `#[repr(C)]`, aligned to at most a page, and valid for every bit
/// pattern (integers, and atomics for what another party writes), so that
/// a reference to it over a mapping whatever a peer writes there is sound.
pub(crate) unsafe trait Header {}

// SAFETY: #[repr(C)] layouts of unet_abi of integers and atomics only.
unsafe impl Header for EndpointHeader {}
// SAFETY: as above.
unsafe impl Header for ViHeader {}

/// The views a [`Mapped`] keeps beside its segment.
///
/// # Safety
/// Every pointer in it points into that segment (rings, areas), so that
/// moving or sharing it with the segment between threads is sound: the
/// memory is shared with another process anyway, reached with atomics and
/// byte copies.
pub(crate) unsafe trait Views {}

// SAFETY: no pointers.
unsafe impl Views for () {}
// SAFETY: rings and the buffer area of the segment it was made from.
unsafe impl Views for EndpointView {}
// SAFETY: rings of the segment it was made from.
unsafe impl Views for ViView {}

/// A segment holding a header `H` at its start, with the views `V` found
/// in it (rings): the views are reached only through a
/// shared reference to the `Mapped`, so none outlives the mapping.
pub(crate) struct Mapped<H, V> {
    view: V,
    seg: Segment,
    _header: PhantomData<H>,
}

impl<H: Header, V> Mapped<H, V> {
    /// Keep `seg` with `view` if a whole `H` lies at its start.
    fn with(seg: Segment, view: V) -> Option<Self> {
        const { assert!(std::mem::align_of::<H>() <= PAGE) };
        (seg.len() >= std::mem::size_of::<H>()).then_some(Mapped {
            view,
            seg,
            _header: PhantomData,
        })
    }

    /// The segment's header.
    #[inline(always)]
    pub fn header(&self) -> &H {
        // SAFETY: `with` checked that the segment holds a whole H at its
        // start, which is page aligned (and H aligned to at most a page);
        // the mapping lives as long as self; every bit pattern is an H
        // (`Header`), and what others write in it is atomic.
        unsafe { self.seg.ptr().cast::<H>().as_ref() }
    }

    /// The mapped segment.
    #[inline(always)]
    pub fn segment(&self) -> &Segment {
        &self.seg
    }
}

impl Mapped<EndpointHeader, EndpointView> {
    /// An endpoint's segment and its rings, by the layout its header
    /// states (checked by [`EndpointView::from_segment`]).
    pub fn endpoint(seg: Segment) -> Result<Self, LayoutError> {
        // SAFETY: the mapping lives in `seg`, kept beside the rings.
        let view = unsafe { EndpointView::from_segment(seg.ptr(), seg.len()) }?;
        Self::with(seg, view).ok_or(LayoutError::Misaligned)
    }

    /// Copy out of the buffer area (bounds are clamped to the area).
    #[inline]
    pub fn read_area(&self, offset: u32, out: &mut [u8]) {
        let l = &self.view.layout;
        let area = l.geometry.buffer_area_size as usize;
        let off = (offset as usize).min(area);
        let n = out.len().min(area - off);
        // SAFETY: off + n <= area size, and the area lies inside the
        // mapping (checked by `EndpointView::from_segment`).
        unsafe {
            let src = self
                .seg
                .ptr()
                .as_ptr()
                .add(l.buffer_area_off as usize + off);
            unet_abi::copy::copy_bytes(src, out.as_mut_ptr(), n);
        }
    }

    /// Copy into the buffer area (bounds are clamped to the area).
    #[inline]
    pub fn write_area(&mut self, offset: u32, data: &[u8]) {
        let l = &self.view.layout;
        let area = l.geometry.buffer_area_size as usize;
        let off = (offset as usize).min(area);
        let n = data.len().min(area - off);
        // SAFETY: as in read_area.
        unsafe {
            let dst = self
                .seg
                .ptr()
                .as_ptr()
                .add(l.buffer_area_off as usize + off);
            unet_abi::copy::copy_bytes(data.as_ptr(), dst, n);
        }
    }

    /// The start of the buffer area.
    #[inline(always)]
    pub fn area(&self) -> std::ptr::NonNull<u8> {
        self.view.buffer_area
    }
}

impl Mapped<ViHeader, ViView> {
    /// VI `vi`'s segment and its queues, by the layout its header states
    /// (checked by [`ViView::from_segment`]).
    pub fn vi(seg: Segment, vi: u32) -> Result<Self, LayoutError> {
        // SAFETY: the mapping lives in `seg`, kept beside the rings.
        let view = unsafe { ViView::from_segment(seg.ptr(), seg.len(), vi) }?;
        Self::with(seg, view).ok_or(LayoutError::Misaligned)
    }
}

// SAFETY: the views point into `seg` only (`Views`), which the Mapped owns
// and unmaps only when dropped; the header is integers and atomics; the
// copies that write need `&mut self`.
unsafe impl<H: Header, V: Views> Send for Mapped<H, V> {}
// SAFETY: as above.
unsafe impl<H: Header, V: Views> Sync for Mapped<H, V> {}

impl<H, V> Deref for Mapped<H, V> {
    type Target = V;
    #[inline(always)]
    fn deref(&self) -> &V {
        &self.view
    }
}

/// The first `len` bytes of a segment (a registered memory region):
/// addresses and copies in them, checked against `len`.
pub(crate) struct Area {
    seg: Segment,
    len: usize,
}

impl Area {
    /// Map the memory file `fd` (writable) as an area of `len` bytes.
    pub fn open(fd: OwnedFd, len: usize) -> std::io::Result<Area> {
        let seg = Segment::open(fd, len, true)?;
        if seg.len() < len {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "a region's mapping is shorter than the region",
            ));
        }
        Ok(Area { seg, len })
    }

    /// Its length in bytes.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Where it starts.
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut u8 {
        self.seg.ptr().as_ptr()
    }

    /// Where the `n` bytes at `offset` start, if they lie inside.
    #[inline(always)]
    pub fn at(&self, offset: usize, n: usize) -> Option<NonNull<u8>> {
        let inside = offset.checked_add(n).is_some_and(|e| e <= self.len);
        if !inside {
            return None;
        }
        // SAFETY: offset + n <= len <= the mapping's length (checked in
        // open), so the result lies inside the mapping or one past it.
        Some(unsafe { self.seg.ptr().add(offset) })
    }

    /// The `n` bytes at `offset`, readable while the area is borrowed, if
    /// they lie inside.
    #[inline(always)]
    pub fn bytes(&self, offset: usize, n: usize) -> Option<Bytes<'_>> {
        let p = self.at(offset, n)?;
        // SAFETY: n bytes inside the mapping (checked by at), which lives
        // as long as self.
        Some(unsafe { Bytes::new(p.as_ptr(), n) })
    }

    /// Copy `data` in at `offset`; false (nothing copied) if it does not
    /// all fit.
    #[inline]
    pub fn write(&self, offset: usize, data: &[u8]) -> bool {
        let Some(p) = self.at(offset, data.len()) else {
            return false;
        };
        // SAFETY: inside the mapping (checked by at), which lives as long
        // as self; byte copies of shared memory.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p.as_ptr(), data.len()) };
        true
    }

    /// Copy `buf.len()` bytes at `offset` into `buf`; false (nothing
    /// copied) if they are not all inside.
    #[inline]
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> bool {
        let Some(p) = self.at(offset, buf.len()) else {
            return false;
        };
        // SAFETY: as in write.
        unsafe { std::ptr::copy_nonoverlapping(p.as_ptr(), buf.as_mut_ptr(), buf.len()) };
        true
    }
}

/// Copy `data` into `seg` at byte `off` (set-up calls); false (nothing
/// copied) if it does not all fit.
#[inline]
pub(crate) fn write(seg: &Segment, off: usize, data: &[u8]) -> bool {
    let Some(dst) = seg.at(off, data.len()) else {
        return false;
    };
    // SAFETY: `at` checked that data.len() bytes at `off` lie inside the
    // mapping, which `seg` keeps; byte copies of shared memory.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst.as_ptr(), data.len()) };
    true
}

/// Copy `buf.len()` bytes of `seg` at byte `off` into `buf`; false
/// (nothing copied) if they do not all lie inside it.
#[inline]
pub(crate) fn read(seg: &Segment, off: usize, buf: &mut [u8]) -> bool {
    let Some(src) = seg.at(off, buf.len()) else {
        return false;
    };
    // SAFETY: `at` checked that buf.len() bytes at `off` lie inside the
    // mapping, which `seg` keeps; byte copies of shared memory.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), buf.as_mut_ptr(), buf.len()) };
    true
}

/// `len` readable bytes at a fixed address, valid for `'a`: a record in a
/// ring, a piece of a registered region, or a slice. Handed between the
/// direct path and a descriptor's regions instead of a raw pointer, so
/// that the copies on either side need no promise from their caller.
#[derive(Clone, Copy)]
pub(crate) struct Bytes<'a> {
    ptr: *const u8,
    len: usize,
    _life: PhantomData<&'a [u8]>,
}

impl<'a> Bytes<'a> {
    /// The `len` bytes at `ptr`.
    ///
    /// # Safety
    /// They must be readable for `'a` (in a mapping kept for as long, or a
    /// borrow), and may change under the reader only by another party's
    /// writes to shared memory.
    #[inline(always)]
    pub unsafe fn new(ptr: *const u8, len: usize) -> Self {
        Bytes {
            ptr,
            len,
            _life: PhantomData,
        }
    }

    /// The bytes of `s`.
    #[inline(always)]
    pub fn of(s: &'a [u8]) -> Self {
        // SAFETY: a live borrow of s.len() bytes for 'a.
        unsafe { Bytes::new(s.as_ptr(), s.len()) }
    }

    /// No bytes.
    #[inline(always)]
    pub fn empty() -> Self {
        Bytes::of(&[])
    }

    /// Where they start (readable for `len` bytes during `'a`).
    #[inline(always)]
    pub fn as_ptr(self) -> *const u8 {
        self.ptr
    }

    /// How many.
    #[inline(always)]
    pub fn len(self) -> usize {
        self.len
    }
}

/// Make a fresh peer segment of `geometry` for link `link_id` (SPINE's
/// peer queues) and return its memory file, sealed, for the
/// two adapters it joins.
pub(crate) fn create_peer_segment(
    geometry: PeerGeometry,
    link_id: u32,
) -> std::io::Result<OwnedFd> {
    geometry
        .check()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    let seg = Segment::create(&format!("unet-peer-{link_id}"), geometry.segment_size())?;
    // SAFETY: a fresh zeroed segment of the geometry's size, page aligned
    // and shared with nobody yet; the view is dropped at once, before the
    // segment.
    unsafe { PeerView::init(seg.ptr(), seg.len(), geometry, link_id) }
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    seg.fd().try_clone()
}
