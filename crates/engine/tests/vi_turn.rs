//! An engine's VI work per turn follows what is waiting, not the number
//! of VIs it carries: many idle engine-carried VIs cost a turn no visit
//! (but for the occasional sweep), and a VI whose client posts is still
//! served at once.

mod vis;

use std::time::Duration;

use unet_abi::*;
use unet_control::ViParams;
use unet_engine::invoker::connect_vis;
use unet_engine::Dispatcher;
use vis::*;

const VIS: u64 = 256;
const IDLE_TURNS: u64 = 200;
const SIZE: u32 = 64;

fn visits(e: &Dispatcher) -> u64 {
    e.counters().engine_value(EngineCounter::ViVisits)
}

#[test]
fn idle_vis_are_not_visited_and_a_vi_with_traffic_is_served_at_once() {
    let (mut a, mut b, mut relay, mut ca, mut cb) = two_engines();
    let mem_a = ca.register_memory(&mut a, 2 * SLOT).unwrap();
    let mem_b = cb.register_memory(&mut b, 2 * SLOT).unwrap();
    let to = relay.to_a.local_addr().unwrap();
    let mut pairs = Vec::new();
    for _ in 0..VIS {
        let p = connect_vis(
            (&mut a, &mut ca),
            (&mut b, &mut cb),
            to,
            100,
            ViParams {
                reliability: Reliability::ReliableDelivery,
                strict_rnr: false,
                break_timeout_ms: 0,
            },
            &mut || relay.pump(),
        )
        .unwrap();
        pairs.push(p);
    }
    // Whatever the connections left settles.
    step_for(
        &mut a,
        &mut b,
        &mut || relay.pump(),
        Duration::from_millis(20),
    );

    let before = visits(&a) + visits(&b);
    for _ in 0..IDLE_TURNS {
        a.step();
        relay.pump();
        b.step();
        relay.pump();
    }
    let idle = visits(&a) + visits(&b) - before;
    // At most one sweep of each engine's VIs falls in these turns (one
    // visit per VI and turn would be IDLE_TURNS * 2 * VIS).
    assert!(
        idle <= 2 * VIS,
        "{IDLE_TURNS} idle turns of two engines carrying {VIS} VIs each visited {idle} VIs"
    );

    // A message on one VI: delivered, and its send completed, within a
    // few turns, visiting that VI, not all of them.
    let (ping, pong) = pairs.last_mut().unwrap();
    pong.push_recv(desc(1, &[(mem_b.handle(), 0, SIZE)]))
        .unwrap();
    mem_a.write(0, &pattern(1, SIZE as usize));
    ping.push_send(desc(1, &[(mem_a.handle(), 0, SIZE)]))
        .unwrap();
    let before = visits(&a) + visits(&b);
    let (mut got, mut sent, mut turns, mut arrived_in) = (None, None, 0, 0);
    while (got.is_none() || sent.is_none()) && turns < 100_000 {
        a.step();
        relay.pump();
        b.step();
        relay.pump();
        turns += 1;
        if got.is_none() {
            got = pong.recv_done();
            arrived_in = turns;
        }
        sent = sent.or_else(|| ping.send_done());
    }
    let got = got.expect("the message arrives");
    assert_eq!((got.id, got.status, got.len), (1, 0, SIZE));
    let sent = sent.expect("its send completes");
    assert_eq!((sent.id, sent.status), (1, 0));
    let mut v = vec![0u8; SIZE as usize];
    mem_b.read(0, &mut v);
    assert!(v == pattern(1, SIZE as usize), "the message intact");
    assert!(arrived_in <= 4, "arrived in {arrived_in} turns");
    let busy = visits(&a) + visits(&b) - before;
    assert!(
        busy <= 2 * VIS,
        "{turns} turns moving one message visited {busy} VIs"
    );
}

/// A client that cleared its doorbell flag and posts without ringing is
/// served all the same, by the sweep (within its 100 ms).
#[test]
fn a_post_that_did_not_ring_is_found_by_the_sweep() {
    let (mut a, mut b, mut relay, mut ca, mut cb) = two_engines();
    let mem_a = ca.register_memory(&mut a, 2 * SLOT).unwrap();
    let mem_b = cb.register_memory(&mut b, 2 * SLOT).unwrap();
    let to = relay.to_a.local_addr().unwrap();
    let (mut ping, mut pong) = connect_vis(
        (&mut a, &mut ca),
        (&mut b, &mut cb),
        to,
        100,
        ViParams {
            reliability: Reliability::ReliableDelivery,
            strict_rnr: false,
            break_timeout_ms: 0,
        },
        &mut || relay.pump(),
    )
    .unwrap();
    pong.push_recv(desc(1, &[(mem_b.handle(), 0, SIZE)]))
        .unwrap();
    // Both VIs idle, parked.
    step_for(
        &mut a,
        &mut b,
        &mut || relay.pump(),
        Duration::from_millis(20),
    );
    assert_eq!(
        ping.header()
            .engine_armed
            .load(std::sync::atomic::Ordering::Relaxed),
        1,
        "an idle VI's doorbell is armed"
    );
    ping.header()
        .engine_armed
        .store(0, std::sync::atomic::Ordering::Relaxed);
    mem_a.write(0, &pattern(1, SIZE as usize));
    ping.push_send(desc(1, &[(mem_a.handle(), 0, SIZE)]))
        .unwrap();
    let start = std::time::Instant::now();
    let c = next_recv(&mut a, &mut b, &mut relay, &mut pong, "the message");
    assert_eq!((c.id, c.status, c.len), (1, 0, SIZE));
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "found in {:?}",
        start.elapsed()
    );
}
