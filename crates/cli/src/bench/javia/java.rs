//! The Java side: building the Java ends and the commands that start
//! them.

use std::path::PathBuf;
use std::process::Command;

use super::args::{Args, Kind};
use super::Res;
use crate::jdk::Jdk;

/// How to start the Java ends.
pub(super) struct Java {
    jdk: Jdk,
    classpath: String,
    library: PathBuf,
    /// Javia's VIs confined to their threads (not `--shared-vis`).
    confined: bool,
}

impl Java {
    pub(super) fn prepare(a: &Args) -> Res<Java> {
        let jdk = Jdk::find()?;
        let dir = match &a.java_dir {
            Some(d) => d.clone(),
            None => find_java_dir().ok_or(
                "no java/javia-bench found here or above this program: give --java-dir (the project's java directory)",
            )?,
        };
        let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
        let library = match &a.library {
            Some(l) => l.clone(),
            None => exe.with_file_name("libunet.so"),
        };
        if !library.is_file() {
            return Err(format!(
                "no {} (build it with `cargo build --release -p unet`, or give --library)",
                library.display()
            ));
        }
        if !a.no_build {
            eprintln!(
                "unet bench: building the Java side (mvn package, {})",
                jdk.home.display()
            );
            let out = Command::new("mvn")
                .args(["-B", "-q", "-f"])
                .arg(dir.join("pom.xml"))
                .args(["-pl", "javia-bench", "-am", "package", "-DskipTests"])
                .env("JAVA_HOME", &jdk.home)
                .output()
                .map_err(|e| format!("running mvn (is Maven installed?): {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "mvn package failed:\n{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        let target = dir.join("javia-bench/target");
        let jar = std::fs::read_dir(&target)
            .ok()
            .and_then(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .find(|p| p.extension().is_some_and(|x| x == "jar"))
            })
            .ok_or_else(|| format!("no jar in {} (run without --no-build)", target.display()))?;
        let classpath = format!("{}:{}/lib/*", jar.display(), target.display());
        Ok(Java {
            jdk,
            classpath,
            library,
            confined: !a.shared_vis,
        })
    }

    /// A JVM running `main` from the bench's class path on the library,
    /// with `opts` besides.
    fn jvm(&self, opts: &[&str], main: &str) -> Command {
        let mut c = Command::new(self.jdk.bin("java"));
        c.arg("--enable-native-access=ALL-UNNAMED")
            .args(opts)
            .arg(format!("-Dunet.library={}", self.library.display()))
            .args(["-cp", &self.classpath, main]);
        c
    }

    /// The JVM that measures one downcall ([`Floor`]).
    pub(super) fn floor_command(&self) -> Command {
        self.jvm(&[], "unet.javia.bench.DowncallFloor")
    }

    pub(super) fn command(&self, role: &str, kind: Kind) -> Command {
        // Aeron (Agrona) reaches into these.
        let opens = [
            "--add-opens",
            "java.base/sun.nio.ch=ALL-UNNAMED",
            "--add-opens",
            "java.base/java.nio=ALL-UNNAMED",
            "--add-exports",
            "java.base/jdk.internal.misc=ALL-UNNAMED",
        ];
        let mut c = self.jvm(&opens, "unet.javia.bench.JaviaBench");
        c.args([
            role,
            kind.name(),
            "--confined",
            if self.confined { "true" } else { "false" },
        ]);
        c
    }
}

/// `java/` with `javia-bench/pom.xml`, looked for from the working
/// directory and from this program's directory upwards.
fn find_java_dir() -> Option<PathBuf> {
    let mut starts = vec![std::env::current_dir().ok()?];
    if let Ok(exe) = std::env::current_exe() {
        starts.push(exe);
    }
    for s in starts {
        for d in s.ancestors() {
            let j = d.join("java");
            if j.join("javia-bench/pom.xml").is_file() {
                return Some(j);
            }
        }
    }
    None
}
