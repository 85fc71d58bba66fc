//! `unet router stat`: the router extension's counters (its `onStats`
//! handler), on each adapter given (`--socket`, repeatable), as lines or
//! JSON: one object, the drops in an object of their own, for one
//! adapter; a list of those, each with its `adapter` index and `socket`,
//! for several. Beside them, what the adapter's runtime did with the
//! frames other adapters handed it (`Spine.PORT_OUT` messages over its
//! peer queues and links): `from_adapter`, sent out of a port, and the
//! drop `bad_egress`, naming no port of it.

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

/// `Router.java`'s counters, in its order (`C_FORWARDED` ...), then the
/// runtime's two ([`handed_in`]).
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

/// How many of [`COUNTERS`] the extension gives.
const EXT_COUNTERS: usize = 18;

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
fn counters(socket: &Path, handlers: u16) -> Result<Vec<u64>, String> {
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
    if vals.len() != EXT_COUNTERS {
        return Err(at(format!("{} counters, not {EXT_COUNTERS}", vals.len())));
    }
    let mut vals: Vec<u64> = vals.into_iter().map(u64::from).collect();
    vals.extend(handed_in(&s).map_err(at)?);
    Ok(vals)
}

/// The frames other adapters handed this one to send out of its ports
/// (`Spine.PORT_OUT` over its peer queues and links): those its runtime
/// queued for a port, and those that named none. Peer queues are listed
/// to the engines' owner (or root) only, as a router's joins are made:
/// to anyone else the figures are the links' alone, and a line on
/// standard error says so. Links are listed to their user.
fn handed_in(s: &Session) -> Result<[u64; 2], String> {
    let peers = s.list_peers().unwrap_or_else(|e| {
        eprintln!("router stat: peer queues not listed ({e}): from_adapter and bad_egress count links only");
        Default::default()
    });
    let links = s.spine_links().map_err(|e| format!("listing links: {e}"))?;
    let out = peers.peers.iter().map(|p| p.port_out).sum::<u64>()
        + links.links.iter().map(|l| l.port_out).sum::<u64>();
    let bad = peers
        .peers
        .iter()
        .map(|p| p.dropped("rx_bad_port"))
        .sum::<u64>()
        + links
            .links
            .iter()
            .map(|l| l.drop_count("bad_port"))
            .sum::<u64>();
    Ok([out, bad])
}

/// One adapter's counters as JSON: the drops in an object `drops`.
fn counters_json(vals: &[u64]) -> serde_json::Map<String, serde_json::Value> {
    let mut o = serde_json::Map::new();
    let mut drops = serde_json::Map::new();
    for (i, (k, v)) in COUNTERS.iter().zip(vals).enumerate() {
        let to = if is_drop(i) { &mut drops } else { &mut o };
        to.insert(k.to_string(), serde_json::json!(v));
    }
    o.insert("drops".into(), drops.into());
    o
}
