//! The peer link in one process: messages in order across laps, the
//! refusals, and a segment whose every position and length is corrupted
//! by a third mapping of it (no panic, every drop counted, the link
//! broken where its protocol says).

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use unet_abi::peer::{
    AmHeader, PeerGeometry, PeerLayoutError, PeerSlot, PeerView, AM_ARGS_MAX, AM_BULK,
    AM_SRC_HANDLER,
};
use unet_sys::Segment;

use super::*;

const G: PeerGeometry = PeerGeometry {
    slots: 8,
    data_size: 4096,
};

/// A third mapping of a segment, written as a hostile party would.
pub(super) struct Raw {
    view: PeerView,
    seg: Segment,
}

impl Raw {
    pub(super) fn open(fd: &OwnedFd) -> Raw {
        let len = Segment::sealed_len(fd).unwrap() as usize;
        let seg = Segment::open_sealed(fd.try_clone().unwrap(), len).unwrap();
        // SAFETY: the mapping is kept beside the view and dropped after it.
        let view = unsafe { PeerView::from_segment(seg.ptr(), seg.len()) }.unwrap();
        Raw { view, seg }
    }
    fn slot(&self, d: usize, pos: u64) -> *mut PeerSlot {
        let slots = self.view.geometry.slots as u64;
        // SAFETY: the index is taken modulo the ring's slots.
        unsafe { self.view.ring(d).as_ptr().add((pos % slots) as usize) }
    }
    fn set_hdr(&self, d: usize, pos: u64, h: AmHeader) {
        // SAFETY: a slot in the mapping; a volatile write of plain data.
        unsafe { std::ptr::addr_of_mut!((*self.slot(d, pos)).hdr).write_volatile(h) }
    }
    fn hdr(&self, d: usize, pos: u64) -> AmHeader {
        // SAFETY: as above, a read.
        unsafe { std::ptr::addr_of!((*self.slot(d, pos)).hdr).read_volatile() }
    }
    fn poke(&self, off: usize, byte: u8) {
        let off = off % self.seg.len();
        // SAFETY: off is inside the mapping; any byte may be anywhere.
        unsafe { self.seg.ptr().as_ptr().add(off).write_volatile(byte) }
    }
}

fn link(fd: &OwnedFd, side: usize) -> PeerLink {
    PeerLink::attach(fd.try_clone().unwrap(), side, PeerConfig::default()).unwrap()
}

fn pair(g: PeerGeometry) -> (PeerLink, PeerLink, Raw) {
    let fd = PeerLink::create(g, 7).unwrap();
    (link(&fd, 0), link(&fd, 1), Raw::open(&fd))
}

fn hdr(handler: u16) -> AmHeader {
    AmHeader {
        handler,
        src_kind: AM_SRC_HANDLER,
        src: 42,
        ..AmHeader::default()
    }
}

/// Message `i` of a stream: its handler, arguments and bulk data.
pub(super) fn msg(i: u64, bulk_max: u32) -> (u16, Vec<u8>, Vec<u8>) {
    let args = (0..(i * 37 % (AM_ARGS_MAX as u64 + 1)))
        .map(|k| (i * 7 + k) as u8)
        .collect();
    let lens = [0u64, 0, 1, 63, 64, 100, 1000, 2047, 2048];
    let blen = lens[(i % lens.len() as u64) as usize].min(bulk_max as u64);
    let bulk = (0..blen).map(|k| (i * 13 + k * 3) as u8).collect();
    (64 + (i % 900) as u16, args, bulk)
}

/// Pop everything waiting, checking it against the stream at `next`.
fn drain(l: &mut PeerLink, next: &mut u64) -> usize {
    let bm = l.bulk_max();
    l.pop(usize::MAX, |h, a, b| {
        let (handler, args, bulk) = msg(*next, bm);
        assert_eq!(h.handler, handler, "message {next}");
        assert_eq!((h.src_kind, h.src), (AM_SRC_HANDLER, 42));
        assert_eq!(a, &args[..], "message {next}'s arguments");
        assert_eq!(b, &bulk[..], "message {next}'s bulk data");
        assert_eq!(h.bulk_len as usize, bulk.len());
        assert_eq!(h.flags & AM_BULK != 0, !bulk.is_empty());
        *next += 1;
    })
}

#[test]
fn messages_cross_in_order_both_ways_across_many_laps() {
    let (mut a, mut b, _raw) = pair(G);
    let (mut sent, mut got) = ([0u64; 2], [0u64; 2]);
    let total = 3000;
    while got[0] < total || got[1] < total {
        for (d, l) in [&mut a, &mut b].into_iter().enumerate() {
            while sent[d] < total {
                let (h, args, bulk) = msg(sent[d], l.bulk_max());
                match l.push(hdr(h), &args, &bulk) {
                    Ok(()) => sent[d] += 1,
                    Err(PeerError::Full) => break,
                    Err(e) => panic!("push: {e:?}"),
                }
            }
        }
        drain(&mut b, &mut got[0]);
        drain(&mut a, &mut got[1]);
    }
    for l in [&a, &b] {
        let s = l.stats();
        assert_eq!((s.sent, s.received), (total, total));
        assert!(s.full > 0, "the ring and the data area filled up");
        assert_eq!(s.drops, [0; 4]);
    }
    assert_eq!(a.check(Instant::now()), PeerState::Alive);
}

#[test]
fn a_bounded_pop_takes_at_most_its_bound() {
    let (mut a, mut b, _raw) = pair(G);
    for i in 0..5 {
        let (h, args, bulk) = msg(i, a.bulk_max());
        a.push(hdr(h), &args, &bulk).unwrap();
    }
    let mut next = 0;
    let bm = b.bulk_max();
    assert_eq!(b.pop(2, |_, _, _| next += 1), 2);
    assert_eq!(next, 2);
    assert!(b.has_messages());
    assert_eq!(b.pop(0, |_, _, _| unreachable!()), 0);
    assert_eq!(drain(&mut b, &mut next), 3);
    assert!(!b.has_messages() && bm == 2048);
}

#[test]
fn invalid_and_full_sends_are_refused_and_counted() {
    let (mut a, mut b, _raw) = pair(G);
    let big = vec![0u8; AM_ARGS_MAX + 1];
    assert_eq!(
        a.push(hdr(64), &big, &[]),
        Err(PeerError::Invalid(Invalid::ArgsTooLong(241)))
    );
    let bulk = vec![0u8; 2049];
    assert_eq!(
        a.push(hdr(64), &[], &bulk),
        Err(PeerError::Invalid(Invalid::BulkTooLong(2049)))
    );
    // The data area fills before the ring does.
    a.push(hdr(64), &[], &bulk[..1500]).unwrap();
    a.push(hdr(64), &[], &bulk[..1500]).unwrap();
    assert_eq!(a.push(hdr(64), &[], &bulk[..1500]), Err(PeerError::Full));
    for _ in 0..6 {
        a.push(hdr(64), &[1, 2, 3], &[]).unwrap();
    }
    assert_eq!(a.push(hdr(64), &[], &[]), Err(PeerError::Full));
    assert_eq!(a.depth(), 8);
    assert_eq!(b.pop(1, |_, _, b| assert_eq!(b.len(), 1500)), 1);
    a.push(hdr(64), &[], &bulk[..1500]).unwrap();
    let s = a.stats();
    assert_eq!((s.sent, s.invalid, s.full), (9, 2, 2));
    // A link without a data area carries no bulk data.
    let (mut c, _d, _raw) = pair(PeerGeometry {
        slots: 4,
        data_size: 0,
    });
    assert_eq!(
        c.push(hdr(64), &[], &[9]),
        Err(PeerError::Invalid(Invalid::BulkTooLong(1)))
    );
    c.push(hdr(64), &[9], &[]).unwrap();
}

#[test]
fn bad_lengths_and_flags_in_a_slot_are_dropped_and_counted() {
    let (mut a, mut b, raw) = pair(G);
    let bad = [
        (241u16, 0u16, 0u32, PeerDrop::BadArgsLen),
        (u16::MAX, 0, 0, PeerDrop::BadArgsLen),
        (4, 2, 0, PeerDrop::BadFlags),
        (4, 0xFFFF, 10, PeerDrop::BadFlags),
        (4, AM_BULK, 0, PeerDrop::BadFlags),
        (4, 0, 100, PeerDrop::BadFlags),
    ];
    for (i, &(args_len, flags, bulk_len, _)) in bad.iter().enumerate() {
        // A good message, then the same slot made bad (as a hostile
        // producer would publish it).
        a.push(hdr(64), &[1, 2, 3, 4], &vec![5; bulk_len as usize])
            .unwrap();
        let mut h = raw.hdr(0, i as u64);
        (h.args_len, h.flags, h.bulk_len) = (args_len, flags, bulk_len);
        raw.set_hdr(0, i as u64, h);
    }
    a.push(hdr(65), &[7; 8], &[8; 64]).unwrap();
    let mut got = vec![];
    let n = b.pop(usize::MAX, |h, a, d| {
        got.push((h.handler, a.to_vec(), d.to_vec()))
    });
    assert_eq!(n, 1);
    // The good message after the bad ones is whole (the data stream kept
    // step with every bulk length that was in bounds).
    assert_eq!(got, vec![(65, vec![7; 8], vec![8; 64])]);
    let s = b.stats();
    let names: Vec<_> = PeerDrop::ALL.iter().map(|d| d.name()).collect();
    assert_eq!(names[..2], ["bad_args_len", "bad_flags"]);
    assert_eq!(s.dropped(PeerDrop::BadArgsLen), 2);
    assert_eq!(s.dropped(PeerDrop::BadFlags), 4);
    assert_eq!(b.check(Instant::now()), PeerState::Alive);
}

#[test]
fn a_head_out_of_bounds_breaks_the_link() {
    for h in [9u64, 100, u64::MAX, 1 << 63] {
        let (mut a, mut b, raw) = pair(G);
        a.push(hdr(64), &[1], &[]).unwrap();
        raw.view.lines(0).producer.head.store(h, Ordering::Release);
        assert_eq!(b.pop(usize::MAX, |_, _, _| panic!("delivered")), 0);
        assert_eq!(
            b.check(Instant::now()),
            PeerState::Dead(Death::Broken(Broken::Head))
        );
        // The peer sees this side close.
        assert_eq!(a.check(Instant::now()), PeerState::Dead(Death::Closed));
        assert_eq!(
            a.push(hdr(64), &[], &[]),
            Err(PeerError::Dead(Death::Closed))
        );
    }
    // A head that moved back (below what was taken).
    let (mut a, mut b, raw) = pair(G);
    for _ in 0..3 {
        a.push(hdr(64), &[1], &[]).unwrap();
    }
    assert_eq!(b.pop(usize::MAX, |_, _, _| {}), 3);
    raw.view.lines(0).producer.head.store(1, Ordering::Release);
    assert_eq!(b.pop(usize::MAX, |_, _, _| panic!("delivered")), 0);
    assert_eq!(
        b.check(Instant::now()),
        PeerState::Dead(Death::Broken(Broken::Head))
    );
}

#[test]
fn a_bulk_length_over_the_largest_breaks_the_link_and_counts_what_waited() {
    for len in [2049u32, 4097, u32::MAX] {
        let (mut a, mut b, raw) = pair(G);
        for _ in 0..4 {
            a.push(hdr(64), &[1], &[2; 10]).unwrap();
        }
        let mut h = raw.hdr(0, 1);
        h.bulk_len = len;
        raw.set_hdr(0, 1, h);
        assert_eq!(b.pop(usize::MAX, |_, _, _| {}), 1);
        assert_eq!(
            b.check(Instant::now()),
            PeerState::Dead(Death::Broken(Broken::BulkLen))
        );
        assert_eq!(b.stats().dropped(PeerDrop::DeadIn), 3);
        assert_eq!(b.pop(usize::MAX, |_, _, _| panic!("delivered")), 0);
    }
}

#[test]
fn a_tail_or_data_tail_out_of_bounds_breaks_the_sender() {
    for (data, bad) in [
        (false, 9u64),
        (false, u64::MAX),
        (true, 5000),
        (true, u64::MAX),
    ] {
        let (mut a, mut b, raw) = pair(G);
        let bulk = [3u8; 2000];
        a.push(hdr(64), &[], &bulk).unwrap();
        a.push(hdr(64), &[], &bulk).unwrap();
        assert_eq!(b.pop(1, |_, _, _| {}), 1);
        let c = &raw.view.lines(0).consumer;
        let why = if data {
            c.data_tail.store(bad, Ordering::Release);
            Broken::DataTail
        } else {
            c.tail.store(bad, Ordering::Release);
            Broken::Tail
        };
        let r = if data {
            // The area is full: the sender reads the data tail.
            a.push(hdr(64), &[], &[1; 1000])
        } else {
            (0..8)
                .map(|_| a.push(hdr(64), &[], &[]))
                .find(|r| r.is_err())
                .unwrap()
        };
        assert_eq!(
            r,
            Err(PeerError::Dead(Death::Broken(why))),
            "{bad} in the data tail: {data}"
        );
        assert_eq!(a.check(Instant::now()), PeerState::Dead(Death::Broken(why)));
        assert!(a.stats().dropped(PeerDrop::DeadOut) >= 1);
    }
}

#[test]
fn random_bytes_anywhere_in_the_segment_never_panic_or_escape() {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut deaths, mut delivered) = (0, 0);
    let (mut a, mut b, mut raw) = pair(G);
    for round in 0..20_000u64 {
        // Spray a few bytes: mostly the lines and slot headers, sometimes
        // anywhere.
        for _ in 0..(rnd() % 3) {
            let off = match rnd() % 4 {
                0 => 0x80 + (rnd() % 0x380) as usize,
                1 => 4096 * (1 + rnd() % 2) as usize + (rnd() % 8 * 256 + rnd() % 16) as usize,
                _ => rnd() as usize,
            };
            raw.poke(off, rnd() as u8);
        }
        for l in [&mut a, &mut b] {
            let (h, args, bulk) = msg(round, l.bulk_max());
            let _ = l.push(hdr(h), &args, &bulk);
            l.pop((rnd() % 4) as usize, |h, a, d| {
                assert!(a.len() <= AM_ARGS_MAX && a.len() == h.args_len as usize);
                assert!(d.len() <= 2048 && d.len() == h.bulk_len as usize);
                delivered += 1;
            });
        }
        let now = Instant::now();
        if let (PeerState::Dead(_), _) | (_, PeerState::Dead(_)) = (a.check(now), b.check(now)) {
            deaths += 1;
            (a, b, raw) = pair(G);
        }
    }
    assert!(deaths > 10, "{deaths} links broke");
    assert!(delivered > 1000, "{delivered} messages delivered");
}

#[test]
fn a_closed_peer_is_dead_and_what_waited_for_it_is_counted() {
    let (mut a, b, _raw) = pair(G);
    for i in 0..3 {
        a.push(hdr(64), &[i], &[]).unwrap();
    }
    drop(b);
    assert_eq!(a.check(Instant::now()), PeerState::Dead(Death::Closed));
    assert_eq!(a.stats().dropped(PeerDrop::DeadOut), 3);
    assert_eq!(
        a.push(hdr(64), &[], &[]),
        Err(PeerError::Dead(Death::Closed))
    );
}

#[test]
fn what_a_peer_published_before_it_closed_is_still_delivered() {
    let (mut a, mut b, _raw) = pair(G);
    for i in 0..5 {
        let (h, args, bulk) = msg(i, 2048);
        a.push(hdr(h), &args, &bulk).unwrap();
    }
    drop(a);
    assert_eq!(b.check(Instant::now()), PeerState::Dead(Death::Closed));
    let mut next = 0;
    assert_eq!(drain(&mut b, &mut next), 5);
    assert!(!b.has_messages());
    assert_eq!(b.stats().drops, [0; 4]);
}

#[test]
fn a_peer_whose_heartbeat_stands_still_while_messages_wait_is_stalled() {
    let timeout = DEFAULT_STALL_TIMEOUT;
    let (mut a, mut b, _raw) = pair(G);
    let t0 = Instant::now();
    // Nothing waits: an idle peer is never stalled.
    assert_eq!(a.check(t0), PeerState::Alive);
    assert_eq!(a.check(t0 + 10 * timeout), PeerState::Alive);
    a.push(hdr(64), &[1], &[]).unwrap();
    a.push(hdr(64), &[2], &[]).unwrap();
    let t1 = t0 + 11 * timeout;
    assert_eq!(a.check(t1), PeerState::Alive);
    // The peer takes one: its heartbeat moved, the clock starts again.
    assert_eq!(b.pop(1, |_, _, _| {}), 1);
    assert_eq!(a.check(t1 + 2 * timeout), PeerState::Alive);
    assert_eq!(a.check(t1 + 3 * timeout), PeerState::Alive);
    let dead = a.check(t1 + 3 * timeout + Duration::from_millis(1));
    assert_eq!(dead, PeerState::Dead(Death::Stalled));
    assert_eq!(a.stats().dropped(PeerDrop::DeadOut), 1);
    // The stalled side finds itself dropped when it looks.
    assert_eq!(b.check(Instant::now()), PeerState::Dead(Death::Closed));
}

#[test]
fn attach_refuses_what_is_not_a_fresh_peer_segment() {
    let null: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
    let e = PeerLink::attach(null, 0, PeerConfig::default());
    assert!(
        matches!(e, Err(AttachError::NotSealed)),
        "{e:?}",
        e = e.err()
    );
    let zeros = Segment::create_file("zeros", 8192).unwrap();
    let e = PeerLink::attach(zeros, 0, PeerConfig::default())
        .err()
        .unwrap();
    assert!(
        matches!(e, AttachError::Layout(PeerLayoutError::BadMagic(0))),
        "{e}"
    );
    let fd = PeerLink::create(G, 1).unwrap();
    let e = PeerLink::attach(fd.try_clone().unwrap(), 2, PeerConfig::default())
        .err()
        .unwrap();
    assert_eq!(e.to_string(), "side 2 is not 0 or 1");
    let _a = link(&fd, 0);
    let e = PeerLink::attach(fd.try_clone().unwrap(), 0, PeerConfig::default())
        .err()
        .unwrap();
    assert_eq!(e.to_string(), "side 0 of the segment was attached before");
    // A header whose geometry the file cannot hold, or the ABI refuses.
    for (off, v, want) in [
        (16usize, 1u32 << 16, "too small"),
        (16, 3, "3 slots is not a power of two"),
        (20, 100, "data area of 100 bytes"),
    ] {
        let fd = PeerLink::create(G, 2).unwrap();
        let r = Raw::open(&fd);
        for (i, b) in v.to_le_bytes().into_iter().enumerate() {
            r.poke(off + i, b);
        }
        let e = PeerLink::attach(fd, 1, PeerConfig::default())
            .err()
            .unwrap();
        assert!(e.to_string().contains(want), "{e}");
    }
}

#[test]
fn a_sleeping_consumer_is_woken_by_a_push() {
    let fd = PeerLink::create(G, 3).unwrap();
    let mut a = link(&fd, 0);
    let mut b = link(&fd, 1);
    let start = Instant::now();
    let t = std::thread::spawn(move || {
        while !b.has_messages() {
            b.wait(Duration::from_secs(60));
        }
        b.pop(usize::MAX, |h, _, _| assert_eq!(h.handler, 99))
    });
    a.push(hdr(99), &[], &[]).unwrap();
    assert_eq!(t.join().unwrap(), 1);
    // Woken, not timed out.
    assert!(start.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_sleeping_engine_is_rung_on_its_doorbell() {
    use std::os::fd::AsRawFd;
    let (mut a, mut b, _raw) = pair(G);
    let bell = unet_sys::EventFd::new().unwrap();
    let theirs = bell.fd().try_clone().unwrap();
    a.set_peer_doorbell(unet_sys::EventFd::from_fd(theirs));
    let rung = |t| unet_sys::wait_readable(bell.fd().as_raw_fd(), Some(t)).unwrap();
    // Awake: no ring.
    a.push(hdr(64), &[1], &[]).unwrap();
    assert!(!rung(Duration::ZERO));
    // Armed (asleep): a push rings it, and so does a close.
    b.arm(true);
    unet_sys::heavy_fence();
    assert!(b.has_messages());
    a.push(hdr(64), &[2], &[]).unwrap();
    assert!(rung(Duration::from_secs(10)));
    assert_eq!(bell.drain(), 1);
    // Once a sleep: the pushes after it, while the peer has not woken,
    // find the ring made.
    for k in 10..15 {
        a.push(hdr(64), &[k], &[]).unwrap();
    }
    assert!(!rung(Duration::ZERO));
    b.arm(false);
    a.push(hdr(64), &[3], &[]).unwrap();
    assert!(!rung(Duration::ZERO));
    assert_eq!(b.pop(usize::MAX, |_, _, _| {}), 8);
    // Another sleep: rung again, once.
    b.arm(true);
    unet_sys::heavy_fence();
    a.push(hdr(64), &[4], &[]).unwrap();
    a.push(hdr(64), &[5], &[]).unwrap();
    assert!(rung(Duration::from_secs(10)));
    assert_eq!(bell.drain(), 1);
    drop(a);
    assert!(rung(Duration::from_secs(10)));
}

#[test]
fn puts_are_seen_when_published_and_a_sleeper_is_rung_then() {
    use std::os::fd::AsRawFd;
    let (mut a, mut b, _raw) = pair(G);
    let bell = unet_sys::EventFd::new().unwrap();
    a.set_peer_doorbell(unet_sys::EventFd::from_fd(bell.fd().try_clone().unwrap()));
    let rung = |t| unet_sys::wait_readable(bell.fd().as_raw_fd(), Some(t)).unwrap();
    b.arm(true);
    unet_sys::heavy_fence();
    for k in 0..3u16 {
        let (_, args, bulk) = msg(k as u64, a.bulk_max());
        a.put(hdr(60 + k), &args, &bulk).unwrap();
    }
    // Written, not yet shown: the peer sees nothing and is not rung.
    assert!(a.unpublished());
    assert!(!b.has_messages());
    assert!(!rung(Duration::ZERO));
    a.publish();
    assert!(!a.unpublished());
    assert!(rung(Duration::from_secs(10)));
    assert_eq!(bell.drain(), 1);
    let mut got = Vec::new();
    assert_eq!(b.pop(usize::MAX, |h, _, _| got.push(h.handler)), 3);
    assert_eq!(got, [60, 61, 62]);
    // Publishing again with nothing put does nothing.
    a.publish();
    assert!(!b.has_messages());
    // What is put and not published when the link closes goes first.
    a.put(hdr(70), &[1], &[]).unwrap();
    drop(a);
    assert_eq!(b.pop(usize::MAX, |h, _, _| assert_eq!(h.handler, 70)), 1);
}
