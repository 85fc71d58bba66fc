//! A sender and a receiver joined by a seeded lossy, duplicating and
//! reordering channel: delivery, throughput and breaking under loss.

use super::*;

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
