//! What is compiled: the bounds on a method and a class, and the
//! methods left to the interpreter (too large, or allocating without
//! known roots) with their callers; and
//! which compiled methods may allocate (their frames are the collector's
//! roots).

use super::*;

// -------------------------------------------------------------------------
// Compilation
// -------------------------------------------------------------------------

/// Longest method compiled, in decoded ops; longer ones are interpreted.
pub(crate) const MAX_METHOD_OPS: usize = 16 * 1024;
/// Largest frame of a method compiled, in slots (`max_locals` plus
/// `max_stack` and a few scratch slots); larger ones are interpreted.
pub(crate) const MAX_METHOD_SLOTS: usize = 4096;
/// Most decoded ops compiled per class: methods past this, in order, are
/// interpreted.
pub(crate) const MAX_CLASS_OPS: usize = 64 * 1024;
/// Largest method compiled by its ops times its frame slots: the register
/// allocator's work grows with the values live across each call (helper
/// calls on slow paths included), so a method of many slots must be short.
pub(crate) const MAX_METHOD_COST: usize = 256 * 1024;
/// Most of that cost compiled per class (methods past it, in order, are
/// interpreted).
pub(crate) const MAX_CLASS_COST: usize = 1024 * 1024;

/// The compile cost of `mc` (see [`MAX_METHOD_COST`]).
fn cost(mc: &MethodCode) -> usize {
    mc.ops.len().saturating_mul(mc.frame_size as usize)
}
/// Largest machine frame of a compiled method, in bytes; a method whose
/// code needs more is interpreted.
pub(crate) const MAX_FRAME_BYTES: u32 = 16 * 1024;

/// Which methods can be compiled (see the module documentation), given
/// those already refused (`refused`, for a frame too large).
pub(super) fn compilable<H>(cls: &ClassInner<H>, refused: &[bool]) -> Vec<bool> {
    let n = cls.code.len();
    let calls = |m: usize| {
        cls.code[m].ops.iter().filter_map(|op| match *op {
            Op::Call { m, .. } if (m as usize) < n => Some(m as usize),
            _ => None,
        })
    };
    let alloc = allocating(&cls.code);
    let mut ok: Vec<bool> = cls
        .code
        .iter()
        .enumerate()
        .map(|(m, mc)| {
            !refused.get(m).copied().unwrap_or(false)
                // A method that may allocate writes its roots where a
                // collection can happen: it needs to know them.
                && (!alloc[m] || cls.masks(m).is_some())
                && mc.ops.len() <= MAX_METHOD_OPS
                && (mc.frame_size as usize) <= MAX_METHOD_SLOTS
                && cost(mc) <= MAX_METHOD_COST
                && mc.ops.iter().all(|op| match *op {
                    Op::Call { m, .. } => (m as usize) < n,
                    _ => true,
                })
        })
        .collect();
    // The class's budget, in method order.
    let (mut total, mut total_cost) = (0, 0);
    for (m, ok_m) in ok.iter_mut().enumerate() {
        if *ok_m {
            total += cls.code[m].ops.len();
            total_cost += cost(&cls.code[m]);
            *ok_m = total <= MAX_CLASS_OPS && total_cost <= MAX_CLASS_COST;
        }
    }
    // Recursion is compiled: the call-depth limit and the interpreter's
    // slot-stack limit are checked at every compiled call, as the
    // interpreter checks them, and the machine stack on every entry.
    propagate(cls, &mut ok, calls);
    ok
}

/// Callers of methods that cannot be compiled cannot be either.
fn propagate<H, I: Iterator<Item = usize>>(
    cls: &ClassInner<H>,
    ok: &mut [bool],
    calls: impl Fn(usize) -> I,
) {
    loop {
        let mut changed = false;
        for m in 0..cls.code.len() {
            if ok[m] && calls(m).any(|c| !ok[c]) {
                ok[m] = false;
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}
