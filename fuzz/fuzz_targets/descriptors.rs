//! Descriptor validation on an engine stepped on the fuzzer's thread
//! (invoker mode: deterministic, no engine thread): a hostile endpoint
//! pushes arbitrary send descriptors and scribbles over its own rings and
//! free buffers, and every descriptor must be accounted for (its status
//! written and exactly one count, or the impossible head counted), every
//! message sent must arrive or be counted as dropped, and the honest pair
//! beside it must keep working. The body lives with the engine's tests,
//! which also run it over seeded inputs
//! (`crates/engine/tests/descriptor_fuzz.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/engine/tests/common/descriptors.rs"]
mod descriptors;

fuzz_target!(|data: &[u8]| descriptors::run(data));
