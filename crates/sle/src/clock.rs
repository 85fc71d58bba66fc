//! Clocks: the applets' `now()` and the cheap timestamps of the
//! per-invocation statistics.

use std::time::Instant;

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
