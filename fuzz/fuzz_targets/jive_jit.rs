//! Arbitrary bytes as a JIVE class; when one loads and constructs, run
//! every int-argument method on an interpreted and on a compiled VM of the
//! class and require the same result or fault, fuel used and fault site
//! (JIVE's compiler against its interpreter, as `crates/jive/tests/jit.rs`
//! does on chosen classes).
//!
//! Besides the `test` natives, the classes may call natives that compiled
//! code performs itself in their common case: `wget`/`wput` (window copies,
//! `jive::Intrinsic`) over a window each VM's host lends, and `emit` (a
//! sink, `Natives::register_sink`). The windows and what was emitted must
//! agree too. Seeds calling them: `fuzz/seeds/` (see CONTRIBUTING.md).
#![no_main]

use jive::{test_natives, Class, Limits, Natives, Vm};
use libfuzzer_sys::fuzz_target;

mod int_params;
use int_params::int_params;

/// The natives with fast cases and their host, shared with JIVE's tests.
#[path = "../../crates/jive/tests/common/fast.rs"]
mod fast;
use fast::FastHost;

fn natives() -> Natives<FastHost> {
    let mut n = test_natives::<FastHost>();
    fast::register(&mut n, "test");
    n
}

fuzz_target!(|data: &[u8]| {
    let Ok(class) = Class::load(data, &natives(), &["test"]) else {
        return;
    };
    let limits = Limits {
        fuel: 100_000,
        max_depth: 64,
        heap_quota: 64 * 1024,
        max_time: None,
    };
    let (mut h1, mut h2) = (FastHost::new(), FastHost::new());
    let (Ok(mut interp), Ok(mut jit)) = (
        Vm::new(class.clone(), limits, &mut h1),
        Vm::new(class.clone(), limits, &mut h2),
    ) else {
        return;
    };
    if jit.compile().is_err() {
        // The compiler may refuse a class (the machine is unsupported);
        // it must not refuse one that loaded on this target.
        panic!("a loaded class did not compile");
    }
    let Ok(file) = jive::classfile::ClassFile::parse(data) else {
        return;
    };
    for info in &file.methods {
        let Some(m) = class.method(&info.name) else {
            continue;
        };
        let Some(n) = int_params(class.method_descriptor(m)) else {
            continue;
        };
        for seed in [0i32, 1, -1, i32::MIN, i32::MAX, 200] {
            let args: Vec<i32> = (0..n).map(|i| seed.wrapping_add(i as i32)).collect();
            // One seed runs without a window (the copy natives fault).
            let lend = seed != 1;
            let mut out = Vec::new();
            for (vm, h) in [(&mut interp, &mut h1), (&mut jit, &mut h2)] {
                h.bound = lend;
                if lend {
                    // SAFETY: the host's window outlives the invocation and
                    // is not the VM's heap.
                    unsafe { vm.set_window(h.window.as_mut_ptr(), h.window.len()) };
                }
                let r = vm.invoke(h, m, &args);
                vm.clear_window();
                out.push((r, vm.last_fuel_used(), vm.last_fault_site()));
            }
            assert_eq!(out[0], out[1], "{}{:?}", info.name, args);
            assert!(
                h1.window == h2.window,
                "window after {}{:?}",
                info.name,
                args
            );
            assert_eq!(h1.emitted, h2.emitted, "emitted by {}{:?}", info.name, args);
        }
    }
});
