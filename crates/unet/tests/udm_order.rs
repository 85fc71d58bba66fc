//! UDM under random schedules: nodes (threads) send to random nodes with
//! random lengths, in bursts that fill fast rings, holding atomic sections
//! past the atomicity timeout, pausing, extracting in random batches, so
//! that messages take both cases and nodes switch back and forth. Every
//! message must arrive exactly once, in its sender's order, with its words
//! intact; and both cases, the timeout's switches and overflow holds must
//! have happened (the test cannot pass without exercising them).

mod common;

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use common::Rng;
use unet::udm::*;
use unet::*;

/// Word `k` of message `seq` from `src` to `dst`.
fn word(src: u32, dst: u32, seq: u64, k: usize) -> u64 {
    let mut x = (src as u64) << 48 ^ (dst as u64) << 40 ^ seq << 8 ^ k as u64;
    x ^= x >> 31;
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

const DATA: u16 = 0;
const DONE: u16 = 1;

/// What one node saw.
#[derive(Default)]
struct Seen {
    /// Next sequence number expected from each sender.
    next: Vec<u64>,
    /// Count each sender announced (None until its DONE came).
    announced: Vec<Option<u64>>,
}

impl Seen {
    fn take(&mut self, node: &mut Node, me: u32) -> bool {
        let mut w = [0u64; MAX_WORDS];
        let Ok(h) = node.extract(&mut w) else {
            return false;
        };
        let s = h.src as usize;
        match h.handler {
            DATA => {
                assert!(h.len >= 1, "node {me}: empty data message from {s}");
                assert_eq!(w[0], self.next[s], "node {me}: from {s}, once and in order");
                for (k, v) in w.iter().enumerate().take(h.len).skip(1) {
                    assert_eq!(*v, word(h.src, me, w[0], k), "node {me}: word {k} from {s}");
                }
                assert!(
                    self.announced[s].is_none(),
                    "node {me}: data from {s} after its DONE"
                );
                self.next[s] += 1;
            }
            DONE => {
                assert_eq!(h.len, 1);
                self.announced[s] = Some(w[0]);
            }
            other => panic!("node {me}: handler {other}"),
        }
        true
    }

    fn complete(&self) -> bool {
        self.announced
            .iter()
            .zip(&self.next)
            .all(|(a, n)| *a == Some(*n))
    }
}

/// Send, extracting (at least `min_take` messages, and whatever waits)
/// whenever the message cannot go: nodes that only waited to send could
/// hold each other back for ever.
fn send(node: &mut Node, seen: &mut Seen, me: u32, dst: u32, h: u16, words: &[u64]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !node.injectc(dst, h, words).unwrap() {
        while seen.take(node, me) {}
        assert!(
            Instant::now() < deadline,
            "node {me} stuck sending to {dst}"
        );
        thread::yield_now();
    }
}

/// Send `dst` its next data message, of a random length.
fn send_data(node: &mut Node, seen: &mut Seen, rng: &mut Rng, seq: &mut [u64], dst: u32) {
    let me = node.rank();
    let len = 1 + rng.below(MAX_WORDS as u64) as usize;
    let s = seq[dst as usize];
    let mut words = [0u64; MAX_WORDS];
    words[0] = s;
    for (k, w) in words.iter_mut().enumerate().take(len).skip(1) {
        *w = word(me, dst, s, k);
    }
    send(node, seen, me, dst, DATA, &words[..len]);
    seq[dst as usize] += 1;
}

fn run_node(
    mut node: Node,
    seed: u64,
    msgs: u64,
    go: Arc<Barrier>,
    end: Arc<Barrier>,
) -> NodeStats {
    let me = node.rank();
    let n = node.nodes();
    let mut rng = Rng(seed);
    let mut seen = Seen {
        next: vec![0; n as usize],
        announced: vec![None; n as usize],
    };
    let mut seq = vec![0u64; n as usize];
    go.wait();
    let mut sent = 0;
    while sent < msgs {
        match rng.below(1000) {
            // Hold an atomic section past the timeout, extracting nothing.
            0..=2 => {
                node.beginatom(ATOM_DISABLE);
                thread::sleep(Duration::from_millis(3 + rng.below(4)));
                node.endatom(ATOM_DISABLE);
            }
            // Pause (as if descheduled).
            3..=5 => thread::sleep(Duration::from_millis(rng.below(3))),
            // Extract a random batch, atomically.
            6..=150 => {
                node.beginatom(ATOM_DISABLE);
                for _ in 0..rng.below(40) {
                    if !seen.take(&mut node, me) {
                        break;
                    }
                }
                node.endatom(ATOM_DISABLE);
            }
            // Send a burst to one node (fills its fast ring).
            151..=250 => {
                let dst = rng.below(n as u64) as u32;
                for _ in 0..rng.below(24) {
                    if sent == msgs {
                        break;
                    }
                    send_data(&mut node, &mut seen, &mut rng, &mut seq, dst);
                    sent += 1;
                }
            }
            // Send one to a random node.
            _ => {
                let dst = rng.below(n as u64) as u32;
                send_data(&mut node, &mut seen, &mut rng, &mut seq, dst);
                sent += 1;
            }
        }
    }
    for dst in 0..n {
        send(&mut node, &mut seen, me, dst, DONE, &[seq[dst as usize]]);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while !seen.complete() {
        if !seen.take(&mut node, me) {
            node.wait(Some(Duration::from_millis(10)));
        }
        assert!(Instant::now() < deadline, "node {me} never got everything");
    }
    assert!(
        !node.message_available(),
        "node {me}: a message after everything"
    );
    // Drained: the engine gives the buffer's memory back.
    while node.buffer_memory().unwrap() != 0 || node.stats().engine(UdmCounter::BufferPages) != 0 {
        assert!(
            Instant::now() < deadline,
            "node {me} kept its buffer's memory"
        );
        thread::sleep(Duration::from_millis(1));
    }
    // Stay in the job until every node is done (leaving earlier would make
    // the others' sends to us fail).
    end.wait();
    let st = node.stats();
    drop(node);
    st
}

fn run(seed: u64, nodes: u32, msgs: u64, fast_queue: u32, buffer_size: u64) -> Vec<NodeStats> {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let cfg = JobConfig {
        nodes,
        fast_queue,
        buffer_size,
        atomicity_timeout: Duration::from_millis(1),
    };
    let s = Session::embedded(&e).unwrap();
    let t = s.udm_create_job(&cfg).unwrap();
    assert_eq!(
        common::engine_counter(&s, unet_abi::EngineCounter::UdmJobs),
        1
    );
    let go = Arc::new(Barrier::new(nodes as usize));
    let end = Arc::new(Barrier::new(nodes as usize));
    let threads: Vec<_> = (0..nodes)
        .map(|r| {
            // A session each, as separate processes would have.
            let s = Session::embedded(&e).unwrap();
            let node = s.udm_join(t, r).unwrap();
            let (go, end) = (go.clone(), end.clone());
            thread::spawn(move || {
                run_node(
                    node,
                    seed ^ ((r as u64 + 1) * 0x1234_5678_9ABC),
                    msgs,
                    go,
                    end,
                )
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn every_message_arrives_once_in_order_intact_under_random_schedules() {
    let mut total = NodeStats::default();
    // Small fast rings, larger ones, and a buffer so small (32 messages)
    // that overflow control holds senders back.
    let runs = [
        (1u64, 4, 256 << 10),
        (0xDEAD_BEEF, 64, 256 << 10),
        (77, 4, 4096),
        (4242, 4, 256 << 10),
        (9, 64, 4096),
    ];
    for (seed, fast_queue, buffer) in runs {
        let stats = run(seed, 4, 3000, fast_queue, buffer);
        for st in &stats {
            total.fast_msgs += st.fast_msgs;
            total.buffered_taken += st.buffered_taken;
            total.switch_queue_full += st.switch_queue_full;
            total.overflow_holds += st.overflow_holds;
            for (t, v) in total.engine.iter_mut().zip(&st.engine) {
                *t += v;
            }
            assert_eq!(
                st.buffered_taken,
                st.engine(UdmCounter::BufferedMsgs),
                "every buffered message taken once"
            );
            assert_eq!(st.engine(UdmCounter::BufferPages), 0, "memory given back");
        }
    }
    eprintln!("{total:?}");
    // Runs of 4 nodes, 3000 messages and 4 DONEs each.
    let n = runs.len() as u64;
    assert_eq!(total.fast_msgs + total.buffered_taken, n * 4 * (3000 + 4));
    assert!(total.fast_msgs > 0 && total.buffered_taken > 0, "{total:?}");
    // A full ring holds its sender back; only the engine switches.
    assert_eq!(total.switch_queue_full, 0, "{total:?}");
    assert!(total.engine(UdmCounter::SwitchTimeout) > 0, "{total:?}");
    assert!(total.overflow_holds > 0, "{total:?}");
}
