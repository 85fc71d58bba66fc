//! The VIs the engine carries: one end of a VI connection to another
//! engine, its queues in a segment the engine shares with the owner
//! ([`unet_abi::ViHeader`]), its data on the wire with VIA's reliability
//! ([`crate::wire::reliable`]).
//!
//! Send: the engine takes a send descriptor (a copy, read once), checks
//! every segment against its own table of the owner's regions, gathers
//! the bytes and hands them to the wire with the next sequence number. It
//! keeps the descriptor (not the bytes) until the send completes: a
//! retransmission gathers again from the region, which VIA says the
//! application leaves alone until then. Completion follows the level:
//! unreliable at once, reliable delivery when the peer engine acknowledges
//! the message, reliable reception when it says the message is placed.
//!
//! Receive: an accepted message is scattered straight into the buffers of
//! the next posted receive descriptor; with none posted, the engine holds
//! it (at most the window it advertised, so the sender is held back, not
//! the connection broken) and places it when one is posted; with the
//! strict option, the VI breaks instead.
//!
//! Trust: descriptors and ring positions come from shared memory the
//! client may scribble on; each is checked before use, a bad descriptor is
//! an error completion and the error state on that VI only.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::Ordering;

use unet_abi::ring::Ring;
use unet_abi::view::ViView;
use unet_abi::*;
use unet_sys::{self as sys, EventFd, Segment};

use crate::unet::endpoints::ClientId;
use crate::wire::frag::{FragBuf, FragIn};
use crate::wire::reliable::{
    self, Ack, DataVerdict, RelConfig, RelReceiver, RelSender, Sack, SACK_FRAG_WORDS,
};
use crate::wire::WireDrop;

mod recv;

/// Messages kept per VI that arrived after a gap, whole or in part (the
/// receiver takes only those inside its window, which is at most this).
const AHEAD_MAX: usize = 64;

/// The least held-bytes budget of a VI: one message of the largest size
/// in reassembly.
pub(crate) const HELD_BUDGET_MIN: u64 = VI_MAX_TRANSFER as u64 + 8 * 1024;

/// What an engine-carried VI may take of the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ViLimits {
    /// How long its peer may stay silent while something waits for it
    /// before the VI breaks ([`RelConfig::break_timeout_ns`]).
    pub break_timeout_ns: u64,
    /// Bytes of messages it may keep for its owner: held for want of a
    /// receive, arrived after a gap, or in reassembly (at least
    /// [`HELD_BUDGET_MIN`]). Charged to the owner with the VI's segment.
    pub held_budget: u64,
}

impl ViLimits {
    /// The engine's settings, and the VI's own break timeout if it asked
    /// for one.
    pub(crate) fn of(cfg: &crate::EngineConfig, attrs: &unet_control::ViParams) -> ViLimits {
        let engine = cfg.vi_break_timeout.as_nanos().min(u128::from(u64::MAX)) as u64;
        let own = u64::from(attrs.break_timeout_ms).saturating_mul(1_000_000);
        ViLimits {
            break_timeout_ns: if own == 0 { engine } else { own },
            held_budget: cfg.vi_held_budget.max(HELD_BUDGET_MIN),
        }
    }
}

/// A registered memory region.
pub(crate) struct Region {
    pub owner: ClientId,
    /// The engine's mapping (its pages untouched until a VI the engine
    /// carries reads or writes them; a local VI's data never passes here).
    pub seg: Segment,
    pub len: u64,
    /// The local VIs (of other processes) this region's owner let read it
    /// (`Request::ViGrantRegion`): a local VI's receiver reads large
    /// messages straight from the sender's region.
    pub granted: Vec<u32>,
}

/// Capacity of each ring of a VI the engine carries.
pub(crate) const VI_QUEUE_CAP: u32 = 1024;

/// The other end of an engine-carried VI (the wire's connection peer),
/// and a VI's message to put on the wire (the wire's outgoing frame).
pub(crate) use crate::wire::port::{ConnOut as Outgoing, ConnPeer as RemoteVi};

/// What a retransmission is for ([`EngineVi::resend`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resend {
    /// The timer: everything the receiver did not say it holds.
    Timer,
    /// A NACK or duplicate acks: the holes of the expected message.
    Fast,
    /// A probe for an ack: the first fragment only.
    Probe,
}

/// Puts an [`Outgoing`] on the wire; true if it carried the ack along.
pub(crate) type Wire<'w> = dyn FnMut(Outgoing<'_>) -> bool + 'w;

/// One engine-carried VI.
pub(crate) struct EngineVi {
    pub owner: ClientId,
    pub seg: Segment,
    pub doorbell: EventFd,
    sq: Ring<ViDesc>,
    rq: Ring<ViDesc>,
    scq: Ring<ViCompl>,
    rcq: Ring<ViCompl>,
    cap: u64,
    /// The engine's own positions (the shared ones are only written).
    sq_tail: u64,
    rq_tail: u64,
    scq_head: u64,
    rcq_head: u64,
    pub reliability: Reliability,
    pub strict_rnr: bool,
    pub peer: Option<RemoteVi>,
    pub tx: RelSender,
    pub rx: RelReceiver,
    /// Sends on the wire not yet completed: the descriptor, its sequence
    /// number and its length.
    inflight: VecDeque<(ViDesc, u32, u32)>,
    /// Receive descriptors taken from the queue, not yet filled.
    recv_posted: VecDeque<ViDesc>,
    /// Messages accepted with no receive posted, in order.
    held: VecDeque<Vec<u8>>,
    /// The peer went (its VI closed) while messages it sent were held: they
    /// are still placed as receives are posted, and the VI breaks with this
    /// reason once the last one is (sends fail with it meanwhile).
    draining: Option<ViError>,
    /// Messages of a reliable level that arrived after a gap, by sequence
    /// number: kept (at most the window's worth) until the missing ones
    /// come, then taken in order, so that a loss costs the resending of
    /// what was lost only.
    ahead: Vec<(u32, Vec<u8>)>,
    /// Messages of several fragments in reassembly, inside the window (a
    /// reliable level keeps them until they are complete: no timeout),
    /// by sequence number.
    partial: Vec<(u32, FragBuf)>,
    /// Bytes of `held`, `ahead` and `partial`; at most `held_budget`.
    kept: u64,
    /// The most `kept` may reach.
    pub held_budget: u64,
    /// 0 while connected, else the `ViError` code.
    pub state: u32,
    /// The error is still to be told to the peer.
    pub tell_peer: bool,
    /// Completions were pushed since the client was last woken (see
    /// [`EngineVi::wake_now`]).
    wake_due: bool,
    /// Gathering buffer.
    scratch: Vec<u8>,
    /// On the engine's list of VIs to visit each turn (the VIs' turn in
    /// the loop); else parked, its doorbell armed.
    pub active: bool,
    /// Its earliest deadline in the engine's timer index, if any.
    pub queued: Option<u64>,
    /// When (wire clock, ns) a visit last found work.
    pub last_work_ns: u64,
}

impl EngineVi {
    /// A VI of `owner` connected to `peer` (None until the peer accepts),
    /// with its segment and doorbell.
    pub(crate) fn new(
        id: u32,
        owner: ClientId,
        engine_id: u64,
        reliability: Reliability,
        strict_rnr: bool,
        peer: Option<RemoteVi>,
        limits: ViLimits,
    ) -> io::Result<EngineVi> {
        let layout = ViLayout::new(VI_QUEUE_CAP).expect("a valid capacity");
        let seg = Segment::create(&format!("unet-vi-{id}"), layout.segment_size as usize)?;
        let base = seg.ptr();
        // SAFETY: a fresh zeroed segment of layout.segment_size bytes, not
        // shared yet; plain field writes into its header page.
        unsafe {
            let h = base.as_ptr() as *mut ViHeader;
            (*h).magic = VI_MAGIC;
            (*h).version = VERSION;
            (*h).header_size = VI_HEADER_SIZE as u32;
            (*h).segment_size = layout.segment_size;
            (*h).vi_id = id;
            (*h).reliability = reliability as u8;
            (*h).strict_rnr = strict_rnr as u8;
            (*h).queue_cap = layout.cap;
            (*h).sq_off = layout.sq_off;
            (*h).rq_off = layout.rq_off;
            (*h).scq_off = layout.scq_off;
            (*h).rcq_off = layout.rcq_off;
            (*h).engine_id = engine_id;
        }
        // SAFETY: mapped as long as `seg`, which the VI owns beside its
        // rings; by the engine's own layout, never the header.
        let ViView {
            sq, rq, scq, rcq, ..
        } = unsafe { ViView::new(base, seg.len(), &layout) }
            .map_err(|e| io::Error::other(format!("VI segment: {e}")))?;
        sq.init(size_of::<ViDesc>() as u32);
        rq.init(size_of::<ViDesc>() as u32);
        scq.init(size_of::<ViCompl>() as u32);
        rcq.init(size_of::<ViCompl>() as u32);
        let level = match reliability {
            Reliability::Unreliable => reliable::Reliability::Unreliable,
            Reliability::ReliableDelivery => reliable::Reliability::ReliableDelivery,
            Reliability::ReliableReception => reliable::Reliability::ReliableReception,
        };
        let cfg = RelConfig {
            break_timeout_ns: limits.break_timeout_ns,
            ..RelConfig::default()
        };
        Ok(EngineVi {
            owner,
            seg,
            doorbell: EventFd::new()?,
            sq,
            rq,
            scq,
            rcq,
            cap: layout.cap as u64,
            sq_tail: 0,
            rq_tail: 0,
            scq_head: 0,
            rcq_head: 0,
            reliability,
            strict_rnr,
            peer,
            tx: RelSender::new(cfg, level, 0),
            rx: RelReceiver::new(cfg, level, 0),
            inflight: VecDeque::new(),
            recv_posted: VecDeque::new(),
            held: VecDeque::new(),
            draining: None,
            ahead: Vec::new(),
            partial: Vec::new(),
            kept: 0,
            held_budget: limits.held_budget.max(HELD_BUDGET_MIN),
            state: 0,
            tell_peer: false,
            wake_due: false,
            scratch: Vec::new(),
            active: false,
            queued: None,
            last_work_ns: 0,
        })
    }

    pub(crate) fn header(&self) -> &ViHeader {
        // SAFETY: the segment starts with the ViHeader written in new();
        // its shared fields are atomics.
        unsafe { self.seg.ptr().cast::<ViHeader>().as_ref() }
    }

    /// The VI's counters now.
    pub(crate) fn counters(&self) -> [u64; VI_COUNTERS] {
        std::array::from_fn(|i| self.header().counters[i].load(Ordering::Relaxed))
    }

    /// Add `n` to counter `c` (one writer: the engine).
    pub(crate) fn count(&self, c: ViCounter, n: u64) {
        let a = &self.header().counters[c as usize];
        a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    fn set_level(&self, c: ViCounter, v: u64) {
        self.header().counters[c as usize].store(v, Ordering::Relaxed);
    }

    /// The client is to be woken (if it sleeps on its completions) once
    /// this turn is done with the VI: an ack and the reply it rode on, or
    /// several messages of one batch, wake it once
    /// ([`EngineVi::wake_now`]), not once each (a sleeper woken by a send
    /// completion while it waits for a receive only goes back to sleep).
    fn wake(&mut self) {
        self.wake_due = true;
    }

    /// Wake the client if completions were pushed since the last wake and
    /// it sleeps on them. The engine calls it for every VI at the end of
    /// each turn of the VIs.
    pub(crate) fn wake_now(&mut self) {
        if !std::mem::take(&mut self.wake_due) {
            return;
        }
        let h = self.header();
        std::sync::atomic::fence(Ordering::SeqCst);
        if h.client_sleeping.load(Ordering::Relaxed) != 0 {
            h.cq_futex.fetch_add(1, Ordering::Release);
            sys::futex_wake(&h.cq_futex, 1);
        }
    }

    /// Completions the client has not taken yet on ring `r` (whose head
    /// we produce): what a hostile tail cannot make us overrun.
    fn unread(r: &Ring<ViCompl>, head: u64) -> u64 {
        head.saturating_sub(r.tail().min(head))
    }

    fn push_compl(&mut self, send: bool, id: u64, status: Result<u32, ViError>) {
        let c = ViCompl {
            id,
            status: match status {
                Ok(_) => 0,
                Err(e) => -(e as i32),
            },
            len: status.unwrap_or(0),
        };
        if status.is_err() {
            self.count(ViCounter::Errors, 1);
        }
        let (ring, head) = if send {
            (&self.scq, &mut self.scq_head)
        } else {
            (&self.rcq, &mut self.rcq_head)
        };
        // Room is reserved when a descriptor is taken; a client that moved
        // its tail backwards loses completions, never our memory.
        ring.write(*head, c);
        *head += 1;
        ring.set_head(*head);
    }

    /// Whether the send completion ring has room for one more outstanding
    /// send (taken, not completed, plus completions unread).
    fn send_room(&self) -> bool {
        (self.inflight.len() as u64) + Self::unread(&self.scq, self.scq_head) < self.cap
    }

    fn recv_room(&self) -> bool {
        (self.recv_posted.len() as u64) + Self::unread(&self.rcq, self.rcq_head) < self.cap
    }

    /// Check descriptor `d` against the owner's regions: its pieces
    /// (pointer, length) and total, or None if any segment is bad.
    fn pieces(
        &self,
        d: &ViDesc,
        regions: &std::collections::HashMap<u32, Region>,
        out: &mut [(*mut u8, usize); VI_MAX_SEGMENTS],
    ) -> Option<(usize, usize)> {
        let n = d.nsegs as usize;
        if n > VI_MAX_SEGMENTS || d.flags != 0 {
            return None;
        }
        let mut total = 0usize;
        for (i, s) in d.segs[..n].iter().enumerate() {
            let r = regions.get(&s.handle).filter(|r| r.owner == self.owner)?;
            let end = s.offset.checked_add(s.len as u64)?;
            if end > r.len {
                return None;
            }
            // SAFETY: offset + len <= the region's length, inside the
            // engine's mapping of it (sealed: it cannot shrink).
            out[i] = (
                unsafe { r.seg.ptr().as_ptr().add(s.offset as usize) },
                s.len as usize,
            );
            total += s.len as usize;
        }
        (total <= VI_MAX_TRANSFER).then_some((n, total))
    }

    /// Enter the error state: every descriptor outstanding (taken or still
    /// queued) completes with `why`; the peer is to be told.
    pub(crate) fn break_with(&mut self, why: ViError, tell_peer: bool) {
        if self.state != 0 {
            return;
        }
        self.state = why as u32;
        self.tell_peer = tell_peer && self.peer.is_some();
        self.header().state.store(why as u32, Ordering::Release);
        self.flush();
    }

    /// The peer closed its VI (`why`: the peer gone). Messages it sent that
    /// arrived are the client's as much as those already placed: when some
    /// are held for want of a receive, they are placed first (as receives
    /// are posted), and the VI breaks once the last is; sends complete with
    /// `why` at once, as nobody will acknowledge them.
    pub(crate) fn peer_gone(&mut self, why: ViError) {
        if self.state != 0 {
            return;
        }
        if self.held.is_empty() {
            self.break_with(why, false);
            return;
        }
        self.draining = Some(why);
        self.unkeep_all_ahead();
        self.fail_sends(why);
        self.wake();
    }

    /// Complete every send outstanding (on the wire or still in the queue)
    /// with `why`.
    fn fail_sends(&mut self, why: ViError) {
        while let Some((d, ..)) = self.inflight.pop_front() {
            self.push_compl(true, d.id, Err(why));
        }
        let head = self.sq.head().min(self.sq_tail + self.cap);
        while self.sq_tail < head && self.send_room() {
            let d = self.sq.read(self.sq_tail);
            self.sq_tail += 1;
            self.push_compl(true, d.id, Err(why));
        }
        self.sq.set_tail(self.sq_tail);
    }

    /// Complete everything outstanding with the error state's reason.
    fn flush(&mut self) {
        let Some(why) = ViError::from_u32(self.state) else {
            return;
        };
        // A completion tail past our head is impossible: the client's
        // word. A broken VI then completes nothing more from its queues
        // (otherwise it would complete garbage for ever, and the engine
        // never sleep); what it took is still completed.
        let impossible = self.scq.tail() > self.scq_head || self.rcq.tail() > self.rcq_head;
        while let Some((d, ..)) = self.inflight.pop_front() {
            self.push_compl(true, d.id, Err(why));
        }
        while let Some(d) = self.recv_posted.pop_front() {
            self.push_compl(false, d.id, Err(why));
        }
        self.held.clear();
        self.ahead.clear();
        self.partial.clear();
        self.kept = 0;
        self.set_level(ViCounter::Held, 0);
        self.set_level(ViCounter::KeptBytes, 0);
        // Descriptors still in the queues, as far as their completions fit
        // (at most a queue's worth: the positions are the client's word).
        let head = if impossible {
            self.sq_tail
        } else {
            self.sq.head().min(self.sq_tail + self.cap)
        };
        while self.sq_tail < head && self.send_room() {
            let d = self.sq.read(self.sq_tail);
            self.sq_tail += 1;
            self.push_compl(true, d.id, Err(why));
        }
        self.sq.set_tail(self.sq_tail);
        let head = if impossible {
            self.rq_tail
        } else {
            self.rq.head().min(self.rq_tail + self.cap)
        };
        while self.rq_tail < head && self.recv_room() {
            let d = self.rq.read(self.rq_tail);
            self.rq_tail += 1;
            self.push_compl(false, d.id, Err(why));
        }
        self.rq.set_tail(self.rq_tail);
        // A break may come from outside the VIs' turn (a client gone, a
        // region deregistered): wake at once.
        self.wake();
        self.wake_now();
    }

    /// Take what the client posted and move it on: sends handed to `wire`
    /// (as the window allows), receives filled from held messages. Returns
    /// the work done.
    pub(crate) fn poll(
        &mut self,
        regions: &std::collections::HashMap<u32, Region>,
        now_ns: u64,
        wire: &mut Wire<'_>,
    ) -> usize {
        if self.state != 0 {
            // Posted after the error: completed with it at once, as far
            // as the client takes completions (no work otherwise, so that
            // the engine can sleep).
            let before = (self.sq_tail, self.rq_tail);
            if self.sq.head() != self.sq_tail || self.rq.head() != self.rq_tail {
                self.flush();
            }
            return usize::from(before != (self.sq_tail, self.rq_tail));
        }
        let Some(peer) = self.peer else {
            return 0;
        };
        let mut work = 0;
        // Receives first: they may take held messages and open the window.
        let head = self.rq.head();
        if head.wrapping_sub(self.rq_tail) > self.cap {
            self.count(ViCounter::BadDescriptors, 1);
            self.break_with(ViError::BadDescriptor, true);
            return 1;
        }
        while self.rq_tail < head && self.recv_room() {
            let d = self.rq.read(self.rq_tail);
            self.rq_tail += 1;
            self.recv_posted.push_back(d);
            work += 1;
        }
        self.rq.set_tail(self.rq_tail);
        let mut placed = 0;
        while !self.held.is_empty() && !self.recv_posted.is_empty() {
            let msg = self.held.pop_front().expect("held");
            self.unkeep(msg.len());
            if !self.place(&msg, regions) {
                return work + 1;
            }
            placed += 1;
        }
        if placed > 0 {
            self.set_level(ViCounter::Held, self.held.len() as u64);
            self.rx.placed(placed, now_ns);
            self.maybe_reopen(now_ns);
        }
        if let Some(why) = self.draining {
            if self.held.is_empty() {
                self.draining = None;
                self.break_with(why, false);
                return work + 1;
            }
            let before = self.sq_tail;
            self.fail_sends(why);
            return work + usize::from(before != self.sq_tail);
        }
        // Sends, as far as the window and the completion ring allow.
        let head = self.sq.head();
        if head.wrapping_sub(self.sq_tail) > self.cap {
            self.count(ViCounter::BadDescriptors, 1);
            self.break_with(ViError::BadDescriptor, true);
            return work + 1;
        }
        let mut pieces = [(std::ptr::null_mut::<u8>(), 0usize); VI_MAX_SEGMENTS];
        while self.sq_tail < head && self.send_room() && self.tx.can_send() {
            let d = self.sq.read(self.sq_tail);
            let Some((n, total)) = self.pieces(&d, regions, &mut pieces) else {
                // The sends ahead of it complete first (with the error),
                // then it and those behind it: in posting order.
                self.sq.set_tail(self.sq_tail);
                self.count(ViCounter::BadDescriptors, 1);
                self.break_with(ViError::BadDescriptor, true);
                return work + 1;
            };
            let Some(seq) = self.tx.on_send(now_ns) else {
                break;
            };
            self.sq_tail += 1;
            self.gather(&pieces[..n], total);
            // An ack owed to the peer goes with the message (a reply acks
            // what it answers), not in a datagram of its own later.
            // Not when the ack should say what is kept past a gap: that
            // goes in an ack frame of its own.
            let ack = self
                .rx
                .pending_ack()
                .filter(|_| !self.keeps_ahead() && !self.rx.is_closed());
            if wire(Outgoing {
                to: peer,
                seq,
                bytes: &self.scratch,
                ack,
                held: None,
            }) {
                self.rx.make_ack();
                self.count(ViCounter::AcksTx, 1);
            }
            self.count(ViCounter::TxMsgs, 1);
            self.count(ViCounter::TxBytes, total as u64);
            if self.reliability == Reliability::Unreliable {
                self.push_compl(true, d.id, Ok(total as u32));
            } else {
                self.inflight.push_back((d, seq, total as u32));
            }
            work += 1;
        }
        self.sq.set_tail(self.sq_tail);
        if work > 0 {
            self.wake();
        }
        work
    }

    fn gather(&mut self, pieces: &[(*mut u8, usize)], total: usize) {
        self.scratch.clear();
        self.scratch.reserve(total);
        for &(p, n) in pieces {
            // SAFETY: each piece lies inside a region mapping (checked by
            // `pieces` against the engine's table); the region's owner may
            // write it meanwhile, which only gives other bytes.
            let src = unsafe { std::slice::from_raw_parts(p as *const u8, n) };
            self.scratch.extend_from_slice(src);
        }
    }

    /// Resend messages `range` (sequence numbers of sends in flight),
    /// gathering each again from its descriptor.
    /// `how`: a fast retransmission (a NACK or duplicate acks) fills the
    /// holes of the message the receiver expects, not the fragments after
    /// the last it holds (they may be on their way); a probe is the first
    /// fragment only.
    pub(crate) fn resend(
        &mut self,
        range: reliable::SeqRange,
        how: Resend,
        regions: &std::collections::HashMap<u32, Region>,
        wire: &mut Wire<'_>,
    ) {
        let Some(peer) = self.peer else {
            return;
        };
        let mut pieces = [(std::ptr::null_mut::<u8>(), 0usize); VI_MAX_SEGMENTS];
        for i in 0..self.inflight.len() {
            let (d, seq, _) = self.inflight[i];
            // Not what the receiver said it holds, nor its fragments.
            if !range.contains(seq) || self.tx.sacked(seq) {
                continue;
            }
            match self.pieces(&d, regions, &mut pieces) {
                Some((n, total)) => {
                    self.gather(&pieces[..n], total);
                    let held = match how {
                        Resend::Probe => Some(Sack::FIRST_ONLY),
                        _ => self.tx.frags_held(seq).map(|k| Sack {
                            tail_held: how == Resend::Fast,
                            ..k
                        }),
                    };
                    wire(Outgoing {
                        to: peer,
                        seq,
                        bytes: &self.scratch,
                        ack: None,
                        held,
                    });
                    self.count(ViCounter::Retransmits, 1);
                    if held.is_some() && how != Resend::Probe {
                        self.count(ViCounter::PartialRetransmits, 1);
                    }
                }
                None => {
                    // Its region was deregistered meanwhile.
                    self.count(ViCounter::BadDescriptors, 1);
                    self.break_with(ViError::BadDescriptor, true);
                    return;
                }
            }
        }
    }

    /// The peer acknowledged: complete the sends the ack finishes.
    pub(crate) fn complete_sends(&mut self, n: u32) {
        for _ in 0..n {
            let Some((d, _, len)) = self.inflight.pop_front() else {
                break;
            };
            self.push_compl(true, d.id, Ok(len));
        }
        if n > 0 {
            self.wake();
        }
    }

    /// An ack for this VI's sends.
    pub(crate) fn acked(
        &mut self,
        ack: Ack,
        sack: Option<Sack>,
        now_ns: u64,
        regions: &std::collections::HashMap<u32, Region>,
        wire: &mut Wire<'_>,
    ) {
        if self.state != 0 {
            return;
        }
        self.count(ViCounter::AcksRx, 1);
        let (bogus, stale) = (self.tx.stats.bogus_acks, self.tx.stats.stale_acks);
        let out = self.tx.on_ack(ack, now_ns);
        if let Some(k) = sack {
            self.tx.on_sack(ack.cum_ack, k, now_ns);
        }
        let more = self.tx.stats.bogus_acks.saturating_sub(bogus);
        if more > 0 {
            self.count(ViCounter::BogusAcks, more);
        }
        let more = self.tx.stats.stale_acks.saturating_sub(stale);
        if more > 0 {
            self.count(ViCounter::StaleAcks, more);
        }
        self.complete_sends(out.completed);
        if let Some(r) = out.retransmit {
            self.resend(r, Resend::Fast, regions, wire);
        }
    }

    /// Run the retransmission timer.
    pub(crate) fn timers(
        &mut self,
        now_ns: u64,
        regions: &std::collections::HashMap<u32, Region>,
        wire: &mut Wire<'_>,
    ) {
        if self.state != 0 {
            return;
        }
        match self.tx.poll_timer(now_ns) {
            reliable::TimerOutcome::Nothing => {}
            reliable::TimerOutcome::Retransmit(r) => {
                self.count(ViCounter::Timeouts, 1);
                self.resend(r, Resend::Timer, regions, wire);
            }
            reliable::TimerOutcome::Probe { seq } => {
                self.count(ViCounter::Probes, 1);
                if seq != self.tx.next_seq() {
                    self.resend(
                        reliable::SeqRange {
                            from: seq,
                            to: seq.wrapping_add(1),
                        },
                        Resend::Probe,
                        regions,
                        wire,
                    );
                }
            }
            reliable::TimerOutcome::Broken(_) => {
                self.break_with(ViError::Timeout, true);
            }
        }
    }

    /// The earliest time a timer of this VI is due (ns on the wire's
    /// clock).
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        if self.state != 0 {
            return None;
        }
        [self.tx.next_deadline(), self.rx.ack_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// The ack to send now, if one is due.
    pub(crate) fn ack_now(&mut self, now_ns: u64) -> Option<Ack> {
        if self.state != 0 || self.reliability == Reliability::Unreliable {
            return None;
        }
        if !self.rx.ack_due(now_ns) {
            return None;
        }
        self.count(ViCounter::AcksTx, 1);
        Some(self.rx.make_ack())
    }

    /// The ack still owed to the peer when this VI closes normally (due or
    /// not): sent before the close, so that the peer's sends that arrived
    /// complete as arrived instead of failing with the peer gone.
    pub(crate) fn last_ack(&mut self) -> Option<Ack> {
        if self.state != 0 || self.reliability == Reliability::Unreliable {
            return None;
        }
        self.rx.pending_ack()?;
        self.count(ViCounter::AcksTx, 1);
        Some(self.rx.make_ack())
    }

    /// The client posted descriptors the engine has not taken yet.
    pub(crate) fn posted(&self) -> bool {
        self.sq.head() != self.sq_tail || self.rq.head() != self.rq_tail
    }

    /// Arm the doorbell for good (until the client rings): true if
    /// nothing was posted meanwhile, false (and disarmed) otherwise.
    /// Pairs with the fence a client issues between publishing a
    /// descriptor and reading `engine_armed`: either we see its
    /// descriptor here, or it sees the flag and rings.
    pub(crate) fn park(&self) -> bool {
        self.arm(true);
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.posted() {
            self.arm(false);
            return false;
        }
        true
    }

    pub(crate) fn arm(&self, on: bool) {
        self.header()
            .engine_armed
            .store(on as u32, Ordering::Relaxed);
    }
}

use std::mem::size_of;
