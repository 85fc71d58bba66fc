//! The VIs the engine carries, moved on the turns of the loop (VIA's
//! [`Part`]): VIA frames from the VIs' inbox of the wire's port (their
//! tokens and peers checked there), then the posted descriptors, timers
//! and acks (see [`crate::via::vi_path`]) of the VIs something happened
//! to. The frames that set VIs up are left for control.
//!
//! A turn visits only the VIs on its list ([`ViTurn`]): those a frame
//! came for, whose timer is due, whose client rang, that have work left
//! (descriptors posted and not taken yet, an ack or a close owed) or did
//! work lately (within the engine's idle spin, at least a millisecond). A
//! VI with none of that is parked: its doorbell stays armed, so its
//! client's next post rings it (`engine_armed`, as while the engine
//! sleeps) and puts it back on the list. Timers come from an index of
//! (deadline, VI) entries, stale ones dropped as they come up. A sweep
//! visits every VI every [`SWEEP_EVERY_NS`], a safety net for a client
//! that cleared its doorbell flag without ringing. So a turn's VI work
//! follows what is waiting, not how many VIs the engine carries.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use unet_abi::ViError;

use crate::counters::Counters;
use crate::part::{Context, Part};
use crate::via::vi_path::EngineVi;
use crate::via::vias::{ViTurn, Vias};
use crate::wire::frame::{Body, ViAck, ViClose};
use crate::wire::port::{ConnIn, PortState, WirePort};
use crate::wire::WireDrop;

/// How often every VI is visited whatever happened (wire clock, ns).
pub(crate) const SWEEP_EVERY_NS: u64 = 100_000_000;

/// The least time a VI that did work stays on the list before it is
/// parked (wire clock, ns): a client that posts again within it neither
/// rings nor waits for the engine to look at its doorbells (a busy
/// engine does that every few dozen turns only).
pub(crate) const LINGER_MIN_NS: u64 = 1_000_000;

/// Put VI `id` on the next turn's list.
fn mark(ready: &mut Vec<u32>, id: u32, v: &mut EngineVi) {
    if !v.active {
        v.active = true;
        ready.push(id);
    }
}

/// Something happened to VI `id` outside the VIs' turn (its doorbell
/// rang, it was made or connected): the next turn visits it.
pub(crate) fn touch(vias: &mut Vias, id: u32) {
    if let Some(v) = vias.engine.get_mut(&id) {
        mark(&mut vias.vi_turn.ready, id, v);
    }
}

/// Handle the VIA frames the wire's port sorted into the VIs' inbox (their
/// token and sender checked there), and the peers it found silent.
/// Returns the work done; the set-up frames (opens and their answers) are
/// left in [`Vias::wire_setup`].
fn take_frames(vias: &mut Vias, port: &mut WirePort, now: u64) -> usize {
    let Vias {
        engine,
        regions,
        vi_turn: t,
        wire_setup: setup,
        ..
    } = vias;
    let mut work = 0;
    let unknown = |st: &mut PortState| st.drop(WireDrop::UnknownEndpoint);
    for f in std::mem::take(&mut port.st.vis.frames) {
        work += 1;
        match f {
            ConnIn::Data {
                dst_vi, seq, msg, ..
            } => match engine.get_mut(&dst_vi) {
                Some(v) => {
                    v.arrive(seq, &msg, regions, now);
                    mark(&mut t.ready, dst_vi, v);
                }
                None => unknown(&mut port.st),
            },
            ConnIn::Frag {
                dst_vi, seq, frag, ..
            } => match engine.get_mut(&dst_vi) {
                Some(v) => {
                    v.arrive_frag(seq, &frag, regions, now);
                    mark(&mut t.ready, dst_vi, v);
                }
                None => unknown(&mut port.st),
            },
            ConnIn::Ack(a) => match engine.get_mut(&a.dst_vi) {
                Some(v) => {
                    v.acked(a.ack(), a.sack, now, regions, &mut |o| port.send_conn(o));
                    mark(&mut t.ready, a.dst_vi, v);
                }
                None => unknown(&mut port.st),
            },
            ConnIn::Close(c) => match engine.get_mut(&c.dst_vi) {
                Some(v) => {
                    match c.error() {
                        // A close: what it sent before still arrives.
                        None | Some(ViError::Closed) => v.peer_gone(ViError::PeerGone),
                        // A break: both sides are in the error state now.
                        Some(e) => v.break_with(e, false),
                    }
                    mark(&mut t.ready, c.dst_vi, v);
                }
                None => unknown(&mut port.st),
            },
            other => setup.push(other),
        }
    }
    for addr in std::mem::take(&mut port.st.vis.silent) {
        for (&id, v) in engine.iter_mut() {
            if v.peer.is_some_and(|p| p.addr == addr) {
                v.break_with(ViError::Timeout, false);
                mark(&mut t.ready, id, v);
            }
        }
    }
    work
}

/// Handle the VIA frames that came from the wire and move every
/// engine-carried VI on. Returns the work done; the set-up frames (opens
/// and their answers) are left in [`Vias::wire_setup`] for the control
/// side. `linger_ns`: how long a VI that found no work stays on the list (the
/// engine's idle spin: its client does not ring meanwhile; at least
/// [`LINGER_MIN_NS`]).
fn poll(vias: &mut Vias, port: &mut WirePort, counters: &Counters, linger_ns: u64) -> usize {
    let now = port.clock_ns();
    let mut work = take_frames(vias, port, now);
    let Vias {
        engine,
        regions,
        vi_turn: t,
        ..
    } = vias;
    // Timers due.
    while let Some(&Reverse((d, id))) = t.timers.peek() {
        if d > now {
            break;
        }
        t.timers.pop();
        if let Some(v) = engine.get_mut(&id) {
            if v.queued == Some(d) {
                v.queued = None;
            }
            mark(&mut t.ready, id, v);
        }
    }
    // The safety net: every VI now and then.
    let sweep_at = *t.sweep_at.get_or_insert(now.saturating_add(SWEEP_EVERY_NS));
    if sweep_at <= now {
        t.sweep_at = Some(now.saturating_add(SWEEP_EVERY_NS));
        for (&id, v) in engine.iter_mut() {
            mark(&mut t.ready, id, v);
        }
    }
    let mut list = std::mem::replace(&mut t.ready, std::mem::take(&mut t.spare));
    let mut visits = 0;
    for id in list.drain(..) {
        let Some(v) = engine.get_mut(&id) else {
            continue;
        };
        visits += 1;
        let mut wire = |o: crate::via::vi_path::Outgoing<'_>| port.send_conn(o);
        let polled = v.poll(regions, now, &mut wire);
        work += polled;
        let mut done = polled;
        v.timers(now, regions, &mut wire);
        // Once per VI and turn, whatever completed (see EngineVi::wake).
        v.wake_now();
        if let Some(p) = v.peer {
            if let Some(ack) = v.ack_now(now) {
                let f = ViAck::from_ack(p.vi, p.peer_token, ack).with_sack(v.sack());
                port.send_ack(p.addr, f);
                done += 1;
            }
            if v.tell_peer {
                v.tell_peer = false;
                port.send_control(
                    p.addr,
                    Body::ViClose(ViClose {
                        dst_vi: p.vi,
                        token: p.peer_token,
                        reason: v.state,
                    }),
                );
                done += 1;
            }
        }
        if let Some(d) = v.next_deadline() {
            if v.queued.is_none_or(|q| d < q) {
                t.timers.push(Reverse((d, id)));
                v.queued = Some(d);
            }
        }
        if done > 0 {
            v.last_work_ns = now;
        }
        let lingers = now.saturating_sub(v.last_work_ns) < linger_ns.max(LINGER_MIN_NS);
        if done > 0 || lingers || v.posted() || !v.park() {
            t.ready.push(id);
        } else {
            v.active = false;
        }
    }
    t.spare = list;
    tidy(engine, t);
    counters.engine(unet_abi::EngineCounter::ViVisits, visits);
    work
}

/// Drop the stale entries at the top of the timer index (of VIs gone, or
/// whose deadline moved), so that the engine does not wake for them.
fn tidy(engine: &mut HashMap<u32, EngineVi>, t: &mut ViTurn) {
    while let Some(&Reverse((d, id))) = t.timers.peek() {
        let Some(v) = engine.get_mut(&id) else {
            t.timers.pop();
            continue;
        };
        if v.next_deadline() == Some(d) {
            break;
        }
        t.timers.pop();
        if v.queued == Some(d) {
            v.queued = v.next_deadline();
            if let Some(n) = v.queued {
                t.timers.push(Reverse((n, id)));
            }
        }
    }
}

/// The earliest timer of an engine-carried VI.
fn next_deadline(vias: &Vias, port: &WirePort) -> Option<Instant> {
    let Reverse((ns, _)) = *vias.vi_turn.timers.peek()?;
    let now = port.clock_ns();
    Some(Instant::now() + Duration::from_nanos(ns.saturating_sub(now)))
}

/// Set (before the engine sleeps) or clear the doorbell flag of the VIs
/// on the turn's list (the others' stay armed).
fn arm(vias: &Vias, on: bool) {
    for id in &vias.vi_turn.ready {
        if let Some(v) = vias.engine.get(id) {
            v.arm(on);
        }
    }
}

/// VIA's part of the loop: the VIs the engine carries, and the deadlines
/// of the connection requests waiting for an answer (control answers
/// those whose time ran out after the turn).
impl Part for Vias {
    // Inlined into the loop (statically dispatched, see `each_part!`):
    // a turn with no VI to move costs a few loads.
    #[inline(always)]
    fn turn(&mut self, cx: &mut Context<'_>) -> usize {
        let Some(port) = cx.port.as_deref_mut() else {
            return 0;
        };
        let inbox = &port.st.vis;
        if self.engine.is_empty() && inbox.frames.is_empty() && inbox.silent.is_empty() {
            return 0;
        }
        let linger = cx.cfg.idle_spin.as_nanos().min(u64::MAX as u128) as u64;
        poll(self, port, cx.counters, linger)
    }

    /// A waiting request's or open's time, or a carried VI's timer.
    fn deadline(&self, cx: &Context<'_>) -> Option<Instant> {
        let requests = self.next_deadline();
        let vis = cx.port.as_deref().and_then(|p| next_deadline(self, p));
        requests.into_iter().chain(vis).min()
    }

    fn arm(&self, on: bool) {
        arm(self, on);
    }
}
