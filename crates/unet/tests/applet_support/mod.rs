//! Helpers of the applet tests (`applets.rs`, `applets_inline.rs`): the
//! sample applets compiled with the JDK once per test binary, engines and
//! endpoints set up the way the tests need them, counters and exchanges.
#![allow(dead_code)] // not every test binary uses every helper

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use unet::*;
use unet_abi::EndpointCounter;

use crate::common::find_live_slot;

pub const T: Option<Duration> = Some(Duration::from_secs(10));
pub const SEND_T: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// Compiling applets
// ---------------------------------------------------------------------------

pub fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// A JDK ≥ 22, found by `scripts/find-jdk`.
pub fn jdk() -> &'static Path {
    static JDK: OnceLock<PathBuf> = OnceLock::new();
    JDK.get_or_init(|| {
        let out = Command::new("bash")
            .arg(repo().join("scripts/find-jdk"))
            .output()
            .expect("cannot run `bash scripts/find-jdk`");
        if !out.status.success() {
            panic!(
                "the applet tests compile Java applets and need a JDK 22 or later; \
                 scripts/find-jdk found none (set JAVA_HOME to one):\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// Applets used only by these tests, as (class, source).
pub const TEST_APPLETS: &[(&str, &str)] = &[
    (
        "UsesLong",
        "public class UsesLong {\n\
         public static byte[] RxBuf;\n\
         static int doTx(int length, int channel, int off) { long t = length; t = t * 3; return (int) t; }\n\
         static int doRx(int length, int channel) { return 0; }\n\
         }\n",
    ),
    (
        "Spin",
        "public class Spin {\n\
         public static byte[] RxBuf;\n\
         static int doTx(int length, int channel, int off) { while (true) { } }\n\
         static int doRx(int length, int channel) { return 0; }\n\
         }\n",
    ),
    (
        // Both copy natives with arguments from the host (the channel
        // as the array offset), and txPush (the channel as the array
        // offset and the channel): for the compiled-against-interpreted
        // tests.
        "Copier",
        "import static unet.sle.Natives.*;\n\
         public class Copier {\n\
         public static byte[] RxBuf;\n\
         static byte[] a;\n\
         Copier() { a = new byte[100]; }\n\
         static int doTx(int length, int channel, int off) {\n\
         doHtoLDMA(a, channel, off, length);\n\
         doLtoHDMA(a, channel, off + 64, length);\n\
         return a[channel % 100] + length;\n\
         }\n\
         static int doRx(int length, int channel) {\n\
         txPush(a, channel >> 8, channel & 255, length);\n\
         return a[0];\n\
         }\n\
         }\n",
    ),
    (
        // RawUnet's doRx, then RxBuf replaced by an 8-byte array: each
        // later message is longer than the RxBuf it finds, so the host
        // must give it a new one first.
        "Shrinker",
        "import static unet.sle.Natives.*;\n\
         public class Shrinker {\n\
         public static byte[] RxBuf;\n\
         public static byte[] TxBuf;\n\
         static int[] offsets;\n\
         Shrinker() { TxBuf = new byte[4096]; offsets = new int[14]; }\n\
         static int doTx(int length, int channel, int off) {\n\
         doHtoLDMA(TxBuf, 0, off, length);\n\
         txPush(TxBuf, 0, channel, length);\n\
         return 0;\n\
         }\n\
         static int doRx(int length, int channel) {\n\
         int off = getFreeBuffer();\n\
         doLtoHDMA(RxBuf, 0, off, length);\n\
         offsets[0] = off;\n\
         dmaRxd(offsets, channel, length);\n\
         RxBuf = new byte[8];\n\
         return 0;\n\
         }\n\
         }\n",
    ),
    (
        // Timers: one set by the constructor (argument 1), one for each
        // byte of a send (arguments from the channel on), each due at
        // once; a timer sends one byte to the channel its argument names.
        "Timers",
        "import static unet.sle.Natives.*;\n\
         public class Timers {\n\
         public static byte[] RxBuf;\n\
         Timers() { setTimer(0, 1); }\n\
         static int doTx(int length, int channel, int off) {\n\
         for (int i = 0; i < length; i++) { setTimer(0, channel + i); }\n\
         return 0;\n\
         }\n\
         static int doRx(int length, int channel) { return 0; }\n\
         static void doTimer(int arg) { sendUser(arg, 1, 0); }\n\
         }\n",
    ),
    (
        // The buffer natives with arguments from the host: dmaRxd
        // (doTx: buffers from `off` on, the channel less one; channel 999
        // passes an array of the wrong size), getFreeBuffer,
        // getFreeBufferLength and putFreeBuffer (doRx: twice at the
        // channel times 16 less 32, then one taken back), for the
        // compiled-against-interpreted tests.
        "Buffers",
        "import static unet.sle.Natives.*;\n\
         public class Buffers {\n\
         public static byte[] RxBuf;\n\
         static int[] offs;\n\
         static int[] three;\n\
         Buffers() { offs = new int[14]; three = new int[3]; }\n\
         static int doTx(int length, int channel, int off) {\n\
         for (int i = 0; i < 14; i++) { offs[i] = off + 2048 * i; }\n\
         if (channel == 999) { dmaRxd(three, 0, length); } else { dmaRxd(offs, channel - 1, length); }\n\
         return getFreeBuffer() + getFreeBufferLength();\n\
         }\n\
         static int doRx(int length, int channel) {\n\
         putFreeBuffer(channel * 16 - 32);\n\
         putFreeBuffer(channel * 16 - 32);\n\
         return getFreeBuffer() + length;\n\
         }\n\
         }\n",
    ),
];

/// Every applet of `applets/` and of [`TEST_APPLETS`], compiled once (one
/// javac run) against the applet SDK for Java 8 with every lint an error:
/// class name → class file.
pub fn classes() -> &'static HashMap<String, Vec<u8>> {
    static CLASSES: OnceLock<HashMap<String, Vec<u8>>> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("unet-applets-{}", std::process::id()));
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
        let run = Command::new(jdk().join("bin/javac"))
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

/// The class file of an applet (of `applets/` or [`TEST_APPLETS`]).
pub fn applet(name: &str) -> Vec<u8> {
    classes()
        .get(name)
        .unwrap_or_else(|| panic!("no applet {name}"))
        .clone()
}

// ---------------------------------------------------------------------------
// Engines, endpoints, counters
// ---------------------------------------------------------------------------

pub fn udp_engine(drop_ppm: u32, seed: u64) -> Engine {
    Engine::start(EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        wire_drop_ppm: drop_ppm,
        wire_drop_seed: seed,
        ..Default::default()
    })
    .unwrap()
}

/// An embedded engine and a session on it.
pub fn one_engine() -> (Engine, Session) {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    (e, s)
}

/// Two engines joined by UDP (`udp_engine`) and a session on each.
pub fn udp_sessions(drop_ppm: u32, seed: u64) -> (Engine, Engine, Session, Session) {
    let (e1, e2) = (udp_engine(drop_ppm, seed), udp_engine(drop_ppm, seed));
    let (s1, s2) = (
        Session::embedded(&e1).unwrap(),
        Session::embedded(&e2).unwrap(),
    );
    (e1, e2, s1, s2)
}

pub fn with_buffers(buffer_size: u32) -> EndpointConfig {
    EndpointConfig {
        geometry: Geometry {
            buffer_size,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A counter summed over every live endpoint of the engine.
pub fn counter_all(s: &Session, c: EndpointCounter) -> u64 {
    let mut sum = 0;
    find_live_slot(s, |slot| {
        sum += slot.counters[c as usize].load(Ordering::Relaxed);
        false
    });
    sum
}

/// The next event within `timeout`.
pub fn next_event(ep: &mut Endpoint, timeout: Duration) -> Option<Event> {
    let start = Instant::now();
    loop {
        if let Some(e) = ep.poll_event() {
            return Some(e);
        }
        if start.elapsed() >= timeout {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Nothing arrives at `ep` within `wait`.
pub fn assert_quiet(ep: &mut Endpoint, wait: Duration, what: &str) {
    let mut buf = vec![0u8; 1 << 17];
    match ep.recv(&mut buf, Some(wait)) {
        Err(RecvError::Timeout) => {}
        r => panic!("{what}: expected nothing, got {r:?}"),
    }
}

pub fn pattern(i: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| (i.wrapping_mul(131) + k * 7 + (k >> 8)) as u8)
        .collect()
}

/// `a` sends every size to `b` on `ch`; `b` echoes each back on the channel
/// it arrived on. Both copies must be intact. Returns the number of
/// messages each side sent.
pub fn exchange(
    a: &mut Endpoint,
    b: &mut Endpoint,
    ch: Channel,
    sizes: &[usize],
    rounds: usize,
) -> u64 {
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0;
    for r in 0..rounds {
        for (k, &len) in sizes.iter().enumerate() {
            let msg = pattern(r * 100 + k, len);
            a.send_blocking(ch, &msg, SEND_T).expect("send");
            let got = b.recv(&mut buf, T).expect("recv");
            assert_eq!(got.len, len, "round {r}: length of a {len}-byte message");
            assert!(
                buf[..len] == msg[..],
                "round {r}: content of a {len}-byte message"
            );
            let echo = buf[..len].to_vec();
            b.send_blocking(got.channel, &echo, SEND_T).expect("echo");
            let back = a.recv(&mut buf, T).expect("recv echo");
            assert_eq!(back.channel, ch);
            assert_eq!(back.len, len, "round {r}: length of the {len}-byte echo");
            assert!(
                buf[..len] == msg[..],
                "round {r}: content of the {len}-byte echo"
            );
            n += 1;
        }
    }
    n
}

/// RawUnet's TxBuf holds 4096 bytes and it delivers into one buffer: with
/// 4 KiB buffers it carries everything up to one buffer.
pub const RAW_SIZES: &[usize] = &[1, 8, 55, 56, 57, 64, 1000, 4095, 4096];
