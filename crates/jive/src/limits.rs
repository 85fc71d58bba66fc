//! The limits of a VM and of what JIVE loads: the ground floor, below
//! every stage (the sizes a class file may have, the fuel, depth, heap
//! and time of an invocation).

use std::time::Duration;

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
    /// [`Fault::Timeout`](crate::Fault::Timeout), interpreted or compiled, in a loop or deep in
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
/// 16 MiB); more is reported as [`Fault::StackOverflow`](crate::Fault::StackOverflow).
pub const MAX_STACK_SLOTS: usize = 1 << 22;
