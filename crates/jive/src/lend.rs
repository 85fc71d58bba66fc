//! Lending a `byte[]` field the bytes it would hold, for one invocation
//! ([`Vm::lend_bytes`](crate::Vm::lend_bytes)): the host that would copy a
//! message into the array before running a method lets the method read
//! the message where it is instead.
//!
//! That is only invisible to the applet if nothing it does can see the
//! array itself. So a field may be lent only if the class's code uses it
//! in one way: a `getstatic` whose value is, at once, the `byte[]`
//! argument of a native call (only `int` work between them, so the value
//! goes nowhere else). Natives are the host's code, and every native call
//! that is not one of the compiled fast cases first copies the lent bytes
//! into the array (`Heap::settle_lent`); the compiled fast cases of
//! [`Intrinsic`](crate::Intrinsic) copies and sinks read the lent bytes
//! in place, and one that would write the array or read past them takes
//! the native. Array loads, stores, `arraylength`, comparisons and stores
//! of the reference never meet a lent array.
//!
//! [`Uses`] classifies every field at load, from the verified
//! instructions; [`Uses::lendable`] answers for a field and the method the
//! host will run.

use crate::bytecode::Ins;
use crate::ephemeral::{Reach, Site};
use crate::model::{parse_native_descriptor, Callee, Elem, JType, Model};
use crate::verify::{Insn, Verified};

/// How the class's code uses one field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FieldUse {
    /// Not at all.
    Unused,
    /// Only read, each read the `byte[]` argument of a native call, by
    /// these methods (ascending, no repeats).
    NativeArg(Vec<u16>),
    /// Any other way.
    Other,
}

/// Per field of a class, how its code uses it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Uses {
    fields: Vec<FieldUse>,
    /// Per field, whether it may be lent at all ([`Uses::finish`]).
    lend: Vec<bool>,
}

impl Uses {
    /// No use yet of any of `n` fields.
    pub(crate) fn new(n: usize) -> Uses {
        Uses {
            fields: vec![FieldUse::Unused; n],
            lend: vec![false; n],
        }
    }

    /// After every method is scanned: which fields may be lent, by their
    /// types: a `byte[]` field no code reads (nothing can tell its bytes
    /// were not copied), or one only passed to natives by a single method
    /// that no method of the class calls (so it runs only when the host
    /// invokes it, and no other method reads the field's array where it
    /// would expect the last bytes lent).
    pub(crate) fn finish(&mut self, types: &[JType], reach: &Reach) {
        let called = |m: u16| {
            reach
                .sites
                .iter()
                .flatten()
                .any(|&(_, s)| s == Site::Call(m))
        };
        for f in 0..self.fields.len() {
            let bytes = types.get(f) == Some(&JType::Array(Elem::Byte));
            self.lend[f] = bytes
                && match &self.fields[f] {
                    FieldUse::Unused => true,
                    FieldUse::NativeArg(ms) => ms.len() == 1 && !called(ms[0]),
                    FieldUse::Other => false,
                };
        }
    }

    /// Whether field `f` may be lent (to its one reader).
    #[inline]
    pub(crate) fn may_lend(&self, f: u16) -> bool {
        self.lend.get(f as usize).copied().unwrap_or(false)
    }

    /// Add what method `m` (verified as `v`) does with fields.
    pub(crate) fn scan(&mut self, model: &Model<'_>, m: u16, v: &Verified) {
        for (i, insn) in v.insns.iter().enumerate() {
            if !insn.reachable {
                continue;
            }
            match insn.ins {
                Ins::GetStatic(f) if native_arg(model, f, &v.insns, i + 1) => self.read(f, m),
                Ins::GetStatic(f) | Ins::PutStatic(f) | Ins::GetField(f) | Ins::PutField(f) => {
                    if let Some(u) = self.fields.get_mut(f as usize) {
                        *u = FieldUse::Other;
                    }
                }
                _ => {}
            }
        }
    }

    fn read(&mut self, f: u16, m: u16) {
        let Some(u) = self.fields.get_mut(f as usize) else {
            return;
        };
        match u {
            FieldUse::Unused => *u = FieldUse::NativeArg(vec![m]),
            FieldUse::NativeArg(ms) => {
                if let Err(at) = ms.binary_search(&m) {
                    ms.insert(at, m);
                }
            }
            FieldUse::Other => {}
        }
    }

    /// Whether any field may be lent (if none may, compiled code need not
    /// look for a lent array).
    pub(crate) fn any(&self) -> bool {
        self.lend.iter().any(|&l| l)
    }

    /// Whether field `f` may be lent while method `m` runs: it may be
    /// lent at all ([`Uses::finish`]) and `m` is its reader, if it has one.
    pub(crate) fn lendable(&self, f: u16, m: u16) -> bool {
        self.may_lend(f)
            && match &self.fields[f as usize] {
                FieldUse::NativeArg(ms) => ms.as_slice() == [m],
                _ => true,
            }
    }
}

/// Whether the instructions after a `getstatic` of field `f` (`at`, the
/// first after it) take its value straight to a native's first argument, a
/// `byte[]`: straight-line `int` work above it on the stack (constants,
/// locals, arithmetic, other fields, elements of other arrays), then the
/// call, whose other arguments are all `int`.
fn native_arg(model: &Model<'_>, f: u16, insns: &[Insn], at: usize) -> bool {
    // The reference sits at this stack height; nothing before the call
    // may pop it.
    let Some(below) = at.checked_sub(1).and_then(|i| insns.get(i)) else {
        return false;
    };
    let h0 = below.height;
    for i in &insns[at..] {
        let pops = match i.ins {
            Ins::Nop | Ins::Const(_) | Ins::ILoad(_) | Ins::Inc(..) => 0,
            Ins::GetStatic(g) if g != f => 0,
            Ins::Neg | Ins::I2b | Ins::I2s | Ins::ArrayLength => 1,
            Ins::Bin(_) | Ins::ArrLoad(_) => 2,
            Ins::Invoke(true, Callee::Native(n)) => {
                return takes_first(model, n, i.height.saturating_sub(h0))
            }
            _ => return false,
        };
        if i.height < pops + h0 + 1 {
            return false;
        }
    }
    false
}

/// Whether native `n` takes `argc` arguments, a `byte[]` then `int`s.
fn takes_first(model: &Model<'_>, n: usize, argc: u16) -> bool {
    let Some(d) = model.natives.get(n).map(|e| &e.3) else {
        return false;
    };
    let Ok((sig, _)) = parse_native_descriptor(d) else {
        return false;
    };
    match sig.params.split_first() {
        Some((JType::Array(Elem::Byte), ints)) => {
            sig.params.len() == argc as usize && ints.iter().all(|&p| p == JType::Int)
        }
        _ => false,
    }
}
