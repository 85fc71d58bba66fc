//! Direct connections: the rings two local endpoints share without the
//! engine in their data path. The engine creates the segment at set-up,
//! hands it to both processes, charges it to the process that opened it,
//! and at teardown marks both sides closed and wakes whoever sleeps on it.
//!
//! The segment's header and each side's lines are reached through its
//! checked view ([`ConnView`], made once when the connection is made).
//! `unsafe` is allowed here for that one step: a view is made over a
//! mapping that must outlive it (the segment and its view are kept
//! together and dropped together).

#![allow(unsafe_code)]

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;

use unet_abi::view::{ConnView, Side};
use unet_abi::{conn_segment_size, CLIENT_COUNTERS};
use unet_sys::{self as sys, Segment};

use crate::unet::endpoints::ClientId;

struct Conn {
    seg: Segment,
    /// The segment's view (it points into `seg`, kept beside it).
    view: ConnView,
    /// The client that opened it (its memory counts against the quota of
    /// that client's process).
    owner: ClientId,
    /// The endpoint it was opened from (its id).
    opener: u32,
}

/// The engine's direct connections.
#[derive(Default)]
pub(crate) struct DirectConns {
    conns: HashMap<u32, Conn>,
    next_id: u32,
}

impl DirectConns {
    /// Create a connection between endpoints `a` (the opener, owned by
    /// `owner`) and `b`, with rings of `ring` bytes each way. Returns its
    /// id.
    pub(crate) fn create(&mut self, owner: ClientId, ring: u32, a: u32, b: u32) -> io::Result<u32> {
        let id = self.next_id.max(1);
        let seg = Segment::create(&format!("unet-conn-{id}"), conn_segment_size(ring))?;
        // SAFETY: a fresh zeroed segment, not yet shared, page aligned
        // (`init` checks that it holds the header and both rings); it
        // lives in the Conn with the view.
        let view = unsafe { ConnView::init(seg.ptr(), seg.len(), ring, id, a, b) }
            .map_err(|e| io::Error::other(format!("connection segment: {e}")))?;
        self.next_id = id + 1;
        self.conns.insert(
            id,
            Conn {
                seg,
                view,
                owner,
                opener: a,
            },
        );
        Ok(id)
    }

    /// Create the connection of two VIs, charged to `owner` (the
    /// connecting side's client); [`DirectConns::set_ends`] names the VIs
    /// once they have ids. Returns its id.
    pub(crate) fn create_vi(&mut self, owner: ClientId, ring: u32) -> io::Result<u32> {
        let id = self.create(owner, ring, 0, 0)?;
        if let Some(c) = self.conns.get_mut(&id) {
            // Not an endpoint's: no endpoint is charged for it in `unet stat`.
            c.opener = u32::MAX;
        }
        Ok(id)
    }

    /// Record the ids of the two sides of connection `id` in its header.
    pub(crate) fn set_ends(&mut self, id: u32, a: u32, b: u32) {
        // Written before the segment is handed to anyone (the replies
        // carrying it come after).
        if let Some(c) = self.conns.get_mut(&id) {
            c.view.set_ends(a, b);
        }
    }

    /// What a side of VI connection `id` says of itself: the error it
    /// broke the connection with (0: none) or whether it closed, and its
    /// counters (self-reported). None if there is no such connection.
    pub(crate) fn vi_side(
        &self,
        id: u32,
        side_b: bool,
    ) -> Option<(u32, bool, [u64; CLIENT_COUNTERS])> {
        let s = self.conns.get(&id)?.view.side(Side::of(side_b));
        Some((
            s.own_error.load(Ordering::Relaxed),
            s.own_closed.load(Ordering::Relaxed) != 0,
            std::array::from_fn(|i| s.own_counters[i].load(Ordering::Relaxed)),
        ))
    }

    /// The segment of connection `id`, to hand to a process.
    pub(crate) fn fd(&self, id: u32) -> Option<&OwnedFd> {
        self.conns.get(&id).map(|c| c.seg.fd())
    }

    /// Close connection `id`: both sides see it closed and whoever sleeps
    /// on it wakes. The engine's mapping goes; each process unmaps its own.
    pub(crate) fn close(&mut self, id: u32) {
        if let Some(conn) = self.conns.remove(&id) {
            let h = conn.view.header();
            h.a_closed.store(1, Ordering::Release);
            h.b_closed.store(1, Ordering::Release);
            for cons in [&h.a_to_b, &h.b_to_a] {
                cons.futex.fetch_add(1, Ordering::Release);
                sys::futex_wake(&cons.futex, i32::MAX);
            }
        }
    }

    /// Each connection's opener (the client it is charged to) and size.
    pub(crate) fn charges(&self) -> impl Iterator<Item = (ClientId, u64)> + '_ {
        self.conns.values().map(|c| (c.owner, c.seg.len() as u64))
    }

    /// Bytes of shared memory in the connections opened from endpoint
    /// `id`.
    pub(crate) fn memory_opened_by(&self, id: u32) -> u64 {
        self.conns
            .values()
            .filter(|c| c.opener == id)
            .map(|c| c.seg.len() as u64)
            .sum()
    }
}
