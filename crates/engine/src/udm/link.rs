//! The state of the links that carry UDM jobs between engines: the
//! types only, kept by `udm::Jobs`; what moves them is
//! `udm::remote`.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Instant;

use crate::unet::endpoints::ClientId;
use crate::via::vi_path::RemoteVi;
use crate::wire::frame::UdmAccept;
use crate::wire::port::ConnIn;
use crate::wire::reliable::{RelReceiver, RelSender};

/// A link's receive holding bound and window (wire messages).
pub(crate) const HOLD: u16 = 64;
/// Most bytes of records in one wire message (one datagram on Ethernet).
pub(crate) const BATCH_MAX: usize = 1280;
/// Out-of-order wire messages a link keeps.
pub(crate) const AHEAD_MAX: usize = 64;
/// The most bytes a link keeps: `HOLD` wire messages accepted and not
/// delivered, `AHEAD_MAX` arrived after a gap, each at most `BATCH_MAX`.
pub(crate) const LINK_KEPT_MAX: usize = (HOLD as usize + AHEAD_MAX) * BATCH_MAX;
const _: () = assert!(LINK_KEPT_MAX == 160 << 10, "docs/via.md says 160 KiB");
/// What a link is charged to its job's payer: what it keeps
/// ([`LINK_KEPT_MAX`]) and what it sends and keeps until acknowledged
/// (`HOLD` wire messages of at most `BATCH_MAX` bytes).
pub(crate) const LINK_CHARGE: u64 = (LINK_KEPT_MAX + HOLD as usize * BATCH_MAX) as u64;
/// One job's link to another engine.
pub(crate) struct Link {
    /// The job here (None until a joining engine made its replica).
    pub(crate) job: Option<u32>,
    /// While the replica is being made (on the set-up thread): the joins
    /// the home granted meanwhile, first the one that started it, handed
    /// to their clients once it is ready.
    pub(crate) making: Option<Vec<(JoinOpen, UdmAccept)>>,
    /// On an engine that joined a job of another: the job's id at its
    /// home.
    pub(crate) home_job: Option<u32>,
    /// The other end (`vi` and `peer_token` known once connected).
    pub(crate) peer: RemoteVi,
    pub(crate) connected: bool,
    pub(crate) tx: RelSender,
    pub(crate) rx: RelReceiver,
    /// Wire messages sent and not yet acknowledged.
    pub(crate) inflight: VecDeque<(u32, Vec<u8>)>,
    /// The wire message being filled.
    pub(crate) batch: Vec<u8>,
    /// Wire messages accepted, in order, not wholly delivered, and the
    /// offset of the next record in the first.
    pub(crate) inq: VecDeque<Vec<u8>>,
    pub(crate) in_off: usize,
    /// Wire messages that arrived after a gap.
    pub(crate) ahead: Vec<(u32, Vec<u8>)>,
    /// Ranks told gone to the peer (a bit each).
    pub(crate) announced: u64,
    /// The link is to go (broken, closed by the peer, its job gone), and
    /// whether the peer is to be told.
    pub(crate) dead: Option<bool>,
}

/// A join asked of a home engine for a client of this one.
pub(crate) struct JoinOpen {
    pub(crate) client: ClientId,
    pub(crate) req_id: u32,
    pub(crate) home: SocketAddr,
    pub(crate) job: u32,
    pub(crate) key: u64,
    pub(crate) rank: u32,
    pub(crate) link: u32,
    pub(crate) next_try: Instant,
    pub(crate) tries: u32,
}

/// Every link of the engine's jobs.
#[derive(Default)]
pub(crate) struct Links {
    pub(crate) links: HashMap<u32, Link>,
    /// For each job with links, rank → the link it lives behind (0: here).
    pub(crate) routes: HashMap<u32, Vec<u32>>,
    /// Joins asked of home engines, by request id.
    pub(crate) opens: HashMap<u32, JoinOpen>,
    /// The set-up frames for links (joins, their answers, closes), taken
    /// from the links' inbox of the wire's port.
    pub(crate) setup: Vec<ConnIn>,
    /// Peers found silent.
    pub(crate) silent: Vec<SocketAddr>,
    pub(crate) next_link: u32,
    pub(crate) next_open: u32,
}
