//! Compiling sample applets from their Java sources for a benchmark run
//! (`unet bench pingpong --figure5`, `stream --figure6`, `overhead`): javac
//! of a JDK 22 or later, for Java 8 with every lint an error, against the
//! applet SDK's sources, into a fresh temporary directory that lives as long
//! as the returned guard.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::jdk::Jdk;

/// A temporary directory, removed on drop unless kept.
pub struct BuildDir {
    pub path: PathBuf,
    keep: bool,
}

impl BuildDir {
    /// A fresh, empty directory `unet-bench-WHAT-PID-N` in the system's
    /// temporary directory; with `keep` it outlives the guard (its path is
    /// printed then).
    pub fn new(what: &str, keep: bool) -> Result<BuildDir, String> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "unet-bench-{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(BuildDir { path, keep })
    }
}

impl Drop for BuildDir {
    fn drop(&mut self) {
        if self.keep {
            eprintln!("[unet bench] kept {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn checkout_dir(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// The sources `NAME.java` of `applets` (default: the checkout's
/// `applets/`) for each of `names`, and the SDK source directory `sdk`
/// (default: the checkout's), each checked to exist.
pub fn sources(
    applets: Option<&Path>,
    sdk: Option<&Path>,
    names: &[&str],
) -> Result<(Vec<PathBuf>, PathBuf), String> {
    let applets = applets.map_or_else(|| checkout_dir("applets"), Path::to_path_buf);
    let sdk = sdk.map_or_else(
        || checkout_dir("java/applet-sdk/src/main/java"),
        Path::to_path_buf,
    );
    let sources: Vec<PathBuf> = names
        .iter()
        .map(|n| applets.join(format!("{n}.java")))
        .collect();
    if let Some(missing) = sources.iter().find(|p| !p.is_file()) {
        return Err(format!(
            "{} not found (use --applets-dir to name the directory holding the applets' sources)",
            missing.display()
        ));
    }
    if !sdk.join("unet/sle/Natives.java").is_file() {
        return Err(format!(
            "{} is not the applet SDK source directory (no unet/sle/Natives.java; use --sdk-dir)",
            sdk.display()
        ));
    }
    Ok((sources, sdk))
}

/// Compiles `files` against the SDK sources in `sdk` into `out`.
pub fn javac(sdk: &Path, out: &Path, files: &[PathBuf]) -> Result<(), String> {
    let jdk = Jdk::find()?;
    let o = Command::new(jdk.bin("javac"))
        .args(["--release", "8", "-Xlint:all,-options", "-Werror"])
        .arg("-sourcepath")
        .arg(sdk)
        .arg("-d")
        .arg(out)
        .args(files)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", jdk.bin("javac").display()))?;
    if !o.status.success() {
        return Err(format!(
            "javac failed ({}):\n{}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(())
}

/// Compiles the sample applets `names` (see [`sources`]); returns the build
/// directory and the class files, in order.
pub fn compile(
    applets: Option<&Path>,
    sdk: Option<&Path>,
    names: &[&str],
) -> Result<(BuildDir, Vec<PathBuf>), String> {
    let (sources, sdk) = sources(applets, sdk, names)?;
    let dir = BuildDir::new("applets", false)?;
    javac(&sdk, &dir.path, &sources)?;
    let classes = names
        .iter()
        .map(|n| dir.path.join(format!("{n}.class")))
        .collect();
    Ok((dir, classes))
}
