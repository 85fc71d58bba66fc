//! Run one static method of a class file: `jrun Class.class method [int args...]`,
//! timing repeated invocations (a quick check, not a benchmark harness).
//! `JRUN_JIT=1` compiles the class first, `JRUN_DUMP=1` prints the
//! method's decoded ops, `JRUN_REPS=n` repeats the call,
//! `JRUN_PREPARED=1` through `Vm::invoke_prepared` (one argument).
use std::time::Instant;

use jive::{test_natives, Class, Limits, Vm};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 3 {
        eprintln!("usage: jrun Class.class method [int args...]");
        std::process::exit(2);
    }
    let bytes = std::fs::read(&a[1]).expect("read class file");
    let natives = test_natives::<()>();
    let class = match Class::load(&bytes, &natives, &["test"]) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let args: Vec<i32> = a[3..].iter().map(|s| s.parse().expect("int arg")).collect();
    let mut host = ();
    let limits = Limits {
        fuel: u64::MAX / 4,
        ..Limits::default()
    };
    let mut vm = Vm::new(class.clone(), limits, &mut host).expect("construct");
    if std::env::var_os("JRUN_JIT").is_some() {
        let n = vm.compile().expect("compile");
        eprintln!("{n} methods compiled");
    }
    let m = class.method(&a[2]).expect("no such method");
    if std::env::var_os("JRUN_DUMP").is_some() {
        for (i, op) in class.decoded(m).ops.iter().enumerate() {
            eprintln!("{i:4} {op:?}");
        }
    }
    let t = Instant::now();
    let reps: u32 = std::env::var("JRUN_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    if std::env::var_os("JRUN_PREPARED").is_some() && args.len() == 1 {
        let p = vm.prepare::<1>(m).expect("prepare");
        let mut s = 0i32;
        for i in 1..reps {
            if let Ok(Some(r)) = vm.invoke_prepared(&mut host, p, [args[0] ^ (i as i32 & 1)]) {
                s = s.wrapping_add(r);
            }
        }
        std::hint::black_box(s);
    } else {
        for _ in 1..reps {
            let _ = vm.invoke(&mut host, m, &args);
        }
    }
    let r = vm.invoke(&mut host, m, &args);
    let dt = t.elapsed();
    match &r {
        Ok(v) => println!("{v:?}"),
        Err(e) => println!("fault: {e} ({:?})", vm.last_fault_site()),
    }
    println!(
        "time {:?}, fuel {}, heap {}",
        dt,
        vm.last_fuel_used(),
        vm.heap_used()
    );
}
