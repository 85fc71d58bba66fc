//! Route tables loaded into a SPINE extension (the SPINE paper's router,
//! section 5.2): a table built on the host (an LC-trie's export) is
//! handed to an extension, whose handler looks destinations up in it with
//! the router's own Java lookup (`extensions/router/Router.java`'s, made
//! a handler here); a newer table replaces it while messages flow, every
//! answer coming from one whole version; the table quotas refuse what is
//! over them; hostile bytes are refused and change nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use unet::spine::ExtensionOptions;
use unet::{EndpointConfig, EngineConfig, Error, Session};
use unet_router::table::{generated, Route, SplitMix};
use unet_router::LcTrie;

mod common;
use common::{engine_with, javac, recv_am, repo, wait_listing};

/// The extension's handler number.
const LOOKUP: u16 = 64;
/// Addresses a message carries (4 bytes each).
const BATCH: usize = 16;
/// The table quotas (`spine/tables.rs`).
const EXT_QUOTA: u64 = 32 << 20;
const PROC_QUOTA: u64 = 64 << 20;

/// `TableLookup`: `Router.java` (its own handlers not installed) with a
/// handler that takes table 0's
/// parts at its start, looks up each address of its message and answers
/// `version` then the next hop (or -1) of each, as little-endian ints
/// (asked for nothing, it asks for a part that does not exist).
fn class() -> &'static [u8] {
    static CLASS: OnceLock<Vec<u8>> = OnceLock::new();
    CLASS.get_or_init(|| {
        let src = std::fs::read_to_string(repo().join("extensions/router/Router.java"))
            .expect("extensions/router/Router.java");
        let body = src.rfind('}').map(|end| &src[..end]).expect("a class body");
        let src = format!(
            "{}{}}}\n",
            body.replace("public class Router {", "public class TableLookup {")
                .replace(
                    "static void init(int first)",
                    "static void routerInit(int first)"
                ),
            r#"
    static byte[] out;

    static void init(int first) {
        out = new byte[4 + 4 * 60];
        unet.spine.Spine.addHandler("onLookup", first, first);
    }

    static void put(int at, int v) {
        out[at] = (byte) v;
        out[at + 1] = (byte) (v >> 8);
        out[at + 2] = (byte) (v >> 16);
        out[at + 3] = (byte) (v >> 24);
    }

    static void onLookup(int self, int msg) {
        if (unet.spine.Spine.argsLength(msg) == 0) {
            unet.spine.Spine.table(0, 5);
        }
        int[] meta = unet.spine.Spine.table(0, unet.spine.Spine.TABLE_META);
        trie = unet.spine.Spine.table(0, unet.spine.Spine.TABLE_TRIE);
        base = unet.spine.Spine.table(0, unet.spine.Spine.TABLE_BASE);
        pre = unet.spine.Spine.table(0, unet.spine.Spine.TABLE_PRE);
        hops = unet.spine.Spine.table(0, unet.spine.Spine.TABLE_HOPS);
        nhBits = meta[0];
        put(0, meta[1]);
        int n = unet.spine.Spine.argsLength(msg) / 4;
        for (int i = 0; i < n; i++) {
            put(4 + 4 * i, lookup(unet.spine.Spine.argInt(msg, 4 * i)));
        }
        unet.spine.Spine.reply(msg, self, out, 0, 4 + 4 * n);
    }
"#
        );
        let dir = std::env::temp_dir().join(format!("unet-spine-tables-{}", std::process::id()));
        javac(&dir, &[], &[("TableLookup", &src)])
            .remove("TableLookup")
            .expect("TableLookup.class")
    })
}

fn engine() -> (unet::Engine, Session) {
    engine_with(EngineConfig::default())
}

/// Load `TableLookup` with a budget the interpreter's lookups fit in.
fn load(s: &Session, name: &str, first: u16) -> u32 {
    let opts = ExtensionOptions {
        name: name.into(),
        arg: i32::from(first),
        budget_us: 2000,
        domains: Vec::new(),
    };
    s.load_extension(class(), opts).unwrap().id
}

/// Destinations: half inside a route of `routes`, half anywhere.
fn destinations(routes: &[Route], n: usize, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix(seed);
    (0..n)
        .map(|i| {
            let a = rng.next_u32();
            if i % 2 == 0 {
                return a;
            }
            let r = routes[rng.below(routes.len() as u32) as usize];
            r.prefix | (a & !unet_router::table::mask(r.len))
        })
        .collect()
}

/// Ask the extension to look `addrs` up: (version, answers).
fn ask(ep: &mut unet::Endpoint, addrs: &[u32]) -> (u32, Vec<i32>) {
    let args: Vec<u8> = addrs.iter().flat_map(|a| a.to_le_bytes()).collect();
    ep.send_am(LOOKUP, &args, &[]).unwrap();
    answer(ep)
}

fn answer(ep: &mut unet::Endpoint) -> (u32, Vec<i32>) {
    let (h, a, _) = recv_am(ep, Duration::from_secs(10));
    assert_eq!(h, LOOKUP);
    let ints: Vec<i32> = a
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    (ints[0] as u32, ints[1..].to_vec())
}

fn want(t: &LcTrie, a: u32) -> i32 {
    t.lookup(a).map_or(-1, |h| h as i32)
}

/// Two tables whose answers differ: other routes, next hops 0..16 and
/// 100..116.
fn two_tables(n: usize) -> (Vec<Route>, Vec<Route>) {
    let a = generated(n, 31, 16);
    let b: Vec<Route> = generated(n, 32, 16)
        .into_iter()
        .map(|r| Route::new(r.prefix, r.len, r.next_hop + 100))
        .collect();
    (a, b)
}

#[test]
fn a_handler_looks_destinations_up_in_the_table_it_was_handed() {
    let (_e, s) = engine();
    let ext = load(&s, "lookup", LOOKUP);
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    // No table yet: the handler's lookup faults on the null part.
    ep.send_am(LOOKUP, &[0; 4], &[]).unwrap();
    wait_listing(&s, "the lookup without a table faulted", |l| {
        l.extensions[0].handlers[0].terminated() == 1
    });
    let routes = generated(20_000, 33, 16);
    let t = LcTrie::build(&routes).unwrap();
    let loaded = s.load_table(ext, 0, &t.to_le_bytes()).unwrap();
    assert_eq!(loaded.version, 1);
    let a = t.arrays();
    let words = a.trie.len() + a.base.len() + a.pre.len() + a.hops.len() + 2;
    assert_eq!(loaded.bytes as usize, words * 4 + 5 * 16);
    for c in destinations(&routes, 4000, 34).chunks(BATCH) {
        let (v, got) = ask(&mut ep, c);
        assert_eq!(v, 1);
        let w: Vec<i32> = c.iter().map(|&x| want(&t, x)).collect();
        assert_eq!(got, w);
    }
    let l = s.list_extensions().unwrap();
    assert_eq!(l.extensions[0].handlers[0].terminated(), 1);
    // A part that does not exist stops the invocation.
    ep.send_am(LOOKUP, &[], &[]).unwrap();
    let l = wait_listing(&s, "the bad part faulted", |l| {
        l.extensions[0].handlers[0].terminated() == 2
    });
    let why = &l.extensions[0].last_fault;
    assert!(why.contains("no table part 5 (0 to 4)"), "{why}");
    assert_eq!(ext, l.extensions[0].id);
}

#[test]
fn a_table_replaced_while_messages_flow_answers_from_one_whole_version() {
    let (_e, s) = engine();
    let ext = load(&s, "lookup", LOOKUP);
    let (ra, rb) = two_tables(50_000);
    let ta = LcTrie::build(&ra).unwrap();
    let tb = LcTrie::build(&rb).unwrap();
    let (ba, bb) = (ta.to_le_bytes(), tb.to_le_bytes());
    assert_eq!(s.load_table(ext, 0, &ba).unwrap().version, 1);
    let tables = Arc::new((ta, tb));
    let mut addrs = destinations(&ra, 20_000, 35);
    addrs.extend(destinations(&rb, 20_000, 36));
    let stop = Arc::new(AtomicBool::new(false));
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    let flow = {
        let (tables, stop) = (tables.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seen = std::collections::BTreeSet::new();
            let mut batches = 0u64;
            let mut rng = SplitMix(37);
            // Four batches in flight at a time, until told to stop.
            let mut in_flight = Vec::new();
            while !stop.load(Ordering::Relaxed) || !in_flight.is_empty() {
                while in_flight.len() < 4 && !stop.load(Ordering::Relaxed) {
                    let at = rng.below((addrs.len() - BATCH) as u32) as usize;
                    let c = addrs[at..at + BATCH].to_vec();
                    let args: Vec<u8> = c.iter().flat_map(|a| a.to_le_bytes()).collect();
                    ep.send_am(LOOKUP, &args, &[]).unwrap();
                    in_flight.push(c);
                }
                let (v, got) = answer(&mut ep);
                let c = in_flight.remove(0);
                // Odd versions are table A, even ones table B.
                let t = if v % 2 == 1 { &tables.0 } else { &tables.1 };
                let w: Vec<i32> = c.iter().map(|&x| want(t, x)).collect();
                assert_eq!(got, w, "version {v}");
                seen.insert(v);
                batches += 1;
            }
            (seen, batches)
        })
    };
    // Twenty replacements, A and B in turn, each once answers came from
    // the last.
    for v in 2..=21u32 {
        let bytes = if v % 2 == 1 { &ba } else { &bb };
        let loaded = s.load_table(ext, 0, bytes).unwrap();
        assert_eq!(loaded.version, v);
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    let (seen, batches) = flow.join().unwrap();
    assert!(batches > 20, "{batches} batches");
    assert!(seen.len() >= 3, "answers came from versions {seen:?}");
    let l = s.list_extensions().unwrap();
    assert_eq!(l.extensions[0].handlers[0].terminated(), 0);
}

#[test]
fn a_replaced_table_is_freed_when_nothing_refers_to_it() {
    let (_e, s) = engine();
    let ext = load(&s, "lookup", LOOKUP);
    let routes = generated(200_000, 38, 16);
    let t = LcTrie::build(&routes).unwrap();
    let bytes = t.to_le_bytes();
    let first = s.load_table(ext, 0, &bytes).unwrap();
    // Far more than the quota in all, one at a time: each replaced one
    // is freed (no invocation holds it).
    let loads = 2 * EXT_QUOTA / first.bytes;
    for v in 2..=loads as u32 {
        assert_eq!(s.load_table(ext, 0, &bytes).unwrap().version, v);
    }
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    let c = destinations(&routes, BATCH, 39);
    let (v, got) = ask(&mut ep, &c);
    assert_eq!(v, loads as u32);
    assert_eq!(got, c.iter().map(|&x| want(&t, x)).collect::<Vec<_>>());
}

#[test]
fn tables_over_the_extension_or_process_quota_are_refused() {
    let (_e, s) = engine();
    let exts = [
        load(&s, "a", LOOKUP),
        load(&s, "b", LOOKUP + 1),
        load(&s, "c", LOOKUP + 2),
    ];
    let t = LcTrie::build(&generated(200_000, 40, 16)).unwrap();
    let bytes = t.to_le_bytes();
    let (mut total, mut refused) = (0u64, [0; 2]);
    let mut b = None;
    for &ext in &exts {
        let mut mine = 0u64;
        for n in 0..16 {
            let r = s.load_table(ext, n, &bytes);
            let Some(b) = b else {
                b = Some(r.unwrap().bytes);
                (mine, total) = (mine + b.unwrap(), total + b.unwrap());
                continue;
            };
            if mine + b > EXT_QUOTA {
                let e = r.unwrap_err().to_string();
                assert!(e.contains("over the extension's table quota"), "{e}");
                refused[0] += 1;
            } else if total + b > PROC_QUOTA {
                let e = r.unwrap_err().to_string();
                assert!(e.contains("over the process's table quota"), "{e}");
                refused[1] += 1;
            } else {
                assert_eq!(r.unwrap().bytes, b);
                (mine, total) = (mine + b, total + b);
            }
        }
    }
    assert!(refused[0] > 0 && refused[1] > 0, "{refused:?}");
    // Unloading one gives its share back.
    s.unload_extension(exts[0]).unwrap();
    s.load_table(exts[2], 15, &bytes).unwrap();
}

#[test]
fn hostile_tables_are_refused_and_change_nothing() {
    let (_e, s) = engine();
    let ext = load(&s, "lookup", LOOKUP);
    let routes = generated(5000, 41, 16);
    let t = LcTrie::build(&routes).unwrap();
    let good = t.to_le_bytes();
    s.load_table(ext, 0, &good).unwrap();
    let refused = |bytes: &[u8], n: u32, why: &str| match s.load_table(ext, n, bytes) {
        Err(Error::Rejected(e)) => assert!(e.contains(why), "{e}"),
        r => panic!("{r:?}, not refused for {why:?}"),
    };
    let export = "not an LC-trie export";
    refused(b"garbage", 0, export);
    refused(&[], 0, export);
    refused(&good[..good.len() - 4], 0, export);
    let mut old_magic = good.clone();
    old_magic[3] = b'1';
    refused(&old_magic, 0, export);
    // A node's address past the end of the nodes, a chain past the
    // prefix vector, a next hop past the table.
    let mut rng = SplitMix(42);
    let mut broken = 0;
    for _ in 0..200 {
        let mut b = good.clone();
        let at = 24 + 4 * rng.below(((b.len() - 24) / 4) as u32) as usize;
        b[at..at + 4].copy_from_slice(&rng.next_u32().to_le_bytes());
        if LcTrie::from_le_bytes(&b).is_none() {
            refused(&b, 0, export);
            broken += 1;
        }
    }
    assert!(broken > 100, "{broken}");
    refused(&good, 16, "table number 16");
    refused(
        &vec![0; (EXT_QUOTA + 1) as usize],
        1,
        "over the extension's table quota",
    );
    assert!(matches!(
        s.load_table(ext + 1, 0, &good),
        Err(Error::Engine(unet::ErrorCode::NoSuchExtension))
    ));
    // The table it had still answers, version 1.
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    let c = destinations(&routes, BATCH, 43);
    assert_eq!(
        ask(&mut ep, &c),
        (1, c.iter().map(|&x| want(&t, x)).collect())
    );
}
