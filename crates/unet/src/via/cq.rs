//! Completion queues: several VIs' queues reporting to one
//! ([`CompletionQueue`], VIA's `VipCreateCQ`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use unet_sys as sys;

use super::desc::ViQueue;
use super::lock;
use super::vi_core::Core;

pub(super) struct CqInner {
    entries: Mutex<VecDeque<(u32, ViQueue)>>,
    /// The cores of the VIs reporting here (to make progress on them
    /// while waiting).
    cores: Mutex<Vec<Weak<Mutex<Core>>>>,
    /// Bumped and woken when an entry is added by another thread.
    futex: AtomicU32,
}

/// A completion queue: several VIs' send or receive queues report here,
/// in the order their descriptors completed (VIA's `VipCQDone` and
/// `VipCQWait`). An entry says which VI and which of its queues has a
/// completion; take the completion itself from the VI
/// ([`Vi::send_done`], [`Vi::recv_done`]). Cheap to clone.
///
/// [`Vi::send_done`]: super::Vi::send_done
/// [`Vi::recv_done`]: super::Vi::recv_done
#[derive(Clone)]
pub struct CompletionQueue {
    inner: Arc<CqInner>,
}

impl std::fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionQueue")
            .field("waiting", &lock(&self.inner.entries).len())
            .finish()
    }
}

impl Default for CompletionQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl CompletionQueue {
    /// An empty completion queue.
    pub fn new() -> CompletionQueue {
        CompletionQueue {
            inner: Arc::new(CqInner {
                entries: Mutex::new(VecDeque::new()),
                cores: Mutex::new(Vec::new()),
                futex: AtomicU32::new(0),
            }),
        }
    }

    pub(super) fn push(&self, vi: u32, q: ViQueue) {
        lock(&self.inner.entries).push_back((vi, q));
        self.inner.futex.fetch_add(1, Ordering::Release);
        sys::futex_wake(&self.inner.futex, i32::MAX);
    }

    pub(super) fn attach(&self, core: &Arc<Mutex<Core>>) {
        let mut cores = lock(&self.inner.cores);
        cores.retain(|w| w.strong_count() > 0);
        cores.push(Arc::downgrade(core));
    }

    /// The next entry, if one is waiting: which VI (its [`Vi::id`](super::Vi::id)) and
    /// which queue. Moves the attached VIs on first.
    pub fn done(&self) -> Option<(u32, ViQueue)> {
        if let Some(e) = lock(&self.inner.entries).pop_front() {
            return Some(e);
        }
        self.progress();
        lock(&self.inner.entries).pop_front()
    }

    /// Make progress on every attached VI no other thread is busy with.
    fn progress(&self) {
        let cores: Vec<Arc<Mutex<Core>>> = lock(&self.inner.cores)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for c in cores {
            if let Ok(mut core) = c.try_lock() {
                core.progress();
            }
        }
    }

    /// Wait at most `timeout` (None: forever) for the next entry.
    pub fn wait(&self, timeout: Option<Duration>) -> Option<(u32, ViQueue)> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if let Some(e) = self.done() {
                return Some(e);
            }
            let elapsed = start.elapsed();
            if timeout.is_some_and(|t| elapsed >= t) {
                return None;
            }
            spins += 1;
            if elapsed < Duration::from_micros(50) {
                std::hint::spin_loop();
                continue;
            }
            if spins.is_multiple_of(64) {
                std::thread::yield_now();
            }
            // Then short sleeps: a VI's arrival wakes no CQ (the ring's
            // futex is its own), another thread's completion does.
            let seen = self.inner.futex.load(Ordering::Acquire);
            let left = timeout.map(|t| t.saturating_sub(start.elapsed()));
            let nap = Duration::from_micros(200);
            sys::futex_wait(
                &self.inner.futex,
                seen,
                Some(left.map_or(nap, |l| l.min(nap))),
            );
        }
    }
}
