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
//! executions (macro), returning a checksum. Every microbenchmark's loop
//! reads a volatile field that is always 0 at each iteration (and the null
//! loop does too, so that it is part of the loop overhead): no optimiser
//! (HotSpot's JIT, gcc -O2) may delete the loop or move the measured
//! operation out of it, so that every runtime performs the same work, `n`
//! operations, and HotSpot's JIT is measurable on every benchmark. The
//! JIT is asked not to inline the callee of null-call (and the null
//! native), whose call is the operation measured; JIVE does not inline.
//! `n` is chosen per benchmark so that one call of interpreted JIVE takes
//! about `--target-ms`; every runtime runs the same `n` once for the
//! checksum (all must agree, or the run fails), then sizes its own count
//! the same way, so that one of its calls also takes about `--target-ms`
//! (a fast runtime runs more operations, which keeps its time measurable; a
//! slow one fewer, which keeps the run short), and times `--reps` calls of
//! that count; the median time of a call is kept. This is done in
//! `--rounds` rounds, each running every runtime once, and the figure is
//! the median over the rounds, so that a change in the machine's load
//! during the run does not fall on one runtime only.
//!
//! With `--compile` (or `--svg`) JIVE runs twice, compiled and
//! interpreted, on two virtual machines: compiled JIVE is compared with
//! HotSpot's JIT, interpreted JIVE with `java -Xint`, in the same run.
//! `--svg DIR` draws Figures 3 and 4 as the paper does (each runtime's
//! time over gcc -O0's, per benchmark), the paper's own ratios beside ours
//! where its tables give both figures (`jive/figures.rs`).
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

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use ::jive::{test_natives, Class, Limits, MethodId, Vm};

use crate::jdk::Jdk;

mod figures;
mod report;
mod watchdog;

use report::{CompileCost, HostCall, Report};

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
    #[arg(long, value_name = "MS", default_value_t = 30)]
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
    /// compiler's bounds runs as machine code. Interpreted JIVE runs too,
    /// on a virtual machine of its own, for the comparison with -Xint.
    #[arg(long)]
    compile: bool,
    /// Write the paper's Figures 3 and 4 (time over gcc -O0 per benchmark,
    /// JIVE interpreted and compiled, HotSpot -Xint and JIT, the paper's
    /// own ratios beside them) as figure3.svg and figure4.svg here; runs
    /// JIVE both ways, as `--compile` does. `--out DIR` is the same.
    #[arg(long, visible_alias = "out", value_name = "DIR")]
    svg: Option<PathBuf>,
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

/// A runtime: a column of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Runtime {
    JiveCompiled,
    JiveInterpreted,
    GccO0,
    GccO2,
    Xint,
    Jit,
}

impl Runtime {
    /// Its key in `--json` rows.
    fn key(self) -> &'static str {
        match self {
            Runtime::JiveCompiled => "jive_compiled",
            Runtime::JiveInterpreted => "jive_interpreted",
            Runtime::GccO0 => "gcc_O0",
            Runtime::GccO2 => "gcc_O2",
            Runtime::Xint => "hotspot_xint",
            Runtime::Jit => "hotspot_jit",
        }
    }

    /// Its header in the table.
    fn header(self) -> &'static str {
        match self {
            Runtime::JiveCompiled => "JIVE jit",
            Runtime::JiveInterpreted => "JIVE int",
            Runtime::GccO0 => "gcc -O0",
            Runtime::GccO2 => "gcc -O2",
            Runtime::Xint => "java -Xint",
            Runtime::Jit => "java JIT",
        }
    }
}

/// The baselines, after the JIVE columns.
const BASELINES: [Runtime; 4] = [Runtime::GccO0, Runtime::GccO2, Runtime::Xint, Runtime::Jit];

/// HotSpot's flags on both of its runs: null-call's callee and the null
/// native are not inlined (their call is the operation measured; JIVE's
/// compiler is told the same of `nothing`, `CompileOptions::dont_inline`,
/// and does not inline natives), and the JVM does not print these
/// commands.
const HOTSPOT_FLAGS: [&str; 4] = [
    "-XX:CompileCommand=quiet",
    "-XX:CompileCommand=dontinline,Bench::nothing",
    "-XX:CompileCommand=dontinline,unet.sle.Natives::nop",
    "-Xss64m",
];

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

    // JIVE: one virtual machine per mode; the first column's sizes n.
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
    let both = a.compile || a.svg.is_some();
    let mut vms: Vec<(Runtime, Vm<()>)> = Vec::new();
    let mut compile_cost = None;
    if both {
        let mut vm = Vm::new(class.clone(), limits, &mut host)
            .map_err(|f| format!("JIVE Bench initialisation: {f}"))?;
        // null-call measures a call: JIVE keeps it one, as HotSpot is told
        // to (`HOTSPOT_FLAGS`).
        let nothing = class
            .method("nothing")
            .ok_or("Bench has no method nothing")?;
        let options = ::jive::CompileOptions {
            dont_inline: vec![nothing],
        };
        let code = class
            .compile_with(&options)
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
        vms.push((Runtime::JiveCompiled, vm));
    }
    let vm = Vm::new(class.clone(), limits, &mut host)
        .map_err(|f| format!("JIVE Bench initialisation: {f}"))?;
    vms.push((Runtime::JiveInterpreted, vm));
    let mut cols: Vec<Runtime> = vms.iter().map(|(r, _)| *r).collect();
    cols.extend(BASELINES);

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
    // Interpreted JIVE sizes n (the slowest runtimes, interpreters and
    // gcc -O0, then run n in about the target for the checksum, and a
    // compiled runtime in less); every other column sizes its own count.
    let sizer = vms.len() - 1;
    progress(&format!("{}: sizing each benchmark", cols[sizer].header()));
    for (&m, (name, _, _)) in methods.iter().zip(BENCHES) {
        let vm = &mut vms[sizer].1;
        ns.push(size(
            |n| Ok(jive_call(vm, &mut host, m, n, name)?.1),
            1,
            target,
        )?);
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
    let mut all: Vec<Vec<Vec<Raw>>> = vec![Vec::new(); cols.len()];
    let mut host_calls = Vec::new();
    for round in 1..=rounds {
        let r = format!("round {round}/{rounds}: ");
        for (c, (rt, vm)) in vms.iter_mut().enumerate() {
            let mut col: Vec<Raw> = Vec::new();
            for (i, (&m, (name, _, _))) in methods.iter().zip(BENCHES).enumerate() {
                progress(&format!(
                    "{r}{} {}/{}: {name}",
                    rt.header(),
                    i + 1,
                    BENCHES.len()
                ));
                col.push(jive_bench(
                    vm,
                    &mut host,
                    m,
                    ns[i],
                    c != sizer,
                    target,
                    a.reps,
                    name,
                )?);
            }
            all[c].push(col);
        }
        progress(&format!(
            "{r}{}: host-to-applet call overhead",
            cols[0].header()
        ));
        host_calls.push(host_call_ns(
            &mut vms[0].1,
            &mut host,
            ret,
            a.quick,
            a.reps,
        )?);
        for (c, rt) in cols.iter().enumerate().skip(vms.len()) {
            progress(&format!("{r}{}: all benchmarks", rt.header()));
            let out = match rt {
                Runtime::GccO0 | Runtime::GccO2 => {
                    let opt = if *rt == Runtime::GccO0 { "-O0" } else { "-O2" };
                    output(
                        Command::new(dir.join(format!("bench{opt}")))
                            .arg(&reps)
                            .arg(&target_ns)
                            .args(&plan),
                        &format!("bench.c {opt}"),
                    )?
                }
                _ => {
                    let (flags, warmup) = if *rt == Runtime::Xint {
                        (&["-Xint"][..], 0usize)
                    } else {
                        (&[][..], a.warmup)
                    };
                    output(
                        Command::new(jdk.bin("java"))
                            .args(flags)
                            .args(HOTSPOT_FLAGS)
                            .arg("-cp")
                            .arg(&classes)
                            .arg("BenchMain")
                            .arg(&reps)
                            .arg(warmup.to_string())
                            .arg(&target_ns)
                            .args(&plan),
                        rt.header(),
                    )?
                }
            };
            all[c].push(parse_lines(&out, rt.header())?);
        }
    }

    // Checksums must agree across all runtimes and all rounds.
    for (i, (name, _, _)) in BENCHES.iter().enumerate() {
        let want = all[0][0][i];
        for (c, col) in all.iter().enumerate() {
            for got in col.iter().map(|round| round[i]) {
                if got.n != want.n || got.checksum != want.checksum {
                    return Err(format!(
                        "{name}: {} gave checksum {} for n={}, {} {} for n={}",
                        cols[c].header(),
                        got.checksum,
                        got.n,
                        cols[0].header(),
                        want.checksum,
                        want.n
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

    let mut report = Report::new(cols, &columns, host_call_ns);
    report.compile = compile_cost;
    if let Some(d) = &a.svg {
        figures::write(&report, d)?;
    }
    if a.json {
        report.print_json();
    } else {
        report.print_table(a.reps, a.rounds);
    }
    drop(tmp);
    Ok(())
}

/// The count whose call (`time(count)`) takes about `target`, from `n`:
/// `n` shrunk at once if its call takes over twice the target, then grown
/// until a call takes the target (as `BenchMain.size` and bench.c's do).
fn size(
    mut time: impl FnMut(i32) -> Result<Duration, String>,
    n: i32,
    target: Duration,
) -> Result<i32, String> {
    const MAX_N: i32 = 1 << 29;
    let mut m = n.max(1);
    let mut t = time(m)?;
    if t > 2 * target {
        m = ((f64::from(m) * target.as_secs_f64() / t.as_secs_f64()) as i32).max(1);
        t = time(m)?;
    }
    while t < target && m < MAX_N {
        let grow = (target.as_secs_f64() / t.as_secs_f64().max(1e-7) * 1.2).clamp(2.0, 64.0);
        m = ((f64::from(m) * grow) as i64).min(i64::from(MAX_N)) as i32;
        t = time(m)?;
    }
    Ok(m)
}

/// One JIVE column's figure for one benchmark: the checksum of `n`, and
/// the median of `reps` timed calls of `n` (the column that sized `n`) or
/// of a count it sizes itself (`own`, as the baselines do).
#[allow(clippy::too_many_arguments)]
fn jive_bench(
    vm: &mut Vm<()>,
    host: &mut (),
    m: MethodId,
    n: i32,
    own: bool,
    target: Duration,
    reps: usize,
    name: &str,
) -> Result<Raw, String> {
    let (checksum, _) = jive_call(vm, host, m, n, name)?;
    let timed_n = if own {
        size(|k| Ok(jive_call(vm, host, m, k, name)?.1), n, target)?
    } else {
        n
    };
    let (want, _) = jive_call(vm, host, m, timed_n, name)?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let (c, t) = jive_call(vm, host, m, timed_n, name)?;
        if c != want {
            return Err(format!("JIVE {name}: checksum {want} then {c}"));
        }
        times.push(t.as_nanos() as f64);
    }
    Ok(Raw {
        n,
        checksum,
        timed_n,
        median_ns: median(&mut times),
    })
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
