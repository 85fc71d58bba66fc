//! Array references resolved once: where the translator may keep, for a
//! slot that holds an array, its entry of the heap's table in two
//! Cranelift variables instead of reading the table at every access: the
//! element address, and the length if the array is of a kind every access
//! through the slot takes, else 0 (which fails every check, so that the
//! access's check is the index's alone).
//!
//! An entry of the table changes only at an allocation (a collection
//! frees entries, an allocation fills them, and the table itself moves
//! when it grows), and everything that may allocate during an invocation
//! is an op of the method: `newarray`, a call of a method that may
//! allocate ([`allocating`]) and a call of a native (a native may allocate
//! through its `NativeCtx`). So the entry read for a slot's handle stays
//! true until the slot is written or one of those ops runs. The plan is a
//! forward must-analysis over the ops: per op, the slots whose cached
//! entry is true on entry (read by an earlier access on every path, and
//! neither written nor invalidated since). An access whose slot is cached
//! checks kind and bounds against the variables only; any other access
//! reads the table (a read that cannot fault: a handle that names no live
//! entry reads a free one, which passes no check) and caches what it read.
//!
//! Loops: for a loop whose ops (from its header, the target of a backward
//! branch, to the last backward branch to it) neither allocate nor write
//! a slot the loop uses as an array, the entries of those slots are read
//! on every forward edge into the header, so that every access in the
//! loop finds them cached. A failed check still goes to the helper with
//! the slot's handle and index, which makes the interpreter's exact fault
//! (or does the access, for a kind the inline path does not take): every
//! fault, its method and its bytecode offset are as before.
//!
//! Constant indices: within a straight run of ops (each reached from the
//! one before alone), an access at constant index `k` through a cache
//! whose kinds it takes exactly (so that its slow path always faults)
//! proves the array longer than `k` for the ops after it, until the cache
//! is read again; a later access there at a constant index below the
//! proven length is not checked, and a load there of an element an
//! earlier access of the run read or wrote, with no op since that may
//! store into it ([`may_store`], [`Gen::stored`]), reuses its value.
//! Elements are named by cache and index, the index a constant or a
//! value plus a constant (`a[i - 1]`, [`Gen::affine`]): two indices of
//! one value with different constants name different elements, so a
//! store to one keeps what is known of the other. The copies of an unrolled
//! loop continue one run from copy to copy where the back-edge is
//! reached from the op before it alone (see the `unroll` module).
//!
//! Bounds: at most 64 slots are cached per method (the others read the
//! table at each access, as before), and choosing what loops read up
//! front stops after [`HOIST_WORK`] ops scanned.

use super::*;
use crate::heap::RawArr;

/// Ops scanned choosing what loop headers read (nested loops scan their
/// ops once per loop), per method; past it no more headers read anything.
const HOIST_WORK: usize = 1 << 20;

/// What the entry of a handle that names no live array reads as: a free
/// entry, whose kind passes no check and whose length is 0.
static NO_ARRAY: RawArr = RawArr {
    addr: 0,
    len: 0,
    kind: RAW_FREE,
};

/// An element's index as the translator names it: a value (the root of
/// [`Gen::affine_of`]) plus a constant, or a constant alone.
pub(in crate::jit) type Index = (Option<Value>, i32);

/// The kinds (`RAW_*`) an inline access takes, as a mask of `1 << kind`.
const K_I: u8 = 1 << RAW_I;
const K_S: u8 = 1 << RAW_S;
const K_B: u8 = 1 << RAW_B;
const K_Z: u8 = 1 << RAW_Z;

/// The array slot an op reads through (loads, stores, `arraylength`)
/// and the kinds its inline path takes (`baload` reads `byte[]` and
/// `boolean[]`; `arraylength` any array).
fn array_use(op: &Op) -> Option<(u16, u8)> {
    Some(match *op {
        Op::IaLoad { a, .. } | Op::IaLoadK { a, .. } | Op::IaStore { a, .. } => (a, K_I),
        Op::IaStoreK { a, .. } => (a, K_I),
        Op::SaLoad { a, .. } | Op::SaStore { a, .. } => (a, K_S),
        Op::BaLoad { a, .. } | Op::BaLoadK { a, .. } => (a, K_B | K_Z),
        Op::BaStore { a, .. } | Op::BaStoreK { a, .. } => (a, K_B),
        Op::ZaStore { a, .. } => (a, K_Z),
        Op::ArrLen { a, .. } => (a, K_I | K_S | K_B | K_Z),
        _ => return None,
    })
}

/// Whether op `op` may store into any array: a call (a callee or a
/// native may store, and an allocation's collection frees). A store op
/// forgets only the elements it may overwrite ([`Gen::stored`]).
pub(super) fn may_store(op: &Op) -> bool {
    matches!(
        op,
        Op::Call { .. } | Op::CallNative { .. } | Op::NewArray { .. }
    )
}

/// What an op does to the cached entries.
enum Kill {
    None,
    /// It writes this slot.
    Slot(u16),
    /// A call of a method that cannot allocate: it writes its result
    /// slot, and the slots from it up are the callee's frame.
    From(u16),
    /// It may allocate.
    All,
}

fn kill(op: &Op, alloc: &[bool]) -> Kill {
    match *op {
        Op::NewArray { .. } | Op::CallNative { .. } => Kill::All,
        Op::Call { m, at } => {
            if alloc.get(m as usize).copied().unwrap_or(true) {
                Kill::All
            } else {
                Kill::From(at)
            }
        }
        Op::Inc { x, .. }
        | Op::IncLt { x, .. }
        | Op::IncLe { x, .. }
        | Op::IncNe { x, .. }
        | Op::IncGt { x, .. }
        | Op::IncGe { x, .. } => Kill::Slot(x),
        _ => match op.dest() {
            Some(d) => Kill::Slot(d),
            None => Kill::None,
        },
    }
}

/// The plan for one method (see the module's documentation).
pub(in crate::jit) struct Plan {
    /// Per slot: its cache (index into `slots`), if it has one.
    of_slot: Vec<Option<u8>>,
    /// Per cache: its slot.
    pub(super) slots: Vec<u16>,
    /// Per cache: the kinds whose length it keeps (the others read as
    /// length 0): those every access through the slot takes, if any
    /// kind is, else those of its first access (the accesses that take
    /// none of them do not use the cache).
    pub(super) kinds: Vec<u8>,
    /// Per op: the caches true on entry.
    valid: Vec<u64>,
    /// Per op: the caches true after it.
    after: Vec<u64>,
    /// Per op: the caches read on every forward edge into it.
    hoist: Vec<u64>,
    /// Per op: whether its only predecessor is the op before it, which
    /// falls through to it.
    straight: Vec<bool>,
}

impl Plan {
    pub(in crate::jit) fn new(mc: &MethodCode, alloc: &[bool]) -> Plan {
        let n = mc.ops.len();
        let mut of_slot: Vec<Option<u8>> = vec![None; mc.frame_size as usize];
        let mut slots = Vec::new();
        let mut kinds: Vec<u8> = Vec::new();
        for op in &mc.ops {
            if let Some((a, k)) = array_use(op) {
                match of_slot.get_mut(a as usize) {
                    Some(e @ None) if slots.len() < 64 => {
                        *e = Some(slots.len() as u8);
                        slots.push(a);
                        kinds.push(k);
                    }
                    Some(&mut Some(c)) => {
                        let both = kinds[c as usize] & k;
                        if both != 0 {
                            kinds[c as usize] = both;
                        }
                    }
                    _ => {}
                }
            }
        }
        let mut plan = Plan {
            of_slot,
            slots,
            kinds,
            valid: vec![0; n],
            after: vec![0; n],
            hoist: vec![0; n],
            straight: vec![false; n],
        };
        // Straight runs matter to fields too ([`Gen::fields_known`]), so
        // they are found in methods without arrays as well.
        let succ: Vec<Vec<u32>> = (0..n).map(|i| successors(mc, i)).collect();
        let mut preds = vec![0u32; n];
        for ts in &succ {
            for &t in ts {
                if let Some(p) = preds.get_mut(t as usize) {
                    *p += 1;
                }
            }
        }
        for i in 1..n {
            plan.straight[i] = preds[i] == 1 && succ[i - 1].contains(&(i as u32));
        }
        if plan.slots.is_empty() {
            return plan;
        }
        let kills: Vec<Kill> = mc.ops.iter().map(|op| kill(op, alloc)).collect();
        plan.choose_hoists(mc, &succ, &kills);
        plan.solve(mc, &succ, &kills);
        plan
    }

    /// The cache op `op` reads its array through, if any: the slot's,
    /// when the op's inline path takes every kind the cache keeps.
    pub(super) fn uses(&self, op: &Op) -> Option<usize> {
        let (a, k) = array_use(op)?;
        let c = usize::from(self.of_slot.get(a as usize).copied().flatten()?);
        (self.kinds[c] & !k == 0).then_some(c)
    }

    fn bit(&self, s: u16) -> u64 {
        match self.of_slot.get(s as usize) {
            Some(&Some(c)) => 1 << c,
            _ => 0,
        }
    }

    /// The caches of the slots from `at` up.
    fn from(&self, at: u16) -> u64 {
        self.slots
            .iter()
            .enumerate()
            .filter(|&(_, &s)| s >= at)
            .fold(0, |m, (c, _)| m | 1 << c)
    }

    /// The caches true after op `i` given `v` before it.
    fn transfer(&self, mc: &MethodCode, kills: &[Kill], i: usize, v: u64) -> u64 {
        let mut out = v;
        if let Some(c) = self.uses(&mc.ops[i]) {
            out |= 1 << c;
        }
        match kills[i] {
            Kill::None => out,
            Kill::Slot(s) => out & !self.bit(s),
            Kill::From(at) => out & !self.from(at),
            Kill::All => 0,
        }
    }

    /// Per loop header: the caches of the slots its loop reads arrays
    /// through, when nothing in the loop allocates or writes them.
    fn choose_hoists(&mut self, mc: &MethodCode, succ: &[Vec<u32>], kills: &[Kill]) {
        let n = mc.ops.len();
        // Per header, the last op with a backward branch to it.
        let mut last: Vec<Option<usize>> = vec![None; n];
        for (i, ts) in succ.iter().enumerate() {
            for &t in ts {
                let t = t as usize;
                if t <= i {
                    last[t] = Some(last[t].map_or(i, |x| x.max(i)));
                }
            }
        }
        let mut work = 0usize;
        for (t, l) in last.iter().enumerate() {
            let Some(l) = *l else { continue };
            work += l + 1 - t;
            if work > HOIST_WORK {
                return;
            }
            let (mut used, mut killed) = (0u64, 0u64);
            for (i, k) in kills.iter().enumerate().take(l + 1).skip(t) {
                if let Some(c) = self.uses(&mc.ops[i]) {
                    used |= 1 << c;
                }
                killed |= match *k {
                    Kill::None => 0,
                    Kill::Slot(s) => self.bit(s),
                    Kill::From(at) => self.from(at),
                    Kill::All => !0,
                };
            }
            self.hoist[t] = used & !killed;
        }
    }

    /// The fixpoint: an op's caches are those true on every edge into it
    /// (an edge from an earlier op also reads the target's hoisted ones);
    /// ops no path reaches cache nothing.
    fn solve(&mut self, mc: &MethodCode, succ: &[Vec<u32>], kills: &[Kill]) {
        let n = mc.ops.len();
        let mut reached = vec![false; n];
        let mut queued = vec![false; n];
        self.valid[0] = self.hoist[0];
        reached[0] = true;
        queued[0] = true;
        let mut work = vec![0usize];
        while let Some(i) = work.pop() {
            queued[i] = false;
            let out = self.transfer(mc, kills, i, self.valid[i]);
            for &t in &succ[i] {
                let t = t as usize;
                if t >= n {
                    continue;
                }
                let e = if t > i { out | self.hoist[t] } else { out };
                let v = if reached[t] { self.valid[t] & e } else { e };
                if !reached[t] || v != self.valid[t] {
                    reached[t] = true;
                    self.valid[t] = v;
                    if !queued[t] {
                        queued[t] = true;
                        work.push(t);
                    }
                }
            }
        }
        for (i, &r) in reached.iter().enumerate() {
            if !r {
                self.valid[i] = 0;
            }
            self.after[i] = self.transfer(mc, kills, i, self.valid[i]);
        }
    }

    /// Whether op `i` is reached from op `i - 1` alone, falling through.
    pub(super) fn straight(&self, i: usize) -> bool {
        self.straight.get(i).copied().unwrap_or(false)
    }

    /// Whether op `op`, through cache `c`, takes exactly the kinds the
    /// cache keeps: then its slow path always faults, and an access that
    /// goes on passed its check.
    pub(super) fn exact(&self, op: &Op, c: usize) -> bool {
        array_use(op).is_some_and(|(_, k)| k == self.kinds[c])
    }

    /// Whether cache `c` is true on entry to op `i`.
    pub(super) fn valid(&self, i: usize, c: usize) -> bool {
        self.valid.get(i).is_some_and(|v| v >> c & 1 == 1)
    }

    /// The caches to read on the edge from op `from` to op `t` (none on a
    /// backward edge, and none already true).
    pub(super) fn on_edge(&self, from: usize, t: usize) -> u64 {
        if t <= from {
            return 0;
        }
        let h = self.hoist.get(t).copied().unwrap_or(0);
        h & !self.after.get(from).copied().unwrap_or(0)
    }

    /// The caches to read on entry to the method.
    pub(super) fn at_entry(&self) -> u64 {
        self.hoist.first().copied().unwrap_or(0)
    }
}

/// A cached entry: Cranelift variables holding the element address and
/// the length, 0 unless the array is of a kind the cache keeps.
#[derive(Clone, Copy)]
pub(in crate::jit) struct CacheVars {
    pub(super) addr: Variable,
    pub(super) len: Variable,
}

impl<H> Gen<'_, '_, H> {
    /// Declare the variables of every cache of the plan.
    pub(super) fn declare_caches(&mut self) {
        for _ in 0..self.plan.slots.len() {
            let addr = self.b.declare_var(self.ptr);
            let len = self.b.declare_var(types::I32);
            self.cvars.push(CacheVars { addr, len });
        }
        self.proven = vec![0; self.plan.slots.len()];
    }

    /// Read the entry of the handle in cache `c`'s slot into its
    /// variables: the table's entry if the handle names one, else a free
    /// entry ([`NO_ARRAY`]). Never faults.
    pub(super) fn lookup(&mut self, c: usize) {
        let (s, cv) = (self.plan.slots[c], self.cvars[c]);
        self.proven[c] = 0;
        self.checked.retain(|e| e.0 != c);
        self.known.retain(|e| e.0 != c);
        let h = self.var(s);
        let cx = self.ctx();
        let fl = MemFlagsData::trusted();
        // Handle h names entry h - 1; null (0) and `this` (-1) give
        // indices no table reaches.
        let hx = self.b.ins().uextend(types::I64, h);
        let slot = self.b.ins().iadd_imm_s(hx, -1);
        let n = self.b.ins().load(types::I64, fl, cx, CTX_NARRAYS);
        let live = self.b.ins().icmp(IntCC::UnsignedLessThan, slot, n);
        let base = self.b.ins().load(self.ptr, fl, cx, CTX_ARRAYS);
        let off = self.b.ins().ishl_imm_u(slot, 4);
        let e = self.b.ins().iadd(base, off);
        let none = self
            .b
            .ins()
            .iconst(self.ptr, &NO_ARRAY as *const RawArr as i64);
        let e = self.b.ins().select(live, e, none);
        let addr = self.b.ins().load(self.ptr, fl, e, 0);
        let len = self.b.ins().load(types::I32, fl, e, 8);
        let kind = self.b.ins().load(types::I32, fl, e, 12);
        // Kinds are below 8: bit `kind` of the cache's mask says whether
        // it keeps the length.
        let mask = self.k32(i32::from(self.plan.kinds[c]));
        let bit = self.b.ins().ushr(mask, kind);
        let bit = self.b.ins().band_imm_s(bit, 1);
        let zero = self.k32(0);
        let len = self.b.ins().select(bit, len, zero);
        self.b.def_var(cv.addr, addr);
        self.b.def_var(cv.len, len);
    }

    /// Read every cache of `set`.
    pub(super) fn lookups(&mut self, set: u64) {
        for c in 0..self.plan.slots.len() {
            if set >> c & 1 == 1 {
                self.lookup(c);
            }
        }
    }

    /// The entry of the array op `i` reads through (element address, and
    /// length if of a kind the op takes, else 0), from its cache (read
    /// first if not true here), or `None` if the op uses no cache.
    pub(super) fn cached(&mut self, i: usize) -> Option<(Value, Value)> {
        let c = self.plan.uses(self.mc.ops.get(i)?)?;
        if !self.plan.valid(i, c) {
            self.lookup(c);
        }
        let cv = self.cvars[c];
        Some((self.b.use_var(cv.addr), self.b.use_var(cv.len)))
    }

    /// The block to branch to for op `t` from op `from`: the op's own, or,
    /// where the edge reads cached entries, one that reads them and then
    /// jumps there (filled after the op, [`Gen::fill_edges`]).
    pub(super) fn edge(&mut self, from: usize, t: u32) -> Result<Block, String> {
        let tb = self.target(t)?;
        let set = self.plan.on_edge(from, t as usize);
        // Out of a copy of a small loop's body, always through an edge
        // block: what the way out alone needs (the fuel and counter of
        // the copy) is computed there.
        let out = self
            .copy
            .as_ref()
            .is_some_and(|(lo, bl)| !(*lo..*lo + bl.len()).contains(&(t as usize)));
        if set == 0 && !out {
            return Ok(tb);
        }
        let blk = self.block();
        self.edges.push((blk, set, tb));
        Ok(blk)
    }

    /// Fill the edge blocks the op just emitted made.
    pub(super) fn fill_edges(&mut self) {
        for (blk, set, tb) in std::mem::take(&mut self.edges) {
            self.b.switch_to_block(blk);
            self.lookups(set);
            self.b.ins().jump(tb, &[]);
        }
    }
}
