//! The router tests' set-up: the three namespaces of `three.rs` with the
//! hosts on two subnets routed through `r` (the router's addresses as
//! their gateways), the table files they load, and `unet router stat`
//! read as JSON.

use std::path::Path;

use serde_json::Value;

use super::hosts::ip;
use super::three::Three;
use super::{command_in, unet_bin};

/// The router's first handler number.
pub const HANDLERS: &str = "300";

/// The hosts' MACs.
pub const MAC1: &str = "02:00:00:79:00:02";
pub const MAC2: &str = "02:00:00:80:00:02";

/// The three namespaces, the hosts on two subnets with the router's
/// addresses as their gateways.
pub struct Routed {
    pub ns: Three,
    /// The hosts' addresses and the router's on each subnet.
    pub addr1: String,
    pub addr2: String,
    pub gw1: String,
    pub gw2: String,
    /// An address of a network behind `h2` (on its loopback), reached
    /// only through the table's route to that network, which the
    /// table's versions cut differently.
    pub far: String,
    /// The subnets' third octet.
    pub n: u32,
}

impl std::ops::Deref for Routed {
    type Target = Three;
    fn deref(&self) -> &Three {
        &self.ns
    }
}

impl Routed {
    /// The namespaces, their names made unique by `tag` (one letter) and
    /// this process.
    pub fn new(tag: &str) -> Routed {
        let n = std::process::id() % 250 + 1;
        let (addr1, addr2) = (format!("10.79.{n}.2"), format!("10.80.{n}.2"));
        let ns = Three::new(
            tag,
            &format!("{addr1}/24"),
            &format!("{addr2}/24"),
            Some([MAC1, MAC2]),
        );
        let b = Routed {
            ns,
            addr1,
            addr2,
            gw1: format!("10.79.{n}.1"),
            gw2: format!("10.80.{n}.1"),
            far: format!("10.90.{n}.2"),
            n,
        };
        for s in [
            vec!["-n", &b.h2, "link", "set", "lo", "up"],
            vec![
                "-n",
                &b.h2,
                "addr",
                "add",
                &format!("{}/32", b.far),
                "dev",
                "lo",
            ],
        ] {
            ip(&s).unwrap_or_else(|e| panic!("setting up the network behind h2: {e}"));
        }
        for (h, gw) in [(&b.h1, &b.gw1), (&b.h2, &b.gw2)] {
            ip(&["-n", h, "route", "add", "default", "via", gw])
                .unwrap_or_else(|e| panic!("setting up the routed hosts: {e}"));
        }
        b
    }

    /// A table file of the hosts' subnets alone: the network behind `h2`
    /// has no route.
    pub fn subnets(&self) -> String {
        let (n, a1, a2) = (self.n, &self.addr1, &self.addr2);
        format!("# the hosts' subnets\n10.79.{n}.0/24 {a1}\n10.80.{n}.0/24 {a2} 1\n")
    }

    /// A table file: the hosts' subnets through them and the network
    /// behind `h2` through `h2` (with `split`, each as its two halves, the
    /// far one's lower half cut again), and `filler` generated routes
    /// spread over both (none covers the subnets).
    pub fn table(&self, filler: usize, seed: u64, split: bool) -> String {
        let (n, a1, a2) = (self.n, &self.addr1, &self.addr2);
        let mut t = if split {
            format!(
                "# the hosts' subnets, in halves\n10.79.{n}.0/25 {a1}\n10.79.{n}.128/25 {a1}\n\
                 10.80.{n}.0/25 {a2} 1\n10.80.{n}.128/25 {a2} 1\n\
                 # the network behind h2, in three\n10.90.{n}.0/26 {a2} 1\n\
                 10.90.{n}.64/26 {a2} 1\n10.90.{n}.128/25 {a2} 1\n"
            )
        } else {
            self.subnets() + &format!("# the network behind h2\n10.90.{n}.0/24 {a2} 1\n")
        };
        for r in unet_router::table::generated(filler, seed, 2) {
            if r.prefix >> 24 == 10 {
                continue;
            }
            let via = if r.next_hop == 0 {
                &self.addr1
            } else {
                &self.addr2
            };
            let p = std::net::Ipv4Addr::from(r.prefix);
            t += &format!("{p}/{} {via}\n", r.len);
        }
        t
    }
}

/// `unet spine ports --json` of the daemon at `socket`: frames out of
/// each port.
pub fn frames_out(socket: &Path) -> Vec<u64> {
    let out = std::process::Command::new(unet_bin())
        .args(["spine", "ports", "--json", "--socket"])
        .arg(socket)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["frames_out"].as_u64().unwrap())
        .collect()
}

/// `unet router run` in `r` on the adapters at `sockets` with the table
/// file `table` and the extension `class`: a port on each subnet (with
/// two adapters, one on each), h1's MAC given, h2's to resolve.
pub fn router_run(
    b: &Routed,
    sockets: &[&Path],
    table: &Path,
    class: &Path,
) -> std::process::Command {
    let mut cmd = command_in(Some(&b.r), unet_bin());
    cmd.args(["router", "run"]);
    for s in sockets {
        cmd.arg("--socket").arg(s);
    }
    let at = if sockets.len() > 1 { "@1" } else { "" };
    let at0 = if sockets.len() > 1 { "@0" } else { "" };
    cmd.arg("--table")
        .arg(table)
        .arg("--class")
        .arg(class)
        .args(["--handlers", HANDLERS])
        .args(["--port", &format!("{}={}/24{at0}", b.r1, b.gw1)])
        .args(["--port", &format!("{}={}/24{at}", b.r2, b.gw2)])
        .args(["--neighbour", &format!("{}={MAC1}", b.addr1)]);
    cmd
}

/// `unet router stat --json`, run in `ns`.
pub fn router_stat(ns: &str, socket: &std::path::Path) -> Value {
    let out = command_in(Some(ns), unet_bin())
        .args([
            "router",
            "stat",
            "--json",
            "--handlers",
            HANDLERS,
            "--socket",
        ])
        .arg(socket)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn num(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// The drop counters of a `router stat` but `unconfigured` (frames the
/// hosts' kernels sent, IPv6 router solicitations for instance, before
/// the router had configured its ports).
pub fn drops(v: &Value) -> u64 {
    v["drops"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "unconfigured")
        .map(|(_, x)| x.as_u64().unwrap())
        .sum()
}

/// `unet router stat --json` of several adapters, run in `ns`: one
/// object an adapter, in the order of `sockets`.
pub fn router_stats(ns: &str, sockets: &[&Path]) -> Vec<Value> {
    let mut cmd = command_in(Some(ns), unet_bin());
    cmd.args(["router", "stat", "--json", "--handlers", HANDLERS]);
    for s in sockets {
        cmd.arg("--socket").arg(s);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array().expect("a list of adapters").clone()
}
