//! SPINE's raw-frame ports, as the control protocol shows them: what
//! [`crate::Reply::SpinePortListing`] hands over in a memory file (a row
//! per port: its interface, how it sends, the handler its frames go to,
//! frames and bytes in and out, drops by reason).
//!
//! The encoding is little-endian: counts as `u32`, strings as a `u16`
//! length and UTF-8 bytes. Decoding is total: a listing that does not
//! parse is an error, never a panic.

use crate::bytes::{Listing, W};

/// One port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortInfo {
    /// Its id on the adapter (`DEST_PORT`'s id).
    pub id: u32,
    /// The network interface it is bound to.
    pub interface: String,
    /// How it sends: `af_xdp` (a transmit-only `AF_XDP` socket) or
    /// `tx_ring` (the `AF_PACKET` transmit ring).
    pub tx: String,
    /// The extension handler its frames go to.
    pub handler: u16,
    /// The process that opened it.
    pub pid: u32,
    /// Frames received and handed to the handler.
    pub frames_in: u64,
    /// Frames sent.
    pub frames_out: u64,
    /// Bytes of those received.
    pub bytes_in: u64,
    /// Bytes of those sent.
    pub bytes_out: u64,
    /// Drops, by reason (name, count): every reason, in a fixed order.
    pub drops: Vec<(String, u64)>,
}

impl PortInfo {
    /// The count of drop reason `name`.
    pub fn drop_count(&self, name: &str) -> u64 {
        self.drops
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v)
            .sum()
    }
}

/// The listing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortListing {
    /// The ports the asking client may see.
    pub ports: Vec<PortInfo>,
}

impl PortListing {
    /// Port `id`, if listed.
    pub fn port(&self, id: u32) -> Option<&PortInfo> {
        self.ports.iter().find(|p| p.id == id)
    }
}

/// Most entries of any list a listing decodes.
const MAX_ENTRIES: u32 = 1 << 12;

impl PortListing {
    /// The listing's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W::default();
        w.u32(self.ports.len() as u32);
        for p in &self.ports {
            w.u32(p.id);
            w.str(&p.interface);
            w.str(&p.tx);
            w.u32(u32::from(p.handler));
            w.u32(p.pid);
            w.u64(p.frames_in);
            w.u64(p.frames_out);
            w.u64(p.bytes_in);
            w.u64(p.bytes_out);
            w.pairs(&p.drops);
        }
        w.into_vec()
    }

    /// Read a listing (what [`PortListing::encode`] wrote).
    pub fn decode(b: &[u8]) -> Result<PortListing, String> {
        let mut r = Listing::new(b, "port listing", MAX_ENTRIES);
        let mut ports = Vec::new();
        for _ in 0..r.count()? {
            ports.push(PortInfo {
                id: r.u32()?,
                interface: r.str()?,
                tx: r.str()?,
                handler: u16::try_from(r.u32()?).map_err(|_| "port listing: handler")?,
                pid: r.u32()?,
                frames_in: r.u64()?,
                frames_out: r.u64()?,
                bytes_in: r.u64()?,
                bytes_out: r.u64()?,
                drops: r.pairs()?,
            });
        }
        if !r.is_empty() {
            return Err("bytes after the end of the port listing".into());
        }
        Ok(PortListing { ports })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_round_trips_and_every_cut_of_it_is_refused() {
        let l = PortListing {
            ports: vec![PortInfo {
                id: 0x101,
                interface: "veth0".into(),
                tx: "af_xdp".into(),
                handler: 70,
                pid: 42,
                frames_in: 5,
                frames_out: 6,
                bytes_in: 700,
                bytes_out: 800,
                drops: vec![("too_long".into(), 2), ("kernel".into(), 1)],
            }],
        };
        let b = l.encode();
        assert_eq!(PortListing::decode(&b), Ok(l.clone()));
        for n in 0..b.len() {
            assert!(PortListing::decode(&b[..n]).is_err(), "cut at {n}");
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(PortListing::decode(&longer).is_err());
        assert_eq!(l.ports[0].drop_count("too_long"), 2);
        assert_eq!(l.port(0x101).map(|p| p.pid), Some(42));
    }
}
