//! The inline placement: the endpoint's applet runs here, in the owning
//! process, on the direct path (feature `inline`). The applet is run by
//! the same [`Runner`] as in the engine, with the inline policy: never
//! paused (it runs on its owner's thread), compiled before the first
//! message, one short invocation in 64 timed.

use std::collections::VecDeque;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use unet_abi::*;
use unet_sle::{Outcome, Port, Runner, RunnerConfig, RxFill};

use super::{bump, Endpoint, Event, Recv};
use crate::{AppletOptions, Channel, Error, RecvError, SendError};

/// An endpoint's inline applet and what it delivered.
#[derive(Default)]
pub(super) struct InlineState {
    /// The applet's runner, if one is attached.
    pub(super) runner: Option<Box<Runner>>,
    /// Receives go through the inline path: an inline applet is attached,
    /// or messages its `doRx` delivered are still queued (they outlive a
    /// detach).
    pub(super) rx: bool,
    pub(super) rxq: VecDeque<RecvDesc>,
    /// Receive buffers the user has read, kept here for the inline
    /// applet's next `getFreeBuffer` instead of going back through the
    /// shared free ring (at most [`INLINE_SPARE`]; returned at detach).
    pub(super) spare: Vec<u32>,
    pub(super) scratch: Vec<u8>,
}

/// This endpoint as an inline applet's natives see it: the endpoint
/// itself, so that a native reaches its fields through the one pointer
/// the runner holds (a wrapper holding a reference would put one more
/// dependent load in front of each).
#[repr(transparent)]
struct ClientEp {
    ep: Endpoint,
}

impl ClientEp {
    #[inline(always)]
    #[allow(unsafe_code)]
    fn of(ep: &mut Endpoint) -> &mut ClientEp {
        // SAFETY: ClientEp is a transparent wrapper of Endpoint (same
        // layout), and the returned borrow is the argument's.
        unsafe { &mut *(ep as *mut Endpoint as *mut ClientEp) }
    }
}

/// Where [`Endpoint::arrived`] found the next message may be.
enum Arrived {
    /// Nowhere: no direct connection holds a record, the engine's queues
    /// are empty.
    Nothing,
    /// Direct connection `i` holds a record.
    Direct(usize),
    /// Somewhere else, or a connection is gone: the long way.
    Other,
}

/// Receive buffers kept for an inline applet (see `InlineState::spare`).
const INLINE_SPARE: usize = 32;

/// How long an inline applet's txPush waits for room in a full ring.
const INLINE_TX_WAIT: Duration = Duration::from_millis(5);

/// Timers run per call into the library (the rest wait for the next).
const TIMERS_PER_CALL: usize = 256;

impl Port for ClientEp {
    fn area_size(&self) -> u64 {
        self.ep.layout.geometry.buffer_area_size
    }
    fn area(&mut self) -> NonNull<u8> {
        // The mapping lives as long as the endpoint (and so as its inline
        // applet).
        self.ep.queues.map.area()
    }
    fn buffer_size(&self) -> u32 {
        self.ep.layout.geometry.buffer_size
    }
    fn pop_free(&mut self) -> Option<u32> {
        if let Some(off) = self.ep.inline.spare.pop() {
            return Some(off);
        }
        let off = self.ep.pop_free_client()?;
        let g = self.ep.layout.geometry;
        // Our own free ring: still checked, a bad entry is simply skipped.
        (off as u64 + g.buffer_size as u64 <= g.buffer_area_size).then_some(off)
    }
    fn push_free(&mut self, off: u32) -> bool {
        self.ep.post_free(off).is_ok()
    }
    fn tx_push(&mut self, chan: u16, data: &[u8]) -> Result<(), String> {
        match self.ep.send_plain(Channel(chan), data) {
            Ok(()) => return Ok(()),
            Err(SendError::Full) => {}
            Err(e) => return Err(format!("txPush on channel {chan}: {e}")),
        }
        let start = Instant::now();
        loop {
            match self.ep.send_plain(Channel(chan), data) {
                Ok(()) => return Ok(()),
                Err(SendError::Full) if start.elapsed() < INLINE_TX_WAIT => std::hint::spin_loop(),
                Err(e) => return Err(format!("txPush on channel {chan}: {e}")),
            }
        }
    }
    fn try_tx_push(&mut self, chan: u16, data: &[u8]) -> bool {
        // The direct path's common case only: a direct channel whose ring
        // takes the message now.
        matches!(self.ep.try_send_direct(Channel(chan), data), Some(Ok(())))
    }
    fn push_recv(&mut self, desc: &RecvDesc) -> bool {
        if self.ep.inline.rxq.len() >= self.ep.layout.geometry.recv_cap as usize {
            // Dropped: the buffers it named go back to the free queue.
            if desc.flags & RECV_INLINE == 0 {
                for i in 0..(desc.nbufs as usize).min(MAX_RX_BUFFERS) {
                    self.ep.post_free_raw(desc.offset(i));
                }
            }
            return false;
        }
        self.ep.inline.rxq.push_back(*desc);
        true
    }
    fn push_recv_buffer(&mut self, chan: u16, len: u32, off: u32) -> bool {
        let Some(d) = self.rxq_slot() else {
            self.ep.post_free_raw(off);
            return false;
        };
        d.len = len;
        d.channel = chan;
        d.nbufs = 1;
        d.set_offset(0, off);
        true
    }
    fn push_recv_inline(&mut self, chan: u16, data: &[u8]) -> bool {
        let Some(d) = self.rxq_slot() else {
            return false;
        };
        let len = data.len().min(INLINE_MAX);
        d.len = len as u32;
        d.channel = chan;
        d.flags = RECV_INLINE;
        d.data[..len].copy_from_slice(&data[..len]);
        true
    }
}

impl ClientEp {
    /// A zeroed descriptor at the end of the local receive queue, for the
    /// caller to fill in place (a descriptor built aside and then copied
    /// in would stall the store forwarding, as in the engine's rings);
    /// None if the queue is full.
    #[inline]
    fn rxq_slot(&mut self) -> Option<&mut RecvDesc> {
        let q = &mut self.ep.inline.rxq;
        if q.len() >= self.ep.layout.geometry.recv_cap as usize {
            return None;
        }
        q.push_back(RecvDesc::default());
        q.back_mut()
    }
}

impl Endpoint {
    pub(super) fn attach_inline(&mut self, class: &[u8], opts: AppletOptions) -> Result<(), Error> {
        if !self.managed {
            return Err(Error::Config(
                "an inline applet needs managed buffers".into(),
            ));
        }
        let mut limits = unet_sle::default_limits();
        if opts.fuel != 0 {
            limits.fuel = opts.fuel;
        }
        if opts.heap != 0 {
            limits.heap_quota = opts.heap as usize;
        }
        self.flush_counters();
        let old = self.inline.runner.take();
        // The inline applet runs on the caller's thread: the runner waits
        // here for the compiler (some milliseconds, once), so the first
        // messages run compiled too.
        let loaded = Runner::load(class, limits, ClientEp::of(self), RunnerConfig::inline());
        match loaded {
            Ok(r) => {
                // A replaced applet's timers go with its runner.
                drop(old);
                self.inline.runner = Some(Box::new(r));
                self.inline.rx = true;
                if self.inline.scratch.len() < MAX_MESSAGE {
                    self.inline.scratch = vec![0; MAX_MESSAGE];
                }
                Ok(())
            }
            Err(e) => {
                self.inline.runner = old;
                Err(Error::Rejected(e.to_string()))
            }
        }
    }

    /// The inline applet is gone (detached or replaced): its timers went
    /// with its runner, the buffers kept for it go back to the free ring;
    /// messages it delivered stay queued for the user.
    pub(super) fn end_inline(&mut self) {
        while let Some(off) = self.inline.spare.pop() {
            self.post_free_raw(off);
        }
        self.inline.rx = !self.inline.rxq.is_empty();
    }

    /// When the inline applet's next timer falls due.
    #[inline]
    pub(super) fn inline_timer_at(&self) -> Option<Instant> {
        self.inline.runner.as_ref().and_then(|r| r.next_timer())
    }

    /// Add what the inline applet did since the last call to the shared
    /// client counters (direct-path messages are counted there as they go).
    pub(super) fn flush_counters(&mut self) {
        if let Some(r) = self.inline.runner.as_mut() {
            let d = r.take_stats();
            self.publish_inline_stats(&d);
        }
    }

    fn publish_inline_stats(&self, d: &unet_sle::AppletStats) {
        let h = self.header();
        for (c, n) in [
            (
                ClientCounter::AppletCalls,
                d.tx_calls + d.rx_calls + d.timer_calls,
            ),
            (ClientCounter::AppletTxCalls, d.tx_calls),
            (ClientCounter::AppletRxCalls, d.rx_calls),
            (ClientCounter::AppletTimerCalls, d.timer_calls),
            (ClientCounter::AppletTimeNs, d.total_ns),
            (ClientCounter::AppletFuel, d.fuel),
        ] {
            if n > 0 {
                bump(&h.client_counters[c as usize], n);
            }
        }
        let max = &h.client_counters[ClientCounter::AppletMaxNs as usize];
        if d.max_ns > max.load(std::sync::atomic::Ordering::Relaxed) {
            max.store(d.max_ns, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// A receive buffer the user has read: kept for the inline applet's
    /// next `getFreeBuffer` while there is room, else back to the ring.
    pub(super) fn release_inline_buffer(&mut self, off: u32) {
        if self.inline.runner.is_some() && self.inline.spare.len() < INLINE_SPARE {
            self.inline.spare.push(off);
        } else {
            self.post_free_raw(off);
        }
    }

    /// Run one invocation of the inline applet: `f` gets the runner and
    /// this endpoint as its port. True if it completed; a fault is
    /// reported as an event, and repeated faults detach the applet, as in
    /// the engine.
    #[inline]
    fn run_inline(&mut self, f: impl FnOnce(&mut Runner, &mut ClientEp) -> Outcome) -> bool {
        let Some(mut r) = self.inline.runner.take() else {
            return false;
        };
        let o = f(&mut r, ClientEp::of(self));
        self.after_inline(r, o)
    }

    /// Put the runner back, or drop it if its applet was detached, and
    /// report the outcome (the fault cases out of line).
    #[inline(always)]
    fn after_inline(&mut self, mut r: Box<Runner>, o: Outcome) -> bool {
        match o {
            Outcome::Done => {
                self.inline.runner = Some(r);
                true
            }
            Outcome::Fault(kind) => {
                self.inline.runner = Some(r);
                self.inline_fault(Event::AppletFault { kind })
            }
            Outcome::Detached(kind) => self.inline_detached(&mut r, kind),
        }
    }

    /// The inline applet faulted once too often and was detached: its
    /// last statistics published, its runner dropped.
    #[cold]
    #[inline(never)]
    fn inline_detached(&mut self, r: &mut Runner, kind: FaultKind) -> bool {
        let d = r.take_stats();
        self.publish_inline_stats(&d);
        self.end_inline();
        self.inline_fault(Event::AppletDetached { kind })
    }

    #[cold]
    #[inline(never)]
    /// Count a fault of the inline applet and report it to the user;
    /// false (the invocation did not complete).
    fn inline_fault(&mut self, ev: Event) -> bool {
        bump(
            &self.header().client_counters[ClientCounter::AppletFaults as usize],
            1,
        );
        self.user_events.push_back(ev);
        false
    }

    #[inline]
    fn run_inline_timers(&mut self) {
        if self.inline_timer_at().is_some() {
            self.run_due_inline_timers();
        }
    }

    #[inline(never)]
    fn run_due_inline_timers(&mut self) {
        let now = Instant::now();
        for _ in 0..TIMERS_PER_CALL {
            let Some(mut r) = self.inline.runner.take() else {
                return;
            };
            match r.run_next_timer(ClientEp::of(self), now) {
                Some(o) => {
                    self.after_inline(r, o);
                }
                None => {
                    self.inline.runner = Some(r);
                    return;
                }
            }
        }
    }

    pub(super) fn send_inline(&mut self, ch: Channel, data: &[u8]) -> Result<(), SendError> {
        if data.is_empty() || data.len() as u64 > self.tx.base {
            return Err(SendError::TooLarge);
        }
        self.run_inline_timers();
        // doTx sees the data at offset 0 of the buffer area, the scratch
        // block the tx allocator leaves alone; it runs to completion before
        // the block is reused.
        self.write_buffer(0, data);
        let len = data.len() as u32;
        if self.run_inline(|r, e| r.tx(e, len, ch.0, 0)) {
            Ok(())
        } else {
            Err(SendError::AppletFault)
        }
    }

    pub(super) fn try_recv_inline(&mut self, buf: &mut [u8]) -> Result<Option<Recv>, RecvError> {
        self.run_inline_timers();
        for _ in 0..64 {
            // Read in place, field by field, and only then popped: the
            // descriptor was most likely filled a moment ago, field by
            // field, and copying it out whole would stall on those stores.
            if let Some(d) = self.inline.rxq.front() {
                let len = d.len as usize;
                if len > buf.len() {
                    return Err(RecvError::BufferTooSmall(len));
                }
                let channel = crate::spine::recv_channel(d);
                if d.flags & RECV_INLINE != 0 {
                    let n = len.min(INLINE_MAX);
                    buf[..n].copy_from_slice(&d.data[..n]);
                    self.inline.rxq.pop_front();
                } else {
                    let nbufs = (d.nbufs as usize).min(MAX_RX_BUFFERS);
                    let mut offs = [0u32; MAX_RX_BUFFERS];
                    for (i, o) in offs[..nbufs].iter_mut().enumerate() {
                        *o = d.offset(i);
                    }
                    self.inline.rxq.pop_front();
                    let bs = self.layout.geometry.buffer_size as usize;
                    for (i, &off) in offs[..nbufs].iter().enumerate() {
                        let n = bs.min(len.saturating_sub(i * bs));
                        self.read_buffer(off, &mut buf[i * bs..i * bs + n]);
                        self.release_inline_buffer(off);
                    }
                }
                return Ok(Some(Recv { len, channel }));
            }
            if self.inline.runner.is_none() {
                // Detached, and what its applet delivered is all read.
                self.inline.rx = false;
                return self.try_recv_plain(buf);
            }
            let from = match self.arrived() {
                Arrived::Nothing => return Ok(None),
                Arrived::Direct(i) => Some(i),
                Arrived::Other => None,
            };
            if !self.recv_into_applet(from)? {
                return Ok(None);
            }
        }
        Ok(None)
    }

    /// Where the next message may be: a cheap look first, so that a
    /// receiver polling for its next message does not take out the applet
    /// and its `RxBuf` each time. The direct connections are looked at in
    /// the order `try_recv_direct` takes them; one that holds a record is
    /// named, so that the message is taken from it without a second look
    /// ([`Arrived::Direct`]). A gone connection still to be released, or
    /// anything in the engine's receive or event queue, takes the long
    /// way ([`Arrived::Other`]).
    #[inline]
    fn arrived(&self) -> Arrived {
        if self.chans.conns_gone == 0 {
            if let Some(i) = self.chans.in_turn().find(|&i| self.chans.conns[i].ready()) {
                return Arrived::Direct(i);
            }
            if self.queues.map.recv.head() == self.queues.recv_tail
                && self.queues.map.events.head() == self.queues.event_tail
            {
                return Arrived::Nothing;
            }
        }
        Arrived::Other
    }

    /// Take the next arriving message, if any (from direct connection
    /// `from` if it names one, else wherever `try_recv` would), and run
    /// the inline applet's `doRx` on it. The message is copied once,
    /// straight into the applet's `RxBuf`. True if a message was taken.
    fn recv_into_applet(&mut self, from: Option<usize>) -> Result<bool, RecvError> {
        let Some(mut r) = self.inline.runner.take() else {
            return Ok(false);
        };
        let mut need = 0;
        for _ in 0..3 {
            let got = r.rx_fill(ClientEp::of(self), need, |e, rxbuf| {
                let m = match from {
                    Some(i) => match e.ep.try_recv_conn(i, rxbuf)? {
                        Some(m) => Some(m),
                        // Padding only (the record is at the ring's start).
                        None => e.ep.try_recv_plain(rxbuf)?,
                    },
                    None => e.ep.try_recv_plain(rxbuf)?,
                };
                Ok(m.map(|m| (m.len, m.channel.0)))
            });
            match got {
                Ok(Some(o)) => {
                    self.after_inline(r, o);
                    return Ok(true);
                }
                Ok(None) => {
                    self.inline.runner = Some(r);
                    return Ok(false);
                }
                Err(RxFill::Host(RecvError::BufferTooSmall(n))) if n > need => need = n,
                Err(RxFill::Host(e)) => {
                    self.inline.runner = Some(r);
                    return Err(e);
                }
                Err(RxFill::NoBuffer) => break,
            }
        }
        self.inline.runner = Some(r);
        // RxBuf cannot hold it (the applet's heap is full): take the
        // message through the scratch block; doRx faults.
        let mut scratch = std::mem::take(&mut self.inline.scratch);
        let got = self.try_recv_plain(&mut scratch);
        if let Ok(Some(m)) = got {
            let data = &scratch[..m.len];
            self.run_inline(|r, e| r.rx(e, data, m.channel.0));
        }
        self.inline.scratch = scratch;
        got.map(|m| m.is_some())
    }
}
