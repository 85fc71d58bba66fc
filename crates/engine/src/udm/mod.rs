//! UDM in the engine: jobs and their nodes, and the buffered case of
//! two-case delivery (the UDM paper, sections 4.2 and 4.3).
//!
//! The fast case never reaches the engine: a sender writes its message
//! straight into its fast ring to the receiver, in the job segment that
//! only the job's nodes map. The engine's part is
//!
//! - the set-up (`setup`): it makes a job's segments and grants each
//!   rank to one process, so a node can reach the nodes of its own job
//!   and no other;
//! - the buffered case: in divert mode senders hand their messages to the
//!   engine (each node's divert ring), which appends them, stamped with
//!   their source, to the destination's virtual buffer; it gives the
//!   buffer's pages back to the system behind the receiver;
//! - the switches: a node with messages waiting that extracts none past
//!   the job's atomicity timeout (atomic, stopped, blocked in its own
//!   inject, or simply not extracting) is switched to buffered mode. A
//!   full fast ring switches nothing: its sender waits, as a blocked
//!   network makes it, and tells the engine to watch the receiver;
//! - reclaiming a node that leaves or dies: its mode word says gone (its
//!   senders get an error) and its virtual buffer is released.
//!
//! Nothing read from a job's shared memory is trusted: a divert ring's
//! head, a buffer's tail, a message's destination and length are checked
//! before use, and a bad one is counted against the node that wrote it.
//! The engine never waits for a node: a message whose destination's
//! buffer is full stays in its sender's divert ring (which holds that
//! sender back) and is taken on a later turn.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use unet_abi::ring::Ring;
use unet_abi::udm::*;
use unet_sys::{self as sys, EventFd, Segment};

use crate::unet::endpoints::ClientId;
use crate::vbuf::KeptPages;

pub(crate) mod link;
mod memory;
mod pages;
mod part;
pub(crate) mod remote;
pub(crate) mod sched;
pub(crate) mod setup;
mod shm;
mod timeout;
pub(crate) use memory::{JobMemory, PendingJob};
use pages::PAGES_IDLE;
use shm::{JobSeg, NodeSeg};
use timeout::bits;
pub(crate) use timeout::Turn;

/// Bytes of a page (the least a virtual buffer is).
const PAGE_BYTES: u64 = unet_abi::PAGE as u64;

/// Messages taken from one divert ring per turn.
const DIVERT_BUDGET: u64 = 256;
/// The shortest interval between two looks at a node for the atomicity
/// timeout.
const CHECK_MIN: Duration = Duration::from_micros(100);
/// Fast rings the atomicity-timeout check reads per turn, over every job:
/// what it may add to a turn however many nodes are watched (the rest
/// wait for the next turn).
const CHECK_BUDGET: usize = 128;
/// An atomic node with nothing waiting is looked at again after half a
/// timeout, then less and less often while nothing about it changes, at
/// least this often (a message may reach it by a fast ring, which nobody
/// tells the engine of while the node runs).
const ATOMIC_IDLE_MAX: Duration = Duration::from_secs(1);
/// The shortest interval between two reads of `/proc` for one process
/// (done only to tell which cause a switch is counted under).
const PROC_MIN: Duration = Duration::from_millis(10);
/// How often the engine looks over the joined nodes: for messages in a
/// divert ring whose ring it never saw, and, among those nothing told it
/// of, for one that has come to need the atomicity timeout unannounced:
/// messages reached it by a fast ring (not full: its senders did not
/// wait) while it runs atomic, stopped, or not extracting.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// Fast rings the sweep reads per turn, over every job.
const SWEEP_BUDGET: usize = 512;
/// How long after it last took diverted messages from a divert ring the
/// engine naps (`UDM_ARMED_NAP`) rather than sleeps when it has nothing
/// to do: it looks again within [`NAP_LOOK`] (the loop's timer rounds it up
/// to a millisecond or two), and senders do not ring it for each message.
const NAP_SPAN: Duration = Duration::from_millis(4);
const NAP_LOOK: Duration = Duration::from_micros(500);
/// Relayed messages a job keeps for nodes behind other engines, waiting
/// for room on the wire (`udm_remote`); past it, they wait on
/// the link they came by. (Messages of this engine's nodes are bounded
/// by overflow control instead: a buffer's worth per destination.)
pub(crate) const OUTBOX_MAX: usize = 256;

/// A message for a node behind another engine, taken from a divert ring
/// (or relayed), waiting for its link (`udm_remote`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RemoteMsg {
    pub src: u32,
    pub dst: u32,
    pub handler: u16,
    pub nwords: u16,
    pub words: [u64; UDM_MAX_WORDS],
    /// Counted in `dst`'s mode word here (sent by a node of this engine):
    /// the count falls when the message goes on the wire.
    pub counted: bool,
}

/// What [`Job::append`] did with a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Append {
    /// In the destination's virtual buffer.
    Done,
    /// The destination's buffer is at its limit: try again later.
    Full,
    /// The destination is gone (dropped and counted).
    Gone,
}

/// Whom a job's memory is charged to: the creator's process (as
/// `Server::proc_key` names it) and user, recorded when the job is made
/// and kept until the job is retired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Payer {
    pub key: (u32, usize),
    pub uid: u32,
}

/// One node of a job, as the engine keeps it.
pub(crate) struct UdmNode {
    /// The client that joined as this rank.
    pub client: Option<ClientId>,
    /// Its process id.
    pub pid: u32,
    /// `UDM_NODE_FREE`, `UDM_NODE_JOINED` or `UDM_NODE_GONE`.
    pub state: u32,
    /// The node segment (header and divert ring) and its view; None once
    /// gone and its divert ring drained.
    seg: Option<NodeSeg>,
    /// Gone with messages still in its divert ring: where its head was
    /// when it went. The engine delivers those (they were injected, so
    /// they are never lost) and nothing written after; then the segment
    /// goes.
    drain_end: Option<u64>,
    /// The virtual buffer; None once gone.
    buf: Option<Segment>,
    /// Our position in the node's divert ring.
    divert_tail: u64,
    /// Messages written to the virtual buffer.
    buf_head: u64,
    /// Messages the node has disposed of (the last valid tail it wrote).
    buf_tail: u64,
    /// The position in the buffer's first slot (`UdmNodeHeader::buf_base`),
    /// and whether this turn has looked at moving it.
    buf_base: u64,
    base_checked: bool,
    /// Which pages of the buffer may hold memory.
    kept: KeptPages,
    /// When its pages go back if nothing is written or taken meanwhile,
    /// and the interval to the next look while it holds messages.
    idle_at: Option<Instant>,
    pages_every: Duration,
    /// The divert ring head last found impossible (counted once).
    bad_head: Option<u64>,
    /// The buffer was found full (counted once per stall).
    held: bool,
    /// Messages the node had taken at the last check.
    last_taken: u64,
    /// Since when it has had messages waiting and taken none.
    stuck_since: Option<Instant>,
    /// When the atomicity-timeout check looks at it next (while watched).
    look_at: Instant,
    /// An atomic node with nothing waiting: the interval to its next
    /// look, and its mode and atomicity bits at the last one.
    idle_every: Duration,
    idle_seen: (u64, u32),
    /// The engine's counters of the node (mirrored in its header).
    counters: [u64; UDM_COUNTERS],
}

impl UdmNode {
    fn header(&self) -> Option<&UdmNodeHeader> {
        Some(self.seg.as_ref()?.view().header())
    }

    /// The divert ring (a view that must not outlive `seg`: rings are
    /// taken and dropped within one call while the segment stays in the
    /// node).
    fn divert(&self) -> Option<Ring<UdmMsg>> {
        Some(self.seg.as_ref()?.view().divert())
    }

    /// The engine's counters of the node.
    pub(crate) fn counters(&self) -> &[u64; UDM_COUNTERS] {
        &self.counters
    }

    pub(crate) fn count(&mut self, c: UdmCounter, n: u64) {
        self.counters[c as usize] = self.counters[c as usize].wrapping_add(n);
        self.mirror(c);
    }

    fn set(&mut self, c: UdmCounter, v: u64) {
        self.counters[c as usize] = v;
        self.mirror(c);
    }

    fn mirror(&self, c: UdmCounter) {
        if let Some(h) = self.header() {
            h.counters[c as usize].store(self.counters[c as usize], Ordering::Relaxed);
        }
    }

    /// Read the node's buffer tail, keeping it only if possible.
    fn refresh_tail(&mut self) {
        let Some(t) = self.header().map(|h| h.buf_tail.load(Ordering::Acquire)) else {
            return;
        };
        if t < self.buf_tail || t > self.buf_head {
            if t != self.buf_tail {
                self.count(UdmCounter::BadPosition, 1);
            }
            return;
        }
        self.buf_tail = t;
    }
}

/// A UDM job.
pub(crate) struct Job {
    /// The key a process needs to join.
    pub key: u64,
    /// The client that created it.
    pub owner: ClientId,
    /// Whether that client is still connected.
    pub owner_alive: bool,
    /// Who its memory is charged to, for as long as the job lives (the
    /// creating connection may close while other sessions of the same
    /// process hold its nodes).
    pub payer: Payer,
    pub layout: UdmLayout,
    /// The job segment and its view.
    pub seg: JobSeg,
    pub doorbell: EventFd,
    /// Virtual buffers of nodes gone, to be given back off the loop
    /// (taken by [`Jobs::poll`]).
    pub released: Vec<Segment>,
    /// The atomicity timeout.
    pub timeout: Duration,
    pub nodes: Vec<UdmNode>,
    /// Nodes to visit on the next turn whatever rang (a bit per rank):
    /// a divert ring left with messages (the turn's budget, a gone node's
    /// last ones), senders whose destination made room.
    busy: u64,
    /// By destination: the senders whose next message waits for room in
    /// it (its buffer, or its link's outbox), let go when it makes some.
    parked: Vec<u64>,
    /// Nodes the atomicity-timeout check watches (a bit per rank): those
    /// that rang or joined since it last judged them, and atomic ones.
    watch: u64,
    /// The earliest look due among them (None: none watched).
    due: Option<Instant>,
    /// Nodes the sweep has yet to look over (a bit per rank).
    sweep: u64,
    /// The nodes joined at the last sweep or since (a bit per rank): a
    /// job with none needs no sweep.
    joined_bits: u64,
    /// Nodes whose buffers keep pages (a bit per rank), and the earliest
    /// time one of them may have been idle long enough to give them back.
    kept: u64,
    pages_due: Option<Instant>,
    /// Until when the engine naps rather than sleeps (it took diverted
    /// messages a moment before).
    nap_until: Option<Instant>,
    /// Messages for nodes behind other engines (`udm_remote`),
    /// and how many of them are counted, by destination.
    pub outbox: VecDeque<RemoteMsg>,
    pub outbox_counted: Vec<u32>,
    /// The client whose scheduler notices the job follows (`sched`), if
    /// one has sent any: while it is there the engine never reads
    /// `/proc` for the job's nodes.
    pub sched: Option<ClientId>,
    /// The nodes its scheduler said are descheduled (a bit per rank):
    /// in buffered mode, not swept, counted as descheduled when switched.
    pub descheduled: u64,
}

impl Job {
    /// Node `rank`'s line in the job segment.
    pub(crate) fn line(&self, rank: u32) -> &UdmNodeLine {
        self.seg.view().line(rank)
    }

    fn header(&self) -> &UdmJobHeader {
        self.seg.view().header()
    }

    /// The fast ring from `src` to `dst` (a view that must not outlive
    /// the job).
    fn fast_ring(&self, dst: u32, src: u32) -> Ring<UdmMsg> {
        self.seg.view().fast_ring(dst, src)
    }

    /// Whether node `r` has a message waiting in one of its fast rings,
    /// and how many rings were read to tell.
    fn fast_waiting(&self, r: u32) -> (bool, usize) {
        for s in 0..self.layout.nodes {
            let ring = self.fast_ring(r, s);
            if ring.head() != ring.tail() {
                return (true, s as usize + 1);
            }
        }
        (false, self.layout.nodes as usize)
    }

    /// The bits of the job's ranks.
    fn ranks(&self) -> u64 {
        u64::MAX >> (64 - self.layout.nodes.clamp(1, 64))
    }

    /// Node `rank` joined (or rang): the atomicity-timeout check looks at
    /// it now.
    pub(crate) fn watch(&mut self, rank: u32, now: Instant) {
        let Some(n) = self.nodes.get_mut(rank as usize) else {
            return;
        };
        n.look_at = now;
        self.watch |= 1 << rank;
        self.joined_bits |= 1 << rank;
        self.due = Some(self.due.map_or(now, |d| d.min(now)));
    }

    /// Whether every node is gone or never came and the creator left, or
    /// every node came and is gone (a rank that left never joins again:
    /// nobody can use the job any more, whether or not its creator is
    /// still there).
    pub(crate) fn finished(&self) -> bool {
        let all_gone = self.nodes.iter().all(|n| n.state == UDM_NODE_GONE);
        all_gone
            || (!self.owner_alive
                && self
                    .nodes
                    .iter()
                    .all(|n| n.state != UDM_NODE_JOINED && n.state != UDM_NODE_REMOTE))
    }

    /// Every segment the job still holds, to be unmapped (off the
    /// engine's loop: a job segment may be tens of MiB) once the job is
    /// retired.
    pub(crate) fn into_segments(self) -> Vec<Segment> {
        let mut v = vec![self.seg.into_segment()];
        v.extend(self.released);
        for n in self.nodes {
            v.extend(n.seg.map(NodeSeg::into_segment));
            v.extend(n.buf);
        }
        v
    }

    /// Bytes charged to the creator.
    pub(crate) fn charge(&self) -> u64 {
        JobMemory::charge(&self.layout)
    }

    /// The node segment and virtual buffer of `rank`, to hand to the
    /// process that joins.
    pub(crate) fn node_fds(&self, rank: u32) -> Option<(&Segment, &Segment)> {
        let n = self.nodes.get(rank as usize)?;
        Some((n.seg.as_deref()?, n.buf.as_ref()?))
    }

    /// Node `rank` left or died: its senders see it gone, its buffer's
    /// memory goes back to the system.
    pub(crate) fn node_gone(&mut self, rank: u32) {
        let line = self.line(rank);
        line.state.store(UDM_NODE_GONE, Ordering::Relaxed);
        line.mode.fetch_or(UDM_MODE_GONE, Ordering::AcqRel);
        line.rx_futex.fetch_add(1, Ordering::Release);
        sys::futex_wake(&line.rx_futex, i32::MAX);
        let Some(n) = self.nodes.get_mut(rank as usize) else {
            return;
        };
        n.state = UDM_NODE_GONE;
        n.client = None;
        // Senders that waited for room in it: what they have for it is
        // dropped now, and what follows it goes on.
        self.busy |= std::mem::take(&mut self.parked[rank as usize]);
        // Its memory is given back off the loop ([`Jobs::released`]):
        // whoever still maps it (a process that left without exiting)
        // reads zeros then.
        let buf = n.buf.take();
        n.kept = KeptPages::default();
        n.idle_at = None;
        n.set(UdmCounter::BufferPages, 0);
        self.released.extend(buf);
        // What it injected before it went is still delivered: its divert
        // ring is drained up to where its head is now.
        let n = &mut self.nodes[rank as usize];
        let head = n.divert().map(|r| r.head());
        match head {
            Some(h)
                if h != n.divert_tail && h.wrapping_sub(n.divert_tail) <= UDM_DIVERT_CAP as u64 =>
            {
                n.drain_end = Some(h);
                self.busy |= 1 << rank;
            }
            _ => n.seg = None,
        }
    }

    /// Take what the nodes that rang (or that have work left) handed the
    /// engine and append it to the virtual buffers; give back the pages
    /// of those whose tail moved; judge the watched nodes whose look is
    /// due, within the turn's budget. A job whose nodes did nothing costs
    /// one load.
    fn poll(&mut self, now: Instant, t: &mut Turn) -> usize {
        let h = self.header();
        let rang = if h.rang.load(Ordering::Relaxed) != 0 {
            let rang = h.rang.swap(0, Ordering::AcqRel) & self.ranks();
            // Pairs with the fence a node makes before it reads the word
            // (`mark_rang`): either it sees the bits cleared and sets its
            // own again, or what it published before is visible here.
            fence(Ordering::SeqCst);
            rang
        } else {
            0
        };
        let due = self.due.is_some_and(|d| d <= now);
        let pages_due = self.pages_due.is_some_and(|d| d <= now);
        if rang == 0 && self.busy == 0 && !due && self.sweep == 0 && !pages_due {
            return 0;
        }
        let mut todo = rang | std::mem::take(&mut self.busy);
        let mut work = 0;
        let mut touched: u64 = 0;
        // A destination whose tail moved may have made room: the senders
        // held by it go again.
        for d in bits(rang) {
            todo |= std::mem::take(&mut self.parked[d as usize]);
        }
        for s in bits(todo) {
            t.visits += 1;
            let node = &self.nodes[s as usize];
            if node.state != UDM_NODE_JOINED && node.drain_end.is_none() {
                continue;
            }
            let (n, w) = self.drain(s);
            work += n;
            touched |= w;
            let node = &mut self.nodes[s as usize];
            if node.drain_end == Some(node.divert_tail) {
                // A gone node's last messages are out: its segment goes.
                node.drain_end = None;
                node.seg = None;
            }
        }
        for d in bits(touched) {
            self.publish(d);
        }
        if work > 0 {
            // Diverted messages flow: nap rather than sleep for a while.
            self.nap_until = Some(now + NAP_SPAN);
        }
        for d in bits(touched | rang) {
            // Written to, or it rang (its tail moved, among others): its
            // pages are in use.
            self.keep_pages(d, now);
        }
        for d in bits(rang) {
            if self.nodes[d as usize].state == UDM_NODE_JOINED {
                self.watch(d, now);
            }
        }
        if pages_due {
            self.idle_pages(now);
        }
        if self.sweep != 0 {
            self.sweep_step(now, t);
        }
        if self.due.is_some_and(|d| d <= now) {
            self.check_timeouts(now, t);
        }
        work
    }

    /// The joined nodes (a bit per rank).
    fn joined(&self) -> u64 {
        let mut m = 0;
        for (r, n) in self.nodes.iter().enumerate() {
            if n.state == UDM_NODE_JOINED {
                m |= 1 << r;
            }
        }
        m
    }

    /// Whether joined node `r`'s divert ring holds messages the engine
    /// has not taken.
    fn divert_waiting(&self, r: u32) -> bool {
        let n = &self.nodes[r as usize];
        n.drain_end.is_none() && n.divert().is_some_and(|ring| ring.head() != n.divert_tail)
    }

    /// Look over the nodes left to sweep, within the turn's budget: one
    /// with messages in its divert ring is drained on the next turn; one
    /// not watched that is atomic, or that has messages waiting in its
    /// fast rings, is watched.
    fn sweep_step(&mut self, now: Instant, t: &mut Turn) {
        for r in bits(self.sweep) {
            if t.sweep_budget == 0 {
                return;
            }
            self.sweep &= !(1 << r);
            if self.nodes[r as usize].state != UDM_NODE_JOINED {
                continue;
            }
            t.visits += 1;
            // Messages handed to the engine whose ring it never saw (the
            // rang word cleared by a node of the job, or swapped away
            // before the head that follows it was visible): taken on the
            // next turn, not left in the divert ring for good.
            t.sweep_budget = t.sweep_budget.saturating_sub(1);
            if self.divert_waiting(r) {
                self.busy |= 1 << r;
            }
            if self.watch & (1 << r) != 0 {
                continue;
            }
            let line = self.line(r);
            let mode = line.mode.load(Ordering::Acquire);
            let uac = line.uac.load(Ordering::Relaxed);
            if uac & (UDM_ATOM_DISABLE | UDM_ATOM_HANDLER) != 0 {
                self.watch(r, now);
                continue;
            }
            if mode & (UDM_MODE_DIVERT | UDM_MODE_GONE) != 0 {
                continue;
            }
            let (waiting, read) = self.fast_waiting(r);
            t.sweep_budget = t.sweep_budget.saturating_sub(read);
            if waiting {
                self.watch(r, now);
            }
        }
    }

    /// Move node `s`'s divert ring into the virtual buffers. Returns the
    /// messages taken and the destinations written to (a bit each).
    fn drain(&mut self, s: u32) -> (usize, u64) {
        let l = self.layout;
        let Some(ring) = self.nodes[s as usize].divert() else {
            return (0, 0);
        };
        // A gone node: only what it wrote before it went.
        let head = self.nodes[s as usize]
            .drain_end
            .unwrap_or_else(|| ring.head());
        let tail = self.nodes[s as usize].divert_tail;
        if head.wrapping_sub(tail) > UDM_DIVERT_CAP as u64 {
            let node = &mut self.nodes[s as usize];
            if node.bad_head != Some(head) {
                node.bad_head = Some(head);
                node.count(UdmCounter::BadPosition, 1);
            }
            return (0, 0);
        }
        let mut pos = tail;
        let mut touched = 0u64;
        while pos != head && pos - tail < DIVERT_BUDGET {
            // Read once, checked before use.
            let hdr = shm::header_at(&ring, pos);
            let d = hdr.peer;
            let nwords = hdr.nwords as usize;
            if d >= l.nodes {
                self.nodes[s as usize].count(UdmCounter::DropBadDest, 1);
                pos += 1;
                continue;
            }
            if nwords > UDM_MAX_WORDS {
                self.nodes[s as usize].count(UdmCounter::DropBadLength, 1);
                pos += 1;
                continue;
            }
            if self.nodes[d as usize].state == UDM_NODE_REMOTE {
                // Behind another engine: to the wire, as its link allows,
                // never more than a buffer's worth at a time (the count
                // in its mode word holds honest senders before that).
                if self.outbox_counted[d as usize] >= l.buffer_cap {
                    let dst = &mut self.nodes[d as usize];
                    if !dst.held {
                        dst.held = true;
                        dst.count(UdmCounter::BufferFull, 1);
                    }
                    self.parked[d as usize] |= 1 << s;
                    break;
                }
                self.nodes[d as usize].held = false;
                let mut m = RemoteMsg {
                    src: s,
                    dst: d,
                    handler: hdr.handler,
                    nwords: nwords as u16,
                    words: [0; UDM_MAX_WORDS],
                    counted: true,
                };
                shm::words_at(&ring, pos, &mut m.words[..nwords]);
                self.outbox.push_back(m);
                self.outbox_counted[d as usize] += 1;
                pos += 1;
                continue;
            }
            let dst = &mut self.nodes[d as usize];
            if dst.state == UDM_NODE_GONE || dst.buf.is_none() {
                self.nodes[s as usize].count(UdmCounter::DropDestGone, 1);
                pos += 1;
                continue;
            }
            let rec = udm_record_bytes(nwords);
            let Some(at) = dst.reserve(l.buffer_size, rec) else {
                // Full: the message waits in its sender's ring until
                // the destination's tail moves (it rings then).
                if !dst.held {
                    dst.held = true;
                    dst.count(UdmCounter::BufferFull, 1);
                }
                self.parked[d as usize] |= 1 << s;
                break;
            };
            dst.held = false;
            if let Some(b) = dst.buf.as_ref() {
                // Stamped with the source.
                shm::buffer_from_ring(b, at, &ring, pos, UdmHeader { peer: s, ..hdr });
            }
            dst.buf_head += rec;
            // Mirrored in the node's header once a turn ([`Job::publish`]):
            // the node reads that line while the engine writes.
            dst.counters[UdmCounter::BufferedMsgs as usize] += 1;
            touched |= 1 << d;
            pos += 1;
        }
        if pos != tail {
            ring.set_tail(pos);
            self.nodes[s as usize].divert_tail = pos;
        }
        if pos != head && pos - tail >= DIVERT_BUDGET {
            // More than a turn's worth: the rest on the next turn.
            self.busy |= 1 << s;
        }
        ((pos - tail) as usize, touched)
    }

    /// One message less counted in node `d`'s mode word (it left this
    /// engine for the wire).
    pub(crate) fn uncount(&mut self, d: u32) {
        if let Some(n) = self.outbox_counted.get_mut(d as usize) {
            *n = n.saturating_sub(1);
        }
        if let Some(p) = self.parked.get_mut(d as usize) {
            self.busy |= std::mem::take(p);
        }
        let mode = &self.line(d).mode;
        let _ = mode.fetch_update(Ordering::AcqRel, Ordering::Acquire, |m| {
            (m & UDM_MODE_COUNT != 0).then(|| m - 1)
        });
    }

    /// Append a message to node `d`'s virtual buffer, as a sender would
    /// (the engine sends for nodes behind other engines): divert mode set
    /// and the count raised in one step, then the message written, stamped
    /// with `src`. The caller publishes with [`Job::publish`].
    pub(crate) fn append(&mut self, d: u32, src: u32, handler: u16, words: &[u64]) -> Append {
        let cap = self.layout.buffer_cap as u64;
        let size = self.layout.buffer_size;
        let Some(dst) = self.nodes.get_mut(d as usize) else {
            return Append::Gone;
        };
        if dst.state == UDM_NODE_GONE || dst.buf.is_none() || words.len() > UDM_MAX_WORDS {
            return Append::Gone;
        }
        let rec = udm_record_bytes(words.len());
        // Room first (a pad it writes is harmless if the count refuses).
        let Some(at) = dst.reserve(size, rec) else {
            return Append::Full;
        };
        let mode = &self.line(d).mode;
        let raised = mode.fetch_update(Ordering::AcqRel, Ordering::Acquire, |m| {
            (m & UDM_MODE_GONE == 0 && m & UDM_MODE_COUNT < cap).then(|| (m | UDM_MODE_DIVERT) + 1)
        });
        match raised {
            Ok(_) => {}
            Err(m) if m & UDM_MODE_GONE != 0 => return Append::Gone,
            Err(_) => return Append::Full,
        }
        let dst = &mut self.nodes[d as usize];
        if let Some(b) = dst.buf.as_ref() {
            let hdr = UdmHeader {
                peer: src,
                handler,
                nwords: words.len() as u16,
            };
            shm::buffer_from_words(b, at, hdr, words);
        }
        dst.buf_head += rec;
        // Mirrored by [`Job::publish`].
        dst.counters[UdmCounter::BufferedMsgs as usize] += 1;
        Append::Done
    }

    /// Make what [`Job::append`] wrote to node `d` visible to it, and wake
    /// it if it sleeps.
    pub(crate) fn publish(&mut self, d: u32) {
        let Some(node) = self.nodes.get_mut(d as usize) else {
            return;
        };
        node.base_checked = false;
        if let Some(h) = node.header() {
            // Release: the messages written before are visible to a node
            // that reads this head with Acquire (and so is the base).
            h.buf_head.store(node.buf_head, Ordering::Release);
        }
        // After the head: a node that sees the count can take as many.
        node.mirror(UdmCounter::BufferedMsgs);
        // The tail as read this turn (at its first write): no load more.
        let held = node.buf_head - node.buf_tail;
        if held > node.counters[UdmCounter::BufferHeldBytesMax as usize] {
            node.set(UdmCounter::BufferHeldBytesMax, held);
        }
        let pages = node.pages_in_use();
        node.set(UdmCounter::BufferPages, pages);
        if pages > node.counters[UdmCounter::BufferPagesMax as usize] {
            node.set(UdmCounter::BufferPagesMax, pages);
        }
        // Pairs with the node's fence before it sleeps: either it sees the
        // new head, or we see it sleeping.
        fence(Ordering::SeqCst);
        let line = self.line(d);
        if line.rx_sleeping.load(Ordering::Relaxed) != 0 {
            line.rx_futex.fetch_add(1, Ordering::Release);
            // Every sleeper: the main code and its handler thread.
            sys::futex_wake(&line.rx_futex, i32::MAX);
        }
    }

    /// Node `rank` lives behind another engine from now on: its mode word
    /// stays in divert mode (what is sent to it comes to this engine).
    pub(crate) fn set_remote(&mut self, rank: u32) {
        let line = self.line(rank);
        line.state.store(UDM_NODE_REMOTE, Ordering::Release);
        line.mode.fetch_or(UDM_MODE_DIVERT, Ordering::AcqRel);
        if let Some(n) = self.nodes.get_mut(rank as usize) {
            n.state = UDM_NODE_REMOTE;
        }
    }

    /// Node `rank` (behind another engine until now) is to join here.
    pub(crate) fn set_free(&mut self, rank: u32) {
        let line = self.line(rank);
        line.mode.store(0, Ordering::Release);
        line.state.store(UDM_NODE_FREE, Ordering::Release);
        if let Some(n) = self.nodes.get_mut(rank as usize) {
            n.state = UDM_NODE_FREE;
        }
    }
}

/// Every UDM job of the engine.
#[derive(Default)]
pub(crate) struct Jobs {
    pub jobs: HashMap<u32, Job>,
    next_id: u32,
    /// Ids of jobs whose memory is being made (on the set-up thread).
    reserved: HashSet<u32>,
    /// The links of jobs that span engines (`udm_remote`).
    pub remote: crate::udm::link::Links,
    /// Virtual buffers of departed nodes, gathered from the jobs at each
    /// [`Jobs::poll`]: the engine gives their memory back on its set-up
    /// thread.
    pub released: Vec<Segment>,
    /// Nodes visited (for their rings or the atomicity timeout) and
    /// reads of `/proc`, since the engine last took them into its
    /// counters.
    pub visits: u64,
    pub proc_reads: u64,
    turn: Turn,
    /// When the next sweep of the joined nodes starts ([`SWEEP_EVERY`]).
    sweep_at: Option<Instant>,
}

impl Jobs {
    pub(crate) fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// One turn: the divert rings and buffers of the nodes that rang or
    /// have work left, and the atomicity-timeout looks due (within a
    /// budget): work in proportion to what is waiting, not to the nodes
    /// that exist.
    pub(crate) fn poll(&mut self) -> usize {
        let now = Instant::now();
        let mut work = 0;
        let mut t = std::mem::take(&mut self.turn);
        t.budget = CHECK_BUDGET;
        t.sweep_budget = SWEEP_BUDGET;
        t.now = Some(now);
        let sweep = *self.sweep_at.get_or_insert(now + SWEEP_EVERY) <= now;
        if sweep {
            self.sweep_at = Some(now + SWEEP_EVERY);
        }
        for j in self.jobs.values_mut() {
            if sweep {
                j.joined_bits = j.joined();
                j.sweep = j.sweepable();
            }
            work += j.poll(now, &mut t);
            if !j.released.is_empty() {
                self.released.append(&mut j.released);
            }
        }
        self.visits += std::mem::take(&mut t.visits);
        self.proc_reads += std::mem::take(&mut t.proc_reads);
        self.turn = t;
        work
    }

    /// The earliest atomicity-timeout look due (None: no node watched).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut at = self.jobs.values().filter_map(|j| j.due).min();
        let mut joined = false;
        let mut sooner = |d: Instant| at = Some(at.map_or(d, |a: Instant| a.min(d)));
        for j in self.jobs.values() {
            if j.sweep != 0 || j.busy != 0 {
                sooner(now);
            }
            if let Some(p) = j.pages_due {
                sooner(p);
            }
            // Napping: senders do not ring for every message.
            if j.header().engine_armed.load(Ordering::Relaxed) == UDM_ARMED_NAP {
                sooner(now + NAP_LOOK);
            }
            joined |= j.joined_bits & !j.descheduled != 0;
        }
        if joined {
            if let Some(s) = self.sweep_at {
                at = Some(at.map_or(s, |a| a.min(s)));
            }
        }
        at
    }

    /// Set (before the engine sleeps) or clear every job's doorbell flag:
    /// a job that had diverted messages taken a moment ago is told the
    /// engine naps ([`UDM_ARMED_NAP`]), and the engine's next deadline
    /// comes within [`NAP_LOOK`] ([`Jobs::next_deadline`]).
    pub(crate) fn arm(&self, on: bool) {
        let now = on.then(Instant::now);
        for j in self.jobs.values() {
            let v = match now {
                None => 0,
                Some(t) if j.nap_until.is_some_and(|n| n > t) => UDM_ARMED_NAP,
                Some(_) => UDM_ARMED_SLEEP,
            };
            j.header().engine_armed.store(v, Ordering::Release);
        }
    }

    /// What each process and user is charged for: the jobs its processes
    /// created, every one of them until it is retired (whether or not
    /// the creating connection is still open).
    pub(crate) fn charges(&self) -> impl Iterator<Item = (Payer, u64)> + '_ {
        let jobs = self.jobs.values().map(|j| (j.payer, j.charge()));
        // Each link to another engine keeps at most LINK_CHARGE bytes in
        // the engine's heap, for its job.
        let links = self.remote.links.values().filter_map(|l| {
            let j = self.jobs.get(&l.job?)?;
            Some((j.payer, crate::udm::link::LINK_CHARGE))
        });
        jobs.chain(links)
    }
}

#[cfg(test)]
mod tests;
