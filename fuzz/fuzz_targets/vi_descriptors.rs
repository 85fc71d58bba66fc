//! VIA descriptor validation on two engines stepped on the fuzzer's
//! thread (invoker mode, joined by a `MemoryHub`: deterministic, no
//! engine thread). A hostile client drives its own engine-carried VI by
//! hand: it posts arbitrary send and receive descriptors (regions of its
//! own, a region it deregisters and registers again meanwhile, another
//! process's region, unknown handles, offsets and lengths past a region,
//! too many segments, flags set, more than a VI carries), publishes
//! arbitrary queue heads and completion tails, and closes and reopens
//! its VI; the client of the VI's peer on the other engine, honest,
//! posts receives and sends messages of its own. Beside them an honest
//! VI pair streams between the same two engines. A model checks:
//!
//! - each queue's descriptors complete once each, in posting order, and
//!   each status agrees with what the descriptor named (a bad one never
//!   completes done; a done send has the descriptor's length, a done
//!   receive the length of the peer's message it took); every error is
//!   the VI's error state (or a message too long for an unreliable VI's
//!   receive);
//! - the peer receives exactly the bytes the hostile client's done sends
//!   gathered, in order (reliable levels), or some of them in order
//!   (unreliable);
//! - `bad_descriptors` is 1 exactly when the VI broke with
//!   `BadDescriptor`, at most 1, and `errors` counts every error
//!   completion; a broken VI's peer is told its reason;
//! - the honest pair's every message arrives intact, in order, exactly
//!   once, and nothing of it breaks or counts an error;
//! - at the end, once everything was delivered, the engines go idle
//!   (whatever the hostile client left in its queues).
//!
//! Once the client scribbles on its queue heads or completion tails the
//! model cannot tell which descriptors the engine took or which
//! completions were overwritten: only the weaker checks (statuses are
//! known errors, counters bounded, the peer told, the honest pair, the
//! engines idle at the end) hold.
//!
//! The input: byte 0 picks the hostile VI's reliability level; then
//! operations of [`OP_BYTES`] bytes each (an opcode, arguments).
#![no_main]

use std::collections::VecDeque;
use std::net::SocketAddr;

use libfuzzer_sys::fuzz_target;
use unet_abi::*;
use unet_control::ViParams;
use unet_engine::invoker::{connect_vis, LocalClient, RawRegion, RawVi};
use unet_engine::wire::{MemoryHub, PortConfig};
use unet_engine::{Dispatcher, EngineConfig};

/// The engine tests' helpers for VIs between two engines (descriptors,
/// the honest stream, stepping).
#[allow(dead_code)]
#[path = "../../crates/engine/tests/vis/mod.rs"]
mod vis;

use vis::{desc, Honest, SLOT, SLOTS};

/// Bytes of input per operation: an opcode and 15 bytes of arguments.
pub const OP_BYTES: usize = 16;
/// Operations run per input at most.
const MAX_OPS: usize = 512;
/// The hostile client's regions: the first, and the one it deregisters
/// and registers again.
const R0_LEN: usize = 64 << 10;
const R1_LEN: usize = 8 << 10;
/// The peer's receive slots (each as large as a VI message may be) and
/// its send area.
const PEER_SLOTS: u64 = 4;
const PEER_SLOT: usize = VI_MAX_TRANSFER;
const PEER_SEND: usize = 64 << 10;

/// What the model knows of a descriptor the hostile client posted.
#[derive(Clone, Debug)]
enum Verdict {
    /// Valid: the bytes a send gathers (for a receive, its total room).
    Good(Vec<u8>),
    /// The engine must refuse it.
    Bad,
    /// Valid when the engine took it, or not: it names a region
    /// deregistered since it was posted.
    Either(Vec<u8>),
}

#[derive(Debug)]
struct Posted {
    id: u64,
    verdict: Verdict,
    /// It names the region the client deregisters now and then.
    names_r1: bool,
}

/// The hostile VI, its peer and the model of both.
struct Hostile {
    level: Reliability,
    vi: RawVi,
    peer: RawVi,
    /// Descriptors posted and not completed, in posting order.
    sends: VecDeque<Posted>,
    recvs: VecDeque<Posted>,
    /// Receives completed so far (the peer's messages taken, in order).
    recvs_done: u64,
    /// Error completions seen.
    errors: u64,
    /// The bytes of every send that may have gone on the wire, in
    /// posting order (what the peer may receive), and how far the peer
    /// got.
    wire: Vec<Vec<u8>>,
    wire_seen: usize,
    /// A send that may or may not have been sent was posted, or one whose
    /// bytes may change before the engine gathers them: the peer's data
    /// is no longer matched exactly.
    wire_unsure: bool,
    /// The lengths of the peer's messages, in order.
    peer_msgs: Vec<usize>,
    /// The peer's receives posted and completed.
    peer_posted: u64,
    peer_done: u64,
    /// The client wrote impossible queue heads or moved its completion
    /// tails: the model only checks what holds anyway.
    scribbled: bool,
    /// The last descriptor id given.
    ids: u64,
    /// The client moved a completion tail past what the engine
    /// published.
    tails_ahead: bool,
}

/// The two engines, the honest pair, the hostile client and its peer.
struct World {
    _hub: MemoryHub,
    a: Dispatcher,
    b: Dispatcher,
    at_b: SocketAddr,
    honest: Honest,
    _ha: LocalClient,
    _hb: LocalClient,
    bad: LocalClient,
    peer: LocalClient,
    r0: RawRegion,
    /// Where its tame receives go (so that its sends' bytes stay put).
    rr: RawRegion,
    /// Its current registration (None while deregistered) and the
    /// handles it had before.
    r1: Option<RawRegion>,
    r1_old: Vec<u32>,
    foreign: u32,
    peer_recv: RawRegion,
    peer_send: RawRegion,
    h: Hostile,
    tag: u64,
}

/// Recognisable bytes for a region.
fn fill(r: &RawRegion, seed: u8) {
    let v: Vec<u8> = (0..r.len())
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .rotate_left(seed as u32 % 32) as u8
                ^ seed
        })
        .collect();
    r.write(0, &v);
}

fn read(r: &RawRegion, off: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    r.read(off, &mut v);
    v
}

/// A small generator seeded from an operation's arguments.
struct Gen(u64);

impl Gen {
    fn new(arg: &[u8]) -> Gen {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for &b in arg {
            s = (s ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        Gen(s | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn params(level: Reliability) -> ViParams {
    ViParams {
        reliability: level,
        strict_rnr: false,
        break_timeout_ms: 0,
    }
}

impl World {
    fn new(level: Reliability) -> World {
        let hub = MemoryHub::new();
        let (at_a, at_b): (SocketAddr, SocketAddr) = (
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
        );
        let port = |at| Box::new(hub.bind(at, PortConfig::loopback()).expect("a hub port"));
        let mut a = Dispatcher::with_transport(EngineConfig::default(), port(at_a)).expect("A");
        let mut b = Dispatcher::with_transport(EngineConfig::default(), port(at_b)).expect("B");
        let mut ha = LocalClient::new(&mut a).expect("client");
        let mut hb = LocalClient::new(&mut b).expect("client");
        let mut bad = LocalClient::new(&mut a).expect("client");
        let mut peer = LocalClient::new(&mut b).expect("client");
        let size = SLOT * SLOTS as usize;
        let tx_mem = ha.register_memory(&mut a, size).expect("region");
        let rx_mem = hb.register_memory(&mut b, size).expect("region");
        let (tx, rx) = connect_vis(
            (&mut a, &mut ha),
            (&mut b, &mut hb),
            at_b,
            1,
            params(Reliability::ReliableDelivery),
            &mut || {},
        )
        .expect("the honest pair");
        let foreign = tx_mem.handle();
        let r0 = bad.register_memory(&mut a, R0_LEN).expect("region");
        let rr = bad.register_memory(&mut a, R0_LEN).expect("region");
        let r1 = bad.register_memory(&mut a, R1_LEN).expect("region");
        fill(&r0, 1);
        fill(&r1, 2);
        let peer_recv = peer
            .register_memory(&mut b, PEER_SLOT * PEER_SLOTS as usize)
            .expect("region");
        let peer_send = peer.register_memory(&mut b, PEER_SEND).expect("region");
        fill(&peer_send, 3);
        let (vi, pvi) = connect_vis(
            (&mut a, &mut bad),
            (&mut b, &mut peer),
            at_b,
            2,
            params(level),
            &mut || {},
        )
        .expect("the hostile VI");
        World {
            _hub: hub,
            a,
            b,
            at_b,
            honest: Honest::new(tx, rx, tx_mem, rx_mem),
            _ha: ha,
            _hb: hb,
            bad,
            peer,
            r0,
            rr,
            r1: Some(r1),
            r1_old: Vec::new(),
            foreign,
            peer_recv,
            peer_send,
            h: Hostile::new(level, vi, pvi),
            tag: 2,
        }
    }

    fn step(&mut self, n: u64) {
        for _ in 0..n {
            self.a.step();
            self.b.step();
        }
        self.honest.take();
    }

    /// A descriptor shaped by `arg`, and the model's verdict on it (for
    /// a send: the bytes it gathers; for a receive: zeros of its room).
    /// `arg[1]` below 0x80: a tame one (one to eight short segments of
    /// the first region for a send; for a receive, the whole region kept
    /// for receives, so that the peer's messages fit); else anything.
    /// Also whether it names the region deregistered now and then, and
    /// whether the bytes sends gather may change once it is taken (a
    /// send from the receive region, a receive into a region sends
    /// gather from).
    fn shape(&self, arg: &[u8], send: bool) -> (ViDesc, Verdict, bool, bool) {
        let mut g = Gen::new(arg);
        if arg[1] < 0x80 {
            let n = (arg[0] & 7) as usize + 1;
            let mut segs = Vec::with_capacity(n);
            let mut bytes = Vec::new();
            for i in 0..n {
                let (off, len) = if send {
                    let off = g.below(R0_LEN as u64 - 4096);
                    (off, g.below(4097))
                } else {
                    let part = (R0_LEN / n) as u64;
                    (
                        i as u64 * part,
                        if i + 1 == n {
                            R0_LEN as u64 - i as u64 * part
                        } else {
                            part
                        },
                    )
                };
                let r = if send { &self.r0 } else { &self.rr };
                segs.push((r.handle(), off, len as u32));
                if send {
                    bytes.extend(read(&self.r0, off as usize, len as usize));
                } else {
                    bytes.resize(bytes.len() + len as usize, 0);
                }
            }
            return (desc(0, &segs), Verdict::Good(bytes), false, false);
        }
        let mut d = ViDesc {
            id: 0,
            nsegs: (arg[0] & 7) as u32 + u32::from(arg[0] & 8 == 0),
            flags: 0,
            ..ViDesc::default()
        };
        if arg[0] & 0x80 != 0 {
            d.nsegs = g.next() as u32 % 12;
            if arg[0] & 0x40 != 0 {
                d.nsegs = g.next() as u32;
            }
        }
        if arg[1] >= 0xf0 {
            d.flags = 1 << (arg[1] & 31);
        }
        let r1 = self.r1.as_ref().map(|r| r.handle());
        let mut names_r1 = false;
        for s in d.segs.iter_mut() {
            let (handle, len) = match g.below(16) {
                0..=11 => (self.r0.handle(), R0_LEN as u64),
                12 => match r1 {
                    Some(h) => (h, R1_LEN as u64),
                    None => (0, 0),
                },
                // Shaped to fit regions that are not the client's.
                13 => (self.foreign, R0_LEN as u64),
                14 => (self.r1_old.last().copied().unwrap_or(0xdead), R1_LEN as u64),
                _ => (g.next() as u32, 0),
            };
            let (offset, n) = match (len, g.below(8)) {
                (0, _) | (_, 0) => (g.next() >> g.below(64), g.next() as u32 >> g.below(32)),
                (len, _) => {
                    let off = g.below(len + 1);
                    // Mostly short; now and then up to the region's end
                    // (eight of them are more than a VI carries).
                    let most = if g.below(4) == 0 {
                        len - off
                    } else {
                        (len - off).min(16 << 10)
                    };
                    (off, g.below(most + 1) as u32)
                }
            };
            *s = ViSegDesc {
                handle,
                len: n,
                offset,
            };
        }
        // The model's rule, from the layout's documentation.
        let n = d.nsegs as usize;
        let mut ok = n <= VI_MAX_SEGMENTS && d.flags == 0;
        let mut bytes = Vec::new();
        let mut moving = false;
        if ok {
            for s in &d.segs[..n] {
                let region = if s.handle == self.r0.handle() {
                    Some(&self.r0)
                } else if s.handle == self.rr.handle() {
                    Some(&self.rr)
                } else {
                    self.r1.as_ref().filter(|r| r.handle() == s.handle)
                };
                names_r1 |= Some(s.handle) == r1;
                // A send's bytes from the receive region, or a receive
                // into the send regions.
                moving |= (s.handle == self.rr.handle()) == send;
                let fits = region.filter(|r| {
                    s.offset
                        .checked_add(s.len as u64)
                        .is_some_and(|end| end <= r.len() as u64)
                });
                match fits {
                    Some(r) if bytes.len() + s.len as usize <= VI_MAX_TRANSFER => {
                        if send {
                            bytes.extend(read(r, s.offset as usize, s.len as usize));
                        } else {
                            bytes.resize(bytes.len() + s.len as usize, 0);
                        }
                    }
                    _ => ok = false,
                }
                if !ok {
                    break;
                }
            }
        }
        let verdict = if ok {
            Verdict::Good(bytes)
        } else {
            Verdict::Bad
        };
        (d, verdict, names_r1, moving && ok)
    }

    fn run_op(&mut self, op: u8, arg: &[u8]) {
        match op % 12 {
            // Post a send, then a receive.
            0 | 1 => {
                let send = op.is_multiple_of(12);
                let (mut d, verdict, names_r1, moving) = self.shape(arg, send);
                self.h.wire_unsure |= moving;
                d.id = self.h.next_id();
                let pushed = if send {
                    self.h.vi.push_send(d)
                } else {
                    self.h.vi.push_recv(d)
                };
                if pushed.is_some() {
                    self.h.posted(send, d.id, verdict, names_r1);
                }
            }
            // The peer posts a receive.
            2 => {
                let h = &mut self.h;
                if h.peer_posted - h.peer_done < PEER_SLOTS {
                    let at = (h.peer_posted % PEER_SLOTS) * PEER_SLOT as u64;
                    let d = desc(
                        h.peer_posted,
                        &[(self.peer_recv.handle(), at, PEER_SLOT as u32)],
                    );
                    if h.peer.push_recv(d).is_some() {
                        h.peer_posted += 1;
                    }
                }
            }
            // The peer sends a message.
            3 => {
                let len = u16::from_le_bytes([arg[0], arg[1]]) as usize % (PEER_SEND + 1);
                let id = self.h.peer_msgs.len() as u64;
                let d = desc(id, &[(self.peer_send.handle(), 0, len as u32)]);
                if self.h.peer.push_send(d).is_some() {
                    self.h.peer_msgs.push(len);
                }
            }
            // Step.
            4 | 5 => self.step(1 + arg[0] as u64 % 64),
            // Publish a queue head the engine cannot have been given (or
            // one it can: a head moved back to the tail).
            6 => {
                let mut g = Gen::new(arg);
                let send = arg[0] & 1 == 0;
                let tail = if send {
                    self.h.vi.sends_taken()
                } else {
                    self.h.vi.recvs_taken()
                };
                let cap = self.h.vi.layout().cap as u64;
                let head = match arg[1] % 4 {
                    0 => tail.wrapping_add(cap + 1 + g.below(1 << 20)),
                    1 => tail.wrapping_sub(1 + g.below(64)),
                    2 => g.next(),
                    _ => tail,
                };
                if send {
                    self.h.vi.set_send_head(head);
                } else {
                    self.h.vi.set_recv_head(head);
                }
                self.h.scribbled = true;
            }
            // Deregister the second region, or register it again.
            7 => match self.r1.take() {
                Some(r) => {
                    self.bad
                        .deregister_memory(&mut self.a, r.handle())
                        .expect("deregister");
                    self.r1_old.push(r.handle());
                    self.h.deregistered();
                }
                None => {
                    let r = self
                        .bad
                        .register_memory(&mut self.a, R1_LEN)
                        .expect("register");
                    fill(&r, 2);
                    self.r1 = Some(r);
                }
            },
            // Honest traffic.
            8 => self.honest.post(1 + arg[0] as u64 % 4),
            // Take and check what completed.
            9 | 10 => self.check(),
            // Move the completion tails (back: completions read again,
            // the engine takes fewer descriptors; ahead: the engine finds
            // the rings empty, and overwrites what was not read), or close
            // the VI and open a new one.
            _ => {
                if arg[0] & 1 == 0 {
                    let mut g = Gen::new(arg);
                    let (s, r) = self.h.vi.completions_published();
                    let mut ahead = false;
                    let mut moved = |v: u64| {
                        let to = match g.below(4) {
                            0 => v.saturating_sub(g.below(8)),
                            1 => v.wrapping_add(g.below(8)),
                            2 => v.wrapping_add(g.below(1 << 40)),
                            _ => g.next(),
                        };
                        ahead |= to > v;
                        to
                    };
                    let (s, r) = (moved(s), moved(r));
                    self.h.tails_ahead |= ahead;
                    self.h.vi.set_completion_tails(s, r);
                    self.h.scribbled = true;
                } else {
                    self.reopen();
                }
            }
        }
    }

    /// Take every completion waiting (the hostile VI's and its peer's)
    /// and check them against the model.
    fn check(&mut self) {
        self.h.take_peer(&self.peer_recv);
        self.h.take();
        self.honest.take();
    }

    /// Close the hostile VI and its peer; connect a new pair.
    fn reopen(&mut self) {
        self.finish_hostile();
        let h = &self.h;
        let (vi, peer) = (h.vi.id(), h.peer.id());
        self.bad.close_vi(&mut self.a, vi).expect("close the VI");
        self.peer
            .close_vi(&mut self.b, peer)
            .expect("close the peer");
        self.tag += 1;
        let (vi, pvi) = connect_vis(
            (&mut self.a, &mut self.bad),
            (&mut self.b, &mut self.peer),
            self.at_b,
            self.tag,
            params(self.h.level),
            &mut || {},
        )
        .expect("a new hostile VI");
        self.h = Hostile::new(self.h.level, vi, pvi);
    }

    /// Step until the hostile VI's breaking reached its peer (if it
    /// broke), then check everything that completed.
    fn finish_hostile(&mut self) {
        for _ in 0..64 {
            self.step(8);
        }
        let state = self.h.vi.state();
        if state != 0 {
            let h = &self.h;
            vis::step_until(
                &mut self.a,
                &mut self.b,
                &mut || {},
                "the peer told",
                |_, _| h.peer.state() != 0,
            );
            // Its own reason, or the peer's (it broke first, and told).
            let peer = self.h.peer.state();
            assert_eq!(peer, state, "the peer's state, the VI's");
        }
        self.check();
    }

    /// The end of an input: the hostile VI's completions checked, the
    /// honest pair's every message delivered.
    fn finish(&mut self) {
        self.finish_hostile();
        let honest = &mut self.honest;
        vis::step_until(
            &mut self.a,
            &mut self.b,
            &mut || {},
            "the honest stream",
            |_, _| honest.take(),
        );
        // One more message, through everything the input left.
        self.honest.post(1);
        let honest = &mut self.honest;
        vis::step_until(
            &mut self.a,
            &mut self.b,
            &mut || {},
            "the last honest message",
            |_, _| honest.take(),
        );
        // Then each engine finds a turn with nothing to do, whatever the
        // hostile client left in its queues (it may sleep). Not asked of
        // A when the client moved a completion tail ahead: with an
        // impossible queue head that keeps A busy for ever (a known
        // engine bug: `an_impossible_head_with_a_tail_ahead_lets_the_
        // engine_go_idle` in the engine's `tests/vi_hostile.rs`).
        let a_too = !self.h.tails_ahead;
        for (name, e) in [("A", &mut self.a), ("B", &mut self.b)] {
            if name == "A" && !a_too {
                continue;
            }
            assert!(
                (0..100_000).any(|_| e.step() == 0),
                "engine {name} never goes idle"
            );
        }
    }
}

impl Hostile {
    fn new(level: Reliability, vi: RawVi, peer: RawVi) -> Hostile {
        Hostile {
            level,
            vi,
            peer,
            sends: VecDeque::new(),
            recvs: VecDeque::new(),
            recvs_done: 0,
            errors: 0,
            wire: Vec::new(),
            wire_seen: 0,
            wire_unsure: false,
            peer_msgs: Vec::new(),
            peer_posted: 0,
            peer_done: 0,
            scribbled: false,
            ids: 0,
            tails_ahead: false,
        }
    }

    /// Unique descriptor ids, in posting order.
    fn next_id(&mut self) -> u64 {
        self.ids += 1;
        self.ids
    }

    fn posted(&mut self, send: bool, id: u64, verdict: Verdict, names_r1: bool) {
        if send {
            match &verdict {
                Verdict::Good(b) => self.wire.push(b.clone()),
                _ => self.wire_unsure |= matches!(verdict, Verdict::Either(_)),
            }
            self.sends.push_back(Posted {
                id,
                verdict,
                names_r1,
            });
        } else {
            self.recvs.push_back(Posted {
                id,
                verdict,
                names_r1,
            });
        }
    }

    /// Region `handle` was deregistered: what names it and is not taken
    /// for sure may be judged either way.
    fn deregistered(&mut self) {
        for p in self.sends.iter_mut().chain(self.recvs.iter_mut()) {
            if p.names_r1 {
                if let Verdict::Good(b) = &p.verdict {
                    p.verdict = Verdict::Either(b.clone());
                }
            }
        }
        if self.sends.iter().any(|p| p.names_r1) {
            self.wire_unsure = true;
        }
    }

    fn error_ok(&self, status: i32, recv: bool) -> bool {
        let state = self.vi.state();
        let code = status.unsigned_abs();
        status < 0
            && ViError::from_u32(code).is_some()
            && (code == state
                || recv && self.level == Reliability::Unreliable && code == ViError::TooLong as u32)
    }

    /// Take the hostile VI's completions and check each.
    fn take(&mut self) {
        let state = self.vi.state();
        while let Some(c) = self.vi.send_done() {
            if c.status != 0 {
                self.errors += 1;
            }
            if self.scribbled {
                assert!(c.status == 0 || ViError::from_u32(c.status.unsigned_abs()).is_some());
                continue;
            }
            let p = self
                .sends
                .pop_front()
                .unwrap_or_else(|| panic!("send completion {c:?}: not posted"));
            assert_eq!(c.id, p.id, "sends complete in posting order: {p:?}");
            if c.status == 0 {
                let bytes = match &p.verdict {
                    Verdict::Good(b) | Verdict::Either(b) => b,
                    Verdict::Bad => panic!("a bad send completed done: {p:?}"),
                };
                assert_eq!(c.len as usize, bytes.len(), "{p:?}");
            } else {
                assert!(
                    self.error_ok(c.status, false),
                    "{c:?} in state {state}: {p:?}"
                );
            }
        }
        while let Some(c) = self.vi.recv_done() {
            if c.status != 0 {
                self.errors += 1;
            }
            if self.scribbled {
                assert!(c.status == 0 || ViError::from_u32(c.status.unsigned_abs()).is_some());
                continue;
            }
            let p = self
                .recvs
                .pop_front()
                .unwrap_or_else(|| panic!("receive completion {c:?}: not posted"));
            assert_eq!(c.id, p.id, "receives complete in order");
            let k = self.recvs_done as usize;
            if c.status == 0 {
                let room = match &p.verdict {
                    Verdict::Good(b) | Verdict::Either(b) => b.len(),
                    Verdict::Bad => panic!("a bad receive completed done: {p:?}"),
                };
                let len = c.len as usize;
                assert!(len <= room, "{c:?}: {len} bytes in {room}");
                if self.level != Reliability::Unreliable {
                    assert_eq!(Some(&len), self.peer_msgs.get(k), "message {k}'s length");
                }
                self.recvs_done += 1;
            } else {
                assert!(
                    self.error_ok(c.status, true),
                    "{c:?} in state {state}: {p:?}"
                );
                if c.status == -(ViError::TooLong as i32) {
                    self.recvs_done += 1;
                }
            }
        }
        let bad = self.vi.counter(ViCounter::BadDescriptors);
        assert!(bad <= 1, "{bad} bad descriptors counted");
        let state = self.vi.state();
        if state == ViError::BadDescriptor as u32 {
            assert_eq!(bad, 1, "broken by a bad descriptor, not counted");
        } else {
            assert_eq!(bad, 0, "counted a bad descriptor, in state {state}");
        }
        if !self.scribbled {
            assert_eq!(self.vi.counter(ViCounter::Errors), self.errors, "errors");
        }
    }

    /// Take the peer's receives and check their bytes against what the
    /// hostile client's sends gathered.
    fn take_peer(&mut self, mem: &RawRegion) {
        while let Some(c) = self.peer.recv_done() {
            let slot = (self.peer_done % PEER_SLOTS) as usize;
            self.peer_done += 1;
            if c.status != 0 {
                continue;
            }
            let got = read(mem, slot * PEER_SLOT, c.len as usize);
            if self.scribbled || self.wire_unsure {
                continue;
            }
            let reliable = self.level != Reliability::Unreliable;
            let at = self.wire[self.wire_seen..].iter().position(|m| *m == got);
            match at {
                Some(0) => {}
                Some(_) if !reliable => {}
                _ => panic!(
                    "the peer's message {} is not the next one sent ({} bytes)",
                    self.peer_done - 1,
                    got.len()
                ),
            }
            self.wire_seen += at.unwrap_or(0) + 1;
        }
        while self.peer.send_done().is_some() {}
    }
}

/// Run one input.
pub fn run(data: &[u8]) {
    let Some((&level, ops)) = data.split_first() else {
        return;
    };
    let level = match level % 3 {
        0 => Reliability::Unreliable,
        1 => Reliability::ReliableDelivery,
        _ => Reliability::ReliableReception,
    };
    let mut w = World::new(level);
    for op in ops.chunks_exact(OP_BYTES).take(MAX_OPS) {
        w.run_op(op[0], &op[1..]);
    }
    w.finish();
}

fuzz_target!(|data: &[u8]| run(data));
