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

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use unet::{
    ChannelOptions, ClientCounter, EndpointConfig, Error, ErrorCode, Event, Geometry, PathChoice,
    RecvError, SendError, Session, ViAttributes,
};
use unet_abi::{record_tag, Layout, CONN_HEADER_SIZE, RECORD_PAD};
use unet_engine::wire::{Body, Data, Frame, OpenRequest};

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

fn geometry_of(area: u64) -> EndpointConfig {
    EndpointConfig {
        geometry: Geometry {
            buffer_area_size: area,
            ..Geometry::default()
        },
        managed_buffers: false,
        ..EndpointConfig::default()
    }
}

/// A large endpoint, made and dropped again and again.
fn big() {
    let stop = stop_flag();
    let s = session();
    let mut made = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let ep = s
            .create_endpoint(geometry_of(128 << 20))
            .unwrap_or_else(|e| fail(&format!("a 128 MiB endpoint: {e}")));
        made += 1;
        std::thread::sleep(Duration::from_millis(200));
        drop(ep);
        std::thread::sleep(Duration::from_millis(100));
    }
    say(&format!("STOPPED {made}"));
    hold();
}

/// Several sessions of one process, 24 MiB endpoints until the memory
/// quota refuses one; then they let go and start again.
fn memq() {
    let stop = stop_flag();
    let sessions: Vec<Session> = (0..4).map(|_| session()).collect();
    let (mut made, mut refused) = (0u64, 0u64);
    let mut held = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let s = &sessions[held.len() % sessions.len()];
        match s.create_endpoint(geometry_of(24 << 20)) {
            Ok(ep) => {
                made += 1;
                held.push(ep);
                if held.len() > 12 {
                    fail("twelve 24 MiB endpoints and no quota");
                }
            }
            Err(Error::Quota(ErrorCode::QuotaExceeded)) => {
                refused += 1;
                std::thread::sleep(Duration::from_millis(100));
                held.clear();
            }
            Err(e) => fail(&format!("endpoint {made}: {e}")),
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    say(&format!("STOPPED {made} {refused}"));
    hold();
}

/// The smallest endpoint.
fn small() -> EndpointConfig {
    EndpointConfig {
        geometry: Geometry {
            buffer_size: 4096,
            buffer_area_size: 4096,
            send_cap: 2,
            recv_cap: 2,
            free_cap: 2,
            event_cap: 2,
        },
        managed_buffers: false,
        ..EndpointConfig::default()
    }
}

/// One process after every endpoint slot: small endpoints until the
/// endpoint quota refuses one.
fn slots() {
    let stop = stop_flag();
    let s = session();
    let (mut made, mut refused) = (0u64, 0u64);
    let mut held = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match s.create_endpoint(small()) {
            Ok(ep) => {
                made += 1;
                held.push(ep);
                if held.len() > 64 {
                    fail("64 endpoints and no quota");
                }
            }
            Err(Error::Quota(ErrorCode::EndpointQuota)) => {
                refused += 1;
                std::thread::sleep(Duration::from_millis(300));
                held.clear();
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => fail(&format!("endpoint {made}: {e}")),
        }
    }
    say(&format!("STOPPED {made} {refused}"));
    hold();
}

/// How many of `conns` the daemon has closed (they read end-of-file).
fn closed(conns: &[OwnedFd]) -> u64 {
    let mut buf = [0u8; 64];
    conns
        .iter()
        .filter(|c| {
            let mut fds = Vec::new();
            matches!(
                unet_sys::recv_packet(c.as_raw_fd(), &mut buf, &mut fds, true),
                Ok(0)
            )
        })
        .count() as u64
}

/// 40 connections that never say anything, again and again.
fn idle() {
    let stop = stop_flag();
    let socket = std::path::PathBuf::from(env("UNET_SOCKET"));
    let (mut opened, mut shut) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let conns: Vec<OwnedFd> = (0..40)
            .filter_map(|_| unet_sys::connect_seqpacket(&socket).ok())
            .collect();
        opened += conns.len() as u64;
        std::thread::sleep(Duration::from_millis(300));
        shut += closed(&conns);
        drop(conns);
        std::thread::sleep(Duration::from_millis(100));
    }
    say(&format!("STOPPED {opened} {shut}"));
    hold();
}

/// Small memory regions (one byte each) until a limit of the process
/// refuses one (the regions cap, or the memory they are charged: at
/// least a page each); then it lets go and starts again.
fn regions() {
    let stop = stop_flag();
    let s = session();
    let (mut made, mut refused) = (0u64, 0u64);
    let mut held = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match s.register_memory(1) {
            Ok(r) => {
                made += 1;
                held.push(r);
                if held.len() > 4096 {
                    fail("4096 one-byte regions and no limit");
                }
            }
            Err(Error::Quota(_)) => {
                refused += 1;
                std::thread::sleep(Duration::from_millis(200));
                held.clear();
            }
            Err(e) => fail(&format!("region {made}: {e}")),
        }
    }
    say(&format!("STOPPED {made} {refused}"));
    hold();
}

/// UDM jobs created on a throwaway session, joined on a kept one, the
/// throwaway closed (the job must stay charged to this process), until a
/// limit refuses one; then it lets go and starts again.
fn jobs() {
    let stop = stop_flag();
    let kept = session();
    let cfg = unet::udm::JobConfig {
        nodes: 2,
        buffer_size: 4 << 20,
        ..Default::default()
    };
    let (mut made, mut refused) = (0u64, 0u64);
    let mut held = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let throwaway = session();
        match throwaway.udm_create_job(&cfg) {
            Ok(t) => {
                let n = kept
                    .udm_join(t, 0)
                    .unwrap_or_else(|e| fail(&format!("join job {made}: {e}")));
                drop(throwaway);
                made += 1;
                held.push(n);
                if held.len() > 64 {
                    fail("64 jobs outlived their creator's session and no limit");
                }
            }
            Err(Error::Quota(_)) => {
                refused += 1;
                std::thread::sleep(Duration::from_millis(200));
                held.clear();
            }
            Err(e) => fail(&format!("job {made}: {e}")),
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    say(&format!("STOPPED {made} {refused}"));
    hold();
}

/// Idle UDM nodes: jobs of 16 nodes, every node joined by this process
/// and holding one unread message, as many as its limits allow; then it
/// sleeps and touches nothing (the engine must neither slow down for
/// them nor poll them).
fn udm_idle() {
    let stop = stop_flag();
    let s = session();
    let cfg = unet::udm::JobConfig {
        nodes: 16,
        buffer_size: 64 << 10,
        ..Default::default()
    };
    let (mut nodes, mut refused) = (Vec::new(), 0u64);
    'jobs: for _ in 0..32 {
        let t = match s.udm_create_job(&cfg) {
            Ok(t) => t,
            Err(Error::Quota(_)) => {
                refused += 1;
                break;
            }
            Err(e) => fail(&format!("idle job: {e}")),
        };
        let mut mine = Vec::new();
        for r in 0..cfg.nodes {
            match s.udm_join(t, r) {
                Ok(n) => mine.push(n),
                Err(Error::Quota(_)) => {
                    refused += 1;
                    nodes.extend(mine);
                    break 'jobs;
                }
                Err(e) => fail(&format!("idle node {r}: {e}")),
            }
        }
        let k = mine.len() as u32;
        for (i, n) in mine.iter_mut().enumerate() {
            let _ = n.injectc((i as u32 + 1) % k, 1, &[i as u64]);
        }
        nodes.extend(mine);
    }
    say(&format!("ID {}", nodes.len()));
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    say(&format!("STOPPED {} {refused}", nodes.len()));
    hold();
}

/// Listens on discriminators until a limit refuses one and never answers
/// a request: the prey of the flood.
fn listeners() {
    let stop = stop_flag();
    let s = session();
    let (mut servers, mut refused) = (Vec::new(), 0u64);
    for tag in 0..10_000u64 {
        match s.vi_listen(0xF100_0000 + tag) {
            Ok(v) => servers.push(v),
            Err(Error::Quota(_)) => {
                refused += 1;
                break;
            }
            Err(e) => fail(&format!("listen {tag}: {e}")),
        }
    }
    say(&format!("ID {}", servers.len()));
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    say(&format!("STOPPED {} {refused}", servers.len()));
    hold();
}

/// Connection requests to the listeners' discriminators, from the other
/// engine over the wire (`UNET_HOME`) and from this one, as fast as 32
/// threads can make them, none ever answered.
fn flood() {
    let stop = stop_flag();
    let tags: u64 = env("UNET_TAGS").parse().unwrap();
    let home: SocketAddr = env("UNET_HOME").parse().unwrap();
    let made = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..32u64)
        .map(|t| {
            let (stop, made) = (stop.clone(), made.clone());
            std::thread::spawn(move || {
                let local = session();
                let remote = Session::connect(env("UNET_SOCKET_B"))
                    .unwrap_or_else(|e| fail(&format!("connect to b: {e}")));
                let mut k = t;
                while !stop.load(Ordering::Relaxed) {
                    let tag = 0xF100_0000 + k % tags.max(1);
                    let (s, host) = if k % 2 == 0 {
                        (&remote, Some(home))
                    } else {
                        (&local, None)
                    };
                    let r = s.vi_connect(
                        host,
                        tag,
                        &ViAttributes::default(),
                        Some(Duration::from_millis(300)),
                    );
                    if let Ok(v) = r {
                        fail(&format!("a request nobody answered connected: {}", v.id()));
                    }
                    made.fetch_add(1, Ordering::Relaxed);
                    k += 32;
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    say(&format!("STOPPED {}", made.load(Ordering::Relaxed)));
    hold();
}

fn open_request(dst_endpoint: u32, request_id: u32) -> Vec<u8> {
    let f = Frame {
        src_engine: 0x5eed,
        body: Body::OpenRequest(OpenRequest {
            src_endpoint: 1,
            dst_endpoint,
            request_id,
            src_channel: 0,
            src_token: 0x1111,
            flags: 0,
        }),
    };
    let mut b = vec![0u8; f.len()];
    f.emit(&mut b).expect("emit an open request");
    b
}

fn data_frame(dst_endpoint: u32, dst_channel: u16, token: u64, payload: &[u8]) -> Vec<u8> {
    let f = Frame {
        src_engine: 0x5eed,
        body: Body::Data(Data {
            dst_endpoint,
            dst_channel,
            flags: 0,
            token,
            msg_id: 0,
            frag_index: 0,
            frag_count: 1,
            msg_len: payload.len() as u32,
            frag_offset: 0,
            payload,
            ack: None,
        }),
    };
    let mut b = vec![0u8; f.len()];
    f.emit(&mut b).expect("emit a data frame");
    b
}

/// Forged datagrams from plain UDP sockets: open requests (from an
/// address that is not allowed, when the host has one; else from
/// loopback, to endpoints that do not exist), data frames with random
/// tokens on the honest receiver's first channels (from loopback, which
/// is allowed: only the token is wrong), and garbage.
fn forger() {
    let stop = stop_flag();
    let port: u16 = env_u64("UNET_UDP_PORT") as u16;
    let victim = env_u64("UNET_PEER_ID") as u32;
    let lo = SocketAddr::from(([127, 0, 0, 1], port));
    let outside: Option<IpAddr> = std::env::var("UNET_OUTSIDE")
        .ok()
        .map(|a| a.parse().expect("UNET_OUTSIDE is an address"));
    let lo_sock = UdpSocket::bind("127.0.0.1:0").expect("bind a UDP socket");
    let out_sock = outside.map(|a| {
        (
            UdpSocket::bind(SocketAddr::new(a, 0)).expect("bind on the outside address"),
            SocketAddr::new(a, port),
        )
    });
    for s in std::iter::once(&lo_sock).chain(out_sock.as_ref().map(|(s, _)| s)) {
        s.set_nonblocking(true).unwrap();
    }
    let mut rng = Rng::seeded();
    let (mut opens, mut datas, mut junk) = (0u64, 0u64, 0u64);
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..16 {
            let id = rng.next() as u32;
            match rng.below(4) {
                0 => {
                    opens += 1;
                    match &out_sock {
                        Some((s, to)) => {
                            let dst = if rng.below(2) == 0 {
                                victim
                            } else {
                                rng.below(64) as u32
                            };
                            let _ = s.send_to(&open_request(dst, id), to);
                        }
                        None => {
                            let _ = lo_sock.send_to(&open_request(100_000 + id % 1000, id), lo);
                        }
                    }
                }
                1 | 2 => {
                    datas += 1;
                    let len = 1 + rng.below(1000) as usize;
                    let payload = vec![0xa5u8; len];
                    let d = data_frame(victim, rng.below(4) as u16, rng.next(), &payload);
                    let _ = lo_sock.send_to(&d, lo);
                }
                _ => {
                    junk += 1;
                    let len = rng.below(1400) as usize;
                    let g: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                    let _ = lo_sock.send_to(&g, lo);
                }
            }
        }
        // Whatever answers come (refusals of opens to no endpoint).
        while lo_sock.recv_from(&mut buf).is_ok() {}
        if let Some((s, _)) = &out_sock {
            if s.recv_from(&mut buf).is_ok() {
                fail("an open from an address not allowed was answered");
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    say(&format!("STOPPED {opens} {datas} {junk}"));
    hold();
}

/// One server endpoint; up to CHURN_PEERS peers (until told to stop), each a session and endpoint of
/// its own in turn, open a direct channel to it, send one message and go.
/// The server checks every message ("peer N", each N once) and closes each
/// channel once it has read its message and seen its peer gone.
fn churn() {
    let stop = stop_flag();
    let s = session();
    let mut server = s
        .create_endpoint(EndpointConfig::default())
        .unwrap_or_else(|e| fail(&format!("server endpoint: {e}")));
    let addr = server.addr();
    say(&format!("ID {}", server.id()));
    let got = Arc::new(AtomicU64::new(0));
    // The number of peers, once they are all made.
    let total = Arc::new(AtomicU64::new(u64::MAX));
    let serving = {
        let got = got.clone();
        let total = total.clone();
        std::thread::spawn(move || {
            let mut seen = vec![false; CHURN_PEERS as usize];
            let (mut read, mut gone) = (HashSet::new(), HashSet::new());
            let mut buf = [0u8; 64];
            let mut last = Instant::now();
            while got.load(Ordering::Relaxed) < total.load(Ordering::Relaxed) {
                if last.elapsed() > T {
                    fail(&format!(
                        "churn: no peer message for {T:?} after {}",
                        got.load(Ordering::Relaxed)
                    ));
                }
                match server.recv(&mut buf, Some(Duration::from_millis(50))) {
                    Ok(r) => {
                        let m = std::str::from_utf8(&buf[..r.len]).unwrap_or("");
                        let n: usize = m
                            .strip_prefix("peer ")
                            .and_then(|n| n.parse().ok())
                            .filter(|&n| n < CHURN_PEERS as usize)
                            .unwrap_or_else(|| fail(&format!("churn: message {m:?}")));
                        if std::mem::replace(&mut seen[n], true) {
                            fail(&format!("churn: peer {n}'s message twice"));
                        }
                        got.fetch_add(1, Ordering::Relaxed);
                        last = Instant::now();
                        if gone.remove(&r.channel) {
                            let _ = server.close_channel(r.channel);
                        } else {
                            read.insert(r.channel);
                        }
                    }
                    Err(RecvError::Timeout) => {}
                    Err(e) => fail(&format!("churn server: {e}")),
                }
                while let Some(e) = server.poll_event() {
                    if let Event::PeerGone { channel } = e {
                        if read.remove(&channel) {
                            let _ = server.close_channel(channel);
                        } else {
                            gone.insert(channel);
                        }
                    }
                }
            }
            server
        })
    };
    let mut peers = 0u64;
    let t0 = Instant::now();
    // A stop ends the churn only once it has made CHURN_MIN peers: on a
    // slow or loaded machine the last ones are made after the soak's time.
    while peers < CHURN_PEERS && (peers < CHURN_MIN || !stop.load(Ordering::Relaxed)) {
        // Keep at most a few peers ahead of the server.
        let t0 = Instant::now();
        while peers > got.load(Ordering::Relaxed) + 4 {
            if t0.elapsed() > T {
                fail(&format!("churn: the server is stuck at {peers}"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let ps = session();
        let mut p = ps
            .create_endpoint(EndpointConfig::default())
            .unwrap_or_else(|e| fail(&format!("peer {peers}'s endpoint: {e}")));
        let ch = p
            .open_channel(addr, DIRECT)
            .unwrap_or_else(|e| fail(&format!("peer {peers}'s channel: {e}")));
        p.send_blocking(ch, format!("peer {peers}").as_bytes(), T)
            .unwrap_or_else(|e| fail(&format!("peer {peers}'s message: {e}")));
        drop(p);
        drop(ps);
        peers += 1;
    }
    total.store(peers, Ordering::Relaxed);
    let _server = serving.join().expect("the churn server");
    say(&format!("CHURNED {peers} {}", t0.elapsed().as_millis()));
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
    say(&format!("STOPPED {peers}"));
    hold();
}

/// Random control packets on a raw connection: empty, oversized, random
/// bytes, random kinds.
fn garbage() {
    let stop = stop_flag();
    let socket = std::path::PathBuf::from(env("UNET_SOCKET"));
    let connect =
        || unet_sys::connect_seqpacket(&socket).unwrap_or_else(|e| fail(&format!("connect: {e}")));
    let mut conn = connect();
    let mut rng = Rng::seeded();
    let (mut sent, mut replies, mut reconnects) = (0u64, 0u64, 0u64);
    let mut buf = vec![0u8; 8192];
    while !stop.load(Ordering::Relaxed) {
        let max = unet_control::MAX_PACKET;
        let pkt: Vec<u8> = match rng.below(4) {
            0 => Vec::new(),
            1 => (0..max + 1 + rng.below(3000) as usize)
                .map(|_| rng.next() as u8)
                .collect(),
            2 => (0..1 + rng.below(max as u64) as usize)
                .map(|_| rng.next() as u8)
                .collect(),
            _ => {
                // A plausible header (small kind, an id) and random rest.
                let mut p = vec![rng.below(40) as u8, 0];
                p.extend_from_slice(&(rng.next() as u32).to_le_bytes());
                p.extend((0..rng.below(64)).map(|_| rng.next() as u8));
                p
            }
        };
        sent += 1;
        let mut lost = unet_sys::send_packet(conn.as_raw_fd(), &pkt, &[]).is_err();
        loop {
            let mut fds = Vec::new();
            match unet_sys::recv_packet(conn.as_raw_fd(), &mut buf, &mut fds, true) {
                Ok(0) => {
                    lost = true;
                    break;
                }
                Ok(_) => replies += 1,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => {}
            }
        }
        if lost {
            reconnects += 1;
            conn = connect();
        }
        if sent.is_multiple_of(8) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    say(&format!("STOPPED {sent} {replies} {reconnects}"));
    hold();
}

/// hostile.rs's client: random descriptors pushed unchecked on h1, random
/// words over h2's queues (paced so as to leave the CPU to others).
fn hostile() {
    let stop = stop_flag();
    let s = session();
    let cfg = EndpointConfig::default();
    let mut h1 = s.create_endpoint(cfg).expect("endpoint");
    let h2 = s.create_endpoint(cfg).expect("endpoint");
    let sink = s.create_endpoint(cfg).expect("endpoint");
    let c_sink = h1.open_channel(sink.addr(), ENGINE).expect("channel");
    say(&format!("ID {} {}", h1.id(), h2.id()));
    let layout = Layout::new(cfg.geometry).expect("layout");
    let g = cfg.geometry;
    let area = g.buffer_area_size;
    let (base, seg_len) = h2.raw_segment();
    let rings = [
        (layout.send_off, g.send_cap, 16u64),
        (
            layout.recv_off,
            g.recv_cap,
            std::mem::size_of::<unet::RecvDesc>() as u64,
        ),
        (layout.free_off, g.free_cap, 4),
        (layout.event_off, g.event_cap, 32),
    ];
    let mut rng = Rng::seeded();
    let (mut iters, mut pushed) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        iters += 1;
        let d = random_send_desc(&mut rng, &[c_sink.0], area);
        if h1.push_raw_desc(d) {
            pushed += 1;
        }
        let (at, v) = random_scribble(&mut rng, &rings);
        assert!((at as usize) + 8 <= seg_len);
        // SAFETY: inside our own mapping, 8-byte aligned; the bytes are ours
        // to corrupt (that is the point).
        unsafe { std::ptr::write_volatile(base.add(at as usize).cast::<u64>(), v) };
        if iters.is_multiple_of(256) {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    say(&format!("STOPPED {iters} {pushed}"));
    hold();
    std::mem::forget(h2);
}

/// A second, writable mapping of the newest direct connection of this
/// process (by its memory file's name in `/proc/self/fd`).
fn newest_connection() -> unet_sys::Segment {
    let mut best: Option<(u32, std::path::PathBuf)> = None;
    for e in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        let t = target.to_string_lossy();
        let Some(rest) = t.strip_prefix("/memfd:unet-conn-") else {
            continue;
        };
        let Some(id) = rest.split(' ').next().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if best.as_ref().is_none_or(|(b, _)| id > *b) {
            best = Some((id, e.path()));
        }
    }
    let (_, path) = best.unwrap_or_else(|| fail("no direct connection among our descriptors"));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| fail(&format!("open the connection's memory file: {e}")));
    unet_sys::Segment::open(OwnedFd::from(f), CONN_HEADER_SIZE + 4096, true)
        .unwrap_or_else(|e| fail(&format!("map the connection: {e}")))
}

/// A direct channel from `h` to `r`, a bad record (padding at the start of
/// the ring) written into it: `r` must see the connection broken, never a
/// message. Again and again.
fn ring() {
    let stop = stop_flag();
    let s = session();
    let mut r = s.create_endpoint(EndpointConfig::default()).expect("r");
    let mut h = s.create_endpoint(EndpointConfig::default()).expect("h");
    say(&format!("ID {}", r.id()));
    let mut buf = vec![0u8; 1 << 16];
    let mut rounds = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let bad_tx = h
            .open_channel(r.addr(), DIRECT)
            .unwrap_or_else(|e| fail(&format!("ring round {rounds}: open: {e}")));
        let seg = newest_connection();
        let word = seg
            .at(CONN_HEADER_SIZE, 8)
            .unwrap_or_else(|| fail("the ring's first word"));
        let bad = record_tag(0) as u64 | (((RECORD_PAD | 64) as u64) << 32);
        // SAFETY: 8 bytes inside the mapping (checked by `at`), page
        // aligned; the receiver reads the word atomically too.
        unsafe { word.cast::<AtomicU64>().as_ref() }.store(bad, Ordering::Release);
        let t0 = Instant::now();
        let opened = loop {
            match r.poll_event() {
                Some(Event::ChannelOpened {
                    channel,
                    direct: true,
                    ..
                }) => break channel,
                Some(Event::ChannelOpened { .. }) => fail("ring: not a direct channel"),
                Some(_) => {}
                None if t0.elapsed() > T => fail("ring: no ChannelOpened"),
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        };
        loop {
            match r.recv(&mut buf, Some(Duration::from_millis(100))) {
                Err(RecvError::Broken(ch)) if ch == opened => break,
                Err(RecvError::Timeout) if t0.elapsed() < T => {}
                Ok(m) => fail(&format!("ring: a {}-byte message from a bad ring", m.len)),
                Err(e) => fail(&format!("ring round {rounds}: {e}")),
            }
        }
        let _ = r.close_channel(opened);
        let _ = h.close_channel(bad_tx);
        drop(seg);
        rounds += 1;
        std::thread::sleep(Duration::from_millis(30));
    }
    say(&format!(
        "STOPPED {rounds} {}",
        r.client_counter(ClientCounter::DirectRxBad)
    ));
    hold();
}

/// A client doing a bit of everything until it is killed.
fn victim() {
    let s = session();
    let mut a = s.create_endpoint(EndpointConfig::default()).expect("a");
    let mut b = s.create_endpoint(EndpointConfig::default()).expect("b");
    let d = a.open_channel(b.addr(), DIRECT).expect("direct");
    let e = a.open_channel(b.addr(), ENGINE).expect("engine");
    say("UP");
    let mut buf = vec![0u8; 1 << 16];
    let msg = vec![7u8; 3000];
    for i in 0u64.. {
        for ch in [d, e] {
            match a.send(ch, &msg[..(i % 3000) as usize + 1]) {
                Ok(()) | Err(SendError::Full) => {}
                Err(e) => fail(&format!("victim: {e}")),
            }
        }
        while let Ok(Some(_)) = b.try_recv(&mut buf) {}
        if i % 200 == 0 {
            let _ = s.create_endpoint(geometry_of(8 << 20));
        }
        if i.is_multiple_of(16) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
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
