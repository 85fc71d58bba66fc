//! A direct connection lent out to a borrower (a VI's data path): where
//! the rings and lines are, the positions taken back and checked, and a
//! borrower's sleep.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use unet_abi::*;
use unet_sys as sys;

use super::DirectConn;

/// A connection's rings and positions as lent out ([`DirectConn::loan`]).
/// The pointers stay valid for as long as the connection.
pub(crate) struct ConnLoan {
    pub tx: *mut u8,
    pub rx: *const u8,
    pub size: u64,
    pub max_len: u64,
    pub tx_pos: u64,
    pub rx_pos: u64,
    pub rx_published: u64,
    /// The peer's consumer position of the direction we send on.
    pub tx_consumed: *const AtomicU64,
    /// Its sleeping flag.
    pub tx_sleeping: *const AtomicU32,
    /// Our consumer position (of the direction we receive on).
    pub rx_consumed: *const AtomicU64,
    pub peer_closed: *const AtomicU32,
    /// The message and byte counters of sending (two words).
    pub tx_counters: *const AtomicU64,
    /// Those of receiving.
    pub rx_counters: *const AtomicU64,
    /// What the peer has placed of what we sent.
    pub tx_placed: *const AtomicU64,
    /// What we have placed of what we received.
    pub rx_placed: *const AtomicU64,
}

impl DirectConn {
    /// Where a borrower of this connection (a VI's data path lent out by
    /// the VI's `lend_direct`) finds the rings, the lines it
    /// reads and writes, and the positions it starts from.
    pub fn loan(&self) -> ConnLoan {
        let (tx_cons, rx_cons) = (self.tx_consumer(), self.rx_consumer());
        let (tx_consumed, tx_sleeping, rx_consumed) = (
            std::ptr::from_ref(&tx_cons.position),
            std::ptr::from_ref(&tx_cons.sleeping),
            std::ptr::from_ref(&rx_cons.position),
        );
        // SAFETY: the counters array has CLIENT_COUNTERS entries (see
        // count_many); both pairs lie inside it.
        let (tx_counters, rx_counters) = unsafe {
            (
                self.counters.add(ClientCounter::DirectTxMsgs as usize),
                self.counters.add(ClientCounter::DirectRxMsgs as usize),
            )
        };
        ConnLoan {
            tx: self.tx,
            rx: self.rx,
            size: self.size,
            max_len: self.max_len,
            tx_pos: self.tx_pos,
            rx_pos: self.rx_pos,
            rx_published: self.rx_published,
            tx_consumed,
            tx_sleeping,
            rx_consumed,
            peer_closed: self.map.peer_closed(),
            tx_counters,
            rx_counters,
            tx_placed: self.map.tx_placed(),
            rx_placed: self.map.rx_placed(),
        }
    }

    /// Take the connection back from a borrower at the positions it
    /// reached. Positions that cannot have come from following the ring's
    /// rules (behind where it started, not on a record boundary, a
    /// published position past the position) break the connection: false.
    /// The room last seen is looked up again at the next send.
    pub fn take_back(&mut self, tx_pos: u64, rx_pos: u64, rx_published: u64) -> bool {
        let aligned = |p: u64| p.is_multiple_of(RECORD_ALIGN as u64);
        if tx_pos < self.tx_pos
            || rx_pos < self.rx_pos
            || rx_published < self.rx_published
            || rx_published > rx_pos
            || !aligned(tx_pos)
            || !aligned(rx_pos)
            || !aligned(rx_published)
        {
            self.broken = true;
            return false;
        }
        self.tx_pos = tx_pos;
        self.tx_limit = tx_pos;
        self.tx_fit = tx_pos;
        self.rx_pos = rx_pos;
        self.rx_published = rx_published;
        true
    }

    /// For a borrower that has read up to `rx_pos` (at or past where it
    /// was lent, on a record boundary: false otherwise, nothing done):
    /// publish that position, then sleep until a record is there, the
    /// peer closes, the peer has placed `placed` of our messages (0: not
    /// waited for), or `timeout` passes (or a spurious wake-up).
    pub fn sleep_lent(&self, rx_pos: u64, placed: u64, timeout: std::time::Duration) -> bool {
        if rx_pos < self.rx_pos || !rx_pos.is_multiple_of(RECORD_ALIGN as u64) {
            return false;
        }
        let c = self.rx_consumer();
        // Release: our reads of the records before rx_pos are done.
        c.position.store(rx_pos, Ordering::Release);
        c.sleeping.store(1, Ordering::Relaxed);
        let seen = c.futex.load(Ordering::Acquire);
        // Pairs with the producer's fence after it publishes (see
        // `published`): either we see its record now, or it sees our flag.
        sys::heavy_fence();
        let ready = Self::hdr_at(self.rx, rx_pos & self.mask).load(Ordering::Acquire) as u32
            == record_tag(rx_pos);
        if !ready && !self.peer_closed() && (placed == 0 || self.peer_placed() < placed) {
            sys::futex_wait(&c.futex, seen, Some(timeout));
        }
        c.sleeping.store(0, Ordering::Relaxed);
        true
    }
}
