//! Checked mappings of UDM's segments: [`UdmJobView`] hands out a job
//! segment's header, node lines and fast rings, [`UdmNodeView`] a node
//! segment's header and divert ring (layouts in [`crate::udm`]).
//!
//! As for an endpoint, a view is made once, when a job is made or a node
//! joins, never per message, and its constructor names the first check
//! that fails ([`LayoutError`]):
//!
//! ```text
//!  the mapping        starts on a page, holds the header
//!  the header         magic, version, header size           (from_segment)
//!                     the job's id (and the node's rank)
//!  the geometry       nodes, fast ring and buffer capacities UdmLayout allows;
//!                     the divert ring's capacity (and a node's buffer's)
//!  the segment        its size fits the mapping
//!  each part          aligned, inside the mapping
//!  the parts          no two overlap (the header is a part)
//!  the offsets        where UdmLayout puts them
//! ```
//!
//! `from_segment` reads the header a peer wrote (a node joining a job the
//! engine made); `new` maps by a layout the caller computed itself (the
//! engine); `init` lays a fresh segment out. After any of them the
//! accessors need no further check: a rank is clamped to the job's nodes
//! (as a line's always was), and every ring lies in the mapping with the
//! capacity it was made with.

use core::mem::size_of;
use core::ptr::{addr_of, NonNull};

use super::{check_canonical, check_mapping, check_spans, LayoutError, Part, Span};
use crate::ring::Ring;
use crate::udm::{
    UdmJobHeader, UdmLayout, UdmMsg, UdmNodeHeader, UdmNodeLine, UDM_DIVERT_CAP, UDM_JOB_MAGIC,
    UDM_NODE_MAGIC,
};
use crate::{ring_bytes, CACHE_LINE, PAGE, VERSION};

/// Check the identity every UDM segment header starts with (magic,
/// version, header size), each field read once, volatile.
///
/// # Safety
/// The three pointers point into a live mapping, aligned.
unsafe fn check_identity(
    magic: *const u64,
    version: *const u32,
    header_size: *const u32,
    want: u64,
) -> Result<(), LayoutError> {
    // SAFETY: the caller's contract.
    unsafe {
        let m = magic.read_volatile();
        if m != want {
            return Err(LayoutError::BadMagic(m));
        }
        let v = version.read_volatile();
        if v != VERSION {
            return Err(LayoutError::BadVersion(v));
        }
        let s = header_size.read_volatile();
        if s as usize != PAGE {
            return Err(LayoutError::BadHeaderSize(s));
        }
    }
    Ok(())
}

/// The canonical layout for `l`'s geometry.
fn canonical(l: &UdmLayout) -> Result<UdmLayout, LayoutError> {
    UdmLayout::new(l.nodes, l.fast_cap, l.buffer_size).map_err(LayoutError::Udm)
}

// -------------------------------------------------------------------------
// Job segment
// -------------------------------------------------------------------------

/// A job segment (header, node lines, fast rings), checked once.
pub struct UdmJobView {
    /// The job's layout (the canonical one for its geometry).
    pub layout: UdmLayout,
    base: NonNull<u8>,
}

// SAFETY: a view only hands out atomics, rings and a header whose shared
// words are atomics; the memory is shared memory made for concurrent use.
unsafe impl Send for UdmJobView {}
// SAFETY: as above.
unsafe impl Sync for UdmJobView {}

fn job_spans(l: &UdmLayout) -> [Span; 3] {
    let line = CACHE_LINE as u64;
    let n = l.nodes as u64;
    [
        (Part::Header, 0, PAGE as u64, PAGE as u64),
        (
            Part::NodeLines,
            l.lines_off,
            n * size_of::<UdmNodeLine>() as u64,
            line,
        ),
        (
            Part::FastRings,
            l.rings_off,
            (n * n).saturating_mul(l.ring_bytes),
            line,
        ),
    ]
}

impl UdmJobView {
    /// The view of job `job`'s segment mapped at `base` (`len` bytes), by
    /// the layout its header states: magic, version, header size and the
    /// job's id, then the geometry and every offset, against `len`.
    ///
    /// # Safety
    /// `base` must point to `len` bytes mapped readable and writable
    /// that stay mapped as long as the view and every ring taken from
    /// it.
    pub unsafe fn from_segment(
        base: NonNull<u8>,
        len: usize,
        job: u32,
    ) -> Result<UdmJobView, LayoutError> {
        check_mapping(base, len, size_of::<UdmJobHeader>())?;
        let h = base.as_ptr().cast::<UdmJobHeader>();
        // SAFETY: the header lies in the mapping (checked), page aligned;
        // each field is read once, volatile: a peer may write anything.
        let claimed = unsafe {
            check_identity(
                addr_of!((*h).magic),
                addr_of!((*h).version),
                addr_of!((*h).header_size),
                UDM_JOB_MAGIC,
            )?;
            let found = addr_of!((*h).job_id).read_volatile();
            if found != job {
                return Err(LayoutError::WrongId {
                    expected: job,
                    found,
                });
            }
            let divert_cap = addr_of!((*h).divert_cap).read_volatile();
            if divert_cap != UDM_DIVERT_CAP {
                return Err(LayoutError::BadDivertCap(divert_cap));
            }
            let buffer_cap = addr_of!((*h).buffer_cap).read_volatile();
            let geometry = UdmLayout::new(
                addr_of!((*h).nodes).read_volatile(),
                addr_of!((*h).fast_cap).read_volatile(),
                buffer_cap as u64 * size_of::<UdmMsg>() as u64,
            )
            .map_err(LayoutError::Udm)?;
            UdmLayout {
                lines_off: addr_of!((*h).lines_off).read_volatile(),
                rings_off: addr_of!((*h).rings_off).read_volatile(),
                ring_bytes: addr_of!((*h).ring_bytes).read_volatile(),
                job_size: addr_of!((*h).segment_size).read_volatile(),
                ..geometry
            }
        };
        // SAFETY: the caller's contract.
        unsafe { Self::new(base, len, &claimed) }
    }

    /// The view of the job segment mapped at `base` (`len` bytes) by
    /// `layout`, which the caller computed itself (the header is not
    /// read): the geometry and every offset, against `len`.
    ///
    /// # Safety
    /// As [`UdmJobView::from_segment`].
    pub unsafe fn new(
        base: NonNull<u8>,
        len: usize,
        layout: &UdmLayout,
    ) -> Result<UdmJobView, LayoutError> {
        check_mapping(base, len, size_of::<UdmJobHeader>())?;
        let canonical = canonical(layout)?;
        let spans = job_spans(layout);
        check_spans(layout.job_size, &spans, len)?;
        check_canonical(&spans, &job_spans(&canonical))?;
        if layout.ring_bytes != canonical.ring_bytes {
            return Err(LayoutError::NotCanonical(Part::FastRings));
        }
        Ok(UdmJobView {
            layout: canonical,
            base,
        })
    }

    /// Lay a fresh job segment out at `base` (`len` bytes, zeroed, shared
    /// with nobody yet) by `layout`: write the header's identity and
    /// geometry, initialise every fast ring's header, and return the
    /// view.
    ///
    /// # Safety
    /// As [`UdmJobView::from_segment`]; nobody else reads or writes the
    /// segment during the call.
    pub unsafe fn init(
        base: NonNull<u8>,
        len: usize,
        layout: &UdmLayout,
        job_id: u32,
        engine_id: u64,
    ) -> Result<UdmJobView, LayoutError> {
        // SAFETY: the caller's contract; `new` checks the mapping.
        let view = unsafe { Self::new(base, len, layout)? };
        // SAFETY: the header lies in the mapping (checked by `new`), page
        // aligned, private to the caller: plain field writes.
        unsafe {
            let h = base.as_ptr().cast::<UdmJobHeader>();
            (*h).magic = UDM_JOB_MAGIC;
            (*h).version = VERSION;
            (*h).header_size = PAGE as u32;
            (*h).segment_size = layout.job_size;
            (*h).job_id = job_id;
            (*h).nodes = layout.nodes;
            (*h).fast_cap = layout.fast_cap;
            (*h).buffer_cap = layout.buffer_cap;
            (*h).divert_cap = UDM_DIVERT_CAP;
            (*h).lines_off = layout.lines_off;
            (*h).rings_off = layout.rings_off;
            (*h).ring_bytes = layout.ring_bytes;
            (*h).engine_id = engine_id;
        }
        for d in 0..layout.nodes {
            for s in 0..layout.nodes {
                view.fast_ring(d, s).init(size_of::<UdmMsg>() as u32);
            }
        }
        Ok(view)
    }

    /// The job header. Its shared words (the doorbell line, the rang
    /// word) are atomics; the rest was checked when the view was made.
    #[inline]
    pub fn header(&self) -> &UdmJobHeader {
        // SAFETY: the header lies at the start of the mapping (checked),
        // page aligned; the mapping outlives the view.
        unsafe { self.base.cast::<UdmJobHeader>().as_ref() }
    }

    /// Node `rank`'s line (a rank past the job's last is its last).
    #[inline]
    pub fn line(&self, rank: u32) -> &UdmNodeLine {
        let off = self.layout.line_off(rank.min(self.layout.nodes - 1)) as usize;
        // SAFETY: the line lies inside the node lines (checked; the rank
        // is clamped to the job's nodes), cache-line aligned; its fields
        // are atomics.
        unsafe { self.base.add(off).cast::<UdmNodeLine>().as_ref() }
    }

    /// The fast ring from sender `src` to receiver `dst` (ranks past the
    /// job's last are its last). The ring must not outlive the mapping.
    #[inline]
    pub fn fast_ring(&self, dst: u32, src: u32) -> Ring<UdmMsg> {
        let last = self.layout.nodes - 1;
        let off = self.layout.ring_off(dst.min(last), src.min(last)) as usize;
        // SAFETY: the ring lies inside the fast rings (checked; ranks
        // clamped), cache-line aligned, with `fast_cap` entries (a power
        // of two); the mapping outlives it by the constructor's contract.
        unsafe { Ring::from_raw(self.base.add(off), self.layout.fast_cap) }
    }
}

// -------------------------------------------------------------------------
// Node segment
// -------------------------------------------------------------------------

/// A node segment (header, divert ring), checked once.
pub struct UdmNodeView {
    /// The job's layout (the canonical one for its geometry).
    pub layout: UdmLayout,
    base: NonNull<u8>,
}

// SAFETY: as for UdmJobView.
unsafe impl Send for UdmNodeView {}
// SAFETY: as above.
unsafe impl Sync for UdmNodeView {}

fn node_spans(l: &UdmLayout) -> [Span; 2] {
    [
        (Part::Header, 0, PAGE as u64, PAGE as u64),
        (
            Part::DivertRing,
            l.divert_off,
            ring_bytes(UDM_DIVERT_CAP, size_of::<UdmMsg>()) as u64,
            CACHE_LINE as u64,
        ),
    ]
}

impl UdmNodeView {
    /// The view of the segment of node `rank` of job `job`, mapped at
    /// `base` (`len` bytes), by the layout its header states and the
    /// job's `layout` (from its [`UdmJobView`]): magic, version, header
    /// size, the job's id and the rank, the divert ring's and the
    /// buffer's capacities, then every offset, against `len`.
    ///
    /// # Safety
    /// As [`UdmJobView::from_segment`].
    pub unsafe fn from_segment(
        base: NonNull<u8>,
        len: usize,
        layout: &UdmLayout,
        job: u32,
        rank: u32,
    ) -> Result<UdmNodeView, LayoutError> {
        check_mapping(base, len, size_of::<UdmNodeHeader>())?;
        let h = base.as_ptr().cast::<UdmNodeHeader>();
        // SAFETY: as in UdmJobView::from_segment.
        let claimed = unsafe {
            check_identity(
                addr_of!((*h).magic),
                addr_of!((*h).version),
                addr_of!((*h).header_size),
                UDM_NODE_MAGIC,
            )?;
            let found = addr_of!((*h).job_id).read_volatile();
            if found != job {
                return Err(LayoutError::WrongId {
                    expected: job,
                    found,
                });
            }
            let found = addr_of!((*h).rank).read_volatile();
            if found != rank {
                return Err(LayoutError::WrongRank {
                    expected: rank,
                    found,
                });
            }
            let divert_cap = addr_of!((*h).divert_cap).read_volatile();
            if divert_cap != UDM_DIVERT_CAP {
                return Err(LayoutError::BadDivertCap(divert_cap));
            }
            let buffer_cap = addr_of!((*h).buffer_cap).read_volatile();
            if buffer_cap != layout.buffer_cap {
                return Err(LayoutError::BadBufferCap(buffer_cap));
            }
            UdmLayout {
                divert_off: addr_of!((*h).divert_off).read_volatile(),
                node_size: addr_of!((*h).segment_size).read_volatile(),
                ..*layout
            }
        };
        // SAFETY: the caller's contract.
        unsafe { Self::new(base, len, &claimed) }
    }

    /// The view of a node segment mapped at `base` (`len` bytes) by the
    /// job's `layout`, which the caller computed itself (the header is
    /// not read): the divert ring's offset, against `len`.
    ///
    /// # Safety
    /// As [`UdmJobView::from_segment`].
    pub unsafe fn new(
        base: NonNull<u8>,
        len: usize,
        layout: &UdmLayout,
    ) -> Result<UdmNodeView, LayoutError> {
        check_mapping(base, len, size_of::<UdmNodeHeader>())?;
        let canonical = canonical(layout)?;
        let spans = node_spans(layout);
        check_spans(layout.node_size, &spans, len)?;
        check_canonical(&spans, &node_spans(&canonical))?;
        Ok(UdmNodeView {
            layout: canonical,
            base,
        })
    }

    /// Lay a fresh segment of node `rank` out at `base` (`len` bytes,
    /// zeroed, shared with nobody yet) by the job's `layout`: write the
    /// header's identity and geometry, initialise the divert ring's
    /// header, and return the view.
    ///
    /// # Safety
    /// As [`UdmJobView::init`].
    pub unsafe fn init(
        base: NonNull<u8>,
        len: usize,
        layout: &UdmLayout,
        job_id: u32,
        rank: u32,
        engine_id: u64,
    ) -> Result<UdmNodeView, LayoutError> {
        // SAFETY: the caller's contract; `new` checks the mapping.
        let view = unsafe { Self::new(base, len, layout)? };
        // SAFETY: as in UdmJobView::init.
        unsafe {
            let h = base.as_ptr().cast::<UdmNodeHeader>();
            (*h).magic = UDM_NODE_MAGIC;
            (*h).version = VERSION;
            (*h).header_size = PAGE as u32;
            (*h).segment_size = layout.node_size;
            (*h).job_id = job_id;
            (*h).rank = rank;
            (*h).divert_cap = UDM_DIVERT_CAP;
            (*h).buffer_cap = layout.buffer_cap;
            (*h).divert_off = layout.divert_off;
            (*h).engine_id = engine_id;
        }
        view.divert().init(size_of::<UdmMsg>() as u32);
        Ok(view)
    }

    /// The node header. Its shared words (the virtual buffer's
    /// positions, the counters) are atomics; the rest was checked when
    /// the view was made.
    #[inline]
    pub fn header(&self) -> &UdmNodeHeader {
        // SAFETY: as in UdmJobView::header.
        unsafe { self.base.cast::<UdmNodeHeader>().as_ref() }
    }

    /// The divert ring (node → engine). The ring must not outlive the
    /// mapping.
    #[inline]
    pub fn divert(&self) -> Ring<UdmMsg> {
        // SAFETY: the ring lies inside the mapping (checked), cache-line
        // aligned, with UDM_DIVERT_CAP entries (a power of two); the
        // mapping outlives it by the constructor's contract.
        unsafe {
            Ring::from_raw(
                self.base.add(self.layout.divert_off as usize),
                UDM_DIVERT_CAP,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::super::tests::Mem;
    use super::*;
    use crate::udm::UdmGeometryError;

    fn set<T>(m: &Mem, off: usize, v: T) {
        // SAFETY: a field of the header page, aligned for T.
        unsafe { m.field::<T>(off).write(v) }
    }

    fn layout() -> UdmLayout {
        UdmLayout::new(3, 4, 1 << 16).unwrap()
    }

    fn job() -> (Mem, UdmLayout) {
        let l = layout();
        let m = Mem::new(l.job_size as usize);
        // SAFETY: the memory is ours, job_size bytes, page aligned.
        assert!(unsafe { UdmJobView::init(m.0, m.1, &l, 9, 1) }.is_ok());
        (m, l)
    }

    fn attach_job(m: &Mem, id: u32) -> Result<UdmJobView, LayoutError> {
        // SAFETY: the memory outlives the view in each test.
        unsafe { UdmJobView::from_segment(m.0, m.1, id) }
    }

    #[test]
    fn a_good_job_segment_gives_its_lines_and_rings() {
        let (m, l) = job();
        let v = attach_job(&m, 9).unwrap();
        assert_eq!(v.layout, l);
        assert_eq!(v.header().job_id, 9);
        let r = v.fast_ring(1, 2);
        assert_eq!(r.capacity(), 4);
        // SAFETY: the ring header lies inside the memory.
        let at = unsafe { m.0.add(l.ring_off(1, 2) as usize + 128) };
        // SAFETY: as above: the ring's capacity word, set by init.
        assert_eq!(unsafe { at.cast::<u32>().read() }, 4);
        // A rank past the last is the last.
        let (a, b) = (v.line(2) as *const _, v.line(7) as *const _);
        assert_eq!(a, b);
        assert_eq!(
            v.line(1) as *const UdmNodeLine as usize - m.0.as_ptr() as usize,
            l.line_off(1) as usize
        );
    }

    #[test]
    fn each_job_check_refuses_its_own_fault() {
        let (m, l) = job();
        assert_eq!(
            attach_job(&m, 8).err(),
            Some(LayoutError::WrongId {
                expected: 8,
                found: 9
            })
        );
        set(&m, 0, 5u64);
        assert_eq!(attach_job(&m, 9).err(), Some(LayoutError::BadMagic(5)));
        set(&m, 0, UDM_JOB_MAGIC);
        set(&m, 8, 2u32);
        assert_eq!(attach_job(&m, 9).err(), Some(LayoutError::BadVersion(2)));
        set(&m, 8, VERSION);
        set(&m, 12, 64u32);
        assert_eq!(
            attach_job(&m, 9).err(),
            Some(LayoutError::BadHeaderSize(64))
        );
        set(&m, 12, PAGE as u32);
        set(&m, 0x28, 16u32);
        assert_eq!(attach_job(&m, 9).err(), Some(LayoutError::BadDivertCap(16)));
        set(&m, 0x28, UDM_DIVERT_CAP);
        set(&m, 0x1c, 65u32);
        assert_eq!(
            attach_job(&m, 9).err(),
            Some(LayoutError::Udm(UdmGeometryError::Nodes(65)))
        );
        set(&m, 0x1c, l.nodes);
        set(&m, 0x20, 3u32);
        assert_eq!(
            attach_job(&m, 9).err(),
            Some(LayoutError::Udm(UdmGeometryError::FastCap(3)))
        );
        set(&m, 0x20, l.fast_cap);
        set(&m, 0x10, l.job_size + 1);
        assert_eq!(
            attach_job(&m, 9).err(),
            Some(LayoutError::TooShort {
                len: m.1,
                need: l.job_size + 1
            })
        );
        set(&m, 0x10, l.job_size);
        set(&m, 0x30, l.lines_off + 8);
        assert_eq!(
            attach_job(&m, 9).err(),
            Some(LayoutError::Unaligned {
                part: Part::NodeLines,
                off: l.lines_off + 8
            })
        );
        set(&m, 0x30, l.lines_off);
        set(&m, 0x38, l.job_size - 64);
        assert!(matches!(
            attach_job(&m, 9).err(),
            Some(LayoutError::PastEnd {
                part: Part::FastRings,
                ..
            })
        ));
        // A ring size that would wrap: past the end, not a panic.
        set(&m, 0x38, l.rings_off);
        set(&m, 0x40, u64::MAX / 2);
        assert!(matches!(
            attach_job(&m, 9).err(),
            Some(LayoutError::PastEnd {
                part: Part::FastRings,
                ..
            })
        ));
        set(&m, 0x40, l.ring_bytes);
        set(&m, 0x30, 0u64);
        assert_eq!(
            attach_job(&m, 9).err(),
            Some(LayoutError::Overlap {
                a: Part::Header,
                b: Part::NodeLines
            })
        );
        set(&m, 0x30, l.lines_off);
        // Apart and inside, but not where the layout puts them.
        set(&m, 0x30, l.lines_off + 256);
        assert_eq!(
            attach_job(&m, 9).err(),
            Some(LayoutError::NotCanonical(Part::NodeLines))
        );
        set(&m, 0x30, l.lines_off);
        set(&m, 0x40, l.ring_bytes - 64);
        assert_eq!(
            attach_job(&m, 9).err(),
            Some(LayoutError::NotCanonical(Part::FastRings))
        );
        set(&m, 0x40, l.ring_bytes);
        assert!(attach_job(&m, 9).is_ok());
    }

    fn node(rank: u32) -> (Mem, UdmLayout) {
        let l = layout();
        let m = Mem::new(l.node_size as usize);
        // SAFETY: the memory is ours, node_size bytes, page aligned.
        assert!(unsafe { UdmNodeView::init(m.0, m.1, &l, 9, rank, 1) }.is_ok());
        (m, l)
    }

    fn attach_node(m: &Mem, l: &UdmLayout, rank: u32) -> Result<UdmNodeView, LayoutError> {
        // SAFETY: the memory outlives the view in each test.
        unsafe { UdmNodeView::from_segment(m.0, m.1, l, 9, rank) }
    }

    #[test]
    fn each_node_check_refuses_its_own_fault() {
        let (m, l) = node(2);
        let v = attach_node(&m, &l, 2).unwrap();
        assert_eq!(v.layout, l);
        assert_eq!(v.header().rank, 2);
        assert_eq!(v.divert().capacity(), UDM_DIVERT_CAP);
        assert_eq!(
            attach_node(&m, &l, 1).err(),
            Some(LayoutError::WrongRank {
                expected: 1,
                found: 2
            })
        );
        // SAFETY: the memory outlives the view.
        let other_job = unsafe { UdmNodeView::from_segment(m.0, m.1, &l, 4, 2) };
        assert_eq!(
            other_job.err(),
            Some(LayoutError::WrongId {
                expected: 4,
                found: 9
            })
        );
        set(&m, 0, UDM_JOB_MAGIC);
        assert_eq!(
            attach_node(&m, &l, 2).err(),
            Some(LayoutError::BadMagic(UDM_JOB_MAGIC))
        );
        set(&m, 0, UDM_NODE_MAGIC);
        set(&m, 0x20, 8u32);
        assert_eq!(
            attach_node(&m, &l, 2).err(),
            Some(LayoutError::BadDivertCap(8))
        );
        set(&m, 0x20, UDM_DIVERT_CAP);
        set(&m, 0x24, l.buffer_cap + 1);
        assert_eq!(
            attach_node(&m, &l, 2).err(),
            Some(LayoutError::BadBufferCap(l.buffer_cap + 1))
        );
        set(&m, 0x24, l.buffer_cap);
        set(&m, 0x10, l.node_size + 1);
        assert!(matches!(
            attach_node(&m, &l, 2).err(),
            Some(LayoutError::TooShort { .. })
        ));
        set(&m, 0x10, l.node_size);
        set(&m, 0x28, l.divert_off + 32);
        assert_eq!(
            attach_node(&m, &l, 2).err(),
            Some(LayoutError::Unaligned {
                part: Part::DivertRing,
                off: l.divert_off + 32
            })
        );
        set(&m, 0x28, l.node_size);
        assert!(matches!(
            attach_node(&m, &l, 2).err(),
            Some(LayoutError::PastEnd {
                part: Part::DivertRing,
                ..
            })
        ));
        set(&m, 0x28, 0u64);
        assert_eq!(
            attach_node(&m, &l, 2).err(),
            Some(LayoutError::Overlap {
                a: Part::Header,
                b: Part::DivertRing
            })
        );
        set(&m, 0x28, l.divert_off);
        assert!(attach_node(&m, &l, 2).is_ok());
    }

    #[test]
    fn the_engine_maps_by_its_own_layout() {
        let (m, l) = job();
        // SAFETY: the memory outlives the views.
        unsafe {
            assert!(UdmJobView::new(m.0, m.1, &l).is_ok());
            assert!(matches!(
                UdmJobView::new(m.0, m.1 - PAGE, &l).err(),
                Some(LayoutError::TooShort { .. })
            ));
            assert_eq!(
                UdmJobView::new(m.0.add(64), m.1 - 64, &l).err(),
                Some(LayoutError::Misaligned)
            );
            let bad = UdmLayout { fast_cap: 6, ..l };
            assert_eq!(
                UdmJobView::new(m.0, m.1, &bad).err(),
                Some(LayoutError::Udm(UdmGeometryError::FastCap(6)))
            );
        }
        let e = LayoutError::BadDivertCap(3);
        assert_eq!(std::format!("{e}"), "divert ring capacity 3, not 256");
    }
}
