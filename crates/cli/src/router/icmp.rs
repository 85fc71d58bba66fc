//! The router's host path: what the host application answers to a frame
//! the router extension handed it (the SPINE paper's label 3), as a
//! router does. Echo requests to the router's own addresses get echo
//! replies, UDP to them port unreachable; a packet whose TTL would expire
//! gets time exceeded, one without a route network unreachable, one
//! whose next hop has no configured MAC host unreachable (RFC 792, with
//! RFC 1812's rules: no error about an ICMP error, a fragment other than
//! the first, or a packet from a broadcast or multicast source). Packets
//! with options are forwarded here, on the slow path. And the ARP the
//! host application resolves next hops with (those not given a MAC).
//!
//! Every answer goes back out of the ingress port to the frame's source
//! MAC (the previous hop). Pure functions of the frame: no state, no
//! panics on any input.

/// Bytes of an Ethernet header.
pub const ETH: usize = 14;

/// Why the extension handed a frame to the host (`Router.java`'s
/// `HOST_*`).
pub mod why {
    /// For one of the ports' addresses (or broadcast or multicast).
    pub const FOR_ME: u8 = 1;
    /// The TTL would expire.
    pub const TTL: u8 = 2;
    /// No route.
    pub const NO_ROUTE: u8 = 3;
    /// The next hop has no MAC configured.
    pub const NO_NEIGHBOUR: u8 = 4;
    /// Options.
    pub const OPTIONS: u8 = 5;
    /// Their names, by number (0 unused; 6: neither IPv4 nor ARP; 7: ARP
    /// other than a request for a port's address).
    pub const NAMES: [&str; 8] = [
        "unknown",
        "for_me",
        "ttl",
        "no_route",
        "no_neighbour",
        "options",
        "other",
        "arp",
    ];
}

/// The port a frame came in on, as the host knows it.
#[derive(Clone, Copy, Debug)]
pub struct Port {
    /// The router's address on it.
    pub addr: u32,
    /// Its MAC.
    pub mac: [u8; 6],
}

/// The Internet checksum of `b` (RFC 1071).
pub fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in b.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// A checked IPv4 packet in a frame.
struct Ip<'a> {
    /// The frame.
    f: &'a [u8],
    /// Header bytes.
    hl: usize,
    /// Total length.
    total: usize,
}

impl<'a> Ip<'a> {
    fn parse(f: &'a [u8]) -> Option<Ip<'a>> {
        let h = f.get(ETH..ETH + 20)?;
        if f[12..14] != [8, 0] || h[0] >> 4 != 4 {
            return None;
        }
        let hl = usize::from(h[0] & 15) * 4;
        let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
        if hl < 20 || total < hl || ETH + total > f.len() {
            return None;
        }
        if checksum(&f[ETH..ETH + hl]) != 0 {
            return None;
        }
        Some(Ip { f, hl, total })
    }
    fn b(&self, i: usize) -> u8 {
        self.f[ETH + i]
    }
    fn src(&self) -> u32 {
        u32::from_be_bytes(self.f[ETH + 12..ETH + 16].try_into().unwrap_or([0; 4]))
    }
    fn dst(&self) -> u32 {
        u32::from_be_bytes(self.f[ETH + 16..ETH + 20].try_into().unwrap_or([0; 4]))
    }
    fn proto(&self) -> u8 {
        self.b(9)
    }
    /// The payload (after the header, within the total length).
    fn payload(&self) -> &'a [u8] {
        &self.f[ETH + self.hl..ETH + self.total]
    }
    fn first_fragment(&self) -> bool {
        u16::from_be_bytes([self.b(6), self.b(7)]) & 0x1fff == 0
    }
}

/// An Ethernet frame to `to` from `port` holding an IPv4 packet from
/// `src` to `dst` of protocol `proto` and `payload` (TTL 64).
fn ip_frame(port: &Port, to: &[u8], src: u32, dst: u32, proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(ETH + 20 + payload.len());
    f.extend_from_slice(to);
    f.extend_from_slice(&port.mac);
    f.extend_from_slice(&[8, 0]);
    let total = (20 + payload.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 64, proto, 0, 0]);
    f.extend_from_slice(&src.to_be_bytes());
    f.extend_from_slice(&dst.to_be_bytes());
    let c = checksum(&f[ETH..ETH + 20]);
    f[ETH + 10..ETH + 12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An ICMP message of `kind` and `code`, its next four bytes `rest` and
/// `body`, with its checksum.
fn icmp(kind: u8, code: u8, rest: [u8; 4], body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind, code, 0, 0];
    m.extend_from_slice(&rest);
    m.extend_from_slice(body);
    let c = checksum(&m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    m
}

/// Whether `a` is no single host's source (0, broadcast, multicast,
/// class E).
fn not_a_host(a: u32) -> bool {
    a == 0 || a >> 28 >= 14
}

/// An ICMP error of `kind`/`code` about `ip`, from `port`'s address,
/// unless RFC 1812 forbids one.
fn error(ip: &Ip<'_>, port: &Port, kind: u8, code: u8) -> Option<Vec<u8>> {
    if not_a_host(ip.src()) || ip.dst() >> 28 >= 14 || !ip.first_fragment() {
        return None;
    }
    if ip.proto() == 1 {
        // Only about queries: echo, timestamp, information, address mask.
        let t = *ip.payload().first()?;
        if !matches!(t, 0 | 8 | 13..=18) {
            return None;
        }
    }
    let end = (ETH + ip.hl + 8).min(ETH + ip.total);
    let body = icmp(kind, code, [0; 4], &ip.f[ETH..end]);
    Some(ip_frame(port, &ip.f[6..12], port.addr, ip.src(), 1, &body))
}

/// The frame to send out of the ingress port in answer to `frame`,
/// handed to the host for reason `why` on a port whose view is `port`;
/// `own` tells the router's own addresses. None: nothing to answer.
pub fn answer(why: u8, frame: &[u8], port: &Port, own: impl Fn(u32) -> bool) -> Option<Vec<u8>> {
    let ip = Ip::parse(frame)?;
    match why {
        why::FOR_ME if own(ip.dst()) => {
            let p = ip.payload();
            match ip.proto() {
                1 if p.len() >= 8 && p[0] == 8 && checksum(p) == 0 => {
                    let rest = [p[4], p[5], p[6], p[7]];
                    let body = icmp(0, 0, rest, &p[8..]);
                    Some(ip_frame(port, &frame[6..12], ip.dst(), ip.src(), 1, &body))
                }
                17 => error(
                    &ip,
                    &Port {
                        addr: ip.dst(),
                        ..*port
                    },
                    3,
                    3,
                ),
                _ => None,
            }
        }
        why::TTL => error(&ip, port, 11, 0),
        why::NO_ROUTE => error(&ip, port, 3, 0),
        why::NO_NEIGHBOUR => error(&ip, port, 3, 1),
        _ => None,
    }
}

/// Forward `frame` (a packet with options) on the slow path: checked,
/// its TTL decremented and its checksum recomputed, its Ethernet
/// addresses those of `hop` (`(egress port's MAC, next hop's MAC)`). None
/// when the header is bad or the TTL would expire (which `answer` with
/// [`why::TTL`] answers).
pub fn forward(frame: &[u8], hop: ([u8; 6], [u8; 6])) -> Option<Vec<u8>> {
    let ip = Ip::parse(frame)?;
    if ip.b(8) <= 1 {
        return None;
    }
    let mut f = frame[..ETH + ip.total].to_vec();
    f[..6].copy_from_slice(&hop.1);
    f[6..12].copy_from_slice(&hop.0);
    f[ETH + 8] -= 1;
    f[ETH + 10..ETH + 12].copy_from_slice(&[0, 0]);
    let c = checksum(&f[ETH..ETH + ip.hl]);
    f[ETH + 10..ETH + 12].copy_from_slice(&c.to_be_bytes());
    Some(f)
}

/// An ARP request from `port` for `target` (broadcast, padded to the
/// Ethernet minimum).
pub fn arp_request(port: &Port, target: u32) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&port.mac);
    f.extend_from_slice(&[8, 6, 0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&port.mac);
    f.extend_from_slice(&port.addr.to_be_bytes());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target.to_be_bytes());
    f.resize(60, 0);
    f
}

/// The sender (address, MAC) of the ARP reply in `frame`, if it is one.
pub fn arp_reply(frame: &[u8]) -> Option<(u32, [u8; 6])> {
    let a = frame.get(12..42)?;
    if a[..10] != [8, 6, 0, 1, 8, 0, 6, 4, 0, 2] {
        return None;
    }
    let mac: [u8; 6] = a[10..16].try_into().ok()?;
    let addr = u32::from_be_bytes(a[16..20].try_into().ok()?);
    Some((addr, mac))
}

/// The destination of the IPv4 packet in `frame`, if it is one (checked).
pub fn destination(frame: &[u8]) -> Option<u32> {
    Ip::parse(frame).map(|ip| ip.dst())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PORT: Port = Port {
        addr: 0x0a01_0001,
        mac: [2, 0, 0, 0, 0, 1],
    };

    /// A frame from 10.1.0.2 (MAC 02:..:09) to `dst` with `ttl`, `proto`
    /// and `payload`.
    fn frame(dst: u32, ttl: u8, proto: u8, payload: &[u8]) -> Vec<u8> {
        let from = Port {
            addr: 0x0a01_0002,
            mac: [2, 0, 0, 0, 0, 9],
        };
        let mut f = ip_frame(&from, &PORT.mac, from.addr, dst, proto, payload);
        f[ETH + 8] = ttl;
        f[ETH + 10..ETH + 12].copy_from_slice(&[0, 0]);
        let c = checksum(&f[ETH..ETH + 20]);
        f[ETH + 10..ETH + 12].copy_from_slice(&c.to_be_bytes());
        f
    }

    #[test]
    fn echo_requests_to_the_router_are_answered() {
        let req = icmp(8, 0, [0, 7, 0, 1], b"abcdefgh");
        let f = frame(PORT.addr, 64, 1, &req);
        let r = answer(why::FOR_ME, &f, &PORT, |a| a == PORT.addr).unwrap();
        let ip = Ip::parse(&r).unwrap();
        assert_eq!((ip.src(), ip.dst()), (PORT.addr, 0x0a01_0002));
        assert_eq!(&r[..6], &[2, 0, 0, 0, 0, 9]);
        assert_eq!(&r[6..12], &PORT.mac);
        let p = ip.payload();
        assert_eq!((p[0], checksum(p)), (0, 0));
        assert_eq!(
            &p[4..],
            &[0, 7, 0, 1, b'a', b'b', b'c', b'd', b'e', b'f', b'g', b'h']
        );
        // Not ours, or a bad ICMP checksum: no answer.
        assert!(answer(why::FOR_ME, &f, &PORT, |_| false).is_none());
        let mut bad = f.clone();
        bad[ETH + 20 + 9] ^= 1;
        assert!(answer(why::FOR_ME, &bad, &PORT, |a| a == PORT.addr).is_none());
    }

    #[test]
    fn errors_quote_the_packet_and_follow_rfc_1812() {
        let udp = [0x82, 0x9a, 0x82, 0x9b, 0, 12, 0, 0, 1, 2, 3, 4];
        let f = frame(0x0a02_0002, 1, 17, &udp);
        for (w, kind, code) in [
            (why::TTL, 11, 0),
            (why::NO_ROUTE, 3, 0),
            (why::NO_NEIGHBOUR, 3, 1),
        ] {
            let r = answer(w, &f, &PORT, |_| false).unwrap();
            let ip = Ip::parse(&r).unwrap();
            assert_eq!(
                (ip.src(), ip.dst(), ip.proto()),
                (PORT.addr, 0x0a01_0002, 1)
            );
            let p = ip.payload();
            assert_eq!((p[0], p[1], checksum(p)), (kind, code, 0));
            // The quoted header and 8 bytes of the datagram.
            assert_eq!(&p[8..], &f[ETH..ETH + 28]);
        }
        // No error about an ICMP error, a later fragment, or a packet
        // from a multicast source; and none about a bad header.
        let e = frame(0x0a02_0002, 1, 1, &icmp(3, 1, [0; 4], &[0; 28]));
        assert!(answer(why::TTL, &e, &PORT, |_| false).is_none());
        let mut frag = f.clone();
        frag[ETH + 7] = 8;
        frag[ETH + 10..ETH + 12].copy_from_slice(&[0, 0]);
        let c = checksum(&frag[ETH..ETH + 20]);
        frag[ETH + 10..ETH + 12].copy_from_slice(&c.to_be_bytes());
        assert!(answer(why::TTL, &frag, &PORT, |_| false).is_none());
        let mut bad = f.clone();
        bad[ETH + 11] ^= 1;
        assert!(answer(why::TTL, &bad, &PORT, |_| false).is_none());
        assert!(answer(why::TTL, &f[..30], &PORT, |_| false).is_none());
        // UDP to the router: port unreachable from the address asked.
        let r = answer(why::FOR_ME, &frame(PORT.addr, 1, 17, &udp), &PORT, |_| true).unwrap();
        assert_eq!(Ip::parse(&r).unwrap().payload()[..2], [3, 3]);
    }

    #[test]
    fn the_slow_path_decrements_the_ttl_and_rewrites_the_addresses() {
        let f = frame(0x0a02_0002, 9, 17, &[0; 12]);
        let g = forward(&f, ([2, 0, 0, 0, 0, 3], [2, 0, 0, 0, 0, 4])).unwrap();
        let ip = Ip::parse(&g).unwrap();
        assert_eq!(ip.b(8), 8);
        assert_eq!(
            (&g[..6], &g[6..12]),
            (&[2, 0, 0, 0, 0, 4][..], &[2, 0, 0, 0, 0, 3][..])
        );
        assert!(forward(&frame(1, 1, 17, &[]), ([0; 6], [0; 6])).is_none());
        assert_eq!(destination(&f), Some(0x0a02_0002));
    }

    #[test]
    fn arp_requests_and_replies() {
        let q = arp_request(&PORT, 0x0a01_0002);
        assert_eq!(q.len(), 60);
        assert_eq!(&q[..6], &[0xff; 6]);
        assert_eq!(&q[38..42], &[10, 1, 0, 2]);
        assert_eq!(arp_reply(&q), None);
        // The reply the asked host sends.
        let mut r = q.clone();
        r[21] = 2;
        r[22..28].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
        r[28..32].copy_from_slice(&[10, 1, 0, 2]);
        assert_eq!(arp_reply(&r), Some((0x0a01_0002, [2, 0, 0, 0, 0, 9])));
        assert_eq!(arp_reply(&r[..40]), None);
    }
}
