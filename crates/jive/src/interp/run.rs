//! Stage 5: the VM and its interpreter loop.
//!
//! All frames live in one reusable `Vec<i32>`; a call's frame starts at the
//! caller's first argument slot, so arguments are never copied and the
//! return value lands where the caller reads it. Return addresses live in a
//! second reusable vector. Nothing is allocated per invocation or per call
//! once the vectors have grown.
//!
//! Limits: fuel is a signed counter kept in a local of the loop. A call
//! (and the host's invocation) charges the callee's length in ops; each
//! taken backward branch charges the number of ops between its target and
//! itself (so a loop iteration costs its length); allocation charges one
//! unit per 16 elements, and a collection it sets off one unit per
//! [`crate::limits::GC_WORDS_PER_FUEL`] words it scans; a native call charges one
//! unit plus what the native charges; a `lookupswitch` charges its binary
//! search's depth. Without a back-edge the op index only grows, so the ops
//! run between two charges are bounded by the method's length, which the
//! charges cover: fuel bounds running time, deterministically. The call depth is bounded by
//! [`Limits::max_depth`] and the frame stack by [`MAX_STACK_SLOTS`].
//!
//! A host may set a checkpoint ([`Vm::set_checkpoint`]) and a time limit
//! ([`Limits::max_time`]), or a check limit ([`Vm::set_check_limit`]): the
//! budget then runs in parts ([`Budget`]), and running out of one calls the
//! host's hook once at the checkpoint, reads the clock (parts sized by the
//! VM's pace, finer as the deadline nears) or counts the check, and moves
//! the next part in.
//! The hot loop still compares one register with zero, so an invocation
//! that stays short pays nothing for either.

use crate::budget::{refill, Budget, Checkpoint, Clock, Pace};
use crate::decode::{Arg, Op};
use crate::fault::Fault;
use crate::heap::{arr_fault, ArrayData, ArrayRef, Heap, THIS};
use crate::limits::{Limits, MAX_STACK_SLOTS};
use crate::model::{Elem, JType};
use crate::natives::{bad_native_array, NativeCtx};
use crate::subset::{Class, ClassInner, FieldId, MethodId};

/// Machine stack compiled code may use per invocation by default, in
/// bytes (256 KiB; see [`Vm::set_machine_stack`]).
pub const DEFAULT_MACHINE_STACK: usize = 256 * 1024;

/// Where the last fault happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultSite {
    /// Method name and descriptor.
    pub method: String,
    /// Bytecode offset of the faulting instruction.
    pub offset: u32,
}

impl std::fmt::Display for FaultSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "method {} at offset {}", self.method, self.offset)
    }
}

#[derive(Clone, Copy, Debug)]
struct RetAddr {
    m: u32,
    pc: u32,
    base: u32,
}

struct State {
    stack: Vec<i32>,
    frames: Vec<RetAddr>,
    heap: Heap,
    fields: Vec<i32>,
    array_fields: Vec<usize>,
    pinned: Vec<i32>,
    last_fuel: u64,
    site: Option<(u32, u32)>,
    fault: Option<Fault>,
    /// The host's window: address and length (0, 0 when none is set; see
    /// [`Vm::set_window`]).
    window: (usize, u64),
    /// Bytes of machine stack compiled code may use per invocation
    /// ([`Vm::set_machine_stack`]).
    machine_stack: usize,
    /// How invocations' budgets are sliced, under a time or check limit,
    /// and the state of the last invocation's clock (see `budget`).
    clock: Option<Clock>,
    /// [`Vm::set_check_limit`] (0: none).
    check_limit: u64,
}

/// A running applet: one instance of a [`Class`] with its fields, heap and
/// limits. Generic over the host state `H` handed to natives.
pub struct Vm<H> {
    class: Class<H>,
    limits: Limits,
    checkpoint: Option<Checkpoint<H>>,
    st: State,
    /// Machine code for the methods [`Vm::compile`] compiled.
    #[cfg(feature = "jit")]
    jit: Option<crate::jit::Compiled<H>>,
}

impl<H> std::fmt::Debug for Vm<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vm")
            .field("class", &self.class.inner.name)
            .field("limits", &self.limits)
            .field("heap_used", &self.st.heap.used())
            .finish()
    }
}

/// Collect garbage: roots are the array fields and `extra` slot values.
fn collect(heap: &mut Heap, fields: &[i32], array_fields: &[usize], pinned: &[i32], extra: &[i32]) {
    let roots = array_fields
        .iter()
        .map(|&i| fields[i])
        .chain(pinned.iter().copied())
        .chain(extra.iter().copied());
    heap.collect(roots);
}

impl State {
    fn collect(&mut self, extra: &[i32]) {
        collect(
            &mut self.heap,
            &self.fields,
            &self.array_fields,
            &self.pinned,
            extra,
        );
    }
}

/// The current frame's slots, indexed by [`crate::decode::Slot`].
///
/// Indexing with a slot skips the bounds check: every frame slice is
/// created as exactly `frame_size` slots of its method, and
/// [`crate::decode::validate`] checked at load that every slot operand of
/// every op of that method is below `frame_size`. Indexing with `usize`
/// goes through the checked slice (`.0`).
struct Regs<'a>(&'a mut [i32]);

impl std::ops::Index<u16> for Regs<'_> {
    type Output = i32;
    #[inline(always)]
    fn index(&self, i: u16) -> &i32 {
        debug_assert!((i as usize) < self.0.len());
        // SAFETY: `i` is a slot operand of an op of the running method,
        // which `decode::validate` proved to be < frame_size, and this slice
        // has exactly frame_size elements (see the constructors in `run`).
        #[allow(unsafe_code)]
        unsafe {
            self.0.get_unchecked(i as usize)
        }
    }
}

impl std::ops::IndexMut<u16> for Regs<'_> {
    #[inline(always)]
    fn index_mut(&mut self, i: u16) -> &mut i32 {
        debug_assert!((i as usize) < self.0.len());
        // SAFETY: as for `Index` above.
        #[allow(unsafe_code)]
        unsafe {
            self.0.get_unchecked_mut(i as usize)
        }
    }
}

/// The fuel of an invocation of `entry` with budget `b` (see
/// [`Budget::new`]) after the host's call has charged the entry method's
/// length (below zero: the budget does not cover it).
#[inline(always)]
fn entry_fuel<H>(
    cls: &ClassInner<H>,
    host: &mut H,
    entry: usize,
    b: &mut Budget<H>,
    clock: &mut Option<Clock>,
) -> i64 {
    let mut fuel = b.first - cls.code[entry].ops.len() as i64;
    if fuel < 0 {
        // A fault leaves `fuel` below zero (out of fuel); a time limit
        // cannot be passed at the first reading of the clock.
        fuel = refill(fuel, b, clock, host).0;
    }
    fuel
}

/// Cost in fuel of a collection during an invocation that scans `slots`
/// frame slots and a heap of `heap` (its table of arrays and its roots):
/// one unit per [`crate::limits::GC_WORDS_PER_FUEL`] words, at least one.
#[inline]
fn gc_cost(heap: &Heap, roots: usize, slots: usize) -> i64 {
    let words = (slots + roots + heap.arrays.len()) as u64;
    (1 + words / crate::limits::GC_WORDS_PER_FUEL).min(i64::MAX as u64) as i64
}

#[inline(never)]
/// Run method `entry` whose arguments are in `st.stack[0..]`. Returns the
/// result (0 for void) and the fuel left.
fn run<H>(
    cls: &ClassInner<H>,
    st: &mut State,
    limits: &Limits,
    host: &mut H,
    entry: usize,
    checkpoint: Option<Checkpoint<H>>,
) -> Option<i32> {
    let mut budget = Budget::new(limits, checkpoint, &st.clock);
    let mut fuel = entry_fuel(cls, host, entry, &mut budget, &mut st.clock);
    let max_depth = limits.max_depth.max(1) as usize;
    let mut m = entry;
    let mut mc = &cls.code[m];
    let mut code: &[Op] = &mc.ops;
    let mut pc: usize = 0;
    let mut base: usize = 0;
    let State {
        stack,
        frames,
        heap,
        fields,
        array_fields,
        pinned,
        last_fuel,
        site,
        fault,
        clock,
        ..
    } = st;
    let need = mc.frame_size as usize;
    if stack.len() < need {
        stack.resize(need, 0);
    }
    frames.clear();
    let mut fr = Regs(&mut stack[base..base + mc.frame_size as usize]);

    // `fuel` went below zero: take the next part of the budget (see
    // `refill`), or stop.
    macro_rules! spent {
        () => {{
            let (left, f) = refill(fuel, &mut budget, clock, host);
            fuel = left;
            if let Some(f) = f {
                break Err(f);
            }
        }};
    }
    macro_rules! jump {
        ($t:expr) => {{
            let t = $t as usize;
            if t < pc {
                fuel -= (pc - t) as i64;
                if fuel < 0 {
                    spent!();
                }
            }
            pc = t;
        }};
    }
    macro_rules! br {
        ($cond:expr, $t:expr) => {{
            if $cond {
                jump!($t)
            }
        }};
    }
    macro_rules! ret {
        ($v:expr) => {{
            let v: i32 = $v;
            match frames.pop() {
                None => break Ok(v),
                Some(r) => {
                    fr.0[0] = v;
                    m = r.m as usize;
                    mc = &cls.code[m];
                    code = &mc.ops;
                    pc = r.pc as usize;
                    base = r.base as usize;
                    fr = Regs(&mut stack[base..base + mc.frame_size as usize]);
                }
            }
        }};
    }
    macro_rules! aload {
        ($d:expr, $a:expr, $i:expr, $v:ident, $($pat:pat_param)|+ => $conv:expr) => {{
            let h = fr[$a];
            let i: i32 = $i;
            match heap.arrays.get((h as u32 as usize).wrapping_sub(1)) {
                $(Some($pat))|+ => match $v.get(i as u32 as usize) {
                    Some(x) => fr[$d] = $conv(*x),
                    None => {
                        break Err(Fault::ArrayIndexOutOfBounds {
                            index: i,
                            length: $v.len() as i32,
                        })
                    }
                },
                _ => break Err(arr_fault(h)),
            }
        }};
    }
    macro_rules! astore {
        ($a:expr, $i:expr, $s:expr, $v:ident, $($pat:pat_param)|+ => $conv:expr) => {{
            let h = fr[$a];
            let i: i32 = $i;
            let x = fr[$s];
            match heap.arrays.get_mut((h as u32 as usize).wrapping_sub(1)) {
                $(Some($pat))|+ => {
                    let len = $v.len() as i32;
                    match $v.get_mut(i as u32 as usize) {
                        Some(e) => *e = $conv(x),
                        None => break Err(Fault::ArrayIndexOutOfBounds { index: i, length: len }),
                    }
                }
                _ => break Err(arr_fault(h)),
            }
        }};
    }

    let res: Result<i32, Fault> = if fuel < 0 {
        Err(Fault::OutOfFuel)
    } else {
        loop {
            let op = &code[pc];
            pc += 1;
            match *op {
                Op::Mov { d, s } => fr[d] = fr[s],
                Op::Const { d, v } => fr[d] = v,
                Op::Add { d, a, b } => fr[d] = fr[a].wrapping_add(fr[b]),
                Op::Sub { d, a, b } => fr[d] = fr[a].wrapping_sub(fr[b]),
                Op::Mul { d, a, b } => fr[d] = fr[a].wrapping_mul(fr[b]),
                Op::Div { d, a, b } => {
                    let y = fr[b];
                    if y == 0 {
                        break Err(Fault::DivideByZero);
                    }
                    fr[d] = fr[a].wrapping_div(y);
                }
                Op::Rem { d, a, b } => {
                    let y = fr[b];
                    if y == 0 {
                        break Err(Fault::DivideByZero);
                    }
                    fr[d] = fr[a].wrapping_rem(y);
                }
                Op::And { d, a, b } => fr[d] = fr[a] & fr[b],
                Op::Or { d, a, b } => fr[d] = fr[a] | fr[b],
                Op::Xor { d, a, b } => fr[d] = fr[a] ^ fr[b],
                Op::Shl { d, a, b } => fr[d] = fr[a].wrapping_shl(fr[b] as u32),
                Op::Shr { d, a, b } => fr[d] = fr[a].wrapping_shr(fr[b] as u32),
                Op::Ushr { d, a, b } => fr[d] = (fr[a] as u32).wrapping_shr(fr[b] as u32) as i32,
                Op::AddI { d, a, v } => fr[d] = fr[a].wrapping_add(v),
                Op::SubIR { d, v, b } => fr[d] = v.wrapping_sub(fr[b]),
                Op::MulI { d, a, v } => fr[d] = fr[a].wrapping_mul(v),
                Op::DivI { d, a, v } => fr[d] = fr[a].wrapping_div(v),
                Op::RemI { d, a, v } => fr[d] = fr[a].wrapping_rem(v),
                Op::AndI { d, a, v } => fr[d] = fr[a] & v,
                Op::OrI { d, a, v } => fr[d] = fr[a] | v,
                Op::XorI { d, a, v } => fr[d] = fr[a] ^ v,
                Op::ShlI { d, a, v } => fr[d] = fr[a].wrapping_shl(v as u32),
                Op::ShrI { d, a, v } => fr[d] = fr[a].wrapping_shr(v as u32),
                Op::UshrI { d, a, v } => fr[d] = (fr[a] as u32).wrapping_shr(v as u32) as i32,
                Op::Neg { d, s } => fr[d] = fr[s].wrapping_neg(),
                Op::I2b { d, s } => fr[d] = fr[s] as i8 as i32,
                Op::I2s { d, s } => fr[d] = fr[s] as i16 as i32,
                Op::Inc { x, v } => fr[x] = fr[x].wrapping_add(v),
                Op::IfEq { a, b, t } => br!(fr[a] == fr[b], t),
                Op::IfNe { a, b, t } => br!(fr[a] != fr[b], t),
                Op::IfLt { a, b, t } => br!(fr[a] < fr[b], t),
                Op::IfGe { a, b, t } => br!(fr[a] >= fr[b], t),
                Op::IfGt { a, b, t } => br!(fr[a] > fr[b], t),
                Op::IfLe { a, b, t } => br!(fr[a] <= fr[b], t),
                Op::IfEqI { a, v, t } => br!(fr[a] == v, t),
                Op::IfNeI { a, v, t } => br!(fr[a] != v, t),
                Op::IfLtI { a, v, t } => br!(fr[a] < v, t),
                Op::IfGeI { a, v, t } => br!(fr[a] >= v, t),
                Op::IfGtI { a, v, t } => br!(fr[a] > v, t),
                Op::IfLeI { a, v, t } => br!(fr[a] <= v, t),
                Op::Goto { t } => jump!(t),
                Op::IncLt { x, v, b, t } => {
                    let y = fr[x].wrapping_add(v as i32);
                    fr[x] = y;
                    if y < fr[b] {
                        jump!(t)
                    } else {
                        pc += 1
                    }
                }
                Op::IncLe { x, v, b, t } => {
                    let y = fr[x].wrapping_add(v as i32);
                    fr[x] = y;
                    if y <= fr[b] {
                        jump!(t)
                    } else {
                        pc += 1
                    }
                }
                Op::IncNe { x, v, b, t } => {
                    let y = fr[x].wrapping_add(v as i32);
                    fr[x] = y;
                    if y != fr[b] {
                        jump!(t)
                    } else {
                        pc += 1
                    }
                }
                Op::IncGt { x, v, b, t } => {
                    let y = fr[x].wrapping_add(v as i32);
                    fr[x] = y;
                    if y > fr[b] {
                        jump!(t)
                    } else {
                        pc += 1
                    }
                }
                Op::IncGe { x, v, b, t } => {
                    let y = fr[x].wrapping_add(v as i32);
                    fr[x] = y;
                    if y >= fr[b] {
                        jump!(t)
                    } else {
                        pc += 1
                    }
                }
                Op::Switch { s, tab } => {
                    let st = &mc.switches[tab as usize];
                    let cost = st.cost();
                    if cost > 0 {
                        fuel -= cost;
                        if fuel < 0 {
                            spent!();
                        }
                    }
                    jump!(st.lookup(fr[s]))
                }
                Op::GetF { d, f } => fr[d] = fields[f as usize],
                Op::PutF { f, s } => fields[f as usize] = fr[s],
                Op::PutFB { f, s } => fields[f as usize] = fr[s] as i8 as i32,
                Op::PutFS { f, s } => fields[f as usize] = fr[s] as i16 as i32,
                Op::PutFZ { f, s } => fields[f as usize] = fr[s] & 1,
                Op::NullCheck { s } => {
                    if fr[s] == 0 {
                        break Err(Fault::NullPointer);
                    }
                }
                Op::IaLoad { d, a, i } => aload!(d, a, fr[i], v, ArrayData::I(v) => |x: i32| x),
                Op::BaLoad { d, a, i } => {
                    aload!(d, a, fr[i], v, ArrayData::B(v) | ArrayData::Z(v) => |x: i8| x as i32)
                }
                Op::SaLoad { d, a, i } => {
                    aload!(d, a, fr[i], v, ArrayData::S(v) => |x: i16| x as i32)
                }
                Op::IaStore { a, i, s } => astore!(a, fr[i], s, v, ArrayData::I(v) => |x: i32| x),
                Op::BaStore { a, i, s } => {
                    astore!(a, fr[i], s, v, ArrayData::B(v) => |x: i32| x as i8)
                }
                Op::ZaStore { a, i, s } => {
                    astore!(a, fr[i], s, v, ArrayData::Z(v) => |x: i32| (x & 1) as i8)
                }
                Op::SaStore { a, i, s } => {
                    astore!(a, fr[i], s, v, ArrayData::S(v) => |x: i32| x as i16)
                }
                Op::IaLoadK { d, a, k } => aload!(d, a, k, v, ArrayData::I(v) => |x: i32| x),
                Op::BaLoadK { d, a, k } => {
                    aload!(d, a, k, v, ArrayData::B(v) | ArrayData::Z(v) => |x: i8| x as i32)
                }
                Op::IaStoreK { a, k, s } => astore!(a, k, s, v, ArrayData::I(v) => |x: i32| x),
                Op::BaStoreK { a, k, s } => {
                    astore!(a, k, s, v, ArrayData::B(v) => |x: i32| x as i8)
                }
                Op::Add3 { d, a, b, c } => fr[d] = fr[a].wrapping_add(fr[b]).wrapping_add(fr[c]),
                Op::Add4 { d, a, b, c, e } => {
                    fr[d] = fr[a]
                        .wrapping_add(fr[b])
                        .wrapping_add(fr[c])
                        .wrapping_add(fr[e])
                }
                Op::DivM { d, a, k } => fr[d] = mc.divs[k as usize].div(fr[a]),
                Op::RemM { d, a, k } => fr[d] = mc.divs[k as usize].rem(fr[a]),
                Op::AddF { d, a, f } => fr[d] = fr[a].wrapping_add(fields[f as usize]),
                Op::ArrLen { d, a } => {
                    let h = fr[a];
                    match heap.get(h) {
                        Some(arr) => fr[d] = arr.len() as i32,
                        None => break Err(arr_fault(h)),
                    }
                }
                Op::NewArray { d, n, e } => {
                    let len = fr[n];
                    if len < 0 {
                        break Err(Fault::NegativeArraySize(len));
                    }
                    fuel -= 1 + (len as i64) / 16;
                    if fuel < 0 {
                        spent!();
                    }
                    let h = match heap.alloc(e, len) {
                        Ok(h) => h,
                        Err(Fault::HeapQuotaExceeded { .. }) => {
                            let top = base + mc.frame_size as usize;
                            // The collection scans every live frame slot
                            // and the array table: charged before it runs,
                            // so that it does not run without the fuel.
                            fuel -= gc_cost(heap, array_fields.len() + pinned.len(), top);
                            if fuel < 0 {
                                spent!();
                            }
                            collect(heap, fields, array_fields, pinned, &stack[..top]);
                            fr = Regs(&mut stack[base..top]);
                            match heap.alloc(e, len) {
                                Ok(h) => h,
                                Err(f) => break Err(f),
                            }
                        }
                        Err(f) => break Err(f),
                    };
                    fr[d] = h;
                }
                Op::Call { m: cm, at } => {
                    let callee = &cls.code[cm as usize];
                    fuel -= callee.ops.len() as i64;
                    if fuel < 0 {
                        spent!();
                    }
                    if frames.len() + 1 >= max_depth {
                        break Err(Fault::StackOverflow);
                    }
                    let nb = base + at as usize;
                    let top = nb + callee.frame_size as usize;
                    if top > stack.len() {
                        if top > MAX_STACK_SLOTS {
                            break Err(Fault::StackOverflow);
                        }
                        let len = (stack.len() * 2).clamp(top, MAX_STACK_SLOTS);
                        stack.resize(len, 0);
                    }
                    frames.push(RetAddr {
                        m: m as u32,
                        pc: pc as u32,
                        base: base as u32,
                    });
                    m = cm as usize;
                    mc = callee;
                    code = &callee.ops;
                    pc = 0;
                    base = nb;
                    fr = Regs(&mut stack[nb..top]);
                }
                Op::CallNative { n, d, k, argc } => {
                    fuel -= 1;
                    if fuel < 0 {
                        spent!();
                    }
                    let nat = &cls.natives[n as usize];
                    let specs = &mc.args[k as usize..k as usize + argc as usize];
                    let arg = |a: &Arg| match *a {
                        Arg::S(s) => fr[s],
                        Arg::K(v) => v,
                        Arg::F(f) => fields[f as usize],
                    };
                    let mut small = [0i32; 8];
                    let big: Vec<i32>;
                    let args: &[i32] = if specs.len() <= small.len() {
                        for (x, a) in small.iter_mut().zip(specs) {
                            *x = arg(a);
                        }
                        &small[..specs.len()]
                    } else {
                        big = specs.iter().map(arg).collect();
                        &big
                    };
                    // The native charges a copy of the counter, so that
                    // `fuel` itself can stay in a register; it sees the
                    // whole budget left, reserve included.
                    let reserve = budget.reserve;
                    let mut left = fuel + reserve;
                    let r = {
                        let mut cx = NativeCtx {
                            heap,
                            fuel: &mut left,
                        };
                        (nat.f)(host, &mut cx, args)
                    };
                    fuel = left - reserve;
                    match r {
                        Ok(v) => {
                            if let Some(f) = bad_native_array(heap, nat, v) {
                                break Err(f);
                            }
                            if nat.sig.ret.is_some() {
                                fr[d] = v;
                            }
                        }
                        Err(f) => break Err(*f),
                    }
                    if fuel < 0 {
                        spent!();
                    }
                }
                Op::Ret { s } => ret!(fr[s]),
                Op::RetK { v } => ret!(v),
                Op::RetB { s } => ret!(fr[s] as i8 as i32),
                Op::RetS { s } => ret!(fr[s] as i16 as i32),
                Op::RetZ { s } => ret!(fr[s] & 1),
                Op::RetVoid => ret!(0),
            }
        }
    };
    if res.is_err() {
        let off = mc.offsets.get(pc.wrapping_sub(1)).copied().unwrap_or(0);
        *site = Some((m as u32, off));
    }
    frames.clear();
    *last_fuel = limits
        .fuel
        .saturating_sub((fuel + budget.reserve).max(0) as u64);
    match res {
        Ok(v) => Some(v),
        Err(f) => {
            *fault = Some(f);
            None
        }
    }
}

/// [`run`] for a method compiled to machine code: the same entry charge
/// and checkpoint split, the same bookkeeping of fuel and faults after.
#[cfg(feature = "jit")]
#[allow(clippy::too_many_arguments)]
fn run_compiled<H>(
    cls: &ClassInner<H>,
    st: &mut State,
    limits: &Limits,
    host: &mut H,
    m: usize,
    checkpoint: Option<Checkpoint<H>>,
    jit: &crate::jit::Compiled<H>,
    entry: *const u8,
    args: Option<&[i32]>,
) -> Option<i32> {
    let mut budget = Budget::new(limits, checkpoint, &st.clock);
    let fuel = entry_fuel(cls, host, m, &mut budget, &mut st.clock);
    if fuel < 0 {
        st.last_fuel = limits
            .fuel
            .saturating_sub((fuel + budget.reserve).max(0) as u64);
        st.site = Some((m as u32, 0));
        st.fault = Some(Fault::OutOfFuel);
        return None;
    }
    let r = enter_compiled(cls, st, limits, host, jit, entry, (fuel, &mut budget), args);
    (r != crate::jit::FAULT).then_some(r as i32)
}

/// Run the compiled `entry` with the budget `(fuel, rest)` left
/// after the entry charge, and record the fuel used and any fault as the
/// interpreter does. The arguments are in the slot array (`args` None) or,
/// for a prepared call, in `args`, exactly the method's argument count.
/// Returns the result, or [`crate::jit::FAULT`] with the fault recorded.
#[cfg(feature = "jit")]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn enter_compiled<H>(
    cls: &ClassInner<H>,
    st: &mut State,
    limits: &Limits,
    host: &mut H,
    jit: &crate::jit::Compiled<H>,
    entry: *const u8,
    (fuel, budget): (i64, &mut Budget<H>),
    args: Option<&[i32]>,
) -> i64 {
    let State {
        stack,
        heap,
        fields,
        window,
        machine_stack,
        clock,
        ..
    } = st;
    let mut env = crate::jit::Env {
        cls,
        heap,
        host,
        budget,
        clock,
        fault: None,
        site: (0, 0),
        window: *window,
    };
    let max_depth = limits.max_depth.max(1) as i64;
    let args = args.unwrap_or(stack);
    let (r, left) = jit.run(
        entry,
        fuel,
        fields,
        max_depth,
        *machine_stack,
        &mut env,
        args,
    );
    let left = (left + env.budget.reserve).max(0) as u64;
    if r == crate::jit::FAULT {
        let (f, site) = (env.fault.take(), env.site);
        st.last_fuel = limits.fuel.saturating_sub(left);
        compiled_fault(cls, st, f, site);
        return crate::jit::FAULT;
    }
    st.last_fuel = limits.fuel.saturating_sub(left);
    r
}

/// Record a fault of compiled code (its site as the interpreter gives it).
#[cfg(feature = "jit")]
#[cold]
#[inline(never)]
fn compiled_fault<H>(cls: &ClassInner<H>, st: &mut State, f: Option<Fault>, (fm, op): (u32, u32)) {
    let off = cls
        .code
        .get(fm as usize)
        .and_then(|mc| mc.offsets.get(op as usize))
        .copied()
        .unwrap_or(0);
    st.site = Some((fm, off));
    st.fault = Some(f.unwrap_or(Fault::Internal("compiled code lost a fault".into())));
}

/// After an invocation: the fault taken out of the state, and garbage
/// collected if the invocation allocated (keeping a returned array).
#[inline(always)]
fn finish<H>(
    cls: &ClassInner<H>,
    st: &mut State,
    m: usize,
    out: Option<i32>,
) -> Result<i32, Fault> {
    let res = out.ok_or_else(|| {
        st.fault
            .take()
            .unwrap_or(Fault::Internal("lost fault".into()))
    });
    if st.heap.allocs_since_gc > 0 {
        let keep = match (&res, cls.methods[m].sig.ret) {
            (Ok(v), Some(JType::Array(_))) => *v,
            _ => 0,
        };
        st.collect(&[keep]);
    }
    res
}

/// A method checked by [`Vm::prepare`] for calls with `N` `int` arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prepared<const N: usize> {
    /// Identity of the class it was checked in.
    class: usize,
    m: u16,
    /// What entering the method charges (its length, see `entry_fuel`).
    entry_ops: u32,
    is_static: bool,
    returns: bool,
}

impl<H> Vm<H> {
    /// Create the applet: zero the fields (static fields with a
    /// `ConstantValue` take it, narrowed to the field's type as a store
    /// would be: `byte` 300 reads 44, `boolean` 7 reads 1), run
    /// `<clinit>`, then the constructor `<init>()V`.
    pub fn new(class: Class<H>, limits: Limits, host: &mut H) -> Result<Vm<H>, Fault> {
        let inner = &class.inner;
        let st = State {
            stack: Vec::with_capacity(256),
            frames: Vec::with_capacity(64),
            heap: Heap::new(limits.heap_quota),
            fields: inner.field_init.clone(),
            array_fields: inner
                .fields
                .iter()
                .enumerate()
                .filter(|(_, f)| f.ty.is_array())
                .map(|(i, _)| i)
                .collect(),
            pinned: Vec::new(),
            last_fuel: 0,
            site: None,
            fault: None,
            window: (0, 0),
            machine_stack: DEFAULT_MACHINE_STACK,
            clock: Pace::new(Pace::INITIAL_PS, limits.max_time, 0).map(Clock::new),
            check_limit: 0,
        };
        let mut vm = Vm {
            class,
            limits,
            checkpoint: None,
            st,
            #[cfg(feature = "jit")]
            jit: None,
        };
        let (clinit, init) = (vm.class.inner.clinit, vm.class.inner.init);
        if let Some(c) = clinit {
            vm.call(host, c as usize, &[])?;
        }
        if let Some(i) = init {
            vm.call(host, i as usize, &[THIS])?;
        }
        Ok(vm)
    }

    fn call(&mut self, host: &mut H, m: usize, slots: &[i32]) -> Result<i32, Fault> {
        if self.st.stack.len() < slots.len() {
            self.st.stack.resize(slots.len(), 0);
        }
        self.st.stack[..slots.len()].copy_from_slice(slots);
        self.run_placed(host, m)
    }

    /// Run method `m` whose argument slots are already in place.
    #[inline(always)]
    fn run_placed(&mut self, host: &mut H, m: usize) -> Result<i32, Fault> {
        let Vm {
            class,
            limits,
            checkpoint,
            st,
            #[cfg(feature = "jit")]
            jit,
        } = self;
        let cls = &*class.inner;
        st.site = None;
        #[cfg(feature = "jit")]
        let out = match jit.as_ref().and_then(|j| Some((j, j.entry(m)?))) {
            Some((j, entry)) => run_compiled(cls, st, limits, host, m, *checkpoint, j, entry, None),
            None => run(cls, st, limits, host, m, *checkpoint),
        };
        #[cfg(not(feature = "jit"))]
        let out = run(cls, st, limits, host, m, *checkpoint);
        finish(cls, st, m, out)
    }

    /// Check method `m` once for many calls with `N` `int` arguments
    /// through [`Vm::invoke_prepared`], which then skips the checks
    /// [`Vm::invoke`] makes on every call (the method exists, the host may
    /// call it, the argument count and kinds). For hosts that call the same
    /// methods on every packet.
    pub fn prepare<const N: usize>(&self, m: MethodId) -> Result<Prepared<N>, Fault> {
        let cls = &*self.class.inner;
        let mi = m.0 as usize;
        let (Some(mc), Some(md)) = (cls.code.get(mi), cls.methods.get(mi)) else {
            return Err(Fault::BadArguments(format!("no method {}", m.0)));
        };
        if mc.internal {
            return Err(Fault::BadArguments(format!(
                "{} cannot be invoked by the host",
                md.name
            )));
        }
        if md.sig.params.len() != N || !mc.int_params {
            return Err(Fault::BadArguments(format!(
                "{}{} does not take {N} int argument(s)",
                md.name, md.descriptor
            )));
        }
        Ok(Prepared {
            class: std::sync::Arc::as_ptr(&self.class.inner) as *const () as usize,
            m: m.0,
            entry_ops: mc.ops.len() as u32,
            is_static: mc.is_static,
            returns: mc.returns,
        })
    }

    /// [`Vm::invoke`] of a method checked by [`Vm::prepare`]: the same
    /// result, fuel use, fault and fault site, without the per-call checks;
    /// a compiled static method is entered with `args` in place.
    /// `Prepared` values of another class are refused.
    #[inline]
    pub fn invoke_prepared<const N: usize>(
        &mut self,
        host: &mut H,
        p: Prepared<N>,
        args: [i32; N],
    ) -> Result<Option<i32>, Fault> {
        if p.class != std::sync::Arc::as_ptr(&self.class.inner) as *const () as usize {
            return Err(Fault::BadArguments(
                "method prepared for another class".into(),
            ));
        }
        let m = p.m as usize;
        #[cfg(feature = "jit")]
        if p.is_static {
            let Vm {
                class,
                limits,
                checkpoint,
                st,
                jit,
            } = self;
            if let Some((j, entry)) = jit.as_ref().and_then(|j| Some((j, j.entry(m)?))) {
                let cls = &*class.inner;
                st.site = None;
                // The common case, entering within the first part of the
                // budget, kept short: the same charge, code and bookkeeping
                // as `run_compiled` (see `entry_fuel`), nothing else.
                let mut budget = Budget::new(limits, *checkpoint, &st.clock);
                let fuel = budget.first - p.entry_ops as i64;
                if fuel >= 0 {
                    let budget = (fuel, &mut budget);
                    let r = enter_compiled(cls, st, limits, host, j, entry, budget, Some(&args));
                    if r != crate::jit::FAULT && st.heap.allocs_since_gc == 0 {
                        return Ok(p.returns.then_some(r as i32));
                    }
                    let out = (r != crate::jit::FAULT).then_some(r as i32);
                    return finish(cls, st, m, out).map(|r| p.returns.then_some(r));
                }
                let out =
                    run_compiled(cls, st, limits, host, m, *checkpoint, j, entry, Some(&args));
                return finish(cls, st, m, out).map(|r| p.returns.then_some(r));
            }
        }
        let skip = usize::from(!p.is_static);
        let need = (N + skip).max(self.class.inner.code[m].frame_size as usize);
        let stack = &mut self.st.stack;
        if stack.len() < need {
            stack.resize(need, 0);
        }
        if skip == 1 {
            stack[0] = THIS;
        }
        stack[skip..skip + N].copy_from_slice(&args);
        let r = self.run_placed(host, m)?;
        Ok(p.returns.then_some(r))
    }

    /// Compile the class's methods to machine code (feature `jit`):
    /// later invocations of a compiled method run its code instead of the
    /// interpreter, with the same results, fuel, faults and fault sites
    /// (except a [`Fault::StackOverflow`] of the machine-stack budget,
    /// [`Vm::set_machine_stack`]). Methods that allocate arrays or recurse,
    /// methods over the compiler's size bounds (more than 16 Ki ops, 4096
    /// frame slots, or 256 Ki ops times slots; past 64 Ki ops or 1 Mi ops
    /// times slots per class; a machine frame over 16 KiB; calls that may
    /// pass [`MAX_STACK_SLOTS`]), and their callers,
    /// stay interpreted (see the `jit` module). Returns how many methods were
    /// compiled; an error (the machine is not supported, or the compiler
    /// rejected a method) leaves the VM interpreting everything.
    #[cfg(feature = "jit")]
    pub fn compile(&mut self) -> Result<usize, String> {
        self.jit = None;
        let c = self.class.compile()?;
        self.install(c)
    }

    /// Install code compiled from this VM's class
    /// ([`Class::compile`], possibly on another thread): later invocations
    /// of its compiled methods run it. Returns how many methods it
    /// compiled; code of another class is refused and changes nothing.
    #[cfg(feature = "jit")]
    pub fn install(&mut self, code: crate::jit::Compiled<H>) -> Result<usize, String> {
        if !std::sync::Arc::ptr_eq(&code.class, &self.class.inner) {
            return Err("the code was compiled from another class".into());
        }
        let n = code.count();
        self.jit = Some(code);
        Ok(n)
    }

    /// Go back to interpreting every method (drops compiled code).
    #[cfg(feature = "jit")]
    pub fn uncompile(&mut self) {
        self.jit = None;
    }

    /// Whether invocations of method `m` run compiled code.
    pub fn is_compiled(&self, m: MethodId) -> bool {
        #[cfg(feature = "jit")]
        {
            self.jit
                .as_ref()
                .is_some_and(|j| j.entry(m.0 as usize).is_some())
        }
        #[cfg(not(feature = "jit"))]
        {
            let _ = m;
            false
        }
    }

    /// The class this VM runs.
    pub fn class(&self) -> &Class<H> {
        &self.class
    }

    /// The VM's limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Change the limits (a smaller quota applies to future allocations).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
        self.st.heap.set_quota(limits.heap_quota);
        self.repace();
    }

    /// Stop every invocation at its `n`-th fuel check with
    /// [`Fault::OutOfFuel`], as if its fuel ran out there (`None`: no such
    /// limit, the default). The checks are where fuel is charged: the
    /// entry, taken back-edges, calls, native calls (before the native,
    /// and after it when it charged), allocations; interpreted and compiled
    /// code check at the same points. With `n` = 1, 2, 3, ... an invocation
    /// stops at each successive check ([`Vm::last_fault_site`] names it,
    /// [`Vm::last_fuel_used`] grows with `n`) until `n` exceeds its checks
    /// and it completes: a host uses it to terminate a handler at every
    /// point where it can be terminated and check its own state after
    /// each. Every check then leaves the hot path (an invocation runs
    /// slower), and the time limit is not applied.
    pub fn set_check_limit(&mut self, n: Option<u64>) {
        self.st.check_limit = n.unwrap_or(0);
        self.repace();
    }

    fn repace(&mut self) {
        let ps = self
            .st
            .clock
            .as_ref()
            .map_or(Pace::INITIAL_PS, |c| c.pace.ps);
        let pace = Pace::new(ps, self.limits.max_time, self.st.check_limit);
        self.st.clock = pace.map(Clock::new);
    }

    /// Call `hook` in every invocation that uses more than `fuel` units of
    /// its budget, once, at the moment it does. A host that wants to time
    /// only long invocations reads its clock there instead of at the start
    /// of every invocation; the check costs nothing, as the budget is simply
    /// split in two at that point.
    pub fn set_checkpoint(&mut self, fuel: u64, hook: fn(&mut H)) {
        self.checkpoint = Some(Checkpoint { fuel, hook });
    }

    /// Remove the checkpoint.
    pub fn clear_checkpoint(&mut self) {
        self.checkpoint = None;
    }

    /// Invoke method `m` with `args` (one per descriptor parameter, `this`
    /// is implicit for instance methods): ints, or array handles
    /// ([`ArrayRef::handle`], 0 for null) for array parameters. Returns the
    /// result (`None` for void; array results are handles). On a fault the
    /// VM stays usable; [`Vm::last_fault_site`] tells where it happened.
    #[inline]
    pub fn invoke(
        &mut self,
        host: &mut H,
        m: MethodId,
        args: &[i32],
    ) -> Result<Option<i32>, Fault> {
        let cls = &*self.class.inner;
        let mi = m.0 as usize;
        let Some(mc) = cls.code.get(mi) else {
            return Err(Fault::BadArguments(format!("no method {}", m.0)));
        };
        let md = &cls.methods[mi];
        if mc.internal {
            return Err(Fault::BadArguments(format!(
                "{} cannot be invoked by the host",
                md.name
            )));
        }
        if args.len() != md.sig.params.len() {
            return Err(Fault::BadArguments(format!(
                "{}{} takes {} argument(s), got {}",
                md.name,
                md.descriptor,
                md.sig.params.len(),
                args.len()
            )));
        }
        if !mc.int_params {
            for (i, (p, &a)) in md.sig.params.iter().zip(args).enumerate() {
                let ok = match p {
                    JType::Int => true,
                    JType::Byte => a == a as i8 as i32,
                    JType::Short => a == a as i16 as i32,
                    JType::Bool => a == 0 || a == 1,
                    JType::Array(e) => {
                        a == 0 || self.st.heap.get(a).and_then(|x| x.elem()) == Some(*e)
                    }
                };
                if !ok {
                    return Err(Fault::BadArguments(format!(
                        "argument {i} ({a}) is not a valid {p:?} for {}{}",
                        md.name, md.descriptor
                    )));
                }
            }
        }
        let returns = mc.returns;
        let skip = usize::from(!mc.is_static);
        let need = (args.len() + skip).max(mc.frame_size as usize);
        let stack = &mut self.st.stack;
        if stack.len() < need {
            stack.resize(need, 0);
        }
        if skip == 1 {
            stack[0] = THIS;
        }
        // A plain loop: host calls pass a handful of arguments, fewer than
        // a memcpy call's set-up costs.
        for (i, &a) in args.iter().enumerate() {
            stack[skip + i] = a;
        }
        let r = self.run_placed(host, mi)?;
        Ok(returns.then_some(r))
    }

    /// Lend the VM `len` bytes at `base` (the *window*) for the invocations
    /// that follow, until [`Vm::clear_window`]: natives registered as an
    /// [`Intrinsic`](crate::Intrinsic) copy between it and the applet's
    /// arrays, in compiled code, without a call. A null `base` or a zero
    /// `len` is no window.
    ///
    /// # Safety
    /// Until the window is cleared or replaced, `base..base + len` must be
    /// valid for reads and writes during every invocation and must not
    /// overlap memory the VM owns (its heap). Compiled code copies bytes in
    /// and out and never interprets them, so other parties (another
    /// process sharing the memory) may write it meanwhile.
    #[allow(unsafe_code)]
    #[inline]
    pub unsafe fn set_window(&mut self, base: *mut u8, len: usize) {
        self.st.window = if base.is_null() {
            (0, 0)
        } else {
            (base as usize, len as u64)
        };
    }

    /// Set the machine stack compiled code may use per invocation, in bytes
    /// (default [`DEFAULT_MACHINE_STACK`]). Each compiled method checks on
    /// entry that its frame lies within this many bytes below the
    /// invocation's entry (and, where the system tells the calling
    /// thread's stack bounds, 64 KiB above the stack's end); a method that
    /// would not is not entered and the invocation faults with
    /// [`Fault::StackOverflow`] (compiled code only: the interpreter keeps
    /// its frames on the heap, so the two can differ here). The host's
    /// thread needs this much stack free when it invokes the VM, plus what
    /// its natives use.
    pub fn set_machine_stack(&mut self, bytes: usize) {
        self.st.machine_stack = bytes;
    }

    /// The machine-stack budget of compiled code (see
    /// [`Vm::set_machine_stack`]).
    pub fn machine_stack(&self) -> usize {
        self.st.machine_stack
    }

    /// Take the window back (see [`Vm::set_window`]).
    #[inline]
    pub fn clear_window(&mut self) {
        self.st.window = (0, 0);
    }

    /// Fuel used by the last invocation (or by construction).
    pub fn last_fuel_used(&self) -> u64 {
        self.st.last_fuel
    }

    /// Where the last invocation faulted, if it did.
    pub fn last_fault_site(&self) -> Option<FaultSite> {
        let (m, offset) = self.st.site?;
        Some(FaultSite {
            method: self.class.inner.code[m as usize].name.clone(),
            offset,
        })
    }

    /// Bytes of live arrays (headers included).
    pub fn heap_used(&self) -> usize {
        self.st.heap.used()
    }

    /// Number of live arrays.
    pub fn live_arrays(&self) -> usize {
        self.st.heap.live_arrays()
    }

    /// Run the collector now (roots: the applet's fields). Arrays the host
    /// created but did not store in a field are freed.
    pub fn collect_garbage(&mut self) {
        self.st.collect(&[]);
    }

    /// The field called `name` (static or instance: there is one instance).
    pub fn static_field(&self, name: &str) -> Option<FieldId> {
        self.class.field(name)
    }

    /// The value of an int-like field (an array field gives its handle).
    pub fn get_int_field(&self, f: FieldId) -> i32 {
        self.st.fields.get(f.0 as usize).copied().unwrap_or(0)
    }

    /// Set an int-like field (narrowed to its type as `putfield` does).
    /// Array fields are left unchanged: use [`Vm::set_array_field`].
    pub fn set_int_field(&mut self, f: FieldId, v: i32) {
        let Some(fd) = self.class.inner.fields.get(f.0 as usize) else {
            return;
        };
        let v = match fd.ty {
            JType::Array(_) => return,
            JType::Int => v,
            JType::Byte => v as i8 as i32,
            JType::Short => v as i16 as i32,
            JType::Bool => v & 1,
        };
        self.st.fields[f.0 as usize] = v;
    }

    /// The array currently in field `f` (`None` for null or a non-array
    /// field).
    pub fn array_of_field(&self, f: FieldId) -> Option<ArrayRef> {
        let fd = self.class.inner.fields.get(f.0 as usize)?;
        if !fd.ty.is_array() {
            return None;
        }
        self.st.heap.array_ref(self.st.fields[f.0 as usize])
    }

    /// The handle held by field `f` if it is a `byte[]` field.
    #[inline]
    fn byte_field(&self, f: FieldId) -> Option<i32> {
        let fd = self.class.inner.fields.get(f.0 as usize)?;
        (fd.ty == JType::Array(Elem::Byte)).then(|| self.st.fields[f.0 as usize])
    }

    /// Contents of the `byte[]` in field `f` (`None`: null, or `f` is not
    /// a `byte[]` field). One lookup, for hosts that use a field's array on
    /// every invocation.
    #[inline]
    pub fn field_bytes(&self, f: FieldId) -> Option<&[i8]> {
        match self.st.heap.get(self.byte_field(f)?)? {
            ArrayData::B(v) => Some(v),
            _ => None,
        }
    }

    /// Mutable contents of the `byte[]` in field `f` (see
    /// [`Vm::field_bytes`]).
    #[inline]
    pub fn field_bytes_mut(&mut self, f: FieldId) -> Option<&mut [i8]> {
        let h = self.byte_field(f)?;
        match self.st.heap.get_mut(h)? {
            ArrayData::B(v) => Some(v),
            _ => None,
        }
    }

    /// Contents of a `byte[]` or `boolean[]`.
    pub fn bytes(&self, a: ArrayRef) -> Option<&[i8]> {
        let h = self.st.heap.check_ref(a)?;
        match self.st.heap.get(h)? {
            ArrayData::B(v) | ArrayData::Z(v) => Some(v),
            _ => None,
        }
    }

    /// Mutable contents of a `byte[]` (`None` for other kinds, including
    /// `boolean[]`, whose elements must stay 0 or 1).
    pub fn bytes_mut(&mut self, a: ArrayRef) -> Option<&mut [i8]> {
        let h = self.st.heap.check_ref(a)?;
        match self.st.heap.get_mut(h)? {
            ArrayData::B(v) => Some(v),
            _ => None,
        }
    }

    /// Contents of an `int[]`.
    pub fn ints(&self, a: ArrayRef) -> Option<&[i32]> {
        let h = self.st.heap.check_ref(a)?;
        match self.st.heap.get(h)? {
            ArrayData::I(v) => Some(v),
            _ => None,
        }
    }

    /// Mutable contents of an `int[]`.
    pub fn ints_mut(&mut self, a: ArrayRef) -> Option<&mut [i32]> {
        let h = self.st.heap.check_ref(a)?;
        match self.st.heap.get_mut(h)? {
            ArrayData::I(v) => Some(v),
            _ => None,
        }
    }

    /// Allocate a zeroed `byte[]` on the applet's heap (charged to its
    /// quota; no collection happens here). Store it in a field with
    /// [`Vm::set_array_field`], or pin it ([`Vm::pin_array`]) to pass its
    /// handle to `invoke` repeatedly: an array reachable from no field and
    /// not pinned is freed at the end of the next invocation.
    pub fn new_byte_array(&mut self, len: usize) -> Result<ArrayRef, Fault> {
        self.new_array(Elem::Byte, len)
    }

    /// Allocate a zeroed array of any kind (see [`Vm::new_byte_array`]).
    pub fn new_array(&mut self, e: Elem, len: usize) -> Result<ArrayRef, Fault> {
        let len = i32::try_from(len).map_err(|_| Fault::HeapQuotaExceeded {
            requested: len,
            quota: self.st.heap.quota(),
        })?;
        let h = self.st.heap.alloc(e, len)?;
        self.st
            .heap
            .array_ref(h)
            .ok_or_else(|| Fault::Internal("fresh array not live".into()))
    }

    /// Store array `a` in field `f`. Ignored if the field is not an array
    /// field of `a`'s kind or `a` is stale: see
    /// [`Vm::try_set_array_field`] for the checked form.
    pub fn set_array_field(&mut self, f: FieldId, a: ArrayRef) {
        let _ = self.try_set_array_field(f, a);
    }

    /// Store array `a` in field `f`, checking kinds.
    pub fn try_set_array_field(&mut self, f: FieldId, a: ArrayRef) -> Result<(), Fault> {
        let fd = self
            .class
            .inner
            .fields
            .get(f.0 as usize)
            .ok_or_else(|| Fault::BadArguments("no such field".into()))?;
        let h = self
            .st
            .heap
            .check_ref(a)
            .ok_or_else(|| Fault::BadArguments("stale array reference".into()))?;
        let kind = self.st.heap.get(h).and_then(|x| x.elem());
        match fd.ty {
            JType::Array(e) if Some(e) == kind => {
                self.st.fields[f.0 as usize] = h;
                Ok(())
            }
            _ => Err(Fault::BadArguments(format!(
                "field {} of type {} cannot hold this array",
                fd.name, fd.descriptor
            ))),
        }
    }

    /// Set a reference field to null.
    pub fn clear_array_field(&mut self, f: FieldId) {
        if let Some(fd) = self.class.inner.fields.get(f.0 as usize) {
            if fd.ty.is_array() {
                self.st.fields[f.0 as usize] = 0;
            }
        }
    }

    /// Keep array `a` alive while the host holds it (e.g. a buffer passed
    /// as an argument to every invocation), even if no field refers to it.
    /// Returns false if `a` is stale.
    pub fn pin_array(&mut self, a: ArrayRef) -> bool {
        match self.st.heap.check_ref(a) {
            Some(h) => {
                self.st.pinned.push(h);
                true
            }
            None => false,
        }
    }

    /// Undo one [`Vm::pin_array`] of `a`; the array is freed at the next
    /// collection if nothing else refers to it.
    pub fn unpin_array(&mut self, a: ArrayRef) {
        if let Some(i) = self.st.pinned.iter().position(|&h| h == a.handle) {
            self.st.pinned.swap_remove(i);
            // Make the next invocation collect.
            self.st.heap.allocs_since_gc += 1;
        }
    }

    /// A host reference to the array with handle `h` (e.g. one returned by
    /// `invoke`), if live.
    pub fn array_ref(&self, h: i32) -> Option<ArrayRef> {
        self.st.heap.array_ref(h)
    }
}
