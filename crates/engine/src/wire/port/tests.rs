//! The port's sorting: each frame to the inbox of its system, after the
//! token-and-sender check, made once; what fails counted.

use super::*;
use crate::wire::{MemoryHub, PortConfig};

/// No remote channels: the frames here are all connections'.
struct NoChannels;

impl Channels for NoChannels {
    type Named = ();
    fn named(&mut self, _: u32, _: u16) -> Result<((), SocketAddr, u64), Option<WireDrop>> {
        Err(Some(WireDrop::UnknownEndpoint))
    }
    fn data_checked(&mut self, _: &mut PortState, _: ()) {}
    fn message(&mut self, _: &Counters, _: (), _: &[u8]) {}
    fn close_or_confirm(&mut self, _: &mut PortState, _: SocketAddr, _: (), _: bool) {}
    fn handshake(&mut self, _: &mut PortState, _: SocketAddr, _: u64, _: Body<'_>, _: &[u8]) {}
    fn behind(&self) -> bool {
        false
    }
}

fn port(hub: &MemoryHub, addr: SocketAddr, engine_id: u64) -> WirePort {
    let t = hub.bind(addr, PortConfig::loopback()).expect("bind");
    let adm = AdmissionConfig {
        allow: vec!["127.0.0.0/8".parse().expect("net")],
        key: None,
        channels_max: 16,
        half_open_max: 16,
        ip_channels_max: 64,
        ip_half_open_max: 64,
        liveness_timeout: Duration::from_secs(5),
    };
    let counters = Arc::new(Counters::create(4, engine_id).expect("counters"));
    WirePort::new(Box::new(t), adm, engine_id, counters)
}

/// Ports of engines 1 and 2 on `hub`, at 127.0.0.1:1 and :2.
fn two_ports(hub: &MemoryHub) -> (SocketAddr, SocketAddr, WirePort, WirePort) {
    let a_addr: SocketAddr = "127.0.0.1:1".parse().expect("addr");
    let b_addr: SocketAddr = "127.0.0.1:2".parse().expect("addr");
    (a_addr, b_addr, port(hub, a_addr, 1), port(hub, b_addr, 2))
}

fn to(addr: SocketAddr, vi: u32, peer_token: u64, bytes: &[u8]) -> ConnOut<'_> {
    ConnOut {
        to: ConnPeer {
            addr,
            vi,
            peer_token,
            my_token: 0,
        },
        seq: 0,
        bytes,
        ack: None,
        held: None,
    }
}

#[test]
fn connection_frames_are_checked_once_and_sorted_by_system() {
    let hub = MemoryHub::new();
    let (a_addr, b_addr, mut a, mut b) = two_ports(&hub);
    let (vi, link) = (7, 9 | LINK_BIT);
    b.route(vi, Some((a_addr, 0xaa)));
    b.route(link, Some((a_addr, 0xbb)));
    a.send_conn(to(b_addr, vi, 0xaa, b"to a vi"));
    a.send_conn(to(b_addr, link, 0xbb, b"to a link"));
    // Another connection's token; an id nothing registered.
    a.send_conn(to(b_addr, vi, 0xbb, b"forged"));
    a.send_conn(to(b_addr, 11, 0xaa, b"unknown"));
    let ack = Ack {
        cum_ack: 1,
        cum_placed: 1,
        window_end: 64,
        nack: false,
    };
    a.send_ack(b_addr, ViAck::from_ack(link, 0xbb, ack));
    let close = ViClose {
        dst_vi: vi,
        token: 0xaa,
        reason: 0,
    };
    a.send_control(b_addr, Body::ViClose(close));
    a.flush();

    let (handled, r) = b.recv_batch(&mut NoChannels);
    assert_eq!((handled, r.ok()), (6, Some(6)));
    let vis = std::mem::take(&mut b.st.vis.frames);
    assert_eq!(vis.len(), 2);
    assert!(
        matches!(&vis[0], ConnIn::Data { dst_vi, msg, .. } if *dst_vi == vi && msg == b"to a vi")
    );
    assert!(matches!(&vis[1], ConnIn::Close(c) if *c == close));
    let links = std::mem::take(&mut b.st.links.frames);
    assert_eq!(links.len(), 2);
    assert!(
        matches!(&links[0], ConnIn::Data { dst_vi, msg, .. } if *dst_vi == link && msg == b"to a link")
    );
    assert!(matches!(&links[1], ConnIn::Ack(a) if a.dst_vi == link && a.ack() == ack));
    let stats = &b.st.reasm.stats;
    assert_eq!(stats.drop_count(WireDrop::ForgedToken), 1);
    assert_eq!(stats.drop_count(WireDrop::UnknownEndpoint), 1);

    // No longer registered: its frames are dropped.
    b.route(vi, None);
    a.send_conn(to(b_addr, vi, 0xaa, b"late"));
    a.flush();
    let _ = b.recv_batch(&mut NoChannels);
    assert!(b.st.vis.frames.is_empty());
    assert_eq!(b.st.reasm.stats.drop_count(WireDrop::UnknownEndpoint), 2);
}

#[test]
fn an_empty_port_receives_when_readable_or_now_and_then() {
    let hub = MemoryHub::new();
    let (a_addr, b_addr, mut a, mut b) = two_ports(&hub);
    let calls = |p: &WirePort| p.transport.stats().recv_syscalls;
    // The first look finds nothing; the next RECV_SKIP_MAX turns make no
    // receive call.
    assert_eq!(b.recv_batch(&mut NoChannels).0, 0);
    assert_eq!(calls(&b), 1);
    for _ in 0..RECV_SKIP_MAX {
        assert_eq!(b.recv_batch(&mut NoChannels).0, 0);
    }
    assert_eq!(calls(&b), 1);
    // The safety net: the turn after them looks anyway.
    assert_eq!(b.recv_batch(&mut NoChannels).0, 0);
    assert_eq!(calls(&b), 2);
    // A frame arrives: untouched until the poller says the port is
    // readable, then taken by the next turn, which keeps looking while
    // frames come.
    let vi = 7;
    b.route(vi, Some((a_addr, 0xaa)));
    a.send_conn(to(b_addr, vi, 0xaa, b"first"));
    a.flush();
    assert_eq!(b.recv_batch(&mut NoChannels).0, 0);
    assert!(!b.is_readable());
    b.readable();
    assert_eq!(b.recv_batch(&mut NoChannels).0, 1);
    assert!(b.is_readable(), "a receive that took frames looks again");
    a.send_conn(to(b_addr, vi, 0xaa, b"second"));
    a.flush();
    assert_eq!(b.recv_batch(&mut NoChannels).0, 1);
    assert_eq!(b.recv_batch(&mut NoChannels).0, 0);
    assert!(!b.is_readable());
    assert_eq!(b.st.vis.frames.len(), 2);
}
