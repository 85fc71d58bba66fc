//! `unet video client` and `unet video send` between two daemons on
//! loopback UDP (SPINE's video client, the SPINE paper's section 5.1):
//! the server streams two test-pattern streams over a SPINE link into two
//! windows that the client moves every 40 ms; every frame arrives whole
//! (none lost, no row dropped), the framebuffer at the end holds each
//! stream's last frame exactly at one of its window's places and nothing
//! anywhere else, and the client's CPU time while the frames stream is
//! its CPU time while idle (its moves and polls): nothing per frame.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{unet_bin, Daemon, Proc, TempDir};
use serde_json::Value;
use unet::spine::split_am;
use unet::{Endpoint, EndpointConfig, Session};

/// The test pattern's pixel (RGBA), as `unet video send` draws it: a
/// background of the stream and the place, a moving white bar, the frame
/// number in black 3x5 digits at the top left.
fn pattern(stream: u32, frame: u32, x: u32, y: u32, w: u32, h: u32) -> [u8; 4] {
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
    let s = (h / 40).max(1);
    if x >= 2 * s && y >= 2 * s && y < 7 * s {
        let (col, row) = ((x - 2 * s) / s, (y - 2 * s) / s);
        let digits = frame.to_string();
        if let Some(d) = digits.as_bytes().get((col / 4) as usize) {
            let c = col % 4;
            if c < 3 && FONT[usize::from(d - b'0')][row as usize] >> (2 - c) & 1 == 1 {
                return [0, 0, 0, 255];
            }
        }
    }
    let bx = (u64::from(frame) * u64::from((w / 32).max(1)) % u64::from(w)) as u32;
    if (x + w - bx) % w < (w / 16).clamp(1, w) {
        return [255, 255, 255, 255];
    }
    [
        x as u8,
        y as u8,
        0x40 | (stream.wrapping_mul(0x35) as u8 & 0xbf),
        255,
    ]
}

/// A PAM image's size and pixels.
fn read_pam(p: &Path) -> (u32, u32, Vec<u8>) {
    let b = std::fs::read(p).unwrap();
    let end = b.windows(7).position(|w| w == b"ENDHDR\n").unwrap() + 7;
    let head = String::from_utf8_lossy(&b[..end]).to_string();
    let field = |k: &str| -> u32 {
        head.lines()
            .find_map(|l| l.strip_prefix(k))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    (field("WIDTH "), field("HEIGHT "), b[end..].to_vec())
}

/// The client's CPU time so far (all its threads), ns, from the
/// scheduler's statistics.
fn cpu_ns(pid: u32) -> u64 {
    let mut t = 0;
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let p = e.unwrap().path().join("schedstat");
        if let Ok(s) = std::fs::read_to_string(p) {
            t += s.split_whitespace().next().unwrap().parse::<u64>().unwrap();
        }
    }
    t
}

/// Window `win`'s frame in progress and its rows written, asked of the
/// extension (handler 202, from anyone) by this test's own endpoint.
fn progress(ep: &mut Endpoint, win: i32) -> (i32, i32) {
    ep.send_am(202, &win.to_le_bytes(), &[]).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let r = ep
            .recv(
                &mut buf,
                Some(end.saturating_duration_since(Instant::now())),
            )
            .expect("the extension's counters");
        if r.handler() == Some(202) {
            let (a, _) = split_am(&buf[..r.len]).unwrap();
            let int = |i: usize| i32::from_le_bytes(a[i * 4..i * 4 + 4].try_into().unwrap());
            return (int(10), int(11));
        }
    }
}

/// Wait (with a deadline) until window 0 has frame `f` in progress or a
/// later one.
fn wait_frame(ep: &mut Endpoint, f: i32) {
    let end = Instant::now() + Duration::from_secs(30);
    while progress(ep, 0).0 < f {
        assert!(Instant::now() < end, "window 0 never reached frame {f}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

const W: u32 = 64;
const H: u32 = 48;
const FRAMES: u32 = 600;
/// The places each window cycles through (window 0 on the left of the
/// framebuffer, window 1 on the right: never over each other).
const PLACES: [&[(u32, u32)]; 2] = [&[(0, 0), (70, 120), (20, 40)], &[(200, 10), (240, 140)]];

#[test]
fn two_streams_arrive_whole_in_moving_windows_and_the_client_does_nothing_per_frame() {
    let a = Daemon::start(&["--udp", "127.0.0.1:0"]);
    let b = Daemon::start(&["--udp", "127.0.0.1:0"]);
    let dir = TempDir::new("video");
    let dump = dir.0.join("fb.pam");
    let mut c = Command::new(unet_bin());
    c.args(["video", "client", "--socket"])
        .arg(&b.socket)
        .args(["--fb", "320x200", "--move-every", "40", "--token", "4242"])
        .args([
            "--frames",
            &FRAMES.to_string(),
            "--seconds",
            "120",
            "--json",
        ])
        .arg("--dump")
        .arg(&dump);
    for (win, places) in PLACES.iter().enumerate() {
        for (x, y) in places.iter() {
            c.arg("--window")
                .arg(format!("{win}:{}@{x},{y},{W}x{H}", win + 1));
        }
    }
    let mut client = Proc::spawn("client", c);
    let ready = client.line_starting("video client:", Duration::from_secs(120));
    let at = ready
        .split("listening at ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {ready:?}"))
        .to_string();
    assert!(ready.ends_with("with token 4242"), "{ready}");

    let s = Session::connect(&b.socket).unwrap();
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    // Idle: the client moves its windows, no frame comes.
    let (t0, c0) = (Instant::now(), cpu_ns(client.pid()));
    std::thread::sleep(Duration::from_millis(1500));
    let (idle_s, idle_ns) = (t0.elapsed().as_secs_f64(), cpu_ns(client.pid()) - c0);

    let sock_a = a.socket.clone();
    let send = std::thread::spawn(move || {
        Command::new(unet_bin())
            .args(["video", "send", "--socket"])
            .arg(&sock_a)
            .args([
                "--to", &at, "--token", "4242", "--stream", "1", "--stream", "2",
            ])
            .args(["--size", &format!("{W}x{H}"), "--rate", "200"])
            .args(["--frames", &FRAMES.to_string(), "--json"])
            .output()
            .unwrap()
    });
    // Streaming: 400 frames of each stream, the windows still moving.
    wait_frame(&mut ep, 100);
    let (t1, c1) = (Instant::now(), cpu_ns(client.pid()));
    wait_frame(&mut ep, 500);
    let (run_s, run_ns) = (t1.elapsed().as_secs_f64(), cpu_ns(client.pid()) - c1);
    let out = send.join().unwrap();
    assert!(out.status.success(), "{out:?}");
    let sent: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sent["frames"], FRAMES, "{sent}");
    assert_eq!(sent["rows"], FRAMES * H * 2, "{sent}");
    assert_eq!(sent["refused"], 0, "{sent}");
    assert_eq!(sent["link_refused"], 0, "{sent}");
    for (k, n) in sent["link"]["drops"].as_object().unwrap() {
        assert_eq!(n, 0, "the link's drops {k}: {sent}");
    }

    assert_eq!(
        client
            .wait_exit(Duration::from_secs(60))
            .map(|s| s.success()),
        Some(true)
    );
    let line = std::iter::from_fn(|| client.raw_line(Duration::from_secs(5)))
        .find(|l| l.starts_with('{'))
        .expect("the client's JSON");
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        v["stopped_by"],
        format!("frame {} whole in every window", FRAMES - 1)
    );
    assert_eq!(v["refused"], 0, "{v}");
    assert!(v["moves"].as_u64().unwrap() >= 40, "{v}");
    for (k, n) in v["global"].as_object().unwrap() {
        assert_eq!(n, 0, "{k}: {v}");
    }
    for w in v["windows"].as_array().unwrap() {
        assert_eq!(w["completed"], FRAMES, "{w}");
        for k in [
            "lost",
            "late",
            "far_ahead",
            "bad_row",
            "bad_length",
            "duplicate",
            "bad_source",
            "fb_refused",
        ] {
            assert_eq!(w[k], 0, "{k}: {w}");
        }
    }
    assert_eq!(v["framebuffer"]["refused"], 0);

    // The framebuffer: each stream's last frame whole at one of its
    // window's places, every other pixel cleared.
    let (fw, fh, px) = read_pam(&dump);
    assert_eq!((fw, fh), (320, 200));
    let mut want = vec![0u8; px.len()];
    for (win, places) in PLACES.iter().enumerate() {
        let stream = win as u32 + 1;
        let found = places.iter().find(|(x, y)| {
            let at = ((y * fw + x) * 4) as usize;
            px[at..at + 4] == pattern(stream, FRAMES - 1, 0, 0, W, H)
                && px[at + 4 * (W as usize - 1)..at + 4 * W as usize]
                    == pattern(stream, FRAMES - 1, W - 1, 0, W, H)
        });
        let &(x0, y0) =
            found.unwrap_or_else(|| panic!("stream {stream}'s last frame at none of its places"));
        for y in 0..H {
            for x in 0..W {
                let at = (((y0 + y) * fw + x0 + x) * 4) as usize;
                want[at..at + 4].copy_from_slice(&pattern(stream, FRAMES - 1, x, y, W, H));
            }
        }
    }
    for (i, (g, w)) in px.chunks(4).zip(want.chunks(4)).enumerate() {
        let (x, y) = (i as u32 % fw, i as u32 / fw);
        assert_eq!(g, w, "pixel ({x}, {y})");
    }

    // Nothing per frame: 800 frames streamed cost the client no more CPU
    // than the same time idle (moving its windows, polling), within 10 ms.
    let idle_rate = idle_ns as f64 / idle_s;
    let extra_ms = (run_ns as f64 - idle_rate * run_s) / 1e6;
    assert!(
        extra_ms < 10.0,
        "the client's CPU: {:.1} ms over {run_s:.2} s streaming 800 frames, {:.1} ms over {idle_s:.2} s idle",
        run_ns as f64 / 1e6,
        idle_ns as f64 / 1e6
    );
    eprintln!(
        "client CPU: {:.2} ms over {run_s:.2} s streaming, {:.2} ms over {idle_s:.2} s idle",
        run_ns as f64 / 1e6,
        idle_ns as f64 / 1e6
    );
}
