//! The state compiled code shares with its host: the context it reads
//! and writes by fixed offsets ([`Ctx`]), the invocation's environment
//! the helpers reach through it ([`Env`]), and the fault protocol.

use super::*;

/// What a compiled method or a failing helper returns after recording a
/// fault (any value outside the `i32` range would do).
pub(crate) const FAULT: i64 = i64::MIN;

/// The state compiled code reads and writes directly. `#[repr(C)]`: the
/// generated code addresses its fields by the offsets below.
#[repr(C)]
pub(crate) struct Ctx {
    /// Fuel left in the current part of the budget (the interpreter's
    /// `fuel` register).
    pub(super) fuel: i64,
    /// The applet's fields (`State::fields`, never resized).
    pub(super) fields: *mut i32,
    /// Frames suspended below the running one (the interpreter's
    /// `frames.len()`).
    pub(super) depth: i64,
    /// `Limits::max_depth`, at least 1.
    pub(super) max_depth: i64,
    /// The invocation's [`Env`], for helpers.
    pub(super) env: *mut u8,
    /// The heap's table of arrays ([`Heap::raw`]) and its length; set
    /// again after every native call (a native may allocate, which may
    /// move the table).
    pub(super) arrays: *const RawArr,
    pub(super) narrays: u64,
    /// The host's window ([`crate::Vm::set_window`]): address (0 for none)
    /// and length.
    pub(super) window: u64,
    pub(super) window_len: u64,
    /// The lowest stack address a compiled frame may reach (see
    /// `stack_limit`): each compiled method compares its stack pointer,
    /// after its prologue, with this on entry.
    pub(super) stack_limit: u64,
    /// Set (to the method's site) by a compiled method that found its
    /// frame below `stack_limit`: it returns [`FAULT`] at once, calling
    /// nothing, and [`Compiled::faulted`] records the stack overflow.
    pub(super) overflow: i64,
    /// The running frame's first slot in the interpreter's terms (its
    /// `base`): a call's frame starts at `base` plus the call's `at`, and
    /// the invocation faults where the interpreter's frames would pass
    /// [`MAX_STACK_SLOTS`].
    pub(super) base: i64,
    /// The slot stack compiled frames write their roots to where a
    /// collection can happen (`Env::spill`), its length in slots, and
    /// beside it, per slot, the site (method and op) of the frame that
    /// starts there (`Env::sites`); set again whenever they grow
    /// (`h_reserve`).
    pub(super) spill: *mut i32,
    pub(super) spill_len: i64,
    pub(super) sites: *mut u32,
    /// What the helper called through a stub that keeps every register
    /// returned ([`super::Stubs`]).
    pub(super) status: i64,
    /// The array the host lent bytes to ([`crate::Vm::lend_bytes`];
    /// [`NO_LOAN`] for none), their address and length: the fast cases of
    /// natives read them in the array's place (`Gen::byte_range`).
    /// Cleared when the loan ends, and by any native call (which settles
    /// it, `Heap::settle_lent`).
    pub(super) lent: i64,
    pub(super) lent_ptr: u64,
    pub(super) lent_len: u64,
    /// The host's state (`Env::host`, set on each entry), for the helpers
    /// of the natives' fast cases: one load from the context, not two
    /// through the environment, in front of each (the host's next loads
    /// wait on it).
    pub(super) host: *mut u8,
}

pub(super) const CTX_FUEL: i32 = 0;
pub(super) const CTX_FIELDS: i32 = 8;
pub(super) const CTX_DEPTH: i32 = 16;
pub(super) const CTX_MAX_DEPTH: i32 = 24;
pub(super) const CTX_ARRAYS: i32 = 40;
pub(super) const CTX_NARRAYS: i32 = 48;
pub(super) const CTX_WINDOW: i32 = 56;
pub(super) const CTX_WINDOW_LEN: i32 = 64;
pub(super) const CTX_STACK_LIMIT: i32 = 72;
pub(super) const CTX_OVERFLOW: i32 = 80;
pub(super) const CTX_BASE: i32 = 88;
pub(super) const CTX_SPILL: i32 = 96;
pub(super) const CTX_SPILL_LEN: i32 = 104;
pub(super) const CTX_SITES: i32 = 112;
pub(super) const CTX_STATUS: i32 = 120;
pub(super) const CTX_LENT: i32 = 128;
/// `Ctx::lent` with no loan: no handle, sign-extended, equals it (not
/// even null).
pub(super) const NO_LOAN: i64 = i64::MIN;
pub(super) const CTX_LENT_PTR: i32 = 136;
pub(super) const CTX_LENT_LEN: i32 = 144;
// The offsets above are those of the `#[repr(C)]` layouts.
const _: () = assert!(
    std::mem::offset_of!(Ctx, fuel) == CTX_FUEL as usize
        && std::mem::offset_of!(Ctx, fields) == CTX_FIELDS as usize
        && std::mem::offset_of!(Ctx, depth) == CTX_DEPTH as usize
        && std::mem::offset_of!(Ctx, max_depth) == CTX_MAX_DEPTH as usize
        && std::mem::offset_of!(Ctx, arrays) == CTX_ARRAYS as usize
        && std::mem::offset_of!(Ctx, narrays) == CTX_NARRAYS as usize
        && std::mem::offset_of!(Ctx, window) == CTX_WINDOW as usize
        && std::mem::offset_of!(Ctx, window_len) == CTX_WINDOW_LEN as usize
        && std::mem::offset_of!(Ctx, stack_limit) == CTX_STACK_LIMIT as usize
        && std::mem::offset_of!(Ctx, overflow) == CTX_OVERFLOW as usize
        && std::mem::offset_of!(Ctx, base) == CTX_BASE as usize
        && std::mem::offset_of!(Ctx, spill) == CTX_SPILL as usize
        && std::mem::offset_of!(Ctx, spill_len) == CTX_SPILL_LEN as usize
        && std::mem::offset_of!(Ctx, sites) == CTX_SITES as usize
        && std::mem::offset_of!(Ctx, status) == CTX_STATUS as usize
        && std::mem::offset_of!(Ctx, lent) == CTX_LENT as usize
        && std::mem::offset_of!(Ctx, lent_ptr) == CTX_LENT_PTR as usize
        && std::mem::offset_of!(Ctx, lent_len) == CTX_LENT_LEN as usize
        && std::mem::offset_of!(RawArr, addr) == 0
        && std::mem::offset_of!(RawArr, len) == 8
        && std::mem::offset_of!(RawArr, kind) == 12
        && std::mem::size_of::<RawArr>() == 16
);

/// The interpreter-side state of compiled invocations, reached by helpers
/// through [`Ctx::env`]. It lives beside the [`Ctx`] for as long as the
/// compiled code ([`Link`]): the pointers to the VM's state are set on
/// each entry, and the budget beyond the register is taken from `plan`
/// only when a helper needs it (see [`Env::budget`]), so an invocation
/// that finishes within its first part builds nothing.
pub(crate) struct Env<H> {
    pub cls: *const ClassInner<H>,
    /// The VM's heap, host state and clock, for the invocation running
    /// (set by [`Compiled::enter`]).
    pub heap: *mut Heap,
    pub host: *mut H,
    pub clock: *mut Option<Clock>,
    /// The budget of an invocation as it starts (`Budget::new` of the
    /// VM's limits, checkpoint and pace), kept up to date by the VM.
    pub plan: Budget<H>,
    /// The running invocation's budget beyond `Ctx::fuel`, valid when
    /// `drawn`: taken from `plan` by the first helper that needs more fuel
    /// (see `budget::refill`).
    pub(super) budget: Budget<H>,
    pub drawn: bool,
    pub fault: Option<Fault>,
    /// Method and op index of the fault.
    pub site: (u32, u32),
    /// The roots of the compiled frames of the running invocation, laid
    /// out as the interpreter lays out its frames (a frame at `Ctx::base`),
    /// written by a method that may allocate before each allocation and
    /// each call that may allocate (`Gen::spill`), with the site of each
    /// frame in `sites` at the frame's first slot (method and op index
    /// in 16 bits each, `Gen::spill`): the collector reads them from the
    /// first compiled frame's up (see `h_newarray`).
    pub spill: Vec<i32>,
    pub sites: Vec<u32>,
    /// When an interpreted method called the compiled code
    /// ([`Compiled::enter_nested`]): the interpreter's frames below the
    /// first compiled one (see [`Below`]), whose slots are roots too.
    pub below: *const i32,
    pub below_len: usize,
    pub frames: *const RetAddr,
    pub nframes: usize,
    pub cur: Option<(usize, usize, usize)>,
    /// The arrays the host pinned (`State::pinned`), roots of every
    /// collection; set when the code is installed and whenever they change.
    pub pinned: *const i32,
    pub pinned_len: usize,
}

impl<H> Env<H> {
    /// The running invocation's budget beyond the register, taken from
    /// the plan on first use.
    #[inline]
    pub fn budget(&mut self) -> &mut Budget<H> {
        if !self.drawn {
            self.budget = self.plan;
            self.drawn = true;
        }
        &mut self.budget
    }

    /// Fuel the running invocation has beyond the register.
    #[inline(always)]
    pub fn reserve(&self) -> i64 {
        if self.drawn {
            self.budget.reserve
        } else {
            self.plan.reserve
        }
    }
}

/// The context compiled code runs on and the environment behind it, kept
/// together, at a fixed address, for as long as the code: entering
/// compiled code sets a few words here instead of building them.
#[repr(C)]
pub(crate) struct Link<H> {
    pub ctx: Ctx,
    pub env: Env<H>,
}

impl<H> Link<H> {
    /// The context and environment for the compiled code of `cls`; the
    /// VM's state is pointed at on each entry.
    pub(super) fn new(cls: &ClassInner<H>) -> Box<Link<H>> {
        let plan = Budget::new(&crate::limits::Limits::default(), None, &None);
        let mut l = Box::new(Link {
            ctx: Ctx {
                fuel: 0,
                fields: std::ptr::null_mut(),
                depth: 0,
                max_depth: 1,
                env: std::ptr::null_mut(),
                arrays: std::ptr::null(),
                narrays: 0,
                window: 0,
                window_len: 0,
                stack_limit: u64::MAX,
                overflow: 0,
                base: 0,
                spill: std::ptr::null_mut(),
                spill_len: 0,
                sites: std::ptr::null_mut(),
                status: 0,
                lent: NO_LOAN,
                lent_ptr: 0,
                lent_len: 0,
                host: std::ptr::null_mut(),
            },
            env: Env {
                cls,
                heap: std::ptr::null_mut(),
                host: std::ptr::null_mut(),
                clock: std::ptr::null_mut(),
                plan,
                budget: plan,
                drawn: false,
                fault: None,
                site: (0, 0),
                spill: Vec::new(),
                sites: Vec::new(),
                below: std::ptr::null(),
                below_len: 0,
                frames: std::ptr::null(),
                nframes: 0,
                cur: None,
                pinned: std::ptr::null(),
                pinned_len: 0,
            },
        });
        l.ctx.env = &mut l.env as *mut Env<H> as *mut u8;
        l
    }
}
