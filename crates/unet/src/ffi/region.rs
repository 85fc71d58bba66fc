//! The C ABI of VIA's memory regions (`unet_region`).

use std::ffi::{c_int, c_void};
use std::ptr;

use super::session::{session_of, UnetSession};
use super::status::{
    fail, fail_error, guard, guard_value, handle_mut, handle_ref, new_handle, out_ptr, release,
    take, UNET_EINUSE, UNET_EINVAL, UNET_EIO, UNET_OK,
};
use crate::via::MemRegion;

/// Opaque memory region handle (`unet_region` in C). `None` only if a
/// deregistration panicked half-way (then every call on it fails).
pub struct UnetRegion(pub(super) Option<MemRegion>);

/// The region behind a handle.
///
/// # Safety
/// `r` is NULL or a live handle from [`unet_register_memory`], not
/// released for the duration of the call.
pub(super) unsafe fn region<'a>(r: *const UnetRegion) -> Result<&'a MemRegion, c_int> {
    // SAFETY: per this function's contract; only read.
    match unsafe { handle_ref(r, "region") }? {
        UnetRegion(Some(m)) => Ok(m),
        UnetRegion(None) => Err(gone()),
    }
}

fn gone() -> c_int {
    fail(UNET_EINVAL, "the region handle is no longer valid")
}

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
        // SAFETY: per this function's contract (the session only read).
        let (out, s) = unsafe { (out_ptr(out, "out")?, session_of(session)?) };
        let r = s.register_memory(len).map_err(fail_error)?;
        out.write(new_handle(UnetRegion(Some(r))));
        Ok(UNET_OK)
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
        // SAFETY: per this function's contract.
        let h = unsafe { handle_mut(region, "region") }?;
        let r = h.0.take().ok_or_else(gone)?;
        match r.deregister() {
            Ok(()) => {
                // SAFETY: a handle from unet_register_memory, released only
                // here or in unet_region_free.
                drop(unsafe { take(region, "region") }?);
                Ok(UNET_OK)
            }
            Err((r, e)) => {
                h.0 = Some(r);
                Err(fail(UNET_EINUSE, e.to_string()))
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
