//! SPINE's peer queues between two daemons (two adapters, two processes
//! this test starts): `unet spine peer` joins them, a handler on A sends
//! to a handler on B over the queue, B's answers, and a host on A gets
//! the answer (no host application on B's path); then B is killed
//! mid-stream: A's row says dead (its process exited) within a
//! deadline, A's sends fail with `E_DEAD`, nothing hangs, and a fresh
//! daemon joined again works.
//!
//! And who holds a queue: with both daemons run as `nobody` (so that
//! `nobody` and root may join), `nobody` joining from one new `unet spine
//! peer` after another stops at the user's cap with a message naming the
//! adapter and its queues, while root still joins; `nobody` cannot leave
//! root's queue, leaves its own and joins again.

mod tools;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use unet::peer::{PEERS_PER_ADAPTER, PEERS_PER_USER};
use unet::spine::{split_am, ExtensionOptions};
use unet::*;

const UNET: &str = env!("CARGO_BIN_EXE_unet");
/// PeerPing's handlers start here on both adapters.
const BASE: u16 = 100;
const DEST_PEER: u32 = 2;
const E_DEAD: i32 = -2;

struct Daemon(Child, PathBuf);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(&self.1);
    }
}

fn daemon(sock: &Path) -> (Daemon, Session) {
    daemon_as(sock, Command::new(UNET))
}

/// A daemon on `sock` run by `cmd` (the program and who runs it).
fn daemon_as(sock: &Path, mut cmd: Command) -> (Daemon, Session) {
    let d = Daemon(
        cmd.args(["daemon", "--socket", sock.to_str().unwrap()])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
        sock.to_path_buf(),
    );
    let start = Instant::now();
    loop {
        if let Ok(s) = Session::connect(sock) {
            return (d, s);
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no daemon");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn unet(args: &[&str]) -> std::process::Output {
    Command::new(UNET).args(args).output().unwrap()
}

/// A's rows (`unet spine peers --json`).
fn rows(sock: &Path) -> Vec<serde_json::Value> {
    let out = unet(&[
        "spine",
        "peers",
        "--socket",
        sock.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn row(sock: &Path, index: u32) -> serde_json::Value {
    rows(sock)
        .into_iter()
        .find(|r| r["index"] == index)
        .unwrap_or_else(|| panic!("no row {index}"))
}

/// Ask A's onPing to reach the peer `index` with `payload`: what the
/// host gets back within `wait` (handler number and arguments), if
/// anything.
fn ping(ep: &mut Endpoint, index: u32, payload: &[u8], wait: Duration) -> Option<(u16, Vec<u8>)> {
    let mut args = (DEST_PEER << 24 | index).to_le_bytes().to_vec();
    args.extend_from_slice(payload);
    ep.send_am(BASE, &args, &[]).unwrap();
    let mut buf = [0u8; 512];
    match ep.recv(&mut buf, Some(wait)) {
        Ok(r) => {
            let (a, _) = split_am(&buf[..r.len]).unwrap();
            Some((r.handler().unwrap(), a.to_vec()))
        }
        Err(RecvError::Timeout) => None,
        Err(e) => panic!("recv: {e}"),
    }
}

fn load(s: &Session, class: &[u8]) {
    let opts = ExtensionOptions {
        arg: BASE as i32,
        ..ExtensionOptions::named("PeerPing")
    };
    let x = s.load_extension(class, opts).unwrap();
    assert_eq!(x.handlers.len(), 6);
}

#[test]
fn a_handler_on_one_daemon_reaches_one_on_another_and_a_killed_peer_is_noticed() {
    let dir = std::env::temp_dir().join(format!("unet-spine-peer-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    tools::javac(&dir, &[tools::repo().join("extensions/PeerPing.java")]);
    let class = std::fs::read(dir.join("PeerPing.class")).unwrap();
    let (sock_a, sock_b) = (dir.join("a.sock"), dir.join("b.sock"));
    let (_da, sa) = daemon(&sock_a);
    let (mut db, sb) = daemon(&sock_b);
    // The extensions are held by this process's sessions; it has no
    // endpoint on B.
    load(&sa, &class);
    load(&sb, &class);

    let out = unet(&[
        "spine",
        "peer",
        "--socket",
        sock_a.to_str().unwrap(),
        "--socket",
        sock_b.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ia = v["a"].as_u64().unwrap() as u32;
    let ib = v["b"].as_u64().unwrap() as u32;
    let r = row(&sock_b, ib);
    assert_eq!(
        (r["state"].as_str(), r["side"].as_u64()),
        (Some("alive"), Some(1))
    );

    let mut ep = sa.create_endpoint(EndpointConfig::default()).unwrap();
    for i in 0..50u32 {
        let got = ping(&mut ep, ia, &i.to_le_bytes(), Duration::from_secs(5));
        assert_eq!(got, Some((BASE + 2, i.to_le_bytes().to_vec())), "ping {i}");
    }
    let r = row(&sock_a, ia);
    assert_eq!((r["out"].as_u64(), r["in"].as_u64()), (Some(50), Some(50)));
    let r = row(&sock_b, ib);
    assert_eq!((r["out"].as_u64(), r["in"].as_u64()), (Some(50), Some(50)));

    // B dies mid-stream: pings keep going until A refuses them.
    let killed = Instant::now();
    db.0.kill().unwrap();
    db.0.wait().unwrap();
    let mut answered_dead = false;
    let mut i = 50u32;
    while killed.elapsed() < Duration::from_secs(5) {
        match ping(&mut ep, ia, &i.to_le_bytes(), Duration::from_millis(200)) {
            Some((h, a)) if h == BASE + 3 => {
                assert_eq!(i32::from_le_bytes(a[..4].try_into().unwrap()), E_DEAD);
                answered_dead = true;
                break;
            }
            // An answer B gave before it died, or nothing (lost with B).
            Some((h, _)) => assert_eq!(h, BASE + 2),
            None => {}
        }
        i += 1;
    }
    assert!(answered_dead, "A's sends never failed with E_DEAD");
    let r = row(&sock_a, ia);
    assert_eq!(r["state"], "dead", "{r}");
    assert_eq!(r["reason"], "exited", "{r}");
    assert!(r["drops"]["tx_dead"].as_u64().unwrap() >= 1, "{r}");
    assert!(killed.elapsed() < Duration::from_secs(5));
    // The text row says so too.
    let out = unet(&["spine", "peers", "--socket", sock_a.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("dead (exited)"), "{text}");
    // And unet stat, beside the extensions.
    let out = unet(&["stat", "--socket", sock_a.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .skip_while(|l| *l != "spine peer queues:")
        .find(|l| l.split_whitespace().next() == Some(&ia.to_string()))
        .unwrap_or_else(|| panic!("no row of queue {ia} in:\n{text}"));
    assert!(line.contains("dead (exited)"), "{line}");

    // A fresh daemon joined again: a new queue, and pings go through.
    let sock_c = dir.join("c.sock");
    let (_dc, sc) = daemon(&sock_c);
    load(&sc, &class);
    let pair = unet::peer::join(&sa, &sc).unwrap();
    assert_ne!(pair.a, ia);
    for i in 0..20u32 {
        let got = ping(&mut ep, pair.a, &i.to_le_bytes(), Duration::from_secs(5));
        assert_eq!(
            got,
            Some((BASE + 2, i.to_le_bytes().to_vec())),
            "ping {i} again"
        );
    }
    // The old row stays, dead; the new one lives.
    assert_eq!(row(&sock_a, ia)["state"], "dead");
    assert_eq!(row(&sock_a, pair.a)["state"], "alive");
    // Leaving: the peer sees the queue closed.
    sa.leave_peer(pair.a).unwrap();
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let r = row(&sock_c, pair.b);
        if r["state"] == "dead" {
            assert_eq!(r["reason"], "closed");
            break;
        }
        assert!(Instant::now() < end, "C never saw the queue closed: {r}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `nobody`'s user and group.
const NOBODY: u32 = 65534;

/// `unet ARGS` run by `bin` as `nobody`.
fn unet_as_nobody(bin: &Path, args: &[&str]) -> std::process::Output {
    Command::new(bin)
        .args(args)
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap()
}

#[test]
fn a_user_joining_again_and_again_stops_at_its_cap_and_leaves_only_its_own_queues() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "the daemons run as nobody: this test needs root");
    let dir = std::env::temp_dir().join(format!("unet-peer-users-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mode = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    mode(&dir, 0o777).unwrap();
    // `nobody` may not reach the build's directory: a copy it can run.
    let bin = dir.join("unet");
    std::fs::copy(UNET, &bin).unwrap();
    mode(&bin, 0o755).unwrap();
    let (sock_a, sock_b) = (dir.join("a.sock"), dir.join("b.sock"));
    let (a, b) = (sock_a.to_str().unwrap(), sock_b.to_str().unwrap());
    let as_nobody = || {
        let mut c = Command::new(&bin);
        c.uid(NOBODY).gid(NOBODY);
        c
    };
    let (_da, sa) = daemon_as(&sock_a, as_nobody());
    let (_db, _sb) = daemon_as(&sock_b, as_nobody());
    let join = ["spine", "peer", "--socket", a, "--socket", b, "--json"];
    let index = |out: &std::process::Output| {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            v["a"].as_u64().unwrap() as u32,
            v["b"].as_u64().unwrap() as u32,
        )
    };

    // Each join a new process of nobody's, the queue outliving it.
    let mut mine = Vec::new();
    for i in 0..PEERS_PER_USER {
        let out = unet_as_nobody(&bin, &join);
        assert!(out.status.success(), "join {i}: {out:?}");
        mine.push(index(&out));
    }
    let out = unet_as_nobody(&bin, &join);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let a_mine: Vec<String> = mine.iter().map(|m| m.0.to_string()).collect();
    for want in [
        format!("{a} holds {PEERS_PER_USER} live peer queues joined by this user (uid {NOBODY})"),
        format!("{PEERS_PER_USER} of its {PEERS_PER_ADAPTER}"),
        format!("unet spine unpeer --socket {a} INDEX"),
        format!("this user's: {}", a_mine.join(", ")),
    ] {
        assert!(err.contains(&want), "{want:?} not in: {err}");
    }
    let refused = |sock: &str| {
        let out = unet(&["stat", "--socket", sock, "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["engine"]["quota_refused_peers_user"].as_u64().unwrap()
    };
    assert_eq!((refused(a), refused(b)), (1, 0), "refused at A, counted");
    // Root still joins.
    let out = unet(&join);
    assert!(out.status.success(), "root's join: {out:?}");
    let (root_a, _) = index(&out);
    let by_user = |uid: u32| {
        rows(&sock_a)
            .iter()
            .filter(|r| r["uid"] == uid && r["state"] == "alive")
            .count()
    };
    assert_eq!((by_user(NOBODY), by_user(0)), (PEERS_PER_USER, 1));

    // nobody cannot leave root's queue; it leaves its own (on both
    // adapters) and joins again.
    let out = unet_as_nobody(
        &bin,
        &["spine", "unpeer", "--socket", a, &root_a.to_string()],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no such peer queue on the adapter (or not this user's)"),
        "{err}"
    );
    assert_eq!(row(&sock_a, root_a)["state"], "alive");
    for (sock, i) in [(a, mine[0].0), (b, mine[0].1)] {
        let out = unet_as_nobody(&bin, &["spine", "unpeer", "--socket", sock, &i.to_string()]);
        assert!(out.status.success(), "{out:?}");
    }
    let out = unet_as_nobody(&bin, &join);
    assert!(out.status.success(), "the join after a leave: {out:?}");
    assert_eq!(unet_as_nobody(&bin, &join).status.code(), Some(1));
    assert_eq!(refused(a), 2);
    // Root may leave anyone's.
    sa.leave_peer(mine[1].0).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
