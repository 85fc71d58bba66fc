//! The unet engine: the trusted software network interface.
//!
//! It owns every endpoint of one adapter and runs one single-threaded,
//! message-driven loop ([`Dispatcher`]): it takes send descriptors from
//! endpoint rings, checks them, delivers locally (copying into the
//! receiver's free buffers) or over the UDP [`wire`], runs the U-Net/SLE
//! applets attached to endpoints, sets up direct connections between local
//! endpoints and then stays out of their data path, and reclaims what a
//! client held when its control connection closes.
//!
//! It runs *embedded* ([`Engine::start`]: a thread inside the application,
//! reached through in-process socket pairs, no set-up), as a *daemon* (the
//! same thing with [`EngineConfig::control_socket`] set, which processes
//! reach over a Unix socket), or stepped by its caller ([`Dispatcher`],
//! invoker mode: tests, fuzzing, benchmarks). The layout of everything
//! shared lives in the `unet-abi` crate; the set-up protocol in
//! `unet-control`.
//!
//! # Parts
//!
//! Each part owns its state; dependencies point one way, from the
//! dispatcher down:
//!
//! | module | part |
//! |---|---|
//! | `dispatcher` | the loop; owns the parts; [`Dispatcher::step`] |
//! | `part` | the one shape of every part of the loop: a turn's work, its next deadline, its wake-ups |
//! | [`invoker`] | driving an engine on the caller's thread: a local client, raw endpoints |
//! | `setup` | what each control request does; reclaiming a client |
//! | `server` | the control server: clients, their sockets and credentials |
//! | `clients` | the clients as each system's set-up sees them: replies, processes and users, what they are charged |
//! | `datapath` | send descriptors checked and sent by route; delivery through applets |
//! | `routes` | what a channel leads to: local, direct, remote (one place per kind) |
//! | `endpoints` | the endpoint table and U-Net delivery |
//! | `direct` | direct connections' segments |
//! | `remote` | remote channels: handshake and the wire |
//! | `applets` | the applet host: runners, queued arrivals, verification off the loop |
//! | `udm` | UDM jobs and nodes: the buffered case of two-case delivery, virtual buffers |
//! | [`wire`] | the transport: frames, fragmentation, the UDP port |
//! | `poller` | the epoll set and its tokens |

use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

mod clients;
mod config;
mod control;
pub mod counters;
mod dispatch;
mod part;
mod poller;
mod udm;
mod unet;
mod vbuf;
mod via;
pub mod wire;

pub use dispatch::invoker;

pub use config::{
    default_allow_peers, EngineConfig, DEFAULT_APPLET_FUEL_MAX, DEFAULT_APPLET_HEAP_MAX,
    DEFAULT_CLIENT_IDLE_CONNECTIONS, DEFAULT_CLIENT_MEMORY, DEFAULT_LIVENESS_TIMEOUT,
    DEFAULT_PEER_CHANNELS_MAX, DEFAULT_PEER_HALF_OPEN_MAX, DEFAULT_USER_IDLE_CONNECTIONS,
};
pub use config::{
    DEFAULT_CLIENT_LISTENERS, DEFAULT_CLIENT_REGIONS, DEFAULT_CLIENT_VIS, DEFAULT_FD_RESERVE,
    DEFAULT_PEER_IP_CHANNELS_MAX, DEFAULT_PEER_IP_HALF_OPEN_MAX, DEFAULT_VI_PENDING_MAX,
    DEFAULT_VI_PENDING_PER_IP, DEFAULT_VI_PENDING_PER_PEER,
};
pub use config::{DEFAULT_CLIENT_UDM_JOBS, DEFAULT_CLIENT_UDM_NODES};
pub use config::{DEFAULT_VI_BREAK_TIMEOUT, DEFAULT_VI_HELD_BUDGET};
pub use dispatch::dispatcher::Dispatcher;
pub use ipnet::IpNet;
pub use unet::endpoints::MAX_CHANNELS;
pub use unet_control::{EndpointAddr, ErrorCode, Limits, PathChoice};
use unet_sys as sys;

/// A running engine on its own thread.
pub struct Engine {
    shared: Arc<dispatch::dispatcher::Shared>,
    thread: Option<JoinHandle<()>>,
    /// The loop thread's id (`gettid`).
    tid: u32,
    udp: Option<SocketAddr>,
    engine_id: u64,
}

impl Engine {
    /// Start an engine thread.
    pub fn start(cfg: EngineConfig) -> io::Result<Engine> {
        let mut d = Dispatcher::new(cfg)?;
        let shared = d.shared().clone();
        let udp = d.udp_addr();
        let engine_id = d.engine_id();
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("unet-engine".into())
            .spawn(move || {
                let _ = tx.send(sys::thread_id());
                d.run()
            })?;
        let tid = rx.recv().unwrap_or(0);
        Ok(Engine {
            shared,
            thread: Some(thread),
            tid,
            udp,
            engine_id,
        })
    }

    /// A new control connection to this engine (one end of a socket pair;
    /// the engine serves the other end like any client).
    pub fn connect(&self) -> io::Result<OwnedFd> {
        let (mine, theirs) = sys::seqpacket_pair()?;
        self.shared
            .new_clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(theirs);
        self.shared.admin.notify();
        Ok(mine)
    }

    /// The UDP address of the engine's wire, if it has one.
    pub fn udp_addr(&self) -> Option<SocketAddr> {
        self.udp
    }

    /// The engine's incarnation id.
    pub fn engine_id(&self) -> u64 {
        self.engine_id
    }

    /// The id of the thread that runs the engine's loop (as
    /// `/proc/self/task/` names it): what it costs can be measured from
    /// outside.
    pub fn thread_id(&self) -> u32 {
        self.tid
    }

    /// Stop the engine and wait for its thread. Everything it held is
    /// reclaimed; its control socket file is removed.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.admin.notify();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.halt();
    }
}
