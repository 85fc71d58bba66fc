//! The host's own floor (`--host-floor`): a ping-pong of two cache lines
//! between two threads of this process, one on core 0 and one on core 1,
//! each writing its own line and spinning on the other's. Its round trip
//! is the least any exchange between the two cores can cost at that
//! moment; on a virtual machine it changes with where the host places
//! the two virtual cores (the same physical core's two threads, two cores
//! sharing a cache, or farther apart), which the guest cannot see. Taken
//! just before each run, it lets runs be compared with runs of the same
//! placement, not only with the run beside them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::child::set_affinity;
use super::stats::median_f64;

/// Round trips per batch, and batches per probe (the probe's figure is
/// the median of the batches' means).
const ROUND_TRIPS: u64 = 200;
const BATCHES: usize = 9;
/// A side that waits this long for the other gives up (the other thread
/// did not get a core): the probe has no figure.
const PATIENCE: Duration = Duration::from_millis(200);

/// A cache line of its own.
#[repr(C, align(128))]
struct Line(AtomicU64);

/// Spin until `line` holds `v`; false after [`PATIENCE`].
fn wait_for(line: &Line, v: u64) -> bool {
    let mut spins = 0u32;
    let mut start: Option<Instant> = None;
    while line.0.load(Ordering::Acquire) != v {
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins & 1023 == 0 && start.get_or_insert_with(Instant::now).elapsed() > PATIENCE {
            return false;
        }
    }
    true
}

/// Probes a stalled probe is tried again (a core busy with other work for
/// longer than [`PATIENCE`] once is common on a loaded machine).
const TRIES: usize = 3;

/// The host floor now: the median over batches of the mean round trip of
/// two lines between cores 0 and 1, in nanoseconds. None when a thread
/// cannot be placed on its core or the other side stalls (a core busy
/// with other work for longer than the probe's patience) in each of
/// [`TRIES`] probes.
pub fn probe() -> Option<f64> {
    (0..TRIES).find_map(|_| probe_once())
}

fn probe_once() -> Option<f64> {
    let (ping, pong) = (Line(AtomicU64::new(0)), Line(AtomicU64::new(0)));
    let (ping, pong) = (&ping, &pong);
    // Both sides on threads of their own: the caller's placement (pinned
    // or not) stays as it was.
    std::thread::scope(|s| {
        s.spawn(move || {
            if set_affinity(1).is_err() {
                // Tell the other side to stop waiting.
                pong.0.store(u64::MAX, Ordering::Release);
                return;
            }
            for i in 1..=ROUND_TRIPS * BATCHES as u64 {
                if !wait_for(ping, i) {
                    return;
                }
                pong.0.store(i, Ordering::Release);
            }
        });
        s.spawn(move || {
            if set_affinity(0).is_err() {
                ping.0.store(u64::MAX, Ordering::Release);
                return None;
            }
            let mut batches = Vec::with_capacity(BATCHES);
            let mut i = 0u64;
            for _ in 0..BATCHES {
                let t = Instant::now();
                for _ in 0..ROUND_TRIPS {
                    i += 1;
                    ping.0.store(i, Ordering::Release);
                    if !wait_for(pong, i) {
                        // The echo thread waits for a value that never
                        // comes, then gives up.
                        ping.0.store(u64::MAX, Ordering::Release);
                        return None;
                    }
                }
                batches.push(t.elapsed().as_nanos() as f64 / ROUND_TRIPS as f64);
            }
            Some(median_f64(&batches))
        })
        .join()
        .ok()
        .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_gives_a_round_trip_between_two_cores() {
        let two_cores = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
        match probe() {
            Some(ns) => {
                assert!(ns > 1.0 && ns < 1e6, "round trip of {ns} ns");
            }
            None => assert!(
                !two_cores || set_affinity(1).is_err(),
                "no figure on two cores"
            ),
        }
    }
}
