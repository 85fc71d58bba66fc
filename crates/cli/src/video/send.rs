//! `unet video send`: the video server. It reaches the video client's
//! adapter the way the SPINE runtime lets a remote sender reach an
//! extension: over a SPINE link on the UDP wire, from an extension of its
//! own adapter. It loads `extensions/WirePing.java` onto its daemon (at
//! the video extension's row handler minus one, so that its `onPing`
//! sends each message on over the link to the row handler there),
//! connects a link to the client's adapter with the token the client
//! printed, and hands its adapter one message a row: `[link][stream,
//! frame, row]` and the row's pixels (RGBA). Rows from this link are what
//! the client's windows take by default.
//!
//! Frames start every 1/rate s; within a frame the rows go in `--slices`
//! parts spread over the period (8 by default, so that the receiving
//! adapter takes a frame in parts rather than all at once; `--slices 1`
//! sends each frame's rows as fast as the path takes them), each row of
//! every stream before the next row of any. Nothing is dropped silently: a host send the ring cannot take
//! yet is waited for, a message SPINE could not take (`SpineFull`) is
//! sent again (counted as retried) before the next frame starts, and a
//! send the forwarder's link refused comes back as an error message and
//! is counted and printed, as are the link's own drops. Before it exits
//! it waits until the link has sent every row it took.
//!
//! Sources: the test pattern (`super::pattern`), or a video file decoded
//! by `ffmpeg` (`--video FILE`: `ffmpeg -i FILE -f rawvideo -pix_fmt rgba
//! -s WxH -` read from a pipe; every stream shows it).

use std::collections::VecDeque;
use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command as Process, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use unet::spine::ExtensionOptions;
use unet::{Endpoint, EndpointConfig, SendError, SendStatus, Session};

use super::{pattern_row, HANDLERS};

#[derive(clap::Args)]
pub struct Args {
    /// Control socket of the sending adapter's daemon (started with
    /// `--udp ADDR`).
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The video client's adapter's wire address (as the client prints
    /// it).
    #[arg(long, value_name = "ADDR")]
    to: SocketAddr,
    /// The token of the client's link (as the client prints it).
    #[arg(long)]
    token: u64,
    /// A stream number (repeatable: several streams of the same size).
    #[arg(long = "stream", default_value = "1")]
    streams: Vec<u32>,
    /// Frame size, pixels.
    #[arg(long, value_name = "WxH", default_value = "640x480", value_parser = super::parse_size)]
    size: (u32, u32),
    /// Frames a second.
    #[arg(long, default_value_t = 30.0)]
    rate: f64,
    /// Stop after this many frames (default: at --seconds, or when
    /// interrupted).
    #[arg(long)]
    frames: Option<u32>,
    /// Stop after this many seconds.
    #[arg(long)]
    seconds: Option<f64>,
    /// Spread each frame's rows over its period in this many slices (a
    /// slice's rows as fast as the path takes them, the next slice not
    /// before its share of the period): 1 sends the whole frame at once,
    /// a burst a large frame can overflow the receiving adapter's wire
    /// inbox with (a 1080p frame is 8 MB).
    #[arg(long, default_value_t = 8)]
    slices: u32,
    /// Send this video file, decoded by ffmpeg, instead of the test
    /// pattern.
    #[arg(long, value_name = "FILE")]
    video: Option<PathBuf>,
    /// The video extension's first handler on the client's adapter.
    #[arg(long, default_value_t = HANDLERS)]
    handlers: u16,
    /// The forwarder's class file (default: `extensions/WirePing.java` of
    /// the source checkout, compiled with the JDK found).
    #[arg(long, value_name = "FILE.class")]
    class: Option<PathBuf>,
    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
}

/// A row handed to the adapter, until its send status is known.
struct Pending {
    pos: u64,
    stream: u32,
    row: u32,
}

/// What a run did.
#[derive(Default)]
struct Counts {
    frames: u64,
    rows: u64,
    bytes: u64,
    /// Rows SPINE could not take at once, sent again.
    retried: u64,
    /// Times the endpoint's ring or buffers were full (waited for).
    ring_full: u64,
    /// Rows SPINE refused outright (not sent again).
    refused: u64,
    /// Sends the forwarder's link refused (error messages back).
    link_refused: u64,
    /// Frames started more than a period late.
    late_frames: u64,
}

struct Sender {
    ep: Endpoint,
    fwd: u16,
    link: u32,
    pending: VecDeque<Pending>,
    counts: Counts,
    buf: Vec<u8>,
}

/// Rows waiting for their status at most (well within the send ring,
/// whose statuses are readable until it wraps).
const PENDING_MAX: usize = 256;

impl Sender {
    /// Hand one row to the adapter, waiting while its ring is full.
    fn send(&mut self, stream: u32, frame: u32, row: u32, px: &[u8]) -> Result<(), String> {
        let args = super::ints(&[self.link as i32, stream as i32, frame as i32, row as i32]);
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            match self.ep.send_am(self.fwd, &args, px) {
                Ok(pos) => {
                    self.pending.push_back(Pending { pos, stream, row });
                    return Ok(());
                }
                Err(SendError::Full) if Instant::now() < end => {
                    self.counts.ring_full += 1;
                    self.drain();
                    std::thread::yield_now();
                }
                Err(e) => return Err(format!("sending a row: {e}")),
            }
        }
    }

    /// The rows whose status is known, in order: those SPINE could not
    /// take (to send again), the others done. Takes the forwarder's error
    /// messages too.
    fn settled(&mut self) -> Vec<(u32, u32)> {
        let mut again = Vec::new();
        while let Some(p) = self.pending.front() {
            match self.ep.send_status(p.pos) {
                SendStatus::Pending => break,
                SendStatus::Sent => {}
                SendStatus::SpineFull => again.push((p.stream, p.row)),
                _ => self.counts.refused += 1,
            }
            self.pending.pop_front();
        }
        self.drain();
        again
    }

    /// The forwarder's error messages (a send its link refused).
    fn drain(&mut self) {
        while let Ok(Some(r)) = self.ep.try_recv(&mut self.buf) {
            if r.handler() == Some(self.fwd + 3) {
                self.counts.link_refused += 1;
            }
        }
    }
}

/// Frames from ffmpeg.
struct Decoder {
    child: Child,
}

impl Decoder {
    fn start(file: &std::path::Path, w: u32, h: u32) -> Result<Decoder, String> {
        let child = Process::new("ffmpeg")
            .args(["-loglevel", "error", "-nostdin", "-i"])
            .arg(file)
            .args(["-f", "rawvideo", "-pix_fmt", "rgba", "-s"])
            .arg(format!("{w}x{h}"))
            .arg("-")
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    "ffmpeg is not on this machine: --video needs it to decode the file \
                     (install the ffmpeg package), or send the test pattern (no --video)"
                        .to_string()
                } else {
                    format!("starting ffmpeg: {e}")
                }
            })?;
        Ok(Decoder { child })
    }

    /// The next frame into `out`; false at the end of the file.
    fn next(&mut self, out: &mut [u8]) -> Result<bool, String> {
        let Some(o) = self.child.stdout.as_mut() else {
            return Ok(false);
        };
        match o.read_exact(out) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
            Err(e) => Err(format!("reading ffmpeg's frames: {e}")),
        }
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn run(a: Args) -> Result<(), String> {
    let sigs = super::block_signals(&[libc::SIGINT, libc::SIGTERM]);
    let (w, h) = a.size;
    if !(a.rate > 0.0 && a.rate.is_finite()) {
        return Err(format!("--rate {}: not a positive rate", a.rate));
    }
    if a.handlers < 65 {
        return Err(format!(
            "--handlers {}: the forwarder takes the one below it, an extension's (64 or more)",
            a.handlers
        ));
    }
    let mut decoder = match &a.video {
        Some(f) => Some(Decoder::start(f, w, h)?),
        None => None,
    };
    let class = crate::jdk::extension_class(a.class.as_deref(), "WirePing.java", "WirePing")?;
    let at = |e: String| format!("{}: {e}", a.socket.display());
    let session = Session::connect(&a.socket).map_err(|e| at(e.to_string()))?;
    if session.udp_addr().is_none() {
        return Err(at("no UDP wire (start its daemon with --udp ADDR)".into()));
    }
    let fwd = a.handlers - 1;
    let opts = ExtensionOptions {
        arg: i32::from(fwd),
        ..ExtensionOptions::named("video-send")
    };
    session
        .load_extension(&class, opts)
        .map_err(|e| at(format!("loading the forwarder: {e}")))?;
    let link = session
        .spine_link_connect(a.to, a.token, Duration::from_secs(5))
        .map_err(|e| format!("linking to {}: {e}", a.to))?;
    let out_before = link_out(&session, link)?;
    let mut cfg = EndpointConfig::default();
    let need = (2 + 16 + w as usize * 4).next_multiple_of(64) as u32;
    cfg.geometry.buffer_size = cfg.geometry.buffer_size.max(need);
    cfg.geometry.buffer_area_size = cfg
        .geometry
        .buffer_area_size
        .max((u64::from(need) * 512).next_multiple_of(4096));
    let ep = session
        .create_endpoint(cfg)
        .map_err(|e| at(e.to_string()))?;
    let mut s = Sender {
        ep,
        fwd,
        link,
        pending: VecDeque::new(),
        counts: Counts::default(),
        buf: vec![0u8; 1 << 16],
    };
    let row_bytes = w as usize * 4;
    let mut picture = vec![
        0u8;
        if decoder.is_some() {
            row_bytes * h as usize
        } else {
            0
        }
    ];
    let mut row = vec![0u8; row_bytes];
    let period = Duration::from_secs_f64(1.0 / a.rate);
    let start = Instant::now();
    let mut stopped = None;
    for f in 0..a.frames.unwrap_or(u32::MAX) {
        let due = start + period.mul_f64(f64::from(f));
        if a.seconds
            .is_some_and(|t| due.duration_since(start).as_secs_f64() >= t)
        {
            break;
        }
        let now = Instant::now();
        if due > now {
            if let Some(sig) = super::signal_wait(&sigs, due - now) {
                stopped = Some(sig);
                break;
            }
        } else if now - due > period {
            s.counts.late_frames += 1;
        }
        if let Some(d) = decoder.as_mut() {
            if !d.next(&mut picture)? {
                break;
            }
        }
        let fill = |stream: u32, r: u32, out: &mut [u8]| {
            if decoder.is_some() {
                let at = r as usize * row_bytes;
                out.copy_from_slice(&picture[at..at + row_bytes]);
            } else {
                pattern_row(stream, f, r, w, h, out);
            }
        };
        let slices = a.slices.clamp(1, h);
        for r in 0..h {
            let k = r * slices / h;
            if r > 0 && k != (r - 1) * slices / h {
                // The next slice, not before its time.
                let at = due + period.mul_f64(f64::from(k) / f64::from(slices));
                let now = Instant::now();
                if at > now {
                    std::thread::sleep(at - now);
                }
            }
            for &st in &a.streams {
                fill(st, r, &mut row);
                s.send(st, f, r, &row)?;
                if s.pending.len() >= PENDING_MAX {
                    for (st2, r2) in wait_some(&mut s)? {
                        fill(st2, r2, &mut row);
                        s.counts.retried += 1;
                        s.send(st2, f, r2, &row)?;
                    }
                }
            }
        }
        // Every row of the frame taken before the next starts.
        let end = Instant::now() + Duration::from_secs(10);
        while !s.pending.is_empty() {
            for (st2, r2) in s.settled() {
                fill(st2, r2, &mut row);
                s.counts.retried += 1;
                s.send(st2, f, r2, &row)?;
            }
            if Instant::now() > end {
                return Err("the adapter did not take the frame's rows within 10 s".into());
            }
            std::thread::yield_now();
        }
        s.counts.frames += 1;
        s.counts.rows += u64::from(h) * a.streams.len() as u64;
        s.counts.bytes += (row_bytes * h as usize * a.streams.len()) as u64;
        if stopped.is_none() {
            stopped = super::signal_wait(&sigs, Duration::ZERO);
            if stopped.is_some() {
                break;
            }
        }
    }
    let took = start.elapsed().as_secs_f64();
    // The link sends every row its adapter took before the session (and
    // with it the link) goes.
    let end = Instant::now() + Duration::from_secs(10);
    let info = loop {
        s.drain();
        let l = session.spine_links().map_err(|e| at(e.to_string()))?;
        let Some(info) = l.link(link).cloned() else {
            return Err(format!("link {link} is gone"));
        };
        let dropped: u64 = info.drops.iter().map(|(_, n)| n).sum();
        let expect = s
            .counts
            .rows
            .saturating_sub(s.counts.refused + s.counts.link_refused);
        if info.msgs_out - out_before + dropped >= expect || Instant::now() > end {
            break info;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    report(&a, &s.counts, took, link, &info, stopped);
    Ok(())
}

/// Wait (with a deadline) until some pending rows are settled: those to
/// send again.
fn wait_some(s: &mut Sender) -> Result<Vec<(u32, u32)>, String> {
    let end = Instant::now() + Duration::from_secs(10);
    while s.pending.len() >= PENDING_MAX {
        let again = s.settled();
        if !again.is_empty() {
            return Ok(again);
        }
        if Instant::now() > end {
            return Err("the adapter took no row for 10 s".into());
        }
        std::thread::yield_now();
    }
    Ok(Vec::new())
}

/// Messages link `link` has sent so far.
fn link_out(s: &Session, link: u32) -> Result<u64, String> {
    let l = s.spine_links().map_err(|e| e.to_string())?;
    Ok(l.link(link).map_or(0, |i| i.msgs_out))
}

fn report(
    a: &Args,
    c: &Counts,
    took: f64,
    link: u32,
    info: &unet::spine_wire::LinkInfo,
    stopped: Option<i32>,
) {
    let (w, h) = a.size;
    let fps = c.frames as f64 / took.max(1e-9);
    let mbit = c.bytes as f64 * 8.0 / took.max(1e-9) / 1e6;
    let drops: Vec<(String, u64)> = info.drops.iter().filter(|(_, n)| *n > 0).cloned().collect();
    if a.json {
        let d: serde_json::Map<String, serde_json::Value> = info
            .drops
            .iter()
            .map(|(k, n)| (k.clone(), json!(n)))
            .collect();
        let v = json!({
            "streams": a.streams,
            "width": w,
            "height": h,
            "pixel_format": "rgba",
            "rate": a.rate,
            "frames": c.frames,
            "rows": c.rows,
            "bytes": c.bytes,
            "seconds": took,
            "frames_per_s": fps,
            "mbit_per_s": mbit,
            "retried": c.retried,
            "ring_full": c.ring_full,
            "refused": c.refused,
            "link_refused": c.link_refused,
            "late_frames": c.late_frames,
            "slices": a.slices,
            "cpu_us": super::cpu_us(),
            "link": { "id": link, "msgs_out": info.msgs_out, "bytes_out": info.bytes_out, "drops": d },
            "stopped_by_signal": stopped,
        });
        println!("{v}");
        return;
    }
    let drops = if drops.is_empty() {
        "none".to_string()
    } else {
        drops
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "video send: {} frames of {} stream(s), {w}x{h} RGBA at {} frames/s: {} rows, {:.1} MB in {took:.2} s: {fps:.1} frames/s, {mbit:.1} Mbit/s",
        c.frames,
        a.streams.len(),
        a.rate,
        c.rows,
        c.bytes as f64 / 1e6
    );
    println!(
        "video send: rows sent again (SPINE full) {}, ring full {} times, refused {}, refused by the link {}, frames started late {}; link {link}: {} messages out, drops {drops}",
        c.retried, c.ring_full, c.refused, c.link_refused, c.late_frames, info.msgs_out
    );
}
