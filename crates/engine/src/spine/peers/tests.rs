//! The table of peer queues between two runtimes in one process: a send
//! becomes a `PeerTx` event, the event puts the message on the link, the
//! other runtime's turn takes it as a `PeerRx` event from the peer; a
//! link left by its peer refuses sends with `E_DEAD` and its row says
//! why; the caps (per adapter, process and user) and a bad segment are
//! refused with their codes; a link is left only by its joining user or
//! root.

use std::os::fd::OwnedFd;

use unet_abi::spine::{AM_BULK, DEST_PEER};

use super::*;
use crate::clients::fake::Users;
use crate::config::EngineConfig;
use crate::counters::Counters;
use crate::spine::peer::DEFAULT_STALL_TIMEOUT;
use crate::spine::rt::{E_BAD_DEST, E_DEAD};
use unet_abi::peer::DEFAULT_PEER_GEOMETRY as DEFAULT_GEOMETRY;

fn rt() -> Rt {
    Rt::new(&EngineConfig::default())
}

fn segment() -> OwnedFd {
    PeerLink::create(DEFAULT_GEOMETRY, 7).unwrap()
}

/// Process `pid` (connection `conn`) of user `uid`.
fn by(pid: u32, conn: usize, uid: u32) -> Joiner {
    Joiner {
        proc: Some((pid, conn)),
        uid,
    }
}

/// A user with no other link on the adapters of these tests.
const USER: u32 = 1000;

/// Join `a` and `b` (as process `proc`): their indices.
fn join(p: &Poller, a: &mut Rt, b: &mut Rt, proc: usize) -> (u32, u32) {
    let seg = segment();
    let two = seg.try_clone().unwrap();
    let (ia, da) = a.peers.join(p, by(1, proc, USER), seg, 0, None).unwrap();
    let da = doorbell_of(da).unwrap();
    let (ib, db) = b
        .peers
        .join(p, by(1, proc, USER), two, 1, Some(da))
        .unwrap();
    a.peers
        .row_mut(ia)
        .unwrap()
        .link
        .set_peer_doorbell(EventFd::from_fd(db));
    // As the doorbell request does: A looks and learns its peer.
    a.peers.check_all(Instant::now());
    (ia, ib)
}

/// An adapter and its clients (`Users`), asked through `handle`.
struct Adapter {
    rt: Rt,
    p: Poller,
    users: Users,
    counters: Counters,
}

impl Adapter {
    /// Clients `0..uids.len()`, client `i` a process of user `uids[i]`.
    fn new(uids: Vec<u32>) -> Adapter {
        Adapter {
            rt: rt(),
            p: Poller::new().unwrap(),
            users: Users::new(uids),
            counters: Counters::create(4, 1).unwrap(),
        }
    }

    /// What client `ci` is answered asking `req` (with `fds`).
    fn ask(&mut self, ci: ClientId, req: Request, fds: Vec<OwnedFd>) -> Reply {
        let mut fds = fds;
        let (peers, c) = (&mut self.rt.peers, &self.counters);
        handle(peers, &self.p, &self.users, c, ci, req, &mut fds).0
    }

    /// Client `ci` joins side 0 of a new segment: the index, or the
    /// refusal.
    fn joined(&mut self, ci: ClientId) -> Result<u32, ErrorCode> {
        match self.ask(ci, Request::PeerJoin { side: 0 }, vec![segment()]) {
            Reply::PeerJoined { index } => Ok(index),
            Reply::Error(c) => Err(c),
            r => panic!("a join answered {r:?}"),
        }
    }

    /// Client `ci` leaves link `index`.
    fn left(&mut self, ci: ClientId, index: u32) -> Reply {
        self.ask(ci, Request::PeerLeave { index }, Vec::new())
    }

    /// Client `ci` hands link `index` a doorbell.
    fn rang(&mut self, ci: ClientId, index: u32) -> Reply {
        let bell = EventFd::new().unwrap().fd().try_clone().unwrap();
        self.ask(ci, Request::PeerDoorbell { index }, vec![bell])
    }

    /// Joins refused for the process's cap and for the user's.
    fn refused(&self) -> (u64, u64) {
        let n = |c| self.counters.engine_value(c);
        (
            n(EngineCounter::QuotaRefusedPeersProcess),
            n(EngineCounter::QuotaRefusedPeersUser),
        )
    }
}

/// Run what `rt` queued, as a turn does: forwards go on their links,
/// published at the end; arrivals are handed back.
fn run(rt: &mut Rt) -> Vec<Event> {
    let mut out = Vec::new();
    while let Some(ev) = rt.queue.pop() {
        match ev.kind {
            EventKind::PeerTx => forward(rt, ev),
            _ => out.push(ev),
        }
    }
    rt.peers.publish();
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

    assert_eq!(take(&mut b, None), 2);
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
    assert_eq!(take(&mut a, None), 1);
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
fn a_port_out_message_goes_to_the_port_it_names_without_a_handler_and_a_bad_one_is_counted() {
    let p = Poller::new().unwrap();
    let (mut a, mut b) = (rt(), rt());
    let (ia, ib) = join(&p, &mut a, &mut b, 1);
    b.ports.push(5);
    let dest = DEST_PEER << 24 | ia;
    let send = |a: &mut Rt, args: &[u8], frame: Option<&[u8]>| {
        let bulk = frame.map(|f| a.bufs.alloc(f).unwrap());
        assert_eq!(a.send(dest, SYS_PORT_OUT, args, bulk), 0);
    };
    // To port 5 (open on b): the frame, alone, as a port send's event.
    send(&mut a, &5u32.to_le_bytes(), Some(&[7; 60]));
    // Port 6 is not open; no argument; no frame: each dropped.
    send(&mut a, &6u32.to_le_bytes(), Some(&[7; 60]));
    send(&mut a, &[], Some(&[7; 60]));
    send(&mut a, &5u32.to_le_bytes(), None);
    run(&mut a);
    assert_eq!(take(&mut b, None), 4);
    let got = run(&mut b);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].kind, EventKind::WireTx);
    assert_eq!(got[0].arg, 5 | crate::spine::port::ARG_PORT);
    let m = b.msgs.get(got[0].msg).unwrap();
    assert!(m.args().is_empty());
    assert_eq!(b.bufs.data(m.bulk.unwrap()).unwrap(), &[7; 60][..]);
    b.msgs.free(got[0].msg, &mut b.bufs);
    assert_eq!((b.msgs.live(), b.bufs.live()), (0, 0), "nothing kept");
    let row = &b.peers.listing().peers[0];
    assert_eq!(row.index, ib);
    assert_eq!((row.msgs_in, row.port_out), (4, 1));
    assert_eq!(row.dropped("rx_bad_port"), 3);
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
    b.peers.leave(ib, Some(USER)).unwrap();
    assert_eq!(b.peers.leave(ib, Some(USER)), Err(ErrorCode::NoSuchPeer));
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
    assert_eq!(take(&mut b, None), 1);
    assert_eq!(a.peers.listing().peers.len(), 2, "the dead row stays");
}

#[test]
fn joins_are_capped_per_process_and_per_adapter_and_bad_segments_refused() {
    let p = Poller::new().unwrap();
    let mut a = rt();
    let seg = |side| (segment(), side);
    for _ in 0..PEERS_PER_PROCESS {
        let (s, side) = seg(0);
        a.peers.join(&p, by(1, 1, 1000), s, side, None).unwrap();
    }
    let (s, side) = seg(0);
    assert_eq!(
        a.peers.join(&p, by(1, 1, 1000), s, side, None).unwrap_err(),
        ErrorCode::ObjectQuota
    );
    // Other users' processes, one link each, fill the adapter.
    for i in PEERS_PER_PROCESS..PEERS_PER_ADAPTER {
        let (s, side) = seg(1);
        a.peers
            .join(&p, by(2, i, 2000 + i as u32), s, side, None)
            .unwrap();
    }
    let (s, side) = seg(0);
    assert_eq!(
        a.peers.join(&p, by(3, 0, 3000), s, side, None).unwrap_err(),
        ErrorCode::NoResources
    );
    // A dead link's slot is taken by the next join.
    let first = a.peers.listing().peers[0].index;
    a.peers.row_mut(first).unwrap().dead = Some(Death::Closed);
    let (s, side) = seg(0);
    let (i, _) = a.peers.join(&p, by(3, 0, 3000), s, side, None).unwrap();
    assert_eq!(i & 0xF, first & 0xF);
    assert!(a.peers.row(first).is_none());

    // A doorbell that is not an eventfd.
    let f = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
    assert_eq!(doorbell_of(f).err(), Some(ErrorCode::BadRequest));

    // Not a sealed memory file; a side attached before.
    let mut b = rt();
    let f = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
    assert_eq!(
        b.peers.join(&p, by(1, 1, USER), f, 0, None).unwrap_err(),
        ErrorCode::BadPeer
    );
    let s = segment();
    let again = s.try_clone().unwrap();
    b.peers.join(&p, by(1, 1, USER), s, 0, None).unwrap();
    assert_eq!(
        b.peers
            .join(&p, by(1, 1, USER), again, 0, None)
            .unwrap_err(),
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
    assert_eq!(take(&mut b, None), 1);
}

#[test]
fn a_user_joining_from_one_new_process_after_another_stops_at_its_cap_and_others_still_join() {
    // Clients 0..=PEERS_PER_USER: processes of user 1000, each a new one
    // (the one before exited; its link lives on between the adapters);
    // then one of user 2000, and root.
    let mut uids = vec![1000; PEERS_PER_USER + 1];
    uids.extend([2000, 0]);
    let mut a = Adapter::new(uids);
    let (next, other, root) = (PEERS_PER_USER, PEERS_PER_USER + 1, PEERS_PER_USER + 2);
    let mine: Vec<u32> = (0..PEERS_PER_USER)
        .map(|ci| a.joined(ci).unwrap())
        .collect();
    assert_eq!(
        a.joined(next),
        Err(ErrorCode::ObjectQuota),
        "a new process of the same user, under its own process's cap"
    );
    assert_eq!(a.refused(), (0, 1), "counted as the user's cap");
    // Another user takes the rest of the adapter; then it is full.
    for _ in PEERS_PER_USER..PEERS_PER_ADAPTER {
        a.joined(other).unwrap();
    }
    assert_eq!(a.joined(root), Err(ErrorCode::NoResources));
    let l = a.rt.peers.listing();
    let of = |uid| l.peers.iter().filter(|r| r.uid == uid).count();
    assert_eq!(
        (of(1000), of(2000)),
        (PEERS_PER_USER, PEERS_PER_ADAPTER - PEERS_PER_USER)
    );

    // The user leaves one of its links (from a later process): the
    // user may join one more, and no more.
    assert_eq!(a.left(next, mine[0]), Reply::Ok);
    a.joined(next).unwrap();
    assert_eq!(a.joined(next), Err(ErrorCode::ObjectQuota));
    assert_eq!(a.refused(), (0, 2));
    // A link whose peer died counts for no one: its slot is taken.
    a.rt.peers.row_mut(mine[1]).unwrap().dead = Some(Death::Exited);
    let i = a.joined(next).unwrap();
    assert_eq!(i & 0xF, mine[1] & 0xF);
}

#[test]
fn a_join_refused_at_the_process_cap_is_counted_as_such() {
    let mut a = Adapter::new(vec![1000]);
    for _ in 0..PEERS_PER_PROCESS {
        a.joined(0).unwrap();
    }
    assert_eq!(a.joined(0), Err(ErrorCode::ObjectQuota));
    assert_eq!(a.refused(), (1, 0));
}

#[test]
fn a_link_is_left_or_given_a_doorbell_only_by_its_joining_user_or_root() {
    // Clients: 0 and 1 processes of user 1000, 2 of user 2000, 3 root,
    // 4 of a user the kernel did not tell.
    let mut a = Adapter::new(vec![1000, 1000, 2000, 0, u32::MAX]);
    let x = a.joined(0).unwrap();
    let y = a.joined(2).unwrap();
    let z = a.joined(4).unwrap();
    let no = Reply::Error(ErrorCode::NoSuchPeer);
    for ci in [2, 4] {
        assert_eq!(a.left(ci, x), no, "client {ci}");
        assert_eq!(a.rang(ci, x), no, "client {ci}");
    }
    assert_eq!(a.left(4, z), no, "an unknown user is no one");
    assert!(a.rt.peers.alive(x) && a.rt.peers.alive(z));
    // Its user's other process hands it a doorbell and leaves it (the
    // one that joined it may be long gone).
    assert_eq!(a.rang(1, x), Reply::Ok);
    assert_eq!(a.left(1, x), Reply::Ok);
    assert!(a.rt.peers.row(x).is_none());
    // Root leaves anyone's.
    assert_eq!(a.rang(3, y), Reply::Ok);
    assert_eq!(a.left(3, y), Reply::Ok);
    assert_eq!(a.left(3, z), Reply::Ok);
    assert!(a.rt.peers.is_empty());
}
