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
//! What the compiled code does itself: arithmetic, branches, fields (a
//! field read again within a straight run of ops, with no call, native or
//! allocation between, takes the value the run last read or wrote instead
//! of a load, but for a volatile field, whose every read loads it and
//! makes later reads load again, `translate/fields.rs`), fuel
//! (one subtraction and one compare per charge, as in the interpreter; a
//! method with a loop keeps the register in a variable, stored where a
//! call, a helper or the host may read it, `translate/fuel.rs`, and
//! calls a stub that keeps every register when it runs out, so that its
//! loops' values stay in registers; a small loop runs in groups of copies
//! of its body with one check per group while the fuel covers a group,
//! `translate/unroll.rs`), the
//! call-depth check, calls between compiled methods (direct calls,
//! arguments in registers; a callee of at most 16 ops of arithmetic that
//! cannot fault, ending in its return, is emitted at the call site
//! instead, after the call's charge and depth check,
//! `translate/inline.rs`), array accesses that pass their checks (through
//! the heap's table of element addresses, `Heap::raw`: handle, kind and
//! bounds checked inline; an array held in a slot is looked up once and
//! kept in registers until the slot is written or something may allocate,
//! and once before a loop that does neither, `translate/cache.rs`; an
//! access at an index that an earlier access of the same straight run
//! checked on the same array is not checked again, `translate/arrays.rs`)
//! and calls of natives (the bound function is
//! called from a small helper, without the interpreter's argument
//! marshalling loop). Natives registered as an [`Intrinsic`] (copies
//! between a `byte[]` and the host's window, `Vm::set_window`) are
//! performed inline when every check passes and the first part of the
//! budget covers them, and called otherwise, so the native makes every
//! fault; natives registered with a sink
//! ([`Natives::register_sink`](crate::Natives::register_sink)) pass the
//! same checks and then call the sink with the bytes, and the native only
//! if it declines; natives registered with a leaf
//! ([`Natives::register_leaf`](crate::Natives::register_leaf): up to
//! three `int`s in, an `int` or nothing out) or an `int[]` sink
//! ([`Natives::register_ints_sink`](crate::Natives::register_ints_sink))
//! have it called directly, the arguments in registers, when the first
//! part of the budget covers the call (`translate/native.rs`). What it leaves to helpers in Rust: array accesses
//! that fail a check (the helper makes the interpreter's exact fault; an
//! access whose helper can only fault exits there and does not come
//! back, so its call costs the loop around it no registers),
//! running out of fuel (the checkpoint hook) and recording faults.
//!
//! Allocation: `newarray` calls a helper that does what the interpreter
//! does (the negative size, the charge, the allocation, and at the quota
//! a collection, charged first, then the allocation again). The
//! collector's roots are the interpreter's: the fields, the pinned arrays
//! and, in every frame of the invocation, the slots its method wrote
//! (`decode::roots`: written on every path to the allocation or call
//! where the frame is, and not since overwritten by a callee), which hold
//! the same values however the frame runs. Compiled frames keep their
//! slots in registers, so a method that may allocate
//! (`decode::roots::allocating`: it has a `newarray` or calls such a
//! method) writes them to the spill stack (`Env::spill`, laid out as
//! the interpreter's slot stack: a frame at `Ctx::base`), with the frame's
//! site (method and op, which name its roots) beside its first slot
//! (`Env::sites`), before each allocation and before each call of a
//! method that may allocate (the slots below the callee's frame, which the
//! callee writes itself); the collector walks the compiled frames from
//! the first by their sites. When an interpreted method called the
//! compiled code, the interpreter's frames below it are scanned as the
//! interpreter scans them ([`Compiled::enter_nested`], [`Below`]). Handles do not move (the
//! collector frees, never compacts), so nothing is read back but the
//! array table's address. Methods that cannot allocate are compiled as
//! before: nothing is added to them. A method that may allocate but whose
//! roots are past the analysis's bound is interpreted.
//!
//! Not compiled, so interpreted (per method, decided at compile time):
//! the methods over the bounds below and their callers. An invocation
//! whose entry method is not compiled starts in the interpreter, which
//! calls a compiled callee as machine code on the invocation's budget and
//! limits ([`Compiled::enter_nested`]). Recursion is
//! compiled: every compiled call checks the call-depth limit and the
//! interpreter's frame-slot limit ([`MAX_STACK_SLOTS`], counting the
//! frames' slots as the interpreter would lay them out, `Ctx::base`), so
//! it stops where the interpreter stops, and the machine stack is bounded
//! on every entry (below).

//! Bounds on compiling (a class is hostile input, and compiling it must
//! stay cheap in time and memory): interpreted are a method of more
//! than 16 Ki decoded ops ([`MAX_METHOD_OPS`](policy::MAX_METHOD_OPS)) or more than 4096 frame
//! slots ([`MAX_METHOD_SLOTS`](policy::MAX_METHOD_SLOTS): `max_locals` plus `max_stack` and a few
//! scratch slots), the methods past 64 Ki ops compiled per class
//! ([`MAX_CLASS_OPS`](policy::MAX_CLASS_OPS), in method order), a method whose ops times frame
//! slots exceed 256 Ki ([`MAX_METHOD_COST`](policy::MAX_METHOD_COST): the register allocator's
//! work grows with the values live across each call) and the methods past
//! 1 Mi of that per class ([`MAX_CLASS_COST`](policy::MAX_CLASS_COST)), a method whose machine frame
//! would exceed 16 KiB ([`MAX_FRAME_BYTES`]: compiled, measured,
//! dropped), and the callers of all of these. Blocks are sealed as soon as every branch
//! to them is emitted, so the SSA construction stays linear in the
//! method's size.
//!
//! Machine stack: compiled frames live on the calling thread's stack. A
//! method's native calls share one argument area, and every compiled
//! method compares its stack pointer, after its prologue and before it
//! stores anything in its frame, with the invocation's limit: at most
//! [`Vm::set_machine_stack`](crate::Vm::set_machine_stack) bytes below
//! the host's call, and never within 64 KiB ([`STACK_RESERVE`](stack::STACK_RESERVE)) of the
//! end of the thread's stack where the system tells it (Linux). Below the
//! limit the method returns at once, calling nothing, and the invocation
//! faults with [`Fault::StackOverflow`] (which the interpreter, whose
//! frames are on the heap, would not: the one outcome where the two may
//! differ). Frames over a page are also probed page by page (inline
//! probestack), so a frame cannot step over a guard page. The reserve is
//! for the helpers and natives compiled code calls and for a signal
//! frame.
//!
//! Entering compiled code: the context compiled code runs on ([`Ctx`])
//! and the environment its helpers reach ([`Env`]) live together in a
//! [`Link`] as long as the code, at a fixed address, and persist between
//! invocations. What does not change between invocations the VM sets when
//! it changes (the fields and the window on installation and
//! `set_window`, the call-depth limit and the budget's first part on
//! `set_limits`, `set_checkpoint` and after an invocation that read the
//! clock); an entry stores only the fuel, the heap's array table, the
//! stack limit and three pointers, and calls the method's body with the
//! arguments in registers ([`Compiled::enter_direct`], for
//! `Vm::invoke_prepared`) or through its trampoline, which reads them
//! from memory ([`Compiled::enter`]). The budget beyond the first part
//! ([`Budget`]) is taken from the plan only by a helper that needs more
//! fuel, and the fuel an invocation used is computed when the host asks
//! for it, so an invocation that finishes within its first part builds
//! nothing and records nothing but its result.
//!
//! Protocol between compiled code and helpers: every compiled method and
//! every helper that can fail returns an `i64`, the `i32` result
//! sign-extended on success and [`FAULT`] (outside the `i32` range) after
//! recording the fault and where it happened in the invocation's [`Env`].
//! A compiled caller that sees [`FAULT`] returns it at once.
//!
//! The folder: this file is the driver ([`Compiled`], entering compiled
//! code, compiling a class); `ctx.rs` the context compiled code shares
//! with its host, kept between invocations, and the fault protocol; `stack.rs` the machine-stack
//! budget; `helpers.rs` the functions compiled code calls; `policy.rs`
//! what is compiled; `translate.rs` (with `translate/arrays.rs`,
//! `translate/cache.rs`, where array references are kept,
//! `translate/fuel.rs` and `translate/arith.rs`) the translator
//! from decoded ops to Cranelift IR.

use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, Block, BlockArg, FuncRef, Function, InstBuilder, JumpTableData, MemFlagsData,
    Signature, StackSlot, StackSlotData, StackSlotKind, UserFuncName, Value,
};
use cranelift_codegen::isa::CallConv;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Switch, Variable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module, ModuleReloc};

use crate::budget::{refill, Budget, Checkpoint, Clock};
use crate::decode::{allocating, frame_roots, Arg, MethodCode, Op, RetAddr, SlotMasks};
use crate::fault::Fault;
use crate::heap::{arr_fault, ArrayData, Heap, RawArr, RAW_B, RAW_FREE, RAW_I, RAW_S, RAW_Z};
use crate::limits::Limits;
use crate::limits::MAX_STACK_SLOTS;
use crate::model::{Elem, JType};
use crate::natives::{
    bad_native_array, Fast, Intrinsic, IntsSinkFn, LeafFn, NativeCtx, NativeFn, SinkFn,
};
use crate::subset::{Class, ClassInner};

mod ctx;
mod helpers;
mod policy;
mod stack;
mod translate;

pub(crate) use ctx::{Ctx, Env, Link, FAULT};
use ctx::{
    CTX_ARRAYS, CTX_BASE, CTX_DEPTH, CTX_FIELDS, CTX_FUEL, CTX_LENT, CTX_LENT_LEN, CTX_LENT_PTR,
    CTX_MAX_DEPTH, CTX_NARRAYS, CTX_OVERFLOW, CTX_SITES, CTX_SPILL, CTX_SPILL_LEN, CTX_STACK_LIMIT,
    CTX_STATUS, CTX_WINDOW, CTX_WINDOW_LEN,
};
use helpers::{
    elem_code, h_aload, h_arrlen, h_astore, h_copy, h_fault, h_ints_sink, h_leaf, h_native,
    h_native_int, h_newarray, h_reserve, h_sink, h_spent, record, A_BOOL, A_BYTE, A_INT, A_SHORT,
    DECLINED, K_DEPTH, K_DIV0, K_INTERNAL, K_NULL,
};
use policy::{compilable, MAX_FRAME_BYTES};
use stack::{stack_limit, OVERFLOW_FLAG};
use translate::{body_sig, inlinable, tramp_sig, Body, Gen, Plan};

/// compiles in the background and installs when done.
/// Machine code for the methods of one class that could be compiled
/// ([`Class::compile`](crate::Class::compile)), to install in any VM
/// running that class ([`Vm::install`](crate::Vm::install)). It can be
/// made on another thread than the VM's: a host that must not stall
pub struct Compiled<H> {
    /// The class compiled (kept alive, so that its identity is unique).
    pub(crate) class: std::sync::Arc<ClassInner<H>>,
    module: Option<JITModule>,
    /// Per method: its code, if the method was compiled.
    entries: Vec<Option<Code>>,
    /// The context the code runs on, kept between invocations.
    link: Box<Link<H>>,
    /// Per method: the time its body took to translate and compile (also
    /// for a method compiled and then dropped, whose frame was too large).
    times: Vec<Option<std::time::Duration>>,
    /// The time the whole class took.
    total: std::time::Duration,
    /// Per method: its small loops unrolled.
    groups: Vec<usize>,
    /// Per method: the calls compiled into it (`translate/inline.rs`).
    inlined: Vec<usize>,
}

// SAFETY: the pointers in `entries` point into `module`'s finalized code,
// which is immutable and owned by this value; executing it has no thread
// affinity. Moving the whole value to another thread moves the owner along.
// The `link`'s pointers to a VM's state and a host's are set on each entry
// (or, for the VM's fields, window and pinned arrays, when they change)
// and dereferenced only during an invocation, on the thread running it
// (which holds the VM mutably); between invocations they are not used.
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

/// The code of a compiled method, as a host enters it.
#[derive(Clone, Copy)]
pub(crate) struct Code {
    /// The host-entry trampoline, an [`Entry`] (arguments read from the
    /// slot array).
    tramp: std::ptr::NonNull<u8>,
    /// The body, `extern "C" fn(*mut Ctx, i32, ...) -> i64` with one
    /// `i32` per argument slot (a host that passes the arguments in
    /// registers calls it directly).
    body: std::ptr::NonNull<u8>,
}

impl<H> Compiled<H> {
    /// The code of method `m`, if compiled.
    #[inline]
    pub(crate) fn entry(&self, m: usize) -> Option<Code> {
        self.entries.get(m).copied().flatten()
    }

    /// The time method `m`'s body took to compile (translation and code
    /// generation); `None` if it was not compiled.
    pub fn method_time(&self, m: crate::MethodId) -> Option<std::time::Duration> {
        self.entries.get(m.0 as usize).copied().flatten()?;
        self.times.get(m.0 as usize).copied().flatten()
    }

    /// How many small loops of method `m` run unrolled, in groups of
    /// copies of their body with one fuel check per group
    /// (`translate/unroll.rs`); 0 if it was not compiled.
    pub fn unrolled_loops(&self, m: crate::MethodId) -> usize {
        if self.entries.get(m.0 as usize).copied().flatten().is_none() {
            return 0;
        }
        self.groups.get(m.0 as usize).copied().unwrap_or(0)
    }

    /// How many calls of method `m` are compiled into it, the callee's
    /// ops at the call site (`translate/inline.rs`); 0 if it was not
    /// compiled.
    pub fn inlined_calls(&self, m: crate::MethodId) -> usize {
        if self.entries.get(m.0 as usize).copied().flatten().is_none() {
            return 0;
        }
        self.inlined.get(m.0 as usize).copied().unwrap_or(0)
    }

    /// The time compiling the class took in all (bodies, entries and
    /// linking).
    pub fn total_time(&self) -> std::time::Duration {
        self.total
    }

    /// Number of compiled methods.
    pub fn count(&self) -> usize {
        self.entries.iter().filter(|e| e.is_some()).count()
    }

    /// The budget an invocation starts with (kept as the VM's limits,
    /// checkpoint and pace were when [`Compiled::replan`] last ran).
    #[inline(always)]
    pub(crate) fn plan(&self) -> &Budget<H> {
        &self.link.env.plan
    }

    /// Make the plan the budget `Budget::new` gives for `limits`,
    /// `checkpoint` and `clock`, and end the running invocation's budget:
    /// after every invocation that drew its budget (its pace may have
    /// changed) and whenever the VM changes any of them.
    pub(crate) fn replan(
        &mut self,
        limits: &Limits,
        checkpoint: Option<Checkpoint<H>>,
        clock: &Option<Clock>,
    ) {
        let env = &mut self.link.env;
        env.plan = Budget::new(limits, checkpoint, clock);
        env.drawn = false;
        self.link.ctx.max_depth = limits.max_depth.max(1) as i64;
    }

    /// Point the context at the VM's fields (`State::fields`, never
    /// resized, so fixed for the VM's life) and its window (address and
    /// length, see `Ctx::window`), when the code is installed and whenever
    /// the window changes.
    pub(crate) fn bind(&mut self, fields: *mut i32, window: (usize, u64)) {
        let c = &mut self.link.ctx;
        c.fields = fields;
        c.window = window.0 as u64;
        c.window_len = window.1;
    }

    /// Tell compiled code the bytes lent to an array, or that none are
    /// (see `Ctx::lent`).
    #[inline]
    pub(crate) fn bind_lent(&mut self, lent: Option<crate::heap::Lent>) {
        let c = &mut self.link.ctx;
        (c.lent, c.lent_ptr, c.lent_len) = match lent {
            Some(l) => (l.handle as i64, l.src as u64, l.len as u64),
            None => (ctx::NO_LOAN, 0, 0),
        };
    }

    /// Whether the invocation that ran last drew its budget (a helper
    /// needed more fuel than its first part): the VM then replans.
    #[inline(always)]
    pub(crate) fn drawn(&self) -> bool {
        self.link.env.drawn
    }

    /// After an invocation that drew its budget: the closing reading of
    /// the VM's `clock` if it read it (`budget::close`).
    #[inline(always)]
    pub(crate) fn close_clock(&mut self, clock: &mut Option<Clock>) {
        let left = self.left();
        let env = &self.link.env;
        if env.drawn && env.budget.read_clock() {
            crate::budget::close(clock, left);
        }
    }

    /// The budget of the invocation about to run, drawn now: for an entry
    /// whose charge the first part does not cover (see `entry_fuel`).
    pub(crate) fn draw(&mut self) -> &mut Budget<H> {
        self.link.env.budget()
    }

    /// Fuel the last invocation left, register and reserve.
    #[inline(always)]
    pub(crate) fn left(&self) -> i64 {
        self.link.ctx.fuel + self.link.env.reserve()
    }

    /// The fault the last invocation recorded, if any, and its site
    /// (method, op index).
    pub(crate) fn take_fault(&mut self) -> (Option<Fault>, (u32, u32)) {
        let env = &mut self.link.env;
        (env.fault.take(), env.site)
    }

    /// Point the context at the VM's state for an invocation with `fuel`
    /// in its register (see [`Io`]).
    #[inline(always)]
    fn prime(&mut self, fuel: i64, io: Io<'_, H>) -> *mut Ctx {
        let l = &mut *self.link;
        let c = &mut l.ctx;
        c.fuel = fuel;
        c.arrays = io.heap.raw.as_ptr();
        c.narrays = io.heap.raw.len() as u64;
        c.stack_limit = stack_limit(io.machine_stack);
        let host: *mut H = io.host;
        c.host = host.cast();
        let env = &mut l.env;
        env.heap = io.heap;
        env.host = host;
        env.clock = io.clock;
        c
    }

    /// After a call that returned [`FAULT`]: the stack overflow the
    /// method that found its frame too low left in the context, recorded;
    /// the depth and the overflow mark cleared for the next invocation.
    /// Calling it again changes nothing.
    #[cold]
    #[inline(never)]
    pub(crate) fn faulted(&mut self) {
        let l = &mut *self.link;
        if l.env.fault.is_none() && l.ctx.overflow != 0 {
            record(
                &mut l.env,
                Fault::StackOverflow,
                l.ctx.overflow & !OVERFLOW_FLAG,
            );
        }
        l.ctx.depth = 0;
        l.ctx.overflow = 0;
        l.ctx.base = 0;
    }

    /// Run the compiled method whose trampoline is `entry` with its
    /// arguments at `args` (the slot array, at least the entry method's
    /// frame, so at least its `nargs` slots), `fuel` in the register and
    /// the frames within `io.machine_stack` bytes below this call's (see
    /// `stack_limit`). Returns the result or [`FAULT`] (see
    /// [`Compiled::take_fault`]); [`Compiled::left`] then tells the fuel
    /// left.
    #[inline(always)]
    pub(crate) fn enter(&mut self, code: Code, fuel: i64, io: Io<'_, H>, args: &[i32]) -> i64 {
        let c = self.prime(fuel, io);
        // SAFETY: `code.tramp` is a trampoline of this module (see `Code`),
        // generated with exactly the `Entry` signature for the target's
        // default calling convention. It reads the method's `nargs`
        // arguments from `args` (see above), reads and writes the context
        // `c` (primed for this invocation: its `fields` array within the
        // class's field count, as field indices were checked at decode; its
        // spill stack within `spill_len`, which every method that writes
        // it makes cover its frame on entry, `Gen::reserve`),
        // and calls only this module's functions and the helpers with
        // `c`, whose `env` is the `Env<H>` of the type `H` the helpers
        // were instantiated with.
        #[allow(unsafe_code)]
        let f: Entry = unsafe { std::mem::transmute::<*const u8, Entry>(code.tramp.as_ptr()) };
        let r = f(c, args.as_ptr());
        if r == FAULT {
            self.faulted();
        }
        r
    }

    /// [`Compiled::enter`] from the interpreter: a compiled method called
    /// by an interpreted one, on the interpreter's budget (`fuel` in its
    /// register and `budget`, both taken back updated), with `depth`
    /// frames suspended below it and its frame at slot `base` of the
    /// interpreter's frame stack, whose slots below it are `below` (roots
    /// of a collection the compiled code makes), so that every limit
    /// holds as if the interpreter ran it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn enter_nested(
        &mut self,
        code: Code,
        fuel: &mut i64,
        budget: &mut Budget<H>,
        io: Io<'_, H>,
        depth: usize,
        below: Below<'_>,
        args: &[i32],
    ) -> i64 {
        let l = &mut *self.link;
        l.env.budget = *budget;
        l.env.drawn = true;
        l.env.below = below.stack.as_ptr();
        l.env.below_len = below.stack.len();
        l.env.frames = below.frames.as_ptr();
        l.env.nframes = below.frames.len();
        l.env.cur = Some(below.cur);
        l.ctx.depth = depth as i64;
        l.ctx.base = below.stack.len() as i64;
        let r = self.enter(code, *fuel, io, args);
        let l = &mut *self.link;
        *fuel = l.ctx.fuel;
        *budget = l.env.budget;
        l.env.drawn = false;
        l.env.below = std::ptr::null();
        l.env.below_len = 0;
        l.env.frames = std::ptr::null();
        l.env.nframes = 0;
        l.env.cur = None;
        l.ctx.depth = 0;
        l.ctx.base = 0;
        r
    }

    /// Point the context at the arrays the host pinned (`State::pinned`),
    /// roots of the collections compiled code makes: when the code is
    /// installed and whenever they change.
    pub(crate) fn bind_pinned(&mut self, pinned: &[i32]) {
        self.link.env.pinned = pinned.as_ptr();
        self.link.env.pinned_len = pinned.len();
    }

    /// [`Compiled::enter`] with the method's `N` arguments passed in
    /// registers, straight to its body (no trampoline, nothing read from
    /// memory) when `N` is at most 4; a caller given [`FAULT`] calls
    /// [`Compiled::faulted`].
    #[inline(always)]
    pub(crate) fn enter_direct<const N: usize>(
        &mut self,
        code: Code,
        fuel: i64,
        io: Io<'_, H>,
        args: [i32; N],
    ) -> i64 {
        let c = self.prime(fuel, io);
        let a = |i: usize| args.get(i).copied().unwrap_or(0);
        let (body, entry) = (
            code.body.as_ptr() as *const u8,
            code.tramp.as_ptr() as *const u8,
        );
        // SAFETY: `body` is the body of a compiled method of this module
        // taking exactly `N` argument slots (the caller took it with the
        // method's `Prepared<N>`, whose argument count was checked against
        // the method), generated with the signature
        // `extern "C" fn(*mut Ctx, i32 x N) -> i64` for the target's
        // default calling convention, which each arm below names exactly;
        // otherwise as for `enter` (the trampoline `entry` takes the
        // arguments from memory).
        #[allow(clippy::missing_transmute_annotations)]
        #[allow(unsafe_code)]
        let r = unsafe {
            match N {
                0 => std::mem::transmute::<*const u8, extern "C" fn(*mut Ctx) -> i64>(body)(c),
                1 => std::mem::transmute::<*const u8, extern "C" fn(*mut Ctx, i32) -> i64>(body)(
                    c,
                    a(0),
                ),
                2 => std::mem::transmute::<*const u8, extern "C" fn(*mut Ctx, i32, i32) -> i64>(
                    body,
                )(c, a(0), a(1)),
                3 => {
                    std::mem::transmute::<*const u8, extern "C" fn(*mut Ctx, i32, i32, i32) -> i64>(
                        body,
                    )(c, a(0), a(1), a(2))
                }
                4 => std::mem::transmute::<
                    *const u8,
                    extern "C" fn(*mut Ctx, i32, i32, i32, i32) -> i64,
                >(body)(c, a(0), a(1), a(2), a(3)),
                _ => std::mem::transmute::<*const u8, Entry>(entry)(c, args.as_ptr()),
            }
        };
        // On FAULT the caller calls `faulted` (off the common path).
        r
    }
}

/// The interpreter's frames below compiled code it called
/// ([`Compiled::enter_nested`]), roots of a collection the compiled code
/// makes: its slot stack up to the compiled callee's frame, its suspended
/// frames, and the calling frame (method, the call's op, first slot).
pub(crate) struct Below<'a> {
    pub stack: &'a [i32],
    pub frames: &'a [RetAddr],
    pub cur: (usize, usize, usize),
}

/// The VM's state an invocation of compiled code works on, lent for the
/// call (what does not change between invocations, the context keeps:
/// see [`Compiled::replan`] and [`Compiled::bind`]).
pub(crate) struct Io<'a, H> {
    pub heap: &'a mut Heap,
    pub host: &'a mut H,
    pub clock: &'a mut Option<Clock>,
    /// Bytes of machine stack the invocation may use.
    pub machine_stack: usize,
}

/// Stubs that call a helper and leave its result in `Ctx::status`,
/// keeping every register (Cranelift's `preserve_all` convention): a
/// slow path that comes back into a loop calls its helper through one, so
/// that the loop's values stay in registers, which the helper's own call
/// would clobber. `spent` calls `h_spent` (fuel ran out); `arrlen` calls
/// `h_arrlen` (`arraylength` of an array whose cached length is 0).
#[derive(Clone, Copy)]
pub(crate) struct Stubs {
    pub(crate) spent: FuncId,
    pub(crate) arrlen: FuncId,
}

/// The stub named `name` calling `helper`, of parameters `params`.
fn preserving_stub(
    module: &mut JITModule,
    ctx: &mut cranelift_codegen::Context,
    fbc: &mut FunctionBuilderContext,
    name: &str,
    helper: *const u8,
    params: &[types::Type],
) -> Result<FuncId, String> {
    let mut sig = Signature::new(CallConv::PreserveAll);
    for &p in params {
        sig.params.push(AbiParam::new(p));
    }
    let id = module
        .declare_function(name, Linkage::Local, &sig)
        .map_err(|e| e.to_string())?;
    ctx.func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig);
    {
        let mut fb = FunctionBuilder::new(&mut ctx.func, fbc);
        let blk = fb.create_block();
        fb.append_block_params_for_function_params(blk);
        fb.switch_to_block(blk);
        let args = fb.block_params(blk).to_vec();
        let mut hs = module.make_signature();
        for &p in params {
            hs.params.push(AbiParam::new(p));
        }
        hs.returns.push(AbiParam::new(types::I64));
        let sr = fb.import_signature(hs);
        let ptr = module.target_config().pointer_type();
        let fp = fb.ins().iconst(ptr, helper as i64);
        let call = fb.ins().call_indirect(sr, fp, &args);
        let r = fb.inst_results(call)[0];
        fb.ins()
            .store(MemFlagsData::trusted(), r, args[0], CTX_STATUS);
        fb.ins().return_(&[]);
        fb.seal_all_blocks();
        fb.finalize(module.target_config());
    }
    module
        .define_function(id, ctx)
        .map_err(|e| format!("compiling the stub {name}: {e:?}"))?;
    module.clear_context(ctx);
    Ok(id)
}

/// The class's [`Stubs`].
fn stubs<H>(
    module: &mut JITModule,
    ctx: &mut cranelift_codegen::Context,
    fbc: &mut FunctionBuilderContext,
) -> Result<Stubs, String> {
    let ptr = module.target_config().pointer_type();
    let h = h_spent::<H> as extern "C" fn(*mut Ctx, i64) -> i64 as *const u8;
    let spent = preserving_stub(module, ctx, fbc, "spent", h, &[ptr, types::I64])?;
    let h = h_arrlen::<H> as extern "C" fn(*mut Ctx, i32, i64) -> i64 as *const u8;
    let arrlen = preserving_stub(
        module,
        ctx,
        fbc,
        "arrlen",
        h,
        &[ptr, types::I32, types::I64],
    )?;
    Ok(Stubs { spent, arrlen })
}

/// What a compilation does besides the defaults
/// ([`Class::compile_with`]).
#[derive(Clone, Debug, Default)]
pub struct CompileOptions {
    /// Methods whose calls stay calls: never compiled into their callers
    /// (as HotSpot's `-XX:CompileCommand=dontinline`), for a benchmark
    /// that measures the call itself.
    pub dont_inline: Vec<crate::MethodId>,
}

impl<H> Class<H> {
    /// Compile the class's methods to machine code for
    /// [`Vm::install`](crate::Vm::install) (feature `jit`; see
    /// [`Vm::compile`](crate::Vm::compile) for what is compiled). Takes
    /// some milliseconds: a host that must not stall calls it on another
    /// thread.
    pub fn compile(&self) -> Result<Compiled<H>, String> {
        compile(&self.inner, &CompileOptions::default())
    }

    /// [`Class::compile`] with `options`.
    pub fn compile_with(&self, options: &CompileOptions) -> Result<Compiled<H>, String> {
        compile(&self.inner, options)
    }
}

/// Compile what can be compiled of `cls` for the host type `H`.
pub(crate) fn compile<H>(
    class: &std::sync::Arc<ClassInner<H>>,
    options: &CompileOptions,
) -> Result<Compiled<H>, String> {
    let started = std::time::Instant::now();
    let cls = &**class;
    let ok = compilable(cls, &[]);
    let alloc = allocating(&cls.code);
    let inline: Vec<bool> = (cls.code.iter().enumerate())
        .map(|(m, mc)| !options.dont_inline.iter().any(|d| d.0 as usize == m) && inlinable(mc))
        .collect();
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
    let stubs = stubs::<H>(&mut module, &mut ctx, &mut fbc)?;
    let mut code: Vec<Option<Body>> = (0..cls.code.len()).map(|_| None).collect();
    let mut refused = ok.iter().map(|&o| !o).collect::<Vec<bool>>();
    let mut any_refused = false;
    let mut times = vec![None; cls.code.len()];
    let mut groups = vec![0; cls.code.len()];
    let mut inlined = vec![0; cls.code.len()];
    for (m, mc) in cls.code.iter().enumerate() {
        let Some(b) = bodies[m] else {
            continue;
        };
        let t = std::time::Instant::now();
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
                alloc: &alloc,
                inline: &inline,
                plan: Plan::new(mc, &alloc),
                cvars: Vec::new(),
                edges: Vec::new(),
                proven: Vec::new(),
                known: Vec::new(),
                fields_known: Vec::new(),
                checked: Vec::new(),
                affine: std::collections::HashMap::new(),
                fuel_var: None,
                stubs,
                stub_refs: None,
                sums: std::collections::HashMap::new(),
                small: Vec::new(),
                copy: None,
                pending: None,
                groups: 0,
                inlined_calls: 0,
            };
            g.method(&mut module, &bodies)?;
            groups[m] = g.groups;
            inlined[m] = g.inlined_calls;
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
        times[m] = Some(t.elapsed());
    }
    // Methods whose frame is too large, and their callers, are
    // interpreted (their code, never defined, is dropped).
    let ok = if any_refused {
        compilable(cls, &refused)
    } else {
        ok
    };

    let mut sizes = vec![0usize; cls.code.len()];
    for (m, mc) in cls.code.iter().enumerate() {
        let (true, Some(b), Some(t), Some(body)) = (ok[m], bodies[m], tramps[m], code[m].take())
        else {
            tramps[m] = None;
            continue;
        };
        sizes[m] = body.bytes.len();
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
    let code = |f| std::ptr::NonNull::new(module.get_finalized_function(f) as *mut u8);
    let entries = tramps
        .iter()
        .zip(&bodies)
        .map(|(t, b)| {
            Some(Code {
                tramp: code((*t)?)?,
                body: code((*b)?)?,
            })
        })
        .collect::<Vec<Option<Code>>>();
    if std::env::var_os("JIVE_PERF_MAP").is_some() {
        perf_map(cls, &entries, &sizes);
    }
    Ok(Compiled {
        class: std::sync::Arc::clone(class),
        module: Some(module),
        entries,
        link: Link::new(cls),
        times,
        total: started.elapsed(),
        groups,
        inlined,
    })
}

/// With `JIVE_PERF_MAP` set in the environment, name each compiled body
/// for `perf` (its JIT map, `/tmp/perf-PID.map`: address, size, name a
/// line), so that a profile of a host running applets or extensions
/// shows `jive:Class.method(descriptor)` where it would show bare
/// addresses. A map
/// that cannot be written is skipped: it is a profiling aid only.
fn perf_map<H>(cls: &ClassInner<H>, entries: &[Option<Code>], sizes: &[usize]) {
    use std::io::Write;
    let lines: String = entries
        .iter()
        .zip(sizes)
        .zip(&cls.code)
        .filter_map(|((e, &n), mc)| {
            let e = (*e)?;
            Some(format!(
                "{:x} {:x} jive:{}.{}\n",
                e.body.as_ptr() as usize,
                n,
                cls.name,
                mc.name
            ))
        })
        .collect();
    let path = format!("/tmp/perf-{}.map", std::process::id());
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(lines.as_bytes());
    }
}
