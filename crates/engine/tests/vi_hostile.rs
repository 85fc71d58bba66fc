//! A hostile client of VIs the engine carries: it writes what it likes
//! into its own VI's send and receive queues (unknown region handles,
//! another process's regions, offsets and lengths past a region, too many
//! segments, reserved flags set, more than a VI carries, a region
//! deregistered meanwhile, queue heads far from where the engine is).
//! Each bad descriptor completes with `BadDescriptor` on that VI only,
//! which breaks and tells its peer; it is counted once in
//! `bad_descriptors`, and every error completion in `errors`. An honest VI
//! pair on the same two engines keeps streaming beside it, every message
//! checked.
//!
//! Two engines are joined by a `MemoryHub` and stepped on the test's
//! thread; the clients speak the real control protocol
//! (`invoker::LocalClient`) and drive the VIs' segments by hand
//! (`invoker::RawVi`).

mod hub;
mod vis;

use std::net::SocketAddr;
use std::time::Duration;

use unet_abi::*;
use unet_control::ViParams;
use unet_engine::invoker::{connect_vis, LocalClient, RawRegion, RawVi};
use unet_engine::wire::{MemoryHub, PortConfig};
use unet_engine::{Dispatcher, EngineConfig};
use vis::*;

const BAD: i32 = -(ViError::BadDescriptor as i32);

/// Bytes of the hostile client's region.
const REGION: usize = 64 << 10;

/// Two engines, an honest pair streaming from A to B, a hostile client on
/// A and the client on B its VIs connect to.
struct Rig {
    _hub: MemoryHub,
    a: Dispatcher,
    b: Dispatcher,
    at_b: SocketAddr,
    honest: Honest,
    /// Kept: closing them would reclaim the honest pair.
    _honest_a: LocalClient,
    _honest_b: LocalClient,
    bad: LocalClient,
    peer: LocalClient,
    /// The hostile client's region on A, the peer's on B.
    bad_mem: RawRegion,
    peer_mem: RawRegion,
    next_tag: u64,
}

fn params(r: Reliability) -> ViParams {
    ViParams {
        reliability: r,
        strict_rnr: false,
        break_timeout_ms: 0,
    }
}

/// What the honest sender keeps in the slot no honest message uses, to
/// find out whether it leaks to a hostile client's peer.
fn secret() -> Vec<u8> {
    (0..4096u32).map(|i| (i * 7 + 0x5a) as u8).collect()
}

impl Rig {
    fn new() -> Rig {
        let hub = MemoryHub::new();
        let cfg = || EngineConfig {
            allow_peers: vec!["10.0.0.0/8".parse().unwrap()],
            ..EngineConfig::default()
        };
        let (at_a, at_b) = (hub::addr(1), hub::addr(2));
        let port = |at| Box::new(hub.bind(at, PortConfig::loopback()).unwrap());
        let mut a = Dispatcher::with_transport(cfg(), port(at_a)).unwrap();
        let mut b = Dispatcher::with_transport(cfg(), port(at_b)).unwrap();
        let mut ha = LocalClient::new(&mut a).unwrap();
        let mut hb = LocalClient::new(&mut b).unwrap();
        let mut bad = LocalClient::new(&mut a).unwrap();
        let mut peer = LocalClient::new(&mut b).unwrap();
        // One slot more than the stream uses, for the secret.
        let tx_mem = ha
            .register_memory(&mut a, SLOT * (SLOTS as usize + 1))
            .unwrap();
        tx_mem.write(SLOT * SLOTS as usize, &secret());
        let rx_mem = hb.register_memory(&mut b, SLOT * SLOTS as usize).unwrap();
        let (tx, rx) = connect_vis(
            (&mut a, &mut ha),
            (&mut b, &mut hb),
            at_b,
            1,
            params(Reliability::ReliableDelivery),
            &mut || {},
        )
        .unwrap();
        let bad_mem = bad.register_memory(&mut a, REGION).unwrap();
        let peer_mem = peer.register_memory(&mut b, REGION).unwrap();
        Rig {
            _hub: hub,
            a,
            b,
            at_b,
            honest: Honest::new(tx, rx, tx_mem, rx_mem),
            _honest_a: ha,
            _honest_b: hb,
            bad,
            peer,
            bad_mem,
            peer_mem,
            next_tag: 100,
        }
    }

    /// A hostile VI on A connected to a VI of the peer client on B, at
    /// level `r`.
    fn hostile(&mut self, r: Reliability) -> (RawVi, RawVi) {
        self.next_tag += 1;
        connect_vis(
            (&mut self.a, &mut self.bad),
            (&mut self.b, &mut self.peer),
            self.at_b,
            self.next_tag,
            params(r),
            &mut || {},
        )
        .unwrap()
    }

    /// Step both engines until `done(bad, peer)`, the honest pair moving
    /// on meanwhile.
    fn until(
        &mut self,
        what: &str,
        bad: &mut RawVi,
        peer: &mut RawVi,
        mut done: impl FnMut(&mut RawVi, &mut RawVi) -> bool,
    ) {
        let honest = &mut self.honest;
        step_until(&mut self.a, &mut self.b, &mut || {}, what, |_, _| {
            honest.take();
            honest.post(2);
            done(bad, peer)
        });
    }

    /// Step until every honest message posted has arrived, checking each.
    fn honest_done(&mut self) {
        let honest = &mut self.honest;
        step_until(
            &mut self.a,
            &mut self.b,
            &mut || {},
            "the honest stream",
            |_, _| honest.take(),
        );
    }

    /// Close both VIs of a hostile pair (whatever their state).
    fn close(&mut self, bad: RawVi, peer: RawVi) {
        self.bad.close_vi(&mut self.a, bad.id()).unwrap();
        self.peer.close_vi(&mut self.b, peer.id()).unwrap();
    }

    /// A valid send of the hostile client: `len` bytes of its region.
    fn good_send(&self, id: u64, len: u32) -> ViDesc {
        desc(id, &[(self.bad_mem.handle(), 0, len)])
    }

    /// A valid receive of the hostile client: its whole region's first
    /// 4 KiB.
    fn good_recv(&self, id: u64) -> ViDesc {
        desc(id, &[(self.bad_mem.handle(), 0, 4096)])
    }
}

/// The hostile VI broke with a bad descriptor, counted once, every error
/// completion (`errors`) counted; its peer was told and broke with the
/// same reason, and got no more than the `got` messages sent before.
fn broke_on_bad(what: &str, bad: &RawVi, peer: &mut RawVi, errors: u64, got: u64) {
    assert_eq!(
        bad.state(),
        ViError::BadDescriptor as u32,
        "{what}: {:?}",
        bad.nonzero_counters()
    );
    assert_eq!(bad.counter(ViCounter::BadDescriptors), 1, "{what}");
    assert_eq!(bad.counter(ViCounter::Errors), errors, "{what}");
    assert_eq!(
        peer.state(),
        ViError::BadDescriptor as u32,
        "{what}: the peer"
    );
    for c in recvs_done(peer) {
        assert_eq!(c.status, BAD, "{what}: the peer's receive {c:?}");
    }
    assert_eq!(peer.counter(ViCounter::RxMsgs), got, "{what}: the peer");
}

/// Every kind of bad send descriptor, on each reliability level: the
/// descriptor completes with `BadDescriptor`, so do the two valid ones
/// posted after it; the VI breaks, counts one bad descriptor and three
/// errors, and sends nothing; its peer breaks with the same reason; the
/// honest pair beside it loses nothing.
#[test]
fn bad_send_descriptors_break_only_their_vi() {
    let mut rig = Rig::new();
    let mine = rig.bad_mem.handle();
    let others = rig.honest.tx_mem.handle();
    let max = VI_MAX_SEGMENTS as u32;
    let len = REGION as u64;
    let big = rig.bad.register_memory(&mut rig.a, 512 << 10).unwrap();
    let cases: Vec<(&str, ViDesc)> = vec![
        ("an unknown handle", desc(1, &[(0xdead_beef, 0, 64)])),
        ("handle 0", desc(1, &[(0, 0, 64)])),
        (
            "another process's region",
            desc(1, &[(others, SLOT as u64 * SLOTS, 4096)]),
        ),
        ("an offset at the region's end", desc(1, &[(mine, len, 1)])),
        ("a length past the end", desc(1, &[(mine, len - 10, 11)])),
        (
            "an offset that overflows",
            desc(1, &[(mine, u64::MAX - 3, 8)]),
        ),
        ("a length of 4 GiB", desc(1, &[(mine, 0, u32::MAX)])),
        (
            "a good segment, then a bad one",
            desc(1, &[(mine, 0, 100), (mine, len, 100)]),
        ),
        ("a bad segment among eight", {
            let mut segs = [(mine, 0, 8); VI_MAX_SEGMENTS];
            segs[VI_MAX_SEGMENTS - 1] = (0xdead_beef, 0, 8);
            desc(1, &segs)
        }),
        ("nine segments", {
            let mut d = desc(1, &[(mine, 0, 8); VI_MAX_SEGMENTS]);
            d.nsegs = max + 1;
            d
        }),
        ("u32::MAX segments", {
            let mut d = desc(1, &[(mine, 0, 8)]);
            d.nsegs = u32::MAX;
            d
        }),
        ("flags 1", {
            let mut d = desc(1, &[(mine, 0, 8)]);
            d.flags = 1;
            d
        }),
        ("flags 0x8000_0000", {
            let mut d = desc(1, &[(mine, 0, 8)]);
            d.flags = 0x8000_0000;
            d
        }),
        (
            "more than a VI carries",
            desc(
                1,
                &[
                    (big.handle(), 0, 200 << 10),
                    (big.handle(), 200 << 10, 200 << 10),
                ],
            ),
        ),
    ];
    for level in [
        Reliability::Unreliable,
        Reliability::ReliableDelivery,
        Reliability::ReliableReception,
    ] {
        for (what, d) in &cases {
            let what = format!("{what} ({})", level.name());
            rig.honest.post(8);
            let (mut bad, mut peer) = rig.hostile(level);
            for i in 0..4 {
                peer.push_recv(desc(i, &[(rig.peer_mem.handle(), 4096 * i, 4096)]))
                    .unwrap();
            }
            bad.push_send(*d).unwrap();
            bad.push_send(rig.good_send(2, 100)).unwrap();
            bad.push_send(rig.good_send(3, 200)).unwrap();
            rig.until(&what, &mut bad, &mut peer, |bad, peer| {
                bad.state() != 0 && peer.state() != 0
            });
            let done = sends_done(&mut bad);
            let got: Vec<_> = done.iter().map(|c| (c.id, c.status, c.len)).collect();
            assert_eq!(got, [(1, BAD, 0), (2, BAD, 0), (3, BAD, 0)], "{what}");
            assert_eq!(bad.counter(ViCounter::TxMsgs), 0, "{what}: sent nothing");
            broke_on_bad(&what, &bad, &mut peer, 3, 0);
            rig.close(bad, peer);
            rig.honest_done();
        }
    }
}

/// A send naming a region its owner deregistered after registering it:
/// refused like an unknown one; a region registered later gets a handle
/// of its own and works.
#[test]
fn a_send_from_a_deregistered_region_is_refused() {
    let mut rig = Rig::new();
    let gone = rig.bad.register_memory(&mut rig.a, 4096).unwrap();
    rig.bad
        .deregister_memory(&mut rig.a, gone.handle())
        .unwrap();
    // Deregistering twice, or another's region, is refused.
    assert!(rig
        .bad
        .deregister_memory(&mut rig.a, gone.handle())
        .is_err());
    let others = rig.honest.tx_mem.handle();
    assert!(rig.bad.deregister_memory(&mut rig.a, others).is_err());
    let fresh = rig.bad.register_memory(&mut rig.a, 4096).unwrap();
    assert_ne!(fresh.handle(), gone.handle());
    rig.honest.post(8);
    let (mut bad, mut peer) = rig.hostile(Reliability::ReliableDelivery);
    peer.push_recv(desc(1, &[(rig.peer_mem.handle(), 0, 4096)]))
        .unwrap();
    peer.push_recv(desc(2, &[(rig.peer_mem.handle(), 4096, 4096)]))
        .unwrap();
    // The fresh region works.
    fresh.write(0, b"fresh");
    bad.push_send(desc(1, &[(fresh.handle(), 0, 5)])).unwrap();
    rig.until(
        "the fresh region's message",
        &mut bad,
        &mut peer,
        |bad, _| bad.counter(ViCounter::TxMsgs) == 1,
    );
    rig.until("its completion", &mut bad, &mut peer, |_, peer| {
        peer.counter(ViCounter::RxMsgs) == 1
    });
    rig.until("its send completed", &mut bad, &mut peer, |bad, _| {
        bad.completions_published().0 == 1
    });
    let c = peer
        .recv_done()
        .expect("the fresh region's message arrived");
    assert_eq!((c.id, c.status, c.len), (1, 0, 5));
    let mut v = [0u8; 5];
    rig.peer_mem.read(0, &mut v);
    assert_eq!(&v, b"fresh");
    // The deregistered one does not.
    bad.push_send(desc(2, &[(gone.handle(), 0, 5)])).unwrap();
    rig.until("the break", &mut bad, &mut peer, |bad, peer| {
        bad.state() != 0 && peer.state() != 0
    });
    let got: Vec<_> = sends_done(&mut bad)
        .iter()
        .map(|c| (c.id, c.status))
        .collect();
    assert_eq!(got, [(1, 0), (2, BAD)]);
    broke_on_bad("a deregistered region", &bad, &mut peer, 1, 1);
    rig.close(bad, peer);
    rig.honest_done();
}

/// Every kind of bad receive descriptor: judged when a message comes for
/// it, which completes it with `BadDescriptor` (and the valid receive
/// posted after it too); nothing is written anywhere, least of all into
/// another process's region it named; the VI breaks, counts one bad
/// descriptor and two errors; the peer's send fails with the reason.
#[test]
fn bad_receive_descriptors_break_only_their_vi() {
    let mut rig = Rig::new();
    let mine = rig.bad_mem.handle();
    let others = rig.honest.tx_mem.handle();
    let len = REGION as u64;
    let cases: Vec<(&str, ViDesc)> = vec![
        ("an unknown handle", desc(1, &[(0xdead_beef, 0, 4096)])),
        (
            "another process's region",
            desc(1, &[(others, SLOT as u64 * SLOTS, 4096)]),
        ),
        (
            "an offset past the end",
            desc(1, &[(mine, len + 4096, 4096)]),
        ),
        ("a length past the end", desc(1, &[(mine, len - 100, 4096)])),
        ("an offset that overflows", desc(1, &[(mine, u64::MAX, 1)])),
        ("nine segments", {
            let mut d = desc(1, &[(mine, 0, 512); VI_MAX_SEGMENTS]);
            d.nsegs = VI_MAX_SEGMENTS as u32 + 1;
            d
        }),
        ("flags 2", {
            let mut d = desc(1, &[(mine, 0, 4096)]);
            d.flags = 2;
            d
        }),
    ];
    for level in [
        Reliability::Unreliable,
        Reliability::ReliableDelivery,
        Reliability::ReliableReception,
    ] {
        for (what, d) in &cases {
            let what = format!("{what} ({})", level.name());
            rig.honest.post(8);
            let (mut bad, mut peer) = rig.hostile(level);
            bad.push_recv(*d).unwrap();
            bad.push_recv(rig.good_recv(2)).unwrap();
            rig.peer_mem.write(0, b"for the hostile client");
            peer.push_send(desc(7, &[(rig.peer_mem.handle(), 0, 22)]))
                .unwrap();
            rig.until(&what, &mut bad, &mut peer, |bad, peer| {
                bad.state() != 0 && peer.state() != 0
            });
            let got: Vec<_> = recvs_done(&mut bad)
                .iter()
                .map(|c| (c.id, c.status, c.len))
                .collect();
            assert_eq!(got, [(1, BAD, 0), (2, BAD, 0)], "{what}");
            assert_eq!(bad.counter(ViCounter::RxMsgs), 0, "{what}");
            broke_on_bad(&what, &bad, &mut peer, 2, 0);
            // The peer's send: complete once it left (unreliable), or
            // failed with the reason.
            let sent = sends_done(&mut peer);
            let want = if level == Reliability::Unreliable {
                (7, 0)
            } else {
                (7, BAD)
            };
            assert_eq!(
                sent.iter().map(|c| (c.id, c.status)).collect::<Vec<_>>(),
                [want],
                "{what}: the peer's send"
            );
            let mut v = vec![0u8; 4096];
            rig.honest.tx_mem.read(SLOT * SLOTS as usize, &mut v);
            assert!(
                v == secret(),
                "{what}: another process's region was written"
            );
            rig.close(bad, peer);
            rig.honest_done();
        }
    }
}

/// A receive posted, taken by the engine, then its region deregistered
/// before a message comes: refused when the message comes.
#[test]
fn a_receive_into_a_region_deregistered_meanwhile_is_refused() {
    let mut rig = Rig::new();
    let r = rig.bad.register_memory(&mut rig.a, 4096).unwrap();
    rig.honest.post(8);
    let (mut bad, mut peer) = rig.hostile(Reliability::ReliableDelivery);
    bad.push_recv(desc(1, &[(r.handle(), 0, 4096)])).unwrap();
    rig.until("the receive taken", &mut bad, &mut peer, |bad, _| {
        bad.recvs_taken() == 1
    });
    rig.bad.deregister_memory(&mut rig.a, r.handle()).unwrap();
    peer.push_send(desc(7, &[(rig.peer_mem.handle(), 0, 100)]))
        .unwrap();
    rig.until("the break", &mut bad, &mut peer, |bad, peer| {
        bad.state() != 0 && peer.state() != 0
    });
    let got: Vec<_> = recvs_done(&mut bad)
        .iter()
        .map(|c| (c.id, c.status))
        .collect();
    assert_eq!(got, [(1, BAD)]);
    broke_on_bad("a deregistered receive region", &bad, &mut peer, 1, 0);
    rig.close(bad, peer);
    rig.honest_done();
}

/// Queue heads the engine cannot have been given: more than a queue
/// ahead of where it is, or behind it. Nothing is taken from such a
/// queue; the VI breaks, counting one bad descriptor; the honest pair
/// carries on.
#[test]
fn impossible_queue_heads_break_only_their_vi() {
    let mut rig = Rig::new();
    // The new head, from the tail and the queue's capacity.
    type Head = fn(u64, u64) -> u64;
    let cases: [(&str, bool, Head); 6] = [
        ("send head a queue and one ahead", true, |t, cap| {
            t + cap + 1
        }),
        ("send head at u64::MAX", true, |_, _| u64::MAX),
        ("send head behind the tail", true, |t, _| t - 1),
        ("receive head a queue and one ahead", false, |t, cap| {
            t + cap + 1
        }),
        ("receive head at u64::MAX", false, |_, _| u64::MAX),
        ("receive head behind the tail", false, |t, _| t - 1),
    ];
    for (what, send, head) in cases {
        rig.honest.post(8);
        let (mut bad, mut peer) = rig.hostile(Reliability::ReliableDelivery);
        let cap = bad.layout().cap as u64;
        // Three good messages first, both ways, so that the tails are not 0.
        for i in 0..3 {
            bad.push_send(rig.good_send(i, 10)).unwrap();
            bad.push_recv(rig.good_recv(i)).unwrap();
            peer.push_recv(desc(i, &[(rig.peer_mem.handle(), 4096 * i, 4096)]))
                .unwrap();
            peer.push_send(desc(i, &[(rig.peer_mem.handle(), 0, 10)]))
                .unwrap();
        }
        rig.until("the good messages", &mut bad, &mut peer, |bad, peer| {
            bad.counter(ViCounter::RxMsgs) == 3 && peer.counter(ViCounter::RxMsgs) == 3
        });
        let tail = if send {
            bad.sends_taken()
        } else {
            bad.recvs_taken()
        };
        assert_eq!(tail, 3, "{what}");
        if send {
            bad.set_send_head(head(tail, cap));
        } else {
            bad.set_recv_head(head(tail, cap));
        }
        rig.until(what, &mut bad, &mut peer, |bad, peer| {
            bad.state() != 0 && peer.state() != 0
        });
        assert_eq!(bad.state(), ViError::BadDescriptor as u32, "{what}");
        assert_eq!(bad.counter(ViCounter::BadDescriptors), 1, "{what}");
        assert_eq!(
            bad.counter(ViCounter::TxMsgs),
            3,
            "{what}: nothing more sent"
        );
        assert_eq!(peer.state(), ViError::BadDescriptor as u32, "{what}");
        assert_eq!(peer.counter(ViCounter::RxMsgs), 3, "{what}");
        // Every error completion the engine published is counted.
        let errors = sends_done(&mut bad)
            .iter()
            .chain(&recvs_done(&mut bad))
            .filter(|c| c.status != 0)
            .count() as u64;
        assert_eq!(bad.counter(ViCounter::Errors), errors, "{what}");
        rig.close(bad, peer);
        rig.honest_done();
    }
}

/// A client that scribbles over its completion rings' tails (ahead of
/// what the engine published, behind it, far away) while it sends and
/// receives: it loses completions, nothing else; the engine never writes
/// outside the rings, and the honest pair carries on.
#[test]
fn scribbled_completion_tails_cost_only_their_vi() {
    let mut rig = Rig::new();
    rig.honest.post(8);
    let (mut bad, mut peer) = rig.hostile(Reliability::ReliableDelivery);
    for (k, (s, r)) in [
        (5u64, 5u64),
        (u64::MAX, 0),
        (0, u64::MAX - 3),
        (1 << 40, 1 << 40),
        (0, 0),
    ]
    .into_iter()
    .enumerate()
    {
        let k = k as u64;
        for i in 0..40 {
            bad.push_send(rig.good_send(k * 100 + i, 64)).unwrap();
            peer.push_recv(desc(i, &[(rig.peer_mem.handle(), 0, 4096)]))
                .unwrap();
        }
        bad.set_completion_tails(s, r);
        rig.until("the sends", &mut bad, &mut peer, |_, peer| {
            peer.counter(ViCounter::RxMsgs) == (k + 1) * 40
        });
        recvs_done(&mut peer);
        sends_done(&mut peer);
    }
    assert_eq!(bad.state(), 0, "{:?}", bad.nonzero_counters());
    assert_eq!(bad.counter(ViCounter::Errors), 0);
    rig.close(bad, peer);
    rig.honest_done();
}

/// Completions come in the order the descriptors were posted, as the
/// segment's layout promises (`ViHeader`): a bad send descriptor behind
/// sends still in flight completes after them.
#[test]
fn completions_of_a_broken_vi_come_in_posting_order() {
    let mut rig = Rig::new();
    for level in [
        Reliability::ReliableDelivery,
        Reliability::ReliableReception,
    ] {
        let (mut bad, mut peer) = rig.hostile(level);
        bad.push_send(rig.good_send(1, 100)).unwrap();
        bad.push_send(rig.good_send(2, 100)).unwrap();
        bad.push_send(desc(3, &[(0xdead, 0, 8)])).unwrap();
        bad.push_send(rig.good_send(4, 100)).unwrap();
        rig.until("the break", &mut bad, &mut peer, |bad, peer| {
            bad.state() != 0 && peer.state() != 0
        });
        let ids: Vec<u64> = sends_done(&mut bad).iter().map(|c| c.id).collect();
        assert_eq!(ids, [1, 2, 3, 4], "{}", level.name());
        rig.close(bad, peer);
    }
}

/// Step `e` until a turn finds nothing to do: true if one does within
/// `turns`.
fn goes_idle(e: &mut Dispatcher, turns: usize) -> bool {
    (0..turns).any(|_| e.step() == 0)
}

/// A VI in the error state whose client keeps its queues in a state the
/// engine cannot finish (a head behind the tail, more descriptors than
/// its completion ring has room for) costs the engine nothing once it has
/// done what it can: its turns find nothing to do, and it may sleep.
#[test]
fn a_broken_vi_the_engine_cannot_drain_lets_it_go_idle() {
    let mut rig = Rig::new();
    let quiet = |rig: &mut Rig| {
        rig.honest_done();
        let (a, b) = (&mut rig.a, &mut rig.b);
        step_for(a, b, &mut || {}, Duration::from_millis(20));
        goes_idle(&mut rig.a, 10_000)
    };
    // Without a hostile VI it does (so that the test can pass).
    rig.honest.post(8);
    assert!(quiet(&mut rig), "the engine never goes idle at all");
    // A send queue's head put behind its tail.
    let (mut bad, mut peer) = rig.hostile(Reliability::ReliableDelivery);
    bad.push_send(rig.good_send(1, 10)).unwrap();
    rig.until("the send taken", &mut bad, &mut peer, |bad, _| {
        bad.sends_taken() == 1
    });
    bad.set_send_head(0);
    rig.until("the break", &mut bad, &mut peer, |bad, peer| {
        bad.state() != 0 && peer.state() != 0
    });
    let behind = quiet(&mut rig);
    rig.close(bad, peer);
    assert!(quiet(&mut rig), "idle again once that VI is closed");
    // A full completion ring nobody reads, a descriptor still queued.
    let (mut bad, mut peer) = rig.hostile(Reliability::ReliableDelivery);
    bad.push_send(desc(1, &[(0xdead, 0, 8)])).unwrap();
    rig.until("the break", &mut bad, &mut peer, |bad, peer| {
        bad.state() != 0 && peer.state() != 0
    });
    let cap = bad.layout().cap as u64;
    for i in 0..cap {
        bad.push_send(rig.good_send(2 + i, 10)).unwrap();
    }
    let unread = quiet(&mut rig);
    assert_eq!(bad.completions_published().0, cap, "as many as fit");
    rig.close(bad, peer);
    assert!(
        behind && unread,
        "the engine goes idle beside a broken VI whose send head is behind \
         its tail: {behind}; whose completion ring is full: {unread}"
    );
}

/// Run `turns` turns of both engines of `rig` on a thread of their own;
/// the rig back, or `None` if they have not come back within ten seconds
/// (a turn that never ends: the thread is left spinning).
fn turns_on_a_thread(mut rig: Rig, turns: usize) -> Option<Rig> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for _ in 0..turns {
            rig.a.step();
            rig.b.step();
        }
        let _ = tx.send(rig);
    });
    rx.recv_timeout(Duration::from_secs(10)).ok()
}

/// An impossible queue head published together with a completion tail
/// ahead of everything the engine published: the VI breaks, its queue is
/// completed as far as the completion ring has room, and the engine's
/// turn ends. (With the tail ahead the engine finds the ring always
/// empty, and completes descriptor after descriptor up to the head.)
#[test]
fn an_impossible_head_with_a_tail_ahead_does_not_stall_the_engine() {
    let mut stalled = Vec::new();
    for send in [true, false] {
        let mut rig = Rig::new();
        rig.honest.post(8);
        let (mut bad, mut peer) = rig.hostile(Reliability::ReliableDelivery);
        bad.set_completion_tails(u64::MAX, u64::MAX);
        if send {
            bad.set_send_head(1 << 62);
        } else {
            bad.set_recv_head(1 << 62);
        }
        let Some(mut rig) = turns_on_a_thread(rig, 1000) else {
            stalled.push(if send { "send" } else { "receive" });
            continue;
        };
        rig.until("the break", &mut bad, &mut peer, |bad, peer| {
            bad.state() != 0 && peer.state() != 0
        });
        assert_eq!(bad.state(), ViError::BadDescriptor as u32);
        rig.close(bad, peer);
        rig.honest_done();
    }
    assert!(
        stalled.is_empty(),
        "the engine's turn never ended with an impossible {stalled:?} queue head"
    );
}

/// The same, once the VI broke: the engine goes idle. The client's
/// completion tails claim it read more than the engine ever published, so
/// the engine finds room for every completion; the queue's head is
/// 2^62 descriptors ahead, far more than the queue holds. Completing those
/// a queue's worth per turn, for ever, would keep the engine busy (never
/// asleep) at the client's word.
#[test]
fn an_impossible_head_with_a_tail_ahead_lets_the_engine_go_idle() {
    let mut busy = Vec::new();
    for send in [true, false] {
        let mut rig = Rig::new();
        rig.honest.post(8);
        let (mut bad, mut peer) = rig.hostile(Reliability::ReliableDelivery);
        bad.set_completion_tails(u64::MAX, u64::MAX);
        if send {
            bad.set_send_head(1 << 62);
        } else {
            bad.set_recv_head(1 << 62);
        }
        rig.until("the break", &mut bad, &mut peer, |bad, peer| {
            bad.state() != 0 && peer.state() != 0
        });
        assert_eq!(bad.state(), ViError::BadDescriptor as u32);
        rig.honest_done();
        let (a, b) = (&mut rig.a, &mut rig.b);
        step_for(a, b, &mut || {}, Duration::from_millis(20));
        if !goes_idle(&mut rig.a, 10_000) {
            let (s, r) = bad.completions_published();
            busy.push(format!(
                "{} queue: {s} send and {r} receive completions published",
                if send { "send" } else { "receive" }
            ));
        }
        rig.close(bad, peer);
    }
    assert!(busy.is_empty(), "the engine never goes idle: {busy:?}");
}
