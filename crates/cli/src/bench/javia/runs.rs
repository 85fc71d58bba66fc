//! Engines and runs: a path's engines, the two ends of a run, the
//! downcall floor and the figures a ping end prints.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use unet::{Engine, EngineConfig, Session};

use super::args::{Kind, Plan, Where};
use super::java::Java;
use super::Res;
use crate::bench::child::TempDir;

/// The engines of a path: `a` serves the ping end, `b` the pong end (the
/// same engine on the local path).
pub(super) struct Engines {
    _dir: TempDir,
    a_socket: PathBuf,
    b_socket: PathBuf,
    /// Remote: engine B's UDP address, which the ping end connects to.
    b_addr: Option<SocketAddr>,
    _engines: Vec<Engine>,
}

impl Engines {
    pub(super) fn start(w: Where) -> Res<Engines> {
        let dir = TempDir::new()?;
        let start = |name: &str, udp: bool| -> Res<(Engine, PathBuf, Option<SocketAddr>)> {
            let sock = dir.0.join(name);
            let e = Engine::start(EngineConfig {
                control_socket: Some(sock.clone()),
                udp_bind: udp.then(|| SocketAddr::from(([127, 0, 0, 1], 0))),
                ..EngineConfig::default()
            })
            .map_err(|e| format!("starting an engine: {e}"))?;
            let addr = if udp {
                Session::embedded(&e)
                    .map_err(|e| format!("session: {e}"))?
                    .udp_addr()
            } else {
                None
            };
            Ok((e, sock, addr))
        };
        match w {
            Where::Local => {
                let (e, s, _) = start("a", false)?;
                Ok(Engines {
                    _dir: dir,
                    a_socket: s.clone(),
                    b_socket: s,
                    b_addr: None,
                    _engines: vec![e],
                })
            }
            Where::Remote => {
                let (ea, sa, _) = start("a", true)?;
                let (eb, sb, addr) = start("b", true)?;
                Ok(Engines {
                    _dir: dir,
                    a_socket: sa,
                    b_socket: sb,
                    b_addr: Some(addr.ok_or("engine B has no UDP address")?),
                    _engines: vec![ea, eb],
                })
            }
        }
    }
}

/// A started end; killed if still running when dropped.
struct End {
    child: Child,
    /// Standard error, collected by a thread.
    err: Option<std::thread::JoinHandle<String>>,
}

impl End {
    fn start(mut c: Command) -> Res<(End, BufReader<std::process::ChildStdout>)> {
        let mut child = c
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {:?}: {e}", c.get_program()))?;
        let out = BufReader::new(child.stdout.take().expect("piped"));
        let mut err_pipe = child.stderr.take().expect("piped");
        let err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err_pipe.read_to_string(&mut s);
            s
        });
        Ok((
            End {
                child,
                err: Some(err),
            },
            out,
        ))
    }

    /// What it wrote on standard error, less the JDK's warnings about
    /// libraries' use of internal APIs.
    fn errors(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let text = self
            .err
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        text.lines()
            .filter(|l| !l.starts_with("WARNING:"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits for it to exit, at most `limit`.
    fn wait(&mut self, limit: Duration) -> Res<()> {
        let end = Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) if s.success() => return Ok(()),
                Ok(Some(s)) => return Err(format!("exited with {s}: {}", self.errors())),
                Ok(None) if Instant::now() > end => {
                    return Err(format!("still running after {limit:?}: {}", self.errors()))
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(format!("wait: {e}")),
            }
        }
    }
}

impl Drop for End {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The command for one end of a run of `kind`.
fn end_command(kind: Kind, role: &str, java: Option<&Java>) -> Res<Command> {
    if kind == Kind::Rust {
        let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
        let mut c = Command::new(exe);
        c.args(["bench", "__javia-peer", role]);
        return Ok(c);
    }
    Ok(java.ok_or("no Java side prepared")?.command(role, kind))
}

/// Runs one pong and one ping end of `kind`; the ping end's figures, one
/// per size.
pub(super) fn run_pair(
    kind: Kind,
    plan: &Plan,
    e: &Engines,
    java: Option<&Java>,
    tag: u32,
) -> Res<Vec<Point>> {
    let aeron_dir = TempDir::new()?;
    let mut common = plan.args();
    common.extend(["--tag".into(), tag.to_string()]);
    common.extend([
        "--aeron-dir".into(),
        aeron_dir.0.join("aeron").display().to_string(),
    ]);

    let mut pc = end_command(kind, "pong", java)?;
    pc.args(&common).env("UNET_SOCKET", &e.b_socket);
    if plan.pin {
        crate::bench::child::pin_child(&mut pc, 1);
    }
    let (mut pong, mut pong_out) = End::start(pc)?;
    let mut line = String::new();
    let _ = pong_out.read_line(&mut line);
    if line.trim() != "ready" {
        return Err(format!("the pong end did not start: {}", pong.errors()));
    }

    let mut qc = end_command(kind, "ping", java)?;
    qc.args(&common).env("UNET_SOCKET", &e.a_socket);
    if let Some(addr) = e.b_addr {
        qc.args(["--addr", &addr.to_string()]);
    }
    if plan.pin {
        crate::bench::child::pin_child(&mut qc, 0);
    }
    let (mut ping, mut ping_out) = End::start(qc)?;
    let mut text = String::new();
    let _ = ping_out.read_to_string(&mut text);
    ping.wait(Duration::from_secs(600))
        .map_err(|e| format!("the ping end {e}"))?;
    pong.wait(Duration::from_secs(30))
        .map_err(|e| format!("the pong end {e}"))?;
    parse(&text, &plan.sizes)
}

/// What one downcall costs in a JVM on this machine, made as Javia's data
/// path makes them, whatever the callee does (`DowncallFloor`'s `downcall
/// NS` line): the floor under each of Javia's calls.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Floor {
    pub(super) ns: f64,
}

impl Floor {
    pub(super) fn parse(text: &str) -> Option<Floor> {
        text.lines().find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w[..] {
                ["downcall", ns] => Some(Floor {
                    ns: ns.parse().ok()?,
                }),
                _ => None,
            }
        })
    }

    /// Measures it in a JVM of its own (on core 0 with `pin`), before the
    /// runs.
    pub(super) fn measure(java: &Java, pin: bool) -> Res<Floor> {
        let mut c = java.floor_command();
        if pin {
            crate::bench::child::pin_child(&mut c, 0);
        }
        let out = c
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("starting a JVM: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        match Floor::parse(&text) {
            Some(f) if out.status.success() => Ok(f),
            _ => Err(format!(
                "measuring a downcall ({}): {}{}",
                out.status,
                text,
                String::from_utf8_lossy(&out.stderr)
            )),
        }
    }
}

/// The ping end's `rt` and `bw` lines, in the order of `sizes`.
pub(super) fn parse(text: &str, sizes: &[usize]) -> Res<Vec<Point>> {
    let mut pts = vec![Point::default(); sizes.len()];
    let mut seen = vec![(false, false); sizes.len()];
    for l in text.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        let (Some(&what), Some(size)) = (w.first(), w.get(1).and_then(|s| s.parse::<usize>().ok()))
        else {
            continue;
        };
        let Some(i) = sizes.iter().position(|&s| s == size) else {
            continue;
        };
        let v = w.get(2).and_then(|v| v.parse::<f64>().ok());
        match (what, v) {
            ("rt", Some(v)) => {
                pts[i].rt_ns = v;
                seen[i].0 = true;
            }
            ("bw", Some(v)) => {
                pts[i].bw = v;
                seen[i].1 = true;
            }
            _ => {}
        }
    }
    if let Some(i) = seen.iter().position(|&(r, b)| !(r && b)) {
        return Err(format!(
            "no figures for {} bytes in what it printed:\n{text}",
            sizes[i]
        ));
    }
    Ok(pts)
}

/// One run's figures for one size.
#[derive(Clone, Copy, Default)]
pub(super) struct Point {
    pub(super) rt_ns: f64,
    pub(super) bw: f64,
}
