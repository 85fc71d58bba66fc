//! SPINE: extensions as active-message handlers on the adapter (the
//! SPINE paper, sections 3 and 6).
//!
//! Every message carries the number of the handler that runs when it
//! arrives. The adapter's own work (taking an active message from a
//! host endpoint, delivering one to a host, forwarding, timers) and the
//! extensions' handlers are events of one queue, run by one loop in
//! priority order: [`SpinePart`]'s turn. Files:
//!
//! - `msgs.rs`: the message pool, the bulk buffer pool, handles, keeps;
//! - `events.rs`: the event queue, event types and priorities, drops;
//! - `rt.rs`: the runtime's state the natives reach (pools, queue,
//!   handler table, the running invocation);
//! - `natives.rs`: the `spine` domain;
//! - `ext.rs`: an extension (its VM, handlers, budget, statistics);
//! - `exports.rs`, `link.rs`: what extensions export to one another
//!   (domains of their own), and the calls between them;
//! - `setup.rs`: loading, unloading and listing extensions, and
//!   reclaiming a client's when it goes;
//! - `framebuffer.rs`: framebuffers a host process has made for its
//!   extensions (`Spine.fbWrite`), their runtime and set-up halves;
//! - `tables.rs`, `tables_setup.rs`: route tables loaded into
//!   extensions (`Spine.table`), their runtime and set-up halves;
//! - `timers.rs`: the extensions' timers (`Spine.timer`), fired as
//!   `Timer` events;
//! - `trace.rs`: the event graph's recorder (off by default, switched
//!   on at run time), which the runtime holds and lends the loop; with it
//!   on, the turn records every event it runs (its type: the system
//!   handler's number, or the extension handler's; the graph's message
//!   it belongs to; the event that queued it);
//! - `peer.rs`: the peer-to-peer message queues between adapters on one
//!   host (shared memory);
//! - `peers.rs`: the adapter's table of them, joined by clients, read
//!   by the turn and sent on by handlers;
//! - `wire.rs`: links to adapters over the UDP wire, and the active
//!   messages sent over them;
//! - `port.rs`: raw-frame ports on network interfaces, whose frames go
//!   to a handler and which handlers send frames out of.
//!
//! SPINE sits above U-Net: host endpoints' active messages wait in
//! U-Net's inbox (`unet/am.rs`), and SPINE's turn, which borrows the
//! endpoint table, takes them and delivers to host endpoints.

pub(crate) mod clock;
pub(crate) mod events;
pub(crate) mod exports;
pub(crate) mod ext;
pub(crate) mod framebuffer;
pub(crate) mod link;
pub(crate) mod msgs;
pub(crate) mod natives;
pub(crate) mod peer;
pub(crate) mod peers;
pub(crate) mod port;
pub(crate) mod rt;
pub(crate) mod setup;
pub(crate) mod tables;
pub(crate) mod tables_setup;
pub(crate) mod timers;
pub(crate) mod trace;
pub(crate) mod wire;

use std::sync::Arc;
use std::time::Instant;

use unet_sys::EventFd;

use unet_abi::spine::{AmHeader, AM_FRAME_PREFIX, AM_SRC_HOST, AM_SRC_SYSTEM};

use crate::config::EngineConfig;
use crate::part::{Context, Part};
use crate::spine::events::{DropReason, Event, EventKind, Tag};
use crate::spine::ext::Ext;
use crate::spine::rt::{Rt, ARG_REPLY, NO_MSG};
use crate::spine::setup::Loads;
use crate::spine::trace::Recorder;
use crate::unet::endpoints::EndpointTable;

/// Most events one turn runs (and most host messages it takes in): a
/// turn runs what is queued when it starts, up to this.
const TURN_MAX: usize = 1024;

/// Extension slots the runtime expects (it grows past them if needed).
const EXTS_MAX: usize = 64;

/// SPINE in the engine: the runtime and its extensions.
pub(crate) struct SpinePart {
    pub rt: Rt,
    /// By slot (what handler entries name).
    pub exts: Vec<Option<Ext>>,
    next_id: u32,
    /// Compile extensions to machine code (as applets).
    compile: bool,
    /// A message framed for a host endpoint, reused.
    frame: Vec<u8>,
    /// Loads whose class is being verified.
    pub loads: Loads,
    /// Links over the wire.
    pub wire: wire::WireLinks,
    /// Raw-frame ports.
    pub ports: port::Ports,
    /// The event graph's recorder (the loop's and SPINE's events).
    pub trace: Recorder,
    /// Handlers came or went since the graph's types were named.
    names_dirty: bool,
}

impl SpinePart {
    /// The runtime; `waker` is rung when a load's verification ends.
    pub(crate) fn new(cfg: &EngineConfig, waker: Arc<EventFd>) -> SpinePart {
        let mut rt = Rt::new(cfg);
        rt.keeps.reserve(EXTS_MAX);
        SpinePart {
            rt,
            exts: Vec::new(),
            next_id: 1,
            compile: cfg.applet_compile,
            frame: Vec::new(),
            trace: Recorder::new(Some(waker.clone())),
            loads: Loads::new(waker),
            wire: wire::WireLinks::default(),
            ports: port::Ports::new(cfg.spine_port_tx, cfg.spine_port_rx_frames),
            names_dirty: true,
        }
    }

    /// Tell U-Net's inbox the largest bulk part a host may send.
    pub(crate) fn set_bulk_max(&self, eps: &mut EndpointTable) {
        eps.am.bulk_max = self.rt.bufs.max_len();
    }

    /// Whether a turn has anything to do.
    #[inline]
    fn idle(&self, eps: &EndpointTable) -> bool {
        eps.am.queue.is_empty()
            && self.rt.queue.is_empty()
            && self.rt.peers.is_empty()
            && !self.rt.timers.is_due()
    }

    /// Queue a `Timer` event for each timer that is due (tagged with the
    /// event that set it).
    fn fire_timers(&mut self) -> usize {
        let Rt { timers, queue, .. } = &mut self.rt;
        timers.fire_due(Instant::now(), |arg, t| {
            let ev = Event {
                kind: EventKind::Timer,
                msg: NO_MSG,
                arg,
            };
            queue.push_tagged(ev, t.tag).is_ok()
        })
    }

    /// Take the host endpoints' active messages into the queue.
    fn take_host(&mut self, eps: &mut EndpointTable) -> usize {
        let rt = &mut self.rt;
        let n = eps.am.queue.len().min(TURN_MAX);
        for _ in 0..n {
            let Some(am) = eps.am.queue.pop_front() else {
                break;
            };
            // The inbox checked the framing.
            let args_len = u16::from_le_bytes([am.data[0], am.data[1]]) as usize;
            let args = &am.data[AM_FRAME_PREFIX..AM_FRAME_PREFIX + args_len];
            let bulk = &am.data[AM_FRAME_PREFIX + args_len..];
            let buf = if bulk.is_empty() {
                None
            } else {
                match rt.bufs.alloc(bulk) {
                    Some(b) => Some(b),
                    None => {
                        rt.queue.count_drop(DropReason::NoBuffer);
                        eps.am.recycle(am.data);
                        continue;
                    }
                }
            };
            let hdr = AmHeader {
                handler: am.handler,
                src_kind: AM_SRC_HOST,
                src: am.endpoint,
                bulk_len: bulk.len() as u32,
                ..AmHeader::default()
            };
            match rt.msgs.alloc(hdr, args, buf) {
                Some(m) => {
                    let ev = Event {
                        kind: EventKind::HostTx,
                        msg: m,
                        arg: 0,
                    };
                    if rt.queue.push(ev).is_err() {
                        rt.msgs.free(m, &mut rt.bufs);
                    }
                }
                None => {
                    if let Some(b) = buf {
                        rt.bufs.release(b);
                    }
                    rt.queue.count_drop(DropReason::NoSlot);
                }
            }
            eps.am.recycle(am.data);
        }
        n
    }

    /// Run one event.
    fn run(&mut self, ev: Event, eps: &mut EndpointTable) {
        if ev.kind != EventKind::Handler {
            self.rt.last_end = None;
        }
        match ev.kind {
            // A message arrived: it goes to its handler.
            EventKind::HostTx | EventKind::WireRx | EventKind::PeerRx => {
                let rt = &mut self.rt;
                let h = rt.msgs.get(ev.msg).map(|m| m.hdr.handler);
                match h.and_then(|h| rt.handlers.get(h as usize).copied().flatten()) {
                    Some(_) => {
                        let next = Event {
                            kind: EventKind::Handler,
                            ..ev
                        };
                        if rt.queue.push(next).is_err() {
                            rt.msgs.free(ev.msg, &mut rt.bufs);
                        }
                    }
                    None => {
                        rt.queue.count_drop(DropReason::NoHandler);
                        rt.msgs.free(ev.msg, &mut rt.bufs);
                    }
                }
            }
            EventKind::Handler => self.invoke(ev.msg),
            EventKind::DeliverHost => self.deliver_host(ev, eps),
            EventKind::PeerTx => peers::forward(&mut self.rt, ev),
            // Framed onto the wire's port, or placed on a raw-frame
            // port's ring, at the end of the turn.
            EventKind::WireTx if ev.arg & port::ARG_PORT != 0 => {
                self.ports.out.push((ev.arg & !port::ARG_PORT, ev.msg))
            }
            EventKind::WireTx => self.wire.out.push((ev.arg, ev.msg)),
            EventKind::Timer => self.run_timer(ev.arg),
        }
    }

    /// Run the handler of message `msg`.
    #[inline(always)]
    fn invoke(&mut self, msg: u32) {
        let rt = &mut self.rt;
        let entry = rt
            .msgs
            .get(msg)
            .and_then(|m| rt.handlers.get(m.hdr.handler as usize).copied().flatten());
        let Some(e) = entry else {
            // Unloaded since it was queued.
            rt.queue.count_drop(DropReason::Dead);
            rt.msgs.free(msg, &mut rt.bufs);
            return;
        };
        match self.exts.get_mut(e.slot as usize).and_then(|x| x.as_mut()) {
            Some(x) => {
                x.invoke(rt, e, msg);
            }
            None => {
                rt.queue.count_drop(DropReason::Dead);
                rt.msgs.free(msg, &mut rt.bufs);
            }
        }
    }

    /// Run the timer a `Timer` event names: its method, with its context
    /// and an empty message from the system (`AM_SRC_SYSTEM`).
    fn run_timer(&mut self, arg: u32) {
        let Self { rt, exts, .. } = self;
        let Some(t) = rt.timers.take(arg) else {
            return; // its extension went: counted then
        };
        let x = exts
            .get_mut(t.slot as usize)
            .and_then(|x| x.as_mut())
            .filter(|x| x.id == t.ext_id);
        let Some((x, e)) = x.and_then(|x| {
            let e = x.timer_entry(rt, t.slot, t.method, t.context)?;
            Some((x, e))
        }) else {
            rt.timers.dropped += 1;
            rt.queue.count_drop(DropReason::Dead);
            return;
        };
        let hdr = AmHeader {
            handler: EventKind::Timer as u16,
            src_kind: AM_SRC_SYSTEM,
            src: t.ext_id,
            ..AmHeader::default()
        };
        let Some(m) = rt.msgs.alloc(hdr, &[], None) else {
            rt.timers.dropped += 1;
            rt.queue.count_drop(DropReason::NoSlot);
            return;
        };
        if !x.invoke(rt, e, m) {
            rt.timers.faulted += 1;
        }
    }

    /// Extension slot `slot` is emptied (unloaded, or its initialiser
    /// refused): its timers go, counted as dropped.
    pub(crate) fn drop_timers(&mut self, slot: usize) {
        self.rt.timers.cancel(slot as u32);
    }

    /// Deliver a message to a host endpoint: one of the sending
    /// extension's owner, or the one whose message the handler answered.
    fn deliver_host(&mut self, ev: Event, eps: &mut EndpointTable) {
        let rt = &mut self.rt;
        let Some(m) = rt.msgs.get(ev.msg) else {
            return;
        };
        let id = ev.arg & 0x00FF_FFFF;
        let owner = self
            .exts
            .iter()
            .flatten()
            .find(|x| x.id == m.hdr.src)
            .map(|x| x.owner);
        let allowed = ev.arg & ARG_REPLY != 0
            || eps
                .index_of(id)
                .and_then(|i| eps.get(i))
                .is_some_and(|ep| Some(ep.owner) == owner);
        if !allowed {
            rt.queue.count_drop(DropReason::BadDest);
        } else {
            self.frame.clear();
            self.frame.extend_from_slice(&m.hdr.args_len.to_le_bytes());
            self.frame.extend_from_slice(m.args());
            if let Some(d) = m.bulk.and_then(|b| rt.bufs.data(b)) {
                self.frame.extend_from_slice(d);
            }
            if !eps.deliver_am(id, m.hdr.handler, &self.frame) {
                rt.queue.count_drop(DropReason::DestFull);
            }
        }
        rt.msgs.free(ev.msg, &mut rt.bufs);
    }

    /// Queue what came in: the hosts' active messages, the peer queues'
    /// messages, the timers that are due.
    #[inline]
    fn take_in(&mut self, eps: &mut EndpointTable) -> usize {
        let mut work = 0;
        if !eps.am.queue.is_empty() {
            work += self.take_host(eps);
        }
        if !self.rt.peers.is_empty() {
            // The event graph shows a `PORT_OUT` frame's `WireTx` event.
            let now = (!self.trace.on()).then_some(&mut self.ports);
            work += peers::take(&mut self.rt, now);
        }
        if self.rt.timers.is_due() {
            work += self.fire_timers();
        }
        work
    }

    /// One turn: take the hosts' messages, then run what is queued (at
    /// most [`TURN_MAX`] events).
    fn turn_with(&mut self, eps: &mut EndpointTable) -> usize {
        let work = self.take_in(eps);
        let n = self.rt.queue.len().min(TURN_MAX);
        self.rt.last_end = None;
        for _ in 0..n {
            let Some(ev) = self.rt.queue.pop() else {
                break;
            };
            // A handler's invocation, the common event, runs here rather
            // than through `run`'s dispatch (one call less per event).
            if ev.kind == EventKind::Handler {
                self.invoke(ev.msg);
            } else {
                self.run(ev, eps);
            }
        }
        work + n
    }

    /// [`SpinePart::turn_with`] with every event recorded in the event
    /// graph (the trace is on): its type ([`SpinePart::trace_type`]), its
    /// time (one clock read an event: an event ends where the next
    /// begins), the graph's message it belongs to (its cause's, or a new
    /// one for an event nothing in the adapter queued: a host's, the
    /// wire's or a peer's message, a timer) and the event that queued it.
    /// While an event runs, what it queues is tagged with it.
    #[inline(never)]
    fn turn_traced(&mut self, eps: &mut EndpointTable) -> usize {
        if self.names_dirty {
            self.name_types();
        }
        let work = self.take_in(eps);
        let n = self.rt.queue.len().min(TURN_MAX);
        self.rt.last_end = None;
        let mut t = trace::now();
        for _ in 0..n {
            let Some((ev, tag)) = self.rt.queue.pop_tagged() else {
                break;
            };
            let ty = self.trace_type(&ev);
            let id = self.trace.next_id();
            let msg = match tag.msg {
                0 => self.trace.items(1).max(1),
                m => m,
            };
            self.rt.queue.set_current(Tag { cause: id, msg });
            self.run(ev, eps);
            let end = trace::now();
            let got = self.trace.record(ty, t, end, msg, tag.cause);
            debug_assert_eq!(got, id, "recorded while an event ran");
            t = end;
        }
        self.rt.queue.set_current(Tag::default());
        work + n
    }

    /// An event's type in the graph: the system handler's number
    /// ([`EventKind`]), or for a handler's invocation the handler's.
    #[inline]
    fn trace_type(&self, ev: &Event) -> u16 {
        match ev.kind {
            EventKind::Handler => self
                .rt
                .msgs
                .get(ev.msg)
                .map_or(EventKind::Handler as u16, |m| m.hdr.handler),
            k => k as u16,
        }
    }

    /// Name the graph's types: the system handlers, and each installed
    /// handler by its extension and method (`echo:onPing (70)`). A number
    /// keeps the name of its last handler after it goes, so that a dump
    /// names the events it still holds.
    #[cold]
    fn name_types(&mut self) {
        self.names_dirty = false;
        for k in EventKind::ALL {
            self.trace.set_name(k as u16, k.name());
        }
        for (n, e) in self.rt.handlers.iter().enumerate() {
            let Some(e) = e else { continue };
            let Some(x) = self.exts.get(e.slot as usize).and_then(|x| x.as_ref()) else {
                continue;
            };
            let method = x
                .handlers
                .get(e.index as usize)
                .map_or("?", |h| h.method.as_str());
            self.trace
                .set_name(n as u16, format!("{}:{method} ({n})", x.name));
        }
    }

    /// Install an extension's handlers (numbers checked free by the
    /// initialiser's `addHandler`).
    pub(crate) fn mark_handlers(&mut self, eps: &mut EndpointTable, numbers: &[u16], on: bool) {
        for &n in numbers {
            eps.am.set_handled(n, on);
        }
        self.names_dirty = true;
    }

    /// A new extension id.
    pub(crate) fn next_id(&mut self) -> u32 {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        id
    }

    /// Give back `id`, the last one taken, unused (a load refused).
    pub(crate) fn give_back_id(&mut self, id: u32) {
        if self.next_id == id.wrapping_add(1).max(1) {
            self.next_id = id;
        }
    }

    /// Whether extensions are compiled.
    pub(crate) fn compiles(&self) -> bool {
        self.compile
    }
}

/// SPINE's part for one turn: the runtime with the endpoint table it
/// delivers to (the dispatcher lends both).
pub(crate) struct SpineTurn<'a> {
    pub spine: &'a mut SpinePart,
    pub eps: &'a mut EndpointTable,
}

impl Part for SpineTurn<'_> {
    #[inline]
    fn turn(&mut self, cx: &mut Context<'_>) -> usize {
        let wire_in = cx.port.as_ref().is_some_and(|p| !p.st.spine.is_empty());
        let ports_in = self.spine.ports.ready();
        if self.spine.idle(self.eps) && !wire_in && !ports_in {
            return 0;
        }
        let mut work = 0;
        if wire_in {
            if let Some(p) = cx.port.as_deref_mut() {
                work += wire::take_in(self.spine, p);
            }
        }
        if ports_in {
            work += port::take_in(self.spine);
        }
        // The trace's one test a turn (not an event) when it is off.
        work += if self.spine.trace.on() {
            self.spine.turn_traced(self.eps)
        } else {
            self.spine.turn_with(self.eps)
        };
        if self.spine.rt.peers.has_unpublished() {
            self.spine.rt.peers.publish();
        }
        if self.spine.wire.has_out() {
            wire::send_out(self.spine, cx.port.as_deref_mut());
        }
        if self.spine.ports.has_out() {
            port::send_out(self.spine);
        }
        work
    }

    /// The earliest timer, and the peer queues' look at their peers.
    fn deadline(&self, _cx: &Context<'_>) -> Option<Instant> {
        let peers = self.spine.rt.peers.deadline();
        let timers = self.spine.rt.timers.next_due();
        peers.into_iter().chain(timers).min()
    }

    /// Hosts ring their endpoints' doorbells; peer adapters ring the one
    /// the peer queues gave them, when armed.
    fn arm(&self, on: bool) {
        self.spine.rt.peers.arm(on);
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_neighbour;
#[cfg(test)]
mod tests_terminate;
#[cfg(test)]
mod tests_timing;
