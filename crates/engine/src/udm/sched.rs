//! A scheduler's notices and overflow control's advice (the UDM paper's
//! section 4.2): a gang scheduler tells the engine which of a job's nodes
//! it has descheduled and which run again, and hears back which nodes'
//! virtual buffers are near their limit.
//!
//! - **Descheduled**: their input goes to buffered mode at once (the
//!   paper's quantum expiration), each switch counted as
//!   `switch_descheduled`; they are not swept (they do not run), and a
//!   switch by the atomicity timeout is counted by what the scheduler
//!   said, never by reading `/proc`. A node that runs again takes its
//!   buffer first and returns to the fast case by itself once the buffer
//!   is empty, as after any switch.
//! - **Scheduled again**: a node named that has nothing diverted to it
//!   (its mode word reads divert with a count of 0) goes back to the fast
//!   case at once, as it would itself on finding its buffer empty: a
//!   slice starts in the fast case unless something came meanwhile. The
//!   divert rings of every node of the job are drained on the next turn,
//!   so a node starting its slice finds in its buffer what was sent to it
//!   meanwhile, whether or not the engine napped.
//! - **Advice**: the answer to every notice names the nodes whose buffer
//!   holds three quarters of its capacity or more, or holds senders back
//!   (`UdmAdvice::near_full`), each named node counted as
//!   `overflow_advice`. The scheduler polls, in effect, at every switch:
//!   it talks to the engine then anyway, and a switch is the moment it
//!   can act on the advice; an event sent on its own would need the
//!   client library to take replies it did not ask for.

use std::sync::atomic::Ordering;

use unet_abi::udm::*;

use super::timeout::bits;
use super::Job;
use crate::unet::endpoints::ClientId;

impl Job {
    /// The joined nodes the sweep looks over: all but those the job's
    /// scheduler descheduled (they do not run: no message reaches them
    /// but through the engine, which already diverts their input).
    pub(super) fn sweepable(&self) -> u64 {
        self.joined_bits & !self.descheduled
    }

    /// Client `by`'s notice that the nodes in `ranks` are descheduled
    /// (`running` false) or run again. Returns the switches it made.
    pub(crate) fn notice(&mut self, by: ClientId, ranks: u64, running: bool) -> u64 {
        self.sched = Some(by);
        let ranks = ranks & self.ranks();
        let mut switched = 0;
        if running {
            self.descheduled &= !ranks;
            for r in bits(ranks) {
                if self.nodes[r as usize].state != UDM_NODE_JOINED {
                    continue;
                }
                // Only "divert, count 0, not gone": a sender that raised
                // the count first keeps the node buffered (its message is
                // on its way), one that comes after finds the fast case.
                let _ = self.line(r).mode.compare_exchange(
                    UDM_MODE_DIVERT,
                    0,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                );
            }
            // What was diverted meanwhile reaches the buffers on the next
            // turn (the engine may nap): every divert ring of the job.
            self.busy |= self.joined();
            return 0;
        }
        self.descheduled |= ranks;
        for r in bits(ranks) {
            if self.nodes[r as usize].state != UDM_NODE_JOINED {
                continue;
            }
            let before = self
                .line(r)
                .mode
                .fetch_or(UDM_MODE_DIVERT, Ordering::AcqRel);
            if before & (UDM_MODE_DIVERT | UDM_MODE_GONE) == 0 {
                self.nodes[r as usize].count(UdmCounter::SwitchDescheduled, 1);
                switched += 1;
            }
            self.nodes[r as usize].stuck_since = None;
        }
        switched
    }

    /// The nodes whose virtual buffers are near their limit: three
    /// quarters of their capacity or more, or a sender held back for
    /// room. Each counts an `overflow_advice`.
    pub(crate) fn advice(&mut self) -> u64 {
        let cap = self.layout.buffer_cap as u64;
        let size = self.layout.buffer_size;
        let mut near = 0;
        for r in 0..self.nodes.len() {
            // The count of messages on their way or waiting (overflow
            // control's limit), and the bytes the buffer holds.
            let count = self.line(r as u32).mode.load(Ordering::Relaxed) & UDM_MODE_COUNT;
            let n = &mut self.nodes[r];
            if n.state != UDM_NODE_JOINED {
                continue;
            }
            n.refresh_tail();
            if n.held || (n.buf_head - n.buf_tail) * 4 >= size * 3 || count * 4 >= cap * 3 {
                near |= 1 << r;
                n.count(UdmCounter::OverflowAdvice, 1);
            }
        }
        near
    }

    /// Client `ci` closed: if it was the job's scheduler, the job has
    /// none (its nodes are no longer held descheduled; `/proc` tells
    /// again).
    pub(crate) fn scheduler_gone(&mut self, ci: ClientId) {
        if self.sched == Some(ci) {
            self.sched = None;
            self.descheduled = 0;
        }
    }
}
