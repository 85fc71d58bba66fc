//! The virtual buffer of a buffered endpoint: UDM's two-case delivery
//! offered to a U-Net endpoint (`docs/udm.md`, "U-Net endpoints with
//! two-case delivery").
//!
//! A message that finds no room in the endpoint's receive queue or no free
//! buffer (or that comes while earlier ones wait here) is appended to this
//! buffer instead of being dropped; the engine moves the messages into the
//! receive queue, in order, as room appears. The buffer is a byte ring in
//! a sparse memory file of the endpoint's limit: address space reserved up
//! front, pages taking memory only once written and given back behind the
//! reader ([`ResidentPages`]). Only the engine maps it (the client sees
//! nothing but its receive queue, as without the option), so nothing in it
//! needs checking: it is written and read by the engine alone.
//!
//! A record is an 8-byte header (length `u32`, channel `u16`, kind `u16`)
//! and the message, padded to 8 bytes. A record never wraps: where one
//! does not fit before the end of the file, a *wrap* header fills the rest
//! and the record starts again at the file's beginning.
//!
//! `unsafe` is allowed here: records are written and read in place in the
//! buffer's memory file.

#![allow(unsafe_code)]

use std::io;

use unet_sys::Segment;

use crate::vbuf::ResidentPages;

const HDR: u64 = 8;
const KIND_MSG: u16 = 1;
const KIND_WRAP: u16 = 2;

/// Bytes a message of `len` bytes takes in the buffer.
pub(crate) fn record_len(len: usize) -> u64 {
    HDR + (len as u64).next_multiple_of(8)
}

/// A buffered endpoint's virtual buffer.
pub(crate) struct Backlog {
    seg: Segment,
    /// Byte positions (from creation, never wrapping): the writer's and
    /// the reader's.
    head: u64,
    tail: u64,
    /// Messages in the buffer.
    msgs: u64,
    pages: ResidentPages,
    /// A local sender was found held at the limit and not yet let go
    /// (`rx_held` counts once per stall).
    pub held: bool,
    /// The most pages it held at once.
    pub pages_max: u64,
}

impl Backlog {
    /// A virtual buffer of `limit` bytes (a multiple of the page size) for
    /// endpoint `id`: reserved, no page touched.
    pub(crate) fn new(id: u32, limit: usize) -> io::Result<Backlog> {
        Ok(Backlog {
            seg: Segment::create_sparse(&format!("unet-ep-{id}-vbuf"), limit)?,
            head: 0,
            tail: 0,
            msgs: 0,
            pages: ResidentPages::default(),
            held: false,
            pages_max: 0,
        })
    }

    /// The memory file (to unmap it off the engine's thread).
    pub(crate) fn into_segment(self) -> Segment {
        self.seg
    }

    /// The limit in bytes.
    pub(crate) fn limit(&self) -> u64 {
        self.seg.len() as u64
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.msgs == 0
    }

    /// Pages holding memory now.
    pub(crate) fn pages(&self) -> u64 {
        self.pages.in_use(self.seg.len(), self.head)
    }

    fn write_header(&mut self, off: u64, len: u32, chan: u16, kind: u16) {
        let h = (len as u64) | (chan as u64) << 32 | (kind as u64) << 48;
        // Records lie in the buffer by construction; `at` checks anyway.
        if let Some(p) = self.seg.at(off as usize, HDR as usize) {
            // SAFETY: `at` checked the 8 bytes lie in the mapping; `off` is
            // a multiple of 8 from a page-aligned base: aligned for a u64.
            unsafe { p.cast::<u64>().as_ptr().write(h) };
        }
    }

    fn read_header(&self, off: u64) -> (u32, u16, u16) {
        let Some(p) = self.seg.at(off as usize, HDR as usize) else {
            return (0, 0, 0);
        };
        // SAFETY: as in write_header; only the engine writes this memory.
        let h = unsafe { p.cast::<u64>().as_ptr().read() };
        (h as u32, (h >> 32) as u16, (h >> 48) as u16)
    }

    /// Append `len` bytes at `src` as arriving on channel `chan`: false,
    /// nothing written, if the buffer is at its limit.
    ///
    /// `src` has `len` readable bytes (the caller's contract).
    pub(crate) fn push(&mut self, chan: u16, src: *const u8, len: usize) -> bool {
        let size = self.limit();
        let need = record_len(len);
        let to_end = size - self.head % size;
        let pad = if need > to_end { to_end } else { 0 };
        if self.head + pad + need - self.tail > size {
            return false;
        }
        if pad > 0 {
            self.pages.writing(self.head);
            self.write_header(self.head % size, 0, 0, KIND_WRAP);
            self.head += pad;
        }
        let off = self.head % size;
        self.pages.writing(self.head);
        self.write_header(off, len as u32, chan, KIND_MSG);
        let Some(dst) = self.seg.at((off + HDR) as usize, len.max(1)) else {
            return false;
        };
        // SAFETY: `at` checked `len` bytes at dst lie in the mapping (the
        // record does not wrap); src has `len` readable bytes, in another
        // mapping.
        unsafe { std::ptr::copy(src, dst.as_ptr(), len) };
        self.head += need;
        self.msgs += 1;
        let pages = self.pages();
        if pages > self.pages_max {
            self.pages_max = pages;
        }
        true
    }

    /// The oldest message: its channel, its first byte and its length.
    /// The pointer stays valid until the next `push` or `pop`.
    pub(crate) fn front(&mut self) -> Option<(u16, *const u8, usize)> {
        if self.msgs == 0 {
            return None;
        }
        let size = self.limit();
        let (mut len, mut chan, kind) = self.read_header(self.tail % size);
        if kind == KIND_WRAP {
            self.tail += size - self.tail % size;
            (len, chan, _) = self.read_header(0);
        }
        let p = self
            .seg
            .at((self.tail % size + HDR) as usize, (len as usize).max(1))?;
        Some((chan, p.as_ptr().cast_const(), len as usize))
    }

    /// Take the oldest message out (after [`Backlog::front`] found it).
    pub(crate) fn pop(&mut self) {
        if self.front().is_none() {
            return;
        }
        let (len, _, _) = self.read_header(self.tail % self.limit());
        self.tail += record_len(len as usize);
        self.msgs -= 1;
        if self.msgs == 0 {
            self.tail = self.head;
        }
    }

    /// Give back the pages wholly read (every page once empty). Returns
    /// the pages given back.
    ///
    /// Not while the buffer is at least half full: the writer comes back
    /// to the pages behind the reader within half a lap of the ring, and a
    /// page costs microseconds to fault in again and give back (UDM's
    /// Table 5), so a buffer that stays full (a stream that outruns its
    /// reader) keeps its pages, at most its limit, until it drains below
    /// half. A buffer that holds little gives them back behind the
    /// reader, as UDM's, and an empty one holds none.
    pub(crate) fn return_pages(&mut self) -> u64 {
        if self.msgs > 0 && self.head - self.tail >= self.limit() / 2 {
            return 0;
        }
        self.pages.give_back(&self.seg, self.head, self.tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use unet_abi::PAGE;

    /// Messages of many sizes go through a small buffer many times round:
    /// in order, intact, the limit kept, every page given back when empty.
    #[test]
    fn a_small_buffer_wraps_in_order_and_returns_its_pages() {
        let mut b = Backlog::new(1, 4 * PAGE).unwrap();
        let mut next_in = 0u32;
        let mut next_out = 0u32;
        let msg = |i: u32| -> Vec<u8> {
            let len = (i as usize * 37) % 3000 + 1;
            (0..len).map(|k| (k as u32 ^ i) as u8).collect()
        };
        let mut returned = 0;
        for round in 0..200 {
            // Fill until full.
            loop {
                let m = msg(next_in);
                if !b.push((next_in % 7) as u16, m.as_ptr(), m.len()) {
                    break;
                }
                next_in += 1;
            }
            assert!(b.pages() <= 4);
            // Take some (all, every few rounds).
            let take = if round % 5 == 0 { usize::MAX } else { 3 };
            for _ in 0..take {
                let Some((chan, p, len)) = b.front() else {
                    break;
                };
                let m = msg(next_out);
                assert_eq!(chan, (next_out % 7) as u16);
                // SAFETY: front's pointer, len bytes, valid until pop.
                let got = unsafe { std::slice::from_raw_parts(p, len) };
                assert_eq!(got, &m[..], "message {next_out}");
                b.pop();
                next_out += 1;
            }
            returned += b.return_pages();
            if b.is_empty() {
                assert_eq!(b.pages(), 0);
                assert_eq!(b.seg.allocated_bytes().unwrap(), 0);
            }
        }
        assert!(next_out > 500 && returned > 0, "{next_out} {returned}");
    }
}
