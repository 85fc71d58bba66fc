//! `unet applet attach|detach` against a running daemon, and `unet applet
//! check --domain unet-sle` on the sample applets.

mod tools;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use unet::*;

use tools::applet_source;

const UNET: &str = env!("CARGO_BIN_EXE_unet");

/// Compile applets/RawUnet.java and a refused class into `dir`.
fn compile(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("Bad.java"),
        "public class Bad { public static byte[] RxBuf;\n\
         static int doTx(int l, int c, int o) { long x = l; return (int) (x * 3); }\n\
         static int doRx(int l, int c) { return 0; } }\n",
    )
    .unwrap();
    tools::javac(dir, &[applet_source("RawUnet"), dir.join("Bad.java")]);
}

struct Daemon(Child, PathBuf);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(&self.1);
    }
}

#[test]
fn attach_and_detach_from_the_command_line() {
    let dir = std::env::temp_dir().join(format!("unet-attach-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    compile(&dir);
    let sock = dir.join("ctl.sock");
    let d = Daemon(
        Command::new(UNET)
            .args(["daemon", "--socket"])
            .arg(&sock)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
        sock.clone(),
    );
    let start = Instant::now();
    let s = loop {
        if let Ok(s) = Session::connect(&sock) {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "daemon did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    let id = a.id().to_string();
    let sock_s = sock.to_str().unwrap();

    // check knows the unet-sle domain.
    let out = Command::new(UNET)
        .args(["applet", "check", "--domain", "unet-sle"])
        .arg(dir.join("RawUnet.class"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).ends_with(": ok\n"));
    // Without the domain, or run outside an endpoint: refused, saying what
    // to do instead.
    let out = Command::new(UNET)
        .args(["applet", "check"])
        .arg(dir.join("RawUnet.class"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(line.contains("(grant it with --domain unet-sle)"), "{line}");
    let out = Command::new(UNET)
        .args(["applet", "run"])
        .arg(dir.join("RawUnet.class"))
        .args(["doTx", "1", "2", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("need an endpoint"), "{err}");

    // A refused class: exit 2, the reason, the endpoint unchanged.
    let out = Command::new(UNET)
        .args(["applet", "attach", "--socket", sock_s, "--endpoint", &id])
        .arg(dir.join("Bad.class"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("rejected:") && err.contains("doTx"),
        "{err}"
    );

    let out = Command::new(UNET)
        .args(["applet", "attach", "--socket", sock_s, "--endpoint", &id])
        .arg(dir.join("RawUnet.class"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The applet now runs on a's sends (engine path, since it has an applet).
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    let mut buf = [0u8; 4096];
    for len in [10usize, 1000] {
        let msg: Vec<u8> = (0..len).map(|i| i as u8).collect();
        a.send_blocking(ch, &msg, Duration::from_secs(5)).unwrap();
        let r = b.recv(&mut buf, Some(Duration::from_secs(5))).unwrap();
        assert_eq!(&buf[..r.len], &msg[..]);
    }
    let stat = Command::new(UNET)
        .args(["stat", "--json", "--socket", sock_s])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&stat.stdout).unwrap();
    let e = v["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == a.id())
        .expect("the endpoint in unet stat");
    assert_eq!(e["applet_tx_calls"], 2, "{v}");
    assert_eq!(e["applet_attached"], 1);

    let out = Command::new(UNET)
        .args(["applet", "detach", "--socket", sock_s, "--endpoint", &id])
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = Command::new(UNET)
        .args(["applet", "detach", "--socket", sock_s, "--endpoint", &id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "no applet left to detach");
    drop(d);
    let _ = std::fs::remove_dir_all(&dir);
}
