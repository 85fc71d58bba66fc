//! The fuzz targets of `fuzz/` (cargo-fuzz, nightly, libFuzzer) as ordinary
//! tests: `tests/replay.rs` includes each target's source and this crate
//! stands in for `libfuzzer-sys`, so that `fuzz_target!` defines a plain
//! function, `fuzz_one(&[u8])`, which the test runs over the target's seeds
//! (`fuzz/seeds/`), its kept regressions (`fuzz/regressions/TARGET-*`) and
//! mutations of them made from a fixed seed. A target that no longer builds,
//! or that fails on any of those inputs, fails the test suite.

/// `libfuzzer_sys::fuzz_target!` for a target written as
/// `fuzz_target!(|data: &[u8]| body)`: defines `pub fn fuzz_one(data: &[u8])`
/// running `body`.
#[macro_export]
macro_rules! fuzz_target {
    (|$data:ident: &[u8]| $body:expr) => {
        /// The target's body on one input.
        pub fn fuzz_one($data: &[u8]) {
            $body;
        }
    };
}

/// A small deterministic generator (xorshift64*), so that the mutated
/// inputs are the same on every run.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator started from `seed` (any value; 0 is replaced).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// `n` mutations of `seed`, as a fuzzer makes them: bit flips, bytes set
/// to edge values, runs of bytes copied from elsewhere, truncation and
/// growth.
pub fn mutations(seed: &[u8], n: usize, rng: &mut Rng) -> Vec<Vec<u8>> {
    const EDGES: [u8; 8] = [0, 1, 0x7f, 0x80, 0xfe, 0xff, 0x10, 0x40];
    (0..n)
        .map(|_| {
            let mut v = seed.to_vec();
            for _ in 0..1 + rng.below(4) {
                if v.is_empty() {
                    v.push(rng.next_u64() as u8);
                    continue;
                }
                let at = rng.below(v.len());
                match rng.below(6) {
                    0 => v[at] ^= 1 << rng.below(8),
                    1 => v[at] = EDGES[rng.below(EDGES.len())],
                    2 => v[at] = rng.next_u64() as u8,
                    3 => {
                        let from = rng.below(v.len());
                        let len = rng.below(16).min(v.len() - at).min(v.len() - from);
                        v.copy_within(from..from + len, at);
                    }
                    4 => v.truncate(at),
                    _ => {
                        let extra = rng.below(16);
                        v.extend((0..extra).map(|_| rng.next_u64() as u8));
                    }
                }
            }
            v
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_the_same_for_the_same_seed_and_differ_from_it() {
        let seed = b"a seed of some length".to_vec();
        let a = mutations(&seed, 50, &mut Rng::new(7));
        let b = mutations(&seed, 50, &mut Rng::new(7));
        assert_eq!(a, b);
        assert!(a.iter().filter(|m| **m != seed).count() > 40);
    }
}
