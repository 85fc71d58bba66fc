//! Stage 3, first half: the bytecode. The subset's instructions ([`Ins`]) and the
//! parser that splits a method's code into them (`wide`, and the padding
//! of `tableswitch`/`lookupswitch`, handled; branch targets checked to be
//! instruction starts inside the code), each checked against the JIVE
//! subset with its constant-pool operands resolved against the class
//! (`Model`, see `subset`). The verifier (`verify.rs`) runs its dataflow
//! over what this gives it; the lowering (`decode/`) reads the same
//! instructions. The parser and the verifier refuse a method with a
//! [`VerifyError`] (`error.rs`): the offset of the instruction at fault,
//! if any, and a [`VerifyErrorKind`], whose text is the reason the
//! `Rejection` gives.

mod error;

pub use error::{VerifyError, VerifyErrorKind};

use crate::model::{Callee, Elem, MethodDef, Model};

/// Binary integer operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `iadd`
    Add,
    /// `isub`
    Sub,
    /// `imul`
    Mul,
    /// `idiv`
    Div,
    /// `irem`
    Rem,
    /// `iand`
    And,
    /// `ior`
    Or,
    /// `ixor`
    Xor,
    /// `ishl`
    Shl,
    /// `ishr`
    Shr,
    /// `iushr`
    Ushr,
}

/// Branch conditions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `>=`
    Ge,
    /// `>`
    Gt,
    /// `<=`
    Le,
}

impl Cond {
    /// The condition with operands swapped (`a < b` is `b > a`).
    pub fn swap(self) -> Cond {
        match self {
            Cond::Eq => Cond::Eq,
            Cond::Ne => Cond::Ne,
            Cond::Lt => Cond::Gt,
            Cond::Ge => Cond::Le,
            Cond::Gt => Cond::Lt,
            Cond::Le => Cond::Ge,
        }
    }
}

/// Which array family an array load or store names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrOp {
    /// `iaload`/`iastore`.
    Int,
    /// `baload`/`bastore` (byte or boolean arrays).
    ByteBool,
    /// `saload`/`sastore`.
    Short,
}

/// Switch tables (targets are instruction indices after parsing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Switch {
    /// Default target.
    pub default: u32,
    /// Keys, ascending (for `tableswitch`, `low..=high`).
    pub keys: Vec<i32>,
    /// Target per key.
    pub targets: Vec<u32>,
    /// True for `tableswitch` (keys are consecutive from `keys[0]`).
    pub dense: bool,
}

/// A parsed instruction of the subset. Targets are instruction indices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ins {
    /// `nop`
    Nop,
    /// An int constant (`iconst_*`, `bipush`, `sipush`, `ldc` of an int).
    Const(i32),
    /// `aconst_null`
    Null,
    /// `iload`
    ILoad(u16),
    /// `aload`
    ALoad(u16),
    /// `istore`
    IStore(u16),
    /// `astore`
    AStore(u16),
    /// `iaload`, `baload`, `saload`
    ArrLoad(ArrOp),
    /// `iastore`, `bastore`, `sastore`
    ArrStore(ArrOp),
    /// `arraylength`
    ArrayLength,
    /// `pop`
    Pop,
    /// `pop2` (two category-1 values: the subset has no others)
    Pop2,
    /// `dup`
    Dup,
    /// `dup_x1`
    DupX1,
    /// `dup_x2`
    DupX2,
    /// `dup2`
    Dup2,
    /// `dup2_x1`
    Dup2X1,
    /// `dup2_x2`
    Dup2X2,
    /// `swap`
    Swap,
    /// Binary int arithmetic.
    Bin(BinOp),
    /// `ineg`
    Neg,
    /// `i2b`
    I2b,
    /// `i2s`
    I2s,
    /// `iinc`
    Inc(u16, i32),
    /// `if<cond>` (compare with zero)
    If(Cond, u32),
    /// `if_icmp<cond>`
    IfCmp(Cond, u32),
    /// `if_acmpeq` (true) / `if_acmpne` (false)
    IfACmp(bool, u32),
    /// `ifnull` (true) / `ifnonnull` (false)
    IfNull(bool, u32),
    /// `goto`, `goto_w`
    Goto(u32),
    /// `tableswitch`, `lookupswitch`
    Switch(Box<Switch>),
    /// `ireturn`
    IReturn,
    /// `areturn`
    AReturn,
    /// `return`
    Return,
    /// `getstatic` (field index)
    GetStatic(u16),
    /// `putstatic`
    PutStatic(u16),
    /// `getfield`
    GetField(u16),
    /// `putfield`
    PutField(u16),
    /// `invokestatic`, `invokevirtual`, `invokespecial` (static flag)
    Invoke(bool, Callee),
    /// `newarray`
    NewArray(Elem),
    /// `checkcast` to an array type of the subset (a no-op after verify).
    CheckCast(Elem),
    /// `ldc` of a string naming a static `(II)V` method of the class (its
    /// index): a *method name*, usable only as a native's
    /// `Ljava/lang/String;` argument, passed as the index.
    MethodName(u16),
}

fn opcode_name(op: u8) -> &'static str {
    const NAMES: [&str; 202] = [
        "nop",
        "aconst_null",
        "iconst_m1",
        "iconst_0",
        "iconst_1",
        "iconst_2",
        "iconst_3",
        "iconst_4",
        "iconst_5",
        "lconst_0",
        "lconst_1",
        "fconst_0",
        "fconst_1",
        "fconst_2",
        "dconst_0",
        "dconst_1",
        "bipush",
        "sipush",
        "ldc",
        "ldc_w",
        "ldc2_w",
        "iload",
        "lload",
        "fload",
        "dload",
        "aload",
        "iload_0",
        "iload_1",
        "iload_2",
        "iload_3",
        "lload_0",
        "lload_1",
        "lload_2",
        "lload_3",
        "fload_0",
        "fload_1",
        "fload_2",
        "fload_3",
        "dload_0",
        "dload_1",
        "dload_2",
        "dload_3",
        "aload_0",
        "aload_1",
        "aload_2",
        "aload_3",
        "iaload",
        "laload",
        "faload",
        "daload",
        "aaload",
        "baload",
        "caload",
        "saload",
        "istore",
        "lstore",
        "fstore",
        "dstore",
        "astore",
        "istore_0",
        "istore_1",
        "istore_2",
        "istore_3",
        "lstore_0",
        "lstore_1",
        "lstore_2",
        "lstore_3",
        "fstore_0",
        "fstore_1",
        "fstore_2",
        "fstore_3",
        "dstore_0",
        "dstore_1",
        "dstore_2",
        "dstore_3",
        "astore_0",
        "astore_1",
        "astore_2",
        "astore_3",
        "iastore",
        "lastore",
        "fastore",
        "dastore",
        "aastore",
        "bastore",
        "castore",
        "sastore",
        "pop",
        "pop2",
        "dup",
        "dup_x1",
        "dup_x2",
        "dup2",
        "dup2_x1",
        "dup2_x2",
        "swap",
        "iadd",
        "ladd",
        "fadd",
        "dadd",
        "isub",
        "lsub",
        "fsub",
        "dsub",
        "imul",
        "lmul",
        "fmul",
        "dmul",
        "idiv",
        "ldiv",
        "fdiv",
        "ddiv",
        "irem",
        "lrem",
        "frem",
        "drem",
        "ineg",
        "lneg",
        "fneg",
        "dneg",
        "ishl",
        "lshl",
        "ishr",
        "lshr",
        "iushr",
        "lushr",
        "iand",
        "land",
        "ior",
        "lor",
        "ixor",
        "lxor",
        "iinc",
        "i2l",
        "i2f",
        "i2d",
        "l2i",
        "l2f",
        "l2d",
        "f2i",
        "f2l",
        "f2d",
        "d2i",
        "d2l",
        "d2f",
        "i2b",
        "i2c",
        "i2s",
        "lcmp",
        "fcmpl",
        "fcmpg",
        "dcmpl",
        "dcmpg",
        "ifeq",
        "ifne",
        "iflt",
        "ifge",
        "ifgt",
        "ifle",
        "if_icmpeq",
        "if_icmpne",
        "if_icmplt",
        "if_icmpge",
        "if_icmpgt",
        "if_icmple",
        "if_acmpeq",
        "if_acmpne",
        "goto",
        "jsr",
        "ret",
        "tableswitch",
        "lookupswitch",
        "ireturn",
        "lreturn",
        "freturn",
        "dreturn",
        "areturn",
        "return",
        "getstatic",
        "putstatic",
        "getfield",
        "putfield",
        "invokevirtual",
        "invokespecial",
        "invokestatic",
        "invokeinterface",
        "invokedynamic",
        "new",
        "newarray",
        "anewarray",
        "arraylength",
        "athrow",
        "checkcast",
        "instanceof",
        "monitorenter",
        "monitorexit",
        "wide",
        "multianewarray",
        "ifnull",
        "ifnonnull",
        "goto_w",
        "jsr_w",
    ];
    NAMES.get(op as usize).copied().unwrap_or("reserved")
}

struct Code<'a> {
    b: &'a [u8],
}

impl Code<'_> {
    fn u8(&self, at: usize) -> Result<u8, VerifyErrorKind> {
        self.b.get(at).copied().ok_or(VerifyErrorKind::Truncated)
    }
    fn u16(&self, at: usize) -> Result<u16, VerifyErrorKind> {
        Ok(u16::from_be_bytes([self.u8(at)?, self.u8(at + 1)?]))
    }
    fn i32(&self, at: usize) -> Result<i32, VerifyErrorKind> {
        Ok(i32::from_be_bytes([
            self.u8(at)?,
            self.u8(at + 1)?,
            self.u8(at + 2)?,
            self.u8(at + 3)?,
        ]))
    }
}

/// The method a string constant (text at `utf8`) names: a static `(II)V`
/// method of the class, the only use of a string in the subset.
fn method_name(model: &Model<'_>, op: &'static str, utf8: u16) -> Result<u16, VerifyErrorKind> {
    let text = model
        .cf
        .utf8_at(utf8, "string")
        .map_err(|r| VerifyErrorKind::Resolve(r.reason))?;
    let pos = model.methods.iter().position(|m| m.name == text);
    match pos {
        Some(i) if model.methods[i].is_static && model.methods[i].descriptor == "(II)V" => {
            Ok(i as u16)
        }
        _ => Err(VerifyErrorKind::StringConstant {
            op,
            text: text.to_string(),
            names: pos.map(|i| {
                let m = &model.methods[i];
                (m.descriptor.clone(), m.is_static)
            }),
        }),
    }
}

/// Parse the code into instructions with byte-offset targets.
pub(crate) fn parse(
    model: &Model<'_>,
    m: &MethodDef,
    code: &[u8],
) -> Result<Vec<(u32, Ins)>, VerifyError> {
    let c = Code { b: code };
    let mut out = Vec::new();
    let mut pc = 0usize;
    while pc < code.len() {
        let at = pc;
        let err = |k: VerifyErrorKind| VerifyError::at(at as u32, k);
        let op = code[pc];
        let name = opcode_name(op);
        let rel16 = |o: usize| -> Result<u32, VerifyErrorKind> {
            let d = c.u16(o)? as i16 as i64;
            Ok((at as i64 + d) as u32)
        };
        let (ins, len) = match op {
            0 => (Ins::Nop, 1),
            1 => (Ins::Null, 1),
            2..=8 => (Ins::Const(op as i32 - 3), 1),
            16 => (Ins::Const(c.u8(pc + 1).map_err(err)? as i8 as i32), 2),
            17 => (Ins::Const(c.u16(pc + 1).map_err(err)? as i16 as i32), 3),
            18 | 19 => {
                let (idx, len) = if op == 18 {
                    (c.u8(pc + 1).map_err(err)? as u16, 2)
                } else {
                    (c.u16(pc + 1).map_err(err)?, 3)
                };
                match model.cf.cp.get(idx as usize) {
                    Some(crate::classfile::Cp::Integer(v)) => (Ins::Const(*v), len),
                    Some(crate::classfile::Cp::String(u)) => (
                        Ins::MethodName(method_name(model, name, *u).map_err(err)?),
                        len,
                    ),
                    Some(e) => {
                        let what = match e {
                            crate::classfile::Cp::Float => "a float",
                            crate::classfile::Cp::Class(_) => "a class",
                            _ => "a constant outside the subset",
                        };
                        return Err(err(VerifyErrorKind::Constant { op: name, what }));
                    }
                    None => {
                        return Err(err(VerifyErrorKind::ConstantIndex { op: name, idx }));
                    }
                }
            }
            21 | 25 | 54 | 58 => {
                let x = c.u8(pc + 1).map_err(err)? as u16;
                (
                    match op {
                        21 => Ins::ILoad(x),
                        25 => Ins::ALoad(x),
                        54 => Ins::IStore(x),
                        _ => Ins::AStore(x),
                    },
                    2,
                )
            }
            26..=29 => (Ins::ILoad((op - 26) as u16), 1),
            42..=45 => (Ins::ALoad((op - 42) as u16), 1),
            59..=62 => (Ins::IStore((op - 59) as u16), 1),
            75..=78 => (Ins::AStore((op - 75) as u16), 1),
            46 => (Ins::ArrLoad(ArrOp::Int), 1),
            51 => (Ins::ArrLoad(ArrOp::ByteBool), 1),
            53 => (Ins::ArrLoad(ArrOp::Short), 1),
            79 => (Ins::ArrStore(ArrOp::Int), 1),
            84 => (Ins::ArrStore(ArrOp::ByteBool), 1),
            86 => (Ins::ArrStore(ArrOp::Short), 1),
            87 => (Ins::Pop, 1),
            88 => (Ins::Pop2, 1),
            89 => (Ins::Dup, 1),
            90 => (Ins::DupX1, 1),
            91 => (Ins::DupX2, 1),
            92 => (Ins::Dup2, 1),
            93 => (Ins::Dup2X1, 1),
            94 => (Ins::Dup2X2, 1),
            95 => (Ins::Swap, 1),
            96 => (Ins::Bin(BinOp::Add), 1),
            100 => (Ins::Bin(BinOp::Sub), 1),
            104 => (Ins::Bin(BinOp::Mul), 1),
            108 => (Ins::Bin(BinOp::Div), 1),
            112 => (Ins::Bin(BinOp::Rem), 1),
            116 => (Ins::Neg, 1),
            120 => (Ins::Bin(BinOp::Shl), 1),
            122 => (Ins::Bin(BinOp::Shr), 1),
            124 => (Ins::Bin(BinOp::Ushr), 1),
            126 => (Ins::Bin(BinOp::And), 1),
            128 => (Ins::Bin(BinOp::Or), 1),
            130 => (Ins::Bin(BinOp::Xor), 1),
            132 => (
                Ins::Inc(
                    c.u8(pc + 1).map_err(err)? as u16,
                    c.u8(pc + 2).map_err(err)? as i8 as i32,
                ),
                3,
            ),
            145 => (Ins::I2b, 1),
            147 => (Ins::I2s, 1),
            153..=164 => {
                let cond = [Cond::Eq, Cond::Ne, Cond::Lt, Cond::Ge, Cond::Gt, Cond::Le]
                    [((op - 153) % 6) as usize];
                let t = rel16(pc + 1).map_err(err)?;
                (
                    if op < 159 {
                        Ins::If(cond, t)
                    } else {
                        Ins::IfCmp(cond, t)
                    },
                    3,
                )
            }
            165 | 166 => (Ins::IfACmp(op == 165, rel16(pc + 1).map_err(err)?), 3),
            198 | 199 => (Ins::IfNull(op == 198, rel16(pc + 1).map_err(err)?), 3),
            167 => (Ins::Goto(rel16(pc + 1).map_err(err)?), 3),
            200 => {
                let d = c.i32(pc + 1).map_err(err)? as i64;
                (
                    Ins::Goto((at as i64 + d).clamp(-1, u32::MAX as i64) as u32),
                    5,
                )
            }
            170 | 171 => {
                let mut p = (pc + 4) & !3;
                let target = |d: i32| (at as i64 + d as i64).clamp(-1, u32::MAX as i64) as u32;
                let default = target(c.i32(p).map_err(err)?);
                let mut sw = Switch {
                    default,
                    keys: Vec::new(),
                    targets: Vec::new(),
                    dense: op == 170,
                };
                if op == 170 {
                    let low = c.i32(p + 4).map_err(err)?;
                    let high = c.i32(p + 8).map_err(err)?;
                    if high < low {
                        return Err(err(VerifyErrorKind::TableSwitchRange { low, high }));
                    }
                    let n = (high as i64 - low as i64 + 1) as usize;
                    p += 12;
                    if n > (code.len() - p.min(code.len())) / 4 {
                        return Err(err(VerifyErrorKind::TableSwitchTruncated));
                    }
                    for k in 0..n {
                        sw.keys.push(low.wrapping_add(k as i32));
                        sw.targets.push(target(c.i32(p + 4 * k).map_err(err)?));
                    }
                    p += 4 * n;
                } else {
                    let n = c.i32(p + 4).map_err(err)?;
                    p += 8;
                    if n < 0 || n as usize > (code.len() - p.min(code.len())) / 8 {
                        return Err(err(VerifyErrorKind::LookupSwitchCount(n)));
                    }
                    for k in 0..n as usize {
                        let key = c.i32(p + 8 * k).map_err(err)?;
                        if let Some(&last) = sw.keys.last() {
                            if key <= last {
                                return Err(err(VerifyErrorKind::LookupSwitchUnsorted));
                            }
                        }
                        sw.keys.push(key);
                        sw.targets.push(target(c.i32(p + 8 * k + 4).map_err(err)?));
                    }
                    p += 8 * n as usize;
                }
                (Ins::Switch(Box::new(sw)), p - pc)
            }
            172 => (Ins::IReturn, 1),
            176 => (Ins::AReturn, 1),
            177 => (Ins::Return, 1),
            178..=181 => {
                let idx = c.u16(pc + 1).map_err(err)?;
                let is_static = op <= 179;
                let f = model
                    .resolve_field(idx, is_static, name)
                    .map_err(|r| err(VerifyErrorKind::Resolve(r)))?;
                (
                    match op {
                        178 => Ins::GetStatic(f),
                        179 => Ins::PutStatic(f),
                        180 => Ins::GetField(f),
                        _ => Ins::PutField(f),
                    },
                    3,
                )
            }
            182..=184 => {
                let idx = c.u16(pc + 1).map_err(err)?;
                let callee = model
                    .resolve_method(idx, name, m)
                    .map_err(|r| err(VerifyErrorKind::Resolve(r)))?;
                (Ins::Invoke(op == 184, callee), 3)
            }
            188 => {
                let t = c.u8(pc + 1).map_err(err)?;
                let e = match t {
                    4 => Elem::Bool,
                    8 => Elem::Byte,
                    9 => Elem::Short,
                    10 => Elem::Int,
                    _ => return Err(err(VerifyErrorKind::NewArrayType(t))),
                };
                (Ins::NewArray(e), 2)
            }
            190 => (Ins::ArrayLength, 1),
            192 | 193 => {
                let idx = c.u16(pc + 1).map_err(err)?;
                let cname = model
                    .cf
                    .class_name_at(idx, name)
                    .map_err(|r| err(VerifyErrorKind::Resolve(r.reason)))?
                    .to_string();
                let e = match (op, cname.as_str()) {
                    (192, "[B") => Elem::Byte,
                    (192, "[Z") => Elem::Bool,
                    (192, "[S") => Elem::Short,
                    (192, "[I") => Elem::Int,
                    _ => {
                        return Err(err(VerifyErrorKind::CheckCastClass {
                            op: name,
                            class: cname,
                        }));
                    }
                };
                (Ins::CheckCast(e), 3)
            }
            196 => {
                let op2 = c.u8(pc + 1).map_err(err)?;
                let x = c.u16(pc + 2).map_err(err)?;
                match op2 {
                    21 => (Ins::ILoad(x), 4),
                    25 => (Ins::ALoad(x), 4),
                    54 => (Ins::IStore(x), 4),
                    58 => (Ins::AStore(x), 4),
                    132 => (Ins::Inc(x, c.u16(pc + 4).map_err(err)? as i16 as i32), 6),
                    _ => return Err(err(VerifyErrorKind::Wide(op2))),
                }
            }
            _ => return Err(err(VerifyErrorKind::Opcode(op))),
        };
        out.push((at as u32, ins));
        pc += len;
    }
    Ok(out)
}
