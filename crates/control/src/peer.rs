//! SPINE's peer queues as the control protocol carries them: what
//! [`crate::Reply::PeerListing`] hands over in a memory file (a row per
//! peer queue of the adapter), and the limits of joining.
//!
//! A client joins two adapters by making a peer segment and handing it
//! to each with its side ([`crate::Request::PeerJoin`]); each answers
//! with the index it gave the link ([`crate::Reply::PeerJoined`], the
//! `id` of a `DEST_PEER` destination) and its doorbell, which the client
//! passes to the other ([`crate::Request::PeerDoorbell`]) so that each
//! wakes the other when it sends.
//!
//! A queue outlives the process that joined it (the link is between the
//! adapters), so its caps are per adapter, per process and per user: a
//! user who joins again and again from new processes stops at
//! [`PEERS_PER_USER`] and leaves room for another. A queue is the joining
//! user's: only that user (or root) may leave it or hand it a doorbell.
//!
//! The listing's encoding is little-endian: counts as `u32`, strings as a
//! `u16` length and UTF-8 bytes. Decoding is total: a listing that does
//! not parse is an error, never a panic.

/// Most peer queues one adapter holds (live or dead).
pub const PEERS_PER_ADAPTER: usize = 16;
/// Most live peer queues one process may have joined on one adapter.
pub const PEERS_PER_PROCESS: usize = 8;
/// Most live peer queues the processes of one user may have joined on one
/// adapter, whichever process joined them (those that exited count while
/// their queues live). One process's whole share fits, with room for
/// more of the same user's joins, and `PEERS_PER_ADAPTER -
/// PEERS_PER_USER` (4) queues are always left for another user who may
/// join (root, or the engines' owner).
pub const PEERS_PER_USER: usize = 12;
const _: () = assert!(PEERS_PER_PROCESS <= PEERS_PER_USER && PEERS_PER_USER < PEERS_PER_ADAPTER);

/// One peer queue of an adapter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerInfo {
    /// The index the adapter gave it (`DEST_PEER`'s id).
    pub index: u32,
    /// This adapter's side of the segment (0 or 1).
    pub side: u8,
    /// `alive` or `dead`.
    pub state: String,
    /// Why it is dead (`closed`, `exited`, `stalled`, `broken: ...`,
    /// `left`), empty while it is alive.
    pub reason: String,
    /// The peer adapter's process id (0: not known yet).
    pub peer_pid: u32,
    /// The user who joined it (`u32::MAX`: not known): the one who may
    /// leave it, beside root.
    pub uid: u32,
    /// Messages sent and not yet taken by the peer.
    pub depth: u64,
    /// Messages taken from the peer (handed to handlers or dropped here).
    pub msgs_in: u64,
    /// Messages put on the queue to the peer.
    pub msgs_out: u64,
    /// Of the messages taken, those for the runtime's `SYS_PORT_OUT` that
    /// it queued for one of the adapter's raw-frame ports.
    pub port_out: u64,
    /// Drops by reason (name, count), the reasons with a count.
    pub drops: Vec<(String, u64)>,
}

impl PeerInfo {
    /// Whether the queue's peer is alive.
    pub fn alive(&self) -> bool {
        self.state == "alive"
    }

    /// The count of drop reason `name`.
    pub fn dropped(&self, name: &str) -> u64 {
        self.drops
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v)
            .sum()
    }
}

/// The listing: the adapter's peer queues.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerListing {
    /// One row per queue, by index.
    pub peers: Vec<PeerInfo>,
}

use crate::bytes::{Listing, W};

/// Most entries of any list a listing decodes (a bound, not a format
/// limit: the engine writes far fewer).
const MAX_ENTRIES: u32 = 1 << 10;

impl PeerListing {
    /// The listing's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W::default();
        w.u32(self.peers.len() as u32);
        for p in &self.peers {
            w.u32(p.index);
            w.u8(p.side);
            w.str(&p.state);
            w.str(&p.reason);
            w.u32(p.peer_pid);
            w.u32(p.uid);
            for v in [p.depth, p.msgs_in, p.msgs_out, p.port_out] {
                w.u64(v);
            }
            w.pairs(&p.drops);
        }
        w.into_vec()
    }

    /// Read a listing (what [`PeerListing::encode`] wrote).
    pub fn decode(b: &[u8]) -> Result<PeerListing, String> {
        let mut r = Listing::new(b, "peer listing", MAX_ENTRIES);
        let mut peers = Vec::new();
        for _ in 0..r.count()? {
            let index = r.u32()?;
            let side = r.u8()?;
            let state = r.str()?;
            let reason = r.str()?;
            let peer_pid = r.u32()?;
            let uid = r.u32()?;
            let depth = r.u64()?;
            let msgs_in = r.u64()?;
            let msgs_out = r.u64()?;
            let port_out = r.u64()?;
            let drops = r.pairs()?;
            peers.push(PeerInfo {
                index,
                side,
                state,
                reason,
                peer_pid,
                uid,
                depth,
                msgs_in,
                msgs_out,
                port_out,
                drops,
            });
        }
        if !r.is_empty() {
            return Err("bytes after the peer listing".into());
        }
        Ok(PeerListing { peers })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_listing_round_trips_and_every_cut_of_it_is_refused() {
        let l = PeerListing {
            peers: vec![
                PeerInfo {
                    index: 17,
                    side: 1,
                    state: "dead".into(),
                    reason: "exited".into(),
                    peer_pid: 4242,
                    uid: 1000,
                    depth: 3,
                    msgs_in: 9,
                    msgs_out: 12,
                    port_out: 7,
                    drops: vec![("dead_out".into(), 3)],
                },
                PeerInfo {
                    index: 2,
                    state: "alive".into(),
                    ..PeerInfo::default()
                },
            ],
        };
        let b = l.encode();
        assert_eq!(PeerListing::decode(&b), Ok(l.clone()));
        for n in 0..b.len() {
            assert!(PeerListing::decode(&b[..n]).is_err(), "cut at {n}");
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(PeerListing::decode(&longer).is_err());
        assert!(!l.peers[0].alive() && l.peers[1].alive());
        assert_eq!(l.peers[0].dropped("dead_out"), 3);
        assert_eq!(l.peers[0].dropped("full"), 0);
    }
}
