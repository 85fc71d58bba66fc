//! Hostile classes against the limits on time: a fuel budget must bound
//! the time of an invocation (collections included), loading must stay
//! fast whatever the class's shape, a watchdog must stop an invocation
//! whatever its fuel, and constants must fit their fields.
mod common;

use std::time::{Duration, Instant};

use common::attack_load::*;
use common::op::*;
use common::*;
use jive::{test_natives, Class, Fault, Limits, Vm};

fn load(bytes: &[u8]) -> Result<Class<()>, jive::Rejection> {
    Class::load(bytes, &test_natives::<()>(), &["test"])
}

/// The engine's default budget per invocation.
const ENGINE_FUEL: u64 = 20_000;

#[test]
fn collections_are_charged_to_fuel() {
    let class = load(&gc_churn(1 << 20)).expect("loads");
    let m = class.method("churn").expect("churn");
    let limits = Limits {
        fuel: ENGINE_FUEL,
        ..Limits::default()
    };
    for compiled in [false, true] {
        let mut vm = Vm::new(class.clone(), limits, &mut ()).expect("vm");
        if compiled {
            vm.compile().expect("compiles");
        }
        let t = Instant::now();
        let r = vm.invoke(&mut (), m, &[-GC_DEPTH]);
        let took = t.elapsed();
        assert_eq!(r, Err(Fault::OutOfFuel), "compiled {compiled}");
        assert!(vm.last_fuel_used() <= ENGINE_FUEL);
        // 20 000 units are some tens of microseconds of work; growing the
        // frame stack to 16 MiB costs a few milliseconds more.
        assert!(
            took < Duration::from_millis(500),
            "{ENGINE_FUEL} fuel took {took:?} (compiled {compiled})"
        );
    }
}

#[test]
fn collections_charge_the_same_interpreted_and_compiled() {
    // A budget large enough for a few collections of a smaller recursion:
    // both modes use the same fuel and end the same way.
    let class = load(&gc_churn(1 << 16)).expect("loads");
    let m = class.method("churn").expect("churn");
    let mut seen = Vec::new();
    for compiled in [false, true] {
        for fuel in [5_000u64, 50_000, 500_000] {
            let limits = Limits {
                fuel,
                ..Limits::default()
            };
            let mut vm = Vm::new(class.clone(), limits, &mut ()).expect("vm");
            if compiled {
                vm.compile().expect("compiles");
            }
            let r = vm.invoke(&mut (), m, &[-4]);
            assert_eq!(r, Err(Fault::OutOfFuel));
            seen.push((fuel, vm.last_fuel_used(), vm.last_fault_site()));
        }
    }
    let (a, b) = seen.split_at(3);
    assert_eq!(a, b);
}

#[test]
fn many_costly_methods_load_quickly() {
    let bytes = many_methods();
    assert!(
        bytes.len() <= jive::MAX_CLASS_BYTES,
        "{} bytes",
        bytes.len()
    );
    let t = Instant::now();
    let r = load(&bytes);
    let took = t.elapsed();
    assert!(took < Duration::from_secs(2), "loading took {took:?}");
    let e = r.expect_err("refused");
    assert!(e.to_string().contains("verification budget"), "{e}");
}

#[test]
fn a_few_costly_methods_still_load() {
    // Forty of the same methods are within the class's budget.
    let bytes = many_methods_of(40, 40 * 206);
    let class = load(&bytes).expect("loads");
    assert!(class.method("m39").is_some());
}

#[test]
fn deep_stack_and_many_stores_decode_in_linear_time() {
    let bytes = deep_stores(20_000);
    assert!(
        bytes.len() <= jive::MAX_CLASS_BYTES,
        "{} bytes",
        bytes.len()
    );
    let t = Instant::now();
    let r = load(&bytes);
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "loading took {took:?}: {r:?}"
    );
    // What it decodes to still runs: local 0 ends incremented, the pushed
    // copies hold its first value.
    if let Ok(class) = r {
        let mut vm = Vm::new(class.clone(), Limits::default(), &mut ()).expect("vm");
        let m = class.method("m0").expect("m0");
        assert_eq!(vm.invoke(&mut (), m, &[5]), Ok(None));
    }
}

#[test]
fn constant_values_are_narrowed_to_their_fields() {
    let class = load(&wide_constants()).expect("loads");
    let mut vm = Vm::new(class.clone(), Limits::default(), &mut ()).expect("vm");
    // As a store of the int into the field would: byte and short keep
    // their low bits, sign-extended; boolean its low bit.
    let want = [
        ("B", "b", 44),
        ("S", "s", 4464),
        ("Z", "z", 1),
        ("N", "n", 127),
    ];
    for (f, m, v) in want {
        let fid = vm.static_field(f).expect("field");
        assert_eq!(vm.get_int_field(fid), v, "field {f}");
        let mid = class.method(m).expect("method");
        assert_eq!(vm.invoke(&mut (), mid, &[]), Ok(Some(v)), "{m}()");
    }
}

fn timeout_of(compiled: bool) {
    let class = load(&spin()).expect("loads");
    let m = class.method("spin").expect("spin");
    let max = Duration::from_millis(50);
    let limits = Limits {
        fuel: u64::MAX,
        max_time: Some(max),
        ..Limits::default()
    };
    let mut vm = Vm::new(class.clone(), limits, &mut ()).expect("vm");
    if compiled {
        vm.compile().expect("compiles");
        assert!(vm.is_compiled(m), "spin is compiled");
    }
    for _ in 0..2 {
        let t = Instant::now();
        let r = vm.invoke(&mut (), m, &[]);
        let took = t.elapsed();
        assert_eq!(r, Err(Fault::Timeout));
        assert!(took >= max, "stopped after {took:?}");
        assert!(took < max * 10, "stopped after {took:?}");
        assert!(vm.last_fault_site().is_some());
    }
    // A prepared call stops the same way.
    let p = vm.prepare::<0>(m).expect("prepare");
    assert_eq!(vm.invoke_prepared(&mut (), p, []), Err(Fault::Timeout));
}

#[test]
fn max_time_stops_an_endless_loop_interpreted() {
    timeout_of(false);
}

#[test]
fn max_time_stops_an_endless_loop_compiled() {
    timeout_of(true);
}

static HOOKS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn hook(_: &mut ()) {
    HOOKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

#[test]
fn time_slices_change_no_result_nor_fuel() {
    // sum(n): a loop of n iterations, far more fuel than a slice.
    let code = [
        ICONST_0, ISTORE_1, // s = 0
        ILOAD_0, IFEQ, 0, 13, // while n != 0
        ILOAD_1, ILOAD_0, IADD, ISTORE_1, // s += n
        IINC, 0, 0xff, // n--
        GOTO, 0xff, 0xf5, // loop
        ILOAD_1, IRETURN,
    ];
    let class = load(&one("sum", "(I)I", 2, 2, &code)).expect("loads");
    let m = class.method("sum").expect("sum");
    let mut seen = Vec::new();
    for compiled in [false, true] {
        for max_time in [None, Some(Duration::from_secs(3600))] {
            for (fuel, checkpoint) in [(10_000_000, None), (1_000_000, Some(200_000))] {
                let limits = Limits {
                    fuel,
                    max_time,
                    ..Limits::default()
                };
                let mut vm = Vm::new(class.clone(), limits, &mut ()).expect("vm");
                if compiled {
                    vm.compile().expect("compiles");
                    assert!(vm.is_compiled(m));
                }
                if let Some(c) = checkpoint {
                    vm.set_checkpoint(c, hook);
                }
                HOOKS.store(0, std::sync::atomic::Ordering::Relaxed);
                let r = vm.invoke(&mut (), m, &[1_000_000]);
                let hooks = HOOKS.load(std::sync::atomic::Ordering::Relaxed);
                seen.push((r, vm.last_fuel_used(), hooks));
            }
        }
    }
    // Per budget, every mode and time limit agree.
    for k in 0..2 {
        let same: Vec<_> = seen.iter().skip(k).step_by(2).collect();
        assert!(same.windows(2).all(|w| w[0] == w[1]), "{same:?}");
    }
    assert_eq!(seen[0].0, Ok(Some((1_000_000i64 * 1_000_001 / 2) as i32)));
    assert_eq!(seen[1].0, Err(Fault::OutOfFuel));
    assert_eq!(seen[1].2, 1, "the hook ran once");
}
