//! Helpers shared by this crate's integration tests.

use std::sync::atomic::Ordering;

use unet::{Endpoint, Session};
use unet_abi::{CountersHeader, EndpointCounter, EndpointSlot, EngineCounter, ENDPOINT_SLOTS_OFF};

/// An engine-wide counter, read from the session's counters segment.
pub fn engine_counter(s: &Session, c: EngineCounter) -> u64 {
    let (seg, _) = s.counters().expect("counters segment");
    // SAFETY: the segment starts with the counters header (mapped with its
    // full size by counters()); the values are atomics.
    let h = unsafe { seg.ptr().cast::<CountersHeader>().as_ref() };
    h.engine[c as usize].load(Ordering::Relaxed)
}

/// One counter of endpoint `ep`, read from the session's counters segment.
pub fn endpoint_counter(s: &Session, ep: &Endpoint, c: EndpointCounter) -> u64 {
    let (seg, max) = s.counters().expect("counters segment");
    let size = std::mem::size_of::<EndpointSlot>();
    for i in 0..max as usize {
        let Some(p) = seg.at(ENDPOINT_SLOTS_OFF + i * size, size) else {
            break;
        };
        // SAFETY: in bounds of the mapping (checked by at()), 8-byte
        // aligned; the slot's fields are atomics.
        let slot = unsafe { p.cast::<EndpointSlot>().as_ref() };
        if slot.live.load(Ordering::Acquire) != 0
            && slot.endpoint_id.load(Ordering::Relaxed) == ep.id()
        {
            return slot.counters[c as usize].load(Ordering::Relaxed);
        }
    }
    panic!("endpoint {} has no counters slot", ep.id());
}
