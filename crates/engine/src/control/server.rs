//! The control server: the engine's clients and their control sockets.
//!
//! A client is a process connected to the engine over a Unix
//! SOCK_SEQPACKET socket (the daemon's listener, or a socket pair for an
//! embedded engine). The server accepts clients, records their peer
//! credentials, reads and decodes their requests (a bounded number per
//! wake-up, so one chatty client cannot starve the loop), and sends
//! replies without ever blocking: a client that does not read its socket
//! loses its own replies, never stalls the engine. What a request does is
//! the set-up's business (the `setup` module); a closed socket means the
//! process is gone, and the set-up reclaims what it held.
//!
//! Connections cost the engine a file descriptor each. When it has none
//! left (`EMFILE`), the listener stays readable and `accept` keeps failing:
//! the server then frees a descriptor it keeps in reserve, accepts the
//! waiting connection and closes it at once (the client sees its
//! connection closed, not a hang), and takes a new reserve; if even that
//! fails it stops watching the listener until a client leaves. Each is
//! counted (`control_drop_fd_limit`); clients already connected are served
//! as before. And one process (or user) may hold only so many connections
//! with no endpoint (`client_idle_connections`, `user_idle_connections`):
//! beyond, a new one is closed at once (`control_drop_idle_limit`).
//!
//! So that clients rarely get there, the engine raises its soft
//! `RLIMIT_NOFILE` to the hard limit when it starts, and keeps
//! `fd_reserve` descriptors for others: with no more than that many left,
//! a new object that costs descriptors (an endpoint, a region, a VI, a
//! UDM job or node) is refused ([`ControlServer::fds_short`]), while new
//! connections are still accepted on what is left.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;

use unet_abi::EngineCounter;
use unet_control::{self as control, ErrorCode, Reply, Request};
use unet_sys as sys;

use crate::clients::{Clients, ProcKey};
use crate::counters::Counters;
use crate::poller::{Poller, Token};
use crate::unet::endpoints::ClientId;

/// Requests read from one client per wake-up.
const PACKETS_PER_WAKEUP: usize = 32;

/// Connections accepted per wake-up (the listener is level-triggered: the
/// rest wait for the next one).
const ACCEPTS_PER_WAKEUP: usize = 64;

/// A descriptor held in reserve, to be freed when the engine has no other
/// to accept a connection with.
fn open_reserve() -> Option<OwnedFd> {
    std::fs::File::open("/dev/null").ok().map(OwnedFd::from)
}

/// A connected client.
pub(crate) struct Client {
    sock: OwnedFd,
    /// Peer credentials of the process (0 and `u32::MAX` when unknown).
    pub pid: u32,
    pub uid: u32,
    /// The table indices of the endpoints it owns.
    pub endpoints: Vec<usize>,
}

/// A request read from a client.
pub(crate) struct Incoming {
    pub client: ClientId,
    pub req_id: u32,
    pub req: Request,
    /// Descriptors that came with it.
    pub fds: Vec<OwnedFd>,
}

/// The control server (see the module documentation).
pub(crate) struct ControlServer {
    listener: Option<OwnedFd>,
    /// The listener's path, removed at shutdown.
    path: Option<PathBuf>,
    clients: Vec<Option<Client>>,
    pkt: Vec<u8>,
    counters: Arc<Counters>,
    /// The descriptor kept in reserve (see the module docs).
    reserve: Option<OwnedFd>,
    /// The listener is out of the poller until a descriptor frees.
    resting: bool,
    /// Most idle connections per process and per user.
    idle_per_process: u32,
    idle_per_user: u32,
    /// The engine's limit of open files (its soft `RLIMIT_NOFILE`, raised
    /// to the hard one at start-up) and the descriptors kept free below
    /// it for others.
    nofile: u64,
    fd_reserve: u64,
    /// Requests that cost descriptors which may still pass before the
    /// engine's open descriptors are counted again (each costs at most
    /// [`FDS_PER_OBJECT`]): counting reads `/proc/self/fd`, whose length
    /// grows with what the engine holds.
    fd_margin: std::cell::Cell<u64>,
}

/// The most descriptors one new object keeps open in the engine (a
/// segment and a doorbell, with one to spare).
const FDS_PER_OBJECT: u64 = 4;

impl ControlServer {
    /// A server listening at `path` (if any), its listener registered with
    /// `poller`.
    pub(crate) fn new(
        cfg: &crate::config::EngineConfig,
        poller: &Poller,
        counters: Arc<Counters>,
    ) -> io::Result<ControlServer> {
        let path = cfg.control_socket.clone();
        let listener = match &path {
            Some(p) => Some(sys::listen_seqpacket(p)?),
            None => None,
        };
        if let Some(l) = &listener {
            poller.add(l.as_raw_fd(), Token::Listener)?;
        }
        let nofile = sys::raise_nofile_limit()
            .or_else(|_| sys::nofile_limit())
            .unwrap_or(u64::MAX);
        Ok(ControlServer {
            listener,
            path,
            clients: Vec::new(),
            pkt: vec![0; control::MAX_PACKET + 1],
            counters,
            reserve: open_reserve(),
            resting: false,
            idle_per_process: cfg.client_idle_connections,
            idle_per_user: cfg.user_idle_connections,
            nofile,
            // A reserve of at most a quarter of the limit: an engine
            // started with few descriptors still serves its processes.
            fd_reserve: (cfg.fd_reserve as u64).min(nofile / 4),
            fd_margin: std::cell::Cell::new(0),
        })
    }

    /// Whether the engine's free descriptors are down to its reserve: a
    /// new object that costs descriptors is then refused (the caller
    /// counts it), so that what is left serves new connections.
    pub(crate) fn fds_short(&self) -> bool {
        if self.fd_reserve == 0 {
            return false;
        }
        // Far from the reserve at the last count: no need to count again
        // yet (connections accepted meanwhile are the EMFILE handling's).
        let margin = self.fd_margin.get();
        if margin > 0 {
            self.fd_margin.set(margin - 1);
            return false;
        }
        // Unknown (no /proc): the EMFILE handling is all there is.
        let Ok(open) = sys::open_fds() else {
            return false;
        };
        let room = self
            .nofile
            .saturating_sub(open.saturating_add(self.fd_reserve));
        // Half the room, in objects, before the next count.
        self.fd_margin.set(room / (2 * FDS_PER_OBJECT));
        room == 0
    }

    /// Accept the clients waiting on the listener (a bounded number per
    /// wake-up), never spinning on a listener it cannot accept from.
    pub(crate) fn accept(&mut self, poller: &Poller) {
        let Some(l) = self.listener.as_ref() else {
            return;
        };
        let mut fresh = Vec::new();
        for _ in 0..ACCEPTS_PER_WAKEUP {
            match sys::accept(l) {
                Ok(fd) => fresh.push(fd),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    // No descriptor left (the kernel says so before it
                    // looks for a connection): take the waiting one, if
                    // any, on the reserve and close it, so that it does
                    // not hang and the listener does not stay readable.
                    match self.reserve.take() {
                        Some(r) => {
                            drop(r);
                            let got = sys::accept(l).map(drop);
                            self.reserve = open_reserve();
                            match got {
                                Ok(()) => {
                                    self.counters.engine(EngineCounter::ControlDropFdLimit, 1);
                                }
                                // Nothing was waiting.
                                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                                Err(_) => {
                                    self.counters.engine(EngineCounter::ControlAcceptErrors, 1);
                                    break;
                                }
                            }
                        }
                        None => {
                            // Not even that: stop watching the listener
                            // until a client leaves (the connections wait
                            // in its backlog).
                            poller.remove(l.as_raw_fd());
                            self.resting = true;
                            break;
                        }
                    }
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::ECONNABORTED | libc::EPROTO)) => {
                    // That connection is gone; others may wait.
                    self.counters.engine(EngineCounter::ControlAcceptErrors, 1);
                }
                Err(_) => {
                    // Out of kernel memory, or worse: try again at the
                    // next wake-up.
                    self.counters.engine(EngineCounter::ControlAcceptErrors, 1);
                    break;
                }
            }
        }
        for fd in fresh {
            if self.over_idle_limit(&fd) {
                self.counters.engine(EngineCounter::ControlDropIdleLimit, 1);
                continue; // closed
            }
            self.add_client(fd, poller);
        }
    }

    /// Whether a new connection's process or user already holds its most
    /// idle connections (with no endpoint).
    fn over_idle_limit(&self, sock: &OwnedFd) -> bool {
        let Some((pid, uid)) = sys::peer_cred(sock.as_raw_fd()) else {
            return false;
        };
        let (mut by_pid, mut by_uid) = (0u32, 0u32);
        for c in self.clients.iter().flatten() {
            if c.endpoints.is_empty() {
                by_pid += (pid != 0 && c.pid == pid) as u32;
                by_uid += (c.uid == uid) as u32;
            }
        }
        by_pid >= self.idle_per_process || by_uid >= self.idle_per_user
    }

    /// A descriptor freed (a client left): take a reserve again if it was
    /// spent, and watch the listener again if it was resting.
    fn fd_freed(&mut self, poller: &Poller) {
        if self.reserve.is_none() {
            self.reserve = open_reserve();
        }
        if self.resting {
            if let Some(l) = &self.listener {
                self.resting = poller.add(l.as_raw_fd(), Token::Listener).is_err();
            }
        }
    }

    /// Serve a connected control socket as a new client.
    pub(crate) fn add_client(&mut self, sock: OwnedFd, poller: &Poller) {
        let _ = sys::set_nonblocking(sock.as_raw_fd());
        let (pid, uid) = sys::peer_cred(sock.as_raw_fd()).unwrap_or((0, u32::MAX));
        let idx = match self.clients.iter().position(|c| c.is_none()) {
            Some(i) => i,
            None => {
                self.clients.push(None);
                self.clients.len() - 1
            }
        };
        if poller.add(sock.as_raw_fd(), Token::Client(idx)).is_err() {
            return;
        }
        self.clients[idx] = Some(Client {
            sock,
            pid,
            uid,
            endpoints: Vec::new(),
        });
        self.counters.engine(EngineCounter::ControlAccepted, 1);
    }

    /// Read what client `ci` sent: its requests, in order, into `out`.
    /// True if its socket closed (the process is gone or done): the caller
    /// handles the requests first, then reclaims the client.
    pub(crate) fn read(&mut self, ci: ClientId, out: &mut Vec<Incoming>) -> bool {
        let mut pkt = std::mem::take(&mut self.pkt);
        let mut closed = false;
        for _ in 0..PACKETS_PER_WAKEUP {
            let Some(c) = self.client(ci) else {
                break;
            };
            let fd = c.sock.as_raw_fd();
            let mut fds = Vec::new();
            // The buffer holds one byte more than the largest packet: a
            // packet that fills it is too long.
            match sys::recv_packet_checked(fd, &mut pkt, &mut fds, true) {
                Ok(r) if r.len == 0 && !r.truncated => {
                    if sys::peer_closed(fd) {
                        closed = true;
                        break;
                    }
                    // A zero-length packet, not the end: refused, counted,
                    // the connection kept. It has no request id to answer.
                    self.counters.engine(EngineCounter::ControlBad, 1);
                    self.counters.engine(EngineCounter::ControlDropEmpty, 1);
                }
                Ok(r) if r.truncated || r.len > control::MAX_PACKET => {
                    // Too long (or too many descriptors): answered, with
                    // its request id when the header came through.
                    self.counters.engine(EngineCounter::ControlBad, 1);
                    self.counters.engine(EngineCounter::ControlDropOversize, 1);
                    let id = Request::peek_id(&pkt[..r.len.min(pkt.len())]).unwrap_or(0);
                    self.reply(ci, id, Reply::Error(ErrorCode::BadRequest), &[]);
                }
                Ok(r) => match Request::decode(&pkt[..r.len]) {
                    Ok((req_id, req)) => out.push(Incoming {
                        client: ci,
                        req_id,
                        req,
                        fds,
                    }),
                    Err(_) => {
                        self.counters.engine(EngineCounter::ControlBad, 1);
                        let id = Request::peek_id(&pkt[..r.len]).unwrap_or(0);
                        self.reply(ci, id, Reply::Error(ErrorCode::BadRequest), &[]);
                    }
                },
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        self.pkt = pkt;
        closed
    }

    /// Send a reply (or, with `req_id` 0, a notice) to client `ci`.
    pub(crate) fn reply(&self, ci: ClientId, req_id: u32, r: Reply, fds: &[RawFd]) {
        if let Some(c) = self.client(ci) {
            // Non-blocking: a client that does not read its control socket
            // loses its own replies (counted), never stalls the engine.
            if sys::send_packet(c.sock.as_raw_fd(), &r.encode(req_id), fds).is_err() {
                self.counters.engine(EngineCounter::ControlRepliesLost, 1);
            }
        }
    }

    /// Which process client `ci` is, for the limits counted per process:
    /// its process id, or (when the kernel could not tell it) the
    /// connection itself. None if there is no such client.
    pub(crate) fn proc_key(&self, ci: ClientId) -> Option<ProcKey> {
        self.client(ci).map(|c| match c.pid {
            0 => (0, ci),
            pid => (pid, usize::MAX),
        })
    }

    #[inline]
    pub(crate) fn client(&self, ci: ClientId) -> Option<&Client> {
        self.clients.get(ci).and_then(|c| c.as_ref())
    }

    #[inline]
    pub(crate) fn client_mut(&mut self, ci: ClientId) -> Option<&mut Client> {
        self.clients.get_mut(ci).and_then(|c| c.as_mut())
    }

    /// Client slots (live or not): indices are `0..len()`.
    pub(crate) fn len(&self) -> usize {
        self.clients.len()
    }

    /// Stop serving client `ci` (its socket is closed); the caller
    /// reclaims what it held: the table indices of its endpoints.
    pub(crate) fn remove(&mut self, ci: ClientId, poller: &Poller) -> Option<Vec<usize>> {
        let c = self.clients.get_mut(ci)?.take()?;
        poller.remove(c.sock.as_raw_fd());
        self.counters.engine(EngineCounter::ControlClosed, 1);
        let Client {
            sock, endpoints, ..
        } = c;
        drop(sock);
        self.fd_freed(poller);
        Some(endpoints)
    }

    /// Remove the listener's socket file (at shutdown).
    pub(crate) fn unlink(&self) {
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// What a system's set-up module sees of the clients: their replies and
/// who they are.
impl Clients for ControlServer {
    fn reply(&self, ci: ClientId, req_id: u32, r: Reply, fds: &[RawFd]) {
        ControlServer::reply(self, ci, req_id, r, fds);
    }

    fn proc_key(&self, ci: ClientId) -> Option<ProcKey> {
        ControlServer::proc_key(self, ci)
    }

    fn pid(&self, ci: ClientId) -> Option<u32> {
        self.client(ci).map(|c| c.pid)
    }

    fn uid(&self, ci: ClientId) -> Option<u32> {
        self.client(ci).map(|c| c.uid)
    }

    fn slots(&self) -> usize {
        self.len()
    }
}
