//! `unet bench router lookup` (`forward`, Figure 5, is in `router/forward.rs`): the router's route lookup (the SPINE paper,
//! section 5.2). Lookups per second on one core and bytes of the structure,
//! for the full Internet table (when it is beside the repository) and for
//! a generated table of 1 000 routes (the paper's size), over random
//! destinations and over a trace with locality: the LC-trie in Rust (one
//! lookup at a time, and in batches of 8 walked together, as a receive
//! ring's burst would be), the same lookup in Java run by JIVE (compiled
//! and interpreted), a plain binary trie, and two published crates
//! (`prefix-trie`'s trie and `treebitmap`'s tree bitmap), each beside the
//! better crate of the same run as a ratio; then the targets, met
//! or missed.
//!
//! Every structure's answer is first checked against the Rust LC-trie's on
//! every address it is timed on. A rate is of independent lookups over a
//! trace held in memory (the processor may overlap them), the median of
//! interleaved repetitions.

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use ip_network_table_deps_treebitmap::IpLookupTable;
use jive::{ArrayRef, Class, Elem, Limits, Prepared, Vm};
use prefix_trie::PrefixMap;
use serde_json::json;
use unet_router::table::{self, generated, mask, Route, SplitMix};
use unet_router::{extension, BinTrie, LcTrie, Params};

use super::applet_build::{javac, BuildDir};
use super::plot::{self, Figure, Scale, Series};
use super::report::{finish, warn_if_busy, Progress};
use super::stats::median_f64;

mod forward;
mod forwarders;
mod graph;
mod lab;

type Res<T> = Result<T, String>;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(clap::Subcommand)]
pub enum What {
    /// Lookups per second and bytes of the LC-trie (Rust and JIVE), a
    /// binary trie and published crates, on the full table and 1 000
    /// routes, random destinations and a trace with locality.
    Lookup(LookupArgs),
    /// SPINE's Figure 5: the router's forwarding rate at under 0.5 % loss
    /// beside Linux's own IP forwarding in the same namespaces (needs
    /// root).
    Forward(forward::ForwardArgs),
    /// SPINE's Figure 6: the router's event graph under load, with the
    /// period and latency it shows beside the paper's (needs root).
    Graph(graph::GraphArgs),
}

#[derive(clap::Args)]
pub struct LookupArgs {
    /// Interleaved repetitions of every measurement; medians are reported.
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Addresses in each trace (each timed pass looks them all up).
    #[arg(long, default_value_t = 1 << 20)]
    pub trace: usize,
    /// A fast, rough run (3 repetitions, traces of 2^17 addresses).
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object per row.
    #[arg(long)]
    pub json: bool,
    /// Draw each structure's rate against its size (random destinations)
    /// as an SVG.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// The full table (default: `../shared/data/bgp/prefixes.txt.gz`
    /// beside the source checkout); its rows are left out when absent.
    #[arg(long, value_name = "FILE")]
    pub table: Option<PathBuf>,
    /// Ports over which routes without a next hop are spread (a hash of
    /// the prefix modulo this).
    #[arg(long, default_value_t = 16)]
    pub ports: u32,
    /// The LC-trie's fill factor: a node branches on `b` bits while at
    /// least this share of its `2^b` children are non-empty.
    #[arg(long, default_value_t = Params::default().fill)]
    pub fill: f64,
    /// The least bits the LC-trie's root branches on (at most log2 of the
    /// table's size).
    #[arg(long, default_value_t = Params::default().root_branch)]
    pub root_branch: u32,
    /// The extension's source (default: the checkout's
    /// `extensions/router/Router.java`).
    #[arg(long, value_name = "FILE")]
    pub java: Option<PathBuf>,
}

pub fn run(a: Args) -> ExitCode {
    match a.what {
        What::Lookup(l) => finish(lookup(l)),
        What::Forward(f) => finish(forward::forward(f)),
        What::Graph(g) => finish(graph::graph(g)),
    }
}

/// The structures measured, in the order they are printed.
const NAMES: [&str; 8] = [
    "LC-trie (Rust)",
    "LC-trie (Rust), batches of 8",
    "LC-trie, JIVE compiled, loop in Java",
    "LC-trie, JIVE compiled, a host call each",
    "LC-trie, JIVE interpreted, a host call each",
    "binary trie",
    "prefix-trie 0.10",
    "treebitmap 0.5",
];
/// The published crates: the better one is every row's baseline.
const CRATES: [usize; 2] = [6, 7];
/// The interpreter looks up this fraction of a trace per pass.
const INTERP_SHARE: usize = 8;

/// One measured point.
struct Row {
    table: &'static str,
    routes: usize,
    trace: &'static str,
    name: &'static str,
    /// Lookups per second (median).
    rate: f64,
    runs: Vec<f64>,
    bytes: usize,
    baseline: &'static str,
    ratio: f64,
}

/// The structures of one table.
struct Built {
    lc: LcTrie,
    bin: BinTrie,
    pt: PrefixMap<(u32, u8), u32>,
    tbm: IpLookupTable<Ipv4Addr, u32>,
    jit: (Vm<()>, Prepared<1>),
    interp: (Vm<()>, Prepared<1>),
    /// The trace as an `int[]` in the compiled VM, for `lookupAll`.
    trace: Option<ArrayRef>,
    bytes: [usize; 8],
}

impl Built {
    /// Put `trace` in the compiled VM's heap (in place of the last one).
    fn set_trace(&mut self, trace: &[u32]) -> Res<ArrayRef> {
        let vm = &mut self.jit.0;
        if let Some(old) = self.trace.take() {
            vm.unpin_array(old);
            vm.collect_garbage();
        }
        let arr = vm
            .new_array(Elem::Int, trace.len())
            .map_err(|e| e.to_string())?;
        let dst = vm.ints_mut(arr).ok_or("fresh array not an int[]")?;
        for (d, &a) in dst.iter_mut().zip(trace) {
            *d = a as i32;
        }
        vm.pin_array(arr);
        self.trace = Some(arr);
        Ok(arr)
    }

    /// `lookupAll` over the trace in the compiled VM: the sum of answers.
    fn lookup_all(&mut self) -> Res<i32> {
        let arr = self.trace.ok_or("no trace in the VM")?;
        let class = self.jit.0.class().clone();
        let m = class.method("lookupAll").ok_or("Router has no lookupAll")?;
        match self.jit.0.invoke(&mut (), m, &[arr.handle()]) {
            Ok(Some(sum)) => Ok(sum),
            Ok(None) => Err("lookupAll returned nothing".into()),
            Err(f) => Err(format!("the extension faulted: {f}")),
        }
    }
}

fn lookup(mut a: LookupArgs) -> Res<()> {
    if a.quick {
        a.reps = 3;
        a.trace = 1 << 17;
    }
    a.reps = a.reps.max(1);
    a.trace = a.trace.max(INTERP_SHARE);
    warn_if_busy();
    let p = Progress::new();
    p.show("compiling the extension");
    let class = compile_java(a.java.as_deref())?;
    let mut tables: Vec<(&'static str, Vec<Route>)> = Vec::new();
    let path = a.table.clone().unwrap_or_else(table::full_table_path);
    p.show("reading the full table");
    match table::load(&path, a.ports) {
        Ok(r) => tables.push(("full", r)),
        Err(e @ table::TableError::Absent(_)) => {
            eprintln!("unet bench: note: {e}; the full table's rows are left out")
        }
        Err(e) => return Err(e.to_string()),
    }
    tables.push(("1000", generated(1000, 1, a.ports)));

    let mut rows = Vec::new();
    for (name, routes) in &tables {
        p.show(&format!("building the structures of the {name} table"));
        let params = Params {
            fill: a.fill,
            root_branch: a.root_branch,
        };
        let mut b = build(routes, &class, params, a.trace)?;
        for (trace_name, trace) in [
            ("random", random_trace(a.trace, 11)),
            ("locality", locality_trace(routes, a.trace, 12)),
        ] {
            p.show(&format!(
                "{name} table, {trace_name} destinations: checking"
            ));
            b.set_trace(&trace)?;
            check(&mut b, &trace)?;
            let mut runs = vec![Vec::new(); NAMES.len()];
            for rep in 0..a.reps {
                p.show(&format!(
                    "{name} table, {trace_name} destinations: repetition {}/{}",
                    rep + 1,
                    a.reps
                ));
                for (i, r) in runs.iter_mut().enumerate() {
                    r.push(time(&mut b, i, &trace)?);
                }
            }
            let rates: Vec<f64> = runs.iter().map(|r| median_f64(r)).collect();
            let best = CRATES
                .into_iter()
                .max_by(|&x, &y| rates[x].total_cmp(&rates[y]))
                .unwrap_or(CRATES[0]);
            for (i, r) in runs.into_iter().enumerate() {
                rows.push(Row {
                    table: name,
                    routes: routes.len(),
                    trace: trace_name,
                    name: NAMES[i],
                    rate: rates[i],
                    runs: r,
                    bytes: b.bytes[i],
                    baseline: NAMES[best],
                    ratio: rates[i] / rates[best],
                });
            }
        }
    }
    p.clear();
    if a.json {
        for r in &rows {
            println!("{}", row_json(r));
        }
    } else {
        print_rows(&rows, &a);
    }
    let targets = targets(&rows);
    if a.json {
        for (what, met) in &targets {
            println!("{}", json!({"target": what, "met": met}));
        }
    } else {
        println!("\nTargets (issue 43, Lookup):");
        for (what, met) in &targets {
            let verdict = match met {
                Some(true) => "met",
                Some(false) => "MISSED",
                None => "not measured (no full table)",
            };
            println!("  {what}: {verdict}");
        }
    }
    if let Some(svg) = &a.svg {
        write_svg(&rows, svg)?;
    }
    Ok(())
}

/// `Router.class` (or the class `--java` names), compiled from the
/// extension's source (against the checkout's applet SDK).
fn compile_java(java: Option<&Path>) -> Res<Vec<u8>> {
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let src = java.map_or_else(
        || checkout.join("extensions/router/Router.java"),
        Path::to_path_buf,
    );
    if !src.is_file() {
        return Err(format!(
            "{} not found (use --java to name Router.java)",
            src.display()
        ));
    }
    let dir = BuildDir::new("router", false)?;
    let sdk = checkout.join("java/applet-sdk/src/main/java");
    javac(&sdk, &dir.path, std::slice::from_ref(&src))?;
    let class = format!(
        "{}.class",
        src.file_stem()
            .map_or("Router".into(), |s| s.to_string_lossy())
    );
    std::fs::read(dir.path.join(&class)).map_err(|e| format!("{class}: {e}"))
}

/// A VM running the extension over `t`'s arrays, its heap quota exactly
/// what they take; compiled when `compile`.
/// `trace` more words of heap are allowed for a trace, and fuel for a
/// whole trace's lookups in one invocation.
fn jive_vm(class: &[u8], t: &LcTrie, compile: bool, trace: usize) -> Res<(Vm<()>, Prepared<1>)> {
    let natives = extension::spine_stubs();
    let class =
        Class::load(class, &natives, &[extension::SPINE_DOMAIN]).map_err(|e| e.to_string())?;
    let limits = Limits {
        heap_quota: extension::heap_bytes(t) + trace * 4 + 16,
        fuel: 1 << 40,
        ..Limits::default()
    };
    let mut vm = Vm::new(class.clone(), limits, &mut ()).map_err(|e| e.to_string())?;
    extension::fill_fields(&mut vm, t)?;
    let m = class.method("lookup").ok_or("Router has no lookup")?;
    let p = vm.prepare::<1>(m).map_err(|e| e.to_string())?;
    if compile {
        vm.compile()?;
        let all = class.method("lookupAll").ok_or("Router has no lookupAll")?;
        if !vm.is_compiled(m) || !vm.is_compiled(all) {
            return Err("LcTrie's methods did not compile".into());
        }
    }
    Ok((vm, p))
}

fn build(routes: &[Route], class: &[u8], params: Params, trace: usize) -> Res<Built> {
    let lc = LcTrie::build_with(routes, params).map_err(|e| e.to_string())?;
    let bin = BinTrie::build(routes);
    let mut pt = PrefixMap::new();
    let mut tbm = IpLookupTable::new();
    for r in routes {
        pt.insert((r.prefix, r.len), r.next_hop);
        tbm.insert(Ipv4Addr::from(r.prefix), u32::from(r.len), r.next_hop);
    }
    let jit = jive_vm(class, &lc, true, trace)?;
    let interp = jive_vm(class, &lc, false, 0)?;
    let (nodes, results) = tbm.mem_usage();
    let bytes = [
        lc.bytes(),
        lc.bytes(),
        jit.0.heap_used(),
        jit.0.heap_used(),
        interp.0.heap_used(),
        bin.bytes(),
        pt.mem_size(),
        nodes + results + std::mem::size_of_val(&tbm),
    ];
    Ok(Built {
        lc,
        bin,
        pt,
        tbm,
        jit,
        interp,
        trace: None,
        bytes,
    })
}

/// Uniformly random destinations.
fn random_trace(n: usize, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix(seed);
    (0..n).map(|_| rng.next_u32()).collect()
}

/// A trace with locality: a working set of 1 000 destinations, each inside
/// a random route of the table, visited in trains of 1 to 16 packets; each
/// train's destination is drawn with a skew to the first of the set (index
/// `below(below(1000) + 1)`, so a few destinations carry most packets, as
/// flows do).
fn locality_trace(routes: &[Route], n: usize, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix(seed);
    let set: Vec<u32> = (0..1000)
        .map(|_| {
            let a = rng.next_u32();
            if routes.is_empty() {
                return a;
            }
            let r = routes[rng.below(routes.len() as u32) as usize];
            r.prefix | (a & !mask(r.len))
        })
        .collect();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let k = rng.below(1000) + 1;
        let d = set[rng.below(k) as usize];
        let train = 1 + rng.below(16) as usize;
        out.extend(std::iter::repeat_n(d, train.min(n - out.len())));
    }
    out
}

/// Every structure gives the Rust LC-trie's answer on every address of
/// the trace (the interpreter on its share; `lookupAll` the same sum).
fn check(b: &mut Built, trace: &[u32]) -> Res<()> {
    let sum = trace.iter().fold(0i32, |s, &a| {
        s.wrapping_add(b.lc.lookup(a).map_or(-1, |h| h as i32))
    });
    let all = b.lookup_all()?;
    if all != sum {
        return Err(format!(
            "lookupAll sums to {all}, the LC-trie's answers to {sum}"
        ));
    }
    for c in trace.chunks_exact(8) {
        let c: &[u32; 8] = c.try_into().map_err(|_| "a chunk of 8")?;
        let batch = b.lc.lookup_batch(c);
        if c.iter().zip(batch).any(|(&a, h)| b.lc.lookup(a) != h) {
            return Err("a batch of lookups differs from the single lookups".into());
        }
    }
    for (i, &a) in trace.iter().enumerate() {
        let want = b.lc.lookup(a);
        let mut got = [
            b.bin.lookup(a),
            b.pt.get_lpm(&(a, 32)).map(|(_, h)| *h),
            b.tbm.longest_match(Ipv4Addr::from(a)).map(|(_, _, h)| *h),
            jive_lookup(&mut b.jit, a)?,
            None,
        ];
        if i < trace.len() / INTERP_SHARE {
            got[4] = jive_lookup(&mut b.interp, a)?;
        } else {
            got[4] = want;
        }
        if let Some(k) = got.iter().position(|g| *g != want) {
            return Err(format!(
                "structure {k} answers {:?} for {} where the LC-trie answers {want:?}",
                got[k],
                Ipv4Addr::from(a)
            ));
        }
    }
    Ok(())
}

fn jive_lookup(vm: &mut (Vm<()>, Prepared<1>), a: u32) -> Res<Option<u32>> {
    match vm.0.invoke_prepared(&mut (), vm.1, [a as i32]) {
        Ok(Some(h)) => Ok((h >= 0).then_some(h as u32)),
        Ok(None) => Err("lookup returned nothing".into()),
        Err(f) => Err(format!("the extension faulted: {f}")),
    }
}

/// Lookups per second of structure `i` over `trace` (one pass; the
/// interpreter over its share).
fn time(b: &mut Built, i: usize, trace: &[u32]) -> Res<f64> {
    fn pass(trace: &[u32], f: impl Fn(u32) -> Option<u32>) -> f64 {
        let t0 = Instant::now();
        let mut acc = 0u32;
        for &a in trace {
            acc = acc.wrapping_add(f(black_box(a)).unwrap_or(0));
        }
        black_box(acc);
        trace.len() as f64 / t0.elapsed().as_secs_f64()
    }
    fn jive_pass(vm: &mut (Vm<()>, Prepared<1>), trace: &[u32]) -> Res<f64> {
        let t0 = Instant::now();
        let mut acc = 0i32;
        for &a in trace {
            let r = vm.0.invoke_prepared(&mut (), vm.1, [black_box(a) as i32]);
            acc = acc.wrapping_add(r.map_err(|f| f.to_string())?.unwrap_or(0));
        }
        black_box(acc);
        Ok(trace.len() as f64 / t0.elapsed().as_secs_f64())
    }
    Ok(match i {
        0 => pass(trace, |a| b.lc.lookup(a)),
        1 => {
            let t0 = Instant::now();
            let mut acc = 0u32;
            for c in trace.chunks_exact(8) {
                let c: &[u32; 8] = c.try_into().map_err(|_| "a chunk of 8")?;
                for h in b.lc.lookup_batch(black_box(c)) {
                    acc = acc.wrapping_add(h.unwrap_or(0));
                }
            }
            black_box(acc);
            (trace.len() / 8 * 8) as f64 / t0.elapsed().as_secs_f64()
        }
        2 => {
            let t0 = Instant::now();
            black_box(b.lookup_all()?);
            trace.len() as f64 / t0.elapsed().as_secs_f64()
        }
        3 => jive_pass(&mut b.jit, trace)?,
        4 => jive_pass(&mut b.interp, &trace[..trace.len() / INTERP_SHARE])?,
        5 => pass(trace, |a| b.bin.lookup(a)),
        6 => pass(trace, |a| b.pt.get_lpm(&(a, 32)).map(|(_, h)| *h)),
        _ => pass(trace, |a| {
            b.tbm.longest_match(Ipv4Addr::from(a)).map(|(_, _, h)| *h)
        }),
    })
}

fn print_rows(rows: &[Row], a: &LookupArgs) {
    println!(
        "Route lookup, one core: medians of {} interleaved repetitions over traces of {} \
         addresses (JIVE interpreted: 1/{INTERP_SHARE} of each); release build, this machine",
        a.reps, a.trace
    );
    let mut last = ("", "");
    for r in rows {
        if (r.table, r.trace) != last {
            last = (r.table, r.trace);
            println!(
                "\n{} table ({} routes), {} destinations",
                r.table, r.routes, r.trace
            );
            println!(
                "  {:<43} {:>11} {:>9} {:>12} {:>8}  vs {}",
                "structure", "M lookups/s", "ns/lookup", "bytes", "B/route", r.baseline
            );
        }
        println!(
            "  {:<43} {:>11.2} {:>9.1} {:>12} {:>8.2}  {:.2}x",
            r.name,
            r.rate / 1e6,
            1e9 / r.rate,
            r.bytes,
            r.bytes as f64 / r.routes.max(1) as f64,
            r.ratio
        );
    }
}

fn row_json(r: &Row) -> serde_json::Value {
    json!({
        "table": r.table,
        "routes": r.routes,
        "trace": r.trace,
        "structure": r.name,
        "lookups_per_s": r.rate,
        "runs": r.runs,
        "ns_per_lookup": 1e9 / r.rate,
        "bytes": r.bytes,
        "bytes_per_route": r.bytes as f64 / r.routes.max(1) as f64,
        "baseline": r.baseline,
        "ratio": r.ratio,
    })
}

fn find<'a>(rows: &'a [Row], table: &str, trace: &str, name: &str) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.table == table && r.trace == trace && r.name == name)
}

/// The lookup targets, each met, missed or not measured.
fn targets(rows: &[Row]) -> Vec<(String, Option<bool>)> {
    let rust = find(rows, "full", "random", NAMES[0]);
    let batch = find(rows, "full", "random", NAMES[1]);
    let jit = find(rows, "full", "random", NAMES[2]);
    let jit_call = find(rows, "full", "random", NAMES[3]);
    let small = find(rows, "1000", "random", NAMES[0]);
    vec![
        (
            format!(
                "Rust LC-trie, full table, random: >= 20 M lookups/s (is {}; {} in batches of 8)",
                rust.map_or("-".into(), |r| format!("{:.1}", r.rate / 1e6)),
                batch.map_or("-".into(), |r| format!("{:.1}", r.rate / 1e6))
            ),
            rust.map(|r| r.rate >= 20e6),
        ),
        (
            format!(
                "Rust LC-trie at or above the best crate's rate, full table, random ({})",
                rust.map_or("-".into(), |r| format!("{:.2}x {}", r.ratio, r.baseline))
            ),
            rust.map(|r| r.ratio >= 1.0),
        ),
        (
            format!(
                "<= 12 bytes a prefix, full table (is {})",
                rust.map_or("-".into(), |r| format!(
                    "{:.2}",
                    r.bytes as f64 / r.routes as f64
                ))
            ),
            rust.map(|r| r.bytes as f64 <= 12.0 * r.routes as f64),
        ),
        (
            format!(
                "JIVE compiled within 2x of Rust, full table, random (is {} with the \
                 loop in Java; {} with a host call each)",
                rust.zip(jit)
                    .map_or("-".into(), |(r, j)| format!("{:.2}x", r.rate / j.rate)),
                rust.zip(jit_call)
                    .map_or("-".into(), |(r, j)| format!("{:.2}x", r.rate / j.rate))
            ),
            rust.zip(jit).map(|(r, j)| r.rate <= 2.0 * j.rate),
        ),
        (
            format!(
                "1 000 routes under 20 KB (is {} bytes)",
                small.map_or("-".into(), |r| r.bytes.to_string())
            ),
            small.map(|r| r.bytes < 20_000),
        ),
    ]
}

/// Rate against size, random destinations: a line per structure through
/// its tables.
fn write_svg(rows: &[Row], path: &Path) -> Res<()> {
    let lines = NAMES
        .iter()
        .map(|name| Series {
            name: (*name).to_string(),
            points: rows
                .iter()
                .filter(|r| r.name == *name && r.trace == "random")
                .map(|r| (r.bytes as f64, r.rate / 1e6))
                .collect(),
        })
        .collect();
    plot::write_svg(
        &Figure {
            title: "Route lookup: rate against size (1 000 routes and the full table)",
            x_desc: "bytes of the structure",
            y_desc: "M lookups/s, random destinations",
            lines,
            paper: Vec::new(),
            scale: Scale::LogLog,
        },
        path,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_locality_trace_runs_in_trains_inside_routes() {
        let routes = generated(5000, 3, 16);
        let t = locality_trace(&routes, 100_000, 4);
        assert_eq!(t, locality_trace(&routes, 100_000, 4));
        assert_eq!(t.len(), 100_000);
        let distinct: std::collections::HashSet<u32> = t.iter().copied().collect();
        assert!(distinct.len() <= 1000, "{}", distinct.len());
        let lc = LcTrie::build(&routes).unwrap();
        assert!(distinct.iter().all(|&a| lc.lookup(a).is_some()));
        // Trains: far fewer changes of destination than addresses.
        let changes = t.windows(2).filter(|w| w[0] != w[1]).count();
        assert!((100_000 / 16..100_000 / 4).contains(&changes), "{changes}");
        let random = random_trace(100_000, 5);
        let distinct: std::collections::HashSet<u32> = random.iter().copied().collect();
        assert!(distinct.len() > 99_000);
    }

    fn row(table: &'static str, name: &'static str, rate: f64, bytes: usize) -> Row {
        Row {
            table,
            routes: if table == "full" { 1_000_000 } else { 1000 },
            trace: "random",
            name,
            rate,
            runs: vec![rate],
            bytes,
            baseline: NAMES[6],
            ratio: rate / 10e6,
        }
    }

    #[test]
    fn targets_are_met_missed_or_not_measured() {
        let rows = vec![
            row("full", NAMES[0], 25e6, 11_000_000),
            row("full", NAMES[1], 40e6, 11_000_000),
            row("full", NAMES[2], 13e6, 11_000_000),
            row("full", NAMES[3], 10e6, 11_000_000),
            row("1000", NAMES[0], 100e6, 19_999),
        ];
        let t = targets(&rows);
        assert_eq!(t.len(), 5);
        assert!(t.iter().all(|(_, met)| *met == Some(true)), "{t:?}");
        assert!(t[0].0.contains("is 25.0; 40.0 in batches"), "{}", t[0].0);
        let rows = vec![
            row("full", NAMES[0], 19e6, 12_000_001),
            row("full", NAMES[2], 9e6, 11_000_000),
            row("1000", NAMES[0], 100e6, 20_000),
        ];
        let t = targets(&rows);
        let met: Vec<_> = t.iter().map(|(_, m)| *m).collect();
        assert_eq!(
            met,
            [
                Some(false),
                Some(true),
                Some(false),
                Some(false),
                Some(false)
            ]
        );
        let t = targets(&rows[2..]);
        assert!(t[..4].iter().all(|(_, m)| m.is_none()));
    }

    #[test]
    fn every_structure_of_a_small_table_answers_alike_and_is_timed() {
        let class = compile_java(None).unwrap();
        let routes = generated(1000, 1, 16);
        let trace = locality_trace(&routes, 4096, 2);
        let mut b = build(&routes, &class, Params::default(), trace.len()).unwrap();
        b.set_trace(&trace).unwrap();
        check(&mut b, &trace).unwrap();
        for (i, name) in NAMES.iter().enumerate() {
            let rate = time(&mut b, i, &trace).unwrap();
            assert!(rate.is_finite() && rate > 0.0, "{name}: {rate}");
        }
        assert!(b.bytes.iter().all(|&n| n > 0));
        assert_eq!(b.bytes[0], b.lc.bytes());
    }
}
