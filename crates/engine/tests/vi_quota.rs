//! The VIA objects one process may hold (issue 39, defects 6 and 7): VIs
//! (`client_vis`), discriminators it listens on (`client_listeners`) and
//! connection requests it has waiting (`vi_pending_per_peer`). Before,
//! none was counted: one process listened on 2 000 discriminators and
//! could hold VIs and requests until the engine ran out of descriptors.
//! Each refusal is `ErrorCode::ObjectQuota`, counted; what the process
//! closes makes room again, and other processes are not held back.

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use unet_abi::EngineCounter;
use unet_control::{ErrorCode, Reply, Request, ViParams};
use unet_engine::invoker::LocalClient;
use unet_engine::{Dispatcher, EngineConfig};

fn count(e: &Dispatcher, c: EngineCounter) -> u64 {
    e.counters().engine_value(c)
}

/// Ask `ca` to connect to `tag` (not waiting for the answer): the request
/// id of the call.
fn ask(ca: &mut LocalClient, tag: u64) -> u32 {
    ca.send_request(
        &Request::ViConnect {
            host: None,
            tag,
            attrs: ViParams::default(),
            timeout_ms: 10_000,
        },
        &[],
    )
    .unwrap()
}

/// Step `e` until `c` has the reply to `id`.
fn answer(e: &mut Dispatcher, c: &mut LocalClient, id: u32) -> (Reply, Vec<OwnedFd>) {
    let start = Instant::now();
    loop {
        e.step();
        if let Some(r) = c.take_reply(id).unwrap() {
            return r;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "no answer");
    }
}

/// Step `e` until `cb` is told of a request on `tag`.
fn request_on(e: &mut Dispatcher, cb: &mut LocalClient, tag: u64) -> u32 {
    let start = Instant::now();
    loop {
        e.step();
        if let Some(r) = cb.take_vi_request(tag).unwrap() {
            return r;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "no request");
    }
}

/// Connect `ca` to `cb` on `tag`: `ca`'s VI and `cb`'s.
fn connect(e: &mut Dispatcher, ca: &mut LocalClient, cb: &mut LocalClient, tag: u64) -> (u32, u32) {
    let id = ask(ca, tag);
    let request = request_on(e, cb, tag);
    let acc = cb
        .send_request(
            &Request::ViAccept {
                request,
                attrs: ViParams::default(),
            },
            &[],
        )
        .unwrap();
    let vi = |r: (Reply, Vec<OwnedFd>)| match r.0 {
        Reply::ViConnected { vi, .. } => vi,
        r => panic!("connect: {r:?}"),
    };
    let b = vi(answer(e, cb, acc));
    (vi(answer(e, ca, id)), b)
}

fn quota(r: (Reply, Vec<OwnedFd>)) {
    assert!(
        matches!(r.0, Reply::Error(ErrorCode::ObjectQuota)),
        "expected ObjectQuota, got {:?}",
        r.0
    );
}

/// The clients here are one process (the test's): what they hold counts
/// together, both ends of each connection included.
#[test]
fn a_process_holds_a_bounded_number_of_vis_discriminators_and_requests() {
    let mut e = Dispatcher::new(EngineConfig {
        client_vis: 4,
        client_listeners: 2,
        vi_pending_per_peer: 2,
        ..EngineConfig::default()
    })
    .unwrap();
    let mut ca = LocalClient::new(&mut e).unwrap();
    let mut cb = LocalClient::new(&mut e).unwrap();

    // Discriminators: two, then refused; listening again on one held is
    // no new one; giving one up makes room.
    cb.vi_listen(&mut e, 1).unwrap();
    cb.vi_listen(&mut e, 2).unwrap();
    cb.vi_listen(&mut e, 2).unwrap();
    quota(cb.call(&mut e, &Request::ViListen { tag: 3 }, &[]).unwrap());
    assert_eq!(count(&e, EngineCounter::QuotaRefusedListeners), 1);
    let r = cb
        .call(&mut e, &Request::ViUnlisten { tag: 2 }, &[])
        .unwrap();
    assert!(matches!(r.0, Reply::Ok), "{:?}", r.0);
    cb.vi_listen(&mut e, 3).unwrap();

    // Requests waiting: two, then refused at once.
    let waiting = [ask(&mut ca, 3), ask(&mut ca, 3)];
    let third = ask(&mut ca, 3);
    quota(answer(&mut e, &mut ca, third));
    assert_eq!(count(&e, EngineCounter::ViPendingRefusedPeer), 1);
    for _ in waiting {
        let r = request_on(&mut e, &mut cb, 3);
        cb.call(&mut e, &Request::ViReject { request: r }, &[])
            .unwrap();
    }
    for id in waiting {
        assert!(matches!(
            answer(&mut e, &mut ca, id).0,
            Reply::Error(ErrorCode::Refused)
        ));
    }

    // VIs: four (two connections), then a connect is refused.
    let (va, vb) = connect(&mut e, &mut ca, &mut cb, 1);
    connect(&mut e, &mut ca, &mut cb, 1);
    let fifth = ask(&mut ca, 1);
    quota(answer(&mut e, &mut ca, fifth));
    assert_eq!(count(&e, EngineCounter::QuotaRefusedVis), 1);
    // One closed: a connect waits (counted), and its accept would make a
    // fifth: refused, the request left waiting.
    ca.close_vi(&mut e, va).unwrap();
    let id = ask(&mut ca, 1);
    let request = request_on(&mut e, &mut cb, 1);
    let accept = Request::ViAccept {
        request,
        attrs: ViParams::default(),
    };
    quota(cb.call(&mut e, &accept, &[]).unwrap());
    assert_eq!(count(&e, EngineCounter::QuotaRefusedVis), 2);
    // The other end closed too: the same request is accepted.
    cb.close_vi(&mut e, vb).unwrap();
    let acc = cb.send_request(&accept, &[]).unwrap();
    assert!(matches!(
        answer(&mut e, &mut cb, acc).0,
        Reply::ViConnected { .. }
    ));
    assert!(matches!(
        answer(&mut e, &mut ca, id).0,
        Reply::ViConnected { .. }
    ));
}
