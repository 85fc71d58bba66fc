//! The check of a decoded method that justifies the interpreter's
//! unchecked frame accesses ([`validate`]).

use super::op::{Arg, MethodCode, Op};

/// Check the invariants the interpreter relies on without re-checking:
/// every slot operand is below `frame_size` (the frame slice's length),
/// every branch target (switch tables included) is an op index, and the
/// last op never falls through, so the op index stays in range.
///
/// This is deliberately independent of the verifier's reasoning: it is the
/// one place that justifies the unchecked frame accesses of the interpreter.
pub fn validate(mc: &MethodCode) -> Result<(), String> {
    let n = mc.ops.len() as u32;
    if mc.frame_size == 0 || mc.offsets.len() != mc.ops.len() {
        return Err("internal: malformed decoded method".into());
    }
    match mc.ops.last() {
        Some(op) if op.is_terminator() => {}
        _ => return Err("internal: decoded code may run past its end".into()),
    }
    for (i, op) in mc.ops.iter().enumerate() {
        if op.slots().iter().any(|&s| s >= mc.frame_size) {
            return Err(format!(
                "internal: op {i} {op:?} uses a slot outside the frame"
            ));
        }
        let mut op = *op;
        if let Some(t) = op.target_mut() {
            if *t >= n {
                return Err(format!("internal: op {i} branches outside the code"));
            }
        }
        if matches!(
            op,
            Op::IncLt { .. }
                | Op::IncLe { .. }
                | Op::IncNe { .. }
                | Op::IncGt { .. }
                | Op::IncGe { .. }
        ) && i + 2 >= mc.ops.len()
        {
            return Err(format!("internal: fused op {i} may run past the end"));
        }
        if let Op::CallNative { k, argc, .. } = op {
            let args = mc
                .args
                .get(k as usize..k as usize + argc as usize)
                .ok_or("internal: native call arguments outside the table")?;
            if args
                .iter()
                .any(|a| matches!(a, Arg::S(s) if *s >= mc.frame_size))
            {
                return Err(format!("internal: op {i} passes a slot outside the frame"));
            }
        }
        if let Op::Switch { tab, .. } = op {
            let sw = mc
                .switches
                .get(tab as usize)
                .ok_or("internal: missing switch table")?;
            if sw.default >= n || sw.targets.iter().any(|&t| t >= n) {
                return Err(format!(
                    "internal: switch at op {i} branches outside the code"
                ));
            }
            if sw.dense && sw.keys.is_empty() || sw.keys.len() != sw.targets.len() {
                return Err("internal: malformed switch table".into());
            }
        }
    }
    Ok(())
}
