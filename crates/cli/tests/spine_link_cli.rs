//! `unet spine link listen|connect|list|close` between two running
//! daemons on loopback UDP, and the per-link rows of `unet stat`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use unet::*;

const UNET: &str = env!("CARGO_BIN_EXE_unet");

struct Kill(Child, Option<PathBuf>);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        if let Some(p) = &self.1 {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn unet(args: &[&str]) -> std::process::Output {
    Command::new(UNET).args(args).output().unwrap()
}

/// A daemon on `sock` with a loopback UDP port, and a session to it.
fn daemon(sock: &Path) -> (Kill, Session) {
    let d = Kill(
        Command::new(UNET)
            .args(["daemon", "--socket", sock.to_str().unwrap()])
            .args(["--udp", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
        Some(sock.to_path_buf()),
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

/// A holder's first line.
fn first_line(k: &mut Kill) -> String {
    let mut line = String::new();
    BufReader::new(k.0.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    line
}

fn holder(args: &[&str]) -> Kill {
    Kill(
        Command::new(UNET)
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
        None,
    )
}

#[test]
fn two_daemons_linked_from_the_command_line() {
    let dir = std::env::temp_dir().join(format!("unet-spine-link-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (sa, sb) = (dir.join("a.sock"), dir.join("b.sock"));
    let (_da, a) = daemon(&sa);
    let (_db, b) = daemon(&sb);
    let (sa_s, sb_s) = (sa.to_str().unwrap(), sb.to_str().unwrap());

    let mut listen = holder(&["spine", "link", "listen", "--socket", sa_s, "--token", "77"]);
    let line = first_line(&mut listen);
    let at = a.udp_addr().unwrap().to_string();
    assert_eq!(
        line,
        format!("link 0 listening at {at} with token 77; holding it until interrupted\n")
    );
    // A wrong token: refused, exit 2.
    let out = unet(&["spine", "link", "connect", "--socket", sb_s, &at, "78"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let mut connect = holder(&["spine", "link", "connect", "--socket", sb_s, &at, "77"]);
    let line = first_line(&mut connect);
    assert!(
        line.starts_with("link ") && line.contains(&format!("up with {at}")),
        "{line}"
    );
    let lb: u32 = line.split_whitespace().nth(1).unwrap().parse().unwrap();

    let out = unet(&["spine", "link", "list", "--socket", sa_s, "--json"]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = &v["links"][0];
    assert_eq!(row["id"], 0);
    assert_eq!(row["state"], "up");
    assert_eq!(row["peer"], b.udp_addr().unwrap().to_string());
    assert_eq!(row["peer_link"], lb);
    assert_eq!(v["drops"]["no_listener"], 1, "the wrong token's open");

    let out = unet(&["stat", "--socket", sb_s]);
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text
        .lines()
        .skip_while(|l| *l != "spine links:")
        .find(|l| l.split_whitespace().next() == Some(&lb.to_string()))
        .unwrap_or_else(|| panic!("no row of link {lb} in:\n{text}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!((cols[1], cols[2]), ("up", at.as_str()), "{row}");
    let out = unet(&["stat", "--socket", sb_s, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["spine_links"]["links"][0]["state"], "up");

    // B closes its link: both holders see it and end.
    let out = unet(&["spine", "link", "close", "--socket", sb_s, &lb.to_string()]);
    assert!(out.status.success(), "{out:?}");
    let end = Instant::now() + Duration::from_secs(10);
    while connect.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "the connect holder did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let l = a.spine_links().unwrap();
        if l.link(0).is_some_and(|r| r.state == "closed") {
            break;
        }
        assert!(Instant::now() < end, "A's link never closed: {l:#?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = unet(&["spine", "link", "close", "--socket", sb_s, &lb.to_string()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: the engine refused: no such SPINE link (or not this user's)\n"
    );
    drop(listen);
    let _ = std::fs::remove_dir_all(&dir);
}
