//! `unet video client`: the video client's host application (the SPINE
//! paper, section 5.1). It loads the video extension
//! (`extensions/video/Video.java`) onto a running daemon, claims its
//! configuration, makes its framebuffer 0, listens for the video server's
//! SPINE link on the daemon's UDP wire (printing the address and token a
//! server connects with), places the windows (`--window`, or a window
//! file) and then only moves them: `--move-every MS` moves each window
//! given several places to its next one, SIGHUP re-reads the window file.
//! It does nothing per frame: between moves it sleeps in `sigtimedwait`
//! (with `--frames N`, it asks the extension for its counters ten times a
//! second, to stop once every window has its frame N - 1 whole, or the
//! server's link has closed without it). At the
//! end (SIGINT, SIGTERM, `--seconds`, or `--frames`) it prints the
//! extension's counters for each window, its own CPU time over the run,
//! and can dump the framebuffer (`--dump`, a PAM image).
//!
//! A window is `WIN:STREAM@X,Y,WxH[:SOURCE]`: window `WIN` (0 to 15)
//! shows stream `STREAM` at `(X, Y)`, `W` by `H` pixels, taking rows
//! only from `SOURCE`: `link` (the default: the link this client
//! listens on), `link:N` (another link of the adapter) or a destination
//! as a number (`Spine.source`'s value). The same window given several
//! times names the places it cycles through. A row's pixels must be the
//! width of its window's place: a resize needs a server sending that size
//! (rows of another width are dropped and counted, `bad_length`).

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use unet::spine::{split_am, ExtensionOptions};
use unet::{Endpoint, EndpointConfig, RecvError, Session};
use unet_abi::spine::DEST_WIRE;

use super::{ints, GLOBAL_NAMES, HANDLERS, WINDOW_NAMES};

#[derive(clap::Args)]
pub struct Args {
    /// Control socket of the client's adapter's daemon (started with
    /// `--udp ADDR` for a server to reach it).
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The framebuffer's size, pixels.
    #[arg(long, value_name = "WxH", default_value = "1920x1080", value_parser = super::parse_size)]
    fb: (u32, u32),
    /// A window (repeatable; the same window again: another place it
    /// cycles through).
    #[arg(long = "window", value_name = "WIN:STREAM@X,Y,WxH[:SOURCE]")]
    windows: Vec<String>,
    /// A file of windows, one a line (`#` starts a comment); SIGHUP
    /// re-reads it.
    #[arg(long, value_name = "FILE")]
    window_file: Option<PathBuf>,
    /// Move each window with several places to its next one this often.
    #[arg(long, value_name = "MS")]
    move_every: Option<u64>,
    /// The token of the link a server connects with (default: a random
    /// one, printed).
    #[arg(long, default_value_t = 0)]
    token: u64,
    /// Stop once every window has its frame N - 1 whole, or the server's
    /// link has closed (or at --seconds).
    #[arg(long, value_name = "N")]
    frames: Option<u32>,
    /// Stop after this many seconds.
    #[arg(long)]
    seconds: Option<f64>,
    /// Write the framebuffer at the end to this file (a PAM image, RGBA).
    #[arg(long, value_name = "PATH")]
    dump: Option<PathBuf>,
    /// Print the counters as JSON.
    #[arg(long)]
    json: bool,
    /// The extension's first handler number (it takes three).
    #[arg(long, default_value_t = HANDLERS)]
    handlers: u16,
    /// Time budget of one handler invocation, µs: room for a row and its
    /// share of clearing a window's old place on a shared machine.
    #[arg(long, value_name = "US", default_value_t = 2000)]
    budget_us: u32,
    /// The extension's class file (default: `extensions/video/Video.java`
    /// of the source checkout, compiled with the JDK found).
    #[arg(long, value_name = "FILE.class")]
    class: Option<PathBuf>,
}

/// A window's place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    pub x: u32,
    pub y: u32,
    pub w: u32,
    pub h: u32,
}

/// Where a window takes rows from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The link this client listens on.
    Listening,
    /// A destination as `Spine.source` gives it.
    Dest(i32),
}

/// A window: its stream, its places (cycled through), its source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    pub win: u32,
    pub stream: u32,
    pub places: Vec<Place>,
    pub source: Source,
}

/// `WIN:STREAM@X,Y,WxH[:SOURCE]`.
fn parse_one(s: &str) -> Result<(u32, u32, Place, Source), String> {
    let bad = |why: &str| format!("window {s:?}: {why} (WIN:STREAM@X,Y,WxH[:SOURCE])");
    let (win, rest) = s.split_once(':').ok_or_else(|| bad("no ':'"))?;
    let (stream, rest) = rest.split_once('@').ok_or_else(|| bad("no '@'"))?;
    let (place, source) = match rest.split_once(':') {
        Some((p, src)) => (p, Some(src)),
        None => (rest, None),
    };
    let num = |t: &str, what: &str| {
        t.trim()
            .parse::<u32>()
            .map_err(|e| bad(&format!("{what}: {e}")))
    };
    let parts: Vec<&str> = place.split(',').collect();
    let [x, y, size] = parts[..] else {
        return Err(bad("the place is not X,Y,WxH"));
    };
    let (w, h) = super::parse_size(size.trim()).map_err(|e| bad(&e))?;
    let source = match source.map(str::trim) {
        None | Some("link") => Source::Listening,
        Some(t) => match t.strip_prefix("link:") {
            Some(n) => Source::Dest((DEST_WIRE << 24 | num(n, "the link")?) as i32),
            None => Source::Dest(t.parse().map_err(|e| bad(&format!("the source: {e}")))?),
        },
    };
    let place = Place {
        x: num(x, "X")?,
        y: num(y, "Y")?,
        w,
        h,
    };
    Ok((num(win, "WIN")?, num(stream, "STREAM")?, place, source))
}

/// Windows from specs, a window's places in the order given.
pub fn parse_windows<'a>(specs: impl IntoIterator<Item = &'a str>) -> Result<Vec<Window>, String> {
    let mut out: Vec<Window> = Vec::new();
    for s in specs {
        let (win, stream, place, source) = parse_one(s)?;
        match out.iter_mut().find(|w| w.win == win) {
            Some(w) if w.stream != stream || w.source != source => {
                return Err(format!(
                    "window {s:?}: window {win} shows stream {} from one source",
                    w.stream
                ))
            }
            Some(w) => w.places.push(place),
            None => out.push(Window {
                win,
                stream,
                places: vec![place],
                source,
            }),
        }
    }
    Ok(out)
}

/// The windows of `--window` and the window file.
fn gather(a: &Args) -> Result<Vec<Window>, String> {
    let text = match &a.window_file {
        Some(f) => std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?,
        None => String::new(),
    };
    let lines = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty());
    parse_windows(a.windows.iter().map(String::as_str).chain(lines))
}

/// What `onStats` answers for a window.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub global: Vec<i32>,
    pub stream: i32,
    pub place: Vec<i32>,
    pub version: i32,
    pub frame: i32,
    pub rows: i32,
    pub counts: Vec<i32>,
}

/// The running client.
struct Client {
    ep: Endpoint,
    base: u16,
    /// The listening link as a source.
    link_source: i32,
    windows: Vec<Window>,
    /// Each window's index in its places.
    at: Vec<usize>,
    moves: u64,
    refused: u64,
    buf: Vec<u8>,
}

impl Client {
    /// An answer under handler `h` (others that arrive are left out).
    fn answer(&mut self, h: u16) -> Result<Vec<u8>, String> {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("the extension did not answer within 10 s".into());
            }
            match self.ep.recv(&mut self.buf, Some(left)) {
                Ok(r) if r.handler() == Some(h) => {
                    let (args, _) = split_am(&self.buf[..r.len]).ok_or("a bad answer")?;
                    return Ok(args.to_vec());
                }
                Ok(_) | Err(RecvError::Timeout) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// Configure: whether done.
    fn config(&mut self, args: &[i32]) -> Result<bool, String> {
        self.ep
            .send_am(self.base + 1, &ints(args), &[])
            .map_err(|e| format!("configuration: {e}"))?;
        let a = self.answer(self.base + 1)?;
        Ok(a.get(4..8) == Some(&[0, 0, 0, 0][..]))
    }

    /// Place window `k` at its current place: whether done.
    fn place(&mut self, k: usize) -> Result<bool, String> {
        let w = &self.windows[k];
        let p = w.places[self.at[k]];
        let src = match w.source {
            Source::Listening => self.link_source,
            Source::Dest(d) => d,
        };
        let args = [
            1,
            w.win as i32,
            w.stream as i32,
            p.x as i32,
            p.y as i32,
            p.w as i32,
            p.h as i32,
            src,
        ];
        let ok = self.config(&args)?;
        if !ok {
            self.refused += 1;
        }
        Ok(ok)
    }

    /// Every window with several places to its next.
    fn move_all(&mut self) -> Result<(), String> {
        for k in 0..self.windows.len() {
            if self.windows[k].places.len() > 1 {
                self.at[k] = (self.at[k] + 1) % self.windows[k].places.len();
                self.place(k)?;
                self.moves += 1;
            }
        }
        Ok(())
    }

    /// Windows `new` in place of the present ones: those no longer given
    /// closed, the others placed at their first place.
    fn replace(&mut self, new: Vec<Window>) -> Result<(), String> {
        let gone: Vec<u32> = self
            .windows
            .iter()
            .filter(|w| !new.iter().any(|n| n.win == w.win))
            .map(|w| w.win)
            .collect();
        for win in gone {
            self.config(&[2, win as i32])?;
        }
        self.at = vec![0; new.len()];
        self.windows = new;
        for k in 0..self.windows.len() {
            self.place(k)?;
        }
        Ok(())
    }

    fn stats(&mut self, win: u32) -> Result<Stats, String> {
        self.ep
            .send_am(self.base + 2, &ints(&[win as i32]), &[])
            .map_err(|e| format!("asking for counters: {e}"))?;
        let a = self.answer(self.base + 2)?;
        let v: Vec<i32> = a
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if v.len() < 12 + WINDOW_NAMES.len() {
            return Err(format!("a short answer to a counter request: {v:?}"));
        }
        Ok(Stats {
            global: v[1..4].to_vec(),
            stream: v[4],
            place: v[5..9].to_vec(),
            version: v[9],
            frame: v[10],
            rows: v[11],
            counts: v[12..12 + WINDOW_NAMES.len()].to_vec(),
        })
    }

    /// Whether every window has frame `n - 1` whole.
    fn all_done(&mut self, n: u32) -> Result<bool, String> {
        for k in 0..self.windows.len() {
            let s = self.stats(self.windows[k].win)?;
            if s.frame < n as i32 - 1 || s.rows < s.place[3] {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

pub fn run(a: Args) -> Result<(), String> {
    let sigs = super::block_signals(&[libc::SIGHUP, libc::SIGINT, libc::SIGTERM]);
    let windows = gather(&a)?;
    if windows.is_empty() {
        return Err("no window: give --window or --window-file".into());
    }
    let class = crate::jdk::extension_class(a.class.as_deref(), "video/Video.java", "Video")?;
    let at = |e: String| format!("{}: {e}", a.socket.display());
    let session = Session::connect(&a.socket).map_err(|e| at(e.to_string()))?;
    let opts = ExtensionOptions {
        arg: i32::from(a.handlers),
        budget_us: a.budget_us,
        ..ExtensionOptions::named("video")
    };
    let ext = session
        .load_extension(&class, opts)
        .map_err(|e| at(format!("loading the video extension: {e}")))?;
    let ep = session
        .create_endpoint(EndpointConfig::default())
        .map_err(|e| at(e.to_string()))?;
    let mut c = Client {
        ep,
        base: a.handlers,
        link_source: -1,
        at: vec![0; windows.len()],
        windows,
        moves: 0,
        refused: 0,
        buf: vec![0u8; 1 << 16],
    };
    // Claimed before anything else can.
    if !c.config(&[0])? {
        return Err("the extension's configuration was claimed by another endpoint".into());
    }
    let (fw, fh) = a.fb;
    let fb = session
        .spine_framebuffer(ext.id, fw, fh, false)
        .map_err(|e| at(format!("the framebuffer: {e}")))?;
    let mut line = format!(
        "video client: extension {} with handlers {:?}; framebuffer {fw}x{fh}",
        ext.id, ext.handlers
    );
    let mut listening = None;
    if let Some(mut addr) = session.udp_addr() {
        if addr.ip().is_unspecified() {
            addr.set_ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
        }
        let (link, token) = session
            .spine_link_listen(a.token)
            .map_err(|e| at(format!("listening for a link: {e}")))?;
        c.link_source = (DEST_WIRE << 24 | link) as i32;
        listening = Some(link);
        line += &format!("; link {link} listening at {addr} with token {token}");
    } else if c.windows.iter().any(|w| w.source == Source::Listening) {
        return Err(at(
            "no UDP wire for a server's link (start its daemon with --udp ADDR)".into(),
        ));
    }
    for k in 0..c.windows.len() {
        if !c.place(k)? {
            let w = &c.windows[k];
            return Err(format!(
                "window {} (stream {} at {:?}) refused: outside the framebuffer, or over another window",
                w.win, w.stream, w.places[0]
            ));
        }
    }
    println!("{line}");
    let _ = std::io::stdout().flush();

    let cpu0 = super::cpu_us();
    let start = Instant::now();
    let every = a.move_every.map(Duration::from_millis);
    let mut next_move = every.map(|e| start + e);
    let poll = Duration::from_millis(100);
    let mut next_poll = a.frames.map(|_| start + poll);
    let mut closed = false;
    let end = a.seconds.map(|s| start + Duration::from_secs_f64(s));
    let why = loop {
        let now = Instant::now();
        let wake = [next_move, next_poll, end].into_iter().flatten().min();
        let wait = wake.map_or(Duration::from_secs(3600), |t| {
            t.saturating_duration_since(now)
        });
        match super::signal_wait(&sigs, wait) {
            Some(libc::SIGHUP) => match gather(&a) {
                Ok(w) if !w.is_empty() => {
                    c.replace(w)?;
                    println!(
                        "video client: windows re-read ({} refused so far)",
                        c.refused
                    );
                }
                Ok(_) => println!("video client: windows not replaced: none given"),
                Err(e) => println!("video client: windows not replaced: {e}"),
            },
            Some(s) => break format!("signal {s}"),
            None => {}
        }
        let now = Instant::now();
        if let (Some(t), Some(e)) = (next_move, every) {
            if now >= t {
                c.move_all()?;
                next_move = Some(t + e);
            }
        }
        if let (Some(t), Some(n)) = (next_poll, a.frames) {
            if now >= t {
                if c.all_done(n)? {
                    break format!("frame {} whole in every window", n - 1);
                }
                if closed {
                    break "the server's link closed".to_string();
                }
                // A server gone before the last frame (one lost): the
                // rows it sent are in; one more look, then stop.
                closed = listening.is_some_and(|l| {
                    session
                        .spine_links()
                        .is_ok_and(|ls| ls.link(l).is_some_and(|i| i.state == "closed"))
                });
                next_poll = Some(now + poll);
            }
        }
        if end.is_some_and(|e| now >= e) {
            break "time".to_string();
        }
    };
    let run_s = start.elapsed().as_secs_f64();
    let cpu_run = super::cpu_us() - cpu0;
    let mut rows = Vec::new();
    for k in 0..c.windows.len() {
        let win = c.windows[k].win;
        rows.push((win, c.stats(win)?));
    }
    if let Some(p) = &a.dump {
        dump(&fb, p)?;
    }
    let fbc = fb.counters();
    // The row handler's cost (its timed invocations) and stops.
    let (row_ns, row_calls, stopped) = session
        .list_extensions()
        .ok()
        .and_then(|l| {
            let x = l.extensions.into_iter().find(|x| x.id == ext.id)?;
            let h = x.handlers.into_iter().find(|h| h.number == a.handlers)?;
            Some((h.mean_ns(), h.invocations, h.terminated()))
        })
        .unwrap_or((0, 0, 0));
    // The wire's drops on this side: the link's, and the adapter's of
    // frames no link took.
    let (link_in, link_drops) = match listening {
        Some(l) => {
            let ls = session.spine_links().map_err(|e| at(e.to_string()))?;
            let mut d: Vec<(String, u64)> = ls.drops.clone();
            let mut n = 0;
            if let Some(i) = ls.link(l) {
                n = i.msgs_in;
                d.extend(i.drops.iter().map(|(k, v)| (format!("link_{k}"), *v)));
            }
            (n, d)
        }
        None => (0, Vec::new()),
    };
    let global = rows
        .first()
        .map(|(_, s)| s.global.clone())
        .unwrap_or_default();
    if a.json {
        let wins: Vec<Value> = rows
            .iter()
            .map(|(win, s)| {
                let mut o = json!({
                    "window": win,
                    "stream": s.stream,
                    "place": s.place,
                    "version": s.version,
                    "frame": s.frame,
                    "rows": s.rows,
                });
                for (k, n) in WINDOW_NAMES.iter().zip(&s.counts) {
                    o[*k] = json!(n);
                }
                o
            })
            .collect();
        let g: serde_json::Map<String, Value> = GLOBAL_NAMES
            .iter()
            .zip(&global)
            .map(|(k, n)| (k.to_string(), json!(n)))
            .collect();
        let v = json!({
            "windows": wins,
            "global": g,
            "moves": c.moves,
            "refused": c.refused,
            "link": { "msgs_in": link_in, "drops": link_drops.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<String, Value>>() },
            "on_row": { "invocations": row_calls, "mean_ns": row_ns, "terminated": stopped },
            "framebuffer": { "width": fw, "height": fh, "writes": fbc.writes, "bytes": fbc.bytes, "refused": fbc.refused },
            "cpu_setup_us": cpu0,
            "cpu_run_us": cpu_run,
            "run_s": run_s,
            "stopped_by": why,
        });
        println!("{v}");
        return Ok(());
    }
    for (win, s) in &rows {
        let drops: Vec<String> = WINDOW_NAMES[2..]
            .iter()
            .zip(&s.counts[2..])
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        println!(
            "window {win}: stream {} at {:?}: frames completed {}, lost {}; rows dropped: {}",
            s.stream,
            s.place,
            s.counts[0],
            s.counts[1],
            drops.join(", ")
        );
    }
    let g: Vec<String> = GLOBAL_NAMES
        .iter()
        .zip(&global)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    println!(
        "not of a window: {}; moves {}, configurations refused {}; framebuffer writes {}, refused {}",
        g.join(", "),
        c.moves,
        c.refused,
        fbc.writes,
        fbc.refused
    );
    let nonzero: Vec<String> = link_drops
        .iter()
        .filter(|(_, v)| *v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    println!(
        "wire: {link_in} rows in; drops {}",
        if nonzero.is_empty() {
            "none".to_string()
        } else {
            nonzero.join(", ")
        }
    );
    println!(
        "onRow: {row_calls} invocations, {:.2} us each (timed ones), {stopped} stopped",
        row_ns as f64 / 1e3
    );
    println!(
        "video client: stopped by {why}: CPU {:.1} ms over the run of {run_s:.2} s (setup {:.1} ms)",
        cpu_run as f64 / 1e3,
        cpu0 as f64 / 1e3
    );
    Ok(())
}

/// The framebuffer as a PAM image (RGBA).
fn dump(fb: &unet::spine_framebuffer::Framebuffer, p: &Path) -> Result<(), String> {
    let mut px = vec![0u8; fb.pixel_bytes()];
    if !fb.read(0, &mut px) {
        return Err("reading the framebuffer".into());
    }
    let mut out = format!(
        "P7\nWIDTH {}\nHEIGHT {}\nDEPTH 4\nMAXVAL 255\nTUPLTYPE RGB_ALPHA\nENDHDR\n",
        fb.width(),
        fb.height()
    )
    .into_bytes();
    out.extend_from_slice(&px);
    std::fs::write(p, out).map_err(|e| format!("{}: {e}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse_with_their_places_and_sources() {
        let w = parse_windows([
            "0:1@0,0,64x48",
            "1:2@100,0,32x16:link:3",
            "0:1@10,20,64x48",
            "2:5@0,100,8x8:16777216",
        ])
        .unwrap();
        assert_eq!(w.len(), 3);
        assert_eq!(w[0].places.len(), 2);
        assert_eq!(
            w[0].places[1],
            Place {
                x: 10,
                y: 20,
                w: 64,
                h: 48
            }
        );
        assert_eq!(w[0].source, Source::Listening);
        assert_eq!(w[1].source, Source::Dest((3 << 24) | 3));
        assert_eq!(w[2].source, Source::Dest(1 << 24));
        for bad in [
            "0:1",
            "0@1,2,3x4",
            "x:1@0,0,4x4",
            "0:1@0,0",
            "0:1@0,0,4",
            "0:1@0,0,0x4",
            "0:1@0,0,4x4:link:x",
        ] {
            assert!(parse_windows([bad]).is_err(), "{bad}");
        }
        assert!(parse_windows(["0:1@0,0,4x4", "0:2@8,8,4x4"]).is_err());
    }
}
