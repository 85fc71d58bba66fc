//! Route tables loaded into extensions (the SPINE paper, section 5.2:
//! the router's host application builds the trie and loads it onto the
//! adapters; an update builds a new trie and switches to it atomically).
//! The runtime's half: each extension's tables by number, the version
//! each handler sees (the `table` native, in `natives.rs`). Loading is the set-up
//! half's (`tables_setup.rs`).
//!
//! A table is an LC-trie's export (`unet_router::LcTrie::to_le_bytes`),
//! checked, whose arrays are `int[]`s of the extension's own JIVE heap,
//! outside its scratch quota ([`SCRATCH_MAX`](crate::spine::ext::SCRATCH_MAX))
//! and charged to a table quota of their own: parts [`TRIE`], [`BASE`],
//! [`PRE`] and [`HOPS`] as the trie has them, and [`META`], `{nh_bits,
//! version}`. A handler gets a part with `Spine.table(n, part)`: the
//! arrays of the current version of table `n`, or null when there is
//! none. Separate arrays rather than one with offsets: the Java lookup
//! (`extensions/router/Router.java`) walks the same arrays as the Rust
//! one, and every index is checked against the bounds of its own part.
//!
//! Versions: a load of a number that has a table installs the new
//! version between two events (the set-up half runs between them), so
//! an invocation sees one version throughout; the runtime pins the
//! current version's arrays, and unpins a replaced one's, which the heap
//! frees as soon as nothing refers to them (an extension may hold a part
//! in a static field until its next invocation). A replaced version is
//! charged until it is freed.

use std::sync::mpsc::Receiver;

use jive::heap::{Elems, ARRAY_HEADER_BYTES};
use jive::{ArrayRef, Vm};

use crate::clients::{ClientId, ProcKey};

/// Table numbers an extension may use: `0..TABLES_PER_EXT`.
pub(crate) const TABLES_PER_EXT: usize = 16;
/// Bytes of tables one extension may hold (replaced versions not yet
/// freed included): the full Internet table twice, while it is switched.
pub(crate) const TABLE_BYTES_PER_EXT: usize = 32 << 20;
/// Bytes of tables the extensions of one process may hold.
pub(crate) const TABLE_BYTES_PER_PROCESS: usize = 64 << 20;

/// The nodes.
pub(crate) const TRIE: usize = 0;
/// The base vector.
pub(crate) const BASE: usize = 1;
/// The prefix vector.
pub(crate) const PRE: usize = 2;
/// The next hops.
pub(crate) const HOPS: usize = 3;
/// `{nh_bits, version}`.
pub(crate) const META: usize = 4;
/// Parts of a table.
pub(crate) const PARTS: usize = 5;

/// One installed version of a table: its parts in the extension's heap.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Version {
    /// The parts' handles (what the native returns) and references.
    pub parts: [ArrayRef; PARTS],
    /// What the parts take (headers included).
    pub bytes: usize,
}

/// The tables of one extension.
#[derive(Default)]
pub(crate) struct ExtTables {
    /// By number.
    current: Vec<Option<Version>>,
    /// Replaced versions that may still be referenced.
    replaced: Vec<Version>,
    /// Versions installed so far.
    pub loads: u32,
}

impl ExtTables {
    /// Bytes charged: the current versions and the replaced ones not yet
    /// freed (as of the last [`ExtTables::forget_freed`]).
    pub(crate) fn charged(&self) -> usize {
        let cur: usize = self.current.iter().flatten().map(|v| v.bytes).sum();
        cur + self.replaced.iter().map(|v| v.bytes).sum::<usize>()
    }

    /// Stop charging the replaced versions whose arrays `vm` has freed.
    pub(crate) fn forget_freed<H>(&mut self, vm: &Vm<H>) {
        self.replaced
            .retain(|v| v.parts.iter().any(|&a| vm.ints(a).is_some()));
    }

    /// Make `v` the current version of table `n` (below
    /// [`TABLES_PER_EXT`]); the one it replaces, if any.
    pub(crate) fn install(&mut self, n: usize, v: Version) -> Option<Version> {
        if self.current.len() <= n {
            self.current.resize(n + 1, None);
        }
        let old = self.current[n].replace(v);
        if let Some(o) = old {
            self.replaced.push(o);
        }
        old
    }

    /// The handle of part `part` of table `n`'s current version: 0 (null)
    /// when there is none.
    fn handle(&self, n: i32, part: usize) -> i32 {
        usize::try_from(n)
            .ok()
            .and_then(|n| self.current.get(n)?.as_ref())
            .map_or(0, |v| v.parts[part].handle())
    }
}

/// Every extension's tables, by extension slot.
#[derive(Default)]
pub(crate) struct Tables {
    by_slot: Vec<ExtTables>,
}

impl Tables {
    /// The tables of the extension in `slot`, made empty if it had none.
    pub(crate) fn of_mut(&mut self, slot: usize) -> &mut ExtTables {
        if self.by_slot.len() <= slot {
            self.by_slot.resize_with(slot + 1, ExtTables::default);
        }
        &mut self.by_slot[slot]
    }

    /// Bytes charged to the extension in `slot`.
    pub(crate) fn charged(&self, slot: usize) -> usize {
        self.by_slot.get(slot).map_or(0, ExtTables::charged)
    }

    /// The handle of part `part` (below [`PARTS`]) of the current version
    /// of table `n` of the extension in `slot`: 0 (null) when there is
    /// none.
    pub(crate) fn part(&self, slot: usize, n: i32, part: usize) -> i32 {
        self.by_slot.get(slot).map_or(0, |t| t.handle(n, part))
    }

    /// The extension in `slot` went (its heap with it): it has no tables.
    pub(crate) fn clear(&mut self, slot: usize) {
        if let Some(t) = self.by_slot.get_mut(slot) {
            *t = ExtTables::default();
        }
    }
}

/// A table checked on the set-up thread, its parts already laid out as
/// `int[]` elements there, so that installing it on the engine's thread
/// moves them into the extension's heap without a copy.
pub(crate) struct Checked {
    /// [`TRIE`], [`BASE`], [`PRE`] and [`HOPS`], in that order.
    pub parts: [Elems<i32>; 4],
    /// The bits of an info word naming the next hop.
    pub nh_bits: u32,
}

impl Checked {
    /// What the parts take in a heap, [`META`] included: each `int[]` with
    /// its header.
    pub(crate) fn bytes(&self) -> usize {
        self.parts
            .iter()
            .map(|p| p.len())
            .chain([2])
            .map(|n| n * 4 + ARRAY_HEADER_BYTES)
            .sum()
    }
}

/// A table load whose bytes are being checked (the set-up half's, in
/// `Loads`).
pub(crate) struct TableLoad {
    pub client: ClientId,
    pub proc: Option<ProcKey>,
    pub req_id: u32,
    pub ext: u32,
    pub table: u32,
    pub result: Receiver<Result<Checked, String>>,
}
