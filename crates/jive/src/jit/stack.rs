//! The machine-stack budget of compiled frames (see the module
//! documentation of `jit`: the limit every compiled method checks).

// -------------------------------------------------------------------------
// The machine-stack budget
// -------------------------------------------------------------------------

/// Marks `Ctx::overflow` as set (a site may be 0).
pub(super) const OVERFLOW_FLAG: i64 = 1 << 62;

/// Stack kept free below the lowest compiled frame, for the helpers and
/// natives compiled code calls, a signal frame, and the part of a frame
/// (at most [`MAX_FRAME_BYTES`](super::policy::MAX_FRAME_BYTES)) a prologue allocates before the method's
/// check runs.
pub(crate) const STACK_RESERVE: usize = 64 * 1024;

/// The lowest address compiled frames of an invocation entered here may
/// reach: `budget` bytes below the current stack pointer, and never less
/// than [`STACK_RESERVE`] above the lowest address of this thread's stack
/// (where the system tells it; Linux). A thread already too deep gets a
/// limit above its stack pointer: the first compiled method faults.
#[inline]
pub(super) fn stack_limit(budget: usize) -> u64 {
    stack_pointer().saturating_sub(budget).max(thread_floor()) as u64
}

/// The stack pointer (about: the address of a local elsewhere).
#[inline(always)]
fn stack_pointer() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        let sp: usize;
        // SAFETY: reads the stack pointer into a register; touches no
        // memory, the stack or the flags.
        #[allow(unsafe_code)]
        unsafe {
            std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags))
        };
        sp
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let marker = 0u8;
        std::hint::black_box(&marker) as *const u8 as usize
    }
}

/// The lowest address compiled frames may reach on the calling thread:
/// [`STACK_RESERVE`] above the lowest address of its stack, or 0 where
/// the system does not tell it (looked up once per thread, so that an
/// invocation reads one thread-local word).
#[inline]
fn thread_floor() -> usize {
    thread_local! {
        // usize::MAX: not looked up yet.
        static FLOOR: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
    }
    FLOOR.with(|c| {
        let v = c.get();
        if v != usize::MAX {
            return v;
        }
        let v = query_floor();
        c.set(v);
        v
    })
}

/// [`thread_floor`], looked up.
#[cold]
fn query_floor() -> usize {
    query_stack_low().map_or(0, |lo| lo.saturating_add(STACK_RESERVE).min(usize::MAX - 1))
}

#[cfg(target_os = "linux")]
#[cold]
fn query_stack_low() -> Option<usize> {
    // SAFETY: `pthread_getattr_np` fills the attribute object it is given
    // for the calling thread (initialised by it, destroyed here after
    // use); `pthread_attr_getstack` reads it into the two locals.
    #[allow(unsafe_code)]
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        (ok && !addr.is_null()).then_some(addr as usize)
    }
}

#[cfg(not(target_os = "linux"))]
fn query_stack_low() -> Option<usize> {
    None
}
