//! Channel life cycle as the peers see it, on an engine stepped on the
//! test's thread: a channel opened is announced to its destination; an
//! endpoint closed, a channel closed or a client gone is announced to
//! every peer (`PeerGone` on the peer's own tag), and sends on such a
//! channel are refused with `PeerGone`.

mod common;
use common::*;
use unet_abi::*;
use unet_engine::invoker::{LocalClient, RawEndpoint};
use unet_engine::PathChoice;

/// The one event `ep` has: a `PeerGone` for its channel `chan`.
fn assert_peer_gone(ep: &mut RawEndpoint, chan: u16, what: &str) {
    let ev = events(ep);
    assert_eq!(ev.len(), 1, "{what}: {ev:?}");
    assert_eq!(ev[0].kind, EventKind::PeerGone as u16, "{what}: {ev:?}");
    assert_eq!(ev[0].channel, chan, "{what}");
}

/// A send on a channel whose peer is gone: refused, counted once.
fn assert_refused(rig: &mut Rig, ep: &mut RawEndpoint, chan: u16) {
    let before = rig.stats.all(ep.id());
    let pos = send(ep, chan, 0, b"anyone there?");
    rig.settle();
    assert_eq!(status(ep, pos), SendStatus::PeerGone);
    assert_eq!(
        rig.stats.changed(ep.id(), &before),
        [(EndpointCounter::TxPeerGone, 1)]
    );
}

#[test]
fn a_channel_opened_is_announced_to_its_destination() {
    let mut rig = Rig::new();
    let mut a = rig.endpoint(small());
    let mut b = rig.endpoint(small());
    let ch = rig
        .client
        .open_channel(&mut rig.engine, a.id(), b.id(), PathChoice::Engine)
        .expect("open");
    let ev = events(&mut b);
    assert_eq!(ev.len(), 1, "{ev:?}");
    let e = ev[0];
    assert_eq!(e.kind, EventKind::ChannelOpened as u16);
    assert_eq!(e.peer_endpoint, a.id());
    assert_eq!((e.port, e.family, e.arg), (0, 0, 0), "local, engine path");
    // The tag b got answers a's.
    let b_ch = e.channel;
    post_all(&mut b);
    send(&mut a, ch, 0, b"ping");
    rig.settle();
    let m = take(&mut b, true).expect("ping");
    assert_eq!((m.channel, &m.data[..]), (b_ch, &b"ping"[..]));
    post_all(&mut a);
    send(&mut b, b_ch, 0, b"pong");
    rig.settle();
    let m = take(&mut a, true).expect("pong");
    assert_eq!((m.channel, &m.data[..]), (ch, &b"pong"[..]));
    // An endpoint that refuses channels is not told of one.
    let refuse = unet_control::Request::SetAccept {
        endpoint: b.id(),
        accept: false,
    };
    rig.client.call(&mut rig.engine, &refuse, &[]).unwrap();
    assert!(rig
        .client
        .open_channel(&mut rig.engine, a.id(), b.id(), PathChoice::Engine)
        .is_err());
    assert!(events(&mut b).is_empty());
    assert_eq!(rig.stats.ep(b.id(), EndpointCounter::ChannelsRefused), 1);
}

/// Closing an endpoint tells the peer of each of its channels, whichever
/// side opened them, on the peer's tag; those peers' sends are refused.
#[test]
fn closing_an_endpoint_tells_every_peer() {
    let mut rig = Rig::new();
    let mut a = rig.endpoint(small());
    let mut b = rig.receiver(small());
    let mut c = rig.endpoint(small());
    let mut d = rig.endpoint(small());
    let (a_to_b, _) = rig.open(&a, &mut b);
    let (c_to_b, _) = rig.open(&c, &mut b);
    let (_, d_from_b) = rig.open(&b, &mut d);
    // An unrelated channel stays.
    let (a_to_c, c_from_a) = rig.open(&a, &mut c);
    rig.close_endpoint(b.id());
    rig.settle();
    assert_peer_gone(&mut a, a_to_b, "a, which opened a channel to b");
    assert_peer_gone(&mut c, c_to_b, "c, which opened a channel to b");
    assert_peer_gone(&mut d, d_from_b, "d, to which b opened a channel");
    assert_refused(&mut rig, &mut a, a_to_b);
    assert_refused(&mut rig, &mut c, c_to_b);
    assert_refused(&mut rig, &mut d, d_from_b);
    post_all(&mut c);
    send(&mut a, a_to_c, 0, b"still open");
    rig.settle();
    let m = take(&mut c, true).expect("the unrelated channel works");
    assert_eq!((m.channel, &m.data[..]), (c_from_a, &b"still open"[..]));
    assert!(events(&mut a).is_empty() && events(&mut c).is_empty());
}

/// Closing a channel tells the peer (on its tag); the closer's tag is no
/// longer a channel.
#[test]
fn closing_a_channel_tells_the_peer() {
    let mut rig = Rig::new();
    let mut a = rig.endpoint(small());
    let mut b = rig.endpoint(small());
    let (ch, from_a) = rig.open(&a, &mut b);
    rig.client
        .close_channel(&mut rig.engine, a.id(), ch)
        .expect("close");
    assert_peer_gone(&mut b, from_a, "b, whose peer closed the channel");
    assert_refused(&mut rig, &mut b, from_a);
    let before = rig.stats.all(a.id());
    let pos = send(&mut a, ch, 0, b"closed");
    rig.settle();
    assert_eq!(status(&a, pos), SendStatus::BadChannel);
    assert_eq!(
        rig.stats.changed(a.id(), &before),
        [(EndpointCounter::TxBadChannel, 1)]
    );
    assert!(events(&mut a).is_empty());
}

/// A client whose control connection closes (its process died) is
/// reclaimed: every endpoint it held is closed and its peers are told.
#[test]
fn a_client_that_goes_tells_its_peers() {
    let mut rig = Rig::new();
    let mut other = LocalClient::new(&mut rig.engine).expect("a second client");
    let mut a = rig.endpoint(small());
    let mut b1 = other.create_endpoint(&mut rig.engine, small()).expect("b1");
    let mut b2 = other.create_endpoint(&mut rig.engine, small()).expect("b2");
    let (to_b1, _) = rig.open(&a, &mut b1);
    let (to_b2, _) = rig.open(&a, &mut b2);
    let reclaimed = rig.stats.engine(EngineCounter::EndpointsReclaimed);
    drop(other);
    step_until(&mut rig.engine, "the client's endpoints reclaimed", || {
        rig.stats.engine(EngineCounter::EndpointsReclaimed) == reclaimed + 2
    });
    rig.settle();
    let mut gone: Vec<u16> = events(&mut a)
        .into_iter()
        .map(|e| {
            assert_eq!(e.kind, EventKind::PeerGone as u16);
            e.channel
        })
        .collect();
    gone.sort();
    let mut want = vec![to_b1, to_b2];
    want.sort();
    assert_eq!(gone, want);
    assert_refused(&mut rig, &mut a, to_b1);
    assert_refused(&mut rig, &mut a, to_b2);
}
