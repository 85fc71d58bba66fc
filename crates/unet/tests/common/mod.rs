//! Helpers shared by this crate's integration tests.

use std::sync::atomic::Ordering;

use unet::Session;
use unet_abi::{CountersHeader, EngineCounter};

/// An engine-wide counter, read from the session's counters segment.
pub fn engine_counter(s: &Session, c: EngineCounter) -> u64 {
    let (seg, _) = s.counters().expect("counters segment");
    // SAFETY: the segment starts with the counters header (mapped with its
    // full size by counters()); the values are atomics.
    let h = unsafe { seg.ptr().cast::<CountersHeader>().as_ref() };
    h.engine[c as usize].load(Ordering::Relaxed)
}
