//! Stage 3: the type-inference verifier (the dataflow pass).
//!
//! Every method's bytecode is first split into instructions by the
//! parser (`bytecode`), which checks each against the JIVE subset and
//! resolves its constant-pool operands
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

use crate::bytecode::{parse, ArrOp, Ins};
pub use crate::bytecode::{VerifyError, VerifyErrorKind};
use crate::classfile::CodeInfo;
use crate::model::{Callee, Elem, JType, MethodDef, Model};

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
            VType::Arr(e) => e.array_name(),
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

use VerifyErrorKind as K;

fn pop(f: &mut Frame) -> Result<VType, K> {
    f.stack.pop().ok_or(K::StackUnderflow)
}

fn pop_int(f: &mut Frame) -> Result<(), K> {
    match pop(f)? {
        VType::Int => Ok(()),
        t => Err(K::TypeMismatch {
            want: VType::Int.name(),
            got: t.name(),
        }),
    }
}

fn pop_as(f: &mut Frame, want: JType) -> Result<(), K> {
    let t = pop(f)?;
    let ok = match want {
        JType::Array(e) => t == VType::Arr(e) || t == VType::Null,
        _ => t == VType::Int,
    };
    if ok {
        Ok(())
    } else {
        Err(K::TypeMismatch {
            want: VType::of(want).name(),
            got: t.name(),
        })
    }
}

/// Pop the object reference of a field access or instance call.
fn pop_this(f: &mut Frame) -> Result<(), K> {
    match pop(f)? {
        VType::This | VType::Null => Ok(()),
        VType::UninitThis => Err(K::UninitThis),
        t => Err(K::TypeMismatch {
            want: "the applet instance",
            got: t.name(),
        }),
    }
}

/// Pop an array reference accepted by `accept`; its static kind (None: null).
fn pop_arr(f: &mut Frame, accept: &'static [Elem], what: &'static str) -> Result<Option<Elem>, K> {
    match pop(f)? {
        VType::Null => Ok(None),
        VType::Arr(e) if accept.contains(&e) => Ok(Some(e)),
        t => Err(K::ArrayKind {
            op: what,
            want: accept,
            got: t.name(),
        }),
    }
}

fn arr_accept(op: ArrOp) -> &'static [Elem] {
    match op {
        ArrOp::Int => &[Elem::Int],
        ArrOp::ByteBool => &[Elem::Byte, Elem::Bool],
        ArrOp::Short => &[Elem::Short],
    }
}

impl Ctx<'_> {
    fn push(&self, f: &mut Frame, t: VType) -> Result<(), K> {
        if f.stack.len() >= self.max_stack {
            return Err(K::StackOverflow(self.max_stack));
        }
        f.stack.push(t);
        Ok(())
    }

    fn local(&self, f: &Frame, x: u16) -> Result<VType, K> {
        f.locals.get(x as usize).copied().ok_or(K::LocalOutside {
            local: x,
            max_locals: f.locals.len(),
        })
    }

    fn set_local(&self, f: &mut Frame, x: u16, t: VType) -> Result<(), K> {
        let n = f.locals.len();
        let l = f.locals.get_mut(x as usize).ok_or(K::LocalOutside {
            local: x,
            max_locals: n,
        })?;
        *l = t;
        Ok(())
    }

    /// A method name moved by a stack instruction: refused (a method name
    /// is only ever the argument of a native, where `ldc` pushed it).
    fn no_names(&self, f: &Frame, n: usize, ins: &Ins) -> Result<(), K> {
        let top = f.stack.len().saturating_sub(n);
        match f.stack[top..].iter().find_map(|t| match t {
            VType::MethodName(i) => Some(*i),
            _ => None,
        }) {
            Some(i) => Err(K::MethodNameMoved {
                op: stack_op_name(ins),
                method: self.model.methods[i as usize].name.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Apply one instruction to `f`; extra info (array kind) is returned.
    fn step(&self, f: &mut Frame, ins: &Ins) -> Result<(Flow, Option<Elem>), K> {
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
                    return Err(K::LocalType {
                        op: "iload",
                        local: *x,
                        holds: t.name(),
                    });
                }
                self.push(f, t)?;
                Flow::Next
            }
            Ins::ALoad(x) => {
                let t = self.local(f, *x)?;
                if !t.is_ref() {
                    return Err(K::LocalType {
                        op: "aload",
                        local: *x,
                        holds: t.name(),
                    });
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
                    return Err(K::NotReference {
                        op: "astore of",
                        got: t.name(),
                    });
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
                    return Err(K::LocalType {
                        op: "iinc",
                        local: *x,
                        holds: t.name(),
                    });
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
                        return Err(K::NotReference {
                            op: "if_acmp on",
                            got: a.name(),
                        });
                    }
                }
                Flow::Branch(*t)
            }
            Ins::IfNull(_, t) => {
                let a = pop(f)?;
                if !a.is_ref() || a == VType::UninitThis {
                    return Err(K::NotReference {
                        op: "ifnull on",
                        got: a.name(),
                    });
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
                    _ => return Err(K::ReturnType(self.m.descriptor.clone())),
                }
                if self.is_init && !f.init {
                    return Err(K::InitMissing);
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
                    return Err(K::InitCall);
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
                        let (s, n) =
                            crate::model::parse_native_descriptor(&e.3).map_err(|reason| {
                                K::NativeDescriptor {
                                    native: format!("{}.{}{}", e.1, e.2, e.3),
                                    reason,
                                }
                            })?;
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
                                return Err(K::NotMethodName {
                                    arg: k + 1,
                                    got: t.name(),
                                })
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
                    return Err(K::CheckCast {
                        to: e.descriptor(),
                        got: t.name(),
                    });
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
fn merge(into: &mut Option<Frame>, from: &Frame) -> Result<bool, K> {
    let Some(cur) = into else {
        *into = Some(from.clone());
        return Ok(true);
    };
    if cur.stack.len() != from.stack.len() {
        return Err(K::MergeHeight(cur.stack.len(), from.stack.len()));
    }
    if cur.init != from.init {
        return Err(K::MergeInit);
    }
    let mut changed = false;
    for (a, b) in cur.stack.iter_mut().zip(&from.stack) {
        let m = match (*a, *b) {
            (x, y) if x == y => x,
            (VType::Null, y) if y.is_ref() && y != VType::UninitThis => y,
            (x, VType::Null) if x.is_ref() && x != VType::UninitThis => x,
            (x, y) => return Err(K::MergeTypes(x.name(), y.name())),
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
        return Err(VerifyError::method(K::ExceptionHandlers));
    }
    let max_locals = code.max_locals as usize;
    let max_stack = code.max_stack as usize;
    // Frame = locals + stack + 4 scratch slots, addressed with u16.
    if max_locals + max_stack + 4 > u16::MAX as usize {
        return Err(VerifyError::method(K::FrameTooLarge {
            max_locals,
            max_stack,
        }));
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
            Some(_) => Err(VerifyError::at(at, K::BranchInside(t))),
            None => Err(VerifyError::at(at, K::BranchOutside(t as i32))),
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
        return Err(VerifyError::method(K::TooManyBlocks));
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
        return Err(VerifyError::method(K::ArgumentsTooMany(max_locals)));
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
        VerifyError::method(if effort > MAX_WORK {
            K::WorkLimit
        } else {
            K::ClassBudget(MAX_CLASS_WORK)
        })
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
            let (flow, arr) = ctx
                .step(&mut f, &insns[i].ins)
                .map_err(|e| VerifyError::at(at, e))?;
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
                if merge(&mut states[t], &f).map_err(|e| VerifyError::at(insns[t].offset, e))?
                    && !on_work[t]
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
                return Err(VerifyError::at(at, K::FallsOffEnd));
            }
            if insns[i].leader {
                if merge(&mut states[i], &f).map_err(|e| VerifyError::at(insns[i].offset, e))?
                    && !on_work[i]
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
