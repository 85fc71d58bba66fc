//! The port over a veth pair made for the test: frames both ways, their
//! bytes, and the counters (kernel drops, frames too long for a slot).
//! Needs root (CAP_NET_ADMIN, CAP_NET_RAW) and `ip`; fails, never skips,
//! when either is missing.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::*;

/// An ethertype for local experiments (IEEE 802): no other traffic on the
/// pair carries it.
const PROTO: u16 = 0x88B5;

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap_or_else(|e| {
        panic!("cannot run `ip` ({e}): install iproute2 to run the raw-port tests")
    });
    assert!(
        out.status.success(),
        "`ip {}` failed (these tests need root): {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// A veth pair named for this process and test; deleted on drop.
struct Veth {
    a: String,
    b: String,
}

impl Veth {
    fn new() -> Veth {
        static N: AtomicU32 = AtomicU32::new(0);
        let k = N.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let v = Veth {
            a: format!("upk{pid}x{k}a"),
            b: format!("upk{pid}x{k}b"),
        };
        let _ = Command::new("ip").args(["link", "del", &v.a]).output();
        ip(&["link", "add", &v.a, "type", "veth", "peer", "name", &v.b]);
        ip(&["link", "set", &v.a, "up"]);
        ip(&["link", "set", &v.b, "up"]);
        v
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.a]).output();
    }
}

/// An Ethernet frame of `len` bytes with protocol [`PROTO`], its payload
/// numbered `seq`.
fn frame(len: usize, seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xbb]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xaa]);
    f[12..14].copy_from_slice(&PROTO.to_be_bytes());
    f[14..18].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in f.iter_mut().enumerate().skip(18) {
        *b = (i as u32 ^ seq) as u8;
    }
    f
}

fn cfg() -> RingConfig {
    RingConfig {
        protocol: PROTO,
        ..RingConfig::default()
    }
}

/// Receive on `p` until `want` frames came or 5 s passed.
fn take(p: &mut PacketPort, want: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while got.len() < want && Instant::now() < end {
        if !p.rx_ready() {
            let _ = crate::wait_readable(p.fd(), Some(Duration::from_millis(100)));
        }
        p.recv(usize::MAX, |f| got.push(f.to_vec()));
    }
    got
}

#[test]
fn frames_both_ways_through_the_rings() {
    let v = Veth::new();
    let mut a = PacketPort::open(&v.a, cfg()).expect("port on a");
    let mut b = PacketPort::open(&v.b, cfg()).expect("port on b");
    assert!(!a.rx_ready() && !b.rx_ready());
    // a -> b, small and full-size frames.
    let sent: Vec<Vec<u8>> = (0..100)
        .map(|k| frame(if k % 2 == 0 { 60 } else { 1514 }, k))
        .collect();
    for f in &sent {
        assert!(a.send(f));
    }
    assert_eq!(a.tx_pending(), 100);
    a.flush();
    assert_eq!(take(&mut b, 100), sent);
    // b -> a.
    let back: Vec<Vec<u8>> = (0..40).map(|k| frame(64 + k as usize, 1000 + k)).collect();
    for f in &back {
        assert!(b.send(f));
    }
    b.flush();
    assert_eq!(take(&mut a, 40), back);
    let (ca, cb) = (a.counters(), b.counters());
    assert_eq!((ca.tx_frames, ca.rx_frames), (100, 40));
    assert_eq!((cb.tx_frames, cb.rx_frames), (40, 100));
    assert_eq!(
        ca.tx_bytes,
        sent.iter().map(|f| f.len() as u64).sum::<u64>()
    );
    assert_eq!(cb.rx_bytes, ca.tx_bytes);
    assert_eq!(ca.kernel_drops + cb.kernel_drops, 0);
    assert_eq!(ca.truncated + ca.bad_slot + cb.truncated + cb.bad_slot, 0);
    // Neither port saw its own frames.
    assert!(!a.rx_ready() && !b.rx_ready());
}

#[test]
fn ring_port_and_plain_socket_interoperate() {
    let v = Veth::new();
    let mut a = PacketPort::open(&v.a, cfg()).expect("port on a");
    let s = PacketSocket::open(&v.b, PROTO).expect("socket on b");
    let sent: Vec<Vec<u8>> = (0..64).map(|k| frame(200, k)).collect();
    let refs: Vec<&[u8]> = sent.iter().map(|f| &f[..]).collect();
    assert_eq!(s.send_batch(&refs).unwrap(), 64);
    assert_eq!(take(&mut a, 64), sent);
    for f in &sent {
        assert!(a.send(f));
    }
    a.flush();
    let mut bufs = vec![vec![0u8; 2048]; BATCH_MAX];
    let mut lens = vec![0usize; BATCH_MAX];
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while got.len() < 64 && Instant::now() < end {
        let _ = crate::wait_readable(s.fd(), Some(Duration::from_millis(100)));
        let n = s.recv_batch(&mut bufs, &mut lens).unwrap();
        got.extend((0..n).map(|k| bufs[k][..lens[k]].to_vec()));
    }
    assert_eq!(got, sent);
}

#[test]
fn a_full_ring_counts_the_kernels_drops() {
    let v = Veth::new();
    let small = RingConfig {
        rx_frames: 32,
        ..cfg()
    };
    let mut a = PacketPort::open(&v.a, small).expect("port on a");
    let s = PacketSocket::open(&v.b, PROTO).expect("socket on b");
    let sent: Vec<Vec<u8>> = (0..200).map(|k| frame(60, k)).collect();
    let mut n = 0;
    for chunk in sent.chunks(BATCH_MAX) {
        let refs: Vec<&[u8]> = chunk.iter().map(|f| &f[..]).collect();
        n += s.send_batch(&refs).unwrap();
    }
    assert_eq!(n, 200);
    // Nothing read while they come: the ring (32 slots) fills, the kernel
    // drops the rest. Wait until every frame is accounted for.
    let end = Instant::now() + Duration::from_secs(5);
    while a.counters().kernel_drops < 200 - 32 && Instant::now() < end {
        std::thread::yield_now();
    }
    let got = a.recv(usize::MAX, |_| {});
    let c = a.counters();
    assert_eq!(got as u64, c.rx_frames);
    assert_eq!(c.rx_frames, 32, "{c:?}");
    assert_eq!(c.rx_frames + c.kernel_drops, 200, "{c:?}");
}

#[test]
fn frames_longer_than_a_slot_are_dropped_and_counted() {
    let v = Veth::new();
    let tiny = RingConfig {
        frame_size: 256,
        ..cfg()
    };
    let mut a = PacketPort::open(&v.a, tiny).expect("port on a");
    let mut b = PacketPort::open(&v.b, cfg()).expect("port on b");
    assert!(!b.send(&[0u8; 10]));
    assert!(!a.send(&frame(300, 0)), "longer than a's slot");
    for (k, len) in [(1, 100), (2, 1000), (3, 120)] {
        assert!(b.send(&frame(len, k)));
    }
    b.flush();
    let got = take(&mut a, 2);
    assert_eq!(got, vec![frame(100, 1), frame(120, 3)]);
    let (ca, cb) = (a.counters(), b.counters());
    assert_eq!((ca.truncated, ca.rx_frames, ca.tx_bad_len), (1, 2, 1));
    assert_eq!(cb.tx_bad_len, 1);
}

#[test]
fn a_missing_interface_is_an_error() {
    let e = PacketPort::open("no-such-if0", cfg())
        .err()
        .expect("no interface");
    assert_eq!(e.raw_os_error(), Some(libc::ENODEV));
    assert!(PacketPort::open(
        "lo",
        RingConfig {
            frame_size: 100,
            ..cfg()
        }
    )
    .is_err());
}

#[test]
fn a_v3_block_ring_hands_over_frames_when_its_block_retires() {
    let v = Veth::new();
    let mut r = v3::BlockRing::open(&v.a, PROTO, 1 << 16, 4, 1).expect("V3 ring on a");
    let s = PacketSocket::open(&v.b, PROTO).expect("socket on b");
    let sent: Vec<Vec<u8>> = (0..20).map(|k| frame(60 + 50 * k as usize, k)).collect();
    let refs: Vec<&[u8]> = sent.iter().map(|f| &f[..]).collect();
    assert_eq!(s.send_batch(&refs).unwrap(), 20);
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while got.len() < 20 && Instant::now() < end {
        let _ = crate::wait_readable(r.fd(), Some(Duration::from_millis(100)));
        r.recv(usize::MAX, |f| got.push(f.to_vec()));
    }
    assert_eq!(got, sent);
    assert_eq!(r.bad, 0);
}
