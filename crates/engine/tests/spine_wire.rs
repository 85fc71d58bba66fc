//! SPINE's links over the UDP wire, against a hostile peer: an engine on
//! a real loopback UDP port, stepped on the test's thread, joined by a
//! plain UDP socket that plays the other adapter (it opens the link with
//! the listening token and learns the link's token from the accept).
//! Every bad frame (a forged token, another sender, bad lengths, a bad
//! header, a handler nobody installed, a message for the runtime's
//! `SYS_PORT_OUT` naming no port of the adapter, a link that does not exist,
//! garbage) is dropped and counted by reason, on the link or on the
//! adapter; nothing panics.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use unet_abi::spine::{AmHeader, AM_SRC_HANDLER, SYS_PORT_OUT};
use unet_control::spine_wire::LinkListing;
use unet_control::{ErrorCode, Reply, Request};
use unet_engine::invoker::LocalClient;
use unet_engine::wire::frame::spine::{self as f, MsgHead, SpineFrame};
use unet_engine::{Dispatcher, EngineConfig};

fn engine() -> Dispatcher {
    Dispatcher::new(EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..EngineConfig::default()
    })
    .unwrap()
}

fn socket() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_nonblocking(true).unwrap();
    s
}

fn listing(c: &mut LocalClient, e: &mut Dispatcher) -> LinkListing {
    match c.call(e, &Request::SpineLinks, &[]).unwrap() {
        (Reply::SpineLinkListing { len }, fds) => {
            let b = unet_sys::Segment::read_untrusted(&fds[0], len as usize).unwrap();
            LinkListing::decode(&b).unwrap()
        }
        r => panic!("listing: {r:?}"),
    }
}

/// Step `e` until `cond` holds of the listing (at most 10 s).
fn wait(c: &mut LocalClient, e: &mut Dispatcher, what: &str, cond: impl Fn(&LinkListing) -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        for _ in 0..50 {
            e.step();
        }
        let l = listing(c, e);
        if cond(&l) {
            return;
        }
        assert!(Instant::now() < end, "{what} never happened: {l:#?}");
        std::thread::yield_now();
    }
}

/// A message frame for link `link` with `token`: `hdr`, `args`, `bulk`.
fn msg(link: u32, token: u64, id: u32, hdr: AmHeader, args: &[u8], bulk: &[u8]) -> Vec<u8> {
    let len = 16 + args.len() + bulk.len();
    let h = MsgHead {
        dst_link: link,
        token,
        msg_id: id,
        frag_index: 0,
        frag_count: 1,
        msg_len: len as u32,
        frag_offset: 0,
    };
    let mut b = vec![0u8; 2048];
    let n = f::emit_msg(&mut b, 77, &h, &[&hdr.to_bytes(), args, bulk]).unwrap();
    b.truncate(n);
    b
}

fn hdr(handler: u16, args: usize) -> AmHeader {
    AmHeader {
        handler,
        args_len: args as u16,
        src_kind: AM_SRC_HANDLER,
        src: 1,
        ..AmHeader::default()
    }
}

/// The link the peer socket joined: the engine's link id, the token the
/// peer's frames carry, the engine's address.
struct Joined {
    link: u32,
    token: u64,
    at: SocketAddr,
}

/// Listen on `e`, and join from `peer` (its link 9, token 0x5eed).
fn join(c: &mut LocalClient, e: &mut Dispatcher, peer: &UdpSocket) -> Joined {
    let (link, listen) = match c
        .call(e, &Request::SpineLinkListen { token: 0 }, &[])
        .unwrap()
        .0
    {
        Reply::SpineLink { link, token } => (link, token),
        r => panic!("listen: {r:?}"),
    };
    assert_ne!(listen, 0);
    let at = e.udp_addr().unwrap();
    let mut b = [0u8; 64];
    let n = f::emit_open(&mut b, 77, 9, listen, 0x5eed).unwrap();
    peer.send_to(&b[..n], at).unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 2048];
    loop {
        e.step();
        if let Ok((n, from)) = peer.recv_from(&mut buf) {
            assert_eq!(from, at);
            match SpineFrame::parse(&buf[..n]) {
                Ok(SpineFrame::Accept {
                    dst_link,
                    token,
                    src_link,
                    accept_token,
                }) => {
                    assert_eq!((dst_link, token, src_link), (9, 0x5eed, link));
                    return Joined {
                        link,
                        token: accept_token,
                        at,
                    };
                }
                r => panic!("not an accept: {r:?}"),
            }
        }
        assert!(Instant::now() < end, "no accept");
    }
}

#[test]
fn hostile_frames_on_a_link_are_counted_by_reason_and_nothing_panics() {
    let mut e = engine();
    let mut c = LocalClient::new(&mut e).unwrap();
    let peer = socket();
    let j = join(&mut c, &mut e, &peer);
    let l = listing(&mut c, &mut e);
    let row = l.link(j.link).unwrap();
    assert_eq!(row.state, "up");
    assert_eq!(row.peer, peer.local_addr().unwrap().to_string());
    assert_eq!(row.peer_link, 9);

    let send = |b: &[u8]| {
        peer.send_to(b, j.at).unwrap();
    };
    // A forged token.
    send(&msg(j.link, j.token ^ 1, 1, hdr(100, 4), b"ping", &[]));
    // The right token from another address.
    socket()
        .send_to(&msg(j.link, j.token, 2, hdr(100, 4), b"ping", &[]), j.at)
        .unwrap();
    // A handler nobody installed, and one of the runtime's own.
    send(&msg(j.link, j.token, 3, hdr(100, 4), b"ping", &[]));
    send(&msg(j.link, j.token, 4, hdr(5, 0), &[], &[]));
    // Bad headers: a number out of range, an unknown flag, too many
    // arguments said.
    send(&msg(j.link, j.token, 5, hdr(2000, 0), &[], &[]));
    let mut flags = hdr(100, 0);
    flags.flags = 0x80;
    send(&msg(j.link, j.token, 6, flags, &[], &[]));
    send(&msg(j.link, j.token, 7, hdr(100, 241), &[], &[]));
    // Lengths that do not add up: two arguments said, four carried; bulk
    // said and not carried.
    send(&msg(j.link, j.token, 8, hdr(100, 2), b"ping", &[]));
    let mut bulk = hdr(100, 0);
    bulk.flags = 1;
    bulk.bulk_len = 100;
    send(&msg(j.link, j.token, 9, bulk, &[], &[1, 2, 3]));
    // A link that does not exist.
    send(&msg(j.link ^ 0x100, j.token, 10, hdr(100, 0), &[], &[]));
    // A frame cut short, and one longer than it says.
    let good = msg(j.link, j.token, 11, hdr(100, 0), &[], &[]);
    send(&good[..good.len() - 1]);
    let mut longer = good.clone();
    longer.push(0);
    send(&longer);
    // For the runtime's PORT_OUT: a port the adapter does not have, and
    // no frame.
    let mut out = hdr(SYS_PORT_OUT, 4);
    out.flags = 1;
    out.bulk_len = 60;
    send(&msg(
        j.link,
        j.token,
        12,
        out,
        &3u32.to_le_bytes(),
        &[0xff; 60],
    ));
    send(&msg(
        j.link,
        j.token,
        13,
        hdr(SYS_PORT_OUT, 4),
        &3u32.to_le_bytes(),
        &[],
    ));
    wait(&mut c, &mut e, "every drop counted", |l| {
        let r = l.link(j.link).unwrap();
        r.drop_count("bad_port") == 2
            && r.drop_count("forged_token") == 1
            && r.drop_count("wrong_sender") == 1
            && r.drop_count("no_handler") == 2
            && r.drop_count("bad_header") == 3
            && r.drop_count("bad_length") == 2
            && l.drop_count("unknown_link") == 1
            && l.drop_count("bad_frame") == 2
    });
    let r = listing(&mut c, &mut e);
    let row = r.link(j.link).unwrap();
    assert_eq!(row.msgs_in, 0, "nothing was handed to a handler");
    assert_eq!(row.port_out, 0, "nor to a port");
    assert_eq!(row.state, "up", "a hostile frame does not break the link");

    // Fragments: a message longer than the runtime's buffers; a fragment
    // twice; one of an older message than the one under way.
    let frag = |id: u32, idx: u16, cnt: u16, len: u32, n: usize| {
        let h = MsgHead {
            dst_link: j.link,
            token: j.token,
            msg_id: id,
            frag_index: idx,
            frag_count: cnt,
            msg_len: len,
            frag_offset: u32::from(idx) * n as u32,
        };
        let mut b = vec![0u8; 2048];
        let k = f::emit_msg(&mut b, 77, &h, &[&vec![0u8; n]]).unwrap();
        b.truncate(k);
        b
    };
    send(&frag(20, 0, 200, 200 * 1000, 1000));
    send(&frag(21, 0, 3, 3000, 1000));
    send(&frag(21, 0, 3, 3000, 1000));
    send(&frag(20, 1, 3, 3000, 1000));
    // A newer message abandons the one under way.
    send(&frag(22, 0, 3, 3000, 1000));
    wait(&mut c, &mut e, "fragment drops counted", |l| {
        let r = l.link(j.link).unwrap();
        r.drop_count("too_long") == 1
            && r.drop_count("duplicate") == 1
            && r.drop_count("stale") == 1
            && r.drop_count("incomplete") == 1
    });

    // Garbage of SPINE's kinds: counted, never a panic.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..2000 {
        let mut b = good.clone();
        if i % 2 == 0 {
            b.truncate((rnd() % 80) as usize);
        }
        for _ in 0..1 + rnd() % 4 {
            if !b.is_empty() {
                let at = (rnd() as usize) % b.len();
                b[at] = rnd() as u8;
            }
        }
        if b.len() > 3 {
            b[0] = 0x55;
            b[1] = 0x4E;
            b[2] = 1;
            b[3] = 0x30 + (rnd() % 16) as u8;
        }
        send(&b);
        if i % 64 == 0 {
            e.step();
        }
    }
    for _ in 0..200 {
        e.step();
    }
    let l = listing(&mut c, &mut e);
    assert_eq!(l.link(j.link).unwrap().msgs_in, 0);

    // The peer closes (with its token): the link says so, and a close
    // with a forged token before that changed nothing.
    let mut b = [0u8; 64];
    let n = f::emit_close(&mut b, 77, j.link, j.token ^ 2).unwrap();
    send(&b[..n]);
    let n = f::emit_close(&mut b, 77, j.link, j.token).unwrap();
    send(&b[..n]);
    wait(&mut c, &mut e, "the close", |l| {
        l.link(j.link).unwrap().state == "closed"
    });
}

#[test]
fn an_open_with_a_token_nobody_listens_with_is_refused() {
    let mut e = engine();
    let mut c = LocalClient::new(&mut e).unwrap();
    let peer = socket();
    let at = e.udp_addr().unwrap();
    let mut b = [0u8; 64];
    let n = f::emit_open(&mut b, 77, 4, 0x1234, 0x77).unwrap();
    peer.send_to(&b[..n], at).unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 256];
    loop {
        e.step();
        if let Ok((n, _)) = peer.recv_from(&mut buf) {
            assert_eq!(
                SpineFrame::parse(&buf[..n]),
                Ok(SpineFrame::Refuse {
                    dst_link: 4,
                    token: 0x77,
                    reason: f::REFUSE_NO_LISTENER
                })
            );
            break;
        }
        assert!(Instant::now() < end, "no refusal");
    }
    assert_eq!(listing(&mut c, &mut e).drop_count("no_listener"), 1);
}

#[test]
fn links_are_capped_per_process_and_closed_when_their_client_goes() {
    let mut e = engine();
    let mut c = LocalClient::new(&mut e).unwrap();
    let listen = Request::SpineLinkListen { token: 0 };
    let mut ids = Vec::new();
    for _ in 0..4 {
        match c.call(&mut e, &listen, &[]).unwrap().0 {
            Reply::SpineLink { link, .. } => ids.push(link),
            r => panic!("listen: {r:?}"),
        }
    }
    assert_eq!(
        c.call(&mut e, &listen, &[]).unwrap().0,
        Reply::Error(ErrorCode::ObjectQuota)
    );
    // The same token twice: refused.
    let t = Request::SpineLinkListen { token: 42 };
    let mut d = LocalClient::new(&mut e).unwrap();
    assert_eq!(
        d.call(&mut e, &Request::SpineLinkClose { link: ids[0] }, &[])
            .unwrap()
            .0,
        Reply::Ok,
        "the same user may close it"
    );
    assert!(matches!(
        c.call(&mut e, &t, &[]).unwrap().0,
        Reply::SpineLink { token: 42, .. }
    ));
    let close1 = Request::SpineLinkClose { link: ids[1] };
    assert_eq!(c.call(&mut e, &close1, &[]).unwrap().0, Reply::Ok);
    assert_eq!(
        c.call(&mut e, &t, &[]).unwrap().0,
        Reply::Error(ErrorCode::TagInUse),
        "two links listen with one token"
    );
    assert_eq!(
        c.call(&mut e, &Request::SpineLinkClose { link: ids[0] }, &[])
            .unwrap()
            .0,
        Reply::Error(ErrorCode::NoSuchLink),
        "a closed link's id names nothing"
    );
    drop(c);
    let end = Instant::now() + Duration::from_secs(10);
    while !listing(&mut d, &mut e).links.is_empty() {
        assert!(Instant::now() < end, "the links outlived their client");
        e.step();
    }
    // Without a wire, no link.
    let mut n = Dispatcher::new(EngineConfig::default()).unwrap();
    let mut c = LocalClient::new(&mut n).unwrap();
    assert_eq!(
        c.call(&mut n, &listen, &[]).unwrap().0,
        Reply::Error(ErrorCode::NoWire)
    );
}

#[test]
fn a_peer_that_goes_silent_leaves_its_link_silent() {
    let mut e = Dispatcher::new(EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        liveness_timeout: Duration::from_millis(300),
        ..EngineConfig::default()
    })
    .unwrap();
    let mut c = LocalClient::new(&mut e).unwrap();
    let peer = socket();
    let j = join(&mut c, &mut e, &peer);
    // The peer says nothing more (it answers no keepalive).
    wait(&mut c, &mut e, "the link silent", |l| {
        l.link(j.link).unwrap().state == "silent"
    });
    // A message from it now is not taken.
    peer.send_to(&msg(j.link, j.token, 1, hdr(100, 0), &[], &[]), j.at)
        .unwrap();
    wait(&mut c, &mut e, "the late message dropped", |l| {
        l.link(j.link).unwrap().drop_count("not_up") == 1
    });
    assert_eq!(listing(&mut c, &mut e).link(j.link).unwrap().msgs_in, 0);
}
