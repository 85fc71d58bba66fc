//! A UDM job over two engines on UDP loopback: ranks joined at the home
//! engine and through another one; random bursts every way (within an
//! engine and across), with and without seeded loss on the wire, a tiny
//! virtual buffer so that overflow control holds senders across engines;
//! every message arrives exactly once, in its sender's order, with its
//! words intact. Forged frames to the job's link and a join with a wrong
//! key are dropped and counted.

mod common;

use std::net::UdpSocket;
use std::thread;
use std::time::{Duration, Instant};

use common::{engine_counter, Rng};
use unet::udm::{JobConfig, Node, MAX_WORDS};
use unet::*;
use unet_abi::udm::UdmCounter;
use unet_abi::EngineCounter;

fn engine(drop_ppm: u32, seed: u64) -> (Engine, Session) {
    let e = Engine::start(EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        wire_drop_ppm: drop_ppm,
        wire_dup_ppm: drop_ppm / 5,
        wire_reorder_ppm: drop_ppm / 5,
        wire_drop_seed: seed,
        ..Default::default()
    })
    .unwrap();
    let s = Session::embedded(&e).unwrap();
    (e, s)
}

/// Message `k` from `src` to `dst`: `len` words, the first two say who
/// and which, the rest a pattern of the three.
fn words(src: u32, dst: u32, k: u64, len: usize) -> Vec<u64> {
    let mut w = vec![(src as u64) << 32 | dst as u64, k];
    w.extend((2..len).map(|i| {
        k.wrapping_mul(0x9E37_79B9)
            .wrapping_add(i as u64 * 7 + src as u64)
    }));
    w.truncate(len.max(2));
    w
}

/// Node `me` sends `per_dest` messages to every other node in random
/// bursts, taking what arrives meanwhile, until it has everything from
/// everyone; checks order and words. Returns its node for the counters.
fn run_node(mut node: Node, per_dest: u64, seed: u64) -> Node {
    let n = node.nodes();
    let me = node.rank();
    let mut rng = Rng(seed);
    let mut sent = vec![0u64; n as usize];
    let mut got = vec![0u64; n as usize];
    let want = per_dest * (n as u64 - 1);
    let mut buf = [0u64; MAX_WORDS];
    let deadline = Instant::now() + Duration::from_secs(60);
    let take = |node: &mut Node, got: &mut Vec<u64>, buf: &mut [u64; MAX_WORDS]| {
        let mut k = 0;
        while let Ok(h) = node.extract(buf) {
            let s = h.src as usize;
            assert!(h.src != me && h.src < n, "from {}", h.src);
            assert_eq!(h.handler, (h.src * 100 + me) as u16);
            let expect = words(h.src, me, got[s], h.len);
            assert_eq!(&buf[..h.len], &expect[..], "node {me} from {}", h.src);
            got[s] += 1;
            k += 1;
        }
        k
    };
    loop {
        let total: u64 = got.iter().sum();
        let done_sending = (0..n).all(|d| d == me || sent[d as usize] == per_dest);
        if done_sending && total == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node {me}: sent {sent:?} got {got:?}"
        );
        // A burst to one destination.
        let d = rng.below(n as u64) as u32;
        if d != me && sent[d as usize] < per_dest {
            let burst = 1 + rng.below(40);
            for _ in 0..burst {
                if sent[d as usize] == per_dest {
                    break;
                }
                let len = 2 + rng.below(MAX_WORDS as u64 - 1) as usize;
                let w = words(me, d, sent[d as usize], len);
                match node.injectc(d, (me * 100 + d) as u16, &w) {
                    Ok(true) => sent[d as usize] += 1,
                    Ok(false) => break,
                    Err(e) => panic!("node {me} to {d}: {e}"),
                }
            }
        }
        if take(&mut node, &mut got, &mut buf) == 0 && rng.below(4) == 0 {
            let _ = node.wait(Some(Duration::from_micros(200)));
        }
    }
    assert!(got
        .iter()
        .enumerate()
        .all(|(s, &g)| s as u32 == me || g == per_dest));
    node
}

/// A job of four nodes, ranks 0 and 1 at engine A (its home), 2 and 3
/// joined through engine B; every node sends `per_dest` to every other.
/// Returns the nodes' counters by rank.
fn job_across(drop_ppm: u32, buffer: u64, per_dest: u64) -> Vec<unet::udm::NodeStats> {
    let (ea, sa) = engine(drop_ppm, 11);
    let (_eb, sb) = engine(drop_ppm, 12);
    let ticket = sa
        .udm_create_job(&JobConfig {
            nodes: 4,
            fast_queue: 4,
            buffer_size: buffer,
            ..JobConfig::default()
        })
        .unwrap();
    let home = ea.udp_addr();
    assert!(home.is_some());
    let nodes = vec![
        sa.udm_join(ticket, 0).unwrap(),
        sa.udm_join(ticket, 1).unwrap(),
        sb.udm_join_at(ticket, home, 2).unwrap(),
        sb.udm_join_at(ticket, home, 3).unwrap(),
    ];
    // A rank is granted once, wherever it is asked for.
    assert!(sb.udm_join_at(ticket, home, 0).is_err());
    assert!(sa.udm_join(ticket, 2).is_err());
    let threads: Vec<_> = nodes
        .into_iter()
        .enumerate()
        .map(|(r, node)| thread::spawn(move || run_node(node, per_dest, 0x5EED + r as u64)))
        .collect();
    let done: Vec<Node> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    done.iter().map(|n| n.stats()).collect()
}

#[test]
fn a_job_spans_two_engines_exactly_once_in_order() {
    let per_dest = 2000;
    let stats = job_across(0, 1 << 20, per_dest);
    // Every node sent 2 × per_dest over the wire and took as many from it.
    for (r, s) in stats.iter().enumerate() {
        assert_eq!(
            s.engine(UdmCounter::WireTx),
            2 * per_dest,
            "rank {r}: {s:?}"
        );
        assert_eq!(
            s.engine(UdmCounter::WireRx),
            2 * per_dest,
            "rank {r}: {s:?}"
        );
        assert!(s.fast_msgs > 0, "rank {r}: local peers use the fast case");
    }
}

#[test]
fn seeded_loss_and_a_tiny_buffer_lose_nothing() {
    // 3 % of datagrams dropped by each engine; a buffer of 32 messages,
    // so that senders across engines are held back too.
    let per_dest = 1000;
    let stats = job_across(30_000, 4096, per_dest);
    let retrans: u64 = stats
        .iter()
        .map(|s| s.engine(UdmCounter::WireRetransmits))
        .sum();
    assert!(retrans > 0, "the loss was repaired: {stats:?}");
    for (r, s) in stats.iter().enumerate() {
        assert_eq!(
            s.engine(UdmCounter::WireRx),
            2 * per_dest,
            "rank {r}: {s:?}"
        );
        assert!(s.engine(UdmCounter::BufferPagesMax) <= 1, "rank {r}: {s:?}");
    }
}

/// Eight ranks joined at once through the other engine: the first grant
/// starts making the job's replica there (16 nodes, rings of 256: some
/// 40 MiB, made on that engine's set-up thread), the grants that come
/// meanwhile wait for it, and every node gets its rank and then every
/// message.
#[test]
fn joins_granted_while_the_replica_is_made_all_get_their_ranks() {
    let (ea, sa) = engine(0, 21);
    let (_eb, sb) = engine(0, 22);
    let ticket = sa
        .udm_create_job(&JobConfig {
            nodes: 16,
            fast_queue: 256,
            ..JobConfig::default()
        })
        .unwrap();
    let home = ea.udp_addr();
    let joins: Vec<_> = (8..16)
        .map(|r| {
            let sb = sb.clone();
            thread::spawn(move || sb.udm_join_at(ticket, home, r))
        })
        .collect();
    let mut nodes: Vec<Node> = (0..8).map(|r| sa.udm_join(ticket, r).unwrap()).collect();
    for (r, j) in (8..).zip(joins) {
        let node = j
            .join()
            .unwrap()
            .unwrap_or_else(|e| panic!("rank {r}: {e}"));
        assert_eq!(node.rank(), r);
        nodes.push(node);
    }
    let threads: Vec<_> = nodes
        .into_iter()
        .enumerate()
        .map(|(r, node)| thread::spawn(move || run_node(node, 50, 0x5EED + r as u64)))
        .collect();
    for t in threads {
        let s = t.join().unwrap().stats();
        assert_eq!(s.engine(UdmCounter::WireRx), 8 * 50, "{s:?}");
    }
}

/// Frames to a job's link that do not carry its token, or do not come
/// from its peer, and a join with a wrong key, are dropped and counted;
/// the job goes on.
#[test]
fn forged_frames_to_a_job_are_dropped_and_counted() {
    use unet_engine::wire::frame::VI_DATA_CHANNEL;
    use unet_engine::wire::{Body, Data, Frame, UdmJoin, DATA_FLAG_VI};

    let (ea, sa) = engine(0, 1);
    let (eb, sb) = engine(0, 2);
    let ticket = sa.udm_create_job(&JobConfig::default()).unwrap();
    let home = ea.udp_addr();
    let mut n0 = sa.udm_join(ticket, 0).unwrap();
    let mut n1 = sb.udm_join_at(ticket, home, 1).unwrap();
    n0.inject(1, 1, &[7]).unwrap();
    let mut w = [0u64; MAX_WORDS];
    assert!(n1.wait(Some(Duration::from_secs(5))));
    assert_eq!(n1.extract(&mut w).unwrap().src, 0);

    let emit = |body: Body<'_>| {
        let f = Frame {
            src_engine: 0xbad,
            body,
        };
        let mut b = vec![0u8; f.len()];
        f.emit(&mut b).unwrap();
        b
    };
    // A record that claims to come from node 0, to node 1.
    let mut rec = vec![1u8, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
    rec.extend_from_slice(&666u64.to_le_bytes());
    let forger = UdpSocket::bind("127.0.0.1:0").unwrap();
    let before_a = engine_counter(&sa, EngineCounter::WireDropForgedToken);
    let before_b = engine_counter(&sb, EngineCounter::WireDropForgedToken);
    // Links are numbered from 1 with the top bit set: guess tokens for the
    // first few of each engine.
    for link in 1..=4u32 {
        for seq in 0..4 {
            let f = emit(Body::Data(Data {
                dst_endpoint: link | 1 << 31,
                dst_channel: VI_DATA_CHANNEL,
                flags: DATA_FLAG_VI,
                token: 0xdead_beef ^ seq as u64,
                msg_id: seq,
                frag_index: 0,
                frag_count: 1,
                msg_len: rec.len() as u32,
                frag_offset: 0,
                payload: &rec,
                ack: None,
            }));
            forger.send_to(&f, eb.udp_addr().unwrap()).unwrap();
            forger.send_to(&f, home.unwrap()).unwrap();
        }
    }
    // A join with the wrong key: refused, counted.
    let j = emit(Body::UdmJoin(UdmJoin {
        request_id: 1,
        job: ticket.job,
        key: ticket.key ^ 1,
        src_link: 1 << 31 | 77,
        src_token: 5,
        rank: 1,
        hold: 64,
    }));
    forger.send_to(&j, home.unwrap()).unwrap();
    let t0 = Instant::now();
    while engine_counter(&sa, EngineCounter::WireDropForgedToken) < before_a + 2
        || engine_counter(&sb, EngineCounter::WireDropForgedToken) < before_b + 1
    {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "forgeries not counted"
        );
        thread::sleep(Duration::from_millis(5));
    }
    // Nothing forged arrived; the job goes on, both ways.
    assert!(!n1.message_available());
    n1.inject(0, 2, &[8, 9]).unwrap();
    assert!(n0.wait(Some(Duration::from_secs(5))));
    let h = n0.extract(&mut w).unwrap();
    assert_eq!((h.src, h.handler, &w[..h.len]), (1, 2, &[8u64, 9][..]));
    assert!(
        sb.udm_join_at(ticket, home, 0).is_err(),
        "taken at the home"
    );
    let bad = unet::udm::JobTicket {
        key: ticket.key ^ 2,
        ..ticket
    };
    assert!(sb.udm_join_at(bad, home, 1).is_err());
}

/// A link to another engine is charged to its job's creator: what the
/// link may keep (160 KiB received, 80 KiB sent and not yet acknowledged)
/// counts against the creator's memory limit once a rank joins through
/// another engine, so a second job that fitted without it no longer does.
#[test]
fn a_link_to_another_engine_is_charged_to_the_jobs_creator() {
    const LINK_CHARGE: u64 = 240 << 10;
    let cfg = JobConfig {
        nodes: 2,
        buffer_size: 64 << 10,
        ..Default::default()
    };
    let l = unet_abi::udm::UdmLayout::new(cfg.nodes, cfg.fast_queue, cfg.buffer_size).unwrap();
    let job = l.job_size + cfg.nodes as u64 * (l.node_size + l.buffer_size);
    // Two jobs fit; two jobs and a link do not.
    let limit = 2 * job + LINK_CHARGE / 2;
    let home = Engine::start(EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        client_memory: limit,
        ..Default::default()
    })
    .unwrap();
    let (other, so) = engine(0, 1);
    let sh = Session::embedded(&home).unwrap();
    let addr = home.udp_addr().expect("the home's wire");

    let t = sh.udm_create_job(&cfg).unwrap();
    let mut a = sh.udm_join(t, 0).unwrap();
    let mut b = so.udm_join_at(t, Some(addr), 1).unwrap();
    // The link carries a message each way before the next job is asked.
    while !a.injectc(1, 1, &[7]).unwrap() {}
    let mut buf = [0u64; MAX_WORDS];
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.extract(&mut buf).is_err() {
        assert!(Instant::now() < deadline, "nothing over the link");
        thread::yield_now();
    }
    match sh.udm_create_job(&cfg) {
        Err(Error::Quota(ErrorCode::QuotaExceeded)) => {}
        r => panic!("a second job beside a job with a link: {r:?}"),
    }
    // Without the link (the remote rank gone and the link closed), it fits.
    drop(b);
    drop(so);
    drop(other);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match sh.udm_create_job(&cfg) {
            Ok(_) => break,
            Err(Error::Quota(ErrorCode::QuotaExceeded)) if Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(50));
            }
            r => panic!("a second job once the link is gone: {r:?}"),
        }
    }
    drop(a);
}
