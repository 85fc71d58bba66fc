//! An extension: one JIVE class loaded onto the adapter by a client, its
//! VM (compiled by default, on a thread of its own, as applets are), its
//! handlers, its time budget per invocation and its statistics per
//! handler (invocations, time, terminations by reason).
//!
//! Loading has two halves. [`verify`] loads and verifies the class with
//! SPINE's rules (handlers ephemeral, linked only against the granted
//! domains); its work grows with the class, so the set-up half runs it
//! on a thread. [`Ext::instantiate`] then runs the initialiser
//! (`static void init(int)`) on the engine's thread, the one place
//! `addHandler` may be called, and checks the handlers it asked for.
//!
//! An extension may export methods to others (`link.rs`): it is linked
//! against the exports of the domains it was granted, and if it exports
//! any itself its VM moves into the runtime's table of exports, where
//! its own handlers and the importers' calls both reach it.

use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Duration;

use jive::{Class, Fault, Limits, LoadRules, MethodId, Vm};
use unet_abi::FaultKind;

use crate::clients::ClientId;
use crate::spine::clock;
use crate::spine::link::{self, Linkable};
use crate::spine::natives::DOMAIN;
use crate::spine::rt::{HandlerEntry, Rt, Wanted};

/// Default time budget of one handler invocation.
pub(crate) const DEFAULT_BUDGET: Duration = Duration::from_micros(10);
/// The longest budget a client may ask for.
pub(crate) const MAX_BUDGET: Duration = Duration::from_millis(10);
/// The initialiser's time budget.
const INIT_BUDGET: Duration = Duration::from_millis(100);
/// Bytes of scratch (static arrays made by the initialiser) an extension
/// may hold.
pub(crate) const SCRATCH_MAX: usize = 1 << 20;

/// Why an invocation was terminated, counted per handler.
pub(crate) const TERM_KINDS: usize = FaultKind::ALL.len();

/// A class verified as an extension, not yet initialised.
pub(crate) struct Verified {
    class: Class<Rt>,
    init: MethodId,
}

/// Load and verify `bytes` as an extension linked against `spine` and
/// the `granted` domains of `to` (the domains the adapter has: naming
/// another is an error). The error is the message the client sees.
pub(crate) fn verify(bytes: &[u8], granted: &[String], to: &Linkable) -> Result<Verified, String> {
    let known = |d: &str| d == DOMAIN || to.domains.iter().any(|(x, _)| x == d);
    if let Some(d) = granted.iter().find(|d| !known(d)) {
        return Err(format!("no domain {d:?} on this adapter"));
    }
    let rules = LoadRules {
        handlers_ephemeral: true,
    };
    let mut domains = vec![DOMAIN];
    domains.extend(granted.iter().map(String::as_str));
    let class =
        Class::load_with(bytes, &to.natives, &domains, &rules).map_err(|r| r.to_string())?;
    let init = class
        .method("init")
        .filter(|&m| class.method_is_static(m) && class.method_descriptor(m) == "(I)V")
        .ok_or("the extension has no static void init(int) method")?;
    Ok(Verified { class, init })
}

/// Statistics of one handler.
#[derive(Clone, Debug, Default)]
pub(crate) struct HandlerStats {
    pub number: u16,
    pub method: String,
    pub invocations: u64,
    /// Of those, the ones timed (`Rt::timed`: one in
    /// `EngineConfig::spine_time_every` at random).
    pub timed: u64,
    /// Time in the timed invocations, and the longest, in ticks of the
    /// runtime's clock (`clock::ns` converts). An invocation's time starts
    /// at its call, or where the invocation before it ended when both
    /// were timed and ran back to back (`Rt::last_end`: the loop's few
    /// nanoseconds between them are counted with the second).
    pub total_ticks: u64,
    pub max_ticks: u64,
    /// Terminations by [`FaultKind`].
    pub terms: [u64; TERM_KINDS],
}

/// An extension on the adapter.
pub(crate) struct Ext {
    pub id: u32,
    pub owner: ClientId,
    pub name: String,
    pub budget: Duration,
    /// Its VM; `None` when it exports, and its VM is in the runtime's
    /// table of exports.
    vm: Option<Vm<Rt>>,
    /// Its slot in the runtime's tables.
    slot: u32,
    /// The exporters it is linked to (ids).
    pub imports: Vec<u32>,
    /// By handler index (what [`HandlerEntry::index`] names).
    pub handlers: Vec<HandlerStats>,
    /// Buffers given back because invocations that kept them were
    /// terminated.
    pub keeps_undone: u64,
    /// The last termination, for the owner: handler number and reason.
    pub last_fault: Option<(u16, String)>,
    compiling: Option<Receiver<Result<jive::Compiled<Rt>, String>>>,
}

fn limits(budget: Duration) -> Limits {
    Limits {
        max_time: Some(budget),
        heap_quota: SCRATCH_MAX,
        ..Limits::default()
    }
}

impl Ext {
    /// Run the initialiser of `v` with `arg` (the runtime records the
    /// handlers it asks for) and build the extension in runtime slot
    /// `slot`: the handler entries to install, or why the installation
    /// is refused (nothing installed, nothing kept).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn instantiate(
        v: Verified,
        rt: &mut Rt,
        slot: u32,
        id: u32,
        owner: ClientId,
        name: String,
        budget: Duration,
        arg: i32,
        compile: bool,
    ) -> Result<(Ext, Vec<(u16, HandlerEntry)>), String> {
        let Verified { class, init } = v;
        rt.installing = Some(Vec::new());
        rt.install_error = None;
        rt.cur.slot = slot;
        rt.cur.ext_id = id;
        rt.exports.set_budget(slot as usize, INIT_BUDGET);
        rt.exports.started = clock::ticks();
        let mut vm = match Vm::new(class, limits(INIT_BUDGET), rt) {
            Ok(vm) => vm,
            Err(f) => {
                rt.installing = None;
                return Err(format!("the class initialiser faulted: {f}"));
            }
        };
        let r = vm.invoke(rt, init, &[arg]);
        let wanted = rt.installing.take().unwrap_or_default();
        rt.cur.slot = u32::MAX;
        if let Err(f) = r {
            return Err(format!("init faulted: {f}"));
        }
        if let Some(why) = rt.install_error.take() {
            return Err(why);
        }
        let exported = link::exportable(vm.class());
        if wanted.is_empty() && exported.is_empty() {
            return Err("init installed no handler".into());
        }
        vm.set_limits(limits(budget));
        let mut entries = Vec::with_capacity(wanted.len());
        let mut handlers = Vec::with_capacity(wanted.len());
        for (
            i,
            Wanted {
                method,
                number,
                context,
            },
        ) in wanted.into_iter().enumerate()
        {
            let m = vm
                .class()
                .method_at(method)
                .ok_or_else(|| format!("handler {number}: no method {method}"))?;
            let prepared = vm
                .prepare::<2>(m)
                .map_err(|f| format!("handler {number}: {f}"))?;
            entries.push((
                number,
                HandlerEntry {
                    slot,
                    index: i as u16,
                    method: prepared,
                    context,
                },
            ));
            handlers.push(HandlerStats {
                number,
                method: vm.class().method_name(m).to_string(),
                ..HandlerStats::default()
            });
        }
        let mut compiling = compile.then(|| compile_in_background(vm.class())).flatten();
        rt.exports.set_budget(slot as usize, budget);
        let vm = if exported.is_empty() {
            Some(vm)
        } else {
            let code = compiling.take();
            link::install_exporter(rt, slot as usize, id, &name, vm, code, &exported)?;
            None
        };
        Ok((
            Ext {
                id,
                owner,
                name,
                budget,
                vm,
                slot,
                imports: Vec::new(),
                handlers,
                keeps_undone: 0,
                last_fault: None,
                compiling,
            },
            entries,
        ))
    }

    /// Run handler `e` on message `msg` (the runtime's current invocation
    /// is set up around it). True if it returned; false if it was
    /// terminated (counted on the handler; what it kept this invocation
    /// is given back).
    #[inline(always)]
    pub(crate) fn invoke(&mut self, rt: &mut Rt, e: HandlerEntry, msg: u32) -> bool {
        if self.compiling.is_some() {
            self.poll_compiled();
        }
        rt.begin(e.slot, self.id, msg);
        // Timed (see `Rt::timed`), and always when the handler may call
        // exports: their time is bounded by what is left of its budget.
        let timed = rt.timed() || !self.imports.is_empty();
        let t0 = if timed {
            let t0 = rt.last_end.take().unwrap_or_else(clock::ticks);
            rt.exports.started = t0;
            t0
        } else {
            0
        };
        let args = [e.context, msg as i32];
        let r = match self.vm.as_mut() {
            Some(vm) => vm.invoke_prepared(rt, e.method, args),
            None => link::invoke_own(rt, e.slot as usize, e.method, args),
        };
        rt.last_end = None;
        let ok = r.is_ok();
        self.keeps_undone += rt.end(ok) as u64;
        let Some(s) = self.handlers.get_mut(e.index as usize) else {
            return ok;
        };
        s.invocations += 1;
        if timed {
            let t1 = clock::ticks();
            rt.last_end = Some(t1);
            let took = t1.wrapping_sub(t0);
            s.timed += 1;
            s.total_ticks += took;
            s.max_ticks = s.max_ticks.max(took);
        }
        if let Err(f) = r {
            s.terms[unet_sle::fault_kind(&f) as usize] += 1;
            self.last_fault = Some((s.number, describe(&f)));
        }
        ok
    }

    /// The extension's VM, for tests that drive it (a check limit, its
    /// scratch region, compiling it at once).
    #[cfg(test)]
    pub(crate) fn vm_mut(&mut self) -> &mut Vm<Rt> {
        self.vm
            .as_mut()
            .expect("the tests drive extensions that export nothing")
    }

    /// Its VM, when it exports nothing (an exporter's is in the runtime's
    /// table of exports): where its route tables are installed.
    pub(crate) fn own_vm(&mut self) -> Option<&mut Vm<Rt>> {
        self.vm.as_mut()
    }

    /// Method `method` of the class as the handler a timer runs, in
    /// extension slot `slot` with `context`: its statistics are those of
    /// the installed handler of the same method, if there is one (else
    /// the timers' own counters keep them). None if it cannot be run.
    /// An exporter's VM lives in the runtime's table of exports (`rt`).
    pub(crate) fn timer_entry(
        &self,
        rt: &Rt,
        slot: u32,
        method: u32,
        context: i32,
    ) -> Option<HandlerEntry> {
        let vm = match &self.vm {
            Some(vm) => vm,
            None => rt.exports.at(slot as usize)?.vm.as_deref()?,
        };
        let m = vm.class().method_at(method)?;
        let prepared = vm.prepare::<2>(m).ok()?;
        let name = vm.class().method_name(m);
        let index = self
            .handlers
            .iter()
            .position(|h| h.method == name)
            .map_or(u16::MAX, |i| i as u16);
        Some(HandlerEntry {
            slot,
            index,
            method: prepared,
            context,
        })
    }

    /// Whether the extension's handlers run as machine code.
    pub(crate) fn is_compiled(&self, rt: &Rt) -> bool {
        let Some(vm) = &self.vm else {
            return link::is_compiled(rt, self.slot as usize);
        };
        self.compiling.is_none() && vm.class().handlers().iter().all(|&m| vm.is_compiled(m))
    }

    #[cold]
    fn poll_compiled(&mut self) {
        let Some(rx) = &self.compiling else {
            return;
        };
        match rx.try_recv() {
            Err(TryRecvError::Empty) => {}
            Ok(Ok(code)) => {
                if let Some(vm) = self.vm.as_mut() {
                    let _ = vm.install(code);
                }
                self.compiling = None;
            }
            // The compiler refused the class, or its thread is gone: the
            // extension stays interpreted, which behaves the same.
            Ok(Err(_)) | Err(_) => self.compiling = None,
        }
    }
}

/// A termination's reason as the owner reads it.
fn describe(f: &Fault) -> String {
    match f {
        Fault::Timeout => "terminated: its time budget ran out".into(),
        f => format!("faulted: {f}"),
    }
}

/// Compile `class` on a thread of its own; `None` if no thread could be
/// started (the extension then stays interpreted).
fn compile_in_background(
    class: &Class<Rt>,
) -> Option<Receiver<Result<jive::Compiled<Rt>, String>>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let class = class.clone();
    std::thread::Builder::new()
        .name("jive-compile".into())
        .spawn(move || {
            let _ = tx.send(class.compile());
        })
        .ok()?;
    Some(rx)
}
