//! SPINE's `EPHEMERAL` rule, checked at load ([`LoadRules`](crate::LoadRules)):
//! the methods a class names by method-name literals are its *handlers*,
//! and a handler and everything it can call through the class's own
//! methods must not allocate and may call only ephemeral natives.
//!
//! Each verified method is reduced to its [`Site`]s (calls and
//! allocations, reachable code only, in code order); [`check`] walks them
//! depth first from every handler and names the first site that breaks the
//! rule: the handler, the callee or the allocating instruction, the
//! bytecode offset and the method it is in.

use crate::model::{Callee, Model};
use crate::verify::{Ins, Verified};

/// What a method does that the rule looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Site {
    /// A call of the class's own method (its index).
    Call(u16),
    /// A call of a native (index into the model's natives).
    Native(usize),
    /// An allocating instruction (its mnemonic).
    Alloc(&'static str),
}

/// The sites of a verified method, as (bytecode offset, site), and the
/// methods it names by method-name literals.
pub(crate) fn sites(v: &Verified) -> (Vec<(u32, Site)>, Vec<u16>) {
    let mut sites = Vec::new();
    let mut names = Vec::new();
    for i in v.insns.iter().filter(|i| i.reachable) {
        match i.ins {
            Ins::Invoke(_, Callee::Own(m)) => sites.push((i.offset, Site::Call(m))),
            Ins::Invoke(_, Callee::Native(n)) => sites.push((i.offset, Site::Native(n))),
            Ins::NewArray(_) => sites.push((i.offset, Site::Alloc("newarray"))),
            Ins::MethodName(m) => names.push(m),
            _ => {}
        }
    }
    (sites, names)
}

/// Check every handler in `handlers` against the sites of all methods
/// (`sites[m]` for method `m`); the first violation, as the rejection's
/// reason.
pub(crate) fn check(
    model: &Model<'_>,
    sites: &[Vec<(u32, Site)>],
    handlers: &[u16],
) -> Result<(), String> {
    let n = model.methods.len();
    for &h in handlers {
        let hname = &model.methods[h as usize].name;
        let mut seen = vec![false; n];
        seen[h as usize] = true;
        // Depth first, in code order: (method, next site).
        let mut stack: Vec<(u16, usize)> = vec![(h, 0)];
        while let Some(top) = stack.last_mut() {
            let (m, k) = *top;
            let Some(&(off, site)) = sites.get(m as usize).and_then(|s| s.get(k)) else {
                stack.pop();
                continue;
            };
            top.1 += 1;
            let mname = &model.methods[m as usize].name;
            match site {
                Site::Call(c) => {
                    if !seen[c as usize] {
                        seen[c as usize] = true;
                        stack.push((c, 0));
                    }
                }
                Site::Native(i) => {
                    let e = &model.natives[i];
                    if !e.4 {
                        return Err(format!(
                            "handler {hname}: calls {}.{} (not ephemeral) at offset {off} of {mname}",
                            e.1, e.2
                        ));
                    }
                }
                Site::Alloc(what) => {
                    return Err(format!(
                        "handler {hname}: allocates ({what}) at offset {off} of {mname}"
                    ));
                }
            }
        }
    }
    Ok(())
}
