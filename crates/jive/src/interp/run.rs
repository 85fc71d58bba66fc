//! The interpreter loop ([`run`]) and what an invocation runs on: the
//! VM's state ([`State`]: frames, heap, fields, the last fault), the entry
//! charge, the entry into compiled code and the bookkeeping after an
//! invocation.

use crate::budget::{refill, Budget, Checkpoint, Clock};
use crate::decode::{frame_roots, Arg, Op, RetAddr};
use crate::fault::Fault;
use crate::heap::{arr_fault, ArrayData, Heap};
use crate::limits::{Limits, MAX_STACK_SLOTS};
use crate::model::JType;
use crate::natives::{bad_native_array, NativeCtx};
use crate::subset::ClassInner;

pub(super) struct State {
    pub(super) stack: Vec<i32>,
    pub(super) frames: Vec<RetAddr>,
    pub(super) heap: Heap,
    pub(super) fields: Vec<i32>,
    pub(super) array_fields: Vec<usize>,
    pub(super) pinned: Vec<i32>,
    pub(super) last_fuel: u64,
    /// The last invocation ran compiled code within its first part
    /// (`Vm::invoke_prepared`'s short path): the fuel it used is not in
    /// `last_fuel` but left in the compiled code's context, and computed
    /// when asked (`Vm::last_fuel_used`) or before anything changes the
    /// context's plan (`Vm::settle_fuel`).
    pub(super) fuel_in_jit: bool,
    pub(super) site: Option<(u32, u32)>,
    pub(super) fault: Option<Fault>,
    /// The host's window: address and length (0, 0 when none is set; see
    /// [`Vm::set_window`](crate::Vm::set_window)).
    pub(super) window: (usize, u64),
    /// Bytes of machine stack compiled code may use per invocation
    /// ([`Vm::set_machine_stack`](crate::Vm::set_machine_stack)).
    pub(super) machine_stack: usize,
    /// How invocations' budgets are sliced, under a time or check limit,
    /// and the state of the last invocation's clock (see `budget`).
    pub(super) clock: Option<Clock>,
    /// [`Vm::set_check_limit`](crate::Vm::set_check_limit) (0: none).
    pub(super) check_limit: u64,
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

/// The roots of a collection besides the frames: the applet's fields
/// (those of array type) and the arrays the host pinned.
struct Roots<'a> {
    fields: &'a [i32],
    array_fields: &'a [usize],
    pinned: &'a [i32],
}

/// Collect garbage during an invocation: the roots in the frames are the
/// slots each frame wrote (see `decode::roots`), of the frames `frames`
/// and `cur` (method, op, first slot) in `stack` up to `top`.
#[cold]
#[inline(never)]
fn collect_frames<H>(
    cls: &ClassInner<H>,
    heap: &mut Heap,
    roots: Roots<'_>,
    stack: &[i32],
    frames: &[RetAddr],
    cur: (usize, usize, usize),
    top: usize,
) {
    let mut slots = Vec::new();
    let masks = |m| cls.masks(m);
    frame_roots(masks, stack, frames, cur, top, &mut |v| slots.push(v));
    collect(heap, roots.fields, roots.array_fields, roots.pinned, &slots);
}

impl State {
    pub(super) fn collect(&mut self, extra: &[i32]) {
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
pub(super) fn entry_fuel<H>(
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

#[inline(never)]
/// Run method `entry` whose arguments are in `st.stack[0..]`. Returns the
/// result (0 for void) and the fuel left.
pub(super) fn run<H>(
    cls: &ClassInner<H>,
    st: &mut State,
    limits: &Limits,
    host: &mut H,
    entry: usize,
    checkpoint: Option<Checkpoint<H>>,
    #[cfg(feature = "jit")] mut jit: Option<&mut crate::jit::Compiled<H>>,
) -> Option<i32> {
    let mut budget = Budget::new(limits, checkpoint, &st.clock);
    let mut fuel = entry_fuel(cls, host, entry, &mut budget, &mut st.clock);
    let max_depth = limits.max_depth.max(1) as usize;
    let mut m = entry;
    let mut mc = &cls.code[m];
    let mut code: &[Op] = &mc.ops;
    let mut pc: usize = 0;
    let mut base: usize = 0;
    #[cfg(feature = "jit")]
    let machine_stack = st.machine_stack;
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
    // Where a compiled method called from here faulted (method, offset).
    #[cfg_attr(not(feature = "jit"), allow(unused_mut))]
    let mut callee_site: Option<(u32, u32)> = None;
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
                            // The collection scans the live frames' slots
                            // and the array table: charged before it runs,
                            // so that it does not run without the fuel.
                            fuel -= heap.gc_cost(array_fields.len() + pinned.len(), top);
                            if fuel < 0 {
                                spent!();
                            }
                            let cur = (m, pc - 1, base);
                            let roots = Roots {
                                fields,
                                array_fields,
                                pinned,
                            };
                            collect_frames(cls, heap, roots, stack, frames, cur, top);
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
                    // A compiled callee runs as machine code, on this
                    // invocation's budget and limits (mixed mode).
                    #[cfg(feature = "jit")]
                    if let Some(j) = jit.as_deref_mut() {
                        if let Some(c) = j.entry(cm as usize) {
                            if top > MAX_STACK_SLOTS {
                                break Err(Fault::StackOverflow);
                            }
                            let io = crate::jit::Io {
                                heap,
                                host,
                                clock,
                                machine_stack,
                            };
                            let depth = frames.len() + 1;
                            // The frames below the callee's hold roots of
                            // a collection the callee makes.
                            let (below, args) = stack.split_at(nb);
                            let interp = crate::jit::Below {
                                stack: below,
                                frames,
                                cur: (m, pc - 1, base),
                            };
                            let r =
                                j.enter_nested(c, &mut fuel, &mut budget, io, depth, interp, args);
                            fr = Regs(&mut stack[base..base + mc.frame_size as usize]);
                            if r == crate::jit::FAULT {
                                let (f, (fm, op)) = j.take_fault();
                                let off = cls
                                    .code
                                    .get(fm as usize)
                                    .and_then(|c| c.offsets.get(op as usize))
                                    .copied()
                                    .unwrap_or(0);
                                callee_site = Some((fm, off));
                                break Err(f.unwrap_or(Fault::Internal(
                                    "compiled code lost a fault".into(),
                                )));
                            }
                            fr.0[at as usize] = r as i32;
                            continue;
                        }
                    }
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
                    // A native sees arrays as they are: bytes lent to one
                    // are copied in (`crate::lend`).
                    heap.settle_lent();
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
        *site = Some(callee_site.unwrap_or((m as u32, off)));
    }
    frames.clear();
    if budget.read_clock() {
        crate::budget::close(clock, fuel + budget.reserve);
    }
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
/// The arguments are in the slot array (`args` None) or in `args`,
/// exactly the method's argument count.
#[cfg(feature = "jit")]
#[allow(clippy::too_many_arguments)]
pub(super) fn run_compiled<H>(
    cls: &ClassInner<H>,
    st: &mut State,
    limits: &Limits,
    host: &mut H,
    m: usize,
    checkpoint: Option<Checkpoint<H>>,
    jit: &mut crate::jit::Compiled<H>,
    code: crate::jit::Code,
    args: Option<&[i32]>,
) -> Option<i32> {
    st.fuel_in_jit = false;
    let mut fuel = jit.plan().first - cls.code[m].ops.len() as i64;
    if fuel < 0 {
        // The first part does not cover the entry (see `entry_fuel`).
        fuel = refill(fuel, jit.draw(), &mut st.clock, host).0;
        if fuel < 0 {
            st.last_fuel = limits
                .fuel
                .saturating_sub((fuel + jit.draw().reserve).max(0) as u64);
            st.site = Some((m as u32, 0));
            st.fault = Some(Fault::OutOfFuel);
            jit.replan(limits, checkpoint, &st.clock);
            return None;
        }
    }
    let State {
        stack,
        heap,
        machine_stack,
        clock,
        ..
    } = st;
    let io = crate::jit::Io {
        heap,
        host,
        clock,
        machine_stack: *machine_stack,
    };
    let r = jit.enter(code, fuel, io, args.unwrap_or(stack));
    let r = settle(cls, st, limits, checkpoint, jit, r, false);
    (r != crate::jit::FAULT).then_some(r as i32)
}

/// After compiled code returned `r` (a result or
/// [`crate::jit::FAULT`]): record the fuel used (`lazy`: unless the
/// invocation stayed within its first part; see `State::fuel_in_jit`)
/// and any fault as the interpreter does, and replan if the invocation
/// drew its budget.
#[cfg(feature = "jit")]
#[inline(always)]
pub(super) fn settle<H>(
    cls: &ClassInner<H>,
    st: &mut State,
    limits: &Limits,
    checkpoint: Option<Checkpoint<H>>,
    jit: &mut crate::jit::Compiled<H>,
    r: i64,
    lazy: bool,
) -> i64 {
    let drawn = jit.drawn();
    st.fuel_in_jit = lazy && !drawn;
    if !st.fuel_in_jit {
        st.last_fuel = limits.fuel.saturating_sub(jit.left().max(0) as u64);
    }
    if drawn {
        jit.close_clock(&mut st.clock);
        replan(st, limits, checkpoint, jit);
    }
    if r == crate::jit::FAULT {
        let (f, site) = jit.take_fault();
        compiled_fault(cls, st, f, site);
    }
    r
}

#[cfg(feature = "jit")]
#[cold]
#[inline(never)]
fn replan<H>(
    st: &State,
    limits: &Limits,
    checkpoint: Option<Checkpoint<H>>,
    jit: &mut crate::jit::Compiled<H>,
) {
    jit.replan(limits, checkpoint, &st.clock);
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
pub(super) fn finish<H>(
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
