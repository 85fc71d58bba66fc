//! `unet spine link listen|connect|close|list`: SPINE's links over the
//! UDP wire between two running daemons (adapters), and the per-link
//! rows `unet stat` shows.
//!
//! A link lives as long as the control connection that made it (the
//! engine closes a client's links when it goes), so `listen` and
//! `connect` stay in the foreground holding theirs, until interrupted or
//! the link is closed (`unet spine link close`, by the same user).
//! Delivery over a link is best effort, as SPINE's wire is.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use unet::spine_wire::LinkListing;

use super::table::{joined, left, pairs, right, Table};

#[derive(Subcommand)]
pub enum LinkCommand {
    /// Make a link that waits for another daemon to connect; prints its
    /// id (what this daemon's handlers send to, `DEST_WIRE`) and the
    /// token to give `connect`, and holds it until interrupted.
    Listen(ListenArgs),
    /// Make a link to the daemon listening at ADDR (its UDP address) with
    /// TOKEN; prints its id once the other side accepted, and holds it
    /// until interrupted. Exit 2: refused or unanswered.
    Connect(ConnectArgs),
    /// Close a link (one of this user's): its peer is told.
    Close(CloseArgs),
    /// List the links: state, peer, messages and bytes in and out, drops
    /// by reason.
    List(ListArgs),
}

#[derive(Args)]
pub struct ListenArgs {
    /// Control socket of the engine.
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The token a connect must show (default: the engine picks one).
    #[arg(long, default_value_t = 0)]
    token: u64,
}

#[derive(Args)]
pub struct ConnectArgs {
    /// Control socket of the engine.
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The listening daemon's UDP address.
    #[arg(value_name = "ADDR")]
    addr: SocketAddr,
    /// The token it listens with.
    #[arg(value_name = "TOKEN")]
    token: u64,
    /// How long the other side has to accept, ms.
    #[arg(long, default_value_t = 5000)]
    timeout_ms: u64,
}

#[derive(Args)]
pub struct CloseArgs {
    /// Control socket of the engine.
    #[arg(long, env = "UNET_SOCKET", default_value = unet::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The link's id (see `unet spine link list`).
    #[arg(value_name = "ID")]
    id: u32,
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

pub fn run(c: LinkCommand) -> ExitCode {
    match c {
        LinkCommand::Listen(a) => listen(a),
        LinkCommand::Connect(a) => connect(a),
        LinkCommand::Close(a) => close(a),
        LinkCommand::List(a) => list(a),
    }
}

fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(1)
}

fn listen(a: ListenArgs) -> ExitCode {
    let s = match unet::Session::connect(&a.socket) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let (link, token) = match s.spine_link_listen(a.token) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    let at = s
        .udp_addr()
        .map_or_else(|| "?".to_string(), |a| a.to_string());
    println!("link {link} listening at {at} with token {token}; holding it until interrupted");
    hold(&s, link)
}

fn connect(a: ConnectArgs) -> ExitCode {
    let s = match unet::Session::connect(&a.socket) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let timeout = Duration::from_millis(a.timeout_ms);
    let link = match s.spine_link_connect(a.addr, a.token, timeout) {
        Ok(l) => l,
        Err(e @ unet::Error::Engine(unet::ErrorCode::Refused | unet::ErrorCode::Unreachable)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
        Err(e) => return fail(e),
    };
    println!(
        "link {link} up with {}; holding it until interrupted",
        a.addr
    );
    hold(&s, link)
}

/// Hold `link` while this connection lives; return once it is gone
/// (closed from elsewhere).
fn hold(s: &unet::Session, link: u32) -> ExitCode {
    let mut state = String::new();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        match s.spine_links() {
            Ok(l) => match l.link(link) {
                Some(r) if r.state != state => {
                    if !state.is_empty() {
                        println!("link {link}: {}", r.state);
                    }
                    state = r.state.clone();
                }
                Some(_) => {}
                None => {
                    println!("link {link} was closed");
                    return ExitCode::SUCCESS;
                }
            },
            Err(e) => return fail(e),
        }
    }
}

fn close(a: CloseArgs) -> ExitCode {
    match unet::Session::connect(&a.socket).and_then(|s| s.spine_link_close(a.id)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn list(a: ListArgs) -> ExitCode {
    let l = match unet::Session::connect(&a.socket).and_then(|s| s.spine_links()) {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    if a.json {
        println!("{}", to_json(&l));
    } else {
        print_links(&l, true);
    }
    ExitCode::SUCCESS
}

/// The links' table.
pub(super) const LINKS: Table = Table {
    indent: "  ",
    cols: &[
        right("id", 6),
        left("state", 10),
        left("peer", 22),
        right("theirs", 6),
        right("pid", 8),
        right("msgs in", 10),
        right("msgs out", 10),
        right("to port", 10),
    ],
    last: "drops",
};

/// The links, one row each (drops: those not zero); with `all`, the
/// header even when there is none, and the adapter's drops.
pub fn print_links(l: &LinkListing, all: bool) {
    let adapter = joined(&l.drops, true);
    if l.links.is_empty() && adapter.is_empty() && !all {
        return;
    }
    println!("spine links:");
    LINKS.heading();
    for r in &l.links {
        let peer = if r.peer.is_empty() { "-" } else { &r.peer };
        LINKS.row(
            &[
                &r.id,
                &r.state,
                &peer,
                &r.peer_link,
                &r.pid,
                &r.msgs_in,
                &r.msgs_out,
                &r.port_out,
            ],
            &pairs(&r.drops, true),
        );
    }
    if !adapter.is_empty() {
        println!("  frames no link took: {adapter}");
    }
}

/// The listing as JSON (`unet spine link list --json`, and `spine_links`
/// in `unet stat --json`).
pub fn to_json(l: &LinkListing) -> serde_json::Value {
    let pairs = |p: &[(String, u64)]| {
        serde_json::Value::Object(
            p.iter()
                .map(|(k, v)| (k.clone(), serde_json::json!(v)))
                .collect(),
        )
    };
    serde_json::json!({
        "links": l.links.iter().map(|r| serde_json::json!({
            "id": r.id,
            "state": r.state,
            "peer": r.peer,
            "peer_link": r.peer_link,
            "pid": r.pid,
            "msgs_in": r.msgs_in,
            "msgs_out": r.msgs_out,
            "port_out": r.port_out,
            "bytes_in": r.bytes_in,
            "bytes_out": r.bytes_out,
            "drops": pairs(&r.drops),
        })).collect::<Vec<_>>(),
        "drops": pairs(&l.drops),
    })
}
