//! Helpers shared by this crate's integration tests.

use std::sync::atomic::Ordering;

use unet::{Endpoint, Session};
use unet_abi::{CountersHeader, EndpointCounter, EndpointSlot, EngineCounter, ENDPOINT_SLOTS_OFF};

/// xorshift64*: a fixed sequence per seed, so that a failure replays from
/// the seed printed.
#[allow(dead_code)] // not every test binary uses it
pub struct Rng(pub u64);

#[allow(dead_code)] // not every test binary uses it
impl Rng {
    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// An engine-wide counter, read from the session's counters segment.
#[allow(dead_code)] // not every test binary uses it
pub fn engine_counter(s: &Session, c: EngineCounter) -> u64 {
    let (seg, _) = s.counters().expect("counters segment");
    // SAFETY: the segment starts with the counters header (mapped with its
    // full size by counters()); the values are atomics.
    let h = unsafe { seg.ptr().cast::<CountersHeader>().as_ref() };
    h.engine[c as usize].load(Ordering::Relaxed)
}

/// Call `f` with each live endpoint slot of the session's counters segment
/// until it returns true.
#[allow(dead_code)] // not every test binary uses it
pub fn find_live_slot(s: &Session, mut f: impl FnMut(&EndpointSlot) -> bool) {
    let (seg, max) = s.counters().expect("counters segment");
    let size = std::mem::size_of::<EndpointSlot>();
    for i in 0..max as usize {
        let Some(p) = seg.at(ENDPOINT_SLOTS_OFF + i * size, size) else {
            break;
        };
        // SAFETY: in bounds of the mapping (checked by at()), 8-byte
        // aligned; the slot's fields are atomics.
        let slot = unsafe { p.cast::<EndpointSlot>().as_ref() };
        if slot.live.load(Ordering::Acquire) != 0 && f(slot) {
            return;
        }
    }
}

/// One counter of endpoint `ep`, read from the session's counters segment.
#[allow(dead_code)] // not every test binary uses it
pub fn endpoint_counter(s: &Session, ep: &Endpoint, c: EndpointCounter) -> u64 {
    let mut v = None;
    find_live_slot(s, |slot| {
        if slot.endpoint_id.load(Ordering::Relaxed) != ep.id() {
            return false;
        }
        v = Some(slot.counters[c as usize].load(Ordering::Relaxed));
        true
    });
    v.unwrap_or_else(|| panic!("endpoint {} has no counters slot", ep.id()))
}

/// The session's engine counters and each endpoint's, those that are not
/// zero, one per line: what a failing test prints to say where messages
/// went.
#[allow(dead_code)] // not every test binary uses it
pub fn nonzero_counters(s: &Session) -> String {
    let mut out = String::new();
    for &c in EngineCounter::ALL {
        let v = engine_counter(s, c);
        if v != 0 {
            out += &format!("  engine {} = {v}\n", c.name());
        }
    }
    find_live_slot(s, |slot| {
        let id = slot.endpoint_id.load(Ordering::Relaxed);
        for &c in EndpointCounter::ALL {
            let v = slot.counters[c as usize].load(Ordering::Relaxed);
            if v != 0 {
                out += &format!("  endpoint {id} {} = {v}\n", c.name());
            }
        }
        false
    });
    out
}

/// Round trips as (start, duration).
#[allow(dead_code)] // not every test binary uses it
pub type Trips = Vec<(std::time::Instant, std::time::Duration)>;

/// The `p` quantile (0 to 1) of `v`; zero for none.
/// Two endpoints of `s` made with `cfg`, and a channel from the first to
/// the second through the engine (not the direct path).
#[allow(dead_code)] // not every test binary uses it
pub fn engine_channel(
    s: &Session,
    cfg: unet::EndpointConfig,
) -> (Endpoint, Endpoint, unet::Channel) {
    let mut a = s.create_endpoint(cfg).unwrap();
    let b = s.create_endpoint(cfg).unwrap();
    let path = unet::PathChoice::Engine;
    let ch = a
        .open_channel(b.addr(), unet::ChannelOptions { path })
        .unwrap();
    (a, b, ch)
}

#[allow(dead_code)] // not every test binary uses it
pub fn pct(mut v: Vec<std::time::Duration>, p: f64) -> std::time::Duration {
    if v.is_empty() {
        return std::time::Duration::ZERO;
    }
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

/// A 64-byte ping-pong through the engine between two endpoints of a
/// session of its own, each end on a thread of its own, every round trip
/// timed, until [`PingPong::stop`]: what the set-up stall tests watch
/// while another client makes something large.
#[allow(dead_code)] // not every test binary uses it
pub struct PingPong {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    stop_pong: std::sync::Arc<std::sync::atomic::AtomicBool>,
    trips: std::sync::Arc<std::sync::Mutex<Trips>>,
    ping: std::thread::JoinHandle<()>,
    pong: std::thread::JoinHandle<()>,
}

#[allow(dead_code)] // not every test binary uses it
impl PingPong {
    /// Start it on `engine`.
    pub fn start(engine: &unet::Engine) -> PingPong {
        use std::sync::atomic::AtomicBool;
        use std::sync::{Arc, Mutex};
        use std::time::{Duration, Instant};
        use unet::{EndpointConfig, RecvError};

        let s = Session::embedded(engine).unwrap();
        let (mut a, mut b, ch) = engine_channel(&s, EndpointConfig::default());
        // The ping stops first, at the end of a round trip; the pong only
        // once the ping is gone (it would leave the last ping unanswered
        // otherwise).
        let stop = Arc::new(AtomicBool::new(false));
        let stop_pong = Arc::new(AtomicBool::new(false));
        let trips: Arc<Mutex<Trips>> = Arc::default();
        let pong = {
            let stop = stop_pong.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                while !stop.load(Ordering::Relaxed) {
                    match b.recv(&mut buf, Some(Duration::from_millis(100))) {
                        Ok(r) => b
                            .send_blocking(r.channel, &buf[..r.len], Duration::from_secs(10))
                            .expect("pong"),
                        Err(RecvError::Timeout) => {}
                        Err(e) => panic!("pong: {e}"),
                    }
                }
            })
        };
        let ping = {
            let stop = stop.clone();
            let trips = trips.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                let mut mine = Vec::with_capacity(1 << 20);
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    a.send_blocking(ch, b"ping", Duration::from_secs(10))
                        .expect("ping");
                    a.recv(&mut buf, Some(Duration::from_secs(10)))
                        .expect("pong back");
                    mine.push((t, t.elapsed()));
                }
                *trips.lock().unwrap() = mine;
            })
        };
        PingPong {
            stop,
            stop_pong,
            trips,
            ping,
            pong,
        }
    }

    /// Stop both ends; every round trip, in order.
    pub fn stop(self) -> Trips {
        self.stop.store(true, Ordering::Relaxed);
        self.ping.join().unwrap();
        self.stop_pong.store(true, Ordering::Relaxed);
        self.pong.join().unwrap();
        let trips = self.trips.lock().unwrap().clone();
        trips
    }
}

/// The repository's root.
#[allow(dead_code)] // not every test binary uses it
pub fn repo() -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// A JDK ≥ 22, found by `scripts/find-jdk` (once a test binary).
#[allow(dead_code)] // not every test binary uses it
pub fn jdk() -> &'static std::path::Path {
    use std::path::PathBuf;
    static JDK: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    JDK.get_or_init(|| {
        let out = std::process::Command::new("bash")
            .arg(repo().join("scripts/find-jdk"))
            .output()
            .expect("cannot run `bash scripts/find-jdk`");
        assert!(
            out.status.success(),
            "the SPINE tests compile Java extensions and need a JDK 22 or later; \
             scripts/find-jdk found none (set JAVA_HOME to one):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// Extensions compiled against the SDK (`java/applet-sdk`) in one javac
/// run, every lint an error: the source files `files` and the sources
/// `sources` (class, text), written under `dir`, which is removed
/// afterwards. Class name (of each file and source) → class file.
#[allow(dead_code)] // not every test binary uses it
pub fn javac(
    dir: &std::path::Path,
    files: &[std::path::PathBuf],
    sources: &[(&str, &str)],
) -> std::collections::HashMap<String, Vec<u8>> {
    let (src, out) = (dir.join("src"), dir.join("out"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let mut files = files.to_vec();
    for (class, text) in sources {
        let p = src.join(format!("{class}.java"));
        std::fs::write(&p, text).unwrap();
        files.push(p);
    }
    let run = std::process::Command::new(jdk().join("bin/javac"))
        .args(["--release", "8", "-Xlint:all,-options", "-Werror"])
        .arg("-sourcepath")
        .arg(repo().join("java/applet-sdk/src/main/java"))
        .arg("-d")
        .arg(&out)
        .args(&files)
        .output()
        .expect("cannot run javac");
    if !run.status.success() {
        let _ = std::fs::remove_dir_all(dir);
        panic!(
            "javac failed:\n{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
    }
    let mut m = std::collections::HashMap::new();
    for f in &files {
        let class = f.file_stem().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(out.join(format!("{class}.class")))
            .unwrap_or_else(|e| panic!("{class}.class: {e}"));
        m.insert(class, bytes);
    }
    let _ = std::fs::remove_dir_all(dir);
    m
}

/// The options of an extension loaded as `name` with `arg`, granted
/// `domains` besides `spine`.
#[allow(dead_code)] // not every test binary uses it
pub fn ext_opts(name: &str, arg: i32, domains: &[&str]) -> unet::spine::ExtensionOptions {
    unet::spine::ExtensionOptions {
        name: name.into(),
        arg,
        domains: domains.iter().map(|d| d.to_string()).collect(),
        ..unet::spine::ExtensionOptions::default()
    }
}

/// An engine started with `cfg`, and a session embedded in it.
#[allow(dead_code)] // not every test binary uses it
pub fn engine_with(cfg: unet::EngineConfig) -> (unet::Engine, Session) {
    let e = unet::Engine::start(cfg).unwrap();
    let s = Session::embedded(&e).unwrap();
    (e, s)
}

/// The next active message on `ep` within `within`: (handler, args,
/// bulk).
#[allow(dead_code)] // not every test binary uses it
pub fn try_recv_am(
    ep: &mut Endpoint,
    within: std::time::Duration,
) -> Result<(u16, Vec<u8>, Vec<u8>), unet::RecvError> {
    let mut buf = vec![0u8; 1 << 17];
    let r = ep.recv(&mut buf, Some(within))?;
    assert!(r.am(), "an active message");
    let (a, b) = unet::spine::split_am(&buf[..r.len]).expect("framing");
    Ok((r.handler().unwrap_or(u16::MAX), a.to_vec(), b.to_vec()))
}

/// [`try_recv_am`], which must find one.
#[allow(dead_code)] // not every test binary uses it
pub fn recv_am(ep: &mut Endpoint, within: std::time::Duration) -> (u16, Vec<u8>, Vec<u8>) {
    try_recv_am(ep, within).expect("an answer")
}

/// Wait (with a deadline) until `cond` holds of `s`'s SPINE listing;
/// that listing.
#[allow(dead_code)] // not every test binary uses it
pub fn wait_listing(
    s: &Session,
    what: &str,
    cond: impl Fn(&unet::spine::SpineListing) -> bool,
) -> unet::spine::SpineListing {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let l = s.list_extensions().unwrap();
        if cond(&l) {
            return l;
        }
        assert!(std::time::Instant::now() < end, "{what}: {l:#?}");
        std::thread::yield_now();
    }
}
