//! Small loops the compiler unrolls (groups of copies of the body with
//! one fuel check per group) against the interpreter: the methods of
//! `data/unroll/Unroll.java` (the benchmarks' null loop; counted loops of every
//! fused back-edge, up and down, by 1, 2 and 3, near the ends of `int`;
//! a `goto` back-edge; a back-edge on a value the body computes; a
//! counter or bound the body writes; a body that branches inside itself;
//! a body with a call, which is not unrolled; a division by zero and array
//! accesses past the end inside the loop; a field written every
//! iteration; an inner loop; a loop that never ends; constant indices
//! proved in one copy and used in the next, an access past the end
//! first reached in any copy of a group, an array local replaced inside
//! the loop; fibonacci's loop, whose copies take `a[i - 1]` and
//! `a[i - 2]` from the copy before, counted and not; an element written
//! through another local holding the same array, or at another index of
//! the same value, between two reads) run in an
//! interpreting VM and a compiled one, which must agree on result, fault,
//! fault site, fuel, checkpoint calls and heap. The budgets run out at
//! every position of a group (every fuel from 0 to past two groups of the
//! longest body), the loops leave at every position of a group (the
//! arguments that pick the iteration), and faults happen at every
//! position.
#![cfg(feature = "jit")]

mod common;
/// The two VMs the tests compare (compiled tests only).
#[path = "common/twin.rs"]
mod twin;

use jive::{Fault, Limits};
use twin::Twin;

const UNROLL8: &[u8] = include_bytes!("data/unroll/unroll8.class");

/// The methods of one `int` argument, and of two.
const ONE: [&str; 14] = [
    "nullLoop",
    "tenfold",
    "ne",
    "le",
    "ge",
    "whileGoto",
    "bits",
    "sum",
    "field",
    "skip",
    "branchy",
    "withCall",
    "meet",
    "forever",
];
const TWO: [&str; 12] = [
    "exitAt",
    "down",
    "divide",
    "fill",
    "nested",
    "gated",
    "kept",
    "swap",
    "fib",
    "fibLength",
    "alias",
    "twoIndices",
];

/// Arguments: every small count (a loop ending at every position of a
/// group and of the group after), and the ends of `int`.
fn args() -> Vec<i32> {
    (-2..40)
        .chain([100, 1000, i32::MAX, i32::MAX - 1, i32::MAX - 17])
        .chain([i32::MIN, i32::MIN + 1, i32::MIN + 20])
        .collect()
}

/// Every method compiles with its loop unrolled (but `nested`'s outer
/// loop, which holds a loop, and `withCall`'s, which calls).
#[test]
fn small_loops_are_unrolled() {
    let t = Twin::new(UNROLL8);
    let code = t.c.compile().expect("compile");
    for m in ONE.iter().chain(&TWO) {
        let id = t.c.method(m).expect("method");
        assert!(t.compiled(m), "{m} should be compiled");
        let want = usize::from(*m != "withCall");
        assert_eq!(code.unrolled_loops(id), want, "{m}");
    }
}

/// Budgets that run out at every position of a group, with and without
/// a checkpoint (which ends the first part of the budget early), and a
/// budget that lets every loop end.
#[test]
fn small_loops_agree_under_every_budget() {
    let mut t = Twin::new(UNROLL8);
    let args = args();
    let fuels: Vec<u64> = (0..120).chain([211, 997, 5_000, 1_000_000]).collect();
    for &fuel in &fuels {
        for cp in [None, Some(5), Some(61)] {
            t.set_fuel(fuel, cp);
            for m in ONE {
                for &a in &args {
                    t.check(m, &[a]);
                }
            }
        }
    }
    assert!(t.compared > 100_000, "{}", t.compared);
}

/// Loops that leave (or fault) at the `m`th iteration, for every `m` up
/// to past three groups, under budgets that let them and that stop them
/// at every early position.
#[test]
fn small_loops_leave_and_fault_at_every_position() {
    let mut t = Twin::new(UNROLL8);
    let fuels: Vec<u64> = (0..60).step_by(7).chain([150, 100_000]).collect();
    for &fuel in &fuels {
        for cp in [None, Some(23)] {
            t.set_fuel(fuel, cp);
            for m in TWO {
                for n in [0, 1, 5, 30, 1000] {
                    for k in -1..30 {
                        t.check(m, &[n, k]);
                    }
                }
            }
        }
    }
    assert!(t.compared > 10_000, "{}", t.compared);
}

/// The faults inside unrolled loops, by kind: at the division, at the
/// access past the end, and out of fuel in a loop that never ends, each
/// the interpreter's.
#[test]
fn faults_in_unrolled_loops_are_the_interpreters() {
    let mut t = Twin::new(UNROLL8);
    t.set(Limits::default(), None);
    let cases: [(&str, &[i32], Fault); 4] = [
        ("divide", &[100, 13], Fault::DivideByZero),
        (
            "sum",
            &[100],
            Fault::ArrayIndexOutOfBounds {
                index: 21,
                length: 21,
            },
        ),
        (
            "fill",
            &[100, 3],
            Fault::ArrayIndexOutOfBounds {
                index: 13,
                length: 13,
            },
        ),
        ("forever", &[0], Fault::OutOfFuel),
    ];
    for (m, a, want) in cases {
        let id = t.c.method(m).expect("method");
        for vm in [&mut t.interp, &mut t.jit] {
            let got = vm.invoke(&mut 0, id, a);
            assert_eq!(got, Err(want.clone()), "{m}{a:?}");
        }
        t.check(m, a);
    }
}
