//! Helpers shared by the engine's invoker tests: an engine stepped on the
//! test's thread with a local client, its counters read from the counters
//! segment, endpoint rings driven by hand, and the sample applets compiled
//! with the JDK.

#![allow(dead_code)] // not every test binary uses every helper

use std::collections::HashMap;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use unet_abi::*;
use unet_engine::invoker::{LocalClient, RawEndpoint};
use unet_engine::{Dispatcher, EngineConfig, PathChoice};
use unet_sys::Segment;

// ---------------------------------------------------------------------------
// Stepping
// ---------------------------------------------------------------------------

/// Step `engine` until a turn finds nothing to do; returns the work done.
/// Panics if it never goes idle.
pub fn settle(engine: &mut Dispatcher) -> usize {
    let mut total = 0;
    for _ in 0..1_000_000 {
        match engine.step() {
            0 => return total,
            w => total += w,
        }
    }
    panic!("the engine never went idle");
}

/// Step `engine` until `done()` holds (for work that waits on a clock or
/// a thread: an applet's pause, its verification); at most ten seconds.
pub fn step_until(engine: &mut Dispatcher, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "waited 10 s of steps for {what}"
        );
        engine.step();
    }
}

// ---------------------------------------------------------------------------
// Counters
// ---------------------------------------------------------------------------

/// The engine's counters segment, mapped read-only on its own (so that
/// reading a counter does not borrow the engine).
pub struct Stats {
    seg: Segment,
    max: u32,
}

impl Stats {
    pub fn of(engine: &Dispatcher) -> Stats {
        // SAFETY: the engine keeps the descriptor open while it lives, and
        // we only duplicate it here.
        let fd = unsafe { BorrowedFd::borrow_raw(engine.counters().fd()) }
            .try_clone_to_owned()
            .expect("dup the counters segment");
        let seg = Segment::open(fd, ENDPOINT_SLOTS_OFF, false).expect("map the counters");
        // SAFETY: the segment starts with the counters header.
        let max = unsafe { seg.ptr().cast::<CountersHeader>().as_ref() }.max_endpoints;
        Stats { seg, max }
    }

    fn slots(&self) -> impl Iterator<Item = &EndpointSlot> {
        let size = std::mem::size_of::<EndpointSlot>();
        (0..self.max as usize).filter_map(move |i| {
            let p = self.seg.at(ENDPOINT_SLOTS_OFF + i * size, size)?;
            // SAFETY: in bounds (checked by at()), 8-byte aligned; the
            // slot's fields are atomics.
            Some(unsafe { p.cast::<EndpointSlot>().as_ref() })
        })
    }

    fn slot(&self, id: u32) -> &EndpointSlot {
        self.slots()
            .find(|s| {
                s.live.load(Ordering::Acquire) != 0 && s.endpoint_id.load(Ordering::Relaxed) == id
            })
            .unwrap_or_else(|| panic!("endpoint {id} has no live counter slot"))
    }

    /// One counter of live endpoint `id`.
    pub fn ep(&self, id: u32, c: EndpointCounter) -> u64 {
        self.slot(id).counters[c as usize].load(Ordering::Relaxed)
    }

    /// Every counter of live endpoint `id`, in slot order.
    pub fn all(&self, id: u32) -> Vec<u64> {
        let s = self.slot(id);
        EndpointCounter::ALL
            .iter()
            .map(|&c| s.counters[c as usize].load(Ordering::Relaxed))
            .collect()
    }

    /// An engine-wide counter.
    pub fn engine(&self, c: EngineCounter) -> u64 {
        // SAFETY: the segment starts with the counters header; the values
        // are atomics.
        let h = unsafe { self.seg.ptr().cast::<CountersHeader>().as_ref() };
        h.engine[c as usize].load(Ordering::Relaxed)
    }

    /// The counters of live endpoint `id` that differ from `before` (a
    /// snapshot from [`Stats::all`]), as (counter, increase).
    pub fn changed(&self, id: u32, before: &[u64]) -> Vec<(EndpointCounter, u64)> {
        self.all(id)
            .iter()
            .zip(before)
            .zip(EndpointCounter::ALL)
            .filter(|((now, was), _)| now != was)
            .map(|((now, was), &c)| (c, now.wrapping_sub(*was)))
            .collect()
    }

    /// Every non-zero counter, one per line (for failure messages).
    pub fn dump(&self) -> String {
        let mut out = String::new();
        for &c in EngineCounter::ALL {
            let v = self.engine(c);
            if v != 0 {
                out += &format!("  engine {} = {v}\n", c.name());
            }
        }
        for s in self.slots() {
            if s.live.load(Ordering::Acquire) == 0 {
                continue;
            }
            let id = s.endpoint_id.load(Ordering::Relaxed);
            for &c in EndpointCounter::ALL {
                let v = s.counters[c as usize].load(Ordering::Relaxed);
                if v != 0 {
                    out += &format!("  endpoint {id} {} = {v}\n", c.name());
                }
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------
// An engine, a client, endpoints
// ---------------------------------------------------------------------------

/// A small geometry: 64 KiB of 1 KiB buffers, rings of 64.
pub fn small() -> Geometry {
    Geometry {
        buffer_size: 1024,
        buffer_area_size: 64 << 10,
        send_cap: 64,
        recv_cap: 64,
        free_cap: 64,
        event_cap: 64,
    }
}

/// An engine stepped on the test's thread, a client of it, its counters.
pub struct Rig {
    pub engine: Dispatcher,
    pub client: LocalClient,
    pub stats: Stats,
}

impl Rig {
    pub fn new() -> Rig {
        Rig::with(EngineConfig::default())
    }

    pub fn with(cfg: EngineConfig) -> Rig {
        let mut engine = Dispatcher::new(cfg).expect("engine");
        let client = LocalClient::new(&mut engine).expect("client");
        let stats = Stats::of(&engine);
        Rig {
            engine,
            client,
            stats,
        }
    }

    /// A new endpoint of geometry `g`.
    pub fn endpoint(&mut self, g: Geometry) -> RawEndpoint {
        self.client
            .create_endpoint(&mut self.engine, g)
            .expect("create an endpoint")
    }

    /// A new endpoint with every receive buffer of its area posted free
    /// (as many as its free ring holds).
    pub fn receiver(&mut self, g: Geometry) -> RawEndpoint {
        let mut ep = self.endpoint(g);
        post_all(&mut ep);
        ep
    }

    /// Open a channel on the engine path from `a` to `b`: `a`'s tag for it
    /// and `b`'s (from the `ChannelOpened` event `b` gets, which this
    /// takes).
    pub fn open(&mut self, a: &RawEndpoint, b: &mut RawEndpoint) -> (u16, u16) {
        let ch = self
            .client
            .open_channel(&mut self.engine, a.id(), b.id(), PathChoice::Engine)
            .expect("open a channel");
        let ev = b.pop_event().expect("the peer is told of the channel");
        assert_eq!(ev.kind, EventKind::ChannelOpened as u16);
        assert_eq!(ev.peer_endpoint, a.id());
        (ch, ev.channel)
    }

    /// Close endpoint `id` through the control protocol.
    pub fn close_endpoint(&mut self, id: u32) {
        let req = unet_control::Request::CloseEndpoint { endpoint: id };
        let (r, _) = self
            .client
            .call(&mut self.engine, &req, &[])
            .expect("close an endpoint");
        assert_eq!(r, unet_control::Reply::Ok, "close endpoint {id}");
    }

    pub fn settle(&mut self) -> usize {
        settle(&mut self.engine)
    }
}

impl Default for Rig {
    fn default() -> Self {
        Rig::new()
    }
}

/// Post every buffer of `ep`'s area to its free ring (as many as fit).
pub fn post_all(ep: &mut RawEndpoint) {
    let g = ep.layout().geometry;
    let n = (g.buffer_area_size / g.buffer_size as u64).min(g.free_cap as u64);
    for i in 0..n {
        assert!(ep.post_free((i * g.buffer_size as u64) as u32));
    }
}

/// Put `data` at `off` of `ep`'s buffer area and push a send descriptor
/// for it on `chan`; its queue position.
pub fn send(ep: &mut RawEndpoint, chan: u16, off: u32, data: &[u8]) -> u64 {
    ep.write_area(off as u64, data);
    ep.push_send(SendDesc {
        offset: off,
        len: data.len() as u32,
        channel: chan,
        ..Default::default()
    })
    .expect("room in the send ring")
}

/// The status the engine wrote for the descriptor at `pos`.
pub fn status(ep: &RawEndpoint, pos: u64) -> SendStatus {
    let v = ep.send_status(pos);
    SendStatus::from_i32(v).unwrap_or_else(|| panic!("status {v} is not a SendStatus"))
}

/// A received message: its channel, its bytes, its descriptor.
#[derive(Debug)]
pub struct Msg {
    pub channel: u16,
    pub data: Vec<u8>,
    pub desc: RecvDesc,
}

/// The next message `ep` received, copied out of the descriptor or its
/// buffers; the buffers are posted free again when `repost`.
pub fn take(ep: &mut RawEndpoint, repost: bool) -> Option<Msg> {
    let d = ep.pop_recv()?;
    let len = d.len as usize;
    let data = if d.flags & RECV_INLINE != 0 {
        assert!(len <= INLINE_MAX, "an inline message of {len} bytes");
        assert_eq!(d.nbufs, 0);
        d.data[..len].to_vec()
    } else {
        let bs = ep.layout().geometry.buffer_size as usize;
        assert_eq!(
            d.nbufs as usize,
            buffers_spanned(len, bs),
            "buffers of a {len}-byte message"
        );
        let mut out = vec![0u8; len];
        for i in 0..d.nbufs as usize {
            let n = bs.min(len - i * bs);
            ep.read_area(d.offset(i) as u64, &mut out[i * bs..i * bs + n]);
            if repost {
                assert!(ep.post_free(d.offset(i)));
            }
        }
        out
    };
    Some(Msg {
        channel: d.channel,
        data,
        desc: d,
    })
}

/// Every event waiting for `ep`.
pub fn events(ep: &mut RawEndpoint) -> Vec<EventDesc> {
    std::iter::from_fn(|| ep.pop_event()).collect()
}

/// A recognisable message: `len` bytes derived from `i`.
pub fn pattern(i: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| i.wrapping_mul(131).wrapping_add(k * 7 + (k >> 8)) as u8)
        .collect()
}

// ---------------------------------------------------------------------------
// Applets
// ---------------------------------------------------------------------------

/// Applets used only by the engine's tests, as (class, source).
const TEST_APPLETS: &[(&str, &str)] = &[
    (
        // A fault of the kind the length of the send names; any other
        // length goes out unchanged. Arrivals are delivered inline (and
        // dropped when longer than 56 bytes).
        "Faulty",
        "import static unet.sle.Natives.*;\n\
         public class Faulty {\n\
         public static byte[] RxBuf;\n\
         static int[] small;\n\
         static int zero;\n\
         static int[] kept;\n\
         static byte[] eight;\n\
         Faulty() { small = new int[2]; eight = new byte[8]; }\n\
         static int deeper(int n) { return deeper(n + 1) + 1; }\n\
         static int doTx(int length, int channel, int off) {\n\
         if (length == 1) { int i = 0; while (true) { i++; } }\n\
         if (length == 2) { return small[length + 5]; }\n\
         if (length == 3) { return length / zero; }\n\
         if (length == 4) { return deeper(0); }\n\
         if (length == 5) { kept = new int[(1 << 18) + 1]; return 0; }\n\
         if (length == 6) { doHtoLDMA(eight, 0, -64, 8); return 0; }\n\
         sendUser(channel, length, off);\n\
         return 0;\n\
         }\n\
         static int doRx(int length, int channel) {\n\
         if (length <= 56) { dmaRxdPayload(RxBuf, channel, length); }\n\
         return 0;\n\
         }\n\
         }\n",
    ),
    (
        // A few thousand units of work on every send (a loop), then the
        // send; arrivals delivered inline.
        "Heavy",
        "import static unet.sle.Natives.*;\n\
         public class Heavy {\n\
         public static byte[] RxBuf;\n\
         static int sink;\n\
         static int doTx(int length, int channel, int off) {\n\
         int x = 0;\n\
         for (int i = 0; i < 800; i++) { x += i ^ length; }\n\
         sink = x;\n\
         sendUser(channel, length, off);\n\
         return 0;\n\
         }\n\
         static int doRx(int length, int channel) {\n\
         if (length <= 56) { dmaRxdPayload(RxBuf, channel, length); }\n\
         return 0;\n\
         }\n\
         }\n",
    ),
    (
        // Outside the JIVE subset (long arithmetic).
        "UsesLong",
        "public class UsesLong {\n\
         public static byte[] RxBuf;\n\
         static int doTx(int length, int channel, int off) { long t = length; t = t * 3; return (int) t; }\n\
         static int doRx(int length, int channel) { return 0; }\n\
         }\n",
    ),
];

/// The length of a send that makes `Faulty` fault with `kind`, and the
/// work budget that lets that fault come first (0: the default).
pub fn faulty_fuel(kind: FaultKind) -> u64 {
    match kind {
        FaultKind::Fuel => 5_000,
        // 4096 frames of `deeper`, each charged its length.
        FaultKind::Depth => 1_000_000,
        // The allocation is charged (a unit per 16 elements) first.
        FaultKind::Heap => 100_000,
        _ => 0,
    }
}

/// The length of a send that makes `Faulty` fault with `kind`.
pub fn faulty_len(kind: FaultKind) -> u32 {
    match kind {
        FaultKind::Fuel => 1,
        FaultKind::Memory => 2,
        FaultKind::Arith => 3,
        FaultKind::Depth => 4,
        FaultKind::Heap => 5,
        FaultKind::Native => 6,
        FaultKind::Other => panic!("Faulty has no fault of kind other"),
        FaultKind::Timeout => panic!("Faulty has no fault of kind timeout"),
    }
}

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Every applet of `applets/` and of [`TEST_APPLETS`], compiled once (one
/// javac run) against the applet SDK for Java 8 with every lint an error:
/// class name → class file.
pub fn classes() -> &'static HashMap<String, Vec<u8>> {
    static CLASSES: OnceLock<HashMap<String, Vec<u8>>> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let out = Command::new("bash")
            .arg(repo().join("scripts/find-jdk"))
            .output()
            .expect("cannot run `bash scripts/find-jdk`");
        if !out.status.success() {
            panic!(
                "the engine's applet tests compile Java applets and need a JDK 22 or \
                 later; scripts/find-jdk found none (set JAVA_HOME to one):\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let javac = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("bin/javac");
        let dir = std::env::temp_dir().join(format!(
            "unet-engine-applets-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let (src, out) = (dir.join("src"), dir.join("out"));
        std::fs::create_dir_all(&src).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        let mut files = Vec::new();
        for e in std::fs::read_dir(repo().join("applets")).expect("applets/") {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "java") {
                files.push(p);
            }
        }
        for (class, text) in TEST_APPLETS {
            let p = src.join(format!("{class}.java"));
            std::fs::write(&p, text).unwrap();
            files.push(p);
        }
        // `-options` only silences javac's note that release 8 is obsolete.
        let run = Command::new(javac)
            .args(["--release", "8", "-Xlint:all,-options", "-Werror"])
            .arg("-sourcepath")
            .arg(repo().join("java/applet-sdk/src/main/java"))
            .arg("-d")
            .arg(&out)
            .args(&files)
            .output()
            .expect("cannot run javac");
        if !run.status.success() {
            let _ = std::fs::remove_dir_all(&dir);
            panic!(
                "javac failed:\n{}{}",
                String::from_utf8_lossy(&run.stdout),
                String::from_utf8_lossy(&run.stderr)
            );
        }
        let mut m = HashMap::new();
        for f in &files {
            let class = f.file_stem().unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(out.join(format!("{class}.class")))
                .unwrap_or_else(|e| panic!("{class}.class: {e}"));
            m.insert(class, bytes);
        }
        let _ = std::fs::remove_dir_all(&dir);
        m
    })
}

/// The class file of an applet (of `applets/` or the test applets).
pub fn applet(name: &str) -> &'static [u8] {
    classes()
        .get(name)
        .unwrap_or_else(|| panic!("no applet {name}"))
}
