//! The C ABI from C: `tests/c/unet_smoke.c` (endpoints and channels),
//! `tests/c/vi_smoke.c` (VIA) and `tests/c/udm_smoke.c` (UDM) are
//! compiled with gcc against `include/unet.h` and the static library
//! Cargo built for this test run, then run; each prints `ok` (with a
//! count of checks for VIA and UDM) when every check passed.

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

/// Compile `tests/c/<name>.c` with gcc (`-Wall -Wextra -Werror`) against
/// the header and the static library, run it, and return its standard
/// output once it exited with status 0.
fn run_c_program(name: &str) -> String {
    require("gcc");
    let src = manifest_dir().join(format!("tests/c/{name}.c"));
    let lib = static_lib();
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
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
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the C program {name} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn c_smoke_program_passes() {
    let stdout = run_c_program("unet_smoke");
    assert_eq!(stdout.trim(), "ok", "unet_smoke's summary");
}

/// VIA from C: two VIs connected across threads, regions, gathered and
/// scattered messages of 0, 1, 1000 and 65536 bytes, completion queues, a
/// region in use, a rejected and a request-accepted connection, and a
/// closed peer. Its summary is `ok: N checks`.
#[test]
fn c_vi_smoke_program_passes() {
    let stdout = run_c_program("vi_smoke");
    let n: u32 = stdout
        .trim()
        .strip_prefix("ok: ")
        .and_then(|r| r.strip_suffix(" checks"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("vi_smoke's summary is not `ok: N checks`: {stdout:?}"));
    assert!(n >= 150, "vi_smoke ran only {n} checks");
}

/// UDM from C: a job from its ticket, the operations and their errors,
/// a handler answering 2000 messages while the node's main code makes
/// atomic sections on another thread (none overlapped), a
/// dispose-failure, a message for no handler, atomicity-extend, counters.
#[test]
fn c_udm_smoke_program_passes() {
    let stdout = run_c_program("udm_smoke");
    let n: u32 = stdout
        .trim()
        .strip_prefix("ok: ")
        .and_then(|r| r.strip_suffix(" checks"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("udm_smoke's summary is not `ok: N checks`: {stdout:?}"));
    assert!(n >= 8000, "udm_smoke ran only {n} checks");
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

/// Names of the `#[no_mangle]` functions in `src/ffi.rs` and its modules
/// (`src/ffi/*.rs`).
fn rust_functions() -> Vec<String> {
    let mut src = std::fs::read_to_string(manifest_dir().join("src/ffi.rs")).unwrap();
    let dir = manifest_dir().join("src/ffi");
    let mut modules: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    modules.sort();
    for m in modules
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        src.push_str(&std::fs::read_to_string(m).unwrap());
    }
    let mut v: Vec<String> = src
        .split("#[no_mangle]")
        .skip(1)
        .filter_map(|s| {
            let rest = &s[s.find("fn ")? + 3..];
            Some(rest[..rest.find('(')?].trim().to_string())
        })
        .collect();
    v.sort();
    v
}

/// Names of the functions the header declares (static inline helpers
/// excluded): comments, preprocessor lines and brace contents dropped,
/// then every `name(` statement.
fn header_functions(h: &str) -> Vec<String> {
    let mut code = String::new();
    let mut rest = h;
    while let Some(i) = rest.find("/*") {
        code.push_str(&rest[..i]);
        let end = rest[i..].find("*/").expect("closed comment");
        rest = &rest[i + end + 2..];
    }
    code.push_str(rest);
    let mut flat = String::new();
    let mut depth = 0usize;
    for line in code.lines() {
        let t = line.trim();
        if t.starts_with('#') || t == "extern \"C\" {" {
            continue;
        }
        for c in line.chars() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    flat.push(';');
                }
                _ if depth == 0 => flat.push(c),
                _ => {}
            }
        }
        flat.push(' ');
    }
    let mut v: Vec<String> = flat
        .split(';')
        .filter(|s| !s.contains("static inline") && !s.contains("ASSERT"))
        .filter_map(|s| {
            let before = &s[..s.find('(')?];
            let name = before
                .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()?;
            name.starts_with("unet_").then(|| name.to_string())
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn header_declares_exactly_the_exported_functions() {
    let h = std::fs::read_to_string(manifest_dir().join("../../include/unet.h")).unwrap();
    let rust = rust_functions();
    assert!(
        rust.len() >= 60,
        "only {rust:?} found in src/ffi.rs and src/ffi/"
    );
    assert_eq!(header_functions(&h), rust);
}

#[test]
fn header_status_values_match() {
    let h = std::fs::read_to_string(manifest_dir().join("../../include/unet.h")).unwrap();
    use unet::ffi::*;
    let want = [
        ("UNET_OK", UNET_OK),
        ("UNET_EFULL", UNET_EFULL),
        ("UNET_EBADCHAN", UNET_EBADCHAN),
        ("UNET_EPEERGONE", UNET_EPEERGONE),
        ("UNET_ETOOLARGE", UNET_ETOOLARGE),
        ("UNET_EBADBUF", UNET_EBADBUF),
        ("UNET_ETIMEDOUT", UNET_ETIMEDOUT),
        ("UNET_ETOOSMALL", UNET_ETOOSMALL),
        ("UNET_EREFUSED", UNET_EREFUSED),
        ("UNET_ENOENDPOINT", UNET_ENOENDPOINT),
        ("UNET_EENGINE", UNET_EENGINE),
        ("UNET_EIO", UNET_EIO),
        ("UNET_EINVAL", UNET_EINVAL),
        ("UNET_EREJECTED", UNET_EREJECTED),
        ("UNET_ENOTSUP", UNET_ENOTSUP),
        ("UNET_EQUOTA", UNET_EQUOTA),
        ("UNET_EINUSE", UNET_EINUSE),
        ("UNET_ENOTPOSTED", UNET_ENOTPOSTED),
        ("UNET_EEMPTY", UNET_EEMPTY),
        ("UNET_UDM_MAX_WORDS", UNET_UDM_MAX_WORDS as i32),
        ("UNET_UDM_TICKET_MAX", UNET_UDM_TICKET_MAX as i32),
        ("UNET_UDM_ATOM_DISABLE", UNET_UDM_ATOM_DISABLE as i32),
        (
            "UNET_UDM_ATOM_TIMER_FORCE",
            UNET_UDM_ATOM_TIMER_FORCE as i32,
        ),
        ("UNET_UDM_NO_HANDLER", UNET_UDM_NO_HANDLER),
        ("UNET_UDM_DISPOSE_FAILURE", UNET_UDM_DISPOSE_FAILURE),
        ("UNET_UDM_HANDLER_PANICKED", UNET_UDM_HANDLER_PANICKED),
        ("UNET_EVENT_APPLET_FAULT", UNET_EVENT_APPLET_FAULT as i32),
        (
            "UNET_EVENT_APPLET_DETACHED",
            UNET_EVENT_APPLET_DETACHED as i32,
        ),
        (
            "UNET_EVENT_CHANNEL_OPENED",
            UNET_EVENT_CHANNEL_OPENED as i32,
        ),
        ("UNET_EVENT_PEER_GONE", UNET_EVENT_PEER_GONE as i32),
        ("UNET_RECV_INLINE", UNET_RECV_INLINE as i32),
        ("UNET_INLINE_MAX", UNET_INLINE_MAX as i32),
        ("UNET_MAX_RX_BUFFERS", UNET_MAX_RX_BUFFERS as i32),
        ("UNET_PATH_AUTO", UNET_PATH_AUTO),
        ("UNET_PATH_DIRECT", UNET_PATH_DIRECT),
        ("UNET_PATH_ENGINE", UNET_PATH_ENGINE),
        ("UNET_VI_UNRELIABLE", UNET_VI_UNRELIABLE),
        ("UNET_VI_RELIABLE_DELIVERY", UNET_VI_RELIABLE_DELIVERY),
        ("UNET_VI_RELIABLE_RECEPTION", UNET_VI_RELIABLE_RECEPTION),
        ("UNET_VI_OK", UNET_VI_OK),
        ("UNET_VI_PEER_GONE", UNET_VI_PEER_GONE),
        ("UNET_VI_RECEIVER_NOT_READY", UNET_VI_RECEIVER_NOT_READY),
        ("UNET_VI_TOO_LONG", UNET_VI_TOO_LONG),
        ("UNET_VI_BAD_DESCRIPTOR", UNET_VI_BAD_DESCRIPTOR),
        ("UNET_VI_TIMEOUT", UNET_VI_TIMEOUT),
        ("UNET_VI_BROKEN", UNET_VI_BROKEN),
        ("UNET_VI_CLOSED", UNET_VI_CLOSED),
        ("UNET_VI_QUEUE_SEND", UNET_VI_QUEUE_SEND),
        ("UNET_VI_QUEUE_RECV", UNET_VI_QUEUE_RECV),
        ("UNET_VI_MAX_SEGMENTS", UNET_VI_MAX_SEGMENTS as i32),
        ("UNET_VI_MAX_TRANSFER", UNET_VI_MAX_TRANSFER as i32),
    ];
    // Every ViError has its UNET_VI_* constant, with its number.
    let vi_errors: Vec<(String, i32)> = unet::ViError::ALL
        .iter()
        .map(|e| {
            let name = format!("UNET_VI_{}", e.name().replace('-', "_").to_uppercase());
            (name, *e as i32)
        })
        .collect();
    let want = want
        .iter()
        .map(|(n, v)| (*n, *v))
        .chain(vi_errors.iter().map(|(n, v)| (n.as_str(), *v)));
    for (name, value) in want {
        let line = h
            .lines()
            .find(|l| {
                let t = l.trim_start().trim_start_matches("#define").trim_start();
                t.starts_with(name) && t[name.len()..].starts_with([' ', '='])
            })
            .unwrap_or_else(|| panic!("{name} is not in the header"));
        let t = line.trim_start().trim_start_matches("#define").trim_start();
        let v: String = t[name.len()..]
            .trim_start_matches([' ', '='])
            .chars()
            .take_while(|c| *c == '-' || c.is_ascii_digit())
            .collect();
        assert_eq!(v.parse::<i32>().ok(), Some(value), "{name} in {line:?}");
    }
}

/// The minimal program of `docs/c-abi.md` compiles, links and runs.
#[test]
fn documented_example_runs() {
    require("gcc");
    let doc = std::fs::read_to_string(manifest_dir().join("../../docs/c-abi.md")).unwrap();
    let start = doc.find("```c\n").expect("a C example in docs/c-abi.md") + 5;
    let len = doc[start..].find("```").unwrap();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("unet_doc_example.c");
    std::fs::write(&src, &doc[start..start + len]).unwrap();
    let exe = dir.join("unet_doc_example");
    let lib = static_lib();
    let mut cmd = Command::new("gcc");
    cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(manifest_dir().join("../../include"))
        .arg(&src)
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe);
    let o = cmd.output().expect("run gcc");
    assert!(
        o.status.success(),
        "gcc failed on the documented example:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = run_with_deadline(&mut Command::new(&exe), Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "hello");
}
