//! The control protocol at its edges, through the real control path of a
//! stepped engine: a zero-length packet is a bad request, not the end of
//! the connection; a packet longer than the protocol allows is answered;
//! a `BadRequest` reply carries the request id it answers; the channel
//! counters say what they count.

use std::os::fd::{AsRawFd, OwnedFd};

use unet_abi::{EndpointCounter, EngineCounter, Geometry};
use unet_control::{self as control, ErrorCode, PathChoice, Reply, Request};
use unet_engine::invoker::LocalClient;
use unet_engine::{Dispatcher, EngineConfig};
use unet_sys as sys;

/// Send `bytes` on `sock`, step the engine, and return what came back
/// (None: nothing; Some(None): the connection closed).
fn exchange(engine: &mut Dispatcher, sock: &OwnedFd, bytes: &[u8]) -> Option<Option<(u32, Reply)>> {
    sys::send_packet(sock.as_raw_fd(), bytes, &[]).expect("send");
    let mut buf = vec![0u8; control::MAX_PACKET];
    for _ in 0..200 {
        engine.step();
        let mut fds = Vec::new();
        match sys::recv_packet(sock.as_raw_fd(), &mut buf, &mut fds, true) {
            Ok(0) => return Some(None),
            Ok(n) => {
                return Some(Some(
                    Reply::decode(&buf[..n]).expect("a reply that decodes"),
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("recv: {e}"),
        }
    }
    None
}

fn hello(id: u32) -> Vec<u8> {
    Request::Hello {
        version: control::PROTOCOL_VERSION,
    }
    .encode(id)
}

#[test]
fn a_zero_length_packet_is_a_bad_request_not_the_end() {
    let mut engine = Dispatcher::new(EngineConfig::default()).unwrap();
    let sock = engine.connect().unwrap();
    // Nothing to answer (no request id), and the connection stays.
    assert_eq!(exchange(&mut engine, &sock, &[]), None);
    match exchange(&mut engine, &sock, &hello(7)) {
        Some(Some((7, Reply::Hello { .. }))) => {}
        r => panic!("the connection must still be served after an empty packet: {r:?}"),
    }
    let c = engine.counters();
    assert_eq!(c.engine_value(EngineCounter::ControlDropEmpty), 1);
    assert_eq!(c.engine_value(EngineCounter::ControlBad), 1);
    assert_eq!(c.engine_value(EngineCounter::ControlClosed), 0);
}

#[test]
fn a_packet_too_long_is_answered_with_its_request_id() {
    let mut engine = Dispatcher::new(EngineConfig::default()).unwrap();
    let sock = engine.connect().unwrap();
    for len in [control::MAX_PACKET + 1, 4000] {
        let mut big = hello(77);
        big.resize(len, 0);
        match exchange(&mut engine, &sock, &big) {
            Some(Some((77, Reply::Error(ErrorCode::BadRequest)))) => {}
            r => panic!("a {len}-byte packet must be refused with its id: {r:?}"),
        }
    }
    assert_eq!(
        engine
            .counters()
            .engine_value(EngineCounter::ControlDropOversize),
        2
    );
    // The largest packet is fine.
    let mut max = hello(78);
    max.resize(control::MAX_PACKET, 0);
    assert!(matches!(
        exchange(&mut engine, &sock, &max),
        Some(Some((78, Reply::Hello { .. })))
    ));
}

#[test]
fn a_bad_request_reply_carries_the_request_id() {
    let mut engine = Dispatcher::new(EngineConfig::default()).unwrap();
    let sock = engine.connect().unwrap();
    // An unknown kind, then a known kind cut short.
    let unknown = [0xff, 0xff, 0, 0, 55, 0, 0, 0];
    let short = &Request::CloseEndpoint { endpoint: 3 }.encode(56)[..9];
    for (pkt, id) in [(&unknown[..], 55), (short, 56)] {
        match exchange(&mut engine, &sock, pkt) {
            Some(Some((got, Reply::Error(ErrorCode::BadRequest)))) => {
                assert_eq!(got, id, "the reply names the request it answers")
            }
            r => panic!("expected BadRequest: {r:?}"),
        }
    }
    // Too short to hold an id: answered as a notice (0).
    assert!(matches!(
        exchange(&mut engine, &sock, &[1, 0, 0]),
        Some(Some((0, Reply::Error(ErrorCode::BadRequest))))
    ));
}

#[test]
fn channels_open_and_channels_peak_count_what_they_say() {
    let mut engine = Dispatcher::new(EngineConfig::default()).unwrap();
    let mut c = LocalClient::new(&mut engine).unwrap();
    let a = c.create_endpoint(&mut engine, Geometry::default()).unwrap();
    let b = c.create_endpoint(&mut engine, Geometry::default()).unwrap();
    let ch1 = c
        .open_channel(&mut engine, a.id(), b.id(), PathChoice::Engine)
        .unwrap();
    c.open_channel(&mut engine, a.id(), b.id(), PathChoice::Engine)
        .unwrap();
    let (r, _) = c
        .call(
            &mut engine,
            &Request::CloseChannel {
                endpoint: a.id(),
                channel: ch1,
            },
            &[],
        )
        .unwrap();
    assert_eq!(r, Reply::Ok);
    // The levels are set when stat asks.
    let (r, _) = c.call(&mut engine, &Request::Stat, &[]).unwrap();
    assert!(matches!(r, Reply::Stat { .. }), "{r:?}");
    let counters = engine.counters();
    let slot = |id: u32| {
        (0..EngineConfig::default().max_endpoints as usize)
            .find(|&i| counters.slot_endpoint(i) == Some(id))
            .expect("a live slot")
    };
    let (sa, sb) = (slot(a.id()), slot(b.id()));
    assert_eq!(counters.ep_value(sa, EndpointCounter::ChannelsOpen), 1);
    assert_eq!(counters.channels_peak(sa), 2);
    assert_eq!(counters.ep_value(sb, EndpointCounter::ChannelsOpen), 1);
    assert_eq!(counters.channels_peak(sb), 2);
    assert_eq!(counters.ep_value(sa, EndpointCounter::ChannelsOpened), 2);
}
