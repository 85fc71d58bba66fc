//! The VI core: a VI's queues, its end of the connection and its
//! counters ([`ViStats`]), how descriptors are posted, completed and
//! taken, how a VI breaks, and the lending of a local VI's data path.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use unet_abi::{Reliability, ViError, CLIENT_COUNTERS};
use unet_sys::Segment;

use crate::direct::{ConnLoan, DirectConn};
use crate::fifo::Fifo;
use crate::session::Inner;
use crate::Session;

use super::cq::CompletionQueue;
use super::desc::{Desc, Done, PostError, Unplaced, ViCompletion, ViQueue, ViState};
use super::engine_side::EngineSide;
use super::region::{RegionsInUse, ViSeg};
use super::ViAttributes;

/// The state of a VI that moves descriptors: its queues, its end of the
/// connection, and its counters.
pub(super) struct Core {
    pub(super) id: u32,
    pub(super) attrs: ViAttributes,
    pub(super) path: ViPath,
    pub(super) state: ViState,
    /// Send descriptors not yet in the ring.
    pub(super) send_posted: Fifo<Desc>,
    /// Sends in the ring waiting for the receiver to place them (reliable
    /// reception only): descriptor number, length and message number. The
    /// data is in the ring already; the regions are not needed any more.
    pub(super) send_unplaced: Fifo<Unplaced>,
    pub(super) send_done: Fifo<Done>,
    /// Messages put in the ring so far.
    pub(super) sent: u64,
    pub(super) recv_posted: Fifo<Desc>,
    pub(super) recv_done: Fifo<Done>,
    /// Messages placed into posted buffers so far.
    pub(super) placed: u64,
    pub(super) send_cq: Option<CompletionQueue>,
    pub(super) recv_cq: Option<CompletionQueue>,
    pub(super) stats: ViStats,
    /// The recent mean of the waits that had to read the clock, in
    /// nanoseconds (a moving average, an eighth per wait): a wait spins
    /// up to twice this before it sleeps, so that a VI whose answers take
    /// a little longer than `attrs.spin` (a round trip between engines)
    /// does not sleep just before each one and pay a wake-up.
    pub(super) wait_mean_ns: u64,
    /// A message is waiting for a receive to be posted (counted once).
    pub(super) holding: bool,
    /// The regions posted descriptors use.
    pub(super) held: RegionsInUse,
    /// The session (for the rare control requests of the data path: a
    /// region granted to the peer, or a peer's region mapped).
    pub(super) session: Session,
    /// Handles of this process's regions asked to be granted to the peer
    /// (local VIs), and whether the engine did.
    pub(super) granted: Vec<(u32, bool)>,
    /// The peer's regions mapped here (read-only), by handle (local VIs).
    pub(super) peer_regions: Vec<(u32, Segment)>,
    /// The message number of the last send the receiver reads from our
    /// region: a send queued behind it completes once it has.
    pub(super) last_pull_seq: u64,
    /// Keeps the counters `conn` points at alive (dropped after it).
    pub(super) _counters: Box<[AtomicU64; CLIENT_COUNTERS]>,
}

/// What a VI counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ViStats {
    /// Messages sent.
    pub tx_msgs: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Messages received into posted buffers.
    pub rx_msgs: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Messages that arrived before a receive was posted for them, and
    /// waited for one (VIA would have broken the connection).
    pub rx_not_posted: u64,
    /// Times a send waited for room in the ring.
    pub tx_full: u64,
    /// Descriptors completed with an error.
    pub errors: u64,
    /// Messages dropped on an unreliable VI (too long for their receive).
    pub rx_dropped: u64,
}

/// Why a VI's data path is not lent ([`Vi::lend_direct`](super::Vi::lend_direct)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LendRefusal {
    /// Not now: descriptors or completions are outstanding. Once they
    /// are all taken it can be.
    Busy,
    /// Never: a VI between engines, one with a completion queue, one of
    /// reliable reception or strict about receives not posted, or a
    /// broken one.
    Never,
}

/// What the borrower of a VI's data path hands back
/// ([`Vi::take_back_direct`]): the ring positions it reached and what it
/// sent and placed meanwhile.
///
/// [`Vi::take_back_direct`]: super::Vi::take_back_direct
#[derive(Clone, Debug, Default)]
pub(crate) struct DirectReturn {
    pub tx_pos: u64,
    pub rx_pos: u64,
    pub rx_published: u64,
    pub sent: u64,
    pub sent_bytes: u64,
    pub received: u64,
    pub received_bytes: u64,
    pub tx_full: u64,
    /// Sends in the ring the peer has not placed yet, oldest first: `(id,
    /// length, message number)`, completed by the library once the peer's
    /// placed count reaches the number. Their memory stays untouched and
    /// registered until then (the borrower's promise).
    pub unplaced: Vec<(u64, usize, u64)>,
}

/// A lent data path: the connection's part, and the VI's message counts
/// at the lending (sends and placements are numbered from them).
pub(crate) struct DirectLoan {
    pub conn: ConnLoan,
    pub sent: u64,
    pub placed: u64,
}

/// How a VI's messages travel.
pub(super) enum ViPath {
    /// A ring shared with the peer's process (a local VI).
    Direct(DirectConn),
    /// Queues the engine carries to another engine.
    Engine(Box<EngineSide>),
}

impl Core {
    /// The direct connection. Only the direct path's code calls it.
    #[inline(always)]
    pub(super) fn conn(&mut self) -> &mut DirectConn {
        match &mut self.path {
            ViPath::Direct(c) => c,
            ViPath::Engine(_) => unreachable!("the direct path's code on an engine VI"),
        }
    }

    /// How long a wait spins now: `attrs.spin`, or up to twice the
    /// recent waits' mean if longer (at most
    /// [`ViAttributes::SPIN_ADAPT_MAX`]); never if `attrs.spin` is zero.
    pub(super) fn spin_now(&self) -> Duration {
        let base = self.attrs.spin;
        if base.is_zero() {
            return base;
        }
        let adapt = Duration::from_nanos(self.wait_mean_ns.saturating_mul(2));
        base.max(adapt.min(ViAttributes::SPIN_ADAPT_MAX))
    }

    /// A wait that read the clock ended with a completion after `d`
    /// (counted as at most [`ViAttributes::SPIN_ADAPT_MAX`]: a long idle
    /// wait says nothing about how long to spin, beyond the most).
    pub(super) fn waited(&mut self, d: Duration) {
        let d = d.min(ViAttributes::SPIN_ADAPT_MAX).as_nanos() as u64;
        self.wait_mean_ns = self.wait_mean_ns - self.wait_mean_ns / 8 + d / 8;
    }

    /// Whether the VI is connected (not in the error state).
    #[inline(always)]
    pub(super) fn connected(&self) -> bool {
        matches!(self.state, ViState::Connected)
    }

    /// Lend the direct path out (see [`Vi::lend_direct`](super::Vi::lend_direct)).
    pub(super) fn lend(
        &mut self,
        recv_ids: &mut [u64],
    ) -> Result<(DirectLoan, usize), LendRefusal> {
        let ViPath::Direct(conn) = &self.path else {
            return Err(LendRefusal::Never);
        };
        if self.send_cq.is_some()
            || self.recv_cq.is_some()
            || self.attrs.reliability == Reliability::ReliableReception
            || self.attrs.strict_rnr
            || !self.connected()
            || conn.broken
        {
            return Err(LendRefusal::Never);
        }
        if !self.send_posted.is_empty()
            || !self.send_unplaced.is_empty()
            || !self.send_done.is_empty()
            || !self.recv_done.is_empty()
            || self.recv_posted.len() > recv_ids.len()
            || self.recv_posted.iter().any(|d| d.bad)
        {
            return Err(LendRefusal::Busy);
        }
        let loan = DirectLoan {
            conn: conn.loan(),
            sent: self.sent,
            placed: self.placed,
        };
        // The receives posted go to the borrower, in order.
        let mut n = 0;
        while let Some(id) = self.retire(ViQueue::Recv) {
            recv_ids[n] = id;
            n += 1;
        }
        Ok((loan, n))
    }

    /// Take the direct path back (see
    /// [`Vi::take_back_direct`](super::Vi::take_back_direct)).
    pub(super) fn take_back(&mut self, r: &DirectReturn) {
        let ViPath::Direct(conn) = &mut self.path else {
            return;
        };
        let ok = conn.take_back(r.tx_pos, r.rx_pos, r.rx_published);
        self.sent += r.sent;
        self.placed += r.received;
        self.stats.tx_msgs += r.sent;
        self.stats.tx_bytes += r.sent_bytes;
        self.stats.rx_msgs += r.received;
        self.stats.rx_bytes += r.received_bytes;
        self.stats.tx_full += r.tx_full;
        if r.received > 0 {
            // What waited for a receive was placed by the borrower.
            self.holding = false;
        }
        for &(id, total, seq) in &r.unplaced {
            // A number the borrower cannot have given (none of its sends
            // is past `sent`) completes at once: the send is in the ring.
            let seq = seq.min(self.sent);
            self.last_pull_seq = self.last_pull_seq.max(seq);
            Unplaced::push(&mut self.send_unplaced, id, total, seq);
        }
        if !ok {
            self.break_with(ViError::Broken);
        }
    }

    /// Break the connection for `why`: the peer's side of the direct ring
    /// is told (the engine tells a remote peer when the VI closes).
    pub(super) fn close_path(&mut self, why: ViError) {
        if let ViPath::Direct(c) = &self.path {
            c.close_with_error(why as u32);
        }
    }

    #[inline(always)]
    pub(super) fn complete_send(&mut self, c: ViCompletion) {
        if c.status.is_err() {
            self.stats.errors += 1;
        }
        self.send_done.push_slot().set(c);
        if let Some(cq) = &self.send_cq {
            cq.push(self.id, ViQueue::Send);
        }
    }

    #[inline(always)]
    pub(super) fn complete_recv(&mut self, c: ViCompletion) {
        if c.status.is_err() {
            self.stats.errors += 1;
        }
        self.recv_done.push_slot().set(c);
        if let Some(cq) = &self.recv_cq {
            cq.push(self.id, ViQueue::Recv);
        }
    }

    /// Enter the error state for `why`: every outstanding descriptor
    /// completes with it, and the peer is told.
    pub(super) fn break_with(&mut self, why: ViError) {
        if !self.connected() {
            return;
        }
        self.state = ViState::Error(why);
        self.close_path(why);
        self.flush(why);
    }

    pub(super) fn flush(&mut self, why: ViError) {
        while let Some(&mut u) = self.send_unplaced.pop_front() {
            for &slot in &u.slots[..u.nslots as usize] {
                self.held.release_slot(slot);
            }
            self.complete_send(ViCompletion {
                id: u.id,
                status: Err(why),
            });
        }
        while let Some(id) = self.retire(ViQueue::Send) {
            self.complete_send(ViCompletion {
                id,
                status: Err(why),
            });
        }
        while let Some(id) = self.retire(ViQueue::Recv) {
            self.complete_recv(ViCompletion {
                id,
                status: Err(why),
            });
        }
    }

    /// Take the front posted descriptor of `q` off its queue, releasing
    /// its regions; its number.
    #[inline(always)]
    pub(super) fn retire(&mut self, q: ViQueue) -> Option<u64> {
        let d = match q {
            ViQueue::Send => self.send_posted.pop_front()?,
            ViQueue::Recv => self.recv_posted.pop_front()?,
        };
        self.held.release(d);
        Some(d.id)
    }

    /// Why the peer went: the reason it gave, or just gone.
    pub(super) fn peer_reason(&self) -> ViError {
        let code = match &self.path {
            ViPath::Direct(c) => c.peer_error(),
            ViPath::Engine(_) => 0,
        };
        match ViError::from_u32(code) {
            // Its own close, or a close on its behalf: gone.
            None | Some(ViError::Closed) => ViError::PeerGone,
            Some(e) => e,
        }
    }

    pub(super) fn progress(&mut self) {
        self.progress_send();
        if self.recv_stirred() {
            self.progress_recv();
        }
    }

    /// Whether the receive side may have something to do: on the direct
    /// path, a message in the ring or the peer gone (otherwise placing
    /// finds nothing); always on an engine VI.
    #[inline(always)]
    fn recv_stirred(&self) -> bool {
        match &self.path {
            ViPath::Direct(c) => c.ready() || c.peer_closed(),
            ViPath::Engine(_) => true,
        }
    }

    /// Move posted sends into the ring, and complete those the receiver
    /// has placed (reliable reception).
    #[inline(always)]
    fn progress_send(&mut self) {
        if let ViPath::Engine(_) = self.path {
            return self.engine_progress();
        }
        if !self.connected() || (self.send_posted.is_empty() && self.send_unplaced.is_empty()) {
            return;
        }
        self.progress_send_direct();
    }

    /// Post a descriptor of `segs` to queue `q`.
    pub(super) fn post(
        &mut self,
        q: ViQueue,
        id: u64,
        segs: &[ViSeg<'_>],
        session: &Arc<Inner>,
    ) -> Result<(), PostError> {
        let cap = match q {
            ViQueue::Send => self.attrs.send_queue,
            ViQueue::Recv => self.attrs.recv_queue,
        };
        if self.outstanding(q) >= cap as usize {
            return Err(PostError::QueueFull);
        }
        let engine = matches!(self.path, ViPath::Engine(_));
        match (q, self.state) {
            // A broken local VI completes whatever is posted with its
            // reason (the engine does so for the VIs it carries).
            (ViQueue::Send, ViState::Error(e)) if !engine => {
                self.complete_send(ViCompletion { id, status: Err(e) })
            }
            (ViQueue::Recv, ViState::Error(e)) if !engine => {
                self.complete_recv(ViCompletion { id, status: Err(e) })
            }
            _ if engine => return self.engine_post(q, id, segs, session),
            (ViQueue::Send, _) => {
                self.send_posted
                    .push_slot()
                    .fill(id, segs, session, &mut self.held);
                self.progress_send();
            }
            (ViQueue::Recv, _) => {
                self.recv_posted
                    .push_slot()
                    .fill(id, segs, session, &mut self.held);
                if self.recv_stirred() {
                    self.progress_recv();
                }
            }
        }
        Ok(())
    }

    /// Whether polling queue `q` may find something new: cheap (a word or
    /// two of shared memory), for spinning between polls. Only the direct
    /// path's receive queue has such a word; the rest always say yes.
    #[inline(always)]
    pub(super) fn worth_polling(&self, q: ViQueue) -> bool {
        match (&self.path, q) {
            (ViPath::Direct(c), ViQueue::Recv) => {
                c.ready()
                    || c.peer_closed()
                    || !self.send_posted.is_empty()
                    || !self.send_unplaced.is_empty()
            }
            _ => true,
        }
    }

    pub(super) fn outstanding(&self, q: ViQueue) -> usize {
        match q {
            ViQueue::Send => {
                self.send_posted.len() + self.send_unplaced.len() + self.send_done.len()
            }
            ViQueue::Recv => self.recv_posted.len() + self.recv_done.len(),
        }
    }

    /// Take the next completion of `q` into `out` (field by field: see
    /// [`Done`]); false if there is none.
    #[inline(always)]
    pub(super) fn take(&mut self, q: ViQueue, out: &mut Done) -> bool {
        let d = match q {
            ViQueue::Send => self.send_done.pop_front(),
            ViQueue::Recv => self.recv_done.pop_front(),
        };
        match d {
            Some(d) => {
                out.id = d.id;
                out.len = d.len;
                out.err = d.err;
                true
            }
            None => false,
        }
    }
}

/// A VI the engine carries: posting to its queues and taking its
/// completions (the queues themselves are `engine_side`'s).
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
        if !e.has_room(q) {
            return Err(PostError::QueueFull);
        }
        let d = match q {
            ViQueue::Send => self.send_posted.push_slot(),
            ViQueue::Recv => self.recv_posted.push_slot(),
        };
        d.fill(id, segs, session, &mut self.held);
        e.post(q, id, d);
        Ok(())
    }

    /// Take the engine's completions, in order, for the descriptors posted.
    pub(super) fn engine_progress(&mut self) {
        let ViPath::Engine(e) = &mut self.path else {
            return;
        };
        let mut done = Vec::new();
        let state = e.take_completions(&mut done);
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
