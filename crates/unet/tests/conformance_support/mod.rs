//! What the conformance scenarios share: the sample applets (compiled
//! by the applet tests' helpers), what a scenario observes and how two placements are compared,
//! and the endpoints one thread drives.
#![allow(dead_code)] // not every test binary uses every helper

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::applet_support::{classes, repo};
use crate::common::{endpoint_counter, nonzero_counters};
use unet::*;
use unet_abi::{ClientCounter, EndpointCounter};

pub const SEND_T: Duration = Duration::from_secs(10);
/// The longest a scenario waits for something to arrive.
pub const WAIT: Duration = Duration::from_secs(20);
/// How long nothing must arrive for "exactly once".
pub const QUIET: Duration = Duration::from_millis(50);

// ---------------------------------------------------------------------------
// The sample applets
// ---------------------------------------------------------------------------

/// The sample applets' sources (`applets/`).
pub fn sample_sources() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("applets"))
        .expect("applets/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "java"))
        .collect();
    files.sort();
    files
}

/// The class file of sample applet `name`, compiled once per test binary
/// with the applet tests' own (`applet_support::classes`).
pub fn applet(name: &str) -> &'static [u8] {
    classes()
        .get(name)
        .unwrap_or_else(|| panic!("no applet {name}"))
}

// ---------------------------------------------------------------------------
// What a scenario observes
// ---------------------------------------------------------------------------

/// An event as a user saw it, without what differs by placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
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
pub struct Calls {
    pub tx: u64,
    pub rx: u64,
    pub timer: u64,
}

/// What each endpoint of a scenario saw: the messages its user received
/// (channel, bytes), its events, its applet's invocations.
#[derive(Debug, Default)]
pub struct Obs {
    pub names: Vec<&'static str>,
    pub got: Vec<Vec<(u16, Vec<u8>)>>,
    pub events: Vec<Vec<Seen>>,
    pub calls: Vec<Calls>,
}

impl Obs {
    /// No events at endpoint `k` but the channel `from` opened to it on
    /// `channel` (no fault).
    pub fn only_opened(&self, k: usize, channel: u16, from: u32) {
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
    pub fn no_events(&self, k: usize) {
        assert_eq!(self.events[k], [], "{}: events", self.names[k]);
    }
}

/// The two placements saw the same, or the first difference.
pub fn compare(applet: &str, e: &Obs, i: &Obs) {
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

// ---------------------------------------------------------------------------
// Endpoints driven from one thread
// ---------------------------------------------------------------------------

pub struct Node {
    pub name: &'static str,
    pub session: usize,
    pub ep: Endpoint,
    pub has_applet: bool,
    pub got: Vec<(u16, Vec<u8>)>,
    pub events: Vec<Seen>,
}

/// Engines, sessions and endpoints of one run of a scenario.
pub struct Net {
    pub placement: Placement,
    pub sessions: Vec<Session>,
    pub nodes: Vec<Node>,
    pub buf: Vec<u8>,
    // Dropped last: the endpoints close through their engines.
    pub _engines: Vec<Engine>,
}

pub fn with_buffers(buffer_size: u32) -> EndpointConfig {
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
    pub fn new(placement: Placement) -> Net {
        let e = Engine::start(EngineConfig::default()).expect("engine");
        Net::on(placement, vec![e])
    }

    /// Two engines joined by UDP on loopback, each dropping `drop_ppm`
    /// of the datagrams it sends.
    pub fn two(placement: Placement, drop_ppm: u32, seed: u64) -> Net {
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

    pub fn on(placement: Placement, engines: Vec<Engine>) -> Net {
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
    pub fn add(
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
    pub fn open(&mut self, from: usize, to: usize) -> (Channel, u16) {
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
    pub fn send(&mut self, node: usize, ch: Channel, data: &[u8]) {
        let n = &mut self.nodes[node];
        n.ep.send_blocking(ch, data, SEND_T)
            .unwrap_or_else(|e| panic!("{}: send of {} bytes: {e}", n.name, data.len()));
    }

    /// A send whose `doTx` faults: inline it says so at once; the engine
    /// runs `doTx` after `send` has returned (the event reports it).
    pub fn send_faulting(&mut self, node: usize, ch: Channel, data: &[u8]) {
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
    pub fn poll(&mut self) -> bool {
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
    pub fn pump_until(&mut self, what: &str, done: impl Fn(&Net) -> bool) {
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
    pub fn wait_got(&mut self, node: usize, n: usize) {
        let what = format!("{} to receive {n} messages", self.nodes[node].name);
        self.pump_until(&what, |net| net.nodes[node].got.len() >= n);
    }

    /// Nothing more arrives anywhere for a while (exactly once).
    pub fn quiet(&mut self, what: &str) {
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
    pub fn calls(&mut self, node: usize) -> Calls {
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

    pub fn id(&self, node: usize) -> u32 {
        self.nodes[node].ep.id()
    }

    /// The observation, after a last check that nothing more arrives.
    pub fn observe(mut self) -> Obs {
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
pub const MAX_MESSAGE_BUF: usize = 1 << 20;

pub fn pattern(i: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| (i.wrapping_mul(131) + k * 7 + (k >> 8)) as u8)
        .collect()
}

/// Message `i` of a stream: 4..=1024 bytes, its index first (big-endian).
pub fn numbered(i: usize) -> Vec<u8> {
    let len = 4 + (i * 389) % 1021;
    let mut m = pattern(i, len);
    m[..4].copy_from_slice(&(i as u32).to_be_bytes());
    m
}

pub fn be(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// `a` sends each size to `b` on `ch`, `b` echoes each back on `back`:
/// both users get every message intact, in order.
pub fn exchange(
    n: &mut Net,
    a: usize,
    b: usize,
    ch: Channel,
    back: u16,
    sizes: &[usize],
    tag: usize,
) {
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
