//! The C ABI: `extern "C"` functions over the Rust API, for other languages
//! to bind. The header is `include/unet.h`; the two must match exactly.
//!
//! Conventions:
//!
//! * Objects are opaque handles (`unet_engine*`, `unet_session*`,
//!   `unet_endpoint*`, and VIA's `unet_region*`, `unet_cq*`, `unet_vi*`,
//!   ...): boxed Rust values, created by `*_start`, `*_connect`,
//!   `*_embedded`, `*_create`, `*_listen` or `unet_register_memory` and
//!   released by the matching `*_stop`, `*_close` or `*_free`, which accept
//!   NULL.
//! * Functions return an `int`: 0 (or 1 for "got one" where documented) on
//!   success, a negative [`UNET_EFULL`]… status on failure. The thread's last
//!   failure is described by [`unet_last_error_message`].
//! * Every pointer is checked for NULL ([`UNET_EINVAL`]); no panic crosses
//!   the boundary (it is reported as [`UNET_EIO`]).
//! * An endpoint or a VI must be used by one thread at a time. A session,
//!   an engine, a memory region, a completion queue and a VI server may be
//!   shared between threads.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use unet_abi::{Geometry, RecvDesc, SendStatus};
use unet_control::{EndpointAddr, ErrorCode, PathChoice};
#[cfg(feature = "embedded")]
use unet_engine::{Engine, EngineConfig};

use crate::endpoint::{Channel, ChannelOptions, Endpoint, EndpointConfig, Event};
use crate::session::Session;
use crate::{Error, RecvError, SendError};

mod udm;
mod via;
pub use udm::*;
pub use via::*;

// -------------------------------------------------------------------------
// Status codes (enum unet_status)
// -------------------------------------------------------------------------

/// Success.
pub const UNET_OK: c_int = 0;
/// A queue or ring is full: retry later.
pub const UNET_EFULL: c_int = -1;
/// Not a channel this endpoint holds.
pub const UNET_EBADCHAN: c_int = -2;
/// The channel's peer is gone (closed, died, or broke the connection).
pub const UNET_EPEERGONE: c_int = -3;
/// The message is empty or larger than the path can carry.
pub const UNET_ETOOLARGE: c_int = -4;
/// Offset or length outside the buffer area.
pub const UNET_EBADBUF: c_int = -5;
/// Nothing arrived in time.
pub const UNET_ETIMEDOUT: c_int = -6;
/// The receive buffer is too small; the needed size is returned.
pub const UNET_ETOOSMALL: c_int = -7;
/// The destination refused the channel.
pub const UNET_EREFUSED: c_int = -8;
/// No endpoint with that id, or nobody listens on that VI discriminator.
pub const UNET_ENOENDPOINT: c_int = -9;
/// Another refusal by the engine (see the error message).
pub const UNET_EENGINE: c_int = -10;
/// An operating-system or protocol error, or an internal failure.
pub const UNET_EIO: c_int = -11;
/// A NULL pointer or an invalid argument.
pub const UNET_EINVAL: c_int = -12;
/// The applet was refused (the reason is in `unet_last_error_message`).
pub const UNET_EREJECTED: c_int = -13;
/// This build of the library leaves the facility out (the embedded engine
/// or the inline placement, Cargo features `embedded` and `inline`).
pub const UNET_ENOTSUP: c_int = -14;
/// A limit the engine sets each process or user is reached: its shared
/// memory or its endpoints (the message says which). Others can still get
/// what this process cannot; close something first.
pub const UNET_EQUOTA: c_int = -15;
/// The object is in use: a memory region a posted descriptor uses (it
/// stays registered), or a VI discriminator another session listens on.
pub const UNET_EINUSE: c_int = -16;
/// A VI wait found no descriptor outstanding on that queue: nothing can
/// complete (`unet_vi_state` says whether the VI is broken).
pub const UNET_ENOTPOSTED: c_int = -17;
/// No message is available: a UDM extract, peek or dispose with the
/// message-available flag clear (UDM's `bad-dispose`).
pub const UNET_EEMPTY: c_int = -18;

/// `unet_recv_desc::flags`: the payload is inline in `data`.
pub const UNET_RECV_INLINE: u8 = unet_abi::RECV_INLINE;
/// Largest inline payload, the size of `unet_recv_desc::data`.
pub const UNET_INLINE_MAX: usize = unet_abi::INLINE_MAX;
/// Most buffers one received message spans.
pub const UNET_MAX_RX_BUFFERS: usize = unet_abi::MAX_RX_BUFFERS;
/// `unet_push_send`'s position for a direct channel (sent at once).
pub const UNET_POS_SENT: u64 = u64::MAX;

/// `unet_open_channel` path: direct when possible, else the engine.
pub const UNET_PATH_AUTO: c_int = PathChoice::Auto as c_int;
/// `unet_open_channel` path: the direct path or an error.
pub const UNET_PATH_DIRECT: c_int = PathChoice::Direct as c_int;
/// `unet_open_channel` path: always through the engine.
pub const UNET_PATH_ENGINE: c_int = PathChoice::Engine as c_int;

/// `unet_event::kind`: a peer opened a channel to this endpoint.
pub const UNET_EVENT_CHANNEL_OPENED: u32 = 1;
/// `unet_event::kind`: the peer of a channel is gone.
pub const UNET_EVENT_PEER_GONE: u32 = 2;
/// `unet_event::kind`: an applet invocation faulted (`peer_endpoint` holds
/// the fault class).
pub const UNET_EVENT_APPLET_FAULT: u32 = 5;
/// `unet_event::kind`: the applet was detached after repeated faults
/// (`peer_endpoint` holds the fault class).
pub const UNET_EVENT_APPLET_DETACHED: u32 = 6;

// -------------------------------------------------------------------------
// Types shared with C
// -------------------------------------------------------------------------

/// Opaque engine handle (`unet_engine` in C).
#[cfg(feature = "embedded")]
pub struct UnetEngine(Engine);
/// Opaque engine handle (`unet_engine` in C): never made by a library
/// built without the embedded engine (feature `embedded`).
#[cfg(not(feature = "embedded"))]
pub struct UnetEngine(std::convert::Infallible);
/// Opaque session handle (`unet_session` in C).
pub struct UnetSession(Session);
/// Opaque endpoint handle (`unet_endpoint` in C).
pub struct UnetEndpoint(Endpoint);

/// Options of a new endpoint (`unet_endpoint_config` in C). Numeric fields
/// that are 0 take their default; `accept` and `managed_buffers` are taken
/// as given (non-zero is true). [`unet_endpoint_config_init`] fills in the
/// defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct UnetEndpointConfig {
    /// Size of the buffer area in bytes (a multiple of 4096).
    pub buffer_area_size: u64,
    /// Size of each receive buffer (a multiple of 64).
    pub buffer_size: u32,
    /// Send queue capacity (a power of two).
    pub send_cap: u32,
    /// Receive queue capacity (a power of two).
    pub recv_cap: u32,
    /// Free queue capacity (a power of two).
    pub free_cap: u32,
    /// Event queue capacity (a power of two).
    pub event_cap: u32,
    /// Accept channels opened by others.
    pub accept: c_int,
    /// Let the library manage the buffer area (`unet_send`); 0 to drive the
    /// queues with `unet_push_send`, `unet_poll_recv_desc`, `unet_post_free`.
    pub managed_buffers: c_int,
}

/// A channel event (`unet_event` in C), 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UnetEvent {
    /// [`UNET_EVENT_CHANNEL_OPENED`] or [`UNET_EVENT_PEER_GONE`].
    pub kind: u32,
    /// The channel concerned (this endpoint's tag for it).
    pub channel: u16,
    /// Whether the channel uses the direct path (opened events).
    pub direct: u8,
    /// The peer's engine address family: 0 local, 4 IPv4, 6 IPv6.
    pub peer_family: u8,
    /// The peer's endpoint id (opened events).
    pub peer_endpoint: u32,
    /// The peer engine's UDP port (0 when local).
    pub peer_port: u16,
    /// Reserved, zero.
    pub reserved: u16,
    /// The peer engine's IP address (IPv4 in the first 4 bytes).
    pub peer_addr: [u8; 16],
}

const _: () = assert!(std::mem::size_of::<UnetEndpointConfig>() == 40);
const _: () = assert!(std::mem::size_of::<UnetEvent>() == 32);
const _: () = assert!(std::mem::size_of::<RecvDesc>() == 64);
const _: () = assert!(std::mem::align_of::<RecvDesc>() == 64);

// -------------------------------------------------------------------------
// Errors
// -------------------------------------------------------------------------

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(msg: impl Into<String>) {
    let mut s = msg.into();
    s.retain(|c| c != '\0');
    let c = CString::new(s).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

fn fail(code: c_int, msg: impl Into<String>) -> c_int {
    set_error(msg);
    code
}

fn error_status(e: &Error) -> c_int {
    match e {
        Error::Engine(ErrorCode::Refused) => UNET_EREFUSED,
        Error::Engine(ErrorCode::NoSuchEndpoint | ErrorCode::NoListener) => UNET_ENOENDPOINT,
        Error::Engine(ErrorCode::TagInUse) | Error::InUse(_) => UNET_EINUSE,
        Error::Engine(ErrorCode::NoSuchChannel) => UNET_EBADCHAN,
        Error::Engine(_) => UNET_EENGINE,
        Error::Quota(_) => UNET_EQUOTA,
        Error::Config(_) => UNET_EINVAL,
        Error::Rejected(_) => UNET_EREJECTED,
        Error::Unsupported(_) => UNET_ENOTSUP,
        Error::Io(_) | Error::Protocol(_) | Error::EngineGone => UNET_EIO,
        Error::Timeout(_) | Error::NoRequest(_) => UNET_ETIMEDOUT,
    }
}

fn fail_error(e: Error) -> c_int {
    fail(error_status(&e), e.to_string())
}

/// [`UNET_OK`], or the status of the error (with its message kept for
/// [`unet_last_error`]).
fn status(r: Result<(), Error>) -> c_int {
    match r {
        Ok(()) => UNET_OK,
        Err(e) => fail_error(e),
    }
}

/// Release a handle that `Box::into_raw` made (NULL is ignored), catching
/// a panic of its drop as every entry point does.
///
/// # Safety
/// `handle` is NULL or a `Box<T>` handle not yet released; invalid after
/// the call.
unsafe fn release<T>(handle: *mut T) {
    guard(|| {
        if !handle.is_null() {
            // SAFETY: a Box made by into_raw, released only once (the
            // caller's contract).
            drop(unsafe { Box::from_raw(handle) });
        }
        UNET_OK
    });
}

fn fail_send(e: SendError) -> c_int {
    let code = match e {
        SendError::Full => UNET_EFULL,
        SendError::BadChannel => UNET_EBADCHAN,
        SendError::PeerGone => UNET_EPEERGONE,
        SendError::TooLarge => UNET_ETOOLARGE,
        SendError::BadBuffer => UNET_EBADBUF,
        SendError::AppletFault => UNET_EENGINE,
        SendError::Unmanaged => UNET_EINVAL,
    };
    fail(code, e.to_string())
}

/// Run `f`, turning a panic into [`UNET_EIO`].
fn guard(f: impl FnOnce() -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            fail(UNET_EIO, format!("internal error: {what}"))
        }
    }
}

fn null(what: &str) -> c_int {
    fail(UNET_EINVAL, format!("{what} is NULL"))
}

/// A C string argument as bytes; `None` for NULL.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives the call.
unsafe fn c_bytes<'a>(p: *const c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        None
    } else {
        // SAFETY: non-NULL, NUL-terminated per the caller's contract.
        Some(unsafe { CStr::from_ptr(p) }.to_bytes())
    }
}

/// A text argument; Err(status) when not UTF-8.
fn text<'a>(b: &'a [u8], what: &str) -> Result<&'a str, c_int> {
    std::str::from_utf8(b).map_err(|_| fail(UNET_EINVAL, format!("{what} is not UTF-8")))
}

/// The endpoint behind a handle.
///
/// # Safety
/// `ep` is NULL or a handle from [`unet_endpoint_create`] not yet closed,
/// used by this thread only for the duration of the call.
unsafe fn endpoint<'a>(ep: *mut UnetEndpoint) -> Result<&'a mut Endpoint, c_int> {
    // SAFETY: per the caller's contract the pointer is NULL or a live,
    // exclusively used Box<UnetEndpoint>.
    match unsafe { ep.as_mut() } {
        Some(e) => Ok(&mut e.0),
        None => Err(null("endpoint")),
    }
}

/// Describes the last failure on the calling thread: a NUL-terminated
/// string, empty when nothing has failed yet. It stays valid until the next
/// failing call on this thread. Never NULL.
#[no_mangle]
pub extern "C" fn unet_last_error_message() -> *const c_char {
    static EMPTY: &CStr = c"";
    catch_unwind(|| LAST_ERROR.with(|e| e.borrow().as_ptr())).unwrap_or(EMPTY.as_ptr())
}

/// A short static name for a status code (e.g. `"UNET_EFULL"`). Never NULL.
#[no_mangle]
pub extern "C" fn unet_status_name(status: c_int) -> *const c_char {
    let s: &'static CStr = match status {
        UNET_OK => c"UNET_OK",
        1 => c"1",
        UNET_EFULL => c"UNET_EFULL",
        UNET_EBADCHAN => c"UNET_EBADCHAN",
        UNET_EPEERGONE => c"UNET_EPEERGONE",
        UNET_ETOOLARGE => c"UNET_ETOOLARGE",
        UNET_EBADBUF => c"UNET_EBADBUF",
        UNET_ETIMEDOUT => c"UNET_ETIMEDOUT",
        UNET_ETOOSMALL => c"UNET_ETOOSMALL",
        UNET_EREFUSED => c"UNET_EREFUSED",
        UNET_ENOENDPOINT => c"UNET_ENOENDPOINT",
        UNET_EENGINE => c"UNET_EENGINE",
        UNET_EIO => c"UNET_EIO",
        UNET_EINVAL => c"UNET_EINVAL",
        UNET_EREJECTED => c"UNET_EREJECTED",
        UNET_ENOTSUP => c"UNET_ENOTSUP",
        UNET_EQUOTA => c"UNET_EQUOTA",
        UNET_EINUSE => c"UNET_EINUSE",
        UNET_ENOTPOSTED => c"UNET_ENOTPOSTED",
        UNET_EEMPTY => c"UNET_EEMPTY",
        _ => c"unknown status",
    };
    s.as_ptr()
}

// -------------------------------------------------------------------------
// Engine
// -------------------------------------------------------------------------

/// Start an engine on its own thread in this process.
///
/// `control_socket` (or NULL): a Unix socket path where other processes can
/// connect with [`unet_session_connect`]. `udp_bind` (or NULL for no wire):
/// `"HOST:PORT"` to bind the UDP wire (port 0 for any). On success stores
/// the handle in `*out` and returns 0.
///
/// # Safety
/// The strings are NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_engine_start(
    control_socket: *const c_char,
    udp_bind: *const c_char,
    out: *mut *mut UnetEngine,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return null("out");
        }
        // SAFETY: NULL or NUL-terminated, per this function's contract.
        unsafe { start_engine(control_socket, udp_bind, out) }
    })
}

/// [`unet_engine_start`] past its NULL check.
///
/// # Safety
/// As [`unet_engine_start`], with `out` not NULL.
#[cfg(feature = "embedded")]
unsafe fn start_engine(
    control_socket: *const c_char,
    udp_bind: *const c_char,
    out: *mut *mut UnetEngine,
) -> c_int {
    let mut cfg = EngineConfig::default();
    // SAFETY: NULL or NUL-terminated, per this function's contract.
    if let Some(b) = unsafe { c_bytes(control_socket) } {
        cfg.control_socket = Some(std::path::PathBuf::from(OsStr::from_bytes(b)));
    }
    // SAFETY: as above.
    if let Some(b) = unsafe { c_bytes(udp_bind) } {
        let s = match text(b, "udp_bind") {
            Ok(s) => s,
            Err(c) => return c,
        };
        match s.parse() {
            Ok(a) => cfg.udp_bind = Some(a),
            Err(e) => return fail(UNET_EINVAL, format!("bad UDP address {s:?}: {e}")),
        }
    }
    match Engine::start(cfg) {
        Ok(e) => {
            // SAFETY: out is non-NULL and writable per the contract.
            unsafe { *out = Box::into_raw(Box::new(UnetEngine(e))) };
            UNET_OK
        }
        Err(e) => fail(UNET_EIO, format!("cannot start the engine: {e}")),
    }
}

/// [`unet_engine_start`] in a library built without the embedded engine.
///
/// # Safety
/// Nothing is read or written.
#[cfg(not(feature = "embedded"))]
unsafe fn start_engine(
    _control_socket: *const c_char,
    _udp_bind: *const c_char,
    _out: *mut *mut UnetEngine,
) -> c_int {
    fail(
        UNET_ENOTSUP,
        "this build of the unet library has no embedded engine (feature `embedded`); \
         start `unet daemon` and connect with unet_session_connect",
    )
}

/// Stop an engine and release its handle. NULL is ignored. Close the
/// sessions and endpoints on it first; calls on them fail afterwards.
///
/// # Safety
/// `engine` is NULL or a handle from [`unet_engine_start`] not yet stopped;
/// it is invalid after the call.
#[no_mangle]
pub unsafe extern "C" fn unet_engine_stop(engine: *mut UnetEngine) {
    guard(|| {
        if !engine.is_null() {
            // SAFETY: a Box from unet_engine_start, released only here.
            let e = unsafe { Box::from_raw(engine) };
            stop_engine(*e);
        }
        UNET_OK
    });
}

#[cfg(feature = "embedded")]
fn stop_engine(e: UnetEngine) {
    e.0.stop();
}

#[cfg(not(feature = "embedded"))]
fn stop_engine(e: UnetEngine) {
    match e.0 {}
}

/// The engine's UDP port: 1..65535, 0 when it has no wire, or
/// [`UNET_EINVAL`] for NULL.
///
/// # Safety
/// `engine` is NULL or a live handle from [`unet_engine_start`].
#[no_mangle]
pub unsafe extern "C" fn unet_engine_udp_port(engine: *const UnetEngine) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live Box<UnetEngine>, only read here.
        match unsafe { engine.as_ref() } {
            Some(e) => engine_udp_port(e),
            None => null("engine"),
        }
    })
}

// -------------------------------------------------------------------------
// Sessions
// -------------------------------------------------------------------------

fn store_session(r: Result<Session, Error>, out: *mut *mut UnetSession) -> c_int {
    match r {
        Ok(s) => {
            // SAFETY: callers checked that out is non-NULL; writable per
            // their contract.
            unsafe { *out = Box::into_raw(Box::new(UnetSession(s))) };
            UNET_OK
        }
        Err(e) => fail_error(e),
    }
}

/// Connect to an engine (a daemon, or an embedded engine started with a
/// control socket) at the Unix socket `path`; NULL names the socket in the
/// environment variable `UNET_SOCKET`, or `/tmp/unet.sock` when it is not
/// set. Control requests on the
/// session wait for the engine's answer at most 5 s, or the milliseconds
/// in the environment variable `UNET_TIMEOUT_MS` (0: forever), then fail
/// with [`UNET_ETIMEDOUT`]; see [`unet_session_connect_timeout`].
///
/// # Safety
/// `path` is NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_session_connect(
    path: *const c_char,
    out: *mut *mut UnetSession,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return null("out");
        }
        // SAFETY: NULL or NUL-terminated, per this function's contract.
        match unsafe { c_bytes(path) } {
            Some(p) => store_session(Session::connect(OsStr::from_bytes(p)), out),
            None => store_session(Session::connect(crate::socket_path()), out),
        }
    })
}

/// [`unet_session_connect`] with the time each control request (the
/// connection included) waits for the engine's answer: `timeout_ms`
/// milliseconds, 0 for forever, negative for the default (5 s or
/// `UNET_TIMEOUT_MS`). A request without an answer in time fails with
/// [`UNET_ETIMEDOUT`].
///
/// # Safety
/// `path` is NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_session_connect_timeout(
    path: *const c_char,
    timeout_ms: i64,
    out: *mut *mut UnetSession,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return null("out");
        }
        // SAFETY: NULL or NUL-terminated, per this function's contract.
        let p = match unsafe { c_bytes(path) } {
            Some(p) => std::path::PathBuf::from(OsStr::from_bytes(p)),
            None => crate::socket_path(),
        };
        let mut opts = crate::SessionOptions::default();
        if timeout_ms == 0 {
            opts.timeout = None;
        } else if timeout_ms > 0 {
            opts.timeout = Some(std::time::Duration::from_millis(timeout_ms as u64));
        }
        store_session(Session::connect_with(p, opts), out)
    })
}

/// A session on an engine started in this process.
///
/// # Safety
/// `engine` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_session_embedded(
    engine: *const UnetEngine,
    out: *mut *mut UnetSession,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return null("out");
        }
        // SAFETY: NULL or a live Box<UnetEngine>, only read here.
        let Some(e) = (unsafe { engine.as_ref() }) else {
            return null("engine");
        };
        store_session(embedded_session(e), out)
    })
}

#[cfg(feature = "embedded")]
fn engine_udp_port(e: &UnetEngine) -> c_int {
    e.0.udp_addr().map_or(0, |a| a.port() as c_int)
}

#[cfg(not(feature = "embedded"))]
fn engine_udp_port(e: &UnetEngine) -> c_int {
    match e.0 {}
}

#[cfg(feature = "embedded")]
fn embedded_session(e: &UnetEngine) -> Result<Session, Error> {
    Session::embedded(&e.0)
}

#[cfg(not(feature = "embedded"))]
fn embedded_session(e: &UnetEngine) -> Result<Session, Error> {
    match e.0 {}
}

/// Release a session handle. NULL is ignored. Endpoints created on it keep
/// the connection open until they are closed too.
///
/// # Safety
/// `session` is NULL or a handle not yet closed; invalid after the call.
#[no_mangle]
pub unsafe extern "C" fn unet_session_close(session: *mut UnetSession) {
    // SAFETY: per this function's contract.
    unsafe { release(session) }
}

// -------------------------------------------------------------------------
// Endpoints
// -------------------------------------------------------------------------

fn default_config() -> UnetEndpointConfig {
    let g = Geometry::default();
    let d = EndpointConfig::default();
    UnetEndpointConfig {
        buffer_area_size: g.buffer_area_size,
        buffer_size: g.buffer_size,
        send_cap: g.send_cap,
        recv_cap: g.recv_cap,
        free_cap: g.free_cap,
        event_cap: g.event_cap,
        accept: d.accept as c_int,
        managed_buffers: d.managed_buffers as c_int,
    }
}

/// Fill `cfg` with the defaults (8 KiB buffers, a 4 MiB buffer area, 1024
/// entry queues, 256 events, accepting, managed buffers).
///
/// # Safety
/// `cfg` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_endpoint_config_init(cfg: *mut UnetEndpointConfig) -> c_int {
    guard(|| {
        if cfg.is_null() {
            return null("cfg");
        }
        // SAFETY: non-NULL and writable per the contract.
        unsafe { cfg.write(default_config()) };
        UNET_OK
    })
}

/// Create an endpoint on `session` with `cfg` (NULL: the defaults).
///
/// # Safety
/// `session` is NULL or a live handle; `cfg` is NULL or readable; `out` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_endpoint_create(
    session: *const UnetSession,
    cfg: *const UnetEndpointConfig,
    out: *mut *mut UnetEndpoint,
) -> c_int {
    // SAFETY: the caller's contract is this function's.
    unsafe { create_endpoint(session, cfg, None, out) }
}

/// Create a *buffered* endpoint on `session` with `cfg` (NULL: the
/// defaults): two-case delivery, a message that finds no room waiting in
/// a virtual buffer of `buffer_limit` bytes (0: the default, 16 MiB) in
/// the engine instead of being dropped (`docs/udm.md`, "U-Net endpoints
/// with two-case delivery"). [`UNET_EINVAL`] for a limit above 1 GiB.
///
/// # Safety
/// As [`unet_endpoint_create`].
#[no_mangle]
pub unsafe extern "C" fn unet_endpoint_create_buffered(
    session: *const UnetSession,
    cfg: *const UnetEndpointConfig,
    buffer_limit: u64,
    out: *mut *mut UnetEndpoint,
) -> c_int {
    let limit = if buffer_limit == 0 {
        crate::endpoint::BUFFERED_DEFAULT
    } else {
        buffer_limit
    };
    // SAFETY: the caller's contract is this function's.
    unsafe { create_endpoint(session, cfg, Some(limit), out) }
}

/// The two create calls.
///
/// # Safety
/// As [`unet_endpoint_create`].
unsafe fn create_endpoint(
    session: *const UnetSession,
    cfg: *const UnetEndpointConfig,
    buffered: Option<u64>,
    out: *mut *mut UnetEndpoint,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return null("out");
        }
        // SAFETY: NULL or a live Box<UnetSession>, only read here.
        let Some(s) = (unsafe { session.as_ref() }) else {
            return null("session");
        };
        // SAFETY: NULL or a readable config per the contract.
        let c = unsafe { cfg.as_ref() }
            .copied()
            .unwrap_or_else(default_config);
        let d = default_config();
        let pick = |v: u32, dv: u32| if v == 0 { dv } else { v };
        let geometry = Geometry {
            buffer_size: pick(c.buffer_size, d.buffer_size),
            buffer_area_size: if c.buffer_area_size == 0 {
                d.buffer_area_size
            } else {
                c.buffer_area_size
            },
            send_cap: pick(c.send_cap, d.send_cap),
            recv_cap: pick(c.recv_cap, d.recv_cap),
            free_cap: pick(c.free_cap, d.free_cap),
            event_cap: pick(c.event_cap, d.event_cap),
        };
        let rc = EndpointConfig {
            geometry,
            accept: c.accept != 0,
            managed_buffers: c.managed_buffers != 0,
            buffered,
            ..Default::default()
        };
        match s.0.create_endpoint(rc) {
            Ok(ep) => {
                // SAFETY: out is non-NULL and writable per the contract.
                unsafe { *out = Box::into_raw(Box::new(UnetEndpoint(ep))) };
                UNET_OK
            }
            Err(e) => fail_error(e),
        }
    })
}

/// Close an endpoint (its peers see its channels gone) and release the
/// handle. NULL is ignored.
///
/// # Safety
/// `ep` is NULL or a handle not yet closed; invalid after the call.
#[no_mangle]
pub unsafe extern "C" fn unet_endpoint_close(ep: *mut UnetEndpoint) {
    // SAFETY: per this function's contract.
    unsafe { release(ep) }
}

/// The endpoint's id in its engine (what peers pass to
/// [`unet_open_channel`]), or [`UNET_EINVAL`] for NULL.
///
/// # Safety
/// `ep` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_endpoint_id(ep: *const UnetEndpoint) -> i64 {
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: NULL or a live Box<UnetEndpoint> per the contract, only
        // read here.
        unsafe { ep.as_ref() }.map(|e| e.0.id())
    }));
    match r {
        Ok(Some(id)) => id as i64,
        Ok(None) => null("endpoint") as i64,
        Err(_) => fail(UNET_EIO, "internal error") as i64,
    }
}

/// The configuration the endpoint was created with (defaults filled in).
///
/// # Safety
/// `ep` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_endpoint_get_config(
    ep: *mut UnetEndpoint,
    out: *mut UnetEndpointConfig,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        if out.is_null() {
            return null("out");
        }
        let g = ep.geometry();
        let cfg = UnetEndpointConfig {
            buffer_area_size: g.buffer_area_size,
            buffer_size: g.buffer_size,
            send_cap: g.send_cap,
            recv_cap: g.recv_cap,
            free_cap: g.free_cap,
            event_cap: g.event_cap,
            accept: -1,
            managed_buffers: -1,
        };
        // SAFETY: non-NULL and writable per the contract.
        unsafe { out.write(cfg) };
        UNET_OK
    })
}

/// Accept (non-zero) or refuse (0) channels opened to this endpoint from
/// now on.
///
/// # Safety
/// `ep` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_endpoint_set_accept(ep: *mut UnetEndpoint, accept: c_int) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        status(ep.set_accept(accept != 0))
    })
}

// -------------------------------------------------------------------------
// Channels
// -------------------------------------------------------------------------

/// Open a channel to `addr`: `"ID"` or `"local/ID"` for an endpoint of the
/// same engine, `"HOST:PORT/ID"` for one behind another engine's UDP wire.
/// `path`: 0 automatic, 1 direct (or fail), 2 through the engine. Stores
/// the channel tag in `*out_channel`.
///
/// # Safety
/// `ep` is NULL or a live handle; `addr` NULL or NUL-terminated;
/// `out_channel` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_open_channel(
    ep: *mut UnetEndpoint,
    addr: *const c_char,
    path: c_int,
    out_channel: *mut u16,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        if out_channel.is_null() {
            return null("out_channel");
        }
        // SAFETY: NULL or NUL-terminated per the contract.
        let Some(a) = (unsafe { c_bytes(addr) }) else {
            return null("addr");
        };
        let a = match text(a, "addr") {
            Ok(s) => s,
            Err(c) => return c,
        };
        let dst: EndpointAddr = match a.parse() {
            Ok(d) => d,
            Err(e) => return fail(UNET_EINVAL, format!("bad address {a:?}: {e}")),
        };
        let path = match path {
            UNET_PATH_AUTO => PathChoice::Auto,
            UNET_PATH_DIRECT => PathChoice::Direct,
            UNET_PATH_ENGINE => PathChoice::Engine,
            p => return fail(UNET_EINVAL, format!("bad path choice {p}")),
        };
        match ep.open_channel(dst, ChannelOptions { path }) {
            Ok(ch) => {
                // SAFETY: non-NULL and writable per the contract.
                unsafe { *out_channel = ch.0 };
                UNET_OK
            }
            Err(e) => fail_error(e),
        }
    })
}

/// Close a channel; its peer sees it gone.
///
/// # Safety
/// `ep` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_close_channel(ep: *mut UnetEndpoint, channel: u16) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        status(ep.close_channel(Channel(channel)))
    })
}

/// Attach a U-Net/SLE applet (`len` bytes of a Java class file) to the
/// endpoint; `fuel` and `heap` set the work budget per invocation and the
/// heap quota (0: defaults). [`UNET_EREJECTED`] when JIVE refuses the class
/// (the reason is in `unet_last_error_message`).
///
/// # Safety
/// `ep` is NULL or a live handle; `class` NULL or `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn unet_attach_applet(
    ep: *mut UnetEndpoint,
    class: *const c_void,
    len: usize,
    fuel: u64,
    heap: u32,
    placement: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        if class.is_null() {
            return null("class");
        }
        // SAFETY: the caller guarantees len readable bytes at class.
        let bytes = unsafe { std::slice::from_raw_parts(class as *const u8, len) };
        match ep.attach_applet(
            bytes,
            crate::AppletOptions {
                fuel,
                heap,
                placement: if placement == 1 {
                    crate::Placement::Inline
                } else {
                    crate::Placement::Engine
                },
            },
        ) {
            Ok(()) => UNET_OK,
            Err(e) => fail_error(e),
        }
    })
}

/// Detach the endpoint's applet.
///
/// # Safety
/// `ep` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_detach_applet(ep: *mut UnetEndpoint) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        status(ep.detach_applet())
    })
}

// -------------------------------------------------------------------------
// Messages
// -------------------------------------------------------------------------

/// Send a copy of `len` bytes at `data` on `channel` (managed buffers, or
/// any direct channel). [`UNET_EFULL`] means retry later.
///
/// # Safety
/// `ep` is NULL or a live handle; `data` is NULL or `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn unet_send(
    ep: *mut UnetEndpoint,
    channel: u16,
    data: *const c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        let msg: &[u8] = if len == 0 {
            &[]
        } else if data.is_null() {
            return null("data");
        } else {
            // SAFETY: non-NULL with len readable bytes per the contract.
            unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }
        };
        match ep.send(Channel(channel), msg) {
            Ok(()) => UNET_OK,
            Err(e) => fail_send(e),
        }
    })
}

/// One message of a batch for [`unet_send_many`]: `len` bytes at `data`
/// (`data` may be NULL when `len` is 0).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UnetMsg {
    pub data: *const c_void,
    pub len: usize,
}

/// A [`UnetMsg`] whose bytes were checked readable: made only by
/// [`unet_send_many`] for the duration of its call.
#[repr(transparent)]
struct CheckedMsg(UnetMsg);

impl AsRef<[u8]> for CheckedMsg {
    fn as_ref(&self) -> &[u8] {
        if self.0.len == 0 {
            return &[];
        }
        // SAFETY: a CheckedMsg exists only inside unet_send_many, whose
        // contract makes `data` `len` readable bytes for the whole call, and
        // which checked it non-NULL.
        unsafe { std::slice::from_raw_parts(self.0.data.cast::<u8>(), self.0.len) }
    }
}

/// Send a copy of each of the `n` messages at `msgs` on `channel`, in
/// order, until one does not go; `*out_sent` is set to how many went.
/// Returns 0 when at least one went (or `n` is 0), else the status of the
/// first ([`UNET_EFULL`]: retry later). On a direct channel a batch costs
/// less per message than [`unet_send`] in a loop.
///
/// # Safety
/// `ep` is NULL or a live handle; `msgs` is NULL or `n` readable
/// [`UnetMsg`]s, each `data` NULL or `len` readable bytes; `out_sent` NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_send_many(
    ep: *mut UnetEndpoint,
    channel: u16,
    msgs: *const UnetMsg,
    n: usize,
    out_sent: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        if out_sent.is_null() {
            return null("out_sent");
        }
        // SAFETY: out_sent is non-NULL and writable per the contract.
        unsafe { *out_sent = 0 };
        let msgs: &[CheckedMsg] = if n == 0 {
            &[]
        } else if msgs.is_null() {
            return null("msgs");
        } else {
            // SAFETY: non-NULL with n readable UnetMsgs per the contract;
            // CheckedMsg is a transparent wrapper of UnetMsg.
            unsafe { std::slice::from_raw_parts(msgs.cast::<CheckedMsg>(), n) }
        };
        if let Some(i) = msgs.iter().position(|m| m.0.len > 0 && m.0.data.is_null()) {
            return fail(UNET_EINVAL, format!("msgs[{i}].data is NULL"));
        }
        match ep.send_many(Channel(channel), msgs) {
            Ok(k) => {
                // SAFETY: as above.
                unsafe { *out_sent = k };
                UNET_OK
            }
            Err(e) => fail_send(e),
        }
    })
}

/// What [`unet_recv_many`] calls for each message: its bytes (in the
/// caller's buffer), length and channel; nonzero to go on, 0 to stop after
/// this one.
pub type UnetRecvFn =
    unsafe extern "C" fn(ctx: *mut c_void, data: *const c_void, len: usize, channel: u16) -> c_int;

/// Take up to `limit` messages that are already waiting, without waiting:
/// each is copied into `buf` (`cap` bytes) and handed to `f` with `ctx`.
/// `*out_count` is set to how many `f` was given. Returns 0, or a negative
/// status as for [`unet_try_recv`] (a message too large for `buf` ends a
/// batch before it; the next call returns [`UNET_ETOOSMALL`] for it).
///
/// # Safety
/// `ep` is NULL or a live handle; `buf` NULL or `cap` writable bytes; `f`
/// NULL or a function safe to call with `ctx` and bytes that stay valid
/// until it returns; `out_count` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_recv_many(
    ep: *mut UnetEndpoint,
    buf: *mut c_void,
    cap: usize,
    limit: usize,
    f: Option<UnetRecvFn>,
    ctx: *mut c_void,
    out_count: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        let Some(f) = f else {
            return null("f");
        };
        if out_count.is_null() {
            return null("out_count");
        }
        // SAFETY: per this function's contract.
        let b = match unsafe { out_buf(buf, cap) } {
            Ok(b) => b,
            Err(c) => return c,
        };
        let mut handed = 0;
        let r = ep.recv_many(b, limit, |r, m| {
            handed += 1;
            // SAFETY: f is callable with ctx per the contract; m is valid
            // for the call.
            unsafe { f(ctx, m.as_ptr().cast(), m.len(), r.channel.0) != 0 }
        });
        // SAFETY: out_count is non-NULL and writable per the contract.
        unsafe { *out_count = handed };
        match r {
            Ok(_) => UNET_OK,
            Err(e) => {
                let mut len = 0usize;
                recv_result(Err(e), &mut len, std::ptr::null_mut())
            }
        }
    })
}

/// The receive buffer `buf`/`cap` as a slice.
///
/// # Safety
/// `buf` is NULL or `cap` writable bytes.
unsafe fn out_buf<'a>(buf: *mut c_void, cap: usize) -> Result<&'a mut [u8], c_int> {
    if cap == 0 {
        Ok(&mut [])
    } else if buf.is_null() {
        Err(null("buf"))
    } else {
        // SAFETY: non-NULL with cap writable bytes per the contract.
        Ok(unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), cap) })
    }
}

fn recv_result(
    r: Result<Option<crate::Recv>, RecvError>,
    out_len: *mut usize,
    out_channel: *mut u16,
) -> c_int {
    match r {
        Ok(Some(m)) => {
            // SAFETY: out_len checked non-NULL by the callers; out_channel
            // NULL or writable per their contracts.
            unsafe {
                *out_len = m.len;
                if let Some(c) = out_channel.as_mut() {
                    *c = m.channel.0;
                }
            }
            1
        }
        Ok(None) => {
            // SAFETY: as above.
            unsafe { *out_len = 0 };
            0
        }
        Err(RecvError::BufferTooSmall(n)) => {
            // SAFETY: as above.
            unsafe { *out_len = n };
            fail(UNET_ETOOSMALL, RecvError::BufferTooSmall(n).to_string())
        }
        Err(RecvError::Timeout) => fail(UNET_ETIMEDOUT, "timed out"),
        Err(e @ RecvError::Broken(ch)) => {
            // SAFETY: as above.
            if let Some(c) = unsafe { out_channel.as_mut() } {
                *c = ch.0;
            }
            fail(UNET_EPEERGONE, e.to_string())
        }
    }
}

/// Take the next message if one is waiting, copying it into `buf` (`cap`
/// bytes). Returns 1 with `*out_len` and `*out_channel` set when a message
/// was received, 0 when none is waiting, or a negative status:
/// [`UNET_ETOOSMALL`] with the needed size in `*out_len` (the message stays
/// queued), [`UNET_EPEERGONE`] with the channel in `*out_channel` when a
/// direct peer broke the connection. `out_channel` may be NULL.
///
/// # Safety
/// `ep` is NULL or a live handle; `buf` NULL or `cap` writable bytes;
/// `out_len` NULL or writable; `out_channel` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_try_recv(
    ep: *mut UnetEndpoint,
    buf: *mut c_void,
    cap: usize,
    out_len: *mut usize,
    out_channel: *mut u16,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        if out_len.is_null() {
            return null("out_len");
        }
        // SAFETY: per this function's contract.
        let b = match unsafe { out_buf(buf, cap) } {
            Ok(b) => b,
            Err(c) => return c,
        };
        recv_result(ep.try_recv(b), out_len, out_channel)
    })
}

/// Receive the next message into `buf`, waiting at most `timeout_ns`
/// nanoseconds (-1: forever; 0: do not wait). Returns 0 with `*out_len` and
/// `*out_channel` set, [`UNET_ETIMEDOUT`] when nothing came, or another
/// negative status as for [`unet_try_recv`].
///
/// # Safety
/// As for [`unet_try_recv`].
#[no_mangle]
pub unsafe extern "C" fn unet_recv(
    ep: *mut UnetEndpoint,
    buf: *mut c_void,
    cap: usize,
    timeout_ns: i64,
    out_len: *mut usize,
    out_channel: *mut u16,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        if out_len.is_null() {
            return null("out_len");
        }
        let timeout = match timeout_ns {
            -1 => None,
            t if t >= 0 => Some(Duration::from_nanos(t as u64)),
            t => return fail(UNET_EINVAL, format!("bad timeout {t}")),
        };
        // SAFETY: per this function's contract.
        let b = match unsafe { out_buf(buf, cap) } {
            Ok(b) => b,
            Err(c) => return c,
        };
        match recv_result(ep.recv(b, timeout).map(Some), out_len, out_channel) {
            1 => UNET_OK,
            r => r,
        }
    })
}

/// Wait until a message or an event is waiting, at most `timeout_ns`
/// nanoseconds (-1: forever). Returns 1 when something is waiting, 0 on
/// timeout.
///
/// # Safety
/// `ep` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_wait(ep: *mut UnetEndpoint, timeout_ns: i64) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        let timeout = match timeout_ns {
            -1 => None,
            t if t >= 0 => Some(Duration::from_nanos(t as u64)),
            t => return fail(UNET_EINVAL, format!("bad timeout {t}")),
        };
        ep.wait(timeout) as c_int
    })
}

// -------------------------------------------------------------------------
// The descriptor level (U-Net's queues)
// -------------------------------------------------------------------------

/// U-Net's transmit: send `len` bytes at `offset` of the buffer area on
/// `channel`. On an engine channel this pushes a send descriptor and stores
/// its queue position in `*out_pos` (see [`unet_send_status`]); the buffer
/// must stay untouched until the status is no longer pending. On a direct
/// channel the bytes are copied at once and the position is `UINT64_MAX`.
/// `out_pos` may be NULL.
///
/// # Safety
/// `ep` is NULL or a live handle; `out_pos` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_push_send(
    ep: *mut UnetEndpoint,
    channel: u16,
    offset: u32,
    len: u32,
    out_pos: *mut u64,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        match ep.push_send(Channel(channel), offset, len) {
            Ok(pos) => {
                // SAFETY: NULL or writable per the contract.
                if let Some(p) = unsafe { out_pos.as_mut() } {
                    *p = pos;
                }
                UNET_OK
            }
            Err(e) => fail_send(e),
        }
    })
}

/// Completion of the send descriptor at `pos` (from [`unet_push_send`]):
/// 1 sent, 0 pending, or the negative status the engine gave it
/// ([`UNET_EBADCHAN`], [`UNET_EBADBUF`], [`UNET_ETOOLARGE`],
/// [`UNET_EPEERGONE`], [`UNET_EINVAL`] for reserved flags).
///
/// # Safety
/// `ep` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_send_status(ep: *mut UnetEndpoint, pos: u64) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        match ep.send_status(pos) {
            SendStatus::Sent => 1,
            SendStatus::Pending => 0,
            SendStatus::BadChannel => fail(UNET_EBADCHAN, "send descriptor: bad channel"),
            SendStatus::BadBuffer => fail(UNET_EBADBUF, "send descriptor: bad buffer"),
            SendStatus::BadLength => fail(UNET_ETOOLARGE, "send descriptor: bad length"),
            SendStatus::PeerGone => fail(UNET_EPEERGONE, "send descriptor: peer gone"),
            SendStatus::BadFlags => fail(UNET_EINVAL, "send descriptor: reserved flags"),
            SendStatus::AppletFault => fail(UNET_EENGINE, "send descriptor: the applet faulted"),
        }
    })
}

/// U-Net's receive: copy the next receive descriptor to `*out` and return
/// 1, or return 0 when none is waiting. For endpoints with
/// `managed_buffers = 0`: the buffers a descriptor names are the
/// application's until it posts them again with [`unet_post_free`].
///
/// # Safety
/// `ep` is NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_poll_recv_desc(ep: *mut UnetEndpoint, out: *mut RecvDesc) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        if out.is_null() {
            return null("out");
        }
        match ep.poll_recv_desc() {
            Some(d) => {
                // SAFETY: non-NULL and writable per the contract. An
                // unaligned write, so C callers need not honour align 64.
                unsafe { out.write_unaligned(d) };
                1
            }
            None => 0,
        }
    })
}

/// Post a free receive buffer at `offset` of the buffer area (a whole
/// buffer must fit). [`UNET_EBADBUF`] when outside the area,
/// [`UNET_EFULL`] when the free queue is full.
///
/// # Safety
/// `ep` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_post_free(ep: *mut UnetEndpoint, offset: u32) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        let g = ep.geometry();
        if offset as u64 + g.buffer_size as u64 > g.buffer_area_size {
            return fail(
                UNET_EBADBUF,
                format!("free buffer offset {offset} outside the buffer area"),
            );
        }
        match ep.post_free(offset) {
            Ok(()) => UNET_OK,
            Err(e) => fail(UNET_EFULL, e.to_string()),
        }
    })
}

fn check_area(ep: &Endpoint, offset: u32, len: usize) -> Result<(), c_int> {
    let area = ep.geometry().buffer_area_size;
    if offset as u64 + len as u64 > area {
        return Err(fail(
            UNET_EBADBUF,
            format!("{len} bytes at {offset} outside the buffer area of {area}"),
        ));
    }
    Ok(())
}

/// Copy `len` bytes from `data` into the buffer area at `offset`.
/// [`UNET_EBADBUF`] when the range is outside the area.
///
/// # Safety
/// `ep` is NULL or a live handle; `data` NULL or `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn unet_write_buffer(
    ep: *mut UnetEndpoint,
    offset: u32,
    data: *const c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        if let Err(c) = check_area(ep, offset, len) {
            return c;
        }
        if len == 0 {
            return UNET_OK;
        }
        if data.is_null() {
            return null("data");
        }
        // SAFETY: non-NULL with len readable bytes per the contract.
        let src = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
        ep.write_buffer(offset, src);
        UNET_OK
    })
}

/// Copy `len` bytes of the buffer area at `offset` into `buf`.
/// [`UNET_EBADBUF`] when the range is outside the area.
///
/// # Safety
/// `ep` is NULL or a live handle; `buf` NULL or `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn unet_read_buffer(
    ep: *mut UnetEndpoint,
    offset: u32,
    buf: *mut c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        if let Err(c) = check_area(ep, offset, len) {
            return c;
        }
        // SAFETY: per this function's contract.
        let dst = match unsafe { out_buf(buf, len) } {
            Ok(b) => b,
            Err(c) => return c,
        };
        ep.read_buffer(offset, dst);
        UNET_OK
    })
}

// -------------------------------------------------------------------------
// Events
// -------------------------------------------------------------------------

/// The next channel event: copies it to `*out` and returns 1, or returns 0
/// when there is none.
///
/// # Safety
/// `ep` is NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_poll_event(ep: *mut UnetEndpoint, out: *mut UnetEvent) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        if out.is_null() {
            return null("out");
        }
        let ev = match ep.poll_event() {
            None => return 0,
            Some(Event::AppletFault { kind }) => UnetEvent {
                kind: UNET_EVENT_APPLET_FAULT,
                peer_endpoint: kind as u32,
                ..Default::default()
            },
            Some(Event::AppletDetached { kind }) => UnetEvent {
                kind: UNET_EVENT_APPLET_DETACHED,
                peer_endpoint: kind as u32,
                ..Default::default()
            },
            Some(Event::PeerGone { channel }) => UnetEvent {
                kind: UNET_EVENT_PEER_GONE,
                channel: channel.0,
                ..Default::default()
            },
            Some(Event::ChannelOpened {
                channel,
                peer,
                direct,
            }) => {
                let mut e = UnetEvent {
                    kind: UNET_EVENT_CHANNEL_OPENED,
                    channel: channel.0,
                    direct: direct as u8,
                    peer_endpoint: peer.id,
                    ..Default::default()
                };
                match peer.host {
                    Some(std::net::SocketAddr::V4(a)) => {
                        e.peer_family = 4;
                        e.peer_port = a.port();
                        e.peer_addr[..4].copy_from_slice(&a.ip().octets());
                    }
                    Some(std::net::SocketAddr::V6(a)) => {
                        e.peer_family = 6;
                        e.peer_port = a.port();
                        e.peer_addr = a.ip().octets();
                    }
                    None => {}
                }
                e
            }
        };
        // SAFETY: non-NULL and writable per the contract.
        unsafe { out.write(ev) };
        1
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr;

    #[test]
    fn null_pointers_are_einval() {
        // SAFETY: NULL handles and out-pointers are part of the contract.
        unsafe {
            assert_eq!(
                unet_engine_start(ptr::null(), ptr::null(), ptr::null_mut()),
                UNET_EINVAL
            );
            assert_eq!(unet_send(ptr::null_mut(), 0, ptr::null(), 0), UNET_EINVAL);
            assert_eq!(unet_endpoint_id(ptr::null()), UNET_EINVAL as i64);
            assert_eq!(unet_engine_udp_port(ptr::null()), UNET_EINVAL);
            unet_engine_stop(ptr::null_mut());
            unet_session_close(ptr::null_mut());
            unet_endpoint_close(ptr::null_mut());
        }
        // SAFETY: the message is a NUL-terminated string owned by this thread.
        let m = unsafe { CStr::from_ptr(unet_last_error_message()) };
        assert!(!m.to_bytes().is_empty());
    }

    #[test]
    fn panics_become_eio() {
        assert_eq!(guard(|| panic!("boom")), UNET_EIO);
        // SAFETY: as above.
        let m = unsafe { CStr::from_ptr(unet_last_error_message()) };
        assert!(m.to_str().unwrap().contains("boom"));
    }
}
