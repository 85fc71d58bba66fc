//! What the VI runs share: completions, receive slots, this process's
//! side and its engine.

use std::time::Duration;

use unet::{
    Engine, EngineConfig, MemRegion, PostError, Reliability, Session, Vi, ViAttributes,
    ViCompletion, ViSeg,
};

use super::args::ViaPath;
use super::Res;
use crate::bench::child::{spawn_child, ChildKind, ChildProc, TempDir, PATIENCE};

/// Ping-pong: receive descriptors each side keeps posted.
pub(super) const PING_POSTED: usize = 4;
/// Stream sender: receive descriptors posted for the receiver's answers.
pub(super) const CTRL_POSTED: usize = 4;
/// Descriptor numbers of the stream sender's sends.
pub(super) const DATA_ID: u64 = 0;
pub(super) const CTRL_ID: u64 = 1;
/// Bytes of the receiver's answer to SYNC and STOP: kind, number, u64
/// count.
pub(super) const ANSWER: usize = 10;
/// A stream's control message without an answer this long is sent again
/// (an unreliable VI may lose it).
pub(super) const RESEND: Duration = Duration::from_millis(200);

pub(super) fn err(what: &str) -> impl Fn(unet::Error) -> String + '_ {
    move |e| format!("unet {what}: {e}")
}

pub(super) fn post_err(what: &'static str) -> impl Fn(PostError) -> String {
    move |e| format!("VI {what}: {e}")
}

/// The number and length of a completed descriptor, or why it failed.
#[inline]
pub(super) fn done(c: ViCompletion, what: &str) -> Res<(u64, usize)> {
    match c.status {
        Ok(n) => Ok((c.id, n)),
        Err(e) => Err(format!("VI {what} descriptor {} failed: {e}", c.id)),
    }
}

/// The next completed receive.
#[inline]
pub(super) fn recv_next(vi: &mut Vi) -> Res<(u64, usize)> {
    let c = vi
        .recv_wait(Some(PATIENCE))
        .map_err(|e| format!("VI receive: {e}"))?;
    done(c, "receive")
}

/// The next completed send.
pub(super) fn send_next(vi: &mut Vi) -> Res<(u64, usize)> {
    let c = vi
        .send_wait(Some(PATIENCE))
        .map_err(|e| format!("VI send: {e}"))?;
    done(c, "send")
}

/// `n` rounded up to a cache line.
pub(super) fn line_up(n: usize) -> usize {
    n.next_multiple_of(64)
}

/// Receive buffers in a region: `n` slots of `stride` bytes from `base`,
/// each posted with its index as the descriptor number.
pub(super) struct Slots<'r> {
    pub(super) region: &'r MemRegion,
    pub(super) base: usize,
    pub(super) stride: usize,
    pub(super) n: usize,
}

impl<'r> Slots<'r> {
    pub(super) fn offset(&self, k: u64) -> usize {
        self.base + k as usize * self.stride
    }

    #[inline]
    pub(super) fn post(&self, vi: &mut Vi, k: u64) -> Res<()> {
        let seg = [ViSeg::new(self.region, self.offset(k), self.stride)];
        vi.post_recv(k, &seg).map_err(post_err("post_recv"))
    }

    pub(super) fn post_all(&self, vi: &mut Vi) -> Res<()> {
        (0..self.n as u64).try_for_each(|k| self.post(vi, k))
    }
}

/// This process's side of a run. Field order is drop order: session,
/// engine, directory.
pub(super) struct Side {
    pub(super) session: Session,
    _engine: Engine,
    /// Local runs: the directory of the engine's control socket.
    dir: Option<TempDir>,
    /// Remote runs: the loss injected by each engine, in parts per million.
    drop_ppm: u32,
}

/// Seeds of the two engines' loss injectors (a remote run's losses are the
/// same from one run to the next).
const PARENT_SEED: u64 = 0x5eed_0001;
pub(super) const CHILD_SEED: u64 = 0x5eed_0002;

impl Side {
    /// Local: an embedded engine with a control socket in a fresh
    /// directory, which the child connects to. Remote: an embedded engine
    /// on UDP loopback dropping `drop_ppm` of what it sends; the child
    /// starts its own.
    pub(super) fn start(path: ViaPath, drop_ppm: u32) -> Res<Side> {
        let (cfg, dir) = match path {
            ViaPath::Local => {
                let dir = TempDir::new()?;
                let cfg = EngineConfig {
                    control_socket: Some(dir.0.join("control")),
                    ..EngineConfig::default()
                };
                (cfg, Some(dir))
            }
            ViaPath::Remote => (remote_engine(drop_ppm, PARENT_SEED), None),
        };
        let engine = Engine::start(cfg).map_err(|e| format!("starting the unet engine: {e}"))?;
        let session = Session::embedded(&engine).map_err(err("session"))?;
        Ok(Side {
            session,
            _engine: engine,
            dir,
            drop_ppm,
        })
    }

    /// Starts the child that plays the other VI (`posted`: the receives it
    /// keeps posted); it prints the discriminator it listens on (and, when
    /// remote, its engine's UDP address).
    pub(super) fn spawn(
        &self,
        kind: ChildKind,
        size: usize,
        posted: usize,
        pin: bool,
    ) -> Res<ChildProc> {
        let mut extra = vec!["--batch".to_string(), posted.to_string()];
        match &self.dir {
            Some(d) => {
                extra.push("--socket".into());
                extra.push(d.0.join("control").display().to_string());
            }
            None => {
                extra.extend(["--path".into(), "udp".into(), "--drop-ppm".into()]);
                extra.push(self.drop_ppm.to_string());
            }
        }
        spawn_child(kind, size, 0, &extra, None, pin)
    }

    /// Connects a VI of `attrs` to the child's. The child's ready line is
    /// its discriminator, then its engine's UDP address (remote), or the
    /// id of an endpoint of its own (a local ping-pong): returned too.
    pub(super) fn connect(&self, ch: &ChildProc, attrs: &ViAttributes) -> Res<(Vi, Option<u32>)> {
        let mut words = ch.info.split_whitespace();
        let tag: u64 = words
            .next()
            .and_then(|t| t.parse().ok())
            .ok_or("the child sent no discriminator")?;
        let (mut host, mut ep) = (None, None);
        if let Some(w) = words.next() {
            let bad = || format!("the child sent a bad address {w:?}");
            if self.dir.is_some() {
                ep = Some(w.parse().map_err(|_| bad())?);
            } else {
                host = Some(w.parse().map_err(|_| bad())?);
            }
        }
        let vi = self
            .session
            .vi_connect(host, tag, attrs, Some(PATIENCE))
            .map_err(err("vi_connect"))?;
        Ok((vi, ep))
    }

    pub(super) fn register(&self, len: usize) -> Res<MemRegion> {
        self.session
            .register_memory(len)
            .map_err(err("register_memory"))
    }
}

/// The configuration of an engine of a remote run: UDP loopback, dropping
/// `drop_ppm` of the datagrams it sends (seeded).
pub(super) fn remote_engine(drop_ppm: u32, seed: u64) -> EngineConfig {
    EngineConfig {
        udp_bind: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
        wire_drop_ppm: drop_ppm,
        wire_drop_seed: seed,
        ..EngineConfig::default()
    }
}

pub(super) fn attrs(r: Reliability) -> ViAttributes {
    ViAttributes {
        reliability: r,
        ..ViAttributes::default()
    }
}
