//! `unet router stat`: the router extension's counters (its `onStats`
//! handler), on each adapter given (`--socket`, repeatable), as lines or
//! JSON: one object, the drops in an object of their own, for one
//! adapter; a list of those, each with its `adapter` index and `socket`,
//! for several.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use unet::spine::split_am;
use unet::{EndpointConfig, Session};

#[derive(Args)]
pub struct StatArgs {
    /// Control socket of an engine (repeatable: the counters of each
    /// adapter).
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    socket: Vec<PathBuf>,
    /// The extension's first handler number.
    #[arg(long, default_value_t = 200)]
    handlers: u16,
    /// Print JSON instead of lines: one object (one socket), or a list
    /// of one an adapter, with its `adapter` index and `socket`.
    #[arg(long)]
    json: bool,
}

/// `Router.java`'s counters, in its order (`C_FORWARDED` ...).
const COUNTERS: [&str; 20] = [
    "forwarded",
    "arp_answered",
    "to_host",
    "from_host",
    "short_frame",
    "short_header",
    "version",
    "header_length",
    "checksum",
    "length",
    "bad_arp",
    "arp_not_mine",
    "other_mac",
    "unconfigured",
    "send_refused",
    "bad_config",
    "no_host",
    "handed",
    "from_adapter",
    "bad_egress",
];

/// Whether counter `i` is a drop.
fn is_drop(i: usize) -> bool {
    matches!(i, 4..=16 | 19)
}

pub fn stat(a: StatArgs) -> Result<(), String> {
    let mut all = Vec::new();
    for (k, socket) in a.socket.iter().enumerate() {
        let vals = counters(socket, a.handlers)?;
        if a.json {
            let mut o = counters_json(&vals);
            if a.socket.len() > 1 {
                o.insert("adapter".into(), k.into());
                o.insert("socket".into(), socket.display().to_string().into());
            }
            all.push(serde_json::Value::Object(o));
        } else {
            if a.socket.len() > 1 {
                println!("adapter {k} ({})", socket.display());
            }
            for (k, v) in COUNTERS.iter().zip(&vals) {
                println!("{k:>14} {v}");
            }
        }
    }
    if a.json {
        match all.len() {
            1 => println!("{}", all[0]),
            _ => println!("{}", serde_json::Value::Array(all)),
        }
    }
    Ok(())
}

/// The counters of the router extension on `socket`'s adapter.
fn counters(socket: &Path, handlers: u16) -> Result<Vec<u32>, String> {
    let at = |e: String| format!("{}: {e}", socket.display());
    let s = Session::connect(socket).map_err(|e| at(e.to_string()))?;
    let mut ep = s
        .create_endpoint(EndpointConfig::default())
        .map_err(|e| at(e.to_string()))?;
    let h = handlers + 3;
    ep.send_am(h, &[], &[]).map_err(|e| at(e.to_string()))?;
    let mut buf = vec![0u8; 1 << 16];
    let r = ep
        .recv(&mut buf, Some(Duration::from_secs(5)))
        .map_err(|e| at(format!("no answer from handler {h}: {e}")))?;
    let (args, _) = split_am(&buf[..r.len]).ok_or("bad framing")?;
    let vals: Vec<u32> = args
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if vals.len() != COUNTERS.len() {
        return Err(at(format!(
            "{} counters, not {}",
            vals.len(),
            COUNTERS.len()
        )));
    }
    Ok(vals)
}

/// One adapter's counters as JSON: the drops in an object `drops`.
fn counters_json(vals: &[u32]) -> serde_json::Map<String, serde_json::Value> {
    let mut o = serde_json::Map::new();
    let mut drops = serde_json::Map::new();
    for (i, (k, v)) in COUNTERS.iter().zip(vals).enumerate() {
        let to = if is_drop(i) { &mut drops } else { &mut o };
        to.insert(k.to_string(), serde_json::json!(v));
    }
    o.insert("drops".into(), drops.into());
    o
}
