//! Calls of small leaf methods compiled into their callers: a callee
//! that is one straight run of ops which cannot fault, allocate, call,
//! or touch fields, arrays or the host (arithmetic on its slots, then a
//! return) has its ops emitted at the call site on variables of its own.
//!
//! What the interpreter observes stays the same: the call still charges
//! the callee's length and still faults where the depth or the slot
//! stack would pass their limits, at the call op, as the call it
//! replaces does (`Gen::charge_then` before this runs). Nothing in the
//! callee can fault or use fuel after that, so the callee's frame, which
//! the interpreter would push and pop, is never seen: not by a fault's
//! site, not by a collection (it cannot allocate), not by the fuel.

use super::*;

/// Most ops a method may have and be compiled into its callers.
const MAX_OPS: usize = 16;

/// Whether calls of `mc` may be compiled into their callers: at most
/// [`MAX_OPS`] ops, all but the last from the arithmetic on slots that
/// cannot fault (division only by a constant other than 0), the last a
/// return.
pub(in crate::jit) fn inlinable(mc: &MethodCode) -> bool {
    let Some((last, body)) = mc.ops.split_last() else {
        return false;
    };
    mc.ops.len() <= MAX_OPS
        && last.is_return()
        && body.iter().all(|op| match *op {
            Op::DivI { v, .. } | Op::RemI { v, .. } => v != 0,
            Op::DivM { k, .. } | Op::RemM { k, .. } => {
                mc.divs.get(k as usize).is_some_and(|d| d.divisor != 0)
            }
            _ => matches!(
                op,
                Op::Mov { .. }
                    | Op::Const { .. }
                    | Op::Add { .. }
                    | Op::Add3 { .. }
                    | Op::Add4 { .. }
                    | Op::Sub { .. }
                    | Op::Mul { .. }
                    | Op::And { .. }
                    | Op::Or { .. }
                    | Op::Xor { .. }
                    | Op::Shl { .. }
                    | Op::Shr { .. }
                    | Op::Ushr { .. }
                    | Op::AddI { .. }
                    | Op::SubIR { .. }
                    | Op::MulI { .. }
                    | Op::AndI { .. }
                    | Op::OrI { .. }
                    | Op::XorI { .. }
                    | Op::ShlI { .. }
                    | Op::ShrI { .. }
                    | Op::UshrI { .. }
                    | Op::Neg { .. }
                    | Op::I2b { .. }
                    | Op::I2s { .. }
                    | Op::Inc { .. }
            ),
        })
}

impl<'a, H> Gen<'a, '_, H> {
    /// The ops of method `cm` ([`inlinable`]), called with its arguments
    /// in slots `at..` of the current method, emitted here; returns the
    /// value its call would set slot `at` to. The callee's slots are
    /// variables of their own; the current method's are left as they
    /// are.
    pub(super) fn inline<M: Module>(
        &mut self,
        cm: usize,
        at: u16,
        module: &mut M,
        bodies: &[Option<FuncId>],
    ) -> Result<Value, String> {
        let cls: &'a ClassInner<H> = self.cls;
        let callee = &cls.code[cm];
        let Some((&last, body)) = callee.ops.split_last() else {
            return Err(format!("internal: {} has no ops", callee.name));
        };
        let mut vars = Vec::with_capacity(callee.frame_size as usize);
        for s in 0..callee.frame_size {
            let v = self.b.declare_var(types::I32);
            if s < callee.nargs {
                let a = self.var(at + s);
                self.b.def_var(v, a);
            }
            vars.push(v);
        }
        let caller = (std::mem::replace(&mut self.vars, vars), self.mc, self.m);
        self.mc = callee;
        self.m = cm;
        let mut done = Ok(());
        for j in 0..body.len() {
            match self.op(j, module, bodies) {
                Ok(true) => {}
                Ok(false) => {
                    done = Err(format!("internal: op {j} of {} branched", callee.name));
                    break;
                }
                Err(e) => {
                    done = Err(e);
                    break;
                }
            }
        }
        let r = done.map(|()| self.result(last));
        (self.vars, self.mc, self.m) = caller;
        let r = r?;
        Ok(self.b.ins().ireduce(types::I32, r))
    }
}
