//! The C ABI of an engine started in this process (`unet_engine`).

#[cfg(feature = "embedded")]
use std::ffi::OsStr;
use std::ffi::{c_char, c_int};
#[cfg(feature = "embedded")]
use std::os::unix::ffi::OsStrExt;

#[cfg(feature = "embedded")]
use unet_engine::{Engine, EngineConfig};

#[cfg(not(feature = "embedded"))]
use super::status::UNET_ENOTSUP;
#[cfg(feature = "embedded")]
use super::status::{c_bytes, new_handle, text, UNET_EINVAL, UNET_EIO};
use super::status::{fail, guard, handle_ref, out_ptr, take, Answer, UNET_OK};
use crate::session::Session;
use crate::Error;

/// Opaque engine handle (`unet_engine` in C).
#[cfg(feature = "embedded")]
pub struct UnetEngine(Engine);
/// Opaque engine handle (`unet_engine` in C): never made by a library
/// built without the embedded engine (feature `embedded`).
#[cfg(not(feature = "embedded"))]
pub struct UnetEngine(std::convert::Infallible);

/// Start an engine on its own thread in this process.
///
/// `control_socket` (or NULL): a Unix socket path where other processes can
/// connect with [`unet_session_connect`](super::unet_session_connect). `udp_bind` (or NULL for no wire):
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
        // SAFETY: per this function's contract.
        let out = unsafe { out_ptr(out, "out") }?;
        // SAFETY: NULL or NUL-terminated, per this function's contract.
        unsafe { start_engine(control_socket, udp_bind, out) }
    })
}

/// [`unet_engine_start`] past its NULL check.
///
/// # Safety
/// As [`unet_engine_start`].
#[cfg(feature = "embedded")]
unsafe fn start_engine(
    control_socket: *const c_char,
    udp_bind: *const c_char,
    out: &mut std::mem::MaybeUninit<*mut UnetEngine>,
) -> Answer {
    let mut cfg = EngineConfig::default();
    // SAFETY: NULL or NUL-terminated, per this function's contract.
    let (socket, udp) = unsafe { (c_bytes(control_socket), c_bytes(udp_bind)) };
    if let Some(b) = socket {
        cfg.control_socket = Some(std::path::PathBuf::from(OsStr::from_bytes(b)));
    }
    if let Some(b) = udp {
        let s = text(b, "udp_bind")?;
        match s.parse() {
            Ok(a) => cfg.udp_bind = Some(a),
            Err(e) => return Err(fail(UNET_EINVAL, format!("bad UDP address {s:?}: {e}"))),
        }
    }
    match Engine::start(cfg) {
        Ok(e) => {
            out.write(new_handle(UnetEngine(e)));
            Ok(UNET_OK)
        }
        Err(e) => Err(fail(UNET_EIO, format!("cannot start the engine: {e}"))),
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
    _out: &mut std::mem::MaybeUninit<*mut UnetEngine>,
) -> Answer {
    Err(fail(
        UNET_ENOTSUP,
        "this build of the unet library has no embedded engine (feature `embedded`); \
         start `unet daemon` and connect with unet_session_connect",
    ))
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
            // SAFETY: a handle from unet_engine_start, released only here
            // (this function's contract).
            let e = unsafe { take(engine, "engine") }?;
            stop_engine(*e);
        }
        Ok(UNET_OK)
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
        // SAFETY: NULL or a live handle, only read here (this function's
        // contract).
        let e = unsafe { handle_ref(engine, "engine") }?;
        Ok(engine_udp_port(e))
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

/// A session on the engine `e` (for `unet_session_embedded`).
#[cfg(feature = "embedded")]
pub(super) fn embedded_session(e: &UnetEngine) -> Result<Session, Error> {
    Session::embedded(&e.0)
}

/// A session on the engine `e` (for `unet_session_embedded`).
#[cfg(not(feature = "embedded"))]
pub(super) fn embedded_session(e: &UnetEngine) -> Result<Session, Error> {
    match e.0 {}
}
