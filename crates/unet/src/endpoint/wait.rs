//! Waiting on an endpoint: whether anything is waiting, spinning and then
//! sleeping on the futex doorbells, and the blocking receive and send.

use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use unet_abi::ClientCounter;
use unet_sys as sys;

use super::{bump, Channel, Endpoint, Recv};
use crate::{RecvError, SendError};

/// How often a spinning wait yields the CPU.
const SPIN_YIELD_EVERY: Duration = Duration::from_micros(5);

impl Endpoint {
    /// True when a message or event is waiting.
    #[inline]
    pub fn ready(&self) -> bool {
        !self.inline.rxq.is_empty()
            || self.inline_timer_at().is_some_and(|t| t <= Instant::now())
            || self.chans.conns.iter().any(|c| !c.broken && c.ready())
            || self.queues.map.recv.head() != self.queues.recv_tail
            || self.queues.map.events.head() != self.queues.event_tail
    }

    /// Wait until a message or an event is waiting, at most `timeout`:
    /// spin for the endpoint's spin time, then sleep on a futex (the engine
    /// or a direct peer wakes us only when we sleep). A signal handler
    /// that interrupts the sleep does not end the wait.
    pub fn wait(&mut self, timeout: Option<Duration>) -> bool {
        // A first short spin reads no clock (a clock read costs about as
        // much as a whole direct-path message).
        for _ in 0..256 {
            if self.ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        self.flush_counters();
        let start = Instant::now();
        // Spin, then sleep. The engine sleeps as soon as it has nothing to
        // do, so a spinning client does not keep it from a CPU; a client
        // that is already awake when its message comes saves a wake-up of
        // several microseconds.
        let spin = self.spin;
        let mut last_yield = start;
        loop {
            for _ in 0..64 {
                if self.ready() {
                    return true;
                }
                std::hint::spin_loop();
            }
            let now = Instant::now();
            if now.duration_since(start) >= spin {
                break;
            }
            // If the peer shares our CPU (the other one is busy), spinning
            // only delays it: give it the CPU now and then. When the CPU is
            // ours alone, sched_yield returns at once.
            if now.duration_since(last_yield) >= SPIN_YIELD_EVERY {
                std::thread::yield_now();
                last_yield = now;
            }
        }
        sleep_on(&mut [self], start, timeout, false).is_some()
    }

    /// Wait until a message or an event is waiting on any of `eps`, at
    /// most `timeout` (None: forever), sleeping at once on all their
    /// doorbells together (one `futex_waitv`), with no spin: for a thread
    /// that serves several endpoints and should use no CPU while they are
    /// idle (`unet router run` on several adapters). The index of one
    /// that is ready, or None when the time ran out first or a signal
    /// handler interrupted the sleep (one installed without
    /// `SA_RESTART`: the caller looks at what it recorded). The kernel
    /// takes at most 128 words a wait: endpoints and direct connections
    /// past those are looked at each time the sleep ends (at most a
    /// second apart).
    pub fn wait_any(eps: &mut [&mut Endpoint], timeout: Option<Duration>) -> Option<usize> {
        if let Some(i) = eps.iter().position(|e| e.ready()) {
            return Some(i);
        }
        for e in eps.iter_mut() {
            e.flush_counters();
        }
        sleep_on(eps, Instant::now(), timeout, true)
    }

    /// Receive the next message into `buf`, waiting at most `timeout`
    /// (None: forever). `Err(RecvError::Timeout)` when nothing came.
    /// Always inlined, as `send_blocking` is: the common case is a few
    /// loads and a copy, and the calls around the two showed in streams
    /// of one message a call (see `send_blocking`).
    #[inline(always)]
    pub fn recv(&mut self, buf: &mut [u8], timeout: Option<Duration>) -> Result<Recv, RecvError> {
        // The common case, a message already waiting, reads no clock (and
        // is inlined into the caller; the waiting is not).
        if let Some(r) = self.try_recv(buf)? {
            return Ok(r);
        }
        self.recv_waiting(buf, timeout)
    }

    #[inline(never)]
    fn recv_waiting(
        &mut self,
        buf: &mut [u8],
        timeout: Option<Duration>,
    ) -> Result<Recv, RecvError> {
        // First a short spin that reads no clock: when the two cores share
        // a cache, a ping-pong's answer comes within a few tens of
        // nanoseconds, about what a clock read costs.
        // Between full looks (every eighth turn), only the direct
        // connection whose turn it is is looked at: a load of its next
        // record's header.
        if timeout != Some(Duration::ZERO) {
            for k in 0..64 {
                std::hint::spin_loop();
                let cheap = self
                    .chans
                    .conns
                    .get(self.chans.rr)
                    .is_some_and(|c| c.ready());
                if cheap || k % 8 == 7 {
                    if let Some(r) = self.try_recv(buf)? {
                        return Ok(r);
                    }
                }
            }
        }
        let start = Instant::now();
        loop {
            if let Some(r) = self.try_recv(buf)? {
                return Ok(r);
            }
            let left = timeout.map(|t| t.saturating_sub(start.elapsed()));
            if left == Some(Duration::ZERO) || !self.wait(left) {
                if let Some(r) = self.try_recv(buf)? {
                    return Ok(r);
                }
                if timeout.is_some_and(|t| start.elapsed() >= t) {
                    return Err(RecvError::Timeout);
                }
            }
        }
    }

    /// Send, retrying while the queue is full (waiting up to `timeout`;
    /// still `Err(SendError::Full)` after it). The retries spin and give
    /// the CPU up every few microseconds: the engine or the peer that makes
    /// room may share it.
    ///
    /// Always inlined, as `recv` is (`unet bench stream --path direct
    /// --sizes 64 --batch 1`, each run against the floor ring beside it,
    /// medians of runs: where the two cores share a cache, 0.95 of the
    /// floor ring against 0.89 with neither inlined; where they are far
    /// apart, 1.70 against 1.39; `recv` inlined alone lost a fifth where
    /// they are far apart).
    #[inline(always)]
    pub fn send_blocking(
        &mut self,
        ch: Channel,
        data: &[u8],
        timeout: Duration,
    ) -> Result<(), SendError> {
        match self.send(ch, data) {
            Err(SendError::Full) => self.send_when_room(ch, data, timeout),
            r => r,
        }
    }

    #[cold]
    #[inline(never)]
    fn send_when_room(
        &mut self,
        ch: Channel,
        data: &[u8],
        timeout: Duration,
    ) -> Result<(), SendError> {
        let start = Instant::now();
        let mut last_yield = start;
        loop {
            for _ in 0..64 {
                match self.send(ch, data) {
                    Err(SendError::Full) => std::hint::spin_loop(),
                    r => return r,
                }
            }
            let now = Instant::now();
            if now.duration_since(start) >= timeout {
                return Err(SendError::Full);
            }
            if now.duration_since(last_yield) >= SPIN_YIELD_EVERY {
                std::thread::yield_now();
                last_yield = now;
            }
        }
    }
}

/// Sleep on the doorbells of all of `eps` (their engine futex words and
/// their direct connections') until one is ready, at most `timeout` after
/// `start`: the index of a ready one, or None when the time ran out (or,
/// with `signals`, a signal handler interrupted the sleep).
fn sleep_on(
    eps: &mut [&mut Endpoint],
    start: Instant,
    timeout: Option<Duration>,
    signals: bool,
) -> Option<usize> {
    loop {
        let mut left = timeout.map(|t| t.saturating_sub(start.elapsed()));
        for e in eps.iter() {
            if let Some(t) = e.inline_timer_at() {
                let t = t.saturating_duration_since(Instant::now());
                left = Some(left.map_or(t, |l| l.min(t)));
            }
        }
        for e in eps.iter_mut() {
            for c in e.chans.conns.iter_mut() {
                c.set_sleeping(true);
            }
        }
        let mut words = Vec::with_capacity(eps.len());
        let mut direct = false;
        for e in eps.iter() {
            let h = e.header();
            words.push((&h.rx_futex, h.rx_futex.load(Ordering::Acquire)));
            h.client_sleeping.store(1, Ordering::Relaxed);
            for c in e.chans.conns.iter() {
                if !c.broken {
                    words.push(c.wait_word());
                    direct = true;
                }
            }
        }
        // Pairs with the fences of the engine and of direct peers after
        // they publish: either we see their message now, or they see our
        // sleeping flags and wake us. Direct peers publish with a light
        // fence; the heavy one here (membarrier) completes it.
        if direct {
            sys::heavy_fence();
        } else {
            fence(Ordering::SeqCst);
        }
        let mut interrupted = false;
        if !eps.iter().any(|e| e.ready()) && left != Some(Duration::ZERO) {
            for e in eps.iter() {
                bump(
                    &e.header().client_counters[ClientCounter::Sleeps as usize],
                    1,
                );
            }
            interrupted = !sys::futex_wait_any(&words, left.map(|l| l.min(Duration::from_secs(1))));
        }
        drop(words);
        for e in eps.iter_mut() {
            e.header().client_sleeping.store(0, Ordering::Relaxed);
            for c in e.chans.conns.iter_mut() {
                c.set_sleeping(false);
            }
        }
        if let Some(i) = eps.iter().position(|e| e.ready()) {
            return Some(i);
        }
        if (signals && interrupted) || timeout.is_some_and(|t| start.elapsed() >= t) {
            return None;
        }
    }
}
