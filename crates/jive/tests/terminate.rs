//! Terminating an invocation at every point where it can be terminated
//! (`Vm::set_check_limit`): with check limits 1, 2, 3, ... an invocation of
//! a method with a loop, calls and native calls stops at each successive
//! fuel check, the VM names the site, interpreted and compiled code stop
//! at the same sites, another invocation under the same limit stops at
//! the same site, and after each stop the VM runs the method to
//! completion with the same result.
mod common;

use common::op::*;
use common::*;
use jive::{test_natives, Class, Fault, Limits, Vm};

/// `f(n)`: `s = 0; for (i = 0; i < n; i++) s += g(i) + id(i); return s`,
/// `g(x)`: `return x + x`.
fn class() -> Class<()> {
    let mut a = Asm::new("T");
    a.default_init();
    let g = a.mref("T", "g", "(I)I");
    let id = a.mref("unet/sle/Natives", "id", "(I)I");
    #[rustfmt::skip]
    let f = [
        ICONST_0, ISTORE_1,                     // 0: s = 0
        ICONST_0, ISTORE_2,                     // 2: i = 0
        ILOAD_2, ILOAD_0, IF_ICMPGE, 0, 21,     // 4: while i < n
        ILOAD_1, ILOAD_2,                       // 9
        INVOKESTATIC, hi(g), lo(g),             // 11: g(i)
        IADD, ILOAD_2,                          // 14
        INVOKESTATIC, hi(id), lo(id),           // 16: id(i)
        IADD, ISTORE_1,                         // 19
        IINC, 2, 1,                             // 21: i++
        GOTO, 0xff, 0xec,                       // 24: back to 4
        ILOAD_1, IRETURN,                       // 27
    ];
    a.method(PS, "f", "(I)I", 3, 3, &f);
    a.method(PS, "g", "(I)I", 2, 1, &[ILOAD_0, ILOAD_0, IADD, IRETURN]);
    Class::load(&a.build(), &test_natives::<()>(), &["test"]).expect("loads")
}

/// The stops of `f(5)` at check limits 1, 2, ... until it completes: each
/// stop's (method, offset, fuel used).
fn stops(compiled: bool) -> Vec<(String, u32, u64)> {
    let c = class();
    let f = c.method("f").expect("f");
    let mut vm = Vm::new(c.clone(), Limits::default(), &mut ()).expect("vm");
    if compiled {
        vm.compile().expect("compiles");
        assert!(vm.is_compiled(f), "f is compiled");
    }
    let want = vm.invoke(&mut (), f, &[5]).expect("runs");
    assert_eq!(want, Some(2 * 10 + 10));
    let mut out: Vec<(String, u32, u64)> = Vec::new();
    for n in 1..10_000u64 {
        vm.set_check_limit(Some(n));
        match vm.invoke(&mut (), f, &[5]) {
            Ok(r) => {
                assert_eq!(r, want, "completed at limit {n}");
                break;
            }
            Err(Fault::OutOfFuel) => {}
            Err(e) => panic!("limit {n}: {e}"),
        }
        let site = vm.last_fault_site().expect("a site");
        let fuel = vm.last_fuel_used();
        if let Some(last) = out.last() {
            assert!(fuel > last.2, "limit {n}: fuel {fuel} after {}", last.2);
        }
        // The limit holds for each invocation alike: another one under it
        // stops at the same check (its count starts again).
        assert_eq!(
            vm.invoke(&mut (), f, &[5]),
            Err(Fault::OutOfFuel),
            "again at {n}"
        );
        let again = vm.last_fault_site().expect("a site");
        assert_eq!(
            (&again.method, again.offset, vm.last_fuel_used()),
            (&site.method, site.offset, fuel),
            "again at limit {n}"
        );
        out.push((site.method, site.offset, fuel));
        // The VM is usable and the method's result unchanged.
        vm.set_check_limit(None);
        assert_eq!(vm.invoke(&mut (), f, &[5]), Ok(want), "after limit {n}");
    }
    assert!(!out.is_empty());
    out
}

#[test]
fn every_check_of_an_invocation_is_a_place_it_stops() {
    let interp = stops(false);
    // The entry, then per iteration the call of g, the native call and
    // the back-edge (the decoder makes `iinc; goto` one op, whose site is
    // the `iinc`): every kind of check.
    let kinds: std::collections::BTreeSet<(String, u32)> =
        interp.iter().map(|s| (s.0.clone(), s.1)).collect();
    for off in [0, 11, 16, 21] {
        assert!(
            kinds.contains(&("f(I)I".to_string(), off)),
            "no stop at offset {off} of f: {kinds:?}"
        );
    }
    // The decoder puts the loop's test at its bottom: the last iteration
    // takes no back-edge.
    assert_eq!(interp.len(), 1 + 5 * 2 + 4, "stops: {interp:?}");
    if cfg!(feature = "jit") {
        assert_eq!(stops(true), interp, "compiled and interpreted stop alike");
    }
}
