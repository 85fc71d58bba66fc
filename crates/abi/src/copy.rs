//! Copying message bytes.
//!
//! Messages are mostly small, and every party copies them: into and out of
//! rings, buffer areas and applets' arrays. [`copy_bytes`] copies them
//! inline; the library's `memcpy` takes over above 128 bytes.

/// Copy `n` bytes from `src` to `dst` (non-overlapping). Small messages
/// are the direct path's common case: they are copied with a few unaligned
/// 8- or 16-byte moves inline instead of a call to the library's memcpy,
/// whose call and dispatch cost as much as the copy.
///
/// # Safety
/// As `ptr::copy_nonoverlapping`: `src` readable and `dst` writable for
/// `n` bytes, the two ranges disjoint.
#[inline(always)]
pub unsafe fn copy_bytes(src: *const u8, dst: *mut u8, n: usize) {
    #[inline(always)]
    unsafe fn mv16(src: *const u8, dst: *mut u8, at: usize) {
        // SAFETY: the caller keeps [at, at + 16) inside both ranges.
        unsafe {
            let v = (src.add(at) as *const u128).read_unaligned();
            (dst.add(at) as *mut u128).write_unaligned(v);
        }
    }
    // SAFETY: (all branches) every access lies within [0, n) of its range,
    // which the caller keeps readable at `src` and writable at `dst`;
    // overlapping head and tail moves rewrite bytes of the same message.
    unsafe {
        if n > 128 {
            core::ptr::copy_nonoverlapping(src, dst, n);
        } else if n > 64 {
            // The first 64 bytes and the last 64 (they overlap).
            for k in 0..4 {
                mv16(src, dst, 16 * k);
                mv16(src, dst, n - 64 + 16 * k);
            }
        } else if n > 32 {
            mv16(src, dst, 0);
            mv16(src, dst, 16);
            mv16(src, dst, n - 32);
            mv16(src, dst, n - 16);
        } else if n >= 16 {
            mv16(src, dst, 0);
            mv16(src, dst, n - 16);
        } else if n >= 8 {
            let a = (src as *const u64).read_unaligned();
            let b = (src.add(n - 8) as *const u64).read_unaligned();
            (dst as *mut u64).write_unaligned(a);
            (dst.add(n - 8) as *mut u64).write_unaligned(b);
        } else if n >= 4 {
            let a = (src as *const u32).read_unaligned();
            let b = (src.add(n - 4) as *const u32).read_unaligned();
            (dst as *mut u32).write_unaligned(a);
            (dst.add(n - 4) as *mut u32).write_unaligned(b);
        } else {
            for i in 0..n {
                *dst.add(i) = *src.add(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::copy_bytes;
    use std::{vec, vec::Vec};

    #[test]
    fn copy_bytes_copies_every_length_exactly() {
        let src: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for n in 0..=260 {
            let mut dst = vec![0xAAu8; 300];
            // SAFETY: both buffers hold at least n bytes and are distinct.
            unsafe { copy_bytes(src.as_ptr(), dst.as_mut_ptr(), n) };
            assert_eq!(&dst[..n], &src[..n], "length {n}");
            assert!(
                dst[n..].iter().all(|&b| b == 0xAA),
                "length {n} wrote past the end"
            );
        }
    }
}
