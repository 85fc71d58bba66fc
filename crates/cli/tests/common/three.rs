//! Three network namespaces for the tests of SPINE's raw-frame ports and
//! router: hosts `h1` and `h2`, each joined by a veth pair to a namespace
//! `r` where an engine's adapter owns the pairs' other ends (`r1`, `r2`);
//! deleted on drop. The hosts' veths send no segment larger than a frame
//! (`gso_max_segs 1`): a port's ring slot holds one frame. Also what both
//! tests do through them: `ping`, and a TCP transfer of a known pattern
//! whose receiving end reports its length and hash. Needs root and `ip`;
//! fails, never skips.

use std::hash::Hasher;
use std::io::Read;
use std::net::TcpListener;
use std::process::Command;

use super::hosts::ip;
use super::{fail, say};

/// The namespaces and the veths (see the module documentation).
pub struct Three {
    pub h1: String,
    pub h2: String,
    pub r: String,
    /// The adapter's ends, in `r`.
    pub r1: String,
    pub r2: String,
    /// The hosts' ends.
    pub h1v: String,
    pub h2v: String,
}

impl Three {
    /// Names made unique by `tag` (one letter) and this process; `c1` and
    /// `c2` the hosts' addresses with their prefix length; `macs`, if
    /// given, the hosts' MACs.
    pub fn new(tag: &str, c1: &str, c2: &str, macs: Option<[&str; 2]>) -> Three {
        let pid = std::process::id();
        let t = Three {
            h1: format!("unet-{tag}h1-{pid}"),
            h2: format!("unet-{tag}h2-{pid}"),
            r: format!("unet-{tag}r-{pid}"),
            r1: format!("{tag}r1{pid}"),
            r2: format!("{tag}r2{pid}"),
            h1v: format!("{tag}h1{pid}"),
            h2v: format!("{tag}h2{pid}"),
        };
        for ns in [&t.h1, &t.h2, &t.r] {
            let _ = ip(&["netns", "del", ns]);
        }
        if let Err(e) = ip(&["netns", "add", &t.r]) {
            panic!("cannot create a network namespace ({e}); this test needs root");
        }
        let (h1, h2, r) = (&t.h1, &t.h2, &t.r);
        let (h1v, h2v, r1, r2) = (&t.h1v, &t.h2v, &t.r1, &t.r2);
        let mut steps: Vec<Vec<&str>> = vec![
            vec!["netns", "add", h1],
            vec!["netns", "add", h2],
            vec!["link", "add", h1v, "type", "veth", "peer", "name", r1],
            vec!["link", "add", h2v, "type", "veth", "peer", "name", r2],
            vec!["link", "set", h1v, "netns", h1],
            vec!["link", "set", h2v, "netns", h2],
            vec!["link", "set", r1, "netns", r],
            vec!["link", "set", r2, "netns", r],
        ];
        if let Some([m1, m2]) = macs {
            steps.push(vec!["-n", h1, "link", "set", h1v, "address", m1]);
            steps.push(vec!["-n", h2, "link", "set", h2v, "address", m2]);
        }
        steps.extend([
            vec!["-n", h1, "addr", "add", c1, "dev", h1v],
            vec!["-n", h2, "addr", "add", c2, "dev", h2v],
            // A segment is one frame: no TSO/GSO super-frames.
            vec!["-n", h1, "link", "set", h1v, "gso_max_segs", "1"],
            vec!["-n", h2, "link", "set", h2v, "gso_max_segs", "1"],
            vec!["-n", h1, "link", "set", h1v, "up"],
            vec!["-n", h2, "link", "set", h2v, "up"],
            vec!["-n", r, "link", "set", r1, "up"],
            vec!["-n", r, "link", "set", r2, "up"],
        ]);
        for s in &steps {
            ip(s).unwrap_or_else(|e| panic!("setting up the three namespaces: {e}"));
        }
        t
    }
}

impl Drop for Three {
    fn drop(&mut self) {
        for ns in [&self.h1, &self.h2, &self.r] {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// `ping` from namespace `ns` to `to`, `count` echoes 0.2 s apart:
/// whether every one came back within 10 s (a single echo: within 1 s).
/// The neighbour entries of `ns` are flushed first, so that an address
/// resolution left from an earlier ping does not hold the echoes back.
pub fn ping(ns: &str, to: &str, count: u32) -> (bool, String) {
    ip(&["-n", ns, "neigh", "flush", "all"]).expect("flushing the neighbours");
    let wait = if count == 1 { "1" } else { "10" };
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ping", "-c", &count.to_string()])
        .args(["-i", "0.2", "-w", wait, to])
        .output()
        .expect("ip netns exec");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        !text.contains("No such file") && !text.contains("not found"),
        "`ping` is missing: install iputils-ping (e.g. `apt-get install -y iputils-ping`): {text}"
    );
    (out.status.success(), text)
}

/// Byte `i` of a TCP transfer.
pub fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

/// What [`tcp_server`] says (`GOT` aside) for the first `n` bytes of the
/// pattern: their length and hash.
pub fn pattern_report(n: usize) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let data: Vec<u8> = (0..n).map(pattern).collect();
    h.write(&data);
    format!("{n} {:016x}", h.finish())
}

/// A child's TCP client: connects to `UNET_TO` on `port`, sends the
/// first `n` bytes of the pattern, and says `SENT`.
pub fn tcp_client(port: u16, n: usize) {
    let to = super::env("UNET_TO");
    let mut c = std::net::TcpStream::connect((to.as_str(), port))
        .unwrap_or_else(|e| fail(&format!("connect: {e}")));
    let data: Vec<u8> = (0..n).map(pattern).collect();
    std::io::Write::write_all(&mut c, &data).unwrap_or_else(|e| fail(&format!("write: {e}")));
    say("SENT");
}

/// A child's TCP server on `port`: says `LISTENING`, takes one
/// connection, reads it to its end and says `GOT <bytes> <hash>`.
pub fn tcp_server(port: u16) {
    let l = TcpListener::bind(("0.0.0.0", port)).unwrap_or_else(|e| fail(&format!("bind: {e}")));
    say("LISTENING");
    let (mut c, _) = l.accept().unwrap_or_else(|e| fail(&format!("accept: {e}")));
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let (mut n, mut buf) = (0usize, vec![0u8; 1 << 16]);
    loop {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => {
                h.write(&buf[..k]);
                n += k;
            }
            Err(e) => fail(&format!("read: {e}")),
        }
    }
    say(&format!("GOT {n} {:016x}", h.finish()));
}
