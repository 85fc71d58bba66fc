//! SPINE's video extension (`extensions/video/Video.java`, the SPINE
//! paper's section 5.1) on an embedded engine: a sender endpoint streams
//! a test pattern (each pixel a function of stream, frame, x and y) as
//! row packets into two windows while the host application moves and
//! resizes one of them, between frames and in the middle of one; after
//! each completed frame the framebuffer holds exactly that frame's
//! pattern at the window's place for that frame, and no pixel of the
//! stream anywhere else (the old place is cleared by the extension as the
//! next frame's rows arrive). Hostile rows (no window, short arguments,
//! another sender, a row, length or frame out of range, a replay) and a
//! stranger's configuration are dropped and counted, and change no pixel.
//! Over the UDP wire: rows from the stream's adapter (through a link)
//! land whole while the window moves in the middle of frames, and the
//! same rows from another adapter or a local host are dropped.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use unet::spine::ExtensionOptions;
use unet::spine_framebuffer::Framebuffer;
use unet::{Endpoint, EndpointConfig, EngineConfig, SendError, Session};

mod common;
use common::{engine_with, javac, recv_am, repo};

/// The extension's handlers.
const ROW: u16 = 200;
const CONFIG: u16 = ROW + 1;
const STATS: u16 = ROW + 2;
/// The framebuffer.
const FB_W: u32 = 256;
const FB_H: u32 = 160;

/// `Video`'s counters not of a window.
const G_NO_WINDOW: usize = 0;
const G_BAD_ARGS: usize = 1;
const G_BAD_CONFIG: usize = 2;
/// A window's counters.
const W_COMPLETED: usize = 0;
const W_LOST: usize = 1;
const W_LATE: usize = 2;
const W_FAR_AHEAD: usize = 3;
const W_BAD_ROW: usize = 4;
const W_BAD_LENGTH: usize = 5;
const W_DUPLICATE: usize = 6;
const W_BAD_SOURCE: usize = 7;
const W_FB_REFUSED: usize = 8;

fn class() -> &'static [u8] {
    static CLASS: OnceLock<Vec<u8>> = OnceLock::new();
    CLASS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("unet-spine-video-{}", std::process::id()));
        javac(&dir, &[repo().join("extensions/video/Video.java")], &[])
            .remove("Video")
            .expect("Video.class")
    })
}

/// A window's place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Place {
    x: u32,
    y: u32,
    w: u32,
    h: u32,
}

impl Place {
    fn holds(&self, x: u32, y: u32) -> bool {
        x >= self.x && x < self.x + self.w && y >= self.y && y < self.y + self.h
    }
}

/// The test pattern: never 0 (a cleared pixel), the stream in the top
/// byte.
fn pattern(stream: u32, frame: u32, x: u32, y: u32) -> u32 {
    (stream << 24) | ((frame & 0xff) << 16) | ((y & 0xff) << 8) | (x & 0xff)
}

fn ints(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|i| i.to_le_bytes()).collect()
}

/// Send, retrying while the queue is full (with a deadline).
fn send(ep: &mut Endpoint, h: u16, args: &[u8], bulk: &[u8]) {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        match ep.send_am(h, args, bulk) {
            Ok(_) => return,
            Err(SendError::Full) if Instant::now() < end => std::thread::yield_now(),
            Err(e) => panic!("send: {e}"),
        }
    }
}

/// What `onStats` answers.
#[derive(Debug)]
struct Stats {
    /// The asker's own source.
    me: i32,
    global: Vec<i32>,
    place: Place,
    version: i32,
    frame: i32,
    rows: i32,
    counts: Vec<i32>,
}

fn stats(ep: &mut Endpoint, win: i32) -> Stats {
    send(ep, STATS, &ints(&[win]), &[]);
    let (h, a, _) = recv_am(ep, Duration::from_secs(10));
    assert_eq!(h, STATS);
    let v: Vec<i32> = a
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(v.len(), 1 + 3 + 8 + 9, "{v:?}");
    Stats {
        me: v[0],
        global: v[1..4].to_vec(),
        place: Place {
            x: v[5] as u32,
            y: v[6] as u32,
            w: v[7] as u32,
            h: v[8] as u32,
        },
        version: v[9],
        frame: v[10],
        rows: v[11],
        counts: v[12..].to_vec(),
    }
}

/// Wait (with a deadline) until `cond` holds of window `win`'s stats.
fn wait_stats(ep: &mut Endpoint, win: i32, what: &str, cond: impl Fn(&Stats) -> bool) -> Stats {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let s = stats(ep, win);
        if cond(&s) {
            return s;
        }
        assert!(Instant::now() < end, "{what}: {s:?}");
        std::thread::yield_now();
    }
}

/// Configure: the status (0 done, 1 refused).
fn config(ep: &mut Endpoint, args: &[i32]) -> i32 {
    send(ep, CONFIG, &ints(args), &[]);
    let (h, a, _) = recv_am(ep, Duration::from_secs(10));
    assert_eq!(h, CONFIG);
    assert_eq!(i32::from_le_bytes(a[..4].try_into().unwrap()), args[0]);
    i32::from_le_bytes(a[4..8].try_into().unwrap())
}

fn place(host: &mut Endpoint, win: i32, stream: i32, p: Place, source: i32) -> i32 {
    let (x, y, w, h) = (p.x as i32, p.y as i32, p.w as i32, p.h as i32);
    config(host, &[1, win, stream, x, y, w, h, source])
}

/// Row `row` of frame `frame` of `stream` at width `w`: its packet's
/// arguments and pixels.
fn row(stream: u32, frame: u32, r: u32, w: u32) -> (Vec<u8>, Vec<u8>) {
    let px: Vec<u8> = (0..w)
        .flat_map(|x| pattern(stream, frame, x, r).to_le_bytes())
        .collect();
    (ints(&[stream as i32, frame as i32, r as i32]), px)
}

fn send_rows(ep: &mut Endpoint, stream: u32, frame: u32, p: Place, rows: std::ops::Range<u32>) {
    for r in rows {
        let (a, px) = row(stream, frame, r, p.w);
        send(ep, ROW, &a, &px);
    }
}

/// The framebuffer, the extension loaded, its host application's
/// endpoint (which claimed it) and a sender's, with the sender's source.
struct Rig {
    _engine: unet::Engine,
    session: Session,
    fb: Framebuffer,
    host: Endpoint,
    sender: Endpoint,
    source: i32,
}

fn rig() -> Rig {
    let (engine, s) = engine_with(EngineConfig::default());
    let opts = ExtensionOptions {
        arg: i32::from(ROW),
        // Room for a shared machine's preemptions: a row stopped by the
        // watchdog would be lost.
        budget_us: 2000,
        ..ExtensionOptions::named("video")
    };
    let ext = s.load_extension(class(), opts).unwrap().id;
    let mut host = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut sender = s.create_endpoint(EndpointConfig::default()).unwrap();
    // Claimed before the framebuffer is made: no window fits until then.
    assert_eq!(config(&mut host, &[0]), 0);
    let p = Place {
        x: 0,
        y: 0,
        w: 4,
        h: 4,
    };
    assert_eq!(place(&mut host, 0, 1, p, 0), 1);
    let fb = s.spine_framebuffer(ext, FB_W, FB_H, false).unwrap();
    let source = stats(&mut sender, 0).me;
    Rig {
        _engine: engine,
        session: s,
        fb,
        host,
        sender,
        source,
    }
}

/// Check the framebuffer: `stream`'s frame `frame` exactly at `p`, and
/// no pixel of the stream outside it.
fn check_frame(px: &[u32], stream: u32, frame: u32, p: Place) {
    for y in 0..FB_H {
        for x in 0..FB_W {
            let v = px[(y * FB_W + x) as usize];
            if p.holds(x, y) {
                let want = pattern(stream, frame, x - p.x, y - p.y);
                assert_eq!(
                    v, want,
                    "stream {stream} frame {frame} at {p:?}: pixel ({x}, {y}) is {v:#x}"
                );
            } else {
                assert_ne!(
                    v >> 24,
                    stream,
                    "stream {stream} frame {frame} at {p:?}: its pixel {v:#x} at ({x}, {y}), outside"
                );
            }
        }
    }
}

/// The places window 0 takes, frame by frame: moves, resizes and both,
/// some overlapping the place before (never window 1's, at its right).
fn places(n: u32) -> Vec<Place> {
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = |m: u32| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % u64::from(m)) as u32
    };
    (0..n)
        .map(|f| {
            if f % 4 == 3 {
                // Stays where it is now and then.
                return Place {
                    x: 8,
                    y: 8,
                    w: 48,
                    h: 32,
                };
            }
            let w = 8 + next(56);
            let h = 4 + next(60);
            Place {
                x: next(150 - w),
                y: next(FB_H - h),
                w,
                h,
            }
        })
        .collect()
}

#[test]
fn every_frame_lands_whole_at_the_place_in_force_for_it_while_a_window_moves() {
    let mut r = rig();
    let src = r.source;
    let fixed = Place {
        x: 170,
        y: 100,
        w: 40,
        h: 24,
    };
    let moves = places(40);
    assert_eq!(place(&mut r.host, 0, 1, moves[0], src), 0);
    assert_eq!(place(&mut r.host, 1, 2, fixed, src), 0);
    for (f, &p) in moves.iter().enumerate() {
        let f = f as u32;
        // Window 1's frame, its rows interleaved with window 0's.
        let half = p.h / 2;
        send_rows(&mut r.sender, 2, f, fixed, 0..fixed.h / 2);
        send_rows(&mut r.sender, 1, f, p, 0..half);
        let next = moves.get(f as usize + 1).copied();
        if let (Some(n), true) = (next, f.is_multiple_of(2)) {
            // The next place, given in the middle of this frame: it
            // takes effect at the next frame, this one finishes here.
            wait_stats(&mut r.host, 0, "half of the frame", |s| {
                s.frame == f as i32 && s.rows == half as i32
            });
            assert_eq!(place(&mut r.host, 0, 1, n, src), 0);
        }
        send_rows(&mut r.sender, 1, f, p, half..p.h);
        send_rows(&mut r.sender, 2, f, fixed, fixed.h / 2..fixed.h);
        let s0 = wait_stats(&mut r.host, 0, "window 0's frame", |s| {
            s.counts[W_COMPLETED] == f as i32 + 1
        });
        wait_stats(&mut r.host, 1, "window 1's frame", |s| {
            s.counts[W_COMPLETED] == f as i32 + 1
        });
        let px = r.fb.pixels();
        check_frame(&px, 1, f, p);
        check_frame(&px, 2, f, fixed);
        assert_eq!(s0.counts[W_LOST], 0);
        if let (Some(n), false) = (next, f.is_multiple_of(2)) {
            // The next place, given between frames.
            assert_eq!(place(&mut r.host, 0, 1, n, src), 0);
        }
    }
    let s = stats(&mut r.host, 0);
    assert_eq!(s.version, 40, "one configuration a frame");
    assert_eq!(s.counts, vec![40, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        s.global,
        vec![0, 0, 1],
        "the window placed before the framebuffer"
    );
    assert_eq!(
        stats(&mut r.host, 1).counts,
        vec![40, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    let c = r.fb.counters();
    assert_eq!(c.refused, 0);
    assert!(c.writes >= 40 * 24, "{c:?}");
    let l = r.session.list_extensions().unwrap();
    for h in &l.extensions[0].handlers {
        assert_eq!(h.terminated(), 0, "{h:?}");
    }
}

#[test]
fn a_skipped_or_incomplete_frame_is_lost_and_counted() {
    let mut r = rig();
    let p = Place {
        x: 4,
        y: 4,
        w: 16,
        h: 8,
    };
    assert_eq!(place(&mut r.host, 0, 7, p, r.source), 0);
    send_rows(&mut r.sender, 7, 10, p, 0..8);
    // Frame 11 half sent, then 14: 11 incomplete, 12 and 13 skipped.
    send_rows(&mut r.sender, 7, 11, p, 0..4);
    send_rows(&mut r.sender, 7, 14, p, 0..8);
    let s = wait_stats(&mut r.host, 0, "frame 14", |s| s.counts[W_COMPLETED] == 2);
    assert_eq!(s.counts[W_LOST], 3);
    assert_eq!(s.frame, 14);
    check_frame(&r.fb.pixels(), 7, 14, p);
}

#[test]
fn hostile_rows_and_configurations_are_dropped_counted_and_write_nothing() {
    let mut r = rig();
    let src = r.source;
    let p = Place {
        x: 10,
        y: 10,
        w: 16,
        h: 8,
    };
    assert_eq!(place(&mut r.host, 0, 3, p, src), 0);
    // Configurations refused: outside the framebuffer, too large, a
    // window out of range, the stream shown elsewhere, an overlap.
    let refused = [
        [1, 1, 4, 250, 0, 16, 8, src],
        [1, 1, 4, 0, 155, 16, 8, src],
        [1, 1, 4, -1, 0, 16, 8, src],
        [1, 1, 4, 0, 0, 0, 8, src],
        [1, 16, 4, 0, 0, 16, 8, src],
        [1, -1, 4, 0, 0, 16, 8, src],
        [1, 1, 3, 100, 100, 16, 8, src],
        [1, 1, 4, 20, 12, 16, 8, src],
    ];
    for c in refused {
        assert_eq!(config(&mut r.host, &c), 1, "{c:?}");
    }
    assert_eq!(
        config(&mut r.host, &[2, 5]),
        1,
        "closing a window not shown"
    );
    assert_eq!(config(&mut r.host, &[9]), 1, "no such operation");
    // One whole frame.
    send_rows(&mut r.sender, 3, 5, p, 0..8);
    wait_stats(&mut r.host, 0, "frame 5", |s| s.counts[W_COMPLETED] == 1);
    // Frame 6 begun: its rows 0 to 3.
    send_rows(&mut r.sender, 3, 6, p, 0..4);
    wait_stats(&mut r.host, 0, "half of frame 6", |s| s.rows == 4);
    let before = r.fb.pixels();
    let writes = r.fb.counters().writes;

    // From the sender, each dropped.
    let bad = |f: i32, row: i32| ints(&[3, f, row]);
    let good_px: Vec<u8> = vec![0xee; 64];
    send(&mut r.sender, ROW, &ints(&[99, 6, 4]), &good_px); // no window
    send(&mut r.sender, ROW, &ints(&[3, 6]), &good_px); // short arguments
    send(&mut r.sender, ROW, &bad(6, 8), &good_px); // a row past the window
    send(&mut r.sender, ROW, &bad(6, -1), &good_px); // a negative row
    send(&mut r.sender, ROW, &bad(6, 4), &[0xee; 68]); // longer than the row
    send(&mut r.sender, ROW, &bad(6, 4), &[0xee; 60]); // shorter
    send(&mut r.sender, ROW, &bad(6, 4), &[]); // no pixels
    send(&mut r.sender, ROW, &bad(5, 4), &good_px); // the frame before
    send(&mut r.sender, ROW, &bad(-1_000_000, 4), &good_px); // far behind
    send(&mut r.sender, ROW, &bad(6 + (1 << 17), 4), &good_px); // far ahead
    send(&mut r.sender, ROW, &bad(6, 2), &good_px); // a replay
                                                    // A stranger: rows with the stream's own arguments, a configuration.
    let mut stranger = r
        .session
        .create_endpoint(EndpointConfig::default())
        .unwrap();
    send(&mut stranger, ROW, &bad(6, 4), &good_px);
    send(&mut stranger, ROW, &bad(7, 0), &good_px);
    send(
        &mut stranger,
        CONFIG,
        &ints(&[1, 0, 3, 100, 100, 16, 8, src]),
        &[],
    );
    send(&mut stranger, CONFIG, &ints(&[2, 0]), &[]);
    let s = wait_stats(&mut r.host, 0, "every hostile row counted", |s| {
        s.global == vec![1, 1, 1 + 10 + 2]
            && s.counts[W_BAD_ROW] == 2
            && s.counts[W_BAD_LENGTH] == 3
            && s.counts[W_LATE] == 2
            && s.counts[W_FAR_AHEAD] == 1
            && s.counts[W_DUPLICATE] == 1
            && s.counts[W_BAD_SOURCE] == 2
    });
    assert_eq!(s.global[G_NO_WINDOW], 1);
    assert_eq!(s.global[G_BAD_ARGS], 1);
    assert_eq!(s.global[G_BAD_CONFIG], 13);
    assert_eq!(s.counts[W_FB_REFUSED], 0);
    assert_eq!(s.counts[W_COMPLETED], 1);
    assert_eq!(s.counts[W_LOST], 0);
    assert_eq!((s.frame, s.rows), (6, 4), "frame 6 still in progress");
    assert_eq!(s.place, p, "the stranger moved nothing");
    assert_eq!(r.fb.pixels(), before, "no pixel changed");
    assert_eq!(r.fb.counters().writes, writes);
    assert_eq!(r.fb.counters().refused, 0);
    // The stream goes on: frame 6 completes in place.
    send_rows(&mut r.sender, 3, 6, p, 4..8);
    wait_stats(&mut r.host, 0, "frame 6", |s| s.counts[W_COMPLETED] == 2);
    check_frame(&r.fb.pixels(), 3, 6, p);
}

/// An engine on a loopback UDP port.
fn wired() -> (unet::Engine, Session) {
    engine_with(EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..EngineConfig::default()
    })
}

/// A sending adapter: `extensions/WirePing.java` loaded so that a host's
/// `[link][stream, frame, row]` and pixels to handler `ROW - 1` go over
/// the link to handler `ROW` (the video extension's `onRow` on the
/// other side); linked to `to`, whose id for the link is returned with
/// the sender's own, and the adapter's sending endpoint.
fn sending_adapter(to: &Session) -> ((unet::Engine, Session), u32, u32, Endpoint) {
    static CLASS: OnceLock<Vec<u8>> = OnceLock::new();
    let class = CLASS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("unet-video-ping-{}", std::process::id()));
        javac(&dir, &[repo().join("extensions/WirePing.java")], &[])
            .remove("WirePing")
            .unwrap()
    });
    let (e, s) = wired();
    let opts = ExtensionOptions {
        arg: i32::from(ROW - 1),
        ..ExtensionOptions::named("forward")
    };
    s.load_extension(class, opts).unwrap();
    let (theirs, token) = to.spine_link_listen(0).unwrap();
    let mine = s
        .spine_link_connect(to.udp_addr().unwrap(), token, Duration::from_secs(10))
        .unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while to
        .spine_links()
        .unwrap()
        .link(theirs)
        .is_none_or(|r| r.state != "up")
    {
        assert!(Instant::now() < end, "the link up");
        std::thread::yield_now();
    }
    let ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    ((e, s), theirs, mine, ep)
}

/// Rows of `stream`'s frame over link `link` (the sender's id).
fn send_rows_over(
    ep: &mut Endpoint,
    link: u32,
    stream: u32,
    frame: u32,
    p: Place,
    rows: std::ops::Range<u32>,
) {
    for r in rows {
        let (a, px) = row(stream, frame, r, p.w);
        let mut args = link.to_le_bytes().to_vec();
        args.extend_from_slice(&a);
        send(ep, ROW - 1, &args, &px);
    }
}

/// `DEST_WIRE << 24 | link`: rows from that link's adapter.
fn from_link(link: u32) -> i32 {
    (3 << 24) | link as i32
}

#[test]
fn rows_over_the_wire_from_the_streams_adapter_land_whole_and_a_strangers_are_dropped() {
    let (_e, s) = wired();
    let opts = ExtensionOptions {
        arg: i32::from(ROW),
        budget_us: 2000,
        ..ExtensionOptions::named("video")
    };
    let ext = s.load_extension(class(), opts).unwrap().id;
    let fb = s.spine_framebuffer(ext, FB_W, FB_H, false).unwrap();
    let mut host = s.create_endpoint(EndpointConfig::default()).unwrap();
    assert_eq!(config(&mut host, &[0]), 0);
    let (_b, from_b, b_link, mut b) = sending_adapter(&s);
    let (_c, _, c_link, mut c) = sending_adapter(&s);
    let moves = places(8);
    assert_eq!(place(&mut host, 0, 5, moves[0], from_link(from_b)), 0);
    for (f, &p) in moves.iter().enumerate() {
        let f = f as u32;
        let half = p.h / 2;
        send_rows_over(&mut b, b_link, 5, f, p, 0..half);
        wait_stats(&mut host, 0, "half of the frame", |s| {
            s.frame == f as i32 && s.rows == half as i32
        });
        if let Some(&n) = moves.get(f as usize + 1) {
            // Moved in the middle of the frame: it finishes here.
            assert_eq!(place(&mut host, 0, 5, n, from_link(from_b)), 0);
        }
        // The same rows from another adapter, and from a host of this
        // one: not the stream's source.
        send_rows_over(&mut c, c_link, 5, f, p, half..half + 1);
        let mut local = s.create_endpoint(EndpointConfig::default()).unwrap();
        send_rows(&mut local, 5, f, p, half..half + 1);
        send_rows_over(&mut b, b_link, 5, f, p, half..p.h);
        wait_stats(&mut host, 0, "the frame", |s| {
            s.counts[W_COMPLETED] == f as i32 + 1
        });
        check_frame(&fb.pixels(), 5, f, p);
    }
    let st = wait_stats(&mut host, 0, "the strangers' rows counted", |s| {
        s.counts[W_BAD_SOURCE] == 16
    });
    assert_eq!(st.counts, vec![8, 0, 0, 0, 0, 0, 0, 16, 0]);
    assert_eq!(fb.counters().refused, 0);
}
