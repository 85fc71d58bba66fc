//! What JIVE answers when it refuses: a class refused at load
//! ([`Rejection`]) and an invocation stopped ([`Fault`]). Below every
//! stage: each of them can only reject, never crash.

use std::fmt;

/// A class file refused at load: a normal answer, not an error of JIVE.
///
/// Display reads like `method foo(I)I at offset 12: getstatic
/// java/lang/System.out is not a field of this class`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// Method (name followed by descriptor) where the problem is, if any.
    pub method: Option<String>,
    /// Bytecode offset inside that method, if any.
    pub offset: Option<u32>,
    /// What is wrong.
    pub reason: String,
}

impl Rejection {
    pub(crate) fn class(reason: impl Into<String>) -> Self {
        Rejection {
            method: None,
            offset: None,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.method, self.offset) {
            (Some(m), Some(o)) => write!(f, "method {m} at offset {o}: {}", self.reason),
            (Some(m), None) => write!(f, "method {m}: {}", self.reason),
            (None, _) => write!(f, "class rejected: {}", self.reason),
        }
    }
}

impl std::error::Error for Rejection {}

/// Why an invocation stopped. The VM stays usable after any of these; see
/// [`Vm::last_fault_site`](crate::Vm::last_fault_site) for the method and bytecode offset.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// An array index outside `0..length`.
    ArrayIndexOutOfBounds {
        /// The index used.
        index: i32,
        /// The array's length.
        length: i32,
    },
    /// An array or the applet instance used through a null reference.
    NullPointer,
    /// `idiv` or `irem` by zero.
    DivideByZero,
    /// `newarray` with a negative length.
    NegativeArraySize(i32),
    /// The invocation used up its fuel budget.
    OutOfFuel,
    /// The invocation ran longer than [`Limits::max_time`](crate::Limits::max_time).
    Timeout,
    /// Too many nested calls (or frame slots).
    StackOverflow,
    /// An allocation would exceed the heap quota even after collection.
    HeapQuotaExceeded {
        /// Bytes requested by the allocation.
        requested: usize,
        /// The VM's quota.
        quota: usize,
    },
    /// A native method failed.
    Native(String),
    /// The host passed arguments that do not match the method's descriptor.
    BadArguments(String),
    /// A value broke an invariant the verifier should guarantee (a handle of
    /// the wrong array kind handed back by a native or the host).
    Internal(String),
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::ArrayIndexOutOfBounds { index, length } => {
                write!(f, "array index {index} out of bounds for length {length}")
            }
            Fault::NullPointer => write!(f, "null reference"),
            Fault::DivideByZero => write!(f, "integer division by zero"),
            Fault::NegativeArraySize(n) => write!(f, "negative array size {n}"),
            Fault::OutOfFuel => write!(f, "out of fuel"),
            Fault::Timeout => write!(f, "time limit exceeded"),
            Fault::StackOverflow => write!(f, "call depth limit exceeded"),
            Fault::HeapQuotaExceeded { requested, quota } => {
                write!(
                    f,
                    "heap quota exceeded: {requested} bytes requested, quota {quota}"
                )
            }
            Fault::Native(m) => write!(f, "native method failed: {m}"),
            Fault::BadArguments(m) => write!(f, "bad arguments: {m}"),
            Fault::Internal(m) => write!(f, "internal invariant broken: {m}"),
        }
    }
}

impl std::error::Error for Fault {}
