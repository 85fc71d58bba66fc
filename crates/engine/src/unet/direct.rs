//! Direct connections: the rings two local endpoints share without the
//! engine in their data path. The engine creates the segment at set-up,
//! hands it to both processes, charges it to the process that opened it,
//! and at teardown marks both sides closed and wakes whoever sleeps on it.
//!
//! `unsafe` is allowed here: a direct connection's segment is shared
//! memory whose header the engine writes in place.

#![allow(unsafe_code)]

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;

use unet_abi::*;
use unet_sys::{self as sys, Segment};

use crate::unet::endpoints::ClientId;

struct Conn {
    seg: Segment,
    /// The client that opened it (its memory counts against the quota of
    /// that client's process).
    owner: ClientId,
    /// The endpoint it was opened from (its id).
    opener: u32,
}

impl Conn {
    fn header(&self) -> &ConnHeader {
        // SAFETY: the segment starts with a ConnHeader we initialised.
        unsafe { self.seg.ptr().cast::<ConnHeader>().as_ref() }
    }
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
        init_conn(&seg, id, ring, a, b);
        self.next_id = id + 1;
        self.conns.insert(
            id,
            Conn {
                seg,
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
        if let Some(c) = self.conns.get(&id) {
            // SAFETY: the segment starts with a ConnHeader we initialised;
            // the two fields are plain u32s written before the segment is
            // handed to anyone (the replies carrying it come after).
            unsafe {
                let h = c.seg.ptr().as_ptr() as *mut ConnHeader;
                (*h).a_endpoint = a;
                (*h).b_endpoint = b;
            }
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
        let h = self.conns.get(&id)?.header();
        let (err, closed, c) = if side_b {
            (&h.b_error, &h.b_closed, &h.b_counters)
        } else {
            (&h.a_error, &h.a_closed, &h.a_counters)
        };
        Some((
            err.load(Ordering::Relaxed),
            closed.load(Ordering::Relaxed) != 0,
            std::array::from_fn(|i| c[i].load(Ordering::Relaxed)),
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
            let h = conn.header();
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

fn init_conn(seg: &Segment, id: u32, ring: u32, a: u32, b: u32) {
    // SAFETY: fresh zeroed segment of conn_segment_size(ring) bytes, not yet
    // shared; plain field writes.
    unsafe {
        let h = seg.ptr().as_ptr() as *mut ConnHeader;
        (*h).magic = CONN_MAGIC;
        (*h).version = VERSION;
        (*h).ring_size = ring;
        (*h).conn_id = id;
        (*h).a_endpoint = a;
        (*h).b_endpoint = b;
    }
}
