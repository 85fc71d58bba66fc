//! VIA's tables: memory regions, VIs, the discriminators processes listen
//! on and the connection requests waiting for an answer.
//!
//! A VI connection is granted here and nowhere else: a process asks to
//! connect to a discriminator, the process listening on it is told
//! ([`Reply::ViRequest`](unet_control::Reply::ViRequest)) and accepts or
//! rejects; only then does either side get a VI. Two local VIs share a
//! direct connection segment (made by [`DirectConns`](crate::direct)),
//! which only those two processes map: the engine is out of their data
//! path, and a process can send only on the VIs it was handed.
//!
//! Nothing here trusts a client: every id a request names is looked up
//! and checked against the asking client before use, and each process's
//! regions and connections count against its memory quota.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use unet_control::ViParams;
use unet_sys::Segment;

use crate::vi_path::EngineVi;
pub(crate) use crate::vi_path::Region;

use crate::endpoints::ClientId;

/// Most connection requests waiting on one discriminator (VIA's backlog).
pub(crate) const BACKLOG: usize = 64;
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
    pub pending: HashMap<u32, Pending>,
    /// The VIs the engine carries (to other engines), by VI id.
    pub engine: HashMap<u32, EngineVi>,
    /// Connections asked of other engines, by request id.
    pub opens: HashMap<u32, RemoteOpen>,
    /// Requests from other engines accepted here: (their address, their
    /// request id) → our VI, so a retransmitted request gets the answer
    /// again.
    pub answered: HashMap<(SocketAddr, u32), u32>,
    next_region: u32,
    next_vi: u32,
    next_request: u32,
    next_open: u32,
}

/// The bit that marks a UDM link's id (`udm_remote`): links share
/// the wire's VI id space, and the VI ids the engine hands out never have
/// it.
pub(crate) const LINK_BIT: u32 = 1 << 31;

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
    /// Enter a region; its handle.
    pub(crate) fn add_region(&mut self, owner: ClientId, seg: Segment, len: u64) -> u32 {
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
        let id = next_id(&mut self.next_vi, &self.vis);
        self.vis.insert(
            id,
            Vi {
                owner,
                conn_id,
                peer: 0,
                side_b: false,
                attrs,
            },
        );
        id
    }

    /// Enter a connection asked of another engine; its request id.
    pub(crate) fn add_open(&mut self, o: RemoteOpen) -> u32 {
        let id = next_id(&mut self.next_open, &self.opens);
        self.opens.insert(id, o);
        id
    }

    /// Enter a connection request; its id.
    pub(crate) fn add_pending(&mut self, p: Pending) -> u32 {
        let id = next_id(&mut self.next_request, &self.pending);
        self.pending.insert(id, p);
        id
    }

    /// Requests waiting on discriminator `tag`.
    pub(crate) fn backlog(&self, tag: u64) -> usize {
        self.pending.values().filter(|p| p.tag == tag).count()
    }

    /// Take the requests past their deadline.
    pub(crate) fn take_expired(&mut self, now: Instant) -> Vec<Pending> {
        let ids: Vec<u32> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(&id, _)| id)
            .collect();
        ids.into_iter()
            .filter_map(|id| self.pending.remove(&id))
            .collect()
    }

    /// What each client is charged for here: its regions' bytes and the
    /// segments of its engine-carried VIs.
    pub(crate) fn charges(&self) -> impl Iterator<Item = (ClientId, u64)> + '_ {
        let r = self.regions.values().map(|r| (r.owner, r.len));
        let v = self
            .engine
            .values()
            .map(|v| (v.owner, v.seg.len() as u64 + v.held_budget));
        r.chain(v)
    }

    /// The earliest deadline of a waiting request or open.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let p = self.pending.values().map(|p| p.deadline);
        let o = self.opens.values().map(|o| o.next_try);
        p.chain(o).min()
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
