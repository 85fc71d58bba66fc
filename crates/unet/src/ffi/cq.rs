//! The C ABI of VIA's completion queues (`unet_cq`).

use std::ffi::c_int;

use super::status::{
    fail, guard, handle_ref, new_handle, opt_out, out_ptr, parse_timeout, release, UNET_ETIMEDOUT,
    UNET_OK,
};
use crate::via::{CompletionQueue, ViQueue};

/// [`unet_cq_done`]'s queue: the send queue of the VI.
pub const UNET_VI_QUEUE_SEND: c_int = 0;
/// [`unet_cq_done`]'s queue: the receive queue of the VI.
pub const UNET_VI_QUEUE_RECV: c_int = 1;

/// Opaque completion queue handle (`unet_cq` in C).
pub struct UnetCq(pub(super) CompletionQueue);

/// A new, empty completion queue.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_cq_create(out: *mut *mut UnetCq) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe { out_ptr(out, "out") }?.write(new_handle(UnetCq(CompletionQueue::new())));
        Ok(UNET_OK)
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

/// Store the entry `e` where asked.
///
/// # Safety
/// `out_vi` and `out_queue` are NULL or writable.
unsafe fn store_entry(e: (u32, ViQueue), out_vi: *mut u32, out_queue: *mut c_int) {
    // SAFETY: per this function's contract.
    let (v, q) = unsafe { (opt_out(out_vi), opt_out(out_queue)) };
    if let Some(v) = v {
        v.write(e.0);
    }
    if let Some(q) = q {
        q.write(match e.1 {
            ViQueue::Send => UNET_VI_QUEUE_SEND,
            ViQueue::Recv => UNET_VI_QUEUE_RECV,
        });
    }
}

/// The next entry of the completion queue (VIA's `VipCQDone`): returns 1
/// with the VI's id ([`unet_vi_id`](super::unet_vi_id)) in `*out_vi` and
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
        // SAFETY: NULL or a live handle, only read (this function's
        // contract).
        let cq = unsafe { handle_ref(cq, "cq") }?;
        match cq.0.done() {
            Some(e) => {
                // SAFETY: per this function's contract.
                unsafe { store_entry(e, out_vi, out_queue) };
                Ok(1)
            }
            None => Ok(0),
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
        // SAFETY: NULL or a live handle, only read (this function's
        // contract).
        let cq = unsafe { handle_ref(cq, "cq") }?;
        let e =
            cq.0.wait(parse_timeout(timeout_us)?)
                .ok_or_else(|| fail(UNET_ETIMEDOUT, "no completion in time"))?;
        // SAFETY: per this function's contract.
        unsafe { store_entry(e, out_vi, out_queue) };
        Ok(UNET_OK)
    })
}
