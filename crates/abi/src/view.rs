//! Checked mappings of a segment's rings: [`EndpointView`] hands out the
//! four rings and the buffer area of an endpoint segment, [`ViView`] the
//! four queues of a VI segment, [`ConnView`] (in [`conn`]) the header
//! lines and the two rings of a direct connection's segment, and
//! [`UdmJobView`] and [`UdmNodeView`] (in [`udm`]) the lines and rings of
//! UDM's job and node segments.
//!
//! A view is made once, when a segment is created or attached, never per
//! message. Its constructor checks everything the rings rely on against
//! the mapping's length, in this order, and names the first check that
//! fails ([`LayoutError`]):
//!
//! ```text
//!  the mapping        starts on a page, holds the header
//!  the header         magic, version, header size          (from_segment)
//!  the geometry       capacities and sizes the ABI allows
//!  the segment        its size fits the mapping
//!  each part          aligned, inside the mapping
//!  the parts          no two overlap (the header is a part)
//!  the offsets        where this version of the ABI puts them
//! ```
//!
//! `from_segment` reads the header a peer wrote (a client attaching to
//! what the engine made); `new` maps by a layout the caller computed
//! itself (the engine, which never trusts the header of a segment it
//! shares). After either, ring accesses need no further check: every
//! ring lies in the mapping with the capacity it was made with.

use core::mem::size_of;
use core::ptr::{addr_of, NonNull};

use crate::ring::Ring;
use crate::udm::UdmGeometryError;
use crate::{
    ring_bytes, EndpointHeader, EventDesc, Geometry, GeometryError, Layout, RecvDesc, Reliability,
    SendDesc, ViCompl, ViDesc, ViHeader, ViLayout, CACHE_LINE, ENDPOINT_HEADER_SIZE,
    ENDPOINT_MAGIC, PAGE, VERSION, VI_HEADER_SIZE, VI_MAGIC,
};

pub mod conn;
pub mod udm;
pub use conn::{ConnSide, ConnView, Side};
pub use udm::{UdmJobView, UdmNodeView};

/// A part of a segment, as a [`LayoutError`] names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The header page.
    Header,
    /// An endpoint's send ring.
    Send,
    /// An endpoint's receive ring.
    Recv,
    /// An endpoint's free ring.
    Free,
    /// An endpoint's event ring.
    Event,
    /// An endpoint's buffer area.
    BufferArea,
    /// A VI's send queue.
    SendQueue,
    /// A VI's receive queue.
    RecvQueue,
    /// A VI's send completion ring.
    SendCompletions,
    /// A VI's receive completion ring.
    RecvCompletions,
    /// A UDM job's node lines.
    NodeLines,
    /// A UDM job's fast rings (all of them, one part).
    FastRings,
    /// A UDM node's divert ring.
    DivertRing,
    /// A direct connection's ring from side A to side B.
    RingAToB,
    /// A direct connection's ring from side B to side A.
    RingBToA,
}

impl Part {
    /// A short name (`send ring`, `buffer area`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Part::Header => "header",
            Part::Send => "send ring",
            Part::Recv => "receive ring",
            Part::Free => "free ring",
            Part::Event => "event ring",
            Part::BufferArea => "buffer area",
            Part::SendQueue => "send queue",
            Part::RecvQueue => "receive queue",
            Part::SendCompletions => "send completion ring",
            Part::RecvCompletions => "receive completion ring",
            Part::NodeLines => "node lines",
            Part::FastRings => "fast rings",
            Part::DivertRing => "divert ring",
            Part::RingAToB => "ring A→B",
            Part::RingBToA => "ring B→A",
        }
    }
}

/// Why a segment was refused as a view: one variant per check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// The mapping does not start on a page.
    Misaligned,
    /// The mapping is shorter than the header, or than the segment.
    TooShort {
        /// Bytes mapped.
        len: usize,
        /// Bytes needed.
        need: u64,
    },
    /// The header's magic is not this kind of segment's.
    BadMagic(u64),
    /// The header's version is not [`VERSION`].
    BadVersion(u32),
    /// The header's `header_size` is not this kind of segment's.
    BadHeaderSize(u32),
    /// The header names another object than the one expected (a VI's
    /// id, a UDM job's id).
    WrongId {
        /// The id asked for.
        expected: u32,
        /// The id in the header.
        found: u32,
    },
    /// A UDM node segment's header names another rank than the one
    /// expected.
    WrongRank {
        /// The rank asked for.
        expected: u32,
        /// The rank in the header.
        found: u32,
    },
    /// An endpoint's geometry is not one the ABI allows.
    Geometry(GeometryError),
    /// A UDM job's geometry is not one the ABI allows.
    Udm(UdmGeometryError),
    /// A UDM header's divert ring capacity is not `UDM_DIVERT_CAP`.
    BadDivertCap(u32),
    /// A UDM node header's virtual buffer capacity is not its job's.
    BadBufferCap(u32),
    /// A VI's ring capacity is not a power of two in 2..=65536.
    BadCapacity(u32),
    /// A direct connection's ring size is not a power of two of at least
    /// a page.
    BadRingSize(u32),
    /// A part does not start at its alignment (a cache line for rings, a
    /// page for the buffer area).
    Unaligned {
        /// The part.
        part: Part,
        /// Its offset.
        off: u64,
    },
    /// A part ends past the end of the mapping.
    PastEnd {
        /// The part.
        part: Part,
        /// Its offset.
        off: u64,
        /// Its size.
        size: u64,
        /// Bytes mapped.
        len: usize,
    },
    /// Two parts overlap.
    Overlap {
        /// The first part.
        a: Part,
        /// The second part.
        b: Part,
    },
    /// Every part fits, apart, but not where this version of the ABI puts
    /// it.
    NotCanonical(Part),
}

impl From<GeometryError> for LayoutError {
    fn from(e: GeometryError) -> Self {
        LayoutError::Geometry(e)
    }
}

impl core::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::Misaligned => f.write_str("the mapping does not start on a page"),
            Self::TooShort { len, need } => {
                write!(f, "too small: {len} bytes mapped, {need} needed")
            }
            Self::BadMagic(m) => write!(f, "bad magic {m:#018x}"),
            Self::BadVersion(v) => write!(f, "version {v}, not {VERSION}"),
            Self::BadHeaderSize(s) => write!(f, "bad header size {s}"),
            Self::WrongId { expected, found } => {
                write!(f, "the header names {found}, not {expected}")
            }
            Self::WrongRank { expected, found } => {
                write!(f, "the header names rank {found}, not {expected}")
            }
            Self::Geometry(e) => write!(f, "{e}"),
            Self::Udm(e) => write!(f, "{e}"),
            Self::BadDivertCap(c) => {
                write!(
                    f,
                    "divert ring capacity {c}, not {}",
                    crate::udm::UDM_DIVERT_CAP
                )
            }
            Self::BadBufferCap(c) => write!(f, "virtual buffer of {c} messages, not the job's"),
            Self::BadCapacity(c) => {
                write!(f, "ring capacity {c} is not a power of two in 2..=65536")
            }
            Self::BadRingSize(r) => {
                write!(f, "ring size {r} is not a power of two of at least {PAGE}")
            }
            Self::Unaligned { part, off } => {
                write!(f, "{} at {off:#x} is not aligned", part.name())
            }
            Self::PastEnd {
                part,
                off,
                size,
                len,
            } => write!(
                f,
                "{} at {off:#x} ({size} bytes) ends past the mapping's {len} bytes",
                part.name()
            ),
            Self::Overlap { a, b } => write!(f, "{} overlaps {}", a.name(), b.name()),
            Self::NotCanonical(p) => write!(f, "{} is not where the layout puts it", p.name()),
        }
    }
}

/// One part to check: what, where, how long, aligned to what.
type Span = (Part, u64, u64, u64);

/// The segment checks after the header's: `segment_size` fits the
/// mapping; each part is aligned and inside it; no two overlap.
fn check_spans(segment_size: u64, spans: &[Span], len: usize) -> Result<(), LayoutError> {
    if segment_size > len as u64 {
        return Err(LayoutError::TooShort {
            len,
            need: segment_size,
        });
    }
    for &(part, off, size, align) in spans {
        if !off.is_multiple_of(align) {
            return Err(LayoutError::Unaligned { part, off });
        }
        if off.checked_add(size).is_none_or(|end| end > len as u64) {
            return Err(LayoutError::PastEnd {
                part,
                off,
                size,
                len,
            });
        }
    }
    for (i, &(a, a_off, a_size, _)) in spans.iter().enumerate() {
        for &(b, b_off, b_size, _) in &spans[i + 1..] {
            if a_off < b_off + b_size && b_off < a_off + a_size {
                return Err(LayoutError::Overlap { a, b });
            }
        }
    }
    Ok(())
}

/// The first part whose offset differs between `spans` and `canonical`.
fn check_canonical(spans: &[Span], canonical: &[Span]) -> Result<(), LayoutError> {
    match spans.iter().zip(canonical).find(|(s, c)| s.1 != c.1) {
        Some((s, _)) => Err(LayoutError::NotCanonical(s.0)),
        None => Ok(()),
    }
}

/// The mapping starts on a page and holds `header` bytes.
fn check_mapping(base: NonNull<u8>, len: usize, header: usize) -> Result<(), LayoutError> {
    if !(base.as_ptr() as usize).is_multiple_of(PAGE) {
        return Err(LayoutError::Misaligned);
    }
    if len < header {
        return Err(LayoutError::TooShort {
            len,
            need: header as u64,
        });
    }
    Ok(())
}

// -------------------------------------------------------------------------
// Endpoint
// -------------------------------------------------------------------------

/// The rings and buffer area of an endpoint segment, checked once.
pub struct EndpointView {
    /// The segment's layout (the canonical one for its geometry).
    pub layout: Layout,
    /// The send ring (client → engine).
    pub send: Ring<SendDesc>,
    /// The receive ring (engine → client).
    pub recv: Ring<RecvDesc>,
    /// The free ring (client → engine, and the client's direct path).
    pub free: Ring<u32>,
    /// The event ring (engine → client).
    pub events: Ring<EventDesc>,
    /// The start of the buffer area (`layout.geometry.buffer_area_size`
    /// bytes).
    pub buffer_area: NonNull<u8>,
}

fn endpoint_spans(l: &Layout) -> [Span; 6] {
    let g = &l.geometry;
    let line = CACHE_LINE as u64;
    let ring = |cap: u32, es: usize| ring_bytes(cap, es) as u64;
    [
        (Part::Header, 0, ENDPOINT_HEADER_SIZE as u64, PAGE as u64),
        (
            Part::Send,
            l.send_off,
            ring(g.send_cap, size_of::<SendDesc>()),
            line,
        ),
        (
            Part::Recv,
            l.recv_off,
            ring(g.recv_cap, size_of::<RecvDesc>()),
            line,
        ),
        (
            Part::Free,
            l.free_off,
            ring(g.free_cap, size_of::<u32>()),
            line,
        ),
        (
            Part::Event,
            l.event_off,
            ring(g.event_cap, size_of::<EventDesc>()),
            line,
        ),
        (
            Part::BufferArea,
            l.buffer_area_off,
            g.buffer_area_size,
            PAGE as u64,
        ),
    ]
}

impl EndpointView {
    /// The view of the endpoint segment mapped at `base` (`len` bytes),
    /// by the layout its header states: magic, version and header size,
    /// then the geometry and every offset, against `len`.
    ///
    /// # Safety
    /// `base` must point to `len` bytes mapped readable and writable
    /// that stay mapped as long as the view and every ring taken from
    /// it.
    pub unsafe fn from_segment(base: NonNull<u8>, len: usize) -> Result<EndpointView, LayoutError> {
        check_mapping(base, len, ENDPOINT_HEADER_SIZE)?;
        let h = base.as_ptr().cast::<EndpointHeader>();
        // SAFETY: the header lies in the mapping (checked), page aligned;
        // each field is read once, volatile: a peer may write anything.
        let claimed = unsafe {
            let magic = addr_of!((*h).magic).read_volatile();
            if magic != ENDPOINT_MAGIC {
                return Err(LayoutError::BadMagic(magic));
            }
            let version = addr_of!((*h).version).read_volatile();
            if version != VERSION {
                return Err(LayoutError::BadVersion(version));
            }
            let header_size = addr_of!((*h).header_size).read_volatile();
            if header_size as usize != ENDPOINT_HEADER_SIZE {
                return Err(LayoutError::BadHeaderSize(header_size));
            }
            Layout {
                geometry: Geometry {
                    buffer_size: addr_of!((*h).buffer_size).read_volatile(),
                    buffer_area_size: addr_of!((*h).buffer_area_size).read_volatile(),
                    send_cap: addr_of!((*h).send_cap).read_volatile(),
                    recv_cap: addr_of!((*h).recv_cap).read_volatile(),
                    free_cap: addr_of!((*h).free_cap).read_volatile(),
                    event_cap: addr_of!((*h).event_cap).read_volatile(),
                },
                send_off: addr_of!((*h).send_off).read_volatile(),
                recv_off: addr_of!((*h).recv_off).read_volatile(),
                free_off: addr_of!((*h).free_off).read_volatile(),
                event_off: addr_of!((*h).event_off).read_volatile(),
                buffer_area_off: addr_of!((*h).buffer_area_off).read_volatile(),
                segment_size: addr_of!((*h).segment_size).read_volatile(),
            }
        };
        // SAFETY: the caller's contract.
        unsafe { Self::new(base, len, &claimed) }
    }

    /// The view of the endpoint segment mapped at `base` (`len` bytes)
    /// by `layout`, which the caller computed itself (the header is not
    /// read): the geometry and every offset, against `len`.
    ///
    /// # Safety
    /// As [`EndpointView::from_segment`].
    pub unsafe fn new(
        base: NonNull<u8>,
        len: usize,
        layout: &Layout,
    ) -> Result<EndpointView, LayoutError> {
        check_mapping(base, len, ENDPOINT_HEADER_SIZE)?;
        let canonical = Layout::new(layout.geometry)?;
        let spans = endpoint_spans(layout);
        check_spans(layout.segment_size, &spans, len)?;
        check_canonical(&spans, &endpoint_spans(&canonical))?;
        let g = &layout.geometry;
        // SAFETY: every ring lies inside the mapping at a cache-line
        // aligned offset, apart from the others, with its capacity (a
        // power of two) (all checked above); the mapping outlives the
        // rings by the caller's contract.
        unsafe {
            let at = |off: u64| base.add(off as usize);
            Ok(EndpointView {
                layout: canonical,
                send: Ring::from_raw(at(layout.send_off), g.send_cap),
                recv: Ring::from_raw(at(layout.recv_off), g.recv_cap),
                free: Ring::from_raw(at(layout.free_off), g.free_cap),
                events: Ring::from_raw(at(layout.event_off), g.event_cap),
                buffer_area: at(layout.buffer_area_off),
            })
        }
    }

    /// Lay a fresh endpoint segment out at `base` (`len` bytes, zeroed,
    /// shared with nobody yet) by `layout`: write the header's identity
    /// and geometry, initialise the four ring headers, and return the
    /// view.
    ///
    /// # Safety
    /// As [`EndpointView::from_segment`]; nobody else reads or writes the
    /// segment during the call.
    pub unsafe fn init(
        base: NonNull<u8>,
        len: usize,
        layout: &Layout,
        endpoint_id: u32,
        engine_id: u64,
    ) -> Result<EndpointView, LayoutError> {
        // SAFETY: the caller's contract; `new` checks the mapping.
        let view = unsafe { Self::new(base, len, layout)? };
        let (l, g) = (layout, &layout.geometry);
        // SAFETY: the header lies in the mapping (checked by `new`), page
        // aligned, private to the caller: plain field writes.
        unsafe {
            let h = base.as_ptr().cast::<EndpointHeader>();
            (*h).magic = ENDPOINT_MAGIC;
            (*h).version = VERSION;
            (*h).header_size = ENDPOINT_HEADER_SIZE as u32;
            (*h).segment_size = l.segment_size;
            (*h).endpoint_id = endpoint_id;
            (*h).buffer_size = g.buffer_size;
            (*h).send_cap = g.send_cap;
            (*h).recv_cap = g.recv_cap;
            (*h).free_cap = g.free_cap;
            (*h).event_cap = g.event_cap;
            (*h).send_off = l.send_off;
            (*h).recv_off = l.recv_off;
            (*h).free_off = l.free_off;
            (*h).event_off = l.event_off;
            (*h).buffer_area_off = l.buffer_area_off;
            (*h).buffer_area_size = g.buffer_area_size;
            (*h).engine_id = engine_id;
        }
        view.send.init(size_of::<SendDesc>() as u32);
        view.recv.init(size_of::<RecvDesc>() as u32);
        view.free.init(4);
        view.events.init(size_of::<EventDesc>() as u32);
        Ok(view)
    }
}

// -------------------------------------------------------------------------
// VI
// -------------------------------------------------------------------------

/// The four queues of a VI segment, checked once.
pub struct ViView {
    /// The segment's layout (the canonical one for its capacity).
    pub layout: ViLayout,
    /// The send queue (client → engine).
    pub sq: Ring<ViDesc>,
    /// The receive queue (client → engine).
    pub rq: Ring<ViDesc>,
    /// The send completions (engine → client).
    pub scq: Ring<ViCompl>,
    /// The receive completions (engine → client).
    pub rcq: Ring<ViCompl>,
}

fn vi_spans(l: &ViLayout) -> [Span; 5] {
    let line = CACHE_LINE as u64;
    let d = ring_bytes(l.cap, size_of::<ViDesc>()) as u64;
    let c = ring_bytes(l.cap, size_of::<ViCompl>()) as u64;
    [
        (Part::Header, 0, VI_HEADER_SIZE as u64, PAGE as u64),
        (Part::SendQueue, l.sq_off, d, line),
        (Part::RecvQueue, l.rq_off, d, line),
        (Part::SendCompletions, l.scq_off, c, line),
        (Part::RecvCompletions, l.rcq_off, c, line),
    ]
}

impl ViView {
    /// The view of VI `vi`'s segment mapped at `base` (`len` bytes), by
    /// the layout its header states: magic, version, header size and id,
    /// then the capacity and every offset, against `len`.
    ///
    /// # Safety
    /// As [`EndpointView::from_segment`].
    pub unsafe fn from_segment(
        base: NonNull<u8>,
        len: usize,
        vi: u32,
    ) -> Result<ViView, LayoutError> {
        check_mapping(base, len, VI_HEADER_SIZE)?;
        let h = base.as_ptr().cast::<ViHeader>();
        // SAFETY: the header lies in the mapping (checked), page aligned;
        // each field is read once, volatile: a peer may write anything.
        let claimed = unsafe {
            let magic = addr_of!((*h).magic).read_volatile();
            if magic != VI_MAGIC {
                return Err(LayoutError::BadMagic(magic));
            }
            let version = addr_of!((*h).version).read_volatile();
            if version != VERSION {
                return Err(LayoutError::BadVersion(version));
            }
            let header_size = addr_of!((*h).header_size).read_volatile();
            if header_size as usize != VI_HEADER_SIZE {
                return Err(LayoutError::BadHeaderSize(header_size));
            }
            let found = addr_of!((*h).vi_id).read_volatile();
            if found != vi {
                return Err(LayoutError::WrongId {
                    expected: vi,
                    found,
                });
            }
            ViLayout {
                cap: addr_of!((*h).queue_cap).read_volatile(),
                sq_off: addr_of!((*h).sq_off).read_volatile(),
                rq_off: addr_of!((*h).rq_off).read_volatile(),
                scq_off: addr_of!((*h).scq_off).read_volatile(),
                rcq_off: addr_of!((*h).rcq_off).read_volatile(),
                segment_size: addr_of!((*h).segment_size).read_volatile(),
            }
        };
        // SAFETY: the caller's contract.
        unsafe { Self::new(base, len, &claimed) }
    }

    /// The view of the VI segment mapped at `base` (`len` bytes) by
    /// `layout`, which the caller computed itself (the header is not
    /// read): the capacity and every offset, against `len`.
    ///
    /// # Safety
    /// As [`EndpointView::from_segment`].
    pub unsafe fn new(
        base: NonNull<u8>,
        len: usize,
        layout: &ViLayout,
    ) -> Result<ViView, LayoutError> {
        check_mapping(base, len, VI_HEADER_SIZE)?;
        let canonical = ViLayout::new(layout.cap).ok_or(LayoutError::BadCapacity(layout.cap))?;
        let spans = vi_spans(layout);
        check_spans(layout.segment_size, &spans, len)?;
        check_canonical(&spans, &vi_spans(&canonical))?;
        // SAFETY: every ring lies inside the mapping at a cache-line
        // aligned offset, apart from the others, with `cap` entries (a
        // power of two) (all checked above); the mapping outlives the
        // rings by the caller's contract.
        unsafe {
            let at = |off: u64| base.add(off as usize);
            Ok(ViView {
                layout: canonical,
                sq: Ring::from_raw(at(layout.sq_off), layout.cap),
                rq: Ring::from_raw(at(layout.rq_off), layout.cap),
                scq: Ring::from_raw(at(layout.scq_off), layout.cap),
                rcq: Ring::from_raw(at(layout.rcq_off), layout.cap),
            })
        }
    }

    /// Lay a fresh segment of VI `vi_id` out at `base` (`len` bytes,
    /// zeroed, shared with nobody yet) by `layout`: write the header's
    /// identity, level and geometry, initialise the four ring headers,
    /// and return the view.
    ///
    /// # Safety
    /// As [`EndpointView::init`].
    pub unsafe fn init(
        base: NonNull<u8>,
        len: usize,
        layout: &ViLayout,
        vi_id: u32,
        reliability: Reliability,
        strict_rnr: bool,
        engine_id: u64,
    ) -> Result<ViView, LayoutError> {
        // SAFETY: the caller's contract; `new` checks the mapping.
        let view = unsafe { Self::new(base, len, layout)? };
        // SAFETY: the header lies in the mapping (checked by `new`), page
        // aligned, private to the caller: plain field writes.
        unsafe {
            let h = base.as_ptr().cast::<ViHeader>();
            (*h).magic = VI_MAGIC;
            (*h).version = VERSION;
            (*h).header_size = VI_HEADER_SIZE as u32;
            (*h).segment_size = layout.segment_size;
            (*h).vi_id = vi_id;
            (*h).reliability = reliability as u8;
            (*h).strict_rnr = strict_rnr as u8;
            (*h).queue_cap = layout.cap;
            (*h).sq_off = layout.sq_off;
            (*h).rq_off = layout.rq_off;
            (*h).scq_off = layout.scq_off;
            (*h).rcq_off = layout.rcq_off;
            (*h).engine_id = engine_id;
        }
        view.sq.init(size_of::<ViDesc>() as u32);
        view.rq.init(size_of::<ViDesc>() as u32);
        view.scq.init(size_of::<ViCompl>() as u32);
        view.rcq.init(size_of::<ViCompl>() as u32);
        Ok(view)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::golden::{GOLDEN_GEOMETRY, GOLDEN_LEN};
    use std::alloc::{alloc_zeroed, dealloc, Layout as Alloc};

    /// Zeroed, page-aligned memory.
    pub(super) struct Mem(pub(super) NonNull<u8>, pub(super) usize);
    impl Mem {
        pub(super) fn new(len: usize) -> Mem {
            let a = Alloc::from_size_align(len, PAGE).unwrap();
            // SAFETY: a non-zero size.
            Mem(NonNull::new(unsafe { alloc_zeroed(a) }).unwrap(), len)
        }
        pub(super) fn field<T>(&self, off: usize) -> *mut T {
            // SAFETY: the tests write fields of the header page only.
            unsafe { self.0.as_ptr().add(off).cast() }
        }
    }
    impl Drop for Mem {
        fn drop(&mut self) {
            // SAFETY: allocated in new with this layout.
            unsafe {
                dealloc(
                    self.0.as_ptr(),
                    Alloc::from_size_align(self.1, PAGE).unwrap(),
                )
            }
        }
    }

    fn endpoint() -> (Mem, Layout) {
        let l = Layout::new(GOLDEN_GEOMETRY).unwrap();
        let m = Mem::new(GOLDEN_LEN);
        // SAFETY: the memory is ours, GOLDEN_LEN bytes, page aligned.
        assert!(unsafe { EndpointView::init(m.0, m.1, &l, 7, 1) }.is_ok());
        (m, l)
    }

    fn attach(m: &Mem) -> Result<EndpointView, LayoutError> {
        // SAFETY: the memory outlives the view in each test.
        unsafe { EndpointView::from_segment(m.0, m.1) }
    }

    fn set<T>(m: &Mem, off: usize, v: T) {
        // SAFETY: a field of the header page, aligned for T.
        unsafe { m.field::<T>(off).write(v) }
    }

    #[test]
    fn a_good_endpoint_segment_gives_its_rings() {
        let (m, l) = endpoint();
        let v = attach(&m).unwrap();
        assert_eq!(v.layout, l);
        assert_eq!(v.send.capacity(), GOLDEN_GEOMETRY.send_cap);
        assert_eq!(v.events.capacity(), GOLDEN_GEOMETRY.event_cap);
        // SAFETY: an offset inside the mapping.
        assert_eq!(v.buffer_area, unsafe {
            m.0.add(l.buffer_area_off as usize)
        });
    }

    #[test]
    fn each_endpoint_check_refuses_its_own_fault() {
        let (m, l) = endpoint();
        set(&m, 0, 0x1234u64);
        assert_eq!(attach(&m).err(), Some(LayoutError::BadMagic(0x1234)));
        set(&m, 0, ENDPOINT_MAGIC);
        set(&m, 8, 9u32);
        assert_eq!(attach(&m).err(), Some(LayoutError::BadVersion(9)));
        set(&m, 8, VERSION);
        set(&m, 12, 64u32);
        assert_eq!(attach(&m).err(), Some(LayoutError::BadHeaderSize(64)));
        set(&m, 12, ENDPOINT_HEADER_SIZE as u32);
        set(&m, 0x24, 3u32);
        assert_eq!(
            attach(&m).err(),
            Some(LayoutError::Geometry(GeometryError::BadRingCapacity(3)))
        );
        set(&m, 0x24, l.geometry.send_cap);
        set(&m, 0x10, GOLDEN_LEN as u64 + 1);
        assert_eq!(
            attach(&m).err(),
            Some(LayoutError::TooShort {
                len: GOLDEN_LEN,
                need: GOLDEN_LEN as u64 + 1
            })
        );
        set(&m, 0x10, l.segment_size);
        set(&m, 0x50, l.event_off + 8);
        assert_eq!(
            attach(&m).err(),
            Some(LayoutError::Unaligned {
                part: Part::Event,
                off: l.event_off + 8
            })
        );
        // An offset past the end.
        set(&m, 0x50, GOLDEN_LEN as u64 - 64);
        assert!(matches!(
            attach(&m).err(),
            Some(LayoutError::PastEnd {
                part: Part::Event,
                ..
            })
        ));
        set(&m, 0x50, u64::MAX - 63);
        assert!(matches!(
            attach(&m).err(),
            Some(LayoutError::PastEnd {
                part: Part::Event,
                ..
            })
        ));
        set(&m, 0x50, l.event_off);
        // Overlapping rings; and a ring over the header.
        set(&m, 0x40, l.send_off + 64);
        assert_eq!(
            attach(&m).err(),
            Some(LayoutError::Overlap {
                a: Part::Send,
                b: Part::Recv
            })
        );
        set(&m, 0x40, 0u64);
        assert_eq!(
            attach(&m).err(),
            Some(LayoutError::Overlap {
                a: Part::Header,
                b: Part::Recv
            })
        );
        set(&m, 0x40, l.recv_off);
        assert!(attach(&m).is_ok());
        // Apart and inside, but not where the layout puts them.
        let (m2, _) = endpoint();
        set(&m2, 0x48, l.event_off);
        set(&m2, 0x50, l.free_off);
        assert_eq!(
            attach(&m2).err(),
            Some(LayoutError::NotCanonical(Part::Free))
        );
    }

    #[test]
    fn the_mapping_is_checked_first() {
        let (m, l) = endpoint();
        // SAFETY: a shorter length of the same memory.
        let short = unsafe { EndpointView::from_segment(m.0, 100) };
        assert_eq!(
            short.err(),
            Some(LayoutError::TooShort {
                len: 100,
                need: 4096
            })
        );
        // SAFETY: a cache line in, the rest still inside the memory.
        let off = unsafe { EndpointView::new(m.0.add(64), m.1 - 64, &l) };
        assert_eq!(off.err(), Some(LayoutError::Misaligned));
        // SAFETY: the whole memory, by the engine's own layout.
        let short = unsafe { EndpointView::new(m.0, m.1 - PAGE, &l) };
        assert!(matches!(short.err(), Some(LayoutError::TooShort { .. })));
    }

    fn vi(id: u32) -> (Mem, ViLayout) {
        let l = ViLayout::new(8).unwrap();
        let m = Mem::new(l.segment_size as usize);
        set(&m, 0, VI_MAGIC);
        set(&m, 8, VERSION);
        set(&m, 12, VI_HEADER_SIZE as u32);
        set(&m, 0x10, l.segment_size);
        set(&m, 0x18, id);
        set(&m, 0x20, l.cap);
        set(&m, 0x28, l.sq_off);
        set(&m, 0x30, l.rq_off);
        set(&m, 0x38, l.scq_off);
        set(&m, 0x40, l.rcq_off);
        (m, l)
    }

    fn attach_vi(m: &Mem, id: u32) -> Result<ViView, LayoutError> {
        // SAFETY: the memory outlives the view in each test.
        unsafe { ViView::from_segment(m.0, m.1, id) }
    }

    #[test]
    fn a_vi_segment_laid_out_by_init_is_accepted() {
        let l = ViLayout::new(8).unwrap();
        let m = Mem::new(l.segment_size as usize);
        // SAFETY: the memory is ours, segment_size bytes, page aligned.
        let made = unsafe { ViView::init(m.0, m.1, &l, 3, Reliability::ReliableDelivery, true, 1) };
        assert!(made.is_ok());
        let v = attach_vi(&m, 3).unwrap();
        assert_eq!(v.layout, l);
        assert_eq!(v.sq.capacity(), 8);
    }

    #[test]
    fn each_vi_check_refuses_its_own_fault() {
        let (m, l) = vi(5);
        let v = attach_vi(&m, 5).unwrap();
        assert_eq!(v.layout, l);
        assert_eq!(v.rcq.capacity(), 8);
        assert_eq!(
            attach_vi(&m, 6).err(),
            Some(LayoutError::WrongId {
                expected: 6,
                found: 5
            })
        );
        set(&m, 0, 1u64);
        assert_eq!(attach_vi(&m, 5).err(), Some(LayoutError::BadMagic(1)));
        set(&m, 0, VI_MAGIC);
        set(&m, 8, 2u32);
        assert_eq!(attach_vi(&m, 5).err(), Some(LayoutError::BadVersion(2)));
        set(&m, 8, VERSION);
        set(&m, 0x20, 6u32);
        assert_eq!(attach_vi(&m, 5).err(), Some(LayoutError::BadCapacity(6)));
        set(&m, 0x20, l.cap);
        set(&m, 0x40, l.segment_size);
        assert!(matches!(
            attach_vi(&m, 5).err(),
            Some(LayoutError::PastEnd {
                part: Part::RecvCompletions,
                ..
            })
        ));
        set(&m, 0x40, l.scq_off);
        assert_eq!(
            attach_vi(&m, 5).err(),
            Some(LayoutError::Overlap {
                a: Part::SendCompletions,
                b: Part::RecvCompletions
            })
        );
        set(&m, 0x40, l.rcq_off);
        assert!(attach_vi(&m, 5).is_ok());
    }

    #[test]
    fn errors_say_which_check_failed() {
        let e = LayoutError::Overlap {
            a: Part::Send,
            b: Part::Recv,
        };
        assert_eq!(std::format!("{e}"), "send ring overlaps receive ring");
        assert_eq!(
            std::format!("{}", LayoutError::BadVersion(2)),
            "version 2, not 1"
        );
    }
}
