//! The C ABI of a session (`unet_session`): a connection to an engine,
//! on which endpoints, memory regions, VIs and UDM nodes are made.

use std::ffi::{c_char, c_int, OsStr};
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;

use super::engine::{embedded_session, UnetEngine};
use super::status::{
    c_bytes, fail_error, guard, handle_ref, new_handle, out_ptr, release, Answer, UNET_OK,
};
use crate::session::Session;
use crate::Error;

/// Opaque session handle (`unet_session` in C).
pub struct UnetSession(pub(super) Session);

/// Store the new session of `r` in `out`.
fn store_session(r: Result<Session, Error>, out: &mut MaybeUninit<*mut UnetSession>) -> Answer {
    match r {
        Ok(s) => {
            out.write(new_handle(UnetSession(s)));
            Ok(UNET_OK)
        }
        Err(e) => Err(fail_error(e)),
    }
}

/// Connect to an engine (a daemon, or an embedded engine started with a
/// control socket) at the Unix socket `path`; NULL names the socket in the
/// environment variable `UNET_SOCKET`, or `/tmp/unet.sock` when it is not
/// set. Control requests on the
/// session wait for the engine's answer at most 5 s, or the milliseconds
/// in the environment variable `UNET_TIMEOUT_MS` (0: forever), then fail
/// with [`UNET_ETIMEDOUT`](super::UNET_ETIMEDOUT); see [`unet_session_connect_timeout`].
///
/// # Safety
/// `path` is NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_session_connect(
    path: *const c_char,
    out: *mut *mut UnetSession,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (out, path) = unsafe { (out_ptr(out, "out")?, c_bytes(path)) };
        match path {
            Some(p) => store_session(Session::connect(OsStr::from_bytes(p)), out),
            None => store_session(Session::connect(crate::socket_path()), out),
        }
    })
}

/// [`unet_session_connect`] with the time each control request (the
/// connection included) waits for the engine's answer: `timeout_ms`
/// milliseconds, 0 for forever, negative for the default (5 s or
/// `UNET_TIMEOUT_MS`). A request without an answer in time fails with
/// [`UNET_ETIMEDOUT`](super::UNET_ETIMEDOUT).
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
        // SAFETY: per this function's contract.
        let (out, path) = unsafe { (out_ptr(out, "out")?, c_bytes(path)) };
        let p = match path {
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
        // SAFETY: per this function's contract (the engine only read).
        let (out, e) = unsafe { (out_ptr(out, "out")?, handle_ref(engine, "engine")?) };
        store_session(embedded_session(e), out)
    })
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

/// The session behind a handle, which the call only reads.
///
/// # Safety
/// `s` is NULL or a live handle.
pub(super) unsafe fn session_of<'a>(s: *const UnetSession) -> Result<&'a Session, c_int> {
    // SAFETY: per this function's contract.
    Ok(&unsafe { handle_ref(s, "session") }?.0)
}
