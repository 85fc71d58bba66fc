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
//! The listing's encoding is little-endian: counts as `u32`, strings as a
//! `u16` length and UTF-8 bytes. Decoding is total: a listing that does
//! not parse is an error, never a panic.

/// Most peer queues one adapter holds (live or dead).
pub const PEERS_PER_ADAPTER: usize = 16;
/// Most live peer queues one process may have joined on one adapter.
pub const PEERS_PER_PROCESS: usize = 8;

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
    /// Messages sent and not yet taken by the peer.
    pub depth: u64,
    /// Messages taken from the peer (handed to handlers or dropped here).
    pub msgs_in: u64,
    /// Messages put on the queue to the peer.
    pub msgs_out: u64,
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

/// Most entries of any list a listing decodes (a bound, not a format
/// limit: the engine writes far fewer).
const MAX_ENTRIES: u32 = 1 << 10;

fn put_str(b: &mut Vec<u8>, s: &str) {
    let mut n = s.len().min(u16::MAX as usize);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    b.extend_from_slice(&(n as u16).to_le_bytes());
    b.extend_from_slice(&s.as_bytes()[..n]);
}

struct R<'a>(&'a [u8]);

impl<'a> R<'a> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let (h, t) = self
            .0
            .split_first_chunk::<N>()
            .ok_or("the peer listing is truncated")?;
        self.0 = t;
        Ok(*h)
    }
    fn u32(&mut self) -> Result<u32, String> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Result<u64, String> {
        self.take().map(u64::from_le_bytes)
    }
    fn count(&mut self) -> Result<u32, String> {
        let n = self.u32()?;
        if n > MAX_ENTRIES {
            return Err(format!("a list of {n} entries in the peer listing"));
        }
        Ok(n)
    }
    fn str(&mut self) -> Result<String, String> {
        let n = u16::from_le_bytes(self.take()?) as usize;
        if self.0.len() < n {
            return Err("the peer listing is truncated".into());
        }
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        std::str::from_utf8(h)
            .map(str::to_owned)
            .map_err(|_| "text in the peer listing is not UTF-8".into())
    }
}

impl PeerListing {
    /// The listing's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&(self.peers.len() as u32).to_le_bytes());
        for p in &self.peers {
            b.extend_from_slice(&p.index.to_le_bytes());
            b.push(p.side);
            put_str(&mut b, &p.state);
            put_str(&mut b, &p.reason);
            b.extend_from_slice(&p.peer_pid.to_le_bytes());
            for v in [p.depth, p.msgs_in, p.msgs_out] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b.extend_from_slice(&(p.drops.len() as u32).to_le_bytes());
            for (k, v) in &p.drops {
                put_str(&mut b, k);
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        b
    }

    /// Read a listing (what [`PeerListing::encode`] wrote).
    pub fn decode(b: &[u8]) -> Result<PeerListing, String> {
        let mut r = R(b);
        let mut peers = Vec::new();
        for _ in 0..r.count()? {
            let index = r.u32()?;
            let [side] = r.take::<1>()?;
            let state = r.str()?;
            let reason = r.str()?;
            let peer_pid = r.u32()?;
            let depth = r.u64()?;
            let msgs_in = r.u64()?;
            let msgs_out = r.u64()?;
            let drops = (0..r.count()?)
                .map(|_| Ok((r.str()?, r.u64()?)))
                .collect::<Result<_, String>>()?;
            peers.push(PeerInfo {
                index,
                side,
                state,
                reason,
                peer_pid,
                depth,
                msgs_in,
                msgs_out,
                drops,
            });
        }
        if !r.0.is_empty() {
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
                    depth: 3,
                    msgs_in: 9,
                    msgs_out: 12,
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
