//! VIA's reliability levels over the wire: a pure state machine per
//! direction of one connection (VI).
//!
//! A VI has one of three [`Reliability`] levels:
//!
//! - [`Reliability::Unreliable`]: a send completes when it is sent; the
//!   receiver takes whatever arrives in sequence order, counts gaps as
//!   `lost` and drops what is older than what it already took.
//! - [`Reliability::ReliableDelivery`]: a send completes once the receiving
//!   engine accepted it; every message arrives exactly once, in order, or
//!   the VI breaks.
//! - [`Reliability::ReliableReception`]: a send completes only once the
//!   message is in a receive buffer the application posted.
//!
//! [`RelSender`] and [`RelReceiver`] are pure: no I/O, no clock reads (time
//! is a `u64` of nanoseconds passed in), no allocation after `new` (the
//! sender keeps one send time per in-flight slot in a ring of `window`
//! slots), O(1) per call, and no input makes them panic. The caller keeps
//! the payloads and the descriptors; the machines deal in sequence numbers.
//!
//! # Sequence numbers
//!
//! Each direction of a VI numbers its messages with a `u32` that starts at
//! a value both ends agree on when the VI opens, and wraps: comparisons use
//! serial-number arithmetic ([`seq_lt`]).
//!
//! # Receiver: in order, with credit
//!
//! The receiver takes only the next expected sequence number
//! ([`DataVerdict::Accept`]); the caller then holds that message until the
//! application has a receive buffer for it, and reports each message moved
//! into a buffer with [`RelReceiver::placed`]. It holds at most
//! [`RelConfig::hold_max`] messages, and advertises its credit in every
//! [`Ack`]:
//!
//! - `cum_ack`: every message before it was accepted by the receiving engine;
//! - `cum_placed`: every message before it is in a posted buffer;
//! - `window_end = cum_ack + hold_max - held`: the sender may send sequence
//!   numbers below it.
//!
//! Anything else is counted and not taken: older than expected is a
//! duplicate (re-acked at once); at or past `window_end` is over the window
//! (the sender overran, or probed: acked at once); between the two is out
//! of order, and the first such arrival for a given expected number asks
//! for a fast retransmit (a NACK, [`Ack::nack`]) — one per gap, not again
//! until the expected number moves. The caller may keep out-of-order
//! messages (they are inside the window) and offer them again, in order,
//! once the expected number reaches them (the engine's VIs do): then a
//! loss costs the resending of the lost message only.
//!
//! Ack policy: at once after a duplicate, an over-window arrival, the first
//! out-of-order arrival of a gap, `K` accepted messages, `K` placed
//! messages, or a placement that reopens a closed window (`K =
//! min(window, hold_max) / 4`, at least 1); otherwise at most
//! [`RelConfig::ack_delay_ns`] after the first accept or placement not yet
//! acked. The caller asks [`RelReceiver::ack_due`] /
//! [`RelReceiver::ack_deadline`] and sends [`RelReceiver::make_ack`].
//!
//! # Sender: window, timers, fast retransmit
//!
//! The sender sends only below the last `window_end` it heard (the first
//! guess is `first_seq + hold_max`: both ends use the same `hold_max`, or
//! the peer's is learnt when the VI opens) and keeps at most
//! [`RelConfig::window`] sends not yet completed. The caller resends what
//! it is asked to, in order, ahead of new messages:
//!
//! - at once on a NACK, or on the third duplicate ack
//!   ([`AckOutcome::retransmit`]), the one message the receiver expects
//!   (a selective resend: the receiver kept what came after it); each
//!   such retransmission starts past where the previous one started,
//!   until `cum_ack` moves. Duplicate
//!   acks count only once everything of the previous retransmission was
//!   acked: before that they are the receiver's answers to the duplicates
//!   it made (NewReno's rule), and acting on them would resend again what
//!   is being resent;
//! - on the retransmission timer ([`TimerOutcome::Retransmit`]), from
//!   `cum_ack` to the newest sent, less what the receiver said it holds.
//!
//! # Selective acknowledgement
//!
//! A receiver that keeps messages past a gap, whole or in part (the
//! caller reassembles a message of several fragments itself, and keeps
//! its fragments until it is complete), says so in a [`Sack`] beside its
//! ack: the next 64 messages it holds whole, and the fragments it holds of
//! the one it expects. [`RelSender::on_sack`] takes it;
//! [`RelSender::sacked`] and [`RelSender::frags_held`] tell the caller
//! what a retransmission leaves out, so that a message of many fragments
//! completes across retransmissions instead of having to arrive whole in
//! one: progress at any loss rate that lets datagrams through.
//!
//! A receiver whose caller has no room for more (its memory for the VI is
//! used up) closes its window ([`RelReceiver::close`]): everything is then
//! over the window, its ack says the window is closed ([`Sack::closed`]),
//! and the sender sends nothing but probes until an ack reopens it.
//!
//! The retransmission timeout (RTO) is estimated from ack round trips as
//! in RFC 6298 (Karn's rule: no sample from a retransmitted message),
//! clamped to `rto_min_ns ..= rto_max_ns`, doubled on every timeout, and
//! reset on progress (`cum_ack` moves, or for ReliableReception
//! `cum_placed`).
//!
//! When the peer's window is closed, the timer sends a one-message probe
//! ([`TimerOutcome::Probe`]) so that a lost window update cannot deadlock
//! the VI. The same probe (a duplicate of the newest accepted message)
//! asks a ReliableReception peer for a lost placement update. A probe the
//! peer answers with any valid ack does not count toward the limit.
//!
//! # Breaking
//!
//! A VI breaks ([`BreakReason::RetriesExhausted`]) only when its peer
//! stops answering: at a timer expiry once there were
//! [`RelConfig::retries_max`] expiries in a row with neither progress nor
//! (for probes) an answer, and no valid ack came for
//! [`RelConfig::break_timeout_ns`] (5 s by default; from the first send
//! after a time with nothing outstanding, if later). Once the expiries
//! are counted, the timer is due at the end of that silence at the
//! latest, so the break comes [`RelConfig::break_bound_ns`]`(rto)` after
//! the last answer at most: the break timeout, or the sum of `min(rto *
//! 2^i, rto_max)` for `i` below `retries_max` if that is longer (with the
//! defaults, RTO 1 ms to 256 ms and 8 tries, 255 ms from the floor, at
//! most 8 × 256 ms = 2.048 s: the 5 s decide). A peer stopped for less
//! (a scheduling hiccup, a page-in, a debugger) keeps the VI.
//!
//! A peer that keeps answering probes with a closed window keeps the VI,
//! as TCP's persist timer does; a peer whose application never drains is
//! for the engine's liveness checks and close to deal with.
//!
//! # Trust
//!
//! An ack that acknowledges a message never sent, says placed beyond
//! accepted, or advertises a window behind its own `cum_ack` or wider than
//! [`MAX_WINDOW`] is ignored and counted in `bogus_acks`; one older than
//! what the sender already knows (reordered on the wire, or replayed) in
//! `stale_acks`. Data sequence numbers are judged only against the
//! receiver's state. Every counter is in [`RelStats`].
//!
//! ```
//! use unet_engine::wire::reliable::*;
//!
//! let cfg = RelConfig::default();
//! let level = Reliability::ReliableReception;
//! let mut tx = RelSender::new(cfg, level, 7);
//! let mut rx = RelReceiver::new(cfg, level, 7);
//!
//! let seq = tx.on_send(0).unwrap(); // the caller sends message `seq`
//! assert_eq!(rx.on_data(seq, 10_000), DataVerdict::Accept);
//! // One accept: a delayed ack.
//! assert!(!rx.ack_due(10_000) && rx.ack_due(10_000 + cfg.ack_delay_ns));
//! let ack = rx.make_ack();
//! assert_eq!(tx.on_ack(ack, 250_000).completed, 0); // accepted, not placed
//!
//! rx.placed(1, 300_000); // the application had a buffer for it
//! let ack = rx.make_ack();
//! assert_eq!(tx.on_ack(ack, 400_000).completed, 1); // now the send completes
//! assert_eq!(tx.next_deadline(), None); // nothing outstanding
//! ```

/// Largest [`RelConfig::window`] and [`RelConfig::hold_max`], and the
mod receiver;
mod sender;

pub use receiver::RelReceiver;
pub use sender::RelSender;

/// widest window an ack may advertise.
pub const MAX_WINDOW: u32 = 1 << 16;

/// `a` comes before `b` in serial-number arithmetic (RFC 1982): true when
/// `b` is less than 2^31 ahead of `a`.
#[inline]
pub const fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// `a` is `b` or comes before it ([`seq_lt`]).
#[inline]
pub const fn seq_le(a: u32, b: u32) -> bool {
    !seq_lt(b, a)
}

/// The reliability level of a VI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reliability {
    /// Loss allowed (and counted); a send completes when sent.
    Unreliable,
    /// Exactly once, in order, or the VI breaks; a send completes once the
    /// receiving engine accepted it.
    ReliableDelivery,
    /// As [`Reliability::ReliableDelivery`], but a send completes only once
    /// the message is in a receive buffer the application posted.
    ReliableReception,
}

impl Reliability {
    /// True for the two reliable levels (acks, retransmission, credit).
    pub const fn is_reliable(self) -> bool {
        !matches!(self, Reliability::Unreliable)
    }
}

/// Why a VI broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakReason {
    /// [`RelConfig::retries_max`] timer expiries in a row without progress.
    RetriesExhausted,
}

impl BreakReason {
    /// The snake_case name, for counters and logs.
    pub const fn name(self) -> &'static str {
        match self {
            BreakReason::RetriesExhausted => "retries_exhausted",
        }
    }
}

/// Settings of both machines of a VI. Out-of-range values are brought into
/// range ([`RelConfig::normalized`]) by `new`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelConfig {
    /// Most sends in flight (sent, not completed): the sender's ring of
    /// slots. Default 64; `1 ..= MAX_WINDOW`.
    pub window: u32,
    /// RTO before any round trip was measured. Default 4 ms.
    pub rto_initial_ns: u64,
    /// Floor of the RTO. Default 1 ms (at least 1 ns).
    pub rto_min_ns: u64,
    /// Ceiling of the RTO, backoff included. Default 256 ms.
    pub rto_max_ns: u64,
    /// Timer expiries in a row without progress that break the VI.
    /// Default 8; at least 1.
    pub retries_max: u32,
    /// Messages the receiving engine holds per VI before the application
    /// posts buffers for them: the receiver's credit. Default 64;
    /// `1 ..= MAX_WINDOW`.
    pub hold_max: u32,
    /// Longest delay of an ack. Default 200 µs.
    pub ack_delay_ns: u64,
    /// How long the peer may stay silent (no valid ack) while something
    /// waits for it before the VI breaks: it breaks at the first timer
    /// expiry after both [`RelConfig::retries_max`] expiries in a row and
    /// this much silence. Default 5 s (the engine's peer liveness
    /// timeout); at least 1 ms.
    pub break_timeout_ns: u64,
}

/// Default [`RelConfig::break_timeout_ns`]: 5 s.
pub const DEFAULT_BREAK_TIMEOUT_NS: u64 = 5_000_000_000;

impl Default for RelConfig {
    fn default() -> Self {
        RelConfig {
            window: 64,
            rto_initial_ns: 4_000_000,
            rto_min_ns: 1_000_000,
            rto_max_ns: 256_000_000,
            retries_max: 8,
            hold_max: 64,
            ack_delay_ns: 200_000,
            break_timeout_ns: DEFAULT_BREAK_TIMEOUT_NS,
        }
    }
}

impl RelConfig {
    /// The same settings brought into range: `window` and `hold_max` in
    /// `1 ..= MAX_WINDOW`, `rto_min_ns >= 1`, `rto_max_ns >= rto_min_ns`,
    /// `rto_initial_ns` between them, `retries_max >= 1`.
    pub fn normalized(self) -> RelConfig {
        let rto_min_ns = self.rto_min_ns.max(1);
        let rto_max_ns = self.rto_max_ns.max(rto_min_ns);
        RelConfig {
            window: self.window.clamp(1, MAX_WINDOW),
            rto_initial_ns: self.rto_initial_ns.clamp(rto_min_ns, rto_max_ns),
            rto_min_ns,
            rto_max_ns,
            retries_max: self.retries_max.max(1),
            hold_max: self.hold_max.clamp(1, MAX_WINDOW),
            ack_delay_ns: self.ack_delay_ns,
            break_timeout_ns: self.break_timeout_ns.max(1_000_000),
        }
    }

    /// Longest time from the last answer of a peer that went silent to
    /// the break of its VI, when the RTO was `rto_ns` (clamped to the RTO
    /// range) then: `break_timeout_ns`, or the sum of `min(rto * 2^i,
    /// rto_max)` for `i` in `0 .. retries_max` if that is longer (never
    /// more than `retries_max * rto_max_ns`).
    pub fn break_bound_ns(&self, rto_ns: u64) -> u64 {
        self.retries_bound_ns(rto_ns)
            .max(self.normalized().break_timeout_ns)
    }

    /// The time `retries_max` backed-off expiries take from an RTO of
    /// `rto_ns`: the sum of `min(rto * 2^i, rto_max)` for `i` in
    /// `0 .. retries_max`.
    pub fn retries_bound_ns(&self, rto_ns: u64) -> u64 {
        let c = self.normalized();
        let mut rto = rto_ns.clamp(c.rto_min_ns, c.rto_max_ns);
        let mut left = c.retries_max;
        let mut total = 0u64;
        while left > 0 && rto < c.rto_max_ns {
            total = total.saturating_add(rto);
            rto = rto.saturating_mul(2).min(c.rto_max_ns);
            left -= 1;
        }
        total.saturating_add(u64::from(left).saturating_mul(c.rto_max_ns))
    }

    /// Accepted or placed messages that trigger an ack at once.
    fn ack_every(&self) -> u32 {
        (self.window.min(self.hold_max) / 4).max(1)
    }
}

/// Counters of one machine, by reason. A sender fills the first group, a
/// receiver the second; [`RelStats::add`] sums them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RelStats {
    /// Sender: messages sent for the first time (probes included).
    pub sent: u64,
    /// Sender: messages to resend (less those the receiver said it holds).
    pub retransmitted: u64,
    /// Sender: acks received (every one, bogus and stale included).
    pub acks_rx: u64,
    /// Sender: NACKs received.
    pub nacks_rx: u64,
    /// Sender: acks or NACKs ignored as impossible (see the module doc).
    pub bogus_acks: u64,
    /// Sender: acks or NACKs ignored as older than what was known.
    pub stale_acks: u64,
    /// Sender: acks that told nothing new while data was outstanding.
    pub dup_acks: u64,
    /// Sender: go-back-N retransmissions on a NACK or 3 duplicate acks.
    pub fast_retransmits: u64,
    /// Sender: retransmission timeouts (probes not included).
    pub timeouts: u64,
    /// Sender: zero-window and placement probes sent.
    pub probes: u64,
    /// Receiver: messages accepted.
    pub accepted: u64,
    /// Receiver: messages older than the next expected one, dropped.
    pub duplicates: u64,
    /// Receiver: messages after a gap, dropped (reliable levels).
    pub out_of_order: u64,
    /// Receiver: messages at or past the advertised window, dropped
    /// (reliable levels).
    pub over_window: u64,
    /// Receiver, Unreliable: messages skipped by a gap.
    pub lost: u64,
    /// Receiver, Unreliable: messages dropped because `hold_max` messages
    /// were held.
    pub hold_full: u64,
    /// Receiver: acks made.
    pub acks_tx: u64,
    /// Receiver: acks made carrying a NACK.
    pub nacks_tx: u64,
}

impl RelStats {
    /// Number of counters.
    pub const COUNT: usize = 18;

    /// Adds every counter of `other` to `self`.
    pub fn add(&mut self, other: &RelStats) {
        let mut sum = self.counters();
        for (a, b) in sum.iter_mut().zip(other.counters()) {
            a.1 += b.1;
        }
        *self = RelStats::from_counters(&sum);
    }

    /// `(snake_case name, value)` of every counter, sender's first.
    pub fn counters(&self) -> [(&'static str, u64); RelStats::COUNT] {
        [
            ("sent", self.sent),
            ("retransmitted", self.retransmitted),
            ("acks_rx", self.acks_rx),
            ("nacks_rx", self.nacks_rx),
            ("bogus_acks", self.bogus_acks),
            ("stale_acks", self.stale_acks),
            ("dup_acks", self.dup_acks),
            ("fast_retransmits", self.fast_retransmits),
            ("timeouts", self.timeouts),
            ("probes", self.probes),
            ("accepted", self.accepted),
            ("duplicates", self.duplicates),
            ("out_of_order", self.out_of_order),
            ("over_window", self.over_window),
            ("lost", self.lost),
            ("hold_full", self.hold_full),
            ("acks_tx", self.acks_tx),
            ("nacks_tx", self.nacks_tx),
        ]
    }

    fn from_counters(c: &[(&'static str, u64); RelStats::COUNT]) -> RelStats {
        RelStats {
            sent: c[0].1,
            retransmitted: c[1].1,
            acks_rx: c[2].1,
            nacks_rx: c[3].1,
            bogus_acks: c[4].1,
            stale_acks: c[5].1,
            dup_acks: c[6].1,
            fast_retransmits: c[7].1,
            timeouts: c[8].1,
            probes: c[9].1,
            accepted: c[10].1,
            duplicates: c[11].1,
            out_of_order: c[12].1,
            over_window: c[13].1,
            lost: c[14].1,
            hold_full: c[15].1,
            acks_tx: c[16].1,
            nacks_tx: c[17].1,
        }
    }
}

/// Sequence numbers `from .. to` (serial arithmetic, `to` excluded): what
/// to resend, in order, ahead of new messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqRange {
    /// First sequence number.
    pub from: u32,
    /// One past the last.
    pub to: u32,
}

impl SeqRange {
    /// Number of sequence numbers.
    pub fn len(&self) -> u32 {
        self.to.wrapping_sub(self.from)
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.from == self.to
    }

    /// True when `seq` is in the range.
    pub fn contains(&self, seq: u32) -> bool {
        seq.wrapping_sub(self.from) < self.len()
    }

    /// The sequence numbers, in order.
    pub fn iter(&self) -> impl Iterator<Item = u32> {
        let from = self.from;
        (0..self.len()).map(move |i| from.wrapping_add(i))
    }
}

/// What a receiver tells its sender (one ack frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// Every message before it was accepted by the receiving engine.
    pub cum_ack: u32,
    /// Every message before it is in a buffer the application posted.
    pub cum_placed: u32,
    /// The sender may send sequence numbers below it.
    pub window_end: u32,
    /// A gap was seen at `cum_ack`: resend from there (a NACK).
    pub nack: bool,
}

/// What a receiver holds beyond `cum_ack` (a selective acknowledgement),
/// carried by an ack frame beside its [`Ack`]: the sender resends only
/// what it does not cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Sack {
    /// Messages the receiver holds whole past the one it expects: bit `i`
    /// for `cum_ack + 1 + i`.
    pub ahead: u64,
    /// The fragments of message `cum_ack` the receiver holds from
    /// `frag_base` on: bit `i` of word `w` for fragment `frag_base + 64 *
    /// w + i`.
    pub frags: [u64; SACK_FRAG_WORDS],
    /// The receiver holds every fragment of message `cum_ack` before this
    /// one (its first missing one).
    pub frag_base: u16,
    /// The receiver closed its window at `cum_ack` (its memory for the VI
    /// is used up): send nothing more until an ack opens it again.
    pub closed: bool,
    /// Not on the wire: the sender takes the fragments past the last one
    /// the receiver holds as still on their way (a fast retransmission
    /// fills the holes only; the timer's sends everything missing).
    pub tail_held: bool,
}

/// Words of [`Sack::frags`]: it covers 256 fragments of the expected
/// message (a 256 KiB message at the default datagram size has 185).
pub const SACK_FRAG_WORDS: usize = 4;

impl Sack {
    /// True when fragment `index` of the expected message is covered.
    pub fn has_frag(&self, index: u16) -> bool {
        let Some(i) = index.checked_sub(self.frag_base) else {
            return true;
        };
        let i = usize::from(i);
        if i < 64 * SACK_FRAG_WORDS && self.frags[i / 64] & (1 << (i % 64)) != 0 {
            return true;
        }
        // Past the last fragment held: on its way, for a fast
        // retransmission.
        self.tail_held && self.top().is_some_and(|t| usize::from(t) < i)
    }

    /// A probe's: every fragment but the first is taken as held, so that
    /// a probe (which only asks for an ack) is one datagram.
    pub const FIRST_ONLY: Sack = Sack {
        ahead: 0,
        frags: [!1, !0, !0, !0],
        frag_base: 0,
        closed: false,
        tail_held: true,
    };

    /// The last fragment held past `frag_base` (relative to it), if any.
    fn top(&self) -> Option<u16> {
        (0..SACK_FRAG_WORDS).rev().find_map(|w| {
            let bits = self.frags[w];
            (bits != 0).then(|| (w * 64 + 63 - bits.leading_zeros() as usize) as u16)
        })
    }

    /// True when it says nothing of the expected message's fragments.
    pub fn no_frags(&self) -> bool {
        self.frag_base == 0 && self.frags == [0; SACK_FRAG_WORDS]
    }
}

/// What an ack changed for the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[must_use]
pub struct AckOutcome {
    /// Sends completed by this ack: the caller completes its oldest
    /// `completed` outstanding sends, in order.
    pub completed: u32,
    /// The message to resend at once (the one the receiver expects), if
    /// any.
    pub retransmit: Option<SeqRange>,
}

/// What the sender's timer asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum TimerOutcome {
    /// Nothing due.
    Nothing,
    /// Timeout: resend these messages in order, less those
    /// [`RelSender::sacked`] says the receiver holds (and, of the one it
    /// expects, the fragments [`RelSender::frags_held`] says it holds).
    Retransmit(SeqRange),
    /// The peer's window is closed, or a ReliableReception send waits for
    /// its placement: send message `seq` by itself. If `seq` is
    /// [`RelSender::next_seq`], it is the caller's next message, which may
    /// go out now past the window ([`RelSender::can_send`] says yes for
    /// that one); otherwise it is a message already sent, to resend.
    Probe {
        /// The message to send alone.
        seq: u32,
    },
    /// The VI broke. Returned once; every call after that returns
    /// [`TimerOutcome::Nothing`] and [`RelSender::broken`] tells why.
    Broken(BreakReason),
}

/// What the receiver did with an arriving message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataVerdict {
    /// Taken: the caller now holds it for the application, and calls
    /// [`RelReceiver::placed`] once it is in a posted buffer.
    Accept,
    /// Older than the next expected message: dropped.
    Duplicate,
    /// After a gap: dropped. `send_nack` is true for the first such
    /// arrival of a gap, whose ack (due at once) carries the NACK.
    OutOfOrder {
        /// This arrival asks for a fast retransmit.
        send_nack: bool,
    },
    /// No room: dropped. Reliable levels: at or past the advertised window
    /// (overrun, or a zero-window probe). Unreliable: `hold_max` messages
    /// held.
    OverWindow,
}

#[cfg(test)]
mod tests;
