//! SPINE's peer queues between two daemons (two adapters, two processes
//! this test starts): `unet spine peer` joins them, a handler on A sends
//! to a handler on B over the queue, B's answers, and a host on A gets
//! the answer (no host application on B's path); then B is killed
//! mid-stream: A's row says dead (its process exited) within a
//! deadline, A's sends fail with `E_DEAD`, nothing hangs, and a fresh
//! daemon joined again works.

mod tools;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
    let d = Daemon(
        Command::new(UNET)
            .args(["daemon", "--socket", sock.to_str().unwrap()])
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
