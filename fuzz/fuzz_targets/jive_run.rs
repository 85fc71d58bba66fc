//! Arbitrary bytes as a JIVE class; when one loads, run its initialisers and
//! every method whose parameters are all ints, under a small budget. Any
//! outcome is a result or a fault, never a panic or a hang.
//!
//! The same invocations run again on a compiled VM of the class, on a
//! thread with a 128 KiB stack and a canary region mapped directly below
//! it (no guard page): the canary must be intact afterwards (compiled code
//! wrote nothing outside its stack), and each outcome must be the
//! interpreter's (result or fault, fuel used, fault site), or a stack
//! overflow of the compiled code's machine-stack budget.
#![no_main]

use jive::{test_natives, Class, Fault, Limits, Vm};
use libfuzzer_sys::fuzz_target;

mod int_params;
use int_params::int_params;

/// JIVE's test helpers (the class assembler, the hostile-class generators
/// and the small-stack thread of `tests/common/attack_jit.rs`).
#[allow(dead_code)]
#[path = "../../crates/jive/tests/common/mod.rs"]
mod common;

type Outcome = (Result<Option<i32>, Fault>, u64, Option<jive::FaultSite>);

/// Run every int-parameter method of `data` (loaded as `class`) with a
/// few argument patterns, compiled or not; the outcomes in order.
fn run_all(data: &[u8], class: &Class<()>, compile: bool) -> Vec<Outcome> {
    let limits = Limits {
        fuel: 100_000,
        max_depth: 64,
        heap_quota: 64 * 1024,
        max_time: None,
    };
    let mut host = ();
    let mut out = Vec::new();
    let Ok(mut vm) = Vm::new(class.clone(), limits, &mut host) else {
        return out;
    };
    if compile && vm.compile().is_err() {
        panic!("a loaded class did not compile");
    }
    // Method names from the class file itself (the loaded class is looked up
    // by name; constructors and initialisers are not callable).
    let Ok(file) = jive::classfile::ClassFile::parse(data) else {
        return out;
    };
    for info in &file.methods {
        let Some(m) = class.method(&info.name) else {
            continue;
        };
        let Some(n) = int_params(class.method_descriptor(m)) else {
            continue;
        };
        // A few argument patterns: zeros, small, extremes.
        for seed in [0i32, 1, -1, i32::MIN, i32::MAX] {
            let args: Vec<i32> = (0..n).map(|i| seed.wrapping_add(i as i32)).collect();
            let r = vm.invoke(&mut host, m, &args);
            out.push((r, vm.last_fuel_used(), vm.last_fault_site()));
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let natives = test_natives::<()>();
    let Ok(class) = Class::load(data, &natives, &["test"]) else {
        return;
    };
    let interp = run_all(data, &class, false);
    let (jit, intact) = common::attack_jit::on_stack(128 * 1024, || {
        let class = Class::load(data, &natives, &["test"]).expect("loads again");
        run_all(data, &class, true)
    });
    assert!(intact, "compiled code wrote below its thread's stack");
    let jit = jit.expect("no panic on the compiled side");
    assert_eq!(interp.len(), jit.len());
    for (a, b) in interp.iter().zip(&jit) {
        if b.0 == Err(Fault::StackOverflow) && a.0 != b.0 {
            // Compiled code stopped where the interpreter went on: the
            // fields may differ from here.
            break;
        }
        assert_eq!(a, b);
    }
});
