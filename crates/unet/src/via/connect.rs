//! Setting up VIs: registering memory, listening on a discriminator
//! ([`ViServer`]), answering a request ([`ConnRequest`]), connecting, and
//! the VI made from the engine's answer.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use unet_abi::{Reliability, CLIENT_COUNTERS};
use unet_control::{ErrorCode, Reply, Request, ViParams};
use unet_sys::{self as sys, Segment};

use crate::direct::DirectConn;
use crate::fifo::Fifo;
use crate::shm::Area;
use crate::{Error, Session};

use super::desc::{ViState, QUEUE_START};
use super::engine_side::EngineSide;
use super::region::{MemRegion, RegionInner, RegionsInUse};
use super::vi::{CoreCell, Vi};
use super::vi_core::{Core, ViPath, ViStats};
use super::ViAttributes;

/// A discriminator this process accepts VI connections on.
pub struct ViServer {
    session: Session,
    tag: u64,
}

/// A connection request waiting for an answer: accept or reject it. A
/// request dropped unanswered is rejected.
pub struct ConnRequest {
    session: Session,
    request: u32,
    attrs: ViParams,
    pid: u32,
    host: Option<std::net::SocketAddr>,
    answered: bool,
}

impl ConnRequest {
    /// The reliability level the connecting side asked for.
    pub fn reliability(&self) -> Reliability {
        self.attrs.reliability
    }

    /// The connecting process (0 when it is remote or unknown).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The connecting side's engine (None: this one).
    pub fn host(&self) -> Option<std::net::SocketAddr> {
        self.host
    }

    /// Accept with a VI of `attrs` (its reliability must be the
    /// connecting side's: otherwise both are refused with
    /// `ErrorCode::AttributesMismatch`).
    pub fn accept(mut self, attrs: &ViAttributes) -> Result<Vi, Error> {
        self.answered = true;
        let req = Request::ViAccept {
            request: self.request,
            attrs: attrs.params(),
        };
        let (r, fds) = self.session.inner.request(&req)?;
        vi_from_reply(&self.session, r, fds, attrs, "accept")
    }

    /// Reject the request: the connecting side gets `ErrorCode::Refused`.
    pub fn reject(mut self) -> Result<(), Error> {
        self.answered = true;
        let req = Request::ViReject {
            request: self.request,
        };
        match self.session.inner.request(&req)?.0 {
            Reply::Ok => Ok(()),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to reject: {r:?}"
            ))),
        }
    }
}

impl Drop for ConnRequest {
    fn drop(&mut self) {
        if !self.answered {
            let _ = self.session.inner.request(&Request::ViReject {
                request: self.request,
            });
        }
    }
}

impl ViServer {
    /// The discriminator.
    pub fn tag(&self) -> u64 {
        self.tag
    }

    /// Wait at most `timeout` (None: forever) for a connection request
    /// (VIA's `VipConnectWait`).
    pub fn wait_request(&self, timeout: Option<Duration>) -> Result<ConnRequest, Error> {
        let tag = self.tag;
        let n = self.session.inner.wait_notice(
            |r| matches!(r, Reply::ViRequest { tag: t, .. } if *t == tag),
            timeout,
        )?;
        match n {
            Some((
                Reply::ViRequest {
                    request,
                    attrs,
                    pid,
                    host,
                    ..
                },
                _,
            )) => Ok(ConnRequest {
                session: self.session.clone(),
                request,
                attrs,
                pid,
                host,
                answered: false,
            }),
            _ => Err(Error::NoRequest(timeout.unwrap_or_default())),
        }
    }

    /// Wait for the next connection request and accept it with a VI of
    /// `attrs` (`ServerVi.accept()` in Javia).
    pub fn accept(&self, attrs: &ViAttributes, timeout: Option<Duration>) -> Result<Vi, Error> {
        self.wait_request(timeout)?.accept(attrs)
    }
}

impl Drop for ViServer {
    fn drop(&mut self) {
        let _ = self
            .session
            .inner
            .request(&Request::ViUnlisten { tag: self.tag });
    }
}

pub(super) fn vi_from_reply(
    session: &Session,
    r: Reply,
    mut fds: Vec<OwnedFd>,
    attrs: &ViAttributes,
    what: &str,
) -> Result<Vi, Error> {
    match r {
        Reply::ViConnected { vi, conn_id, side }
            if (conn_id != 0 && !fds.is_empty()) || (conn_id == 0 && fds.len() >= 2) =>
        {
            let seg = Segment::open(fds.remove(0), unet_abi::CONN_HEADER_SIZE, true)?;
            let counters: Box<[AtomicU64; CLIENT_COUNTERS]> =
                Box::new(std::array::from_fn(|_| AtomicU64::new(0)));
            let path = if conn_id == 0 {
                let bell = sys::EventFd::from_fd(fds.remove(0));
                ViPath::Engine(Box::new(EngineSide::open(seg, bell, vi)?))
            } else {
                // This side's counters live in the connection's header,
                // where the engine reads them for `unet stat`.
                ViPath::Direct(
                    DirectConn::open_counting_in_header(seg, side == 1).map_err(Error::Protocol)?,
                )
            };
            let core = Core {
                id: vi,
                attrs: attrs.clone(),
                path,
                state: ViState::Connected,
                send_posted: Fifo::with_capacity(QUEUE_START),
                send_unplaced: Fifo::with_capacity(QUEUE_START),
                send_done: Fifo::with_capacity(QUEUE_START),
                sent: 0,
                recv_posted: Fifo::with_capacity(QUEUE_START),
                recv_done: Fifo::with_capacity(QUEUE_START),
                placed: 0,
                send_cq: attrs.send_cq.clone(),
                recv_cq: attrs.recv_cq.clone(),
                stats: ViStats::default(),
                wait_mean_ns: 0,
                holding: false,
                held: RegionsInUse::default(),
                session: session.clone(),
                granted: Vec::new(),
                peer_regions: Vec::new(),
                last_pull_seq: 0,
                _counters: counters,
            };
            let core = if attrs.send_cq.is_some() || attrs.recv_cq.is_some() {
                let shared = Arc::new(Mutex::new(core));
                for cq in [&attrs.send_cq, &attrs.recv_cq].into_iter().flatten() {
                    cq.attach(&shared);
                }
                CoreCell::Shared(shared)
            } else {
                CoreCell::Own(core)
            };
            Ok(Vi {
                session: session.clone(),
                core,
                id: vi,
                closed: false,
            })
        }
        Reply::Error(c) => Err(c.into()),
        r => Err(Error::Protocol(format!(
            "unexpected answer to {what}: {r:?}"
        ))),
    }
}

impl Session {
    /// Register `len` bytes of fresh, zeroed shared memory with the engine
    /// (VIA's `VipRegisterMem`); it counts against the process's memory
    /// quota.
    pub fn register_memory(&self, len: usize) -> Result<MemRegion, Error> {
        if len == 0 {
            return Err(Error::Config(
                "a memory region needs at least one byte".into(),
            ));
        }
        // Mapped (and its pages committed) only once the engine took it.
        let fd = Segment::create_file("unet-region", len)?;
        let req = Request::RegisterMemory { len: len as u64 };
        let (r, _) = self.inner.request_with_fds(&req, &[fd.as_raw_fd()])?;
        match r {
            Reply::MemoryRegistered { handle } => Ok(MemRegion {
                inner: Arc::new(RegionInner {
                    area: match Area::open(fd, len) {
                        Ok(area) => area,
                        Err(e) => {
                            let _ = self.inner.request(&Request::DeregisterMemory { handle });
                            return Err(e.into());
                        }
                    },
                    handle,
                    session: self.clone(),
                    users: Mutex::default(),
                    gone: AtomicBool::new(false),
                    told: AtomicBool::new(false),
                    slot_hint: AtomicU64::new(0),
                }),
            }),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to register: {r:?}"
            ))),
        }
    }

    /// Accept VI connections on discriminator `tag`.
    pub fn vi_listen(&self, tag: u64) -> Result<ViServer, Error> {
        match self.inner.request(&Request::ViListen { tag })?.0 {
            Reply::Ok => Ok(ViServer {
                session: self.clone(),
                tag,
            }),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to listen: {r:?}"
            ))),
        }
    }

    /// Connect a VI of `attrs` to whoever listens on `tag` at `host`
    /// (None: this host's engine), waiting at most `timeout` for it to
    /// accept (None: the engine's longest, 60 s). Fails with
    /// `ErrorCode::Refused` if it rejects, `NoListener` if nobody listens,
    /// `NoSuchRequest` if nobody answered in time.
    pub fn vi_connect(
        &self,
        host: Option<std::net::SocketAddr>,
        tag: u64,
        attrs: &ViAttributes,
        timeout: Option<Duration>,
    ) -> Result<Vi, Error> {
        let wait = timeout.unwrap_or(Duration::from_secs(60));
        let req = Request::ViConnect {
            host,
            tag,
            attrs: attrs.params(),
            timeout_ms: wait.as_millis().clamp(1, u32::MAX as u128) as u32,
        };
        // The engine answers within `wait`; the control request may take
        // that long, and a little more.
        let (r, fds) = self
            .inner
            .request_waiting(&req, wait + Duration::from_secs(2))?;
        vi_from_reply(self, r, fds, attrs, "connect")
    }
}

/// The `ErrorCode` of an error from the engine, if it is one.
pub fn engine_code(e: &Error) -> Option<ErrorCode> {
    match e {
        Error::Engine(c) | Error::Quota(c) => Some(*c),
        _ => None,
    }
}
