//! Stage 4: pre-decoding verified bytecode into a register form.
//!
//! Every method gets one `i32` frame laid out as
//!
//! ```text
//!  slot 0 .. max_locals             locals (arguments first)
//!  max_locals .. +max_stack         operand stack, depth d at max_locals + d
//!  +4 scratch slots                 temporaries of the stack-shuffle ops
//! ```
//!
//! Because the verifier knows the stack height at every instruction, every
//! operand-stack position is a fixed slot, and each [`Op`] names its source
//! and destination slots directly. The decoder keeps a *virtual stack* whose
//! entries may still be pending: a load of a local (`iload`, `aload`) or a
//! constant emits nothing, and the instruction that consumes the value reads
//! the local (or uses the constant as an immediate) itself. So
//! `iload_1; iload_2; iadd; istore_3` becomes one `Add { d: 3, a: 1, b: 2 }`
//! and `iload i; iload n; if_icmplt L` becomes one `IfLt`. Pending entries
//! are written to their slots (materialised) where the slot must hold the
//! value: before a branch and at a branch target, before the local they read
//! is overwritten, for call arguments, and around stack shuffles.
//!
//! A few fused ops cut dispatches on the patterns javac emits most (each
//! justified by the timings of `tests/perf.rs`): loop rotation (a backward
//! `goto` to the loop test becomes the inverted test) and `iinc` fused
//! with the loop's back-edge ([`Op::IncLt`] and friends); chains of `iadd`
//! ([`Op::Add3`], [`Op::Add4`]); a field read feeding an `iadd`
//! ([`Op::AddF`]); array accesses with a constant index
//! ([`Op::IaLoadK`] ...). A fusion only merges an op with the one emitted
//! just before it in the same basic block, whose result nothing else reads.
//!
//! Calls overlap frames: the caller's argument slots become the callee's
//! first locals, and the callee's return value lands in the first of them,
//! which is exactly where the caller expects its result. Branch targets are
//! op indices; calls hold the callee's method index or the native's index in
//! the class's bound-native table (a function pointer).
//!
//! This form is also the intended input of a later JIT: it is typed by
//! construction (every slot's type at every op is the verifier's), has no
//! stack pointer, explicit basic blocks (branch targets), and every
//! run-time check is an explicit property of an op (array ops check null and
//! bounds, `Div`/`Rem` check zero, `NullCheck` before field use through a
//! reference that is not provably `this`).
//!
//! The folder holds the register form ([`Op`] and what a decoded method
//! carries, `op.rs`), the lowering from verified bytecode ([`decode`],
//! `lower.rs`), the peephole passes over its ops (`peephole.rs`), division
//! by a constant ([`DivMagic`], `divmagic.rs`), the check of the
//! invariants the interpreter relies on ([`validate()`], `validate.rs`)
//! and the collector's roots in a frame (`roots.rs`).

mod divmagic;
mod lower;
mod op;
mod peephole;
mod roots;
mod validate;

pub use divmagic::DivMagic;
pub use lower::decode;
pub use op::{Arg, MethodCode, Op, Slot, SwitchTable};
pub(crate) use roots::{allocating, class_masks, frame_roots, RetAddr, SlotMasks};
pub use validate::validate;
