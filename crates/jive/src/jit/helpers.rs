//! The helpers compiled code calls (array accesses that fail a check,
//! natives, running out of fuel, faults), each with the `extern "C"`
//! signature the translator declares for it.

use super::*;

// -------------------------------------------------------------------------
// Helpers called by compiled code
// -------------------------------------------------------------------------

/// The context and environment behind a helper's `ctx` argument.
///
/// # Safety
/// `ctx` is the pointer `Compiled::enter` passed to compiled code, whose
/// `env` is the `Env<H>` beside it in their `Link`, of this `H`.
#[allow(unsafe_code)]
unsafe fn parts<'a, H>(ctx: *mut Ctx) -> (&'a mut Ctx, &'a mut Env<H>) {
    // SAFETY: by the function's contract. Compiled code holds no Rust
    // references into either while a helper runs.
    unsafe {
        let c = &mut *ctx;
        let e = &mut *(c.env as *mut Env<H>);
        (c, e)
    }
}

/// The VM's state the running invocation works on, behind `env`'s
/// pointers: class, heap and host.
#[allow(unsafe_code)]
fn vm<'a, H>(env: &Env<H>) -> (&'a ClassInner<H>, &'a mut Heap, &'a mut H) {
    // SAFETY: `Compiled::enter` set these pointers from the references it
    // was given for this invocation (the class its code was compiled from,
    // kept alive by `Compiled`; the VM's heap and the host's state, both
    // mutably borrowed for the whole call), and a helper is only called
    // during it. Each helper takes them once and holds nothing after it
    // returns; nothing else reaches them meanwhile (compiled code holds
    // raw addresses of array data only, no references).
    unsafe { (&*env.cls, &mut *env.heap, &mut *env.host) }
}

/// The host's state for the natives' fast cases, from the context's own
/// copy of its pointer ([`Ctx::host`]): one load where [`vm`] takes two.
#[inline(always)]
#[allow(unsafe_code)]
fn host_of<'a, H>(ctx: *mut Ctx) -> &'a mut H {
    // SAFETY: called by compiled code with its context (see `parts`);
    // `Ctx::host` is `Env::host`, set with it on each entry (`prime`),
    // and valid as `vm` says of that one.
    unsafe { &mut *((*ctx).host as *mut H) }
}

pub(super) fn record<H>(env: &mut Env<H>, f: Fault, site: i64) -> i64 {
    env.fault = Some(f);
    env.site = ((site as u64 >> 32) as u32, site as u32);
    FAULT
}

/// Fuel went below zero at `site`: take the next part of the budget
/// (passing the checkpoint, reading the clock), or fault.
pub(super) extern "C" fn h_spent<H>(ctx: *mut Ctx, site: i64) -> i64 {
    // SAFETY: called by compiled code with its context (see `parts`).
    #[allow(unsafe_code)]
    let (c, env) = unsafe { parts::<H>(ctx) };
    match spent(&mut c.fuel, env) {
        None => 0,
        Some(f) => record(env, f, site),
    }
}

/// The interpreter's `spent!`: the fault that stops the invocation, if any.
fn spent<H>(fuel: &mut i64, env: &mut Env<H>) -> Option<Fault> {
    let (_, _, host) = vm(env);
    // SAFETY: as for `vm`: the VM's clock, mutably borrowed for the call
    // by `Compiled::enter`, reached by nothing else while a helper runs.
    #[allow(unsafe_code)]
    let clock = unsafe { &mut *env.clock };
    let (left, f) = refill(*fuel, env.budget(), clock, host);
    *fuel = left;
    f
}

pub(super) const K_DIV0: i64 = 0;
pub(super) const K_NULL: i64 = 1;
pub(super) const K_DEPTH: i64 = 2;
/// A slow path that should have faulted did not (never expected).
pub(super) const K_INTERNAL: i64 = 3;

/// A fault the compiled code detected itself.
pub(super) extern "C" fn h_fault<H>(ctx: *mut Ctx, kind: i64, site: i64) -> i64 {
    // SAFETY: called by compiled code with its context (see `parts`).
    #[allow(unsafe_code)]
    let (_, env) = unsafe { parts::<H>(ctx) };
    let f = match kind {
        K_DIV0 => Fault::DivideByZero,
        K_NULL => Fault::NullPointer,
        K_DEPTH => Fault::StackOverflow,
        K_INTERNAL => Fault::Internal("an array access's slow path did not fault".into()),
        _ => Fault::Internal(format!("compiled code reported fault kind {kind}")),
    };
    record(env, f, site)
}

pub(super) const A_INT: i64 = 0;
pub(super) const A_BYTE: i64 = 1;
pub(super) const A_SHORT: i64 = 2;
pub(super) const A_BOOL: i64 = 3;

/// `iaload` / `baload` / `saload` (`kind`: `A_INT`, `A_BYTE` for `byte[]`
/// or `boolean[]`, `A_SHORT`).
pub(super) extern "C" fn h_aload<H>(ctx: *mut Ctx, kind: i64, h: i32, i: i32, site: i64) -> i64 {
    // SAFETY: called by compiled code with its context (see `parts`).
    #[allow(unsafe_code)]
    let (_, env) = unsafe { parts::<H>(ctx) };
    let (_, heap, _) = vm(env);
    let a = heap.arrays.get((h as u32 as usize).wrapping_sub(1));
    let (x, len) = match (kind, a) {
        (A_INT, Some(ArrayData::I(v))) => (v.get(i as u32 as usize).copied(), v.len()),
        (A_BYTE, Some(ArrayData::B(v) | ArrayData::Z(v))) => {
            (v.get(i as u32 as usize).map(|&x| x as i32), v.len())
        }
        (A_SHORT, Some(ArrayData::S(v))) => (v.get(i as u32 as usize).map(|&x| x as i32), v.len()),
        _ => return record(env, arr_fault(h), site),
    };
    match x {
        Some(x) => x as i64,
        None => record(
            env,
            Fault::ArrayIndexOutOfBounds {
                index: i,
                length: len as i32,
            },
            site,
        ),
    }
}

/// `iastore` / `bastore` on `byte[]` / `bastore` on `boolean[]` /
/// `sastore`.
pub(super) extern "C" fn h_astore<H>(
    ctx: *mut Ctx,
    kind: i64,
    h: i32,
    i: i32,
    x: i32,
    site: i64,
) -> i64 {
    // SAFETY: called by compiled code with its context (see `parts`).
    #[allow(unsafe_code)]
    let (_, env) = unsafe { parts::<H>(ctx) };
    /// Store `x` at `i`, or the length if `i` is out of bounds.
    fn put<T>(v: &mut [T], i: i32, x: T) -> Result<(), usize> {
        let len = v.len();
        v.get_mut(i as u32 as usize).map(|e| *e = x).ok_or(len)
    }
    let (_, heap, _) = vm(env);
    let stored = match (
        kind,
        heap.arrays.get_mut((h as u32 as usize).wrapping_sub(1)),
    ) {
        (A_INT, Some(ArrayData::I(v))) => put(v, i, x),
        (A_BYTE, Some(ArrayData::B(v))) => put(v, i, x as i8),
        (A_BOOL, Some(ArrayData::Z(v))) => put(v, i, (x & 1) as i8),
        (A_SHORT, Some(ArrayData::S(v))) => put(v, i, x as i16),
        _ => return record(env, arr_fault(h), site),
    };
    match stored {
        Ok(()) => 0,
        Err(len) => record(
            env,
            Fault::ArrayIndexOutOfBounds {
                index: i,
                length: len as i32,
            },
            site,
        ),
    }
}

/// `arraylength`.
pub(super) extern "C" fn h_arrlen<H>(ctx: *mut Ctx, h: i32, site: i64) -> i64 {
    // SAFETY: called by compiled code with its context (see `parts`).
    #[allow(unsafe_code)]
    let (_, env) = unsafe { parts::<H>(ctx) };
    let (_, heap, _) = vm(env);
    match heap.get(h) {
        Some(a) => a.len() as i64,
        None => record(env, arr_fault(h), site),
    }
}

/// A native call: the interpreter's `CallNative`, fuel included, for a
/// native that may return an array (its result is checked as the
/// interpreter checks it).
pub(super) extern "C" fn h_native<H>(
    ctx: *mut Ctx,
    n: i64,
    args: *const i32,
    argc: i64,
    site: i64,
) -> i64 {
    // SAFETY: called by compiled code with its context (see `parts`).
    #[allow(unsafe_code)]
    let (c, env) = unsafe { parts::<H>(ctx) };
    let (cls, _, _) = vm(env);
    let Some(nat) = cls.natives.get(n as usize) else {
        return record(env, Fault::Internal(format!("no native {n}")), site);
    };
    call_native(c, env, nat.f, args, argc, site, |heap, v| {
        bad_native_array(heap, nat, v)
    })
}

/// [`h_native`] for a native that returns no array (whose result needs no
/// check): `f` is the native's function, passed by the compiled code, so
/// the call skips the lookup and the result check.
pub(super) extern "C" fn h_native_int<H>(
    ctx: *mut Ctx,
    f: *const (),
    args: *const i32,
    argc: i64,
    site: i64,
) -> i64 {
    // SAFETY: compiled code passes a `NativeFn<H>` of the class it was
    // compiled from (a function pointer, as `*const ()`), with the same `H`
    // this helper was instantiated with.
    #[allow(unsafe_code)]
    let f = unsafe { std::mem::transmute::<*const (), NativeFn<H>>(f) };
    // SAFETY: called by compiled code with its context (see `parts`).
    #[allow(unsafe_code)]
    let (c, env) = unsafe { parts::<H>(ctx) };
    call_native(c, env, f, args, argc, site, |_, _| None)
}

/// The interpreter's `CallNative` for both helpers: charge the call, run
/// `f` with the whole budget left (reserve included), reload the array
/// table, `check` the result, then settle the fuel.
#[inline(always)]
fn call_native<H>(
    c: &mut Ctx,
    env: &mut Env<H>,
    f: NativeFn<H>,
    args: *const i32,
    argc: i64,
    site: i64,
    check: impl FnOnce(&Heap, i32) -> Option<Fault>,
) -> i64 {
    // SAFETY: compiled code passes a stack slot holding `argc` arguments.
    #[allow(unsafe_code)]
    let args = unsafe { std::slice::from_raw_parts(args, argc as usize) };
    c.fuel -= 1;
    if c.fuel < 0 {
        if let Some(f) = spent(&mut c.fuel, env) {
            return native_fault(env, f, site);
        }
    }
    let reserve = env.reserve();
    let mut left = c.fuel + reserve;
    let (_, heap, host) = vm(env);
    // A native sees arrays as they are: bytes lent to one are copied in.
    if heap.settle_lent() {
        c.lent = super::ctx::NO_LOAN;
    }
    let r = f(
        host,
        &mut NativeCtx {
            heap,
            fuel: &mut left,
        },
        args,
    );
    c.fuel = left - reserve;
    // The native may have allocated: the table may have moved or grown.
    c.arrays = heap.raw.as_ptr();
    c.narrays = heap.raw.len() as u64;
    let v = match r {
        Ok(v) => v,
        Err(f) => return native_fault(env, *f, site),
    };
    if let Some(f) = check(heap, v) {
        return native_fault(env, f, site);
    }
    if c.fuel < 0 {
        if let Some(f) = spent(&mut c.fuel, env) {
            return native_fault(env, f, site);
        }
    }
    v as i64
}

/// An intrinsic's copy (see `Gen::window_copy`).
pub(super) extern "C" fn h_copy(dst: *mut u8, src: *const u8, n: u64) -> i64 {
    // SAFETY: compiled code checked that `src` and `dst` each span `n`
    // bytes inside a live byte array of the heap or inside the host's
    // window (valid and disjoint from the heap: `Vm::set_window`).
    #[allow(unsafe_code)]
    unsafe {
        let n = n as usize;
        if (16..=64).contains(&n) {
            // A small message, the common case: four unaligned 16-byte
            // moves at 0, 16, 32 and n - 16, each pulled back to n - 16
            // where it would pass the end (so they overlap below 64
            // bytes), where the library's memcpy would cost its call and
            // dispatch as much again. Every move lies within [0, n).
            let mv = |at: usize| {
                let v = (src.add(at) as *const u128).read_unaligned();
                (dst.add(at) as *mut u128).write_unaligned(v);
            };
            let last = n - 16;
            mv(0);
            mv(last.min(16));
            mv(last.min(32));
            mv(last);
        } else {
            std::ptr::copy_nonoverlapping(src, dst, n)
        }
    };
    0
}

/// A sink's call (see `Gen::sink_call`): 1 if it accepted, 0 if it
/// declined.
pub(super) extern "C" fn h_sink<H>(
    ctx: *mut Ctx,
    f: *const (),
    p: *const u8,
    n: u64,
    x: i32,
) -> i64 {
    // SAFETY: compiled code passes a `SinkFn<H>` of the class it was
    // compiled from, with the same `H` this helper was instantiated with.
    #[allow(unsafe_code)]
    let f = unsafe { std::mem::transmute::<*const (), SinkFn<H>>(f) };
    // SAFETY: compiled code checked that `p` spans `n` bytes inside a live
    // byte array of the heap, which the host state does not reach, and
    // nothing can free or move it during the call (a sink has no access
    // to the heap).
    #[allow(unsafe_code)]
    let bytes = unsafe { std::slice::from_raw_parts(p, n as usize) };
    f(host_of::<H>(ctx), bytes, x) as i64
}

/// What [`h_leaf`] returns when the leaf declined: no `int` sign-extends
/// to it.
pub(super) const DECLINED: i64 = 1 << 40;

/// A leaf's call (see `Gen::leaf_call`): its result sign-extended, or
/// [`DECLINED`].
pub(super) extern "C" fn h_leaf<H>(ctx: *mut Ctx, f: *const (), a0: i32, a1: i32, a2: i32) -> i64 {
    // SAFETY: compiled code passes a `LeafFn<H>` of the class it was
    // compiled from, with the same `H` this helper was instantiated with.
    #[allow(unsafe_code)]
    let f = unsafe { std::mem::transmute::<*const (), LeafFn<H>>(f) };
    f(host_of::<H>(ctx), [a0, a1, a2]).map_or(DECLINED, i64::from)
}

/// An `int[]` sink's call (see `Gen::ints_sink_call`): 1 if it accepted,
/// 0 if it declined.
pub(super) extern "C" fn h_ints_sink<H>(
    ctx: *mut Ctx,
    f: *const (),
    p: *const i32,
    n: u64,
    x: i32,
    y: i32,
) -> i64 {
    // SAFETY: compiled code passes an `IntsSinkFn<H>` of the class it was
    // compiled from, with the same `H` this helper was instantiated with.
    #[allow(unsafe_code)]
    let f = unsafe { std::mem::transmute::<*const (), IntsSinkFn<H>>(f) };
    // SAFETY: compiled code read `p` and `n` from a live `int[]` entry of
    // the heap's table (elements of `i32`, aligned), which the host state
    // does not reach, and nothing can free or move it during the call (a
    // sink has no access to the heap).
    #[allow(unsafe_code)]
    let ints = unsafe { std::slice::from_raw_parts(p, n as usize) };
    f(host_of::<H>(ctx), ints, x, y) as i64
}

#[cold]
#[inline(never)]
fn native_fault<H>(env: &mut Env<H>, f: Fault, site: i64) -> i64 {
    record(env, f, site)
}

/// The element kind of [`h_newarray`]'s `elem` argument.
pub(super) fn elem_code(e: Elem) -> i64 {
    match e {
        Elem::Byte => 0,
        Elem::Bool => 1,
        Elem::Short => 2,
        Elem::Int => 3,
    }
}

/// Make the spill stack (`Env::spill`, `Env::sites`) at least `top` slots
/// long, growing it as the interpreter grows its slot stack, and tell the
/// context where it is. `top` is at most [`MAX_STACK_SLOTS`] (compiled
/// calls check it); past it, a stack overflow at `site`.
pub(super) extern "C" fn h_reserve<H>(ctx: *mut Ctx, top: i64, site: i64) -> i64 {
    // SAFETY: called by compiled code with its context (see `parts`).
    #[allow(unsafe_code)]
    let (c, env) = unsafe { parts::<H>(ctx) };
    if !(0..=MAX_STACK_SLOTS as i64).contains(&top) {
        return record(env, Fault::StackOverflow, site);
    }
    let top = top as usize;
    if env.spill.len() < top {
        let len = (env.spill.len() * 2).clamp(top, MAX_STACK_SLOTS);
        env.spill.resize(len, 0);
        env.sites.resize(len, u32::MAX);
    }
    c.spill = env.spill.as_mut_ptr();
    c.sites = env.sites.as_mut_ptr();
    c.spill_len = env.spill.len().min(env.sites.len()) as i64;
    0
}

/// `newarray` of `len` elements of kind `elem` ([`elem_code`]) in a frame
/// of `size` slots at `Ctx::base`, as the interpreter's `NewArray`: the
/// negative size, the charge of one unit per 16 elements, the allocation,
/// and when the quota is reached the collection (charged first) with the
/// frames as roots (the interpreter's below the compiled ones, then the
/// compiled frames' slots, which the compiled code wrote to the spill
/// stack just before), then the allocation again. Returns the handle.
pub(super) extern "C" fn h_newarray<H>(
    ctx: *mut Ctx,
    elem: i64,
    len: i32,
    size: i64,
    site: i64,
) -> i64 {
    // SAFETY: called by compiled code with its context (see `parts`).
    #[allow(unsafe_code)]
    let (c, env) = unsafe { parts::<H>(ctx) };
    let e = match elem {
        0 => Elem::Byte,
        1 => Elem::Bool,
        2 => Elem::Short,
        3 => Elem::Int,
        _ => return record(env, Fault::Internal(format!("array kind {elem}")), site),
    };
    if len < 0 {
        return record(env, Fault::NegativeArraySize(len), site);
    }
    c.fuel -= 1 + (len as i64) / 16;
    if c.fuel < 0 {
        if let Some(f) = spent(&mut c.fuel, env) {
            return record(env, f, site);
        }
    }
    let (cls, heap, _) = vm(env);
    let h = match heap.alloc(e, len) {
        Ok(h) => h,
        Err(Fault::HeapQuotaExceeded { .. }) => {
            let top = (c.base.max(0) as usize).saturating_add(size.max(0) as usize);
            // SAFETY: `Vm::install` and `Vm::pin_array` / `unpin_array`
            // set these to the VM's pinned handles, unchanged while an
            // invocation runs; `enter_nested` sets `below` and `frames` to
            // the interpreter's slots below the compiled frames and its
            // suspended frames, which it borrows (shared) for the call, and
            // their lengths (0 otherwise).
            #[allow(unsafe_code)]
            let (pinned, below, frames) = unsafe {
                (
                    slice_or_empty(env.pinned, env.pinned_len),
                    slice_or_empty(env.below, env.below_len),
                    slice_or_empty(env.frames, env.nframes),
                )
            };
            let array_fields = cls
                .fields
                .iter()
                .enumerate()
                .filter(|(_, f)| f.ty.is_array());
            let nfields = array_fields.clone().count();
            c.fuel -= heap.gc_cost(nfields + pinned.len(), top);
            if c.fuel < 0 {
                if let Some(f) = spent(&mut c.fuel, env) {
                    return record(env, f, site);
                }
            }
            // SAFETY: `Ctx::fields` is the VM's field array (`bind`), of
            // the class's field count, not written while a helper runs.
            #[allow(unsafe_code)]
            let fields = unsafe { slice_or_empty(c.fields as *const i32, cls.field_init.len()) };
            // The interpreter's frames below (the slots each wrote), then
            // the compiled frames' (written to the spill stack).
            let mut slots = Vec::new();
            let masks = |m| cls.masks(m);
            if let Some(cur) = env.cur {
                frame_roots(masks, below, frames, cur, below.len(), &mut |v| {
                    slots.push(v)
                });
            }
            compiled_roots(cls, &env.spill, &env.sites, below.len(), top, &mut slots);
            let roots = array_fields
                .filter_map(|(i, _)| fields.get(i).copied())
                .chain(pinned.iter().copied())
                .chain(slots.iter().copied());
            heap.collect(roots);
            match heap.alloc(e, len) {
                Ok(h) => h,
                Err(f) => return record(env, f, site),
            }
        }
        Err(f) => return record(env, f, site),
    };
    // The table may have moved or grown.
    c.arrays = heap.raw.as_ptr();
    c.narrays = heap.raw.len() as u64;
    h as i64
}

/// The roots of the compiled frames from slot `first` (the first compiled
/// frame's) to `top` (the end of the allocating frame's), pushed on
/// `out`: each frame's site in `sites` names its method and the op it is
/// at, whose mask names the slots it wrote to `spill`; a frame at a call
/// ends where its callee's begins (the call's `at`), the allocating frame
/// at `top`.
fn compiled_roots<H>(
    cls: &ClassInner<H>,
    spill: &[i32],
    sites: &[u32],
    first: usize,
    top: usize,
    out: &mut Vec<i32>,
) {
    let mut base = first;
    while base < top {
        let Some(&site) = sites.get(base) else {
            return;
        };
        let (m, op) = ((site >> 16) as usize, (site & 0xffff) as usize);
        let end = match cls.code.get(m).and_then(|mc| mc.ops.get(op)) {
            Some(Op::Call { at, .. }) => base + *at as usize,
            _ => top,
        };
        let region = spill.get(base..end.min(top)).unwrap_or(&[]);
        if let Some(mask) = cls.masks(m).and_then(|k| k.at(op)) {
            for (s, &v) in region.iter().enumerate() {
                if SlotMasks::has(mask, s) {
                    out.push(v);
                }
            }
        }
        if end <= base {
            return;
        }
        base = end;
    }
}

/// `len` values from `p`, or none when `p` is null.
///
/// # Safety
/// `p`, when not null, points to `len` initialised values that nothing
/// writes while the slice lives.
#[allow(unsafe_code)]
unsafe fn slice_or_empty<'a, T>(p: *const T, len: usize) -> &'a [T] {
    if p.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: by the function's contract.
        unsafe { std::slice::from_raw_parts(p, len) }
    }
}
