//! The router's adapters when it has several (the SPINE paper's router,
//! one adapter a port): one `unet daemon` each (`--socket`, repeatable),
//! the router extension loaded onto each with an endpoint of the host
//! application for its host path, and how the adapters reach each other,
//! a pair at a time: `--between peer` joins them by a peer queue
//! (`unet::peer::join`, `DEST_PEER`: the paper's "PCI" case), `--between
//! wire` by a SPINE link over the engines' UDP wire (`DEST_WIRE`: its
//! "Wire" case; every daemon needs a UDP port, `unet daemon --udp ADDR`).
//! Also which adapter owns a port (`--port IFACE=ADDR/LEN@K`) and the
//! slot by which an adapter knows a port of another.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use unet::peer::PeerGeometry;
use unet::spine::{Extension, ExtensionOptions};
use unet::{Endpoint, EndpointConfig, Session};
use unet_abi::spine::{DEST_PEER, DEST_WIRE};

/// `Router.java`'s `PORTS`: an adapter's local port slots are its
/// engine's port ids (below this); a port of another adapter takes slot
/// `PORTS + ` its index in the order of `--port`.
pub const PORTS: u32 = 8;

/// The peer queues' geometry: 1 024 frames a direction (of up to 2 KiB
/// each), four turns of the ingress adapter (at most 256 frames a turn
/// from its port), while the egress adapter takes up to 256 a turn (the
/// default queue, 256 KiB of bulk data, holds about 170 full frames and
/// dropped some of a TCP transfer's bursts as `tx_full`).
const QUEUE: PeerGeometry = PeerGeometry {
    slots: 1024,
    data_size: 2 << 20,
};

/// How the adapters reach each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Between {
    /// A peer queue for each pair of adapters (the paper's "PCI" case).
    Peer,
    /// A SPINE link over the engines' UDP wire for each pair (its "Wire"
    /// case; each daemon needs `--udp ADDR`).
    Wire,
}

/// One adapter: its daemon's socket, a session, the extension loaded on
/// it and the host application's endpoint there.
pub struct Adapter {
    pub socket: PathBuf,
    pub session: Session,
    pub ep: Endpoint,
    pub ext: Extension,
}

/// The adapters and the destinations by which each reaches each other.
pub struct Adapters {
    pub list: Vec<Adapter>,
    /// `to[i][j]`: the destination (`DEST_PEER << 24 | index` or
    /// `DEST_WIRE << 24 | link`) by which adapter `i` reaches `j`.
    to: Vec<Vec<u32>>,
    /// The peer queues joined, as (adapter, index), to leave at the end.
    joined: Vec<(usize, u32)>,
    /// A line saying how they were joined.
    pub joins: Vec<String>,
}

/// `IFACE=ADDR/LEN[@K]`: the port's text without `@K`, and `K` (0 by
/// default). Only an `@` after the `=` is taken as `@K`.
pub fn owner_of(s: &str) -> Result<(&str, usize), String> {
    let eq = s.find('=').map_or(0, |i| i + 1);
    match s[eq..].rfind('@') {
        Some(at) => {
            let k = &s[eq + at + 1..];
            let k = k
                .parse()
                .map_err(|e| format!("{s:?}: the adapter index after @: {e}"))?;
            Ok((&s[..eq + at], k))
        }
        None => Ok((s, 0)),
    }
}

/// The slot by which adapter `a` knows port `p` (its index in the order
/// of `--port`), owned by adapter `owner` with engine port id `id`.
pub fn slot(a: usize, p: usize, owner: usize, id: u32) -> u32 {
    if a == owner {
        id
    } else {
        PORTS + p as u32
    }
}

impl Adapters {
    /// Connect to every socket, load the extension (`class`, with
    /// `opts`) and make an endpoint on each.
    pub fn open(
        sockets: &[PathBuf],
        class: &[u8],
        opts: &ExtensionOptions,
    ) -> Result<Adapters, String> {
        let mut list = Vec::new();
        for socket in sockets {
            let at = |e: String| format!("{}: {e}", socket.display());
            let session = Session::connect(socket).map_err(|e| at(e.to_string()))?;
            let ext = session
                .load_extension(class, opts.clone())
                .map_err(|e| at(format!("loading the router extension: {e}")))?;
            // No spin before a blocking receive sleeps: the host
            // application waits for rare frames and should use no CPU.
            let ep = session
                .create_endpoint(EndpointConfig {
                    spin: Duration::ZERO,
                    ..EndpointConfig::default()
                })
                .map_err(|e| at(e.to_string()))?;
            list.push(Adapter {
                socket: socket.clone(),
                session,
                ep,
                ext,
            });
        }
        let n = list.len();
        Ok(Adapters {
            list,
            to: vec![vec![0; n]; n],
            joined: Vec::new(),
            joins: Vec::new(),
        })
    }

    /// Join every pair of adapters `between` them.
    pub fn join(&mut self, between: Between) -> Result<(), String> {
        let n = self.list.len();
        for i in 0..n {
            for j in i + 1..n {
                let (a, b) = (&self.list[i], &self.list[j]);
                let (di, dj, how) = match between {
                    Between::Peer => {
                        let p = unet::peer::join_with(&a.session, &b.session, QUEUE)
                            .map_err(|e| format!("joining adapters {i} and {j}: {e}"))?;
                        self.joined.push((i, p.a));
                        self.joined.push((j, p.b));
                        (
                            DEST_PEER << 24 | p.a,
                            DEST_PEER << 24 | p.b,
                            format!("a peer queue (indices {} and {})", p.a, p.b),
                        )
                    }
                    Between::Wire => {
                        let (li, lj, at) = link(a, b).map_err(|e| {
                            format!("linking adapters {i} and {j} over the wire: {e}")
                        })?;
                        (
                            DEST_WIRE << 24 | li,
                            DEST_WIRE << 24 | lj,
                            format!("a wire link to {at} (links {li} and {lj})"),
                        )
                    }
                };
                self.to[i][j] = di;
                self.to[j][i] = dj;
                self.joins
                    .push(format!("router: adapters {i} and {j} joined by {how}"));
            }
        }
        Ok(())
    }

    /// The destination by which adapter `from` reaches adapter `to`.
    pub fn dest(&self, from: usize, to: usize) -> u32 {
        self.to[from][to]
    }

    /// Leave the peer queues joined (a link over the wire closes with
    /// the connection that made it; a peer queue would outlive it).
    pub fn leave(&self) {
        for &(a, index) in &self.joined {
            let _ = self.list[a].session.leave_peer(index);
        }
    }
}

/// A link from `a` (listening) to `b` (connecting to `a`'s UDP address):
/// the link's id on each and the address.
fn link(a: &Adapter, b: &Adapter) -> Result<(u32, u32, String), String> {
    let mut at = a.session.udp_addr().ok_or_else(|| {
        format!(
            "{} has no UDP wire (start its daemon with --udp ADDR)",
            a.socket.display()
        )
    })?;
    if at.ip().is_unspecified() {
        at.set_ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    if b.session.udp_addr().is_none() {
        return Err(format!(
            "{} has no UDP wire (start its daemon with --udp ADDR)",
            b.socket.display()
        ));
    }
    let (la, token) = a.session.spine_link_listen(0).map_err(|e| e.to_string())?;
    let lb = b
        .session
        .spine_link_connect(at, token, Duration::from_secs(5))
        .map_err(|e| {
            let _ = a.session.spine_link_close(la);
            e.to_string()
        })?;
    Ok((la, lb, at.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_names_its_adapter_after_its_address() {
        assert_eq!(owner_of("eth1=10.0.0.1/24"), Ok(("eth1=10.0.0.1/24", 0)));
        assert_eq!(owner_of("eth1=10.0.0.1/24@1"), Ok(("eth1=10.0.0.1/24", 1)));
        assert_eq!(owner_of("a@b=10.0.0.1/24"), Ok(("a@b=10.0.0.1/24", 0)));
        assert_eq!(owner_of("a@b=10.0.0.1/24@2"), Ok(("a@b=10.0.0.1/24", 2)));
        assert!(owner_of("eth1=10.0.0.1/24@x").is_err());
        assert!(owner_of("eth1=10.0.0.1/24@").is_err());
    }

    #[test]
    fn an_adapter_knows_its_own_ports_by_id_and_the_others_by_slot() {
        assert_eq!(slot(0, 0, 0, 3), 3);
        assert_eq!(slot(1, 0, 0, 3), PORTS);
        assert_eq!(slot(0, 2, 1, 0), PORTS + 2);
        assert_eq!(slot(1, 2, 1, 0), 0);
    }
}
