//! U-Net delivery by an engine stepped on the test's thread: small messages
//! inline in the receive descriptor, larger ones in as many free buffers as
//! they need; a message that finds no room is dropped whole and counted,
//! and the buffers it took are not lost; bad free-ring entries and
//! impossible ring positions written by a client are counted and skipped.

use std::sync::atomic::Ordering;

mod common;
use common::*;
use unet_abi::*;
use unet_engine::invoker::RawEndpoint;

/// 1 KiB buffers, 16 of them, the given receive ring.
fn geometry(recv_cap: u32) -> Geometry {
    Geometry {
        buffer_size: 1024,
        buffer_area_size: 16 << 10,
        recv_cap,
        ..small()
    }
}

/// An engine, a sender with a big area and a receiver of geometry `g`
/// that posts `posted` buffers (offsets 0, 1024, ...): the sender's
/// channel and the receiver's tag for it.
fn pair(g: Geometry, posted: u32) -> (Rig, RawEndpoint, RawEndpoint, u16, u16) {
    let mut rig = Rig::new();
    let a = rig.endpoint(Geometry {
        buffer_area_size: 1 << 20,
        ..small()
    });
    let mut b = rig.endpoint(g);
    for i in 0..posted {
        assert!(b.post_free(i * g.buffer_size));
    }
    let (ch, from_a) = rig.open(&a, &mut b);
    (rig, a, b, ch, from_a)
}

/// The header of `ep`'s send ring, to scribble on as a client may.
fn send_ring(ep: &RawEndpoint) -> &RingHeader {
    let at = ep
        .segment()
        .at(ep.layout().send_off as usize, RING_HEADER_SIZE)
        .expect("the send ring lies in the segment");
    // SAFETY: the ring header lies inside the mapping (checked by at()),
    // 64-byte aligned (Layout); its positions are atomics.
    unsafe { at.cast::<RingHeader>().as_ref() }
}

#[test]
fn small_messages_arrive_inline_and_larger_ones_in_buffers() {
    let g = geometry(64);
    let (mut rig, mut a, mut b, ch, from_a) = pair(g, 16);
    let bs = g.buffer_size as usize;
    let max = MAX_RX_BUFFERS * bs; // 14 buffers
    let sizes = [
        1,
        2,
        55,
        INLINE_MAX,
        INLINE_MAX + 1,
        bs - 1,
        bs,
        bs + 1,
        5000,
        max - 1,
        max,
    ];
    let mut bytes = 0;
    for (i, &len) in sizes.iter().enumerate() {
        let msg = pattern(i, len);
        let pos = send(&mut a, ch, 0, &msg);
        rig.settle();
        assert_eq!(status(&a, pos), SendStatus::Sent);
        let m = take(&mut b, false).unwrap_or_else(|| panic!("{len} bytes arrive"));
        assert_eq!(m.channel, from_a);
        assert_eq!(m.desc.len as usize, len);
        assert!(m.data == msg, "content of {len} bytes");
        if len <= INLINE_MAX {
            assert_eq!(m.desc.flags, RECV_INLINE, "{len} bytes inline");
        } else {
            assert_eq!(m.desc.flags, 0, "{len} bytes in buffers");
            let n = len.div_ceil(bs);
            assert_eq!(m.desc.nbufs as usize, n, "{len} bytes");
            // Distinct buffers, each one the receiver posted.
            let mut offs: Vec<u32> = (0..n).map(|k| m.desc.offset(k)).collect();
            offs.sort();
            offs.dedup();
            assert_eq!(offs.len(), n, "{len} bytes in distinct buffers");
            for o in offs {
                assert!(o % 1024 == 0 && o < 16 << 10, "buffer {o} was posted");
                assert!(b.post_free(o));
            }
        }
        assert!(take(&mut b, false).is_none(), "{len} bytes arrive once");
        bytes += len as u64;
    }
    assert_eq!(
        rig.stats.ep(b.id(), EndpointCounter::RxMsgs),
        sizes.len() as u64
    );
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxBytes), bytes);
    // One byte more than 14 buffers hold: dropped and counted, no buffer
    // taken.
    let pos = send(&mut a, ch, 0, &pattern(99, max + 1));
    rig.settle();
    assert_eq!(status(&a, pos), SendStatus::Sent, "the sender is not told");
    assert!(take(&mut b, false).is_none());
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxDropTooLarge), 1);
    let msg = pattern(100, max);
    send(&mut a, ch, 0, &msg);
    rig.settle();
    assert!(
        take(&mut b, false)
            .expect("every buffer is still there")
            .data
            == msg
    );
}

/// A message needing more buffers than are posted is dropped whole: no
/// descriptor, one count; the buffers it took wait for the next message.
#[test]
fn no_free_buffer_drops_the_whole_message() {
    let g = geometry(64);
    let (mut rig, mut a, mut b, ch, from_a) = pair(g, 2);
    let big = pattern(1, 2500); // three buffers
    for k in 1..=3 {
        let pos = send(&mut a, ch, 0, &big);
        rig.settle();
        assert_eq!(status(&a, pos), SendStatus::Sent);
        assert!(b.pop_recv().is_none(), "nothing delivered, not even half");
        assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxDropNoBuffer), k);
        assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxMsgs), 0);
    }
    // Small messages need no buffer.
    send(&mut a, ch, 0, b"inline");
    rig.settle();
    assert_eq!(take(&mut b, false).expect("inline").data, b"inline");
    // One more buffer: the two taken before and this one carry it.
    assert!(b.post_free(2048));
    send(&mut a, ch, 0, &big);
    rig.settle();
    let m = take(&mut b, false).expect("three buffers now");
    assert_eq!(m.channel, from_a);
    assert!(m.data == big);
    let mut offs: Vec<u32> = (0..3).map(|k| m.desc.offset(k)).collect();
    offs.sort();
    assert_eq!(offs, [0, 1024, 2048]);
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxDropNoBuffer), 3);
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxMsgs), 2);
}

/// A full receive ring drops what comes, counted, and takes no buffer for
/// it; what was delivered is intact and in order.
#[test]
fn a_full_receive_ring_drops_and_takes_no_buffer() {
    let g = geometry(4);
    let (mut rig, mut a, mut b, ch, _) = pair(g, 8);
    for i in 0..4 {
        send(&mut a, ch, i as u32 * 4096, &pattern(i, 10 + i));
    }
    // The ring is full: two inline messages and two that need buffers.
    for (i, len) in [(4, 20), (5, 1500), (6, 30), (7, 3000)] {
        send(&mut a, ch, i as u32 * 4096, &pattern(i, len));
    }
    rig.settle();
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxDropRingFull), 4);
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxMsgs), 4);
    for i in 0..4 {
        let m = take(&mut b, false).expect("the first four");
        assert!(m.data == pattern(i, 10 + i), "message {i}");
    }
    assert!(take(&mut b, false).is_none());
    // All eight buffers are still posted: eight one-buffer messages take
    // them, the ninth finds none.
    for i in 0..9 {
        send(&mut a, ch, 0, &pattern(i, 1000));
        rig.settle();
        match take(&mut b, false) {
            Some(m) if i < 8 => assert!(m.data == pattern(i, 1000)),
            None if i == 8 => {}
            m => panic!("one-buffer message {i}: {m:?}"),
        }
    }
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxDropNoBuffer), 1);
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxDropRingFull), 4);
}

/// Free-ring entries whose buffer does not lie in the area are counted
/// and skipped; the next good entry carries the message.
#[test]
fn free_entries_outside_the_area_are_counted_and_skipped() {
    let g = geometry(64);
    let (mut rig, mut a, mut b, ch, from_a) = pair(g, 0);
    let area = g.buffer_area_size as u32;
    for bad in [area, area - 512, u32::MAX] {
        assert!(b.post_free(bad));
    }
    assert!(b.post_free(area - 1024)); // the last buffer: fine
    let msg = pattern(3, 700);
    send(&mut a, ch, 0, &msg);
    rig.settle();
    let m = take(&mut b, false).expect("delivered in the good buffer");
    assert_eq!(m.channel, from_a);
    assert_eq!(m.desc.offset(0), area - 1024);
    assert!(m.data == msg);
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::FreeBadOffset), 3);
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxDropNoBuffer), 0);
    // The bad entries are gone for good: the next message finds none.
    send(&mut a, ch, 0, &msg);
    rig.settle();
    assert!(take(&mut b, false).is_none());
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::FreeBadOffset), 3);
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::RxDropNoBuffer), 1);
}

/// A send head more than a ring ahead of the engine's position (or behind
/// it) is impossible: nothing is taken, and it is counted once per value
/// written, however often the engine looks. The endpoint's other
/// endpoints are unaffected, and a sane head makes the waiting
/// descriptors go.
#[test]
fn an_impossible_send_head_is_counted_once_per_value() {
    let g = geometry(64);
    let (mut rig, mut a, mut b, ch, _) = pair(g, 16);
    let mut c = rig.endpoint(small());
    let (cch, from_c) = rig.open(&c, &mut b);
    // Two descriptors the engine takes, then three it has not seen.
    for i in 0..2 {
        send(&mut a, ch, i as u32 * 64, &pattern(i, 20));
    }
    rig.settle();
    let taken = a.sends_taken();
    assert_eq!(taken, 2);
    for i in 0..2 {
        assert!(take(&mut b, true).expect("a's first two").data == pattern(i, 20));
    }
    let waiting: Vec<u64> = (2..5)
        .map(|i| {
            a.write_area(i * 64, &pattern(i as usize, 20));
            a.push_send(SendDesc {
                offset: (i * 64) as u32,
                len: 20,
                channel: ch,
                ..Default::default()
            })
            .unwrap()
        })
        .collect();
    let head = send_ring(&a).head.load(Ordering::Relaxed);
    assert_eq!(head, 5);
    let cap = g.send_cap as u64;
    let corrupt = |rig: &Rig| rig.stats.ep(a.id(), EndpointCounter::RingCorrupt);
    let mut counted = 0;
    for bad in [
        taken + cap + 1,
        taken + cap + 1, // the same value: not counted again
        u64::MAX,
        taken - 1,
        taken + cap + 1, // differs from the last value counted
    ] {
        let was = send_ring(&a).head.swap(bad, Ordering::Release);
        if was != bad {
            counted += 1;
        }
        for _ in 0..100 {
            rig.engine.step();
        }
        assert_eq!(corrupt(&rig), counted, "head {bad}");
        assert_eq!(a.sends_taken(), taken, "nothing taken at head {bad}");
        // Another endpoint's messages go on.
        let msg = pattern(bad as usize, 40);
        send(&mut c, cch, 0, &msg);
        rig.settle();
        let m = take(&mut b, true).expect("c's message");
        assert_eq!(m.channel, from_c);
        assert!(m.data == msg);
        assert!(take(&mut b, true).is_none(), "and nothing from a");
    }
    // The real head back: the three waiting descriptors go.
    send_ring(&a).head.store(head, Ordering::Release);
    rig.settle();
    assert_eq!(a.sends_taken(), 5);
    for (k, pos) in waiting.into_iter().enumerate() {
        assert_eq!(status(&a, pos), SendStatus::Sent);
        let m = take(&mut b, true).expect("a waiting message");
        assert!(m.data == pattern(k + 2, 20), "waiting message {k}");
    }
    assert_eq!(corrupt(&rig), counted);
    assert_eq!(counted, 4);
}

/// The first impossible send head a client writes is counted, whatever
/// its value: all ones too (a client that rewinds its head below zero
/// writes just that).
#[test]
fn an_impossible_send_head_of_all_ones_is_counted() {
    let (mut rig, a, ..) = pair(geometry(64), 0);
    send_ring(&a).head.store(u64::MAX, Ordering::Release);
    for _ in 0..10 {
        rig.engine.step();
    }
    assert_eq!(a.sends_taken(), 0);
    assert_eq!(
        rig.stats.ep(a.id(), EndpointCounter::RingCorrupt),
        1,
        "a send head of u64::MAX (tail 0) is impossible and counted once"
    );
}
