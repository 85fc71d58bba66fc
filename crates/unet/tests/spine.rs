//! SPINE end to end: extensions compiled with javac against the SDK
//! (`java/applet-sdk`), loaded onto an embedded engine, driven by a host
//! endpoint's active messages: the worked example (`extensions/Echo.java`),
//! handlers that run away, fault or hoard buffers (each stopped or
//! reclaimed, counted and reported, with a neighbour's messages still
//! answered), and load-time rejections with their exact messages.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use unet::spine::ExtensionOptions;
use unet::{Endpoint, EndpointConfig, Engine, EngineConfig, Error, SendStatus, Session};

mod common;
use common::{engine_with, ext_opts, javac, repo, wait_listing};

/// Extensions used only by these tests, as (class, source).
const TEST_EXTENSIONS: &[(&str, &str)] = &[
    (
        "Runaway",
        "import unet.spine.Spine;\n\
         public class Runaway {\n\
         static int spins;\n\
         static void init(int base) { Spine.addHandler(\"onSpin\", base, 0); }\n\
         static void onSpin(int ctx, int msg) { while (true) { spins++; } }\n\
         }\n",
    ),
    (
        "Faulty",
        "import unet.spine.Spine;\n\
         public class Faulty {\n\
         static void init(int base) {\n\
           Spine.addHandler(\"onBadArg\", base, 0);\n\
           Spine.addHandler(\"onStale\", base + 1, 0);\n\
           Spine.addHandler(\"onDivide\", base + 2, 0);\n\
           Spine.addHandler(\"onStaleBulk\", base + 3, 0);\n\
           Spine.addHandler(\"onForgedLength\", base + 4, 0);\n\
           Spine.addHandler(\"onStaleSource\", base + 5, 0);\n\
           Spine.addHandler(\"onNothing\", base + 6, 0);\n\
         }\n\
         static int last;\n\
         static int lastBulk;\n\
         static int lastSource;\n\
         static void onBadArg(int ctx, int msg) { Spine.argByte(msg, 1000); }\n\
         static void onStale(int ctx, int msg) {\n\
           if (last != 0) { Spine.argsLength(last); }\n\
           last = msg;\n\
         }\n\
         static void onStaleBulk(int ctx, int msg) {\n\
           if (lastBulk != 0) { Spine.bulk(lastBulk); }\n\
           lastBulk = msg;\n\
         }\n\
         static void onForgedLength(int ctx, int msg) {\n\
           int b = Spine.bulk(msg);\n\
           if (Spine.bufferLength(b) == 3) { Spine.bufferLength(b + 1); }\n\
         }\n\
         static void onNothing(int ctx, int msg) { }\n\
         static void onStaleSource(int ctx, int msg) {\n\
           if (lastSource != 0) { Spine.source(lastSource); }\n\
           lastSource = msg;\n\
         }\n\
         static void onDivide(int ctx, int msg) { last = 1 / Spine.argsLength(msg); }\n\
         }\n",
    ),
    (
        "Hoarder",
        "import unet.spine.Spine;\n\
         public class Hoarder {\n\
         static int kept;\n\
         static int refused;\n\
         static void init(int base) { Spine.addHandler(\"onBulk\", base, 0); }\n\
         static void onBulk(int ctx, int msg) {\n\
           int b = Spine.bulk(msg);\n\
           if (Spine.keep(b) == 0) { kept++; } else { refused++; }\n\
         }\n\
         }\n",
    ),
    (
        "BadNumber",
        "import unet.spine.Spine;\n\
         public class BadNumber {\n\
         static void init(int n) { Spine.addHandler(\"h\", n, 0); }\n\
         static void h(int ctx, int msg) { }\n\
         }\n",
    ),
    (
        "Installs",
        "import unet.spine.Spine;\n\
         public class Installs {\n\
         static void init(int n) { Spine.addHandler(\"h\", n, 0); }\n\
         static void h(int ctx, int msg) { Spine.addHandler(\"h\", 99, 0); }\n\
         }\n",
    ),
    (
        "Allocates",
        "import unet.spine.Spine;\n\
         public class Allocates {\n\
         static byte[] a;\n\
         static void init(int n) { Spine.addHandler(\"h\", n, 0); }\n\
         static void h(int ctx, int msg) { a = new byte[4]; }\n\
         }\n",
    ),
    (
        "Imports",
        "import unet.spine.Spine;\n\
         public class Imports {\n\
         static void init(int n) { Spine.addHandler(\"h\", n, 0); }\n\
         static void h(int ctx, int msg) { unet.sle.Natives.nop(); }\n\
         }\n",
    ),
];

/// `extensions/` and [`TEST_EXTENSIONS`], compiled once (one javac run,
/// every lint an error): class name → class file.
fn classes() -> &'static HashMap<String, Vec<u8>> {
    static CLASSES: OnceLock<HashMap<String, Vec<u8>>> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("unet-spine-{}", std::process::id()));
        let mut files = Vec::new();
        for e in std::fs::read_dir(repo().join("extensions")).expect("extensions/") {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "java") {
                files.push(p);
            }
        }
        javac(&dir, &files, TEST_EXTENSIONS)
    })
}

fn class(name: &str) -> &'static [u8] {
    classes()
        .get(name)
        .unwrap_or_else(|| panic!("no extension {name}"))
}

fn opts(name: &str, arg: i32) -> ExtensionOptions {
    ext_opts(name, arg, &[])
}

fn engine() -> (Engine, Session) {
    engine_with(EngineConfig::default())
}

/// The next active message on `ep`: (handler, args, bulk).
fn recv_am(ep: &mut Endpoint) -> (u16, Vec<u8>, Vec<u8>) {
    common::recv_am(ep, Duration::from_secs(5))
}

#[test]
fn the_echo_example_answers_forwards_and_returns_bulk_data() {
    let (_e, s) = engine();
    let ext = s.load_extension(class("Echo"), opts("echo", 100)).unwrap();
    assert_eq!(ext.handlers, [100, 101, 102, 103]);
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();

    ep.send_am(100, b"ping", &[]).unwrap();
    assert_eq!(recv_am(&mut ep), (100, b"ping".to_vec(), vec![]));

    // Host -> onForward -> onDeliver -> host: two handlers on the path.
    ep.send_am(101, b"hop", &[]).unwrap();
    assert_eq!(recv_am(&mut ep), (102, b"hop".to_vec(), vec![]));

    let data: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    ep.send_am(103, b"bulk", &data).unwrap();
    let (h, a, b) = recv_am(&mut ep);
    let mut want = data.clone();
    want[0] += 1;
    assert_eq!((h, a, b), (103, b"bulk".to_vec(), want));

    let l = s.list_extensions().unwrap();
    let x = &l.extensions[0];
    assert_eq!((x.id, x.name.as_str()), (ext.id, "echo"));
    let calls: Vec<u64> = x.handlers.iter().map(|h| h.invocations).collect();
    assert_eq!(calls, [1, 1, 1, 1]);
    assert!(x.handlers.iter().all(|h| h.terminated() == 0));
    assert_eq!((l.msgs_live, l.bufs_live), (0, 0), "nothing held after");

    s.unload_extension(ext.id).unwrap();
    assert!(matches!(
        s.unload_extension(ext.id),
        Err(Error::Engine(unet::ErrorCode::NoSuchExtension))
    ));
    // Nobody has the number now: the send is refused at once.
    let pos = ep.send_am(100, b"ping", &[]).unwrap();
    let end = Instant::now() + Duration::from_secs(5);
    while ep.send_status(pos) == SendStatus::Pending {
        assert!(Instant::now() < end);
        std::thread::yield_now();
    }
    assert_eq!(ep.send_status(pos), SendStatus::SpineRefused);
}

#[test]
fn a_runaway_handler_is_stopped_each_time_and_its_neighbour_keeps_answering() {
    let (_e, s) = engine();
    let echo = s.load_extension(class("Echo"), opts("echo", 64)).unwrap();
    let run = s
        .load_extension(class("Runaway"), opts("runaway", 200))
        .unwrap();
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    let rounds = 50;
    for i in 0..rounds {
        ep.send_am(200, &[i as u8], &[]).unwrap();
        ep.send_am(64, &[i as u8], &[]).unwrap();
        // The neighbour answers every message though the runaway spins
        // on each of its own.
        assert_eq!(recv_am(&mut ep), (64, vec![i as u8], vec![]));
    }
    wait_listing(&s, "50 runaway invocations stopped", |l| {
        l.extensions
            .iter()
            .find(|x| x.id == run.id)
            .is_some_and(|x| x.handlers[0].terminated_for("timeout") == rounds)
    });
    let l = s.list_extensions().unwrap();
    let x = l.extensions.iter().find(|x| x.id == run.id).unwrap();
    let h = &x.handlers[0];
    assert_eq!(h.invocations, rounds);
    assert_eq!(
        x.last_fault,
        "handler 200 terminated: its time budget ran out"
    );
    // Each stopped within a budget of 10 µs plus JIVE's check interval:
    // far below a millisecond.
    assert!(h.max_ns < 1_000_000, "longest run {} ns", h.max_ns);
    let n = l.extensions.iter().find(|x| x.id == echo.id).unwrap();
    assert_eq!(n.handlers[0].invocations, rounds);
    assert_eq!(n.handlers[0].terminated(), 0);
}

#[test]
fn faulting_handlers_are_stopped_counted_and_reported() {
    let (_e, s) = engine();
    let f = s
        .load_extension(class("Faulty"), opts("faulty", 300))
        .unwrap();
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    // Compiled code is what calls the leaves below; the extension takes
    // its code when it next runs.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !s.list_extensions().unwrap().extensions[0].compiled {
        assert!(std::time::Instant::now() < end, "Faulty not compiled");
        ep.send_am(306, b"", &[]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    ep.send_am(300, b"x", &[]).unwrap();
    ep.send_am(301, b"x", &[]).unwrap(); // keeps its handle
    ep.send_am(301, b"x", &[]).unwrap(); // uses the stale one

    // The same with the natives compiled code calls directly (their
    // leaves): a stale or forged handle faults and is counted as through
    // the native itself.
    ep.send_am(303, b"x", &[]).unwrap();
    ep.send_am(303, b"x", &[]).unwrap(); // bulk() of the stale message
    ep.send_am(304, b"", &[1, 2, 3]).unwrap(); // its bulk's length, then a forged one
    ep.send_am(305, b"x", &[]).unwrap();
    ep.send_am(305, b"x", &[]).unwrap(); // source() of the stale message
    ep.send_am(302, b"", &[]).unwrap(); // 1 / 0
    wait_listing(&s, "six faults", |l| {
        l.extensions[0]
            .handlers
            .iter()
            .map(|h| h.terminated())
            .sum::<u64>()
            == 6
    });
    let l = s.list_extensions().unwrap();
    let x = &l.extensions[0];
    assert_eq!(x.id, f.id);
    assert_eq!(x.handlers[0].terminated_for("native"), 1);
    assert_eq!(x.handlers[1].invocations, 2);
    assert_eq!(x.handlers[1].terminated_for("native"), 1);
    assert_eq!(x.handlers[2].terminated_for("arith"), 1);
    for h in &x.handlers[3..6] {
        assert_eq!(h.terminated_for("native"), 1, "{h:?}");
    }
    assert_eq!(
        (x.handlers[3].invocations, x.handlers[5].invocations),
        (2, 2)
    );
    assert_eq!(l.bad_handles, 4, "each stale or forged handle is counted");
    assert_eq!(
        x.last_fault,
        "handler 302 faulted: integer division by zero"
    );
    assert_eq!((l.msgs_live, l.bufs_live), (0, 0));
}

#[test]
fn a_hoarder_is_capped_and_what_it_kept_comes_back_when_its_client_goes() {
    let (_e, s) = engine();
    let other = Session::embedded(&_e).unwrap();
    let h = other
        .load_extension(class("Hoarder"), opts("hoarder", 400))
        .unwrap();
    let echo = s.load_extension(class("Echo"), opts("echo", 64)).unwrap();
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    let sent = 300u64;
    for i in 0..sent {
        while ep.send_am(400, b"", &[i as u8; 100]).is_err() {
            std::thread::yield_now();
        }
    }
    wait_listing(&s, "every bulk message handled", |l| {
        l.extensions
            .iter()
            .find(|x| x.id == h.id)
            .is_some_and(|x| x.handlers[0].invocations == sent)
    });
    let l = s.list_extensions().unwrap();
    let x = l.extensions.iter().find(|x| x.id == h.id).unwrap();
    assert_eq!(x.kept, 256, "kept up to its cap");
    assert_eq!(l.keeps_refused, sent - 256);
    assert_eq!(l.bufs_live, 256);
    // The neighbour still answers.
    ep.send_am(64, b"still", &[]).unwrap();
    assert_eq!(recv_am(&mut ep), (64, b"still".to_vec(), vec![]));
    drop(other);
    wait_listing(&s, "the hoarder reclaimed with its client", |l| {
        l.extensions.len() == 1 && l.bufs_live == 0
    });
    assert_eq!(s.list_extensions().unwrap().extensions[0].id, echo.id);
}

#[test]
fn loads_are_refused_with_exact_messages() {
    let (_e, s) = engine();
    let rejected = |name: &str, arg: i32| match s.load_extension(class(name), opts(name, arg)) {
        Err(Error::Rejected(why)) => why,
        r => panic!("{name}: {r:?}"),
    };
    assert_eq!(
        rejected("BadNumber", 20),
        "handler number 20 is out of range (64..=1023)"
    );
    assert_eq!(
        rejected("BadNumber", 1024),
        "handler number 1024 is out of range (64..=1023)"
    );
    s.load_extension(class("BadNumber"), opts("first", 500))
        .unwrap();
    assert_eq!(rejected("BadNumber", 500), "handler number 500 is taken");
    assert_eq!(
        rejected("Installs", 501),
        "class rejected: handler h: calls unet/spine/Spine.addHandler (not ephemeral) at offset 5 of h"
    );
    assert_eq!(
        rejected("Allocates", 502),
        "class rejected: handler h: allocates (newarray) at offset 1 of h"
    );
    assert_eq!(
        rejected("Imports", 503),
        "method h(II)V at offset 0: invokestatic unet/sle/Natives.nop()V \
         is not a method of this class or a granted native"
    );
    let grant = ExtensionOptions {
        domains: vec!["router".into()],
        ..opts("echo", 600)
    };
    match s.load_extension(class("Echo"), grant) {
        Err(Error::Rejected(why)) => assert_eq!(why, "no domain \"router\" on this adapter"),
        r => panic!("{r:?}"),
    }
    let slow = ExtensionOptions {
        budget_us: 20_000,
        ..opts("echo", 600)
    };
    match s.load_extension(class("Echo"), slow) {
        Err(Error::Rejected(why)) => assert_eq!(why, "a budget of 20000 µs (at most 10000 µs)"),
        r => panic!("{r:?}"),
    }
    // Nothing of the refused loads stays installed.
    let l = s.list_extensions().unwrap();
    assert_eq!(l.extensions.len(), 1);
    assert_eq!(l.extensions[0].handlers[0].number, 500);
}

#[test]
fn a_process_holds_at_most_eight_extensions() {
    let (e, s) = engine();
    let ids: Vec<u32> = (0..8)
        .map(|i| {
            s.load_extension(class("BadNumber"), opts("n", 700 + i))
                .unwrap()
                .id
        })
        .collect();
    match s.load_extension(class("BadNumber"), opts("n", 708)) {
        Err(Error::Quota(unet::ErrorCode::ObjectQuota)) => {}
        r => panic!("{r:?}"),
    }
    // Another process of the same user may unload one (as `unet spine
    // unload` does); then there is room again.
    Session::embedded(&e)
        .unwrap()
        .unload_extension(ids[3])
        .unwrap();
    s.load_extension(class("BadNumber"), opts("n", 703))
        .unwrap();
}
