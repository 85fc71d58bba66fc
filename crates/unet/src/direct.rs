//! The direct path: one side of a connection segment shared by two local
//! processes only (layout in `unet_abi`, "Direct connection segment").
//!
//! Each direction is a single-producer, single-consumer byte ring of
//! variable-length records. The producer copies the payload in and publishes
//! the 8-byte record header with one Release store; the consumer spins on the
//! header at its position, copies the payload out, and publishes its position
//! now and then so the producer knows the space is free. The peer is not
//! trusted: every header is checked (tag, length, padding) before use, and a
//! bad one marks the connection broken rather than reading out of bounds or
//! skipping padding for as long as the peer writes it.
//!
//! The segment's header and its lines are mapped in `crate::shm`.
//! `unsafe` is allowed here for the rings: memory shared with the peer,
//! reached through raw pointers into the mapping the connection owns, and
//! every message is copied in and out at offsets the record rules above
//! bound, with no second check on the hot path.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use unet_abi::copy::copy_bytes;
use unet_abi::*;
use unet_sys::{self as sys, Segment};

use crate::shm::{Bytes, ConnLines, ConnRings, Mapped};

/// Why a direct send did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DirectSendError {
    /// No room until the peer consumes.
    Full,
    /// Larger than half the ring.
    TooLarge,
    /// The peer closed or died.
    Closed,
}

/// What polling the receive direction found.
pub(crate) enum DirectRecv {
    /// Nothing yet.
    Empty,
    /// A message of this length was copied into the buffer.
    Message(usize),
    /// The next message needs a buffer of this many bytes; it stays queued.
    TooSmall(usize),
    /// The peer wrote something impossible; the connection is unusable.
    Broken,
}

// `DirectConn::count` updates a message counter and the byte counter
// that follows it.
const _: () = assert!(
    ClientCounter::DirectTxBytes as usize == ClientCounter::DirectTxMsgs as usize + 1
        && ClientCounter::DirectRxBytes as usize == ClientCounter::DirectRxMsgs as usize + 1
        && (ClientCounter::DirectRxBytes as usize) < CLIENT_COUNTERS
);

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

pub(crate) struct DirectConn {
    /// The mapping and the header's lines as this side sees them; `tx`
    /// and `rx` point into it.
    map: Mapped<ConnHeader, ConnLines>,
    pub channel: u16,
    size: u64,
    /// `size - 1`: positions to offsets.
    mask: u64,
    /// Largest payload of one record (half the ring, less a header).
    max_len: u64,
    tx: *mut u8,
    rx: *const u8,
    tx_pos: u64,
    /// The room last seen: the consumer's position then, plus the ring.
    tx_limit: u64,
    /// Records end at or before this position without a look at the
    /// consumer or padding: the lesser of `tx_limit` and the end of the
    /// current lap (one test on the send path).
    tx_fit: u64,
    rx_pos: u64,
    /// The span of the last record received (see [`DirectConn::advance_rx`]).
    rx_span: u64,
    rx_published: u64,
    pub broken: bool,
    /// The engine said the peer is gone (the endpoint releases the
    /// connection once it is drained).
    pub gone: bool,
    /// This endpoint's client counters (`ClientCounter` order), in its own
    /// segment's header: written by this process only, read by the engine
    /// when it answers a Stat request, so `unet stat` sees every message.
    counters: *const AtomicU64,
    /// This process publishes with a compiler fence only (see
    /// `sys::asymmetric_fences`).
    asym: bool,
    /// A message came since we last sent (see [`DirectConn::take_ahead`]).
    answered: bool,
}

/// Lines [`DirectConn::take_ahead`] writes at most: those of a record of
/// up to about 256 bytes.
const AHEAD_LINES: u64 = 4;

/// A cache line.
const LINE: u64 = 64;

/// A tag with this bit flipped is another position's.
const NOT_A_TAG: u32 = 0x8000_0000;

// SAFETY: `tx` and `rx` point into `map`, which DirectConn owns, and
// `counters` into an endpoint's header (or `map`) that outlives it; the
// memory is shared memory accessed with atomics and byte copies.
unsafe impl Send for DirectConn {}

impl DirectConn {
    /// Map a connection segment; `side_b` tells which direction is ours.
    pub fn open(
        seg: Segment,
        channel: u16,
        side_b: bool,
        counters: &[AtomicU64; CLIENT_COUNTERS],
    ) -> Result<DirectConn, String> {
        let (map, rings) = Mapped::conn(seg, side_b)?;
        Ok(DirectConn::with(map, rings, channel, counters.as_ptr()))
    }

    /// [`DirectConn::open`] for a connection that counts in its own
    /// header (a VI's: this side's `a_counters` or `b_counters`, where the
    /// engine reads them for `unet stat`).
    pub fn open_counting_in_header(seg: Segment, side_b: bool) -> Result<DirectConn, String> {
        let (map, rings) = Mapped::conn(seg, side_b)?;
        // A pointer kept beside the mapping it points into.
        let counters = rings.own_counters;
        Ok(DirectConn::with(map, rings, 0, counters))
    }

    /// The connection over `map` and its `rings`, counting in the
    /// CLIENT_COUNTERS atomics at `counters`.
    fn with(
        map: Mapped<ConnHeader, ConnLines>,
        rings: ConnRings,
        channel: u16,
        counters: *const AtomicU64,
    ) -> DirectConn {
        let ConnRings { tx, rx, ring, .. } = rings;
        DirectConn {
            map,
            channel,
            size: ring,
            mask: ring - 1,
            max_len: ring / 2 - RECORD_HEADER as u64,
            tx,
            rx,
            tx_pos: 0,
            tx_limit: ring,
            tx_fit: ring,
            rx_pos: 0,
            rx_span: 0,
            rx_published: 0,
            broken: false,
            gone: false,
            counters,
            asym: sys::asymmetric_fences(),
            answered: false,
        }
    }

    /// The consumer line of the direction we send on (written by the peer).
    #[inline(always)]
    fn tx_consumer(&self) -> &ConnConsumer {
        self.map.tx_consumer()
    }

    /// Our consumer line (direction we receive on).
    #[inline(always)]
    pub fn rx_consumer(&self) -> &ConnConsumer {
        self.map.rx_consumer()
    }

    /// True when the peer (or the engine on its behalf) closed.
    #[inline(always)]
    pub fn peer_closed(&self) -> bool {
        self.map.peer_closed().load(Ordering::Acquire) != 0
    }

    /// Mark our side closed and wake the peer.
    pub fn close(&self) {
        self.map.own_closed().store(1, Ordering::Release);
        let peer = self.tx_consumer();
        peer.futex.fetch_add(1, Ordering::Release);
        sys::futex_wake(&peer.futex, i32::MAX);
    }

    /// Why the peer broke the connection: a `ViError` code, 0 if it did not
    /// say (read after [`DirectConn::peer_closed`]).
    pub fn peer_error(&self) -> u32 {
        self.map.peer_error().load(Ordering::Acquire)
    }

    /// Say why we break the connection (a `ViError` code), then close.
    pub fn close_with_error(&self, code: u32) {
        self.map.own_error().store(code, Ordering::Release);
        self.close();
    }

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
    fn wake_if_sleeping(&self) -> bool {
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

    /// Add a message of `len` bytes to the counters `msgs` and `msgs + 1`.
    #[inline(always)]
    fn count(&self, msgs: ClientCounter, len: usize) {
        self.count_many(msgs, 1, len as u64);
    }

    /// Add `n` messages of `bytes` bytes in all to the counters `msgs` and
    /// `msgs + 1`.
    #[inline(always)]
    fn count_many(&self, msgs: ClientCounter, n: u64, bytes: u64) {
        // SAFETY: `counters` points at the CLIENT_COUNTERS atomics of the
        // endpoint header, which outlives every connection of the endpoint
        // (the endpoint owns both and only calls send/recv while alive);
        // msgs + 1 < CLIENT_COUNTERS for the two direct-path pairs.
        let (m, b) = unsafe {
            (
                &*self.counters.add(msgs as usize),
                &*self.counters.add(msgs as usize + 1),
            )
        };
        // One writer: a load and a store, no atomic read-modify-write.
        m.store(m.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        b.store(
            b.load(Ordering::Relaxed).wrapping_add(bytes),
            Ordering::Relaxed,
        );
    }

    #[inline]
    fn hdr_at(base: *const u8, off: u64) -> &'static AtomicU64 {
        // SAFETY: off is 8-aligned (records are RECORD_ALIGN-aligned) and
        // < ring size, so the u64 lies inside the ring; the mapping outlives
        // every use (the reference does not escape the calling method).
        unsafe { &*(base.add(off as usize) as *const AtomicU64) }
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

    /// True when a record (or padding) is waiting.
    #[inline]
    pub fn ready(&self) -> bool {
        let off = self.rx_pos & self.mask;
        let h = Self::hdr_at(self.rx, off).load(Ordering::Acquire);
        h as u32 == record_tag(self.rx_pos)
    }

    /// Take the next message, copying it into `buf`.
    #[inline(always)]
    pub fn recv(&mut self, buf: &mut [u8]) -> DirectRecv {
        // Inlined: a call for the copy of each message showed in profiles.
        self.recv_with(
            #[inline(always)]
            |src, len| {
                if len > buf.len() {
                    return Err(len);
                }
                // SAFETY: src has len readable bytes inside the ring (checked by
                // recv_with); buf has at least len bytes.
                unsafe { copy_bytes(src, buf.as_mut_ptr(), len) };
                Ok(())
            },
        )
    }

    /// Take the next message into `out`, resized to its length.
    #[inline]
    pub fn recv_vec(&mut self, out: &mut Vec<u8>) -> DirectRecv {
        self.recv_with(|src, len| {
            out.resize(len, 0);
            // SAFETY: src has len readable bytes (recv_with's contract).
            unsafe { std::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), len) };
            Ok(())
        })
    }

    /// Take the next message, handing `(pointer, len)` to `f`, which copies
    /// it out; if `f` refuses (Err(needed)), the message stays queued.
    #[inline(always)]
    pub fn recv_with(
        &mut self,
        mut f: impl FnMut(*const u8, usize) -> Result<(), usize>,
    ) -> DirectRecv {
        self.recv_record(
            false,
            #[inline(always)]
            |src, len, _| f(src, len),
        )
    }

    /// [`DirectConn::recv_with`] for a VI's connection, whose records may
    /// be references ([`RECORD_REF`]): `f` gets the record's bytes and
    /// whether it is one.
    #[inline(always)]
    pub fn recv_vi_with(
        &mut self,
        mut f: impl FnMut(Bytes<'_>, bool) -> Result<(), usize>,
    ) -> DirectRecv {
        self.recv_record(true, |src, len, is_ref| {
            // SAFETY: src has len readable bytes inside the ring (checked by
            // recv_record), mapped for the whole call, which the closure's
            // borrow of them does not outlive.
            f(unsafe { Bytes::new(src, len) }, is_ref)
        })
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

    #[inline(always)]
    fn recv_record(
        &mut self,
        refs: bool,
        mut f: impl FnMut(*const u8, usize, bool) -> Result<(), usize>,
    ) -> DirectRecv {
        if self.broken {
            return DirectRecv::Broken;
        }
        loop {
            let off = self.rx_pos & self.mask;
            // Acquire pairs with the producer's Release store of the header.
            let h = Self::hdr_at(self.rx, off).load(Ordering::Acquire);
            if h as u32 != record_tag(self.rx_pos) {
                // Not publishing here: an empty poll happens once per
                // message in a ping-pong, and writing the consumer line
                // each time would make the producer's next look at it a
                // cache miss. Publishing every quarter ring (below) and
                // before sleeping is enough: messages are at most half a
                // ring, so the producer always sees room for one.
                return DirectRecv::Empty;
            }
            let len = (h >> 32) as u32;
            if len & RECORD_PAD != 0 {
                // Padding fills the end of a lap after the last record that
                // fit in it, and a record fits at the start of a lap (it is
                // at most half the ring), so padding never starts a lap.
                // Padding there (off == 0) is a broken peer: it is the only
                // place the loop can find padding again without a record in
                // between, so the loop turns at most twice, whatever the
                // peer keeps writing.
                let pad = (len & !RECORD_PAD) as u64;
                if off == 0 || pad != self.size - off {
                    self.broken = true;
                    return DirectRecv::Broken;
                }
                self.rx_pos += pad;
                continue;
            }
            // A reference record where the connection allows them; else the
            // flag makes the length too large for the ring (broken below).
            let is_ref = refs && len & RECORD_REF != 0;
            let len = if is_ref { len & !RECORD_REF } else { len } as usize;
            // Inside the ring is all that safety needs (a record longer than
            // the producer may write is still read from inside the ring).
            if off + record_span(len) as u64 > self.size {
                self.broken = true;
                return DirectRecv::Broken;
            }
            // SAFETY: off + header + len lies inside the ring (checked).
            let src = unsafe { self.rx.add(off as usize + RECORD_HEADER) };
            if let Err(need) = f(src, len, is_ref) {
                return DirectRecv::TooSmall(need);
            }
            self.advance_rx(record_span(len) as u64);
            self.answered = true;
            self.count(ClientCounter::DirectRxMsgs, len);
            if self.publish_due() {
                self.publish();
            }
            return DirectRecv::Message(len);
        }
    }

    /// Take up to `limit` waiting messages in one pass, copying each into
    /// `buf` and handing it to `f`, which returns false to stop after it.
    /// Returns how many were taken. The pass does only the common case and
    /// stops, consuming nothing more, at anything else (an empty ring, a
    /// message larger than `buf`, a bad header): `recv` then reports it.
    /// The counters are updated once per pass.
    #[inline(always)]
    pub fn recv_many(
        &mut self,
        buf: &mut [u8],
        limit: usize,
        mut f: impl FnMut(&[u8]) -> bool,
    ) -> usize {
        if self.broken {
            return 0;
        }
        let (mut n, mut bytes) = (0usize, 0u64);
        while n < limit {
            let off = self.rx_pos & self.mask;
            // Acquire pairs with the producer's Release store of the header.
            let h = Self::hdr_at(self.rx, off).load(Ordering::Acquire);
            if h as u32 != record_tag(self.rx_pos) {
                break;
            }
            let len = (h >> 32) as u32;
            if len & RECORD_PAD != 0 {
                // As in recv_with: padding that starts a lap, or does not
                // end at the end of the ring, is left for recv to report.
                if off == 0 || (len & !RECORD_PAD) as u64 != self.size - off {
                    break;
                }
                self.rx_pos += self.size - off;
                continue;
            }
            let len = len as usize;
            let span = record_span(len) as u64;
            if len > buf.len() || off + span > self.size {
                break;
            }
            // SAFETY: off + header + len lies inside the ring (checked);
            // buf has at least len bytes (checked).
            unsafe {
                copy_bytes(
                    self.rx.add(off as usize + RECORD_HEADER),
                    buf.as_mut_ptr(),
                    len,
                )
            };
            self.advance_rx(span);
            if self.publish_due() {
                self.publish();
            }
            n += 1;
            bytes += len as u64;
            if !f(&buf[..len]) {
                break;
            }
        }
        if n > 0 {
            self.answered = true;
            self.count_many(ClientCounter::DirectRxMsgs, n as u64, bytes);
        }
        n
    }

    /// Move the receive position past a record of `span` bytes, the one
    /// just read. When it has the last record's span (a stream of one
    /// size), the position advances by that remembered span on a branch
    /// the processor predicts, so the address of the next header does not
    /// wait for this header's load: the next message's loads can start
    /// while this one is still being copied, as they do in a ring of
    /// fixed slots. Added from the header itself, the next position waited
    /// for each header to arrive (a cache miss whenever the reader is
    /// behind), one message after another.
    #[inline(always)]
    fn advance_rx(&mut self, span: u64) {
        // Added before the test, so that the compiler cannot use `span`
        // (equal on the common branch) in its place.
        let predicted = self.rx_span;
        self.rx_pos += predicted;
        if span != predicted {
            self.new_rx_span(predicted, span);
        }
    }

    /// [`DirectConn::advance_rx`] for a record of another span than the
    /// last: undo the guess.
    #[cold]
    #[inline(never)]
    fn new_rx_span(&mut self, predicted: u64, span: u64) {
        self.rx_pos = self.rx_pos - predicted + span;
        self.rx_span = span;
    }

    /// A quarter ring read since the position was last published: time to
    /// publish it again.
    #[inline(always)]
    fn publish_due(&self) -> bool {
        self.rx_pos >= self.rx_published + self.size / 4
    }

    fn publish(&mut self) {
        // Release: our reads of the consumed records happen before the
        // producer, acquiring this position, overwrites them.
        self.rx_consumer()
            .position
            .store(self.rx_pos, Ordering::Release);
        self.rx_published = self.rx_pos;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    const RING: u32 = 4096;

    /// A connection segment as the engine makes it.
    fn conn_segment() -> Segment {
        let seg = Segment::create("test-conn", conn_segment_size(RING)).unwrap();
        // SAFETY: a fresh zeroed segment of conn_segment_size(RING) bytes,
        // not shared yet; the view goes before the segment.
        unsafe { unet_abi::view::ConnView::init(seg.ptr(), seg.len(), RING, 0, 0, 0) }.unwrap();
        seg
    }

    /// Counters that outlive every connection of a test.
    fn counters() -> &'static [AtomicU64; CLIENT_COUNTERS] {
        Box::leak(Box::new(std::array::from_fn(|_| AtomicU64::new(0))))
    }

    /// Side B of a connection over `seg` (the receiver under test), and a
    /// second mapping of the same memory through which the test writes the
    /// A→B ring as a hostile side A would.
    fn receiver(seg: &Segment) -> (DirectConn, Segment) {
        let b = Segment::open(seg.fd().try_clone().unwrap(), 0, true).unwrap();
        let raw = Segment::open(seg.fd().try_clone().unwrap(), 0, true).unwrap();
        let rx = DirectConn::open(b, 0, true, counters()).unwrap();
        (rx, raw)
    }

    /// Write the record header `h` at byte `off` of the A→B ring of `raw`.
    fn write_header(raw: &Segment, off: u64, h: u64) {
        let p = raw.at(CONN_HEADER_SIZE + off as usize, 8).unwrap();
        // SAFETY: 8 bytes inside the mapped ring (checked by `at`), 8-byte
        // aligned (the ring is page aligned and off a multiple of 8); the
        // receiver reads the word atomically too.
        unsafe { p.cast::<AtomicU64>().as_ref() }.store(h, Ordering::Release);
    }

    fn pad_header(pos: u64, pad: u64) -> u64 {
        (record_tag(pos) as u64) | (((RECORD_PAD | pad as u32) as u64) << 32)
    }

    /// Byte `j` of golden message `i`.
    fn golden_byte(i: usize, j: usize) -> u8 {
        (i * 37 + j * 11 + 5) as u8
    }

    /// The golden direct ring: side A's ring as its sends left it. Five
    /// records (a 5-byte one, 100 bytes, a reference, 2000 and 1500
    /// bytes), the first four consumed, then a 400-byte record that does
    /// not fit before the end (padding, then the record at the start of
    /// the next lap, over the first ones) and a reference. A reader that
    /// starts at [`GOLDEN_RING_START`] finds the 1500-byte message, the
    /// padding, the 400-byte message, the reference, then nothing.
    fn golden_ring() -> Vec<u8> {
        let seg = conn_segment();
        let a = Segment::open(seg.fd().try_clone().unwrap(), 0, true).unwrap();
        let mut tx = DirectConn::open(a, 0, false, counters()).unwrap();
        let msg = |i: usize, n: usize| (0..n).map(|j| golden_byte(i, j)).collect::<Vec<u8>>();
        let reference = |h: u32, n: u32, off: u64| {
            let mut r = h.to_le_bytes().to_vec();
            r.extend_from_slice(&n.to_le_bytes());
            r.extend_from_slice(&off.to_le_bytes());
            r
        };
        tx.send(b"hello").unwrap();
        tx.send(&msg(1, 100)).unwrap();
        tx.send_ref(&reference(7, 3000, 64)).unwrap();
        tx.send(&msg(3, 2000)).unwrap();
        tx.send(&msg(4, 1500)).unwrap();
        assert_eq!(tx.tx_pos, 3744);
        // The consumer has read the first four records.
        tx.tx_consumer()
            .position
            .store(GOLDEN_RING_START, Ordering::Release);
        tx.send(&msg(5, 400)).unwrap();
        tx.send_ref(&reference(9, 2048, 4096)).unwrap();
        assert_eq!(tx.tx_pos, 4096 + 416 + 32);
        let ring = seg.at(CONN_HEADER_SIZE, RING as usize).unwrap();
        // SAFETY: RING bytes inside the mapping (checked by `at`).
        unsafe { std::slice::from_raw_parts(ring.as_ptr(), RING as usize) }.to_vec()
    }

    /// Where a reader of the golden ring starts.
    const GOLDEN_RING_START: u64 = 2208;

    const GOLDEN_RING_PATH: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../abi/golden/direct_ring_v1.hex"
    );

    /// The golden direct ring equals the committed vector
    /// (`crates/abi/golden/direct_ring_v1.hex`, which Javia's tests read
    /// with their own reading of the record format); `UNET_BLESS=1`
    /// rewrites it after a deliberate change. Read from its start, it
    /// gives back what was sent.
    #[test]
    fn the_golden_ring_matches_the_committed_vector_and_reads_back() {
        let bytes = golden_ring();
        let hex: String = bytes
            .chunks(32)
            .map(|l| l.iter().map(|x| format!("{x:02x}")).collect::<String>() + "\n")
            .collect();
        if std::env::var_os("UNET_BLESS").is_some() {
            std::fs::write(GOLDEN_RING_PATH, &hex).unwrap();
        }
        let committed = std::fs::read_to_string(GOLDEN_RING_PATH).expect("golden ring file");
        assert!(
            committed == hex,
            "the golden ring differs from {GOLDEN_RING_PATH}"
        );
        // Read back through a receiver placed where the golden reader starts.
        let seg = conn_segment();
        let (mut rx, raw) = receiver(&seg);
        let ring = raw.at(CONN_HEADER_SIZE, RING as usize).unwrap();
        // SAFETY: RING writable bytes inside the mapping (checked by `at`);
        // the receiver reads them only after this copy.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ring.as_ptr(), bytes.len()) };
        rx.rx_pos = GOLDEN_RING_START;
        let mut got = Vec::new();
        loop {
            let mut rec = None;
            match rx.recv_vi_with(|src, is_ref| {
                // SAFETY: the ring has src.len() readable bytes at src.
                rec = Some((
                    unsafe { std::slice::from_raw_parts(src.as_ptr(), src.len()) }.to_vec(),
                    is_ref,
                ));
                Ok(())
            }) {
                DirectRecv::Message(_) => got.push(rec.unwrap()),
                DirectRecv::Empty => break,
                _ => panic!("the golden ring reads broken"),
            }
        }
        let lens: Vec<(usize, bool)> = got.iter().map(|(m, r)| (m.len(), *r)).collect();
        assert_eq!(lens, [(1500, false), (400, false), (16, true)]);
        assert!(got[0]
            .0
            .iter()
            .enumerate()
            .all(|(j, &b)| b == golden_byte(4, j)));
        assert!(got[1]
            .0
            .iter()
            .enumerate()
            .all(|(j, &b)| b == golden_byte(5, j)));
        assert_eq!(&got[2].0[..8], &[9, 0, 0, 0, 0, 8, 0, 0]);
    }

    #[test]
    fn padding_at_the_end_of_a_lap_is_skipped_and_padding_twice_is_broken() {
        let seg = conn_segment();
        let (mut rx, raw) = receiver(&seg);
        let mut tx = DirectConn::open(
            Segment::open(seg.fd().try_clone().unwrap(), 0, true).unwrap(),
            0,
            false,
            counters(),
        )
        .unwrap();
        // Three records of 1536 bytes: the third does not fit after 3072
        // and follows 1024 bytes of padding, at the start of lap 1.
        let mut buf = vec![0u8; 2048];
        for i in 0..3u8 {
            tx.send(&[i; 1500]).unwrap();
            match rx.recv(&mut buf) {
                DirectRecv::Message(1500) => assert_eq!(buf[..1500], [i; 1500]),
                _ => panic!("message {i} not received"),
            }
        }
        assert_eq!(rx.rx_pos, 4096 + 1536);
        assert!(matches!(rx.recv(&mut buf), DirectRecv::Empty));
        // A hostile side A: padding to the end of lap 1, then padding
        // again at the start of lap 2, where no padding can be.
        write_header(&raw, 1536, pad_header(4096 + 1536, 4096 - 1536));
        write_header(&raw, 0, pad_header(2 * 4096, 4096));
        assert_eq!(rx.recv_many(&mut buf, 8, |_| true), 0);
        assert!(!rx.broken, "recv_many leaves the report to recv");
        assert!(matches!(rx.recv(&mut buf), DirectRecv::Broken));
        assert!(rx.broken);
        assert!(matches!(rx.recv(&mut buf), DirectRecv::Broken));
        assert_eq!(rx.recv_many(&mut buf, 8, |_| true), 0);
    }

    /// The word at byte `off` of the A→B ring of `raw`.
    fn ring_word(raw: &Segment, off: u64) -> u64 {
        let p = raw.at(CONN_HEADER_SIZE + off as usize, 8).unwrap();
        // SAFETY: as in write_header.
        unsafe { p.cast::<AtomicU64>().as_ref() }.load(Ordering::Acquire)
    }

    /// Both sides of a connection over `seg`: A (the sender under test)
    /// and B.
    fn pair(seg: &Segment) -> (DirectConn, DirectConn) {
        let open = |side_b| {
            let m = Segment::open(seg.fd().try_clone().unwrap(), 0, true).unwrap();
            DirectConn::open(m, 0, side_b, counters()).unwrap()
        };
        (open(false), open(true))
    }

    #[test]
    fn a_send_that_answers_takes_the_next_records_lines_without_making_a_record() {
        let seg = conn_segment();
        let (mut a, mut b) = pair(&seg);
        let (_, raw) = receiver(&seg);
        let mut buf = vec![0u8; 4096];
        // Sends with nothing received between them take nothing ahead.
        a.send(&[1; 64]).unwrap();
        a.send(&[2; 64]).unwrap();
        assert_eq!(ring_word(&raw, 256), 0);
        for i in 1..=2u8 {
            assert!(matches!(b.recv(&mut buf), DirectRecv::Message(64)));
            assert_eq!(buf[..64], [i; 64]);
        }
        // An answer (A read B's message; its record at 192): the line
        // after the next header's (288) is taken for the next 64-byte
        // record, [288, 384); the next header's line is not.
        b.send(b"ask").unwrap();
        assert!(matches!(a.recv(&mut buf), DirectRecv::Message(3)));
        a.send(&[3; 64]).unwrap();
        assert_eq!(ring_word(&raw, 320), (record_tag(320) ^ NOT_A_TAG) as u64);
        assert_eq!(ring_word(&raw, 384), 0);
        assert!(matches!(b.recv(&mut buf), DirectRecv::Message(64)));
        assert_eq!(buf[..64], [3; 64]);
        assert!(matches!(b.recv(&mut buf), DirectRecv::Empty));
        assert_eq!(b.rx_pos, 288);
        // Read from the taken line itself, it is no record either.
        let (mut other, _) = receiver(&seg);
        other.rx_pos = 320;
        assert!(matches!(other.recv(&mut buf), DirectRecv::Empty));
        assert!(!other.broken);
    }

    #[test]
    fn lines_the_reader_has_not_read_are_not_taken_ahead() {
        let seg = conn_segment();
        let (mut a, mut b) = pair(&seg);
        let (_, raw) = receiver(&seg);
        let mut buf = vec![0u8; 4096];
        // The second lap; B has read the first up to 224, so A may write
        // up to 8192 + 224.
        let at = 2 * RING as u64;
        (a.tx_pos, a.tx_limit, a.tx_fit, b.rx_pos) = (at, at, at, at);
        a.tx_consumer()
            .position
            .store(at - RING as u64 + 224, Ordering::Release);
        a.send(&[1; 64]).unwrap();
        assert!(matches!(b.recv(&mut buf), DirectRecv::Message(64)));
        b.send(b"ask").unwrap();
        assert!(matches!(a.recv(&mut buf), DirectRecv::Message(3)));
        write_header(&raw, 256, 7);
        // Ends at 8384; the next record's line 8448 (ring offset 256) is
        // past what B has freed.
        a.send(&[2; 64]).unwrap();
        assert_eq!(ring_word(&raw, 256), 7);
        assert!(matches!(b.recv(&mut buf), DirectRecv::Message(64)));
        assert_eq!(buf[..64], [2; 64]);
    }

    #[test]
    fn padding_that_starts_a_lap_is_broken() {
        let seg = conn_segment();
        let (mut rx, raw) = receiver(&seg);
        write_header(&raw, 0, pad_header(0, 4096));
        let mut buf = vec![0u8; 64];
        assert!(matches!(rx.recv(&mut buf), DirectRecv::Broken));
    }

    /// A peer that rewrites the record header at the start of the ring as
    /// fast as it can, as padding of a whole lap tagged for one lap after
    /// another, can carry a receiver that skips padding around the ring
    /// for as long as it likes, no message ever arriving. The receiver must
    /// find the connection broken within a bounded time instead.
    #[test]
    fn a_peer_rewriting_padding_cannot_keep_the_receiver_spinning() {
        const LAPS: u64 = 1024;
        let seg = conn_segment();
        let (mut rx, raw) = receiver(&seg);
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let t0 = Instant::now();
                // Bounded on its own too: a receiver it holds is let go and
                // the test fails, not hangs.
                while !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(10) {
                    // Lap after lap, each rewritten many times so that a
                    // polling receiver sees every one; then from lap 0
                    // again, so that a receiver that missed its lap (it
                    // was not running) is offered it once more.
                    for lap in 0..LAPS {
                        let h = pad_header(lap * RING as u64, RING as u64);
                        for _ in 0..256 {
                            write_header(&raw, 0, h);
                        }
                    }
                }
            })
        };
        let mut buf = vec![0u8; 64];
        let t0 = Instant::now();
        let mut longest = Duration::ZERO;
        let mut outcome = None;
        while t0.elapsed() < Duration::from_secs(5) {
            let t = Instant::now();
            let r = rx.recv(&mut buf);
            longest = longest.max(t.elapsed());
            match r {
                DirectRecv::Empty => {}
                DirectRecv::Broken => {
                    outcome = Some(t0.elapsed());
                    break;
                }
                DirectRecv::Message(n) | DirectRecv::TooSmall(n) => {
                    panic!("a message of {n} bytes from a peer that wrote none")
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        let laps = rx.rx_pos / RING as u64;
        let took = outcome.unwrap_or_else(|| {
            panic!(
                "the receiver never found the connection broken: the peer \
                 carried it {laps} laps through padding (longest call {longest:?})"
            )
        });
        assert!(rx.broken);
        assert_eq!(laps, 0, "skipped {laps} laps of padding");
        assert!(took < Duration::from_secs(5));
        assert!(
            longest < Duration::from_secs(1),
            "one call took {longest:?}"
        );
    }
}
