//! The translator's fuel: the register kept in a variable in a method
//! with a loop (stored where anything else may read it), and the charge
//! at a backward jump or a call, whose slow path calls the fuel stub
//! that keeps every register.

use super::*;

impl<H> Gen<'_, '_, H> {
    /// The fuel left in the current part of the budget. A method with a
    /// loop keeps it in a variable (a register across its loops), loaded
    /// on entry, stored to `Ctx::fuel` before every call and helper and
    /// before returning, and loaded again after every call and helper
    /// (which may charge or refill it): whatever reads `Ctx::fuel` reads
    /// what the interpreter's register would hold. Other methods read
    /// and write `Ctx::fuel` itself.
    pub(super) fn fuel(&mut self) -> Value {
        match self.fuel_var {
            Some(v) => self.b.use_var(v),
            None => {
                let c = self.ctx();
                self.b
                    .ins()
                    .load(types::I64, MemFlagsData::trusted(), c, CTX_FUEL)
            }
        }
    }

    /// Set the fuel left (see [`Gen::fuel`]).
    pub(super) fn set_fuel(&mut self, f: Value) {
        match self.fuel_var {
            Some(v) => self.b.def_var(v, f),
            None => {
                let c = self.ctx();
                self.b.ins().store(MemFlagsData::trusted(), f, c, CTX_FUEL);
            }
        }
    }

    /// Before a call, a helper or a return: `Ctx::fuel` gets the variable.
    pub(super) fn fuel_out(&mut self) {
        if let Some(v) = self.fuel_var {
            let (c, f) = (self.ctx(), self.b.use_var(v));
            self.b.ins().store(MemFlagsData::trusted(), f, c, CTX_FUEL);
        }
    }

    /// After a call or a helper: the variable gets `Ctx::fuel`.
    pub(super) fn fuel_in(&mut self) {
        if let Some(v) = self.fuel_var {
            let c = self.ctx();
            let f = self
                .b
                .ins()
                .load(types::I64, MemFlagsData::trusted(), c, CTX_FUEL);
            self.b.def_var(v, f);
        }
    }

    /// Return `r` (a result, not [`FAULT`]) to the caller.
    pub(super) fn return_ok(&mut self, r: Value) {
        self.fuel_out();
        self.b.ins().return_(&[r]);
    }

    /// Charge `units` of fuel at op `i`.
    pub(super) fn charge(&mut self, units: i64, i: usize) {
        self.charge_then(units, i, None);
    }

    /// Charge `units` of fuel at op `i`, then, if `over` holds, fault
    /// with a stack overflow there (a call's depth and frame-slot limits):
    /// one branch on the path where neither happens, and the charge's
    /// slow path before the fault, in the interpreter's order.
    pub(super) fn charge_then(&mut self, units: i64, i: usize, over: Option<Value>) {
        let f = self.fuel();
        let f = self.b.ins().iadd_imm_s(f, -units);
        self.set_fuel(f);
        let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, f, 0);
        let slow = self.block();
        let ok = self.block();
        let any = match over {
            Some(o) => self.b.ins().bor(neg, o),
            None => neg,
        };
        self.b.ins().brif(any, slow, &[], ok, &[]);
        self.b.set_cold_block(slow);
        self.b.switch_to_block(slow);
        if let Some(o) = over {
            let spend = self.block();
            let limits = self.block();
            self.b.set_cold_block(spend);
            self.b.set_cold_block(limits);
            self.b.ins().brif(neg, spend, &[], limits, &[]);
            self.b.switch_to_block(spend);
            self.spend(i);
            self.b.ins().jump(limits, &[]);
            self.b.switch_to_block(limits);
            self.fault_if(o, K_DEPTH, i);
            if let Some(blk) = self.b.current_block() {
                self.b.set_cold_block(blk);
            }
        } else {
            self.spend(i);
        }
        self.b.ins().jump(ok, &[]);
        self.b.switch_to_block(ok);
    }

    /// The charge's slow path: the fuel stub, returning on a fault.
    fn spend(&mut self, i: usize) {
        let c = self.ctx();
        let s = self.k(self.site(i));
        let (stub, _) = self.stub_refs.expect("set at entry");
        self.fuel_out();
        self.b.ins().call(stub, &[c, s]);
        let r = self
            .b
            .ins()
            .load(types::I64, MemFlagsData::trusted(), c, CTX_STATUS);
        self.fuel_in();
        self.check(r);
    }
}
