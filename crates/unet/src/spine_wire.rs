//! SPINE's links over the UDP wire, from a host application: join two
//! adapters (engines, each with its UDP port) so that a handler on one
//! sends to a handler on the other (`DEST_WIRE | link`), with no host
//! application on the path.
//!
//! One side listens ([`Session::spine_link_listen`]: its link id and a
//! token), the other connects to the listening adapter's UDP address with
//! that token ([`Session::spine_link_connect`]: its link id, once the
//! other side accepted). Each side's link id is what its adapter's
//! handlers name the link by. Delivery over a link is best effort, as
//! SPINE's wire is: a lost or refused message is counted, not resent.
//!
//! ```no_run
//! use std::time::Duration;
//! use unet::Session;
//! # fn demo(a: &Session, b: &Session) -> Result<(), unet::Error> {
//! let (link_a, token) = a.spine_link_listen(0)?;
//! let addr = a.udp_addr().expect("adapter A has a wire");
//! let link_b = b.spine_link_connect(addr, token, Duration::from_secs(5))?;
//! // Handlers of A send to `DEST_WIRE << 24 | link_a`, those of B to
//! // `DEST_WIRE << 24 | link_b`.
//! # let _ = (link_a, link_b); Ok(()) }
//! ```

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use unet_control::{ErrorCode, Reply, Request};
use unet_sys as sys;

use crate::{Error, Session};

pub use unet_control::spine_wire::{LinkInfo, LinkListing};

impl Session {
    /// Make a link that waits for another adapter to connect, showing
    /// `token` (0: the engine picks one). Returns the link's id and the
    /// token to hand to the connecting side. [`Error::Quota`] when the
    /// process holds 4 links; `NoResources` when the adapter holds 16;
    /// `NoWire` when the engine has no UDP port.
    pub fn spine_link_listen(&self, token: u64) -> Result<(u32, u64), Error> {
        match self.inner.request(&Request::SpineLinkListen { token })?.0 {
            Reply::SpineLink { link, token } => Ok((link, token)),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to a link listen: {r:?}"
            ))),
        }
    }

    /// Make a link to the adapter at `peer` (its UDP address) that
    /// listens with `token`, and wait up to `timeout` for it to accept.
    /// Returns the link's id. If it refuses (nobody listens with that
    /// token, or it holds its most links), `Engine(Refused)`; if it does
    /// not answer in time, `Engine(Unreachable)`; the link is closed then.
    pub fn spine_link_connect(
        &self,
        peer: SocketAddr,
        token: u64,
        timeout: Duration,
    ) -> Result<u32, Error> {
        let link = match self
            .inner
            .request(&Request::SpineLinkConnect { peer, token })?
            .0
        {
            Reply::SpineLink { link, .. } => link,
            Reply::Error(c) => return Err(c.into()),
            r => {
                return Err(Error::Protocol(format!(
                    "unexpected answer to a link connect: {r:?}"
                )))
            }
        };
        let end = Instant::now() + timeout;
        let mut pause = Duration::from_micros(50);
        loop {
            let state = self
                .spine_links()?
                .link(link)
                .map(|l| l.state.clone())
                .unwrap_or_default();
            let failed = match state.as_str() {
                "up" => return Ok(link),
                "connecting" if Instant::now() < end => None,
                "connecting" => Some(ErrorCode::Unreachable),
                _ => Some(ErrorCode::Refused),
            };
            if let Some(c) = failed {
                let _ = self.spine_link_close(link);
                return Err(c.into());
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(5));
        }
    }

    /// Close link `link` (one of this user's): the peer is told.
    pub fn spine_link_close(&self, link: u32) -> Result<(), Error> {
        match self.inner.request(&Request::SpineLinkClose { link })?.0 {
            Reply::Ok => Ok(()),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to a link close: {r:?}"
            ))),
        }
    }

    /// The adapter's links (this user's; every one for root): state,
    /// peer, messages and bytes in and out, drops by reason; and the
    /// adapter's drops of frames that named no link.
    pub fn spine_links(&self) -> Result<LinkListing, Error> {
        let (r, mut fds) = self.inner.request(&Request::SpineLinks)?;
        match r {
            Reply::SpineLinkListing { len } if !fds.is_empty() => {
                let b = sys::Segment::read_untrusted(&fds.remove(0), len as usize)?;
                LinkListing::decode(&b).map_err(Error::Protocol)
            }
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to a link listing: {r:?}"
            ))),
        }
    }
}
