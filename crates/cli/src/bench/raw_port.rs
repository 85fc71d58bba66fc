//! `unet bench port`: the raw-frame port's transport (an `AF_PACKET`
//! socket with `TPACKET_V2` rings, `unet_sys::packet::PacketPort`) beside
//! the same socket without rings, batched with `recvmmsg`/`sendmmsg`
//! (`PacketSocket`), over a veth pair the run makes (and deletes), in the
//! same run, interleaved, for each frame size.
//!
//! - **rx**: a plain socket on one end sends a burst of `--burst` frames
//!   (`sendmmsg`, 64 at a time; fewer frames than the receiver holds: the
//!   ring's slots, the socket's 4 MiB buffer) and the receiver on the
//!   other end, the only one there for the run, takes them all, each
//!   frame copied into a buffer of the program's (as the engine copies it
//!   into a bulk buffer): read from the ring and handed back, or copied
//!   out by `recvmmsg` 64 at a time. One thread does both: veth delivers
//!   a frame in the sender's system call, so the time is the sender's,
//!   the kernel's delivery (into the ring, or onto the socket's queue) and
//!   the receiver's, and only the last two differ between the two.
//! - **tx**: a burst of frames sent from one end: placed on the transmit
//!   ring with a flush (one `send`) every 64, as the engine flushes once
//!   a turn, or `sendmmsg` 64 at a time. The time includes the kernel's
//!   delivery to the other end (where nothing takes the frames).
//!
//! The figure is frames per second (the median of the `--reps` runs, each
//! the median of its bursts) and the ring's ratio to the baseline. The rx
//! rows also show a `TPACKET_V3` block ring (`unet_sys::packet::v3`,
//! blocks of 64 KiB handed over when full or 1 ms after their first
//! frame) taking the same bursts (with filler frames pushing each burst's
//! last block out, so that the figure is not its timer), and a `latency`
//! row per size the time
//! from sending one lone frame to its receipt (the receiver waiting in
//! `poll`), medians of 200, for the V2 ring, the V3 ring and `recvmmsg`.
//!
//! Every row also shows an `AF_XDP` socket (`unet_sys::packet::xdp`, copy
//! mode, runs in `raw_port/xdp.rs`) taking the same bursts, sending them,
//! and taking a lone frame, interleaved with the others. Where `AF_XDP`
//! does not work the bench says which call failed and with what error,
//! and shows the other transports.
//! Needs root (`CAP_NET_ADMIN`, `CAP_NET_RAW`, and `CAP_BPF` for
//! `AF_XDP`) and `ip`.

use std::os::fd::RawFd;
use std::process::{Command as Cmd, ExitCode};
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use serde_json::{json, Value};
use unet_sys::packet::v3::BlockRing;
use unet_sys::packet::xdp::XdpMode;
use unet_sys::packet::{PacketPort, PacketSocket, RingConfig, BATCH_MAX};

use super::report::{finish, warn_if_busy};
use super::stats::{self, fmt_size, median_f64};

mod xdp;

type Res<T> = Result<T, String>;

/// An ethertype for local experiments: no other traffic carries it.
const PROTO: u16 = 0x88B5;

/// `unet bench port`.
#[derive(ClapArgs, Clone)]
pub struct Args {
    /// Frame sizes in bytes (comma list, 60 to 1514).
    #[arg(long, value_delimiter = ',', value_parser = stats::parse_size,
          default_value = "64,1500")]
    pub sizes: Vec<usize>,
    /// Frames a burst.
    #[arg(long, default_value_t = 512)]
    pub burst: usize,
    /// Bursts a run.
    #[arg(long, default_value_t = 100)]
    pub bursts: usize,
    /// Runs of each transport per size, interleaved.
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Print one JSON object per line per size and direction.
    #[arg(long)]
    pub json: bool,
    /// Attach the AF_XDP socket's program in generic (SKB) mode rather
    /// than in the driver's own XDP mode.
    #[arg(long)]
    pub xdp_generic: bool,
}

/// One size and direction: frames per second of each transport.
struct Row {
    size: usize,
    dir: &'static str,
    ring: f64,
    mmsg: f64,
    ring_runs: Vec<f64>,
    mmsg_runs: Vec<f64>,
    /// The V3 block ring's (rx only).
    v3: Option<f64>,
    /// The `AF_XDP` socket's (none where it does not work).
    xdp: Option<f64>,
    xdp_runs: Vec<f64>,
}

impl Row {
    fn json(&self) -> Value {
        json!({
            "bench": "raw_port",
            "direction": self.dir,
            "size": self.size,
            "ring_fps": self.ring,
            "mmsg_fps": self.mmsg,
            "ratio_ring_mmsg": self.ring / self.mmsg,
            "ring_runs_fps": self.ring_runs,
            "mmsg_runs_fps": self.mmsg_runs,
            "v3_fps": self.v3,
            "xdp_fps": self.xdp,
            "ratio_xdp_ring": self.xdp.map(|x| x / self.ring),
            "xdp_runs_fps": self.xdp_runs,
        })
    }
}

/// One size's lone-frame latency, µs (medians).
struct Latency {
    size: usize,
    v2_us: f64,
    v3_us: f64,
    mmsg_us: f64,
    xdp_us: Option<f64>,
}

impl Latency {
    fn json(&self) -> Value {
        json!({
            "bench": "raw_port_latency",
            "size": self.size,
            "v2_ring_us": self.v2_us,
            "v3_ring_us": self.v3_us,
            "mmsg_us": self.mmsg_us,
            "xdp_us": self.xdp_us,
        })
    }
}

/// Lone frames sent for a latency figure.
const LONE: usize = 200;
/// The V3 ring's blocks: 32 of 64 KiB, retired 1 ms after their first frame.
const V3_BLOCK: u32 = 64 << 10;
const V3_BLOCKS: u32 = 32;
const V3_RETIRE_MS: u32 = 1;

fn v3(name: &str) -> Res<BlockRing> {
    BlockRing::open(name, PROTO, V3_BLOCK, V3_BLOCKS, V3_RETIRE_MS)
        .map_err(|e| format!("V3 ring on {name}: {e}"))
}

/// A filler frame's number (not a burst's).
const FILLER: u32 = u32::MAX;

/// Frames per second of bursts received by a V3 block ring on a (as
/// [`rx_run`]). So that the figure is the ring's rate and not its timer,
/// whenever nothing waits the sender adds a full-size filler frame, until
/// the burst's last block fills and is handed over (the fillers' sending is
/// in the time; those received are not counted).
fn rx_run_v3(v: &Veth, sender: &PacketSocket, frames: &[Vec<u8>], a: &Args) -> Res<f64> {
    let mut r = v3(&v.a)?;
    let mut copy = vec![0u8; 2048];
    let filler = frame(1514, FILLER);
    let mut per = Vec::with_capacity(a.bursts);
    let n = frames.len();
    for _ in 0..a.bursts {
        let t0 = Instant::now();
        blast(sender, frames)?;
        let mut got = 0;
        while got < n {
            let k = r.recv(usize::MAX, |f| {
                copy[..f.len()].copy_from_slice(f);
                if f.get(14..18) != Some(&FILLER.to_le_bytes()[..]) {
                    got += 1;
                }
            });
            if k == 0 && got < n {
                blast_one(sender, &filler)?;
            }
        }
        per.push(n as f64 / t0.elapsed().as_secs_f64());
    }
    Ok(median_f64(&per))
}

/// The median time from sending one frame from b to its receipt on a, µs,
/// by `recv` (which waits in `poll` when nothing is there).
fn lone(sender: &PacketSocket, f: &[u8], mut recv: impl FnMut() -> Res<usize>) -> Res<f64> {
    let mut us = Vec::with_capacity(LONE);
    for _ in 0..LONE {
        let t0 = Instant::now();
        blast_one(sender, f)?;
        let mut got = 0;
        while got == 0 {
            got = recv()?;
        }
        us.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    Ok(median_f64(&us))
}

fn blast_one(s: &PacketSocket, f: &[u8]) -> Res<()> {
    while s.send_batch(&[f]).map_err(|e| format!("sendmmsg: {e}"))? == 0 {}
    Ok(())
}

fn latency(v: &Veth, sender: &PacketSocket, size: usize, a: &Args, with_xdp: bool) -> Res<Latency> {
    let f = frame(size, 7);
    let mut p = port(&v.a)?;
    let v2_us = lone(sender, &f, || {
        let k = p.recv(usize::MAX, |_| {});
        if k == 0 {
            wait_readable(p.fd())?;
        }
        Ok(k)
    })?;
    drop(p);
    let mut r = v3(&v.a)?;
    let v3_us = lone(sender, &f, || {
        let k = r.recv(usize::MAX, |_| {});
        if k == 0 {
            wait_readable(r.fd())?;
        }
        Ok(k)
    })?;
    drop(r);
    let s = socket(&v.a)?;
    let mut bufs = vec![vec![0u8; 2048]; BATCH_MAX];
    let mut lens = vec![0usize; BATCH_MAX];
    let mmsg_us = lone(sender, &f, || {
        let k = s
            .recv_batch(&mut bufs, &mut lens)
            .map_err(|e| format!("recvmmsg: {e}"))?;
        if k == 0 {
            wait_readable(s.fd())?;
        }
        Ok(k)
    })?;
    drop(s);
    let xdp_us = if with_xdp {
        Some(xdp::latency(v, sender, size, a)?)
    } else {
        None
    };
    Ok(Latency {
        size,
        v2_us,
        v3_us,
        mmsg_us,
        xdp_us,
    })
}

/// A veth pair named for this run; deleted on drop.
struct Veth {
    a: String,
    b: String,
}

fn ip(args: &[&str]) -> Res<()> {
    let out = Cmd::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip` ({e}): install iproute2"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed (the port bench needs root): {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Veth {
    fn new() -> Res<Veth> {
        let pid = std::process::id();
        let v = Veth {
            a: format!("ubp{pid}a"),
            b: format!("ubp{pid}b"),
        };
        let _ = ip(&["link", "del", &v.a]);
        ip(&["link", "add", &v.a, "type", "veth", "peer", "name", &v.b])?;
        ip(&["link", "set", &v.a, "up"])?;
        ip(&["link", "set", &v.b, "up"])?;
        Ok(v)
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.a]);
    }
}

fn frame(len: usize, seq: u32) -> Vec<u8> {
    let mut f = vec![seq as u8; len];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 0xbb, 2, 0, 0, 0, 0, 0xaa]);
    f[12..14].copy_from_slice(&PROTO.to_be_bytes());
    f[14..18].copy_from_slice(&seq.to_le_bytes());
    f
}

fn ring_cfg() -> RingConfig {
    RingConfig {
        protocol: PROTO,
        rx_frames: 2048,
        tx_frames: 1024,
        ..RingConfig::default()
    }
}

fn wait_readable(fd: RawFd) -> Res<()> {
    match unet_sys::wait_readable(fd, Some(Duration::from_secs(2))) {
        Ok(true) => Ok(()),
        Ok(false) => Err("a burst did not arrive within 2 s".into()),
        Err(e) => Err(format!("waiting for a burst: {e}")),
    }
}

/// Send `frames` from the plain socket `s` (the rx runs' sender).
fn blast(s: &PacketSocket, frames: &[Vec<u8>]) -> Res<()> {
    for chunk in frames.chunks(BATCH_MAX) {
        let refs: Vec<&[u8]> = chunk.iter().map(|f| &f[..]).collect();
        let mut at = 0;
        while at < refs.len() {
            at += s
                .send_batch(&refs[at..])
                .map_err(|e| format!("sendmmsg: {e}"))?;
        }
    }
    Ok(())
}

/// A plain socket on `name` with 4 MiB buffers.
fn socket(name: &str) -> Res<PacketSocket> {
    let s = PacketSocket::open(name, PROTO).map_err(|e| format!("socket on {name}: {e}"))?;
    unet_sys::set_socket_buffers(&s, 4 << 20);
    Ok(s)
}

fn port(name: &str) -> Res<PacketPort> {
    PacketPort::open(name, ring_cfg()).map_err(|e| format!("port on {name}: {e}"))
}

/// Frames per second of bursts sent from b and received on a, by a ring
/// port (`ring`) or a plain socket with `recvmmsg`, the only receiver on
/// a for the run: the median over `a.bursts` bursts.
fn rx_run(v: &Veth, sender: &PacketSocket, frames: &[Vec<u8>], a: &Args, ring: bool) -> Res<f64> {
    let mut per = Vec::with_capacity(a.bursts);
    let n = frames.len();
    if ring {
        let mut p = port(&v.a)?;
        let mut copy = vec![0u8; 2048];
        let fd = p.fd();
        per = ring_bursts(sender, frames, a.bursts, fd, |max| {
            p.recv(max, |f| copy[..f.len()].copy_from_slice(f))
        })?;
        let drops = p.counters().kernel_drops;
        if drops > 0 {
            return Err(format!("the ring dropped {drops} frames: lower --burst"));
        }
    } else {
        let s = socket(&v.a)?;
        let mut bufs = vec![vec![0u8; 2048]; BATCH_MAX];
        let mut lens = vec![0usize; BATCH_MAX];
        for _ in 0..a.bursts {
            let t0 = Instant::now();
            blast(sender, frames)?;
            drain_socket(&s, n, &mut bufs, &mut lens)?;
            per.push(n as f64 / t0.elapsed().as_secs_f64());
        }
        let drops = s.kernel_drops();
        if drops > 0 {
            return Err(format!("the socket dropped {drops} frames: lower --burst"));
        }
    }
    Ok(median_f64(&per))
}

/// Frames a second of each of `bursts` bursts of `frames` sent by
/// `sender` and taken by a ring receiver: `take(max)` takes at most `max`
/// waiting frames (copying each out) and says how many; the receiver
/// waits on `fd` when none did.
pub(super) fn ring_bursts(
    sender: &PacketSocket,
    frames: &[Vec<u8>],
    bursts: usize,
    fd: RawFd,
    mut take: impl FnMut(usize) -> usize,
) -> Res<Vec<f64>> {
    let n = frames.len();
    let mut per = Vec::with_capacity(bursts);
    for _ in 0..bursts {
        let t0 = Instant::now();
        blast(sender, frames)?;
        let mut got = 0;
        while got < n {
            let k = take(n - got);
            if k == 0 {
                wait_readable(fd)?;
            }
            got += k;
        }
        per.push(n as f64 / t0.elapsed().as_secs_f64());
    }
    Ok(per)
}

fn drain_socket(s: &PacketSocket, n: usize, bufs: &mut [Vec<u8>], lens: &mut [usize]) -> Res<()> {
    let mut got = 0;
    while got < n {
        let k = s
            .recv_batch(bufs, lens)
            .map_err(|e| format!("recvmmsg: {e}"))?;
        if k == 0 {
            wait_readable(s.fd())?;
        }
        got += k;
    }
    Ok(())
}

/// Frames per second sending bursts from b, by a ring port (`ring`:
/// flushed every [`BATCH_MAX`] frames) or with `sendmmsg` from the plain
/// socket `s`: the median over `a.bursts` bursts. Nothing on a takes them.
fn tx_run(v: &Veth, s: &PacketSocket, frames: &[Vec<u8>], a: &Args, ring: bool) -> Res<f64> {
    let mut per = Vec::with_capacity(a.bursts);
    let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
    let mut p = if ring { Some(port(&v.b)?) } else { None };
    for _ in 0..a.bursts {
        let t0 = Instant::now();
        if let Some(p) = p.as_mut() {
            for chunk in refs.chunks(BATCH_MAX) {
                for f in chunk {
                    while !p.send(f) {
                        // The ring is full: what it holds must leave first.
                        p.flush();
                        std::thread::yield_now();
                    }
                }
                p.flush();
            }
        } else {
            for chunk in refs.chunks(BATCH_MAX) {
                let mut at = 0;
                while at < chunk.len() {
                    at += s
                        .send_batch(&chunk[at..])
                        .map_err(|e| format!("sendmmsg: {e}"))?;
                }
            }
        }
        per.push(frames.len() as f64 / t0.elapsed().as_secs_f64());
    }
    Ok(median_f64(&per))
}

/// The rows, the latencies, and whether `AF_XDP` works here (the mode
/// its program attached in) or why not.
type Measured = (Vec<Row>, Vec<Latency>, Result<XdpMode, String>);

fn measure(a: &Args) -> Res<Measured> {
    let v = Veth::new()?;
    let sender = socket(&v.b)?;
    let mode = xdp::probe(&v, a);
    let with_xdp = mode.is_ok();
    let mut rows = Vec::new();
    for &size in &a.sizes {
        if !(60..=1514).contains(&size) {
            return Err(format!("frame size {size}: give 60 to 1514 bytes"));
        }
        let frames: Vec<Vec<u8>> = (0..a.burst as u32).map(|k| frame(size, k)).collect();
        for dir in ["rx", "tx"] {
            let (mut ring_runs, mut mmsg_runs, mut v3_runs) = (Vec::new(), Vec::new(), Vec::new());
            let mut xdp_runs = Vec::new();
            for _ in 0..a.reps {
                // Interleaved: the baseline, then the ring, each repetition.
                let run = if dir == "rx" { rx_run } else { tx_run };
                mmsg_runs.push(run(&v, &sender, &frames, a, false)?);
                ring_runs.push(run(&v, &sender, &frames, a, true)?);
                if dir == "rx" {
                    v3_runs.push(rx_run_v3(&v, &sender, &frames, a)?);
                }
                if with_xdp && dir == "rx" {
                    xdp_runs.push(xdp::rx_run(&v, &sender, &frames, a)?);
                } else if with_xdp {
                    xdp_runs.push(xdp::tx_run(&v, &frames, a)?);
                }
            }
            rows.push(Row {
                size,
                dir,
                ring: median_f64(&ring_runs),
                mmsg: median_f64(&mmsg_runs),
                ring_runs,
                mmsg_runs,
                v3: (!v3_runs.is_empty()).then(|| median_f64(&v3_runs)),
                xdp: with_xdp.then(|| median_f64(&xdp_runs)),
                xdp_runs,
            });
        }
    }
    let mut lat = Vec::new();
    for &size in &a.sizes {
        lat.push(latency(&v, &sender, size, a, with_xdp)?);
    }
    Ok((rows, lat, mode))
}

pub fn run(a: Args) -> ExitCode {
    finish(run_rows(&a))
}

/// What the run says of `AF_XDP`: how it ran, or why it did not.
fn xdp_note(mode: &Result<XdpMode, String>) -> (Value, String) {
    match mode {
        Ok(m) => {
            let (name, how) = match m {
                XdpMode::Native => ("native", "in the driver's own XDP path"),
                XdpMode::Generic => ("generic", "in generic (SKB) mode"),
            };
            let j = json!({"bench": "raw_port_xdp", "available": true,
                           "bind": "copy", "attach": name});
            (j, format!("AF_XDP: copy mode, its program attached {how}"))
        }
        Err(e) => {
            let j = json!({"bench": "raw_port_xdp", "available": false, "error": e});
            (j, format!("AF_XDP: not measured: {e}"))
        }
    }
}

fn opt_mfps(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{:.3}", x / 1e6))
}

fn run_rows(a: &Args) -> Res<()> {
    if a.burst == 0 || a.burst > 1024 || a.bursts == 0 || a.reps == 0 {
        return Err("give --burst 1 to 1024, and --bursts and --reps of 1 or more".into());
    }
    warn_if_busy();
    let (rows, lat, mode) = measure(a)?;
    let (note_json, note) = xdp_note(&mode);
    if a.json {
        println!("{note_json}");
    } else {
        println!("{note}");
        println!(
            "{:>6} {:>4} {:>14} {:>14} {:>10} {:>12} {:>12} {:>9}",
            "size", "dir", "ring Mfps", "mmsg Mfps", "ring/mmsg", "V3 Mfps", "XDP Mfps", "XDP/ring"
        );
    }
    for r in &rows {
        if a.json {
            println!("{}", r.json());
        } else {
            println!(
                "{:>6} {:>4} {:>14.3} {:>14.3} {:>10.2} {:>12} {:>12} {:>9}",
                fmt_size(r.size),
                r.dir,
                r.ring / 1e6,
                r.mmsg / 1e6,
                r.ring / r.mmsg,
                opt_mfps(r.v3),
                opt_mfps(r.xdp),
                r.xdp.map_or("-".into(), |x| format!("{:.2}", x / r.ring))
            );
        }
    }
    if !a.json {
        println!(
            "{:>6} {:>14} {:>14} {:>14} {:>14}",
            "size", "lone V2 us", "lone V3 us", "lone mmsg us", "lone XDP us"
        );
    }
    for l in &lat {
        if a.json {
            println!("{}", l.json());
        } else {
            println!(
                "{:>6} {:>14.1} {:>14.1} {:>14.1} {:>14}",
                fmt_size(l.size),
                l.v2_us,
                l.v3_us,
                l.mmsg_us,
                l.xdp_us.map_or("-".into(), |x| format!("{x:.1}"))
            );
        }
    }
    Ok(())
}
