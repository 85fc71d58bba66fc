//! The translator's arithmetic that is more than one instruction: sums
//! of one value with itself as a multiplication, and division and
//! remainder as Java defines them.

use super::*;

impl<H> Gen<'_, '_, H> {
    /// `d = a + b`, as [`Gen::sum`].
    pub(super) fn add(&mut self, d: u16, a: u16, b: u16) {
        let (x, y) = (self.var(a), self.var(b));
        let r = self.sum(x, y);
        self.set(d, r);
    }

    /// `d` = the sum of the slots `terms` (a fused chain of `iadd`s,
    /// [`Op::Add3`] and [`Op::Add4`]), added left to right by
    /// [`Gen::sum`].
    pub(super) fn add_n(&mut self, d: u16, terms: &[u16]) {
        let mut r = self.var(terms[0]);
        for &t in &terms[1..] {
            let y = self.var(t);
            r = self.sum(r, y);
        }
        self.set(d, r);
    }

    /// `x + y`; where both are sums of one value with itself
    /// (`v + v + ... + v`, a value counting as one), their sum is that
    /// value times the count, one multiplication instead of a chain of
    /// additions (equal modulo 2^32, as Java's `int` wraps). The
    /// multiplications a longer chain leaves unused are dead code.
    pub(super) fn sum(&mut self, x: Value, y: Value) -> Value {
        let (bx, kx) = self.sums.get(&x).copied().unwrap_or((x, 1));
        let (by, ky) = self.sums.get(&y).copied().unwrap_or((y, 1));
        if bx == by && kx + ky <= 1 << 20 {
            let k = kx + ky;
            let r = self.b.ins().imul_imm_s(bx, k);
            if self.sums.len() < 4096 {
                self.sums.insert(r, (bx, k));
            }
            r
        } else {
            self.b.ins().iadd(x, y)
        }
    }

    /// `x / y` or `x % y` for `y != 0`, wrapping as Java does
    /// (`MIN / -1 == MIN`, `MIN % -1 == 0`) without the machine's trap.
    pub(super) fn div(&mut self, x: Value, y: Value, rem: bool) -> Value {
        let m1 = self.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
        let one = self.k32(1);
        let ys = self.b.ins().select(m1, one, y);
        if rem {
            let r = self.b.ins().srem(x, ys);
            let z = self.k32(0);
            self.b.ins().select(m1, z, r)
        } else {
            let q = self.b.ins().sdiv(x, ys);
            let n = self.b.ins().ineg(x);
            self.b.ins().select(m1, n, q)
        }
    }

    pub(super) fn div_const(&mut self, d: u16, a: u16, v: i32, rem: bool) -> Result<(), String> {
        let x = self.var(a);
        let r = match v {
            0 => return Err(format!("{}: division by the constant 0", self.mc.name)),
            -1 if rem => self.k32(0),
            -1 => self.b.ins().ineg(x),
            _ => {
                let y = self.k32(v);
                if rem {
                    self.b.ins().srem(x, y)
                } else {
                    self.b.ins().sdiv(x, y)
                }
            }
        };
        self.set(d, r);
        Ok(())
    }
}
