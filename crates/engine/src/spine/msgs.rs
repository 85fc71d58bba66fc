//! SPINE's memory: the message pool (one 256-byte slot a message: its
//! header and up to 240 bytes of arguments), the pool of bulk data
//! buffers (reference-counted), the handles that name them, and what an
//! extension keeps past an invocation (charged to it, capped).
//!
//! A handle is `index | generation << 20`, a non-negative `i32` for the
//! Java side. The generation of a slot moves on every time it goes back
//! to its pool, so a stale or forged handle names nothing and every use
//! checks it. A buffer goes back to its pool as soon as nothing holds it:
//! each message that refers to it holds one reference, and each `keep`
//! of an extension one more.
//!
//! Both pools grow to their capacity on demand and then only recycle:
//! the data path allocates nothing once they are warm.

use unet_abi::spine::{AmHeader, AM_ARGS_MAX, AM_BULK};

/// Bits of a handle that hold the slot index.
const INDEX_BITS: u32 = 20;
const INDEX_MASK: u32 = (1 << INDEX_BITS) - 1;
/// Generations wrap within 11 bits, so a handle stays non-negative.
const GEN_MASK: u16 = 0x7FF;

/// Most slots of either pool (what a handle's index can name).
pub(crate) const MAX_SLOTS: usize = 1 << INDEX_BITS;

/// Most messages one extension's handlers may have in flight (sent and
/// not yet run or delivered): a handler that sends more gets `E_LIMIT`,
/// so that one extension cannot take every slot (or, through them, the
/// event queue) from the others and from the hosts.
pub(crate) const EXT_MSGS_MAX: u32 = 1024;

/// The owner of a message no extension is charged for (a host's, the
/// wire's, a peer's, a timer's).
pub(crate) const NO_OWNER: u32 = u32::MAX;

/// A handle: slot index and generation.
#[inline]
pub(crate) fn handle(index: usize, gen: u16) -> u32 {
    index as u32 | (u32::from(gen & GEN_MASK) << INDEX_BITS)
}

#[inline]
fn split(h: u32) -> (usize, u16) {
    ((h & INDEX_MASK) as usize, (h >> INDEX_BITS) as u16)
}

/// The bytes a message's arguments are copied from: a host's or the
/// wire's bytes, or a handler's Java `byte[]` (the same bits as `i8`),
/// copied straight into the message's slot.
pub(crate) trait ArgBytes {
    fn len(&self) -> usize;
    /// Copy into `dst`, which is exactly `self.len()` long.
    fn copy_into(&self, dst: &mut [u8]);
}

impl ArgBytes for [u8] {
    #[inline(always)]
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
    #[inline(always)]
    fn copy_into(&self, dst: &mut [u8]) {
        dst.copy_from_slice(self);
    }
}

impl<const N: usize> ArgBytes for [u8; N] {
    #[inline(always)]
    fn len(&self) -> usize {
        N
    }
    #[inline(always)]
    fn copy_into(&self, dst: &mut [u8]) {
        dst.copy_from_slice(self);
    }
}

impl ArgBytes for [i8] {
    #[inline(always)]
    fn len(&self) -> usize {
        <[i8]>::len(self)
    }
    #[inline(always)]
    fn copy_into(&self, dst: &mut [u8]) {
        for (d, s) in dst.iter_mut().zip(self) {
            *d = *s as u8;
        }
    }
}

/// A message: its header, its arguments, and its bulk buffer's handle
/// (when the header says [`AM_BULK`]; the message holds one reference).
#[derive(Clone, Copy)]
pub(crate) struct Msg {
    pub hdr: AmHeader,
    pub args: [u8; AM_ARGS_MAX],
    pub bulk: Option<u32>,
}

impl Msg {
    /// The arguments in use.
    #[inline]
    pub(crate) fn args(&self) -> &[u8] {
        &self.args[..usize::from(self.hdr.args_len).min(AM_ARGS_MAX)]
    }
}

struct MsgSlot {
    gen: u16,
    live: bool,
    /// The extension slot charged for it, or [`NO_OWNER`].
    owner: u32,
    msg: Msg,
}

/// The pool of message slots.
pub(crate) struct MsgPool {
    slots: Vec<MsgSlot>,
    free: Vec<u32>,
    cap: usize,
    /// Messages in flight by the extension slot charged for them.
    charged: Vec<u32>,
}

impl MsgPool {
    pub(crate) fn new(cap: usize) -> MsgPool {
        MsgPool {
            slots: Vec::new(),
            free: Vec::new(),
            cap: cap.min(MAX_SLOTS),
            charged: Vec::new(),
        }
    }

    /// Messages in flight charged to extension slot `owner`.
    #[inline]
    pub(crate) fn charged(&self, owner: u32) -> u32 {
        self.charged.get(owner as usize).copied().unwrap_or(0)
    }

    /// [`MsgPool::alloc`], charged to extension slot `owner` (if not
    /// [`NO_OWNER`]) until it is freed.
    #[inline]
    pub(crate) fn alloc_charged<A: ArgBytes + ?Sized>(
        &mut self,
        owner: u32,
        hdr: AmHeader,
        args: &A,
        bulk: Option<u32>,
    ) -> Option<u32> {
        self.alloc_for(owner, hdr, args, bulk)
    }

    /// Messages in use.
    pub(crate) fn live(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// A new message with `hdr` and `args` (its `args_len` set from
    /// `args`), holding `bulk` (one reference, given to the message):
    /// `None` when the pool is full or the arguments are too long, and
    /// then the reference stays the caller's.
    #[inline]
    pub(crate) fn alloc<A: ArgBytes + ?Sized>(
        &mut self,
        hdr: AmHeader,
        args: &A,
        bulk: Option<u32>,
    ) -> Option<u32> {
        self.alloc_for(NO_OWNER, hdr, args, bulk)
    }

    /// [`MsgPool::alloc`] for `owner`. Inlined: out of line, the header
    /// its callers build field by field in memory is read back whole, and
    /// the store forwarding fails (about 8 ns a message).
    #[inline(always)]
    fn alloc_for<A: ArgBytes + ?Sized>(
        &mut self,
        owner: u32,
        mut hdr: AmHeader,
        args: &A,
        bulk: Option<u32>,
    ) -> Option<u32> {
        if args.len() > AM_ARGS_MAX {
            return None;
        }
        let idx = match self.free.pop() {
            Some(i) => i as usize,
            None if self.slots.len() < self.cap => {
                self.slots.push(MsgSlot {
                    gen: 0,
                    live: false,
                    owner: NO_OWNER,
                    msg: Msg {
                        hdr: AmHeader::default(),
                        args: [0; AM_ARGS_MAX],
                        bulk: None,
                    },
                });
                self.slots.len() - 1
            }
            None => return None,
        };
        hdr.args_len = args.len() as u16;
        if bulk.is_some() {
            hdr.flags |= AM_BULK;
        } else {
            hdr.flags &= !AM_BULK;
            hdr.bulk_len = 0;
        }
        if owner != NO_OWNER {
            let o = owner as usize;
            if self.charged.len() <= o {
                self.charged.resize(o + 1, 0);
            }
            self.charged[o] += 1;
        }
        let s = &mut self.slots[idx];
        s.live = true;
        s.owner = owner;
        s.msg.hdr = hdr;
        args.copy_into(&mut s.msg.args[..args.len()]);
        s.msg.bulk = bulk;
        Some(handle(idx, s.gen))
    }

    /// The message `h` names, if it is live.
    #[inline]
    pub(crate) fn get(&self, h: u32) -> Option<&Msg> {
        let (i, g) = split(h);
        let s = self.slots.get(i)?;
        (s.live && s.gen == g).then_some(&s.msg)
    }

    /// Free message `h`, dropping its reference to its bulk buffer. False
    /// if `h` names no live message.
    #[inline]
    pub(crate) fn free(&mut self, h: u32, bufs: &mut BufPool) -> bool {
        let (i, g) = split(h);
        let Some(s) = self.slots.get_mut(i) else {
            return false;
        };
        if !s.live || s.gen != g {
            return false;
        }
        s.live = false;
        s.gen = s.gen.wrapping_add(1) & GEN_MASK;
        if s.owner != NO_OWNER {
            if let Some(c) = self.charged.get_mut(s.owner as usize) {
                *c = c.saturating_sub(1);
            }
            s.owner = NO_OWNER;
        }
        if let Some(b) = s.msg.bulk.take() {
            bufs.release(b);
        }
        self.free.push(i as u32);
        true
    }
}

struct BufSlot {
    gen: u16,
    refs: u32,
    data: Vec<u8>,
}

/// The pool of bulk data buffers.
pub(crate) struct BufPool {
    slots: Vec<BufSlot>,
    free: Vec<u32>,
    cap: usize,
    max_len: usize,
}

impl BufPool {
    /// At most `cap` buffers of at most `max_len` bytes each.
    pub(crate) fn new(cap: usize, max_len: usize) -> BufPool {
        BufPool {
            slots: Vec::new(),
            free: Vec::new(),
            cap: cap.min(MAX_SLOTS),
            max_len,
        }
    }

    /// Buffers in use.
    pub(crate) fn live(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// The largest buffer the pool gives.
    pub(crate) fn max_len(&self) -> usize {
        self.max_len
    }

    /// A buffer holding a copy of `data`, with one reference (the
    /// caller's): `None` when the pool is full or `data` too long.
    pub(crate) fn alloc(&mut self, data: &[u8]) -> Option<u32> {
        if data.len() > self.max_len {
            return None;
        }
        let idx = match self.free.pop() {
            Some(i) => i as usize,
            None if self.slots.len() < self.cap => {
                self.slots.push(BufSlot {
                    gen: 0,
                    refs: 0,
                    data: Vec::new(),
                });
                self.slots.len() - 1
            }
            None => return None,
        };
        let s = &mut self.slots[idx];
        s.refs = 1;
        s.data.clear();
        s.data.extend_from_slice(data);
        Some(handle(idx, s.gen))
    }

    #[inline]
    fn slot(&self, h: u32) -> Option<&BufSlot> {
        let (i, g) = split(h);
        let s = self.slots.get(i)?;
        (s.refs > 0 && s.gen == g).then_some(s)
    }

    #[inline]
    fn slot_mut(&mut self, h: u32) -> Option<&mut BufSlot> {
        let (i, g) = split(h);
        let s = self.slots.get_mut(i)?;
        (s.refs > 0 && s.gen == g).then_some(s)
    }

    /// The data of buffer `h`, if it is live.
    #[inline]
    pub(crate) fn data(&self, h: u32) -> Option<&[u8]> {
        self.slot(h).map(|s| &s.data[..])
    }

    /// The data of buffer `h`, writable.
    #[inline]
    pub(crate) fn data_mut(&mut self, h: u32) -> Option<&mut [u8]> {
        self.slot_mut(h).map(|s| &mut s.data[..])
    }

    /// References held on buffer `h` (0: it names nothing).
    pub(crate) fn refs(&self, h: u32) -> u32 {
        self.slot(h).map_or(0, |s| s.refs)
    }

    /// One more reference on `h`. False if it names no live buffer.
    pub(crate) fn retain(&mut self, h: u32) -> bool {
        match self.slot_mut(h) {
            Some(s) => {
                s.refs = s.refs.saturating_add(1);
                true
            }
            None => false,
        }
    }

    /// Drop one reference on `h`; the buffer goes back to the pool when
    /// it was the last. False if `h` names no live buffer.
    pub(crate) fn release(&mut self, h: u32) -> bool {
        let (i, _) = split(h);
        let Some(s) = self.slot_mut(h) else {
            return false;
        };
        s.refs -= 1;
        if s.refs == 0 {
            s.gen = s.gen.wrapping_add(1) & GEN_MASK;
            self.free.push(i as u32);
        }
        true
    }
}

/// Why a `keep` was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeepError {
    /// The handle names no live buffer.
    BadHandle,
    /// The extension keeps as many buffers as it may.
    Limit,
}

/// The buffers one extension keeps past its invocations: one reference
/// each, charged to it, at most `cap`. Each entry remembers the
/// invocation that kept it, so that the keeps of an invocation that was
/// terminated can be undone.
pub(crate) struct KeepSet {
    kept: Vec<(u32, u64)>,
    cap: usize,
}

impl KeepSet {
    pub(crate) fn new(cap: usize) -> KeepSet {
        KeepSet {
            kept: Vec::new(),
            cap,
        }
    }

    /// Buffers kept (references held).
    pub(crate) fn len(&self) -> usize {
        self.kept.len()
    }

    /// Whether the extension keeps `h`.
    pub(crate) fn contains(&self, h: u32) -> bool {
        self.kept.iter().any(|&(k, _)| k == h)
    }

    /// Keep buffer `h` during invocation `inv`: one more reference,
    /// charged.
    pub(crate) fn keep(&mut self, bufs: &mut BufPool, h: u32, inv: u64) -> Result<(), KeepError> {
        if bufs.refs(h) == 0 {
            return Err(KeepError::BadHandle);
        }
        if self.kept.len() >= self.cap {
            return Err(KeepError::Limit);
        }
        bufs.retain(h);
        self.kept.push((h, inv));
        Ok(())
    }

    /// Give back one keep of `h`. False if the extension keeps no `h`.
    pub(crate) fn release(&mut self, bufs: &mut BufPool, h: u32) -> bool {
        match self.kept.iter().rposition(|&(k, _)| k == h) {
            Some(i) => {
                self.kept.swap_remove(i);
                bufs.release(h);
                true
            }
            None => false,
        }
    }

    /// Undo the keeps made during invocation `inv` (it was terminated).
    /// Returns how many were given back.
    pub(crate) fn undo(&mut self, bufs: &mut BufPool, inv: u64) -> usize {
        let before = self.kept.len();
        self.kept.retain(|&(h, i)| {
            if i == inv {
                bufs.release(h);
                false
            } else {
                true
            }
        });
        before - self.kept.len()
    }

    /// Give back every keep (the extension goes). Returns how many.
    pub(crate) fn release_all(&mut self, bufs: &mut BufPool) -> usize {
        let n = self.kept.len();
        for (h, _) in self.kept.drain(..) {
            bufs.release(h);
        }
        n
    }
}

#[cfg(test)]
mod tests;
