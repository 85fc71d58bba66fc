//! The VIs the engine carries, moved on every turn of the loop: VIA
//! frames from the wire checked against the VIs' tokens and peers, then
//! each VI's posted descriptors, timers and acks (see [`crate::vi_path`]).

use std::time::{Duration, Instant};

use unet_abi::ViError;

use crate::counters::Counters;
use crate::remote::{RemoteSide, ViIn};
use crate::vias::Vias;
use crate::wire::frame::{Body, ViAck, ViClose};
use crate::wire::WireDrop;

/// Handle the VIA frames that came from the wire and move every
/// engine-carried VI on. Returns the work done and the set-up frames
/// (opens and their answers) for the control side.
pub(crate) fn poll(
    vias: &mut Vias,
    remote: &mut RemoteSide,
    counters: &Counters,
) -> (usize, Vec<ViIn>) {
    let now = remote.clock_ns();
    let Vias {
        engine, regions, ..
    } = vias;
    let mut work = 0;
    let mut setup = Vec::new();
    let drop = |w: WireDrop| counters.engine(w.counter(), 1);
    for f in std::mem::take(&mut remote.vi_in) {
        work += 1;
        match f {
            ViIn::Data {
                from,
                dst_vi,
                token,
                seq,
                msg,
            } => match engine.get_mut(&dst_vi) {
                Some(v)
                    if v.peer
                        .is_some_and(|p| p.my_token == token && p.addr == from) =>
                {
                    v.arrive(seq, &msg, regions, now);
                }
                Some(_) => drop(WireDrop::ForgedToken),
                None => drop(WireDrop::UnknownEndpoint),
            },
            ViIn::Frag {
                from,
                dst_vi,
                token,
                seq,
                frag,
            } => match engine.get_mut(&dst_vi) {
                Some(v)
                    if v.peer
                        .is_some_and(|p| p.my_token == token && p.addr == from) =>
                {
                    v.arrive_frag(seq, &frag, regions, now);
                }
                Some(_) => drop(WireDrop::ForgedToken),
                None => drop(WireDrop::UnknownEndpoint),
            },
            ViIn::Ack(from, a) => match engine.get_mut(&a.dst_vi) {
                Some(v)
                    if v.peer
                        .is_some_and(|p| p.my_token == a.token && p.addr == from) =>
                {
                    v.acked(a.ack(), a.sack, now, regions, &mut |o| remote.send_vi(o));
                }
                Some(_) => drop(WireDrop::ForgedToken),
                None => drop(WireDrop::UnknownEndpoint),
            },
            ViIn::Close(from, c) => match engine.get_mut(&c.dst_vi) {
                Some(v)
                    if v.peer
                        .is_some_and(|p| p.my_token == c.token && p.addr == from) =>
                {
                    match c.error() {
                        // A close: what it sent before still arrives.
                        None | Some(ViError::Closed) => v.peer_gone(ViError::PeerGone),
                        // A break: both sides are in the error state now.
                        Some(e) => v.break_with(e, false),
                    }
                }
                Some(_) => drop(WireDrop::ForgedToken),
                None => drop(WireDrop::UnknownEndpoint),
            },
            other => setup.push(other),
        }
    }
    for addr in std::mem::take(&mut remote.silent) {
        for v in engine.values_mut() {
            if v.peer.is_some_and(|p| p.addr == addr) {
                v.break_with(ViError::Timeout, false);
            }
        }
    }
    for v in engine.values_mut() {
        let mut wire = |o: crate::vi_path::Outgoing<'_>| remote.send_vi(o);
        work += v.poll(regions, now, &mut wire);
        v.timers(now, regions, &mut wire);
        // Once per VI and turn, whatever completed (see EngineVi::wake).
        v.wake_now();
        let Some(p) = v.peer else {
            continue;
        };
        if let Some(ack) = v.ack_now(now) {
            let f = ViAck::from_ack(p.vi, p.peer_token, ack).with_sack(v.sack());
            remote.send_vi_ack(p.addr, f);
        }
        if v.tell_peer {
            v.tell_peer = false;
            remote.send_vi_control(
                p.addr,
                Body::ViClose(ViClose {
                    dst_vi: p.vi,
                    token: p.peer_token,
                    reason: v.state,
                }),
            );
        }
    }
    (work, setup)
}

/// The earliest timer of an engine-carried VI.
pub(crate) fn next_deadline(vias: &Vias, remote: &RemoteSide) -> Option<Instant> {
    let ns = vias
        .engine
        .values()
        .filter_map(|v| v.next_deadline())
        .min()?;
    let now = remote.clock_ns();
    Some(Instant::now() + Duration::from_nanos(ns.saturating_sub(now)))
}

/// Set (before the engine sleeps) or clear every VI's doorbell flag.
pub(crate) fn arm(vias: &Vias, on: bool) {
    for v in vias.engine.values() {
        v.arm(on);
    }
}
