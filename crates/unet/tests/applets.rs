//! U-Net/SLE applets end to end: the sample applets of `applets/` are
//! compiled with the JDK at test time, attached to endpoints of embedded
//! engines (and of two engines over UDP where the wire matters), and must
//! behave as their descriptions say; applets outside the JIVE subset are
//! refused, and faulting applets are reported and finally detached.

use std::time::{Duration, Instant};

mod common;
use common::{endpoint_counter as counter, engine_counter, nonzero_counters};
use unet::*;
use unet_abi::ClientCounter;
use unet_abi::{EndpointCounter, EngineCounter};

mod applet_support;
use applet_support::*;

// ---------------------------------------------------------------------------
// RawUnet: the U-Net/SLE paper's Figure 2
// ---------------------------------------------------------------------------

fn raw_unet_both_ways(sa: &Session, sb: &Session) {
    let class = applet("RawUnet");
    let mut a = sa.create_endpoint(with_buffers(4096)).unwrap();
    let mut b = sb.create_endpoint(with_buffers(4096)).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let n = exchange(&mut a, &mut b, ch, RAW_SIZES, 3);
    for (s, ep) in [(sa, &a), (sb, &b)] {
        assert_eq!(counter(s, ep, EndpointCounter::AppletTxCalls), n);
        assert_eq!(counter(s, ep, EndpointCounter::AppletRxCalls), n);
        assert!(counter(s, ep, EndpointCounter::AppletTimeNs) > 0);
        assert!(counter(s, ep, EndpointCounter::AppletMaxNs) > 0);
        assert!(
            counter(s, ep, EndpointCounter::AppletMaxNs)
                <= counter(s, ep, EndpointCounter::AppletTimeNs)
        );
        assert!(counter(s, ep, EndpointCounter::AppletFuel) > 0);
        assert_eq!(counter(s, ep, EndpointCounter::AppletFaultNative), 0);
    }
    // More than TxBuf holds: doHtoLDMA refuses (a native fault), nothing
    // goes out, and the applet stays attached.
    a.send_blocking(ch, &pattern(9, 4097), SEND_T).unwrap();
    assert_eq!(
        next_event(&mut a, Duration::from_secs(10)),
        Some(Event::AppletFault {
            kind: FaultKind::Native
        })
    );
    assert_eq!(counter(sa, &a, EndpointCounter::AppletFaultNative), 1);
    assert_quiet(&mut b, Duration::from_millis(100), "after a faulted doTx");
    exchange(&mut a, &mut b, ch, &[100], 1);
}

#[test]
fn raw_unet_on_one_engine() {
    let (_engine, s) = one_engine();
    raw_unet_both_ways(&s, &s);
}

/// `applet_compiled` is a level: 0 when an engine-placed applet is
/// attached, 1 once JIVE's code for it is installed (at an invocation after
/// the compiler's thread is done), 0 again after a detach. Messages keep
/// arriving intact throughout (the compiled applet copies through the JIVE
/// intrinsics).
#[test]
fn engine_applets_report_when_they_run_compiled() {
    let class = applet("RawUnet");
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(with_buffers(4096)).unwrap();
    let mut b = s.create_endpoint(with_buffers(4096)).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let t0 = Instant::now();
    while counter(&s, &a, EndpointCounter::AppletCompiled) == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the applet never ran compiled"
        );
        exchange(&mut a, &mut b, ch, &[64, 1000], 1);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(counter(&s, &a, EndpointCounter::AppletCompiled), 1);
    let before = counter(&s, &a, EndpointCounter::AppletTxCalls);
    let n = exchange(&mut a, &mut b, ch, RAW_SIZES, 2);
    assert_eq!(counter(&s, &a, EndpointCounter::AppletTxCalls), before + n);
    a.detach_applet().unwrap();
    assert_eq!(counter(&s, &a, EndpointCounter::AppletCompiled), 0);
    exchange(&mut a, &mut b, ch, &[64], 1);
}

#[test]
fn raw_unet_over_udp() {
    let (_e1, _e2, s1, s2) = udp_sessions(0, 0);
    raw_unet_both_ways(&s1, &s2);
}

// ---------------------------------------------------------------------------
// StdUnet: standard U-Net, messages spanning several buffers
// ---------------------------------------------------------------------------

#[test]
fn std_unet_spans_several_buffers() {
    let class = applet("StdUnet");
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(with_buffers(8192)).unwrap();
    let mut b = s.create_endpoint(with_buffers(8192)).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let sizes = [
        1, 56, 57, 8191, 8192, 8193, 16384, 20_000, 65_536, 100_000, 114_688,
    ];
    let n = exchange(&mut a, &mut b, ch, &sizes, 2);
    assert_eq!(counter(&s, &b, EndpointCounter::AppletRxCalls), n);
    assert_eq!(counter(&s, &a, EndpointCounter::AppletRxCalls), n);
}

#[test]
fn std_unet_gives_buffers_back_when_they_run_out() {
    let class = applet("StdUnet");
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(with_buffers(8192)).unwrap();
    // The receiver manages its own buffers and posts only two.
    let mut b = s
        .create_endpoint(EndpointConfig {
            managed_buffers: false,
            ..with_buffers(8192)
        })
        .unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    b.post_free(0).unwrap();
    b.post_free(8192).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let msg = pattern(5, 20_000);
    // Three buffers needed, two there: dropped, both given back.
    a.send_blocking(ch, &msg, SEND_T).unwrap();
    let start = Instant::now();
    while counter(&s, &b, EndpointCounter::AppletRxCalls) < 1 {
        assert!(start.elapsed() < Duration::from_secs(10), "no doRx");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20));
    assert!(b.poll_recv_desc().is_none(), "a message without buffers");
    // One more buffer: the two given back and the new one carry it.
    b.post_free(16384).unwrap();
    a.send_blocking(ch, &msg, SEND_T).unwrap();
    let start = Instant::now();
    let d = loop {
        if let Some(d) = b.poll_recv_desc() {
            break d;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no delivery");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(d.len, 20_000);
    assert_eq!(d.nbufs, 3);
    let mut offs: Vec<u32> = (0..3).map(|i| d.offset(i)).collect();
    let mut got = vec![0u8; 20_000];
    for (i, &o) in offs.iter().enumerate() {
        let n = 8192.min(20_000 - i * 8192);
        b.read_buffer(o, &mut got[i * 8192..i * 8192 + n]);
    }
    assert!(got == msg, "content");
    offs.sort();
    assert_eq!(offs, [0, 8192, 16384]);
}

// ---------------------------------------------------------------------------
// Refusal and faults
// ---------------------------------------------------------------------------

#[test]
fn class_outside_the_subset_is_refused() {
    let class = applet("UsesLong");
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    match a.attach_applet(&class, AppletOptions::default()) {
        Err(Error::Rejected(why)) => {
            assert!(why.contains("doTx"), "names the method: {why}");
            assert!(why.contains("at offset"), "names the offset: {why}");
        }
        r => panic!("expected a rejection, got {r:?}"),
    }
    assert_eq!(counter(&s, &a, EndpointCounter::AppletAttached), 0);
    // The endpoint works on without an applet.
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    exchange(&mut a, &mut b, ch, &[1, 100, 20_000], 1);
    assert_eq!(counter(&s, &a, EndpointCounter::AppletTxCalls), 0);
}

#[test]
fn looping_applet_faults_then_is_detached() {
    let class = applet("Spin");
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    let opts = AppletOptions {
        fuel: 200_000,
        ..Default::default()
    };
    a.attach_applet(&class, opts).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let limit = 16;
    for i in 1..=limit {
        a.send_blocking(ch, &pattern(i, 100), SEND_T).unwrap();
        let want = if i < limit {
            Event::AppletFault {
                kind: FaultKind::Fuel,
            }
        } else {
            Event::AppletDetached {
                kind: FaultKind::Fuel,
            }
        };
        assert_eq!(
            next_event(&mut a, Duration::from_secs(10)),
            Some(want),
            "send {i}"
        );
    }
    assert_eq!(
        counter(&s, &a, EndpointCounter::AppletFaultFuel),
        limit as u64
    );
    assert_eq!(counter(&s, &a, EndpointCounter::AppletDetached), 1);
    assert_eq!(
        counter(&s, &a, EndpointCounter::AppletTxCalls),
        limit as u64
    );
    assert!(counter(&s, &a, EndpointCounter::AppletFuel) >= 200_000 * limit as u64);
    assert_quiet(
        &mut b,
        Duration::from_millis(50),
        "no faulted send goes out",
    );
    // Plain U-Net from now on.
    exchange(&mut a, &mut b, ch, &[1, 100, 20_000], 2);
    assert_eq!(
        counter(&s, &a, EndpointCounter::AppletTxCalls),
        limit as u64
    );
    assert_eq!(a.poll_event(), None);
}

// ---------------------------------------------------------------------------
// PingPong: round trips between applets, never reaching user level
// ---------------------------------------------------------------------------

fn be(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn ping_pong(sa: &Session, sb: &Session) {
    let class = applet("PingPong");
    let mut a = sa.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = sb.create_endpoint(EndpointConfig::default()).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0;
    for (n, payload) in [(1000u32, 60usize), (1, 4), (250, 1000)] {
        let mut msg = n.to_be_bytes().to_vec();
        msg.extend(pattern(n as usize, payload));
        a.send_blocking(ch, &msg, SEND_T).unwrap();
        let r = a.recv(&mut buf, T).expect("the report of the run");
        assert_eq!(r.len, 12, "one small report");
        assert_eq!(r.channel, ch);
        assert_eq!(be(&buf, 0), n, "round trips done");
        assert_eq!(be(&buf, 8), 0, "pongs of the wrong length");
        eprintln!(
            "PingPong: {n} round trips of {} bytes in {} us by the applet's clock",
            payload + 5,
            be(&buf, 4)
        );
        total += n as u64;
        // Neither user saw a ping or a pong.
        assert_quiet(
            &mut a,
            Duration::from_millis(20),
            "initiator after the report",
        );
        assert_quiet(&mut b, Duration::from_millis(1), "responder");
    }
    assert_eq!(counter(sa, &a, EndpointCounter::AppletTxCalls), 3);
    assert_eq!(counter(sa, &a, EndpointCounter::AppletRxCalls), total);
    assert_eq!(counter(sb, &b, EndpointCounter::AppletRxCalls), total);
    assert_eq!(counter(sb, &b, EndpointCounter::AppletTxCalls), 0);
    assert_eq!(counter(sb, &b, EndpointCounter::RxMsgs), 0);
}

#[test]
fn ping_pong_on_one_engine() {
    let (_engine, s) = one_engine();
    ping_pong(&s, &s);
}

#[test]
fn ping_pong_over_udp() {
    let (_e1, _e2, s1, s2) = udp_sessions(0, 0);
    ping_pong(&s1, &s2);
}

// ---------------------------------------------------------------------------
// FlowControl: reliable, in-order delivery over a lossy wire
// ---------------------------------------------------------------------------

/// Message `i` of a flow-control run: 4..=1024 bytes, its index first.
fn numbered(i: usize) -> Vec<u8> {
    let len = 4 + (i * 389) % 1021;
    let mut m = pattern(i, len);
    m[..4].copy_from_slice(&(i as u32).to_be_bytes());
    m
}

#[test]
fn flow_control_is_reliable_over_a_lossy_wire() {
    let class = applet("FlowControl");
    let (_e1, _e2, s1, s2) = udp_sessions(100_000, 7);
    let mut a = s1.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s2.create_endpoint(EndpointConfig::default()).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    const N: usize = 2000;
    // At most the applet's pool (80) outstanding, so none is dropped.
    const OUTSTANDING: usize = 64;
    let mut buf = vec![0u8; 1 << 16];
    let (mut sent, mut got) = (0, 0);
    let start = Instant::now();
    while got < N {
        while sent < N && sent - got < OUTSTANDING {
            a.send_blocking(ch, &numbered(sent), SEND_T).unwrap();
            sent += 1;
        }
        let r = b
            .recv(&mut buf, T)
            .unwrap_or_else(|e| panic!("message {got}: {e:?}"));
        let want = numbered(got);
        assert_eq!(r.len, want.len(), "length of message {got}");
        assert_eq!(be(&buf, 0), got as u32, "message {got} in order");
        assert!(buf[..r.len] == want[..], "content of message {got}");
        got += 1;
    }
    eprintln!("FlowControl: {N} messages in {:?}", start.elapsed());
    assert_quiet(&mut b, Duration::from_millis(100), "exactly once");
    assert!(
        engine_counter(&s1, EngineCounter::WireDropInjectedDrop) > 0
            && engine_counter(&s2, EngineCounter::WireDropInjectedDrop) > 0,
        "the wire lost packets both ways"
    );
    assert!(counter(&s1, &a, EndpointCounter::AppletTimerCalls) > 0);
    assert_eq!(counter(&s1, &a, EndpointCounter::AppletTxCalls), N as u64);
    assert_eq!(a.poll_event(), None, "no applet fault");
    assert_eq!(
        b.poll_event()
            .map(|e| matches!(e, Event::ChannelOpened { .. })),
        Some(true)
    );
    assert_eq!(b.poll_event(), None, "no applet fault");
}

#[test]
fn flow_control_backlog_is_bounded() {
    let class = applet("FlowControl");
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    // The receiver has no applet yet, so nothing is acknowledged: the
    // window (16) goes out, the backlog (64) waits, the last 10 are dropped.
    for i in 0..90 {
        a.send_blocking(ch, &numbered(i), SEND_T).unwrap();
    }
    let mut buf = vec![0u8; 1 << 16];
    for i in 0..16 {
        let r = b.recv(&mut buf, T).expect("a raw data packet");
        assert_eq!(buf[0], 1, "a data packet");
        assert_eq!(be(&buf, 1), i, "its sequence number");
        assert!(buf[5..r.len] == numbered(i as usize)[..], "its payload");
    }
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    // Raw copies (retransmissions) delivered before the attach.
    while b.try_recv(&mut buf).unwrap().is_some() {}
    // The retransmissions now reach b's applet: all 80 queued messages
    // arrive, in order, once.
    for i in 0..80 {
        let r = b.recv(&mut buf, T).expect("a message");
        assert!(buf[..r.len] == numbered(i)[..], "message {i}");
    }
    assert_quiet(&mut b, Duration::from_millis(100), "the 10 dropped sends");
    // They were never numbered: the next send follows message 79.
    a.send_blocking(ch, &numbered(90), SEND_T).unwrap();
    let r = b.recv(&mut buf, T).expect("the next message");
    assert!(buf[..r.len] == numbered(90)[..]);
    assert_quiet(&mut b, Duration::from_millis(50), "nothing more");
}

// ---------------------------------------------------------------------------
// Multicast: one send, several channels
// ---------------------------------------------------------------------------

#[test]
fn multicast_reaches_the_selected_peers() {
    let class = applet("Multicast");
    let (_e1, _e2, s1, s2) = udp_sessions(0, 0);
    let mut m = s1.create_endpoint(EndpointConfig::default()).unwrap();
    m.attach_applet(&class, AppletOptions::default()).unwrap();
    // Three peers on the same engine, one on the other.
    let mut peers: Vec<Endpoint> = (0..3)
        .map(|_| s1.create_endpoint(EndpointConfig::default()).unwrap())
        .collect();
    peers.push(s2.create_endpoint(EndpointConfig::default()).unwrap());
    let chans: Vec<Channel> = peers
        .iter()
        .map(|p| m.open_channel(p.addr(), ChannelOptions::default()).unwrap())
        .collect();
    let mut buf = vec![0u8; 1 << 17];
    let cases: &[(&[usize], usize)] = &[
        (&[0, 2, 3], 1000),
        (&[1], 10),
        (&[0, 1, 2, 3], 20_000),
        (&[3], 56),
    ];
    for (k, &(to, len)) in cases.iter().enumerate() {
        let mask: u32 = to.iter().map(|&i| 1u32 << chans[i].0).sum();
        let payload = pattern(k, len);
        let mut msg = mask.to_be_bytes().to_vec();
        msg.extend_from_slice(&payload);
        m.send_blocking(chans[0], &msg, SEND_T).unwrap();
        for (i, p) in peers.iter_mut().enumerate() {
            if to.contains(&i) {
                let r = p.recv(&mut buf, T).expect("a selected peer");
                assert_eq!(r.len, len, "case {k}, peer {i}");
                assert!(buf[..len] == payload[..], "case {k}, peer {i}");
            }
        }
        for (i, p) in peers.iter_mut().enumerate() {
            if !to.contains(&i) {
                assert_quiet(p, Duration::from_millis(30), &format!("case {k}, peer {i}"));
            }
        }
    }
    assert_eq!(
        counter(&s1, &m, EndpointCounter::AppletTxCalls),
        cases.len() as u64
    );
    let copies: usize = cases.iter().map(|c| c.0.len()).sum();
    assert_eq!(counter(&s1, &m, EndpointCounter::TxMsgs), copies as u64);
}

// ---------------------------------------------------------------------------
// PacketBuffers: the packet names its receive buffer
// ---------------------------------------------------------------------------

#[test]
fn packet_buffers_land_where_the_packet_says() {
    let class = applet("PacketBuffers");
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    // The receiver posts no free buffers at all.
    let mut b = s
        .create_endpoint(EndpointConfig {
            managed_buffers: false,
            ..Default::default()
        })
        .unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    assert!(matches!(
        next_event(&mut b, Duration::from_secs(10)),
        Some(Event::ChannelOpened { .. })
    ));
    let bs = b.geometry().buffer_size;
    for (k, &(at, len)) in [
        (0x1000u32, 100usize),
        (0x2_0000, 8192),
        (0x3_0040, 20_000),
        (0x40, 5),
    ]
    .iter()
    .enumerate()
    {
        let payload = pattern(k + 40, len);
        let mut msg = at.to_be_bytes().to_vec();
        msg.extend_from_slice(&payload);
        a.send_blocking(ch, &msg, SEND_T).unwrap();
        let start = Instant::now();
        let d = loop {
            if let Some(d) = b.poll_recv_desc() {
                break d;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "case {k}: nothing"
            );
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(d.len as usize, len, "case {k}");
        assert_eq!(d.flags, 0, "case {k}: in buffers, not inline");
        let n = len.div_ceil(bs as usize);
        assert_eq!(d.nbufs as usize, n, "case {k}");
        for i in 0..n {
            assert_eq!(d.offset(i), at + i as u32 * bs, "case {k}, buffer {i}");
        }
        let mut got = vec![0u8; len];
        b.read_buffer(at, &mut got);
        assert!(
            got == payload,
            "case {k}: the payload is in place at {at:#x}"
        );
    }
    // An offset outside the buffer area faults the arrival; nothing lands.
    let mut msg = 0x7fff_0000u32.to_be_bytes().to_vec();
    msg.extend_from_slice(&[1; 100]);
    a.send_blocking(ch, &msg, SEND_T).unwrap();
    assert_eq!(
        next_event(&mut b, Duration::from_secs(10)),
        Some(Event::AppletFault {
            kind: FaultKind::Native
        })
    );
    assert!(b.poll_recv_desc().is_none());
}

// ---------------------------------------------------------------------------
// The U-Net/SLE paper's Figure 6 applets: ReceiverAck, Burst, Generate
// ---------------------------------------------------------------------------

/// a sends N numbered messages to b, never more than `OUTSTANDING` ahead of
/// what b's user has read (so a's backlog never overflows); b's user gets
/// every one, intact and in order; a's user never sees an acknowledgment.
fn receiver_ack_stream(sa: &Session, sb: &Session, placement: Placement, path: PathChoice) {
    let class = applet("ReceiverAck");
    let mut a = sa.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = sb.create_endpoint(EndpointConfig::default()).unwrap();
    let opts = AppletOptions {
        placement,
        ..Default::default()
    };
    a.attach_applet(&class, opts).unwrap();
    b.attach_applet(&class, opts).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions { path }).unwrap();
    const N: usize = 1010;
    const OUTSTANDING: usize = 60;
    let mut buf = vec![0u8; 1 << 16];
    let mut none = vec![0u8; 1 << 16];
    let (mut sent, mut got) = (0, 0);
    while got < N {
        while sent < N && sent - got < OUTSTANDING {
            a.send_blocking(ch, &numbered(sent), SEND_T).unwrap();
            sent += 1;
        }
        // On a failure, where the messages went.
        let why = || {
            format!(
                "\nsender's engine:\n{}receiver's engine:\n{}",
                nonzero_counters(sa),
                nonzero_counters(sb)
            )
        };
        let r = b
            .recv(&mut buf, T)
            .unwrap_or_else(|e| panic!("message {got}: {e:?}{}", why()));
        let want = numbered(got);
        assert_eq!(r.len, want.len(), "length of message {got}{}", why());
        assert!(
            buf[..r.len] == want[..],
            "content of message {got}{}",
            why()
        );
        got += 1;
        // An inline applet runs doRx when its user receives: the sender
        // polls so that its applet sees the acknowledgments.
        assert!(
            a.try_recv(&mut none).unwrap().is_none(),
            "an acknowledgment reached the sending user"
        );
    }
    assert_quiet(&mut b, Duration::from_millis(50), "exactly once");
    assert_quiet(&mut a, Duration::from_millis(20), "no acknowledgment");
    if placement == Placement::Engine {
        // One acknowledgment per 25 data packets, each taken by a's applet.
        let acks = (N / 25) as u64;
        assert_eq!(counter(sa, &a, EndpointCounter::AppletTxCalls), N as u64);
        assert_eq!(counter(sa, &a, EndpointCounter::TxMsgs), N as u64);
        assert_eq!(counter(sa, &a, EndpointCounter::AppletRxCalls), acks);
        assert_eq!(counter(sa, &a, EndpointCounter::RxMsgs), 0);
        assert_eq!(counter(sb, &b, EndpointCounter::AppletTxCalls), 0);
        assert_eq!(counter(sb, &b, EndpointCounter::TxMsgs), acks);
        assert_eq!(counter(sb, &b, EndpointCounter::RxMsgs), N as u64);
    } else {
        assert!(a.client_counter(ClientCounter::AppletCalls) >= (N + N / 25) as u64);
    }
    assert_eq!(a.poll_event(), None, "no applet fault");
}

#[test]
fn receiver_ack_on_one_engine() {
    let (_engine, s) = one_engine();
    receiver_ack_stream(&s, &s, Placement::Engine, PathChoice::Engine);
}

#[test]
fn receiver_ack_over_udp() {
    let (_e1, _e2, s1, s2) = udp_sessions(0, 0);
    receiver_ack_stream(&s1, &s2, Placement::Engine, PathChoice::Engine);
}

#[test]
fn receiver_ack_inline_on_the_direct_path() {
    let (_engine, s) = one_engine();
    receiver_ack_stream(&s, &s, Placement::Inline, PathChoice::Direct);
}

/// Without acknowledgments (the receiver has no applet) the sender's applet
/// sends 25 packets, keeps the next 64 messages and drops the rest; every
/// 10 ms without an acknowledgment it assumes one and sends 25 more.
///
/// The 100 sends must all reach the applet before its first recovery
/// (its first timer, 10 ms after the 26th send); the engine's counters
/// tell whether they did (no timer invocation yet when the 100th `doTx`
/// is counted), whatever the machine's load. An attempt where they did
/// not is tried again; the checks are made on one where they did.
#[test]
fn receiver_ack_credit_and_backlog() {
    let class = applet("ReceiverAck");
    let (_engine, s) = one_engine();
    let mut buf = vec![0u8; 1 << 16];
    let msgs: Vec<Vec<u8>> = (0..100).map(numbered).collect();
    for attempt in 0..20 {
        let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
        let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
        a.attach_applet(&class, AppletOptions::default()).unwrap();
        let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
        let t0 = Instant::now();
        // One call queues them all (unless the send queue fills).
        let queued = a.send_many(ch, &msgs).unwrap_or(0);
        for m in &msgs[queued..] {
            a.send_blocking(ch, m, SEND_T).unwrap();
        }
        // The engine counts each invocation as it ends. The timer count
        // is read after the doTx count: none then means none ran before
        // the 100th doTx.
        let timers = loop {
            let (tx, timers) = (
                counter(&s, &a, EndpointCounter::AppletTxCalls),
                counter(&s, &a, EndpointCounter::AppletTimerCalls),
            );
            if tx >= 100 {
                break timers;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "doTx");
            std::hint::spin_loop();
        };
        if timers > 0 {
            eprintln!(
                "attempt {attempt}: the applet's timer ran before the 100th send \
                 reached it ({:?} for the sends), again",
                t0.elapsed()
            );
            continue;
        }
        // Raw packets (b has no applet): the message, then 'D'.
        let mut arrivals = Vec::new();
        for i in 0..89 {
            let r = b.recv(&mut buf, T).expect("a data packet");
            let want = numbered(i);
            assert_eq!(r.len, want.len() + 1, "packet {i}");
            assert!(buf[..want.len()] == want[..], "packet {i}");
            assert_eq!(buf[want.len()], b'D', "packet {i}: type");
            arrivals.push(t0.elapsed());
        }
        assert_quiet(&mut b, Duration::from_millis(60), "the 11 dropped sends");
        // Batches of 25, each after a recovery of at least 10 ms.
        for (batch, first) in [(1, 25), (2, 50), (3, 75)] {
            assert!(
                arrivals[first] >= Duration::from_millis(10 * batch),
                "packet {first} left at {:?}, before recovery {batch}",
                arrivals[first]
            );
        }
        assert_eq!(counter(&s, &a, EndpointCounter::TxMsgs), 89);
        return;
    }
    panic!("in 20 attempts, 100 sends never reached the applet before its first timer");
}

#[test]
fn burst_sends_25_copies_per_request() {
    let class = applet("Burst");
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let mut buf = vec![0u8; 1 << 17];
    let sizes = [1usize, 56, 57, 4096, 20_000, 65_536];
    for (k, &len) in sizes.iter().enumerate() {
        let mut msg = pattern(k, len);
        msg[0] = b'B';
        a.send_blocking(ch, &msg, SEND_T).unwrap();
        for copy in 0..25 {
            let r = b.recv(&mut buf, T).expect("a copy");
            assert_eq!(r.len, len, "{len} bytes, copy {copy}");
            assert!(buf[..len] == msg[..], "{len} bytes, copy {copy}");
        }
        assert_quiet(&mut b, Duration::from_millis(20), "25 copies only");
    }
    let n = sizes.len() as u64;
    assert_eq!(counter(&s, &a, EndpointCounter::AppletTxCalls), n);
    assert_eq!(counter(&s, &a, EndpointCounter::TxMsgs), 25 * n);
    assert_eq!(counter(&s, &b, EndpointCounter::RxMsgs), 25 * n);
    // Large bursts are spread over invocations (48 KiB each).
    assert!(counter(&s, &a, EndpointCounter::AppletTimerCalls) > 0);
    // Unmarked messages go out once, of any length.
    for len in [1usize, 3000, 70_000] {
        let msg = pattern(len, len);
        assert_ne!(msg[0], b'B');
        a.send_blocking(ch, &msg, SEND_T).unwrap();
        let r = b.recv(&mut buf, T).expect("the message");
        assert_eq!(r.len, len);
        assert!(buf[..len] == msg[..]);
        assert_quiet(&mut b, Duration::from_millis(20), "once");
    }
    // A marked message longer than the applet's copy is dropped.
    let mut big = pattern(7, 70_000);
    big[0] = b'B';
    a.send_blocking(ch, &big, SEND_T).unwrap();
    assert_quiet(&mut b, Duration::from_millis(50), "a marked 70 000 bytes");
    assert_eq!(a.poll_event(), None, "no applet fault");
}

#[test]
fn burst_over_udp() {
    let class = applet("Burst");
    let (_e1, _e2, s1, s2) = udp_sessions(0, 0);
    let mut a = s1.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s2.create_endpoint(EndpointConfig::default()).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    for round in 0..4 {
        let mut msg = pattern(round, 1000);
        msg[0] = b'B';
        a.send_blocking(ch, &msg, SEND_T).unwrap();
        let mut back = None;
        for copy in 0..25 {
            let r = b.recv(&mut buf, T).expect("a copy");
            assert_eq!(r.len, 1000, "round {round}, copy {copy}");
            assert!(buf[..1000] == msg[..], "round {round}, copy {copy}");
            back = Some(r.channel);
        }
        // The receiving user acknowledges each burst; unmarked, it goes
        // out once.
        b.send_blocking(back.unwrap(), b"Z", SEND_T).unwrap();
        let r = a.recv(&mut buf, T).expect("the acknowledgment");
        assert_eq!((r.len, buf[0]), (1, b'Z'));
        assert_quiet(&mut a, Duration::from_millis(20), "one acknowledgment");
    }
    assert_quiet(&mut b, Duration::from_millis(20), "25 copies per burst");
    assert_eq!(counter(&s1, &a, EndpointCounter::TxMsgs), 100);
}

fn generate(sa: &Session, sb: &Session) {
    let class = applet("Generate");
    let mut a = sa.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = sb.create_endpoint(EndpointConfig::default()).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let mut buf = vec![0u8; 1 << 17];
    let sizes = [16usize, 56, 57, 1000, 9000, 65_536, 16];
    for (seq, &len) in sizes.iter().enumerate() {
        // The user's bytes do not matter: the applet sends its own.
        a.send_blocking(ch, &pattern(seq, len), SEND_T).unwrap();
        let r = b.recv(&mut buf, T).expect("a generated message");
        assert_eq!(r.len, len, "message {seq}");
        assert_eq!(be(&buf, 0), seq as u32, "message {seq}: its number");
        assert!(
            buf[4..len].iter().all(|&x| x == 0),
            "message {seq}: zeros after the number"
        );
    }
    // Short sends go out as written; longer than 64 KiB are dropped.
    let short = pattern(99, 15);
    a.send_blocking(ch, &short, SEND_T).unwrap();
    let r = b.recv(&mut buf, T).expect("the short message");
    assert!(buf[..r.len] == short[..]);
    a.send_blocking(ch, &pattern(98, 65_537), SEND_T).unwrap();
    assert_quiet(&mut b, Duration::from_millis(50), "a 65 537-byte send");
    // The numbering goes on where it was.
    a.send_blocking(ch, &pattern(97, 100), SEND_T).unwrap();
    let r = b.recv(&mut buf, T).expect("the next generated message");
    assert_eq!((r.len, be(&buf, 0)), (100, sizes.len() as u32));
    assert_eq!(counter(sa, &a, EndpointCounter::AppletTxCalls), 10);
    assert_eq!(counter(sa, &a, EndpointCounter::TxMsgs), 9);
    assert_eq!(a.poll_event(), None, "no applet fault");
}

#[test]
fn generate_sends_its_own_data() {
    let (_engine, s) = one_engine();
    generate(&s, &s);
}

#[test]
fn generate_over_udp() {
    let (_e1, _e2, s1, s2) = udp_sessions(0, 0);
    generate(&s1, &s2);
}
