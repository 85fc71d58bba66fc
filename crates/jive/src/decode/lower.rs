//! The lowering: a verified method's bytecode becomes the register form
//! ([`decode`]), with a virtual stack whose pending loads and constants
//! are folded into the ops that use them, and the fused ops of the
//! module's docs.

use std::collections::{BTreeMap, HashMap};

use crate::bytecode::{ArrOp, BinOp, Cond, Ins};
use crate::model::{Callee, Elem, JType, MethodDef, Model};
use crate::verify::Verified;

use super::divmagic::DivMagic;
use super::op::{Arg, MethodCode, Op, Slot, SwitchTable};
use super::peephole::rotate_and_fuse;
use super::validate::validate;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Src {
    S(Slot),
    K(i32),
}

/// The decoder's state for one method.
///
/// The virtual stack `vs` changes only through the methods below, which
/// keep indexes of its *pending* entries (those not in their own slot), so
/// that finding the entries to materialise costs time in proportion to the
/// entries found, not to the stack's depth: the decoder stays linear in
/// the code's size however deep the stack (a deep stack of pending loads
/// followed by many stores made it quadratic). The lists are lazy: an
/// entry listed may since have been materialised or popped, and is
/// checked when the list is used; each list entry is made by one push and
/// dropped at most once.
struct D {
    ops: Vec<Op>,
    offsets: Vec<u32>,
    vs: Vec<Src>,
    /// Depths whose entry may be pending; every pending entry is listed.
    pend: Vec<u32>,
    /// Per slot, depths of entries that may read it while pending; every
    /// pending entry reading a slot is listed under it.
    readers: BTreeMap<Slot, Vec<u32>>,
    /// Per slot, the exact number of pending entries reading it.
    nread: HashMap<Slot, u32>,
    nl: u16,
    scratch: u16,
    off: u32,
    block_start: usize,
    divs: Vec<DivMagic>,
    args: Vec<Arg>,
}

impl D {
    fn emit(&mut self, op: Op) {
        self.ops.push(op);
        self.offsets.push(self.off);
    }
    fn own(&self, d: usize) -> Slot {
        self.nl + d as u16
    }
    /// Whether entry `d` is pending (not in its own slot).
    fn pending(&self, d: usize) -> bool {
        self.vs[d] != Src::S(self.own(d))
    }
    /// Push an entry.
    fn push(&mut self, x: Src) {
        let d = self.vs.len();
        if x != Src::S(self.own(d)) {
            self.pend.push(d as u32);
            if let Src::S(s) = x {
                self.readers.entry(s).or_default().push(d as u32);
                *self.nread.entry(s).or_default() += 1;
            }
        }
        self.vs.push(x);
    }
    /// Entry `d` stops reading its source (it is popped or materialised).
    fn unread(&mut self, d: usize) {
        if let Src::S(s) = self.vs[d] {
            if s != self.own(d) {
                if let Some(n) = self.nread.get_mut(&s) {
                    *n = n.saturating_sub(1);
                }
            }
        }
    }
    /// Whether some entry reads slot `x` (pending, or in its own slot).
    fn reads(&self, x: Slot) -> bool {
        self.nread.get(&x).is_some_and(|&n| n > 0)
            || (x >= self.nl && self.vs.get((x - self.nl) as usize) == Some(&Src::S(x)))
    }
    /// Pop entries down to depth `n`.
    fn truncate(&mut self, n: usize) {
        while self.vs.len() > n {
            self.pop();
        }
    }
    /// At a block's start: `height` entries, each in its own slot.
    fn reset(&mut self, height: usize) {
        self.vs.clear();
        let nl = self.nl;
        self.vs.extend((0..height).map(|d| Src::S(nl + d as u16)));
        self.pend.clear();
        self.readers.clear();
        self.nread.clear();
    }
    fn mat(&mut self, d: usize) {
        let own = self.own(d);
        match self.vs[d] {
            Src::S(x) if x == own => return,
            Src::S(x) => self.emit(Op::Mov { d: own, s: x }),
            Src::K(v) => self.emit(Op::Const { d: own, v }),
        }
        self.unread(d);
        self.vs[d] = Src::S(own);
    }
    /// Materialise, in stack order, the entries at the depths `ds` (a
    /// lazy list) that are still there, pending, and satisfy `keep`.
    fn mat_listed(&mut self, mut ds: Vec<u32>, keep: impl Fn(&D, usize) -> bool) {
        ds.sort_unstable();
        ds.dedup();
        for d in ds {
            let d = d as usize;
            if d < self.vs.len() && self.pending(d) && keep(self, d) {
                self.mat(d);
            }
        }
    }
    fn mat_all(&mut self) {
        let ds = std::mem::take(&mut self.pend);
        self.mat_listed(ds, |_, _| true);
    }
    /// Materialise pending entries that read slot `x`, before it is written.
    fn before_write(&mut self, x: Slot) {
        let ds = self.readers.remove(&x).unwrap_or_default();
        if self.nread.get(&x).is_some_and(|&n| n > 0) {
            self.mat_listed(ds, |dc, d| dc.vs[d] == Src::S(x));
        }
    }
    /// Materialise pending entries below depth `base` that read a slot
    /// from `at` up (before a call's frame overwrites them).
    fn before_call(&mut self, at: Slot, base: usize) {
        let keys: Vec<Slot> = self.readers.range(at..).map(|(k, _)| *k).collect();
        let mut ds = Vec::new();
        for k in keys {
            ds.extend(self.readers.remove(&k).unwrap_or_default());
        }
        self.mat_listed(ds, |dc, d| {
            d < base && matches!(dc.vs[d], Src::S(x) if x >= at)
        });
    }
    fn pop(&mut self) -> Src {
        match self.vs.len().checked_sub(1) {
            Some(d) => {
                self.unread(d);
                self.vs.pop().unwrap_or(Src::K(0))
            }
            None => Src::K(0),
        }
    }
    /// Pop the top entry as a slot (materialising a constant).
    fn pop_slot(&mut self) -> Slot {
        let d = self.vs.len().saturating_sub(1);
        if !self.vs.is_empty() {
            if let Src::K(_) = self.vs[d] {
                self.mat(d);
            }
        }
        match self.pop() {
            Src::S(x) => x,
            Src::K(_) => self.own(d),
        }
    }
    /// Emit an op computing into the next stack slot and push it.
    fn push_op(&mut self, f: impl FnOnce(Slot) -> Op) {
        let d = self.own(self.vs.len());
        self.before_write(d);
        self.emit(f(d));
        self.push(Src::S(d));
    }
    /// The last op, if it belongs to the current basic block.
    fn last_in_block(&self) -> Option<Op> {
        if self.ops.len() > self.block_start {
            self.ops.last().copied()
        } else {
            None
        }
    }

    /// Replace the last op.
    fn replace_last(&mut self, op: Op) {
        if let Some(l) = self.ops.last_mut() {
            *l = op;
        }
    }

    /// `iadd` of slots `x` and `y` into the next slot, fused with the op
    /// that produced one of them when that op is the last of the block and
    /// its result is used nowhere else. Returns false if nothing fused.
    fn fuse_add(&mut self, x: Slot, y: Slot) -> bool {
        let n = self.vs.len();
        let (a_own, b_own) = (self.own(n), self.own(n + 1));
        if self.reads(a_own) || self.reads(b_own) {
            return false;
        }
        let Some(last) = self.last_in_block() else {
            return false;
        };
        let fused = match last {
            Op::GetF { d, f } if d == b_own && y == b_own && x != b_own => {
                self.ops.pop();
                self.offsets.pop();
                Op::AddF { d: a_own, a: x, f }
            }
            Op::GetF { d, f } if d == a_own && x == a_own && y != a_own => {
                self.ops.pop();
                self.offsets.pop();
                Op::AddF { d: a_own, a: y, f }
            }
            Op::Add { d, a, b } if d == a_own && x == a_own && y != a_own => {
                self.replace_last(Op::Add3 { d, a, b, c: y });
                self.push(Src::S(a_own));
                return true;
            }
            Op::Add3 { d, a, b, c } if d == a_own && x == a_own && y != a_own => {
                self.replace_last(Op::Add4 { d, a, b, c, e: y });
                self.push(Src::S(a_own));
                return true;
            }
            _ => return false,
        };
        self.emit(fused);
        self.push(Src::S(a_own));
        true
    }

    /// Store the popped top entry into local `x`.
    fn store(&mut self, x: Slot) {
        self.before_write(x);
        let depth = self.vs.len().saturating_sub(1);
        let own = self.own(depth);
        let src = self.pop();
        match src {
            Src::S(s) if s == own => {
                let aliased = self.reads(own);
                if !aliased && self.ops.len() > self.block_start {
                    if let Some(last) = self.ops.last_mut() {
                        if let Some(dst) = last.dest_mut() {
                            if *dst == own {
                                *dst = x;
                                return;
                            }
                        }
                    }
                }
                self.emit(Op::Mov { d: x, s })
            }
            Src::S(s) => self.emit(Op::Mov { d: x, s }),
            Src::K(v) => self.emit(Op::Const { d: x, v }),
        }
    }
}

fn fold(op: BinOp, a: i32, b: i32) -> Option<i32> {
    Some(match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        BinOp::Div => a.checked_div(b).or(if b == -1 { Some(a) } else { None })?,
        BinOp::Rem => {
            if b == 0 {
                return None;
            }
            a.wrapping_rem(b)
        }
        BinOp::And => a & b,
        BinOp::Or => a | b,
        BinOp::Xor => a ^ b,
        BinOp::Shl => a.wrapping_shl(b as u32 & 31),
        BinOp::Shr => a.wrapping_shr(b as u32 & 31),
        BinOp::Ushr => ((a as u32) >> (b as u32 & 31)) as i32,
    })
}

fn bin_rr(op: BinOp, d: Slot, a: Slot, b: Slot) -> Op {
    match op {
        BinOp::Add => Op::Add { d, a, b },
        BinOp::Sub => Op::Sub { d, a, b },
        BinOp::Mul => Op::Mul { d, a, b },
        BinOp::Div => Op::Div { d, a, b },
        BinOp::Rem => Op::Rem { d, a, b },
        BinOp::And => Op::And { d, a, b },
        BinOp::Or => Op::Or { d, a, b },
        BinOp::Xor => Op::Xor { d, a, b },
        BinOp::Shl => Op::Shl { d, a, b },
        BinOp::Shr => Op::Shr { d, a, b },
        BinOp::Ushr => Op::Ushr { d, a, b },
    }
}

/// Register-immediate form, if there is one for `op` and `v`.
fn bin_ri(op: BinOp, d: Slot, a: Slot, v: i32) -> Option<Op> {
    Some(match op {
        BinOp::Add => Op::AddI { d, a, v },
        BinOp::Sub => Op::AddI {
            d,
            a,
            v: v.wrapping_neg(),
        },
        BinOp::Mul => Op::MulI { d, a, v },
        BinOp::Div if v != 0 => Op::DivI { d, a, v },
        BinOp::Rem if v != 0 => Op::RemI { d, a, v },
        BinOp::And => Op::AndI { d, a, v },
        BinOp::Or => Op::OrI { d, a, v },
        BinOp::Xor => Op::XorI { d, a, v },
        BinOp::Shl => Op::ShlI { d, a, v: v & 31 },
        BinOp::Shr => Op::ShrI { d, a, v: v & 31 },
        BinOp::Ushr => Op::UshrI { d, a, v: v & 31 },
        _ => return None,
    })
}

fn branch_rr(c: Cond, a: Slot, b: Slot, t: u32) -> Op {
    match c {
        Cond::Eq => Op::IfEq { a, b, t },
        Cond::Ne => Op::IfNe { a, b, t },
        Cond::Lt => Op::IfLt { a, b, t },
        Cond::Ge => Op::IfGe { a, b, t },
        Cond::Gt => Op::IfGt { a, b, t },
        Cond::Le => Op::IfLe { a, b, t },
    }
}

fn branch_ri(c: Cond, a: Slot, v: i32, t: u32) -> Op {
    match c {
        Cond::Eq => Op::IfEqI { a, v, t },
        Cond::Ne => Op::IfNeI { a, v, t },
        Cond::Lt => Op::IfLtI { a, v, t },
        Cond::Ge => Op::IfGeI { a, v, t },
        Cond::Gt => Op::IfGtI { a, v, t },
        Cond::Le => Op::IfLeI { a, v, t },
    }
}

/// Decode a verified method. `used_natives` collects registry indices of
/// natives the class calls; ops refer to positions in that list.
pub fn decode(
    model: &Model<'_>,
    m: &MethodDef,
    code: &crate::classfile::CodeInfo,
    v: &Verified,
    used_natives: &mut Vec<usize>,
) -> Result<MethodCode, String> {
    let nl = code.max_locals;
    let max_stack = code.max_stack;
    let scratch = nl + max_stack;
    let frame_size = (scratch + 4).max(1);
    let known_this = !m.is_static && !v.local0_written;
    let mut dc = D {
        ops: Vec::with_capacity(v.insns.len()),
        offsets: Vec::with_capacity(v.insns.len()),
        vs: Vec::new(),
        pend: Vec::new(),
        readers: BTreeMap::new(),
        nread: HashMap::new(),
        nl,
        scratch,
        off: 0,
        block_start: 0,
        divs: Vec::new(),
        args: Vec::new(),
    };
    let mut label = vec![u32::MAX; v.insns.len()];
    let mut switches = Vec::new();
    let mut prev_falls = false;
    for (i, insn) in v.insns.iter().enumerate() {
        if !insn.reachable {
            prev_falls = false;
            continue;
        }
        dc.off = insn.offset;
        if insn.leader {
            if prev_falls {
                dc.mat_all();
            }
            label[i] = dc.ops.len() as u32;
            dc.block_start = dc.ops.len();
            dc.reset(insn.height as usize);
        }
        if dc.vs.len() != insn.height as usize {
            return Err(format!(
                "internal: decoder stack {} differs from verifier height {} at {}",
                dc.vs.len(),
                insn.height,
                insn.offset
            ));
        }
        let mut falls = true;
        match &insn.ins {
            Ins::Nop | Ins::CheckCast(_) => {}
            Ins::Const(c) => dc.push(Src::K(*c)),
            // A method name reaches its native as the method's index.
            Ins::MethodName(i) => dc.push(Src::K(*i as i32)),
            Ins::Null => dc.push(Src::K(0)),
            Ins::ILoad(x) | Ins::ALoad(x) => dc.push(Src::S(*x)),
            Ins::IStore(x) | Ins::AStore(x) => dc.store(*x),
            Ins::Inc(x, c) => {
                dc.before_write(*x);
                dc.emit(Op::Inc { x: *x, v: *c });
            }
            Ins::Bin(op) => {
                let b = dc.pop();
                let a = dc.pop();
                let d = dc.own(dc.vs.len());
                match (a, b) {
                    (Src::K(x), Src::K(y)) if fold(*op, x, y).is_some() => {
                        dc.push(Src::K(fold(*op, x, y).unwrap_or(0)));
                    }
                    (Src::S(x), Src::S(y)) => {
                        if !(*op == BinOp::Add && dc.fuse_add(x, y)) {
                            dc.push_op(|d| bin_rr(*op, d, x, y))
                        }
                    }
                    (Src::S(x), Src::K(y))
                        if matches!(op, BinOp::Div | BinOp::Rem)
                            && DivMagic::new(y).is_some()
                            && dc.divs.len() < u16::MAX as usize =>
                    {
                        let k = dc.divs.len() as u16;
                        if let Some(mg) = DivMagic::new(y) {
                            dc.divs.push(mg);
                        }
                        let div = *op == BinOp::Div;
                        dc.push_op(|d| {
                            if div {
                                Op::DivM { d, a: x, k }
                            } else {
                                Op::RemM { d, a: x, k }
                            }
                        })
                    }
                    (Src::S(x), Src::K(y)) if bin_ri(*op, d, x, y).is_some() => {
                        dc.push_op(|d| bin_ri(*op, d, x, y).unwrap_or(Op::RetVoid))
                    }
                    (Src::K(x), Src::S(y))
                        if matches!(
                            op,
                            BinOp::Add | BinOp::Mul | BinOp::And | BinOp::Or | BinOp::Xor
                        ) =>
                    {
                        dc.push_op(|d| bin_ri(*op, d, y, x).unwrap_or(Op::RetVoid))
                    }
                    (Src::K(x), Src::S(y)) if *op == BinOp::Sub => {
                        dc.push_op(|d| Op::SubIR { d, v: x, b: y })
                    }
                    (a, b) => {
                        // Materialise both operands in their own slots.
                        dc.push(a);
                        dc.push(b);
                        let y = dc.pop_slot();
                        let x = dc.pop_slot();
                        dc.push_op(|d| bin_rr(*op, d, x, y));
                    }
                }
            }
            Ins::Neg | Ins::I2b | Ins::I2s => match dc.pop() {
                Src::K(c) => dc.push(Src::K(match insn.ins {
                    Ins::Neg => c.wrapping_neg(),
                    Ins::I2b => c as i8 as i32,
                    _ => c as i16 as i32,
                })),
                Src::S(s) => dc.push_op(|d| match insn.ins {
                    Ins::Neg => Op::Neg { d, s },
                    Ins::I2b => Op::I2b { d, s },
                    _ => Op::I2s { d, s },
                }),
            },
            Ins::Pop => {
                dc.pop();
            }
            Ins::Pop2 => {
                dc.pop();
                dc.pop();
            }
            Ins::Dup => {
                let t = *dc.vs.last().unwrap_or(&Src::K(0));
                dc.push(t);
            }
            Ins::Dup2 => {
                let n = dc.vs.len();
                if n >= 2 {
                    let (a, b) = (dc.vs[n - 2], dc.vs[n - 1]);
                    dc.push(a);
                    dc.push(b);
                }
            }
            Ins::DupX1 | Ins::DupX2 | Ins::Dup2X1 | Ins::Dup2X2 | Ins::Swap => {
                // Popped entries, deepest first, and the result as indices
                // into them.
                let (k, perm): (usize, &[usize]) = match insn.ins {
                    Ins::DupX1 => (2, &[1, 0, 1]),
                    Ins::DupX2 => (3, &[2, 0, 1, 2]),
                    Ins::Dup2X1 => (3, &[1, 2, 0, 1, 2]),
                    Ins::Dup2X2 => (4, &[2, 3, 0, 1, 2, 3]),
                    _ => (2, &[1, 0]),
                };
                dc.mat_all();
                let base = dc.vs.len() - k;
                for j in 0..k {
                    let s = dc.own(base + j);
                    dc.emit(Op::Mov {
                        d: dc.scratch + j as u16,
                        s,
                    });
                }
                dc.truncate(base);
                for &j in perm {
                    dc.push(Src::S(dc.scratch + j as u16));
                }
            }
            Ins::If(c, t) => {
                let a = dc.pop_slot();
                dc.mat_all();
                dc.emit(branch_ri(*c, a, 0, *t));
            }
            Ins::IfNull(is_null, t) => {
                let a = dc.pop_slot();
                dc.mat_all();
                let c = if *is_null { Cond::Eq } else { Cond::Ne };
                dc.emit(branch_ri(c, a, 0, *t));
            }
            Ins::IfCmp(_, t) | Ins::IfACmp(_, t) => {
                let c = match insn.ins {
                    Ins::IfCmp(c, _) => c,
                    Ins::IfACmp(true, _) => Cond::Eq,
                    _ => Cond::Ne,
                };
                let b = dc.pop();
                let a = dc.pop();
                match (a, b) {
                    (Src::S(x), Src::S(y)) => {
                        dc.mat_all();
                        dc.emit(branch_rr(c, x, y, *t));
                    }
                    (Src::S(x), Src::K(y)) => {
                        dc.mat_all();
                        dc.emit(branch_ri(c, x, y, *t));
                    }
                    (Src::K(x), Src::S(y)) => {
                        dc.mat_all();
                        dc.emit(branch_ri(c.swap(), y, x, *t));
                    }
                    (a, Src::K(y)) => {
                        dc.push(a);
                        let x = dc.pop_slot();
                        dc.mat_all();
                        dc.emit(branch_ri(c, x, y, *t));
                    }
                }
            }
            Ins::Goto(t) => {
                dc.mat_all();
                dc.emit(Op::Goto { t: *t });
                falls = false;
            }
            Ins::Switch(sw) => {
                let s = dc.pop_slot();
                dc.mat_all();
                if switches.len() >= u16::MAX as usize {
                    return Err("too many switch instructions".into());
                }
                dc.emit(Op::Switch {
                    s,
                    tab: switches.len() as u16,
                });
                switches.push(SwitchTable {
                    dense: sw.dense,
                    keys: sw.keys.clone(),
                    targets: sw.targets.clone(),
                    default: sw.default,
                });
                falls = false;
            }
            Ins::IReturn | Ins::AReturn => {
                let r = m.sig.ret.unwrap_or(JType::Int);
                match dc.pop() {
                    Src::K(c) => dc.emit(Op::RetK {
                        v: match r {
                            JType::Byte => c as i8 as i32,
                            JType::Short => c as i16 as i32,
                            JType::Bool => c & 1,
                            _ => c,
                        },
                    }),
                    Src::S(s) => dc.emit(match r {
                        JType::Byte => Op::RetB { s },
                        JType::Short => Op::RetS { s },
                        JType::Bool => Op::RetZ { s },
                        _ => Op::Ret { s },
                    }),
                }
                falls = false;
            }
            Ins::Return => {
                dc.emit(Op::RetVoid);
                falls = false;
            }
            Ins::GetStatic(f) => dc.push_op(|d| Op::GetF { d, f: *f }),
            Ins::GetField(f) => {
                let obj = dc.pop();
                null_check(&mut dc, obj, known_this);
                dc.push_op(|d| Op::GetF { d, f: *f });
            }
            Ins::PutStatic(f) | Ins::PutField(f) => {
                let s = dc.pop_slot();
                if let Ins::PutField(_) = insn.ins {
                    let obj = dc.pop();
                    null_check(&mut dc, obj, known_this);
                }
                let f = *f;
                dc.emit(match model.fields[f as usize].ty {
                    JType::Byte => Op::PutFB { f, s },
                    JType::Short => Op::PutFS { f, s },
                    JType::Bool => Op::PutFZ { f, s },
                    _ => Op::PutF { f, s },
                });
            }
            Ins::ArrLoad(op) if matches!(dc.vs.last(), Some(Src::K(_))) && *op != ArrOp::Short => {
                let k = match dc.pop() {
                    Src::K(k) => k,
                    Src::S(_) => 0,
                };
                let a = dc.pop_slot();
                dc.push_op(|d| match op {
                    ArrOp::Int => Op::IaLoadK { d, a, k },
                    _ => Op::BaLoadK { d, a, k },
                });
            }
            Ins::ArrLoad(op) => {
                let i = dc.pop_slot();
                let a = dc.pop_slot();
                dc.push_op(|d| match op {
                    ArrOp::Int => Op::IaLoad { d, a, i },
                    ArrOp::ByteBool => Op::BaLoad { d, a, i },
                    ArrOp::Short => Op::SaLoad { d, a, i },
                });
            }
            Ins::ArrStore(op)
                if dc.vs.len() >= 2
                    && matches!(dc.vs[dc.vs.len() - 2], Src::K(_))
                    && (*op == ArrOp::Int
                        || (*op == ArrOp::ByteBool && insn.arr != Some(Elem::Bool))) =>
            {
                let s = dc.pop_slot();
                let k = match dc.pop() {
                    Src::K(k) => k,
                    Src::S(_) => 0,
                };
                let a = dc.pop_slot();
                dc.emit(match op {
                    ArrOp::Int => Op::IaStoreK { a, k, s },
                    _ => Op::BaStoreK { a, k, s },
                });
            }
            Ins::ArrStore(op) => {
                let s = dc.pop_slot();
                let i = dc.pop_slot();
                let a = dc.pop_slot();
                dc.emit(match (op, insn.arr) {
                    (ArrOp::Int, _) => Op::IaStore { a, i, s },
                    (ArrOp::ByteBool, Some(Elem::Bool)) => Op::ZaStore { a, i, s },
                    (ArrOp::ByteBool, _) => Op::BaStore { a, i, s },
                    (ArrOp::Short, _) => Op::SaStore { a, i, s },
                });
            }
            Ins::ArrayLength => {
                let a = dc.pop_slot();
                dc.push_op(|d| Op::ArrLen { d, a });
            }
            Ins::NewArray(e) => {
                let n = dc.pop_slot();
                let e = *e;
                dc.push_op(|d| Op::NewArray { d, n, e });
            }
            Ins::Invoke(_, Callee::ObjectInit) => {
                dc.pop();
            }
            Ins::Invoke(_, callee) => {
                let (argc, ret, recv) = match callee {
                    Callee::Own(i) => {
                        let md = &model.methods[*i as usize];
                        (
                            md.sig.params.len() + usize::from(!md.is_static),
                            md.sig.ret.is_some(),
                            !md.is_static,
                        )
                    }
                    Callee::Native(i) => {
                        let sig = crate::model::parse_native_descriptor(&model.natives[*i].3)?.0;
                        (sig.params.len(), sig.ret.is_some(), false)
                    }
                    Callee::ObjectInit => (1, false, false),
                };
                let depth = dc.vs.len();
                let base = depth - argc;
                let at = dc.own(base);
                // The callee's frame overwrites slots from `at` up: pending
                // entries below that read them (scratch) are materialised.
                dc.before_call(at, base);
                if let Callee::Native(i) = callee {
                    // The native reads its arguments where they are: no
                    // moves into consecutive slots. A field read emitted
                    // just before, into an argument's slot that nothing
                    // else reads, is done by the call itself.
                    let mut args: Vec<Arg> = dc.vs[base..depth]
                        .iter()
                        .map(|x| match *x {
                            Src::S(s) => Arg::S(s),
                            Src::K(v) => Arg::K(v),
                        })
                        .collect();
                    while let Some(Op::GetF { d: s, f }) = dc.last_in_block() {
                        let uses = args.iter().filter(|a| **a == Arg::S(s)).count();
                        // No entry below `base` reads `s` (>= `at`): those
                        // that did were materialised above.
                        if s < at || uses != 1 {
                            break;
                        }
                        dc.ops.pop();
                        dc.offsets.pop();
                        if let Some(a) = args.iter_mut().find(|a| **a == Arg::S(s)) {
                            *a = Arg::F(f);
                        }
                    }
                    let n = match used_natives.iter().position(|u| u == i) {
                        Some(p) => p,
                        None => {
                            used_natives.push(*i);
                            used_natives.len() - 1
                        }
                    };
                    let k = u16::try_from(dc.args.len())
                        .map_err(|_| "too many native call arguments in one method".to_string())?;
                    dc.args.extend(args);
                    dc.truncate(base);
                    dc.emit(Op::CallNative {
                        n: n as u16,
                        d: at,
                        k,
                        argc: argc as u16,
                    });
                } else {
                    if recv {
                        let r = dc.vs[base];
                        let skip = known_this && r == Src::S(0);
                        dc.mat(base);
                        if !skip {
                            dc.emit(Op::NullCheck { s: at });
                        }
                    }
                    for d in base..depth {
                        dc.mat(d);
                    }
                    dc.truncate(base);
                    if let Callee::Own(i) = callee {
                        dc.emit(Op::Call { m: *i, at });
                    }
                }
                if ret {
                    dc.push(Src::S(at));
                }
            }
        }
        prev_falls = falls;
    }
    // Patch branch targets from instruction indices to op indices.
    let fixt = |t: u32| -> Result<u32, String> {
        match label.get(t as usize) {
            Some(&l) if l != u32::MAX => Ok(l),
            _ => Err(format!("internal: branch to unlabelled instruction {t}")),
        }
    };
    for op in dc.ops.iter_mut() {
        if let Some(t) = op.target_mut() {
            *t = fixt(*t)?;
        }
    }
    for sw in switches.iter_mut() {
        sw.default = fixt(sw.default)?;
        for t in sw.targets.iter_mut() {
            *t = fixt(*t)?;
        }
    }
    rotate_and_fuse(&mut dc.ops);
    let nargs = m.sig.params.len() as u16 + u16::from(!m.is_static);
    let mc = MethodCode {
        ops: dc.ops,
        offsets: dc.offsets,
        switches,
        divs: dc.divs,
        args: dc.args,
        frame_size,
        nargs,
        name: format!("{}{}", m.name, m.descriptor),
        is_static: m.is_static,
        int_params: m.sig.params.iter().all(|p| *p == JType::Int),
        returns: m.sig.ret.is_some(),
        internal: m.name == "<init>" || m.name == "<clinit>",
    };
    validate(&mc)?;
    Ok(mc)
}

/// Emit a null check for a field access through `obj`, unless it is
/// provably `this`.
fn null_check(dc: &mut D, obj: Src, known_this: bool) {
    match obj {
        Src::S(0) if known_this => {}
        Src::S(s) => dc.emit(Op::NullCheck { s }),
        Src::K(_) => {
            // Only `null` is a reference constant: use a scratch slot.
            let s = dc.scratch + 3;
            dc.before_write(s);
            dc.emit(Op::Const { d: s, v: 0 });
            dc.emit(Op::NullCheck { s });
        }
    }
}
