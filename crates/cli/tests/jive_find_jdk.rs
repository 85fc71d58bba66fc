//! JDK discovery: `scripts/find-jdk` and `src/jdk.rs` (used by the tests and
//! `unet bench jive`) choose the same JDK from the same places, on a tree of
//! fake JDKs (`FIND_JDK_SEARCH` replaces the standard locations).

#[path = "../src/jdk.rs"]
#[allow(dead_code)]
mod jdk;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fake JDK: `bin/java` prints `version` as `java -version` does;
/// `release` holds it too when `release` is true.
fn fake_jdk(root: &Path, name: &str, version: &str, release: bool) -> PathBuf {
    let home = root.join(name);
    fs::create_dir_all(home.join("bin")).unwrap();
    let java = home.join("bin/java");
    fs::write(
        &java,
        format!("#!/bin/sh\necho 'openjdk version \"{version}\" 2026-01-01' >&2\n"),
    )
    .unwrap();
    fs::write(home.join("bin/javac"), "#!/bin/sh\nexit 0\n").unwrap();
    for f in ["bin/java", "bin/javac"] {
        fs::set_permissions(home.join(f), fs::Permissions::from_mode(0o755)).unwrap();
    }
    if release {
        fs::write(
            home.join("release"),
            format!("IMPLEMENTOR=\"Test\"\nJAVA_VERSION=\"{version}\"\n"),
        )
        .unwrap();
    }
    home
}

/// Runs scripts/find-jdk; (exit code, stdout, stderr).
fn script(java_home: Option<&Path>, search: &str) -> (Option<i32>, String, String) {
    let mut c = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/find-jdk"));
    c.env_remove("JAVA_HOME").env("FIND_JDK_SEARCH", search);
    if let Some(h) = java_home {
        c.env("JAVA_HOME", h);
    }
    let o = c.output().expect("run scripts/find-jdk");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).trim().to_string(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The Rust module under the same environment.
fn module(java_home: Option<&Path>, search: &str) -> Result<PathBuf, String> {
    std::env::remove_var("JAVA_HOME");
    if let Some(h) = java_home {
        std::env::set_var("JAVA_HOME", h);
    }
    std::env::set_var("FIND_JDK_SEARCH", search);
    jdk::Jdk::find().map(|j| j.home)
}

fn canon(p: &Path) -> PathBuf {
    p.canonicalize().unwrap()
}

// One test function: it changes this process's environment.
#[test]
fn script_and_module_choose_the_same_jdk() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("jive-find-jdk");
    let _ = fs::remove_dir_all(&root);
    let jdk23 = fake_jdk(&root, "jdk-23", "23.0.1", true);
    let jdk17 = fake_jdk(&root, "jdk-17", "17.0.2", true);
    let jdk26 = fake_jdk(&root, "jdk-26-ea", "26-ea", false); // version from `java -version`
    fake_jdk(&root, "jdk-8", "1.8.0_402", true);
    fs::create_dir_all(root.join("not-a-jdk")).unwrap();
    let all = format!("{}/*", root.display());

    // $JAVA_HOME wins when recent enough, even over a newer one elsewhere.
    let (code, out, _) = script(Some(&jdk23), &all);
    assert_eq!(code, Some(0));
    assert_eq!(canon(Path::new(&out)), canon(&jdk23));
    assert_eq!(canon(&module(Some(&jdk23), &all).unwrap()), canon(&jdk23));

    // Too old a $JAVA_HOME: the newest in the search locations.
    let (code, out, _) = script(Some(&jdk17), &all);
    assert_eq!(code, Some(0));
    assert_eq!(canon(Path::new(&out)), canon(&jdk26));
    assert_eq!(canon(&module(Some(&jdk17), &all).unwrap()), canon(&jdk26));

    // Nothing recent enough: exit 1 naming what was looked at.
    let old = format!("{root}/*17* {root}/*8*", root = root.display());
    let (code, out, err) = script(Some(&root.join("missing")), &old);
    assert_eq!(code, Some(1));
    assert!(out.is_empty());
    for want in [
        "missing",
        "jdk-17 (version 17)",
        "jdk-8 (version 8)",
        ">= 22",
    ] {
        assert!(err.contains(want), "`{want}` not in:\n{err}");
    }
    let e = module(Some(&root.join("missing")), &old).unwrap_err();
    for want in [
        "missing",
        "jdk-17 (version 17)",
        "jdk-8 (version 8)",
        ">= 22",
    ] {
        assert!(e.contains(want), "`{want}` not in:\n{e}");
    }
}
