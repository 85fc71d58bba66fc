//! The `AF_XDP` socket (`unet_sys::packet::xdp::XdpSocket`) on a veth
//! pair the test makes (and deletes): frames sent from a plain
//! `AF_PACKET` socket on one end arrive whole on the `AF_XDP` socket on
//! the other, frames the `AF_XDP` socket sends arrive whole at the plain
//! socket, and frames of another ethertype pass to the kernel.
//!
//! Needs root (`CAP_NET_ADMIN`, `CAP_NET_RAW`, `CAP_BPF`) and `ip` from
//! iproute2; fails, never skips, when one is missing.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use unet_sys::packet::xdp::{XdpMode, XdpSocket};
use unet_sys::packet::PacketSocket;

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
