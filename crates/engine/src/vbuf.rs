//! The pages of a virtual buffer (the UDM paper's section 4.3): a ring in
//! a sparse memory file (`Segment::create_sparse`: address space reserved
//! up front, a page taking memory only once written), whose pages are
//! given back to the system (`fallocate(PUNCH_HOLE)`). The buffered
//! endpoints' (`backlog`) give a page back once everything in it has been
//! read ([`ResidentPages`]); UDM's node buffers keep theirs while in use,
//! start again at their first page when they empty, and give pages back
//! only when idle ([`KeptPages`]).
//!
//! Positions are in bytes, counted from the buffer's creation (they never
//! wrap back): byte `p` lives at `p % len` in the file, page `p / PAGE` at
//! file page `(p / PAGE) % (len / PAGE)`. (A UDM buffer counts them from
//! its base, the position it last started again at its first page.)

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

/// Which pages of a UDM virtual buffer may hold memory: file pages
/// `[from, to)`. Its writer starts again at the first page whenever the
/// buffer is empty (positions relative to that base), so a buffer used
/// again and again writes the pages it already has; they are given back
/// only when it has been idle a while ([`KeptPages::give_back`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KeptPages {
    from: u64,
    to: u64,
}

impl KeptPages {
    /// Pages holding memory now.
    pub(crate) fn in_use(&self) -> u64 {
        self.to - self.from
    }

    /// The buffer is empty and its writer starts again at its first page:
    /// pages kept that do not begin at it are given back (after a partial
    /// give-back only), so that the kept pages stay one run from the first
    /// page. Returns the pages given back.
    pub(crate) fn restart(&mut self, buf: &Segment) -> u64 {
        if self.from == 0 {
            return 0;
        }
        self.give_all(buf)
    }

    /// The writer is about to write at byte position `pos` (relative to
    /// the base).
    pub(crate) fn writing(&mut self, file_len: usize, pos: u64) {
        let pages = (file_len / PAGE).max(1) as u64;
        let page = pos / PAGE as u64;
        if page >= pages {
            // Round the ring again: every page may hold memory.
            self.from = 0;
            self.to = pages;
            return;
        }
        if self.from == self.to {
            self.from = page;
            self.to = page + 1;
            return;
        }
        self.from = self.from.min(page);
        self.to = self.to.max(page + 1);
    }

    /// Give every page back. Returns the pages given back.
    pub(crate) fn give_all(&mut self, buf: &Segment) -> u64 {
        let n = self.in_use();
        if n > 0 {
            let _ = buf.punch_hole(self.from as usize * PAGE, n as usize * PAGE);
        }
        *self = KeptPages::default();
        n
    }

    /// The buffer has been idle a while: give back every page that holds
    /// no message (relative byte positions: the reader at `tail`, the
    /// writer at `head`). Returns the pages given back.
    pub(crate) fn give_back(&mut self, buf: &Segment, head: u64, tail: u64) -> u64 {
        if tail >= head {
            return self.give_all(buf);
        }
        let pages = (buf.len() / PAGE).max(1) as u64;
        let first = tail / PAGE as u64;
        let end = head.div_ceil(PAGE as u64);
        if end > pages {
            // The messages wrap round the file: keep everything.
            return 0;
        }
        let mut n = 0;
        let behind = first.min(self.to);
        if self.from < behind {
            let _ = buf.punch_hole(
                self.from as usize * PAGE,
                (behind - self.from) as usize * PAGE,
            );
            n += behind - self.from;
        }
        let ahead = end.max(self.from);
        if self.to > ahead {
            let _ = buf.punch_hole(ahead as usize * PAGE, (self.to - ahead) as usize * PAGE);
            n += self.to - ahead;
        }
        self.from = self.from.max(first);
        self.to = self.to.min(end).max(self.from);
        n
    }
}
