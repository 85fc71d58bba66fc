//! The budget of one invocation, which the interpreter and compiled code
//! share so that both charge and stop alike: fuel runs in a register and
//! moves in from a reserve in parts ([`Budget`]), ending at the host's
//! checkpoint ([`Checkpoint`]) and at every slice of a time limit;
//! [`refill`] moves the next part in when the register goes below zero.
//! [`switch_cost`] is what a `lookupswitch` charges.

use crate::decode::SwitchTable;
use crate::{Fault, Limits};

/// Fuel a switch charges besides the jump: nothing for a `tableswitch`
/// (one indexed jump), the depth of the binary search for a
/// `lookupswitch` of `n` keys (`floor(log2 n) + 1`). Compiled code charges
/// the same.
#[inline]
pub(crate) fn switch_cost(st: &SwitchTable) -> i64 {
    if st.dense {
        0
    } else {
        (usize::BITS - st.keys.len().leading_zeros()) as i64
    }
}

/// A hook the interpreter calls once in an invocation, when it has used a
/// given amount of fuel (see
/// [`Vm::set_checkpoint`](crate::Vm::set_checkpoint)).
pub(crate) struct Checkpoint<H> {
    pub fuel: u64,
    pub hook: fn(&mut H),
}

impl<H> Clone for Checkpoint<H> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<H> Copy for Checkpoint<H> {}

/// The budget of one invocation beyond the fuel register: the invocation
/// runs on `fuel` (a register of the loop or of compiled code) and takes
/// more from `reserve` each time `fuel` goes below zero ([`refill`]).
///
/// Fuel moves into the register in parts, so that the hot path stays one
/// compare of one register with zero while the cold path can do more:
/// the parts end at the checkpoint (where the host's hook runs once, see
/// [`Vm::set_checkpoint`](crate::Vm::set_checkpoint)) and, when
/// [`Limits::max_time`] is set, every [`crate::TIME_SLICE`] units (where
/// the clock is read). Without either, the whole budget is one part, as
/// if there were no reserve.
pub(crate) struct Budget<H> {
    /// The first part (the register's fuel before the entry charge).
    pub first: i64,
    /// Fuel not yet moved into the register.
    pub reserve: i64,
    /// The checkpoint's hook, until it has run.
    pub hook: Option<fn(&mut H)>,
    /// The hook runs when the register is spent and `reserve` is at most
    /// this (the invocation has used more than the checkpoint's fuel).
    hook_at: i64,
    /// The time limit, if any (parts of [`crate::TIME_SLICE`] units).
    clock: Option<Clock>,
}

/// The time limit of an invocation.
pub(crate) struct Clock {
    max: std::time::Duration,
    /// When the first part ran out (the first reading of the clock).
    started: Option<std::time::Instant>,
}

impl<H> Budget<H> {
    /// The budget of an invocation under `limits`. Built in place, where
    /// it stays (the register's fuel is read from `first`): copying a
    /// freshly written budget whole stalls the processor (its stores
    /// cannot be forwarded to a wider load), which costs an invocation
    /// several nanoseconds.
    #[inline(always)]
    pub(crate) fn new(limits: &Limits, checkpoint: Option<Checkpoint<H>>) -> Budget<H> {
        let total: i64 = limits.fuel.min(i64::MAX as u64) as i64;
        let (mut first, hook, hook_at) = match checkpoint {
            Some(c) if (c.fuel as i64) < total && c.fuel < i64::MAX as u64 => {
                (c.fuel as i64, Some(c.hook), total - c.fuel as i64)
            }
            _ => (total, None, 0),
        };
        if limits.max_time.is_some() {
            first = first.min(crate::TIME_SLICE as i64);
        }
        Budget {
            first,
            reserve: total - first,
            hook,
            hook_at,
            clock: limits.max_time.map(|max| Clock { max, started: None }),
        }
    }
}

/// The register `fuel` went below zero: move the next part of the budget
/// in (running the checkpoint's hook when passing it), as much as covers
/// the charge that overdrew it, and read the clock if there is a time
/// limit. Returns the new fuel and the fault that stops the invocation,
/// if any: out of fuel (the whole budget is spent) or over its time.
/// Interpreter and compiled code (`jit` helpers) share it. `fuel` is
/// passed by value so that the interpreter's stays in a register.
#[cold]
#[inline(never)]
pub(crate) fn refill<H>(mut fuel: i64, b: &mut Budget<H>, host: &mut H) -> (i64, Option<Fault>) {
    let f = refill_at(&mut fuel, b, host);
    (fuel, f)
}

#[inline(always)]
fn refill_at<H>(fuel: &mut i64, b: &mut Budget<H>, host: &mut H) -> Option<Fault> {
    while *fuel < 0 && b.reserve > 0 {
        if b.hook.is_some() && b.reserve <= b.hook_at {
            if let Some(h) = b.hook.take() {
                h(host);
            }
        }
        let cap = if b.hook.is_some() {
            b.reserve - b.hook_at
        } else {
            b.reserve
        };
        let slice = match b.clock {
            Some(_) => crate::TIME_SLICE as i64,
            None => i64::MAX,
        };
        let take = cap.min(slice.max(fuel.saturating_neg()));
        *fuel += take;
        b.reserve -= take;
    }
    if *fuel < 0 {
        return Some(Fault::OutOfFuel);
    }
    if let Some(c) = &mut b.clock {
        let now = std::time::Instant::now();
        match c.started {
            None => c.started = Some(now),
            Some(t) if now.saturating_duration_since(t) >= c.max => return Some(Fault::Timeout),
            Some(_) => {}
        }
    }
    None
}
