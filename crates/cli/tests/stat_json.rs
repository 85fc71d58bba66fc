//! `unet stat`: endpoints as structured records (id, pid, engine id,
//! version) rather than keys made of display strings, the channel
//! counters named for what they count, the limits in force and how close
//! each process is to them; a daemon that does not answer is reported
//! as such.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use unet::{ChannelOptions, EndpointConfig, PathChoice, Session, SessionOptions};

#[test]
fn stat_json_has_structured_endpoints_and_the_limits_in_force() {
    let d = Daemon::start(&[
        "--client-endpoints",
        "5",
        "--client-memory",
        "64M",
        "--client-regions",
        "7",
        "--client-udm-nodes",
        "9",
        "--vi-held-budget",
        "1M",
    ]);
    let s = Session::connect(&d.socket).expect("connect");
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let b = s.create_endpoint(EndpointConfig::default()).unwrap();
    let c1 = a
        .open_channel(
            b.addr(),
            ChannelOptions {
                path: PathChoice::Engine,
            },
        )
        .unwrap();
    a.open_channel(
        b.addr(),
        ChannelOptions {
            path: PathChoice::Engine,
        },
    )
    .unwrap();
    a.close_channel(c1).unwrap();

    let st = d.stat();
    let me = std::process::id() as u64;
    let ea = endpoint_stats(&st, a.id()).unwrap_or_else(|| panic!("endpoint a in {st}"));
    assert_eq!(ea["pid"], me, "{st}");
    assert_eq!(ea["engine_id"], st["engine_id"]);
    assert!(ea["engine_id"].as_u64().is_some_and(|v| v != 0), "{st}");
    assert_eq!(ea["version"], unet_abi::VERSION, "{st}");
    assert_eq!(ea["channels_peak"], 2, "{st}");
    assert_eq!(ea["channels_open"], 1, "{st}");
    assert_eq!(ea["channels_opened"], 2, "{st}");
    assert!(ea["client"].is_object(), "{st}");
    assert_eq!(endpoints_of_pid(&st, me as u32).len(), 2, "{st}");
    assert_eq!(st["engine_pid"], d.pid(), "{st}");

    let seg = unet_abi::Layout::new(unet_abi::Geometry::default())
        .unwrap()
        .segment_size;
    assert_eq!(ea["memory_bytes"], seg, "{st}");
    let l = &st["limits"];
    assert_eq!(l["client_endpoints"], 5, "{st}");
    assert_eq!(l["client_memory"], 64u64 << 20, "{st}");
    assert!(l["user_memory"].is_null(), "no user limit: {st}");
    assert_eq!(l["client_regions"], 7, "{st}");
    assert_eq!(l["client_udm_nodes"], 9, "{st}");
    assert_eq!(l["vi_held_budget"], 1u64 << 20, "{st}");
    assert_eq!(
        l["client_vis"],
        unet_engine::DEFAULT_CLIENT_VIS,
        "the default: {st}"
    );
    let p = st["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == me)
        .unwrap_or_else(|| panic!("this process in {st}"));
    assert_eq!(p["endpoints"], 2, "{st}");
    assert_eq!(p["endpoints_limit"], 5, "{st}");
    assert_eq!(p["memory_bytes"], 2 * seg, "{st}");
    assert_eq!(p["memory_limit"], 64u64 << 20, "{st}");

    // The table says the same in words.
    let text = stat_text(&d);
    assert!(text.contains("limits:"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(&format!("pid {me} ")) && l.contains("endpoints    2 / 5")),
        "{text}"
    );
    assert!(text.contains("channels_peak"), "{text}");
}

/// Keeps a daemon stopped (SIGSTOP) and lets it go on (SIGCONT) on drop,
/// whatever the test did.
struct Stopped<'a>(&'a Daemon);

impl<'a> Stopped<'a> {
    fn new(d: &'a Daemon) -> Stopped<'a> {
        d.proc.signal(libc::SIGSTOP);
        Stopped(d)
    }
}

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        self.0.proc.signal(libc::SIGCONT);
    }
}

/// Run `cmd` to its end, killing it after `limit`: its exit status (None
/// if it had to be killed), stderr and how long it ran.
fn run_bounded(
    mut cmd: Command,
    limit: Duration,
) -> (Option<std::process::ExitStatus>, String, Duration) {
    use std::io::Read;
    let t0 = Instant::now();
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn unet stat");
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = t0.elapsed();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status, err, took)
}

/// `f` on a thread of its own, given up after `limit` (None then).
fn bounded<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).ok()
}

/// A stopped daemon (SIGSTOP) does not hold its clients up: `unet stat
/// --timeout-ms 300` exits non-zero within a few seconds saying "the
/// daemon at S is not answering (no reply in 300 ms)" (with
/// `UNET_TIMEOUT_MS=200` and no flag, "200 ms"; with neither, the default
/// 5 s); `Session::connect_with` a timeout of 300 ms returns
/// `Error::Timeout`, taking at least the 300 ms and well under 5 s; a
/// request on a session made before the stop times out the same way.
/// Once the daemon goes on (SIGCONT), that session works again (the late
/// reply to the request that timed out is skipped) and `unet stat`
/// answers. Every wait is bounded, so a client that blocks fails the test
/// instead of hanging it.
#[test]
fn a_stopped_daemon_is_reported_as_not_answering() {
    let d = Daemon::start(&[]);
    let short = SessionOptions {
        timeout: Some(Duration::from_millis(300)),
    };
    let before = Session::connect_with(&d.socket, short).expect("connect");
    let stopped = Stopped::new(&d);
    // Let the stop take effect.
    std::thread::sleep(Duration::from_millis(100));

    let socket = d.socket.clone();
    let rust = bounded(Duration::from_secs(20), move || {
        let t0 = Instant::now();
        let r = Session::connect_with(&socket, short).map(|_| ());
        (r, t0.elapsed())
    });
    let stat = |ms: Option<&str>, env: Option<&str>| {
        let mut cmd = Command::new(unet_bin());
        cmd.arg("stat").arg("--socket").arg(&d.socket);
        if let Some(ms) = ms {
            cmd.args(["--timeout-ms", ms]);
        }
        match env {
            Some(v) => cmd.env("UNET_TIMEOUT_MS", v),
            None => cmd.env_remove("UNET_TIMEOUT_MS"),
        };
        run_bounded(cmd, Duration::from_secs(20))
    };
    for (flag, env, ms, limit) in [
        (Some("300"), None, 300, Duration::from_secs(4)),
        (None, Some("200"), 200, Duration::from_secs(4)),
        (None, None, 5000, Duration::from_secs(9)),
    ] {
        let (status, err, took) = stat(flag, env);
        let status = status.unwrap_or_else(|| {
            panic!("unet stat (--timeout-ms {flag:?}, UNET_TIMEOUT_MS {env:?}) still blocked after {took:?}")
        });
        assert!(
            !status.success(),
            "unet stat succeeded against a stopped daemon"
        );
        let want = format!(
            "the daemon at {} is not answering (no reply in {ms} ms)",
            d.socket.display()
        );
        assert!(err.contains(&want), "stderr {err:?} lacks {want:?}");
        assert!(
            took >= Duration::from_millis(ms) && took < limit,
            "unet stat gave up after {took:?} (timeout {ms} ms)"
        );
    }

    let (r, took) = rust.expect("Session::connect_with still blocked after 20 s");
    match r {
        Err(unet::Error::Timeout(t)) => assert_eq!(t, Duration::from_millis(300)),
        r => panic!("connect to a stopped daemon: {r:?}"),
    }
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(4),
        "connect gave up after {took:?}"
    );
    let before = bounded(Duration::from_secs(20), move || {
        let r = before
            .create_endpoint(EndpointConfig::default())
            .map(|_| ());
        (r, before)
    })
    .expect("a request on a live session still blocked after 20 s");
    assert!(
        matches!(before.0, Err(unet::Error::Timeout(_))),
        "request to a stopped daemon: {:?}",
        before.0
    );

    drop(stopped);
    let session = before.1;
    let ep = session
        .create_endpoint(EndpointConfig::default())
        .expect("the session works once the daemon goes on");
    let st = d.stat();
    assert!(endpoint_stats(&st, ep.id()).is_some(), "{st}");
}

/// `unet stat` shows each VI: its state, reliability, path and peer, and
/// its counters (messages both ways; for a VI the engine carries to
/// another engine, retransmissions, duplicates, out-of-order arrivals and
/// errors), as the two ends see it.
#[test]
fn stat_shows_each_vi_with_its_state_and_counters() {
    use unet::{Reliability, ViAttributes, ViError, ViSeg};
    const T: Option<Duration> = Some(Duration::from_secs(10));
    let da = Daemon::start(&["--udp", "127.0.0.1:0"]);
    let db = Daemon::start(&["--udp", "127.0.0.1:0"]);
    let sa = Session::connect(&da.socket).unwrap();
    let sb = Session::connect(&db.socket).unwrap();
    // A local VI pair on daemon a, and one from a to b.
    let server = sa.vi_listen(1).unwrap();
    let c = sa.clone();
    let t = std::thread::spawn(move || c.vi_connect(None, 1, &ViAttributes::default(), T));
    let mut local_b = server.accept(&ViAttributes::default(), T).unwrap();
    let mut local_a = t.join().unwrap().unwrap();
    let rr = ViAttributes {
        reliability: Reliability::ReliableReception,
        ..ViAttributes::default()
    };
    let server_b = sb.vi_listen(2).unwrap();
    let (c, rr2, host) = (sa.clone(), rr.clone(), sb.udp_addr());
    let t = std::thread::spawn(move || c.vi_connect(host, 2, &rr2, T));
    let mut far_b = server_b.accept(&rr, T).unwrap();
    let mut far_a = t.join().unwrap().unwrap();
    let ra = sa.register_memory(1 << 16).unwrap();
    let rb = sb.register_memory(1 << 16).unwrap();
    let rl = sa.register_memory(1 << 16).unwrap();
    for i in 0..10u64 {
        local_b.post_recv(i, &[ViSeg::new(&rl, 0, 1000)]).unwrap();
        local_a.post_send(i, &[ViSeg::new(&ra, 0, 1000)]).unwrap();
        local_b.recv_wait(T).unwrap();
        far_b.post_recv(i, &[ViSeg::new(&rb, 0, 1000)]).unwrap();
        far_a.post_send(i, &[ViSeg::new(&ra, 0, 1000)]).unwrap();
        far_b.recv_wait(T).unwrap();
        far_a.send_wait(T).unwrap();
    }
    let st = da.stat();
    let vis = st["vis"]
        .as_array()
        .unwrap_or_else(|| panic!("no vis in {st}"));
    let find = |id: u32| {
        vis.iter()
            .find(|v| v["id"] == id)
            .unwrap_or_else(|| panic!("vi {id} not in {st}"))
    };
    let la = find(local_a.id());
    assert_eq!(la["state"], "connected", "{st}");
    assert_eq!(la["path"], "direct", "{st}");
    assert_eq!(la["reliability"], "reliable-delivery", "{st}");
    assert_eq!(la["pid"], std::process::id(), "{st}");
    assert_eq!(la["peer_vi"], local_b.id(), "{st}");
    assert_eq!(la["counters"]["tx_msgs"], 10, "{st}");
    assert_eq!(la["counters"]["tx_bytes"], 10_000, "{st}");
    assert_eq!(find(local_b.id())["counters"]["rx_msgs"], 10, "{st}");
    let fa = find(far_a.id());
    assert_eq!(fa["path"], "engine", "{st}");
    assert_eq!(fa["reliability"], "reliable-reception", "{st}");
    assert_eq!(fa["peer"], db.udp.unwrap().to_string(), "{st}");
    assert_eq!(fa["peer_vi"], far_b.id(), "{st}");
    assert_eq!(fa["counters"]["tx_msgs"], 10, "{st}");
    for k in [
        "retransmits",
        "duplicates",
        "out_of_order",
        "errors",
        "acks_rx",
    ] {
        assert!(fa["counters"][k].is_u64(), "{k} in {st}");
    }
    let stb = db.stat();
    let fb = stb["vis"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == far_b.id())
        .unwrap_or_else(|| panic!("vi {} not in {stb}", far_b.id()))
        .clone();
    assert_eq!(fb["counters"]["rx_msgs"], 10, "{stb}");
    assert_eq!(fb["counters"]["rx_bytes"], 10_000, "{stb}");
    // A broken VI says why.
    local_a.close().unwrap();
    assert_eq!(local_b.state(), unet::ViState::Error(ViError::PeerGone));
    let st = da.stat();
    let lb = st["vis"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == local_b.id())
        .unwrap_or_else(|| panic!("vi b not in {st}"))
        .clone();
    assert_eq!(lb["state"], "peer-gone", "{st}");
    // The text form lists them too.
    let text = stat_text(&da);
    assert!(text.contains("VIs:"), "{text}");
    assert!(text.contains(&format!("vi {} (pid", far_a.id())), "{text}");
}

/// One convention names the control socket: `UNET_SOCKET`. A daemon told
/// only that listens there, and `unet stat` told only that reaches it
/// (clients resolve it with `unet::socket_path`, which the C ABI's
/// `unet_session_connect(NULL)` and Javia use).
#[test]
fn unet_socket_names_the_control_socket_for_daemon_and_clients() {
    let dir = TempDir::new("unet-socket-env");
    let socket = dir.0.join("named-by-env.sock");
    let mut cmd = Command::new(unet_bin());
    cmd.arg("daemon").env("UNET_SOCKET", &socket);
    let mut daemon = Proc::spawn("daemon", cmd);
    let line = daemon
        .raw_line(Duration::from_secs(20))
        .expect("the daemon reports ready");
    assert!(
        line.contains(&socket.display().to_string()),
        "the daemon listens where UNET_SOCKET says: {line}"
    );
    let out = Command::new(unet_bin())
        .args(["stat", "--json"])
        .env("UNET_SOCKET", &socket)
        .output()
        .expect("run unet stat");
    assert!(
        out.status.success(),
        "unet stat with UNET_SOCKET: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(v["engine"].is_object(), "a stat of the engine: {v}");
    // Without it (and with no daemon at the default), a clear refusal
    // that names where it looked.
    let out = Command::new(unet_bin())
        .args(["stat", "--json"])
        .env("UNET_SOCKET", dir.0.join("nobody-here.sock"))
        .output()
        .expect("run unet stat");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nobody-here.sock"), "names the socket: {err}");
    assert_eq!(
        unet::DEFAULT_SOCKET,
        "/tmp/unet.sock",
        "the documented default"
    );
    daemon.signal(libc::SIGTERM);
    daemon.wait_exit(Duration::from_secs(10));
}

/// `unet stat` shows each UDM node: its job, rank, process and mode, the
/// messages it took by case, its virtual buffer's pages (now and the
/// most), the switches to buffered mode by cause and the overflow holds.
#[test]
fn stat_shows_each_udm_node_with_its_mode_and_counters() {
    use unet::udm::{JobConfig, MAX_WORDS};
    let d = Daemon::start(&[]);
    let s = Session::connect(&d.socket).unwrap();
    let cfg = JobConfig {
        fast_queue: 2,
        buffer_size: 4096,
        ..JobConfig::default()
    };
    let t = s.udm_create_job(&cfg).unwrap();
    let mut a = s.udm_join(t, 0).unwrap();
    let mut b = s.udm_join(t, 1).unwrap();
    // 2 fast, 32 buffered (the buffer's limit), then held.
    let mut sent = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while sent < 34 {
        if a.injectc(1, 0, &[sent]).unwrap() {
            sent += 1;
        }
        assert!(Instant::now() < deadline, "stuck at {sent}");
    }
    std::thread::sleep(Duration::from_millis(50));
    assert!(!a.injectc(1, 0, &[sent]).unwrap());
    let st = d.stat();
    let nodes = st["udm_nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("no udm_nodes in {st}"));
    let nb = nodes
        .iter()
        .find(|n| n["job"] == t.job && n["rank"] == 1)
        .unwrap_or_else(|| panic!("node 1 not in {st}"));
    assert_eq!(nb["mode"], "buffered", "{st}");
    assert_eq!(nb["nodes"], 2, "{st}");
    assert_eq!(nb["pid"], std::process::id(), "{st}");
    let c = &nb["counters"];
    assert_eq!(c["buffered_msgs"], 32, "{st}");
    assert_eq!(c["buffer_pages"], 1, "{st}");
    assert_eq!(c["buffer_pages_max"], 1, "{st}");
    // The full ring held the sender; the engine switched the receiver,
    // which took nothing for the atomicity timeout.
    assert_eq!(c["switch_queue_full"], 0, "{st}");
    assert_eq!(c["overflow_holds"], 1, "{st}");
    assert_eq!(c["switch_atomicity_timeout"], 1, "{st}");
    let mut w = [0u64; MAX_WORDS];
    for _ in 0..34 {
        assert!(b.wait(Some(Duration::from_secs(5))));
        b.extract(&mut w).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let st = d.stat();
        let nb = st["udm_nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["job"] == t.job && n["rank"] == 1)
            .unwrap()
            .clone();
        let c = &nb["counters"];
        if c["buffer_pages"] == 0 {
            assert_eq!(nb["mode"], "fast", "{st}");
            assert_eq!(c["fast_msgs"], 2, "{st}");
            assert_eq!(c["buffered_taken"], 32, "{st}");
            assert_eq!(c["pages_returned"], 1, "{st}");
            break;
        }
        assert!(Instant::now() < deadline, "pages kept: {st}");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The text form lists them too.
    let text = stat_text(&d);
    assert!(
        text.contains(&format!("job {} node 1/2", t.job)) && text.contains("buffered_msgs"),
        "{text}"
    );
}

/// What `unet stat` prints for the daemon `d`.
fn stat_text(d: &Daemon) -> String {
    let out = Command::new(unet_bin())
        .args(["stat", "--socket"])
        .arg(&d.socket)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `unet stat | head`: a listing whose reader has gone ends the command by
/// SIGPIPE, as other Unix tools end, not by a panic on a failed write.
#[test]
fn a_listing_whose_reader_has_gone_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let d = Daemon::start(&[]);
    let mut child = Command::new(unet_bin())
        .args(["stat", "--socket"])
        .arg(&d.socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unet stat");
    // The read end closes before the command has connected and printed.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {err}",
        out.status
    );
}
