//! Two hosts for the tests that need them: two network namespaces joined
//! by a veth pair, a `unet daemon` with a UDP wire in each. Needs root
//! (CAP_NET_ADMIN) and `ip` from iproute2; fails, never skips, when either
//! is missing.

use std::process::Command;

use super::Daemon;

/// The UDP port of each host's daemon.
pub const PORT: u16 = 7700;

/// The daemon arguments that impair what a daemon sends on its wire: 5 %
/// loss, 1 % duplication and 1 % reordering of its data-path datagrams,
/// from `seed`.
#[allow(dead_code)] // not every test binary impairs its wire
pub fn impaired(seed: &str) -> [&str; 8] {
    [
        "--drop-ppm",
        "50000",
        "--dup-ppm",
        "10000",
        "--reorder-ppm",
        "10000",
        "--drop-seed",
        seed,
    ]
}

/// Two namespaces joined by a veth pair; deleted on drop.
pub struct Hosts {
    pub a: String,
    pub b: String,
    pub addr_a: String,
    pub addr_b: String,
    /// The second octet of the hosts' 10.N.0.0/16 network.
    net: u8,
}

pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            "the `ip` command is missing: install iproute2 \
             (e.g. `apt-get install -y iproute2`) to run the two-host tests"
                .to_string()
        } else {
            format!("cannot run ip: {e}")
        }
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Hosts {
    /// Two hosts on 10.`net`.x.0/24 (x from the pid and `k`, so that
    /// tests running at once do not meet), named after `tag`.
    pub fn new(net: u8, tag: &str, k: u32) -> Hosts {
        let pid = std::process::id();
        let n = (pid % 100) * 2 + k;
        let h = Hosts {
            a: format!("unet-a-{pid}-{tag}"),
            b: format!("unet-b-{pid}-{tag}"),
            addr_a: format!("10.{net}.{n}.1"),
            addr_b: format!("10.{net}.{n}.2"),
            net,
        };
        let (va, vb) = (format!("ua{tag}{pid}"), format!("ub{tag}{pid}"));
        // Left over from a crashed run with the same pid.
        let _ = ip(&["netns", "del", &h.a]);
        let _ = ip(&["netns", "del", &h.b]);
        if let Err(e) = ip(&["netns", "add", &h.a]) {
            panic!(
                "cannot create a network namespace ({e}); these tests need root \
                 (CAP_NET_ADMIN and CAP_SYS_ADMIN) to build their two hosts"
            );
        }
        let steps: Vec<Vec<&str>> = vec![
            vec!["netns", "add", &h.b],
            vec!["link", "add", &va, "type", "veth", "peer", "name", &vb],
            vec!["link", "set", &va, "netns", &h.a],
            vec!["link", "set", &vb, "netns", &h.b],
        ];
        for s in &steps {
            ip(s).unwrap_or_else(|e| panic!("setting up the two hosts: {e}"));
        }
        let cidr_a = format!("{}/24", h.addr_a);
        let cidr_b = format!("{}/24", h.addr_b);
        for (ns, dev, cidr) in [(&h.a, &va, &cidr_a), (&h.b, &vb, &cidr_b)] {
            for s in [
                vec!["-n", ns, "addr", "add", cidr, "dev", dev],
                vec!["-n", ns, "link", "set", dev, "up"],
                vec!["-n", ns, "link", "set", "lo", "up"],
            ] {
                ip(&s).unwrap_or_else(|e| panic!("setting up the two hosts: {e}"));
            }
        }
        h
    }

    /// A daemon in namespace `ns` with its UDP wire on `PORT`, taking
    /// opens from the hosts' network, with `extra` arguments.
    pub fn wire(&self, ns: &str, extra: &[&str]) -> Daemon {
        let addr = if ns == self.a {
            &self.addr_a
        } else {
            &self.addr_b
        };
        let udp = format!("{addr}:{PORT}");
        let net = format!("10.{}.0.0/16", self.net);
        let mut args = vec!["--udp", &udp, "--allow-peer", &net];
        args.extend_from_slice(extra);
        let d = Daemon::start_in(Some(ns), &args);
        assert_eq!(d.udp.map(|u| u.to_string()), Some(udp.clone()));
        d
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.a]);
        let _ = ip(&["netns", "del", &self.b]);
    }
}
