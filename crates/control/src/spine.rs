//! SPINE's listing: what [`crate::Reply::SpineListing`] hands over in a
//! memory file (too large for one packet): the adapter's extensions,
//! each with its handlers' statistics, and the runtime's totals.
//!
//! The encoding is little-endian: counts as `u32`, strings as a `u16`
//! length and UTF-8 bytes. Decoding is total: a listing that does not
//! parse is an error, never a panic.

/// One handler of an extension.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HandlerInfo {
    /// Its handler number.
    pub number: u16,
    /// The method that runs.
    pub method: String,
    /// Invocations so far.
    pub invocations: u64,
    /// Of those, the ones the engine timed (one in its
    /// `spine_time_every`, picked at random; every one of an extension
    /// that calls exports).
    pub timed: u64,
    /// Time in the timed invocations, ns.
    pub total_ns: u64,
    /// Longest timed invocation, ns.
    pub max_ns: u64,
    /// Terminations by reason (name, count), the reasons with a count.
    pub terminations: Vec<(String, u64)>,
}

impl HandlerInfo {
    /// The mean time of an invocation, ns (of the timed ones; 0 if none).
    pub fn mean_ns(&self) -> u64 {
        self.total_ns.checked_div(self.timed).unwrap_or(0)
    }

    /// Terminations of every reason.
    pub fn terminated(&self) -> u64 {
        self.terminations.iter().map(|(_, n)| n).sum()
    }

    /// Terminations for `reason` (a name as `unet stat` shows it).
    pub fn terminated_for(&self, reason: &str) -> u64 {
        self.terminations
            .iter()
            .filter(|(r, _)| r == reason)
            .map(|(_, n)| n)
            .sum()
    }
}

/// A method an extension exports to others (into the domain named
/// after it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportInfo {
    /// Its name and descriptor, e.g. `lookup(I)I`.
    pub method: String,
    /// Whether handlers may call it (it passed the `EPHEMERAL` rule).
    pub ephemeral: bool,
    /// Calls made to it (a call made when its caller's time was already
    /// up counts, as a `timeout`, though it did not run).
    pub calls: u64,
    /// Calls that faulted, by reason (name, count).
    pub terminations: Vec<(String, u64)>,
    /// The last fault: the caller and what happened (empty when none).
    pub last_fault: String,
}

/// One extension.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExtInfo {
    /// Its id on the adapter.
    pub id: u32,
    /// The name it was loaded under.
    pub name: String,
    /// The process that loaded it.
    pub pid: u32,
    /// Time budget of one invocation, µs.
    pub budget_us: u32,
    /// Whether its handlers run as machine code.
    pub compiled: bool,
    /// Buffers it keeps now.
    pub kept: u32,
    /// Buffers given back because the invocation that kept them was
    /// terminated.
    pub keeps_undone: u64,
    /// The last termination: handler number and what happened (empty
    /// when none).
    pub last_fault: String,
    /// Its handlers.
    pub handlers: Vec<HandlerInfo>,
    /// What it exports (into the domain named after it).
    pub exports: Vec<ExportInfo>,
    /// The domains of other extensions it is linked to.
    pub imports: Vec<String>,
}

/// The listing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpineListing {
    /// The extensions the asking client may see.
    pub extensions: Vec<ExtInfo>,
    /// Events run, by event type (name, count).
    pub events: Vec<(String, u64)>,
    /// Drops, by reason (name, count).
    pub drops: Vec<(String, u64)>,
    /// Messages in use.
    pub msgs_live: u32,
    /// Bulk buffers in use.
    pub bufs_live: u32,
    /// Events queued.
    pub queued: u32,
    /// Invocations stopped for a forged or stale handle.
    pub bad_handles: u64,
    /// `keep`s refused at an extension's cap.
    pub keeps_refused: u64,
    /// Calls of exports whose extension was unloaded (each a fault of
    /// the caller).
    pub dead_calls: u64,
}

use crate::bytes::{Listing, W};

/// Most entries of any list a listing decodes (a bound, not a format
/// limit: the engine writes far fewer).
const MAX_ENTRIES: u32 = 1 << 16;

impl SpineListing {
    /// The listing's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W::default();
        w.u32(self.extensions.len() as u32);
        for x in &self.extensions {
            w.u32(x.id);
            w.str(&x.name);
            w.u32(x.pid);
            w.u32(x.budget_us);
            w.u8(x.compiled as u8);
            w.u32(x.kept);
            w.u64(x.keeps_undone);
            w.str(&x.last_fault);
            w.u32(x.handlers.len() as u32);
            for h in &x.handlers {
                w.u16(h.number);
                w.str(&h.method);
                w.u64(h.invocations);
                w.u64(h.timed);
                w.u64(h.total_ns);
                w.u64(h.max_ns);
                w.pairs(&h.terminations);
            }
            w.u32(x.exports.len() as u32);
            for e in &x.exports {
                w.str(&e.method);
                w.u8(e.ephemeral as u8);
                w.u64(e.calls);
                w.pairs(&e.terminations);
                w.str(&e.last_fault);
            }
            w.u32(x.imports.len() as u32);
            for d in &x.imports {
                w.str(d);
            }
        }
        w.pairs(&self.events);
        w.pairs(&self.drops);
        w.u32(self.msgs_live);
        w.u32(self.bufs_live);
        w.u32(self.queued);
        w.u64(self.bad_handles);
        w.u64(self.keeps_refused);
        w.u64(self.dead_calls);
        w.into_vec()
    }

    /// Read a listing (what [`SpineListing::encode`] wrote).
    pub fn decode(b: &[u8]) -> Result<SpineListing, String> {
        let mut r = Listing::new(b, "listing", MAX_ENTRIES);
        let mut extensions = Vec::new();
        for _ in 0..r.count()? {
            let id = r.u32()?;
            let name = r.str()?;
            let pid = r.u32()?;
            let budget_us = r.u32()?;
            let compiled = r.u8()? != 0;
            let kept = r.u32()?;
            let keeps_undone = r.u64()?;
            let last_fault = r.str()?;
            let mut handlers = Vec::new();
            for _ in 0..r.count()? {
                handlers.push(HandlerInfo {
                    number: r.u16()?,
                    method: r.str()?,
                    invocations: r.u64()?,
                    timed: r.u64()?,
                    total_ns: r.u64()?,
                    max_ns: r.u64()?,
                    terminations: r.pairs()?,
                });
            }
            let mut exports = Vec::new();
            for _ in 0..r.count()? {
                exports.push(ExportInfo {
                    method: r.str()?,
                    ephemeral: r.u8()? != 0,
                    calls: r.u64()?,
                    terminations: r.pairs()?,
                    last_fault: r.str()?,
                });
            }
            let imports = (0..r.count()?).map(|_| r.str()).collect::<Result<_, _>>()?;
            extensions.push(ExtInfo {
                id,
                name,
                pid,
                budget_us,
                compiled,
                kept,
                keeps_undone,
                last_fault,
                handlers,
                exports,
                imports,
            });
        }
        Ok(SpineListing {
            extensions,
            events: r.pairs()?,
            drops: r.pairs()?,
            msgs_live: r.u32()?,
            bufs_live: r.u32()?,
            queued: r.u32()?,
            bad_handles: r.u64()?,
            keeps_refused: r.u64()?,
            dead_calls: r.u64()?,
        })
    }

    /// The count of drop reason `name`.
    pub fn drop_count(&self, name: &str) -> u64 {
        self.drops
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_round_trips_and_every_cut_of_it_is_refused() {
        let l = SpineListing {
            extensions: vec![ExtInfo {
                id: 3,
                name: "echo".into(),
                pid: 42,
                budget_us: 10,
                compiled: true,
                kept: 2,
                keeps_undone: 1,
                last_fault: "handler 70 terminated: its time budget ran out".into(),
                handlers: vec![HandlerInfo {
                    number: 70,
                    method: "onPing".into(),
                    invocations: 9,
                    timed: 3,
                    total_ns: 900,
                    max_ns: 200,
                    terminations: vec![("timeout".into(), 1)],
                }],
                exports: vec![ExportInfo {
                    method: "lookup(I)I".into(),
                    ephemeral: true,
                    calls: 7,
                    terminations: vec![("memory".into(), 1)],
                    last_fault: "called by extension 4: null reference".into(),
                }],
                imports: vec!["router".into()],
            }],
            events: vec![("handler".into(), 9)],
            drops: vec![("no_handler".into(), 4)],
            msgs_live: 1,
            bufs_live: 2,
            queued: 0,
            bad_handles: 5,
            keeps_refused: 6,
            dead_calls: 8,
        };
        let b = l.encode();
        assert_eq!(SpineListing::decode(&b), Ok(l.clone()));
        for n in 0..b.len() {
            assert!(SpineListing::decode(&b[..n]).is_err(), "cut at {n}");
        }
        assert_eq!(l.extensions[0].handlers[0].terminated_for("timeout"), 1);
        assert_eq!(l.drop_count("no_handler"), 4);
    }
}
