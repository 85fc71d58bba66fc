//! The atomicity timeout (the UDM paper's sections 4.1 and 4.3): the
//! watched nodes judged within a budget per turn, switched to buffered
//! mode when they had messages waiting and took none past the job's
//! timeout (atomic, stopped, blocked in their own inject or simply not
//! extracting); what one turn shares between the jobs ([`Turn`]: the
//! budgets, the counts, the processes read from `/proc`).

use super::*;

impl Job {
    /// Judge the watched nodes whose look is due, as many as the turn's
    /// budget allows (the rest on the next turn): switch to buffered mode
    /// those that had messages waiting and took none past the timeout. A
    /// node is watched only while its state may call for a switch: one
    /// with nothing waiting and not atomic needs nothing, one that was
    /// switched is in buffered mode; it is watched again when it rings
    /// (see [`UdmJobHeader::rang`]: a sender that finds its fast ring to
    /// it full rings for it).
    pub(super) fn check_timeouts(&mut self, now: Instant, t: &mut Turn) {
        let mut due: Option<Instant> = None;
        let later = |d: &mut Option<Instant>, at: Instant| {
            *d = Some(d.map_or(at, |x| x.min(at)));
        };
        for r in bits(self.watch) {
            let look_at = self.nodes[r as usize].look_at;
            if look_at > now {
                later(&mut due, look_at);
                continue;
            }
            if t.budget == 0 {
                later(&mut due, now);
                continue;
            }
            t.visits += 1;
            match self.judge(r, now, t) {
                Some(at) => {
                    self.nodes[r as usize].look_at = at;
                    later(&mut due, at);
                }
                None => self.watch &= !(1 << r),
            }
        }
        self.due = due;
    }

    /// Look at node `r` for the atomicity timeout: when to look again
    /// (None: not until it rings).
    fn judge(&mut self, r: u32, now: Instant, t: &mut Turn) -> Option<Instant> {
        if self.nodes[r as usize].state != UDM_NODE_JOINED {
            return None;
        }
        let line = self.line(r);
        let mode = line.mode.load(Ordering::Acquire);
        let uac = line.uac.load(Ordering::Relaxed);
        let taken = line
            .fast_msgs
            .load(Ordering::Relaxed)
            .wrapping_add(line.buffered_taken.load(Ordering::Relaxed));
        // A running handler is an atomic section too (the upcall's).
        let atomic = uac & (UDM_ATOM_DISABLE | UDM_ATOM_HANDLER) != 0;
        let forced = uac & UDM_ATOM_TIMER_FORCE != 0 && atomic;
        let waiting = if mode & (UDM_MODE_DIVERT | UDM_MODE_GONE) != 0 {
            false
        } else if forced {
            true
        } else {
            let (w, read) = self.fast_waiting(r);
            t.budget = t.budget.saturating_sub(read);
            w
        };
        let every = (self.timeout / 2).max(CHECK_MIN);
        let timeout = self.timeout;
        let pid = self.nodes[r as usize].pid;
        let node = &mut self.nodes[r as usize];
        if !waiting {
            node.stuck_since = None;
            if !atomic {
                // Nothing for it, or it will take it: nothing to watch.
                node.idle_every = every;
                return None;
            }
            // Atomic with nothing waiting: a message may come by a fast
            // ring unannounced. Less often while nothing changes.
            if node.idle_seen == (mode, uac) {
                node.idle_every = (node.idle_every * 2).clamp(every, ATOMIC_IDLE_MAX.max(every));
            } else {
                node.idle_seen = (mode, uac);
                node.idle_every = every;
            }
            return Some(t.align(now + node.idle_every, node.idle_every));
        }
        node.idle_seen = (mode, uac);
        node.idle_every = every;
        if taken != node.last_taken || node.stuck_since.is_none() {
            node.last_taken = taken;
            node.stuck_since = Some(now);
            return Some(now + timeout.max(CHECK_MIN));
        }
        let since = node.stuck_since.unwrap_or(now);
        if now.duration_since(since) < timeout {
            return Some(since + timeout.max(CHECK_MIN));
        }
        // Messages waiting and none taken past the timeout, whatever the
        // reason (atomic, blocked in its own inject, stopped, or simply
        // not extracting): the paper's atomicity timer, enabled while the
        // network is blocked. `/proc` only says which cause to count.
        let cause = if atomic {
            UdmCounter::SwitchTimeout
        } else if self.sched.is_some() {
            // Its scheduler says whether it runs: no `/proc`.
            if self.descheduled & (1 << r) != 0 {
                UdmCounter::SwitchDescheduled
            } else {
                UdmCounter::SwitchTimeout
            }
        } else if t.stopped(pid) {
            UdmCounter::SwitchDescheduled
        } else {
            UdmCounter::SwitchTimeout
        };
        node.stuck_since = None;
        let line = self.line(r);
        let before = line.mode.fetch_or(UDM_MODE_DIVERT, Ordering::AcqRel);
        if before & (UDM_MODE_DIVERT | UDM_MODE_GONE) == 0 {
            self.nodes[r as usize].count(cause, 1);
        }
        // Switched: in buffered mode it needs no looking at, unless it
        // stays atomic (it may go back to the fast case meanwhile).
        atomic.then_some(now + every)
    }
}

/// The set bits of `m`, lowest first.
pub(super) fn bits(mut m: u64) -> impl Iterator<Item = u32> {
    std::iter::from_fn(move || {
        (m != 0).then(|| {
            let b = m.trailing_zeros();
            m &= m - 1;
            b
        })
    })
}

/// What one turn of [`Jobs::poll`] shares between the jobs: the budget of
/// the atomicity-timeout check, what it counted, and the processes found
/// stopped or running (read at most once per [`PROC_MIN`]).
#[derive(Default)]
pub(crate) struct Turn {
    pub(super) now: Option<Instant>,
    pub(super) budget: usize,
    pub(super) sweep_budget: usize,
    pub(super) visits: u64,
    pub(super) proc_reads: u64,
    pub(super) seen: Vec<(u32, bool)>,
    pub(super) seen_at: Option<Instant>,
    /// The origin of the grid of [`Turn::align`].
    pub(super) epoch: Option<Instant>,
}

/// Looks at atomic idle nodes this far apart or more fall on a grid of
/// this step, so that many such nodes wake the engine together.
const IDLE_GRID: Duration = Duration::from_millis(100);

impl Turn {
    /// `at`, moved up to the next step of [`IDLE_GRID`] when `every` is
    /// at least that long.
    fn align(&mut self, at: Instant, every: Duration) -> Instant {
        if every < IDLE_GRID {
            return at;
        }
        let epoch = *self.epoch.get_or_insert(at);
        let step = IDLE_GRID.as_nanos();
        let off = at.saturating_duration_since(epoch).as_nanos();
        let up = (step - off % step) % step;
        at + Duration::from_nanos(up as u64)
    }

    /// Whether process `pid` is stopped, read from `/proc` at most once
    /// per [`PROC_MIN`] (the nodes of one process are judged together).
    fn stopped(&mut self, pid: u32) -> bool {
        let now = self.now.unwrap_or_else(Instant::now);
        if self
            .seen_at
            .is_none_or(|at| now.duration_since(at) >= PROC_MIN)
        {
            self.seen.clear();
            self.seen_at = Some(now);
        }
        if let Some(&(_, s)) = self.seen.iter().find(|(p, _)| *p == pid) {
            return s;
        }
        self.proc_reads += 1;
        let s = sys::process_stopped(pid);
        if self.seen.len() < 64 {
            self.seen.push((pid, s));
        }
        s
    }
}
