//! The C ABI from C: `tests/c/unet_smoke.c` is compiled with gcc against
//! `include/unet.h` and the static library Cargo built for this test run,
//! then run; it prints `ok` when every check passed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `libunet.a` of this build: next to the test binary (`target/<profile>/
/// deps/`) or one level up (`target/<profile>/`); the newest if both.
fn static_lib() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps directory");
    let mut found: Vec<PathBuf> = [Some(deps), deps.parent()]
        .into_iter()
        .flatten()
        .map(|d| d.join("libunet.a"))
        .filter(|p| p.is_file())
        .collect();
    found.sort_by_key(|p| p.metadata().and_then(|m| m.modified()).ok());
    found.pop().unwrap_or_else(|| {
        panic!(
            "libunet.a not found next to {} (the crate's staticlib output)",
            exe.display()
        )
    })
}

fn require(tool: &str) {
    match Command::new(tool).arg("--version").output() {
        Ok(o) if o.status.success() => {}
        _ => panic!("`{tool}` is needed to test the C ABI but was not found on PATH; install it"),
    }
}

fn run_with_deadline(cmd: &mut Command, limit: Duration) -> std::process::Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "timed out after {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn compile(compiler: &str, args: &[&str], out: &Path, extra: &[&Path]) {
    let include = manifest_dir().join("../../include");
    let mut cmd = Command::new(compiler);
    cmd.args(args).arg("-I").arg(&include);
    for p in extra {
        cmd.arg(p);
    }
    cmd.arg("-o").arg(out);
    let o = cmd.output().expect("run the compiler");
    assert!(
        o.status.success(),
        "{compiler} failed ({:?}):\n{}{}",
        cmd,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn c_smoke_program_passes() {
    require("gcc");
    let src = manifest_dir().join("tests/c/unet_smoke.c");
    let lib = static_lib();
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("unet_smoke");
    let mut cmd = Command::new("gcc");
    cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g", "-I"])
        .arg(manifest_dir().join("../../include"))
        .arg(&src)
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe);
    let o = cmd.output().expect("run gcc");
    assert!(
        o.status.success(),
        "gcc failed ({cmd:?}):\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let out = run_with_deadline(&mut Command::new(&exe), Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim() == "ok",
        "the C smoke program failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn header_is_strict_c_and_cpp() {
    require("gcc");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let c = dir.join("unet_header_check.c");
    std::fs::write(
        &c,
        "#include \"unet.h\"\n\
         int unet_header_check(void);\n\
         int unet_header_check(void) { unet_recv_desc d = {0}; \
         return (int)unet_recv_desc_offset(&d, 0); }\n",
    )
    .unwrap();
    compile(
        "gcc",
        &["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-c"],
        &dir.join("unet_header_check.o"),
        &[&c],
    );
    // C++ as well, when a C++ compiler is present.
    if Command::new("g++").arg("--version").output().is_ok() {
        let cc = dir.join("unet_header_check.cc");
        std::fs::write(&cc, "#include \"unet.h\"\nint main() { return 0; }\n").unwrap();
        compile(
            "g++",
            &["-std=c++11", "-Wall", "-Wextra", "-Werror", "-c"],
            &dir.join("unet_header_check_cc.o"),
            &[&cc],
        );
    }
}
