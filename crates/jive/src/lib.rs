//! JIVE: the Java virtual machine subset of U-Net/SLE.
//!
//! U-Net/SLE lets an application download a small Java *applet* into the
//! network interface, where it runs on every packet. The applet comes from a
//! stranger, so this crate treats the class file as hostile input and runs it
//! in stages, each of which can only reject, never crash:
//!
//! 1. **Load** ([`classfile`]): a hand-written, bounds-checked class-file
//!    parser. Every count is checked against the bytes that remain before
//!    anything is allocated; files are capped at [`MAX_CLASS_BYTES`] and
//!    method code at [`MAX_CODE_BYTES`]. Versions 45 to 69 (JDK 1.1 to 25)
//!    are accepted; attributes other than `Code` and `ConstantValue` are
//!    skipped (`StackMapTable` included).
//! 2. **Subset check** ([`subset`]): one class extending `java/lang/Object`,
//!    no interfaces, no overloading, only `byte`, `short`, `int`, `boolean`
//!    and one-dimensional arrays of them in descriptors. Every field and
//!    method reference is resolved here, once: to a field of this class, a
//!    method of this class, the `Object` constructor, or a native method
//!    granted to the class ([`Natives`], SPINE-style safe linking; a
//!    domain may hold methods another class exports,
//!    [`Natives::register_export`]). The
//!    one string the subset knows is a *method name*: a literal naming a
//!    static `(II)V` method of the class, passed to a native parameter of
//!    type `Ljava/lang/String;` (which receives the method's index).
//!    [`Class::load_with`] adds SPINE's `EPHEMERAL` rule
//!    ([`LoadRules`]): the methods so named are handlers, which may not
//!    allocate or call a native not registered as ephemeral
//!    ([`Natives::register_ephemeral`]), directly or through the class's
//!    own methods. Each field's use is classified too (`lend`): a `byte[]`
//!    field that the class's code only passes straight to natives, from
//!    one method that nothing calls, may be *lent* bytes for an invocation
//!    of it ([`Class::lendable`], [`Vm::lend_bytes`]), so that a host
//!    need not copy an arriving message into the array first.
//! 3. **Verify** ([`verify`]): each method's code split into the subset's
//!    instructions by the parser ([`bytecode`]), then type inference over
//!    the subset's types for every method (StackMapTable is ignored, so old and new class files are
//!    verified equally strictly): operand types, stack bounds, initialised
//!    locals, branch targets, merges, returns.
//! 4. **Pre-decode** ([`decode`]): the verified bytecode becomes a compact
//!    register form ([`decode::Op`]): every operand-stack position and local
//!    is a fixed slot of one `i32` frame, loads of locals and constants are
//!    folded into the instructions that use them, branch targets are
//!    instruction indices, calls hold the callee's index or the native's
//!    function pointer. Nothing is looked up by name at run time. For the
//!    methods that may allocate, the slots of their frames that are the
//!    collector's roots at each allocation and call are worked out here
//!    too, so that a collection frees the same arrays interpreted and
//!    compiled.
//! 5. **Execute under limits** ([`Vm`], `interp`): a `match` loop over the
//!    decoded ops, with deterministic fuel charged at back-edges, calls,
//!    allocations and collections, a call-depth limit, a heap quota, a
//!    small mark-sweep collector ([`heap`]) and, optionally, a wall-clock
//!    watchdog ([`Limits::max_time`]). Faults ([`Fault`]) stop the invocation; the VM stays usable.
//!    A host that calls the same method on every packet checks it once
//!    ([`Vm::prepare`]) and calls it without the per-call checks
//!    ([`Vm::invoke_prepared`]).
//! 6. **Compile** (optional, feature `jit`, on by default;
//!    [`Vm::compile`]): the decoded ops of each method become machine code
//!    through Cranelift, with every check of the interpreter kept (fuel,
//!    depth, null, bounds, division), so a compiled invocation has the same
//!    result, fuel use, fault and fault site as an interpreted one
//!    (`tests/jit.rs` compares them over grids of arguments and budgets).
//!    Methods too large to compile cheaply, and their callers, stay
//!    interpreted; allocation (with the collector) and recursion are
//!    compiled. Compiled frames
//!    live on the host thread's stack, within a budget checked on entry to
//!    every compiled method ([`Vm::set_machine_stack`]).
//!
//! Safety: the crate denies `unsafe` except for documented spots: the
//! interpreter's frame-slot indexing, whose bounds are established by
//! [`decode::validate`] on every decoded method at load, and, with the
//! compiler, the calls into generated code and the helpers it calls back
//! (`jit` module).
//!
//! Modules import only modules of the layers below their own, from the
//! ground up: `fault` and `limits` (what JIVE answers when it refuses,
//! and the bounds it enforces); `classfile`; `model` (the class model the later stages
//! share); `bytecode` (the instructions and their parser) and `heap`;
//! `verify`; `natives`, `decode`, `ephemeral` and `lend`;
//! `subset` (which runs the load stages) and `budget` (an invocation's fuel, which the
//! interpreter and compiled code share); `jit`; `interp` (the [`Vm`]).
//!
//! ```no_run
//! use jive::{test_natives, Class, Limits, Vm};
//! # fn demo(bytes: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
//! struct Host;
//! let natives = test_natives::<Host>();
//! let class = Class::load(bytes, &natives, &["test"])?;
//! let mut host = Host;
//! let mut vm = Vm::new(class.clone(), Limits::default(), &mut host)?;
//! let m = class.method("fib").ok_or("no fib")?;
//! let r = vm.invoke(&mut host, m, &[20])?;
//! println!("fib(20) = {r:?}, fuel used {}", vm.last_fuel_used());
//! # Ok(()) }
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod budget;
pub mod bytecode;
pub mod classfile;
pub mod decode;
mod ephemeral;
mod fault;
pub mod heap;
mod interp;
#[cfg(feature = "jit")]
mod jit;
mod lend;
mod limits;
mod model;
pub mod natives;
pub mod subset;
pub mod verify;

pub use fault::{Fault, Rejection};
pub use heap::ArrayRef;
pub use interp::{FaultSite, Prepared, Vm, DEFAULT_MACHINE_STACK};
#[cfg(feature = "jit")]
pub use jit::{CompileOptions, Compiled};
pub use limits::{
    Limits, GC_WORDS_PER_FUEL, MAX_CLASS_BYTES, MAX_CODE_BYTES, MAX_STACK_SLOTS, TIME_SLICE,
};
pub use natives::{
    test_natives, Intrinsic, IntsSinkFn, LeafFn, NativeCtx, NativeFn, NativeResult, Natives,
    SinkFn, NATIVES_CLASS,
};
pub use subset::{Class, Elem, FieldId, JType, LoadRules, MethodId};
