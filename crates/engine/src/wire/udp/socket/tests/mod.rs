//! The UDP port's tests: batching, offloads, fault injection, reassembly
//! over real sockets.

use super::*;
use crate::wire::frag::{Message, Reassembler, ReassemblyConfig};
use crate::wire::testutil::pattern;
use crate::wire::MAX_MESSAGE;
use std::time::{Duration, Instant};

const LO: &str = "127.0.0.1:0";

fn target(ch: u16) -> DataTarget {
    DataTarget {
        dst_endpoint: 1,
        dst_channel: ch,
        token: 0x7070,
        flags: 0,
    }
}

/// The receive path of the engine, reduced: parse, check the token,
/// reassemble. Counts drops in `stats`.
struct Rx {
    reasm: Reassembler,
    stats: WireStats,
    got: Vec<(u32, Vec<u8>)>,
    /// Every msg_id of which a Data frame arrived.
    seen: std::collections::HashSet<u32>,
}

impl Rx {
    fn new() -> Self {
        Rx {
            reasm: Reassembler::new(ReassemblyConfig::default()),
            stats: WireStats::default(),
            got: Vec::new(),
            seen: Default::default(),
        }
    }

    fn drain(&mut self, port: &mut UdpPort, now: u64) -> usize {
        let mut total = 0;
        loop {
            let Rx {
                reasm,
                stats,
                got,
                seen,
            } = self;
            let n = port
                .recv_batch(|src, dgram| match Frame::parse(dgram) {
                    Err(e) => stats.count_drop(e.into()),
                    Ok(Frame {
                        src_engine,
                        body: Body::Data(d),
                    }) => {
                        if d.token != 0x7070 {
                            stats.count_drop(WireDrop::ForgedToken);
                            return;
                        }
                        seen.insert(d.msg_id);
                        if let Ok(Some(m)) = reasm.push(src, src_engine, &d, now) {
                            got.push((d.msg_id, m.as_slice().to_vec()));
                            if let Message::Owned(v) = m {
                                reasm.recycle(v);
                            }
                        }
                    }
                    Ok(_) => {}
                })
                .unwrap();
            total += n;
            if n == 0 {
                return total;
            }
        }
    }
}

fn size_of_msg(i: u32) -> usize {
    // Sizes around the fragment edges, plus some large ones.
    let s = ETHERNET_DATAGRAM - DATA_HEADER_LEN;
    [0, 1, s - 1, s, s + 1, 3 * s + 5, 20_000, 100_000][i as usize % 8]
}

#[test]
fn loopback_exchange_of_fragmented_messages() {
    let mut a = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
    let mut b = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
    let dst = b.local_addr().unwrap();
    let mut batch = SendBatch::for_port(a.config());
    let mut rx = Rx::new();
    let total = 200u32;
    let mut frags = 0usize;
    for id in 0..total {
        let msg = pattern(size_of_msg(id), u64::from(id));
        frags += usize::from(batch.push_message(dst, 77, target(3), id, &msg).unwrap());
        if id % 4 == 3 {
            a.send_batch(&mut batch).unwrap();
            assert!(batch.is_empty());
            rx.drain(&mut b, 0);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while rx.got.len() < total as usize && Instant::now() < deadline {
        a.send_batch(&mut batch).unwrap();
        rx.drain(&mut b, 0);
    }
    assert_eq!(rx.got.len(), total as usize, "stats {:?}", b.stats);
    for (id, m) in &rx.got {
        assert_eq!(m, &pattern(size_of_msg(*id), u64::from(*id)), "msg {id}");
    }
    assert_eq!(a.stats.datagrams_sent as usize, frags);
    assert_eq!(b.stats.datagrams_received as usize, frags);
    assert_eq!(a.stats.bytes_sent, b.stats.bytes_received);
    assert!(
        a.stats.send_syscalls < frags as u64 / 8,
        "batched: {:?}",
        a.stats
    );
    assert_eq!(
        rx.stats.total_drops() + a.stats.total_drops() + b.stats.total_drops(),
        0
    );
}

#[test]
fn oversized_datagram_is_counted_as_truncated() {
    let small = PortConfig {
        max_datagram: 200,
        ..PortConfig::default()
    };
    let mut a = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
    let mut b = UdpPort::bind(LO.parse().unwrap(), small).unwrap();
    let dst = b.local_addr().unwrap();
    let mut batch = SendBatch::for_port(a.config());
    batch
        .push_message(dst, 1, target(0), 1, &[7u8; 1000])
        .unwrap();
    batch
        .push_message(dst, 1, target(0), 2, &[7u8; 100])
        .unwrap();
    assert_eq!(a.send_batch(&mut batch).unwrap(), 2);
    let mut rx = Rx::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while b.stats.datagrams_received < 2 && Instant::now() < deadline {
        rx.drain(&mut b, 0);
    }
    assert_eq!(b.stats.drop_count(WireDrop::TruncatedDatagram), 1);
    assert_eq!(rx.got, vec![(2, vec![7u8; 100])]);
}

#[test]
fn garbage_and_forged_datagrams_are_counted() {
    let mut a = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
    let mut b = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
    let dst = b.local_addr().unwrap();
    let mut batch = SendBatch::for_port(a.config());
    batch
        .push_with(dst, |buf| {
            buf[..3].copy_from_slice(b"UN\x01");
            Ok(3)
        })
        .unwrap();
    batch
        .push_with(dst, |buf| {
            buf[..20].fill(0xEE);
            Ok(20)
        })
        .unwrap();
    let forged = DataTarget {
        token: 1,
        ..target(0)
    };
    batch.push_message(dst, 1, forged, 1, b"forged").unwrap();
    batch.push_message(dst, 1, target(0), 2, b"good").unwrap();
    assert_eq!(a.send_batch(&mut batch).unwrap(), 4);
    let mut rx = Rx::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while b.stats.datagrams_received < 4 && Instant::now() < deadline {
        rx.drain(&mut b, 0);
    }
    assert_eq!(rx.stats.drop_count(WireDrop::TruncatedFrame), 1);
    assert_eq!(rx.stats.drop_count(WireDrop::BadMagic), 1);
    assert_eq!(rx.stats.drop_count(WireDrop::ForgedToken), 1);
    assert_eq!(rx.got, vec![(2, b"good".to_vec())]);
}

#[test]
fn refused_datagram_is_counted_and_the_rest_still_sent() {
    let mut a = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
    let mut b = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
    let dst = b.local_addr().unwrap();
    // An IPv6 destination on an IPv4 socket: the kernel refuses that one
    // datagram, in the middle of a batch (a partial sendmmsg).
    let bad: SocketAddr = "[::1]:9".parse().unwrap();
    let mut batch = SendBatch::for_port(a.config());
    batch.push_message(dst, 1, target(0), 1, b"one").unwrap();
    batch.push_message(bad, 1, target(0), 2, b"lost").unwrap();
    batch.push_message(dst, 1, target(0), 3, b"three").unwrap();
    assert_eq!(a.send_batch(&mut batch).unwrap(), 2);
    assert!(batch.is_empty());
    assert_eq!(a.stats.drop_count(WireDrop::SendFailed), 1);
    assert!(a.last_send_error.is_some());
    assert!(a.stats.send_syscalls >= 2);
    let mut rx = Rx::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while rx.got.len() < 2 && Instant::now() < deadline {
        rx.drain(&mut b, 0);
    }
    assert_eq!(rx.got, vec![(1, b"one".to_vec()), (3, b"three".to_vec())]);
}

#[test]
fn dual_stack_port_reports_ipv4_sources_as_ipv4() {
    // Skipped where the host has no IPv6.
    let Ok(mut b) = UdpPort::bind("[::]:0".parse().unwrap(), PortConfig::default()) else {
        return;
    };
    let mut a = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
    let port = b.local_addr().unwrap().port();
    let dst = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut batch = SendBatch::for_port(a.config());
    batch.push_message(dst, 1, target(0), 1, b"v4").unwrap();
    assert_eq!(a.send_batch(&mut batch).unwrap(), 1);
    let mut from = None;
    let deadline = Instant::now() + Duration::from_secs(5);
    while from.is_none() && Instant::now() < deadline {
        b.recv_batch(|src, _| from = Some(src)).unwrap();
    }
    assert_eq!(from, Some(a.local_addr().unwrap()));
    // And the reply goes out of the IPv6 socket to that IPv4 address.
    let mut back = SendBatch::for_port(b.config());
    back.push_message(from.unwrap(), 2, target(0), 2, b"back")
        .unwrap();
    assert_eq!(b.send_batch(&mut back).unwrap(), 1);
    let mut rx = Rx::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while rx.got.is_empty() && Instant::now() < deadline {
        rx.drain(&mut a, 0);
    }
    assert_eq!(rx.got, vec![(2, b"back".to_vec())]);
}

#[test]
fn segmented_runs_arrive_as_the_same_datagrams() {
    // The same batch, with and without segmentation offload, must give
    // the receiver the same datagrams in the same order.
    let mut seen = Vec::new();
    for (gso, gro) in [(true, true), (true, false), (false, true), (false, false)] {
        let cfg = PortConfig {
            gso,
            gro,
            ..PortConfig::default()
        };
        let mut a = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
        let mut b = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
        let dst = b.local_addr().unwrap();
        let mut batch = SendBatch::for_port(&cfg);
        let close = Frame {
            src_engine: 3,
            body: Body::Close(crate::wire::Close {
                dst_endpoint: 1,
                dst_channel: 2,
                token: 3,
            }),
        };
        batch.push_frame(dst, &close).unwrap();
        batch
            .push_message(dst, 3, target(0), 1, &pattern(100_000, 5))
            .unwrap();
        batch
            .push_message(dst, 3, target(0), 2, &pattern(2 * 1424, 6))
            .unwrap();
        batch.push_frame(dst, &close).unwrap();
        batch.push_frame(dst, &close).unwrap();
        let want: Vec<Vec<u8>> = batch.datagrams().map(|(_, d)| d.to_vec()).collect();
        assert_eq!(a.send_batch(&mut batch).unwrap(), want.len());
        if gso && a.gso_active() {
            assert!(a.stats.send_syscalls <= 2, "{:?}", a.stats);
        }
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < want.len() && Instant::now() < deadline {
            b.recv_batch(|_, d| got.push(d.to_vec())).unwrap();
        }
        assert_eq!(got, want, "gso {gso} gro {gro}");
        assert_eq!(b.stats.datagrams_received as usize, want.len());
        assert!(gso || a.stats.gso_runs == 0);
        assert!(gro || b.stats.gro_runs == 0);
        assert_eq!(b.stats.total_drops(), 0);
        seen.push(got);
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn gro_control_message_parsing() {
    const W: usize = size_of::<usize>();
    fn cmsg(level: i32, ty: i32, data: &[u8]) -> Vec<u8> {
        let hdr = size_of::<libc::cmsghdr>();
        let mut v = Vec::new();
        v.extend_from_slice(&(hdr + data.len()).to_ne_bytes());
        v.extend_from_slice(&level.to_ne_bytes());
        v.extend_from_slice(&ty.to_ne_bytes());
        v.resize(hdr, 0);
        v.extend_from_slice(data);
        v.resize(v.len().div_ceil(W) * W, 0);
        v
    }
    let seg = |c: &[u8]| parse_control(c).gro_segment;
    let gro = cmsg(libc::SOL_UDP, libc::UDP_GRO, &1472i32.to_ne_bytes());
    assert_eq!(seg(&gro), Some(1472));
    // After another control message.
    let mut two = cmsg(libc::SOL_IP, 8, &[1, 2, 3, 4]);
    two.extend_from_slice(&gro);
    assert_eq!(seg(&two), Some(1472));
    // With the socket's drop count, in either order.
    let drops = cmsg(libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &7u32.to_ne_bytes());
    for both in [
        [&gro[..], &drops[..]].concat(),
        [&drops[..], &gro[..]].concat(),
    ] {
        assert_eq!(
            parse_control(&both),
            RxControl {
                gro_segment: Some(1472),
                socket_drops: Some(7)
            }
        );
    }
    // Missing, cut short, or malformed: nothing, no panic.
    assert_eq!(parse_control(&[]), RxControl::default());
    assert_eq!(seg(&cmsg(libc::SOL_IP, 8, &[0; 4])), None);
    // Cut before the end of its data (padding may be left out).
    for n in 0..size_of::<libc::cmsghdr>() + 4 {
        assert_eq!(seg(&gro[..n]), None, "cut at {n}");
    }
    let mut zero_len = gro.clone();
    zero_len[..W].fill(0);
    assert_eq!(seg(&zero_len), None);
    let mut huge_len = gro.clone();
    huge_len[..W].copy_from_slice(&usize::MAX.to_ne_bytes());
    assert_eq!(seg(&huge_len), None);
}

#[test]
fn a_stopped_hand_over_resumes_where_it_stopped() {
    let mut b = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
    let dst = b.local_addr().unwrap();
    // A run sent with segmentation offload (kept whole by UDP_GRO where
    // the kernel coalesces it) and datagrams sent one by one.
    let mut a = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
    let mut batch = SendBatch::for_port(a.config());
    for k in 0..8u8 {
        batch
            .push_with(dst, |buf| {
                buf[..100].fill(k);
                Ok(100)
            })
            .unwrap();
    }
    assert_eq!(a.send_batch(&mut batch).unwrap(), 8);
    let plain = UdpSocket::bind(LO).unwrap();
    for k in 8..12u8 {
        plain.send_to(&[k; 100], dst).unwrap();
    }
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    // Stop after every third datagram; each call resumes without a new
    // recvmmsg while some are left.
    while got.len() < 12 && Instant::now() < deadline {
        let pending = b.has_pending();
        let calls = b.stats.recv_syscalls;
        let mut n = 0;
        let taken = b
            .recv_batch_until(|_, d| {
                got.push(d[0]);
                n += 1;
                n < 3
            })
            .unwrap();
        assert_eq!(taken, n);
        if pending {
            assert_eq!(
                b.stats.recv_syscalls, calls,
                "a resumed call reads the socket"
            );
        }
    }
    assert_eq!(got, (0..12u8).collect::<Vec<_>>());
    assert!(!b.has_pending());
    // The run came coalesced, so a hand-over stopped inside it.
    assert_eq!(b.stats.gro_runs, 1, "the run was not coalesced");
}

#[test]
fn datagrams_lost_at_a_full_socket_are_counted() {
    // A receive buffer of a few KiB (the kernel doubles what it is
    // asked for, and takes at least 2 KiB), which 300 datagrams of
    // 1 000 bytes overflow.
    let small = PortConfig {
        socket_buffer: 4096,
        ..PortConfig::default()
    };
    let mut b = UdpPort::bind(LO.parse().unwrap(), small).unwrap();
    assert!(b.drops_reported, "SO_RXQ_OVFL refused");
    let dst = b.local_addr().unwrap();
    let a = UdpSocket::bind(LO).unwrap();
    const SENT: u64 = 300;
    for _ in 0..SENT {
        a.send_to(&[1u8; 1000], dst).unwrap();
    }
    let mut got = 0u64;
    while b.recv_batch(|_, _| got += 1).unwrap() > 0 {}
    assert!(got < SENT, "the buffer held all {got}");
    // Asked for at once; then told again, with the same count, by the
    // next datagram the kernel queues: counted once.
    b.sync_socket_drops();
    assert_eq!(b.stats.socket_overflows, SENT - got);
    a.send_to(&[2u8; 1000], dst).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = Vec::new();
    while last.is_empty() && Instant::now() < deadline {
        b.recv_batch(|_, d| last.push(d[0])).unwrap();
    }
    assert_eq!(last, [2]);
    assert_eq!(b.stats.socket_overflows, SENT - got);
}

#[test]
fn refused_segmentation_falls_back_to_plain_datagrams() {
    let mut a = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
    let mut b = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
    // Without UDP checksums the kernel refuses segmentation (EINVAL).
    let on: libc::c_int = 1;
    // SAFETY: the port's socket is open; the value points at a live
    // c_int whose size is passed.
    let rc = unsafe {
        libc::setsockopt(
            a.raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NO_CHECK,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
    let dst = b.local_addr().unwrap();
    let mut batch = SendBatch::for_port(a.config());
    let msg = pattern(20_000, 8);
    let n = batch.push_message(dst, 1, target(0), 1, &msg).unwrap();
    assert_eq!(a.send_batch(&mut batch).unwrap(), usize::from(n));
    assert!(!a.gso_active());
    assert_eq!(a.stats.gso_runs, 0);
    assert_eq!(a.stats.total_drops(), 0);
    let mut rx = Rx::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while rx.got.is_empty() && Instant::now() < deadline {
        rx.drain(&mut b, 0);
    }
    assert_eq!(rx.got, vec![(1, msg)]);
}

#[test]
fn send_batch_queue_is_bounded_and_compacts() {
    let dst: SocketAddr = "127.0.0.1:9".parse().unwrap();
    // Room for 3 datagrams of 1000 bytes.
    let mut batch = SendBatch::new(1000, 3000);
    let stride = 1000 - DATA_HEADER_LEN;
    assert_eq!(
        batch.push_message(dst, 1, target(0), 1, &vec![1; 2 * stride]),
        Ok(2)
    );
    assert_eq!(
        batch.push_message(dst, 1, target(0), 2, &vec![2; 2 * stride]),
        Err(PushError::Full)
    );
    assert_eq!(
        batch.push_message(dst, 1, target(0), 3, &vec![3; 4 * stride]),
        Err(PushError::TooLarge)
    );
    assert_eq!(
        batch.push_message(dst, 1, target(0), 4, &vec![0; MAX_MESSAGE + 1]),
        Err(PushError::TooLarge)
    );
    assert_eq!(batch.len(), 2);
    assert_eq!(batch.stats.drop_count(WireDrop::SendQueueFull), 0);
    assert_eq!(batch.stats.drop_count(WireDrop::MessageTooLarge), 2);
    // Sending the first datagram only (as after a partial sendmmsg) lets
    // the queue move the rest to the front and take a new message.
    batch.head = 1;
    assert_eq!(
        batch.push_message(dst, 1, target(0), 5, &vec![5; 2 * stride]),
        Ok(2)
    );
    assert_eq!(batch.len(), 3);
    let ids: Vec<u32> = batch
        .datagrams()
        .map(|(_, d)| match Frame::parse(d).unwrap().body {
            Body::Data(d) => d.msg_id,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(ids, vec![1, 5, 5]);
    assert_eq!(batch.clear(), 3);
    assert!(batch.is_empty());

    // Compaction with entries out of arena order (injected reordering):
    // every queued datagram keeps its bytes.
    let mut batch = SendBatch::new(1000, 3000);
    for id in 0..3u8 {
        batch
            .push_with(dst, |b| {
                b[..900].fill(id);
                Ok(900)
            })
            .unwrap();
    }
    batch.entries.swap(1, 2);
    batch.head = 1;
    // 2700 bytes used, 1000 needed: only fits after compaction.
    batch
        .push_with(dst, |b| {
            b[..900].fill(3);
            Ok(900)
        })
        .unwrap();
    let got: Vec<Vec<u8>> = batch.datagrams().map(|(_, d)| d.to_vec()).collect();
    assert_eq!(got, vec![vec![2; 900], vec![1; 900], vec![3; 900]]);
}

#[test]
fn a_vi_message_carries_an_ack_when_both_fit_one_datagram() {
    let dst: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut batch = SendBatch::new(1000, 8000);
    let to = DataTarget {
        flags: crate::wire::frame::DATA_FLAG_VI,
        ..target(crate::wire::frame::VI_DATA_CHANNEL)
    };
    let ack = Ack {
        cum_ack: 5,
        cum_placed: 4,
        window_end: 69,
        nack: false,
    };
    let room = 1000 - DATA_HEADER_LEN - ACK_TRAILER_LEN;
    assert!(batch.carries_ack(room) && !batch.carries_ack(room + 1));
    assert_eq!(
        batch.push_vi_message(dst, 1, to, 1, &[1; 64], Some(ack)),
        Ok(true)
    );
    assert_eq!(
        batch.push_vi_message(dst, 1, to, 2, &[2; 64], None),
        Ok(false)
    );
    // Too long to carry it (or cut in fragments): the message goes
    // alone, and the caller keeps its ack for a frame of its own.
    assert_eq!(
        batch.push_vi_message(dst, 1, to, 3, &vec![3; room + 1], Some(ack)),
        Ok(false)
    );
    assert_eq!(
        batch.push_vi_message(dst, 1, to, 4, &vec![4; 3000], Some(ack)),
        Ok(false)
    );
    let got: Vec<(u32, Option<Ack>, usize)> = batch
        .datagrams()
        .map(|(_, d)| {
            assert!(d.len() <= 1000);
            match Frame::parse(d).unwrap().body {
                Body::Data(f) => (f.msg_id, f.ack, f.payload.len()),
                _ => unreachable!(),
            }
        })
        .collect();
    assert_eq!(got[0], (1, Some(ack), 64));
    assert_eq!(got[1], (2, None, 64));
    assert_eq!(got[2], (3, None, room + 1));
    assert!(got[3..].iter().all(|&(id, a, _)| id == 4 && a.is_none()));
}

#[test]
fn bind_rejects_bad_settings() {
    for cfg in [
        PortConfig {
            max_datagram: MIN_DATAGRAM - 1,
            ..PortConfig::default()
        },
        PortConfig {
            max_datagram: MAX_DATAGRAM + 1,
            ..PortConfig::default()
        },
        PortConfig {
            batch: 0,
            ..PortConfig::default()
        },
        PortConfig {
            batch: MAX_BATCH + 1,
            ..PortConfig::default()
        },
        PortConfig {
            drop_rate_ppm: 1_000_001,
            ..PortConfig::default()
        },
        PortConfig {
            dup_rate_ppm: 1_000_001,
            ..PortConfig::default()
        },
        PortConfig {
            reorder_rate_ppm: 1_000_001,
            ..PortConfig::default()
        },
    ] {
        let e = UdpPort::bind(LO.parse().unwrap(), cfg).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
    let p = UdpPort::bind("[::1]:0".parse().unwrap(), PortConfig::loopback());
    // IPv6 loopback may be missing in containers; when present, it works.
    if let Ok(mut p6) = p {
        let dst = p6.local_addr().unwrap();
        let mut batch = SendBatch::for_port(p6.config());
        batch
            .push_message(dst, 1, target(0), 9, &pattern(100_000, 1))
            .unwrap();
        assert_eq!(p6.send_batch(&mut batch).unwrap(), 2);
        let mut rx = Rx::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while rx.got.is_empty() && Instant::now() < deadline {
            rx.drain(&mut p6, 0);
        }
        assert_eq!(rx.got, vec![(9, pattern(100_000, 1))]);
    }
}

/// Drains `port` on another thread until `stop`; returns datagrams and
/// bytes received.
fn sink(
    mut port: UdpPort,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<(u64, u64)> {
    use std::sync::atomic::Ordering;
    std::thread::spawn(move || {
        let mut reasm = Reassembler::new(ReassemblyConfig::default());
        let mut msgs = 0u64;
        // Acquire: pairs with the Release store of the sender when done.
        while !stop.load(Ordering::Acquire) {
            let n = port
                .recv_batch(|src, d| {
                    if let Ok(Frame {
                        src_engine,
                        body: Body::Data(d),
                    }) = Frame::parse(d)
                    {
                        if let Ok(Some(m)) = reasm.push(src, src_engine, &d, 0) {
                            msgs += 1;
                            if let Message::Owned(v) = m {
                                reasm.recycle(v);
                            }
                        }
                    }
                })
                .unwrap();
            if n == 0 {
                std::thread::yield_now();
            }
        }
        (port.stats.datagrams_received, msgs)
    })
}

/// Datagrams per second through `sendmmsg` against one `send_to` per
/// datagram, and message throughput of 1 MiB messages at Ethernet and
/// loopback datagram sizes. Run with
/// `cargo test --release -p unet-engine wire::udp::tests::bench -- --ignored --nocapture`.
#[test]
#[ignore = "measurement; run by hand in release"]
fn bench_sendmmsg_vs_send_to() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const N: usize = 400_000;
    let frame = Frame {
        src_engine: 1,
        body: Body::Close(crate::wire::Close {
            dst_endpoint: 1,
            dst_channel: 1,
            token: 1,
        }),
    };
    let mut bytes = [0u8; 64];
    let len = frame.emit(&mut bytes).unwrap();

    for round in 0..2 {
        // Plain: one send_to per datagram.
        let rx = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
        let dst = rx.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let h = sink(rx, stop.clone());
        let plain = UdpSocket::bind(LO).unwrap();
        let t = Instant::now();
        for _ in 0..N {
            plain.send_to(&bytes[..len], dst).unwrap();
        }
        let plain_s = t.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_millis(50));
        stop.store(true, Ordering::Release);
        let (plain_rx, _) = h.join().unwrap();

        // Batched: sendmmsg, 64 per call, without and with segmentation.
        let mut line = format!(
            "round {round}: {len}-byte datagrams: send_to {:.0}/s (received {plain_rx})",
            N as f64 / plain_s
        );
        for gso in [false, true] {
            let cfg = PortConfig {
                gso,
                ..PortConfig::default()
            };
            let rx = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
            let dst = rx.local_addr().unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let h = sink(rx, stop.clone());
            let mut tx = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
            let mut batch = SendBatch::for_port(tx.config());
            let t = Instant::now();
            let mut sent = 0;
            while sent < N {
                for _ in 0..MAX_BATCH.min(N - sent) {
                    batch.push_frame(dst, &frame).unwrap();
                }
                let want = batch.len();
                let mut got = 0;
                while got < want {
                    got += tx.send_batch(&mut batch).unwrap();
                }
                sent += got;
            }
            let secs = t.elapsed().as_secs_f64();
            std::thread::sleep(Duration::from_millis(50));
            stop.store(true, Ordering::Release);
            let (received, _) = h.join().unwrap();
            assert_eq!(tx.stats.datagrams_sent as usize, N);
            line += &format!(
                "; sendmmsg gso {} {:.0}/s (x{:.2}, received {received}, {} syscalls)",
                tx.gso_active(),
                N as f64 / secs,
                plain_s / secs,
                tx.stats.send_syscalls,
            );
        }
        println!("{line}");
    }

    // 1 MiB messages, fragmented, through the receiving reassembler.
    let no_gso = PortConfig {
        gso: false,
        ..PortConfig::ethernet()
    };
    let no_gro = PortConfig {
        gro: false,
        ..PortConfig::ethernet()
    };
    for cfg in [
        no_gso,
        no_gro,
        PortConfig::ethernet(),
        PortConfig::loopback(),
    ] {
        let rx = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
        let dst = rx.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let h = sink(rx, stop.clone());
        let mut tx = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
        let mut batch = SendBatch::for_port(&cfg);
        let msg = pattern(MAX_MESSAGE, 3);
        let count = 200;
        let t = Instant::now();
        for id in 0..count {
            batch.push_message(dst, 1, target(0), id, &msg).unwrap();
            while !batch.is_empty() {
                tx.send_batch(&mut batch).unwrap();
            }
            // Pace so that a slow receiver is not simply overrun.
            std::thread::sleep(Duration::from_micros(200));
        }
        let secs = t.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::Release);
        let (_, msgs) = h.join().unwrap();
        println!(
            "1 MiB messages, {}-byte datagrams, gso {} gro {}: sent {:.0} MB/s, {} syscalls, \
                 {msgs}/{count} reassembled",
            cfg.max_datagram,
            tx.gso_active(),
            cfg.gro,
            (count as usize * MAX_MESSAGE) as f64 / secs / 1e6,
            tx.stats.send_syscalls
        );
        assert!(msgs > 0);
    }
}

mod faults;
