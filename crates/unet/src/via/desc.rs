//! Descriptors and completions: what a post and a completion say
//! ([`ViCompletion`], [`ViQueue`], [`ViState`], the errors), a posted
//! descriptor resolved into pieces of its regions, the completions waiting
//! to be taken, and reading a large message from the peer's regions.
//!
//! `unsafe` is allowed here: a resolved descriptor holds raw pointers into
//! the registered regions it names (kept mapped while it is posted), and
//! messages are scattered into and gathered from them with byte copies at
//! lengths checked when the descriptor was posted.

use std::sync::Arc;

use unet_abi::{ViError, VI_MAX_SEGMENTS, VI_REF_SEGMENT};
use unet_control::{Reply, Request};
use unet_sys::Segment;

use crate::fifo::Fifo;
use crate::session::Inner;
use crate::shm::Bytes;
use crate::Session;

use super::region::{RegionsInUse, ViSeg};

/// The completion of a descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViCompletion {
    /// The number the descriptor was posted with.
    pub id: u64,
    /// `Ok` with the message length (for a send, the bytes sent), or why
    /// it failed.
    pub status: Result<usize, ViError>,
}

/// Which queue of a VI completed, in a [`CompletionQueue`](super::CompletionQueue).
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
pub(super) struct Piece {
    /// The region's handle and the offset in it (what the engine is told).
    pub(super) handle: u32,
    /// The region's slot in the VI's [`RegionsInUse`].
    pub(super) slot: u16,
    pub(super) offset: usize,
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
}

// SAFETY: `ptr` points into a region whose mapping the VI's RegionsInUse
// keeps alive while the descriptor is posted; the bytes are shared memory
// reached with byte copies only.
unsafe impl Send for Piece {}

impl Piece {
    /// Its bytes, to send.
    #[inline(always)]
    pub(super) fn bytes(&self) -> Bytes<'_> {
        // SAFETY: `len` bytes at `ptr` inside the region (checked when
        // posted), which the VI holds while the descriptor is posted, and
        // so for as long as this borrow of the descriptor.
        unsafe { Bytes::new(self.ptr, self.len) }
    }
}

/// A send in the ring that the receiver has not placed yet (reliable
/// reception on the direct path).
#[derive(Clone, Copy, Default)]
pub(super) struct Unplaced {
    pub(super) id: u64,
    pub(super) total: usize,
    /// Its message number: placed once the receiver's count reaches it.
    pub(super) seq: u64,
    /// The slots (in the VI's [`RegionsInUse`]) of the regions a pulled
    /// send's data lies in, held until the receiver has read it.
    pub(super) slots: [u16; VI_MAX_SEGMENTS],
    pub(super) nslots: u8,
}

impl Unplaced {
    /// A new last entry of `q`, holding no regions yet. Written field by
    /// field into its slot: made on the stack and copied in whole, it was
    /// read back with loads wider than the stores that made it (a
    /// store-forwarding stall at every large send).
    #[inline(always)]
    pub(super) fn push(q: &mut Fifo<Unplaced>, id: u64, total: usize, seq: u64) -> &mut Unplaced {
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
pub(super) struct Done {
    pub(super) id: u64,
    pub(super) len: usize,
    /// The `ViError` code, 0 for success.
    pub(super) err: u32,
}

impl Done {
    #[inline(always)]
    pub(super) fn set(&mut self, c: ViCompletion) {
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
    pub(super) fn get(&self) -> ViCompletion {
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
pub(super) const QUEUE_START: usize = 64;

/// Sends of at least this many bytes on a local VI are read by the
/// receiver straight from the sender's region (one copy) instead of being
/// copied into the ring and out again.
pub const PULL_MIN: usize = 2048;

pub(super) fn pull_min() -> usize {
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
pub(super) fn grant(
    granted: &mut Vec<(u32, bool)>,
    session: &Session,
    vi: u32,
    handle: u32,
) -> bool {
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
pub(super) const PEER_REGIONS_MAX: usize = 64;

/// Why a reference record could not be read into a receive.
pub(super) enum PullError {
    /// The peer's region is not mapped here yet.
    Unknown(u32),
    /// The data is larger than the receive: how large.
    TooLong,
    /// The record is malformed or names memory outside its region.
    Bad,
}

/// Copy the message a reference record (`src`) names in the peer's
/// regions `regions` into the pieces of `d`; its length.
pub(super) fn pull_into(
    regions: &[(u32, Segment)],
    d: &Desc,
    src: Bytes<'_>,
) -> Result<usize, PullError> {
    let len = src.len();
    if len == 0 || !len.is_multiple_of(VI_REF_SEGMENT) || len / VI_REF_SEGMENT > VI_MAX_SEGMENTS {
        return Err(PullError::Bad);
    }
    let mut rec = [0u8; VI_MAX_SEGMENTS * VI_REF_SEGMENT];
    // SAFETY: src has len readable bytes (Bytes), and len fits rec
    // (checked). Copied once: the peer may change the ring.
    unsafe { unet_abi::copy::copy_bytes(src.as_ptr(), rec.as_mut_ptr(), len) };
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
pub(super) struct Desc {
    pub(super) id: u64,
    /// Pieces resolved (the first in `first`, the rest in `more`).
    pub(super) n: u8,
    pub(super) first: Piece,
    more: Vec<Piece>,
    pub(super) total: usize,
    /// Why the descriptor is bad, found when it was posted.
    pub(super) bad: bool,
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
    pub(super) fn fill(
        &mut self,
        id: u64,
        segs: &[ViSeg<'_>],
        session: &Arc<Inner>,
        held: &mut RegionsInUse,
    ) {
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
    pub(super) fn pieces(&self) -> impl Iterator<Item = &Piece> {
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

    /// Copy `src` into the pieces in order; false (nothing copied) if it
    /// is longer than `total`.
    #[inline(always)]
    pub(super) fn scatter(&self, src: Bytes<'_>) -> bool {
        let len = src.len();
        if len > self.total {
            return false;
        }
        let src = src.as_ptr();
        if self.n == 1 {
            // SAFETY: as below, for the one piece (len <= total = its len).
            unsafe { unet_abi::copy::copy_bytes(src, self.first.ptr, len) };
            return true;
        }
        let mut at = 0;
        for p in self.pieces() {
            if at == len {
                break;
            }
            let n = p.len.min(len - at);
            // SAFETY: src has len readable bytes (Bytes); the piece has
            // p.len writable bytes in its region, which the VI holds while
            // the descriptor is posted; n fits both.
            unsafe { unet_abi::copy::copy_bytes(src.add(at), p.ptr, n) };
            at += n;
        }
        true
    }
}

/// Releasing what a descriptor held lives beside the descriptor, so that
/// `region` needs nothing of this file.
impl RegionsInUse {
    /// The pieces of `d` are done with: their regions are kept, unused,
    /// once no other descriptor uses them.
    #[inline(always)]
    pub(super) fn release(&mut self, d: &Desc) {
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
        pull_into(regions, d, Bytes::of(rec))
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
