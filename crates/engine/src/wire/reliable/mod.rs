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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;
    use std::collections::BinaryHeap;

    const RD: Reliability = Reliability::ReliableDelivery;
    const RR: Reliability = Reliability::ReliableReception;

    /// xorshift64*, seeded through one SplitMix64 step.
    struct Rng(u64);

    impl Rng {
        fn new(seed: u64) -> Rng {
            let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            Rng((z ^ (z >> 31)) | 1)
        }

        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0 = x;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn below(&mut self, n: u64) -> u64 {
            if n == 0 {
                0
            } else {
                self.next() % n
            }
        }

        fn chance_ppm(&mut self, ppm: u32) -> bool {
            ppm > 0 && self.below(1_000_000) < u64::from(ppm)
        }
    }

    fn ack(cum_ack: u32, cum_placed: u32, window_end: u32) -> Ack {
        Ack {
            cum_ack,
            cum_placed,
            window_end,
            nack: false,
        }
    }

    #[test]
    fn serial_arithmetic_wraps() {
        assert!(seq_lt(1, 2) && !seq_lt(2, 1) && !seq_lt(5, 5));
        assert!(seq_lt(u32::MAX, 0) && seq_lt(u32::MAX - 3, 2));
        assert!(seq_le(7, 7) && seq_le(u32::MAX, 1) && !seq_le(1, u32::MAX));
        let r = SeqRange {
            from: u32::MAX - 1,
            to: 2,
        };
        assert_eq!(r.len(), 4);
        assert!(r.contains(u32::MAX) && r.contains(1) && !r.contains(2));
        assert_eq!(r.iter().collect::<Vec<_>>(), [u32::MAX - 1, u32::MAX, 0, 1]);
        assert!(SeqRange { from: 3, to: 3 }.is_empty());
    }

    #[test]
    fn defaults_and_break_bound() {
        let c = RelConfig::default();
        assert_eq!(c, c.normalized());
        assert_eq!(c.retries_bound_ns(c.rto_min_ns), 255_000_000);
        assert_eq!(c.retries_bound_ns(c.rto_initial_ns), 764_000_000);
        assert_eq!(c.retries_bound_ns(c.rto_max_ns), 2_048_000_000);
        assert_eq!(c.retries_bound_ns(u64::MAX), 2_048_000_000);
        // The silence allowed dominates by default.
        assert_eq!(c.break_bound_ns(c.rto_max_ns), 5_000_000_000);
        let odd = RelConfig {
            window: 0,
            hold_max: u32::MAX,
            rto_min_ns: 0,
            rto_max_ns: 0,
            rto_initial_ns: u64::MAX,
            retries_max: 0,
            ack_delay_ns: 0,
            break_timeout_ns: 0,
        }
        .normalized();
        assert_eq!(
            (odd.window, odd.hold_max, odd.retries_max),
            (1, MAX_WINDOW, 1)
        );
        assert_eq!(
            (odd.rto_min_ns, odd.rto_max_ns, odd.rto_initial_ns),
            (1, 1, 1)
        );
        let huge = RelConfig {
            retries_max: u32::MAX,
            ..c
        };
        assert_eq!(
            huge.break_bound_ns(c.rto_max_ns),
            u64::from(u32::MAX) * 256_000_000
        );
    }

    #[test]
    fn stats_add_and_names() {
        let a = RelStats {
            sent: 1,
            nacks_tx: 2,
            lost: 3,
            ..Default::default()
        };
        let mut b = a;
        b.add(&a);
        assert_eq!((b.sent, b.nacks_tx, b.lost, b.accepted), (2, 4, 6, 0));
        let mut one = RelStats::default();
        let all = RelStats::from_counters(&one.counters().map(|(n, _)| (n, 1)));
        one.add(&all);
        assert!(one.counters().iter().all(|(_, v)| *v == 1));
        let names: std::collections::HashSet<_> = one.counters().iter().map(|(n, _)| *n).collect();
        assert_eq!(names.len(), RelStats::COUNT);
        assert_eq!(BreakReason::RetriesExhausted.name(), "retries_exhausted");
    }

    #[test]
    fn receiver_reacks_duplicates_at_once() {
        let mut rx = RelReceiver::new(RelConfig::default(), RD, 10);
        assert_eq!(rx.on_data(10, 0), DataVerdict::Accept);
        assert_eq!(rx.ack_deadline(), Some(200_000)); // delayed ack
        let a = rx.make_ack();
        assert_eq!(a, ack(11, 10, 11 + 63));
        assert_eq!(rx.ack_deadline(), None);
        assert_eq!(rx.on_data(10, 5), DataVerdict::Duplicate);
        assert_eq!(rx.on_data(3, 6), DataVerdict::Duplicate);
        assert!(rx.ack_due(6)); // due at once
        assert_eq!(rx.make_ack(), a); // the same ack again
        assert_eq!(rx.stats.duplicates, 2);
        assert_eq!(rx.stats.acks_tx, 2);
        assert_eq!(rx.held(), 1);
    }

    #[test]
    fn a_pending_ack_is_offered_without_being_taken() {
        let mut rx = RelReceiver::new(RelConfig::default(), RD, 10);
        assert_eq!(rx.pending_ack(), None);
        assert_eq!(rx.on_data(10, 0), DataVerdict::Accept);
        let offered = rx.pending_ack().expect("an ack pending");
        assert_eq!(offered, ack(11, 10, 11 + 63));
        // Offering takes nothing: still pending, still counted once made.
        assert_eq!(rx.ack_deadline(), Some(200_000));
        assert_eq!(rx.stats.acks_tx, 0);
        assert_eq!(rx.make_ack(), offered);
        assert_eq!(rx.pending_ack(), None);
        assert_eq!(rx.stats.acks_tx, 1);
        // Unreliable VIs owe no acks.
        let mut u = RelReceiver::new(RelConfig::default(), Reliability::Unreliable, 0);
        assert_eq!(u.on_data(0, 0), DataVerdict::Accept);
        assert_eq!(u.pending_ack(), None);
    }

    #[test]
    fn receiver_acks_every_k_and_within_the_delay() {
        let cfg = RelConfig::default(); // K = 16
        let mut rx = RelReceiver::new(cfg, RD, 0);
        for s in 0..15 {
            assert_eq!(rx.on_data(s, 1000 + u64::from(s)), DataVerdict::Accept);
            assert_eq!(rx.ack_deadline(), Some(1000 + cfg.ack_delay_ns));
        }
        assert_eq!(rx.on_data(15, 2000), DataVerdict::Accept);
        assert!(rx.ack_due(2000));
        assert_eq!(rx.make_ack().cum_ack, 16);
        // Placements: delayed, unless K of them.
        rx.placed(1, 3000);
        assert_eq!(rx.ack_deadline(), Some(3000 + cfg.ack_delay_ns));
        rx.placed(15, 3100);
        assert!(rx.ack_due(3100));
        assert_eq!(rx.make_ack(), ack(16, 16, 16 + 64));
        rx.placed(5, 4000); // nothing held: nothing to say
        assert_eq!(rx.ack_deadline(), None);
    }

    #[test]
    fn receiver_discards_out_of_order_with_one_nack_per_gap() {
        let mut rx = RelReceiver::new(RelConfig::default(), RD, 0);
        assert_eq!(rx.on_data(0, 0), DataVerdict::Accept);
        let _ = rx.make_ack();
        // 1 is lost.
        assert_eq!(
            rx.on_data(2, 10),
            DataVerdict::OutOfOrder { send_nack: true }
        );
        assert!(rx.ack_due(10));
        for s in 3..8 {
            assert_eq!(
                rx.on_data(s, 11),
                DataVerdict::OutOfOrder { send_nack: false }
            );
        }
        let a = rx.make_ack();
        assert!(a.nack && a.cum_ack == 1);
        assert_eq!(
            rx.on_data(9, 12),
            DataVerdict::OutOfOrder { send_nack: false }
        );
        assert_eq!(rx.ack_deadline(), None); // no second NACK for the gap at 1
        assert_eq!(rx.on_data(1, 13), DataVerdict::Accept);
        assert_eq!(
            rx.on_data(3, 14),
            DataVerdict::OutOfOrder { send_nack: true }
        );
        assert!(rx.make_ack().nack);
        assert_eq!(rx.stats.out_of_order, 8);
        assert_eq!(rx.stats.nacks_tx, 2);
        assert_eq!(rx.expected(), 2);
    }

    #[test]
    fn receiver_over_window_is_dropped_and_acked() {
        let cfg = RelConfig {
            hold_max: 4,
            ..RelConfig::default()
        };
        let mut rx = RelReceiver::new(cfg, RD, 100);
        assert_eq!(rx.window_end(), 104);
        assert_eq!(rx.on_data(104, 0), DataVerdict::OverWindow);
        assert!(rx.ack_due(0));
        for s in 100..104 {
            assert_eq!(rx.on_data(s, 1), DataVerdict::Accept);
        }
        assert_eq!(rx.window_end(), 104); // closed
        let _ = rx.make_ack();
        assert_eq!(rx.on_data(104, 2), DataVerdict::OverWindow); // a probe
        assert_eq!(rx.make_ack(), ack(104, 100, 104));
        rx.placed(1, 3); // reopens: ack at once
        assert!(rx.ack_due(3));
        assert_eq!(rx.make_ack(), ack(104, 101, 105));
        assert_eq!(rx.stats.over_window, 2);
    }

    #[test]
    fn sender_ignores_bogus_and_stale_acks() {
        let mut tx = RelSender::new(RelConfig::default(), RD, u32::MAX - 2);
        for _ in 0..5 {
            tx.on_send(0).unwrap();
        }
        let next = tx.next_seq();
        assert_eq!(next, 2);
        let before = tx.clone();
        for a in [
            ack(3, 3, 10),                    // acks a message never sent
            ack(1, 2, 10),                    // placed beyond accepted
            ack(1, 0, 0),                     // window behind cum_ack
            ack(1, 0, 1 + MAX_WINDOW + 1),    // window too wide
            ack(0x8000_0000, 0, 0x8000_0001), // far away
        ] {
            assert_eq!(tx.on_ack(a, 10), AckOutcome::default());
        }
        assert_eq!(tx.stats.bogus_acks, 5);
        assert_eq!(tx.on_nack(2, 10), None); // nothing sent at 2
        assert_eq!(tx.stats.bogus_acks, 6);
        assert_eq!((tx.cum_ack(), tx.in_flight()), (before.cum_ack(), 5));

        assert_eq!(tx.on_ack(ack(0, u32::MAX, 60), 20).completed, 3);
        assert_eq!(
            tx.on_ack(ack(u32::MAX, u32::MAX, 60), 30),
            AckOutcome::default()
        );
        assert_eq!(
            tx.on_ack(ack(0, u32::MAX - 1, 60), 30),
            AckOutcome::default()
        );
        assert_eq!(tx.on_nack(u32::MAX, 30), None);
        assert_eq!(tx.stats.stale_acks, 3);
        assert_eq!((tx.cum_ack(), tx.in_flight()), (0, 2));

        let mut u = RelSender::new(RelConfig::default(), Reliability::Unreliable, 0);
        assert_eq!(u.on_ack(ack(0, 0, 1), 0), AckOutcome::default());
        assert_eq!(u.on_nack(0, 0), None);
        assert_eq!(u.stats.bogus_acks, 2);
    }

    #[test]
    fn sender_respects_window_and_credit() {
        let cfg = RelConfig {
            window: 8,
            hold_max: 5,
            ..RelConfig::default()
        };
        let mut tx = RelSender::new(cfg, RD, 0);
        for s in 0..5 {
            assert_eq!(tx.on_send(0), Some(s));
        }
        // The credit is 5.
        assert!(!tx.can_send() && tx.on_send(0).is_none());
        // Credit grows to 20, but only 8 may be in flight.
        let out = tx.on_ack(ack(0, 0, 20), 10);
        assert_eq!(out, AckOutcome::default());
        for s in 5..8 {
            assert_eq!(tx.on_send(10), Some(s));
        }
        assert!(!tx.can_send());
        assert_eq!(tx.on_ack(ack(3, 3, 20), 20).completed, 3);
        assert_eq!(tx.in_flight(), 5);
        for s in 8..11 {
            assert_eq!(tx.on_send(20), Some(s));
        }
        assert!(!tx.can_send());
        // A smaller window_end than known (reordered) does not shrink it.
        let _ = tx.on_ack(ack(11, 11, 11), 30);
        assert!(tx.can_send());
        assert_eq!(tx.stats.sent, 11);
    }

    #[test]
    fn zero_window_probe_keeps_the_vi_while_answered() {
        let cfg = RelConfig {
            hold_max: 2,
            ..RelConfig::default()
        };
        let mut tx = RelSender::new(cfg, RD, 0);
        let mut rx = RelReceiver::new(cfg, RD, 0);
        let mut now = 0;
        for _ in 0..2 {
            let s = tx.on_send(now).unwrap();
            assert_eq!(rx.on_data(s, now), DataVerdict::Accept);
        }
        now += 1000;
        let a = rx.make_ack();
        assert_eq!(a, ack(2, 0, 2)); // window closed, nothing placed
        assert_eq!(tx.on_ack(a, now).completed, 2);
        assert!(!tx.can_send());
        // Many more probe periods than retries_max: never breaks.
        let mut probes = 0;
        for _ in 0..40 {
            now = tx.next_deadline().expect("probe timer");
            match tx.poll_timer(now) {
                TimerOutcome::Probe { seq } => {
                    probes += 1;
                    if seq == tx.next_seq() {
                        assert!(tx.can_send());
                        assert_eq!(tx.on_send(now), Some(seq));
                        assert!(!tx.can_send());
                    }
                    assert_eq!(rx.on_data(seq, now), DataVerdict::OverWindow);
                    assert!(rx.ack_due(now));
                    let out = tx.on_ack(rx.make_ack(), now + 1000);
                    assert_eq!(out, AckOutcome::default());
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(tx.broken(), None);
        assert_eq!(tx.stats.probes, probes);
        assert_eq!(tx.stats.timeouts, 0);
        // Backed off to the ceiling meanwhile.
        assert_eq!(
            tx.next_deadline().unwrap() - now,
            cfg.rto_max_ns,
            "{:?}",
            tx.next_deadline()
        );
        // The window update is lost; the next probe finds the window open.
        rx.placed(2, now);
        let _lost = rx.make_ack();
        now = tx.next_deadline().unwrap();
        let TimerOutcome::Probe { seq } = tx.poll_timer(now) else {
            panic!()
        };
        assert_eq!(rx.on_data(seq, now), DataVerdict::Accept);
        let a = rx.make_ack();
        assert_eq!(a, ack(3, 2, 4));
        assert_eq!(tx.on_ack(a, now + 1000).completed, 1);
        assert!(tx.can_send());
        assert_eq!(tx.next_deadline(), None);
    }

    #[test]
    fn zero_window_probe_is_resent_when_the_window_reopens() {
        let cfg = RelConfig {
            hold_max: 1,
            ..RelConfig::default()
        };
        let mut tx = RelSender::new(cfg, RD, 0);
        assert_eq!(tx.on_send(0), Some(0));
        assert_eq!(tx.on_ack(ack(1, 0, 1), 10).completed, 1);
        let d = tx.next_deadline().unwrap();
        assert_eq!(tx.poll_timer(d), TimerOutcome::Probe { seq: 1 });
        // The probe goes out; the receiver drops it.
        assert_eq!(tx.on_send(d), Some(1));
        // The window update arrives: the probe goes again at once.
        let out = tx.on_ack(ack(1, 1, 2), d + 10);
        assert_eq!(out.retransmit, Some(SeqRange { from: 1, to: 2 }));
        assert_eq!(tx.stats.probes, 1);
    }

    #[test]
    fn backoff_then_break_after_retries_max() {
        // The least silence allowed: the expiries decide.
        let cfg = RelConfig {
            break_timeout_ns: 0,
            ..RelConfig::default()
        };
        let mut tx = RelSender::new(cfg, RD, 0);
        for _ in 0..3 {
            tx.on_send(0).unwrap();
        }
        let mut gaps = vec![];
        let mut last = 0;
        let outcome = loop {
            let d = tx.next_deadline().unwrap();
            assert_eq!(tx.poll_timer(d - 1), TimerOutcome::Nothing);
            gaps.push(d - last);
            last = d;
            match tx.poll_timer(d) {
                TimerOutcome::Retransmit(r) => assert_eq!(r, SeqRange { from: 0, to: 3 }),
                other => break other,
            }
        };
        assert_eq!(outcome, TimerOutcome::Broken(BreakReason::RetriesExhausted));
        let ms = |g: &u64| g / 1_000_000;
        assert_eq!(
            gaps.iter().map(ms).collect::<Vec<_>>(),
            [4, 8, 16, 32, 64, 128, 256, 256]
        );
        assert_eq!(last, cfg.break_bound_ns(cfg.rto_initial_ns));
        assert_eq!(tx.stats.timeouts, 7);
        assert_eq!(tx.stats.retransmitted, 21);
        assert_eq!(tx.broken(), Some(BreakReason::RetriesExhausted));
        assert_eq!(tx.poll_timer(u64::MAX), TimerOutcome::Nothing);
        assert_eq!(tx.next_deadline(), None);
        assert!(!tx.can_send() && tx.on_send(last).is_none());
        assert_eq!(tx.on_ack(ack(3, 3, 64), last), AckOutcome::default());
    }

    #[test]
    fn a_silent_peer_breaks_the_vi_after_the_break_timeout_not_before() {
        let cfg = RelConfig {
            break_timeout_ns: 1_000_000_000,
            ..RelConfig::default()
        };
        let mut tx = RelSender::new(cfg, RD, 0);
        tx.on_send(0).unwrap();
        tx.on_send(0).unwrap();
        // An answer at 100 ms that acks nothing new: the peer is there.
        let mut now = 0;
        while now < 100_000_000 {
            now = tx.next_deadline().unwrap();
            assert!(matches!(tx.poll_timer(now), TimerOutcome::Retransmit(_)));
        }
        let _ = tx.on_ack(ack(0, 0, 64), now);
        let heard = now;
        let broke = loop {
            now = tx.next_deadline().unwrap();
            match tx.poll_timer(now) {
                TimerOutcome::Retransmit(_) => {}
                TimerOutcome::Broken(_) => break now,
                other => panic!("{other:?}"),
            }
        };
        // More than retries_max expiries, and the break exactly at the end
        // of the silence allowed.
        assert!(tx.stats.timeouts >= u64::from(cfg.retries_max));
        assert_eq!(broke, heard + cfg.break_timeout_ns);
        assert!(broke - heard <= cfg.break_bound_ns(tx.rto_ns()));
    }

    #[test]
    fn a_retransmission_leaves_out_what_the_receiver_holds() {
        let mut tx = RelSender::new(RelConfig::default(), RD, 0);
        for _ in 0..5 {
            tx.on_send(0).unwrap();
        }
        // The receiver expects 0; it holds 1 and 3 whole, and fragments
        // 0..3 and 5 of message 0.
        let sack = Sack {
            ahead: 0b101,
            frags: [0b100, 0, 0, 0],
            frag_base: 3,
            closed: false,
            tail_held: false,
        };
        let _ = tx.on_ack(ack(0, 0, 64), 10);
        tx.on_sack(0, sack, 10);
        let d = tx.next_deadline().unwrap();
        assert_eq!(
            tx.poll_timer(d),
            TimerOutcome::Retransmit(SeqRange { from: 0, to: 5 })
        );
        let resent: Vec<u32> = (0..5).filter(|&s| !tx.sacked(s)).collect();
        assert_eq!(resent, [0, 2, 4]);
        assert_eq!(tx.stats.retransmitted, 3);
        let held = tx.frags_held(0).expect("fragments of 0 held");
        let missing: Vec<u16> = (0..8).filter(|&i| !held.has_frag(i)).collect();
        assert_eq!(missing, [3, 4, 6, 7]);
        // A fast retransmission fills the holes only: what comes after the
        // last fragment held may be on its way.
        let fast = Sack {
            tail_held: true,
            ..held
        };
        let holes: Vec<u16> = (0..300).filter(|&i| !fast.has_frag(i)).collect();
        assert_eq!(holes, [3, 4]);
        // With nothing held past the first missing one, a fast
        // retransmission sends from it on; a probe, the first only.
        let none_past = Sack {
            frag_base: 2,
            tail_held: true,
            ..Sack::default()
        };
        assert!(none_past.has_frag(1) && !none_past.has_frag(2) && !none_past.has_frag(400));
        let probe: Vec<u16> = (0..u16::MAX)
            .filter(|&i| !Sack::FIRST_ONLY.has_frag(i))
            .collect();
        assert_eq!(probe, [0]);
        assert_eq!(tx.frags_held(2), None);
        // A SACK of another cum_ack than the sender's is not taken; once
        // cum_ack moves, the old one no longer applies.
        tx.on_sack(1, Sack { ahead: 1, ..sack }, 20);
        assert!(tx.sacked(1) && !tx.sacked(2));
        let _ = tx.on_ack(ack(2, 2, 66), 30);
        assert!(!tx.sacked(3) && tx.frags_held(2).is_none());
    }

    #[test]
    fn a_closed_window_holds_the_sender_back_until_it_reopens() {
        let mut tx = RelSender::new(RelConfig::default(), RD, 0);
        let mut rx = RelReceiver::new(RelConfig::default(), RD, 0);
        for _ in 0..3 {
            let s = tx.on_send(0).unwrap();
            assert_eq!(rx.on_data(s, 0), DataVerdict::Accept);
        }
        // The receiver's memory for the VI is used up: 3 is refused.
        rx.close(5);
        assert!(rx.ack_due(5) && rx.window_end() == 3);
        let s = tx.on_send(6).unwrap();
        assert_eq!(rx.on_data(s, 7), DataVerdict::OverWindow);
        let a = rx.make_ack();
        let _ = tx.on_ack(a, 8);
        tx.on_sack(
            a.cum_ack,
            Sack {
                closed: true,
                ..Sack::default()
            },
            8,
        );
        assert!(!tx.can_send());
        // The timer probes with the message the receiver expects; the
        // receiver answers, the VI stays however long it lasts.
        let mut now = 8;
        for _ in 0..50 {
            now = tx.next_deadline().unwrap();
            assert_eq!(tx.poll_timer(now), TimerOutcome::Probe { seq: 3 });
            assert_eq!(rx.on_data(3, now), DataVerdict::OverWindow);
            let _ = tx.on_ack(rx.make_ack(), now);
        }
        assert_eq!(tx.broken(), None);
        assert!(now > 2 * DEFAULT_BREAK_TIMEOUT_NS);
        // Room again: the window reopens and the message goes at once.
        rx.placed(3, now);
        rx.reopen(now);
        let out = tx.on_ack(rx.make_ack(), now);
        assert_eq!(out.retransmit, Some(SeqRange { from: 3, to: 4 }));
        assert!(tx.can_send());
    }

    #[test]
    fn progress_resets_backoff_and_count() {
        let cfg = RelConfig::default();
        let mut tx = RelSender::new(cfg, RD, 0);
        for _ in 0..4 {
            tx.on_send(0).unwrap();
        }
        let mut now = 0;
        for _ in 0..(cfg.retries_max - 1) {
            now = tx.next_deadline().unwrap();
            assert!(matches!(tx.poll_timer(now), TimerOutcome::Retransmit(_)));
        }
        assert_eq!(tx.on_ack(ack(1, 1, 65), now).completed, 1);
        assert_eq!(tx.next_deadline(), Some(now + tx.rto_ns()));
        for _ in 0..(cfg.retries_max - 1) {
            now = tx.next_deadline().unwrap();
            assert!(matches!(tx.poll_timer(now), TimerOutcome::Retransmit(_)));
        }
        assert_eq!(tx.broken(), None);
    }

    #[test]
    fn karn_no_rtt_sample_from_retransmitted_messages() {
        let cfg = RelConfig::default();
        let mut tx = RelSender::new(cfg, RD, 0);
        tx.on_send(0).unwrap();
        let d = tx.next_deadline().unwrap(); // 4 ms
        assert!(matches!(tx.poll_timer(d), TimerOutcome::Retransmit(_)));
        // The ack comes 100 µs after the resend: no sample, RTO stays.
        let _ = tx.on_ack(ack(1, 1, 65), d + 100_000);
        assert_eq!(tx.rto_ns(), cfg.rto_initial_ns);
        // A message sent once gives a sample: 2 ms -> RTO 2 + 4*1 = 6 ms.
        tx.on_send(10_000_000).unwrap();
        let _ = tx.on_ack(ack(2, 2, 66), 12_000_000);
        assert_eq!(tx.rto_ns(), 6_000_000);
        // After a fast retransmit, the resent messages give no sample either.
        for _ in 0..3 {
            tx.on_send(20_000_000).unwrap();
        }
        assert_eq!(tx.on_nack(2, 20_100_000), Some(SeqRange { from: 2, to: 3 }));
        let _ = tx.on_ack(ack(5, 5, 69), 90_000_000);
        assert_eq!(tx.rto_ns(), 6_000_000);
        // Short samples go down to the floor.
        for i in 0..40u64 {
            let t = 100_000_000 + i * 1_000_000;
            let s = tx.on_send(t).unwrap();
            let _ = tx.on_ack(ack(s + 1, s + 1, s + 65), t + 50_000);
        }
        assert_eq!(tx.rto_ns(), cfg.rto_min_ns);
    }

    #[test]
    fn nack_and_three_dup_acks_retransmit_once_per_gap() {
        let mut tx = RelSender::new(RelConfig::default(), RD, 0);
        for _ in 0..10 {
            tx.on_send(0).unwrap();
        }
        // The one message missing (the receiver keeps what followed it).
        let resend = Some(SeqRange { from: 3, to: 4 });
        let nack = Ack {
            nack: true,
            ..ack(3, 3, 67)
        };
        let out = tx.on_ack(nack, 10);
        assert_eq!((out.completed, out.retransmit), (3, resend));
        assert_eq!(tx.on_ack(nack, 11).retransmit, None); // duplicated NACK
        assert_eq!(tx.on_nack(3, 12), None);
        assert_eq!(tx.on_nack(5, 12), Some(SeqRange { from: 5, to: 6 }));
        // Cycling NACK values does not make the same messages go again.
        assert_eq!(tx.on_nack(3, 13), None);
        assert_eq!(tx.on_nack(4, 13), None);
        assert_eq!(tx.stats.fast_retransmits, 2);
        assert_eq!(tx.stats.nacks_rx, 6);

        // Duplicate acks while that retransmission is under way are its
        // echoes: no new retransmission (the first of these is progress).
        for t in 20..25 {
            assert_eq!(tx.on_ack(ack(6, 6, 70), t).retransmit, None);
        }
        // Once it is all acked, three duplicate acks resend from cum_ack,
        // once.
        assert_eq!(tx.on_ack(ack(10, 10, 74), 30).completed, 4);
        for _ in 0..4 {
            tx.on_send(30).unwrap();
        }
        assert_eq!(tx.on_ack(ack(11, 11, 75), 40).completed, 1);
        assert_eq!(tx.on_ack(ack(11, 11, 75), 41).retransmit, None);
        assert_eq!(tx.on_ack(ack(11, 11, 75), 42).retransmit, None);
        let out = tx.on_ack(ack(11, 11, 75), 43);
        assert_eq!(out.retransmit, Some(SeqRange { from: 11, to: 12 }));
        assert_eq!(tx.on_ack(ack(11, 11, 75), 44).retransmit, None);
        assert_eq!(tx.stats.dup_acks, 4 + 4);
        // An ack that tells something new is not a duplicate.
        let _ = tx.on_ack(ack(11, 11, 76), 45);
        assert_eq!(tx.stats.dup_acks, 8);
        assert_eq!(tx.stats.fast_retransmits, 3);
        assert_eq!(tx.stats.retransmitted, 1 + 1 + 1);
    }

    #[test]
    fn completion_rd_on_accept_rr_only_after_placement() {
        let cfg = RelConfig::default();
        let mut rd = RelSender::new(cfg, RD, 0);
        let mut rr = RelSender::new(cfg, RR, 0);
        let mut rx = RelReceiver::new(cfg, RR, 0);
        for _ in 0..4 {
            let s = rd.on_send(0).unwrap();
            assert_eq!(rr.on_send(0), Some(s));
            assert_eq!(rx.on_data(s, 0), DataVerdict::Accept);
        }
        let a = rx.make_ack();
        assert_eq!(a, ack(4, 0, 64));
        assert_eq!(rd.on_ack(a, 10).completed, 4);
        assert_eq!(rr.on_ack(a, 10).completed, 0);
        assert_eq!((rd.in_flight(), rr.in_flight()), (0, 4));
        assert_eq!(rd.next_deadline(), None);
        // RR waits for the placement; if its ack is lost, the timer asks
        // again by resending the newest accepted message.
        rx.placed(3, 20);
        let _lost = rx.make_ack();
        let d = rr.next_deadline().unwrap();
        assert_eq!(rr.poll_timer(d), TimerOutcome::Probe { seq: 3 });
        assert_eq!(rx.on_data(3, d), DataVerdict::Duplicate);
        assert_eq!(rr.on_ack(rx.make_ack(), d + 10).completed, 3);
        rx.placed(1, d + 20);
        assert_eq!(rr.on_ack(rx.make_ack(), d + 30).completed, 1);
        assert_eq!(rr.next_deadline(), None);
        assert_eq!(rr.broken(), None);
    }

    #[test]
    fn unreliable_completes_at_once_and_counts_losses() {
        let cfg = RelConfig {
            hold_max: 2,
            ..RelConfig::default()
        };
        let mut tx = RelSender::new(cfg, Reliability::Unreliable, 0);
        for s in 0..100 {
            assert_eq!(tx.on_send(0), Some(s));
        }
        assert_eq!(tx.in_flight(), 0);
        assert_eq!(tx.next_deadline(), None);
        assert_eq!(tx.poll_timer(u64::MAX), TimerOutcome::Nothing);
        let mut rx = RelReceiver::new(cfg, Reliability::Unreliable, 0);
        assert_eq!(rx.on_data(0, 0), DataVerdict::Accept);
        assert_eq!(rx.on_data(3, 0), DataVerdict::Accept); // 1, 2 lost
        assert_eq!(rx.on_data(2, 0), DataVerdict::Duplicate);
        assert_eq!(rx.on_data(4, 0), DataVerdict::OverWindow); // holding full
        rx.placed(1, 0);
        assert_eq!(rx.on_data(5, 0), DataVerdict::Accept);
        assert_eq!(rx.ack_deadline(), None); // never acks
        let s = rx.stats;
        assert_eq!(
            (s.accepted, s.lost, s.duplicates, s.hold_full),
            (3, 2, 1, 1)
        );
    }

    #[test]
    fn hostile_inputs_never_panic() {
        let mut rng = Rng::new(99);
        for round in 0..200u64 {
            let level = [Reliability::Unreliable, RD, RR][(round % 3) as usize];
            let cfg = RelConfig {
                window: 1 + rng.below(70) as u32,
                hold_max: 1 + rng.below(70) as u32,
                retries_max: rng.below(10) as u32,
                rto_min_ns: rng.below(3),
                rto_max_ns: rng.below(1 << 20),
                rto_initial_ns: rng.next(),
                ack_delay_ns: rng.next() >> rng.below(64),
                break_timeout_ns: rng.next() >> rng.below(64),
            };
            let first = rng.next() as u32;
            let mut tx = RelSender::new(cfg, level, first);
            let mut rx = RelReceiver::new(cfg, level, first);
            let near = |rng: &mut Rng, base: u32| {
                if rng.below(4) == 0 {
                    rng.next() as u32
                } else {
                    base.wrapping_add(rng.below(140) as u32).wrapping_sub(70)
                }
            };
            for _ in 0..2000 {
                let now = if rng.below(50) == 0 {
                    u64::MAX - rng.below(3)
                } else {
                    rng.below(1 << 40)
                };
                match rng.below(10) {
                    0 | 1 => {
                        let _ = tx.on_send(now);
                    }
                    2 => {
                        let a = Ack {
                            cum_ack: near(&mut rng, tx.cum_ack()),
                            cum_placed: near(&mut rng, tx.cum_ack()),
                            window_end: near(&mut rng, tx.next_seq()),
                            nack: rng.below(2) == 0,
                        };
                        let out = tx.on_ack(a, now);
                        if let Some(r) = out.retransmit {
                            assert!(r.len() <= tx.config().window);
                        }
                    }
                    3 => {
                        let e = near(&mut rng, tx.cum_ack());
                        let _ = tx.on_nack(e, now);
                    }
                    4 => {
                        let _ = tx.poll_timer(now);
                    }
                    5 => {
                        let s = near(&mut rng, rx.expected());
                        let _ = rx.on_data(s, now);
                    }
                    6 => rx.placed(rng.next() as u32 >> rng.below(33).min(31), now),
                    8 => {
                        let k = Sack {
                            ahead: rng.next(),
                            frags: [rng.next(), rng.next(), 0, rng.next()],
                            frag_base: rng.next() as u16,
                            closed: rng.below(2) == 0,
                            tail_held: rng.below(2) == 0,
                        };
                        let at = if rng.below(2) == 0 {
                            tx.cum_ack()
                        } else {
                            rng.next() as u32
                        };
                        tx.on_sack(at, k, now);
                        let _ = (tx.sacked(rng.next() as u32), tx.frags_held(at));
                        let _ = k.has_frag(rng.next() as u16);
                    }
                    9 => {
                        if rng.below(2) == 0 {
                            rx.close(now);
                        } else {
                            rx.reopen(now);
                        }
                    }
                    _ => {
                        let a = rx.make_ack();
                        let _ = tx.on_ack(a, now);
                    }
                }
                assert!(tx.in_flight() <= tx.config().window);
                assert!(rx.held() <= cfg.normalized().hold_max);
                assert!(rx.window_end().wrapping_sub(rx.expected()) <= MAX_WINDOW);
                let _ = (tx.next_deadline(), rx.ack_due(now), tx.can_send());
            }
        }
    }

    // ---------------------------------------------------------------
    // Simulation: a sender and a receiver joined by a lossy channel.
    // ---------------------------------------------------------------

    #[derive(Clone, Copy)]
    struct Link {
        loss_ppm: u32,
        dup_ppm: u32,
        reorder_ppm: u32,
        delay_ns: u64,
        /// A reordered frame is late by up to this.
        reorder_max_ns: u64,
    }

    #[derive(Clone, Copy)]
    enum App {
        /// Buffers always posted: every message is placed on arrival.
        Fast,
        /// Posts one buffer at a time, in fast and slow phases, and stalls
        /// for `stall_ns` at `stall_at_ns`.
        Random { stall_at_ns: u64, stall_ns: u64 },
    }

    #[derive(Clone, Copy)]
    struct SimCfg {
        rel: RelConfig,
        level: Reliability,
        messages: u64,
        first_seq: u32,
        link: Link,
        /// Serialization time of one data frame (4 KiB).
        ser_ns: u64,
        app: App,
        /// From then on, every frame is lost, both ways.
        silent_from_ns: Option<u64>,
        seed: u64,
    }

    #[derive(Debug)]
    struct SimResult {
        /// When the last send completed.
        done_ns: u64,
        broken: Option<(u64, BreakReason, u64)>,
        tx: RelStats,
        rx: RelStats,
    }

    #[derive(Clone, Copy, Debug)]
    enum Ev {
        Data(u32),
        Ack(Ack),
    }

    struct Pending {
        at: u64,
        id: u64,
        ev: Ev,
    }

    impl PartialEq for Pending {
        fn eq(&self, o: &Self) -> bool {
            (self.at, self.id) == (o.at, o.id)
        }
    }
    impl Eq for Pending {}
    impl PartialOrd for Pending {
        fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
            Some(self.cmp(o))
        }
    }
    impl Ord for Pending {
        fn cmp(&self, o: &Self) -> Ordering {
            (o.at, o.id).cmp(&(self.at, self.id)) // earliest first
        }
    }

    struct Channel {
        link: Link,
        silent_from_ns: Option<u64>,
        heap: BinaryHeap<Pending>,
        ids: u64,
    }

    impl Channel {
        /// A frame put on the wire at `now`, done serializing at `end`.
        fn send(&mut self, rng: &mut Rng, ev: Ev, now: u64, end: u64) {
            if self.silent_from_ns.is_some_and(|s| now >= s) || rng.chance_ppm(self.link.loss_ppm) {
                return;
            }
            let copies = if rng.chance_ppm(self.link.dup_ppm) {
                2
            } else {
                1
            };
            for _ in 0..copies {
                let late = if rng.chance_ppm(self.link.reorder_ppm) {
                    rng.below(self.link.reorder_max_ns)
                } else {
                    0
                };
                self.ids += 1;
                self.heap.push(Pending {
                    at: end + self.link.delay_ns + late,
                    id: self.ids,
                    ev,
                });
            }
        }
    }

    fn run(c: SimCfg) -> SimResult {
        const POSTED_MAX: u64 = 16;
        const TIME_LIMIT_NS: u64 = 120_000_000_000;
        let cfg = c.rel;
        let n = c.messages;
        let first = c.first_seq;
        let mut rng = Rng::new(c.seed);
        let mut tx = RelSender::new(cfg, c.level, first);
        let mut rx = RelReceiver::new(cfg, c.level, first);
        let mut ch = Channel {
            link: c.link,
            silent_from_ns: c.silent_from_ns,
            heap: BinaryHeap::new(),
            ids: 0,
        };
        let mut now = 0u64;
        // Sending side: messages handed to on_send, the go-back-N pointer,
        // a lone message to resend, the link, completions.
        let (mut produced, mut tx_ptr, mut resend_one) = (0u64, first, None::<u32>);
        let (mut link_free, mut completed, mut done_ns) = (0u64, 0u64, 0u64);
        // Receiving side: accepted, placed, held, buffers posted.
        let (mut accepted, mut placed, mut held) = (0u64, 0u64, 0u64);
        let mut posted = match c.app {
            App::Fast => u64::MAX,
            App::Random { .. } => 0,
        };
        let (mut app_next, mut slow_phase, mut phase_end) = (0u64, false, 0u64);
        let mut broken = None;

        while completed < n || placed < n {
            let mut t = u64::MAX;
            if let Some(p) = ch.heap.peek() {
                t = t.min(p.at);
            }
            t = t.min(tx.next_deadline().unwrap_or(u64::MAX));
            t = t.min(rx.ack_deadline().unwrap_or(u64::MAX));
            if matches!(c.app, App::Random { .. }) && placed < n {
                t = t.min(app_next);
            }
            let wants_link =
                resend_one.is_some() || tx_ptr != tx.next_seq() || (produced < n && tx.can_send());
            if wants_link {
                t = t.min(link_free);
            }
            assert!(
                t != u64::MAX,
                "deadlock at {now} ns: {:?}",
                (completed, placed)
            );
            now = now.max(t);
            assert!(
                now < TIME_LIMIT_NS,
                "no end: {:?}",
                (completed, placed, tx.stats)
            );

            while ch.heap.peek().is_some_and(|p| p.at <= now) {
                let Some(p) = ch.heap.pop() else { break };
                match p.ev {
                    Ev::Data(seq) => {
                        if rx.on_data(seq, now) == DataVerdict::Accept {
                            // In order, exactly once.
                            assert_eq!(seq, first.wrapping_add(accepted as u32));
                            accepted += 1;
                            if posted > 0 {
                                posted -= 1;
                                rx.placed(1, now);
                                placed += 1;
                            } else {
                                held += 1;
                            }
                            assert_eq!(u64::from(rx.held()), held);
                        }
                    }
                    Ev::Ack(a) => {
                        let out = tx.on_ack(a, now);
                        completed += u64::from(out.completed);
                        assert!(completed <= produced);
                        match c.level {
                            Reliability::ReliableReception => assert!(completed <= placed),
                            _ => assert!(completed <= accepted),
                        }
                        if completed == n && out.completed > 0 {
                            done_ns = now;
                        }
                        if let Some(r) = out.retransmit {
                            tx_ptr = r.from;
                        }
                    }
                }
            }

            match tx.poll_timer(now) {
                TimerOutcome::Nothing => {}
                TimerOutcome::Retransmit(r) => tx_ptr = r.from,
                TimerOutcome::Probe { seq } => {
                    if seq != tx.next_seq() {
                        resend_one = Some(seq);
                    }
                }
                TimerOutcome::Broken(why) => {
                    broken = Some((now, why, tx.rto_ns()));
                    break;
                }
            }

            if let App::Random {
                stall_at_ns,
                stall_ns,
            } = c.app
            {
                if now >= app_next && placed < n {
                    if held > 0 {
                        held -= 1;
                        rx.placed(1, now);
                        placed += 1;
                    } else if posted < POSTED_MAX {
                        posted += 1;
                    }
                    if now >= phase_end {
                        slow_phase = !slow_phase;
                        phase_end = now + 500_000 + rng.below(4_500_000);
                    }
                    let mean = if slow_phase { 30_000 } else { 1_000 };
                    app_next = now + 1 + rng.below(2 * mean);
                    if (stall_at_ns..stall_at_ns + stall_ns).contains(&app_next) {
                        app_next = stall_at_ns + stall_ns;
                    }
                }
            }

            if rx.ack_due(now) {
                let a = rx.make_ack();
                ch.send(&mut rng, Ev::Ack(a), now, now);
            }

            if now >= link_free {
                if seq_lt(tx_ptr, tx.cum_ack()) {
                    tx_ptr = tx.cum_ack();
                }
                let seq = if let Some(s) = resend_one.take() {
                    Some(s)
                } else if tx_ptr != tx.next_seq() {
                    tx_ptr = tx_ptr.wrapping_add(1);
                    Some(tx_ptr.wrapping_sub(1))
                } else if produced < n && tx.can_send() {
                    let s = tx.on_send(now);
                    assert!(s.is_some());
                    produced += 1;
                    tx_ptr = tx.next_seq();
                    s
                } else {
                    None
                };
                if let Some(s) = seq {
                    link_free = now + c.ser_ns;
                    ch.send(&mut rng, Ev::Data(s), now, link_free);
                }
            }
        }
        if broken.is_none() {
            assert_eq!((completed, accepted, placed, produced), (n, n, n, n));
            assert_eq!(tx.in_flight(), 0);
        }
        SimResult {
            done_ns,
            broken,
            tx: tx.stats,
            rx: rx.stats,
        }
    }

    /// 4 KiB at 10 Gb/s, 20 µs one way.
    const SER_NS: u64 = 3_300;
    const DELAY_NS: u64 = 20_000;

    fn lossy(level: Reliability, seed: u64) -> SimCfg {
        SimCfg {
            rel: RelConfig::default(),
            level,
            messages: 100_000,
            first_seq: u32::MAX - 30_000,
            link: Link {
                loss_ppm: 50_000,
                dup_ppm: 10_000,
                reorder_ppm: 20_000,
                delay_ns: DELAY_NS,
                reorder_max_ns: 50_000,
            },
            ser_ns: SER_NS,
            // A stall longer than the worst break bound (2.048 s).
            app: App::Random {
                stall_at_ns: 200_000_000,
                stall_ns: 3_000_000_000,
            },
            silent_from_ns: None,
            seed,
        }
    }

    fn check_lossy(level: Reliability) {
        let r = run(lossy(level, 7));
        assert!(r.broken.is_none(), "{r:?}");
        let (t, x) = (r.tx, r.rx);
        // Every path was taken.
        assert!(
            t.timeouts > 0 && t.fast_retransmits > 0 && t.probes > 0,
            "{t:?}"
        );
        assert!(
            t.dup_acks > 0 && t.stale_acks > 0 && t.bogus_acks == 0,
            "{t:?}"
        );
        assert!(x.duplicates > 0 && x.out_of_order > 0, "{x:?}");
        // ReliableDelivery fills the receiver's holding and probes past
        // its closed window; ReliableReception keeps at most `window`
        // messages unplaced (the same as `hold_max` here), so it never
        // overruns and probes for placements instead.
        if level == RD {
            assert!(x.over_window > 0, "{x:?}");
        }
        assert!(x.nacks_tx > 0 && t.nacks_rx > 0);
        assert_eq!(x.accepted, 100_000);
        eprintln!(
            "{level:?} 5% loss: {:.2} s simulated, tx {t:?}, rx {x:?}",
            r.done_ns as f64 / 1e9
        );
    }

    #[test]
    fn sim_reliable_delivery_under_loss_duplication_reordering() {
        check_lossy(RD);
    }

    #[test]
    fn sim_reliable_reception_under_loss_duplication_reordering() {
        check_lossy(RR);
    }

    fn clean(level: Reliability, loss_ppm: u32, seed: u64) -> SimCfg {
        SimCfg {
            rel: RelConfig::default(),
            level,
            messages: 100_000,
            first_seq: 1,
            link: Link {
                loss_ppm,
                dup_ppm: 0,
                reorder_ppm: 0,
                delay_ns: DELAY_NS,
                reorder_max_ns: 0,
            },
            ser_ns: SER_NS,
            app: App::Fast,
            silent_from_ns: None,
            seed,
        }
    }

    #[test]
    fn sim_throughput_at_one_percent_loss_is_at_least_half() {
        for level in [RD, RR] {
            let base = run(clean(level, 0, 1));
            let lossy = run(clean(level, 10_000, 1));
            let rate = |r: &SimResult| 100_000.0 * 1e9 / r.done_ns as f64;
            let (b, l) = (rate(&base), rate(&lossy));
            eprintln!(
                "{level:?}: {b:.0} msg/s without loss, {l:.0} msg/s at 1% loss \
                 ({:.2}x); at 1%: tx {:?}, rx {:?}",
                l / b,
                lossy.tx,
                lossy.rx
            );
            assert_eq!(base.tx.retransmitted, 0);
            // Link-bound without loss.
            assert!(b > 0.95 * 1e9 / SER_NS as f64, "{b}");
            assert!(l >= 0.5 * b, "{l} vs {b}");
        }
    }

    #[test]
    fn sim_silent_peer_breaks_within_the_bound() {
        for (level, seed) in [(RD, 3), (RR, 4)] {
            let silent = 50_000_000;
            let c = SimCfg {
                silent_from_ns: Some(silent),
                ..clean(level, 10_000, seed)
            };
            let r = run(c);
            let (at, why, rto) = r.broken.expect("breaks");
            assert_eq!(why, BreakReason::RetriesExhausted);
            let cfg = RelConfig::default();
            // The last progress is at most one way (plus a frame) after
            // the silence begins.
            let last = silent + DELAY_NS + SER_NS;
            assert!(at <= last + cfg.break_bound_ns(rto), "{at} {rto}");
            // Not before the silence allowed, and at its end.
            assert!(at <= last + cfg.break_timeout_ns, "{at}");
            assert!(at + 1_000_000 >= silent + cfg.break_timeout_ns, "{at}");
            eprintln!(
                "{level:?}: silent at {} ms, broken at {} ms (RTO {} µs)",
                silent / 1_000_000,
                at / 1_000_000,
                rto / 1000
            );
        }
    }
}
