//! Static fields in compiled code: within a straight run of ops the
//! compiler takes a field's value from the run's earlier read or write
//! instead of loading it again, and forgets it at a call, a join of paths
//! and every loop iteration (a native or an allocation writes no field,
//! so the value stays known across them). The methods of
//! `data/fields/Fields.java` run in an interpreting VM and a compiled
//! one, which must agree on result, fault, fault site, fuel, checkpoint
//! calls and heap, under budgets that stop them at every point.
#![cfg(feature = "jit")]

mod common;
/// The two VMs the tests compare (compiled tests only).
#[path = "common/twin.rs"]
mod twin;

use jive::Limits;
use twin::Twin;

const FIELDS8: &[u8] = include_bytes!("data/fields/fields8.class");

const METHODS: [&str; 10] = [
    "aroundCall",
    "writeThenRead",
    "narrow",
    "loop",
    "twoFields",
    "join",
    "aroundAlloc",
    "tenfold",
    "volatileReads",
    "aroundNatives",
];

fn args() -> Vec<i32> {
    (-3..20)
        .chain([127, 128, 255, 256, 32767, 32768, 65535, 1000])
        .chain([i32::MAX, i32::MIN, -129, -32769])
        .collect()
}

#[test]
fn every_method_compiles() {
    let t = Twin::new(FIELDS8);
    for m in METHODS {
        assert!(t.compiled(m), "{m} should be compiled");
    }
}

/// What each method returns, worked out by hand: the compiled code must
/// see every write, the callee's and its own, and the narrowed values.
#[test]
fn compiled_reads_see_every_write() {
    let mut t = Twin::new(FIELDS8);
    t.set(Limits::default(), None);
    let cases: [(&str, i32, i32); 12] = [
        ("aroundCall", 7, 7_008),
        ("writeThenRead", 2, 7 + 6 + 7),
        ("narrow", 0x1_8081, -127 - 32_639 + 1 - 127 - 32_639),
        ("loop", 4, 14),
        ("twoFields", 3, 5 ^ 8),
        ("join", 4, 4 + 7 + 4),
        ("join", -2, 5 + 3 + 5),
        ("aroundAlloc", 9, 9 + 9 + 9 + 2),
        ("tenfold", 2, 301),
        ("volatileReads", 3, 9 + 3 * 9),
        // fill(buf, 5, 5), then 5 * 5 + 5, id(5) + 1, 3 * 5 and the length.
        ("aroundNatives", 5, 25 + 5 + 6 + 15 + 16),
        // fill(buf, -1, 15): fifteen bytes of -1, then -15 + -1, id(-1) + 1
        // (0), -3 and the length.
        ("aroundNatives", -1, -15 - 1 - 3 + 16),
    ];
    for (m, a, want) in cases {
        let id = t.c.method(m).expect("method");
        for vm in [&mut t.interp, &mut t.jit] {
            assert_eq!(vm.invoke(&mut 0, id, &[a]), Ok(Some(want)), "{m}({a})");
        }
        t.check(m, &[a]);
    }
}

/// Budgets that stop the methods at every point, with and without a
/// checkpoint, and one that lets them finish.
#[test]
fn fields_agree_under_every_budget() {
    let mut t = Twin::new(FIELDS8);
    let fuels: Vec<u64> = (0..90).chain([211, 5_000, 1_000_000]).collect();
    for &fuel in &fuels {
        for cp in [None, Some(7)] {
            t.set_fuel(fuel, cp);
            for m in METHODS {
                for a in args() {
                    t.check(m, &[a]);
                }
            }
        }
    }
    assert!(t.compared > 20_000, "{}", t.compared);
}
