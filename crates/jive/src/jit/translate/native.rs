//! The translator's native calls: the plain call through a helper, and
//! the common cases compiled code performs without it (an intrinsic's
//! window copy, a sink's or a leaf's direct call), each of which falls
//! back to the plain call when a check fails or the host declines.

use super::*;
use crate::decode::Slot;

/// Whether a native of signature `sig` can take the leaf's direct call:
/// up to three `int`s in, an `int` or nothing out.
fn leaf_shape(sig: &crate::model::Sig) -> bool {
    sig.params.len() <= 3
        && sig.params.iter().all(|p| *p == JType::Int)
        && matches!(sig.ret, None | Some(JType::Int))
}

impl<H> Gen<'_, '_, H> {
    /// Op `i`, a call of bound native `n` with the `argc` arguments
    /// `args[k..]`, its result (if any) into slot `d`.
    pub(super) fn call_native(
        &mut self,
        i: usize,
        n: u16,
        d: Slot,
        k: u16,
        argc: u16,
    ) -> Result<(), String> {
        let specs = self
            .mc
            .args
            .get(k as usize..k as usize + argc as usize)
            .ok_or_else(|| format!("native arguments {k}.. missing"))?;
        let nat = self
            .cls
            .natives
            .get(n as usize)
            .ok_or_else(|| format!("native {n} missing"))?;
        let mut vals = Vec::with_capacity(specs.len());
        for a in specs {
            vals.push(match *a {
                Arg::S(s) => self.var(s),
                Arg::K(v) => self.k32(v),
                Arg::F(f) => self.get_field(f)?,
            });
        }
        // Whether the first argument may be an array lent bytes
        // (`crate::lend`): a field that may be, or a slot in a class with
        // one (the field's value may have been read into it).
        let lent = match specs.first() {
            Some(Arg::F(f)) => self.cls.uses.may_lend(*f),
            Some(Arg::S(_)) => self.cls.uses.any(),
            _ => false,
        };
        // A fast kind's common case first (an intrinsic's copy inline, a
        // sink's or a leaf's direct call); the call below is its slow path.
        let done = match (nat.fast, vals.as_slice()) {
            (Some(Fast::Window(kind)), &[h, aoff, woff, len]) => {
                Some(self.window_copy(kind, h, aoff, woff, len, lent))
            }
            (Some(Fast::Sink(sink)), &[h, aoff, x, len]) => {
                Some(self.sink_call(sink, h, aoff, x, len, lent))
            }
            (Some(Fast::SinkPrefix(sink)), &[h, x, len]) => {
                let zero = self.k32(0);
                Some(self.sink_call(sink, h, zero, x, len, lent))
            }
            (Some(Fast::Leaf(leaf)), args) if leaf_shape(&nat.sig) => {
                let d = nat.sig.ret.is_some().then_some(d);
                Some(self.leaf_call(leaf, args, d))
            }
            (Some(Fast::IntsSink(sink, units)), &[h, x, y]) => {
                Some(self.ints_sink_call(sink, units, h, x, y))
            }
            _ => None,
        };
        let slot = self.args_slot.expect("made at entry");
        for (j, &v) in vals.iter().enumerate() {
            self.b.ins().stack_store(self.ptr, v, slot, 4 * j as i32);
        }
        let argp = self.b.ins().stack_addr(self.ptr, slot, 0);
        let (c, nn, na, s) = (
            self.ctx(),
            self.k(n as i64),
            self.k(argc as i64),
            self.k(self.site(i)),
        );
        let r = if matches!(nat.sig.ret, Some(JType::Array(_))) {
            type Nat = extern "C" fn(*mut Ctx, i64, *const i32, i64, i64) -> i64;
            let f = h_native::<H> as Nat as *const u8;
            self.helper(
                f,
                &[self.ptr, types::I64, self.ptr, types::I64, types::I64],
                &[c, nn, argp, na, s],
            )
        } else {
            // The native's own function goes in as a constant: no
            // lookup, and no result check (it returns no handle).
            type Nat = extern "C" fn(*mut Ctx, *const (), *const i32, i64, i64) -> i64;
            let f = h_native_int::<H> as Nat as *const u8;
            let fp = self.k(nat.f as usize as i64);
            self.helper(
                f,
                &[self.ptr, self.ptr, self.ptr, types::I64, types::I64],
                &[c, fp, argp, na, s],
            )
        };
        self.check(r);
        if nat.sig.ret.is_some() {
            let v = self.b.ins().ireduce(types::I32, r);
            self.set(d, v);
        }
        if let Some(done) = done {
            self.b.ins().jump(done, &[]);
            self.b.switch_to_block(done);
        }
        Ok(())
    }

    /// The common case of an [`Intrinsic`] copy (see its documentation)
    /// inline. Leaves the builder in the block that must call the native
    /// (some check failed), whose code the caller emits and then jumps to
    /// the returned block, where both paths continue. `lent`: whether `h`
    /// may be an array lent bytes ([`Gen::byte_range`]).
    pub(super) fn window_copy(
        &mut self,
        kind: Intrinsic,
        h: Value,
        aoff: Value,
        woff: Value,
        len: Value,
        lent: bool,
    ) -> Block {
        let slow = self.block();
        let done = self.block();
        let c = self.ctx();
        let w = self.b.ins().sextend(types::I64, woff);
        let lent = lent.then_some(kind == Intrinsic::WindowToArray);
        let r = self.byte_range(h, aoff, len, Some(w), lent, slow);
        let fl = MemFlagsData::trusted();
        let wbase = self.b.ins().load(types::I64, fl, c, CTX_WINDOW);
        let wlen = self.b.ins().load(types::I64, fl, c, CTX_WINDOW_LEN);
        let wend = self.b.ins().iadd(w, r.n);
        let in_w = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, wend, wlen);
        let mut ok = self.b.ins().band(r.ok, in_w);
        let bound = self.b.ins().icmp_imm_u(IntCC::NotEqual, wbase, 0);
        ok = self.b.ins().band(ok, bound);
        let fast = self.block();
        self.b.ins().brif(ok, fast, &[], slow, &[]);
        self.b.switch_to_block(fast);
        self.set_fuel(r.left);
        let pw = self.b.ins().iadd(wbase, w);
        let (dst, src) = match kind {
            Intrinsic::WindowToArray => (r.at, pw),
            Intrinsic::ArrayToWindow => (pw, r.at),
        };
        let f = h_copy as extern "C" fn(*mut u8, *const u8, u64) -> i64 as *const u8;
        self.helper(f, &[self.ptr, self.ptr, types::I64], &[dst, src, r.n]);
        self.b.ins().jump(done, &[]);
        self.b.set_cold_block(slow);
        self.b.switch_to_block(slow);
        done
    }

    /// The common case of a native with a sink
    /// ([`Natives::register_sink`](crate::Natives::register_sink)): the
    /// checks of [`Gen::byte_range`], then the sink; the fuel is charged
    /// if it accepts. Leaves the builder where [`Gen::window_copy`] does.
    pub(super) fn sink_call(
        &mut self,
        sink: SinkFn<H>,
        h: Value,
        aoff: Value,
        x: Value,
        len: Value,
        lent: bool,
    ) -> Block {
        let slow = self.block();
        let done = self.block();
        let r = self.byte_range(h, aoff, len, None, lent.then_some(false), slow);
        let call = self.block();
        self.b.ins().brif(r.ok, call, &[], slow, &[]);
        self.b.switch_to_block(call);
        type Sink = extern "C" fn(*mut Ctx, *const (), *const u8, u64, i32) -> i64;
        let f = h_sink::<H> as Sink as *const u8;
        let (c, sp) = (self.ctx(), self.k(sink as usize as i64));
        let took = self.helper(
            f,
            &[self.ptr, self.ptr, self.ptr, types::I64, types::I32],
            &[c, sp, r.at, r.n, x],
        );
        let accepted = self.block();
        self.b.ins().brif(took, accepted, &[], slow, &[]);
        self.b.switch_to_block(accepted);
        self.set_fuel(r.left);
        self.b.ins().jump(done, &[]);
        self.b.set_cold_block(slow);
        self.b.switch_to_block(slow);
        done
    }

    /// The common case of a native with a leaf
    /// ([`Natives::register_leaf`](crate::Natives::register_leaf)): if the
    /// first part of the budget covers the call's unit, the leaf's direct
    /// call with the arguments in registers; the unit is charged and the
    /// result (if `d`) set if it accepts. Leaves the builder where
    /// [`Gen::window_copy`] does.
    fn leaf_call(&mut self, leaf: LeafFn<H>, args: &[Value], d: Option<Slot>) -> Block {
        let slow = self.block();
        let done = self.block();
        let call = self.block();
        let fuel = self.fuel();
        let left = self.b.ins().iadd_imm_s(fuel, -1);
        let enough = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, left, 0);
        self.b.ins().brif(enough, call, &[], slow, &[]);
        self.b.switch_to_block(call);
        let mut vals = vec![self.ctx(), self.k(leaf as usize as i64)];
        for j in 0..3 {
            vals.push(match args.get(j) {
                Some(&v) => v,
                None => self.k32(0),
            });
        }
        type Leaf = extern "C" fn(*mut Ctx, *const (), i32, i32, i32) -> i64;
        let f = h_leaf::<H> as Leaf as *const u8;
        let (p, i32t) = (self.ptr, types::I32);
        let r = self.helper(f, &[p, p, i32t, i32t, i32t], &vals);
        let declined = self.b.ins().icmp_imm_s(IntCC::Equal, r, DECLINED);
        let accepted = self.block();
        self.b.ins().brif(declined, slow, &[], accepted, &[]);
        self.b.switch_to_block(accepted);
        self.set_fuel(left);
        if let Some(d) = d {
            let v = self.b.ins().ireduce(types::I32, r);
            self.set(d, v);
        }
        self.b.ins().jump(done, &[]);
        self.b.set_cold_block(slow);
        self.b.switch_to_block(slow);
        done
    }

    /// The common case of a native with an `int[]` sink
    /// ([`Natives::register_ints_sink`](crate::Natives::register_ints_sink)):
    /// `h` is a live `int[]` and the first part of the budget covers
    /// `units`, then the sink with the array's elements; the units are
    /// charged if it accepts. Leaves the builder where
    /// [`Gen::window_copy`] does.
    fn ints_sink_call(
        &mut self,
        sink: IntsSinkFn<H>,
        units: u32,
        h: Value,
        x: Value,
        y: Value,
    ) -> Block {
        let slow = self.block();
        let done = self.block();
        let (addr, len) = self.array_fast_h(
            h,
            None,
            |g, k| g.b.ins().icmp_imm_u(IntCC::Equal, k, RAW_I as i64),
            slow,
        );
        let fuel = self.fuel();
        let left = self.b.ins().iadd_imm_s(fuel, -(units as i64));
        let enough = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, left, 0);
        let call = self.block();
        self.b.ins().brif(enough, call, &[], slow, &[]);
        self.b.switch_to_block(call);
        type Sink = extern "C" fn(*mut Ctx, *const (), *const i32, u64, i32, i32) -> i64;
        let f = h_ints_sink::<H> as Sink as *const u8;
        let n = self.b.ins().uextend(types::I64, len);
        let (c, sp) = (self.ctx(), self.k(sink as usize as i64));
        let (p, i32t) = (self.ptr, types::I32);
        let took = self.helper(
            f,
            &[p, p, p, types::I64, i32t, i32t],
            &[c, sp, addr, n, x, y],
        );
        let accepted = self.block();
        self.b.ins().brif(took, accepted, &[], slow, &[]);
        self.b.switch_to_block(accepted);
        self.set_fuel(left);
        self.b.ins().jump(done, &[]);
        self.b.set_cold_block(slow);
        self.b.switch_to_block(slow);
        done
    }
}
