//! U-Net/SLE applets end to end: the sample applets of `applets/` are
//! compiled with the JDK at test time, attached to endpoints of embedded
//! engines (and of two engines over UDP where the wire matters), and must
//! behave as their descriptions say; applets outside the JIVE subset are
//! refused, and faulting applets are reported and finally detached.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod common;
use common::{endpoint_counter as counter, engine_counter, find_live_slot, nonzero_counters};
use unet::*;
use unet_abi::ClientCounter;
use unet_abi::{EndpointCounter, EngineCounter};

const T: Option<Duration> = Some(Duration::from_secs(10));
const SEND_T: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// Compiling applets
// ---------------------------------------------------------------------------

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// A JDK ≥ 22, found by `scripts/find-jdk`.
fn jdk() -> &'static Path {
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
const TEST_APPLETS: &[(&str, &str)] = &[
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
];

/// Every applet of `applets/` and of [`TEST_APPLETS`], compiled once (one
/// javac run) against the applet SDK for Java 8 with every lint an error:
/// class name → class file.
fn classes() -> &'static HashMap<String, Vec<u8>> {
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
fn applet(name: &str) -> Vec<u8> {
    classes()
        .get(name)
        .unwrap_or_else(|| panic!("no applet {name}"))
        .clone()
}

// ---------------------------------------------------------------------------
// Engines, endpoints, counters
// ---------------------------------------------------------------------------

fn udp_engine(drop_ppm: u32, seed: u64) -> Engine {
    Engine::start(EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse().unwrap()),
        wire_drop_ppm: drop_ppm,
        wire_drop_seed: seed,
        ..Default::default()
    })
    .unwrap()
}

/// An embedded engine and a session on it.
fn one_engine() -> (Engine, Session) {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    (e, s)
}

/// Two engines joined by UDP (`udp_engine`) and a session on each.
fn udp_sessions(drop_ppm: u32, seed: u64) -> (Engine, Engine, Session, Session) {
    let (e1, e2) = (udp_engine(drop_ppm, seed), udp_engine(drop_ppm, seed));
    let (s1, s2) = (
        Session::embedded(&e1).unwrap(),
        Session::embedded(&e2).unwrap(),
    );
    (e1, e2, s1, s2)
}

fn with_buffers(buffer_size: u32) -> EndpointConfig {
    EndpointConfig {
        geometry: Geometry {
            buffer_size,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A counter summed over every live endpoint of the engine.
fn counter_all(s: &Session, c: EndpointCounter) -> u64 {
    let mut sum = 0;
    find_live_slot(s, |slot| {
        sum += slot.counters[c as usize].load(Ordering::Relaxed);
        false
    });
    sum
}

/// The next event within `timeout`.
fn next_event(ep: &mut Endpoint, timeout: Duration) -> Option<Event> {
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
fn assert_quiet(ep: &mut Endpoint, wait: Duration, what: &str) {
    let mut buf = vec![0u8; 1 << 17];
    match ep.recv(&mut buf, Some(wait)) {
        Err(RecvError::Timeout) => {}
        r => panic!("{what}: expected nothing, got {r:?}"),
    }
}

fn pattern(i: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| (i.wrapping_mul(131) + k * 7 + (k >> 8)) as u8)
        .collect()
}

/// `a` sends every size to `b` on `ch`; `b` echoes each back on the channel
/// it arrived on. Both copies must be intact. Returns the number of
/// messages each side sent.
fn exchange(
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

// ---------------------------------------------------------------------------
// RawUnet: the U-Net/SLE paper's Figure 2
// ---------------------------------------------------------------------------

/// RawUnet's TxBuf holds 4096 bytes and it delivers into one buffer: with
/// 4 KiB buffers it carries everything up to one buffer.
const RAW_SIZES: &[usize] = &[1, 8, 55, 56, 57, 64, 1000, 4095, 4096];

fn raw_unet_both_ways(sa: &Session, sb: &Session) {
    let class = applet("RawUnet");
    let mut a = sa.create_endpoint(with_buffers(4096)).unwrap();
    let mut b = sb.create_endpoint(with_buffers(4096)).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let n = exchange(&mut a, &mut b, ch, RAW_SIZES, 3);
    for (s, ep) in [(sa, &a), (sb, &b)] {
        assert_eq!(counter(s, ep, EndpointCounter::AppletTxCalls), n);
        assert_eq!(counter(s, ep, EndpointCounter::AppletRxCalls), n);
        assert!(counter(s, ep, EndpointCounter::AppletTimeNs) > 0);
        assert!(counter(s, ep, EndpointCounter::AppletMaxNs) > 0);
        assert!(
            counter(s, ep, EndpointCounter::AppletMaxNs)
                <= counter(s, ep, EndpointCounter::AppletTimeNs)
        );
        assert!(counter(s, ep, EndpointCounter::AppletFuel) > 0);
        assert_eq!(counter(s, ep, EndpointCounter::AppletFaultNative), 0);
    }
    // More than TxBuf holds: doHtoLDMA refuses (a native fault), nothing
    // goes out, and the applet stays attached.
    a.send_blocking(ch, &pattern(9, 4097), SEND_T).unwrap();
    assert_eq!(
        next_event(&mut a, Duration::from_secs(10)),
        Some(Event::AppletFault {
            kind: FaultKind::Native
        })
    );
    assert_eq!(counter(sa, &a, EndpointCounter::AppletFaultNative), 1);
    assert_quiet(&mut b, Duration::from_millis(100), "after a faulted doTx");
    exchange(&mut a, &mut b, ch, &[100], 1);
}

#[test]
fn raw_unet_on_one_engine() {
    let (_engine, s) = one_engine();
    raw_unet_both_ways(&s, &s);
}

/// `applet_compiled` is a level: 0 when an engine-placed applet is
/// attached, 1 once JIVE's code for it is installed (at an invocation after
/// the compiler's thread is done), 0 again after a detach. Messages keep
/// arriving intact throughout (the compiled applet copies through the JIVE
/// intrinsics).
#[test]
fn engine_applets_report_when_they_run_compiled() {
    let class = applet("RawUnet");
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(with_buffers(4096)).unwrap();
    let mut b = s.create_endpoint(with_buffers(4096)).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let t0 = Instant::now();
    while counter(&s, &a, EndpointCounter::AppletCompiled) == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the applet never ran compiled"
        );
        exchange(&mut a, &mut b, ch, &[64, 1000], 1);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(counter(&s, &a, EndpointCounter::AppletCompiled), 1);
    let before = counter(&s, &a, EndpointCounter::AppletTxCalls);
    let n = exchange(&mut a, &mut b, ch, RAW_SIZES, 2);
    assert_eq!(counter(&s, &a, EndpointCounter::AppletTxCalls), before + n);
    a.detach_applet().unwrap();
    assert_eq!(counter(&s, &a, EndpointCounter::AppletCompiled), 0);
    exchange(&mut a, &mut b, ch, &[64], 1);
}

#[test]
fn raw_unet_over_udp() {
    let (_e1, _e2, s1, s2) = udp_sessions(0, 0);
    raw_unet_both_ways(&s1, &s2);
}

// ---------------------------------------------------------------------------
// StdUnet: standard U-Net, messages spanning several buffers
// ---------------------------------------------------------------------------

#[test]
fn std_unet_spans_several_buffers() {
    let class = applet("StdUnet");
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(with_buffers(8192)).unwrap();
    let mut b = s.create_endpoint(with_buffers(8192)).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let sizes = [
        1, 56, 57, 8191, 8192, 8193, 16384, 20_000, 65_536, 100_000, 114_688,
    ];
    let n = exchange(&mut a, &mut b, ch, &sizes, 2);
    assert_eq!(counter(&s, &b, EndpointCounter::AppletRxCalls), n);
    assert_eq!(counter(&s, &a, EndpointCounter::AppletRxCalls), n);
}

#[test]
fn std_unet_gives_buffers_back_when_they_run_out() {
    let class = applet("StdUnet");
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(with_buffers(8192)).unwrap();
    // The receiver manages its own buffers and posts only two.
    let mut b = s
        .create_endpoint(EndpointConfig {
            managed_buffers: false,
            ..with_buffers(8192)
        })
        .unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    b.post_free(0).unwrap();
    b.post_free(8192).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let msg = pattern(5, 20_000);
    // Three buffers needed, two there: dropped, both given back.
    a.send_blocking(ch, &msg, SEND_T).unwrap();
    let start = Instant::now();
    while counter(&s, &b, EndpointCounter::AppletRxCalls) < 1 {
        assert!(start.elapsed() < Duration::from_secs(10), "no doRx");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20));
    assert!(b.poll_recv_desc().is_none(), "a message without buffers");
    // One more buffer: the two given back and the new one carry it.
    b.post_free(16384).unwrap();
    a.send_blocking(ch, &msg, SEND_T).unwrap();
    let start = Instant::now();
    let d = loop {
        if let Some(d) = b.poll_recv_desc() {
            break d;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no delivery");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(d.len, 20_000);
    assert_eq!(d.nbufs, 3);
    let mut offs: Vec<u32> = (0..3).map(|i| d.offset(i)).collect();
    let mut got = vec![0u8; 20_000];
    for (i, &o) in offs.iter().enumerate() {
        let n = 8192.min(20_000 - i * 8192);
        b.read_buffer(o, &mut got[i * 8192..i * 8192 + n]);
    }
    assert!(got == msg, "content");
    offs.sort();
    assert_eq!(offs, [0, 8192, 16384]);
}

// ---------------------------------------------------------------------------
// Refusal and faults
// ---------------------------------------------------------------------------

#[test]
fn class_outside_the_subset_is_refused() {
    let class = applet("UsesLong");
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    match a.attach_applet(&class, AppletOptions::default()) {
        Err(Error::Rejected(why)) => {
            assert!(why.contains("doTx"), "names the method: {why}");
            assert!(why.contains("at offset"), "names the offset: {why}");
        }
        r => panic!("expected a rejection, got {r:?}"),
    }
    assert_eq!(counter(&s, &a, EndpointCounter::AppletAttached), 0);
    // The endpoint works on without an applet.
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    exchange(&mut a, &mut b, ch, &[1, 100, 20_000], 1);
    assert_eq!(counter(&s, &a, EndpointCounter::AppletTxCalls), 0);
}

#[test]
fn looping_applet_faults_then_is_detached() {
    let class = applet("Spin");
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    let opts = AppletOptions {
        fuel: 200_000,
        ..Default::default()
    };
    a.attach_applet(&class, opts).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let limit = 16;
    for i in 1..=limit {
        a.send_blocking(ch, &pattern(i, 100), SEND_T).unwrap();
        let want = if i < limit {
            Event::AppletFault {
                kind: FaultKind::Fuel,
            }
        } else {
            Event::AppletDetached {
                kind: FaultKind::Fuel,
            }
        };
        assert_eq!(
            next_event(&mut a, Duration::from_secs(10)),
            Some(want),
            "send {i}"
        );
    }
    assert_eq!(
        counter(&s, &a, EndpointCounter::AppletFaultFuel),
        limit as u64
    );
    assert_eq!(counter(&s, &a, EndpointCounter::AppletDetached), 1);
    assert_eq!(
        counter(&s, &a, EndpointCounter::AppletTxCalls),
        limit as u64
    );
    assert!(counter(&s, &a, EndpointCounter::AppletFuel) >= 200_000 * limit as u64);
    assert_quiet(
        &mut b,
        Duration::from_millis(50),
        "no faulted send goes out",
    );
    // Plain U-Net from now on.
    exchange(&mut a, &mut b, ch, &[1, 100, 20_000], 2);
    assert_eq!(
        counter(&s, &a, EndpointCounter::AppletTxCalls),
        limit as u64
    );
    assert_eq!(a.poll_event(), None);
}

// ---------------------------------------------------------------------------
// PingPong: round trips between applets, never reaching user level
// ---------------------------------------------------------------------------

fn be(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn ping_pong(sa: &Session, sb: &Session) {
    let class = applet("PingPong");
    let mut a = sa.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = sb.create_endpoint(EndpointConfig::default()).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0;
    for (n, payload) in [(1000u32, 60usize), (1, 4), (250, 1000)] {
        let mut msg = n.to_be_bytes().to_vec();
        msg.extend(pattern(n as usize, payload));
        a.send_blocking(ch, &msg, SEND_T).unwrap();
        let r = a.recv(&mut buf, T).expect("the report of the run");
        assert_eq!(r.len, 12, "one small report");
        assert_eq!(r.channel, ch);
        assert_eq!(be(&buf, 0), n, "round trips done");
        assert_eq!(be(&buf, 8), 0, "pongs of the wrong length");
        eprintln!(
            "PingPong: {n} round trips of {} bytes in {} us by the applet's clock",
            payload + 5,
            be(&buf, 4)
        );
        total += n as u64;
        // Neither user saw a ping or a pong.
        assert_quiet(
            &mut a,
            Duration::from_millis(20),
            "initiator after the report",
        );
        assert_quiet(&mut b, Duration::from_millis(1), "responder");
    }
    assert_eq!(counter(sa, &a, EndpointCounter::AppletTxCalls), 3);
    assert_eq!(counter(sa, &a, EndpointCounter::AppletRxCalls), total);
    assert_eq!(counter(sb, &b, EndpointCounter::AppletRxCalls), total);
    assert_eq!(counter(sb, &b, EndpointCounter::AppletTxCalls), 0);
    assert_eq!(counter(sb, &b, EndpointCounter::RxMsgs), 0);
}

#[test]
fn ping_pong_on_one_engine() {
    let (_engine, s) = one_engine();
    ping_pong(&s, &s);
}

#[test]
fn ping_pong_over_udp() {
    let (_e1, _e2, s1, s2) = udp_sessions(0, 0);
    ping_pong(&s1, &s2);
}

// ---------------------------------------------------------------------------
// FlowControl: reliable, in-order delivery over a lossy wire
// ---------------------------------------------------------------------------

/// Message `i` of a flow-control run: 4..=1024 bytes, its index first.
fn numbered(i: usize) -> Vec<u8> {
    let len = 4 + (i * 389) % 1021;
    let mut m = pattern(i, len);
    m[..4].copy_from_slice(&(i as u32).to_be_bytes());
    m
}

#[test]
fn flow_control_is_reliable_over_a_lossy_wire() {
    let class = applet("FlowControl");
    let (_e1, _e2, s1, s2) = udp_sessions(100_000, 7);
    let mut a = s1.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s2.create_endpoint(EndpointConfig::default()).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    const N: usize = 2000;
    // At most the applet's pool (80) outstanding, so none is dropped.
    const OUTSTANDING: usize = 64;
    let mut buf = vec![0u8; 1 << 16];
    let (mut sent, mut got) = (0, 0);
    let start = Instant::now();
    while got < N {
        while sent < N && sent - got < OUTSTANDING {
            a.send_blocking(ch, &numbered(sent), SEND_T).unwrap();
            sent += 1;
        }
        let r = b
            .recv(&mut buf, T)
            .unwrap_or_else(|e| panic!("message {got}: {e:?}"));
        let want = numbered(got);
        assert_eq!(r.len, want.len(), "length of message {got}");
        assert_eq!(be(&buf, 0), got as u32, "message {got} in order");
        assert!(buf[..r.len] == want[..], "content of message {got}");
        got += 1;
    }
    eprintln!("FlowControl: {N} messages in {:?}", start.elapsed());
    assert_quiet(&mut b, Duration::from_millis(100), "exactly once");
    assert!(
        engine_counter(&s1, EngineCounter::WireDropInjectedDrop) > 0
            && engine_counter(&s2, EngineCounter::WireDropInjectedDrop) > 0,
        "the wire lost packets both ways"
    );
    assert!(counter(&s1, &a, EndpointCounter::AppletTimerCalls) > 0);
    assert_eq!(counter(&s1, &a, EndpointCounter::AppletTxCalls), N as u64);
    assert_eq!(a.poll_event(), None, "no applet fault");
    assert_eq!(
        b.poll_event()
            .map(|e| matches!(e, Event::ChannelOpened { .. })),
        Some(true)
    );
    assert_eq!(b.poll_event(), None, "no applet fault");
}

#[test]
fn flow_control_backlog_is_bounded() {
    let class = applet("FlowControl");
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    // The receiver has no applet yet, so nothing is acknowledged: the
    // window (16) goes out, the backlog (64) waits, the last 10 are dropped.
    for i in 0..90 {
        a.send_blocking(ch, &numbered(i), SEND_T).unwrap();
    }
    let mut buf = vec![0u8; 1 << 16];
    for i in 0..16 {
        let r = b.recv(&mut buf, T).expect("a raw data packet");
        assert_eq!(buf[0], 1, "a data packet");
        assert_eq!(be(&buf, 1), i, "its sequence number");
        assert!(buf[5..r.len] == numbered(i as usize)[..], "its payload");
    }
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    // Raw copies (retransmissions) delivered before the attach.
    while b.try_recv(&mut buf).unwrap().is_some() {}
    // The retransmissions now reach b's applet: all 80 queued messages
    // arrive, in order, once.
    for i in 0..80 {
        let r = b.recv(&mut buf, T).expect("a message");
        assert!(buf[..r.len] == numbered(i)[..], "message {i}");
    }
    assert_quiet(&mut b, Duration::from_millis(100), "the 10 dropped sends");
    // They were never numbered: the next send follows message 79.
    a.send_blocking(ch, &numbered(90), SEND_T).unwrap();
    let r = b.recv(&mut buf, T).expect("the next message");
    assert!(buf[..r.len] == numbered(90)[..]);
    assert_quiet(&mut b, Duration::from_millis(50), "nothing more");
}

// ---------------------------------------------------------------------------
// Multicast: one send, several channels
// ---------------------------------------------------------------------------

#[test]
fn multicast_reaches_the_selected_peers() {
    let class = applet("Multicast");
    let (_e1, _e2, s1, s2) = udp_sessions(0, 0);
    let mut m = s1.create_endpoint(EndpointConfig::default()).unwrap();
    m.attach_applet(&class, AppletOptions::default()).unwrap();
    // Three peers on the same engine, one on the other.
    let mut peers: Vec<Endpoint> = (0..3)
        .map(|_| s1.create_endpoint(EndpointConfig::default()).unwrap())
        .collect();
    peers.push(s2.create_endpoint(EndpointConfig::default()).unwrap());
    let chans: Vec<Channel> = peers
        .iter()
        .map(|p| m.open_channel(p.addr(), ChannelOptions::default()).unwrap())
        .collect();
    let mut buf = vec![0u8; 1 << 17];
    let cases: &[(&[usize], usize)] = &[
        (&[0, 2, 3], 1000),
        (&[1], 10),
        (&[0, 1, 2, 3], 20_000),
        (&[3], 56),
    ];
    for (k, &(to, len)) in cases.iter().enumerate() {
        let mask: u32 = to.iter().map(|&i| 1u32 << chans[i].0).sum();
        let payload = pattern(k, len);
        let mut msg = mask.to_be_bytes().to_vec();
        msg.extend_from_slice(&payload);
        m.send_blocking(chans[0], &msg, SEND_T).unwrap();
        for (i, p) in peers.iter_mut().enumerate() {
            if to.contains(&i) {
                let r = p.recv(&mut buf, T).expect("a selected peer");
                assert_eq!(r.len, len, "case {k}, peer {i}");
                assert!(buf[..len] == payload[..], "case {k}, peer {i}");
            }
        }
        for (i, p) in peers.iter_mut().enumerate() {
            if !to.contains(&i) {
                assert_quiet(p, Duration::from_millis(30), &format!("case {k}, peer {i}"));
            }
        }
    }
    assert_eq!(
        counter(&s1, &m, EndpointCounter::AppletTxCalls),
        cases.len() as u64
    );
    let copies: usize = cases.iter().map(|c| c.0.len()).sum();
    assert_eq!(counter(&s1, &m, EndpointCounter::TxMsgs), copies as u64);
}

// ---------------------------------------------------------------------------
// PacketBuffers: the packet names its receive buffer
// ---------------------------------------------------------------------------

#[test]
fn packet_buffers_land_where_the_packet_says() {
    let class = applet("PacketBuffers");
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    // The receiver posts no free buffers at all.
    let mut b = s
        .create_endpoint(EndpointConfig {
            managed_buffers: false,
            ..Default::default()
        })
        .unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    assert!(matches!(
        next_event(&mut b, Duration::from_secs(10)),
        Some(Event::ChannelOpened { .. })
    ));
    let bs = b.geometry().buffer_size;
    for (k, &(at, len)) in [
        (0x1000u32, 100usize),
        (0x2_0000, 8192),
        (0x3_0040, 20_000),
        (0x40, 5),
    ]
    .iter()
    .enumerate()
    {
        let payload = pattern(k + 40, len);
        let mut msg = at.to_be_bytes().to_vec();
        msg.extend_from_slice(&payload);
        a.send_blocking(ch, &msg, SEND_T).unwrap();
        let start = Instant::now();
        let d = loop {
            if let Some(d) = b.poll_recv_desc() {
                break d;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "case {k}: nothing"
            );
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(d.len as usize, len, "case {k}");
        assert_eq!(d.flags, 0, "case {k}: in buffers, not inline");
        let n = len.div_ceil(bs as usize);
        assert_eq!(d.nbufs as usize, n, "case {k}");
        for i in 0..n {
            assert_eq!(d.offset(i), at + i as u32 * bs, "case {k}, buffer {i}");
        }
        let mut got = vec![0u8; len];
        b.read_buffer(at, &mut got);
        assert!(
            got == payload,
            "case {k}: the payload is in place at {at:#x}"
        );
    }
    // An offset outside the buffer area faults the arrival; nothing lands.
    let mut msg = 0x7fff_0000u32.to_be_bytes().to_vec();
    msg.extend_from_slice(&[1; 100]);
    a.send_blocking(ch, &msg, SEND_T).unwrap();
    assert_eq!(
        next_event(&mut b, Duration::from_secs(10)),
        Some(Event::AppletFault {
            kind: FaultKind::Native
        })
    );
    assert!(b.poll_recv_desc().is_none());
}

// ---------------------------------------------------------------------------
// The U-Net/SLE paper's Figure 6 applets: ReceiverAck, Burst, Generate
// ---------------------------------------------------------------------------

/// a sends N numbered messages to b, never more than `OUTSTANDING` ahead of
/// what b's user has read (so a's backlog never overflows); b's user gets
/// every one, intact and in order; a's user never sees an acknowledgment.
fn receiver_ack_stream(sa: &Session, sb: &Session, placement: Placement, path: PathChoice) {
    let class = applet("ReceiverAck");
    let mut a = sa.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = sb.create_endpoint(EndpointConfig::default()).unwrap();
    let opts = AppletOptions {
        placement,
        ..Default::default()
    };
    a.attach_applet(&class, opts).unwrap();
    b.attach_applet(&class, opts).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions { path }).unwrap();
    const N: usize = 1010;
    const OUTSTANDING: usize = 60;
    let mut buf = vec![0u8; 1 << 16];
    let mut none = vec![0u8; 1 << 16];
    let (mut sent, mut got) = (0, 0);
    while got < N {
        while sent < N && sent - got < OUTSTANDING {
            a.send_blocking(ch, &numbered(sent), SEND_T).unwrap();
            sent += 1;
        }
        // On a failure, where the messages went.
        let why = || {
            format!(
                "\nsender's engine:\n{}receiver's engine:\n{}",
                nonzero_counters(sa),
                nonzero_counters(sb)
            )
        };
        let r = b
            .recv(&mut buf, T)
            .unwrap_or_else(|e| panic!("message {got}: {e:?}{}", why()));
        let want = numbered(got);
        assert_eq!(r.len, want.len(), "length of message {got}{}", why());
        assert!(
            buf[..r.len] == want[..],
            "content of message {got}{}",
            why()
        );
        got += 1;
        // An inline applet runs doRx when its user receives: the sender
        // polls so that its applet sees the acknowledgments.
        assert!(
            a.try_recv(&mut none).unwrap().is_none(),
            "an acknowledgment reached the sending user"
        );
    }
    assert_quiet(&mut b, Duration::from_millis(50), "exactly once");
    assert_quiet(&mut a, Duration::from_millis(20), "no acknowledgment");
    if placement == Placement::Engine {
        // One acknowledgment per 25 data packets, each taken by a's applet.
        let acks = (N / 25) as u64;
        assert_eq!(counter(sa, &a, EndpointCounter::AppletTxCalls), N as u64);
        assert_eq!(counter(sa, &a, EndpointCounter::TxMsgs), N as u64);
        assert_eq!(counter(sa, &a, EndpointCounter::AppletRxCalls), acks);
        assert_eq!(counter(sa, &a, EndpointCounter::RxMsgs), 0);
        assert_eq!(counter(sb, &b, EndpointCounter::AppletTxCalls), 0);
        assert_eq!(counter(sb, &b, EndpointCounter::TxMsgs), acks);
        assert_eq!(counter(sb, &b, EndpointCounter::RxMsgs), N as u64);
    } else {
        assert!(a.client_counter(ClientCounter::AppletCalls) >= (N + N / 25) as u64);
    }
    assert_eq!(a.poll_event(), None, "no applet fault");
}

#[test]
fn receiver_ack_on_one_engine() {
    let (_engine, s) = one_engine();
    receiver_ack_stream(&s, &s, Placement::Engine, PathChoice::Engine);
}

#[test]
fn receiver_ack_over_udp() {
    let (_e1, _e2, s1, s2) = udp_sessions(0, 0);
    receiver_ack_stream(&s1, &s2, Placement::Engine, PathChoice::Engine);
}

#[test]
fn receiver_ack_inline_on_the_direct_path() {
    let (_engine, s) = one_engine();
    receiver_ack_stream(&s, &s, Placement::Inline, PathChoice::Direct);
}

/// Without acknowledgments (the receiver has no applet) the sender's applet
/// sends 25 packets, keeps the next 64 messages and drops the rest; every
/// 10 ms without an acknowledgment it assumes one and sends 25 more.
///
/// The 100 sends must all reach the applet before its first recovery
/// (its first timer, 10 ms after the 26th send); the engine's counters
/// tell whether they did (no timer invocation yet when the 100th `doTx`
/// is counted), whatever the machine's load. An attempt where they did
/// not is tried again; the checks are made on one where they did.
#[test]
fn receiver_ack_credit_and_backlog() {
    let class = applet("ReceiverAck");
    let (_engine, s) = one_engine();
    let mut buf = vec![0u8; 1 << 16];
    let msgs: Vec<Vec<u8>> = (0..100).map(numbered).collect();
    for attempt in 0..20 {
        let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
        let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
        a.attach_applet(&class, AppletOptions::default()).unwrap();
        let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
        let t0 = Instant::now();
        // One call queues them all (unless the send queue fills).
        let queued = a.send_many(ch, &msgs).unwrap_or(0);
        for m in &msgs[queued..] {
            a.send_blocking(ch, m, SEND_T).unwrap();
        }
        // The engine counts each invocation as it ends. The timer count
        // is read after the doTx count: none then means none ran before
        // the 100th doTx.
        let timers = loop {
            let (tx, timers) = (
                counter(&s, &a, EndpointCounter::AppletTxCalls),
                counter(&s, &a, EndpointCounter::AppletTimerCalls),
            );
            if tx >= 100 {
                break timers;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "doTx");
            std::hint::spin_loop();
        };
        if timers > 0 {
            eprintln!(
                "attempt {attempt}: the applet's timer ran before the 100th send \
                 reached it ({:?} for the sends), again",
                t0.elapsed()
            );
            continue;
        }
        // Raw packets (b has no applet): the message, then 'D'.
        let mut arrivals = Vec::new();
        for i in 0..89 {
            let r = b.recv(&mut buf, T).expect("a data packet");
            let want = numbered(i);
            assert_eq!(r.len, want.len() + 1, "packet {i}");
            assert!(buf[..want.len()] == want[..], "packet {i}");
            assert_eq!(buf[want.len()], b'D', "packet {i}: type");
            arrivals.push(t0.elapsed());
        }
        assert_quiet(&mut b, Duration::from_millis(60), "the 11 dropped sends");
        // Batches of 25, each after a recovery of at least 10 ms.
        for (batch, first) in [(1, 25), (2, 50), (3, 75)] {
            assert!(
                arrivals[first] >= Duration::from_millis(10 * batch),
                "packet {first} left at {:?}, before recovery {batch}",
                arrivals[first]
            );
        }
        assert_eq!(counter(&s, &a, EndpointCounter::TxMsgs), 89);
        return;
    }
    panic!("in 20 attempts, 100 sends never reached the applet before its first timer");
}

#[test]
fn burst_sends_25_copies_per_request() {
    let class = applet("Burst");
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let mut buf = vec![0u8; 1 << 17];
    let sizes = [1usize, 56, 57, 4096, 20_000, 65_536];
    for (k, &len) in sizes.iter().enumerate() {
        let mut msg = pattern(k, len);
        msg[0] = b'B';
        a.send_blocking(ch, &msg, SEND_T).unwrap();
        for copy in 0..25 {
            let r = b.recv(&mut buf, T).expect("a copy");
            assert_eq!(r.len, len, "{len} bytes, copy {copy}");
            assert!(buf[..len] == msg[..], "{len} bytes, copy {copy}");
        }
        assert_quiet(&mut b, Duration::from_millis(20), "25 copies only");
    }
    let n = sizes.len() as u64;
    assert_eq!(counter(&s, &a, EndpointCounter::AppletTxCalls), n);
    assert_eq!(counter(&s, &a, EndpointCounter::TxMsgs), 25 * n);
    assert_eq!(counter(&s, &b, EndpointCounter::RxMsgs), 25 * n);
    // Large bursts are spread over invocations (48 KiB each).
    assert!(counter(&s, &a, EndpointCounter::AppletTimerCalls) > 0);
    // Unmarked messages go out once, of any length.
    for len in [1usize, 3000, 70_000] {
        let msg = pattern(len, len);
        assert_ne!(msg[0], b'B');
        a.send_blocking(ch, &msg, SEND_T).unwrap();
        let r = b.recv(&mut buf, T).expect("the message");
        assert_eq!(r.len, len);
        assert!(buf[..len] == msg[..]);
        assert_quiet(&mut b, Duration::from_millis(20), "once");
    }
    // A marked message longer than the applet's copy is dropped.
    let mut big = pattern(7, 70_000);
    big[0] = b'B';
    a.send_blocking(ch, &big, SEND_T).unwrap();
    assert_quiet(&mut b, Duration::from_millis(50), "a marked 70 000 bytes");
    assert_eq!(a.poll_event(), None, "no applet fault");
}

#[test]
fn burst_over_udp() {
    let class = applet("Burst");
    let (_e1, _e2, s1, s2) = udp_sessions(0, 0);
    let mut a = s1.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s2.create_endpoint(EndpointConfig::default()).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    for round in 0..4 {
        let mut msg = pattern(round, 1000);
        msg[0] = b'B';
        a.send_blocking(ch, &msg, SEND_T).unwrap();
        let mut back = None;
        for copy in 0..25 {
            let r = b.recv(&mut buf, T).expect("a copy");
            assert_eq!(r.len, 1000, "round {round}, copy {copy}");
            assert!(buf[..1000] == msg[..], "round {round}, copy {copy}");
            back = Some(r.channel);
        }
        // The receiving user acknowledges each burst; unmarked, it goes
        // out once.
        b.send_blocking(back.unwrap(), b"Z", SEND_T).unwrap();
        let r = a.recv(&mut buf, T).expect("the acknowledgment");
        assert_eq!((r.len, buf[0]), (1, b'Z'));
        assert_quiet(&mut a, Duration::from_millis(20), "one acknowledgment");
    }
    assert_quiet(&mut b, Duration::from_millis(20), "25 copies per burst");
    assert_eq!(counter(&s1, &a, EndpointCounter::TxMsgs), 100);
}

fn generate(sa: &Session, sb: &Session) {
    let class = applet("Generate");
    let mut a = sa.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = sb.create_endpoint(EndpointConfig::default()).unwrap();
    a.attach_applet(&class, AppletOptions::default()).unwrap();
    b.attach_applet(&class, AppletOptions::default()).unwrap();
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let mut buf = vec![0u8; 1 << 17];
    let sizes = [16usize, 56, 57, 1000, 9000, 65_536, 16];
    for (seq, &len) in sizes.iter().enumerate() {
        // The user's bytes do not matter: the applet sends its own.
        a.send_blocking(ch, &pattern(seq, len), SEND_T).unwrap();
        let r = b.recv(&mut buf, T).expect("a generated message");
        assert_eq!(r.len, len, "message {seq}");
        assert_eq!(be(&buf, 0), seq as u32, "message {seq}: its number");
        assert!(
            buf[4..len].iter().all(|&x| x == 0),
            "message {seq}: zeros after the number"
        );
    }
    // Short sends go out as written; longer than 64 KiB are dropped.
    let short = pattern(99, 15);
    a.send_blocking(ch, &short, SEND_T).unwrap();
    let r = b.recv(&mut buf, T).expect("the short message");
    assert!(buf[..r.len] == short[..]);
    a.send_blocking(ch, &pattern(98, 65_537), SEND_T).unwrap();
    assert_quiet(&mut b, Duration::from_millis(50), "a 65 537-byte send");
    // The numbering goes on where it was.
    a.send_blocking(ch, &pattern(97, 100), SEND_T).unwrap();
    let r = b.recv(&mut buf, T).expect("the next generated message");
    assert_eq!((r.len, be(&buf, 0)), (100, sizes.len() as u32));
    assert_eq!(counter(sa, &a, EndpointCounter::AppletTxCalls), 10);
    assert_eq!(counter(sa, &a, EndpointCounter::TxMsgs), 9);
    assert_eq!(a.poll_event(), None, "no applet fault");
}

#[test]
fn generate_sends_its_own_data() {
    let (_engine, s) = one_engine();
    generate(&s, &s);
}

#[test]
fn generate_over_udp() {
    let (_e1, _e2, s1, s2) = udp_sessions(0, 0);
    generate(&s1, &s2);
}

// ---------------------------------------------------------------------------
// Large receive buffers
// ---------------------------------------------------------------------------

#[test]
fn applets_attach_to_endpoints_with_large_buffers() {
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(with_buffers(128 << 10)).unwrap();
    let mut b = s.create_endpoint(with_buffers(128 << 10)).unwrap();
    a.attach_applet(&applet("StdUnet"), AppletOptions::default())
        .expect("StdUnet allocates 56 bytes of its own");
    b.attach_applet(&applet("StdUnet"), AppletOptions::default())
        .expect("StdUnet allocates 56 bytes of its own");
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    exchange(&mut a, &mut b, ch, &[1, 1000, 200_000], 1);
}

#[test]
fn a_full_receive_queue_does_not_lose_buffers() {
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s
        .create_endpoint(EndpointConfig {
            managed_buffers: false,
            geometry: Geometry {
                recv_cap: 2,
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
    b.attach_applet(&applet("StdUnet"), AppletOptions::default())
        .unwrap();
    for i in 0..3 {
        b.post_free(i * 8192).unwrap();
    }
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    // Three 1-buffer messages, room for two descriptors: the third is dropped.
    for i in 0..3 {
        a.send_blocking(ch, &pattern(i, 100), SEND_T).unwrap();
    }
    let start = Instant::now();
    while counter(&s, &b, EndpointCounter::AppletRxCalls) < 3 {
        assert!(start.elapsed() < Duration::from_secs(10), "no doRx");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(counter(&s, &b, EndpointCounter::RxDropRingFull), 1);
    assert!(b.poll_recv_desc().is_some(), "first");
    assert!(b.poll_recv_desc().is_some(), "second");
    assert!(b.poll_recv_desc().is_none());
    // Three buffers posted, two hold delivered messages: the dropped
    // message's buffer must still be free, as the engine keeps it for an
    // endpoint without an applet. One more message needs exactly it.
    a.send_blocking(ch, &pattern(3, 100), SEND_T).unwrap();
    let start = Instant::now();
    let mut delivered = false;
    while !delivered && start.elapsed() < Duration::from_secs(2) {
        delivered = b.poll_recv_desc().is_some();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(
        delivered,
        "the third buffer was lost with the dropped message"
    );
}

// ---------------------------------------------------------------------------
// Inline placement: the applet runs in the client library, on the direct path
// ---------------------------------------------------------------------------

#[test]
fn raw_unet_inline_on_the_direct_path() {
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    let inline = AppletOptions {
        placement: Placement::Inline,
        ..Default::default()
    };
    a.attach_applet(&applet("RawUnet"), inline).unwrap();
    b.attach_applet(&applet("RawUnet"), inline).unwrap();
    let ch = a
        .open_channel(
            b.addr(),
            ChannelOptions {
                path: PathChoice::Direct,
            },
        )
        .expect("inline applets keep the direct path");
    match next_event(&mut b, Duration::from_secs(5)) {
        Some(Event::ChannelOpened { direct, .. }) => assert!(direct),
        e => panic!("expected ChannelOpened, got {e:?}"),
    }
    let n = exchange(&mut a, &mut b, ch, RAW_SIZES, 3);
    assert!(n > 0);
    // Both sides ran their applet on every message, in this process.
    let calls = 2 * RAW_SIZES.len() as u64 * 3;
    assert!(a.client_counter(ClientCounter::AppletCalls) >= calls);
    assert!(b.client_counter(ClientCounter::AppletCalls) >= calls);
    // Per kind, as `unet stat` shows them: a's doTx ran on each of its
    // sends and its doRx on each echo.
    let sends = RAW_SIZES.len() as u64 * 3;
    assert_eq!(a.client_counter(ClientCounter::AppletTxCalls), sends);
    assert_eq!(a.client_counter(ClientCounter::AppletRxCalls), sends);
    assert_eq!(a.client_counter(ClientCounter::AppletTimerCalls), 0);
    assert_eq!(a.client_counter(ClientCounter::AppletCalls), 2 * sends);
    assert!(a.client_counter(ClientCounter::AppletFuel) > 0);
    assert!(a.client_counter(ClientCounter::DirectTxMsgs) >= calls / 2);
    // The engine ran no applet.
    assert_eq!(counter(&s, &a, EndpointCounter::AppletTxCalls), 0);
    assert_eq!(counter(&s, &b, EndpointCounter::AppletRxCalls), 0);
}

#[test]
fn inline_buffers_go_back_at_detach() {
    // b has 8 receive buffers of 4 KiB. A 30 000-byte message fills all of
    // them through the inline StdUnet; once read they are kept for the
    // applet, and detaching must give them back to the free ring: the next
    // message, on the engine path, needs all 8 from there.
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let small = EndpointConfig {
        geometry: Geometry {
            buffer_size: 4096,
            buffer_area_size: 64 << 10,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut b = s.create_endpoint(small).unwrap();
    let inline = AppletOptions {
        placement: Placement::Inline,
        ..Default::default()
    };
    b.attach_applet(&applet("StdUnet"), inline).unwrap();
    let direct = a
        .open_channel(
            b.addr(),
            ChannelOptions {
                path: PathChoice::Direct,
            },
        )
        .unwrap();
    let engine = a
        .open_channel(
            b.addr(),
            ChannelOptions {
                path: PathChoice::Engine,
            },
        )
        .unwrap();
    let mut buf = vec![0u8; 1 << 16];
    for i in 0..3 {
        let msg = pattern(i, 30_000);
        a.send_blocking(direct, &msg, SEND_T).unwrap();
        let r = b.recv(&mut buf, Some(Duration::from_secs(10))).unwrap();
        assert_eq!(r.len, 30_000);
        assert!(buf[..r.len] == msg[..], "message {i} through the applet");
    }
    b.detach_applet().unwrap();
    let msg = pattern(9, 30_000);
    a.send_blocking(engine, &msg, SEND_T).unwrap();
    let r = b
        .recv(&mut buf, Some(Duration::from_secs(10)))
        .expect("all 8 buffers are back in the free ring");
    assert_eq!(r.len, 30_000);
    assert!(buf[..r.len] == msg[..]);
    assert_eq!(counter(&s, &b, EndpointCounter::RxDropNoBuffer), 0);
}

#[test]
fn looping_inline_applet_faults_then_is_detached() {
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    let opts = AppletOptions {
        placement: Placement::Inline,
        fuel: 50_000,
        ..Default::default()
    };
    a.attach_applet(&applet("Spin"), opts).unwrap();
    let ch = a
        .open_channel(
            b.addr(),
            ChannelOptions {
                path: PathChoice::Direct,
            },
        )
        .unwrap();
    for i in 1..=16 {
        assert_eq!(
            a.send(ch, &pattern(i, 64)),
            Err(SendError::AppletFault),
            "send {i}"
        );
        let want = if i < 16 {
            Event::AppletFault {
                kind: FaultKind::Fuel,
            }
        } else {
            Event::AppletDetached {
                kind: FaultKind::Fuel,
            }
        };
        assert_eq!(a.poll_event(), Some(want), "send {i}");
    }
    assert_eq!(a.client_counter(ClientCounter::AppletFaults), 16);
    assert_quiet(
        &mut b,
        Duration::from_millis(20),
        "no faulted send goes out",
    );
    exchange(&mut a, &mut b, ch, &[1, 100, 5000], 2);
}

// ---------------------------------------------------------------------------
// A runaway applet does not slow down the other endpoints
// ---------------------------------------------------------------------------

/// Round trips per second between two fresh endpoints on the engine path
/// over `dur`.
fn engine_rate(s: &Session, dur: Duration) -> f64 {
    // The clients spin longer than a runaway invocation lasts, so a stall
    // of the engine does not also cost them a sleep and a wake-up.
    let cfg = EndpointConfig {
        spin: Duration::from_micros(500),
        ..EndpointConfig::default()
    };
    let (mut a, mut b, ch) = common::engine_channel(s, cfg);
    let back = match next_event(&mut b, Duration::from_secs(5)) {
        Some(Event::ChannelOpened { channel, .. }) => channel,
        e => panic!("expected ChannelOpened, got {e:?}"),
    };
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while let Ok(r) = b.recv(&mut buf, Some(Duration::from_millis(500))) {
            if b.send_blocking(back, &buf[..r.len], SEND_T).is_err() {
                break;
            }
        }
    });
    let mut buf = [0u8; 64];
    let start = std::time::Instant::now();
    let mut n = 0u64;
    while start.elapsed() < dur {
        a.send_blocking(ch, &[7u8; 64], SEND_T).unwrap();
        a.recv(&mut buf, T).expect("echo");
        n += 1;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    drop(a);
    echo.join().unwrap();
    rate
}

/// CPU time (ns) thread `tid` of this process has run, from the kernel's
/// scheduler statistics (`/proc/self/task/TID/schedstat`, first field).
fn thread_cpu_ns(tid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .expect("read the engine thread's schedstat");
    s.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .expect("schedstat's run time")
}

/// A runaway applet (it loops on every send) beside other endpoints:
/// measured from outside, by the kernel's count of the engine thread's
/// CPU time over windows where the runaway is all the engine has to do,
/// the engine runs at most 15% of the time (the applet's tenth, plus one
/// invocation of slack per window and the engine's own work for the
/// runaway's sends); it faults more than 20 times; and in windows
/// alternating without and with it, the other endpoints keep at least a
/// fifth of their engine-path round-trip rate (medians).
#[test]
fn a_runaway_applet_leaves_other_endpoints_their_rate() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let spin = applet("Spin");
    let (engine, s) = one_engine();
    let tid = engine.thread_id();
    // A hostile neighbour: while `active`, its applet loops on every send,
    // with the largest work budget the engine grants (50 times the
    // default: an invocation runs a millisecond or more, so it is the
    // engine's holding back that keeps it to its tenth); whenever it is
    // detached, it attaches it again, and it keeps sending.
    let opts = AppletOptions {
        fuel: 1_000_000,
        ..AppletOptions::default()
    };
    let active = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let (active2, stop2, s2) = (active.clone(), stop.clone(), s.clone());
    let hostile = std::thread::spawn(move || {
        let mut l = s2.create_endpoint(EndpointConfig::default()).unwrap();
        let sink = s2.create_endpoint(EndpointConfig::default()).unwrap();
        l.attach_applet(&spin, opts).unwrap();
        let ch = l
            .open_channel(sink.addr(), ChannelOptions::default())
            .unwrap();
        let mut faults = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            if active2.load(Ordering::Relaxed) {
                let _ = l.send(ch, &[1u8; 64]);
            }
            while let Some(e) = l.poll_event() {
                match e {
                    Event::AppletFault { .. } => faults += 1,
                    Event::AppletDetached { .. } => {
                        faults += 1;
                        l.attach_applet(&spin, opts).unwrap();
                    }
                    _ => {}
                }
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        faults
    });
    // Alternate windows without and with the runaway, so both see the same
    // machine; compare medians. Between them, a window where the runaway
    // is all the engine has to do: the engine thread's CPU time then is
    // what the applet costs it (the engine's own timer of the applet is
    // reported beside it, not trusted).
    let dur = Duration::from_millis(300);
    let (mut alone, mut beside) = (Vec::new(), Vec::new());
    let (mut engine_ns, mut window_ns, mut applet_ns) = (0u64, 0u64, 0u64);
    for _ in 0..3 {
        active.store(false, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(20));
        alone.push(engine_rate(&s, dur));
        active.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(20));
        let (t0, c0, a0) = (
            Instant::now(),
            thread_cpu_ns(tid),
            counter_all(&s, EndpointCounter::AppletTimeNs),
        );
        std::thread::sleep(dur);
        applet_ns += counter_all(&s, EndpointCounter::AppletTimeNs) - a0;
        engine_ns += thread_cpu_ns(tid) - c0;
        window_ns += t0.elapsed().as_nanos() as u64;
        beside.push(engine_rate(&s, dur));
    }
    stop.store(true, Ordering::Relaxed);
    let faults = hostile.join().unwrap();
    assert!(
        faults > 20,
        "the runaway applet ran and faulted ({faults} faults)"
    );
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let (alone, beside) = (median(&mut alone), median(&mut beside));
    eprintln!("engine-path round trips/s: alone {alone:.0}, beside a runaway applet {beside:.0}");
    let share = engine_ns as f64 / window_ns as f64;
    eprintln!(
        "with only the runaway applet to run, the engine thread ran {:.1}% of \
         the time (the engine timed the applet at {:.1}%)",
        100.0 * share,
        100.0 * applet_ns as f64 / window_ns as f64
    );
    // The engine's promise: an applet that runs long gets at most a tenth of
    // its time (plus one invocation of slack per window, and the engine's
    // own work for each send).
    assert!(
        share <= 0.15,
        "with only the runaway applet to run, the engine thread ran {:.1}% of the time",
        100.0 * share
    );
    // The other endpoints go on. Their rate drops by more than the applet's
    // share, as each long invocation also costs the waiting clients a
    // sleep and a wake-up; on a 2-core machine a third to a half is typical.
    assert!(
        beside >= 0.2 * alone,
        "other endpoints kept {:.0}% of their rate ({beside:.0} vs {alone:.0} round trips/s)",
        100.0 * beside / alone
    );
}

/// An endpoint for applets run directly (`unet_sle::Applet`),
/// without an engine: a buffer area, and what the applet transmitted
/// (channel 255 is not held; odd channels take the native's path).
struct MockEp {
    area: Vec<u8>,
    sent: Vec<(u16, Vec<u8>)>,
    /// Messages taken by `try_tx_push` (compiled `txPush`'s common case).
    sunk: u32,
}

impl MockEp {
    fn new(area: Vec<u8>) -> MockEp {
        MockEp {
            area,
            sent: Vec::new(),
            sunk: 0,
        }
    }
}

impl unet_sle::Port for MockEp {
    fn area_size(&self) -> u64 {
        self.area.len() as u64
    }
    fn area(&mut self) -> std::ptr::NonNull<u8> {
        std::ptr::NonNull::from(self.area.as_mut_slice()).cast()
    }
    fn buffer_size(&self) -> u32 {
        2048
    }
    fn pop_free(&mut self) -> Option<u32> {
        None
    }
    fn push_free(&mut self, _: u32) -> bool {
        true
    }
    fn tx_push(&mut self, chan: u16, data: &[u8]) -> Result<(), String> {
        if chan == 255 {
            return Err("channel 255 is not held".into());
        }
        self.sent.push((chan, data.to_vec()));
        Ok(())
    }
    fn try_tx_push(&mut self, chan: u16, data: &[u8]) -> bool {
        if chan % 2 == 1 {
            return false;
        }
        self.sunk += 1;
        self.sent.push((chan, data.to_vec()));
        true
    }
    fn push_recv(&mut self, _: &unet_abi::RecvDesc) -> bool {
        true
    }
}

impl unet_sle::SleEndpoint for MockEp {
    fn now_us(&self) -> i32 {
        0
    }
    fn set_timer(&mut self, _: u32, _: i32) -> Result<(), String> {
        Ok(())
    }
}

/// The engine's applets start interpreted and switch to JIVE's machine
/// code once the compiler's thread is done (the engine's loop never waits
/// for it), with the same behaviour before and after.
#[test]
fn engine_applets_switch_to_compiled_code_when_ready() {
    use unet_sle::{default_limits, Applet};
    let mut ep = MockEp::new(vec![0; 1 << 16]);
    let mut a = Applet::load(&applet("RawUnet"), default_limits(), &mut ep).expect("load");
    a.set_time_sampling(16, u64::MAX);
    assert!(!a.is_compiled(), "installed before any invocation");
    let t0 = Instant::now();
    let mut i = 0u32;
    while !a.is_compiled() {
        assert!(t0.elapsed() < Duration::from_secs(20), "never compiled");
        let msg = pattern(i as usize, 64);
        ep.area[4096..4096 + msg.len()].copy_from_slice(&msg);
        a.tx(&mut ep, 64, 3, 4096).expect("doTx");
        assert_eq!(ep.sent.last(), Some(&(3, msg)), "message {i}");
        i += 1;
    }
    for j in i..i + 100 {
        let msg = pattern(j as usize, 100);
        ep.area[8192..8192 + msg.len()].copy_from_slice(&msg);
        a.tx(&mut ep, 100, 4, 8192).expect("doTx, compiled");
        assert_eq!(ep.sent.last(), Some(&(4, msg)), "message {j}");
    }
    assert_eq!(a.stats.faults.iter().sum::<u64>(), 0);
}

/// The sample or test applet `name` loaded twice, each on an endpoint from
/// `fresh`: kept interpreted, and compiled (waiting for its code).
fn interpreted_and_compiled(
    name: &str,
    fresh: impl Fn() -> MockEp,
) -> ((unet_sle::Applet, MockEp), (unet_sle::Applet, MockEp)) {
    use unet_sle::{default_limits, Applet};
    let class = applet(name);
    let (mut e1, mut e2) = (fresh(), fresh());
    let mut interp = Applet::load(&class, default_limits(), &mut e1).expect("load");
    interp.keep_interpreted();
    let mut jit = Applet::load(&class, default_limits(), &mut e2).expect("load");
    jit.wait_compiled();
    assert!(jit.is_compiled() && !interp.is_compiled());
    ((interp, e1), (jit, e2))
}

/// The copy natives run inline in compiled applets (JIVE intrinsics over
/// the buffer area) and as calls in interpreted ones: the same results,
/// faults, work and buffer area over offsets and lengths in and out of
/// range.
#[test]
fn compiled_copy_natives_agree_with_interpreted_ones() {
    let ((mut interp, mut e1), (mut jit, mut e2)) = interpreted_and_compiled("Copier", || {
        MockEp::new((0..1u32 << 16).map(|i| (i * 13 + 5) as u8).collect())
    });
    let area = 1u32 << 16;
    let mut compared = 0;
    let mut ok = 0;
    for len in [0, 1, 8, 36, 64, 99, 100, 101, u32::MAX] {
        for chan in [0u16, 1, 36, 99, 100, 65535] {
            for off in [0, 5, area - 164, area - 100, area - 64, area, u32::MAX] {
                let (f1, f2) = (interp.stats.fuel, jit.stats.fuel);
                let r1 = interp.tx(&mut e1, len, chan, off);
                let r2 = jit.tx(&mut e2, len, chan, off);
                let what = format!("doTx({len}, {chan}, {off})");
                assert_eq!(r1, r2, "{what}");
                assert_eq!(
                    interp.stats.fuel - f1,
                    jit.stats.fuel - f2,
                    "work of {what}"
                );
                assert!(e1.area == e2.area, "buffer area after {what}");
                ok += usize::from(r1.is_ok());
                compared += 1;
            }
        }
    }
    assert!(
        ok > 20 && compared - ok > 100,
        "{ok} of {compared} succeeded"
    );
}

/// `txPush` hands its bytes to the endpoint's `try_tx_push` in compiled
/// applets (a JIVE sink) and goes through the native in interpreted ones
/// and whenever the endpoint declines: the same results, faults, work and
/// transmitted messages over offsets, lengths and channels in and out of
/// range, with the sink taking the common case.
#[test]
fn compiled_tx_push_agrees_with_interpreted_one() {
    let ((mut interp, mut e1), (mut jit, mut e2)) =
        interpreted_and_compiled("Copier", || MockEp::new(vec![0; 1 << 16]));
    let mut compared = 0;
    for len in [0usize, 1, 36, 64, 99, 100, 101] {
        let data = pattern(len, len);
        for aoff in [0u16, 1, 36, 99, 100, 255] {
            for chan in [0u16, 1, 2, 254, 255] {
                let (f1, f2) = (interp.stats.fuel, jit.stats.fuel);
                let r1 = interp.rx(&mut e1, &data, aoff << 8 | chan);
                let r2 = jit.rx(&mut e2, &data, aoff << 8 | chan);
                let what = format!("txPush(a, {aoff}, {chan}, {len})");
                assert_eq!(r1, r2, "{what}");
                assert_eq!(
                    interp.stats.fuel - f1,
                    jit.stats.fuel - f2,
                    "work of {what}"
                );
                assert_eq!(e1.sent, e2.sent, "transmitted after {what}");
                compared += 1;
            }
        }
    }
    let sent = e1.sent.len() as u32;
    assert!(compared == 210 && sent > 30, "{sent} of {compared} sent");
    assert_eq!(e1.sunk, 0, "interpreted txPush calls the native");
    // Every message on an even channel went through the sink.
    let even = e2.sent.iter().filter(|(c, _)| c % 2 == 0).count() as u32;
    assert!(e2.sunk > 10 && e2.sunk == even, "{} of {even}", e2.sunk);
}
