//! The body of the `descriptors` fuzz target (`fuzz/fuzz_targets/`), also
//! run over seeded inputs by `tests/descriptor_fuzz.rs`: both include this
//! file.
//!
//! An engine is stepped on the caller's thread, deterministically. A
//! hostile endpoint pushes arbitrary send descriptors and scribbles over
//! its own ring headers, ring entries and free buffers; it holds a channel
//! to the honest receiver, one to itself, one whose peer is gone and one it
//! closed. After each step of the input the engine's work is checked
//! against a model of what it must do:
//!
//! - a send head more than a ring ahead of what the engine took is
//!   impossible: nothing is taken, and it is counted once per value;
//! - otherwise every descriptor between the engine's position and the head
//!   is taken, gets the status its fields call for (bad flags (an active
//!   message, flags 1, is refused: no extension is loaded), bad length,
//!   buffer outside the area, unknown or closed channel, peer gone, sent)
//!   and exactly one count of that reason;
//! - every message sent reaches its receiver or is counted as dropped
//!   there;
//! - the honest pair's messages arrive intact, in between and at the end,
//!   and closing the hostile endpoint tells the honest receiver.

use std::os::fd::BorrowedFd;
use std::sync::atomic::Ordering;

use unet_abi::ring::Ring;
use unet_abi::view::EndpointView;
use unet_abi::*;
use unet_control::{Reply, Request};
use unet_engine::invoker::{LocalClient, RawEndpoint};
use unet_engine::{Dispatcher, EngineConfig, PathChoice};
use unet_sys::Segment;

/// Bytes of input per operation: an opcode and 16 bytes of argument.
pub const OP_BYTES: usize = 17;
/// Operations run per input at most.
const MAX_OPS: usize = 2048;

/// Where one of the hostile endpoint's channel tags leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Leads {
    /// To the honest receiver.
    Receiver,
    /// To the hostile endpoint itself (both tags of a loopback channel).
    Itself,
    /// To an endpoint that was closed.
    Gone,
    /// Nowhere: the hostile endpoint closed it.
    Closed,
}

/// Counts the model expects on the hostile endpoint and its receivers.
#[derive(Default, Debug)]
struct Expected {
    sent: u64,
    sent_bytes: u64,
    bad_flags: u64,
    bad_length: u64,
    bad_buffer: u64,
    bad_channel: u64,
    peer_gone: u64,
    ring_corrupt: u64,
    /// Messages sent to the honest receiver by the hostile endpoint, by
    /// the honest sender.
    to_receiver: u64,
    honest: u64,
    /// Messages the hostile endpoint sent itself.
    to_itself: u64,
}

/// Counter slots of the endpoints, found by their ids in the counters
/// segment.
fn slots(engine: &Dispatcher, ids: &[u32]) -> Vec<usize> {
    // SAFETY: the engine keeps the descriptor open while it lives; it is
    // only duplicated here.
    let fd = unsafe { BorrowedFd::borrow_raw(engine.counters().fd()) }
        .try_clone_to_owned()
        .expect("dup the counters segment");
    let seg = Segment::open(fd, ENDPOINT_SLOTS_OFF, false).expect("map the counters");
    let size = std::mem::size_of::<EndpointSlot>();
    ids.iter()
        .map(|&id| {
            (0..)
                .find(|&i| {
                    let p = seg
                        .at(ENDPOINT_SLOTS_OFF + i * size, size)
                        .unwrap_or_else(|| panic!("endpoint {id} has no counter slot"));
                    // SAFETY: in bounds (checked by at()), aligned; the
                    // slot's fields are atomics.
                    let s = unsafe { p.cast::<EndpointSlot>().as_ref() };
                    s.live.load(Ordering::Acquire) != 0
                        && s.endpoint_id.load(Ordering::Relaxed) == id
                })
                .expect("a slot")
        })
        .collect()
}

/// The engine, the honest pair, the hostile endpoint, and the model.
struct World {
    engine: Dispatcher,
    /// The honest pair's client (kept: closing it would reclaim them).
    _honest: LocalClient,
    hostile: LocalClient,
    a: RawEndpoint,
    b: RawEndpoint,
    bad: RawEndpoint,
    /// `a`'s channel to `b`, `b`'s tags for `a`'s and the hostile's.
    ch: u16,
    from_a: u16,
    from_bad: u16,
    /// The hostile endpoint's tags.
    leads: Vec<Leads>,
    /// Its rings, driven by hand (wrapping arithmetic: it scribbles on
    /// their positions too).
    send: Ring<SendDesc>,
    free: Ring<u32>,
    /// Counter slots of `b` and the hostile endpoint.
    b_slot: usize,
    bad_slot: usize,
    /// The engine's position in the hostile send ring, as the model
    /// knows it, and the last impossible head counted.
    taken: u64,
    last_bad_head: Option<u64>,
    /// The hostile endpoint wrote over its free ring's positions or
    /// posted more than it holds.
    free_scribbled: bool,
    expected: Expected,
    honest_seq: usize,
}

/// Step until a turn finds nothing to do.
fn settle(engine: &mut Dispatcher) {
    for _ in 0..1_000_000 {
        if engine.step() == 0 {
            return;
        }
    }
    panic!("the engine never went idle");
}

fn the_event(ep: &mut RawEndpoint, kind: EventKind) -> EventDesc {
    let e = ep.pop_event().expect("an event");
    assert_eq!(e.kind, kind as u16, "{e:?}");
    e
}

impl World {
    fn new() -> World {
        let mut engine = Dispatcher::new(EngineConfig::default()).expect("engine");
        let mut honest = LocalClient::new(&mut engine).expect("client");
        let mut hostile = LocalClient::new(&mut engine).expect("client");
        let g = Geometry {
            buffer_size: 1024,
            buffer_area_size: 64 << 10,
            send_cap: 64,
            recv_cap: 64,
            free_cap: 64,
            event_cap: 64,
        };
        let mut a = honest.create_endpoint(&mut engine, g).expect("a");
        let mut b = honest.create_endpoint(&mut engine, g).expect("b");
        for i in 0..64 {
            assert!(b.post_free(i * 1024));
        }
        // Small buffers (a message beyond 14 × 256 bytes is too large for
        // it) and small rings, so that they fill.
        let hg = Geometry {
            buffer_size: 256,
            buffer_area_size: 64 << 10,
            send_cap: 64,
            recv_cap: 16,
            free_cap: 16,
            event_cap: 16,
        };
        let mut bad = hostile.create_endpoint(&mut engine, hg).expect("bad");
        let mut c = honest.create_endpoint(&mut engine, g).expect("c");
        let open = |client: &mut LocalClient, engine: &mut Dispatcher, from: u32, to: u32| {
            client
                .open_channel(engine, from, to, PathChoice::Engine)
                .expect("open a channel")
        };
        let ch = open(&mut honest, &mut engine, a.id(), b.id());
        let from_a = the_event(&mut b, EventKind::ChannelOpened).channel;
        let to_b = open(&mut hostile, &mut engine, bad.id(), b.id());
        let from_bad = the_event(&mut b, EventKind::ChannelOpened).channel;
        let loop_out = open(&mut hostile, &mut engine, bad.id(), bad.id());
        let loop_in = the_event(&mut bad, EventKind::ChannelOpened).channel;
        let to_c = open(&mut hostile, &mut engine, bad.id(), c.id());
        the_event(&mut c, EventKind::ChannelOpened);
        let closed = open(&mut hostile, &mut engine, bad.id(), b.id());
        let closed_at_b = the_event(&mut b, EventKind::ChannelOpened).channel;
        hostile
            .close_channel(&mut engine, bad.id(), closed)
            .expect("close a channel");
        assert_eq!(the_event(&mut b, EventKind::PeerGone).channel, closed_at_b);
        let (r, _) = honest
            .call(
                &mut engine,
                &Request::CloseEndpoint { endpoint: c.id() },
                &[],
            )
            .expect("close c");
        assert_eq!(r, Reply::Ok);
        assert_eq!(the_event(&mut bad, EventKind::PeerGone).channel, to_c);
        let tags = [
            (to_b, Leads::Receiver),
            (loop_out, Leads::Itself),
            (loop_in, Leads::Itself),
            (to_c, Leads::Gone),
            (closed, Leads::Closed),
        ];
        let top = tags.iter().map(|t| t.0).max().unwrap_or(0) as usize;
        // Tags are handed out from 0: every tag up to the last is one of
        // these (the channel operations take them modulo 8, so that the
        // tags past them are unknown ones).
        assert!(top < 8, "tags {tags:?}");
        let mut leads = vec![Leads::Closed; top + 1];
        for (tag, l) in tags {
            leads[tag as usize] = l;
        }
        assert!(a.pop_event().is_none() && b.pop_event().is_none());
        assert!(bad.pop_event().is_none());
        let layout = *bad.layout();
        let seg = bad.segment();
        // SAFETY: the hostile endpoint's mapping lives as long as `bad`,
        // which lives as long as the World holding the rings.
        let EndpointView { send, free, .. } =
            unsafe { EndpointView::new(seg.ptr(), seg.len(), &layout) }.expect("its rings");
        // Its client posts its first buffers.
        for k in 0..hg.free_cap {
            let h = free.head();
            free.write(h, k * hg.buffer_size);
            free.set_head(h + 1);
        }
        let s = slots(&engine, &[b.id(), bad.id()]);
        World {
            engine,
            _honest: honest,
            hostile,
            a,
            b,
            bad,
            ch,
            from_a,
            from_bad,
            leads,
            send,
            free,
            b_slot: s[0],
            bad_slot: s[1],
            taken: 0,
            last_bad_head: None,
            free_scribbled: false,
            expected: Expected::default(),
            honest_seq: 0,
        }
    }

    fn area(&self) -> u64 {
        self.bad.layout().geometry.buffer_area_size
    }

    /// The hostile client pushes `d` where its send head says.
    fn push(&mut self, d: SendDesc) {
        let pos = self.send.head();
        self.send.write(pos, d);
        self.send.set_head(pos.wrapping_add(1));
    }

    /// What the engine must do with `d`: its status, and the model's
    /// counts.
    fn judge(&mut self, d: SendDesc) -> SendStatus {
        let e = &mut self.expected;
        if d.flags == unet_abi::spine::SEND_AM {
            // An active message for SPINE: its length and buffer are
            // checked; no extension has a handler here, so it is refused.
            if d.len as usize > MAX_MESSAGE {
                e.bad_length += 1;
                return SendStatus::BadLength;
            }
            if d.offset as u64 + d.len as u64 > self.bad.layout().geometry.buffer_area_size {
                e.bad_buffer += 1;
                return SendStatus::BadBuffer;
            }
            return SendStatus::SpineRefused;
        }
        if d.flags != 0 {
            e.bad_flags += 1;
            return SendStatus::BadFlags;
        }
        if d.len == 0 || d.len as usize > MAX_MESSAGE {
            e.bad_length += 1;
            return SendStatus::BadLength;
        }
        if d.offset as u64 + d.len as u64 > self.bad.layout().geometry.buffer_area_size {
            e.bad_buffer += 1;
            return SendStatus::BadBuffer;
        }
        match self.leads.get(d.channel as usize) {
            None | Some(Leads::Closed) => {
                e.bad_channel += 1;
                SendStatus::BadChannel
            }
            Some(Leads::Gone) => {
                e.peer_gone += 1;
                SendStatus::PeerGone
            }
            Some(&l) => {
                e.sent += 1;
                e.sent_bytes += d.len as u64;
                match l {
                    Leads::Receiver => e.to_receiver += 1,
                    _ => e.to_itself += 1,
                }
                SendStatus::Sent
            }
        }
    }

    /// Let the engine run until it is idle, and check it did what the
    /// model says.
    fn settle_and_check(&mut self) {
        let cap = self.bad.layout().geometry.send_cap as u64;
        let head = self.send.head();
        let avail = head.wrapping_sub(self.taken);
        let mut want = Vec::new();
        if avail > cap {
            if self.last_bad_head != Some(head) {
                self.last_bad_head = Some(head);
                self.expected.ring_corrupt += 1;
            }
        } else {
            for k in 0..avail {
                let pos = self.taken.wrapping_add(k);
                let d = self.send.read(pos);
                want.push((pos, d, self.judge(d)));
            }
        }
        settle(&mut self.engine);
        if !want.is_empty() {
            for (pos, d, st) in want {
                let got = self.send.read(pos).status;
                assert_eq!(
                    SendStatus::from_i32(got),
                    Some(st),
                    "status of {d:?} at {pos}"
                );
            }
            self.taken = head;
            assert_eq!(self.send.tail(), head, "the engine's position");
        }
        self.check_counts();
    }

    fn check_counts(&self) {
        use EndpointCounter::*;
        let c = self.engine.counters();
        let bad = |k| c.ep_value(self.bad_slot, k);
        let e = &self.expected;
        let got = [
            bad(TxMsgs),
            bad(TxBytes),
            bad(TxBadFlags),
            bad(TxBadLength),
            bad(TxBadBuffer),
            bad(TxBadChannel),
            bad(TxPeerGone),
        ];
        let want = [
            e.sent,
            e.sent_bytes,
            e.bad_flags,
            e.bad_length,
            e.bad_buffer,
            e.bad_channel,
            e.peer_gone,
        ];
        assert_eq!(
            got, want,
            "the hostile endpoint's counts (sent, bytes, flags, length, buffer, channel, peer gone)"
        );
        // The free ring's positions may be impossible too (counted at
        // each look, not once per value).
        let corrupt = bad(RingCorrupt);
        if self.free_scribbled {
            assert!(corrupt >= e.ring_corrupt, "{corrupt} < {}", e.ring_corrupt);
        } else {
            assert_eq!(corrupt, e.ring_corrupt, "impossible send heads");
        }
        // Every message sent arrived or was dropped, counted.
        let arrived = |slot| {
            [RxMsgs, RxDropNoBuffer, RxDropRingFull, RxDropTooLarge]
                .into_iter()
                .map(|k| c.ep_value(slot, k))
                .sum::<u64>()
        };
        assert_eq!(
            arrived(self.b_slot),
            e.to_receiver + e.honest,
            "messages for the honest receiver"
        );
        assert_eq!(
            arrived(self.bad_slot),
            e.to_itself,
            "messages the hostile endpoint sent itself"
        );
    }

    /// Take everything `b` received, reposting its buffers: the honest
    /// messages among them.
    fn drain_b(&mut self) -> Vec<Vec<u8>> {
        let mut honest = Vec::new();
        while let Some(d) = self.b.pop_recv() {
            let len = d.len as usize;
            let mut data = vec![0u8; len];
            if d.flags & RECV_INLINE != 0 {
                data.copy_from_slice(&d.data[..len]);
            } else {
                for i in 0..d.nbufs as usize {
                    let n = 1024.min(len - i * 1024);
                    self.b
                        .read_area(d.offset(i) as u64, &mut data[i * 1024..i * 1024 + n]);
                    assert!(self.b.post_free(d.offset(i)), "room to repost");
                }
            }
            if d.channel == self.from_a {
                honest.push(data);
            } else {
                assert_eq!(d.channel, self.from_bad, "a message on an unknown channel");
            }
        }
        honest
    }

    /// The honest pair: a message from `a` arrives at `b` intact, once.
    fn honest_message(&mut self) {
        self.settle_and_check();
        assert!(self.drain_b().is_empty(), "an honest message out of turn");
        let i = self.honest_seq;
        self.honest_seq += 1;
        let len = if i.is_multiple_of(2) { 40 } else { 3000 };
        let msg: Vec<u8> = (0..len).map(|k| (i * 131 + k * 7) as u8).collect();
        self.a.write_area(0, &msg);
        let pos = self
            .a
            .push_send(SendDesc {
                offset: 0,
                len: len as u32,
                channel: self.ch,
                ..Default::default()
            })
            .expect("room in the honest send ring");
        self.expected.honest += 1;
        settle(&mut self.engine);
        assert_eq!(
            SendStatus::from_i32(self.a.send_status(pos)),
            Some(SendStatus::Sent)
        );
        assert_eq!(self.drain_b(), [msg], "the honest message, intact and once");
        self.check_counts();
    }

    /// Run one operation of the input.
    fn op(&mut self, op: &[u8; OP_BYTES]) {
        let (code, arg) = (op[0], &op[1..]);
        let u32_at = |i: usize| u32::from_le_bytes(arg[i..i + 4].try_into().unwrap());
        let u16_at = |i: usize| u16::from_le_bytes(arg[i..i + 2].try_into().unwrap());
        let area = self.area();
        // The upper bits shape the arguments: unshaped ones are mostly
        // refused, shaped ones mostly valid.
        let desc = || SendDesc {
            offset: if code & 0x20 != 0 {
                u32_at(0)
            } else {
                (u32_at(0) as u64 % area) as u32
            },
            len: if code & 0x10 != 0 {
                u32_at(4)
            } else {
                (u32_at(4) as u64 % (area + 64)) as u32
            },
            channel: if code & 0x40 != 0 {
                u16_at(8)
            } else {
                u16_at(8) % 8
            },
            flags: if code & 0x08 != 0 { u16_at(10) } else { 0 },
            status: i32::from_le_bytes(arg[12..16].try_into().unwrap()),
        };
        match code & 7 {
            0 | 1 => self.push(desc()),
            2 => {
                let l = *self.bad.layout();
                let entry = |base: u64, size: u64, cap: u32| {
                    base + RING_HEADER_SIZE as u64 + (arg[9] as u64 % cap as u64) * size
                };
                let g = l.geometry;
                let targets = [
                    l.send_off,
                    l.send_off + 64,
                    l.send_off + 128,
                    entry(l.send_off, 16, g.send_cap),
                    l.recv_off,
                    l.recv_off + 64,
                    l.free_off,
                    l.free_off + 64,
                    entry(l.free_off, 4, g.free_cap),
                    l.event_off + 64,
                    0x100, // engine_armed
                    0x140, // rx_futex, client_sleeping
                    0x148, // client_cpu
                ];
                let t = arg[8] as usize % targets.len();
                if t == 6 || t == 7 {
                    self.free_scribbled = true;
                }
                let at = self
                    .bad
                    .segment()
                    .at(targets[t] as usize, 8)
                    .expect("inside the segment")
                    .cast::<[u8; 8]>()
                    .as_ptr();
                // SAFETY: 8 bytes inside the hostile endpoint's own mapping
                // (checked by at()); byte arrays need no alignment. The
                // engine reads these words only on this thread, in steps.
                let cur = u64::from_le_bytes(unsafe { std::ptr::read_volatile(at) });
                let raw = u64::from_le_bytes(arg[..8].try_into().unwrap());
                // Unshaped: any value; shaped: near the one there (a ring
                // position moved a little, often still a possible one).
                let v = if code & 0x08 != 0 {
                    raw
                } else {
                    cur.wrapping_add(raw % 130).wrapping_sub(65)
                };
                // SAFETY: as above.
                unsafe { std::ptr::write_volatile(at, v.to_le_bytes()) };
            }
            3 => {
                let raw = u32_at(0);
                let off = if code & 0x08 != 0 {
                    raw
                } else {
                    ((raw as u64 % area) & !255) as u32
                };
                // Unchecked: it may post more than the ring holds.
                let h = self.free.head();
                self.free.write(h, off);
                self.free.set_head(h.wrapping_add(1));
                let cap = self.bad.layout().geometry.free_cap as u64;
                if h.wrapping_add(1).wrapping_sub(self.free.tail()) > cap {
                    self.free_scribbled = true;
                }
            }
            4 => {
                for _ in 0..arg[0] % 8 {
                    if self.bad.pop_recv().is_none() {
                        break;
                    }
                }
            }
            5 => self.settle_and_check(),
            6 => {
                let d = desc();
                for _ in 0..arg[14] % 128 {
                    self.push(d);
                }
            }
            _ => self.honest_message(),
        }
    }

    /// The end of an input: the honest pair works; closing the hostile
    /// endpoint tells the honest receiver.
    fn finish(mut self) {
        self.settle_and_check();
        self.honest_message();
        self.honest_message();
        let bad = self.bad.id();
        let (r, _) = self
            .hostile
            .call(
                &mut self.engine,
                &Request::CloseEndpoint { endpoint: bad },
                &[],
            )
            .expect("close the hostile endpoint");
        assert_eq!(r, Reply::Ok);
        settle(&mut self.engine);
        let e = self
            .b
            .pop_event()
            .expect("b is told the hostile endpoint went");
        assert_eq!(e.kind, EventKind::PeerGone as u16);
        assert_eq!(e.channel, self.from_bad);
        assert!(self.b.pop_event().is_none() && self.a.pop_event().is_none());
        // What it sent before it went may still be queued at b.
        self.drain_b();
        let msg = b"still here";
        self.a.write_area(0, msg);
        self.a
            .push_send(SendDesc {
                offset: 0,
                len: msg.len() as u32,
                channel: self.ch,
                ..Default::default()
            })
            .expect("room");
        settle(&mut self.engine);
        assert_eq!(self.drain_b(), [msg.to_vec()]);
    }
}

/// Run one input (see the module documentation).
pub fn run(data: &[u8]) {
    let mut w = World::new();
    for op in data.chunks_exact(OP_BYTES).take(MAX_OPS) {
        w.op(op.try_into().expect("a whole operation"));
    }
    w.finish();
}
