//! Calls of small leaf methods compiled into their callers: the call
//! still charges the callee's length and still overflows where the depth
//! limit says, at the call op, and the callee's arithmetic gives what
//! Java's does. The methods of `data/inline/Inline.java` run in an
//! interpreting VM and a compiled one, which must agree on result, fault,
//! fault site, fuel, checkpoint calls and heap, under budgets that stop
//! them at every point and depth limits that stop the calls.
#![cfg(feature = "jit")]

mod common;
/// The two VMs the tests compare (compiled tests only).
#[path = "common/twin.rs"]
mod twin;

use jive::{Fault, Limits};
use twin::Twin;

const INLINE8: &[u8] = include_bytes!("data/inline/inline8.class");

const METHODS: [&str; 5] = ["nullLoop", "kinds", "loop", "deep", "divideLoop"];

fn args() -> Vec<i32> {
    (-4..12)
        .chain([31, 100, 1000, 65_535, 40_000, -40_000])
        .chain([i32::MAX, i32::MIN, i32::MAX / 31])
        .collect()
}

// Java's arithmetic of the leaves, in Rust, to check the compiled
// callers' results against.
fn twice(x: i32) -> i32 {
    x.wrapping_add(x)
}
fn mix(a: i32, b: i32, c: i32) -> i32 {
    let t = a.wrapping_mul(31).wrapping_add(b);
    let u = ((c as u32) >> 3) as i32 ^ t.wrapping_shl(2);
    (u / 7)
        .wrapping_sub(t % 10)
        .wrapping_add(b | 5)
        .wrapping_sub(c & 12)
        .wrapping_sub(a >> 1)
}
fn low(x: i32) -> i32 {
    x.wrapping_mul(3).wrapping_add(1) as i8 as i32
}
fn half(x: i32) -> i32 {
    x.wrapping_sub(40_000) as i16 as i32
}
fn kinds(x: i32) -> i32 {
    let a = twice(x);
    let b = mix(x, a, x ^ 0x5a5a);
    let c = low(b);
    let d = half(x.wrapping_mul(1000));
    let z = i32::from(x & 1 == 1);
    a.wrapping_add(b)
        .wrapping_add(c)
        .wrapping_add(d)
        .wrapping_add(z)
        .wrapping_add(42)
}
fn looped(n: i32) -> i32 {
    let mut s = 0i32;
    for i in 0..n {
        let t = mix(i, s, n).wrapping_add(low(i)).wrapping_add(twice(s));
        s = s.wrapping_add(t);
    }
    s
}
fn deep(n: i32) -> i32 {
    if n <= 0 {
        twice(n.wrapping_add(3)).wrapping_add(42)
    } else {
        deep(n - 1) + 1
    }
}

#[test]
fn every_method_compiles() {
    let t = Twin::new(INLINE8);
    for m in METHODS {
        assert!(t.compiled(m), "{m} should be compiled");
    }
}

/// Which calls are compiled into their callers: every leaf's, not the
/// recursive call nor the call of `divide` (which may fault), and none of
/// a method the options keep a call, whose callers still agree with the
/// interpreter.
#[test]
fn leaves_are_inlined_unless_kept_calls() {
    let c = jive::Class::load(INLINE8, &jive::test_natives::<u32>(), &["test"]).expect("load");
    let id = |m: &str| c.method(m).expect("method");
    let code = c.compile().expect("compile");
    let counts = [
        ("nullLoop", 1),
        ("kinds", 7),
        ("loop", 3),
        ("deep", 2),
        ("divideLoop", 1),
    ];
    for (m, n) in counts {
        assert_eq!(code.inlined_calls(id(m)), n, "{m}");
    }
    let kept = jive::CompileOptions {
        dont_inline: vec![id("nothing"), id("twice")],
    };
    let code = c.compile_with(&kept).expect("compile");
    for (m, n) in [("nullLoop", 0), ("kinds", 6), ("loop", 2), ("deep", 1)] {
        assert_eq!(code.inlined_calls(id(m)), n, "{m} with calls kept");
    }
    let mut t = Twin::of(c.clone());
    t.jit.install(code).expect("install");
    for fuel in (0..60).chain([100_000]) {
        t.set_fuel(fuel, None);
        for m in METHODS {
            for a in [-3, 0, 1, 7, 40] {
                t.check(m, &[a]);
            }
        }
    }
}

/// What the callers return, against the leaves' arithmetic in Rust, and
/// the fault of the callee that stays a call, in the callee.
#[test]
fn inlined_leaves_compute_as_java_does() {
    let mut t = Twin::new(INLINE8);
    let id = |t: &Twin, m: &str| t.c.method(m).expect("method");
    for a in args() {
        let mut cases = vec![
            ("nullLoop", a.min(1000), a.min(1000)),
            ("kinds", a, kinds(a)),
            ("deep", a.min(50), deep(a.min(50))),
        ];
        if a <= 1000 {
            cases.push(("loop", a, looped(a)));
        }
        for (m, x, want) in cases {
            let mid = id(&t, m);
            assert_eq!(t.jit.invoke(&mut 0, mid, &[x]), Ok(Some(want)), "{m}({x})");
            t.check(m, &[x]);
        }
    }
    let m = id(&t, "divideLoop");
    // -2 and -1, then 100 / 0 in the callee.
    assert_eq!(t.jit.invoke(&mut 0, m, &[-1]), Ok(Some(-4 - 50)));
    assert_eq!(t.jit.invoke(&mut 0, m, &[5]), Err(Fault::DivideByZero));
    let site = t.jit.last_fault_site().expect("a site");
    assert_eq!((site.method.as_str(), site.offset), ("divide(II)I", 2));
    t.check("divideLoop", &[5]);
}

/// Budgets that stop the callers at every point (before, at and after
/// each call's charge), with and without a checkpoint, and one that lets
/// them finish.
#[test]
fn inlined_calls_agree_under_every_budget() {
    let mut t = Twin::new(INLINE8);
    let fuels: Vec<u64> = (0..120).chain([257, 5_000, 1_000_000]).collect();
    for &fuel in &fuels {
        for cp in [None, Some(5)] {
            t.set_fuel(fuel, cp);
            for m in METHODS {
                for a in args() {
                    t.check(m, &[a.min(300)]);
                }
            }
        }
    }
    assert!(t.compared > 20_000, "{}", t.compared);
}

/// Depth limits that make the leaf's own call at the bottom of `deep`
/// overflow, and every call above it: the fault is the call's, at the
/// call op of the frame that makes it, as when the leaf is called.
#[test]
fn inlined_calls_overflow_where_calls_do() {
    let mut t = Twin::new(INLINE8);
    let mut overflows = 0;
    for max_depth in 1..12 {
        t.set(
            Limits {
                max_depth,
                ..Limits::default()
            },
            None,
        );
        for n in 0..12 {
            let m = t.c.method("deep").expect("method");
            if t.jit.invoke(&mut 0, m, &[n]) == Err(Fault::StackOverflow) {
                overflows += 1;
            }
            t.check("deep", &[n]);
            t.check("kinds", &[n]);
            t.check("nullLoop", &[n]);
        }
    }
    // With the limit at d, deep(n) overflows for n + 2 > d: the leaf's
    // call at the bottom counts.
    let want: usize = (1..12usize)
        .map(|d| (0..12usize).filter(|&n| n + 2 > d).count())
        .sum();
    assert_eq!(overflows, want);
}
