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
use std::time::{Duration, Instant};

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

/// Under a time limit a VM learns how fast its units run: from a pace of
/// 4 ns a unit, invocations that outlast their first part (a quarter of
/// the limit at the pace) read the clock, and their closing readings
/// teach the VM the faster pace, until the first part covers them and
/// they read it no more. The pace learned leaves the limit in force: a
/// runaway invocation still stops with a timeout, not long after it.
#[test]
fn a_vm_learns_its_pace_and_a_runaway_still_stops() {
    for compiled in [false, true] {
        let c = class();
        let f = c.method("f").expect("f");
        let limit = Duration::from_micros(10);
        let limits = Limits {
            max_time: Some(limit),
            ..Limits::default()
        };
        let mut vm = Vm::new(c.clone(), limits, &mut ()).expect("vm");
        if compiled {
            vm.compile().expect("compiles");
        }
        let initial = vm.pace_ps().expect("timed");
        assert_eq!(initial, 4000);
        // More units than the first part at the initial pace: 2.5 µs at
        // 4 ns a unit is 625. The pace learned stops where the first part
        // covers the whole invocation (2.5 µs over its units): the
        // compiled VM's invocations are long enough (about 3 200 units)
        // for that to lie well below half the initial pace, where f(150)'s
        // 1 200 units put it at the threshold; the interpreter's stay
        // well within the 10 µs limit.
        let n = if compiled { 400 } else { 150 };
        // A thread's first invocation looks its stack up; f(1) reads no
        // clock and teaches nothing.
        vm.invoke(&mut (), f, &[1]).expect("runs");
        // An invocation descheduled on a loaded machine can outlast the
        // 10 µs limit: such timeouts are counted, not failures.
        let mut timeouts = 0;
        let mut run = |vm: &mut Vm<()>| match vm.invoke(&mut (), f, &[n]) {
            Ok(_) => true,
            Err(Fault::Timeout) => {
                timeouts += 1;
                false
            }
            Err(e) => panic!("compiled {compiled}: f({n}) faulted: {e:?}"),
        };
        let mut used = 0;
        for _ in 0..20 {
            if run(&mut vm) {
                used = vm.last_fuel_used();
                break;
            }
        }
        assert!(used > 8 * n as u64, "f({n}) used {used} units");
        let mut best = u64::MAX;
        for _ in 0..400 {
            run(&mut vm);
            best = best.min(vm.pace_ps().expect("timed"));
        }
        assert!(
            timeouts < 100,
            "compiled {compiled}: {timeouts} of about 400 invocations timed out"
        );
        let pace = vm.pace_ps().expect("timed");
        // Each closing reading takes an eighth off at most: 4000 ps to
        // below 2000 takes six of them. Compiled code runs this loop
        // (calls, native calls) at well under 1 ns a unit; the interpreter
        // at 2-4 here, near the initial pace, so only its runaway is
        // checked.
        assert!(
            !compiled || pace < initial / 2,
            "compiled {compiled}: pace {pace} ps a unit after 400 invocations (best {best})"
        );
        // A runaway: stopped by the clock, not by its fuel.
        let t = Instant::now();
        let r = vm.invoke(&mut (), f, &[i32::MAX]);
        let took = t.elapsed();
        assert_eq!(r, Err(Fault::Timeout), "compiled {compiled}");
        assert!(
            took < Duration::from_millis(5),
            "compiled {compiled}: stopped after {took:?}"
        );
    }
}
