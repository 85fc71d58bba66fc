//! The applet runner: one attached applet and the policy around its
//! invocations, the same in every placement (the engine, the client
//! library's inline placement, SPINE's handlers later): the work budget,
//! faults counted and reported, detach after [`MAX_CONSECUTIVE_FAULTS`] in
//! a row, the pause that keeps an applet to a tenth of a shared engine,
//! the applet's timers and clock, and its statistics.
//!
//! A host gives the runner a [`Port`] (the endpoint's buffer area, queues
//! and channels) for each call, and turns each [`Outcome`] into its own
//! way of telling the owner (the engine: counters and an event on the
//! endpoint; the client library: its counters and [`Outcome`] as an
//! event).

use std::time::{Duration, Instant};

use jive::{Fault, Limits};

use unet_abi::FaultKind;

use crate::applet::{fault_kind, Applet, AppletStats, AttachError, Verified};
use crate::clock::MAX_TIMERS;
use crate::port::Port;
use crate::{pause_after, pause_after_load, ENGINE_EXACT_FUEL, MAX_CONSECUTIVE_FAULTS};

/// How a placement runs its applets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunnerConfig {
    /// Hold an applet back after long, busy invocations so that it gets
    /// at most a tenth of the thread that runs it ([`pause_after`]): for
    /// a shared engine. An inline applet runs on its owner's own thread
    /// and is never paused.
    pub pause: bool,
    /// Time one short invocation in this many (see
    /// [`Applet::set_time_sampling`]).
    pub time_sample: u32,
    /// Time every invocation that used more work than this exactly
    /// (`u64::MAX`: none but the sampled ones).
    pub exact_fuel: u64,
    /// Wait for the applet's machine code at attach, so that its first
    /// invocations already run compiled (where a few milliseconds at
    /// attach cost nothing: the caller's own thread).
    pub wait_compiled: bool,
    /// Most timers one applet may have set at once.
    pub max_timers: usize,
}

impl RunnerConfig {
    /// The engine's placement: paused when it takes more than its share,
    /// a sample of the short invocations timed and every long one.
    pub fn engine() -> RunnerConfig {
        RunnerConfig {
            pause: true,
            time_sample: crate::ENGINE_TIME_SAMPLE,
            exact_fuel: crate::ENGINE_EXACT_FUEL,
            wait_compiled: false,
            max_timers: MAX_TIMERS,
        }
    }

    /// The client library's inline placement: never paused, one
    /// invocation in 64 timed (as in the engine,
    /// [`crate::ENGINE_TIME_SAMPLE`]), compiled before the first message.
    pub fn inline() -> RunnerConfig {
        RunnerConfig {
            pause: false,
            time_sample: crate::ENGINE_TIME_SAMPLE,
            exact_fuel: u64::MAX,
            wait_compiled: true,
            max_timers: MAX_TIMERS,
        }
    }
}

/// What an invocation came to, for the host to report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It ran to completion (or there was nothing to run).
    Done,
    /// It faulted and was stopped; the applet stays attached.
    Fault(FaultKind),
    /// It faulted [`MAX_CONSECUTIVE_FAULTS`] times in a row: the runner
    /// holds no applet any more, and the host should drop it (the
    /// endpoint goes on as plain U-Net).
    Detached(FaultKind),
}

impl Outcome {
    /// True if the invocation completed.
    pub fn is_done(self) -> bool {
        self == Outcome::Done
    }
}

/// Why [`Runner::rx_fill`] ran nothing.
#[derive(Debug, PartialEq, Eq)]
pub enum RxFill<E> {
    /// `RxBuf` could not hold the message (the applet's heap is full).
    NoBuffer,
    /// The host's `fill` failed.
    Host(E),
}

/// One attached applet and its policy (see the module documentation).
pub struct Runner {
    /// Held in place, not boxed: every host keeps its runner in a box
    /// already, and a box here would put one more dependent load in front
    /// of each invocation.
    applet: Applet,
    cfg: RunnerConfig,
    /// Not run again before this instant (after a long invocation).
    pause_until: Option<Instant>,
    /// The statistics as last handed out by [`Runner::take_stats`].
    published: AppletStats,
    detached: bool,
}

impl Runner {
    /// Load, verify and initialise an applet for the endpoint behind
    /// `port` (its constructor runs now, with `port` bound). Loading is
    /// applet work too: with [`RunnerConfig::pause`], a long load holds
    /// the applet back as a long invocation would.
    pub fn load<P: Port>(
        bytes: &[u8],
        limits: Limits,
        port: &mut P,
        cfg: RunnerConfig,
    ) -> Result<Runner, AttachError> {
        Runner::instantiate(Applet::verify(bytes)?, limits, port, cfg)
    }

    /// [`Runner::load`] of a class already verified ([`Applet::verify`],
    /// which a host can run on another thread).
    pub fn instantiate<P: Port>(
        v: Verified,
        limits: Limits,
        port: &mut P,
        cfg: RunnerConfig,
    ) -> Result<Runner, AttachError> {
        let t0 = Instant::now();
        let mut applet =
            Applet::instantiate_with(v, limits, port as &mut dyn Port, cfg.max_timers)?;
        if cfg.wait_compiled {
            applet.wait_compiled();
        }
        applet.set_time_sampling(cfg.time_sample, cfg.exact_fuel);
        let pause_until = if cfg.pause {
            pause_after_load(t0.elapsed()).map(|p| Instant::now() + p)
        } else {
            None
        };
        Ok(Runner {
            applet,
            cfg,
            pause_until,
            published: AppletStats::default(),
            detached: false,
        })
    }

    /// The applet's id: unique per attach.
    #[inline]
    pub fn id(&self) -> u64 {
        self.applet.id
    }

    /// The applet itself.
    pub fn applet(&self) -> &Applet {
        &self.applet
    }

    /// The applet itself, mutable (benchmarks choose interpreted or
    /// compiled code with it).
    pub fn applet_mut(&mut self) -> &mut Applet {
        &mut self.applet
    }

    /// Whether `doTx` and `doRx` run as machine code.
    #[inline]
    pub fn is_compiled(&self) -> bool {
        self.applet.is_compiled()
    }

    /// True while the applet waits out a pause; clears the pause once it
    /// is over. Reads the clock only while a pause is set.
    #[inline]
    pub fn paused(&mut self) -> bool {
        match self.pause_until {
            None => false,
            Some(t) if Instant::now() < t => true,
            Some(_) => {
                self.pause_until = None;
                false
            }
        }
    }

    /// The end of the pause, if one is set.
    pub fn pause_until(&self) -> Option<Instant> {
        self.pause_until
    }

    /// When the earliest timer falls due, if one is set.
    #[inline]
    pub fn next_timer(&self) -> Option<Instant> {
        self.applet.next_timer()
    }

    /// The earliest instant this runner has work: a timer due, or the end
    /// of a pause (for a host deciding how long it may sleep).
    pub fn next_deadline(&self) -> Option<Instant> {
        // While paused, nothing runs before the pause ends (and what
        // waits for it, timers or the host's queued work, runs then).
        self.pause_until.or(self.next_timer())
    }

    /// Timers set and not yet run.
    pub fn timers_pending(&self) -> usize {
        self.applet.timers_pending()
    }

    /// Whether arriving messages of [`crate::LEND_MIN`] bytes or more are
    /// lent to the applet's `RxBuf` rather than copied in
    /// ([`crate::Verified::lends_rx`]).
    pub fn lends_rx(&self) -> bool {
        self.applet.lends_rx()
    }

    /// Run `doTx(len, chan, off)` for one send descriptor.
    #[inline]
    pub fn tx<P: Port>(&mut self, port: &mut P, len: u32, chan: u16, off: u32) -> Outcome {
        self.invoke(port, |a, e| a.tx(e, len, chan, off))
    }

    /// Run `doRx(len, chan)` on `data`, in the applet's `RxBuf`: lent to it
    /// where the applet's code allows ([`crate::Verified::lends_rx`],
    /// [`crate::LEND_MIN`]), else copied into it.
    pub fn rx<P: Port>(&mut self, port: &mut P, data: &[u8], chan: u16) -> Outcome {
        self.invoke(port, |a, e| a.rx(e, data, chan))
    }

    /// The applet's `RxBuf`, at least `min` bytes, for the host to copy
    /// an arriving message straight into (then [`Runner::rx_in_place`]).
    #[inline]
    pub fn rx_buffer(&mut self, min: usize) -> Result<&mut [u8], Fault> {
        self.applet.rx_buffer(min)
    }

    /// Run `doRx(len, chan)` on the message the host wrote into
    /// [`Runner::rx_buffer`].
    #[inline]
    pub fn rx_in_place<P: Port>(&mut self, port: &mut P, len: usize, chan: u16) -> Outcome {
        self.invoke(port, |a, e| a.rx_in_place(e, len, chan))
    }

    /// Run `doRx` on the next arriving message, which `fill` copies
    /// straight into the applet's `RxBuf` (at least `min` bytes; the
    /// whole array is handed over): `fill` returns the message's length
    /// and channel, or `None` when nothing arrived. One look at `RxBuf`
    /// for both the copy and the call ([`Runner::rx_buffer`] then
    /// [`Runner::rx_in_place`] look twice). `Ok(None)`: nothing arrived;
    /// [`RxFill::NoBuffer`]: `RxBuf` could not be made `min` bytes long
    /// (the applet's heap is full), and `fill` was not called.
    #[inline]
    pub fn rx_fill<P: Port, E>(
        &mut self,
        port: &mut P,
        min: usize,
        fill: impl FnOnce(&mut P, &mut [u8]) -> Result<Option<(usize, u16)>, E>,
    ) -> Result<Option<Outcome>, RxFill<E>> {
        let Ok(buf) = self.applet.rx_buffer(min) else {
            return Err(RxFill::NoBuffer);
        };
        let room = buf.len();
        match fill(port, buf) {
            Ok(Some((len, chan))) if len <= room => {
                Ok(Some(self.invoke(port, |a, e| a.rx_filled(e, len, chan))))
            }
            // Longer than what it was given: not the host's contract; the
            // checked call faults without running the applet.
            Ok(Some((len, chan))) => Ok(Some(self.rx_in_place(port, len, chan))),
            Ok(None) => Ok(None),
            Err(e) => Err(RxFill::Host(e)),
        }
    }

    /// Run the earliest timer if it is due at `now` (timers run in the
    /// order they fell due, equal times in the order set). `None` when
    /// none is due, or when the applet is paused (its timers then wait, in
    /// order, for the pause to end) or detached.
    pub fn run_next_timer<P: Port>(&mut self, port: &mut P, now: Instant) -> Option<Outcome> {
        if self.detached || self.applet.next_timer().is_none_or(|due| due > now) {
            return None;
        }
        if self.cfg.pause && self.paused() {
            return None;
        }
        let arg = self.applet.timers().take_due(now)?;
        Some(self.invoke(port, |a, e| a.timer(e, arg)))
    }

    /// One invocation under the policy.
    #[inline]
    fn invoke<P: Port>(
        &mut self,
        port: &mut P,
        f: impl FnOnce(&mut Applet, &mut dyn Port) -> Result<(), Fault>,
    ) -> Outcome {
        if self.detached {
            return Outcome::Done;
        }
        let (ns0, fuel0) = (self.applet.stats.total_ns, self.applet.stats.fuel);
        let r = f(&mut self.applet, port as &mut dyn Port);
        if self.cfg.pause {
            // Only a busy invocation can be paused after (`pause_after`):
            // a short one, nearly every one, is let go on its fuel alone,
            // without the time's arithmetic or a call.
            let fuel = self.applet.stats.fuel - fuel0;
            if fuel > ENGINE_EXACT_FUEL {
                let spent = Duration::from_nanos(self.applet.stats.total_ns - ns0);
                if let Some(p) = pause_after(spent, fuel) {
                    self.pause_until = Some(Instant::now() + p);
                }
            }
        }
        match r {
            Ok(()) => Outcome::Done,
            Err(f) => self.faulted(&f),
        }
    }

    #[cold]
    #[inline(never)]
    fn faulted(&mut self, f: &Fault) -> Outcome {
        let kind = fault_kind(f);
        if self.applet.consecutive_faults >= MAX_CONSECUTIVE_FAULTS {
            self.detached = true;
            self.applet.timers().clear();
            Outcome::Detached(kind)
        } else {
            Outcome::Fault(kind)
        }
    }

    /// True once the applet was detached after repeated faults.
    pub fn is_detached(&self) -> bool {
        self.detached
    }

    /// The applet's statistics since it was attached.
    pub fn stats(&self) -> AppletStats {
        self.applet.stats
    }

    /// Fuel the applet used since it was attached (the host bounds an
    /// endpoint's work per turn by it).
    #[inline]
    pub fn fuel(&self) -> u64 {
        self.applet.stats.fuel
    }

    /// What the statistics grew by since the last call (the host adds it
    /// to its counters).
    #[inline]
    pub fn take_stats(&mut self) -> AppletStats {
        let now = self.applet.stats;
        let d = now.since(&self.published);
        self.published = now;
        d
    }
}
