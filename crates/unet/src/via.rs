//! VIA: virtual interfaces, memory regions and completion queues (the
//! Virtual Interface Architecture as the Javia papers use it, section 2.1).
//!
//! A [`Vi`] is one end of a connection, with a send queue and a receive
//! queue of descriptors. Connections follow VIA (and `java.net.Socket`): a
//! process listens on a *discriminator* ([`Session::vi_listen`]), another
//! asks to connect to it ([`Session::vi_connect`]), the first accepts or
//! rejects ([`ViServer::accept`], [`ConnRequest`]); the engine grants the
//! connection, and only the two VIs it made can use it.
//!
//! Data lives in [`MemRegion`]s, shared memory registered with the engine.
//! A descriptor names its data as segments *(region, offset, length)*
//! ([`ViSeg`]), gathered into one message on send and scattered on
//! receive; each is checked against its region before anything is
//! copied. A descriptor completes with a status ([`ViCompletion`]);
//! several VIs' queues may report to one [`CompletionQueue`].
//!
//! Two local VIs share a direct connection: one ring each way, mapped by
//! the two processes only, no engine in between. The sender copies its
//! segments straight into the ring, the receiver straight from the ring
//! into the buffers of its next posted receive descriptor: one copy on
//! each side and no staging buffer. The ring never loses a message, so
//! every reliability level holds; a send of reliable reception completes
//! when the receiver has placed the message.
//!
//! A message that finds no receive posted waits in the ring (up to the
//! ring's size; then the sender's descriptors wait in its send queue):
//! nothing is lost and the connection stays up. With
//! [`ViAttributes::strict_rnr`] the receiving VI breaks instead, as VIA
//! does. Every error is VIA's *error state*: the VI stays broken, every
//! outstanding descriptor completes with the reason, and the peer is told.

use std::collections::{HashMap, VecDeque};

use crate::fifo::Fifo;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use unet_abi::ring::Ring;
use unet_abi::view::ViView;
pub use unet_abi::{Reliability, ViError, VI_MAX_SEGMENTS, VI_MAX_TRANSFER};
use unet_abi::{ViCompl, ViDesc, ViHeader, ViSegDesc, CLIENT_COUNTERS, VI_REF_SEGMENT};
use unet_control::{ErrorCode, Reply, Request, ViParams};
use unet_sys::{self as sys, Segment};

use crate::direct::{ConnLoan, DirectConn, DirectRecv, DirectSendError};
use crate::session::Inner;
use crate::{Error, Session};

/// How a VI is made. Both ends must ask for the same reliability level.
#[derive(Clone, Debug)]
pub struct ViAttributes {
    /// The reliability level (default: reliable delivery).
    pub reliability: Reliability,
    /// VIA's strict behaviour: a message that arrives with no receive
    /// posted breaks the VI ([`ViError::ReceiverNotReady`]) instead of
    /// waiting for one.
    pub strict_rnr: bool,
    /// Most send descriptors outstanding (posted and not yet taken back
    /// with [`Vi::send_done`]).
    pub send_queue: u32,
    /// Most receive descriptors outstanding.
    pub recv_queue: u32,
    /// How long a blocking wait spins before it sleeps, at least: a VI
    /// whose waits have lately lasted longer spins up to twice their
    /// recent mean, at most [`ViAttributes::SPIN_ADAPT_MAX`] (0: never
    /// spin).
    pub spin: Duration,
    /// The completion queue the send queue reports to (VIA's
    /// `VipCreateVi`), if any.
    pub send_cq: Option<CompletionQueue>,
    /// The completion queue the receive queue reports to, if any.
    pub recv_cq: Option<CompletionQueue>,
    /// How long the peer of a VI carried between engines may stay silent
    /// while the VI waits for it (reliable levels) before the VI breaks
    /// with [`ViError::Timeout`]; `Duration::ZERO` (the default): the
    /// engine's setting (5 s unless its daemon says otherwise). Rounded
    /// up to milliseconds.
    pub break_timeout: Duration,
}

impl Default for ViAttributes {
    fn default() -> Self {
        ViAttributes {
            reliability: Reliability::ReliableDelivery,
            strict_rnr: false,
            send_queue: 1024,
            recv_queue: 1024,
            spin: Duration::from_micros(50),
            send_cq: None,
            recv_cq: None,
            break_timeout: Duration::ZERO,
        }
    }
}

impl ViAttributes {
    /// The longest a wait spins when it adapts to the waits before it.
    pub const SPIN_ADAPT_MAX: Duration = Duration::from_micros(250);

    pub(crate) fn params(&self) -> ViParams {
        ViParams {
            reliability: self.reliability,
            strict_rnr: self.strict_rnr,
            break_timeout_ms: self
                .break_timeout
                .as_nanos()
                .div_ceil(1_000_000)
                .min(u128::from(u32::MAX)) as u32,
        }
    }
}

// -------------------------------------------------------------------------
// Memory regions
// -------------------------------------------------------------------------

pub(crate) struct RegionInner {
    seg: Segment,
    handle: u32,
    len: usize,
    session: Session,
    /// One flag per VI that keeps the region in its [`RegionsInUse`]: set
    /// while a descriptor posted on that VI uses the region.
    users: Mutex<Vec<Weak<AtomicBool>>>,
    /// The user's handle is gone (deregistered or dropped): a VI that
    /// keeps the region without using it lets it go.
    gone: AtomicBool,
    /// The engine was told to forget the region.
    told: AtomicBool,
    /// Where the VI that held it last keeps it: that VI's
    /// [`RegionsInUse::tag`] above the low 16 bits, its slot in them. A
    /// hint, checked against the slot's region: a region is mostly used by
    /// one VI, which then finds it without a look-up when it cycles
    /// through several regions (Javia-II's buffers).
    slot_hint: AtomicU64,
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
    inner: Arc<RegionInner>,
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
            .field("len", &self.inner.len)
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
        self.inner.len
    }

    /// Never empty (a region has at least one byte).
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The start of the region. Writing where a posted send descriptor
    /// reads, or reading where a posted receive descriptor writes, races
    /// with the library.
    pub fn as_ptr(&self) -> *mut u8 {
        self.inner.seg.ptr().as_ptr()
    }

    /// Copy `data` into the region at `offset`. Panics if it does not fit.
    pub fn write(&self, offset: usize, data: &[u8]) {
        assert!(
            offset
                .checked_add(data.len())
                .is_some_and(|e| e <= self.len()),
            "write of {} bytes at {offset} past a region of {} bytes",
            data.len(),
            self.len()
        );
        // SAFETY: inside the mapping (checked); the mapping lives as long
        // as `inner`; byte copies of shared memory.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.as_ptr().add(offset), data.len())
        };
    }

    /// Copy `buf.len()` bytes from the region at `offset` into `buf`.
    /// Panics if they are not all inside it.
    pub fn read(&self, offset: usize, buf: &mut [u8]) {
        assert!(
            offset
                .checked_add(buf.len())
                .is_some_and(|e| e <= self.len()),
            "read of {} bytes at {offset} past a region of {} bytes",
            buf.len(),
            self.len()
        );
        // SAFETY: as in write.
        unsafe {
            std::ptr::copy_nonoverlapping(self.as_ptr().add(offset), buf.as_mut_ptr(), buf.len())
        };
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
    fn resolve(&self, session: &Arc<Inner>) -> Option<*mut u8> {
        let r = &self.region.inner;
        let inside = self
            .offset
            .checked_add(self.len)
            .is_some_and(|e| e <= r.len);
        if !inside || !Arc::ptr_eq(&r.session.inner, session) {
            return None;
        }
        // SAFETY: offset + len <= len of the mapping (checked), which the
        // region keeps alive as long as it lives.
        Some(unsafe { r.seg.ptr().as_ptr().add(self.offset) })
    }
}

// -------------------------------------------------------------------------
// Descriptors and completions
// -------------------------------------------------------------------------

/// The completion of a descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViCompletion {
    /// The number the descriptor was posted with.
    pub id: u64,
    /// `Ok` with the message length (for a send, the bytes sent), or why
    /// it failed.
    pub status: Result<usize, ViError>,
}

/// Which queue of a VI completed, in a [`CompletionQueue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ViQueue {
    /// The send queue.
    Send,
    /// The receive queue.
    Recv,
}

/// What a VI's state is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViState {
    /// Connected: descriptors are carried.
    Connected,
    /// VIA's error state, and why.
    Error(ViError),
}

/// Why a descriptor was not posted. A descriptor that is posted always
/// completes (with an error status if it fails).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostError {
    /// The queue holds as many descriptors as its attribute allows: take
    /// completions first.
    QueueFull,
}

impl std::fmt::Display for PostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PostError::QueueFull => "the VI's queue is full: take completions first",
        })
    }
}

impl std::error::Error for PostError {}

/// Why a wait returned no completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitError {
    /// Nothing completed in time.
    Timeout,
    /// No descriptor is outstanding on that queue (and the VI is broken,
    /// if it says why).
    Empty(Option<ViError>),
}

impl std::fmt::Display for WaitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitError::Timeout => f.write_str("timed out"),
            WaitError::Empty(None) => f.write_str("no descriptor is posted on that queue"),
            WaitError::Empty(Some(e)) => {
                write!(
                    f,
                    "no descriptor is posted on that queue; the VI is broken: {e}"
                )
            }
        }
    }
}

impl std::error::Error for WaitError {}

/// A segment resolved at post time: where its bytes are. Its region is
/// kept alive (and counted as in use) by the VI's [`RegionsInUse`] while
/// the descriptor is posted.
struct Piece {
    /// The region's handle and the offset in it (what the engine is told).
    handle: u32,
    /// The region's slot in the VI's [`RegionsInUse`].
    slot: u16,
    offset: usize,
    ptr: *mut u8,
    len: usize,
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
struct RegionsInUse {
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
    index: HashMap<*const RegionInner, u16, rustc_hash::FxBuildHasher>,
    /// The slot used last (a VI mostly uses one or two regions).
    last: u16,
    /// Regions kept unused (`n == 0`).
    kept: usize,
    /// This VI's mark in a region's [`RegionInner::slot_hint`] (0 until it
    /// holds a region the slow way, then unique in the process).
    tag: u64,
}

/// A region a VI holds.
struct Held {
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
    fn hold(&mut self, r: &Arc<RegionInner>) -> u16 {
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
            self.index.get(&Arc::as_ptr(r)).copied()
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
                    self.index.insert(Arc::as_ptr(r), i);
                } else if self.slots.len() > Self::SCAN {
                    // Many regions at once: index them all from now on.
                    for (j, e) in self.slots.iter().enumerate() {
                        if let Some(h) = e {
                            self.index.insert(Arc::as_ptr(&h.region), j as u16);
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

    /// The pieces of `d` are done with: their regions are kept, unused,
    /// once no other descriptor uses them.
    #[inline(always)]
    fn release(&mut self, d: &Desc) {
        if d.n == 1 {
            // The common case: one piece.
            self.release_slot(d.first.slot);
        } else {
            self.release_slow(d);
        }
    }

    #[inline(never)]
    fn release_slow(&mut self, d: &Desc) {
        for p in d.pieces() {
            self.release_slot(p.slot);
        }
    }

    /// One piece using the region in `slot` is done with.
    #[inline(always)]
    fn release_slot(&mut self, slot: u16) {
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
                    self.index.remove(&Arc::as_ptr(&h.region));
                }
            }
        }
    }
}

/// A send in the ring that the receiver has not placed yet (reliable
/// reception on the direct path).
#[derive(Clone, Copy, Default)]
struct Unplaced {
    id: u64,
    total: usize,
    /// Its message number: placed once the receiver's count reaches it.
    seq: u64,
    /// The slots (in the VI's [`RegionsInUse`]) of the regions a pulled
    /// send's data lies in, held until the receiver has read it.
    slots: [u16; VI_MAX_SEGMENTS],
    nslots: u8,
}

impl Unplaced {
    /// A new last entry of `q`, holding no regions yet. Written field by
    /// field into its slot: made on the stack and copied in whole, it was
    /// read back with loads wider than the stores that made it (a
    /// store-forwarding stall at every large send).
    #[inline(always)]
    fn push(q: &mut Fifo<Unplaced>, id: u64, total: usize, seq: u64) -> &mut Unplaced {
        let u = q.push_slot();
        u.id = id;
        u.total = total;
        u.seq = seq;
        u.nslots = 0;
        u
    }
}

/// A completion waiting to be taken (a slot of a VI's queue), as plain
/// words written and read one by one: a `ViCompletion` copied whole is
/// read back with wider loads than the stores that wrote it, and each
/// such read waits for the stores to drain (a store-forwarding stall).
#[derive(Clone, Copy, Default)]
struct Done {
    id: u64,
    len: usize,
    /// The `ViError` code, 0 for success.
    err: u32,
}

impl Done {
    #[inline(always)]
    fn set(&mut self, c: ViCompletion) {
        self.id = c.id;
        match c.status {
            Ok(n) => {
                self.len = n;
                self.err = 0;
            }
            Err(e) => {
                self.len = 0;
                self.err = e as u32;
            }
        }
    }

    #[inline(always)]
    fn get(&self) -> ViCompletion {
        let status = match ViError::from_u32(self.err) {
            None => Ok(self.len),
            Some(e) => Err(e),
        };
        ViCompletion {
            id: self.id,
            status,
        }
    }
}

/// Slots each queue of a VI starts with (it grows when more are needed).
const QUEUE_START: usize = 64;

/// Sends of at least this many bytes on a local VI are read by the
/// receiver straight from the sender's region (one copy) instead of being
/// copied into the ring and out again.
pub const PULL_MIN: usize = 2048;

fn pull_min() -> usize {
    static M: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *M.get_or_init(|| {
        std::env::var("UNET_PULL_MIN")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(PULL_MIN)
    })
}

/// Grant this process's region `handle` to the peer of VI `vi` (once:
/// `granted` remembers the engine's answer). False if the engine refused.
fn grant(granted: &mut Vec<(u32, bool)>, session: &Session, vi: u32, handle: u32) -> bool {
    if let Some(&(_, ok)) = granted.iter().find(|g| g.0 == handle) {
        return ok;
    }
    let req = Request::ViGrantRegion { vi, handle };
    let ok = matches!(session.inner.request(&req), Ok((Reply::Ok, _)));
    granted.push((handle, ok));
    ok
}

/// The threshold of reading large messages from the sender's region in
/// bytes ([`PULL_MIN`], or `UNET_PULL_MIN`), for a borrower of a VI's
/// data path.
pub(crate) fn pull_min_bytes() -> u64 {
    pull_min() as u64
}

/// The peer's regions a local VI keeps mapped at once.
const PEER_REGIONS_MAX: usize = 64;

/// Why a reference record could not be read into a receive.
enum PullError {
    /// The peer's region is not mapped here yet.
    Unknown(u32),
    /// The data is larger than the receive: how large.
    TooLong,
    /// The record is malformed or names memory outside its region.
    Bad,
}

/// Copy the message a reference record (`len` bytes at `src`) names in
/// the peer's regions `regions` into the pieces of `d`; its length.
///
/// # Safety
/// `src` must be readable for `len` bytes.
unsafe fn pull_into(
    regions: &[(u32, Segment)],
    d: &Desc,
    src: *const u8,
    len: usize,
) -> Result<usize, PullError> {
    if len == 0 || !len.is_multiple_of(VI_REF_SEGMENT) || len / VI_REF_SEGMENT > VI_MAX_SEGMENTS {
        return Err(PullError::Bad);
    }
    let mut rec = [0u8; VI_MAX_SEGMENTS * VI_REF_SEGMENT];
    // SAFETY: src has len readable bytes (the caller's promise), and len
    // fits rec (checked). Copied once: the peer may change the ring.
    unsafe { unet_abi::copy::copy_bytes(src, rec.as_mut_ptr(), len) };
    let mut parts = [(std::ptr::null::<u8>(), 0usize); VI_MAX_SEGMENTS];
    let mut total = 0usize;
    for (i, e) in rec[..len].chunks_exact(VI_REF_SEGMENT).enumerate() {
        let handle = u32::from_le_bytes(e[0..4].try_into().expect("4"));
        let n = u32::from_le_bytes(e[4..8].try_into().expect("4")) as usize;
        let off = u64::from_le_bytes(e[8..16].try_into().expect("8"));
        let Some((_, seg)) = regions.iter().find(|r| r.0 == handle) else {
            return Err(PullError::Unknown(handle));
        };
        let inside = usize::try_from(off)
            .ok()
            .and_then(|o| o.checked_add(n).map(|end| (o, end)))
            .filter(|&(_, end)| end <= seg.len());
        let Some((off, _)) = inside else {
            return Err(PullError::Bad);
        };
        // SAFETY: off + n lies inside the mapping (checked).
        parts[i] = (unsafe { seg.ptr().as_ptr().add(off) }, n);
        total += n;
    }
    if total > d.total {
        return Err(PullError::TooLong);
    }
    let mut at = 0;
    for &(p, n) in &parts[..len / VI_REF_SEGMENT] {
        // SAFETY: p has n readable bytes in a mapping `regions` keeps
        // alive; at + n <= total <= d.total.
        unsafe { d.scatter_at(at, p, n) };
        at += n;
    }
    Ok(total)
}

/// A posted descriptor (a slot of a VI's queue, reused: its vector of
/// further pieces keeps its capacity). Its first piece is kept in place:
/// most descriptors have one, and reach no other memory.
#[derive(Default)]
struct Desc {
    id: u64,
    /// Pieces resolved (the first in `first`, the rest in `more`).
    n: u8,
    first: Piece,
    more: Vec<Piece>,
    total: usize,
    /// Why the descriptor is bad, found when it was posted.
    bad: bool,
}

impl Default for Piece {
    fn default() -> Piece {
        Piece {
            handle: 0,
            slot: 0,
            offset: 0,
            ptr: std::ptr::null_mut(),
            len: 0,
        }
    }
}

impl Desc {
    /// Make this the descriptor for `segs`; the regions it uses are held in
    /// `held` (release them with [`RegionsInUse::release`] when it is
    /// done).
    #[inline(always)]
    fn fill(&mut self, id: u64, segs: &[ViSeg<'_>], session: &Arc<Inner>, held: &mut RegionsInUse) {
        if let [s] = segs {
            if let Some(ptr) = s.resolve(session) {
                let r = &s.region.inner;
                self.id = id;
                self.n = 1;
                self.total = s.len;
                self.bad = false;
                self.first = Piece {
                    handle: r.handle,
                    slot: held.hold(r),
                    offset: s.offset,
                    ptr,
                    len: s.len,
                };
                return;
            }
        }
        self.fill_any(id, segs, session, held);
    }

    /// [`Desc::fill`] for any number of segments, good or bad.
    #[inline(never)]
    fn fill_any(
        &mut self,
        id: u64,
        segs: &[ViSeg<'_>],
        session: &Arc<Inner>,
        held: &mut RegionsInUse,
    ) {
        self.id = id;
        self.n = 0;
        self.total = 0;
        self.bad = segs.len() > VI_MAX_SEGMENTS;
        for s in segs.iter().take(VI_MAX_SEGMENTS) {
            let Some(ptr) = s.resolve(session) else {
                self.bad = true;
                continue;
            };
            let r = &s.region.inner;
            self.total += s.len;
            let piece = Piece {
                handle: r.handle,
                slot: held.hold(r),
                offset: s.offset,
                ptr,
                len: s.len,
            };
            if self.n == 0 {
                self.first = piece;
            } else {
                if self.n == 1 {
                    self.more.clear();
                }
                self.more.push(piece);
            }
            self.n += 1;
        }
    }

    #[inline(always)]
    fn pieces(&self) -> impl Iterator<Item = &Piece> {
        let more = if self.n > 1 { &self.more[..] } else { &[] };
        std::iter::once(&self.first)
            .take(self.n.min(1) as usize)
            .chain(more)
    }

    /// Copy the `len` bytes at `src` into the pieces from byte `at` of the
    /// message on (`at + len` is at most `total`).
    ///
    /// # Safety
    /// `src` must be readable for `len` bytes.
    unsafe fn scatter_at(&self, mut at: usize, src: *const u8, len: usize) {
        let mut done = 0;
        for p in self.pieces() {
            if done == len {
                break;
            }
            if at >= p.len {
                at -= p.len;
                continue;
            }
            let n = (p.len - at).min(len - done);
            // SAFETY: src has len readable bytes (the caller's promise); the
            // piece has p.len writable bytes in its region, which the VI
            // holds while the descriptor is posted; at + n <= p.len.
            unsafe { unet_abi::copy::copy_bytes(src.add(done), p.ptr.add(at), n) };
            done += n;
            at = 0;
        }
    }

    /// Copy the `len` bytes at `src` into the pieces in order (`len` is
    /// at most `total`).
    ///
    /// # Safety
    /// `src` must be readable for `len` bytes.
    #[inline(always)]
    unsafe fn scatter(&self, src: *const u8, len: usize) {
        if self.n == 1 {
            // SAFETY: as below, for the one piece (len <= total = its len).
            unsafe { unet_abi::copy::copy_bytes(src, self.first.ptr, len) };
            return;
        }
        let mut at = 0;
        for p in self.pieces() {
            if at == len {
                break;
            }
            let n = p.len.min(len - at);
            // SAFETY: src has len readable bytes (the caller's promise);
            // the piece has p.len writable bytes in its region, which the
            // VI holds while the descriptor is posted; n fits both.
            unsafe { unet_abi::copy::copy_bytes(src.add(at), p.ptr, n) };
            at += n;
        }
    }
}

// -------------------------------------------------------------------------
// Completion queues
// -------------------------------------------------------------------------

struct CqInner {
    entries: Mutex<VecDeque<(u32, ViQueue)>>,
    /// The cores of the VIs reporting here (to make progress on them
    /// while waiting).
    cores: Mutex<Vec<Weak<Mutex<Core>>>>,
    /// Bumped and woken when an entry is added by another thread.
    futex: AtomicU32,
}

/// A completion queue: several VIs' send or receive queues report here,
/// in the order their descriptors completed (VIA's `VipCQDone` and
/// `VipCQWait`). An entry says which VI and which of its queues has a
/// completion; take the completion itself from the VI
/// ([`Vi::send_done`], [`Vi::recv_done`]). Cheap to clone.
#[derive(Clone)]
pub struct CompletionQueue {
    inner: Arc<CqInner>,
}

impl std::fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionQueue")
            .field("waiting", &lock(&self.inner.entries).len())
            .finish()
    }
}

impl Default for CompletionQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl CompletionQueue {
    /// An empty completion queue.
    pub fn new() -> CompletionQueue {
        CompletionQueue {
            inner: Arc::new(CqInner {
                entries: Mutex::new(VecDeque::new()),
                cores: Mutex::new(Vec::new()),
                futex: AtomicU32::new(0),
            }),
        }
    }

    fn push(&self, vi: u32, q: ViQueue) {
        lock(&self.inner.entries).push_back((vi, q));
        self.inner.futex.fetch_add(1, Ordering::Release);
        sys::futex_wake(&self.inner.futex, i32::MAX);
    }

    fn attach(&self, core: &Arc<Mutex<Core>>) {
        let mut cores = lock(&self.inner.cores);
        cores.retain(|w| w.strong_count() > 0);
        cores.push(Arc::downgrade(core));
    }

    /// The next entry, if one is waiting: which VI (its [`Vi::id`]) and
    /// which queue. Moves the attached VIs on first.
    pub fn done(&self) -> Option<(u32, ViQueue)> {
        if let Some(e) = lock(&self.inner.entries).pop_front() {
            return Some(e);
        }
        self.progress();
        lock(&self.inner.entries).pop_front()
    }

    /// Make progress on every attached VI no other thread is busy with.
    fn progress(&self) {
        let cores: Vec<Arc<Mutex<Core>>> = lock(&self.inner.cores)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for c in cores {
            if let Ok(mut core) = c.try_lock() {
                core.progress();
            }
        }
    }

    /// Wait at most `timeout` (None: forever) for the next entry.
    pub fn wait(&self, timeout: Option<Duration>) -> Option<(u32, ViQueue)> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if let Some(e) = self.done() {
                return Some(e);
            }
            let elapsed = start.elapsed();
            if timeout.is_some_and(|t| elapsed >= t) {
                return None;
            }
            spins += 1;
            if elapsed < Duration::from_micros(50) {
                std::hint::spin_loop();
                continue;
            }
            if spins.is_multiple_of(64) {
                std::thread::yield_now();
            }
            // Then short sleeps: a VI's arrival wakes no CQ (the ring's
            // futex is its own), another thread's completion does.
            let seen = self.inner.futex.load(Ordering::Acquire);
            let left = timeout.map(|t| t.saturating_sub(start.elapsed()));
            let nap = Duration::from_micros(200);
            sys::futex_wait(
                &self.inner.futex,
                seen,
                Some(left.map_or(nap, |l| l.min(nap))),
            );
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

// -------------------------------------------------------------------------
// The VI
// -------------------------------------------------------------------------

/// The state of a VI that moves descriptors: its queues, its end of the
/// connection, and its counters.
struct Core {
    id: u32,
    attrs: ViAttributes,
    path: ViPath,
    state: ViState,
    /// Send descriptors not yet in the ring.
    send_posted: Fifo<Desc>,
    /// Sends in the ring waiting for the receiver to place them (reliable
    /// reception only): descriptor number, length and message number. The
    /// data is in the ring already; the regions are not needed any more.
    send_unplaced: Fifo<Unplaced>,
    send_done: Fifo<Done>,
    /// Messages put in the ring so far.
    sent: u64,
    recv_posted: Fifo<Desc>,
    recv_done: Fifo<Done>,
    /// Messages placed into posted buffers so far.
    placed: u64,
    send_cq: Option<CompletionQueue>,
    recv_cq: Option<CompletionQueue>,
    stats: ViStats,
    /// The recent mean of the waits that had to read the clock, in
    /// nanoseconds (a moving average, an eighth per wait): a wait spins
    /// up to twice this before it sleeps, so that a VI whose answers take
    /// a little longer than `attrs.spin` (a round trip between engines)
    /// does not sleep just before each one and pay a wake-up.
    wait_mean_ns: u64,
    /// A message is waiting for a receive to be posted (counted once).
    holding: bool,
    /// The regions posted descriptors use.
    held: RegionsInUse,
    /// The session (for the rare control requests of the data path: a
    /// region granted to the peer, or a peer's region mapped).
    session: Session,
    /// Handles of this process's regions asked to be granted to the peer
    /// (local VIs), and whether the engine did.
    granted: Vec<(u32, bool)>,
    /// The peer's regions mapped here (read-only), by handle (local VIs).
    peer_regions: Vec<(u32, Segment)>,
    /// The message number of the last send the receiver reads from our
    /// region: a send queued behind it completes once it has.
    last_pull_seq: u64,
    /// Keeps the counters `conn` points at alive (dropped after it).
    _counters: Box<[AtomicU64; CLIENT_COUNTERS]>,
}

// SAFETY: the raw pointers in `Desc` point into regions whose mappings
// the descriptors keep alive (`Piece::region`); `DirectConn` is Send.
unsafe impl Send for Core {}

/// What a VI counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ViStats {
    /// Messages sent.
    pub tx_msgs: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Messages received into posted buffers.
    pub rx_msgs: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Messages that arrived before a receive was posted for them, and
    /// waited for one (VIA would have broken the connection).
    pub rx_not_posted: u64,
    /// Times a send waited for room in the ring.
    pub tx_full: u64,
    /// Descriptors completed with an error.
    pub errors: u64,
    /// Messages dropped on an unreliable VI (too long for their receive).
    pub rx_dropped: u64,
}

/// Why a VI's data path is not lent ([`Vi::lend_direct`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LendRefusal {
    /// Not now: descriptors or completions are outstanding. Once they
    /// are all taken it can be.
    Busy,
    /// Never: a VI between engines, one with a completion queue, one of
    /// reliable reception or strict about receives not posted, or a
    /// broken one.
    Never,
}

/// What the borrower of a VI's data path hands back
/// ([`Vi::take_back_direct`]): the ring positions it reached and what it
/// sent and placed meanwhile.
#[derive(Clone, Debug, Default)]
pub(crate) struct DirectReturn {
    pub tx_pos: u64,
    pub rx_pos: u64,
    pub rx_published: u64,
    pub sent: u64,
    pub sent_bytes: u64,
    pub received: u64,
    pub received_bytes: u64,
    pub tx_full: u64,
    /// Sends in the ring the peer has not placed yet, oldest first: `(id,
    /// length, message number)`, completed by the library once the peer's
    /// placed count reaches the number. Their memory stays untouched and
    /// registered until then (the borrower's promise).
    pub unplaced: Vec<(u64, usize, u64)>,
}

/// A lent data path: the connection's part, and the VI's message counts
/// at the lending (sends and placements are numbered from them).
pub(crate) struct DirectLoan {
    pub conn: ConnLoan,
    pub sent: u64,
    pub placed: u64,
}

/// How a VI's messages travel.
enum ViPath {
    /// A ring shared with the peer's process (a local VI).
    Direct(DirectConn),
    /// Queues the engine carries to another engine.
    Engine(Box<EngineSide>),
}

impl Core {
    /// The direct connection. Only the direct path's code calls it.
    #[inline(always)]
    fn conn(&mut self) -> &mut DirectConn {
        match &mut self.path {
            ViPath::Direct(c) => c,
            ViPath::Engine(_) => unreachable!("the direct path's code on an engine VI"),
        }
    }

    /// How long a wait spins now: `attrs.spin`, or up to twice the
    /// recent waits' mean if longer (at most
    /// [`ViAttributes::SPIN_ADAPT_MAX`]); never if `attrs.spin` is zero.
    fn spin_now(&self) -> Duration {
        let base = self.attrs.spin;
        if base.is_zero() {
            return base;
        }
        let adapt = Duration::from_nanos(self.wait_mean_ns.saturating_mul(2));
        base.max(adapt.min(ViAttributes::SPIN_ADAPT_MAX))
    }

    /// A wait that read the clock ended with a completion after `d`
    /// (counted as at most [`ViAttributes::SPIN_ADAPT_MAX`]: a long idle
    /// wait says nothing about how long to spin, beyond the most).
    fn waited(&mut self, d: Duration) {
        let d = d.min(ViAttributes::SPIN_ADAPT_MAX).as_nanos() as u64;
        self.wait_mean_ns = self.wait_mean_ns - self.wait_mean_ns / 8 + d / 8;
    }

    /// Whether the VI is connected (not in the error state).
    #[inline(always)]
    fn connected(&self) -> bool {
        matches!(self.state, ViState::Connected)
    }

    /// Lend the direct path out (see [`Vi::lend_direct`]).
    fn lend(&mut self, recv_ids: &mut [u64]) -> Result<(DirectLoan, usize), LendRefusal> {
        let ViPath::Direct(conn) = &self.path else {
            return Err(LendRefusal::Never);
        };
        if self.send_cq.is_some()
            || self.recv_cq.is_some()
            || self.attrs.reliability == Reliability::ReliableReception
            || self.attrs.strict_rnr
            || !self.connected()
            || conn.broken
        {
            return Err(LendRefusal::Never);
        }
        if !self.send_posted.is_empty()
            || !self.send_unplaced.is_empty()
            || !self.send_done.is_empty()
            || !self.recv_done.is_empty()
            || self.recv_posted.len() > recv_ids.len()
            || self.recv_posted.iter().any(|d| d.bad)
        {
            return Err(LendRefusal::Busy);
        }
        let loan = DirectLoan {
            conn: conn.loan(),
            sent: self.sent,
            placed: self.placed,
        };
        // The receives posted go to the borrower, in order.
        let mut n = 0;
        while let Some(id) = self.retire(ViQueue::Recv) {
            recv_ids[n] = id;
            n += 1;
        }
        Ok((loan, n))
    }

    /// Take the direct path back (see [`Vi::take_back_direct`]).
    fn take_back(&mut self, r: &DirectReturn) {
        let ViPath::Direct(conn) = &mut self.path else {
            return;
        };
        let ok = conn.take_back(r.tx_pos, r.rx_pos, r.rx_published);
        self.sent += r.sent;
        self.placed += r.received;
        self.stats.tx_msgs += r.sent;
        self.stats.tx_bytes += r.sent_bytes;
        self.stats.rx_msgs += r.received;
        self.stats.rx_bytes += r.received_bytes;
        self.stats.tx_full += r.tx_full;
        if r.received > 0 {
            // What waited for a receive was placed by the borrower.
            self.holding = false;
        }
        for &(id, total, seq) in &r.unplaced {
            // A number the borrower cannot have given (none of its sends
            // is past `sent`) completes at once: the send is in the ring.
            let seq = seq.min(self.sent);
            self.last_pull_seq = self.last_pull_seq.max(seq);
            Unplaced::push(&mut self.send_unplaced, id, total, seq);
        }
        if !ok {
            self.break_with(ViError::Broken);
        }
    }

    /// Break the connection for `why`: the peer's side of the direct ring
    /// is told (the engine tells a remote peer when the VI closes).
    fn close_path(&mut self, why: ViError) {
        if let ViPath::Direct(c) = &self.path {
            c.close_with_error(why as u32);
        }
    }

    #[inline(always)]
    fn complete_send(&mut self, c: ViCompletion) {
        if c.status.is_err() {
            self.stats.errors += 1;
        }
        self.send_done.push_slot().set(c);
        if let Some(cq) = &self.send_cq {
            cq.push(self.id, ViQueue::Send);
        }
    }

    #[inline(always)]
    fn complete_recv(&mut self, c: ViCompletion) {
        if c.status.is_err() {
            self.stats.errors += 1;
        }
        self.recv_done.push_slot().set(c);
        if let Some(cq) = &self.recv_cq {
            cq.push(self.id, ViQueue::Recv);
        }
    }

    /// Enter the error state for `why`: every outstanding descriptor
    /// completes with it, and the peer is told.
    fn break_with(&mut self, why: ViError) {
        if !self.connected() {
            return;
        }
        self.state = ViState::Error(why);
        self.close_path(why);
        self.flush(why);
    }

    fn flush(&mut self, why: ViError) {
        while let Some(&mut u) = self.send_unplaced.pop_front() {
            for &slot in &u.slots[..u.nslots as usize] {
                self.held.release_slot(slot);
            }
            self.complete_send(ViCompletion {
                id: u.id,
                status: Err(why),
            });
        }
        while let Some(id) = self.retire(ViQueue::Send) {
            self.complete_send(ViCompletion {
                id,
                status: Err(why),
            });
        }
        while let Some(id) = self.retire(ViQueue::Recv) {
            self.complete_recv(ViCompletion {
                id,
                status: Err(why),
            });
        }
    }

    /// Take the front posted descriptor of `q` off its queue, releasing
    /// its regions; its number.
    #[inline(always)]
    fn retire(&mut self, q: ViQueue) -> Option<u64> {
        let d = match q {
            ViQueue::Send => self.send_posted.pop_front()?,
            ViQueue::Recv => self.recv_posted.pop_front()?,
        };
        self.held.release(d);
        Some(d.id)
    }

    /// Why the peer went: the reason it gave, or just gone.
    fn peer_reason(&self) -> ViError {
        let code = match &self.path {
            ViPath::Direct(c) => c.peer_error(),
            ViPath::Engine(_) => 0,
        };
        match ViError::from_u32(code) {
            // Its own close, or a close on its behalf: gone.
            None | Some(ViError::Closed) => ViError::PeerGone,
            Some(e) => e,
        }
    }

    fn progress(&mut self) {
        self.progress_send();
        if self.recv_stirred() {
            self.progress_recv();
        }
    }

    /// Whether the receive side may have something to do: on the direct
    /// path, a message in the ring or the peer gone (otherwise placing
    /// finds nothing); always on an engine VI.
    #[inline(always)]
    fn recv_stirred(&self) -> bool {
        match &self.path {
            ViPath::Direct(c) => c.ready() || c.peer_closed(),
            ViPath::Engine(_) => true,
        }
    }

    /// Move posted sends into the ring, and complete those the receiver
    /// has placed (reliable reception).
    #[inline(always)]
    fn progress_send(&mut self) {
        if let ViPath::Engine(_) = self.path {
            return self.engine_progress();
        }
        if !self.connected() || (self.send_posted.is_empty() && self.send_unplaced.is_empty()) {
            return;
        }
        self.progress_send_direct();
    }

    #[inline(never)]
    fn progress_send_direct(&mut self) {
        while let Some(d) = self.send_posted.front() {
            if d.bad || d.total > VI_MAX_TRANSFER {
                self.break_with(ViError::BadDescriptor);
                return;
            }
            if d.total >= pull_min() {
                match self.send_pulled() {
                    Some(true) => continue,
                    Some(false) => break,
                    // Not granted: copied into the ring below.
                    None => {}
                }
                if !self.connected() {
                    return;
                }
            }
            let Some(d) = self.send_posted.front() else {
                break;
            };
            let mut parts = [(std::ptr::null::<u8>(), 0usize); VI_MAX_SEGMENTS];
            let mut n = 0;
            for p in d.pieces() {
                parts[n] = (p.ptr as *const u8, p.len);
                n += 1;
            }
            let total = d.total;
            // SAFETY: every piece lies inside its region's mapping (checked
            // when posted), which the descriptor keeps alive.
            match unsafe { self.conn().send_gather(&parts[..n], total) } {
                Ok(_) => {
                    let id = self.retire(ViQueue::Send).expect("front");
                    self.sent_one(id, total);
                }
                Err(DirectSendError::Full) => {
                    self.stats.tx_full += 1;
                    break;
                }
                Err(DirectSendError::TooLarge) => {
                    self.break_with(ViError::BadDescriptor);
                    return;
                }
                Err(DirectSendError::Closed) => {
                    let why = self.peer_reason();
                    self.break_with(why);
                    return;
                }
            }
        }
        if !self.send_unplaced.is_empty() {
            let placed = self.conn().peer_placed();
            while let Some(&u) = self.send_unplaced.front() {
                if u.seq > placed {
                    break;
                }
                self.send_unplaced.pop_front();
                for &slot in &u.slots[..u.nslots as usize] {
                    self.held.release_slot(slot);
                }
                self.complete_send(ViCompletion {
                    id: u.id,
                    status: Ok(u.total),
                });
            }
            if !self.send_unplaced.is_empty() && self.conn().peer_closed() {
                let why = self.peer_reason();
                self.break_with(why);
            }
        }
    }

    /// Send the front posted descriptor as a reference record: the
    /// receiver reads the data from our regions itself (one copy, from
    /// the region into its posted buffer). `Some(true)`: sent (completes
    /// once read); `Some(false)`: not now (no room, or the VI broke);
    /// `None`: a region cannot be granted to the peer, send it by copy.
    #[inline(never)]
    fn send_pulled(&mut self) -> Option<bool> {
        let d = self.send_posted.front()?;
        let mut payload = [0u8; VI_MAX_SEGMENTS * VI_REF_SEGMENT];
        let mut n = 0;
        for p in d.pieces() {
            if !grant(&mut self.granted, &self.session, self.id, p.handle) {
                return None;
            }
            let e = &mut payload[n * VI_REF_SEGMENT..(n + 1) * VI_REF_SEGMENT];
            e[0..4].copy_from_slice(&p.handle.to_le_bytes());
            e[4..8].copy_from_slice(&(p.len as u32).to_le_bytes());
            e[8..16].copy_from_slice(&(p.offset as u64).to_le_bytes());
            n += 1;
        }
        match self.conn().send_ref(&payload[..n * VI_REF_SEGMENT]) {
            Ok(_) => {}
            Err(DirectSendError::Full) => {
                self.stats.tx_full += 1;
                return Some(false);
            }
            Err(DirectSendError::TooLarge) => {
                self.break_with(ViError::BadDescriptor);
                return Some(false);
            }
            Err(DirectSendError::Closed) => {
                let why = self.peer_reason();
                self.break_with(why);
                return Some(false);
            }
        }
        // Off the queue with its regions still held, until it is read.
        let d = self.send_posted.pop_front().expect("front");
        self.sent += 1;
        self.stats.tx_msgs += 1;
        self.stats.tx_bytes += d.total as u64;
        self.last_pull_seq = self.sent;
        let u = Unplaced::push(&mut self.send_unplaced, d.id, d.total, self.sent);
        for p in d.pieces() {
            u.slots[u.nslots as usize] = p.slot;
            u.nslots += 1;
        }
        Some(true)
    }

    /// The peer's region `handle` mapped here (mapping it first if need
    /// be): its memory, and the region let go to make room for it if one
    /// was; None if the engine refuses.
    fn peer_region(&mut self, handle: u32) -> Option<(*const u8, usize, Option<u32>)> {
        let found = |c: &Core| {
            c.peer_regions
                .iter()
                .find(|r| r.0 == handle)
                .map(|(_, seg)| (seg.ptr().as_ptr() as *const u8, seg.len()))
        };
        if let Some((p, n)) = found(self) {
            return Some((p, n, None));
        }
        let gone = (self.peer_regions.len() >= PEER_REGIONS_MAX).then(|| self.peer_regions[0].0);
        if !self.map_peer_region(handle) {
            return None;
        }
        found(self).map(|(p, n)| (p, n, gone))
    }

    /// Map the peer's region `handle` (granted to this VI), keeping at
    /// most [`PEER_REGIONS_MAX`] mapped. False if the engine refuses.
    #[cold]
    fn map_peer_region(&mut self, handle: u32) -> bool {
        let req = Request::ViPeerRegion {
            vi: self.id,
            handle,
        };
        let seg = match self.session.inner.request(&req) {
            Ok((Reply::PeerRegion { len }, mut fds)) if !fds.is_empty() => {
                let fd = fds.remove(0);
                // The size of a region's file is sealed, so the mapping
                // can never fault past its end.
                match Segment::sealed_len(&fd) {
                    Some(n) if n >= len && len > 0 && len <= usize::MAX as u64 => {
                        match Segment::open_unpopulated(fd, len as usize, false) {
                            Ok(seg) => seg,
                            Err(_) => return false,
                        }
                    }
                    _ => return false,
                }
            }
            _ => return false,
        };
        if self.peer_regions.len() >= PEER_REGIONS_MAX {
            self.peer_regions.remove(0);
        }
        self.peer_regions.push((handle, seg));
        true
    }

    /// Send `id` of `total` bytes is in the ring: count it, and complete it
    /// (or, for reliable reception, wait for the receiver to place it).
    #[inline(always)]
    fn sent_one(&mut self, id: u64, total: usize) {
        self.sent += 1;
        self.stats.tx_msgs += 1;
        self.stats.tx_bytes += total as u64;
        if self.attrs.reliability == Reliability::ReliableReception
            || !self.send_unplaced.is_empty()
        {
            // Reliable reception: complete once placed. Otherwise behind a
            // send the receiver still has to read: complete after it, in
            // order.
            let seq = if self.attrs.reliability == Reliability::ReliableReception {
                self.sent
            } else {
                self.last_pull_seq
            };
            Unplaced::push(&mut self.send_unplaced, id, total, seq);
        } else {
            self.complete_send(ViCompletion {
                id,
                status: Ok(total),
            });
        }
    }

    /// The direct path's common case: nothing queued before it and room in
    /// the ring, so the send goes into the ring from `segs` at once, with
    /// no descriptor kept. `None` when it cannot (queued sends, no room, a
    /// bad or foreign segment, a broken VI): the caller posts it the
    /// ordinary way, which reports whatever stopped it.
    #[inline(always)]
    fn try_send_now(&mut self, id: u64, segs: &[ViSeg<'_>], session: &Arc<Inner>) -> Option<()> {
        let ViPath::Direct(conn) = &mut self.path else {
            return None;
        };
        if !matches!(self.state, ViState::Connected)
            || !self.send_posted.is_empty()
            || segs.len() > VI_MAX_SEGMENTS
            || self.send_unplaced.len() + self.send_done.len() >= self.attrs.send_queue as usize
        {
            return None;
        }
        let mut parts = [(std::ptr::null::<u8>(), 0usize); VI_MAX_SEGMENTS];
        let mut total = 0usize;
        for (part, s) in parts.iter_mut().zip(segs) {
            *part = (s.resolve(session)?, s.len);
            total += s.len;
        }
        if total > VI_MAX_TRANSFER || total >= pull_min() {
            // Large sends are read by the receiver from the region: posted.
            return None;
        }
        // SAFETY: every part lies inside its region's mapping (checked),
        // borrowed for the whole call.
        match unsafe { conn.send_gather(&parts[..segs.len()], total) } {
            Ok(_) => {
                self.sent_one(id, total);
                Some(())
            }
            Err(_) => None,
        }
    }

    /// [`Core::try_send_now`] from plain memory: `data` goes into the
    /// direct ring during the call, or nothing happens (`None`).
    #[inline(always)]
    fn try_send_copied(&mut self, id: u64, data: &[u8]) -> Option<()> {
        let ViPath::Direct(conn) = &mut self.path else {
            return None;
        };
        if !matches!(self.state, ViState::Connected)
            || !self.send_posted.is_empty()
            || data.len() > VI_MAX_TRANSFER
            || self.send_unplaced.len() + self.send_done.len() >= self.attrs.send_queue as usize
        {
            return None;
        }
        // SAFETY: `data` is a live borrow of data.len() bytes for the call.
        match unsafe { conn.send_gather(&[(data.as_ptr(), data.len())], data.len()) } {
            Ok(_) => {
                self.sent_one(id, data.len());
                Some(())
            }
            Err(_) => None,
        }
    }

    /// The direct path's common case for a receive: no completion waiting
    /// before it, no completion queue to tell, nothing else to do, a good
    /// receive posted and a message in the ring that fits it. The message
    /// is placed and its completion returned at once. `None` when any of
    /// that does not hold: the general path then does whatever is due.
    #[inline(always)]
    fn recv_now(&mut self, out: &mut Done) -> bool {
        self.recv_now_opt(out).is_some()
    }

    #[inline(always)]
    fn recv_now_opt(&mut self, out: &mut Done) -> Option<()> {
        let ViPath::Direct(conn) = &mut self.path else {
            return None;
        };
        if !matches!(self.state, ViState::Connected)
            || !self.recv_done.is_empty()
            || self.recv_cq.is_some()
            || !self.send_posted.is_empty()
        {
            return None;
        }
        let d = self.recv_posted.front()?;
        if d.bad {
            return None;
        }
        let regions = &self.peer_regions;
        let mut pulled = None;
        let r = conn.recv_vi_with(
            #[inline(always)]
            |src, len, is_ref| {
                if is_ref {
                    // SAFETY: the ring has len readable bytes at src.
                    return match unsafe { pull_into(regions, d, src, len) } {
                        Ok(n) => {
                            pulled = Some(n);
                            Ok(())
                        }
                        // The general path deals with the rest.
                        Err(_) => Err(0),
                    };
                }
                if len > d.total {
                    return Err(len);
                }
                // SAFETY: the ring has len readable bytes at src.
                unsafe { d.scatter(src, len) };
                Ok(())
            },
        );
        let DirectRecv::Message(len) = r else {
            return None;
        };
        let len = pulled.unwrap_or(len);
        self.holding = false;
        self.placed += 1;
        self.stats.rx_msgs += 1;
        self.stats.rx_bytes += len as u64;
        if self.attrs.reliability == Reliability::ReliableReception || pulled.is_some() {
            conn.set_placed(self.placed);
        }
        let id = self.retire(ViQueue::Recv).expect("front");
        out.id = id;
        out.len = len;
        out.err = 0;
        Some(())
    }

    /// The direct path's common case for posting a receive: a connected
    /// VI with room in its queue. The descriptor is filled in place, and a
    /// message already waiting in the ring is placed at once; the peer's
    /// going is noticed by the next poll. `None` when any of that does not
    /// hold: the general path then does whatever is due.
    #[inline(always)]
    fn try_post_recv_now(
        &mut self,
        id: u64,
        segs: &[ViSeg<'_>],
        session: &Arc<Inner>,
    ) -> Option<()> {
        let ViPath::Direct(conn) = &self.path else {
            return None;
        };
        if !self.connected()
            || self.recv_posted.len() + self.recv_done.len() >= self.attrs.recv_queue as usize
        {
            return None;
        }
        let waiting = conn.ready();
        self.recv_posted
            .push_slot()
            .fill(id, segs, session, &mut self.held);
        if waiting {
            self.progress_recv();
        }
        Some(())
    }

    /// Place waiting messages into posted receive buffers.
    #[inline]
    fn progress_recv(&mut self) {
        if let ViPath::Engine(_) = self.path {
            return self.engine_progress();
        }
        if !self.connected() {
            return;
        }
        loop {
            let Some(d) = self.recv_posted.front() else {
                if self.conn().ready() {
                    if !self.holding {
                        self.holding = true;
                        self.stats.rx_not_posted += 1;
                    }
                    if self.attrs.strict_rnr {
                        self.break_with(ViError::ReceiverNotReady);
                    }
                } else if self.conn().peer_closed() {
                    let why = self.peer_reason();
                    self.break_with(why);
                }
                return;
            };
            if d.bad {
                self.break_with(ViError::BadDescriptor);
                return;
            }
            let mut too_long = false;
            let mut pulled = None;
            let mut need = None;
            let mut bad = false;
            let ViPath::Direct(conn) = &mut self.path else {
                return;
            };
            let regions = &self.peer_regions;
            let r = conn.recv_vi_with(|src, len, is_ref| {
                if is_ref {
                    // SAFETY: the ring has len readable bytes at src.
                    return match unsafe { pull_into(regions, d, src, len) } {
                        Ok(n) => {
                            pulled = Some(n);
                            Ok(())
                        }
                        Err(PullError::TooLong) => {
                            too_long = true;
                            pulled = Some(0);
                            Ok(())
                        }
                        Err(PullError::Unknown(h)) => {
                            need = Some(h);
                            Err(0)
                        }
                        Err(PullError::Bad) => {
                            bad = true;
                            Err(0)
                        }
                    };
                }
                if len > d.total {
                    too_long = true;
                    return Ok(());
                }
                // SAFETY: the ring has len readable bytes at src.
                unsafe { d.scatter(src, len) };
                Ok(())
            });
            if let Some(h) = need {
                // The first message from a region of the peer: map it and
                // read the message again.
                if self.map_peer_region(h) {
                    continue;
                }
                bad = true;
            }
            if bad {
                let why = if self.conn().peer_closed() {
                    self.peer_reason()
                } else {
                    ViError::Broken
                };
                self.break_with(why);
                return;
            }
            match r {
                DirectRecv::Empty => {
                    if self.conn().peer_closed() && !self.conn().ready() {
                        let why = self.peer_reason();
                        self.break_with(why);
                    }
                    return;
                }
                DirectRecv::Broken => {
                    self.break_with(ViError::Broken);
                    return;
                }
                DirectRecv::TooSmall(_) => unreachable!("refused only when mapping or bad"),
                DirectRecv::Message(len) => {
                    let len = pulled.unwrap_or(len);
                    self.holding = false;
                    let id = self.retire(ViQueue::Recv).expect("front");
                    self.placed += 1;
                    if too_long {
                        self.complete_recv(ViCompletion {
                            id,
                            status: Err(ViError::TooLong),
                        });
                        if self.attrs.reliability == Reliability::Unreliable {
                            self.stats.rx_dropped += 1;
                            let placed = self.placed;
                            self.conn().set_placed(placed);
                            continue;
                        }
                        self.break_with(ViError::TooLong);
                        return;
                    }
                    self.stats.rx_msgs += 1;
                    self.stats.rx_bytes += len as u64;
                    if self.attrs.reliability == Reliability::ReliableReception || pulled.is_some()
                    {
                        let placed = self.placed;
                        self.conn().set_placed(placed);
                    }
                    self.complete_recv(ViCompletion {
                        id,
                        status: Ok(len),
                    });
                }
            }
        }
    }

    /// Post a descriptor of `segs` to queue `q`.
    fn post(
        &mut self,
        q: ViQueue,
        id: u64,
        segs: &[ViSeg<'_>],
        session: &Arc<Inner>,
    ) -> Result<(), PostError> {
        let cap = match q {
            ViQueue::Send => self.attrs.send_queue,
            ViQueue::Recv => self.attrs.recv_queue,
        };
        if self.outstanding(q) >= cap as usize {
            return Err(PostError::QueueFull);
        }
        let engine = matches!(self.path, ViPath::Engine(_));
        match (q, self.state) {
            // A broken local VI completes whatever is posted with its
            // reason (the engine does so for the VIs it carries).
            (ViQueue::Send, ViState::Error(e)) if !engine => {
                self.complete_send(ViCompletion { id, status: Err(e) })
            }
            (ViQueue::Recv, ViState::Error(e)) if !engine => {
                self.complete_recv(ViCompletion { id, status: Err(e) })
            }
            _ if engine => return self.engine_post(q, id, segs, session),
            (ViQueue::Send, _) => {
                self.send_posted
                    .push_slot()
                    .fill(id, segs, session, &mut self.held);
                self.progress_send();
            }
            (ViQueue::Recv, _) => {
                self.recv_posted
                    .push_slot()
                    .fill(id, segs, session, &mut self.held);
                if self.recv_stirred() {
                    self.progress_recv();
                }
            }
        }
        Ok(())
    }

    /// Whether polling queue `q` may find something new: cheap (a word or
    /// two of shared memory), for spinning between polls. Only the direct
    /// path's receive queue has such a word; the rest always say yes.
    #[inline(always)]
    fn worth_polling(&self, q: ViQueue) -> bool {
        match (&self.path, q) {
            (ViPath::Direct(c), ViQueue::Recv) => {
                c.ready()
                    || c.peer_closed()
                    || !self.send_posted.is_empty()
                    || !self.send_unplaced.is_empty()
            }
            _ => true,
        }
    }

    fn outstanding(&self, q: ViQueue) -> usize {
        match q {
            ViQueue::Send => {
                self.send_posted.len() + self.send_unplaced.len() + self.send_done.len()
            }
            ViQueue::Recv => self.recv_posted.len() + self.recv_done.len(),
        }
    }

    /// Take the next completion of `q` into `out` (field by field: see
    /// [`Done`]); false if there is none.
    #[inline(always)]
    fn take(&mut self, q: ViQueue, out: &mut Done) -> bool {
        let d = match q {
            ViQueue::Send => self.send_done.pop_front(),
            ViQueue::Recv => self.recv_done.pop_front(),
        };
        match d {
            Some(d) => {
                out.id = d.id;
                out.len = d.len;
                out.err = d.err;
                true
            }
            None => false,
        }
    }
}

/// The client's side of a VI the engine carries: the queues in the VI's
/// segment (layout in `unet_abi::ViHeader`).
struct EngineSide {
    seg: Segment,
    doorbell: sys::EventFd,
    sq: Ring<ViDesc>,
    rq: Ring<ViDesc>,
    scq: Ring<ViCompl>,
    rcq: Ring<ViCompl>,
    cap: u64,
    sq_head: u64,
    rq_head: u64,
    scq_tail: u64,
    rcq_tail: u64,
}

// SAFETY: the rings point into `seg`, which EngineSide owns.
unsafe impl Send for EngineSide {}

impl EngineSide {
    fn open(seg: Segment, doorbell: sys::EventFd, vi: u32) -> Result<EngineSide, Error> {
        // SAFETY: the rings point into `seg`, which EngineSide owns.
        let ViView {
            layout,
            sq,
            rq,
            scq,
            rcq,
        } = unsafe { ViView::from_segment(seg.ptr(), seg.len(), vi) }
            .map_err(|e| Error::Protocol(format!("VI segment: {e}")))?;
        Ok(EngineSide {
            seg,
            doorbell,
            sq,
            rq,
            scq,
            rcq,
            cap: layout.cap as u64,
            sq_head: 0,
            rq_head: 0,
            scq_tail: 0,
            rcq_tail: 0,
        })
    }

    fn header(&self) -> &ViHeader {
        // SAFETY: checked in open(); shared fields are atomics.
        unsafe { self.seg.ptr().cast::<ViHeader>().as_ref() }
    }

    fn completions_waiting(&self) -> bool {
        self.scq.head() != self.scq_tail
            || self.rcq.head() != self.rcq_tail
            || self.header().state.load(Ordering::Acquire) != 0
    }

    /// Ring the engine's doorbell if it sleeps.
    fn ring(&self) {
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.header().engine_armed.swap(0, Ordering::AcqRel) != 0 {
            self.doorbell.notify();
        }
    }
}

impl Core {
    /// Post a descriptor of `segs` to the engine's queue `q`.
    fn engine_post(
        &mut self,
        q: ViQueue,
        id: u64,
        segs: &[ViSeg<'_>],
        session: &Arc<Inner>,
    ) -> Result<(), PostError> {
        let ViPath::Engine(e) = &mut self.path else {
            return Ok(());
        };
        let (ring, head) = match q {
            ViQueue::Send => (&e.sq, &mut e.sq_head),
            ViQueue::Recv => (&e.rq, &mut e.rq_head),
        };
        if *head - ring.tail().min(*head) >= e.cap {
            return Err(PostError::QueueFull);
        }
        let d = match q {
            ViQueue::Send => self.send_posted.push_slot(),
            ViQueue::Recv => self.recv_posted.push_slot(),
        };
        d.fill(id, segs, session, &mut self.held);
        let mut w = ViDesc {
            id,
            ..ViDesc::default()
        };
        for (i, p) in d.pieces().enumerate() {
            w.segs[i] = ViSegDesc {
                handle: p.handle,
                len: p.len as u32,
                offset: p.offset as u64,
            };
            w.nsegs += 1;
        }
        if d.bad {
            // The engine is the judge: it refuses this one (and breaks
            // the VI), as it would a descriptor some other way bad.
            w.nsegs = VI_MAX_SEGMENTS as u32 + 1;
        }
        ring.write(*head, w);
        *head += 1;
        ring.set_head(*head);
        e.ring();
        Ok(())
    }

    /// Take the engine's completions, in order, for the descriptors posted.
    fn engine_progress(&mut self) {
        let ViPath::Engine(e) = &mut self.path else {
            return;
        };
        let mut done: Vec<(ViQueue, ViCompl)> = Vec::new();
        for (q, ring, tail) in [
            (ViQueue::Send, &e.scq, &mut e.scq_tail),
            (ViQueue::Recv, &e.rcq, &mut e.rcq_tail),
        ] {
            let head = ring.head();
            // Never more than we posted: a corrupt head is the engine's
            // bug, not ours to trust.
            let from = *tail;
            while *tail < head && head - *tail <= e.cap {
                done.push((q, ring.read(*tail)));
                *tail += 1;
            }
            // Written only when it moved: the engine reads this line, and
            // a client polling in a loop would take it from the engine's
            // core at every poll.
            if *tail != from {
                ring.set_tail(*tail);
            }
        }
        let state = e.header().state.load(Ordering::Acquire);
        for (q, c) in done {
            let Some(id) = self.retire(q) else {
                continue;
            };
            let status = if c.status == 0 {
                Ok(c.len as usize)
            } else {
                Err(ViError::from_u32(c.status.unsigned_abs()).unwrap_or(ViError::Broken))
            };
            match q {
                ViQueue::Send => {
                    if status.is_ok() {
                        self.stats.tx_msgs += 1;
                        self.stats.tx_bytes += c.len as u64;
                    }
                    self.complete_send(ViCompletion { id, status })
                }
                ViQueue::Recv => {
                    if status.is_ok() {
                        self.stats.rx_msgs += 1;
                        self.stats.rx_bytes += c.len as u64;
                    }
                    self.complete_recv(ViCompletion { id, status })
                }
            }
        }
        if let (Some(e), ViState::Connected) = (ViError::from_u32(state), self.state) {
            self.state = ViState::Error(e);
        }
    }
}

/// Where a VI's core lives: in the VI (no lock), or shared with the
/// completion queues it reports to (which move it on while they wait).
///
/// An own core lies in the VI itself, not behind a box: every call then
/// reaches it with one pointer less, which a caller through the C ABI
/// (whose handle is a pointer already) pays in a cache miss whenever a
/// message's copy has pushed the VI out of the first-level cache (one
/// thread draining 4 KiB messages through bare downcalls: 186-192 ns a
/// message with the box, 182-187 without). A VI is moved only when made.
#[allow(clippy::large_enum_variant)]
enum CoreCell {
    Own(Core),
    Shared(Arc<Mutex<Core>>),
}

enum CoreRef<'a> {
    Own(&'a mut Core),
    Shared(MutexGuard<'a, Core>),
}

impl CoreCell {
    /// The core, locked if shared.
    #[inline(always)]
    fn get(&mut self) -> CoreRef<'_> {
        match self {
            CoreCell::Own(c) => CoreRef::Own(c),
            CoreCell::Shared(c) => CoreRef::Shared(lock(c)),
        }
    }
}

impl std::ops::Deref for CoreRef<'_> {
    type Target = Core;
    fn deref(&self) -> &Core {
        match self {
            CoreRef::Own(c) => c,
            CoreRef::Shared(g) => g,
        }
    }
}

impl std::ops::DerefMut for CoreRef<'_> {
    fn deref_mut(&mut self) -> &mut Core {
        match self {
            CoreRef::Own(c) => c,
            CoreRef::Shared(g) => g,
        }
    }
}

/// [`Vi::with`] for a core shared with completion queues: out of line,
/// so that the own core's code is not twice as long.
#[inline(never)]
fn with_shared<R>(
    m: &Mutex<Core>,
    session: &Arc<Inner>,
    f: impl FnOnce(&mut Core, &Arc<Inner>) -> R,
) -> R {
    f(&mut lock(m), session)
}

/// One end of a VIA connection (see the module documentation).
pub struct Vi {
    session: Session,
    core: CoreCell,
    id: u32,
    closed: bool,
}

impl std::fmt::Debug for Vi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vi").field("id", &self.id).finish()
    }
}

impl Vi {
    #[inline(always)]
    fn core(&mut self) -> CoreRef<'_> {
        self.core.get()
    }

    /// Run `f` on the core (and the VI's session), locked if shared. The
    /// hot paths use this rather than [`Vi::core`]: `f` sees a plain
    /// `&mut Core`, so the code of an own core reaches its fields with no
    /// guard to look through at each access.
    #[inline(always)]
    fn with<R>(&mut self, f: impl FnOnce(&mut Core, &Arc<Inner>) -> R) -> R {
        match &mut self.core {
            CoreCell::Own(c) => f(c, &self.session.inner),
            CoreCell::Shared(m) => with_shared(m, &self.session.inner, f),
        }
    }

    /// The VI's id in its engine (what completion queues report).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Whether its messages go straight between the two processes (a
    /// local VI on the direct path), not through the engines.
    pub fn is_direct(&mut self) -> bool {
        matches!(self.core().path, ViPath::Direct(_))
    }

    /// The attributes it was made with.
    pub fn attributes(&mut self) -> ViAttributes {
        self.core().attrs.clone()
    }

    /// Connected, or broken and why.
    pub fn state(&mut self) -> ViState {
        let mut c = self.core();
        c.progress();
        c.state
    }

    /// What it has counted.
    pub fn stats(&mut self) -> ViStats {
        self.core().stats
    }

    /// What the engine counts of a VI it carries to another engine
    /// (retransmissions, duplicates and arrivals out of order,
    /// acks, messages held, ...), by name; empty for a local VI.
    pub fn engine_counters(&mut self) -> Vec<(&'static str, u64)> {
        let c = self.core();
        match &c.path {
            ViPath::Direct(_) => Vec::new(),
            ViPath::Engine(e) => unet_abi::ViCounter::ALL
                .iter()
                .map(|&k| {
                    (
                        k.name(),
                        e.header().counters[k as usize].load(Ordering::Relaxed),
                    )
                })
                .collect(),
        }
    }

    /// Lend a local VI's data path to code that reads and writes its rings
    /// itself (the C ABI's `unet_vi_direct_lend`, for bindings such as
    /// Javia whose calls into this library cost more than the ring's
    /// work): the rings, the lines the borrower reads and writes and the
    /// positions it starts from. Receives posted (at most
    /// `recv_ids.len()`) go to the borrower: their numbers, in order, in
    /// `recv_ids`, and how many (their memory is the borrower's to keep
    /// registered from then on). Only with nothing else outstanding (no
    /// send posted, no completion untaken), on a connected VI on the
    /// direct path without completion queues, neither of reliable
    /// reception nor strict about receives not posted. Until
    /// [`Vi::take_back_direct`] the borrower alone moves the positions:
    /// nothing else may be called on the VI.
    pub(crate) fn lend_direct(
        &mut self,
        recv_ids: &mut [u64],
    ) -> Result<(DirectLoan, usize), LendRefusal> {
        self.with(|c, _| c.lend(recv_ids))
    }

    /// Take a lent data path back at the positions the borrower reached,
    /// counting what it sent and placed. Positions the ring's rules
    /// cannot produce break the VI ([`ViError::Broken`]).
    pub(crate) fn take_back_direct(&mut self, r: &DirectReturn) {
        self.with(|c, _| c.take_back(r));
    }

    /// Sleep on a lent direct path's receiving ring for its borrower (see
    /// `DirectConn::sleep_lent`): false for a position it cannot have
    /// reached.
    pub(crate) fn sleep_lent(&mut self, rx_pos: u64, placed: u64, timeout: Duration) -> bool {
        self.with(|c, _| match &c.path {
            ViPath::Direct(conn) => conn.sleep_lent(rx_pos, placed, timeout),
            ViPath::Engine(_) => false,
        })
    }

    /// Grant `region` to the peer for a borrower's large sends (once per
    /// region and VI). False if the engine refused (send the message by
    /// copy then), or the region belongs to another session.
    pub(crate) fn grant_lent(&mut self, region: &MemRegion) -> bool {
        if !Arc::ptr_eq(&region.inner.session.inner, &self.session.inner) {
            return false;
        }
        self.with(|c, _| grant(&mut c.granted, &c.session, c.id, region.handle()))
    }

    /// The peer's region `handle`, mapped, for a borrower reading a
    /// reference record, and the region unmapped to make room for it if
    /// one was (the borrower forgets that one): valid until it is let go
    /// so or the path is returned. None if the engine refuses it.
    pub(crate) fn peer_region_lent(
        &mut self,
        handle: u32,
    ) -> Option<(*const u8, usize, Option<u32>)> {
        self.with(|c, _| c.peer_region(handle))
    }

    /// Wake the peer of a lent direct path, which the borrower saw asleep
    /// after it published a message.
    pub(crate) fn wake_direct_peer(&mut self) {
        self.with(|c, _| {
            if let ViPath::Direct(conn) = &c.path {
                conn.wake_peer();
            }
        });
    }

    /// Post a send descriptor: the bytes of `segs`, gathered in order into
    /// one message, completing with number `id`. A descriptor that names
    /// memory outside its region (or too many segments or bytes) is
    /// posted, and breaks the VI: it completes with
    /// [`ViError::BadDescriptor`].
    #[inline]
    pub fn post_send(&mut self, id: u64, segs: &[ViSeg<'_>]) -> Result<(), PostError> {
        self.with(
            #[inline(always)]
            |core, session| {
                if core.try_send_now(id, segs, session).is_some() {
                    return Ok(());
                }
                core.post(ViQueue::Send, id, segs, session)
            },
        )
    }

    /// Send `data` from ordinary (unregistered) memory, copied once
    /// during the call, when that can be done now: on a local VI whose
    /// direct ring has room, with no send posted before it and room for
    /// its completion. Returns `false` (nothing sent) otherwise, for
    /// example on a VI between engines, whose engine reads only registered
    /// memory: the caller then copies `data` into a region and posts it
    /// with [`Vi::post_send`]. The send completes with number `id` as a
    /// posted one does.
    #[inline]
    pub fn send_copied(&mut self, id: u64, data: &[u8]) -> bool {
        self.with(
            #[inline(always)]
            |core, _| core.try_send_copied(id, data).is_some(),
        )
    }

    /// Post a receive descriptor: the next message is scattered into
    /// `segs` in order, completing with number `id` and its length.
    #[inline]
    pub fn post_recv(&mut self, id: u64, segs: &[ViSeg<'_>]) -> Result<(), PostError> {
        self.with(
            #[inline(always)]
            |core, session| {
                if core.try_post_recv_now(id, segs, session).is_some() {
                    return Ok(());
                }
                core.post(ViQueue::Recv, id, segs, session)
            },
        )
    }

    /// The next completed send descriptor, if any (VIA's `VipSendDone`).
    #[inline]
    pub fn send_done(&mut self) -> Option<ViCompletion> {
        // The completion travels as plain words to where the answer is
        // built (see `Done`): a completion made just before and copied
        // whole would wait for its stores to drain.
        let mut d = Done::default();
        let got = self.with(
            #[inline(always)]
            |c, _| {
                c.take(ViQueue::Send, &mut d) || {
                    c.progress();
                    c.take(ViQueue::Send, &mut d)
                }
            },
        );
        got.then(|| d.get())
    }

    /// The next completed receive descriptor, if any (`VipRecvDone`).
    #[inline]
    pub fn recv_done(&mut self) -> Option<ViCompletion> {
        let mut d = Done::default();
        self.poll_recv(&mut d).then(|| d.get())
    }

    /// [`Vi::recv_done`] into `d`.
    #[inline(always)]
    fn poll_recv(&mut self, d: &mut Done) -> bool {
        self.with(
            #[inline(always)]
            |c, _| {
                c.take(ViQueue::Recv, d) || c.recv_now(d) || {
                    c.progress();
                    c.take(ViQueue::Recv, d)
                }
            },
        )
    }

    /// Wait at most `timeout` (None: forever) for the next completed send
    /// descriptor (`VipSendWait`).
    #[inline(always)]
    pub fn send_wait(&mut self, timeout: Option<Duration>) -> Result<ViCompletion, WaitError> {
        let mut d = Done::default();
        self.wait(ViQueue::Send, timeout, &mut d)?;
        Ok(d.get())
    }

    /// Wait at most `timeout` (None: forever) for the next completed
    /// receive descriptor (`VipRecvWait`): spins a little, then sleeps
    /// until a message or the peer's going wakes it.
    #[inline(always)]
    pub fn recv_wait(&mut self, timeout: Option<Duration>) -> Result<ViCompletion, WaitError> {
        // The completion travels as plain words in `d` and is made here,
        // in the caller, whether or not the work below is inlined: a
        // completion returned whole from a function that is not would be
        // copied through memory and read back with loads wider than the
        // stores that wrote it, each waiting for those stores to drain (a
        // store-forwarding stall on the path from the message to its
        // answer: 20-30 ns a round trip in a local ping-pong whose caller
        // passes the result on with `?`, which made the compiler keep the
        // whole wait out of line).
        let mut d = Done::default();
        self.recv_wait_into(timeout, &mut d)?;
        Ok(d.get())
    }

    /// [`Vi::recv_wait`] into `d`.
    #[inline]
    fn recv_wait_into(&mut self, timeout: Option<Duration>, d: &mut Done) -> Result<(), WaitError> {
        if self.poll_recv(d) {
            return Ok(());
        }
        self.recv_spin(timeout, d)
    }

    /// [`Vi::recv_wait`] once the first poll found nothing: first polls,
    /// each the whole receive path (the one a message found at once
    /// takes) and a pause apart, for up to 64 of them (about the round
    /// trip of a small message between two cores); then the general wait
    /// (spinning on a word of the ring, then sleeping). Measured on the
    /// local 64 B ping-pong, whole polls a pause apart answer sooner than
    /// a cheap check of the ring followed by a separate poll.
    #[inline(never)]
    fn recv_spin(&mut self, timeout: Option<Duration>, d: &mut Done) -> Result<(), WaitError> {
        if timeout != Some(Duration::ZERO) && self.core().connected() {
            for _ in 0..64 {
                std::hint::spin_loop();
                if self.poll_recv(d) {
                    return Ok(());
                }
            }
        }
        self.wait(ViQueue::Recv, timeout, d)
    }

    /// Wait for the next completion of `q`, into `d`.
    #[inline(never)]
    fn wait(
        &mut self,
        q: ViQueue,
        timeout: Option<Duration>,
        d: &mut Done,
    ) -> Result<(), WaitError> {
        let spin = self.core().spin_now();
        // The clock is read only once the first polls found nothing: a
        // completion that comes at once costs no clock read.
        let mut start: Option<Instant> = None;
        let mut round = 0u32;
        loop {
            let polled = self.with(|c, _| {
                if c.take(q, d) || (q == ViQueue::Recv && c.recv_now(d)) {
                    return Some(Ok(()));
                }
                c.progress();
                if c.take(q, d) {
                    return Some(Ok(()));
                }
                if c.outstanding(q) == 0 {
                    return Some(Err(WaitError::Empty(match c.state {
                        ViState::Error(e) => Some(e),
                        ViState::Connected => None,
                    })));
                }
                // Spin on a cheap check (a word of the ring) until
                // something may have changed, rather than polling every
                // queue each time.
                for _ in 0..64 {
                    if c.worth_polling(q) {
                        break;
                    }
                    std::hint::spin_loop();
                }
                None
            });
            if let Some(r) = polled {
                if let (Some(t0), Ok(())) = (start, &r) {
                    self.core().waited(t0.elapsed());
                }
                return r;
            }
            round += 1;
            if round < 16 {
                continue;
            }
            let elapsed = start.get_or_insert_with(Instant::now).elapsed();
            if timeout.is_some_and(|t| elapsed >= t) {
                return Err(WaitError::Timeout);
            }
            if elapsed < spin {
                if round.is_multiple_of(64) {
                    std::thread::yield_now();
                }
                std::hint::spin_loop();
                continue;
            }
            let left = timeout.map(|t| t.saturating_sub(elapsed));
            let engine = matches!(self.core().path, ViPath::Engine(_));
            match q {
                // Sleep on the ring until the peer publishes (or closes);
                // on an engine VI, until the engine completes something.
                _ if engine => self.sleep_on_ring(left),
                ViQueue::Recv => self.sleep_on_ring(left),
                // A send waits for room in the ring (which wakes nobody:
                // short naps) or for the receiver to place or read it
                // (which wakes us).
                ViQueue::Send => self.sleep_on_ring(left),
            }
        }
    }

    fn sleep_on_ring(&mut self, left: Option<Duration>) {
        let mut c = self.core();
        // Sends waiting for room in the direct ring wake nobody when the
        // room comes: sleep in short naps then, so that they go out while
        // we wait. A receiver that places (or reads) a send wakes us.
        let cap = if matches!(c.path, ViPath::Direct(_)) && !c.send_posted.is_empty() {
            Duration::from_micros(50)
        } else {
            Duration::from_secs(1)
        };
        let placing = c.send_unplaced.front().map(|u| u.seq);
        let left = Some(left.map_or(cap, |l| l.min(cap)));
        match &mut c.path {
            ViPath::Direct(conn) => {
                conn.set_sleeping(true);
                let (word, seen) = {
                    let (w, v) = conn.wait_word();
                    (w as *const AtomicU32, v)
                };
                // Pairs with the producer's fence after it publishes:
                // either we see its record now, or it sees our sleeping
                // flag and wakes us.
                sys::heavy_fence();
                if !conn.ready()
                    && !conn.peer_closed()
                    && placing.is_none_or(|seq| conn.peer_placed() < seq)
                {
                    // SAFETY: the word lies in the connection's header,
                    // mapped as long as the DirectConn lives, which the
                    // guard or borrow keeps alive for this call.
                    let word = unsafe { &*word };
                    sys::futex_wait(word, seen, left);
                }
                conn.set_sleeping(false);
            }
            ViPath::Engine(e) => {
                let h = e.header();
                let seen = h.cq_futex.load(Ordering::Acquire);
                h.client_sleeping.store(1, Ordering::Relaxed);
                // Pairs with the engine's fence after it pushes a
                // completion: either we see it now or it sees our flag.
                std::sync::atomic::fence(Ordering::SeqCst);
                if !e.completions_waiting() {
                    sys::futex_wait(&h.cq_futex, seen, left);
                }
                h.client_sleeping.store(0, Ordering::Relaxed);
            }
        }
    }

    /// Close the VI: descriptors still outstanding complete with
    /// [`ViError::Closed`] (and are dropped with it); the peer finds its
    /// VI broken ([`ViError::PeerGone`]).
    pub fn close(mut self) -> Result<(), Error> {
        self.shut();
        match self
            .session
            .inner
            .request(&Request::ViClose { vi: self.id })?
            .0
        {
            Reply::Ok => Ok(()),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to close: {r:?}"
            ))),
        }
    }

    fn shut(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        let mut c = self.core();
        if c.state == ViState::Connected {
            c.state = ViState::Error(ViError::Closed);
            c.close_path(ViError::Closed);
            c.flush(ViError::Closed);
        }
    }
}

impl Drop for Vi {
    fn drop(&mut self) {
        if !self.closed {
            self.shut();
            let _ = self
                .session
                .inner
                .request(&Request::ViClose { vi: self.id });
        }
    }
}

// -------------------------------------------------------------------------
// Set-up
// -------------------------------------------------------------------------

/// A discriminator this process accepts VI connections on.
pub struct ViServer {
    session: Session,
    tag: u64,
}

/// A connection request waiting for an answer: accept or reject it. A
/// request dropped unanswered is rejected.
pub struct ConnRequest {
    session: Session,
    request: u32,
    attrs: ViParams,
    pid: u32,
    host: Option<std::net::SocketAddr>,
    answered: bool,
}

impl ConnRequest {
    /// The reliability level the connecting side asked for.
    pub fn reliability(&self) -> Reliability {
        self.attrs.reliability
    }

    /// The connecting process (0 when it is remote or unknown).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The connecting side's engine (None: this one).
    pub fn host(&self) -> Option<std::net::SocketAddr> {
        self.host
    }

    /// Accept with a VI of `attrs` (its reliability must be the
    /// connecting side's: otherwise both are refused with
    /// `ErrorCode::AttributesMismatch`).
    pub fn accept(mut self, attrs: &ViAttributes) -> Result<Vi, Error> {
        self.answered = true;
        let req = Request::ViAccept {
            request: self.request,
            attrs: attrs.params(),
        };
        let (r, fds) = self.session.inner.request(&req)?;
        vi_from_reply(&self.session, r, fds, attrs, "accept")
    }

    /// Reject the request: the connecting side gets `ErrorCode::Refused`.
    pub fn reject(mut self) -> Result<(), Error> {
        self.answered = true;
        let req = Request::ViReject {
            request: self.request,
        };
        match self.session.inner.request(&req)?.0 {
            Reply::Ok => Ok(()),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to reject: {r:?}"
            ))),
        }
    }
}

impl Drop for ConnRequest {
    fn drop(&mut self) {
        if !self.answered {
            let _ = self.session.inner.request(&Request::ViReject {
                request: self.request,
            });
        }
    }
}

impl ViServer {
    /// The discriminator.
    pub fn tag(&self) -> u64 {
        self.tag
    }

    /// Wait at most `timeout` (None: forever) for a connection request
    /// (VIA's `VipConnectWait`).
    pub fn wait_request(&self, timeout: Option<Duration>) -> Result<ConnRequest, Error> {
        let tag = self.tag;
        let n = self.session.inner.wait_notice(
            |r| matches!(r, Reply::ViRequest { tag: t, .. } if *t == tag),
            timeout,
        )?;
        match n {
            Some((
                Reply::ViRequest {
                    request,
                    attrs,
                    pid,
                    host,
                    ..
                },
                _,
            )) => Ok(ConnRequest {
                session: self.session.clone(),
                request,
                attrs,
                pid,
                host,
                answered: false,
            }),
            _ => Err(Error::NoRequest(timeout.unwrap_or_default())),
        }
    }

    /// Wait for the next connection request and accept it with a VI of
    /// `attrs` (`ServerVi.accept()` in Javia).
    pub fn accept(&self, attrs: &ViAttributes, timeout: Option<Duration>) -> Result<Vi, Error> {
        self.wait_request(timeout)?.accept(attrs)
    }
}

impl Drop for ViServer {
    fn drop(&mut self) {
        let _ = self
            .session
            .inner
            .request(&Request::ViUnlisten { tag: self.tag });
    }
}

fn vi_from_reply(
    session: &Session,
    r: Reply,
    mut fds: Vec<OwnedFd>,
    attrs: &ViAttributes,
    what: &str,
) -> Result<Vi, Error> {
    match r {
        Reply::ViConnected { vi, conn_id, side }
            if (conn_id != 0 && !fds.is_empty()) || (conn_id == 0 && fds.len() >= 2) =>
        {
            let seg = Segment::open(fds.remove(0), unet_abi::CONN_HEADER_SIZE, true)?;
            let counters: Box<[AtomicU64; CLIENT_COUNTERS]> =
                Box::new(std::array::from_fn(|_| AtomicU64::new(0)));
            let path = if conn_id == 0 {
                let bell = sys::EventFd::from_fd(fds.remove(0));
                ViPath::Engine(Box::new(EngineSide::open(seg, bell, vi)?))
            } else {
                if seg.len() < unet_abi::CONN_HEADER_SIZE {
                    return Err(Error::Protocol("connection segment too small".into()));
                }
                // This side's counters live in the connection's header,
                // where the engine reads them for `unet stat`.
                let hp = seg.ptr().cast::<unet_abi::ConnHeader>().as_ptr();
                // SAFETY: the header page is mapped (checked above) for as
                // long as `seg`, which the DirectConn made from it owns;
                // the counters are atomics; the reference is only turned
                // into a pointer kept beside the mapping.
                let mine = unsafe {
                    if side == 1 {
                        &(*hp).b_counters
                    } else {
                        &(*hp).a_counters
                    }
                };
                ViPath::Direct(DirectConn::open(seg, 0, side == 1, mine).map_err(Error::Protocol)?)
            };
            let core = Core {
                id: vi,
                attrs: attrs.clone(),
                path,
                state: ViState::Connected,
                send_posted: Fifo::with_capacity(QUEUE_START),
                send_unplaced: Fifo::with_capacity(QUEUE_START),
                send_done: Fifo::with_capacity(QUEUE_START),
                sent: 0,
                recv_posted: Fifo::with_capacity(QUEUE_START),
                recv_done: Fifo::with_capacity(QUEUE_START),
                placed: 0,
                send_cq: attrs.send_cq.clone(),
                recv_cq: attrs.recv_cq.clone(),
                stats: ViStats::default(),
                wait_mean_ns: 0,
                holding: false,
                held: RegionsInUse::default(),
                session: session.clone(),
                granted: Vec::new(),
                peer_regions: Vec::new(),
                last_pull_seq: 0,
                _counters: counters,
            };
            let core = if attrs.send_cq.is_some() || attrs.recv_cq.is_some() {
                let shared = Arc::new(Mutex::new(core));
                for cq in [&attrs.send_cq, &attrs.recv_cq].into_iter().flatten() {
                    cq.attach(&shared);
                }
                CoreCell::Shared(shared)
            } else {
                CoreCell::Own(core)
            };
            Ok(Vi {
                session: session.clone(),
                core,
                id: vi,
                closed: false,
            })
        }
        Reply::Error(c) => Err(c.into()),
        r => Err(Error::Protocol(format!(
            "unexpected answer to {what}: {r:?}"
        ))),
    }
}

impl Session {
    /// Register `len` bytes of fresh, zeroed shared memory with the engine
    /// (VIA's `VipRegisterMem`); it counts against the process's memory
    /// quota.
    pub fn register_memory(&self, len: usize) -> Result<MemRegion, Error> {
        if len == 0 {
            return Err(Error::Config(
                "a memory region needs at least one byte".into(),
            ));
        }
        // Mapped (and its pages committed) only once the engine took it.
        let fd = Segment::create_file("unet-region", len)?;
        let req = Request::RegisterMemory { len: len as u64 };
        let (r, _) = self.inner.request_with_fds(&req, &[fd.as_raw_fd()])?;
        match r {
            Reply::MemoryRegistered { handle } => Ok(MemRegion {
                inner: Arc::new(RegionInner {
                    seg: match Segment::open(fd, len, true) {
                        Ok(seg) => seg,
                        Err(e) => {
                            let _ = self.inner.request(&Request::DeregisterMemory { handle });
                            return Err(e.into());
                        }
                    },
                    handle,
                    len,
                    session: self.clone(),
                    users: Mutex::default(),
                    gone: AtomicBool::new(false),
                    told: AtomicBool::new(false),
                    slot_hint: AtomicU64::new(0),
                }),
            }),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to register: {r:?}"
            ))),
        }
    }

    /// Accept VI connections on discriminator `tag`.
    pub fn vi_listen(&self, tag: u64) -> Result<ViServer, Error> {
        match self.inner.request(&Request::ViListen { tag })?.0 {
            Reply::Ok => Ok(ViServer {
                session: self.clone(),
                tag,
            }),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to listen: {r:?}"
            ))),
        }
    }

    /// Connect a VI of `attrs` to whoever listens on `tag` at `host`
    /// (None: this host's engine), waiting at most `timeout` for it to
    /// accept (None: the engine's longest, 60 s). Fails with
    /// `ErrorCode::Refused` if it rejects, `NoListener` if nobody listens,
    /// `NoSuchRequest` if nobody answered in time.
    pub fn vi_connect(
        &self,
        host: Option<std::net::SocketAddr>,
        tag: u64,
        attrs: &ViAttributes,
        timeout: Option<Duration>,
    ) -> Result<Vi, Error> {
        let wait = timeout.unwrap_or(Duration::from_secs(60));
        let req = Request::ViConnect {
            host,
            tag,
            attrs: attrs.params(),
            timeout_ms: wait.as_millis().clamp(1, u32::MAX as u128) as u32,
        };
        // The engine answers within `wait`; the control request may take
        // that long, and a little more.
        let (r, fds) = self
            .inner
            .request_waiting(&req, wait + Duration::from_secs(2))?;
        vi_from_reply(self, r, fds, attrs, "connect")
    }
}

/// The `ErrorCode` of an error from the engine, if it is one.
pub fn engine_code(e: &Error) -> Option<ErrorCode> {
    match e {
        Error::Engine(c) | Error::Quota(c) => Some(*c),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reference record naming `segs` (handle, length, offset).
    fn record(segs: &[(u32, u32, u64)]) -> Vec<u8> {
        let mut r = Vec::new();
        for &(h, n, off) in segs {
            r.extend_from_slice(&h.to_le_bytes());
            r.extend_from_slice(&n.to_le_bytes());
            r.extend_from_slice(&off.to_le_bytes());
        }
        r
    }

    /// A receive of two pieces (`a` bytes, then `b`) over `buf`.
    fn desc(buf: &mut [u8], a: usize, b: usize) -> Desc {
        let piece = |ptr: *mut u8, len| Piece {
            handle: 1,
            slot: 0,
            offset: 0,
            ptr,
            len,
        };
        Desc {
            id: 0,
            n: 2,
            first: piece(buf.as_mut_ptr(), a),
            more: vec![piece(buf[a..].as_mut_ptr(), b)],
            total: a + b,
            bad: false,
        }
    }

    fn pull(regions: &[(u32, Segment)], d: &Desc, rec: &[u8]) -> Result<usize, PullError> {
        // SAFETY: rec is a live slice of rec.len() bytes.
        unsafe { pull_into(regions, d, rec.as_ptr(), rec.len()) }
    }

    #[test]
    fn a_reference_record_is_gathered_from_the_peer_regions_into_the_pieces() {
        let r7 = Segment::create("t", 8192).unwrap();
        let r9 = Segment::create("t", 4096).unwrap();
        // SAFETY: fresh mappings of those sizes, written before any read.
        unsafe {
            for i in 0..8192 {
                *r7.ptr().as_ptr().add(i) = i as u8;
            }
            for i in 0..4096 {
                *r9.ptr().as_ptr().add(i) = 0xa0 ^ (i as u8);
            }
        }
        let regions = vec![(7, r7), (9, r9)];
        let mut buf = vec![0u8; 6000];
        let d = desc(&mut buf, 2500, 3500);
        // 3000 bytes from 7 at 5000, then 2000 from 9 at 100: crosses the
        // boundary between the two pieces.
        let rec = record(&[(7, 3000, 5000), (9, 2000, 100)]);
        assert!(matches!(pull(&regions, &d, &rec), Ok(5000)));
        let want: Vec<u8> = (5000..8000)
            .map(|i| i as u8)
            .chain((100..2100).map(|i| 0xa0 ^ (i as u8)))
            .collect();
        assert_eq!(&buf[..5000], &want[..]);
        assert!(
            buf[5000..].iter().all(|&b| b == 0),
            "written past the message"
        );
    }

    #[test]
    fn hostile_reference_records_are_refused_without_touching_the_receive() {
        let regions = vec![(7, Segment::create("t", 8192).unwrap())];
        let mut buf = vec![0u8; 6000];
        let d = desc(&mut buf, 3000, 3000);
        let bad = |rec: &[u8]| matches!(pull(&regions, &d, rec), Err(PullError::Bad));
        // Past the region, wrapping around, at its very end.
        assert!(bad(&record(&[(7, 100, 8100)])));
        assert!(bad(&record(&[(7, 16, u64::MAX - 8)])));
        assert!(bad(&record(&[(7, u32::MAX, 0)])));
        // Not whole segments, none, or more than a VI carries.
        assert!(bad(&record(&[(7, 10, 0)])[..15]));
        assert!(bad(&[]));
        assert!(bad(&record(&[(7, 1, 0); VI_MAX_SEGMENTS + 1])));
        // A region the peer never granted: asked for, not guessed.
        assert!(matches!(
            pull(&regions, &d, &record(&[(8, 10, 0)])),
            Err(PullError::Unknown(8))
        ));
        // More than the receive holds.
        assert!(matches!(
            pull(&regions, &d, &record(&[(7, 6001, 0)])),
            Err(PullError::TooLong)
        ));
        assert!(
            buf.iter().all(|&b| b == 0),
            "a refused record wrote the receive"
        );
        // At the very end of the region is fine.
        assert!(matches!(
            pull(&regions, &d, &record(&[(7, 92, 8100)])),
            Ok(92)
        ));
    }
}
