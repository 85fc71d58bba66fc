//! Stage 6 (feature `jit`): compiling the register form to machine code.
//!
//! [`Vm::compile`](crate::Vm::compile) hands each method's pre-decoded ops
//! to Cranelift. Every frame slot becomes a Cranelift variable (so slots
//! live in registers), every op index a block, and every check the
//! interpreter makes is made by the compiled code too, with the same
//! outcome: a compiled invocation returns the same result, uses the same
//! fuel, stops at the same op with the same [`Fault`], and calls the same
//! natives with the same arguments as an interpreted one. `tests/jit.rs`
//! runs every test program both ways and compares all of that.
//!
//! What the compiled code does itself: arithmetic, branches, fields, fuel
//! (one subtraction and one compare per charge, as in the interpreter), the
//! call-depth check, calls between compiled methods (direct calls,
//! arguments in registers), array accesses that pass their checks (through
//! the heap's table of element addresses, `Heap::raw`: handle, kind and
//! bounds checked inline) and calls of natives (the bound function is
//! called from a small helper, without the interpreter's argument
//! marshalling loop). Natives registered as an [`Intrinsic`] (copies
//! between a `byte[]` and the host's window, `Vm::set_window`) are
//! performed inline when every check passes and the first part of the
//! budget covers them, and called otherwise, so the native makes every
//! fault; natives registered with a sink
//! ([`Natives::register_sink`](crate::Natives::register_sink)) pass the
//! same checks and then call the sink with the bytes, and the native only
//! if it declines. What it leaves to helpers in Rust: array accesses
//! that fail a check (the helper makes the interpreter's exact fault),
//! running out of fuel (the checkpoint hook) and recording faults.
//!
//! Not compiled, so interpreted (per method, decided at compile time):
//! methods that allocate arrays (`newarray`: the collector scans the
//! interpreter's frames for roots, and a compiled frame keeps its slots in
//! registers), methods on a cycle of calls (recursion: a compiled frame
//! lives on the host thread's stack, whose size the VM does not control,
//! while the interpreter's frames live on the heap), and methods that call
//! either. An invocation whose entry method is not compiled runs in the
//! interpreter entirely.
//!
//! Bounds on compiling (a class is hostile input, and compiling it must
//! stay cheap in time and memory): also interpreted are a method of more
//! than 16 Ki decoded ops ([`MAX_METHOD_OPS`]) or more than 4096 frame
//! slots ([`MAX_METHOD_SLOTS`]: `max_locals` plus `max_stack` and a few
//! scratch slots), the methods past 64 Ki ops compiled per class
//! ([`MAX_CLASS_OPS`], in method order), a method whose ops times frame
//! slots exceed 256 Ki ([`MAX_METHOD_COST`]: the register allocator's
//! work grows with the values live across each call) and the methods past
//! 1 Mi of that per class ([`MAX_CLASS_COST`]), a method whose machine frame
//! would exceed 16 KiB ([`MAX_FRAME_BYTES`]: compiled, measured,
//! dropped), a method whose calls may take the frame stack past
//! [`MAX_STACK_SLOTS`] (the interpreter then faults where it must), and
//! the callers of all of these. Blocks are sealed as soon as every branch
//! to them is emitted, so the SSA construction stays linear in the
//! method's size.
//!
//! Machine stack: compiled frames live on the calling thread's stack. A
//! method's native calls share one argument area, and every compiled
//! method compares its stack pointer, after its prologue and before it
//! stores anything in its frame, with the invocation's limit: at most
//! [`Vm::set_machine_stack`](crate::Vm::set_machine_stack) bytes below
//! the host's call, and never within 64 KiB ([`STACK_RESERVE`]) of the
//! end of the thread's stack where the system tells it (Linux). Below the
//! limit the method returns at once, calling nothing, and the invocation
//! faults with [`Fault::StackOverflow`] (which the interpreter, whose
//! frames are on the heap, would not: the one outcome where the two may
//! differ). Frames over a page are also probed page by page (inline
//! probestack), so a frame cannot step over a guard page. The reserve is
//! for the helpers and natives compiled code calls and for a signal
//! frame.
//!
//! Protocol between compiled code and helpers: every compiled method and
//! every helper that can fail returns an `i64`, the `i32` result
//! sign-extended on success and [`FAULT`] (outside the `i32` range) after
//! recording the fault and where it happened in the invocation's [`Env`].
//! A compiled caller that sees [`FAULT`] returns it at once.

use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, Block, BlockArg, Function, InstBuilder, JumpTableData, MemFlagsData,
    Signature, StackSlot, StackSlotData, StackSlotKind, UserFuncName, Value,
};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Switch, Variable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module, ModuleReloc};

use crate::budget::{refill, switch_cost, Budget, Clock};
use crate::decode::{Arg, MethodCode, Op};
use crate::heap::{arr_fault, ArrayData, Heap, RawArr, RAW_B, RAW_FREE, RAW_I, RAW_S, RAW_Z};
use crate::model::JType;
use crate::natives::{bad_native_array, Fast, Intrinsic, NativeCtx, NativeFn, SinkFn};
use crate::subset::{Class, ClassInner};
use crate::{Fault, MAX_STACK_SLOTS};

/// What a compiled method or a failing helper returns after recording a
/// fault (any value outside the `i32` range would do).
pub(crate) const FAULT: i64 = i64::MIN;

/// The state compiled code reads and writes directly. `#[repr(C)]`: the
/// generated code addresses its fields by the offsets below.
#[repr(C)]
pub(crate) struct Ctx {
    /// Fuel left in the current part of the budget (the interpreter's
    /// `fuel` register).
    fuel: i64,
    /// The applet's fields (`State::fields`, never resized).
    fields: *mut i32,
    /// Frames suspended below the running one (the interpreter's
    /// `frames.len()`).
    depth: i64,
    /// `Limits::max_depth`, at least 1.
    max_depth: i64,
    /// The invocation's [`Env`], for helpers.
    env: *mut u8,
    /// The heap's table of arrays ([`Heap::raw`]) and its length; set
    /// again after every native call (a native may allocate, which may
    /// move the table).
    arrays: *const RawArr,
    narrays: u64,
    /// The host's window ([`crate::Vm::set_window`]): address (0 for none)
    /// and length.
    window: u64,
    window_len: u64,
    /// The lowest stack address a compiled frame may reach (see
    /// `stack_limit`): each compiled method compares its stack pointer,
    /// after its prologue, with this on entry.
    stack_limit: u64,
    /// Set (to the method's site) by a compiled method that found its
    /// frame below `stack_limit`: it returns [`FAULT`] at once, calling
    /// nothing, and [`Compiled::run`] records the stack overflow.
    overflow: i64,
}

const CTX_FUEL: i32 = 0;
const CTX_FIELDS: i32 = 8;
const CTX_DEPTH: i32 = 16;
const CTX_MAX_DEPTH: i32 = 24;
const CTX_ARRAYS: i32 = 40;
const CTX_NARRAYS: i32 = 48;
const CTX_WINDOW: i32 = 56;
const CTX_WINDOW_LEN: i32 = 64;
const CTX_STACK_LIMIT: i32 = 72;
const CTX_OVERFLOW: i32 = 80;
// The offsets above are those of the `#[repr(C)]` layouts.
const _: () = assert!(
    std::mem::offset_of!(Ctx, fuel) == CTX_FUEL as usize
        && std::mem::offset_of!(Ctx, fields) == CTX_FIELDS as usize
        && std::mem::offset_of!(Ctx, depth) == CTX_DEPTH as usize
        && std::mem::offset_of!(Ctx, max_depth) == CTX_MAX_DEPTH as usize
        && std::mem::offset_of!(Ctx, arrays) == CTX_ARRAYS as usize
        && std::mem::offset_of!(Ctx, narrays) == CTX_NARRAYS as usize
        && std::mem::offset_of!(Ctx, window) == CTX_WINDOW as usize
        && std::mem::offset_of!(Ctx, window_len) == CTX_WINDOW_LEN as usize
        && std::mem::offset_of!(Ctx, stack_limit) == CTX_STACK_LIMIT as usize
        && std::mem::offset_of!(Ctx, overflow) == CTX_OVERFLOW as usize
        && std::mem::offset_of!(RawArr, addr) == 0
        && std::mem::offset_of!(RawArr, len) == 8
        && std::mem::offset_of!(RawArr, kind) == 12
        && std::mem::size_of::<RawArr>() == 16
);

/// The interpreter-side state of one compiled invocation, reached by
/// helpers through [`Ctx::env`].
pub(crate) struct Env<'a, H> {
    pub cls: &'a ClassInner<H>,
    pub heap: &'a mut Heap,
    pub host: &'a mut H,
    /// The budget beyond `Ctx::fuel`: reserve, checkpoint and time limit
    /// (see `budget::refill`).
    pub budget: &'a mut Budget<H>,
    /// The VM's clock, read by `budget::refill` under a time limit.
    pub clock: &'a mut Option<Clock>,
    pub fault: Option<Fault>,
    /// Method and op index of the fault.
    pub site: (u32, u32),
    /// The host's window (address, length), see `Ctx::window`.
    pub window: (usize, u64),
}

/// Machine code for the methods of one class that could be compiled
/// ([`Class::compile`](crate::Class::compile)), to install in any VM
/// running that class ([`Vm::install`](crate::Vm::install)). It can be
/// made on another thread than the VM's: a host that must not stall
/// compiles in the background and installs when done.
pub struct Compiled<H> {
    /// The class compiled (kept alive, so that its identity is unique).
    pub(crate) class: std::sync::Arc<ClassInner<H>>,
    module: Option<JITModule>,
    /// Per method: the host-entry trampoline,
    /// `extern "C" fn(*mut Ctx, *const i32) -> i64` (arguments read from
    /// the slot array), if the method was compiled.
    entries: Vec<Option<*const u8>>,
}

// SAFETY: the pointers in `entries` point into `module`'s finalized code,
// which is immutable and owned by this value; executing it has no thread
// affinity. Moving the whole value to another thread moves the owner along.
#[allow(unsafe_code)]
unsafe impl<H> Send for Compiled<H> {}

impl<H> std::fmt::Debug for Compiled<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("methods", &self.count())
            .finish()
    }
}

impl<H> Drop for Compiled<H> {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            self.entries.clear();
            // SAFETY: the only pointers into the module's memory were the
            // entries just cleared; no compiled code is running (it runs
            // only inside `Compiled::run`, which borrows `self`).
            #[allow(unsafe_code)]
            unsafe {
                m.free_memory()
            };
        }
    }
}

type Entry = extern "C" fn(*mut Ctx, *const i32) -> i64;

impl<H> Compiled<H> {
    /// The compiled entry of method `m`, if any.
    #[inline]
    pub(crate) fn entry(&self, m: usize) -> Option<*const u8> {
        self.entries.get(m).copied().flatten()
    }

    /// Number of compiled methods.
    pub fn count(&self) -> usize {
        self.entries.iter().filter(|e| e.is_some()).count()
    }

    /// Run the compiled method at `entry` with its arguments at `args`,
    /// its frames within `machine_stack` bytes below this call's (see
    /// `stack_limit`). Returns the result or [`FAULT`], and leaves the
    /// fuel left in `ctx`.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run(
        &self,
        entry: *const u8,
        fuel: i64,
        fields: &mut [i32],
        max_depth: i64,
        machine_stack: usize,
        env: &mut Env<'_, H>,
        args: &[i32],
    ) -> (i64, i64) {
        let mut ctx = Ctx {
            stack_limit: stack_limit(machine_stack),
            overflow: 0,
            fuel,
            fields: fields.as_mut_ptr(),
            depth: 0,
            max_depth,
            arrays: env.heap.raw.as_ptr(),
            narrays: env.heap.raw.len() as u64,
            window: env.window.0 as u64,
            window_len: env.window.1,
            env: env as *mut Env<'_, H> as *mut u8,
        };
        // SAFETY: `entry` is a trampoline of this module (see `entries`),
        // generated with exactly the `Entry` signature for the target's
        // default calling convention. It reads the method's `nargs`
        // arguments from `args` (the caller passes the slot array, which
        // holds at least the entry method's frame, so at least `nargs`
        // slots), reads and writes `ctx`, the `fields` array within the
        // class's field count (field indices were checked at decode), and
        // calls only this module's functions and the helpers below with
        // `ctx`, whose `env` is `env` with the type `H` the helpers were
        // instantiated with.
        #[allow(unsafe_code)]
        let f: Entry = unsafe { std::mem::transmute::<*const u8, Entry>(entry) };
        let r = f(&mut ctx, args.as_ptr());
        if r == FAULT && env.fault.is_none() && ctx.overflow != 0 {
            record(env, Fault::StackOverflow, ctx.overflow & !OVERFLOW_FLAG);
        }
        (r, ctx.fuel)
    }
}

// -------------------------------------------------------------------------
// The machine-stack budget
// -------------------------------------------------------------------------

/// Marks `Ctx::overflow` as set (a site may be 0).
const OVERFLOW_FLAG: i64 = 1 << 62;

/// Stack kept free below the lowest compiled frame, for the helpers and
/// natives compiled code calls, a signal frame, and the part of a frame
/// (at most [`MAX_FRAME_BYTES`]) a prologue allocates before the method's
/// check runs.
pub(crate) const STACK_RESERVE: usize = 64 * 1024;

/// The lowest address compiled frames of an invocation entered here may
/// reach: `budget` bytes below the current stack pointer, and never less
/// than [`STACK_RESERVE`] above the lowest address of this thread's stack
/// (where the system tells it; Linux). A thread already too deep gets a
/// limit above its stack pointer: the first compiled method faults.
#[inline]
fn stack_limit(budget: usize) -> u64 {
    let marker = 0u8;
    let sp = std::hint::black_box(&marker) as *const u8 as usize;
    let floor = thread_stack_low().map_or(0, |lo| lo.saturating_add(STACK_RESERVE));
    sp.saturating_sub(budget).max(floor) as u64
}

/// The lowest address of the calling thread's stack, if known (looked up
/// once per thread).
#[inline]
fn thread_stack_low() -> Option<usize> {
    thread_local! {
        // usize::MAX: not looked up yet; 0: unknown.
        static LOW: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
    }
    let lo = LOW.with(|c| {
        let v = c.get();
        if v != usize::MAX {
            return v;
        }
        let v = query_stack_low().unwrap_or(0);
        c.set(v);
        v
    });
    (lo != 0).then_some(lo)
}

#[cfg(target_os = "linux")]
#[cold]
fn query_stack_low() -> Option<usize> {
    // SAFETY: `pthread_getattr_np` fills the attribute object it is given
    // for the calling thread (initialised by it, destroyed here after
    // use); `pthread_attr_getstack` reads it into the two locals.
    #[allow(unsafe_code)]
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        (ok && !addr.is_null()).then_some(addr as usize)
    }
}

#[cfg(not(target_os = "linux"))]
fn query_stack_low() -> Option<usize> {
    None
}

// -------------------------------------------------------------------------
// Helpers called by compiled code
// -------------------------------------------------------------------------

/// The context and environment behind a helper's `ctx` argument.
///
/// # Safety
/// `ctx` is the pointer `Compiled::run` passed to compiled code, whose
/// `env` is an `Env<H>` of this `H`, both alive for the call.
#[allow(unsafe_code)]
unsafe fn parts<'a, H>(ctx: *mut Ctx) -> (&'a mut Ctx, &'a mut Env<'a, H>) {
    // SAFETY: by the function's contract. Compiled code holds no Rust
    // references into either while a helper runs.
    unsafe {
        let c = &mut *ctx;
        let e = &mut *(c.env as *mut Env<'a, H>);
        (c, e)
    }
}

fn record<H>(env: &mut Env<'_, H>, f: Fault, site: i64) -> i64 {
    env.fault = Some(f);
    env.site = ((site as u64 >> 32) as u32, site as u32);
    FAULT
}

/// Fuel went below zero at `site`: take the next part of the budget
/// (passing the checkpoint, reading the clock), or fault.
extern "C" fn h_spent<H>(ctx: *mut Ctx, site: i64) -> i64 {
    // SAFETY: called by compiled code with its context (see `parts`).
    #[allow(unsafe_code)]
    let (c, env) = unsafe { parts::<H>(ctx) };
    match spent(&mut c.fuel, env) {
        None => 0,
        Some(f) => record(env, f, site),
    }
}

/// The interpreter's `spent!`: the fault that stops the invocation, if any.
fn spent<H>(fuel: &mut i64, env: &mut Env<'_, H>) -> Option<Fault> {
    let (left, f) = refill(*fuel, env.budget, env.clock, env.host);
    *fuel = left;
    f
}

const K_DIV0: i64 = 0;
const K_NULL: i64 = 1;
const K_DEPTH: i64 = 2;

/// A fault the compiled code detected itself.
extern "C" fn h_fault<H>(ctx: *mut Ctx, kind: i64, site: i64) -> i64 {
    // SAFETY: called by compiled code with its context (see `parts`).
    #[allow(unsafe_code)]
    let (_, env) = unsafe { parts::<H>(ctx) };
    let f = match kind {
        K_DIV0 => Fault::DivideByZero,
        K_NULL => Fault::NullPointer,
        K_DEPTH => Fault::StackOverflow,
        _ => Fault::Internal(format!("compiled code reported fault kind {kind}")),
    };
    record(env, f, site)
}

const A_INT: i64 = 0;
const A_BYTE: i64 = 1;
const A_SHORT: i64 = 2;
const A_BOOL: i64 = 3;

/// `iaload` / `baload` / `saload` (`kind`: `A_INT`, `A_BYTE` for `byte[]`
/// or `boolean[]`, `A_SHORT`).
extern "C" fn h_aload<H>(ctx: *mut Ctx, kind: i64, h: i32, i: i32, site: i64) -> i64 {
    // SAFETY: called by compiled code with its context (see `parts`).
    #[allow(unsafe_code)]
    let (_, env) = unsafe { parts::<H>(ctx) };
    let a = env.heap.arrays.get((h as u32 as usize).wrapping_sub(1));
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
extern "C" fn h_astore<H>(ctx: *mut Ctx, kind: i64, h: i32, i: i32, x: i32, site: i64) -> i64 {
    // SAFETY: called by compiled code with its context (see `parts`).
    #[allow(unsafe_code)]
    let (_, env) = unsafe { parts::<H>(ctx) };
    /// Store `x` at `i`, or the length if `i` is out of bounds.
    fn put<T>(v: &mut [T], i: i32, x: T) -> Result<(), usize> {
        let len = v.len();
        v.get_mut(i as u32 as usize).map(|e| *e = x).ok_or(len)
    }
    let stored = match (
        kind,
        env.heap.arrays.get_mut((h as u32 as usize).wrapping_sub(1)),
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
extern "C" fn h_arrlen<H>(ctx: *mut Ctx, h: i32, site: i64) -> i64 {
    // SAFETY: called by compiled code with its context (see `parts`).
    #[allow(unsafe_code)]
    let (_, env) = unsafe { parts::<H>(ctx) };
    match env.heap.get(h) {
        Some(a) => a.len() as i64,
        None => record(env, arr_fault(h), site),
    }
}

/// A native call: the interpreter's `CallNative`, fuel included, for a
/// native that may return an array (its result is checked as the
/// interpreter checks it).
extern "C" fn h_native<H>(ctx: *mut Ctx, n: i64, args: *const i32, argc: i64, site: i64) -> i64 {
    // SAFETY: called by compiled code with its context (see `parts`).
    #[allow(unsafe_code)]
    let (c, env) = unsafe { parts::<H>(ctx) };
    let cls = env.cls;
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
extern "C" fn h_native_int<H>(
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
    env: &mut Env<'_, H>,
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
    let mut left = c.fuel + env.budget.reserve;
    let r = f(
        env.host,
        &mut NativeCtx {
            heap: env.heap,
            fuel: &mut left,
        },
        args,
    );
    c.fuel = left - env.budget.reserve;
    // The native may have allocated: the table may have moved or grown.
    c.arrays = env.heap.raw.as_ptr();
    c.narrays = env.heap.raw.len() as u64;
    let v = match r {
        Ok(v) => v,
        Err(f) => return native_fault(env, *f, site),
    };
    if let Some(f) = check(env.heap, v) {
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
extern "C" fn h_copy(dst: *mut u8, src: *const u8, n: u64) -> i64 {
    // SAFETY: compiled code checked that `src` and `dst` each span `n`
    // bytes inside a live byte array of the heap or inside the host's
    // window (valid and disjoint from the heap: `Vm::set_window`).
    #[allow(unsafe_code)]
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, n as usize)
    };
    0
}

/// A sink's call (see `Gen::sink_call`): 1 if it accepted, 0 if it
/// declined.
extern "C" fn h_sink<H>(ctx: *mut Ctx, f: *const (), p: *const u8, n: u64, x: i32) -> i64 {
    // SAFETY: compiled code passes a `SinkFn<H>` of the class it was
    // compiled from, with the same `H` this helper was instantiated with.
    #[allow(unsafe_code)]
    let f = unsafe { std::mem::transmute::<*const (), SinkFn<H>>(f) };
    // SAFETY: called by compiled code with its context (see `parts`).
    #[allow(unsafe_code)]
    let (_, env) = unsafe { parts::<H>(ctx) };
    // SAFETY: compiled code checked that `p` spans `n` bytes inside a live
    // byte array of the heap, which the host state does not reach, and
    // nothing can free or move it during the call (a sink has no access
    // to the heap).
    #[allow(unsafe_code)]
    let bytes = unsafe { std::slice::from_raw_parts(p, n as usize) };
    f(env.host, bytes, x) as i64
}

#[cold]
#[inline(never)]
fn native_fault<H>(env: &mut Env<'_, H>, f: Fault, site: i64) -> i64 {
    record(env, f, site)
}

// -------------------------------------------------------------------------
// Compilation
// -------------------------------------------------------------------------

/// Longest method compiled, in decoded ops; longer ones are interpreted.
pub(crate) const MAX_METHOD_OPS: usize = 16 * 1024;
/// Largest frame of a method compiled, in slots (`max_locals` plus
/// `max_stack` and a few scratch slots); larger ones are interpreted.
pub(crate) const MAX_METHOD_SLOTS: usize = 4096;
/// Most decoded ops compiled per class: methods past this, in order, are
/// interpreted.
pub(crate) const MAX_CLASS_OPS: usize = 64 * 1024;
/// Largest method compiled by its ops times its frame slots: the register
/// allocator's work grows with the values live across each call (helper
/// calls on slow paths included), so a method of many slots must be short.
pub(crate) const MAX_METHOD_COST: usize = 256 * 1024;
/// Most of that cost compiled per class (methods past it, in order, are
/// interpreted).
pub(crate) const MAX_CLASS_COST: usize = 1024 * 1024;

/// The compile cost of `mc` (see [`MAX_METHOD_COST`]).
fn cost(mc: &MethodCode) -> usize {
    mc.ops.len().saturating_mul(mc.frame_size as usize)
}
/// Largest machine frame of a compiled method, in bytes; a method whose
/// code needs more is interpreted.
pub(crate) const MAX_FRAME_BYTES: u32 = 16 * 1024;

/// Which methods can be compiled (see the module documentation), given
/// those already refused (`refused`, for a frame too large).
fn compilable<H>(cls: &ClassInner<H>, refused: &[bool]) -> Vec<bool> {
    let n = cls.code.len();
    let calls = |m: usize| {
        cls.code[m].ops.iter().filter_map(|op| match *op {
            Op::Call { m, .. } if (m as usize) < n => Some(m as usize),
            _ => None,
        })
    };
    let mut ok: Vec<bool> = cls
        .code
        .iter()
        .enumerate()
        .map(|(m, mc)| {
            !refused.get(m).copied().unwrap_or(false)
                && mc.ops.len() <= MAX_METHOD_OPS
                && (mc.frame_size as usize) <= MAX_METHOD_SLOTS
                && cost(mc) <= MAX_METHOD_COST
                && !mc.ops.iter().any(|op| matches!(op, Op::NewArray { .. }))
                && mc.ops.iter().all(|op| match *op {
                    Op::Call { m, .. } => (m as usize) < n,
                    _ => true,
                })
        })
        .collect();
    // The class's budget, in method order.
    let (mut total, mut total_cost) = (0, 0);
    for (m, ok_m) in ok.iter_mut().enumerate() {
        if *ok_m {
            total += cls.code[m].ops.len();
            total_cost += cost(&cls.code[m]);
            *ok_m = total <= MAX_CLASS_OPS && total_cost <= MAX_CLASS_COST;
        }
    }
    // Methods on a cycle of calls: those from which a call path returns.
    for (m, ok_m) in ok.iter_mut().enumerate() {
        let mut seen = vec![false; n];
        let mut todo: Vec<usize> = calls(m).collect();
        while let Some(x) = todo.pop() {
            if x == m {
                *ok_m = false;
                break;
            }
            if !std::mem::replace(&mut seen[x], true) {
                todo.extend(calls(x));
            }
        }
    }
    propagate(cls, &mut ok, calls);
    // The frame-slot limit: entered at slot 0, method m's calls reach at
    // most `need[m]` slots (the interpreter's frame stack; the compiled
    // call graph has no cycle). A method that may pass `MAX_STACK_SLOTS`
    // is interpreted, which faults exactly where it must.
    let mut need: Vec<Option<usize>> = vec![None; n];
    for m in 0..n {
        if ok[m] {
            slots_needed(cls, m, &ok, &mut need);
        }
    }
    for m in 0..n {
        if need[m].is_some_and(|k| k > MAX_STACK_SLOTS) {
            ok[m] = false;
        }
    }
    propagate(cls, &mut ok, calls);
    ok
}

/// Callers of methods that cannot be compiled cannot be either.
fn propagate<H, I: Iterator<Item = usize>>(
    cls: &ClassInner<H>,
    ok: &mut [bool],
    calls: impl Fn(usize) -> I,
) {
    loop {
        let mut changed = false;
        for m in 0..cls.code.len() {
            if ok[m] && calls(m).any(|c| !ok[c]) {
                ok[m] = false;
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}

/// The most frame slots an invocation of `m` (compilable, so acyclic
/// below) occupies counting from its frame's first slot, saturating;
/// memoised in `need`. Iterative: a chain of calls may be long.
fn slots_needed<H>(cls: &ClassInner<H>, m: usize, ok: &[bool], need: &mut [Option<usize>]) {
    let mut todo = vec![m];
    while let Some(&x) = todo.last() {
        if need[x].is_some() {
            todo.pop();
            continue;
        }
        let mc = &cls.code[x];
        let mut pending = false;
        let mut most = mc.frame_size as usize;
        for op in &mc.ops {
            if let Op::Call { m: c, at } = *op {
                let c = c as usize;
                if !ok.get(c).copied().unwrap_or(false) {
                    continue;
                }
                match need[c] {
                    Some(k) => most = most.max((at as usize).saturating_add(k)),
                    None => {
                        todo.push(c);
                        pending = true;
                    }
                }
            }
        }
        if !pending {
            need[x] = Some(most);
            todo.pop();
        }
    }
}

impl<H> Class<H> {
    /// Compile the class's methods to machine code for
    /// [`Vm::install`](crate::Vm::install) (feature `jit`; see
    /// [`Vm::compile`](crate::Vm::compile) for what is compiled). Takes
    /// some milliseconds: a host that must not stall calls it on another
    /// thread.
    pub fn compile(&self) -> Result<Compiled<H>, String> {
        compile(&self.inner)
    }
}

/// Compile what can be compiled of `cls` for the host type `H`.
pub(crate) fn compile<H>(class: &std::sync::Arc<ClassInner<H>>) -> Result<Compiled<H>, String> {
    let cls = &**class;
    let ok = compilable(cls, &[]);
    let mut flags = settings::builder();
    let set = |f: &mut settings::Builder, k: &str, v: &str| {
        f.set(k, v)
            .map_err(|e| format!("cranelift setting {k}: {e}"))
    };
    set(&mut flags, "opt_level", "speed")?;
    set(&mut flags, "use_colocated_libcalls", "false")?;
    set(&mut flags, "is_pic", "false")?;
    // Frames over a page are probed page by page as they are allocated,
    // so that even a stack whose bounds the VM does not know (see
    // `stack_limit`) cannot be stepped over; with frames at most
    // `MAX_FRAME_BYTES`, that is at most four probes, inline.
    set(&mut flags, "enable_probestack", "true")?;
    set(&mut flags, "probestack_strategy", "inline")?;
    let isa = cranelift_native::builder()
        .map_err(|e| format!("this machine is not supported by the compiler: {e}"))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| format!("compiler set-up: {e}"))?;
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let ptr = module.target_config().pointer_type();

    // Declare every compiled method and its entry trampoline first, so
    // that calls can refer to any of them.
    let mut bodies: Vec<Option<FuncId>> = Vec::with_capacity(cls.code.len());
    let mut tramps: Vec<Option<FuncId>> = Vec::with_capacity(cls.code.len());
    for (m, mc) in cls.code.iter().enumerate() {
        if !ok[m] {
            bodies.push(None);
            tramps.push(None);
            continue;
        }
        let sig = body_sig(&module, mc.nargs);
        let b = module
            .declare_function(&format!("m{m}"), Linkage::Local, &sig)
            .map_err(|e| e.to_string())?;
        let tsig = tramp_sig(&module);
        let t = module
            .declare_function(&format!("t{m}"), Linkage::Local, &tsig)
            .map_err(|e| e.to_string())?;
        bodies.push(Some(b));
        tramps.push(Some(t));
    }

    // Compile the bodies; keep their code until every frame is known.
    let mut ctx = module.make_context();
    let mut fbc = FunctionBuilderContext::new();
    let mut code: Vec<Option<Body>> = (0..cls.code.len()).map(|_| None).collect();
    let mut refused = ok.iter().map(|&o| !o).collect::<Vec<bool>>();
    let mut any_refused = false;
    for (m, mc) in cls.code.iter().enumerate() {
        let Some(b) = bodies[m] else {
            continue;
        };
        ctx.func = Function::with_name_signature(
            UserFuncName::user(0, b.as_u32()),
            body_sig(&module, mc.nargs),
        );
        {
            let mut g = Gen {
                b: FunctionBuilder::new(&mut ctx.func, &mut fbc),
                cls,
                m,
                mc,
                ptr,
                vars: Vec::new(),
                blocks: Vec::new(),
                ctx: None,
                fields: None,
                fault_ret: None,
                args_slot: None,
                sealed: Vec::new(),
                local: Vec::new(),
            };
            g.method(&mut module, &bodies)?;
            g.b.finalize(module.target_config());
        }
        let isa = module.isa();
        ctx.compile(isa, &mut ControlPlane::default())
            .map_err(|e| format!("compiling {}: {:?}", mc.name, e.inner))?;
        let done = ctx.compiled_code().ok_or("no compiled code")?;
        let frame = done
            .buffer
            .frame_layout()
            .map(|l| l.frame_to_fp_offset)
            .unwrap_or(u32::MAX);
        if frame > MAX_FRAME_BYTES {
            refused[m] = true;
            any_refused = true;
        } else {
            let align = (done.buffer.alignment as u64)
                .max(isa.function_alignment().minimum as u64)
                .max(isa.symbol_alignment());
            let relocs = done
                .buffer
                .relocs()
                .iter()
                .map(|r| ModuleReloc::from_mach_reloc(r, &ctx.func, b))
                .collect();
            code[m] = Some(Body {
                bytes: done.code_buffer().to_vec(),
                align,
                relocs,
            });
        }
        module.clear_context(&mut ctx);
    }
    // Methods whose frame is too large, and their callers, are
    // interpreted (their code, never defined, is dropped).
    let ok = if any_refused {
        compilable(cls, &refused)
    } else {
        ok
    };

    for (m, mc) in cls.code.iter().enumerate() {
        let (true, Some(b), Some(t), Some(body)) = (ok[m], bodies[m], tramps[m], code[m].take())
        else {
            tramps[m] = None;
            continue;
        };
        module
            .define_function_bytes(b, body.align, &body.bytes, &body.relocs)
            .map_err(|e| format!("compiling {}: {e:?}", mc.name))?;

        // The trampoline: load the arguments from the slot array and call.
        ctx.func =
            Function::with_name_signature(UserFuncName::user(0, t.as_u32()), tramp_sig(&module));
        {
            let mut fb = FunctionBuilder::new(&mut ctx.func, &mut fbc);
            let blk = fb.create_block();
            fb.append_block_params_for_function_params(blk);
            fb.switch_to_block(blk);
            let (c, argp) = (fb.block_params(blk)[0], fb.block_params(blk)[1]);
            let mut args = vec![c];
            for i in 0..mc.nargs as i32 {
                args.push(
                    fb.ins()
                        .load(types::I32, MemFlagsData::trusted(), argp, 4 * i),
                );
            }
            let callee = module.declare_func_in_func(b, fb.func);
            let call = fb.ins().call(callee, &args);
            let r = fb.inst_results(call)[0];
            fb.ins().return_(&[r]);
            fb.seal_all_blocks();
            fb.finalize(module.target_config());
        }
        module
            .define_function(t, &mut ctx)
            .map_err(|e| format!("compiling the entry of {}: {e:?}", mc.name))?;
        module.clear_context(&mut ctx);
    }
    module
        .finalize_definitions()
        .map_err(|e| format!("linking compiled code: {e}"))?;
    let entries = tramps
        .iter()
        .map(|t| t.map(|t| module.get_finalized_function(t)))
        .collect();
    Ok(Compiled {
        class: std::sync::Arc::clone(class),
        module: Some(module),
        entries,
    })
}

/// A method's machine code, compiled but not yet defined in the module.
struct Body {
    bytes: Vec<u8>,
    align: u64,
    relocs: Vec<ModuleReloc>,
}

fn body_sig(module: &JITModule, nargs: u16) -> Signature {
    let mut s = module.make_signature();
    s.params
        .push(AbiParam::new(module.target_config().pointer_type()));
    for _ in 0..nargs {
        s.params.push(AbiParam::new(types::I32));
    }
    s.returns.push(AbiParam::new(types::I64));
    s
}

fn tramp_sig(module: &JITModule) -> Signature {
    let p = module.target_config().pointer_type();
    let mut s = module.make_signature();
    s.params.push(AbiParam::new(p));
    s.params.push(AbiParam::new(p));
    s.returns.push(AbiParam::new(types::I64));
    s
}

/// The ops control may go to from op `i` of `mc`.
fn successors(mc: &MethodCode, i: usize) -> Vec<u32> {
    let mut v = Vec::new();
    let op = &mc.ops[i];
    v.extend(op.target());
    match *op {
        // A fused increment-and-branch also goes on two ops down.
        Op::IncLt { .. }
        | Op::IncLe { .. }
        | Op::IncNe { .. }
        | Op::IncGt { .. }
        | Op::IncGe { .. } => v.push(i as u32 + 2),
        Op::Switch { tab, .. } => {
            if let Some(st) = mc.switches.get(tab as usize) {
                v.push(st.default);
                v.extend_from_slice(&st.targets);
            }
        }
        _ => {}
    }
    if !op.is_terminator() {
        v.push(i as u32 + 1);
    }
    v
}

/// What [`Gen::byte_range`] found (Cranelift values).
struct ByteRange {
    /// Every check but the liveness of the array held.
    ok: Value,
    /// The address of `a[aoff]`.
    at: Value,
    /// The length, as an `i64`.
    n: Value,
    /// The fuel left after the call's charge.
    left: Value,
}

/// Code generation for one method.
struct Gen<'a, 'f, H> {
    b: FunctionBuilder<'f>,
    cls: &'a ClassInner<H>,
    m: usize,
    mc: &'a MethodCode,
    ptr: types::Type,
    vars: Vec<Variable>,
    blocks: Vec<Block>,
    ctx: Option<Value>,
    fields: Option<Value>,
    fault_ret: Option<Block>,
    /// The one stack slot every native call of the method passes its
    /// arguments in (sized for the call with the most).
    args_slot: Option<StackSlot>,
    /// Per op: whether its block is sealed (no branch to it may follow).
    sealed: Vec<bool>,
    /// Blocks made inside the op being emitted: all their predecessors
    /// are in it, so they are sealed after it.
    local: Vec<Block>,
}

impl<H> Gen<'_, '_, H> {
    fn site(&self, i: usize) -> i64 {
        ((self.m as i64) << 32) | i as i64
    }
    fn ctx(&self) -> Value {
        self.ctx.expect("set at entry")
    }
    fn var(&mut self, s: u16) -> Value {
        self.b.use_var(self.vars[s as usize])
    }
    fn set(&mut self, s: u16, v: Value) {
        self.b.def_var(self.vars[s as usize], v);
    }
    /// A new block inside the op being emitted (sealed after it).
    fn block(&mut self) -> Block {
        let b = self.b.create_block();
        self.local.push(b);
        b
    }
    fn k(&mut self, v: i64) -> Value {
        self.b.ins().iconst(types::I64, v)
    }
    fn k32(&mut self, v: i32) -> Value {
        self.b.ins().iconst(types::I32, v as i64)
    }

    /// Call helper `f` (an `extern "C"` function) with `args`, returning
    /// its `i64` result.
    fn helper(&mut self, f: *const u8, params: &[types::Type], args: &[Value]) -> Value {
        let mut sig = Signature::new(self.b.func.signature.call_conv);
        for &p in params {
            sig.params.push(AbiParam::new(p));
        }
        sig.returns.push(AbiParam::new(types::I64));
        let sr = self.b.import_signature(sig);
        let fp = self.b.ins().iconst(self.ptr, f as i64);
        let call = self.b.ins().call_indirect(sr, fp, args);
        self.b.inst_results(call)[0]
    }

    /// Branch to the fault return if `r` is [`FAULT`].
    fn check(&mut self, r: Value) {
        let bad = self.b.ins().icmp_imm_s(IntCC::Equal, r, FAULT);
        let ok = self.block();
        let fr = self.fault_ret.expect("set at entry");
        self.b.ins().brif(bad, fr, &[], ok, &[]);
        self.b.switch_to_block(ok);
    }

    /// Record a fault of `kind` at op `i` and return [`FAULT`].
    fn fault_if(&mut self, cond: Value, kind: i64, i: usize) {
        let bad = self.block();
        let ok = self.block();
        self.b.ins().brif(cond, bad, &[], ok, &[]);
        self.b.switch_to_block(bad);
        let (c, k, s) = (self.ctx(), self.k(kind), self.k(self.site(i)));
        let f = h_fault::<H> as extern "C" fn(*mut Ctx, i64, i64) -> i64 as *const u8;
        let r = self.helper(f, &[self.ptr, types::I64, types::I64], &[c, k, s]);
        self.b.ins().return_(&[r]);
        self.b.switch_to_block(ok);
    }

    /// Charge `units` of fuel at op `i`.
    fn charge(&mut self, units: i64, i: usize) {
        let c = self.ctx();
        let f = self
            .b
            .ins()
            .load(types::I64, MemFlagsData::trusted(), c, CTX_FUEL);
        let f = self.b.ins().iadd_imm_s(f, -units);
        self.b.ins().store(MemFlagsData::trusted(), f, c, CTX_FUEL);
        let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, f, 0);
        let slow = self.block();
        let ok = self.block();
        self.b.ins().brif(neg, slow, &[], ok, &[]);
        self.b.set_cold_block(slow);
        self.b.switch_to_block(slow);
        let s = self.k(self.site(i));
        let h = h_spent::<H> as extern "C" fn(*mut Ctx, i64) -> i64 as *const u8;
        let r = self.helper(h, &[self.ptr, types::I64], &[c, s]);
        self.check(r);
        self.b.ins().jump(ok, &[]);
        self.b.switch_to_block(ok);
    }

    /// Jump from op `i` to op `t`, charging a backward jump as the
    /// interpreter does (the ops from `t` to `i`).
    fn goto(&mut self, i: usize, t: u32) -> Result<(), String> {
        let tb = self.target(t)?;
        if (t as usize) <= i {
            self.charge((i + 1 - t as usize) as i64, i);
        }
        self.b.ins().jump(tb, &[]);
        Ok(())
    }

    fn target(&self, t: u32) -> Result<Block, String> {
        if self.sealed.get(t as usize) == Some(&true) {
            return Err(format!(
                "internal: branch to op {t} of {} after its block was sealed",
                self.mc.name
            ));
        }
        self.blocks
            .get(t as usize)
            .copied()
            .ok_or_else(|| format!("branch target {t} past the end of {}", self.mc.name))
    }

    /// `if cond goto t else goto next`, from op `i`.
    fn branch(&mut self, cond: Value, i: usize, t: u32, next: usize) -> Result<(), String> {
        let taken = self.block();
        let nb = self.target(next as u32)?;
        self.b.ins().brif(cond, taken, &[], nb, &[]);
        self.b.switch_to_block(taken);
        self.goto(i, t)
    }

    fn method<M: Module>(
        &mut self,
        module: &mut M,
        bodies: &[Option<FuncId>],
    ) -> Result<(), String> {
        let mc = self.mc;
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        self.b.seal_block(entry);
        let params = self.b.block_params(entry).to_vec();
        self.ctx = Some(params[0]);
        let c = self.ctx();

        // The machine-stack check, before anything is stored in the frame:
        // a frame below the invocation's limit returns at once, calling
        // nothing (see `Ctx::overflow`).
        let fl = MemFlagsData::trusted();
        let sp = self.b.ins().get_stack_pointer(self.ptr);
        let lim = self.b.ins().load(self.ptr, fl, c, CTX_STACK_LIMIT);
        let low = self.b.ins().icmp(IntCC::UnsignedLessThan, sp, lim);
        let over = self.b.create_block();
        let body = self.b.create_block();
        self.b.ins().brif(low, over, &[], body, &[]);
        self.b.set_cold_block(over);
        self.b.switch_to_block(over);
        self.b.seal_block(over);
        let site = self.k(self.site(0) | OVERFLOW_FLAG);
        self.b.ins().store(fl, site, c, CTX_OVERFLOW);
        let f = self.k(FAULT);
        self.b.ins().return_(&[f]);
        self.b.switch_to_block(body);
        self.b.seal_block(body);

        // Slots other than the arguments are never read before they are
        // written (the verifier's initialised-locals rule), so they get no
        // initial definition.
        for s in 0..mc.frame_size as usize {
            let v = self.b.declare_var(types::I32);
            self.vars.push(v);
            if s < mc.nargs as usize {
                if let Some(&p) = params.get(1 + s) {
                    self.b.def_var(v, p);
                }
            }
        }
        let argc = mc
            .ops
            .iter()
            .map(|op| match *op {
                Op::CallNative { argc, .. } => argc as u32,
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        if mc.ops.iter().any(|op| matches!(op, Op::CallNative { .. })) {
            self.args_slot = Some(self.b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                4 * argc.max(1),
                2,
            )));
        }
        self.fields = Some(self.b.ins().load(self.ptr, fl, c, CTX_FIELDS));
        let fault_ret = self.b.create_block();
        self.fault_ret = Some(fault_ret);
        self.blocks = (0..mc.ops.len()).map(|_| self.b.create_block()).collect();
        self.sealed = vec![false; mc.ops.len()];
        let first = self.target(0)?;
        self.b.ins().jump(first, &[]);

        // Each op's block is sealed as soon as every branch to it has been
        // emitted, so that the SSA construction never carries a slot
        // through a chain of unfinished blocks (which made its cost grow
        // with the square of the method's size).
        let mut last = vec![0usize; mc.ops.len()];
        for i in 0..mc.ops.len() {
            for t in successors(mc, i) {
                if let Some(l) = last.get_mut(t as usize) {
                    *l = (*l).max(i + 1);
                }
            }
        }
        let mut seal_after: Vec<Vec<usize>> = vec![Vec::new(); mc.ops.len() + 1];
        for (t, &l) in last.iter().enumerate() {
            seal_after[l].push(t);
        }
        self.seal(&seal_after[0]);
        for i in 0..mc.ops.len() {
            let blk = self.blocks[i];
            self.b.switch_to_block(blk);
            if self.op(i, module, bodies)? {
                let next = self.target(i as u32 + 1)?;
                self.b.ins().jump(next, &[]);
            }
            for b in std::mem::take(&mut self.local) {
                self.b.seal_block(b);
            }
            self.seal(&seal_after[i + 1]);
        }

        self.b.switch_to_block(fault_ret);
        let f = self.k(FAULT);
        self.b.ins().return_(&[f]);
        self.b.seal_all_blocks();
        Ok(())
    }

    /// Seal the blocks of ops `ts`.
    fn seal(&mut self, ts: &[usize]) {
        for &t in ts {
            self.b.seal_block(self.blocks[t]);
            self.sealed[t] = true;
        }
    }

    fn field_addr(&mut self, f: u16) -> Result<(Value, i32), String> {
        if f as usize >= self.cls.field_init.len() {
            return Err(format!("field {f} out of range in {}", self.mc.name));
        }
        Ok((self.fields.expect("set at entry"), 4 * f as i32))
    }

    fn ret(&mut self, v: Value) {
        let w = self.b.ins().sextend(types::I64, v);
        self.b.ins().return_(&[w]);
    }

    /// Emit op `i`; true if it falls through to op `i + 1`.
    fn op<M: Module>(
        &mut self,
        i: usize,
        module: &mut M,
        bodies: &[Option<FuncId>],
    ) -> Result<bool, String> {
        let mc = self.mc;
        macro_rules! bin {
            ($d:expr, $a:expr, $b:expr, $f:ident) => {{
                let (x, y) = (self.var($a), self.var($b));
                let r = self.b.ins().$f(x, y);
                self.set($d, r);
            }};
        }
        macro_rules! bini {
            ($d:expr, $a:expr, $v:expr, $f:ident) => {{
                let x = self.var($a);
                let y = self.k32($v);
                let r = self.b.ins().$f(x, y);
                self.set($d, r);
            }};
        }
        macro_rules! cmp {
            ($cc:expr, $a:expr, $b:expr, $t:expr) => {{
                let (x, y) = (self.var($a), self.var($b));
                let c = self.b.ins().icmp($cc, x, y);
                self.branch(c, i, $t, i + 1)?;
                return Ok(false);
            }};
        }
        macro_rules! cmpi {
            ($cc:expr, $a:expr, $v:expr, $t:expr) => {{
                let x = self.var($a);
                let c = self.b.ins().icmp_imm_s($cc, x, $v as i64);
                self.branch(c, i, $t, i + 1)?;
                return Ok(false);
            }};
        }
        macro_rules! incbr {
            ($cc:expr, $x:expr, $v:expr, $b:expr, $t:expr) => {{
                let x = self.var($x);
                let y = self.b.ins().iadd_imm_s(x, $v as i64);
                self.set($x, y);
                let lim = self.var($b);
                let c = self.b.ins().icmp($cc, y, lim);
                self.branch(c, i, $t, i + 2)?;
                return Ok(false);
            }};
        }
        match mc.ops[i] {
            Op::Mov { d, s } => {
                let v = self.var(s);
                self.set(d, v);
            }
            Op::Const { d, v } => {
                let v = self.k32(v);
                self.set(d, v);
            }
            Op::Add { d, a, b } => bin!(d, a, b, iadd),
            Op::Sub { d, a, b } => bin!(d, a, b, isub),
            Op::Mul { d, a, b } => bin!(d, a, b, imul),
            Op::Div { d, a, b } | Op::Rem { d, a, b } => {
                let rem = matches!(mc.ops[i], Op::Rem { .. });
                let (x, y) = (self.var(a), self.var(b));
                let z = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
                self.fault_if(z, K_DIV0, i);
                let r = self.div(x, y, rem);
                self.set(d, r);
            }
            Op::And { d, a, b } => bin!(d, a, b, band),
            Op::Or { d, a, b } => bin!(d, a, b, bor),
            Op::Xor { d, a, b } => bin!(d, a, b, bxor),
            Op::Shl { d, a, b } => bin!(d, a, b, ishl),
            Op::Shr { d, a, b } => bin!(d, a, b, sshr),
            Op::Ushr { d, a, b } => bin!(d, a, b, ushr),
            Op::AddI { d, a, v } => bini!(d, a, v, iadd),
            Op::SubIR { d, v, b } => {
                let (x, y) = (self.k32(v), self.var(b));
                let r = self.b.ins().isub(x, y);
                self.set(d, r);
            }
            Op::MulI { d, a, v } => bini!(d, a, v, imul),
            Op::DivI { d, a, v } => self.div_const(d, a, v, false)?,
            Op::RemI { d, a, v } => self.div_const(d, a, v, true)?,
            Op::DivM { d, a, k } | Op::RemM { d, a, k } => {
                let rem = matches!(mc.ops[i], Op::RemM { .. });
                let v = mc
                    .divs
                    .get(k as usize)
                    .ok_or_else(|| format!("division constant {k} missing"))?
                    .divisor;
                self.div_const(d, a, v, rem)?
            }
            Op::AndI { d, a, v } => bini!(d, a, v, band),
            Op::OrI { d, a, v } => bini!(d, a, v, bor),
            Op::XorI { d, a, v } => bini!(d, a, v, bxor),
            Op::ShlI { d, a, v } => bini!(d, a, v, ishl),
            Op::ShrI { d, a, v } => bini!(d, a, v, sshr),
            Op::UshrI { d, a, v } => bini!(d, a, v, ushr),
            Op::Neg { d, s } => {
                let x = self.var(s);
                let r = self.b.ins().ineg(x);
                self.set(d, r);
            }
            Op::I2b { d, s } => {
                let x = self.var(s);
                let n = self.b.ins().ireduce(types::I8, x);
                let r = self.b.ins().sextend(types::I32, n);
                self.set(d, r);
            }
            Op::I2s { d, s } => {
                let x = self.var(s);
                let n = self.b.ins().ireduce(types::I16, x);
                let r = self.b.ins().sextend(types::I32, n);
                self.set(d, r);
            }
            Op::Inc { x, v } => bini!(x, x, v, iadd),
            Op::IfEq { a, b, t } => cmp!(IntCC::Equal, a, b, t),
            Op::IfNe { a, b, t } => cmp!(IntCC::NotEqual, a, b, t),
            Op::IfLt { a, b, t } => cmp!(IntCC::SignedLessThan, a, b, t),
            Op::IfGe { a, b, t } => cmp!(IntCC::SignedGreaterThanOrEqual, a, b, t),
            Op::IfGt { a, b, t } => cmp!(IntCC::SignedGreaterThan, a, b, t),
            Op::IfLe { a, b, t } => cmp!(IntCC::SignedLessThanOrEqual, a, b, t),
            Op::IfEqI { a, v, t } => cmpi!(IntCC::Equal, a, v, t),
            Op::IfNeI { a, v, t } => cmpi!(IntCC::NotEqual, a, v, t),
            Op::IfLtI { a, v, t } => cmpi!(IntCC::SignedLessThan, a, v, t),
            Op::IfGeI { a, v, t } => cmpi!(IntCC::SignedGreaterThanOrEqual, a, v, t),
            Op::IfGtI { a, v, t } => cmpi!(IntCC::SignedGreaterThan, a, v, t),
            Op::IfLeI { a, v, t } => cmpi!(IntCC::SignedLessThanOrEqual, a, v, t),
            Op::Goto { t } => {
                self.goto(i, t)?;
                return Ok(false);
            }
            Op::IncLt { x, v, b, t } => incbr!(IntCC::SignedLessThan, x, v, b, t),
            Op::IncLe { x, v, b, t } => incbr!(IntCC::SignedLessThanOrEqual, x, v, b, t),
            Op::IncNe { x, v, b, t } => incbr!(IntCC::NotEqual, x, v, b, t),
            Op::IncGt { x, v, b, t } => incbr!(IntCC::SignedGreaterThan, x, v, b, t),
            Op::IncGe { x, v, b, t } => incbr!(IntCC::SignedGreaterThanOrEqual, x, v, b, t),
            Op::Switch { s, tab } => {
                self.switch(i, s, tab)?;
                return Ok(false);
            }
            Op::GetF { d, f } => {
                let (p, off) = self.field_addr(f)?;
                let v = self
                    .b
                    .ins()
                    .load(types::I32, MemFlagsData::trusted(), p, off);
                self.set(d, v);
            }
            Op::PutF { f, s } | Op::PutFB { f, s } | Op::PutFS { f, s } | Op::PutFZ { f, s } => {
                let x = self.var(s);
                let v = match mc.ops[i] {
                    Op::PutFB { .. } => {
                        let n = self.b.ins().ireduce(types::I8, x);
                        self.b.ins().sextend(types::I32, n)
                    }
                    Op::PutFS { .. } => {
                        let n = self.b.ins().ireduce(types::I16, x);
                        self.b.ins().sextend(types::I32, n)
                    }
                    Op::PutFZ { .. } => self.b.ins().band_imm_s(x, 1),
                    _ => x,
                };
                let (p, off) = self.field_addr(f)?;
                self.b.ins().store(MemFlagsData::trusted(), v, p, off);
            }
            Op::AddF { d, a, f } => {
                let (p, off) = self.field_addr(f)?;
                let y = self
                    .b
                    .ins()
                    .load(types::I32, MemFlagsData::trusted(), p, off);
                let x = self.var(a);
                let r = self.b.ins().iadd(x, y);
                self.set(d, r);
            }
            Op::Add3 { d, a, b, c } => {
                let (x, y, z) = (self.var(a), self.var(b), self.var(c));
                let r = self.b.ins().iadd(x, y);
                let r = self.b.ins().iadd(r, z);
                self.set(d, r);
            }
            Op::Add4 { d, a, b, c, e } => {
                let (x, y, z, w) = (self.var(a), self.var(b), self.var(c), self.var(e));
                let r = self.b.ins().iadd(x, y);
                let r = self.b.ins().iadd(r, z);
                let r = self.b.ins().iadd(r, w);
                self.set(d, r);
            }
            Op::NullCheck { s } => {
                let x = self.var(s);
                let z = self.b.ins().icmp_imm_s(IntCC::Equal, x, 0);
                self.fault_if(z, K_NULL, i);
            }
            Op::IaLoad { d, a, i: ix } => {
                let idx = self.var(ix);
                self.aload(i, d, a, idx, A_INT)
            }
            Op::BaLoad { d, a, i: ix } => {
                let idx = self.var(ix);
                self.aload(i, d, a, idx, A_BYTE)
            }
            Op::SaLoad { d, a, i: ix } => {
                let idx = self.var(ix);
                self.aload(i, d, a, idx, A_SHORT)
            }
            Op::IaLoadK { d, a, k } => {
                let idx = self.k32(k);
                self.aload(i, d, a, idx, A_INT)
            }
            Op::BaLoadK { d, a, k } => {
                let idx = self.k32(k);
                self.aload(i, d, a, idx, A_BYTE)
            }
            Op::IaStore { a, i: ix, s } => {
                let idx = self.var(ix);
                self.astore(i, a, idx, s, A_INT)
            }
            Op::BaStore { a, i: ix, s } => {
                let idx = self.var(ix);
                self.astore(i, a, idx, s, A_BYTE)
            }
            Op::ZaStore { a, i: ix, s } => {
                let idx = self.var(ix);
                self.astore(i, a, idx, s, A_BOOL)
            }
            Op::SaStore { a, i: ix, s } => {
                let idx = self.var(ix);
                self.astore(i, a, idx, s, A_SHORT)
            }
            Op::IaStoreK { a, k, s } => {
                let idx = self.k32(k);
                self.astore(i, a, idx, s, A_INT)
            }
            Op::BaStoreK { a, k, s } => {
                let idx = self.k32(k);
                self.astore(i, a, idx, s, A_BYTE)
            }
            Op::ArrLen { d, a } => {
                let slow = self.block();
                let done = self.block();
                let (_, len) = self.array_fast(
                    a,
                    None,
                    |g, k| g.b.ins().icmp_imm_u(IntCC::NotEqual, k, RAW_FREE as i64),
                    slow,
                );
                self.set(d, len);
                self.b.ins().jump(done, &[]);
                self.b.set_cold_block(slow);
                self.b.switch_to_block(slow);
                let (c, h, s) = (self.ctx(), self.var(a), self.k(self.site(i)));
                let f = h_arrlen::<H> as extern "C" fn(*mut Ctx, i32, i64) -> i64 as *const u8;
                let r = self.helper(f, &[self.ptr, types::I32, types::I64], &[c, h, s]);
                self.check(r);
                let v = self.b.ins().ireduce(types::I32, r);
                self.set(d, v);
                self.b.ins().jump(done, &[]);
                self.b.switch_to_block(done);
            }
            Op::NewArray { .. } => {
                return Err(format!("{}: newarray is not compiled", mc.name));
            }
            Op::Call { m: cm, at } => {
                let callee = &self.cls.code[cm as usize];
                let fid = bodies[cm as usize]
                    .ok_or_else(|| format!("{} calls a method that is not compiled", mc.name))?;
                self.charge(callee.ops.len() as i64, i);
                let c = self.ctx();
                let d = self
                    .b
                    .ins()
                    .load(types::I64, MemFlagsData::trusted(), c, CTX_DEPTH);
                let max = self
                    .b
                    .ins()
                    .load(types::I64, MemFlagsData::trusted(), c, CTX_MAX_DEPTH);
                let d1 = self.b.ins().iadd_imm_s(d, 1);
                let over = self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, d1, max);
                self.fault_if(over, K_DEPTH, i);
                self.b
                    .ins()
                    .store(MemFlagsData::trusted(), d1, c, CTX_DEPTH);
                let mut args = vec![c];
                for s in 0..callee.nargs {
                    args.push(self.var(at + s));
                }
                let fref = module.declare_func_in_func(fid, self.b.func);
                let call = self.b.ins().call(fref, &args);
                let r = self.b.inst_results(call)[0];
                self.check(r);
                self.b.ins().store(MemFlagsData::trusted(), d, c, CTX_DEPTH);
                let v = self.b.ins().ireduce(types::I32, r);
                self.set(at, v);
            }
            Op::CallNative { n, d, k, argc } => {
                let specs = mc
                    .args
                    .get(k as usize..k as usize + argc as usize)
                    .ok_or_else(|| format!("native arguments {k}.. missing"))?;
                let nat = self
                    .cls
                    .natives
                    .get(n as usize)
                    .ok_or_else(|| format!("native {n} missing"))?;
                let mut vals = Vec::with_capacity(specs.len());
                for a in specs {
                    vals.push(match *a {
                        Arg::S(s) => self.var(s),
                        Arg::K(v) => self.k32(v),
                        Arg::F(f) => {
                            let (p, off) = self.field_addr(f)?;
                            self.b
                                .ins()
                                .load(types::I32, MemFlagsData::trusted(), p, off)
                        }
                    });
                }
                // An intrinsic's or a sink's common case inline; the call
                // below is its slow path.
                let done = match (nat.fast, vals.as_slice()) {
                    (Some(Fast::Window(kind)), &[h, aoff, woff, len]) => {
                        Some(self.window_copy(kind, h, aoff, woff, len))
                    }
                    (Some(Fast::Sink(sink)), &[h, aoff, x, len]) => {
                        Some(self.sink_call(sink, h, aoff, x, len))
                    }
                    _ => None,
                };
                let slot = self.args_slot.expect("made at entry");
                for (j, &v) in vals.iter().enumerate() {
                    self.b.ins().stack_store(self.ptr, v, slot, 4 * j as i32);
                }
                let argp = self.b.ins().stack_addr(self.ptr, slot, 0);
                let (c, nn, na, s) = (
                    self.ctx(),
                    self.k(n as i64),
                    self.k(argc as i64),
                    self.k(self.site(i)),
                );
                let r = if matches!(nat.sig.ret, Some(JType::Array(_))) {
                    type Nat = extern "C" fn(*mut Ctx, i64, *const i32, i64, i64) -> i64;
                    let f = h_native::<H> as Nat as *const u8;
                    self.helper(
                        f,
                        &[self.ptr, types::I64, self.ptr, types::I64, types::I64],
                        &[c, nn, argp, na, s],
                    )
                } else {
                    // The native's own function goes in as a constant: no
                    // lookup, and no result check (it returns no handle).
                    type Nat = extern "C" fn(*mut Ctx, *const (), *const i32, i64, i64) -> i64;
                    let f = h_native_int::<H> as Nat as *const u8;
                    let fp = self.k(nat.f as usize as i64);
                    self.helper(
                        f,
                        &[self.ptr, self.ptr, self.ptr, types::I64, types::I64],
                        &[c, fp, argp, na, s],
                    )
                };
                self.check(r);
                if nat.sig.ret.is_some() {
                    let v = self.b.ins().ireduce(types::I32, r);
                    self.set(d, v);
                }
                if let Some(done) = done {
                    self.b.ins().jump(done, &[]);
                    self.b.switch_to_block(done);
                }
            }
            Op::Ret { s } => {
                let v = self.var(s);
                self.ret(v);
                return Ok(false);
            }
            Op::RetK { v } => {
                let r = self.k(v as i64);
                self.b.ins().return_(&[r]);
                return Ok(false);
            }
            Op::RetB { s } | Op::RetS { s } => {
                let ty = if matches!(mc.ops[i], Op::RetB { .. }) {
                    types::I8
                } else {
                    types::I16
                };
                let x = self.var(s);
                let n = self.b.ins().ireduce(ty, x);
                let r = self.b.ins().sextend(types::I64, n);
                self.b.ins().return_(&[r]);
                return Ok(false);
            }
            Op::RetZ { s } => {
                let x = self.var(s);
                let v = self.b.ins().band_imm_s(x, 1);
                self.ret(v);
                return Ok(false);
            }
            Op::RetVoid => {
                let r = self.k(0);
                self.b.ins().return_(&[r]);
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// `x / y` or `x % y` for `y != 0`, wrapping as Java does
    /// (`MIN / -1 == MIN`, `MIN % -1 == 0`) without the machine's trap.
    fn div(&mut self, x: Value, y: Value, rem: bool) -> Value {
        let m1 = self.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
        let one = self.k32(1);
        let ys = self.b.ins().select(m1, one, y);
        if rem {
            let r = self.b.ins().srem(x, ys);
            let z = self.k32(0);
            self.b.ins().select(m1, z, r)
        } else {
            let q = self.b.ins().sdiv(x, ys);
            let n = self.b.ins().ineg(x);
            self.b.ins().select(m1, n, q)
        }
    }

    fn div_const(&mut self, d: u16, a: u16, v: i32, rem: bool) -> Result<(), String> {
        let x = self.var(a);
        let r = match v {
            0 => return Err(format!("{}: division by the constant 0", self.mc.name)),
            -1 if rem => self.k32(0),
            -1 => self.b.ins().ineg(x),
            _ => {
                let y = self.k32(v);
                if rem {
                    self.b.ins().srem(x, y)
                } else {
                    self.b.ins().sdiv(x, y)
                }
            }
        };
        self.set(d, r);
        Ok(())
    }

    /// The fast path of an array op on the array in slot `a`: checks that
    /// its handle names a live entry of the heap's table ([`Heap::raw`]),
    /// that the entry's kind satisfies `kind_ok`, and (with `idx`) that the
    /// index is below its length; branches to `slow` if not. Returns the
    /// entry's element address and length, in the block where all checks
    /// passed.
    fn array_fast(
        &mut self,
        a: u16,
        idx: Option<Value>,
        kind_ok: impl FnOnce(&mut Self, Value) -> Value,
        slow: Block,
    ) -> (Value, Value) {
        let h = self.var(a);
        self.array_fast_h(h, idx, kind_ok, slow)
    }

    /// [`Gen::array_fast`] on the handle `h`.
    fn array_fast_h(
        &mut self,
        h: Value,
        idx: Option<Value>,
        kind_ok: impl FnOnce(&mut Self, Value) -> Value,
        slow: Block,
    ) -> (Value, Value) {
        let c = self.ctx();
        // Handle h names entry h - 1; null (0) and `this` (-1) give
        // indices no table reaches.
        let hx = self.b.ins().uextend(types::I64, h);
        let slot = self.b.ins().iadd_imm_s(hx, -1);
        let n = self
            .b
            .ins()
            .load(types::I64, MemFlagsData::trusted(), c, CTX_NARRAYS);
        let live = self.b.ins().icmp(IntCC::UnsignedLessThan, slot, n);
        let b1 = self.block();
        self.b.ins().brif(live, b1, &[], slow, &[]);
        self.b.switch_to_block(b1);
        let base = self
            .b
            .ins()
            .load(self.ptr, MemFlagsData::trusted(), c, CTX_ARRAYS);
        let off = self.b.ins().ishl_imm_u(slot, 4);
        let e = self.b.ins().iadd(base, off);
        let kind = self
            .b
            .ins()
            .load(types::I32, MemFlagsData::trusted(), e, 12);
        let len = self.b.ins().load(types::I32, MemFlagsData::trusted(), e, 8);
        let mut ok = kind_ok(self, kind);
        if let Some(ix) = idx {
            let inb = self.b.ins().icmp(IntCC::UnsignedLessThan, ix, len);
            ok = self.b.ins().band(ok, inb);
        }
        let b2 = self.block();
        self.b.ins().brif(ok, b2, &[], slow, &[]);
        self.b.switch_to_block(b2);
        let addr = self.b.ins().load(self.ptr, MemFlagsData::trusted(), e, 0);
        (addr, len)
    }

    /// The checks every fast native case makes ([`Fast`]): `h` is a live
    /// `byte[]`, `aoff`, `len` and `more` are not negative, `aoff + len`
    /// is inside the array, and the first part of the budget covers the
    /// call's unit and `1 + len / 64`. Jumps to `slow` if `h` is no live
    /// byte array; returns whether the rest holds, the address of
    /// `a[aoff]`, `len` and the fuel left after the charge (not yet stored).
    fn byte_range(
        &mut self,
        h: Value,
        aoff: Value,
        len: Value,
        more: Option<Value>,
        slow: Block,
    ) -> ByteRange {
        let (addr, alen) = self.array_fast_h(
            h,
            None,
            |g, k| g.b.ins().icmp_imm_u(IntCC::Equal, k, RAW_B as i64),
            slow,
        );
        let a = self.b.ins().sextend(types::I64, aoff);
        let n = self.b.ins().sextend(types::I64, len);
        // No negative operand: the sign bit of a | n (| more) is clear.
        let mut any = self.b.ins().bor(a, n);
        if let Some(m) = more {
            any = self.b.ins().bor(any, m);
        }
        let mut ok = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, any, 0);
        let alen = self.b.ins().uextend(types::I64, alen);
        let aend = self.b.ins().iadd(a, n);
        let in_a = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, aend, alen);
        ok = self.b.ins().band(ok, in_a);
        // The call's unit and the work's 1 + len / 64, from the first part
        // of the budget only (so no checkpoint is passed here).
        let c = self.ctx();
        let fuel = self
            .b
            .ins()
            .load(types::I64, MemFlagsData::trusted(), c, CTX_FUEL);
        let units = self.b.ins().ushr_imm_u(n, 6);
        let left = self.b.ins().isub(fuel, units);
        let left = self.b.ins().iadd_imm_s(left, -2);
        let enough = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, left, 0);
        ok = self.b.ins().band(ok, enough);
        let at = self.b.ins().iadd(addr, a);
        ByteRange { ok, at, n, left }
    }

    /// The common case of an [`Intrinsic`] copy (see its documentation)
    /// inline. Leaves the builder in the block that must call the native
    /// (some check failed), whose code the caller emits and then jumps to
    /// the returned block, where both paths continue.
    fn window_copy(
        &mut self,
        kind: Intrinsic,
        h: Value,
        aoff: Value,
        woff: Value,
        len: Value,
    ) -> Block {
        let slow = self.block();
        let done = self.block();
        let c = self.ctx();
        let w = self.b.ins().sextend(types::I64, woff);
        let r = self.byte_range(h, aoff, len, Some(w), slow);
        let fl = MemFlagsData::trusted();
        let wbase = self.b.ins().load(types::I64, fl, c, CTX_WINDOW);
        let wlen = self.b.ins().load(types::I64, fl, c, CTX_WINDOW_LEN);
        let wend = self.b.ins().iadd(w, r.n);
        let in_w = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, wend, wlen);
        let mut ok = self.b.ins().band(r.ok, in_w);
        let bound = self.b.ins().icmp_imm_u(IntCC::NotEqual, wbase, 0);
        ok = self.b.ins().band(ok, bound);
        let fast = self.block();
        self.b.ins().brif(ok, fast, &[], slow, &[]);
        self.b.switch_to_block(fast);
        self.b.ins().store(fl, r.left, c, CTX_FUEL);
        let pw = self.b.ins().iadd(wbase, w);
        let (dst, src) = match kind {
            Intrinsic::WindowToArray => (r.at, pw),
            Intrinsic::ArrayToWindow => (pw, r.at),
        };
        let f = h_copy as extern "C" fn(*mut u8, *const u8, u64) -> i64 as *const u8;
        self.helper(f, &[self.ptr, self.ptr, types::I64], &[dst, src, r.n]);
        self.b.ins().jump(done, &[]);
        self.b.set_cold_block(slow);
        self.b.switch_to_block(slow);
        done
    }

    /// The common case of a native with a sink
    /// ([`Natives::register_sink`](crate::Natives::register_sink)): the
    /// checks of [`Gen::byte_range`], then the sink; the fuel is charged
    /// if it accepts. Leaves the builder where [`Gen::window_copy`] does.
    fn sink_call(&mut self, sink: SinkFn<H>, h: Value, aoff: Value, x: Value, len: Value) -> Block {
        let slow = self.block();
        let done = self.block();
        let r = self.byte_range(h, aoff, len, None, slow);
        let call = self.block();
        self.b.ins().brif(r.ok, call, &[], slow, &[]);
        self.b.switch_to_block(call);
        type Sink = extern "C" fn(*mut Ctx, *const (), *const u8, u64, i32) -> i64;
        let f = h_sink::<H> as Sink as *const u8;
        let (c, sp) = (self.ctx(), self.k(sink as usize as i64));
        let took = self.helper(
            f,
            &[self.ptr, self.ptr, self.ptr, types::I64, types::I32],
            &[c, sp, r.at, r.n, x],
        );
        let accepted = self.block();
        self.b.ins().brif(took, accepted, &[], slow, &[]);
        self.b.switch_to_block(accepted);
        self.b
            .ins()
            .store(MemFlagsData::trusted(), r.left, c, CTX_FUEL);
        self.b.ins().jump(done, &[]);
        self.b.set_cold_block(slow);
        self.b.switch_to_block(slow);
        done
    }

    /// Whether `kind` is one the array op of `kind` (`A_*`) accepts.
    fn kind_ok(&mut self, kind: Value, op: i64, load: bool) -> Value {
        match op {
            // baload reads byte[] and boolean[] (kinds 1 and 2).
            A_BYTE if load => {
                let k = self.b.ins().iadd_imm_s(kind, -(RAW_B as i64));
                self.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, k, 2)
            }
            A_BYTE => self.b.ins().icmp_imm_u(IntCC::Equal, kind, RAW_B as i64),
            A_BOOL => self.b.ins().icmp_imm_u(IntCC::Equal, kind, RAW_Z as i64),
            A_SHORT => self.b.ins().icmp_imm_u(IntCC::Equal, kind, RAW_S as i64),
            _ => self.b.ins().icmp_imm_u(IntCC::Equal, kind, RAW_I as i64),
        }
    }

    /// Address of element `idx` from the element address `addr`.
    fn elem_addr(&mut self, addr: Value, idx: Value, op: i64) -> Value {
        let ix = self.b.ins().uextend(types::I64, idx);
        let shift = match op {
            A_INT => 2,
            A_SHORT => 1,
            _ => 0,
        };
        let off = self.b.ins().ishl_imm_u(ix, shift);
        self.b.ins().iadd(addr, off)
    }

    fn aload(&mut self, i: usize, d: u16, a: u16, idx: Value, kind: i64) {
        let slow = self.block();
        let done = self.block();
        let (addr, _) = self.array_fast(a, Some(idx), |g, k| g.kind_ok(k, kind, true), slow);
        let p = self.elem_addr(addr, idx, kind);
        let fl = MemFlagsData::trusted();
        let v = match kind {
            A_INT => self.b.ins().load(types::I32, fl, p, 0),
            A_SHORT => self.b.ins().sload16(types::I32, fl, p, 0),
            _ => self.b.ins().sload8(types::I32, fl, p, 0),
        };
        self.set(d, v);
        self.b.ins().jump(done, &[]);

        // The slow path makes the interpreter's exact fault (or, for a
        // kind the fast path does not take, the load itself).
        self.b.set_cold_block(slow);
        self.b.switch_to_block(slow);
        let (c, h, k, s) = (self.ctx(), self.var(a), self.k(kind), self.k(self.site(i)));
        type Ld = extern "C" fn(*mut Ctx, i64, i32, i32, i64) -> i64;
        let f = h_aload::<H> as Ld as *const u8;
        let r = self.helper(
            f,
            &[self.ptr, types::I64, types::I32, types::I32, types::I64],
            &[c, k, h, idx, s],
        );
        self.check(r);
        let v = self.b.ins().ireduce(types::I32, r);
        self.set(d, v);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }

    fn astore(&mut self, i: usize, a: u16, idx: Value, src: u16, kind: i64) {
        let slow = self.block();
        let done = self.block();
        let (addr, _) = self.array_fast(a, Some(idx), |g, k| g.kind_ok(k, kind, false), slow);
        let p = self.elem_addr(addr, idx, kind);
        let x = self.var(src);
        let fl = MemFlagsData::trusted();
        match kind {
            A_INT => {
                self.b.ins().store(fl, x, p, 0);
            }
            A_SHORT => {
                self.b.ins().istore16(fl, x, p, 0);
            }
            A_BOOL => {
                let z = self.b.ins().band_imm_s(x, 1);
                self.b.ins().istore8(fl, z, p, 0);
            }
            _ => {
                self.b.ins().istore8(fl, x, p, 0);
            }
        }
        self.b.ins().jump(done, &[]);

        self.b.set_cold_block(slow);
        self.b.switch_to_block(slow);
        let (c, h, x, k, s) = (
            self.ctx(),
            self.var(a),
            self.var(src),
            self.k(kind),
            self.k(self.site(i)),
        );
        type St = extern "C" fn(*mut Ctx, i64, i32, i32, i32, i64) -> i64;
        let f = h_astore::<H> as St as *const u8;
        let r = self.helper(
            f,
            &[
                self.ptr,
                types::I64,
                types::I32,
                types::I32,
                types::I32,
                types::I64,
            ],
            &[c, k, h, idx, x, s],
        );
        self.check(r);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }

    /// `tableswitch` / `lookupswitch` at op `i`.
    fn switch(&mut self, i: usize, s: u16, tab: u16) -> Result<(), String> {
        let st = self
            .mc
            .switches
            .get(tab as usize)
            .ok_or_else(|| format!("switch table {tab} missing"))?;
        let key = self.var(s);
        let cost = switch_cost(st);
        if cost > 0 {
            self.charge(cost, i);
        }
        // One block per edge, so that each charges its own backward jump;
        // the edges are filled after the dispatch (a block must be
        // finished before the builder moves to another).
        let mut edges: Vec<(Block, u32)> = Vec::new();
        let mut edge = |g: &mut Self, t: u32| -> Block {
            let blk = g.b.create_block();
            edges.push((blk, t));
            blk
        };
        let def = edge(self, st.default);
        if st.dense && !st.keys.is_empty() {
            let mut calls = Vec::with_capacity(st.targets.len());
            for &t in &st.targets {
                let blk = edge(self, t);
                calls.push(self.b.func.dfg.block_call(blk, &[] as &[BlockArg]));
            }
            let dc = self.b.func.dfg.block_call(def, &[] as &[BlockArg]);
            let jt = self.b.create_jump_table(JumpTableData::new(dc, &calls));
            let idx = self.b.ins().iadd_imm_s(key, -(st.keys[0] as i64));
            // br_table compares the index as unsigned against the table's
            // length: keys below the first wrap to large indices and take
            // the default, as `SwitchTable::lookup` does.
            let k0 = st.keys[0] as i64;
            let lo = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, key, k0);
            let inr = self.block();
            self.b.ins().brif(lo, def, &[], inr, &[]);
            self.b.switch_to_block(inr);
            self.b.ins().br_table(idx, jt);
        } else {
            // A binary search over the keys (compared as unsigned, which
            // orders them consistently), with jump tables for runs of
            // consecutive keys: a `lookupswitch` costs the compiled code
            // about what it costs the interpreter.
            let mut sw = Switch::new();
            for (j, &k) in st.keys.iter().enumerate() {
                let t = *st
                    .targets
                    .get(j)
                    .ok_or_else(|| format!("switch table {tab} is short"))?;
                let blk = edge(self, t);
                sw.set_entry(k as u32 as u128, blk);
            }
            sw.emit(&mut self.b, key, def);
        }
        for (blk, t) in edges {
            self.b.switch_to_block(blk);
            self.goto(i, t)?;
        }
        Ok(())
    }
}
