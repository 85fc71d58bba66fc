//! Compiling sample applets from their Java sources for a benchmark run
//! (`unet bench stream --figure6`): javac of a JDK 22 or later, for Java 8
//! with every lint an error, against the applet SDK's sources, into a fresh
//! temporary directory that lives as long as the returned guard.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::jdk::Jdk;

/// A temporary directory, removed on drop.
pub struct BuildDir(PathBuf);

impl Drop for BuildDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn checkout_dir(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// Compiles `NAME.java` of `applets` (default: the checkout's `applets/`)
/// for each of `names` against the SDK sources in `sdk` (default: the
/// checkout's); returns the build directory and the class files, in order.
pub fn compile(
    applets: Option<&Path>,
    sdk: Option<&Path>,
    names: &[&str],
) -> Result<(BuildDir, Vec<PathBuf>), String> {
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
    let jdk = Jdk::find()?;
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let dir = BuildDir(std::env::temp_dir().join(format!(
        "unet-bench-applets-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(&dir.0).map_err(|e| format!("{}: {e}", dir.0.display()))?;
    let o = Command::new(jdk.bin("javac"))
        .args(["--release", "8", "-Xlint:all,-options", "-Werror"])
        .arg("-sourcepath")
        .arg(&sdk)
        .arg("-d")
        .arg(&dir.0)
        .args(&sources)
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
    let classes = names
        .iter()
        .map(|n| dir.0.join(format!("{n}.class")))
        .collect();
    Ok((dir, classes))
}
