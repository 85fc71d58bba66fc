//! `unet bench jive`: the U-Net/SLE paper's JIVE benchmarks (Figure 3,
//! microbenchmarks; Figure 4, macrobenchmarks), on JIVE and, in the same
//! run, in C (`gcc -O0`, `gcc -O2`) and on HotSpot (`java -Xint`, and the
//! default JIT).
//!
//! The programs are `bench/jive/Bench.java` (one class inside the JIVE
//! subset; JIVE and HotSpot run the same class file, compiled by `javac` at
//! run time), `bench/jive/BenchMain.java` (the HotSpot timing harness) and
//! `bench/jive/bench.c` (the same programs in C), embedded in the binary and
//! built in a temporary directory.
//!
//! Every benchmark is `int name(int n)`: `n` operations (micro) or `n`
//! executions (macro), returning a checksum. `n` is chosen per benchmark so
//! that one JIVE call takes about `--target-ms`; every runtime runs the same
//! `n` once for the checksum (all five must agree, or the run fails), then
//! sizes its own count the same way, so that one of its calls also takes
//! about `--target-ms` (a fast runtime runs more operations, which keeps
//! its time measurable; a slow one fewer, which keeps the run short), and
//! times `--reps` calls of that count; the median time of a call is kept. This is
//! done in `--rounds` rounds, each running every runtime once, and the figure
//! is the median over the rounds, so that a change in the machine's load
//! during the run does not fall on one runtime only.
//!
//! Figures are, as in the paper, time per operation (micro, ns) or per
//! execution (macro, µs) with the loop overhead subtracted: for each runtime,
//! `t(name)/n - t(null-loop)/n_null`, where `t(null-loop)/n_null` is that
//! runtime's time per iteration of an empty loop (itself reported as the
//! null-loop line, without subtraction). A difference below zero (timing
//! noise on a superscalar CPU, or work hoisted out of the loop by an
//! optimiser) is shown as 0.
//!
//! The host-to-applet call overhead is a host's call of a method that
//! returns its argument at once, through `Vm::invoke_prepared` (the direct
//! interface: checked once, entered with the arguments in registers on a
//! context that persists) and through `Vm::invoke` (arguments checked on
//! every call), each beside an indirect call of a Rust function that does
//! the same, timed in batches of calls interleaved (median of batches).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use ::jive::{test_natives, Class, Limits, MethodId, Vm};

use crate::jdk::Jdk;

mod watchdog;

const BENCH_JAVA: &str = include_str!("../../../../bench/jive/Bench.java");
const BENCH_MAIN_JAVA: &str = include_str!("../../../../bench/jive/BenchMain.java");
const BENCH_C: &str = include_str!("../../../../bench/jive/bench.c");
const NATIVES_JAVA: &str =
    include_str!("../../../../java/applet-sdk/src/main/java/unet/sle/Natives.java");

#[derive(clap::Args)]
pub struct Args {
    /// Timed calls per benchmark and runtime; the median is reported.
    #[arg(long, default_value_t = 9)]
    reps: usize,
    /// Size each benchmark so that one JIVE call takes about this long.
    #[arg(long, value_name = "MS", default_value_t = 40)]
    target_ms: u64,
    /// Untimed calls on the HotSpot JIT before timing (lets it compile).
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    /// Rounds: each runs every runtime once; figures are medians over the
    /// rounds (evens out changes in the machine's load during the run).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// A fast, rough run (1 round, 3 reps, 2 ms calls, 2 warm-up calls), for
    /// tests.
    #[arg(long)]
    quick: bool,
    /// One JSON object per line per benchmark instead of the table.
    #[arg(long)]
    json: bool,
    /// Run JIVE's compiler first (`Vm::compile`): every method within the
    /// compiler's bounds runs as machine code.
    #[arg(long)]
    compile: bool,
    /// Keep the temporary build directory and print its path.
    #[arg(long)]
    keep: bool,
    /// Instead of the paper's benchmarks: how promptly `Limits::max_time`
    /// (10 us) stops runaway invocations, interpreted and compiled (p50,
    /// p99, max over 10 000), and what it costs invocations that finish in
    /// time, each beside the same invocation without a time limit.
    #[arg(long)]
    watchdog: bool,
}

/// (name in the paper, method of Bench.java, micro?)
const BENCHES: [(&str, &str, bool); 13] = [
    ("null-loop", "nullLoop", true),
    ("null-call", "nullCall", true),
    ("field-read", "fieldRead", true),
    ("field-write", "fieldWrite", true),
    ("array-read", "arrayRead", true),
    ("array-write", "arrayWrite", true),
    ("math", "math", true),
    ("math-field", "mathField", true),
    ("math-array", "mathArray", true),
    ("qsort", "qsort", false),
    ("rand", "rand", false),
    ("fibonacci", "fibonacci", false),
    ("null native call", "nativeCall", true),
];

/// Columns of the table, in order: JIVE then the baselines.
const RUNTIMES: [&str; 5] = ["jive", "gcc_O0", "gcc_O2", "hotspot_xint", "hotspot_jit"];
const HEADERS: [&str; 5] = ["JIVE", "gcc -O0", "gcc -O2", "java -Xint", "java JIT"];

/// One runtime's raw result for one benchmark: the checksum of the count
/// every runtime runs (`n`), and the median time of a call of its own
/// count (`timed_n`).
#[derive(Clone, Copy, Debug)]
struct Raw {
    n: i32,
    checksum: i32,
    timed_n: i32,
    median_ns: f64,
}

pub fn run(a: Args) -> ExitCode {
    let r = if a.watchdog {
        watchdog::run(a.json)
    } else {
        bench(a)
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("unet bench jive: {e}");
            ExitCode::from(1)
        }
    }
}

fn progress(msg: &str) {
    eprintln!("[bench jive] {msg}");
}

/// Runs a command; its stdout, or an error with its stderr.
fn output(c: &mut Command, what: &str) -> Result<String, String> {
    let o = c.output().map_err(|e| format!("{what}: cannot run: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "{what} failed ({}):\n{}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

struct TempDir(PathBuf, bool);

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.1 {
            eprintln!("[bench jive] kept {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn bench(mut a: Args) -> Result<(), String> {
    if a.quick {
        a.rounds = 1;
        a.reps = 3;
        a.target_ms = 2;
        a.warmup = 2;
    }
    a.reps = a.reps.max(1);
    let jdk = Jdk::find()?;
    let tmp = TempDir(
        std::env::temp_dir().join(format!("unet-bench-jive-{}", std::process::id())),
        a.keep,
    );
    let dir = &tmp.0;
    let _ = std::fs::remove_dir_all(dir);
    let src = dir.join("src");
    let classes = dir.join("classes");
    write(&src.join("Bench.java"), BENCH_JAVA)?;
    write(&src.join("BenchMain.java"), BENCH_MAIN_JAVA)?;
    write(&src.join("unet/sle/Natives.java"), NATIVES_JAVA)?;
    write(&dir.join("bench.c"), BENCH_C)?;

    progress(&format!("javac ({}), gcc -O0, gcc -O2", jdk.home.display()));
    output(
        Command::new(jdk.bin("javac"))
            .arg("-nowarn")
            .arg("-sourcepath")
            .arg(&src)
            .arg("-d")
            .arg(&classes)
            .arg(src.join("Bench.java"))
            .arg(src.join("BenchMain.java")),
        "javac",
    )?;
    for opt in ["-O0", "-O2"] {
        output(
            Command::new("gcc")
                .arg(opt)
                .args(["-fwrapv", "-std=c11", "-o"])
                .arg(dir.join(format!("bench{opt}")))
                .arg(dir.join("bench.c")),
            &format!("gcc {opt}"),
        )?;
    }

    // JIVE: choose n per benchmark so that one call takes about the target.
    let bytes = std::fs::read(classes.join("Bench.class")).map_err(|e| e.to_string())?;
    let natives = test_natives::<()>();
    let loading = Instant::now();
    let class = Class::load(&bytes, &natives, &["test"])
        .map_err(|r| format!("JIVE rejected Bench.class: {r}"))?;
    let load_time = loading.elapsed();
    let limits = Limits {
        fuel: u64::MAX / 4,
        ..Limits::default()
    };
    let mut host = ();
    let mut vm = Vm::new(class.clone(), limits, &mut host)
        .map_err(|f| format!("JIVE Bench initialisation: {f}"))?;
    let mut compile_cost = None;
    if a.compile {
        let code = class
            .compile()
            .map_err(|e| format!("JIVE could not compile Bench: {e}"))?;
        let slowest = class
            .methods()
            .filter_map(|m| code.method_time(m))
            .max()
            .unwrap_or_default();
        let total = code.total_time();
        let n = vm
            .install(code)
            .map_err(|e| format!("JIVE could not install Bench's code: {e}"))?;
        progress(&format!("JIVE: {n} methods compiled"));
        compile_cost = Some(CompileCost {
            methods: n,
            total,
            slowest,
            load: load_time,
        });
    }
    let mut methods = Vec::new();
    for (_, method, _) in BENCHES {
        methods.push(
            class
                .method(method)
                .ok_or_else(|| format!("Bench has no method {method}"))?,
        );
    }
    let ret = class.method("ret").ok_or("Bench has no method ret")?;
    let target = Duration::from_millis(a.target_ms);
    let mut ns: Vec<i32> = Vec::new();
    progress("JIVE: sizing each benchmark");
    for (&m, (name, _, _)) in methods.iter().zip(BENCHES) {
        let mut n: i32 = 1;
        loop {
            let (_, t) = jive_call(&mut vm, &mut host, m, n, name)?;
            if t >= target || n >= 1 << 29 {
                break;
            }
            let grow = (target.as_secs_f64() / t.as_secs_f64().max(1e-7) * 1.2).clamp(2.0, 64.0);
            n = ((n as f64 * grow) as i64).min(1 << 29) as i32;
        }
        ns.push(n);
    }
    let mut plan: Vec<String> = Vec::new();
    for ((_, method, _), n) in BENCHES.iter().zip(&ns) {
        plan.push(method.to_string());
        plan.push(n.to_string());
    }
    let reps = a.reps.to_string();
    let target_ns = target.as_nanos().to_string();

    // Rounds: every runtime once per round, so that a change in the load of
    // the machine during the run falls on all of them alike; each figure is
    // the median over the rounds of the per-round medians.
    let rounds = a.rounds.max(1);
    let mut all: Vec<Vec<Vec<Raw>>> = vec![Vec::new(); RUNTIMES.len()];
    let mut host_calls = Vec::new();
    for round in 1..=rounds {
        let r = format!("round {round}/{rounds}: ");
        let mut jive: Vec<Raw> = Vec::new();
        for (i, (&m, (name, _, _))) in methods.iter().zip(BENCHES).enumerate() {
            progress(&format!("{r}JIVE {}/{}: {name}", i + 1, BENCHES.len()));
            let n = ns[i];
            let (checksum, _) = jive_call(&mut vm, &mut host, m, n, name)?;
            let mut times = Vec::with_capacity(a.reps);
            for _ in 0..a.reps {
                let (c, t) = jive_call(&mut vm, &mut host, m, n, name)?;
                if c != checksum {
                    return Err(format!("JIVE {name}: checksum {checksum} then {c}"));
                }
                times.push(t.as_nanos() as f64);
            }
            jive.push(Raw {
                n,
                checksum,
                timed_n: n,
                median_ns: median(&mut times),
            });
        }
        all[0].push(jive);
        progress(&format!("{r}JIVE: host-to-applet call overhead"));
        host_calls.push(host_call_ns(&mut vm, &mut host, ret, a.quick, a.reps)?);
        for (c, opt) in [(1, "-O0"), (2, "-O2")] {
            progress(&format!("{r}gcc {opt}: all benchmarks"));
            let out = output(
                Command::new(dir.join(format!("bench{opt}")))
                    .arg(&reps)
                    .arg(&target_ns)
                    .args(&plan),
                &format!("bench.c {opt}"),
            )?;
            all[c].push(parse_lines(&out, &format!("gcc {opt}"))?);
        }
        for (c, label, flags, warmup) in [
            (3, "java -Xint", &["-Xint"][..], 0usize),
            (4, "java (JIT)", &[][..], a.warmup),
        ] {
            progress(&format!("{r}{label}: all benchmarks"));
            let out = output(
                Command::new(jdk.bin("java"))
                    .args(flags)
                    .arg("-Xss64m")
                    .arg("-cp")
                    .arg(&classes)
                    .arg("BenchMain")
                    .arg(&reps)
                    .arg(warmup.to_string())
                    .arg(&target_ns)
                    .args(&plan),
                label,
            )?;
            all[c].push(parse_lines(&out, label)?);
        }
    }

    // Checksums must agree across all five runtimes and all rounds.
    for (i, (name, _, _)) in BENCHES.iter().enumerate() {
        let want = all[0][0][i];
        for (c, col) in all.iter().enumerate() {
            for got in col.iter().map(|round| round[i]) {
                if got.n != want.n || got.checksum != want.checksum {
                    return Err(format!(
                        "{name}: {} gave checksum {} for n={}, JIVE {} for n={}",
                        HEADERS[c], got.checksum, got.n, want.checksum, want.n
                    ));
                }
            }
        }
    }
    let columns: Vec<Vec<Raw>> = all
        .iter()
        .map(|col| {
            (0..BENCHES.len())
                .map(|i| {
                    // Per operation: each round sizes its own count.
                    let mut t: Vec<f64> = col
                        .iter()
                        .map(|round| round[i].median_ns / round[i].timed_n.max(1) as f64)
                        .collect();
                    Raw {
                        timed_n: 1,
                        median_ns: median(&mut t),
                        ..col[0][i]
                    }
                })
                .collect()
        })
        .collect();
    let host_call_ns = HostCall {
        checked: median(
            &mut host_calls
                .iter()
                .map(|h: &HostCall| h.checked)
                .collect::<Vec<_>>(),
        ),
        prepared: median(&mut host_calls.iter().map(|h| h.prepared).collect::<Vec<_>>()),
        floor: median(&mut host_calls.iter().map(|h| h.floor).collect::<Vec<_>>()),
    };

    let mut report = Report::new(&columns, host_call_ns);
    report.compile = compile_cost;
    if a.json {
        report.print_json();
    } else {
        report.print_table(&a);
    }
    drop(tmp);
    Ok(())
}

/// One timed JIVE call of `Bench.name(n)`: (checksum, time).
fn jive_call(
    vm: &mut Vm<()>,
    host: &mut (),
    m: MethodId,
    n: i32,
    name: &str,
) -> Result<(i32, Duration), String> {
    let t0 = Instant::now();
    let r = vm
        .invoke(host, m, &[n])
        .map_err(|f| format!("JIVE {name}({n}): fault: {f}"))?;
    Ok((r.unwrap_or(0), t0.elapsed()))
}

/// A host's call of `ret` (which returns its argument at once), in ns:
/// through `Vm::invoke` (every argument checked per call), through
/// `Vm::invoke_prepared` (checked once by `Vm::prepare`: the direct
/// interface a host that calls on every packet uses), and the baseline,
/// an indirect call of a Rust `extern "C"` function that returns its
/// argument. Medians over batches of calls, the three interleaved.
#[derive(Clone, Copy, Default)]
struct HostCall {
    checked: f64,
    prepared: f64,
    floor: f64,
}

/// The host-call figures (see [`HostCall`]).
fn host_call_ns(
    vm: &mut Vm<()>,
    host: &mut (),
    ret: MethodId,
    quick: bool,
    reps: usize,
) -> Result<HostCall, String> {
    extern "C" fn floor(x: i32) -> i64 {
        i64::from(x)
    }
    let batch: i32 = if quick { 10_000 } else { 200_000 };
    let want = (0..batch).fold(0i32, |acc, i| acc.wrapping_add(i));
    let p = vm.prepare::<1>(ret).map_err(|f| format!("JIVE ret: {f}"))?;
    let f: extern "C" fn(i32) -> i64 = std::hint::black_box(floor);
    let (mut checked, mut prepared, mut base) = (Vec::new(), Vec::new(), Vec::new());
    let per_call = |t: Duration| t.as_nanos() as f64 / batch as f64;
    // A fault ends the loop (kept out of its body, which is the call and
    // an add, as a host's would be).
    let mut fault = None;
    for _ in 0..reps.max(5) {
        let t0 = Instant::now();
        let mut s = 0i32;
        for i in 0..batch {
            match vm.invoke(host, ret, &[i]) {
                Ok(r) => s = s.wrapping_add(r.unwrap_or(0)),
                Err(f) => {
                    fault = Some(f);
                    break;
                }
            }
        }
        checked.push(per_call(t0.elapsed()));
        let t0 = Instant::now();
        for i in 0..batch {
            match vm.invoke_prepared(host, p, [i]) {
                Ok(r) => s = s.wrapping_add(r.unwrap_or(0)),
                Err(f) => {
                    fault = Some(f);
                    break;
                }
            }
        }
        prepared.push(per_call(t0.elapsed()));
        if let Some(f) = fault.take() {
            return Err(format!("JIVE ret: {f}"));
        }
        let t0 = Instant::now();
        for i in 0..batch {
            s = s.wrapping_add(f(i) as i32);
        }
        base.push(per_call(t0.elapsed()));
        let want3 = want.wrapping_mul(3);
        if std::hint::black_box(s) != want3 {
            return Err(format!("JIVE ret: sum {s}, want {want3}"));
        }
    }
    Ok(HostCall {
        checked: median(&mut checked),
        prepared: median(&mut prepared),
        floor: median(&mut base),
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Parses `NAME N CHECKSUM TIMED_N MEDIAN_NS` lines, one per benchmark in
/// order.
fn parse_lines(out: &str, who: &str) -> Result<Vec<Raw>, String> {
    let mut v = Vec::new();
    for ((_, method, _), line) in BENCHES.iter().zip(out.lines()) {
        let w: Vec<&str> = line.split_whitespace().collect();
        let bad = || format!("{who}: unexpected line `{line}`");
        if w.len() != 5 || w[0] != *method {
            return Err(bad());
        }
        v.push(Raw {
            n: w[1].parse().map_err(|_| bad())?,
            checksum: w[2].parse().map_err(|_| bad())?,
            timed_n: w[3].parse().map_err(|_| bad())?,
            median_ns: w[4].parse().map_err(|_| bad())?,
        });
    }
    if v.len() != BENCHES.len() {
        return Err(format!(
            "{who}: {} results, want {}:\n{out}",
            v.len(),
            BENCHES.len()
        ));
    }
    Ok(v)
}

struct Row {
    name: &'static str,
    unit: &'static str,
    n: i32,
    checksum: i32,
    /// per runtime, in `unit`
    values: [f64; 5],
}

struct Report {
    rows: Vec<Row>,
    host_call_ns: HostCall,
    compile: Option<CompileCost>,
}

/// What compiling the benchmark class cost (`--compile`): the whole class
/// and its slowest method, beside loading and verifying it.
struct CompileCost {
    methods: usize,
    total: Duration,
    slowest: Duration,
    load: Duration,
}

/// Figures below this (in their unit: 0.01 ns per operation, 0.01 µs per
/// execution) are beyond the resolution of the method (a loop removed by an
/// optimiser, or a cost hidden in the loop overhead by a superscalar CPU):
/// shown as `~0`, and no ratio is formed with them.
const RESOLUTION: f64 = 0.01;

fn ratio(a: f64, b: f64) -> Option<f64> {
    (a >= RESOLUTION && b >= RESOLUTION && a.is_finite() && b.is_finite()).then_some(a / b)
}

impl Report {
    fn new(columns: &[Vec<Raw>], host_call_ns: HostCall) -> Report {
        let mut rows = Vec::new();
        for (i, (name, _, micro)) in BENCHES.iter().enumerate() {
            let mut values = [0.0; 5];
            for (c, col) in columns.iter().enumerate() {
                let null = col[0].median_ns / col[0].timed_n.max(1) as f64;
                let per = col[i].median_ns / col[i].timed_n.max(1) as f64;
                let net = if i == 0 { per } else { (per - null).max(0.0) };
                values[c] = if *micro { net } else { net / 1000.0 };
            }
            rows.push(Row {
                name,
                unit: if *micro { "ns/op" } else { "us/run" },
                n: columns[0][i].n,
                checksum: columns[0][i].checksum,
                values,
            });
        }
        Report {
            rows,
            host_call_ns,
            compile: None,
        }
    }

    /// JIVE / java -Xint over the twelve benchmarks of Figures 3 and 4 (those
    /// of them where both figures are above the resolution), and how many.
    fn geomean_vs_xint(&self) -> (Option<f64>, usize) {
        self.geomean_vs(3)
    }

    /// The geometric mean of JIVE's figure over runtime `c`'s, over the
    /// paper's 12 benchmarks where both are measurable, and how many.
    fn geomean_vs(&self, c: usize) -> (Option<f64>, usize) {
        let rs: Vec<f64> = self.rows[..12]
            .iter()
            .filter_map(|r| ratio(r.values[0], r.values[c]))
            .filter(|r| *r > 0.0)
            .collect();
        let n = rs.len();
        let g = (n > 0).then(|| (rs.iter().map(|r| r.ln()).sum::<f64>() / n as f64).exp());
        (g, n)
    }

    fn print_json(&self) {
        for r in &self.rows {
            let mut o = serde_json::json!({
                "bench": "jive",
                "name": r.name,
                "unit": r.unit,
                "n": r.n,
                "checksum": r.checksum,
            });
            for (k, v) in RUNTIMES.iter().zip(r.values) {
                o[*k] = serde_json::json!(v);
            }
            for (k, c) in [
                ("jive_over_hotspot_xint", 3),
                ("jive_over_gcc_O0", 1),
                ("jive_over_gcc_O2", 2),
                ("jive_over_hotspot_jit", 4),
            ] {
                o[k] = serde_json::json!(ratio(r.values[0], r.values[c]));
            }
            o["ratio"] = o["jive_over_hotspot_xint"].clone();
            println!("{o}");
        }
        println!(
            "{}",
            serde_json::json!({
                "bench": "jive",
                "name": "geomean jive/xint",
                "unit": "ratio",
                "jive": self.geomean_vs_xint().0,
                "of": self.geomean_vs_xint().1,
                "target": 0.7,
            })
        );
        let (g, n) = self.geomean_vs(4);
        println!(
            "{}",
            serde_json::json!({
                "bench": "jive",
                "name": "geomean jive/jit",
                "unit": "ratio",
                "jive": g,
                "of": n,
                "target": 1.5,
            })
        );
        if let Some(c) = &self.compile {
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            println!(
                "{}",
                serde_json::json!({
                    "bench": "jive",
                    "name": "compile",
                    "unit": "ms",
                    "jive": ms(c.total),
                    "methods": c.methods,
                    "slowest_method_ms": ms(c.slowest),
                    "baseline": "load and verify the class",
                    "baseline_ms": ms(c.load),
                    "ratio": ms(c.total) / ms(c.load).max(1e-6),
                    "target": 50.0,
                })
            );
        }
        let h = self.host_call_ns;
        for (name, v, target) in [
            ("host-to-applet call", h.prepared, Some(5.0)),
            ("host-to-applet call, checked", h.checked, None),
        ] {
            println!(
                "{}",
                serde_json::json!({
                    "bench": "jive",
                    "name": name,
                    "unit": "ns/call",
                    "jive": v,
                    "baseline": "indirect call of a Rust extern \"C\" fn",
                    "baseline_ns": h.floor,
                    "ratio": v / h.floor,
                    "target": target,
                })
            );
        }
    }

    fn print_table(&self, a: &Args) {
        let fmt = |v: f64| -> String {
            if v < RESOLUTION {
                "~0".to_string()
            } else if v >= 100.0 {
                format!("{v:.0}")
            } else if v >= 1.0 {
                format!("{v:.2}")
            } else {
                format!("{v:.3}")
            }
        };
        let fmt_ratio = |r: Option<f64>| match r {
            Some(r) if r >= 100.0 => format!("{r:.0}"),
            Some(r) => format!("{r:.2}"),
            None => "-".to_string(),
        };
        let mut s = String::new();
        let _ = writeln!(
            s,
            "JIVE benchmarks (U-Net/SLE Figures 3 and 4): medians of {} calls, over {} round{}; loop overhead subtracted; JIVE {}",
            a.reps,
            a.rounds,
            if a.rounds == 1 { "" } else { "s" },
            if a.compile {
                "compiled (--compile)"
            } else {
                "interpreted"
            }
        );
        let _ = writeln!(
            s,
            "{:<17} {:>7} {:>9} {:>9} {:>9} {:>10} {:>9} | {:>8} {:>8} {:>8} {:>8}",
            "benchmark",
            "unit",
            HEADERS[0],
            HEADERS[1],
            HEADERS[2],
            HEADERS[3],
            HEADERS[4],
            "/-Xint",
            "/-O0",
            "/-O2",
            "/JIT"
        );
        for (i, r) in self.rows.iter().enumerate() {
            if i == 9 || i == 12 {
                let _ = writeln!(s);
            }
            let v = r.values;
            let mark = match ratio(v[0], v[3]) {
                Some(x) if x > 1.2 => " *",
                _ => "",
            };
            let _ = writeln!(
                s,
                "{:<17} {:>7} {:>9} {:>9} {:>9} {:>10} {:>9} | {:>8} {:>8} {:>8} {:>8}{mark}",
                r.name,
                r.unit,
                fmt(v[0]),
                fmt(v[1]),
                fmt(v[2]),
                fmt(v[3]),
                fmt(v[4]),
                fmt_ratio(ratio(v[0], v[3])),
                fmt_ratio(ratio(v[0], v[1])),
                fmt_ratio(ratio(v[0], v[2])),
                fmt_ratio(ratio(v[0], v[4])),
            );
        }
        let _ = writeln!(s);
        let (g, n) = self.geomean_vs_xint();
        let _ = writeln!(
            s,
            "geometric mean of JIVE / java -Xint over {n} of the 12 benchmarks: {} (target <= 0.7; none above 1.2, marked *)",
            fmt_ratio(g)
        );
        let (g, n) = self.geomean_vs(4);
        let _ = writeln!(
            s,
            "geometric mean of JIVE / java JIT over {n} of the 12 benchmarks: {} (target for compiled JIVE <= 1.5, none above 3; the JIT removes some loops whole, ~0)",
            fmt_ratio(g)
        );
        if let Some(c) = &self.compile {
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            let _ = writeln!(
                s,
                "compiling the class: {} methods in {:.1} ms (target < 50), the slowest {:.2} ms; loading and verifying it: {:.1} ms ({:.1}x)",
                c.methods,
                ms(c.total),
                ms(c.slowest),
                ms(c.load),
                ms(c.total) / ms(c.load).max(1e-6)
            );
        }
        let h = self.host_call_ns;
        let _ = writeln!(
            s,
            "host-to-applet call of a method that returns at once: {:.1} ns through Vm::invoke_prepared (target <= 5), {:.1} ns through Vm::invoke (arguments checked per call); baseline, an indirect call of a Rust function: {:.1} ns ({:.1}x, {:.1}x)",
            h.prepared,
            h.checked,
            h.floor,
            h.prepared / h.floor,
            h.checked / h.floor
        );
        print!("{s}");
    }
}
