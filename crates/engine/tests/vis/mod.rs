//! Shared by the tests of VIs carried between two engines stepped on the
//! test's thread (`vi_hostile.rs`, `vi_wire_forgery.rs`, `vi_acks.rs`):
//! descriptors, an honest stream whose every message is checked, stepping
//! both engines, a relay that sees every datagram between them.

#![allow(dead_code)] // not every test binary uses every helper

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use unet_abi::*;
use unet_engine::invoker::{LocalClient, RawRegion, RawVi};
use unet_engine::wire::Frame;
use unet_engine::{Dispatcher, EngineConfig};

/// Step both engines (and run `between` after each) until `done(a, b)`
/// holds; at most ten seconds.
pub fn step_until(
    a: &mut Dispatcher,
    b: &mut Dispatcher,
    between: &mut dyn FnMut(),
    what: &str,
    mut done: impl FnMut(&Dispatcher, &Dispatcher) -> bool,
) {
    let start = Instant::now();
    while !done(a, b) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "waited 10 s of steps for {what}"
        );
        a.step();
        between();
        b.step();
        between();
    }
}

/// Step both engines for `d` of wall time (timers, acks on their way).
pub fn step_for(a: &mut Dispatcher, b: &mut Dispatcher, between: &mut dyn FnMut(), d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        a.step();
        between();
        b.step();
        between();
    }
}

/// A descriptor `id` of the segments `segs` (handle, offset, length).
pub fn desc(id: u64, segs: &[(u32, u64, u32)]) -> ViDesc {
    let mut d = ViDesc {
        id,
        nsegs: segs.len() as u32,
        ..ViDesc::default()
    };
    for (s, &(handle, offset, len)) in d.segs.iter_mut().zip(segs) {
        *s = ViSegDesc {
            handle,
            len,
            offset,
        };
    }
    d
}

/// The status of a completion with error `e`.
pub fn err(e: ViError) -> i32 {
    -(e as i32)
}

/// Every completion waiting on `vi`'s send ring.
pub fn sends_done(vi: &mut RawVi) -> Vec<ViCompl> {
    std::iter::from_fn(|| vi.send_done()).collect()
}

/// Every completion waiting on `vi`'s receive ring.
pub fn recvs_done(vi: &mut RawVi) -> Vec<ViCompl> {
    std::iter::from_fn(|| vi.recv_done()).collect()
}

/// Message `i` of an honest stream: its number, then bytes made from it.
pub fn pattern(i: u64, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len)
        .map(|j| (i.wrapping_mul(13).wrapping_add(j as u64 * 3)) as u8)
        .collect();
    let n = len.min(8);
    v[..n].copy_from_slice(&i.to_le_bytes()[..n]);
    v
}

/// Sizes of the honest messages, by number.
pub fn size(i: u64) -> usize {
    [8usize, 100, 1400, 5000, 20_000, 0, 64][(i % 7) as usize]
}

/// Bytes of each slot of the honest stream's regions.
pub const SLOT: usize = 32 << 10;
/// Slots: the most messages outstanding.
pub const SLOTS: u64 = 16;

/// An honest VI pair (`tx` on one engine sending to `rx` on the other)
/// and its regions; every message is checked as it completes: in order,
/// exactly once, intact, never an error.
pub struct Honest {
    pub tx: RawVi,
    pub rx: RawVi,
    pub tx_mem: RawRegion,
    pub rx_mem: RawRegion,
    /// Messages posted (sends and their receives).
    pub posted: u64,
    /// Sends completed, receives completed.
    pub sent: u64,
    pub got: u64,
}

impl Honest {
    pub fn new(tx: RawVi, rx: RawVi, tx_mem: RawRegion, rx_mem: RawRegion) -> Honest {
        assert!(tx_mem.len() >= SLOT * SLOTS as usize && rx_mem.len() >= SLOT * SLOTS as usize);
        Honest {
            tx,
            rx,
            tx_mem,
            rx_mem,
            posted: 0,
            sent: 0,
            got: 0,
        }
    }

    /// Post up to `n` more messages (receive first, then send), as far as
    /// the slots allow.
    pub fn post(&mut self, n: u64) {
        for _ in 0..n {
            if self.posted - self.sent.min(self.got) >= SLOTS {
                return;
            }
            let i = self.posted;
            let at = (i % SLOTS) * SLOT as u64;
            let len = size(i);
            self.rx
                .push_recv(desc(i, &[(self.rx_mem.handle(), at, SLOT as u32)]))
                .expect("room in the honest receive queue");
            self.tx_mem.write(at as usize, &pattern(i, len));
            self.tx
                .push_send(desc(i, &[(self.tx_mem.handle(), at, len as u32)]))
                .expect("room in the honest send queue");
            self.posted += 1;
        }
    }

    /// Take the completions that came, checking each; true when every
    /// message posted has completed on both sides.
    pub fn take(&mut self) -> bool {
        while let Some(c) = self.rx.recv_done() {
            let i = self.got;
            assert_eq!(
                (c.id, c.status, c.len as usize),
                (i, 0, size(i)),
                "honest receive {i}: receiver {:?} sender {:?}",
                self.rx.nonzero_counters(),
                self.tx.nonzero_counters()
            );
            let mut v = vec![0u8; size(i)];
            self.rx_mem
                .read(((i % SLOTS) * SLOT as u64) as usize, &mut v);
            assert!(v == pattern(i, size(i)), "honest message {i} intact");
            self.got += 1;
        }
        while let Some(c) = self.tx.send_done() {
            let i = self.sent;
            assert_eq!(
                (c.id, c.status, c.len as usize),
                (i, 0, size(i)),
                "honest send {i}: sender {:?} receiver {:?}",
                self.tx.nonzero_counters(),
                self.rx.nonzero_counters()
            );
            self.sent += 1;
        }
        assert!(self.got <= self.posted && self.sent <= self.posted);
        self.check_clean();
        self.got == self.posted && self.sent == self.posted
    }

    /// Neither VI broke or counted an error.
    pub fn check_clean(&self) {
        for (what, v) in [("sender", &self.tx), ("receiver", &self.rx)] {
            assert_eq!(
                v.state(),
                0,
                "the honest {what} broke: {:?}",
                v.nonzero_counters()
            );
            assert_eq!(
                (
                    v.counter(ViCounter::Errors),
                    v.counter(ViCounter::BadDescriptors)
                ),
                (0, 0),
                "the honest {what}"
            );
        }
    }
}

/// Datagrams one way through the relay, as (bytes).
pub type Log = Vec<Vec<u8>>;

/// Two sockets between engines A and B: `to_a` is B as A knows it, `to_b`
/// is A as B knows it. Every datagram from one engine goes on to the
/// other from the socket facing it, and is kept.
pub struct Relay {
    /// Faces A (A's peer address).
    pub to_a: UdpSocket,
    /// Faces B (B's peer address).
    pub to_b: UdpSocket,
    pub at_a: SocketAddr,
    pub at_b: SocketAddr,
    pub a_to_b: Log,
    pub b_to_a: Log,
    /// Hold what B sends (its acks) instead of passing it on.
    pub hold: bool,
    pub held: Log,
}

pub fn socket() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_nonblocking(true).unwrap();
    s
}

impl Relay {
    pub fn new(at_a: SocketAddr, at_b: SocketAddr) -> Relay {
        Relay {
            to_a: socket(),
            to_b: socket(),
            at_a,
            at_b,
            a_to_b: Vec::new(),
            b_to_a: Vec::new(),
            hold: false,
            held: Vec::new(),
        }
    }

    /// Move what waits, both ways (B's datagrams only kept while
    /// holding).
    pub fn pump(&mut self) {
        if !self.hold {
            for d in self.held.drain(..) {
                let _ = self.to_a.send_to(&d, self.at_a);
            }
        }
        let mut buf = vec![0u8; 65536];
        while let Ok((n, src)) = self.to_a.recv_from(&mut buf) {
            if src == self.at_a {
                let _ = self.to_b.send_to(&buf[..n], self.at_b);
                self.a_to_b.push(buf[..n].to_vec());
            }
        }
        while let Ok((n, src)) = self.to_b.recv_from(&mut buf) {
            if src == self.at_b {
                if self.hold {
                    self.held.push(buf[..n].to_vec());
                } else {
                    let _ = self.to_a.send_to(&buf[..n], self.at_a);
                }
                self.b_to_a.push(buf[..n].to_vec());
            }
        }
    }
}

/// The frames of `log` that parse.
pub fn frames(log: &Log) -> impl Iterator<Item = Frame<'_>> {
    log.iter().filter_map(|d| Frame::parse(d).ok())
}

/// Two engines on UDP loopback, the relay between them, and a client of
/// each.
pub fn two_engines() -> (Dispatcher, Dispatcher, Relay, LocalClient, LocalClient) {
    let cfg = || EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..EngineConfig::default()
    };
    let mut a = Dispatcher::new(cfg()).unwrap();
    let mut b = Dispatcher::new(cfg()).unwrap();
    let relay = Relay::new(a.udp_addr().unwrap(), b.udp_addr().unwrap());
    let ca = LocalClient::new(&mut a).unwrap();
    let cb = LocalClient::new(&mut b).unwrap();
    (a, b, relay, ca, cb)
}

/// Step both engines (the relay moving) until `vi` completes a receive.
pub fn next_recv(
    a: &mut Dispatcher,
    b: &mut Dispatcher,
    relay: &mut Relay,
    vi: &mut RawVi,
    what: &str,
) -> ViCompl {
    let mut got = None;
    step_until(a, b, &mut || relay.pump(), what, |_, _| {
        got = got.or_else(|| vi.recv_done());
        got.is_some()
    });
    got.unwrap()
}
