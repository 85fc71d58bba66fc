//! Stage 3: instruction parsing and the type-inference verifier.
//!
//! Every method's bytecode is first split into instructions (`wide`, and the
//! padding of `tableswitch`/`lookupswitch`, handled; branch targets checked
//! to be instruction starts inside the code), and each instruction is
//! checked against the JIVE subset, with its constant-pool operands resolved
//! against the class (`Model`, see `subset`). Then a dataflow pass infers
//! the type of every local and stack slot at every instruction, as the JVM
//! specification's type-inference verifier does (JVMS §4.10.2), over the
//! subset's types: `int` (for `int`, `short`, `byte`, `boolean`), `null`,
//! `this`, uninitialised `this` and the four array types. `StackMapTable`
//! is ignored, so class files of every version are verified the same way.
//!
//! It checks: operand types of every instruction; stack height within
//! `max_stack` and never negative; locals within `max_locals` and
//! initialised (arguments count as initialised) before use; equal stack
//! heights and compatible stack types where paths merge (locals that
//! conflict become unusable); no falling off the end of the code; returns
//! matching the descriptor; field and call operands matching the member's
//! descriptor; in `<init>`, `this` used only by the `Object.<init>` super
//! call until that call, which must happen exactly once on every path to a
//! return.
//!
//! Verification itself is bounded: a method whose blocks × frame slots
//! exceed 4 Mi, or whose dataflow needs more than 50 M steps, is rejected
//! as too complex (real methods are far below both).
//!
//! It does **not** check: anything about unreachable code beyond its
//! syntax (it is never decoded or run); termination or running time (fuel
//! does that at run time); array bounds, null references, division by zero
//! (run-time faults); recursion depth and heap use (run-time limits);
//! `StackMapTable` contents, line numbers or other debug attributes; access
//! flags of members (all members are in the one class, so private/public
//! make no difference to safety); `final` fields being assigned more than
//! once.

use crate::classfile::CodeInfo;
use crate::model::{Callee, Elem, JType, MethodDef, Model};

/// A verification failure: bytecode offset (if any) and reason.
pub type VerifyError = (Option<u32>, String);

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

/// Verifier type of a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VType {
    /// Unusable (uninitialised or conflicting).
    Top,
    /// `int` (and `short`, `byte`, `boolean`).
    Int,
    /// The `null` reference.
    Null,
    /// The applet instance.
    This,
    /// The applet instance before `Object.<init>` was called.
    UninitThis,
    /// An array.
    Arr(Elem),
    /// A method name (a string literal naming method `.0`), see
    /// [`Ins::MethodName`].
    MethodName(u16),
}

impl VType {
    fn of(t: JType) -> VType {
        match t {
            JType::Array(e) => VType::Arr(e),
            _ => VType::Int,
        }
    }
    fn is_ref(self) -> bool {
        matches!(
            self,
            VType::Null | VType::This | VType::UninitThis | VType::Arr(_)
        )
    }
    fn name(self) -> &'static str {
        match self {
            VType::Top => "an unusable value",
            VType::Int => "int",
            VType::Null => "null",
            VType::This => "this",
            VType::UninitThis => "uninitialised this",
            VType::Arr(e) => match e {
                Elem::Byte => "byte[]",
                Elem::Bool => "boolean[]",
                Elem::Short => "short[]",
                Elem::Int => "int[]",
            },
            VType::MethodName(_) => "a method name",
        }
    }
}

/// Per-instruction results of verification, used by the decoder.
#[derive(Clone, Debug)]
pub struct Insn {
    /// Bytecode offset.
    pub offset: u32,
    /// The instruction.
    pub ins: Ins,
    /// Reached by the dataflow (unreachable code is never decoded).
    pub reachable: bool,
    /// Operand-stack height before the instruction.
    pub height: u16,
    /// For array loads/stores/arraylength: the array's static kind (`None`
    /// when it is always `null`).
    pub arr: Option<Elem>,
    /// A branch target (or instruction 0): starts a basic block.
    pub leader: bool,
}

/// A verified method.
#[derive(Clone, Debug)]
pub struct Verified {
    /// Instructions in code order.
    pub insns: Vec<Insn>,
    /// Whether local 0 is ever stored to (if not, in an instance method it
    /// always holds `this`).
    pub local0_written: bool,
}

/// Limit on (basic blocks × frame slots) kept by the verifier.
const MAX_STATE_SLOTS: usize = 1 << 22;

/// Limit on verification work per method (instruction steps plus slots
/// copied or merged), so that a hostile method cannot make loading slow.
/// Real methods need a tiny fraction of it.
const MAX_WORK: u64 = 50_000_000;

/// Limit on verification work over all the methods of one class, in the
/// units of the per-method limit (instruction steps plus frame slots
/// created, copied or merged; a unit is about a nanosecond): without it, a
/// class of thousands of methods each just under the per-method limit
/// took minutes to load. 200 million units are a few hundred milliseconds
/// on a current machine; real classes need a tiny fraction of them.
pub const MAX_CLASS_WORK: u64 = 200_000_000;

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
    fn u8(&self, at: usize) -> Result<u8, String> {
        self.b
            .get(at)
            .copied()
            .ok_or_else(|| "instruction runs past the end of the code".into())
    }
    fn u16(&self, at: usize) -> Result<u16, String> {
        Ok(u16::from_be_bytes([self.u8(at)?, self.u8(at + 1)?]))
    }
    fn i32(&self, at: usize) -> Result<i32, String> {
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
fn method_name(model: &Model<'_>, op: &str, utf8: u16) -> Result<u16, String> {
    let text = model.cf.utf8_at(utf8, "string").map_err(|r| r.reason)?;
    let not = format!(
        "{op} of a string is not supported (only as the name of a static (II)V method \
         of this class)"
    );
    match model.methods.iter().position(|m| m.name == text) {
        Some(i) if model.methods[i].is_static && model.methods[i].descriptor == "(II)V" => {
            Ok(i as u16)
        }
        Some(i) => Err(format!(
            "{not}: \"{text}\" names {text}{}{}",
            model.methods[i].descriptor,
            if model.methods[i].is_static {
                ""
            } else {
                ", which is not static"
            }
        )),
        None => Err(format!("{not}: \"{text}\" names no method")),
    }
}

/// Parse the code into instructions with byte-offset targets.
fn parse(model: &Model<'_>, m: &MethodDef, code: &[u8]) -> Result<Vec<(u32, Ins)>, VerifyError> {
    let c = Code { b: code };
    let mut out = Vec::new();
    let mut pc = 0usize;
    while pc < code.len() {
        let at = pc;
        let err = |s: String| (Some(at as u32), s);
        let op = code[pc];
        let name = opcode_name(op);
        let rel16 = |o: usize| -> Result<u32, String> {
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
                        return Err(err(format!("{name} of {what} is not supported")));
                    }
                    None => return Err(err(format!("{name}: bad constant pool index {idx}"))),
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
                        return Err(err(format!("tableswitch high {high} < low {low}")));
                    }
                    let n = (high as i64 - low as i64 + 1) as usize;
                    p += 12;
                    if n > (code.len() - p.min(code.len())) / 4 {
                        return Err(err("tableswitch runs past the end of the code".into()));
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
                        return Err(err(format!("lookupswitch pair count {n} is invalid")));
                    }
                    for k in 0..n as usize {
                        let key = c.i32(p + 8 * k).map_err(err)?;
                        if let Some(&last) = sw.keys.last() {
                            if key <= last {
                                return Err(err("lookupswitch keys are not sorted".into()));
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
                let f = model.resolve_field(idx, is_static, name).map_err(err)?;
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
                let callee = model.resolve_method(idx, name, m).map_err(err)?;
                (Ins::Invoke(op == 184, callee), 3)
            }
            188 => {
                let t = c.u8(pc + 1).map_err(err)?;
                let e = match t {
                    4 => Elem::Bool,
                    8 => Elem::Byte,
                    9 => Elem::Short,
                    10 => Elem::Int,
                    5 => return Err(err("newarray of char is not supported".into())),
                    6 | 7 | 11 => {
                        return Err(err(
                            "newarray of long, float or double is not supported".into()
                        ))
                    }
                    _ => return Err(err(format!("newarray with invalid type code {t}"))),
                };
                (Ins::NewArray(e), 2)
            }
            190 => (Ins::ArrayLength, 1),
            192 | 193 => {
                let idx = c.u16(pc + 1).map_err(err)?;
                let cname = model
                    .cf
                    .class_name_at(idx, name)
                    .map_err(|r| err(r.reason))?
                    .to_string();
                let e = match (op, cname.as_str()) {
                    (192, "[B") => Elem::Byte,
                    (192, "[Z") => Elem::Bool,
                    (192, "[S") => Elem::Short,
                    (192, "[I") => Elem::Int,
                    _ => {
                        return Err(err(format!("{name} to {cname} is not supported")));
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
                    _ => return Err(err(format!("wide {} is not supported", opcode_name(op2)))),
                }
            }
            187 => {
                return Err(err(
                    "new is not supported (only arrays may be allocated)".into()
                ))
            }
            191 => return Err(err("athrow is not supported (no exceptions)".into())),
            194 | 195 => return Err(err(format!("{name} is not supported (no threads)"))),
            168 | 169 | 201 => return Err(err(format!("{name} is not supported"))),
            185 => return Err(err("invokeinterface is not supported".into())),
            186 => return Err(err("invokedynamic is not supported".into())),
            189 => {
                return Err(err(
                    "anewarray is not supported (arrays of references)".into()
                ))
            }
            197 => return Err(err("multianewarray is not supported".into())),
            9..=15
            | 20
            | 22..=24
            | 30..=41
            | 47..=50
            | 52
            | 55..=57
            | 63..=74
            | 80..=83
            | 85
            | 97..=99
            | 101..=103
            | 105..=107
            | 109..=111
            | 113..=115
            | 117..=119
            | 121
            | 123
            | 125
            | 127
            | 129
            | 131
            | 133..=144
            | 146
            | 148..=152
            | 173..=175 => {
                return Err(err(format!(
                    "{name} is not supported (char, long, float, double or object arrays)"
                )))
            }
            _ => return Err(err(format!("invalid opcode {op}"))),
        };
        out.push((at as u32, ins));
        pc += len;
    }
    Ok(out)
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Frame {
    locals: Vec<VType>,
    stack: Vec<VType>,
    init: bool,
}

enum Flow {
    Next,
    Jump(u32),
    Branch(u32),
    Switch,
    Stop,
}

struct Ctx<'a> {
    model: &'a Model<'a>,
    m: &'a MethodDef,
    max_stack: usize,
    is_init: bool,
}

fn pop(f: &mut Frame) -> Result<VType, String> {
    f.stack
        .pop()
        .ok_or_else(|| "operand stack underflow".to_string())
}

fn pop_int(f: &mut Frame) -> Result<(), String> {
    match pop(f)? {
        VType::Int => Ok(()),
        t => Err(format!("expected int on the stack, found {}", t.name())),
    }
}

fn pop_as(f: &mut Frame, want: JType) -> Result<(), String> {
    let t = pop(f)?;
    let ok = match want {
        JType::Array(e) => t == VType::Arr(e) || t == VType::Null,
        _ => t == VType::Int,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "expected {} on the stack, found {}",
            VType::of(want).name(),
            t.name()
        ))
    }
}

/// Pop the object reference of a field access or instance call.
fn pop_this(f: &mut Frame) -> Result<(), String> {
    match pop(f)? {
        VType::This | VType::Null => Ok(()),
        VType::UninitThis => Err("this is used before the Object.<init> super call".to_string()),
        t => Err(format!(
            "expected the applet instance on the stack, found {}",
            t.name()
        )),
    }
}

/// Pop an array reference accepted by `accept`; its static kind (None: null).
fn pop_arr(f: &mut Frame, accept: &[Elem], what: &str) -> Result<Option<Elem>, String> {
    match pop(f)? {
        VType::Null => Ok(None),
        VType::Arr(e) if accept.contains(&e) => Ok(Some(e)),
        t => Err(format!(
            "{what} expects {}, found {}",
            kinds(accept),
            t.name()
        )),
    }
}

fn kinds(a: &[Elem]) -> String {
    a.iter()
        .map(|e| VType::Arr(*e).name())
        .collect::<Vec<_>>()
        .join(" or ")
}

fn arr_accept(op: ArrOp) -> &'static [Elem] {
    match op {
        ArrOp::Int => &[Elem::Int],
        ArrOp::ByteBool => &[Elem::Byte, Elem::Bool],
        ArrOp::Short => &[Elem::Short],
    }
}

impl Ctx<'_> {
    fn push(&self, f: &mut Frame, t: VType) -> Result<(), String> {
        if f.stack.len() >= self.max_stack {
            return Err(format!(
                "operand stack overflow (max_stack {})",
                self.max_stack
            ));
        }
        f.stack.push(t);
        Ok(())
    }

    fn local(&self, f: &Frame, x: u16) -> Result<VType, String> {
        f.locals
            .get(x as usize)
            .copied()
            .ok_or_else(|| format!("local {x} is outside max_locals {}", f.locals.len()))
    }

    fn set_local(&self, f: &mut Frame, x: u16, t: VType) -> Result<(), String> {
        let n = f.locals.len();
        let l = f
            .locals
            .get_mut(x as usize)
            .ok_or_else(|| format!("local {x} is outside max_locals {n}"))?;
        *l = t;
        Ok(())
    }

    /// A method name moved by a stack instruction: refused (a method name
    /// is only ever the argument of a native, where `ldc` pushed it).
    fn no_names(&self, f: &Frame, n: usize, ins: &Ins) -> Result<(), String> {
        let top = f.stack.len().saturating_sub(n);
        match f.stack[top..].iter().find_map(|t| match t {
            VType::MethodName(i) => Some(*i),
            _ => None,
        }) {
            Some(i) => Err(format!(
                "{} of the method name \"{}\": a method name may only be passed to a native",
                stack_op_name(ins),
                self.model.methods[i as usize].name
            )),
            None => Ok(()),
        }
    }

    /// Apply one instruction to `f`; extra info (array kind) is returned.
    fn step(&self, f: &mut Frame, ins: &Ins) -> Result<(Flow, Option<Elem>), String> {
        let moved = match ins {
            Ins::Pop | Ins::Dup => 1,
            Ins::Pop2 | Ins::DupX1 | Ins::Dup2 | Ins::Swap => 2,
            Ins::DupX2 | Ins::Dup2X1 => 3,
            Ins::Dup2X2 => 4,
            _ => 0,
        };
        if moved > 0 {
            self.no_names(f, moved, ins)?;
        }
        let mut arr = None;
        let flow = match ins {
            Ins::Nop => Flow::Next,
            Ins::Const(_) => {
                self.push(f, VType::Int)?;
                Flow::Next
            }
            Ins::MethodName(i) => {
                self.push(f, VType::MethodName(*i))?;
                Flow::Next
            }
            Ins::Null => {
                self.push(f, VType::Null)?;
                Flow::Next
            }
            Ins::ILoad(x) => {
                let t = self.local(f, *x)?;
                if t != VType::Int {
                    return Err(format!("iload of local {x}, which holds {}", t.name()));
                }
                self.push(f, t)?;
                Flow::Next
            }
            Ins::ALoad(x) => {
                let t = self.local(f, *x)?;
                if !t.is_ref() {
                    return Err(format!("aload of local {x}, which holds {}", t.name()));
                }
                self.push(f, t)?;
                Flow::Next
            }
            Ins::IStore(x) => {
                pop_int(f)?;
                self.set_local(f, *x, VType::Int)?;
                Flow::Next
            }
            Ins::AStore(x) => {
                let t = pop(f)?;
                if !t.is_ref() {
                    return Err(format!("astore of {}", t.name()));
                }
                self.set_local(f, *x, t)?;
                Flow::Next
            }
            Ins::ArrLoad(op) => {
                pop_int(f)?;
                arr = pop_arr(f, arr_accept(*op), "array load")?;
                self.push(f, VType::Int)?;
                Flow::Next
            }
            Ins::ArrStore(op) => {
                pop_int(f)?;
                pop_int(f)?;
                arr = pop_arr(f, arr_accept(*op), "array store")?;
                Flow::Next
            }
            Ins::ArrayLength => {
                arr = pop_arr(
                    f,
                    &[Elem::Byte, Elem::Bool, Elem::Short, Elem::Int],
                    "arraylength",
                )?;
                self.push(f, VType::Int)?;
                Flow::Next
            }
            Ins::Pop => {
                pop(f)?;
                Flow::Next
            }
            Ins::Pop2 => {
                pop(f)?;
                pop(f)?;
                Flow::Next
            }
            Ins::Dup => {
                let a = pop(f)?;
                self.push(f, a)?;
                self.push(f, a)?;
                Flow::Next
            }
            Ins::DupX1 => {
                let a = pop(f)?;
                let b = pop(f)?;
                for t in [a, b, a] {
                    self.push(f, t)?;
                }
                Flow::Next
            }
            Ins::DupX2 => {
                let a = pop(f)?;
                let b = pop(f)?;
                let c = pop(f)?;
                for t in [a, c, b, a] {
                    self.push(f, t)?;
                }
                Flow::Next
            }
            Ins::Dup2 => {
                let a = pop(f)?;
                let b = pop(f)?;
                for t in [b, a, b, a] {
                    self.push(f, t)?;
                }
                Flow::Next
            }
            Ins::Dup2X1 => {
                let a = pop(f)?;
                let b = pop(f)?;
                let c = pop(f)?;
                for t in [b, a, c, b, a] {
                    self.push(f, t)?;
                }
                Flow::Next
            }
            Ins::Dup2X2 => {
                let a = pop(f)?;
                let b = pop(f)?;
                let c = pop(f)?;
                let d = pop(f)?;
                for t in [b, a, d, c, b, a] {
                    self.push(f, t)?;
                }
                Flow::Next
            }
            Ins::Swap => {
                let a = pop(f)?;
                let b = pop(f)?;
                self.push(f, a)?;
                self.push(f, b)?;
                Flow::Next
            }
            Ins::Bin(_) => {
                pop_int(f)?;
                pop_int(f)?;
                self.push(f, VType::Int)?;
                Flow::Next
            }
            Ins::Neg | Ins::I2b | Ins::I2s => {
                pop_int(f)?;
                self.push(f, VType::Int)?;
                Flow::Next
            }
            Ins::Inc(x, _) => {
                let t = self.local(f, *x)?;
                if t != VType::Int {
                    return Err(format!("iinc of local {x}, which holds {}", t.name()));
                }
                Flow::Next
            }
            Ins::If(_, t) => {
                pop_int(f)?;
                Flow::Branch(*t)
            }
            Ins::IfCmp(_, t) => {
                pop_int(f)?;
                pop_int(f)?;
                Flow::Branch(*t)
            }
            Ins::IfACmp(_, t) => {
                for _ in 0..2 {
                    let a = pop(f)?;
                    if !a.is_ref() || a == VType::UninitThis {
                        return Err(format!("if_acmp on {}", a.name()));
                    }
                }
                Flow::Branch(*t)
            }
            Ins::IfNull(_, t) => {
                let a = pop(f)?;
                if !a.is_ref() || a == VType::UninitThis {
                    return Err(format!("ifnull on {}", a.name()));
                }
                Flow::Branch(*t)
            }
            Ins::Goto(t) => Flow::Jump(*t),
            Ins::Switch(_) => {
                pop_int(f)?;
                Flow::Switch
            }
            Ins::IReturn | Ins::AReturn | Ins::Return => {
                match (ins, self.m.sig.ret) {
                    (Ins::Return, None) => {}
                    (Ins::IReturn, Some(t)) if !t.is_array() => pop_int(f)?,
                    (Ins::AReturn, Some(t)) if t.is_array() => pop_as(f, t)?,
                    _ => {
                        return Err(format!(
                            "return instruction does not match the return type of {}",
                            self.m.descriptor
                        ))
                    }
                }
                if self.is_init && !f.init {
                    return Err("<init> returns without calling Object.<init>".into());
                }
                Flow::Stop
            }
            Ins::GetStatic(fi) => {
                let t = self.model.fields[*fi as usize].ty;
                self.push(f, VType::of(t))?;
                Flow::Next
            }
            Ins::PutStatic(fi) => {
                pop_as(f, self.model.fields[*fi as usize].ty)?;
                Flow::Next
            }
            Ins::GetField(fi) => {
                pop_this(f)?;
                let t = self.model.fields[*fi as usize].ty;
                self.push(f, VType::of(t))?;
                Flow::Next
            }
            Ins::PutField(fi) => {
                pop_as(f, self.model.fields[*fi as usize].ty)?;
                pop_this(f)?;
                Flow::Next
            }
            Ins::Invoke(_, Callee::ObjectInit) => {
                if pop(f)? != VType::UninitThis || f.init {
                    return Err(
                        "Object.<init> must be called once, on the uninitialised this".into(),
                    );
                }
                f.init = true;
                for t in f.locals.iter_mut().chain(f.stack.iter_mut()) {
                    if *t == VType::UninitThis {
                        *t = VType::This;
                    }
                }
                Flow::Next
            }
            Ins::Invoke(_, callee) => {
                let mut names = Vec::new();
                let sig = match callee {
                    Callee::Own(i) => {
                        let md = &self.model.methods[*i as usize];
                        (md.sig.clone(), md.is_static)
                    }
                    Callee::Native(i) => {
                        let e = &self.model.natives[*i];
                        let (s, n) = crate::model::parse_native_descriptor(&e.3)
                            .map_err(|r| format!("native {}.{}{}: {r}", e.1, e.2, e.3))?;
                        names = n;
                        (s, true)
                    }
                    Callee::ObjectInit => unreachable_init(),
                };
                for (k, p) in sig.0.params.iter().enumerate().rev() {
                    if names.get(k) == Some(&true) {
                        match pop(f)? {
                            VType::MethodName(_) => {}
                            t => {
                                return Err(format!(
                                    "argument {} of a native expects a method name (a string \
                                     literal), found {}",
                                    k + 1,
                                    t.name()
                                ))
                            }
                        }
                    } else {
                        pop_as(f, *p)?;
                    }
                }
                if !sig.1 {
                    pop_this(f)?;
                }
                if let Some(r) = sig.0.ret {
                    self.push(f, VType::of(r))?;
                }
                Flow::Next
            }
            Ins::NewArray(e) => {
                pop_int(f)?;
                self.push(f, VType::Arr(*e))?;
                Flow::Next
            }
            Ins::CheckCast(e) => {
                let t = pop(f)?;
                if t != VType::Arr(*e) && t != VType::Null {
                    return Err(format!(
                        "checkcast to {} of {} is not supported",
                        e.descriptor(),
                        t.name()
                    ));
                }
                self.push(f, t)?;
                Flow::Next
            }
        };
        Ok((flow, arr))
    }
}

fn stack_op_name(ins: &Ins) -> &'static str {
    match ins {
        Ins::Pop => "pop",
        Ins::Pop2 => "pop2",
        Ins::Dup => "dup",
        Ins::DupX1 => "dup_x1",
        Ins::DupX2 => "dup_x2",
        Ins::Dup2 => "dup2",
        Ins::Dup2X1 => "dup2_x1",
        Ins::Dup2X2 => "dup2_x2",
        _ => "swap",
    }
}

fn unreachable_init() -> (crate::model::Sig, bool) {
    // Handled by the match arm above; kept total without panicking.
    (
        crate::model::Sig {
            params: Vec::new(),
            ret: None,
        },
        false,
    )
}

/// Merge `from` into the state at a leader; returns whether it changed.
fn merge(into: &mut Option<Frame>, from: &Frame) -> Result<bool, String> {
    let Some(cur) = into else {
        *into = Some(from.clone());
        return Ok(true);
    };
    if cur.stack.len() != from.stack.len() {
        return Err(format!(
            "stack height differs where paths merge ({} vs {})",
            cur.stack.len(),
            from.stack.len()
        ));
    }
    if cur.init != from.init {
        return Err("paths merge with and without the Object.<init> call".into());
    }
    let mut changed = false;
    for (a, b) in cur.stack.iter_mut().zip(&from.stack) {
        let m = match (*a, *b) {
            (x, y) if x == y => x,
            (VType::Null, y) if y.is_ref() && y != VType::UninitThis => y,
            (x, VType::Null) if x.is_ref() && x != VType::UninitThis => x,
            (x, y) => {
                return Err(format!(
                    "stack types differ where paths merge ({} vs {})",
                    x.name(),
                    y.name()
                ))
            }
        };
        if m != *a {
            *a = m;
            changed = true;
        }
    }
    for (a, b) in cur.locals.iter_mut().zip(&from.locals) {
        let m = match (*a, *b) {
            (x, y) if x == y => x,
            (VType::Null, y) if y.is_ref() && y != VType::UninitThis => y,
            (x, VType::Null) if x.is_ref() && x != VType::UninitThis => x,
            _ => VType::Top,
        };
        if m != *a {
            *a = m;
            changed = true;
        }
    }
    Ok(changed)
}

/// Parse, subset-check and verify one method (with a class budget of its
/// own: see [`verify_within`]).
pub fn verify(model: &Model<'_>, m: &MethodDef, code: &CodeInfo) -> Result<Verified, VerifyError> {
    let mut budget = MAX_CLASS_WORK;
    verify_within(model, m, code, &mut budget)
}

/// [`verify`] charging its work to `budget`, what is left of the class's
/// [`MAX_CLASS_WORK`]: a method whose verification would use more than is
/// left is refused (as is one that needs more than the per-method limit).
pub fn verify_within(
    model: &Model<'_>,
    m: &MethodDef,
    code: &CodeInfo,
    budget: &mut u64,
) -> Result<Verified, VerifyError> {
    if code.exception_table_len != 0 {
        return Err((None, "exception handlers are not supported".into()));
    }
    let max_locals = code.max_locals as usize;
    let max_stack = code.max_stack as usize;
    // Frame = locals + stack + 4 scratch slots, addressed with u16.
    if max_locals + max_stack + 4 > u16::MAX as usize {
        return Err((
            None,
            format!("max_locals {max_locals} + max_stack {max_stack} is too large"),
        ));
    }
    let parsed = parse(model, m, &code.code)?;
    // Map byte offsets to instruction indices.
    let mut index_of = vec![u32::MAX; code.code.len()];
    for (i, (off, _)) in parsed.iter().enumerate() {
        index_of[*off as usize] = i as u32;
    }
    let fix = |at: u32, t: u32| -> Result<u32, VerifyError> {
        match index_of.get(t as usize) {
            Some(&i) if i != u32::MAX => Ok(i),
            Some(_) => Err((
                Some(at),
                format!("branch target {t} is not the start of an instruction"),
            )),
            None => Err((
                Some(at),
                format!("branch target {} is outside the code", t as i32),
            )),
        }
    };
    let mut insns = Vec::with_capacity(parsed.len());
    let mut leader = vec![false; parsed.len()];
    leader[0] = true;
    let mut local0_written = false;
    for (off, mut ins) in parsed {
        match &mut ins {
            Ins::If(_, t)
            | Ins::IfCmp(_, t)
            | Ins::IfACmp(_, t)
            | Ins::IfNull(_, t)
            | Ins::Goto(t) => {
                *t = fix(off, *t)?;
                leader[*t as usize] = true;
            }
            Ins::Switch(sw) => {
                sw.default = fix(off, sw.default)?;
                leader[sw.default as usize] = true;
                for t in sw.targets.iter_mut() {
                    *t = fix(off, *t)?;
                    leader[*t as usize] = true;
                }
            }
            Ins::IStore(0) | Ins::AStore(0) | Ins::Inc(0, _) => local0_written = true,
            _ => {}
        }
        insns.push(Insn {
            offset: off,
            ins,
            reachable: false,
            height: 0,
            arr: None,
            leader: false,
        });
    }
    for (i, l) in leader.iter().enumerate() {
        insns[i].leader = *l;
    }
    let nleaders = leader.iter().filter(|l| **l).count();
    if nleaders.saturating_mul(max_locals + max_stack + 1) > MAX_STATE_SLOTS {
        return Err((
            None,
            "method too complex to verify (blocks × frame size)".into(),
        ));
    }
    // Initial frame.
    let mut locals = vec![VType::Top; max_locals];
    let is_init = m.name == "<init>";
    let mut args: Vec<VType> = Vec::new();
    if !m.is_static {
        args.push(if is_init {
            VType::UninitThis
        } else {
            VType::This
        });
    }
    args.extend(m.sig.params.iter().map(|p| VType::of(*p)));
    if args.len() > max_locals {
        return Err((
            None,
            format!("arguments do not fit in max_locals {max_locals}"),
        ));
    }
    for (n, a) in args.into_iter().enumerate() {
        locals[n] = a;
    }
    let ctx = Ctx {
        model,
        m,
        max_stack,
        is_init,
    };
    let mut states: Vec<Option<Frame>> = vec![None; insns.len()];
    states[0] = Some(Frame {
        locals,
        stack: Vec::new(),
        init: !is_init,
    });
    let mut work = vec![0usize];
    let mut on_work = vec![false; insns.len()];
    on_work[0] = true;
    let frame_slots = (max_locals + max_stack) as u64 + 1;
    // The decoding, the initial frame and the per-instruction tables.
    let mut effort: u64 = code.code.len() as u64 + frame_slots;
    let limit = MAX_WORK.min(*budget);
    let over = |effort: u64| -> VerifyError {
        if effort > MAX_WORK {
            (None, "method too complex to verify (work limit)".into())
        } else {
            (
                None,
                format!(
                    "the class exceeds its verification budget \
                     ({MAX_CLASS_WORK} work units over all methods)"
                ),
            )
        }
    };
    while let Some(start) = work.pop() {
        on_work[start] = false;
        // One clone here, one merge at the end of the block.
        effort += 2 * frame_slots;
        let mut f = states[start].clone().unwrap_or_else(|| Frame {
            locals: Vec::new(),
            stack: Vec::new(),
            init: true,
        });
        let mut i = start;
        loop {
            effort += 1;
            if effort > limit {
                return Err(over(effort));
            }
            let at = insns[i].offset;
            insns[i].reachable = true;
            insns[i].height = f.stack.len() as u16;
            let (flow, arr) = ctx.step(&mut f, &insns[i].ins).map_err(|e| (Some(at), e))?;
            insns[i].arr = arr;
            let mut targets: Vec<u32> = Vec::new();
            let mut next = false;
            match flow {
                Flow::Next => next = true,
                Flow::Jump(t) => targets.push(t),
                Flow::Branch(t) => {
                    targets.push(t);
                    next = true;
                }
                Flow::Switch => {
                    if let Ins::Switch(sw) = &insns[i].ins {
                        targets.push(sw.default);
                        targets.extend(sw.targets.iter().copied());
                    }
                }
                Flow::Stop => {}
            }
            for t in targets {
                effort += frame_slots;
                if effort > limit {
                    return Err(over(effort));
                }
                let t = t as usize;
                if merge(&mut states[t], &f).map_err(|e| (Some(insns[t].offset), e))? && !on_work[t]
                {
                    on_work[t] = true;
                    work.push(t);
                }
            }
            if !next {
                break;
            }
            i += 1;
            if i >= insns.len() {
                return Err((Some(at), "execution falls off the end of the code".into()));
            }
            if insns[i].leader {
                if merge(&mut states[i], &f).map_err(|e| (Some(insns[i].offset), e))? && !on_work[i]
                {
                    on_work[i] = true;
                    work.push(i);
                }
                break;
            }
        }
    }
    if effort > limit {
        return Err(over(effort));
    }
    *budget -= effort;
    Ok(Verified {
        insns,
        local0_written,
    })
}
