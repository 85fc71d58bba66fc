//! Fragmentation of messages into Data frames, and their reassembly.
//!
//! Sending: [`fragments`] cuts a message into `(index, offset, len)` pieces
//! of one stride; [`SendBatch::push_message`](super::SendBatch::push_message)
//! uses it to write the datagrams straight into the batch, with no
//! allocation per message.
//!
//! Receiving: [`Reassembler::push`] takes each checked Data frame. A message
//! of one fragment takes a fast path: no copy, no map lookup, the payload
//! slice of the datagram comes back as [`Message::Borrowed`]. Fragments of a
//! larger message are copied into one buffer allocated (or taken from a small
//! pool) at the first fragment seen; the finished message comes back as
//! [`Message::Owned`], a `Vec<u8>` of exactly `msg_len` bytes, which the
//! engine may hand back with [`Reassembler::recycle`] once copied out.
//!
//! Memory is bounded by [`ReassemblyConfig::memory_budget`] (bytes of message
//! buffers in flight) and [`ReassemblyConfig::max_in_flight`]. An incomplete
//! message that received no fragment for [`ReassemblyConfig::timeout_ns`] is
//! evicted by [`Reassembler::expire`] and counted as
//! [`WireDrop::ReassemblyTimeout`]. Time is a `u64` of nanoseconds passed in
//! by the caller, so tests are deterministic.

use std::collections::HashMap;
use std::net::SocketAddr;

use super::frame::{Data, MAX_MESSAGE};
use super::{WireDrop, WireStats};

/// One piece of a message: fragment `index` covers
/// `offset .. offset + len` of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// Fragment index.
    pub index: u16,
    /// Number of fragments of the message.
    pub count: u16,
    /// Offset in the message.
    pub offset: u32,
    /// Number of bytes.
    pub len: u32,
}

/// Why a message cannot be cut into fragments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FragmentError {
    /// The message is longer than [`MAX_MESSAGE`].
    MessageTooLarge,
    /// The stride is 0, or so small that the message needs more than
    /// `u16::MAX` fragments.
    StrideTooSmall,
}

/// Number of fragments of a `msg_len`-byte message at `stride` bytes per
/// fragment (1 for an empty message).
pub fn fragment_count(msg_len: usize, stride: usize) -> Result<u16, FragmentError> {
    if msg_len > MAX_MESSAGE {
        return Err(FragmentError::MessageTooLarge);
    }
    if stride == 0 {
        return Err(FragmentError::StrideTooSmall);
    }
    let n = msg_len.div_ceil(stride).max(1);
    u16::try_from(n).map_err(|_| FragmentError::StrideTooSmall)
}

/// Iterator over the pieces of a message; see [`fragments`].
#[derive(Debug, Clone)]
pub struct Fragments {
    msg_len: u32,
    stride: u32,
    count: u16,
    next: u32,
}

impl Iterator for Fragments {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        if self.next >= u32::from(self.count) {
            return None;
        }
        let index = self.next;
        self.next += 1;
        let offset = index * self.stride;
        let len = self.stride.min(self.msg_len - offset);
        Some(Piece {
            index: index as u16,
            count: self.count,
            offset,
            len,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (u32::from(self.count) - self.next) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Fragments {}

/// Cuts a `msg_len`-byte message into pieces of `stride` bytes (the last one
/// shorter), following the placement rule of the frame format. An empty
/// message is one piece of 0 bytes.
pub fn fragments(msg_len: usize, stride: usize) -> Result<Fragments, FragmentError> {
    let count = fragment_count(msg_len, stride)?;
    Ok(Fragments {
        msg_len: msg_len as u32,
        // A stride beyond the message is the message length (one fragment).
        stride: stride.min(MAX_MESSAGE) as u32,
        count,
        next: 0,
    })
}

/// Limits of a [`Reassembler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReassemblyConfig {
    /// An incomplete message with no new fragment for this long is evicted
    /// (default 100 ms).
    pub timeout_ns: u64,
    /// Bytes of message buffers held for incomplete messages, pool included
    /// (default 64 MiB).
    pub memory_budget: usize,
    /// Incomplete messages held at once (default 1024).
    pub max_in_flight: usize,
}

impl Default for ReassemblyConfig {
    fn default() -> Self {
        ReassemblyConfig {
            timeout_ns: 100_000_000,
            memory_budget: 64 << 20,
            max_in_flight: 1024,
        }
    }
}

/// A complete message handed back by [`Reassembler::push`].
#[derive(Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// A one-fragment message: the payload of the datagram itself.
    Borrowed(&'a [u8]),
    /// A reassembled message, exactly `msg_len` bytes long.
    Owned(Vec<u8>),
}

impl Message<'_> {
    /// The bytes of the message.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Message::Borrowed(s) => s,
            Message::Owned(v) => v,
        }
    }
}

/// Identifies one message in reassembly. The sender's engine incarnation is
/// part of the key so that a restarted peer's new messages never mix with
/// fragments of its old ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    src: SocketAddr,
    src_engine: u64,
    dst_endpoint: u32,
    dst_channel: u16,
    msg_id: u32,
}

struct Partial {
    buf: Vec<u8>,
    /// One bit per fragment index.
    seen: Vec<u64>,
    received: u16,
    count: u16,
    stride: u32,
    last_ns: u64,
}

impl Partial {
    /// Stores one checked fragment. `Ok(true)` when the message is complete.
    fn add(&mut self, d: &Data<'_>, now_ns: u64) -> Result<bool, WireDrop> {
        if self.count != d.frag_count
            || self.stride != d.stride()
            || self.buf.len() != d.msg_len as usize
        {
            return Err(WireDrop::Inconsistent);
        }
        let i = usize::from(d.frag_index);
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        if self.seen[word] & bit != 0 {
            return Err(WireDrop::DuplicateFragment);
        }
        self.seen[word] |= bit;
        self.received += 1;
        self.last_ns = now_ns;
        let off = d.frag_offset as usize;
        self.buf[off..off + d.payload.len()].copy_from_slice(d.payload);
        Ok(self.received == self.count)
    }
}

/// One fragment of a VI's message, copied out of its datagram (parsed
/// and checked on its own, see [`Data::check`]) for the VI to reassemble:
/// a VI keeps the fragments of the messages inside its window until they
/// are complete, with no timeout, and tells its sender which it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FragIn {
    /// Fragment index.
    pub index: u16,
    /// Fragments of the message (at least 2).
    pub count: u16,
    /// Length of the whole message.
    pub msg_len: u32,
    /// Offset of this fragment in the message.
    pub offset: u32,
    /// The sender's stride ([`Data::stride`]).
    pub stride: u32,
    /// The bytes.
    pub payload: Vec<u8>,
}

impl FragIn {
    /// The fragment `d` carries, if it is one of several and checks.
    pub fn of(d: &Data<'_>) -> Option<FragIn> {
        (d.frag_count > 1 && d.check().is_ok()).then(|| FragIn {
            index: d.frag_index,
            count: d.frag_count,
            msg_len: d.msg_len,
            offset: d.frag_offset,
            stride: d.stride(),
            payload: d.payload.to_vec(),
        })
    }
}

/// A VI's message in reassembly: its buffer and the fragments it holds.
#[derive(Debug)]
pub struct FragBuf {
    buf: Vec<u8>,
    seen: Vec<u64>,
    received: u16,
    count: u16,
    stride: u32,
    /// The highest fragment index held.
    top: u16,
}

impl FragBuf {
    /// A buffer for the message `f` is a fragment of (`f` not stored yet).
    /// Its memory is [`FragBuf::bytes`].
    pub fn new(f: &FragIn) -> FragBuf {
        FragBuf {
            buf: vec![0; f.msg_len as usize],
            seen: vec![0; usize::from(f.count).div_ceil(64)],
            received: 0,
            count: f.count,
            stride: f.stride,
            top: 0,
        }
    }

    /// A fragment is missing before one held: lost (or reordered).
    pub fn has_hole(&self) -> bool {
        self.received > 0 && self.first_missing() < self.top
    }

    /// Bytes a buffer for the message of `f` takes.
    pub fn bytes_for(f: &FragIn) -> usize {
        f.msg_len as usize + usize::from(f.count).div_ceil(64) * 8
    }

    /// Bytes it takes.
    pub fn bytes(&self) -> usize {
        self.buf.len() + self.seen.len() * 8
    }

    /// Stores `f`: `Ok(true)` when the message is complete; a duplicate
    /// or a fragment that does not agree with the others is refused.
    pub fn add(&mut self, f: &FragIn) -> Result<bool, WireDrop> {
        if self.count != f.count
            || self.stride != f.stride
            || self.buf.len() != f.msg_len as usize
            || f.index >= f.count
        {
            return Err(WireDrop::Inconsistent);
        }
        let off = f.offset as usize;
        let Some(dst) = self.buf.get_mut(off..off + f.payload.len()) else {
            return Err(WireDrop::Inconsistent);
        };
        let i = usize::from(f.index);
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        if self.seen[word] & bit != 0 {
            return Err(WireDrop::DuplicateFragment);
        }
        dst.copy_from_slice(&f.payload);
        self.seen[word] |= bit;
        self.received += 1;
        self.top = self.top.max(f.index);
        Ok(self.received == self.count)
    }

    /// The first fragment not held yet (`count` when complete).
    pub fn first_missing(&self) -> u16 {
        for (w, &bits) in self.seen.iter().enumerate() {
            if bits != u64::MAX {
                let i = w * 64 + bits.trailing_ones() as usize;
                return (i as u16).min(self.count);
            }
        }
        self.count
    }

    /// The fragments held from `base` on: bit `i` of word `w` for
    /// fragment `base + 64 * w + i`.
    pub fn held_from<const W: usize>(&self, base: u16) -> [u64; W] {
        let mut out = [0u64; W];
        for (k, o) in out.iter_mut().enumerate() {
            for b in 0..64 {
                let i = usize::from(base) + 64 * k + b;
                if i >= usize::from(self.count) {
                    return out;
                }
                if self.seen[i / 64] & (1 << (i % 64)) != 0 {
                    *o |= 1 << b;
                }
            }
        }
        out
    }

    /// The message, once complete.
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }
}

/// Number of recently completed messages remembered, so that a late
/// duplicate fragment of a finished message is counted as a duplicate
/// instead of opening an entry that can only time out.
const RECENT: usize = 64;
/// Buffers kept by [`Reassembler::recycle`].
const POOL: usize = 4;

/// Reassembles fragmented messages; see the module doc.
pub struct Reassembler {
    cfg: ReassemblyConfig,
    partial: HashMap<Key, Partial>,
    /// Bytes of `buf` capacity held by `partial` and `pool`.
    held: usize,
    pool: Vec<Vec<u8>>,
    recent: [Option<Key>; RECENT],
    recent_next: usize,
    /// A lower bound of `last_ns` over `partial`: nothing can expire before
    /// `earliest_ns + timeout_ns`.
    earliest_ns: u64,
    /// Counters: `messages_reassembled` and the reassembly drop reasons.
    pub stats: WireStats,
}

impl Reassembler {
    /// A reassembler with these limits.
    pub fn new(cfg: ReassemblyConfig) -> Self {
        Reassembler {
            cfg,
            partial: HashMap::new(),
            held: 0,
            pool: Vec::new(),
            recent: [None; RECENT],
            recent_next: 0,
            earliest_ns: 0,
            stats: WireStats::default(),
        }
    }

    /// The limits in force.
    pub fn config(&self) -> &ReassemblyConfig {
        &self.cfg
    }

    /// Incomplete messages held.
    pub fn in_flight(&self) -> usize {
        self.partial.len()
    }

    /// Bytes of message buffers held (incomplete messages and pool).
    pub fn memory_held(&self) -> usize {
        self.held
    }

    /// Takes one checked Data frame (from [`Frame::parse`](super::Frame::parse),
    /// after the engine checked its endpoint, channel and token) that came
    /// from `src`, sent by engine incarnation `src_engine`, at time `now_ns`.
    ///
    /// Returns `Ok(Some(message))` when this fragment completes a message,
    /// `Ok(None)` when it was stored, and `Err(reason)` when it was dropped
    /// (already counted in [`Reassembler::stats`]).
    ///
    /// The last 64 completed multi-fragment messages are remembered (a VI's
    /// excepted, see [`Data::is_vi`](super::Data::is_vi)), so a late
    /// duplicate of one of their fragments is counted as a duplicate
    /// rather than opening an entry that can only time out. Senders must
    /// therefore not reuse a `msg_id` on a channel right away (a per-channel
    /// sequence number, as the frame format asks, never does). One-fragment
    /// messages keep no state: their duplicates are delivered again.
    pub fn push<'a>(
        &mut self,
        src: SocketAddr,
        src_engine: u64,
        d: &Data<'a>,
        now_ns: u64,
    ) -> Result<Option<Message<'a>>, WireDrop> {
        if d.frag_count == 1 {
            if d.frag_index != 0 || d.frag_offset != 0 || d.payload.len() != d.msg_len as usize {
                return Err(self.drop(WireDrop::BadLength));
            }
            self.stats.messages_reassembled += 1;
            return Ok(Some(Message::Borrowed(d.payload)));
        }
        // Re-check the placement rule: `push` accepts any `Data`, not only
        // parsed ones, and must never index out of bounds.
        if d.check().is_err() {
            return Err(self.drop(WireDrop::BadLength));
        }
        let key = Key {
            src,
            src_engine,
            dst_endpoint: d.dst_endpoint,
            dst_channel: d.dst_channel,
            msg_id: d.msg_id,
        };
        // One hash lookup for every fragment but the first and the last.
        if let Some(p) = self.partial.get_mut(&key) {
            match p.add(d, now_ns) {
                Err(why) => return Err(self.drop(why)),
                Ok(false) => return Ok(None),
                Ok(true) => {}
            }
        } else {
            // A VI's messages are exempt (a UDM link's are the only ones
            // that come here; a VI reassembles its own, see FragBuf): its
            // receiver drops duplicates by sequence number, and its sender
            // retransmits a message whole after the receiver may have
            // reassembled and then discarded it, out of order.
            if !d.is_vi() && self.recent.contains(&Some(key)) {
                return Err(self.drop(WireDrop::DuplicateFragment));
            }
            self.expire(now_ns);
            if self.partial.len() >= self.cfg.max_in_flight {
                return Err(self.drop(WireDrop::InFlightLimit));
            }
            let Some(buf) = self.take_buffer(d.msg_len as usize) else {
                return Err(self.drop(WireDrop::MemoryBudget));
            };
            let mut p = Partial {
                buf,
                seen: vec![0; usize::from(d.frag_count).div_ceil(64)],
                received: 0,
                count: d.frag_count,
                stride: d.stride(),
                last_ns: now_ns,
            };
            // Cannot fail or complete: the entry was made from this fragment,
            // and it has at least 2 fragments.
            let _ = p.add(d, now_ns);
            if self.partial.is_empty() {
                self.earliest_ns = now_ns;
            } else {
                self.earliest_ns = self.earliest_ns.min(now_ns);
            }
            self.partial.insert(key, p);
            return Ok(None);
        }
        let Some(done) = self.partial.remove(&key) else {
            return Err(self.drop(WireDrop::Inconsistent));
        };
        self.held -= done.buf.capacity();
        if !d.is_vi() {
            self.recent[self.recent_next] = Some(key);
            self.recent_next = (self.recent_next + 1) % RECENT;
        }
        self.stats.messages_reassembled += 1;
        Ok(Some(Message::Owned(done.buf)))
    }

    /// Evicts every incomplete message that got no fragment since
    /// `now_ns - timeout_ns`, counting each as
    /// [`WireDrop::ReassemblyTimeout`]. Returns how many were evicted. Cheap
    /// enough to call on every turn of the engine loop: a comparison unless
    /// something may have expired, then one pass over the held entries.
    /// [`Reassembler::next_deadline`] says when to call it next.
    pub fn expire(&mut self, now_ns: u64) -> usize {
        let timeout = self.cfg.timeout_ns;
        if self.partial.is_empty() || now_ns.saturating_sub(self.earliest_ns) < timeout {
            return 0;
        }
        let before = self.partial.len();
        let mut freed = 0;
        let mut earliest = u64::MAX;
        self.partial.retain(|_, p| {
            let keep = now_ns.saturating_sub(p.last_ns) < timeout;
            if keep {
                earliest = earliest.min(p.last_ns);
            } else {
                freed += p.buf.capacity();
            }
            keep
        });
        self.earliest_ns = earliest;
        self.held -= freed;
        let evicted = before - self.partial.len();
        self.stats.drops[WireDrop::ReassemblyTimeout as usize] += evicted as u64;
        evicted
    }

    /// The time after which [`Reassembler::expire`] may evict something, or
    /// `None` when no message is incomplete (a hint for the engine's timer).
    pub fn next_deadline(&self) -> Option<u64> {
        if self.partial.is_empty() {
            None
        } else {
            Some(self.earliest_ns.saturating_add(self.cfg.timeout_ns))
        }
    }

    /// Hands back the buffer of a [`Message::Owned`] once its bytes were
    /// copied out, so the next large message reuses it. Keeps a few buffers
    /// within the memory budget; frees the rest.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if self.pool.len() < POOL && self.held + buf.capacity() <= self.cfg.memory_budget {
            self.held += buf.capacity();
            self.pool.push(buf);
        }
    }

    /// A buffer of `len` bytes counted in `held`, from the pool or new, or
    /// `None` over budget.
    ///
    /// A pooled buffer is not cleared: it may hold bytes of an earlier
    /// message. That is never visible, because a message is handed back only
    /// once every fragment arrived, and its fragments (distinct indices, one
    /// stride, checked lengths) cover every byte of it exactly once.
    fn take_buffer(&mut self, len: usize) -> Option<Vec<u8>> {
        if let Some(i) = self.pool.iter().position(|b| b.capacity() >= len) {
            let mut b = self.pool.swap_remove(i);
            if b.len() >= len {
                b.truncate(len);
            } else {
                b.resize(len, 0);
            }
            return Some(b);
        }
        // Free pooled buffers that are too small before growing.
        while self.held + len > self.cfg.memory_budget {
            let b = self.pool.pop()?;
            self.held -= b.capacity();
        }
        let b = vec![0u8; len];
        self.held += b.capacity();
        Some(b)
    }

    fn drop(&mut self, why: WireDrop) -> WireDrop {
        self.stats.count_drop(why);
        why
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::frame::{Body, Frame, DATA_HEADER_LEN};
    use crate::wire::testutil::{pattern, XorShift};

    const SRC: &str = "10.0.0.1:7000";

    fn src() -> SocketAddr {
        SRC.parse().unwrap()
    }

    /// Emits every fragment of `msg` as a datagram, like the send path.
    fn datagrams(msg: &[u8], stride: usize, msg_id: u32) -> Vec<Vec<u8>> {
        fragments(msg.len(), stride)
            .unwrap()
            .map(|p| {
                let f = Frame {
                    src_engine: 9,
                    body: Body::Data(Data {
                        dst_endpoint: 1,
                        dst_channel: 2,
                        flags: 0,
                        token: 3,
                        msg_id,
                        frag_index: p.index,
                        frag_count: p.count,
                        msg_len: msg.len() as u32,
                        frag_offset: p.offset,
                        payload: &msg[p.offset as usize..(p.offset + p.len) as usize],
                        ack: None,
                    }),
                };
                let mut b = vec![0u8; f.len()];
                f.emit(&mut b).unwrap();
                b
            })
            .collect()
    }

    fn feed(r: &mut Reassembler, dgram: &[u8], now: u64) -> Result<Option<Vec<u8>>, WireDrop> {
        let f = Frame::parse(dgram).unwrap();
        let Body::Data(d) = f.body else {
            panic!("not data")
        };
        r.push(src(), f.src_engine, &d, now)
            .map(|m| m.map(|m| m.as_slice().to_vec()))
    }

    #[test]
    fn fragment_counts_at_the_edges() {
        let s = 1472 - DATA_HEADER_LEN;
        for (len, n) in [
            (0, 1),
            (1, 1),
            (s - 1, 1),
            (s, 1),
            (s + 1, 2),
            (MAX_MESSAGE, 737),
        ] {
            let pieces: Vec<_> = fragments(len, s).unwrap().collect();
            assert_eq!(pieces.len(), n, "len {len}");
            assert_eq!(pieces.iter().map(|p| p.len as usize).sum::<usize>(), len);
            assert!(pieces.iter().all(|p| p.count as usize == n));
        }
        assert_eq!(
            fragments(MAX_MESSAGE + 1, s).err(),
            Some(FragmentError::MessageTooLarge)
        );
        assert_eq!(fragments(10, 0).err(), Some(FragmentError::StrideTooSmall));
        // 1 MiB needs a stride of at least 17 to fit in u16::MAX fragments.
        assert_eq!(
            fragments(MAX_MESSAGE, 16).err(),
            Some(FragmentError::StrideTooSmall)
        );
        assert_eq!(fragments(MAX_MESSAGE, 17).unwrap().len(), 61681);
        let last = fragments(MAX_MESSAGE, 17).unwrap().last().unwrap();
        assert_eq!((last.offset + last.len) as usize, MAX_MESSAGE);
    }

    fn reassemble_in(order: &mut dyn FnMut(&mut Vec<Vec<u8>>), len: usize, stride: usize) {
        let msg = pattern(len, len as u64);
        let mut d = datagrams(&msg, stride, 5);
        let n = d.len();
        order(&mut d);
        let mut r = Reassembler::new(ReassemblyConfig::default());
        let mut out = None;
        for (i, g) in d.iter().enumerate() {
            let got = feed(&mut r, g, 0).unwrap();
            if i + 1 < n {
                assert!(got.is_none(), "completed early at {i}/{n}");
            } else {
                out = got;
            }
        }
        assert_eq!(out.as_deref(), Some(&msg[..]), "len {len}");
        assert_eq!(r.in_flight(), 0);
        assert_eq!(r.memory_held(), 0);
        assert_eq!(r.stats.messages_reassembled, 1);
        assert_eq!(r.stats.total_drops(), 0);
    }

    #[test]
    fn reassembly_in_order_reversed_and_shuffled() {
        let s = 1472 - DATA_HEADER_LEN;
        let mut rng = XorShift::new(0x5eed);
        for len in [0, 1, s - 1, s, s + 1, 3 * s, 3 * s + 7, MAX_MESSAGE] {
            reassemble_in(&mut |_| {}, len, s);
            reassemble_in(&mut |d| d.reverse(), len, s);
            reassemble_in(&mut |d| rng.shuffle(d), len, s);
        }
    }

    #[test]
    fn single_fragment_is_borrowed_without_state() {
        let msg = b"tiny";
        let d = datagrams(msg, 1428, 1);
        let f = Frame::parse(&d[0]).unwrap();
        let Body::Data(data) = f.body else {
            unreachable!()
        };
        let mut r = Reassembler::new(ReassemblyConfig::default());
        match r.push(src(), 9, &data, 0) {
            Ok(Some(Message::Borrowed(p))) => {
                assert_eq!(p, msg);
                // The slice points into the datagram itself: no copy.
                assert_eq!(p.as_ptr(), d[0][DATA_HEADER_LEN..].as_ptr());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(r.in_flight(), 0);
    }

    #[test]
    fn duplicates_are_counted_and_ignored() {
        let msg = pattern(5000, 1);
        let d = datagrams(&msg, 1000, 7);
        let mut r = Reassembler::new(ReassemblyConfig::default());
        assert_eq!(feed(&mut r, &d[0], 0), Ok(None));
        assert_eq!(feed(&mut r, &d[0], 0), Err(WireDrop::DuplicateFragment));
        for g in &d[1..4] {
            assert_eq!(feed(&mut r, g, 0), Ok(None));
        }
        assert_eq!(feed(&mut r, &d[2], 0), Err(WireDrop::DuplicateFragment));
        assert_eq!(feed(&mut r, &d[4], 0), Ok(Some(msg.clone())));
        // A late duplicate of a finished message does not open a new entry.
        assert_eq!(feed(&mut r, &d[1], 0), Err(WireDrop::DuplicateFragment));
        assert_eq!(r.in_flight(), 0);
        assert_eq!(r.stats.drops[WireDrop::DuplicateFragment as usize], 3);
        assert_eq!(r.stats.messages_reassembled, 1);
    }

    #[test]
    fn lost_fragment_times_out_and_is_counted() {
        let cfg = ReassemblyConfig::default();
        let mut r = Reassembler::new(cfg);
        let a = pattern(3000, 2);
        let b = pattern(3000, 3);
        let da = datagrams(&a, 1000, 1);
        let db = datagrams(&b, 1000, 2);
        // Message 1 loses its middle fragment; message 2 (newer) completes.
        assert_eq!(feed(&mut r, &da[0], 0), Ok(None));
        assert_eq!(feed(&mut r, &da[2], 10), Ok(None));
        for g in &db[..2] {
            assert_eq!(feed(&mut r, g, 20), Ok(None));
        }
        assert_eq!(feed(&mut r, &db[2], 30), Ok(Some(b.clone())));
        // The older incomplete one is kept until its timeout (reordering).
        assert_eq!(r.in_flight(), 1);
        assert_eq!(r.expire(10 + cfg.timeout_ns - 1), 0);
        assert_eq!(r.in_flight(), 1);
        assert_eq!(r.expire(10 + cfg.timeout_ns), 1);
        assert_eq!(r.in_flight(), 0);
        assert_eq!(r.memory_held(), 0);
        assert_eq!(r.stats.drops[WireDrop::ReassemblyTimeout as usize], 1);
        // The missing fragment arriving late starts an entry that also expires.
        assert_eq!(feed(&mut r, &da[1], 2 * cfg.timeout_ns), Ok(None));
        assert_eq!(r.expire(3 * cfg.timeout_ns), 1);
        assert_eq!(r.stats.drops[WireDrop::ReassemblyTimeout as usize], 2);
    }

    #[test]
    fn memory_budget_and_in_flight_limit() {
        let cfg = ReassemblyConfig {
            timeout_ns: 1000,
            memory_budget: 10_000,
            max_in_flight: 3,
        };
        let mut r = Reassembler::new(cfg);
        let big = pattern(6000, 4);
        let d1 = datagrams(&big, 1000, 1);
        let d2 = datagrams(&big, 1000, 2);
        assert_eq!(feed(&mut r, &d1[0], 0), Ok(None));
        assert_eq!(feed(&mut r, &d2[0], 0), Err(WireDrop::MemoryBudget));
        assert!(r.memory_held() <= cfg.memory_budget);
        // Small messages still fit, up to the in-flight limit.
        let small = pattern(1500, 5);
        for id in 10..12 {
            assert_eq!(feed(&mut r, &datagrams(&small, 1000, id)[0], 0), Ok(None));
        }
        assert_eq!(
            feed(&mut r, &datagrams(&small, 1000, 12)[0], 0),
            Err(WireDrop::InFlightLimit)
        );
        // After the timeout the space is free again; the new message fits.
        assert_eq!(feed(&mut r, &d2[0], 1000), Ok(None));
        assert_eq!(r.stats.drops[WireDrop::ReassemblyTimeout as usize], 3);
        for g in &d2[1..5] {
            assert_eq!(feed(&mut r, g, 1001), Ok(None));
        }
        let done = feed(&mut r, &d2[5], 1002).unwrap().unwrap();
        assert_eq!(done, big);
        assert_eq!(r.stats.drops[WireDrop::MemoryBudget as usize], 1);
        assert_eq!(r.stats.drops[WireDrop::InFlightLimit as usize], 1);
    }

    #[test]
    fn inconsistent_fragments_are_dropped() {
        let mut r = Reassembler::new(ReassemblyConfig::default());
        let msg = pattern(3000, 6);
        let a = datagrams(&msg, 1000, 1);
        assert_eq!(feed(&mut r, &a[0], 0), Ok(None));
        // Same msg_id, another stride (overlapping bytes): dropped.
        let b = datagrams(&msg, 750, 1);
        assert_eq!(feed(&mut r, &b[1], 0), Err(WireDrop::Inconsistent));
        // Same msg_id, another length.
        let c = datagrams(&pattern(2500, 6), 1000, 1);
        assert_eq!(feed(&mut r, &c[2], 0), Err(WireDrop::Inconsistent));
        // The message still completes from its own fragments, intact.
        assert_eq!(feed(&mut r, &a[1], 0), Ok(None));
        assert_eq!(feed(&mut r, &a[2], 0), Ok(Some(msg)));
        assert_eq!(r.stats.drops[WireDrop::Inconsistent as usize], 2);
    }

    #[test]
    fn unchecked_data_is_rejected_not_panicked_on() {
        let mut r = Reassembler::new(ReassemblyConfig::default());
        let bad = Data {
            dst_endpoint: 0,
            dst_channel: 0,
            flags: 0,
            token: 0,
            msg_id: 0,
            frag_index: 1,
            frag_count: 2,
            msg_len: 10,
            frag_offset: 9,
            payload: &[0; 5],
            ack: None,
        };
        assert_eq!(r.push(src(), 0, &bad, 0), Err(WireDrop::BadLength));
        let one = Data {
            frag_index: 0,
            frag_count: 1,
            frag_offset: 0,
            ..bad
        };
        assert_eq!(r.push(src(), 0, &one, 0), Err(WireDrop::BadLength));
    }

    #[test]
    fn recycled_buffers_are_reused_and_budgeted() {
        let mut r = Reassembler::new(ReassemblyConfig::default());
        let msg = pattern(4000, 8);
        let d = datagrams(&msg, 1000, 1);
        let mut last = None;
        for g in &d {
            last = feed(&mut r, g, 0).unwrap();
        }
        let v = last.unwrap();
        let ptr = v.as_ptr();
        r.recycle(v);
        assert!(r.memory_held() >= 4000);
        let d2 = datagrams(&pattern(3000, 9), 1000, 2);
        let f = Frame::parse(&d2[0]).unwrap();
        let Body::Data(x) = f.body else {
            unreachable!()
        };
        assert_eq!(r.push(src(), 9, &x, 0), Ok(None));
        let mut out = None;
        for g in &d2[1..] {
            let f = Frame::parse(g).unwrap();
            let Body::Data(x) = f.body else {
                unreachable!()
            };
            if let Some(Message::Owned(v)) = r.push(src(), 9, &x, 0).unwrap() {
                out = Some(v);
            }
        }
        let out = out.unwrap();
        assert_eq!(out.as_ptr(), ptr, "pooled buffer reused");
        assert_eq!(out, pattern(3000, 9));
    }
}
