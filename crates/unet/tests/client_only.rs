//! The client library without its default features (`embedded`, the
//! engine in the process; `inline`, applets in the process): a C program
//! linked against it talks to a daemon, and pulls in no symbol of JIVE or
//! of its compiler (Cranelift). The library is built for this test with
//! `cargo build -p unet --no-default-features` in a target directory of
//! its own.

use std::path::{Path, PathBuf};
use std::process::Command;

use unet::{Engine, EngineConfig};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Build the client-only library; returns the directory of its outputs.
fn build_client_only() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("client-only");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let o = Command::new(cargo)
        .current_dir(workspace())
        .args([
            "build",
            "-p",
            "unet",
            "--no-default-features",
            "--profile",
            "ci",
        ])
        .arg("--target-dir")
        .arg(&target)
        .output()
        .expect("run cargo");
    assert!(
        o.status.success(),
        "cargo build -p unet --no-default-features failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    target.join("ci")
}

/// The defined symbols of an object, library or program, as `nm` prints
/// them.
fn symbols(file: &Path) -> String {
    let o = Command::new("nm")
        .arg("-C")
        .arg("--defined-only")
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("nm is needed for this test ({e}); install binutils"));
    assert!(
        o.status.success(),
        "nm {}: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn vm_symbols(syms: &str) -> Vec<&str> {
    syms.lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("jive") || l.contains("cranelift")
        })
        .collect()
}

#[test]
fn a_client_without_default_features_links_no_vm_and_talks_to_a_daemon() {
    // The check can fail: this test's own program, linked with the
    // library's default features (and starting an engine, which runs
    // applets), carries the VM. (Not the default `libunet.a`: under the
    // release profile's link-time optimisation a static library keeps
    // only what its C functions reach.)
    let exe = std::env::current_exe().expect("test binary path");
    let full = vm_symbols(&symbols(&exe)).len();
    assert!(
        full > 100,
        "this test's program has only {full} JIVE/Cranelift symbols"
    );

    let out = build_client_only();
    let lib = out.join("libunet.a");
    let so = out.join("libunet.so");
    let in_lib = symbols(&lib);
    let vm = vm_symbols(&in_lib);
    assert!(
        vm.is_empty(),
        "the client-only libunet.a defines:\n{}",
        vm.join("\n")
    );
    assert!(
        in_lib.contains("unet_session_connect"),
        "not the unet library"
    );

    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("unet_client_only");
    let o = Command::new("gcc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g", "-I"])
        .arg(workspace().join("include"))
        .arg(workspace().join("crates/unet/tests/c/unet_client_only.c"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .expect("gcc is needed for this test");
    assert!(
        o.status.success(),
        "gcc failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let vm = vm_symbols(&symbols(&exe)).join("\n");
    assert!(vm.is_empty(), "the C program defines:\n{vm}");

    let dir = tempdir();
    let sock = dir.join("unet.sock");
    let engine = Engine::start(EngineConfig {
        control_socket: Some(sock.clone()),
        ..EngineConfig::default()
    })
    .expect("engine");
    let run = Command::new(&exe)
        .arg(&sock)
        .output()
        .expect("run the C program");
    engine.stop();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && stdout.trim() == "ok",
        "the client-only C program failed ({}):\n{stdout}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    let size = |p: &Path| p.metadata().map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "libunet.so without default features: {} bytes (profile ci)",
        size(&so)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("unet-client-only-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}
