//! The endpoint table and U-Net delivery.
//!
//! The table owns every endpoint of the engine: its segment (buffer area,
//! send, receive, free and event rings), its doorbell, its routes (the
//! channels it holds) and its counter slot. Delivery is U-Net's: pop free
//! buffers of the receiver (or carry a small message inline), copy, publish
//! a receive descriptor, and wake the receiver only if it sleeps. A message
//! that finds no room is dropped and counted, never waited for, unless
//! the endpoint was created *buffered*: then it goes to the endpoint's
//! virtual buffer (UDM's two-case delivery, [`crate::unet::backlog`]), and the
//! engine moves it into the receive queue, in order, as room appears.
//!
//! Trust: the table reads rings and free-buffer offsets from shared memory,
//! which the client may scribble on at any time. Every index and offset is
//! checked against the engine's own copy of the endpoint's geometry before
//! use; a bad one is a counter on that endpoint only.
//!
//! `unsafe` is allowed here: an endpoint's segment is shared memory,
//! mapped once through `unet_abi`'s view and read and written in place
//! (its header, the buffer area, a descriptor's status); the data path
//! reaches the buffer area only through [`Ep::message`] and
//! [`Ep::set_send_status`].

#![allow(unsafe_code)]

use std::collections::HashMap;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

use unet_abi::ring::Ring;
use unet_abi::spine::RECV_AM;
use unet_abi::view::EndpointView;
use unet_abi::*;
use unet_sys::{self as sys, EventFd, Segment};

use crate::counters::Counters;
use crate::unet::am::AmInbox;
use crate::unet::backlog::Backlog;
use crate::unet::routes::{Peer, Route};

/// Most channels per endpoint.
pub const MAX_CHANNELS: usize = 4096;

/// What became of a message handed to [`EndpointTable::deliver_from`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// In the receive queue, or in the virtual buffer.
    Done,
    /// Dropped (counted on the receiver).
    Dropped,
    /// Not taken: the receiver's virtual buffer is at its limit and the
    /// sender may be held back (it keeps the message and offers it again).
    Held,
}

/// Why a message found no room in an endpoint's receive queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NoRoom {
    RingFull,
    NoBuffer,
    TooLarge,
}

impl NoRoom {
    fn counter(self) -> EndpointCounter {
        match self {
            NoRoom::RingFull => EndpointCounter::RxDropRingFull,
            NoRoom::NoBuffer => EndpointCounter::RxDropNoBuffer,
            NoRoom::TooLarge => EndpointCounter::RxDropTooLarge,
        }
    }
}

/// A message in place in an endpoint's buffer area, its bounds checked
/// against the area ([`Ep::message`]). It is read where it lies and must
/// not outlive its endpoint: the data path uses it within the turn that
/// took its descriptor.
#[derive(Clone, Copy)]
pub(crate) struct AreaMsg {
    ptr: NonNull<u8>,
    len: usize,
}

impl AreaMsg {
    /// Its bytes.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: ptr..ptr + len lies inside the buffer area (checked by
        // Ep::message), a live mapping the engine holds while the
        // endpoint lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

/// The owner of an endpoint: a control client of the engine, by index.
pub(crate) use crate::clients::ClientId;

/// One endpoint, as the engine holds it.
pub(crate) struct Ep {
    pub id: u32,
    pub owner: ClientId,
    pub seg: Segment,
    pub layout: Layout,
    pub send: Ring<SendDesc>,
    pub recv: Ring<RecvDesc>,
    pub free: Ring<u32>,
    pub events: Ring<EventDesc>,
    /// The engine's copies of the positions it produces or consumes (the
    /// shared ones are only written, never trusted back).
    pub send_tail: u64,
    pub recv_head: u64,
    pub event_head: u64,
    /// The last impossible send head counted (counted once per value).
    pub bad_head: Option<u64>,
    pub doorbell: EventFd,
    pub routes: Vec<Route>,
    pub accept: bool,
    /// Free buffers the engine holds for this endpoint (popped first):
    /// buffers popped for a message that was then dropped, and buffers an
    /// applet gave back (the free ring has one producer, the client).
    pub spare: Vec<u32>,
    /// The endpoint's counter slot.
    pub slot: usize,
    /// A buffered endpoint's virtual buffer (None: U-Net's drop).
    pub backlog: Option<Box<Backlog>>,
}

impl Ep {
    pub(crate) fn header(&self) -> &EndpointHeader {
        // SAFETY: the segment starts with an EndpointHeader (we created it),
        // page aligned; its shared fields are atomics.
        unsafe { self.seg.ptr().cast::<EndpointHeader>().as_ref() }
    }

    /// The buffer area's first byte.
    pub(crate) fn area(&self) -> NonNull<u8> {
        // SAFETY: buffer_area_off + size == segment size, from Layout.
        unsafe { self.seg.ptr().add(self.layout.buffer_area_off as usize) }
    }

    pub(crate) fn area_size(&self) -> u64 {
        self.layout.geometry.buffer_area_size
    }

    /// The `len` bytes at `offset` of the buffer area, or None if they do
    /// not lie inside it.
    #[inline]
    pub(crate) fn message(&self, offset: u32, len: u32) -> Option<AreaMsg> {
        if offset as u64 + len as u64 > self.area_size() {
            return None;
        }
        Some(AreaMsg {
            // SAFETY: offset <= the area's size (checked): inside the
            // mapping, or one past the area's end.
            ptr: unsafe { self.area().add(offset as usize) },
            len: len as usize,
        })
    }

    /// Write the status of send descriptor `pos` in place (the one field
    /// of a send descriptor the engine writes back).
    #[inline]
    pub(crate) fn set_send_status(&self, pos: u64, status: i32) {
        // SAFETY: slot_ptr(pos) is an in-bounds, aligned SendDesc in the
        // endpoint's mapping; writing one i32 field through a raw pointer.
        unsafe { std::ptr::addr_of_mut!((*self.send.slot_ptr(pos)).status).write_volatile(status) }
    }

    /// A free channel tag (reusing a closed one first), or None when the
    /// endpoint holds [`MAX_CHANNELS`].
    pub(crate) fn alloc_route(&mut self) -> Option<u16> {
        if let Some(i) = self.routes.iter().position(|c| !c.in_use()) {
            return Some(i as u16);
        }
        if self.routes.len() < MAX_CHANNELS {
            self.routes.push(Route::Free);
            return Some((self.routes.len() - 1) as u16);
        }
        None
    }

    /// The route of channel `chan`, if the tag exists.
    #[inline]
    pub(crate) fn route(&self, chan: u16) -> Option<Route> {
        self.routes.get(chan as usize).copied()
    }

    /// The virtual buffer's limit in bytes (0: not buffered).
    pub(crate) fn buffer_limit(&self) -> u64 {
        self.backlog.as_ref().map_or(0, |b| b.limit())
    }

    /// Whether the endpoint holds a direct connection.
    pub(crate) fn has_direct(&self) -> bool {
        self.routes.iter().any(Route::is_direct)
    }
}

/// Every endpoint of the engine.
pub(crate) struct EndpointTable {
    eps: Vec<Option<Ep>>,
    by_id: HashMap<u32, usize>,
    next_id: u32,
    free_slots: Vec<usize>,
    counters: Arc<Counters>,
    /// Set by a delivery of this turn that found an awake receiver
    /// without room (see the dispatcher's docs): the turn ends early and
    /// the engine yields its CPU.
    pub behind: bool,
    /// Set by a delivery of this turn whose receiver waits on the
    /// engine's own CPU without sleeping: the engine sleeps at once after
    /// the turn rather than polling again.
    pub handoff: bool,
    /// Endpoints (by index) whose virtual buffer holds messages: the
    /// engine moves them on every turn while any does.
    backlogged: Vec<usize>,
    /// Active messages sent to SPINE, waiting for its turn.
    pub am: AmInbox,
}

impl EndpointTable {
    pub(crate) fn new(max_endpoints: u32, counters: Arc<Counters>) -> Self {
        EndpointTable {
            eps: Vec::new(),
            by_id: HashMap::new(),
            next_id: 1,
            free_slots: (0..max_endpoints as usize).rev().collect(),
            counters,
            behind: false,
            handoff: false,
            backlogged: Vec::new(),
            am: AmInbox::default(),
        }
    }

    /// The engine's counters.
    #[inline]
    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Slots of the table (live or not): indices are `0..len()`.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.eps.len()
    }

    #[inline]
    pub(crate) fn get(&self, idx: usize) -> Option<&Ep> {
        self.eps.get(idx).and_then(|e| e.as_ref())
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, idx: usize) -> Option<&mut Ep> {
        self.eps.get_mut(idx).and_then(|e| e.as_mut())
    }

    /// The endpoint at `idx` if it is still the one with id `id`.
    #[inline]
    pub(crate) fn live_mut(&mut self, idx: usize, id: u32) -> Option<&mut Ep> {
        self.get_mut(idx).filter(|e| e.id == id)
    }

    /// Whether `idx` holds the endpoint with id `id`.
    #[inline]
    pub(crate) fn is_live(&self, idx: usize, id: u32) -> bool {
        self.get(idx).is_some_and(|e| e.id == id)
    }

    /// The counters, and the counter slot of endpoint `idx` with the
    /// route of its channel `chan` (if both exist), borrowed together.
    #[inline]
    pub(crate) fn route_mut(
        &mut self,
        idx: usize,
        chan: u16,
    ) -> (&Counters, Option<(usize, &mut Route)>) {
        let r = self
            .eps
            .get_mut(idx)
            .and_then(|e| e.as_mut())
            .and_then(|e| {
                let slot = e.slot;
                e.routes.get_mut(chan as usize).map(|r| (slot, r))
            });
        (&self.counters, r)
    }

    /// The table index of endpoint `id`.
    #[inline]
    pub(crate) fn index_of(&self, id: u32) -> Option<usize> {
        self.by_id.get(&id).copied()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &Ep)> {
        self.eps
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|e| (i, e)))
    }

    /// Reserve a counter slot and an id for an endpoint whose segment is
    /// being made (on the set-up thread): `(slot, id)`. Given back with
    /// [`EndpointTable::unreserve`] if the endpoint is not entered.
    pub(crate) fn reserve(&mut self) -> Result<(usize, u32), unet_control::ErrorCode> {
        let slot = self
            .free_slots
            .pop()
            .ok_or(unet_control::ErrorCode::NoResources)?;
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        Ok((slot, id))
    }

    /// Give back a slot reserved for an endpoint that was not entered.
    pub(crate) fn unreserve(&mut self, slot: usize) {
        self.free_slots.push(slot);
    }

    /// Make the segment of endpoint `id` (geometry `layout`) in engine
    /// `engine_id`: created, pre-faulted and initialised. It takes time in
    /// proportion to its size (zeroing every page), so the engine does it
    /// on its set-up thread, never on its own.
    pub(crate) fn make_segment(layout: &Layout, id: u32, engine_id: u64) -> io::Result<Segment> {
        let seg = Segment::create(&format!("unet-ep-{id}"), layout.segment_size as usize)?;
        init_endpoint(&seg, layout, id, engine_id)?;
        Ok(seg)
    }

    /// Enter endpoint `id`, in reserved counter `slot`, of geometry
    /// `layout`, its segment `seg` made by [`EndpointTable::make_segment`],
    /// for client `owner` (process `pid`), buffered with a virtual buffer
    /// of `buffer_limit` bytes (0: not buffered; the caller validated it).
    /// `register` is given the new endpoint's table index and its doorbell
    /// before it is entered (the dispatcher polls the doorbell). On failure
    /// the slot is given back and the segment returned, to be unmapped off
    /// the engine's thread.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn insert(
        &mut self,
        owner: ClientId,
        pid: u32,
        (slot, id): (usize, u32),
        layout: Layout,
        (accept, buffer_limit): (bool, u64),
        seg: Segment,
        register: impl FnOnce(usize, &EventFd) -> io::Result<()>,
    ) -> Result<usize, Segment> {
        if seg.len() < layout.segment_size as usize {
            self.free_slots.push(slot);
            return Err(seg);
        }
        // Address space only: the memory file is sparse, its mapping
        // touches no page (cheap enough for the engine's thread).
        let backlog = if buffer_limit > 0 {
            match Backlog::new(id, buffer_limit as usize) {
                Ok(b) => Some(Box::new(b)),
                Err(_) => {
                    self.free_slots.push(slot);
                    return Err(seg);
                }
            }
        } else {
            None
        };
        let doorbell = match EventFd::new() {
            Ok(d) => d,
            Err(_) => {
                self.free_slots.push(slot);
                return Err(seg);
            }
        };
        // SAFETY: the mapping lives in `seg`, which the endpoint owns
        // beside its rings. Mapped by the engine's own layout: the header
        // is the client's to scribble on.
        let Ok(EndpointView {
            send,
            recv,
            free,
            events,
            ..
        }) = (unsafe { EndpointView::new(seg.ptr(), seg.len(), &layout) })
        else {
            self.free_slots.push(slot);
            return Err(seg);
        };
        let idx = match self.eps.iter().position(|e| e.is_none()) {
            Some(i) => i,
            None => {
                self.eps.push(None);
                self.eps.len() - 1
            }
        };
        if register(idx, &doorbell).is_err() {
            self.free_slots.push(slot);
            return Err(seg);
        }
        let ep = Ep {
            id,
            owner,
            seg,
            layout,
            send,
            recv,
            free,
            events,
            send_tail: 0,
            recv_head: 0,
            event_head: 0,
            bad_head: None,
            doorbell,
            routes: Vec::new(),
            accept,
            spare: Vec::new(),
            slot,
            backlog,
        };
        self.counters.open_slot(slot, id, pid);
        self.counters
            .set_ep(slot, EndpointCounter::BufferLimit, buffer_limit);
        self.by_id.insert(id, idx);
        self.eps[idx] = Some(ep);
        self.counters.engine(EngineCounter::EndpointsCreated, 1);
        Ok(idx)
    }

    /// Take endpoint `idx` out of the table. The caller tears down its
    /// routes; dropping it unmaps the segment and closes its memory file
    /// (the memory is freed once the client's mapping is gone too).
    pub(crate) fn remove(&mut self, idx: usize) -> Option<Ep> {
        let ep = self.eps.get_mut(idx)?.take()?;
        self.by_id.remove(&ep.id);
        self.counters.close_slot(ep.slot);
        self.free_slots.push(ep.slot);
        self.counters.engine(EngineCounter::EndpointsReclaimed, 1);
        Some(ep)
    }

    /// Ask every client to ring the doorbell when it pushes a send
    /// descriptor (the engine is about to sleep).
    pub(crate) fn arm(&self) {
        for (_, ep) in self.iter() {
            ep.header().engine_armed.store(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn disarm(&self) {
        for (_, ep) in self.iter() {
            ep.header().engine_armed.store(0, Ordering::Relaxed);
        }
    }

    /// Count a doorbell rung by endpoint `idx`'s client.
    pub(crate) fn doorbell_rung(&self, idx: usize) {
        if let Some(ep) = self.get(idx) {
            self.counters.ep(ep.slot, EndpointCounter::Doorbells, 1);
        }
    }

    /// Mark channel `chan` of endpoint (`idx`, `id`) gone, because its
    /// peer went away, and tell the endpoint's client.
    pub(crate) fn peer_gone(&mut self, p: Peer) {
        let Some(ep) = self.live_mut(p.idx, p.id) else {
            return;
        };
        if let Some(r) = ep.routes.get_mut(p.chan as usize) {
            if r.in_use() {
                *r = Route::Gone;
                self.push_event(
                    p.idx,
                    EventDesc {
                        kind: EventKind::PeerGone as u16,
                        channel: p.chan,
                        ..Default::default()
                    },
                );
            }
        }
    }

    /// Count a channel opened on endpoint `idx`.
    pub(crate) fn count_opened(&self, idx: usize) {
        if let Some(ep) = self.get(idx) {
            self.counters
                .ep(ep.slot, EndpointCounter::ChannelsOpened, 1);
            self.counters
                .set_channels_peak(ep.slot, ep.routes.len() as u32);
        }
    }

    /// Push an event to endpoint `idx`'s client (dropped and counted if
    /// its event ring is full).
    pub(crate) fn push_event(&mut self, idx: usize, ev: EventDesc) {
        let counters = &self.counters;
        let Some(ep) = self.eps.get_mut(idx).and_then(|e| e.as_mut()) else {
            return;
        };
        let cap = ep.layout.geometry.event_cap as u64;
        if ep.event_head.wrapping_sub(ep.events.tail()) >= cap {
            counters.ep(ep.slot, EndpointCounter::EventDropRingFull, 1);
            return;
        }
        ep.events.write(ep.event_head, ev);
        ep.event_head += 1;
        ep.events.set_head(ep.event_head);
        wake_client(ep, counters);
    }

    /// U-Net delivery: `len` bytes at `src` to endpoint `di` (if it is
    /// still `dst_id`) as arriving on its channel `chan`, inline when
    /// small, otherwise into free buffers popped from its free ring; then
    /// push the receive descriptor and wake it if it sleeps. Drops are
    /// counted on the receiver. False if the message was dropped.
    ///
    /// `src` points into a live mapping held by the engine (a sender's
    /// buffer area or a wire buffer) with at least `len` readable bytes.
    pub(crate) fn deliver(
        &mut self,
        di: usize,
        dst_id: u32,
        chan: u16,
        src: *const u8,
        len: usize,
    ) -> bool {
        self.deliver_from(di, dst_id, chan, src, len, false) == Delivery::Done
    }

    /// [`EndpointTable::deliver`], for a sender that may be held back
    /// (`may_hold`: a local sender's send queue). To a buffered endpoint, a
    /// message that finds no room, or finds messages waiting in the
    /// virtual buffer (they go first), goes to the virtual buffer; at its
    /// limit it is [`Delivery::Held`] when `may_hold`, dropped and counted
    /// (`rx_drop_buffer_limit`) otherwise.
    pub(crate) fn deliver_from(
        &mut self,
        di: usize,
        dst_id: u32,
        chan: u16,
        src: *const u8,
        len: usize,
        may_hold: bool,
    ) -> Delivery {
        let counters = &self.counters;
        let Some(dst) = self.eps.get_mut(di).and_then(|e| e.as_mut()) else {
            return Delivery::Dropped;
        };
        if dst.id != dst_id {
            return Delivery::Dropped;
        }
        let slot = dst.slot;
        let mut waiting = dst.backlog.as_ref().is_some_and(|b| !b.is_empty());
        if waiting {
            // Those waiting go first; if they all fit now, this one may go
            // straight to the queue (no copy through the buffer).
            let mut handoff = false;
            drain_ep(dst, counters, &mut handoff);
            self.handoff |= handoff;
            waiting = dst.backlog.as_ref().is_some_and(|b| !b.is_empty());
        }
        if !waiting {
            match place::<0>(dst, counters, chan, src, len) {
                Ok(handoff) => {
                    self.handoff |= handoff;
                    return Delivery::Done;
                }
                Err(NoRoom::TooLarge) => {
                    counters.ep(slot, EndpointCounter::RxDropTooLarge, 1);
                    return Delivery::Dropped;
                }
                Err(why) => {
                    if dst.backlog.is_none() {
                        self.behind |= client_awake(dst);
                        counters.ep(slot, why.counter(), 1);
                        return Delivery::Dropped;
                    }
                    // Buffered instead: nothing is lost, the turn goes on.
                }
            }
        } else if too_large(dst, len) {
            // It could never leave the buffer.
            counters.ep(slot, EndpointCounter::RxDropTooLarge, 1);
            return Delivery::Dropped;
        }
        let Some(b) = dst.backlog.as_mut() else {
            return Delivery::Dropped;
        };
        let was_empty = b.is_empty();
        if b.push(chan, src, len) {
            counters.ep(slot, EndpointCounter::RxBuffered, 1);
            counters.set_ep(slot, EndpointCounter::BufferPages, b.pages());
            counters.set_ep(slot, EndpointCounter::BufferPagesMax, b.pages_max);
            if was_empty {
                self.backlogged.push(di);
            }
            return Delivery::Done;
        }
        if may_hold {
            if !b.held {
                b.held = true;
                counters.ep(slot, EndpointCounter::RxHeld, 1);
            }
            return Delivery::Held;
        }
        counters.ep(slot, EndpointCounter::RxDropBufferLimit, 1);
        Delivery::Dropped
    }

    /// Whether some endpoint's virtual buffer holds messages.
    #[inline]
    pub(crate) fn has_backlog(&self) -> bool {
        !self.backlogged.is_empty()
    }

    /// Move messages from the virtual buffers into their endpoints'
    /// receive queues, in order, as far as room and free buffers allow (a
    /// receive queue's worth each at most); give back the pages read.
    /// Returns the messages moved. Costs nothing while no virtual buffer
    /// holds any.
    pub(crate) fn drain_backlogs(&mut self) -> usize {
        if self.backlogged.is_empty() {
            return 0;
        }
        let mut list = std::mem::take(&mut self.backlogged);
        let counters = &self.counters;
        let mut moved_all = 0;
        let mut handoff = false;
        // An endpoint may be listed twice (its buffer emptied and filled
        // again by deliveries since the last pass): once is enough.
        list.sort_unstable();
        list.dedup();
        list.retain(|&di| {
            let Some(ep) = self.eps.get_mut(di).and_then(|e| e.as_mut()) else {
                return false;
            };
            moved_all += drain_ep(ep, counters, &mut handoff);
            ep.backlog.as_ref().is_some_and(|b| !b.is_empty())
        });
        self.handoff |= handoff;
        // Endpoints that started buffering during the pass (none: the
        // pass delivers nothing new) come after.
        list.append(&mut self.backlogged);
        self.backlogged = list;
        moved_all
    }

    /// Deliver an active message (`msg`, in the host framing) for handler
    /// `handler` to endpoint `id`: a receive descriptor with `RECV_AM`.
    /// Never buffered: false, counted on the receiver as a U-Net drop is,
    /// when its queue or free buffers have no room (or its virtual buffer
    /// holds messages, which go first), or when there is no such endpoint.
    pub(crate) fn deliver_am(&mut self, id: u32, handler: u16, msg: &[u8]) -> bool {
        let counters = &self.counters;
        let Some(&di) = self.by_id.get(&id) else {
            return false;
        };
        let Some(dst) = self.eps.get_mut(di).and_then(|e| e.as_mut()) else {
            return false;
        };
        let slot = dst.slot;
        if dst.backlog.as_ref().is_some_and(|b| !b.is_empty()) {
            counters.ep(slot, EndpointCounter::RxDropNoBuffer, 1);
            return false;
        }
        match place::<RECV_AM>(dst, counters, handler, msg.as_ptr(), msg.len()) {
            Ok(handoff) => {
                self.handoff |= handoff;
                true
            }
            Err(NoRoom::TooLarge) => {
                counters.ep(slot, EndpointCounter::RxDropTooLarge, 1);
                false
            }
            Err(why) => {
                counters.ep(slot, why.counter(), 1);
                false
            }
        }
    }

    /// Pop a free buffer of endpoint `idx` (an applet's `getFreeBuffer`).
    pub(crate) fn pop_free(&mut self, idx: usize) -> Option<u32> {
        let counters = &self.counters;
        let ep = self.eps.get_mut(idx).and_then(|e| e.as_mut())?;
        pop_free(ep, counters)
    }

    /// Push a receive descriptor an applet built (its `dmaRxd`): false,
    /// counted, if the receive ring is full; the buffers it named are kept
    /// for the endpoint, not lost.
    pub(crate) fn push_recv(&mut self, idx: usize, desc: &RecvDesc) -> bool {
        let counters = &self.counters;
        let Some(ep) = self.eps.get_mut(idx).and_then(|e| e.as_mut()) else {
            return false;
        };
        if recv_full(ep) {
            counters.ep(ep.slot, EndpointCounter::RxDropRingFull, 1);
            if desc.flags & RECV_INLINE == 0 {
                for i in 0..(desc.nbufs as usize).min(MAX_RX_BUFFERS) {
                    ep.spare.push(desc.offset(i));
                }
            }
            return false;
        }
        ep.recv.write(ep.recv_head, *desc);
        self.handoff |= publish_recv(ep, counters, desc.len);
        true
    }

    /// [`EndpointTable::push_recv`] of a descriptor naming one buffer,
    /// `off`, written in place (no descriptor copied: see [`RecvSlot`]).
    pub(crate) fn push_recv_buffer(&mut self, idx: usize, chan: u16, len: u32, off: u32) -> bool {
        let counters = &self.counters;
        let Some(ep) = self.eps.get_mut(idx).and_then(|e| e.as_mut()) else {
            return false;
        };
        if recv_full(ep) {
            counters.ep(ep.slot, EndpointCounter::RxDropRingFull, 1);
            ep.spare.push(off);
            return false;
        }
        // SAFETY: the slot at the head is in the live ring and unpublished.
        let slot = unsafe { RecvSlot::new(ep.recv.slot_ptr(ep.recv_head)) };
        slot.set_offset(0, off);
        slot.finish(len, chan, 0, 1, 4);
        self.handoff |= publish_recv(ep, counters, len);
        true
    }

    /// [`EndpointTable::push_recv`] of a descriptor holding `data`
    /// (at most [`INLINE_MAX`] bytes) inline, written in place.
    pub(crate) fn push_recv_inline(&mut self, idx: usize, chan: u16, data: &[u8]) -> bool {
        let counters = &self.counters;
        let Some(ep) = self.eps.get_mut(idx).and_then(|e| e.as_mut()) else {
            return false;
        };
        let len = data.len().min(INLINE_MAX);
        if recv_full(ep) {
            counters.ep(ep.slot, EndpointCounter::RxDropRingFull, 1);
            return false;
        }
        // SAFETY: the slot at the head is in the live ring and unpublished.
        let slot = unsafe { RecvSlot::new(ep.recv.slot_ptr(ep.recv_head)) };
        // SAFETY: the slot's data has INLINE_MAX >= len bytes, and `data`
        // (the applet's own array, in the VM's heap) is not in the ring.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), slot.data(), len) };
        slot.finish(len as u32, chan, RECV_INLINE, 0, len);
        self.handoff |= publish_recv(ep, counters, len as u32);
        true
    }
}

/// Whether `ep`'s receive queue has no room for one more descriptor.
#[inline]
fn recv_full(ep: &Ep) -> bool {
    ep.recv_head.wrapping_sub(ep.recv.tail()) >= ep.layout.geometry.recv_cap as u64
}

/// Move what waits in `ep`'s virtual buffer into its receive queue, in
/// order, as far as room and free buffers allow; give back the pages read.
/// Returns the messages moved; `handoff` as [`publish_recv`] says.
fn drain_ep(ep: &mut Ep, counters: &Counters, handoff: &mut bool) -> usize {
    let Some(mut b) = ep.backlog.take() else {
        return 0;
    };
    let mut moved = 0;
    // Each message moved takes a queue entry: a queue's worth at most.
    for _ in 0..=ep.layout.geometry.recv_cap {
        let Some((chan, p, len)) = b.front() else {
            break;
        };
        // `p` points into the virtual buffer, which the engine alone
        // maps; `place` copies it into the endpoint's area.
        match place::<0>(ep, counters, chan, p, len) {
            Ok(h) => {
                *handoff |= h;
                b.pop();
                moved += 1;
            }
            Err(NoRoom::TooLarge) => {
                // Not buffered in the first place; skip it anyway.
                counters.ep(ep.slot, EndpointCounter::RxDropTooLarge, 1);
                b.pop();
            }
            // No room yet: the rest waits, in order.
            Err(_) => break,
        }
    }
    if moved > 0 {
        b.held = false;
        let n = b.return_pages();
        if n > 0 {
            counters.ep(ep.slot, EndpointCounter::PagesReturned, n);
        }
        counters.set_ep(ep.slot, EndpointCounter::BufferPages, b.pages());
    }
    ep.backlog = Some(b);
    moved
}

/// Whether a message of `len` bytes needs more receive buffers of `ep`
/// than a descriptor names.
fn too_large(ep: &Ep, len: usize) -> bool {
    len > INLINE_MAX
        && unet_abi::buffers_spanned(len, ep.layout.geometry.buffer_size as usize) > MAX_RX_BUFFERS
}

/// Put `len` bytes at `src` into `ep`'s receive queue as arriving on its
/// channel `chan` (inline when small, otherwise into free buffers), and
/// wake the client if it sleeps: `Ok(handoff)` (see [`publish_recv`]), or
/// why there was no room (nothing consumed).
///
/// `src` has at least `len` readable bytes, in a live mapping. `FLAGS`
/// are added to the descriptor's flags (`RECV_AM` for an active message).
fn place<const FLAGS: u8>(
    ep: &mut Ep,
    counters: &Counters,
    chan: u16,
    src: *const u8,
    len: usize,
) -> Result<bool, NoRoom> {
    // Ring space first, so no buffer is consumed for a message we drop.
    if recv_full(ep) {
        return Err(NoRoom::RingFull);
    }
    // SAFETY: the slot at the head is in the live ring and unpublished
    // (the head moves only in publish_recv, after it is written).
    let slot = unsafe { RecvSlot::new(ep.recv.slot_ptr(ep.recv_head)) };
    if len <= INLINE_MAX {
        // SAFETY: src has len readable bytes (caller's contract); the
        // slot's data has INLINE_MAX >= len bytes. ptr::copy tolerates
        // overlap (both may be in the client's segment).
        unsafe { std::ptr::copy(src, slot.data(), len) };
        slot.finish(len as u32, chan, RECV_INLINE | FLAGS, 0, len);
    } else {
        let bs = ep.layout.geometry.buffer_size as usize;
        let nbufs = unet_abi::buffers_spanned(len, bs);
        if nbufs > MAX_RX_BUFFERS {
            return Err(NoRoom::TooLarge);
        }
        let mut got = [0u32; MAX_RX_BUFFERS];
        for i in 0..nbufs {
            match pop_free(ep, counters) {
                Some(o) => got[i] = o,
                None => {
                    ep.spare.extend_from_slice(&got[..i]);
                    return Err(NoRoom::NoBuffer);
                }
            }
        }
        let area = ep.area();
        for (i, &off) in got[..nbufs].iter().enumerate() {
            let n = bs.min(len - i * bs);
            // SAFETY: pop_free checked off + buffer_size <= area size;
            // src has len bytes. ptr::copy tolerates overlap (a client
            // may post a free buffer overlapping its own send buffer).
            unsafe { std::ptr::copy(src.add(i * bs), area.as_ptr().add(off as usize), n) };
            slot.set_offset(i, off);
        }
        slot.finish(len as u32, chan, FLAGS, nbufs as u8, nbufs * 4);
    }
    Ok(publish_recv(ep, counters, len as u32))
}

/// Pop one free buffer of `ep`: the engine's spare stash first, then the
/// shared free ring (which the client's direct path also pops, so the claim
/// is a compare-and-swap, retried a bounded number of times).
fn pop_free(ep: &mut Ep, counters: &Counters) -> Option<u32> {
    if let Some(o) = ep.spare.pop() {
        return Some(o);
    }
    let cap = ep.layout.geometry.free_cap as u64;
    let limit = ep.area_size() - ep.layout.geometry.buffer_size as u64;
    for _ in 0..8 {
        let t = ep.free.tail();
        let h = ep.free.head();
        let n = h.wrapping_sub(t);
        if n == 0 {
            return None;
        }
        if n > cap {
            counters.ep(ep.slot, EndpointCounter::RingCorrupt, 1);
            return None;
        }
        let off = ep.free.read(t);
        if ep.free.cas_tail(t) {
            if off as u64 > limit {
                counters.ep(ep.slot, EndpointCounter::FreeBadOffset, 1);
                continue;
            }
            return Some(off);
        }
    }
    None
}

/// Publish the receive descriptor written at the head (of a message of
/// `len` bytes; the caller checked there is room), count the message and
/// wake the client if it sleeps. True if the client waits on this CPU
/// without sleeping (see [`wake_client`]).
fn publish_recv(ep: &mut Ep, counters: &Counters, len: u32) -> bool {
    ep.recv_head += 1;
    ep.recv.set_head(ep.recv_head);
    counters.ep(ep.slot, EndpointCounter::RxMsgs, 1);
    counters.ep(ep.slot, EndpointCounter::RxBytes, len as u64);
    wake_client(ep, counters)
}

/// Whether the endpoint's client is awake (not sleeping in a wait). A
/// hint from shared memory: a wrong value only decides whether the engine
/// yields its CPU once.
fn client_awake(ep: &Ep) -> bool {
    ep.header().client_sleeping.load(Ordering::Relaxed) == 0
}

/// Wake the endpoint's client if it sleeps. The fence pairs with the one the
/// client issues between setting `client_sleeping` and re-checking its rings.
/// If it does not sleep: true if it last ran on this CPU (its `client_cpu`
/// hint, which it may set to anything: it only decides when the engine
/// sleeps).
fn wake_client(ep: &Ep, counters: &Counters) -> bool {
    fence(Ordering::SeqCst);
    let h = ep.header();
    if h.client_sleeping.load(Ordering::Relaxed) != 0 {
        h.rx_futex.fetch_add(1, Ordering::Release);
        sys::futex_wake(&h.rx_futex, i32::MAX);
        counters.ep(ep.slot, EndpointCounter::ClientWakeups, 1);
        return false;
    }
    let cpu = h.client_cpu.load(Ordering::Relaxed);
    cpu != 0 && cpu == sys::current_cpu().wrapping_add(1)
}

fn init_endpoint(seg: &Segment, l: &Layout, id: u32, engine_id: u64) -> io::Result<()> {
    // SAFETY: the segment is fresh (zeroed), private to us until its fd is
    // sent, and l.segment_size bytes; the view's rings are dropped here.
    unsafe { EndpointView::init(seg.ptr(), seg.len(), l, id, engine_id) }
        .map(drop)
        .map_err(|e| io::Error::other(format!("endpoint segment: {e}")))
}
