//! Applet conformance: every sample applet of `applets/` runs in both
//! placements (in the engine, and inline in the client library) through
//! the same scenario, with the same expectations: the same messages reach
//! each user (content, order, count), the same events (and no fault but
//! those the scenario provokes), the same applet invocations.
//!
//! The scenarios are written so that the placement does not matter to
//! them. One thread drives every endpoint of a scenario, polling each in
//! turn: an inline applet runs its `doRx` and its timers only when its
//! user calls into the library, so every endpoint keeps receiving while
//! the scenario waits, as an application with an inline applet does.
//! Where the two placements differ by design, the comparison leaves it
//! out and says so:
//!
//! - the path: an endpoint with an applet in the engine uses the engine
//!   path, one with an inline applet the direct path (`ChannelOpened`
//!   events are compared without their `direct` flag, and without the
//!   peer engine's address, which changes from run to run);
//! - a send whose `doTx` faults returns `SendError::AppletFault` at once
//!   inline, while the engine runs `doTx` after `send` has returned: the
//!   `AppletFault` event is what both report;
//! - an inline applet's sends are limited to the scratch block at the start
//!   of the buffer area (64 KiB by default), so no scenario sends more;
//! - invocations that depend on timing (retransmissions and
//!   acknowledgments over a lossy wire, recovery timers) are not compared;
//!   PingPong's report carries a time, which is not compared either.

use std::time::Instant;

mod applet_support;
mod common;
mod conformance_support;
use common::engine_counter;
use conformance_support::*;
use unet::*;
use unet_abi::EngineCounter;

/// A scenario: one run in the given placement, and what it observed.
type Scenario = fn(Placement) -> Obs;

/// Every sample applet and the scenario that runs it.
const SCENARIOS: &[(&str, Scenario)] = &[
    ("Burst", burst),
    ("FlowControl", flow_control),
    ("Generate", generate),
    ("Multicast", multicast),
    ("PacketBuffers", packet_buffers),
    ("PingPong", ping_pong),
    ("RawUnet", raw_unet),
    ("ReceiverAck", receiver_ack),
    ("StdUnet", std_unet),
];

/// Run `scenario` in both placements and compare what they saw.
fn conform(name: &str) {
    let scenario = SCENARIOS
        .iter()
        .find(|s| s.0 == name)
        .unwrap_or_else(|| panic!("no scenario for {name}"))
        .1;
    let start = Instant::now();
    let engine = scenario(Placement::Engine);
    let mid = Instant::now();
    let inline = scenario(Placement::Inline);
    eprintln!(
        "{name}: engine placement {:?}, inline {:?}",
        mid - start,
        mid.elapsed()
    );
    compare(name, &engine, &inline);
}

// ---------------------------------------------------------------------------
// The scenarios
// ---------------------------------------------------------------------------

/// RawUnet (the paper's Figure 2) at both ends, 4 KiB buffers: every
/// size up to one buffer both ways; a send longer than its 4 KiB TxBuf
/// faults (a native fault) and sends nothing; the applet stays.
fn raw_unet(p: Placement) -> Obs {
    let mut n = Net::new(p);
    let a = n.add("a", 0, with_buffers(4096), Some("RawUnet"));
    let b = n.add("b", 0, with_buffers(4096), Some("RawUnet"));
    let (ch, back) = n.open(a, b);
    let sizes = [1, 8, 55, 56, 57, 64, 1000, 4095, 4096];
    exchange(&mut n, a, b, ch, back, &sizes, 1);
    n.send_faulting(a, ch, &pattern(9, 4097));
    n.pump_until("the fault reported", |n| !n.nodes[a].events.is_empty());
    n.quiet("after a faulted doTx");
    exchange(&mut n, a, b, ch, back, &[100], 2);
    let a_id = n.id(a);
    let o = n.observe();
    assert_eq!(o.events[a], [Seen::Fault(FaultKind::Native)]);
    o.only_opened(b, back, a_id);
    assert_eq!(o.got[b].len(), 10);
    assert_eq!(
        o.calls[a],
        Calls {
            tx: 11,
            rx: 10,
            timer: 0
        }
    );
    assert_eq!(
        o.calls[b],
        Calls {
            tx: 10,
            rx: 10,
            timer: 0
        }
    );
    o
}

/// StdUnet at both ends: messages spread over as many buffers as they
/// need, both ways.
fn std_unet(p: Placement) -> Obs {
    let mut n = Net::new(p);
    let a = n.add("a", 0, with_buffers(8192), Some("StdUnet"));
    let b = n.add("b", 0, with_buffers(8192), Some("StdUnet"));
    let (ch, back) = n.open(a, b);
    let sizes = [1, 56, 57, 8191, 8192, 8193, 16_384, 20_000, 40_000, 65_536];
    exchange(&mut n, a, b, ch, back, &sizes, 1);
    let a_id = n.id(a);
    let o = n.observe();
    o.no_events(a);
    o.only_opened(b, back, a_id);
    let k = sizes.len() as u64;
    assert_eq!(
        o.calls[a],
        Calls {
            tx: k,
            rx: k,
            timer: 0
        }
    );
    assert_eq!(
        o.calls[b],
        Calls {
            tx: k,
            rx: k,
            timer: 0
        }
    );
    o
}

/// PingPong at both ends: each user send starts N round trips between the
/// applets; the initiator's user gets one 12-byte report per run, the
/// responder's user nothing.
fn ping_pong(p: Placement) -> Obs {
    let mut n = Net::new(p);
    let a = n.add("a", 0, EndpointConfig::default(), Some("PingPong"));
    let b = n.add("b", 0, EndpointConfig::default(), Some("PingPong"));
    let (ch, back) = n.open(a, b);
    let runs = [(100u32, 60usize), (1, 4), (50, 1000)];
    for (k, &(rounds, payload)) in runs.iter().enumerate() {
        let mut msg = rounds.to_be_bytes().to_vec();
        msg.extend(pattern(k, payload));
        n.send(a, ch, &msg);
        n.wait_got(a, k + 1);
        let (chan, report) = &mut n.nodes[a].got[k];
        assert_eq!(*chan, ch.0);
        assert_eq!(report.len(), 12, "one report");
        assert_eq!(be(report, 0), rounds, "round trips done");
        assert_eq!(be(report, 8), 0, "pongs of the wrong length");
        // The time the run took is not compared.
        report[4..8].fill(0);
    }
    let a_id = n.id(a);
    let o = n.observe();
    assert_eq!(o.got[b], []);
    assert_eq!(o.got[a].len(), runs.len());
    let total: u64 = runs.iter().map(|r| r.0 as u64).sum();
    assert_eq!(
        o.calls[a],
        Calls {
            tx: 3,
            rx: total,
            timer: 0
        }
    );
    assert_eq!(
        o.calls[b],
        Calls {
            tx: 0,
            rx: total,
            timer: 0
        }
    );
    o.no_events(a);
    o.only_opened(b, back, a_id);
    o
}

/// FlowControl at both ends over a wire that drops 5% of the datagrams
/// each way: every message arrives, in order, once; the sender's timers
/// resend what was lost.
fn flow_control(p: Placement) -> Obs {
    let mut n = Net::two(p, 50_000, 11);
    let a = n.add("a", 0, EndpointConfig::default(), Some("FlowControl"));
    let b = n.add("b", 1, EndpointConfig::default(), Some("FlowControl"));
    let (ch, back) = n.open(a, b);
    const N: usize = 200;
    // At most the applet's pool (80) outstanding, so none is dropped.
    const OUTSTANDING: usize = 64;
    let mut sent = 0;
    while n.nodes[b].got.len() < N {
        let got = n.nodes[b].got.len();
        while sent < N && sent - got < OUTSTANDING {
            n.send(a, ch, &numbered(sent));
            sent += 1;
        }
        n.wait_got(b, got + 1);
    }
    for (i, (chan, m)) in n.nodes[b].got.iter().enumerate() {
        assert_eq!(*chan, back);
        assert!(*m == numbered(i), "message {i}, in order");
    }
    for s in &n.sessions {
        assert!(
            engine_counter(s, EngineCounter::WireDropInjectedDrop) > 0,
            "the wire lost datagrams"
        );
    }
    let a_id = n.id(a);
    let mut o = n.observe();
    o.no_events(a);
    o.only_opened(b, back, a_id);
    assert_eq!(o.got[b].len(), N, "exactly once");
    assert_eq!(o.got[a], []);
    assert!(o.calls[a].timer > 0, "the sender resent after a loss");
    assert_eq!(o.calls[a].tx, N as u64);
    // Acknowledgments and resends depend on which datagrams were lost:
    // only the sends are compared.
    for c in &mut o.calls {
        *c = Calls {
            tx: c.tx,
            ..Calls::default()
        };
    }
    o
}

/// Multicast on one endpoint with three plain peers: the rest of each send
/// goes to every channel its mask selects, a bit naming a channel not held
/// faults the send (the channels before it served); arrivals up to one
/// buffer reach the user, longer ones are dropped.
fn multicast(p: Placement) -> Obs {
    let mut n = Net::new(p);
    let m = n.add("m", 0, EndpointConfig::default(), Some("Multicast"));
    let peers: Vec<usize> = ["p0", "p1", "p2"]
        .into_iter()
        .map(|name| n.add(name, 0, EndpointConfig::default(), None))
        .collect();
    let chans: Vec<(Channel, u16)> = peers.iter().map(|&q| n.open(m, q)).collect();
    let cases: &[(&[usize], usize)] = &[
        (&[0, 2], 1000),
        (&[1], 10),
        (&[0, 1, 2], 20_000),
        (&[2], 56),
    ];
    for (k, &(to, len)) in cases.iter().enumerate() {
        let mask: u32 = to.iter().map(|&i| 1u32 << chans[i].0 .0).sum();
        let payload = pattern(k, len);
        let mut msg = mask.to_be_bytes().to_vec();
        msg.extend_from_slice(&payload);
        let before: Vec<usize> = peers.iter().map(|&q| n.nodes[q].got.len()).collect();
        n.send(m, chans[0].0, &msg);
        for &i in to {
            n.wait_got(peers[i], before[i] + 1);
            let (chan, got) = &n.nodes[peers[i]].got[before[i]];
            assert_eq!(*chan, chans[i].1, "case {k}, peer {i}");
            assert!(*got == payload, "case {k}, peer {i}");
        }
        n.quiet(&format!("case {k}: the peers not selected"));
    }
    // Channel 5 is not held: p0 is served, then the send faults.
    let mask = 1u32 << chans[0].0 .0 | 1 << 5;
    let mut msg = mask.to_be_bytes().to_vec();
    msg.extend_from_slice(&pattern(7, 100));
    let before = n.nodes[peers[0]].got.len();
    n.send_faulting(m, chans[0].0, &msg);
    n.wait_got(peers[0], before + 1);
    n.pump_until("the fault reported", |n| !n.nodes[m].events.is_empty());
    // Arrivals: one buffer's worth is delivered, more is dropped.
    let back = Channel(chans[1].1);
    n.send(peers[1], back, &pattern(8, 100));
    n.wait_got(m, 1);
    n.send(peers[1], back, &pattern(9, 9000));
    n.send(peers[1], back, &pattern(10, 8192));
    n.wait_got(m, 2);
    let m_id = n.id(m);
    let o = n.observe();
    assert_eq!(
        o.got[m],
        [
            (chans[1].0 .0, pattern(8, 100)),
            (chans[1].0 .0, pattern(10, 8192))
        ]
    );
    assert_eq!(o.events[m], [Seen::Fault(FaultKind::Native)]);
    for (i, &q) in peers.iter().enumerate() {
        let want = cases.iter().filter(|c| c.0.contains(&i)).count() + usize::from(i == 0);
        assert_eq!(o.got[q].len(), want, "peer {i}");
        assert_eq!(
            o.events[q],
            [Seen::Opened {
                channel: chans[i].1,
                peer: m_id
            }]
        );
    }
    assert_eq!(
        o.calls[m],
        Calls {
            tx: 5,
            rx: 3,
            timer: 0
        }
    );
    o
}

/// PacketBuffers at both ends: each packet names where in the receiver's
/// buffer area its payload goes; the receiving user gets the payload and
/// finds it in place. An offset outside the area faults the arrival and
/// nothing is delivered.
fn packet_buffers(p: Placement) -> Obs {
    let mut n = Net::new(p);
    let a = n.add("a", 0, EndpointConfig::default(), Some("PacketBuffers"));
    let b = n.add("b", 0, EndpointConfig::default(), Some("PacketBuffers"));
    let (ch, back) = n.open(a, b);
    let cases = [
        (0x1000u32, 100usize),
        (0x2_0000, 8192),
        (0x3_0040, 20_000),
        (0x40, 5),
    ];
    for (k, &(at, len)) in cases.iter().enumerate() {
        let payload = pattern(k + 40, len);
        let mut msg = at.to_be_bytes().to_vec();
        msg.extend_from_slice(&payload);
        n.send(a, ch, &msg);
        n.wait_got(b, k + 1);
        assert_eq!(n.nodes[b].got[k], (back, payload.clone()), "case {k}");
        let mut in_place = vec![0u8; len];
        n.nodes[b].ep.read_buffer(at, &mut in_place);
        assert!(in_place == payload, "case {k}: the payload is at {at:#x}");
    }
    let mut msg = 0x7fff_0000u32.to_be_bytes().to_vec();
    msg.extend_from_slice(&[1; 100]);
    n.send(a, ch, &msg);
    n.pump_until("the fault reported", |n| n.nodes[b].events.len() > 1);
    let a_id = n.id(a);
    let o = n.observe();
    assert_eq!(
        o.events[b],
        [
            Seen::Opened {
                channel: back,
                peer: a_id
            },
            Seen::Fault(FaultKind::Native)
        ]
    );
    o.no_events(a);
    assert_eq!(o.got[b].len(), cases.len());
    assert_eq!(
        o.calls[a],
        Calls {
            tx: 5,
            rx: 0,
            timer: 0
        }
    );
    assert_eq!(
        o.calls[b],
        Calls {
            tx: 0,
            rx: 5,
            timer: 0
        }
    );
    o
}

/// ReceiverAck at both ends: a stream of numbered messages arrives whole,
/// in order, once; every 25th is acknowledged by the receiver's applet and
/// the acknowledgment taken by the sender's, never seen by a user.
fn receiver_ack(p: Placement) -> Obs {
    let mut n = Net::new(p);
    let a = n.add("a", 0, EndpointConfig::default(), Some("ReceiverAck"));
    let b = n.add("b", 0, EndpointConfig::default(), Some("ReceiverAck"));
    let (ch, back) = n.open(a, b);
    const N: usize = 1010;
    const OUTSTANDING: usize = 60;
    let mut sent = 0;
    while n.nodes[b].got.len() < N {
        let got = n.nodes[b].got.len();
        while sent < N && sent - got < OUTSTANDING {
            n.send(a, ch, &numbered(sent));
            sent += 1;
        }
        n.wait_got(b, got + 1);
    }
    let a_id = n.id(a);
    let mut o = n.observe();
    o.no_events(a);
    o.only_opened(b, back, a_id);
    assert_eq!(o.got[a], [], "an acknowledgment reached the sending user");
    assert_eq!(o.got[b].len(), N, "exactly once");
    for (i, (chan, m)) in o.got[b].iter().enumerate() {
        assert_eq!(*chan, back);
        assert!(*m == numbered(i), "message {i}, in order");
    }
    let acks = (N / 25) as u64;
    // Timers run only when the credit is out for 10 ms (timing): not
    // compared.
    for c in &mut o.calls {
        c.timer = 0;
    }
    assert_eq!(
        o.calls[a],
        Calls {
            tx: N as u64,
            rx: acks,
            timer: 0
        }
    );
    assert_eq!(
        o.calls[b],
        Calls {
            tx: 0,
            rx: N as u64,
            timer: 0
        }
    );
    o
}

/// Burst at both ends: a send marked 'B' goes out 25 times (large ones
/// continued from timers), an unmarked one once.
fn burst(p: Placement) -> Obs {
    let mut n = Net::new(p);
    let a = n.add("a", 0, EndpointConfig::default(), Some("Burst"));
    let b = n.add("b", 0, EndpointConfig::default(), Some("Burst"));
    let (ch, back) = n.open(a, b);
    let mut want = Vec::new();
    for (k, len) in [1usize, 56, 57, 4096, 20_000, 65_536]
        .into_iter()
        .enumerate()
    {
        let mut msg = pattern(k, len);
        msg[0] = b'B';
        n.send(a, ch, &msg);
        want.extend(std::iter::repeat_n((back, msg), 25));
        n.wait_got(b, want.len());
    }
    for len in [1usize, 3000, 60_000] {
        let msg = pattern(len, len);
        assert_ne!(msg[0], b'B');
        n.send(a, ch, &msg);
        want.push((back, msg));
        n.wait_got(b, want.len());
    }
    let a_id = n.id(a);
    let o = n.observe();
    o.no_events(a);
    o.only_opened(b, back, a_id);
    assert!(
        o.got[b] == want,
        "25 copies of each marked message, one of the others"
    );
    assert_eq!(o.calls[a].tx, 9);
    assert!(
        o.calls[a].timer > 0,
        "the large bursts continued from timers"
    );
    assert_eq!(o.calls[b].rx, want.len() as u64);
    o
}

/// Generate at both ends: a send of 16 bytes or more only gives the
/// length, the applet sends its own numbered message; shorter sends go out
/// as written.
fn generate(p: Placement) -> Obs {
    let mut n = Net::new(p);
    let a = n.add("a", 0, EndpointConfig::default(), Some("Generate"));
    let b = n.add("b", 0, EndpointConfig::default(), Some("Generate"));
    let (ch, back) = n.open(a, b);
    let mut seq = 0u32;
    for (k, len) in [20usize, 1, 100, 8, 4096, 15, 20_000, 16, 65_536]
        .into_iter()
        .enumerate()
    {
        let user = pattern(k + 1, len);
        n.send(a, ch, &user);
        n.wait_got(b, k + 1);
        let want = if len < 16 {
            user
        } else {
            let mut g = vec![0u8; len];
            g[..4].copy_from_slice(&seq.to_be_bytes());
            seq += 1;
            g
        };
        assert_eq!(n.nodes[b].got[k].0, back);
        assert!(n.nodes[b].got[k].1 == want, "send {k} of {len} bytes");
    }
    // The other way: the receiver's own applet numbers from 0.
    n.send(b, Channel(back), &pattern(99, 32));
    n.wait_got(a, 1);
    let mut first = vec![0u8; 32];
    first[..4].copy_from_slice(&0u32.to_be_bytes());
    assert_eq!(n.nodes[a].got[0], (ch.0, first));
    let a_id = n.id(a);
    let o = n.observe();
    o.no_events(a);
    o.only_opened(b, back, a_id);
    assert_eq!(
        o.calls[a],
        Calls {
            tx: 9,
            rx: 1,
            timer: 0
        }
    );
    assert_eq!(
        o.calls[b],
        Calls {
            tx: 1,
            rx: 9,
            timer: 0
        }
    );
    o
}

// ---------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------

/// The suite covers every sample applet there is.
#[test]
fn every_sample_applet_has_a_scenario() {
    let samples: Vec<String> = sample_sources()
        .iter()
        .map(|f| f.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    let covered: Vec<String> = SCENARIOS.iter().map(|s| s.0.to_string()).collect();
    assert_eq!(samples, covered, "applets/ and the scenarios of this suite");
}

#[test]
fn burst_conforms() {
    conform("Burst");
}

#[test]
fn flow_control_conforms() {
    conform("FlowControl");
}

#[test]
fn generate_conforms() {
    conform("Generate");
}

#[test]
fn multicast_conforms() {
    conform("Multicast");
}

#[test]
fn packet_buffers_conforms() {
    conform("PacketBuffers");
}

#[test]
fn ping_pong_conforms() {
    conform("PingPong");
}

#[test]
fn raw_unet_conforms() {
    conform("RawUnet");
}

#[test]
fn receiver_ack_conforms() {
    conform("ReceiverAck");
}

#[test]
fn std_unet_conforms() {
    conform("StdUnet");
}
