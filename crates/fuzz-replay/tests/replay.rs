//! Every fuzz target of `fuzz/` (bar `descriptors`, whose body the engine's
//! `tests/descriptor_fuzz.rs` runs) built as part of the test suite and run
//! over its inputs: the seeds in `fuzz/seeds/`, the kept regressions
//! `fuzz/regressions/TARGET-*`, and mutations of them made from a fixed
//! seed (the same inputs on every run). A target whose body panics on one
//! of them fails here, naming the input and writing its bytes to a file to
//! keep as a regression.

// The targets include shared files (`int_params.rs`, JIVE's test helpers,
// the engine tests' VI helpers) each for itself, as each is a crate of its
// own under cargo-fuzz.
#![allow(clippy::duplicate_mod, clippy::duplicated_attributes)]

// Stands in for libFuzzer: `fuzz_target!` defines `fuzz_one`.
extern crate unet_fuzz_replay as libfuzzer_sys;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use unet_fuzz_replay::{mutations, Rng};

#[allow(unused_attributes)]
#[path = "../../../fuzz/fuzz_targets/control.rs"]
mod control;
#[allow(unused_attributes)]
#[path = "../../../fuzz/fuzz_targets/jive_jit.rs"]
mod jive_jit;
#[allow(unused_attributes)]
#[path = "../../../fuzz/fuzz_targets/jive_load.rs"]
mod jive_load;
#[allow(unused_attributes)]
#[path = "../../../fuzz/fuzz_targets/jive_run.rs"]
mod jive_run;
#[allow(unused_attributes)]
#[path = "../../../fuzz/fuzz_targets/vi_descriptors.rs"]
mod vi_descriptors;
#[allow(unused_attributes)]
#[path = "../../../fuzz/fuzz_targets/wire_frame.rs"]
mod wire_frame;
#[allow(unused_attributes)]
#[path = "../../../fuzz/fuzz_targets/wire_reassembly.rs"]
mod wire_reassembly;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The files of `dir` (none if it does not exist), sorted, as (name, bytes).
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<_> = rd
        .filter_map(Result::ok)
        .filter(|e| e.path().is_file())
        .map(|e| {
            let p = e.path();
            (
                p.display().to_string(),
                std::fs::read(&p).expect("read a seed"),
            )
        })
        .collect();
    out.sort();
    out
}

/// The kept regressions of `target` (`fuzz/regressions/TARGET-*`).
fn regressions(target: &str) -> Vec<(String, Vec<u8>)> {
    files(&repo().join("fuzz/regressions"))
        .into_iter()
        .filter(|(name, _)| {
            Path::new(name)
                .file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| f.starts_with(&format!("{target}-")))
        })
        .collect()
}

/// JIVE's class files among the tests' data: the seeds of the JIVE targets.
fn classes() -> Vec<(String, Vec<u8>)> {
    files(&repo().join("crates/jive/tests/data"))
        .into_iter()
        .filter(|(name, _)| name.ends_with(".class"))
        .collect()
}

/// Run `body` over each seed, each regression and `per_seed` mutations of
/// each seed; returns how many inputs ran. A panic fails the test with the
/// input's name, its bytes kept in a file named in the message.
fn replay(target: &str, body: fn(&[u8]), seeds: &[(String, Vec<u8>)], per_seed: usize) -> usize {
    let mut rng = Rng::new(0x5eed ^ target.len() as u64);
    let mut inputs: Vec<(String, Vec<u8>)> = seeds.to_vec();
    inputs.extend(regressions(target));
    for (name, bytes) in seeds {
        for (i, m) in mutations(bytes, per_seed, &mut rng).into_iter().enumerate() {
            inputs.push((format!("{name} mutation {i}"), m));
        }
    }
    for (name, bytes) in &inputs {
        if catch_unwind(AssertUnwindSafe(|| body(bytes))).is_err() {
            let keep =
                std::env::temp_dir().join(format!("{target}-failure-{}", std::process::id()));
            let _ = std::fs::write(&keep, bytes);
            panic!(
                "fuzz target {target} failed on {name}; its bytes are in {} \
                 (keep them as fuzz/regressions/{target}-SHORT-DESCRIPTION)",
                keep.display()
            );
        }
    }
    inputs.len()
}

/// `n` random inputs of up to `max_len` bytes (for targets without seeds).
fn random_inputs(n: usize, max_len: usize, seed: u64) -> Vec<(String, Vec<u8>)> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|i| {
            let len = rng.below(max_len + 1);
            (
                format!("random input {i}"),
                (0..len).map(|_| rng.next_u64() as u8).collect(),
            )
        })
        .collect()
}

#[test]
fn control_target_over_its_seeds() {
    let seeds = files(&repo().join("fuzz/seeds/control"));
    assert!(seeds.len() >= 10, "the control seeds are there");
    let n = replay("control", control::fuzz_one, &seeds, 200);
    assert!(n >= seeds.len() * 200);
}

#[test]
fn jive_load_target_over_the_test_classes() {
    let seeds = classes();
    assert!(!seeds.is_empty(), "JIVE's test classes are there");
    replay("jive_load", jive_load::fuzz_one, &seeds, 400);
}

#[test]
fn jive_run_target_over_the_test_classes() {
    // Each input loads, runs interpreted and then compiled on a small
    // stack with a canary below it.
    replay("jive_run", jive_run::fuzz_one, &classes(), 40);
    // Enough of the mutated classes still load to reach the run.
    let mut rng = Rng::new(0x5eed ^ "jive_run".len() as u64);
    let natives = jive::test_natives::<()>();
    let (mut tried, mut loaded) = (0, 0);
    for (_, bytes) in classes() {
        for m in mutations(&bytes, 40, &mut rng) {
            tried += 1;
            loaded += usize::from(jive::Class::load(&m, &natives, &["test"]).is_ok());
        }
    }
    assert!(
        loaded * 10 >= tried,
        "only {loaded} of {tried} mutated classes load"
    );
}

/// The replay fails when a target's body panics on one of its inputs.
#[test]
#[should_panic(expected = "fuzz target demo failed on random input")]
fn a_target_that_panics_fails_the_replay() {
    fn body(data: &[u8]) {
        assert!(data.len() != 3, "three bytes");
    }
    let inputs: Vec<_> = (0..8)
        .map(|i| (format!("random input {i}"), vec![0; i]))
        .collect();
    replay("demo", body, &inputs, 0);
}

#[test]
fn jive_jit_target_over_the_test_classes() {
    // JIVE's test classes and classes of its own (that call the natives
    // with fast cases, and so load only with those).
    let mut seeds = classes();
    let own = files(&repo().join("fuzz/seeds/jive_jit"));
    assert!(!own.is_empty(), "fuzz/seeds/jive_jit is there");
    seeds.extend(own);
    replay("jive_jit", jive_jit::fuzz_one, &seeds, 40);
}

#[test]
fn wire_frame_target_over_its_seeds() {
    // One valid frame of each kind (`UNET_BLESS=1 cargo test -p
    // unet-engine --lib wire::frame` rewrites them from the samples).
    let seeds = files(&repo().join("fuzz/seeds/wire_frame"));
    assert!(seeds.len() >= 12, "the wire_frame seeds are there");
    let n = replay("wire_frame", wire_frame::fuzz_one, &seeds, 200);
    assert!(n >= seeds.len() * 200);
}

#[test]
fn wire_frame_target_over_random_frames() {
    replay(
        "wire_frame",
        wire_frame::fuzz_one,
        &random_inputs(64, 256, 11),
        40,
    );
}

#[test]
fn wire_reassembly_target_over_its_seeds() {
    // Written inputs: the fragments of messages out of order, repeated,
    // disagreeing, and past a word of the selective acknowledgement.
    let seeds = files(&repo().join("fuzz/seeds/wire_reassembly"));
    assert!(!seeds.is_empty(), "the wire_reassembly seeds are there");
    let n = replay("wire_reassembly", wire_reassembly::fuzz_one, &seeds, 200);
    assert!(n >= seeds.len() * 200);
}

#[test]
fn wire_reassembly_target_over_random_operations() {
    replay(
        "wire_reassembly",
        wire_reassembly::fuzz_one,
        &random_inputs(64, 512, 13),
        40,
    );
}

#[test]
fn vi_descriptors_target_over_its_seeds() {
    // Written inputs (one each of: traffic on each reliability level, bad
    // sends, bad receives, queue heads scribbled, a region deregistered
    // meanwhile, completion tails moved, the VI closed and opened again,
    // a peer that posts no receives for a while, nothing at all).
    let seeds = files(&repo().join("fuzz/seeds/vi_descriptors"));
    assert!(seeds.len() >= 10, "the vi_descriptors seeds are there");
    let n = replay("vi_descriptors", vi_descriptors::fuzz_one, &seeds, 30);
    assert!(n >= seeds.len() * 30);
}

#[test]
fn vi_descriptors_target_over_random_operations() {
    replay(
        "vi_descriptors",
        vi_descriptors::fuzz_one,
        &random_inputs(64, 40 * vi_descriptors::OP_BYTES, 17),
        3,
    );
}
