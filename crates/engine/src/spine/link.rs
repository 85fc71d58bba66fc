//! Linking extensions to one another through their domains: which
//! methods an extension exports ([`exportable`]), what a class being
//! verified may link to ([`linkable`]), installing an exporter
//! ([`install_exporter`]), and the call itself ([`call`]), which runs the
//! exporter's method in the exporter's VM (its statics, its scratch) on
//! behalf of the calling invocation. The table is `exports.rs`.
//!
//! A call from an importer is a native of the importer's class: a JIVE
//! native is a plain function pointer (the call passes no data but the
//! arguments), so each export slot has a function of its own, one of
//! [`EXPORTS_MAX`] instances of [`slot_fn`], which knows its slot.
//!
//! What holds for a call:
//! - it runs under the identity of the exporter: its sends come from the
//!   exporter, it holds only the buffers the exporter keeps and no
//!   message (handles, like arrays, do not cross), and `addHandler` is
//!   refused (the caller's initialiser's installation is hidden);
//! - it runs within the calling invocation's budget: the exporter's VM
//!   gets, at the invocation's first call into it, the fuel the caller
//!   has left and what is left of the caller's time (from the
//!   invocation's start and budget; the clock is read there only), and
//!   each call's fuel is charged to the caller, whose own watchdog thus
//!   sees the calls' time: a runaway callee is stopped within the
//!   caller's budget, and a caller that calls many times within it;
//! - a fault of the callee (its time running out included) terminates the
//!   caller's invocation with the same fault and is counted on the
//!   export too; what the exporter kept during the faulted call goes
//!   back;
//! - a call of an export whose exporter went faults (counted).

use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Duration;

use jive::{
    Class, Compiled, Fault, Limits, MethodId, NativeCtx, NativeFn, NativeResult, Natives, Vm,
};

use crate::spine::clock;
use crate::spine::exports::{Export, Exporter, EXPORTS_MAX, EXPORTS_PER_EXT};
use crate::spine::natives::DOMAIN;
use crate::spine::rt::{Current, Rt, NO_MSG};

/// What a load links to: the natives of every domain the adapter has
/// (the `spine` domain's and the exports), and the exporter of each
/// domain (domain, extension id) at this moment.
pub(crate) struct Linkable {
    pub natives: Natives<Rt>,
    pub domains: Vec<(String, u32)>,
}

/// The snapshot a load verifies against (`spine` natives first).
pub(crate) fn linkable(rt: &Rt) -> Linkable {
    let mut natives = crate::spine::natives::natives();
    let mut domains = Vec::new();
    let ex = &rt.exports;
    for x in ex.by_slot.iter().flatten() {
        domains.push((x.domain.clone(), x.id));
        for &k in &x.exports {
            let Some(Some(e)) = ex.table.get(k) else {
                continue;
            };
            natives.register_export(
                &x.domain,
                &x.class,
                &e.name,
                &e.descriptor,
                slot_fn(k),
                e.ephemeral,
            );
        }
    }
    Linkable { natives, domains }
}

impl Linkable {
    /// The exporters of the `granted` domains (domain, extension id): what
    /// a load granted them links to.
    pub(crate) fn links(&self, granted: &[String]) -> Vec<(String, u32)> {
        self.domains
            .iter()
            .filter(|(d, _)| granted.contains(d))
            .cloned()
            .collect()
    }
}

/// Check that the exporters a load was verified against (`links`, the
/// granted domains' (domain, id)) are still there; the refusal.
pub(crate) fn still_linked(rt: &Rt, links: &[(String, u32)]) -> Result<(), String> {
    for (d, id) in links {
        if rt.exports.exporter_of(d).map(|x| x.id) != Some(*id) {
            return Err(format!(
                "domain \"{d}\" was unloaded while the extension was verified"
            ));
        }
    }
    Ok(())
}

/// The methods `class` exports: its public static methods with int
/// parameters and an int or void result, but `init` and its handlers,
/// in declaration order.
pub(crate) fn exportable(class: &Class<Rt>) -> Vec<MethodId> {
    let handlers = class.handlers();
    class
        .methods()
        .filter(|&m| {
            let d = class.method_descriptor(m);
            let int_only = d
                .strip_prefix('(')
                .and_then(|d| d.split_once(')'))
                .is_some_and(|(p, r)| p.bytes().all(|b| b == b'I') && (r == "I" || r == "V"));
            class.method_is_public(m)
                && class.method_is_static(m)
                && int_only
                && class.method_name(m) != "init"
                && !handlers.contains(&m)
        })
        .collect()
}

/// Make the extension `id` in slot `slot` (loaded under `domain`) the
/// exporter of `methods`, its VM (and the code being compiled for it)
/// moving into the table; or why not (nothing changed).
pub(crate) fn install_exporter(
    rt: &mut Rt,
    slot: usize,
    id: u32,
    domain: &str,
    vm: Vm<Rt>,
    compiling: Option<Receiver<Result<Compiled<Rt>, String>>>,
    methods: &[MethodId],
) -> Result<(), String> {
    let class = vm.class().clone();
    let cname = class.name().to_string();
    let ex = &rt.exports;
    let why = if domain.is_empty() {
        Some("an extension that exports methods needs a name (its domain)".to_string())
    } else if domain == DOMAIN {
        Some(format!("domain \"{DOMAIN}\" is the runtime's"))
    } else if let Some(x) = ex.exporter_of(domain) {
        Some(format!(
            "domain \"{domain}\" is exported by extension {}",
            x.id
        ))
    } else if let Some(x) = ex.by_slot.iter().flatten().find(|x| x.class == cname) {
        Some(format!(
            "class {cname} is exported by domain \"{}\" already",
            x.domain
        ))
    } else if methods.len() > EXPORTS_PER_EXT {
        Some(format!(
            "{} exported methods (at most {EXPORTS_PER_EXT})",
            methods.len()
        ))
    } else if methods.len() > ex.free_slots() {
        Some(format!(
            "{} exported methods, and the adapter has room for {} more (at most {EXPORTS_MAX})",
            methods.len(),
            ex.free_slots()
        ))
    } else {
        None
    };
    if let Some(why) = why {
        return Err(why);
    }
    let own = vm.limits();
    let mut slots = Vec::with_capacity(methods.len());
    for &m in methods {
        let e = Export {
            slot: slot as u32,
            method: m,
            name: class.method_name(m).to_string(),
            descriptor: class.method_descriptor(m).to_string(),
            ephemeral: class.ephemeral_check(m).is_ok(),
            dead: false,
            calls: 0,
            terms: Default::default(),
            last_fault: None,
        };
        // There is room: counted above.
        if let Some(k) = rt.exports.add_export(e) {
            slots.push(k);
        }
    }
    rt.exports.set_exporter(
        slot,
        Exporter {
            id,
            domain: domain.to_string(),
            class: cname,
            vm: Some(Box::new(vm)),
            own,
            limits_for: None,
            compiling,
            exports: slots,
            importers: Vec::new(),
        },
    );
    Ok(())
}

/// Link importer `id` to the exporters of `links` (domain, exporter
/// id); their ids, for its unload.
pub(crate) fn add_importer(rt: &mut Rt, id: u32, links: &[(String, u32)]) -> Vec<u32> {
    let mut ids = Vec::new();
    for (_, xid) in links {
        if let Some(x) = rt
            .exports
            .by_slot
            .iter_mut()
            .flatten()
            .find(|x| x.id == *xid)
        {
            x.importers.push(id);
            ids.push(*xid);
        }
    }
    ids
}

/// Why unloading the exporter in `slot` is refused: the importers
/// linked to it.
pub(crate) fn unload_refusal(rt: &Rt, slot: usize) -> Option<String> {
    let x = rt.exports.at(slot)?;
    if x.importers.is_empty() {
        return None;
    }
    let ids: Vec<String> = x.importers.iter().map(u32::to_string).collect();
    Some(format!(
        "extension {} exports domain \"{}\" to extension{} {}: unload {} first",
        x.id,
        x.domain,
        if ids.len() == 1 { "" } else { "s" },
        ids.join(", "),
        if ids.len() == 1 { "it" } else { "them" }
    ))
}

/// Install the exporter's machine code if it is ready.
#[cold]
fn poll_compiled(x: &mut Exporter<Rt>) {
    let Some(rx) = &x.compiling else {
        return;
    };
    match rx.try_recv() {
        Err(TryRecvError::Empty) => {}
        Ok(Ok(code)) => {
            if let Some(vm) = x.vm.as_deref_mut() {
                let _ = vm.install(code);
            }
            x.compiling = None;
        }
        // Refused, or the compiler's thread is gone: it stays
        // interpreted, which behaves the same.
        Ok(Err(_)) | Err(_) => x.compiling = None,
    }
}

/// Whether the exporter in `slot` runs as machine code its handlers and
/// the exports handlers may call (those that allocate stay interpreted,
/// as methods that allocate do).
pub(crate) fn is_compiled(rt: &Rt, slot: usize) -> bool {
    let Some(x) = rt.exports.at(slot) else {
        return false;
    };
    let Some(vm) = x.vm.as_deref() else {
        return false;
    };
    let exported = x
        .exports
        .iter()
        .filter_map(|&k| rt.exports.table.get(k)?.as_ref());
    x.compiling.is_none()
        && vm.class().handlers().iter().all(|&m| vm.is_compiled(m))
        && exported
            .filter(|e| e.ephemeral)
            .all(|e| vm.is_compiled(e.method))
}

/// Run a handler of the exporter in `slot` (its VM is in the table):
/// under its own limits.
pub(crate) fn invoke_own(
    rt: &mut Rt,
    slot: usize,
    p: jive::Prepared<2>,
    args: [i32; 2],
) -> Result<Option<i32>, Fault> {
    let Some(x) = rt.exports.at_mut(slot) else {
        return Err(Fault::Internal("the exporter's VM is gone".into()));
    };
    if x.compiling.is_some() {
        poll_compiled(x);
    }
    let own = x.own;
    let Some(mut vm) = x.vm.take() else {
        return Err(Fault::Internal("the exporter's VM is in use".into()));
    };
    if x.limits_for.take().is_some() {
        vm.set_limits(own);
    }
    let r = vm.invoke_prepared(rt, p, args);
    if let Some(x) = rt.exports.at_mut(slot) {
        x.vm = Some(vm);
    }
    r
}

fn native_fault(what: String) -> Box<Fault> {
    Box::new(Fault::Native(what))
}

/// Call export `k` with `args` on behalf of the running invocation (see
/// the module documentation).
fn call(rt: &mut Rt, cx: &mut NativeCtx<'_>, k: usize, args: &[i32]) -> NativeResult {
    let ex = &mut rt.exports;
    let Some(e) = ex.table.get(k).and_then(Option::as_ref) else {
        return Err(native_fault(format!("no export in slot {k}")));
    };
    if e.dead {
        let why = format!("{} was unloaded", e.name);
        ex.dead_calls += 1;
        return Err(native_fault(why));
    }
    let (slot, m) = (e.slot as usize, e.method);
    if ex.depth == 0 {
        ex.top = rt.cur.slot;
    }
    let started = ex.started;
    let budget = ex.budgets.get(ex.top as usize).copied();
    let Some(x) = ex.at_mut(slot) else {
        return Err(native_fault("the exporter is gone".into()));
    };
    if x.compiling.is_some() {
        poll_compiled(x);
    }
    let (xid, own, fresh) = (x.id, x.own, x.limits_for != Some(started));
    let Some(mut vm) = x.vm.take() else {
        return Err(native_fault(
            "the exporter is running (a call back into it)".into(),
        ));
    };
    if fresh {
        let ran = Duration::from_nanos(clock::ns(clock::ticks().wrapping_sub(started)));
        let left = budget.unwrap_or_default().saturating_sub(ran);
        if left.is_zero() {
            // The caller's time was up before the call (it may have been
            // preempted since it started): the call ends as a timeout,
            // counted on the export as on the caller.
            x.vm = Some(vm);
            let f = Fault::Timeout;
            if let Some(Some(e)) = rt.exports.table.get_mut(k) {
                e.calls += 1;
                e.terms[unet_sle::fault_kind(&f) as usize] += 1;
                e.last_fault = Some(format!(
                    "called by extension {} with no time left: {f}",
                    rt.cur.ext_id
                ));
            }
            return Err(Box::new(f));
        }
        vm.set_limits(Limits {
            fuel: cx.fuel_left(),
            max_time: Some(left),
            ..own
        });
        x.limits_for = Some(started);
    }
    ex.depth += 1;
    let caller = rt.cur;
    let installing = rt.installing.take();
    rt.cur = Current {
        slot: slot as u32,
        ext_id: xid,
        msg: NO_MSG,
        inv: caller.inv,
    };
    let r = vm.invoke(rt, m, args);
    if r.is_err() {
        if let Some(keeps) = rt.keeps.get_mut(slot) {
            keeps.undo(&mut rt.bufs, caller.inv);
        }
    }
    rt.cur = caller;
    rt.installing = installing;
    let used = vm.last_fuel_used();
    let ex = &mut rt.exports;
    ex.depth -= 1;
    if let Some(x) = ex.at_mut(slot) {
        x.vm = Some(vm);
    }
    if let Some(Some(e)) = ex.table.get_mut(k) {
        e.calls += 1;
        if let Err(f) = &r {
            e.terms[unet_sle::fault_kind(f) as usize] += 1;
            e.last_fault = Some(format!("called by extension {}: {f}", caller.ext_id));
        }
    }
    let v = r.map_err(Box::new)?;
    cx.charge(used)?;
    Ok(v.unwrap_or(0))
}

/// The native function of export slot `HI * 16 + LO`.
fn slot_call<const HI: usize, const LO: usize>(
    rt: &mut Rt,
    cx: &mut NativeCtx<'_>,
    a: &[i32],
) -> NativeResult {
    call(rt, cx, HI * 16 + LO, a)
}

/// The sixteen native functions of export slots `HI * 16 ..`.
const fn row<const HI: usize>() -> [NativeFn<Rt>; 16] {
    [
        slot_call::<HI, 0>,
        slot_call::<HI, 1>,
        slot_call::<HI, 2>,
        slot_call::<HI, 3>,
        slot_call::<HI, 4>,
        slot_call::<HI, 5>,
        slot_call::<HI, 6>,
        slot_call::<HI, 7>,
        slot_call::<HI, 8>,
        slot_call::<HI, 9>,
        slot_call::<HI, 10>,
        slot_call::<HI, 11>,
        slot_call::<HI, 12>,
        slot_call::<HI, 13>,
        slot_call::<HI, 14>,
        slot_call::<HI, 15>,
    ]
}

/// The native functions of all export slots.
const SLOT_FNS: [[NativeFn<Rt>; 16]; EXPORTS_MAX / 16] = [
    row::<0>(),
    row::<1>(),
    row::<2>(),
    row::<3>(),
    row::<4>(),
    row::<5>(),
    row::<6>(),
    row::<7>(),
    row::<8>(),
    row::<9>(),
    row::<10>(),
    row::<11>(),
    row::<12>(),
    row::<13>(),
    row::<14>(),
    row::<15>(),
];

/// The native function of export slot `k` (below [`EXPORTS_MAX`]).
pub(crate) fn slot_fn(k: usize) -> NativeFn<Rt> {
    SLOT_FNS[k / 16][k % 16]
}
