//! The C ABI of VIA's connection set-up: discriminators listened on
//! (`unet_vi_server`), the connection requests they receive
//! (`unet_vi_request`), and [`unet_vi_connect`].

use std::ffi::{c_char, c_int};

use unet_control::ErrorCode;

use super::session::{session_of, UnetSession};
use super::status::{
    c_bytes, fail, fail_error, guard, guard_value, handle_ref, new_handle, null, out_ptr,
    parse_timeout, put_c_string, release, status, take, text, UNET_EINVAL, UNET_EIO,
    UNET_ETIMEDOUT, UNET_OK,
};
use super::vi::{attributes, store_vi, UnetVi, UnetViAttrs};
use crate::via::{engine_code, ConnRequest, ViServer};
use crate::Error;

/// Opaque handle of a discriminator listened on (`unet_vi_server` in C).
pub struct UnetViServer(ViServer);
/// Opaque handle of a connection request waiting for an answer
/// (`unet_vi_request` in C).
pub struct UnetViRequest(ConnRequest);

/// A failed wait for a connection request: the session's
/// [`Error::Timeout`] says the engine is not answering, which is not what
/// happened.
fn fail_request_wait(e: Error) -> c_int {
    match e {
        Error::Timeout(_) => fail(UNET_ETIMEDOUT, "no connection request came in time"),
        e => fail_error(e),
    }
}

/// Accept VI connections on discriminator `tag` of this engine.
/// [`UNET_EINUSE`](super::UNET_EINUSE) when another session already listens on it.
///
/// # Safety
/// `session` is NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_listen(
    session: *const UnetSession,
    tag: u64,
    out: *mut *mut UnetViServer,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract (the session only read).
        let (out, s) = unsafe { (out_ptr(out, "out")?, session_of(session)?) };
        let v = s.vi_listen(tag).map_err(fail_error)?;
        out.write(new_handle(UnetViServer(v)));
        Ok(UNET_OK)
    })
}

/// Stop listening and release the handle (NULL is ignored). VIs accepted
/// through it live on.
///
/// # Safety
/// `server` is NULL or a handle not yet released; invalid after the call.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_server_free(server: *mut UnetViServer) {
    // SAFETY: per this function's contract.
    unsafe { release(server) }
}

/// Wait at most `timeout_us` microseconds (-1: forever) for the next
/// connection request and accept it with a VI of `attrs` (NULL: the
/// defaults). [`UNET_ETIMEDOUT`] when none came; [`super::UNET_EENGINE`]
/// when the reliability levels differ (both sides are refused) or the
/// connecting side gave up.
///
/// # Safety
/// `server` is NULL or a live handle; `attrs` NULL or readable with NULL
/// or live queue handles; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_server_accept(
    server: *const UnetViServer,
    attrs: *const UnetViAttrs,
    timeout_us: i64,
    out: *mut *mut UnetVi,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract (the server only read).
        let (out, server, attrs) = unsafe {
            (
                out_ptr(out, "out")?,
                handle_ref(server, "server")?,
                attributes(attrs)?,
            )
        };
        let timeout = parse_timeout(timeout_us)?;
        let req = server.0.wait_request(timeout).map_err(fail_request_wait)?;
        store_vi(req.accept(&attrs), out)
    })
}

/// Wait at most `timeout_us` microseconds (-1: forever) for the next
/// connection request (VIA's `VipConnectWait`) and store it in `*out`, to
/// be answered with [`unet_vi_request_accept`] or
/// [`unet_vi_request_reject`]. [`UNET_ETIMEDOUT`] when none came.
///
/// # Safety
/// `server` is NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_server_wait_request(
    server: *const UnetViServer,
    timeout_us: i64,
    out: *mut *mut UnetViRequest,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract (the server only read).
        let (out, server) = unsafe { (out_ptr(out, "out")?, handle_ref(server, "server")?) };
        let timeout = parse_timeout(timeout_us)?;
        let r = server.0.wait_request(timeout).map_err(fail_request_wait)?;
        out.write(new_handle(UnetViRequest(r)));
        Ok(UNET_OK)
    })
}

/// The connecting process's id, 0 when it is remote or unknown, or
/// [`UNET_EINVAL`] for NULL.
///
/// # Safety
/// `request` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_request_pid(request: *const UnetViRequest) -> i64 {
    guard_value(UNET_EIO as i64, || {
        // SAFETY: NULL or a live handle, only read (this function's
        // contract).
        match unsafe { handle_ref(request, "request") } {
            Ok(r) => r.0.pid() as i64,
            Err(c) => c as i64,
        }
    })
}

/// The connecting engine's address as `IP:PORT`, written NUL-terminated
/// into `buf` (`cap` bytes): its length without the NUL, 0 (and an empty
/// string) when the connecting side is on this engine.
/// [`super::UNET_ETOOSMALL`]
/// when `cap` cannot hold it and the NUL ([`UNET_EINVAL`] for NULL).
///
/// # Safety
/// `request` is NULL or a live handle; `buf` is NULL or writable for
/// `cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_request_host(
    request: *const UnetViRequest,
    buf: *mut c_char,
    cap: usize,
) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live handle, only read (this function's
        // contract).
        let r = unsafe { handle_ref(request, "request") }?;
        if buf.is_null() {
            return Err(null("buf"));
        }
        let text = r.0.host().map(|h| h.to_string()).unwrap_or_default();
        // SAFETY: buf is non-NULL and writable for cap bytes per the
        // contract.
        unsafe {
            put_c_string(&text, buf, cap, |n| {
                fail(
                    super::UNET_ETOOSMALL,
                    format!("the address needs {n} bytes with its NUL"),
                )
            })
        }
    })
}

/// The reliability level the connecting side asked for (a
/// `UNET_VI_RELIABLE_*` / [`UNET_VI_UNRELIABLE`](super::UNET_VI_UNRELIABLE) value), or
/// [`UNET_EINVAL`] for NULL.
///
/// # Safety
/// `request` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_request_reliability(request: *const UnetViRequest) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live handle, only read (this function's
        // contract).
        let r = unsafe { handle_ref(request, "request") }?;
        Ok(r.0.reliability() as c_int)
    })
}

/// Accept the request with a VI of `attrs` (NULL: the defaults; its
/// reliability must be the connecting side's, else both are refused with
/// [`super::UNET_EENGINE`]). The request handle is released in every case
/// (a request not accepted is rejected).
///
/// # Safety
/// `request` is NULL or a handle not yet released, invalid after the call;
/// `attrs` NULL or readable with NULL or live queue handles; `out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_request_accept(
    request: *mut UnetViRequest,
    attrs: *const UnetViAttrs,
    out: *mut *mut UnetVi,
) -> c_int {
    guard(|| {
        // SAFETY: a handle from unet_vi_server_wait_request, released only
        // here or in unet_vi_request_reject. Dropped unanswered (on a bad
        // argument below), it rejects the request.
        let req = unsafe { take(request, "request") }?;
        // SAFETY: per this function's contract.
        let (out, attrs) = unsafe { (out_ptr(out, "out")?, attributes(attrs)?) };
        store_vi(req.0.accept(&attrs), out)
    })
}

/// Reject the request (the connecting side gets [`super::UNET_EREFUSED`])
/// and release its handle.
///
/// # Safety
/// `request` is NULL or a handle not yet released; invalid after the call.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_request_reject(request: *mut UnetViRequest) -> c_int {
    guard(|| {
        // SAFETY: a handle from unet_vi_server_wait_request, released only
        // here or in unet_vi_request_accept.
        let req = unsafe { take(request, "request") }?;
        Ok(status(req.0.reject()))
    })
}

/// Connect a VI of `attrs` (NULL: the defaults) to whoever listens on
/// discriminator `tag` at `host` (`"HOST:PORT"` of another engine's UDP
/// wire; NULL or `"local"` for this engine), waiting at most `timeout_us`
/// microseconds for it to accept (-1: the engine's longest, 60 s).
/// [`super::UNET_EREFUSED`] when it rejects, [`super::UNET_ENOENDPOINT`]
/// when nobody listens on `tag`, [`UNET_ETIMEDOUT`] when nobody answered
/// in time, [`super::UNET_EENGINE`] when the reliability levels differ.
///
/// # Safety
/// `session` is NULL or a live handle; `host` NULL or NUL-terminated;
/// `attrs` NULL or readable with NULL or live queue handles; `out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_connect(
    session: *const UnetSession,
    host: *const c_char,
    tag: u64,
    attrs: *const UnetViAttrs,
    timeout_us: i64,
    out: *mut *mut UnetVi,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract (the session only read).
        let (out, s, host) = unsafe { (out_ptr(out, "out")?, session_of(session)?, c_bytes(host)) };
        let host = match host.map(|b| text(b, "host")).transpose()? {
            None | Some("local") => None,
            Some(h) => Some(
                h.parse()
                    .map_err(|e| fail(UNET_EINVAL, format!("bad host {h:?}: {e}")))?,
            ),
        };
        // SAFETY: per this function's contract.
        let attrs = unsafe { attributes(attrs) }?;
        let timeout = parse_timeout(timeout_us)?;
        match s.vi_connect(host, tag, &attrs, timeout) {
            Ok(v) => store_vi(Ok(v), out),
            Err(e) if engine_code(&e) == Some(ErrorCode::NoSuchRequest) => Err(fail(
                UNET_ETIMEDOUT,
                format!("nobody accepted the connection in time ({e})"),
            )),
            Err(e) => Err(fail_error(e)),
        }
    })
}
