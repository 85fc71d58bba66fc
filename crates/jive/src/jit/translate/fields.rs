//! The translator's static fields: their addresses, and the values an
//! earlier access of the same straight run left known (a read or a write
//! of a field that is not volatile), so that a field read again within
//! the run takes the value without a load ([`Gen::fields_known`]).

use super::*;

impl<H> Gen<'_, '_, H> {
    pub(super) fn field_addr(&mut self, f: u16) -> Result<(Value, i32), String> {
        if f as usize >= self.cls.field_init.len() {
            return Err(format!("field {f} out of range in {}", self.mc.name));
        }
        Ok((self.fields.expect("set at entry"), 4 * f as i32))
    }

    /// Static field `f`'s value: the value an earlier access of the same
    /// straight run read or wrote ([`Gen::fields_known`]), else loaded.
    /// A volatile field's read loads it, and later reads of every field
    /// load them again (Java's acquire).
    pub(super) fn get_field(&mut self, f: u16) -> Result<Value, String> {
        if let Some(&(_, v)) = self.fields_known.iter().find(|e| e.0 == f) {
            return Ok(v);
        }
        let (p, off) = self.field_addr(f)?;
        let v = self
            .b
            .ins()
            .load(types::I32, MemFlagsData::trusted(), p, off);
        if self.volatile(f) {
            self.fields_known.clear();
        } else {
            self.know_field(f, v);
        }
        Ok(v)
    }

    /// Store `v` into static field `f` (which a later read of the run
    /// then takes without a load, unless it is volatile).
    pub(super) fn put_field(&mut self, f: u16, v: Value) -> Result<(), String> {
        let (p, off) = self.field_addr(f)?;
        self.b.ins().store(MemFlagsData::trusted(), v, p, off);
        self.fields_known.retain(|e| e.0 != f);
        if !self.volatile(f) {
            self.know_field(f, v);
        }
        Ok(())
    }

    fn volatile(&self, f: u16) -> bool {
        self.cls
            .fields
            .get(f as usize)
            .is_none_or(|d| d.is_volatile)
    }

    fn know_field(&mut self, f: u16, v: Value) {
        if self.fields_known.len() < 64 {
            self.fields_known.push((f, v));
        }
    }

    /// Before op `op`: forget what it may overwrite. A call of a method,
    /// a native or an allocation may store into any array, so the known
    /// elements go; only a call of a method (one not compiled into this
    /// one, whose ops touch nothing but its own locals) may write a static
    /// field. A native reaches the host and the heap, never the fields,
    /// and an allocation or the collection it may run leaves them as they
    /// are (handles never move), so the field values stay known across
    /// them: an array field passed to two natives in a row is read once.
    pub(super) fn forget_stored(&mut self, op: &Op) {
        if may_store(op) {
            self.known.clear();
        }
        if matches!(*op, Op::Call { m, .. } if !self.inline.get(m as usize).copied().unwrap_or(false))
        {
            self.fields_known.clear();
        }
    }

    /// Forget every element and field value known from earlier ops (a
    /// join of paths).
    pub(super) fn forget_known(&mut self) {
        self.known.clear();
        self.fields_known.clear();
    }

    /// Forget all the run knew: what it proved about its arrays and the
    /// elements and fields it read or wrote (a join of paths, or a new
    /// group of an unrolled loop).
    pub(super) fn forget_run(&mut self) {
        self.forget_proven();
        self.forget_known();
    }
}
