//! The engine's one epoll set and what its tokens mean: every file
//! descriptor the engine sleeps on (the listener, client sockets,
//! endpoint doorbells, the wire's socket, the admin eventfd, SPINE's
//! raw-frame ports) is registered
//! with a [`Token`] that says which part it belongs to.

use std::io;
use std::os::fd::RawFd;

use unet_sys::Epoll;

const KIND_SHIFT: u32 = 56;

/// Which source a readiness event is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Token {
    /// The control socket's listener.
    Listener,
    /// A client's control socket (client index).
    Client(usize),
    /// An endpoint's doorbell (table index).
    Doorbell(usize),
    /// The wire's socket.
    Wire,
    /// The admin eventfd: new in-process clients, stop, a finished
    /// verification.
    Admin,
    /// The doorbell of a VI the engine carries (its id).
    ViDoorbell(usize),
    /// The doorbell of a UDM job (its id).
    UdmDoorbell(usize),
    /// SPINE's peer queues: their epoll set (the adapter's doorbell for
    /// its peers, their processes' pidfds).
    Peers,
    /// A SPINE raw-frame port's socket (a frame waits on its ring).
    Ports,
}

impl Token {
    fn encode(self) -> u64 {
        let (k, i) = match self {
            Token::Listener => (1, 0),
            Token::Client(i) => (2, i),
            Token::Doorbell(i) => (3, i),
            Token::Wire => (4, 0),
            Token::Admin => (5, 0),
            Token::ViDoorbell(i) => (6, i),
            Token::UdmDoorbell(i) => (7, i),
            Token::Peers => (8, 0),
            Token::Ports => (9, 0),
        };
        (k << KIND_SHIFT) | i as u64
    }

    fn decode(t: u64) -> Option<Token> {
        let i = (t & ((1 << KIND_SHIFT) - 1)) as usize;
        Some(match t >> KIND_SHIFT {
            1 => Token::Listener,
            2 => Token::Client(i),
            3 => Token::Doorbell(i),
            4 => Token::Wire,
            5 => Token::Admin,
            6 => Token::ViDoorbell(i),
            7 => Token::UdmDoorbell(i),
            8 => Token::Peers,
            9 => Token::Ports,
            _ => return None,
        })
    }
}

/// The epoll set.
pub(crate) struct Poller {
    epoll: Epoll,
    raw: Vec<u64>,
}

impl Poller {
    pub(crate) fn new() -> io::Result<Poller> {
        Ok(Poller {
            epoll: Epoll::new()?,
            raw: Vec::with_capacity(64),
        })
    }

    /// Watch `fd` for input (level-triggered).
    pub(crate) fn add(&self, fd: RawFd, t: Token) -> io::Result<()> {
        self.epoll.add(fd, t.encode())
    }

    /// Watch `fd` for input, edge-triggered (doorbells: nothing is read
    /// back).
    pub(crate) fn add_edge(&self, fd: RawFd, t: Token) -> io::Result<()> {
        self.epoll.add_edge(fd, t.encode())
    }

    /// The set's own descriptor: readable while a source it watches is
    /// ready (another epoll set may watch it).
    pub(crate) fn raw_fd(&self) -> RawFd {
        use std::os::fd::AsRawFd;
        self.epoll.fd().as_raw_fd()
    }

    pub(crate) fn remove(&self, fd: RawFd) {
        self.epoll.remove(fd);
    }

    /// Wait up to `timeout_ms` (0: do not wait, -1: forever) for the
    /// sources that are ready, into `out` (emptied first).
    pub(crate) fn wait(&mut self, out: &mut Vec<Token>, timeout_ms: i32) {
        out.clear();
        if self.epoll.wait(&mut self.raw, timeout_ms).is_ok() {
            out.extend(self.raw.iter().filter_map(|&t| Token::decode(t)));
        }
    }
}
