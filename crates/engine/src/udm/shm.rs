//! A UDM job's shared memory as the engine holds it: each segment kept
//! beside its checked view ([`JobSeg`], [`NodeSeg`], views from
//! `unet_abi::view`, made once when the job's memory is made), and the
//! accesses to a message in place: the header word and words of a divert
//! ring's slot read once, a virtual buffer's record written header last.
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
use unet_abi::udm::{UdmHeader, UdmLayout, UdmMsg, UDM_MAX_WORDS, UDM_PAD};
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

/// The record of `nwords` words at byte offset `off` of virtual buffer
/// `buf` (its header word, then the words), if it lies inside it.
#[inline]
fn buffer_record(buf: &Segment, off: usize, nwords: usize) -> Option<*mut u64> {
    // Offsets are multiples of 8 from a page-aligned base: aligned.
    if !off.is_multiple_of(8) {
        return None;
    }
    buf.at(off, 8 * (1 + nwords))
        .map(|p| p.cast::<u64>().as_ptr())
}

/// Write the record at byte offset `off` of virtual buffer `buf`
/// (nothing if it is not inside it) with the message at `pos` of divert
/// ring `ring`: its first `hdr.nwords` words (at most `UDM_MAX_WORDS`),
/// then the header word `hdr`. Only the words used are copied.
#[inline]
pub(super) fn buffer_from_ring(
    buf: &Segment,
    off: usize,
    ring: &Ring<UdmMsg>,
    pos: u64,
    hdr: UdmHeader,
) {
    let nwords = (hdr.nwords as usize).min(UDM_MAX_WORDS);
    let Some(out) = buffer_record(buf, off, nwords) else {
        return;
    };
    let slot = ring.slot_ptr(pos);
    // SAFETY: `out` is a record of nwords words inside the buffer
    // (checked by at()), aligned, written only by the engine; `slot` is
    // one in the divert ring and nwords <= UDM_MAX_WORDS, so both word
    // ranges lie in their places. The header goes last.
    unsafe {
        core::ptr::copy_nonoverlapping(
            core::ptr::addr_of!((*slot).words).cast::<u64>(),
            out.add(1),
            nwords,
        );
        out.write_volatile(
            UdmHeader {
                nwords: nwords as u16,
                ..hdr
            }
            .pack(),
        );
    }
}

/// Write the record at byte offset `off` of virtual buffer `buf`
/// (nothing if it is not inside it) with `words` (at most
/// `UDM_MAX_WORDS` of them), then the header word `hdr`.
#[inline]
pub(super) fn buffer_from_words(buf: &Segment, off: usize, hdr: UdmHeader, words: &[u64]) {
    let words = &words[..words.len().min(UDM_MAX_WORDS)];
    let Some(out) = buffer_record(buf, off, words.len()) else {
        return;
    };
    // SAFETY: `out` is a record of words.len() words inside the buffer
    // (checked by at()), aligned, written only by the engine. The header
    // goes last.
    unsafe {
        core::ptr::copy_nonoverlapping(words.as_ptr(), out.add(1), words.len());
        let hdr = UdmHeader {
            nwords: words.len() as u16,
            ..hdr
        };
        out.write_volatile(hdr.pack());
    }
}

/// Write a pad record at byte offset `off` of virtual buffer `buf`: the
/// rest of the buffer holds nothing, the next record is at its start.
#[inline]
pub(super) fn buffer_pad(buf: &Segment, off: usize) {
    let Some(out) = buffer_record(buf, off, 0) else {
        return;
    };
    let hdr = UdmHeader {
        peer: 0,
        handler: 0,
        nwords: UDM_PAD,
    };
    // SAFETY: a word inside the buffer (checked by at()), aligned,
    // written only by the engine.
    unsafe { out.write_volatile(hdr.pack()) };
}

/// The record at byte offset `off` of virtual buffer `buf`, read once
/// (None if it is not inside it): its header and words.
#[cfg(test)]
pub(super) fn buffered(buf: &Segment, off: usize) -> Option<(UdmHeader, Vec<u64>)> {
    let p = buffer_record(buf, off, 0)?;
    // SAFETY: inside the buffer (checked by at()), aligned.
    let hdr = UdmHeader::unpack(unsafe { p.read_volatile() });
    if hdr.nwords == UDM_PAD {
        return Some((hdr, Vec::new()));
    }
    let n = (hdr.nwords as usize).min(UDM_MAX_WORDS);
    let p = buffer_record(buf, off, n)?;
    // SAFETY: n words inside the buffer (checked by at()).
    let words = (0..n)
        .map(|i| unsafe { p.add(1 + i).read_volatile() })
        .collect();
    Some((hdr, words))
}
