//! Tests of the figures' parsing, the table's ratios and the plan.

use super::args::{Kind, Where};
use super::peer::{burst_of, iters_of};
use super::runs::{parse, Floor, Point};
use super::table::Table;

#[test]
fn the_downcall_floor_is_read() {
    let text = "rt 4 900 800 1000\nbw 4 1000000\ndowncall 4.35\ndone\n";
    assert_eq!(Floor::parse(text), Some(Floor { ns: 4.35 }));
    assert_eq!(Floor::parse("rt 4 900 800 1000\ndowncall x\n"), None);
    assert_eq!(Floor::parse("downcall 4 5\n"), None);
}

#[test]
fn the_ping_ends_lines_are_read_per_size() {
    let text = "rt 4 900 800 1000\nbw 4 1000000\nrt 64 950 1 2\nbw 64 2e9\ndone\n";
    let p = parse(text, &[4, 64]).unwrap();
    assert_eq!(p[0].rt_ns, 900.0);
    assert_eq!(p[1].bw, 2e9);
    let e = parse("rt 4 900 1 2\n", &[4]).err().unwrap();
    assert!(e.contains("no figures for 4 bytes"), "{e}");
}

#[test]
fn the_crossover_is_where_in_place_stays_ahead() {
    let t = Table {
        w: Where::Local,
        kinds: vec![Kind::Copy, Kind::Inplace],
        sizes: vec![4, 1024, 8192, 32768],
        rt: vec![vec![1.0; 4]; 2],
        bw: vec![vec![1.0, 5.0, 5.0, 5.0], vec![2.0, 4.0, 6.0, 7.0]],
        rt_runs: vec![],
        bw_runs: vec![],
        floor: None,
    };
    assert_eq!(t.crossover(), Some(8192));
}

fn point(rt_us: f64) -> Point {
    Point {
        rt_ns: rt_us * 1000.0,
        bw: 1e9,
    }
}

/// A run of the slow placement beside a Rust run of the fast one
/// skews the ratio of medians; each run against the Rust run of its
/// round does not.
#[test]
fn the_paired_ratio_compares_each_run_with_the_rust_run_of_its_round() {
    // Rust: fast, fast, slow; Javia-II: fast, slow, slow (1.5x the
    // Rust client in each placement but the second round's).
    let rust = [0.2, 0.2, 0.8];
    let buffer = [0.3, 1.2, 1.2];
    let t = Table::new(
        Where::Local,
        &[Kind::Rust, Kind::Buffer],
        &[64],
        &[
            rust.iter().map(|&us| vec![point(us)]).collect(),
            buffer.iter().map(|&us| vec![point(us)]).collect(),
        ],
    );
    assert!((t.vs_rust(&t.rt, 1, 0).unwrap() - 6.0).abs() < 1e-9);
    assert!((t.vs_rust_paired(&t.rt_runs, 1, 0).unwrap() - 1.5).abs() < 1e-9);
    // Nothing to pair with when there is no Rust client.
    let alone = Table::new(
        Where::Local,
        &[Kind::Buffer],
        &[64],
        &[vec![vec![point(1.0)]]],
    );
    assert!(alone.vs_rust_paired(&alone.rt_runs, 0, 0).is_none());
}

#[test]
fn plans_match_the_java_end() {
    // JaviaBench.Plan: iters(size) and burst(size).
    assert_eq!(iters_of(20_000, 4096), 20_000);
    assert_eq!(iters_of(20_000, 32768), 2_500);
    assert_eq!(iters_of(300, 32768), 100);
    assert_eq!(burst_of(15_000_000, 4), 100_000);
    assert_eq!(burst_of(15_000_000, 32768), 457);
    assert_eq!(burst_of(1000, 32768), 64);
}
