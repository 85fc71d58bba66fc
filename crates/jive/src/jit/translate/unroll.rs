//! Small loops unrolled: a loop whose body has no call, no allocation and
//! no switch, and branches only forwards (within the body or out of the
//! loop), runs in groups of `k` copies of its body with one fuel check per
//! group instead of one per back-edge.
//!
//! The group is entered from the loop's back-edge, after its charge, when
//! the fuel left covers `k` whole iterations (`fuel >= k * cost`, where
//! `cost` is what the interpreter charges at the back-edge): then none of
//! the `k` charges of the group can take the register below zero, and the
//! interpreter would not have left its loop for the budget's slow path on
//! any of them. Copy `j` runs with `fuel - j * cost` in the register, so
//! that every way out of it (a branch out of the loop, a fault, a helper
//! that reads `Ctx::fuel`) sees exactly what the interpreter's register
//! holds there; those values are computed on the way out only. When the
//! fuel left does not cover a group, the loop runs one iteration at a
//! time with the check at each back-edge, so a loop that runs out of fuel
//! (or reaches a checkpoint or a slice of its time limit) stops at the
//! same back-edge with the same fault and the same fuel left as
//! interpreted.
//!
//! A counted loop (its back-edge an `iinc x` fused with a compare of `x`
//! against a slot `b`, neither written in the body, stepping towards the
//! bound) also checks, once per group, that the `k` back-edges all go on
//! (`x + k * v` against `b`, in 64 bits so that no step wraps): then its
//! copies do not compare at all, and `x` in copy `j` is `x + j * v`.
//!
//! The blocks of a copy are sealed as they are entered (within a copy,
//! branches go only forwards, so every branch to a block precedes it): a
//! slot keeps one `Value` down the copy, as in a straight run of ops, and
//! what the translator recognises by `Value` (a sum of one value with
//! itself, see `Gen::sum`) is recognised in every copy.
//!
//! What a copy proved about its arrays (an access at a constant index
//! through a cached entry that passed its check, see the `cache`
//! module) and the elements it loaded at constant indices (with no store
//! since) carry into the next copy when the copy's back-edge is reached
//! from the op before it alone: the next copy is entered only from that
//! back-edge, so every access that proved something ran on the way in,
//! an array's length never changes, and the plan's must-analysis still
//! says whether the cached entry is the slot's. A loop that reads `a[0]`
//! checks the index in the first copy of a group and loads the element
//! there only. A branch to the back-edge from inside the body (an `if`
//! around the body's last access, a `continue`) ends what carries.
//!
//! Bounds: at most [`UNROLL_MAX`] copies, of at most [`UNROLL_OPS`] ops
//! in all, and at most [`UNROLL_METHOD_OPS`] ops copied per method.

use super::*;
use crate::decode::Slot;

/// Copies of a body in one group, at most.
const UNROLL_MAX: usize = 8;
/// Ops of a group (the body times the copies), at most.
const UNROLL_OPS: usize = 32;
/// Ops copied into groups per method, at most (past it, loops run as
/// before): a class is hostile input, and its compile cost stays bounded.
const UNROLL_METHOD_OPS: usize = 1024;

/// A counted back-edge: `x += v; if x <cc> b` (see the module's
/// documentation).
#[derive(Clone, Copy, Debug)]
pub(in crate::jit) struct Counted {
    x: Slot,
    v: i64,
    b: Slot,
    /// The condition on `x + k * v` (64 bits) against `b` under which
    /// the `k` back-edges of a group all go on.
    all: IntCC,
}

/// A loop the translator unrolls: ops `t..=i`, op `i` its back-edge.
#[derive(Clone, Copy, Debug)]
pub(in crate::jit) struct Small {
    t: usize,
    pub(super) i: usize,
    /// Copies of the body per group.
    k: usize,
    /// What the interpreter charges at the back-edge.
    cost: i64,
    counted: Option<Counted>,
}

/// Whether op `o` may be in the body of a small loop: it calls nothing
/// that charges fuel and allocates nothing, and goes on (if at all) only
/// forwards, to a later op of the body or out of the loop.
fn simple(mc: &MethodCode, o: usize) -> bool {
    let calls = matches!(
        mc.ops[o],
        Op::Call { .. } | Op::CallNative { .. } | Op::NewArray { .. } | Op::Switch { .. }
    );
    !calls && successors(mc, o).iter().all(|&u| u as usize > o)
}

/// The slot op `op` (a [`simple`] one) writes, if any.
fn written(op: &Op) -> Option<Slot> {
    match *op {
        Op::Inc { x, .. } => Some(x),
        op => inc_branch(&op).map(|(x, ..)| x).or(op.dest()),
    }
}

/// The parts of a fused increment-and-branch: `x += v; if x <cc> b`.
pub(super) fn inc_branch(op: &Op) -> Option<(Slot, i16, Slot, IntCC)> {
    Some(match *op {
        Op::IncLt { x, v, b, .. } => (x, v, b, IntCC::SignedLessThan),
        Op::IncLe { x, v, b, .. } => (x, v, b, IntCC::SignedLessThanOrEqual),
        Op::IncNe { x, v, b, .. } => (x, v, b, IntCC::NotEqual),
        Op::IncGt { x, v, b, .. } => (x, v, b, IntCC::SignedGreaterThan),
        Op::IncGe { x, v, b, .. } => (x, v, b, IntCC::SignedGreaterThanOrEqual),
        _ => return None,
    })
}

/// The counted form of back-edge `op`, given the slots the body writes.
fn counted(op: &Op, writes: &[Slot]) -> Option<Counted> {
    let (x, v, b, cc) = inc_branch(op)?;
    if writes.contains(&x) || writes.contains(&b) {
        return None;
    }
    use IntCC::*;
    let all = match (cc, v.signum()) {
        (SignedLessThan | NotEqual, 1) => SignedLessThan,
        (SignedLessThanOrEqual, 1) => SignedLessThanOrEqual,
        (SignedGreaterThan | NotEqual, -1) => SignedGreaterThan,
        (SignedGreaterThanOrEqual, -1) => SignedGreaterThanOrEqual,
        _ => return None,
    };
    Some(Counted {
        x,
        v: i64::from(v),
        b,
        all,
    })
}

/// Per op: the small loop whose back-edge it is, if any (see the module's
/// documentation).
pub(super) fn small_loops(mc: &MethodCode) -> Vec<Option<Small>> {
    let n = mc.ops.len();
    let mut out = vec![None; n];
    let mut copied = 0usize;
    for (i, op) in mc.ops.iter().enumerate() {
        // Every op with a target is a branch; a target not after it
        // makes it a back-edge.
        let Some(t) = op.target().map(|t| t as usize) else {
            continue;
        };
        if t > i {
            continue;
        }
        let len = i + 1 - t;
        let k = (UNROLL_OPS / len).min(UNROLL_MAX);
        if k < 2 || copied + k * len > UNROLL_METHOD_OPS {
            continue;
        }
        if !(t..i).all(|o| simple(mc, o)) {
            continue;
        }
        let writes: Vec<Slot> = mc.ops[t..i].iter().filter_map(written).collect();
        copied += k * len;
        out[i] = Some(Small {
            t,
            i,
            k,
            cost: len as i64,
            counted: counted(op, &writes),
        });
    }
    out
}

/// The ops after loop `s` its body goes on to.
pub(super) fn exits(mc: &MethodCode, s: &Small) -> Vec<usize> {
    (s.t..s.i)
        .flat_map(|o| successors(mc, o))
        .map(|u| u as usize)
        .filter(|&u| u > s.i)
        .collect()
}

impl<H> Gen<'_, '_, H> {
    /// The small loop whose back-edge is the jump from op `i` to op `t`.
    pub(super) fn small_at(&self, i: usize, t: u32) -> Option<Small> {
        self.small
            .get(i)
            .copied()
            .flatten()
            .filter(|s| s.t == t as usize)
    }

    /// Branch to the group `g` of loop `s` if the fuel left covers it
    /// (and, counted, its back-edges all go on), else to `single`, the
    /// loop's header: one iteration with its own check.
    fn group_or(&mut self, s: &Small, g: Block, single: Block) {
        let f = self.fuel();
        let whole = s.k as i64 * s.cost;
        let ok = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, f, whole);
        let Some(c) = s.counted else {
            self.b.ins().brif(ok, g, &[], single, &[]);
            return;
        };
        let more = self.block();
        self.b.ins().brif(ok, more, &[], single, &[]);
        self.b.switch_to_block(more);
        let (x, lim) = (self.var(c.x), self.var(c.b));
        let x = self.b.ins().sextend(types::I64, x);
        let last = self.b.ins().iadd_imm_s(x, s.k as i64 * c.v);
        let lim = self.b.ins().sextend(types::I64, lim);
        let on = self.b.ins().icmp(c.all, last, lim);
        self.b.ins().brif(on, g, &[], single, &[]);
    }

    /// The back-edge of small loop `s`, after its charge: to its group
    /// when the fuel covers it, else to `single`. The group is emitted
    /// after the op ([`Gen::unrolled`]).
    pub(super) fn group_at_back_edge(&mut self, s: Small, single: Block) {
        let g = self.block();
        self.group_or(&s, g, single);
        self.pending = Some((s, g, single));
    }

    /// The group the op just emitted branches to, if any: `k` copies of
    /// the loop's body, then the charges of their back-edges and the
    /// branch to the next group or one iteration.
    pub(super) fn unrolled<M: Module>(
        &mut self,
        module: &mut M,
        bodies: &[Option<FuncId>],
    ) -> Result<(), String> {
        let Some((s, g, single)) = self.pending.take() else {
            return Ok(());
        };
        self.groups += 1;
        self.b.switch_to_block(g);
        let f0 = self.fuel();
        let x0 = s.counted.map(|c| self.var(c.x));
        for j in 0..s.k {
            // Sealed as soon as they are entered (see the module's
            // documentation).
            let blocks: Vec<Block> = (s.t..=s.i).map(|_| self.b.create_block()).collect();
            self.b.ins().jump(blocks[0], &[]);
            self.b.switch_to_block(blocks[0]);
            self.b.seal_block(blocks[0]);
            self.copy = Some((s.t, blocks.clone()));
            let f = self.b.ins().iadd_imm_s(f0, -(j as i64) * s.cost);
            self.set_fuel(f);
            if let (Some(c), Some(x0)) = (s.counted, x0) {
                let x = self.b.ins().iadd_imm_s(x0, j as i64 * c.v);
                self.offset_of(x, x0, (j as i64 * c.v) as i32);
                self.set(c.x, x);
            }
            if j == 0 {
                self.forget_run();
            }
            for o in s.t..s.i {
                if o > s.t {
                    self.b.switch_to_block(blocks[o - s.t]);
                    self.b.seal_block(blocks[o - s.t]);
                    if !self.plan.straight(o) {
                        self.forget_run();
                    }
                }
                self.forget_stored(&self.mc.ops[o]);
                let mark = self.local.len();
                if self.op(o, module, bodies)? {
                    let next = self.edge(o, o as u32 + 1)?;
                    self.b.ins().jump(next, &[]);
                }
                self.fill_edges();
                for b in self.local.split_off(mark) {
                    self.b.seal_block(b);
                }
            }
            if s.i > s.t {
                self.b.switch_to_block(blocks[s.i - s.t]);
                self.b.seal_block(blocks[s.i - s.t]);
            }
            // What the copy proved about its arrays holds in the next
            // copy only if the back-edge is reached from the op before
            // it alone (see the module's documentation).
            if s.i > s.t && !self.plan.straight(s.i) {
                self.forget_run();
            }
            self.forget_stored(&self.mc.ops[s.i]);
            let next = self.b.create_block();
            self.copy_back_edge(&s, next)?;
            self.copy = None;
            self.fill_edges();
            self.b.switch_to_block(next);
            self.b.seal_block(next);
        }
        // After the group: the charges of its `k` back-edges.
        let f = self.b.ins().iadd_imm_s(f0, -(s.k as i64) * s.cost);
        self.set_fuel(f);
        if let (Some(c), Some(x0)) = (s.counted, x0) {
            let x = self.b.ins().iadd_imm_s(x0, s.k as i64 * c.v);
            self.set(c.x, x);
        }
        self.group_or(&s, g, single);
        self.forget_run();
        Ok(())
    }

    /// The back-edge of a copy of loop `s`'s body: on to `cont` (the
    /// next copy) unless the loop ends here.
    fn copy_back_edge(&mut self, s: &Small, cont: Block) -> Result<(), String> {
        let op = self.mc.ops[s.i];
        let cond = if s.counted.is_some() || matches!(op, Op::Goto { .. }) {
            None
        } else if let Some((x, v, b, cc)) = inc_branch(&op) {
            let y = self.var(x);
            let y = self.b.ins().iadd_imm_s(y, i64::from(v));
            self.set(x, y);
            let lim = self.var(b);
            Some((self.b.ins().icmp(cc, y, lim), s.i + 2))
        } else {
            Some((self.branch_cond(op)?, s.i + 1))
        };
        match cond {
            None => {
                self.b.ins().jump(cont, &[]);
            }
            Some((c, out)) => {
                let exit = self.edge(s.i, out as u32)?;
                self.b.ins().brif(c, cont, &[], exit, &[]);
            }
        }
        Ok(())
    }
}
