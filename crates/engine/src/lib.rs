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
//! # Where things are: a message's way through the engine
//!
//! One folder per system, each with its data-path half and its set-up
//! half; below them the parts every system shares. A folder imports only
//! folders below it, in this order: `dispatch` > `control` > `spine` > `udm` >
//! `via` > `unet` > `clients`, `part`, [`wire`], `poller`, `vbuf`, `config`,
//! [`counters`]. Read them in the order a message meets them:
//!
//! 1. **A client sends.** Its library (crate `unet`) writes the message
//!    into its endpoint's buffer area and a descriptor into the send ring
//!    (the layouts are `unet-abi`'s, mapped once through its checked
//!    views), and rings the doorbell if the engine sleeps.
//! 2. **The loop** (`dispatch/`): the [`Dispatcher`] owns every part and
//!    turns them on one thread (SPINE's message-driven dispatcher); it
//!    sleeps in `epoll` (`poller.rs`) when no part has work, until a
//!    doorbell, a control socket, a datagram or the nearest deadline.
//!    Every part has one shape (`part.rs`: a turn's work, its next
//!    deadline, its wake-ups armed), and the dispatcher runs one list of
//!    them, flushing the wire once per turn.
//!    [`invoker`] runs the same turns on the caller's thread.
//! 3. **U-Net/SLE** (`unet/`): the data path (`datapath.rs`) takes the
//!    descriptor, checks it, and sends it the way its channel's route says
//!    (`routes.rs`): delivered locally into the receiver's free buffers
//!    and receive ring (`endpoints.rs`), through the receiver's JIVE
//!    applet first if it has one (`applets.rs`, the applet host), into a
//!    buffered endpoint's virtual buffer when its queue is full
//!    (`backlog.rs`, pages kept by `vbuf.rs`), or out on a remote channel
//!    (`remote.rs`: the channels' handshake over the wire port). Direct
//!    connections (`direct.rs`) are set up here and then leave the engine
//!    out of their data path. Endpoints are created, channels opened and
//!    closed, and applets attached by U-Net's set-up (`setup.rs`).
//! 4. **The wire** ([`wire`]): the port (`wire/port.rs`) is the one place
//!    frames enter and leave. Out: cut into fragments (`frag.rs`), framed
//!    (`frame/`), batched and sent over UDP (`udp/`). In: admitted
//!    (`admission.rs`), authenticated (`auth.rs`), its token and sender
//!    checked once, reassembled, and sorted once to the system it belongs
//!    to: U-Net's channels, VIA's inbox, UDM's links' inbox. Reliability
//!    for connections (VIs, UDM's links) is `reliable/`.
//! 5. **VIA** (`via/`): regions, VIs and discriminators (`vias.rs`); the
//!    VIs the engine carries to other engines (`vi_path.rs`, the receiving
//!    side in `vi_path/recv.rs`), moved on the loop's turns
//!    (`via_loop.rs`); their set-up (`setup.rs`, across engines
//!    `setup/engines.rs`).
//! 6. **UDM** (`udm/`): jobs and nodes, the buffered case of two-case
//!    delivery and the atomicity timeout (`mod.rs`, `timeout.rs`,
//!    `memory.rs`); the links that carry a job between engines (`link.rs`,
//!    their data path `remote.rs`); their set-up (`setup.rs`,
//!    `setup/links.rs`).
//! 7. **Control** (`control/`): the control server (`server.rs`: clients,
//!    sockets, credentials) reads a set-up request; `setup.rs` answers
//!    those that span the systems (Hello, Stat) and hands each other to
//!    its system's set-up half (`UnetSetup`, `ViaSetup`, `UdmSetup`),
//!    which borrows only the parts it changes and reaches the clients
//!    through `clients.rs`; work whose cost grows with memory runs on
//!    the set-up threads (`setup_thread.rs`, served in turn by
//!    `turns.rs`).
//!
//! 8. **SPINE** (`spine/`): extensions (JIVE classes) whose handlers run
//!    on active messages; one event queue for the adapter's own work and
//!    the handlers, run by its part; messages and reference-counted bulk
//!    buffers behind checked handles (`msgs.rs`); hosts' active messages
//!    come through U-Net's inbox (`unet/am.rs`) and leave as receive
//!    descriptors with `RECV_AM`; loading, listing and reclaiming in
//!    `setup.rs`.
//!
//! A new system is one more folder with its data-path part and its set-up
//! half, its frames sorted to an inbox of its own by the wire port, and
//! one line in the dispatcher.
//!
//! # Unsafe code
//!
//! `unsafe` is denied for the crate and allowed only in the modules that
//! reach shared memory or the OS, each saying why in its own doc; every
//! mapping they use is made once through `unet-abi`'s checked views:
//!
//! | module | why |
//! |---|---|
//! | `counters.rs` | the counters segment that `unet stat` maps |
//! | `unet/endpoints.rs` | endpoint segments: the header, the buffer area and a send descriptor's status in place (the data path reaches them only through its accessors) |
//! | `unet/backlog.rs` | a buffered endpoint's virtual buffer: records in place |
//! | `unet/direct.rs` | a direct connection's segment kept beside its view (made once, when the connection is made) |
//! | `via/vi_path.rs`, with `vi_path/recv.rs` | a VI's segment; messages gathered from and scattered into registered regions |
//! | `udm/shm.rs` | a UDM job's and its nodes' segments kept beside their views; messages in place in divert rings and virtual buffers |
//! | `wire/udp/socket.rs`, with its tests | the OS: socket options, control messages, `sendmmsg` and `recvmmsg` |
//! | `spine/trace.rs` | the CPU's time-stamp counter, the event graph's clock |
//! | `spine/peer.rs` | a peer segment's slots and data areas, read and written in place |
//! | `spine/framebuffer.rs` | a framebuffer's pixels written from a bulk buffer, its counters stored after them |
//! | `dispatch/invoker.rs` | invoker mode's raw endpoints, regions and VIs, mapped and driven by hand as a client would |

#![deny(unsafe_code)]

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
mod spine;
mod udm;
mod unet;
mod vbuf;
mod via;
pub mod wire;

pub use dispatch::invoker;
pub use spine::trace::{
    DumpError, TraceDump, TraceEvent, DEFAULT_CAPACITY as TRACE_DEFAULT_CAPACITY,
    LOOP_FIRST as TRACE_LOOP_FIRST, MAX_CAPACITY as TRACE_MAX_CAPACITY,
};

pub use config::{
    default_allow_peers, EngineConfig, DEFAULT_APPLET_FUEL_MAX, DEFAULT_APPLET_HEAP_MAX,
    DEFAULT_CLIENT_IDLE_CONNECTIONS, DEFAULT_CLIENT_MEMORY, DEFAULT_LIVENESS_TIMEOUT,
    DEFAULT_PEER_CHANNELS_MAX, DEFAULT_PEER_HALF_OPEN_MAX, DEFAULT_USER_IDLE_CONNECTIONS,
};
pub use config::{
    parse_spine_priorities, PortTx, DEFAULT_SPINE_PORT_RX_FRAMES, DEFAULT_SPINE_PRIORITIES,
    SPINE_EVENT_TYPES,
};
pub use config::{
    DEFAULT_CLIENT_LISTENERS, DEFAULT_CLIENT_REGIONS, DEFAULT_CLIENT_VIS, DEFAULT_FD_RESERVE,
    DEFAULT_PEER_IP_CHANNELS_MAX, DEFAULT_PEER_IP_HALF_OPEN_MAX, DEFAULT_VI_PENDING_MAX,
    DEFAULT_VI_PENDING_PER_IP, DEFAULT_VI_PENDING_PER_PEER,
};
pub use config::{DEFAULT_CLIENT_UDM_JOBS, DEFAULT_CLIENT_UDM_NODES};
pub use config::{DEFAULT_VI_BREAK_TIMEOUT, DEFAULT_VI_HELD_BUDGET};
pub use dispatch::dispatcher::{Dispatcher, LOOK_AFTER_WORK};
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
        let (thread, tid) = spawn_loop("unet-engine", move || d.run())?;
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
        halt(std::slice::from_ref(&self.shared), &mut self.thread);
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Start the thread named `name` that runs `body` (an engine's loop):
/// its handle and its id (`gettid`).
fn spawn_loop(
    name: &str,
    body: impl FnOnce() + Send + 'static,
) -> io::Result<(JoinHandle<()>, u32)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _ = tx.send(sys::thread_id());
            body()
        })?;
    Ok((thread, rx.recv().unwrap_or(0)))
}

/// Tell engines to stop and wait for the thread that runs them.
fn halt(shared: &[Arc<dispatch::dispatcher::Shared>], thread: &mut Option<JoinHandle<()>>) {
    for s in shared {
        s.stop.store(true, Ordering::Relaxed);
        s.admin.notify();
    }
    if let Some(t) = thread.take() {
        let _ = t.join();
    }
}

/// Several engines (adapters) taking turns on one thread of their own:
/// [`Engine`] for a host with fewer cores than adapters. Each engine is
/// whole (its own control socket, counters, wire and ports; its clients
/// and peers cannot tell); only the thread is shared, so that what one
/// hands another over a peer queue costs no switch between threads.
pub struct EngineGroup {
    shared: Vec<Arc<dispatch::dispatcher::Shared>>,
    thread: Option<JoinHandle<()>>,
    tid: u32,
    udp: Vec<Option<SocketAddr>>,
}

impl EngineGroup {
    /// Build an engine for each configuration (in order) and start the
    /// thread that runs them. Every configuration needs its own control
    /// socket and, with a wire, its own UDP address (port 0 picks one).
    pub fn start(cfgs: Vec<EngineConfig>) -> io::Result<EngineGroup> {
        let engines = cfgs
            .into_iter()
            .map(Dispatcher::new)
            .collect::<io::Result<Vec<_>>>()?;
        let shared = engines.iter().map(|d| d.shared().clone()).collect();
        let udp = engines.iter().map(Dispatcher::udp_addr).collect();
        let mut group = dispatch::group::Group::new(engines)?;
        let (thread, tid) = spawn_loop("unet-engines", move || group.run())?;
        Ok(EngineGroup {
            shared,
            thread: Some(thread),
            tid,
            udp,
        })
    }

    /// Each engine's UDP address, if it has a wire, in the order of the
    /// configurations.
    pub fn udp_addrs(&self) -> &[Option<SocketAddr>] {
        &self.udp
    }

    /// The id of the thread that runs the engines (`/proc/self/task/`).
    pub fn thread_id(&self) -> u32 {
        self.tid
    }

    /// Stop every engine and wait for their thread; everything they held
    /// is reclaimed and their control socket files removed.
    pub fn stop(mut self) {
        halt(&self.shared, &mut self.thread);
    }
}

impl Drop for EngineGroup {
    fn drop(&mut self) {
        halt(&self.shared, &mut self.thread);
    }
}
