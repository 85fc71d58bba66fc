//! A UDM job between two hosts: two network namespaces joined by a veth
//! pair, a `unet daemon` with a UDP wire in each, injecting 5 % loss, 1 %
//! duplication and 1 % reordering into the data-path datagrams it sends
//! (seeded). The job is created on host a (its home engine); a process on
//! host a runs ranks 0 and 1, a process on host b joins ranks 2 and 3
//! through its own engine. Every node sends to every other in random
//! bursts of messages of random length, with a virtual buffer small enough
//! that overflow control holds senders across the wire: every message
//! arrives exactly once, in its sender's order, with its words intact,
//! and the counters show the wire's repairs.
//!
//! Needs root (CAP_NET_ADMIN) and `ip` from iproute2; fails, never skips,
//! when either is missing.

mod common;

use std::collections::HashMap;
use std::thread;
use std::time::{Duration, Instant};

use common::hosts::*;
use common::*;
use unet::udm::{JobConfig, JobTicket, Node, NodeStats, MAX_WORDS};
use unet::Session;
use unet_abi::udm::UdmCounter;

/// The impairment both daemons inject into what they send (seed).
const SEED: &str = "11";

/// Messages each node sends to each other node.
const PER_DEST: u64 = 5000;

/// Nodes in the job: two a host.
const NODES: u32 = 4;

// -------------------------------------------------------------------------
// Child side
// -------------------------------------------------------------------------

fn session() -> Session {
    let socket = env("UNET_SOCKET");
    Session::connect(&socket).unwrap_or_else(|e| fail(&format!("connect {socket}: {e}")))
}

/// xorshift64*: the random schedule of a node, from its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
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

/// Node `me` sends `PER_DEST` messages to every other node in random
/// bursts, taking what arrives meanwhile, until it has everything from
/// everyone; checks sender, handler, order and words of each message.
fn run_node(mut node: Node, seed: u64) -> Result<NodeStats, String> {
    let n = node.nodes();
    let me = node.rank();
    let mut rng = Rng(seed);
    let mut sent = vec![0u64; n as usize];
    let mut got = vec![0u64; n as usize];
    let want = PER_DEST * (n as u64 - 1);
    let mut buf = [0u64; MAX_WORDS];
    let deadline = Instant::now() + Duration::from_secs(80);
    loop {
        // Take everything waiting.
        let mut taken = 0;
        while let Ok(h) = node.extract(&mut buf) {
            let s = h.src as usize;
            if h.src == me || h.src >= n {
                return Err(format!("node {me}: a message from {}", h.src));
            }
            if h.handler != (h.src * 100 + me) as u16 {
                return Err(format!("node {me}: handler {} from {}", h.handler, h.src));
            }
            let expect = words(h.src, me, got[s], h.len);
            if buf[..h.len] != expect[..] {
                return Err(format!(
                    "node {me}: message {} from {} arrived as #{} ({} words, first two {:?})",
                    got[s],
                    h.src,
                    buf[1],
                    h.len,
                    &buf[..2]
                ));
            }
            got[s] += 1;
            taken += 1;
        }
        let total: u64 = got.iter().sum();
        let done_sending = (0..n).all(|d| d == me || sent[d as usize] == PER_DEST);
        if done_sending && total == want {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "node {me}: timed out; sent {sent:?} got {got:?}; {:?}",
                node.stats()
            ));
        }
        // A burst to one destination; injectc never waits on overflow
        // control, so a node keeps taking while its peers are held.
        let d = rng.below(n as u64) as u32;
        if d != me && sent[d as usize] < PER_DEST {
            let burst = 1 + rng.below(40);
            for _ in 0..burst {
                if sent[d as usize] == PER_DEST {
                    break;
                }
                let len = 2 + rng.below(MAX_WORDS as u64 - 1) as usize;
                let w = words(me, d, sent[d as usize], len);
                match node.injectc(d, (me * 100 + d) as u16, &w) {
                    Ok(true) => sent[d as usize] += 1,
                    Ok(false) => break,
                    Err(e) => return Err(format!("node {me} to {d}: {e}")),
                }
            }
        }
        if taken == 0 && rng.below(4) == 0 {
            let _ = node.wait(Some(Duration::from_micros(200)));
        }
    }
    Ok(node.stats())
}

/// Run `nodes` in threads, then report `DONE` with each rank's counters
/// (`rank:name=value,…` words).
fn run_and_report(nodes: Vec<Node>) {
    let threads: Vec<_> = nodes
        .into_iter()
        .map(|node| {
            let r = node.rank();
            (
                r,
                thread::spawn(move || run_node(node, 0x5EED_0000 + r as u64)),
            )
        })
        .collect();
    let mut words = Vec::new();
    for (r, t) in threads {
        let s = match t.join() {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                // The engine's view, for the report.
                if let Ok(out) = std::process::Command::new(unet_bin())
                    .args(["stat", "--socket", &env("UNET_SOCKET")])
                    .output()
                {
                    eprintln!("{}", String::from_utf8_lossy(&out.stdout));
                }
                fail(&e)
            }
            Err(_) => fail(&format!("node {r} panicked")),
        };
        words.push(format!(
            "{r}:wire_tx={},wire_rx={},wire_retransmits={},fast={},buffered={},holds={},pages_max={}",
            s.engine(UdmCounter::WireTx),
            s.engine(UdmCounter::WireRx),
            s.engine(UdmCounter::WireRetransmits),
            s.fast_msgs,
            s.buffered_taken,
            s.overflow_holds,
            s.engine(UdmCounter::BufferPagesMax),
        ));
    }
    say(&format!("DONE {}", words.join(" ")));
}

/// `udm-home`: create the job, say `JOB <ticket>`, join ranks 0 and 1,
/// say `JOINED`, wait for `GO`, run the two nodes, report, hold.
fn udm_home() {
    let s = session();
    let ticket = s
        .udm_create_job(&JobConfig {
            nodes: NODES,
            fast_queue: 4,
            // 64 messages of the largest size: overflow control holds
            // senders on both hosts.
            buffer_size: 8192,
            ..JobConfig::default()
        })
        .unwrap_or_else(|e| fail(&format!("create the job: {e}")));
    say(&format!("JOB {ticket}"));
    let nodes: Vec<Node> = (0..2)
        .map(|r| {
            s.udm_join(ticket, r)
                .unwrap_or_else(|e| fail(&format!("join rank {r}: {e}")))
        })
        .collect();
    say("JOINED");
    if read_command().as_deref() != Some("GO") {
        fail("no GO");
    }
    run_and_report(nodes);
    hold();
}

/// `udm-away`: join ranks 2 and 3 of `UNET_TICKET` at the home engine
/// `UNET_HOME` through this host's engine, say `JOINED`, wait for `GO`,
/// run the two nodes, report, hold.
fn udm_away() {
    let s = session();
    let ticket: JobTicket = env("UNET_TICKET")
        .parse()
        .unwrap_or_else(|_| fail("UNET_TICKET is not a job ticket"));
    let home = env("UNET_HOME")
        .parse()
        .unwrap_or_else(|_| fail("UNET_HOME is not an address"));
    let nodes: Vec<Node> = (2..NODES)
        .map(|r| {
            s.udm_join_at(ticket, Some(home), r)
                .unwrap_or_else(|e| fail(&format!("join rank {r} at {home}: {e}")))
        })
        .collect();
    // A rank is granted once, wherever it is asked for.
    if s.udm_join_at(ticket, Some(home), 0).is_ok() {
        fail("rank 0 was granted twice");
    }
    say("JOINED");
    if read_command().as_deref() != Some("GO") {
        fail("no GO");
    }
    run_and_report(nodes);
    hold();
}

#[test]
fn child() {
    let Some(role) = role() else { return };
    watchdog(110);
    match role.as_str() {
        "udm-home" => udm_home(),
        "udm-away" => udm_away(),
        r => panic!("unknown role {r}"),
    }
}

// -------------------------------------------------------------------------
// Parent side
// -------------------------------------------------------------------------

/// `rank:name=value,…` words as counters by rank.
fn parse_ranks(words: &str) -> HashMap<u32, HashMap<String, u64>> {
    words
        .split_whitespace()
        .map(|w| {
            let (r, cs) = w.split_once(':').expect("rank:counters");
            let cs = cs
                .split(',')
                .map(|c| {
                    let (n, v) = c.split_once('=').expect("name=value");
                    (n.to_string(), v.parse().expect("a counter value"))
                })
                .collect();
            (r.parse().expect("a rank"), cs)
        })
        .collect()
}

#[test]
fn a_job_across_two_hosts_loses_nothing_on_an_impaired_wire() {
    let t = Instant::now();
    let h = Hosts::new(97, "u", 0);
    let da = h.wire(&h.a, &impaired(SEED));
    let db = h.wire(&h.b, &impaired(SEED));
    let mut c = child_cmd(Some(&h.a), "udm-home");
    c.env("UNET_SOCKET", &da.socket);
    let mut home = Proc::spawn("udm-home", c);
    let ticket = home.expect("JOB", Duration::from_secs(20));
    home.expect("JOINED", Duration::from_secs(20));
    let mut c = child_cmd(Some(&h.b), "udm-away");
    c.env("UNET_SOCKET", &db.socket)
        .env("UNET_TICKET", ticket.trim())
        .env("UNET_HOME", da.udp.expect("a wire").to_string());
    let mut away = Proc::spawn("udm-away", c);
    away.expect("JOINED", Duration::from_secs(20));
    home.tell("GO");
    away.tell("GO");
    let mut ranks = parse_ranks(&home.expect("DONE", Duration::from_secs(100)));
    ranks.extend(parse_ranks(&away.expect("DONE", Duration::from_secs(30))));
    assert_eq!(ranks.len(), NODES as usize, "{ranks:?}");
    // Each node sends PER_DEST to each of the two nodes on the other host,
    // and takes as many from each of them off the wire (a node that has
    // everything may still have messages of its own in its engine's
    // outbox: its wire_tx may still be short).
    for (r, c) in &ranks {
        assert!(c["wire_tx"] <= 2 * PER_DEST, "rank {r}: {c:?}");
        assert_eq!(c["wire_rx"], 2 * PER_DEST, "rank {r}: {c:?}");
        assert!(c["fast"] > 0, "rank {r}: the local peer uses the fast case");
    }
    let retransmits: u64 = ranks.values().map(|c| c["wire_retransmits"]).sum();
    let holds: u64 = ranks.values().map(|c| c["holds"]).sum();
    assert!(
        retransmits > 0,
        "the wire's losses were repaired: {ranks:?}"
    );
    eprintln!(
        "UDM job of {NODES} nodes across two hosts, 5 % loss, 1 % duplication, 1 % \
         reordering: {} messages exactly once, in order, intact; {retransmits} \
         retransmissions, {holds} overflow holds ({:?})",
        PER_DEST * (NODES as u64) * (NODES as u64 - 1),
        t.elapsed()
    );
    home.release();
    away.release();
}
