//! Stage 5: the VM and its interpreter loop.
//!
//! All frames live in one reusable `Vec<i32>`; a call's frame starts at the
//! caller's first argument slot, so arguments are never copied and the
//! return value lands where the caller reads it. Return addresses live in a
//! second reusable vector. Nothing is allocated per invocation or per call
//! once the vectors have grown.
//!
//! Limits: fuel is a signed counter kept in a local of the loop. A call
//! (and the host's invocation) charges the callee's length in ops; each
//! taken backward branch charges the number of ops between its target and
//! itself (so a loop iteration costs its length); allocation charges one
//! unit per 16 elements, and a collection it sets off one unit per
//! [`crate::limits::GC_WORDS_PER_FUEL`] words it scans; a native call charges one
//! unit plus what the native charges; a `lookupswitch` charges its binary
//! search's depth. Without a back-edge the op index only grows, so the ops
//! run between two charges are bounded by the method's length, which the
//! charges cover: fuel bounds running time, deterministically. The call depth is bounded by
//! [`Limits::max_depth`](crate::Limits::max_depth) and the frame stack by [`MAX_STACK_SLOTS`](crate::MAX_STACK_SLOTS).
//!
//! A host may set a checkpoint ([`Vm::set_checkpoint`]) and a time limit
//! ([`Limits::max_time`](crate::Limits::max_time)), or a check limit ([`Vm::set_check_limit`]): the
//! budget then runs in parts ([`Budget`](crate::budget::Budget)), and running out of one calls the
//! host's hook once at the checkpoint, reads the clock (parts sized by the
//! VM's pace, finer as the deadline nears) or counts the check, and moves
//! the next part in.
//! The hot loop still compares one register with zero, so an invocation
//! that stays short pays nothing for either.
//!
//! The folder holds the interpreter loop and the invocation state it runs
//! on (`run.rs`) and the [`Vm`] a host drives (`vm.rs`).

mod run;
mod vm;

pub use vm::{FaultSite, Prepared, Vm, DEFAULT_MACHINE_STACK};
