//! Routing tables: a route (prefix, length, next hop), reading a route file
//! (plain or gzip), the full Internet table kept beside the repository, the
//! rule that gives a next hop to a route whose file names none, and a
//! seeded generated table for tests that must run anywhere.
//!
//! A route file has one route a line, `a.b.c.d/len [next-hop]`; blank lines
//! and lines starting with `#` are skipped. Host bits below the length are
//! cleared (`10.1.2.3/8` is `10.0.0.0/8`). A file whose name ends in `.gz`
//! or whose first bytes are gzip's magic is read through a gzip decoder.

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// One route: the destinations whose first `len` bits equal `prefix`'s go
/// to `next_hop`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Route {
    /// The prefix, host bits clear.
    pub prefix: u32,
    /// The prefix length, 0 to 32.
    pub len: u8,
    /// The next hop (an index into the router's table of neighbours).
    pub next_hop: u32,
}

impl Route {
    /// A route with `prefix`'s bits below `len` cleared (`len` is capped at
    /// 32).
    pub fn new(prefix: u32, len: u8, next_hop: u32) -> Route {
        let len = len.min(32);
        Route {
            prefix: prefix & mask(len),
            len,
            next_hop,
        }
    }

    /// Whether `addr` is one of this route's destinations.
    pub fn matches(&self, addr: u32) -> bool {
        (addr ^ self.prefix) & mask(self.len) == 0
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d] = self.prefix.to_be_bytes();
        write!(f, "{a}.{b}.{c}.{d}/{} {}", self.len, self.next_hop)
    }
}

/// The network mask of a prefix length (`mask(0) == 0`, `mask(32) == !0`).
pub fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        !0u32 << (32 - u32::from(len.min(32)))
    }
}

/// Why a route file could not be read.
#[derive(Debug)]
pub enum TableError {
    /// The file is not there (the message says where it was looked for).
    Absent(PathBuf),
    /// Reading failed.
    Io(PathBuf, std::io::Error),
    /// A line is not a route.
    Parse {
        /// The file.
        path: PathBuf,
        /// Its line number, from 1.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableError::Absent(p) => write!(
                f,
                "no routing table at {} (the full table lives in the shared data \
                 beside the repository: ../shared/data/bgp/prefixes.txt.gz)",
                p.display()
            ),
            TableError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            TableError::Parse { path, line, reason } => {
                write!(f, "{}:{line}: {reason}", path.display())
            }
        }
    }
}

impl std::error::Error for TableError {}

/// The next hop given to a route whose file names none: a hash of the
/// prefix and its length (SplitMix64's finaliser over
/// `prefix << 8 | len`) modulo `ports`, so the same table always gets the
/// same next hops and neighbouring prefixes are spread over all ports.
pub fn hashed_next_hop(prefix: u32, len: u8, ports: u32) -> u32 {
    let h = splitmix_finish((u64::from(prefix) << 8) | u64::from(len));
    (h % u64::from(ports.max(1))) as u32
}

/// Parse one route line (`a.b.c.d/len [next-hop]`); `None` for a blank or
/// comment line. A route without a next hop gets
/// [`hashed_next_hop`]`(prefix, len, ports)`.
pub fn parse_line(line: &str, ports: u32) -> Result<Option<Route>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let mut words = line.split_whitespace();
    let cidr = words.next().unwrap_or("");
    let (addr, len) = cidr
        .split_once('/')
        .ok_or_else(|| format!("`{cidr}` is not a.b.c.d/len"))?;
    let addr: std::net::Ipv4Addr = addr
        .parse()
        .map_err(|_| format!("`{addr}` is not an IPv4 address"))?;
    let len: u8 = len
        .parse()
        .ok()
        .filter(|l| *l <= 32)
        .ok_or_else(|| format!("`{len}` is not a prefix length (0 to 32)"))?;
    let prefix = u32::from(addr);
    let next_hop = match words.next() {
        Some(w) => w
            .parse()
            .map_err(|_| format!("`{w}` is not a next hop (an unsigned integer)"))?,
        None => hashed_next_hop(prefix & mask(len), len, ports),
    };
    if let Some(w) = words.next() {
        return Err(format!("unexpected `{w}` after the next hop"));
    }
    Ok(Some(Route::new(prefix, len, next_hop)))
}

/// Read routes from `r` (already decompressed); `path` names it in errors.
pub fn read_routes(r: impl Read, path: &Path, ports: u32) -> Result<Vec<Route>, TableError> {
    let mut out = Vec::new();
    for (i, line) in BufReader::new(r).lines().enumerate() {
        let line = line.map_err(|e| TableError::Io(path.to_path_buf(), e))?;
        match parse_line(&line, ports) {
            Ok(Some(route)) => out.push(route),
            Ok(None) => {}
            Err(reason) => {
                return Err(TableError::Parse {
                    path: path.to_path_buf(),
                    line: i + 1,
                    reason,
                })
            }
        }
    }
    Ok(out)
}

/// Read a route file, through gzip when its name ends in `.gz` or it
/// starts with gzip's magic bytes. Routes without a next hop get
/// [`hashed_next_hop`] over `ports` ports.
pub fn load(path: &Path, ports: u32) -> Result<Vec<Route>, TableError> {
    let f = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => TableError::Absent(path.to_path_buf()),
        _ => TableError::Io(path.to_path_buf(), e),
    })?;
    let mut r = BufReader::new(f);
    let head = r
        .fill_buf()
        .map_err(|e| TableError::Io(path.to_path_buf(), e))?;
    let gz = head.starts_with(&[0x1f, 0x8b]) || path.extension().is_some_and(|x| x == "gz");
    if gz {
        read_routes(flate2::bufread::MultiGzDecoder::new(r), path, ports)
    } else {
        read_routes(r, path, ports)
    }
}

/// Where the full Internet table is: `../shared/data/bgp/prefixes.txt.gz`
/// beside the repository root (`UNET_BGP_TABLE` overrides it). The file is
/// read from there, never copied into the repository.
pub fn full_table_path() -> PathBuf {
    if let Some(p) = std::env::var_os("UNET_BGP_TABLE") {
        return PathBuf::from(p);
    }
    // This crate is `crates/router` under the repository root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/bgp/prefixes.txt.gz")
        .components()
        .collect()
}

/// The full Internet table (901 899 prefixes) with [`hashed_next_hop`]
/// next hops over `ports` ports; [`TableError::Absent`] when the file is
/// not there.
pub fn full_table(ports: u32) -> Result<Vec<Route>, TableError> {
    load(&full_table_path(), ports)
}

/// A small, fast, seeded generator (SplitMix64): tests and benchmarks that
/// must give the same numbers everywhere.
#[derive(Clone, Debug)]
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        splitmix_finish(self.0)
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// A number in `0..n` (`n > 0`), by multiply-shift.
    pub fn below(&mut self, n: u32) -> u32 {
        ((u64::from(self.next_u32()) * u64::from(n)) >> 32) as u32
    }
}

fn splitmix_finish(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A prefix length drawn from the full table's mix (the README beside
/// it): /8-/15 0.5 %, /16 1.5 %, /17-/23 38.3 %, /24 59.6 %, /25-/32 0.1 %.
fn draw_len(rng: &mut SplitMix) -> u8 {
    let x = rng.below(1_000_000);
    match x {
        0..=4_826 => 8 + rng.below(8) as u8,
        4_827..=19_782 => 16,
        19_783..=402_715 => 17 + rng.below(7) as u8,
        402_716..=998_934 => 24,
        _ => 25 + rng.below(8) as u8,
    }
}

/// A generated table of `n` distinct routes, the same for the same `seed`:
/// lengths in the full table's mix, about a quarter of the routes nested
/// inside an earlier, shorter one (more specifics, as real tables have),
/// next hops by [`hashed_next_hop`] over `ports` ports. No default route
/// (add one to test it).
pub fn generated(n: usize, seed: u64, ports: u32) -> Vec<Route> {
    let mut rng = SplitMix(seed);
    let mut seen = std::collections::HashSet::with_capacity(n);
    let mut out: Vec<Route> = Vec::with_capacity(n);
    while out.len() < n {
        let len = draw_len(&mut rng);
        let base = if !out.is_empty() && rng.below(4) == 0 {
            // A more specific of an earlier route: its bits, then random.
            let outer = out[rng.below(out.len() as u32) as usize];
            if outer.len >= len {
                continue;
            }
            outer.prefix | (rng.next_u32() & !mask(outer.len))
        } else {
            rng.next_u32()
        };
        let prefix = base & mask(len);
        if seen.insert((prefix, len)) {
            out.push(Route::new(prefix, len, hashed_next_hop(prefix, len, ports)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines_and_names_bad_ones() {
        let r = parse_line("10.1.2.3/8 7", 16).unwrap().unwrap();
        assert_eq!(r, Route::new(0x0a00_0000, 8, 7));
        assert_eq!(r.to_string(), "10.0.0.0/8 7");
        let h = parse_line("1.0.4.0/22", 16).unwrap().unwrap();
        assert_eq!(h.next_hop, hashed_next_hop(0x0100_0400, 22, 16));
        assert!(h.next_hop < 16);
        assert_eq!(parse_line("  # comment", 16), Ok(None));
        assert_eq!(parse_line("", 16), Ok(None));
        assert!(parse_line("10.0.0.0/33", 16).unwrap_err().contains("33"));
        assert!(parse_line("10.0.0/8", 16).unwrap_err().contains("IPv4"));
        assert!(parse_line("10.0.0.0", 16)
            .unwrap_err()
            .contains("a.b.c.d/len"));
        assert!(parse_line("10.0.0.0/8 x", 16)
            .unwrap_err()
            .contains("next hop"));
        assert!(parse_line("10.0.0.0/8 1 2", 16)
            .unwrap_err()
            .contains("unexpected"));
    }

    #[test]
    fn reads_gzip_and_reports_the_line() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("unet-router-table-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let gz = dir.join("t.txt.gz");
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(b"0.0.0.0/0 1\n192.168.0.0/16\n").unwrap();
        std::fs::write(&gz, e.finish().unwrap()).unwrap();
        let routes = load(&gz, 4).unwrap();
        assert_eq!(routes.len(), 2);
        assert_eq!(routes[0], Route::new(0, 0, 1));
        let bad = dir.join("bad.txt");
        std::fs::write(&bad, "1.2.3.0/24\nnonsense\n").unwrap();
        let e = load(&bad, 4).unwrap_err().to_string();
        assert!(e.contains("bad.txt:2:"), "{e}");
        let e = load(&dir.join("none.txt"), 4).unwrap_err();
        assert!(matches!(e, TableError::Absent(_)));
        assert!(e.to_string().contains("shared/data/bgp"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn generated_tables_are_seeded_distinct_and_mixed() {
        let a = generated(20_000, 7, 16);
        assert_eq!(a, generated(20_000, 7, 16));
        assert_ne!(a, generated(20_000, 8, 16));
        let keys: std::collections::HashSet<_> = a.iter().map(|r| (r.prefix, r.len)).collect();
        assert_eq!(keys.len(), a.len());
        let l24 = a.iter().filter(|r| r.len == 24).count() as f64 / a.len() as f64;
        assert!((0.55..0.65).contains(&l24), "{l24}");
        let nested = a
            .iter()
            .filter(|r| a.iter().any(|o| o.len < r.len && o.matches(r.prefix)))
            .take(100)
            .count();
        assert_eq!(nested, 100, "more specifics are generated");
    }
}
