//! The soak test: every kind of abuse the engine is hardened against, at
//! once, against one daemon, for about 40 s, while honest pairs stream on
//! the direct, engine and UDP paths.
//!
//! The abusers, each a child process of its own (so that each has its own
//! quotas, and a SIGKILL takes all it holds):
//!
//! - `big`: creates and drops a 128 MiB endpoint again and again (the
//!   engine makes and pre-faults it on its set-up thread: a set-up stall
//!   if it did that on its own);
//! - `memq`: four sessions of one process create 24 MiB endpoints until
//!   the process's memory quota (`--client-memory 160M`) refuses one;
//! - `slots`: one process creates small endpoints until its endpoint
//!   quota (`--client-endpoints 12`) refuses one;
//! - `idle`: holds 40 control connections with no endpoint (the cap is
//!   32 a process), again and again;
//! - `forger`: a plain UDP socket sends forged open requests (from a
//!   non-loopback address of the host, which is not allowed, when there
//!   is one), forged data frames with bad tokens aimed at the honest UDP
//!   receiver's channels, and garbage datagrams;
//! - `churn`: short-lived direct peers (as many as the soak has time for,
//!   at most 1 000, and at least 100 even if that takes longer), each a
//!   session and endpoint of its own, open a direct channel to one server
//!   endpoint, send one message and go; the server checks each message and closes each
//!   channel once its peer is gone;
//! - `garbage`: random control packets (empty, oversized, random bytes);
//! - `hostile`: random send descriptors pushed unchecked, and random
//!   words scribbled over its own endpoint's queues (as `hostile.rs`);
//! - `ring`: opens direct channels to its own second endpoint and
//!   scribbles a bad record header into the ring (as
//!   `crates/unet/tests/direct_attack.rs`): the receiver must see the
//!   connection broken, never a message;
//! - `regions`: one-byte VIA memory regions until a limit of the process
//!   refuses one (each is charged at least a page, and regions are capped
//!   per process), again and again;
//! - `jobs`: UDM jobs created on a throwaway session, joined on a kept
//!   one, the throwaway closed, until a limit refuses one (a job stays
//!   charged to its creator's process while anything of it lives);
//! - `udmidle`: jobs of 16 nodes, every node joined and holding one unread
//!   message, as many as the limits allow, then untouched;
//! - `listeners` and `flood`: one process listens on discriminators until
//!   its cap refuses one and never answers; 32 threads of another make
//!   connection requests to them as fast as they can, half from the
//!   second engine over the wire, half from this one;
//! - `victim`s: clients with two endpoints and a direct and an engine
//!   channel, streaming to themselves, SIGKILLed at random moments
//!   (between 20 and 400 ms after they start, some before they have
//!   created anything) and replaced, for the whole run.
//!
//! The honest pairs stream rounds of 1 024 messages of mixed sizes (1 B
//! to 64 KiB) with the shared windowed stream (`common::stream_send` and
//! `stream_recv`: every message's length, content and order checked by the
//! receiver); each round starts with a 16-byte header carrying its number,
//! and a header 0 ends the stream when the parent says stop. On the engine
//! and UDP paths, which drop what a receiver has no room for, the window
//! keeps the receiver's buffers from running out, and the test asserts
//! that nothing was dropped on the honest endpoints at all
//! (`rx_drop_no_buffer`, `rx_drop_ring_full` = 0, every message counted
//! by the engines).
//!
//! At the end: every honest message arrived exactly once, intact and in
//! order, on each path; each abuser's counters moved (`tx_bad_*`,
//! `ring_corrupt`/`free_bad_offset`, `direct_rx_bad`, `control_bad`,
//! `control_drop_empty`, `control_drop_oversize`,
//! `control_drop_idle_limit`, `quota_refused_memory`,
//! `quota_refused_endpoints`, `wire_drop_*`, `direct_conns`,
//! `endpoints_reclaimed`); and once the abusers are gone, the daemon's open
//! descriptors and live endpoints are back to where they were before
//! anyone connected, and its resident memory is within 16 MiB of it. The
//! daemon then stops cleanly on SIGTERM. A watchdog ends the test after
//! 150 s whatever happens.

mod common;
#[path = "soak/roles.rs"]
mod roles;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use roles::*;
use unet::{ChannelOptions, PathChoice, Session};

/// How long the abuse runs.
const ABUSE: Duration = Duration::from_secs(40);
/// Messages of one round of an honest stream (a multiple of 64: every
/// size of the mix).
const ROUND: u64 = 1024;
/// First 8 bytes of a round header.
const MAGIC: u64 = 0x50a4_50a4_50a4_50a4;
/// Most direct peers of the churn (it stops earlier when the soak ends).
const CHURN_PEERS: u64 = 1000;
/// Fewest direct peers the churn must have made by the end of the soak.
const CHURN_MIN: u64 = 100;
/// Resident memory the daemon may keep over its start, at the end.
const RSS_SLACK: u64 = 16 << 20;
/// The whole test, whatever happens.
const WATCHDOG: Duration = Duration::from_secs(150);

const DIRECT: ChannelOptions = ChannelOptions {
    path: PathChoice::Direct,
};
const ENGINE: ChannelOptions = ChannelOptions {
    path: PathChoice::Engine,
};

// -------------------------------------------------------------------------
// Child roles
// -------------------------------------------------------------------------

#[test]
fn child() {
    let Some(role) = role() else { return };
    watchdog(WATCHDOG.as_secs());
    match role.as_str() {
        "hsend" => honest_send(),
        "hrecv" => honest_recv(),
        "big" => big(),
        "memq" => memq(),
        "slots" => slots(),
        "idle" => idle(),
        "forger" => forger(),
        "churn" => churn(),
        "garbage" => garbage(),
        "hostile" => hostile(),
        "ring" => ring(),
        "victim" => victim(),
        "regions" => regions(),
        "jobs" => jobs(),
        "udmidle" => udm_idle(),
        "listeners" => listeners(),
        "flood" => flood(),
        r => fail(&format!("unknown role {r}")),
    }
}

/// Set once the parent writes a line (or closes our stdin).
fn stop_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    std::thread::spawn(move || {
        let _ = read_command();
        s.store(true, Ordering::Relaxed);
    });
    stop
}

fn session() -> Session {
    let socket = env("UNET_SOCKET");
    Session::connect(&socket).unwrap_or_else(|e| fail(&format!("connect {socket}: {e}")))
}

fn header(round: u64) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[..8].copy_from_slice(&MAGIC.to_le_bytes());
    h[8..].copy_from_slice(&round.to_le_bytes());
    h
}

/// Rounds of ROUND messages until told to stop, each after a header with
/// its number (from 1); header 0 ends the stream. Reports `DONE rounds
/// messages`.
fn honest_send() {
    let stop = stop_flag();
    let mut ep = connect_endpoint();
    say(&format!("ID {}", ep.id()));
    let path = path_named(&env("UNET_PATH"));
    let ch = ep
        .open_channel(peer_addr(), ChannelOptions { path })
        .unwrap_or_else(|e| fail(&format!("open channel: {e}")));
    let mut rounds = 0u64;
    loop {
        let go = !stop.load(Ordering::Relaxed);
        let h = header(if go { rounds + 1 } else { 0 });
        ep.send_blocking(ch, &h, T)
            .unwrap_or_else(|e| fail(&format!("header after round {rounds}: {e}")));
        if !go {
            break;
        }
        stream_send(&mut ep, ch, ROUND, WINDOW, &size_of_seq);
        rounds += 1;
    }
    say(&format!("DONE {rounds} {}", rounds * ROUND));
    hold();
}

/// The other side of [`honest_send`]: every header in order, every message
/// checked (length, content, order: `stream_recv`). Reports `DONE rounds
/// messages bytes`.
fn honest_recv() {
    let mut ep = connect_endpoint();
    say(&format!("ID {}", ep.id()));
    let mut buf = vec![0u8; 1 << 17];
    let (mut rounds, mut bytes) = (0u64, 0u64);
    let mut chan = None;
    loop {
        let r = ep
            .recv(&mut buf, Some(T))
            .unwrap_or_else(|e| fail(&format!("header of round {}: {e}", rounds + 1)));
        if r.len != 16 || seq_of(&buf[..8]) != Some(MAGIC) {
            fail(&format!(
                "round {}: a {}-byte message where its header belongs",
                rounds + 1,
                r.len
            ));
        }
        if *chan.get_or_insert(r.channel) != r.channel {
            fail(&format!("a header on channel {:?}", r.channel));
        }
        let n = seq_of(&buf[8..16]).expect("8 bytes");
        if n == 0 {
            break;
        }
        if n != rounds + 1 {
            fail(&format!("header of round {n} after round {rounds}"));
        }
        let (c, b) = stream_recv(&mut ep, ROUND, 64, &size_of_seq);
        if c != r.channel {
            fail(&format!("round {n} on channel {c:?}"));
        }
        rounds += 1;
        bytes += b;
    }
    say(&format!("DONE {rounds} {} {bytes}", rounds * ROUND));
    hold();
}

// -------------------------------------------------------------------------
// The parent
// -------------------------------------------------------------------------

/// A non-loopback IPv4 address of this host, if it has one.
fn outside_ipv4() -> Option<Ipv4Addr> {
    let mut found = None;
    // SAFETY: getifaddrs fills a list we walk read-only and free once.
    unsafe {
        let mut ifs: *mut libc::ifaddrs = std::ptr::null_mut();
        if libc::getifaddrs(&mut ifs) != 0 {
            return None;
        }
        let mut p = ifs;
        while !p.is_null() {
            let a = (*p).ifa_addr;
            if !a.is_null() && (*a).sa_family as i32 == libc::AF_INET {
                let sin = &*(a as *const libc::sockaddr_in);
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                if !ip.is_loopback() && found.is_none() {
                    found = Some(ip);
                }
            }
            p = (*p).ifa_next;
        }
        libc::freeifaddrs(ifs);
    }
    found
}

/// Resident memory of a process and the shared part of it, in bytes.
fn rss(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let kb = |key: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (kb("VmRSS:"), kb("RssShmem:"))
}

fn ep_counter(st: &serde_json::Value, id: u32, name: &str) -> u64 {
    endpoint_stats(st, id).unwrap_or_else(|| panic!("endpoint {id} not live in {st}"))[name]
        .as_u64()
        .unwrap_or_else(|| panic!("{name} missing"))
}

fn client_counter(st: &serde_json::Value, id: u32, name: &str) -> u64 {
    endpoint_stats(st, id).unwrap_or_else(|| panic!("endpoint {id} not live in {st}"))["client"]
        [name]
        .as_u64()
        .unwrap_or_else(|| panic!("client.{name} missing"))
}

fn numbers(s: &str) -> Vec<u64> {
    s.split_whitespace()
        .map(|x| x.parse().expect("a number"))
        .collect()
}

/// An honest pair: receiver and sender, and the path.
struct Pair {
    path: &'static str,
    recv: Proc,
    send: Proc,
    recv_id: u32,
    send_id: u32,
}

fn pair(
    path: &'static str,
    recv_sock: &std::path::Path,
    send_sock: &std::path::Path,
    host: Option<SocketAddr>,
) -> Pair {
    let mut rc = child_cmd(None, "hrecv");
    rc.env("UNET_SOCKET", recv_sock);
    let mut recv = Proc::spawn(&format!("{path} receiver"), rc);
    let recv_id = recv.expect("ID", Duration::from_secs(20));
    let mut sc = child_cmd(None, "hsend");
    sc.env("UNET_SOCKET", send_sock)
        .env("UNET_PEER_ID", &recv_id)
        .env("UNET_PATH", path);
    if let Some(h) = host {
        sc.env("UNET_PEER_HOST", h.to_string());
    }
    let mut send = Proc::spawn(&format!("{path} sender"), sc);
    let send_id = send.expect("ID", Duration::from_secs(20));
    Pair {
        path,
        recv,
        send,
        recv_id: recv_id.parse().unwrap(),
        send_id: send_id.parse().unwrap(),
    }
}

#[test]
fn soak_every_abuse_at_once_while_honest_pairs_stream() {
    if role().is_some() {
        return;
    }
    let t_start = Instant::now();
    std::thread::spawn(|| {
        std::thread::sleep(WATCHDOG);
        eprintln!("soak: watchdog fired after {WATCHDOG:?}");
        std::process::exit(1);
    });
    let outside = outside_ipv4();
    let bind = if outside.is_some() {
        "0.0.0.0:0"
    } else {
        "127.0.0.1:0"
    };
    let mut a = Daemon::start(&[
        "--udp",
        bind,
        "--client-endpoints",
        "12",
        "--client-memory",
        "160M",
    ]);
    let mut b = Daemon::start(&["--udp", "127.0.0.1:0"]);
    let a_port = a.udp.expect("daemon a's UDP address").port();
    let a_lo = SocketAddr::from(([127, 0, 0, 1], a_port));

    // The baseline, before anyone connects (the stat's own connection
    // gone).
    let st0 = a.stat();
    assert!(endpoints(&st0).is_empty(), "{st0}");
    let fds0 = {
        let mut last = fd_count(a.pid());
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let n = fd_count(a.pid());
            if n == last {
                break n;
            }
            last = n;
        }
    };
    let (rss0, shm0) = rss(a.pid());
    assert!(fds0 > 0, "cannot read /proc/{}/fd", a.pid());
    eprintln!(
        "baseline: {fds0} descriptors, {} KiB resident ({} KiB shared), no endpoints; \
         outside address for the forger: {outside:?}",
        rss0 >> 10,
        shm0 >> 10
    );

    // The honest pairs.
    let mut pairs = [
        pair("direct", &a.socket, &a.socket, None),
        pair("engine", &a.socket, &a.socket, None),
        pair("auto", &a.socket, &b.socket, Some(a_lo)),
    ];
    let udp_receiver = pairs[2].recv_id;

    // The abusers.
    let spawn = |role: &str, envs: &[(&str, String)]| {
        let mut c = child_cmd(None, role);
        c.env("UNET_SOCKET", &a.socket);
        for (k, v) in envs {
            c.env(k, v);
        }
        Proc::spawn(role, c)
    };
    let mut forger_env = vec![
        ("UNET_UDP_PORT", a_port.to_string()),
        ("UNET_PEER_ID", udp_receiver.to_string()),
    ];
    if let Some(o) = outside {
        forger_env.push(("UNET_OUTSIDE", o.to_string()));
    }
    let mut abusers: Vec<Proc> = vec![
        spawn("big", &[]),
        spawn("memq", &[]),
        spawn("slots", &[]),
        spawn("idle", &[]),
        spawn("forger", &forger_env),
        spawn("churn", &[]),
        spawn("garbage", &[]),
        spawn("hostile", &[]),
        spawn("ring", &[]),
        spawn("regions", &[]),
        spawn("jobs", &[]),
        spawn("udmidle", &[]),
        spawn("listeners", &[]),
    ];
    let by_name = |abusers: &[Proc], n: &str| abusers.iter().position(|p| p.name == n).unwrap();
    let i_hostile = by_name(&abusers, "hostile");
    let hostile_ids = numbers(&abusers[i_hostile].expect("ID", Duration::from_secs(20)));
    let i_ring = by_name(&abusers, "ring");
    let ring_id = abusers[i_ring]
        .expect("ID", Duration::from_secs(20))
        .parse::<u32>()
        .unwrap();
    let i_churn = by_name(&abusers, "churn");
    abusers[i_churn].expect("ID", Duration::from_secs(20));
    let i_idle = by_name(&abusers, "udmidle");
    let idle_nodes = abusers[i_idle].expect("ID", Duration::from_secs(20));
    let i_listen = by_name(&abusers, "listeners");
    let tags = abusers[i_listen].expect("ID", Duration::from_secs(20));
    abusers.push(spawn(
        "flood",
        &[
            ("UNET_TAGS", tags.clone()),
            ("UNET_HOME", a_lo.to_string()),
            ("UNET_SOCKET_B", b.socket.display().to_string()),
        ],
    ));
    eprintln!("idle UDM nodes held: {idle_nodes}; discriminators listened on: {tags}");

    // Victims, killed at random moments, for the whole run.
    let mut rng = Rng::seeded();
    let (mut kills, mut kills_up) = (0u64, 0u64);
    let abuse_start = Instant::now();
    while abuse_start.elapsed() < ABUSE {
        let mut c = child_cmd(None, "victim");
        c.env("UNET_SOCKET", &a.socket);
        let mut v = Proc::spawn("victim", c);
        std::thread::sleep(Duration::from_millis(20 + rng.below(380)));
        let mut up = false;
        while let Some(l) = v.raw_line(Duration::ZERO) {
            up |= l.contains("@@ UP");
            assert!(!l.contains("@@ FAIL"), "victim: {l}");
        }
        // Until one victim has been killed with its endpoints up, wait for
        // this one to come up (a busy machine can take longer than the
        // random moment to start it), so that the run always kills a set
        // up client and not only ones still starting.
        if !up && kills_up == 0 {
            let end = Instant::now() + Duration::from_secs(20);
            while !up && Instant::now() < end {
                if let Some(l) = v.raw_line(Duration::from_millis(100)) {
                    up |= l.contains("@@ UP");
                    assert!(!l.contains("@@ FAIL"), "victim: {l}");
                }
            }
        }
        v.kill9();
        kills += 1;
        kills_up += up as u64;
    }

    // Stop: the churn makes no more peers and its server reads the last
    // ones, the abusers report while they still hold their endpoints, the
    // honest senders end their streams.
    abusers[i_churn].tell("stop");
    let churned = abusers[i_churn].expect("CHURNED", Duration::from_secs(60));
    let mut reports = Vec::new();
    for p in abusers.iter_mut().filter(|p| p.name != "churn") {
        p.tell("stop");
    }
    for p in abusers.iter_mut() {
        let r = p.expect("STOPPED", Duration::from_secs(20));
        eprintln!("{}: {r}", p.name);
        reports.push((p.name.clone(), numbers(&r)));
    }
    for x in pairs.iter_mut() {
        x.send.tell("stop");
    }
    let mut honest = Vec::new();
    for x in pairs.iter_mut() {
        let r = numbers(&x.recv.expect("DONE", Duration::from_secs(30)));
        let s = numbers(&x.send.expect("DONE", Duration::from_secs(10)));
        honest.push((r, s));
    }
    let sa = a.stat();
    let sb = b.stat();
    let report = |n: &str| &reports.iter().find(|(m, _)| m == n).unwrap().1;

    // Every honest message exactly once, intact, in order (the receivers
    // checked each; here: the counts agree, and the engines saw nothing
    // dropped on the honest endpoints).
    for (x, (r, s)) in pairs.iter().zip(&honest) {
        let (rounds, msgs, bytes) = (r[0], r[1], r[2]);
        eprintln!(
            "honest {}: {rounds} rounds, {msgs} messages, {bytes} bytes",
            x.path
        );
        assert_eq!(
            (s[0], s[1]),
            (rounds, msgs),
            "{}: sender and receiver disagree",
            x.path
        );
        assert!(rounds >= 2, "{}: only {rounds} rounds in {ABUSE:?}", x.path);
        // Every message and header (the last one, 0, included).
        let all = msgs + rounds + 1;
        match x.path {
            "direct" => {
                assert_eq!(
                    client_counter(&sa, x.recv_id, "direct_rx_msgs"),
                    all,
                    "{sa}"
                );
                assert_eq!(
                    client_counter(&sa, x.send_id, "direct_tx_msgs"),
                    all,
                    "{sa}"
                );
                assert_eq!(client_counter(&sa, x.recv_id, "direct_rx_bad"), 0, "{sa}");
            }
            "engine" => {
                assert_eq!(ep_counter(&sa, x.send_id, "tx_msgs"), all, "{sa}");
                assert_eq!(ep_counter(&sa, x.recv_id, "rx_msgs"), all, "{sa}");
            }
            _ => {
                assert_eq!(ep_counter(&sb, x.send_id, "wire_tx_msgs"), all, "{sb}");
                assert_eq!(ep_counter(&sa, x.recv_id, "wire_rx_msgs"), all, "{sa}");
            }
        }
        let (ss, sid) = if x.path == "auto" {
            (&sb, x.send_id)
        } else {
            (&sa, x.send_id)
        };
        for (st, id) in [(&sa, x.recv_id), (ss, sid)] {
            for c in [
                "rx_drop_no_buffer",
                "rx_drop_ring_full",
                "rx_drop_too_large",
                "tx_bad_channel",
                "tx_bad_buffer",
                "tx_bad_length",
                "tx_bad_flags",
                "ring_corrupt",
                "free_bad_offset",
            ] {
                assert_eq!(
                    ep_counter(st, id, c),
                    0,
                    "honest {} endpoint {id}: {c}\n{st}",
                    x.path
                );
            }
        }
    }

    // The abuse was real.
    let eng = |n: &str| engine_counter(&sa, n);
    let (h1, h2) = (hostile_ids[0] as u32, hostile_ids[1] as u32);
    let mut figures = Vec::new();
    let mut positive = |what: String, v: u64| {
        figures.push(format!("{what}={v}"));
        assert!(v > 0, "no abuse seen: {what} is 0\n{sa}");
    };
    for c in ["tx_bad_channel", "tx_bad_buffer", "tx_bad_length"] {
        positive(format!("hostile {c}"), ep_counter(&sa, h1, c));
    }
    positive(
        "scribbled ring_corrupt+free_bad_offset".into(),
        ep_counter(&sa, h2, "ring_corrupt") + ep_counter(&sa, h2, "free_bad_offset"),
    );
    let ring_bad = client_counter(&sa, ring_id, "direct_rx_bad");
    positive("ring direct_rx_bad".into(), ring_bad);
    assert_eq!(
        ring_bad,
        report("ring")[0],
        "a ring round without its break"
    );
    for c in [
        "control_bad",
        "control_drop_empty",
        "control_drop_oversize",
        "control_drop_idle_limit",
        "quota_refused_memory",
        "quota_refused_endpoints",
        "wire_drop_bad_magic",
    ] {
        positive(c.into(), eng(c));
    }
    positive(
        "wire_drop_forged_token+wire_drop_unknown_channel".into(),
        eng("wire_drop_forged_token") + eng("wire_drop_unknown_channel"),
    );
    if outside.is_some() {
        positive(
            "wire_drop_peer_not_allowed".into(),
            eng("wire_drop_peer_not_allowed"),
        );
    } else {
        positive(
            "wire_open_refused+wire_drop_unknown_endpoint".into(),
            eng("wire_open_refused") + eng("wire_drop_unknown_endpoint"),
        );
    }
    positive("big endpoints made".into(), report("big")[0]);
    positive("memq refusals".into(), report("memq")[1]);
    positive("slots refusals".into(), report("slots")[1]);
    positive("idle connections closed".into(), report("idle")[1]);
    positive("regions refusals".into(), report("regions")[1]);
    positive("jobs refusals".into(), report("jobs")[1]);
    positive("idle UDM nodes".into(), report("udmidle")[0]);
    positive("listeners refusals".into(), report("listeners")[1]);
    positive("flood requests".into(), report("flood")[0]);
    let churned = numbers(&churned);
    assert!(
        (CHURN_MIN..=CHURN_PEERS).contains(&churned[0]),
        "churned peers: {}",
        churned[0]
    );
    assert!(
        eng("direct_conns") >= churned[0],
        "direct_conns {}",
        eng("direct_conns")
    );
    positive("victims killed after set-up".into(), kills_up);
    figures.push(format!("victims killed={kills}"));
    figures.push(format!(
        "churn of {} peers took {} ms",
        churned[0], churned[1]
    ));
    figures.push(format!("direct_conns={}", eng("direct_conns")));
    figures.push(format!("endpoints_created={}", eng("endpoints_created")));
    figures.push(format!(
        "endpoints_reclaimed={}",
        eng("endpoints_reclaimed")
    ));
    figures.push(format!("control_accepted={}", eng("control_accepted")));
    eprintln!("abuse: {}", figures.join(" "));

    // The abusers go (SIGKILL, all but the churn and the idle one, which
    // leave by themselves), then the honest clients, cleanly.
    for p in abusers.iter_mut() {
        if p.name == "churn" || p.name == "idle" {
            p.finish(Duration::from_secs(10));
        } else {
            p.kill9();
        }
    }
    for x in pairs.iter_mut() {
        x.send.finish(Duration::from_secs(10));
        x.recv.finish(Duration::from_secs(10));
    }

    // Back to the baseline.
    let settle = Instant::now();
    let (fds1, eps1, rss1, shm1) = loop {
        let st = a.stat();
        let eps = endpoints(&st).len();
        std::thread::sleep(Duration::from_millis(100));
        let fds = fd_count(a.pid());
        let (r, s) = rss(a.pid());
        if (eps == 0 && fds == fds0 && r <= rss0 + RSS_SLACK)
            || settle.elapsed() > Duration::from_secs(15)
        {
            break (fds, eps, r, s);
        }
    };
    let after = format!(
        "after {:?} of settling: {fds1} descriptors (were {fds0}), {eps1} endpoints, \
         {} KiB resident (was {}), {} KiB shared (was {})",
        settle.elapsed(),
        rss1 >> 10,
        rss0 >> 10,
        shm1 >> 10,
        shm0 >> 10
    );
    eprintln!("{after}");
    assert_eq!(eps1, 0, "endpoints left: {after}");
    assert_eq!(fds1, fds0, "descriptors leak: {after}");
    assert!(rss1 <= rss0 + RSS_SLACK, "resident memory grew: {after}");
    a.stop();
    b.stop();
    eprintln!("soak: {:?} in all", t_start.elapsed());
}
