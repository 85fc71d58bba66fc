//! SPINE's domains of extensions: the table of what extensions export
//! to one another (the SPINE paper, section 3.3.3: the runtime and each
//! extension live in domains that export interfaces, and an extension is
//! linked only against the domains it was granted).
//!
//! An extension *exports* the public static methods of its class whose
//! parameters are ints and whose result is an int or void (besides
//! `init` and its handlers) into a domain named after it: the name it was
//! loaded under. Public is what a Java programmer already writes for a
//! method other classes may call, so no annotation or registration is
//! needed, and the exporting code says what it offers where it is
//! written. Another extension granted that domain calls them as ordinary
//! static calls of the exporter's class (compiled against that class, or
//! a stub with the same signatures), linked at load like a native.
//!
//! This file holds the table: each export (its slot, which is the native
//! the importers' code calls, its statistics), each exporter (its VM,
//! which lives here so that importers' calls reach it, its importers),
//! and the time limit of the invocation that calls. The calls and the
//! rules that fill the table are in `link.rs`; the table is generic over
//! the runtime's state so that the runtime can hold it.
//!
//! Unloading an exporter that importers are linked to is refused (with
//! their ids); when its owner goes, it goes all the same, its exports are
//! marked dead, and importers' calls of them fault (counted as
//! `dead_calls`), until the last importer goes and the slots are free.

use std::sync::mpsc::Receiver;
use std::time::Duration;

use jive::{Compiled, Limits, MethodId, Vm};
use unet_abi::FaultKind;

/// Export slots per adapter (each is a native function of its own).
pub(crate) const EXPORTS_MAX: usize = 256;
/// Methods one extension may export.
pub(crate) const EXPORTS_PER_EXT: usize = 16;
/// Fault kinds counted per export.
const KINDS: usize = FaultKind::ALL.len();

/// One exported method.
pub(crate) struct Export {
    /// The exporter's extension slot.
    pub slot: u32,
    pub method: MethodId,
    pub name: String,
    pub descriptor: String,
    /// Handlers may call it (it passed the `EPHEMERAL` rule).
    pub ephemeral: bool,
    /// Its exporter went while importers were linked to it.
    pub dead: bool,
    /// Calls made to it (one made with its caller's time already up did
    /// not run: a timeout), and those that faulted, by [`FaultKind`].
    pub calls: u64,
    pub terms: [u64; KINDS],
    /// The last fault: who called and what happened.
    pub last_fault: Option<String>,
}

/// An extension that exports.
pub(crate) struct Exporter<H> {
    pub id: u32,
    /// Its domain (the name it was loaded under) and class.
    pub domain: String,
    pub class: String,
    /// Its VM; out of the table while a call or a handler runs in it.
    pub vm: Option<Box<Vm<H>>>,
    /// The limits of its own handlers' invocations.
    pub own: Limits,
    /// The invocation (its start) its VM's limits were last set for, as
    /// a call's.
    pub limits_for: Option<u64>,
    /// Its machine code, being compiled.
    pub compiling: Option<Receiver<Result<Compiled<H>, String>>>,
    /// Export slots it holds.
    pub exports: Vec<usize>,
    /// Extensions linked to its domain (ids).
    pub importers: Vec<u32>,
}

/// The table (see the module documentation).
pub(crate) struct Exports<H> {
    /// By export slot.
    pub table: Vec<Option<Export>>,
    /// By extension slot.
    pub by_slot: Vec<Option<Exporter<H>>>,
    /// Exporters unloaded while importers were linked (their slots may
    /// hold other extensions now).
    pub dead: Vec<Exporter<H>>,
    /// Time budget of each extension's invocations, by slot.
    pub budgets: Vec<Duration>,
    /// When the running invocation started (set as it starts), in ticks
    /// of the runtime's clock (`spine::clock`).
    pub started: u64,
    /// Calls in progress, and the slot of the extension whose invocation
    /// made the outermost one.
    pub depth: u32,
    pub top: u32,
    /// Calls of a dead export.
    pub dead_calls: u64,
}

impl<H> Exports<H> {
    pub(crate) fn new() -> Exports<H> {
        Exports {
            table: Vec::new(),
            by_slot: Vec::new(),
            dead: Vec::new(),
            budgets: Vec::new(),
            started: 0,
            depth: 0,
            top: u32::MAX,
            dead_calls: 0,
        }
    }

    /// The live exporter of `domain`.
    pub(crate) fn exporter_of(&self, domain: &str) -> Option<&Exporter<H>> {
        self.by_slot.iter().flatten().find(|x| x.domain == domain)
    }

    /// The exporter in extension slot `slot`.
    pub(crate) fn at(&self, slot: usize) -> Option<&Exporter<H>> {
        self.by_slot.get(slot).and_then(Option::as_ref)
    }

    pub(crate) fn at_mut(&mut self, slot: usize) -> Option<&mut Exporter<H>> {
        self.by_slot.get_mut(slot).and_then(Option::as_mut)
    }

    /// Free export slots.
    pub(crate) fn free_slots(&self) -> usize {
        EXPORTS_MAX - self.table.iter().filter(|e| e.is_some()).count()
    }

    /// Put `export` in a free slot (the caller checked there is one).
    pub(crate) fn add_export(&mut self, export: Export) -> Option<usize> {
        let k = match self.table.iter().position(Option::is_none) {
            Some(k) => k,
            None if self.table.len() < EXPORTS_MAX => {
                self.table.push(None);
                self.table.len() - 1
            }
            None => return None,
        };
        self.table[k] = Some(export);
        Some(k)
    }

    /// Record the time budget of extension slot `slot`.
    pub(crate) fn set_budget(&mut self, slot: usize, budget: Duration) {
        if self.budgets.len() <= slot {
            self.budgets.resize(slot + 1, Duration::ZERO);
        }
        self.budgets[slot] = budget;
    }

    /// Install `x` as the exporter in extension slot `slot`.
    pub(crate) fn set_exporter(&mut self, slot: usize, x: Exporter<H>) {
        if self.by_slot.len() <= slot {
            self.by_slot.resize_with(slot + 1, || None);
        }
        self.by_slot[slot] = Some(x);
    }

    /// Extension `id` in slot `slot` goes: it is no longer an importer of
    /// the exporters `imports` (ids; a dead one whose last importer this
    /// was goes too), and if it exports, its exports go, or die if
    /// importers are linked to them. Returns the VM it exported from.
    pub(crate) fn remove(&mut self, slot: usize, id: u32, imports: &[u32]) -> Option<Box<Vm<H>>> {
        for &xid in imports {
            if let Some(x) = self.by_slot.iter_mut().flatten().find(|x| x.id == xid) {
                x.importers.retain(|&i| i != id);
            }
            if let Some(i) = self.dead.iter().position(|x| x.id == xid) {
                self.dead[i].importers.retain(|&i| i != id);
                if self.dead[i].importers.is_empty() {
                    let x = self.dead.swap_remove(i);
                    self.free_exports(&x.exports);
                }
            }
        }
        let mut x = self.by_slot.get_mut(slot)?.take()?;
        let vm = x.vm.take();
        if x.importers.is_empty() {
            self.free_exports(&x.exports);
        } else {
            for &k in &x.exports {
                if let Some(Some(e)) = self.table.get_mut(k) {
                    e.dead = true;
                }
            }
            self.dead.push(x);
        }
        vm
    }

    fn free_exports(&mut self, ks: &[usize]) {
        for &k in ks {
            if let Some(e) = self.table.get_mut(k) {
                *e = None;
            }
        }
    }
}
