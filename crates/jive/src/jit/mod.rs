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
//! than 16 Ki decoded ops ([`MAX_METHOD_OPS`](policy::MAX_METHOD_OPS)) or more than 4096 frame
//! slots ([`MAX_METHOD_SLOTS`](policy::MAX_METHOD_SLOTS): `max_locals` plus `max_stack` and a few
//! scratch slots), the methods past 64 Ki ops compiled per class
//! ([`MAX_CLASS_OPS`](policy::MAX_CLASS_OPS), in method order), a method whose ops times frame
//! slots exceed 256 Ki ([`MAX_METHOD_COST`](policy::MAX_METHOD_COST): the register allocator's
//! work grows with the values live across each call) and the methods past
//! 1 Mi of that per class ([`MAX_CLASS_COST`](policy::MAX_CLASS_COST)), a method whose machine frame
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
//! Protocol between compiled code and helpers: every compiled method and
//! every helper that can fail returns an `i64`, the `i32` result
//! sign-extended on success and [`FAULT`] (outside the `i32` range) after
//! recording the fault and where it happened in the invocation's [`Env`].
//! A compiled caller that sees [`FAULT`] returns it at once.
//!
//! The folder: this file is the driver ([`Compiled`], entering compiled
//! code, compiling a class); `ctx.rs` the context compiled code shares
//! with its host and the fault protocol; `stack.rs` the machine-stack
//! budget; `helpers.rs` the functions compiled code calls; `policy.rs`
//! what is compiled; `translate.rs` (with `translate/arrays.rs`) the
//! translator from decoded ops to Cranelift IR.

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

use crate::budget::{refill, Budget, Clock};
use crate::decode::{Arg, MethodCode, Op};
use crate::fault::Fault;
use crate::heap::{arr_fault, ArrayData, Heap, RawArr, RAW_B, RAW_FREE, RAW_I, RAW_S, RAW_Z};
use crate::limits::MAX_STACK_SLOTS;
use crate::model::JType;
use crate::natives::{bad_native_array, Fast, Intrinsic, NativeCtx, NativeFn, SinkFn};
use crate::subset::{Class, ClassInner};

mod ctx;
mod helpers;
mod policy;
mod stack;
mod translate;

pub(crate) use ctx::{Ctx, Env, FAULT};
use ctx::{
    CTX_ARRAYS, CTX_DEPTH, CTX_FIELDS, CTX_FUEL, CTX_MAX_DEPTH, CTX_NARRAYS, CTX_OVERFLOW,
    CTX_STACK_LIMIT, CTX_WINDOW, CTX_WINDOW_LEN,
};
use helpers::{
    h_aload, h_arrlen, h_astore, h_copy, h_fault, h_native, h_native_int, h_sink, h_spent, record,
    A_BOOL, A_BYTE, A_INT, A_SHORT, K_DEPTH, K_DIV0, K_NULL,
};
use policy::{compilable, MAX_FRAME_BYTES};
use stack::{stack_limit, OVERFLOW_FLAG};
use translate::{body_sig, tramp_sig, Body, Gen};

/// compiles in the background and installs when done.
/// Machine code for the methods of one class that could be compiled
/// ([`Class::compile`](crate::Class::compile)), to install in any VM
/// running that class ([`Vm::install`](crate::Vm::install)). It can be
/// made on another thread than the VM's: a host that must not stall
pub struct Compiled<H> {
    /// The class compiled (kept alive, so that its identity is unique).
    pub(crate) class: std::sync::Arc<ClassInner<H>>,
    module: Option<JITModule>,
    /// Per method: the host-entry trampoline,
    /// `extern "C" fn(*mut Ctx, *const i32) -> i64` (arguments read from
    /// the slot array), if the method was compiled.
    entries: Vec<Option<*const u8>>,
    /// Per method: the time its body took to translate and compile (also
    /// for a method compiled and then dropped, whose frame was too large).
    times: Vec<Option<std::time::Duration>>,
    /// The time the whole class took.
    total: std::time::Duration,
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

    /// The time method `m`'s body took to compile (translation and code
    /// generation); `None` if it was not compiled.
    pub fn method_time(&self, m: crate::MethodId) -> Option<std::time::Duration> {
        self.entries.get(m.0 as usize).copied().flatten()?;
        self.times.get(m.0 as usize).copied().flatten()
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
    let started = std::time::Instant::now();
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
    let mut times = vec![None; cls.code.len()];
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
        times[m] = Some(t.elapsed());
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
        times,
        total: started.elapsed(),
    })
}
