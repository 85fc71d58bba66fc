//! The pages of a virtual buffer (the UDM paper's section 4.3): a ring in
//! a sparse memory file (`Segment::create_sparse`: address space reserved
//! up front, a page taking memory only once written), whose pages are
//! given back to the system (`fallocate(PUNCH_HOLE)`) once everything in
//! them has been read. UDM's node buffers and the buffered endpoints'
//! (`backlog`) share this bookkeeping.
//!
//! Positions are in bytes, counted from the buffer's creation (they never
//! wrap back): byte `p` lives at `p % len` in the file, page `p / PAGE` at
//! file page `(p / PAGE) % (len / PAGE)`.

use unet_abi::PAGE;
use unet_sys::Segment;

/// Which pages of a virtual buffer may hold memory: those from `lo` (a
/// page by position) up to the writer's head.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ResidentPages {
    lo: u64,
}

impl ResidentPages {
    /// Pages holding memory now (at most the file's), the head at byte
    /// position `head`.
    pub(crate) fn in_use(&self, file_len: usize, head: u64) -> u64 {
        head.div_ceil(PAGE as u64)
            .saturating_sub(self.lo)
            .min((file_len / PAGE) as u64)
    }

    /// The writer is about to write at byte position `pos`.
    pub(crate) fn writing(&mut self, pos: u64) {
        let page = pos / PAGE as u64;
        if page < self.lo {
            self.lo = page;
        }
    }

    /// Everything up to `head` is gone (the buffer was released): no page
    /// holds memory.
    pub(crate) fn forget(&mut self, head: u64) {
        self.lo = head.div_ceil(PAGE as u64);
    }

    /// Give back the pages of `buf` wholly behind the reader's `tail`
    /// (every page once the buffer is empty, `tail == head`). Returns the
    /// pages given back.
    ///
    /// A page behind the tail may share its memory with a live one ahead
    /// (the ring wrapped): only the pages of the last `file_pages` before
    /// the head that are behind the tail may go.
    pub(crate) fn give_back(&mut self, buf: &Segment, head: u64, tail: u64) -> u64 {
        let page = PAGE as u64;
        let end = head.div_ceil(page);
        let keep_from = if tail == head { end } else { tail / page };
        let file_pages = (buf.len() as u64 / page).max(1);
        let from = self.lo.max(end.saturating_sub(file_pages));
        if keep_from <= from {
            if keep_from > self.lo {
                self.lo = keep_from;
            }
            return 0;
        }
        let n = keep_from - from;
        if n >= file_pages {
            let _ = buf.punch_hole(0, buf.len());
        } else {
            let first = from % file_pages;
            let run = n.min(file_pages - first);
            let _ = buf.punch_hole(first as usize * PAGE, run as usize * PAGE);
            if run < n {
                let _ = buf.punch_hole(0, (n - run) as usize * PAGE);
            }
        }
        self.lo = keep_from;
        n.min(file_pages)
    }
}
