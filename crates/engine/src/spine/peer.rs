//! SPINE's peer-to-peer message queues: [`PeerLink`], one adapter's end
//! of a peer segment (its layout, the rings' protocol and where bulk data
//! lies are `unet_abi::peer`'s), so that a handler on one adapter sends
//! to a handler on another with no host application on the path.
//!
//! A link is made from a segment's descriptor and a side (0 or 1).
//! [`PeerLink::push`] puts a message on the ring this side writes and
//! never blocks (`Full`, `Dead` or `Invalid`); [`PeerLink::pop`] hands
//! each message waiting on the other ring to a closure, in place
//! (header, arguments, bulk data), at most a given number per call;
//! [`PeerLink::check`] looks at the peer and says [`PeerState::Alive`]
//! or `Dead` with the reason.
//!
//! # What is trusted
//!
//! Nothing in the segment: the client that made it and the other adapter
//! can both write all of it. The link keeps its own positions and never
//! reads them back; what it reads of the peer's (`head`, `tail`,
//! `data_tail`) must lie between what it saw last and what it knows was
//! sent, and each slot's header is copied out once and checked (its
//! arguments' length, its flags, its bulk length) before anything is
//! handed on. A bad message is dropped and counted ([`PeerDrop`]); a
//! position out of bounds, or a bulk length that would put the data
//! streams out of step, breaks the link ([`Death::Broken`]). Whatever the
//! segment holds, every byte the link touches lies inside its rings and
//! data areas, and nothing waits on the peer.
//!
//! # Death
//!
//! The peer is dead when its `closed` flag is set (its link was dropped,
//! in this process or another), when its process has exited (a pidfd of
//! the pid it wrote when it attached: [`PeerLink::death_fd`] polls
//! readable then), or when messages have waited for it longer than the
//! stall timeout while its heartbeat (bumped on every pop) stood still.
//! Then the messages waiting for it are dropped and counted, sends fail
//! with `Dead`, what it had published before it died can still be popped
//! (unless the link broke), and this side marks itself closed. A new
//! segment joins the same two adapters again.
//!
//! # Waking
//!
//! A consumer that sleeps says so first (its `sleeping` word), after
//! bumping its futex word; a push that sees the flag bumps the futex word
//! and wakes it (a thread in [`PeerLink::wait`]) and rings the peer's
//! doorbell if this side was given one ([`PeerLink::set_peer_doorbell`]:
//! the eventfd an engine sleeps on, after [`PeerLink::arm`]). A push
//! rings once a sleep: while the futex word still reads what this side's
//! last ring left in it, the consumer has not slept again since, and the
//! ring already made will wake it. A close rings both always.
//!
//! `unsafe` is allowed here for the slots and data areas read and
//! written in place in the segment's mapping, which the link owns.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use unet_abi::copy::copy_bytes;
use unet_abi::peer::{
    bulk_place, AmHeader, PeerConsumerLine, PeerGeometry, PeerLayoutError, PeerSlot, PeerView,
    AM_ARGS_MAX, AM_BULK, PEER_HEADER_SIZE, PEER_MAX_DATA, PEER_MAX_SLOTS,
};
use unet_sys::{self as sys, Segment};

/// How long messages may wait for a peer whose heartbeat stands still
/// before it is declared stalled.
pub(crate) const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(1);

/// Why a peer is dead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Death {
    /// It set its `closed` flag (it dropped its end).
    Closed,
    /// Its process exited.
    Exited,
    /// Messages waited for it past the stall timeout while its heartbeat
    /// stood still.
    Stalled,
    /// The segment broke the rings' protocol.
    Broken(Broken),
}

/// How the segment broke the rings' protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Broken {
    /// The peer's `head` moved back, or more than a ring ahead.
    Head,
    /// The peer's `tail` moved back, or past what was sent.
    Tail,
    /// The peer's `data_tail` moved back, or past what was sent.
    DataTail,
    /// A slot's bulk length is over the link's largest: the data streams
    /// would lose step.
    BulkLen,
}

/// What [`PeerLink::check`] says of the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PeerState {
    /// Nothing says it is dead.
    Alive,
    /// It is dead, for this reason.
    Dead(Death),
}

/// Why a push failed; what the caller should do is in each variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PeerError {
    /// The ring (or the data area) is full: try again later, or drop.
    Full,
    /// The peer is dead: drop, and make a new link to recover.
    Dead(Death),
    /// The message can never go on this link: drop it.
    Invalid(Invalid),
}

/// Why a message can never go on a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Invalid {
    /// More than `AM_ARGS_MAX` bytes of arguments.
    ArgsTooLong(usize),
    /// More bulk data than the link's largest (0 when it has no data
    /// area).
    BulkTooLong(usize),
}

/// Why a message was dropped, one counter each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum PeerDrop {
    /// Received with `args_len` over `AM_ARGS_MAX` (the link goes on).
    BadArgsLen,
    /// Received with flags other than `AM_BULK`, or `AM_BULK` and
    /// `bulk_len` disagreeing (the link goes on).
    BadFlags,
    /// Waiting to the peer when it died.
    DeadOut,
    /// Waiting from the peer when the link broke.
    DeadIn,
}

impl PeerDrop {
    /// Every reason, in counter order.
    pub(crate) const ALL: [PeerDrop; 4] = [
        PeerDrop::BadArgsLen,
        PeerDrop::BadFlags,
        PeerDrop::DeadOut,
        PeerDrop::DeadIn,
    ];
    /// The name `unet stat` shows.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            PeerDrop::BadArgsLen => "bad_args_len",
            PeerDrop::BadFlags => "bad_flags",
            PeerDrop::DeadOut => "dead_out",
            PeerDrop::DeadIn => "dead_in",
        }
    }
}

/// What a link counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PeerStats {
    /// Messages pushed.
    pub sent: u64,
    /// Messages popped and handed on.
    pub received: u64,
    /// Pushes refused because the ring or the data area was full.
    pub full: u64,
    /// Pushes refused as invalid.
    pub invalid: u64,
    /// Messages dropped, by [`PeerDrop`].
    pub drops: [u64; PeerDrop::ALL.len()],
}

impl PeerStats {
    /// Messages dropped for `why`.
    pub(crate) fn dropped(&self, why: PeerDrop) -> u64 {
        self.drops[why as usize]
    }
}

/// What a link is made with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PeerConfig {
    /// See [`DEFAULT_STALL_TIMEOUT`].
    pub stall_timeout: Duration,
    /// A push may pair a compiler fence with its consumer's heavy fence
    /// ([`sys::asymmetric_fences`], when the kernel has them): for a
    /// consumer that sleeps seldom. Off, a push issues a full fence and a
    /// consumer about to sleep needs only a full fence too (an engine
    /// that sleeps whenever a turn finds nothing: a heavy fence is a
    /// system call that interrupts every CPU).
    pub asymmetric: bool,
}

impl Default for PeerConfig {
    fn default() -> Self {
        PeerConfig {
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            asymmetric: true,
        }
    }
}

/// Why a segment could not be attached.
#[derive(Debug)]
pub(crate) enum AttachError {
    /// The descriptor is not a memory file sealed against shrinking.
    NotSealed,
    /// The file is larger than any peer segment.
    TooLarge(u64),
    /// Mapping it failed.
    Io(io::Error),
    /// Its layout is refused.
    Layout(PeerLayoutError),
    /// The side is not 0 or 1.
    BadSide(usize),
    /// The side has been attached (or closed) before.
    SideTaken(usize),
}

impl std::fmt::Display for AttachError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotSealed => f.write_str("not a memory file sealed against shrinking"),
            Self::TooLarge(n) => write!(f, "{n} bytes is larger than any peer segment"),
            Self::Io(e) => write!(f, "mapping the segment: {e}"),
            Self::Layout(e) => write!(f, "peer segment: {e}"),
            Self::BadSide(s) => write!(f, "side {s} is not 0 or 1"),
            Self::SideTaken(s) => write!(f, "side {s} of the segment was attached before"),
        }
    }
}

/// The largest peer segment.
const MAX_SEGMENT: u64 = PeerGeometry {
    slots: PEER_MAX_SLOTS,
    data_size: PEER_MAX_DATA,
}
.segment_size() as u64;

/// One adapter's end of a peer segment.
pub(crate) struct PeerLink {
    /// The view (it points into `_seg`, kept beside it).
    view: PeerView,
    /// This side (0 or 1): it writes ring `side` and reads the other.
    side: usize,
    mask: u64,
    data_size: u32,
    bulk_max: u32,
    // Producer (ring `side`): our positions, and the peer's last seen.
    head: u64,
    /// The head the peer was last shown (`publish`).
    published: u64,
    data_head: u64,
    seen_tail: u64,
    seen_data_tail: u64,
    // Consumer (the other ring).
    tail: u64,
    data_tail: u64,
    seen_head: u64,
    /// Set at death: `seen_head` is final (what the peer published).
    rx_final: bool,
    beat: u64,
    asym: bool,
    // Watching the peer.
    own_pid: u32,
    peer_pid: u32,
    pidfd: Option<OwnedFd>,
    last_beat: u64,
    waiting_since: Option<Instant>,
    stall_timeout: Duration,
    /// The peer's doorbell, rung when it sleeps (an engine's poller).
    doorbell: Option<sys::EventFd>,
    /// The peer's futex word as this side's last ring left it: while the
    /// word still reads so, the peer has not begun another sleep since
    /// (each sleep bumps it), and a push need not ring again.
    rung: Option<u32>,
    dead: Option<Death>,
    stats: PeerStats,
    _seg: Segment,
}

impl PeerLink {
    /// Make a fresh peer segment of `geometry` for link `link_id`, and
    /// return its memory file (to be attached by both sides).
    #[cfg(test)]
    pub(crate) fn create(geometry: PeerGeometry, link_id: u32) -> io::Result<OwnedFd> {
        geometry
            .check()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let seg = Segment::create(&format!("unet-peer-{link_id}"), geometry.segment_size())?;
        // SAFETY: a fresh zeroed segment, not yet shared, page aligned;
        // the view is dropped before the segment (below).
        unsafe { PeerView::init(seg.ptr(), seg.len(), geometry, link_id) }
            .map_err(|e| io::Error::other(e.to_string()))?;
        seg.fd().try_clone()
    }

    /// Attach `side` (0 or 1) of the peer segment in `fd`: check its
    /// layout, reset the lines this side writes, and say who we are.
    pub(crate) fn attach(fd: OwnedFd, side: usize, cfg: PeerConfig) -> Result<Self, AttachError> {
        if side > 1 {
            return Err(AttachError::BadSide(side));
        }
        let len = Segment::sealed_len(&fd).ok_or(AttachError::NotSealed)?;
        if len > MAX_SEGMENT {
            return Err(AttachError::TooLarge(len));
        }
        if len < PEER_HEADER_SIZE as u64 {
            return Err(AttachError::Layout(PeerLayoutError::TooShort {
                len: len as usize,
                need: PEER_HEADER_SIZE as u64,
            }));
        }
        let seg = Segment::open_sealed(fd, len as usize).map_err(AttachError::Io)?;
        // SAFETY: the mapping is `seg.len()` bytes, kept in the link with
        // the view and dropped after it.
        let view =
            unsafe { PeerView::from_segment(seg.ptr(), seg.len()) }.map_err(AttachError::Layout)?;
        let me = view.side(side);
        if me.epoch.load(Ordering::Acquire) != 0 || me.closed.load(Ordering::Acquire) != 0 {
            return Err(AttachError::SideTaken(side));
        }
        // Our lines start where our positions do.
        view.lines(side).producer.head.store(0, Ordering::Relaxed);
        let c = &view.lines(side ^ 1).consumer;
        c.tail.store(0, Ordering::Relaxed);
        c.data_tail.store(0, Ordering::Relaxed);
        c.sleeping.store(0, Ordering::Relaxed);
        let own_pid = std::process::id();
        me.heartbeat.store(0, Ordering::Relaxed);
        me.pid.store(own_pid, Ordering::Relaxed);
        // Release: the lines above are in place before the peer sees us.
        me.epoch.fetch_add(1, Ordering::Release);
        let g = view.geometry;
        Ok(PeerLink {
            mask: g.slots as u64 - 1,
            data_size: g.data_size,
            bulk_max: g.bulk_max(),
            view,
            side,
            head: 0,
            published: 0,
            data_head: 0,
            seen_tail: 0,
            seen_data_tail: 0,
            tail: 0,
            data_tail: 0,
            seen_head: 0,
            rx_final: false,
            beat: 0,
            asym: cfg.asymmetric && sys::asymmetric_fences(),
            own_pid,
            peer_pid: 0,
            pidfd: None,
            last_beat: 0,
            waiting_since: None,
            stall_timeout: cfg.stall_timeout,
            doorbell: None,
            rung: None,
            dead: None,
            stats: PeerStats::default(),
            _seg: seg,
        })
    }

    /// This side (0 or 1).
    pub(crate) fn side(&self) -> usize {
        self.side
    }

    /// What the link has counted.
    pub(crate) fn stats(&self) -> &PeerStats {
        &self.stats
    }

    /// The largest bulk data a message may carry on this link.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn bulk_max(&self) -> u32 {
        self.bulk_max
    }

    /// The peer's process id, once it is known (0 before).
    pub(crate) fn peer_pid(&self) -> u32 {
        self.peer_pid
    }

    /// Messages sent and not yet taken by the peer, as far as this side
    /// last saw (for `unet stat`'s depth).
    pub(crate) fn depth(&self) -> u64 {
        self.head - self.seen_tail
    }

    /// A descriptor that polls readable once the peer's process has
    /// exited, when one is known (after a [`PeerLink::check`] that found
    /// the peer attached, from another process): the engine's poller
    /// may wait on it and then call `check`.
    pub(crate) fn death_fd(&self) -> Option<BorrowedFd<'_>> {
        self.pidfd.as_ref().map(|f| f.as_fd())
    }

    /// Put a message on the ring to the peer and publish it
    /// ([`PeerLink::put`], then [`PeerLink::publish`]). Never blocks.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn push(
        &mut self,
        hdr: AmHeader,
        args: &[u8],
        bulk: &[u8],
    ) -> Result<(), PeerError> {
        self.put(hdr, args, bulk)?;
        self.publish();
        Ok(())
    }

    /// Write a message into the ring to the peer, which does not see it
    /// before [`PeerLink::publish`] (a batch of puts is published once:
    /// one store of the head and one fence). Its header's `handler`,
    /// `src_kind` and `src` are the caller's; `args_len`, `flags`
    /// (`AM_BULK` when `bulk` is not empty) and `bulk_len` are set from
    /// the slices. Never blocks.
    pub(crate) fn put(&mut self, hdr: AmHeader, args: &[u8], bulk: &[u8]) -> Result<(), PeerError> {
        if let Some(d) = self.dead {
            return Err(PeerError::Dead(d));
        }
        if args.len() > AM_ARGS_MAX {
            self.stats.invalid += 1;
            return Err(PeerError::Invalid(Invalid::ArgsTooLong(args.len())));
        }
        if bulk.len() > self.bulk_max as usize {
            self.stats.invalid += 1;
            return Err(PeerError::Invalid(Invalid::BulkTooLong(bulk.len())));
        }
        if self.head - self.seen_tail > self.mask {
            self.refresh_tail()?;
            if self.head - self.seen_tail > self.mask {
                self.stats.full += 1;
                return Err(PeerError::Full);
            }
        }
        let blen = bulk.len() as u32;
        let (start, end) = bulk_place(self.data_head, blen, self.data_size);
        if blen > 0 {
            if end - self.seen_data_tail > self.data_size as u64 {
                self.refresh_data_tail()?;
                if end - self.seen_data_tail > self.data_size as u64 {
                    self.stats.full += 1;
                    return Err(PeerError::Full);
                }
            }
            let off = (start & (self.data_size as u64 - 1)) as usize;
            // SAFETY: bulk_place keeps [off, off + blen) inside the data
            // area (blen <= bulk_max <= data_size), which lies in our
            // mapping; the source is the caller's slice, never in the
            // area (the link alone writes it on this side).
            unsafe {
                copy_bytes(
                    bulk.as_ptr(),
                    self.view.data(self.side).as_ptr().add(off),
                    bulk.len(),
                )
            };
        }
        let h = AmHeader {
            args_len: args.len() as u16,
            flags: if blen > 0 { AM_BULK } else { 0 },
            bulk_len: blen,
            reserved: 0,
            ..hdr
        };
        let slot = self.slot(self.side, self.head);
        // SAFETY: the slot lies in our ring (index masked); the peer does
        // not read it until `head` is published (`publish`); args fit in
        // it.
        unsafe {
            std::ptr::addr_of_mut!((*slot.as_ptr()).hdr).write_volatile(h);
            let dst = std::ptr::addr_of_mut!((*slot.as_ptr()).args).cast::<u8>();
            copy_bytes(args.as_ptr(), dst, args.len());
        }
        self.head += 1;
        self.data_head = end;
        self.stats.sent += 1;
        Ok(())
    }

    /// Whether messages were put and not yet published.
    pub(crate) fn unpublished(&self) -> bool {
        self.head != self.published
    }

    /// Let the peer see the messages put since the last publish, and ring
    /// it if it sleeps.
    pub(crate) fn publish(&mut self) {
        if !self.unpublished() {
            return;
        }
        self.published = self.head;
        // Release: the slots and their data are written before the peer
        // sees the new head (pairs with the Acquire load in `pop`).
        let lines = self.view.lines(self.side);
        lines.producer.head.store(self.head, Ordering::Release);
        // Pairs with the heavy fence in the peer's `wait`: either it sees
        // the new head when it looks again, or we see its flag.
        sys::light_fence(self.asym);
        // Acquire: a sleep begun after this side's last ring bumped the
        // futex word before it set the flag, and that bump is seen below.
        if lines.consumer.sleeping.load(Ordering::Acquire) != 0
            && Some(lines.consumer.futex.load(Ordering::Relaxed)) != self.rung
        {
            self.ring_peer();
        }
    }

    /// Wake the peer: its doorbell (an engine asleep in its poller) if it
    /// gave one, its futex (a thread in [`PeerLink::wait`]) otherwise.
    /// Once a sleep: the pushes after the first that find the peer still
    /// in the sleep this side rang it out of ring no more (a batch of
    /// frames handed to an adapter that shares the core would otherwise
    /// ring once a frame, a system call each).
    fn ring_peer(&mut self) {
        let c = &self.view.lines(self.side).consumer;
        self.rung = Some(c.futex.fetch_add(1, Ordering::Release).wrapping_add(1));
        match &self.doorbell {
            Some(d) => d.notify(),
            None => sys::futex_wake(&c.futex, 1),
        }
    }

    /// Ring `doorbell` when the peer sleeps (armed) and this side sends
    /// to it or closes: the eventfd the peer's engine sleeps on, passed
    /// to this side at set-up.
    pub(crate) fn set_peer_doorbell(&mut self, doorbell: sys::EventFd) {
        self.doorbell = Some(doorbell);
    }

    /// Say (`on`, before this side's engine sleeps) or unsay that this
    /// side sleeps: the peer then rings its doorbell when it sends. The
    /// peer's side of the handshake is a light fence
    /// ([`sys::light_fence`]), so the caller issues a full fence (links
    /// made with `asymmetric` off on both sides) or [`sys::heavy_fence`]
    /// after arming its links and before its last look
    /// ([`PeerLink::has_messages`]).
    pub(crate) fn arm(&self, on: bool) {
        let c = &self.view.lines(self.side ^ 1).consumer;
        if on {
            begin_sleep(c);
        } else {
            c.sleeping.store(0, Ordering::Relaxed);
        }
    }

    /// Hand at most `max` waiting messages to `f` (header, arguments,
    /// bulk data; the slices lie in the segment and live for the call),
    /// in order, and return how many were handed on. Bad messages are
    /// dropped and counted; a broken segment kills the link.
    pub(crate) fn pop(&mut self, max: usize, mut f: impl FnMut(&AmHeader, &[u8], &[u8])) -> usize {
        if matches!(self.dead, Some(Death::Broken(_))) {
            return 0;
        }
        self.beat += 1;
        self.view
            .side(self.side)
            .heartbeat
            .store(self.beat, Ordering::Relaxed);
        if self.tail == self.seen_head && !self.rx_final {
            // Acquire: the slots below it, and their data, are written
            // (pairs with the Release store in the peer's push).
            let h = self
                .view
                .lines(self.side ^ 1)
                .producer
                .head
                .load(Ordering::Acquire);
            if h.wrapping_sub(self.tail) > self.mask + 1 {
                self.die(Death::Broken(Broken::Head));
                return 0;
            }
            self.seen_head = h;
        }
        let rx = self.side ^ 1;
        let n = (self.seen_head - self.tail).min(max as u64);
        let mut done = 0;
        for _ in 0..n {
            let slot = self.slot(rx, self.tail);
            // SAFETY: the slot lies in the peer's ring (index masked);
            // its header is copied out once, any bits are a header.
            let h = unsafe { std::ptr::addr_of!((*slot.as_ptr()).hdr).read_volatile() };
            if h.bulk_len > self.bulk_max {
                self.die(Death::Broken(Broken::BulkLen));
                break;
            }
            self.tail += 1;
            let (start, end) = bulk_place(self.data_tail, h.bulk_len, self.data_size);
            self.data_tail = end;
            let args_len = h.args_len as usize;
            if args_len > AM_ARGS_MAX {
                self.stats.drops[PeerDrop::BadArgsLen as usize] += 1;
                continue;
            }
            if h.flags & !AM_BULK != 0 || (h.flags & AM_BULK != 0) != (h.bulk_len != 0) {
                self.stats.drops[PeerDrop::BadFlags as usize] += 1;
                continue;
            }
            // SAFETY: args_len <= AM_ARGS_MAX bytes of the slot's
            // arguments, in the ring; the bytes may change under a hostile
            // writer, which can only give other bytes (the slices are read
            // as plain bytes for the length of the call, as an endpoint's
            // buffer area is).
            let args = unsafe {
                let p = std::ptr::addr_of!((*slot.as_ptr()).args).cast::<u8>();
                std::slice::from_raw_parts(p, args_len)
            };
            let bulk: &[u8] = if h.bulk_len == 0 {
                &[]
            } else {
                let off = (start & (self.data_size as u64 - 1)) as usize;
                // SAFETY: bulk_place keeps [off, off + bulk_len) inside the
                // data area (bulk_len <= bulk_max <= data_size, checked),
                // in our mapping; the peer does not reuse it before we
                // store data_tail past it (after the loop). Plain bytes,
                // as above.
                unsafe {
                    std::slice::from_raw_parts(
                        self.view.data(rx).as_ptr().add(off),
                        h.bulk_len as usize,
                    )
                }
            };
            f(&h, args, bulk);
            done += 1;
        }
        self.stats.received += done as u64;
        if n > 0 {
            // Release: our reads of the slots and data below are done
            // before the peer reuses them (pairs with its Acquire loads).
            let c = &self.view.lines(rx).consumer;
            c.tail.store(self.tail, Ordering::Release);
            c.data_tail.store(self.data_tail, Ordering::Release);
        }
        done
    }

    /// Whether messages wait on the ring from the peer (as far as its
    /// head says now).
    pub(crate) fn has_messages(&self) -> bool {
        if self.tail != self.seen_head {
            return true;
        }
        !self.rx_final
            && self
                .view
                .lines(self.side ^ 1)
                .producer
                .head
                .load(Ordering::Acquire)
                != self.tail
    }

    /// Sleep until a message waits from the peer, the peer closes, or
    /// `timeout` passes (or a spurious wake-up). For a consumer that is
    /// a thread of its own; an engine waits in its poller instead.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn wait(&mut self, timeout: Duration) {
        if self.dead.is_some() || self.has_messages() {
            return;
        }
        let c = &self.view.lines(self.side ^ 1).consumer;
        begin_sleep(c);
        let seen = c.futex.load(Ordering::Acquire);
        // Pairs with the producer's light fence after it publishes: either
        // we see its head now, or it sees our flag and wakes us.
        sys::heavy_fence();
        let closed = self.view.side(self.side ^ 1).closed.load(Ordering::Acquire) != 0;
        if !closed && !self.has_messages() {
            sys::futex_wait(&c.futex, seen, Some(timeout));
        }
        c.sleeping.store(0, Ordering::Relaxed);
    }

    /// Look at the peer: its `closed` flag, its process, and, while
    /// messages wait for it, its heartbeat (`now` is the caller's clock).
    /// Cheap but not free (a `poll` of the pidfd): call it on a timer, or
    /// when [`PeerLink::death_fd`] polls readable.
    pub(crate) fn check(&mut self, now: Instant) -> PeerState {
        if let Some(d) = self.dead {
            return PeerState::Dead(d);
        }
        let peer = self.view.side(self.side ^ 1);
        let closed = peer.closed.load(Ordering::Acquire) != 0;
        let attached = peer.epoch.load(Ordering::Acquire) != 0;
        let pid = peer.pid.load(Ordering::Relaxed);
        let beat = peer.heartbeat.load(Ordering::Relaxed);
        if closed {
            return self.die(Death::Closed);
        }
        if self.peer_pid == 0 && attached && pid != 0 {
            // The pid is read once, when the peer has attached. A lie
            // only names another process to watch; the heartbeat still
            // catches a peer that stops.
            self.peer_pid = pid;
            if pid != self.own_pid {
                match sys::pidfd_open(pid) {
                    Ok(fd) => self.pidfd = Some(fd),
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                        return self.die(Death::Exited)
                    }
                    Err(_) => {}
                }
            }
        }
        if let Some(fd) = &self.pidfd {
            if sys::wait_readable(fd.as_raw_fd(), Some(Duration::ZERO)).unwrap_or(false) {
                return self.die(Death::Exited);
            }
        }
        let waiting = self.head != self.seen_tail && {
            if let Err(PeerError::Dead(d)) = self.refresh_tail() {
                return PeerState::Dead(d);
            }
            self.head != self.seen_tail
        };
        if !waiting {
            self.last_beat = beat;
            self.waiting_since = None;
        } else if beat != self.last_beat {
            // It is consuming: the clock starts again now.
            self.last_beat = beat;
            self.waiting_since = Some(now);
        } else {
            let since = *self.waiting_since.get_or_insert(now);
            if now.saturating_duration_since(since) > self.stall_timeout {
                return self.die(Death::Stalled);
            }
        }
        PeerState::Alive
    }

    /// The peer is dead: count what waited for it (and, if the link
    /// broke, what waited from it), freeze what it published, and mark
    /// this side closed.
    fn die(&mut self, why: Death) -> PeerState {
        if let Some(d) = self.dead {
            return PeerState::Dead(d);
        }
        self.dead = Some(why);
        // What the peer took of ours: its tail if it is within bounds.
        let t = self
            .view
            .lines(self.side)
            .consumer
            .tail
            .load(Ordering::Acquire);
        if t.wrapping_sub(self.seen_tail) <= self.head - self.seen_tail {
            self.seen_tail = t;
        }
        self.stats.drops[PeerDrop::DeadOut as usize] += self.head - self.seen_tail;
        // What it published for us, final now.
        if !matches!(why, Death::Broken(Broken::Head)) {
            let h = self
                .view
                .lines(self.side ^ 1)
                .producer
                .head
                .load(Ordering::Acquire);
            if h.wrapping_sub(self.tail) <= self.mask + 1 {
                self.seen_head = h;
            }
        }
        self.seen_head = self.seen_head.max(self.tail);
        self.rx_final = true;
        if let Death::Broken(_) = why {
            self.stats.drops[PeerDrop::DeadIn as usize] += self.seen_head - self.tail;
            self.tail = self.seen_head;
        }
        self.close_own();
        PeerState::Dead(why)
    }

    /// Mark this side closed and wake the peer if it sleeps on our ring.
    fn close_own(&mut self) {
        // What was put goes before the close.
        self.publish();
        let me = self.view.side(self.side);
        me.closed.store(1, Ordering::Release);
        self.ring_peer();
    }

    /// Read the peer's tail of our ring; it must lie between what we saw
    /// last and what we sent.
    fn refresh_tail(&mut self) -> Result<(), PeerError> {
        let t = self
            .view
            .lines(self.side)
            .consumer
            .tail
            .load(Ordering::Acquire);
        if t.wrapping_sub(self.seen_tail) > self.head - self.seen_tail {
            self.die(Death::Broken(Broken::Tail));
            return Err(PeerError::Dead(Death::Broken(Broken::Tail)));
        }
        self.seen_tail = t;
        Ok(())
    }

    /// Read the peer's data tail of our data area (as `refresh_tail`).
    fn refresh_data_tail(&mut self) -> Result<(), PeerError> {
        let c = &self.view.lines(self.side).consumer;
        let t = c.data_tail.load(Ordering::Acquire);
        if t.wrapping_sub(self.seen_data_tail) > self.data_head - self.seen_data_tail {
            self.die(Death::Broken(Broken::DataTail));
            return Err(PeerError::Dead(Death::Broken(Broken::DataTail)));
        }
        self.seen_data_tail = t;
        Ok(())
    }

    #[inline]
    fn slot(&self, ring: usize, pos: u64) -> NonNull<PeerSlot> {
        // SAFETY: the index is masked into the ring's slots, which lie in
        // the mapping (checked by the view).
        unsafe { self.view.ring(ring).add((pos & self.mask) as usize) }
    }
}

/// A consumer begins a sleep on its ring: it bumps the futex word, so
/// that the producer's next push rings it once more (see
/// [`PeerLink::ring_peer`]), then sets `sleeping` (Release: a producer
/// that sees the flag sees the bump).
fn begin_sleep(c: &PeerConsumerLine) {
    c.futex.fetch_add(1, Ordering::Relaxed);
    c.sleeping.store(1, Ordering::Release);
}

impl Drop for PeerLink {
    fn drop(&mut self) {
        self.close_own();
    }
}

#[cfg(test)]
mod bench;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod two_process;
