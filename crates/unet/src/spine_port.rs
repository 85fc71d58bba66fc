//! SPINE's raw-frame ports, from a host application: put an adapter on a
//! Linux network interface, so that every frame the interface receives
//! goes to an extension handler (a bulk message from `AM_SRC_PORT`, whose
//! source is the port) and handlers send frames out of it
//! (`DEST_PORT << 24 | port`: the message's arguments followed by its
//! bulk data are the frame), with no host application on the path.
//!
//! Only the engine's user (or root) may open a port, for a handler of
//! one of its user's extensions; the port closes when the session that
//! opened it goes.
//!
//! ```no_run
//! use unet::Session;
//! # fn demo(s: &Session, handler: u16) -> Result<(), unet::Error> {
//! let p0 = s.spine_port_open("veth0", handler)?;
//! let p1 = s.spine_port_open("veth1", handler)?;
//! let l = s.spine_ports()?;
//! println!("{} frames in on port {p0}", l.port(p0).map_or(0, |p| p.frames_in));
//! # let _ = p1; Ok(()) }
//! ```

use unet_control::{Reply, Request};
use unet_sys as sys;

use crate::{Error, Session};

pub use unet_control::spine_port::{PortInfo, PortListing};

impl Session {
    /// Open a port on network interface `interface` whose frames go to
    /// extension handler `handler`. Returns the port's id (`DEST_PORT`'s
    /// id for the adapter's handlers). `NoSuchInterface` when there is no
    /// such interface; `NoSuchExtension` when no extension of this user
    /// installed `handler`; `NotOwner` unless the session runs as the
    /// engine's user or root; [`Error::Quota`] when the process holds 4
    /// ports; `NoResources` when the adapter holds 8.
    pub fn spine_port_open(&self, interface: &str, handler: u16) -> Result<u32, Error> {
        let req = Request::SpinePortOpen {
            interface: interface.to_string(),
            handler,
        };
        match self.inner.request(&req)?.0 {
            Reply::SpinePort { port } => Ok(port),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to a port open: {r:?}"
            ))),
        }
    }

    /// Close port `port` (one of this user's).
    pub fn spine_port_close(&self, port: u32) -> Result<(), Error> {
        match self.inner.request(&Request::SpinePortClose { port })?.0 {
            Reply::Ok => Ok(()),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to a port close: {r:?}"
            ))),
        }
    }

    /// The adapter's ports (this user's; every one for root): interface,
    /// handler, frames and bytes in and out, drops by reason.
    pub fn spine_ports(&self) -> Result<PortListing, Error> {
        let (r, mut fds) = self.inner.request(&Request::SpinePorts)?;
        match r {
            Reply::SpinePortListing { len } if !fds.is_empty() => {
                let b = sys::Segment::read_untrusted(&fds.remove(0), len as usize)?;
                PortListing::decode(&b).map_err(Error::Protocol)
            }
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to a port listing: {r:?}"
            ))),
        }
    }
}
