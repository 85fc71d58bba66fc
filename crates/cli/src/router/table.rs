//! The router's table file and what the host application makes of it:
//! routes with a next-hop address (and the port it is on), the next hops
//! numbered once for the life of the application (the router extension
//! knows next hops by number: their port and MAC are configured by the
//! host), and the routes with those numbers that the LC-trie is built of.
//!
//! A table file has one route a line, `a.b.c.d/len next-hop [port]`:
//! the next hop's IPv4 address, and the index of the port (in the order
//! of `--port`) it is reached through, which defaults to the port whose
//! subnet holds the next hop. Blank lines and lines starting with `#`
//! are skipped; host bits below the length are cleared.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use unet_router::table::mask;
use unet_router::Route;

/// A port of the router, as `--port IFACE=ADDR/LEN` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSpec {
    /// The network interface.
    pub iface: String,
    /// The router's address on it.
    pub addr: Ipv4Addr,
    /// Its subnet's prefix length.
    pub len: u8,
}

impl PortSpec {
    /// Parse `IFACE=ADDR/LEN`.
    pub fn parse(s: &str) -> Result<PortSpec, String> {
        let (iface, net) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: want IFACE=ADDR/LEN"))?;
        let (addr, len) = prefix(net)?;
        if iface.is_empty() {
            return Err(format!("{s:?}: no interface"));
        }
        Ok(PortSpec {
            iface: iface.to_string(),
            addr,
            len,
        })
    }

    /// Whether `a` is in the port's subnet.
    pub fn holds(&self, a: Ipv4Addr) -> bool {
        let m = mask(self.len);
        u32::from(a) & m == u32::from(self.addr) & m
    }
}

/// `a.b.c.d/len`.
fn prefix(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let (a, l) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?}: want a.b.c.d/len"))?;
    let a: Ipv4Addr = a.parse().map_err(|e| format!("{s:?}: {e}"))?;
    let l: u8 = l.parse().map_err(|e| format!("{s:?}: {e}"))?;
    if l > 32 {
        return Err(format!("{s:?}: a prefix length above 32"));
    }
    Ok((a, l))
}

/// A MAC address `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let mut m = [0u8; 6];
    let parts: Vec<&str> = s.trim().split(':').collect();
    if parts.len() != 6 {
        return Err(format!("{s:?}: want a MAC address aa:bb:cc:dd:ee:ff"));
    }
    for (d, p) in m.iter_mut().zip(parts) {
        *d = u8::from_str_radix(p, 16).map_err(|e| format!("{s:?}: {e}"))?;
    }
    Ok(m)
}

/// `ADDR=MAC` (`--neighbour`).
pub fn parse_neighbour(s: &str) -> Result<(Ipv4Addr, [u8; 6]), String> {
    let (a, m) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: want ADDR=MAC"))?;
    let a: Ipv4Addr = a.parse().map_err(|e| format!("{s:?}: {e}"))?;
    Ok((a, parse_mac(m)?))
}

/// One line of a table file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteLine {
    /// The prefix (host bits clear).
    pub prefix: u32,
    /// Its length.
    pub len: u8,
    /// The next hop.
    pub via: Ipv4Addr,
    /// The port's index, if the line names one.
    pub port: Option<usize>,
}

/// The routes of a table file's text.
pub fn parse(text: &str) -> Result<Vec<RouteLine>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: String| format!("line {}: {why}", i + 1);
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() < 2 || w.len() > 3 {
            return Err(bad(format!("{line:?}: want a.b.c.d/len next-hop [port]")));
        }
        let (p, len) = prefix(w[0]).map_err(bad)?;
        let via: Ipv4Addr = w[1].parse().map_err(|e| bad(format!("{:?}: {e}", w[1])))?;
        let port = match w.get(2) {
            Some(s) => Some(s.parse().map_err(|e| bad(format!("{s:?}: {e}")))?),
            None => None,
        };
        out.push(RouteLine {
            prefix: u32::from(p) & mask(len),
            len,
            via,
            port,
        });
    }
    Ok(out)
}

/// A next hop the router extension knows by number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    /// Its address.
    pub addr: Ipv4Addr,
    /// The port's index.
    pub port: usize,
}

/// The next hops, numbered in the order first seen (a number, once
/// given, keeps its next hop).
#[derive(Default)]
pub struct Hops {
    /// By number.
    pub list: Vec<Hop>,
    by_addr: BTreeMap<Ipv4Addr, usize>,
}

impl Hops {
    /// The number of next hop `h`: its own, or a new one.
    fn number(&mut self, h: Hop) -> Result<u32, String> {
        if let Some(&k) = self.by_addr.get(&h.addr) {
            if self.list[k].port != h.port {
                return Err(format!(
                    "next hop {} on port {} and on port {}",
                    h.addr, self.list[k].port, h.port
                ));
            }
            return Ok(k as u32);
        }
        self.list.push(h);
        self.by_addr.insert(h.addr, self.list.len() - 1);
        Ok((self.list.len() - 1) as u32)
    }

    /// The routes of `lines` with next-hop numbers, after a route of its
    /// own (`/32`) to every neighbour in `neighbours` that is in a port's
    /// subnet (a line for the same prefix replaces it).
    pub fn routes(
        &mut self,
        lines: &[RouteLine],
        ports: &[PortSpec],
        neighbours: &BTreeMap<Ipv4Addr, [u8; 6]>,
    ) -> Result<Vec<Route>, String> {
        let mut out = Vec::new();
        for &a in neighbours.keys() {
            if let Some(port) = ports.iter().position(|p| p.holds(a)) {
                let nh = self.number(Hop { addr: a, port })?;
                out.push(Route::new(u32::from(a), 32, nh));
            }
        }
        for l in lines {
            let port = match l.port {
                Some(p) if p < ports.len() => p,
                Some(p) => return Err(format!("a route through port {p}, of {}", ports.len())),
                None => ports.iter().position(|p| p.holds(l.via)).ok_or_else(|| {
                    format!("next hop {} is in no port's subnet: name its port", l.via)
                })?,
            };
            let nh = self.number(Hop { addr: l.via, port })?;
            out.push(Route::new(l.prefix, l.len, nh));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_ports_and_next_hops() {
        let ports = [
            PortSpec::parse("a=10.1.0.1/24").unwrap(),
            PortSpec::parse("b=10.2.0.1/24").unwrap(),
        ];
        assert_eq!(ports[1].addr, Ipv4Addr::new(10, 2, 0, 1));
        assert!(PortSpec::parse("a=10.1.0.1").is_err());
        assert!(PortSpec::parse("=10.1.0.1/8").is_err());
        let text = "# a comment\n\n10.9.3.4/16 10.2.0.2\n0.0.0.0/0 10.1.0.2 0\n";
        let lines = parse(text).unwrap();
        assert_eq!(lines[0].prefix, u32::from(Ipv4Addr::new(10, 9, 0, 0)));
        assert_eq!((lines[0].port, lines[1].port), (None, Some(0)));
        assert!(parse("10.0.0.0/8").unwrap_err().starts_with("line 1:"));
        assert!(parse("10.0.0.0/33 1.2.3.4").is_err());
        let mut n = BTreeMap::new();
        n.insert(Ipv4Addr::new(10, 1, 0, 2), [2, 0, 0, 0, 0, 1]);
        n.insert(Ipv4Addr::new(192, 168, 0, 9), [2, 0, 0, 0, 0, 2]);
        let mut hops = Hops::default();
        let r = hops.routes(&lines, &ports, &n).unwrap();
        // The neighbour's own route, then the lines'.
        assert_eq!(r.len(), 3);
        assert_eq!((r[0].len, r[0].next_hop), (32, 0));
        assert_eq!(r[1].next_hop, 1);
        assert_eq!(r[2].next_hop, 0);
        assert_eq!(
            hops.list[1],
            Hop {
                addr: Ipv4Addr::new(10, 2, 0, 2),
                port: 1
            }
        );
        // Numbers stay with their next hops; a next hop on two ports, a
        // port that does not exist and a next hop on no port are refused.
        let again = hops.routes(&lines[1..], &ports, &n).unwrap();
        assert_eq!(again[1].next_hop, 0);
        assert!(hops
            .routes(&parse("1.0.0.0/8 10.2.0.2 0").unwrap(), &ports, &n)
            .is_err());
        assert!(hops
            .routes(&parse("1.0.0.0/8 10.2.0.3 5").unwrap(), &ports, &n)
            .is_err());
        assert!(hops
            .routes(&parse("1.0.0.0/8 10.3.0.3").unwrap(), &ports, &n)
            .is_err());
        assert_eq!(
            parse_mac("02:00:0a:0B:00:ff").unwrap(),
            [2, 0, 10, 11, 0, 255]
        );
        assert!(parse_mac("02:00").is_err());
        assert!(parse_neighbour("10.1.0.2=02:00:00:00:00:01").is_ok());
    }
}
