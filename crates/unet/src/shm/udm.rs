//! A UDM node's mappings: its job's segment (the job header, every node's
//! line, the fast rings to and from this node), its own segment (its
//! header and the divert ring), both checked once by `unet_abi`'s views,
//! and its virtual buffer; and the message slots in them, read and
//! written volatile because peers write them too.

use std::marker::PhantomData;
use std::mem::size_of;
use std::ptr::NonNull;

use unet_abi::ring::Ring;
use unet_abi::udm::{
    UdmHeader, UdmJobHeader, UdmLayout, UdmMsg, UdmNodeHeader, UdmNodeLine,
    UDM_MAX_WORDS as MAX_WORDS,
};
use unet_abi::view::{LayoutError, UdmJobView, UdmNodeView};
use unet_sys::Segment;

use super::{Header, Mapped, Views};

// SAFETY: #[repr(C)] layouts of unet_abi of integers and atomics only.
unsafe impl Header for UdmJobHeader {}
// SAFETY: as above.
unsafe impl Header for UdmNodeHeader {}

/// The rings of a job's segment that one node uses, and the job's view
/// (its layout and the nodes' lines).
pub(crate) struct JobRings {
    /// Fast rings to this node, by sender.
    pub incoming: Vec<Ring<UdmMsg>>,
    /// Fast rings from this node, by receiver.
    pub outgoing: Vec<Ring<UdmMsg>>,
    view: UdmJobView,
}

/// The divert ring of a node's own segment (to the engine).
pub(crate) struct NodeRings {
    pub divert: Ring<UdmMsg>,
}

// SAFETY: rings and a view of the job segment they were made from.
unsafe impl Views for JobRings {}
// SAFETY: a ring of the node segment it was made from.
unsafe impl Views for NodeRings {}

impl Mapped<UdmJobHeader, JobRings> {
    /// Job `job`'s segment, by the layout its header states (checked by
    /// [`UdmJobView::from_segment`]), with the rings node `rank` uses (a
    /// rank past the job's last is its last: the caller checks it).
    pub fn job(seg: Segment, job: u32, rank: u32) -> Result<Self, LayoutError> {
        // SAFETY: the mapping lives in `seg`, kept beside the view and
        // every ring taken from it.
        let view = unsafe { UdmJobView::from_segment(seg.ptr(), seg.len(), job) }?;
        let n = view.layout.nodes;
        let incoming = (0..n).map(|p| view.fast_ring(rank, p)).collect();
        let outgoing = (0..n).map(|p| view.fast_ring(p, rank)).collect();
        let rings = JobRings {
            incoming,
            outgoing,
            view,
        };
        Mapped::with(seg, rings).ok_or(LayoutError::Misaligned)
    }

    /// The job's layout (the canonical one for its geometry).
    #[inline(always)]
    pub fn layout(&self) -> &UdmLayout {
        &self.view.view.layout
    }

    /// Node `r`'s line (the last node's for a rank past the end).
    #[inline(always)]
    pub fn line(&self, r: u32) -> &UdmNodeLine {
        self.view.view.line(r)
    }
}

impl Mapped<UdmNodeHeader, NodeRings> {
    /// The segment of node `rank` of job `job` with its divert ring, by
    /// the job's `layout` (checked by [`UdmNodeView::from_segment`]).
    pub fn node(
        seg: Segment,
        layout: &UdmLayout,
        job: u32,
        rank: u32,
    ) -> Result<Self, LayoutError> {
        // SAFETY: the mapping lives in `seg`, kept beside the ring.
        let view = unsafe { UdmNodeView::from_segment(seg.ptr(), seg.len(), layout, job, rank) }?;
        let divert = view.divert();
        Mapped::with(seg, NodeRings { divert }).ok_or(LayoutError::Misaligned)
    }
}

/// A node's virtual buffer: a ring of `size` bytes of records (a header
/// word, then the message's words) the engine fills, read only here.
pub(crate) struct Buffer {
    seg: Segment,
    size: u64,
}

impl Buffer {
    /// `seg` as a buffer of `size` bytes (a power of two, at least 8), if
    /// they lie inside it.
    pub fn new(seg: Segment, size: u64) -> Option<Buffer> {
        (size >= 8 && size.is_power_of_two() && size <= seg.len() as u64)
            .then_some(Buffer { seg, size })
    }

    /// Its size in bytes.
    #[inline(always)]
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The record at byte position `pos` (relative to the buffer's base).
    #[inline(always)]
    pub fn record(&self, pos: u64) -> Slot<'_> {
        // A power of two (checked in `new`): a mask, not a division.
        let at = pos & (self.size - 1) & !7;
        // At most MAX_WORDS words, and none past the buffer's end.
        let room = ((self.size - at) / 8 - 1).min(MAX_WORDS as u64) as usize;
        // SAFETY: at + 8 <= size (at a multiple of 8 below size), inside
        // the mapping (checked in `new`); 8-aligned from a page-aligned
        // base.
        let p = unsafe { self.seg.ptr().add(at as usize).cast::<u64>() };
        Slot {
            p,
            words: 1,
            room,
            _life: PhantomData,
        }
    }

    /// The mapped segment.
    pub fn segment(&self) -> &Segment {
        &self.seg
    }
}

/// The words of a message to write: at most [`MAX_WORDS`] (checked once,
/// by [`Words::new`]).
#[derive(Clone, Copy)]
pub(crate) struct Words<'a>(&'a [u64]);

impl<'a> Words<'a> {
    /// `w`, if it has at most [`MAX_WORDS`] words.
    #[inline(always)]
    pub fn new(w: &'a [u64]) -> Option<Self> {
        (w.len() <= MAX_WORDS).then_some(Words(w))
    }

    /// The words.
    #[inline(always)]
    pub fn get(self) -> &'a [u64] {
        self.0
    }
}

/// One message slot of a ring (a [`UdmMsg`]: header, stamp, words) or
/// one record of the virtual buffer (header, words), mapped for `'a`.
#[derive(Clone, Copy)]
pub(crate) struct Slot<'a> {
    /// Its first word (the header).
    p: NonNull<u64>,
    /// Where its words start, in words from `p`.
    words: usize,
    /// The most words that lie inside it.
    room: usize,
    _life: PhantomData<&'a UdmMsg>,
}

impl<'a> Slot<'a> {
    /// The slot of position `pos` in `ring`.
    #[inline(always)]
    pub fn of(ring: &'a Ring<UdmMsg>, pos: u64) -> Slot<'a> {
        // SAFETY: slot_ptr is a slot of the ring, whose memory stays
        // mapped as long as the ring (Ring::from_raw's contract), which
        // the borrow keeps.
        let p = unsafe { NonNull::new_unchecked(ring.slot_ptr(pos).cast::<u64>()) };
        Slot {
            p,
            words: size_of::<UdmMsg>() / 8 - MAX_WORDS,
            room: MAX_WORDS,
            _life: PhantomData,
        }
    }

    /// The header word (peer, handler, nwords), read once, volatile (a
    /// peer may write anything there).
    #[inline(always)]
    pub fn header(self) -> u64 {
        // SAFETY: the first word of a slot or record inside a mapping
        // kept for 'a (the first 8 bytes of a UdmMsg are its header,
        // asserted in udm.rs).
        unsafe { self.p.as_ptr().read_volatile() }
    }

    /// The stamp word of a ring's slot (a fast message's count of the
    /// messages its sender diverted to this receiver before it), read
    /// once, volatile.
    #[inline(always)]
    pub fn stamp(self) -> u64 {
        debug_assert_eq!(self.words, 2);
        // SAFETY: the second word of a ring's slot (UdmMsg::stamp, at 8;
        // a slot's words start after it, so it lies inside it).
        unsafe { self.p.as_ptr().add(1).read_volatile() }
    }

    /// The message, copied volatile: its header's fields and its words
    /// (as many as the header says, at most [`MAX_WORDS`]).
    #[inline(always)]
    pub fn read(self) -> UdmMsg {
        let h = UdmHeader::unpack(self.header());
        let mut m = UdmMsg {
            peer: h.peer,
            handler: h.handler,
            nwords: h.nwords,
            ..UdmMsg::default()
        };
        let n = (h.nwords as usize).min(MAX_WORDS);
        self.read_words(&mut m.words[..n]);
        m
    }

    /// Copy the first `out.len()` words (at most [`MAX_WORDS`], and no
    /// more than lie inside the slot) into `out`. A peer writing
    /// concurrently only changes the values read.
    #[inline(always)]
    pub fn read_words(self, out: &mut [u64]) {
        let n = out.len().min(self.room);
        // SAFETY: n <= room words from `words` lie in the slot or record
        // (Slot::of, Buffer::record); out has at least n.
        unsafe {
            std::ptr::copy_nonoverlapping(self.p.as_ptr().add(self.words), out.as_mut_ptr(), n)
        };
    }

    /// Write `words` and the `stamp` first, then the header word `hdr` in
    /// one store, into a ring's slot, which must be ours until we
    /// publish it.
    #[inline(always)]
    pub fn write(self, hdr: u64, stamp: u64, words: Words<'_>) {
        debug_assert_eq!(self.words, 2);
        let words = words.get();
        let n = words.len().min(self.room);
        let p = self.p.as_ptr();
        // SAFETY: a ring's slot inside a mapping kept for 'a; n <= room
        // words fit it after the header and the stamp.
        unsafe {
            std::ptr::copy_nonoverlapping(words.as_ptr(), p.add(self.words), n);
            p.add(1).write_volatile(stamp);
            p.write_volatile(hdr);
        }
    }
}
