//! The guides' examples (`crates/unet/examples`) run and say what they
//! should: each is started as its own program (as a reader would run it)
//! and its output checked. `cargo test` builds the examples beside the
//! tests; the applet and SPINE examples get their Java classes compiled
//! here against the SDK.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use common::{javac, repo};

/// The example program `name`, built beside this test.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    // target/<profile>/deps/examples-<hash> -> target/<profile>/examples/<name>
    let p = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>")
        .join("examples")
        .join(name);
    assert!(
        p.exists(),
        "{} is not built: `cargo test -p unet` builds the examples (or \
         `cargo build -p unet --examples` with this profile)",
        p.display()
    );
    p
}

/// Run example `name` with `args`: its standard output, after checking
/// it succeeded.
fn run(name: &str, args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(example(name))
        .args(args)
        .output()
        .expect("start the example");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "example {name} failed ({:?}):\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The Java classes the examples load.
fn classes() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("unet-examples-{}", std::process::id()));
        let compiled = javac(
            &dir,
            &[
                repo().join("applets/PingPong.java"),
                repo().join("extensions/Echo.java"),
            ],
            &[],
        );
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in compiled {
            std::fs::write(dir.join(format!("{name}.class")), bytes).unwrap();
        }
        dir
    })
}

#[test]
fn endpoints() {
    let out = run("endpoints", &[]);
    assert!(
        out.contains("b got \"hello over the direct path\""),
        "{out}"
    );
    assert!(out.contains("a got \"and back\""), "{out}");
    assert!(
        out.contains("through the engine\" through the engine"),
        "{out}"
    );
    assert!(
        out.contains("a batch of 8 sent in one call, 8 received"),
        "{out}"
    );
}

#[test]
fn via() {
    let out = run("via", &[]);
    assert!(out.contains("send completed: descriptor 2 Ok(9)"), "{out}");
    assert!(out.contains("the server received \"hello, VI\""), "{out}");
}

#[test]
fn udm() {
    let out = run("udm", &[]);
    assert!(
        out.contains("node 1 summed 1000 numbers to 500500; node 0 got 500500"),
        "{out}"
    );
}

#[test]
fn udm_upcall_latency() {
    let out = run("udm_upcall_latency", &["200".as_ref()]);
    assert!(out.contains("rounds per column"), "{out}");
    assert!(out.contains("one way, upcall (spin)"), "{out}");
}

#[test]
fn applet() {
    let class = classes().join("PingPong.class");
    let out = run("applet", &[class.as_os_str()]);
    assert!(
        out.starts_with("1000 round trips between the applets"),
        "{out}"
    );
    assert!(out.contains(", 0 bad pongs"), "{out}");
}

#[test]
fn spine_echo() {
    let class = classes().join("Echo.class");
    let out = run("spine_echo", &[class.as_os_str()]);
    for h in ["onForward", "onDeliver", "onBulk"] {
        assert!(
            out.lines()
                .any(|l| l.contains(h) && l.contains("1 invocations")),
            "{h} in\n{out}"
        );
    }
}
