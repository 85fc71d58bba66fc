//! The collector's roots in a method's frame: which slots hold a value
//! the method itself wrote, at each op where a collection can happen
//! while its frame is live (an allocation, and a call, during which the
//! callee may allocate).
//!
//! A slot counts at an op when every path from the method's entry to the
//! op writes it (arguments are written on entry) and no call since the
//! last write can have overwritten it: a call's frame starts at the
//! caller's slot `at` and its callees' frames above it, so after a call
//! the caller's slots above `at` hold what the callees left, and only
//! `at` (the result) is the caller's again. At a call, only the slots
//! below `at` count (the callee's frame, which holds the rest, counts
//! for itself). These slots hold the same values however the method
//! runs, interpreted or compiled, so a collection that scans them, and
//! nothing else of the frame, frees the same arrays in both; a slot that
//! is not written on some path is never read there (the verifier's
//! initialised-locals rule), so no live array is missed.
//!
//! The analysis is a forward must-analysis over the ops with one bit per
//! slot. It runs when the class loads ([`class_masks`]), for the methods
//! that may allocate ([`allocating`]; no other frame is live during a
//! collection), in method order, bounded in work and memory per method
//! ([`MAX_WORK`]) and per class ([`MAX_CLASS_WORK`]): a method past
//! either has no masks, and the interpreter scans its whole frame (the
//! compiler does not compile it).

use super::{MethodCode, Op};

/// Most work of the analysis of one method, in 64-slot words visited (and
/// most words of its state); a method that needs more has no masks.
pub(crate) const MAX_WORK: usize = 1 << 20;
/// Most work of the analyses of one class, in the same words.
pub(crate) const MAX_CLASS_WORK: usize = 1 << 22;

/// Which methods may allocate an array, directly (`newarray`) or through
/// the methods they call: a collection can happen while their frames are
/// live.
pub(crate) fn allocating(code: &[MethodCode]) -> Vec<bool> {
    let mut alloc: Vec<bool> = code
        .iter()
        .map(|mc| mc.ops.iter().any(|op| matches!(op, Op::NewArray { .. })))
        .collect();
    loop {
        let mut changed = false;
        for (m, mc) in code.iter().enumerate() {
            if !alloc[m]
                && mc.ops.iter().any(|op| match *op {
                    Op::Call { m: c, .. } => alloc.get(c as usize).copied().unwrap_or(false),
                    _ => false,
                })
            {
                alloc[m] = true;
                changed = true;
            }
        }
        if !changed {
            return alloc;
        }
    }
}

/// The masks of every method of a class that may allocate, in method
/// order within [`MAX_CLASS_WORK`] (see the module documentation); native
/// `n` writes its result when `native_returns(n)`.
pub(crate) fn class_masks(
    code: &[MethodCode],
    native_returns: impl Fn(u16) -> bool,
) -> Vec<Option<SlotMasks>> {
    let alloc = allocating(code);
    let mut left = MAX_CLASS_WORK;
    code.iter()
        .zip(alloc)
        .map(|(mc, a)| {
            if !a {
                return None;
            }
            let (masks, spent) = slot_masks(mc, &native_returns, MAX_WORK.min(left));
            left = left.saturating_sub(spent);
            masks
        })
        .collect()
}

/// Where an interpreted frame returns to, and where it lies in the slot
/// stack: method, the op after the call, first slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RetAddr {
    pub m: u32,
    pub pc: u32,
    pub base: u32,
}

/// The slots that are roots at each allocation and call of one method.
#[derive(Debug)]
pub(crate) struct SlotMasks {
    /// Words per mask.
    words: usize,
    /// Per op: the index of its mask in `bits`, or `u32::MAX` for an op
    /// where no collection can happen (or that is never reached).
    at: Vec<u32>,
    bits: Vec<u64>,
}

impl SlotMasks {
    /// The mask of op `i` (bit `s` of word `s / 64` for slot `s`).
    pub fn at(&self, i: usize) -> Option<&[u64]> {
        let k = *self.at.get(i)?;
        if k == u32::MAX {
            return None;
        }
        let k = k as usize * self.words;
        self.bits.get(k..k + self.words)
    }

    /// Whether slot `s` is set in `mask`.
    #[inline]
    pub fn has(mask: &[u64], s: usize) -> bool {
        mask.get(s / 64).is_some_and(|w| w >> (s % 64) & 1 == 1)
    }
}

/// The masks of `mc`, whose native calls write their result only when
/// `native_returns(n)` for native `n`, and the work they took; `None`
/// past `limit` words of work or state.
fn slot_masks(
    mc: &MethodCode,
    native_returns: &impl Fn(u16) -> bool,
    limit: usize,
) -> (Option<SlotMasks>, usize) {
    let n = mc.ops.len();
    let slots = mc.frame_size as usize;
    let words = slots.div_ceil(64).max(1);
    let size = n.saturating_mul(words);
    if size > limit {
        return (None, 0);
    }
    let mut effort = size;
    let masks = analyse(mc, native_returns, limit, words, &mut effort);
    (masks, effort)
}

fn analyse(
    mc: &MethodCode,
    native_returns: &impl Fn(u16) -> bool,
    limit: usize,
    words: usize,
    effort: &mut usize,
) -> Option<SlotMasks> {
    let n = mc.ops.len();
    let slots = mc.frame_size as usize;
    // In-state per op; all ones until a path reaches it.
    let mut state = vec![!0u64; n * words];
    let mut reached = vec![false; n];
    let mut queued = vec![false; n];
    let mut work: Vec<usize> = Vec::new();
    if n == 0 {
        return Some(SlotMasks {
            words,
            at: Vec::new(),
            bits: Vec::new(),
        });
    }
    let set = |w: &mut [u64], s: usize| {
        if let Some(x) = w.get_mut(s / 64) {
            *x |= 1 << (s % 64);
        }
    };
    let first = &mut state[..words];
    first.fill(0);
    for s in 0..(mc.nargs as usize).min(slots) {
        set(first, s);
    }
    reached[0] = true;
    work.push(0);
    queued[0] = true;
    let mut out = vec![0u64; words];
    let mut succ: Vec<u32> = Vec::new();
    while let Some(i) = work.pop() {
        queued[i] = false;
        *effort += words;
        if *effort > limit {
            return None;
        }
        out.copy_from_slice(&state[i * words..(i + 1) * words]);
        let op = mc.ops[i];
        // What the op writes.
        match op {
            Op::Inc { x, .. }
            | Op::IncLt { x, .. }
            | Op::IncLe { x, .. }
            | Op::IncNe { x, .. }
            | Op::IncGt { x, .. }
            | Op::IncGe { x, .. } => set(&mut out, x as usize),
            Op::Call { at, .. } => {
                let at = at as usize;
                for s in at + 1..slots {
                    if let Some(x) = out.get_mut(s / 64) {
                        *x &= !(1 << (s % 64));
                    }
                }
                set(&mut out, at);
            }
            Op::CallNative { n, d, .. } => {
                if native_returns(n) {
                    set(&mut out, d as usize);
                }
            }
            _ => {
                let mut o = op;
                if let Some(&mut d) = o.dest_mut() {
                    set(&mut out, d as usize);
                }
            }
        }
        // Where control goes next, as the interpreter moves.
        succ.clear();
        match op {
            Op::Goto { t } => succ.push(t),
            Op::Switch { tab, .. } => {
                let st = mc.switches.get(tab as usize)?;
                succ.push(st.default);
                succ.extend_from_slice(&st.targets);
            }
            Op::Ret { .. }
            | Op::RetK { .. }
            | Op::RetB { .. }
            | Op::RetS { .. }
            | Op::RetZ { .. }
            | Op::RetVoid => {}
            Op::IncLt { t, .. }
            | Op::IncLe { t, .. }
            | Op::IncNe { t, .. }
            | Op::IncGt { t, .. }
            | Op::IncGe { t, .. } => {
                succ.push(t);
                succ.push(i as u32 + 2);
            }
            _ => {
                let mut o = op;
                if let Some(&mut t) = o.target_mut() {
                    succ.push(t);
                }
                succ.push(i as u32 + 1);
            }
        }
        for &t in &succ {
            let t = t as usize;
            if t >= n {
                continue;
            }
            let into = &mut state[t * words..(t + 1) * words];
            let mut changed = !reached[t];
            for (a, &b) in into.iter_mut().zip(&out) {
                let v = *a & b;
                changed |= v != *a;
                *a = v;
            }
            reached[t] = true;
            if changed && !queued[t] {
                queued[t] = true;
                work.push(t);
            }
        }
    }
    // The masks of the reached allocations and calls.
    let mut at = vec![u32::MAX; n];
    let mut bits = Vec::new();
    let mut k = 0u32;
    for i in 0..n {
        let limit = match mc.ops[i] {
            Op::NewArray { .. } => slots,
            Op::Call { at, .. } => (at as usize).min(slots),
            _ => continue,
        };
        if !reached[i] {
            continue;
        }
        at[i] = k;
        k += 1;
        let w = &state[i * words..(i + 1) * words];
        for (j, &x) in w.iter().enumerate() {
            let lo = j * 64;
            let keep = if lo >= limit {
                0
            } else if limit - lo >= 64 {
                !0
            } else {
                (1u64 << (limit - lo)) - 1
            };
            bits.push(x & keep);
        }
    }
    Some(SlotMasks { words, at, bits })
}

/// Call `root` with every root slot value, in `stack`, of the
/// interpreter's frames `frames` (each suspended at the call before its
/// `pc`, its frame ending where the next begins) and of the frame `cur`
/// (method, op, first slot) at op `cur.1`, ending at `top`; `masks(m)`
/// gives method `m`'s masks (a method without them has its whole frame
/// scanned).
pub(crate) fn frame_roots<'a>(
    masks: impl Fn(usize) -> Option<&'a SlotMasks>,
    stack: &[i32],
    frames: &[RetAddr],
    cur: (usize, usize, usize),
    top: usize,
    root: &mut impl FnMut(i32),
) {
    let mut scan = |m: usize, op: usize, base: usize, end: usize| {
        let region = stack.get(base..end.min(stack.len())).unwrap_or(&[]);
        match masks(m).map(|k| k.at(op)) {
            Some(Some(mask)) => {
                for (s, &v) in region.iter().enumerate() {
                    if SlotMasks::has(mask, s) {
                        root(v);
                    }
                }
            }
            // A reached allocation or call always has a mask: an op
            // without one is never where a frame is.
            Some(None) => {}
            None => region.iter().for_each(|&v| root(v)),
        }
    };
    for (k, r) in frames.iter().enumerate() {
        let next = frames.get(k + 1).map_or(cur.2, |n| n.base as usize);
        let op = (r.pc as usize).wrapping_sub(1);
        scan(r.m as usize, op, r.base as usize, next);
    }
    scan(cur.0, cur.1, cur.2, top);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Elem;

    /// A slot written on one path only is no root after the merge, the
    /// arguments are from the start, and a call leaves the caller only
    /// its slots up to the result.
    #[test]
    fn roots_are_the_slots_written_on_every_path() {
        let e = Elem::Int;
        let ops = vec![
            Op::Const { d: 1, v: 5 },
            Op::IfEqI { a: 0, v: 0, t: 3 },
            Op::Const { d: 2, v: 7 },
            Op::NewArray { d: 3, n: 1, e },
            Op::Call { m: 0, at: 2 },
            Op::NewArray { d: 4, n: 1, e },
            Op::RetVoid,
        ];
        let mc = MethodCode {
            offsets: (0..ops.len() as u32).collect(),
            ops,
            args: Vec::new(),
            switches: Vec::new(),
            divs: Vec::new(),
            frame_size: 70,
            nargs: 1,
            name: "t".into(),
            is_static: true,
            int_params: true,
            returns: false,
            internal: false,
        };
        let masks = class_masks(std::slice::from_ref(&mc), |_| false);
        let k = masks[0].as_ref().expect("masks");
        let slots = |i: usize| -> Vec<usize> {
            let m = k.at(i).expect("a mask");
            (0..70).filter(|&s| SlotMasks::has(m, s)).collect()
        };
        assert_eq!(slots(3), [0, 1]);
        assert_eq!(slots(4), [0, 1]);
        assert_eq!(slots(5), [0, 1, 2]);
        assert!(k.at(0).is_none() && k.at(6).is_none());
        // A method that cannot allocate has none.
        let mut plain = mc;
        plain.ops = vec![Op::RetVoid];
        assert!(class_masks(&[plain], |_| false)[0].is_none());
    }
}
