//! Peephole passes over a method's decoded ops: loop rotation and the
//! fusion of `iinc` with the loop's back-edge.

use super::op::Op;

/// The conditional branch `op` with its condition inverted and target
/// `cont`, if `op` is a conditional branch to `exit`.
fn invert(op: Op, exit: u32, cont: u32) -> Option<Op> {
    let t = cont;
    Some(match op {
        Op::IfEq { a, b, t: e } if e == exit => Op::IfNe { a, b, t },
        Op::IfNe { a, b, t: e } if e == exit => Op::IfEq { a, b, t },
        Op::IfLt { a, b, t: e } if e == exit => Op::IfGe { a, b, t },
        Op::IfGe { a, b, t: e } if e == exit => Op::IfLt { a, b, t },
        Op::IfGt { a, b, t: e } if e == exit => Op::IfLe { a, b, t },
        Op::IfLe { a, b, t: e } if e == exit => Op::IfGt { a, b, t },
        Op::IfEqI { a, v, t: e } if e == exit => Op::IfNeI { a, v, t },
        Op::IfNeI { a, v, t: e } if e == exit => Op::IfEqI { a, v, t },
        Op::IfLtI { a, v, t: e } if e == exit => Op::IfGeI { a, v, t },
        Op::IfGeI { a, v, t: e } if e == exit => Op::IfLtI { a, v, t },
        Op::IfGtI { a, v, t: e } if e == exit => Op::IfLeI { a, v, t },
        Op::IfLeI { a, v, t: e } if e == exit => Op::IfGtI { a, v, t },
        _ => return None,
    })
}

/// Loop rotation and back-edge fusion, on op indices.
///
/// javac compiles `for (..; c; i++) body` as `L: if !c goto X; body;
/// i++; goto L; X:`. A backward `goto L` whose target is a conditional
/// branch to the op right after the `goto` is replaced by the inverted
/// branch to `L + 1` (the loop test moves to the bottom: one dispatch less
/// per iteration). The branch reads the same slots at both places: at a
/// branch target every stack entry is in its own slot, and the `goto` is
/// preceded by the same materialisation. Then `iinc x; if x <cond> b`
/// becomes one op that skips the (kept) branch when it falls through.
pub(super) fn rotate_and_fuse(ops: &mut [Op]) {
    for i in 0..ops.len() {
        if let Op::Goto { t } = ops[i] {
            let t = t as usize;
            if t < i {
                if let Some(inv) = invert(ops[t], i as u32 + 1, t as u32 + 1) {
                    ops[i] = inv;
                }
            }
        }
    }
    for i in 1..ops.len() {
        let Op::Inc { x, v } = ops[i - 1] else {
            continue;
        };
        let Ok(v) = i16::try_from(v) else {
            continue;
        };
        let fused = match ops[i] {
            Op::IfLt { a, b, t } if a == x && b != x => Op::IncLt { x, v, b, t },
            Op::IfLe { a, b, t } if a == x && b != x => Op::IncLe { x, v, b, t },
            Op::IfNe { a, b, t } if a == x && b != x => Op::IncNe { x, v, b, t },
            Op::IfGt { a, b, t } if a == x && b != x => Op::IncGt { x, v, b, t },
            Op::IfGe { a, b, t } if a == x && b != x => Op::IncGe { x, v, b, t },
            _ => continue,
        };
        if i + 1 < ops.len() {
            ops[i - 1] = fused;
        }
    }
}
