//! Array references the compiler resolves once (kept in registers
//! between accesses instead of read from the heap's table at each)
//! against the interpreter: the methods of `data/ArrCache.java` (loops
//! over arrays in locals; a local reassigned to another array and to
//! null inside the loop; two locals swapped every iteration; allocation
//! in the loop, which grows the heap's table and collects at the quota;
//! calls in the loop that read an array or allocate; every kind of
//! array, and arrays of several kinds through one slot; `arraylength` of
//! an empty array; nested loops; accesses at constant indices, the later
//! ones of a straight run unchecked where an earlier one proved them, and
//! not read again, also after the local is pointed at another array; an
//! element read ten times and summed, which the compiler makes one
//! multiplication) run in an interpreting VM and a compiled one,
//! which must agree on result, fault, fault site, fuel, heap and live
//! arrays over grids of arguments, quotas and budgets; and the faults
//! inside the loops are at the interpreter's bytecode offsets.
#![cfg(feature = "jit")]

mod common;
/// The two VMs the tests compare (compiled tests only).
#[path = "common/twin.rs"]
mod twin;

use jive::{Fault, Limits};
use twin::Twin;

const ARRCACHE8: &[u8] = include_bytes!("data/arrcache8.class");

const METHODS: [&str; 15] = [
    "sum", "fill", "swap", "pingpong", "moved", "calls", "kinds", "nested", "nul", "mixed", "lens",
    "consts", "repoint", "sums", "selfSums",
];

/// The methods of one `int` argument.
const ONE_ARG: [&str; 9] = [
    "pingpong", "kinds", "nul", "mixed", "lens", "consts", "repoint", "sums", "selfSums",
];

/// Bytecode offsets in `consts(I)I`: its first `a[0]`, and its first `a[9]`.
const CONSTS_A0: u32 = 38;
const CONSTS_A9: u32 = 67;

const ARGS: [i32; 9] = [0, 1, 3, 4, 7, 8, 16, 17, 40];

/// Every method compiles, and every one agrees with the interpreter on
/// a grid of arguments under budgets that stop it at every early op and
/// inside its loops, with and without a checkpoint.
#[test]
fn array_loops_agree_under_every_budget() {
    let mut t = Twin::new(ARRCACHE8);
    for m in METHODS.iter().chain(&["make", "peek"]) {
        assert!(t.compiled(m), "{m} should be compiled");
    }
    let fuels: Vec<u64> = (0..80).chain([97, 250, 1_000, 100_000]).collect();
    for &fuel in &fuels {
        for cp in [None, Some(7)] {
            t.set_fuel(fuel, cp);
            for m in METHODS {
                if ONE_ARG.contains(&m) {
                    for &a in &ARGS {
                        t.check(m, &[a]);
                    }
                    t.check(m, &[-1]);
                    t.check(m, &[101]);
                    continue;
                }
                for &a in &ARGS {
                    for &b in &[0, 1, 3, 7, 8, 12] {
                        t.check(m, &[a, b]);
                    }
                }
            }
        }
    }
    assert!(t.compared > 50_000, "{}", t.compared);
}

/// Allocation inside the loop: many arrays made while one in a local is
/// read and written, so the heap's table grows (and moves) under the
/// compiled loop, and, at small quotas, collections free the garbage;
/// and allocation in a callee of the loop.
#[test]
fn references_reread_after_allocation_agree() {
    let mut t = Twin::new(ARRCACHE8);
    for heap_quota in [300, 1 << 12, 1 << 20] {
        for fuel in [40, 300, 5_000, 100_000_000] {
            t.set(
                Limits {
                    fuel,
                    heap_quota,
                    ..Limits::default()
                },
                None,
            );
            for (n, k) in [(1, 1), (9, 2), (300, 1), (700, 3), (50, 100), (5, 100_000)] {
                t.check("moved", &[n, k]);
                t.check("calls", &[n, k]);
            }
        }
    }
}

/// The faults inside the loops, compiled, at the interpreter's offsets:
/// past the end at a load and a store, a load in an inner loop, and
/// `arraylength` of a local that became null inside the loop or was
/// null from the start.
#[test]
fn faults_inside_loops_are_at_their_offsets() {
    let mut t = Twin::new(ARRCACHE8);
    let cases: [(&str, &[i32], Fault, &str, u32); 9] = [
        (
            "sum",
            &[20, 0],
            Fault::ArrayIndexOutOfBounds {
                index: 16,
                length: 16,
            },
            "sum(II)I",
            29,
        ),
        (
            "sum",
            &[20, 1],
            Fault::ArrayIndexOutOfBounds {
                index: 7,
                length: 7,
            },
            "sum(II)I",
            29,
        ),
        (
            "fill",
            &[17, 5],
            Fault::ArrayIndexOutOfBounds {
                index: 16,
                length: 16,
            },
            "fill(II)I",
            16,
        ),
        (
            "nested",
            &[3, 8],
            Fault::ArrayIndexOutOfBounds {
                index: 7,
                length: 7,
            },
            "nested(II)I",
            30,
        ),
        ("swap", &[40, 3], Fault::NullPointer, "swap(II)I", 20),
        ("nul", &[2], Fault::NullPointer, "nul(I)I", 24),
        (
            "consts",
            &[101],
            Fault::ArrayIndexOutOfBounds {
                index: 9,
                length: 7,
            },
            "consts(I)I",
            CONSTS_A9,
        ),
        (
            "consts",
            &[1],
            Fault::ArrayIndexOutOfBounds {
                index: 0,
                length: 0,
            },
            "consts(I)I",
            CONSTS_A0,
        ),
        ("consts", &[0], Fault::NullPointer, "consts(I)I", CONSTS_A0),
    ];
    for (m, args, fault, method, offset) in cases {
        t.check(m, args);
        let id = t.c.method(m).expect("method");
        let r = t.jit.invoke(&mut 0, id, args);
        assert_eq!(r, Err(fault), "{m}{args:?}");
        let site = t.jit.last_fault_site().expect("a site");
        assert_eq!(
            (site.method.as_str(), site.offset),
            (method, offset),
            "{m}{args:?}"
        );
    }
    // In bounds, the same loops finish with the interpreter's results.
    for (m, args) in [("sum", [16, 0]), ("fill", [16, 5]), ("nested", [3, 7])] {
        t.check(m, &args);
        let id = t.c.method(m).expect("method");
        let want = t.interp.invoke(&mut 0, id, &args).expect("no fault");
        assert_eq!(t.jit.invoke(&mut 0, id, &args), Ok(want), "{m}{args:?}");
    }
}

/// A sum of one value with itself, compiled as one multiplication, wraps
/// as the additions do: `sums` (an element read ten times) and
/// `selfSums` (a local added to itself in javac's `iadd` chains, which
/// the decoder fuses three and four terms at a time) at values whose sums
/// pass 2^31 either way.
#[test]
fn sums_of_one_value_wrap_as_the_additions_do() {
    let mut t = Twin::new(ARRCACHE8);
    assert!(t.compiled("sums"));
    assert!(t.compiled("selfSums"));
    t.set(Limits::default(), None);
    for x in [
        i32::MAX,
        i32::MIN,
        i32::MIN + 1,
        1 << 30,
        -(1 << 30),
        214_748_365,
        -214_748_365,
        0x1234_5678,
        -1,
        7,
    ] {
        t.check("sums", &[x]);
        t.check("selfSums", &[x]);
        // The additions themselves, left to right as javac emits them.
        let add = |n: i32| (1..n).fold(x, |s, _| s.wrapping_add(x));
        let (s, u) = (add(10), add(3));
        let want = s
            .wrapping_add(u)
            .wrapping_add(s.wrapping_add(x))
            .wrapping_add(x.wrapping_add(u).wrapping_add(1));
        let id = t.c.method("selfSums").expect("method");
        assert_eq!(t.jit.invoke(&mut 0, id, &[x]), Ok(Some(want)), "{x}");
    }
    let id = t.c.method("sums").expect("method");
    let x = i32::MAX;
    let ten = x.wrapping_mul(10);
    let want = ten.wrapping_add(x).wrapping_add(ten.wrapping_add(x));
    assert_eq!(t.jit.invoke(&mut 0, id, &[x]), Ok(Some(want)));
}
