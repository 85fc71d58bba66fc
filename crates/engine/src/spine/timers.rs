//! SPINE's timers: `Spine.timer(micros, method, context)` asks for
//! `method` (a handler of the extension's class, named by a string
//! literal as `addHandler`'s are) to run with `context` and an empty
//! message once `micros` microseconds have passed.
//!
//! A timer that is due becomes a `Timer` event of the one queue (the
//! paper's system handler for timers), run in its priority like any
//! other; the event's `arg` names the fired timer here. The earliest
//! timer is the SPINE part's deadline, so an idle engine sleeps until
//! it and no longer. An extension has at most [`TIMERS_PER_EXT`] timers
//! pending (set and not yet run); one more is refused with `E_LIMIT`.
//! When an extension goes, its timers go with it (counted as dropped).
//!
//! For the event graph a timer keeps the tag of the event that set it:
//! its `Timer` event is drawn caused by that event, and starts a message
//! of its own.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use crate::spine::events::Tag;
use crate::spine::rt::E_LIMIT;

/// Timers one extension may have pending.
pub(crate) const TIMERS_PER_EXT: usize = 64;

/// A timer: whose, which method, with which context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timer {
    /// The extension's slot and id (the id tells a later extension in
    /// the same slot apart).
    pub slot: u32,
    pub ext_id: u32,
    /// The method's index in its class.
    pub method: u32,
    pub context: i32,
    /// The event that set it (for the event graph).
    pub tag: Tag,
}

/// A timer waiting for its time: ordered by time, then by the order
/// they were set.
struct Pending {
    due: Instant,
    seq: u64,
    timer: Timer,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        (self.due, self.seq) == (o.due, o.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    /// Reversed: the heap's top is the earliest.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.due, o.seq).cmp(&(self.due, self.seq))
    }
}

/// The timers of every extension of the adapter (see the module
/// documentation).
#[derive(Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Pending>,
    seq: u64,
    /// The earliest time in the heap (read every turn while any is set).
    next: Option<Instant>,
    /// Fired timers whose event has not run, by the event's `arg`; a slot
    /// is reused only once its event has run.
    fired: Vec<Option<Timer>>,
    free: Vec<u32>,
    /// Timers pending (in the heap or fired), by extension slot.
    pending: Vec<u16>,
    /// Timers set, fired, refused at the cap, and dropped (their
    /// extension went, or the queue or the message pool was full).
    pub set: u64,
    pub fired_count: u64,
    pub refused: u64,
    pub dropped: u64,
    /// Timer invocations terminated (a fault or the watchdog).
    pub faulted: u64,
}

impl Timers {
    /// The earliest time a timer is due, if one is set.
    #[inline]
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.next
    }

    /// Whether a timer is due now (reads the clock only when one is set).
    #[inline]
    pub(crate) fn is_due(&self) -> bool {
        self.next.is_some_and(|d| Instant::now() >= d)
    }

    /// Timers pending for extension slot `slot`.
    #[cfg(test)]
    pub(crate) fn pending(&self, slot: u32) -> usize {
        self.pending.get(slot as usize).map_or(0, |&n| n as usize)
    }

    /// Set `t` to fire `micros` from now: 0, or `E_LIMIT` when its
    /// extension has [`TIMERS_PER_EXT`] pending or `micros` is negative.
    pub(crate) fn set(&mut self, micros: i32, t: Timer) -> i32 {
        let slot = t.slot as usize;
        if self.pending.len() <= slot {
            self.pending.resize(slot + 1, 0);
        }
        if micros < 0 || self.pending[slot] as usize >= TIMERS_PER_EXT {
            self.refused += 1;
            return E_LIMIT;
        }
        self.pending[slot] += 1;
        let due = Instant::now() + Duration::from_micros(micros as u64);
        self.seq += 1;
        self.heap.push(Pending {
            due,
            seq: self.seq,
            timer: t,
        });
        self.next = self.heap.peek().map(|p| p.due);
        self.set += 1;
        0
    }

    /// Take the timers due at `now`, earliest first, handing each with
    /// the number its event names it by (`arg`) to `f`; `f` says whether
    /// the event was queued (if not, the timer is dropped and counted).
    /// Returns how many fired.
    pub(crate) fn fire_due(
        &mut self,
        now: Instant,
        mut f: impl FnMut(u32, &Timer) -> bool,
    ) -> usize {
        let mut n = 0;
        while self.heap.peek().is_some_and(|p| p.due <= now) {
            let Some(p) = self.heap.pop() else { break };
            let i = match self.free.pop() {
                Some(i) => i,
                None => {
                    self.fired.push(None);
                    self.fired.len() as u32 - 1
                }
            };
            self.fired[i as usize] = Some(p.timer);
            self.fired_count += 1;
            n += 1;
            if !f(i, &p.timer) {
                self.take(i);
                self.dropped += 1;
            }
        }
        self.next = self.heap.peek().map(|p| p.due);
        n
    }

    /// The fired timer event `arg` names, taken (None: its extension went
    /// meanwhile, already counted). Its extension has one timer fewer
    /// pending.
    pub(crate) fn take(&mut self, arg: u32) -> Option<Timer> {
        let t = self.fired.get_mut(arg as usize)?.take();
        // Its event ran (or never will): the slot may be reused.
        if (arg as usize) < self.fired.len() {
            self.free.push(arg);
        }
        let t = t?;
        if let Some(p) = self.pending.get_mut(t.slot as usize) {
            *p = p.saturating_sub(1);
        }
        Some(t)
    }

    /// Extension slot `slot` is emptied: its timers go (counted as
    /// dropped; a fired one's event finds nothing). Returns how many.
    pub(crate) fn cancel(&mut self, slot: u32) -> usize {
        let before = self.heap.len();
        self.heap.retain(|p| p.timer.slot != slot);
        let mut n = before - self.heap.len();
        for f in self.fired.iter_mut() {
            if f.is_some_and(|t| t.slot == slot) {
                *f = None;
                n += 1;
            }
        }
        if let Some(p) = self.pending.get_mut(slot as usize) {
            *p = 0;
        }
        self.next = self.heap.peek().map(|p| p.due);
        self.dropped += n as u64;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timer(slot: u32, method: u32) -> Timer {
        Timer {
            slot,
            ext_id: slot + 100,
            method,
            context: 0,
            tag: Tag::default(),
        }
    }

    #[test]
    fn timers_fire_in_time_order_then_in_the_order_set() {
        let mut t = Timers::default();
        assert_eq!(t.set(300, timer(0, 3)), 0);
        assert_eq!(t.set(100, timer(0, 1)), 0);
        assert_eq!(t.set(100, timer(1, 2)), 0);
        assert_eq!(t.set(0, timer(1, 0)), 0);
        let base = Instant::now();
        assert!(t.next_due().unwrap() <= base);
        let mut got = Vec::new();
        let n = t.fire_due(base + Duration::from_millis(1), |i, tm| {
            got.push((i, tm.method));
            true
        });
        assert_eq!(n, 4);
        let order: Vec<u32> = got.iter().map(|g| g.1).collect();
        assert_eq!(order, [0, 1, 2, 3]);
        assert_eq!(t.next_due(), None);
        assert_eq!((t.pending(0), t.pending(1)), (2, 2));
        for (i, m) in got {
            assert_eq!(t.take(i).map(|tm| tm.method), Some(m));
        }
        assert_eq!((t.pending(0), t.pending(1)), (0, 0));
        assert_eq!((t.set, t.fired_count, t.dropped), (4, 4, 0));
    }

    #[test]
    fn nothing_fires_before_its_time() {
        let mut t = Timers::default();
        t.set(1_000_000, timer(0, 1));
        assert!(!t.is_due());
        assert_eq!(t.fire_due(Instant::now(), |_, _| true), 0);
        assert_eq!(t.pending(0), 1);
    }

    #[test]
    fn an_extension_has_at_most_its_cap_pending() {
        let mut t = Timers::default();
        for _ in 0..TIMERS_PER_EXT {
            assert_eq!(t.set(10, timer(2, 1)), 0);
        }
        assert_eq!(t.set(10, timer(2, 1)), E_LIMIT);
        assert_eq!(t.set(-1, timer(3, 1)), E_LIMIT);
        assert_eq!(t.refused, 2);
        // Another extension is not charged.
        assert_eq!(t.set(10, timer(3, 1)), 0);
        // One fired and run: room for one more.
        let mut first = None;
        t.fire_due(Instant::now() + Duration::from_secs(1), |i, tm| {
            if tm.slot == 2 && first.is_none() {
                first = Some(i);
            }
            true
        });
        t.take(first.unwrap());
        assert_eq!(t.set(10, timer(2, 1)), 0);
    }

    #[test]
    fn a_slot_emptied_drops_its_timers_pending_and_fired() {
        let mut t = Timers::default();
        t.set(0, timer(0, 1));
        t.set(0, timer(1, 1));
        t.set(1_000_000, timer(0, 2));
        let mut fired = Vec::new();
        t.fire_due(Instant::now() + Duration::from_millis(1), |i, tm| {
            fired.push((i, tm.slot));
            true
        });
        assert_eq!(t.cancel(0), 2);
        assert_eq!(t.pending(0), 0);
        assert_eq!(t.dropped, 2);
        for (i, slot) in fired {
            assert_eq!(t.take(i).is_some(), slot == 1, "slot {slot}");
        }
        assert_eq!(t.next_due(), None);
        // The slots of the fired timers are reused once their events ran.
        t.set(0, timer(4, 1));
        let mut again = Vec::new();
        t.fire_due(Instant::now() + Duration::from_millis(1), |i, _| {
            again.push(i);
            true
        });
        assert!(again[0] < 2);
    }

    #[test]
    fn a_timer_whose_event_cannot_be_queued_is_dropped_and_counted() {
        let mut t = Timers::default();
        t.set(0, timer(0, 1));
        t.fire_due(Instant::now() + Duration::from_millis(1), |_, _| false);
        assert_eq!((t.pending(0), t.dropped), (0, 1));
    }
}
