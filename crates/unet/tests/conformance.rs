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

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod common;
use common::{endpoint_counter, engine_counter, nonzero_counters};
use unet::*;
use unet_abi::{ClientCounter, EndpointCounter, EngineCounter};

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

const SEND_T: Duration = Duration::from_secs(10);
/// The longest a scenario waits for something to arrive.
const WAIT: Duration = Duration::from_secs(20);
/// How long nothing must arrive for "exactly once".
const QUIET: Duration = Duration::from_millis(50);

// ---------------------------------------------------------------------------
// Compiling the applets
// ---------------------------------------------------------------------------

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Every applet of `applets/`, compiled once (one javac run) against the
/// applet SDK for Java 8 with every lint an error: class name → class
/// file.
fn classes() -> &'static HashMap<String, Vec<u8>> {
    static CLASSES: OnceLock<HashMap<String, Vec<u8>>> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let found = Command::new("bash")
            .arg(repo().join("scripts/find-jdk"))
            .output()
            .expect("cannot run `bash scripts/find-jdk`");
        if !found.status.success() {
            panic!(
                "the conformance suite compiles the sample applets and needs a JDK 22 or \
                 later; scripts/find-jdk found none (set JAVA_HOME to one):\n{}",
                String::from_utf8_lossy(&found.stderr)
            );
        }
        let jdk = PathBuf::from(String::from_utf8_lossy(&found.stdout).trim());
        let out = std::env::temp_dir().join(format!("unet-conformance-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        let files = sample_sources();
        // `-options` only silences javac's note that release 8 is obsolete.
        let run = Command::new(jdk.join("bin/javac"))
            .args(["--release", "8", "-Xlint:all,-options", "-Werror"])
            .arg("-sourcepath")
            .arg(repo().join("java/applet-sdk/src/main/java"))
            .arg("-d")
            .arg(&out)
            .args(&files)
            .output()
            .expect("cannot run javac");
        if !run.status.success() {
            let _ = std::fs::remove_dir_all(&out);
            panic!(
                "javac failed:\n{}{}",
                String::from_utf8_lossy(&run.stdout),
                String::from_utf8_lossy(&run.stderr)
            );
        }
        let mut m = HashMap::new();
        for f in &files {
            let class = f.file_stem().unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(out.join(format!("{class}.class")))
                .unwrap_or_else(|e| panic!("{class}.class: {e}"));
            m.insert(class, bytes);
        }
        let _ = std::fs::remove_dir_all(&out);
        m
    })
}

/// The sample applets' sources.
fn sample_sources() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("applets"))
        .expect("applets/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "java"))
        .collect();
    files.sort();
    files
}

fn applet(name: &str) -> &'static [u8] {
    classes()
        .get(name)
        .unwrap_or_else(|| panic!("no applet {name}"))
}

// ---------------------------------------------------------------------------
// What a scenario observes
// ---------------------------------------------------------------------------

/// An event as a user saw it, without what differs by placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Opened { channel: u16, peer: u32 },
    PeerGone { channel: u16 },
    Fault(FaultKind),
    Detached(FaultKind),
}

impl From<Event> for Seen {
    fn from(e: Event) -> Seen {
        match e {
            Event::ChannelOpened { channel, peer, .. } => Seen::Opened {
                channel: channel.0,
                peer: peer.id,
            },
            Event::PeerGone { channel } => Seen::PeerGone { channel: channel.0 },
            Event::AppletFault { kind } => Seen::Fault(kind),
            Event::AppletDetached { kind } => Seen::Detached(kind),
        }
    }
}

/// Invocations of an endpoint's applet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Calls {
    tx: u64,
    rx: u64,
    timer: u64,
}

/// What each endpoint of a scenario saw: the messages its user received
/// (channel, bytes), its events, its applet's invocations.
#[derive(Debug, Default)]
struct Obs {
    names: Vec<&'static str>,
    got: Vec<Vec<(u16, Vec<u8>)>>,
    events: Vec<Vec<Seen>>,
    calls: Vec<Calls>,
}

impl Obs {
    /// No events at endpoint `k` but the channel `from` opened to it on
    /// `channel` (no fault).
    fn only_opened(&self, k: usize, channel: u16, from: u32) {
        assert_eq!(
            self.events[k],
            [Seen::Opened {
                channel,
                peer: from
            }],
            "{}: events",
            self.names[k]
        );
    }

    /// No events at all at endpoint `k`.
    fn no_events(&self, k: usize) {
        assert_eq!(self.events[k], [], "{}: events", self.names[k]);
    }
}

/// The two placements saw the same, or the first difference.
fn compare(applet: &str, e: &Obs, i: &Obs) {
    assert_eq!(e.names, i.names);
    for (k, name) in e.names.iter().enumerate() {
        let what = format!("{applet}, endpoint {name}");
        assert_eq!(
            e.events[k], i.events[k],
            "{what}: events in the engine (left) and inline (right)"
        );
        assert_eq!(
            e.calls[k], i.calls[k],
            "{what}: applet invocations in the engine (left) and inline (right)"
        );
        let (ge, gi) = (&e.got[k], &i.got[k]);
        for (n, (me, mi)) in ge.iter().zip(gi).enumerate() {
            assert_eq!(
                (me.0, me.1.len()),
                (mi.0, mi.1.len()),
                "{what}: message {n} (channel, length) in the engine (left) and inline (right)"
            );
            if let Some(at) = me.1.iter().zip(&mi.1).position(|(x, y)| x != y) {
                panic!("{what}: message {n} differs at byte {at} between the placements");
            }
        }
        assert_eq!(
            ge.len(),
            gi.len(),
            "{what}: messages received in the engine placement (left) and inline (right)"
        );
    }
}

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
// Endpoints driven from one thread
// ---------------------------------------------------------------------------

struct Node {
    name: &'static str,
    session: usize,
    ep: Endpoint,
    has_applet: bool,
    got: Vec<(u16, Vec<u8>)>,
    events: Vec<Seen>,
}

/// Engines, sessions and endpoints of one run of a scenario.
struct Net {
    placement: Placement,
    sessions: Vec<Session>,
    nodes: Vec<Node>,
    buf: Vec<u8>,
    // Dropped last: the endpoints close through their engines.
    _engines: Vec<Engine>,
}

fn with_buffers(buffer_size: u32) -> EndpointConfig {
    EndpointConfig {
        geometry: Geometry {
            buffer_size,
            ..Default::default()
        },
        ..Default::default()
    }
}

impl Net {
    /// One embedded engine.
    fn new(placement: Placement) -> Net {
        let e = Engine::start(EngineConfig::default()).expect("engine");
        Net::on(placement, vec![e])
    }

    /// Two engines joined by UDP on loopback, each dropping `drop_ppm`
    /// of the datagrams it sends.
    fn two(placement: Placement, drop_ppm: u32, seed: u64) -> Net {
        let e = |s| {
            Engine::start(EngineConfig {
                udp_bind: Some("127.0.0.1:0".parse().unwrap()),
                wire_drop_ppm: drop_ppm,
                wire_drop_seed: s,
                ..Default::default()
            })
            .expect("engine")
        };
        Net::on(placement, vec![e(seed), e(seed + 1)])
    }

    fn on(placement: Placement, engines: Vec<Engine>) -> Net {
        Net {
            placement,
            sessions: engines
                .iter()
                .map(|e| Session::embedded(e).expect("session"))
                .collect(),
            nodes: Vec::new(),
            buf: vec![0; MAX_MESSAGE_BUF],
            _engines: engines,
        }
    }

    /// An endpoint on engine `session`, with `applet` attached in this
    /// run's placement.
    fn add(
        &mut self,
        name: &'static str,
        session: usize,
        cfg: EndpointConfig,
        applet_name: Option<&str>,
    ) -> usize {
        let mut ep = self.sessions[session]
            .create_endpoint(cfg)
            .expect("create an endpoint");
        if let Some(a) = applet_name {
            let opts = AppletOptions {
                placement: self.placement,
                ..Default::default()
            };
            ep.attach_applet(applet(a), opts)
                .unwrap_or_else(|e| panic!("attach {a} to {name}: {e}"));
        }
        self.nodes.push(Node {
            name,
            session,
            ep,
            has_applet: applet_name.is_some(),
            got: Vec::new(),
            events: Vec::new(),
        });
        self.nodes.len() - 1
    }

    /// Open a channel from `from` to `to` (the path the placement allows):
    /// `from`'s tag, and `to`'s (from its `ChannelOpened` event).
    fn open(&mut self, from: usize, to: usize) -> (Channel, u16) {
        let addr = self.nodes[to].ep.addr();
        let ch = self.nodes[from]
            .ep
            .open_channel(addr, ChannelOptions::default())
            .expect("open a channel");
        let peer = self.nodes[from].ep.id();
        let before = self.nodes[to].events.len();
        self.pump_until("the channel announced", |n| {
            n.nodes[to].events.len() > before
        });
        match self.nodes[to].events[before] {
            Seen::Opened { channel, peer: p } if p == peer => (ch, channel),
            e => panic!("{}: expected ChannelOpened, got {e:?}", self.nodes[to].name),
        }
    }

    /// Send from `node` (waiting for room in its queues).
    fn send(&mut self, node: usize, ch: Channel, data: &[u8]) {
        let n = &mut self.nodes[node];
        n.ep.send_blocking(ch, data, SEND_T)
            .unwrap_or_else(|e| panic!("{}: send of {} bytes: {e}", n.name, data.len()));
    }

    /// A send whose `doTx` faults: inline it says so at once; the engine
    /// runs `doTx` after `send` has returned (the event reports it).
    fn send_faulting(&mut self, node: usize, ch: Channel, data: &[u8]) {
        let n = &mut self.nodes[node];
        match n.ep.send_blocking(ch, data, SEND_T) {
            Ok(()) if self.placement == Placement::Engine => {}
            Err(SendError::AppletFault) if self.placement == Placement::Inline => {}
            r => panic!(
                "{}: a send whose doTx faults, placed {:?}: {r:?}",
                n.name, self.placement
            ),
        }
    }

    /// Take what has arrived at every endpoint (running inline applets'
    /// `doRx` and timers); true if anything came.
    fn poll(&mut self) -> bool {
        let mut any = false;
        for n in &mut self.nodes {
            for _ in 0..64 {
                match n.ep.try_recv(&mut self.buf) {
                    Ok(Some(r)) => {
                        n.got.push((r.channel.0, self.buf[..r.len].to_vec()));
                        any = true;
                    }
                    Ok(None) => break,
                    Err(e) => panic!("{}: receive: {e:?}", n.name),
                }
            }
            while let Some(e) = n.ep.poll_event() {
                n.events.push(e.into());
                any = true;
            }
        }
        any
    }

    /// Keep every endpoint receiving until `done`.
    fn pump_until(&mut self, what: &str, done: impl Fn(&Net) -> bool) {
        let start = Instant::now();
        while !done(self) {
            if start.elapsed() > WAIT {
                let why: String = self.sessions.iter().map(nonzero_counters).collect();
                panic!(
                    "{:?} placement: waited {WAIT:?} for {what}; received {:?}; events {:?}\n{why}",
                    self.placement,
                    self.nodes
                        .iter()
                        .map(|n| (n.name, n.got.len()))
                        .collect::<Vec<_>>(),
                    self.nodes
                        .iter()
                        .map(|n| (n.name, &n.events))
                        .collect::<Vec<_>>(),
                );
            }
            if !self.poll() {
                std::thread::yield_now();
            }
        }
    }

    /// Wait until `node` has received `n` messages in all.
    fn wait_got(&mut self, node: usize, n: usize) {
        let what = format!("{} to receive {n} messages", self.nodes[node].name);
        self.pump_until(&what, |net| net.nodes[node].got.len() >= n);
    }

    /// Nothing more arrives anywhere for a while (exactly once).
    fn quiet(&mut self, what: &str) {
        let before: Vec<(usize, usize)> = self
            .nodes
            .iter()
            .map(|n| (n.got.len(), n.events.len()))
            .collect();
        let start = Instant::now();
        while start.elapsed() < QUIET {
            if !self.poll() {
                std::thread::yield_now();
            }
        }
        for (n, b) in self.nodes.iter().zip(before) {
            assert_eq!(
                (n.got.len(), n.events.len()),
                b,
                "{:?} placement, {what}: {} received more (messages, events): {:?} {:?}",
                self.placement,
                n.name,
                n.got
                    .get(b.0..)
                    .map(|m| m.iter().map(|x| x.1.len()).collect::<Vec<_>>()),
                n.events.get(b.1..)
            );
        }
    }

    /// The invocations of `node`'s applet so far.
    fn calls(&mut self, node: usize) -> Calls {
        let n = &mut self.nodes[node];
        if !n.has_applet {
            return Calls::default();
        }
        match self.placement {
            Placement::Engine => {
                let s = &self.sessions[n.session];
                Calls {
                    tx: endpoint_counter(s, &n.ep, EndpointCounter::AppletTxCalls),
                    rx: endpoint_counter(s, &n.ep, EndpointCounter::AppletRxCalls),
                    timer: endpoint_counter(s, &n.ep, EndpointCounter::AppletTimerCalls),
                }
            }
            Placement::Inline => Calls {
                tx: n.ep.client_counter(ClientCounter::AppletTxCalls),
                rx: n.ep.client_counter(ClientCounter::AppletRxCalls),
                timer: n.ep.client_counter(ClientCounter::AppletTimerCalls),
            },
        }
    }

    fn id(&self, node: usize) -> u32 {
        self.nodes[node].ep.id()
    }

    /// The observation, after a last check that nothing more arrives.
    fn observe(mut self) -> Obs {
        self.quiet("at the end");
        let calls = (0..self.nodes.len()).map(|k| self.calls(k)).collect();
        let mut o = Obs {
            calls,
            ..Default::default()
        };
        for n in &self.nodes {
            o.names.push(n.name);
            o.got.push(n.got.clone());
            o.events.push(n.events.clone());
        }
        o
    }
}

/// A receive buffer as large as any message.
const MAX_MESSAGE_BUF: usize = 1 << 20;

fn pattern(i: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| (i.wrapping_mul(131) + k * 7 + (k >> 8)) as u8)
        .collect()
}

/// Message `i` of a stream: 4..=1024 bytes, its index first (big-endian).
fn numbered(i: usize) -> Vec<u8> {
    let len = 4 + (i * 389) % 1021;
    let mut m = pattern(i, len);
    m[..4].copy_from_slice(&(i as u32).to_be_bytes());
    m
}

fn be(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// `a` sends each size to `b` on `ch`, `b` echoes each back on `back`:
/// both users get every message intact, in order.
fn exchange(n: &mut Net, a: usize, b: usize, ch: Channel, back: u16, sizes: &[usize], tag: usize) {
    for (k, &len) in sizes.iter().enumerate() {
        let msg = pattern(tag * 100 + k, len);
        let (ga, gb) = (n.nodes[a].got.len(), n.nodes[b].got.len());
        n.send(a, ch, &msg);
        n.wait_got(b, gb + 1);
        assert_eq!(n.nodes[b].got[gb].0, back, "{len} bytes: channel");
        assert!(n.nodes[b].got[gb].1 == msg, "{len} bytes arrive intact");
        n.send(b, Channel(back), &msg);
        n.wait_got(a, ga + 1);
        assert_eq!(n.nodes[a].got[ga].0, ch.0, "echo of {len} bytes: channel");
        assert!(n.nodes[a].got[ga].1 == msg, "echo of {len} bytes intact");
    }
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
