//! The translator: one method's decoded ops to Cranelift IR, a block
//! per op index and a variable per frame slot, every check the
//! interpreter makes made inline or by a helper.

use super::*;

mod arith;
mod arrays;
mod cache;
mod fields;
mod fuel;
mod inline;
mod native;
mod unroll;

pub(super) use cache::Plan;
use cache::{may_store, CacheVars, Index};
pub(super) use inline::inlinable;
use unroll::{inc_branch, Small};

/// A method's machine code, compiled but not yet defined in the module.
pub(super) struct Body {
    pub(super) bytes: Vec<u8>,
    pub(super) align: u64,
    pub(super) relocs: Vec<ModuleReloc>,
}

pub(super) fn body_sig(module: &JITModule, nargs: u16) -> Signature {
    let mut s = module.make_signature();
    s.params
        .push(AbiParam::new(module.target_config().pointer_type()));
    for _ in 0..nargs {
        s.params.push(AbiParam::new(types::I32));
    }
    s.returns.push(AbiParam::new(types::I64));
    s
}

pub(super) fn tramp_sig(module: &JITModule) -> Signature {
    let p = module.target_config().pointer_type();
    let mut s = module.make_signature();
    s.params.push(AbiParam::new(p));
    s.params.push(AbiParam::new(p));
    s.returns.push(AbiParam::new(types::I64));
    s
}

/// The ops control may go to from op `i` of `mc`.
fn successors(mc: &MethodCode, i: usize) -> Vec<u32> {
    let mut v = Vec::new();
    let op = &mc.ops[i];
    v.extend(op.target());
    match *op {
        // A fused increment-and-branch also goes on two ops down.
        Op::IncLt { .. }
        | Op::IncLe { .. }
        | Op::IncNe { .. }
        | Op::IncGt { .. }
        | Op::IncGe { .. } => v.push(i as u32 + 2),
        Op::Switch { tab, .. } => {
            if let Some(st) = mc.switches.get(tab as usize) {
                v.push(st.default);
                v.extend_from_slice(&st.targets);
            }
        }
        _ => {}
    }
    if !op.is_terminator() {
        v.push(i as u32 + 1);
    }
    v
}

/// What [`Gen::byte_range`] found (Cranelift values).
struct ByteRange {
    /// Every check but the liveness of the array held.
    ok: Value,
    /// The address of `a[aoff]`.
    at: Value,
    /// The length, as an `i64`.
    n: Value,
    /// The fuel left after the call's charge.
    left: Value,
}

/// Code generation for one method.
pub(super) struct Gen<'a, 'f, H> {
    pub(super) b: FunctionBuilder<'f>,
    pub(super) cls: &'a ClassInner<H>,
    pub(super) m: usize,
    pub(super) mc: &'a MethodCode,
    pub(super) ptr: types::Type,
    pub(super) vars: Vec<Variable>,
    pub(super) blocks: Vec<Block>,
    pub(super) ctx: Option<Value>,
    pub(super) fields: Option<Value>,
    pub(super) fault_ret: Option<Block>,
    /// The one stack slot every native call of the method passes its
    /// arguments in (sized for the call with the most).
    pub(super) args_slot: Option<StackSlot>,
    /// Per op: whether its block is sealed (no branch to it may follow).
    pub(super) sealed: Vec<bool>,
    /// Blocks made inside the op being emitted: all their predecessors
    /// are in it, so they are sealed after it.
    pub(super) local: Vec<Block>,
    /// Per method of the class: whether it may allocate
    /// ([`allocating`]), which makes its frame a root of collections.
    pub(super) alloc: &'a [bool],
    /// Per method of the class: whether its calls are compiled into its
    /// callers ([`inline::inlinable`] and not kept calls by the
    /// [`CompileOptions`]).
    pub(super) inline: &'a [bool],
    /// Which array slots' entries are cached where ([`Plan`]).
    pub(super) plan: Plan,
    /// Per cache of the plan, its variables.
    pub(super) cvars: Vec<CacheVars>,
    /// Edge blocks the op being emitted made: (block, caches it reads,
    /// block it jumps to).
    pub(super) edges: Vec<(Block, u64, Block)>,
    /// Per cache: a length its array is known to exceed, from accesses
    /// at constant indices that passed their check earlier in the same
    /// straight run of ops ([`Plan::straight`]) since the cache was read.
    pub(super) proven: Vec<u32>,
    /// Per cache, indices (as [`Index`]) an access through it checked
    /// earlier in the same straight run, under the same terms as
    /// `proven`: a later access there at the same index needs no check.
    pub(super) checked: Vec<(usize, Index)>,
    /// Elements read or written earlier in the same straight run, with
    /// nothing since that may store into them: (cache, index, access
    /// kind, value).
    pub(super) known: Vec<(usize, Index, i64, Value)>,
    /// Fields read or written earlier in the same straight run (copies of
    /// an unrolled loop's body included), with nothing since that may
    /// store into them (a call of a method not compiled into this one:
    /// [`Gen::forget_stored`]) or a read of a volatile field: (field,
    /// value). Volatile fields are not kept.
    pub(super) fields_known: Vec<(u16, Value)>,
    /// Values the method computed as another value plus a constant:
    /// value -> (the other value's root, the sum of the constants), so
    /// that `a[i - 1]` after `i++` names `a[i]` from before it.
    pub(super) affine: std::collections::HashMap<Value, (Value, i32)>,
    /// The fuel register in a variable, in a method with a loop (see
    /// [`Gen::fuel`]); `None` where the method charges `Ctx::fuel` in
    /// memory.
    pub(super) fuel_var: Option<Variable>,
    /// The stubs that keep every register ([`Stubs`]), and their
    /// references in this method (`spent`, `arrlen`).
    pub(super) stubs: Stubs,
    pub(super) stub_refs: Option<(FuncRef, FuncRef)>,
    /// Values the method computed as a sum of one value with itself:
    /// value -> (the value, how many times), so that a longer such sum
    /// is one multiplication ([`Gen::add`]).
    pub(super) sums: std::collections::HashMap<Value, (Value, i64)>,
    /// Per op: the small loop whose back-edge it is ([`unroll`]), in a
    /// method that keeps the fuel in a variable.
    pub(super) small: Vec<Option<Small>>,
    /// While a copy of a small loop's body is emitted: its first op and
    /// the blocks of its ops, which branches inside it go to.
    pub(super) copy: Option<(usize, Vec<Block>)>,
    /// A group the op being emitted branches to, emitted after it: the
    /// loop, the group's first block, the loop's header.
    pub(super) pending: Option<(Small, Block, Block)>,
    /// Small loops unrolled so far.
    pub(super) groups: usize,
    /// Calls compiled into the method so far ([`inline`]).
    pub(super) inlined_calls: usize,
}

impl<H> Gen<'_, '_, H> {
    fn site(&self, i: usize) -> i64 {
        ((self.m as i64) << 32) | i as i64
    }
    fn ctx(&self) -> Value {
        self.ctx.expect("set at entry")
    }
    fn var(&mut self, s: u16) -> Value {
        self.b.use_var(self.vars[s as usize])
    }
    fn set(&mut self, s: u16, v: Value) {
        self.b.def_var(self.vars[s as usize], v);
    }
    /// A new block inside the op being emitted (sealed after it).
    fn block(&mut self) -> Block {
        let b = self.b.create_block();
        self.local.push(b);
        b
    }
    fn k(&mut self, v: i64) -> Value {
        self.b.ins().iconst(types::I64, v)
    }
    fn k32(&mut self, v: i32) -> Value {
        self.b.ins().iconst(types::I32, v as i64)
    }

    /// Call helper `f` (an `extern "C"` function) with `args`, returning
    /// its `i64` result.
    fn helper(&mut self, f: *const u8, params: &[types::Type], args: &[Value]) -> Value {
        let mut sig = Signature::new(self.b.func.signature.call_conv);
        for &p in params {
            sig.params.push(AbiParam::new(p));
        }
        sig.returns.push(AbiParam::new(types::I64));
        let sr = self.b.import_signature(sig);
        let fp = self.b.ins().iconst(self.ptr, f as i64);
        self.fuel_out();
        let call = self.b.ins().call_indirect(sr, fp, args);
        let r = self.b.inst_results(call)[0];
        self.fuel_in();
        r
    }

    /// Branch to the fault return if `r` is [`FAULT`].
    fn check(&mut self, r: Value) {
        let bad = self.b.ins().icmp_imm_s(IntCC::Equal, r, FAULT);
        let ok = self.block();
        let fr = self.fault_ret.expect("set at entry");
        self.b.ins().brif(bad, fr, &[], ok, &[]);
        self.b.switch_to_block(ok);
    }

    /// Record a fault of `kind` at op `i` and return [`FAULT`].
    fn fault_if(&mut self, cond: Value, kind: i64, i: usize) {
        let bad = self.block();
        let ok = self.block();
        self.b.ins().brif(cond, bad, &[], ok, &[]);
        self.b.switch_to_block(bad);
        let (c, k, s) = (self.ctx(), self.k(kind), self.k(self.site(i)));
        let f = h_fault::<H> as extern "C" fn(*mut Ctx, i64, i64) -> i64 as *const u8;
        let r = self.helper(f, &[self.ptr, types::I64, types::I64], &[c, k, s]);
        self.b.ins().return_(&[r]);
        self.b.switch_to_block(ok);
    }

    /// Jump from op `i` to op `t`, charging a backward jump as the
    /// interpreter does (the ops from `t` to `i`).
    fn goto(&mut self, i: usize, t: u32) -> Result<(), String> {
        let tb = self.edge(i, t)?;
        if (t as usize) <= i {
            self.charge((i + 1 - t as usize) as i64, i);
            if let Some(s) = self.small_at(i, t) {
                self.group_at_back_edge(s, tb);
                return Ok(());
            }
        }
        self.b.ins().jump(tb, &[]);
        Ok(())
    }

    fn target(&self, t: u32) -> Result<Block, String> {
        if let Some((lo, blocks)) = &self.copy {
            if let Some(&b) = (t as usize).checked_sub(*lo).and_then(|o| blocks.get(o)) {
                return Ok(b);
            }
        }
        if self.sealed.get(t as usize) == Some(&true) {
            return Err(format!(
                "internal: branch to op {t} of {} after its block was sealed",
                self.mc.name
            ));
        }
        self.blocks
            .get(t as usize)
            .copied()
            .ok_or_else(|| format!("branch target {t} past the end of {}", self.mc.name))
    }

    /// The condition under which `op`, a conditional branch that is not
    /// a fused increment, is taken.
    fn branch_cond(&mut self, op: Op) -> Result<Value, String> {
        use IntCC::*;
        let (cc, a, y) = match op {
            Op::IfEq { a, b, .. } => (Equal, a, Err(b)),
            Op::IfNe { a, b, .. } => (NotEqual, a, Err(b)),
            Op::IfLt { a, b, .. } => (SignedLessThan, a, Err(b)),
            Op::IfGe { a, b, .. } => (SignedGreaterThanOrEqual, a, Err(b)),
            Op::IfGt { a, b, .. } => (SignedGreaterThan, a, Err(b)),
            Op::IfLe { a, b, .. } => (SignedLessThanOrEqual, a, Err(b)),
            Op::IfEqI { a, v, .. } => (Equal, a, Ok(v)),
            Op::IfNeI { a, v, .. } => (NotEqual, a, Ok(v)),
            Op::IfLtI { a, v, .. } => (SignedLessThan, a, Ok(v)),
            Op::IfGeI { a, v, .. } => (SignedGreaterThanOrEqual, a, Ok(v)),
            Op::IfGtI { a, v, .. } => (SignedGreaterThan, a, Ok(v)),
            Op::IfLeI { a, v, .. } => (SignedLessThanOrEqual, a, Ok(v)),
            _ => return Err(format!("internal: {op:?} is not a conditional branch")),
        };
        let x = self.var(a);
        Ok(match y {
            Err(b) => {
                let y = self.var(b);
                self.b.ins().icmp(cc, x, y)
            }
            Ok(v) => self.b.ins().icmp_imm_s(cc, x, i64::from(v)),
        })
    }

    /// `if cond goto t else goto next`, from op `i`.
    fn branch(&mut self, cond: Value, i: usize, t: u32, next: usize) -> Result<(), String> {
        let taken = self.block();
        let nb = self.edge(i, next as u32)?;
        self.b.ins().brif(cond, taken, &[], nb, &[]);
        self.b.switch_to_block(taken);
        self.goto(i, t)
    }

    pub(super) fn method<M: Module>(
        &mut self,
        module: &mut M,
        bodies: &[Option<FuncId>],
    ) -> Result<(), String> {
        let mc = self.mc;
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        self.b.seal_block(entry);
        let params = self.b.block_params(entry).to_vec();
        self.ctx = Some(params[0]);
        let c = self.ctx();
        self.stub_refs = Some((
            module.declare_func_in_func(self.stubs.spent, self.b.func),
            module.declare_func_in_func(self.stubs.arrlen, self.b.func),
        ));

        // The machine-stack check, before anything is stored in the frame:
        // a frame below the invocation's limit returns at once, calling
        // nothing (see `Ctx::overflow`).
        let fl = MemFlagsData::trusted();
        let sp = self.b.ins().get_stack_pointer(self.ptr);
        let lim = self.b.ins().load(self.ptr, fl, c, CTX_STACK_LIMIT);
        let low = self.b.ins().icmp(IntCC::UnsignedLessThan, sp, lim);
        let over = self.b.create_block();
        let body = self.b.create_block();
        self.b.ins().brif(low, over, &[], body, &[]);
        self.b.set_cold_block(over);
        self.b.switch_to_block(over);
        self.b.seal_block(over);
        let site = self.k(self.site(0) | OVERFLOW_FLAG);
        self.b.ins().store(fl, site, c, CTX_OVERFLOW);
        let f = self.k(FAULT);
        self.b.ins().return_(&[f]);
        self.b.switch_to_block(body);
        self.b.seal_block(body);
        // A method with a loop keeps the fuel register in a variable,
        // unless it calls compiled methods (other than those compiled
        // into it, `inline`): around each call the variable
        // is stored and loaded again, and the register it takes across
        // the loop is one the values live across the calls need.
        let looped = (0..mc.ops.len()).any(|i| successors(mc, i).iter().any(|&t| t as usize <= i));
        let calls = mc
            .ops
            .iter()
            .any(|op| matches!(*op, Op::Call { m, .. } if !self.inline[m as usize]));
        if looped && !calls {
            let v = self.b.declare_var(types::I64);
            let f = self.b.ins().load(types::I64, fl, c, CTX_FUEL);
            self.b.def_var(v, f);
            self.fuel_var = Some(v);
            self.small = unroll::small_loops(mc);
        }

        // Slots other than the arguments are never read before they are
        // written (the verifier's initialised-locals rule), so they get no
        // initial definition.
        for s in 0..mc.frame_size as usize {
            let v = self.b.declare_var(types::I32);
            self.vars.push(v);
            if s < mc.nargs as usize {
                if let Some(&p) = params.get(1 + s) {
                    self.b.def_var(v, p);
                }
            }
        }
        self.declare_caches();
        let argc = mc
            .ops
            .iter()
            .map(|op| match *op {
                Op::CallNative { argc, .. } => argc as u32,
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        if mc.ops.iter().any(|op| matches!(op, Op::CallNative { .. })) {
            self.args_slot = Some(self.b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                4 * argc.max(1),
                2,
            )));
        }
        self.fields = Some(self.b.ins().load(self.ptr, fl, c, CTX_FIELDS));
        let fault_ret = self.b.create_block();
        self.fault_ret = Some(fault_ret);
        if self.alloc[self.m] {
            self.reserve();
        }
        self.blocks = (0..mc.ops.len()).map(|_| self.b.create_block()).collect();
        self.sealed = vec![false; mc.ops.len()];
        let first = self.target(0)?;
        let set = self.plan.at_entry();
        self.lookups(set);
        self.b.ins().jump(first, &[]);

        // Each op's block is sealed as soon as every branch to it has been
        // emitted, so that the SSA construction never carries a slot
        // through a chain of unfinished blocks (which made its cost grow
        // with the square of the method's size).
        let mut last = vec![0usize; mc.ops.len()];
        for i in 0..mc.ops.len() {
            for t in successors(mc, i) {
                if let Some(l) = last.get_mut(t as usize) {
                    *l = (*l).max(i + 1);
                }
            }
        }
        // A small loop's copies, emitted with its back-edge, branch to
        // where its body goes out of it.
        for s in self.small.iter().flatten() {
            for u in unroll::exits(mc, s) {
                if let Some(l) = last.get_mut(u) {
                    *l = (*l).max(s.i + 1);
                }
            }
        }
        let mut seal_after: Vec<Vec<usize>> = vec![Vec::new(); mc.ops.len() + 1];
        for (t, &l) in last.iter().enumerate() {
            seal_after[l].push(t);
        }
        self.seal(&seal_after[0]);
        for i in 0..mc.ops.len() {
            let blk = self.blocks[i];
            self.b.switch_to_block(blk);
            if !self.plan.straight(i) {
                self.forget_run();
            }
            self.forget_stored(&mc.ops[i]);
            if self.op(i, module, bodies)? {
                let next = self.edge(i, i as u32 + 1)?;
                self.b.ins().jump(next, &[]);
            }
            self.unrolled(module, bodies)?;
            self.fill_edges();
            for b in std::mem::take(&mut self.local) {
                self.b.seal_block(b);
            }
            self.seal(&seal_after[i + 1]);
        }

        self.b.switch_to_block(fault_ret);
        let f = self.k(FAULT);
        self.b.ins().return_(&[f]);
        self.b.seal_all_blocks();
        Ok(())
    }

    /// On entry to a method that may allocate: make the spill stack hold
    /// this frame (`Ctx::base` plus its slots), as the interpreter makes
    /// its slot stack hold every frame it enters.
    fn reserve(&mut self) {
        let (c, fl) = (self.ctx(), MemFlagsData::trusted());
        let base = self.b.ins().load(types::I64, fl, c, CTX_BASE);
        let top = self.b.ins().iadd_imm_s(base, i64::from(self.mc.frame_size));
        let len = self.b.ins().load(types::I64, fl, c, CTX_SPILL_LEN);
        let short = self.b.ins().icmp(IntCC::SignedGreaterThan, top, len);
        let grow = self.b.create_block();
        let ok = self.b.create_block();
        self.b.ins().brif(short, grow, &[], ok, &[]);
        self.b.set_cold_block(grow);
        self.b.switch_to_block(grow);
        self.b.seal_block(grow);
        let h = h_reserve::<H> as extern "C" fn(*mut Ctx, i64, i64) -> i64 as *const u8;
        let s = self.k(self.site(0));
        let r = self.helper(h, &[self.ptr, types::I64, types::I64], &[c, top, s]);
        let bad = self.b.ins().icmp_imm_s(IntCC::Equal, r, FAULT);
        let fr = self.fault_ret.expect("set before");
        self.b.ins().brif(bad, fr, &[], ok, &[]);
        self.b.switch_to_block(ok);
        self.b.seal_block(ok);
    }

    /// Write the frame's roots at op `i` (an allocation or a call that
    /// may allocate) to its place in the spill stack (from `base`, the
    /// frame's `Ctx::base`), where a collection finds them: the slots the
    /// method wrote, as the interpreter scans them (`decode::roots`), and
    /// the site, which names them to the collector. Handles do not move
    /// (the collector frees, never compacts), so nothing is read back.
    fn spill(&mut self, i: usize, base: Value) -> Result<(), String> {
        let cls = self.cls;
        let mask = cls
            .masks(self.m)
            .and_then(|k| k.at(i))
            .ok_or_else(|| format!("internal: no roots at op {i} of {}", self.mc.name))?;
        let (c, fl) = (self.ctx(), MemFlagsData::trusted());
        let p = self.b.ins().load(self.ptr, fl, c, CTX_SPILL);
        let off = self.b.ins().ishl_imm_u(base, 2);
        let at = self.b.ins().iadd(p, off);
        for s in 0..self.mc.frame_size {
            if SlotMasks::has(mask, s as usize) {
                let v = self.var(s);
                self.b.ins().store(fl, v, at, 4 * i32::from(s));
            }
        }
        // Method and op index in 16 bits each (methods are numbered by
        // `u16`s, and a compiled method has at most `MAX_METHOD_OPS` ops).
        let (Ok(m16), Ok(i16)) = (u16::try_from(self.m), u16::try_from(i)) else {
            return Err(format!("{}: site {i} past 16 bits", self.mc.name));
        };
        let p = self.b.ins().load(self.ptr, fl, c, CTX_SITES);
        let off = self.b.ins().ishl_imm_u(base, 2);
        let at = self.b.ins().iadd(p, off);
        let site = self.k32((u32::from(m16) << 16 | u32::from(i16)) as i32);
        self.b.ins().store(fl, site, at, 0);
        Ok(())
    }

    /// Seal the blocks of ops `ts`.
    fn seal(&mut self, ts: &[usize]) {
        for &t in ts {
            self.b.seal_block(self.blocks[t]);
            self.sealed[t] = true;
        }
    }

    /// The value a return op `op` gives its caller (the 64-bit result
    /// of a compiled method, never [`FAULT`]); 0 for `RetVoid` and ops
    /// that do not return.
    fn result(&mut self, op: Op) -> Value {
        let (x, ty) = match op {
            Op::Ret { s } => (self.var(s), None),
            Op::RetB { s } => (self.var(s), Some(types::I8)),
            Op::RetS { s } => (self.var(s), Some(types::I16)),
            Op::RetZ { s } => {
                let x = self.var(s);
                (self.b.ins().band_imm_s(x, 1), None)
            }
            Op::RetK { v } => return self.k(i64::from(v)),
            _ => return self.k(0),
        };
        let x = match ty {
            Some(ty) => self.b.ins().ireduce(ty, x),
            None => x,
        };
        self.b.ins().sextend(types::I64, x)
    }

    /// Emit op `i`; true if it falls through to op `i + 1`.
    fn op<M: Module>(
        &mut self,
        i: usize,
        module: &mut M,
        bodies: &[Option<FuncId>],
    ) -> Result<bool, String> {
        let mc = self.mc;
        macro_rules! bin {
            ($d:expr, $a:expr, $b:expr, $f:ident) => {{
                let (x, y) = (self.var($a), self.var($b));
                let r = self.b.ins().$f(x, y);
                self.set($d, r);
            }};
        }
        macro_rules! bini {
            ($d:expr, $a:expr, $v:expr, $f:ident) => {{
                let x = self.var($a);
                let y = self.k32($v);
                let r = self.b.ins().$f(x, y);
                self.set($d, r);
            }};
        }
        match mc.ops[i] {
            Op::Mov { d, s } => {
                let v = self.var(s);
                self.set(d, v);
            }
            Op::Const { d, v } => {
                let v = self.k32(v);
                self.set(d, v);
            }
            Op::Add { d, a, b } => self.add(d, a, b),
            Op::Sub { d, a, b } => bin!(d, a, b, isub),
            Op::Mul { d, a, b } => bin!(d, a, b, imul),
            Op::Div { d, a, b } | Op::Rem { d, a, b } => {
                let rem = matches!(mc.ops[i], Op::Rem { .. });
                let (x, y) = (self.var(a), self.var(b));
                let z = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
                self.fault_if(z, K_DIV0, i);
                let r = self.div(x, y, rem);
                self.set(d, r);
            }
            Op::And { d, a, b } => bin!(d, a, b, band),
            Op::Or { d, a, b } => bin!(d, a, b, bor),
            Op::Xor { d, a, b } => bin!(d, a, b, bxor),
            Op::Shl { d, a, b } => bin!(d, a, b, ishl),
            Op::Shr { d, a, b } => bin!(d, a, b, sshr),
            Op::Ushr { d, a, b } => bin!(d, a, b, ushr),
            Op::AddI { d, a, v } => self.add_k(d, a, v),
            Op::SubIR { d, v, b } => {
                let (x, y) = (self.k32(v), self.var(b));
                let r = self.b.ins().isub(x, y);
                self.set(d, r);
            }
            Op::MulI { d, a, v } => bini!(d, a, v, imul),
            Op::DivI { d, a, v } => self.div_const(d, a, v, false)?,
            Op::RemI { d, a, v } => self.div_const(d, a, v, true)?,
            Op::DivM { d, a, k } | Op::RemM { d, a, k } => {
                let rem = matches!(mc.ops[i], Op::RemM { .. });
                let v = mc
                    .divs
                    .get(k as usize)
                    .ok_or_else(|| format!("division constant {k} missing"))?
                    .divisor;
                self.div_const(d, a, v, rem)?
            }
            Op::AndI { d, a, v } => bini!(d, a, v, band),
            Op::OrI { d, a, v } => bini!(d, a, v, bor),
            Op::XorI { d, a, v } => bini!(d, a, v, bxor),
            Op::ShlI { d, a, v } => bini!(d, a, v, ishl),
            Op::ShrI { d, a, v } => bini!(d, a, v, sshr),
            Op::UshrI { d, a, v } => bini!(d, a, v, ushr),
            Op::Neg { d, s } => {
                let x = self.var(s);
                let r = self.b.ins().ineg(x);
                self.set(d, r);
            }
            Op::I2b { d, s } => {
                let x = self.var(s);
                let n = self.b.ins().ireduce(types::I8, x);
                let r = self.b.ins().sextend(types::I32, n);
                self.set(d, r);
            }
            Op::I2s { d, s } => {
                let x = self.var(s);
                let n = self.b.ins().ireduce(types::I16, x);
                let r = self.b.ins().sextend(types::I32, n);
                self.set(d, r);
            }
            Op::Inc { x, v } => self.add_k(x, x, v),
            Op::IfEq { t, .. }
            | Op::IfNe { t, .. }
            | Op::IfLt { t, .. }
            | Op::IfGe { t, .. }
            | Op::IfGt { t, .. }
            | Op::IfLe { t, .. }
            | Op::IfEqI { t, .. }
            | Op::IfNeI { t, .. }
            | Op::IfLtI { t, .. }
            | Op::IfGeI { t, .. }
            | Op::IfGtI { t, .. }
            | Op::IfLeI { t, .. } => {
                let c = self.branch_cond(mc.ops[i])?;
                self.branch(c, i, t, i + 1)?;
                return Ok(false);
            }
            Op::Goto { t } => {
                self.goto(i, t)?;
                return Ok(false);
            }
            Op::IncLt { t, .. }
            | Op::IncLe { t, .. }
            | Op::IncNe { t, .. }
            | Op::IncGt { t, .. }
            | Op::IncGe { t, .. } => {
                let Some((x, v, b, cc)) = inc_branch(&mc.ops[i]) else {
                    return Err(format!("internal: op {i} is not a fused increment"));
                };
                let y = self.var(x);
                let y = self.b.ins().iadd_imm_s(y, i64::from(v));
                self.set(x, y);
                let lim = self.var(b);
                let c = self.b.ins().icmp(cc, y, lim);
                self.branch(c, i, t, i + 2)?;
                return Ok(false);
            }
            Op::Switch { s, tab } => {
                self.switch(i, s, tab)?;
                return Ok(false);
            }
            Op::GetF { d, f } => {
                let v = self.get_field(f)?;
                self.set(d, v);
            }
            Op::PutF { f, s } | Op::PutFB { f, s } | Op::PutFS { f, s } | Op::PutFZ { f, s } => {
                let x = self.var(s);
                let v = match mc.ops[i] {
                    Op::PutFB { .. } => {
                        let n = self.b.ins().ireduce(types::I8, x);
                        self.b.ins().sextend(types::I32, n)
                    }
                    Op::PutFS { .. } => {
                        let n = self.b.ins().ireduce(types::I16, x);
                        self.b.ins().sextend(types::I32, n)
                    }
                    Op::PutFZ { .. } => self.b.ins().band_imm_s(x, 1),
                    _ => x,
                };
                self.put_field(f, v)?;
            }
            Op::AddF { d, a, f } => {
                let y = self.get_field(f)?;
                let x = self.var(a);
                let r = self.sum(x, y);
                self.set(d, r);
            }
            Op::Add3 { d, a, b, c } => self.add_n(d, &[a, b, c]),
            Op::Add4 { d, a, b, c, e } => self.add_n(d, &[a, b, c, e]),
            Op::NullCheck { s } => {
                let x = self.var(s);
                let z = self.b.ins().icmp_imm_s(IntCC::Equal, x, 0);
                self.fault_if(z, K_NULL, i);
            }
            Op::IaLoad { d, a, i: ix } => self.aload_x(i, d, a, ix, A_INT),
            Op::BaLoad { d, a, i: ix } => self.aload_x(i, d, a, ix, A_BYTE),
            Op::SaLoad { d, a, i: ix } => self.aload_x(i, d, a, ix, A_SHORT),
            Op::IaLoadK { d, a, k } => self.aload_k(i, d, a, k, A_INT),
            Op::BaLoadK { d, a, k } => self.aload_k(i, d, a, k, A_BYTE),
            Op::IaStore { a, i: ix, s } => self.astore_x(i, a, ix, s, A_INT),
            Op::BaStore { a, i: ix, s } => self.astore_x(i, a, ix, s, A_BYTE),
            Op::ZaStore { a, i: ix, s } => self.astore_x(i, a, ix, s, A_BOOL),
            Op::SaStore { a, i: ix, s } => self.astore_x(i, a, ix, s, A_SHORT),
            Op::IaStoreK { a, k, s } => self.astore_k(i, a, k, s, A_INT),
            Op::BaStoreK { a, k, s } => self.astore_k(i, a, k, s, A_BYTE),
            Op::ArrLen { d, a } => {
                if let Some(len) = self.proven_len(i) {
                    self.set(d, len);
                    return Ok(true);
                }
                let slow = self.block();
                let done = self.block();
                let (_, len) = self.array_fast(
                    i,
                    a,
                    None,
                    |g, k| g.b.ins().icmp_imm_u(IntCC::NotEqual, k, RAW_FREE as i64),
                    slow,
                );
                self.set(d, len);
                self.b.ins().jump(done, &[]);
                self.b.set_cold_block(slow);
                self.b.switch_to_block(slow);
                // Through the stub that keeps every register: this slow
                // path comes back (the array may be empty, or of a kind
                // whose length the cache does not keep).
                let (c, h, s) = (self.ctx(), self.var(a), self.k(self.site(i)));
                let (_, stub) = self.stub_refs.expect("set at entry");
                self.fuel_out();
                self.b.ins().call(stub, &[c, h, s]);
                let r = self
                    .b
                    .ins()
                    .load(types::I64, MemFlagsData::trusted(), c, CTX_STATUS);
                self.fuel_in();
                self.check(r);
                let v = self.b.ins().ireduce(types::I32, r);
                self.set(d, v);
                self.b.ins().jump(done, &[]);
                self.b.switch_to_block(done);
            }
            Op::NewArray { d, n, e } => {
                let c = self.ctx();
                let base = self
                    .b
                    .ins()
                    .load(types::I64, MemFlagsData::trusted(), c, CTX_BASE);
                self.spill(i, base)?;
                let (k, len) = (self.k(elem_code(e)), self.var(n));
                let (size, s) = (self.k(i64::from(mc.frame_size)), self.k(self.site(i)));
                type New = extern "C" fn(*mut Ctx, i64, i32, i64, i64) -> i64;
                let f = h_newarray::<H> as New as *const u8;
                let r = self.helper(
                    f,
                    &[self.ptr, types::I64, types::I32, types::I64, types::I64],
                    &[c, k, len, size, s],
                );
                self.check(r);
                let v = self.b.ins().ireduce(types::I32, r);
                self.set(d, v);
            }
            Op::Call { m: cm, at } => {
                let callee = &self.cls.code[cm as usize];
                let fid = bodies[cm as usize]
                    .ok_or_else(|| format!("{} calls a method that is not compiled", mc.name))?;
                let c = self.ctx();
                let d = self
                    .b
                    .ins()
                    .load(types::I64, MemFlagsData::trusted(), c, CTX_DEPTH);
                let max = self
                    .b
                    .ins()
                    .load(types::I64, MemFlagsData::trusted(), c, CTX_MAX_DEPTH);
                let d1 = self.b.ins().iadd_imm_s(d, 1);
                let deep = self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, d1, max);
                // The callee's frame in the interpreter's slot stack, which
                // may not pass `MAX_STACK_SLOTS` (recursion can reach it).
                let base = self
                    .b
                    .ins()
                    .load(types::I64, MemFlagsData::trusted(), c, CTX_BASE);
                let nb = self.b.ins().iadd_imm_s(base, i64::from(at));
                let top = self.b.ins().iadd_imm_s(nb, i64::from(callee.frame_size));
                let wide =
                    self.b
                        .ins()
                        .icmp_imm_s(IntCC::SignedGreaterThan, top, MAX_STACK_SLOTS as i64);
                // The charge, then either limit (the same fault at the
                // same op), on one branch.
                let over = self.b.ins().bor(deep, wide);
                self.charge_then(callee.ops.len() as i64, i, Some(over));
                if self.inline[cm as usize] {
                    let v = self.inline(cm as usize, at, module, bodies)?;
                    self.set(at, v);
                    self.inlined_calls += 1;
                    return Ok(true);
                }
                if self.alloc[cm as usize] {
                    self.spill(i, base)?;
                }
                self.b
                    .ins()
                    .store(MemFlagsData::trusted(), d1, c, CTX_DEPTH);
                self.b.ins().store(MemFlagsData::trusted(), nb, c, CTX_BASE);
                let mut args = vec![c];
                for s in 0..callee.nargs {
                    args.push(self.var(at + s));
                }
                let fref = module.declare_func_in_func(fid, self.b.func);
                self.fuel_out();
                let call = self.b.ins().call(fref, &args);
                let r = self.b.inst_results(call)[0];
                self.fuel_in();
                self.check(r);
                self.b.ins().store(MemFlagsData::trusted(), d, c, CTX_DEPTH);
                self.b
                    .ins()
                    .store(MemFlagsData::trusted(), base, c, CTX_BASE);
                let v = self.b.ins().ireduce(types::I32, r);
                self.set(at, v);
            }
            Op::CallNative { n, d, k, argc } => self.call_native(i, n, d, k, argc)?,
            Op::Ret { .. }
            | Op::RetK { .. }
            | Op::RetB { .. }
            | Op::RetS { .. }
            | Op::RetZ { .. }
            | Op::RetVoid => {
                let r = self.result(mc.ops[i]);
                self.return_ok(r);
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// `tableswitch` / `lookupswitch` at op `i`.
    fn switch(&mut self, i: usize, s: u16, tab: u16) -> Result<(), String> {
        let st = self
            .mc
            .switches
            .get(tab as usize)
            .ok_or_else(|| format!("switch table {tab} missing"))?;
        let key = self.var(s);
        let cost = st.cost();
        if cost > 0 {
            self.charge(cost, i);
        }
        // One block per edge, so that each charges its own backward jump;
        // the edges are filled after the dispatch (a block must be
        // finished before the builder moves to another).
        let mut edges: Vec<(Block, u32)> = Vec::new();
        let mut edge = |g: &mut Self, t: u32| -> Block {
            let blk = g.b.create_block();
            edges.push((blk, t));
            blk
        };
        let def = edge(self, st.default);
        if st.dense && !st.keys.is_empty() {
            let mut calls = Vec::with_capacity(st.targets.len());
            for &t in &st.targets {
                let blk = edge(self, t);
                calls.push(self.b.func.dfg.block_call(blk, &[] as &[BlockArg]));
            }
            let dc = self.b.func.dfg.block_call(def, &[] as &[BlockArg]);
            let jt = self.b.create_jump_table(JumpTableData::new(dc, &calls));
            let idx = self.b.ins().iadd_imm_s(key, -(st.keys[0] as i64));
            // br_table compares the index as unsigned against the table's
            // length: keys below the first wrap to large indices and take
            // the default, as `SwitchTable::lookup` does.
            let k0 = st.keys[0] as i64;
            let lo = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, key, k0);
            let inr = self.block();
            self.b.ins().brif(lo, def, &[], inr, &[]);
            self.b.switch_to_block(inr);
            self.b.ins().br_table(idx, jt);
        } else {
            // A binary search over the keys (compared as unsigned, which
            // orders them consistently), with jump tables for runs of
            // consecutive keys: a `lookupswitch` costs the compiled code
            // about what it costs the interpreter.
            let mut sw = Switch::new();
            for (j, &k) in st.keys.iter().enumerate() {
                let t = *st
                    .targets
                    .get(j)
                    .ok_or_else(|| format!("switch table {tab} is short"))?;
                let blk = edge(self, t);
                sw.set_entry(k as u32 as u128, blk);
            }
            sw.emit(&mut self.b, key, def);
        }
        for (blk, t) in edges {
            self.b.switch_to_block(blk);
            self.goto(i, t)?;
        }
        Ok(())
    }
}
