//! A session: one control connection to an engine, embedded or daemon.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use unet_control::{self as control, Limits, Reply, Request};
#[cfg(feature = "embedded")]
use unet_engine::Engine;
use unet_sys as sys;

use crate::Error;

pub(crate) struct Inner {
    sock: OwnedFd,
    /// The longest wait for the answer to a control request.
    timeout: Option<Duration>,
    state: Mutex<State>,
    pub engine_id: u64,
    pub udp: Option<SocketAddr>,
}

#[derive(Default)]
struct State {
    next_req: u32,
    notices: VecDeque<(Reply, Vec<OwnedFd>)>,
    /// Replies read by a thread they were not for, until their requester
    /// takes them (a few at most: a reply nobody waits for any more, its
    /// request timed out, is dropped when more come).
    replies: VecDeque<(u32, Reply, Vec<OwnedFd>)>,
}

/// Most replies kept for other threads.
const REPLIES_KEPT: usize = 64;

/// How a session reads its control socket: every packet is filed, a
/// notice with the notices, a reply with the replies, whoever reads it;
/// no thread holds the session while it waits, so that one thread can wait
/// long (a VI connection waiting to be accepted) while others use the
/// session.
impl State {
    /// Read what is waiting on `sock` without blocking, filing each packet.
    /// `Err(EngineGone)` when the engine closed the connection.
    fn pump(&mut self, sock: &OwnedFd) -> Result<(), Error> {
        let mut buf = [0u8; control::MAX_PACKET];
        loop {
            let mut fds = Vec::new();
            let n = match sys::recv_packet(sock.as_raw_fd(), &mut buf, &mut fds, true) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                r => r?,
            };
            if n == 0 {
                return Err(Error::EngineGone);
            }
            let (rid, rep) =
                Reply::decode(&buf[..n]).map_err(|e| Error::Protocol(e.to_string()))?;
            if rid == 0 {
                self.notices.push_back((rep, fds));
            } else {
                if self.replies.len() >= REPLIES_KEPT {
                    self.replies.pop_front();
                }
                self.replies.push_back((rid, rep, fds));
            }
        }
    }

    fn take_reply(&mut self, id: u32) -> Option<(Reply, Vec<OwnedFd>)> {
        let i = self.replies.iter().position(|(r, ..)| *r == id)?;
        self.replies.remove(i).map(|(_, r, f)| (r, f))
    }
}

/// A connection to an engine. Cheap to clone; endpoints keep it alive.
#[derive(Clone)]
pub struct Session {
    pub(crate) inner: Arc<Inner>,
}

/// The time a control request waits for the engine's answer unless told
/// otherwise ([`SessionOptions::timeout`], `UNET_TIMEOUT_MS`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// How a session talks to its engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionOptions {
    /// The longest wait for the engine to take a control request and
    /// answer it (connecting included); `None` waits forever. A request
    /// that gets no answer in time fails with [`Error::Timeout`]: a daemon
    /// that is stopped or stuck does not hold its clients up. The default
    /// is [`DEFAULT_TIMEOUT`], or the milliseconds in the environment
    /// variable `UNET_TIMEOUT_MS` when it is set (`0`: forever).
    pub timeout: Option<Duration>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            timeout: timeout_from_env(std::env::var("UNET_TIMEOUT_MS").ok().as_deref()),
        }
    }
}

/// The default timeout given the value of `UNET_TIMEOUT_MS` (a number of
/// milliseconds, 0 for none; anything else is ignored).
fn timeout_from_env(v: Option<&str>) -> Option<Duration> {
    match v.map(|v| v.trim().parse::<u64>()) {
        Some(Ok(0)) => None,
        Some(Ok(ms)) => Some(Duration::from_millis(ms)),
        _ => Some(DEFAULT_TIMEOUT),
    }
}

/// The control socket a daemon listens on when not told otherwise, and
/// that clients reach when `UNET_SOCKET` is not set.
pub const DEFAULT_SOCKET: &str = "/tmp/unet.sock";

/// The environment variable that names the control socket, for every
/// client (Rust, C, Java) and the `unet` command.
pub const SOCKET_ENV: &str = "UNET_SOCKET";

/// The control socket to use: `$UNET_SOCKET` when set and not empty,
/// else [`DEFAULT_SOCKET`].
pub fn socket_path() -> std::path::PathBuf {
    match std::env::var_os(SOCKET_ENV) {
        Some(p) if !p.is_empty() => p.into(),
        _ => DEFAULT_SOCKET.into(),
    }
}

impl Session {
    /// Connect to the daemon named by `UNET_SOCKET` (default
    /// [`DEFAULT_SOCKET`]), with [`SessionOptions::default`].
    pub fn connect_default() -> Result<Session, Error> {
        Self::connect(socket_path())
    }

    /// Connect to a daemon's control socket (with
    /// [`SessionOptions::default`]).
    pub fn connect(path: impl AsRef<Path>) -> Result<Session, Error> {
        Self::connect_with(path, SessionOptions::default())
    }

    /// Connect to a daemon's control socket with these options.
    pub fn connect_with(path: impl AsRef<Path>, opts: SessionOptions) -> Result<Session, Error> {
        let path = path.as_ref();
        let fd = sys::connect_seqpacket_timeout(path, opts.timeout).map_err(|e| {
            if e.kind() == io::ErrorKind::TimedOut {
                return Error::Timeout(opts.timeout.unwrap_or_default());
            }
            Error::Io(io::Error::new(
                e.kind(),
                format!("cannot reach the engine at {}: {e}", path.display()),
            ))
        })?;
        Self::from_fd_with(fd, opts)
    }

    /// A session on an embedded engine (feature `embedded`).
    #[cfg(feature = "embedded")]
    pub fn embedded(engine: &Engine) -> Result<Session, Error> {
        Self::from_fd(engine.connect()?)
    }

    /// A session on an already connected control socket.
    pub fn from_fd(sock: OwnedFd) -> Result<Session, Error> {
        Self::from_fd_with(sock, SessionOptions::default())
    }

    /// A session on an already connected control socket, with these
    /// options.
    pub fn from_fd_with(sock: OwnedFd, opts: SessionOptions) -> Result<Session, Error> {
        let mut inner = Inner {
            sock,
            timeout: opts.timeout,
            state: Mutex::new(State::default()),
            engine_id: 0,
            udp: None,
        };
        match inner
            .request(&Request::Hello {
                version: control::PROTOCOL_VERSION,
            })?
            .0
        {
            Reply::Hello { engine_id, udp } => {
                inner.engine_id = engine_id;
                inner.udp = udp;
            }
            r => {
                return Err(Error::Protocol(format!(
                    "unexpected answer to hello: {r:?}"
                )))
            }
        }
        Ok(Session {
            inner: Arc::new(inner),
        })
    }

    /// The engine's UDP address (what remote peers use in an
    /// [`EndpointAddr`](crate::EndpointAddr)).
    pub fn udp_addr(&self) -> Option<SocketAddr> {
        self.inner.udp
    }

    /// Attach an applet, run in the engine, to endpoint `endpoint`: one of
    /// this session's, or another process's of the same user (what
    /// `unet applet attach` does). See [`crate::Endpoint::attach_applet`].
    pub fn attach_applet(
        &self,
        endpoint: u32,
        class: &[u8],
        fuel: u64,
        heap: u32,
    ) -> Result<(), Error> {
        let seg = sys::Segment::create("unet-applet", class.len().max(1))?;
        // The fresh segment has at least class.len() bytes.
        let copied = crate::shm::write(&seg, 0, class);
        debug_assert!(copied);
        let req = Request::AttachApplet {
            endpoint,
            len: class.len() as u32,
            fuel,
            heap,
        };
        match self
            .inner
            .request_with_fds(&req, &[seg.fd().as_raw_fd()])?
            .0
        {
            Reply::Ok => Ok(()),
            Reply::Rejected(why) => Err(Error::Rejected(why)),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to attach: {r:?}"
            ))),
        }
    }

    /// Detach the engine-run applet of endpoint `endpoint`.
    pub fn detach_applet(&self, endpoint: u32) -> Result<(), Error> {
        match self.inner.request(&Request::DetachApplet { endpoint })?.0 {
            Reply::Ok => Ok(()),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to detach: {r:?}"
            ))),
        }
    }

    /// Map the engine's counters segment read-only (for `unet stat`).
    pub fn counters(&self) -> Result<(unet_sys::Segment, u32), Error> {
        self.stat().map(|(seg, max, _)| (seg, max))
    }

    /// Map the engine's counters segment read-only, with its number of
    /// endpoint slots and the limits the engine sets each process and
    /// user (what `unet stat` shows).
    pub fn stat(&self) -> Result<(unet_sys::Segment, u32, Limits), Error> {
        let (r, mut fds) = self.inner.request(&Request::Stat)?;
        match r {
            Reply::Stat {
                max_endpoints,
                limits,
            } if !fds.is_empty() => {
                let seg = sys::Segment::open(
                    fds.remove(0),
                    unet_abi::counters_segment_size(max_endpoints),
                    false,
                )?;
                Ok((seg, max_endpoints, limits))
            }
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!("unexpected answer to stat: {r:?}"))),
        }
    }
}

/// The engine's event trace after [`Session::trace_set`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceState {
    /// Recording.
    pub on: bool,
    /// Events its ring holds.
    pub capacity: u32,
    /// Events recorded since it was switched on.
    pub recorded: u64,
    /// Of those, the ones overwritten (the ring was full).
    pub overwritten: u64,
}

impl Session {
    /// Switch the engine's event trace on (emptying it; `capacity`
    /// events, 0: the current size) or off (what `unet trace` does; the
    /// engine's owner only).
    pub fn trace_set(&self, on: bool, capacity: u32) -> Result<TraceState, Error> {
        match self.inner.request(&Request::TraceSet { on, capacity })?.0 {
            Reply::TraceState {
                on,
                capacity,
                recorded,
                overwritten,
            } => Ok(TraceState {
                on,
                capacity,
                recorded,
                overwritten,
            }),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to trace: {r:?}"
            ))),
        }
    }

    /// The engine's event trace: the bytes of its dump (the format of
    /// `unet_engine::TraceDump`).
    pub fn trace_dump(&self) -> Result<Vec<u8>, Error> {
        let (r, mut fds) = self.inner.request(&Request::TraceDump)?;
        match r {
            Reply::TraceDump { len, .. } if !fds.is_empty() => {
                let fd = fds.remove(0);
                let b = sys::Segment::read_untrusted(&fd, len as usize)?;
                if b.len() as u64 != len {
                    return Err(Error::Protocol(format!(
                        "a trace dump of {} bytes, {len} announced",
                        b.len()
                    )));
                }
                Ok(b)
            }
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to trace dump: {r:?}"
            ))),
        }
    }
}

impl Inner {
    /// Send a request and wait for its reply; notices that arrive meanwhile
    /// are kept for [`Inner::take_notice`].
    pub fn request(&self, req: &Request) -> Result<(Reply, Vec<OwnedFd>), Error> {
        self.request_with_fds(req, &[])
    }

    /// Like [`Inner::request`], passing descriptors with the request.
    pub fn request_with_fds(
        &self,
        req: &Request,
        fds: &[std::os::fd::RawFd],
    ) -> Result<(Reply, Vec<OwnedFd>), Error> {
        self.request_within(req, fds, self.timeout)
    }

    /// Like [`Inner::request`], for a request the engine answers only when
    /// something else happens (a VI connection accepted): it may take
    /// `wait` (or the session's timeout, if that is longer).
    pub fn request_waiting(
        &self,
        req: &Request,
        wait: Duration,
    ) -> Result<(Reply, Vec<OwnedFd>), Error> {
        let t = self.timeout.map(|t| t.max(wait));
        self.request_within(req, &[], t)
    }

    fn request_within(
        &self,
        req: &Request,
        fds: &[std::os::fd::RawFd],
        timeout: Option<Duration>,
    ) -> Result<(Reply, Vec<OwnedFd>), Error> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.next_req = st.next_req.wrapping_add(1).max(1);
        let id = st.next_req;
        let deadline = timeout.map(|t| Instant::now() + t);
        let timed_out = || Error::Timeout(timeout.unwrap_or_default());
        // A send blocks only while the engine takes nothing (its queue of
        // requests is full): for the timeout at most (SO_SNDTIMEO).
        sys::send_packet(self.sock.as_raw_fd(), &req.encode(id), fds).map_err(|e| {
            if e.kind() == io::ErrorKind::WouldBlock {
                timed_out()
            } else {
                Error::Io(e)
            }
        })?;
        drop(st);
        loop {
            {
                let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
                let pumped = st.pump(&self.sock);
                if let Some(r) = st.take_reply(id) {
                    return Ok(r);
                }
                pumped?;
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                // A reply that comes later is filed and dropped in time.
                return Err(timed_out());
            }
            // Short naps: another thread may read (and file) our reply.
            let nap = Duration::from_millis(5);
            sys::wait_readable(
                self.sock.as_raw_fd(),
                Some(left.map_or(nap, |l| l.min(nap))),
            )?;
        }
    }

    /// The control socket's descriptor (to see whether the engine closed
    /// it).
    pub(crate) fn sock_fd(&self) -> std::os::fd::RawFd {
        self.sock.as_raw_fd()
    }

    /// Take the notice (with its descriptors) about direct connection
    /// `conn_id`, reading the control socket without blocking.
    pub fn take_notice(&self, conn_id: u32) -> Option<(Reply, Vec<OwnedFd>)> {
        self.take_notice_where(
            |r| matches!(r, Reply::DirectConn { conn_id: c, .. } if *c == conn_id),
        )
    }

    /// Take the first notice that `pick` picks, reading the control socket
    /// without blocking.
    pub fn take_notice_where(
        &self,
        pick: impl Fn(&Reply) -> bool,
    ) -> Option<(Reply, Vec<OwnedFd>)> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let _ = st.pump(&self.sock);
        let i = st.notices.iter().position(|(r, _)| pick(r))?;
        st.notices.remove(i)
    }

    /// Wait at most `timeout` (None: forever) for a notice that `pick`
    /// picks. `Err(EngineGone)` when the engine closed the connection.
    pub fn wait_notice(
        &self,
        pick: impl Fn(&Reply) -> bool,
        timeout: Option<Duration>,
    ) -> Result<Option<(Reply, Vec<OwnedFd>)>, Error> {
        let start = Instant::now();
        loop {
            if let Some(n) = self.take_notice_where(&pick) {
                return Ok(Some(n));
            }
            if sys::peer_closed(self.sock.as_raw_fd()) {
                return Err(Error::EngineGone);
            }
            let left = timeout.map(|t| t.saturating_sub(start.elapsed()));
            if left == Some(Duration::ZERO) {
                return Ok(None);
            }
            // Short naps: a request on another thread may read our notice
            // into the queue while we wait for the socket.
            let nap = Duration::from_millis(10);
            sys::wait_readable(
                self.sock.as_raw_fd(),
                Some(left.map_or(nap, |l| l.min(nap))),
            )?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_comes_from_unet_timeout_ms_or_is_five_seconds() {
        assert_eq!(timeout_from_env(None), Some(DEFAULT_TIMEOUT));
        assert_eq!(
            timeout_from_env(Some("250")),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            timeout_from_env(Some(" 250\n")),
            Some(Duration::from_millis(250))
        );
        assert_eq!(timeout_from_env(Some("0")), None);
        assert_eq!(timeout_from_env(Some("soon")), Some(DEFAULT_TIMEOUT));
        assert_eq!(timeout_from_env(Some("-1")), Some(DEFAULT_TIMEOUT));
    }
}
