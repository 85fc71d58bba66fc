//! The [`Vm`] a host drives: creating an applet, invoking and preparing
//! its methods, compiling them, limits and checkpoints, the host's window,
//! and access to fields and arrays.

use super::run::{finish, run, State};
#[cfg(feature = "jit")]
use super::run::{run_compiled, settle};
use crate::budget::{Checkpoint, Clock, Pace};
use crate::fault::Fault;
use crate::heap::{ArrayData, ArrayRef, Heap, THIS};
use crate::limits::Limits;
use crate::model::{Elem, JType};
use crate::subset::{Class, FieldId, MethodId};

/// Machine stack compiled code may use per invocation by default, in
/// bytes (1 MiB: a recursion to the default depth limit, 4096 frames, of
/// methods whose machine frames are at most 256 bytes; see
/// [`Vm::set_machine_stack`]).
pub const DEFAULT_MACHINE_STACK: usize = 1024 * 1024;

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

/// [`Vm::enter_static`] when the first part of the budget does not cover
/// the entry's charge.
#[cfg(feature = "jit")]
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn entry_uncovered<H>(
    cls: &crate::subset::ClassInner<H>,
    st: &mut State,
    limits: &Limits,
    host: &mut H,
    m: usize,
    checkpoint: Option<Checkpoint<H>>,
    j: &mut crate::jit::Compiled<H>,
    code: crate::jit::Code,
    args: &[i32],
) -> Result<i32, Fault> {
    let out = run_compiled(cls, st, limits, host, m, checkpoint, j, code, Some(args));
    finish(cls, st, m, out)
}

/// The arguments of an invocation of compiled code: `N` values to pass
/// in registers, or the method's argument slots where they are.
#[cfg(feature = "jit")]
enum Args<'a, const N: usize> {
    Regs([i32; N]),
    Slots(&'a [i32]),
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
            fuel_in_jit: false,
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
        st.fuel_in_jit = false;
        #[cfg(feature = "jit")]
        let out = match jit.as_mut() {
            Some(j) => match j.entry(m) {
                Some(entry) => run_compiled(cls, st, limits, host, m, *checkpoint, j, entry, None),
                None => {
                    let out = run(cls, st, limits, host, m, *checkpoint, Some(&mut *j));
                    // The invocation may have changed the pace.
                    j.replan(limits, *checkpoint, &st.clock);
                    out
                }
            },
            None => run(cls, st, limits, host, m, *checkpoint, None),
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
    #[inline(always)]
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
            if let Some(r) = self.enter_static(host, m, p.entry_ops, Args::Regs(args)) {
                return r.map(|r| p.returns.then_some(r));
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

    /// Run the compiled static method `m`, whose entry charges
    /// `entry_ops`, with `args`, or `None` if it is not compiled. The
    /// common case, entering within the first part of the budget, is kept
    /// short: the context persists between invocations, the arguments go
    /// in registers (or are read where they are), and the budget is drawn
    /// only if the invocation needs more than its first part.
    #[cfg(feature = "jit")]
    #[inline(always)]
    fn enter_static<const N: usize>(
        &mut self,
        host: &mut H,
        m: usize,
        entry_ops: u32,
        args: Args<'_, N>,
    ) -> Option<Result<i32, Fault>> {
        let Vm {
            class,
            limits,
            checkpoint,
            st,
            jit,
        } = self;
        let j = jit.as_mut()?;
        let code = j.entry(m)?;
        let cls = &*class.inner;
        st.site = None;
        let fuel = j.plan().first - entry_ops as i64;
        if fuel < 0 {
            let args = match &args {
                Args::Regs(a) => &a[..],
                Args::Slots(a) => a,
            };
            return Some(entry_uncovered(
                cls,
                st,
                limits,
                host,
                m,
                *checkpoint,
                j,
                code,
                args,
            ));
        }
        let io = crate::jit::Io {
            heap: &mut st.heap,
            host,
            clock: &mut st.clock,
            machine_stack: st.machine_stack,
        };
        let r = match args {
            Args::Regs(a) => j.enter_direct(code, fuel, io, a),
            Args::Slots(a) => j.enter(code, fuel, io, a),
        };
        if r != crate::jit::FAULT && !j.drawn() && st.heap.allocs_since_gc == 0 {
            // What `settle` and `finish` do in this case: the fuel left
            // stays in the context until asked for.
            st.fuel_in_jit = true;
            return Some(Ok(r as i32));
        }
        Some(entered_slow(cls, st, limits, *checkpoint, j, m, r))
    }

    /// Compile the class's methods to machine code (feature `jit`):
    /// later invocations of a compiled method run its code instead of the
    /// interpreter, with the same results, fuel, faults and fault sites
    /// (except a [`Fault::StackOverflow`] of the machine-stack budget,
    /// [`Vm::set_machine_stack`]). Methods over the compiler's size bounds (more than 16 Ki ops, 4096 frame
    /// slots, or 256 Ki ops times slots; past 64 Ki ops or 1 Mi ops times
    /// slots per class; a machine frame over 16 KiB), and their callers,
    /// stay interpreted (see the `jit` module). Returns how many methods were
    /// compiled; an error (the machine is not supported, or the compiler
    /// rejected a method) leaves the VM interpreting everything.
    #[cfg(feature = "jit")]
    pub fn compile(&mut self) -> Result<usize, String> {
        self.settle_fuel();
        self.jit = None;
        let c = self.class.compile()?;
        self.install(c)
    }

    /// Install code compiled from this VM's class
    /// ([`Class::compile`], possibly on another thread): later invocations
    /// of its compiled methods run it. Returns how many methods it
    /// compiled; code of another class is refused and changes nothing.
    #[cfg(feature = "jit")]
    pub fn install(&mut self, mut code: crate::jit::Compiled<H>) -> Result<usize, String> {
        if !std::sync::Arc::ptr_eq(&code.class, &self.class.inner) {
            return Err("the code was compiled from another class".into());
        }
        let n = code.count();
        code.bind(self.st.fields.as_mut_ptr(), self.st.window);
        code.bind_pinned(&self.st.pinned);
        code.bind_lent(self.st.heap.lent);
        // The last invocation's fuel may still be in the old code's context.
        self.settle_fuel();
        self.jit = Some(code);
        self.replan();
        Ok(n)
    }

    /// Go back to interpreting every method (drops compiled code).
    #[cfg(feature = "jit")]
    pub fn uncompile(&mut self) {
        self.settle_fuel();
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
        self.settle_fuel();
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
        self.replan();
    }

    /// Tell compiled code the budget its invocations start with, after a
    /// change of limits, checkpoint or pace.
    fn replan(&mut self) {
        self.settle_fuel();
        #[cfg(feature = "jit")]
        if let Some(j) = &mut self.jit {
            j.replan(&self.limits, self.checkpoint, &self.st.clock);
        }
    }

    /// Call `hook` in every invocation that uses more than `fuel` units of
    /// its budget, once, at the moment it does. A host that wants to time
    /// only long invocations reads its clock there instead of at the start
    /// of every invocation; the check costs nothing, as the budget is simply
    /// split in two at that point.
    pub fn set_checkpoint(&mut self, fuel: u64, hook: fn(&mut H)) {
        self.checkpoint = Some(Checkpoint { fuel, hook });
        self.replan();
    }

    /// Remove the checkpoint.
    pub fn clear_checkpoint(&mut self) {
        self.checkpoint = None;
        self.replan();
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
        #[cfg(feature = "jit")]
        if mc.is_static {
            let ops = mc.ops.len() as u32;
            if let Some(r) = self.enter_static::<0>(host, mi, ops, Args::Slots(args)) {
                return r.map(|r| returns.then_some(r));
            }
        }
        let mc = &self.class.inner.code[mi];
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
        self.bind_window();
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
        self.bind_window();
    }

    /// Lend the `byte[]` in field `f` the `len` bytes at `src` in place of
    /// copying them into its first `len` bytes, until [`Vm::end_lend`]:
    /// for a host that would copy a message into the array and then run
    /// the method that reads it. The method sees the same bytes, with the
    /// same results, fuel and faults, as if they had been copied; compiled
    /// code's fast cases of natives read them where they are, and anything
    /// else first copies them in (the `lend` module). What the array holds
    /// after the loan ends is unspecified (the bytes may or may not have
    /// been copied in).
    ///
    /// False, and nothing lent, unless the class's code lets `f` be lent
    /// ([`Class::lendable`], for the method the host then runs) and `f`
    /// holds a `byte[]` of at least `len` bytes.
    ///
    /// # Safety
    /// Until [`Vm::end_lend`], `src..src + len` must be valid for reads
    /// and must not overlap memory the VM owns (its heap). The VM copies
    /// the bytes and never interprets them, so other parties may write
    /// them meanwhile.
    #[allow(unsafe_code)]
    #[inline]
    pub unsafe fn lend_bytes(&mut self, f: FieldId, src: *const u8, len: usize) -> bool {
        if !self.class.inner.uses.may_lend(f.0) {
            return false;
        }
        let Some(h) = self.byte_field(f) else {
            return false;
        };
        if self.st.heap.get(h).is_none_or(|a| a.len() < len) {
            return false;
        }
        let l = crate::heap::Lent {
            handle: h,
            src: src as usize,
            len,
        };
        self.st.heap.lent = Some(l);
        #[cfg(feature = "jit")]
        if let Some(j) = &mut self.jit {
            j.bind_lent(Some(l));
        }
        true
    }

    /// End the loan of [`Vm::lend_bytes`], if any.
    #[inline]
    pub fn end_lend(&mut self) {
        self.st.heap.lent = None;
        // Always: the interpreter settles a loan (ending it in the heap)
        // without reaching compiled code's context, which must not keep
        // the host's address past the loan.
        #[cfg(feature = "jit")]
        if let Some(j) = &mut self.jit {
            j.bind_lent(None);
        }
    }

    /// Tell compiled code the window (see [`Vm::set_window`]).
    #[inline]
    fn bind_window(&mut self) {
        #[cfg(feature = "jit")]
        if let Some(j) = &mut self.jit {
            j.bind(self.st.fields.as_mut_ptr(), self.st.window);
        }
    }

    /// Tell compiled code the arrays the host pinned (roots of the
    /// collections it makes).
    fn bind_pinned(&mut self) {
        #[cfg(feature = "jit")]
        if let Some(j) = &mut self.jit {
            j.bind_pinned(&self.st.pinned);
        }
    }

    /// The pace the VM has learned for its time limit, in picoseconds a
    /// unit of fuel, as its readings of the clock measured it (see
    /// [`Limits::max_time`]); `None` without a time limit (or under a
    /// check limit). An invocation that finishes within the first part of
    /// its budget (a quarter of the limit at this pace) never reads the
    /// clock.
    pub fn pace_ps(&self) -> Option<u64> {
        self.st.clock.as_ref().and_then(|c| c.pace.timed())
    }

    /// Fuel used by the last invocation (or by construction).
    pub fn last_fuel_used(&self) -> u64 {
        #[cfg(feature = "jit")]
        if let (true, Some(j)) = (self.st.fuel_in_jit, &self.jit) {
            return self.limits.fuel.saturating_sub(j.left().max(0) as u64);
        }
        self.st.last_fuel
    }

    /// Move the fuel the last invocation used into the state, where it
    /// was left in the compiled code's context (see `State::fuel_in_jit`),
    /// before the context's plan or the limits change.
    fn settle_fuel(&mut self) {
        #[cfg(feature = "jit")]
        if self.st.fuel_in_jit {
            self.st.last_fuel = self.last_fuel_used();
            self.st.fuel_in_jit = false;
        }
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

    /// Take `elems` (made on any thread: [`crate::heap::Elems::from_words`])
    /// as a new `int[]` of the applet's heap without copying it, charged
    /// to its quota as [`Vm::new_array`] is.
    pub fn adopt_ints(&mut self, elems: crate::heap::Elems<i32>) -> Result<ArrayRef, Fault> {
        let h = self.st.heap.adopt_ints(elems)?;
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
                self.bind_pinned();
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
            self.bind_pinned();
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

/// The rest of [`Vm::enter_static`] after an invocation that faulted,
/// drew its budget or allocated: the fault recorded, the budget settled
/// and garbage collected, as [`Vm::invoke`] does.
#[cfg(feature = "jit")]
#[cold]
#[inline(never)]
fn entered_slow<H>(
    cls: &crate::subset::ClassInner<H>,
    st: &mut State,
    limits: &Limits,
    checkpoint: Option<Checkpoint<H>>,
    j: &mut crate::jit::Compiled<H>,
    m: usize,
    r: i64,
) -> Result<i32, Fault> {
    if r == crate::jit::FAULT {
        j.faulted();
    }
    let r = settle(cls, st, limits, checkpoint, j, r, true);
    let out = (r != crate::jit::FAULT).then_some(r as i32);
    finish(cls, st, m, out)
}
