//! `unet video send|client|view`: SPINE's video client (the SPINE paper,
//! section 5.1). `send` (`video/send.rs`) is the video server: it streams
//! raw frames as row packets over the UDP wire to the video extension
//! (`extensions/video/Video.java`) on the client's adapter. `client`
//! (`video/client.rs`) is the host application: it loads the extension,
//! makes the framebuffer, places and moves windows and does nothing per
//! frame. `view` (`video/view.rs`) serves a web page that shows the
//! framebuffer live, through a read-only view of it. Also here: what both share (the extension's handler numbers and
//! counters, the class files compiled from the checkout, the test
//! pattern).
//!
//! Pixels are 4 bytes, R, G, B, A in that order in memory (`ffmpeg`'s
//! `rgba`, a browser canvas's `ImageData`).

use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;

mod client;
mod send;
mod view;

#[derive(Subcommand)]
pub enum Command {
    /// The video server: stream a test pattern or a video file as row
    /// packets over the UDP wire to a video client's adapter.
    Send(send::Args),
    /// The host application: load the video extension onto a running
    /// daemon, make its framebuffer, place and move windows, print the
    /// extension's counters at the end.
    Client(client::Args),
    /// Serve a web page that shows a framebuffer of an extension (one of
    /// this user's) live, read through a read-only view of it.
    View(view::Args),
}

pub fn run(c: Command) -> ExitCode {
    let r = match c {
        Command::Send(a) => send::run(a),
        Command::Client(a) => client::run(a),
        Command::View(a) => return view::run(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => crate::spine::fail(e),
    }
}

/// The video extension's first handler by default (`onRow`; `onConfig`
/// and `onStats` follow).
pub const HANDLERS: u16 = 200;

/// `Video.java`'s counters not of a window, in order.
pub const GLOBAL_NAMES: [&str; 3] = ["no_window", "bad_args", "bad_config"];
/// A window's counters, in order: frames completed and lost, then rows
/// dropped by reason.
pub const WINDOW_NAMES: [&str; 9] = [
    "completed",
    "lost",
    "late",
    "far_ahead",
    "bad_row",
    "bad_length",
    "duplicate",
    "bad_source",
    "fb_refused",
];

/// Block `sigs` in this thread (before a session starts any thread,
/// which inherit the mask), so that [`signal_wait`] takes them.
pub fn block_signals(sigs: &[i32]) -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise the local set;
    // pthread_sigmask changes this thread's mask only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// A signal of `set` taken within `wait` (zero: one pending now), if any.
pub fn signal_wait(set: &libc::sigset_t, wait: Duration) -> Option<i32> {
    let t = libc::timespec {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(wait.subsec_nanos() as i32),
    };
    // SAFETY: `set` is an initialised signal set; the info pointer may be
    // null; the call returns at the timeout at the latest.
    let s = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &t) };
    (s > 0).then_some(s)
}

/// This process's CPU time so far (user and system), µs.
pub fn cpu_us() -> u64 {
    // SAFETY: getrusage writes the zeroed struct it is given.
    let u = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(u.ru_utime) + us(u.ru_stime)
}

/// Little-endian ints.
pub fn ints(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|i| i.to_le_bytes()).collect()
}

/// `WxH`, each 1 or more.
pub fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s.split_once('x').ok_or_else(|| format!("{s:?}: not WxH"))?;
    let w: u32 = w.parse().map_err(|e| format!("{s:?}: the width: {e}"))?;
    let h: u32 = h.parse().map_err(|e| format!("{s:?}: the height: {e}"))?;
    if w == 0 || h == 0 {
        return Err(format!("{s:?}: an empty size"));
    }
    Ok((w, h))
}

/// The test pattern's pixel at `(x, y)` of `stream`'s frame `frame`, `w`
/// by `h` pixels, as RGBA bytes: a background that is a function of the
/// stream and the place (red the column, green the row, blue the
/// stream), a white vertical bar that moves right each frame (tearing
/// shows as a broken bar), and the frame's number in black digits at the
/// top left (a lost frame shows as a skipped number). Never all zero (a
/// cleared pixel): alpha is 255. The tests check rows against it.
#[cfg(test)]
pub fn pattern(stream: u32, frame: u32, x: u32, y: u32, w: u32, h: u32) -> [u8; 4] {
    if digit_on(frame, x, y, h) {
        return [0, 0, 0, 255];
    }
    let (bx, bw) = bar(frame, w);
    if (x + w - bx) % w < bw {
        return [255, 255, 255, 255];
    }
    background(stream, x, y)
}

/// The background pixel.
fn background(stream: u32, x: u32, y: u32) -> [u8; 4] {
    [
        x as u8,
        y as u8,
        0x40 | (stream.wrapping_mul(0x35) as u8 & 0xbf),
        255,
    ]
}

/// The bar's first column and width in frame `frame` of width `w`.
fn bar(frame: u32, w: u32) -> (u32, u32) {
    let step = (w / 32).max(1);
    let bx = ((u64::from(frame) * u64::from(step)) % u64::from(w)) as u32;
    (bx, (w / 16).clamp(1, w))
}

/// The digits' scale (pixels a font pixel) in a frame `h` high.
fn scale(h: u32) -> u32 {
    (h / 40).max(1)
}

/// 3x5 digits, a row of 3 bits each (bit 2 the left column).
const FONT: [[u8; 5]; 10] = [
    [7, 5, 5, 5, 7],
    [2, 6, 2, 2, 7],
    [7, 1, 7, 4, 7],
    [7, 1, 7, 1, 7],
    [5, 5, 7, 1, 1],
    [7, 4, 7, 1, 7],
    [7, 4, 7, 5, 7],
    [7, 1, 2, 2, 2],
    [7, 5, 7, 5, 7],
    [7, 5, 7, 1, 7],
];

/// Whether `(x, y)` is a digit's pixel of frame number `frame`, drawn at
/// `(2s, 2s)` with scale `s`, a digit 4s wide (3 and a gap).
fn digit_on(frame: u32, x: u32, y: u32, h: u32) -> bool {
    let s = scale(h);
    if x < 2 * s || y < 2 * s || y >= 7 * s {
        return false;
    }
    let (col, row) = ((x - 2 * s) / s, (y - 2 * s) / s);
    let (k, c) = (col / 4, col % 4);
    let text = frame.to_string();
    match text.as_bytes().get(k as usize) {
        Some(d) if c < 3 => FONT[usize::from(d - b'0')][row as usize] >> (2 - c) & 1 == 1,
        _ => false,
    }
}

/// Row `y` of the test pattern's frame into `out` (`w * 4` bytes): the
/// same pixels as `pattern`, drawn a part at a time.
pub fn pattern_row(stream: u32, frame: u32, y: u32, w: u32, h: u32, out: &mut [u8]) {
    for (x, px) in out.chunks_exact_mut(4).enumerate() {
        px.copy_from_slice(&background(stream, x as u32, y));
    }
    let (bx, bw) = bar(frame, w);
    for i in 0..bw {
        let x = ((bx + i) % w) as usize * 4;
        out[x..x + 4].copy_from_slice(&[255, 255, 255, 255]);
    }
    let s = scale(h);
    if y >= 2 * s && y < 7 * s {
        let digits = frame.to_string().len() as u32;
        let end = (2 * s + digits * 4 * s).min(w);
        for x in 2 * s..end {
            if digit_on(frame, x, y, h) {
                let at = x as usize * 4;
                out[at..at + 4].copy_from_slice(&[0, 0, 0, 255]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_drawn_whole_is_the_pattern_pixel_by_pixel() {
        for (w, h) in [(1, 1), (7, 3), (64, 48), (200, 120)] {
            for frame in [0, 1, 9, 31, 123_456, u32::MAX] {
                for y in 0..h {
                    let mut row = vec![0u8; w as usize * 4];
                    pattern_row(3, frame, y, w, h, &mut row);
                    for x in 0..w {
                        let at = x as usize * 4;
                        assert_eq!(
                            row[at..at + 4],
                            pattern(3, frame, x, y, w, h),
                            "{w}x{h} frame {frame} ({x}, {y})"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_bar_moves_and_the_counter_changes_from_frame_to_frame() {
        let (w, h) = (200, 120);
        let row = |f: u32, y: u32| {
            let mut r = vec![0u8; w as usize * 4];
            pattern_row(1, f, y, w, h, &mut r);
            r
        };
        // Below the digits only the bar differs; at their rows, more.
        assert_ne!(row(0, 100), row(1, 100));
        assert_ne!(row(3, 9), row(4, 9));
        assert_ne!(pattern(1, 0, 100, 60, w, h), pattern(2, 0, 100, 60, w, h));
        assert!((0..w).all(|x| pattern(1, 5, x, 60, w, h)[3] == 255));
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("1920x1080"), Ok((1920, 1080)));
        assert!(parse_size("0x10").is_err());
        assert!(parse_size("10").is_err());
        assert!(parse_size("ax10").is_err());
    }
}
