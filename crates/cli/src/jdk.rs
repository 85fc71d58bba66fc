//! Finding a JDK (version 22 or later) at run time, the same way as
//! `scripts/find-jdk`: `$JAVA_HOME` when it qualifies, else the highest
//! version among the standard install locations (`/usr/lib/jvm/*`,
//! `/usr/local/lib/jvm/*`, `/usr/local/*jdk*`, `/opt/*jdk*`, `/opt/java/*`;
//! `$FIND_JDK_SEARCH` replaces them).
//!
//! A directory counts as a JDK when it has `bin/java` and `bin/javac`; its
//! feature version comes from the `release` file (`JAVA_VERSION="25.0.3"`)
//! or else from `bin/java -version`.
//!
//! Also included by the integration tests with `#[path]`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The oldest JDK feature version the project builds and tests with.
pub const MIN_VERSION: u32 = 22;

/// A JDK found on this machine.
#[derive(Debug, Clone)]
pub struct Jdk {
    /// Its home directory (with `bin/java`, `bin/javac`).
    pub home: PathBuf,
    /// Its feature version (25 for "25.0.3").
    pub version: u32,
}

impl Jdk {
    /// Finds a JDK >= [`MIN_VERSION`]; the error names every place looked at.
    pub fn find() -> Result<Jdk, String> {
        find_at_least(MIN_VERSION)
    }

    /// The path of one of its tools, e.g. `bin("javac")`.
    pub fn bin(&self, tool: &str) -> PathBuf {
        self.home.join("bin").join(tool)
    }
}

/// Finds a JDK of at least feature version `min`.
pub fn find_at_least(min: u32) -> Result<Jdk, String> {
    let mut looked: Vec<String> = Vec::new();
    let java_home = std::env::var_os("JAVA_HOME").filter(|v| !v.is_empty());
    if let Some(h) = &java_home {
        let h = PathBuf::from(h);
        match version_of(&h) {
            Some(v) if v >= min => {
                return Ok(Jdk {
                    home: h,
                    version: v,
                })
            }
            Some(v) => looked.push(format!("$JAVA_HOME={} (version {v})", h.display())),
            None => looked.push(format!("$JAVA_HOME={} (not a JDK)", h.display())),
        }
    }
    let mut best: Option<Jdk> = None;
    for dir in candidates() {
        match version_of(&dir) {
            Some(v) => {
                looked.push(format!("{} (version {v})", dir.display()));
                let newer = match &best {
                    Some(b) => v > b.version,
                    None => true,
                };
                if v >= min && newer {
                    best = Some(Jdk {
                        home: dir,
                        version: v,
                    });
                }
            }
            None => looked.push(format!("{} (not a JDK)", dir.display())),
        }
    }
    if let Some(b) = best {
        return Ok(b);
    }
    let mut msg = format!(
        "no JDK with version >= {min} found (looked at $JAVA_HOME{} and {})",
        if java_home.is_none() { " (unset)" } else { "" },
        search_patterns()
    );
    for l in &looked {
        let _ = write!(msg, "\n  {l}");
    }
    msg.push_str("\n  install one (e.g. a Temurin 25 JDK) or set JAVA_HOME to it");
    Err(msg)
}

/// The standard locations, as glob patterns of the forms `DIR/*` and
/// `DIR/*WORD*`; `$FIND_JDK_SEARCH` (space-separated, same forms) replaces
/// them, as for `scripts/find-jdk`.
const STANDARD: &str =
    "/usr/lib/jvm/* /usr/local/lib/jvm/* /usr/local/*jdk* /opt/*jdk* /opt/java/*";

fn search_patterns() -> String {
    std::env::var("FIND_JDK_SEARCH").unwrap_or_else(|_| STANDARD.to_string())
}

/// Directories in the search locations that may hold a JDK.
fn candidates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut push = |p: PathBuf| {
        let canon = p.canonicalize().unwrap_or_else(|_| p.clone());
        if !out
            .iter()
            .any(|o| o.canonicalize().ok().as_ref() == Some(&canon))
        {
            out.push(p);
        }
    };
    for pattern in search_patterns().split_whitespace() {
        let (parent, last) = pattern.rsplit_once('/').unwrap_or((".", pattern));
        let needle = last.trim_matches('*');
        if !last.starts_with('*') {
            // not a pattern: one directory
            let p = PathBuf::from(pattern);
            if p.is_dir() {
                push(p);
            }
            continue;
        }
        let Ok(rd) = std::fs::read_dir(parent) else {
            continue;
        };
        let mut names: Vec<PathBuf> = rd
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains(needle))
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        names.sort();
        for n in names {
            push(n);
        }
    }
    out
}

/// The feature version of the JDK at `home`, or `None` when it is not one.
pub fn version_of(home: &Path) -> Option<u32> {
    if !home.join("bin/java").is_file() || !home.join("bin/javac").is_file() {
        return None;
    }
    let from_release = std::fs::read_to_string(home.join("release"))
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("JAVA_VERSION="))
                .map(|v| v.trim().trim_matches('"').to_string())
        });
    let v = match from_release {
        Some(v) => v,
        None => {
            let out = Command::new(home.join("bin/java"))
                .arg("-version")
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out.stderr).into_owned();
            let start = text.find("version \"")? + "version \"".len();
            let end = text[start..].find('"')? + start;
            text[start..end].to_string()
        }
    };
    feature_version(&v)
}

/// "1.8.0_402" → 8, "25.0.3" → 25, "26-ea" → 26.
fn feature_version(v: &str) -> Option<u32> {
    let v = v.strip_prefix("1.").unwrap_or(v);
    let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The class `name` compiled from `extensions/{path}` of the source
/// checkout (with the JDK found), or the file `class` if given.
pub fn extension_class(
    class: Option<&std::path::Path>,
    path: &str,
    name: &str,
) -> Result<Vec<u8>, String> {
    if let Some(c) = class {
        return std::fs::read(c).map_err(|e| format!("{}: {e}", c.display()));
    }
    let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let src = checkout.join("extensions").join(path);
    if !src.is_file() {
        return Err(format!("{} not found: give --class", src.display()));
    }
    let jdk = Jdk::find()?;
    let dir = std::env::temp_dir().join(format!("unet-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let o = std::process::Command::new(jdk.bin("javac"))
        .args(["--release", "8", "-Xlint:all,-options", "-Werror", "-d"])
        .arg(&dir)
        .arg("-sourcepath")
        .arg(checkout.join("java/applet-sdk/src/main/java"))
        .arg(&src)
        .output()
        .map_err(|e| format!("javac: {e}"))?;
    let r = if o.status.success() {
        let f = format!("{name}.class");
        std::fs::read(dir.join(&f)).map_err(|e| format!("{f}: {e}"))
    } else {
        Err(format!("javac: {}", String::from_utf8_lossy(&o.stderr)))
    };
    let _ = std::fs::remove_dir_all(&dir);
    r
}

#[cfg(test)]
mod tests {
    use super::feature_version;

    #[test]
    fn feature_versions() {
        assert_eq!(feature_version("1.8.0_402"), Some(8));
        assert_eq!(feature_version("25.0.3"), Some(25));
        assert_eq!(feature_version("22"), Some(22));
        assert_eq!(feature_version("26-ea"), Some(26));
        assert_eq!(feature_version("x"), None);
    }
}
