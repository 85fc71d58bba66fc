//! Prometheus metrics: `unet stat --prometheus` prints, and `unet daemon
//! --metrics ADDR` serves over HTTP (`GET /metrics`), every number `unet
//! stat --json` holds, in the Prometheus text exposition format (encoded
//! by the `prometheus-client` crate).
//!
//! The names follow Prometheus's conventions: `unet_` and the section
//! (`unet_engine_wire_tx_datagrams_total`, `unet_endpoint_rx_msgs_total`,
//! `unet_vi_…`, `unet_udm_node_…`, `unet_spine_handler_invocations_total`,
//! `unet_limit_client_memory`), counters end in `_total`, levels (what
//! is held now, a limit, a peak) are gauges without it. A row of a table
//! is a label set: its identity (`endpoint`, `pid`, `vi`, `job`, `rank`,
//! `extension`, `handler`, …) and its descriptive words (`state`,
//! `method`, …); counts by reason or by event type are one metric with a
//! `reason` or `event` label (`unet_spine_drops_total{reason="no_slot"}`).
//! Built from the same JSON as `unet stat --json`, so the two always agree.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::Value;

/// Numbers that are levels (gauges), wherever they appear.
const LEVELS: &[&str] = &[
    "applet_compiled",
    "buffer_limit",
    "buffer_pages",
    "buffer_pages_max",
    "budget_us",
    "bufs_live",
    "channels_open",
    "channels_peak",
    "compiled",
    "depth",
    "endpoints",
    "endpoints_limit",
    "held",
    "kept_bytes",
    "max_ns",
    "memory_bytes",
    "memory_limit",
    "msgs_live",
    "nodes",
    "queued",
];
/// Sections whose numbers are all levels.
const LEVEL_SECTIONS: &[&str] = &["limit", "process"];
/// Top-level numbers that describe the engine rather than measure it.
const IDENTITY: &[&str] = &["engine_id", "engine_pid", "version", "max_endpoints"];
/// Objects of counts by one dimension: the key and the label it becomes.
const DIMENSIONS: &[(&str, &str)] = &[
    ("drops", "reason"),
    ("events", "event"),
    ("terminations", "reason"),
];
/// Arrays of rows, and the name of their metrics' section.
const ROWS: &[(&str, &str)] = &[
    ("endpoints", "endpoint"),
    ("processes", "process"),
    ("vis", "vi"),
    ("udm_nodes", "udm_node"),
    ("peers", "peer"),
    ("extensions", "spine_extension"),
    ("handlers", "spine_handler"),
    ("exports", "spine_export"),
    ("links", "spine_link"),
];
/// Numbers of a row that identify it (labels, not metrics).
const ROW_IDS: &[&str] = &[
    "id",
    "pid",
    "index",
    "number",
    "job",
    "rank",
    "side",
    "peer_vi",
    "peer_pid",
    "uid",
    "peer_link",
    "engine_id",
    "version",
];

type Labels = Vec<(String, String)>;

/// One metric's samples.
#[derive(Default)]
struct Metric {
    gauge: bool,
    samples: Vec<(Labels, Value)>,
}

/// `unet stat --json`'s object in the Prometheus text format.
pub(crate) fn encode(stat: &Value) -> String {
    let mut m = BTreeMap::new();
    if let Some(o) = stat.as_object() {
        for (k, v) in o {
            if IDENTITY.contains(&k.as_str()) {
                continue;
            }
            let section = match k.as_str() {
                "limits" => "limit",
                k => k,
            };
            walk(v, section, k, &Vec::new(), &mut m);
        }
    }
    let mut reg = Registry::with_prefix("unet");
    for (name, metric) in m {
        let help = format!("unet stat: {}", name.replace('_', " "));
        if metric.gauge {
            let f = Family::<Labels, Gauge<f64, AtomicU64>>::default();
            for (l, v) in &metric.samples {
                f.get_or_create(l).set(number(v));
            }
            reg.register(name, help, f);
        } else {
            let f = Family::<Labels, Counter<u64>>::default();
            for (l, v) in &metric.samples {
                f.get_or_create(l).inc_by(v.as_u64().unwrap_or(0));
            }
            reg.register(name, help, f);
        }
    }
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_text::encode(&mut out, &reg);
    out
}

/// Add what `v` (under key `key`, in section `section`) holds.
fn walk(v: &Value, section: &str, key: &str, labels: &Labels, m: &mut BTreeMap<String, Metric>) {
    match v {
        Value::Object(o) => {
            for (k, c) in o {
                if let Some(&(_, dim)) = DIMENSIONS.iter().find(|(d, _)| d == k) {
                    if let Value::Object(counts) = c {
                        for (what, n) in counts {
                            let mut l = labels.clone();
                            l.push((dim.to_string(), what.clone()));
                            leaf(n, section, k, &l, m);
                        }
                        continue;
                    }
                }
                match c {
                    // A row's counters, or the client library's, under
                    // the row's section.
                    Value::Object(_) if k == "counters" => walk(c, section, k, labels, m),
                    Value::Object(_) if k == "client" => {
                        walk(c, &format!("{section}_client"), k, labels, m)
                    }
                    Value::Object(_) => walk(c, &format!("{section}_{k}"), k, labels, m),
                    Value::Array(_) => walk(c, section, k, labels, m),
                    _ => leaf(c, section, k, labels, m),
                }
            }
        }
        Value::Array(rows) => {
            let Some(&(_, row)) = ROWS.iter().find(|(r, _)| *r == key) else {
                return;
            };
            let short = row.rsplit('_').next().unwrap_or(row);
            for r in rows {
                let Value::Object(o) = r else { continue };
                let mut l = labels.clone();
                for (k, c) in o {
                    let text = match c {
                        Value::String(s) => s.clone(),
                        Value::Number(n) if ROW_IDS.contains(&k.as_str()) => n.to_string(),
                        _ => continue,
                    };
                    let mut name = if k == "id" {
                        short.to_string()
                    } else {
                        k.clone()
                    };
                    if l.iter().any(|(n, _)| *n == name) {
                        name = format!("{short}_{name}");
                    }
                    l.push((name, text));
                }
                for (k, c) in o {
                    match c {
                        Value::String(_) => {}
                        Value::Number(_) if ROW_IDS.contains(&k.as_str()) => {}
                        _ => walk(
                            &Value::Object([(k.clone(), c.clone())].into_iter().collect()),
                            row,
                            k,
                            &l,
                            m,
                        ),
                    }
                }
            }
        }
        _ => leaf(v, section, key, labels, m),
    }
}

/// A number or a yes/no (1 or 0) as a value.
fn number(v: &Value) -> f64 {
    match v {
        Value::Bool(b) => f64::from(u8::from(*b)),
        v => v.as_f64().unwrap_or(0.0),
    }
}

/// A number (or a yes/no, as 1 or 0) as a sample of `section_key`.
fn leaf(v: &Value, section: &str, key: &str, labels: &Labels, m: &mut BTreeMap<String, Metric>) {
    if !v.is_number() && !v.is_boolean() {
        return;
    }
    // A count is a whole number that only grows; anything else is a level.
    let gauge = v.as_u64().is_none() || LEVELS.contains(&key) || LEVEL_SECTIONS.contains(&section);
    let name = format!("{section}_{key}");
    let e = m.entry(name).or_insert_with(|| Metric {
        gauge,
        ..Metric::default()
    });
    e.samples.push((labels.clone(), v.clone()));
}

/// `unet daemon --metrics ADDR`: serve the daemon's metrics at `GET
/// /metrics` on a thread of its own, a client of the daemon's control
/// socket like `unet stat` (the engine serves it as any client, and never
/// waits for it). Fails at once if the address cannot be bound.
pub(crate) fn serve(
    addr: SocketAddr,
    socket: PathBuf,
    collect: Collect,
) -> Result<SocketAddr, String> {
    let server = tiny_http::Server::http(addr)
        .map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?;
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| format!("metrics on {addr}: not an IP address"))?;
    std::thread::Builder::new()
        .name("unet-metrics".into())
        .spawn(move || {
            let mut session = None;
            for req in server.incoming_requests() {
                let (code, body, kind) = if req.url() != "/metrics" {
                    (
                        404,
                        "only /metrics is served here\n".to_string(),
                        "text/plain",
                    )
                } else {
                    match scrape(&socket, &mut session, collect) {
                        Ok(text) => (200, text, prometheus_text::CONTENT_TYPE),
                        Err(e) => {
                            session = None;
                            (
                                503,
                                format!("the engine did not answer: {e}\n"),
                                "text/plain",
                            )
                        }
                    }
                };
                let header =
                    tiny_http::Header::from_bytes("Content-Type", kind).expect("a valid header");
                let resp = tiny_http::Response::from_string(body)
                    .with_status_code(code)
                    .with_header(header);
                let _ = req.respond(resp);
            }
        })
        .map_err(|e| format!("cannot start the metrics thread: {e}"))?;
    Ok(bound)
}

/// What reads the stat object (`unet stat --json`'s) from a session.
pub(crate) type Collect = fn(&unet::Session) -> Result<Value, unet::Error>;

/// One scrape: the stat object, from a session kept between scrapes.
fn scrape(
    socket: &PathBuf,
    session: &mut Option<unet::Session>,
    collect: Collect,
) -> Result<String, unet::Error> {
    if session.is_none() {
        let opts = unet::SessionOptions {
            timeout: Some(Duration::from_secs(5)),
        };
        *session = Some(unet::Session::connect_with(socket, opts)?);
    }
    let s = session.as_ref().expect("connected above");
    Ok(encode(&collect(s)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_become_label_sets_and_reasons_a_label() {
        let stat = json!({
            "engine_id": 7, "version": 1,
            "engine": {"wakeups": 3},
            "limits": {"client_vis": 9, "user_memory": null},
            "vis": [{"id": 4, "pid": 10, "state": "connected", "peer": null,
                     "strict_rnr": true, "counters": {"msgs_tx": 5, "held": 2}}],
            "spine": {
                "msgs_live": 1, "dead_calls": 2,
                "drops": {"no_slot": 3},
                "extensions": [{"id": 2, "name": "router", "pid": 10, "compiled": true,
                    "handlers": [{"number": 200, "method": "onFrame", "invocations": 11,
                                  "max_ns": 900, "terminations": {"fuel": 1}}]}]
            },
            "spine_links": {"drops": {"full": 4},
                            "links": [{"id": 1, "pid": 10, "state": "up", "msgs_in": 6,
                                       "drops": {"full": 1}}]}
        });
        let text = encode(&stat);
        for want in [
            "unet_engine_wakeups_total 3",
            "unet_limit_client_vis 9",
            "unet_vi_msgs_tx_total{vi=\"4\",pid=\"10\",state=\"connected\"} 5",
            "unet_vi_held{vi=\"4\",pid=\"10\",state=\"connected\"} 2",
            "unet_vi_strict_rnr{vi=\"4\",pid=\"10\",state=\"connected\"} 1",
            "unet_spine_msgs_live 1",
            "unet_spine_dead_calls_total 2",
            "unet_spine_drops_total{reason=\"no_slot\"} 3",
            "unet_spine_extension_compiled{extension=\"2\",name=\"router\",pid=\"10\"} 1",
            "unet_spine_handler_invocations_total{extension=\"2\",name=\"router\",pid=\"10\",method=\"onFrame\",number=\"200\"} 11",
            "unet_spine_handler_max_ns{extension=\"2\",name=\"router\",pid=\"10\",method=\"onFrame\",number=\"200\"} 900",
            "unet_spine_handler_terminations_total{extension=\"2\",name=\"router\",pid=\"10\",method=\"onFrame\",number=\"200\",reason=\"fuel\"} 1",
            "unet_spine_links_drops_total{reason=\"full\"} 4",
            "unet_spine_link_msgs_in_total{link=\"1\",pid=\"10\",state=\"up\"} 6",
            "unet_spine_link_drops_total{link=\"1\",pid=\"10\",state=\"up\",reason=\"full\"} 1",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(want)),
                "{want} in\n{text}"
            );
        }
        // Identity and nulls are not samples; gauges have no _total.
        assert!(!text.contains("engine_id"), "{text}");
        assert!(!text.contains("user_memory"), "{text}");
        assert!(text.contains("# TYPE unet_spine_msgs_live gauge"), "{text}");
    }
}
