//! Clocks: the applets' `now()` and timers, and the cheap timestamps of
//! the per-invocation statistics.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// The `now()` clock of an applet attached at `epoch`: microseconds,
/// wrapping at 2^31.
pub fn now_us_since(epoch: Instant) -> i32 {
    (epoch.elapsed().as_micros() as u64 & 0x7fff_ffff) as i32
}

/// A cheap timestamp for per-invocation statistics: the time-stamp counter
/// on x86-64 (a few nanoseconds to read, where a clock read costs ~30),
/// nanoseconds since a fixed start elsewhere.
#[inline]
pub(crate) fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions; it only reads a counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Convert a difference of [`ticks`] to nanoseconds (calibrated once
/// against the monotonic clock over 2 ms).
pub(crate) fn ticks_to_ns(d: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        static NS_PER_TICK: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
        let f = *NS_PER_TICK.get_or_init(|| {
            let (t0, c0) = (Instant::now(), ticks());
            while t0.elapsed() < std::time::Duration::from_millis(2) {
                std::hint::spin_loop();
            }
            let (ns, c) = (t0.elapsed().as_nanos() as f64, ticks().wrapping_sub(c0));
            if c == 0 {
                1.0
            } else {
                ns / c as f64
            }
        });
        (d as f64 * f) as u64
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        d
    }
}

/// Default bound on the timers one applet may have set at once.
pub const MAX_TIMERS: usize = 4096;

/// A timer: when it is due, the order it was set in, its argument.
type Timer = Reverse<(Instant, u64, i32)>;

/// An applet's clock and timers: what `now()` reads and `setTimer` sets.
/// They live with the natives' host state ([`crate::SleHost`]), so that
/// those natives reach them without going through the endpoint; the
/// [`crate::Runner`] runs the timers as they fall due.
pub(crate) struct Timers {
    /// The origin of `now()`: when the applet was attached.
    pub(crate) epoch: Instant,
    heap: BinaryHeap<Timer>,
    seq: u64,
    /// Most timers set at once.
    max: usize,
}

impl Timers {
    pub(crate) fn new(epoch: Instant, max: usize) -> Timers {
        Timers {
            epoch,
            heap: BinaryHeap::new(),
            seq: 0,
            max,
        }
    }

    /// `now()`: microseconds since the epoch, wrapping at 2^31.
    pub(crate) fn now_us(&self) -> i32 {
        now_us_since(self.epoch)
    }

    /// Call `doTimer(arg)` after `delay_us`; refused past [`Timers::max`].
    pub(crate) fn set(&mut self, delay_us: u32, arg: i32) -> Result<(), String> {
        if self.heap.len() >= self.max {
            return Err(format!("too many timers (at most {})", self.max));
        }
        let due = Instant::now() + Duration::from_micros(delay_us as u64);
        self.heap.push(Reverse((due, self.seq, arg)));
        self.seq += 1;
        Ok(())
    }

    /// When the earliest timer falls due.
    #[inline]
    pub(crate) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(t)| t.0)
    }

    /// The argument of the earliest timer, taken, if it is due at `now`
    /// (timers fall due in the order of their times, equal times in the
    /// order they were set).
    pub(crate) fn take_due(&mut self, now: Instant) -> Option<i32> {
        match self.heap.peek() {
            Some(Reverse((due, _, _))) if *due <= now => {}
            _ => return None,
        }
        self.heap.pop().map(|Reverse((_, _, arg))| arg)
    }

    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    pub(crate) fn clear(&mut self) {
        self.heap.clear();
    }
}
