//! Stage 5: the VM and its interpreter loop (`run.rs`).

mod run;

pub use run::{FaultSite, Prepared, Vm, DEFAULT_MACHINE_STACK};
