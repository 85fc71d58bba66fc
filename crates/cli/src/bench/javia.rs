//! `unet bench javia`: the Javia paper's Figures 1-4, regenerated.
//!
//! For message sizes of 4 B to 32 KiB, the round trip and the bandwidth of
//! the raw Rust VIA client (`rust`, posted descriptors in registered
//! memory: the paper's raw C library), Javia-I copying (`copy`), Javia-I
//! with the array handed to the library for the call (`inplace`: the
//! paper pins it), Javia-II (`buffer`), and Aeron's Java IPC (`aeron`) as
//! the peer a Java user would compare with; on the local direct path, and
//! (all but Aeron IPC) between two engines over UDP loopback.
//!
//! Each run starts two processes, the `pong` end first (it listens, and
//! says `ready`) and then the `ping` end; both follow the same plan (see
//! `java/javia-bench`'s `JaviaBench`, which the Rust end, `unet bench
//! __javia-peer`, mirrors): per size, `--warmup` untimed round trips (and
//! more until `--warm-ms` passed) and `--iters` timed ones (ping prints the
//! median; an empty message then ends the round trips), then
//! `--warm-bursts` untimed (the Java ends go on until neither JVM compiled
//! anything for 300 ms: the pong end says so in its acknowledgement's
//! length) and `--reps` timed bursts of `--bytes` (64 to 100 000 messages)
//! answered by an acknowledgement (ping prints the median bytes per
//! second). The last
//! echoed message of each size is checked against what was sent. Runs
//! alternate the kinds (rust, copy, inplace, buffer, aeron, rust, …) so
//! that each sees the same noise; the figures are medians over runs.
//!
//! Before the local runs, a JVM of its own measures what one downcall costs
//! here, made as Javia's data path makes them (`DowncallFloor`): printed
//! under the Javia-I target beside the room it leaves above the Rust
//! client, as the floor under Javia-I's calls (Javia-II reads and writes a
//! local VI's ring itself, with no call per message).
//!
//! Before each size's timed round trips the Java ends also wait for their
//! JVM's JIT to settle (round trips until it has compiled nothing for 300
//! ms): a path whose branches change with the size is recompiled in steps
//! for up to a second or two.
//!
//! This process runs the engines: one embedded engine with a control
//! socket for the local path; two, each on UDP loopback with a control
//! socket of its own, for the remote path (ping's end talks to engine A,
//! pong's to engine B). The Java ends are built with Maven first
//! (`java/javia-bench`, with Aeron from Maven Central) unless `--no-build`.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use serde_json::{json, Value};
use unet::{Engine, EngineConfig, MemRegion, Session, Vi, ViAttributes, ViSeg};

use super::child::TempDir;
use super::plot::{self, Figure, Scale, Series};
use super::report::{self, Progress};
use super::stats::{self, fmt_size, median_f64};
use crate::jdk::Jdk;

type Res<T> = Result<T, String>;

/// The Javia paper's Figures 1-4: round trip and bandwidth of Javia-I,
/// Javia-II, the raw Rust VIA client and Aeron IPC.
#[derive(clap::Args)]
#[command(after_help = "\
Ratios are to the raw Rust client measured in the same invocation (round \
trip: lower is better; bandwidth: higher is better). Targets: Javia-II 64 B \
round trip <= 1.1x rust and below Aeron IPC; Javia-I (copy) 64 B round trip \
<= 1.3x rust; Javia-II 4 KiB bandwidth >= 0.95x rust. Under the Javia-I \
target: what one downcall costs in a JVM here (measured first, in a JVM of \
its own), against the room the target leaves. The SVG figures go to \
--out (figure1-local.svg ... figure4-remote.svg), with the paper's numbers \
(300 MHz Pentium-II, GigaNet cards) as points beside ours.")]
pub struct Args {
    /// Message sizes (comma list; 4, 64, 1K, 32K forms; 1 byte to 32 KiB).
    #[arg(long, value_delimiter = ',', value_parser = stats::parse_size,
          default_value = "4,16,64,256,1K,4K,16K,32K")]
    pub sizes: Vec<usize>,
    /// What to measure (comma list).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "rust,copy,inplace,buffer,aeron"
    )]
    pub kinds: Vec<Kind>,
    /// The local direct path, two engines over UDP loopback, or both.
    #[arg(long, value_enum, default_value = "both")]
    pub path: PathSel,
    /// Runs of each kind, interleaved [default: 3; 1 with --quick].
    #[arg(long)]
    pub runs: Option<usize>,
    /// Timed round trips per size up to 4 KiB (fewer above) [default:
    /// 20000; 300 with --quick].
    #[arg(long)]
    pub iters: Option<usize>,
    /// Untimed round trips before each size's (five times as many before
    /// the first: the JIT compiles meanwhile) [default: 10000; 200 with
    /// --quick].
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Timed bandwidth bursts per size [default: 5; 2 with --quick].
    #[arg(long)]
    pub reps: Option<usize>,
    /// Least time the untimed round trips of each size take, in
    /// milliseconds (five times as long before the first size): a JVM
    /// compiles its round-trip path for a few tens of milliseconds, in
    /// steps, and until then a round trip takes up to ten times as long;
    /// the ping end goes on past `--warmup` round trips until this much
    /// time passed [default: 100; 0 with --quick].
    #[arg(long)]
    pub warm_ms: Option<u64>,
    /// Untimed bursts before each size's timed ones: a JVM's burst loop
    /// runs in its first compilations for a few dozen bursts; the Java
    /// ends then go on until neither JVM compiled anything for 300 ms
    /// [default: 20; 1 with --quick].
    #[arg(long)]
    pub warm_bursts: Option<usize>,
    /// Bytes in one bandwidth burst (at least 64 messages; the paper sends
    /// 15 Mbytes) [default: 15000000; 1000000 with --quick].
    #[arg(long)]
    pub bytes: Option<u64>,
    /// Receivers leave the messages they receive unread. By default the
    /// ping end and the bandwidth receiver read each cache line of every
    /// message (a sum of a byte of each), as a program that receives
    /// data does: Aeron hands a message over where it lies in its log, and
    /// without a read its ping never touches a message's bytes, where a
    /// VI places every message into a posted buffer (and the echoing end
    /// reads it either way).
    #[arg(long)]
    pub unread: bool,
    /// Few, short runs: checks that everything works, measures little.
    #[arg(long)]
    pub quick: bool,
    /// One JSON object per line instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Directory for the SVG figures.
    #[arg(long, default_value = "javia-figures")]
    pub out: PathBuf,
    /// The project's `java` directory [default: found from here or from
    /// this program's location].
    #[arg(long)]
    pub java_dir: Option<PathBuf>,
    /// libunet.so for Javia [default: beside this program].
    #[arg(long)]
    pub library: Option<PathBuf>,
    /// Use the Java classes as built; do not run Maven first.
    #[arg(long)]
    pub no_build: bool,
    /// Javia's VIs shared between threads, a lock taken on every call
    /// (Javia's default), instead of confined to the one thread that
    /// drives each end (`ViAttributes.setConfined`, no lock; the Rust
    /// client, owned by one thread, takes none either).
    #[arg(long)]
    pub shared_vis: bool,
    /// Runs the ping end on core 0 and the pong end on core 1, every
    /// thread of each (a JVM's compiler and collector threads share its
    /// end's core), as `unet bench via --pin` does.
    #[arg(long)]
    pub pin: bool,
}

/// What one run measures.
#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
pub enum Kind {
    /// The raw Rust VIA client: posted descriptors in registered memory.
    Rust,
    /// Javia-I: byte arrays copied into Javia's buffers.
    Copy,
    /// Javia-I: byte arrays handed to the library for the call.
    Inplace,
    /// Javia-II: registered buffers, no copy in Java.
    Buffer,
    /// Aeron's Java IPC (local path only).
    Aeron,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Rust => "rust",
            Kind::Copy => "copy",
            Kind::Inplace => "inplace",
            Kind::Buffer => "buffer",
            Kind::Aeron => "aeron",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Kind::Rust => "raw Rust VIA client",
            Kind::Copy => "Javia-I (copy)",
            Kind::Inplace => "Javia-I (in place)",
            Kind::Buffer => "Javia-II",
            Kind::Aeron => "Aeron IPC",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
pub enum PathSel {
    Local,
    Remote,
    Both,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Where {
    Local,
    Remote,
}

impl Where {
    fn name(self) -> &'static str {
        match self {
            Where::Local => "local",
            Where::Remote => "remote",
        }
    }
}

/// The plan both ends of a run follow.
struct Plan {
    sizes: Vec<usize>,
    iters: usize,
    warmup: usize,
    reps: usize,
    warm_bursts: usize,
    warm_ms: u64,
    bytes: u64,
    /// Receivers read each cache line of every message (not `--unread`).
    read: bool,
    /// Ping on core 0, pong on core 1 (not passed to the ends).
    pin: bool,
}

impl Plan {
    fn args(&self) -> Vec<String> {
        let sizes: Vec<String> = self.sizes.iter().map(|s| s.to_string()).collect();
        vec![
            "--sizes".into(),
            sizes.join(","),
            "--iters".into(),
            self.iters.to_string(),
            "--warmup".into(),
            self.warmup.to_string(),
            "--reps".into(),
            self.reps.to_string(),
            "--warm-bursts".into(),
            self.warm_bursts.to_string(),
            "--warm-ms".into(),
            self.warm_ms.to_string(),
            "--bytes".into(),
            self.bytes.to_string(),
            "--read".into(),
            self.read.to_string(),
        ]
    }
}

/// One run's figures for one size.
#[derive(Clone, Copy, Default)]
struct Point {
    rt_ns: f64,
    bw: f64,
}

pub fn run(a: Args) -> ExitCode {
    report::finish(bench(a))
}

fn bench(a: Args) -> Res<()> {
    if a.sizes.is_empty() || a.sizes.iter().any(|&s| s == 0 || s > 32 * 1024) {
        return Err("--sizes: each between 1 byte and 32 KiB".into());
    }
    if a.kinds.is_empty() {
        return Err("--kinds: name at least one".into());
    }
    if a.pin && std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return Err("--pin: needs two cores (ping on core 0, pong on core 1)".into());
    }
    let q = a.quick;
    let plan = Plan {
        sizes: a.sizes.clone(),
        iters: a.iters.unwrap_or(if q { 300 } else { 20_000 }),
        warmup: a.warmup.unwrap_or(if q { 200 } else { 10_000 }),
        reps: a.reps.unwrap_or(if q { 2 } else { 5 }).max(1),
        warm_bursts: a.warm_bursts.unwrap_or(if q { 1 } else { 20 }),
        warm_ms: a.warm_ms.unwrap_or(if q { 0 } else { 100 }),
        pin: a.pin,
        read: !a.unread,
        bytes: a.bytes.unwrap_or(if q { 1_000_000 } else { 15_000_000 }),
    };
    let runs = a.runs.unwrap_or(if q { 1 } else { 3 }).max(1);
    let java_kinds = a.kinds.iter().any(|k| *k != Kind::Rust);
    let java = if java_kinds {
        Some(Java::prepare(&a)?)
    } else {
        None
    };
    report::warn_if_busy();
    let prog = Progress::new();
    // The floor under Javia's local figures: what one downcall costs (not
    // measured for Aeron alone, which makes none).
    let javia = a
        .kinds
        .iter()
        .any(|k| matches!(k, Kind::Copy | Kind::Inplace | Kind::Buffer));
    let floor = match &java {
        Some(j) if javia && a.path != PathSel::Remote => {
            prog.show("measuring one downcall");
            Some(Floor::measure(j, plan.pin)?)
        }
        _ => None,
    };
    let paths: &[Where] = match a.path {
        PathSel::Local => &[Where::Local],
        PathSel::Remote => &[Where::Remote],
        PathSel::Both => &[Where::Local, Where::Remote],
    };
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let mut tables = Vec::new();
    for &w in paths {
        let kinds: Vec<Kind> = a
            .kinds
            .iter()
            .copied()
            .filter(|k| !(w == Where::Remote && *k == Kind::Aeron))
            .collect();
        let engines = Engines::start(w)?;
        // results[kind][run][size]
        let mut results = vec![Vec::new(); kinds.len()];
        let mut tag = 7100;
        for r in 0..runs {
            for (i, &k) in kinds.iter().enumerate() {
                prog.show(&format!("{}: {} run {}/{runs}", w.name(), k.label(), r + 1));
                tag += 1;
                let pts = run_pair(k, &plan, &engines, java.as_ref(), tag)
                    .map_err(|e| format!("{} ({}): {e}", k.label(), w.name()))?;
                results[i].push(pts);
            }
        }
        prog.clear();
        let mut t = Table::new(w, &kinds, &plan.sizes, &results);
        t.floor = floor.filter(|_| w == Where::Local);
        if a.json {
            t.json();
        } else {
            t.print();
        }
        t.figures(&a.out)?;
        tables.push(t);
    }
    if !a.json {
        for t in &tables {
            t.targets();
        }
        println!(
            "figures: {}/figure[1-4]-{{local,remote}}.svg",
            a.out.display()
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The Java side

/// How to start the Java ends.
struct Java {
    jdk: Jdk,
    classpath: String,
    library: PathBuf,
    /// Javia's VIs confined to their threads (not `--shared-vis`).
    confined: bool,
}

impl Java {
    fn prepare(a: &Args) -> Res<Java> {
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
    fn floor_command(&self) -> Command {
        self.jvm(&[], "unet.javia.bench.DowncallFloor")
    }

    fn command(&self, role: &str, kind: Kind) -> Command {
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

// ---------------------------------------------------------------------------
// Engines and runs

/// The engines of a path: `a` serves the ping end, `b` the pong end (the
/// same engine on the local path).
struct Engines {
    _dir: TempDir,
    a_socket: PathBuf,
    b_socket: PathBuf,
    /// Remote: engine B's UDP address, which the ping end connects to.
    b_addr: Option<SocketAddr>,
    _engines: Vec<Engine>,
}

impl Engines {
    fn start(w: Where) -> Res<Engines> {
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
fn run_pair(
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
        super::child::pin_child(&mut pc, 1);
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
        super::child::pin_child(&mut qc, 0);
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
struct Floor {
    ns: f64,
}

impl Floor {
    fn parse(text: &str) -> Option<Floor> {
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
    fn measure(java: &Java, pin: bool) -> Res<Floor> {
        let mut c = java.floor_command();
        if pin {
            super::child::pin_child(&mut c, 0);
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
fn parse(text: &str, sizes: &[usize]) -> Res<Vec<Point>> {
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

// ---------------------------------------------------------------------------
// Results

/// A path's medians: `rt[k][s]` in microseconds, `bw[k][s]` in bytes/s.
struct Table {
    w: Where,
    kinds: Vec<Kind>,
    sizes: Vec<usize>,
    rt: Vec<Vec<f64>>,
    bw: Vec<Vec<f64>>,
    rt_runs: Vec<Vec<Vec<f64>>>,
    bw_runs: Vec<Vec<Vec<f64>>>,
    /// What one downcall costs (measured for the local path).
    floor: Option<Floor>,
}

/// The paper's numbers (two 300 MHz Pentium-II hosts, GigaNet cards):
/// (figure, series, size, round trip in µs or bandwidth in MB/s).
const PAPER: &[(u8, &str, usize, f64)] = &[
    (1, "raw C VIA", 4, 18.0),
    (1, "Javia-I (copy)", 4, 22.0),
    (1, "Javia-I (pinned)", 4, 32.0),
    (3, "Javia-II", 4, 21.0),
    (2, "Javia-I pinned = copy (crossover)", 7000, 0.0),
    (4, "Javia-II", 4096, 95.0),
];

impl Table {
    fn new(w: Where, kinds: &[Kind], sizes: &[usize], results: &[Vec<Vec<Point>>]) -> Table {
        let runs = |k: usize, s: usize, f: fn(&Point) -> f64| -> Vec<f64> {
            results[k].iter().map(|r| f(&r[s])).collect()
        };
        let mut t = Table {
            w,
            kinds: kinds.to_vec(),
            sizes: sizes.to_vec(),
            rt: vec![],
            bw: vec![],
            rt_runs: vec![],
            bw_runs: vec![],
            floor: None,
        };
        for k in 0..kinds.len() {
            let rr: Vec<Vec<f64>> = (0..sizes.len())
                .map(|s| runs(k, s, |p| p.rt_ns / 1000.0))
                .collect();
            let br: Vec<Vec<f64>> = (0..sizes.len()).map(|s| runs(k, s, |p| p.bw)).collect();
            t.rt.push(rr.iter().map(|v| median_f64(v)).collect());
            t.bw.push(br.iter().map(|v| median_f64(v)).collect());
            t.rt_runs.push(rr);
            t.bw_runs.push(br);
        }
        t
    }

    fn index(&self, k: Kind) -> Option<usize> {
        self.kinds.iter().position(|&x| x == k)
    }

    fn size_index(&self, s: usize) -> Option<usize> {
        self.sizes.iter().position(|&x| x == s)
    }

    /// Ratio of kind `k` to the Rust client at size index `s`.
    fn vs_rust(&self, v: &[Vec<f64>], k: usize, s: usize) -> Option<f64> {
        let r = self.index(Kind::Rust)?;
        (v[r][s] > 0.0).then(|| v[k][s] / v[r][s])
    }

    /// As [`Table::vs_rust`], paired: the median over runs of each run's
    /// figure against the Rust client's run of the same round (run just
    /// before or after it), so that a run of the host's other placement
    /// (round trips change 2-3x between them) is compared within itself.
    fn vs_rust_paired(&self, runs: &[Vec<Vec<f64>>], k: usize, s: usize) -> Option<f64> {
        let r = self.index(Kind::Rust)?;
        stats::paired_ratio(&runs[k][s], &runs[r][s])
    }

    /// Kind `k`'s round trips against Aeron IPC's of the same round
    /// (the median of the runs' ratios), as [`Self::vs_rust_paired`].
    fn rt_vs_aeron_paired(&self, k: usize, s: usize) -> Option<f64> {
        let a = self.index(Kind::Aeron)?;
        stats::paired_ratio(&self.rt_runs[k][s], &self.rt_runs[a][s])
    }

    fn print(&self) {
        println!(
            "\n{} path: round trip (us, median; x = / rust)",
            self.w.name()
        );
        let mut head = format!("{:>8}", "size");
        for k in &self.kinds {
            head += &format!(" {:>19}", k.label());
        }
        println!("{head}");
        for s in 0..self.sizes.len() {
            let mut l = format!("{:>8}", fmt_size(self.sizes[s]));
            for k in 0..self.kinds.len() {
                let x = self
                    .vs_rust(&self.rt, k, s)
                    .filter(|_| self.kinds[k] != Kind::Rust)
                    .map_or(String::new(), |x| format!(" ({x:.2}x)"));
                l += &format!(" {:>19}", format!("{:.3}{x}", self.rt[k][s]));
            }
            println!("{l}");
        }
        println!(
            "{} path: bandwidth (MB/s, median; x = / rust)",
            self.w.name()
        );
        println!("{head}");
        for s in 0..self.sizes.len() {
            let mut l = format!("{:>8}", fmt_size(self.sizes[s]));
            for k in 0..self.kinds.len() {
                let x = self
                    .vs_rust(&self.bw, k, s)
                    .filter(|_| self.kinds[k] != Kind::Rust)
                    .map_or(String::new(), |x| format!(" ({x:.2}x)"));
                l += &format!(" {:>19}", format!("{:.0}{x}", self.bw[k][s] / 1e6));
            }
            println!("{l}");
        }
    }

    fn json(&self) {
        for (k, kind) in self.kinds.iter().enumerate() {
            for (s, &size) in self.sizes.iter().enumerate() {
                let row: Value = json!({
                    "bench": "javia",
                    "path": self.w.name(),
                    "series": kind.name(),
                    "label": kind.label(),
                    "size": size,
                    "rt_us": self.rt[k][s],
                    "rt_us_runs": self.rt_runs[k][s],
                    "rt_vs_rust": self.vs_rust(&self.rt, k, s),
                    "rt_vs_rust_paired": self.vs_rust_paired(&self.rt_runs, k, s),
                    "rt_vs_aeron_paired": self.rt_vs_aeron_paired(k, s),
                    "mb_per_s": self.bw[k][s] / 1e6,
                    "mb_per_s_runs": self.bw_runs[k][s].iter().map(|b| b / 1e6).collect::<Vec<_>>(),
                    "bw_vs_rust": self.vs_rust(&self.bw, k, s),
                    "bw_vs_rust_paired": self.vs_rust_paired(&self.bw_runs, k, s),
                    "figures": figures_of(*kind),
                });
                println!("{row}");
            }
        }
        if let Some(f) = self.floor {
            println!(
                "{}",
                json!({"bench": "javia", "path": self.w.name(), "series": "downcall",
                       "label": "one downcall to a trivial function", "ns": f.ns})
            );
        }
        if self.w == Where::Local {
            for &(fig, series, size, v) in PAPER {
                let (rt, bw) = if fig % 2 == 1 {
                    (Some(v), None)
                } else {
                    (None, Some(v))
                };
                println!(
                    "{}",
                    json!({"bench": "javia", "source": "paper", "figure": fig, "series": series,
                           "size": size, "rt_us": rt, "mb_per_s": bw})
                );
            }
        }
    }

    /// The crossover of Figure 2: the smallest size from which the in-place
    /// send's bandwidth is at least the copying one's at every larger size.
    fn crossover(&self) -> Option<usize> {
        let (c, p) = (self.index(Kind::Copy)?, self.index(Kind::Inplace)?);
        let mut from = None;
        for s in (0..self.sizes.len()).rev() {
            if self.bw[p][s] >= self.bw[c][s] {
                from = Some(self.sizes[s]);
            } else {
                break;
            }
        }
        from
    }

    fn targets(&self) {
        // The value, its ratio of medians and the paired ratio.
        let at = |k: Kind, size: usize, rt: bool| -> Option<(f64, f64, String)> {
            let (ki, si) = (self.index(k)?, self.size_index(size)?);
            let (v, runs) = if rt {
                (&self.rt, &self.rt_runs)
            } else {
                (&self.bw, &self.bw_runs)
            };
            let paired = self
                .vs_rust_paired(runs, ki, si)
                .map_or(String::new(), |p| format!(" (paired by run {p:.2}x)"));
            Some((v[ki][si], self.vs_rust(v, ki, si)?, paired))
        };
        let rust = |size: usize, rt: bool| at(Kind::Rust, size, rt).map(|(v, _, _)| v);
        println!("\n{} path, against the issue's targets:", self.w.name());
        if let Some((v, x, p)) = at(Kind::Buffer, 64, true) {
            let aeron = at(Kind::Aeron, 64, true).map(|(a, _, _)| a);
            // Paired by run as the ratios to the Rust client are.
            let vs_aeron = self
                .index(Kind::Buffer)
                .zip(self.size_index(64))
                .and_then(|(k, s)| self.rt_vs_aeron_paired(k, s))
                .map_or(String::new(), |r| format!(", {r:.2}x it paired by run"));
            println!(
                "  Javia-II 64 B round trip {v:.3} us = {x:.2}x rust{p} (target <= 1.1){}",
                aeron.map_or(String::new(), |a| format!(
                    "; Aeron IPC {a:.3} us{vs_aeron} (target: below it: {})",
                    if v < a { "yes" } else { "no" }
                ))
            );
        }
        if let Some((v, x, p)) = at(Kind::Copy, 64, true) {
            println!(
                "  Javia-I (copy) 64 B round trip {v:.3} us = {x:.2}x rust{p} (target <= 1.3)"
            );
            // Javia-II reads and writes a local VI's ring itself; Javia-I
            // calls the library: what its calls alone cost against what
            // the target leaves above the Rust client.
            if let (Some(f), Some(r)) = (self.floor, rust(64, true)) {
                println!(
                    "    under it: one downcall costs {:.1} ns in a JVM here; Javia-I's round \
                     trip makes at least 4 (each end takes the message and sends the next): \
                     {:.0} ns of the {:.0} ns that 1.3x rust leaves",
                    f.ns,
                    4.0 * f.ns,
                    0.3 * r * 1000.0
                );
            }
        }
        if let Some((v, x, p)) = at(Kind::Buffer, 4096, false) {
            println!(
                "  Javia-II 4 KiB bandwidth {:.0} MB/s = {x:.2}x rust{p} (target >= 0.95)",
                v / 1e6
            );
        }
        match self.crossover() {
            Some(s) => println!(
                "  Javia-I in place is at least as fast as copying from {} on (the paper: above ~7000 B)",
                fmt_size(s)
            ),
            None if self.index(Kind::Copy).is_some() && self.index(Kind::Inplace).is_some() => {
                println!("  Javia-I in place is slower than copying at the largest size")
            }
            None => {}
        }
    }

    fn figures(&self, dir: &Path) -> Res<()> {
        let specs: [(u8, &str, &[Kind]); 4] = [
            (
                1,
                "round trip",
                &[Kind::Rust, Kind::Copy, Kind::Inplace, Kind::Aeron],
            ),
            (
                2,
                "bandwidth",
                &[Kind::Rust, Kind::Copy, Kind::Inplace, Kind::Aeron],
            ),
            (
                3,
                "round trip",
                &[Kind::Rust, Kind::Copy, Kind::Buffer, Kind::Aeron],
            ),
            (
                4,
                "bandwidth",
                &[Kind::Rust, Kind::Copy, Kind::Buffer, Kind::Aeron],
            ),
        ];
        for (fig, what, kinds) in specs {
            let rt = fig % 2 == 1;
            let lines: Vec<Series> = kinds
                .iter()
                .filter_map(|&k| {
                    let ki = self.index(k)?;
                    let v = if rt { &self.rt[ki] } else { &self.bw[ki] };
                    Some(Series {
                        name: k.label().to_string(),
                        points: self
                            .sizes
                            .iter()
                            .zip(v)
                            .map(|(&s, &y)| (s as f64, if rt { y } else { y / 1e6 }))
                            .collect(),
                    })
                })
                .collect();
            if lines.is_empty() {
                continue;
            }
            let paper = PAPER
                .iter()
                .filter(|p| p.0 == fig && p.3 > 0.0)
                .map(|&(_, name, size, v)| Series {
                    name: format!("paper: {name}"),
                    points: vec![(size as f64, v)],
                })
                .collect();
            let title = format!(
                "Figure {fig}: {what}, {} path ({})",
                self.w.name(),
                if fig <= 2 { "Javia-I" } else { "Javia-II" }
            );
            let f = Figure {
                title: &title,
                x_desc: "message size (bytes)",
                y_desc: if rt {
                    "round trip (us)"
                } else {
                    "bandwidth (MB/s)"
                },
                lines,
                paper,
                scale: Scale::LogLog,
            };
            plot::write_svg(&f, &dir.join(format!("figure{fig}-{}.svg", self.w.name())))?;
        }
        Ok(())
    }
}

fn figures_of(k: Kind) -> &'static [u8] {
    match k {
        Kind::Rust | Kind::Copy | Kind::Aeron => &[1, 2, 3, 4],
        Kind::Inplace => &[1, 2],
        Kind::Buffer => &[3, 4],
    }
}

// ---------------------------------------------------------------------------
// The Rust end (`unet bench __javia-peer`)

/// One end of a `unet bench javia` run with the raw Rust VIA client
/// (internal): the same plan and output as `JaviaBench`.
#[derive(clap::Args)]
pub struct PeerArgs {
    role: String,
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    #[arg(long)]
    iters: usize,
    #[arg(long)]
    warmup: usize,
    #[arg(long)]
    reps: usize,
    #[arg(long)]
    warm_bursts: usize,
    #[arg(long)]
    warm_ms: u64,
    #[arg(long)]
    bytes: u64,
    #[arg(long)]
    tag: u64,
    #[arg(long)]
    addr: Option<SocketAddr>,
    #[arg(long)]
    aeron_dir: Option<String>,
    /// Read each cache line of every message received (the ping end and
    /// the bandwidth receiver).
    #[arg(long, action = clap::ArgAction::Set)]
    read: bool,
}

pub fn run_peer(a: PeerArgs) -> ExitCode {
    report::finish(peer(a))
}

/// Receives kept posted, sends kept outstanding at most.
const POSTED: usize = 16;
const PATIENCE: Duration = Duration::from_secs(30);

fn pattern(size: usize, i: usize) -> u8 {
    (i * 7 + size) as u8
}

fn iters_of(iters: usize, size: usize) -> usize {
    if size <= 4096 {
        iters
    } else {
        (iters * 4096 / size).max(100)
    }
}

fn burst_of(bytes: u64, size: usize) -> usize {
    (bytes / size.max(1) as u64).clamp(64, 100_000) as usize
}

/// The raw client's end: a VI, a send region and a receive region of
/// `POSTED` slots each. Sends complete lazily: the oldest is waited for
/// only when `POSTED` are outstanding, and an echo's receive slot is
/// posted again once its send completed.
struct RustEnd {
    vi: Vi,
    tx: MemRegion,
    rx: MemRegion,
    max: usize,
    sent: u64,
    /// Outstanding sends, oldest first: the receive slot each frees.
    pending: std::collections::VecDeque<Option<usize>>,
    next_recv_id: u64,
    /// The receive slot of the last message.
    last: usize,
    /// Read every message received ([`RustEnd::recv`]).
    read: bool,
    /// What the reads summed (kept so that they are not left out).
    sum: u64,
    /// The slot of the last message received, to post again.
    to_repost: Option<usize>,
}

impl RustEnd {
    fn fill(&mut self, size: usize) -> Res<()> {
        self.reap(0)?;
        let msg: Vec<u8> = (0..size).map(|i| pattern(size, i)).collect();
        for k in 0..POSTED {
            self.tx.write(k * self.max, &msg);
        }
        Ok(())
    }

    fn completed(&mut self, c: unet::ViCompletion) -> Res<()> {
        c.status.map_err(|e| format!("a send failed: {e}"))?;
        if let Some(Some(slot)) = self.pending.pop_front() {
            self.repost(slot)?;
        }
        Ok(())
    }

    /// Takes completed sends back, waiting until fewer than `limit` are
    /// outstanding.
    fn reap(&mut self, limit: usize) -> Res<()> {
        while let Some(c) = self.vi.send_done() {
            self.completed(c)?;
        }
        while !self.pending.is_empty() && self.pending.len() >= limit {
            let c = self
                .vi
                .send_wait(Some(PATIENCE))
                .map_err(|e| format!("send_wait: {e}"))?;
            self.completed(c)?;
        }
        Ok(())
    }

    /// Sends first; then, while the message travels, posts the last
    /// message's slot again and takes completed sends back (at most
    /// `POSTED - 1` stay outstanding, so the next send's slot is free).
    fn send(&mut self, size: usize) -> Res<()> {
        let at = (self.sent as usize % POSTED) * self.max;
        self.vi
            .post_send(self.sent, &[ViSeg::new(&self.tx, at, size)])
            .map_err(|e| format!("post_send: {e}"))?;
        self.sent += 1;
        self.pending.push_back(None);
        self.repost_last()?;
        self.reap(POSTED)
    }

    /// Posts the slot of the last message received again.
    fn repost_last(&mut self) -> Res<()> {
        match self.to_repost.take() {
            Some(slot) => self.repost(slot),
            None => Ok(()),
        }
    }

    /// The next message: its receive slot and length (not posted again).
    fn take(&mut self) -> Res<(usize, usize)> {
        let c = self
            .vi
            .recv_wait(Some(PATIENCE))
            .map_err(|e| format!("recv_wait: {e}"))?;
        let len = c.status.map_err(|e| format!("a receive failed: {e}"))?;
        Ok(((c.id as usize) % POSTED, len))
    }

    /// Posts receive slot `slot` (receives complete in the order posted, so
    /// the ids, taken in turn, name the slots modulo `POSTED`).
    fn repost(&mut self, slot: usize) -> Res<()> {
        let id = self.next_recv_id;
        debug_assert_eq!(id as usize % POSTED, slot);
        self.next_recv_id += 1;
        self.vi
            .post_recv(id, &[ViSeg::new(&self.rx, slot * self.max, self.max)])
            .map_err(|e| format!("post_recv: {e}"))
    }

    /// The next message's length, every byte of it read if the plan
    /// says so; its slot is posted again after the next send (or
    /// receive).
    fn recv(&mut self) -> Res<usize> {
        self.repost_last()?;
        let (slot, len) = self.take()?;
        if self.read {
            self.sum = self
                .sum
                .wrapping_add(sum_lines(&self.rx, slot * self.max, len));
        }
        self.last = slot;
        self.to_repost = Some(slot);
        Ok(len)
    }

    /// Sends the next message back from where it landed; its slot is
    /// posted again once that send completed. An empty message ends the
    /// round trips: not echoed, its length (0) returned.
    fn echo(&mut self) -> Res<usize> {
        let (slot, len) = self.take()?;
        if len == 0 {
            self.repost(slot)?;
            return Ok(0);
        }
        self.vi
            .post_send(self.sent, &[ViSeg::new(&self.rx, slot * self.max, len)])
            .map_err(|e| format!("post_send: {e}"))?;
        self.sent += 1;
        self.pending.push_back(Some(slot));
        self.reap(POSTED / 2)?;
        Ok(len)
    }

    fn echoed(&self, size: usize) -> bool {
        let mut got = vec![0u8; size];
        self.rx.read(self.last * self.max, &mut got);
        got.iter().enumerate().all(|(i, &b)| b == pattern(size, i))
    }
}

/// Bytes between two of a message's bytes that [`sum_lines`] reads: a
/// cache line.
const LINE: usize = 64;

/// The sum of every [`LINE`]th byte of `len` bytes of `region` from `off`,
/// and of the last: a read of each cache line of a message, as a program
/// that uses it makes, with as little work per line as can be (as Javia's
/// ends and the Aeron peer make it: `JaviaBench.sum`), so that what it
/// costs is the lines' coming, not the summing.
fn sum_lines(region: &MemRegion, off: usize, len: usize) -> u64 {
    assert!(off + len <= region.len(), "a message outside its slot");
    let p = region.as_ptr();
    let mut sum = 0u64;
    let bytes = (0..len).step_by(LINE).chain(len.checked_sub(1));
    for i in bytes {
        // SAFETY: inside the region (asserted above), which lives as long
        // as `region`; the slot's receive completed and it is not posted
        // again yet, so nothing writes it meanwhile.
        sum = sum.wrapping_add(u64::from(unsafe { p.add(off + i).read() }));
    }
    sum
}

fn peer(a: PeerArgs) -> Res<()> {
    let ping = match a.role.as_str() {
        "ping" => true,
        "pong" => false,
        r => return Err(format!("role {r} is not ping or pong")),
    };
    let max = a.sizes.iter().copied().max().unwrap_or(1).max(1);
    let session =
        Session::connect_default().map_err(|e| format!("connecting to the engine: {e}"))?;
    let attrs = ViAttributes::default();
    let vi = if ping {
        session
            .vi_connect(a.addr, a.tag, &attrs, Some(PATIENCE))
            .map_err(|e| format!("vi_connect: {e}"))?
    } else {
        let server = session
            .vi_listen(a.tag)
            .map_err(|e| format!("vi_listen: {e}"))?;
        println!("ready");
        server
            .accept(&attrs, Some(PATIENCE))
            .map_err(|e| format!("accept: {e}"))?
    };
    let reg = |n| {
        session
            .register_memory(n)
            .map_err(|e| format!("register_memory: {e}"))
    };
    let mut end = RustEnd {
        vi,
        tx: reg(POSTED * max)?,
        rx: reg(POSTED * max)?,
        max,
        sent: 0,
        pending: Default::default(),
        next_recv_id: 0,
        last: 0,
        read: a.read,
        sum: 0,
        to_repost: None,
    };
    for k in 0..POSTED {
        end.repost(k)?;
    }
    let mut first = true;
    for &size in &a.sizes {
        let warm = if first { a.warmup * 5 } else { a.warmup };
        let warm_for = Duration::from_millis(if first { a.warm_ms * 5 } else { a.warm_ms });
        first = false;
        let iters = iters_of(a.iters, size);
        let burst = burst_of(a.bytes, size);
        if ping {
            end.fill(size)?;
            let t0 = Instant::now();
            let mut n = 0;
            while n < warm || t0.elapsed() < warm_for {
                end.send(size)?;
                expect(end.recv()?, size)?;
                n += 1;
            }
            let mut t = Vec::with_capacity(iters);
            for _ in 0..iters {
                let t0 = Instant::now();
                end.send(size)?;
                let got = end.recv()?;
                t.push(t0.elapsed().as_nanos() as u64);
                expect(got, size)?;
            }
            // The end of the round trips: an empty message, not echoed.
            end.send(0)?;
            if !end.echoed(size) {
                return Err(format!(
                    "the echo of a {size}-byte message differs from what was sent"
                ));
            }
            t.sort_unstable();
            println!(
                "rt {size} {} {} {}",
                t[t.len() / 2],
                t[t.len() / 10],
                t[t.len() * 9 / 10]
            );
            let mut rates = Vec::new();
            for r in 0..a.warm_bursts + a.reps {
                let t0 = Instant::now();
                for _ in 0..burst {
                    end.send(size)?;
                }
                expect(end.recv()?, 1)?;
                let dt = t0.elapsed().as_secs_f64();
                if r >= a.warm_bursts {
                    rates.push((burst * size) as f64 / dt);
                }
            }
            println!("bw {size} {:.0}", median_f64(&rates));
        } else {
            while end.echo()? != 0 {}
            end.fill(1)?;
            for _ in 0..a.warm_bursts + a.reps {
                for _ in 0..burst {
                    end.recv()?;
                }
                end.send(1)?;
            }
        }
    }
    end.reap(1)?;
    std::hint::black_box(end.sum);
    println!("done");
    Ok(())
}

fn expect(got: usize, size: usize) -> Res<()> {
    if got == size {
        Ok(())
    } else {
        Err(format!(
            "a {got}-byte message came where one of {size} bytes was due"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_downcall_floor_is_read() {
        let text = "rt 4 900 800 1000\nbw 4 1000000\ndowncall 4.35\ndone\n";
        assert_eq!(Floor::parse(text), Some(Floor { ns: 4.35 }));
        assert_eq!(Floor::parse("rt 4 900 800 1000\ndowncall x\n"), None);
        assert_eq!(Floor::parse("downcall 4 5\n"), None);
    }

    #[test]
    fn the_ping_ends_lines_are_read_per_size() {
        let text = "rt 4 900 800 1000\nbw 4 1000000\nrt 64 950 1 2\nbw 64 2e9\ndone\n";
        let p = parse(text, &[4, 64]).unwrap();
        assert_eq!(p[0].rt_ns, 900.0);
        assert_eq!(p[1].bw, 2e9);
        let e = parse("rt 4 900 1 2\n", &[4]).err().unwrap();
        assert!(e.contains("no figures for 4 bytes"), "{e}");
    }

    #[test]
    fn the_crossover_is_where_in_place_stays_ahead() {
        let t = Table {
            w: Where::Local,
            kinds: vec![Kind::Copy, Kind::Inplace],
            sizes: vec![4, 1024, 8192, 32768],
            rt: vec![vec![1.0; 4]; 2],
            bw: vec![vec![1.0, 5.0, 5.0, 5.0], vec![2.0, 4.0, 6.0, 7.0]],
            rt_runs: vec![],
            bw_runs: vec![],
            floor: None,
        };
        assert_eq!(t.crossover(), Some(8192));
    }

    fn point(rt_us: f64) -> Point {
        Point {
            rt_ns: rt_us * 1000.0,
            bw: 1e9,
        }
    }

    /// A run of the slow placement beside a Rust run of the fast one
    /// skews the ratio of medians; each run against the Rust run of its
    /// round does not.
    #[test]
    fn the_paired_ratio_compares_each_run_with_the_rust_run_of_its_round() {
        // Rust: fast, fast, slow; Javia-II: fast, slow, slow (1.5x the
        // Rust client in each placement but the second round's).
        let rust = [0.2, 0.2, 0.8];
        let buffer = [0.3, 1.2, 1.2];
        let t = Table::new(
            Where::Local,
            &[Kind::Rust, Kind::Buffer],
            &[64],
            &[
                rust.iter().map(|&us| vec![point(us)]).collect(),
                buffer.iter().map(|&us| vec![point(us)]).collect(),
            ],
        );
        assert!((t.vs_rust(&t.rt, 1, 0).unwrap() - 6.0).abs() < 1e-9);
        assert!((t.vs_rust_paired(&t.rt_runs, 1, 0).unwrap() - 1.5).abs() < 1e-9);
        // Nothing to pair with when there is no Rust client.
        let alone = Table::new(
            Where::Local,
            &[Kind::Buffer],
            &[64],
            &[vec![vec![point(1.0)]]],
        );
        assert!(alone.vs_rust_paired(&alone.rt_runs, 0, 0).is_none());
    }

    #[test]
    fn plans_match_the_java_end() {
        // JaviaBench.Plan: iters(size) and burst(size).
        assert_eq!(iters_of(20_000, 4096), 20_000);
        assert_eq!(iters_of(20_000, 32768), 2_500);
        assert_eq!(iters_of(300, 32768), 100);
        assert_eq!(burst_of(15_000_000, 4), 100_000);
        assert_eq!(burst_of(15_000_000, 32768), 457);
        assert_eq!(burst_of(1000, 32768), 64);
    }
}
