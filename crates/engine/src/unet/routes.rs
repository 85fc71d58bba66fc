//! Routes: what a channel tag of an endpoint leads to.
//!
//! Every channel an endpoint holds is a [`Route`], granted by the engine at
//! set-up (never read from shared memory). A message sent on a channel goes
//! the way its route says, in one place: the data path's `send`. A
//! new kind of channel (VIA connections, UDM's rings, SPINE's handlers)
//! adds a variant here, its arm there, and its set-up; nothing else
//! matches on the kind.

use std::net::SocketAddr;

/// What a channel tag of an endpoint leads to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// Unused tag.
    Free,
    /// A local peer through the engine.
    Local(Peer),
    /// A local peer with a direct connection between the two processes:
    /// the engine set it up and stays out of its data path, but still
    /// delivers what the endpoint pushes to its send ring, through the
    /// peer's queues.
    Direct {
        /// The connection (its segment is the engine's to tear down).
        conn_id: u32,
        /// The other end.
        peer: Peer,
    },
    /// A peer behind the wire.
    Remote(RemotePeer),
    /// Waiting for a remote engine to accept.
    Opening,
    /// The peer is gone; sends fail until the application closes the tag.
    Gone,
}

/// The other end of a local channel: an endpoint of this engine (by table
/// index and id, so a reused slot is never mistaken for it) and its tag
/// for the channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Peer {
    pub idx: usize,
    pub id: u32,
    pub chan: u16,
}

/// The other end of a remote channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RemotePeer {
    /// The peer engine's wire address.
    pub addr: SocketAddr,
    /// The endpoint there and its tag for the channel.
    pub ep: u32,
    pub chan: u16,
    /// The token the peer chose: our frames to it carry it.
    pub peer_token: u64,
    /// The token we chose: its frames to us must carry it.
    pub my_token: u64,
    /// Id of the next message we send on it.
    pub next_msg: u32,
    /// Whether the peer is known to hold its end: always for a channel
    /// we opened; for one we accepted, once its Confirm or a first
    /// message came (until then it is half-open).
    pub confirmed: bool,
}

/// What closing a route needs beyond freeing its tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Teardown {
    /// Nothing (the tag was free, opening or already gone).
    None,
    /// Tell a local peer its channel is gone.
    Peer(Peer),
    /// Close a direct connection, then tell its peer.
    Direct { conn_id: u32, peer: Peer },
    /// Tell a remote engine the channel is closed.
    Remote(RemotePeer),
}

impl Route {
    /// What has to be done when this route goes away.
    pub(crate) fn teardown(self) -> Teardown {
        match self {
            Route::Local(p) => Teardown::Peer(p),
            Route::Direct { conn_id, peer } => Teardown::Direct { conn_id, peer },
            Route::Remote(r) => Teardown::Remote(r),
            Route::Free | Route::Opening | Route::Gone => Teardown::None,
        }
    }

    /// Whether the tag is in use (anything but [`Route::Free`]).
    pub(crate) fn in_use(&self) -> bool {
        !matches!(self, Route::Free)
    }

    /// Whether this is a direct connection.
    pub(crate) fn is_direct(&self) -> bool {
        matches!(self, Route::Direct { .. })
    }
}
