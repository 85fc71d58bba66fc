//! SPINE's raw-frame ports with real kernel traffic: two hosts (network
//! namespaces h1 and h2), each joined by a veth pair to a third namespace
//! where a `unet daemon` runs; the daemon's adapter has a port on each
//! veth end there and the `PortBridge` extension (a frame in on one port
//! goes out of the other). The hosts' kernels ping each other through it
//! (their ARP and ICMP, both ways) and carry a TCP transfer of a known
//! pattern through it, checked by hash (the hosts' veths send no
//! segments larger than a frame: `gso_max_segs 1`), and `unet spine
//! ports` shows the frames on both ports, with no drop. The ports send
//! over `AF_XDP` by default (`--spine-port-tx auto`); a further port on
//! an interface whose queue another port's `AF_XDP` socket holds sends
//! over the transmit ring, and a daemon told `--spine-port-tx ring`
//! bridges the pings the same way over the rings.
//!
//! Needs root (CAP_NET_ADMIN, CAP_NET_RAW), `ip` from iproute2 and `ping`
//! from iputils-ping; fails, never skips, when one is missing.

mod common;
mod tools;

use std::process::Command;
use std::time::{Duration, Instant};

use common::three::{pattern_report, ping, tcp_client, tcp_server, Three};
use common::*;
use serde_json::Value;

/// The three namespaces, the hosts on one subnet.
struct Bridged {
    ns: Three,
    addr1: String,
    addr2: String,
}

impl Bridged {
    /// Names made unique by `tag` (one letter, one per test), addresses
    /// in `10.{net}.n.0/24`.
    fn new(tag: &str, net: u8) -> Bridged {
        let n = std::process::id() % 250 + 1;
        let (addr1, addr2) = (format!("10.{net}.{n}.1"), format!("10.{net}.{n}.2"));
        let ns = Three::new(tag, &format!("{addr1}/24"), &format!("{addr2}/24"), None);
        Bridged { ns, addr1, addr2 }
    }
}

impl std::ops::Deref for Bridged {
    type Target = Three;
    fn deref(&self) -> &Three {
        &self.ns
    }
}

/// `PortBridge` compiled into `dir` (its class file).
fn bridge_class(dir: &TempDir) -> std::path::PathBuf {
    tools::javac(&dir.0, &[tools::repo().join("extensions/PortBridge.java")]);
    dir.0.join("PortBridge.class")
}

/// `unet spine load` of the bridge `class` on daemon `d`, handler 100,
/// with a port on each of `b`'s router ends; started, not yet answered.
fn load_bridge(d: &Daemon, class: &std::path::Path, b: &Bridged) -> Proc {
    let mut cmd = command_in(None, unet_bin());
    cmd.args(["spine", "load", "--socket"])
        .arg(&d.socket)
        .arg(class)
        .args(["--arg", "100", "--port", &b.r1, "--port", &b.r2]);
    Proc::spawn("spine load", cmd)
}

fn ports(socket: &std::path::Path) -> Value {
    let out = Command::new(unet_bin())
        .args(["spine", "ports", "--json", "--socket"])
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

fn num(v: &Value, path: &[&str]) -> u64 {
    let mut v = v;
    for k in path {
        v = &v[*k];
    }
    v.as_u64().unwrap_or_else(|| panic!("{path:?} in {v}"))
}

/// Bytes of the TCP transfer.
const TCP_BYTES: usize = 4 << 20;
/// Its port.
const TCP_PORT: u16 = 7701;

#[test]
fn child() {
    let Some(role) = role() else { return };
    watchdog(60);
    match role.as_str() {
        // In h2: take one connection, read it to its end, report its
        // length and hash.
        "tcp-server" => tcp_server(TCP_PORT),
        // In h1: send the pattern to the server.
        "tcp-client" => tcp_client(TCP_PORT, TCP_BYTES),
        r => fail(&format!("unknown role {r}")),
    }
}

#[test]
fn hosts_ping_each_other_through_a_bridging_extension_on_two_ports() {
    if role().is_some() {
        return;
    }
    let dir = TempDir::new("spine-port");
    let class = bridge_class(&dir);
    let b = Bridged::new("p", 78);
    let d = Daemon::start_in(Some(&b.r), &[]);

    // Before the bridge: the hosts do not reach each other.
    let (ok, _) = ping(&b.h1, &b.addr2, 1);
    assert!(!ok, "the hosts reach each other without the bridge");

    let mut load = load_bridge(&d, &class, &b);
    let line = load
        .raw_line(Duration::from_secs(20))
        .expect("the load's line");
    assert_eq!(
        line,
        format!(
            "loaded extension 1 with handlers [100], port 0 on {}, port 1 on {}; \
             holding it until interrupted",
            b.r1, b.r2
        )
    );

    let sleeps = engine_counter(&d.stat(), "sleeps");
    let (ok, text) = ping(&b.h1, &b.addr2, 5);
    assert!(ok, "h1 -> h2 through the bridge: {text}");
    // Between the echoes, 0.2 s apart, the engine slept: the frames woke it.
    assert!(
        engine_counter(&d.stat(), "sleeps") >= sleeps + 4,
        "the engine did not sleep between frames"
    );
    let (ok, text) = ping(&b.h2, &b.addr1, 5);
    assert!(ok, "h2 -> h1 through the bridge: {text}");

    // A TCP transfer from h1 to h2, checked by hash.
    let mut server = Proc::spawn("tcp server", child_cmd(Some(&b.h2), "tcp-server"));
    server.expect("LISTENING", Duration::from_secs(20));
    let mut client = child_cmd(Some(&b.h1), "tcp-client");
    client.env("UNET_TO", &b.addr2);
    let mut client = Proc::spawn("tcp client", client);
    client.expect("SENT", Duration::from_secs(60));
    assert_eq!(
        server.expect("GOT", Duration::from_secs(60)),
        pattern_report(TCP_BYTES)
    );

    // Every echo and answer (and the ARP before them), and the transfer's
    // segments, went through both ports: in on one, out of the other.
    let l = ports(&d.socket);
    let rows = l["ports"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{l}");
    for (k, name) in [(0, &b.r1), (1, &b.r2)] {
        let p = &rows[k];
        assert_eq!(p["id"], k as u64);
        assert_eq!(p["interface"], name.as_str());
        assert_eq!(p["tx"], "af_xdp", "{p}");
        assert_eq!(p["handler"], 100);
        // 10 ICMP messages each way at least, ARP, and the transfer's
        // segments one way and its acknowledgements the other.
        assert!(num(p, &["frames_in"]) >= 11, "{p}");
        assert!(num(p, &["frames_out"]) >= 11, "{p}");
        if k == 0 {
            assert!(num(p, &["bytes_in"]) >= TCP_BYTES as u64, "{p}");
        }
        let drops: u64 = p["drops"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(drops, 0, "{p}");
    }
    // What one port took in the other sent out (nothing else sends).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let l = ports(&d.socket);
        let (p0, p1) = (&l["ports"][0], &l["ports"][1]);
        let (in0, out1) = (num(p0, &["frames_in"]), num(p1, &["frames_out"]));
        if in0 == out1 && num(p1, &["frames_in"]) == num(p0, &["frames_out"]) {
            break;
        }
        assert!(Instant::now() < deadline, "ports disagree: {l}");
        std::thread::yield_now();
    }

    // The caps and the refusals, through the client library: a process
    // holds at most 4 ports; an interface must exist; the handler must be
    // installed by an extension of the user's.
    let s = unet::Session::connect(&d.socket).expect("a session");
    let bytes = std::fs::read(&class).unwrap();
    let opts = unet::spine::ExtensionOptions {
        name: "second".into(),
        budget_us: 0,
        arg: 101,
        domains: Vec::new(),
    };
    let x = s.load_extension(&bytes, opts).expect("a second bridge");
    assert_eq!(x.handlers, vec![101]);
    assert!(matches!(
        s.spine_port_open("no-such-if0", 101),
        Err(unet::Error::Engine(unet::ErrorCode::NoSuchInterface))
    ));
    assert!(matches!(
        s.spine_port_open(&b.r1, 999),
        Err(unet::Error::Engine(unet::ErrorCode::NoSuchExtension))
    ));
    let mine: Vec<u32> = (0..4)
        .map(|_| {
            s.spine_port_open(&b.r1, 101)
                .expect("a port within the cap")
        })
        .collect();
    assert!(matches!(
        s.spine_port_open(&b.r1, 101),
        Err(unet::Error::Quota(unet::ErrorCode::ObjectQuota))
    ));
    let listed = s.spine_ports().unwrap();
    assert_eq!(listed.ports.len(), 6);
    // Queue 0 of r1 is the bridge's port's: these send over the ring.
    for id in &mine {
        let p = listed.port(*id).expect("a port of the session listed");
        assert_eq!(p.tx, "tx_ring", "{p:?}");
    }
    s.spine_port_close(mine[0]).unwrap();
    assert!(matches!(
        s.spine_port_close(mine[0]),
        Err(unet::Error::Engine(unet::ErrorCode::NoSuchPort))
    ));
    drop(s);
    let deadline = Instant::now() + Duration::from_secs(10);
    while ports(&d.socket)["ports"].as_array().unwrap().len() != 2 {
        assert!(Instant::now() < deadline, "a session's ports outlived it");
        std::thread::yield_now();
    }

    // The load gone, its ports close with it: the hosts are apart again.
    drop(load);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ports(&d.socket)["ports"].as_array().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the ports outlived their client");
        std::thread::yield_now();
    }
    let (ok, _) = ping(&b.h1, &b.addr2, 1);
    assert!(!ok, "the hosts reach each other after the bridge went");
}

#[test]
fn a_daemon_told_to_send_over_the_rings_bridges_the_pings_over_them() {
    if role().is_some() {
        return;
    }
    let dir = TempDir::new("spine-port-ring");
    let class = bridge_class(&dir);
    let b = Bridged::new("q", 79);
    // A short receive ring too (the least the daemon takes).
    let d = Daemon::start_in(
        Some(&b.r),
        &["--spine-port-tx", "ring", "--spine-port-rx-frames", "64"],
    );
    let mut load = load_bridge(&d, &class, &b);
    load.raw_line(Duration::from_secs(20))
        .expect("the load's line");
    let (ok, text) = ping(&b.h1, &b.addr2, 3);
    assert!(ok, "h1 -> h2 through the bridge over the rings: {text}");
    let (ok, text) = ping(&b.h2, &b.addr1, 3);
    assert!(ok, "h2 -> h1 through the bridge over the rings: {text}");
    let l = ports(&d.socket);
    let rows = l["ports"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{l}");
    for p in rows {
        assert_eq!(p["tx"], "tx_ring", "{p}");
        assert!(num(p, &["frames_out"]) >= 6, "{p}");
    }
    // The daemon refuses a way out it does not know, naming the choices,
    // and a receive ring out of its range.
    let refused = |args: &[&str]| {
        let out = Command::new(unet_bin())
            .arg("daemon")
            .args(args)
            .arg("--socket")
            .arg(dir.0.join("never.sock"))
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = refused(&["--spine-port-tx", "dma"]);
    assert!(err.contains("auto, xdp or ring"), "{err}");
    let err = refused(&["--spine-port-rx-frames", "10"]);
    assert!(err.contains("64..=65536"), "{err}");
}
