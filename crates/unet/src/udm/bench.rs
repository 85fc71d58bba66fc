//! Measurements of UDM's receive paths, for `unet bench udm` (Table 4 of
//! the UDM paper: the cost of a null message received by polling and by
//! an upcall).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{JobConfig, Node, UpcallConfig, MAX_WORDS};
use crate::{Error, Session};

/// Null-message latencies, medians in nanoseconds ([`upcall_latency`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UpcallLatency {
    /// Round trips measured for each column.
    pub rounds: usize,
    /// Round trip, both nodes polling.
    pub poll_round_trip_ns: f64,
    /// Round trip, the responder's handler run as an upcall by a handler
    /// thread that is still spinning (back-to-back messages).
    pub upcall_round_trip_ns: f64,
    /// Round trip, the responder's handler thread asleep on its futex
    /// when the message comes (spin 0: every upcall is a wake-up).
    pub upcall_wake_round_trip_ns: f64,
    /// One way, polling: half the polling round trip.
    pub poll_ns: f64,
    /// One way through a spinning upcall: the upcall round trip less the
    /// polling way back.
    pub upcall_ns: f64,
    /// One way through an upcall that wakes the handler thread.
    pub upcall_wake_ns: f64,
}

/// Measure a null message (no words) one way: received by polling, and
/// received by an upcall (`Node::into_upcalls`), with the handler thread
/// spinning and asleep. A node pings another, which answers from its
/// main loop (polling) or its handler (upcall); the pinger polls for the
/// answer. `rounds` round trips per column, in interleaved batches (the
/// columns take turns, so drift hits all alike); medians.
pub fn upcall_latency(session: &Session, rounds: usize) -> Result<UpcallLatency, Error> {
    let rounds = rounds.max(10);
    let batches = 10;
    let per = rounds.div_ceil(batches);
    let t = session.udm_create_job(&JobConfig {
        nodes: 2,
        ..JobConfig::default()
    })?;
    let mut ping = session.udm_join(t, 0)?;
    let mut pong = session.udm_join(t, 1)?;
    let (mut poll, mut spin, mut wake) = (Vec::new(), Vec::new(), Vec::new());
    let sleep = UpcallConfig {
        spin: Duration::ZERO,
    };
    for _ in 0..batches {
        pong = batch(&mut ping, pong, per, None, &mut poll)?;
        pong = batch(
            &mut ping,
            pong,
            per,
            Some(UpcallConfig::default()),
            &mut spin,
        )?;
        pong = batch(&mut ping, pong, per.div_ceil(4), Some(sleep), &mut wake)?;
    }
    let (p, s, w) = (median(&mut poll), median(&mut spin), median(&mut wake));
    Ok(UpcallLatency {
        rounds: per * batches,
        poll_round_trip_ns: p,
        upcall_round_trip_ns: s,
        upcall_wake_round_trip_ns: w,
        poll_ns: p / 2.0,
        upcall_ns: s - p / 2.0,
        upcall_wake_ns: w - p / 2.0,
    })
}

fn median(v: &mut [u64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    v[v.len() / 2] as f64
}

/// `n` round trips from `ping` to `pong` and back, appended to `times`
/// (ns; the first few, warming up, left out); `upcall`: `pong` answers
/// from a handler with that configuration, else from a polling thread.
/// Gives `pong` back.
fn batch(
    ping: &mut Node,
    pong: Node,
    n: usize,
    upcall: Option<UpcallConfig>,
    times: &mut Vec<u64>,
) -> Result<Node, Error> {
    let warm = 16;
    let total = n + warm;
    let mut run = |ping: &mut Node| -> Result<(), Error> {
        let mut w = [0u64; MAX_WORDS];
        for i in 0..total {
            let t0 = Instant::now();
            ping.inject(1, 0, &[])
                .map_err(|e| Error::Protocol(e.to_string()))?;
            let deadline = t0 + Duration::from_secs(5);
            while ping.extract(&mut w).is_err() {
                if Instant::now() > deadline {
                    return Err(Error::Protocol("no answer within 5 s".into()));
                }
                std::hint::spin_loop();
            }
            if i >= warm {
                times.push(t0.elapsed().as_nanos() as u64);
            }
        }
        Ok(())
    };
    match upcall {
        Some(cfg) => {
            let mut pong = pong.into_upcalls_with(cfg)?;
            pong.set_handler(0, |u| {
                let mut w = [0u64; MAX_WORDS];
                if u.extract(&mut w).is_ok() {
                    let _ = u.inject(0, 0, &[]);
                }
            });
            run(ping)?;
            Ok(pong.into_node())
        }
        None => {
            let stop = Arc::new(AtomicBool::new(false));
            let st = stop.clone();
            let mut pong = pong;
            let th = std::thread::spawn(move || {
                let mut w = [0u64; MAX_WORDS];
                while !st.load(Ordering::Relaxed) {
                    if pong.extract(&mut w).is_ok() {
                        let _ = pong.inject(0, 0, &[]);
                    } else {
                        std::hint::spin_loop();
                    }
                }
                pong
            });
            let r = run(ping);
            stop.store(true, Ordering::Relaxed);
            let pong = th
                .join()
                .map_err(|_| Error::Protocol("the polling node panicked".into()))?;
            r.map(|()| pong)
        }
    }
}
