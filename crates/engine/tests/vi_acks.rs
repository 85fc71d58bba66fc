//! Acks ride on the messages of the other direction. Two engines on UDP
//! loopback, joined by a relay that sees every datagram, carry a
//! ping-pong between two reliable VIs: each reply carries the ack of the
//! ping it answers (`DATA_FLAG_ACK`), each ping the ack of the last reply,
//! so a ping's send has completed by the time its reply arrives, without
//! an ack datagram of its own.

mod vis;

use unet_abi::*;
use unet_control::ViParams;
use unet_engine::invoker::connect_vis;
use unet_engine::wire::Body;
use vis::*;

const ROUNDS: u64 = 200;
const SIZE: usize = 64;

/// Data frames that carried an ack, and ack frames, in `log`.
fn acks_in(log: &Log) -> (usize, usize) {
    let (mut carried, mut alone) = (0, 0);
    for f in frames(log) {
        match f.body {
            Body::Data(d) if d.ack.is_some() => carried += 1,
            Body::ViAck(_) => alone += 1,
            _ => {}
        }
    }
    (carried, alone)
}

#[test]
fn a_reply_carries_the_ack_of_what_it_answers() {
    for level in [
        Reliability::ReliableDelivery,
        Reliability::ReliableReception,
    ] {
        let (mut a, mut b, mut relay, mut ca, mut cb) = two_engines();
        let mem_a = ca.register_memory(&mut a, 2 * SLOT).unwrap();
        let mem_b = cb.register_memory(&mut b, 2 * SLOT).unwrap();
        let to = relay.to_a.local_addr().unwrap();
        let (mut ping, mut pong) = connect_vis(
            (&mut a, &mut ca),
            (&mut b, &mut cb),
            to,
            9,
            ViParams {
                reliability: level,
                strict_rnr: false,
                break_timeout_ms: 0,
            },
            &mut || relay.pump(),
        )
        .unwrap();
        // Slot 0 sends, slot 1 receives, on both sides.
        let (send_at, recv_at) = (0u64, SLOT as u64);
        let mut in_time = 0;
        for i in 0..ROUNDS {
            pong.push_recv(desc(i, &[(mem_b.handle(), recv_at, SLOT as u32)]))
                .unwrap();
            ping.push_recv(desc(i, &[(mem_a.handle(), recv_at, SLOT as u32)]))
                .unwrap();
            mem_a.write(send_at as usize, &pattern(i, SIZE));
            ping.push_send(desc(i, &[(mem_a.handle(), send_at, SIZE as u32)]))
                .unwrap();
            // The ping arrives; the pong answers with what it got.
            let c = next_recv(&mut a, &mut b, &mut relay, &mut pong, "the ping");
            assert_eq!((c.id, c.status, c.len as usize), (i, 0, SIZE));
            let mut v = vec![0u8; SIZE];
            mem_b.read(recv_at as usize, &mut v);
            mem_b.write(send_at as usize, &v);
            pong.push_send(desc(i, &[(mem_b.handle(), send_at, SIZE as u32)]))
                .unwrap();
            // The reply arrives: the ping's send is complete by then.
            let c = next_recv(&mut a, &mut b, &mut relay, &mut ping, "the reply");
            assert_eq!((c.id, c.status, c.len as usize), (i, 0, SIZE));
            mem_a.read(recv_at as usize, &mut v);
            assert!(v == pattern(i, SIZE), "reply {i} intact");
            let sent = sends_done(&mut ping);
            if sent.len() == 1 {
                assert_eq!((sent[0].id, sent[0].status), (i, 0));
                in_time += 1;
            } else {
                assert!(sent.is_empty(), "{sent:?}");
                // The ack went on its own: wait for it.
                let mut done = Vec::new();
                step_until(&mut a, &mut b, &mut || relay.pump(), "the ack", |_, _| {
                    done.extend(sends_done(&mut ping));
                    !done.is_empty()
                });
                assert_eq!((done[0].id, done[0].status), (i, 0));
            }
            for s in sends_done(&mut pong) {
                assert_eq!(s.status, 0);
            }
        }
        let (ab, ab_alone) = acks_in(&relay.a_to_b);
        let (ba, ba_alone) = acks_in(&relay.b_to_a);
        eprintln!(
            "{level:?}: {in_time} of {ROUNDS} pings complete when their reply came; \
             acks carried A->B {ab}, B->A {ba}; ack datagrams A->B {ab_alone}, B->A {ba_alone}"
        );
        // A reply leaves within microseconds of its ping here, well inside
        // the ack delay (200 us): the ack goes with it. A loaded machine may
        // stall the test between two steps now and then.
        assert!(in_time >= ROUNDS * 9 / 10, "{in_time} of {ROUNDS} in time");
        assert!(ba as u64 >= ROUNDS * 9 / 10, "{ba} replies carried an ack");
        assert!(
            ab as u64 >= ROUNDS * 9 / 10 - 1,
            "{ab} pings carried an ack"
        );
        assert!(
            ba_alone + ab_alone < (ROUNDS / 10) as usize,
            "{ab_alone} + {ba_alone} ack datagrams"
        );
        for vi in [&ping, &pong] {
            assert_eq!(vi.state(), 0, "{:?}", vi.nonzero_counters());
            // With the ack riding on the reply, nothing waits for a
            // timeout; a test thread stalled past the shortest one (1 ms,
            // a loaded machine) may cause a resend or two.
            let resent = vi.counter(ViCounter::Retransmits);
            assert!(resent <= ROUNDS / 50, "{resent} retransmissions");
        }
        assert_eq!(
            ping.counter(ViCounter::AcksRx),
            pong.counter(ViCounter::AcksTx)
        );
    }
}
