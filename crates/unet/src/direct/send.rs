//! The direct path's sending side: records reserved, copied in and
//! published one at a time or in a batch, the room refreshed and the
//! ring padded at the end of a lap, lines taken ahead after an answer.

use std::sync::atomic::Ordering;

use unet_abi::copy::copy_bytes;
use unet_abi::*;
use unet_sys as sys;

use super::{DirectConn, DirectSendError, AHEAD_LINES, LINE, NOT_A_TAG};
use crate::shm::Bytes;

impl DirectConn {
    /// Copy the pieces `parts`, `total` bytes in all, into the ring as
    /// one record (a gathering send). Returns whether the peer was asleep
    /// and had to be woken.
    #[inline]
    pub fn send_gather(
        &mut self,
        parts: &[Bytes<'_>],
        total: usize,
    ) -> Result<bool, DirectSendError> {
        if self.peer_closed() {
            return Err(DirectSendError::Closed);
        }
        let off = self.reserve(total)?;
        let (mut at, mut left) = (off as usize + RECORD_HEADER, total);
        for p in parts {
            let n = p.len().min(left);
            // SAFETY: reserve() made room for a record of `total` bytes at
            // `off` inside the ring, and the copies stay within it (`left`
            // bounds them); each part has p.len() readable bytes (Bytes).
            unsafe { copy_bytes(p.as_ptr(), self.tx.add(at), n) };
            at += n;
            left -= n;
        }
        self.commit(off, total);
        Ok(self.published(1, total as u64, total))
    }

    /// Make room for a record of `len` payload bytes; its ring offset.
    #[inline(always)]
    fn reserve(&mut self, len: usize) -> Result<u64, DirectSendError> {
        if len as u64 > self.max_len {
            return Err(DirectSendError::TooLarge);
        }
        let span = record_span(len) as u64;
        if self.tx_pos + span > self.tx_fit {
            self.make_room(span)?;
        }
        Ok(self.tx_pos & self.mask)
    }

    /// Publish the record of `len` bytes written at ring offset `off`.
    #[inline(always)]
    fn commit(&mut self, off: u64, len: usize) {
        let h = (record_tag(self.tx_pos) as u64) | ((len as u64) << 32);
        // Release: the payload written before is visible before the header.
        Self::hdr_at(self.tx, off).store(h, Ordering::Release);
        self.tx_pos += record_span(len) as u64;
    }

    /// Copy `data` into the ring as one record. Returns whether the peer
    /// was asleep and had to be woken. Inlined into `Endpoint::send` (a
    /// call per message showed in profiles of one-message sends).
    #[inline(always)]
    pub fn send(&mut self, data: &[u8]) -> Result<bool, DirectSendError> {
        // One load of a line that only changes at close: a send to a peer
        // that is gone fails at once instead of filling a ring nobody reads.
        if self.peer_closed() {
            return Err(DirectSendError::Closed);
        }
        self.put(data)?;
        Ok(self.published(1, data.len() as u64, data.len()))
    }

    /// Copy the messages of `msgs` into the ring in order, one record
    /// each, until one does not go (its error is returned beside the count
    /// sent before it). The peer's closed flag, the counters and the
    /// sleeping flag are looked at once for the whole batch. Returns the
    /// count sent and whether the peer had to be woken.
    #[inline(always)]
    pub fn send_many<M: AsRef<[u8]>>(
        &mut self,
        msgs: &[M],
    ) -> (usize, Result<bool, DirectSendError>) {
        if self.peer_closed() {
            return (0, Err(DirectSendError::Closed));
        }
        let (mut bytes, mut last) = (0u64, 0usize);
        for (n, m) in msgs.iter().enumerate() {
            let data = m.as_ref();
            if let Err(e) = self.put(data) {
                if n > 0 {
                    self.published(n as u64, bytes, last);
                }
                return (n, Err(e));
            }
            bytes += data.len() as u64;
            last = data.len();
        }
        let n = msgs.len();
        if n == 0 {
            return (0, Ok(false));
        }
        (n, Ok(self.published(n as u64, bytes, last)))
    }

    /// One record: `data` copied in and its header published.
    #[inline(always)]
    fn put(&mut self, data: &[u8]) -> Result<(), DirectSendError> {
        let len = data.len();
        if len as u64 > self.max_len {
            return Err(DirectSendError::TooLarge);
        }
        let span = record_span(len) as u64;
        // One test for the common case: the record fits before the end of
        // the ring and within the room last seen.
        if self.tx_pos + span > self.tx_fit {
            self.make_room(span)?;
        }
        let off = self.tx_pos & self.mask;
        // SAFETY: off + RECORD_HEADER + len <= off + span <= size, inside
        // the ring, as tx_pos + span <= tx_fit <= the end of tx_pos's lap
        // (make_room keeps tx_fit there, whatever the peer writes); the
        // consumer is not reading this region (it is past its published
        // position and its header is not yet published).
        unsafe {
            copy_bytes(
                data.as_ptr(),
                self.tx.add(off as usize + RECORD_HEADER),
                len,
            );
        }
        let h = (record_tag(self.tx_pos) as u64) | ((len as u64) << 32);
        // Release: the payload written above is visible before the header.
        Self::hdr_at(self.tx, off).store(h, Ordering::Release);
        self.tx_pos += span;
        Ok(())
    }

    /// After `n` records of `bytes` bytes were published: count them and
    /// wake the peer if it sleeps. Returns whether it had to be woken.
    #[inline(always)]
    fn published(&mut self, n: u64, bytes: u64, last: usize) -> bool {
        self.count_many(ClientCounter::DirectTxMsgs, n, bytes);
        // Pairs with the heavy fence in the consumer's wait: either it sees
        // our record when it re-checks, or we see its sleeping flag. With
        // asymmetric fences the consumer's membarrier makes this compiler
        // fence act as a full one, so the hot path pays nothing.
        sys::light_fence(self.asym);
        let woke = self.wake_if_sleeping();
        if self.answered {
            self.answered = false;
            self.take_ahead(last);
        }
        woke
    }

    /// Take for writing, now, the lines beyond the producer's position
    /// that the next record of `len` payload bytes will take (at most
    /// [`AHEAD_LINES`]), as far as they are free; after a send that
    /// answers a message ([`DirectConn::answered`]). The peer read those
    /// lines a lap ago: a store to one waits for the line to be fetched
    /// and the peer's copy dropped, and the next header's release waits
    /// for that store, on the next message's path. Taken here, the fetch
    /// overlaps the wait for the peer's answer (`unet bench javia --kinds
    /// rust`, 64 B round trips of two VIs: 0.20-0.21 us against 0.22-0.24
    /// without, four invocations of each in turn). Not in a stream
    /// of sends, where the next record follows at once and the peer,
    /// reading close behind, may be fetching those lines itself. The line
    /// of the next header is left alone (the peer may be spinning on it),
    /// and each line taken gets a first word no header at that position
    /// has, so that a consumer looking there takes it for no record.
    #[inline]
    fn take_ahead(&self, len: usize) {
        let end = self.tx_pos + record_span(len) as u64;
        let mut line = (self.tx_pos & !(LINE - 1)) + LINE;
        let mut n = 0;
        // Free: the peer read what was there a lap ago (see make_room).
        while n < AHEAD_LINES && line < end && line <= self.tx_limit.saturating_sub(LINE) {
            let word = (record_tag(line) ^ NOT_A_TAG) as u64;
            // A multiple of 64 below the ring's size: hdr_at's terms.
            Self::hdr_at(self.tx, line & self.mask).store(word, Ordering::Relaxed);
            line += LINE;
            n += 1;
        }
    }

    /// The slow part of `send`: refresh the room from the consumer's
    /// position and pad to the start of the ring when the record does not
    /// fit before its end; then `tx_fit` admits a record of `span` bytes.
    #[cold]
    #[inline(never)]
    fn make_room(&mut self, span: u64) -> Result<(), DirectSendError> {
        let off = self.tx_pos & self.mask;
        let pad = if off + span > self.size {
            self.size - off
        } else {
            0
        };
        if self.tx_pos + pad + span > self.tx_limit {
            // Acquire pairs with the consumer's Release of its position: its
            // reads of those records are done before we overwrite them.
            // Saturating: the peer may write any position (a position
            // ahead of ours only lets us overwrite what it has not read).
            self.tx_limit = self
                .tx_consumer()
                .position
                .load(Ordering::Acquire)
                .saturating_add(self.size);
            if self.tx_pos + pad + span > self.tx_limit {
                return Err(DirectSendError::Full);
            }
        }
        if pad > 0 {
            let h = (record_tag(self.tx_pos) as u64) | (((RECORD_PAD | pad as u32) as u64) << 32);
            Self::hdr_at(self.tx, off).store(h, Ordering::Release);
            self.tx_pos += pad;
        }
        // The end of the lap tx_pos is in (at its start after padding).
        let lap_end = (self.tx_pos & !self.mask) + self.size;
        self.tx_fit = self.tx_limit.min(lap_end);
        Ok(())
    }

    /// Copy `payload` into the ring as one reference record (VI
    /// connections only: see [`RECORD_REF`]).
    #[inline]
    pub fn send_ref(&mut self, payload: &[u8]) -> Result<bool, DirectSendError> {
        if self.peer_closed() {
            return Err(DirectSendError::Closed);
        }
        let off = self.reserve(payload.len())?;
        // SAFETY: reserve() made room for a record of payload.len() bytes
        // at `off` inside the ring.
        unsafe {
            copy_bytes(
                payload.as_ptr(),
                self.tx.add(off as usize + RECORD_HEADER),
                payload.len(),
            )
        };
        let h =
            (record_tag(self.tx_pos) as u64) | (((payload.len() as u32 | RECORD_REF) as u64) << 32);
        // Release: the payload written before is visible before the header.
        Self::hdr_at(self.tx, off).store(h, Ordering::Release);
        self.tx_pos += record_span(payload.len()) as u64;
        Ok(self.published(1, payload.len() as u64, payload.len()))
    }
}
