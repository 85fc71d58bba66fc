//! The translator's array operations: the inline fast path (the heap's
//! table of element addresses, kind and bounds checked), the range checks
//! of the natives' fast cases, and the helper calls that make the
//! interpreter's exact fault when a check fails.

use super::*;

impl<H> Gen<'_, '_, H> {
    /// The fast path of an array op on the array in slot `a`: checks that
    /// its handle names a live entry of the heap's table ([`Heap::raw`]),
    /// that the entry's kind satisfies `kind_ok`, and (with `idx`) that the
    /// index is below its length; branches to `slow` if not. Returns the
    /// entry's element address and length, in the block where all checks
    /// passed.
    ///
    /// When op `i` reads its array through a cache ([`Plan`]), the entry
    /// is the cached one (read here if it is not true at op `i`), whose
    /// length is 0 for a kind the op does not take: the op's check is
    /// the index's against it alone (and, with no index, a length that
    /// is not 0: `arraylength` of an empty array takes the slow path).
    pub(super) fn array_fast(
        &mut self,
        i: usize,
        a: u16,
        idx: Option<Value>,
        kind_ok: impl FnOnce(&mut Self, Value) -> Value,
        slow: Block,
    ) -> (Value, Value) {
        let Some((addr, len)) = self.cached(i) else {
            let h = self.var(a);
            return self.array_fast_h(h, idx, kind_ok, slow);
        };
        let ok = match idx {
            Some(ix) => self.b.ins().icmp(IntCC::UnsignedLessThan, ix, len),
            None => self.b.ins().icmp_imm_u(IntCC::NotEqual, len, 0),
        };
        let b2 = self.block();
        self.b.ins().brif(ok, b2, &[], slow, &[]);
        self.b.switch_to_block(b2);
        (addr, len)
    }

    /// [`Gen::array_fast`] on the handle `h`.
    pub(super) fn array_fast_h(
        &mut self,
        h: Value,
        idx: Option<Value>,
        kind_ok: impl FnOnce(&mut Self, Value) -> Value,
        slow: Block,
    ) -> (Value, Value) {
        let c = self.ctx();
        // Handle h names entry h - 1; null (0) and `this` (-1) give
        // indices no table reaches.
        let hx = self.b.ins().uextend(types::I64, h);
        let slot = self.b.ins().iadd_imm_s(hx, -1);
        let n = self
            .b
            .ins()
            .load(types::I64, MemFlagsData::trusted(), c, CTX_NARRAYS);
        let live = self.b.ins().icmp(IntCC::UnsignedLessThan, slot, n);
        let b1 = self.block();
        self.b.ins().brif(live, b1, &[], slow, &[]);
        self.b.switch_to_block(b1);
        let base = self
            .b
            .ins()
            .load(self.ptr, MemFlagsData::trusted(), c, CTX_ARRAYS);
        let off = self.b.ins().ishl_imm_u(slot, 4);
        let e = self.b.ins().iadd(base, off);
        let kind = self
            .b
            .ins()
            .load(types::I32, MemFlagsData::trusted(), e, 12);
        let len = self.b.ins().load(types::I32, MemFlagsData::trusted(), e, 8);
        let mut ok = kind_ok(self, kind);
        if let Some(ix) = idx {
            let inb = self.b.ins().icmp(IntCC::UnsignedLessThan, ix, len);
            ok = self.b.ins().band(ok, inb);
        }
        let b2 = self.block();
        self.b.ins().brif(ok, b2, &[], slow, &[]);
        self.b.switch_to_block(b2);
        let addr = self.b.ins().load(self.ptr, MemFlagsData::trusted(), e, 0);
        (addr, len)
    }

    /// The checks every fast native case makes ([`Fast`]): `h` is a live
    /// `byte[]`, `aoff`, `len` and `more` are not negative, `aoff + len`
    /// is inside the array, and the first part of the budget covers the
    /// call's unit and `1 + len / 64`. Jumps to `slow` if `h` is no live
    /// byte array; returns whether the rest holds, the address of
    /// `a[aoff]`, `len` and the fuel left after the charge (not yet stored).
    ///
    /// With `lent` (`h` may be an array the host lent bytes to,
    /// [`crate::lend`]; `Some(writes)`), such an `h` (`Ctx::lent`) reads
    /// as those bytes, without a look in the table: the range must lie
    /// within them. A case that writes it goes to `slow` (the native then
    /// settles the loan and writes).
    pub(super) fn byte_range(
        &mut self,
        h: Value,
        aoff: Value,
        len: Value,
        more: Option<Value>,
        lent: Option<bool>,
        slow: Block,
    ) -> ByteRange {
        let kind_ok = |g: &mut Self, k| g.b.ins().icmp_imm_u(IntCC::Equal, k, RAW_B as i64);
        let (addr, alen) = match lent {
            None => self.array_fast_h(h, None, kind_ok, slow),
            Some(writes) => {
                // The lent array (a live `byte[]` of at least the lent
                // length while the loan lasts) needs no look in the table.
                let c = self.ctx();
                let fl = MemFlagsData::trusted();
                let lent = self.b.ins().load(types::I64, fl, c, CTX_LENT);
                let hx = self.b.ins().sextend(types::I64, h);
                let is = self.b.ins().icmp(IntCC::Equal, hx, lent);
                let table = self.block();
                if writes {
                    self.b.ins().brif(is, slow, &[], table, &[]);
                    self.b.switch_to_block(table);
                    self.array_fast_h(h, None, kind_ok, slow)
                } else {
                    let loan = self.block();
                    let join = self.block();
                    let addr = self.b.append_block_param(join, self.ptr);
                    let alen = self.b.append_block_param(join, types::I32);
                    self.b.ins().brif(is, loan, &[], table, &[]);
                    self.b.switch_to_block(loan);
                    let p = self.b.ins().load(self.ptr, fl, c, CTX_LENT_PTR);
                    let n = self.b.ins().load(types::I64, fl, c, CTX_LENT_LEN);
                    let n = self.b.ins().ireduce(types::I32, n);
                    self.b.ins().jump(join, &[p.into(), n.into()]);
                    self.b.switch_to_block(table);
                    let (a, l) = self.array_fast_h(h, None, kind_ok, slow);
                    self.b.ins().jump(join, &[a.into(), l.into()]);
                    self.b.switch_to_block(join);
                    (addr, alen)
                }
            }
        };
        let a = self.b.ins().sextend(types::I64, aoff);
        let n = self.b.ins().sextend(types::I64, len);
        // No negative operand: the sign bit of a | n (| more) is clear.
        let mut any = self.b.ins().bor(a, n);
        if let Some(m) = more {
            any = self.b.ins().bor(any, m);
        }
        let mut ok = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, any, 0);
        let alen = self.b.ins().uextend(types::I64, alen);
        let aend = self.b.ins().iadd(a, n);
        let in_a = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, aend, alen);
        ok = self.b.ins().band(ok, in_a);
        // The call's unit and the work's 1 + len / 64, from the first part
        // of the budget only (so no checkpoint is passed here).
        let fuel = self.fuel();
        let units = self.b.ins().ushr_imm_u(n, 6);
        let left = self.b.ins().isub(fuel, units);
        let left = self.b.ins().iadd_imm_s(left, -2);
        let enough = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, left, 0);
        ok = self.b.ins().band(ok, enough);
        let at = self.b.ins().iadd(addr, a);
        ByteRange { ok, at, n, left }
    }

    /// Whether `kind` is one the array op of `kind` (`A_*`) accepts.
    pub(super) fn kind_ok(&mut self, kind: Value, op: i64, load: bool) -> Value {
        match op {
            // baload reads byte[] and boolean[] (kinds 1 and 2).
            A_BYTE if load => {
                let k = self.b.ins().iadd_imm_s(kind, -(RAW_B as i64));
                self.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, k, 2)
            }
            A_BYTE => self.b.ins().icmp_imm_u(IntCC::Equal, kind, RAW_B as i64),
            A_BOOL => self.b.ins().icmp_imm_u(IntCC::Equal, kind, RAW_Z as i64),
            A_SHORT => self.b.ins().icmp_imm_u(IntCC::Equal, kind, RAW_S as i64),
            _ => self.b.ins().icmp_imm_u(IntCC::Equal, kind, RAW_I as i64),
        }
    }

    /// Address of element `idx` from the element address `addr`.
    pub(super) fn elem_addr(&mut self, addr: Value, idx: Value, op: i64) -> Value {
        let ix = self.b.ins().uextend(types::I64, idx);
        let shift = match op {
            A_INT => 2,
            A_SHORT => 1,
            _ => 0,
        };
        let off = self.b.ins().ishl_imm_u(ix, shift);
        self.b.ins().iadd(addr, off)
    }

    /// Where op `i`, an access at constant index `k` through a cache,
    /// needs no check: the address of its element, if an earlier access
    /// in the same straight run proved the array longer than `k`.
    fn proven_at(&mut self, i: usize, k: i32, kind: i64) -> Option<Value> {
        let c = self.plan.uses(self.mc.ops.get(i)?)?;
        if !self.plan.valid(i, c) || k < 0 || self.proven[c] <= k as u32 {
            return None;
        }
        let addr = self.b.use_var(self.cvars[c].addr);
        let idx = self.k32(k);
        Some(self.elem_addr(addr, idx, kind))
    }

    /// After op `i`, an access at constant index `k`: if it went through
    /// a cache whose kinds it takes exactly, the array is longer than `k`
    /// wherever the ops go on.
    fn prove(&mut self, i: usize, k: i32) {
        let Some(op) = self.mc.ops.get(i) else { return };
        if let Some(c) = self.plan.uses(op) {
            if k >= 0 && self.plan.exact(op, c) {
                self.proven[c] = self.proven[c].max(k as u32 + 1);
            }
        }
    }

    /// `aload` at the constant index `k`, unchecked where an earlier
    /// access proved it in bounds, and not even loaded where an earlier
    /// load of the same run read it (nothing stored since).
    pub(super) fn aload_k(&mut self, i: usize, d: u16, a: u16, k: i32, kind: i64) {
        let c = self.mc.ops.get(i).and_then(|op| self.plan.uses(op));
        if let Some(v) = self.seen(i, (None, k), kind) {
            self.set(d, v);
            return;
        }
        if let Some(p) = self.proven_at(i, k, kind) {
            let v = self.load_elem(p, kind);
            self.set(d, v);
            self.remember(c, (None, k), kind, v);
            return;
        }
        let idx = self.k32(k);
        self.aload(i, d, a, idx, kind);
        self.prove(i, k);
        if let Some(c) = c.filter(|&c| self.proven[c] > k as u32 && k >= 0) {
            // The check proved the index (its slow path always faults):
            // the value read is the element's.
            let v = self.var(d);
            self.remember(Some(c), (None, k), kind, v);
        }
    }

    /// `aload` at the index in slot `ix`, neither checked nor loaded
    /// where an earlier access of the same run read or wrote the element
    /// (its check passed on the same array and the same index), and not
    /// checked where an earlier access checked the index.
    pub(super) fn aload_x(&mut self, i: usize, d: u16, a: u16, ix: u16, kind: i64) {
        let idx = self.var(ix);
        let key = self.index_of(idx);
        if let Some(v) = self.seen(i, key, kind) {
            self.set(d, v);
            return;
        }
        if let Some(p) = self.checked_at(i, key, idx, kind) {
            let v = self.load_elem(p, kind);
            self.set(d, v);
            self.remember(self.exact_cache(i), key, kind, v);
            return;
        }
        self.aload(i, d, a, idx, kind);
        if let Some(c) = self.exact_cache(i) {
            let v = self.var(d);
            self.remember(Some(c), key, kind, v);
            self.proven[c] = self.proven[c].max(1);
            self.passed(c, key);
        }
    }

    /// `astore` at the index in slot `ix` ([`Gen::stored`] after it),
    /// not checked where an earlier access of the run checked the index.
    pub(super) fn astore_x(&mut self, i: usize, a: u16, ix: u16, src: u16, kind: i64) {
        let idx = self.var(ix);
        let key = self.index_of(idx);
        if let Some(p) = self.checked_at(i, key, idx, kind) {
            self.store_elem(p, src, kind);
            self.stored(i, key, kind, src);
            return;
        }
        self.astore(i, a, idx, src, kind);
        self.stored(i, key, kind, src);
        if let Some(c) = self.exact_cache(i) {
            self.proven[c] = self.proven[c].max(1);
            self.passed(c, key);
        }
    }

    /// Where op `i`, an access at index `idx` (named `key`) through a
    /// cache whose kinds it takes exactly, needs no check: the address of
    /// its element, if an earlier access of the same run through the
    /// same cache, true since, passed its check at the same index (the
    /// array and its length are the same, and so is the index).
    fn checked_at(&mut self, i: usize, key: Index, idx: Value, kind: i64) -> Option<Value> {
        let c = self.exact_cache(i)?;
        if !self.plan.valid(i, c) || !self.checked.contains(&(c, key)) {
            return None;
        }
        let addr = self.b.use_var(self.cvars[c].addr);
        Some(self.elem_addr(addr, idx, kind))
    }

    /// An access through cache `c` at index `key` passed its check.
    fn passed(&mut self, c: usize, key: Index) {
        if self.checked.len() < 64 && !self.checked.contains(&(c, key)) {
            self.checked.push((c, key));
        }
    }

    /// Forget what the run proved about its arrays' lengths and indices
    /// (a join of paths, or a new group of an unrolled loop).
    pub(super) fn forget_proven(&mut self) {
        self.proven.fill(0);
        self.checked.clear();
    }

    /// `arraylength` at op `i` where an earlier access of the run proved
    /// the array not empty: its cached length, which then is the
    /// array's (a cache keeps 0 only for an array of a kind it does not
    /// keep, which no access that proved anything reached).
    pub(super) fn proven_len(&mut self, i: usize) -> Option<Value> {
        let c = self.plan.uses(self.mc.ops.get(i)?)?;
        if !self.plan.valid(i, c) || self.proven[c] == 0 {
            return None;
        }
        Some(self.b.use_var(self.cvars[c].len))
    }

    /// `d = a + v`, with `d` named as `a`'s root plus a constant
    /// ([`Gen::affine_of`]).
    pub(super) fn add_k(&mut self, d: u16, a: u16, v: i32) {
        let x = self.var(a);
        let y = self.k32(v);
        let r = self.b.ins().iadd(x, y);
        self.offset_of(r, x, v);
        self.set(d, r);
    }

    /// Name `r`, computed as `x + v`, as `x`'s root plus a constant.
    pub(super) fn offset_of(&mut self, r: Value, x: Value, v: i32) {
        let (root, off) = self.affine_of(x);
        let r = self.b.func.dfg.resolve_aliases(r);
        self.affine.insert(r, (root, off.wrapping_add(v)));
    }

    /// `v` as a root value plus a constant (`v` itself plus 0 unless it
    /// was computed by [`Gen::add_k`] or a copy's counter): two values of
    /// one root are equal exactly when their constants are (in 32 bits).
    pub(super) fn affine_of(&self, v: Value) -> (Value, i32) {
        // A value a block of one predecessor took over is an alias.
        let v = self.b.func.dfg.resolve_aliases(v);
        self.affine.get(&v).copied().unwrap_or((v, 0))
    }

    fn index_of(&self, v: Value) -> Index {
        let (root, off) = self.affine_of(v);
        (Some(root), off)
    }

    /// The value of element `key` of op `i`'s array read as `kind`, if
    /// an earlier access of the run read or wrote it through the same
    /// cache, true at op `i`.
    fn seen(&self, i: usize, key: Index, kind: i64) -> Option<Value> {
        let c = self.plan.uses(self.mc.ops.get(i)?)?;
        if !self.plan.valid(i, c) {
            return None;
        }
        let e = self
            .known
            .iter()
            .find(|e| (e.0, e.1, e.2) == (c, key, kind))?;
        Some(e.3)
    }

    /// The cache op `i` accesses its array through, if it takes exactly
    /// the cache's kinds: an access that goes on passed its check.
    fn exact_cache(&self, i: usize) -> Option<usize> {
        let op = self.mc.ops.get(i)?;
        self.plan.uses(op).filter(|&c| self.plan.exact(op, c))
    }

    /// After a store of slot `src` to element `key` of op `i`'s array:
    /// forget every element it may have overwritten (all but those of
    /// the same cache whose index has the same root and another
    /// constant, which are other elements of the same array) and, for
    /// an `int` store whose check passed, remember the value stored (a
    /// narrower store changes what a load reads back).
    pub(super) fn stored(&mut self, i: usize, key: Index, kind: i64, src: u16) {
        match self.mc.ops.get(i).and_then(|op| self.plan.uses(op)) {
            Some(c) => self
                .known
                .retain(|e| e.0 == c && e.1 .0 == key.0 && e.1 .1 != key.1),
            None => self.known.clear(),
        }
        if kind == A_INT {
            if let Some(c) = self.exact_cache(i) {
                let v = self.var(src);
                self.remember(Some(c), key, kind, v);
            }
        }
    }

    /// Remember that element `key` of cache `c`'s array, read as `kind`,
    /// is `v` (at most 64 elements).
    fn remember(&mut self, c: Option<usize>, key: Index, kind: i64, v: Value) {
        if let Some(c) = c {
            if self.known.len() < 64 {
                self.known.push((c, key, kind, v));
            }
        }
    }

    /// `astore` at the constant index `k`, unchecked where an earlier
    /// access proved it in bounds.
    pub(super) fn astore_k(&mut self, i: usize, a: u16, k: i32, src: u16, kind: i64) {
        if let Some(p) = self.proven_at(i, k, kind) {
            self.store_elem(p, src, kind);
            self.stored(i, (None, k), kind, src);
            return;
        }
        let idx = self.k32(k);
        self.astore(i, a, idx, src, kind);
        self.stored(i, (None, k), kind, src);
        self.prove(i, k);
    }

    fn load_elem(&mut self, p: Value, kind: i64) -> Value {
        let fl = MemFlagsData::trusted();
        match kind {
            A_INT => self.b.ins().load(types::I32, fl, p, 0),
            A_SHORT => self.b.ins().sload16(types::I32, fl, p, 0),
            _ => self.b.ins().sload8(types::I32, fl, p, 0),
        }
    }

    fn store_elem(&mut self, p: Value, src: u16, kind: i64) {
        let x = self.var(src);
        let fl = MemFlagsData::trusted();
        match kind {
            A_INT => {
                self.b.ins().store(fl, x, p, 0);
            }
            A_SHORT => {
                self.b.ins().istore16(fl, x, p, 0);
            }
            A_BOOL => {
                let z = self.b.ins().band_imm_s(x, 1);
                self.b.ins().istore8(fl, z, p, 0);
            }
            _ => {
                self.b.ins().istore8(fl, x, p, 0);
            }
        }
    }

    /// Whether op `i`'s slow path always faults: its inline path takes
    /// every kind of array its helper takes (through a cache, when the
    /// cache keeps the length of exactly those kinds), so that the inline
    /// checks fail only where the helper faults. Such a slow path is a
    /// side exit: it does not come back, so nothing the method holds in
    /// registers need be kept across its call.
    fn always_faults(&self, i: usize) -> bool {
        let Some(op) = self.mc.ops.get(i) else {
            return false;
        };
        match self.plan.uses(op) {
            Some(c) => self.plan.exact(op, c),
            None => true,
        }
    }

    /// After the helper of a slow path that always faults
    /// ([`Gen::always_faults`]): return its [`FAULT`], and should it
    /// ever not fault, fault anyway (an internal error) rather than go on.
    fn exit_after(&mut self, r: Value, i: usize) {
        self.check(r);
        if let Some(blk) = self.b.current_block() {
            self.b.set_cold_block(blk);
        }
        let (c, k, s) = (self.ctx(), self.k(K_INTERNAL), self.k(self.site(i)));
        let f = h_fault::<H> as extern "C" fn(*mut Ctx, i64, i64) -> i64 as *const u8;
        let r = self.helper(f, &[self.ptr, types::I64, types::I64], &[c, k, s]);
        self.b.ins().return_(&[r]);
    }

    pub(super) fn aload(&mut self, i: usize, d: u16, a: u16, idx: Value, kind: i64) {
        let slow = self.block();
        let done = self.block();
        let exit = self.always_faults(i);
        let (addr, _) = self.array_fast(i, a, Some(idx), |g, k| g.kind_ok(k, kind, true), slow);
        let p = self.elem_addr(addr, idx, kind);
        let v = self.load_elem(p, kind);
        self.set(d, v);
        self.b.ins().jump(done, &[]);

        // The slow path makes the interpreter's exact fault (or, for a
        // kind the fast path does not take, the load itself).
        self.b.set_cold_block(slow);
        self.b.switch_to_block(slow);
        let (c, h, k, s) = (self.ctx(), self.var(a), self.k(kind), self.k(self.site(i)));
        type Ld = extern "C" fn(*mut Ctx, i64, i32, i32, i64) -> i64;
        let f = h_aload::<H> as Ld as *const u8;
        let r = self.helper(
            f,
            &[self.ptr, types::I64, types::I32, types::I32, types::I64],
            &[c, k, h, idx, s],
        );
        if exit {
            self.exit_after(r, i);
        } else {
            self.check(r);
            let v = self.b.ins().ireduce(types::I32, r);
            self.set(d, v);
            self.b.ins().jump(done, &[]);
        }
        self.b.switch_to_block(done);
    }

    pub(super) fn astore(&mut self, i: usize, a: u16, idx: Value, src: u16, kind: i64) {
        let slow = self.block();
        let done = self.block();
        let exit = self.always_faults(i);
        let (addr, _) = self.array_fast(i, a, Some(idx), |g, k| g.kind_ok(k, kind, false), slow);
        let p = self.elem_addr(addr, idx, kind);
        self.store_elem(p, src, kind);
        self.b.ins().jump(done, &[]);

        self.b.set_cold_block(slow);
        self.b.switch_to_block(slow);
        let (c, h, x, k, s) = (
            self.ctx(),
            self.var(a),
            self.var(src),
            self.k(kind),
            self.k(self.site(i)),
        );
        type St = extern "C" fn(*mut Ctx, i64, i32, i32, i32, i64) -> i64;
        let f = h_astore::<H> as St as *const u8;
        let r = self.helper(
            f,
            &[
                self.ptr,
                types::I64,
                types::I32,
                types::I32,
                types::I32,
                types::I64,
            ],
            &[c, k, h, idx, x, s],
        );
        if exit {
            self.exit_after(r, i);
        } else {
            self.check(r);
            self.b.ins().jump(done, &[]);
        }
        self.b.switch_to_block(done);
    }
}
