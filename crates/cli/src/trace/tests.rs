//! `unet trace`'s tests: the figures of a synthetic trace whose period
//! and latency are known, the JSON and SVG it writes, and a trace of a
//! running engine whose figures agree with its counters and the
//! clients' clock.

use std::collections::BTreeMap;
use std::time::Instant;

use unet_engine::{TraceDump, TraceEvent};

use super::analysis::{analyse, Spread};
use super::*;

const PERIOD: u64 = 10_000;

/// Eleven messages, one every 10 us, each through three events (receive,
/// route, forward), the forward of message k lasting 9 + 0.1 k us: a
/// latency of 15 + 0.1 k us, longer than the period (the pipeline
/// overlaps, as in Figure 6). Events of no message in between.
fn synthetic() -> TraceDump {
    let mut events = Vec::new();
    let mut id = 0;
    let mut ev = |ty, msg, cause, start_ns, len_ns| {
        id += 1;
        events.push(TraceEvent {
            id,
            ty,
            msg,
            items: u16::from(msg != 0),
            cause,
            start_ns,
            len_ns,
        });
        id
    };
    for k in 0..11u64 {
        let t = 1_000_000 + k * PERIOD;
        let msg = 100 + k as u32;
        let rx = ev(1, msg, 0, t, 1000);
        let route = ev(70, msg, rx, t + 2000, 3000);
        ev(2, msg, route, t + 6000, 9000 + 100 * k);
        ev(3, 0, 0, t + 5500, 200);
    }
    events.sort_by_key(|e| e.start_ns);
    let mut names = BTreeMap::new();
    names.insert(1, "wire_rx".to_string());
    names.insert(2, "peer_tx <&>".to_string());
    names.insert(70, "route".to_string());
    TraceDump {
        events,
        names,
        capacity: 64,
        recorded: 44,
        overwritten: 0,
    }
}

#[test]
fn a_synthetic_trace_gives_its_period_and_latency_exactly() {
    let an = analyse(&synthetic().events);
    assert_eq!(an.messages.len(), 11);
    assert_eq!(
        an.period,
        Some(Spread {
            n: 10,
            p10: PERIOD,
            median: PERIOD,
            p90: PERIOD,
            mean: PERIOD as f64,
            max: PERIOD
        })
    );
    assert_eq!(
        an.latency,
        Some(Spread {
            n: 11,
            p10: 15_100,
            median: 15_500,
            p90: 15_900,
            mean: 15_500.0,
            max: 16_000
        })
    );
    assert_eq!(an.followed().map(|m| (m.id, m.events)), Some((105, 3)));
    let j = an.to_json(&synthetic());
    assert_eq!(j["period"]["median_ns"], 10_000);
    assert_eq!(j["latency"]["p90_ns"], 15_900);
    assert_eq!(j["throughput_per_s"], 100_000.0);
    // Too few messages: no figures, and no panic.
    assert_eq!(analyse(&[]).period, None);
    assert_eq!(analyse(&synthetic().events[..1]).period, None);
}

#[test]
fn the_chrome_json_has_what_perfetto_needs_and_reads_back() {
    let d = synthetic();
    let text = chrome::write(&d);
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let evs = doc["traceEvents"].as_array().unwrap();
    let mut count = BTreeMap::<String, usize>::new();
    for e in evs {
        let ph = e["ph"].as_str().expect("ph");
        *count.entry(ph.to_string()).or_default() += 1;
        assert!(
            e["name"].is_string() && e["pid"].is_u64() && e["tid"].is_u64(),
            "{e}"
        );
        match ph {
            "X" => assert!(e["ts"].is_number() && e["dur"].is_number(), "{e}"),
            "s" | "f" => assert!(e["ts"].is_number() && e["id"].is_u64(), "{e}"),
            "M" => assert!(e["args"].is_object(), "{e}"),
            _ => panic!("{e}"),
        }
        if ph == "f" {
            assert_eq!(e["bp"], "e");
        }
    }
    assert_eq!(count["X"], 44);
    // Two arrows per message (receive -> route -> forward): a start and
    // a finish each.
    assert_eq!((count["s"], count["f"]), (22, 22));
    // Threads named by type.
    assert!(evs
        .iter()
        .any(|e| e["name"] == "thread_name" && e["args"]["name"] == "route"));
    // Times are microseconds.
    let first = evs.iter().find(|e| e["ph"] == "X").unwrap();
    assert_eq!(first["ts"], 1000.0);
    assert_eq!(first["dur"], 1.0);
    assert_eq!(chrome::read(&text).unwrap(), d);
    assert!(chrome::read("{}").is_err());
    assert!(chrome::read("not json").is_err());
}

/// Whether `s` is well-formed XML as far as its tags go: every element
/// closed in order, attributes quoted, `<` and `&` only as markup.
fn well_formed(s: &str) -> Result<usize, String> {
    let mut stack: Vec<&str> = Vec::new();
    let mut elements = 0;
    let mut rest = s;
    while let Some(i) = rest.find('<') {
        let text = &rest[..i];
        for (j, _) in text.match_indices('&') {
            let ent = &text[j..];
            if !["&amp;", "&lt;", "&gt;", "&quot;"]
                .iter()
                .any(|e| ent.starts_with(e))
            {
                return Err(format!("a bare & in {text:?}"));
            }
        }
        let end = rest[i..].find('>').ok_or("an unclosed tag")? + i;
        let tag = &rest[i + 1..end];
        if tag.contains('<') {
            return Err(format!("< inside tag {tag:?}"));
        }
        if tag.split('"').count().is_multiple_of(2) {
            return Err(format!("unbalanced quotes in {tag:?}"));
        }
        if let Some(name) = tag.strip_prefix('/') {
            match stack.pop() {
                Some(open) if open == name => {}
                o => return Err(format!("</{name}> closes {o:?}")),
            }
        } else if !tag.ends_with('/') {
            stack.push(tag.split_whitespace().next().ok_or("an empty tag")?);
            elements += 1;
        } else {
            elements += 1;
        }
        rest = &rest[end + 1..];
    }
    match stack.is_empty() {
        true => Ok(elements),
        false => Err(format!("unclosed {stack:?}")),
    }
}

#[test]
fn the_svg_is_well_formed_with_a_row_per_type_and_arrows_for_one_message() {
    let d = synthetic();
    let an = analyse(&d.events);
    let s = svg::render(&d, &an);
    well_formed(&s).unwrap_or_else(|e| panic!("{e}\n{s}"));
    assert!(s.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    for label in ["wire_rx", "peer_tx &lt;&amp;&gt;", "route", "system 3"] {
        assert!(s.contains(&format!(">{label}</text>")), "row {label}");
    }
    // The window: message 105 (from 1.05 ms) and two periods either
    // side; the followed message's three boxes in red, two arrows.
    assert_eq!(s.matches("fill=\"crimson\"><title>").count(), 3);
    assert_eq!(s.matches("marker-end=\"url(#arrow)\"").count(), 2);
    let boxes = s.matches("<rect x=").count();
    assert!((12..=24).contains(&boxes), "{boxes} boxes");
    assert!(s.contains("period 10.000 us"), "the figures in the title");
    assert!(well_formed("<a><b></a></b>").is_err() && well_formed("<a>&</a>").is_err());
}

/// Times at the ends of the range (a hand-edited or hostile `--from`
/// file): figures, JSON and SVG, and no panic.
#[test]
fn extreme_times_are_drawn_without_overflow() {
    let ev = |id, start_ns, len_ns| TraceEvent {
        id,
        ty: 1,
        msg: id,
        items: 1,
        cause: 0,
        start_ns,
        len_ns,
    };
    for events in [
        vec![
            ev(1, 0, u64::MAX),
            ev(2, u64::MAX, u64::MAX),
            ev(3, u64::MAX / 2, 0),
        ],
        vec![ev(1, 5, 0), ev(2, 5, 0)],
        vec![ev(1, u64::MAX - 1, 1), ev(2, 0, 0)],
    ] {
        let d = TraceDump {
            events,
            ..TraceDump::default()
        };
        let an = analyse(&d.events);
        well_formed(&svg::render(&d, &an)).unwrap();
        let j = chrome::write(&d);
        assert!(serde_json::from_str::<serde_json::Value>(&j).is_ok());
        let _ = an.text(&d);
    }
}

/// A working engine (a daemon on a control socket, in this process):
/// two endpoints play ping-pong through it while `unet trace` records;
/// every message the counters saw is in the trace, one event each, and
/// the trace's period is the one the clients' clock shows.
#[test]
fn a_traced_ping_pong_agrees_with_the_counters_and_the_clock() {
    use unet::{ChannelOptions, EndpointConfig, PathChoice, Session};
    let dir = std::env::temp_dir().join(format!("unet-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("engine.sock");
    let engine = unet::Engine::start(unet::EngineConfig {
        control_socket: Some(sock.clone()),
        ..unet::EngineConfig::default()
    })
    .unwrap();
    let s = Session::connect(&sock).unwrap();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    let engine_path = ChannelOptions {
        path: PathChoice::Engine,
    };
    let ab = a.open_channel(b.addr(), engine_path).unwrap();
    let ba = b.open_channel(a.addr(), engine_path).unwrap();
    let tx_msgs = |s: &Session| -> u64 {
        let (seg, max) = s.counters().unwrap();
        crate::stat::snapshot(&seg, max)
            .into_iter()
            .filter(|(scope, name, _)| scope.starts_with("endpoint") && name == "tx_msgs")
            .map(|(_, _, v)| v)
            .sum()
    };
    let before = tx_msgs(&s);
    let on = s.trace_set(true, 1 << 16).unwrap();
    assert!(on.on && on.recorded == 0);
    const ROUNDS: usize = 2000;
    let mut buf = [0u8; 64];
    let mut sent = Vec::with_capacity(2 * ROUNDS);
    for _ in 0..ROUNDS {
        sent.push(Instant::now());
        a.send(ab, b"ping").unwrap();
        b.recv(&mut buf, None).unwrap();
        sent.push(Instant::now());
        b.send(ba, b"pong").unwrap();
        a.recv(&mut buf, None).unwrap();
    }
    let dump = TraceDump::decode(&s.trace_dump().unwrap()).unwrap();
    let off = s.trace_set(false, 0).unwrap();
    assert!(!off.on);
    let carried = tx_msgs(&s) - before;
    assert_eq!(
        carried,
        2 * ROUNDS as u64,
        "the engine carried every message"
    );
    assert_eq!(dump.overwritten, 0);
    let an = analyse(&dump.events);
    // A part's turn that handled two messages (the second sent while
    // the turn still ran) is one event numbering both.
    assert_eq!(an.carried(), carried, "every message sent is in the trace");
    assert!(an.messages.len() as u64 <= carried && an.messages.len() as u64 >= carried - 10);
    // The period, from the trace and from the clients' clock.
    let first = an.messages.first().unwrap().begin;
    let last = an.messages.last().unwrap();
    let steps = an.carried() - u64::from(last.items);
    let traced_mean = (last.begin - first) as f64 / steps as f64;
    let clock_mean = (*sent.last().unwrap() - sent[0]).as_nanos() as f64 / (sent.len() - 1) as f64;
    let mut gaps: Vec<u64> = sent
        .windows(2)
        .map(|w| (w[1] - w[0]).as_nanos() as u64)
        .collect();
    gaps.sort_unstable();
    let clock_median = gaps[gaps.len() / 2];
    let p = an.period.unwrap();
    println!(
        "traced period mean {traced_mean:.0} ns median {} ns; the clock's mean {clock_mean:.0} ns median {clock_median} ns",
        p.median
    );
    assert!(
        (traced_mean / clock_mean - 1.0).abs() < 0.05,
        "means {traced_mean:.0} and {clock_mean:.0} ns"
    );
    // The medians agree more loosely: a message's traced start is the
    // start of the turn that took it, so the traced gaps come in turn
    // steps (411 against 540 ns once on a busy machine) while their mean
    // is exact.
    let r = p.median as f64 / clock_median as f64;
    assert!(
        (0.5..2.0).contains(&r),
        "medians {} and {clock_median} ns",
        p.median
    );
    // Each message's way through the adapter is shorter than a period.
    assert!(an.latency.unwrap().median < p.median);

    // What the command writes, and reads back with --from.
    let out = dir.join("t.json");
    let svg_path = dir.join("t.svg");
    std::fs::write(&out, chrome::write(&dump)).unwrap();
    let args = Args {
        socket: sock.clone(),
        ms: 0,
        capacity: 0,
        out: None,
        svg: Some(svg_path.clone()),
        from: Some(out.clone()),
        json: true,
        timeout_ms: None,
    };
    go(&args).unwrap();
    let again = chrome::read(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        analyse(&again.events).period.map(|p| p.median),
        Some(p.median)
    );
    well_formed(&std::fs::read_to_string(&svg_path).unwrap()).unwrap();
    // And from the daemon itself, end to end.
    let live = Args {
        from: None,
        ms: 20,
        capacity: 1024,
        out: Some(out.clone()),
        ..args
    };
    go(&live).unwrap();
    assert!(chrome::read(&std::fs::read_to_string(&out).unwrap()).is_ok());
    drop(a);
    drop(b);
    drop(s);
    engine.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
