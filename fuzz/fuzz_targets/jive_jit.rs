//! Arbitrary bytes as a JIVE class; when one loads and constructs, run
//! every int-argument method on an interpreted and on a compiled VM of the
//! class and require the same result or fault, fuel used and fault site
//! (JIVE's compiler against its interpreter, as `crates/jive/tests/jit.rs`
//! does on chosen classes).
#![no_main]

use jive::{test_natives, Class, Limits, Vm};
use libfuzzer_sys::fuzz_target;

mod int_params;
use int_params::int_params;

fuzz_target!(|data: &[u8]| {
    let natives = test_natives::<()>();
    let Ok(class) = Class::load(data, &natives, &["test"]) else {
        return;
    };
    let limits = Limits {
        fuel: 100_000,
        max_depth: 64,
        heap_quota: 64 * 1024,
    };
    let mut host = ();
    let (Ok(mut interp), Ok(mut jit)) = (
        Vm::new(class.clone(), limits, &mut host),
        Vm::new(class.clone(), limits, &mut host),
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
        for seed in [0i32, 1, -1, i32::MIN, i32::MAX] {
            let args: Vec<i32> = (0..n).map(|i| seed.wrapping_add(i as i32)).collect();
            let a = interp.invoke(&mut host, m, &args);
            let b = jit.invoke(&mut host, m, &args);
            assert_eq!(a, b, "{}{:?}", info.name, args);
            assert_eq!(interp.last_fuel_used(), jit.last_fuel_used());
            assert_eq!(interp.last_fault_site(), jit.last_fault_site());
        }
    }
});
