//! Helpers shared by this crate's integration tests.

use std::sync::atomic::Ordering;

use unet::{Endpoint, Session};
use unet_abi::{CountersHeader, EndpointCounter, EndpointSlot, EngineCounter, ENDPOINT_SLOTS_OFF};

/// xorshift64*: a fixed sequence per seed, so that a failure replays from
/// the seed printed.
#[allow(dead_code)] // not every test binary uses it
pub struct Rng(pub u64);

#[allow(dead_code)] // not every test binary uses it
impl Rng {
    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// An engine-wide counter, read from the session's counters segment.
#[allow(dead_code)] // not every test binary uses it
pub fn engine_counter(s: &Session, c: EngineCounter) -> u64 {
    let (seg, _) = s.counters().expect("counters segment");
    // SAFETY: the segment starts with the counters header (mapped with its
    // full size by counters()); the values are atomics.
    let h = unsafe { seg.ptr().cast::<CountersHeader>().as_ref() };
    h.engine[c as usize].load(Ordering::Relaxed)
}

/// Call `f` with each live endpoint slot of the session's counters segment
/// until it returns true.
#[allow(dead_code)] // not every test binary uses it
pub fn find_live_slot(s: &Session, mut f: impl FnMut(&EndpointSlot) -> bool) {
    let (seg, max) = s.counters().expect("counters segment");
    let size = std::mem::size_of::<EndpointSlot>();
    for i in 0..max as usize {
        let Some(p) = seg.at(ENDPOINT_SLOTS_OFF + i * size, size) else {
            break;
        };
        // SAFETY: in bounds of the mapping (checked by at()), 8-byte
        // aligned; the slot's fields are atomics.
        let slot = unsafe { p.cast::<EndpointSlot>().as_ref() };
        if slot.live.load(Ordering::Acquire) != 0 && f(slot) {
            return;
        }
    }
}

/// One counter of endpoint `ep`, read from the session's counters segment.
#[allow(dead_code)] // not every test binary uses it
pub fn endpoint_counter(s: &Session, ep: &Endpoint, c: EndpointCounter) -> u64 {
    let mut v = None;
    find_live_slot(s, |slot| {
        if slot.endpoint_id.load(Ordering::Relaxed) != ep.id() {
            return false;
        }
        v = Some(slot.counters[c as usize].load(Ordering::Relaxed));
        true
    });
    v.unwrap_or_else(|| panic!("endpoint {} has no counters slot", ep.id()))
}

/// The session's engine counters and each endpoint's, those that are not
/// zero, one per line: what a failing test prints to say where messages
/// went.
#[allow(dead_code)] // not every test binary uses it
pub fn nonzero_counters(s: &Session) -> String {
    let mut out = String::new();
    for &c in EngineCounter::ALL {
        let v = engine_counter(s, c);
        if v != 0 {
            out += &format!("  engine {} = {v}\n", c.name());
        }
    }
    find_live_slot(s, |slot| {
        let id = slot.endpoint_id.load(Ordering::Relaxed);
        for &c in EndpointCounter::ALL {
            let v = slot.counters[c as usize].load(Ordering::Relaxed);
            if v != 0 {
                out += &format!("  endpoint {id} {} = {v}\n", c.name());
            }
        }
        false
    });
    out
}
