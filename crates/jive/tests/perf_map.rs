//! `JIVE_PERF_MAP`: a class compiled with it set names its methods'
//! code in `perf`'s map for the process (`/tmp/perf-PID.map`), one line
//! each: the body's address and size in hex, and `jive:Class.method` with its descriptor.
//! Its own test binary: it sets the variable for the whole process.
#![cfg(feature = "jit")]

mod common;

use common::op::*;
use common::*;
use jive::{test_natives, Class, Limits, Vm};

#[test]
fn compiled_methods_are_named_in_the_perf_map() {
    let mut a = Asm::new("Mapped");
    a.default_init();
    #[rustfmt::skip]
    a.method(PS, "twice", "(I)I", 2, 1, &[ILOAD_0, ILOAD_0, IADD, IRETURN]);
    #[rustfmt::skip]
    a.method(PS, "three", "()I", 1, 0, &[ICONST_3, IRETURN]);
    let c = Class::load(&a.build(), &test_natives::<()>(), &[]).expect("load");
    let path = format!("/tmp/perf-{}.map", std::process::id());
    let _ = std::fs::remove_file(&path);
    // This test binary runs this one test: no other thread reads the
    // environment while it is set.
    std::env::set_var("JIVE_PERF_MAP", "1");
    let mut vm = Vm::new(c.clone(), Limits::default(), &mut ()).expect("construct");
    assert!(vm.compile().expect("compile") >= 2);
    std::env::remove_var("JIVE_PERF_MAP");
    let text = std::fs::read_to_string(&path).expect("the perf map");
    let _ = std::fs::remove_file(&path);
    for name in ["jive:Mapped.twice(I)I", "jive:Mapped.three()I"] {
        let line = text
            .lines()
            .find(|l| l.ends_with(name))
            .unwrap_or_else(|| panic!("{name} not in the map:\n{text}"));
        let mut f = line.split(' ');
        let addr = usize::from_str_radix(f.next().unwrap(), 16).expect("a hex address");
        let size = usize::from_str_radix(f.next().unwrap(), 16).expect("a hex size");
        assert!(addr != 0 && size > 0, "{line}");
    }
    // And the code named there is the code that runs.
    let twice = c.method("twice").expect("method");
    assert_eq!(vm.invoke(&mut (), twice, &[21]).expect("run"), Some(42));
}
