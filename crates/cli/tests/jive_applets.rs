//! JIVE applets as data, through the `unet applet` command.
//!
//! `tests/data/jive/run/*.java` are applets whose header lines state what
//! calls return:
//!
//! ```text
//! // expect: METHOD [INT...] => RESULT
//! // expect-jive: [--fuel N|--heap B|--depth D]... METHOD [INT...] => RESULT
//! ```
//!
//! RESULT is an int, `void`, or `fault [TEXT]`: exit 3 with a stderr line
//! `fault: ...` containing TEXT (case-insensitive). `expect:` lines are
//! checked on JIVE (`unet applet run`) and on HotSpot (the reflection harness
//! `data/jive/harness/JiveHarness.java`, where a fault must be the Java
//! exception of the fault JIVE reports, e.g. `ArithmeticException` for
//! JIVE's integer division by zero); `expect-jive:` lines only on JIVE
//! (endless loops, limits). The applets are compiled by `javac` at test
//! time at `--release` 8, 11, 17, 21 and 25 (and the JDK's own release),
//! and the release-8 classes are also byte-patched to class versions 45
//! and 49.
//!
//! `tests/data/jive/reject/*.java` break the subset; each has
//! `// reject: TEXT` lines that `unet applet check` must print in its
//! `FILE: rejected: REASON` line.
//!
//! A JDK >= 22 is found as `scripts/find-jdk` does (`$JAVA_HOME`, then
//! `/usr/lib/jvm/*` and the other standard places).

#[path = "../src/jdk.rs"]
#[allow(dead_code)]
mod jdk;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

const UNET: &str = env!("CARGO_BIN_EXE_unet");

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jive")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn jdk() -> &'static jdk::Jdk {
    static JDK: OnceLock<jdk::Jdk> = OnceLock::new();
    JDK.get_or_init(|| match jdk::Jdk::find() {
        Ok(j) => j,
        Err(e) => panic!("these tests compile applets with javac and need a JDK: {e}"),
    })
}

fn work_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn java_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "java"))
        .collect();
    v.sort();
    v
}

fn stem(p: &Path) -> String {
    p.file_stem().unwrap().to_string_lossy().into_owned()
}

/// `javac [--release N] -sourcepath SP -d OUT FILES...`; panics with javac's
/// output on failure.
fn javac(release: Option<u32>, sourcepath: &Path, out: &Path, files: &[PathBuf]) {
    fs::create_dir_all(out).unwrap();
    let mut c = Command::new(jdk().bin("javac"));
    c.arg("-nowarn").arg("-encoding").arg("UTF-8");
    if let Some(r) = release {
        c.arg("--release").arg(r.to_string());
    }
    c.arg("-sourcepath")
        .arg(sourcepath)
        .arg("-d")
        .arg(out)
        .args(files);
    let o = c.output().expect("run javac");
    assert!(
        o.status.success(),
        "javac --release {release:?} failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[derive(Clone, Debug, PartialEq)]
enum Want {
    Int(i32),
    Void,
    Fault(String),
}

#[derive(Clone, Debug)]
struct Expect {
    class: String,
    jive_only: bool,
    options: Vec<String>,
    method: String,
    args: Vec<String>,
    want: Want,
    line: String,
}

fn parse_expectations(file: &Path) -> Vec<Expect> {
    let text = fs::read_to_string(file).unwrap();
    let mut out = Vec::new();
    for line in text.lines() {
        let (jive_only, rest) = if let Some(r) = line.strip_prefix("// expect: ") {
            (false, r)
        } else if let Some(r) = line.strip_prefix("// expect-jive: ") {
            (true, r)
        } else {
            continue;
        };
        let (call, result) = rest
            .split_once("=>")
            .unwrap_or_else(|| panic!("{}: no `=>` in `{line}`", file.display()));
        let mut words = call.split_whitespace().map(str::to_string).peekable();
        let mut options = Vec::new();
        while words.peek().is_some_and(|w| w.starts_with("--")) {
            options.push(words.next().unwrap());
            options.push(words.next().expect("option value"));
        }
        let method = words.next().expect("method name");
        let args: Vec<String> = words.collect();
        for a in &args {
            a.parse::<i32>()
                .unwrap_or_else(|_| panic!("{}: bad int `{a}` in `{line}`", file.display()));
        }
        let result = result.trim();
        let want = if result == "void" {
            Want::Void
        } else if let Some(t) = result.strip_prefix("fault") {
            Want::Fault(t.trim().to_lowercase())
        } else {
            Want::Int(
                result
                    .parse()
                    .unwrap_or_else(|_| panic!("{}: bad result in `{line}`", file.display())),
            )
        };
        out.push(Expect {
            class: stem(file),
            jive_only,
            options,
            method,
            args,
            want,
            line: line.to_string(),
        });
    }
    assert!(!out.is_empty(), "{} states no expectations", file.display());
    out
}

/// The run/ applets compiled once per test process, in every variant.
struct Compiled {
    /// (variant name, directory of its classes)
    variants: Vec<(String, PathBuf)>,
    expectations: Vec<Expect>,
    /// directory of the default-release classes (with unet/sle/Natives for
    /// HotSpot)
    default_dir: PathBuf,
}

/// Sets the class-file major version (bytes 6..8) to `major`.
fn patch_version(bytes: &mut [u8], major: u16) {
    assert_eq!(&bytes[..4], &[0xCA, 0xFE, 0xBA, 0xBE], "not a class file");
    bytes[4..6].copy_from_slice(&0u16.to_be_bytes());
    bytes[6..8].copy_from_slice(&major.to_be_bytes());
}

fn compiled() -> &'static Compiled {
    static C: OnceLock<Compiled> = OnceLock::new();
    C.get_or_init(|| {
        let dir = work_dir("jive-applets-run");
        let sources = java_files(&data().join("run"));
        let sdk = repo().join("java/applet-sdk/src/main/java");
        let mut expectations = Vec::new();
        for s in &sources {
            expectations.extend(parse_expectations(s));
        }
        let mut variants = Vec::new();
        // javac's default release is its own version: a variant of its own
        // only when newer than the last listed one.
        let default_dir = if jdk().version > 25 {
            let d = dir.join("default");
            javac(None, &sdk, &d, &sources);
            variants.push((format!("javac {} default", jdk().version), d.clone()));
            d
        } else {
            dir.join(format!("release-{}", jdk().version))
        };
        // The releases every test compiles, and the JDK's own (the default
        // classes are those) when it lies between them (22 to 24).
        let mut releases = vec![8u32, 11, 17, 21, 25];
        if jdk().version <= 25 && !releases.contains(&jdk().version) {
            releases.push(jdk().version);
            releases.sort_unstable();
        }
        for r in releases {
            if r > jdk().version {
                continue;
            }
            let out = dir.join(format!("release-{r}"));
            javac(Some(r), &sdk, &out, &sources);
            variants.push((format!("--release {r}"), out));
        }
        // Old class versions: the release-8 classes (StackMapTable and all)
        // relabelled as JDK 1.1 (45) and 1.5 (49) class files.
        for major in [45u16, 49] {
            let out = dir.join(format!("version-{major}"));
            fs::create_dir_all(&out).unwrap();
            for s in &sources {
                let name = format!("{}.class", stem(s));
                let mut b = fs::read(dir.join("release-8").join(&name)).unwrap();
                patch_version(&mut b, major);
                fs::write(out.join(&name), b).unwrap();
            }
            variants.push((format!("release 8 patched to version {major}"), out));
        }
        assert!(
            default_dir.is_dir(),
            "no classes compiled for javac {}'s default release in {}",
            jdk().version,
            default_dir.display()
        );
        Compiled {
            variants,
            expectations,
            default_dir,
        }
    })
}

fn unet(args: &[&str]) -> Output {
    Command::new(UNET)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run unet")
}

/// Checks one expectation on JIVE; `Err` describes a mismatch.
fn check_on_jive(e: &Expect, class_file: &Path, interpret: bool) -> Result<Duration, String> {
    let mut argv: Vec<String> = vec!["applet".into(), "run".into()];
    if interpret {
        argv.push("--interpret".into());
    }
    argv.extend(e.options.iter().cloned());
    argv.push(class_file.display().to_string());
    argv.push(e.method.clone());
    argv.extend(e.args.iter().cloned());
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let t0 = Instant::now();
    let o = unet(&argv);
    let took = t0.elapsed();
    let stdout = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let stderr = String::from_utf8_lossy(&o.stderr).trim().to_string();
    let code = o.status.code();
    let ok = match &e.want {
        Want::Int(v) => code == Some(0) && stdout == v.to_string(),
        Want::Void => code == Some(0) && stdout.is_empty(),
        Want::Fault(t) => {
            code == Some(3)
                && stdout.is_empty()
                && stderr.starts_with("fault: ")
                && stderr.to_lowercase().contains(t.as_str())
        }
    };
    if ok {
        Ok(took)
    } else {
        Err(format!(
            "`{}`: exit {code:?}, stdout `{stdout}`, stderr `{stderr}`",
            e.line
        ))
    }
}

#[test]
fn applets_give_the_expected_results_on_jive_at_every_class_version() {
    let c = compiled();
    // Compiled (the default) at every class version; interpreted (the
    // reference) at the first.
    let mut jobs = Vec::new();
    for (k, (variant, dir)) in c.variants.iter().enumerate() {
        for e in &c.expectations {
            let file = dir.join(format!("{}.class", e.class));
            jobs.push((variant.as_str(), file.clone(), e, false));
            if k == 0 {
                jobs.push((variant.as_str(), file, e, true));
            }
        }
    }
    let failures = Mutex::new(Vec::new());
    let next = Mutex::new(0usize);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap();
                    *n += 1;
                    *n - 1
                };
                let Some((variant, file, e, interpret)) = jobs.get(i) else {
                    break;
                };
                if let Err(m) = check_on_jive(e, file, *interpret) {
                    let how = if *interpret {
                        "interpreted"
                    } else {
                        "compiled"
                    };
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("[{variant}, {how}] {}: {m}", e.class));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} runs differ from the data:\n{}",
        failures.len(),
        jobs.len(),
        failures.join("\n")
    );
    // The data covers what it claims to (so a shrunken data set fails here).
    let n = c.expectations.len();
    assert!(n >= 100, "only {n} expectations");
    assert!(c.variants.len() >= 6, "variants: {:?}", c.variants);
}

/// The Java exception (or error) class HotSpot throws for the fault JIVE
/// reports as `fault: MESSAGE` (JIVE's `Fault` display), or None for a
/// fault with no Java counterpart (fuel, time).
fn java_exception_of(jive_stderr: &str) -> Option<&'static str> {
    let m = jive_stderr.strip_prefix("fault: ")?;
    let m = m.strip_prefix("native method failed: ").unwrap_or(m);
    [
        ("array index ", "java.lang.ArrayIndexOutOfBoundsException"),
        ("null reference", "java.lang.NullPointerException"),
        ("integer division by zero", "java.lang.ArithmeticException"),
        (
            "negative array size",
            "java.lang.NegativeArraySizeException",
        ),
        ("call depth limit exceeded", "java.lang.StackOverflowError"),
        ("heap quota exceeded", "java.lang.OutOfMemoryError"),
    ]
    .into_iter()
    .find(|(p, _)| m.starts_with(p))
    .map(|(_, class)| class)
}

/// The exception class in the harness's `fault: CLASS[: MESSAGE]` line.
fn hotspot_exception(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("fault: ")?;
    Some(rest.split(':').next().unwrap_or(rest).trim())
}

/// Every `expect:` line gives HotSpot's result: the same int or void, and
/// for a fault the Java exception class of the fault JIVE reports for the
/// same call (each fault kind of the data set compared at least once).
#[test]
fn applets_give_the_same_results_on_hotspot() {
    let c = compiled();
    let harness = work_dir("jive-applets-harness");
    javac(
        None,
        &data().join("harness"),
        &harness,
        &[data().join("harness/JiveHarness.java")],
    );
    let both: Vec<&Expect> = c.expectations.iter().filter(|e| !e.jive_only).collect();
    let mut input = String::new();
    for e in &both {
        input.push_str(&format!(
            "{} {} {} {}\n",
            c.default_dir.display(),
            e.class,
            e.method,
            e.args.join(" ")
        ));
    }
    let mut child = Command::new(jdk().bin("java"))
        .arg("-Xss8m")
        .arg("-cp")
        .arg(&harness)
        .arg("JiveHarness")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run java");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "harness failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), both.len(), "harness output:\n{stdout}");
    let mut failures = Vec::new();
    let mut kinds = std::collections::BTreeSet::new();
    for (e, got) in both.iter().zip(&lines) {
        let ok = match &e.want {
            Want::Int(v) => *got == v.to_string(),
            Want::Void => *got == "void",
            Want::Fault(_) => {
                // The same call on JIVE, for its fault kind.
                let mut argv: Vec<String> = vec!["applet".into(), "run".into()];
                argv.extend(e.options.iter().cloned());
                let file = c.default_dir.join(format!("{}.class", e.class));
                argv.push(file.display().to_string());
                argv.push(e.method.clone());
                argv.extend(e.args.iter().cloned());
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                let o = unet(&argv);
                let jive = String::from_utf8_lossy(&o.stderr).trim().to_string();
                let want = java_exception_of(&jive);
                if let Some(w) = want {
                    kinds.insert(w);
                }
                match (want, hotspot_exception(got)) {
                    (Some(w), Some(h)) if w == h => true,
                    (w, _) => {
                        failures.push(format!(
                            "{}: `{}`: JIVE gave `{jive}` (Java: {w:?}), HotSpot `{got}`",
                            e.class, e.line
                        ));
                        continue;
                    }
                }
            }
        };
        if !ok {
            failures.push(format!("{}: `{}`: HotSpot gave `{got}`", e.class, e.line));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The data set covers every fault kind the two share in their
    // expect: lines (so a shrunken data set fails here).
    for k in [
        "java.lang.ArrayIndexOutOfBoundsException",
        "java.lang.NullPointerException",
        "java.lang.ArithmeticException",
        "java.lang.NegativeArraySizeException",
    ] {
        assert!(kinds.contains(k), "no fault compared as {k}: {kinds:?}");
    }
}

#[test]
fn jive_faults_map_to_their_java_exceptions() {
    for (jive, java) in [
        (
            "fault: array index 4 out of bounds for length 4 (in method bounds(I)I at offset 6)",
            Some("java.lang.ArrayIndexOutOfBoundsException"),
        ),
        (
            "fault: native method failed: null reference",
            Some("java.lang.NullPointerException"),
        ),
        (
            "fault: integer division by zero (while initializing)",
            Some("java.lang.ArithmeticException"),
        ),
        (
            "fault: negative array size -3 (in method n(I)I at offset 1)",
            Some("java.lang.NegativeArraySizeException"),
        ),
        (
            "fault: call depth limit exceeded (in method d(I)I at offset 12)",
            Some("java.lang.StackOverflowError"),
        ),
        (
            "fault: heap quota exceeded: 400016 bytes requested, quota 4096",
            Some("java.lang.OutOfMemoryError"),
        ),
        ("fault: out of fuel", None),
        ("error: cannot read", None),
    ] {
        assert_eq!(java_exception_of(jive), java, "{jive}");
    }
    assert_eq!(
        hotspot_exception("fault: java.lang.ArithmeticException: / by zero"),
        Some("java.lang.ArithmeticException")
    );
    assert_eq!(
        hotspot_exception("fault: java.lang.StackOverflowError"),
        Some("java.lang.StackOverflowError")
    );
    assert_eq!(hotspot_exception("7"), None);
}

/// Runs `unet ARGS` with stdout and stderr to files; returns the exit code,
/// stderr, and the CPU time (user + system) the process itself used, which
/// unlike wall-clock time does not grow when other work shares the machine.
#[allow(clippy::zombie_processes)] // reaped by wait4 instead of Child::wait
fn run_timed(argv: &[&str], dir: &Path) -> (Option<i32>, String, Duration) {
    use std::os::unix::process::ExitStatusExt;
    let err_path = dir.join("stderr");
    let child = Command::new(UNET)
        .args(argv)
        .stdin(Stdio::null())
        .stdout(fs::File::create(dir.join("stdout")).unwrap())
        .stderr(fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("run unet");
    let mut status = 0i32;
    // SAFETY: rusage is plain data, zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 reaps our own child into locals (std's handle is not
    // waited on afterwards).
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut ru) };
    assert_eq!(pid, child.id() as libc::pid_t, "wait4");
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let cpu = tv(ru.ru_utime) + tv(ru.ru_stime);
    let code = std::process::ExitStatus::from_raw(status).code();
    (code, fs::read_to_string(err_path).unwrap(), cpu)
}

#[test]
fn an_endless_loop_stops_within_a_second_with_the_default_limits() {
    let c = compiled();
    let (_, dir) = &c.variants[0];
    let file = dir.join("Faults.class");
    let tmp = work_dir("jive-applets-endless");
    for (method, args) in [("spin", &[][..]), ("spinCalls", &["1"][..])] {
        let mut argv = vec!["applet", "run", file.to_str().unwrap(), method];
        argv.extend_from_slice(args);
        let (code, stderr, cpu) = run_timed(&argv, &tmp);
        assert_eq!(code, Some(3), "{method}: {stderr}");
        assert!(
            stderr.starts_with("fault: out of fuel"),
            "{method}: {stderr}"
        );
        // Debug builds interpret many times slower; the bound is for the
        // optimised build the default fuel is calibrated on.
        let limit = if cfg!(debug_assertions) {
            Duration::from_secs(60)
        } else {
            Duration::from_secs(1)
        };
        assert!(cpu < limit, "{method} ran {cpu:?} of CPU time");
    }
}

/// Runs `unet applet check` on files; returns (exit code, FILE → line rest).
fn check(extra: &[&str], files: &[PathBuf]) -> (Option<i32>, BTreeMap<String, String>) {
    let mut argv: Vec<String> = vec!["applet".into(), "check".into()];
    argv.extend(extra.iter().map(|s| s.to_string()));
    argv.extend(files.iter().map(|f| f.display().to_string()));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let o = unet(&argv);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut lines = BTreeMap::new();
    for l in stdout.lines() {
        let f = files
            .iter()
            .map(|f| f.display().to_string())
            .find(|f| l.starts_with(&format!("{f}: ")))
            .unwrap_or_else(|| panic!("line names no given file: `{l}`"));
        lines.insert(f.clone(), l[f.len() + 2..].to_string());
    }
    assert_eq!(lines.len(), files.len(), "output:\n{stdout}");
    (o.status.code(), lines)
}

#[test]
fn the_run_applets_pass_check() {
    let c = compiled();
    let files: Vec<PathBuf> = java_files(&data().join("run"))
        .iter()
        .map(|s| c.default_dir.join(format!("{}.class", stem(s))))
        .collect();
    let (code, lines) = check(&[], &files);
    for (f, l) in &lines {
        assert_eq!(l, "ok", "{f}");
    }
    assert_eq!(code, Some(0));
}

#[test]
fn natives_need_their_domain_granted() {
    let c = compiled();
    let f = c.default_dir.join("NativesUse.class");
    let (code, lines) = check(&["--domain", "other"], std::slice::from_ref(&f));
    assert_eq!(code, Some(2));
    let l = &lines[&f.display().to_string()];
    assert!(l.starts_with("rejected: "), "{l}");
    assert!(l.ends_with("(grant it with --domain test)"), "{l}");
    let (code, _) = check(&["--domain", "other", "--domain", "test"], &[f]);
    assert_eq!(code, Some(0));
}

#[test]
fn subset_violations_are_rejected_with_a_reason() {
    let dir = work_dir("jive-applets-reject");
    let sources = java_files(&data().join("reject"));
    javac(None, &data().join("reject/stubs"), &dir, &sources);
    let mut wanted = BTreeMap::new();
    for s in &sources {
        let text = fs::read_to_string(s).unwrap();
        let subs: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("// reject: "))
            .map(|t| t.trim().to_lowercase())
            .collect();
        assert!(!subs.is_empty(), "{}: no `// reject:` line", s.display());
        wanted.insert(dir.join(format!("{}.class", stem(s))), subs);
    }
    let files: Vec<PathBuf> = wanted.keys().cloned().collect();
    let (code, lines) = check(&[], &files);
    let mut failures = Vec::new();
    for (f, subs) in &wanted {
        let l = &lines[&f.display().to_string()];
        let Some(reason) = l.strip_prefix("rejected: ") else {
            failures.push(format!("{}: `{l}`", f.display()));
            continue;
        };
        for s in subs {
            if !reason.to_lowercase().contains(s.as_str()) {
                failures.push(format!("{}: reason `{reason}` lacks `{s}`", stem(f)));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(code, Some(2));
    assert!(wanted.len() >= 20, "only {} rejection cases", wanted.len());
}

#[test]
fn malformed_class_files_are_rejected() {
    let c = compiled();
    let good = fs::read(c.default_dir.join("IntEdge.class")).unwrap();
    let dir = work_dir("jive-applets-malformed");
    let mut files = Vec::new();
    let mut write = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        fs::write(&p, bytes).unwrap();
        files.push(p);
    };
    write("empty.class", &[]);
    let mut b = good.clone();
    b[0] = 0xCB;
    write("bad-magic.class", &b);
    for major in [44u16, 70, 0xFFFF] {
        let mut b = good.clone();
        patch_version(&mut b, major);
        write(&format!("version-{major}.class"), &b);
    }
    // Truncated at 40 points spread over the file, and one byte short.
    for i in 0..40 {
        let n = good.len() * i / 40;
        write(&format!("truncated-{n}.class"), &good[..n]);
    }
    write("one-short.class", &good[..good.len() - 1]);
    let mut b = good.clone();
    b.extend_from_slice(b"trailing");
    write("trailing.class", &b);
    let (code, lines) = check(&[], &files);
    assert_eq!(code, Some(2));
    for (f, l) in &lines {
        assert!(l.starts_with("rejected: "), "{f}: {l}");
    }
    let version_line = &lines[&dir.join("version-70.class").display().to_string()];
    assert!(version_line.contains("version"), "{version_line}");
    // A missing file is reported on its line too.
    let missing = dir.join("missing.class");
    let (code, lines) = check(&[], std::slice::from_ref(&missing));
    assert_eq!(code, Some(2));
    assert!(lines[&missing.display().to_string()].starts_with("error: "));
    // Java source where its class belongs: an error that says to compile it.
    let source = dir.join("Source.java");
    fs::write(&source, "public class Source {}\n").unwrap();
    let (code, lines) = check(&[], std::slice::from_ref(&source));
    assert_eq!(code, Some(2));
    let line = &lines[&source.display().to_string()];
    assert!(
        line.starts_with("error: ") && line.contains("compile it"),
        "{line}"
    );
    let o = unet(&["applet", "run", source.to_str().unwrap(), "m"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("compile it"));
}

#[test]
fn run_reports_usage_errors_and_rejections_by_exit_code() {
    let c = compiled();
    let f = c.default_dir.join("IntEdge.class");
    let f = f.to_str().unwrap();
    // unknown method, wrong number of arguments: usage errors
    let o = unet(&["applet", "run", f, "noSuchMethod"]);
    assert_eq!(o.status.code(), Some(1));
    let o = unet(&["applet", "run", f, "add", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("takes 2"));
    // an int that does not fit a byte, short or boolean parameter
    let n = c.default_dir.join("Narrow.class");
    let n = n.to_str().unwrap();
    for (method, arg) in [
        ("byteParam", "128"),
        ("shortParam", "-40000"),
        ("boolParam", "2"),
    ] {
        let o = unet(&["applet", "run", n, method, arg]);
        assert_eq!(o.status.code(), Some(1), "{method} {arg}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("must be"));
    }
    // --stats: fuel grows with the work done
    let faults = c.default_dir.join("Faults.class");
    let fuel = |n: &str| -> u64 {
        let o = unet(&[
            "applet",
            "run",
            "--stats",
            faults.to_str().unwrap(),
            "count",
            n,
        ]);
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), n);
        let e = String::from_utf8_lossy(&o.stderr).into_owned();
        // After how each method runs and the compile time.
        assert!(e.contains("compile time: "), "stats: `{e}`");
        let used = e
            .lines()
            .find_map(|l| l.strip_prefix("fuel used: "))
            .and_then(|r| r.split(',').next())
            .unwrap_or_else(|| panic!("stats: `{e}`"));
        used.parse().unwrap()
    };
    let (small, large) = (fuel("10"), fuel("10000"));
    assert!(large > small + 1000, "fuel {small} then {large}");
    // negative arguments are values, not options
    let o = unet(&["applet", "run", f, "sub", "-5", "-7"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "2");
    // a rejected class: exit 2, `rejected:` on stderr
    let dir = work_dir("jive-applets-run-rejected");
    let bad = dir.join("Bad.class");
    fs::write(&bad, b"\xCA\xFE\xBA\xBE").unwrap();
    let o = unet(&["applet", "run", bad.to_str().unwrap(), "f"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("rejected: "));
    for sub in [
        &["applet", "--help"][..],
        &["applet", "run", "--help"],
        &["applet", "check", "--help"],
    ] {
        let o = unet(sub);
        assert_eq!(o.status.code(), Some(0), "{sub:?}");
        assert!(String::from_utf8_lossy(&o.stdout).contains("Usage"));
    }
}
