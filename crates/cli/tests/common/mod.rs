//! Shared helpers of the multi-process tests: a `unet daemon` guard, child
//! processes that re-run the test binary in a role, the message pattern and
//! the windowed stream both sides of an exchange run.
//!
//! Each test binary has one `#[test] fn child()` that does nothing unless
//! `UNET_ROLE` is set; the parent re-executes the binary with
//! `--exact child` and the role in the environment. Children report with
//! lines starting with `@@ ` on stdout; they exit when their stdin closes
//! (so the parent decides how long their endpoints stay alive) or when
//! their watchdog fires.

#![allow(dead_code)]

pub mod browser;
pub mod hosts;
pub mod routed;
pub mod three;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;
use unet::{Channel, Endpoint, Event, RecvError, SendError};

/// Prefix of the lines children report on.
const TAG: &str = "@@ ";

// -------------------------------------------------------------------------
// Temporary directories
// -------------------------------------------------------------------------

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(what: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "unet-itest-{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// -------------------------------------------------------------------------
// Processes
// -------------------------------------------------------------------------

/// A child process killed (SIGKILL) and reaped on drop; its `@@ ` lines are
/// collected by a reader thread.
pub struct Proc {
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    exited: Option<ExitStatus>,
}

impl Proc {
    /// Spawn `cmd` with piped stdin/stdout. The child gets SIGKILL if the
    /// spawning thread dies, so nothing outlives a crashed test.
    pub fn spawn(name: &str, mut cmd: Command) -> Proc {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        // SAFETY: prctl is async-signal-safe; nothing else runs in pre_exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let out = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take();
        let (tx, rx) = mpsc::channel();
        let n = name.to_string();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if std::env::var_os("UNET_ITEST_ECHO").is_some() {
                    eprintln!("[{n}] {line}");
                }
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proc {
            name: name.to_string(),
            child,
            stdin,
            lines: rx,
            exited: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next raw stdout line, within `timeout`.
    pub fn raw_line(&mut self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// The next raw stdout line starting with `prefix` (the lines before
    /// it skipped), within `timeout`; panics, naming `prefix`, without.
    pub fn line_starting(&mut self, prefix: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            match self.raw_line(deadline.saturating_duration_since(Instant::now())) {
                Some(l) if l.starts_with(prefix) => return l,
                Some(_) => {}
                None => panic!(
                    "{}: no line starting {prefix:?} within {timeout:?}",
                    self.name
                ),
            }
        }
    }

    /// Wait for the next report line starting with `key` (after the `@@ `
    /// tag) and return the rest, trimmed. Panics on timeout or exit, and if
    /// the child reports a failure (`@@ FAIL ...`).
    pub fn expect(&mut self, key: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    // The harness may print "test child ... " first.
                    let Some(at) = line.find(TAG) else {
                        continue;
                    };
                    let rest = &line[at + TAG.len()..];
                    if let Some(f) = rest.strip_prefix("FAIL") {
                        panic!("{} failed:{f}", self.name);
                    }
                    if let Some(r) = rest.strip_prefix(key) {
                        return r.trim().to_string();
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("{}: no '{key}' within {timeout:?}", self.name)
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let st = self.wait_exit(Duration::from_secs(2));
                    panic!("{}: exited ({st:?}) before reporting '{key}'", self.name)
                }
            }
        }
    }

    /// Close the child's stdin: a holding child exits.
    pub fn release(&mut self) {
        self.stdin = None;
    }

    /// Write a line to the child's stdin.
    pub fn tell(&mut self, line: &str) {
        if let Some(s) = self.stdin.as_mut() {
            let _ = writeln!(s, "{line}");
            let _ = s.flush();
        }
    }

    /// Wait for the child to exit (SIGKILL after `timeout`).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if let Some(s) = self.exited {
            return Some(s);
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                self.exited = Some(s);
                return Some(s);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                self.exited = self.child.wait().ok();
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Release the child and require a clean exit.
    pub fn finish(&mut self, timeout: Duration) {
        self.release();
        match self.wait_exit(timeout) {
            Some(s) if s.success() => {}
            s => panic!("{}: did not exit cleanly: {s:?}", self.name),
        }
    }

    /// SIGKILL now and reap.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        self.exited = self.child.wait().ok();
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The `unet` binary under test.
pub fn unet_bin() -> &'static str {
    env!("CARGO_BIN_EXE_unet")
}

/// A command, run inside network namespace `ns` when given.
pub fn command_in(ns: Option<&str>, program: impl AsRef<std::ffi::OsStr>) -> Command {
    match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// A running `unet daemon`: SIGTERM on drop (SIGKILL if it does not stop),
/// its temporary directory removed.
pub struct Daemon {
    pub proc: Proc,
    pub socket: PathBuf,
    pub udp: Option<std::net::SocketAddr>,
    _dir: TempDir,
}

impl Daemon {
    pub fn start(extra: &[&str]) -> Daemon {
        Self::start_in(None, extra)
    }

    pub fn start_in(ns: Option<&str>, extra: &[&str]) -> Daemon {
        Self::start_with(ns, extra, None)
    }

    /// A daemon whose file descriptors are limited to `nofile`
    /// (RLIMIT_NOFILE).
    pub fn start_with_nofile(nofile: u64, extra: &[&str]) -> Daemon {
        Self::start_with(None, extra, Some(nofile))
    }

    fn start_with(ns: Option<&str>, extra: &[&str], nofile: Option<u64>) -> Daemon {
        let dir = TempDir::new("daemon");
        let socket = dir.0.join("unet.sock");
        let mut cmd = command_in(ns, unet_bin());
        cmd.arg("daemon").arg("--socket").arg(&socket).args(extra);
        if let Some(n) = nofile {
            // SAFETY: setrlimit is async-signal-safe and reads only the
            // local struct; nothing else runs in pre_exec.
            unsafe {
                cmd.pre_exec(move || {
                    let r = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut proc = Proc::spawn("daemon", cmd);
        let line = proc.raw_line(Duration::from_secs(20)).unwrap_or_else(|| {
            let st = proc.wait_exit(Duration::from_secs(1));
            panic!("unet daemon {extra:?} did not report ready (exit {st:?})")
        });
        assert!(
            line.starts_with("unet daemon: control socket"),
            "unexpected daemon line: {line}"
        );
        let udp = line
            .rsplit_once("UDP wire ")
            .map(|(_, a)| a.trim().parse().expect("UDP address"));
        Daemon {
            proc,
            socket,
            udp,
            _dir: dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// `unet stat --json` of this daemon.
    pub fn stat(&self) -> Value {
        stat(&self.socket)
    }

    /// Stop with SIGTERM and require a clean exit.
    pub fn stop(&mut self) {
        self.proc.signal(libc::SIGTERM);
        match self.proc.wait_exit(Duration::from_secs(10)) {
            Some(s) if s.success() => {}
            s => panic!("daemon did not stop cleanly on SIGTERM: {s:?}"),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.proc.exited.is_none() {
            self.proc.signal(libc::SIGTERM);
            self.proc.wait_exit(Duration::from_secs(3));
        }
    }
}

/// `unet stat --socket S --json`, parsed.
pub fn stat(socket: &Path) -> Value {
    let out = Command::new(unet_bin())
        .arg("stat")
        .arg("--socket")
        .arg(socket)
        .arg("--json")
        .output()
        .expect("run unet stat");
    assert!(
        out.status.success(),
        "unet stat failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("unet stat --json prints JSON")
}

/// An engine counter from a stat snapshot.
pub fn engine_counter(s: &Value, name: &str) -> u64 {
    s["engine"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("engine counter {name} missing in {s}"))
}

/// The live endpoints of a stat snapshot.
pub fn endpoints(s: &Value) -> Vec<&Value> {
    s["endpoints"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

/// The counters of endpoint `id`, if its slot is live.
pub fn endpoint_stats(s: &Value, id: u32) -> Option<&Value> {
    endpoints(s)
        .into_iter()
        .find(|e| e["id"].as_u64() == Some(id as u64))
}

/// The ids of the live endpoints owned by `pid`.
pub fn endpoints_of_pid(s: &Value, pid: u32) -> Vec<u64> {
    endpoints(s)
        .into_iter()
        .filter(|e| e["pid"].as_u64() == Some(pid as u64))
        .filter_map(|e| e["id"].as_u64())
        .collect()
}

/// A command re-running this test binary as child `role`, optionally in a
/// network namespace.
pub fn child_cmd(ns: Option<&str>, role: &str) -> Command {
    let exe = std::env::current_exe().expect("current exe");
    let mut c = command_in(ns, exe);
    c.args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("UNET_ROLE", role);
    c
}

// -------------------------------------------------------------------------
// Child side
// -------------------------------------------------------------------------

/// The role this process plays, if it is a child.
pub fn role() -> Option<String> {
    std::env::var("UNET_ROLE").ok()
}

/// A required environment variable of a child.
pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| fail(&format!("{name} not set")))
}

pub fn env_u64(name: &str) -> u64 {
    env(name)
        .parse()
        .unwrap_or_else(|_| fail(&format!("{name} is not a number")))
}

/// Report a line to the parent.
pub fn say(line: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{TAG}{line}");
    let _ = o.flush();
}

/// Report a failure and exit.
pub fn fail(why: &str) -> ! {
    say(&format!("FAIL {why}"));
    std::process::exit(3)
}

/// Exit the process after `secs` whatever happens (children never hang).
pub fn watchdog(secs: u64) {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(secs));
        say("FAIL watchdog fired");
        std::process::exit(4);
    });
}

/// Block until the parent closes our stdin.
pub fn hold() {
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
}

/// Read one line from stdin (a command from the parent); None at EOF.
pub fn read_command() -> Option<String> {
    let mut s = String::new();
    match std::io::stdin().read_line(&mut s) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(s.trim().to_string()),
    }
}

// -------------------------------------------------------------------------
// Messages
// -------------------------------------------------------------------------

/// Message sizes, mostly small: one cycle of 64.
pub fn size_of_seq(seq: u64) -> usize {
    const BIG: [usize; 8] = [1000, 4096, 9000, 65536, 57, 1000, 100, 4096];
    const SMALL: [usize; 5] = [1, 8, 56, 57, 100];
    let k = seq % 64;
    if k % 8 == 7 {
        BIG[(k / 8) as usize]
    } else {
        SMALL[(k % 5) as usize]
    }
}

fn table() -> &'static [u8] {
    static T: OnceLock<Vec<u8>> = OnceLock::new();
    T.get_or_init(|| {
        let mut x: u32 = 0x9e37_79b9;
        (0..(1 << 17) + 4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    })
}

/// Fill `buf` with the message of sequence number `seq`: the number
/// (little-endian, truncated to the length) then bytes of a fixed random
/// table starting at an offset derived from `seq`.
pub fn fill(seq: u64, buf: &mut [u8]) {
    let s = seq.to_le_bytes();
    let n = buf.len().min(8);
    buf[..n].copy_from_slice(&s[..n]);
    if buf.len() > 8 {
        let off = (seq.wrapping_mul(2_654_435_761) % 4096) as usize;
        let m = buf.len() - 8;
        buf[8..].copy_from_slice(&table()[off..off + m]);
    }
}

/// Whether `data` is exactly the message of sequence number `seq`.
pub fn check(seq: u64, data: &[u8], scratch: &mut Vec<u8>) -> bool {
    scratch.resize(data.len(), 0);
    fill(seq, scratch);
    scratch[..] == data[..]
}

/// The sequence number in a message's first bytes (all 8 needed).
pub fn seq_of(data: &[u8]) -> Option<u64> {
    data.get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

pub const T: Duration = Duration::from_secs(20);

/// Messages a sender may have unacknowledged. U-Net drops what arrives
/// when the receiver has no free buffer (the managed endpoint posts 256 of
/// 8 KiB), so the window keeps the buffers in flight well below that.
pub const WINDOW: u64 = 128;

/// Bytes a sender may have unacknowledged, for the same reason: with
/// [`WINDOW`] messages each rounding up to a whole buffer, this keeps the
/// receiver's buffers in flight below 256.
pub const BYTE_WINDOW: u64 = 768 << 10;

/// The receiver acknowledges at least every this many bytes.
pub const ACK_BYTES: u64 = 128 << 10;

/// Send `count` messages on `ch`, at most `window` unacknowledged; the
/// receiver acknowledges with 8-byte counts. Returns when the receiver has
/// acknowledged all of them.
pub fn stream_send(
    ep: &mut Endpoint,
    ch: Channel,
    count: u64,
    window: u64,
    size: &dyn Fn(u64) -> usize,
) {
    let mut msg = vec![0u8; 1 << 17];
    let mut buf = vec![0u8; 1 << 17];
    let mut acked = 0u64;
    let mut take_ack = |ep: &mut Endpoint, acked: &mut u64, block: bool| {
        let r = if block {
            match ep.recv(&mut buf, Some(T)) {
                Ok(r) => Some(r),
                Err(e) => fail(&format!("waiting for an ack after {acked}: {e}")),
            }
        } else {
            match ep.try_recv(&mut buf) {
                Ok(r) => r,
                Err(e) => fail(&format!("polling for an ack: {e}")),
            }
        };
        if let Some(r) = r {
            if r.len != 8 || r.channel != ch {
                fail(&format!("unexpected ack {r:?}"));
            }
            let n = seq_of(&buf[..8]).expect("8 bytes");
            if n < *acked || n > count {
                fail(&format!("ack {n} out of order (had {acked})"));
            }
            *acked = n;
        }
    };
    // Bytes sent, and bytes of the first `counted` (acknowledged) messages.
    let (mut sent_bytes, mut acked_bytes, mut counted) = (0u64, 0u64, 0u64);
    for seq in 0..count {
        let len = size(seq);
        loop {
            while counted < acked {
                acked_bytes += size(counted) as u64;
                counted += 1;
            }
            let bytes_out = sent_bytes - acked_bytes;
            if seq - acked < window && (bytes_out == 0 || bytes_out + len as u64 <= BYTE_WINDOW) {
                break;
            }
            take_ack(ep, &mut acked, true);
        }
        sent_bytes += len as u64;
        fill(seq, &mut msg[..len]);
        let start = Instant::now();
        loop {
            match ep.send(ch, &msg[..len]) {
                Ok(()) => break,
                Err(SendError::Full) if start.elapsed() < T => {
                    take_ack(ep, &mut acked, false);
                    std::thread::yield_now();
                }
                Err(e) => fail(&format!("send of message {seq} ({len} bytes): {e}")),
            }
        }
        if seq.is_multiple_of(64) {
            take_ack(ep, &mut acked, false);
        }
    }
    while acked < count {
        take_ack(ep, &mut acked, true);
    }
}

/// Receive `count` messages in order with content checks, acknowledging
/// every `ack_every` and the last. Returns (channel, bytes received).
pub fn stream_recv(
    ep: &mut Endpoint,
    count: u64,
    ack_every: u64,
    size: &dyn Fn(u64) -> usize,
) -> (Channel, u64) {
    let mut buf = vec![0u8; 1 << 17];
    let mut scratch = Vec::new();
    let mut chan = None;
    let mut bytes = 0u64;
    let mut unacked_bytes = 0u64;
    for seq in 0..count {
        let r = match ep.recv(&mut buf, Some(T)) {
            Ok(r) => r,
            Err(RecvError::Timeout) => fail(&format!("timed out waiting for message {seq}")),
            Err(e) => fail(&format!("recv of message {seq}: {e}")),
        };
        if *chan.get_or_insert(r.channel) != r.channel {
            fail(&format!("message {seq} on channel {:?}", r.channel));
        }
        let want = size(seq);
        if r.len != want {
            fail(&format!(
                "message {seq}: length {} instead of {want} (seq field {:?})",
                r.len,
                seq_of(&buf[..r.len])
            ));
        }
        if !check(seq, &buf[..r.len], &mut scratch) {
            fail(&format!(
                "message {seq} ({want} bytes): content differs (seq field {:?})",
                seq_of(&buf[..r.len])
            ));
        }
        bytes += r.len as u64;
        unacked_bytes += r.len as u64;
        if (seq + 1).is_multiple_of(ack_every) || seq + 1 == count || unacked_bytes >= ACK_BYTES {
            unacked_bytes = 0;
            let ack = (seq + 1).to_le_bytes();
            if let Err(e) = ep.send_blocking(r.channel, &ack, T) {
                fail(&format!("ack after {seq}: {e}"));
            }
        }
    }
    (chan.expect("at least one message"), bytes)
}

/// Wait up to `timeout` for a PeerGone event on `ch` (other events are
/// ignored).
pub fn wait_peer_gone(ep: &mut Endpoint, ch: Channel, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        while let Some(e) = ep.poll_event() {
            if e == (Event::PeerGone { channel: ch }) {
                return true;
            }
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// CPU time (utime + stime, clock ticks) of a process.
pub fn cpu_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/PID/stat");
    // Fields after the command name (which may hold spaces) start at 3.
    let rest = &s[s.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Number of open file descriptors of a process.
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

// -------------------------------------------------------------------------
// The stream roles every test binary shares
// -------------------------------------------------------------------------

/// Path choice from its name.
pub fn path_named(s: &str) -> unet::PathChoice {
    match s {
        "direct" => unet::PathChoice::Direct,
        "engine" => unet::PathChoice::Engine,
        _ => unet::PathChoice::Auto,
    }
}

/// Connect to `UNET_SOCKET` and create an endpoint.
pub fn connect_endpoint() -> Endpoint {
    let socket = env("UNET_SOCKET");
    let s =
        unet::Session::connect(&socket).unwrap_or_else(|e| fail(&format!("connect {socket}: {e}")));
    s.create_endpoint(unet::EndpointConfig::default())
        .unwrap_or_else(|e| fail(&format!("create endpoint: {e}")))
}

/// The destination in `UNET_PEER_ID` (and `UNET_PEER_HOST` if set).
pub fn peer_addr() -> unet::EndpointAddr {
    unet::EndpointAddr {
        host: std::env::var("UNET_PEER_HOST")
            .ok()
            .map(|h| h.parse().expect("UNET_PEER_HOST is an address")),
        id: env_u64("UNET_PEER_ID") as u32,
    }
}

/// Run the shared roles: `recv` (report `ID`, receive `UNET_COUNT`
/// messages, report `DONE <bytes>`, hold) and `send` (open a channel to the
/// peer on `UNET_PATH`, stream, report `DONE`, hold). Returns false for
/// other roles.
pub fn stream_role(role: &str) -> bool {
    let sizes = sizes_named(&std::env::var("UNET_SIZES").unwrap_or_default());
    let size = |s: u64| sizes(s);
    match role {
        "recv" => {
            watchdog(120);
            let mut ep = connect_endpoint();
            say(&format!("ID {}", ep.id()));
            let count = env_u64("UNET_COUNT");
            let t = Instant::now();
            let (_, bytes) = stream_recv(&mut ep, count, 64, &size);
            say(&format!("DONE {bytes} {}", t.elapsed().as_millis()));
            hold();
            true
        }
        "send" => {
            watchdog(120);
            let mut ep = connect_endpoint();
            say(&format!("ID {}", ep.id()));
            let path = path_named(&env("UNET_PATH"));
            let ch = ep
                .open_channel(peer_addr(), unet::ChannelOptions { path })
                .unwrap_or_else(|e| fail(&format!("open channel: {e}")));
            let count = env_u64("UNET_COUNT");
            stream_send(&mut ep, ch, count, WINDOW, &size);
            say("DONE");
            hold();
            true
        }
        _ => false,
    }
}

/// Sizes with many messages above one datagram: 100 000 bytes is 68
/// fragments of the default 1472-byte datagram.
pub fn size_fragmented(seq: u64) -> usize {
    const S: [usize; 8] = [1, 8, 100, 1000, 1472, 3000, 100_000, 57];
    S[(seq % 8) as usize]
}

/// A size function by name: "fragmented" or the default mix.
pub fn sizes_named(name: &str) -> fn(u64) -> usize {
    match name {
        "fragmented" => size_fragmented,
        _ => size_of_seq,
    }
}

/// Parent side: run a receiver on `recv_sock` and a sender on `send_sock`
/// streaming `count` messages, and check the byte count.
pub fn run_stream(
    ns: (Option<&str>, Option<&str>),
    recv_sock: &Path,
    send_sock: &Path,
    peer_host: Option<std::net::SocketAddr>,
    path: &str,
    count: u64,
) -> Streamed {
    run_stream_sized(ns, recv_sock, send_sock, peer_host, path, count, "mixed")
}

/// [`run_stream`] with the sizes of [`sizes_named`].
pub fn run_stream_sized(
    ns: (Option<&str>, Option<&str>),
    recv_sock: &Path,
    send_sock: &Path,
    peer_host: Option<std::net::SocketAddr>,
    path: &str,
    count: u64,
    sizes: &str,
) -> Streamed {
    let size = sizes_named(sizes);
    let mut rc = child_cmd(ns.0, "recv");
    rc.env("UNET_SOCKET", recv_sock)
        .env("UNET_COUNT", count.to_string())
        .env("UNET_SIZES", sizes);
    let mut r = Proc::spawn("receiver", rc);
    let id = r.expect("ID", Duration::from_secs(20));
    let mut sc = child_cmd(ns.1, "send");
    sc.env("UNET_SOCKET", send_sock)
        .env("UNET_COUNT", count.to_string())
        .env("UNET_SIZES", sizes)
        .env("UNET_PEER_ID", &id)
        .env("UNET_PATH", path);
    if let Some(h) = peer_host {
        sc.env("UNET_PEER_HOST", h.to_string());
    }
    let mut s = Proc::spawn("sender", sc);
    let sid = s.expect("ID", Duration::from_secs(20));
    let done = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        r.expect("DONE", Duration::from_secs(110))
    })) {
        Ok(d) => d,
        Err(e) => {
            // Show the engines' view of the failure.
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "receiver failed".into());
            let show =
                |p: &Path| std::panic::catch_unwind(|| stat(p).to_string()).unwrap_or_default();
            panic!(
                "{why}\nreceiver's engine: {}\nsender's engine: {}",
                show(recv_sock),
                show(send_sock)
            );
        }
    };
    s.expect("DONE", Duration::from_secs(10));
    let bytes: u64 = done.split_whitespace().next().unwrap().parse().unwrap();
    let want: u64 = (0..count).map(|s| size(s) as u64).sum();
    assert_eq!(bytes, want, "bytes received");
    Streamed {
        receiver: r,
        sender: s,
        bytes,
        receiver_id: id.parse().unwrap(),
        sender_id: sid.parse().unwrap(),
    }
}

/// A finished stream whose children still hold their endpoints.
pub struct Streamed {
    pub receiver: Proc,
    pub sender: Proc,
    pub bytes: u64,
    pub receiver_id: u32,
    pub sender_id: u32,
}

// -------------------------------------------------------------------------
// Hostile input
// -------------------------------------------------------------------------

/// xorshift64.
pub struct Rng(pub u64);

impl Rng {
    /// Seeded from the clock and the process id (a different run each time).
    pub fn seeded() -> Rng {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        Rng((t ^ (std::process::id() as u64) << 32) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A send descriptor a hostile client pushes: a channel of `known` or a
/// random one, an offset in, at the end of or past its buffer `area`, a
/// length zero, plausible, past the largest message or random, flags
/// random one time in eight.
pub fn random_send_desc(rng: &mut Rng, known: &[u16], area: u64) -> unet_abi::SendDesc {
    let pick = rng.below(known.len() as u64 + 2) as usize;
    let channel = match known.get(pick) {
        Some(&c) => c,
        None => rng.next() as u16,
    };
    let offset = match rng.below(3) {
        0 => rng.below(area) as u32,
        1 => (area - rng.below(64)) as u32,
        _ => rng.next() as u32,
    };
    let len = match rng.below(4) {
        0 => 0,
        1 => rng.below(9000) as u32,
        2 => (unet_abi::MAX_MESSAGE as u64 + rng.below(1 << 20)) as u32,
        _ => rng.next() as u32,
    };
    unet_abi::SendDesc {
        offset,
        len,
        channel,
        flags: if rng.below(8) == 0 {
            rng.next() as u16
        } else {
            0
        },
        status: rng.next() as i32,
    }
}

/// Where in an endpoint's segment to scribble, and what: one of `rings`
/// (offset, capacity, entry size) is chosen, then its head, tail,
/// capacity word or an entry, or the armed and futex words; the value is
/// random, small, or a random 32-bit one. The place is 8-byte aligned.
pub fn random_scribble(rng: &mut Rng, rings: &[(u64, u32, u64)]) -> (u64, u64) {
    let (off, cap, esz) = rings[rng.below(rings.len() as u64) as usize];
    let at = match rng.below(5) {
        0 => off,       // head
        1 => off + 64,  // tail
        2 => off + 128, // capacity, entry size
        3 => off + unet_abi::RING_HEADER_SIZE as u64 + rng.below(cap as u64 * esz / 8) * 8,
        _ => 0x100 + rng.below(8) * 8, // armed, futex words
    };
    let v = match rng.below(3) {
        0 => rng.next(),
        1 => rng.below(4096),
        _ => rng.next() & 0xffff_ffff,
    };
    (at, v)
}
