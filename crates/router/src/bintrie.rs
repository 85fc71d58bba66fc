//! A plain binary trie: one node a bit, the reference the LC-trie is
//! checked against and the baseline it is measured beside.

use crate::table::Route;

const NONE: u32 = u32::MAX;

/// A binary trie of routes: node 0 is the root; each node has two children
/// (0: none) and the next hop of the route ending there, if any.
#[derive(Clone, Debug, Default)]
pub struct BinTrie {
    children: Vec<[u32; 2]>,
    hops: Vec<u32>,
}

impl BinTrie {
    /// The trie of `routes`; of duplicate prefixes the last wins.
    pub fn build(routes: &[Route]) -> BinTrie {
        let mut t = BinTrie {
            children: vec![[0, 0]],
            hops: vec![NONE],
        };
        for r in routes {
            t.insert(Route::new(r.prefix, r.len, r.next_hop));
        }
        t.children.shrink_to_fit();
        t.hops.shrink_to_fit();
        t
    }

    fn insert(&mut self, r: Route) {
        let mut n = 0usize;
        for i in 0..u32::from(r.len) {
            let bit = ((r.prefix >> (31 - i)) & 1) as usize;
            if self.children[n][bit] == 0 {
                self.children[n][bit] = self.children.len() as u32;
                self.children.push([0, 0]);
                self.hops.push(NONE);
            }
            n = self.children[n][bit] as usize;
        }
        self.hops[n] = r.next_hop;
    }

    /// The next hop of the longest prefix matching `addr` (a walk of up to
    /// 32 nodes).
    pub fn lookup(&self, addr: u32) -> Option<u32> {
        let mut best = self.hops[0];
        let mut n = 0usize;
        for i in 0..32 {
            let bit = ((addr >> (31 - i)) & 1) as usize;
            n = self.children[n][bit] as usize;
            if n == 0 {
                break;
            }
            if self.hops[n] != NONE {
                best = self.hops[n];
            }
        }
        (best != NONE).then_some(best)
    }

    /// Bytes the structure takes: 12 a node and the struct itself.
    pub fn bytes(&self) -> usize {
        self.children.len() * 8 + self.hops.len() * 4 + std::mem::size_of::<Self>()
    }
}

/// The next hop of the longest of `routes` matching `addr` by a scan of
/// them all (of equal prefixes the last wins): the plainest reference.
pub fn linear_lookup(routes: &[Route], addr: u32) -> Option<u32> {
    let mut best: Option<(u8, u32)> = None;
    for r in routes {
        if r.matches(addr) && best.is_none_or(|(l, _)| r.len >= l) {
            best = Some((r.len, r.next_hop));
        }
    }
    best.map(|(_, h)| h)
}
