//! The two processes of a network benchmark run (`unet bench pingpong`,
//! `stream`, `via`): the paths and placements they run on, what the child
//! (`unet bench __child …`) is told to do, starting it and waiting for it,
//! pinning either to a core, the directory of a run's control socket, and
//! the bytes of the messages the two exchange.

use std::fmt;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use clap::{Args, ValueEnum};
use unet_engine::wire::udp::LOOPBACK_DATAGRAM;

use super::floor::{self, Shm};

type Res<T> = Result<T, String>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PathArg {
    /// Shared-memory ring between the two endpoints' processes.
    Direct,
    /// Through the engine's queues (no wire).
    Engine,
    /// Through two engines over UDP loopback.
    Udp,
}

impl PathArg {
    pub fn name(self) -> &'static str {
        match self {
            PathArg::Direct => "direct",
            PathArg::Engine => "engine",
            PathArg::Udp => "udp",
        }
    }

    pub(super) fn baseline(self) -> &'static str {
        match self {
            PathArg::Udp => "raw_udp",
            _ => "floor",
        }
    }
}

impl fmt::Display for PathArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where `--applet` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PlacementArg {
    /// In the engine.
    Engine,
    /// In each process's client library, on the direct path.
    Inline,
}

impl PlacementArg {
    pub fn name(self) -> &'static str {
        match self {
            PlacementArg::Engine => "engine",
            PlacementArg::Inline => "inline",
        }
    }
}

/// What the hidden child process does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ChildKind {
    FloorPingpong,
    FloorStream,
    /// The far end of the forwarder floor (`forwarder`).
    ForwarderPingpong,
    UdpPingpong,
    UdpStream,
    UnetPingpong,
    UnetStream,
    /// `unet bench via`: the VI that echoes (`via`).
    ViaPingpong,
    /// `unet bench via`: the VI that receives a stream (`via`).
    ViaStream,
    /// The relay floor of `--path udp` (`udp_raw::relay_child`): relays
    /// each datagram between the parent and `--peer`.
    UdpRelay,
    /// `--load`: a process that only spins, until it is killed or its
    /// parent dies.
    Spin,
}

/// The other process of a run (internal).
#[derive(Args)]
pub struct ChildArgs {
    #[arg(value_enum)]
    pub kind: ChildKind,
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    #[arg(long, default_value_t = 0)]
    pub burst: usize,
    /// unet stream receiver: messages per `recv_many` (1: `recv`); VI
    /// stream receiver: receive descriptors kept posted.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Inherited shared-memory descriptor (floor).
    #[arg(long)]
    pub fd: Option<i32>,
    /// Floor ring geometry `slot0:n0:slot1:n1`.
    #[arg(long)]
    pub geom: Option<String>,
    #[arg(long)]
    pub pin_cpu: Option<usize>,
    /// unet runs: the path.
    #[arg(long, value_enum)]
    pub path: Option<PathArg>,
    /// unet runs on `direct`/`engine`: the engine's control socket.
    #[arg(long)]
    pub socket: Option<std::path::PathBuf>,
    /// unet runs on `udp`: the engines' datagram size.
    #[arg(long, default_value_t = LOOPBACK_DATAGRAM)]
    pub max_datagram: usize,
    /// unet runs: the endpoint's receive spin time.
    #[arg(long)]
    pub spin_us: Option<u64>,
    /// unet runs on `udp`: print this side's engine counters at the end.
    #[arg(long)]
    pub counters: bool,
    /// VI runs on `udp`: datagrams this side's engine drops on purpose
    /// (parts per million, seeded).
    #[arg(long, default_value_t = 0)]
    pub drop_ppm: u32,
    /// unet runs: attach this applet to the endpoint.
    #[arg(long)]
    pub applet: Option<std::path::PathBuf>,
    /// unet runs: where the applet runs.
    #[arg(long, value_enum, default_value = "engine")]
    pub placement: PlacementArg,
    /// unet runs: the endpoint is buffered with a virtual buffer of this
    /// many bytes.
    #[arg(long)]
    pub buffered: Option<u64>,
    /// UDP relay: the address it relays the parent's datagrams to.
    #[arg(long)]
    pub peer: Option<String>,
}

/// A running child process, and what it printed after `ready`.
pub struct ChildProc {
    child: Child,
    /// Kept open so the child never writes to a closed pipe.
    _out: BufReader<ChildStdout>,
    pub info: String,
}

/// Starts `unet bench __child KIND …` and waits for its `ready` line.
pub fn spawn_child(
    kind: ChildKind,
    size: usize,
    burst: usize,
    extra: &[String],
    shm: Option<&Shm>,
    pin: bool,
) -> Res<ChildProc> {
    let exe = std::env::current_exe().map_err(|e| format!("current executable: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.args(["bench", "__child"])
        .arg(kind.to_possible_value().unwrap().get_name())
        .args(["--size", &size.to_string(), "--burst", &burst.to_string()])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if pin {
        cmd.args(["--pin-cpu", "1"]);
    }
    if let Some(shm) = shm {
        cmd.args(["--fd", &shm.fd().to_string()]);
        floor::set_inheritable(shm.fd(), true).map_err(|e| format!("fcntl: {e}"))?;
    }
    let child = cmd.spawn();
    if let Some(shm) = shm {
        floor::set_inheritable(shm.fd(), false).map_err(|e| format!("fcntl: {e}"))?;
    }
    let mut child = child.map_err(|e| format!("starting the child process: {e}"))?;
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let _ = out.read_line(&mut line);
    let mut p = ChildProc {
        child,
        _out: out,
        info: String::new(),
    };
    match line.trim_end().strip_prefix("ready") {
        Some(info) => {
            p.info = info.trim().to_string();
            Ok(p)
        }
        None => {
            let _ = p.child.kill();
            let _ = p.child.wait();
            Err(format!("the child process did not start ({kind:?})"))
        }
    }
}

/// `--load N`: N processes that only spin, beside every run of a
/// benchmark (placed by the scheduler, on no core in particular), killed
/// when this is dropped (and by the kernel if this process dies first).
pub struct Load(Vec<ChildProc>);

impl Load {
    pub fn start(n: usize) -> Res<Load> {
        let mut procs = Vec::with_capacity(n);
        for _ in 0..n {
            procs.push(spawn_child(ChildKind::Spin, 0, 0, &[], None, false)?);
        }
        Ok(Load(procs))
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for p in &mut self.0 {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }
}

/// The body of a [`ChildKind::Spin`] process: announce itself, then spin
/// until killed, dying with its parent.
pub(super) fn spin(ready: impl FnOnce(&str)) -> ! {
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number and changes
    // only this process's own attribute; no memory is passed.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
    // The parent may have died before the call above took effect.
    if std::os::unix::process::parent_id() == 1 {
        std::process::exit(0);
    }
    ready("");
    let mut x = 0u64;
    loop {
        x = std::hint::black_box(x.wrapping_add(1));
    }
}

impl ChildProc {
    /// Waits for the child to exit; on error `r` it is killed first.
    pub fn wait<T>(mut self, r: Res<T>) -> Res<T> {
        if r.is_err() {
            // Give a child that failed on its own a moment to say so.
            for _ in 0..30 {
                if let Ok(Some(_)) = self.child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = self.child.kill();
        }
        let st = self
            .child
            .wait()
            .map_err(|e| format!("waiting for the child: {e}"))?;
        let v = r.map_err(|e| {
            if st.success() {
                e
            } else {
                format!("{e} (the child process: {st})")
            }
        })?;
        if !st.success() {
            return Err(format!("the child process failed ({st})"));
        }
        Ok(v)
    }
}

/// Puts the calling thread (or, before its other threads start, process)
/// on core `cpu` only. Allocates nothing and takes no lock, so a child may
/// call it between fork and exec.
pub(super) fn set_affinity(cpu: usize) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write inside it,
    // and sched_setaffinity reads exactly size_of::<cpu_set_t>() bytes.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Makes `c` start its process on core `cpu` only (all its threads).
pub fn pin_child(c: &mut Command, cpu: usize) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls are allowed: set_affinity allocates
    // nothing, takes no lock and makes one system call.
    unsafe {
        c.pre_exec(move || set_affinity(cpu));
    }
}

/// Pins the calling process to one core.
pub fn pin_to(cpu: usize) -> Res<()> {
    set_affinity(cpu).map_err(|e| format!("pinning to core {cpu}: {e}"))
}

/// A fresh directory for one run's control socket, removed on drop.
pub(super) struct TempDir(pub(super) PathBuf);

impl TempDir {
    pub(super) fn new() -> Res<TempDir> {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "unet-bench-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(super) const DATA: u8 = 0xa5;
pub(super) const SYNC: u8 = 1;
pub(super) const STOP: u8 = 2;
/// How long a wait on a path that does not lose messages may last.
pub(super) const PATIENCE: Duration = Duration::from_secs(20);

pub(super) fn stop_len(size: usize) -> usize {
    if size == 1 {
        2
    } else {
        1
    }
}
