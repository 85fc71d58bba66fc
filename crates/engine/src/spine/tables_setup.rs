//! The set-up half of extensions' route tables (`tables.rs`): a client
//! hands extension `ext` a table under a number, in a memory file; the
//! bytes are read and checked as hostile on a thread of their own (an
//! LC-trie's export, every index within its array:
//! `unet_router::LcTrie::from_le_bytes`) and laid out there as `int[]`
//! elements, then installed on the engine's thread, between two events:
//! moved into the extension's heap whole, not copied, so that an update
//! of a large table holds up the adapter's other work for little more
//! than the collection that frees the version it replaces.
//!
//! Caps: table numbers below [`TABLES_PER_EXT`]; [`TABLE_BYTES_PER_EXT`]
//! bytes of tables an extension and [`TABLE_BYTES_PER_PROCESS`] the
//! extensions of one process (the extension owner's) may hold, replaced
//! versions not yet freed included; [`LOADS_PER_PROCESS`] loads being
//! checked at once per process. A refusal is an exact message
//! ([`Reply::Rejected`]) or an error code.

use std::os::fd::OwnedFd;
use std::sync::mpsc::TryRecvError;

use jive::heap::Elems;
use jive::{ArrayRef, Limits, Vm};
use unet_control::{ErrorCode, Reply};
use unet_router::LcTrie;
use unet_sys::Segment;

use crate::clients::ClientId;
use crate::spine::exports::Exports;
use crate::spine::ext::Ext;
use crate::spine::rt::Rt;
use crate::spine::setup::SpineSetup;
use crate::spine::tables::{
    Checked, TableLoad, Version, BASE, HOPS, META, PARTS, PRE, TABLES_PER_EXT, TABLE_BYTES_PER_EXT,
    TABLE_BYTES_PER_PROCESS, TRIE,
};

/// Table loads one process may have being checked at once.
pub(crate) const LOADS_PER_PROCESS: usize = 2;
/// Table loads being checked at once in the whole engine.
const MAX_TABLE_LOADS: usize = 8;

/// Read `len` bytes from memory file `fd`, check them as a table, and lay
/// its parts out as `int[]` elements (on the checking thread: the
/// engine's thread only moves them into the heap).
fn check(fd: &OwnedFd, len: usize) -> Result<Checked, String> {
    let bytes = match Segment::read_untrusted(fd, len) {
        Ok(b) if b.len() == len => b,
        Ok(b) => return Err(format!("the table has {} bytes, not {len}", b.len())),
        Err(e) => return Err(format!("cannot read the table: {e}")),
    };
    let t = LcTrie::from_le_bytes(&bytes).ok_or_else(|| {
        "not an LC-trie export (the LCT2 magic, a header, the arrays of the \
         lengths it gives, every index within its array)"
            .to_string()
    })?;
    let a = t.arrays();
    let part = |w: &[u32]| Elems::from_words(w).ok_or("a part too large to lay out");
    Ok(Checked {
        parts: [part(a.trie)?, part(a.base)?, part(a.pre)?, part(a.hops)?],
        nh_bits: a.nh_bits,
    })
}

impl SpineSetup<'_> {
    /// The slot of extension `id` if client `ci` may hand it tables (one
    /// of its user's; any for root).
    fn table_slot(&self, ci: ClientId, id: u32) -> Option<usize> {
        let c = &*self.clients;
        let uid = c.uid(ci);
        self.spine.exts.iter().position(|x| {
            x.as_ref()
                .is_some_and(|x| x.id == id && (uid == Some(0) || c.uid(x.owner) == uid))
        })
    }

    /// Start loading a table (answered when its check ends), or refuse.
    pub(crate) fn load_table(
        &mut self,
        ci: ClientId,
        req_id: u32,
        fd: Option<OwnedFd>,
        ext: u32,
        table: u32,
        len: u32,
    ) -> Option<Reply> {
        let Some(fd) = fd else {
            return Some(Reply::Error(ErrorCode::BadRequest));
        };
        if self.table_slot(ci, ext).is_none() {
            return Some(Reply::Error(ErrorCode::NoSuchExtension));
        }
        if table as usize >= TABLES_PER_EXT {
            return Some(Reply::Rejected(format!(
                "table number {table} (0 to {})",
                TABLES_PER_EXT - 1
            )));
        }
        if len as usize > TABLE_BYTES_PER_EXT {
            return Some(Reply::Rejected(format!(
                "a table of {len} bytes is over the extension's table quota of {} bytes",
                TABLE_BYTES_PER_EXT
            )));
        }
        let proc = self.clients.proc_key(ci);
        let pending = &self.spine.loads.tables;
        if pending.iter().filter(|l| l.proc == proc).count() >= LOADS_PER_PROCESS {
            return Some(Reply::Error(ErrorCode::ObjectQuota));
        }
        if pending.len() >= MAX_TABLE_LOADS {
            return Some(Reply::Error(ErrorCode::NoResources));
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let waker = self.spine.loads.waker.clone();
        let started = std::thread::Builder::new()
            .name("spine-table".into())
            .spawn(move || {
                let _ = tx.send(check(&fd, len as usize));
                waker.notify();
            });
        if started.is_err() {
            return Some(Reply::Error(ErrorCode::NoResources));
        }
        self.spine.loads.tables.push(TableLoad {
            client: ci,
            proc,
            req_id,
            ext,
            table,
            result: rx,
        });
        None
    }

    /// Install the tables whose check ended, and answer their clients.
    pub(crate) fn finish_tables(&mut self) {
        let mut i = 0;
        while i < self.spine.loads.tables.len() {
            let r = match self.spine.loads.tables[i].result.try_recv() {
                Ok(r) => r,
                Err(TryRecvError::Empty) => {
                    i += 1;
                    continue;
                }
                Err(TryRecvError::Disconnected) => {
                    Err("the check stopped without an answer".to_string())
                }
            };
            let l = self.spine.loads.tables.remove(i);
            let reply = match r {
                Ok(t) => self.install_table(&l, t),
                Err(why) => Reply::Rejected(why),
            };
            self.clients.reply(l.client, l.req_id, reply, &[]);
        }
    }

    /// Client `ci` went: its table loads are forgotten.
    pub(crate) fn drop_table_loads(&mut self, ci: ClientId) {
        self.spine.loads.tables.retain(|l| l.client != ci);
    }

    /// Install checked table `t` as the load asks, within the quotas.
    fn install_table(&mut self, l: &TableLoad, t: Checked) -> Reply {
        // The extension may have gone while the table was checked.
        let Some(slot) = self.table_slot(l.client, l.ext) else {
            return Reply::Error(ErrorCode::NoSuchExtension);
        };
        let bytes = t.bytes();
        let owner = self.spine.exts[slot].as_ref().map(|x| x.owner);
        let owner_proc = owner.and_then(|o| self.clients.proc_key(o));
        // What the owner's other extensions hold.
        let c = &*self.clients;
        let others: usize = (0..self.spine.exts.len())
            .filter(|&s| s != slot)
            .filter(|&s| {
                self.spine.exts[s]
                    .as_ref()
                    .is_some_and(|x| c.proc_key(x.owner) == owner_proc)
            })
            .map(|s| self.spine.rt.tables.charged(s))
            .sum();
        let sp = &mut *self.spine;
        let Some(vm) = ext_vm(&mut sp.exts, &mut sp.rt.exports, slot) else {
            return Reply::Rejected("the extension's VM is busy".into());
        };
        let tables = sp.rt.tables.of_mut(slot);
        vm.collect_garbage();
        tables.forget_freed(vm);
        let mine = tables.charged();
        if mine + bytes > TABLE_BYTES_PER_EXT {
            return Reply::Rejected(format!(
                "a table of {bytes} bytes is over the extension's table quota: it holds \
                 {mine} of {TABLE_BYTES_PER_EXT}"
            ));
        }
        if others + mine + bytes > TABLE_BYTES_PER_PROCESS {
            return Reply::Rejected(format!(
                "a table of {bytes} bytes is over the process's table quota: its \
                 extensions hold {} of {TABLE_BYTES_PER_PROCESS}",
                others + mine
            ));
        }
        let version = tables.loads + 1;
        let parts = match new_parts(vm, t, version, bytes) {
            Ok(p) => p,
            Err(why) => return Reply::Rejected(why),
        };
        tables.loads = version;
        let v = Version { parts, bytes };
        if let Some(old) = tables.install(l.table as usize, v) {
            for a in old.parts {
                vm.unpin_array(a);
            }
            // Freed now if nothing refers to it.
            vm.collect_garbage();
            tables.forget_freed(vm);
        }
        Reply::SpineTableLoaded {
            version,
            bytes: bytes as u64,
        }
    }
}

/// The VM of the extension in `slot`: its own, or an exporter's in the
/// runtime's table of exports.
fn ext_vm<'a>(
    exts: &'a mut [Option<Ext>],
    exports: &'a mut Exports<Rt>,
    slot: usize,
) -> Option<&'a mut Vm<Rt>> {
    let x = exts.get_mut(slot)?.as_mut()?;
    match x.own_vm() {
        Some(vm) => Some(vm),
        None => exports.at_mut(slot)?.vm.as_deref_mut(),
    }
}

/// `t`'s parts as new pinned `int[]`s of `vm`'s heap, outside its quota
/// (raised by `bytes` while they are made, then put back): the four laid
/// out by the check are moved in whole, [`META`] is made here.
fn new_parts<H>(
    vm: &mut Vm<H>,
    t: Checked,
    version: u32,
    bytes: usize,
) -> Result<[ArrayRef; PARTS], String> {
    let own = vm.limits();
    vm.set_limits(Limits {
        heap_quota: vm.heap_used() + bytes,
        ..own
    });
    let mut made: Vec<ArrayRef> = Vec::with_capacity(PARTS);
    let mut failed = None;
    let mut parts: [Option<Elems<i32>>; PARTS] = Default::default();
    let [trie, base, pre, hops] = t.parts;
    parts[TRIE] = Some(trie);
    parts[BASE] = Some(base);
    parts[PRE] = Some(pre);
    parts[HOPS] = Some(hops);
    parts[META] = Elems::from_words(&[t.nh_bits, version]);
    for e in parts {
        let Some(e) = e else {
            failed = Some("the table's arrays: the version's part".to_string());
            break;
        };
        match vm.adopt_ints(e) {
            Ok(arr) => {
                vm.pin_array(arr);
                made.push(arr);
            }
            Err(f) => {
                failed = Some(format!("the table's arrays: {f}"));
                break;
            }
        }
    }
    vm.set_limits(own);
    if let Some(why) = failed {
        for arr in made {
            vm.unpin_array(arr);
        }
        vm.collect_garbage();
        return Err(why);
    }
    made.try_into()
        .map_err(|_| "the table's arrays: a part is missing".to_string())
}
