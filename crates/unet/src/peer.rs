//! SPINE's peer queues from a client: join two running adapters (two
//! engines on this host, each with its control socket) so that a handler
//! on one sends to a handler on the other (`DEST_PEER | index`) with no
//! host application on the path, leave a queue, and list an adapter's
//! queues.
//!
//! ```no_run
//! use unet::Session;
//! # fn demo() -> Result<(), unet::Error> {
//! let a = Session::connect("/run/unet/a.sock")?;
//! let b = Session::connect("/run/unet/b.sock")?;
//! let pair = unet::peer::join(&a, &b)?;
//! // A handler on A sends to (DEST_PEER << 24) | pair.a, one on B to
//! // (DEST_PEER << 24) | pair.b.
//! for row in a.list_peers()?.peers {
//!     println!("{} {} {}", row.index, row.state, row.depth);
//! }
//! # Ok(()) }
//! ```

use std::os::fd::AsRawFd;

use unet_abi::peer::DEFAULT_PEER_GEOMETRY;
use unet_control::{Reply, Request};
use unet_sys as sys;

use crate::shm::create_peer_segment;
use crate::{Error, Session};

pub use unet_abi::peer::PeerGeometry;
pub use unet_control::peer::{
    PeerInfo, PeerListing, PEERS_PER_ADAPTER, PEERS_PER_PROCESS, PEERS_PER_USER,
};

/// Two adapters joined: the index each gave the queue (`DEST_PEER`'s id
/// on that adapter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerPair {
    /// The index on the first adapter (its handlers send to the second
    /// with it).
    pub a: u32,
    /// The index on the second adapter.
    pub b: u32,
}

/// Join the adapters of sessions `a` and `b` by a peer queue: make the
/// peer segment, hand it to each with its side, and hand each the other's
/// doorbell. Only the engines' owner (or root) may. The queue lives on in
/// the adapters after the calling process ends, until one leaves it or
/// dies; joining the same two again makes a new queue. An adapter
/// refuses a join (`Error::Quota(ErrorCode::ObjectQuota)`) when the
/// calling process has [`PEERS_PER_PROCESS`] live queues joined on it, or
/// its user [`PEERS_PER_USER`] (whichever processes joined them).
pub fn join(a: &Session, b: &Session) -> Result<PeerPair, Error> {
    join_with(a, b, DEFAULT_PEER_GEOMETRY)
}

/// [`join`] with a queue of `geometry` (slots a direction, bytes of bulk
/// data a direction) instead of the default's 256 slots and 256 KiB: a
/// queue that must hold a burst of many bulk messages (a router's frames)
/// asks for more. A geometry the adapters would refuse is refused here
/// (`std::io::ErrorKind::InvalidInput`).
pub fn join_with(a: &Session, b: &Session, geometry: PeerGeometry) -> Result<PeerPair, Error> {
    let seg = create_peer_segment(geometry, sys::random_u64() as u32)?;
    let (ia, door_a) = join_side(a, 0, &seg, None)?;
    let (ib, door_b) = match join_side(b, 1, &seg, Some(&door_a)) {
        Ok(ok) => ok,
        Err(e) => {
            let _ = a.leave_peer(ia);
            return Err(e);
        }
    };
    let req = Request::PeerDoorbell { index: ia };
    let r = a.inner.request_with_fds(&req, &[door_b.as_raw_fd()])?.0;
    if let Err(e) = expect_ok(r, "a doorbell") {
        let _ = a.leave_peer(ia);
        let _ = b.leave_peer(ib);
        return Err(e);
    }
    Ok(PeerPair { a: ia, b: ib })
}

/// Join `side` of `seg` on `s`'s adapter (giving it the peer's doorbell
/// if known): the index and the adapter's doorbell.
fn join_side(
    s: &Session,
    side: u8,
    seg: &std::os::fd::OwnedFd,
    door: Option<&std::os::fd::OwnedFd>,
) -> Result<(u32, std::os::fd::OwnedFd), Error> {
    let mut fds = vec![seg.as_raw_fd()];
    fds.extend(door.map(|d| d.as_raw_fd()));
    let (r, mut got) = s
        .inner
        .request_with_fds(&Request::PeerJoin { side }, &fds)?;
    match r {
        Reply::PeerJoined { index } if !got.is_empty() => Ok((index, got.remove(0))),
        Reply::Error(c) => Err(c.into()),
        r => Err(Error::Protocol(format!(
            "unexpected answer to a peer join: {r:?}"
        ))),
    }
}

fn expect_ok(r: Reply, what: &str) -> Result<(), Error> {
    match r {
        Reply::Ok => Ok(()),
        Reply::Error(c) => Err(c.into()),
        r => Err(Error::Protocol(format!(
            "unexpected answer to {what}: {r:?}"
        ))),
    }
}

impl Session {
    /// Leave peer queue `index` of this adapter: it closes its side (the
    /// peer sees the queue dead) and forgets it. Only the user who joined
    /// it (from any process) or root may; to anyone else it is
    /// `ErrorCode::NoSuchPeer`.
    pub fn leave_peer(&self, index: u32) -> Result<(), Error> {
        let r = self.inner.request(&Request::PeerLeave { index })?.0;
        expect_ok(r, "a peer leave")
    }

    /// This adapter's peer queues: index, state (and why dead), depth,
    /// messages in and out, drops by reason.
    pub fn list_peers(&self) -> Result<PeerListing, Error> {
        let (r, mut fds) = self.inner.request(&Request::PeerList)?;
        match r {
            Reply::PeerListing { len } if !fds.is_empty() => {
                let b = sys::Segment::read_untrusted(&fds.remove(0), len as usize)?;
                PeerListing::decode(&b).map_err(Error::Protocol)
            }
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to a peer list: {r:?}"
            ))),
        }
    }
}
