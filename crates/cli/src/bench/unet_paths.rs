//! unet's side of the network benchmarks: the driving process's runs, one
//! per path, and the child's half.
//!
//! `direct` and `engine`: this process starts an embedded engine with a
//! control socket in a fresh temporary directory and creates its endpoint;
//! the child connects to that socket, creates its own endpoint and prints
//! its id; this process opens a channel to it (direct path or through the
//! engine), and the child learns the channel from the first message.
//! `udp`: each process runs its own embedded engine with a UDP wire on
//! 127.0.0.1 (datagrams of `--max-datagram` bytes); the child prints its
//! endpoint id and its engine's UDP address, and this process opens a
//! channel to that remote endpoint.
//!
//! Both sides receive with `Endpoint::recv` (spin briefly, then sleep) and
//! retry `send` while it reports `Full`, yielding the core every 64 tries. Messages are the same as the
//! baselines': a ping-pong ends with a message of another length; a stream
//! uses one-byte SYNC/STOP messages answered with `[kind, u64 bytes]`, and
//! marks the last message of each burst for acknowledgment.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use unet::{
    Channel, ChannelOptions, Endpoint, EndpointAddr, EndpointConfig, Engine, EngineConfig, Event,
    PathChoice, RecvError, SendError, Session,
};

use super::child::{
    spawn_child, stop_len, ChildArgs, ChildKind, PathArg, PlacementArg, TempDir, DATA, PATIENCE,
    STOP, SYNC,
};
use super::floor::StreamRun;
use super::stats::{self, Samples};

/// A U-Net/SLE applet attached to both endpoints of a run.
#[derive(Clone)]
pub struct AppletRun {
    pub file: std::path::PathBuf,
    pub class: Vec<u8>,
    pub placement: PlacementArg,
    /// The user protocol it needs.
    pub kind: AppletKind,
}

/// Sample applets that change what the users do, recognised by class name
/// (the file name without `.class`); any other applet runs the standard
/// protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppletKind {
    /// The standard protocol: the user sends, the applet passes it on.
    Plain,
    /// applets/PingPong.java: one user message starts round trips between
    /// the applets.
    PingPong,
    /// applets/ReceiverAck.java: the applets acknowledge every 25 messages
    /// between themselves; the sending user just streams.
    ReceiverAck,
    /// applets/Burst.java: a message marked 'B' goes out 25 times.
    Burst,
    /// applets/Generate.java: the applet sends data of its own.
    Generate,
}

/// The applets of the U-Net/SLE paper's Figure 6, in its order.
pub const FIGURE6: [&str; 4] = ["StdUnet", "ReceiverAck", "Burst", "Generate"];

/// The burst of applets/Burst.java and the window of ReceiverAck.java.
pub const APPLET_BURST: usize = 25;
/// Burst.java's burst mark (a message's first byte).
const BURST_MARK: u8 = b'B';

impl AppletKind {
    /// The kind of the applet in class file `f`.
    pub fn of_file(f: &Path) -> AppletKind {
        match f.file_stem().and_then(|s| s.to_str()) {
            Some("PingPong") => AppletKind::PingPong,
            Some("ReceiverAck") => AppletKind::ReceiverAck,
            Some("Burst") => AppletKind::Burst,
            Some("Generate") => AppletKind::Generate,
            _ => AppletKind::Plain,
        }
    }

    /// Whether `unet bench stream` can run it with `size` and `burst`.
    pub fn check_stream(self, size: usize, burst: usize) -> Res<()> {
        let name = format!("{self:?}");
        match self {
            AppletKind::PingPong => {
                Err("the PingPong applet answers pings only: use `unet bench pingpong`".into())
            }
            AppletKind::ReceiverAck | AppletKind::Burst if burst != APPLET_BURST => Err(format!(
                "the {name} applet works in bursts of {APPLET_BURST}: use --pattern burst25"
            )),
            AppletKind::ReceiverAck if size >= 256 << 10 => Err(format!(
                "the ReceiverAck applet keeps messages below 256 KiB (size {size})"
            )),
            AppletKind::Burst if size > 64 << 10 => Err(format!(
                "the Burst applet bursts messages of up to 64 KiB (size {size})"
            )),
            AppletKind::Generate if !(16..=64 << 10).contains(&size) => Err(format!(
                "the Generate applet generates messages of 16 bytes to 64 KiB (size {size})"
            )),
            _ => Ok(()),
        }
    }
}

/// Round trips one PingPong run makes between the applets.
const APPLET_ROUNDS: u32 = 100;

fn attach(ep: &mut Endpoint, class: &[u8], placement: PlacementArg) -> Res<()> {
    let placement = match placement {
        PlacementArg::Engine => unet::Placement::Engine,
        PlacementArg::Inline => unet::Placement::Inline,
    };
    ep.attach_applet(
        class,
        unet::AppletOptions {
            placement,
            ..Default::default()
        },
    )
    .map_err(err("attach_applet"))
}

/// One unet run.
pub struct Run {
    pub path: PathArg,
    pub size: usize,
    /// Stream: acknowledgment every `burst` messages (0: only at the end).
    pub burst: usize,
    /// Stream: messages per `send_many` / `recv_many` (1: `send`, `recv`).
    pub batch: usize,
    /// Ping-pong: untimed round trips, then up to `iters` timed ones.
    pub warmup: usize,
    pub iters: usize,
    /// Ping-pong: bound on the timed part; stream: its length.
    pub limit: Duration,
    /// Stream: warm-up length.
    pub warmup_time: Duration,
    pub pin: bool,
    /// UDP path: the engines' datagram size.
    pub max_datagram: usize,
    /// Receive spin time of both endpoints (None: the library's default).
    pub spin_us: Option<u64>,
    /// A U-Net/SLE applet on both endpoints.
    pub applet: Option<AppletRun>,
    /// Print the engines' counters after the run (`--counters`).
    pub counters: bool,
    /// Stream: the receiving endpoint is buffered, with a virtual buffer of
    /// this many bytes.
    pub buffered: Option<u64>,
}

/// After a run: the counters of this side's engine.
fn side_counters(path: PathArg, side: &Side) {
    let whose = if path == PathArg::Udp {
        "the sending side's engine"
    } else {
        "the engine (both endpoints)"
    };
    print_counters(whose, &side._session);
}

/// Prints the non-zero counters of `session`'s engine on stderr.
fn print_counters(whose: &str, session: &Session) {
    let mut out = format!("unet bench: counters of {whose}:\n");
    match session.counters() {
        Ok((seg, max)) => {
            for (scope, name, v) in crate::stat::snapshot(&seg, max) {
                if v != 0 {
                    out += &format!("  {scope:<24} {name:<32} {v}\n");
                }
            }
        }
        Err(e) => out += &format!("  (cannot read them: {e})\n"),
    }
    eprint!("{out}");
}

fn endpoint_config(spin_us: Option<u64>) -> EndpointConfig {
    let mut c = EndpointConfig::default();
    if let Some(us) = spin_us {
        c.spin = Duration::from_micros(us);
    }
    c
}

const BURST_END: u8 = 0x5a;

type Res<T> = Result<T, String>;

fn err(what: &str) -> impl Fn(unet::Error) -> String + '_ {
    move |e| format!("unet {what}: {e}")
}

/// This process's side of a run. Field order is drop order: endpoint,
/// session, engine, directory.
struct Side {
    ep: Endpoint,
    _session: Session,
    _engine: Engine,
    _dir: Option<TempDir>,
}

fn engine_config(path: PathArg, max_datagram: usize, socket: Option<&Path>) -> EngineConfig {
    let mut cfg = EngineConfig {
        control_socket: socket.map(Path::to_path_buf),
        ..EngineConfig::default()
    };
    if path == PathArg::Udp {
        cfg.udp_bind = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        cfg.max_datagram = max_datagram;
    }
    cfg
}

fn start_side(r: &Run) -> Res<(Side, Vec<String>)> {
    let (path, max_datagram) = (r.path, r.max_datagram);
    let (dir, extra) = if path == PathArg::Udp {
        (
            None,
            vec!["--max-datagram".to_string(), max_datagram.to_string()],
        )
    } else {
        let d = TempDir::new()?;
        let sock = d.0.join("control");
        let extra = vec!["--socket".to_string(), sock.display().to_string()];
        (Some(d), extra)
    };
    let sock = dir.as_ref().map(|d| d.0.join("control"));
    let engine = Engine::start(engine_config(path, max_datagram, sock.as_deref()))
        .map_err(|e| format!("starting the unet engine: {e}"))?;
    let session = Session::embedded(&engine).map_err(err("session"))?;
    let mut ep = session
        .create_endpoint(endpoint_config(r.spin_us))
        .map_err(err("endpoint"))?;
    let mut extra = extra;
    if let Some(a) = &r.applet {
        attach(&mut ep, &a.class, a.placement)?;
        extra.extend([
            "--applet".to_string(),
            a.file.display().to_string(),
            "--placement".to_string(),
            a.placement.name().to_string(),
        ]);
    }
    extra.extend(["--path".to_string(), path.name().to_string()]);
    extra.extend(["--batch".to_string(), r.batch.to_string()]);
    if let Some(us) = r.spin_us {
        extra.extend(["--spin-us".to_string(), us.to_string()]);
    }
    if r.counters && path == PathArg::Udp {
        extra.push("--counters".to_string());
    }
    if let Some(b) = r.buffered {
        extra.extend(["--buffered".to_string(), b.to_string()]);
    }
    Ok((
        Side {
            ep,
            _session: session,
            _engine: engine,
            _dir: dir,
        },
        extra,
    ))
}

/// Opens the channel to the child from what it printed after `ready`:
/// `ID` (local) or `ID UDP_ADDR` (udp).
fn open_to_child(side: &mut Side, path: PathArg, info: &str) -> Res<Channel> {
    let mut it = info.split_whitespace();
    let id: u32 = it
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or("the child sent no endpoint id")?;
    let host = match path {
        PathArg::Udp => Some(
            it.next()
                .and_then(|s| s.parse().ok())
                .ok_or("the child sent no UDP address")?,
        ),
        _ => None,
    };
    let choice = match path {
        PathArg::Direct => PathChoice::Direct,
        _ => PathChoice::Engine,
    };
    side.ep
        .open_channel(EndpointAddr { host, id }, ChannelOptions { path: choice })
        .map_err(err("open_channel"))
}

/// `send`, retrying while the queue or ring is full
/// ([`Endpoint::send_blocking`]: it spins and yields the core every 5 µs,
/// as the floor baseline does, for the thread that drains the queue, an
/// engine's or the peer, may be waiting for this core).
#[inline]
fn send(ep: &mut Endpoint, ch: Channel, data: &[u8]) -> Res<()> {
    match ep.send_blocking(ch, data, PATIENCE) {
        Ok(()) => Ok(()),
        Err(SendError::Full) => Err("unet send: the queue stayed full".into()),
        Err(e) => Err(format!("unet send: {e}")),
    }
}

/// Sends every message of `msgs` in order: as many at a time as
/// [`Endpoint::send_many`] takes, and one with [`send`] (which waits for
/// room) whenever the queue or ring is full.
fn send_all(ep: &mut Endpoint, ch: Channel, msgs: &[&[u8]]) -> Res<()> {
    let mut k = 0;
    while k < msgs.len() {
        match ep.send_many(ch, &msgs[k..]) {
            Ok(n) => k += n,
            Err(SendError::Full) => {
                send(ep, ch, msgs[k])?;
                k += 1;
            }
            Err(e) => return Err(format!("unet send: {e}")),
        }
    }
    Ok(())
}

/// `recv` with a timeout; `Ok(None)` when it timed out.
#[inline]
fn recv(ep: &mut Endpoint, buf: &mut [u8], t: Duration) -> Res<Option<unet::Recv>> {
    match ep.recv(buf, Some(t)) {
        Ok(r) => Ok(Some(r)),
        Err(RecvError::Timeout) => Ok(None),
        Err(e) => Err(format!("unet recv: {e}")),
    }
}

fn recv_needed(ep: &mut Endpoint, buf: &mut [u8]) -> Res<unet::Recv> {
    recv(ep, buf, PATIENCE)?.ok_or_else(|| "unet recv: nothing arrived".to_string())
}

/// Ping-pong over unet: each round trip timed on its own.
pub fn pingpong(r: &Run) -> Res<Samples> {
    let (mut side, extra) = start_side(r)?;
    let ch = spawn_child(ChildKind::UnetPingpong, r.size, 0, &extra, None, r.pin)?;
    let res = (|| {
        let c = open_to_child(&mut side, r.path, &ch.info)?;
        let ep = &mut side.ep;
        if r.applet.as_ref().map(|a| a.kind) == Some(AppletKind::PingPong) {
            // One user message starts APPLET_ROUNDS round trips between the
            // applets; the initiator's applet reports when they are done.
            let mut start = vec![DATA; r.size.max(4)];
            start[..4].copy_from_slice(&APPLET_ROUNDS.to_be_bytes());
            let mut inb = vec![0u8; 64];
            let mut run = || -> Res<()> {
                send(ep, c, &start)?;
                let rep = recv_needed(ep, &mut inb)?;
                if rep.len != 12 {
                    return Err(format!(
                        "PingPong applet: a {}-byte report, not 12",
                        rep.len
                    ));
                }
                Ok(())
            };
            for _ in 0..(r.warmup / APPLET_ROUNDS as usize).max(2) {
                run()?;
            }
            let mut samples =
                stats::time_round_trips((r.iters / APPLET_ROUNDS as usize).max(20), r.limit, run)?;
            for ns in samples.ns.iter_mut() {
                *ns /= APPLET_ROUNDS as u64;
            }
            return Ok(samples);
        }
        let samples = time_pingpong(ep, c, r.size, r.warmup, r.iters, r.limit)?;
        send(ep, c, &vec![STOP; stop_len(r.size)])?;
        Ok(samples)
    })();
    let out = ch.wait(res);
    if r.counters && out.is_ok() {
        side_counters(r.path, &side);
    }
    out
}

/// The ping-pong of [`pingpong`] on channel `c` of `ep`, whose peer
/// echoes (with [`echo`]): `warmup` untimed round trips of `size`-byte
/// messages, then up to `iters` timed one by one (fewer if `limit` passes
/// first). `unet bench via` times its endpoint baseline with it.
pub(super) fn time_pingpong(
    ep: &mut Endpoint,
    c: Channel,
    size: usize,
    warmup: usize,
    iters: usize,
    limit: Duration,
) -> Res<Samples> {
    let out = vec![DATA; size];
    let mut inb = vec![0u8; size.max(16)];
    for _ in 0..warmup {
        send(ep, c, &out)?;
        recv_needed(ep, &mut inb)?;
    }
    stats::time_round_trips(iters, limit, || {
        send(ep, c, &out)?;
        recv_needed(ep, &mut inb)?;
        std::hint::black_box(&mut inb);
        Ok::<(), String>(())
    })
}

/// The echoing end of [`time_pingpong`]: sends every `size`-byte message
/// back where it came from, until one of another length arrives; returns
/// that message's first byte (0 if it is empty).
pub(super) fn echo(ep: &mut Endpoint, buf: &mut [u8], size: usize) -> Res<u8> {
    loop {
        let r = recv_needed(ep, buf)?;
        if r.len != size {
            return Ok(if r.len > 0 { buf[0] } else { 0 });
        }
        send(ep, r.channel, &buf[..r.len])?;
    }
}

/// One-way stream over unet (this process sends).
///
/// With the Figure 6 applets the users' protocol changes: ReceiverAck's
/// sender streams without waiting (the applets acknowledge each other) and
/// polls its receive queue after every send, so that an inline applet sees
/// the acknowledgments; Burst's sender sends one marked message per burst
/// (its applet sends it 25 times); Generate's sender sends as usual but its
/// data is the applet's. The receiver acknowledges every `burst` messages by
/// count for Burst and Generate (the data carries no mark), never for
/// ReceiverAck.
pub fn stream(r: &Run) -> Res<StreamRun> {
    let (mut side, extra) = start_side(r)?;
    let ch = spawn_child(ChildKind::UnetStream, r.size, r.burst, &extra, None, r.pin)?;
    let kind = r.applet.as_ref().map_or(AppletKind::Plain, |a| a.kind);
    let res = (|| {
        let c = open_to_child(&mut side, r.path, &ch.info)?;
        let ep = &mut side.ep;
        let mut out = vec![DATA; r.size];
        if kind == AppletKind::Burst {
            out[0] = BURST_MARK;
        }
        let mut last = out.clone();
        if kind == AppletKind::Plain {
            last[0] = BURST_END;
        }
        // A burst's end may be lost: over UDP when a receiver falls behind
        // (wait 10 ms), on the engine path or with an applet only in rare
        // cases (an applet out of buffers; wait 100 ms). A sender that gave
        // up takes the late acknowledgment for its next burst and keeps one
        // burst ahead from then on, so the wait is no shorter than it needs.
        let ack_wait = match r.path {
            PathArg::Udp => Duration::from_millis(10),
            PathArg::Engine => Duration::from_millis(100),
            PathArg::Direct if r.applet.is_some() => Duration::from_millis(100),
            PathArg::Direct => PATIENCE,
        };
        // User sends per acknowledgment (0: none).
        let per_ack = match kind {
            AppletKind::ReceiverAck => 0,
            AppletKind::Burst if r.burst > 0 => 1,
            _ => r.burst,
        };
        let poll = kind == AppletKind::ReceiverAck;
        let chunk = if per_ack > 0 { per_ack } else { 256 };
        let mut ackb = [0u8; 16];
        let batch: Vec<&[u8]> = (0..chunk)
            .map(|i| {
                if per_ack > 0 && i + 1 == chunk {
                    &last[..]
                } else {
                    &out[..]
                }
            })
            .collect();
        // Returns the user messages sent.
        let mut phase = |ep: &mut Endpoint, d: Duration| -> Res<u64> {
            let start = Instant::now();
            let mut sent = 0u64;
            loop {
                if poll {
                    for m in &batch {
                        send(ep, c, m)?;
                        // Nothing is meant for the user here (perhaps a
                        // late answer to a repeated SYNC): dropped.
                        let _ = ep.try_recv(&mut ackb);
                    }
                } else if r.batch == 1 {
                    for m in &batch {
                        send(ep, c, m)?;
                    }
                } else {
                    // A streaming sender hands its messages over in
                    // batches, as an application with many to send would.
                    for part in batch.chunks(r.batch) {
                        send_all(ep, c, part)?;
                    }
                }
                sent += chunk as u64;
                if per_ack > 0 {
                    recv(ep, &mut ackb, ack_wait)?;
                } else if poll {
                    // Nothing holds this sender back (its applet drops what
                    // its backlog cannot take): give the core up now and
                    // then, for when the receiver shares it.
                    std::thread::yield_now();
                }
                if start.elapsed() >= d {
                    return Ok(sent);
                }
            }
        };
        phase(ep, r.warmup_time)?;
        control(ep, c, SYNC, r.path, kind)?;
        let start = Instant::now();
        let sent = phase(ep, r.limit)?;
        let bytes = control(ep, c, STOP, r.path, kind)?;
        let elapsed = start.elapsed();
        // The child lingers until it sees the channel closed, so that its
        // answer is not lost with its endpoint.
        ep.close_channel(c).map_err(err("close_channel"))?;
        Ok(StreamRun {
            msgs: bytes as f64 / r.size as f64,
            elapsed,
            // Burst, Generate and ReceiverAck's applets send other than
            // what the user sends.
            sent: (kind == AppletKind::Plain).then_some(sent),
        })
    })();
    let out = ch.wait(res);
    if r.counters && out.is_ok() {
        side_counters(r.path, &side);
    }
    out
}

/// Sends a one-byte control message and waits for its answer (resending
/// every 50 ms on the paths that may drop, every 2 ms with ReceiverAck,
/// whose applet drops what does not fit its backlog); returns the
/// receiver's byte count. A repeated SYNC reaches the receiver before any
/// of the data that follows it, so its only effect is a late answer.
fn control(ep: &mut Endpoint, c: Channel, kind: u8, path: PathArg, applet: AppletKind) -> Res<u64> {
    let (tries, wait) = if applet == AppletKind::ReceiverAck {
        (10_000, Duration::from_millis(2))
    } else if path != PathArg::Direct {
        (100, Duration::from_millis(50))
    } else {
        (1, PATIENCE)
    };
    let mut b = [0u8; 16];
    for _ in 0..tries {
        send(ep, c, &[kind])?;
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match recv(ep, &mut b, left)? {
                Some(r) if r.len == 9 && b[0] == kind => {
                    return Ok(u64::from_le_bytes(b[1..9].try_into().unwrap()));
                }
                Some(_) => {}
                None => break,
            }
        }
    }
    Err("the unet receiver does not answer".into())
}

/// Waits (at most 2 s) until the peer closes the channel, so that messages
/// still on their way through the engine are not lost with the endpoint.
fn linger(ep: &mut Endpoint) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        ep.wait(Some(Duration::from_millis(10)));
        while let Some(ev) = ep.poll_event() {
            if matches!(ev, Event::PeerGone { .. }) {
                return;
            }
        }
        let mut b = [0u8; 16];
        while let Ok(Some(_)) = ep.try_recv(&mut b) {}
    }
}

/// The child's half of a unet run: set up, print `ready ID [UDP_ADDR]`,
/// then echo (ping-pong) or receive and count (stream).
pub fn child(a: &ChildArgs, ready: fn(&str)) -> Res<()> {
    let path = a.path.ok_or("--path is required")?;
    let (_engine, session) = match path {
        PathArg::Udp => {
            let e = Engine::start(engine_config(path, a.max_datagram, None))
                .map_err(|e| format!("starting the unet engine: {e}"))?;
            let s = Session::embedded(&e).map_err(err("session"))?;
            (Some(e), s)
        }
        _ => {
            let sock = a.socket.as_ref().ok_or("--socket is required")?;
            (None, Session::connect(sock).map_err(err("connect"))?)
        }
    };
    let mut cfg = endpoint_config(a.spin_us);
    cfg.buffered = a.buffered;
    let mut ep = session.create_endpoint(cfg).map_err(err("endpoint"))?;
    let mut applet = AppletKind::Plain;
    if let Some(f) = &a.applet {
        let class = std::fs::read(f).map_err(|e| format!("cannot read {}: {e}", f.display()))?;
        attach(&mut ep, &class, a.placement)?;
        applet = AppletKind::of_file(f);
    }
    match session.udp_addr() {
        Some(u) if path == PathArg::Udp => ready(&format!("{} {u}", ep.id())),
        _ => ready(&ep.id().to_string()),
    }
    let mut buf = vec![0u8; a.size.max(16)];
    // Over UDP this side has an engine of its own.
    let report = || {
        if a.counters {
            print_counters("the receiving side's engine", &session);
        }
    };
    if applet == AppletKind::PingPong && a.kind == ChildKind::UnetPingpong {
        // The applet answers every ping itself; nothing reaches us until
        // the parent goes away.
        linger(&mut ep);
        report();
        return Ok(());
    }
    if a.kind == ChildKind::UnetPingpong {
        echo(&mut ep, &mut buf, a.size)?;
        report();
        return Ok(());
    }
    // Acknowledge every `ack_every` data messages by count (Burst,
    // Generate: the data carries no mark), on BURST_END (the standard
    // protocol), or never (ReceiverAck: the applets do it).
    let ack_every = match applet {
        AppletKind::Burst | AppletKind::Generate => a.burst,
        _ => 0,
    };
    let mut tally = Tally {
        ack_every,
        marked: matches!(applet, AppletKind::Plain | AppletKind::PingPong),
        count: 0,
        bytes: 0,
    };
    loop {
        // What is waiting is taken in batches (`recv_many`, unless
        // `--batch 1`), as a streaming receiver would; a batch ends early
        // where an answer is due.
        let mut due = None;
        if a.batch <= 1 {
            let r = recv_needed(&mut ep, &mut buf)?;
            std::hint::black_box(&mut buf);
            due = tally.take(r, &buf[..r.len]);
        } else {
            let got = ep
                .recv_many(&mut buf, a.batch, |r, m| {
                    std::hint::black_box(m);
                    due = tally.take(r, m);
                    due.is_none()
                })
                .map_err(|e| format!("unet recv: {e}"))?;
            if got == 0 && !ep.wait(Some(PATIENCE)) {
                return Err("unet recv: nothing arrived".into());
            }
        }
        match due {
            None => {}
            Some(Due::Ack(ch)) => send(&mut ep, ch, &[BURST_END])?,
            Some(Due::Control(ch, kind)) => {
                let mut ans = [0u8; 9];
                ans[0] = kind;
                ans[1..].copy_from_slice(&tally.bytes.to_le_bytes());
                send(&mut ep, ch, &ans)?;
                if kind == STOP {
                    linger(&mut ep);
                    report();
                    return Ok(());
                }
                tally.bytes = 0;
            }
        }
    }
}

/// What a stream receiver owes its sender after a message.
enum Due {
    /// An acknowledgment.
    Ack(Channel),
    /// The answer to SYNC or STOP: the bytes received since the last one.
    Control(Channel, u8),
}

/// A stream receiver's count.
struct Tally {
    /// Acknowledge every this many data messages (0: by mark or never).
    ack_every: usize,
    /// Acknowledge messages that start with BURST_END.
    marked: bool,
    count: usize,
    bytes: u64,
}

impl Tally {
    /// Count message `m` (`r` says where it came from).
    #[inline(always)]
    fn take(&mut self, r: unet::Recv, m: &[u8]) -> Option<Due> {
        if r.len == 1 && (m[0] == SYNC || m[0] == STOP) {
            return Some(Due::Control(r.channel, m[0]));
        }
        self.bytes += r.len as u64;
        if self.ack_every > 0 {
            self.count += 1;
            if self.count == self.ack_every {
                self.count = 0;
                return Some(Due::Ack(r.channel));
            }
        } else if self.marked && m.first() == Some(&BURST_END) {
            return Some(Due::Ack(r.channel));
        }
        None
    }
}
