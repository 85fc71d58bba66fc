//! The unet engine: the trusted software network interface.
//!
//! It owns every endpoint of one adapter and runs one single-threaded,
//! message-driven loop ([`core`]): it takes send descriptors from endpoint
//! rings, checks them, delivers locally (copying into the receiver's free
//! buffers) or over the UDP [`wire`], sets up direct connections between
//! local endpoints and then stays out of their data path, and reclaims what a
//! client held when its control connection closes.
//!
//! It runs *embedded* ([`Engine::start`]: a thread inside the application,
//! reached through in-process socket pairs, no set-up) or as a *daemon*
//! (the same thing with [`EngineConfig::control_socket`] set, which processes
//! reach over a Unix socket). The layout of everything shared lives in the
//! `unet-abi` crate; the set-up protocol in [`control`].

use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub mod core;
pub mod counters;
mod remote;
pub mod wire;

pub use unet_control::{EndpointAddr, ErrorCode, PathChoice};
use unet_sys as sys;

/// How an engine is set up.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Listen for client processes on this Unix socket path (daemon mode, or
    /// an embedded engine shared with child processes).
    pub control_socket: Option<PathBuf>,
    /// Bind the UDP wire here (e.g. `0.0.0.0:7700`, or port 0 for any).
    pub udp_bind: Option<SocketAddr>,
    /// Largest UDP datagram the wire sends (1472 for an Ethernet MTU;
    /// larger on loopback).
    pub max_datagram: usize,
    /// Fault injection: drop this many outgoing datagrams per million.
    pub wire_drop_ppm: u32,
    /// Seed of the fault injector.
    pub wire_drop_seed: u64,
    /// Endpoint slots (and counter slots).
    pub max_endpoints: u32,
    /// Bytes of each ring of a direct connection (power of two).
    pub conn_ring_size: u32,
    /// How long the engine keeps polling after its last work before it
    /// sleeps. Zero by default: on small machines a polling engine takes the
    /// CPU its clients need (they spin while they wait), and its wake-up
    /// through a doorbell costs a few microseconds.
    pub idle_spin: Duration,
    /// Most bytes of shared memory one client may hold: its endpoints'
    /// segments and the direct connections it opened. The engine allocates
    /// (and populates) these segments for the client, so without a bound one
    /// process could make the engine take all the host's memory. A request
    /// beyond it is refused with `ErrorCode::QuotaExceeded`.
    pub client_memory: u64,
}

/// Default [`EngineConfig::client_memory`]: 4 GiB.
pub const DEFAULT_CLIENT_MEMORY: u64 = 4 << 30;

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            control_socket: None,
            udp_bind: None,
            max_datagram: 1472,
            wire_drop_ppm: 0,
            wire_drop_seed: 0,
            max_endpoints: 256,
            conn_ring_size: unet_abi::CONN_RING_DEFAULT,
            idle_spin: Duration::ZERO,
            client_memory: DEFAULT_CLIENT_MEMORY,
        }
    }
}

/// A running engine on its own thread.
pub struct Engine {
    shared: Arc<core::Shared>,
    thread: Option<JoinHandle<()>>,
    udp: Option<SocketAddr>,
    engine_id: u64,
}

impl Engine {
    /// Start an engine thread.
    pub fn start(cfg: EngineConfig) -> io::Result<Engine> {
        let shared = Arc::new(core::Shared {
            stop: Default::default(),
            admin: sys::EventFd::new()?,
            new_clients: Mutex::new(Vec::new()),
        });
        let mut c = core::Core::new(cfg, shared.clone())?;
        let udp = c.udp_addr();
        let engine_id = c.engine_id;
        let thread = std::thread::Builder::new()
            .name("unet-engine".into())
            .spawn(move || c.run())?;
        Ok(Engine {
            shared,
            thread: Some(thread),
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
