//! The data path of a local VI: sends copied into (or referenced from)
//! the ring shared with the peer, and messages placed from the ring into
//! posted receives.

use std::sync::Arc;

use unet_abi::{Reliability, ViError, VI_MAX_SEGMENTS, VI_MAX_TRANSFER, VI_REF_SEGMENT};
use unet_control::{Reply, Request};
use unet_sys::Segment;

use crate::direct::{DirectRecv, DirectSendError};
use crate::session::Inner;
use crate::shm::Bytes;

use super::desc::{
    grant, pull_into, pull_min, Done, PullError, Unplaced, ViCompletion, ViQueue, ViState,
    PEER_REGIONS_MAX,
};
use super::region::ViSeg;
use super::vi_core::{Core, ViPath};

impl Core {
    #[inline(never)]
    pub(super) fn progress_send_direct(&mut self) {
        while let Some(d) = self.send_posted.front() {
            if d.bad || d.total > VI_MAX_TRANSFER {
                self.break_with(ViError::BadDescriptor);
                return;
            }
            if d.total >= pull_min() {
                match self.send_pulled() {
                    Some(true) => continue,
                    Some(false) => break,
                    // Not granted: copied into the ring below.
                    None => {}
                }
                if !self.connected() {
                    return;
                }
            }
            let Some(d) = self.send_posted.front() else {
                break;
            };
            let mut parts = [Bytes::empty(); VI_MAX_SEGMENTS];
            let mut n = 0;
            for p in d.pieces() {
                parts[n] = p.bytes();
                n += 1;
            }
            let total = d.total;
            // The descriptor's pieces are borrowed beside the connection.
            let conn = match &mut self.path {
                ViPath::Direct(c) => c,
                ViPath::Engine(_) => unreachable!("the direct path's code on an engine VI"),
            };
            match conn.send_gather(&parts[..n], total) {
                Ok(_) => {
                    let id = self.retire(ViQueue::Send).expect("front");
                    self.sent_one(id, total);
                }
                Err(DirectSendError::Full) => {
                    self.stats.tx_full += 1;
                    break;
                }
                Err(DirectSendError::TooLarge) => {
                    self.break_with(ViError::BadDescriptor);
                    return;
                }
                Err(DirectSendError::Closed) => {
                    let why = self.peer_reason();
                    self.break_with(why);
                    return;
                }
            }
        }
        if !self.send_unplaced.is_empty() {
            let placed = self.conn().peer_placed();
            while let Some(&u) = self.send_unplaced.front() {
                if u.seq > placed {
                    break;
                }
                self.send_unplaced.pop_front();
                for &slot in &u.slots[..u.nslots as usize] {
                    self.held.release_slot(slot);
                }
                self.complete_send(ViCompletion {
                    id: u.id,
                    status: Ok(u.total),
                });
            }
            if !self.send_unplaced.is_empty() && self.conn().peer_closed() {
                let why = self.peer_reason();
                self.break_with(why);
            }
        }
    }

    /// Send the front posted descriptor as a reference record: the
    /// receiver reads the data from our regions itself (one copy, from
    /// the region into its posted buffer). `Some(true)`: sent (completes
    /// once read); `Some(false)`: not now (no room, or the VI broke);
    /// `None`: a region cannot be granted to the peer, send it by copy.
    #[inline(never)]
    fn send_pulled(&mut self) -> Option<bool> {
        let d = self.send_posted.front()?;
        let mut payload = [0u8; VI_MAX_SEGMENTS * VI_REF_SEGMENT];
        let mut n = 0;
        for p in d.pieces() {
            if !grant(&mut self.granted, &self.session, self.id, p.handle) {
                return None;
            }
            let e = &mut payload[n * VI_REF_SEGMENT..(n + 1) * VI_REF_SEGMENT];
            e[0..4].copy_from_slice(&p.handle.to_le_bytes());
            e[4..8].copy_from_slice(&(p.len as u32).to_le_bytes());
            e[8..16].copy_from_slice(&(p.offset as u64).to_le_bytes());
            n += 1;
        }
        match self.conn().send_ref(&payload[..n * VI_REF_SEGMENT]) {
            Ok(_) => {}
            Err(DirectSendError::Full) => {
                self.stats.tx_full += 1;
                return Some(false);
            }
            Err(DirectSendError::TooLarge) => {
                self.break_with(ViError::BadDescriptor);
                return Some(false);
            }
            Err(DirectSendError::Closed) => {
                let why = self.peer_reason();
                self.break_with(why);
                return Some(false);
            }
        }
        // Off the queue with its regions still held, until it is read.
        let d = self.send_posted.pop_front().expect("front");
        self.sent += 1;
        self.stats.tx_msgs += 1;
        self.stats.tx_bytes += d.total as u64;
        self.last_pull_seq = self.sent;
        let u = Unplaced::push(&mut self.send_unplaced, d.id, d.total, self.sent);
        for p in d.pieces() {
            u.slots[u.nslots as usize] = p.slot;
            u.nslots += 1;
        }
        Some(true)
    }

    /// The peer's region `handle` mapped here (mapping it first if need
    /// be): its memory, and the region let go to make room for it if one
    /// was; None if the engine refuses.
    pub(super) fn peer_region(&mut self, handle: u32) -> Option<(*const u8, usize, Option<u32>)> {
        let found = |c: &Core| {
            c.peer_regions
                .iter()
                .find(|r| r.0 == handle)
                .map(|(_, seg)| (seg.ptr().as_ptr() as *const u8, seg.len()))
        };
        if let Some((p, n)) = found(self) {
            return Some((p, n, None));
        }
        let gone = (self.peer_regions.len() >= PEER_REGIONS_MAX).then(|| self.peer_regions[0].0);
        if !self.map_peer_region(handle) {
            return None;
        }
        found(self).map(|(p, n)| (p, n, gone))
    }

    /// Map the peer's region `handle` (granted to this VI), keeping at
    /// most [`PEER_REGIONS_MAX`] mapped. False if the engine refuses.
    #[cold]
    fn map_peer_region(&mut self, handle: u32) -> bool {
        let req = Request::ViPeerRegion {
            vi: self.id,
            handle,
        };
        let seg = match self.session.inner.request(&req) {
            Ok((Reply::PeerRegion { len }, mut fds)) if !fds.is_empty() => {
                let fd = fds.remove(0);
                // The size of a region's file is sealed, so the mapping
                // can never fault past its end.
                match Segment::sealed_len(&fd) {
                    Some(n) if n >= len && len > 0 && len <= usize::MAX as u64 => {
                        match Segment::open_unpopulated(fd, len as usize, false) {
                            Ok(seg) => seg,
                            Err(_) => return false,
                        }
                    }
                    _ => return false,
                }
            }
            _ => return false,
        };
        if self.peer_regions.len() >= PEER_REGIONS_MAX {
            self.peer_regions.remove(0);
        }
        self.peer_regions.push((handle, seg));
        true
    }

    /// Send `id` of `total` bytes is in the ring: count it, and complete it
    /// (or, for reliable reception, wait for the receiver to place it).
    #[inline(always)]
    fn sent_one(&mut self, id: u64, total: usize) {
        self.sent += 1;
        self.stats.tx_msgs += 1;
        self.stats.tx_bytes += total as u64;
        if self.attrs.reliability == Reliability::ReliableReception
            || !self.send_unplaced.is_empty()
        {
            // Reliable reception: complete once placed. Otherwise behind a
            // send the receiver still has to read: complete after it, in
            // order.
            let seq = if self.attrs.reliability == Reliability::ReliableReception {
                self.sent
            } else {
                self.last_pull_seq
            };
            Unplaced::push(&mut self.send_unplaced, id, total, seq);
        } else {
            self.complete_send(ViCompletion {
                id,
                status: Ok(total),
            });
        }
    }

    /// The direct path's common case: nothing queued before it and room in
    /// the ring, so the send goes into the ring from `segs` at once, with
    /// no descriptor kept. `None` when it cannot (queued sends, no room, a
    /// bad or foreign segment, a broken VI): the caller posts it the
    /// ordinary way, which reports whatever stopped it.
    #[inline(always)]
    pub(super) fn try_send_now(
        &mut self,
        id: u64,
        segs: &[ViSeg<'_>],
        session: &Arc<Inner>,
    ) -> Option<()> {
        let ViPath::Direct(conn) = &mut self.path else {
            return None;
        };
        if !matches!(self.state, ViState::Connected)
            || !self.send_posted.is_empty()
            || segs.len() > VI_MAX_SEGMENTS
            || self.send_unplaced.len() + self.send_done.len() >= self.attrs.send_queue as usize
        {
            return None;
        }
        let mut parts = [Bytes::empty(); VI_MAX_SEGMENTS];
        let mut total = 0usize;
        for (part, s) in parts.iter_mut().zip(segs) {
            *part = s.bytes(session)?;
            total += s.len;
        }
        if total > VI_MAX_TRANSFER || total >= pull_min() {
            // Large sends are read by the receiver from the region: posted.
            return None;
        }
        match conn.send_gather(&parts[..segs.len()], total) {
            Ok(_) => {
                self.sent_one(id, total);
                Some(())
            }
            Err(_) => None,
        }
    }

    /// [`Core::try_send_now`] from plain memory: `data` goes into the
    /// direct ring during the call, or nothing happens (`None`).
    #[inline(always)]
    pub(super) fn try_send_copied(&mut self, id: u64, data: &[u8]) -> Option<()> {
        let ViPath::Direct(conn) = &mut self.path else {
            return None;
        };
        if !matches!(self.state, ViState::Connected)
            || !self.send_posted.is_empty()
            || data.len() > VI_MAX_TRANSFER
            || self.send_unplaced.len() + self.send_done.len() >= self.attrs.send_queue as usize
        {
            return None;
        }
        match conn.send_gather(&[Bytes::of(data)], data.len()) {
            Ok(_) => {
                self.sent_one(id, data.len());
                Some(())
            }
            Err(_) => None,
        }
    }

    /// The direct path's common case for a receive: no completion waiting
    /// before it, no completion queue to tell, nothing else to do, a good
    /// receive posted and a message in the ring that fits it. The message
    /// is placed and its completion returned at once. `None` when any of
    /// that does not hold: the general path then does whatever is due.
    #[inline(always)]
    pub(super) fn recv_now(&mut self, out: &mut Done) -> bool {
        self.recv_now_opt(out).is_some()
    }

    #[inline(always)]
    fn recv_now_opt(&mut self, out: &mut Done) -> Option<()> {
        let ViPath::Direct(conn) = &mut self.path else {
            return None;
        };
        if !matches!(self.state, ViState::Connected)
            || !self.recv_done.is_empty()
            || self.recv_cq.is_some()
            || !self.send_posted.is_empty()
        {
            return None;
        }
        let d = self.recv_posted.front()?;
        if d.bad {
            return None;
        }
        let regions = &self.peer_regions;
        let mut pulled = None;
        let r = conn.recv_vi_with(
            #[inline(always)]
            |src, is_ref| {
                if is_ref {
                    return match pull_into(regions, d, src) {
                        Ok(n) => {
                            pulled = Some(n);
                            Ok(())
                        }
                        // The general path deals with the rest.
                        Err(_) => Err(0),
                    };
                }
                if !d.scatter(src) {
                    return Err(src.len());
                }
                Ok(())
            },
        );
        let DirectRecv::Message(len) = r else {
            return None;
        };
        let len = pulled.unwrap_or(len);
        self.holding = false;
        self.placed += 1;
        self.stats.rx_msgs += 1;
        self.stats.rx_bytes += len as u64;
        if self.attrs.reliability == Reliability::ReliableReception || pulled.is_some() {
            conn.set_placed(self.placed);
        }
        let id = self.retire(ViQueue::Recv).expect("front");
        out.id = id;
        out.len = len;
        out.err = 0;
        Some(())
    }

    /// The direct path's common case for posting a receive: a connected
    /// VI with room in its queue. The descriptor is filled in place, and a
    /// message already waiting in the ring is placed at once; the peer's
    /// going is noticed by the next poll. `None` when any of that does not
    /// hold: the general path then does whatever is due.
    #[inline(always)]
    pub(super) fn try_post_recv_now(
        &mut self,
        id: u64,
        segs: &[ViSeg<'_>],
        session: &Arc<Inner>,
    ) -> Option<()> {
        let ViPath::Direct(conn) = &self.path else {
            return None;
        };
        if !self.connected()
            || self.recv_posted.len() + self.recv_done.len() >= self.attrs.recv_queue as usize
        {
            return None;
        }
        let waiting = conn.ready();
        self.recv_posted
            .push_slot()
            .fill(id, segs, session, &mut self.held);
        if waiting {
            self.progress_recv();
        }
        Some(())
    }

    /// Place waiting messages into posted receive buffers.
    #[inline]
    pub(super) fn progress_recv(&mut self) {
        if let ViPath::Engine(_) = self.path {
            return self.engine_progress();
        }
        if !self.connected() {
            return;
        }
        loop {
            let Some(d) = self.recv_posted.front() else {
                if self.conn().ready() {
                    if !self.holding {
                        self.holding = true;
                        self.stats.rx_not_posted += 1;
                    }
                    if self.attrs.strict_rnr {
                        self.break_with(ViError::ReceiverNotReady);
                    }
                } else if self.conn().peer_closed() {
                    let why = self.peer_reason();
                    self.break_with(why);
                }
                return;
            };
            if d.bad {
                self.break_with(ViError::BadDescriptor);
                return;
            }
            let mut too_long = false;
            let mut pulled = None;
            let mut need = None;
            let mut bad = false;
            let ViPath::Direct(conn) = &mut self.path else {
                return;
            };
            let regions = &self.peer_regions;
            let r = conn.recv_vi_with(|src, is_ref| {
                if is_ref {
                    return match pull_into(regions, d, src) {
                        Ok(n) => {
                            pulled = Some(n);
                            Ok(())
                        }
                        Err(PullError::TooLong) => {
                            too_long = true;
                            pulled = Some(0);
                            Ok(())
                        }
                        Err(PullError::Unknown(h)) => {
                            need = Some(h);
                            Err(0)
                        }
                        Err(PullError::Bad) => {
                            bad = true;
                            Err(0)
                        }
                    };
                }
                if !d.scatter(src) {
                    too_long = true;
                }
                Ok(())
            });
            if let Some(h) = need {
                // The first message from a region of the peer: map it and
                // read the message again.
                if self.map_peer_region(h) {
                    continue;
                }
                bad = true;
            }
            if bad {
                let why = if self.conn().peer_closed() {
                    self.peer_reason()
                } else {
                    ViError::Broken
                };
                self.break_with(why);
                return;
            }
            match r {
                DirectRecv::Empty => {
                    if self.conn().peer_closed() && !self.conn().ready() {
                        let why = self.peer_reason();
                        self.break_with(why);
                    }
                    return;
                }
                DirectRecv::Broken => {
                    self.break_with(ViError::Broken);
                    return;
                }
                DirectRecv::TooSmall(_) => unreachable!("refused only when mapping or bad"),
                DirectRecv::Message(len) => {
                    let len = pulled.unwrap_or(len);
                    self.holding = false;
                    let id = self.retire(ViQueue::Recv).expect("front");
                    self.placed += 1;
                    if too_long {
                        self.complete_recv(ViCompletion {
                            id,
                            status: Err(ViError::TooLong),
                        });
                        if self.attrs.reliability == Reliability::Unreliable {
                            self.stats.rx_dropped += 1;
                            let placed = self.placed;
                            self.conn().set_placed(placed);
                            continue;
                        }
                        self.break_with(ViError::TooLong);
                        return;
                    }
                    self.stats.rx_msgs += 1;
                    self.stats.rx_bytes += len as u64;
                    if self.attrs.reliability == Reliability::ReliableReception || pulled.is_some()
                    {
                        let placed = self.placed;
                        self.conn().set_placed(placed);
                    }
                    self.complete_recv(ViCompletion {
                        id,
                        status: Ok(len),
                    });
                }
            }
        }
    }
}
