//! UDM (User Direct Messaging, as the UDM paper defines it): small
//! messages between the nodes of a job, `inject`ed and `extract`ed at user
//! level, with user-controlled atomicity and two-case delivery.
//!
//! A *job* is a set of nodes (processes or threads), each known by its
//! *rank*. One process creates the job ([`Session::udm_create_job`]) and
//! gets a [`JobTicket`]; every node joins with it ([`Session::udm_join`]),
//! taking a rank that no one else holds. The engine grants each rank the
//! shared memory of its job and nothing else: a node can reach only the
//! nodes of its own job.
//!
//! A message is a handler index and up to [`MAX_WORDS`] (14) words of 64
//! bits. Larger data belongs to VIA ([`crate::via`]).
//!
//! # Two-case delivery
//!
//! In the fast case a sender writes its message straight into its fast
//! ring to the receiver (one small ring per sender and receiver, in memory
//! only the job maps): no engine, no system call. A full ring makes its
//! sender wait, as a blocked network does. When the receiver cannot keep
//! up (messages waiting and none taken for the atomicity timeout: atomic,
//! stopped, blocked in its own inject, or simply not extracting), the
//! engine switches it to buffered ("divert") mode: senders hand
//! their messages to the engine, which appends them to the receiver's
//! virtual buffer (memory reserved up front, touched only when used and
//! given back as the receiver drains it). [`Node::extract`],
//! [`Node::peek`] and [`Node::dispose`] behave the same in both modes,
//! each sender's messages come out in the order it injected them, the
//! receiver returns to the fast case when its buffer is empty, and no
//! message is lost. `docs/udm.md` explains the switch.
//!
//! # Overflow control
//!
//! A node's virtual buffer holds at most [`JobConfig::buffer_size`] bytes
//! of messages (128 bytes each). When it is full, senders to that node are
//! held back: [`Node::inject`] waits, [`Node::injectc`] says the message
//! did not go. Nothing is dropped.
//!
//! # The files
//!
//! This file holds the [`Node`]: opening it, injecting, extracting,
//! atomicity and its state. Beside it: `job` (making and joining a job),
//! `message` (what a node's calls give back and their errors), `upcall`
//! (handlers run as upcalls) and `bench` (the measurements of
//! `unet bench udm`).
//!
//! The node's segments, their rings and message slots are mapped in
//! `crate::shm`; only `upcall` is allowed `unsafe` code (it says why).

use std::os::fd::OwnedFd;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use unet_abi::udm::{
    udm_record_bytes, UdmHeader, UdmJobHeader, UdmLayout, UdmMsg, UdmNodeHeader, UdmNodeLine,
    UDM_ARMED_NAP, UDM_ATOM_USER, UDM_DIVERT_CAP, UDM_MODE_COUNT, UDM_MODE_DIVERT, UDM_MODE_GONE,
    UDM_PAD,
};
pub use unet_abi::udm::{
    UdmClientCounter, UdmCounter, UDM_ATOM_DISABLE as ATOM_DISABLE,
    UDM_ATOM_TIMER_FORCE as ATOM_TIMER_FORCE, UDM_COUNTERS, UDM_MAX_NODES as MAX_NODES,
    UDM_MAX_WORDS as MAX_WORDS,
};
use unet_abi::view::LayoutError;
use unet_control::{Reply, Request};
use unet_sys::{self as sys, EventFd, Segment};

use crate::shm::{Buffer, JobRings, Mapped, NodeRings, Slot, Words};
use crate::{Error, Session};

mod inject;
mod job;
mod message;
#[allow(unsafe_code)]
mod upcall;
pub use job::{Advice, JobConfig, JobTicket};
pub use message::{ExtractError, Header, InjectError, Message, Mode, NodeStats};
pub use upcall::{Upcall, UpcallConfig, UpcallError, UpcallNode};
pub mod bench;

/// A job segment's fault, in the words a node's open reports it with.
fn bad(what: &str) -> Error {
    Error::Protocol(format!("the UDM job segment's {what} is wrong"))
}

/// A ring of a UDM segment past the segment's end.
fn outside() -> Error {
    Error::Protocol("a UDM ring lies outside its segment".into())
}

/// Why a job segment was refused, as a node's open reports it.
fn refused(e: LayoutError) -> Error {
    match e {
        LayoutError::BadMagic(_)
        | LayoutError::BadVersion(_)
        | LayoutError::BadHeaderSize(_)
        | LayoutError::WrongId { .. } => bad("identity"),
        LayoutError::Udm(_) | LayoutError::BadDivertCap(_) => bad("geometry"),
        LayoutError::Misaligned | LayoutError::TooShort { .. } => bad("size"),
        LayoutError::PastEnd { .. } => outside(),
        e => Error::Protocol(format!("the UDM job segment's layout is wrong: {e}")),
    }
}

/// What a look at the fast rings found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scan {
    /// A message that may be taken now, from this sender.
    Ready(u32),
    /// Messages, each sent after diverted ones not taken yet.
    Waiting,
    /// No message.
    Empty,
}

/// Where the current message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cur {
    /// In the fast ring from this sender.
    Fast(u32),
    /// In the virtual buffer.
    Buffer,
}

/// One node of a UDM job: what it injects and extracts with. A node is
/// used by one thread at a time (it may move between threads).
pub struct Node {
    session: Session,
    job: u32,
    rank: u32,
    layout: UdmLayout,
    /// The job's segment with the nodes' lines and the fast rings to
    /// this node (`incoming`, by sender) and from it (`outgoing`, by
    /// receiver).
    jseg: Mapped<UdmJobHeader, JobRings>,
    /// This node's segment with the divert ring (to the engine).
    nseg: Mapped<UdmNodeHeader, NodeRings>,
    buf: Buffer,
    doorbell: EventFd,
    /// Our positions in the incoming rings.
    in_tail: Vec<u64>,
    /// Our positions in the outgoing rings and the consumers' last known
    /// positions.
    out_head: Vec<u64>,
    out_tail: Vec<u64>,
    /// For each receiver whose fast ring we found full: its position
    /// then and the tries since it last moved ([`Node::stalled`]).
    stall: Vec<(u64, u32)>,
    /// By receiver: the messages we diverted to it (through the engine),
    /// written as the stamp of every fast message we send it: a fast
    /// message stamped `k` comes after our `k` diverted ones.
    diverted_to: Vec<u64>,
    /// By sender: the buffered messages we took from it. Its fast
    /// message stamped `k` is taken only once this reaches `k`, so a
    /// receiver can go back to the fast case while diverted messages are
    /// still on their way to it, and each sender's order holds.
    buffered_from: Vec<u64>,
    /// Our position in the divert ring and the engine's last known one.
    divert_head: u64,
    divert_tail: u64,
    /// Our position in the virtual buffer (bytes), the one we last told
    /// the engine, and the position at its first byte (the engine's
    /// `buf_base`, read with each new head).
    buf_tail: u64,
    tail_told: u64,
    buf_base: u64,
    /// The buffer's head when we last rang a napping engine for a
    /// diverted message on its way ([`Node::pull`]).
    pulled_at: u64,
    /// A buffer head read before a scan that found every fast ring empty:
    /// the buffered messages before it follow every fast message of
    /// their senders, so they are taken without scanning again.
    buf_clear: u64,
    /// Buffered messages taken and not yet subtracted from our mode
    /// word's count (done in batches of [`TAKE_BATCH`], and whenever the
    /// buffer runs out).
    uncounted: u64,
    /// The current message (chosen by the first peek or extract that saw
    /// it, until disposed of).
    current: Option<Cur>,
    /// The sender whose ring is looked at first.
    cursor: u32,
    /// The user atomicity control bits (our copy).
    uac: u32,
    asym: bool,
    left: bool,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Node({} of job {})", self.rank, self.job)
    }
}

impl Node {
    pub(super) fn open(
        session: Session,
        job: u32,
        rank: u32,
        mut fds: Vec<OwnedFd>,
    ) -> Result<Node, Error> {
        if fds.len() != 4 {
            return Err(Error::Protocol(format!(
                "udm join came with {} fds",
                fds.len()
            )));
        }
        let bell = fds.pop().expect("4");
        let buf_fd = fds.pop().expect("3");
        let nfd = fds.pop().expect("2");
        let jfd = fds.pop().expect("1");
        let jseg = Segment::open(jfd, std::mem::size_of::<UdmJobHeader>(), true)?;
        let jseg = Mapped::job(jseg, job, rank).map_err(refused)?;
        let layout = *jseg.layout();
        if rank >= layout.nodes {
            return Err(bad("size"));
        }
        let nseg = Segment::open(nfd, layout.node_size as usize, true)?;
        let nseg = Mapped::node(nseg, &layout, job, rank).map_err(|e| match e {
            LayoutError::PastEnd { .. } => outside(),
            _ => bad("node segment"),
        })?;
        // Read-only and untouched: its pages are the engine's to fill.
        let buf = Segment::open_unpopulated(buf_fd, layout.buffer_size as usize, false)?;
        let buf = Buffer::new(buf, layout.buffer_size).ok_or_else(|| bad("geometry"))?;
        // Our positions: what the rings say now (a fresh rank: zero).
        let in_tail = jseg.incoming.iter().map(|r| r.tail()).collect();
        let out_head: Vec<u64> = jseg.outgoing.iter().map(|r| r.head()).collect();
        let out_tail: Vec<u64> = jseg.outgoing.iter().map(|r| r.tail()).collect();
        let stall = out_tail.iter().map(|&t| (t, 0)).collect();
        let divert_head = nseg.divert.head();
        let divert_tail = nseg.divert.tail();
        let buf_tail = nseg.header().buf_tail.load(Ordering::Acquire);
        let buf_base = nseg.header().buf_base.load(Ordering::Relaxed);
        Ok(Node {
            session,
            job,
            rank,
            layout,
            jseg,
            nseg,
            buf,
            doorbell: EventFd::from_fd(bell),
            in_tail,
            out_head,
            out_tail,
            stall,
            diverted_to: vec![0; layout.nodes as usize],
            buffered_from: vec![0; layout.nodes as usize],
            divert_head,
            divert_tail,
            buf_tail,
            tail_told: buf_tail,
            buf_base,
            pulled_at: u64::MAX,
            buf_clear: buf_tail,
            uncounted: 0,
            current: None,
            cursor: 0,
            uac: 0,
            asym: sys::asymmetric_fences(),
            left: false,
        })
    }

    /// This node's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Nodes in the job.
    pub fn nodes(&self) -> u32 {
        self.layout.nodes
    }

    /// The job's id.
    pub fn job(&self) -> u32 {
        self.job
    }

    fn line(&self, r: u32) -> &UdmNodeLine {
        self.jseg.line(r)
    }

    fn header(&self) -> &UdmNodeHeader {
        self.nseg.header()
    }

    fn job_header(&self) -> &UdmJobHeader {
        self.jseg.header()
    }

    // ---------------------------------------------------------------------
    // Receiving
    // ---------------------------------------------------------------------

    /// The message-available flag: whether [`Node::extract`] would succeed.
    pub fn message_available(&mut self) -> bool {
        self.select().is_some()
    }

    /// Choose the current message if there is none: the fast rings first
    /// (from the sender after the last one served), then the virtual
    /// buffer. A fast message is taken only after every message its
    /// sender diverted before it (its stamp counts them; until then it
    /// waits), and once a diverted message is seen every earlier fast one
    /// is visible too (it was published before the sender diverted), so
    /// the fast rings are looked at again before a buffered message is
    /// taken.
    fn select(&mut self) -> Option<Cur> {
        if self.current.is_some() {
            return self.current;
        }
        if self.buf_tail < self.buf_clear && self.skip_pads(self.buf_clear) {
            self.current = Some(Cur::Buffer);
            return self.current;
        }
        if let Scan::Ready(s) = self.scan_fast() {
            self.current = Some(Cur::Fast(s));
            return self.current;
        }
        let head = self.header().buf_head.load(Ordering::Acquire);
        if head != self.buf_tail {
            // After the head (Acquire): the engine moves the base only
            // while our tail is at its head, before it publishes the head
            // that follows.
            self.buf_base = self.header().buf_base.load(Ordering::Relaxed);
        }
        // Bounded: a head past what the buffer holds is the engine's to
        // never write; trust no more than that.
        let head = head.min(self.buf_tail + self.buf.size());
        if head != self.buf_tail && self.skip_pads(head) {
            self.current = Some(match self.scan_fast() {
                Scan::Ready(s) => Cur::Fast(s),
                scan => {
                    // With fast messages waiting for diverted ones, one
                    // at a time: each buffered message taken may free one.
                    self.buf_clear = match scan {
                        Scan::Empty => head,
                        _ => self.buf_tail + 1,
                    };
                    Cur::Buffer
                }
            });
            return self.current;
        }
        self.settle_taken();
        // Nothing in the buffer, and we run: back to the fast case, even
        // with diverted messages still on their way here (a sender's fast
        // messages after them wait for them, by their stamps). The count
        // stays, for overflow control, and falls as we take them.
        let mode = &self.line(self.rank).mode;
        let m = mode.load(Ordering::Acquire);
        if m & (UDM_MODE_DIVERT | UDM_MODE_GONE) == UDM_MODE_DIVERT {
            let _ =
                mode.compare_exchange(m, m & !UDM_MODE_DIVERT, Ordering::AcqRel, Ordering::Relaxed);
        }
        if m & UDM_MODE_GONE == 0 && m & UDM_MODE_COUNT != 0 {
            self.pull(head);
        }
        None
    }

    /// Move our buffer position past the pad records before `end`: true
    /// if a message is there.
    fn skip_pads(&mut self, end: u64) -> bool {
        while self.buf_tail < end {
            let at = self.buf_tail.wrapping_sub(self.buf_base);
            if UdmHeader::unpack(self.buf.record(at).header()).nwords != UDM_PAD {
                return true;
            }
            // Nothing more before the buffer's end: on to its start.
            let size = self.buf.size();
            self.buf_tail += size - (at & (size - 1));
        }
        false
    }

    /// The first fast ring, from the sender after the last one served,
    /// whose next message may be taken now.
    fn scan_fast(&mut self) -> Scan {
        let n = self.layout.nodes;
        let mut waiting = false;
        for k in 0..n {
            let s = (self.cursor + k) % n;
            let i = s as usize;
            if self.jseg.incoming[i].head() != self.in_tail[i] {
                // Sent after diverted messages we have not taken yet:
                // it waits for them (a peer may write any stamp: one that
                // lies only holds up its own ring).
                let stamp = Slot::of(&self.jseg.incoming[i], self.in_tail[i]).stamp();
                if stamp > self.buffered_from[i] {
                    waiting = true;
                    continue;
                }
                self.cursor = (s + 1) % n;
                return Scan::Ready(s);
            }
        }
        if waiting {
            Scan::Waiting
        } else {
            Scan::Empty
        }
    }

    /// The current message's slot.
    fn current_slot(&self, c: Cur) -> Slot<'_> {
        match c {
            Cur::Fast(s) => Slot::of(&self.jseg.incoming[s as usize], self.in_tail[s as usize]),
            Cur::Buffer => self.buf.record(self.buf_tail.wrapping_sub(self.buf_base)),
        }
    }

    /// Read the next message into the caller's variables: its words into
    /// `words` (straight from the ring or buffer, no copy in between), its
    /// source, handler and length returned; then dispose of it. With no
    /// message available: [`ExtractError::Empty`].
    pub fn extract(&mut self, words: &mut [u64]) -> Result<Header, ExtractError> {
        let c = self.select().ok_or(ExtractError::Empty)?;
        let slot = self.current_slot(c);
        // Read once, volatile (a peer may write anything there).
        let hdr = slot.header();
        let (src, handler, len) = split_header(UdmHeader::unpack(hdr), c);
        if words.len() < len {
            return Err(ExtractError::TooShort(len));
        }
        // `len` <= MAX_WORDS (split_header). A peer writing concurrently
        // only changes the values read.
        slot.read_words(&mut words[..len]);
        self.dispose_current(c, src, len);
        Ok(Header { src, handler, len })
    }

    /// A copy of the next message, which stays ([`Node::dispose`] or
    /// [`Node::extract`] take it).
    pub fn peek(&mut self) -> Result<Message, ExtractError> {
        let c = self.select().ok_or(ExtractError::Empty)?;
        // As in extract; the whole slot is copied, volatile.
        let m = self.current_slot(c).read();
        let hdr = UdmHeader {
            peer: m.peer,
            handler: m.handler,
            nwords: m.nwords,
        };
        let (src, handler, len) = split_header(hdr, c);
        Ok(Message {
            src,
            handler,
            len,
            words: m.words,
        })
    }

    /// Free the current message. With none available:
    /// [`ExtractError::Empty`] (the paper's `bad-dispose`).
    pub fn dispose(&mut self) -> Result<(), ExtractError> {
        let c = self.select().ok_or(ExtractError::Empty)?;
        let (src, _, len) = split_header(UdmHeader::unpack(self.current_slot(c).header()), c);
        self.dispose_current(c, src, len);
        Ok(())
    }

    /// Dispose of the current message `c`, from `src`, of `len` words.
    fn dispose_current(&mut self, c: Cur, src: u32, len: usize) {
        self.current = None;
        match c {
            Cur::Fast(s) => {
                let i = s as usize;
                self.in_tail[i] += 1;
                self.jseg.incoming[i].set_tail(self.in_tail[i]);
                bump_own(&self.line(self.rank).fast_msgs);
            }
            Cur::Buffer => {
                // The engine stamps a buffered message with its source.
                if let Some(n) = self.buffered_from.get_mut(src as usize) {
                    *n += 1;
                }
                self.buf_tail += udm_record_bytes(len);
                self.uncounted += 1;
                bump_own(&self.line(self.rank).buffered_taken);
                if self.uncounted >= TAKE_BATCH || self.buf_tail >= self.buf_clear {
                    self.settle_taken();
                }
            }
        }
    }

    /// Tell the engine and the senders about the buffered messages taken
    /// since the last time: our position in the buffer (the engine gives
    /// pages back behind it and makes room for senders), and the count in
    /// our mode word, which drops by as many (back to the fast case when
    /// it reaches zero with nothing more on its way).
    fn settle_taken(&mut self) {
        if self.uncounted == 0 && self.tail_told == self.buf_tail {
            return;
        }
        let taken = std::mem::take(&mut self.uncounted);
        self.tail_told = self.buf_tail;
        self.header()
            .buf_tail
            .store(self.buf_tail, Ordering::Release);
        // The engine keeps the buffer's pages while it is used, and lets
        // held senders go, for a node that says its tail moved; it looks
        // on its next turn (no wake-up: it gives pages back only once the
        // buffer has been idle a while, by its own clock).
        self.mark_rang(self.rank);
        if taken == 0 {
            // Only pads passed: nothing to take off the count.
            return;
        }
        let mode = &self.line(self.rank).mode;
        let mut m = mode.load(Ordering::Acquire);
        while m & UDM_MODE_COUNT != 0 {
            let next = m - taken.min(m & UDM_MODE_COUNT);
            match mode.compare_exchange_weak(m, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    if next == UDM_MODE_DIVERT {
                        // The last diverted message: back to the fast case.
                        let _ = mode.compare_exchange(
                            UDM_MODE_DIVERT,
                            0,
                            Ordering::AcqRel,
                            Ordering::Relaxed,
                        );
                    }
                    break;
                }
                Err(now) => m = now,
            }
        }
    }

    /// Wait at most `timeout` (None: forever) for a message to be
    /// available: spin briefly, then sleep until a sender or the engine
    /// wakes us. Returns the message-available flag.
    pub fn wait(&mut self, timeout: Option<Duration>) -> bool {
        let start = Instant::now();
        for _ in 0..256 {
            if self.message_available() {
                return true;
            }
            std::hint::spin_loop();
        }
        loop {
            let line = self.line(self.rank);
            let v = line.rx_futex.load(Ordering::Acquire);
            line.rx_sleeping.fetch_add(1, Ordering::Relaxed);
            // Pairs with the senders' light fences (and the engine's full
            // one) after they publish.
            sys::heavy_fence();
            let ready = self.message_available();
            let left = timeout.map(|t| t.saturating_sub(start.elapsed()));
            if !ready && left != Some(Duration::ZERO) {
                let line = self.line(self.rank);
                sys::futex_wait(
                    &line.rx_futex,
                    v,
                    Some(left.map_or(Duration::from_millis(100), |l| {
                        l.min(Duration::from_millis(100))
                    })),
                );
            }
            self.line(self.rank)
                .rx_sleeping
                .fetch_sub(1, Ordering::Relaxed);
            if ready || self.message_available() {
                return true;
            }
            if self.mode() == Mode::Gone {
                return false;
            }
            if timeout.is_some_and(|t| start.elapsed() >= t) {
                return false;
            }
        }
    }

    // ---------------------------------------------------------------------
    // Atomicity
    // ---------------------------------------------------------------------

    /// Begin an atomic section: set the user atomicity bits in `mask`
    /// ([`ATOM_DISABLE`]: no message interrupts; [`ATOM_TIMER_FORCE`]: the
    /// atomicity timer runs even with no message waiting). A store to
    /// shared memory, no system call.
    pub fn beginatom(&mut self, mask: u32) {
        let was = self.uac;
        self.uac |= mask & UDM_ATOM_USER;
        self.line(self.rank).uac.store(self.uac, Ordering::Release);
        if was & ATOM_DISABLE == 0 && self.uac & ATOM_DISABLE != 0 {
            self.announce_atomic();
        }
    }

    /// Tell the engine this node entered an atomic section (`beginatom`,
    /// or its handler thread running handlers): the engine watches it for
    /// the atomicity timeout from then on (it watches only nodes that
    /// told it something, so an idle node costs it nothing).
    pub(crate) fn announce_atomic(&self) {
        self.mark_rang(self.rank);
        self.ring_engine();
    }

    /// End an atomic section: clear the bits in `mask`.
    pub fn endatom(&mut self, mask: u32) {
        self.uac &= !(mask & UDM_ATOM_USER);
        self.line(self.rank).uac.store(self.uac, Ordering::Release);
    }

    /// The user atomicity bits now.
    pub fn atomicity(&self) -> u32 {
        self.uac
    }

    // ---------------------------------------------------------------------
    // State
    // ---------------------------------------------------------------------

    /// This node's delivery mode now.
    pub fn mode(&self) -> Mode {
        mode_of(self.line(self.rank).mode.load(Ordering::Acquire))
    }

    /// Node `rank`'s delivery mode now, as its mode word says.
    pub fn mode_of(&self, rank: u32) -> Mode {
        mode_of(self.line(rank).mode.load(Ordering::Acquire))
    }

    /// This node's counters: its own and the engine's.
    pub fn stats(&self) -> NodeStats {
        let line = self.line(self.rank);
        let h = self.header();
        NodeStats {
            fast_msgs: line.fast_msgs.load(Ordering::Relaxed),
            buffered_taken: line.buffered_taken.load(Ordering::Relaxed),
            switch_queue_full: line.switch_queue_full.load(Ordering::Relaxed),
            overflow_holds: line.overflow_holds.load(Ordering::Relaxed),
            upcalls: line.upcalls.load(Ordering::Relaxed),
            no_handler: line.no_handler.load(Ordering::Relaxed),
            dispose_failures: line.dispose_failures.load(Ordering::Relaxed),
            handler_panics: line.handler_panics.load(Ordering::Relaxed),
            engine: std::array::from_fn(|i| h.counters[i].load(Ordering::Relaxed)),
        }
    }

    /// Bytes of memory the node's virtual buffer holds now (its memory
    /// file's allocated blocks).
    pub fn buffer_memory(&self) -> std::io::Result<u64> {
        self.buf.segment().allocated_bytes()
    }

    /// Leave the job: senders to this node get [`InjectError::Gone`]; its
    /// messages are discarded. Dropping the node does the same.
    pub fn leave(mut self) -> Result<(), Error> {
        self.leave_now()
    }

    fn leave_now(&mut self) -> Result<(), Error> {
        if std::mem::replace(&mut self.left, true) {
            return Ok(());
        }
        let req = Request::UdmLeave {
            job: self.job,
            rank: self.rank,
        };
        match self.session.inner.request(&req)?.0 {
            Reply::Ok => Ok(()),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to udm leave: {r:?}"
            ))),
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.leave_now();
    }
}

fn mode_of(m: u64) -> Mode {
    if m & UDM_MODE_GONE != 0 {
        Mode::Gone
    } else if m & UDM_MODE_DIVERT != 0 {
        Mode::Buffered
    } else {
        Mode::Fast
    }
}

/// Source, handler and length from a message's first 8 bytes (peer,
/// handler, nwords, little-endian); the length capped at [`MAX_WORDS`]
/// (a peer may write anything into a fast ring). A fast message's source
/// is the ring's sender, whatever the slot says.
fn split_header(h: UdmHeader, c: Cur) -> (u32, u16, usize) {
    let src = match c {
        Cur::Fast(s) => s,
        Cur::Buffer => h.peer,
    };
    let handler = h.handler;
    let len = (h.nwords as usize).min(MAX_WORDS);
    (src, handler, len)
}

/// Write a message into `slot`, which we own until we publish it: words
/// first, then the header word (peer, handler, nwords) in one store.
fn write_msg(slot: Slot<'_>, peer: u32, handler: u16, stamp: u64, words: Words<'_>) {
    let hdr = UdmHeader {
        peer,
        handler,
        nwords: words.get().len() as u16,
    }
    .pack();
    slot.write(hdr, stamp, words);
}

/// Add one to a counter others update too.
fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Buffered messages taken before the node tells the engine and the
/// senders (it also tells them whenever the buffer runs out).
const TAKE_BATCH: u64 = 16;

/// Tries of a waiting inject at a full fast ring, its receiver's position
/// unchanged, before the sender tells the engine (about [`backoff`]'s
/// spinning phase: a receiver that keeps up frees a slot sooner).
const STALL_TELL: u32 = 16;

/// Add one to a counter only this node writes.
fn bump_own(c: &AtomicU64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

/// Wait a little before trying again: spin, then yield the CPU (the node
/// or engine we wait for may need it), then sleep up to a millisecond.
fn backoff(n: u32) {
    if n < 16 {
        std::hint::spin_loop();
    } else if n < 256 {
        std::thread::yield_now();
    } else {
        let us = (50u64 << ((n - 256) / 64).min(5)).min(1000);
        std::thread::sleep(Duration::from_micros(us));
    }
}

const _: () = {
    // The header word written by write_msg is the slot's first 8 bytes.
    assert!(std::mem::offset_of!(UdmMsg, peer) == 0);
    assert!(std::mem::offset_of!(UdmMsg, handler) == 4);
    assert!(std::mem::offset_of!(UdmMsg, nwords) == 6);
};
