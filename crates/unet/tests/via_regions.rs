//! VIA's memory regions between local processes: a region in use or
//! named by a posted descriptor is held, one kept between uses is still
//! deregistered or dropped at once, and many regions shared by two VIs.

use unet::*;

mod via_support;
use via_support::*;

#[test]
fn a_region_in_use_cannot_be_deregistered() {
    let (_e, s1, s2) = engine();
    let (mut a, mut b) = connect(
        &s1,
        &s2,
        15,
        ViAttributes::default(),
        ViAttributes::default(),
    );
    let rb = s2.register_memory(4096).unwrap();
    b.post_recv(1, &[ViSeg::new(&rb, 0, 4096)]).unwrap();
    let (rb, e) = rb.deregister().unwrap_err();
    assert!(matches!(e, Error::InUse(_)), "{e}");
    assert!(e.to_string().contains("posted descriptor"), "{e}");
    let ra = s1.register_memory(4096).unwrap();
    a.post_send(1, &[ViSeg::new(&ra, 0, 10)]).unwrap();
    assert_eq!(b.recv_wait(T).unwrap().status, Ok(10));
    rb.deregister().unwrap();
    // Registering past the process's quota is refused.
    let big = s1.register_memory(8 << 30);
    assert!(matches!(big, Err(Error::Quota(_))), "{big:?}");
}

/// A VI holds each region while any posted descriptor uses it (one count
/// per region, not per descriptor), and lets it go with the last one; the
/// slots it keeps regions in are reused round after round.
#[test]
fn a_region_is_held_while_any_posted_descriptor_uses_it() {
    let (_e, s1, s2) = engine();
    let (mut a, mut b) = connect(
        &s1,
        &s2,
        16,
        ViAttributes::default(),
        ViAttributes::default(),
    );
    let ra = s1.register_memory(4096).unwrap();
    ra.write(0, &pattern(1, 300));
    for round in 0..3u64 {
        let r1 = s2.register_memory(4096).unwrap();
        let r2 = s2.register_memory(4096).unwrap();
        // Receive 1 uses both regions, receive 2 only the first.
        b.post_recv(
            10 * round + 1,
            &[ViSeg::new(&r1, 0, 100), ViSeg::new(&r2, 0, 100)],
        )
        .unwrap();
        b.post_recv(10 * round + 2, &[ViSeg::new(&r1, 200, 300)])
            .unwrap();
        a.post_send(1, &[ViSeg::new(&ra, 0, 150)]).unwrap();
        let c = b.recv_wait(T).unwrap();
        assert_eq!((c.id, c.status), (10 * round + 1, Ok(150)));
        let mut got = vec![0u8; 150];
        r1.read(0, &mut got[..100]);
        r2.read(0, &mut got[100..]);
        assert_eq!(got, pattern(1, 150));
        // The second region is free now; the first is still used.
        r2.deregister().unwrap();
        let (r1, e) = r1.deregister().unwrap_err();
        assert!(matches!(e, Error::InUse(_)), "{e}");
        a.post_send(2, &[ViSeg::new(&ra, 0, 300)]).unwrap();
        let c = b.recv_wait(T).unwrap();
        assert_eq!((c.id, c.status), (10 * round + 2, Ok(300)));
        r1.deregister().unwrap();
        while a.send_done().is_some() {}
    }
    // Many regions at once (more than the VI looks through one by one
    // before it indexes them): each held until its receive completes,
    // in whatever order they are taken.
    let many: Vec<MemRegion> = (0..40).map(|_| s2.register_memory(4096).unwrap()).collect();
    for (i, r) in many.iter().enumerate() {
        b.post_recv(100 + i as u64, &[ViSeg::new(r, 0, 64)])
            .unwrap();
    }
    let mut many: Vec<Option<MemRegion>> = many.into_iter().map(Some).collect();
    for i in 0..40usize {
        a.post_send(3, &[ViSeg::new(&ra, 0, 64)]).unwrap();
        let c = b.recv_wait(T).unwrap();
        assert_eq!((c.id, c.status), (100 + i as u64, Ok(64)));
        // This one is free; the next still held.
        many[i].take().unwrap().deregister().unwrap();
        if let Some(next) = many.get_mut(i + 1) {
            let (r, e) = next.take().unwrap().deregister().unwrap_err();
            assert!(matches!(e, Error::InUse(_)), "{e}");
            *next = Some(r);
        }
        while a.send_done().is_some() {}
    }
}

const MIB: usize = 1 << 20;

/// Two sessions of an engine whose clients may hold 96 MiB each, and a VI
/// pair between them on `tag`.
fn quota_pair(tag: u64) -> (Engine, Session, Session, Vi, Vi) {
    let e = Engine::start(EngineConfig {
        client_memory: 96 * MIB as u64,
        ..EngineConfig::default()
    })
    .unwrap();
    let s1 = Session::embedded(&e).unwrap();
    let s2 = Session::embedded(&e).unwrap();
    let d = ViAttributes::default;
    let (a, b) = connect(&s1, &s2, tag, d(), d());
    (e, s1, s2, a, b)
}

/// A VI that posts one descriptor at a time keeps its region between
/// uses (no reference taken and dropped per message), which neither stops
/// a deregistration nor keeps the region in the engine: with a quota that
/// fits one region at a time, a deregistered or dropped region's memory
/// is free for the next at once, while the VI lives on.
#[test]
fn a_region_kept_between_uses_is_still_deregistered_or_dropped_at_once() {
    let (_e, s1, s2, mut a, mut b) = quota_pair(17);
    let ra = s1.register_memory(4096).unwrap();
    for round in 0..4u64 {
        let rb = s2.register_memory(60 * MIB).unwrap();
        // A second one does not fit beside it.
        let more = s2.register_memory(60 * MIB);
        assert!(matches!(more, Err(Error::Quota(_))), "{more:?}");
        for i in 0..3u64 {
            b.post_recv(i, &[ViSeg::new(&rb, 0, 64)]).unwrap();
            a.post_send(i, &[ViSeg::new(&ra, 0, 64)]).unwrap();
            assert_eq!(b.recv_wait(T).unwrap().status, Ok(64));
            while a.send_done().is_some() {}
        }
        // Kept by the VI, used by nothing: goes either way.
        if round % 2 == 0 {
            rb.deregister().unwrap();
        } else {
            drop(rb);
        }
    }
    // The VI still works with a new region.
    let rb = s2.register_memory(60 * MIB).unwrap();
    b.post_recv(9, &[ViSeg::new(&rb, 0, 64)]).unwrap();
    a.post_send(9, &[ViSeg::new(&ra, 0, 64)]).unwrap();
    assert_eq!(b.recv_wait(T).unwrap().status, Ok(64));
}

/// A VI that cycles through several regions (Javia-II's buffers, each a
/// region of its own) keeps them all between uses; any of them, not only
/// the last used, is still deregistered or dropped at once.
#[test]
fn regions_kept_while_a_vi_cycles_through_them_still_go_at_once() {
    let (_e, s1, s2, mut a, mut b) = quota_pair(18);
    let ra = s1.register_memory(4096).unwrap();
    for round in 0..3u64 {
        let mut rbs: Vec<MemRegion> = (0..8)
            .map(|_| s2.register_memory(10 * MIB).unwrap())
            .collect();
        for i in 0..32u64 {
            let r = &rbs[i as usize % 8];
            b.post_recv(i, &[ViSeg::new(r, 0, 64)]).unwrap();
            a.post_send(i, &[ViSeg::new(&ra, 8 * (i as usize % 8), 64)])
                .unwrap();
            let c = b.recv_wait(T).unwrap();
            assert_eq!((c.id, c.status), (i, Ok(64)));
            while a.send_done().is_some() {}
        }
        // All eight kept, none in use: each goes, whichever way, and the
        // engine forgets it (the next round's eight fit the quota).
        for (k, r) in rbs.drain(..).enumerate() {
            if (k as u64 + round).is_multiple_of(2) {
                r.deregister()
                    .unwrap_or_else(|(_, e)| panic!("region {k}: {e}"));
            } else {
                drop(r);
            }
        }
    }
}

/// Two VIs of one process cycling through more regions than a VI looks
/// through one by one (each VI finds a region by the hint the region
/// keeps, which the other VI's use of it keeps overwriting): every message
/// lands in the region and place its receive named, and a region a posted
/// receive uses is still refused to deregister.
#[test]
fn many_regions_shared_by_two_vis_are_found_by_each() {
    let (_e, s1, s2) = engine();
    let attrs = ViAttributes::default;
    let (mut a, mut b) = connect(&s1, &s2, 19, attrs(), attrs());
    let (mut c, mut d) = connect(&s1, &s2, 20, attrs(), attrs());
    let ra = s1.register_memory(4096).unwrap();
    let rbs: Vec<MemRegion> = (0..20).map(|_| s2.register_memory(4096).unwrap()).collect();
    for i in 0..200u64 {
        let k = (i as usize * 7) % rbs.len();
        let at = 64 * (i as usize % 8);
        let (tx, rx) = if i % 2 == 0 {
            (&mut a, &mut b)
        } else {
            (&mut c, &mut d)
        };
        rx.post_recv(i, &[ViSeg::new(&rbs[k], at, 64)]).unwrap();
        ra.write(0, &[i as u8; 64]);
        tx.post_send(i, &[ViSeg::new(&ra, 0, 64)]).unwrap();
        let got = rx.recv_wait(T).unwrap();
        assert_eq!((got.id, got.status), (i, Ok(64)));
        assert_eq!(tx.send_wait(T).unwrap().status, Ok(64));
        let mut msg = [0u8; 64];
        rbs[k].read(at, &mut msg);
        assert_eq!(msg, [i as u8; 64], "message {i} in region {k} at {at}");
    }
    // One posted receive holds its region; the others go.
    let mut rbs = rbs;
    let held = rbs.remove(3);
    d.post_recv(500, &[ViSeg::new(&held, 0, 64)]).unwrap();
    let held = match held.deregister() {
        Err((r, _)) => r,
        Ok(()) => panic!("a region a posted receive uses was deregistered"),
    };
    for (k, r) in rbs.into_iter().enumerate() {
        r.deregister()
            .unwrap_or_else(|(_, e)| panic!("region {k}: {e}"));
    }
    c.post_send(500, &[ViSeg::new(&ra, 0, 64)]).unwrap();
    assert_eq!(d.recv_wait(T).unwrap().status, Ok(64));
    held.deregister().unwrap_or_else(|(_, e)| panic!("{e}"));
}
