//! The C ABI of VIA (`crate::via`): memory regions, VI attributes,
//! completion queues, connection set-up and the descriptor calls. Same
//! conventions as the rest of [`crate::ffi`]; the declarations are in the
//! VIA part of `include/unet.h`.
//!
//! Objects: `unet_region` ([`UnetRegion`]), `unet_cq` ([`UnetCq`]),
//! `unet_vi_server` ([`UnetViServer`]), `unet_vi_request`
//! ([`UnetViRequest`]) and `unet_vi` ([`UnetVi`]). Each is released by a
//! `*_free` function that accepts NULL and cannot fail; a region and a VI
//! also have a checked release that reports ([`unet_region_deregister`],
//! [`unet_vi_close`]), and a request is released by being answered
//! ([`unet_vi_request_accept`], [`unet_vi_request_reject`]).

use std::ffi::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::time::Duration;

use unet_control::ErrorCode;

use super::{
    c_bytes, fail, fail_error, guard, null, release, status, text, UnetSession, UNET_EFULL,
    UNET_EINUSE, UNET_EINVAL, UNET_EIO, UNET_ENOTPOSTED, UNET_ENOTSUP, UNET_EREFUSED,
    UNET_ETIMEDOUT, UNET_OK,
};
use crate::via::{
    engine_code, pull_min_bytes, CompletionQueue, ConnRequest, DirectReturn, LendRefusal,
    MemRegion, PostError, Reliability, Vi, ViAttributes, ViCompletion, ViError, ViQueue, ViSeg,
    ViServer, ViState, WaitError, VI_MAX_SEGMENTS, VI_MAX_TRANSFER,
};
use crate::Error;

// -------------------------------------------------------------------------
// Constants
// -------------------------------------------------------------------------

/// `unet_vi_attrs::reliability`: a message may be lost (each loss counted).
pub const UNET_VI_UNRELIABLE: c_int = Reliability::Unreliable as c_int;
/// `unet_vi_attrs::reliability`: every message arrives once, in order, or
/// the VI breaks; a send completes once the message reached the peer.
pub const UNET_VI_RELIABLE_DELIVERY: c_int = Reliability::ReliableDelivery as c_int;
/// `unet_vi_attrs::reliability`: as reliable delivery, and a send
/// completes only once the message is in a buffer the receiver posted.
pub const UNET_VI_RELIABLE_RECEPTION: c_int = Reliability::ReliableReception as c_int;

/// No VI error: [`unet_vi_state`] of a connected VI, the status of a
/// descriptor that completed.
pub const UNET_VI_OK: c_int = 0;
/// The peer closed its VI, or its process died.
pub const UNET_VI_PEER_GONE: c_int = ViError::PeerGone as c_int;
/// A message arrived with no receive posted, on a VI with `strict_rnr`.
pub const UNET_VI_RECEIVER_NOT_READY: c_int = ViError::ReceiverNotReady as c_int;
/// A message did not fit the receive descriptor it was given.
pub const UNET_VI_TOO_LONG: c_int = ViError::TooLong as c_int;
/// A descriptor named memory outside its region, a region of another
/// session, too many segments, or too many bytes.
pub const UNET_VI_BAD_DESCRIPTOR: c_int = ViError::BadDescriptor as c_int;
/// The peer did not acknowledge in time.
pub const UNET_VI_TIMEOUT: c_int = ViError::Timeout as c_int;
/// The peer wrote something impossible into the shared ring.
pub const UNET_VI_BROKEN: c_int = ViError::Broken as c_int;
/// The VI was closed by its owner with descriptors outstanding.
pub const UNET_VI_CLOSED: c_int = ViError::Closed as c_int;

/// [`unet_cq_done`]'s queue: the send queue of the VI.
pub const UNET_VI_QUEUE_SEND: c_int = 0;
/// [`unet_cq_done`]'s queue: the receive queue of the VI.
pub const UNET_VI_QUEUE_RECV: c_int = 1;

/// Most segments one descriptor may gather or scatter.
pub const UNET_VI_MAX_SEGMENTS: usize = VI_MAX_SEGMENTS;
/// Largest message a VI carries.
pub const UNET_VI_MAX_TRANSFER: usize = VI_MAX_TRANSFER;

// -------------------------------------------------------------------------
// Types shared with C
// -------------------------------------------------------------------------

/// Opaque memory region handle (`unet_region` in C). `None` only if a
/// deregistration panicked half-way (then every call on it fails).
pub struct UnetRegion(Option<MemRegion>);
/// Opaque completion queue handle (`unet_cq` in C).
pub struct UnetCq(CompletionQueue);
/// Opaque handle of a discriminator listened on (`unet_vi_server` in C).
pub struct UnetViServer(ViServer);
/// Opaque handle of a connection request waiting for an answer
/// (`unet_vi_request` in C).
pub struct UnetViRequest(ConnRequest);
/// Opaque VI handle (`unet_vi` in C).
pub struct UnetVi {
    vi: Vi,
    /// Its data path is lent out ([`unet_vi_direct_lend`]): every call
    /// but a few refuses until it is handed back.
    lent: bool,
}

/// How a VI is made (`unet_vi_attrs` in C). [`unet_vi_attrs_init`] fills
/// in the defaults; a NULL `unet_vi_attrs *` means the defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct UnetViAttrs {
    /// [`UNET_VI_UNRELIABLE`], [`UNET_VI_RELIABLE_DELIVERY`] (the default)
    /// or [`UNET_VI_RELIABLE_RECEPTION`]; both ends must ask for the same.
    pub reliability: c_int,
    /// Non-zero: VIA's strict behaviour, a message that finds no receive
    /// posted breaks the VI ([`UNET_VI_RECEIVER_NOT_READY`]).
    pub strict_rnr: c_int,
    /// Most send descriptors outstanding (0: the default, 1024).
    pub send_queue: u32,
    /// Most receive descriptors outstanding (0: the default, 1024).
    pub recv_queue: u32,
    /// Microseconds a blocking wait spins before it sleeps (taken as
    /// given; the default is 50).
    pub spin_us: u32,
    /// Milliseconds the peer of a VI carried between engines may stay
    /// silent while the VI waits for it before the VI breaks
    /// ([`ViAttributes::break_timeout`]); 0: the engine's setting.
    pub break_timeout_ms: u32,
    /// The completion queue the send queue reports to, or NULL.
    pub send_cq: *mut UnetCq,
    /// The completion queue the receive queue reports to, or NULL.
    pub recv_cq: *mut UnetCq,
}

/// One segment of a descriptor (`unet_vi_seg` in C): `len` bytes at
/// `offset` in `region`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct UnetViSeg {
    /// The region (of the VI's session).
    pub region: *mut UnetRegion,
    /// Byte offset in the region.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

/// The completion of a descriptor (`unet_vi_completion` in C), 16 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnetViCompletion {
    /// The number the descriptor was posted with.
    pub id: u64,
    /// 0 when it succeeded, else minus a `UNET_VI_*` error
    /// (`-UNET_VI_PEER_GONE`, ...).
    pub status: i32,
    /// The message length (for a send, the bytes sent); 0 on error.
    pub len: u32,
}

/// What a VI has counted (`unet_vi_stats` in C), 64 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnetViStats {
    /// Messages sent.
    pub tx_msgs: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Messages received into posted buffers.
    pub rx_msgs: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Messages that arrived before a receive was posted for them.
    pub rx_not_posted: u64,
    /// Times a send waited for room in the ring.
    pub tx_full: u64,
    /// Descriptors completed with an error.
    pub errors: u64,
    /// Messages dropped on an unreliable VI (too long for their receive).
    pub rx_dropped: u64,
}

const _: () = assert!(std::mem::size_of::<UnetViCompletion>() == 16);
const _: () = assert!(std::mem::size_of::<UnetViStats>() == 64);
const _: () =
    assert!(std::mem::size_of::<UnetViAttrs>() == 24 + 2 * std::mem::size_of::<*mut UnetCq>());
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<UnetViAttrs>() == 40);
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<UnetViSeg>() == 24);
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<UnetViDirect>() == 240);
const _: () = assert!(std::mem::size_of::<UnetViUnplaced>() == 24);

// What the documented thread rules rest on: a VI and a request may move
// to another thread; regions, completion queues and servers may be shared.
const _: () = {
    const fn send<T: Send>() {}
    const fn sync<T: Send + Sync>() {}
    send::<Vi>();
    send::<ConnRequest>();
    sync::<MemRegion>();
    sync::<CompletionQueue>();
    sync::<ViServer>();
};

// -------------------------------------------------------------------------
// Helpers
// -------------------------------------------------------------------------

/// A timeout in microseconds: -1 is forever (None).
fn parse_timeout(t: i64) -> Result<Option<Duration>, c_int> {
    match t {
        -1 => Ok(None),
        t if t >= 0 => Ok(Some(Duration::from_micros(t as u64))),
        t => Err(fail(UNET_EINVAL, format!("bad timeout {t}"))),
    }
}

/// Store a new handle in `*out`.
///
/// # Safety
/// `out` is non-NULL and writable.
unsafe fn store<T>(out: *mut *mut T, v: T) -> c_int {
    // SAFETY: non-NULL and writable per the caller's contract.
    unsafe { *out = Box::into_raw(Box::new(v)) };
    UNET_OK
}

/// The region behind a handle.
///
/// # Safety
/// `r` is NULL or a live handle from [`unet_register_memory`], not
/// released for the duration of the call.
unsafe fn region<'a>(r: *const UnetRegion) -> Result<&'a MemRegion, c_int> {
    // SAFETY: NULL or a live Box<UnetRegion> per the contract; only read.
    match unsafe { r.as_ref() } {
        Some(UnetRegion(Some(m))) => Ok(m),
        Some(UnetRegion(None)) => Err(fail(UNET_EINVAL, "the region handle is no longer valid")),
        None => Err(null("region")),
    }
}

/// The VI behind a handle.
///
/// # Safety
/// `vi` is NULL or a live handle, used by this thread only for the
/// duration of the call.
unsafe fn vi<'a>(vi: *mut UnetVi) -> Result<&'a mut Vi, c_int> {
    // SAFETY: NULL or a live, exclusively used Box<UnetVi> per the contract.
    match unsafe { vi.as_mut() } {
        Some(UnetVi { vi, lent: false }) => Ok(vi),
        Some(_) => Err(fail(
            UNET_EINUSE,
            "the VI's data path is lent (unet_vi_direct_lend): hand it back first",
        )),
        None => Err(null("vi")),
    }
}

/// The attributes `a` describes (NULL: the defaults).
///
/// # Safety
/// `a` is NULL or readable; its queue pointers NULL or live handles.
unsafe fn attributes(a: *const UnetViAttrs) -> Result<ViAttributes, c_int> {
    // SAFETY: NULL or readable per the contract.
    let Some(a) = (unsafe { a.as_ref() }).copied() else {
        return Ok(ViAttributes::default());
    };
    let d = ViAttributes::default();
    let reliability = u8::try_from(a.reliability)
        .ok()
        .and_then(Reliability::from_u8)
        .ok_or_else(|| {
            fail(
                UNET_EINVAL,
                format!("bad reliability level {}", a.reliability),
            )
        })?;
    let pick = |v: u32, dv: u32| if v == 0 { dv } else { v };
    // SAFETY: NULL or live handles per the contract; only read (cloned).
    let (send_cq, recv_cq) = unsafe { (a.send_cq.as_ref(), a.recv_cq.as_ref()) };
    Ok(ViAttributes {
        reliability,
        strict_rnr: a.strict_rnr != 0,
        send_queue: pick(a.send_queue, d.send_queue),
        recv_queue: pick(a.recv_queue, d.recv_queue),
        spin: Duration::from_micros(a.spin_us.into()),
        send_cq: send_cq.map(|q| q.0.clone()),
        recv_cq: recv_cq.map(|q| q.0.clone()),
        break_timeout: Duration::from_millis(a.break_timeout_ms.into()),
    })
}

fn default_attrs() -> UnetViAttrs {
    let d = ViAttributes::default();
    UnetViAttrs {
        reliability: d.reliability as c_int,
        strict_rnr: d.strict_rnr as c_int,
        send_queue: d.send_queue,
        recv_queue: d.recv_queue,
        spin_us: u32::try_from(d.spin.as_micros()).unwrap_or(u32::MAX),
        break_timeout_ms: 0,
        send_cq: ptr::null_mut(),
        recv_cq: ptr::null_mut(),
    }
}

fn completion(c: ViCompletion) -> UnetViCompletion {
    match c.status {
        Ok(n) => UnetViCompletion {
            id: c.id,
            status: 0,
            len: u32::try_from(n).unwrap_or(u32::MAX),
        },
        Err(e) => UnetViCompletion {
            id: c.id,
            status: -(e as i32),
            len: 0,
        },
    }
}

/// Store the completion `c`, if any: 1 with one, 0 without.
///
/// # Safety
/// `out` is non-NULL and writable.
unsafe fn store_completion(c: Option<ViCompletion>, out: *mut UnetViCompletion) -> c_int {
    match c {
        Some(c) => {
            // SAFETY: non-NULL and writable per the caller's contract.
            unsafe { out.write(completion(c)) };
            1
        }
        None => 0,
    }
}

fn fail_wait(e: WaitError) -> c_int {
    match e {
        WaitError::Timeout => fail(UNET_ETIMEDOUT, "no descriptor completed in time"),
        WaitError::Empty(_) => fail(UNET_ENOTPOSTED, e.to_string()),
    }
}

fn store_vi(r: Result<Vi, Error>, out: *mut *mut UnetVi) -> c_int {
    match r {
        // SAFETY: callers checked that out is non-NULL; writable per their
        // contract.
        Ok(vi) => unsafe { store(out, UnetVi { vi, lent: false }) },
        Err(e) => fail_error(e),
    }
}

/// A failed wait for a connection request: the session's
/// [`Error::Timeout`] says the engine is not answering, which is not what
/// happened.
fn fail_request_wait(e: Error) -> c_int {
    match e {
        Error::Timeout(_) => fail(UNET_ETIMEDOUT, "no connection request came in time"),
        e => fail_error(e),
    }
}

/// A `size_t`, `int64_t` or pointer answer, with panics turned into
/// `on_panic` ([`UNET_EIO`] in the message).
fn guard_value<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            fail(UNET_EIO, "internal error");
            on_panic
        }
    }
}

/// A static name for a VI error code or a completion status (its
/// negation), e.g. `"UNET_VI_PEER_GONE"`. Never NULL.
#[no_mangle]
pub extern "C" fn unet_vi_error_name(error: c_int) -> *const c_char {
    let s: &'static std::ffi::CStr = match ViError::from_u32(error.unsigned_abs()) {
        None if error == 0 => c"UNET_VI_OK",
        None => c"unknown VI error",
        Some(ViError::PeerGone) => c"UNET_VI_PEER_GONE",
        Some(ViError::ReceiverNotReady) => c"UNET_VI_RECEIVER_NOT_READY",
        Some(ViError::TooLong) => c"UNET_VI_TOO_LONG",
        Some(ViError::BadDescriptor) => c"UNET_VI_BAD_DESCRIPTOR",
        Some(ViError::Timeout) => c"UNET_VI_TIMEOUT",
        Some(ViError::Broken) => c"UNET_VI_BROKEN",
        Some(ViError::Closed) => c"UNET_VI_CLOSED",
    };
    s.as_ptr()
}

// -------------------------------------------------------------------------
// Memory regions
// -------------------------------------------------------------------------

/// Register `len` bytes of fresh, zeroed shared memory with the engine
/// (VIA's `VipRegisterMem`); it counts against the process's memory quota
/// ([`super::UNET_EQUOTA`]). [`UNET_EINVAL`] for 0 bytes.
///
/// # Safety
/// `session` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_register_memory(
    session: *const UnetSession,
    len: usize,
    out: *mut *mut UnetRegion,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return null("out");
        }
        // SAFETY: NULL or a live Box<UnetSession>, only read here.
        let Some(s) = (unsafe { session.as_ref() }) else {
            return null("session");
        };
        match s.0.register_memory(len) {
            // SAFETY: out is non-NULL and writable per the contract.
            Ok(r) => unsafe { store(out, UnetRegion(Some(r))) },
            Err(e) => fail_error(e),
        }
    })
}

/// The start of the region's memory, NULL for a NULL handle. Valid until
/// the handle is released.
///
/// # Safety
/// `region` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_region_ptr(region: *const UnetRegion) -> *mut c_void {
    guard_value(ptr::null_mut(), || {
        // SAFETY: per this function's contract.
        match unsafe { self::region(region) } {
            Ok(r) => r.as_ptr().cast(),
            Err(_) => ptr::null_mut(),
        }
    })
}

/// The region's length in bytes, 0 for a NULL handle (a region is never
/// empty).
///
/// # Safety
/// `region` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_region_len(region: *const UnetRegion) -> usize {
    guard_value(0, || {
        // SAFETY: per this function's contract.
        match unsafe { self::region(region) } {
            Ok(r) => r.len(),
            Err(_) => 0,
        }
    })
}

/// The handle the engine gave the region (>= 0), or [`UNET_EINVAL`] for
/// NULL.
///
/// # Safety
/// `region` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_region_handle(region: *const UnetRegion) -> i64 {
    guard_value(UNET_EIO as i64, || {
        // SAFETY: per this function's contract.
        match unsafe { self::region(region) } {
            Ok(r) => r.handle() as i64,
            Err(c) => c as i64,
        }
    })
}

/// Deregister the region and release its handle. [`UNET_EINUSE`] while a
/// posted descriptor still uses it: then nothing happens and the handle
/// stays valid.
///
/// # Safety
/// `region` is NULL or a live handle, used by no other thread during the
/// call; on success it is invalid afterwards.
#[no_mangle]
pub unsafe extern "C" fn unet_region_deregister(region: *mut UnetRegion) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live Box<UnetRegion> no other thread uses, per
        // the contract.
        let Some(h) = (unsafe { region.as_mut() }) else {
            return null("region");
        };
        let Some(r) = h.0.take() else {
            return fail(UNET_EINVAL, "the region handle is no longer valid");
        };
        match r.deregister() {
            Ok(()) => {
                // SAFETY: a Box from unet_register_memory, released only
                // here or in unet_region_free.
                drop(unsafe { Box::from_raw(region) });
                UNET_OK
            }
            Err((r, e)) => {
                h.0 = Some(r);
                fail(UNET_EINUSE, e.to_string())
            }
        }
    })
}

/// Release the region handle (NULL is ignored). The engine forgets the
/// region once no posted descriptor uses it any more.
///
/// # Safety
/// `region` is NULL or a handle not yet released; invalid after the call.
#[no_mangle]
pub unsafe extern "C" fn unet_region_free(region: *mut UnetRegion) {
    // SAFETY: per this function's contract.
    unsafe { release(region) }
}

// -------------------------------------------------------------------------
// Attributes and completion queues
// -------------------------------------------------------------------------

/// Fill `attrs` with the defaults: reliable delivery, not strict, 1024
/// descriptors each way, 50 µs of spinning, no completion queues.
///
/// # Safety
/// `attrs` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_attrs_init(attrs: *mut UnetViAttrs) -> c_int {
    guard(|| {
        if attrs.is_null() {
            return null("attrs");
        }
        // SAFETY: non-NULL and writable per the contract.
        unsafe { attrs.write(default_attrs()) };
        UNET_OK
    })
}

/// A new, empty completion queue.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_cq_create(out: *mut *mut UnetCq) -> c_int {
    guard(|| {
        if out.is_null() {
            return null("out");
        }
        // SAFETY: non-NULL and writable per the contract.
        unsafe { store(out, UnetCq(CompletionQueue::new())) }
    })
}

/// Release a completion queue handle (NULL is ignored). VIs made with it
/// keep reporting to it, unseen.
///
/// # Safety
/// `cq` is NULL or a handle not yet released; invalid after the call.
#[no_mangle]
pub unsafe extern "C" fn unet_cq_free(cq: *mut UnetCq) {
    // SAFETY: per this function's contract.
    unsafe { release(cq) }
}

fn store_entry(e: (u32, ViQueue), out_vi: *mut u32, out_queue: *mut c_int) {
    // SAFETY: NULL or writable per the callers' contracts.
    unsafe {
        if let Some(v) = out_vi.as_mut() {
            *v = e.0;
        }
        if let Some(q) = out_queue.as_mut() {
            *q = match e.1 {
                ViQueue::Send => UNET_VI_QUEUE_SEND,
                ViQueue::Recv => UNET_VI_QUEUE_RECV,
            };
        }
    }
}

/// The next entry of the completion queue (VIA's `VipCQDone`): returns 1
/// with the VI's id ([`unet_vi_id`]) in `*out_vi` and
/// [`UNET_VI_QUEUE_SEND`] or [`UNET_VI_QUEUE_RECV`] in `*out_queue`, or 0
/// when there is none. Take the completion itself from that VI's queue.
/// `out_vi` and `out_queue` may be NULL.
///
/// # Safety
/// `cq` is NULL or a live handle; `out_vi` and `out_queue` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn unet_cq_done(
    cq: *const UnetCq,
    out_vi: *mut u32,
    out_queue: *mut c_int,
) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live Box<UnetCq>, only read here.
        let Some(cq) = (unsafe { cq.as_ref() }) else {
            return null("cq");
        };
        match cq.0.done() {
            Some(e) => {
                store_entry(e, out_vi, out_queue);
                1
            }
            None => 0,
        }
    })
}

/// Wait at most `timeout_us` microseconds (-1: forever) for the next entry
/// of the completion queue (`VipCQWait`): 0 with it stored as by
/// [`unet_cq_done`], or [`UNET_ETIMEDOUT`].
///
/// # Safety
/// As for [`unet_cq_done`].
#[no_mangle]
pub unsafe extern "C" fn unet_cq_wait(
    cq: *const UnetCq,
    timeout_us: i64,
    out_vi: *mut u32,
    out_queue: *mut c_int,
) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live Box<UnetCq>, only read here.
        let Some(cq) = (unsafe { cq.as_ref() }) else {
            return null("cq");
        };
        let timeout = match parse_timeout(timeout_us) {
            Ok(t) => t,
            Err(c) => return c,
        };
        match cq.0.wait(timeout) {
            Some(e) => {
                store_entry(e, out_vi, out_queue);
                UNET_OK
            }
            None => fail(UNET_ETIMEDOUT, "no completion in time"),
        }
    })
}

// -------------------------------------------------------------------------
// Connection set-up
// -------------------------------------------------------------------------

/// Accept VI connections on discriminator `tag` of this engine.
/// [`UNET_EINUSE`] when another session already listens on it.
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
        if out.is_null() {
            return null("out");
        }
        // SAFETY: NULL or a live Box<UnetSession>, only read here.
        let Some(s) = (unsafe { session.as_ref() }) else {
            return null("session");
        };
        match s.0.vi_listen(tag) {
            // SAFETY: out is non-NULL and writable per the contract.
            Ok(v) => unsafe { store(out, UnetViServer(v)) },
            Err(e) => fail_error(e),
        }
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
        if out.is_null() {
            return null("out");
        }
        // SAFETY: NULL or a live Box<UnetViServer>, only read here.
        let Some(server) = (unsafe { server.as_ref() }) else {
            return null("server");
        };
        // SAFETY: per this function's contract.
        let attrs = match unsafe { attributes(attrs) } {
            Ok(a) => a,
            Err(c) => return c,
        };
        let timeout = match parse_timeout(timeout_us) {
            Ok(t) => t,
            Err(c) => return c,
        };
        match server.0.wait_request(timeout) {
            Ok(req) => store_vi(req.accept(&attrs), out),
            Err(e) => fail_request_wait(e),
        }
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
        if out.is_null() {
            return null("out");
        }
        // SAFETY: NULL or a live Box<UnetViServer>, only read here.
        let Some(server) = (unsafe { server.as_ref() }) else {
            return null("server");
        };
        let timeout = match parse_timeout(timeout_us) {
            Ok(t) => t,
            Err(c) => return c,
        };
        match server.0.wait_request(timeout) {
            // SAFETY: out is non-NULL and writable per the contract.
            Ok(r) => unsafe { store(out, UnetViRequest(r)) },
            Err(e) => fail_request_wait(e),
        }
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
        // SAFETY: NULL or a live Box<UnetViRequest>, only read here.
        match unsafe { request.as_ref() } {
            Some(r) => r.0.pid() as i64,
            None => null("request") as i64,
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
        // SAFETY: NULL or a live Box<UnetViRequest>, only read here.
        let Some(r) = (unsafe { request.as_ref() }) else {
            return null("request");
        };
        if buf.is_null() {
            return null("buf");
        }
        let text = r.0.host().map(|h| h.to_string()).unwrap_or_default();
        if text.len() >= cap {
            return fail(
                super::UNET_ETOOSMALL,
                format!("the address needs {} bytes with its NUL", text.len() + 1),
            );
        }
        // SAFETY: buf is writable for cap > text.len() bytes (checked
        // above), and the source is our own string, not overlapping it.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
            *buf.add(text.len()) = 0;
        }
        text.len() as c_int
    })
}

/// The reliability level the connecting side asked for (a
/// `UNET_VI_RELIABLE_*` / [`UNET_VI_UNRELIABLE`] value), or
/// [`UNET_EINVAL`] for NULL.
///
/// # Safety
/// `request` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_request_reliability(request: *const UnetViRequest) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live Box<UnetViRequest>, only read here.
        match unsafe { request.as_ref() } {
            Some(r) => r.0.reliability() as c_int,
            None => null("request"),
        }
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
        if request.is_null() {
            return null("request");
        }
        // SAFETY: a Box from unet_vi_server_wait_request, released only
        // here or in unet_vi_request_reject. Dropped unanswered (on a bad
        // argument below), it rejects the request.
        let req = unsafe { Box::from_raw(request) };
        if out.is_null() {
            return null("out");
        }
        // SAFETY: per this function's contract.
        let attrs = match unsafe { attributes(attrs) } {
            Ok(a) => a,
            Err(c) => return c,
        };
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
        if request.is_null() {
            return null("request");
        }
        // SAFETY: a Box from unet_vi_server_wait_request, released only
        // here or in unet_vi_request_accept.
        let req = unsafe { Box::from_raw(request) };
        status(req.0.reject())
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
        if out.is_null() {
            return null("out");
        }
        // SAFETY: NULL or a live Box<UnetSession>, only read here.
        let Some(s) = (unsafe { session.as_ref() }) else {
            return null("session");
        };
        // SAFETY: NULL or NUL-terminated per the contract.
        let host = match unsafe { c_bytes(host) } {
            None => None,
            Some(b) => match text(b, "host") {
                Err(c) => return c,
                Ok("local") => None,
                Ok(h) => match h.parse() {
                    Ok(a) => Some(a),
                    Err(e) => return fail(UNET_EINVAL, format!("bad host {h:?}: {e}")),
                },
            },
        };
        // SAFETY: per this function's contract.
        let attrs = match unsafe { attributes(attrs) } {
            Ok(a) => a,
            Err(c) => return c,
        };
        let timeout = match parse_timeout(timeout_us) {
            Ok(t) => t,
            Err(c) => return c,
        };
        match s.0.vi_connect(host, tag, &attrs, timeout) {
            Ok(v) => store_vi(Ok(v), out),
            Err(e) if engine_code(&e) == Some(ErrorCode::NoSuchRequest) => fail(
                UNET_ETIMEDOUT,
                format!("nobody accepted the connection in time ({e})"),
            ),
            Err(e) => fail_error(e),
        }
    })
}

// -------------------------------------------------------------------------
// VIs
// -------------------------------------------------------------------------

/// Post a descriptor of `n` segments on `q`.
///
/// # Safety
/// As for [`unet_vi_post_send`].
unsafe fn post(vi: *mut UnetVi, q: ViQueue, id: u64, segs: *const UnetViSeg, n: usize) -> c_int {
    // SAFETY: per the caller's contract.
    let vi = match unsafe { self::vi(vi) } {
        Ok(v) => v,
        Err(c) => return c,
    };
    let segs: &[UnetViSeg] = if n == 0 {
        &[]
    } else if segs.is_null() {
        return null("segs");
    } else {
        // Past VI_MAX_SEGMENTS + 1 the descriptor is bad whatever the
        // rest say: read no further.
        // SAFETY: non-NULL with n readable segments per the contract.
        unsafe { std::slice::from_raw_parts(segs, n.min(VI_MAX_SEGMENTS + 1)) }
    };
    let Some(first) = segs.first() else {
        return finish_post(vi, q, id, &[]);
    };
    if let [s] = segs {
        // The common case (every Javia post): no list of the most
        // segments a descriptor may have is filled for it (a C caller
        // draining 4 KiB messages: 183 -> 179 ns a message).
        // SAFETY: a live handle or NULL per the contract.
        let region = match unsafe { seg_region(0, s) } {
            Ok(r) => r,
            Err(c) => return c,
        };
        return finish_post(vi, q, id, &[seg(region, s)]);
    }
    // SAFETY: a live handle or NULL per the contract.
    let filler = match unsafe { seg_region(0, first) } {
        Ok(r) => ViSeg::new(r, 0, 0),
        Err(c) => return c,
    };
    let mut list = [filler; VI_MAX_SEGMENTS + 1];
    for (i, s) in segs.iter().enumerate() {
        // SAFETY: as above.
        let region = match unsafe { seg_region(i, s) } {
            Ok(r) => r,
            Err(c) => return c,
        };
        list[i] = seg(region, s);
    }
    finish_post(vi, q, id, &list[..segs.len()])
}

/// The Rust segment of `s`, in `region`.
#[inline(always)]
fn seg<'a>(region: &'a MemRegion, s: &UnetViSeg) -> ViSeg<'a> {
    // Beyond usize (32-bit targets): past any region, so a bad
    // descriptor, as in Rust.
    ViSeg {
        region,
        offset: usize::try_from(s.offset).unwrap_or(usize::MAX),
        len: usize::try_from(s.len).unwrap_or(usize::MAX),
    }
}

/// The region of segment `i`.
///
/// # Safety
/// `s.region` is NULL or a live handle, not released during the call.
unsafe fn seg_region<'a>(i: usize, s: &UnetViSeg) -> Result<&'a MemRegion, c_int> {
    if s.region.is_null() {
        return Err(fail(UNET_EINVAL, format!("segs[{i}].region is NULL")));
    }
    // SAFETY: non-NULL, live per the contract.
    unsafe { region(s.region) }
}

fn finish_post(vi: &mut Vi, q: ViQueue, id: u64, segs: &[ViSeg<'_>]) -> c_int {
    let r = match q {
        ViQueue::Send => vi.post_send(id, segs),
        ViQueue::Recv => vi.post_recv(id, segs),
    };
    match r {
        Ok(()) => UNET_OK,
        Err(e @ PostError::QueueFull) => fail(UNET_EFULL, e.to_string()),
    }
}

/// Post a send descriptor: the bytes of the `nsegs` segments at `segs`,
/// gathered in order into one message, completing with number `id`. The
/// segments' bytes must stay untouched until it completes. 0, or
/// [`UNET_EFULL`] when the send queue holds `send_queue` descriptors
/// (take completions first). A descriptor that names bytes outside its
/// region, a region of another session, more than
/// [`UNET_VI_MAX_SEGMENTS`] segments or more than [`UNET_VI_MAX_TRANSFER`]
/// bytes is posted, breaks the VI and completes with
/// [`UNET_VI_BAD_DESCRIPTOR`]; a NULL region is [`UNET_EINVAL`] (nothing
/// posted).
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only; `segs` NULL or
/// `nsegs` readable segments, each region NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_post_send(
    vi: *mut UnetVi,
    id: u64,
    segs: *const UnetViSeg,
    nsegs: usize,
) -> c_int {
    // SAFETY: per this function's contract.
    guard(|| unsafe { post(vi, ViQueue::Send, id, segs, nsegs) })
}

/// Send `len` bytes at `data` from ordinary memory, copied once during the
/// call, when that can be done now ([`Vi::send_copied`]): [`UNET_OK`] when
/// sent, [`UNET_EFULL`] when not (always on a VI between engines: post
/// from a region instead), [`UNET_EINVAL`] for a NULL `vi`, or a NULL
/// `data` with `len > 0`.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only; `data` NULL or
/// `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_send_copied(
    vi: *mut UnetVi,
    id: u64,
    data: *const c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let vi = match unsafe { self::vi(vi) } {
            Ok(v) => v,
            Err(c) => return c,
        };
        let data: &[u8] = if len == 0 {
            &[]
        } else if data.is_null() {
            return null("data");
        } else {
            // SAFETY: non-NULL with len readable bytes per the contract,
            // borrowed for this call only.
            unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }
        };
        if vi.send_copied(id, data) {
            UNET_OK
        } else {
            UNET_EFULL
        }
    })
}

/// Post a receive descriptor: the next message is scattered into the
/// `nsegs` segments at `segs` in order, completing with number `id` and
/// its length. As [`unet_vi_post_send`] otherwise ([`UNET_EFULL`] past
/// `recv_queue` descriptors).
///
/// # Safety
/// As for [`unet_vi_post_send`].
#[no_mangle]
pub unsafe extern "C" fn unet_vi_post_recv(
    vi: *mut UnetVi,
    id: u64,
    segs: *const UnetViSeg,
    nsegs: usize,
) -> c_int {
    // SAFETY: per this function's contract.
    guard(|| unsafe { post(vi, ViQueue::Recv, id, segs, nsegs) })
}

/// Take the next completed descriptor of queue `q` if there is one.
///
/// # Safety
/// As for [`unet_vi_send_done`].
unsafe fn done(vi: *mut UnetVi, q: ViQueue, out: *mut UnetViCompletion) -> c_int {
    // SAFETY: per the caller's contract.
    let vi = match unsafe { self::vi(vi) } {
        Ok(v) => v,
        Err(c) => return c,
    };
    if out.is_null() {
        return null("out");
    }
    let c = match q {
        ViQueue::Send => vi.send_done(),
        ViQueue::Recv => vi.recv_done(),
    };
    // SAFETY: out is non-NULL and writable per the contract.
    unsafe { store_completion(c, out) }
}

/// Wait for the next completed descriptor of queue `q`.
///
/// # Safety
/// As for [`unet_vi_send_wait`].
unsafe fn wait(vi: *mut UnetVi, q: ViQueue, timeout_us: i64, out: *mut UnetViCompletion) -> c_int {
    // SAFETY: per the caller's contract.
    let vi = match unsafe { self::vi(vi) } {
        Ok(v) => v,
        Err(c) => return c,
    };
    if out.is_null() {
        return null("out");
    }
    let timeout = match parse_timeout(timeout_us) {
        Ok(t) => t,
        Err(c) => return c,
    };
    let r = match q {
        ViQueue::Send => vi.send_wait(timeout),
        ViQueue::Recv => vi.recv_wait(timeout),
    };
    match r {
        Ok(c) => {
            // SAFETY: out is non-NULL and writable per the contract.
            unsafe { out.write(completion(c)) };
            UNET_OK
        }
        Err(e) => fail_wait(e),
    }
}

/// The next completed send descriptor (VIA's `VipSendDone`): 1 with it in
/// `*out`, 0 when none has completed.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only; `out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_send_done(vi: *mut UnetVi, out: *mut UnetViCompletion) -> c_int {
    // SAFETY: per this function's contract.
    guard(|| unsafe { done(vi, ViQueue::Send, out) })
}

/// The next completed receive descriptor (`VipRecvDone`): 1 with it in
/// `*out`, 0 when none has completed.
///
/// # Safety
/// As for [`unet_vi_send_done`].
#[no_mangle]
pub unsafe extern "C" fn unet_vi_recv_done(vi: *mut UnetVi, out: *mut UnetViCompletion) -> c_int {
    // SAFETY: per this function's contract.
    guard(|| unsafe { done(vi, ViQueue::Recv, out) })
}

/// Wait at most `timeout_us` microseconds (-1: forever) for the next
/// completed send descriptor (`VipSendWait`): 0 with it in `*out`,
/// [`UNET_ETIMEDOUT`], or [`UNET_ENOTPOSTED`] when no send descriptor is
/// outstanding (nothing could complete; [`unet_vi_state`] says whether
/// the VI is broken).
///
/// # Safety
/// As for [`unet_vi_send_done`].
#[no_mangle]
pub unsafe extern "C" fn unet_vi_send_wait(
    vi: *mut UnetVi,
    timeout_us: i64,
    out: *mut UnetViCompletion,
) -> c_int {
    // SAFETY: per this function's contract.
    guard(|| unsafe { wait(vi, ViQueue::Send, timeout_us, out) })
}

/// Wait at most `timeout_us` microseconds (-1: forever) for the next
/// completed receive descriptor (`VipRecvWait`), as
/// [`unet_vi_send_wait`]: spins `spin_us`, then sleeps until a message or
/// the peer's going wakes it.
///
/// # Safety
/// As for [`unet_vi_send_done`].
#[no_mangle]
pub unsafe extern "C" fn unet_vi_recv_wait(
    vi: *mut UnetVi,
    timeout_us: i64,
    out: *mut UnetViCompletion,
) -> c_int {
    // SAFETY: per this function's contract.
    guard(|| unsafe { wait(vi, ViQueue::Recv, timeout_us, out) })
}

/// The VI's state: [`UNET_VI_OK`] (0) while connected, else the positive
/// `UNET_VI_*` error it broke with; [`UNET_EINVAL`] for NULL.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_state(vi: *mut UnetVi) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        match unsafe { self::vi(vi) } {
            Ok(v) => match v.state() {
                ViState::Connected => UNET_VI_OK,
                ViState::Error(e) => e as c_int,
            },
            Err(c) => c,
        }
    })
}

/// The VI's id in its engine (>= 0; what completion queues report), or
/// [`UNET_EINVAL`] for NULL.
///
/// # Safety
/// `vi` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_id(vi: *const UnetVi) -> i64 {
    guard_value(UNET_EIO as i64, || {
        // SAFETY: NULL or a live Box<UnetVi>, only read here.
        match unsafe { vi.as_ref() } {
            Some(v) => v.vi.id() as i64,
            None => null("vi") as i64,
        }
    })
}

/// 1 when the VI's messages go straight between the two processes (a
/// local VI on the direct path), 0 when they go through the engines, or
/// [`UNET_EINVAL`] for NULL.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_is_direct(vi: *mut UnetVi) -> c_int {
    guard_value(UNET_EIO, || {
        // SAFETY: NULL or a live Box<UnetVi> per the contract.
        match unsafe { vi.as_mut() } {
            Some(v) => c_int::from(v.vi.is_direct()),
            None => null("vi"),
        }
    })
}

/// Copy what the VI has counted into `*out`.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only; `out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_get_stats(vi: *mut UnetVi, out: *mut UnetViStats) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let vi = match unsafe { self::vi(vi) } {
            Ok(v) => v,
            Err(c) => return c,
        };
        if out.is_null() {
            return null("out");
        }
        let s = vi.stats();
        let st = UnetViStats {
            tx_msgs: s.tx_msgs,
            tx_bytes: s.tx_bytes,
            rx_msgs: s.rx_msgs,
            rx_bytes: s.rx_bytes,
            rx_not_posted: s.rx_not_posted,
            tx_full: s.tx_full,
            errors: s.errors,
            rx_dropped: s.rx_dropped,
        };
        // SAFETY: non-NULL and writable per the contract.
        unsafe { out.write(st) };
        UNET_OK
    })
}

/// Close the VI and release its handle, whatever the outcome: descriptors
/// still outstanding complete with [`UNET_VI_CLOSED`] and are dropped
/// with it; the peer's VI breaks with [`UNET_VI_PEER_GONE`]. Returns the
/// engine's answer (0, or a status when it could not be told).
///
/// # Safety
/// `vi` is NULL or a handle not yet released; invalid after the call.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_close(vi: *mut UnetVi) -> c_int {
    guard(|| {
        if vi.is_null() {
            return null("vi");
        }
        // SAFETY: a Box from unet_vi_connect or an accept, released only
        // here or in unet_vi_free.
        let v = unsafe { Box::from_raw(vi) };
        status(v.vi.close())
    })
}

/// Release a VI handle (NULL is ignored), closing it as
/// [`unet_vi_close`] does.
///
/// # Safety
/// `vi` is NULL or a handle not yet released; invalid after the call.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_free(vi: *mut UnetVi) {
    // SAFETY: per this function's contract.
    unsafe { release(vi) }
}

/// A local VI's data path as lent out by [`unet_vi_direct_lend`]
/// (`unet_vi_direct` in C): its two rings and the lines of the connection
/// the borrower reads and writes, then what it starts from and hands
/// back. The rings follow the direct path's layout (`unet_abi`: records
/// of an 8-byte header, tag `(position >> 3) + 1` in its low half, length
/// and the `RECORD_PAD`/`RECORD_REF` flags in its high half, 32-byte
/// aligned); what the peer writes is untrusted.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct UnetViDirect {
    /// The ring this side sends on.
    pub tx: *mut u8,
    /// The ring this side receives from.
    pub rx: *const u8,
    /// Bytes in each ring (a power of two).
    pub ring_size: u64,
    /// The largest payload of one record.
    pub max_len: u64,
    /// Messages of this many bytes or more go as references to the
    /// sender's region: the library's, not the borrower's.
    pub pull_min: u64,
    /// The peer's consumer position of `tx` (read with acquire).
    pub tx_consumed: *const u64,
    /// The peer's sleeping flag (read after a full fence that follows the
    /// publishing store; set: call [`unet_vi_direct_wake`]).
    pub tx_sleeping: *const u32,
    /// This side's consumer position of `rx` (written with release).
    pub rx_consumed: *mut u64,
    /// Non-zero once the peer closed.
    pub peer_closed: *const u32,
    /// Messages and bytes sent on the direct path (two words, this
    /// process's only writer while lent: `unet stat` reads them).
    pub tx_counters: *mut u64,
    /// Messages and bytes received.
    pub rx_counters: *mut u64,
    /// The next position to write in `tx`; the borrower moves it on.
    pub tx_pos: u64,
    /// The next position to read in `rx`; the borrower moves it on.
    pub rx_pos: u64,
    /// The position last published in `rx_consumed`.
    pub rx_published: u64,
    /// Messages the borrower sent (0 when lent; it counts up).
    pub sent: u64,
    /// Their bytes.
    pub sent_bytes: u64,
    /// Messages the borrower placed into its receives.
    pub received: u64,
    /// Their bytes.
    pub received_bytes: u64,
    /// Times a send found the ring full.
    pub tx_full: u64,
    /// The peer's count of this side's messages it has placed (read with
    /// acquire): a message sent as a reference completes once it reaches
    /// the message's number.
    pub tx_placed: *const u64,
    /// This side's count of messages placed (written with release once a
    /// reference's data is copied; then the peer is woken if it sleeps).
    pub rx_placed: *mut u64,
    /// Messages the VI sent before the lending: the borrower's sends are
    /// numbered on from it (its first is `sent_base + 1`).
    pub sent_base: u64,
    /// Messages placed before the lending (this side's count is
    /// `placed_base + received`).
    pub placed_base: u64,
    /// For [`unet_vi_direct_sleep`]: wake once `*tx_placed` reaches this
    /// too (0: not waited for).
    pub wait_placed: u64,
    /// For [`unet_vi_direct_return`]: sends in the ring the peer has not
    /// placed yet, oldest first (NULL when none), which the library then
    /// completes.
    pub unplaced: *const UnetViUnplaced,
    /// How many.
    pub nunplaced: u64,
    /// 1 when this process takes part in asymmetric fences (the peer's
    /// sleeping side makes every such thread execute a full barrier before
    /// it sleeps): then a compiler barrier between publishing and reading
    /// `tx_sleeping` is enough; 0: a full fence is needed there.
    pub asymmetric: u64,
    /// For [`unet_vi_direct_lend`], set by the caller: where the numbers
    /// of the receives posted go (they become the borrower's, in order),
    /// and room for how many (NULL and 0: lend only with none posted).
    pub recv_ids: *mut u64,
    /// That room.
    pub recv_cap: u64,
    /// How many receives were posted, their numbers in `recv_ids`.
    pub nrecv: u64,
}

/// A send the peer has not placed yet, handed back with a lent data path
/// (`unet_vi_unplaced` in C).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UnetViUnplaced {
    /// The descriptor's number (its completion's id).
    pub id: u64,
    /// Its length.
    pub len: u64,
    /// The message's number: it completes once the peer has placed as many.
    pub seq: u64,
}

/// Lend the VI's data path to the caller, which then reads and writes the
/// rings itself (language bindings whose calls into the library cost more
/// than the ring's own work): 0 with `*out` filled. Receives posted become
/// the borrower's: their numbers, in order, in `out->recv_ids` (room for
/// `out->recv_cap`, set by the caller), how many in `out->nrecv` (their
/// memory is the borrower's to keep registered from then on).
/// [`UNET_EINUSE`] while sends are posted or completions untaken (take
/// them, then try again), or more receives are posted than `recv_cap`;
/// [`UNET_ENOTSUP`] for a VI that can never lend it (between engines,
/// with a completion queue, of reliable reception, strict about receives
/// not posted, or broken). Until [`unet_vi_direct_return`] every other
/// call on the VI but [`unet_vi_direct_sleep`], [`unet_vi_direct_wake`],
/// [`unet_vi_direct_grant`], [`unet_vi_direct_peer_region`],
/// [`unet_vi_id`], [`unet_vi_is_direct`], [`unet_vi_close`] and
/// [`unet_vi_free`] fails with [`UNET_EINUSE`]. The pointers stay valid
/// until the VI is closed.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only; `out` NULL or
/// readable and writable, its `recv_ids` NULL or `recv_cap` writable
/// numbers.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_direct_lend(vi: *mut UnetVi, out: *mut UnetViDirect) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract (refuses a lent VI).
        let v = match unsafe { self::vi(vi) } {
            Ok(v) => v,
            Err(c) => return c,
        };
        if out.is_null() {
            return null("out");
        }
        // SAFETY: non-NULL and readable (writable) per the contract.
        let (ids, cap) = unsafe { ((*out).recv_ids, (*out).recv_cap) };
        let ids: &mut [u64] = if ids.is_null() || cap == 0 {
            &mut []
        } else {
            // SAFETY: recv_cap writable numbers at recv_ids per the
            // contract; a receive queue holds far fewer than u32::MAX.
            unsafe { std::slice::from_raw_parts_mut(ids, cap.min(u64::from(u32::MAX)) as usize) }
        };
        let (l, nrecv) = match v.lend_direct(ids) {
            Ok(l) => l,
            Err(LendRefusal::Busy) => {
                return fail(
                    UNET_EINUSE,
                    "sends are posted, completions untaken or more receives posted than \
                     recv_cap on this VI",
                )
            }
            Err(LendRefusal::Never) => {
                return fail(
                    UNET_ENOTSUP,
                    "this VI's data path cannot be lent (between engines, with a completion \
                     queue, of reliable reception, strict about receives not posted, or broken)",
                )
            }
        };
        let (c, sent_base, placed_base) = (l.conn, l.sent, l.placed);
        let d = UnetViDirect {
            tx: c.tx,
            rx: c.rx,
            ring_size: c.size,
            max_len: c.max_len,
            pull_min: pull_min_bytes(),
            tx_consumed: c.tx_consumed.cast(),
            tx_sleeping: c.tx_sleeping.cast(),
            rx_consumed: c.rx_consumed.cast_mut().cast(),
            peer_closed: c.peer_closed.cast(),
            tx_counters: c.tx_counters.cast_mut().cast(),
            rx_counters: c.rx_counters.cast_mut().cast(),
            tx_pos: c.tx_pos,
            rx_pos: c.rx_pos,
            rx_published: c.rx_published,
            sent: 0,
            sent_bytes: 0,
            received: 0,
            received_bytes: 0,
            tx_full: 0,
            tx_placed: c.tx_placed.cast(),
            rx_placed: c.rx_placed.cast_mut().cast(),
            sent_base,
            placed_base,
            wait_placed: 0,
            unplaced: ptr::null(),
            nunplaced: 0,
            asymmetric: u64::from(unet_sys::asymmetric_fences()),
            recv_ids: ids.as_mut_ptr(),
            recv_cap: ids.len() as u64,
            nrecv: nrecv as u64,
        };
        // SAFETY: non-NULL and writable per the contract.
        unsafe { out.write(d) };
        // SAFETY: vi is a live handle (self::vi accepted it).
        unsafe { (*vi).lent = true };
        UNET_OK
    })
}

/// Hand a lent data path back: the positions and counts in `*d` (the
/// borrower's, from [`unet_vi_direct_lend`]) become the VI's. Positions
/// the ring's rules cannot produce break the VI ([`UNET_VI_BROKEN`]).
/// 0, or [`UNET_EINVAL`] when the VI is not lent (or for NULL).
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only; `d` NULL or
/// readable.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_direct_return(vi: *mut UnetVi, d: *const UnetViDirect) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live, exclusively used handle per the contract.
        let Some(h) = (unsafe { vi.as_mut() }) else {
            return null("vi");
        };
        // SAFETY: NULL or readable per the contract.
        let Some(d) = (unsafe { d.as_ref() }).copied() else {
            return null("d");
        };
        if !h.lent {
            return fail(UNET_EINVAL, "the VI's data path is not lent");
        }
        let unplaced: &[UnetViUnplaced] = if d.nunplaced == 0 {
            &[]
        } else if d.unplaced.is_null() {
            return null("d->unplaced");
        } else if d.nunplaced > u64::from(u32::MAX) {
            return fail(UNET_EINVAL, "d->nunplaced is impossibly large");
        } else {
            // SAFETY: non-NULL with nunplaced readable entries per the
            // contract (a count past what a VI could have outstanding is
            // refused above).
            unsafe { std::slice::from_raw_parts(d.unplaced, d.nunplaced as usize) }
        };
        h.lent = false;
        h.vi.take_back_direct(&DirectReturn {
            tx_pos: d.tx_pos,
            rx_pos: d.rx_pos,
            rx_published: d.rx_published,
            sent: d.sent,
            sent_bytes: d.sent_bytes,
            received: d.received,
            received_bytes: d.received_bytes,
            tx_full: d.tx_full,
            unplaced: unplaced
                .iter()
                .map(|u| (u.id, usize::try_from(u.len).unwrap_or(usize::MAX), u.seq))
                .collect(),
        });
        UNET_OK
    })
}

/// Sleep, for the borrower of a lent data path, until a record is at
/// `d->rx_pos` in the receiving ring, the peer closes, or `timeout_us`
/// microseconds pass (at most a second; a wake-up may also be spurious:
/// look at the ring again). `d->rx_pos` is published to the peer first
/// (and becomes `d->rx_published`). 0, or [`UNET_EINVAL`] when the VI is
/// not lent or `d->rx_pos` is not a position the borrower can have
/// reached.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only; `d` NULL or
/// readable and writable.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_direct_sleep(
    vi: *mut UnetVi,
    d: *mut UnetViDirect,
    timeout_us: i64,
) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live, exclusively used handle per the contract.
        let Some(h) = (unsafe { vi.as_mut() }) else {
            return null("vi");
        };
        // SAFETY: NULL or readable and writable per the contract.
        let Some(d) = (unsafe { d.as_mut() }) else {
            return null("d");
        };
        if !h.lent {
            return fail(UNET_EINVAL, "the VI's data path is not lent");
        }
        let t = Duration::from_micros(timeout_us.clamp(0, 1_000_000) as u64);
        if !h.vi.sleep_lent(d.rx_pos, d.wait_placed, t) {
            return fail(
                UNET_EINVAL,
                "rx_pos is not a position the borrower can have reached",
            );
        }
        d.rx_published = d.rx_pos;
        UNET_OK
    })
}

/// Grant `region` to the peer of a lent data path, for the borrower's
/// sends by reference (once per region and VI; later calls answer at
/// once). 0; [`UNET_EREFUSED`] when the engine refused (send by copy
/// then) or the region belongs to another session; [`UNET_EINVAL`] when
/// the VI is not lent.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only; `region` NULL
/// or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_direct_grant(vi: *mut UnetVi, region: *const UnetRegion) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live, exclusively used handle per the contract.
        let Some(h) = (unsafe { vi.as_mut() }) else {
            return null("vi");
        };
        // SAFETY: NULL or a live handle per the contract.
        let r = match unsafe { self::region(region) } {
            Ok(r) => r,
            Err(c) => return c,
        };
        if !h.lent {
            return fail(UNET_EINVAL, "the VI's data path is not lent");
        }
        if h.vi.grant_lent(r) {
            UNET_OK
        } else {
            fail(
                UNET_EREFUSED,
                "the region cannot be granted to the VI's peer",
            )
        }
    })
}

/// The peer's region `handle` (from a reference record), mapped for
/// reading, for the borrower of a lent data path: 0 with its address in
/// `*ptr`, its length in `*len`, and in `*evicted` the handle of a region
/// the library unmapped to make room for it (it keeps a bounded number;
/// forget that one's memory), or -1. A region's memory stays mapped until
/// it is unmapped so or the path is returned. [`UNET_EREFUSED`] when the
/// engine refuses it (the record is then the library's to report);
/// [`UNET_EINVAL`] when the VI is not lent.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only; `ptr`, `len`
/// and `evicted` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_direct_peer_region(
    vi: *mut UnetVi,
    handle: u32,
    ptr: *mut *const u8,
    len: *mut u64,
    evicted: *mut i64,
) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live, exclusively used handle per the contract.
        let Some(h) = (unsafe { vi.as_mut() }) else {
            return null("vi");
        };
        if ptr.is_null() || len.is_null() || evicted.is_null() {
            return null("ptr, len or evicted");
        }
        if !h.lent {
            return fail(UNET_EINVAL, "the VI's data path is not lent");
        }
        match h.vi.peer_region_lent(handle) {
            Some((p, n, gone)) => {
                // SAFETY: all three non-NULL and writable per the contract.
                unsafe {
                    ptr.write(p);
                    len.write(n as u64);
                    evicted.write(gone.map_or(-1, i64::from));
                }
                UNET_OK
            }
            None => fail(UNET_EREFUSED, "the peer's region cannot be mapped"),
        }
    })
}

/// Wake the peer of a lent data path, which the borrower found asleep
/// (its sleeping flag set) after publishing a record. 0, or
/// [`UNET_EINVAL`] when the VI is not lent.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_direct_wake(vi: *mut UnetVi) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live, exclusively used handle per the contract.
        match unsafe { vi.as_mut() } {
            Some(h) if h.lent => {
                h.vi.wake_direct_peer();
                UNET_OK
            }
            Some(_) => fail(UNET_EINVAL, "the VI's data path is not lent"),
            None => null("vi"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
    use unet_abi::{record_span, record_tag, RECORD_HEADER, RECORD_PAD};

    /// A borrower of a lent data path, as a binding would write one: the
    /// ring's rules, nothing of the library's.
    struct Borrower {
        d: UnetViDirect,
        /// The peer slept when the last send was published.
        asleep: bool,
    }

    impl Borrower {
        fn hdr(ring: *const u8, off: u64) -> &'static AtomicU64 {
            // SAFETY: off is 8-aligned and inside the ring (callers mask it).
            unsafe { &*(ring.add(off as usize) as *const AtomicU64) }
        }

        /// Send `data` (one record; padding at the end of a lap); false
        /// when the ring has no room.
        fn send(&mut self, data: &[u8]) -> bool {
            let d = &mut self.d;
            let span = record_span(data.len()) as u64;
            let off = d.tx_pos & (d.ring_size - 1);
            let pad = if off + span > d.ring_size {
                d.ring_size - off
            } else {
                0
            };
            // SAFETY: the lent pointer to the peer's consumer line.
            let consumed = unsafe { &*(d.tx_consumed as *const AtomicU64) }.load(Ordering::Acquire);
            if d.tx_pos + pad + span > consumed + d.ring_size {
                d.tx_full += 1;
                return false;
            }
            if pad > 0 {
                let h = record_tag(d.tx_pos) as u64 | (((RECORD_PAD | pad as u32) as u64) << 32);
                Self::hdr(d.tx, off).store(h, Ordering::Release);
                d.tx_pos += pad;
            }
            let off = d.tx_pos & (d.ring_size - 1);
            // SAFETY: the record fits in the ring from off (checked above).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr(),
                    d.tx.add(off as usize + RECORD_HEADER),
                    data.len(),
                )
            };
            let h = record_tag(d.tx_pos) as u64 | ((data.len() as u64) << 32);
            Self::hdr(d.tx, off).store(h, Ordering::Release);
            d.tx_pos += span;
            d.sent += 1;
            d.sent_bytes += data.len() as u64;
            fence(Ordering::SeqCst);
            // SAFETY: the lent pointer to the peer's sleeping flag.
            self.asleep =
                unsafe { &*(d.tx_sleeping as *const AtomicU32) }.load(Ordering::Relaxed) != 0;
            true
        }

        /// The next message, copied into `buf`; None when the ring is empty.
        fn recv(&mut self, buf: &mut [u8]) -> Option<usize> {
            let d = &mut self.d;
            loop {
                let off = d.rx_pos & (d.ring_size - 1);
                let h = Self::hdr(d.rx, off).load(Ordering::Acquire);
                if h as u32 != record_tag(d.rx_pos) {
                    return None;
                }
                let len = (h >> 32) as u32;
                if len & RECORD_PAD != 0 {
                    d.rx_pos += (len & !RECORD_PAD) as u64;
                    continue;
                }
                let len = len as usize;
                // SAFETY: a test's own peer wrote a record inside the ring.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        d.rx.add(off as usize + RECORD_HEADER),
                        buf.as_mut_ptr(),
                        len,
                    )
                };
                d.rx_pos += record_span(len) as u64;
                d.received += 1;
                d.received_bytes += len as u64;
                // SAFETY: the lent pointer to our consumer line.
                unsafe { &*(d.rx_consumed as *const AtomicU64) }.store(d.rx_pos, Ordering::Release);
                d.rx_published = d.rx_pos;
                return Some(len);
            }
        }
    }

    /// An engine and a connected pair: `(engine, a, b, a's session, b's)`.
    fn pair(r: Reliability) -> (crate::Engine, Vi, Vi, crate::Session, crate::Session) {
        let e = crate::Engine::start(crate::EngineConfig::default()).unwrap();
        let s1 = crate::Session::embedded(&e).unwrap();
        let s2 = crate::Session::embedded(&e).unwrap();
        let attrs = ViAttributes {
            reliability: r,
            ..ViAttributes::default()
        };
        let server = s2.vi_listen(9).unwrap();
        let (s, a) = (s1.clone(), attrs.clone());
        let t = std::thread::spawn(move || s.vi_connect(None, 9, &a, None));
        let b = server.accept(&attrs, None).unwrap();
        let a = t.join().unwrap().unwrap();
        (e, a, b, s1, s2)
    }

    #[test]
    fn a_lent_data_path_carries_messages_both_ways_and_the_vi_goes_on_where_it_stopped() {
        let (_e, a, mut b, sa, sb) = pair(Reliability::ReliableDelivery);
        let h = Box::into_raw(Box::new(UnetVi { vi: a, lent: false }));
        let rb = sb.register_memory(1 << 16).unwrap();
        let mut c = UnetViCompletion::default();
        let mut d = std::mem::MaybeUninit::<UnetViDirect>::zeroed();
        // SAFETY: h is a live handle used by this thread only; d writable.
        unsafe {
            assert_eq!(unet_vi_direct_lend(h, d.as_mut_ptr()), UNET_OK);
            let mut w = Borrower {
                d: d.assume_init(),
                asleep: false,
            };
            assert_eq!(w.d.pull_min, crate::via::pull_min_bytes());
            // Lent: the VI refuses everything else, and a second lending.
            assert_eq!(unet_vi_send_done(h, &mut c), UNET_EINUSE);
            assert_eq!(unet_vi_direct_lend(h, d.as_mut_ptr()), UNET_EINUSE);
            // Messages across several laps of the ring (padding included),
            // the peer taking them as they come.
            let mut buf = vec![0u8; 4096];
            let mut i = 0usize;
            while w.d.tx_pos < 3 * w.d.ring_size {
                i += 1;
                let msg: Vec<u8> = (0..(i * 37) % 1500).map(|j| (i + j) as u8).collect();
                b.post_recv(i as u64, &[ViSeg::new(&rb, 0, 4096)]).unwrap();
                while !w.send(&msg) {
                    std::hint::spin_loop();
                }
                let got = b.recv_wait(Some(Duration::from_secs(5))).unwrap();
                assert_eq!(got.status, Ok(msg.len()));
                let mut back = vec![0u8; msg.len()];
                rb.read(0, &mut back);
                assert_eq!(back, msg, "message {i}");
                // And back the other way, into the borrower's hands.
                b.post_send(i as u64, &[ViSeg::new(&rb, 0, msg.len())])
                    .unwrap();
                let n = loop {
                    if let Some(n) = w.recv(&mut buf) {
                        break n;
                    }
                    std::hint::spin_loop();
                };
                assert_eq!(&buf[..n], &msg[..]);
                assert_eq!(
                    b.send_wait(Some(Duration::from_secs(5))).unwrap().status,
                    Ok(n)
                );
            }
            // Sleeping: an empty ring until the time is up; a message
            // sent meanwhile wakes the borrower.
            let t0 = std::time::Instant::now();
            assert_eq!(unet_vi_direct_sleep(h, &mut w.d, 20_000), UNET_OK);
            assert!(t0.elapsed() >= Duration::from_millis(10), "slept");
            assert_eq!(w.d.rx_published, w.d.rx_pos);
            let waker = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                b.post_send(0, &[ViSeg::new(&rb, 0, 3)]).unwrap();
                (b, rb)
            });
            let t0 = std::time::Instant::now();
            while w.recv(&mut buf).is_none() {
                assert_eq!(unet_vi_direct_sleep(h, &mut w.d, 1_000_000), UNET_OK);
            }
            assert!(
                t0.elapsed() < Duration::from_millis(900),
                "woken by the message"
            );
            let (mut b, rb) = waker.join().unwrap();
            assert_eq!(
                b.send_wait(Some(Duration::from_secs(5))).unwrap().status,
                Ok(3)
            );
            let mut bad = UnetViDirect {
                rx_pos: w.d.rx_pos + 8,
                ..w.d
            };
            assert_eq!(unet_vi_direct_sleep(h, &mut bad, 0), UNET_EINVAL);
            assert_eq!(unet_vi_direct_return(h, &w.d), UNET_OK);
            assert_eq!(
                unet_vi_direct_return(h, &w.d),
                UNET_EINVAL,
                "not lent any more"
            );
            // The library goes on from the borrower's positions.
            let ra = sa.register_memory(4096).unwrap();
            ra.write(0, b"after");
            let seg = UnetViSeg {
                region: Box::into_raw(Box::new(UnetRegion(Some(ra)))),
                offset: 0,
                len: 5,
            };
            b.post_recv(7, &[ViSeg::new(&rb, 0, 4096)]).unwrap();
            assert_eq!(unet_vi_post_send(h, 1, &seg, 1), UNET_OK);
            assert_eq!(
                b.recv_wait(Some(Duration::from_secs(5))).unwrap().status,
                Ok(5)
            );
            assert_eq!(unet_vi_send_wait(h, 5_000_000, &mut c), UNET_OK);
            rb.write(0, b"reply!");
            b.post_send(8, &[ViSeg::new(&rb, 0, 6)]).unwrap();
            let seg2 = UnetViSeg { len: 4096, ..seg };
            assert_eq!(unet_vi_post_recv(h, 2, &seg2, 1), UNET_OK);
            assert_eq!(unet_vi_recv_wait(h, 5_000_000, &mut c), UNET_OK);
            assert_eq!((c.status, c.len), (0, 6));
            let mut st = std::mem::MaybeUninit::<UnetViStats>::uninit();
            assert_eq!(unet_vi_get_stats(h, st.as_mut_ptr()), UNET_OK);
            let st = st.assume_init();
            let n = i as u64 + 1;
            assert_eq!(
                (st.tx_msgs, st.rx_msgs),
                (n, n + 1),
                "the borrower's counted too"
            );
            unet_region_free(seg.region);
            unet_vi_free(h);
        }
    }

    #[test]
    fn lending_waits_for_an_idle_vi_and_refuses_what_cannot_be_lent() {
        let (_e, mut a, _b, sa, _sb) = pair(Reliability::ReliableDelivery);
        let ra = sa.register_memory(4096).unwrap();
        a.post_recv(1, &[ViSeg::new(&ra, 0, 4096)]).unwrap();
        let h = Box::into_raw(Box::new(UnetVi { vi: a, lent: false }));
        let mut d = std::mem::MaybeUninit::<UnetViDirect>::zeroed();
        // SAFETY: h is a live handle used by this thread only.
        unsafe {
            assert_eq!(
                unet_vi_direct_lend(h, d.as_mut_ptr()),
                UNET_EINUSE,
                "a receive is posted, and no room for its number"
            );
            // With room, the receive posted becomes the borrower's.
            let mut ids = [0u64; 4];
            (*d.as_mut_ptr()).recv_ids = ids.as_mut_ptr();
            (*d.as_mut_ptr()).recv_cap = 4;
            assert_eq!(unet_vi_direct_lend(h, d.as_mut_ptr()), UNET_OK);
            assert_eq!((*d.as_ptr()).nrecv, 1);
            assert_eq!(ids[0], 1);
            assert_eq!(unet_vi_direct_return(h, d.as_ptr()), UNET_OK);
            let mut c = UnetViCompletion::default();
            assert_eq!(
                unet_vi_recv_done(h, &mut c),
                0,
                "nothing posted in the library any more"
            );
            assert_eq!(unet_vi_direct_wake(h), UNET_EINVAL, "not lent");
            unet_vi_free(h);
        }
        let (_e2, a, _b2, _sa, _sb) = pair(Reliability::ReliableReception);
        let h = Box::into_raw(Box::new(UnetVi { vi: a, lent: false }));
        // SAFETY: as above.
        unsafe {
            assert_eq!(unet_vi_direct_lend(h, d.as_mut_ptr()), UNET_ENOTSUP);
            unet_vi_free(h);
        }
    }

    #[test]
    fn positions_handed_back_against_the_rules_break_the_vi() {
        let (_e, a, _b, _sa, _sb) = pair(Reliability::Unreliable);
        let h = Box::into_raw(Box::new(UnetVi { vi: a, lent: false }));
        let mut d = std::mem::MaybeUninit::<UnetViDirect>::zeroed();
        // SAFETY: h is a live handle used by this thread only.
        unsafe {
            assert_eq!(unet_vi_direct_lend(h, d.as_mut_ptr()), UNET_OK);
            let mut d = d.assume_init();
            d.tx_pos += 8; // not on a record boundary
            assert_eq!(unet_vi_direct_return(h, &d), UNET_OK);
            assert_eq!(unet_vi_state(h), UNET_VI_BROKEN);
            unet_vi_free(h);
        }
    }

    #[test]
    fn null_handles_are_einval() {
        // SAFETY: NULL handles and out-pointers are part of the contract.
        unsafe {
            let mut c = UnetViCompletion::default();
            assert_eq!(unet_vi_send_done(ptr::null_mut(), &mut c), UNET_EINVAL);
            assert_eq!(unet_vi_recv_wait(ptr::null_mut(), 0, &mut c), UNET_EINVAL);
            assert_eq!(unet_vi_state(ptr::null_mut()), UNET_EINVAL);
            assert_eq!(unet_vi_id(ptr::null()), UNET_EINVAL as i64);
            assert_eq!(unet_region_len(ptr::null()), 0);
            assert!(unet_region_ptr(ptr::null()).is_null());
            assert_eq!(unet_region_handle(ptr::null()), UNET_EINVAL as i64);
            assert_eq!(unet_region_deregister(ptr::null_mut()), UNET_EINVAL);
            assert_eq!(unet_vi_request_reject(ptr::null_mut()), UNET_EINVAL);
            assert_eq!(unet_vi_close(ptr::null_mut()), UNET_EINVAL);
            assert_eq!(
                unet_cq_done(ptr::null(), ptr::null_mut(), ptr::null_mut()),
                UNET_EINVAL
            );
            unet_region_free(ptr::null_mut());
            unet_cq_free(ptr::null_mut());
            unet_vi_server_free(ptr::null_mut());
            unet_vi_free(ptr::null_mut());
        }
    }

    #[test]
    fn attributes_are_checked() {
        let mut a = default_attrs();
        // SAFETY: a readable struct with NULL queue handles.
        let r = unsafe { attributes(&a) }.unwrap();
        assert_eq!(r.reliability, Reliability::ReliableDelivery);
        assert_eq!(r.spin, ViAttributes::default().spin);
        a.reliability = 3;
        // SAFETY: as above.
        assert_eq!(unsafe { attributes(&a) }.err(), Some(UNET_EINVAL));
        a.reliability = UNET_VI_UNRELIABLE;
        a.break_timeout_ms = 1500;
        // SAFETY: as above.
        let r = unsafe { attributes(&a) }.unwrap();
        assert_eq!(r.break_timeout, Duration::from_millis(1500));
        assert_eq!(r.params().break_timeout_ms, 1500);
    }

    #[test]
    fn every_vi_error_has_its_name() {
        // SAFETY: the names are static NUL-terminated strings.
        let name = |e: c_int| unsafe { std::ffi::CStr::from_ptr(unet_vi_error_name(e)) };
        for e in ViError::ALL {
            let want = format!("UNET_VI_{}", e.name().replace('-', "_").to_uppercase());
            assert_eq!(name(e as c_int).to_str().unwrap(), want);
            assert_eq!(name(-(e as c_int)).to_str().unwrap(), want);
        }
        assert_eq!(name(0).to_str().unwrap(), "UNET_VI_OK");
        assert_eq!(name(99).to_str().unwrap(), "unknown VI error");
        assert_eq!(name(c_int::MIN).to_str().unwrap(), "unknown VI error");
    }

    #[test]
    fn completions_carry_minus_the_error() {
        let c = completion(ViCompletion {
            id: 9,
            status: Err(ViError::PeerGone),
        });
        assert_eq!((c.id, c.status, c.len), (9, -UNET_VI_PEER_GONE, 0));
        let c = completion(ViCompletion {
            id: 3,
            status: Ok(1000),
        });
        assert_eq!((c.id, c.status, c.len), (3, 0, 1000));
    }
}
