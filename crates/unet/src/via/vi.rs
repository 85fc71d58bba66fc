//! The VI: one end of a connection ([`Vi`]), its core owned or shared
//! with the completion queues it reports to.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use unet_abi::ViError;
use unet_control::{Reply, Request};
use unet_sys as sys;

use crate::session::Inner;
use crate::{Error, Session};

use super::desc::{grant, Done, PostError, ViCompletion, ViQueue, ViState, WaitError};
use super::region::{MemRegion, ViSeg};
use super::vi_core::{Core, DirectLoan, DirectReturn, LendRefusal, ViPath, ViStats};
use super::{lock, ViAttributes};

/// Where a VI's core lives: in the VI (no lock), or shared with the
/// completion queues it reports to (which move it on while they wait).
///
/// An own core lies in the VI itself, not behind a box: every call then
/// reaches it with one pointer less, which a caller through the C ABI
/// (whose handle is a pointer already) pays in a cache miss whenever a
/// message's copy has pushed the VI out of the first-level cache (one
/// thread draining 4 KiB messages through bare downcalls: 186-192 ns a
/// message with the box, 182-187 without). A VI is moved only when made.
#[allow(clippy::large_enum_variant)]
pub(super) enum CoreCell {
    Own(Core),
    Shared(Arc<Mutex<Core>>),
}

pub(super) enum CoreRef<'a> {
    Own(&'a mut Core),
    Shared(MutexGuard<'a, Core>),
}

impl CoreCell {
    /// The core, locked if shared.
    #[inline(always)]
    fn get(&mut self) -> CoreRef<'_> {
        match self {
            CoreCell::Own(c) => CoreRef::Own(c),
            CoreCell::Shared(c) => CoreRef::Shared(lock(c)),
        }
    }
}

impl std::ops::Deref for CoreRef<'_> {
    type Target = Core;
    fn deref(&self) -> &Core {
        match self {
            CoreRef::Own(c) => c,
            CoreRef::Shared(g) => g,
        }
    }
}

impl std::ops::DerefMut for CoreRef<'_> {
    fn deref_mut(&mut self) -> &mut Core {
        match self {
            CoreRef::Own(c) => c,
            CoreRef::Shared(g) => g,
        }
    }
}

/// [`Vi::with`] for a core shared with completion queues: out of line,
/// so that the own core's code is not twice as long.
#[inline(never)]
pub(super) fn with_shared<R>(
    m: &Mutex<Core>,
    session: &Arc<Inner>,
    f: impl FnOnce(&mut Core, &Arc<Inner>) -> R,
) -> R {
    f(&mut lock(m), session)
}

/// One end of a VIA connection (see the module documentation).
pub struct Vi {
    pub(super) session: Session,
    pub(super) core: CoreCell,
    pub(super) id: u32,
    pub(super) closed: bool,
}

impl std::fmt::Debug for Vi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vi").field("id", &self.id).finish()
    }
}

impl Vi {
    #[inline(always)]
    fn core(&mut self) -> CoreRef<'_> {
        self.core.get()
    }

    /// Run `f` on the core (and the VI's session), locked if shared. The
    /// hot paths use this rather than [`Vi::core`]: `f` sees a plain
    /// `&mut Core`, so the code of an own core reaches its fields with no
    /// guard to look through at each access.
    #[inline(always)]
    fn with<R>(&mut self, f: impl FnOnce(&mut Core, &Arc<Inner>) -> R) -> R {
        match &mut self.core {
            CoreCell::Own(c) => f(c, &self.session.inner),
            CoreCell::Shared(m) => with_shared(m, &self.session.inner, f),
        }
    }

    /// The VI's id in its engine (what completion queues report).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Whether its messages go straight between the two processes (a
    /// local VI on the direct path), not through the engines.
    pub fn is_direct(&mut self) -> bool {
        matches!(self.core().path, ViPath::Direct(_))
    }

    /// The attributes it was made with.
    pub fn attributes(&mut self) -> ViAttributes {
        self.core().attrs.clone()
    }

    /// Connected, or broken and why.
    pub fn state(&mut self) -> ViState {
        let mut c = self.core();
        c.progress();
        c.state
    }

    /// What it has counted.
    pub fn stats(&mut self) -> ViStats {
        self.core().stats
    }

    /// What the engine counts of a VI it carries to another engine
    /// (retransmissions, duplicates and arrivals out of order,
    /// acks, messages held, ...), by name; empty for a local VI.
    pub fn engine_counters(&mut self) -> Vec<(&'static str, u64)> {
        let c = self.core();
        match &c.path {
            ViPath::Direct(_) => Vec::new(),
            ViPath::Engine(e) => unet_abi::ViCounter::ALL
                .iter()
                .map(|&k| {
                    (
                        k.name(),
                        e.header().counters[k as usize].load(Ordering::Relaxed),
                    )
                })
                .collect(),
        }
    }

    /// Lend a local VI's data path to code that reads and writes its rings
    /// itself (the C ABI's `unet_vi_direct_lend`, for bindings such as
    /// Javia whose calls into this library cost more than the ring's
    /// work): the rings, the lines the borrower reads and writes and the
    /// positions it starts from. Receives posted (at most
    /// `recv_ids.len()`) go to the borrower: their numbers, in order, in
    /// `recv_ids`, and how many (their memory is the borrower's to keep
    /// registered from then on). Only with nothing else outstanding (no
    /// send posted, no completion untaken), on a connected VI on the
    /// direct path without completion queues, neither of reliable
    /// reception nor strict about receives not posted. Until
    /// [`Vi::take_back_direct`] the borrower alone moves the positions:
    /// nothing else may be called on the VI.
    pub(crate) fn lend_direct(
        &mut self,
        recv_ids: &mut [u64],
    ) -> Result<(DirectLoan, usize), LendRefusal> {
        self.with(|c, _| c.lend(recv_ids))
    }

    /// Take a lent data path back at the positions the borrower reached,
    /// counting what it sent and placed. Positions the ring's rules
    /// cannot produce break the VI ([`ViError::Broken`]).
    pub(crate) fn take_back_direct(&mut self, r: &DirectReturn) {
        self.with(|c, _| c.take_back(r));
    }

    /// Sleep on a lent direct path's receiving ring for its borrower (see
    /// `DirectConn::sleep_lent`): false for a position it cannot have
    /// reached.
    pub(crate) fn sleep_lent(&mut self, rx_pos: u64, placed: u64, timeout: Duration) -> bool {
        self.with(|c, _| match &c.path {
            ViPath::Direct(conn) => conn.sleep_lent(rx_pos, placed, timeout),
            ViPath::Engine(_) => false,
        })
    }

    /// Grant `region` to the peer for a borrower's large sends (once per
    /// region and VI). False if the engine refused (send the message by
    /// copy then), or the region belongs to another session.
    pub(crate) fn grant_lent(&mut self, region: &MemRegion) -> bool {
        if !Arc::ptr_eq(&region.inner.session.inner, &self.session.inner) {
            return false;
        }
        self.with(|c, _| grant(&mut c.granted, &c.session, c.id, region.handle()))
    }

    /// The peer's region `handle`, mapped, for a borrower reading a
    /// reference record, and the region unmapped to make room for it if
    /// one was (the borrower forgets that one): valid until it is let go
    /// so or the path is returned. None if the engine refuses it.
    pub(crate) fn peer_region_lent(
        &mut self,
        handle: u32,
    ) -> Option<(*const u8, usize, Option<u32>)> {
        self.with(|c, _| c.peer_region(handle))
    }

    /// Wake the peer of a lent direct path, which the borrower saw asleep
    /// after it published a message.
    pub(crate) fn wake_direct_peer(&mut self) {
        self.with(|c, _| {
            if let ViPath::Direct(conn) = &c.path {
                conn.wake_peer();
            }
        });
    }

    /// Post a send descriptor: the bytes of `segs`, gathered in order into
    /// one message, completing with number `id`. A descriptor that names
    /// memory outside its region (or too many segments or bytes) is
    /// posted, and breaks the VI: it completes with
    /// [`ViError::BadDescriptor`].
    #[inline]
    pub fn post_send(&mut self, id: u64, segs: &[ViSeg<'_>]) -> Result<(), PostError> {
        self.with(
            #[inline(always)]
            |core, session| {
                if core.try_send_now(id, segs, session).is_some() {
                    return Ok(());
                }
                core.post(ViQueue::Send, id, segs, session)
            },
        )
    }

    /// Send `data` from ordinary (unregistered) memory, copied once
    /// during the call, when that can be done now: on a local VI whose
    /// direct ring has room, with no send posted before it and room for
    /// its completion. Returns `false` (nothing sent) otherwise, for
    /// example on a VI between engines, whose engine reads only registered
    /// memory: the caller then copies `data` into a region and posts it
    /// with [`Vi::post_send`]. The send completes with number `id` as a
    /// posted one does.
    #[inline]
    pub fn send_copied(&mut self, id: u64, data: &[u8]) -> bool {
        self.with(
            #[inline(always)]
            |core, _| core.try_send_copied(id, data).is_some(),
        )
    }

    /// Post a receive descriptor: the next message is scattered into
    /// `segs` in order, completing with number `id` and its length.
    #[inline]
    pub fn post_recv(&mut self, id: u64, segs: &[ViSeg<'_>]) -> Result<(), PostError> {
        self.with(
            #[inline(always)]
            |core, session| {
                if core.try_post_recv_now(id, segs, session).is_some() {
                    return Ok(());
                }
                core.post(ViQueue::Recv, id, segs, session)
            },
        )
    }

    /// The next completed send descriptor, if any (VIA's `VipSendDone`).
    #[inline]
    pub fn send_done(&mut self) -> Option<ViCompletion> {
        // The completion travels as plain words to where the answer is
        // built (see `Done`): a completion made just before and copied
        // whole would wait for its stores to drain.
        let mut d = Done::default();
        let got = self.with(
            #[inline(always)]
            |c, _| {
                c.take(ViQueue::Send, &mut d) || {
                    c.progress();
                    c.take(ViQueue::Send, &mut d)
                }
            },
        );
        got.then(|| d.get())
    }

    /// The next completed receive descriptor, if any (`VipRecvDone`).
    #[inline]
    pub fn recv_done(&mut self) -> Option<ViCompletion> {
        let mut d = Done::default();
        self.poll_recv(&mut d).then(|| d.get())
    }

    /// [`Vi::recv_done`] into `d`.
    #[inline(always)]
    fn poll_recv(&mut self, d: &mut Done) -> bool {
        self.with(
            #[inline(always)]
            |c, _| {
                c.take(ViQueue::Recv, d) || c.recv_now(d) || {
                    c.progress();
                    c.take(ViQueue::Recv, d)
                }
            },
        )
    }

    /// Wait at most `timeout` (None: forever) for the next completed send
    /// descriptor (`VipSendWait`).
    #[inline(always)]
    pub fn send_wait(&mut self, timeout: Option<Duration>) -> Result<ViCompletion, WaitError> {
        let mut d = Done::default();
        self.wait(ViQueue::Send, timeout, &mut d)?;
        Ok(d.get())
    }

    /// Wait at most `timeout` (None: forever) for the next completed
    /// receive descriptor (`VipRecvWait`): spins a little, then sleeps
    /// until a message or the peer's going wakes it.
    #[inline(always)]
    pub fn recv_wait(&mut self, timeout: Option<Duration>) -> Result<ViCompletion, WaitError> {
        // The completion travels as plain words in `d` and is made here,
        // in the caller, whether or not the work below is inlined: a
        // completion returned whole from a function that is not would be
        // copied through memory and read back with loads wider than the
        // stores that wrote it, each waiting for those stores to drain (a
        // store-forwarding stall on the path from the message to its
        // answer: 20-30 ns a round trip in a local ping-pong whose caller
        // passes the result on with `?`, which made the compiler keep the
        // whole wait out of line).
        let mut d = Done::default();
        self.recv_wait_into(timeout, &mut d)?;
        Ok(d.get())
    }

    /// [`Vi::recv_wait`] into `d`.
    #[inline]
    fn recv_wait_into(&mut self, timeout: Option<Duration>, d: &mut Done) -> Result<(), WaitError> {
        if self.poll_recv(d) {
            return Ok(());
        }
        self.recv_spin(timeout, d)
    }

    /// [`Vi::recv_wait`] once the first poll found nothing: first polls,
    /// each the whole receive path (the one a message found at once
    /// takes) and a pause apart, for up to 64 of them (about the round
    /// trip of a small message between two cores); then the general wait
    /// (spinning on a word of the ring, then sleeping). Measured on the
    /// local 64 B ping-pong, whole polls a pause apart answer sooner than
    /// a cheap check of the ring followed by a separate poll.
    #[inline(never)]
    fn recv_spin(&mut self, timeout: Option<Duration>, d: &mut Done) -> Result<(), WaitError> {
        if timeout != Some(Duration::ZERO) && self.core().connected() {
            for _ in 0..64 {
                std::hint::spin_loop();
                if self.poll_recv(d) {
                    return Ok(());
                }
            }
        }
        self.wait(ViQueue::Recv, timeout, d)
    }

    /// Wait for the next completion of `q`, into `d`.
    #[inline(never)]
    fn wait(
        &mut self,
        q: ViQueue,
        timeout: Option<Duration>,
        d: &mut Done,
    ) -> Result<(), WaitError> {
        let spin = self.core().spin_now();
        // The clock is read only once the first polls found nothing: a
        // completion that comes at once costs no clock read.
        let mut start: Option<Instant> = None;
        let mut round = 0u32;
        loop {
            let polled = self.with(|c, _| {
                if c.take(q, d) || (q == ViQueue::Recv && c.recv_now(d)) {
                    return Some(Ok(()));
                }
                c.progress();
                if c.take(q, d) {
                    return Some(Ok(()));
                }
                if c.outstanding(q) == 0 {
                    return Some(Err(WaitError::Empty(match c.state {
                        ViState::Error(e) => Some(e),
                        ViState::Connected => None,
                    })));
                }
                // Spin on a cheap check (a word of the ring) until
                // something may have changed, rather than polling every
                // queue each time.
                for _ in 0..64 {
                    if c.worth_polling(q) {
                        break;
                    }
                    std::hint::spin_loop();
                }
                None
            });
            if let Some(r) = polled {
                if let (Some(t0), Ok(())) = (start, &r) {
                    self.core().waited(t0.elapsed());
                }
                return r;
            }
            round += 1;
            if round < 16 {
                continue;
            }
            let elapsed = start.get_or_insert_with(Instant::now).elapsed();
            if timeout.is_some_and(|t| elapsed >= t) {
                return Err(WaitError::Timeout);
            }
            if elapsed < spin {
                if round.is_multiple_of(64) {
                    std::thread::yield_now();
                }
                std::hint::spin_loop();
                continue;
            }
            let left = timeout.map(|t| t.saturating_sub(elapsed));
            let engine = matches!(self.core().path, ViPath::Engine(_));
            match q {
                // Sleep on the ring until the peer publishes (or closes);
                // on an engine VI, until the engine completes something.
                _ if engine => self.sleep_on_ring(left),
                ViQueue::Recv => self.sleep_on_ring(left),
                // A send waits for room in the ring (which wakes nobody:
                // short naps) or for the receiver to place or read it
                // (which wakes us).
                ViQueue::Send => self.sleep_on_ring(left),
            }
        }
    }

    fn sleep_on_ring(&mut self, left: Option<Duration>) {
        let mut c = self.core();
        // Sends waiting for room in the direct ring wake nobody when the
        // room comes: sleep in short naps then, so that they go out while
        // we wait. A receiver that places (or reads) a send wakes us.
        let cap = if matches!(c.path, ViPath::Direct(_)) && !c.send_posted.is_empty() {
            Duration::from_micros(50)
        } else {
            Duration::from_secs(1)
        };
        let placing = c.send_unplaced.front().map(|u| u.seq);
        let left = Some(left.map_or(cap, |l| l.min(cap)));
        match &mut c.path {
            ViPath::Direct(conn) => {
                conn.set_sleeping(true);
                let (word, seen) = conn.wait_word();
                // Pairs with the producer's fence after it publishes:
                // either we see its record now, or it sees our sleeping
                // flag and wakes us.
                sys::heavy_fence();
                if !conn.ready()
                    && !conn.peer_closed()
                    && placing.is_none_or(|seq| conn.peer_placed() < seq)
                {
                    sys::futex_wait(word, seen, left);
                }
                conn.set_sleeping(false);
            }
            ViPath::Engine(e) => {
                let h = e.header();
                let seen = h.cq_futex.load(Ordering::Acquire);
                h.client_sleeping.store(1, Ordering::Relaxed);
                // Pairs with the engine's fence after it pushes a
                // completion: either we see it now or it sees our flag.
                std::sync::atomic::fence(Ordering::SeqCst);
                if !e.completions_waiting() {
                    sys::futex_wait(&h.cq_futex, seen, left);
                }
                h.client_sleeping.store(0, Ordering::Relaxed);
            }
        }
    }

    /// Close the VI: descriptors still outstanding complete with
    /// [`ViError::Closed`] (and are dropped with it); the peer finds its
    /// VI broken ([`ViError::PeerGone`]).
    pub fn close(mut self) -> Result<(), Error> {
        self.shut();
        match self
            .session
            .inner
            .request(&Request::ViClose { vi: self.id })?
            .0
        {
            Reply::Ok => Ok(()),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to close: {r:?}"
            ))),
        }
    }

    fn shut(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        let mut c = self.core();
        if c.state == ViState::Connected {
            c.state = ViState::Error(ViError::Closed);
            c.close_path(ViError::Closed);
            c.flush(ViError::Closed);
        }
    }
}

impl Drop for Vi {
    fn drop(&mut self) {
        if !self.closed {
            self.shut();
            let _ = self
                .session
                .inner
                .request(&Request::ViClose { vi: self.id });
        }
    }
}
