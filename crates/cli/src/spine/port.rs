//! `unet spine ports`: SPINE's raw-frame ports of a running daemon, one
//! row each (interface, how it sends, handler, frames in and out, drops
//! by reason).
//! Ports are opened by `unet spine load --port INTERFACE` and live as
//! long as the load that holds them.

use std::process::ExitCode;

use unet::spine_port::PortListing;

use super::table::{left, pairs, right, Table};
use super::{fail, ListArgs};

pub(super) fn list(a: ListArgs) -> ExitCode {
    let l = match unet::Session::connect(&a.socket).and_then(|s| s.spine_ports()) {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    if a.json {
        println!("{}", to_json(&l));
    } else {
        print_ports(&l, true);
    }
    ExitCode::SUCCESS
}

/// The ports' table.
const PORTS: Table = Table {
    indent: "  ",
    cols: &[
        right("id", 6),
        left("interface", 16),
        left("tx", 8),
        right("handler", 7),
        right("pid", 8),
        right("frames in", 12),
        right("frames out", 12),
    ],
    last: "drops",
};

/// The ports, one row each (drops: those not zero); with `all`, the
/// header even when there is none.
pub fn print_ports(l: &PortListing, all: bool) {
    if l.ports.is_empty() && !all {
        return;
    }
    println!("spine ports:");
    PORTS.heading();
    for p in &l.ports {
        PORTS.row(
            &[
                &p.id,
                &p.interface,
                &p.tx,
                &p.handler,
                &p.pid,
                &p.frames_in,
                &p.frames_out,
            ],
            &pairs(&p.drops, true),
        );
    }
}

/// The listing as JSON (`unet spine ports --json`).
pub fn to_json(l: &PortListing) -> serde_json::Value {
    serde_json::json!({
        "ports": l.ports.iter().map(|p| serde_json::json!({
            "id": p.id,
            "interface": p.interface,
            "tx": p.tx,
            "handler": p.handler,
            "pid": p.pid,
            "frames_in": p.frames_in,
            "frames_out": p.frames_out,
            "bytes_in": p.bytes_in,
            "bytes_out": p.bytes_out,
            "drops": serde_json::Value::Object(
                p.drops
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::json!(v)))
                    .collect()
            ),
        })).collect::<Vec<_>>(),
    })
}
