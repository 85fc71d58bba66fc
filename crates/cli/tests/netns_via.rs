//! VIA between two hosts: two network namespaces joined by a veth pair, a
//! `unet daemon` with a UDP wire in each, injecting 5 % loss, 1 %
//! duplication and 1 % reordering into the data-path datagrams it sends
//! (Data and VI acks, both directions, seeded), client processes in each.
//!
//! - 100 000 messages of mixed sizes (1 byte to 64 KiB, many fragmented)
//!   from a process on host a to one on host b over a VI of reliable
//!   delivery, then over one of reliable reception: every message arrives
//!   exactly once, in order, intact, and the VIs' counters show the
//!   repairs (retransmissions, duplicates and out-of-order arrivals
//!   discarded).
//! - The sending process is killed (SIGKILL) mid-stream: the receiving VI
//!   breaks within 3 s, every receive it had posted completes with an
//!   error (none with success after the first error), and a new
//!   connection on the same discriminator carries a stream afterwards.
//!
//! Needs root (CAP_NET_ADMIN) and `ip` from iproute2; fails, never skips,
//! when either is missing.

mod common;

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use common::hosts::*;
use common::*;
use unet::{MemRegion, Reliability, Session, Vi, ViAttributes, ViSeg, ViState, WaitError};

/// The impairment both daemons inject into what they send (seed).
const SEED: &str = "7";

/// Messages per reliability level.
const COUNT: u64 = 100_000;

/// Bytes of a buffer slot: the largest message.
const SLOT: usize = 64 << 10;

/// Receives a receiver keeps posted.
const RECV_WINDOW: u64 = 256;

/// Sends a sender keeps posted.
const SEND_WINDOW: u64 = 256;

// -------------------------------------------------------------------------
// Child side
// -------------------------------------------------------------------------

/// CLOCK_MONOTONIC in nanoseconds: the same clock in every namespace of
/// the machine, so a child's reading compares with the parent's.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn level() -> Reliability {
    match env("UNET_LEVEL").as_str() {
        "delivery" => Reliability::ReliableDelivery,
        "reception" => Reliability::ReliableReception,
        l => fail(&format!("unknown level {l}")),
    }
}

fn attrs() -> ViAttributes {
    ViAttributes {
        reliability: level(),
        ..ViAttributes::default()
    }
}

fn session() -> Session {
    let socket = env("UNET_SOCKET");
    Session::connect(&socket).unwrap_or_else(|e| fail(&format!("connect {socket}: {e}")))
}

/// A VI's engine counters as `name=value` words.
fn counters_line(vi: &mut Vi) -> String {
    vi.engine_counters()
        .into_iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Post receive `seq` into its slot.
fn post_recv(vi: &mut Vi, region: &MemRegion, seq: u64) {
    let at = (seq % RECV_WINDOW) as usize * SLOT;
    vi.post_recv(seq, &[ViSeg::new(region, at, SLOT)])
        .unwrap_or_else(|e| fail(&format!("post receive {seq}: {e}")));
}

/// Check completed receive `seq`: its length and content.
fn check_recv(region: &MemRegion, seq: u64, len: usize, buf: &mut [u8], scratch: &mut Vec<u8>) {
    let want = size_of_seq(seq);
    if len != want {
        fail(&format!("message {seq}: {len} bytes instead of {want}"));
    }
    region.read((seq % RECV_WINDOW) as usize * SLOT, &mut buf[..len]);
    if !check(seq, &buf[..len], scratch) {
        fail(&format!(
            "message {seq} ({len} bytes): content differs (number field {:?})",
            seq_of(&buf[..len])
        ));
    }
}

/// Receive `count` messages on `vi`: each exactly once, in order, intact.
fn receive_stream(vi: &mut Vi, region: &MemRegion, count: u64) {
    let mut buf = vec![0u8; SLOT];
    let mut scratch = Vec::new();
    let mut posted = 0;
    for seq in 0..count {
        while posted < count && posted - seq < RECV_WINDOW {
            post_recv(vi, region, posted);
            posted += 1;
        }
        let c = vi.recv_wait(Some(T)).unwrap_or_else(|e| {
            fail(&format!(
                "waiting for message {seq}: {e} ({:?}; {})",
                vi.state(),
                counters_line(vi)
            ))
        });
        if c.id != seq {
            fail(&format!("receive {} completed in place of {seq}", c.id));
        }
        let len = c
            .status
            .unwrap_or_else(|e| fail(&format!("message {seq}: {e} ({})", counters_line(vi))));
        check_recv(region, seq, len, &mut buf, &mut scratch);
    }
}

/// Send `count` messages on `vi`, saying `HALFWAY` once `halfway` are
/// posted; returns when every send completed.
fn send_stream(vi: &mut Vi, region: &MemRegion, count: u64, halfway: u64) {
    let mut msg = vec![0u8; SLOT];
    let (mut sent, mut done) = (0u64, 0u64);
    while done < count {
        while sent < count && sent - done < SEND_WINDOW {
            let len = size_of_seq(sent);
            fill(sent, &mut msg[..len]);
            let at = (sent % SEND_WINDOW) as usize * SLOT;
            region.write(at, &msg[..len]);
            vi.post_send(sent, &[ViSeg::new(region, at, len)])
                .unwrap_or_else(|e| fail(&format!("post send {sent}: {e}")));
            sent += 1;
            if sent == halfway {
                say("HALFWAY");
            }
        }
        let c = match vi.send_done() {
            Some(c) => c,
            None => vi.send_wait(Some(T)).unwrap_or_else(|e| {
                fail(&format!(
                    "waiting for send {done}: {e} ({:?}; {})",
                    vi.state(),
                    counters_line(vi)
                ))
            }),
        };
        if c.id != done || c.status != Ok(size_of_seq(done)) {
            fail(&format!("send {done} completed as {c:?}"));
        }
        done += 1;
    }
}

/// `vi-send`: connect to `UNET_TAG` at `UNET_PEER_HOST`, send
/// `UNET_COUNT` messages, report `DONE` with the VI's counters, hold.
fn vi_send() {
    let s = session();
    let host = env("UNET_PEER_HOST")
        .parse()
        .unwrap_or_else(|_| fail("UNET_PEER_HOST is not an address"));
    let tag = env_u64("UNET_TAG");
    let mut vi = s
        .vi_connect(Some(host), tag, &attrs(), Some(T))
        .unwrap_or_else(|e| fail(&format!("connect to {tag} at {host}: {e}")));
    let region = s
        .register_memory(SEND_WINDOW as usize * SLOT)
        .unwrap_or_else(|e| fail(&format!("register: {e}")));
    say("CONNECTED");
    let count = env_u64("UNET_COUNT");
    let halfway = std::env::var("UNET_HALFWAY")
        .ok()
        .and_then(|h| h.parse().ok())
        .unwrap_or(u64::MAX);
    let t = Instant::now();
    send_stream(&mut vi, &region, count, halfway);
    say(&format!(
        "DONE {} {}",
        t.elapsed().as_millis(),
        counters_line(&mut vi)
    ));
    hold();
}

/// `vi-recv`: listen on `UNET_TAG`, accept one connection, receive
/// `UNET_COUNT` messages, report `DONE` with the VI's counters, hold.
fn vi_recv() {
    let s = session();
    let tag = env_u64("UNET_TAG");
    let server = s
        .vi_listen(tag)
        .unwrap_or_else(|e| fail(&format!("listen on {tag}: {e}")));
    let region = s
        .register_memory(RECV_WINDOW as usize * SLOT)
        .unwrap_or_else(|e| fail(&format!("register: {e}")));
    say("LISTENING");
    let mut vi = server
        .accept(&attrs(), Some(T))
        .unwrap_or_else(|e| fail(&format!("accept on {tag}: {e}")));
    let count = env_u64("UNET_COUNT");
    receive_stream(&mut vi, &region, count);
    say(&format!("DONE {}", counters_line(&mut vi)));
    hold();
}

/// `vi-recv-broken`: listen on `UNET_TAG`, accept, receive (in order,
/// checked) until the VI breaks; check that every receive posted then
/// completes with an error, report `BROKEN`; then accept a second
/// connection on the same discriminator, receive `UNET_COUNT` messages on
/// it, report `SECOND`, hold.
fn vi_recv_broken() {
    let s = session();
    let tag = env_u64("UNET_TAG");
    let server = s
        .vi_listen(tag)
        .unwrap_or_else(|e| fail(&format!("listen on {tag}: {e}")));
    let region = s
        .register_memory(RECV_WINDOW as usize * SLOT)
        .unwrap_or_else(|e| fail(&format!("register: {e}")));
    say("LISTENING");
    let mut vi = server
        .accept(&attrs(), Some(T))
        .unwrap_or_else(|e| fail(&format!("accept on {tag}: {e}")));
    let mut buf = vec![0u8; SLOT];
    let mut scratch = Vec::new();
    let (mut posted, mut got) = (0u64, 0u64);
    // Receive until the first error, reposting as messages arrive.
    let (first_error_ns, first_error, outstanding) = loop {
        while posted - got < RECV_WINDOW {
            post_recv(&mut vi, &region, posted);
            posted += 1;
        }
        let c = vi.recv_wait(Some(T)).unwrap_or_else(|e| {
            fail(&format!(
                "waiting for message {got}: {e} ({:?}; {})",
                vi.state(),
                counters_line(&mut vi)
            ))
        });
        if c.id != got {
            fail(&format!("receive {} completed in place of {got}", c.id));
        }
        match c.status {
            Ok(len) => check_recv(&region, got, len, &mut buf, &mut scratch),
            Err(e) => break (monotonic_ns(), e, posted - got),
        }
        got += 1;
    };
    // Every other receive posted completes too, in order, with an error.
    let mut errors = 1;
    loop {
        match vi.recv_wait(Some(T)) {
            Ok(c) => {
                if c.id != got + errors {
                    fail(&format!(
                        "receive {} completed in place of {}",
                        c.id,
                        got + errors
                    ));
                }
                if let Ok(len) = c.status {
                    fail(&format!(
                        "receive {} completed with {len} bytes after the VI broke ({first_error})",
                        c.id
                    ));
                }
                errors += 1;
            }
            Err(WaitError::Empty(Some(_))) => break,
            Err(e) => fail(&format!("after {errors} errors: {e}")),
        }
    }
    if errors != outstanding {
        fail(&format!(
            "{outstanding} receives outstanding when the VI broke, {errors} completed with an error"
        ));
    }
    let state = vi.state();
    if !matches!(state, ViState::Error(_)) {
        fail(&format!("the VI is {state:?} after an error completion"));
    }
    // Posted on a broken VI: completes with an error at once.
    post_recv(&mut vi, &region, posted);
    match vi.recv_wait(Some(T)) {
        Ok(c) if c.id == posted && c.status.is_err() => {}
        r => fail(&format!("a receive posted on the broken VI: {r:?}")),
    }
    say(&format!(
        "BROKEN {first_error_ns} {got} {errors} {first_error:?} {state:?}"
    ));
    drop(vi);
    // A new connection on the same discriminator.
    let mut vi = server
        .accept(&attrs(), Some(T))
        .unwrap_or_else(|e| fail(&format!("second accept on {tag}: {e}")));
    let count = env_u64("UNET_COUNT");
    receive_stream(&mut vi, &region, count);
    say(&format!("SECOND {count} {}", counters_line(&mut vi)));
    hold();
}

#[test]
fn child() {
    let Some(role) = role() else { return };
    watchdog(100);
    match role.as_str() {
        "vi-send" => vi_send(),
        "vi-recv" => vi_recv(),
        "vi-recv-broken" => vi_recv_broken(),
        r => panic!("unknown role {r}"),
    }
}

// -------------------------------------------------------------------------
// Parent side
// -------------------------------------------------------------------------

/// `name=value` words as a map.
fn parse_counters(words: &str) -> HashMap<String, u64> {
    words
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(n, v)| (n.to_string(), v.parse().expect("a counter value")))
        .collect()
}

fn receiver(h: &Hosts, d: &Daemon, role: &str, tag: u64, level: &str, count: u64) -> Proc {
    let mut c = child_cmd(Some(&h.b), role);
    c.env("UNET_SOCKET", &d.socket)
        .env("UNET_TAG", tag.to_string())
        .env("UNET_LEVEL", level)
        .env("UNET_COUNT", count.to_string());
    let mut p = Proc::spawn(&format!("{role} {level}"), c);
    p.expect("LISTENING", Duration::from_secs(20));
    p
}

fn sender(h: &Hosts, da: &Daemon, db: &Daemon, tag: u64, level: &str, count: u64) -> Command {
    let mut c = child_cmd(Some(&h.a), "vi-send");
    c.env("UNET_SOCKET", &da.socket)
        .env("UNET_PEER_HOST", db.udp.expect("a wire").to_string())
        .env("UNET_TAG", tag.to_string())
        .env("UNET_LEVEL", level)
        .env("UNET_COUNT", count.to_string());
    c
}

#[test]
fn reliable_levels_carry_100k_messages_over_an_impaired_wire() {
    let t = Instant::now();
    let h = Hosts::new(98, "v", 0);
    let mut da = h.wire(&h.a, &impaired(SEED));
    let mut db = h.wire(&h.b, &impaired(SEED));
    for (tag, level) in [(10u64, "delivery"), (11, "reception")] {
        let t0 = Instant::now();
        let mut r = receiver(&h, &db, "vi-recv", tag, level, COUNT);
        let mut s = Proc::spawn(
            &format!("vi-send {level}"),
            sender(&h, &da, &db, tag, level, COUNT),
        );
        s.expect("CONNECTED", Duration::from_secs(20));
        let rx = parse_counters(&r.expect("DONE", Duration::from_secs(90)));
        let done = s.expect("DONE", Duration::from_secs(30));
        let (ms, words) = done.split_once(' ').unwrap_or((&done, ""));
        let tx = parse_counters(words);
        let bytes: u64 = (0..COUNT).map(|s| size_of_seq(s) as u64).sum();
        eprintln!(
            "reliable {level}: {COUNT} messages ({bytes} bytes) exactly once, in order, \
             intact in {ms} ms ({:?} with set-up)\n  \
             sender VI:   retransmits {} timeouts {} probes {} acks_rx {} bogus_acks {}\n  \
             receiver VI: duplicates {} out_of_order {} over_window {} acks_tx {} held_total {}",
            t0.elapsed(),
            tx["retransmits"],
            tx["timeouts"],
            tx["probes"],
            tx["acks_rx"],
            tx["bogus_acks"],
            rx["duplicates"],
            rx["out_of_order"],
            rx["over_window"],
            rx["acks_tx"],
            rx["held_total"],
        );
        assert_eq!(tx["tx_msgs"], COUNT, "sender {tx:?}");
        assert_eq!(rx["rx_msgs"], COUNT, "receiver {rx:?}");
        assert!(tx["retransmits"] > 0, "no retransmission: {tx:?}");
        assert!(rx["duplicates"] > 0, "no duplicate discarded: {rx:?}");
        assert!(rx["out_of_order"] > 0, "no out-of-order arrival: {rx:?}");
        assert_eq!(tx["errors"] + rx["errors"], 0, "{tx:?} {rx:?}");
        s.finish(Duration::from_secs(10));
        r.finish(Duration::from_secs(10));
    }
    // The daemons injected what they were asked to, both ways.
    for (name, d) in [("a", &da), ("b", &db)] {
        let st = d.stat();
        let c = |n: &str| engine_counter(&st, n);
        eprintln!(
            "daemon {name}: sent {} datagrams; injected {} drops, {} duplicates, {} reorders",
            c("wire_tx_datagrams"),
            c("wire_drop_injected_drop"),
            c("wire_injected_duplicates"),
            c("wire_injected_reorders"),
        );
        for n in [
            "wire_drop_injected_drop",
            "wire_injected_duplicates",
            "wire_injected_reorders",
        ] {
            assert!(c(n) > 0, "daemon {name}: no {n}:\n{st}");
        }
    }
    da.stop();
    db.stop();
    eprintln!("impaired wire, both levels: {:?}", t.elapsed());
}

#[test]
fn a_killed_sender_breaks_the_receiving_vi_within_3_s() {
    let t = Instant::now();
    let h = Hosts::new(98, "k", 1);
    let mut da = h.wire(&h.a, &impaired(SEED));
    let mut db = h.wire(&h.b, &impaired(SEED));
    const TAG: u64 = 20;
    const SECOND: u64 = 5000;
    let mut r = receiver(&h, &db, "vi-recv-broken", TAG, "delivery", SECOND);
    // An endless stream (more than it can send before the kill).
    let mut c = sender(&h, &da, &db, TAG, "delivery", u64::MAX / 2);
    c.env("UNET_HALFWAY", "5000");
    let mut s = Proc::spawn("vi-send (killed)", c);
    s.expect("CONNECTED", Duration::from_secs(20));
    s.expect("HALFWAY", Duration::from_secs(30));
    let killed_ns = monotonic_ns();
    s.kill9();
    let broken = r.expect("BROKEN", Duration::from_secs(10));
    let f: Vec<&str> = broken.split_whitespace().collect();
    let error_ns: u64 = f[0].parse().unwrap();
    let after = Duration::from_nanos(error_ns.saturating_sub(killed_ns));
    eprintln!(
        "sender killed after {} messages received: the receiving VI broke {after:?} later \
         ({} then {}); {} receives posted completed with an error",
        f[1], f[3], f[4], f[2]
    );
    assert!(error_ns >= killed_ns, "the VI broke before the kill");
    assert!(
        after < Duration::from_secs(3),
        "the receiving VI broke {after:?} after the kill"
    );
    assert!(
        f[1].parse::<u64>().unwrap() > 0,
        "nothing arrived before the kill"
    );
    // A new sender, the same discriminator.
    let mut s2 = Proc::spawn(
        "vi-send (second)",
        sender(&h, &da, &db, TAG, "delivery", SECOND),
    );
    s2.expect("CONNECTED", Duration::from_secs(20));
    let second = r.expect("SECOND", Duration::from_secs(60));
    s2.expect("DONE", Duration::from_secs(30));
    eprintln!("second connection on the same discriminator: {second}");
    s2.finish(Duration::from_secs(10));
    r.finish(Duration::from_secs(10));
    da.stop();
    db.stop();
    eprintln!("kill test: {:?}", t.elapsed());
}
