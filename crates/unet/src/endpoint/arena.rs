//! The send arena of a managed endpoint: the part of the buffer area
//! where `send` copies messages for the engine path, used as a ring, and
//! the space taken back as the engine takes the descriptors.
//!
//! `unsafe` is allowed here for one copy: a message into the buffer area
//! at an offset the arena's own accounting keeps inside it, on the send
//! path, with no second check.

use std::collections::VecDeque;

use unet_abi::{SendDesc, MAX_MESSAGE};

use super::Endpoint;
use crate::{Channel, SendError};

/// Where an endpoint's sends on the engine path are copied: the buffer
/// area from `base` to `region`, used as a ring (`head` and `tail` count
/// bytes ever taken and given back).
#[derive(Default)]
pub(super) struct TxArena {
    /// Bytes of the buffer area used for sends (the receive buffers
    /// follow).
    pub(super) region: u64,
    pub(super) head: u64,
    /// `head` modulo the tx region's span, kept as it goes (a division
    /// per send costs more than the rest of the bookkeeping).
    pub(super) at: u64,
    pub(super) tail: u64,
    /// The sends in the send queue, by position, and where their space
    /// ends.
    pub(super) inflight: VecDeque<(u64, u64)>,
    /// Bytes at the start of the buffer area kept for an inline applet's
    /// doTx (the data of `send` is placed there); the tx allocator starts
    /// after it.
    pub(super) base: u64,
}

impl TxArena {
    /// Take back the space of the messages the engine has taken (the send
    /// queue's tail has passed `done`).
    pub(super) fn reclaim(&mut self, done: u64) {
        while let Some(&(pos, end)) = self.inflight.front() {
            if pos >= done {
                break;
            }
            self.tail = end;
            self.inflight.pop_front();
        }
    }
}

impl Endpoint {
    /// Copy `data` into the arena and push its send descriptor with
    /// `FLAGS` (0, or `SEND_AM` for an active message whose `ch` is the
    /// handler number). Returns the descriptor's queue position.
    pub(crate) fn send_engine<const FLAGS: u16>(
        &mut self,
        ch: Channel,
        data: &[u8],
    ) -> Result<u64, SendError> {
        if !self.managed {
            return Err(SendError::Unmanaged);
        }
        let len = data.len() as u64;
        if len == 0 || len as usize > MAX_MESSAGE {
            return Err(SendError::TooLarge);
        }
        let need = len.div_ceil(64) * 64;
        let span = self.tx.region - self.tx.base;
        if need > span {
            return Err(SendError::TooLarge);
        }
        self.tx.reclaim(self.queues.map.send.tail());
        if self
            .queues
            .send_head
            .wrapping_sub(self.queues.map.send.tail())
            >= self.layout.geometry.send_cap as u64
        {
            return Err(SendError::Full);
        }
        debug_assert_eq!(self.tx.at, self.tx.head % span);
        let mut at = self.tx.at;
        let mut skip = 0;
        if at + need > span {
            skip = span - at;
            at = 0;
        }
        if self.tx.head + skip + need - self.tx.tail > span {
            return Err(SendError::Full);
        }
        self.tx.head += skip + need;
        self.tx.at = if at + need == span { 0 } else { at + need };
        let at = self.tx.base + at;
        // SAFETY: at + len <= tx_region <= buffer area size: inside our
        // mapping. The engine only reads this region after we publish.
        unsafe {
            let dst = self.queues.map.area().as_ptr().add(at as usize);
            std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len());
        }
        self.tx
            .inflight
            .push_back((self.queues.send_head, self.tx.head));
        Ok(self.push_desc(SendDesc {
            offset: at as u32,
            len: len as u32,
            channel: ch.0,
            flags: FLAGS,
            status: 0,
        }))
    }
}
