//! SPINE's cheap clock for timing handler invocations: the trace's
//! time-stamp counter (one `rdtsc`, about 12 ns here against 30 for
//! `Instant::now`), read twice around every invocation, and converted to
//! nanoseconds only when statistics are read, at the rate measured since
//! the runtime started (`start`): the longer the engine has run, the
//! closer the rate.

use std::sync::OnceLock;
use std::time::Instant;

pub(crate) use crate::spine::trace::ticks;

/// The clock's base: an instant and the counter then.
static BASE: OnceLock<(Instant, u64)> = OnceLock::new();

/// Fix the base (the runtime does as it starts).
pub(crate) fn start() {
    BASE.get_or_init(|| (Instant::now(), ticks()));
}

/// `t` ticks in nanoseconds.
pub(crate) fn ns(t: u64) -> u64 {
    let &(at, base) = BASE.get_or_init(|| (Instant::now(), ticks()));
    let ticks = ticks().wrapping_sub(base);
    let elapsed = at.elapsed().as_nanos() as f64;
    if ticks == 0 || elapsed == 0.0 {
        return t;
    }
    (t as f64 * elapsed / ticks as f64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_convert_to_the_time_they_took() {
        start();
        let (t0, i0) = (ticks(), Instant::now());
        while i0.elapsed().as_millis() < 20 {
            std::hint::spin_loop();
        }
        let (dt, di) = (ticks() - t0, i0.elapsed().as_nanos() as f64);
        let got = ns(dt) as f64;
        assert!((got / di - 1.0).abs() < 0.25, "{got} ns for {di} ns");
    }
}
