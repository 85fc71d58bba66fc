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
//! - `trace.rs`: the event graph's recorder (off by default, switched
//!   on at run time);
//! - `peer.rs`: the peer-to-peer message queues between adapters on one
//!   host (shared memory);
//! - `peers.rs`: the adapter's table of them, joined by clients, read
//!   by the turn and sent on by handlers;
//! - `wire.rs`: links to adapters over the UDP wire, and the active
//!   messages sent over them.
//!
//! SPINE sits above U-Net: host endpoints' active messages wait in
//! U-Net's inbox (`unet/am.rs`), and SPINE's turn, which borrows the
//! endpoint table, takes them and delivers to host endpoints.

pub(crate) mod events;
pub(crate) mod exports;
pub(crate) mod ext;
pub(crate) mod link;
pub(crate) mod msgs;
pub(crate) mod natives;
pub(crate) mod peer;
pub(crate) mod peers;
pub(crate) mod rt;
pub(crate) mod setup;
pub(crate) mod trace;
pub(crate) mod wire;

use std::sync::Arc;
use std::time::Instant;

use unet_sys::EventFd;

use unet_abi::spine::{AmHeader, AM_FRAME_PREFIX, AM_SRC_HOST};

use crate::config::EngineConfig;
use crate::part::{Context, Part};
use crate::spine::events::{DropReason, Event, EventKind};
use crate::spine::ext::Ext;
use crate::spine::rt::{Rt, ARG_REPLY};
use crate::spine::setup::Loads;
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
            loads: Loads::new(waker),
            wire: wire::WireLinks::default(),
        }
    }

    /// Tell U-Net's inbox the largest bulk part a host may send.
    pub(crate) fn set_bulk_max(&self, eps: &mut EndpointTable) {
        eps.am.bulk_max = self.rt.bufs.max_len();
    }

    /// Whether a turn has anything to do.
    #[inline]
    fn idle(&self, eps: &EndpointTable) -> bool {
        eps.am.queue.is_empty() && self.rt.queue.is_empty() && self.rt.peers.is_empty()
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
            // Framed onto the port at the end of the turn.
            EventKind::WireTx => self.wire.out.push((ev.arg, ev.msg)),
            // Timers have no events yet.
            EventKind::Timer => {
                self.rt.queue.count_drop(DropReason::BadDest);
                self.rt.msgs.free(ev.msg, &mut self.rt.bufs);
            }
        }
    }

    /// Run the handler of message `msg`.
    #[inline]
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

    /// One turn: take the hosts' messages, then run what is queued (at
    /// most [`TURN_MAX`] events).
    fn turn_with(&mut self, eps: &mut EndpointTable) -> usize {
        let mut work = 0;
        if !eps.am.queue.is_empty() {
            work += self.take_host(eps);
        }
        if !self.rt.peers.is_empty() {
            work += peers::take(&mut self.rt);
        }
        let n = self.rt.queue.len().min(TURN_MAX);
        for _ in 0..n {
            let Some(ev) = self.rt.queue.pop() else {
                break;
            };
            self.run(ev, eps);
        }
        work + n
    }

    /// Install an extension's handlers (numbers checked free by the
    /// initialiser's `addHandler`).
    pub(crate) fn mark_handlers(&mut self, eps: &mut EndpointTable, numbers: &[u16], on: bool) {
        for &n in numbers {
            eps.am.set_handled(n, on);
        }
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
        if self.spine.idle(self.eps) && !wire_in {
            return 0;
        }
        let mut work = 0;
        if wire_in {
            if let Some(p) = cx.port.as_deref_mut() {
                work += wire::take_in(self.spine, p);
            }
        }
        work += self.spine.turn_with(self.eps);
        if self.spine.wire.has_out() {
            wire::send_out(self.spine, cx.port.as_deref_mut());
        }
        work
    }

    /// The peer queues' look at their peers (timers come with the event
    /// types that need them).
    fn deadline(&self, _cx: &Context<'_>) -> Option<Instant> {
        self.spine.rt.peers.deadline()
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
