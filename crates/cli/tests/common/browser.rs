//! Headless Chromium (Debian's `chromium`) for the tests of web pages:
//! a page's DOM after its scripts ran, and screenshots, with the flags
//! this machine's closed network needs and a time limit.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::TempDir;

/// Debian's Chromium (`chromium` on the path), or a clear failure.
pub fn chromium() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("chromium"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "this test needs headless Chromium (`chromium` on the path): \
                 `apt-get install chromium` (scripts/test installs it)"
            )
        })
}

/// Run Chromium headless on `url` in a window of `window` pixels with
/// `what` (`--screenshot=PATH` or `--dump-dom`) at the end of `budget_ms` of its virtual time (timers
/// run at once, fetches take their real time), its network confined to
/// the page: stdout.
pub fn browse(url: &str, dir: &Path, what: &str, window: (u32, u32), budget_ms: u32) -> String {
    let profile = TempDir::new("chromium-profile");
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            "--force-color-profile=srgb",
        ])
        .arg(format!("--window-size={},{}", window.0, window.1))
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .arg(format!("--user-data-dir={}", profile.0.display()))
        .arg(what)
        .arg(url)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start chromium");
    // Read while it runs: a page's DOM may outgrow a pipe's buffer.
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut out).map(|_| out)
    });
    let limit = Duration::from_secs(90);
    let st = wait(&mut child, limit, &format!("chromium {what}"));
    assert!(st.success(), "chromium {what}: {st}");
    reader.join().unwrap().unwrap()
}

/// A screenshot of `url`: (width, height, RGB pixels).
pub fn screenshot(
    url: &str,
    dir: &Path,
    name: &str,
    window: (u32, u32),
    budget_ms: u32,
) -> (u32, u32, Vec<[u8; 3]>) {
    let path = dir.join(name);
    browse(
        url,
        dir,
        &format!("--screenshot={}", path.display()),
        window,
        budget_ms,
    );
    let file = std::fs::File::open(&path).expect("the screenshot");
    let mut dec = png::Decoder::new(std::io::BufReader::new(file));
    dec.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let n = info.color_type.samples();
    let px = buf[..info.buffer_size()]
        .chunks_exact(n)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    (info.width, info.height, px)
}

/// `child`'s exit within `limit` (killed, and the test failed, after).
pub fn wait(
    child: &mut std::process::Child,
    limit: Duration,
    what: &str,
) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: not done within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
