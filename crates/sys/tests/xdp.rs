//! The `AF_XDP` socket (`unet_sys::packet::xdp::XdpSocket`) on a veth
//! pair the test makes (and deletes): frames sent from a plain
//! `AF_PACKET` socket on one end arrive whole on the `AF_XDP` socket on
//! the other, frames the `AF_XDP` socket sends arrive whole at the plain
//! socket, and frames of another ethertype pass to the kernel; the
//! transmit-only socket (`XdpTx`), alone and as a `PacketPort`'s way out,
//! sends frames that arrive whole and leaves the interface's receive path
//! to the port's ring.
//!
//! Needs root (`CAP_NET_ADMIN`, `CAP_NET_RAW`, `CAP_BPF`) and `ip` from
//! iproute2; fails, never skips, when one is missing.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use unet_sys::packet::xdp::{XdpMode, XdpSocket, XdpTx};
use unet_sys::packet::{PacketPort, PacketSocket, RingConfig, TxPath};

const PROTO: u16 = 0x88B6;
const OTHER: u16 = 0x88B7;

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("cannot run `ip`: install iproute2");
    assert!(
        out.status.success(),
        "`ip {}` failed (this test needs root): {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A veth pair; deleted on drop.
struct Veth {
    a: String,
    b: String,
}

impl Veth {
    fn new() -> Veth {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let (pid, k) = (std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let v = Veth {
            a: format!("uxt{pid}{k}a"),
            b: format!("uxt{pid}{k}b"),
        };
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

fn frame(proto: u16, len: usize, seq: u8) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|k| (k as u8).wrapping_mul(7) ^ seq).collect();
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 0xbb, 2, 0, 0, 0, 0, 0xaa]);
    f[12..14].copy_from_slice(&proto.to_be_bytes());
    f[14] = seq;
    f
}

/// Receive on `x` until `n` frames came or 5 s passed.
fn take_xdp(x: &mut XdpSocket, n: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while got.len() < n && Instant::now() < end {
        if x.recv(64, |f| got.push(f.to_vec())) == 0 {
            let _ = unet_sys::wait_readable(x.fd(), Some(Duration::from_millis(100)));
        }
    }
    got
}

/// Receive on `s` until `n` frames came or 5 s passed.
fn take_socket(s: &PacketSocket, n: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut bufs = vec![vec![0u8; 2048]; 64];
    let mut lens = vec![0usize; 64];
    let end = Instant::now() + Duration::from_secs(5);
    while got.len() < n && Instant::now() < end {
        let k = s.recv_batch(&mut bufs, &mut lens).unwrap();
        for i in 0..k {
            got.push(bufs[i][..lens[i]].to_vec());
        }
        if k == 0 {
            let _ = unet_sys::wait_readable(s.fd(), Some(Duration::from_millis(100)));
        }
    }
    got
}

/// Frames cross a veth pair both ways through an `AF_XDP` socket whose
/// program is attached in `mode` (`None`: the driver's own where it has
/// one), which ends up `expect`.
fn both_ways(mode: Option<XdpMode>, expect: XdpMode) {
    let v = Veth::new();
    let mut x = XdpSocket::open_in(&v.a, PROTO, 64, mode).expect("AF_XDP socket on a");
    assert_eq!(x.mode(), expect);
    let plain = PacketSocket::open(&v.b, PROTO).expect("packet socket on b");

    // b -> a: frames of every size class, more than the receive half
    // holds in one go (its chunks must come back to the fill ring).
    let sent: Vec<Vec<u8>> = (0..100u8)
        .map(|k| frame(PROTO, [60, 64, 100, 1000, 1514][k as usize % 5], k))
        .collect();
    for chunk in sent.chunks(20) {
        for f in chunk {
            assert_eq!(plain.send_batch(&[f]).unwrap(), 1);
        }
        let got = take_xdp(&mut x, chunk.len());
        assert_eq!(
            got, chunk,
            "frames received by AF_XDP differ from those sent"
        );
    }
    assert_eq!(x.counters().rx_frames, 100);
    assert_eq!(x.counters().bad_desc, 0);
    assert_eq!(x.kernel_drops().unwrap(), 0, "the kernel dropped frames");

    // A frame of another ethertype is passed to the kernel, not to the socket.
    let other = PacketSocket::open(&v.a, OTHER).expect("packet socket on a");
    let o = frame(OTHER, 80, 1);
    assert_eq!(
        PacketSocket::open(&v.b, OTHER)
            .unwrap()
            .send_batch(&[&o])
            .unwrap(),
        1
    );
    assert_eq!(take_socket(&other, 1), vec![o]);
    assert!(
        !x.rx_ready(),
        "a frame of another ethertype reached the AF_XDP socket"
    );

    // a -> b: more frames than the transmit half holds, so chunks come
    // back from the completion ring to be reused.
    let out: Vec<Vec<u8>> = (0..100u8)
        .map(|k| frame(PROTO, [60, 1514, 200][k as usize % 3], k))
        .collect();
    let mut got = Vec::new();
    for chunk in out.chunks(16) {
        for f in chunk {
            assert!(x.send(f), "no room on the tx ring for 16 frames");
        }
        x.flush();
        got.extend(take_socket(&plain, chunk.len()));
    }
    assert_eq!(got, out, "frames sent by AF_XDP differ on arrival");
    let c = x.counters();
    assert_eq!((c.tx_frames, c.tx_full, c.bad_desc), (100, 0, 0));
    assert!(
        !x.send(&[0u8; 10]),
        "a frame shorter than an Ethernet header was sent"
    );
    assert_eq!(x.counters().tx_bad_len, 1);
}

#[test]
fn frames_cross_a_veth_pair_both_ways_through_an_af_xdp_socket() {
    // veth has XDP of its own: the program is attached there.
    both_ways(None, XdpMode::Native);
}

#[test]
fn the_same_with_the_program_attached_in_generic_mode() {
    both_ways(Some(XdpMode::Generic), XdpMode::Generic);
}

#[test]
fn a_socket_on_a_missing_interface_is_an_error_naming_the_call() {
    let e = XdpSocket::open("uxt-none0", PROTO, 64)
        .err()
        .expect("no such interface");
    assert!(e.to_string().contains("if_nametoindex"), "{e}");
    let e = XdpSocket::open("lo", PROTO, 100)
        .err()
        .expect("not a power of two");
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
}

/// Frames of `sizes` (cycled), numbered from 0.
fn frames(n: u8, sizes: &[usize]) -> Vec<Vec<u8>> {
    (0..n)
        .map(|k| frame(PROTO, sizes[k as usize % sizes.len()], k))
        .collect()
}

#[test]
fn a_transmit_only_socket_sends_frames_that_arrive_whole_and_reuses_its_chunks() {
    let v = Veth::new();
    let mut x = XdpTx::open(&v.a, 16).expect("transmit-only AF_XDP socket on a");
    let plain = PacketSocket::open(&v.b, PROTO).expect("packet socket on b");
    // Ten times the chunks it has: each flush must give them back.
    let out = frames(160, &[60, 1514, 64, 700]);
    let mut got = Vec::new();
    for chunk in out.chunks(16) {
        for f in chunk {
            assert!(x.send(f), "no free chunk for 16 frames after a flush");
        }
        x.flush();
        got.extend(take_socket(&plain, chunk.len()));
    }
    assert_eq!(got, out, "frames sent by the transmit-only socket differ");
    let end = Instant::now() + Duration::from_secs(5);
    while x.in_flight() > 0 && Instant::now() < end {
        x.flush();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(x.in_flight(), 0, "the kernel kept chunks it had sent");
    let c = x.counters();
    assert_eq!(
        (c.tx_frames, c.tx_full, c.bad_desc, c.rx_frames),
        (160, 0, 0, 0)
    );
    // Full: a 17th frame before any flush finds no chunk, and is counted.
    for f in frames(16, &[64]) {
        assert!(x.send(&f));
    }
    assert!(
        !x.send(&frame(PROTO, 64, 99)),
        "a frame beyond the chunks was placed"
    );
    assert_eq!(x.counters().tx_full, 1);
    assert!(
        !x.send(&[0u8; 13]),
        "a frame shorter than an Ethernet header was placed"
    );
    assert!(
        !x.send(&vec![0u8; 2049]),
        "a frame longer than a chunk was placed"
    );
    assert_eq!(x.counters().tx_bad_len, 2);
    x.flush();
    assert_eq!(take_socket(&plain, 16).len(), 16);
}

#[test]
fn a_port_sending_over_af_xdp_sends_and_still_receives_on_its_ring() {
    let v = Veth::new();
    let cfg = RingConfig {
        protocol: PROTO,
        tx_frames: 64,
        tx: TxPath::Xdp,
        ..RingConfig::default()
    };
    let mut port = PacketPort::open(&v.a, cfg).expect("port on a sending over AF_XDP");
    assert_eq!(port.tx_path(), TxPath::Xdp);
    let plain = PacketSocket::open(&v.b, PROTO).expect("packet socket on b");
    let out = frames(200, &[60, 64, 1514]);
    let mut got = Vec::new();
    for chunk in out.chunks(50) {
        for f in chunk {
            assert!(port.send(f));
        }
        assert_eq!(port.tx_pending(), chunk.len());
        port.flush();
        assert_eq!(port.tx_pending(), 0);
        got.extend(take_socket(&plain, chunk.len()));
    }
    assert_eq!(got, out, "frames the port sent over AF_XDP differ");
    let c = port.counters();
    assert_eq!((c.tx_frames, c.tx_full, c.tx_bad_len), (200, 0, 0));
    assert_eq!(c.tx_bytes, out.iter().map(|f| f.len() as u64).sum::<u64>());
    assert!(!port.send(&[0u8; 10]));
    assert_eq!(port.counters().tx_bad_len, 1);
    // No program on the interface: frames for the port reach its ring.
    let back = frames(5, &[80]);
    for f in &back {
        assert_eq!(plain.send_batch(&[f]).unwrap(), 1);
    }
    let mut rx = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while rx.len() < back.len() && Instant::now() < end {
        if port.recv(64, |f| rx.push(f.to_vec())) == 0 {
            let _ = unet_sys::wait_readable(port.fd(), Some(Duration::from_millis(100)));
        }
    }
    assert_eq!(rx, back, "the port's ring did not receive what b sent");
}

#[test]
fn a_transmit_only_socket_on_a_missing_interface_is_an_error() {
    let e = XdpTx::open("uxt-none0", 64)
        .err()
        .expect("no such interface");
    assert!(e.to_string().contains("if_nametoindex"), "{e}");
    let e = XdpTx::open("lo", 100).err().expect("not a power of two");
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
}
