//! A verification failure ([`VerifyError`]): where the parser or the
//! verifier found it and why ([`VerifyErrorKind`]), whose `Display` is the
//! reason a `Rejection` gives.

use std::fmt;

use super::opcode_name;
use crate::model::Elem;

/// A verification failure: the bytecode offset of the instruction where
/// it was found (`None` for a failure of the method as a whole) and what
/// is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    /// Bytecode offset of the instruction, if the failure has one.
    pub offset: Option<u32>,
    /// What is wrong.
    pub kind: VerifyErrorKind,
}

impl VerifyError {
    /// A failure at the instruction at bytecode offset `at`.
    pub(crate) fn at(at: u32, kind: VerifyErrorKind) -> Self {
        VerifyError {
            offset: Some(at),
            kind,
        }
    }

    /// A failure of the method as a whole.
    pub(crate) fn method(kind: VerifyErrorKind) -> Self {
        VerifyError { offset: None, kind }
    }
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(o) => write!(f, "at offset {o}: {}", self.kind),
            None => write!(f, "{}", self.kind),
        }
    }
}

/// Why the parser or the verifier refused a method. Its `Display` is the
/// reason a [`Rejection`](crate::Rejection) gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerifyErrorKind {
    // The parser.
    /// An instruction's operands run past the end of the code.
    Truncated,
    /// An opcode outside the subset, or no opcode at all.
    Opcode(u8),
    /// `wide` in front of the opcode given, which it may not modify.
    Wide(u8),
    /// `ldc`/`ldc_w` (`op`) of a constant of the kind `what` names.
    Constant {
        /// `ldc` or `ldc_w`.
        op: &'static str,
        /// What the constant is (`a float`, ...).
        what: &'static str,
    },
    /// `ldc`/`ldc_w` (`op`) of a constant-pool index with no entry.
    ConstantIndex {
        /// `ldc` or `ldc_w`.
        op: &'static str,
        /// The index.
        idx: u16,
    },
    /// `ldc`/`ldc_w` (`op`) of a string that is not the name of a static
    /// `(II)V` method of the class.
    StringConstant {
        /// `ldc` or `ldc_w`.
        op: &'static str,
        /// The string.
        text: String,
        /// The method it names, if any: its descriptor and whether it is
        /// static.
        names: Option<(String, bool)>,
    },
    /// `tableswitch` with `high` below `low`.
    TableSwitchRange {
        /// Low key.
        low: i32,
        /// High key.
        high: i32,
    },
    /// `tableswitch` whose table runs past the end of the code.
    TableSwitchTruncated,
    /// `lookupswitch` with a negative pair count or one the code cannot hold.
    LookupSwitchCount(i32),
    /// `lookupswitch` whose keys are not in increasing order.
    LookupSwitchUnsorted,
    /// `newarray` with the type code given (char, long, float, double or
    /// invalid).
    NewArrayType(u8),
    /// `checkcast`/`instanceof` (`op`) to the class named, not an array of
    /// the subset.
    CheckCastClass {
        /// `checkcast` or `instanceof`.
        op: &'static str,
        /// The class named.
        class: String,
    },
    /// A field, method or constant-pool reference the class model does not
    /// resolve, with the model's reason.
    Resolve(String),
    // The verifier: the method as a whole.
    /// A method with exception handlers.
    ExceptionHandlers,
    /// A frame (locals, stack and scratch slots) larger than `u16` addresses.
    FrameTooLarge {
        /// `max_locals`.
        max_locals: usize,
        /// `max_stack`.
        max_stack: usize,
    },
    /// The arguments need more locals than `max_locals` (given).
    ArgumentsTooMany(usize),
    /// A branch target inside an instruction.
    BranchInside(u32),
    /// A branch target before or after the code.
    BranchOutside(i32),
    /// Too many basic blocks for the frame size.
    TooManyBlocks,
    /// The method needs more than the per-method verification work.
    WorkLimit,
    /// The class needs more than its verification budget (given, in work
    /// units over all methods).
    ClassBudget(u64),
    // The verifier: one instruction.
    /// Execution runs past the last instruction.
    FallsOffEnd,
    /// A pop from an empty operand stack.
    StackUnderflow,
    /// A push beyond `max_stack` (given).
    StackOverflow(usize),
    /// A local at or beyond `max_locals`.
    LocalOutside {
        /// The local.
        local: u16,
        /// `max_locals`.
        max_locals: usize,
    },
    /// A load or `iinc` (`op`) of a local holding the wrong type.
    LocalType {
        /// `iload`, `aload` or `iinc`.
        op: &'static str,
        /// The local.
        local: u16,
        /// What it holds.
        holds: &'static str,
    },
    /// An operand of the wrong type on the stack.
    TypeMismatch {
        /// What the instruction expects (`int`, `byte[]`, `the applet
        /// instance`).
        want: &'static str,
        /// What is there.
        got: &'static str,
    },
    /// An operand that is not a reference: `op` ends in the preposition
    /// that reads before the type (`astore of`, `if_acmp on`).
    NotReference {
        /// The instruction and its preposition.
        op: &'static str,
        /// What is there.
        got: &'static str,
    },
    /// An array operand of a kind the instruction (`op`) does not accept.
    ArrayKind {
        /// `array load`, `array store` or `arraylength`.
        op: &'static str,
        /// The kinds accepted.
        want: &'static [Elem],
        /// What is there.
        got: &'static str,
    },
    /// `checkcast` to array type `to` of an operand of another type.
    CheckCast {
        /// Descriptor of the array type.
        to: &'static str,
        /// What is there.
        got: &'static str,
    },
    /// A stack instruction (`op`) moving a method name (of the method
    /// named).
    MethodNameMoved {
        /// `pop`, `dup`, ...
        op: &'static str,
        /// The method the name names.
        method: String,
    },
    /// A native's parameter (1-based) that takes a method name given
    /// something else.
    NotMethodName {
        /// The parameter, counted from 1.
        arg: usize,
        /// What is there.
        got: &'static str,
    },
    /// A native whose descriptor the model refuses.
    NativeDescriptor {
        /// `class.name descriptor` of the native.
        native: String,
        /// The model's reason.
        reason: String,
    },
    /// A return instruction not matching the method's descriptor (given).
    ReturnType(String),
    /// `this` used before the `Object.<init>` super call.
    UninitThis,
    /// `Object.<init>` called twice or on something other than the
    /// uninitialised `this`.
    InitCall,
    /// `<init>` returning without the `Object.<init>` call.
    InitMissing,
    /// Stack heights differ where paths merge.
    MergeHeight(usize, usize),
    /// Paths merge with and without the `Object.<init>` call.
    MergeInit,
    /// Stack types differ where paths merge.
    MergeTypes(&'static str, &'static str),
}

impl fmt::Display for VerifyErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use VerifyErrorKind as K;
        match self {
            K::Truncated => f.write_str("instruction runs past the end of the code"),
            K::Opcode(op) => unsupported_opcode(f, *op),
            K::Wide(op) => write!(f, "wide {} is not supported", opcode_name(*op)),
            K::Constant { op, what } => write!(f, "{op} of {what} is not supported"),
            K::ConstantIndex { op, idx } => write!(f, "{op}: bad constant pool index {idx}"),
            K::StringConstant { op, text, names } => {
                write!(
                    f,
                    "{op} of a string is not supported (only as the name of a static (II)V \
                     method of this class): \"{text}\" names "
                )?;
                match names {
                    Some((d, true)) => write!(f, "{text}{d}"),
                    Some((d, false)) => write!(f, "{text}{d}, which is not static"),
                    None => f.write_str("no method"),
                }
            }
            K::TableSwitchRange { low, high } => {
                write!(f, "tableswitch high {high} < low {low}")
            }
            K::TableSwitchTruncated => f.write_str("tableswitch runs past the end of the code"),
            K::LookupSwitchCount(n) => write!(f, "lookupswitch pair count {n} is invalid"),
            K::LookupSwitchUnsorted => f.write_str("lookupswitch keys are not sorted"),
            K::NewArrayType(5) => f.write_str("newarray of char is not supported"),
            K::NewArrayType(6 | 7 | 11) => {
                f.write_str("newarray of long, float or double is not supported")
            }
            K::NewArrayType(t) => write!(f, "newarray with invalid type code {t}"),
            K::CheckCastClass { op, class } => write!(f, "{op} to {class} is not supported"),
            K::Resolve(reason) => f.write_str(reason),
            K::ExceptionHandlers => f.write_str("exception handlers are not supported"),
            K::FrameTooLarge {
                max_locals,
                max_stack,
            } => write!(
                f,
                "max_locals {max_locals} + max_stack {max_stack} is too large"
            ),
            K::ArgumentsTooMany(n) => write!(f, "arguments do not fit in max_locals {n}"),
            K::BranchInside(t) => {
                write!(f, "branch target {t} is not the start of an instruction")
            }
            K::BranchOutside(t) => write!(f, "branch target {t} is outside the code"),
            K::TooManyBlocks => f.write_str("method too complex to verify (blocks × frame size)"),
            K::WorkLimit => f.write_str("method too complex to verify (work limit)"),
            K::ClassBudget(n) => write!(
                f,
                "the class exceeds its verification budget ({n} work units over all methods)"
            ),
            K::FallsOffEnd => f.write_str("execution falls off the end of the code"),
            K::StackUnderflow => f.write_str("operand stack underflow"),
            K::StackOverflow(n) => write!(f, "operand stack overflow (max_stack {n})"),
            K::LocalOutside { local, max_locals } => {
                write!(f, "local {local} is outside max_locals {max_locals}")
            }
            K::LocalType { op, local, holds } => {
                write!(f, "{op} of local {local}, which holds {holds}")
            }
            K::TypeMismatch { want, got } => {
                write!(f, "expected {want} on the stack, found {got}")
            }
            K::NotReference { op, got } => write!(f, "{op} {got}"),
            K::ArrayKind { op, want, got } => {
                write!(f, "{op} expects ")?;
                for (i, e) in want.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" or ")?;
                    }
                    f.write_str(e.array_name())?;
                }
                write!(f, ", found {got}")
            }
            K::CheckCast { to, got } => write!(f, "checkcast to {to} of {got} is not supported"),
            K::MethodNameMoved { op, method } => write!(
                f,
                "{op} of the method name \"{method}\": a method name may only be passed to a \
                 native"
            ),
            K::NotMethodName { arg, got } => write!(
                f,
                "argument {arg} of a native expects a method name (a string literal), found {got}"
            ),
            K::NativeDescriptor { native, reason } => write!(f, "native {native}: {reason}"),
            K::ReturnType(d) => write!(
                f,
                "return instruction does not match the return type of {d}"
            ),
            K::UninitThis => f.write_str("this is used before the Object.<init> super call"),
            K::InitCall => {
                f.write_str("Object.<init> must be called once, on the uninitialised this")
            }
            K::InitMissing => f.write_str("<init> returns without calling Object.<init>"),
            K::MergeHeight(a, b) => {
                write!(f, "stack height differs where paths merge ({a} vs {b})")
            }
            K::MergeInit => f.write_str("paths merge with and without the Object.<init> call"),
            K::MergeTypes(a, b) => {
                write!(f, "stack types differ where paths merge ({a} vs {b})")
            }
        }
    }
}

/// Why opcode `op`, which the parser does not take, is refused.
fn unsupported_opcode(f: &mut fmt::Formatter<'_>, op: u8) -> fmt::Result {
    let name = opcode_name(op);
    match op {
        187 => f.write_str("new is not supported (only arrays may be allocated)"),
        191 => f.write_str("athrow is not supported (no exceptions)"),
        194 | 195 => write!(f, "{name} is not supported (no threads)"),
        168 | 169 | 185 | 186 | 197 | 201 => write!(f, "{name} is not supported"),
        189 => f.write_str("anewarray is not supported (arrays of references)"),
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
        | 173..=175 => write!(
            f,
            "{name} is not supported (char, long, float, double or object arrays)"
        ),
        _ => write!(f, "invalid opcode {op}"),
    }
}

#[cfg(test)]
mod tests {
    use super::VerifyErrorKind as K;
    use super::*;

    #[test]
    fn kinds_read_as_the_reasons_rejections_give() {
        let cases: [(K, &str); 9] = [
            (K::Opcode(195), "monitorexit is not supported (no threads)"),
            (
                K::Opcode(34),
                "fload_0 is not supported (char, long, float, double or object arrays)",
            ),
            (K::Opcode(201), "jsr_w is not supported"),
            (K::Opcode(255), "invalid opcode 255"),
            (
                K::NewArrayType(7),
                "newarray of long, float or double is not supported",
            ),
            (K::NewArrayType(3), "newarray with invalid type code 3"),
            (
                K::ArrayKind {
                    op: "arraylength",
                    want: &[Elem::Byte, Elem::Bool, Elem::Short, Elem::Int],
                    got: "int",
                },
                "arraylength expects byte[] or boolean[] or short[] or int[], found int",
            ),
            (
                K::MethodNameMoved {
                    op: "dup",
                    method: "h".into(),
                },
                "dup of the method name \"h\": a method name may only be passed to a native",
            ),
            (
                K::ClassBudget(7),
                "the class exceeds its verification budget (7 work units over all methods)",
            ),
        ];
        for (k, want) in cases {
            assert_eq!(k.to_string(), want);
        }
        assert_eq!(
            VerifyError::at(4, K::StackUnderflow).to_string(),
            "at offset 4: operand stack underflow"
        );
        assert_eq!(
            VerifyError::method(K::WorkLimit).to_string(),
            "method too complex to verify (work limit)"
        );
    }
}
