//! The runtime's state that handlers reach through the `spine` natives:
//! the pools, the event queue, the handler table, what each extension
//! keeps, and the invocation that runs now. The JIVE VMs of the
//! extensions are given this as their host state, so a native reaches
//! exactly this and nothing else of the engine.

use std::time::Instant;

use jive::Prepared;
use unet_abi::spine::{
    AmHeader, AM_SRC_HANDLER, AM_SRC_HOST, AM_SRC_PEER, AM_SRC_PORT, AM_SRC_WIRE, DEST_HOST,
    DEST_LOCAL, DEST_PEER, DEST_PORT, DEST_WIRE,
};

use crate::config::EngineConfig;
use crate::spine::events::{DropReason, Event, EventKind, EventQueue};
use crate::spine::exports::Exports;
use crate::spine::framebuffer::Framebuffers;
use crate::spine::msgs::{ArgBytes, BufPool, KeepSet, MsgPool, EXT_MSGS_MAX, NO_OWNER};
use crate::spine::peers::Peers;
use crate::spine::tables::Tables;
use crate::spine::timers::Timers;
use crate::spine::wire::WireDests;

/// Buffers one extension may keep at once.
pub(crate) const KEEP_MAX: usize = 256;
/// Handlers one extension may install.
pub(crate) const HANDLERS_PER_EXT: usize = 64;

/// Error codes the natives return (design: negative ints).
pub(crate) const E_FULL: i32 = -1;
pub(crate) const E_DEAD: i32 = -2;
pub(crate) const E_BAD_DEST: i32 = -3;
pub(crate) const E_LIMIT: i32 = -5;

/// An `Event::arg` bit of a delivery to a host endpoint: it answers the
/// message the handler was given (allowed whoever owns the endpoint).
pub(crate) const ARG_REPLY: u32 = 1 << 31;

/// No message (a handle that is never given out: index 0 of generation
/// 0 is, so the runtime uses the all-ones word).
pub(crate) const NO_MSG: u32 = u32::MAX;

/// A handler number's entry: which extension runs it, which method, with
/// which context.
#[derive(Clone, Copy)]
pub(crate) struct HandlerEntry {
    /// The extension's slot in the runtime's table.
    pub slot: u32,
    /// The handler's index among its extension's handlers.
    pub index: u16,
    pub method: Prepared<2>,
    pub context: i32,
}

/// The invocation running now.
#[derive(Clone, Copy)]
pub(crate) struct Current {
    /// The running extension's slot and id.
    pub slot: u32,
    pub ext_id: u32,
    /// The message it was given (valid only until it returns).
    pub msg: u32,
    /// The invocation's number (what its keeps are recorded under).
    pub inv: u64,
}

/// A handler an initialiser asked for (`addHandler`), installed when the
/// initialiser returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// The method's index in its class.
    pub method: u32,
    pub number: u16,
    pub context: i32,
}

/// The runtime's state (see the module documentation).
pub(crate) struct Rt {
    pub msgs: MsgPool,
    pub bufs: BufPool,
    pub queue: EventQueue,
    /// The links to peer adapters (`DEST_PEER`).
    pub peers: Peers,
    /// The extensions' timers (`Spine.timer`).
    pub timers: Timers,
    /// By handler number.
    pub handlers: Vec<Option<HandlerEntry>>,
    /// What each extension keeps, by extension slot.
    pub keeps: Vec<KeepSet>,
    pub cur: Current,
    /// Set while an initialiser runs: `addHandler` records here.
    pub installing: Option<Vec<Wanted>>,
    /// The first reason an installation is refused (set by `addHandler`).
    pub install_error: Option<String>,
    /// Extension handlers take `64..handler_limit`.
    pub handler_limit: u16,
    next_inv: u64,
    epoch: Instant,
    /// Faults a native raised on a forged or stale handle, counted.
    pub bad_handles: u64,
    /// `keep`s refused at the extension's cap.
    pub keeps_refused: u64,
    /// The clock's reading at the end of the last event, when that event
    /// was a timed handler's invocation (`spine::clock`): the next timed
    /// invocation starts its time there, so that timed handlers run back
    /// to back read the clock once each. Cleared by any other event, by
    /// an untimed invocation and at a turn's start.
    pub last_end: Option<u64>,
    /// Which invocations are timed: one in `time_mask + 1` at random
    /// (`time_mask` 0: every one); see [`Rt::timed`].
    time_mask: u64,
    /// The state of the generator that picks them (xorshift64, never 0).
    time_rng: u64,
    /// The links over the wire a handler may send to.
    pub wire: WireDests,
    /// The ids of the raw-frame ports a handler may send to.
    pub ports: Vec<u32>,
    /// What extensions export to one another.
    pub exports: Exports<Rt>,
    /// The extensions' route tables (`Spine.table`).
    pub tables: Tables,
    /// The extensions' framebuffers (`Spine.fbWrite`).
    pub fbs: Framebuffers,
}

impl Rt {
    pub(crate) fn new(cfg: &EngineConfig) -> Rt {
        crate::spine::clock::start();
        let limit = cfg.spine_handlers.clamp(64, 1024);
        Rt {
            msgs: MsgPool::new(cfg.spine_msgs_max as usize),
            bufs: BufPool::new(cfg.spine_bufs_max as usize, cfg.spine_buf_size as usize),
            queue: EventQueue::new(cfg.spine_events_max as usize, cfg.spine_priorities),
            peers: Peers::new(),
            timers: Timers::default(),
            handlers: vec![None; limit as usize],
            keeps: Vec::new(),
            cur: Current {
                slot: u32::MAX,
                ext_id: 0,
                msg: NO_MSG,
                inv: 0,
            },
            installing: None,
            install_error: None,
            handler_limit: limit,
            next_inv: 0,
            epoch: Instant::now(),
            bad_handles: 0,
            keeps_refused: 0,
            last_end: None,
            time_mask: u64::from(cfg.spine_time_every.clamp(1, 1 << 31).next_power_of_two()) - 1,
            time_rng: 0x9E37_79B9_7F4A_7C15,
            wire: WireDests::default(),
            ports: Vec::new(),
            exports: Exports::new(),
            tables: Tables::default(),
            fbs: Framebuffers::default(),
        }
    }

    /// Whether the invocation about to start is timed: a clock read costs
    /// more than a null handler's whole invocation (about 14 ns on a
    /// virtual machine's AMD processor, where the invocation takes 30), so
    /// by default one in 64 is, picked at random so that no pattern in
    /// the order handlers run in hides one of them
    /// ([`EngineConfig::spine_time_every`]).
    #[inline(always)]
    pub(crate) fn timed(&mut self) -> bool {
        let mut x = self.time_rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.time_rng = x;
        (x >> 32) & self.time_mask == 0
    }

    /// Time one invocation in `n` from now on (see [`Rt::timed`]).
    pub(crate) fn set_time_every(&mut self, n: u32) {
        self.time_mask = u64::from(n.clamp(1, 1 << 31).next_power_of_two()) - 1;
    }

    /// Microseconds since the runtime started (`nowMicros`), wrapping.
    pub(crate) fn now_micros(&self) -> i32 {
        self.epoch.elapsed().as_micros() as i32
    }

    /// Start invocation of extension (`slot`, `ext_id`) on `msg`.
    #[inline]
    pub(crate) fn begin(&mut self, slot: u32, ext_id: u32, msg: u32) -> u64 {
        self.next_inv += 1;
        self.cur = Current {
            slot,
            ext_id,
            msg,
            inv: self.next_inv,
        };
        self.next_inv
    }

    /// The invocation ended (`ok`: it returned; otherwise it was
    /// terminated, and the keeps it made are undone). Its message is
    /// freed: nothing outlives an invocation but what it kept or sent.
    #[inline]
    pub(crate) fn end(&mut self, ok: bool) -> usize {
        let Current { slot, msg, inv, .. } = self.cur;
        let mut undone = 0;
        if !ok {
            if let Some(k) = self.keeps.get_mut(slot as usize) {
                undone = k.undo(&mut self.bufs, inv);
            }
        }
        if msg != NO_MSG {
            self.msgs.free(msg, &mut self.bufs);
        }
        self.cur.msg = NO_MSG;
        self.cur.slot = u32::MAX;
        undone
    }

    /// Whether the running invocation holds buffer `b` (its message's
    /// bulk buffer, or one its extension keeps).
    pub(crate) fn holds(&self, b: u32) -> bool {
        if self.cur.msg != NO_MSG && self.msgs.get(self.cur.msg).and_then(|m| m.bulk) == Some(b) {
            return true;
        }
        self.keeps
            .get(self.cur.slot as usize)
            .is_some_and(|k| k.contains(b))
    }

    /// Send a message from the running handler: header for `handler`,
    /// `args`, holding `bulk` (a reference the caller took for it), to
    /// `dest` (`(kind << 24) | id`). 0, or an error code; on an error the
    /// reference on `bulk` is given back.
    pub(crate) fn send<A: ArgBytes + ?Sized>(
        &mut self,
        dest: u32,
        handler: u16,
        args: &A,
        bulk: Option<u32>,
    ) -> i32 {
        let kind = dest >> 24;
        let id = dest & 0x00FF_FFFF;
        let give_back = |rt: &mut Rt| {
            if let Some(b) = bulk {
                rt.bufs.release(b);
            }
        };
        let event = match kind {
            DEST_LOCAL => {
                if self
                    .handlers
                    .get(handler as usize)
                    .is_none_or(|h| h.is_none())
                {
                    give_back(self);
                    self.queue.count_drop(DropReason::NoHandler);
                    return E_BAD_DEST;
                }
                EventKind::Handler
            }
            DEST_HOST => EventKind::DeliverHost,
            DEST_PEER => match self.peers.may_send(id) {
                Some(true) => EventKind::PeerTx,
                Some(false) => {
                    give_back(self);
                    self.queue.count_drop(DropReason::Dead);
                    return E_DEAD;
                }
                None => {
                    give_back(self);
                    self.queue.count_drop(DropReason::BadDest);
                    return E_BAD_DEST;
                }
            },
            // A link that is up, or E_DEAD / E_BAD_DEST.
            DEST_WIRE => match self.wire.check(id) {
                0 => EventKind::WireTx,
                e => {
                    give_back(self);
                    self.queue.count_drop(DropReason::BadDest);
                    return e;
                }
            },
            // An open raw-frame port (its ring is the wire's kind of
            // destination: `WireTx`, marked as a port's).
            DEST_PORT if self.ports.contains(&id) => EventKind::WireTx,
            _ => {
                give_back(self);
                self.queue.count_drop(DropReason::BadDest);
                return E_BAD_DEST;
            }
        };
        let hdr = AmHeader {
            handler,
            src_kind: AM_SRC_HANDLER,
            src: self.cur.ext_id,
            bulk_len: bulk
                .and_then(|b| self.bufs.data(b))
                .map_or(0, |d| d.len() as u32),
            ..AmHeader::default()
        };
        // Charged to the running extension (none when the runtime sends on
        // its own behalf).
        let owner = self.cur.slot;
        if owner != NO_OWNER && self.msgs.charged(owner) >= EXT_MSGS_MAX {
            give_back(self);
            self.queue.count_drop(DropReason::ExtLimit);
            return E_LIMIT;
        }
        let m = if owner == NO_OWNER {
            self.msgs.alloc(hdr, args, bulk)
        } else {
            self.msgs.alloc_charged(owner, hdr, args, bulk)
        };
        let Some(m) = m else {
            give_back(self);
            self.queue.count_drop(DropReason::NoSlot);
            return E_FULL;
        };
        // A delivery that answers the host endpoint whose message the
        // handler was given is allowed whoever owns that endpoint.
        let answers = kind == DEST_HOST
            && self
                .msgs
                .get(self.cur.msg)
                .is_some_and(|c| c.hdr.src_kind == AM_SRC_HOST && c.hdr.src == id);
        let arg = if answers {
            id | ARG_REPLY
        } else if kind == DEST_PORT {
            id | crate::spine::port::ARG_PORT
        } else {
            id
        };
        match self.queue.push(Event {
            kind: event,
            msg: m,
            arg,
        }) {
            Ok(()) => 0,
            Err(_) => {
                self.msgs.free(m, &mut self.bufs);
                E_FULL
            }
        }
    }
}

/// The destination word that answers a message from `src_kind`/`src`.
pub(crate) fn reply_dest(src_kind: u8, src: u32) -> u32 {
    let kind = match src_kind {
        AM_SRC_HOST => DEST_HOST,
        AM_SRC_PEER => DEST_PEER,
        AM_SRC_WIRE => DEST_WIRE,
        AM_SRC_PORT => DEST_PORT,
        _ => DEST_LOCAL,
    };
    (kind << 24) | (src & 0x00FF_FFFF)
}
