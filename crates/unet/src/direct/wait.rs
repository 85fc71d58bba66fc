//! The direct path's wait and wake policy: a consumer's sleeping flag and
//! futex word, a producer waking a sleeping peer once per sleep, and the
//! placed counts of VIs of reliable reception.

use std::sync::atomic::{AtomicU32, Ordering};

use unet_sys as sys;

use super::DirectConn;

impl DirectConn {
    /// Wake the peer sleeping on the direction we send on (a borrower saw
    /// its sleeping flag after publishing).
    pub fn wake_peer(&self) {
        let c = self.tx_consumer();
        c.futex.fetch_add(1, Ordering::Release);
        sys::futex_wake(&c.futex, 1);
    }

    /// Messages the peer has placed into its posted buffers (VIs of
    /// reliable reception).
    #[inline]
    pub fn peer_placed(&self) -> u64 {
        // Acquire: pairs with the peer's Release after its placement.
        self.map.tx_placed().load(Ordering::Acquire)
    }

    /// Publish the count of messages we have placed, and wake the peer if
    /// it sleeps waiting for it.
    #[inline]
    pub fn set_placed(&self, n: u64) {
        self.map.rx_placed().store(n, Ordering::Release);
        // Pairs with the heavy fence in the peer's wait (as in published):
        // either it sees the count when it re-checks, or we see its flag.
        sys::light_fence(self.asym);
        self.wake_if_sleeping();
    }

    /// After a publish and its fence: wake the peer if its sleeping flag
    /// is set, taking the flag down as we do. One wake per sleep: a
    /// peer that is slow to come back (a sleeper takes microseconds to
    /// run again, longer on a busy machine) does not cost a `futex_wake`
    /// system call for every message sent meanwhile, as it did when the
    /// flag stayed up until the peer cleared it (a 64-byte stream on a
    /// busy host counted tens of thousands of wake calls per run, about
    /// a fifth of the sender's time). The peer sets the flag again each
    /// time it is about to sleep, and checks its ring after setting it
    /// (the fence pairing of `sleep_lent` and the endpoint's wait), so a
    /// message published after the flag came down is still seen.
    #[inline(always)]
    pub(super) fn wake_if_sleeping(&self) -> bool {
        let c = self.tx_consumer();
        // The load first: the common case (awake) writes nothing to the
        // peer's line.
        if c.sleeping.load(Ordering::Relaxed) == 0 || c.sleeping.swap(0, Ordering::AcqRel) == 0 {
            return false;
        }
        c.futex.fetch_add(1, Ordering::Release);
        sys::futex_wake(&c.futex, 1);
        true
    }

    /// The futex word and its current value, for a blocking wait.
    pub fn wait_word(&self) -> (&AtomicU32, u32) {
        let c = self.rx_consumer();
        (&c.futex, c.futex.load(Ordering::Acquire))
    }

    /// Publish our position and set or clear our sleeping flag.
    pub fn set_sleeping(&mut self, on: bool) {
        if on && self.rx_pos != self.rx_published {
            self.publish();
        }
        self.rx_consumer()
            .sleeping
            .store(on as u32, Ordering::Relaxed);
    }
}
