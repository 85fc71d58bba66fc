//! The forwarding benchmark's network: three namespaces, a sending host
//! `h1`, the router's `r` and a receiving host `h2`, joined by two veth
//! pairs (`h1`'s end to `r1`, `r2` to `h2`'s end), deleted on drop; the
//! packet generator that runs in `h1`; and the count of what reaches `h2`.
//!
//! - The hosts' kernels only take part as a wire's ends do: IPv6 is off
//!   everywhere (no neighbour discovery or router solicitations in the
//!   counts), neighbours are static, and `h2`, which forwards nothing,
//!   drops every packet it is sent (none is for its own address) without
//!   an answer (a host with forwarding off sends no ICMP for a packet
//!   that is not its own).
//! - **The generator** is a port on `h1`'s end
//!   (`unet_sys::packet::PacketPort`) that sends over a transmit-only
//!   `AF_XDP` socket where the kernel gives one, else over its
//!   `TPACKET_V2` transmit ring ([`Generator`]), on a thread of this
//!   process moved into `h1` (`setns`) and pinned to core 0: frames taken
//!   in turn from a pool of prepared IPv4/UDP frames (one per
//!   destination, checksums done), placed on the socket's ring in batches
//!   of up to 64 and sent with one flush a batch, each batch when a clock
//!   says it is due for the rate asked (or at once: as fast as it can).
//!   `AF_XDP` sends about 1.4 times as many frames a second from one core
//!   as the ring, whose frames veth copies again into pages of its own
//!   (`unet_sys::packet::xdp::XdpTx`), so that fewer forwarders are bound
//!   by the generator.
//! - **The count**: the `rx_packets` of `h2`'s end (read from
//!   `/proc/thread-self/net/dev` on a thread moved into `h2`): veth counts
//!   a frame there as it hands it to `h2`, so it is what the router put on
//!   the wire towards `h2`.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::Command as Cmd;
use std::time::{Duration, Instant};

use unet_sys::packet::{PacketPort, RingConfig, TxPath};

use super::Res;

/// The hosts' MACs (`h1`'s, `h2`'s).
pub const MAC1: [u8; 6] = [0x02, 0, 0, 0x79, 0, 2];
pub const MAC2: [u8; 6] = [0x02, 0, 0, 0x80, 0, 2];
/// The MAC the next hops are at with [`Sink::Wire`]: one `h2` does not
/// own.
pub const MAC_WIRE: [u8; 6] = [0x02, 0, 0, 0x80, 0, 0xfe];
/// The MACs of the router's ports with [`PortMacs::Own`] (`r1`'s, `r2`'s).
pub const MAC_P1: [u8; 6] = [0x02, 0, 0, 0x79, 0, 0x0a];
pub const MAC_P2: [u8; 6] = [0x02, 0, 0, 0x80, 0, 0x0a];
/// The router side's MACs (`r1`, `r2`).
pub const MAC_R1: [u8; 6] = [0x02, 0, 0, 0x79, 0, 1];
pub const MAC_R2: [u8; 6] = [0x02, 0, 0, 0x80, 0, 1];
/// An ethertype the generator's ring is bound to receive: no frame
/// carries it, so its receive ring stays empty.
const QUIET_PROTO: u16 = 0x88B5;
/// Frames a batch (one `send`).
pub const BATCH: usize = 64;

/// `ip ARGS`, its error text on failure.
pub fn ip(args: &[&str]) -> Res<()> {
    run("ip", args)
}

/// A command's error text on failure.
pub fn run(cmd: &str, args: &[&str]) -> Res<()> {
    let out = Cmd::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `{cmd}` ({e}): install iproute2"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{cmd} {}` failed (the forwarding bench needs root): {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Wait (at most 10 s) until interface `dev` of namespace `ns` says its
/// state is up.
fn wait_up(ns: &str, dev: &str) -> Res<()> {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let out = Cmd::new("ip")
            .args(["-n", ns, "-o", "link", "show", "dev", dev])
            .output()
            .map_err(|e| format!("cannot run `ip` ({e})"))?;
        if String::from_utf8_lossy(&out.stdout).contains(" state UP ") {
            return Ok(());
        }
        if Instant::now() >= end {
            return Err(format!("{dev} in {ns} did not come up"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `sysctl -w KEY=VALUE` in namespace `ns`.
pub fn sysctl(ns: &str, kv: &str) -> Res<()> {
    run("ip", &["netns", "exec", ns, "sysctl", "-q", "-w", kv])
}

fn mac_text(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// What `h2` does with the frames the router sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Sink {
    /// The next hops are at a MAC `h2` does not own, so its kernel drops
    /// each frame at the door (`ip_rcv` discards a frame for another
    /// host before any lookup), as the far end of a wire takes a frame
    /// at no cost to the sender. On veth the receiver's work runs in the
    /// sender's system call, on the sender's core: with a host sink that
    /// core pays `h2`'s IP input (a route lookup and the drop of a packet
    /// not for it) on top of forwarding.
    Wire,
    /// The next hops are at `h2`'s own MAC: its IP stack takes each
    /// packet (and drops it: none is for its address).
    Host,
}

/// Which MACs the router's ports use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PortMacs {
    /// MACs of their own (`unet router run --port-mac`), as an adapter
    /// owning its port would: `r`'s kernel sees the frames sent to the
    /// router as for another host and drops them at the door.
    Own,
    /// The interfaces' own MACs: `r`'s kernel also takes every frame sent
    /// to the router through its IP input (and drops it: `r` does not
    /// forward) on the generator's core.
    Kernel,
}

/// The three namespaces and their veths (module documentation).
pub struct Lab {
    pub h1: String,
    pub r: String,
    pub h2: String,
    pub h1v: String,
    pub r1: String,
    pub r2: String,
    pub h2v: String,
    /// The subnets' third octet (`10.79.n.0/24` for `h1`, `10.80.n.0/24`
    /// for `h2`).
    pub n: u32,
    pub sink: Sink,
    pub port_macs: PortMacs,
}

impl Lab {
    pub fn new(sink: Sink, port_macs: PortMacs) -> Res<Lab> {
        let pid = std::process::id();
        let n = pid % 250 + 1;
        let l = Lab {
            h1: format!("unet-fh1-{pid}"),
            r: format!("unet-fr-{pid}"),
            h2: format!("unet-fh2-{pid}"),
            h1v: format!("fh1{pid}"),
            r1: format!("fr1{pid}"),
            r2: format!("fr2{pid}"),
            h2v: format!("fh2{pid}"),
            n,
            sink,
            port_macs,
        };
        ip(&["netns", "add", &l.r])?;
        let (h1, r, h2) = (&l.h1, &l.r, &l.h2);
        let (h1v, r1, r2, h2v) = (&l.h1v, &l.r1, &l.r2, &l.h2v);
        let (m1, m2, mr1, mr2) = (
            mac_text(&MAC1),
            mac_text(&MAC2),
            mac_text(&MAC_R1),
            mac_text(&MAC_R2),
        );
        for s in [
            vec!["netns", "add", h1],
            vec!["netns", "add", h2],
            vec!["link", "add", h1v, "type", "veth", "peer", "name", r1],
            vec!["link", "add", h2v, "type", "veth", "peer", "name", r2],
            vec!["link", "set", h1v, "netns", h1],
            vec!["link", "set", h2v, "netns", h2],
            vec!["link", "set", r1, "netns", r],
            vec!["link", "set", r2, "netns", r],
        ] {
            ip(&s)?;
        }
        for ns in [h1, r, h2] {
            sysctl(ns, "net.ipv6.conf.all.disable_ipv6=1")?;
            sysctl(ns, "net.ipv6.conf.default.disable_ipv6=1")?;
            sysctl(ns, "net.ipv4.conf.all.rp_filter=0")?;
            sysctl(ns, "net.ipv4.conf.default.rp_filter=0")?;
        }
        let a1 = format!("10.79.{n}.2/24");
        let a2 = format!("10.80.{n}.2/24");
        for s in [
            vec!["-n", h1, "link", "set", h1v, "address", &m1],
            vec!["-n", h2, "link", "set", h2v, "address", &m2],
            vec!["-n", r, "link", "set", r1, "address", &mr1],
            vec!["-n", r, "link", "set", r2, "address", &mr2],
            vec!["-n", h1, "addr", "add", &a1, "dev", h1v],
            vec!["-n", h2, "addr", "add", &a2, "dev", h2v],
            vec!["-n", h1, "link", "set", h1v, "up"],
            vec!["-n", h2, "link", "set", h2v, "up"],
            vec!["-n", r, "link", "set", r1, "up"],
            vec!["-n", r, "link", "set", r2, "up"],
        ] {
            ip(&s)?;
        }
        // Until the kernel's link watch has seen the carrier (later, on a
        // worker), an interface's queue discipline drops what is sent.
        for (ns, dev) in [(h1, h1v), (r, r1), (r, r2), (h2, h2v)] {
            wait_up(ns, dev)?;
        }
        Ok(l)
    }

    /// `h1`'s address.
    pub fn addr1(&self) -> u32 {
        u32::from_be_bytes([10, 79, self.n as u8, 2])
    }

    /// The router's addresses on the two subnets.
    pub fn gw1(&self) -> String {
        format!("10.79.{}.1", self.n)
    }

    pub fn gw2(&self) -> String {
        format!("10.80.{}.1", self.n)
    }

    /// Next hop `k` (0..NEXT_HOPS) on `h2`'s subnet: `h2` itself and
    /// addresses beside it, all at `h2`'s MAC.
    pub fn next_hop(&self, k: u32) -> String {
        format!("10.80.{}.{}", self.n, 2 + k)
    }

    /// The MAC the next hops on `h2`'s subnet are at (see [`Sink`]).
    pub fn next_hop_mac(&self) -> [u8; 6] {
        match self.sink {
            Sink::Wire => MAC_WIRE,
            Sink::Host => MAC2,
        }
    }

    /// The MACs the router's ports use (`r1`'s, `r2`'s), if not the
    /// interfaces' own.
    pub fn router_port_macs(&self) -> Option<([u8; 6], [u8; 6])> {
        (self.port_macs == PortMacs::Own).then_some((MAC_P1, MAC_P2))
    }

    /// The MAC `h1` sends to: the router's port on `r1` for SPINE's
    /// router (`unet`), `r1`'s own for Linux.
    pub fn gateway_mac(&self, unet: bool) -> [u8; 6] {
        match self.router_port_macs() {
            Some((p1, _)) if unet => p1,
            _ => MAC_R1,
        }
    }

    /// What `h2`'s end has received so far.
    pub fn delivered(&self) -> Res<u64> {
        let dev = self.h2v.clone();
        in_netns(&self.h2, move || {
            let t = std::fs::read_to_string("/proc/thread-self/net/dev")
                .map_err(|e| format!("/proc/thread-self/net/dev: {e}"))?;
            rx_packets(&t, &dev)
        })?
    }

    /// Wait until `h2`'s count stops moving (the last frames through),
    /// at most a second: the count then.
    pub fn settled(&self) -> Res<u64> {
        let end = Instant::now() + Duration::from_secs(1);
        let mut last = self.delivered()?;
        loop {
            std::thread::sleep(Duration::from_millis(20));
            let now = self.delivered()?;
            if now == last || Instant::now() >= end {
                return Ok(now);
            }
            last = now;
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in [&self.h1, &self.h2, &self.r] {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// `rx_packets` of `dev` in a `/proc/net/dev` text.
fn rx_packets(t: &str, dev: &str) -> Res<u64> {
    for line in t.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        if name.trim() == dev {
            return rest
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("/proc/net/dev: no rx_packets for {dev}"));
        }
    }
    Err(format!("/proc/net/dev has no {dev}"))
}

/// Run `f` on a thread of its own moved into network namespace `ns`.
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> Res<T> {
    let path = format!("/run/netns/{ns}");
    let file = File::open(&path).map_err(|e| format!("{path}: {e}"))?;
    std::thread::spawn(move || {
        // SAFETY: setns on an open namespace file moves this thread only
        // (CLONE_NEWNET), which is ours and ends when `f` returns.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(format!(
                "entering namespace {path}: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(f())
    })
    .join()
    .map_err(|_| "a namespace thread panicked".to_string())?
}

/// An IPv4 header's checksum.
fn ip_checksum(h: &[u8]) -> u16 {
    let mut s: u32 = h
        .chunks_exact(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// An Ethernet frame `h1` sends the router at MAC `to`: an IPv4 packet
/// of `len` bytes (20 to 1500) from `src` to `dst`, UDP to port 9 with no
/// checksum, TTL 64.
pub fn frame(len: usize, src: u32, dst: u32, seq: u32, to: [u8; 6]) -> Vec<u8> {
    let len = len.clamp(28, 1500);
    let mut f = vec![0u8; 14 + len];
    f[0..6].copy_from_slice(&to);
    f[6..12].copy_from_slice(&MAC1);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let h = &mut f[14..34];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    h[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
    h[8] = 64;
    h[9] = 17;
    h[12..16].copy_from_slice(&src.to_be_bytes());
    h[16..20].copy_from_slice(&dst.to_be_bytes());
    let c = ip_checksum(h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    let u = &mut f[34..42];
    u[0..2].copy_from_slice(&(1024 + (seq % 4096) as u16).to_be_bytes());
    u[2..4].copy_from_slice(&9u16.to_be_bytes());
    u[4..6].copy_from_slice(&((len - 20) as u16).to_be_bytes());
    f
}

/// How the generator sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Generator {
    /// A transmit-only `AF_XDP` socket where the kernel gives one, else
    /// the transmit ring.
    Auto,
    /// A transmit-only `AF_XDP` socket, or an error.
    Xdp,
    /// The port's `TPACKET_V2` transmit ring.
    Ring,
}

impl Generator {
    /// The name of the way a run sent (`Sent::path`).
    pub fn path_name(p: TxPath) -> &'static str {
        match p {
            TxPath::Xdp => "af_xdp",
            TxPath::Ring => "tx_ring",
        }
    }
}

/// What a generator run did.
#[derive(Clone, Copy, Debug)]
pub struct Sent {
    pub frames: u64,
    pub secs: f64,
    /// How it sent.
    pub path: TxPath,
}

impl Sent {
    pub fn rate(&self) -> f64 {
        self.frames as f64 / self.secs.max(1e-9)
    }
}

/// Send `n` frames of `pool` (in turn) out of `h1`'s end at `rate`
/// frames a second (0: as fast as the socket goes), `batch` (1 to
/// [`BATCH`]) a flush, the way `how` says, from a thread in `h1` pinned
/// to core 0.
pub fn generate(
    lab: &Lab,
    pool: std::sync::Arc<Vec<Vec<u8>>>,
    n: u64,
    rate: f64,
    batch: usize,
    how: Generator,
) -> Res<Sent> {
    let batch = batch.clamp(1, BATCH);
    let dev = lab.h1v.clone();
    in_netns(&lab.h1, move || -> Res<Sent> {
        super::super::child::pin_to(0)?;
        let cfg = |tx| RingConfig {
            frame_size: 2048,
            rx_frames: 16,
            tx_frames: 1024,
            protocol: QUIET_PROTO,
            tx,
        };
        let open = |tx| {
            PacketPort::open(&dev, cfg(tx)).map_err(|e| format!("a generator port on {dev}: {e}"))
        };
        let mut port = match how {
            Generator::Auto => open(TxPath::Xdp).or_else(|_| open(TxPath::Ring))?,
            Generator::Xdp => open(TxPath::Xdp)?,
            Generator::Ring => open(TxPath::Ring)?,
        };
        let path = port.tx_path();
        let (mut sent, mut k) = (0u64, 0usize);
        let t0 = Instant::now();
        while sent < n {
            if rate > 0.0 {
                let due = t0 + Duration::from_secs_f64(sent as f64 / rate);
                loop {
                    let now = Instant::now();
                    if now >= due {
                        break;
                    }
                    if due - now > Duration::from_micros(200) {
                        std::thread::sleep(due - now - Duration::from_micros(100));
                    } else {
                        std::hint::spin_loop();
                    }
                }
            }
            let m = (batch as u64).min(n - sent) as usize;
            for _ in 0..m {
                // A full ring: the kernel still holds its slots.
                while !port.send(&pool[k]) {
                    port.flush();
                    std::thread::yield_now();
                }
                k = (k + 1) % pool.len();
            }
            port.flush();
            sent += m as u64;
        }
        let secs = t0.elapsed().as_secs_f64();
        // What is still on the ring goes before the port closes.
        let end = Instant::now() + Duration::from_secs(1);
        while port.tx_in_flight() > 0 && Instant::now() < end {
            port.flush();
            std::thread::yield_now();
        }
        let c = port.counters();
        if c.tx_refused > 0 || c.tx_bad_len > 0 {
            return Err(format!(
                "the kernel refused {} frames ({} bad lengths)",
                c.tx_refused, c.tx_bad_len
            ));
        }
        Ok(Sent {
            frames: sent,
            secs,
            path,
        })
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_frame_has_a_good_header_checksum_and_its_length() {
        let f = frame(64, 0x0a4f0102, 0x01020304, 7, MAC_R1);
        assert_eq!(f.len(), 78);
        assert_eq!(ip_checksum(&f[14..34]), 0);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 64);
        let g = frame(1500, 1, 2, 3, MAC_R1);
        assert_eq!(g.len(), 1514);
    }

    #[test]
    fn rx_packets_is_read_from_net_dev() {
        let t = "Inter-|   Receive\n face |bytes    packets errs\n    lo: 0 0 0 0\n  fh2: 1500 12 0 0 0\n";
        assert_eq!(rx_packets(t, "fh2").unwrap(), 12);
        assert!(rx_packets(t, "x").is_err());
    }
}
