//! The receiving half of one direction of a VI ([`RelReceiver`]): in
//! order, with credit; delayed acks and the selective acknowledgement.

use super::*;

/// The receiving half of one direction of a VI.
#[derive(Debug, Clone)]
pub struct RelReceiver {
    cfg: RelConfig,
    level: Reliability,
    /// Next expected sequence number (`cum_ack`).
    expected: u32,
    /// Accepted, not placed.
    held: u32,
    /// An ack is due at this time.
    ack_at: Option<u64>,
    nack_pending: bool,
    /// The `expected` value a NACK was made for.
    nacked: Option<u32>,
    accepted_unacked: u32,
    placed_unacked: u32,
    ack_every: u32,
    /// The caller closed the window ([`RelReceiver::close`]): no room for
    /// anything until it reopens it.
    closed: bool,
    /// Counters.
    pub stats: RelStats,
}

impl RelReceiver {
    /// A receiver whose first expected message is `first_seq`.
    pub fn new(cfg: RelConfig, level: Reliability, first_seq: u32) -> RelReceiver {
        let cfg = cfg.normalized();
        RelReceiver {
            cfg,
            level,
            expected: first_seq,
            held: 0,
            ack_at: None,
            nack_pending: false,
            nacked: None,
            accepted_unacked: 0,
            placed_unacked: 0,
            ack_every: cfg.ack_every(),
            closed: false,
            stats: RelStats::default(),
        }
    }

    /// The level.
    pub fn level(&self) -> Reliability {
        self.level
    }

    /// The next expected sequence number (`cum_ack`).
    pub fn expected(&self) -> u32 {
        self.expected
    }

    /// Messages accepted and not placed yet.
    pub fn held(&self) -> u32 {
        self.held
    }

    /// The window end advertised now: `expected + hold_max - held`.
    pub fn window_end(&self) -> u32 {
        self.expected.wrapping_add(self.room())
    }

    /// Judges an arriving message (see [`DataVerdict`]).
    pub fn on_data(&mut self, seq: u32, now_ns: u64) -> DataVerdict {
        let ahead = seq.wrapping_sub(self.expected);
        if seq_lt(seq, self.expected) {
            self.stats.duplicates += 1;
            self.ack_by(now_ns);
            return DataVerdict::Duplicate;
        }
        let room = self.room();
        if !self.level.is_reliable() {
            self.stats.lost += u64::from(ahead);
            self.expected = seq.wrapping_add(1);
            if room == 0 {
                self.stats.hold_full += 1;
                return DataVerdict::OverWindow;
            }
            self.held += 1;
            self.stats.accepted += 1;
            return DataVerdict::Accept;
        }
        if ahead >= room {
            self.stats.over_window += 1;
            self.ack_by(now_ns);
            return DataVerdict::OverWindow;
        }
        if ahead > 0 {
            self.stats.out_of_order += 1;
            let first = self.nacked != Some(self.expected);
            if first {
                self.nacked = Some(self.expected);
                self.nack_pending = true;
                self.ack_by(now_ns);
            }
            return DataVerdict::OutOfOrder { send_nack: first };
        }
        self.expected = seq.wrapping_add(1);
        self.held += 1;
        self.stats.accepted += 1;
        self.nack_pending = false;
        self.accepted_unacked += 1;
        if self.accepted_unacked >= self.ack_every {
            self.ack_by(now_ns);
        } else {
            self.ack_by(now_ns.saturating_add(self.cfg.ack_delay_ns));
        }
        DataVerdict::Accept
    }

    /// The caller moved the `n` oldest held messages into posted buffers
    /// (more than are held counts as all of them).
    pub fn placed(&mut self, n: u32, now_ns: u64) {
        let n = n.min(self.held);
        if n == 0 {
            return;
        }
        let was_closed = self.held >= self.cfg.hold_max;
        self.held -= n;
        if !self.level.is_reliable() {
            return;
        }
        self.placed_unacked = self.placed_unacked.saturating_add(n);
        if was_closed || self.placed_unacked >= self.ack_every {
            self.ack_by(now_ns);
        } else {
            self.ack_by(now_ns.saturating_add(self.cfg.ack_delay_ns));
        }
    }

    /// Part of a message arrived (the caller reassembles): an ack (which
    /// the caller completes with a [`Sack`]) is due within the ack delay,
    /// or at once if `now`.
    pub fn ack_soon(&mut self, now_ns: u64, now: bool) {
        let d = if now { 0 } else { self.cfg.ack_delay_ns };
        self.ack_by(now_ns.saturating_add(d));
    }

    /// Part of the expected message is missing while later parts of it
    /// arrived (the caller reassembles): the ack asks for a fast
    /// retransmit (a NACK) at once, as the first out-of-order message of
    /// a gap does, once per expected message.
    pub fn ask_resend(&mut self, now_ns: u64) {
        if self.level.is_reliable() && self.nacked != Some(self.expected) {
            self.nacked = Some(self.expected);
            self.nack_pending = true;
            self.ack_by(now_ns);
        }
    }

    /// Messages it can still take: `window_end - expected`.
    pub fn room(&self) -> u32 {
        if self.closed {
            0
        } else {
            self.cfg.hold_max.saturating_sub(self.held)
        }
    }

    /// The caller has no room for what comes (its memory for this VI is
    /// used up): the window closes at `expected`, and the ack that says so
    /// is due at once. Everything that arrives is then over the window
    /// (and acked at once, as a probe is), until [`RelReceiver::reopen`].
    pub fn close(&mut self, now_ns: u64) {
        if !self.closed && self.level.is_reliable() {
            self.closed = true;
            self.ack_by(now_ns);
        }
    }

    /// The caller has room again: the window reopens, and the ack that
    /// says so is due at once.
    pub fn reopen(&mut self, now_ns: u64) {
        if self.closed {
            self.closed = false;
            self.ack_by(now_ns);
        }
    }

    /// True while the caller keeps the window closed.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// True when an ack should go out at `now_ns`.
    pub fn ack_due(&self, now_ns: u64) -> bool {
        self.ack_at.is_some_and(|t| t <= now_ns)
    }

    /// When the pending ack is due (maybe already), if one is pending.
    /// Never for Unreliable.
    pub fn ack_deadline(&self) -> Option<u64> {
        self.ack_at
    }

    /// The ack [`RelReceiver::make_ack`] would make, if one is pending
    /// (due or not): what a message of the other direction may carry.
    pub fn pending_ack(&self) -> Option<Ack> {
        self.ack_at?;
        Some(Ack {
            cum_ack: self.expected,
            cum_placed: self.expected.wrapping_sub(self.held),
            window_end: self.window_end(),
            nack: self.nack_pending,
        })
    }

    /// The ack to send now; clears what was pending.
    pub fn make_ack(&mut self) -> Ack {
        let ack = Ack {
            cum_ack: self.expected,
            cum_placed: self.expected.wrapping_sub(self.held),
            window_end: self.window_end(),
            nack: self.nack_pending,
        };
        self.ack_at = None;
        self.nack_pending = false;
        self.accepted_unacked = 0;
        self.placed_unacked = 0;
        self.stats.acks_tx += 1;
        if ack.nack {
            self.stats.nacks_tx += 1;
        }
        ack
    }

    /// An ack is due at `t` at the latest (reliable levels only).
    fn ack_by(&mut self, t: u64) {
        if self.level.is_reliable() {
            self.ack_at = Some(self.ack_at.map_or(t, |a| a.min(t)));
        }
    }
}
