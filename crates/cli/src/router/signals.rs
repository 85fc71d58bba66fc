//! The host application's signals: SIGHUP (read the table again) and,
//! with several adapters, SIGINT and SIGTERM (stop cleanly, leaving the
//! peer queues; with one adapter they end the process as usual).
//!
//! They are blocked while the sessions start their threads (which inherit
//! the mask), then caught on the main thread alone ([`Signals::catch`]): a
//! handler records each in [`PENDING`], and since it is installed without
//! `SA_RESTART` it also cuts the main thread's sleep short
//! (`Endpoint::wait_any` returns on the interrupted `futex_waitv`). So the
//! application sleeps a second at a time and still answers a signal at
//! once. One that comes between the look at [`PENDING`] and the sleep
//! waits for the sleep's end, at most that second.
//!
//! `unsafe` here is the C library's signal calls, each with its reason.

use std::sync::atomic::{AtomicU64, Ordering};

/// The signals that came and were not yet taken, a bit each.
static PENDING: AtomicU64 = AtomicU64::new(0);

/// The handler: records the signal. A lock-free atomic is all it touches
/// (async-signal-safe).
extern "C" fn record(sig: libc::c_int) {
    if (0..64).contains(&sig) {
        PENDING.fetch_or(1 << sig, Ordering::SeqCst);
    }
}

/// The signals the host application answers.
pub struct Signals {
    set: libc::sigset_t,
    list: Vec<libc::c_int>,
}

impl Signals {
    /// Block SIGHUP (and with `several` SIGINT and SIGTERM) on this
    /// thread, and so on the threads it starts from now: they stay
    /// pending until [`Signals::catch`].
    pub fn block(several: bool) -> Signals {
        let mut list = vec![libc::SIGHUP];
        if several {
            list.extend([libc::SIGINT, libc::SIGTERM]);
        }
        // SAFETY: sigemptyset/sigaddset initialise the local set;
        // pthread_sigmask changes this thread's mask only (called before
        // the sessions start any thread, which inherit it).
        let set = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &s in &list {
                libc::sigaddset(&mut set, s);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            set
        };
        Signals { set, list }
    }

    /// Catch them on this thread from now (those that came while they
    /// were blocked are recorded at once).
    pub fn catch(&self) -> Result<(), String> {
        for &s in &self.list {
            // SAFETY: a zeroed sigaction is valid (no flags: no
            // SA_RESTART, so the handler interrupts a sleeping system
            // call; an empty mask); the handler is an `extern "C"` fn of
            // one int that only touches an atomic.
            let r = unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = record as extern "C" fn(libc::c_int) as usize;
                libc::sigemptyset(&mut act.sa_mask);
                libc::sigaction(s, &act, std::ptr::null_mut())
            };
            if r != 0 {
                return Err(format!(
                    "catching signal {s}: {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
        // SAFETY: `set` was initialised by `block`; this thread's mask only.
        unsafe {
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &self.set, std::ptr::null_mut());
        }
        Ok(())
    }

    /// A signal that came, if any (taken; the lowest first).
    pub fn take(&self) -> Option<i32> {
        let p = PENDING.load(Ordering::SeqCst);
        if p == 0 {
            return None;
        }
        let s = p.trailing_zeros();
        PENDING.fetch_and(!(1 << s), Ordering::SeqCst);
        Some(s as i32)
    }
}
