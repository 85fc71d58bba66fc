//! Forged and replayed VIA frames on the wire. Two engines on UDP
//! loopback carry an honest VI pair through a relay (two plain sockets
//! between them: each engine takes the relay for its peer), which sees
//! every frame, learns the VIs' ids and tokens, and can send from the
//! address each engine knows as its peer's; a third plain socket forges
//! from elsewhere. Acks, closes and data with a wrong token, to an unknown
//! VI, or with the right token from the wrong address are dropped and
//! counted (`wire_drop_forged_token`, `wire_drop_unknown_endpoint`); old
//! data and acks replayed from the peer's own address are recognised
//! (`duplicates`; stale acks ignored), a replayed open is answered again
//! without a second VI; and the honest stream never sees an error or a
//! message twice.

mod vis;

use std::net::UdpSocket;
use std::time::Duration;

use unet_abi::*;
use unet_control::ViParams;
use unet_engine::invoker::{connect_vis, LocalClient};
use unet_engine::wire::frame::VI_DATA_CHANNEL;
use unet_engine::wire::reliable::Ack;
use unet_engine::wire::{Body, Data, Frame, ViAck, ViClose, DATA_FLAG_VI};
use unet_engine::Dispatcher;
use vis::*;

fn emit(body: Body<'_>) -> Vec<u8> {
    let f = Frame {
        src_engine: 0x0bad_5eed,
        body,
    };
    let mut b = vec![0u8; f.len()];
    f.emit(&mut b).unwrap();
    b
}

/// A VI's message `seq` as one Data frame.
fn vi_data(dst_vi: u32, token: u64, seq: u32, payload: &[u8]) -> Vec<u8> {
    vi_data_acked(dst_vi, token, seq, payload, None)
}

/// A VI's message `seq` as one Data frame, carrying `ack` along.
fn vi_data_acked(dst_vi: u32, token: u64, seq: u32, payload: &[u8], ack: Option<Ack>) -> Vec<u8> {
    emit(Body::Data(Data {
        dst_endpoint: dst_vi,
        dst_channel: VI_DATA_CHANNEL,
        flags: DATA_FLAG_VI,
        token,
        msg_id: seq,
        frag_index: 0,
        frag_count: 1,
        msg_len: payload.len() as u32,
        frag_offset: 0,
        payload,
        ack,
    }))
}

fn vi_ack(dst_vi: u32, token: u64, cum_ack: u32, cum_placed: u32, window_end: u32) -> Vec<u8> {
    emit(Body::ViAck(ViAck {
        dst_vi,
        token,
        cum_ack,
        cum_placed,
        window_end,
        nack: false,
        sack: None,
    }))
}

fn vi_close(dst_vi: u32, token: u64) -> Vec<u8> {
    emit(Body::ViClose(ViClose {
        dst_vi,
        token,
        reason: ViError::Broken as u32,
    }))
}

/// An ack of every message before `next`, all placed, window open.
fn ack_all(next: u32) -> Ack {
    Ack {
        cum_ack: next,
        cum_placed: next,
        window_end: next + 64,
        nack: false,
    }
}

fn count(e: &Dispatcher, c: EngineCounter) -> u64 {
    e.counters().engine_value(c)
}

/// The two engines, the relay, a forger elsewhere, and the honest pair
/// (sender on A, receiver on B) with what the relay learnt of it.
struct Net {
    a: Dispatcher,
    b: Dispatcher,
    relay: Relay,
    forger: UdpSocket,
    honest: Honest,
    _ca: LocalClient,
    cb: LocalClient,
    /// The VIs' ids and the tokens frames to each must carry.
    vi_a: u32,
    tok_a: u64,
    vi_b: u32,
    tok_b: u64,
    tag: u64,
}

impl Net {
    fn new(level: Reliability) -> Net {
        let (mut a, mut b, mut relay, mut ca, mut cb) = two_engines();
        let tx_mem = ca.register_memory(&mut a, SLOT * SLOTS as usize).unwrap();
        let rx_mem = cb.register_memory(&mut b, SLOT * SLOTS as usize).unwrap();
        let tag = 7;
        let to = relay.to_a.local_addr().unwrap();
        let (tx, rx) = connect_vis(
            (&mut a, &mut ca),
            (&mut b, &mut cb),
            to,
            tag,
            ViParams {
                reliability: level,
                strict_rnr: false,
                break_timeout_ms: 0,
            },
            &mut || relay.pump(),
        )
        .unwrap();
        let open = frames(&relay.a_to_b)
            .find_map(|f| match f.body {
                Body::ViOpen(o) => Some(o),
                _ => None,
            })
            .expect("the relay saw the open");
        let accept = frames(&relay.b_to_a)
            .find_map(|f| match f.body {
                Body::ViAccept(a) => Some(a),
                _ => None,
            })
            .expect("the relay saw the accept");
        assert_eq!((open.src_vi, accept.src_vi), (tx.id(), rx.id()));
        Net {
            a,
            b,
            relay,
            forger: socket(),
            honest: Honest::new(tx, rx, tx_mem, rx_mem),
            _ca: ca,
            cb,
            vi_a: open.src_vi,
            tok_a: open.src_token,
            vi_b: accept.src_vi,
            tok_b: accept.accept_token,
            tag,
        }
    }

    /// Stream `n` more honest messages, every one checked; then let the
    /// acks settle.
    fn stream(&mut self, n: u64) {
        let target = self.honest.posted + n;
        let honest = &mut self.honest;
        let relay = &mut self.relay;
        step_until(
            &mut self.a,
            &mut self.b,
            &mut || relay.pump(),
            "the honest stream",
            |_, _| {
                if honest.posted < target {
                    honest.post((target - honest.posted).min(4));
                }
                honest.take() && honest.posted == target
            },
        );
        self.quiet();
    }

    /// Step both engines (the relay moving) for a while.
    fn quiet(&mut self) {
        self.quiet_for(30);
    }

    /// Step both engines (the relay moving) for `ms` milliseconds. While
    /// the relay holds acks, briefly: the sender's retransmission timer
    /// runs, and breaks the VI after 8 expiries (255 ms at the RTO's
    /// floor).
    fn quiet_for(&mut self, ms: u64) {
        let relay = &mut self.relay;
        step_for(
            &mut self.a,
            &mut self.b,
            &mut || relay.pump(),
            Duration::from_millis(ms),
        );
    }

    /// Step until `done(a, b)`, the relay moving.
    fn until(&mut self, what: &str, done: impl FnMut(&Dispatcher, &Dispatcher) -> bool) {
        let relay = &mut self.relay;
        step_until(&mut self.a, &mut self.b, &mut || relay.pump(), what, done);
    }

    /// Step until `done(self)` (a condition on the VIs), the relay
    /// moving; then a while more.
    fn until_vi(&mut self, what: &str, mut done: impl FnMut(&mut Net) -> bool) {
        let start = std::time::Instant::now();
        while !done(self) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "waited 10 s of steps for {what}"
            );
            self.a.step();
            self.relay.pump();
            self.b.step();
            self.relay.pump();
        }
    }

    /// Run `f` while two honest messages are at B and their sends wait
    /// for acks the relay holds: an ack taken that should not be would
    /// complete them. Then let the acks go, and check the sends complete
    /// (only) then.
    fn outstanding(&mut self, f: impl FnOnce(&mut Net)) {
        self.relay.hold = true;
        let target = self.honest.posted + 2;
        self.honest.post(2);
        self.until_vi("the messages, their acks held", |n| {
            n.honest.take();
            n.honest.got == target
        });
        assert_eq!(self.honest.sent, target - 2, "sends completed, no ack");
        f(self);
        assert_eq!(self.honest.sent, target - 2, "sends completed, no ack");
        self.relay.hold = false;
        self.until_vi("the acks let go", |n| {
            n.honest.take();
            n.honest.sent == target
        });
    }

    /// Send `datagrams` to engine A (`to_a`) or B from `from`.
    fn send(&self, from: Sender, to_a: bool, datagrams: &[Vec<u8>]) {
        let at = if to_a {
            self.relay.at_a
        } else {
            self.relay.at_b
        };
        let sock = match (to_a, from) {
            (true, Sender::Peer) => &self.relay.to_a,
            (false, Sender::Peer) => &self.relay.to_b,
            (_, Sender::Forger) => &self.forger,
        };
        for d in datagrams {
            sock.send_to(d, at).unwrap();
        }
    }

    /// [`Net::send`], then step until that engine's counter `c` grew by
    /// `n` (and a while more); checks it grew by exactly `n`, and that
    /// the honest pair is clean.
    fn inject(
        &mut self,
        from: Sender,
        to_a: bool,
        datagrams: &[Vec<u8>],
        c: EngineCounter,
        n: u64,
    ) {
        let of = |a: &Dispatcher, b: &Dispatcher| count(if to_a { a } else { b }, c);
        let before = of(&self.a, &self.b);
        self.send(from, to_a, datagrams);
        self.until(c.name(), |a, b| of(a, b) >= before + n);
        self.quiet_for(10);
        assert_eq!(of(&self.a, &self.b) - before, n, "{}", c.name());
        self.honest.take();
        self.honest.check_clean();
    }
}

/// Where an injected datagram comes from.
#[derive(Clone, Copy)]
enum Sender {
    /// The relay's socket: the address the engine knows as its VI's peer.
    Peer,
    /// A socket of its own.
    Forger,
}

/// The forgeries, for VIs `n` knows, B expecting message `next`: what
/// each is, who sends it, to A or B, the datagram, the counter it must
/// land in.
fn forgeries(n: &Net, next: u32) -> Vec<(&'static str, Sender, bool, Vec<u8>, EngineCounter)> {
    use EngineCounter::{WireDropForgedToken as Forged, WireDropUnknownEndpoint as Unknown};
    use Sender::{Forger, Peer};
    let (vi_a, tok_a, vi_b, tok_b) = (n.vi_a, n.tok_a, n.vi_b, n.tok_b);
    vec![
        (
            "data, right token, another address",
            Forger,
            false,
            vi_data(vi_b, tok_b, next, b"forged"),
            Forged,
        ),
        (
            "data, wrong token",
            Peer,
            false,
            vi_data(vi_b, tok_b ^ 1, next, b"forged"),
            Forged,
        ),
        (
            "data, the other direction's token",
            Peer,
            false,
            vi_data(vi_b, tok_a, next, b"forged"),
            Forged,
        ),
        (
            "data, unknown VI",
            Peer,
            false,
            vi_data(vi_b.wrapping_add(1000), tok_b, next, b"forged"),
            Unknown,
        ),
        (
            "data, VI 0",
            Forger,
            false,
            vi_data(0, tok_b, next, b"forged"),
            Unknown,
        ),
        (
            "ack, right token, another address",
            Forger,
            true,
            vi_ack(vi_a, tok_a, next, next, next + 64),
            Forged,
        ),
        (
            "ack, wrong token",
            Peer,
            true,
            vi_ack(vi_a, !tok_a, next, next, next + 64),
            Forged,
        ),
        (
            "data carrying an ack, right token, another address",
            Forger,
            true,
            vi_data_acked(vi_a, tok_a, 0, b"forged", Some(ack_all(next))),
            Forged,
        ),
        (
            "data carrying an ack, wrong token",
            Peer,
            true,
            vi_data_acked(vi_a, tok_a ^ 2, 0, b"forged", Some(ack_all(next))),
            Forged,
        ),
        (
            "ack, unknown VI",
            Peer,
            true,
            vi_ack(vi_a ^ 0x8000_0000, tok_a, next, next, next + 64),
            Unknown,
        ),
        (
            "close, right token, another address",
            Forger,
            false,
            vi_close(vi_b, tok_b),
            Forged,
        ),
        (
            "close, wrong token",
            Peer,
            false,
            vi_close(vi_b, tok_b.wrapping_add(1)),
            Forged,
        ),
        (
            "close, unknown VI",
            Peer,
            false,
            vi_close(vi_b + 1, tok_b),
            Unknown,
        ),
        (
            "close to A, right token, another address",
            Forger,
            true,
            vi_close(vi_a, tok_a),
            Forged,
        ),
        (
            "close to A, wrong token",
            Peer,
            true,
            vi_close(vi_a, 0),
            Forged,
        ),
    ]
}

/// Acks, closes and data with the wrong token, to an unknown VI, or with
/// the right token from another address, each sent twice while two sends
/// wait for their acks: each dropped and counted by reason, none acted on
/// (no message delivered, no ack taken, no send completed, no VI broken);
/// the honest stream carries on untouched.
#[test]
fn forged_vi_frames_are_dropped_and_counted() {
    for level in [
        Reliability::ReliableDelivery,
        Reliability::ReliableReception,
    ] {
        let mut n = Net::new(level);
        n.stream(100);
        for k in 0..forgeries(&n, 0).len() {
            n.outstanding(|n| {
                // B expects the next message.
                let next = n.honest.posted as u32;
                let (what, from, to_a, d, c) = forgeries(n, next).swap_remove(k);
                let rx = n.honest.rx.counter(ViCounter::RxMsgs);
                let acks = n.honest.tx.counter(ViCounter::AcksRx);
                let (sent, got) = (n.honest.sent, n.honest.got);
                n.inject(from, to_a, &[d.clone(), d], c, 2);
                n.honest.check_clean();
                assert_eq!(
                    n.honest.rx.counter(ViCounter::RxMsgs),
                    rx,
                    "{what}: delivered"
                );
                assert_eq!(
                    n.honest.tx.counter(ViCounter::AcksRx),
                    acks,
                    "{what}: an ack taken"
                );
                assert_eq!((n.honest.sent, n.honest.got), (sent, got), "{what}");
            });
        }
        n.stream(100);
        assert_eq!(n.honest.got, 100 + 2 * forgeries(&n, 0).len() as u64 + 100);
    }
}

/// The same forgeries against an unreliable VI (no acks, no retransmission
/// to hide behind): each dropped and counted by reason at the wire, no
/// message delivered, no VI broken, the honest stream untouched.
#[test]
fn forged_frames_to_an_unreliable_vi_are_dropped_and_counted() {
    let mut n = Net::new(Reliability::Unreliable);
    n.stream(50);
    for k in 0..forgeries(&n, 0).len() {
        let next = n.honest.posted as u32;
        let (what, from, to_a, d, c) = forgeries(&n, next).swap_remove(k);
        let rx = n.honest.rx.counter(ViCounter::RxMsgs);
        n.inject(from, to_a, &[d.clone(), d], c, 2);
        assert_eq!(
            n.honest.rx.counter(ViCounter::RxMsgs),
            rx,
            "{what}: delivered"
        );
        assert_eq!(n.honest.rx.counter(ViCounter::Lost), 0, "{what}");
    }
    n.stream(50);
    assert_eq!(n.honest.got, 100);
    n.honest.check_clean();
}

/// Old data, acks and set-up frames replayed, exact copies from the
/// peer's own address: data is recognised as duplicates (counted, not
/// delivered again), acks as stale (taken, not acted on), a replayed
/// open is answered again without a second VI (the second accept is
/// dropped at the opener as forged), a replayed accept likewise; the
/// honest stream sees every message once.
#[test]
fn replayed_vi_frames_change_nothing() {
    for level in [
        Reliability::ReliableDelivery,
        Reliability::ReliableReception,
    ] {
        let mut n = Net::new(level);
        n.stream(200);
        // Single-fragment messages the relay carried, one copy each.
        let mut seqs = std::collections::BTreeSet::new();
        let mut data = Vec::new();
        for d in &n.relay.a_to_b {
            if let Ok(Frame {
                body: Body::Data(f),
                ..
            }) = Frame::parse(d)
            {
                if f.frag_count == 1 && seqs.insert(f.msg_id) {
                    data.push(d.clone());
                }
            }
        }
        assert!(data.len() > 50, "{} whole messages to replay", data.len());
        let acks: Vec<Vec<u8>> = n
            .relay
            .b_to_a
            .iter()
            .filter(|d| {
                matches!(
                    Frame::parse(d),
                    Ok(Frame {
                        body: Body::ViAck(_),
                        ..
                    })
                )
            })
            .cloned()
            .collect();
        assert!(!acks.is_empty());
        let open = n
            .relay
            .a_to_b
            .iter()
            .find(|d| {
                matches!(
                    Frame::parse(d),
                    Ok(Frame {
                        body: Body::ViOpen(_),
                        ..
                    })
                )
            })
            .cloned()
            .unwrap();
        let accept = n
            .relay
            .b_to_a
            .iter()
            .find(|d| {
                matches!(
                    Frame::parse(d),
                    Ok(Frame {
                        body: Body::ViAccept(_),
                        ..
                    })
                )
            })
            .cloned()
            .unwrap();
        let rx = |n: &Net| n.honest.rx.counter(ViCounter::RxMsgs);
        let (got, dups) = (rx(&n), n.honest.rx.counter(ViCounter::Duplicates));
        // Data: each a duplicate, none delivered.
        let k = data.len() as u64;
        n.send(Sender::Peer, false, &data);
        let dup = |n: &Net| n.honest.rx.counter(ViCounter::Duplicates);
        n.until_vi("the duplicates", |n| dup(n) >= dups + k);
        n.quiet();
        n.honest.take();
        assert_eq!(dup(&n) - dups, k, "each replayed message a duplicate");
        assert_eq!(rx(&n), got, "a replayed message was delivered again");
        assert!(n.honest.rx.recv_done().is_none());
        // Acks, while two sends wait for theirs: taken, none acted on.
        n.outstanding(|n| {
            let acked = |n: &Net| n.honest.tx.counter(ViCounter::AcksRx);
            let stale = |n: &Net| n.honest.tx.counter(ViCounter::StaleAcks);
            let (taken, stale_before) = (acked(n), stale(n));
            let k = acks.len() as u64;
            n.send(Sender::Peer, true, &acks);
            n.until_vi("the acks", |n| acked(n) >= taken + k);
            n.quiet_for(10);
            assert_eq!(acked(n) - taken, k);
            // Older than what the sender took: counted as stale (the
            // newest copies may equal it, duplicates then).
            let s = stale(n) - stale_before;
            assert!(s >= 1 && s <= k, "{s} of {k} replayed acks counted stale");
            n.honest.take();
            n.honest.check_clean();
        });
        // The open: answered again (the answer, carried to A by the relay,
        // dropped there as forged: its open was answered already), no
        // second request, no second VI.
        let forged = count(&n.a, EngineCounter::WireDropForgedToken);
        let connected = count(&n.b, EngineCounter::ViConnected);
        n.send(Sender::Peer, false, &[open]);
        n.until("the accept again", |a, _| {
            count(a, EngineCounter::WireDropForgedToken) > forged
        });
        n.quiet();
        assert_eq!(count(&n.a, EngineCounter::WireDropForgedToken), forged + 1);
        assert_eq!(count(&n.b, EngineCounter::ViConnected), connected);
        assert_eq!(
            n.cb.take_vi_request(n.tag).unwrap(),
            None,
            "a second connection request"
        );
        // The accept: dropped as forged.
        n.inject(
            Sender::Peer,
            true,
            &[accept],
            EngineCounter::WireDropForgedToken,
            1,
        );
        n.stream(100);
        assert_eq!(n.honest.got, 302);
        assert_eq!(rx(&n), 302);
        // Later duplicates are the stream's own retransmissions' (the
        // relay's socket buffers overflow now and then).
        let later = n.honest.rx.counter(ViCounter::Duplicates) - dups - data.len() as u64;
        assert!(
            later <= n.honest.tx.counter(ViCounter::Retransmits),
            "{later} duplicates more than retransmissions: {:?}",
            n.honest.tx.nonzero_counters()
        );
    }
}

/// Send, from the peer's own address and with the right token, three
/// acks no receiver could have sent (acknowledging messages never sent,
/// placed beyond accepted, a window wider than any), and step until the
/// sender took them; checks none was acted on. Returns the sender's
/// `bogus_acks` before them.
fn impossible_acks(n: &mut Net) -> u64 {
    n.stream(50);
    let bogus = n.honest.tx.counter(ViCounter::BogusAcks);
    n.outstanding(|n| {
        let next = n.honest.posted as u32;
        let first = next - 2;
        let (vi, tok) = (n.vi_a, n.tok_a);
        let acks = [
            vi_ack(vi, tok, next + 1000, first, next + 1064),
            vi_ack(vi, tok, next, next + 1, next + 64),
            vi_ack(vi, tok, next, next, next + (1 << 16) + 1),
        ];
        let acked = |n: &Net| n.honest.tx.counter(ViCounter::AcksRx);
        let taken = acked(n);
        n.send(Sender::Peer, true, &acks);
        n.until_vi("the acks", |n| acked(n) >= taken + 3);
        n.quiet_for(10);
        assert_eq!(acked(n) - taken, 3);
        n.honest.take();
        n.honest.check_clean();
    });
    // The sender still sends, and what it sends is acknowledged.
    n.stream(50);
    assert_eq!(n.honest.got, 102);
    bogus
}

/// Impossible acks from the peer's own address are ignored: nothing
/// completes, nothing breaks, the stream carries on.
#[test]
fn impossible_acks_are_ignored() {
    for level in [
        Reliability::ReliableDelivery,
        Reliability::ReliableReception,
    ] {
        impossible_acks(&mut Net::new(level));
    }
}

/// ... and counted in the VI's `bogus_acks` ("acknowledgements ignored:
/// naming messages never sent"), one each.
#[test]
fn impossible_acks_are_counted() {
    for level in [
        Reliability::ReliableDelivery,
        Reliability::ReliableReception,
    ] {
        let mut n = Net::new(level);
        let before = impossible_acks(&mut n);
        assert_eq!(
            n.honest.tx.counter(ViCounter::BogusAcks) - before,
            3,
            "{}: {:?}",
            level.name(),
            n.honest.tx.nonzero_counters()
        );
    }
}
