//! The applet heap: arrays behind integer handles, a quota, and a small
//! mark-sweep collector.
//!
//! A reference in a frame slot or field is an `i32`: `0` is `null`, a
//! positive value `h` names entry `h - 1` of the array table, and
//! [`THIS`] is the applet instance (which has no array storage: its fields
//! live in the VM). Handles of freed arrays are reused; host-side
//! [`ArrayRef`]s carry a generation so a stale one is detected.
//!
//! Collection roots are the applet's fields. When an allocation would exceed
//! the quota during an invocation, the collector also scans the slots of
//! every live frame that the frame's method wrote (`decode::roots`: the
//! same slots, with the same values, interpreted or compiled), as values
//! (any one that is a valid handle keeps that array alive): this can only
//! retain extra arrays, never free a live one. The VM collects at the end
//! of every host invocation that allocated.
//!
//! Every array's elements start on an [`ARRAY_ALIGN`]-byte boundary
//! ([`Elems`]), so where an array falls in a cache line does not depend on
//! what the allocator handed out before it.

use std::alloc::{self, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use crate::fault::Fault;
use crate::model::Elem;

/// The value of the applet instance reference (`this`) in slots.
pub const THIS: i32 = -1;
/// Bytes charged per array besides its elements.
pub const ARRAY_HEADER_BYTES: usize = 16;

/// A host-side reference to an array of the VM's heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArrayRef {
    pub(crate) handle: i32,
    pub(crate) gen: u32,
}

impl ArrayRef {
    /// The handle value as the applet sees it (pass it in `invoke` args).
    pub fn handle(self) -> i32 {
        self.handle
    }
}

/// Where every array's elements start: a multiple of this many bytes (a
/// cache line).
pub const ARRAY_ALIGN: usize = 64;

/// One cache line: its alignment gives empty arrays an aligned address.
#[repr(C, align(64))]
struct Line([u8; ARRAY_ALIGN]);

mod sealed {
    /// An element type of a JVM array whose all-zero bit pattern is a
    /// valid value (zero).
    pub trait Zeroable: Copy {}
    impl Zeroable for i8 {}
    impl Zeroable for i16 {}
    impl Zeroable for i32 {}
}

/// The elements of one array: `len` values of `T` from an address that is
/// a multiple of [`ARRAY_ALIGN`], allocated zeroed with exactly
/// `len * size_of::<T>()` bytes (what the quota charges). Read and written
/// as a slice; never resized.
pub struct Elems<T: sealed::Zeroable> {
    ptr: NonNull<T>,
    len: usize,
}

impl<T: sealed::Zeroable> Elems<T> {
    /// The layout of `len` elements, `None` if it is too large to exist.
    fn layout(len: usize) -> Option<Layout> {
        let size = len.checked_mul(std::mem::size_of::<T>())?;
        Layout::from_size_align(size, ARRAY_ALIGN).ok()
    }

    /// `len` zeroed elements, `None` if their size cannot be laid out.
    fn zeroed(len: usize) -> Option<Elems<T>> {
        let layout = Self::layout(len)?;
        if layout.size() == 0 {
            return Some(Elems {
                ptr: NonNull::<Line>::dangling().cast::<T>(),
                len,
            });
        }
        // SAFETY: `layout` has a non-zero size (checked above).
        #[allow(unsafe_code)]
        let p = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = match NonNull::new(p.cast::<T>()) {
            Some(ptr) => ptr,
            None => alloc::handle_alloc_error(layout),
        };
        Some(Elems { ptr, len })
    }
}

impl Elems<i32> {
    /// The `int[]` elements of `words` (the same bits), made anywhere (on
    /// a thread of the host's) and handed to a VM's heap whole with
    /// [`crate::Vm::adopt_ints`]; `None` if their size cannot be laid out.
    pub fn from_words(words: &[u32]) -> Option<Elems<i32>> {
        let mut e = Elems::zeroed(words.len())?;
        for (d, &w) in e.iter_mut().zip(words) {
            *d = w as i32;
        }
        Some(e)
    }
}

impl<T: sealed::Zeroable> Deref for Elems<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` is aligned for `T` (ARRAY_ALIGN is a multiple of
        // its size) and, when `len > 0`, is this value's own allocation of
        // `len` initialised (zeroed, `Zeroable`) elements; when `len == 0`
        // it is non-null and dangling, which an empty slice allows. The
        // borrow of `self` keeps the allocation alive and unshared.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts(self.ptr.as_ptr(), self.len)
        }
    }
}

impl<T: sealed::Zeroable> DerefMut for Elems<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`; the mutable borrow of `self` makes this
        // the only reference to the elements while it lives.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len)
        }
    }
}

impl<T: sealed::Zeroable> Drop for Elems<T> {
    fn drop(&mut self) {
        match Self::layout(self.len) {
            Some(layout) if layout.size() > 0 => {
                // SAFETY: `ptr` was allocated by `zeroed` with this same
                // layout (a function of `len`, which never changes) and is
                // freed only here.
                #[allow(unsafe_code)]
                unsafe {
                    alloc::dealloc(self.ptr.as_ptr().cast::<u8>(), layout)
                }
            }
            _ => {}
        }
    }
}

impl<T: sealed::Zeroable> Clone for Elems<T> {
    fn clone(&self) -> Elems<T> {
        match Self::zeroed(self.len) {
            Some(mut c) => {
                c.copy_from_slice(self);
                c
            }
            // Never: `self` was laid out with this same length.
            None => alloc::handle_alloc_error(Layout::new::<Line>()),
        }
    }
}

impl<T: sealed::Zeroable + std::fmt::Debug> std::fmt::Debug for Elems<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

// SAFETY: an `Elems` owns its elements alone (as a `Vec` does) and they are
// plain integers: moving it to another thread moves that ownership.
#[allow(unsafe_code)]
unsafe impl<T: sealed::Zeroable + Send> Send for Elems<T> {}
// SAFETY: shared access only reads the elements (through `&[T]`), as for a
// `Vec`.
#[allow(unsafe_code)]
unsafe impl<T: sealed::Zeroable + Sync> Sync for Elems<T> {}

/// Storage of one array.
#[derive(Clone, Debug)]
pub enum ArrayData {
    /// A free table entry.
    Free,
    /// `byte[]`.
    B(Elems<i8>),
    /// `boolean[]`.
    Z(Elems<i8>),
    /// `short[]`.
    S(Elems<i16>),
    /// `int[]`.
    I(Elems<i32>),
}

impl ArrayData {
    /// Element count.
    pub fn len(&self) -> usize {
        match self {
            ArrayData::Free => 0,
            ArrayData::B(v) | ArrayData::Z(v) => v.len(),
            ArrayData::S(v) => v.len(),
            ArrayData::I(v) => v.len(),
        }
    }
    /// True if empty (or free).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Element kind, `None` if free.
    pub fn elem(&self) -> Option<Elem> {
        match self {
            ArrayData::Free => None,
            ArrayData::B(_) => Some(Elem::Byte),
            ArrayData::Z(_) => Some(Elem::Bool),
            ArrayData::S(_) => Some(Elem::Short),
            ArrayData::I(_) => Some(Elem::Int),
        }
    }
    fn bytes(&self) -> usize {
        ARRAY_HEADER_BYTES + self.elem().map_or(0, |e| e.size() * self.len())
    }
}

/// Where compiled code finds one array (see [`Heap::raw`]): the address and
/// length of its elements and its kind (`RAW_*`). `#[repr(C)]`: generated
/// code reads the fields at fixed offsets (0, 8, 12).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawArr {
    pub addr: usize,
    pub len: u32,
    pub kind: u32,
}

pub(crate) const RAW_FREE: u32 = 0;
pub(crate) const RAW_B: u32 = 1;
pub(crate) const RAW_Z: u32 = 2;
pub(crate) const RAW_S: u32 = 3;
pub(crate) const RAW_I: u32 = 4;

impl RawArr {
    const FREE: RawArr = RawArr {
        addr: 0,
        len: 0,
        kind: RAW_FREE,
    };

    fn of(a: &mut ArrayData) -> RawArr {
        let (addr, len, kind) = match a {
            ArrayData::Free => return RawArr::FREE,
            ArrayData::B(v) => (v.as_mut_ptr() as usize, v.len(), RAW_B),
            ArrayData::Z(v) => (v.as_mut_ptr() as usize, v.len(), RAW_Z),
            ArrayData::S(v) => (v.as_mut_ptr() as usize, v.len(), RAW_S),
            ArrayData::I(v) => (v.as_mut_ptr() as usize, v.len(), RAW_I),
        };
        RawArr {
            addr,
            len: len as u32,
            kind,
        }
    }
}

/// The array heap of one VM.
#[derive(Debug)]
pub struct Heap {
    /// The arrays. An array's element vector is never resized or replaced
    /// while it is live (only allocation and collection change entries),
    /// so that [`Heap::raw`] stays true.
    pub(crate) arrays: Vec<ArrayData>,
    /// Per entry of `arrays`, where its elements are: compiled code reads
    /// and writes arrays through this table without a call (after checking
    /// kind and bounds against it). Kept in step by `alloc` and `collect`.
    pub(crate) raw: Vec<RawArr>,
    gens: Vec<u32>,
    free: Vec<u32>,
    used: usize,
    quota: usize,
    /// Allocations since the last collection.
    pub(crate) allocs_since_gc: usize,
    marks: Vec<bool>,
    /// Bytes lent to a `byte[]` for the running invocation (see
    /// [`crate::lend`]), until [`Heap::settle_lent`] or the host ends the
    /// loan.
    pub(crate) lent: Option<Lent>,
}

/// Bytes a host lent to a `byte[]` ([`crate::Vm::lend_bytes`]): the array
/// named by `handle` reads as `len` bytes at `src` in their place, up to
/// `len`. `src` is an address (the host keeps it valid while the loan
/// lasts), so that the heap stays `Send`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lent {
    pub handle: i32,
    pub src: usize,
    pub len: usize,
}

impl Heap {
    /// An empty heap with `quota` bytes.
    pub fn new(quota: usize) -> Heap {
        Heap {
            arrays: Vec::new(),
            raw: Vec::new(),
            gens: Vec::new(),
            free: Vec::new(),
            used: 0,
            quota,
            allocs_since_gc: 0,
            marks: Vec::new(),
            lent: None,
        }
    }

    /// End a loan ([`Lent`]) by copying the lent bytes into their array,
    /// as the host would have before the invocation: for anything that
    /// reads or writes the array other than the compiled fast cases that
    /// read the loan in place. True if there was a loan.
    #[inline]
    pub(crate) fn settle_lent(&mut self) -> bool {
        let Some(l) = self.lent.take() else {
            return false;
        };
        if let Some(ArrayData::B(v)) = self.get_mut(l.handle) {
            if let Some(dst) = v.get_mut(..l.len) {
                // SAFETY: the host that lent `src` keeps `len` bytes there
                // valid for reads until the loan ends (`Vm::lend_bytes`),
                // and they are not the heap's: `dst` is an array's own
                // allocation.
                #[allow(unsafe_code)]
                unsafe {
                    std::ptr::copy_nonoverlapping(l.src as *const i8, dst.as_mut_ptr(), l.len)
                };
            }
        }
        true
    }

    /// Bytes held by live arrays (headers included).
    pub fn used(&self) -> usize {
        self.used
    }

    /// The quota in bytes.
    pub fn quota(&self) -> usize {
        self.quota
    }

    /// Change the quota: allocations from now on are checked against it
    /// (arrays already allocated stay).
    pub fn set_quota(&mut self, quota: usize) {
        self.quota = quota;
    }

    /// Number of arrays currently allocated.
    pub fn live_arrays(&self) -> usize {
        self.arrays.len() - self.free.len()
    }

    /// Allocate a zeroed array without collecting. `len` must be >= 0.
    pub fn alloc(&mut self, elem: Elem, len: i32) -> Result<i32, Fault> {
        if len < 0 {
            return Err(Fault::NegativeArraySize(len));
        }
        let n = len as usize;
        let bytes = ARRAY_HEADER_BYTES + n * elem.size();
        if self.used + bytes > self.quota {
            return Err(Fault::HeapQuotaExceeded {
                requested: bytes,
                quota: self.quota,
            });
        }
        let data = match elem {
            Elem::Byte => Elems::zeroed(n).map(ArrayData::B),
            Elem::Bool => Elems::zeroed(n).map(ArrayData::Z),
            Elem::Short => Elems::zeroed(n).map(ArrayData::S),
            Elem::Int => Elems::zeroed(n).map(ArrayData::I),
        };
        // Within the quota, the size always has a layout.
        let Some(data) = data else {
            return Err(Fault::HeapQuotaExceeded {
                requested: bytes,
                quota: self.quota,
            });
        };
        self.insert(data, bytes)
    }

    /// Take `elems`, made elsewhere, as a new `int[]` (charged to the
    /// quota as an allocation of its length; no collection happens here):
    /// its handle. The elements are not copied.
    pub fn adopt_ints(&mut self, elems: Elems<i32>) -> Result<i32, Fault> {
        let bytes = ARRAY_HEADER_BYTES + elems.len() * Elem::Int.size();
        if self.used + bytes > self.quota || elems.len() > i32::MAX as usize {
            return Err(Fault::HeapQuotaExceeded {
                requested: bytes,
                quota: self.quota,
            });
        }
        self.insert(ArrayData::I(elems), bytes)
    }

    /// Put `data`, of `bytes` charged, in a free entry or a new one.
    fn insert(&mut self, data: ArrayData, bytes: usize) -> Result<i32, Fault> {
        let idx = match self.free.pop() {
            Some(i) => {
                self.arrays[i as usize] = data;
                self.raw[i as usize] = RawArr::of(&mut self.arrays[i as usize]);
                i as usize
            }
            None => {
                if self.arrays.len() >= i32::MAX as usize - 1 {
                    return Err(Fault::HeapQuotaExceeded {
                        requested: bytes,
                        quota: self.quota,
                    });
                }
                self.arrays.push(data);
                let last = self.arrays.len() - 1;
                self.raw.push(RawArr::of(&mut self.arrays[last]));
                self.gens.push(0);
                self.arrays.len() - 1
            }
        };
        self.used += bytes;
        self.allocs_since_gc += 1;
        Ok(idx as i32 + 1)
    }

    /// The array named by handle `h`, if it is live.
    #[inline(always)]
    pub fn get(&self, h: i32) -> Option<&ArrayData> {
        match self.arrays.get((h as u32 as usize).wrapping_sub(1)) {
            Some(ArrayData::Free) | None => None,
            Some(a) => Some(a),
        }
    }

    /// Mutable access to the array named by handle `h`, if it is live. Its
    /// elements may change; the vector must not be resized or replaced
    /// (see `Heap::raw`).
    #[inline(always)]
    pub(crate) fn get_mut(&mut self, h: i32) -> Option<&mut ArrayData> {
        match self.arrays.get_mut((h as u32 as usize).wrapping_sub(1)) {
            Some(ArrayData::Free) | None => None,
            Some(a) => Some(a),
        }
    }

    /// A host reference for live handle `h`.
    pub fn array_ref(&self, h: i32) -> Option<ArrayRef> {
        self.get(h)?;
        let gen = self.gens[(h - 1) as usize];
        Some(ArrayRef { handle: h, gen })
    }

    /// The handle of a host reference, if it is still live.
    pub fn check_ref(&self, a: ArrayRef) -> Option<i32> {
        self.get(a.handle)?;
        (self.gens[(a.handle - 1) as usize] == a.gen).then_some(a.handle)
    }

    /// Cost in fuel of a collection during an invocation that scans
    /// `slots` frame slots, `roots` other roots and this heap's table of
    /// arrays: one unit per [`crate::limits::GC_WORDS_PER_FUEL`] words, at
    /// least one (the interpreter and compiled code charge it alike).
    #[inline]
    pub(crate) fn gc_cost(&self, roots: usize, slots: usize) -> i64 {
        let words = (slots + roots + self.arrays.len()) as u64;
        (1 + words / crate::limits::GC_WORDS_PER_FUEL).min(i64::MAX as u64) as i64
    }

    /// Mark from `roots` (handles; other values ignored) and free the rest.
    pub fn collect(&mut self, roots: impl Iterator<Item = i32>) {
        self.marks.clear();
        self.marks.resize(self.arrays.len(), false);
        for h in roots {
            let i = (h as u32 as usize).wrapping_sub(1);
            if i < self.marks.len() {
                self.marks[i] = true;
            }
        }
        for i in 0..self.arrays.len() {
            if !self.marks[i] && !matches!(self.arrays[i], ArrayData::Free) {
                self.used -= self.arrays[i].bytes();
                self.arrays[i] = ArrayData::Free;
                self.raw[i] = RawArr::FREE;
                self.gens[i] = self.gens[i].wrapping_add(1);
                self.free.push(i as u32);
            }
        }
        self.allocs_since_gc = 0;
    }
}

/// The fault of an array access through `h` when `h` is no live array of
/// the kind wanted: null, or (never after verification) another handle.
pub(crate) fn arr_fault(h: i32) -> Fault {
    if h == 0 {
        Fault::NullPointer
    } else {
        Fault::Internal(format!("handle {h} is not an array of the expected kind"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Elements laid out on another thread are taken whole: the same
    /// values, charged as an allocation of their length, refused past the
    /// quota (nothing charged then).
    #[test]
    fn adopted_ints_keep_their_values_and_are_charged() {
        let words: Vec<u32> = (0..1000u32).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
        let e = std::thread::spawn(move || Elems::from_words(&words).expect("laid out"))
            .join()
            .expect("the thread");
        let mut heap = Heap::new(ARRAY_HEADER_BYTES + 4000);
        let h = heap.adopt_ints(e).expect("within the quota");
        assert_eq!(heap.used(), ARRAY_HEADER_BYTES + 4000);
        match heap.get(h) {
            Some(ArrayData::I(v)) => {
                assert_eq!(v.len(), 1000);
                assert_eq!(v[7] as u32, 7u32.wrapping_mul(0x9e37_79b9));
            }
            other => panic!("not an int[]: {other:?}"),
        }
        let more = Elems::from_words(&[1]).expect("laid out");
        assert!(matches!(
            heap.adopt_ints(more),
            Err(Fault::HeapQuotaExceeded { .. })
        ));
        assert_eq!(heap.used(), ARRAY_HEADER_BYTES + 4000);
    }

    /// Every array's elements start on a cache line, whatever came before
    /// it, and the quota charges the header plus exactly the elements.
    #[test]
    fn elements_start_on_a_cache_line_and_are_charged_exactly() {
        let mut heap = Heap::new(1 << 20);
        let mut charged = 0;
        for (k, elem) in [Elem::Byte, Elem::Bool, Elem::Short, Elem::Int]
            .into_iter()
            .cycle()
            .take(64)
            .enumerate()
        {
            let len = (k * 7 % 23) as i32;
            let h = heap.alloc(elem, len).unwrap();
            charged += ARRAY_HEADER_BYTES + len as usize * elem.size();
            assert_eq!(heap.used(), charged);
            let raw = heap.raw[(h - 1) as usize];
            assert_eq!(raw.addr % ARRAY_ALIGN, 0, "array {k} ({elem:?}[{len}])");
            assert_eq!(raw.len, len as u32);
            let a = heap.get(h).unwrap();
            assert_eq!(a.len(), len as usize);
            assert_eq!(a.elem(), Some(elem));
            let addr = match a {
                ArrayData::B(v) | ArrayData::Z(v) => {
                    assert!(v.iter().all(|&x| x == 0));
                    v.as_ptr() as usize
                }
                ArrayData::S(v) => {
                    assert!(v.iter().all(|&x| x == 0));
                    v.as_ptr() as usize
                }
                ArrayData::I(v) => {
                    assert!(v.iter().all(|&x| x == 0));
                    v.as_ptr() as usize
                }
                ArrayData::Free => unreachable!(),
            };
            assert_eq!(addr, raw.addr);
        }
        heap.collect(std::iter::empty());
        assert_eq!(heap.used(), 0);
        assert_eq!(heap.live_arrays(), 0);
    }

    /// Elements written through the mutable view are read back, and a
    /// clone is a copy on its own aligned storage.
    #[test]
    fn elements_written_are_read_back_and_cloned() {
        let mut heap = Heap::new(4096);
        let h = heap.alloc(Elem::Int, 100).unwrap();
        let Some(ArrayData::I(v)) = heap.get_mut(h) else {
            panic!("an int[]")
        };
        for (i, x) in v.iter_mut().enumerate() {
            *x = i as i32 * 3;
        }
        let a = heap.get(h).unwrap().clone();
        let ArrayData::I(c) = &a else {
            panic!("an int[]")
        };
        assert_eq!(c.len(), 100);
        assert!(c.iter().enumerate().all(|(i, &x)| x == i as i32 * 3));
        assert_eq!(c.as_ptr() as usize % ARRAY_ALIGN, 0);
        assert_ne!(c.as_ptr() as usize, heap.raw[(h - 1) as usize].addr);
        let b = heap.alloc(Elem::Byte, 2).unwrap();
        assert_eq!(format!("{:?}", heap.get(b).unwrap()), "B([0, 0])");
        assert_eq!(
            heap.alloc(Elem::Int, 1000),
            Err(Fault::HeapQuotaExceeded {
                requested: ARRAY_HEADER_BYTES + 4000,
                quota: 4096,
            })
        );
    }
}
