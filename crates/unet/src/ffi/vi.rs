//! The C ABI of VIA's VIs (`unet_vi`): their attributes, the descriptor
//! calls and their completions, and their state. Same conventions as
//! the rest of [`crate::ffi`]; the declarations are in the VIA part of
//! `include/unet.h`.
//!
//! VIA's objects: `unet_region` ([`UnetRegion`](super::UnetRegion)),
//! `unet_cq` ([`UnetCq`]), `unet_vi_server`
//! ([`UnetViServer`](super::UnetViServer)), `unet_vi_request`
//! ([`UnetViRequest`](super::UnetViRequest)) and `unet_vi` ([`UnetVi`]).
//! Each is released by a `*_free` function that accepts NULL and cannot
//! fail; a region and a VI also have a checked release that reports
//! ([`unet_region_deregister`](super::unet_region_deregister),
//! [`unet_vi_close`]), and a request is released by being answered
//! ([`unet_vi_request_accept`](super::unet_vi_request_accept),
//! [`unet_vi_request_reject`](super::unet_vi_request_reject)). A VI's
//! data path lent to a binding is in `vi_direct`.

use std::ffi::{c_char, c_int, c_void};
use std::mem::MaybeUninit;
use std::ptr;
use std::time::Duration;

use super::cq::UnetCq;
use super::region::{region, UnetRegion};
use super::status::{
    bytes_in, fail, fail_error, guard, guard_value, handle_mut, handle_ref, new_handle, null,
    out_ptr, parse_timeout, release, status, take, Answer, UNET_EFULL, UNET_EINUSE, UNET_EINVAL,
    UNET_EIO, UNET_ENOTPOSTED, UNET_ETIMEDOUT, UNET_OK,
};
use crate::via::{
    CompletionQueue, ConnRequest, MemRegion, PostError, Reliability, Vi, ViAttributes,
    ViCompletion, ViError, ViQueue, ViSeg, ViServer, ViState, WaitError, VI_MAX_SEGMENTS,
    VI_MAX_TRANSFER,
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

/// Most segments one descriptor may gather or scatter.
pub const UNET_VI_MAX_SEGMENTS: usize = VI_MAX_SEGMENTS;
/// Largest message a VI carries.
pub const UNET_VI_MAX_TRANSFER: usize = VI_MAX_TRANSFER;

// -------------------------------------------------------------------------
// Types shared with C
// -------------------------------------------------------------------------

/// Opaque VI handle (`unet_vi` in C).
pub struct UnetVi {
    pub(super) vi: Vi,
    /// Its data path is lent out ([`unet_vi_direct_lend`](super::unet_vi_direct_lend)):
    /// every call but a few refuses until it is handed back.
    pub(super) lent: bool,
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

/// The VI behind a handle, refused while its data path is lent.
///
/// # Safety
/// `vi` is NULL or a live handle, used by this thread only for the
/// duration of the call.
pub(super) unsafe fn vi<'a>(vi: *mut UnetVi) -> Result<&'a mut Vi, c_int> {
    // SAFETY: per this function's contract.
    match unsafe { handle_mut(vi, "vi") }? {
        UnetVi { vi, lent: false } => Ok(vi),
        _ => Err(fail(
            UNET_EINUSE,
            "the VI's data path is lent (unet_vi_direct_lend): hand it back first",
        )),
    }
}

/// The attributes `a` describes (NULL: the defaults).
///
/// # Safety
/// `a` is NULL or readable; its queue pointers NULL or live handles.
pub(super) unsafe fn attributes(a: *const UnetViAttrs) -> Result<ViAttributes, c_int> {
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

fn fail_wait(e: WaitError) -> c_int {
    match e {
        WaitError::Timeout => fail(UNET_ETIMEDOUT, "no descriptor completed in time"),
        WaitError::Empty(_) => fail(UNET_ENOTPOSTED, e.to_string()),
    }
}

/// Store the new VI of `r` in `out`.
pub(super) fn store_vi(r: Result<Vi, Error>, out: &mut MaybeUninit<*mut UnetVi>) -> Answer {
    let vi = r.map_err(fail_error)?;
    out.write(new_handle(UnetVi { vi, lent: false }));
    Ok(UNET_OK)
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

/// Fill `attrs` with the defaults: reliable delivery, not strict, 1024
/// descriptors each way, 50 µs of spinning, no completion queues.
///
/// # Safety
/// `attrs` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_attrs_init(attrs: *mut UnetViAttrs) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe { out_ptr(attrs, "attrs") }?.write(default_attrs());
        Ok(UNET_OK)
    })
}

// -------------------------------------------------------------------------
// Descriptors
// -------------------------------------------------------------------------

/// Post a descriptor of `n` segments on `q`.
///
/// # Safety
/// As for [`unet_vi_post_send`].
unsafe fn post(vi: *mut UnetVi, q: ViQueue, id: u64, segs: *const UnetViSeg, n: usize) -> Answer {
    // SAFETY: per the caller's contract.
    let vi = unsafe { self::vi(vi) }?;
    let segs: &[UnetViSeg] = if n == 0 {
        &[]
    } else if segs.is_null() {
        return Err(null("segs"));
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
        let region = unsafe { seg_region(0, s) }?;
        return finish_post(vi, q, id, &[seg(region, s)]);
    }
    // SAFETY: a live handle or NULL per the contract.
    let filler = ViSeg::new(unsafe { seg_region(0, first) }?, 0, 0);
    let mut list = [filler; VI_MAX_SEGMENTS + 1];
    for (i, s) in segs.iter().enumerate() {
        // SAFETY: as above.
        list[i] = seg(unsafe { seg_region(i, s) }?, s);
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

fn finish_post(vi: &mut Vi, q: ViQueue, id: u64, segs: &[ViSeg<'_>]) -> Answer {
    let r = match q {
        ViQueue::Send => vi.post_send(id, segs),
        ViQueue::Recv => vi.post_recv(id, segs),
    };
    match r {
        Ok(()) => Ok(UNET_OK),
        Err(e @ PostError::QueueFull) => Err(fail(UNET_EFULL, e.to_string())),
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
        // SAFETY: per this function's contract (the bytes borrowed for
        // this call only).
        let (vi, data) = unsafe { (self::vi(vi)?, bytes_in(data, len, "data")?) };
        Ok(if vi.send_copied(id, data) {
            UNET_OK
        } else {
            UNET_EFULL
        })
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
unsafe fn done(vi: *mut UnetVi, q: ViQueue, out: *mut UnetViCompletion) -> Answer {
    // SAFETY: per the caller's contract.
    let (vi, out) = unsafe { (self::vi(vi)?, out_ptr(out, "out")?) };
    let c = match q {
        ViQueue::Send => vi.send_done(),
        ViQueue::Recv => vi.recv_done(),
    };
    match c {
        Some(c) => {
            out.write(completion(c));
            Ok(1)
        }
        None => Ok(0),
    }
}

/// Wait for the next completed descriptor of queue `q`.
///
/// # Safety
/// As for [`unet_vi_send_wait`].
unsafe fn wait(vi: *mut UnetVi, q: ViQueue, timeout_us: i64, out: *mut UnetViCompletion) -> Answer {
    // SAFETY: per the caller's contract.
    let (vi, out) = unsafe { (self::vi(vi)?, out_ptr(out, "out")?) };
    let timeout = parse_timeout(timeout_us)?;
    let r = match q {
        ViQueue::Send => vi.send_wait(timeout),
        ViQueue::Recv => vi.recv_wait(timeout),
    };
    out.write(completion(r.map_err(fail_wait)?));
    Ok(UNET_OK)
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

// -------------------------------------------------------------------------
// State
// -------------------------------------------------------------------------

/// The VI's state: [`UNET_VI_OK`] (0) while connected, else the positive
/// `UNET_VI_*` error it broke with; [`UNET_EINVAL`] for NULL.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_state(vi: *mut UnetVi) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        Ok(match unsafe { self::vi(vi) }?.state() {
            ViState::Connected => UNET_VI_OK,
            ViState::Error(e) => e as c_int,
        })
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
        // SAFETY: NULL or a live handle, only read (this function's
        // contract).
        match unsafe { handle_ref(vi, "vi") } {
            Ok(v) => v.vi.id() as i64,
            Err(c) => c as i64,
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
        // SAFETY: per this function's contract.
        match unsafe { handle_mut(vi, "vi") } {
            Ok(v) => c_int::from(v.vi.is_direct()),
            Err(c) => c,
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
        let (vi, out) = unsafe { (self::vi(vi)?, out_ptr(out, "out")?) };
        let s = vi.stats();
        out.write(UnetViStats {
            tx_msgs: s.tx_msgs,
            tx_bytes: s.tx_bytes,
            rx_msgs: s.rx_msgs,
            rx_bytes: s.rx_bytes,
            rx_not_posted: s.rx_not_posted,
            tx_full: s.tx_full,
            errors: s.errors,
            rx_dropped: s.rx_dropped,
        });
        Ok(UNET_OK)
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
        // SAFETY: a handle from unet_vi_connect or an accept, released
        // only here or in unet_vi_free (this function's contract).
        let v = unsafe { take(vi, "vi") }?;
        Ok(status(v.vi.close()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::*;
    use std::ptr;

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
