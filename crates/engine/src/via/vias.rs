//! VIA's tables: memory regions, VIs, the discriminators processes listen
//! on and the connection requests waiting for an answer.
//!
//! A VI connection is granted here and nowhere else: a process asks to
//! connect to a discriminator, the process listening on it is told
//! ([`Reply::ViRequest`](unet_control::Reply::ViRequest)) and accepts or
//! rejects; only then does either side get a VI. Two local VIs share a
//! direct connection segment (made by [`DirectConns`](crate::unet::direct)),
//! which only those two processes map: the engine is out of their data
//! path, and a process can send only on the VIs it was handed.
//!
//! Nothing here trusts a client: every id a request names is looked up
//! and checked against the asking client before use, and each process's
//! regions and connections count against its memory quota.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use unet_control::ViParams;
use unet_sys::Segment;

use crate::via::vi_path::EngineVi;
pub(crate) use crate::via::vi_path::Region;
use crate::wire::port::ConnIn;

use crate::unet::endpoints::ClientId;

/// Most connection requests waiting on one discriminator (VIA's backlog).
pub(crate) const BACKLOG: usize = 64;
/// The unit a region is charged in.
const PAGE: u64 = 4096;
/// The longest a connection request waits for an answer.
pub(crate) const CONNECT_TIMEOUT_MAX: Duration = Duration::from_secs(60);

/// A VI the engine granted.
pub(crate) struct Vi {
    pub owner: ClientId,
    /// The direct connection it shares with its peer (0: none).
    pub conn_id: u32,
    /// The peer VI's id (0 once the peer is gone).
    pub peer: u32,
    /// Which side of the direct connection it is (B: the accepting one).
    pub side_b: bool,
    pub attrs: ViParams,
    /// The regions granted to this VI (`Request::ViGrantRegion` by its
    /// peer's owner): the grants end when either VI of the connection
    /// closes.
    pub grants: Vec<u32>,
}

/// Who asks for a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Connector {
    /// A client of this engine, waiting on request `req_id`.
    Local { client: ClientId, req_id: u32 },
    /// A VI of another engine.
    Remote {
        addr: SocketAddr,
        src_engine: u64,
        request_id: u32,
        src_vi: u32,
        src_token: u64,
    },
}

/// A connection request waiting for the listener's answer.
pub(crate) struct Pending {
    pub tag: u64,
    pub listener: ClientId,
    pub connector: Connector,
    pub attrs: ViParams,
    pub deadline: Instant,
    /// Whom it is counted against: the connecting process (its
    /// `proc_key`) or peer address.
    pub who: Asker,
}

/// Who asks for a connection, as the bounds on waiting requests count
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Asker {
    /// A local process, by its `proc_key`.
    Process(u32, usize),
    /// Another engine, by address.
    Peer(SocketAddr),
}

/// The bounds on waiting connection requests (from `EngineConfig`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PendingLimits {
    /// In the whole engine.
    pub total: u32,
    /// Per connecting process or peer address.
    pub per_peer: u32,
    /// Per peer IP address.
    pub per_ip: u32,
}

/// Why a connection request was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PendingFull {
    /// The discriminator has [`BACKLOG`] waiting.
    Backlog,
    /// The connecting process or peer address has its most waiting.
    Peer,
    /// The peer's IP address has its most waiting.
    Ip,
    /// The engine has its most waiting.
    Total,
}

/// The connection requests waiting for an answer, indexed so that each
/// request costs the same whatever the number waiting: by id, by
/// discriminator, by the remote request it stands for, by deadline, and
/// counted per asker and per peer IP address.
#[derive(Default)]
pub(crate) struct PendingTable {
    by_id: HashMap<u32, Pending>,
    by_tag: HashMap<u64, HashSet<u32>>,
    by_remote: HashMap<(SocketAddr, u32), u32>,
    by_deadline: BTreeSet<(Instant, u32)>,
    per_asker: HashMap<Asker, u32>,
    per_ip: HashMap<IpAddr, u32>,
    next_request: u32,
}

impl PendingTable {
    /// Requests waiting.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }

    pub(crate) fn get(&self, id: &u32) -> Option<&Pending> {
        self.by_id.get(id)
    }

    /// Requests waiting on discriminator `tag`.
    pub(crate) fn backlog(&self, tag: u64) -> usize {
        self.by_tag.get(&tag).map_or(0, |s| s.len())
    }

    /// Requests `who` has waiting.
    pub(crate) fn asked_by(&self, who: Asker) -> u32 {
        self.per_asker.get(&who).copied().unwrap_or(0)
    }

    /// The waiting request that stands for request `request_id` of the
    /// engine at `from`.
    pub(crate) fn remote(&self, from: SocketAddr, request_id: u32) -> Option<u32> {
        self.by_remote.get(&(from, request_id)).copied()
    }

    /// The ids of the requests waiting on discriminator `tag`.
    pub(crate) fn on_tag(&self, tag: u64) -> Vec<u32> {
        self.by_tag
            .get(&tag)
            .map_or_else(Vec::new, |s| s.iter().copied().collect())
    }

    /// The ids of the requests that `which` picks (a scan: for a client
    /// that leaves, not for each request).
    pub(crate) fn ids_where(&self, which: impl Fn(&Pending) -> bool) -> Vec<u32> {
        self.by_id
            .iter()
            .filter(|(_, p)| which(p))
            .map(|(&id, _)| id)
            .collect()
    }

    /// Queue `p` within `limits`; its id, or which bound it would cross.
    pub(crate) fn add(&mut self, p: Pending, limits: PendingLimits) -> Result<u32, PendingFull> {
        if self.backlog(p.tag) >= BACKLOG {
            return Err(PendingFull::Backlog);
        }
        if self.by_id.len() >= limits.total as usize {
            return Err(PendingFull::Total);
        }
        if self.asked_by(p.who) >= limits.per_peer {
            return Err(PendingFull::Peer);
        }
        let ip = match p.who {
            Asker::Peer(a) => Some(a.ip().to_canonical()),
            Asker::Process(..) => None,
        };
        if let Some(ip) = ip {
            if self.per_ip.get(&ip).copied().unwrap_or(0) >= limits.per_ip {
                return Err(PendingFull::Ip);
            }
        }
        let id = next_id(&mut self.next_request, &self.by_id);
        self.by_tag.entry(p.tag).or_default().insert(id);
        if let Connector::Remote {
            addr, request_id, ..
        } = p.connector
        {
            self.by_remote.insert((addr, request_id), id);
        }
        self.by_deadline.insert((p.deadline, id));
        *self.per_asker.entry(p.who).or_default() += 1;
        if let Some(ip) = ip {
            *self.per_ip.entry(ip).or_default() += 1;
        }
        self.by_id.insert(id, p);
        Ok(id)
    }

    /// Take request `id` out of every index.
    pub(crate) fn remove(&mut self, id: u32) -> Option<Pending> {
        let p = self.by_id.remove(&id)?;
        if let Some(s) = self.by_tag.get_mut(&p.tag) {
            s.remove(&id);
            if s.is_empty() {
                self.by_tag.remove(&p.tag);
            }
        }
        if let Connector::Remote {
            addr, request_id, ..
        } = p.connector
        {
            self.by_remote.remove(&(addr, request_id));
        }
        self.by_deadline.remove(&(p.deadline, id));
        fn dec<K: std::hash::Hash + Eq>(m: &mut HashMap<K, u32>, k: K) {
            if let Some(n) = m.get_mut(&k) {
                *n -= 1;
                if *n == 0 {
                    m.remove(&k);
                }
            }
        }
        dec(&mut self.per_asker, p.who);
        if let Asker::Peer(a) = p.who {
            dec(&mut self.per_ip, a.ip().to_canonical());
        }
        Some(p)
    }

    /// Take the requests past their deadline (earliest first).
    pub(crate) fn take_expired(&mut self, now: Instant) -> Vec<Pending> {
        let mut out = Vec::new();
        while let Some(&(d, id)) = self.by_deadline.first() {
            if d > now {
                break;
            }
            match self.remove(id) {
                Some(p) => out.push(p),
                None => {
                    self.by_deadline.remove(&(d, id));
                }
            }
        }
        out
    }

    /// The earliest deadline of a waiting request.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.by_deadline.first().map(|&(d, _)| d)
    }
}

/// A connection this engine asked another engine for.
pub(crate) struct RemoteOpen {
    pub client: ClientId,
    pub req_id: u32,
    /// The VI made for it (in `Vias::engine`).
    pub vi: u32,
    pub to: SocketAddr,
    pub tag: u64,
    pub attrs: ViParams,
    pub my_token: u64,
    pub next_try: Instant,
    pub tries: u32,
    pub deadline: Instant,
}

/// Every VIA object of the engine.
#[derive(Default)]
pub(crate) struct Vias {
    pub regions: HashMap<u32, Region>,
    pub vis: HashMap<u32, Vi>,
    pub listeners: HashMap<u64, ClientId>,
    pub pending: PendingTable,
    /// The VIs the engine carries (to other engines), by VI id.
    pub engine: HashMap<u32, EngineVi>,
    /// Which of them a turn visits, and their timers.
    pub vi_turn: ViTurn,
    /// Frames from the wire that set VIs up (opens and their answers),
    /// left by the VIs' turn for control to act on after it.
    pub wire_setup: Vec<ConnIn>,
    /// Connections asked of other engines, by request id.
    pub opens: HashMap<u32, RemoteOpen>,
    /// When each open is next due (its `next_try`), earliest first; an
    /// entry whose open is gone or was rescheduled is skipped when due.
    open_due: BTreeSet<(Instant, u32)>,
    /// Requests from other engines accepted here: (their address, their
    /// request id) → our VI, so a retransmitted request gets the answer
    /// again.
    pub answered: HashMap<(SocketAddr, u32), u32>,
    /// What each client holds of the objects counted per process, kept
    /// as they come and go (so a limit is checked without a scan of the
    /// whole engine's).
    held: HashMap<ClientId, Held>,
    next_region: u32,
    next_vi: u32,
    next_open: u32,
}

/// What one client holds of the objects counted per process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Held {
    pub regions: u32,
    pub vis: u32,
    pub listeners: u32,
}

/// The bit that marks a UDM link's id (`udm::remote`): links share
/// the wire's VI id space, and the VI ids the engine hands out never have
/// it (the wire's port sorts frames by it).
pub(crate) use crate::wire::port::LINK_BIT;

/// The next id of a counter that skips 0 and ids in use. Ids stay below
/// [`LINK_BIT`]: VI ids share the wire with UDM's links, which have it.
fn next_id<V>(counter: &mut u32, used: &HashMap<u32, V>) -> u32 {
    loop {
        *counter = counter.wrapping_add(1) & !LINK_BIT;
        if *counter != 0 && !used.contains_key(counter) {
            return *counter;
        }
    }
}

impl Vias {
    /// What client `ci` holds of the objects counted per process.
    pub(crate) fn held(&self, ci: ClientId) -> Held {
        self.held.get(&ci).copied().unwrap_or_default()
    }

    fn held_mut(&mut self, ci: ClientId) -> &mut Held {
        self.held.entry(ci).or_default()
    }

    /// Forget region `h`.
    pub(crate) fn remove_region(&mut self, h: u32) -> Option<Region> {
        let r = self.regions.remove(&h)?;
        let held = self.held_mut(r.owner);
        held.regions = held.regions.saturating_sub(1);
        Some(r)
    }

    /// Forget VI `id` (its entry; an engine-carried VI's state is the
    /// caller's).
    pub(crate) fn remove_vi(&mut self, id: u32) -> Option<Vi> {
        let v = self.vis.remove(&id)?;
        let held = self.held_mut(v.owner);
        held.vis = held.vis.saturating_sub(1);
        Some(v)
    }

    /// Client `ci` listens on `tag` (free, or already its own).
    pub(crate) fn listen(&mut self, tag: u64, ci: ClientId) {
        if self.listeners.insert(tag, ci).is_none() {
            self.held_mut(ci).listeners += 1;
        }
    }

    /// Nobody listens on `tag` any more.
    pub(crate) fn unlisten(&mut self, tag: u64) {
        if let Some(ci) = self.listeners.remove(&tag) {
            let held = self.held_mut(ci);
            held.listeners = held.listeners.saturating_sub(1);
        }
    }

    /// Client `ci` is gone: its regions and discriminators go (its VIs
    /// are closed one by one by the caller, before).
    pub(crate) fn drop_client(&mut self, ci: ClientId) {
        self.regions.retain(|_, r| r.owner != ci);
        self.listeners.retain(|_, c| *c != ci);
        self.held.remove(&ci);
    }

    /// Enter a region; its handle.
    pub(crate) fn add_region(&mut self, owner: ClientId, seg: Segment, len: u64) -> u32 {
        self.held_mut(owner).regions += 1;
        let h = next_id(&mut self.next_region, &self.regions);
        self.regions.insert(
            h,
            Region {
                owner,
                seg,
                len,
                granted: Vec::new(),
            },
        );
        h
    }

    /// Enter a VI; its id.
    pub(crate) fn add_vi(&mut self, owner: ClientId, conn_id: u32, attrs: ViParams) -> u32 {
        self.held_mut(owner).vis += 1;
        let id = next_id(&mut self.next_vi, &self.vis);
        self.vis.insert(
            id,
            Vi {
                owner,
                conn_id,
                peer: 0,
                side_b: false,
                attrs,
                grants: Vec::new(),
            },
        );
        id
    }

    /// Enter a connection asked of another engine; its request id.
    pub(crate) fn add_open(&mut self, o: RemoteOpen) -> u32 {
        let id = next_id(&mut self.next_open, &self.opens);
        self.open_due.insert((o.next_try, id));
        self.opens.insert(id, o);
        id
    }

    /// Open `id` is next due at `at`.
    pub(crate) fn open_due_at(&mut self, id: u32, at: Instant) {
        self.open_due.insert((at, id));
    }

    /// The opens due by `now` (each once, however often it was
    /// rescheduled): no scan of those not due.
    pub(crate) fn take_due_opens(&mut self, now: Instant) -> Vec<u32> {
        let mut due = Vec::new();
        while let Some(&(at, id)) = self.open_due.first() {
            if at > now {
                break;
            }
            self.open_due.pop_first();
            if self.opens.get(&id).is_some_and(|o| o.next_try == at) {
                due.push(id);
            }
        }
        due
    }

    /// Whether an open may be due (some are waiting, or stale entries).
    pub(crate) fn opens_waiting(&self) -> bool {
        !self.open_due.is_empty()
    }

    /// End the grants made to VI `vi` (its connection closed or broke):
    /// the regions no longer list it. How many ended.
    pub(crate) fn end_grants(&mut self, vi: u32) -> u64 {
        let Some(v) = self.vis.get_mut(&vi) else {
            return 0;
        };
        let mut ended = 0;
        for h in std::mem::take(&mut v.grants) {
            if let Some(r) = self.regions.get_mut(&h) {
                let before = r.granted.len();
                r.granted.retain(|&g| g != vi);
                ended += (before - r.granted.len()) as u64;
            }
        }
        ended
    }

    /// What each client is charged for here: its regions' bytes (in whole
    /// pages) and the segments of its engine-carried VIs.
    pub(crate) fn charges(&self) -> impl Iterator<Item = (ClientId, u64)> + '_ {
        // A region costs the engine a descriptor and a mapping whatever
        // its length: it is charged whole pages, at least one.
        let r = self
            .regions
            .values()
            .map(|r| (r.owner, r.len.max(1).div_ceil(PAGE) * PAGE));
        let v = self
            .engine
            .values()
            .map(|v| (v.owner, (v.seg.len() as u64).saturating_add(v.held_budget)));
        r.chain(v)
    }

    /// Whether a request or an open waits on a deadline (two loads: the
    /// loop asks on every turn, before it looks for the earliest).
    #[inline(always)]
    pub(crate) fn has_deadlines(&self) -> bool {
        !self.pending.by_deadline.is_empty() || !self.open_due.is_empty()
    }

    /// The earliest deadline of a waiting request or open.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let p = self.pending.next_deadline();
        let o = self.open_due.first().map(|&(at, _)| at);
        p.into_iter().chain(o).min()
    }
}

/// Whether `host` names this engine (None, or its own wire address).
pub(crate) fn is_local(host: Option<SocketAddr>, me: Option<SocketAddr>) -> bool {
    match host {
        None => true,
        Some(h) => me.is_some_and(|me| {
            me == h || (h.ip().is_loopback() && me.port() == h.port() && me.ip().is_unspecified())
        }),
    }
}

/// Which engine-carried VIs the next turn visits, and their timers, moved on by
/// the VIs' turn of the loop.
#[derive(Default)]
pub(crate) struct ViTurn {
    /// The VIs to visit on the next turn (each is `active`).
    pub(crate) ready: Vec<u32>,
    /// The list being visited (kept for its allocation).
    pub(crate) spare: Vec<u32>,
    /// (deadline, VI): a VI's earliest deadline is here (its `queued`);
    /// entries of VIs gone or whose deadline moved are dropped when they
    /// come up.
    pub(crate) timers: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u32)>>,
    /// When the next sweep is due (wire clock, ns).
    pub(crate) sweep_at: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(tag: u64, from: SocketAddr, request_id: u32, deadline: Instant) -> Pending {
        Pending {
            tag,
            listener: 0,
            connector: Connector::Remote {
                addr: from,
                src_engine: 0,
                request_id,
                src_vi: 1,
                src_token: 2,
            },
            attrs: ViParams::default(),
            deadline,
            who: Asker::Peer(from),
        }
    }

    const OPEN: PendingLimits = PendingLimits {
        total: u32::MAX,
        per_peer: u32::MAX,
        per_ip: u32::MAX,
    };

    /// Fill a table with `n` requests (from many ports, on many
    /// discriminators, far from their deadlines), then time what one more
    /// request costs: queued, looked up as a retransmission, counted
    /// against its discriminator, expired (none due) and answered.
    fn per_request(n: u32) -> Duration {
        let mut t = PendingTable::default();
        let far = Instant::now() + Duration::from_secs(60);
        for i in 0..n {
            let from = SocketAddr::from(([127, 0, 0, 1], 1024 + (i % 60_000) as u16));
            t.add(request(u64::from(i % 2000), from, i, far), OPEN)
                .expect("room");
        }
        assert_eq!(t.len(), n as usize);
        let probe = SocketAddr::from(([127, 0, 0, 2], 9));
        let rounds = 2_000u32;
        let start = Instant::now();
        for k in 0..rounds {
            let now = Instant::now();
            assert!(t.remote(probe, k).is_none());
            assert!(t.backlog(7) < BACKLOG);
            let id = t.add(request(7, probe, k, far), OPEN).expect("room");
            assert!(t.take_expired(now).is_empty());
            t.remove(id).expect("queued");
        }
        start.elapsed() / rounds
    }

    /// Issue 39, defect 7: every request scanned all those waiting (its
    /// discriminator's backlog, and whether it was a retransmission), so
    /// a flood of 2 000 discriminators' requests made the engine's work
    /// quadratic. A request's work is now the same with 100 or 100 000
    /// waiting.
    #[test]
    fn a_requests_work_does_not_grow_with_the_requests_waiting() {
        let best = |n| (0..3).map(|_| per_request(n)).min().expect("runs");
        let few = best(100);
        let many = best(100_000);
        eprintln!("one request: {few:?} with 100 waiting, {many:?} with 100 000");
        assert!(
            many < few * 8 + Duration::from_micros(2),
            "one request costs {many:?} with 100 000 waiting, {few:?} with 100"
        );
    }

    #[test]
    fn the_bounds_on_waiting_requests_hold_and_free_with_their_requests() {
        let mut t = PendingTable::default();
        let far = Instant::now() + Duration::from_secs(60);
        let limits = PendingLimits {
            total: 10,
            per_peer: 3,
            per_ip: 5,
        };
        let a = SocketAddr::from(([127, 0, 0, 1], 1));
        let b = SocketAddr::from(([127, 0, 0, 1], 2));
        let c = SocketAddr::from(([127, 0, 0, 3], 1));
        let mut ids = Vec::new();
        for i in 0..3 {
            ids.push(t.add(request(u64::from(i), a, i, far), limits).unwrap());
        }
        assert_eq!(
            t.add(request(9, a, 9, far), limits).err(),
            Some(PendingFull::Peer)
        );
        for i in 0..2 {
            t.add(request(u64::from(i), b, i, far), limits).unwrap();
        }
        // The fourth port of the same IP is past the IP's bound.
        assert_eq!(
            t.add(request(9, b, 9, far), limits).err(),
            Some(PendingFull::Ip)
        );
        for i in 0..3 {
            t.add(request(u64::from(i), c, i, far), limits).unwrap();
        }
        for i in 0..BACKLOG as u32 {
            let d = SocketAddr::from(([127, 0, 1, (i % 200) as u8], 3));
            match t.add(request(100, d, i, far), limits) {
                Ok(_) | Err(PendingFull::Total) => {}
                Err(e) => panic!("{e:?}"),
            }
        }
        assert_eq!(t.len(), 10);
        // Answered requests free their room.
        t.remove(ids[0]).unwrap();
        assert_eq!(t.asked_by(Asker::Peer(a)), 2);
        assert!(t.add(request(9, a, 9, far), limits).is_ok());
        // And the backlog of one discriminator.
        let mut t = PendingTable::default();
        for i in 0..BACKLOG as u32 {
            let d = SocketAddr::from(([127, 0, 1, (i % 200) as u8], i as u16));
            t.add(request(5, d, i, far), OPEN).unwrap();
        }
        let d = SocketAddr::from(([127, 0, 2, 1], 1));
        assert_eq!(
            t.add(request(5, d, 1, far), OPEN).err(),
            Some(PendingFull::Backlog)
        );
        // Expired ones go, earliest first, from every index.
        let past = Instant::now();
        let mut t = PendingTable::default();
        t.add(request(1, a, 1, past), OPEN).unwrap();
        t.add(request(1, a, 2, far), OPEN).unwrap();
        assert_eq!(t.take_expired(Instant::now()).len(), 1);
        assert_eq!(
            (t.len(), t.backlog(1), t.asked_by(Asker::Peer(a))),
            (1, 1, 1)
        );
        assert!(t.remote(a, 1).is_none() && t.remote(a, 2).is_some());
    }
}
