//! A transmit-only `AF_XDP` socket ([`XdpTx`]): a UMEM of transmit
//! chunks, a tx ring and a completion ring, bound in copy mode to queue 0
//! of an interface, with no XDP program and no rx ring (it takes nothing
//! in, so the interface's receive path is untouched).
//!
//! In copy mode the kernel builds each frame's socket buffer by copying
//! the chunk into it (one linear copy, no page fragments) and hands it to
//! the driver directly, past the queueing discipline. For a raw-frame
//! port's small frames that costs less than the `AF_PACKET` transmit
//! ring, whose frames point into the ring's pages: a veth that carries
//! such a frame into another namespace first copies each fragment into a
//! page of its own (`skb_copy_ubufs`), and every frame passes the
//! queueing discipline. `unet bench port` measures the two.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::ring::{self, Ring, TxHalf, Umem};
use super::{ctx, XdpCounters, CHUNK};
use crate::packet::if_index;

/// A transmit-only `AF_XDP` socket on queue 0 of one interface (see the
/// module documentation). One owner uses it at a time (`&mut self`).
pub struct XdpTx {
    // Field order is drop order: the rings, the socket, the UMEM last.
    tx: TxHalf,
    fd: OwnedFd,
    counters: XdpCounters,
    umem: Umem,
}

// SAFETY: the mappings are owned by the socket alone (no other handle to
// them exists in the process), and every access goes through `&mut self`
// or reads the socket's own fields, so moving it to another thread moves
// sole ownership of them with it.
unsafe impl Send for XdpTx {}

impl XdpTx {
    /// A transmit-only socket on queue 0 of interface `name` with `frames`
    /// chunks (a power of two, 16 to 65 536). Needs `CAP_NET_RAW`. An
    /// error names the call that failed: a kernel without `AF_XDP`
    /// refuses the socket, an interface whose queue 0 another `AF_XDP`
    /// socket holds refuses the bind.
    pub fn open(name: &str, frames: u32) -> io::Result<XdpTx> {
        if !frames.is_power_of_two() || !(16..=65536).contains(&frames) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let ifindex = if_index(name).map_err(|e| ctx("if_nametoindex", e))?;
        let fd = ring::socket()?;
        let umem = Umem::new(&fd, frames)?;
        // The kernel binds a UMEM only with a fill ring; nothing is ever
        // put on this one (there is no rx ring), so it is not mapped.
        ring::setopt(&fd, libc::XDP_UMEM_FILL_RING, &2u32, "XDP_UMEM_FILL_RING")?;
        ring::setopt(
            &fd,
            libc::XDP_UMEM_COMPLETION_RING,
            &frames,
            "XDP_UMEM_COMPLETION_RING",
        )?;
        ring::setopt(&fd, libc::XDP_TX_RING, &frames, "XDP_TX_RING")?;
        let off = ring::offsets(&fd)?;
        let tx = Ring::map(&fd, &off.tx, frames, libc::XDP_PGOFF_TX_RING as u64)?;
        let comp = Ring::map(&fd, &off.cr, frames, libc::XDP_UMEM_PGOFF_COMPLETION_RING)?;
        ring::bind(&fd, ifindex)?;
        Ok(XdpTx {
            tx: TxHalf::new(tx, comp, 0, frames),
            fd,
            counters: XdpCounters::default(),
            umem,
        })
    }

    /// The socket.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The largest frame the socket sends.
    pub fn max_frame(&self) -> usize {
        CHUNK as usize
    }

    /// The counters (`rx_frames` stays 0).
    pub fn counters(&self) -> XdpCounters {
        self.counters
    }

    /// Place `frame` on the tx ring (sent at the next [`XdpTx::flush`]):
    /// false, counted, when no chunk is free or the frame is not an
    /// Ethernet frame's length.
    pub fn send(&mut self, frame: &[u8]) -> bool {
        self.tx.send(self.umem.ptr, frame, &mut self.counters)
    }

    /// Frames placed and not yet sent back by the kernel.
    pub fn in_flight(&self) -> usize {
        self.tx.in_flight()
    }

    /// Ask the kernel to send what the tx ring holds. In copy mode it
    /// sends at most a few dozen frames a call (answering `EAGAIN` while
    /// more wait), so this calls again until the ring is empty or the
    /// device refuses (a full device queue leaves the rest on the ring
    /// for the next flush); then it takes back the chunks sent.
    pub fn flush(&mut self) {
        self.tx.flush(self.fd.as_raw_fd(), &mut self.counters);
    }
}
