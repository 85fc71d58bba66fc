//! SPINE over the UDP wire, end to end: two adapters (engines, each on a
//! loopback UDP port of its own) joined by a link, the example extension
//! `extensions/WirePing.java` (compiled with javac against the SDK) on
//! both. A host on adapter A sends to a handler on A, which sends to a
//! handler on B over the link; B's handler answers over the link and A's
//! hands the answer to the host: no host application on B's path. Small
//! and bulk messages (the bulk one cut into fragments of the wire's
//! datagram), the links' rows, and a send over a closed link refused.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use unet::spine::ExtensionOptions;
use unet::spine_wire::LinkListing;
use unet::{Endpoint, EndpointConfig, Engine, EngineConfig, Error, ErrorCode, Session};

mod common;
use common::{engine_with, javac, repo};

/// `extensions/WirePing.java`, compiled once (every lint an error).
fn wire_ping() -> &'static [u8] {
    static CLASS: OnceLock<Vec<u8>> = OnceLock::new();
    CLASS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("unet-spine-wire-{}", std::process::id()));
        let ping = repo().join("extensions/WirePing.java");
        javac(&dir, &[ping], &[]).remove("WirePing").unwrap()
    })
}

/// Handler numbers of WirePing on both adapters.
const BASE: u16 = 200;

/// An adapter on a loopback UDP port, with WirePing loaded.
fn adapter() -> (Engine, Session) {
    let (e, s) = engine_with(EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..EngineConfig::default()
    });
    let opts = ExtensionOptions {
        name: "wire-ping".into(),
        arg: i32::from(BASE),
        ..ExtensionOptions::default()
    };
    let x = s.load_extension(wire_ping(), opts).unwrap();
    assert_eq!(x.handlers, [BASE, BASE + 1, BASE + 2]);
    (e, s)
}

/// The next active message on `ep`: (handler, args, bulk).
fn recv_am(ep: &mut Endpoint) -> (u16, Vec<u8>, Vec<u8>) {
    common::recv_am(ep, Duration::from_secs(10))
}

/// A ping over link `link`: its arguments.
fn ping(link: u32, payload: &[u8]) -> Vec<u8> {
    let mut a = link.to_le_bytes().to_vec();
    a.extend_from_slice(payload);
    a
}

/// Wait (with a deadline) until `cond` holds of `s`'s link listing.
fn wait_links(s: &Session, what: &str, cond: impl Fn(&LinkListing) -> bool) -> LinkListing {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let l = s.spine_links().unwrap();
        if cond(&l) {
            return l;
        }
        assert!(Instant::now() < end, "{what}: {l:#?}");
        std::thread::yield_now();
    }
}

#[test]
fn a_handler_on_one_adapter_pings_a_handler_on_another_over_udp() {
    let (_ea, sa) = adapter();
    let (_eb, sb) = adapter();
    let (la, token) = sa.spine_link_listen(0).unwrap();
    let at = sa.udp_addr().unwrap();
    let lb = sb
        .spine_link_connect(at, token, Duration::from_secs(10))
        .unwrap();
    let l = wait_links(&sa, "A's link up", |l| {
        l.link(la).is_some_and(|r| r.state == "up")
    });
    let row = l.link(la).unwrap();
    assert_eq!(row.peer, sb.udp_addr().unwrap().to_string());
    assert_eq!(row.peer_link, lb);

    let mut ep = sa.create_endpoint(EndpointConfig::default()).unwrap();
    for i in 0..20u8 {
        ep.send_am(BASE, &ping(la, &[b'p', i]), &[]).unwrap();
        assert_eq!(recv_am(&mut ep), (BASE + 2, vec![b'p', i], vec![]));
    }
    // Bulk data longer than a datagram: cut into fragments and put back
    // together on each side.
    let data: Vec<u8> = (0..60_000u32).map(|i| (i * 7) as u8).collect();
    ep.send_am(BASE, &ping(la, b"bulk"), &data).unwrap();
    assert_eq!(recv_am(&mut ep), (BASE + 2, b"bulk".to_vec(), data));

    let la_row = sa.spine_links().unwrap().link(la).cloned().unwrap();
    let lb_row = sb.spine_links().unwrap().link(lb).cloned().unwrap();
    for r in [&la_row, &lb_row] {
        assert_eq!((r.msgs_in, r.msgs_out), (21, 21), "{r:#?}");
        assert!(r.drops.iter().all(|(_, n)| *n == 0), "{r:#?}");
    }
    assert!(lb_row.bytes_in > 60_000);
    let x = &sb.list_extensions().unwrap().extensions[0];
    assert_eq!(x.handlers[1].invocations, 21, "B's handler answered each");
    assert_eq!(x.handlers[1].terminated(), 0);

    // B closes: A's link says so, and a send over it is refused (E_DEAD).
    sb.spine_link_close(lb).unwrap();
    wait_links(&sa, "A's link closed", |l| {
        l.link(la).is_some_and(|r| r.state == "closed")
    });
    ep.send_am(BASE, &ping(la, b"late"), &[]).unwrap();
    assert_eq!(
        recv_am(&mut ep),
        (BASE + 3, (-2i32).to_le_bytes().to_vec(), vec![])
    );
    // A link id that names nothing: E_BAD_DEST.
    ep.send_am(BASE, &ping(la ^ 0x80, b"nowhere"), &[]).unwrap();
    assert_eq!(
        recv_am(&mut ep),
        (BASE + 3, (-3i32).to_le_bytes().to_vec(), vec![])
    );
}

#[test]
fn a_connect_nobody_listens_for_is_refused_and_the_link_closed() {
    let (_ea, sa) = adapter();
    let (_eb, sb) = adapter();
    let at = sa.udp_addr().unwrap();
    match sb.spine_link_connect(at, 0xdead, Duration::from_secs(10)) {
        Err(Error::Engine(ErrorCode::Refused)) => {}
        r => panic!("not refused: {r:?}"),
    }
    assert!(sb.spine_links().unwrap().links.is_empty());
    assert_eq!(sa.spine_links().unwrap().drop_count("no_listener"), 1);
    // An adapter without a wire has no links.
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    assert!(matches!(
        s.spine_link_listen(0),
        Err(Error::Engine(ErrorCode::NoWire))
    ));
}
