//! `unet daemon --config FILE`: the options a TOML file gives are the
//! limits a running daemon enforces, the command line overrides the file,
//! `--print-config` prints the options in force with where each came
//! from, and a file with an unknown key or a bad value stops the daemon
//! before it starts, naming the file, the line and the key.

mod common;

use std::process::Command;

use common::*;

#[test]
fn a_daemon_runs_with_the_file_s_options_under_the_command_line_s() {
    let dir = TempDir::new("config");
    let file = dir.0.join("unet.toml");
    std::fs::write(
        &file,
        "# quotas\nclient_memory = \"64M\"\nclient-regions = 7\nclient_vis = 9\nallow_peer = [\"10.1.0.0/16\"]\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let d = Daemon::start(&["--config", f, "--client-vis", "3"]);
    let s = d.stat();
    let limits = &s["limits"];
    assert_eq!(limits["client_memory"], 64 << 20, "{limits}");
    assert_eq!(limits["client_regions"], 7, "{limits}");
    assert_eq!(limits["client_vis"], 3, "the command line wins: {limits}");

    let out = Command::new(unet_bin())
        .args([
            "daemon",
            "--config",
            f,
            "--client-vis",
            "3",
            "--print-config",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let line = |k: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{k} ")))
            .unwrap_or_else(|| panic!("no {k} in\n{text}"))
            .to_string()
    };
    assert!(line("client_vis").ends_with("# command line"), "{text}");
    assert!(line("client_memory").contains("\"64M\""), "{text}");
    assert!(line("client_memory").ends_with("# file"), "{text}");
    assert!(line("allow_peer").contains("\"10.1.0.0/16\""), "{text}");
    assert!(line("max_datagram").ends_with("# default"), "{text}");
}

#[test]
fn a_bad_file_stops_the_daemon_before_it_starts() {
    let dir = TempDir::new("config-bad");
    let socket = dir.0.join("unet.sock");
    for (text, want) in [
        (
            "client_vis = 4\n\nclinet_memory = \"1G\"\n",
            ":3: unknown key `clinet_memory`",
        ),
        ("client_memory = \"lots\"\n", ":1: key `client_memory`: "),
        ("udp = \"not an address\"\n", ":1: key `udp`: "),
        ("max_endpoints = [1, 2]\n", ":1: key `max_endpoints`: "),
    ] {
        let file = dir.0.join("bad.toml");
        std::fs::write(&file, text).unwrap();
        let out = Command::new(unet_bin())
            .arg("daemon")
            .arg("--socket")
            .arg(&socket)
            .arg("--config")
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{text}");
        let err = String::from_utf8_lossy(&out.stderr);
        let want = format!("unet daemon: {}{want}", file.display());
        assert!(err.starts_with(&want), "{text}: {err}");
        assert!(!socket.exists(), "no daemon started on {text}");
    }
    let out = Command::new(unet_bin())
        .args(["daemon", "--config", "/nonexistent/unet.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/unet.toml"));
}
