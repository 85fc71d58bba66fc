//! Completing a checksum a sender's offload left to do. A frame a local
//! stack sends over a virtual device (veth) with checksum offload reaches
//! a packet socket with its TCP or UDP checksum field holding only the
//! pseudo-header's sum (the kernel marks it `TP_STATUS_CSUMNOTREADY`);
//! forwarded as it is, the receiver drops it. The checksum is the
//! complement of the one's-complement sum over the segment with that
//! field in place. Pure, and total: a frame it cannot read is left as it
//! is.

/// Complete the TCP or UDP checksum of Ethernet frame `f` (IPv4, or IPv6
/// without extension headers; one VLAN tag allowed): whether it did.
pub fn complete(f: &mut [u8]) -> bool {
    let be16 = |f: &[u8], at: usize| -> Option<usize> {
        f.get(at..at + 2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    };
    let mut net = 14;
    let mut ethertype = be16(f, 12);
    if ethertype == Some(0x8100) {
        net += 4;
        ethertype = be16(f, 16);
    }
    let (l4, proto, end) = match ethertype {
        Some(0x0800) => {
            let Some(&vihl) = f.get(net) else {
                return false;
            };
            let (Some(total), Some(&proto)) = (be16(f, net + 2), f.get(net + 9)) else {
                return false;
            };
            (net + usize::from(vihl & 0xF) * 4, proto, net + total)
        }
        Some(0x86DD) => {
            let (Some(len), Some(&next)) = (be16(f, net + 4), f.get(net + 6)) else {
                return false;
            };
            (net + 40, next, net + 40 + len)
        }
        _ => return false,
    };
    let field = match proto {
        6 => l4 + 16,
        17 => l4 + 6,
        _ => return false,
    };
    if end > f.len() || field + 2 > end {
        return false;
    }
    let mut sum: u64 = 0;
    let mut words = f[l4..end].chunks_exact(2);
    for w in &mut words {
        sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u64::from(*last) << 8;
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    let mut c = !(sum as u16);
    if proto == 17 && c == 0 {
        c = 0xFFFF;
    }
    f[field..field + 2].copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one's-complement sum of `b` (16-bit big-endian words).
    fn sum(b: &[u8]) -> u32 {
        let mut s: u32 = b
            .chunks(2)
            .map(|w| u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0)))
            .sum();
        while s > 0xFFFF {
            s = (s & 0xFFFF) + (s >> 16);
        }
        s
    }

    /// An Ethernet/IPv4/TCP frame of `payload` bytes and its correct
    /// TCP checksum.
    fn tcp4(payload: usize) -> (Vec<u8>, u16) {
        let tcp_len = 20 + payload;
        let mut f = vec![0u8; 14 + 20 + tcp_len];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
        f[23] = 6;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        for (i, b) in f[34..].iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        f[34 + 16..34 + 18].copy_from_slice(&[0, 0]);
        let mut pseudo = f[26..34].to_vec();
        pseudo.extend_from_slice(&[0, 6]);
        pseudo.extend_from_slice(&(tcp_len as u16).to_be_bytes());
        let p = sum(&pseudo);
        let full = {
            let mut s = p + sum(&f[34..]);
            while s > 0xFFFF {
                s = (s & 0xFFFF) + (s >> 16);
            }
            !(s as u16)
        };
        // What an offloading sender leaves: the pseudo-header's sum.
        f[34 + 16..34 + 18].copy_from_slice(&(p as u16).to_be_bytes());
        (f, full)
    }

    #[test]
    fn a_partial_tcp_checksum_is_completed() {
        for payload in [0, 1, 33, 1000, 1459] {
            let (mut f, want) = tcp4(payload);
            assert!(complete(&mut f), "{payload}");
            assert_eq!(u16::from_be_bytes([f[50], f[51]]), want, "{payload}");
        }
    }

    #[test]
    fn frames_it_cannot_read_are_left_as_they_are() {
        let (f, _) = tcp4(100);
        for cut in [0, 13, 20, 40, 60, f.len() - 1] {
            let mut g = f[..cut].to_vec();
            let before = g.clone();
            assert!(!complete(&mut g), "cut at {cut}");
            assert_eq!(g, before);
        }
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(!complete(&mut arp));
        let mut icmp = f.clone();
        icmp[23] = 1;
        assert!(!complete(&mut icmp));
    }
}
