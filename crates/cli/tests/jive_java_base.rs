//! Every class of the JDK's `java.base` module through `unet applet check`:
//! thousands of real, varied class files that JIVE must either accept or
//! reject with a reason, never crash or hang on.
//!
//! The classes are extracted at test time from the JDK found as
//! `scripts/find-jdk` does, with `jimage extract` (JDKs without jmods keep
//! them only in `lib/modules`), and checked in batches.

#[path = "../src/jdk.rs"]
#[allow(dead_code)]
mod jdk;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const UNET: &str = env!("CARGO_BIN_EXE_unet");
/// Files per `unet applet check` (keeps argv well under the OS limit).
const BATCH: usize = 400;
/// One batch may take this long before it counts as a hang.
const BATCH_TIMEOUT: Duration = Duration::from_secs(120);
/// The whole test.
const TOTAL_TIMEOUT: Duration = Duration::from_secs(300);

fn class_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            class_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "class") {
            out.push(p);
        }
    }
}

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

fn check(files: &[PathBuf]) -> Outcome {
    let mut child = Command::new(UNET)
        .args(["applet", "check"])
        .args(files)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run unet");
    // Read the pipes on threads so a full pipe cannot stall the child.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let to = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut so, &mut s).unwrap();
        s
    });
    let te = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut se, &mut s).unwrap();
        s
    });
    let t0 = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > BATCH_TIMEOUT {
            timed_out = true;
            child.kill().unwrap();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Outcome {
        code: status.code(),
        stdout: to.join().unwrap(),
        stderr: te.join().unwrap(),
        timed_out,
    }
}

#[test]
fn every_java_base_class_is_accepted_or_rejected_cleanly() {
    let jdk = jdk::Jdk::find()
        .unwrap_or_else(|e| panic!("this test reads the JDK's java.base classes: {e}"));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("jive-java-base");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let modules = jdk.home.join("lib/modules");
    let o = Command::new(jdk.bin("jimage"))
        .arg("extract")
        .arg("--include")
        .arg("regex:/java\\.base/.*\\.class")
        .arg("--dir")
        .arg(&dir)
        .arg(&modules)
        .output()
        .expect("run jimage");
    assert!(
        o.status.success(),
        "jimage extract {}: {}",
        modules.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    let mut files = Vec::new();
    class_files(&dir.join("java.base"), &mut files);
    files.sort();
    assert!(
        files.len() > 1000,
        "only {} classes extracted from {}",
        files.len(),
        modules.display()
    );

    let t0 = Instant::now();
    let (mut ok, mut rejected) = (0usize, 0usize);
    let mut problems = Vec::new();
    for batch in files.chunks(BATCH) {
        assert!(
            t0.elapsed() < TOTAL_TIMEOUT,
            "checking java.base took over {TOTAL_TIMEOUT:?}"
        );
        let out = check(batch);
        if out.timed_out || !matches!(out.code, Some(0) | Some(2)) {
            // Name the culprits: check the batch's files one by one.
            for f in batch {
                let one = check(std::slice::from_ref(f));
                if one.timed_out || !matches!(one.code, Some(0) | Some(2)) {
                    problems.push(format!(
                        "{}: exit {:?}{} {}",
                        f.display(),
                        one.code,
                        if one.timed_out { " (timed out)" } else { "" },
                        one.stderr.lines().take(3).collect::<Vec<_>>().join(" | ")
                    ));
                }
            }
            if problems.is_empty() {
                problems.push(format!(
                    "a batch failed (exit {:?}, timed out {}) but no file alone: {}",
                    out.code, out.timed_out, out.stderr
                ));
            }
            continue;
        }
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(
            lines.len(),
            batch.len(),
            "one line per file:\n{}",
            out.stdout
        );
        let mut batch_ok = true;
        for (f, l) in batch.iter().zip(&lines) {
            let shown = f.display().to_string();
            let rest = l
                .strip_prefix(&shown)
                .and_then(|r| r.strip_prefix(": "))
                .unwrap_or_else(|| panic!("line `{l}` is not about {shown}"));
            if rest == "ok" {
                ok += 1;
            } else if rest
                .strip_prefix("rejected: ")
                .is_some_and(|r| !r.is_empty())
            {
                rejected += 1;
                batch_ok = false;
            } else {
                problems.push(format!("{shown}: `{rest}`"));
            }
        }
        assert_eq!(
            out.code,
            Some(if batch_ok { 0 } else { 2 }),
            "{}",
            out.stderr
        );
    }
    eprintln!(
        "java.base: {} classes, {ok} ok, {rejected} rejected, in {:?}",
        files.len(),
        t0.elapsed()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(ok + rejected, files.len());
    // java.base is far outside the subset: nearly everything is rejected.
    assert!(
        rejected > files.len() / 2,
        "{ok} accepted, {rejected} rejected"
    );
    let _ = fs::remove_dir_all(&dir);
}
