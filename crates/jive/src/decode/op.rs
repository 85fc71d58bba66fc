//! The register form: the decoded ops ([`Op`]), switch tables, native-call
//! arguments and a decoded method ([`MethodCode`]), with what each op
//! reads, writes and branches to.

use super::divmagic::DivMagic;
use crate::model::Elem;

/// A frame slot index.
pub type Slot = u16;

/// A pre-decoded instruction. `d` is a destination slot, `a`/`b`/`s`
/// source slots, `v` an immediate, `t` a target op index.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Mov {
        d: Slot,
        s: Slot,
    },
    Const {
        d: Slot,
        v: i32,
    },
    Add {
        d: Slot,
        a: Slot,
        b: Slot,
    },
    Sub {
        d: Slot,
        a: Slot,
        b: Slot,
    },
    Mul {
        d: Slot,
        a: Slot,
        b: Slot,
    },
    Div {
        d: Slot,
        a: Slot,
        b: Slot,
    },
    Rem {
        d: Slot,
        a: Slot,
        b: Slot,
    },
    And {
        d: Slot,
        a: Slot,
        b: Slot,
    },
    Or {
        d: Slot,
        a: Slot,
        b: Slot,
    },
    Xor {
        d: Slot,
        a: Slot,
        b: Slot,
    },
    Shl {
        d: Slot,
        a: Slot,
        b: Slot,
    },
    Shr {
        d: Slot,
        a: Slot,
        b: Slot,
    },
    Ushr {
        d: Slot,
        a: Slot,
        b: Slot,
    },
    AddI {
        d: Slot,
        a: Slot,
        v: i32,
    },
    SubIR {
        d: Slot,
        v: i32,
        b: Slot,
    },
    MulI {
        d: Slot,
        a: Slot,
        v: i32,
    },
    /// `v` is never 0.
    DivI {
        d: Slot,
        a: Slot,
        v: i32,
    },
    /// `v` is never 0.
    RemI {
        d: Slot,
        a: Slot,
        v: i32,
    },
    AndI {
        d: Slot,
        a: Slot,
        v: i32,
    },
    OrI {
        d: Slot,
        a: Slot,
        v: i32,
    },
    XorI {
        d: Slot,
        a: Slot,
        v: i32,
    },
    ShlI {
        d: Slot,
        a: Slot,
        v: i32,
    },
    ShrI {
        d: Slot,
        a: Slot,
        v: i32,
    },
    UshrI {
        d: Slot,
        a: Slot,
        v: i32,
    },
    Neg {
        d: Slot,
        s: Slot,
    },
    I2b {
        d: Slot,
        s: Slot,
    },
    I2s {
        d: Slot,
        s: Slot,
    },
    /// `iinc`: local `x += v`.
    Inc {
        x: Slot,
        v: i32,
    },
    IfEq {
        a: Slot,
        b: Slot,
        t: u32,
    },
    IfNe {
        a: Slot,
        b: Slot,
        t: u32,
    },
    IfLt {
        a: Slot,
        b: Slot,
        t: u32,
    },
    IfGe {
        a: Slot,
        b: Slot,
        t: u32,
    },
    IfGt {
        a: Slot,
        b: Slot,
        t: u32,
    },
    IfLe {
        a: Slot,
        b: Slot,
        t: u32,
    },
    IfEqI {
        a: Slot,
        v: i32,
        t: u32,
    },
    IfNeI {
        a: Slot,
        v: i32,
        t: u32,
    },
    IfLtI {
        a: Slot,
        v: i32,
        t: u32,
    },
    IfGeI {
        a: Slot,
        v: i32,
        t: u32,
    },
    IfGtI {
        a: Slot,
        v: i32,
        t: u32,
    },
    IfLeI {
        a: Slot,
        v: i32,
        t: u32,
    },
    Goto {
        t: u32,
    },
    /// `d = a / divisor` by multiplication with the method's magic
    /// number `k` ([`DivMagic`]).
    DivM {
        d: Slot,
        a: Slot,
        k: u16,
    },
    /// `d = a % divisor` with the method's magic number `k`.
    RemM {
        d: Slot,
        a: Slot,
        k: u16,
    },
    /// `d = a + b + c` (two fused `iadd`s).
    Add3 {
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
    },
    /// `d = a + b + c + e` (three fused `iadd`s).
    Add4 {
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
        e: Slot,
    },
    /// `d = a + field f` (fused `getstatic`/`getfield` and `iadd`).
    AddF {
        d: Slot,
        a: Slot,
        f: u16,
    },
    /// `iaload` with a constant index.
    IaLoadK {
        d: Slot,
        a: Slot,
        k: i32,
    },
    /// `baload` with a constant index.
    BaLoadK {
        d: Slot,
        a: Slot,
        k: i32,
    },
    /// `iastore` with a constant index.
    IaStoreK {
        a: Slot,
        k: i32,
        s: Slot,
    },
    /// `bastore` on a `byte[]` with a constant index.
    BaStoreK {
        a: Slot,
        k: i32,
        s: Slot,
    },
    /// Fused `iinc x, v` and `if_icmplt x, b` (the back-edge of a counted
    /// loop): falls through past the following op, which is the unfused
    /// branch kept for code jumping to it.
    IncLt {
        x: Slot,
        v: i16,
        b: Slot,
        t: u32,
    },
    /// As [`Op::IncLt`] with `<=`.
    IncLe {
        x: Slot,
        v: i16,
        b: Slot,
        t: u32,
    },
    /// As [`Op::IncLt`] with `!=`.
    IncNe {
        x: Slot,
        v: i16,
        b: Slot,
        t: u32,
    },
    /// As [`Op::IncLt`] with `>`.
    IncGt {
        x: Slot,
        v: i16,
        b: Slot,
        t: u32,
    },
    /// As [`Op::IncLt`] with `>=`.
    IncGe {
        x: Slot,
        v: i16,
        b: Slot,
        t: u32,
    },
    /// Switch on slot `s` with table `tab` of the method.
    Switch {
        s: Slot,
        tab: u16,
    },
    /// Read field `f` (statics and instance fields share one store).
    GetF {
        d: Slot,
        f: u16,
    },
    /// Write an `int` or array field.
    PutF {
        f: u16,
        s: Slot,
    },
    /// Write a `byte` field (narrowing).
    PutFB {
        f: u16,
        s: Slot,
    },
    /// Write a `short` field (narrowing).
    PutFS {
        f: u16,
        s: Slot,
    },
    /// Write a `boolean` field (`v & 1`).
    PutFZ {
        f: u16,
        s: Slot,
    },
    /// Fault if slot `s` holds null.
    NullCheck {
        s: Slot,
    },
    IaLoad {
        d: Slot,
        a: Slot,
        i: Slot,
    },
    /// `baload` on `byte[]` or `boolean[]` (sign-extending).
    BaLoad {
        d: Slot,
        a: Slot,
        i: Slot,
    },
    SaLoad {
        d: Slot,
        a: Slot,
        i: Slot,
    },
    IaStore {
        a: Slot,
        i: Slot,
        s: Slot,
    },
    /// `bastore` on a `byte[]` (truncating).
    BaStore {
        a: Slot,
        i: Slot,
        s: Slot,
    },
    /// `bastore` on a `boolean[]` (stores `v & 1`).
    ZaStore {
        a: Slot,
        i: Slot,
        s: Slot,
    },
    SaStore {
        a: Slot,
        i: Slot,
        s: Slot,
    },
    ArrLen {
        d: Slot,
        a: Slot,
    },
    NewArray {
        d: Slot,
        n: Slot,
        e: Elem,
    },
    /// Call method `m` with its frame starting at slot `at` of this frame.
    Call {
        m: u16,
        at: Slot,
    },
    /// Call bound native `n` with the `argc` arguments `args[k..k+argc]`
    /// of this method (each a slot, a constant or a field, read at the
    /// call), its result (if any) into slot `d`.
    CallNative {
        n: u16,
        d: Slot,
        k: u16,
        argc: u16,
    },
    /// Return slot `s` (int or array).
    Ret {
        s: Slot,
    },
    /// Return a constant.
    RetK {
        v: i32,
    },
    /// Return slot `s` narrowed to a byte.
    RetB {
        s: Slot,
    },
    /// Return slot `s` narrowed to a short.
    RetS {
        s: Slot,
    },
    /// Return slot `s` narrowed to a boolean (`& 1`).
    RetZ {
        s: Slot,
    },
    RetVoid,
}

impl Op {
    /// The destination slot, if this op only computes into one slot.
    pub(super) fn dest_mut(&mut self) -> Option<&mut Slot> {
        match self {
            Op::Mov { d, .. }
            | Op::Const { d, .. }
            | Op::Add { d, .. }
            | Op::Sub { d, .. }
            | Op::Mul { d, .. }
            | Op::Div { d, .. }
            | Op::Rem { d, .. }
            | Op::And { d, .. }
            | Op::Or { d, .. }
            | Op::Xor { d, .. }
            | Op::Shl { d, .. }
            | Op::Shr { d, .. }
            | Op::Ushr { d, .. }
            | Op::AddI { d, .. }
            | Op::SubIR { d, .. }
            | Op::MulI { d, .. }
            | Op::DivI { d, .. }
            | Op::RemI { d, .. }
            | Op::AndI { d, .. }
            | Op::OrI { d, .. }
            | Op::XorI { d, .. }
            | Op::ShlI { d, .. }
            | Op::ShrI { d, .. }
            | Op::UshrI { d, .. }
            | Op::Neg { d, .. }
            | Op::I2b { d, .. }
            | Op::I2s { d, .. }
            | Op::GetF { d, .. }
            | Op::IaLoad { d, .. }
            | Op::BaLoad { d, .. }
            | Op::SaLoad { d, .. }
            | Op::ArrLen { d, .. }
            | Op::NewArray { d, .. }
            | Op::Add3 { d, .. }
            | Op::Add4 { d, .. }
            | Op::AddF { d, .. }
            | Op::IaLoadK { d, .. }
            | Op::BaLoadK { d, .. }
            | Op::DivM { d, .. }
            | Op::RemM { d, .. }
            | Op::CallNative { d, .. } => Some(d),
            _ => None,
        }
    }

    /// The destination slot, if this op only computes into one slot
    /// ([`Op::Inc`], the fused increments and calls write theirs
    /// otherwise). The compiler's.
    #[cfg(feature = "jit")]
    pub(crate) fn dest(self) -> Option<Slot> {
        let mut op = self;
        op.dest_mut().copied()
    }

    /// The op index a branch goes to when taken (`None` for ops that are
    /// not branches, switches included). The compiler's.
    #[cfg(feature = "jit")]
    pub(crate) fn target(self) -> Option<u32> {
        let mut op = self;
        op.target_mut().copied()
    }

    pub(super) fn target_mut(&mut self) -> Option<&mut u32> {
        match self {
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
            | Op::IfLeI { t, .. }
            | Op::IncLt { t, .. }
            | Op::IncLe { t, .. }
            | Op::IncNe { t, .. }
            | Op::IncGt { t, .. }
            | Op::IncGe { t, .. }
            | Op::Goto { t } => Some(t),
            _ => None,
        }
    }
}

/// A switch table (targets are op indices).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchTable {
    /// Dense (`tableswitch`): key `keys[0] + i` goes to `targets[i]`.
    pub dense: bool,
    /// Keys, ascending.
    pub keys: Vec<i32>,
    /// Targets.
    pub targets: Vec<u32>,
    /// Default target.
    pub default: u32,
}

impl SwitchTable {
    /// Fuel the switch charges besides the jump: nothing for a
    /// `tableswitch` (one indexed jump), the depth of the binary search for
    /// a `lookupswitch` of `n` keys (`floor(log2 n) + 1`). Compiled code
    /// charges the same.
    #[inline]
    pub(crate) fn cost(&self) -> i64 {
        if self.dense {
            0
        } else {
            (usize::BITS - self.keys.len().leading_zeros()) as i64
        }
    }

    /// The target for `key`.
    #[inline]
    pub fn lookup(&self, key: i32) -> u32 {
        if self.dense {
            let i = (key as i64 - self.keys[0] as i64) as u64;
            match self.targets.get(i.min(usize::MAX as u64) as usize) {
                Some(t) if (i as usize) < self.targets.len() => *t,
                _ => self.default,
            }
        } else {
            match self.keys.binary_search(&key) {
                Ok(i) => self.targets[i],
                Err(_) => self.default,
            }
        }
    }
}

/// Where an argument of a native call comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    /// A frame slot.
    S(Slot),
    /// A constant.
    K(i32),
    /// A field of the applet.
    F(u16),
}

/// A decoded method.
#[derive(Clone, Debug)]
pub struct MethodCode {
    /// The ops.
    pub ops: Vec<Op>,
    /// Arguments of the native calls ([`Op::CallNative`]).
    pub args: Vec<Arg>,
    /// Bytecode offset of the instruction each op came from.
    pub offsets: Vec<u32>,
    /// Switch tables.
    pub switches: Vec<SwitchTable>,
    /// Magic numbers of divisions by constants.
    pub divs: Vec<DivMagic>,
    /// Slots of a frame (locals, stack, scratch), at least 1.
    pub frame_size: u16,
    /// Argument slots (`this` included for instance methods).
    pub nargs: u16,
    /// Method name and descriptor, for fault reports.
    pub name: String,
    /// Static method.
    pub is_static: bool,
    /// All parameters are `int` (the host's arguments need no checks).
    pub int_params: bool,
    /// Returns a value.
    pub returns: bool,
    /// `<init>` or `<clinit>` (not invocable by the host).
    pub internal: bool,
}

impl Op {
    /// The frame slots this op reads or writes (unused entries repeat 0).
    pub fn slots(&self) -> [Slot; 5] {
        let [x, y, z] = self.slots3();
        match *self {
            Op::Add3 { d, a, b, c } => [d, a, b, c, 0],
            Op::Add4 { d, a, b, c, e } => [d, a, b, c, e],
            _ => [x, y, z, 0, 0],
        }
    }

    fn slots3(&self) -> [Slot; 3] {
        match *self {
            Op::Add3 { .. } | Op::Add4 { .. } => [0, 0, 0],
            Op::DivM { d, a, .. } | Op::RemM { d, a, .. } => [d, a, 0],
            Op::AddF { d, a, .. } | Op::IaLoadK { d, a, .. } | Op::BaLoadK { d, a, .. } => {
                [d, a, 0]
            }
            Op::IaStoreK { a, s, .. } | Op::BaStoreK { a, s, .. } => [a, s, 0],
            Op::Mov { d, s } | Op::Neg { d, s } | Op::I2b { d, s } | Op::I2s { d, s } => [d, s, 0],
            Op::Const { d, .. } | Op::GetF { d, .. } => [d, 0, 0],
            Op::Add { d, a, b }
            | Op::Sub { d, a, b }
            | Op::Mul { d, a, b }
            | Op::Div { d, a, b }
            | Op::Rem { d, a, b }
            | Op::And { d, a, b }
            | Op::Or { d, a, b }
            | Op::Xor { d, a, b }
            | Op::Shl { d, a, b }
            | Op::Shr { d, a, b }
            | Op::Ushr { d, a, b } => [d, a, b],
            Op::AddI { d, a, .. }
            | Op::MulI { d, a, .. }
            | Op::DivI { d, a, .. }
            | Op::RemI { d, a, .. }
            | Op::AndI { d, a, .. }
            | Op::OrI { d, a, .. }
            | Op::XorI { d, a, .. }
            | Op::ShlI { d, a, .. }
            | Op::ShrI { d, a, .. }
            | Op::UshrI { d, a, .. } => [d, a, 0],
            Op::SubIR { d, b, .. } => [d, b, 0],
            Op::Inc { x, .. } => [x, 0, 0],
            Op::IncLt { x, b, .. }
            | Op::IncLe { x, b, .. }
            | Op::IncNe { x, b, .. }
            | Op::IncGt { x, b, .. }
            | Op::IncGe { x, b, .. } => [x, b, 0],
            Op::IfEq { a, b, .. }
            | Op::IfNe { a, b, .. }
            | Op::IfLt { a, b, .. }
            | Op::IfGe { a, b, .. }
            | Op::IfGt { a, b, .. }
            | Op::IfLe { a, b, .. } => [a, b, 0],
            Op::IfEqI { a, .. }
            | Op::IfNeI { a, .. }
            | Op::IfLtI { a, .. }
            | Op::IfGeI { a, .. }
            | Op::IfGtI { a, .. }
            | Op::IfLeI { a, .. } => [a, 0, 0],
            Op::Goto { .. } | Op::RetK { .. } | Op::RetVoid => [0, 0, 0],
            Op::Switch { s, .. }
            | Op::PutF { s, .. }
            | Op::PutFB { s, .. }
            | Op::PutFS { s, .. }
            | Op::PutFZ { s, .. }
            | Op::NullCheck { s }
            | Op::Ret { s }
            | Op::RetB { s }
            | Op::RetS { s }
            | Op::RetZ { s } => [s, 0, 0],
            Op::IaLoad { d, a, i } | Op::BaLoad { d, a, i } | Op::SaLoad { d, a, i } => [d, a, i],
            Op::IaStore { a, i, s }
            | Op::BaStore { a, i, s }
            | Op::ZaStore { a, i, s }
            | Op::SaStore { a, i, s } => [a, i, s],
            Op::ArrLen { d, a } => [d, a, 0],
            Op::NewArray { d, n, .. } => [d, n, 0],
            Op::Call { at, .. } => [at, 0, 0],
            Op::CallNative { d, .. } => [d, 0, 0],
        }
    }

    /// True if control never continues with the next op.
    pub fn is_terminator(&self) -> bool {
        matches!(self, Op::Goto { .. } | Op::Switch { .. }) || self.is_return()
    }

    /// True for the ops that return from the method.
    pub fn is_return(&self) -> bool {
        matches!(
            self,
            Op::Ret { .. }
                | Op::RetK { .. }
                | Op::RetB { .. }
                | Op::RetS { .. }
                | Op::RetZ { .. }
                | Op::RetVoid
        )
    }
}
