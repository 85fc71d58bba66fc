//! Chrome trace-event JSON (what Perfetto and `chrome://tracing` open):
//! a complete event (`ph: "X"`) per event, one thread per event type
//! (named and ordered by metadata events), and flow events (`ph: "s"` at
//! the cause, `ph: "f"` at the effect) following each message through
//! its events. Every event keeps its id, type, message and cause in
//! `args`, so that `unet trace --from` reads the file back.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};
use unet_engine::{TraceDump, TraceEvent};

/// The process id every event carries (one adapter per file).
const PID: u32 = 1;

/// The name of type `ty`.
pub fn type_name(d: &TraceDump, ty: u16) -> String {
    match d.names.get(&ty) {
        Some(n) => n.clone(),
        None if ty >= 64 => format!("handler {ty}"),
        None => format!("system {ty}"),
    }
}

/// For each event (by index), the index of the one before it on its
/// message's way: its cause when the trace holds it, else the message's
/// previous event.
pub fn predecessors(events: &[TraceEvent]) -> Vec<Option<usize>> {
    let by_id: HashMap<u32, usize> = events.iter().enumerate().map(|(i, e)| (e.id, i)).collect();
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| (events[i].start_ns, events[i].id));
    let mut last_of_msg: HashMap<u32, usize> = HashMap::new();
    let mut pred = vec![None; events.len()];
    for i in order {
        let e = &events[i];
        pred[i] = match by_id.get(&e.cause) {
            Some(&c) if e.cause != 0 && c != i => Some(c),
            _ if e.msg != 0 => last_of_msg.get(&e.msg).copied(),
            _ => None,
        };
        if e.msg != 0 {
            last_of_msg.insert(e.msg, i);
        }
    }
    pred
}

fn ts(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// The trace as Chrome trace-event JSON.
pub fn write(d: &TraceDump) -> String {
    let mut out = Vec::with_capacity(d.events.len() * 3 + 16);
    out.push(
        json!({"ph": "M", "name": "process_name", "pid": PID, "tid": 0,
        "args": {"name": "unet adapter"}}),
    );
    let types: std::collections::BTreeSet<u16> = d.events.iter().map(|e| e.ty).collect();
    for &ty in &types {
        out.push(
            json!({"ph": "M", "name": "thread_name", "pid": PID, "tid": ty,
            "args": {"name": type_name(d, ty)}}),
        );
        out.push(
            json!({"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": ty,
            "args": {"sort_index": ty}}),
        );
    }
    for e in &d.events {
        out.push(json!({
            "ph": "X", "name": type_name(d, e.ty), "cat": "event", "pid": PID, "tid": e.ty,
            "ts": ts(e.start_ns), "dur": ts(e.len_ns),
            "args": {"id": e.id, "ty": e.ty, "msg": e.msg, "items": e.items, "cause": e.cause},
        }));
    }
    // Each arrow starts and ends inside its slices (at their middles),
    // which is what binds a flow event to a slice.
    let mid = |e: &TraceEvent| ts(e.start_ns.saturating_add(e.len_ns / 2));
    for (i, p) in predecessors(&d.events).into_iter().enumerate() {
        let Some(p) = p else { continue };
        let (from, to) = (&d.events[p], &d.events[i]);
        let name = format!("msg {}", to.msg);
        out.push(
            json!({"ph": "s", "id": to.id, "name": name, "cat": "flow", "pid": PID,
            "tid": from.ty, "ts": mid(from)}),
        );
        out.push(
            json!({"ph": "f", "bp": "e", "id": to.id, "name": name, "cat": "flow",
            "pid": PID, "tid": to.ty, "ts": mid(to)}),
        );
    }
    let names: BTreeMap<String, &String> =
        d.names.iter().map(|(k, v)| (k.to_string(), v)).collect();
    let doc = json!({
        "traceEvents": out,
        "displayTimeUnit": "ns",
        "otherData": {
            "capacity": d.capacity, "recorded": d.recorded, "overwritten": d.overwritten,
            "names": names,
        },
    });
    doc.to_string()
}

/// Read back a trace [`write()`] wrote.
pub fn read(text: &str) -> Result<TraceDump, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let evs = doc["traceEvents"]
        .as_array()
        .ok_or("no traceEvents array")?;
    let mut d = TraceDump::default();
    let other = &doc["otherData"];
    d.capacity = other["capacity"].as_u64().unwrap_or(0) as u32;
    d.recorded = other["recorded"].as_u64().unwrap_or(0);
    d.overwritten = other["overwritten"].as_u64().unwrap_or(0);
    if let Some(names) = other["names"].as_object() {
        for (k, v) in names {
            if let (Ok(ty), Some(n)) = (k.parse::<u16>(), v.as_str()) {
                d.names.insert(ty, n.to_owned());
            }
        }
    }
    let ns = |v: &Value| -> Result<u64, String> {
        let us = v.as_f64().ok_or("a time that is not a number")?;
        Ok((us * 1000.0).round().max(0.0) as u64)
    };
    let field = |a: &Value, k: &str| -> Result<u64, String> {
        a[k].as_u64()
            .ok_or_else(|| format!("an event without args.{k}"))
    };
    for e in evs.iter().filter(|e| e["ph"] == "X") {
        let a = &e["args"];
        let msg = field(a, "msg")? as u32;
        // A file without `items` (written before events counted their
        // messages) has one per event of a message.
        let items = a["items"].as_u64().unwrap_or(u64::from(msg != 0));
        d.events.push(TraceEvent {
            id: field(a, "id")? as u32,
            ty: field(a, "ty")? as u16,
            msg,
            items: items.min(u16::MAX as u64) as u16,
            cause: field(a, "cause")? as u32,
            start_ns: ns(&e["ts"])?,
            len_ns: ns(&e["dur"])?,
        });
    }
    d.events.sort_by_key(|e| (e.start_ns, e.id));
    Ok(d)
}
