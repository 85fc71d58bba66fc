//! The applet host: the U-Net/SLE applets attached to the engine's
//! endpoints, each in a [`Runner`] (the same runner the client library's
//! inline placement uses: budget, faults, pause, detach, timers,
//! statistics), the arrivals waiting for an applet, and the attaches whose
//! class is still being verified on a thread of its own.
//!
//! The host never runs an applet itself: the data path takes a runner out
//! of its slot, runs it with the endpoint as its port, and puts it back
//! ([`AppletHost::take`], [`AppletHost::put`]). Its state is therefore free
//! of the endpoint table and the routes.

use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;

use jive::Limits;
use unet_sle::{Applet, AttachError, Runner, Verified};
use unet_sys::EventFd;

use crate::unet::endpoints::ClientId;
use crate::unet::pending::Pending;

/// Most arrivals queued for applets before new ones are dropped...
pub(crate) const MAX_PENDING_RX: usize = 4096;
/// ...and for one endpoint's applet (one held back cannot take the whole
/// queue).
pub(crate) const MAX_PENDING_PER_ENDPOINT: usize = 1024;

/// Work an endpoint's applet may do in one turn of the engine's loop, in
/// units of JIVE fuel: the data path takes the endpoint's send descriptors
/// (up to its budget of descriptors) until the applet's invocations used
/// this much. One default invocation's budget ([`unet_sle::DEFAULT_FUEL`]):
/// a cheap applet (RawUnet uses tens of units a message) gets the whole
/// descriptor budget of an endpoint without one, an expensive one a few
/// descriptors, so that the other endpoints never wait behind more than
/// about twice this much of one applet's work.
pub(crate) const APPLET_TURN_FUEL: u64 = unet_sle::DEFAULT_FUEL;

/// Class files being verified at once, in the whole engine...
pub(crate) const MAX_LOADS: usize = 8;
/// ...and for one client.
pub(crate) const MAX_LOADS_PER_CLIENT: usize = 2;

/// An arrival for an endpoint whose applet could not run at once, queued
/// under the endpoint's table index: (endpoint id, channel, the message).
pub(crate) type Arrival = (u32, u16, Vec<u8>);

/// An attach whose class is being verified.
struct Load {
    client: ClientId,
    req_id: u32,
    idx: usize,
    endpoint: u32,
    limits: Limits,
    result: Receiver<Result<Verified, AttachError>>,
}

/// A verified class ready to be instantiated for its endpoint.
pub(crate) struct Loaded {
    pub client: ClientId,
    pub req_id: u32,
    pub idx: usize,
    pub endpoint: u32,
    pub limits: Limits,
    pub result: Result<Verified, AttachError>,
}

/// A runner in its endpoint's slot.
struct Slot {
    endpoint: u32,
    runner: Option<Box<Runner>>,
    /// Its runner ran since its statistics were last published (see
    /// [`AppletHost::flush`]).
    dirty: bool,
}

/// The engine's applets (see the module documentation).
pub(crate) struct AppletHost {
    slots: Vec<Option<Slot>>,
    /// Table indices with an applet attached (few: checked every turn for
    /// due timers).
    attached: Vec<usize>,
    /// Arrivals waiting for their applet, by endpoint, each endpoint's run
    /// by the loop in order.
    pub pending: Pending<Arrival>,
    rx_pool: Vec<Vec<u8>>,
    /// Slots whose runners ran and did not publish their statistics yet.
    dirty: Vec<usize>,
    loads: Vec<Load>,
    /// Rung when a verification ends, so that a sleeping engine looks.
    waker: Arc<EventFd>,
}

impl AppletHost {
    pub(crate) fn new(waker: Arc<EventFd>) -> Self {
        AppletHost {
            slots: Vec::new(),
            attached: Vec::new(),
            pending: Pending::new(MAX_PENDING_PER_ENDPOINT, MAX_PENDING_RX),
            rx_pool: Vec::new(),
            dirty: Vec::new(),
            loads: Vec::new(),
            waker,
        }
    }

    /// Whether endpoint `idx` has an applet (not counting one taken out
    /// to run).
    #[inline]
    pub(crate) fn attached(&self, idx: usize) -> bool {
        matches!(
            self.slots.get(idx),
            Some(Some(Slot {
                runner: Some(_),
                ..
            }))
        )
    }

    /// Whether any endpoint has an applet.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        !self.attached.is_empty()
    }

    /// Whether any applet has a timer set.
    #[inline]
    pub(crate) fn has_timers(&self) -> bool {
        self.attached
            .iter()
            .any(|&i| self.runner(i).is_some_and(|r| r.next_timer().is_some()))
    }

    /// Table indices of the endpoints with an applet.
    pub(crate) fn attached_indices(&self) -> &[usize] {
        &self.attached
    }

    /// The runner of endpoint `idx`.
    pub(crate) fn runner(&self, idx: usize) -> Option<&Runner> {
        self.slots.get(idx)?.as_ref()?.runner.as_deref()
    }

    /// True while endpoint `idx`'s applet waits out a pause.
    #[inline]
    pub(crate) fn paused(&mut self, idx: usize) -> bool {
        match self.slots.get_mut(idx) {
            Some(Some(Slot {
                runner: Some(r), ..
            })) => r.paused(),
            _ => false,
        }
    }

    /// Fuel endpoint `idx`'s applet used since it was attached (0 without
    /// one): what [`AppletHost::turn_over`] measures a turn's share from.
    #[inline]
    pub(crate) fn fuel(&self, idx: usize) -> u64 {
        self.runner(idx).map_or(0, Runner::fuel)
    }

    /// True once endpoint `idx`'s applet must give way for the rest of the
    /// turn: it waits out a pause, or it used [`APPLET_TURN_FUEL`] since
    /// `fuel0` (its [`AppletHost::fuel`] when the turn began). False
    /// without an applet.
    #[inline]
    pub(crate) fn turn_over(&mut self, idx: usize, fuel0: u64) -> bool {
        match self.slots.get_mut(idx) {
            Some(Some(Slot {
                runner: Some(r), ..
            })) => r.paused() || r.fuel().wrapping_sub(fuel0) >= APPLET_TURN_FUEL,
            _ => false,
        }
    }

    /// Attach `runner` to endpoint (`idx`, `endpoint`), replacing any.
    pub(crate) fn install(&mut self, idx: usize, endpoint: u32, runner: Runner) {
        if self.slots.len() <= idx {
            self.slots.resize_with(idx + 1, || None);
        }
        self.slots[idx] = Some(Slot {
            endpoint,
            runner: Some(Box::new(runner)),
            dirty: false,
        });
        if !self.attached.contains(&idx) {
            self.attached.push(idx);
        }
    }

    /// Detach endpoint `idx`'s applet; its timers go with it. True if it
    /// had one.
    pub(crate) fn remove(&mut self, idx: usize) -> bool {
        let had = self
            .slots
            .get_mut(idx)
            .and_then(|s| s.take())
            .is_some_and(|s| s.runner.is_some());
        self.attached.retain(|&i| i != idx);
        had
    }

    /// Take endpoint `idx`'s runner out to run it (`None` if it has none
    /// or it is already out). Put it back with [`AppletHost::put`].
    #[inline]
    pub(crate) fn take(&mut self, idx: usize) -> Option<Box<Runner>> {
        self.slots.get_mut(idx)?.as_mut()?.runner.take()
    }

    /// Put a runner taken with [`AppletHost::take`] back, unless the slot
    /// was emptied or given to another endpoint meanwhile.
    #[inline]
    pub(crate) fn put(&mut self, idx: usize, endpoint: u32, runner: Box<Runner>) {
        if let Some(Some(s)) = self.slots.get_mut(idx) {
            if s.endpoint == endpoint && s.runner.is_none() {
                s.runner = Some(runner);
            }
        }
    }

    /// [`AppletHost::put`] of a runner whose invocation ended well: its
    /// statistics are published later, for all the invocations of a turn
    /// at once ([`AppletHost::flush`]), not after each.
    #[inline]
    pub(crate) fn put_ran(&mut self, idx: usize, endpoint: u32, runner: Box<Runner>) {
        if let Some(Some(s)) = self.slots.get_mut(idx) {
            if s.endpoint == endpoint && s.runner.is_none() {
                s.runner = Some(runner);
                if !s.dirty {
                    s.dirty = true;
                    self.dirty.push(idx);
                }
            }
        }
    }

    /// Whether some runner's statistics wait to be published.
    #[inline]
    pub(crate) fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Publish the statistics of every runner that ran since the last
    /// flush with `publish(endpoint index, runner)`: at the end of the
    /// data path's turn, and before an applet is detached.
    pub(crate) fn flush(&mut self, mut publish: impl FnMut(usize, &mut Runner)) {
        for idx in std::mem::take(&mut self.dirty) {
            if let Some(Some(s)) = self.slots.get_mut(idx) {
                s.dirty = false;
                if let Some(r) = s.runner.as_deref_mut() {
                    publish(idx, r);
                }
            }
        }
    }

    /// Queue an arrival for endpoint (`idx`, `id`)'s applet: false (the
    /// caller counts the drop) if the queue is full.
    pub(crate) fn queue(&mut self, idx: usize, id: u32, chan: u16, data: &[u8]) -> bool {
        if self.pending.full(idx) {
            return false;
        }
        let mut buf = self.rx_pool.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(data);
        match self.pending.push(idx, (id, chan, buf)) {
            Ok(()) => true,
            Err((_, _, buf)) => {
                self.recycle(buf);
                false
            }
        }
    }

    /// Keep an arrival's buffer for the next one.
    pub(crate) fn recycle(&mut self, buf: Vec<u8>) {
        if self.rx_pool.len() < 64 {
            self.rx_pool.push(buf);
        }
    }

    /// Start verifying `bytes` for endpoint (`idx`, `endpoint`) on a thread
    /// of its own: verification grows with the class and must not hold up
    /// the loop. The result comes back through [`AppletHost::poll_loads`].
    /// Refused (`Err`, nothing started) when the engine or the client
    /// already has its most loads in flight.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start_load(
        &mut self,
        client: ClientId,
        req_id: u32,
        idx: usize,
        endpoint: u32,
        bytes: Vec<u8>,
        limits: Limits,
    ) -> Result<(), ()> {
        let mine = self.loads.iter().filter(|l| l.client == client).count();
        if self.loads.len() >= MAX_LOADS || mine >= MAX_LOADS_PER_CLIENT {
            return Err(());
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let waker = self.waker.clone();
        std::thread::Builder::new()
            .name("jive-verify".into())
            .spawn(move || {
                let _ = tx.send(Applet::verify(&bytes));
                waker.notify();
            })
            .map_err(|_| ())?;
        self.loads.push(Load {
            client,
            req_id,
            idx,
            endpoint,
            limits,
            result: rx,
        });
        Ok(())
    }

    /// Whether verifications are in flight.
    #[inline]
    pub(crate) fn loading(&self) -> bool {
        !self.loads.is_empty()
    }

    /// The verifications that ended, in the order they were started.
    pub(crate) fn poll_loads(&mut self) -> Vec<Loaded> {
        let mut done = Vec::new();
        let mut i = 0;
        while i < self.loads.len() {
            let r = match self.loads[i].result.try_recv() {
                Ok(r) => r,
                Err(TryRecvError::Empty) => {
                    i += 1;
                    continue;
                }
                Err(TryRecvError::Disconnected) => Err(AttachError::Shape(
                    "the verifier stopped without an answer".into(),
                )),
            };
            let l = self.loads.remove(i);
            done.push(Loaded {
                client: l.client,
                req_id: l.req_id,
                idx: l.idx,
                endpoint: l.endpoint,
                limits: l.limits,
                result: r,
            });
        }
        done
    }

    /// Forget the loads of a client that went away.
    pub(crate) fn forget_client(&mut self, client: ClientId) {
        self.loads.retain(|l| l.client != client);
    }
}
