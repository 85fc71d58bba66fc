//! SPINE from a host application: load extensions (JIVE classes whose
//! initialiser installs active-message handlers) onto the adapter, send
//! active messages to their handlers from an endpoint, and read the
//! ones handlers send back (a [`Recv`](crate::Recv) whose
//! [`am`](crate::Recv::am) is true).
//!
//! ```no_run
//! use unet::{Engine, EngineConfig, Session, EndpointConfig};
//! use unet::spine::{split_am, ExtensionOptions};
//! # fn demo(class: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
//! let engine = Engine::start(EngineConfig::default())?;
//! let session = Session::embedded(&engine)?;
//! let ext = session.load_extension(class, ExtensionOptions::named("echo"))?;
//! let mut ep = session.create_endpoint(EndpointConfig::default())?;
//! ep.send_am(ext.handlers[0], b"ping", &[])?;
//! let mut buf = [0u8; 512];
//! let r = ep.recv(&mut buf, None)?;
//! assert!(r.am());
//! let (args, _bulk) = split_am(&buf[..r.len]).ok_or("bad framing")?;
//! # let _ = args; Ok(()) }
//! ```

use std::os::fd::AsRawFd;

use unet_abi::spine::{AM_ARGS_MAX, AM_FRAME_PREFIX, RECV_AM, SEND_AM, SPINE_MAX_HANDLER};
use unet_abi::RecvDesc;
use unet_control::{Reply, Request};
use unet_sys as sys;

use crate::{Channel, Endpoint, Error, SendError, Session};

pub use unet_control::spine::{ExportInfo, ExtInfo, HandlerInfo, SpineListing};

/// How to load an extension.
#[derive(Clone, Debug, Default)]
pub struct ExtensionOptions {
    /// A name for listings (at most 64 bytes).
    pub name: String,
    /// Time budget of one handler invocation, µs (0: the engine's
    /// default, 10 µs).
    pub budget_us: u32,
    /// The argument of the extension's `init(int)`.
    pub arg: i32,
    /// Domains granted besides `spine`.
    pub domains: Vec<String>,
}

impl ExtensionOptions {
    /// Defaults, with a name.
    pub fn named(name: &str) -> ExtensionOptions {
        ExtensionOptions {
            name: name.to_string(),
            ..ExtensionOptions::default()
        }
    }
}

/// A loaded extension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extension {
    /// Its id on the adapter.
    pub id: u32,
    /// The handler numbers its initialiser installed, in order.
    pub handlers: Vec<u16>,
}

impl Session {
    /// Load an extension: `class` is its class file. Refused with
    /// [`Error::Rejected`] and the exact reason (a rule of the verifier,
    /// a handler number out of range or taken, an initialiser that
    /// faulted), or [`Error::Quota`] when the process holds 8 already.
    pub fn load_extension(&self, class: &[u8], opts: ExtensionOptions) -> Result<Extension, Error> {
        let seg = sys::Segment::create("unet-extension", class.len().max(1))?;
        // The fresh segment has at least class.len() bytes.
        let copied = crate::shm::write(&seg, 0, class);
        debug_assert!(copied);
        let req = Request::SpineLoad {
            len: class.len() as u32,
            budget_us: opts.budget_us,
            arg: opts.arg,
            name: opts.name,
            domains: opts.domains,
        };
        match self
            .inner
            .request_with_fds(&req, &[seg.fd().as_raw_fd()])?
            .0
        {
            Reply::SpineLoaded { id, handlers } => Ok(Extension { id, handlers }),
            Reply::Rejected(why) => Err(Error::Rejected(why)),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to a load: {r:?}"
            ))),
        }
    }

    /// Unload extension `id` (one of this user's). An extension that
    /// exports to loaded extensions is not unloaded: [`Error::Rejected`]
    /// names them.
    pub fn unload_extension(&self, id: u32) -> Result<(), Error> {
        match self.inner.request(&Request::SpineUnload { id })?.0 {
            Reply::Ok => Ok(()),
            Reply::Rejected(why) => Err(Error::Rejected(why)),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to an unload: {r:?}"
            ))),
        }
    }

    /// The adapter's extensions (this user's; every one for root) with
    /// their handlers' statistics, and the runtime's totals.
    pub fn list_extensions(&self) -> Result<SpineListing, Error> {
        let (r, mut fds) = self.inner.request(&Request::SpineList)?;
        match r {
            Reply::SpineListing { len } if !fds.is_empty() => {
                let b = sys::Segment::read_untrusted(&fds.remove(0), len as usize)?;
                SpineListing::decode(&b).map_err(Error::Protocol)
            }
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to a list: {r:?}"
            ))),
        }
    }
}

impl Endpoint {
    /// Send an active message to handler `handler` of the adapter's
    /// extensions: `args` (at most 240 bytes) and, for a bulk message,
    /// `bulk` (empty for a small one). Returns the send descriptor's
    /// position: [`Endpoint::send_status`] later says `SpineFull` (retry)
    /// or `SpineRefused` (no extension has that handler, or the bulk part
    /// is larger than the engine's buffers) if SPINE did not take it.
    pub fn send_am(&mut self, handler: u16, args: &[u8], bulk: &[u8]) -> Result<u64, SendError> {
        if args.len() > AM_ARGS_MAX || handler > SPINE_MAX_HANDLER {
            return Err(SendError::TooLarge);
        }
        let mut msg = Vec::with_capacity(AM_FRAME_PREFIX + args.len() + bulk.len());
        msg.extend_from_slice(&(args.len() as u16).to_le_bytes());
        msg.extend_from_slice(args);
        msg.extend_from_slice(bulk);
        self.send_engine::<SEND_AM>(Channel(handler), &msg)
    }
}

/// The bit of [`Recv::channel`](crate::Recv::channel) that marks an
/// active message from a handler; the bits below it are the handler's
/// number (at most [`SPINE_MAX_HANDLER`]). No channel tag has it.
pub const AM_CHANNEL: u16 = 0x8000;

/// The channel a receive descriptor reports: its channel tag, or for an
/// active message ([`RECV_AM`]) [`AM_CHANNEL`] and the handler number.
#[inline]
pub(crate) fn recv_channel(d: &RecvDesc) -> Channel {
    if d.flags & RECV_AM != 0 {
        Channel(AM_CHANNEL | (d.channel & !AM_CHANNEL))
    } else {
        Channel(d.channel)
    }
}

/// An active message's arguments and bulk data (the host framing), or
/// None if the framing is bad.
pub fn split_am(msg: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = u16::from_le_bytes([*msg.first()?, *msg.get(1)?]) as usize;
    let rest = &msg[AM_FRAME_PREFIX..];
    (n <= rest.len()).then(|| rest.split_at(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_am_reads_the_host_framing() {
        assert_eq!(
            split_am(&[2, 0, 7, 8, 9]),
            Some((&[7u8, 8][..], &[9u8][..]))
        );
        assert_eq!(split_am(&[0, 0]), Some((&[][..], &[][..])));
        assert_eq!(split_am(&[3, 0, 1]), None);
        assert_eq!(split_am(&[1]), None);
    }
}
