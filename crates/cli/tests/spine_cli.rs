//! `unet spine load|list|unload` against a running daemon, and the
//! per-handler rows of `unet stat`.

mod tools;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
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

#[test]
fn load_list_stat_and_unload_from_the_command_line() {
    let dir = std::env::temp_dir().join(format!("unet-spine-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let repo = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    tools::javac(&dir, &[repo.join("extensions/Echo.java")]);
    let class = dir.join("Echo.class");
    let class_s = class.to_str().unwrap();
    let sock = dir.join("ctl.sock");
    let sock_s = sock.to_str().unwrap();
    let _d = Kill(
        Command::new(UNET)
            .args(["daemon", "--socket", sock_s])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
        Some(sock.clone()),
    );
    let start = Instant::now();
    let s = loop {
        if let Ok(s) = Session::connect(&sock) {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no daemon");
        std::thread::sleep(Duration::from_millis(20));
    };

    // A refused load: exit 2 and the exact reason.
    let out = unet(&["spine", "load", "--socket", sock_s, class_s, "--arg", "5"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "rejected: handler number 5 is out of range (64..=1023)\n"
    );

    // A load holds the extension while it runs.
    let mut load = Kill(
        Command::new(UNET)
            .args(["spine", "load", "--socket", sock_s, class_s, "--arg", "100"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
        None,
    );
    let mut line = String::new();
    BufReader::new(load.0.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(
        line,
        "loaded extension 1 with handlers [100, 101, 102, 103]; holding it until interrupted\n"
    );

    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    ep.send_am(100, b"ping", &[]).unwrap();
    let mut buf = [0u8; 64];
    let r = ep.recv(&mut buf, Some(Duration::from_secs(5))).unwrap();
    assert!(r.am() && r.handler() == Some(100));

    let out = unet(&["spine", "list", "--socket", sock_s, "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let x = &v["extensions"][0];
    assert_eq!(x["name"], "Echo");
    assert_eq!(x["handlers"][0]["method"], "onEcho");
    assert_eq!(x["handlers"][0]["invocations"], 1);
    assert_eq!(v["events"]["deliver_host"], 1);

    let out = unet(&["stat", "--socket", sock_s]);
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("100 onEcho"))
        .unwrap_or_else(|| panic!("no row of handler 100 in:\n{text}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[2], "1", "{row}");

    let out = unet(&["spine", "unload", "--socket", sock_s, "1"]);
    assert!(out.status.success(), "{out:?}");
    // The holder sees it gone and ends.
    let end = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = load.0.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < end, "the holder did not end");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    let out = unet(&["spine", "unload", "--socket", sock_s, "1"]);
    assert_eq!(out.status.code(), Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}
