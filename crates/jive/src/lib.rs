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
//!    own methods.
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
//!    function pointer. Nothing is looked up by name at run time.
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
//!    Methods that allocate arrays or recurse, methods too large to
//!    compile cheaply, and their callers, stay interpreted. Compiled frames
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
//! ground up: `classfile`; `model` (the class model the later stages
//! share); `bytecode` (the instructions and their parser) and `heap`;
//! `verify`; `natives`, `decode` and `ephemeral`;
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
pub mod heap;
mod interp;
#[cfg(feature = "jit")]
mod jit;
mod model;
pub mod natives;
pub mod subset;
pub mod verify;

use std::fmt;
use std::time::Duration;

pub use heap::ArrayRef;
pub use interp::{FaultSite, Prepared, Vm, DEFAULT_MACHINE_STACK};
#[cfg(feature = "jit")]
pub use jit::Compiled;
pub use natives::{
    test_natives, Intrinsic, NativeCtx, NativeFn, NativeResult, Natives, SinkFn, NATIVES_CLASS,
};
pub use subset::{Class, Elem, FieldId, JType, LoadRules, MethodId};

/// Largest class file accepted, in bytes (1 MiB).
pub const MAX_CLASS_BYTES: usize = 1 << 20;
/// Largest `Code` array accepted per method, in bytes (64 KiB, as the JVM).
pub const MAX_CODE_BYTES: usize = 65535;

/// Resource limits of one VM, enforced on every invocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Fuel per host invocation, in units of decoded ops: a call charges
    /// the callee's length, a taken back-edge the length of the loop body
    /// (ops between its target and itself), an allocation one unit per 16
    /// elements, a collection during the invocation one unit per
    /// [`GC_WORDS_PER_FUEL`] frame slots and array entries it scans, a
    /// native call one unit plus what the native charges, a `lookupswitch`
    /// of `n` keys `floor(log2 n) + 1` units. Default: 100 000 000 (an
    /// infinite loop stops after well under a second).
    pub fuel: u64,
    /// Maximum number of nested applet frames (host entry frame included).
    /// Default: 4096 (the recursive qsort of 1000 reverse-ordered ints needs
    /// about 1000).
    pub max_depth: u32,
    /// Bytes of live arrays the applet may hold (each array costs its data
    /// plus a 16-byte header). Default: 1 MiB.
    pub heap_quota: usize,
    /// Wall-clock time one host invocation may take, whatever fuel it has
    /// left (a watchdog): past it the invocation stops with
    /// [`Fault::Timeout`], interpreted or compiled, in a loop or deep in
    /// calls. The clock is read only where a part of the fuel budget ends,
    /// never on the way in, and the fuel checks at back-edges and calls are
    /// the ones fuel already has, so an invocation that finishes in time
    /// pays nothing for the limit. The parts are sized in time at the VM's
    /// learned pace (fuel units per second): a quarter of the limit first,
    /// then half of what is left, at least a sixteenth of the limit, at most
    /// [`TIME_SLICE`] units. Time is counted from the end of the first part,
    /// so an invocation never stops before `max_time`, and stops within
    /// about a third of `max_time` past it (a runaway under 10 µs stops
    /// after 12 to 14 µs). Unlike fuel this limit is not deterministic.
    /// Default: `None` (fuel alone bounds an invocation).
    pub max_time: Option<Duration>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel: 100_000_000,
            max_depth: 4096,
            heap_quota: 1 << 20,
            max_time: None,
        }
    }
}

/// Most fuel units between two readings of the clock when
/// [`Limits::max_time`] is set (about 0.1 ms of interpreted work or less);
/// a short limit reads it sooner.
pub const TIME_SLICE: u64 = 1 << 16;

/// Frame slots and array-table entries a collection during an invocation
/// scans per unit of fuel it charges (see [`Limits::fuel`]).
pub const GC_WORDS_PER_FUEL: u64 = 32;

/// Most `i32` slots all frames of one invocation may use (4 Mi slots,
/// 16 MiB); more is reported as [`Fault::StackOverflow`].
pub const MAX_STACK_SLOTS: usize = 1 << 22;

/// A class file refused at load: a normal answer, not an error of JIVE.
///
/// Display reads like `method foo(I)I at offset 12: getstatic
/// java/lang/System.out is not a field of this class`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// Method (name followed by descriptor) where the problem is, if any.
    pub method: Option<String>,
    /// Bytecode offset inside that method, if any.
    pub offset: Option<u32>,
    /// What is wrong.
    pub reason: String,
}

impl Rejection {
    pub(crate) fn class(reason: impl Into<String>) -> Self {
        Rejection {
            method: None,
            offset: None,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.method, self.offset) {
            (Some(m), Some(o)) => write!(f, "method {m} at offset {o}: {}", self.reason),
            (Some(m), None) => write!(f, "method {m}: {}", self.reason),
            (None, _) => write!(f, "class rejected: {}", self.reason),
        }
    }
}

impl std::error::Error for Rejection {}

/// Why an invocation stopped. The VM stays usable after any of these; see
/// [`Vm::last_fault_site`] for the method and bytecode offset.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// An array index outside `0..length`.
    ArrayIndexOutOfBounds {
        /// The index used.
        index: i32,
        /// The array's length.
        length: i32,
    },
    /// An array or the applet instance used through a null reference.
    NullPointer,
    /// `idiv` or `irem` by zero.
    DivideByZero,
    /// `newarray` with a negative length.
    NegativeArraySize(i32),
    /// The invocation used up its fuel budget.
    OutOfFuel,
    /// The invocation ran longer than [`Limits::max_time`].
    Timeout,
    /// Too many nested calls (or frame slots).
    StackOverflow,
    /// An allocation would exceed the heap quota even after collection.
    HeapQuotaExceeded {
        /// Bytes requested by the allocation.
        requested: usize,
        /// The VM's quota.
        quota: usize,
    },
    /// A native method failed.
    Native(String),
    /// The host passed arguments that do not match the method's descriptor.
    BadArguments(String),
    /// A value broke an invariant the verifier should guarantee (a handle of
    /// the wrong array kind handed back by a native or the host).
    Internal(String),
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::ArrayIndexOutOfBounds { index, length } => {
                write!(f, "array index {index} out of bounds for length {length}")
            }
            Fault::NullPointer => write!(f, "null reference"),
            Fault::DivideByZero => write!(f, "integer division by zero"),
            Fault::NegativeArraySize(n) => write!(f, "negative array size {n}"),
            Fault::OutOfFuel => write!(f, "out of fuel"),
            Fault::Timeout => write!(f, "time limit exceeded"),
            Fault::StackOverflow => write!(f, "call depth limit exceeded"),
            Fault::HeapQuotaExceeded { requested, quota } => {
                write!(
                    f,
                    "heap quota exceeded: {requested} bytes requested, quota {quota}"
                )
            }
            Fault::Native(m) => write!(f, "native method failed: {m}"),
            Fault::BadArguments(m) => write!(f, "bad arguments: {m}"),
            Fault::Internal(m) => write!(f, "internal invariant broken: {m}"),
        }
    }
}

impl std::error::Error for Fault {}
