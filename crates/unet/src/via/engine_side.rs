//! The side of a VI the engine carries to another engine: the queues in
//! the VI's segment, posting to them and taking the engine's completions.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use unet_abi::view::ViView;
use unet_abi::{ViCompl, ViDesc, ViError, ViHeader, ViSegDesc, VI_MAX_SEGMENTS};
use unet_sys::{self as sys, Segment};

use crate::session::Inner;
use crate::shm::Mapped;
use crate::Error;

use super::desc::{PostError, ViCompletion, ViQueue, ViState};
use super::region::ViSeg;
use super::vi_core::{Core, ViPath};

/// The client's side of a VI the engine carries: the queues in the VI's
/// segment (layout in `unet_abi::ViHeader`).
pub(super) struct EngineSide {
    /// The segment and its four queues.
    map: Mapped<ViHeader, ViView>,
    doorbell: sys::EventFd,
    cap: u64,
    sq_head: u64,
    rq_head: u64,
    scq_tail: u64,
    rcq_tail: u64,
}

impl EngineSide {
    pub(super) fn open(seg: Segment, doorbell: sys::EventFd, vi: u32) -> Result<EngineSide, Error> {
        let map = Mapped::vi(seg, vi).map_err(|e| Error::Protocol(format!("VI segment: {e}")))?;
        Ok(EngineSide {
            cap: map.layout.cap as u64,
            map,
            doorbell,
            sq_head: 0,
            rq_head: 0,
            scq_tail: 0,
            rcq_tail: 0,
        })
    }

    pub(super) fn header(&self) -> &ViHeader {
        self.map.header()
    }

    pub(super) fn completions_waiting(&self) -> bool {
        self.map.scq.head() != self.scq_tail
            || self.map.rcq.head() != self.rcq_tail
            || self.header().state.load(Ordering::Acquire) != 0
    }

    /// Ring the engine's doorbell if it sleeps.
    fn ring(&self) {
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.header().engine_armed.swap(0, Ordering::AcqRel) != 0 {
            self.doorbell.notify();
        }
    }
}

impl Core {
    /// Post a descriptor of `segs` to the engine's queue `q`.
    pub(super) fn engine_post(
        &mut self,
        q: ViQueue,
        id: u64,
        segs: &[ViSeg<'_>],
        session: &Arc<Inner>,
    ) -> Result<(), PostError> {
        let ViPath::Engine(e) = &mut self.path else {
            return Ok(());
        };
        let (ring, head) = match q {
            ViQueue::Send => (&e.map.sq, &mut e.sq_head),
            ViQueue::Recv => (&e.map.rq, &mut e.rq_head),
        };
        if *head - ring.tail().min(*head) >= e.cap {
            return Err(PostError::QueueFull);
        }
        let d = match q {
            ViQueue::Send => self.send_posted.push_slot(),
            ViQueue::Recv => self.recv_posted.push_slot(),
        };
        d.fill(id, segs, session, &mut self.held);
        let mut w = ViDesc {
            id,
            ..ViDesc::default()
        };
        for (i, p) in d.pieces().enumerate() {
            w.segs[i] = ViSegDesc {
                handle: p.handle,
                len: p.len as u32,
                offset: p.offset as u64,
            };
            w.nsegs += 1;
        }
        if d.bad {
            // The engine is the judge: it refuses this one (and breaks
            // the VI), as it would a descriptor some other way bad.
            w.nsegs = VI_MAX_SEGMENTS as u32 + 1;
        }
        ring.write(*head, w);
        *head += 1;
        ring.set_head(*head);
        e.ring();
        Ok(())
    }

    /// Take the engine's completions, in order, for the descriptors posted.
    pub(super) fn engine_progress(&mut self) {
        let ViPath::Engine(e) = &mut self.path else {
            return;
        };
        let mut done: Vec<(ViQueue, ViCompl)> = Vec::new();
        for (q, ring, tail) in [
            (ViQueue::Send, &e.map.scq, &mut e.scq_tail),
            (ViQueue::Recv, &e.map.rcq, &mut e.rcq_tail),
        ] {
            let head = ring.head();
            // Never more than we posted: a corrupt head is the engine's
            // bug, not ours to trust.
            let from = *tail;
            while *tail < head && head - *tail <= e.cap {
                done.push((q, ring.read(*tail)));
                *tail += 1;
            }
            // Written only when it moved: the engine reads this line, and
            // a client polling in a loop would take it from the engine's
            // core at every poll.
            if *tail != from {
                ring.set_tail(*tail);
            }
        }
        let state = e.header().state.load(Ordering::Acquire);
        for (q, c) in done {
            let Some(id) = self.retire(q) else {
                continue;
            };
            let status = if c.status == 0 {
                Ok(c.len as usize)
            } else {
                Err(ViError::from_u32(c.status.unsigned_abs()).unwrap_or(ViError::Broken))
            };
            match q {
                ViQueue::Send => {
                    if status.is_ok() {
                        self.stats.tx_msgs += 1;
                        self.stats.tx_bytes += c.len as u64;
                    }
                    self.complete_send(ViCompletion { id, status })
                }
                ViQueue::Recv => {
                    if status.is_ok() {
                        self.stats.rx_msgs += 1;
                        self.stats.rx_bytes += c.len as u64;
                    }
                    self.complete_recv(ViCompletion { id, status })
                }
            }
        }
        if let (Some(e), ViState::Connected) = (ViError::from_u32(state), self.state) {
            self.state = ViState::Error(e);
        }
    }
}
