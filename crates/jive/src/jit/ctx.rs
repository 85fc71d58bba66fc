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
    /// nothing, and [`Compiled::run`] records the stack overflow.
    pub(super) overflow: i64,
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
        && std::mem::offset_of!(RawArr, addr) == 0
        && std::mem::offset_of!(RawArr, len) == 8
        && std::mem::offset_of!(RawArr, kind) == 12
        && std::mem::size_of::<RawArr>() == 16
);

/// The interpreter-side state of one compiled invocation, reached by
/// helpers through [`Ctx::env`].
pub(crate) struct Env<'a, H> {
    pub cls: &'a ClassInner<H>,
    pub heap: &'a mut Heap,
    pub host: &'a mut H,
    /// The budget beyond `Ctx::fuel`: reserve, checkpoint and time limit
    /// (see `budget::refill`).
    pub budget: &'a mut Budget<H>,
    /// The VM's clock, read by `budget::refill` under a time limit.
    pub clock: &'a mut Option<Clock>,
    pub fault: Option<Fault>,
    /// Method and op index of the fault.
    pub site: (u32, u32),
    /// The host's window (address, length), see `Ctx::window`.
    pub window: (usize, u64),
}
