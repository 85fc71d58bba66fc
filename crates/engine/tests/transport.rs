//! The wire over another transport: two engines in this process joined by
//! a `MemoryHub` (no socket), both stepped on the test's thread. Remote
//! channels open, carry messages (one fragment and many) intact and in
//! order, and close, exactly as over UDP; a datagram forged by a third
//! port is dropped and counted. The remote side sees only the `Transport`
//! interface.

mod hub;
use hub::{addr, geometry, post_buffers, settle};
use unet_abi::*;
use unet_control::{EndpointAddr, Request};
use unet_engine::invoker::{LocalClient, RawEndpoint};
use unet_engine::wire::{Body, Data, Frame, MemoryHub, PortConfig, SendBatch, Transport};
use unet_engine::{Dispatcher, EngineConfig, PathChoice};

/// The message of receive descriptor `d` of `ep`.
fn bytes_of(ep: &RawEndpoint, d: &RecvDesc) -> Vec<u8> {
    let len = d.len as usize;
    if d.flags & RECV_INLINE != 0 {
        return d.data[..len].to_vec();
    }
    let bs = ep.layout().geometry.buffer_size as usize;
    let mut out = vec![0; len];
    for i in 0..d.nbufs as usize {
        let n = bs.min(len - i * bs);
        ep.read_area(d.offset(i) as u64, &mut out[i * bs..i * bs + n]);
    }
    out
}

#[test]
fn remote_channels_work_over_a_memory_transport() {
    let hub = MemoryHub::new();
    let cfg = PortConfig::loopback();
    // The engines allow each other's network (loopback only by default).
    let ecfg = EngineConfig {
        allow_peers: vec!["10.0.0.0/24".parse().unwrap()],
        ..EngineConfig::default()
    };
    let mut ea =
        Dispatcher::with_transport(ecfg.clone(), Box::new(hub.bind(addr(1), cfg).unwrap()))
            .unwrap();
    let mut eb =
        Dispatcher::with_transport(ecfg, Box::new(hub.bind(addr(2), cfg).unwrap())).unwrap();
    assert_eq!(ea.udp_addr(), Some(addr(1)));
    let mut ca = LocalClient::new(&mut ea).unwrap();
    let mut cb = LocalClient::new(&mut eb).unwrap();
    let mut a = ca.create_endpoint(&mut ea, geometry()).unwrap();
    let mut b = cb.create_endpoint(&mut eb, geometry()).unwrap();
    post_buffers(&mut b);

    // The open needs engine b to answer: step it between a's steps.
    let req = Request::OpenChannel {
        endpoint: a.id(),
        dst: EndpointAddr {
            host: Some(addr(2)),
            id: b.id(),
        },
        path: PathChoice::Auto,
    };
    let (rep, _) = ca
        .call_while(&mut ea, &req, &[], || {
            eb.step();
        })
        .unwrap();
    let ch = match rep {
        unet_control::Reply::ChannelOpened { channel, .. } => channel,
        r => panic!("open: {r:?}"),
    };
    settle(&mut ea, &mut eb);
    let ev = b.pop_event().expect("b is told of the channel");
    assert_eq!(ev.kind, EventKind::ChannelOpened as u16);
    assert_eq!((ev.family, ev.port, ev.peer_endpoint), (4, 1, a.id()));
    let from_a = ev.channel;

    // Messages of one fragment and of many, intact and in order.
    let sizes = [1usize, 56, 57, 1000, 4000, 20_000];
    for (i, &n) in sizes.iter().enumerate() {
        let msg: Vec<u8> = (0..n).map(|k| (k * 31 + i) as u8).collect();
        a.write_area(0, &msg);
        let pos = a
            .push_send(SendDesc {
                offset: 0,
                len: n as u32,
                channel: ch,
                ..Default::default()
            })
            .unwrap();
        settle(&mut ea, &mut eb);
        assert_eq!(a.send_status(pos), SendStatus::Sent as i32, "message {i}");
        let d = b
            .pop_recv()
            .unwrap_or_else(|| panic!("message {i} of {n} bytes lost"));
        assert_eq!((d.channel, d.len as usize), (from_a, n));
        assert_eq!(bytes_of(&b, &d), msg, "message {i}");
        for k in 0..(d.nbufs as usize) {
            assert!(b.post_free(d.offset(k)));
        }
    }
    assert_eq!(
        ea.counters().engine_value(EngineCounter::WireRxDatagrams),
        1,
        "a received only the open's answer"
    );

    // A datagram forged from a third port: the right endpoint and channel,
    // a guessed token. Dropped and counted, nothing delivered.
    let mut forger = hub.bind(addr(3), cfg).unwrap();
    let mut batch = SendBatch::for_port(&cfg);
    let data = Data {
        dst_endpoint: b.id(),
        dst_channel: from_a,
        token: 0x1234,
        flags: 0,
        msg_id: 7,
        frag_index: 0,
        frag_count: 1,
        msg_len: 5,
        frag_offset: 0,
        payload: b"forge",
        ack: None,
    };
    let f = Frame {
        src_engine: 99,
        body: Body::Data(data),
    };
    batch.push_frame(addr(2), &f).unwrap();
    forger.send_batch(&mut batch).unwrap();
    let forged = eb
        .counters()
        .engine_value(EngineCounter::WireDropForgedToken);
    settle(&mut ea, &mut eb);
    assert_eq!(
        eb.counters()
            .engine_value(EngineCounter::WireDropForgedToken),
        forged + 1
    );
    assert!(b.pop_recv().is_none(), "the forged message was delivered");

    // Closing the channel tells the peer engine's endpoint.
    ca.close_channel(&mut ea, a.id(), ch).unwrap();
    settle(&mut ea, &mut eb);
    let ev = b.pop_event().expect("b is told");
    assert_eq!((ev.kind, ev.channel), (EventKind::PeerGone as u16, from_a));
}
