//! SPINE's IP router across two adapters, one a port (the paper's router):
//! the namespaces of `router.rs` (hosts h1 and h2 on two subnets, the
//! router in r), but two `unet daemon`s in r, the first owning the port
//! on h1's side, the second the port on h2's. A frame routed on one
//! adapter is handed to the other over a peer queue (`--between peer`,
//! the paper's "PCI" case) or a SPINE link over the daemons' UDP wire
//! on r's loopback (`--between wire`, its "Wire" case). For each: the
//! table loaded onto both adapters, and again on SIGHUP; `ping` both
//! ways and to the router's addresses (each answered by the host path of
//! the adapter the echo came in on); `ping -R` (options: the host
//! application forwards it out of the other adapter's port); a TCP
//! transfer of a known pattern checked by hash, with the host
//! application idle; the counters: frames handed over by each adapter
//! are the frames the other's runtime took from its peer queue or link
//! and sent out (`Spine.PORT_OUT`), with no drop; a host's message for
//! `PORT_OUT` sends nothing;
//! SIGTERM stops the router, leaving its peer queues. The same over peer
//! queues with both adapters in one daemon, taking turns on its thread
//! (`unet daemon --adapter`).
//!
//! Needs root (CAP_NET_ADMIN, CAP_NET_RAW), `ip` from iproute2 and `ping`
//! from iputils-ping; fails, never skips, when one is missing.

mod common;
mod tools;

use std::process::Command;

use std::time::{Duration, Instant};
use unet_abi::spine::SYS_PORT_OUT;

use common::hosts::ip;
use common::routed::{drops, frames_out, num, router_run, router_stats, Routed, MAC2};
use common::three::{pattern_report, ping, tcp_client, tcp_server};
use common::*;

/// Bytes of the TCP transfer.
const TCP_BYTES: usize = 2 << 20;
/// Its port.
const TCP_PORT: u16 = 7703;

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

/// The router with two adapters joined `between` (`peer` or `wire`), in
/// namespaces tagged `tag`; `one_daemon`: both adapters in one daemon
/// (`--adapter`), else a daemon each.
fn two_adapters(tag: &str, between: &str, one_daemon: bool) {
    if role().is_some() {
        return;
    }
    let dir = TempDir::new("router-adapters");
    tools::javac(
        &dir.0,
        &[tools::repo().join("extensions/router/Router.java")],
    );
    let class = dir.0.join("Router.class");
    let b = Routed::new(tag);
    ip(&["-n", &b.r, "link", "set", "lo", "up"]).expect("loopback up in r");
    let udp: &[&str] = if between == "wire" {
        &["--udp", "127.0.0.1:0"]
    } else {
        &[]
    };
    let second = dir.0.join("second.sock");
    let (da, db) = if one_daemon {
        let mut args = udp.to_vec();
        args.extend(["--adapter", second.to_str().expect("a UTF-8 path")]);
        let mut da = Daemon::start_in(Some(&b.r), &args);
        // The second adapter's line, with its own wire.
        let l = da.proc.raw_line(Duration::from_secs(10)).expect("its line");
        let wire = if between == "wire" {
            "UDP wire 127.0.0.1:"
        } else {
            "no UDP wire"
        };
        assert!(
            l.starts_with(&format!(
                "unet daemon: control socket {}, {wire}",
                second.display()
            )),
            "{l}"
        );
        (da, None)
    } else {
        let da = Daemon::start_in(Some(&b.r), udp);
        let db = Daemon::start_in(Some(&b.r), udp);
        (da, Some(db))
    };
    let sockets = [
        da.socket.as_path(),
        db.as_ref().map_or(second.as_path(), |d| d.socket.as_path()),
    ];
    if one_daemon {
        // Both adapters are one process's, on one thread.
        let tasks = std::fs::read_dir(format!("/proc/{}/task", da.proc.pid()))
            .expect("the daemon's threads")
            .flatten()
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|c| c.trim() == "unet-engines")
            })
            .count();
        assert_eq!(tasks, 1, "one thread runs the adapters");
    }
    let table = dir.0.join("routes.txt");
    std::fs::write(&table, b.table(1000, 1, false)).unwrap();

    let mut cmd = router_run(&b, &sockets, &table, &class);
    cmd.args(["--between", between]);
    let mut router = Proc::spawn("router", cmd);
    let first = router
        .raw_line(Duration::from_secs(30))
        .expect("the router's first line");
    assert!(
        first.starts_with("router: extension 1 with handlers [300, 301, 302, 303] on adapter 0 (")
            && first.contains(", extension 1 with handlers [300, 301, 302, 303] on adapter 1 (")
            && first.contains(&format!("; port 0 on {} {}/24 ", b.r1, b.gw1))
            && first.contains(&format!("; port 0 on {} {}/24 ", b.r2, b.gw2))
            && first.contains(" (adapter 0); ")
            && first.ends_with(" (adapter 1)"),
        "{first}"
    );
    let how = if between == "peer" {
        "a peer queue"
    } else {
        "a wire link"
    };
    let joined = router.raw_line(Duration::from_secs(10)).expect("its join");
    assert!(
        joined.starts_with(&format!("router: adapters 0 and 1 joined by {how} ")),
        "{joined}"
    );
    // h2's MAC is resolved with ARP out of the second adapter's port,
    // its reply taken on that adapter's host path.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let l = router
            .raw_line(deadline.saturating_duration_since(Instant::now()))
            .expect("the next hop resolved");
        if l.starts_with("router: table version") {
            assert!(l.starts_with("router: table version 1, 1: "), "{l}");
        }
        if l == format!("router: next hop {} is at {MAC2}", b.addr2) {
            break;
        }
    }

    // Both ways, and to the router's addresses, the near one and the far
    // one (answered by the host path of the adapter the echo came in on).
    for (ns, to) in [
        (&b.h1, &b.addr2),
        (&b.h2, &b.addr1),
        (&b.h1, &b.gw2),
        (&b.h2, &b.gw1),
    ] {
        let (ok, text) = ping(ns, to, 3);
        assert!(ok, "{ns} -> {to} through the router: {text}");
    }

    // SIGHUP: a new table (another filler, the hosts' subnets in halves)
    // on both adapters.
    std::fs::write(&table, b.table(1200, 2, true)).unwrap();
    router.signal(libc::SIGHUP);
    let l = router.line_starting("router: table version", Duration::from_secs(20));
    assert!(l.starts_with("router: table version 2, 2: "), "{l}");

    // A packet with options (`ping -R`, record route) goes to the host
    // path of the adapter it came in on, whose application forwards it
    // out of the egress port through the other adapter; the reply, with
    // the option too, comes back the same way.
    let out = Command::new("ip")
        .args(["netns", "exec", &b.h1, "ping", "-R", "-c", "1", "-w", "5"])
        .arg(&b.addr2)
        .output()
        .expect("ip netns exec ping");
    assert!(
        out.status.success(),
        "ping -R: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // A TCP transfer from h1 to h2, checked by hash.
    let mut server = Proc::spawn("tcp server", child_cmd(Some(&b.h2), "tcp-server"));
    server.expect("LISTENING", Duration::from_secs(20));
    let mut client = child_cmd(Some(&b.h1), "tcp-client");
    client.env("UNET_TO", &b.addr2);
    let (ticks0, t0) = (cpu_ticks(router.pid()), Instant::now());
    let mut client = Proc::spawn("tcp client", client);
    client.expect("SENT", Duration::from_secs(30));
    assert_eq!(
        server.expect("GOT", Duration::from_secs(30)),
        pattern_report(TCP_BYTES)
    );
    // The host application, serving two endpoints, did nothing per packet:
    // a small share of the transfer's time (clock ticks are 10 ms).
    let ticks = cpu_ticks(router.pid()) - ticks0;
    let wall = t0.elapsed();
    assert!(
        ticks * 10 <= 20 + wall.as_millis() as u64 / 4,
        "the router's host application used {ticks} ticks in {wall:?}"
    );

    // What each adapter handed over, the other took and sent out; no
    // drop (the last frames may be on their way: waited for).
    let deadline = Instant::now() + Duration::from_secs(10);
    let s = loop {
        let s = router_stats(&b.r, &sockets);
        assert_eq!(s.len(), 2, "{s:?}");
        if num(&s[0], "handed") == num(&s[1], "from_adapter")
            && num(&s[1], "handed") == num(&s[0], "from_adapter")
        {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "frames lost between adapters: {s:?}"
        );
        std::thread::yield_now();
    };
    assert!(num(&s[0], "handed") as usize >= TCP_BYTES / 1500, "{s:?}");
    assert!(num(&s[1], "handed") >= 6, "{s:?}");
    for (k, a) in s.iter().enumerate() {
        assert_eq!(num(a, "adapter"), k as u64, "{a}");
        assert_eq!(drops(a), 0, "adapter {k}: {a}");
        // Everything it forwarded was for the other adapter's port.
        assert_eq!(num(a, "forwarded"), num(a, "handed"), "adapter {k}: {a}");
        assert!(num(a, "arp_answered") >= 1, "adapter {k}: {a}");
        assert!(num(a, "from_host") >= 3, "adapter {k}: {a}");
    }
    // The frames went out of the egress ports: each adapter's one port
    // sent what the other handed it, and the host's answers.
    for (k, socket) in sockets.iter().enumerate() {
        let out = frames_out(socket);
        assert_eq!(out.len(), 1, "adapter {k}: {out:?}");
        let a = &s[k];
        assert!(
            out[0] >= num(a, "from_adapter") + num(a, "from_host"),
            "adapter {k}: {out:?} {a}"
        );
    }

    // A host's message for the runtime's PORT_OUT (handler 1, which only
    // peer queues and links reach) is no frame to send: no handler takes
    // it, and the port sends nothing.
    {
        let out0 = frames_out(sockets[1]);
        let sess = unet::Session::connect(sockets[1]).expect("a session");
        let mut ep = sess
            .create_endpoint(unet::EndpointConfig::default())
            .unwrap();
        let ports = Command::new(unet_bin())
            .args(["spine", "ports", "--json", "--socket"])
            .arg(sockets[1])
            .output()
            .unwrap();
        let ports: serde_json::Value = serde_json::from_slice(&ports.stdout).unwrap();
        let port = ports["ports"][0]["id"].as_u64().expect("a port id") as u32;
        ep.send_am(SYS_PORT_OUT, &port.to_le_bytes(), &[0xff; 60])
            .unwrap();
        let s2 = router_stats(&b.r, &sockets);
        assert_eq!(num(&s2[1], "from_adapter"), num(&s[1], "from_adapter"));
        assert_eq!(num(&s2[1]["drops"], "bad_egress"), 0, "{s2:?}");
        assert_eq!(frames_out(sockets[1]), out0);
    }

    // SIGTERM stops the router; the peer queues it joined are left.
    router.signal(libc::SIGTERM);
    router.line_starting("router: stopped by signal 15", Duration::from_secs(10));
    match router.wait_exit(Duration::from_secs(10)) {
        Some(st) if st.success() => {}
        st => panic!("the router did not stop cleanly: {st:?}"),
    }
    for socket in sockets {
        let peers = unet::Session::connect(socket)
            .unwrap()
            .list_peers()
            .unwrap()
            .peers;
        assert!(peers.is_empty(), "{} peers left", peers.len());
    }
}

#[test]
fn two_adapters_over_peer_queues() {
    two_adapters("p", "peer", false);
}

#[test]
fn two_adapters_over_the_wire() {
    two_adapters("w", "wire", false);
}

#[test]
fn two_adapters_on_one_thread_over_peer_queues() {
    two_adapters("o", "peer", true);
}
