//! The LC-trie agrees with its references: a linear scan on small tables,
//! the binary trie on millions of random addresses over a generated table
//! and over the full Internet table when it is beside the repository; edge
//! cases (default route, /32s, nesting, empty table, duplicates); the
//! export round trip and its refusal of broken arrays.

use unet_router::bintrie::linear_lookup;
use unet_router::table::{self, generated, Route, SplitMix};
use unet_router::{BinTrie, LcTrie, Params};

/// Random addresses, half of them inside a random route (so that deep
/// prefixes are hit, not only the default's gaps).
fn addresses(routes: &[Route], n: usize, seed: u64) -> impl Iterator<Item = u32> + '_ {
    let mut rng = SplitMix(seed);
    (0..n).map(move |i| {
        let a = rng.next_u32();
        if i % 2 == 0 || routes.is_empty() {
            a
        } else {
            let r = routes[rng.below(routes.len() as u32) as usize];
            r.prefix | (a & !table::mask(r.len))
        }
    })
}

fn check_bintrie(routes: &[Route], t: &LcTrie, n: usize, seed: u64) {
    let b = BinTrie::build(routes);
    let addrs: Vec<u32> = addresses(routes, n, seed).collect();
    for &a in &addrs {
        assert_eq!(t.lookup(a), b.lookup(a), "address {a:#010x}");
    }
    // Batches give the same answers.
    for c in addrs.chunks_exact(8) {
        let batch = t.lookup_batch::<8>(c.try_into().unwrap());
        for (&a, got) in c.iter().zip(batch) {
            assert_eq!(got, b.lookup(a), "address {a:#010x} in a batch");
        }
    }
}

fn check_linear(routes: &[Route], n: usize, seed: u64) {
    let t = LcTrie::build(routes).unwrap();
    for a in addresses(routes, n, seed) {
        assert_eq!(t.lookup(a), linear_lookup(routes, a), "address {a:#010x}");
    }
}

#[test]
fn small_tables_agree_with_a_linear_scan() {
    for (n, seed) in [(1, 1), (2, 2), (3, 3), (10, 4), (100, 5), (1000, 6)] {
        let mut routes = generated(n, seed, 8);
        check_linear(&routes, 20_000, seed);
        routes.push(Route::new(0, 0, 99));
        check_linear(&routes, 20_000, seed + 100);
    }
}

#[test]
fn a_generated_table_agrees_with_the_binary_trie_on_millions_of_addresses() {
    let routes = generated(200_000, 42, 16);
    let t = LcTrie::build(&routes).unwrap();
    check_bintrie(&routes, &t, 4_000_000, 7);
    // Other shapes of the same table: no level compression to speak of,
    // a dense one, and a small root.
    for p in [
        Params {
            fill: 1.0,
            root_branch: 0,
        },
        Params {
            fill: 0.25,
            root_branch: 18,
        },
        Params {
            fill: 0.5,
            root_branch: 4,
        },
    ] {
        let t = LcTrie::build_with(&routes, p).unwrap();
        check_bintrie(&routes, &t, 500_000, 8);
    }
}

#[test]
fn edge_cases() {
    // An empty table routes nothing.
    let t = LcTrie::build(&[]).unwrap();
    assert_eq!(t.lookup(0), None);
    assert_eq!(t.lookup_batch(&[0, 1]), [None, None]);
    assert_eq!(t.lookup(u32::MAX), None);
    // The default route alone routes everything.
    let t = LcTrie::build(&[Route::new(0, 0, 5)]).unwrap();
    assert_eq!(t.lookup(0x0102_0304), Some(5));
    assert_eq!(t.lookup(u32::MAX), Some(5));
    // /32s beside each other and a /31 over two of them.
    let routes = [
        Route::new(0x0a00_0000, 32, 1),
        Route::new(0x0a00_0001, 32, 2),
        Route::new(0x0a00_0002, 31, 3),
        Route::new(0xffff_ffff, 32, 4),
        Route::new(0, 0, 0),
    ];
    let t = LcTrie::build(&routes).unwrap();
    assert_eq!(t.lookup(0x0a00_0000), Some(1));
    assert_eq!(t.lookup(0x0a00_0001), Some(2));
    assert_eq!(t.lookup(0x0a00_0002), Some(3));
    assert_eq!(t.lookup(0x0a00_0003), Some(3));
    assert_eq!(t.lookup(0x0a00_0004), Some(0));
    assert_eq!(t.lookup(0xffff_ffff), Some(4));
    assert_eq!(t.lookup(0xffff_fffe), Some(0));
    // Nested prefixes, each more specific one inside the last.
    let nested: Vec<Route> = (0..=32u8)
        .step_by(4)
        .map(|l| Route::new(0xc0a8_0101, l, u32::from(l)))
        .collect();
    check_linear(&nested, 50_000, 9);
    let t = LcTrie::build(&nested).unwrap();
    assert_eq!(t.lookup(0xc0a8_0101), Some(32));
    assert_eq!(t.lookup(0xc0a8_0100), Some(28));
    assert_eq!(t.lookup(0x0000_0000), Some(0));
    // Duplicate prefixes: the last given wins, as in the binary trie.
    let dups = [
        Route::new(0x0a00_0000, 8, 1),
        Route::new(0x0a01_0000, 16, 2),
        Route::new(0x0aff_0000, 8, 3),
    ];
    let t = LcTrie::build(&dups).unwrap();
    assert_eq!(t.lookup(0x0a02_0000), Some(3));
    assert_eq!(t.lookup(0x0a01_0000), Some(2));
    assert_eq!(BinTrie::build(&dups).lookup(0x0a02_0000), Some(3));
    assert_eq!(linear_lookup(&dups, 0x0a02_0000), Some(3));
    // A table of /32s only, and one of /1s.
    let hosts: Vec<Route> = (0..5000u32)
        .map(|i| Route::new(i.wrapping_mul(0x9e37_79b9), 32, i % 7))
        .collect();
    check_linear(&hosts, 20_000, 10);
    check_linear(&[Route::new(0, 1, 1), Route::new(1 << 31, 1, 2)], 1000, 11);
    // Runs of 2^k neighbouring /32s, each a node whose children are one
    // entry each: leaf blocks up to 2^7, then an inner node above them.
    for k in [1u32, 2, 7, 8, 10] {
        let run: Vec<Route> = (0..1u32 << k)
            .map(|i| Route::new(0x0a0b_0000 + i, 32, i % 5))
            .chain([Route::new(0x0a00_0000, 8, 7)])
            .collect();
        check_linear(&run, 20_000, 12);
        // Without a wide root: the root, its two children, the run's
        // node's children when it cannot be a block.
        let p = Params {
            fill: 0.75,
            root_branch: 0,
        };
        let t = LcTrie::build_with(&run, p).unwrap();
        let children = if k <= 7 { 0 } else { 1 << k };
        assert_eq!(t.counts().0, 3 + children, "2^{k} /32s");
        for a in addresses(&run, 5000, 13) {
            assert_eq!(t.lookup(a), linear_lookup(&run, a), "address {a:#010x}");
        }
    }
}

#[test]
fn bytes_are_counted_and_a_thousand_routes_fit_in_20_kb() {
    let routes = generated(1000, 3, 16);
    let t = LcTrie::build(&routes).unwrap();
    let (nodes, base, pre) = t.counts();
    let a = t.arrays();
    let words = nodes + 2 * base + pre + a.hops.len();
    assert_eq!(t.bytes(), words * 4 + std::mem::size_of::<LcTrie>());
    assert_eq!(base + pre, 1000);
    assert!(t.bytes() < 20_000, "{} bytes", t.bytes());
    // Of the leaves, blocks of several entries and leaves that hold
    // their answer (kinds 24-30 and 23).
    let kinds: Vec<u32> = a.trie.iter().map(|n| n >> 27).collect();
    assert!(kinds.iter().any(|k| (24..31).contains(k)), "{kinds:?}");
    assert!(kinds.contains(&23), "{kinds:?}");
}

#[test]
fn the_export_reads_back_and_refuses_broken_arrays() {
    let routes = generated(5000, 4, 16);
    let t = LcTrie::build(&routes).unwrap();
    let bytes = t.to_le_bytes();
    assert_eq!(&bytes[..4], b"LCT2");
    assert_eq!(
        bytes.len(),
        4 + 20 + t.bytes() - std::mem::size_of::<LcTrie>()
    );
    assert_eq!(LcTrie::from_le_bytes(&bytes), Some(t.clone()));
    assert_eq!(LcTrie::from_le_bytes(&bytes[..bytes.len() - 4]), None);
    assert_eq!(LcTrie::from_le_bytes(&bytes[1..]), None);
    // Each word of the arrays in turn set to all ones: refused, or (where
    // the value is still consistent) looked up without a fault.
    let mut rng = SplitMix(5);
    for _ in 0..2000 {
        let mut b = bytes.clone();
        let at = 24 + 4 * rng.below(((b.len() - 24) / 4) as u32) as usize;
        let w = rng.next_u32().to_le_bytes();
        b[at..at + 4].copy_from_slice(&w);
        if let Some(t) = LcTrie::from_le_bytes(&b) {
            for a in addresses(&routes, 200, 6) {
                let _ = t.lookup(a);
            }
        }
    }
}

#[test]
fn the_full_table_agrees_with_the_binary_trie_when_present() {
    let routes = match table::full_table(16) {
        Ok(r) => r,
        Err(table::TableError::Absent(p)) => {
            eprintln!(
                "SKIPPED: the full table is not at {} (the shared data beside \
                 the repository)",
                p.display()
            );
            return;
        }
        Err(e) => panic!("{e}"),
    };
    assert_eq!(routes.len(), 901_899);
    let t = LcTrie::build(&routes).unwrap();
    let per_prefix = t.bytes() as f64 / routes.len() as f64;
    eprintln!(
        "full table: {} bytes ({per_prefix:.2} a prefix), nodes/base/pre {:?}, depth {}",
        t.bytes(),
        t.counts(),
        t.depth()
    );
    check_bintrie(&routes, &t, 3_000_000, 12);
}

#[test]
fn a_table_past_the_info_words_fields_is_refused() {
    // 2^20 next hops leave 6 bits for the nested prefixes' index: 63 fit,
    // 64 do not.
    let nested = |n: u32| -> Vec<Route> {
        let mut routes: Vec<Route> = (0..1u32 << 20)
            .map(|i| Route::new(0x8000_0000 | (i << 8), 24, i))
            .collect();
        // Nested prefixes: a /16 over a /24 of each of the first n /16s.
        routes.extend((0..n).map(|i| Route::new(0x8000_0000 | (i << 16), 16, 0)));
        routes
    };
    let t = LcTrie::build(&nested(63)).unwrap();
    assert_eq!(t.counts().2, 63);
    assert_eq!(t.lookup(0x8000_0105), Some(1));
    assert_eq!(t.lookup(0x8001_ff05), Some(0x1ff));
    let e = LcTrie::build(&nested(64)).unwrap_err();
    assert!(e.to_string().contains("64 nested prefixes"), "{e}");
}
