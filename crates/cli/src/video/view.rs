//! `unet video view`: a viewer of a SPINE framebuffer, its own process
//! as a display server's viewer would be. It asks the engine for a
//! read-only view of framebuffer `--fb` of extension `--ext` (one of
//! this user's: `Session::spine_framebuffer_view`) and serves, with
//! `tiny_http`, a small page (`view.html`) that draws it on a canvas and
//! fetches it again and again, showing the frames it got, their rate and
//! the framebuffer's counters.
//!
//! - `GET /`: the page.
//! - `GET /frame`: the pixels, raw RGBA bytes (4 a pixel, row after row,
//!   converted from the framebuffer's format by [`to_rgba`]), with the
//!   size and the counters in headers: `X-Width`, `X-Height`,
//!   `X-Writes`, `X-Bytes`, `X-Refused`, and `X-Served` (frames this
//!   viewer served). Raw rather than PNG: a frame costs a copy, and its size (1.2 MB for 640 by 480, 8.3 MB for 1920 by 1080)
//!   is nothing to the loopback a viewer is served on. Measured (`ci`
//!   profile, a machine shared with other builds): a frame served in
//!   about 1 ms for 640 by 480 and 20 ms for 1920 by 1080, where the
//!   `png` crate's fastest encoding of a patterned frame alone took 5 ms
//!   and 91 ms (to 0.36 and 2.4 MB), before the browser decodes it.
//! - `GET /stats`: one JSON object: the size, the counters, and `served`.
//!
//! The page only reads: the view is mapped read-only, and nothing the
//! page asks changes the framebuffer.

use std::io::{self, Cursor, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use tiny_http::{Header, Method, Response, Server};
use unet::spine_framebuffer::Framebuffer;
use unet::{Error, ErrorCode};

/// The page: a canvas fed by `/frame`.
const PAGE: &str = include_str!("view.html");

#[derive(clap::Args)]
pub struct Args {
    /// Control socket of the engine.
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The extension whose framebuffer to show (one of this user's).
    #[arg(long, value_name = "ID")]
    ext: u32,
    /// The framebuffer's number in the extension (0: the first made).
    #[arg(long, value_name = "N", default_value_t = 0)]
    fb: u32,
    /// Address to serve the page on (port 0: a free port); the page's
    /// URL is printed on a line of its own.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7780")]
    listen: SocketAddr,
}

pub fn run(a: Args) -> ExitCode {
    let fb = match unet::Session::connect(&a.socket)
        .and_then(|s| s.spine_framebuffer_view(a.ext, a.fb))
    {
        Ok(fb) => fb,
        Err(e) => return fail(not_viewed(&a, e)),
    };
    let server = match Server::http(a.listen) {
        Ok(s) => s,
        Err(e) => return fail(not_listening(a.listen, &*e)),
    };
    let addr = server.server_addr().to_ip().unwrap_or(a.listen);
    println!(
        "unet video view: framebuffer {} of extension {} ({} by {}) at http://{addr}/",
        a.fb,
        a.ext,
        fb.width(),
        fb.height()
    );
    let _ = io::stdout().flush();
    let mut served = 0u64;
    for req in server.incoming_requests() {
        let r = match (req.method(), req.url()) {
            (Method::Get, "/") => text(200, "text/html; charset=utf-8", PAGE),
            (Method::Get, "/frame") => {
                served += 1;
                frame(&fb, served)
            }
            (Method::Get, "/stats") => {
                let c = fb.counters();
                let v = serde_json::json!({
                    "width": fb.width(),
                    "height": fb.height(),
                    "writes": c.writes,
                    "bytes": c.bytes,
                    "refused": c.refused,
                    "served": served,
                });
                text(200, "application/json", &v.to_string())
            }
            (Method::Get, _) => text(404, "text/plain", "not found: /, /frame and /stats only\n"),
            _ => text(405, "text/plain", "GET only\n"),
        };
        // A browser that went away mid-answer is no concern of ours.
        let _ = req.respond(r);
    }
    ExitCode::SUCCESS
}

/// Why no view was given, for a person.
fn not_viewed(a: &Args, e: Error) -> String {
    let what = format!("framebuffer {} of extension {}", a.fb, a.ext);
    match e {
        Error::Engine(ErrorCode::NoSuchExtension) => format!(
            "{what}: not found: the engine at {} has no extension {} (`unet spine list` shows them)",
            a.socket.display(),
            a.ext
        ),
        Error::Rejected(why) => format!("{what}: not found or not yours: {why}"),
        e => format!("{what}: cannot view it through {}: {e}", a.socket.display()),
    }
}

/// Why the page cannot be served at `addr`, for a person.
fn not_listening(addr: SocketAddr, e: &(dyn std::error::Error + 'static)) -> String {
    match e.downcast_ref::<io::Error>().map(io::Error::kind) {
        Some(io::ErrorKind::AddrInUse) => format!(
            "cannot listen on {addr}: the address is in use (another server there?); \
             choose another with --listen, or port 0 for any free one"
        ),
        _ => format!("cannot listen on {addr}: {e}"),
    }
}

/// The framebuffer's pixel format, converted to the canvas's here and
/// nowhere else. A pixel of the framebuffer is 4 bytes, R, G, B and a
/// fourth the viewer ignores, in that order in memory (what `unet video
/// send` sends: `ffmpeg`'s `rgba`). A canvas's `ImageData` takes the bytes
/// R, G, B, A: each pixel is made opaque (A = 255).
pub(crate) fn to_rgba(px: &mut [u8]) {
    for p in px.chunks_exact_mut(4) {
        p[3] = 255;
    }
}

/// `/frame`: the pixels as RGBA, the size and counters in headers.
fn frame(fb: &Framebuffer, served: u64) -> Response<Cursor<Vec<u8>>> {
    let mut px = vec![0u8; fb.pixel_bytes()];
    fb.read(0, &mut px);
    to_rgba(&mut px);
    let c = fb.counters();
    let mut r = Response::from_data(px);
    let headers = [
        ("Content-Type", "application/octet-stream".to_string()),
        ("Cache-Control", "no-store".to_string()),
        ("X-Width", fb.width().to_string()),
        ("X-Height", fb.height().to_string()),
        ("X-Writes", c.writes.to_string()),
        ("X-Bytes", c.bytes.to_string()),
        ("X-Refused", c.refused.to_string()),
        ("X-Served", served.to_string()),
    ];
    for (k, v) in headers {
        if let Ok(h) = Header::from_bytes(k.as_bytes(), v.as_bytes()) {
            r.add_header(h);
        }
    }
    r
}

fn text(code: u16, kind: &str, body: &str) -> Response<Cursor<Vec<u8>>> {
    let mut r = Response::from_string(body).with_status_code(code);
    if let Ok(h) = Header::from_bytes(&b"Content-Type"[..], kind.as_bytes()) {
        r.add_header(h);
    }
    r
}

fn fail(why: String) -> ExitCode {
    eprintln!("unet video view: {why}");
    ExitCode::from(1)
}

#[cfg(test)]
mod tests {
    use super::to_rgba;

    #[test]
    fn a_pixel_keeps_r_g_b_and_becomes_opaque() {
        let mut px = vec![0x11, 0x22, 0x33, 0, 0xff, 0, 0, 0x7f, 0, 0, 0x80, 255];
        to_rgba(&mut px);
        assert_eq!(
            px,
            [0x11, 0x22, 0x33, 255, 0xff, 0, 0, 255, 0, 0, 0x80, 255]
        );
    }
}
