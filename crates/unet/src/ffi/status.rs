//! Status codes and errors (`enum unet_status`, [`unet_last_error_message`],
//! [`unet_status_name`]), and the checks every entry point makes: the
//! panic guard, and the helpers that turn a raw pointer from C into a
//! reference or an error. Each entry point runs its body in [`guard`],
//! takes its pointers through [`handle_ref`], [`handle_mut`] and [`out_ptr`] in
//! one `unsafe` block whose `SAFETY` comment points at its `# Safety`
//! contract, and returns early with `?`.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use unet_control::ErrorCode;

use crate::Error;

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

/// Keep `msg` for [`unet_last_error_message`] and return `code`.
pub(super) fn fail(code: c_int, msg: impl Into<String>) -> c_int {
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

/// The status of `e`, with its message kept.
pub(super) fn fail_error(e: Error) -> c_int {
    fail(error_status(&e), e.to_string())
}

/// [`UNET_OK`], or the status of the error (with its message kept for
/// [`unet_last_error_message`]).
pub(super) fn status(r: Result<(), Error>) -> c_int {
    match r {
        Ok(()) => UNET_OK,
        Err(e) => fail_error(e),
    }
}

/// [`UNET_EINVAL`] for the NULL argument `what`.
pub(super) fn null(what: &str) -> c_int {
    fail(UNET_EINVAL, format!("{what} is NULL"))
}

// -------------------------------------------------------------------------
// The checks of every entry point
// -------------------------------------------------------------------------

/// What an entry point's body gives back: `Ok` with the status to return,
/// or `Err` with a failure's status, its message already kept (so that
/// `?` returns it).
pub(super) type Answer = Result<c_int, c_int>;

/// Run the body `f` of an entry point: its status, or [`UNET_EIO`] when
/// it panicked (no panic crosses the boundary).
pub(super) fn guard(f: impl FnOnce() -> Answer) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(r) | Err(r)) => r,
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

/// A `size_t`, `int64_t` or pointer answer, with panics turned into
/// `on_panic` ([`UNET_EIO`] in the message).
pub(super) fn guard_value<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            fail(UNET_EIO, "internal error");
            on_panic
        }
    }
}

/// The object behind the handle (or argument) `p`, which the call only
/// reads; [`UNET_EINVAL`] naming `what` for NULL.
///
/// # Safety
/// `p` is NULL or points to a live `T` that nothing writes for `'a` (the
/// call).
pub(super) unsafe fn handle_ref<'a, T>(p: *const T, what: &str) -> Result<&'a T, c_int> {
    // SAFETY: NULL or live and unwritten for 'a, per the caller's contract.
    unsafe { p.as_ref() }.ok_or_else(|| null(what))
}

/// The object behind the handle (or in-out argument) `p`, which this
/// thread alone uses during the call; [`UNET_EINVAL`] naming `what` for
/// NULL.
///
/// # Safety
/// `p` is NULL or points to a live `T` that nothing else reads or writes
/// for `'a` (the call).
pub(super) unsafe fn handle_mut<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, c_int> {
    // SAFETY: NULL or live and used by this call only, per the caller's
    // contract.
    unsafe { p.as_mut() }.ok_or_else(|| null(what))
}

/// The out-pointer `p`, to write the answer through (what it points to
/// need not be initialised); [`UNET_EINVAL`] naming `what` for NULL.
///
/// # Safety
/// `p` is NULL or writable, used by nothing else for `'a` (the call).
pub(super) unsafe fn out_ptr<'a, T>(
    p: *mut T,
    what: &str,
) -> Result<&'a mut MaybeUninit<T>, c_int> {
    // SAFETY: NULL or writable per the caller's contract; MaybeUninit<T>
    // has T's layout and asks nothing of the bytes there.
    unsafe { opt_out(p) }.ok_or_else(|| null(what))
}

/// An out-pointer that may be NULL (the answer not wanted).
///
/// # Safety
/// As for [`out_ptr`].
pub(super) unsafe fn opt_out<'a, T>(p: *mut T) -> Option<&'a mut MaybeUninit<T>> {
    // SAFETY: as in out_ptr.
    unsafe { p.cast::<MaybeUninit<T>>().as_mut() }
}

/// A new handle owning `v`, released by [`release`] or [`take`].
pub(super) fn new_handle<T>(v: T) -> *mut T {
    Box::into_raw(Box::new(v))
}

/// Take back the handle `p` (its object is the caller's to drop);
/// [`UNET_EINVAL`] naming `what` for NULL.
///
/// # Safety
/// `p` is NULL or a handle [`new_handle`] made, not yet released; invalid
/// after the call.
pub(super) unsafe fn take<T>(p: *mut T, what: &str) -> Result<Box<T>, c_int> {
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: a Box made by new_handle, taken back only once (the
    // caller's contract).
    Ok(unsafe { Box::from_raw(p) })
}

/// Release a handle (NULL is ignored), catching a panic of its drop as
/// every entry point does.
///
/// # Safety
/// As for [`take`].
pub(super) unsafe fn release<T>(p: *mut T) {
    guard(|| {
        if !p.is_null() {
            // SAFETY: per this function's contract.
            drop(unsafe { take(p, "handle") });
        }
        Ok(UNET_OK)
    });
}

/// `len` bytes at `p` to read (`p` may be NULL when `len` is 0).
///
/// # Safety
/// `p` is NULL or `len` readable bytes for `'a`.
pub(super) unsafe fn bytes_in<'a>(
    p: *const c_void,
    len: usize,
    what: &str,
) -> Result<&'a [u8], c_int> {
    if len == 0 {
        Ok(&[])
    } else if p.is_null() {
        Err(null(what))
    } else {
        // SAFETY: non-NULL with len readable bytes per the contract.
        Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
    }
}

/// `len` bytes at `p` to write (`p` may be NULL when `len` is 0).
///
/// # Safety
/// `p` is NULL or `len` writable bytes, used by nothing else for `'a`.
pub(super) unsafe fn bytes_out<'a>(
    p: *mut c_void,
    len: usize,
    what: &str,
) -> Result<&'a mut [u8], c_int> {
    if len == 0 {
        Ok(&mut [])
    } else if p.is_null() {
        Err(null(what))
    } else {
        // SAFETY: non-NULL with len writable bytes per the contract.
        Ok(unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), len) })
    }
}

/// A C string argument as bytes; `None` for NULL.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives the call.
pub(super) unsafe fn c_bytes<'a>(p: *const c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        None
    } else {
        // SAFETY: non-NULL, NUL-terminated per the caller's contract.
        Some(unsafe { CStr::from_ptr(p) }.to_bytes())
    }
}

/// A text argument; Err(status) when not UTF-8.
pub(super) fn text<'a>(b: &'a [u8], what: &str) -> Result<&'a str, c_int> {
    std::str::from_utf8(b).map_err(|_| fail(UNET_EINVAL, format!("{what} is not UTF-8")))
}

/// Write `s` NUL-terminated into `buf` (`cap` bytes): its length without
/// the NUL, or `too_small` with the bytes it needs.
///
/// # Safety
/// `buf` is `cap` writable bytes (not NULL).
pub(super) unsafe fn put_c_string(
    s: &str,
    buf: *mut c_char,
    cap: usize,
    too_small: impl FnOnce(usize) -> c_int,
) -> Answer {
    if s.len() >= cap {
        return Err(too_small(s.len() + 1));
    }
    // SAFETY: buf is writable for cap > s.len() bytes (checked above), and
    // the source is our own string, not overlapping it.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), s.len());
        *buf.add(s.len()) = 0;
    }
    Ok(s.len() as c_int)
}

/// A timeout in `unit`s of a duration: -1 is forever (None).
pub(super) fn timeout(t: i64, unit: fn(u64) -> Duration) -> Result<Option<Duration>, c_int> {
    match t {
        -1 => Ok(None),
        t if t >= 0 => Ok(Some(unit(t as u64))),
        t => Err(fail(UNET_EINVAL, format!("bad timeout {t}"))),
    }
}

/// A timeout in microseconds: -1 is forever (None).
pub(super) fn parse_timeout(t: i64) -> Result<Option<Duration>, c_int> {
    timeout(t, Duration::from_micros)
}

// -------------------------------------------------------------------------
// Entry points
// -------------------------------------------------------------------------

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_eio() {
        assert_eq!(guard(|| panic!("boom")), UNET_EIO);
        // SAFETY: the message is a NUL-terminated string owned by this thread.
        let m = unsafe { CStr::from_ptr(unet_last_error_message()) };
        assert!(m.to_str().unwrap().contains("boom"));
    }

    #[test]
    fn the_helpers_refuse_null_and_name_it() {
        // SAFETY: NULL pointers are what is checked.
        unsafe {
            assert_eq!(
                handle_ref::<u8>(std::ptr::null(), "thing").err(),
                Some(UNET_EINVAL)
            );
            assert_eq!(
                CStr::from_ptr(unet_last_error_message()).to_str().unwrap(),
                "thing is NULL"
            );
            assert!(handle_mut::<u8>(std::ptr::null_mut(), "x").is_err());
            assert!(out_ptr::<u8>(std::ptr::null_mut(), "out").is_err());
            assert!(opt_out::<u8>(std::ptr::null_mut()).is_none());
            assert!(take::<u8>(std::ptr::null_mut(), "h").is_err());
            assert_eq!(bytes_in(std::ptr::null(), 0, "data"), Ok(&[][..]));
            assert!(bytes_in(std::ptr::null(), 1, "data").is_err());
            assert!(bytes_out(std::ptr::null_mut(), 1, "buf").is_err());
        }
        let mut v = 0u32;
        // SAFETY: a writable local.
        unsafe { out_ptr(&mut v, "out") }.unwrap().write(7);
        assert_eq!(v, 7);
        assert_eq!(parse_timeout(-2), Err(UNET_EINVAL));
        assert_eq!(parse_timeout(-1), Ok(None));
    }
}
