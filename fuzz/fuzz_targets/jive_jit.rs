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
//!
//! A third VM, compiled, runs each method with bytes *lent* to the first
//! `byte[]` field the class lets be lent for it (`Vm::lend_bytes`; one
//! loan at a time), where the first two have the same bytes copied into
//! the field's array: all three must agree.
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
    let (mut h1, mut h2, mut h3) = (FastHost::new(), FastHost::new(), FastHost::new());
    let (Ok(mut interp), Ok(mut jit), Ok(mut lent)) = (
        Vm::new(class.clone(), limits, &mut h1),
        Vm::new(class.clone(), limits, &mut h2),
        Vm::new(class.clone(), limits, &mut h3),
    ) else {
        return;
    };
    if jit.compile().is_err() || lent.compile().is_err() {
        // The compiler may refuse a class (the machine is unsupported);
        // it must not refuse one that loaded on this target.
        panic!("a loaded class did not compile");
    }
    // What is lent (or copied in): a pattern, as long as the array holds.
    let bytes: Vec<u8> = (0..4096u32).map(|i| (i * 29 + 7) as u8).collect();
    let Ok(file) = jive::classfile::ClassFile::parse(data) else {
        return;
    };
    // A `byte[]` field the class leaves null gets an array from the host
    // (as an applet's `RxBuf` does), the same in each VM.
    for vm in [&mut interp, &mut jit, &mut lent] {
        for fi in &file.fields {
            let Some(f) = class.field(&fi.name) else {
                continue;
            };
            if fi.descriptor == "[B" && vm.get_int_field(f) == 0 {
                if let Ok(a) = vm.new_byte_array(128) {
                    let _ = vm.try_set_array_field(f, a);
                }
            }
        }
    }
    for info in &file.methods {
        let Some(m) = class.method(&info.name) else {
            continue;
        };
        let Some(n) = int_params(class.method_descriptor(m)) else {
            continue;
        };
        // The first field lendable to `m` (one loan at a time).
        let field = file
            .fields
            .iter()
            .filter_map(|fi| class.field(&fi.name))
            .find(|&f| class.lendable(f, m));
        for seed in [0i32, 1, -1, i32::MIN, i32::MAX, 200] {
            let args: Vec<i32> = (0..n).map(|i| seed.wrapping_add(i as i32)).collect();
            // One seed runs without a window (the copy natives fault).
            let lend = seed != 1;
            let mut out = Vec::new();
            let vms = [
                (&mut interp, &mut h1),
                (&mut jit, &mut h2),
                (&mut lent, &mut h3),
            ];
            for (i, (vm, h)) in vms.into_iter().enumerate() {
                h.bound = lend;
                if lend {
                    // SAFETY: the host's window outlives the invocation and
                    // is not the VM's heap.
                    unsafe { vm.set_window(h.window.as_mut_ptr(), h.window.len()) };
                }
                // Its first half copied in, or lent.
                if let Some(f) = field {
                    let n = vm.field_bytes(f).map_or(0, |b| b.len()).min(bytes.len()) / 2;
                    if i == 2 {
                        // SAFETY: `bytes` outlives the invocation (the loan
                        // ends after it) and is not the VM's heap.
                        unsafe { vm.lend_bytes(f, bytes.as_ptr(), n) };
                    } else if let Some(b) = vm.field_bytes_mut(f) {
                        for (d, s) in b.iter_mut().zip(&bytes[..n]) {
                            *d = *s as i8;
                        }
                    }
                }
                let r = vm.invoke(h, m, &args);
                vm.end_lend();
                vm.clear_window();
                out.push((r, vm.last_fuel_used(), vm.last_fault_site()));
            }
            assert_eq!(out[0], out[1], "{}{:?}", info.name, args);
            assert_eq!(out[1], out[2], "lent: {}{:?}", info.name, args);
            assert!(h2.window == h3.window, "lent: window after {}", info.name);
            assert_eq!(h2.emitted, h3.emitted, "lent: emitted by {}", info.name);
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
