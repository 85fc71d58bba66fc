//! `unet bench video`: SPINE's video client (the SPINE paper, section
//! 5.1) on this host. Each run starts two daemons on loopback UDP (the
//! server's adapter and the client's, each with the loopback's largest
//! datagram so that a row is one datagram), `unet video client` with one
//! window a stream (each moved between two places every `--move-every`
//! ms) and `unet video send` streaming the test pattern, and reads what
//! the extension counted: frames completed and lost, rows dropped by
//! reason, per stream; the last frame of each stream in the framebuffer
//! checked against the pattern; the throughput delivered; and the CPU
//! time of the client application over its run (its own `getrusage`,
//! from its windows placed to its end), beside the two adapters' (the
//! engines', over the streaming, from `/proc/PID/stat` in clock ticks)
//! and the server's (its own, over its run).
//!
//! The runs: several streams at once of `--size` at `--rate` (the paper
//! showed several at up to 40 Mbit/s each), one count after another, the
//! largest total with no frame lost named; then one 1080p stream at 30
//! frames a second (`--hd`, about 2 Gbit/s).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use serde_json::{json, Value};
use unet_engine::wire::udp::LOOPBACK_DATAGRAM;

use super::plot::{self, Figure, Scale, Series};
use super::report::warn_if_busy;

type Res<T> = Result<T, String>;

/// `unet bench video`.
#[derive(ClapArgs)]
pub struct Args {
    /// Stream counts of the several-streams runs (comma list; at most 16).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    streams: Vec<u32>,
    /// Each stream's frame size in those runs.
    #[arg(long, value_name = "WxH", default_value = "320x240", value_parser = crate::video::parse_size)]
    size: (u32, u32),
    /// Frames a second of each stream in those runs.
    #[arg(long, default_value_t = 30.0)]
    rate: f64,
    /// The 1080p run's size and rate (`none` to leave it out).
    #[arg(long, value_name = "WxH@RATE", default_value = "1920x1080@30")]
    hd: String,
    /// Seconds of streaming a run.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Move every window to its other place this often (0: never).
    #[arg(long, value_name = "MS", default_value_t = 100)]
    move_every: u64,
    /// The server sends each frame in this many slices spread over its
    /// period (1: the whole frame at once, which overflows the receiving
    /// adapter's wire inbox in bursts on a busy machine).
    #[arg(long, default_value_t = 8)]
    slices: u32,
    /// The engines keep polling this long after their last work before
    /// they sleep (`unet daemon --idle-spin-us`).
    #[arg(long, value_name = "US", default_value_t = 0)]
    spin_us: u64,
    /// The engines' largest UDP datagram.
    #[arg(long, default_value_t = LOOPBACK_DATAGRAM)]
    max_datagram: usize,
    /// JSON rows, one a run.
    #[arg(long)]
    json: bool,
    /// Write an SVG of the throughput against the stream count here.
    #[arg(long, value_name = "PATH")]
    svg: Option<PathBuf>,
}

/// One run's figures.
struct Run {
    streams: u32,
    w: u32,
    h: u32,
    rate: f64,
    frames: u32,
    seconds: f64,
    /// Per stream: completed, lost, rows dropped, last frame as the
    /// pattern.
    per_stream: Vec<(i64, i64, i64, bool)>,
    sent: Value,
    /// Where rows were lost on the client's side: its link's and
    /// adapter's drops (nonzero ones) and the kernel's at its socket.
    wire_drops: Value,
    /// The row handler's mean time, ns (its timed invocations).
    row_ns: f64,
    cpu_ms: [f64; 4],
}

impl Run {
    /// Frames not completed (lost, or never arrived), all streams.
    fn lost(&self) -> i64 {
        self.per_stream
            .iter()
            .map(|s| i64::from(self.frames) - s.0)
            .sum()
    }

    fn dropped(&self) -> i64 {
        self.per_stream.iter().map(|s| s.2).sum()
    }

    /// The frames per second the server kept.
    fn fps(&self) -> f64 {
        self.sent["frames_per_s"].as_f64().unwrap_or(0.0)
    }

    /// No frame lost, no row dropped, the last frames as the pattern, and
    /// the rate kept (within 3 %).
    fn clean(&self) -> bool {
        self.lost() == 0
            && self.dropped() == 0
            && self.per_stream.iter().all(|s| s.3)
            && self.fps() >= 0.97 * self.rate
    }

    /// Delivered: completed frames' bits over the sending time.
    fn mbit(&self) -> f64 {
        let done: i64 = self.per_stream.iter().map(|s| s.0).sum();
        done as f64 * f64::from(self.w * self.h * 32) / self.seconds.max(1e-9) / 1e6
    }

    fn json(&self) -> Value {
        let per: Vec<Value> = self
            .per_stream
            .iter()
            .enumerate()
            .map(|(i, s)| {
                json!({ "stream": i + 1, "completed": s.0, "lost": s.1, "not_arrived": i64::from(self.frames) - s.0 - s.1,
                        "rows_dropped": s.2, "last_frame_as_pattern": s.3 })
            })
            .collect();
        json!({
            "bench": "video",
            "streams": self.streams,
            "width": self.w,
            "height": self.h,
            "rate": self.rate,
            "frames": self.frames,
            "seconds": self.seconds,
            "mbit_per_s": self.mbit(),
            "frames_per_s": self.fps(),
            "mbit_per_s_per_stream": self.mbit() / f64::from(self.streams),
            "lost": self.lost(),
            "rows_dropped": self.dropped(),
            "clean": self.clean(),
            "per_stream": per,
            "cpu_ms": { "client": self.cpu_ms[0], "client_adapter": self.cpu_ms[1],
                        "server_adapter": self.cpu_ms[2], "server": self.cpu_ms[3] },
            "sender": self.sent,
            "client_wire_drops": self.wire_drops,
            "on_row_ns": self.row_ns,
        })
    }
}

/// A child killed on drop.
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A process's CPU time so far (user and system, its threads' whether
/// running or gone), ms, in clock ticks.
fn cpu_ms(pid: u32) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let f: Vec<&str> = s
        .rsplit_once(')')
        .map_or("", |(_, r)| r)
        .split_whitespace()
        .collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // SAFETY: sysconf reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (tick(11) + tick(12)) as f64 * 1e3 / hz
}

/// A daemon on `socket` with a loopback UDP port.
fn daemon(exe: &Path, socket: &Path, dgram: usize, spin_us: u64) -> Res<Kid> {
    let mut c = Command::new(exe);
    c.args(["daemon", "--socket"])
        .arg(socket)
        .args(["--udp", "127.0.0.1:0", "--max-datagram", &dgram.to_string()])
        .args(["--idle-spin-us", &spin_us.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut k = Kid(c.spawn().map_err(|e| format!("starting a daemon: {e}"))?);
    let mut line = String::new();
    let out = k.0.stdout.take().ok_or("the daemon's output")?;
    BufReader::new(out)
        .read_line(&mut line)
        .map_err(|e| format!("the daemon's first line: {e}"))?;
    if !line.starts_with("unet daemon: control socket") {
        return Err(format!("the daemon said {line:?}"));
    }
    Ok(k)
}

/// One run: `n` streams of `w` by `h` at `rate`.
fn run_one(a: &Args, classes: &(PathBuf, PathBuf), n: u32, w: u32, h: u32, rate: f64) -> Res<Run> {
    let exe = std::env::current_exe().map_err(|e| format!("this program: {e}"))?;
    let dir = std::env::temp_dir().join(format!("unet-bench-video-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (sa, sb) = (dir.join("server.sock"), dir.join("client.sock"));
    let da = daemon(&exe, &sa, a.max_datagram, a.spin_us)?;
    let db = daemon(&exe, &sb, a.max_datagram, a.spin_us)?;
    let frames = (rate * a.seconds).ceil() as u32;
    let cols = (f64::from(n).sqrt().ceil() as u32).max(1);
    let rows = n.div_ceil(cols);
    let moving = a.move_every > 0;
    let (fw, fh) = (cols * w * if moving { 2 } else { 1 }, rows * h);
    let dump = dir.join("fb.pam");
    let mut c = Command::new(&exe);
    c.args(["video", "client", "--socket"])
        .arg(&sb)
        .args(["--fb", &format!("{fw}x{fh}"), "--json", "--token", "7"])
        .args(["--frames", &frames.to_string()])
        .args(["--seconds", &(a.seconds * 4.0 + 10.0).to_string()])
        .arg("--class")
        .arg(&classes.0)
        .arg("--dump")
        .arg(&dump);
    if moving {
        c.args(["--move-every", &a.move_every.to_string()]);
    }
    let mut places = Vec::new();
    for i in 0..n {
        let (cx, cy) = (i % cols, i / cols);
        let x = cx * w * if moving { 2 } else { 1 };
        let mut spec = vec![(x, cy * h)];
        if moving {
            spec.push((x + w, cy * h));
        }
        for &(x, y) in &spec {
            c.arg("--window")
                .arg(format!("{i}:{}@{x},{y},{w}x{h}", i + 1));
        }
        places.push(spec);
    }
    c.stdout(Stdio::piped());
    let mut client = Kid(c.spawn().map_err(|e| format!("starting the client: {e}"))?);
    let mut out = BufReader::new(client.0.stdout.take().ok_or("the client's output")?);
    let mut ready = String::new();
    out.read_line(&mut ready)
        .map_err(|e| format!("the client's first line: {e}"))?;
    let at = ready
        .split("listening at ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .ok_or_else(|| format!("the client said {ready:?}"))?
        .to_string();
    let pids = [client.0.id(), db.0.id(), da.0.id()];
    let mut s = Command::new(&exe);
    s.args(["video", "send", "--socket"])
        .arg(&sa)
        .args(["--to", &at, "--token", "7", "--json"])
        .args(["--size", &format!("{w}x{h}"), "--rate", &rate.to_string()])
        .args(["--frames", &frames.to_string()])
        .args(["--slices", &a.slices.to_string()])
        .arg("--class")
        .arg(&classes.1)
        .stdout(Stdio::piped());
    for i in 0..n {
        s.args(["--stream", &(i + 1).to_string()]);
    }
    let before: Vec<f64> = pids.iter().map(|&p| cpu_ms(p)).collect();
    let t0 = Instant::now();
    let sender = s.spawn().map_err(|e| format!("starting the server: {e}"))?;
    let mut sender = Kid(sender);
    let status = loop {
        if let Some(st) = sender.0.try_wait().map_err(|e| e.to_string())? {
            break st;
        }
        if t0.elapsed() > Duration::from_secs_f64(a.seconds * 4.0 + 30.0) {
            return Err("the server did not finish".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let after: Vec<f64> = pids.iter().map(|&p| cpu_ms(p)).collect();
    let mut sent = String::new();
    if let Some(o) = sender.0.stdout.as_mut() {
        BufReader::new(o)
            .read_line(&mut sent)
            .map_err(|e| e.to_string())?;
    }
    if !status.success() {
        return Err(format!("the server failed: {status}"));
    }
    let sent: Value = serde_json::from_str(&sent).map_err(|e| format!("the server's JSON: {e}"))?;
    let mut line = String::new();
    out.read_line(&mut line)
        .map_err(|e| format!("the client's counters: {e}"))?;
    let v: Value =
        serde_json::from_str(&line).map_err(|e| format!("the client's JSON {line:?}: {e}"))?;
    let _ = client.0.wait();
    let mut wire_drops = serde_json::Map::new();
    if let Some(d) = v["link"]["drops"].as_object() {
        wire_drops.extend(
            d.iter()
                .filter(|(_, n)| n.as_u64() != Some(0))
                .map(|(k, n)| (k.clone(), n.clone())),
        );
    }
    let stat = Command::new(&exe)
        .args(["stat", "--json", "--socket"])
        .arg(&sb)
        .output()
        .map_err(|e| format!("unet stat: {e}"))?;
    if let Ok(st) = serde_json::from_slice::<Value>(&stat.stdout) {
        let k = &st["engine"]["wire_drop_socket_overflow"];
        if k.as_u64().is_some_and(|n| n > 0) {
            wire_drops.insert("kernel_socket_overflow".into(), k.clone());
        }
    }
    let pam = std::fs::read(&dump).map_err(|e| format!("{}: {e}", dump.display()))?;
    let px = pam
        .windows(7)
        .position(|x| x == b"ENDHDR\n")
        .map_or(&[][..], |p| &pam[p + 7..]);
    let last = |stream: u32, x: u32, y: u32| {
        let mut row = vec![0u8; w as usize * 4];
        (0..h).all(|r| {
            crate::video::pattern_row(stream, frames - 1, r, w, h, &mut row);
            let at = (((y + r) * fw + x) * 4) as usize;
            px.get(at..at + row.len()) == Some(&row[..])
        })
    };
    let mut per = Vec::new();
    for (i, win) in v["windows"]
        .as_array()
        .ok_or("no windows")?
        .iter()
        .enumerate()
    {
        let g = |k: &str| win[k].as_i64().unwrap_or(0);
        let dropped: i64 = crate::video::WINDOW_NAMES[2..].iter().map(|k| g(k)).sum();
        let ok = places[i].iter().any(|&(x, y)| last(i as u32 + 1, x, y));
        per.push((g("completed"), g("lost"), dropped, ok));
    }
    let _ = std::fs::remove_dir_all(&dir);
    drop((da, db));
    let server_cpu = sent["cpu_us"].as_f64().unwrap_or(0.0) / 1e3;
    Ok(Run {
        streams: n,
        w,
        h,
        rate,
        frames,
        seconds: sent["seconds"].as_f64().unwrap_or(a.seconds),
        per_stream: per,
        sent,
        wire_drops: Value::Object(wire_drops),
        row_ns: v["on_row"]["mean_ns"].as_f64().unwrap_or(0.0),
        cpu_ms: [
            v["cpu_run_us"].as_f64().unwrap_or(0.0) / 1e3,
            after[1] - before[1],
            after[2] - before[2],
            server_cpu,
        ],
    })
}

fn print_run(r: &Run) {
    let per: Vec<String> = r
        .per_stream
        .iter()
        .map(|s| format!("{}/{}/{}", s.0, s.1, s.2))
        .collect();
    println!(
        "{:>2} x {}x{} @ {:>4} ({:>5.1} kept): {:>7.1} Mbit/s ({:>6.1} a stream), lost {}, rows dropped {}, last frames {}, wire drops {}, onRow {:.2} us; CPU ms: client {:.1}, client's adapter {:.0}, server's adapter {:.0}, server {:.0}; per stream completed/lost/dropped {}",
        r.streams,
        r.w,
        r.h,
        r.rate,
        r.fps(),
        r.mbit(),
        r.mbit() / f64::from(r.streams),
        r.lost(),
        r.dropped(),
        if r.per_stream.iter().all(|s| s.3) { "as the pattern" } else { "NOT as the pattern" },
        r.wire_drops,
        r.row_ns / 1e3,
        r.cpu_ms[0],
        r.cpu_ms[1],
        r.cpu_ms[2],
        r.cpu_ms[3],
        per.join(" ")
    );
}

fn go(a: &Args) -> Res<()> {
    warn_if_busy();
    if a.streams.iter().any(|&n| n == 0 || n > 16) {
        return Err("--streams: 1 to 16 streams a run (the extension's windows)".into());
    }
    let hd = match a.hd.as_str() {
        "none" => None,
        s => {
            let (size, rate) = s.split_once('@').ok_or("--hd: WxH@RATE or none")?;
            let (w, h) = crate::video::parse_size(size)?;
            let rate: f64 = rate.parse().map_err(|e| format!("--hd: the rate: {e}"))?;
            Some((w, h, rate))
        }
    };
    let dir = std::env::temp_dir().join(format!("unet-bench-video-classes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let classes = (dir.join("Video.class"), dir.join("WirePing.class"));
    let write =
        |p: &Path, b: Vec<u8>| std::fs::write(p, b).map_err(|e| format!("{}: {e}", p.display()));
    write(
        &classes.0,
        crate::jdk::extension_class(None, "video/Video.java", "Video")?,
    )?;
    write(
        &classes.1,
        crate::jdk::extension_class(None, "WirePing.java", "WirePing")?,
    )?;
    let mut runs = Vec::new();
    let (w, h) = a.size;
    for &n in &a.streams {
        let r = run_one(a, &classes, n, w, h, a.rate)?;
        emit(a, &r);
        runs.push(r);
    }
    let several = runs.len();
    if let Some((w, h, rate)) = hd {
        let r = run_one(a, &classes, 1, w, h, rate)?;
        emit(a, &r);
        runs.push(r);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let best = runs[..several]
        .iter()
        .filter(|r| r.clean())
        .max_by(|x, y| x.mbit().total_cmp(&y.mbit()));
    let note = match best {
        Some(r) => format!(
            "largest total with no frame lost, no row dropped and the rate kept: {:.1} Mbit/s ({} streams of {:.1})",
            r.mbit(),
            r.streams,
            r.mbit() / f64::from(r.streams)
        ),
        None => "no run of several streams kept its rate without a frame lost".into(),
    };
    if a.json {
        println!("{}", json!({ "bench": "video", "summary": note }));
    } else {
        println!("{note}");
    }
    if let Some(p) = &a.svg {
        let f = Figure {
            title: "SPINE video: throughput delivered with no frame lost",
            x_desc: "streams",
            y_desc: "Mbit/s delivered",
            lines: vec![Series {
                name: format!("{}x{} at {} frames/s, each", w, h, a.rate),
                points: runs[..several]
                    .iter()
                    .map(|r| (f64::from(r.streams), r.mbit()))
                    .collect(),
            }],
            paper: vec![Series {
                name: "paper: 40 Mbit/s a stream".into(),
                points: a
                    .streams
                    .iter()
                    .map(|&n| (f64::from(n), 40.0 * f64::from(n)))
                    .collect(),
            }],
            scale: Scale::Linear,
        };
        plot::write_svg(&f, p)?;
    }
    Ok(())
}

fn emit(a: &Args, r: &Run) {
    if a.json {
        println!("{}", r.json());
    } else {
        print_run(r);
    }
}

pub fn run(a: Args) -> ExitCode {
    match go(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("unet bench video: {e}");
            ExitCode::FAILURE
        }
    }
}
