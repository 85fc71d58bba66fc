//! The forwarder floor: the engine path's fair baseline. The engine path
//! is a relay (the sender's queue, the engine, the receiver's queue), so
//! its floor is the same exchange relayed by a third party: two floor
//! rings each way ([`super::floor`]), and a thread of this process (where
//! the embedded engine's thread runs too, with the same placement) that
//! moves each record from the ring it arrives on to the other side's ring,
//! one copy, as the engine copies a message into the receiver's queue.
//!
//! It waits as the engine did before its look window: a turn that moved
//! something is followed at once by another; the first turn that finds
//! nothing is followed by one more look, then it sleeps (the engine's
//! `idle_spin` is zero). The engine now looks for 4 µs, yielding its CPU
//! between looks (`LOOK_AFTER_WORK`); relaying so, this forwarder took
//! about three times as long a round trip on a quiet machine (14.8-14.9 µs
//! against 5.2-5.4 µs for 64 B), so the single look, the faster relay,
//! stays the floor. After
//! a turn that delivered to a process last seen on the forwarder's own
//! core, an empty turn sleeps at once (the engine's handoff: that process
//! cannot answer until the core is free). To sleep it arms a doorbell,
//! fences, looks once more, and waits on a futex; a sender publishes its
//! record, notes its core, fences, and wakes the forwarder if the doorbell
//! was armed, as unet's clients ring the engine's. (The engine sleeps in
//! `epoll_wait` and is rung through an eventfd, which costs a little more
//! than a futex: part of the engine path's distance to this floor.)
//!
//! The two processes' ends are floor rings as the floor's ping-pong uses
//! them: they spin on their receive ring and give the core up every 5 µs.
//! The second ring pair (forwarder to child and back) and the doorbell are
//! in a mapping the child inherits; the first pair in one of its own.

use std::sync::atomic::{fence, AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use unet_sys as sys;

use super::floor::{self, control_words, Consumer, Geometry, Producer, Shm, Stalled, STOP};
use super::stats::Samples;

/// The doorbell's line in the child's mapping: armed flag, futex word.
const BELL: usize = 512;
/// Where each side notes its core (plus one): the parent's, the child's.
const CPU_LINES: [usize; 2] = [768, 1024];

/// The doorbell and the cores the two sides last ran on.
#[derive(Clone, Copy)]
struct Bell<'a> {
    armed: &'a AtomicU32,
    futex: &'a AtomicU32,
    cpu: [&'a AtomicU32; 2],
}

impl<'a> Bell<'a> {
    fn of(shm: &'a Shm) -> Bell<'a> {
        let bell = control_words(shm, BELL);
        Bell {
            armed: &bell[0],
            futex: &bell[1],
            cpu: CPU_LINES.map(|off| &control_words(shm, off)[0]),
        }
    }

    /// After side `who` published a record for the forwarder.
    #[inline]
    fn ring(&self, who: usize) {
        self.cpu[who].store(sys::current_cpu().wrapping_add(1), Ordering::Relaxed);
        // Pairs with the forwarder's fence between arming and its last look.
        fence(Ordering::SeqCst);
        if self.armed.load(Ordering::Relaxed) != 0 && self.armed.swap(0, Ordering::AcqRel) != 0 {
            self.futex.fetch_add(1, Ordering::Release);
            sys::futex_wake(self.futex, 1);
        }
    }

    /// Whether side `who` last ran on the caller's core.
    fn on_my_core(&self, who: usize) -> bool {
        let c = self.cpu[who].load(Ordering::Relaxed);
        c != 0 && c == sys::current_cpu().wrapping_add(1)
    }
}

/// Move one record from `inp` to `out`, if one waits: Some(its flags).
#[inline]
fn forward(inp: &mut Consumer<'_>, out: &mut Producer<'_>) -> Result<Option<u32>, Stalled> {
    let Some((data, flags)) = inp.peek() else {
        return Ok(None);
    };
    out.send(data, flags)?;
    inp.consume();
    Ok(Some(flags))
}

/// The forwarder's loop: until it has passed a STOP on to the child, or
/// `quit` is set.
fn relay(a: &Shm, b: &Shm, g: Geometry, quit: &AtomicBool) -> Result<(), Stalled> {
    let bell = Bell::of(b);
    let (mut from_parent, mut to_parent) = (floor::consumer(a, g, 0), floor::producer(a, g, 1));
    let (mut to_child, mut from_child) = (floor::producer(b, g, 0), floor::consumer(b, g, 1));
    let (mut looked_again, mut handoff) = (false, false);
    while !quit.load(Ordering::Relaxed) {
        let mut work = false;
        let mut delivered_here = false;
        if let Some(flags) = forward(&mut from_parent, &mut to_child)? {
            if flags & STOP != 0 {
                return Ok(());
            }
            work = true;
            delivered_here |= bell.on_my_core(1);
        }
        if forward(&mut from_child, &mut to_parent)?.is_some() {
            work = true;
            delivered_here |= bell.on_my_core(0);
        }
        if work {
            looked_again = false;
            handoff = delivered_here;
            continue;
        }
        if !handoff && !looked_again {
            looked_again = true;
            std::hint::spin_loop();
            continue;
        }
        // Sleep: arm, fence, look once more, wait.
        let seen = bell.futex.load(Ordering::Acquire);
        bell.armed.store(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if from_parent.peek().is_none() && from_child.peek().is_none() {
            from_parent.publish();
            from_child.publish();
            sys::futex_wait(bell.futex, seen, Some(Duration::from_millis(10)));
        }
        bell.armed.store(0, Ordering::Relaxed);
        looked_again = false;
        handoff = false;
    }
    Ok(())
}

/// Parent side of a forwarder ping-pong over `a` (this process and the
/// forwarder) and `b` (the forwarder and the child, with the doorbell):
/// `warmup` untimed round trips, then up to `iters` timed ones or until
/// `limit` elapses.
pub fn pingpong(
    (a, b): (&Shm, &Shm),
    g: Geometry,
    (size, warmup, iters): (usize, usize, usize),
    limit: Duration,
) -> Result<Samples, Stalled> {
    let quit = AtomicBool::new(false);
    std::thread::scope(|s| {
        let fwd = s.spawn(|| relay(a, b, g, &quit));
        let bell = Bell::of(b);
        let r = floor::pingpong(a, g, (size, warmup, iters), limit, || bell.ring(0));
        if r.is_err() {
            quit.store(true, Ordering::Relaxed);
        }
        let f = fwd.join().unwrap_or(Err(Stalled));
        let samples = r?;
        f.map(|()| samples)
    })
}

/// Child side of a forwarder ping-pong: echo until STOP, ringing the
/// forwarder's doorbell after each answer.
pub fn pingpong_child(b: &Shm, g: Geometry, size: usize) -> Result<(), Stalled> {
    let bell = Bell::of(b);
    floor::echo_until_stop(b, g, size, || bell.ring(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The relay carries round trips between two threads standing for the
    /// two processes, with the same mappings, and stops at STOP.
    #[test]
    fn the_forwarder_relays_round_trips_and_stops() {
        let g = Geometry::new(64, 64, 64 * 1024, 64);
        let a = Shm::create(g.total_len()).unwrap();
        let b = Shm::create(g.total_len()).unwrap();
        std::thread::scope(|s| {
            let child = s.spawn(|| pingpong_child(&b, g, 64));
            let samples = pingpong((&a, &b), g, (64, 10, 500), Duration::from_secs(5)).unwrap();
            assert_eq!(samples.ns.len(), 500);
            child.join().unwrap().unwrap();
        });
    }
}
