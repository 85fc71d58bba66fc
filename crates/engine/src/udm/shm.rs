//! A UDM job's shared memory as the engine holds it: each segment kept
//! beside its checked view ([`JobSeg`], [`NodeSeg`], views from
//! `unet_abi::view`, made once when the job's memory is made), and the
//! accesses to a message in place: the header word and words of a divert
//! ring's slot read once, a virtual buffer's slot written header last.
//!
//! `unsafe` is allowed here, and nowhere else in `udm/`: a view is made
//! over a mapping that must outlive it (a segment and its view are kept
//! together and dropped together), and a message is read from and
//! written to shared memory through raw pointers. Every function here is
//! safe to call with any argument: a slot outside its segment is not
//! touched, and a count of words is capped at `UDM_MAX_WORDS`.

#![allow(unsafe_code)]

use std::ops::Deref;

use unet_abi::ring::Ring;
use unet_abi::udm::{UdmHeader, UdmLayout, UdmMsg, UDM_MAX_WORDS};
use unet_abi::view::{UdmJobView, UdmNodeView};
use unet_sys::Segment;

/// A job segment and its view, made together and kept together: the
/// view never outlives the mapping.
pub(crate) struct JobSeg {
    seg: Segment,
    view: UdmJobView,
}

impl JobSeg {
    /// Make job `id`'s segment (geometry `layout`, engine `engine_id`):
    /// created, pre-faulted, its header written and every fast ring
    /// initialised.
    pub(crate) fn create(layout: &UdmLayout, id: u32, engine_id: u64) -> std::io::Result<JobSeg> {
        let seg = Segment::create(&format!("unet-udm-job-{id}"), layout.job_size as usize)?;
        if (seg.len() as u64) < layout.job_size {
            return Err(std::io::Error::other("job segment too small"));
        }
        // SAFETY: a fresh zeroed segment of job_size bytes (checked above),
        // not shared yet, page aligned; it lives in the JobSeg with the
        // view.
        let view = unsafe { UdmJobView::init(seg.ptr(), seg.len(), layout, id, engine_id) }
            .map_err(|e| std::io::Error::other(format!("job segment: {e}")))?;
        Ok(JobSeg { seg, view })
    }

    /// Its view.
    #[inline]
    pub(crate) fn view(&self) -> &UdmJobView {
        &self.view
    }

    /// The segment, to be unmapped (the view goes with it).
    pub(crate) fn into_segment(self) -> Segment {
        self.seg
    }
}

impl Deref for JobSeg {
    type Target = Segment;
    fn deref(&self) -> &Segment {
        &self.seg
    }
}

/// A node segment and its view, made together and kept together.
pub(crate) struct NodeSeg {
    seg: Segment,
    view: UdmNodeView,
}

impl NodeSeg {
    /// Make the segment of node `rank` of job `id`: created, its header
    /// written and its divert ring initialised.
    pub(crate) fn create(
        layout: &UdmLayout,
        id: u32,
        rank: u32,
        engine_id: u64,
    ) -> std::io::Result<NodeSeg> {
        let seg = Segment::create(
            &format!("unet-udm-node-{id}-{rank}"),
            layout.node_size as usize,
        )?;
        if (seg.len() as u64) < layout.node_size {
            return Err(std::io::Error::other("node segment too small"));
        }
        // SAFETY: as in JobSeg::create, a fresh segment of node_size bytes.
        let view = unsafe { UdmNodeView::init(seg.ptr(), seg.len(), layout, id, rank, engine_id) }
            .map_err(|e| std::io::Error::other(format!("node segment: {e}")))?;
        Ok(NodeSeg { seg, view })
    }

    /// Its view.
    #[inline]
    pub(crate) fn view(&self) -> &UdmNodeView {
        &self.view
    }

    /// The segment, to be unmapped (the view goes with it).
    pub(crate) fn into_segment(self) -> Segment {
        self.seg
    }
}

impl Deref for NodeSeg {
    type Target = Segment;
    fn deref(&self) -> &Segment {
        &self.seg
    }
}

/// The header word of the message at `pos` of `ring`, read once: a node
/// may have written anything there, so the caller checks it before use.
#[inline]
pub(super) fn header_at(ring: &Ring<UdmMsg>, pos: u64) -> UdmHeader {
    let slot = ring.slot_ptr(pos);
    // SAFETY: the slot lies in the ring (its index is masked), aligned;
    // its first 8 bytes (peer, handler, nwords) are read once.
    UdmHeader::unpack(unsafe { slot.cast::<u64>().read_volatile() })
}

/// The first `out.len()` data words (at most `UDM_MAX_WORDS`) of the
/// message at `pos` of `ring`, each read once.
#[inline]
pub(super) fn words_at(ring: &Ring<UdmMsg>, pos: u64, out: &mut [u64]) {
    let slot = ring.slot_ptr(pos);
    let n = out.len().min(UDM_MAX_WORDS);
    // SAFETY: the slot lies in the ring, aligned; n <= UDM_MAX_WORDS, so
    // the words read lie in the slot.
    unsafe {
        let w = core::ptr::addr_of!((*slot).words).cast::<u64>();
        for (i, x) in out[..n].iter_mut().enumerate() {
            *x = w.add(i).read_volatile();
        }
    }
}

/// The message slot `i` of virtual buffer `buf`, if it lies inside it.
#[inline]
fn buffer_slot(buf: &Segment, i: usize) -> Option<*mut UdmMsg> {
    let size = core::mem::size_of::<UdmMsg>();
    // A multiple of the slot size from a page-aligned base: aligned.
    buf.at(i.wrapping_mul(size), size)
        .map(|p| p.cast::<UdmMsg>().as_ptr())
}

/// Write message slot `i` of virtual buffer `buf` (nothing if it is not
/// inside it) with the message at `pos` of divert ring `ring`: its first
/// `hdr.nwords` words (at most `UDM_MAX_WORDS`), a zero stamp, and last
/// the header word `hdr`. Only the words used are copied.
#[inline]
pub(super) fn buffer_from_ring(
    buf: &Segment,
    i: usize,
    ring: &Ring<UdmMsg>,
    pos: u64,
    hdr: UdmHeader,
) {
    let Some(out) = buffer_slot(buf, i) else {
        return;
    };
    let slot = ring.slot_ptr(pos);
    let nwords = (hdr.nwords as usize).min(UDM_MAX_WORDS);
    // SAFETY: `out` is a message slot inside the buffer (checked by
    // at()), aligned, written only by the engine; `slot` is one in the
    // divert ring and nwords <= UDM_MAX_WORDS, so both word ranges lie in
    // their slots. The header goes last.
    unsafe {
        core::ptr::copy_nonoverlapping(
            core::ptr::addr_of!((*slot).words).cast::<u64>(),
            core::ptr::addr_of_mut!((*out).words).cast::<u64>(),
            nwords,
        );
        core::ptr::addr_of_mut!((*out).stamp).write_volatile(0);
        out.cast::<u64>().write_volatile(hdr.pack());
    }
}

/// Write message slot `i` of virtual buffer `buf` (nothing if it is not
/// inside it) with `words` (at most `UDM_MAX_WORDS` of them), a zero
/// stamp, and last the header word `hdr`.
#[inline]
pub(super) fn buffer_from_words(buf: &Segment, i: usize, hdr: UdmHeader, words: &[u64]) {
    let Some(out) = buffer_slot(buf, i) else {
        return;
    };
    let words = &words[..words.len().min(UDM_MAX_WORDS)];
    // SAFETY: `out` is a message slot inside the buffer (checked by
    // at()), aligned, written only by the engine; words.len() <=
    // UDM_MAX_WORDS. The header goes last.
    unsafe {
        core::ptr::copy_nonoverlapping(
            words.as_ptr(),
            core::ptr::addr_of_mut!((*out).words).cast::<u64>(),
            words.len(),
        );
        core::ptr::addr_of_mut!((*out).stamp).write_volatile(0);
        out.cast::<u64>().write_volatile(hdr.pack());
    }
}

/// Message `i` of virtual buffer `buf`, read once (None if it is not
/// inside it).
#[cfg(test)]
pub(super) fn buffered(buf: &Segment, i: usize) -> Option<UdmMsg> {
    let p = buffer_slot(buf, i)?;
    // SAFETY: inside the buffer (checked by at()), aligned.
    Some(unsafe { p.read_volatile() })
}
