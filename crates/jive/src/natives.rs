//! Native methods: a registry grouped by domain, and the context natives
//! run with.
//!
//! The host registers each native by class, name and descriptor in a named
//! *domain*. A class is loaded with a set of granted domains; a call to a
//! native outside them rejects the class at load (SPINE's safe linking).
//! The call instruction holds the native's function pointer, so a call is
//! an indirect call with the arguments read straight from the caller's
//! frame.
//!
//! By project convention all natives are static methods of the class
//! [`NATIVES_CLASS`] (`unet.sle.Natives` in Java); [`test_natives`] builds
//! the `test` domain, whose plain-Java twins live in the applet SDK.

use crate::fault::Fault;
use crate::heap::{ArrayData, Heap};
use crate::model::{Elem, JType, Sig};

/// Internal name of the class holding the project's natives.
pub const NATIVES_CLASS: &str = "unet/sle/Natives";

/// A native method: host state, context, arguments (ints and array
/// handles, in descriptor order). Void natives return `Ok(0)`, which is
/// ignored.
pub type NativeFn<H> = fn(&mut H, &mut NativeCtx<'_>, &[i32]) -> NativeResult;

/// What a native returns. The fault is boxed so that the result fits in two
/// registers: a native call is on every packet's path and a fault is rare
/// (`?` on a `Result<_, Fault>` boxes it).
pub type NativeResult = Result<i32, Box<Fault>>;

pub(crate) struct NativeEntry<H> {
    pub domain: String,
    pub class: String,
    pub name: String,
    pub descriptor: String,
    pub f: NativeFn<H>,
    pub fast: Option<Fast<H>>,
    /// Callable from a handler ([`Natives::register_ephemeral`]).
    pub ephemeral: bool,
    /// A method another class exports ([`Natives::register_export`]).
    pub export: bool,
}

/// A native's common case that compiled code performs without calling it:
/// an [`Intrinsic`] copy, or a call of a [`SinkFn`].
#[cfg_attr(not(feature = "jit"), allow(dead_code))]
pub(crate) enum Fast<H> {
    Window(Intrinsic),
    /// `(byte[] a, int aoff, int x, int len)`: the sink gets `a[aoff..][..len]`.
    Sink(SinkFn<H>),
    /// `(byte[] a, int x, int len)`: the sink gets `a[..len]`.
    SinkPrefix(SinkFn<H>),
    /// Up to three `int`s in, an `int` or nothing out: the leaf gets them.
    Leaf(LeafFn<H>),
    /// `(int[] a, int x, int y)`: the sink gets all of `a`; the call
    /// charges the given units in all.
    IntsSink(IntsSinkFn<H>, u32),
}

impl<H> Clone for Fast<H> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<H> Copy for Fast<H> {}

/// A native bound into a class: the function and its signature.
pub(crate) struct BoundNative<H> {
    pub f: NativeFn<H>,
    /// Read by the compiler only.
    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    pub fast: Option<Fast<H>>,
    pub sig: Sig,
    pub name: String,
}

/// A native's result of array type that is not a live array of the
/// declared kind (the verifier trusts natives to return one).
#[inline]
pub(crate) fn bad_native_array<H>(heap: &Heap, nat: &BoundNative<H>, v: i32) -> Option<Fault> {
    match nat.sig.ret {
        Some(JType::Array(e)) if v != 0 && heap.get(v).and_then(|x| x.elem()) != Some(e) => {
            Some(Fault::Internal(format!(
                "native {} returned {v}, not a {} handle",
                nat.name,
                e.descriptor()
            )))
        }
        _ => None,
    }
}

/// The common case of a native registered with [`Natives::register_sink`]:
/// the host state, the bytes `a[aoff..aoff + len]` of the applet's array and
/// the native's third argument. Returns true when it did what the native
/// would have done with these arguments (without a fault), false when it
/// did nothing at all (compiled code then calls the native, which handles
/// the case or makes the fault).
pub type SinkFn<H> = fn(&mut H, &[u8], i32) -> bool;

/// The common case of a native registered with [`Natives::register_leaf`]:
/// the host state and the native's `int` arguments (those it does not
/// take are 0). `Some(v)` when it did what the native would have done with
/// them, returning `v` (0 for a `void` native), with no fault and no
/// charge beyond the call's unit; `None` when it did nothing at all
/// (compiled code then calls the native).
pub type LeafFn<H> = fn(&mut H, [i32; 3]) -> Option<i32>;

/// The common case of a native registered with
/// [`Natives::register_ints_sink`]: the host state, the elements of the
/// native's `int[]` argument and its two `int`s. True when it did what the
/// native would have done with them, false when it did nothing at all.
pub type IntsSinkFn<H> = fn(&mut H, &[i32], i32, i32) -> bool;

/// A native whose common case compiled code performs itself, calling the
/// native only when that case does not apply ([`Natives::register_intrinsic`]).
///
/// Both kinds take `(byte[] a, int aoff, int woff, int len)` (descriptor
/// `([BIII)V`) and copy `len` bytes between `a[aoff..]` and the host's
/// *window* at `woff` (memory the host lends to every invocation,
/// [`Vm::set_window`](crate::Vm::set_window)). Compiled code copies itself
/// when a window is set, `a` is a live `byte[]`, `aoff`, `woff` and `len`
/// are not negative, `aoff + len <= a.length`, `woff + len` is within the
/// window and the fuel left covers the call (1 unit) and the copy
/// (`1 + len / 64` units); otherwise it calls the native.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intrinsic {
    /// Copy from the window at `woff` into `a[aoff..aoff + len]`.
    WindowToArray,
    /// Copy `a[aoff..aoff + len]` into the window at `woff`.
    ArrayToWindow,
}

/// A registry of natives, grouped into named domains.
pub struct Natives<H> {
    pub(crate) entries: Vec<NativeEntry<H>>,
}

impl<H> Default for Natives<H> {
    fn default() -> Self {
        Natives::new()
    }
}

impl<H> Clone for Natives<H> {
    fn clone(&self) -> Self {
        Natives {
            entries: self
                .entries
                .iter()
                .map(|e| NativeEntry {
                    domain: e.domain.clone(),
                    class: e.class.clone(),
                    name: e.name.clone(),
                    descriptor: e.descriptor.clone(),
                    f: e.f,
                    fast: e.fast,
                    ephemeral: e.ephemeral,
                    export: e.export,
                })
                .collect(),
        }
    }
}

impl<H> Natives<H> {
    /// An empty registry.
    pub fn new() -> Natives<H> {
        Natives {
            entries: Vec::new(),
        }
    }

    /// Register `class.name descriptor` in `domain`. A later registration of
    /// the same class, name and descriptor replaces the earlier one. The
    /// descriptor must use the JIVE subset's types, or classes calling the
    /// native are rejected at load.
    pub fn register(
        &mut self,
        domain: &str,
        class: &str,
        name: &str,
        descriptor: &str,
        f: NativeFn<H>,
    ) -> &mut Self {
        self.add(domain, class, name, descriptor, f, None, false)
    }

    /// Register `class.name descriptor` in `domain` as *ephemeral*: a
    /// native a handler may call (SPINE's `EPHEMERAL`; see
    /// [`LoadRules`](crate::LoadRules)). The host promises that an ephemeral
    /// native finishes in bounded time and never allocates (it does not
    /// call [`NativeCtx::new_array`]). Otherwise as [`Natives::register`],
    /// which registers natives that are not ephemeral.
    ///
    /// A parameter of type `Ljava/lang/String;` (of any native) takes a
    /// *method name*: the class passes a string literal naming one of its
    /// static `(II)V` methods, and the native receives that method's index
    /// ([`MethodId::index`](crate::MethodId::index)).
    pub fn register_ephemeral(
        &mut self,
        domain: &str,
        class: &str,
        name: &str,
        descriptor: &str,
        f: NativeFn<H>,
    ) -> &mut Self {
        self.add(domain, class, name, descriptor, f, None, true)
    }

    /// Register `class.name descriptor` in `domain` as a method that
    /// another class *exports* (SPINE's domains: an extension exports its
    /// methods into a domain of its own): a class granted `domain` calls
    /// it as an ordinary static call, `f` runs it (in the exporting
    /// class's VM, which is the host's business). `ephemeral` says whether
    /// a handler may call it (the exporting method passed
    /// [`Class::ephemeral_check`](crate::Class::ephemeral_check)).
    ///
    /// A call of `class` that does not link is refused at load with what
    /// is missing: `domain` not granted, no such method exported, or the
    /// exported method's descriptor, e.g. `invokestatic
    /// Lookup.lookup(II)I: domain "router" exports lookup(I)I, not
    /// lookup(II)I`.
    pub fn register_export(
        &mut self,
        domain: &str,
        class: &str,
        name: &str,
        descriptor: &str,
        f: NativeFn<H>,
        ephemeral: bool,
    ) -> &mut Self {
        self.add(domain, class, name, descriptor, f, None, ephemeral);
        if let Some(e) = self.entries.last_mut() {
            e.export = true;
        }
        self
    }

    /// Register `class.name([BIII)V` in `domain`, arguments `(byte[] a,
    /// int aoff, int x, int len)`, with `sink` for its common case:
    /// compiled code checks that `a` is a live `byte[]`, `aoff` and `len`
    /// are not negative, `aoff + len <= a.length` and the fuel left covers
    /// the call (1 unit) and `1 + len / 64` units, and then calls
    /// `sink(host, &a[aoff..aoff + len], x)`; if the sink declines (or a
    /// check fails) it calls `f`. The interpreter always calls `f`. The
    /// host promises that when `sink` returns true it did exactly what `f`
    /// does with these arguments, charging `1 + len / 64` units, and that
    /// when it returns false it did nothing. A transmit native, whose
    /// common case is "hand these bytes over", is the use: the call skips
    /// the native's marshalling (`tests/jit.rs` compares the two).
    pub fn register_sink(
        &mut self,
        domain: &str,
        class: &str,
        name: &str,
        f: NativeFn<H>,
        sink: SinkFn<H>,
    ) -> &mut Self {
        self.add(
            domain,
            class,
            name,
            "([BIII)V",
            f,
            Some(Fast::Sink(sink)),
            false,
        )
    }

    /// Register `class.name([BII)V` in `domain`, taking `(byte[] a, int x,
    /// int len)`, with a sink: as [`Natives::register_sink`], the bytes
    /// being `a[0..len]` (a receive native that hands a prefix of the
    /// applet's buffer over is the use).
    pub fn register_sink_prefix(
        &mut self,
        domain: &str,
        class: &str,
        name: &str,
        f: NativeFn<H>,
        sink: SinkFn<H>,
    ) -> &mut Self {
        self.add(
            domain,
            class,
            name,
            "([BII)V",
            f,
            Some(Fast::SinkPrefix(sink)),
            false,
        )
    }

    /// Register `class.name descriptor` in `domain`, a native of up to
    /// three `int` parameters returning an `int` or nothing, with `leaf`
    /// for its common case: compiled code checks that the fuel left covers
    /// the call (1 unit) and calls `leaf(host, args)` directly, with no
    /// marshalling; if it declines (or the fuel does not cover the call)
    /// it calls `f`. The interpreter always calls `f`. The host promises
    /// that when `leaf` returns `Some(v)` it did exactly what `f` does
    /// with these arguments, returning `v`, charging nothing beyond the
    /// call's unit and allocating nothing, and that when it returns `None`
    /// it did nothing. Other descriptors keep the plain call. Natives that
    /// take a buffer from a queue or give one back are the use
    /// (`tests/jit_leaf.rs` compares the two).
    pub fn register_leaf(
        &mut self,
        domain: &str,
        class: &str,
        name: &str,
        descriptor: &str,
        f: NativeFn<H>,
        leaf: LeafFn<H>,
    ) -> &mut Self {
        let fast = Some(Fast::Leaf(leaf));
        self.add(domain, class, name, descriptor, f, fast, false)
    }

    /// [`Natives::register_leaf`] for an ephemeral native
    /// ([`Natives::register_ephemeral`]): a handler may call it, and its
    /// common case is `leaf`'s direct call.
    pub fn register_ephemeral_leaf(
        &mut self,
        domain: &str,
        class: &str,
        name: &str,
        descriptor: &str,
        f: NativeFn<H>,
        leaf: LeafFn<H>,
    ) -> &mut Self {
        let fast = Some(Fast::Leaf(leaf));
        self.add(domain, class, name, descriptor, f, fast, true)
    }

    /// Register `class.name([III)V` in `domain`, taking `(int[] a, int x,
    /// int y)`, with `sink` for its common case: compiled code checks that
    /// `a` is a live `int[]` and that the fuel left covers `units` (the
    /// call's unit included, at least 1) and calls `sink(host, a, x, y)`;
    /// if the sink declines (or a check fails) it calls `f`. The host
    /// promises that when `sink` returns true it did exactly what `f` does
    /// with these arguments, charging `units` in all, and that when it
    /// returns false it did nothing. A receive native that hands over the
    /// buffers an `int[]` names is the use (`tests/jit_leaf.rs` compares
    /// the two).
    pub fn register_ints_sink(
        &mut self,
        domain: &str,
        class: &str,
        name: &str,
        f: NativeFn<H>,
        sink: IntsSinkFn<H>,
        units: u32,
    ) -> &mut Self {
        let fast = Some(Fast::IntsSink(sink, units.max(1)));
        self.add(domain, class, name, "([III)V", f, fast, false)
    }

    /// Register `class.name([BIII)V` in `domain` as an [`Intrinsic`]:
    /// compiled code performs the intrinsic's common case itself, and calls
    /// `f` otherwise; the interpreter always calls `f`. The host promises
    /// that `f`, in the case the intrinsic performs, does exactly that: the
    /// same copy, a charge of `1 + len / 64` units, no fault (`tests/jit.rs`
    /// and the hosts' tests compare the two).
    pub fn register_intrinsic(
        &mut self,
        domain: &str,
        class: &str,
        name: &str,
        f: NativeFn<H>,
        intrinsic: Intrinsic,
    ) -> &mut Self {
        self.add(
            domain,
            class,
            name,
            "([BIII)V",
            f,
            Some(Fast::Window(intrinsic)),
            false,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        domain: &str,
        class: &str,
        name: &str,
        descriptor: &str,
        f: NativeFn<H>,
        fast: Option<Fast<H>>,
        ephemeral: bool,
    ) -> &mut Self {
        self.entries
            .retain(|e| !(e.class == class && e.name == name && e.descriptor == descriptor));
        self.entries.push(NativeEntry {
            domain: domain.to_string(),
            class: class.to_string(),
            name: name.to_string(),
            descriptor: descriptor.to_string(),
            f,
            fast,
            ephemeral,
            export: false,
        });
        self
    }

    /// Number of registered natives.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Add every native of `other` (later ones replace equal keys).
    pub fn extend(&mut self, other: &Natives<H>) -> &mut Self {
        for e in &other.entries {
            self.add(
                &e.domain,
                &e.class,
                &e.name,
                &e.descriptor,
                e.f,
                e.fast,
                e.ephemeral,
            );
            if let Some(last) = self.entries.last_mut() {
                last.export = e.export;
            }
        }
        self
    }
}

/// What a native may touch besides the host state: the applet's arrays
/// (checked, by handle) and the invocation's fuel.
pub struct NativeCtx<'a> {
    pub(crate) heap: &'a mut Heap,
    pub(crate) fuel: &'a mut i64,
}

#[cold]
#[inline(never)]
fn bad_kind(h: i32, want: &str) -> Fault {
    Fault::Native(format!("handle {h} is not a {want} array"))
}

impl NativeCtx<'_> {
    /// A context over `heap` with `fuel` units left (for tests and hosts
    /// calling natives directly).
    pub fn new<'a>(heap: &'a mut Heap, fuel: &'a mut i64) -> NativeCtx<'a> {
        NativeCtx { heap, fuel }
    }

    /// Fuel the invocation has left (all of its budget, not only the part
    /// it runs on): what a native that runs other code on its behalf may
    /// let that code use, and then [`charge`](NativeCtx::charge).
    #[inline]
    pub fn fuel_left(&self) -> u64 {
        (*self.fuel).max(0) as u64
    }

    /// Charge `units` of fuel; fails with [`Fault::OutOfFuel`] when spent.
    #[inline]
    pub fn charge(&mut self, units: u64) -> Result<(), Fault> {
        *self.fuel = self.fuel.saturating_sub(units.min(i64::MAX as u64) as i64);
        if *self.fuel < 0 {
            Err(Fault::OutOfFuel)
        } else {
            Ok(())
        }
    }

    #[inline]
    fn array(&self, h: i32) -> Result<&ArrayData, Fault> {
        match self.heap.get(h) {
            Some(a) => Ok(a),
            None if h == 0 => Err(Fault::NullPointer),
            None => Err(bad_kind(h, "live")),
        }
    }

    /// Length of the array `h`.
    #[inline]
    pub fn array_len(&self, h: i32) -> Result<usize, Fault> {
        Ok(self.array(h)?.len())
    }

    /// Element kind of array `h`.
    pub fn array_elem(&self, h: i32) -> Result<Elem, Fault> {
        self.array(h)?.elem().ok_or_else(|| bad_kind(h, "live"))
    }

    /// Contents of a `byte[]` or `boolean[]`.
    #[inline]
    pub fn bytes(&self, h: i32) -> Result<&[i8], Fault> {
        match self.array(h)? {
            ArrayData::B(v) | ArrayData::Z(v) => Ok(v),
            _ => Err(bad_kind(h, "byte")),
        }
    }

    /// Mutable contents of a `byte[]` (writes to a `boolean[]` through this
    /// must keep values 0 or 1).
    #[inline]
    pub fn bytes_mut(&mut self, h: i32) -> Result<&mut [i8], Fault> {
        if h == 0 {
            return Err(Fault::NullPointer);
        }
        match self.heap.get_mut(h) {
            Some(ArrayData::B(v)) | Some(ArrayData::Z(v)) => Ok(v),
            _ => Err(bad_kind(h, "byte")),
        }
    }

    /// Contents of a `short[]`.
    pub fn shorts(&self, h: i32) -> Result<&[i16], Fault> {
        match self.array(h)? {
            ArrayData::S(v) => Ok(v),
            _ => Err(bad_kind(h, "short")),
        }
    }

    /// Mutable contents of a `short[]`.
    pub fn shorts_mut(&mut self, h: i32) -> Result<&mut [i16], Fault> {
        if h == 0 {
            return Err(Fault::NullPointer);
        }
        match self.heap.get_mut(h) {
            Some(ArrayData::S(v)) => Ok(v),
            _ => Err(bad_kind(h, "short")),
        }
    }

    /// Contents of an `int[]`.
    #[inline]
    pub fn ints(&self, h: i32) -> Result<&[i32], Fault> {
        match self.array(h)? {
            ArrayData::I(v) => Ok(v),
            _ => Err(bad_kind(h, "int")),
        }
    }

    /// Mutable contents of an `int[]`.
    #[inline]
    pub fn ints_mut(&mut self, h: i32) -> Result<&mut [i32], Fault> {
        if h == 0 {
            return Err(Fault::NullPointer);
        }
        match self.heap.get_mut(h) {
            Some(ArrayData::I(v)) => Ok(v),
            _ => Err(bad_kind(h, "int")),
        }
    }

    /// Allocate a zeroed array (charged to the quota and to fuel, one unit
    /// per 16 elements). Natives do not trigger collection: on a full heap
    /// this fails with [`Fault::HeapQuotaExceeded`]. Return the handle from
    /// a native whose descriptor returns that array type.
    pub fn new_array(&mut self, elem: Elem, len: i32) -> Result<i32, Fault> {
        self.charge(1 + (len.max(0) as u64) / 16)?;
        self.heap.alloc(elem, len)
    }
}

/// Check `off..off+len` against an array of `n` elements, as the SDK does.
fn check_range(n: usize, off: i32, len: i32) -> Result<(usize, usize), Fault> {
    if off < 0 || len < 0 || off as i64 + len as i64 > n as i64 {
        return Err(Fault::ArrayIndexOutOfBounds {
            index: if off < 0 || len < 0 {
                off.min(len)
            } else {
                off.wrapping_add(len)
            },
            length: n as i32,
        });
    }
    Ok((off as usize, off as usize + len as usize))
}

fn nat_nop<H>(_: &mut H, _: &mut NativeCtx<'_>, _: &[i32]) -> NativeResult {
    Ok(0)
}

fn nat_id<H>(_: &mut H, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    Ok(a[0])
}

fn nat_sum<H>(_: &mut H, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let b = cx.bytes(a[0])?;
    let (s, e) = check_range(b.len(), a[1], a[2])?;
    let r = b[s..e]
        .iter()
        .fold(0i32, |acc, &x| acc.wrapping_add(x as i32));
    cx.charge((e - s) as u64 / 16)?;
    Ok(r)
}

fn nat_fill<H>(_: &mut H, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let (v, len) = (a[1] as i8, a[2]);
    let n = cx.bytes(a[0])?.len();
    let (s, e) = check_range(n, 0, len)?;
    cx.charge((e - s) as u64 / 16)?;
    cx.bytes_mut(a[0])?[s..e].fill(v);
    Ok(0)
}

/// The `test` domain, class [`NATIVES_CLASS`]:
///
/// * `nop()V`: does nothing (the null native call);
/// * `id(I)I`: returns its argument;
/// * `sum([BII)I`: `sum(a, off, len)` adds the signed bytes
///   `a[off..off+len]`, faulting on a null array or a bad range;
/// * `fill([BII)V`: `fill(a, v, len)` sets `a[0..len]` to `(byte) v`,
///   faulting on a null array or a bad length.
pub fn test_natives<H>() -> Natives<H> {
    let mut n = Natives::new();
    n.register("test", NATIVES_CLASS, "nop", "()V", nat_nop::<H>)
        .register("test", NATIVES_CLASS, "id", "(I)I", nat_id::<H>)
        .register("test", NATIVES_CLASS, "sum", "([BII)I", nat_sum::<H>)
        .register("test", NATIVES_CLASS, "fill", "([BII)V", nat_fill::<H>);
    n
}
