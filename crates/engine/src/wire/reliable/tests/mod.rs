//! The reliability state machines' tests, down to seeded lossy links.

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

mod sim;
