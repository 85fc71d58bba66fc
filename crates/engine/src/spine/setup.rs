//! SPINE's set-up half: loading an extension (its class verified on a
//! thread of its own, its initialiser run on the engine's thread),
//! unloading one, listing them with their handlers' statistics, and
//! reclaiming a client's extensions when it goes.
//!
//! A load is verified against the domains the adapter has at that moment
//! (`link.rs`); its exporters must still be there when it is installed.
//! An exporter whose importers are loaded is not unloaded on request
//! (the refusal names them); when its owner goes it goes all the same,
//! and its importers' calls of it fault.
//!
//! Caps, per process: [`EXTS_PER_PROCESS`] extensions (with those being
//! verified), [`HANDLERS_PER_EXT`](crate::spine::rt::HANDLERS_PER_EXT)
//! handlers each, [`KEEP_MAX`] buffers kept each. A refusal is an
//! exact message ([`Reply::Rejected`]) or an error code.

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

use unet_control::spine::{ExportInfo, ExtInfo, HandlerInfo, SpineListing};
use unet_control::{ErrorCode, Reply, Request};
use unet_sys::{EventFd, Segment};

use crate::clients::{ClientId, Clients, ProcKey};
use crate::spine::clock;
use crate::spine::events::{DropReason, EventKind};
use crate::spine::ext::{self, Ext, Verified, DEFAULT_BUDGET, MAX_BUDGET};
use crate::spine::link;
use crate::spine::msgs::KeepSet;
use crate::spine::rt::{Rt, KEEP_MAX};
use crate::spine::tables::TableLoad;
use crate::spine::SpinePart;
use crate::unet::endpoints::EndpointTable;

/// Extensions one process may hold (those being verified included).
pub(crate) const EXTS_PER_PROCESS: usize = 8;
/// Class files being verified at once in the whole engine.
const MAX_LOADS: usize = 8;

/// A load whose class is being verified.
pub(crate) struct Load {
    client: ClientId,
    proc: Option<ProcKey>,
    req_id: u32,
    name: String,
    budget: Duration,
    arg: i32,
    /// The exporters of the granted domains it was verified against.
    links: Vec<(String, u32)>,
    result: Receiver<Result<Verified, String>>,
}

/// The loads in flight (extensions' and tables'), and what wakes the
/// engine when one ends.
pub(crate) struct Loads {
    pending: Vec<Load>,
    pub(crate) tables: Vec<TableLoad>,
    pub(crate) waker: Arc<EventFd>,
}

impl Loads {
    pub(crate) fn new(waker: Arc<EventFd>) -> Loads {
        Loads {
            pending: Vec::new(),
            tables: Vec::new(),
            waker,
        }
    }

    /// Whether verifications (or tables' checks) are in flight.
    #[inline]
    pub(crate) fn busy(&self) -> bool {
        !self.pending.is_empty() || !self.tables.is_empty()
    }
}

/// SPINE's set-up for one request: the runtime, the endpoint table
/// (whose inbox learns the handler numbers), the clients.
pub(crate) struct SpineSetup<'a> {
    pub spine: &'a mut SpinePart,
    pub eps: &'a mut EndpointTable,
    pub clients: &'a mut dyn Clients,
}

impl SpineSetup<'_> {
    fn reply(&self, ci: ClientId, req_id: u32, r: Reply) {
        self.clients.reply(ci, req_id, r, &[]);
    }

    /// Do what a SPINE request asks and answer it (a load is answered
    /// when its verification ends).
    pub(crate) fn handle_spine(
        &mut self,
        ci: ClientId,
        req_id: u32,
        req: Request,
        fds: &mut Vec<OwnedFd>,
    ) {
        let r = match req {
            Request::SpineLoad {
                len,
                budget_us,
                arg,
                name,
                domains,
            } => self.load(ci, req_id, fds.pop(), len, budget_us, arg, name, domains),
            Request::SpineUnload { id } => Some(self.unload_for(ci, id)),
            Request::SpineTable { ext, table, len } => {
                self.load_table(ci, req_id, fds.pop(), ext, table, len)
            }
            Request::SpineList => {
                let (r, fd) = self.list(ci);
                let fds: Vec<_> = fd.iter().map(|f| f.as_raw_fd()).collect();
                self.clients.reply(ci, req_id, r, &fds);
                None
            }
            _ => Some(Reply::Error(ErrorCode::BadRequest)),
        };
        if let Some(r) = r {
            self.reply(ci, req_id, r);
        }
    }

    /// Extensions (loaded and being verified) of process `proc`.
    fn held_by(&self, proc: Option<ProcKey>) -> usize {
        let c = &*self.clients;
        let loaded = self
            .spine
            .exts
            .iter()
            .flatten()
            .filter(|x| c.proc_key(x.owner) == proc)
            .count();
        loaded
            + self
                .spine
                .loads
                .pending
                .iter()
                .filter(|l| l.proc == proc)
                .count()
    }

    #[allow(clippy::too_many_arguments)]
    fn load(
        &mut self,
        ci: ClientId,
        req_id: u32,
        fd: Option<OwnedFd>,
        len: u32,
        budget_us: u32,
        arg: i32,
        name: String,
        domains: Vec<String>,
    ) -> Option<Reply> {
        let Some(fd) = fd else {
            return Some(Reply::Error(ErrorCode::BadRequest));
        };
        if len == 0 || len as usize > jive::MAX_CLASS_BYTES {
            return Some(Reply::Rejected(format!(
                "class file of {len} bytes (at most {})",
                jive::MAX_CLASS_BYTES
            )));
        }
        let budget = match budget_us {
            0 => DEFAULT_BUDGET,
            us if Duration::from_micros(us.into()) > MAX_BUDGET => {
                return Some(Reply::Rejected(format!(
                    "a budget of {us} µs (at most {} µs)",
                    MAX_BUDGET.as_micros()
                )))
            }
            us => Duration::from_micros(us.into()),
        };
        let proc = self.clients.proc_key(ci);
        if self.held_by(proc) >= EXTS_PER_PROCESS {
            return Some(Reply::Error(ErrorCode::ObjectQuota));
        }
        if self.spine.loads.pending.len() >= MAX_LOADS {
            return Some(Reply::Error(ErrorCode::NoResources));
        }
        let bytes = match Segment::read_untrusted(&fd, len as usize) {
            Ok(b) if b.len() == len as usize => b,
            Ok(b) => {
                return Some(Reply::Rejected(format!(
                    "class file has {} bytes, not {len}",
                    b.len()
                )))
            }
            Err(e) => return Some(Reply::Rejected(format!("cannot read the class file: {e}"))),
        };
        let to = link::linkable(&self.spine.rt);
        let links = to.links(&domains);
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let waker = self.spine.loads.waker.clone();
        let started = std::thread::Builder::new()
            .name("spine-verify".into())
            .spawn(move || {
                let _ = tx.send(ext::verify(&bytes, &domains, &to));
                waker.notify();
            });
        if started.is_err() {
            return Some(Reply::Error(ErrorCode::NoResources));
        }
        self.spine.loads.pending.push(Load {
            client: ci,
            proc,
            req_id,
            name,
            budget,
            arg,
            links,
            result: rx,
        });
        None
    }

    /// Finish the loads whose verification ended: the initialiser runs
    /// now and the client gets its answer (and the tables' loads).
    pub(crate) fn finish_loads(&mut self) {
        self.finish_tables();
        let mut i = 0;
        while i < self.spine.loads.pending.len() {
            let r = match self.spine.loads.pending[i].result.try_recv() {
                Ok(r) => r,
                Err(TryRecvError::Empty) => {
                    i += 1;
                    continue;
                }
                Err(TryRecvError::Disconnected) => {
                    Err("the verifier stopped without an answer".to_string())
                }
            };
            let l = self.spine.loads.pending.remove(i);
            let reply = match r {
                Ok(v) => self.install(&l, v),
                Err(why) => Reply::Rejected(why),
            };
            self.reply(l.client, l.req_id, reply);
        }
    }

    /// Initialise a verified extension and install its handlers.
    fn install(&mut self, l: &Load, v: Verified) -> Reply {
        let sp = &mut *self.spine;
        if let Err(why) = link::still_linked(&sp.rt, &l.links) {
            return Reply::Rejected(why);
        }
        let slot = match sp.exts.iter().position(|x| x.is_none()) {
            Some(s) => s,
            None => {
                sp.exts.push(None);
                sp.exts.len() - 1
            }
        };
        if sp.rt.keeps.len() <= slot {
            sp.rt.keeps.resize_with(slot + 1, || KeepSet::new(KEEP_MAX));
        }
        let id = sp.next_id();
        let compile = sp.compiles();
        let r = Ext::instantiate(
            v,
            &mut sp.rt,
            slot as u32,
            id,
            l.client,
            l.name.clone(),
            l.budget,
            l.arg,
            compile,
        );
        let (mut x, entries) = match r {
            Ok(ok) => ok,
            Err(why) => {
                // The initialiser may have kept nothing (it has no
                // message), but give back whatever the slot holds; the id
                // goes to the next load.
                sp.rt.keeps[slot].release_all(&mut sp.rt.bufs);
                sp.drop_timers(slot);
                sp.give_back_id(id);
                return Reply::Rejected(why);
            }
        };
        x.imports = link::add_importer(&mut sp.rt, id, &l.links);
        let numbers: Vec<u16> = entries.iter().map(|(n, _)| *n).collect();
        for (n, e) in entries {
            sp.rt.handlers[n as usize] = Some(e);
        }
        sp.exts[slot] = Some(x);
        sp.mark_handlers(self.eps, &numbers, true);
        Reply::SpineLoaded {
            id,
            handlers: numbers,
        }
    }

    /// Unload extension `id` for client `ci`: one of its user's (any for
    /// root), as applets are detached.
    fn unload_for(&mut self, ci: ClientId, id: u32) -> Reply {
        let c = &*self.clients;
        let uid = c.uid(ci);
        let slot = self.spine.exts.iter().position(|x| {
            x.as_ref()
                .is_some_and(|x| x.id == id && (uid == Some(0) || c.uid(x.owner) == uid))
        });
        match slot {
            Some(s) => {
                if let Some(why) = link::unload_refusal(&self.spine.rt, s) {
                    return Reply::Rejected(why);
                }
                self.unload(s);
                Reply::Ok
            }
            None => Reply::Error(ErrorCode::NoSuchExtension),
        }
    }

    /// Unload the extension in `slot`: its handler numbers are free, what
    /// it keeps goes back, messages queued for its handlers are dropped
    /// (counted as `dead`).
    pub(crate) fn unload(&mut self, slot: usize) {
        let sp = &mut *self.spine;
        let Some(x) = sp.exts.get_mut(slot).and_then(|x| x.take()) else {
            return;
        };
        sp.rt.exports.remove(slot, x.id, &x.imports);
        let mut numbers = Vec::new();
        for (n, h) in sp.rt.handlers.iter_mut().enumerate() {
            if h.is_some_and(|e| e.slot as usize == slot) {
                *h = None;
                numbers.push(n as u16);
            }
        }
        if let Some(k) = sp.rt.keeps.get_mut(slot) {
            k.release_all(&mut sp.rt.bufs);
        }
        sp.drop_timers(slot);
        sp.rt.tables.clear(slot);
        sp.rt.fbs.clear(slot);
        // Messages queued for its handlers go now (counted as `dead`): a
        // later extension taking the same numbers must not get them.
        let rt = &mut sp.rt;
        let mut gone = Vec::new();
        rt.queue.purge(
            |ev| {
                ev.kind == EventKind::Handler
                    && rt
                        .msgs
                        .get(ev.msg)
                        .is_some_and(|m| numbers.contains(&m.hdr.handler))
            },
            |ev| gone.push(ev.msg),
        );
        for m in gone {
            rt.queue.count_drop(DropReason::Dead);
            rt.msgs.free(m, &mut rt.bufs);
        }
        sp.mark_handlers(self.eps, &numbers, false);
    }

    /// Client `ci` went: its extensions go, its loads are forgotten.
    pub(crate) fn drop_client(&mut self, ci: ClientId) {
        self.spine.loads.pending.retain(|l| l.client != ci);
        self.drop_table_loads(ci);
        let mut slots: Vec<usize> = self
            .spine
            .exts
            .iter()
            .enumerate()
            .filter(|(_, x)| x.as_ref().is_some_and(|x| x.owner == ci))
            .map(|(i, _)| i)
            .collect();
        // Importers before exporters, so that an exporter whose importers
        // are all this client's goes cleanly.
        slots.sort_by_key(|&s| self.spine.rt.exports.at(s).is_some());
        for s in slots {
            self.unload(s);
        }
    }

    /// The listing for client `ci` (the extensions of its user; every
    /// one for root), in a memory file.
    fn list(&self, ci: ClientId) -> (Reply, Option<OwnedFd>) {
        let c = &*self.clients;
        let uid = c.uid(ci);
        let sp = &*self.spine;
        let extensions = sp
            .exts
            .iter()
            .flatten()
            .filter(|x| uid == Some(0) || c.uid(x.owner) == uid)
            .map(|x| ext_info(x, c, sp))
            .collect();
        let rt = &sp.rt;
        let listing = SpineListing {
            extensions,
            events: EventKind::ALL
                .iter()
                .map(|k| (k.name().to_string(), rt.queue.run[*k as usize]))
                .collect(),
            drops: DropReason::ALL
                .iter()
                .map(|r| (r.name().to_string(), rt.queue.drops[*r as usize]))
                .chain([
                    ("timers_refused".to_string(), rt.timers.refused),
                    ("timers_dropped".to_string(), rt.timers.dropped),
                ])
                .collect(),
            msgs_live: rt.msgs.live() as u32,
            bufs_live: rt.bufs.live() as u32,
            queued: rt.queue.len() as u32,
            bad_handles: rt.bad_handles,
            keeps_refused: rt.keeps_refused,
            dead_calls: rt.exports.dead_calls,
        };
        let bytes = listing.encode();
        match memory_file(&bytes) {
            Ok(fd) => (
                Reply::SpineListing {
                    len: bytes.len() as u32,
                },
                Some(fd),
            ),
            Err(_) => (Reply::Error(ErrorCode::NoResources), None),
        }
    }
}

/// What the listing says of extension `x`.
fn ext_info(x: &Ext, c: &dyn Clients, sp: &SpinePart) -> ExtInfo {
    let slot = sp
        .exts
        .iter()
        .position(|e| e.as_ref().is_some_and(|e| e.id == x.id));
    ExtInfo {
        id: x.id,
        name: x.name.clone(),
        pid: c.pid(x.owner).unwrap_or(0),
        budget_us: x.budget.as_micros() as u32,
        compiled: x.is_compiled(&sp.rt),
        kept: slot
            .and_then(|s| sp.rt.keeps.get(s))
            .map_or(0, |k| k.len() as u32),
        keeps_undone: x.keeps_undone,
        last_fault: x
            .last_fault
            .as_ref()
            .map(|(h, why)| format!("handler {h} {why}"))
            .unwrap_or_default(),
        handlers: x
            .handlers
            .iter()
            .map(|h| HandlerInfo {
                number: h.number,
                method: h.method.clone(),
                invocations: h.invocations,
                timed: h.timed,
                total_ns: clock::ns(h.total_ticks),
                max_ns: clock::ns(h.max_ticks),
                terminations: terminations(&h.terms),
            })
            .collect(),
        exports: slot.map_or_else(Vec::new, |s| export_infos(&sp.rt, s)),
        imports: x
            .imports
            .iter()
            .filter_map(|&id| {
                let ex = &sp.rt.exports;
                let live = ex.by_slot.iter().flatten();
                live.chain(&ex.dead)
                    .find(|e| e.id == id)
                    .map(|e| e.domain.clone())
            })
            .collect(),
    }
}

/// What the listing says of the exports of the extension in `slot`.
fn export_infos(rt: &Rt, slot: usize) -> Vec<ExportInfo> {
    let Some(x) = rt.exports.at(slot) else {
        return Vec::new();
    };
    x.exports
        .iter()
        .filter_map(|&k| rt.exports.table.get(k)?.as_ref())
        .map(|e| ExportInfo {
            method: format!("{}{}", e.name, e.descriptor),
            ephemeral: e.ephemeral,
            calls: e.calls,
            terminations: terminations(&e.terms),
            last_fault: e.last_fault.clone().unwrap_or_default(),
        })
        .collect()
}

/// The reasons with a count, by name.
fn terminations(terms: &[u64]) -> Vec<(String, u64)> {
    unet_abi::FaultKind::ALL
        .iter()
        .zip(terms)
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| (k.name().to_string(), *n))
        .collect()
}

/// A sealed memory file holding `bytes`.
pub(crate) fn memory_file(bytes: &[u8]) -> std::io::Result<OwnedFd> {
    let fd = Segment::create_file("unet-spine-list", bytes.len().max(1))?;
    let mut f = std::fs::File::from(fd);
    f.write_all(bytes)?;
    Ok(OwnedFd::from(f))
}
