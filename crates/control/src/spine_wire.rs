//! SPINE's links over the wire, as the control protocol shows them: what
//! [`crate::Reply::SpineLinkListing`] hands over in a memory file (a row
//! per link: its state, its peer, messages in and out, drops by reason,
//! and the adapter's drops of frames that named no link).
//!
//! The encoding is little-endian: counts as `u32`, strings as a `u16`
//! length and UTF-8 bytes. Decoding is total: a listing that does not
//! parse is an error, never a panic.

/// One link.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkInfo {
    /// Its id on the adapter (`DEST_WIRE`'s id).
    pub id: u32,
    /// `listening`, `connecting`, `up`, `refused`, `closed` (by the
    /// peer) or `silent` (the peer stopped answering).
    pub state: String,
    /// The peer adapter's wire address, once known.
    pub peer: String,
    /// The peer's id of the link (0 until it is up).
    pub peer_link: u32,
    /// The process that made it.
    pub pid: u32,
    /// Messages received and handed to a handler (or to a port).
    pub msgs_in: u64,
    /// Messages sent.
    pub msgs_out: u64,
    /// Of the messages received, those for the runtime's `SYS_PORT_OUT`
    /// that it queued for one of the adapter's raw-frame ports.
    pub port_out: u64,
    /// Bytes of those received (header, arguments, bulk data).
    pub bytes_in: u64,
    /// Bytes of those sent.
    pub bytes_out: u64,
    /// Drops, by reason (name, count): every reason, in a fixed order.
    pub drops: Vec<(String, u64)>,
}

impl LinkInfo {
    /// The count of drop reason `name`.
    pub fn drop_count(&self, name: &str) -> u64 {
        count(&self.drops, name)
    }
}

/// The listing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkListing {
    /// The links the asking client may see.
    pub links: Vec<LinkInfo>,
    /// The adapter's drops of frames no link took (name, count): a link
    /// id that names nothing, a frame that does not parse, a full inbox.
    pub drops: Vec<(String, u64)>,
}

impl LinkListing {
    /// The count of the adapter's drop reason `name`.
    pub fn drop_count(&self, name: &str) -> u64 {
        count(&self.drops, name)
    }

    /// Link `id`, if listed.
    pub fn link(&self, id: u32) -> Option<&LinkInfo> {
        self.links.iter().find(|l| l.id == id)
    }
}

fn count(p: &[(String, u64)], name: &str) -> u64 {
    p.iter().filter(|(k, _)| k == name).map(|(_, v)| v).sum()
}

use crate::bytes::{Listing, W};

/// Most entries of any list a listing decodes.
const MAX_ENTRIES: u32 = 1 << 12;

impl LinkListing {
    /// The listing's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W::default();
        w.u32(self.links.len() as u32);
        for l in &self.links {
            w.u32(l.id);
            w.str(&l.state);
            w.str(&l.peer);
            w.u32(l.peer_link);
            w.u32(l.pid);
            w.u64(l.msgs_in);
            w.u64(l.msgs_out);
            w.u64(l.port_out);
            w.u64(l.bytes_in);
            w.u64(l.bytes_out);
            w.pairs(&l.drops);
        }
        w.pairs(&self.drops);
        w.into_vec()
    }

    /// Read a listing (what [`LinkListing::encode`] wrote).
    pub fn decode(b: &[u8]) -> Result<LinkListing, String> {
        let mut r = Listing::new(b, "link listing", MAX_ENTRIES);
        let mut links = Vec::new();
        for _ in 0..r.count()? {
            links.push(LinkInfo {
                id: r.u32()?,
                state: r.str()?,
                peer: r.str()?,
                peer_link: r.u32()?,
                pid: r.u32()?,
                msgs_in: r.u64()?,
                msgs_out: r.u64()?,
                port_out: r.u64()?,
                bytes_in: r.u64()?,
                bytes_out: r.u64()?,
                drops: r.pairs()?,
            });
        }
        let drops = r.pairs()?;
        if !r.is_empty() {
            return Err("bytes after the end of the link listing".into());
        }
        Ok(LinkListing { links, drops })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_round_trips_and_every_cut_of_it_is_refused() {
        let l = LinkListing {
            links: vec![LinkInfo {
                id: 0x102,
                state: "up".into(),
                peer: "127.0.0.1:7000".into(),
                peer_link: 3,
                pid: 42,
                msgs_in: 5,
                msgs_out: 6,
                port_out: 4,
                bytes_in: 700,
                bytes_out: 800,
                drops: vec![("forged_token".into(), 2), ("no_handler".into(), 1)],
            }],
            drops: vec![("unknown_link".into(), 9)],
        };
        let b = l.encode();
        assert_eq!(LinkListing::decode(&b), Ok(l.clone()));
        for n in 0..b.len() {
            assert!(LinkListing::decode(&b[..n]).is_err(), "cut at {n}");
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(LinkListing::decode(&longer).is_err());
        assert_eq!(l.links[0].drop_count("forged_token"), 2);
        assert_eq!(l.drop_count("unknown_link"), 9);
        assert_eq!(l.link(0x102).map(|x| x.pid), Some(42));
    }
}
