//! `unet bench port`'s `AF_XDP` runs (`unet_sys::packet::xdp::XdpSocket`,
//! copy mode, its program attached to the receiving end), measured as the
//! ring's are (see the parent module): the same veth pair, the same
//! bursts from the same sender, the same copy of each received frame into
//! a buffer of the program's, the same flush every 64 frames sent.

use std::time::Instant;

use unet_sys::packet::xdp::{XdpMode, XdpSocket};
use unet_sys::packet::{PacketSocket, BATCH_MAX};

use super::stats::median_f64;
use super::{frame, lone, ring_bursts, wait_readable, Args, Res, Veth, PROTO};

/// UMEM chunks a socket: half receive (more than the largest burst),
/// half transmit.
const FRAMES: u32 = 4096;

/// An `AF_XDP` socket on `name`, its program attached natively where
/// the driver can (generic with `--xdp-generic`).
pub(super) fn open(name: &str, a: &Args) -> Res<XdpSocket> {
    let mode = a.xdp_generic.then_some(XdpMode::Generic);
    XdpSocket::open_in(name, PROTO, FRAMES, mode)
        .map_err(|e| format!("AF_XDP socket on {name}: {e}"))
}

/// Whether `AF_XDP` works here: the mode its program attaches in, or the
/// error (the call that failed, with its errno) that rules it out.
pub(super) fn probe(v: &Veth, a: &Args) -> Result<XdpMode, String> {
    open(&v.a, a).map(|x| x.mode())
}

/// Frames per second of bursts sent from b and received on a by the
/// `AF_XDP` socket (as the parent's `rx_run`).
pub(super) fn rx_run(v: &Veth, sender: &PacketSocket, frames: &[Vec<u8>], a: &Args) -> Res<f64> {
    let mut x = open(&v.a, a)?;
    let mut copy = vec![0u8; 2048];
    let fd = x.fd();
    let per = ring_bursts(sender, frames, a.bursts, fd, |max| {
        x.recv(max, |f| copy[..f.len()].copy_from_slice(f))
    })?;
    let drops = x.kernel_drops().map_err(|e| e.to_string())?;
    let bad = x.counters().bad_desc;
    if drops > 0 || bad > 0 {
        return Err(format!(
            "the AF_XDP socket dropped {drops} frames and {bad} descriptors: lower --burst"
        ));
    }
    Ok(median_f64(&per))
}

/// Frames the kernel counted as received on interface `name`.
fn rx_packets(name: &str) -> Res<u64> {
    let p = format!("/sys/class/net/{name}/statistics/rx_packets");
    let s = std::fs::read_to_string(&p).map_err(|e| format!("{p}: {e}"))?;
    s.trim().parse().map_err(|e| format!("{p}: {e}"))
}

/// Frames per second sending bursts from b by the `AF_XDP` socket,
/// flushed every [`BATCH_MAX`] frames (as the parent's `tx_run`). The run
/// checks that a received every frame sent (its kernel's count), so that
/// the rate is of frames delivered.
pub(super) fn tx_run(v: &Veth, frames: &[Vec<u8>], a: &Args) -> Res<f64> {
    let mut x = open(&v.b, a)?;
    let before = rx_packets(&v.a)?;
    let mut per = Vec::with_capacity(a.bursts);
    for _ in 0..a.bursts {
        let t0 = Instant::now();
        for chunk in frames.chunks(BATCH_MAX) {
            for f in chunk {
                while !x.send(f) {
                    // No chunk free or the ring full: what it holds must
                    // leave first.
                    x.flush();
                    std::thread::yield_now();
                }
            }
            x.flush();
        }
        per.push(frames.len() as f64 / t0.elapsed().as_secs_f64());
    }
    let sent = (frames.len() * a.bursts) as u64;
    let got = rx_packets(&v.a)? - before;
    if got < sent {
        return Err(format!(
            "AF_XDP sent {sent} frames but {} received {got}",
            v.a
        ));
    }
    Ok(median_f64(&per))
}

/// The median time from sending one lone frame from b to its receipt on
/// a by the `AF_XDP` socket (waiting in `poll`), µs.
pub(super) fn latency(v: &Veth, sender: &PacketSocket, size: usize, a: &Args) -> Res<f64> {
    let f = frame(size, 7);
    let mut x = open(&v.a, a)?;
    lone(sender, &f, || {
        let k = x.recv(usize::MAX, |_| {});
        if k == 0 {
            wait_readable(x.fd())?;
        }
        Ok(k)
    })
}
