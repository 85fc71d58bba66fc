//! Allocation in compiled code against the interpreter: the methods of
//! `data/Alloc.java` (allocation in loops past the quota with arrays live
//! in locals, in a field and on the operand stack, in a callee of a
//! compiled caller, at every level of a recursion, and the faults of
//! allocation) run in an interpreting VM and a compiled one, which must
//! agree on result, fault, fault site, fuel, heap and live arrays, over
//! grids of arguments, quotas and budgets; and an interpreted method
//! calling an allocating compiled one keeps its own arrays alive.
#![cfg(feature = "jit")]

mod common;
/// The two VMs the tests compare (compiled tests only).
#[path = "common/twin.rs"]
mod twin;

use common::op::*;
use common::*;
use jive::{test_natives, Class, Fault, Limits};
use twin::Twin;

const ALLOC8: &[u8] = include_bytes!("data/alloc8.class");

/// Every method of the class compiles, the allocating ones included.
#[test]
fn allocating_methods_and_their_callers_compile() {
    let t = Twin::new(ALLOC8);
    for m in [
        "mk",
        "fill",
        "pick",
        "churn",
        "viaCallee",
        "rec",
        "hog",
        "neg",
        "deep",
        "give",
    ] {
        assert!(t.compiled(m), "{m} should be compiled");
    }
}

/// Quotas small enough that the loops collect many times from compiled
/// code, with budgets that stop them at every early charge (allocations
/// and collections included) and in the middle of later collections.
#[test]
fn allocation_loops_collect_as_interpreted() {
    let mut t = Twin::new(ALLOC8);
    let fuels: Vec<u64> = (0..48)
        .chain([97, 500, 1_000, 5_000, 20_000, 100_000_000])
        .collect();
    for heap_quota in [256, 1 << 12, 1 << 16, 1 << 20] {
        for &fuel in &fuels {
            t.set(
                Limits {
                    fuel,
                    heap_quota,
                    ..Limits::default()
                },
                None,
            );
            for (n, k) in [(0, 1), (1, 4), (3, 100), (50, 17), (400, 64), (200, 1000)] {
                t.check("churn", &[n, k]);
                t.check("viaCallee", &[n, k]);
            }
            for (d, k) in [(0, 1), (3, 2), (40, 8), (300, 16)] {
                t.check("rec", &[d, k]);
            }
        }
    }
    // The loops' answers: the arrays that stayed live kept their contents
    // through every collection (the compiled VM's answers are the
    // interpreter's, checked above).
    let mut vm = t.jit;
    let limits = Limits {
        heap_quota: 1 << 12,
        ..Limits::default()
    };
    vm.set_limits(limits);
    let (n, k) = (400, 64);
    let churn = |n: i32, k: i32| -> i32 {
        (0..n).map(|i| i + k + (i + i + 3) + k).sum::<i32>() + 11 + 44 + 5 + 4 + 9
    };
    let m = t.c.method("churn").expect("churn");
    assert_eq!(vm.invoke(&mut 0, m, &[n, k]), Ok(Some(churn(n, k))));
    let m = t.c.method("viaCallee").expect("viaCallee");
    let want = (0..n).map(|i| 2 * i).sum::<i32>() + 99 + 99;
    assert_eq!(vm.invoke(&mut 0, m, &[n, k]), Ok(Some(want)));
    // 300 live arrays of 80 bytes, and garbage: collections near the
    // quota.
    vm.set_limits(Limits {
        heap_quota: 1 << 15,
        ..Limits::default()
    });
    let m = t.c.method("rec").expect("rec");
    let (d, k) = (300, 16);
    let want = (1..=d).map(|x| 2 * x).sum::<i32>() + k;
    assert_eq!(vm.invoke(&mut 0, m, &[d, k]), Ok(Some(want)));
    // The field the loop filled outlives the invocation.
    let kept = vm.static_field("kept").expect("kept");
    let a = vm.array_of_field(kept).expect("an array");
    assert_eq!(vm.ints(a), Some(&[0, 9][..]));
}

/// Out of heap (the collection frees nothing) and negative sizes fault at
/// the same `newarray`, in the method that allocates, compiled as
/// interpreted, and the VM goes on.
#[test]
fn allocation_faults_at_the_interpreters_offsets() {
    let mut t = Twin::new(ALLOC8);
    for heap_quota in [0, 100, 1 << 12, 1 << 20] {
        for fuel in [3, 40, 100_000_000] {
            t.set(
                Limits {
                    fuel,
                    heap_quota,
                    ..Limits::default()
                },
                None,
            );
            for n in [
                0,
                1,
                7,
                8,
                30,
                100,
                300,
                1000,
                100_000,
                i32::MAX,
                -1,
                i32::MIN,
            ] {
                t.check("hog", &[n]);
                t.check("neg", &[n]);
                t.check("deep", &[n]);
                t.check("give", &[n]);
                t.check("mk", &[n, n]);
            }
        }
    }
    t.set(
        Limits {
            heap_quota: 1000,
            ..Limits::default()
        },
        None,
    );
    let hog = t.c.method("hog").expect("hog");
    for vm in [&mut t.interp, &mut t.jit] {
        let r = vm.invoke(&mut 0, hog, &[100]);
        assert!(matches!(r, Err(Fault::HeapQuotaExceeded { .. })), "{r:?}");
        let site = vm.last_fault_site().expect("a site");
        assert_eq!((site.method.as_str(), site.offset), ("hog(I)I", 9));
        let r = vm.invoke(&mut 0, t.c.method("neg").expect("neg"), &[3]);
        assert_eq!(r, Err(Fault::NegativeArraySize(-3)));
        let site = vm.last_fault_site().expect("a site");
        assert_eq!((site.method.as_str(), site.offset), ("neg(I)I", 16));
        let r = vm.invoke(&mut 0, t.c.method("deep").expect("deep"), &[-2]);
        assert_eq!(r, Err(Fault::NegativeArraySize(-2)));
        let site = vm.last_fault_site().expect("a site");
        assert_eq!(site.method, "mk(II)[I");
    }
}

/// Arrays the host pinned, and arrays returned to it, survive collections
/// made by compiled code as they survive the interpreter's.
#[test]
fn pinned_arrays_survive_compiled_collections() {
    let mut t = Twin::new(ALLOC8);
    t.set(
        Limits {
            heap_quota: 1 << 12,
            ..Limits::default()
        },
        None,
    );
    let give = t.c.method("give").expect("give");
    let churn = t.c.method("churn").expect("churn");
    let mut handles = Vec::new();
    for vm in [&mut t.interp, &mut t.jit] {
        let h = vm
            .invoke(&mut 0, give, &[5])
            .expect("gives")
            .expect("a handle");
        let a = vm.array_ref(h).expect("live");
        assert!(vm.pin_array(a));
        vm.invoke(&mut 0, churn, &[300, 50]).expect("churns");
        assert_eq!(vm.ints(a), Some(&[5, 0, 0, 0, 5][..]));
        vm.unpin_array(a);
        vm.invoke(&mut 0, churn, &[1, 1]).expect("churns");
        assert_eq!(vm.ints(a), None, "freed once unpinned");
        handles.push((h, vm.heap_used(), vm.live_arrays()));
    }
    assert_eq!(handles[0], handles[1]);
}

/// A method too large to compile (its frame passes the compiler's slot
/// bound), interpreted, holds arrays in its frame while it calls compiled
/// methods that allocate and collect: its arrays survive, and the two VMs
/// agree on everything.
#[test]
fn interpreted_frames_below_compiled_allocation_are_roots() {
    const ASTORE_2: u8 = 77;
    const ALOAD_2: u8 = 44;
    let mut a = Asm::new("M");
    a.default_init();
    let mk = a.mref("M", "mk", "(II)[I");
    // int[] mk(int n, int v) { int[] t = new int[n]; t[0] = v; return t; }
    a.method(
        PS,
        "mk",
        "(II)[I",
        3,
        3,
        &[
            ILOAD_0, NEWARRAY, T_INT, ASTORE_2, ALOAD_2, ICONST_0, ILOAD_1, IASTORE, ALOAD_2,
            ARETURN,
        ],
    );
    // int loop(int n, int k) { int s = 0; for (int i = 0; i < n; i++) s += mk(k, i)[0]; return s; }
    a.method(
        PS,
        "loop",
        "(II)I",
        3,
        4,
        &[
            ICONST_0,
            ISTORE_2,
            ICONST_0,
            ISTORE,
            3, // 0
            ILOAD,
            3,
            ILOAD_0,
            IF_ICMPGE,
            0,
            20, // 5: to 28
            ILOAD_2,
            ILOAD_1,
            ILOAD,
            3,
            INVOKESTATIC,
            hi(mk),
            lo(mk), // 11
            ICONST_0,
            IALOAD,
            IADD,
            ISTORE_2, // 18
            IINC,
            3,
            1,
            GOTO,
            0xff,
            0xec, // 22: back to 5
            ILOAD_2,
            IRETURN, // 28
        ],
    );
    let lp = a.mref("M", "loop", "(II)I");
    // int big(int n, int k), 5000 locals: { int[] x = mk(3, 77); int r =
    // loop(n, k); return r + x[0] + mk(2, 5)[0]; }
    a.method(
        PS,
        "big",
        "(II)I",
        4,
        5000,
        &[
            ICONST_3,
            BIPUSH,
            77,
            INVOKESTATIC,
            hi(mk),
            lo(mk),
            ASTORE_2, // 0
            ILOAD_0,
            ILOAD_1,
            INVOKESTATIC,
            hi(lp),
            lo(lp), // 9
            ALOAD_2,
            ICONST_0,
            IALOAD,
            IADD, // 15
            ICONST_2,
            ICONST_5,
            INVOKESTATIC,
            hi(mk),
            lo(mk),
            ICONST_0,
            IALOAD,
            IADD,
            IRETURN,
        ],
    );
    let c = Class::load(&a.build(), &test_natives::<u32>(), &["test"]).expect("load");
    let mut t = Twin::of(c);
    assert!(t.compiled("mk") && t.compiled("loop"));
    assert!(
        !t.compiled("big"),
        "big's frame is over the compiler's bound"
    );
    for heap_quota in [100, 1 << 10, 1 << 16] {
        for fuel in [10, 2_000, 100_000_000] {
            t.set(
                Limits {
                    fuel,
                    heap_quota,
                    ..Limits::default()
                },
                None,
            );
            for (n, k) in [(0, 1), (5, 3), (200, 20), (1000, 7)] {
                t.check("big", &[n, k]);
                t.check("loop", &[n, k]);
            }
        }
    }
    t.set(
        Limits {
            heap_quota: 1 << 10,
            ..Limits::default()
        },
        None,
    );
    let big = t.c.method("big").expect("big");
    let want = (0..1000).sum::<i32>() + 77 + 5;
    assert_eq!(t.jit.invoke(&mut 0, big, &[1000, 7]), Ok(Some(want)));
}

/// The compiled VM reaches the same heap after a long run of mixed
/// invocations (handles reused in the same order), so later invocations
/// that return arrays return the same handles.
#[test]
fn handles_are_reused_alike() {
    let mut t = Twin::new(ALLOC8);
    t.set(
        Limits {
            heap_quota: 1 << 11,
            ..Limits::default()
        },
        None,
    );
    for i in 0..200 {
        t.check("give", &[1 + i % 37]);
        t.check("churn", &[i % 23, 1 + i % 29]);
        t.check("rec", &[i % 11, 1 + i % 5]);
    }
}

/// Allocating recursion thousands of frames deep (the spill stack grows
/// as the interpreter's slot stack does) stops at the call-depth limit,
/// or at the quota with every frame's array live, where the interpreter
/// stops.
#[test]
fn deep_allocating_recursion_stops_where_interpreted_stops() {
    let mut t = Twin::new(ALLOC8);
    for max_depth in [10, 4096] {
        for heap_quota in [1 << 12, 1 << 20] {
            t.set(
                Limits {
                    max_depth,
                    heap_quota,
                    ..Limits::default()
                },
                None,
            );
            for d in [9, 10, 3000, 4094, 4095, 5000] {
                t.check("rec", &[d, 2]);
            }
        }
    }
    let rec = t.c.method("rec").expect("rec");
    assert_eq!(
        t.jit.invoke(&mut 0, rec, &[4000, 2]),
        Ok(Some((1..=4000).map(|x| 2 * x).sum::<i32>() + 2))
    );
}
