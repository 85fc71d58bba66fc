//! Array accesses at an index an earlier access of the same straight run
//! checked through the same cached array, which compiled code makes
//! without a second check: the methods of `data/checked/Checked.java`
//! run in an interpreting VM and a compiled one, which must agree on
//! result, fault, fault site, fuel, checkpoint calls and heap, over a
//! grid of indices in and out of bounds of both arrays, under budgets
//! that stop them at every point.
#![cfg(feature = "jit")]

mod common;
/// The two VMs the tests compare (compiled tests only).
#[path = "common/twin.rs"]
mod twin;

use jive::{Fault, Limits};
use twin::Twin;

const CHECKED8: &[u8] = include_bytes!("data/checked/checked8.class");

const METHODS: [&str; 8] = [
    "swap",
    "repoint",
    "reassign",
    "moved",
    "affine",
    "bytes",
    "aroundCall",
    "loopSwap",
];

/// Indices around both arrays' ends (5, 9 and 16 elements).
const IDX: [i32; 14] = [-1, 0, 1, 3, 4, 5, 6, 8, 9, 13, 14, 15, 16, 17];

#[test]
fn checked_indices_agree_under_every_budget() {
    let mut t = Twin::new(CHECKED8);
    for m in METHODS {
        assert!(t.compiled(m), "{m} should be compiled");
    }
    let fuels: Vec<u64> = (0..40).chain([97, 1_000, 100_000]).collect();
    for &fuel in &fuels {
        for cp in [None, Some(5)] {
            t.set_fuel(fuel, cp);
            for m in METHODS {
                for &k in &IDX {
                    for &j in &IDX {
                        t.check(m, &[k, j]);
                    }
                }
            }
        }
    }
    assert!(t.compared > 100_000, "{}", t.compared);
}

/// The faults the second access of an index must still make, each the
/// interpreter's: the local now names a shorter array (in the same run,
/// and after a join), and the index moved past the end.
#[test]
fn a_checked_index_on_another_array_still_faults() {
    let mut t = Twin::new(CHECKED8);
    t.set(Limits::default(), None);
    let oob = |index, length| Fault::ArrayIndexOutOfBounds { index, length };
    let cases: [(&str, [i32; 2], Fault); 3] = [
        ("reassign", [7, 1], oob(7, 5)),
        ("repoint", [12, 2], oob(12, 5)),
        ("moved", [10, 6], oob(16, 16)),
    ];
    for (m, a, want) in cases {
        let id = t.c.method(m).expect("method");
        for vm in [&mut t.interp, &mut t.jit] {
            assert_eq!(vm.invoke(&mut 0, id, &a), Err(want.clone()), "{m}{a:?}");
        }
        t.check(m, &a);
    }
}
