//! The direct path's receiving side: each record header checked before
//! use, the message copied out (one at a time or in a pass), the position
//! stepped on a predicted branch and published now and then.

use std::sync::atomic::Ordering;

use unet_abi::copy::copy_bytes;
use unet_abi::*;

use super::{DirectConn, DirectRecv};
use crate::shm::Bytes;

impl DirectConn {
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
            // Ask for a line ahead now, so that its fetch from the
            // producer's core overlaps this message and the caller's work
            // instead of stalling the next call's header load
            // (`unet bench stream --path direct --sizes 64 --batch 1`:
            // 1.2-1.5x the floor ring against 0.75-0.94x without where
            // the two cores are far apart, no clear change where they are
            // close; 64, 96, 160, 512 or 1024 bytes ahead gained nothing,
            // 256 less; the ping-pong's round trip did not change). A
            // hint only: it reads nothing into the program, and a line
            // the producer has not written yet is fetched again when it
            // has.
            // SAFETY: (.. & mask) < size: inside the ring.
            super::prefetch_read(unsafe {
                self.rx
                    .add(((self.rx_pos + super::RX_AHEAD) & self.mask) as usize)
            });
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

    pub(super) fn publish(&mut self) {
        // Release: our reads of the consumed records happen before the
        // producer, acquiring this position, overwrites them.
        self.rx_consumer()
            .position
            .store(self.rx_pos, Ordering::Release);
        self.rx_published = self.rx_pos;
    }
}
