//! `unet spine load|unload|list`: SPINE's extensions on a running daemon,
//! and the per-handler table `unet stat` shows; `unet spine
//! peer|peers|unpeer`: the peer queues that join two running daemons'
//! adapters, and their rows; `unet spine link ...` (links over the wire)
//! in `spine/link.rs`; `unet spine ports` (raw-frame ports, opened by
//! `unet spine load --port`) in `spine/port.rs`; the tables' printer in
//! `spine/table.rs`.
//!
//! An extension lives as long as the control connection that loaded it
//! (the engine reclaims everything a client held when it goes), so
//! `unet spine load` stays in the foreground holding it, until it is
//! interrupted or the extension is unloaded (`unet spine unload`, by the
//! same user).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use unet::peer::{PeerListing, PEERS_PER_ADAPTER, PEERS_PER_PROCESS, PEERS_PER_USER};
use unet::spine::{ExtensionOptions, SpineListing};
use unet::ErrorCode;

use table::{joined, left, pairs, right, Table};

pub mod link;
pub mod port;
mod table;

#[derive(Subcommand)]
pub enum Command {
    /// Load an extension (a class file compiled against the SDK's
    /// unet.spine.Spine) and hold it until interrupted. Prints its id and
    /// handler numbers. Exit 2: rejected (`rejected: REASON` on stderr).
    Load(LoadArgs),
    /// Unload an extension (one of this user's).
    Unload(UnloadArgs),
    /// List the extensions with their handlers' statistics.
    List(ListArgs),
    /// Join two running adapters by a peer queue (`--socket A --socket
    /// B`); prints the index each gave it (`DEST_PEER`'s id there). The
    /// queue outlives this command; a user may have 12 live on an
    /// adapter (8 joined by one process).
    Peer(PeerArgs),
    /// List an adapter's peer queues: index, state, the user who joined
    /// it, depth, messages in and out, drops by reason.
    Peers(ListArgs),
    /// Leave a peer queue of an adapter (one this user joined; root may
    /// leave any): its peer sees it dead.
    Unpeer(UnpeerArgs),
    /// Links over the UDP wire to other daemons (adapters).
    #[command(subcommand)]
    Link(link::LinkCommand),
    /// List an adapter's raw-frame ports: interface, handler, frames in
    /// and out, drops by reason.
    Ports(ListArgs),
}

#[derive(Args)]
pub struct PeerArgs {
    /// Control sockets of the two engines to join (twice).
    #[arg(long, num_args = 1, required = true, value_name = "PATH")]
    socket: Vec<PathBuf>,
    /// Print one JSON object instead of a line.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct LoadArgs {
    /// Control socket of the engine.
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The extension's class file.
    #[arg(value_name = "FILE.class")]
    file: PathBuf,
    /// A name for listings (default: the file's stem).
    #[arg(long)]
    name: Option<String>,
    /// Time budget of one handler invocation, µs (default: 10).
    #[arg(long, value_name = "US", default_value_t = 0)]
    budget_us: u32,
    /// The argument of its `init(int)`.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    arg: i32,
    /// A domain granted besides `spine` (repeatable).
    #[arg(long = "grant", value_name = "DOMAIN")]
    grant: Vec<String>,
    /// Open a raw-frame port on network interface INTERFACE (in the
    /// engine's network namespace) whose frames go to the extension's
    /// first handler, held with it (repeatable; the ports' ids follow in
    /// order). Needs the engine's user or root.
    #[arg(long = "port", value_name = "INTERFACE")]
    ports: Vec<String>,
}

#[derive(Args)]
pub struct UnloadArgs {
    /// Control socket of the engine.
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The extension's id (see `unet spine list`).
    #[arg(value_name = "ID")]
    id: u32,
}

#[derive(Args)]
pub struct UnpeerArgs {
    /// Control socket of the engine.
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The queue's index on that adapter (see `unet spine peers`).
    #[arg(value_name = "INDEX")]
    index: u32,
}

#[derive(Args)]
pub struct ListArgs {
    /// Control socket of the engine.
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(c: Command) -> ExitCode {
    match c {
        Command::Load(a) => load(a),
        Command::Unload(a) => unload(a),
        Command::List(a) => list(a),
        Command::Peer(a) => peer(a),
        Command::Peers(a) => peers(a),
        Command::Unpeer(a) => {
            match unet::Session::connect(&a.socket).and_then(|s| s.leave_peer(a.index)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            }
        }
        Command::Link(c) => link::run(c),
        Command::Ports(a) => port::list(a),
    }
}

fn peer(a: PeerArgs) -> ExitCode {
    let [sa, sb] = &a.socket[..] else {
        return fail("give two control sockets: --socket A --socket B");
    };
    let joined = unet::Session::connect(sa).and_then(|x| {
        let y = unet::Session::connect(sb)?;
        unet::peer::join(&x, &y)
    });
    match joined {
        Ok(p) if a.json => {
            println!("{}", serde_json::json!({ "a": p.a, "b": p.b }));
            ExitCode::SUCCESS
        }
        Ok(p) => {
            println!(
                "joined: index {} on {}, index {} on {}",
                p.a,
                sa.display(),
                p.b,
                sb.display()
            );
            ExitCode::SUCCESS
        }
        Err(unet::Error::Quota(ErrorCode::ObjectQuota)) => fail(at_peer_cap(sa, sb)),
        Err(e) => fail(e),
    }
}

/// Why a join was refused for a cap, with what to do: the adapter at
/// which this user holds [`PEERS_PER_USER`] live queues, and their
/// indices (to leave one).
fn at_peer_cap(sa: &Path, sb: &Path) -> String {
    let me = unet_sys::effective_uid();
    for sock in [sa, sb] {
        let Ok(l) = unet::Session::connect(sock).and_then(|s| s.list_peers()) else {
            continue;
        };
        let mine: Vec<String> = l
            .peers
            .iter()
            .filter(|p| p.alive() && p.uid == me)
            .map(|p| p.index.to_string())
            .collect();
        if mine.len() >= PEERS_PER_USER {
            return format!(
                "{} holds {} live peer queues joined by this user (uid {me}), as many as \
                 one user may join on an adapter ({PEERS_PER_USER} of its \
                 {PEERS_PER_ADAPTER}, whichever processes joined them): leave one first \
                 (`unet spine unpeer --socket {} INDEX`; this user's: {})",
                sock.display(),
                mine.len(),
                sock.display(),
                mine.join(", ")
            );
        }
    }
    format!(
        "an adapter refused the peer queue: this user holds as many live peer queues \
         on it as one user may ({PEERS_PER_USER}), or this process as one process may \
         ({PEERS_PER_PROCESS}): `unet spine peers` lists them, `unet spine unpeer` \
         leaves one"
    )
}

fn peers(a: ListArgs) -> ExitCode {
    let l = match unet::Session::connect(&a.socket).and_then(|s| s.list_peers()) {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    if a.json {
        println!("{}", peers_json(&l));
    } else {
        print_peers(&l, true);
    }
    ExitCode::SUCCESS
}

/// The peer queues' table.
const PEERS: Table = Table {
    indent: "  ",
    cols: &[
        right("index", 8),
        right("side", 4),
        left("state", 18),
        right("pid", 8),
        right("user", 6),
        right("depth", 8),
        right("in", 12),
        right("out", 12),
        right("to port", 12),
    ],
    last: "drops",
};

/// The peer queues, one row each (with `empty`, a heading when there is
/// none).
pub fn print_peers(l: &PeerListing, empty: bool) {
    if l.peers.is_empty() && !empty {
        return;
    }
    println!("spine peer queues:");
    PEERS.heading();
    for p in &l.peers {
        let state = if p.reason.is_empty() {
            p.state.clone()
        } else {
            format!("{} ({})", p.state, p.reason)
        };
        PEERS.row(
            &[
                &p.index,
                &p.side,
                &state,
                &p.peer_pid,
                &user(p.uid),
                &p.depth,
                &p.msgs_in,
                &p.msgs_out,
                &p.port_out,
            ],
            &pairs(&p.drops, false),
        );
    }
}

/// The peer queues as JSON (`unet spine peers --json`, and `peers` in
/// `unet stat --json`).
pub fn peers_json(l: &PeerListing) -> serde_json::Value {
    serde_json::json!(l
        .peers
        .iter()
        .map(|p| serde_json::json!({
            "index": p.index,
            "side": p.side,
            "state": p.state,
            "reason": p.reason,
            "peer_pid": p.peer_pid,
            "uid": p.uid,
            "depth": p.depth,
            "in": p.msgs_in,
            "out": p.msgs_out,
            "port_out": p.port_out,
            "drops": serde_json::Value::Object(
                p.drops
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::json!(v)))
                    .collect()
            ),
        }))
        .collect::<Vec<_>>())
}

/// A user id as a row shows it (`-`: the kernel did not tell it).
fn user(uid: u32) -> String {
    if uid == u32::MAX {
        "-".into()
    } else {
        uid.to_string()
    }
}

pub(crate) fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(1)
}

fn load(a: LoadArgs) -> ExitCode {
    let bytes = match std::fs::read(&a.file) {
        Ok(b) => b,
        Err(e) => return fail(format!("{}: {e}", a.file.display())),
    };
    let session = match unet::Session::connect(&a.socket) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let name = a.name.unwrap_or_else(|| {
        a.file
            .file_stem()
            .map_or("extension".into(), |s| s.to_string_lossy().into_owned())
    });
    let opts = ExtensionOptions {
        name,
        budget_us: a.budget_us,
        arg: a.arg,
        domains: a.grant,
    };
    let ext = match session.load_extension(&bytes, opts) {
        Ok(x) => x,
        Err(unet::Error::Rejected(why)) => {
            eprintln!("rejected: {why}");
            return ExitCode::from(2);
        }
        Err(e) => return fail(e),
    };
    let mut opened = Vec::new();
    for iface in &a.ports {
        let Some(&h) = ext.handlers.first() else {
            return fail("the extension installed no handler for its ports");
        };
        match session.spine_port_open(iface, h) {
            Ok(p) => opened.push(format!("port {p} on {iface}")),
            Err(e) => return fail(format!("port on {iface}: {e}")),
        }
    }
    let ports = if opened.is_empty() {
        String::new()
    } else {
        format!(", {}", opened.join(", "))
    };
    println!(
        "loaded extension {} with handlers {:?}{ports}; holding it until interrupted",
        ext.id, ext.handlers
    );
    // Held while this connection lives: look now and then whether it was
    // unloaded from elsewhere.
    loop {
        std::thread::sleep(Duration::from_millis(500));
        match session.list_extensions() {
            Ok(l) if l.extensions.iter().any(|x| x.id == ext.id) => {}
            Ok(_) => {
                println!("extension {} was unloaded", ext.id);
                return ExitCode::SUCCESS;
            }
            Err(e) => return fail(e),
        }
    }
}

fn unload(a: UnloadArgs) -> ExitCode {
    match unet::Session::connect(&a.socket).and_then(|s| s.unload_extension(a.id)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn list(a: ListArgs) -> ExitCode {
    let l = match unet::Session::connect(&a.socket).and_then(|s| s.list_extensions()) {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    if a.json {
        println!("{}", to_json(&l));
    } else {
        print_listing(&l, true);
    }
    ExitCode::SUCCESS
}

/// An extension's handlers' table.
const HANDLERS: Table = Table {
    indent: "    ",
    cols: &[
        right("number", 6),
        left("method", 20),
        right("invocations", 12),
        right("timed", 10),
        right("avg ns", 10),
        right("max ns", 10),
    ],
    last: "terminations",
};

/// The extensions and their handlers, one row per handler; with
/// `totals`, the runtime's events and drops too (those not zero).
pub fn print_listing(l: &SpineListing, totals: bool) {
    if l.extensions.is_empty() && !totals {
        return;
    }
    println!("spine extensions:");
    for x in &l.extensions {
        println!(
            "  {} {:<16} pid {:<8} budget {} us  {}  kept {}{}",
            x.id,
            x.name,
            x.pid,
            x.budget_us,
            if x.compiled {
                "compiled"
            } else {
                "interpreted"
            },
            x.kept,
            if x.last_fault.is_empty() {
                String::new()
            } else {
                format!("  last: {}", x.last_fault)
            }
        );
        HANDLERS.heading();
        for h in &x.handlers {
            HANDLERS.row(
                &[
                    &h.number,
                    &h.method,
                    &h.invocations,
                    &h.timed,
                    &h.mean_ns(),
                    &h.max_ns,
                ],
                &pairs(&h.terminations, false),
            );
        }
        for e in &x.exports {
            let faults: u64 = e.terminations.iter().map(|(_, n)| n).sum();
            println!(
                "    exports {}.{} ({}): {} calls, {} faulted",
                x.name,
                e.method,
                if e.ephemeral {
                    "ephemeral"
                } else {
                    "init only"
                },
                e.calls,
                faults
            );
        }
        if !x.imports.is_empty() {
            println!("    imports {}", x.imports.join(", "));
        }
    }
    if totals {
        println!(
            "  in use: {} messages, {} buffers, {} events queued; {} bad handles, {} keeps refused",
            l.msgs_live, l.bufs_live, l.queued, l.bad_handles, l.keeps_refused
        );
        for (what, rows) in [("events run", &l.events), ("drops", &l.drops)] {
            let rows = joined(rows, true);
            if !rows.is_empty() {
                println!("  {what}: {rows}");
            }
        }
    }
}

/// The listing as JSON (`unet spine list --json`, and `spine` in `unet
/// stat --json`).
pub fn to_json(l: &SpineListing) -> serde_json::Value {
    let pairs = |p: &[(String, u64)]| {
        serde_json::Value::Object(
            p.iter()
                .map(|(k, v)| (k.clone(), serde_json::json!(v)))
                .collect(),
        )
    };
    serde_json::json!({
        "extensions": l.extensions.iter().map(|x| serde_json::json!({
            "id": x.id,
            "name": x.name,
            "pid": x.pid,
            "budget_us": x.budget_us,
            "compiled": x.compiled,
            "kept": x.kept,
            "keeps_undone": x.keeps_undone,
            "last_fault": x.last_fault,
            "handlers": x.handlers.iter().map(|h| serde_json::json!({
                "number": h.number,
                "method": h.method,
                "invocations": h.invocations,
                "timed": h.timed,
                "total_ns": h.total_ns,
                "max_ns": h.max_ns,
                "terminations": pairs(&h.terminations),
            })).collect::<Vec<_>>(),
            "exports": x.exports.iter().map(|e| serde_json::json!({
                "method": e.method,
                "ephemeral": e.ephemeral,
                "calls": e.calls,
                "terminations": pairs(&e.terminations),
                "last_fault": e.last_fault,
            })).collect::<Vec<_>>(),
            "imports": x.imports,
        })).collect::<Vec<_>>(),
        "events": pairs(&l.events),
        "drops": pairs(&l.drops),
        "msgs_live": l.msgs_live,
        "bufs_live": l.bufs_live,
        "queued": l.queued,
        "bad_handles": l.bad_handles,
        "keeps_refused": l.keeps_refused,
        "dead_calls": l.dead_calls,
    })
}
