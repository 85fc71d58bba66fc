//! Fault injection over real sockets: drops, duplicates and reordering
//! lose or corrupt nothing, depend on the seed only, come close to the
//! rates asked, and what is held back always goes out.

use super::*;

/// Sends `total` messages of 1 to 5 fragments from a port dropping
/// `ppm` of its datagrams; returns (receiver, sender stats, fragments).
fn lossy_run(ppm: u32, seed: u64, total: u32) -> (Rx, WireStats, u64) {
    let cfg = PortConfig {
        drop_rate_ppm: ppm,
        drop_seed: seed,
        ..PortConfig::default()
    };
    let mut a = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
    let mut b = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
    let dst = b.local_addr().unwrap();
    let mut batch = SendBatch::for_port(a.config());
    let mut rx = Rx::new();
    let mut frags = 0u64;
    for id in 0..total {
        let msg = pattern(lossy_len(id), 99 + u64::from(id));
        frags += u64::from(batch.push_message(dst, 5, target(1), id, &msg).unwrap());
        if id % 8 == 7 || id + 1 == total {
            a.send_batch(&mut batch).unwrap();
            rx.drain(&mut b, 0);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while b.stats.datagrams_received < a.stats.datagrams_sent && Instant::now() < deadline {
        rx.drain(&mut b, 0);
    }
    assert_eq!(b.stats.datagrams_received, a.stats.datagrams_sent);
    (rx, a.stats, frags)
}

/// 1 to 5 fragments at the default datagram size.
fn lossy_len(id: u32) -> usize {
    1000 + (id as usize % 5) * 1400
}

#[test]
fn injected_drops_lose_whole_messages_never_corrupt() {
    let total = 400u32;
    // (drop rate, expected share of messages delivered: mean of (1-p)^k
    // over k = 1..=5 fragments).
    for (ppm, seed) in [(0, 1), (10_000, 2), (100_000, 3), (300_000, 4)] {
        let (mut rx, tx, frags) = lossy_run(ppm, seed, total);
        let injected = tx.drop_count(WireDrop::InjectedDrop);
        assert_eq!(tx.datagrams_sent + injected, frags);
        let p = f64::from(ppm) / 1e6;
        let rate = injected as f64 / frags as f64;
        assert!((rate - p).abs() < 0.05, "ppm {ppm}: dropped {rate}");
        // Every delivered message is intact; the others are lost whole.
        for (id, m) in &rx.got {
            assert_eq!(m, &pattern(lossy_len(*id), 99 + u64::from(*id)), "msg {id}");
        }
        let delivered = rx.got.len() as u64;
        let expect = (1..=5).map(|k| (1.0 - p).powi(k)).sum::<f64>() / 5.0;
        let share = delivered as f64 / f64::from(total);
        assert!(
            (share - expect).abs() < 0.1,
            "ppm {ppm}: {share} vs {expect}"
        );
        if ppm == 0 {
            assert_eq!(delivered, u64::from(total));
        }
        // Every message that arrived in part is counted once as lost
        // when its time is up; messages of which nothing arrived leave
        // no trace at the receiver.
        let partial = rx.seen.len() as u64 - delivered;
        assert_eq!(rx.reasm.in_flight() as u64, partial);
        rx.reasm.expire(ReassemblyConfig::default().timeout_ns);
        assert_eq!(
            rx.reasm.stats.drop_count(WireDrop::ReassemblyTimeout),
            partial
        );
        assert_eq!(rx.reasm.in_flight(), 0);
        assert!(ppm < 100_000 || partial > 0);
    }
    // Same seed, same drops.
    let (_, t1, _) = lossy_run(100_000, 3, 100);
    let (_, t2, _) = lossy_run(100_000, 3, 100);
    assert_eq!(t1.drops, t2.drops);
    assert_eq!(t1.datagrams_sent, t2.datagrams_sent);
}

#[test]
fn injected_duplicates_and_reordering_never_lose_or_corrupt() {
    let cfg = PortConfig {
        dup_rate_ppm: 100_000,
        reorder_rate_ppm: 100_000,
        drop_seed: 11,
        ..PortConfig::default()
    };
    let mut a = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
    let mut b = UdpPort::bind(LO.parse().unwrap(), PortConfig::default()).unwrap();
    let dst = b.local_addr().unwrap();
    // A small queue, often full.
    let mut batch = SendBatch::new(cfg.max_datagram, 64 << 10);
    let mut rx = Rx::new();
    let total = 300u32;
    let mut frags = 0u64;
    for id in 0..total {
        let msg = pattern(lossy_len(id), u64::from(id));
        loop {
            match batch.push_message(dst, 5, target(1), id, &msg) {
                Ok(n) => {
                    frags += u64::from(n);
                    break;
                }
                Err(PushError::Full) => {
                    a.send_batch(&mut batch).unwrap();
                    rx.drain(&mut b, 0);
                }
                Err(e) => panic!("{e:?}"),
            }
        }
        if id % 5 == 4 {
            a.send_batch(&mut batch).unwrap();
            rx.drain(&mut b, 0);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !batch.is_empty() || b.stats.datagrams_received < a.stats.datagrams_sent {
        a.send_batch(&mut batch).unwrap();
        rx.drain(&mut b, 0);
        assert!(Instant::now() < deadline, "{:?} {:?}", a.stats, b.stats);
    }
    let dups = a.stats.injected_duplicates;
    assert!(dups > 0 && a.stats.injected_reorders > 0, "{:?}", a.stats);
    assert_eq!(a.stats.datagrams_sent, frags + dups);
    // Every message arrives intact; one-fragment messages may arrive
    // twice, duplicate fragments of longer ones are counted.
    let mut ids: Vec<u32> = rx.got.iter().map(|(id, _)| *id).collect();
    for (id, m) in &rx.got {
        assert_eq!(m, &pattern(lossy_len(*id), u64::from(*id)), "msg {id}");
    }
    ids.sort_unstable();
    let extra = ids.len() as u64 - {
        ids.dedup();
        ids.len() as u64
    };
    assert_eq!(ids, (0..total).collect::<Vec<_>>());
    let dup_frags = rx.reasm.stats.drop_count(WireDrop::DuplicateFragment);
    assert_eq!(extra + dup_frags, dups);
    assert_eq!(rx.reasm.in_flight(), 0);
}

/// Queues a bare frame header of `kind` carrying `id` (all the fault
/// injector reads is the kind).
fn push_raw(batch: &mut SendBatch, dst: SocketAddr, kind: crate::wire::Kind, id: u32) {
    batch
        .push_with(dst, |b| {
            b[..16].fill(0);
            b[..4].copy_from_slice(&[0x55, 0x4E, 1, kind as u8]);
            b[4..8].copy_from_slice(&id.to_le_bytes());
            Ok(16)
        })
        .unwrap();
}

fn raw_id(d: &[u8]) -> u32 {
    u32::from_le_bytes(d[4..8].try_into().unwrap())
}

/// The kind of datagram `id` in the sequences below: mostly Data, some
/// ViAck (both judged), some control frames (never judged).
fn raw_kind(id: u32) -> crate::wire::Kind {
    use crate::wire::Kind;
    match id % 10 {
        3 | 7 => Kind::ViAck,
        5 => Kind::Keepalive,
        9 => Kind::ViClose,
        _ => Kind::Data,
    }
}

/// What the injector of a port with `cfg` lets out of `n` datagrams
/// queued `chunk` at a time, one send per chunk, in order, without a
/// socket: the send path's bookkeeping, the kernel taking everything,
/// the clock stopped (a datagram held back waits until enough others
/// are queued) but for the last send. Then the port's counters.
fn injected(cfg: PortConfig, n: u32, chunk: u32) -> (Vec<u32>, WireStats) {
    let mut port = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
    let dst: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut batch = SendBatch::new(64, 1 << 20);
    let mut out = Vec::new();
    let t0 = Instant::now();
    let mut send = |port: &mut UdpPort, batch: &mut SendBatch, now: Instant| {
        port.inject_faults(batch, now);
        let end = batch.entries.len() - usize::from(batch.held.is_some());
        for e in &batch.entries[batch.head..end] {
            if !e.dropped {
                out.push(raw_id(&batch.arena[e.start..e.start + e.len]));
            }
        }
        batch.head = end;
        if end == batch.entries.len() {
            batch.reset();
        }
    };
    for id in 0..n {
        push_raw(&mut batch, dst, raw_kind(id), id);
        if id % chunk == chunk - 1 {
            send(&mut port, &mut batch, t0);
        }
    }
    // What is left; one held back last of all waits until its time is
    // up, then goes.
    send(&mut port, &mut batch, t0);
    send(&mut port, &mut batch, t0);
    assert!(batch.len() <= 1);
    if batch.len() == 1 {
        assert!(batch.held.is_some());
    }
    send(&mut port, &mut batch, t0 + REORDER_HOLD_MAX);
    assert!(batch.is_empty(), "a datagram held back past its time");
    (out, port.stats)
}

/// Ids that appear twice or more, and ids missing.
fn dups_and_missing(out: &[u32], n: u32) -> (Vec<u32>, Vec<u32>) {
    let mut count = vec![0u32; n as usize];
    for &id in out {
        count[id as usize] += 1;
    }
    let dups = (0..n).filter(|&i| count[i as usize] > 1).collect();
    let missing = (0..n).filter(|&i| count[i as usize] == 0).collect();
    (dups, missing)
}

const FAULTS: PortConfig = PortConfig {
    max_datagram: ETHERNET_DATAGRAM,
    batch: MAX_BATCH,
    socket_buffer: 4 << 20,
    send_queue_bytes: 4 << 20,
    drop_rate_ppm: 50_000,
    drop_seed: 7,
    dup_rate_ppm: 10_000,
    reorder_rate_ppm: 10_000,
    gso: true,
    gro: true,
};

#[test]
fn injected_faults_depend_on_the_seed_only() {
    const N: u32 = 20_000;
    let (a, sa) = injected(FAULTS, N, 64);
    let (b, sb) = injected(FAULTS, N, 64);
    assert_eq!(a, b, "same seed, same sends: same datagrams out");
    assert_eq!(sa, sb);
    // Sent one by one or in other batches, the same datagrams are
    // dropped and the same duplicated (the decisions follow the
    // data-path datagrams, not the batching).
    let (da, ma) = dups_and_missing(&a, N);
    for chunk in [1, 7, 1000] {
        let (c, sc) = injected(FAULTS, N, chunk);
        assert_eq!(
            dups_and_missing(&c, N),
            (da.clone(), ma.clone()),
            "chunk {chunk}"
        );
        assert_eq!(sc.drops, sa.drops, "chunk {chunk}");
        assert_eq!(sc.injected_duplicates, sa.injected_duplicates);
        // One held back last of all has nothing left to go behind.
        assert!(sa.injected_reorders.abs_diff(sc.injected_reorders) <= 1);
    }
    // Another seed, other decisions.
    let (c, _) = injected(
        PortConfig {
            drop_seed: 8,
            ..FAULTS
        },
        N,
        64,
    );
    assert_ne!(dups_and_missing(&c, N).1, ma);
    // Control frames are never judged: each goes out once.
    for id in (0..N).filter(|&i| i % 10 == 5 || i % 10 == 9) {
        assert!(!ma.contains(&id) && !da.contains(&id), "control frame {id}");
    }
}

#[test]
fn injected_fault_rates_are_close_to_asked() {
    const N: u32 = 200_000;
    let cfg = PortConfig {
        drop_rate_ppm: 50_000,
        dup_rate_ppm: 20_000,
        reorder_rate_ppm: 30_000,
        ..FAULTS
    };
    let (out, st) = injected(cfg, N, 64);
    // Data and ViAck: 8 in 10.
    let judged = f64::from(N) * 0.8;
    let (pd, pr, pu) = (0.05, 0.03, 0.02);
    let near = |got: u64, p: f64| {
        let want = judged * p;
        (got as f64 - want).abs() < want * 0.1
    };
    let drops = st.drop_count(WireDrop::InjectedDrop);
    assert!(near(drops, pd), "{drops} dropped");
    assert!(near(st.injected_reorders, (1.0 - pd) * pr), "{st:?}");
    assert!(
        near(st.injected_duplicates, (1.0 - pd) * (1.0 - pr) * pu),
        "{st:?}"
    );
    let (dups, missing) = dups_and_missing(&out, N);
    assert_eq!(missing.len() as u64, drops);
    assert_eq!(dups.len() as u64, st.injected_duplicates);
    assert_eq!(
        out.len() as u64,
        u64::from(N) - drops + st.injected_duplicates
    );
    // A datagram held back goes behind one to three others: at most
    // three later datagrams leave before it, and every distance occurs.
    let mut by_distance = [0u64; 4];
    let mut seen = std::collections::BTreeSet::new();
    for &id in &out {
        if !seen.insert(id) {
            continue;
        }
        let overtaken = seen.range(id + 1..).count();
        assert!(
            overtaken <= 3,
            "datagram {id} behind {overtaken} later ones"
        );
        by_distance[overtaken] += 1;
    }
    assert!(by_distance[1..].iter().all(|&n| n > 0), "{by_distance:?}");
    // Each counted once. (One that went behind nothing but another
    // held back before it, an earlier datagram, has no later one
    // ahead: a few.)
    let late: u64 = by_distance[1..].iter().sum();
    assert!(
        late <= st.injected_reorders && late * 100 >= st.injected_reorders * 95,
        "{by_distance:?} {st:?}"
    );
}

#[test]
fn datagrams_held_back_always_go_out() {
    // One datagram per send, a third held back: each waits, last in
    // the queue, for the next one to three to go first, and at most
    // REORDER_HOLD_MAX.
    let cfg = PortConfig {
        drop_rate_ppm: 0,
        dup_rate_ppm: 100_000,
        reorder_rate_ppm: 300_000,
        drop_seed: 3,
        ..PortConfig::default()
    };
    let mut a = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
    let b = UdpSocket::bind(LO).unwrap();
    b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let dst = b.local_addr().unwrap();
    let mut batch = SendBatch::for_port(a.config());
    const N: u32 = 2000;
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    let mut recv = |a: &UdpPort, got: &mut Vec<u32>| {
        while got.len() < a.stats.datagrams_sent as usize {
            let (n, _) = b.recv_from(&mut buf).unwrap();
            got.push(raw_id(&buf[..n]));
        }
    };
    let mut held = 0;
    for id in 0..N {
        push_raw(&mut batch, dst, crate::wire::Kind::Data, id);
        a.send_batch(&mut batch).unwrap();
        if !batch.is_empty() {
            assert_eq!(batch.len(), 1, "only the one held back waits");
            held += 1;
        }
        recv(&a, &mut got);
    }
    // The last one held back goes when its time is up, nothing new
    // queued.
    let t = Instant::now();
    while !batch.is_empty() {
        a.send_batch(&mut batch).unwrap();
        std::thread::sleep(Duration::from_micros(100));
        assert!(t.elapsed() < Duration::from_secs(1));
    }
    recv(&a, &mut got);
    assert!(held > N / 5, "{held} sends left one held back");
    let (dups, missing) = dups_and_missing(&got, N);
    assert_eq!(missing, Vec::<u32>::new(), "{:?}", a.stats);
    assert_eq!(dups.len() as u64, a.stats.injected_duplicates);
    assert_eq!(got.len() as u64, u64::from(N) + a.stats.injected_duplicates);
    let out_of_order = got.windows(2).filter(|w| w[1] < w[0]).count() as u64;
    assert!(out_of_order > 0 && a.stats.injected_reorders >= out_of_order);
}

#[test]
fn a_datagram_held_back_waits_for_others_then_its_time() {
    let cfg = PortConfig {
        reorder_rate_ppm: 1_000_000,
        ..PortConfig::default()
    };
    let mut port = UdpPort::bind(LO.parse().unwrap(), cfg).unwrap();
    let dst: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut batch = SendBatch::new(64, 1 << 20);
    let t0 = Instant::now();
    // Alone: held, nothing to send, even when asked again in time.
    push_raw(&mut batch, dst, crate::wire::Kind::ViAck, 0);
    port.inject_faults(&mut batch, t0);
    let (h, since) = batch.held.unwrap();
    assert_eq!((h, since), (0, t0));
    let want = usize::from(batch.entries[0].hold);
    assert!((1..=3).contains(&want));
    port.inject_faults(&mut batch, t0 + REORDER_HOLD_MAX / 2);
    assert_eq!(batch.held, Some((0, t0)));
    assert_eq!(port.stats.injected_reorders, 0);
    // A control frame queued after it goes first (and is not judged).
    push_raw(&mut batch, dst, crate::wire::Kind::ViClose, 1);
    port.inject_faults(&mut batch, t0 + REORDER_HOLD_MAX / 2);
    assert_eq!(raw_id(batch.datagrams().next().unwrap().1), 1);
    assert_eq!(port.stats.injected_reorders, 1);
    if want > 1 {
        assert_eq!(batch.held, Some((1, t0)), "it waits for more");
    }
    // Its time is up: it goes, nothing more having come.
    port.inject_faults(&mut batch, t0 + REORDER_HOLD_MAX);
    assert_eq!(batch.held, None);
    let ids: Vec<u32> = batch.datagrams().map(|(_, d)| raw_id(d)).collect();
    assert_eq!(ids, [1, 0]);
    assert_eq!(port.stats.injected_reorders, 1);
}
