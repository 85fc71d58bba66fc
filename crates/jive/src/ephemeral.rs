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

use crate::bytecode::Ins;
use crate::model::{Callee, Model};
use crate::verify::Verified;

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

/// What the rule reads of a loaded class, kept with it so that a host can
/// ask about any method later ([`Class::ephemeral_check`](crate::Class::ephemeral_check)).
pub(crate) struct Reach {
    /// Sites of each method (see [`sites`]).
    pub sites: Vec<Vec<(u32, Site)>>,
    /// Each method's name.
    pub methods: Vec<String>,
    /// The registry's natives as (class, name, ephemeral), by index.
    pub natives: Vec<(String, String, bool)>,
}

impl Reach {
    /// The reach of a class: its model and the sites of its methods.
    pub(crate) fn new(model: &Model<'_>, sites: Vec<Vec<(u32, Site)>>) -> Reach {
        Reach {
            sites,
            methods: model.methods.iter().map(|m| m.name.clone()).collect(),
            natives: model
                .natives
                .iter()
                .map(|e| (e.1.clone(), e.2.clone(), e.4))
                .collect(),
        }
    }
}

/// Check every method in `roots` (each a `what`: `handler`, `export`)
/// against the sites of all methods; the first violation, as the
/// rejection's reason, e.g. `handler onPing: calls
/// unet/spine/Spine.addHandler (not ephemeral) at offset 12 of helper`.
pub(crate) fn check(r: &Reach, roots: &[u16], what: &str) -> Result<(), String> {
    let n = r.methods.len();
    for &h in roots {
        let Some(hname) = r.methods.get(h as usize) else {
            continue;
        };
        let mut seen = vec![false; n];
        seen[h as usize] = true;
        // Depth first, in code order: (method, next site).
        let mut stack: Vec<(u16, usize)> = vec![(h, 0)];
        while let Some(top) = stack.last_mut() {
            let (m, k) = *top;
            let Some(&(off, site)) = r.sites.get(m as usize).and_then(|s| s.get(k)) else {
                stack.pop();
                continue;
            };
            top.1 += 1;
            let mname = &r.methods[m as usize];
            match site {
                Site::Call(c) => {
                    if !seen[c as usize] {
                        seen[c as usize] = true;
                        stack.push((c, 0));
                    }
                }
                Site::Native(i) => {
                    let (class, name, ephemeral) = &r.natives[i];
                    if !ephemeral {
                        return Err(format!(
                            "{what} {hname}: calls {class}.{name} (not ephemeral) at offset {off} of {mname}"
                        ));
                    }
                }
                Site::Alloc(op) => {
                    return Err(format!(
                        "{what} {hname}: allocates ({op}) at offset {off} of {mname}"
                    ));
                }
            }
        }
    }
    Ok(())
}
