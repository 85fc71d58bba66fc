//! SPINE's domains of extensions, end to end: an extension exports its
//! public static int methods into a domain named after it, a second one
//! granted that domain calls them from its handlers (in the exporter's
//! VM, within the caller's budget), and every link that cannot be made is
//! refused at load with what is missing. Extensions are compiled with
//! javac against the SDK, as in `spine.rs`.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use unet::{Endpoint, EndpointConfig, Engine, EngineConfig, Error, Session};

mod common;
use common::{engine_with, ext_opts as opts, javac, try_recv_am, wait_listing};

/// The exporter: loaded as `router`, it exports `lookup`, `build`,
/// `spin`, `divide` and `count` (public static, int parameters); `hidden`
/// is not public, `sum` takes an array: neither is exported.
const LOOKUP: &str = "\
import unet.spine.Spine;
public class Lookup {
    static int[] table;
    static int calls;
    static byte[] out;
    static void init(int base) {
        table = new int[256];
        for (int i = 0; i < 256; i++) { table[i] = i * 10 + base; }
        out = new byte[4];
    }
    public static int lookup(int addr) { calls++; return table[addr & 255]; }
    public static int count() { return calls; }
    public static void build(int n) { table = new int[n]; }
    public static int spin(int x) { while (x != 0) { x++; } return x; }
    public static int divide(int x) { return 1000 / x; }
    static int hidden(int x) { return x; }
    public static int sum(byte[] a) { return a.length; }
}
";

/// Extensions that import from `router`, as (class, source).
const IMPORTERS: &[(&str, &str)] = &[
    (
        "Client",
        "import unet.spine.Spine;
public class Client {
    static byte[] out;
    static int own(int x) { return x + 1; }
    static void init(int n) {
        out = new byte[8];
        Spine.addHandler(\"onAsk\", n, 0);
        Spine.addHandler(\"onSpin\", n + 1, 0);
        Spine.addHandler(\"onDivide\", n + 2, 0);
        Spine.addHandler(\"onBench\", n + 3, 0);
    }
    static void put(int off, int v) {
        out[off] = (byte) v; out[off + 1] = (byte) (v >> 8);
        out[off + 2] = (byte) (v >> 16); out[off + 3] = (byte) (v >> 24);
    }
    static void onAsk(int ctx, int msg) {
        put(0, Lookup.lookup(Spine.argInt(msg, 0)));
        put(4, Lookup.count());
        Spine.reply(msg, 0, out, 0, 8);
    }
    static void onSpin(int ctx, int msg) { Lookup.spin(1); }
    static void onDivide(int ctx, int msg) { put(0, Lookup.divide(Spine.argInt(msg, 0))); }
    /* n calls of lookup, of own, or of nothing; the time in us. */
    static void onBench(int ctx, int msg) {
        int kind = Spine.argInt(msg, 0);
        int n = Spine.argInt(msg, 4);
        int s = 0;
        int t0 = Spine.nowMicros();
        if (kind == 0) { for (int i = 0; i < n; i++) { s += Lookup.lookup(i); } }
        else if (kind == 1) { for (int i = 0; i < n; i++) { s += own(i); } }
        else { for (int i = 0; i < n; i++) { s += i; } }
        put(0, Spine.nowMicros() - t0);
        put(4, s);
        Spine.reply(msg, 0, out, 0, 8);
    }
}
",
    ),
    (
        "Builds",
        "import unet.spine.Spine;
public class Builds {
    static void init(int n) { Lookup.build(16); Spine.addHandler(\"h\", n, 0); }
    static void h(int ctx, int msg) { Lookup.lookup(1); }
}
",
    ),
    (
        "BuildsInHandler",
        "import unet.spine.Spine;
public class BuildsInHandler {
    static void init(int n) { Spine.addHandler(\"h\", n, 0); }
    static void h(int ctx, int msg) { helper(); }
    static void helper() { Lookup.build(4); }
}
",
    ),
    (
        "Hidden",
        "import unet.spine.Spine;
public class Hidden {
    static void init(int n) { Spine.addHandler(\"h\", n, 0); }
    static void h(int ctx, int msg) { Lookup.hidden(1); }
}
",
    ),
    (
        "Arrays",
        "import unet.spine.Spine;
public class Arrays {
    static byte[] a;
    static void init(int n) { a = new byte[1]; Spine.addHandler(\"h\", n, 0); }
    static void h(int ctx, int msg) { Lookup.sum(a); }
}
",
    ),
];

/// An importer compiled against a stub of `Lookup` whose `lookup` takes
/// two ints: its call does not match what `router` exports.
const STUB: &str =
    "public class Lookup { public static int lookup(int a, int b) { return a + b; } }\n";
const WRONG_SIG: &str = "\
import unet.spine.Spine;
public class WrongSig {
    static void init(int n) { Spine.addHandler(\"h\", n, 0); }
    static void h(int ctx, int msg) { Lookup.lookup(1, 2); }
}
";

/// Every class of these tests, compiled once.
fn classes() -> &'static HashMap<String, Vec<u8>> {
    static CLASSES: OnceLock<HashMap<String, Vec<u8>>> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("unet-exports-{}", std::process::id()));
        let mut all = vec![("Lookup", LOOKUP)];
        all.extend_from_slice(IMPORTERS);
        let mut m = javac(&dir.join("a"), &[], &all);
        let stubbed = javac(
            &dir.join("b"),
            &[],
            &[("Lookup", STUB), ("WrongSig", WRONG_SIG)],
        );
        m.insert("WrongSig".into(), stubbed["WrongSig"].clone());
        let _ = std::fs::remove_dir_all(&dir);
        m
    })
}

fn class(name: &str) -> &'static [u8] {
    &classes()[name]
}

fn engine() -> (Engine, Session) {
    engine_with(EngineConfig::default())
}

/// The next active message on `ep`: its handler and arguments.
fn recv_am(ep: &mut Endpoint, s: &Session) -> (u16, Vec<u8>) {
    let (h, a, _) = try_recv_am(ep, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("no answer ({e:?}): {:#?}", s.list_extensions()));
    (h, a)
}

fn int_at(b: &[u8], off: usize) -> i32 {
    i32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

#[test]
fn a_handler_calls_a_lookup_another_extension_exports_and_replies_with_its_result() {
    let (_e, s) = engine();
    let router = s
        .load_extension(class("Lookup"), opts("router", 3, &[]))
        .unwrap();
    assert!(router.handlers.is_empty(), "an exporter needs no handler");
    // A budget that a first, cold invocation on a busy machine keeps
    // within (the watchdog's part is the next test).
    let mut o = opts("client", 100, &["router"]);
    o.budget_us = 1000;
    let client = s.load_extension(class("Client"), o).unwrap();
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    for (i, addr) in [7, 300, -1].into_iter().enumerate() {
        ep.send_am(100, &i32::to_le_bytes(addr), &[]).unwrap();
        let (h, a) = recv_am(&mut ep, &s);
        // The lookup ran in the exporter's VM: its table (made by its own
        // init with its argument, 3) and its call counter.
        assert_eq!(h, 0);
        assert_eq!(int_at(&a, 0), (addr & 255) * 10 + 3, "lookup({addr})");
        assert_eq!(int_at(&a, 4), i as i32 + 1, "the exporter's counter");
    }

    // An importer's initialiser may call an export that allocates (in
    // the exporter's scratch); a handler may not (see the rejections).
    let builds = s
        .load_extension(class("Builds"), opts("builds", 110, &["router"]))
        .unwrap();

    let l = s.list_extensions().unwrap();
    let x = l.extensions.iter().find(|x| x.id == router.id).unwrap();
    let methods: Vec<(&str, bool)> = x
        .exports
        .iter()
        .map(|e| (e.method.as_str(), e.ephemeral))
        .collect();
    assert_eq!(
        methods,
        [
            ("lookup(I)I", true),
            ("count()I", true),
            ("build(I)V", false),
            ("spin(I)I", true),
            ("divide(I)I", true),
        ]
    );
    assert_eq!(
        (x.exports[0].calls, x.exports[1].calls, x.exports[2].calls),
        (3, 3, 1)
    );
    let c = l.extensions.iter().find(|x| x.id == client.id).unwrap();
    assert_eq!(c.imports, ["router"]);
    assert!(c.exports.is_empty());
    assert_eq!((l.msgs_live, l.bufs_live, l.dead_calls), (0, 0, 0));

    // The exporter stays while importers are linked to it.
    let refused = format!(
        "extension {} exports domain \"router\" to extensions {}, {}: unload them first",
        router.id, client.id, builds.id
    );
    match s.unload_extension(router.id) {
        Err(Error::Rejected(why)) => assert_eq!(why, refused),
        r => panic!("unloading the exporter: {r:?}"),
    }
    s.unload_extension(client.id).unwrap();
    s.unload_extension(builds.id).unwrap();
    s.unload_extension(router.id).unwrap();
    // Its domain is gone with it.
    match s.load_extension(class("Client"), opts("client", 100, &["router"])) {
        Err(Error::Rejected(why)) => assert_eq!(why, "no domain \"router\" on this adapter"),
        r => panic!("{r:?}"),
    }
}

#[test]
fn links_that_cannot_be_made_are_refused_at_load_with_what_is_missing() {
    let (_e, s) = engine();
    s.load_extension(class("Lookup"), opts("router", 0, &[]))
        .unwrap();
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "Client",
            &[],
            "method onAsk(II)V at offset 6: invokestatic Lookup.lookup(I)I: class Lookup is \
             exported by domain \"router\", which is not granted to this class",
        ),
        ("Client", &["routr"], "no domain \"routr\" on this adapter"),
        (
            "Hidden",
            &["router"],
            "method h(II)V at offset 1: invokestatic Lookup.hidden(I)I: domain \"router\" \
             exports no method hidden",
        ),
        (
            "Arrays",
            &["router"],
            "method h(II)V at offset 3: invokestatic Lookup.sum([B)I: domain \"router\" \
             exports no method sum",
        ),
        (
            "WrongSig",
            &["router"],
            "method h(II)V at offset 2: invokestatic Lookup.lookup(II)I: domain \"router\" \
             exports lookup(I)I, not lookup(II)I",
        ),
        (
            "BuildsInHandler",
            &["router"],
            "class rejected: handler h: calls Lookup.build (not ephemeral) at offset 1 of helper",
        ),
    ];
    for (name, domains, want) in cases {
        match s.load_extension(class(name), opts(name, 200, domains)) {
            Err(Error::Rejected(why)) => assert_eq!(&why, want, "{name} granted {domains:?}"),
            r => panic!("{name} granted {domains:?}: {r:?}"),
        }
    }
    // A second exporter of the domain, or of the class, is refused too.
    for (name, want) in [
        ("router", "domain \"router\" is exported by extension 1"),
        (
            "router2",
            "class Lookup is exported by domain \"router\" already",
        ),
    ] {
        match s.load_extension(class("Lookup"), opts(name, 0, &[])) {
            Err(Error::Rejected(why)) => assert_eq!(why, want),
            r => panic!("{r:?}"),
        }
    }
    let l = s.list_extensions().unwrap();
    assert_eq!(l.extensions.len(), 1, "nothing else loaded: {l:#?}");
}

#[test]
fn a_fault_in_an_export_ends_the_calling_invocation_and_is_counted_on_both() {
    let (_e, s) = engine();
    // The exporter's own budget is long: a call runs within the
    // caller's (100 us), not within the exporter's (10 ms).
    let mut o = opts("router", 0, &[]);
    o.budget_us = 10_000;
    let router = s.load_extension(class("Lookup"), o).unwrap();
    let mut o = opts("client", 100, &["router"]);
    o.budget_us = 100;
    let client = s.load_extension(class("Client"), o).unwrap();
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    const SPINS: u64 = 20;
    for _ in 0..SPINS {
        ep.send_am(101, &[], &[]).unwrap();
    }
    ep.send_am(102, &i32::to_le_bytes(0), &[]).unwrap();
    // A caller that calls a lookup 2^30 times is stopped by its own
    // watchdog: the calls' fuel is charged to it.
    let mut forever = 0i32.to_le_bytes().to_vec();
    forever.extend_from_slice(&(1i32 << 30).to_le_bytes());
    ep.send_am(103, &forever, &[]).unwrap();
    // The caller still answers.
    ep.send_am(100, &i32::to_le_bytes(5), &[]).unwrap();
    let (_, a) = recv_am(&mut ep, &s);
    assert_eq!(int_at(&a, 0), 50);

    let l = wait_listing(&s, "the terminations counted", |l| {
        l.extensions
            .iter()
            .any(|x| x.id == client.id && x.handlers[1].invocations == SPINS)
    });
    let c = l.extensions.iter().find(|x| x.id == client.id).unwrap();
    let (spin, divide, many) = (&c.handlers[1], &c.handlers[2], &c.handlers[3]);
    assert_eq!(spin.terminated_for("timeout"), SPINS, "{c:#?}");
    assert_eq!(divide.terminated_for("arith"), 1, "{c:#?}");
    assert_eq!(many.terminated_for("timeout"), 1, "{c:#?}");
    // Within the caller's budget: stops at the exporter's (10 ms) would
    // take 200 ms in all. Graded on the sum, which a few preempted
    // invocations on a busy machine do not push past half of that.
    println!(
        "runaway export under a 100 us caller: {} us mean, {} us longest",
        spin.total_ns / SPINS / 1000,
        spin.max_ns / 1000
    );
    assert!(spin.total_ns < SPINS * 5_000_000, "{spin:?}");

    let x = l.extensions.iter().find(|x| x.id == router.id).unwrap();
    let e = |m: &str| x.exports.iter().find(|e| e.method == m).unwrap();
    // The whole listing of both on a failure (this check failed once with
    // the caller's 20 timeouts counted, and did not recur).
    assert_eq!(
        e("spin(I)I").terminations,
        [("timeout".to_string(), SPINS)],
        "exporter {x:#?}\ncaller {c:#?}"
    );
    assert_eq!(e("divide(I)I").terminations, [("arith".to_string(), 1)]);
    assert_eq!(
        e("divide(I)I").last_fault,
        format!(
            "called by extension {}: integer division by zero",
            client.id
        )
    );
    // The lookups the looping caller made all returned.
    assert!(e("lookup(I)I").calls > 1);
    assert!(e("lookup(I)I").terminations.is_empty());
    assert_eq!((l.msgs_live, l.bufs_live), (0, 0));
}

#[test]
fn when_an_exporters_owner_goes_its_importers_calls_fault_and_are_counted() {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let owner = Session::embedded(&e).unwrap();
    let s = Session::embedded(&e).unwrap();
    let router = owner
        .load_extension(class("Lookup"), opts("router", 0, &[]))
        .unwrap();
    let client = s
        .load_extension(class("Client"), opts("client", 100, &["router"]))
        .unwrap();
    drop(owner);
    wait_listing(&s, "the exporter gone", |l| {
        l.extensions.iter().all(|x| x.id != router.id)
    });
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    ep.send_am(100, &i32::to_le_bytes(5), &[]).unwrap();
    let l = wait_listing(&s, "the call counted", |l| l.dead_calls == 1);
    let c = l.extensions.iter().find(|x| x.id == client.id).unwrap();
    assert_eq!(c.handlers[0].terminated_for("native"), 1, "{c:#?}");
    assert_eq!(
        c.last_fault,
        "handler 100 faulted: native method failed: lookup was unloaded"
    );
    // The dead domain takes no new importers, and its name is free.
    match s.load_extension(class("Builds"), opts("builds", 110, &["router"])) {
        Err(Error::Rejected(why)) => assert_eq!(why, "no domain \"router\" on this adapter"),
        r => panic!("{r:?}"),
    }
    let again = s
        .load_extension(class("Lookup"), opts("router", 1, &[]))
        .unwrap();
    // The old link stays dead; the importer's unload frees it.
    s.unload_extension(client.id).unwrap();
    s.unload_extension(again.id).unwrap();
    assert!(s.list_extensions().unwrap().extensions.is_empty());
}

/// The cost of a call of another extension's export beside a call of a
/// method of the extension's own class and an empty loop: `cargo test
/// --release -p unet --test spine_exports -- --ignored --nocapture`.
/// Both compiled, on a machine shared with other builds: 32.3 ns a
/// cross-extension call, 2.4 ns an own call, 0.6 ns the loop alone (three
/// runs agreeing within 0.2 ns).
#[test]
#[ignore = "a measurement: run it alone, in a release build"]
fn bench_a_cross_extension_call_beside_an_own_call() {
    let (_e, s) = engine();
    s.load_extension(class("Lookup"), opts("router", 0, &[]))
        .unwrap();
    let mut o = opts("client", 100, &["router"]);
    o.budget_us = 10_000;
    s.load_extension(class("Client"), o).unwrap();
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    let n: i32 = 20_000;
    // Until both are compiled (each takes its code when it next runs).
    let end = Instant::now() + Duration::from_secs(10);
    while !s
        .list_extensions()
        .unwrap()
        .extensions
        .iter()
        .all(|x| x.compiled)
    {
        assert!(Instant::now() < end, "not compiled");
        let mut args = 0i32.to_le_bytes().to_vec();
        args.extend_from_slice(&1i32.to_le_bytes());
        ep.send_am(103, &args, &[]).unwrap();
        recv_am(&mut ep, &s);
    }
    let mut best = [u32::MAX; 3];
    for _ in 0..20 {
        for (kind, b) in best.iter_mut().enumerate() {
            let mut args = (kind as i32).to_le_bytes().to_vec();
            args.extend_from_slice(&n.to_le_bytes());
            ep.send_am(103, &args, &[]).unwrap();
            let (_, a) = recv_am(&mut ep, &s);
            *b = (*b).min(int_at(&a, 0) as u32);
        }
    }
    let ns = |us: u32| us as f64 * 1000.0 / n as f64;
    println!(
        "per call, best of 20 runs of {n}: cross-extension {:.1} ns, own method {:.1} ns, \
         loop alone {:.1} ns",
        ns(best[0]),
        ns(best[1]),
        ns(best[2])
    );
}
