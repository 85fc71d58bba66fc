//! Reliable VIs over a lossy wire: two engines on UDP loopback, each
//! with its own loss injector (5 % of datagrams dropped, 5 % duplicated,
//! 5 % reordered), carry ten VIs (five of reliable delivery, five of
//! reliable reception) whose messages are up to 256 KiB (185 fragments),
//! with receives posted slowly. No VI breaks, and every message arrives
//! exactly once, in order, intact: what arrived of a message is kept and
//! only what is missing is sent again.

mod vis;

use std::time::{Duration, Instant};

use unet_abi::*;
use unet_control::ViParams;
use unet_engine::invoker::{connect_vis, LocalClient, RawRegion, RawVi};
use unet_engine::{Dispatcher, EngineConfig};
use vis::*;

/// The largest message.
const BIG: usize = VI_MAX_TRANSFER;
/// Slots of each region: the most sends outstanding per VI.
const SLOTS: u64 = 4;
/// Receives outstanding per VI at most.
const RECVS: u64 = 2;
/// Messages per VI.
const MESSAGES: u64 = 24;

fn lossy(seed: u64) -> EngineConfig {
    EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        wire_drop_ppm: 50_000,
        wire_dup_ppm: 50_000,
        wire_reorder_ppm: 50_000,
        wire_drop_seed: seed,
        ..EngineConfig::default()
    }
}

/// Size of message `i` of VI `v`.
fn size_of(v: u64, i: u64) -> usize {
    [300, 64 << 10, BIG, 9000, 180_000, BIG, 1][((v + i) % 6) as usize]
}

/// One VI pair and its stream: sends posted as fast as the slots allow,
/// receives one at a time every `every`.
struct Stream {
    v: u64,
    tx: RawVi,
    rx: RawVi,
    tx_mem: RawRegion,
    rx_mem: RawRegion,
    sends: u64,
    recvs: u64,
    sent: u64,
    got: u64,
    next_recv: Instant,
    every: Duration,
}

impl Stream {
    fn post(&mut self, now: Instant) {
        while self.sends < MESSAGES && self.sends - self.sent < SLOTS {
            let i = self.sends;
            let at = (i % SLOTS) * BIG as u64;
            let len = size_of(self.v, i);
            self.tx_mem.write(at as usize, &pattern(i, len));
            self.tx
                .push_send(desc(i, &[(self.tx_mem.handle(), at, len as u32)]))
                .expect("room in the send queue");
            self.sends += 1;
        }
        if self.recvs < MESSAGES && self.recvs - self.got < RECVS && now >= self.next_recv {
            let i = self.recvs;
            let at = (i % SLOTS) * BIG as u64;
            self.rx
                .push_recv(desc(i, &[(self.rx_mem.handle(), at, BIG as u32)]))
                .expect("room in the receive queue");
            self.recvs += 1;
            self.next_recv = now + self.every;
        }
    }

    /// Check what completed; true when everything has.
    fn take(&mut self) -> bool {
        while let Some(c) = self.rx.recv_done() {
            let i = self.got;
            let len = size_of(self.v, i);
            assert_eq!(
                (c.id, c.status, c.len as usize),
                (i, 0, len),
                "VI {} receive {i}: receiver {:?} sender {:?}",
                self.v,
                self.rx.nonzero_counters(),
                self.tx.nonzero_counters()
            );
            let mut b = vec![0u8; len];
            self.rx_mem
                .read(((i % SLOTS) * BIG as u64) as usize, &mut b);
            assert!(b == pattern(i, len), "VI {} message {i} intact", self.v);
            self.got += 1;
        }
        while let Some(c) = self.tx.send_done() {
            let i = self.sent;
            assert_eq!(
                (c.id, c.status, c.len as usize),
                (i, 0, size_of(self.v, i)),
                "VI {} send {i}: sender {:?} receiver {:?}",
                self.v,
                self.tx.nonzero_counters(),
                self.rx.nonzero_counters()
            );
            self.sent += 1;
        }
        for (what, vi) in [("sender", &self.tx), ("receiver", &self.rx)] {
            assert_eq!(
                vi.state(),
                0,
                "VI {} {what} broke: sender {:?} receiver {:?}",
                self.v,
                self.tx.nonzero_counters(),
                self.rx.nonzero_counters()
            );
        }
        self.got == MESSAGES && self.sent == MESSAGES
    }
}

#[test]
fn ten_reliable_vis_of_large_messages_survive_loss_duplication_and_reordering() {
    // Three runs, each engine with its own seed.
    for seed in [11, 21, 31] {
        run(seed);
    }
}

fn run(seed: u64) {
    let mut a = Dispatcher::new(lossy(seed)).unwrap();
    let mut b = Dispatcher::new(lossy(seed + 1)).unwrap();
    let mut ca = LocalClient::new(&mut a).unwrap();
    let mut cb = LocalClient::new(&mut b).unwrap();
    let to = b.udp_addr().unwrap();
    let mut streams = Vec::new();
    for v in 0..10u64 {
        let reliability = if v % 2 == 0 {
            Reliability::ReliableDelivery
        } else {
            Reliability::ReliableReception
        };
        let params = ViParams {
            reliability,
            strict_rnr: false,
            break_timeout_ms: 0,
        };
        let (tx, rx) = connect_vis(
            (&mut a, &mut ca),
            (&mut b, &mut cb),
            to,
            100 + v,
            params,
            &mut || {},
        )
        .expect("connected over the lossy wire");
        let tx_mem = ca.register_memory(&mut a, SLOTS as usize * BIG).unwrap();
        let rx_mem = cb.register_memory(&mut b, SLOTS as usize * BIG).unwrap();
        streams.push(Stream {
            v,
            tx,
            rx,
            tx_mem,
            rx_mem,
            sends: 0,
            recvs: 0,
            sent: 0,
            got: 0,
            next_recv: Instant::now(),
            every: Duration::from_millis(10 + 3 * v),
        });
    }
    let start = Instant::now();
    loop {
        let now = Instant::now();
        let mut done = true;
        for s in &mut streams {
            s.post(now);
            done &= s.take();
        }
        if done {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(45),
            "not done in 45 s: {:?}",
            streams
                .iter()
                .map(|s| (s.v, s.sent, s.got, s.tx.nonzero_counters()))
                .collect::<Vec<_>>()
        );
        a.step();
        b.step();
    }
    // What was lost was sent again in part, not whole.
    let partial: u64 = streams
        .iter()
        .map(|s| s.tx.counter(ViCounter::PartialRetransmits))
        .sum();
    assert!(partial > 0);
    eprintln!(
        "seed {seed}: 10 VIs x {MESSAGES} messages at 5 % loss: {:.2} s; first sender {:?}, receiver {:?}",
        start.elapsed().as_secs_f64(),
        streams[0].tx.nonzero_counters(),
        streams[0].rx.nonzero_counters()
    );
}
