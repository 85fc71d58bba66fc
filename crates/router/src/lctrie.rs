//! The LC-trie of Nilsson and Karlsson ("IP-address lookup using LC-tries",
//! IEEE JSAC 1999): a trie with path compression (a node skips the bits
//! all its prefixes share) and level compression (a node branches on
//! several bits at once while at least a fill factor of its children are
//! non-empty), over flat `u32` arrays that a Java extension walks the same
//! way (the router extension, `extensions/router/Router.java`).
//!
//! The arrays:
//!
//! - `trie`: one word a node, `kind << 27 | skip << 22 | adr`, the root at
//!   `trie[0]`. An inner node (`kind` 1 to 22: its branch) has `2^kind`
//!   children at `trie[adr..]`. A leaf of kind 24 to 31 is a block of
//!   `2^(31 - kind)` leaves held in its parent's word: its child `k`, by
//!   the next `31 - kind` bits of the address, names base entry `adr + k`
//!   (a node whose children would all be leaves of one entry each, in
//!   order, needs no words of its own; a plain leaf is a block of one,
//!   `kind == 31`, naming entry `adr`). A leaf of kind 23 holds its
//!   answer: `adr` is the next hop's index in `hops` plus one, or 0 for
//!   no route (an empty child of a level-compressed node with no skipped
//!   bit on its path: the longest prefix covering its range is the same
//!   for all of it, found when the trie is built). Kind 0 is not used.
//! - The base vector, `base`: the prefixes that are not a prefix of another
//!   one, sorted, two words each (together, so that a lookup's one miss
//!   fetches both): `base[2 * i]` is the prefix (host bits clear) and
//!   `base[2 * i + 1]` its info word, `len << 26 | (pre + 1) << nh_bits |
//!   nh`, where `pre` is the longest prefix-vector entry that is a prefix
//!   of this one (`-1`: none) and `nh` the index of its next hop in
//!   `hops`.
//! - The prefix vector, `pre`: the prefixes that are a prefix of another
//!   one, each `len << 26 | (pre + 1) << nh_bits | nh` like a base entry's
//!   (its bits are the first `len` bits of any base entry that points to
//!   it, so they need no word of their own).
//! - The next-hop table, `hops`: the distinct next hops.
//!
//! A lookup walks from the root, each inner node taking `branch` bits of the
//! address after skipping `skip`, to a leaf: one that holds its answer
//! ends the lookup; otherwise (taking its block's bits, if any, the same
//! way) it names a base entry, and the lookup compares the address with
//! the leaf's base entry and, failing that, with the entries of its
//! prefix-vector chain, longest first. Another empty child is a leaf naming
//! the neighbouring base entry that shares the most bits with the child's
//! range: the longest prefix covering the range is that entry or on its
//! chain, and nothing longer can match there.
//!
//! [`LcTrie::lookup_batch`] walks several addresses level by level
//! together, so that their cache misses overlap.
//!
//! Duplicate prefixes (same bits and length): the last route given wins.
//! Limits: leaf blocks of up to 2^7 entries; 4 Mi - 1 next hops; 4 Mi nodes and base entries (22-bit addresses); the nested
//! prefixes' index and the next hop's share 26 bits of an info word (the
//! full table with 16 next hops takes 17 and 4); past them the build is
//! refused ([`BuildError`]).
//!
//! The export format ([`LcTrie::to_le_bytes`]): the ASCII magic `LCT2`,
//! then little-endian `u32`s: `nh_bits`, the lengths (in words) of `trie`,
//! `base`, `pre` and `hops`, then the arrays in that order. Java reads each
//! as an `int[]` (the same bits).

use crate::table::{mask, Route};

/// Bits of a node word holding the address.
pub const ADR_BITS: u32 = 22;
/// Bits of a node word holding the skip.
pub const SKIP_BITS: u32 = 5;
const ADR_MASK: u32 = (1 << ADR_BITS) - 1;
const SKIP_MASK: u32 = (1 << SKIP_BITS) - 1;
/// Bits of an info word above `pre + 1` and the next hop: the length.
const LEN_SHIFT: u32 = 26;
/// Most bits an inner node branches on (a child array of 4 Mi nodes at
/// most): a node word's kind above this is a leaf block.
pub const MAX_BRANCH: u32 = 22;
/// Where a node word's kind starts.
const KIND_SHIFT: u32 = ADR_BITS + SKIP_BITS;
/// The kind of a leaf that holds its answer: `adr` is the next hop's
/// index plus one, or 0 for no route.
const ANSWER_KIND: u32 = MAX_BRANCH + 1;
/// The kind of a leaf block of `2^b` entries is `LEAF_KIND - b`.
const LEAF_KIND: u32 = 31;
/// Most bits a leaf block branches on.
const MAX_LEAF_BRANCH: u32 = LEAF_KIND - ANSWER_KIND - 1;
/// The export format's magic.
const MAGIC: &[u8; 4] = b"LCT2";

/// How the trie is shaped.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// A node branches on `b` bits while at least `fill * 2^b` of its
    /// children would be non-empty. Nilsson and Karlsson use 0.5; 0.75
    /// takes 11.2 bytes a prefix of the full table instead of 13.6, at the
    /// same lookup rate within this machine's noise.
    pub fill: f64,
    /// The root branches on at least `min(root_branch, floor(log2 n))` bits
    /// for `n` base entries (they use 16 for large tables): fewer levels
    /// for the first, densest bits.
    pub root_branch: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            fill: 0.75,
            root_branch: 16,
        }
    }
}

/// Why routes could not be built into a trie (a table too large for the
/// words' fields).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildError(pub String);

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BuildError {}

/// An LC-trie over a routing table (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LcTrie {
    trie: Vec<u32>,
    base: Vec<u32>,
    pre: Vec<u32>,
    hops: Vec<u32>,
    nh_bits: u32,
}

/// The trie's arrays, for a host that copies them elsewhere (a JIVE
/// extension's `int[]` fields).
#[derive(Clone, Copy, Debug)]
pub struct Arrays<'a> {
    /// The nodes.
    pub trie: &'a [u32],
    /// The base vector: prefix and info word of each entry.
    pub base: &'a [u32],
    /// The prefix vector.
    pub pre: &'a [u32],
    /// The next hops.
    pub hops: &'a [u32],
    /// Bits of an info word holding the next hop's index.
    pub nh_bits: u32,
}

impl LcTrie {
    /// Build the trie of `routes` with the default [`Params`].
    pub fn build(routes: &[Route]) -> Result<LcTrie, BuildError> {
        Self::build_with(routes, Params::default())
    }

    /// Build the trie of `routes` shaped by `p`.
    pub fn build_with(routes: &[Route], p: Params) -> Result<LcTrie, BuildError> {
        // Sort by (bits, length), keeping the last of equal prefixes.
        let mut rs: Vec<Route> = routes
            .iter()
            .map(|r| Route::new(r.prefix, r.len, r.next_hop))
            .collect();
        rs.reverse();
        rs.sort_by_key(|r| (r.prefix, r.len));
        rs.dedup_by_key(|r| (r.prefix, r.len));

        let mut hops: Vec<u32> = rs.iter().map(|r| r.next_hop).collect();
        hops.sort_unstable();
        hops.dedup();
        let nh_bits = 32 - (hops.len().max(1) as u32 - 1).leading_zeros();

        // A prefix of another entry is followed by one in sorted order.
        // Walk with a stack of the open prefix-vector entries.
        let (mut base, mut pre_rs) = (Vec::new(), Vec::new());
        let mut open: Vec<(Route, usize)> = Vec::new();
        let mut base_pre = Vec::new();
        let mut pre_parent = Vec::new();
        for (i, r) in rs.iter().enumerate() {
            while open.last().is_some_and(|(o, _)| !o.matches(r.prefix)) {
                open.pop();
            }
            let parent = open.last().map_or(-1, |&(_, k)| k as i64);
            let is_prefix = rs
                .get(i + 1)
                .is_some_and(|n| n.len > r.len && r.matches(n.prefix));
            if is_prefix {
                open.push((*r, pre_rs.len()));
                pre_rs.push(*r);
                pre_parent.push(parent);
            } else {
                base.push(*r);
                base_pre.push(parent);
            }
        }
        if hops.len() >= ADR_MASK as usize {
            return Err(BuildError(format!(
                "{} next hops (a leaf names at most {})",
                hops.len(),
                ADR_MASK - 1
            )));
        }
        let fits = LEN_SHIFT
            .checked_sub(nh_bits)
            .is_some_and(|pre_bits| (pre_rs.len() as u64) >> pre_bits == 0);
        if !fits {
            return Err(BuildError(format!(
                "{} nested prefixes and {} next hops do not fit an info word",
                pre_rs.len(),
                hops.len()
            )));
        }
        let info = |r: &Route, parent: i64| -> u32 {
            let nh = hops.binary_search(&r.next_hop).unwrap_or(0) as u32;
            (u32::from(r.len) << LEN_SHIFT) | (((parent + 1) as u32) << nh_bits) | nh
        };
        let base_str: Vec<u32> = base.iter().map(|r| r.prefix).collect();
        let pre = pre_rs
            .iter()
            .zip(&pre_parent)
            .map(|(r, &p)| info(r, p))
            .collect();
        let base = base
            .iter()
            .zip(&base_pre)
            .flat_map(|(r, &p)| [r.prefix, info(r, p)])
            .collect();

        let mut t = LcTrie {
            trie: Vec::new(),
            base,
            pre,
            hops,
            nh_bits,
        };
        if !base_str.is_empty() {
            let mut b = Builder {
                s: &base_str,
                p,
                nodes: vec![0],
                t: &t,
            };
            b.node(0, 0, base_str.len(), 0, true, true)?;
            t.trie = b.nodes;
        }
        t.shrink();
        Ok(t)
    }

    /// Release every array's capacity beyond its length.
    fn shrink(&mut self) {
        for v in [
            &mut self.trie,
            &mut self.base,
            &mut self.pre,
            &mut self.hops,
        ] {
            v.shrink_to_fit();
        }
    }

    /// The next hop of the longest prefix matching `addr`.
    #[inline]
    pub fn lookup(&self, addr: u32) -> Option<u32> {
        let mut node = *self.trie.first()?;
        let mut pos = (node >> ADR_BITS) & SKIP_MASK;
        let mut kind = node >> KIND_SHIFT;
        while kind <= MAX_BRANCH {
            // Wrapping as Java's shifts: the same on an imported trie.
            let child = addr.wrapping_shl(pos).wrapping_shr(32 - kind);
            node = self.trie[((node & ADR_MASK) + child) as usize];
            pos = pos.wrapping_add(kind + ((node >> ADR_BITS) & SKIP_MASK));
            kind = node >> KIND_SHIFT;
        }
        if kind == ANSWER_KIND {
            return self.answer(node);
        }
        let at = 2 * leaf_entry(addr, pos, node) as usize;
        self.resolve(addr ^ self.base[at], self.base[at + 1])
    }

    /// [`LcTrie::lookup`] of `N` addresses at once, walked level by level
    /// together, so that their memory accesses overlap (a receive ring's
    /// burst of packets): the same answers.
    pub fn lookup_batch<const N: usize>(&self, addrs: &[u32; N]) -> [Option<u32>; N] {
        let Some(&root) = self.trie.first() else {
            return [None; N];
        };
        let mut pos = [(root >> ADR_BITS) & SKIP_MASK; N];
        let mut node = [root; N];
        loop {
            let mut inner = false;
            for i in 0..N {
                let kind = node[i] >> KIND_SHIFT;
                if kind <= MAX_BRANCH {
                    let child = addrs[i].wrapping_shl(pos[i]).wrapping_shr(32 - kind);
                    node[i] = self.trie[((node[i] & ADR_MASK) + child) as usize];
                    pos[i] = pos[i].wrapping_add(kind + ((node[i] >> ADR_BITS) & SKIP_MASK));
                    inner = true;
                }
            }
            if !inner {
                break;
            }
        }
        let mut diff = [0u32; N];
        let mut info = [0u32; N];
        for i in 0..N {
            if node[i] >> KIND_SHIFT != ANSWER_KIND {
                let at = 2 * leaf_entry(addrs[i], pos[i], node[i]) as usize;
                diff[i] = addrs[i] ^ self.base[at];
                info[i] = self.base[at + 1];
            }
        }
        std::array::from_fn(|i| {
            if node[i] >> KIND_SHIFT == ANSWER_KIND {
                self.answer(node[i])
            } else {
                self.resolve(diff[i], info[i])
            }
        })
    }

    /// The next hop a leaf holding its answer names.
    #[inline]
    fn answer(&self, node: u32) -> Option<u32> {
        let a = node & ADR_MASK;
        (a != 0).then(|| self.hops[a as usize - 1])
    }

    /// The next hop of the base entry (`info`) or the first of its chain
    /// whose bits `diff` (the address against the entry's prefix) matches.
    #[inline]
    fn resolve(&self, diff: u32, info: u32) -> Option<u32> {
        self.resolve_index(diff, info)
            .map(|i| self.hops[i as usize])
    }

    /// [`LcTrie::resolve`]'s next hop's index in `hops`.
    #[inline]
    fn resolve_index(&self, diff: u32, mut info: u32) -> Option<u32> {
        loop {
            let len = info >> LEN_SHIFT;
            if len == 0 || diff.wrapping_shr(32 - len) == 0 {
                return Some(info & ((1 << self.nh_bits) - 1));
            }
            let up = (info & ((1 << LEN_SHIFT) - 1)) >> self.nh_bits;
            if up == 0 {
                return None;
            }
            info = self.pre[up as usize - 1];
        }
    }

    /// Bytes the structure takes: its arrays' allocations (capacity beyond
    /// the length is released when it is built or read) and the struct
    /// itself.
    pub fn bytes(&self) -> usize {
        let words = self.trie.capacity()
            + self.base.capacity()
            + self.pre.capacity()
            + self.hops.capacity();
        words * 4 + std::mem::size_of::<Self>()
    }

    /// The arrays, for copying into an extension.
    pub fn arrays(&self) -> Arrays<'_> {
        Arrays {
            trie: &self.trie,
            base: &self.base,
            pre: &self.pre,
            hops: &self.hops,
            nh_bits: self.nh_bits,
        }
    }

    /// Nodes, base entries and prefix-vector entries.
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.trie.len(), self.base.len() / 2, self.pre.len())
    }

    /// Depth of the deepest leaf (the root's children are at depth 1; a
    /// leaf block's leaves are one below its word).
    pub fn depth(&self) -> usize {
        fn walk(t: &[u32], i: usize) -> usize {
            let n = t[i];
            let kind = n >> KIND_SHIFT;
            if kind > MAX_BRANCH {
                return usize::from(kind > ANSWER_KIND && kind < LEAF_KIND);
            }
            let adr = (n & ADR_MASK) as usize;
            1 + (0..1usize << kind)
                .map(|k| walk(t, adr + k))
                .max()
                .unwrap_or(0)
        }
        if self.trie.is_empty() {
            0
        } else {
            walk(&self.trie, 0)
        }
    }

    /// The export format (module documentation): magic, header, arrays.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let a = self.arrays();
        let mut out = Vec::with_capacity(self.bytes() + 24);
        out.extend_from_slice(MAGIC);
        for w in [
            a.nh_bits,
            a.trie.len() as u32,
            a.base.len() as u32,
            a.pre.len() as u32,
            a.hops.len() as u32,
        ] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        for arr in [a.trie, a.base, a.pre, a.hops] {
            for w in arr {
                out.extend_from_slice(&w.to_le_bytes());
            }
        }
        out
    }

    /// Read the export format back (`None`: not a whole, consistent
    /// export).
    pub fn from_le_bytes(b: &[u8]) -> Option<LcTrie> {
        let rest = b.strip_prefix(MAGIC)?;
        let mut words = rest
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        if rest.len() % 4 != 0 {
            return None;
        }
        let nh_bits = words.next()?;
        let [nt, nb, np, nh] = [words.next()?, words.next()?, words.next()?, words.next()?];
        let mut take = |n: u32| -> Vec<u32> { words.by_ref().take(n as usize).collect() };
        let t = LcTrie {
            trie: take(nt),
            base: take(nb),
            pre: take(np),
            hops: take(nh),
            nh_bits,
        };
        let whole = t.trie.len() == nt as usize
            && t.base.len() == nb as usize
            && t.hops.len() == nh as usize
            && words.next().is_none();
        let mut t = (whole && nh_bits < LEN_SHIFT && t.consistent()).then_some(t)?;
        t.shrink();
        Some(t)
    }

    /// Every index in the arrays is within its array (an imported trie is
    /// safe to look up in: no lookup can index out of range or loop).
    fn consistent(&self) -> bool {
        let nb = self.base.len() / 2;
        let info_ok = |w: u32, limit: usize| {
            let up = ((w & ((1 << LEN_SHIFT) - 1)) >> self.nh_bits) as usize;
            (w & ((1 << self.nh_bits) - 1)) < self.hops.len() as u32
                && up <= limit
                && (w >> LEN_SHIFT) <= 32
        };
        // Children after their node, so a walk ends.
        let nodes_ok = self.trie.iter().enumerate().all(|(i, &n)| {
            let kind = n >> KIND_SHIFT;
            let adr = (n & ADR_MASK) as usize;
            match kind {
                0 => false,
                1..=MAX_BRANCH => adr + (1usize << kind) <= self.trie.len() && adr > i,
                ANSWER_KIND => adr <= self.hops.len(),
                _ => adr + (1usize << (LEAF_KIND - kind)) <= nb,
            }
        });
        (self.trie.is_empty() == (nb == 0))
            && self.base.len().is_multiple_of(2)
            && nodes_ok
            && self.base.iter().skip(1).step_by(2).all(|&w| info_ok(w, self.pre.len()))
            // A chain only goes to earlier entries, so it ends.
            && self.pre.iter().enumerate().all(|(i, &w)| info_ok(w, i))
    }
}

/// The recursive builder: nodes are laid out children-together, each
/// node's children after it, depth first.
struct Builder<'a> {
    s: &'a [u32],
    p: Params,
    nodes: Vec<u32>,
    /// The trie's vectors (its nodes being built here).
    t: &'a LcTrie,
}

impl Builder<'_> {
    /// Fill `nodes[at]` with the node over base entries `first..first + n`,
    /// whose first `pos` bits the path to it has consumed (`exact`: taken
    /// by branches, none skipped unchecked).
    fn node(
        &mut self,
        at: usize,
        first: usize,
        n: usize,
        pos: u32,
        root: bool,
        exact: bool,
    ) -> Result<(), BuildError> {
        if n == 1 {
            self.nodes[at] = leaf(first)?;
            return Ok(());
        }
        let s = self.s;
        let (lo, hi) = (s[first], s[first + n - 1]);
        // Distinct prefixes differ within their 32 bits: common < 32.
        let common = ((lo ^ hi) << pos).leading_zeros().min(32 - pos - 1);
        let skip = if root { 0 } else { common };
        let exact = exact && skip == 0;
        let at_bit = pos + skip;
        let branch = self.branch(first, n, at_bit, root);
        // One entry a child, in order: a leaf block in this word.
        if n == 1 << branch
            && branch <= MAX_LEAF_BRANCH
            && self.patterns(first, n, at_bit, branch) == n
        {
            leaf(first + n - 1)?;
            self.nodes[at] =
                ((LEAF_KIND - branch) << KIND_SHIFT) | (skip << ADR_BITS) | first as u32;
            return Ok(());
        }
        let adr = self.nodes.len();
        if adr + (1 << branch) > ADR_MASK as usize {
            return Err(BuildError(format!(
                "the trie needs more than {} nodes",
                ADR_MASK
            )));
        }
        self.nodes[at] = (branch << KIND_SHIFT) | (skip << ADR_BITS) | adr as u32;
        self.nodes.resize(adr + (1 << branch), 0);
        // Each child's run of entries, by the `branch` bits at `at_bit`.
        let pat = |x: u32| (x << at_bit) >> (32 - branch);
        let mut runs = vec![(0usize, 0usize); 1 << branch];
        let mut i = first;
        while i < first + n {
            let k = pat(s[i]);
            let start = i;
            while i < first + n && pat(s[i]) == k {
                i += 1;
            }
            runs[k as usize] = (start, i - start);
        }
        for (k, &(start, len)) in runs.iter().enumerate() {
            if len > 0 {
                self.node(adr + k, start, len, at_bit + branch, false, exact)?;
                continue;
            }
            // An empty child: the neighbouring entry sharing most bits
            // with the child's range. The longest prefix covering the
            // range is that entry or on its chain, and nothing longer
            // can match there. When every address that reaches the child
            // is in its range (no bit on the path was skipped), that
            // prefix is every such address's answer: the child holds it.
            let range = (lo & mask(at_bit as u8)) | ((k as u32) << (32 - at_bit - branch));
            let before = runs[..k]
                .iter()
                .rev()
                .find(|r| r.1 > 0)
                .map(|r| r.0 + r.1 - 1);
            let after = runs[k + 1..].iter().find(|r| r.1 > 0).map(|r| r.0);
            let shared = |e: usize| (s[e] ^ range).leading_zeros();
            let e = match (before, after) {
                (Some(b), Some(a)) => {
                    if shared(b) >= shared(a) {
                        b
                    } else {
                        a
                    }
                }
                (Some(b), None) => b,
                (None, Some(a)) => a,
                (None, None) => first,
            };
            if !exact {
                self.nodes[adr + k] = leaf(e)?;
                continue;
            }
            let (b, t) = (&self.t.base, self.t);
            let hop = t.resolve_index(range ^ b[2 * e], b[2 * e + 1]);
            self.nodes[adr + k] = (ANSWER_KIND << KIND_SHIFT) | hop.map_or(0, |h| h + 1);
        }
        Ok(())
    }

    /// Bits the node over `first..first + n` branches on at bit `at_bit`:
    /// the most while at least `fill` of the children are non-empty, at
    /// least one, and at the root at least `min(root_branch, log2 n)`.
    fn branch(&self, first: usize, n: usize, at_bit: u32, root: bool) -> u32 {
        let room = (32 - at_bit).min(MAX_BRANCH);
        let mut b = 1;
        if n > 2 {
            while b < room {
                let next = b + 1;
                let needed = self.p.fill * (1u64 << next) as f64;
                if (self.patterns(first, n, at_bit, next) as f64) < needed {
                    break;
                }
                b = next;
            }
        }
        if root {
            let log2 = usize::BITS - 1 - n.leading_zeros();
            b = b.max(self.p.root_branch.min(log2)).min(room);
        }
        b
    }

    /// Distinct values of the `b` bits at `at_bit` among the (sorted)
    /// entries `first..first + n`.
    fn patterns(&self, first: usize, n: usize, at_bit: u32, b: u32) -> usize {
        let pat = |x: u32| (x << at_bit) >> (32 - b);
        let run = &self.s[first..first + n];
        1 + run.windows(2).filter(|w| pat(w[0]) != pat(w[1])).count()
    }
}

/// The word of a leaf naming base entry `entry`.
fn leaf(entry: usize) -> Result<u32, BuildError> {
    u32::try_from(entry)
        .ok()
        .filter(|&e| e <= ADR_MASK)
        .map(|e| (LEAF_KIND << KIND_SHIFT) | e)
        .ok_or_else(|| BuildError(format!("more than {ADR_MASK} base entries")))
}

/// The base entry a leaf word (`node`, a leaf block) names for `addr`,
/// whose first `pos` bits the path to it has consumed: its entry plus the
/// block's next bits of the address (none for a plain leaf).
#[inline]
fn leaf_entry(addr: u32, pos: u32, node: u32) -> u32 {
    // `>> 1 >> kind`: `>> (32 - b)` for a block of `2^b`, and 0 for b = 0
    // (a shift by 32 would leave the word whole, in Java as here).
    (node & ADR_MASK) + ((addr.wrapping_shl(pos) >> 1) >> (node >> KIND_SHIFT))
}
