//! SPINE's IP router with real kernel traffic: two hosts (network
//! namespaces h1 and h2) on two subnets, each joined by a veth pair to a
//! third namespace r, their gateway, where a `unet daemon` runs and
//! `unet router run` loads the router extension onto its adapter with a
//! port on each veth end (r's kernel has no address there: it neither
//! answers nor forwards). h1's MAC is given to the router, h2's it
//! resolves with ARP. Through the router: `ping` both ways and to its
//! own addresses (the host application's echo replies); a TCP transfer
//! of a known pattern checked by hash while the table is replaced
//! (SIGHUP) again and again, with no drop; `traceroute` shows the
//! router's hop (its time exceeded); malformed frames sent from h1 are
//! dropped and counted by reason, or go to the host, never out of the
//! other port.
//!
//! Needs root (CAP_NET_ADMIN, CAP_NET_RAW), `ip` from iproute2, `ping`
//! from iputils-ping and `traceroute`; fails, never skips, when one is
//! missing.

mod common;
mod tools;

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::routed::{drops, frames_out, num, router_run, router_stat, Routed, MAC1, MAC2};
use common::three::{pattern, pattern_report, ping, tcp_server};
use common::*;

/// Bytes of the TCP transfer.
const TCP_BYTES: usize = 8 << 20;
/// Its port.
const TCP_PORT: u16 = 7702;

/// The Internet checksum.
fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in b.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Frames h1 sends to the router (MAC `to`): `(name, frame)`. Each is an
/// IPv4 UDP datagram to h2 from h1, spoiled (named by the drop counter it
/// moves), with options (for the host) or a fragment (forwarded).
fn malformed(
    from: [u8; 6],
    to: [u8; 6],
    src: [u8; 4],
    dst: [u8; 4],
) -> Vec<(&'static str, Vec<u8>)> {
    let good = |opts: &[u8]| {
        let hl = 20 + opts.len();
        let mut f = to.to_vec();
        f.extend_from_slice(&from);
        f.extend_from_slice(&[8, 0]);
        let total = (hl + 12) as u16;
        f.push(0x40 | (hl / 4) as u8);
        f.push(0);
        f.extend_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&[0, 1, 0, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        f.extend_from_slice(opts);
        let c = checksum(&f[14..14 + hl]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&[0x30, 0x39, 0x30, 0x39, 0, 12, 0, 0, 1, 2, 3, 4]);
        f
    };
    let mut bad_sum = good(&[]);
    bad_sum[24] ^= 0x55;
    let short = good(&[])[..30].to_vec();
    let mut long = good(&[]);
    long[16..18].copy_from_slice(&200u16.to_be_bytes());
    let c = {
        long[24..26].copy_from_slice(&[0, 0]);
        checksum(&long[14..34])
    };
    long[24..26].copy_from_slice(&c.to_be_bytes());
    let mut v6 = good(&[]);
    v6[14] = 0x65;
    let mut tiny_hl = good(&[]);
    tiny_hl[14] = 0x44;
    // A first fragment (more fragments), well formed: forwarded.
    let mut frag = good(&[]);
    frag[20] = 0x20;
    frag[24..26].copy_from_slice(&[0, 0]);
    let c = checksum(&frag[14..34]);
    frag[24..26].copy_from_slice(&c.to_be_bytes());
    vec![
        ("checksum", bad_sum),
        ("short_header", short),
        ("length", long),
        ("version", v6),
        ("header_length", tiny_hl),
        // Options (a no-op and an end of list, padded): to the host.
        ("options", good(&[1, 0, 0, 0])),
        ("fragment", frag),
    ]
}

#[test]
fn child() {
    let Some(role) = role() else { return };
    watchdog(120);
    match role.as_str() {
        // In h2: take one connection, read it to its end, report its
        // length and hash.
        "tcp-server" => tcp_server(TCP_PORT),
        // In h1: send the pattern to the server, in pieces, reporting
        // progress so that the test can update the table meanwhile.
        "tcp-client" => {
            let to = env("UNET_TO");
            let mut c = TcpStream::connect((to.as_str(), TCP_PORT))
                .unwrap_or_else(|e| fail(&format!("connect: {e}")));
            let data: Vec<u8> = (0..TCP_BYTES).map(pattern).collect();
            say("CONNECTED");
            for piece in data.chunks(TCP_BYTES / 16) {
                c.write_all(piece)
                    .unwrap_or_else(|e| fail(&format!("write: {e}")));
                std::thread::sleep(Duration::from_millis(20));
            }
            say("SENT");
        }
        // In h1: send raw frames (hex, one a line on stdin) out of
        // UNET_IF.
        "inject" => {
            let ifname = env("UNET_IF");
            let fd = raw_socket(&ifname);
            say("READY");
            let mut line = String::new();
            while std::io::stdin().read_line(&mut line).unwrap_or(0) > 0 {
                let f: Vec<u8> = (0..line.trim().len() / 2)
                    .map(|i| u8::from_str_radix(&line.trim()[2 * i..2 * i + 2], 16).unwrap())
                    .collect();
                // SAFETY: `f` is a live buffer of f.len() bytes; `fd` is
                // the bound packet socket.
                let n = unsafe { libc::send(fd, f.as_ptr().cast(), f.len(), 0) };
                if n != f.len() as isize {
                    fail(&format!("send: {}", std::io::Error::last_os_error()));
                }
                say("SENT");
                line.clear();
            }
        }
        r => fail(&format!("unknown role {r}")),
    }
}

/// An `AF_PACKET` raw socket bound to interface `name`.
fn raw_socket(name: &str) -> i32 {
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto)) };
    if fd < 0 {
        fail(&format!("socket: {}", std::io::Error::last_os_error()));
    }
    let cname = std::ffi::CString::new(name).unwrap();
    // SAFETY: `cname` is a NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if index == 0 {
        fail(&format!("no interface {name}"));
    }
    // SAFETY: an all-zero sockaddr_ll is valid; the fields set are its own.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as u16;
    sa.sll_protocol = proto;
    sa.sll_ifindex = index as i32;
    // SAFETY: `sa` is a sockaddr_ll of the size given.
    let r = unsafe {
        libc::bind(
            fd,
            (&sa as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if r != 0 {
        fail(&format!("bind: {}", std::io::Error::last_os_error()));
    }
    fd
}

fn mac(s: &str) -> [u8; 6] {
    let v: Vec<u8> = s
        .split(':')
        .map(|p| u8::from_str_radix(p, 16).unwrap())
        .collect();
    v.try_into().unwrap()
}

fn octets(s: &str) -> [u8; 4] {
    s.parse::<std::net::Ipv4Addr>().unwrap().octets()
}

#[test]
fn hosts_on_two_subnets_reach_each_other_through_the_router_extension() {
    if role().is_some() {
        return;
    }
    let dir = TempDir::new("router");
    tools::javac(
        &dir.0,
        &[tools::repo().join("extensions/router/Router.java")],
    );
    let class = dir.0.join("Router.class");
    let b = Routed::new("r");
    let d = Daemon::start_in(Some(&b.r), &[]);
    let table = dir.0.join("routes.txt");
    std::fs::write(&table, b.table(1000, 1, false)).unwrap();

    // Before the router: the hosts do not reach each other.
    let (ok, _) = ping(&b.h1, &b.addr2, 1);
    assert!(!ok, "the hosts reach each other without the router");

    let cmd = router_run(&b, &[&d.socket], &table, &class);
    let mut router = Proc::spawn("router", cmd);
    let first = router
        .raw_line(Duration::from_secs(30))
        .expect("the router's first line");
    assert!(
        first.starts_with("router: extension 1 with handlers [300, 301, 302, 303]; port 0 on"),
        "{first}"
    );
    // h1's MAC is given; h2's, the router resolves (ARP through the
    // extension).
    let mut lines = Vec::new();
    while lines.len() < 3 {
        lines.push(router.raw_line(Duration::from_secs(30)).expect("its table"));
    }
    assert_eq!(
        lines,
        [
            format!("router: resolving next hop {}", b.addr2),
            lines[1].clone(),
            format!("router: next hop {} is at {MAC2}", b.addr2)
        ]
    );
    assert!(
        lines[1].starts_with("router: table version 1: "),
        "{lines:?}"
    );
    assert!(lines[1].contains(" 2 next hops"), "{lines:?}");

    // Both ways, and to the router's own addresses (the near one and the
    // far one): the extension answers ARP, the host echo requests.
    for (ns, to) in [
        (&b.h1, &b.addr2),
        (&b.h2, &b.addr1),
        (&b.h1, &b.gw1),
        (&b.h1, &b.gw2),
    ] {
        let (ok, text) = ping(ns, to, 5);
        assert!(ok, "{ns} -> {to} through the router: {text}");
    }
    // No route: network unreachable, from the router's address.
    let (ok, text) = ping(&b.h1, &format!("10.81.{}.2", b.n), 1);
    assert!(!ok, "{text}");
    assert!(
        text.contains(&format!("From {}", b.gw1)) && text.contains("Destination Net Unreachable"),
        "{text}"
    );
    let s = router_stat(&b.r, &d.socket);
    assert!(num(&s, "forwarded") >= 10, "{s}");
    assert!(num(&s, "arp_answered") >= 2, "{s}");
    assert!(num(&s, "from_host") >= 10, "{s}");
    assert_eq!(drops(&s), 0, "{s}");

    // A TCP transfer from h1 to the network behind h2, checked by hash,
    // while the table is replaced (SIGHUP: another filler each time, and
    // the subnets and the route the transfer takes cut in pieces every
    // other time) ten times.
    let mut server = Proc::spawn("tcp server", child_cmd(Some(&b.h2), "tcp-server"));
    server.expect("LISTENING", Duration::from_secs(20));
    let mut client = child_cmd(Some(&b.h1), "tcp-client");
    client.env("UNET_TO", &b.far);
    let mut client = Proc::spawn("tcp client", client);
    client.expect("CONNECTED", Duration::from_secs(20));
    let (ticks0, t0) = (cpu_ticks(router.pid()), Instant::now());
    for v in 2..=11u64 {
        std::fs::write(&table, b.table(1000 + 100 * v as usize, v, v % 2 == 0)).unwrap();
        router.signal(libc::SIGHUP);
        let l = router.line_starting("router: table version", Duration::from_secs(20));
        assert!(
            l.starts_with(&format!("router: table version {v}: ")),
            "{l}"
        );
    }
    client.expect("SENT", Duration::from_secs(60));
    // The host application's CPU while forwarding (ten table builds
    // included): a small share of the transfer's time (clock ticks are
    // 10 ms).
    let ticks = cpu_ticks(router.pid()) - ticks0;
    let wall = t0.elapsed();
    assert!(
        ticks * 10 <= 20 + wall.as_millis() as u64 / 4,
        "the router's host application used {ticks} ticks in {wall:?}"
    );
    assert_eq!(
        server.expect("GOT", Duration::from_secs(60)),
        pattern_report(TCP_BYTES)
    );
    let s2 = router_stat(&b.r, &d.socket);
    assert!(num(&s2, "forwarded") as usize >= TCP_BYTES / 1500, "{s2}");
    assert_eq!(
        drops(&s2),
        drops(&s),
        "no packet dropped across the updates: {s2}"
    );
    assert_eq!(s2["drops"]["unconfigured"], s["drops"]["unconfigured"]);
    // The host application saw none of the transfer's thousands of
    // packets (only the hosts' own occasional IPv6 frames, if any).
    assert!(num(&s2, "to_host") < num(&s, "to_host") + 20, "{s} {s2}");
    assert_eq!(num(&s2, "from_host"), num(&s, "from_host"));

    // The extension routes by the newest table (it keeps a table's parts
    // until the version changes): the route to the network behind h2
    // taken out (and the filler, whose short prefixes may cover it), it
    // is unreachable; put back, reachable again.
    for (v, reach) in [(12u64, false), (13, true)] {
        let t = if reach {
            b.table(1000, v, false)
        } else {
            b.subnets()
        };
        std::fs::write(&table, t).unwrap();
        router.signal(libc::SIGHUP);
        let l = router.line_starting("router: table version", Duration::from_secs(20));
        assert!(
            l.starts_with(&format!("router: table version {v}: ")),
            "{l}"
        );
        let (ok, text) = ping(&b.h1, &b.far, 1);
        assert_eq!(ok, reach, "table version {v}: {text}");
        if !reach {
            assert!(text.contains("Destination Net Unreachable"), "{text}");
        }
    }

    // traceroute: the router's hop (its time exceeded, from its address
    // on h1's side), then h2.
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &b.h1,
            "traceroute",
            "-n",
            "-q",
            "1",
            "-w",
            "2",
        ])
        .args(["-m", "4", &b.addr2])
        .output()
        .expect("ip netns exec traceroute");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !text.contains("not found"),
        "`traceroute` failed or is missing (install traceroute): {text}"
    );
    let hops: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|w| w.parse::<std::net::Ipv4Addr>().is_ok())
        .collect();
    assert_eq!(hops, vec![b.gw1.as_str(), b.addr2.as_str()], "{text}");

    // Another endpoint can neither reconfigure the router (here: move
    // h2's next hop to port 0) nor send frames out of its ports.
    {
        let before = router_stat(&b.r, &d.socket);
        let out0 = frames_out(&d.socket);
        let sess = unet::Session::connect(&d.socket).expect("a session");
        let mut ep = sess
            .create_endpoint(unet::EndpointConfig::default())
            .unwrap();
        let mut hijack = Vec::new();
        for w in [2i32, 1, 0] {
            hijack.extend_from_slice(&w.to_le_bytes());
        }
        hijack.extend_from_slice(&mac(MAC1));
        ep.send_am(301, &hijack, &[]).unwrap();
        ep.send_am(302, &1i32.to_le_bytes(), &[0xff; 60]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = router_stat(&b.r, &d.socket);
            let bad = num(&s["drops"], "bad_config") - num(&before["drops"], "bad_config");
            if bad == 2 {
                break;
            }
            assert!(bad < 2 && Instant::now() < deadline, "{s}");
            std::thread::yield_now();
        }
        assert_eq!(frames_out(&d.socket), out0);
    }

    // Malformed frames from h1: counted by reason, never out of the far
    // port; a packet with options goes to the host, which forwards it on
    // its slow path; a fragment is forwarded.
    let mut inj = child_cmd(Some(&b.h1), "inject");
    inj.env("UNET_IF", &b.h1v);
    let mut inj = Proc::spawn("inject", inj);
    inj.expect("READY", Duration::from_secs(20));
    let rmac = {
        let p = format!("/sys/class/net/{}/address", b.r1);
        let out = command_in(Some(&b.r), "cat").arg(p).output().unwrap();
        mac(String::from_utf8_lossy(&out.stdout).trim())
    };
    for (what, f) in malformed(mac(MAC1), rmac, octets(&b.addr1), octets(&b.addr2)) {
        let before = router_stat(&b.r, &d.socket);
        let out0 = frames_out(&d.socket);
        let hex: String = f.iter().map(|x| format!("{x:02x}")).collect();
        inj.tell(&hex);
        inj.expect("SENT", Duration::from_secs(10));
        let deadline = Instant::now() + Duration::from_secs(10);
        let after = loop {
            let s = router_stat(&b.r, &d.socket);
            let moved = if what == "options" {
                num(&s, "to_host") > num(&before, "to_host") && frames_out(&d.socket)[1] > out0[1]
            } else if what == "fragment" {
                num(&s, "forwarded") > num(&before, "forwarded")
            } else {
                num(&s["drops"], what) > num(&before["drops"], what)
            };
            if moved {
                break s;
            }
            assert!(Instant::now() < deadline, "{what}: {s}");
            std::thread::yield_now();
        };
        if what == "options" {
            // Once (h2's port unreachable comes back through the
            // extension, out of port 0).
            assert_eq!(frames_out(&d.socket)[1], out0[1] + 1, "{what}");
            assert_eq!(drops(&after), drops(&before), "{what}: {after}");
        } else if what == "fragment" {
            assert_eq!(frames_out(&d.socket)[1], out0[1] + 1, "{what}");
            assert_eq!(drops(&after), drops(&before), "{what}: {after}");
        } else {
            assert_eq!(drops(&after), drops(&before) + 1, "{what}: {after}");
            assert_eq!(frames_out(&d.socket)[1], out0[1], "{what} went out");
        }
    }
    drop(inj);

    // The extension unloaded from elsewhere, the router stops; its ports
    // go with it: the hosts are apart.
    let st = Command::new(unet_bin())
        .args(["spine", "unload", "--socket"])
        .arg(&d.socket)
        .arg("1")
        .status()
        .unwrap();
    assert!(st.success());
    router.line_starting("router: extension 1 was unloaded", Duration::from_secs(10));
    match router.wait_exit(Duration::from_secs(10)) {
        Some(s) if s.success() => {}
        s => panic!("the router did not stop cleanly: {s:?}"),
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !frames_out(&d.socket).is_empty() {
        assert!(Instant::now() < deadline, "the ports outlived the router");
        std::thread::yield_now();
    }
    let (ok, _) = ping(&b.h1, &b.addr2, 1);
    assert!(!ok, "the hosts reach each other after the router went");
}
