//! The abusers of the soak test, one function per role (the test's module
//! documentation says what each does and what it must cause); each runs
//! in a child process of its own.

use super::*;
use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use unet::{
    ClientCounter, EndpointConfig, Error, ErrorCode, Event, Geometry, RecvError, SendError,
    Session, ViAttributes,
};
use unet_abi::{record_tag, Layout, CONN_HEADER_SIZE, RECORD_PAD};
use unet_engine::wire::{Body, Data, Frame, OpenRequest};

pub(super) fn geometry_of(area: u64) -> EndpointConfig {
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
pub(super) fn big() {
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
pub(super) fn memq() {
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
pub(super) fn small() -> EndpointConfig {
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
pub(super) fn slots() {
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
pub(super) fn idle() {
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
pub(super) fn regions() {
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
pub(super) fn jobs() {
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
pub(super) fn udm_idle() {
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
pub(super) fn listeners() {
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
pub(super) fn flood() {
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
pub(super) fn forger() {
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
pub(super) fn churn() {
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
pub(super) fn garbage() {
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
pub(super) fn hostile() {
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
pub(super) fn ring() {
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
pub(super) fn victim() {
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
