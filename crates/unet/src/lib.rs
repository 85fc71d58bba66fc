//! unet: protected, user-level message passing with kernel-bypass latency.
//!
//! The model is U-Net's (see the U-Net/SLE paper, section 2 and Figure 1):
//! an application creates an [`Endpoint`] — a buffer area and send, receive
//! and free queues in shared memory — and sends on [`Channel`]s granted by the
//! engine, the trusted software network interface. Two local endpoints that
//! need no engine processing talk over a *direct path* (a ring shared by the
//! two processes only); everything else goes through the engine, locally or
//! over its UDP wire. Both paths present the same calls.
//!
//! ```no_run
//! use unet::{Engine, EngineConfig, Session, EndpointConfig, ChannelOptions};
//! let engine = Engine::start(EngineConfig::default())?;
//! let session = Session::embedded(&engine)?;
//! let mut a = session.create_endpoint(EndpointConfig::default())?;
//! let mut b = session.create_endpoint(EndpointConfig::default())?;
//! let ch = a.open_channel(b.addr(), ChannelOptions::default())?;
//! a.send(ch, b"hello")?;
//! let mut buf = [0u8; 64];
//! let r = b.recv(&mut buf, None)?;
//! assert_eq!(&buf[..r.len], b"hello");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! UDM's jobs of nodes that `inject` and `extract` small messages with
//! two-case delivery are in [`udm`] (`docs/udm.md`); SPINE's extensions
//! and active messages in [`spine`], its links over the wire in
//! [`spine_wire`], its raw-frame ports on network interfaces in
//! [`spine_port`] and the framebuffers extensions write in
//! [`spine_framebuffer`].
//!
//! The shared-memory layout is in the `unet-abi` crate; a C ABI is in
//! [`ffi`] with its header at `include/unet.h`.
//!
//! `unsafe` code is denied here and allowed only in the modules that say
//! in their documentation why they need it: [`ffi`] (the C ABI), `shm`
//! (the mappings of shared segments: headers, rings, regions, message
//! slots), `direct` (the direct path's rings), `endpoint::arena` (the
//! managed send's copy into the buffer area), `via::desc` (a posted
//! descriptor's copies to and from its regions) and `udm::upcall` (a node
//! shared by its main code and its handler thread).

#![deny(unsafe_code)]

// The modules allowed `unsafe` code: these three, `endpoint::arena`,
// `via::desc` and `udm::upcall`.
#[allow(unsafe_code)]
mod direct;
mod endpoint;
#[allow(unsafe_code)]
pub mod ffi;
mod fifo;
pub mod peer;
mod session;
#[allow(unsafe_code)]
mod shm;
pub mod spine;
pub mod spine_framebuffer;
pub mod spine_port;
pub mod spine_tables;
pub mod spine_wire;
pub mod udm;
pub mod via;

pub use endpoint::{
    AppletOptions, Channel, ChannelOptions, Endpoint, EndpointConfig, Event, Placement, Recv,
    BUFFERED_DEFAULT,
};
pub use session::{
    socket_path, Session, SessionOptions, TraceState, DEFAULT_SOCKET, DEFAULT_TIMEOUT, SOCKET_ENV,
};
pub use unet_abi::FaultKind;
pub use unet_abi::{ClientCounter, Geometry, RecvDesc, SendStatus};
pub use unet_control::{EndpointAddr, ErrorCode, Limits, PathChoice};
#[cfg(feature = "embedded")]
pub use unet_engine::{Engine, EngineConfig};
pub use via::{
    CompletionQueue, ConnRequest, MemRegion, PostError, Reliability, Vi, ViAttributes,
    ViCompletion, ViError, ViQueue, ViSeg, ViServer, ViState, ViStats, WaitError, VI_MAX_SEGMENTS,
    VI_MAX_TRANSFER,
};

/// Errors of set-up calls.
#[derive(Debug)]
pub enum Error {
    /// An operating-system error.
    Io(std::io::Error),
    /// The engine refused the request.
    Engine(ErrorCode),
    /// A limit the engine sets each process or user is reached: its
    /// shared memory (`ErrorCode::QuotaExceeded`, or
    /// `ErrorCode::UserQuota` for the user's), its endpoints
    /// (`ErrorCode::EndpointQuota`) or its other objects: memory regions,
    /// VIs, discriminators, connection requests, UDM jobs or nodes
    /// (`ErrorCode::ObjectQuota`). Others can still get what this
    /// process cannot; close something first. `UNET_EQUOTA` in C.
    Quota(ErrorCode),
    /// The engine's answer made no sense.
    Protocol(String),
    /// The engine closed the control connection.
    EngineGone,
    /// The engine did not answer a control request within the session's
    /// timeout (this long; [`SessionOptions::timeout`]): it is stopped,
    /// stuck or overloaded. `UNET_ETIMEDOUT` in C.
    Timeout(std::time::Duration),
    /// Invalid configuration or argument.
    Config(String),
    /// The applet or SPINE extension was refused (by JIVE's verifier or
    /// the engine's rules); the text says why.
    Rejected(String),
    /// This build of the library leaves the facility out (Cargo features
    /// `embedded` and `inline`); the text says which.
    Unsupported(String),
    /// The object is still in use (a memory region a posted descriptor
    /// uses); the text says which.
    InUse(String),
    /// No connection request came on a VI server's discriminator within
    /// this long ([`ViServer::wait_request`]). `UNET_ETIMEDOUT` in C.
    NoRequest(std::time::Duration),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Engine(c) => write!(f, "the engine refused: {c}"),
            Error::Quota(c) => write!(f, "the engine refused: {c}"),
            Error::Protocol(s) => write!(f, "control protocol error: {s}"),
            Error::EngineGone => f.write_str("the engine closed the control connection"),
            Error::Timeout(t) => write!(
                f,
                "the engine is not answering (no reply in {} ms)",
                t.as_millis()
            ),
            Error::Config(s) => f.write_str(s),
            Error::Rejected(s) => write!(f, "refused: {s}"),
            Error::Unsupported(s) => f.write_str(s),
            Error::InUse(s) => f.write_str(s),
            Error::NoRequest(t) => {
                write!(f, "no connection request came within {} ms", t.as_millis())
            }
        }
    }
}

impl std::error::Error for Error {}

impl From<ErrorCode> for Error {
    /// A refusal by the engine: [`Error::Quota`] for the limits of a
    /// process or user, [`Error::Engine`] otherwise.
    fn from(c: ErrorCode) -> Self {
        if c.is_quota() {
            Error::Quota(c)
        } else {
            Error::Engine(c)
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

/// Why a send did not happen. Only `Full` is worth retrying.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// The queue or ring is full: retry when the peer or engine catches up.
    Full,
    /// Not a channel this endpoint holds.
    BadChannel,
    /// The channel's peer is gone.
    PeerGone,
    /// Empty, or larger than the path can carry.
    TooLarge,
    /// Offset or length outside the buffer area.
    BadBuffer,
    /// `send` needs managed buffers; use `push_send` otherwise.
    Unmanaged,
    /// The endpoint's inline applet faulted while handling the send.
    AppletFault,
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SendError::Full => "queue full, retry",
            SendError::BadChannel => "not a channel of this endpoint",
            SendError::PeerGone => "the peer is gone",
            SendError::TooLarge => "message empty or too large for this path",
            SendError::BadBuffer => "buffer outside the buffer area",
            SendError::Unmanaged => "send() needs managed buffers; use push_send()",
            SendError::AppletFault => "the endpoint's applet faulted",
        })
    }
}

impl std::error::Error for SendError {}

/// Why a receive returned no message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvError {
    /// The next message needs a buffer of this many bytes; it stays queued.
    BufferTooSmall(usize),
    /// Nothing arrived in time.
    Timeout,
    /// The direct peer on this channel corrupted the connection.
    Broken(Channel),
}

impl std::fmt::Display for RecvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecvError::BufferTooSmall(n) => {
                write!(f, "the next message needs a buffer of {n} bytes")
            }
            RecvError::Timeout => f.write_str("timed out"),
            RecvError::Broken(c) => {
                write!(f, "the direct peer on channel {} broke the connection", c.0)
            }
        }
    }
}

impl std::error::Error for RecvError {}
