//! The sending half of one direction of a VI ([`RelSender`]): the window,
//! the retransmission timer, fast retransmission, probes and breaking.

use super::*;

/// The sending half of one direction of a VI.
#[derive(Debug, Clone)]
pub struct RelSender {
    cfg: RelConfig,
    level: Reliability,
    /// Next sequence number to assign.
    next: u32,
    /// The peer's `cum_ack`.
    acked: u32,
    /// The peer's `cum_placed`.
    placed: u32,
    /// Completed up to here (`acked`, or `placed` for ReliableReception).
    done: u32,
    /// The peer's `window_end` (the largest heard).
    window_end: u32,
    /// Send time of each in-flight message, at `seq & mask`.
    sent_ns: Box<[u64]>,
    mask: u32,
    /// Messages before this one may have been sent twice: no RTT sample.
    /// It is also `next` as of the last go-back-N retransmission: until
    /// `cum_ack` reaches it, duplicate acks are echoes of that
    /// retransmission, not news of a loss (NewReno's "recover").
    rexmit_hi: u32,
    srtt_ns: u64,
    rttvar_ns: u64,
    have_rtt: bool,
    /// RTO without backoff.
    rto_ns: u64,
    backoff: u32,
    deadline: Option<u64>,
    /// Timer expiries since progress (or since a probe was answered).
    expiries: u32,
    /// Where the last fast retransmit started (at or after `acked`): the
    /// next one must start further on, so NACKs cannot make the same
    /// messages go again and again.
    fast_from: Option<u32>,
    dupacks: u32,
    /// The timer allowed one message past a closed window.
    probe_ready: bool,
    /// The oldest in-flight message went out past a closed window.
    probe_out: bool,
    broken: Option<BreakReason>,
    /// When the peer was last heard (a valid ack), or when the sender
    /// began waiting for it after a time with nothing to wait for.
    heard_ns: u64,
    /// The last selective acknowledgement, of `sack_at` (= `acked` when
    /// it applies).
    sack: Sack,
    sack_at: u32,
    /// Counters.
    pub stats: RelStats,
}

impl RelSender {
    /// A sender whose first message is `first_seq`. Assumes the peer
    /// starts with `cfg.hold_max` of credit.
    pub fn new(cfg: RelConfig, level: Reliability, first_seq: u32) -> RelSender {
        let cfg = cfg.normalized();
        let slots = if level.is_reliable() {
            cfg.window.next_power_of_two()
        } else {
            1
        };
        RelSender {
            cfg,
            level,
            next: first_seq,
            acked: first_seq,
            placed: first_seq,
            done: first_seq,
            window_end: first_seq.wrapping_add(cfg.hold_max),
            sent_ns: vec![0; slots as usize].into_boxed_slice(),
            mask: slots - 1,
            rexmit_hi: first_seq,
            srtt_ns: 0,
            rttvar_ns: 0,
            have_rtt: false,
            rto_ns: cfg.rto_initial_ns,
            backoff: 0,
            deadline: None,
            expiries: 0,
            fast_from: None,
            dupacks: 0,
            probe_ready: false,
            probe_out: false,
            broken: None,
            heard_ns: 0,
            sack: Sack::default(),
            sack_at: first_seq,
            stats: RelStats::default(),
        }
    }

    /// Takes the selective acknowledgement that came with an ack (call
    /// after [`RelSender::on_ack`] of that ack): what the receiver holds
    /// past `cum_ack`. Ignored unless `cum_ack` is the sender's.
    pub fn on_sack(&mut self, cum_ack: u32, sack: Sack, now_ns: u64) {
        if cum_ack != self.acked || self.broken.is_some() || !self.level.is_reliable() {
            return;
        }
        if sack.closed && self.window_end != self.acked {
            // The receiver has no room (its memory for the VI is used
            // up): nothing more goes until an ack opens the window again;
            // the timer probes meanwhile.
            self.window_end = self.acked;
            self.probe_ready = false;
            // What is out was refused: it goes again as soon as the
            // window reopens.
            self.probe_out = self.acked != self.next;
            self.update_timer(now_ns, false);
        }
        if self.acked != self.next {
            self.sack = sack;
            self.sack_at = cum_ack;
        }
    }

    /// True when the peer said it holds message `seq` whole: a
    /// retransmission leaves it out.
    pub fn sacked(&self, seq: u32) -> bool {
        if self.sack_at != self.acked {
            return false;
        }
        let i = seq.wrapping_sub(self.acked).wrapping_sub(1);
        i < 64 && self.sack.ahead & (1 << i) != 0
    }

    /// The fragments of message `seq` the peer said it holds, if `seq`
    /// is the one it expects and it said so.
    pub fn frags_held(&self, seq: u32) -> Option<Sack> {
        (seq == self.acked && self.sack_at == self.acked && !self.sack.no_frags())
            .then_some(self.sack)
    }

    /// The level.
    pub fn level(&self) -> Reliability {
        self.level
    }

    /// The settings in use (normalized).
    pub fn config(&self) -> &RelConfig {
        &self.cfg
    }

    /// The sequence number the next [`RelSender::on_send`] assigns.
    pub fn next_seq(&self) -> u32 {
        self.next
    }

    /// The peer's `cum_ack`: nothing before it is ever resent.
    pub fn cum_ack(&self) -> u32 {
        self.acked
    }

    /// Sends not completed yet.
    pub fn in_flight(&self) -> u32 {
        self.next.wrapping_sub(self.done)
    }

    /// The current RTO without backoff.
    pub fn rto_ns(&self) -> u64 {
        self.rto_ns
    }

    /// Why the VI broke, once it did.
    pub fn broken(&self) -> Option<BreakReason> {
        self.broken
    }

    /// True when a message may be sent now: the VI is not broken, and for
    /// the reliable levels fewer than `window` sends are outstanding and
    /// the peer's window has room (or a probe is allowed).
    pub fn can_send(&self) -> bool {
        if self.broken.is_some() {
            return false;
        }
        if !self.level.is_reliable() {
            return true;
        }
        self.in_flight() < self.cfg.window && (self.window_open_at(self.next) || self.probe_ready)
    }

    /// Assigns the next sequence number to a message the caller sends now,
    /// or `None` when [`RelSender::can_send`] is false. Unreliable: the
    /// send is complete at once.
    pub fn on_send(&mut self, now_ns: u64) -> Option<u32> {
        if !self.can_send() {
            return None;
        }
        if !self.needs_timer() {
            // Nothing was waiting for the peer: its silence counts from now.
            self.heard_ns = self.heard_ns.max(now_ns);
        }
        let seq = self.next;
        self.next = seq.wrapping_add(1);
        self.stats.sent += 1;
        if !self.level.is_reliable() {
            (self.acked, self.placed, self.done) = (self.next, self.next, self.next);
            return Some(seq);
        }
        self.sent_ns[(seq & self.mask) as usize] = now_ns;
        if !self.window_open_at(seq) {
            // A probe past the closed window: its ack time says nothing
            // about the round trip.
            self.probe_out = true;
            self.stats.probes += 1;
            self.rexmit_hi = self.next;
        }
        self.probe_ready = false;
        self.update_timer(now_ns, false);
        Some(seq)
    }

    /// Takes an ack from the peer. Ignores (and counts) a bogus or stale
    /// one; a NACK in it is handled as by [`RelSender::on_nack`].
    pub fn on_ack(&mut self, ack: Ack, now_ns: u64) -> AckOutcome {
        let mut out = AckOutcome::default();
        if !self.level.is_reliable() {
            self.stats.acks_rx += 1;
            self.stats.bogus_acks += 1;
            return out;
        }
        if self.broken.is_some() {
            return out;
        }
        self.stats.acks_rx += 1;
        if seq_lt(self.next, ack.cum_ack)
            || seq_lt(ack.cum_ack, ack.cum_placed)
            || ack.window_end.wrapping_sub(ack.cum_ack) > MAX_WINDOW
        {
            self.stats.bogus_acks += 1;
            return out;
        }
        if seq_lt(ack.cum_ack, self.acked) || seq_lt(ack.cum_placed, self.placed) {
            self.stats.stale_acks += 1;
            return out;
        }
        // A valid ack: the peer answers.
        self.heard_ns = self.heard_ns.max(now_ns);
        let acked_more = ack.cum_ack != self.acked;
        let placed_more = ack.cum_placed != self.placed;
        let window_more = seq_lt(self.window_end, ack.window_end);
        let outstanding = self.acked != self.next;
        if !acked_more
            && !placed_more
            && !window_more
            && outstanding
            && !ack.nack
            && self.window_open_at(self.acked)
        {
            self.stats.dup_acks += 1;
            self.dupacks = self.dupacks.saturating_add(1);
        }
        if acked_more {
            let newest = ack.cum_ack.wrapping_sub(1);
            if seq_le(self.rexmit_hi, newest) {
                let sent = self.sent_ns[(newest & self.mask) as usize];
                self.rtt_sample(now_ns.saturating_sub(sent));
            }
            self.acked = ack.cum_ack;
            self.sack = Sack::default();
            self.progress();
            if seq_lt(self.rexmit_hi, self.acked) {
                self.rexmit_hi = self.acked;
            }
            if self.fast_from.is_some_and(|f| seq_lt(f, self.acked)) {
                self.fast_from = None;
            }
            self.probe_out = false;
        }
        if placed_more {
            self.placed = ack.cum_placed;
            if self.level == Reliability::ReliableReception {
                self.progress();
            }
        }
        if window_more {
            self.window_end = ack.window_end;
        }
        let done = if self.level == Reliability::ReliableReception {
            self.placed
        } else {
            self.acked
        };
        out.completed = done.wrapping_sub(self.done);
        self.done = done;

        let open = self.window_open_at(self.acked);
        if self.acked == self.next || !open {
            // Nothing is outstanding inside the window: the timer probes,
            // and this ack answers.
            self.expiries = 0;
        }
        if open {
            self.probe_ready = false;
        }
        if self.probe_out && open && self.acked != self.next {
            // The window reopened: the probe was dropped or is still on
            // its way; resend it now rather than at the next timeout.
            self.probe_out = false;
            out.retransmit = self.fast_retransmit(self.acked, now_ns);
        } else if self.dupacks >= 3 && outstanding && open && seq_le(self.rexmit_hi, self.acked) {
            out.retransmit = self.fast_retransmit(self.acked, now_ns);
        }
        if ack.nack {
            if let Some(r) = self.on_nack(ack.cum_ack, now_ns) {
                out.retransmit = Some(r);
            }
        }
        let progressed =
            acked_more || (placed_more && self.level == Reliability::ReliableReception);
        self.update_timer(now_ns, progressed);
        out
    }

    /// Takes a NACK: the peer expects `expected` and saw a later message.
    /// Returns the messages to resend (`expected` to the newest sent) when
    /// `expected` is past where the last fast retransmit since `cum_ack`
    /// last moved started (so at most once per gap); `None` for a
    /// repeated, stale or bogus NACK (the last two counted).
    pub fn on_nack(&mut self, expected: u32, now_ns: u64) -> Option<SeqRange> {
        self.stats.nacks_rx += 1;
        if !self.level.is_reliable() {
            self.stats.bogus_acks += 1;
            return None;
        }
        if self.broken.is_some() {
            return None;
        }
        if seq_lt(expected, self.acked) {
            self.stats.stale_acks += 1;
            return None;
        }
        if !seq_lt(expected, self.next) {
            self.stats.bogus_acks += 1;
            return None;
        }
        self.fast_retransmit(expected, now_ns)
    }

    /// Runs the timer: call at [`RelSender::next_deadline`] (calling
    /// earlier, or more often, is harmless).
    pub fn poll_timer(&mut self, now_ns: u64) -> TimerOutcome {
        if self.broken.is_some() || !self.level.is_reliable() {
            return TimerOutcome::Nothing;
        }
        match self.deadline {
            Some(d) if d <= now_ns => {}
            _ => return TimerOutcome::Nothing,
        }
        if !self.needs_timer() {
            self.deadline = None;
            return TimerOutcome::Nothing;
        }
        if self.acked == self.next && self.done == self.acked {
            // The window is closed and nothing is outstanding: let the
            // caller's next message out as a probe.
            self.probe_ready = true;
            self.deadline = None;
            return TimerOutcome::Probe { seq: self.next };
        }
        self.expiries = self.expiries.saturating_add(1);
        let silent_until = self.heard_ns.saturating_add(self.cfg.break_timeout_ns);
        if self.expiries >= self.cfg.retries_max && now_ns >= silent_until {
            self.broken = Some(BreakReason::RetriesExhausted);
            self.deadline = None;
            return TimerOutcome::Broken(BreakReason::RetriesExhausted);
        }
        self.backoff = (self.backoff + 1).min(63);
        let out = if self.acked == self.next {
            // ReliableReception: all accepted, some not placed; a
            // duplicate of the newest makes the peer ack again.
            self.stats.probes += 1;
            TimerOutcome::Probe {
                seq: self.acked.wrapping_sub(1),
            }
        } else if !self.window_open_at(self.acked) {
            // Only a probe is out, past the closed window.
            self.stats.probes += 1;
            TimerOutcome::Probe { seq: self.acked }
        } else {
            let r = SeqRange {
                from: self.acked,
                to: self.next,
            };
            self.stats.timeouts += 1;
            let held = r.iter().filter(|&s| self.sacked(s)).count() as u64;
            self.stats.retransmitted += u64::from(r.len()) - held;
            self.rexmit_hi = self.next;
            self.dupacks = 0;
            TimerOutcome::Retransmit(r)
        };
        let mut at = now_ns.saturating_add(self.current_rto());
        if self.expiries.saturating_add(1) >= self.cfg.retries_max && now_ns < silent_until {
            // The next expiry may break the VI: not later than the end of
            // the silence allowed.
            at = at.min(silent_until);
        }
        self.deadline = Some(at);
        out
    }

    /// When [`RelSender::poll_timer`] has something to do, if ever.
    pub fn next_deadline(&self) -> Option<u64> {
        self.deadline
    }

    /// True when the peer's window has room for `seq`.
    fn window_open_at(&self, seq: u32) -> bool {
        seq_lt(seq, self.window_end)
    }

    fn progress(&mut self) {
        self.backoff = 0;
        self.expiries = 0;
        self.dupacks = 0;
    }

    /// Outstanding data, a placement to learn, or a closed window with no
    /// probe allowed yet.
    fn needs_timer(&self) -> bool {
        self.level.is_reliable()
            && self.broken.is_none()
            && (self.acked != self.next
                || self.done != self.acked
                || (!self.window_open_at(self.next) && !self.probe_ready))
    }

    /// Stops the timer when not needed; starts it when needed and not
    /// running, or when `restart`.
    fn update_timer(&mut self, now_ns: u64, restart: bool) {
        if !self.needs_timer() {
            self.deadline = None;
        } else if restart || self.deadline.is_none() {
            self.deadline = Some(now_ns.saturating_add(self.current_rto()));
        }
    }

    fn current_rto(&self) -> u64 {
        let max = self.cfg.rto_max_ns;
        if self.backoff >= 64 || self.rto_ns > (max >> self.backoff) {
            max
        } else {
            (self.rto_ns << self.backoff).min(max)
        }
    }

    /// Go-back-N from `from` (within `acked .. next`), once per `from`.
    fn fast_retransmit(&mut self, from: u32, now_ns: u64) -> Option<SeqRange> {
        if self.fast_from.is_some_and(|f| seq_le(from, f)) || !seq_lt(from, self.next) {
            return None;
        }
        self.fast_from = Some(from);
        // The one message the receiver misses: it keeps what came after
        // it (inside its window) and takes it all in once this arrives.
        let r = SeqRange {
            from,
            to: from.wrapping_add(1),
        };
        self.stats.fast_retransmits += 1;
        self.stats.retransmitted += u64::from(r.len());
        // Acks of what was out then are late by the gap: no RTT sample
        // from them, and duplicate acks before they come are echoes.
        self.rexmit_hi = self.next;
        self.update_timer(now_ns, true);
        Some(r)
    }

    /// RFC 6298, in nanoseconds.
    fn rtt_sample(&mut self, r: u64) {
        if self.have_rtt {
            let err = self.srtt_ns.abs_diff(r);
            self.rttvar_ns = (self.rttvar_ns - self.rttvar_ns / 4).saturating_add(err / 4);
            self.srtt_ns = (self.srtt_ns - self.srtt_ns / 8).saturating_add(r / 8);
        } else {
            self.srtt_ns = r;
            self.rttvar_ns = r / 2;
            self.have_rtt = true;
        }
        self.rto_ns = self
            .srtt_ns
            .saturating_add(self.rttvar_ns.saturating_mul(4))
            .clamp(self.cfg.rto_min_ns, self.cfg.rto_max_ns);
    }
}
