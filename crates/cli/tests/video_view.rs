//! `unet video view` in a real browser: a daemon, an extension of this
//! test that writes a known image into its framebuffer (a row a
//! message), the viewer on a free loopback port, and headless Chromium
//! (Debian's `chromium`) loading its page. The screenshot's area of the
//! canvas must match the framebuffer's image, every pixel within 2 of
//! each channel (the page draws the pixels unscaled, so only the
//! browser's colour handling could move them); the page's own text must
//! show frames drawn and the engine's counters; after the image changes
//! a second screenshot must show the new one (the page is live). Then the
//! viewer's refusals: an address in use, an extension or framebuffer not
//! found, and (when the test runs as root, which can run the viewer as
//! `nobody`) another user's extension.

mod common;
mod tools;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::browser::{browse, chromium, screenshot, wait};
use common::{unet_bin, Daemon, Proc, TempDir};
use unet::{Endpoint, EndpointConfig, Session};

/// The framebuffer's size.
const W: u32 = 160;
const H: u32 = 120;
/// The extension's handler.
const WRITE: u16 = 64;
/// The browser's window.
const WINDOW: (u32, u32) = (400, 240);
/// Most a screenshot's channel may differ from the framebuffer's.
const TOLERANCE: u8 = 2;

/// Image `k`'s pixel at `(x, y)`, as the framebuffer holds it: the bytes
/// R, G, B and a fourth (set, to show that the viewer ignores it), as the
/// little-endian word `0xXXBBGGRR`.
fn image(k: u32, x: u32, y: u32) -> u32 {
    let (r, g, b) = match k {
        // Gradients: red across, green down, blue a checkerboard.
        0 => (
            x * 255 / (W - 1),
            y * 255 / (H - 1),
            ((x / 8 + y / 8) % 2) * 200 + 20,
        ),
        // Another picture: a bright bar over a dark ground, colours
        // swapped.
        _ if (40..60).contains(&x) => (250, 240, 10),
        _ => (255 - y * 2, (x * 3) % 256, x * 255 / (W - 1)),
    };
    0xa5 << 24 | b << 16 | g << 8 | r
}

/// `image(k, ..)` as RGB bytes, row after row.
fn expected_rgb(k: u32) -> Vec<[u8; 3]> {
    (0..H)
        .flat_map(|y| (0..W).map(move |x| image(k, x, y)))
        .map(|p| [p as u8, (p >> 8) as u8, (p >> 16) as u8])
        .collect()
}

/// Have the extension write image `k`, a row a message.
fn paint(ep: &mut Endpoint, k: u32) {
    for y in 0..H {
        let row: Vec<u8> = (0..W).flat_map(|x| image(k, x, y).to_le_bytes()).collect();
        let args: Vec<u8> = [0, (y * W * 4) as i32]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        ep.send_am(WRITE, &args, &row).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let r = ep.recv(&mut buf, Some(Duration::from_secs(10))).unwrap();
        let (a, _) = unet::spine::split_am(&buf[..r.len]).expect("framing");
        assert_eq!(a, (W as i32 * 4).to_le_bytes(), "row {y} written");
    }
}

/// The pixels of the canvas's area (the top-left `W` by `H`) of a
/// screenshot that differ from `want` by more than [`TOLERANCE`] in a
/// channel: how many, and the first few.
fn differences(shot: &(u32, u32, Vec<[u8; 3]>), want: &[[u8; 3]]) -> (usize, Vec<String>) {
    let (sw, sh, px) = shot;
    assert!(*sw >= W && *sh >= H, "a screenshot of {sw} by {sh}");
    let mut n = 0;
    let mut first = Vec::new();
    for y in 0..H {
        for x in 0..W {
            let got = px[(y * sw + x) as usize];
            let exp = want[(y * W + x) as usize];
            if got.iter().zip(exp).any(|(g, e)| g.abs_diff(e) > TOLERANCE) {
                n += 1;
                if first.len() < 5 {
                    first.push(format!("({x}, {y}): {got:?}, not {exp:?}"));
                }
            }
        }
    }
    (n, first)
}

/// The number after `key ` in the page's text.
fn number_after(dom: &str, key: &str) -> u64 {
    let at = dom
        .find(&format!("{key} "))
        .unwrap_or_else(|| panic!("no {key:?} in the page: {dom}"));
    dom[at + key.len() + 1..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after {key:?}: {dom}"))
}

/// Frames the viewer at `addr` has served (its `/stats`).
fn served(addr: &str) -> u64 {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.write_all(b"GET /stats HTTP/1.0\r\n\r\n").unwrap();
    let mut r = String::new();
    c.read_to_string(&mut r).unwrap();
    let body = r.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {r}"));
    v["served"].as_u64().unwrap()
}

/// `unet video view ARGS`, expected to fail at once: its stderr.
fn view_fails(args: &[&str], as_nobody: bool) -> String {
    // `nobody` may not reach the build's own directory (a checkout in a
    // private directory): it runs a copy of the binary from one it can.
    let copy = TempDir::new("nobody-bin");
    let bin = if as_nobody {
        let open = |p: &Path| std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755));
        open(&copy.0).unwrap();
        let b = copy.0.join("unet");
        std::fs::copy(unet_bin(), &b).unwrap();
        open(&b).unwrap();
        b
    } else {
        unet_bin().into()
    };
    let mut cmd = Command::new(bin);
    cmd.args(["video", "view"]).args(args);
    if as_nobody {
        cmd.uid(65534).gid(65534);
    }
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let st = wait(&mut child, Duration::from_secs(20), "the viewer refusing");
    assert_eq!(st.code(), Some(1), "{args:?}");
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    err
}

#[test]
fn the_browser_shows_the_framebuffer_live_and_the_viewer_refuses_clearly() {
    // Fails at once, clearly, without it.
    chromium();
    let dir = TempDir::new("video-view");
    // `extensions/FbWrite.java`: a bulk message's bytes into the framebuffer.
    tools::javac(&dir.0, &[tools::repo().join("extensions/FbWrite.java")]);
    let class = std::fs::read(dir.0.join("FbWrite.class")).unwrap();
    let d = Daemon::start(&[]);
    let s = Session::connect(&d.socket).unwrap();
    let opts = unet::spine::ExtensionOptions {
        arg: i32::from(WRITE),
        ..unet::spine::ExtensionOptions::named("fbrows")
    };
    let ext = s.load_extension(&class, opts).unwrap().id;
    let fb = s.spine_framebuffer(ext, W, H, false).unwrap();
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    paint(&mut ep, 0);
    assert_eq!(fb.counters().writes, u64::from(H));

    let sock = d.socket.to_str().unwrap();
    let ext_s = ext.to_string();
    let mut view = Proc::spawn("view", {
        let mut c = Command::new(unet_bin());
        c.args(["video", "view", "--socket", sock, "--ext", &ext_s])
            .args(["--listen", "127.0.0.1:0"]);
        c
    });
    let line = view.line_starting("unet video view:", Duration::from_secs(10));
    assert!(
        line.contains(&format!("framebuffer 0 of extension {ext} ({W} by {H})")),
        "{line}"
    );
    let url = line.rsplit_once(" at ").unwrap().1.trim().to_string();
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();

    // The first image, in the browser.
    let shot = screenshot(&url, &dir.0, "first.png", WINDOW, 1500);
    let (bad, first) = differences(&shot, &expected_rgb(0));
    assert_eq!(bad, 0, "pixels off by more than {TOLERANCE}: {first:?}");
    let dom = browse(&url, &dir.0, "--dump-dom", WINDOW, 1500);
    assert!(number_after(&dom, "frames") > 0, "{dom}");
    assert_eq!(number_after(&dom, "writes"), u64::from(H), "{dom}");
    assert_eq!(number_after(&dom, "refused"), 0, "{dom}");

    // The image changes while the page is open; the page shows the new
    // one. The browser runs long enough (a budget of 20 s of its virtual
    // time: about 1 000 fetches, seconds of real time) for the change to
    // land in the middle: it has fetched frames before, and fetches more
    // after.
    let browser = {
        let (url, dir) = (url.clone(), dir.0.clone());
        std::thread::spawn(move || screenshot(&url, &dir, "second.png", WINDOW, 20_000))
    };
    let before = served(&addr);
    let deadline = Instant::now() + Duration::from_secs(60);
    while served(&addr) < before + 3 {
        assert!(Instant::now() < deadline, "the browser fetches no frame");
        std::thread::sleep(Duration::from_millis(5));
    }
    paint(&mut ep, 1);
    let painted = served(&addr);
    let shot = browser.join().unwrap();
    let after = served(&addr);
    assert!(
        after >= painted + 2,
        "the browser stopped fetching before the change ({painted} frames served then, \
         {after} at its end): give it a larger budget"
    );
    let (bad, first) = differences(&shot, &expected_rgb(1));
    assert_eq!(bad, 0, "pixels off by more than {TOLERANCE}: {first:?}");
    let (changed, _) = differences(&shot, &expected_rgb(0));
    assert!(changed > (W * H / 2) as usize, "the images differ");

    // Refusals, each with its reason.
    let why = view_fails(
        &["--socket", sock, "--ext", &ext_s, "--listen", &addr],
        false,
    );
    assert!(why.contains("the address is in use"), "{why}");
    let other = (ext + 100).to_string();
    let why = view_fails(&["--socket", sock, "--ext", &other], false);
    assert!(
        why.contains(&format!(
            "not found: the engine at {sock} has no extension {other}"
        )),
        "{why}"
    );
    let why = view_fails(&["--socket", sock, "--ext", &ext_s, "--fb", "1"], false);
    assert!(
        why.contains("has 1 framebuffers: no framebuffer 1"),
        "{why}"
    );
    if euid() == 0 {
        // As `nobody`: the engine's socket opened to it, the extension
        // still root's.
        let open = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
        open(d.socket.parent().unwrap(), 0o755).unwrap();
        open(&d.socket, 0o777).unwrap();
        let why = view_fails(&["--socket", sock, "--ext", &ext_s], true);
        assert!(why.contains("is another user's"), "{why}");
    }
    view.kill9();
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}
