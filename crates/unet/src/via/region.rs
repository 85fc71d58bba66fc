//! Memory regions: shared memory registered with the engine ([`MemRegion`]),
//! the segments descriptors name in them ([`ViSeg`]), and the regions a VI's
//! posted descriptors hold ([`RegionsInUse`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use unet_control::Request;

use crate::session::Inner;
use crate::shm::{Area, Bytes};
use crate::{Error, Session};

use super::lock;

pub(crate) struct RegionInner {
    /// The mapping, as long as the region.
    pub(super) area: Area,
    pub(super) handle: u32,
    pub(super) session: Session,
    /// One flag per VI that keeps the region in its [`RegionsInUse`]: set
    /// while a descriptor posted on that VI uses the region.
    pub(super) users: Mutex<Vec<Weak<AtomicBool>>>,
    /// The user's handle is gone (deregistered or dropped): a VI that
    /// keeps the region without using it lets it go.
    pub(super) gone: AtomicBool,
    /// The engine was told to forget the region.
    pub(super) told: AtomicBool,
    /// Where the VI that held it last keeps it: that VI's
    /// [`RegionsInUse::tag`] above the low 16 bits, its slot in them. A
    /// hint, checked against the slot's region: a region is mostly used by
    /// one VI, which then finds it without a look-up when it cycles
    /// through several regions (Javia-II's buffers).
    pub(super) slot_hint: AtomicU64,
}

impl RegionInner {
    /// Whether a posted descriptor of some VI uses the region.
    fn in_use(&self) -> bool {
        let mut users = lock(&self.users);
        users.retain(|w| w.strong_count() > 0);
        users
            .iter()
            .any(|w| w.upgrade().is_some_and(|f| f.load(Ordering::Acquire)))
    }

    /// A VI starts keeping the region: its flag, set (it uses it now).
    #[cold]
    fn new_user(&self) -> Arc<AtomicBool> {
        let f = Arc::new(AtomicBool::new(true));
        let mut users = lock(&self.users);
        users.retain(|w| w.strong_count() > 0);
        users.push(Arc::downgrade(&f));
        f
    }

    /// The user's handle goes: the engine forgets the region now unless a
    /// posted descriptor uses it (then when the last such completes).
    fn user_gone(&self) {
        self.gone.store(true, Ordering::Release);
        if !self.in_use() {
            self.tell_engine();
        }
    }

    fn tell_engine(&self) {
        if !self.told.swap(true, Ordering::AcqRel) {
            let _ = self.session.inner.request(&Request::DeregisterMemory {
                handle: self.handle,
            });
        }
    }
}

impl Drop for RegionInner {
    fn drop(&mut self) {
        // The engine forgets the region (if not told already); our
        // mapping goes with `seg`.
        self.tell_engine();
    }
}

/// Memory registered with the engine: what descriptors name their data
/// in. It is shared memory of its own (a memory file the engine may map),
/// allocated and zeroed by [`Session::register_memory`].
///
/// The library writes into a region when a receive completes; read and
/// write it with [`MemRegion::read`] and [`MemRegion::write`], or through
/// [`MemRegion::as_ptr`] when you know which parts no descriptor uses.
pub struct MemRegion {
    pub(super) inner: Arc<RegionInner>,
}

impl Drop for MemRegion {
    fn drop(&mut self) {
        self.inner.user_gone();
    }
}

impl std::fmt::Debug for MemRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemRegion")
            .field("handle", &self.inner.handle)
            .field("len", &self.inner.area.len())
            .finish()
    }
}

impl MemRegion {
    /// The handle the engine gave the region.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.inner.area.len()
    }

    /// Never empty (a region has at least one byte).
    pub fn is_empty(&self) -> bool {
        self.inner.area.len() == 0
    }

    /// The start of the region. Writing where a posted send descriptor
    /// reads, or reading where a posted receive descriptor writes, races
    /// with the library.
    pub fn as_ptr(&self) -> *mut u8 {
        self.inner.area.as_ptr()
    }

    /// Copy `data` into the region at `offset`. Panics if it does not fit.
    pub fn write(&self, offset: usize, data: &[u8]) {
        let inside = self.inner.area.write(offset, data);
        assert!(
            inside,
            "write of {} bytes at {offset} past a region of {} bytes",
            data.len(),
            self.len()
        );
    }

    /// Copy `buf.len()` bytes from the region at `offset` into `buf`.
    /// Panics if they are not all inside it.
    pub fn read(&self, offset: usize, buf: &mut [u8]) {
        let n = buf.len();
        let inside = self.inner.area.read(offset, buf);
        assert!(
            inside,
            "read of {n} bytes at {offset} past a region of {} bytes",
            self.len()
        );
    }

    /// Deregister the region. Refused (the region comes back) while a
    /// posted descriptor still uses it.
    pub fn deregister(self) -> Result<(), (MemRegion, Error)> {
        // Other references are VIs that keep the region: in use, or kept
        // between uses (see RegionsInUse), which does not count.
        if Arc::strong_count(&self.inner) > 1 && self.inner.in_use() {
            let e = Error::InUse(format!(
                "memory region {} is still used by a posted descriptor",
                self.inner.handle
            ));
            return Err((self, e));
        }
        Ok(())
    }
}

/// One segment of a descriptor: `len` bytes at `offset` in `region`.
#[derive(Clone, Copy, Debug)]
pub struct ViSeg<'a> {
    /// The region.
    pub region: &'a MemRegion,
    /// Byte offset in the region.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
}

impl<'a> ViSeg<'a> {
    /// `len` bytes at `offset` in `region`.
    pub fn new(region: &'a MemRegion, offset: usize, len: usize) -> Self {
        ViSeg {
            region,
            offset,
            len,
        }
    }

    /// Where the segment's bytes start, if it lies inside its region and
    /// the region is registered through `session` (the VI's).
    #[inline(always)]
    pub(super) fn resolve(&self, session: &Arc<Inner>) -> Option<*mut u8> {
        let r = &self.region.inner;
        let p = r.area.at(self.offset, self.len)?;
        if !Arc::ptr_eq(&r.session.inner, session) {
            return None;
        }
        Some(p.as_ptr())
    }

    /// The segment's bytes, to send, on [`ViSeg::resolve`]'s terms.
    #[inline(always)]
    pub(super) fn bytes(&self, session: &Arc<Inner>) -> Option<Bytes<'a>> {
        let r: &'a RegionInner = &self.region.inner;
        let b = r.area.bytes(self.offset, self.len)?;
        if !Arc::ptr_eq(&r.session.inner, session) {
            return None;
        }
        Some(b)
    }
}

/// The regions a VI's posted descriptors use, each held (its mapping kept
/// alive, and [`MemRegion::deregister`] refused) while at least one
/// descriptor uses it: one reference per region, taken when its first
/// descriptor is posted, instead of an atomic reference count per
/// descriptor.
///
/// A region stays *kept* when its last descriptor completes (its
/// reference and slot stay, marked unused), up to [`RegionsInUse::KEEP`]
/// of them: a VI that posts a descriptor at a time (a ping-pong, Javia's
/// receives) or cycles through a few buffers of their own regions
/// (Javia-II's) would otherwise take and drop the reference, two atomic
/// operations, a lock and a scan, at every message. A kept region does
/// not count as in use: its flag (shared with the region, see
/// [`RegionInner::in_use`]) says so, with a plain store at each change.
/// Past the bound the kept regions not used last go, and a region whose
/// user's handle is gone (deregistered or dropped) is let go as soon as
/// no descriptor uses it, or at the VI's next new region if it was kept
/// then (the engine forgets it at once all the same); all go when the VI
/// closes.
#[derive(Default)]
pub(super) struct RegionsInUse {
    /// The regions and how many posted pieces use each; `None`: a free
    /// slot.
    slots: Vec<Option<Held>>,
    /// The slot of each region held, by address, once a VI holds more than
    /// [`RegionsInUse::SCAN`] regions at a time (empty until then: a few
    /// slots are looked through faster than a hash is computed). Hashed
    /// with one multiplication (an address, from this process, needs no
    /// defence against collisions chosen by an attacker): a program that
    /// posts from one buffer of its own per message, as Javia-II's
    /// users do, looks a region up here whenever the region's hint
    /// misses (another VI used it last), and SipHash cost several
    /// nanoseconds a post.
    index: HashMap<usize, u16, rustc_hash::FxBuildHasher>,
    /// The slot used last (a VI mostly uses one or two regions).
    last: u16,
    /// Regions kept unused (`n == 0`).
    kept: usize,
    /// This VI's mark in a region's [`RegionInner::slot_hint`] (0 until it
    /// holds a region the slow way, then unique in the process).
    tag: u64,
}

/// A region a VI holds.
pub(super) struct Held {
    region: Arc<RegionInner>,
    /// Posted pieces that use it (0: kept, unused).
    n: u32,
    /// Whether `n > 0`, for [`MemRegion::deregister`] to read.
    used: Arc<AtomicBool>,
}

impl RegionsInUse {
    /// Slots looked through one by one before an index is kept.
    const SCAN: usize = 16;
    /// Regions kept unused at most.
    const KEEP: usize = 64;

    /// Count one more piece using `r`; its slot.
    #[inline]
    pub(super) fn hold(&mut self, r: &Arc<RegionInner>) -> u16 {
        if self.hold_in(self.last, r) {
            return self.last;
        }
        // Relaxed: a hint, checked against the slot's region below.
        let hint = r.slot_hint.load(Ordering::Relaxed);
        if self.tag != 0 && hint >> 16 == self.tag {
            let slot = hint as u16;
            if self.hold_in(slot, r) {
                self.last = slot;
                return slot;
            }
        }
        self.hold_slow(r)
    }

    /// Count one more piece using `r` if `slot` holds it.
    #[inline(always)]
    fn hold_in(&mut self, slot: u16, r: &Arc<RegionInner>) -> bool {
        let Some(Some(h)) = self.slots.get_mut(slot as usize) else {
            return false;
        };
        if !Arc::ptr_eq(&h.region, r) {
            return false;
        }
        if h.n == 0 {
            // Relaxed: the posting thread's own later deregister sees it
            // in program order; another thread's is a race the caller made.
            h.used.store(true, Ordering::Relaxed);
            self.kept -= 1;
        }
        h.n += 1;
        true
    }

    #[cold]
    fn hold_slow(&mut self, r: &Arc<RegionInner>) -> u16 {
        let found = if self.index.is_empty() {
            self.slots
                .iter()
                .position(|e| e.as_ref().is_some_and(|h| Arc::ptr_eq(&h.region, r)))
                .map(|i| i as u16)
        } else {
            self.index.get(&Arc::as_ptr(r).addr()).copied()
        };
        let slot = match found {
            Some(i) => i,
            None => {
                // A new region: the kept ones whose user's handle went go
                // first (their slots are free again).
                self.trim(Self::KEEP, true);
                let e = Some(Held {
                    region: r.clone(),
                    n: 0,
                    used: r.new_user(),
                });
                self.kept += 1;
                let i = match self.slots.iter().position(Option::is_none) {
                    Some(i) => {
                        self.slots[i] = e;
                        i
                    }
                    None => {
                        self.slots.push(e);
                        self.slots.len() - 1
                    }
                };
                // At most 2 queues x 4096 descriptors x 8 segments
                // + KEEP < 2^16.
                let i = i as u16;
                if !self.index.is_empty() {
                    self.index.insert(Arc::as_ptr(r).addr(), i);
                } else if self.slots.len() > Self::SCAN {
                    // Many regions at once: index them all from now on.
                    for (j, e) in self.slots.iter().enumerate() {
                        if let Some(h) = e {
                            self.index.insert(Arc::as_ptr(&h.region).addr(), j as u16);
                        }
                    }
                }
                i
            }
        };
        self.hold_in(slot, r);
        if self.tag == 0 {
            static TAGS: AtomicU64 = AtomicU64::new(1);
            self.tag = TAGS.fetch_add(1, Ordering::Relaxed);
        }
        r.slot_hint
            .store(self.tag << 16 | u64::from(slot), Ordering::Relaxed);
        self.last = slot;
        slot
    }

    /// One piece using the region in `slot` is done with.
    #[inline(always)]
    pub(super) fn release_slot(&mut self, slot: u16) {
        let Some(Some(h)) = self.slots.get_mut(slot as usize) else {
            return;
        };
        if h.n == 0 {
            return;
        }
        h.n -= 1;
        if h.n == 0 {
            // Kept, unused. Release: what the descriptor did with the
            // region happens before a deregister that sees the flag clear.
            h.used.store(false, Ordering::Release);
            self.kept += 1;
            if h.region.gone.load(Ordering::Relaxed) {
                self.let_go_if_unused(slot);
            } else if self.kept > Self::KEEP {
                self.trim(Self::KEEP, false);
            }
        }
    }

    /// Let kept regions go until at most `keep` remain, those whose
    /// user's handle is gone first (all of them if `gone_too`), never the
    /// one used last unless its handle is gone.
    #[cold]
    fn trim(&mut self, keep: usize, gone_too: bool) {
        if gone_too || self.kept > keep {
            for i in 0..self.slots.len() {
                let gone = self.slots[i]
                    .as_ref()
                    .is_some_and(|h| h.n == 0 && h.region.gone.load(Ordering::Relaxed));
                if gone {
                    self.let_go_if_unused(i as u16);
                }
            }
        }
        let mut i = 0;
        while self.kept > keep && i < self.slots.len() {
            if i != self.last as usize {
                self.let_go_if_unused(i as u16);
            }
            i += 1;
        }
    }

    /// Drop the region in `slot` if no posted piece uses it.
    #[cold]
    fn let_go_if_unused(&mut self, slot: u16) {
        let Some(e) = self.slots.get_mut(slot as usize) else {
            return;
        };
        if e.as_ref().is_some_and(|h| h.n == 0) {
            if let Some(h) = e.take() {
                self.kept -= 1;
                if !self.index.is_empty() {
                    self.index.remove(&Arc::as_ptr(&h.region).addr());
                }
            }
        }
    }
}
