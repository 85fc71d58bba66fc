//! Round-trip timing and the statistics the benchmarks report.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub use crate::units::{fmt_size, parse_size};

/// Round-trip samples in nanoseconds, and the clock-read cost measured
/// (and subtracted) in each run.
#[derive(Default, Clone)]
pub struct Samples {
    pub ns: Vec<u64>,
    pub clock_ns: Vec<u64>,
}

impl Samples {
    pub fn extend(&mut self, other: Samples) {
        self.ns.extend(other.ns);
        self.clock_ns.extend(other.clock_ns);
    }

    /// Median clock-read cost over the runs, in nanoseconds.
    pub fn clock_ns(&self) -> f64 {
        percentile(&self.clock_ns, 0.5)
    }

    /// Median in microseconds.
    pub fn median_us(&self) -> f64 {
        percentile(&self.ns, 0.5) / 1000.0
    }

    /// 99th percentile in microseconds.
    pub fn p99_us(&self) -> f64 {
        percentile(&self.ns, 0.99) / 1000.0
    }
}

/// Round trips per sample of [`time_round_trips`] (`unet bench pingpong
/// --group`); 1 unless set.
static GROUP: AtomicUsize = AtomicUsize::new(1);

/// Time round trips `n` at a time from now on in this process (see
/// [`time_round_trips`]; 0 is taken as 1).
pub fn set_group(n: usize) {
    GROUP.store(n.max(1), Ordering::Relaxed);
}

/// Times up to `iters` round trips `rt`, stopping early once `limit` has
/// passed: each on its own, or in groups of [`set_group`]'s `n` (each
/// sample is then the group's time over `n`). One clock read per sample:
/// each sample is the interval between consecutive reads, less the cost
/// of one read (measured just before as the median interval between
/// back-to-back reads), so the figure is the round trips alone. A clock
/// that moves in steps (10 ns on some virtual machines) makes every
/// sample of a single round trip a multiple of the step; groups of `n`
/// resolve a step's `1/n`.
pub fn time_round_trips<E>(
    iters: usize,
    limit: Duration,
    rt: impl FnMut() -> Result<(), E>,
) -> Result<Samples, E> {
    time_groups(iters, GROUP.load(Ordering::Relaxed), limit, rt)
}

/// [`time_round_trips`] in groups of `group` (0 is taken as 1).
fn time_groups<E>(
    iters: usize,
    group: usize,
    limit: Duration,
    mut rt: impl FnMut() -> Result<(), E>,
) -> Result<Samples, E> {
    let group = group.max(1);
    let clock = clock_cost_ns();
    let mut ns = Vec::with_capacity(iters.div_ceil(group));
    let start = Instant::now();
    let mut prev = start;
    for i in 0..iters.div_ceil(group) {
        for _ in 0..group {
            rt()?;
        }
        let now = Instant::now();
        let d = ((now - prev).as_nanos() as u64).saturating_sub(clock);
        ns.push(if group == 1 {
            d
        } else {
            (d as f64 / group as f64).round() as u64
        });
        prev = now;
        if (i & 63 == 63 || group > 1) && now - start > limit {
            break;
        }
    }
    Ok(Samples {
        ns,
        clock_ns: vec![clock],
    })
}

/// Round trips timed for a given size: the full count up to 4 KiB, then
/// fewer in proportion, at least 500.
pub(super) fn iters_for(iters: usize, size: usize) -> usize {
    if size <= 4096 {
        iters
    } else {
        (iters * 4096 / size).max(500).min(iters)
    }
}

/// Cost of one `Instant::now()`: the median interval between back-to-back reads.
pub fn clock_cost_ns() -> u64 {
    let mut t = [Instant::now(); 2001];
    for x in t.iter_mut() {
        *x = Instant::now();
    }
    let d: Vec<u64> = t
        .windows(2)
        .map(|w| (w[1] - w[0]).as_nanos() as u64)
        .collect();
    percentile(&d, 0.5) as u64
}

/// Nearest-rank percentile (`q` in 0..=1) of unsorted samples.
pub fn percentile(v: &[u64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1] as f64
}

/// Median of floating-point values (mean of the middle two for an even count).
/// The median of values that are all known (None if any is not, or none
/// was measured).
pub fn median_of_all(v: &[Option<f64>]) -> Option<f64> {
    let known: Vec<f64> = v.iter().copied().collect::<Option<_>>()?;
    (!known.is_empty()).then(|| median_f64(&known))
}

/// The median of the ratios of each run to the baseline run beside it
/// (runs interleaved, the i-th of each taken together): steadier than the
/// ratio of the two medians when the machine changes speed or placement
/// between runs, for each pair shares a state more often than the two
/// medians do. `None` when there is no pair.
pub fn paired_ratio(runs: &[f64], baseline_runs: &[f64]) -> Option<f64> {
    let r: Vec<f64> = runs.iter().zip(baseline_runs).map(|(v, b)| v / b).collect();
    (!r.is_empty()).then(|| median_f64(&r))
}

/// The median of the ratios of each run to the baseline run whose host
/// floor (`--host-floor`, taken before each run) was nearest its own: runs
/// compared with runs of the same placement of the two cores. Runs
/// without a host floor are left out; `None` when no pair is left.
pub fn placed_ratio(
    runs: &[f64],
    hosts: &[Option<f64>],
    baseline_runs: &[f64],
    baseline_hosts: &[Option<f64>],
) -> Option<f64> {
    let base: Vec<(f64, f64)> = baseline_runs
        .iter()
        .zip(baseline_hosts)
        .filter_map(|(&b, h)| h.map(|h| (h, b)))
        .collect();
    let r: Vec<f64> = runs
        .iter()
        .zip(hosts)
        .filter_map(|(&v, h)| {
            let h = (*h)?;
            let (_, b) = base
                .iter()
                .min_by(|x, y| (x.0 - h).abs().total_cmp(&(y.0 - h).abs()))?;
            Some(v / b)
        })
        .collect();
    (!r.is_empty()).then(|| median_f64(&r))
}

pub fn median_f64(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Runs of one measurement whose fastest is more than this many times
/// the slowest say the machine changed speed while it ran.
pub const UNSTEADY: f64 = 2.0;

/// The slowest and fastest of `runs` (figures where more is faster, or
/// times where less is) when they are more than [`UNSTEADY`] apart.
pub fn unsteady(runs: &[f64]) -> Option<(f64, f64)> {
    let min = runs
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .reduce(f64::min)?;
    let max = runs
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .reduce(f64::max)?;
    (min > 0.0 && max > UNSTEADY * min).then_some((min, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("8").unwrap(), 8);
        assert_eq!(parse_size("1K").unwrap(), 1024);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("4G").unwrap(), 4 << 30);
        assert!(parse_size("0").is_err());
        assert!(parse_size("x").is_err());
        assert_eq!(fmt_size(65536), "64K");
        assert_eq!(fmt_size(100), "100");
    }

    /// In groups of `n`, each sample is `n` round trips, their time over
    /// `n`; the count of round trips is kept (rounded up to whole groups).
    #[test]
    fn round_trips_are_timed_in_groups() {
        for (group, samples) in [(1, 100), (4, 25), (7, 15)] {
            let mut calls = 0;
            let s = time_groups(100, group, Duration::from_secs(5), || {
                calls += 1;
                let t = Instant::now();
                while t.elapsed() < Duration::from_micros(50) {
                    std::hint::spin_loop();
                }
                Ok::<(), ()>(())
            })
            .unwrap();
            assert_eq!(s.ns.len(), samples);
            assert_eq!(calls, samples * group);
            // Each sample is one round trip's time (a spin of at least
            // 50 µs), not the group's (at least 200 µs in fours).
            let min = *s.ns.iter().min().unwrap();
            assert!((49_000..150_000).contains(&min), "group {group}: {min}");
        }
    }

    #[test]
    fn percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(median_f64(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median_f64(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn runs_are_paired_with_the_baseline_run_of_the_nearest_host_floor() {
        // Two placements: host floors near 100 ns and near 300 ns; the
        // baseline is twice as fast in the near one.
        let runs = [10.0, 30.0, 12.0];
        let hosts = [Some(300.0), Some(105.0), None];
        let base = [40.0, 20.0];
        let base_hosts = [Some(98.0), Some(290.0)];
        let r = placed_ratio(&runs, &hosts, &base, &base_hosts).unwrap();
        // 10 / 20 and 30 / 40: median 0.625.
        assert!((r - 0.625).abs() < 1e-9, "{r}");
        assert_eq!(placed_ratio(&runs, &[None; 3], &base, &base_hosts), None);
    }

    #[test]
    fn runs_more_than_twice_apart_are_unsteady() {
        assert_eq!(unsteady(&[81.0, 74.7, 14.9, 85.8]), Some((14.9, 85.8)));
        assert_eq!(unsteady(&[40.0, 79.0, 60.0]), None);
        assert_eq!(unsteady(&[5.0]), None);
        assert_eq!(unsteady(&[]), None);
        assert_eq!(unsteady(&[f64::NAN, 1.0, 3.0]), Some((1.0, 3.0)));
    }
}
