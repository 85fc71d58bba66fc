//! Arbitrary bytes as a JIVE class; when one loads, run its initialisers and
//! every method whose parameters are all ints, under a small budget. Any
//! outcome is a result or a fault, never a panic or a hang.
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
        max_time: None,
    };
    let mut host = ();
    let Ok(mut vm) = Vm::new(class.clone(), limits, &mut host) else {
        return;
    };
    // Method names from the class file itself (the loaded class is looked up
    // by name; constructors and initialisers are not callable).
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
        // A few argument patterns: zeros, small, extremes.
        for seed in [0i32, 1, -1, i32::MIN, i32::MAX] {
            let args: Vec<i32> = (0..n).map(|i| seed.wrapping_add(i as i32)).collect();
            let _ = vm.invoke(&mut host, m, &args);
        }
    }
});
