//! `unet bench javia`: the Javia paper's Figures 1-4, regenerated.
//!
//! For message sizes of 4 B to 32 KiB, the round trip and the bandwidth of
//! the raw Rust VIA client (`rust`, posted descriptors in registered
//! memory: the paper's raw C library), Javia-I copying (`copy`), Javia-I
//! with the array handed to the library for the call (`inplace`: the
//! paper pins it), Javia-II (`buffer`), and Aeron's Java IPC (`aeron`) as
//! the peer a Java user would compare with; on the local direct path, and
//! (all but Aeron IPC) between two engines over UDP loopback.
//!
//! Each run starts two processes, the `pong` end first (it listens, and
//! says `ready`) and then the `ping` end; both follow the same plan (see
//! `java/javia-bench`'s `JaviaBench`, which the Rust end, `unet bench
//! __javia-peer`, mirrors): per size, `--warmup` untimed round trips (and
//! more until `--warm-ms` passed) and `--iters` timed ones (ping prints the
//! median; an empty message then ends the round trips), then
//! `--warm-bursts` untimed (the Java ends go on until neither JVM compiled
//! anything for 300 ms: the pong end says so in its acknowledgement's
//! length) and `--reps` timed bursts of `--bytes` (64 to 100 000 messages)
//! answered by an acknowledgement (ping prints the median bytes per
//! second). The last
//! echoed message of each size is checked against what was sent. Runs
//! alternate the kinds (rust, copy, inplace, buffer, aeron, rust, …) so
//! that each sees the same noise; the figures are medians over runs.
//!
//! Before the local runs, a JVM of its own measures what one downcall costs
//! here, made as Javia's data path makes them (`DowncallFloor`): printed
//! under the Javia-I target beside the room it leaves above the Rust
//! client, as the floor under Javia-I's calls (Javia-II reads and writes a
//! local VI's ring itself, with no call per message).
//!
//! Before each size's timed round trips the Java ends also wait for their
//! JVM's JIT to settle (round trips until it has compiled nothing for 300
//! ms): a path whose branches change with the size is recompiled in steps
//! for up to a second or two.
//!
//! This process runs the engines: one embedded engine with a control
//! socket for the local path; two, each on UDP loopback with a control
//! socket of its own, for the remote path (ping's end talks to engine A,
//! pong's to engine B). The Java ends are built with Maven first
//! (`java/javia-bench`, with Aeron from Maven Central) unless `--no-build`.

mod args;
mod java;
mod peer;
mod runs;
mod table;
#[cfg(test)]
mod tests;

use std::process::ExitCode;

use super::report::{self, Progress};
use args::{Kind, PathSel, Plan, Where};
use java::Java;
use runs::{run_pair, Engines, Floor};
use table::Table;

pub use args::Args;
pub use peer::{run_peer, PeerArgs};

type Res<T> = Result<T, String>;

pub fn run(a: Args) -> ExitCode {
    report::finish(bench(a))
}

fn bench(a: Args) -> Res<()> {
    if a.sizes.is_empty() || a.sizes.iter().any(|&s| s == 0 || s > 32 * 1024) {
        return Err("--sizes: each between 1 byte and 32 KiB".into());
    }
    if a.kinds.is_empty() {
        return Err("--kinds: name at least one".into());
    }
    if a.pin && std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return Err("--pin: needs two cores (ping on core 0, pong on core 1)".into());
    }
    let q = a.quick;
    let plan = Plan {
        sizes: a.sizes.clone(),
        iters: a.iters.unwrap_or(if q { 300 } else { 20_000 }),
        warmup: a.warmup.unwrap_or(if q { 200 } else { 10_000 }),
        reps: a.reps.unwrap_or(if q { 2 } else { 5 }).max(1),
        warm_bursts: a.warm_bursts.unwrap_or(if q { 1 } else { 20 }),
        warm_ms: a.warm_ms.unwrap_or(if q { 0 } else { 100 }),
        pin: a.pin,
        read: !a.unread,
        bytes: a.bytes.unwrap_or(if q { 1_000_000 } else { 15_000_000 }),
    };
    let runs = a.runs.unwrap_or(if q { 1 } else { 3 }).max(1);
    let java_kinds = a.kinds.iter().any(|k| *k != Kind::Rust);
    let java = if java_kinds {
        Some(Java::prepare(&a)?)
    } else {
        None
    };
    report::warn_if_busy();
    let prog = Progress::new();
    // The floor under Javia's local figures: what one downcall costs (not
    // measured for Aeron alone, which makes none).
    let javia = a
        .kinds
        .iter()
        .any(|k| matches!(k, Kind::Copy | Kind::Inplace | Kind::Buffer));
    let floor = match &java {
        Some(j) if javia && a.path != PathSel::Remote => {
            prog.show("measuring one downcall");
            Some(Floor::measure(j, plan.pin)?)
        }
        _ => None,
    };
    let paths: &[Where] = match a.path {
        PathSel::Local => &[Where::Local],
        PathSel::Remote => &[Where::Remote],
        PathSel::Both => &[Where::Local, Where::Remote],
    };
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let mut tables = Vec::new();
    for &w in paths {
        let kinds: Vec<Kind> = a
            .kinds
            .iter()
            .copied()
            .filter(|k| !(w == Where::Remote && *k == Kind::Aeron))
            .collect();
        let engines = Engines::start(w)?;
        // results[kind][run][size]
        let mut results = vec![Vec::new(); kinds.len()];
        let mut tag = 7100;
        for r in 0..runs {
            for (i, &k) in kinds.iter().enumerate() {
                prog.show(&format!("{}: {} run {}/{runs}", w.name(), k.label(), r + 1));
                tag += 1;
                let pts = run_pair(k, &plan, &engines, java.as_ref(), tag)
                    .map_err(|e| format!("{} ({}): {e}", k.label(), w.name()))?;
                results[i].push(pts);
            }
        }
        prog.clear();
        let mut t = Table::new(w, &kinds, &plan.sizes, &results);
        t.floor = floor.filter(|_| w == Where::Local);
        if a.json {
            t.json();
        } else {
            t.print();
        }
        t.figures(&a.out)?;
        tables.push(t);
    }
    if !a.json {
        for t in &tables {
            t.targets();
        }
        println!(
            "figures: {}/figure[1-4]-{{local,remote}}.svg",
            a.out.display()
        );
    }
    Ok(())
}
