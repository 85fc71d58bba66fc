//! A measurement, run by hand on a release build: the round trip of a
//! 64-byte message over a pair of peer rings between two threads pinned
//! on CPUs 0 and 1, beside a plain single-producer single-consumer ring
//! of the same 256-byte slots in shared memory (no checks, no header, no
//! liveness), in the same run, alternating, as a ratio.
//!
//! ```text
//! cargo test --release -p unet-engine --lib spine::peer::bench -- --ignored --nocapture
//! ```

use std::hint::spin_loop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use unet_abi::copy::copy_bytes;
use unet_abi::peer::{AmHeader, PeerGeometry, AM_SLOT};
use unet_sys::Segment;

use super::*;

const SIZE: usize = 64;
/// Round trips per timed batch, and batches per run.
const BATCH: u64 = 100;
const BATCHES: usize = 2_000;
const RUNS: usize = 5;
const SLOTS: u64 = 64;

/// Pin the calling thread on `cpu`; false if the system refuses.
fn pin(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes inside
    // it for cpu < CPU_SETSIZE; sched_setaffinity reads exactly
    // size_of::<cpu_set_t>() bytes of it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// One direction of the plain ring: a head line, a tail line, slots of
/// `AM_SLOT` bytes (a 4-byte length, then the payload).
struct PlainRing {
    base: *mut u8,
    head: u64,
    seen: u64,
}

// SAFETY: the ring points into a segment both threads keep mapped for the
// whole run; each end is used by one thread.
unsafe impl Send for PlainRing {}

impl PlainRing {
    const BYTES: usize = 256 + SLOTS as usize * AM_SLOT;

    fn line(&self, off: usize) -> &AtomicU64 {
        // SAFETY: offsets 0 and 128 lie in the ring's first 256 bytes,
        // 8-byte aligned, in the live segment.
        unsafe { &*self.base.add(off).cast::<AtomicU64>() }
    }
    fn slot(&self, pos: u64) -> *mut u8 {
        // SAFETY: masked into the ring's slots.
        unsafe { self.base.add(256 + (pos % SLOTS) as usize * AM_SLOT) }
    }
    /// Producer: push `msg` if there is room.
    fn push(&mut self, msg: &[u8]) -> bool {
        if self.head - self.seen >= SLOTS {
            self.seen = self.line(128).load(Ordering::Acquire);
            if self.head - self.seen >= SLOTS {
                return false;
            }
        }
        let s = self.slot(self.head);
        // SAFETY: the slot is ours until head is published; msg fits.
        unsafe {
            s.cast::<u32>().write_volatile(msg.len() as u32);
            copy_bytes(msg.as_ptr(), s.add(16), msg.len());
        }
        self.head += 1;
        self.line(0).store(self.head, Ordering::Release);
        true
    }
    /// Consumer (`head` is its tail): copy one message into `out`.
    fn pop(&mut self, out: &mut [u8; 240]) -> Option<usize> {
        if self.head == self.seen {
            self.seen = self.line(0).load(Ordering::Acquire);
            if self.head == self.seen {
                return None;
            }
        }
        let s = self.slot(self.head);
        // SAFETY: a published slot; the length is bounded before the copy.
        let n = unsafe {
            let n = (s.cast::<u32>().read_volatile() as usize).min(240);
            copy_bytes(s.add(16), out.as_mut_ptr(), n);
            n
        };
        self.head += 1;
        self.line(128).store(self.head, Ordering::Release);
        Some(n)
    }
}

/// Round trips of the plain rings: the median batch's nanoseconds per
/// round trip (a batch the scheduler interrupted is an outlier, not the
/// figure).
fn plain_run() -> f64 {
    let seg = Segment::create("bench-plain", 2 * PlainRing::BYTES).unwrap();
    let ring = |d: usize| PlainRing {
        // SAFETY: inside the segment.
        base: unsafe { seg.ptr().as_ptr().add(d * PlainRing::BYTES) },
        head: 0,
        seen: 0,
    };
    let (mut ping_tx, mut ping_rx, mut pong_tx, mut pong_rx) = (ring(0), ring(0), ring(1), ring(1));
    std::thread::scope(|sc| {
        sc.spawn(move || {
            pin(1);
            let mut buf = [0u8; 240];
            loop {
                let Some(n) = ping_rx.pop(&mut buf) else {
                    spin_loop();
                    continue;
                };
                if n == 0 {
                    break;
                }
                while !pong_tx.push(&buf[..n]) {}
            }
        });
        pin(0);
        let msg = [7u8; SIZE];
        let mut buf = [0u8; 240];
        let mut batches = Vec::with_capacity(BATCHES);
        for _ in 0..BATCHES {
            let t = Instant::now();
            for _ in 0..BATCH {
                while !ping_tx.push(&msg) {}
                while pong_rx.pop(&mut buf).is_none() {
                    spin_loop();
                }
            }
            batches.push(t.elapsed().as_nanos() as f64 / BATCH as f64);
        }
        while !ping_tx.push(&[]) {}
        median(batches)
    })
}

/// Round trips of a pair of peer links (as [`plain_run`]).
fn peer_run() -> f64 {
    let g = PeerGeometry {
        slots: SLOTS as u32,
        data_size: 0,
    };
    let fd = PeerLink::create(g, 1).unwrap();
    let mut a = PeerLink::attach(fd.try_clone().unwrap(), 0, PeerConfig::default()).unwrap();
    let mut b = PeerLink::attach(fd, 1, PeerConfig::default()).unwrap();
    let h = |handler| AmHeader {
        handler,
        ..AmHeader::default()
    };
    std::thread::scope(|sc| {
        sc.spawn(move || {
            pin(1);
            let mut buf = [0u8; 240];
            loop {
                let (mut n, mut handler) = (0, 0);
                let got = b.pop(1, |m, args, _| {
                    handler = m.handler;
                    n = args.len();
                    buf[..n].copy_from_slice(args);
                });
                if got == 0 {
                    spin_loop();
                    continue;
                }
                if handler == 0 {
                    break;
                }
                while b.push(h(65), &buf[..n], &[]).is_err() {}
            }
        });
        pin(0);
        let msg = [7u8; SIZE];
        let mut buf = [0u8; 240];
        let mut batches = Vec::with_capacity(BATCHES);
        for _ in 0..BATCHES {
            let t = Instant::now();
            for _ in 0..BATCH {
                while a.push(h(64), &msg, &[]).is_err() {}
                while a.pop(1, |_, args, _| buf[..args.len()].copy_from_slice(args)) == 0 {
                    spin_loop();
                }
            }
            batches.push(t.elapsed().as_nanos() as f64 / BATCH as f64);
        }
        while a.push(h(0), &[], &[]).is_err() {}
        median(batches)
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
#[ignore = "a measurement: run by hand on a release build"]
fn peer_round_trip_beside_a_plain_ring() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(cpus >= 2, "two CPUs needed");
    let (mut plain, mut peer) = (vec![], vec![]);
    plain_run();
    peer_run();
    for _ in 0..RUNS {
        plain.push(plain_run());
        peer.push(peer_run());
    }
    let (pl, pe) = (median(plain.clone()), median(peer.clone()));
    println!(
        "64-byte round trip, threads pinned on CPUs 0 and 1, {RUNS} runs of {BATCHES} \
         batches of {BATCH}: median batch per run, median run"
    );
    println!("plain SPSC ring (256-byte slots): median {pl:.0} ns  runs {plain:.0?}");
    println!("peer link (PeerLink pair):        median {pe:.0} ns  runs {peer:.0?}");
    println!("ratio peer / plain: {:.2}", pe / pl);
}
