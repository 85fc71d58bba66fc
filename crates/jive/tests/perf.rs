//! Quick timing of the benchmark kernels (not a harness: run with
//! `cargo test --release -p jive --test perf -- --ignored --nocapture`).
use std::time::Instant;

use jive::{test_natives, Class, Limits, Vm};

const BENCH: &[u8] = include_bytes!("data/bench25.class");

#[test]
#[ignore]
fn timings() {
    let c = Class::<()>::load(BENCH, &test_natives(), &["test"]).unwrap();
    let limits = Limits {
        fuel: u64::MAX / 2,
        ..Limits::default()
    };
    let mut vm = Vm::new(c.clone(), limits, &mut ()).unwrap();
    let n = 2_000_000;
    let mut t = |name: &str, m: &str, arg: i32, reps: i32, per: f64| {
        let id = c.method(m).unwrap();
        let mut best = f64::MAX;
        let mut r = None;
        for _ in 0..5 {
            let t0 = Instant::now();
            for _ in 0..reps {
                r = vm.invoke(&mut (), id, &[arg]).unwrap();
            }
            best = best.min(t0.elapsed().as_nanos() as f64);
        }
        println!("{name:<12} {:10.2} ns/iter (r={r:?})", best / per);
    };
    t("nullLoop", "nullLoop", n * 5, 1, (n * 5) as f64);
    t("nullCall", "nullCall", n, 1, n as f64);
    t("fieldRead", "fieldRead", n, 1, n as f64);
    t("fieldWrite", "fieldWrite", n, 1, n as f64);
    t("arrayRead", "arrayRead", n, 1, n as f64);
    t("arrayWrite", "arrayWrite", n, 1, n as f64);
    t("math", "math", n, 1, n as f64);
    t("mathField", "mathField", n, 1, n as f64);
    t("mathArray", "mathArray", n, 1, n as f64);
    t("nativeNop", "nativeNop", n, 1, n as f64);
    t("qsort1000", "sortTest", 1000, 20, 20.0);
    t("rand", "rand", n, 1, n as f64);
    t("fib20", "fib", 20, 20, 20.0);
    t("invoke", "empty", 1, n, n as f64);
}
