//! Buffered endpoints (two-case delivery) by an engine stepped on the
//! test's thread: a client that scribbles on its receive queue's tail
//! makes its own endpoint look full, nothing worse (its messages wait, in
//! order, and come once the tail is sane again); a sender held back at the
//! limit keeps its descriptors in its own queue while other senders go on.

use std::sync::atomic::Ordering;

mod common;
use common::*;
use unet_abi::*;
use unet_engine::invoker::RawEndpoint;

/// 1 KiB buffers, 16 of them, a receive queue of 4.
fn geometry() -> Geometry {
    Geometry {
        buffer_size: 1024,
        buffer_area_size: 16 << 10,
        recv_cap: 4,
        ..small()
    }
}

/// The header of `ep`'s receive ring, to scribble on as a client may.
fn recv_ring(ep: &RawEndpoint) -> &RingHeader {
    let at = ep
        .segment()
        .at(ep.layout().recv_off as usize, RING_HEADER_SIZE)
        .expect("the receive ring lies in the segment");
    // SAFETY: the ring header lies inside the mapping (checked by at()),
    // 64-byte aligned (Layout); its positions are atomics.
    unsafe { at.cast::<RingHeader>().as_ref() }
}

/// A sender with a big area, and a buffered receiver (the smallest limit,
/// 64 KiB) with every buffer posted; the sender's channel.
fn buffered_pair(rig: &mut Rig) -> (RawEndpoint, RawEndpoint, u16) {
    let a = rig.endpoint(Geometry {
        buffer_area_size: 1 << 20,
        ..small()
    });
    let mut b = rig
        .client
        .create_endpoint_buffered(&mut rig.engine, geometry(), 1)
        .expect("a buffered endpoint");
    post_all(&mut b);
    let (ch, _) = rig.open(&a, &mut b);
    (a, b, ch)
}

fn dropped(rig: &Rig, id: u32) -> u64 {
    [
        EndpointCounter::RxDropRingFull,
        EndpointCounter::RxDropNoBuffer,
        EndpointCounter::RxDropTooLarge,
        EndpointCounter::RxDropBufferLimit,
    ]
    .iter()
    .map(|&c| rig.stats.ep(id, c))
    .sum()
}

#[test]
fn a_scribbled_receive_tail_only_makes_the_endpoint_wait() {
    let mut rig = Rig::new();
    let (mut a, mut b, ch) = buffered_pair(&mut rig);
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::BufferLimit), 64 << 10);
    let len = |i: usize| [10, 700, 2500][i % 3];
    for i in 0..4 {
        send(&mut a, ch, i as u32 * 4096, &pattern(i, len(i)));
    }
    rig.settle();
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxMsgs), 4);
    let real_tail = recv_ring(&b).tail.load(Ordering::Relaxed);
    let mut next = 4;
    for bad in [u64::MAX, 1_000_000, 5, real_tail] {
        recv_ring(&b).tail.store(bad, Ordering::Release);
        for _ in 0..4 {
            send(
                &mut a,
                ch,
                (next % 64) as u32 * 4096,
                &pattern(next, len(next)),
            );
            next += 1;
        }
        for _ in 0..50 {
            rig.engine.step();
        }
        assert_eq!(dropped(&rig, b.id()), 0, "tail {bad}");
    }
    // Every tail said "full" (ahead of the head, or a queue's length
    // behind it): the new messages wait in the buffer.
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxMsgs), 4);
    assert_eq!(
        rig.stats.ep(b.id(), EndpointCounter::RxBuffered),
        next as u64 - 4
    );
    // The client reads with its own (sane) tail: everything, in order.
    for i in 0..next {
        let mut m = take(&mut b, true);
        for _ in 0..100 {
            if m.is_some() {
                break;
            }
            rig.engine.step();
            m = take(&mut b, true);
        }
        let m = m.unwrap_or_else(|| panic!("message {i}\n{}", rig.stats.dump()));
        assert!(m.data == pattern(i, len(i)), "message {i}");
    }
    rig.settle();
    assert!(take(&mut b, true).is_none());
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::BufferPages), 0);
    assert_eq!(dropped(&rig, b.id()), 0);
}

#[test]
fn a_held_sender_keeps_its_descriptors_and_others_go_on() {
    let mut rig = Rig::new();
    let (mut a, mut b, ch) = buffered_pair(&mut rig);
    // Another pair, plain: its traffic must not wait for b.
    let mut c = rig.endpoint(small());
    let mut d = rig.receiver(small());
    let (cd, _) = rig.open(&c, &mut d);
    // 2.5 KiB messages: the 64 KiB buffer holds 25 of them.
    let msg = |i: usize| pattern(i, 2500);
    let mut sent = 0;
    while a.sends_taken() == sent as u64 && sent < 60 {
        send(&mut a, ch, (sent % 64) as u32 * 4096, &msg(sent));
        sent += 1;
        rig.settle();
    }
    // b reads nothing: the queue (4) and the buffer took what they could,
    // then a was held with its last descriptor still in its queue.
    let taken = a.sends_taken();
    assert!(taken < sent as u64, "{taken} of {sent} taken");
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxHeld), 1);
    let buffered = rig.stats.ep(b.id(), EndpointCounter::RxBuffered);
    assert!((20..=26).contains(&buffered), "{buffered} buffered");
    for k in 0..3 {
        send(&mut a, ch, (sent + k) as u32 * 4096, &msg(sent + k));
    }
    for i in 0..20 {
        send(&mut c, cd, 0, &pattern(1000 + i, 100));
        rig.settle();
        let m = take(&mut d, true).expect("c's message goes through");
        assert!(m.data == pattern(1000 + i, 100));
    }
    assert_eq!(a.sends_taken(), taken, "a stays held");
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxHeld), 1);
    assert_eq!(dropped(&rig, b.id()), 0);
    // b reads: a goes on, and everything arrives in order.
    let total = sent + 3;
    for i in 0..total {
        let mut m = take(&mut b, true);
        for _ in 0..100 {
            if m.is_some() {
                break;
            }
            rig.engine.step();
            m = take(&mut b, true);
        }
        let m = m.unwrap_or_else(|| panic!("message {i}\n{}", rig.stats.dump()));
        assert!(m.data == msg(i), "message {i}");
    }
    assert_eq!(a.sends_taken(), total as u64);
    assert_eq!(dropped(&rig, b.id()), 0);
}
