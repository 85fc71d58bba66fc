//! Stage 4: pre-decoding verified bytecode into a register form (the
//! lowering, `lower.rs`).

mod lower;

pub use lower::*;
