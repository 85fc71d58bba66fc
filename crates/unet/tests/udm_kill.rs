//! UDM nodes in other processes: a node killed with SIGKILL while others
//! inject to it (their injects fail, none hangs, and its virtual buffer's
//! memory is released), and a node stopped with SIGSTOP, which the engine
//! switches to buffered mode (descheduled) and which, continued, takes
//! every message in order.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use unet::udm::*;
use unet::*;

/// The role of the child process: join the job in `UNET_UDM_TICKET` as
/// the rank in `UNET_UDM_RANK` through the engine at `UNET_UDM_CHILD`,
/// say "ready", then either never extract (`UNET_UDM_ROLE=idle`) or take
/// `UNET_UDM_COUNT` messages from rank 0, checking their order, and exit
/// 0 if all came right.
#[test]
fn child() {
    let Some(sock) = std::env::var_os("UNET_UDM_CHILD") else {
        return;
    };
    let env = |k: &str| std::env::var(k).unwrap();
    let ticket: JobTicket = env("UNET_UDM_TICKET").parse().unwrap();
    let rank: u32 = env("UNET_UDM_RANK").parse().unwrap();
    let s = Session::connect(PathBuf::from(sock)).expect("connect");
    let mut node = s.udm_join(ticket, rank).expect("join");
    println!("ready");
    if env("UNET_UDM_ROLE") == "idle" {
        loop {
            thread::sleep(Duration::from_secs(1));
        }
    }
    let count: u64 = env("UNET_UDM_COUNT").parse().unwrap();
    let mut w = [0u64; MAX_WORDS];
    for i in 0..count {
        assert!(node.wait(Some(Duration::from_secs(20))), "message {i}");
        let h = node.extract(&mut w).unwrap();
        assert_eq!((h.src, h.len), (0, 3));
        assert_eq!(&w[..3], &[i, i * 7, !i], "in order, intact");
    }
    assert!(!node.message_available());
    std::process::exit(0);
}

/// Kills the child when the test ends, however it ends.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(sock: &PathBuf, t: JobTicket, rank: u32, role: &str, count: u64) -> KillOnDrop {
    let mut c = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("UNET_UDM_CHILD", sock)
        .env("UNET_UDM_TICKET", t.to_string())
        .env("UNET_UDM_RANK", rank.to_string())
        .env("UNET_UDM_ROLE", role)
        .env("UNET_UDM_COUNT", count.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = c.stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    loop {
        match lines.next() {
            // The harness may have begun the line ("test child ... ").
            Some(Ok(l)) if l.trim_end().ends_with("ready") => break,
            Some(Ok(_)) => continue,
            other => panic!("the child did not get ready: {other:?}"),
        }
    }
    KillOnDrop(c)
}

fn engine(name: &str) -> (Engine, Session, PathBuf) {
    let sock = std::env::temp_dir().join(format!("unet-udm-{name}-{}.sock", std::process::id()));
    let e = Engine::start(EngineConfig {
        control_socket: Some(sock.clone()),
        ..Default::default()
    })
    .unwrap();
    let s = Session::embedded(&e).unwrap();
    (e, s, sock)
}

/// The bytes held by this process's memory file named `name` (the
/// engine's virtual buffers live in this process), None when no
/// descriptor of it is open.
fn memfd_bytes(name: &str) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    for e in std::fs::read_dir("/proc/self/fd").ok()?.flatten() {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        let t = target.to_string_lossy();
        if t.starts_with(&format!("/memfd:{name} ")) || t == format!("/memfd:{name}") {
            return std::fs::metadata(e.path()).ok().map(|m| m.blocks() * 512);
        }
    }
    None
}

#[test]
fn a_node_killed_while_others_inject_fails_their_injects_and_frees_its_buffer() {
    let (_e, s, sock) = engine("kill");
    let cfg = JobConfig {
        nodes: 3,
        fast_queue: 8,
        buffer_size: 64 << 10,
        ..JobConfig::default()
    };
    let t = s.udm_create_job(&cfg).unwrap();
    let mut a = s.udm_join(t, 0).unwrap();
    let mut b = s.udm_join(t, 2).unwrap();
    let mut child = spawn(&sock, t, 1, "idle", 0);
    let buf_name = format!("unet-udm-buf-{:016x}-{}-1", _e.engine_id(), t.job);
    assert_eq!(memfd_bytes(&buf_name), Some(0));

    // Fill the child's fast ring and virtual buffer: then it holds us.
    let mut sent = 0u64;
    let deadline = Instant::now() + Duration::from_secs(10);
    while sent < 8 + 512 {
        if a.injectc(1, 0, &[sent]).unwrap() {
            sent += 1;
        } else {
            assert!(Instant::now() < deadline, "held after {sent}");
            thread::sleep(Duration::from_millis(1));
        }
    }
    thread::sleep(Duration::from_millis(50));
    assert!(
        !a.injectc(1, 0, &[sent]).unwrap(),
        "past the buffer's limit"
    );
    // 512 messages (the limit: 64 KiB over 128) of one word, 16 bytes
    // each in the buffer: two pages.
    assert_eq!(memfd_bytes(&buf_name), Some(512 * 16));
    assert_eq!(a.mode_of(1), Mode::Buffered);

    // Two senders blocked on it, one in its own thread each.
    let ta = thread::spawn(move || (a.inject(1, 0, &[1]), a));
    let tb = thread::spawn(move || (b.inject(1, 0, &[2]), b));
    thread::sleep(Duration::from_millis(100));
    assert!(
        !ta.is_finished() && !tb.is_finished(),
        "inject did not wait"
    );
    let killed = Instant::now();
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let (ra, mut a) = ta.join().unwrap();
    let (rb, _b) = tb.join().unwrap();
    let took = killed.elapsed();
    assert_eq!(ra, Err(InjectError::Gone(1)));
    assert_eq!(rb, Err(InjectError::Gone(1)));
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(a.mode_of(1), Mode::Gone);
    assert_eq!(a.injectc(1, 0, &[]), Err(InjectError::Gone(1)));
    // Its buffer is released: the engine holds no descriptor of it.
    let deadline = Instant::now() + Duration::from_secs(3);
    while memfd_bytes(&buf_name).is_some() {
        assert!(Instant::now() < deadline, "the buffer is still held");
        thread::sleep(Duration::from_millis(5));
    }
    // The job goes on between the others.
    a.inject(0, 4, &[9]).unwrap();
    let mut w = [0u64; MAX_WORDS];
    assert_eq!(a.extract(&mut w).unwrap().handler, 4);
}

/// Whether process `pid` is stopped (`T` in `/proc/PID/stat`).
fn stopped(pid: i32) -> bool {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    s.rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
}

#[test]
fn a_stopped_node_is_switched_to_buffered_mode_and_takes_everything_once_continued() {
    let (_e, s, sock) = engine("stop");
    let cfg = JobConfig {
        nodes: 2,
        fast_queue: 8,
        atomicity_timeout: Duration::from_millis(2),
        ..JobConfig::default()
    };
    let t = s.udm_create_job(&cfg).unwrap();
    let mut a = s.udm_join(t, 0).unwrap();
    let count = 3000u64;
    let mut child = spawn(&sock, t, 1, "take", count);
    let pid = child.0.id() as i32;
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    // The signal takes effect when the child next runs: wait for it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !stopped(pid) {
        assert!(Instant::now() < deadline, "the child did not stop");
        thread::sleep(Duration::from_millis(1));
    }
    // Fewer than its fast ring holds: no sender switches it.
    for i in 0..3u64 {
        a.inject(1, 0, &[i, i * 7, !i]).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while a.mode_of(1) != Mode::Buffered {
        assert!(Instant::now() < deadline, "the engine never switched it");
        thread::sleep(Duration::from_millis(1));
    }
    // The rest go to its buffer while it is stopped ...
    for i in 3..count / 2 {
        a.inject(1, 0, &[i, i * 7, !i]).unwrap();
    }
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    // ... and the rest while it runs.
    for i in count / 2..count {
        a.inject(1, 0, &[i, i * 7, !i]).unwrap();
    }
    let status = child.0.wait().unwrap();
    assert!(
        status.success(),
        "the child saw a message out of order or lost"
    );
}
