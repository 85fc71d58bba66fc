//! The budget of one invocation, which the interpreter and compiled code
//! share so that both charge and stop alike: fuel runs in a register and
//! moves in from a reserve in parts ([`Budget`]), ending at the host's
//! checkpoint ([`Checkpoint`]) and at every slice of a time limit
//! ([`Clock`], paced by the VM's [`Pace`]); [`refill`] moves the next part
//! in when the register goes below zero. What a `lookupswitch` charges
//! is the lowering's ([`SwitchTable::cost`](crate::decode::SwitchTable)).
//!
//! The time limit is a watchdog that costs nothing on the hot path: the
//! register's compare with zero at back-edges, calls and native calls is
//! already there for fuel, so the clock is read only where a part ends.
//! What makes it prompt is the size of the parts. They are sized in time
//! and converted to fuel with the VM's *pace* (picoseconds per unit,
//! learned from the parts it measured): the first part is a quarter of the
//! limit (so an invocation that finishes within it never reads the clock,
//! and none reads it on the way in), each later part half of the time left,
//! and at least a sixteenth of the limit, so parts get finer as the
//! deadline nears. Time is counted from the first reading, the end of the
//! first part (there is no reading at the start), so an invocation never
//! stops before its limit, and stops within about a quarter of the limit
//! (the first part, at the pace) plus a sixteenth (the last) past it. The
//! first part is only as short as the pace is right, which is why the pace
//! is learned conservatively: it rises at once to a slower measured pace
//! (at most doubling per reading) and decays by an eighth per reading
//! towards a faster one. An invocation that read the clock reads it once
//! more as it ends ([`close`]), and that reading may only make the pace
//! faster: otherwise a VM whose invocations always outlast their first
//! part by a little would measure only first parts, which it does not
//! time, and keep its initial pace (and its clock readings) forever.
//!
//! The clock lives in the VM, pace and all, between invocations. On the way
//! in an invocation reads the first part's size from it and writes only a
//! byte of its budget that says it is timed; the clock is set for the
//! invocation at its first reading. An invocation that finishes within its
//! first part thus costs the same with a time limit as without.

use crate::fault::Fault;
use crate::limits::Limits;

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
/// [`Limits::max_time`] is set, at the slices of its [`Clock`] (where the
/// clock is read). Without either, the whole budget is one part, as if
/// there were no reserve.
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
    /// Whether the VM's [`Clock`] applies to this invocation and whether
    /// it has been read in it yet: the clock lives in the VM and is set
    /// for the invocation at its first reading, so that an invocation
    /// that never reads it writes only this byte for it.
    timed: Timed,
}

impl<H> Clone for Budget<H> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<H> Copy for Budget<H> {}

/// Whether an invocation is under the VM's [`Clock`] (see [`Budget`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Timed {
    /// No time or check limit.
    No,
    /// Under the clock, not read yet in this invocation.
    Unread,
    /// Under the clock, read at least once in this invocation.
    Read,
}

/// Largest pace (picoseconds per unit of fuel) a VM learns: 1 ms a unit.
const MAX_PACE: u64 = 1_000_000_000;

/// How a VM slices the budgets of its invocations, kept between them:
/// its pace under a time limit (picoseconds per unit of fuel) and the
/// first part that gives (a quarter of the limit at this pace, at most
/// [`crate::limits::TIME_SLICE`] units), or a check limit
/// ([`Vm::set_check_limit`](crate::Vm::set_check_limit)). A VM with
/// neither keeps `None` and its budgets are one part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pace {
    /// Picoseconds per unit.
    pub ps: u64,
    /// The first part, in units.
    pub first: i64,
    /// The time limit in picoseconds (`u64::MAX`: none).
    max: u64,
    /// Stop at this fuel check (0: no check limit).
    steps: u64,
}

impl Pace {
    /// Assumed before any measurement: 4 ns a unit, slower than the
    /// interpreter's usual pace, so that a fresh VM's first part is short.
    pub(crate) const INITIAL_PS: u64 = 4000;

    /// The slicing for pace `ps`, time limit `max` and check limit
    /// `steps` (0: none); `None` without either limit.
    pub(crate) fn new(ps: u64, max: Option<std::time::Duration>, steps: u64) -> Option<Pace> {
        if max.is_none() && steps == 0 {
            return None;
        }
        let mut p = Pace::within(ps, max.map_or(u64::MAX, duration_ps));
        if steps > 0 {
            // Every check takes a part of its own (see `Clock::read`).
            p.steps = steps;
            p.first = 0;
        }
        Some(p)
    }

    /// The pace in picoseconds a unit, under a time limit (not a check
    /// limit).
    pub(crate) fn timed(&self) -> Option<u64> {
        (self.steps == 0).then_some(self.ps)
    }

    /// The pace `ps` under a time limit of `max` picoseconds.
    fn within(ps: u64, max: u64) -> Pace {
        let ps = ps.clamp(1, MAX_PACE);
        Pace {
            ps,
            first: units(max / 4, ps),
            max,
            steps: 0,
        }
    }
}

fn duration_ps(d: std::time::Duration) -> u64 {
    d.as_nanos().saturating_mul(1000).min(u64::MAX as u128) as u64
}

/// Units of fuel that take `ps` picoseconds at `pace`: at least one, at
/// most [`crate::limits::TIME_SLICE`].
fn units(ps: u64, pace: u64) -> i64 {
    (ps / pace.max(1)).clamp(1, crate::limits::TIME_SLICE) as i64
}

/// The time limit (or check limit) of a VM's invocations (see the
/// module's documentation): its slicing, kept between invocations, and
/// the state of the invocation that read it last, set afresh at the first
/// reading of each invocation ([`Clock::start`]), never on the way in.
pub(crate) struct Clock {
    /// The VM's slicing; its pace is updated at every reading after the
    /// first of an invocation.
    pub pace: Pace,
    /// The last reading of the clock (none yet: the first part runs).
    last: Option<std::time::Instant>,
    /// Time from the first reading to `last`, in picoseconds.
    used: u64,
    /// Fuel checks that ended a part so far.
    checks: u64,
    /// Fuel left (register and reserve) at `last`.
    mark: i64,
    /// The size of the next part, in units.
    slice: i64,
}

impl Clock {
    /// The clock of a VM sliced as `pace` says.
    pub(crate) fn new(pace: Pace) -> Clock {
        Clock {
            pace,
            last: None,
            used: 0,
            checks: 0,
            mark: 0,
            slice: pace.first,
        }
    }

    /// The first reading of an invocation: forget the last one's. (`mark`
    /// and `slice` are set by the reading before they are used.)
    fn start(&mut self) {
        self.last = None;
        self.used = 0;
        self.checks = 0;
    }

    /// A part ended with `left` units of fuel left in all: the fault that
    /// stops the invocation (over its time, or at its check limit), if
    /// any. Sets the next part's size.
    fn read(&mut self, left: i64) -> Option<Fault> {
        if self.pace.steps > 0 {
            // One check a part: the next part covers exactly the charge
            // that overdrew the register, so the next check overdraws it.
            self.checks += 1;
            if self.checks >= self.pace.steps {
                return Some(Fault::OutOfFuel);
            }
            self.slice = 0;
            return None;
        }
        let now = std::time::Instant::now();
        let ran = self.mark.saturating_sub(left).max(0) as u64;
        self.mark = left;
        let max = self.pace.max;
        match self.last {
            // The end of the first part: time is counted from here.
            None => {}
            Some(t) => {
                let dt = duration_ps(now.saturating_duration_since(t));
                self.used = self.used.saturating_add(dt);
                if let Some(measured) = dt.checked_div(ran) {
                    let old = self.pace.ps;
                    let ps = measured.min(old.saturating_mul(2)).max(old - old / 8);
                    if ps != old {
                        self.pace = Pace::within(ps, max);
                    }
                }
            }
        }
        self.last = Some(now);
        if self.used >= max {
            return Some(Fault::Timeout);
        }
        let left_ps = max - self.used;
        self.slice = units((left_ps / 2).max(max / 16), self.pace.ps);
        None
    }

    /// The invocation that read the clock ended with `left` units left:
    /// learn from its last part. A closing reading only makes the pace
    /// faster, by at most an eighth as a reading within an invocation
    /// does: without it, a VM whose invocations always end in their
    /// second part would never learn a pace faster than the one it
    /// started with, and every invocation would read the clock. (A part
    /// too short to time well reads slow, and is not learned from; what
    /// makes the pace slower is a reading inside an invocation, where the
    /// termination bound needs it.)
    fn close(&mut self, left: i64) {
        let Some(t) = self.last else {
            return;
        };
        if self.pace.steps > 0 {
            return;
        }
        let ran = self.mark.saturating_sub(left).max(0) as u64;
        if ran == 0 {
            return;
        }
        let dt = duration_ps(t.elapsed());
        let old = self.pace.ps;
        let measured = dt / ran;
        if measured < old {
            self.pace = Pace::within(measured.max(old - old / 8), self.pace.max);
        }
    }
}

/// An invocation that read the VM's `clock` ([`Budget::read_clock`],
/// which the callers test, keeping this cold call off the common path)
/// ended with `left` units of fuel left: read the clock once more to
/// learn the pace (see [`Clock::close`]). Interpreter and compiled code
/// call it alike, after the invocation and before the next one's budget
/// is planned.
#[cold]
#[inline(never)]
pub(crate) fn close(clock: &mut Option<Clock>, left: i64) {
    if let Some(c) = clock {
        c.close(left);
    }
}

impl<H> Budget<H> {
    /// Whether this invocation read the VM's clock (it outlasted its
    /// first part under a time limit).
    #[inline(always)]
    pub(crate) fn read_clock(&self) -> bool {
        self.timed == Timed::Read
    }

    /// The budget of an invocation under `limits`, sliced as the VM's
    /// `clock` says (see [`Pace`]). Built in place, where it stays (the
    /// register's fuel is read from `first`): copying a freshly written
    /// budget whole stalls the processor (its stores cannot be forwarded
    /// to a wider load), which costs an invocation several nanoseconds.
    /// Of the clock it reads the first part's size and writes nothing.
    #[inline(always)]
    pub(crate) fn new(
        limits: &Limits,
        checkpoint: Option<Checkpoint<H>>,
        clock: &Option<Clock>,
    ) -> Budget<H> {
        let total: i64 = limits.fuel.min(i64::MAX as u64) as i64;
        let (mut first, hook, hook_at) = match checkpoint {
            Some(c) if (c.fuel as i64) < total && c.fuel < i64::MAX as u64 => {
                (c.fuel as i64, Some(c.hook), total - c.fuel as i64)
            }
            _ => (total, None, 0),
        };
        let timed = match clock {
            Some(c) => {
                first = first.min(c.pace.first);
                Timed::Unread
            }
            None => Timed::No,
        };
        Budget {
            first,
            reserve: total - first,
            hook,
            hook_at,
            timed,
        }
    }
}

/// The register `fuel` went below zero: read the VM's `clock` if there is
/// a time limit, and move the next part of the budget in (running the
/// checkpoint's hook when passing it), as much as covers the charge that
/// overdrew it. Returns the new fuel and the fault that stops the
/// invocation, if any: over its time, or out of fuel (the whole budget is
/// spent). Interpreter and compiled code (`jit` helpers) share it. `fuel`
/// is passed by value so that the interpreter's stays in a register.
#[cold]
#[inline(never)]
pub(crate) fn refill<H>(
    mut fuel: i64,
    b: &mut Budget<H>,
    clock: &mut Option<Clock>,
    host: &mut H,
) -> (i64, Option<Fault>) {
    let f = refill_at(&mut fuel, b, clock, host);
    (fuel, f)
}

#[inline(always)]
fn refill_at<H>(
    fuel: &mut i64,
    b: &mut Budget<H>,
    clock: &mut Option<Clock>,
    host: &mut H,
) -> Option<Fault> {
    let slice = match (b.timed, clock) {
        (Timed::Unread | Timed::Read, Some(c)) => {
            if b.timed == Timed::Unread {
                c.start();
                b.timed = Timed::Read;
            }
            if let Some(f) = c.read(fuel.saturating_add(b.reserve)) {
                return Some(f);
            }
            c.slice
        }
        _ => i64::MAX,
    };
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
        let take = cap.min(slice.max(fuel.saturating_neg()));
        *fuel += take;
        b.reserve -= take;
    }
    if *fuel < 0 {
        return Some(Fault::OutOfFuel);
    }
    None
}
