//! The table of peer queues between two runtimes in one process: a send
//! becomes a `PeerTx` event, the event puts the message on the link, the
//! other runtime's turn takes it as a `PeerRx` event from the peer; a
//! link left by its peer refuses sends with `E_DEAD` and its row says
//! why; the caps and a bad segment are refused with their codes.

use std::os::fd::OwnedFd;

use unet_abi::spine::{AM_BULK, DEST_PEER};

use super::*;
use crate::config::EngineConfig;
use crate::spine::peer::DEFAULT_STALL_TIMEOUT;
use crate::spine::rt::{E_BAD_DEST, E_DEAD};
use unet_abi::peer::DEFAULT_PEER_GEOMETRY as DEFAULT_GEOMETRY;

fn rt() -> Rt {
    Rt::new(&EngineConfig::default())
}

fn segment() -> OwnedFd {
    PeerLink::create(DEFAULT_GEOMETRY, 7).unwrap()
}

/// Join `a` and `b` (as process `proc`): their indices.
fn join(p: &Poller, a: &mut Rt, b: &mut Rt, proc: usize) -> (u32, u32) {
    let seg = segment();
    let two = seg.try_clone().unwrap();
    let (ia, da) = a.peers.join(p, Some((1, proc)), seg, 0, None).unwrap();
    let da = doorbell_of(da).unwrap();
    let (ib, db) = b.peers.join(p, Some((1, proc)), two, 1, Some(da)).unwrap();
    a.peers
        .row_mut(ia)
        .unwrap()
        .link
        .set_peer_doorbell(EventFd::from_fd(db));
    // As the doorbell request does: A looks and learns its peer.
    a.peers.check_all(Instant::now());
    (ia, ib)
}

/// Run what `rt` queued: forwards go on their links, arrivals are handed
/// back.
fn run(rt: &mut Rt) -> Vec<Event> {
    let mut out = Vec::new();
    while let Some(ev) = rt.queue.pop() {
        match ev.kind {
            EventKind::PeerTx => forward(rt, ev),
            _ => out.push(ev),
        }
    }
    out
}

#[test]
fn a_send_to_a_peer_arrives_there_as_from_the_peer_and_answers_back() {
    let p = Poller::new().unwrap();
    let (mut a, mut b) = (rt(), rt());
    let (ia, ib) = join(&p, &mut a, &mut b, 1);
    assert_ne!(ia & 0x00FF_FFFF, 0);
    let dest = DEST_PEER << 24 | ia;
    assert_eq!(a.send(dest, 70, b"ping", None), 0);
    let bulk = a.bufs.alloc(&[9; 300]).unwrap();
    assert_eq!(a.send(dest, 71, b"bulk", Some(bulk)), 0);
    assert!(run(&mut a).is_empty());
    assert_eq!((a.msgs.live(), a.bufs.live()), (0, 0), "freed once sent");

    assert_eq!(take(&mut b), 2);
    let got = run(&mut b);
    assert_eq!(got.len(), 2);
    let m = b.msgs.get(got[0].msg).unwrap();
    assert_eq!(got[0].kind, EventKind::PeerRx);
    assert_eq!(
        (m.hdr.handler, m.hdr.src_kind, m.hdr.src),
        (70, AM_SRC_PEER, ib)
    );
    assert_eq!(m.args(), b"ping");
    let m = b.msgs.get(got[1].msg).unwrap();
    assert_eq!(m.hdr.flags & AM_BULK, AM_BULK);
    assert_eq!(b.bufs.data(m.bulk.unwrap()).unwrap(), &[9; 300][..]);

    // The reply goes back over the same link.
    let back = crate::spine::rt::reply_dest(AM_SRC_PEER, ib);
    assert_eq!(b.send(back, 80, b"pong", None), 0);
    run(&mut b);
    assert_eq!(take(&mut a), 1);
    let got = run(&mut a);
    assert_eq!(a.msgs.get(got[0].msg).unwrap().args(), b"pong");

    // A look at the peer sees what it took (the depth).
    a.peers.check_all(Instant::now());
    let l = a.peers.listing();
    assert_eq!(l.peers.len(), 1);
    let row = &l.peers[0];
    assert_eq!((row.index, row.side, row.state.as_str()), (ia, 0, "alive"));
    assert_eq!((row.msgs_out, row.msgs_in, row.depth), (2, 1, 0));
    assert_eq!(row.peer_pid, std::process::id());
}

#[test]
fn a_left_peer_is_dead_its_sends_fail_and_a_new_join_works() {
    let p = Poller::new().unwrap();
    let (mut a, mut b) = (rt(), rt());
    let (ia, ib) = join(&p, &mut a, &mut b, 1);
    let dest = DEST_PEER << 24 | ia;
    // Two queued for B, then B leaves: they are dropped, counted.
    assert_eq!(a.send(dest, 70, b"1", None), 0);
    assert_eq!(a.send(dest, 70, b"2", None), 0);
    run(&mut a);
    b.peers.leave(ib).unwrap();
    assert_eq!(b.peers.leave(ib), Err(ErrorCode::NoSuchPeer));
    assert!(b.peers.is_empty());
    a.peers.check_all(Instant::now());
    assert!(!a.peers.alive(ia));
    assert_eq!(a.send(dest, 70, b"3", None), E_DEAD);
    assert_eq!(a.msgs.live(), 0);
    let row = &a.peers.listing().peers[0];
    assert_eq!(
        (row.state.as_str(), row.reason.as_str()),
        ("dead", "closed")
    );
    assert_eq!(row.dropped("dead_out"), 2);
    assert_eq!(row.dropped("tx_dead"), 1);
    // No such link at all.
    assert_eq!(a.send(DEST_PEER << 24 | 0xFFFF, 70, b"", None), E_BAD_DEST);

    // Joined again: a new index, and it carries messages.
    let (ia2, _) = join(&p, &mut a, &mut b, 1);
    assert_ne!(ia2, ia);
    assert_eq!(a.send(DEST_PEER << 24 | ia2, 70, b"4", None), 0);
    run(&mut a);
    assert_eq!(take(&mut b), 1);
    assert_eq!(a.peers.listing().peers.len(), 2, "the dead row stays");
}

#[test]
fn joins_are_capped_per_process_and_per_adapter_and_bad_segments_refused() {
    let p = Poller::new().unwrap();
    let mut a = rt();
    let seg = |side| (segment(), side);
    for _ in 0..PEERS_PER_PROCESS {
        let (s, side) = seg(0);
        a.peers.join(&p, Some((1, 1)), s, side, None).unwrap();
    }
    let (s, side) = seg(0);
    assert_eq!(
        a.peers.join(&p, Some((1, 1)), s, side, None).unwrap_err(),
        ErrorCode::ObjectQuota
    );
    for i in PEERS_PER_PROCESS..PEERS_PER_ADAPTER {
        let (s, side) = seg(1);
        a.peers.join(&p, Some((2, i)), s, side, None).unwrap();
    }
    let (s, side) = seg(0);
    assert_eq!(
        a.peers.join(&p, Some((3, 0)), s, side, None).unwrap_err(),
        ErrorCode::NoResources
    );
    // A dead link's slot is taken by the next join.
    let first = a.peers.listing().peers[0].index;
    a.peers.row_mut(first).unwrap().dead = Some(Death::Closed);
    let (s, side) = seg(0);
    let (i, _) = a.peers.join(&p, Some((3, 0)), s, side, None).unwrap();
    assert_eq!(i & 0xF, first & 0xF);
    assert!(a.peers.row(first).is_none());

    // A doorbell that is not an eventfd.
    let f = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
    assert_eq!(doorbell_of(f).err(), Some(ErrorCode::BadRequest));

    // Not a sealed memory file; a side attached before.
    let mut b = rt();
    let f = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
    assert_eq!(
        b.peers.join(&p, None, f, 0, None).unwrap_err(),
        ErrorCode::BadPeer
    );
    let s = segment();
    let again = s.try_clone().unwrap();
    b.peers.join(&p, None, s, 0, None).unwrap();
    assert_eq!(
        b.peers.join(&p, None, again, 0, None).unwrap_err(),
        ErrorCode::BadPeer
    );
}

#[test]
fn a_peer_that_stops_taking_messages_is_stalled_once_the_timeout_passes() {
    let p = Poller::new().unwrap();
    let (mut a, mut b) = (rt(), rt());
    let (ia, _) = join(&p, &mut a, &mut b, 1);
    let t0 = Instant::now();
    assert!(
        a.peers.deadline().is_none(),
        "nothing waits, the peer is known"
    );
    assert_eq!(a.send(DEST_PEER << 24 | ia, 70, b"x", None), 0);
    run(&mut a);
    // B never takes it: A's clock for it starts at its next look.
    a.peers.check_all(t0);
    assert!(
        a.peers.deadline().is_some(),
        "a message waits: the look is due"
    );
    a.peers.check_all(t0 + DEFAULT_STALL_TIMEOUT / 2);
    assert!(a.peers.alive(ia));
    a.peers.check_all(t0 + DEFAULT_STALL_TIMEOUT * 2);
    assert!(!a.peers.alive(ia));
    let row = &a.peers.listing().peers[0];
    assert_eq!(
        (row.reason.as_str(), row.dropped("dead_out")),
        ("stalled", 1)
    );
    assert!(a.peers.deadline().is_none(), "a dead link needs no look");
    // What B took after all changes nothing: A's side is closed.
    assert_eq!(take(&mut b), 1);
}
