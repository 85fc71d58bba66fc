//! The adapter's table of peer queues ([`Peers`]): the links to other
//! adapters on this host that SPINE's turn reads and its handlers send
//! on (SPINE's Figure 1), their set-up, and their rows for listings.
//!
//! A client joins two adapters by making a peer segment and handing it to
//! each with its side ([`Request::PeerJoin`]); each adapter attaches its
//! side as a [`PeerLink`], gives it an index (`DEST_PEER`'s id), and
//! answers with its doorbell, which the client hands to the other
//! ([`Request::PeerDoorbell`]): a link rings it when it sends to a peer
//! that sleeps.
//!
//! In the runtime: a handler's send to `DEST_PEER | index` is a `PeerTx`
//! event ([`forward`]) that puts the message on the link (bulk data
//! copied into the link's data area); each turn takes what waits on each
//! link, at most [`RX_PER_TURN`] messages a link ([`take`]), into
//! `PeerRx` events: a message slot and a bulk buffer from the pools, its
//! header saying `AM_SRC_PEER` and the index, so that `reply` answers
//! over the same link. A turn with no link joined costs one test.
//!
//! Death: a link's peer is watched by its pidfd and the adapter's
//! doorbell (a close rings it), both in an epoll set of the table's own
//! that the engine's poller watches ([`Peers::woken`]), and by a look at
//! every link now and then ([`CHECK_EVERY`], the stall timeout's clock).
//! A dead link refuses sends (`E_DEAD`), the messages that waited for
//! its peer are dropped and counted, and its row says why; it keeps its
//! row (and slot) until it is left or a join needs the slot. Joining the
//! two adapters again makes a new link with a new index.
//!
//! Caps: [`PEERS_PER_ADAPTER`] links, [`PEERS_PER_PROCESS`] live links
//! joined by one process and [`PEERS_PER_USER`] by the processes of one
//! user (a link outlives the process that joined it: a user who joins
//! from one new process after another stops at the user's cap, and the
//! rest of the adapter's links are left for others). A link is its
//! joining user's: only that user, or root, may leave it or hand it a
//! doorbell; to anyone else it is no such link.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use unet_abi::spine::{AmHeader, AM_SRC_PEER, SYS_PORT_OUT};
use unet_abi::EngineCounter;
use unet_control::peer::{
    PeerInfo, PeerListing, PEERS_PER_ADAPTER, PEERS_PER_PROCESS, PEERS_PER_USER,
};
use unet_control::{ErrorCode, Reply, Request};
use unet_sys::{Epoll, EventFd};

use crate::clients::{ClientId, Clients, ProcKey};
use crate::counters::Counters;
use crate::poller::{Poller, Token};
use crate::spine::events::{DropReason, Event, EventKind};
use crate::spine::peer::{
    AttachError, Broken, Death, PeerConfig, PeerDrop, PeerError, PeerLink, PeerState,
};
use crate::spine::port::{port_out, PortOutRefused, Ports, RtParts};
use crate::spine::rt::Rt;

/// Most messages one turn takes from one link: as many as a turn of
/// the adapter at the other end takes frames from a port
/// ([`crate::spine::port::RX_BATCH`]), so that a router's egress adapter
/// drains in a turn what its ingress adapter handed over in one (with 64,
/// two adapters taking turns on one thread filled the queue, and the
/// ingress side dropped an eighth of the frames as `dest_full`).
pub(crate) const RX_PER_TURN: usize = crate::spine::port::RX_BATCH;

/// How often the links are looked at (their peers' flags, processes and
/// heartbeats) while the engine runs; the engine's deadline while a link
/// waits for its peer or does not yet watch its process.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(10);

/// The turns between two readings of the clock for [`CHECK_EVERY`].
const CHECK_TURNS: u32 = 64;

/// The epoll token of the adapter's doorbell (a link's is its slot).
const DOORBELL: u64 = u64::MAX;

/// Indices are `generation << SLOT_BITS | slot`, under 2^24.
const SLOT_BITS: u32 = 4;
const GEN_MAX: u32 = (1 << (24 - SLOT_BITS)) - 1;
const _: () = assert!(PEERS_PER_ADAPTER <= 1 << SLOT_BITS);

/// What the runtime counts of one link, beside the link's own counts.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RtCounts {
    /// Sends refused or dropped because the peer is dead.
    pub tx_dead: u64,
    /// Forwards dropped: the ring or the data area was full.
    pub tx_full: u64,
    /// Forwards dropped: the message can never go on the link (its bulk
    /// data is larger than the link's largest).
    pub tx_invalid: u64,
    /// Arrivals dropped: no message slot was free.
    pub rx_no_slot: u64,
    /// Arrivals dropped: no bulk buffer was free, or the data was longer
    /// than one.
    pub rx_no_buffer: u64,
    /// Arrivals dropped: the event queue was full.
    pub rx_queue_full: u64,
    /// Arrivals for `SYS_PORT_OUT` dropped: no open port of this adapter
    /// named, or no frame.
    pub rx_bad_port: u64,
    /// Arrivals for `SYS_PORT_OUT` queued for their port.
    pub port_out: u64,
}

/// Who joins a link: the process and the user it is charged to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Joiner {
    /// The joining process (its cap).
    pub proc: Option<ProcKey>,
    /// The joining user (its cap; the one who may leave the link, beside
    /// root); `u32::MAX` when the kernel could not tell it.
    pub uid: u32,
}

/// One link of the table.
struct Row {
    index: u32,
    link: PeerLink,
    /// The process that joined it (its cap).
    proc: Option<ProcKey>,
    /// The user who joined it (its cap, and who may leave it).
    uid: u32,
    /// The link's pidfd is in the table's epoll set.
    watched: bool,
    /// Why it is dead, once it is.
    dead: Option<Death>,
    counts: RtCounts,
}

/// The wake-ups of the table: an epoll set (watched by the engine's
/// poller) of the adapter's doorbell and the links' pidfds.
struct Wake {
    epoll: Epoll,
    doorbell: EventFd,
    ready: Vec<u64>,
}

/// The adapter's peer queues (see the module documentation).
pub(crate) struct Peers {
    rows: Vec<Option<Row>>,
    /// Rows held (a turn with none does nothing).
    held: usize,
    generation: u32,
    /// Made at the first join.
    wake: Option<Wake>,
    turns: u32,
    next_check: Instant,
    cfg: PeerConfig,
    /// Rows with messages put this turn and not yet published
    /// (`publish`, once a turn).
    unpublished: Vec<u32>,
}

impl Peers {
    pub(crate) fn new() -> Peers {
        Peers {
            rows: Vec::new(),
            held: 0,
            generation: 0,
            wake: None,
            turns: 0,
            next_check: Instant::now(),
            // Both ends are engines that sleep whenever a turn finds
            // nothing: full fences on both sides of the handshake.
            cfg: PeerConfig {
                asymmetric: false,
                ..PeerConfig::default()
            },
            unpublished: Vec::new(),
        }
    }

    /// Whether messages were put on links this turn and wait to be
    /// published.
    #[inline]
    pub(crate) fn has_unpublished(&self) -> bool {
        !self.unpublished.is_empty()
    }

    /// Let the peers see what this turn put on their links (one store and
    /// one fence a link, not a message), ringing those that sleep.
    pub(crate) fn publish(&mut self) {
        let mut rows = std::mem::take(&mut self.unpublished);
        for i in rows.drain(..) {
            if let Some(r) = self.row_mut(i) {
                r.link.publish();
            }
        }
        self.unpublished = rows;
    }

    /// Whether no link is held: what a turn tests, and all it does then.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.held == 0
    }

    /// Link `index` (for tests).
    #[cfg(test)]
    fn row(&self, index: u32) -> Option<&Row> {
        let r = self.rows.get((index & ((1 << SLOT_BITS) - 1)) as usize)?;
        r.as_ref().filter(|r| r.index == index)
    }

    fn row_mut(&mut self, index: u32) -> Option<&mut Row> {
        let r = self
            .rows
            .get_mut((index & ((1 << SLOT_BITS) - 1)) as usize)?;
        r.as_mut().filter(|r| r.index == index)
    }

    /// Link `index`, if user `uid` may change it: its joining user's, or
    /// root's.
    fn row_of(&mut self, index: u32, uid: Option<u32>) -> Option<&mut Row> {
        self.row_mut(index)
            .filter(|r| uid == Some(0) || (r.uid != u32::MAX && Some(r.uid) == uid))
    }

    /// Whether a handler may send to link `index`: `Some(true)` when it
    /// lives, `Some(false)` when it is dead (the refusal is counted on
    /// its row), `None` when there is no such link.
    pub(crate) fn may_send(&mut self, index: u32) -> Option<bool> {
        let r = self.row_mut(index)?;
        if r.dead.is_some() {
            r.counts.tx_dead += 1;
            return Some(false);
        }
        Some(true)
    }

    /// Whether `index` names a link that lives (for tests).
    #[cfg(test)]
    pub(crate) fn alive(&self, index: u32) -> bool {
        self.row(index).is_some_and(|r| r.dead.is_none())
    }

    /// The link `index` died (seen by a look at it, a push or a pop):
    /// remember why.
    fn died(r: &mut Row, why: Death) {
        if r.dead.is_none() {
            r.dead = Some(why);
        }
    }

    /// Look at every live link now: their peers' flags and processes, and
    /// the heartbeats of those that messages wait for. A link whose peer
    /// became known gets its pidfd watched.
    pub(crate) fn check_all(&mut self, now: Instant) {
        self.next_check = now + CHECK_EVERY;
        let wake = self.wake.as_ref();
        for (slot, r) in self.rows.iter_mut().enumerate() {
            let Some(r) = r.as_mut().filter(|r| r.dead.is_none()) else {
                continue;
            };
            if let PeerState::Dead(why) = r.link.check(now) {
                Self::died(r, why);
                continue;
            }
            if !r.watched {
                if let (Some(w), Some(fd)) = (wake, r.link.death_fd()) {
                    r.watched = w.epoll.add_edge(fd.as_raw_fd(), slot as u64).is_ok();
                }
            }
        }
    }

    /// The engine's poller says the table's epoll set is ready: a doorbell
    /// (the next turn takes what came) or a peer's process that exited.
    pub(crate) fn woken(&mut self) {
        let Some(w) = self.wake.as_mut() else {
            return;
        };
        let exited =
            w.epoll.wait(&mut w.ready, 0).is_ok() && w.ready.iter().any(|&t| t != DOORBELL);
        if exited {
            self.check_all(Instant::now());
        }
    }

    /// When the engine, asleep, must look at the links: while messages
    /// wait for a peer (its stall clock) or a peer's process is not yet
    /// known (then watched by its pidfd, when it is another process).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        let needed = self
            .rows
            .iter()
            .flatten()
            .any(|r| r.dead.is_none() && (r.link.peer_pid() == 0 || r.link.depth() > 0));
        needed.then_some(self.next_check)
    }

    /// Say to every live link's peer that this adapter sleeps (`on`) or
    /// not: a peer that sends then rings the doorbell. The links' fences
    /// are symmetric: the full fence the dispatcher issues after arming
    /// and before its last look is the handshake's.
    pub(crate) fn arm(&self, on: bool) {
        if self.held == 0 {
            return;
        }
        for r in self.rows.iter().flatten() {
            if r.dead.is_none() {
                r.link.arm(on);
            }
        }
    }

    /// Join: refused at `by`'s cap, else [`Peers::attach`].
    #[cfg(test)]
    fn join(
        &mut self,
        poller: &Poller,
        by: Joiner,
        seg: OwnedFd,
        side: u8,
        peer_doorbell: Option<EventFd>,
    ) -> Result<(u32, OwnedFd), ErrorCode> {
        if self.over_cap(by).is_some() {
            return Err(ErrorCode::ObjectQuota);
        }
        self.attach(poller, by, seg, side, peer_doorbell)
    }

    /// Attach `side` of the peer segment `seg` for `by` (whose caps the
    /// caller checked, [`Peers::over_cap`]), give the link a slot and an
    /// index, and watch it. Returns the index and the adapter's doorbell
    /// (a copy, for the peer).
    fn attach(
        &mut self,
        poller: &Poller,
        by: Joiner,
        seg: OwnedFd,
        side: u8,
        peer_doorbell: Option<EventFd>,
    ) -> Result<(u32, OwnedFd), ErrorCode> {
        let slot = self.free_slot().ok_or(ErrorCode::NoResources)?;
        if self.wake.is_none() {
            let epoll = Epoll::new().map_err(|_| ErrorCode::NoResources)?;
            let doorbell = EventFd::new().map_err(|_| ErrorCode::NoResources)?;
            epoll
                .add_edge(doorbell.fd().as_raw_fd(), DOORBELL)
                .map_err(|_| ErrorCode::NoResources)?;
            poller
                .add(epoll.fd().as_raw_fd(), Token::Peers)
                .map_err(|_| ErrorCode::NoResources)?;
            self.wake = Some(Wake {
                epoll,
                doorbell,
                ready: Vec::with_capacity(PEERS_PER_ADAPTER + 1),
            });
        }
        let Some(w) = &self.wake else {
            return Err(ErrorCode::NoResources);
        };
        let ours = w
            .doorbell
            .fd()
            .try_clone()
            .map_err(|_| ErrorCode::NoResources)?;
        let mut link = PeerLink::attach(seg, side as usize, self.cfg).map_err(|e| match e {
            AttachError::Io(_) => ErrorCode::NoResources,
            _ => ErrorCode::BadPeer,
        })?;
        if let Some(d) = peer_doorbell {
            link.set_peer_doorbell(d);
        }
        self.generation = if self.generation >= GEN_MAX {
            1
        } else {
            self.generation + 1
        };
        let index = self.generation << SLOT_BITS | slot as u32;
        if self.rows.len() <= slot {
            self.rows.resize_with(slot + 1, || None);
        }
        if self.rows[slot].is_none() {
            self.held += 1;
        }
        self.rows[slot] = Some(Row {
            index,
            link,
            proc: by.proc,
            uid: by.uid,
            watched: false,
            dead: None,
            counts: RtCounts::default(),
        });
        self.check_all(Instant::now());
        Ok((index, ours))
    }

    /// Whether `by` may join no more links: the cap it is at (its
    /// process's or its user's), as the refusal is counted. Live links
    /// count, after a look (a link whose peer died since counts for no
    /// one).
    fn over_cap(&mut self, by: Joiner) -> Option<EngineCounter> {
        self.check_all(Instant::now());
        let live = || self.rows.iter().flatten().filter(|r| r.dead.is_none());
        if live().filter(|r| r.proc == by.proc).count() >= PEERS_PER_PROCESS {
            Some(EngineCounter::QuotaRefusedPeersProcess)
        } else if live().filter(|r| r.uid == by.uid).count() >= PEERS_PER_USER {
            Some(EngineCounter::QuotaRefusedPeersUser)
        } else {
            None
        }
    }

    /// A free slot: an empty one, or else that of the dead link joined
    /// first.
    fn free_slot(&self) -> Option<usize> {
        if let Some(s) = self.rows.iter().position(|r| r.is_none()) {
            return Some(s);
        }
        if self.rows.len() < PEERS_PER_ADAPTER {
            return Some(self.rows.len());
        }
        self.rows
            .iter()
            .enumerate()
            .filter_map(|(s, r)| Some((s, r.as_ref()?)))
            .filter(|(_, r)| r.dead.is_some())
            .min_by_key(|(_, r)| r.index >> SLOT_BITS)
            .map(|(s, _)| s)
    }

    /// Forget link `index` for user `uid` (its joining user, or root):
    /// its side closes (its peer sees it dead).
    fn leave(&mut self, index: u32, uid: Option<u32>) -> Result<(), ErrorCode> {
        let slot = (index & ((1 << SLOT_BITS) - 1)) as usize;
        if self.row_of(index, uid).is_none() {
            return Err(ErrorCode::NoSuchPeer);
        }
        self.rows[slot] = None;
        self.held -= 1;
        Ok(())
    }

    /// A row per link, by index.
    pub(crate) fn listing(&self) -> PeerListing {
        let mut peers: Vec<PeerInfo> = self.rows.iter().flatten().map(info).collect();
        peers.sort_by_key(|p| p.index);
        PeerListing { peers }
    }
}

/// What the listing says of row `r`.
fn info(r: &Row) -> PeerInfo {
    let s = r.link.stats();
    let c = &r.counts;
    let mut drops: Vec<(String, u64)> = PeerDrop::ALL
        .iter()
        .map(|d| (d.name().to_string(), s.dropped(*d)))
        .collect();
    drops.extend([
        ("tx_dead".to_string(), c.tx_dead),
        ("tx_full".to_string(), c.tx_full),
        ("tx_invalid".to_string(), c.tx_invalid),
        ("rx_no_slot".to_string(), c.rx_no_slot),
        ("rx_no_buffer".to_string(), c.rx_no_buffer),
        ("rx_queue_full".to_string(), c.rx_queue_full),
        ("rx_bad_port".to_string(), c.rx_bad_port),
    ]);
    drops.retain(|(_, n)| *n > 0);
    PeerInfo {
        index: r.index,
        side: r.link.side() as u8,
        state: if r.dead.is_some() { "dead" } else { "alive" }.into(),
        reason: r.dead.map(death_name).unwrap_or_default(),
        peer_pid: r.link.peer_pid(),
        uid: r.uid,
        depth: r.link.depth(),
        msgs_in: s.received,
        msgs_out: s.sent,
        port_out: c.port_out,
        drops,
    }
}

/// Why a link is dead, as its row says it.
fn death_name(d: Death) -> String {
    match d {
        Death::Closed => "closed".into(),
        Death::Exited => "exited".into(),
        Death::Stalled => "stalled".into(),
        Death::Broken(b) => format!(
            "broken: {}",
            match b {
                Broken::Head => "head",
                Broken::Tail => "tail",
                Broken::DataTail => "data_tail",
                Broken::BulkLen => "bulk_len",
            }
        ),
    }
}

/// A peer's doorbell a client handed over: an eventfd (anything else
/// is refused), made non-blocking, so that ringing it never waits.
fn doorbell_of(fd: OwnedFd) -> Result<EventFd, ErrorCode> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|_| ErrorCode::BadRequest)?;
    if link.as_os_str() != "anon_inode:[eventfd]" {
        return Err(ErrorCode::BadRequest);
    }
    unet_sys::set_nonblocking(fd.as_raw_fd()).map_err(|_| ErrorCode::BadRequest)?;
    Ok(EventFd::from_fd(fd))
}

/// Do what a peer request asks (the caller checked the client may):
/// the reply and the descriptor it carries, if any. A join refused for a
/// cap is counted in `counters`.
pub(crate) fn handle(
    peers: &mut Peers,
    poller: &Poller,
    clients: &dyn Clients,
    counters: &Counters,
    ci: ClientId,
    req: Request,
    fds: &mut Vec<OwnedFd>,
) -> (Reply, Option<OwnedFd>) {
    let err = |c| (Reply::Error(c), None);
    let uid = clients.uid(ci);
    match req {
        Request::PeerJoin { side } => {
            if fds.is_empty() || fds.len() > 2 {
                return err(ErrorCode::BadRequest);
            }
            let seg = fds.remove(0);
            let doorbell = match fds.pop().map(doorbell_of).transpose() {
                Ok(d) => d,
                Err(c) => return err(c),
            };
            let by = Joiner {
                proc: clients.proc_key(ci),
                uid: uid.unwrap_or(u32::MAX),
            };
            if let Some(c) = peers.over_cap(by) {
                counters.engine(c, 1);
                return err(ErrorCode::ObjectQuota);
            }
            match peers.attach(poller, by, seg, side, doorbell) {
                Ok((index, fd)) => (Reply::PeerJoined { index }, Some(fd)),
                Err(c) => err(c),
            }
        }
        Request::PeerDoorbell { index } => {
            let d = match fds.pop().map(doorbell_of) {
                Some(Ok(d)) => d,
                Some(Err(c)) => return err(c),
                None => return err(ErrorCode::BadRequest),
            };
            match peers.row_of(index, uid) {
                Some(r) => {
                    r.link.set_peer_doorbell(d);
                    peers.check_all(Instant::now());
                    (Reply::Ok, None)
                }
                None => err(ErrorCode::NoSuchPeer),
            }
        }
        Request::PeerLeave { index } => match peers.leave(index, uid) {
            Ok(()) => (Reply::Ok, None),
            Err(c) => err(c),
        },
        Request::PeerList => {
            // A look first: the rows say what the peers took and who died.
            peers.check_all(Instant::now());
            let bytes = peers.listing().encode();
            match crate::spine::setup::memory_file(&bytes) {
                Ok(fd) => (
                    Reply::PeerListing {
                        len: bytes.len() as u32,
                    },
                    Some(fd),
                ),
                Err(_) => err(ErrorCode::NoResources),
            }
        }
        _ => err(ErrorCode::BadRequest),
    }
}

/// A turn's intake: what waits on each link (at most [`RX_PER_TURN`] a
/// link) becomes `PeerRx` events; now and then, a look at every link.
/// Returns the messages taken. `now`: the adapter's ports, to place a
/// [`SYS_PORT_OUT`] frame on its port's ring at once ([`port_out`]).
pub(crate) fn take(rt: &mut Rt, mut now: Option<&mut Ports>) -> usize {
    let Rt {
        msgs,
        bufs,
        queue,
        peers,
        ports,
        ..
    } = rt;
    let mut n = 0;
    for r in peers.rows.iter_mut().flatten() {
        if !r.link.has_messages() {
            continue;
        }
        let index = r.index;
        let c = &mut r.counts;
        n += r.link.pop(RX_PER_TURN, |h, args, bulk| {
            if h.handler == SYS_PORT_OUT {
                let parts = RtParts {
                    msgs: &mut *msgs,
                    bufs: &mut *bufs,
                    queue: &mut *queue,
                    ports,
                };
                match port_out(parts, now.as_deref_mut(), args, bulk) {
                    Ok(()) => c.port_out += 1,
                    Err(PortOutRefused::BadPort) => c.rx_bad_port += 1,
                    Err(PortOutRefused::NoBuffer) => c.rx_no_buffer += 1,
                    Err(PortOutRefused::NoSlot) => c.rx_no_slot += 1,
                    Err(PortOutRefused::QueueFull) => c.rx_queue_full += 1,
                    // Counted on the port by reason.
                    Err(PortOutRefused::TxRefused) => {}
                }
                return;
            }
            let buf = if bulk.is_empty() {
                None
            } else {
                match bufs.alloc(bulk) {
                    Some(b) => Some(b),
                    None => {
                        c.rx_no_buffer += 1;
                        queue.count_drop(DropReason::NoBuffer);
                        return;
                    }
                }
            };
            let hdr = AmHeader {
                handler: h.handler,
                src_kind: AM_SRC_PEER,
                src: index,
                bulk_len: bulk.len() as u32,
                ..AmHeader::default()
            };
            match msgs.alloc(hdr, args, buf) {
                Some(m) => {
                    let ev = Event {
                        kind: EventKind::PeerRx,
                        msg: m,
                        arg: index,
                    };
                    if queue.push(ev).is_err() {
                        c.rx_queue_full += 1;
                        msgs.free(m, bufs);
                    }
                }
                None => {
                    if let Some(b) = buf {
                        bufs.release(b);
                    }
                    c.rx_no_slot += 1;
                    queue.count_drop(DropReason::NoSlot);
                }
            }
        });
    }
    // The clock is read every so many turns, and on a turn that took
    // nothing (the engine may be about to sleep, or woke for the look).
    peers.turns = peers.turns.wrapping_add(1);
    if n == 0 || peers.turns.is_multiple_of(CHECK_TURNS) {
        let now = Instant::now();
        if now >= peers.next_check {
            peers.check_all(now);
        }
    }
    n
}

/// Run a `PeerTx` event: put its message on link `ev.arg` (bulk data
/// copied into the link's data area; the peer sees it when the turn
/// ends, [`Peers::publish`]) and free it. A message the link
/// cannot take is dropped and counted, on the link's row and by reason.
pub(crate) fn forward(rt: &mut Rt, ev: Event) {
    let Rt {
        msgs,
        bufs,
        queue,
        peers,
        ..
    } = rt;
    if let Some(m) = msgs.get(ev.msg) {
        match peers.row_mut(ev.arg) {
            None => queue.count_drop(DropReason::BadDest),
            Some(r) if r.dead.is_some() => {
                r.counts.tx_dead += 1;
                queue.count_drop(DropReason::Dead);
            }
            Some(r) => {
                let bulk = m.bulk.and_then(|b| bufs.data(b)).unwrap_or(&[]);
                let first = !r.link.unpublished();
                match r.link.put(m.hdr, m.args(), bulk) {
                    // Published at the end of the turn, once for all
                    // the turn put on the link.
                    Ok(()) if first => peers.unpublished.push(ev.arg),
                    Ok(()) => {}
                    Err(PeerError::Full) => {
                        r.counts.tx_full += 1;
                        queue.count_drop(DropReason::DestFull);
                    }
                    Err(PeerError::Dead(why)) => {
                        Peers::died(r, why);
                        r.counts.tx_dead += 1;
                        queue.count_drop(DropReason::Dead);
                    }
                    Err(PeerError::Invalid(_)) => {
                        r.counts.tx_invalid += 1;
                        queue.count_drop(DropReason::BadDest);
                    }
                }
            }
        }
    }
    msgs.free(ev.msg, bufs);
}

#[cfg(test)]
mod tests;
