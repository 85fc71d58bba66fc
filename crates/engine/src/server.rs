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

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;

use unet_abi::EngineCounter;
use unet_control::{self as control, ErrorCode, Reply, Request};
use unet_sys as sys;

use crate::counters::Counters;
use crate::endpoints::ClientId;
use crate::poller::{Poller, Token};

/// Requests read from one client per wake-up.
const PACKETS_PER_WAKEUP: usize = 32;

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
}

impl ControlServer {
    /// A server listening at `path` (if any), its listener registered with
    /// `poller`.
    pub(crate) fn new(
        path: Option<PathBuf>,
        poller: &Poller,
        counters: Arc<Counters>,
    ) -> io::Result<ControlServer> {
        let listener = match &path {
            Some(p) => Some(sys::listen_seqpacket(p)?),
            None => None,
        };
        if let Some(l) = &listener {
            poller.add(l.as_raw_fd(), Token::Listener)?;
        }
        Ok(ControlServer {
            listener,
            path,
            clients: Vec::new(),
            pkt: vec![0; control::MAX_PACKET],
            counters,
        })
    }

    /// Accept every client waiting on the listener.
    pub(crate) fn accept(&mut self, poller: &Poller) {
        let Some(l) = self.listener.as_ref() else {
            return;
        };
        let mut fresh = Vec::new();
        while let Ok(fd) = sys::accept(l) {
            fresh.push(fd);
        }
        for fd in fresh {
            self.add_client(fd, poller);
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
            let mut fds = Vec::new();
            match sys::recv_packet(c.sock.as_raw_fd(), &mut pkt, &mut fds, true) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => match Request::decode(&pkt[..n]) {
                    Ok((req_id, req)) => out.push(Incoming {
                        client: ci,
                        req_id,
                        req,
                        fds,
                    }),
                    Err(_) => {
                        self.counters.engine(EngineCounter::ControlBad, 1);
                        self.reply(ci, 0, Reply::Error(ErrorCode::BadRequest), &[]);
                    }
                },
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    self.counters.engine(EngineCounter::ControlBad, 1);
                }
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
            // loses its own replies, never stalls the engine.
            let _ = sys::send_packet(c.sock.as_raw_fd(), &r.encode(req_id), fds);
        }
    }

    /// Which process client `ci` is, for the limits counted per process:
    /// its process id, or (when the kernel could not tell it) the
    /// connection itself. None if there is no such client.
    pub(crate) fn proc_key(&self, ci: ClientId) -> Option<(u32, usize)> {
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

    /// Stop serving client `ci`; the caller reclaims what it held.
    pub(crate) fn remove(&mut self, ci: ClientId, poller: &Poller) -> Option<Client> {
        let c = self.clients.get_mut(ci)?.take()?;
        poller.remove(c.sock.as_raw_fd());
        self.counters.engine(EngineCounter::ControlClosed, 1);
        Some(c)
    }

    /// Remove the listener's socket file (at shutdown).
    pub(crate) fn unlink(&self) {
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}
