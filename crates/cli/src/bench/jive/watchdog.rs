//! `unet bench jive --watchdog`: how promptly [`Limits::max_time`] stops a
//! runaway invocation, and what the limit costs one that finishes in time.
//!
//! The class is assembled here (no `javac` needed): runaway methods (an
//! endless loop; a chain of 32 calls with an endless loop at the bottom;
//! a recursion 100 deep with an endless loop at the bottom; an endless loop
//! calling a native) and methods that finish (a null method; a loop of
//! about 2 µs). Each runs interpreted and compiled.
//!
//! A runaway row is 10 000 invocations under a 10 µs limit, each timed
//! from just before the host's call to its return: p50, p99 and max. Its
//! baseline is the same method without a time limit, stopped by fuel
//! after the median fuel the limited runs used (the same work, no clock).
//! A finishing row is the median time of a call over batches, with the
//! limit and without it (the baseline).

use std::time::{Duration, Instant};

use ::jive::{test_natives, Class, Fault, Limits, MethodId, Vm, NATIVES_CLASS};

/// The time limit under test.
const BUDGET: Duration = Duration::from_micros(10);
/// Runaway invocations per row.
const RUNS: usize = 10_000;
/// Frames of the call chain.
const CHAIN: usize = 32;
/// Depth of the recursion.
const DEPTH: i32 = 100;

/// A minimal class-file writer for the methods below.
struct Asm {
    cp: Vec<u8>,
    count: u16,
    methods: Vec<u8>,
    nmethods: u16,
}

impl Asm {
    fn new() -> Asm {
        Asm {
            cp: Vec::new(),
            count: 1,
            methods: Vec::new(),
            nmethods: 0,
        }
    }
    fn entry(&mut self, b: &[u8]) -> u16 {
        self.cp.extend_from_slice(b);
        self.count += 1;
        self.count - 1
    }
    fn utf8(&mut self, s: &str) -> u16 {
        let mut b = vec![1];
        b.extend_from_slice(&(s.len() as u16).to_be_bytes());
        b.extend_from_slice(s.as_bytes());
        self.entry(&b)
    }
    fn class(&mut self, n: &str) -> u16 {
        let u = self.utf8(n);
        let [h, l] = u.to_be_bytes();
        self.entry(&[7, h, l])
    }
    fn mref(&mut self, c: &str, n: &str, d: &str) -> [u8; 2] {
        let c = self.class(c).to_be_bytes();
        let (n, d) = (self.utf8(n).to_be_bytes(), self.utf8(d).to_be_bytes());
        let nat = self.entry(&[12, n[0], n[1], d[0], d[1]]).to_be_bytes();
        self.entry(&[10, c[0], c[1], nat[0], nat[1]]).to_be_bytes()
    }
    fn method(&mut self, name: &str, desc: &str, stack: u16, locals: u16, code: &[u8]) {
        let (n, d, c) = (self.utf8(name), self.utf8(desc), self.utf8("Code"));
        let m = &mut self.methods;
        for v in [0x0009u16, n, d, 1, c] {
            m.extend_from_slice(&v.to_be_bytes());
        }
        m.extend_from_slice(&(12 + code.len() as u32).to_be_bytes());
        m.extend_from_slice(&stack.to_be_bytes());
        m.extend_from_slice(&locals.to_be_bytes());
        m.extend_from_slice(&(code.len() as u32).to_be_bytes());
        m.extend_from_slice(code);
        m.extend_from_slice(&[0, 0, 0, 0]);
        self.nmethods += 1;
    }
    fn build(mut self, name: &str) -> Vec<u8> {
        let this = self.class(name).to_be_bytes();
        let sup = self.class("java/lang/Object").to_be_bytes();
        let mut b = vec![0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 52];
        b.extend_from_slice(&self.count.to_be_bytes());
        b.extend_from_slice(&self.cp);
        b.extend_from_slice(&[0, 0x21, this[0], this[1], sup[0], sup[1], 0, 0, 0, 0]);
        b.extend_from_slice(&self.nmethods.to_be_bytes());
        b.extend_from_slice(&self.methods);
        b.extend_from_slice(&[0, 0]);
        b
    }
}

const ICONST_0: u8 = 3;
const ICONST_1: u8 = 4;
const ILOAD_0: u8 = 26;
const ILOAD_1: u8 = 27;
const ISTORE_0: u8 = 59;
const ISTORE_1: u8 = 60;
const IADD: u8 = 96;
const ISUB: u8 = 100;
const IINC: u8 = 132;
const IFEQ: u8 = 153;
const GOTO: u8 = 167;
const IRETURN: u8 = 172;
const RETURN: u8 = 177;
const INVOKESTATIC: u8 = 184;

/// The benchmark class `W`.
fn class_bytes() -> Vec<u8> {
    let mut a = Asm::new();
    // spin(): i = 0; for (;;) i++;
    let spin = [ICONST_0, ISTORE_0, IINC, 0, 1, GOTO, 0xff, 0xfd];
    a.method("spin", "()V", 1, 1, &spin);
    // native(): for (;;) nop();
    let nop = a.mref(NATIVES_CLASS, "nop", "()V");
    a.method(
        "native",
        "()V",
        0,
        0,
        &[INVOKESTATIC, nop[0], nop[1], GOTO, 0xff, 0xfd],
    );
    // chain0() calls chain1() ... chain{CHAIN - 1}() spins.
    for i in 0..CHAIN {
        let name = format!("chain{i}");
        if i + 1 == CHAIN {
            a.method(&name, "()V", 1, 1, &spin);
        } else {
            let r = a.mref("W", &format!("chain{}", i + 1), "()V");
            a.method(&name, "()V", 0, 0, &[INVOKESTATIC, r[0], r[1], RETURN]);
        }
    }
    // rec(n): if (n != 0) rec(n - 1); else for (;;) n++;
    let r = a.mref("W", "rec", "(I)V");
    #[rustfmt::skip]
    let rec = [
        ILOAD_0, IFEQ, 0, 10,
        ILOAD_0, ICONST_1, ISUB, INVOKESTATIC, r[0], r[1], RETURN,
        IINC, 0, 1, GOTO, 0xff, 0xfd,
    ];
    a.method("rec", "(I)V", 2, 1, &rec);
    a.method("nothing", "()V", 0, 0, &[RETURN]);
    // work(n): s = 0; while (n != 0) { s += n; n--; } return s;
    #[rustfmt::skip]
    let work = [
        ICONST_0, ISTORE_1,
        ILOAD_0, IFEQ, 0, 13,
        ILOAD_1, ILOAD_0, IADD, ISTORE_1,
        IINC, 0, 0xff,
        GOTO, 0xff, 0xf5,
        ILOAD_1, IRETURN,
    ];
    a.method("work", "(I)I", 2, 2, &work);
    a.build("W")
}

struct Bench {
    class: Class<()>,
    vm: Vm<()>,
}

impl Bench {
    fn new(compiled: bool) -> Result<Bench, String> {
        let natives = test_natives::<()>();
        let class = Class::load(&class_bytes(), &natives, &["test"])
            .map_err(|e| format!("class W: {e}"))?;
        let mut vm = Vm::new(class.clone(), Limits::default(), &mut ())
            .map_err(|e| format!("class W: {e}"))?;
        if compiled {
            vm.compile().map_err(|e| format!("compile: {e}"))?;
        }
        Ok(Bench { class, vm })
    }
    fn method(&self, n: &str) -> Result<MethodId, String> {
        self.class.method(n).ok_or(format!("no method {n}"))
    }
    fn limit(&mut self, fuel: u64, max_time: Option<Duration>) {
        self.vm.set_limits(Limits {
            fuel,
            max_time,
            ..Limits::default()
        });
    }
}

/// One row of the report.
struct Row {
    name: String,
    mode: &'static str,
    /// Runaway: p50, p99, max of the limited runs (µs); finishing: the
    /// median call with the limit (ns, p50 only).
    limited: [f64; 3],
    /// The baseline's median (µs for a runaway, ns for a finishing row).
    baseline: f64,
    runaway: bool,
}

fn pct(v: &[f64], q: f64) -> f64 {
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v[i]
}

/// Time `RUNS` invocations of `m(args)` under the limit, and the same
/// method stopped by the median fuel they used.
fn runaway(b: &mut Bench, m: &str, args: &[i32]) -> Result<([f64; 3], f64), String> {
    let mid = b.method(m)?;
    // Fuel that never runs out first (and counts from zero: see
    // `Vm::last_fuel_used`).
    b.limit(i64::MAX as u64, Some(BUDGET));
    let mut us = Vec::with_capacity(RUNS);
    let mut fuel = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        let r = b.vm.invoke(&mut (), mid, args);
        us.push(t.elapsed().as_nanos() as f64 / 1e3);
        if r != Err(Fault::Timeout) {
            return Err(format!("{m}: {r:?}, expected a time-out"));
        }
        fuel.push(b.vm.last_fuel_used());
    }
    us.sort_by(f64::total_cmp);
    fuel.sort_unstable();
    let f = fuel[fuel.len() / 2];
    b.limit(f, None);
    let mut base = Vec::with_capacity(RUNS / 10);
    for _ in 0..RUNS / 10 {
        let t = Instant::now();
        let r = b.vm.invoke(&mut (), mid, args);
        base.push(t.elapsed().as_nanos() as f64 / 1e3);
        if r != Err(Fault::OutOfFuel) {
            return Err(format!("{m} with fuel {f}: {r:?}, expected out of fuel"));
        }
    }
    base.sort_by(f64::total_cmp);
    Ok((
        [pct(&us, 0.5), pct(&us, 0.99), us[us.len() - 1]],
        pct(&base, 0.5),
    ))
}

/// Median ns per call of `m(arg)` over batches, with the limit and
/// without it (alternating, so that a change of load falls on both).
fn finishing(b: &mut Bench, m: &str, arg: Option<i32>, batch: usize) -> Result<(f64, f64), String> {
    let mid = b.method(m)?;
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for round in 0..22 {
        for limited in [true, false] {
            b.limit(Limits::default().fuel, limited.then_some(BUDGET));
            let t = Instant::now();
            match arg {
                None => {
                    let p = b.vm.prepare::<0>(mid).map_err(|e| e.to_string())?;
                    for _ in 0..batch {
                        b.vm.invoke_prepared(&mut (), p, [])
                            .map_err(|e| format!("{m}: {e}"))?;
                    }
                }
                Some(n) => {
                    let p = b.vm.prepare::<1>(mid).map_err(|e| e.to_string())?;
                    for _ in 0..batch {
                        b.vm.invoke_prepared(&mut (), p, [std::hint::black_box(n)])
                            .map_err(|e| format!("{m}: {e}"))?;
                    }
                }
            }
            let ns = t.elapsed().as_nanos() as f64 / batch as f64;
            // The first two rounds warm up.
            if round >= 2 {
                if limited { &mut with } else { &mut without }.push(ns);
            }
        }
    }
    with.sort_by(f64::total_cmp);
    without.sort_by(f64::total_cmp);
    Ok((pct(&with, 0.5), pct(&without, 0.5)))
}

/// The `n` for which `work(n)` takes about 2 µs.
fn two_us(b: &mut Bench) -> Result<i32, String> {
    let mid = b.method("work")?;
    b.limit(Limits::default().fuel, None);
    let mut n = 64i32;
    loop {
        let t = Instant::now();
        for _ in 0..100 {
            b.vm.invoke(&mut (), mid, &[n]).map_err(|e| e.to_string())?;
        }
        let ns = t.elapsed().as_nanos() as f64 / 100.0;
        if ns >= 2000.0 || n > 1 << 24 {
            return Ok(((n as f64) * 2000.0 / ns).max(1.0) as i32);
        }
        n *= 2;
    }
}

fn measure() -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (mode, compiled) in [("interpreted", false), ("compiled", true)] {
        let mut b = Bench::new(compiled)?;
        let rec_note = if compiled && b.vm.is_compiled(b.method("rec")?) {
            ""
        } else if compiled {
            " (runs interpreted)"
        } else {
            ""
        };
        let cases: [(String, &str, Vec<i32>); 4] = [
            ("endless loop".into(), "spin", vec![]),
            (
                format!("{CHAIN} calls deep, loop at the bottom"),
                "chain0",
                vec![],
            ),
            (
                format!("recursion {DEPTH} deep, loop at the bottom{rec_note}"),
                "rec",
                vec![DEPTH],
            ),
            ("endless loop calling a native".into(), "native", vec![]),
        ];
        for (name, m, args) in cases {
            eprintln!("[bench jive] watchdog: {name}, {mode}");
            let (limited, baseline) = runaway(&mut b, m, &args)?;
            rows.push(Row {
                name,
                mode,
                limited,
                baseline,
                runaway: true,
            });
        }
        let (with, without) = finishing(&mut b, "nothing", None, 200_000)?;
        rows.push(Row {
            name: "null method".into(),
            mode,
            limited: [with, 0.0, 0.0],
            baseline: without,
            runaway: false,
        });
        let n = two_us(&mut b)?;
        let (with, without) = finishing(&mut b, "work", Some(n), 200)?;
        rows.push(Row {
            name: format!("loop of about 2 us (n = {n})"),
            mode,
            limited: [with, 0.0, 0.0],
            baseline: without,
            runaway: false,
        });
    }
    Ok(rows)
}

/// Run the measurement and print it (a table, or one JSON object a row).
pub fn run(json: bool) -> Result<(), String> {
    let rows = measure()?;
    if json {
        for r in &rows {
            let head = format!(
                "{{\"bench\":\"jive-watchdog\",\"case\":\"{}\",\"mode\":\"{}\"",
                r.name, r.mode
            );
            if r.runaway {
                println!(
                    "{head},\"budget_us\":{},\"runs\":{RUNS},\"p50_us\":{:.3},\"p99_us\":{:.3},\
                     \"max_us\":{:.3},\"baseline_fuel_stop_p50_us\":{:.3},\"ratio_p50\":{:.3}}}",
                    BUDGET.as_micros(),
                    r.limited[0],
                    r.limited[1],
                    r.limited[2],
                    r.baseline,
                    r.limited[0] / r.baseline
                );
            } else {
                println!(
                    "{head},\"with_limit_ns\":{:.3},\"baseline_no_limit_ns\":{:.3},\"ratio\":{:.4}}}",
                    r.limited[0],
                    r.baseline,
                    r.limited[0] / r.baseline
                );
            }
        }
        return Ok(());
    }
    println!(
        "JIVE watchdog: Limits::max_time = {} us; runaway rows over {RUNS} invocations, \
         from the call to its return",
        BUDGET.as_micros()
    );
    println!(
        "{:<48} {:<12} {:>9} {:>9} {:>9} {:>12} {:>7}",
        "runaway (stopped by the limit)",
        "mode",
        "p50 us",
        "p99 us",
        "max us",
        "fuel-stop us",
        "ratio"
    );
    for r in rows.iter().filter(|r| r.runaway) {
        println!(
            "{:<48} {:<12} {:>9.2} {:>9.2} {:>9.2} {:>12.2} {:>7.2}",
            r.name,
            r.mode,
            r.limited[0],
            r.limited[1],
            r.limited[2],
            r.baseline,
            r.limited[0] / r.baseline
        );
    }
    println!(
        "{:<48} {:<12} {:>9} {:>9} {:>7}",
        "finishing in time (median call)", "mode", "limit ns", "none ns", "ratio"
    );
    for r in rows.iter().filter(|r| !r.runaway) {
        println!(
            "{:<48} {:<12} {:>9.2} {:>9.2} {:>7.3}",
            r.name,
            r.mode,
            r.limited[0],
            r.baseline,
            r.limited[0] / r.baseline
        );
    }
    println!(
        "(the fuel-stop baseline runs the same method without a time limit, stopped by \
         the median fuel the limited runs used)"
    );
    Ok(())
}
