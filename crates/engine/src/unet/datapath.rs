//! The data path: send descriptors taken from endpoint rings, checked, and
//! sent the way their channel's route says; arrivals delivered to their
//! endpoint, through its applet when it has one.
//!
//! [`DataPath`] borrows the parts it needs for one pass (the endpoint
//! table, the wire's port, the applet host), so the
//! same code serves the loop's turn, a benchmark stepping the engine and a
//! test. An applet runs with [`EnginePort`] as its endpoint: its `txPush`
//! goes out through the same route `send` as a user's message, with one
//! difference: what it sends to another applet is queued for the loop
//! (an applet never runs inside another).
//!
//! Trust: a send descriptor is read once from the shared ring into a local
//! copy, then checked (flags, length, buffer range, channel) against the
//! engine's own tables before anything is copied. A bad one gets an error
//! status and a counter on its endpoint only.

use std::ptr::NonNull;
use std::time::Instant;

use unet_abi::*;
use unet_sle::{Outcome, Port, Runner, RunnerConfig};

use crate::counters::Counters;
use crate::unet::am::AmRefusal;
use crate::unet::applets::{AppletHost, Loaded};
use crate::unet::endpoints::{Delivery, EndpointTable};
use crate::unet::pending::{self, Step};
use crate::unet::routes::Route;
use crate::wire::port::WirePort;

/// Send descriptors taken from one endpoint per turn (fairness); fewer
/// from one whose applet used its share of the turn's work
/// ([`crate::unet::applets::APPLET_TURN_FUEL`]).
const SEND_BUDGET: u64 = 64;
/// Queued arrivals run per pass.
const PENDING_PER_PASS: usize = 256;
/// Applet timers run per pass.
const TIMERS_PER_PASS: usize = 256;

/// The parts of the engine one pass of the data path uses.
pub(crate) struct DataPath<'a> {
    pub eps: &'a mut EndpointTable,
    /// What goes to other engines is queued here; it leaves when the
    /// loop flushes the port, at the end of the turn.
    pub port: Option<&'a mut WirePort>,
    pub applets: &'a mut AppletHost,
}

/// Add what runner `r` did since it last published to endpoint counter
/// slot `slot`.
fn publish_stats(c: &Counters, slot: usize, r: &mut Runner) {
    let s = r.take_stats();
    if let Some(sl) = c.slot(slot) {
        // One slot lookup, then plain adds. (One writer per counter: load
        // + store.)
        use std::sync::atomic::Ordering;
        let add = |k: EndpointCounter, n: u64| {
            let a = &sl.counters[k as usize];
            a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        };
        add(EndpointCounter::AppletTxCalls, s.tx_calls);
        add(EndpointCounter::AppletRxCalls, s.rx_calls);
        add(EndpointCounter::AppletRxLent, s.rx_lent);
        add(EndpointCounter::AppletTimerCalls, s.timer_calls);
        add(EndpointCounter::AppletTimeNs, s.total_ns);
        add(EndpointCounter::AppletFuel, s.fuel);
        let max = &sl.counters[EndpointCounter::AppletMaxNs as usize];
        if s.max_ns > max.load(Ordering::Relaxed) {
            max.store(s.max_ns, Ordering::Relaxed);
        }
        sl.counters[EndpointCounter::AppletCompiled as usize]
            .store(r.is_compiled() as u64, Ordering::Relaxed);
    }
}

/// Publish the statistics of every runner of `applets` that ran since the
/// last flush ([`AppletHost::flush`]) to its endpoint's counters.
pub(crate) fn flush_stats(applets: &mut AppletHost, eps: &EndpointTable) {
    applets.flush(|idx, r| {
        if let Some(ep) = eps.get(idx) {
            publish_stats(eps.counters(), ep.slot, r);
        }
    });
}

impl DataPath<'_> {
    fn counters(&self) -> &Counters {
        self.eps.counters()
    }

    /// Publish the statistics of the applets that ran this turn.
    pub(crate) fn flush_stats(&mut self) {
        flush_stats(self.applets, self.eps);
    }

    /// Take up to a budget of send descriptors from endpoint `idx`'s send
    /// ring and send each. Returns the descriptors taken.
    pub(crate) fn poll_send_ring(&mut self, idx: usize) -> usize {
        if self.applets.paused(idx) {
            return 0;
        }
        let Some(ep) = self.eps.get(idx) else {
            return 0;
        };
        let (head, tail, cap) = (
            ep.send.head(),
            ep.send_tail,
            ep.layout.geometry.send_cap as u64,
        );
        let avail = head.wrapping_sub(tail);
        if avail == 0 {
            return 0;
        }
        if avail > cap {
            // The client wrote an impossible head: count it once per value.
            let slot = ep.slot;
            let ep = self.eps.get_mut(idx).expect("live");
            if ep.bad_head != Some(head) {
                ep.bad_head = Some(head);
                self.counters().ep(slot, EndpointCounter::RingCorrupt, 1);
            }
            return 0;
        }
        // An endpoint with an applet takes descriptors while its applet's
        // work this turn stays under its share (`APPLET_TURN_FUEL`): each
        // invocation may cost a whole work budget, and the other endpoints
        // must not wait behind a long run of them.
        let fuel0 = self.applets.fuel(idx);
        let n = avail.min(SEND_BUDGET);
        let (mut done, mut held) = (0, false);
        for pos in tail..tail + n {
            let desc = self.eps.get(idx).expect("live").send.read(pos);
            let Some(status) = self.process_send(idx, desc) else {
                // Held back by a full virtual buffer: this descriptor and
                // the ones behind it stay in the ring, offered again on a
                // later turn (other endpoints go on).
                held = true;
                break;
            };
            let ep = self.eps.get(idx).expect("live");
            ep.set_send_status(pos, status as i32);
            done += 1;
            if self.eps.behind || self.applets.turn_over(idx, fuel0) {
                // A receiver is behind (see the dispatcher's docs), or its
                // applet just used up its share or is paused: the rest
                // waits.
                break;
            }
        }
        if avail > done && !held {
            // Left for a later turn by a budget (of descriptors or work).
            let slot = self.eps.get(idx).expect("live").slot;
            self.counters().ep(slot, EndpointCounter::TxDeferred, 1);
        }
        let ep = self.eps.get_mut(idx).expect("live");
        ep.send_tail = tail + done;
        ep.send.set_tail(tail + done);
        done as usize
    }

    /// Check one send descriptor of endpoint `idx` and send it: its
    /// status, or None if the sender is held back (the receiver's virtual
    /// buffer is at its limit; nothing was done).
    fn process_send(&mut self, idx: usize, d: SendDesc) -> Option<SendStatus> {
        let ep = self.eps.get(idx).expect("live");
        let slot = ep.slot;
        let bad = |c: &Counters, k: EndpointCounter, st: SendStatus| {
            c.ep(slot, k, 1);
            Some(st)
        };
        if d.flags != 0 {
            return Some(self.send_flagged(idx, d.flags, d.offset, d.len, d.channel));
        }
        if d.len == 0 || d.len as usize > MAX_MESSAGE {
            return bad(
                self.counters(),
                EndpointCounter::TxBadLength,
                SendStatus::BadLength,
            );
        }
        let Some(msg) = ep.message(d.offset, d.len) else {
            return bad(
                self.counters(),
                EndpointCounter::TxBadBuffer,
                SendStatus::BadBuffer,
            );
        };
        if ep.route(d.channel).is_none() {
            return bad(
                self.counters(),
                EndpointCounter::TxBadChannel,
                SendStatus::BadChannel,
            );
        }
        if self.applets.attached(idx) {
            // U-Net/SLE: the applet decides what goes out (doTx).
            let id = ep.id;
            return Some(
                match self.run_applet(idx, id, |r, p| r.tx(p, d.len, d.channel, d.offset)) {
                    true => SendStatus::Sent,
                    false => SendStatus::AppletFault,
                },
            );
        }
        // Read in place: the client may scribble on it concurrently; then
        // only its own message carries garbage.
        match self.send(idx, d.channel, msg.bytes(), true) {
            Ok(true) => Some(SendStatus::Sent),
            Ok(false) => None,
            Err(SendStatus::PeerGone) => bad(
                self.counters(),
                EndpointCounter::TxPeerGone,
                SendStatus::PeerGone,
            ),
            Err(st) => bad(self.counters(), EndpointCounter::TxBadChannel, st),
        }
    }

    /// A send descriptor with flags: an active message (`SEND_AM`; the
    /// channel field is the handler number), checked and copied to
    /// SPINE's inbox (`am`), taken by SPINE's turn; any other flag is
    /// refused. Out of line and given the fields it reads, not the
    /// descriptor: U-Net's own sends (no flags) keep the send path's code
    /// as it was before SPINE (passed by value, the descriptor was kept in
    /// memory for this call, some instructions more per send).
    #[cold]
    #[inline(never)]
    fn send_flagged(
        &mut self,
        idx: usize,
        flags: u16,
        offset: u32,
        len: u32,
        handler: u16,
    ) -> SendStatus {
        let ep = self.eps.get(idx).expect("live");
        let (slot, id) = (ep.slot, ep.id);
        if flags != unet_abi::spine::SEND_AM {
            self.counters().ep(slot, EndpointCounter::TxBadFlags, 1);
            return SendStatus::BadFlags;
        }
        if len as usize > MAX_MESSAGE {
            self.counters().ep(slot, EndpointCounter::TxBadLength, 1);
            return SendStatus::BadLength;
        }
        let Some(msg) = ep.message(offset, len) else {
            self.counters().ep(slot, EndpointCounter::TxBadBuffer, 1);
            return SendStatus::BadBuffer;
        };
        // Read in place, copied once: a client scribbling on it spoils
        // only its own message.
        let (st, counter) = match self.eps.am.offer(id, handler, msg.bytes()) {
            Ok(()) => (SendStatus::Sent, EndpointCounter::TxAm),
            Err(AmRefusal::Full) => (SendStatus::SpineFull, EndpointCounter::TxAmFull),
            Err(AmRefusal::Refused) => (SendStatus::SpineRefused, EndpointCounter::TxAmRefused),
        };
        self.counters().ep(slot, counter, 1);
        st
    }

    /// Send `msg` from endpoint `idx` on its channel `chan`, the way the
    /// channel's route says: the one place that matches on the kind of a
    /// channel. `may_run`: the receiver's applet may run inside this call
    /// (the caller is the loop's send path, not an applet).
    ///
    /// `msg` may point into a buffer area the client writes concurrently;
    /// the engine only copies it.
    ///
    /// `Ok(false)`: not sent, the sender is held back (only when `may_run`,
    /// the loop's send path: a local receiver's virtual buffer is at its
    /// limit).
    pub(crate) fn send(
        &mut self,
        idx: usize,
        chan: u16,
        msg: &[u8],
        may_run: bool,
    ) -> Result<bool, SendStatus> {
        let (counters, route) = self.eps.route_mut(idx, chan);
        let (slot, route) = route.ok_or(SendStatus::BadChannel)?;
        match route {
            Route::Local(p) | Route::Direct { peer: p, .. } => {
                let p = *p;
                if !self.deliver(p.idx, p.id, p.chan, msg, may_run) {
                    return Ok(false);
                }
                let counters = self.counters();
                counters.ep(slot, EndpointCounter::TxMsgs, 1);
                counters.ep(slot, EndpointCounter::TxBytes, msg.len() as u64);
                Ok(true)
            }
            Route::Remote(r) => {
                let Some(port) = self.port.as_deref_mut() else {
                    return Err(SendStatus::BadChannel);
                };
                counters.ep(slot, EndpointCounter::TxMsgs, 1);
                counters.ep(slot, EndpointCounter::TxBytes, msg.len() as u64);
                crate::unet::remote::send(port, slot, r, msg);
                Ok(true)
            }
            Route::Gone => Err(SendStatus::PeerGone),
            Route::Free | Route::Opening => Err(SendStatus::BadChannel),
        }
    }

    /// Deliver `msg` to endpoint `di` (if it is still `dst_id`) as arriving
    /// on its channel `chan`. An endpoint with an applet gets it through
    /// its `doRx`: run at once when `may_run`, nothing is queued before it
    /// and the applet is not paused; queued for the loop otherwise. Other
    /// endpoints get U-Net delivery ([`EndpointTable::deliver_from`]),
    /// where a buffered receiver at its limit holds the sender back when
    /// `may_run` (the loop's send path): false then, nothing done.
    pub(crate) fn deliver(
        &mut self,
        di: usize,
        dst_id: u32,
        chan: u16,
        msg: &[u8],
        may_run: bool,
    ) -> bool {
        if !self.applets.attached(di) {
            let d = self
                .eps
                .deliver_from(di, dst_id, chan, msg.as_ptr(), msg.len(), may_run);
            return d != Delivery::Held;
        }
        if may_run
            && self.eps.is_live(di, dst_id)
            && !self.applets.pending.has(di)
            && self.rx_now(di, dst_id, chan, msg)
        {
            return true;
        }
        arrive(self.eps, self.applets, di, dst_id, chan, msg);
        true
    }

    /// Run endpoint `idx`'s `doRx` on `msg`, lent to its `RxBuf` or
    /// copied once, straight into it (`unet_sle::Runner::rx`; a fault,
    /// `RxBuf` that cannot be made large enough included, is reported as
    /// any other). False (nothing done) if the
    /// endpoint has no applet or its applet waits out a pause (the runner
    /// is taken out once, and asked whether it is paused in hand).
    fn rx_now(&mut self, idx: usize, id: u32, chan: u16, msg: &[u8]) -> bool {
        let Some(mut r) = self.applets.take(idx) else {
            return false;
        };
        if r.paused() {
            self.applets.put(idx, id, r);
            return false;
        }
        let o = r.rx(&mut EnginePort { dp: self, idx }, msg, chan);
        self.after_run(idx, id, r, o);
        true
    }

    /// Run one invocation of endpoint (`idx`, `id`)'s applet: `f` gets its
    /// runner and the endpoint as its port. Returns false on a fault
    /// (counted, reported to the owner; the applet is detached after
    /// repeated ones).
    #[inline]
    pub(crate) fn run_applet(
        &mut self,
        idx: usize,
        id: u32,
        f: impl FnOnce(&mut Runner, &mut EnginePort<'_, '_>) -> Outcome,
    ) -> bool {
        let Some(mut r) = self.applets.take(idx) else {
            return false;
        };
        let o = f(&mut r, &mut EnginePort { dp: self, idx });
        self.after_run(idx, id, r, o)
    }

    /// Put the runner back (or drop it, detached) and report a fault to
    /// the owner. What an invocation that ended well did is published at
    /// the end of the turn ([`DataPath::flush_stats`]); a fault's at once.
    #[inline(always)]
    fn after_run(&mut self, idx: usize, id: u32, r: Box<Runner>, o: Outcome) -> bool {
        let (kind, detached) = match o {
            Outcome::Done => {
                self.applets.put_ran(idx, id, r);
                return true;
            }
            Outcome::Fault(kind) => (kind, false),
            Outcome::Detached(kind) => (kind, true),
        };
        self.after_fault(idx, id, r, kind, detached)
    }

    /// [`DataPath::after_run`] for an invocation that faulted: out of
    /// line, so that the common case is a few instructions where it runs.
    #[cold]
    #[inline(never)]
    fn after_fault(
        &mut self,
        idx: usize,
        id: u32,
        mut r: Box<Runner>,
        kind: FaultKind,
        detached: bool,
    ) -> bool {
        let Some(ep) = self.eps.get(idx).filter(|e| e.id == id) else {
            return false;
        };
        let slot = ep.slot;
        publish_stats(self.counters(), slot, &mut r);
        let ev = if detached {
            self.applets.remove(idx);
            let c = self.counters();
            c.ep(slot, EndpointCounter::AppletDetached, 1);
            c.set_ep(slot, EndpointCounter::AppletCompiled, 0);
            EventKind::AppletDetached
        } else {
            self.applets.put(idx, id, r);
            EventKind::AppletFault
        };
        self.counters().ep(slot, kind.counter(), 1);
        self.eps.push_event(
            idx,
            EventDesc {
                kind: ev as u16,
                arg: kind as u32,
                ..Default::default()
            },
        );
        false
    }

    /// Run the arrivals queued for applets, each endpoint's in order, a
    /// bounded number per pass; an endpoint whose applet is paused costs
    /// the pass one look. Returns how many ran.
    pub(crate) fn run_pending(&mut self) -> usize {
        pending::pass(
            self,
            |dp| &mut dp.applets.pending,
            PENDING_PER_PASS,
            |dp, idx, (id, chan, buf)| {
                let live = dp.eps.is_live(idx, id);
                if live && dp.applets.paused(idx) {
                    return Step::Held((id, chan, buf));
                }
                if live {
                    if dp.applets.attached(idx) {
                        dp.run_applet(idx, id, |r, p| r.rx(p, &buf, chan));
                    } else {
                        // Detached meanwhile: plain U-Net delivery.
                        dp.eps.deliver(idx, id, chan, buf.as_ptr(), buf.len());
                    }
                }
                dp.applets.recycle(buf);
                Step::Ran
            },
        )
    }

    /// Run the applet timers that are due, a bounded number per pass, each
    /// applet's in the order they fell due. An applet found paused runs
    /// none in this pass (its timers wait, in order, for the pause to
    /// end). Returns how many ran.
    pub(crate) fn run_timers(&mut self) -> usize {
        let now = Instant::now();
        let mut n = 0;
        let mut k = 0;
        while k < self.applets.attached_indices().len() && n < TIMERS_PER_PASS {
            let idx = self.applets.attached_indices()[k];
            k += 1;
            let Some(id) = self.eps.get(idx).map(|e| e.id) else {
                continue;
            };
            while n < TIMERS_PER_PASS {
                let Some(mut r) = self.applets.take(idx) else {
                    break;
                };
                let ran = r.run_next_timer(&mut EnginePort { dp: self, idx }, now);
                match ran {
                    Some(o) => {
                        n += 1;
                        if !self.after_run(idx, id, r, o) && !self.applets.attached(idx) {
                            // Detached: its list entry is gone.
                            k -= 1;
                            break;
                        }
                    }
                    None => {
                        self.applets.put(idx, id, r);
                        break;
                    }
                }
            }
        }
        n
    }

    /// Instantiate a verified applet for its endpoint: its constructor runs
    /// now, on the engine's thread, under its limits, with the endpoint
    /// bound. The applet replaces any attached. `compile`: false keeps it
    /// interpreted ([`crate::EngineConfig::applet_compile`]).
    pub(crate) fn instantiate(&mut self, l: Loaded, compile: bool) -> Result<(), String> {
        let v = l.result.map_err(|e| e.to_string())?;
        let mut r = Runner::instantiate(
            v,
            l.limits,
            &mut EnginePort {
                dp: self,
                idx: l.idx,
            },
            RunnerConfig::engine(),
        )
        .map_err(|e| e.to_string())?;
        if !compile {
            r.applet_mut().keep_interpreted();
        }
        let slot = self.eps.get(l.idx).map(|e| e.slot);
        self.applets.install(l.idx, l.endpoint, r);
        if let Some(slot) = slot {
            let c = self.counters();
            c.ep(slot, EndpointCounter::AppletAttached, 1);
            // The new applet starts interpreted.
            c.set_ep(slot, EndpointCounter::AppletCompiled, 0);
        }
        Ok(())
    }
}

/// Deliver `msg` to endpoint (`di`, `id`) without running an applet here
/// (an arrival from the wire, or what an applet sends): U-Net delivery, or
/// for an endpoint with an applet, queued for the loop to run its `doRx`
/// (counted as dropped when the queue is full).
pub(crate) fn arrive(
    eps: &mut EndpointTable,
    applets: &mut AppletHost,
    di: usize,
    id: u32,
    chan: u16,
    msg: &[u8],
) {
    if !applets.attached(di) {
        eps.deliver(di, id, chan, msg.as_ptr(), msg.len());
        return;
    }
    let Some(ep) = eps.get(di).filter(|e| e.id == id) else {
        return;
    };
    if !applets.queue(di, id, chan, msg) {
        eps.counters()
            .ep(ep.slot, EndpointCounter::AppletRxDropped, 1);
    }
}

/// One endpoint of the engine, as its applet's natives see it.
pub(crate) struct EnginePort<'d, 'a> {
    dp: &'d mut DataPath<'a>,
    idx: usize,
}

impl EnginePort<'_, '_> {
    fn ep(&self) -> &crate::unet::endpoints::Ep {
        self.dp
            .eps
            .get(self.idx)
            .expect("the running applet's endpoint is live")
    }
}

impl Port for EnginePort<'_, '_> {
    fn area_size(&self) -> u64 {
        self.ep().area_size()
    }
    fn area(&mut self) -> NonNull<u8> {
        self.ep().area()
    }
    fn buffer_size(&self) -> u32 {
        self.ep().layout.geometry.buffer_size
    }
    fn pop_free(&mut self) -> Option<u32> {
        self.dp.eps.pop_free(self.idx)
    }
    fn push_free(&mut self, off: u32) -> bool {
        // The free ring has one producer, the client: buffers the applet
        // gives back go to the engine's stash, which is popped first.
        let Some(ep) = self.dp.eps.get_mut(self.idx) else {
            return false;
        };
        if ep.spare.len() >= ep.layout.geometry.free_cap as usize {
            return false;
        }
        ep.spare.push(off);
        true
    }
    fn tx_push(&mut self, chan: u16, data: &[u8]) -> Result<(), String> {
        // Inside an applet: the receiver's doRx is queued, never run here.
        match self.dp.send(self.idx, chan, data, false) {
            Ok(_) => Ok(()),
            Err(SendStatus::PeerGone) => Err(format!("the peer of channel {chan} is gone")),
            Err(_) => Err(format!("channel {chan} is not held by this endpoint")),
        }
    }
    fn try_tx_push(&mut self, chan: u16, data: &[u8]) -> bool {
        self.dp.send(self.idx, chan, data, false).is_ok()
    }
    fn push_recv(&mut self, desc: &RecvDesc) -> bool {
        self.dp.eps.push_recv(self.idx, desc)
    }
    fn push_recv_buffer(&mut self, chan: u16, len: u32, off: u32) -> bool {
        self.dp.eps.push_recv_buffer(self.idx, chan, len, off)
    }
    fn push_recv_inline(&mut self, chan: u16, data: &[u8]) -> bool {
        self.dp.eps.push_recv_inline(self.idx, chan, data)
    }
}
