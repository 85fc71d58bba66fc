//! The node programs' senders wait for the network: a bounded outbox.

use std::thread;

use unet::udm::{JobConfig, Mode};
use unet::{Engine, EngineConfig};

use super::*;

fn args(app: App, rank: u32, outbox: usize) -> NodeArgs {
    NodeArgs {
        app,
        socket: None,
        ticket: None,
        rank,
        count: 0,
        pegs: 5,
        expand_ns: 0,
        group: 1,
        interval_ns: 0,
        handler_ns: 0,
        outbox,
        buffer_cost_ns: 0,
        seed: 1,
        time_handlers: false,
    }
}

/// A job of two nodes with fast rings of 4; the atomicity timeout long
/// enough that a loaded machine's preemption does not switch a node (a
/// switch here would be one by the full rings).
fn job() -> (Engine, Session, JobTicket) {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    let t = s
        .udm_create_job(&JobConfig {
            nodes: 2,
            fast_queue: 4,
            atomicity_timeout: Duration::from_millis(500),
            ..JobConfig::default()
        })
        .unwrap();
    (e, s, t)
}

fn assert_never_switched(st: &unet::udm::NodeStats) {
    assert_eq!(st.buffered_taken, 0, "{st:?}");
    assert_eq!(st.switch_queue_full, 0, "{st:?}");
    assert_eq!(st.engine(UdmCounter::SwitchTimeout), 0, "{st:?}");
    assert_eq!(st.engine(UdmCounter::SwitchDescheduled), 0, "{st:?}");
}

/// A sender that makes a message only while fewer than its bound wait to
/// go, against a receiver four times slower: the sender waits (its
/// outbox reaches the bound and goes no further), the running receiver is
/// never switched, and every message arrives once, in order.
#[test]
fn a_bounded_sender_waits_for_a_slow_receiver() {
    const N: u64 = 3000;
    const BOUND: usize = 8;
    let (_e, s, t) = job();
    let a = s.udm_join(t, 0).unwrap();
    let b = s.udm_join(t, 1).unwrap();
    let send = thread::spawn(move || {
        let mut c = Ctx::new(a, &args(App::Enum, 0, BOUND));
        let mut waits = 0u64;
        for i in 0..N {
            while !c.room().unwrap() {
                waits += 1;
                assert!(c.next().unwrap().is_none(), "nothing comes back");
                std::hint::spin_loop();
            }
            c.send(1, H_POS, &[i]).unwrap();
        }
        c.flush_all(&mut (), |_, _, m| Err(unexpected(&m))).unwrap();
        (c.outbox_max, waits, c.sent, c.node.stats())
    });
    let mut c = Ctx::new(b, &args(App::Enum, 1, BOUND));
    let mut got = 0u64;
    while got < N {
        let Some(m) = c.next().unwrap() else {
            std::hint::spin_loop();
            continue;
        };
        assert_eq!((m.src, m.handler), (0, H_POS));
        assert_eq!(m.w[0], got, "in order, none lost");
        got += 1;
        // The receiver's handler takes 4 µs: the sender is faster.
        spin_for(Duration::from_micros(4));
        assert_eq!(c.node.mode(), Mode::Fast, "a running receiver");
    }
    let (most, waits, sent, sender) = send.join().unwrap();
    assert_eq!(sent, N);
    assert!(!c.node.message_available(), "none twice");
    assert!(most <= BOUND, "{most} waited to go, the bound {BOUND}");
    assert!(waits > 0, "the sender never waited");
    let st = c.node.stats();
    assert_eq!(st.fast_msgs, N, "{st:?}");
    assert_never_switched(&st);
    assert_never_switched(&sender);
}

/// enum on two nodes of one job (threads here, processes in the bench):
/// every position found once, as many received as sent, no node's outbox
/// past its bound by more than one position's successors, and nothing
/// diverted while both run.
#[test]
fn enum_sends_only_what_the_network_takes() {
    const BOUND: usize = 4;
    let (_e, s, t) = job();
    let nodes: Vec<Node> = (0..2).map(|r| s.udm_join(t, r).unwrap()).collect();
    let runs: Vec<_> = nodes
        .into_iter()
        .enumerate()
        .map(|(r, node)| {
            thread::spawn(move || {
                let mut c = Ctx::new(node, &args(App::Enum, r as u32, BOUND));
                // Node 1 works 2 us a position (`--expand-ns`): the
                // faster node waits for it, and the search is unchanged.
                let expand = Duration::from_nanos(if r == 1 { 2_000 } else { 0 });
                let v = enumerate(&mut c, 5, expand).unwrap();
                (v, c.outbox_max, c.node.stats())
            })
        })
        .collect();
    let moves = peg_moves(5).len();
    let (mut positions, mut sent, mut recv) = (0, 0, 0);
    for h in runs {
        let (v, most, st) = h.join().unwrap();
        positions += v["positions"].as_u64().unwrap();
        sent += v["pos_sent"].as_u64().unwrap();
        recv += v["pos_recv"].as_u64().unwrap();
        assert!(most <= BOUND + moves, "{most} waited to go: {v}");
        assert_never_switched(&st);
    }
    assert_eq!(positions, 3016, "the 5-peg triangle's positions, each once");
    assert_eq!(sent, recv);
}
