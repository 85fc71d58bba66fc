//! The side of a VI the engine carries to another engine: the queues in
//! the VI's segment, posting to them and taking the engine's completions.

use std::sync::atomic::Ordering;

use unet_abi::view::ViView;
use unet_abi::{ViCompl, ViDesc, ViHeader, ViSegDesc, VI_MAX_SEGMENTS};
use unet_sys::{self as sys, Segment};

use crate::shm::Mapped;
use crate::Error;

use super::desc::{Desc, ViQueue};

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

impl EngineSide {
    /// True if queue `q` has room for another descriptor.
    pub(super) fn has_room(&self, q: ViQueue) -> bool {
        let (ring, head) = match q {
            ViQueue::Send => (&self.map.sq, self.sq_head),
            ViQueue::Recv => (&self.map.rq, self.rq_head),
        };
        head - ring.tail().min(head) < self.cap
    }

    /// Write descriptor `d` (made by the VI from `id`'s segments) to the
    /// engine's queue `q`, which has room ([`EngineSide::has_room`]), and
    /// ring the engine.
    pub(super) fn post(&mut self, q: ViQueue, id: u64, d: &Desc) {
        let (ring, head) = match q {
            ViQueue::Send => (&self.map.sq, &mut self.sq_head),
            ViQueue::Recv => (&self.map.rq, &mut self.rq_head),
        };
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
        self.ring();
    }

    /// Take the engine's completions into `done`, in order, and return
    /// the VI's state as the engine sets it (a `ViError` code, 0: none).
    pub(super) fn take_completions(&mut self, done: &mut Vec<(ViQueue, ViCompl)>) -> u32 {
        for (q, ring, tail) in [
            (ViQueue::Send, &self.map.scq, &mut self.scq_tail),
            (ViQueue::Recv, &self.map.rcq, &mut self.rcq_tail),
        ] {
            let head = ring.head();
            // Never more than we posted: a corrupt head is the engine's
            // bug, not ours to trust.
            let from = *tail;
            while *tail < head && head - *tail <= self.cap {
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
        self.header().state.load(Ordering::Acquire)
    }
}
