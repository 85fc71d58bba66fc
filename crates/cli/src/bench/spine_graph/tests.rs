//! SPINE's events in the graph, timers, and the priority effect, on a
//! working engine with extensions compiled by javac: a traced handler
//! pipeline whose events agree with the counters and whose arrows
//! connect; timers that fire in order, wake an idle engine, are capped
//! and go with their extension; and `unet bench spine-graph`'s two
//! settings, whose graphs differ as the SPINE paper says.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use unet::spine::{split_am, ExtensionOptions, SpineListing};
use unet::{Endpoint, EndpointConfig, Engine, EngineConfig, Session};
use unet_engine::{TraceDump, TraceEvent};

use crate::bench::spine_graph::{self, BASE};
use crate::trace::analysis::analyse;

/// Sets timers in `init` (three, out of order, for the host endpoint
/// given as its argument) and from a handler; fills its cap on request.
const TICKER: &str = "import unet.spine.Spine;\n\
public class Ticker {\n\
  static byte[] out;\n\
  static int dest;\n\
  static int last;\n\
  static void init(int endpoint) {\n\
    out = new byte[8];\n\
    dest = (Spine.DEST_HOST << 24) | endpoint;\n\
    Spine.addHandler(\"onAsk\", 64, 0);\n\
    Spine.timer(30000, \"onTick\", 3);\n\
    Spine.timer(10000, \"onTick\", 1);\n\
    Spine.timer(20000, \"onTick\", 2);\n\
  }\n\
  static void onTick(int ctx, int msg) {\n\
    out[0] = (byte) ctx;\n\
    out[1] = (byte) Spine.argsLength(msg);\n\
    Spine.send(dest, 64, out, 0, 2);\n\
  }\n\
  static void onAsk(int ctx, int msg) {\n\
    int what = Spine.argByte(msg, 0);\n\
    if (what == 1) {\n\
      last = Spine.timer(0, \"onTick\", 9);\n\
    } else {\n\
      for (int i = 0; i < 65; i++) { last = Spine.timer(1000000000, \"onTick\", 7); }\n\
    }\n\
    out[0] = (byte) 100;\n\
    out[1] = (byte) last;\n\
    Spine.send(dest, 64, out, 0, 2);\n\
  }\n\
}\n";

/// Echo and Ticker, compiled once.
fn classes() -> &'static HashMap<&'static str, Vec<u8>> {
    static C: OnceLock<HashMap<&'static str, Vec<u8>>> = OnceLock::new();
    C.get_or_init(|| {
        let echo = spine_graph::echo_class().expect("javac Echo");
        let ticker = spine_graph::compile(&[("Ticker", TICKER)])
            .expect("javac Ticker")
            .remove(0);
        HashMap::from([("Echo", echo), ("Ticker", ticker)])
    })
}

fn opts(name: &str, arg: i32) -> ExtensionOptions {
    ExtensionOptions {
        name: name.into(),
        arg,
        ..ExtensionOptions::default()
    }
}

fn invocations(l: &SpineListing, number: u16) -> u64 {
    l.extensions
        .iter()
        .flat_map(|x| &x.handlers)
        .filter(|h| h.number == number)
        .map(|h| h.invocations)
        .sum()
}

fn drops(l: &SpineListing, name: &str) -> u64 {
    l.drops
        .iter()
        .find(|(n, _)| n == name)
        .map_or(0, |(_, v)| *v)
}

/// The next active message on `ep` within 5 s: its arguments.
fn recv_args(ep: &mut Endpoint) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let r = ep
        .recv(&mut buf, Some(Duration::from_secs(5)))
        .expect("an answer within 5 s");
    assert!(r.am());
    split_am(&buf[..r.len]).expect("framing").0.to_vec()
}

/// Follow `e`'s causes back to the event nothing in the adapter caused.
fn chain<'a>(by_id: &HashMap<u32, &'a TraceEvent>, mut e: &'a TraceEvent) -> Vec<&'a TraceEvent> {
    let mut out = vec![e];
    while e.cause != 0 {
        e = by_id[&e.cause];
        out.push(e);
    }
    out.reverse();
    out
}

#[test]
fn a_traced_handler_pipeline_agrees_with_the_counters_and_its_arrows_connect() {
    let engine = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&engine).unwrap();
    s.load_extension(&classes()["Echo"], opts("echo", i32::from(BASE)))
        .unwrap();
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    spine_graph::stream(&mut ep, 64, 8).unwrap();
    let before = s.list_extensions().unwrap();
    s.trace_set(true, 1 << 16).unwrap();
    const N: usize = 500;
    assert_eq!(spine_graph::stream(&mut ep, N, 8).unwrap(), N);
    s.trace_set(false, 0).unwrap();
    let d = TraceDump::decode(&s.trace_dump().unwrap()).unwrap();
    let after = s.list_extensions().unwrap();
    assert_eq!(d.overwritten, 0);
    let (fwd, dlv) = (BASE + 1, BASE + 2);
    let count = |ty: u16| d.events.iter().filter(|e| e.ty == ty).count() as u64;
    // Every invocation and delivery the counters saw, one event each.
    for h in [fwd, dlv] {
        assert_eq!(count(h), invocations(&after, h) - invocations(&before, h));
        assert_eq!(count(h), N as u64, "handler {h}");
    }
    assert_eq!(count(0), N as u64, "host_tx");
    assert_eq!(count(3), N as u64, "deliver_host");
    assert_eq!(d.names[&fwd], format!("echo:onForward ({fwd})"));
    assert_eq!(d.names[&3], "deliver_host");
    // Each delivery's arrows lead back through both handlers to the
    // host's message, all of one message of the graph.
    let by_id: HashMap<u32, &TraceEvent> = d.events.iter().map(|e| (e.id, e)).collect();
    for e in d.events.iter().filter(|e| e.ty == 3) {
        let c = chain(&by_id, e);
        let types: Vec<u16> = c.iter().map(|e| e.ty).collect();
        assert_eq!(types, [0, fwd, dlv, 3]);
        assert!(c.iter().all(|x| x.msg == e.msg && x.msg != 0));
        assert!(c
            .windows(2)
            .all(|w| w[0].start_ns + w[0].len_ns <= w[1].start_ns));
    }
    // The analysis counts SPINE's messages, not the loop's turns.
    let an = analyse(&d.events);
    assert_eq!(an.messages.len(), N);
    assert!(an.messages.iter().all(|m| m.events == 4));
    drop(ep);
    drop(s);
    engine.stop();
}

#[test]
fn timers_fire_in_order_wake_an_idle_engine_are_capped_and_go_with_their_extension() {
    let engine = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&engine).unwrap();
    let mut ep = s.create_endpoint(EndpointConfig::default()).unwrap();
    let sleeps = |s: &Session| -> u64 {
        let (seg, max) = s.counters().unwrap();
        crate::stat::snapshot(&seg, max)
            .into_iter()
            .filter(|(scope, name, _)| scope == "engine" && name == "sleeps")
            .map(|(_, _, v)| v)
            .sum()
    };
    let t0 = Instant::now();
    let x = s
        .load_extension(&classes()["Ticker"], opts("ticker", ep.id() as i32))
        .unwrap();
    let slept = sleeps(&s);
    // Set in init for 30, 10 and 20 ms: they come in time order, each
    // with an empty message, not before its time. Nothing else wakes the
    // engine meanwhile: its timers' deadline does.
    let got: Vec<Vec<u8>> = (0..3).map(|_| recv_args(&mut ep)).collect();
    assert_eq!(got, [vec![1, 0], vec![2, 0], vec![3, 0]]);
    assert!(t0.elapsed() >= Duration::from_millis(30));
    assert!(sleeps(&s) > slept, "the engine slept between the timers");
    // From a handler, in the event graph: the Timer event is caused by
    // the invocation that set it.
    s.trace_set(true, 1024).unwrap();
    ep.send_am(64, &[1], &[]).unwrap();
    assert_eq!(recv_args(&mut ep), [100, 0]);
    assert_eq!(recv_args(&mut ep), [9, 0]);
    s.trace_set(false, 0).unwrap();
    let d = TraceDump::decode(&s.trace_dump().unwrap()).unwrap();
    let ask = d.events.iter().find(|e| e.ty == 64).expect("onAsk's event");
    let tick = d
        .events
        .iter()
        .find(|e| e.ty == 6)
        .expect("the timer's event");
    assert_eq!(tick.cause, ask.id);
    assert_ne!(tick.msg, ask.msg, "a message of its own");
    assert_eq!(d.names[&6], "timer");
    // 64 pending at most: the 65th is refused with E_LIMIT.
    ep.send_am(64, &[2], &[]).unwrap();
    assert_eq!(recv_args(&mut ep), [100, (-5i8) as u8]);
    let l = s.list_extensions().unwrap();
    assert_eq!(drops(&l, "timers_refused"), 1);
    assert_eq!(drops(&l, "timers_dropped"), 0);
    // Unloaded: its 64 timers go, counted.
    s.unload_extension(x.id).unwrap();
    let l = s.list_extensions().unwrap();
    assert_eq!(drops(&l, "timers_dropped"), 64);
    drop(ep);
    drop(s);
    engine.stop();
}

/// `unet bench spine-graph`'s default settings: with deliveries first
/// (the engine's default) the adapter runs one-for-one, a delivery
/// after each message taken in; with deliveries below taking messages in
/// (`deliver_host=7`) it oscillates, as section 6 says: now one-for-one,
/// now taking in several messages before any goes out.
#[test]
fn the_priority_setting_makes_the_pipeline_oscillate() {
    let class = &classes()["Echo"];
    let fast = spine_graph::measure(class, "default", 2000, 16).unwrap();
    let slow = spine_graph::measure(class, "deliver_host=7", 2000, 16).unwrap();
    print!(
        "{}",
        spine_graph::table(&[fast.figures.clone(), slow.figures.clone()])
    );
    let (f, o) = (fast.figures.bursts, slow.figures.bursts);
    assert_eq!(fast.figures.messages, 2000);
    assert_eq!(f.runs, 2000, "one run per message");
    assert_eq!((f.max, f.slow), (1, 0), "one-for-one throughout");
    assert!(o.max > 1 && o.slow > 0, "several in before one out: {o:?}");
    // Every message's way is in both graphs.
    for r in [&fast, &slow] {
        assert_eq!(analyse(&r.dump.events).messages.len(), 2000);
    }
}
