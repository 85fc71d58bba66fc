//! The C ABI of a UDM handler's upcall (`unet_udm_upcall`): what a C
//! handler registered with [`unet_udm_set_handler`](super::unet_udm_set_handler)
//! calls, on the node's handler thread, to take the message that raised
//! it and to send.

use std::ffi::c_int;

use super::status::{guard, null, UNET_OK};
use super::udm_node::{
    dispose_status, extract_with, inject_result, inject_status, peek_with, put_header, words_in,
    UnetUdmHeader, UnetUdmUpcall,
};
use crate::udm::Upcall;

/// The upcall behind a handle.
///
/// # Safety
/// `u` is NULL or the handle passed to the running handler.
unsafe fn upcall<'a, 'b>(u: *mut UnetUdmUpcall) -> Result<&'a mut Upcall<'b>, c_int> {
    // SAFETY: the handle is an `&mut Upcall` made by the handler closure
    // of unet_udm_set_handler for the duration of the C handler's call,
    // which this call is part of.
    unsafe { u.cast::<Upcall<'b>>().as_mut() }.ok_or_else(|| null("upcall"))
}

/// The message that raised the upcall into `*out`.
///
/// # Safety
/// `up` NULL or the running handler's handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_upcall_header(
    up: *mut UnetUdmUpcall,
    out: *mut UnetUdmHeader,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let u = unsafe { upcall(up) }?;
        if out.is_null() {
            return Err(null("out"));
        }
        let h = u.header();
        // SAFETY: non-NULL and writable per the contract.
        unsafe { put_header(out, h.src, h.handler, h.len) };
        Ok(UNET_OK)
    })
}

/// [`unet_udm_extract`](super::unet_udm_extract) from a handler.
///
/// # Safety
/// `up` NULL or the running handler's handle; the rest as for
/// [`unet_udm_extract`](super::unet_udm_extract).
#[no_mangle]
pub unsafe extern "C" fn unet_udm_upcall_extract(
    up: *mut UnetUdmUpcall,
    words: *mut u64,
    cap: usize,
    out: *mut UnetUdmHeader,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let u = unsafe { upcall(up) }?;
        // SAFETY: per this function's contract.
        unsafe { extract_with(|w| u.extract(w), words, cap, out) }
    })
}

/// [`unet_udm_peek`](super::unet_udm_peek) from a handler.
///
/// # Safety
/// As for [`unet_udm_upcall_extract`].
#[no_mangle]
pub unsafe extern "C" fn unet_udm_upcall_peek(
    up: *mut UnetUdmUpcall,
    words: *mut u64,
    cap: usize,
    out: *mut UnetUdmHeader,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let u = unsafe { upcall(up) }?;
        // SAFETY: per this function's contract.
        unsafe { peek_with(|| u.peek(), words, cap, out) }
    })
}

/// [`unet_udm_dispose`](super::unet_udm_dispose) from a handler.
///
/// # Safety
/// `up` NULL or the running handler's handle.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_upcall_dispose(up: *mut UnetUdmUpcall) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        dispose_status(unsafe { upcall(up) }?.dispose())
    })
}

/// The message-available flag from a handler: 1 or 0.
///
/// # Safety
/// `up` NULL or the running handler's handle.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_upcall_message_available(up: *mut UnetUdmUpcall) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        Ok(unsafe { upcall(up) }?.message_available() as c_int)
    })
}

/// [`unet_udm_inject`](super::unet_udm_inject) from a handler (it may wait, holding the node's
/// atomic section: prefer [`unet_udm_upcall_injectc`]).
///
/// # Safety
/// `up` NULL or the running handler's handle; `words` NULL or `nwords`
/// readable words.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_upcall_inject(
    up: *mut UnetUdmUpcall,
    dest: u32,
    handler: u16,
    words: *const u64,
    nwords: usize,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (u, w) = unsafe { (upcall(up)?, words_in(words, nwords)?) };
        inject_status(u.inject(dest, handler, w))
    })
}

/// [`unet_udm_injectc`](super::unet_udm_injectc) from a handler.
///
/// # Safety
/// As for [`unet_udm_upcall_inject`].
#[no_mangle]
pub unsafe extern "C" fn unet_udm_upcall_injectc(
    up: *mut UnetUdmUpcall,
    dest: u32,
    handler: u16,
    words: *const u64,
    nwords: usize,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (u, w) = unsafe { (upcall(up)?, words_in(words, nwords)?) };
        inject_result(u.injectc(dest, handler, w))
    })
}

/// `atomicity-extend`: the handler's atomic section goes on after it
/// returns, until the main code's `unet_udm_endatom(node,
/// UNET_UDM_ATOM_DISABLE)`, which runs the handlers of the messages that
/// waited.
///
/// # Safety
/// `up` NULL or the running handler's handle.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_upcall_extend_atomicity(up: *mut UnetUdmUpcall) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe { upcall(up) }?.extend_atomicity();
        Ok(UNET_OK)
    })
}
