//! `AF_XDP` sockets on one queue of an interface: [`XdpSocket`], which
//! receives and sends, for measuring the raw-frame port's `AF_PACKET`
//! ring against it (`unet bench port`): a UMEM, its fill and completion
//! rings, a receive and a transmit ring, and the XDP program that hands
//! the queue's frames to the socket, written here as eBPF instructions
//! and loaded with the `bpf()` system call (no C toolchain, no libbpf)
//! (`xdp/bpf.rs`); and [`XdpTx`], which only sends, with no program and
//! no receive ring: a port's way out (`xdp/tx.rs`). The rings, the UMEM
//! and the transmit half both share are in `xdp/ring.rs`.
//!
//! # The UMEM and the rings
//!
//! The UMEM is one anonymous mapping of `frames` chunks of [`CHUNK`]
//! bytes, registered with the socket (`XDP_UMEM_REG`). The first half of
//! the chunks receive: they start on the fill ring, the kernel copies a
//! received frame into one (at an offset past its headroom) and hands its
//! address and length over on the rx ring; the socket reads it and puts
//! the chunk back on the fill ring. The second half transmit: the socket
//! copies a frame into a free chunk, places its address and length on the
//! tx ring, and a `sendto` asks the kernel to send; the kernel hands each
//! sent chunk back on the completion ring.
//!
//! ```text
//!  umem ─┬ rx chunk 0 ┬ headroom ┬ frame ┐        fill ring: u64 addresses ──▶ kernel
//!        │ ...        │                  │ CHUNK  rx ring: xdp_desc {addr, len} ──▶ us
//!        ├ tx chunk 0 ┼ frame ───────────┘        tx ring: xdp_desc ──▶ kernel
//!        │ ...                                    completion ring: u64 ──▶ us
//! ```
//!
//! Each ring is a mapping of its own (offsets from `XDP_MMAP_OFFSETS`): a
//! producer index, a consumer index, and a power-of-two array of entries.
//! The producer writes entries, then stores its index with `Release`; the
//! consumer loads it with `Acquire` before it reads them, and stores its
//! own index with `Release` after, so that the producer reuses an entry
//! only once it has been read (the kernel's `xsk_queue.h` does the same on
//! its side).
//!
//! # Trust
//!
//! Every address the kernel hands back is checked before it is used: a
//! received descriptor's frame must lie inside one receive chunk, and a
//! completed address must be the start of a transmit chunk; a descriptor
//! that fails is counted (`bad_desc`) and skipped.
//!
//! # Mode
//!
//! The socket binds in copy mode (`XDP_COPY`: veth has no zero-copy
//! support). The program is attached in the driver's own XDP mode when the
//! driver has one (veth does), else in generic (SKB) mode; [`XdpSocket::mode`]
//! says which. It redirects the queue's frames of one ethertype (or all)
//! to the socket through an `XSKMAP`, and passes the rest to the kernel.
//! Dropping the socket detaches it (the link's descriptor is closed).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;

use super::if_index;
use ring::{Ring, TxHalf, Umem};

mod bpf;
mod ring;
mod tx;

pub use tx::XdpTx;

/// Bytes of a UMEM chunk: one frame.
pub const CHUNK: u32 = 2048;

/// How the XDP program is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver's receive path (`XDP_FLAGS_DRV_MODE`).
    Native,
    /// After the kernel built a socket buffer (`XDP_FLAGS_SKB_MODE`).
    Generic,
}

/// What the socket counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpCounters {
    /// Frames handed to the caller.
    pub rx_frames: u64,
    /// Frames placed on the tx ring.
    pub tx_frames: u64,
    /// Frames not sent: no free chunk or the tx ring full.
    pub tx_full: u64,
    /// Frames not sent: longer than a chunk or shorter than an Ethernet
    /// header.
    pub tx_bad_len: u64,
    /// Descriptors the kernel handed back outside their chunk, skipped.
    pub bad_desc: u64,
}

/// An error naming the call that failed.
fn ctx(call: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{call}: {e}"))
}

/// An `AF_XDP` socket on queue 0 of one interface, with its UMEM, rings
/// and program (see the module documentation). One owner uses it at a
/// time (`&mut self`); its descriptor is readable while a frame waits.
pub struct XdpSocket {
    // Field order is drop order: the link (detaching the program) first,
    // then the program and map, the rings, the socket, and the UMEM last.
    _link: OwnedFd,
    _prog: OwnedFd,
    _map: OwnedFd,
    rx: Ring<libc::xdp_desc>,
    fill: Ring<u64>,
    tx: TxHalf,
    fd: OwnedFd,
    mode: XdpMode,
    counters: XdpCounters,
    /// Unmapped last, after the socket closed.
    umem: Umem,
}

// SAFETY: the mappings are owned by the socket alone (no other handle to
// them exists in the process), and every access goes through `&mut self`
// or reads the socket's own fields, so moving it to another thread moves
// sole ownership of them with it.
unsafe impl Send for XdpSocket {}

impl XdpSocket {
    /// A socket on queue 0 of interface `name` receiving ethertype `proto`
    /// (host order; [`ETH_P_ALL`](super::ETH_P_ALL) for all), with `frames` chunks (a power
    /// of two, 16 to 65 536): half receive, half transmit. Needs root
    /// (`CAP_NET_ADMIN`, `CAP_NET_RAW`, `CAP_BPF`). An error names the call
    /// that failed.
    pub fn open(name: &str, proto: u16, frames: u32) -> io::Result<XdpSocket> {
        XdpSocket::open_in(name, proto, frames, None)
    }

    /// [`XdpSocket::open`] with the program attached in `mode` (`None`:
    /// the driver's own mode where it has one, else generic).
    pub fn open_in(
        name: &str,
        proto: u16,
        frames: u32,
        mode: Option<XdpMode>,
    ) -> io::Result<XdpSocket> {
        if !frames.is_power_of_two() || !(16..=65536).contains(&frames) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let ifindex = if_index(name).map_err(|e| ctx("if_nametoindex", e))?;
        let half = frames / 2;
        let fd = ring::socket()?;
        let umem = Umem::new(&fd, frames)?;
        ring::setopt(&fd, libc::XDP_UMEM_FILL_RING, &half, "XDP_UMEM_FILL_RING")?;
        ring::setopt(
            &fd,
            libc::XDP_UMEM_COMPLETION_RING,
            &half,
            "XDP_UMEM_COMPLETION_RING",
        )?;
        ring::setopt(&fd, libc::XDP_RX_RING, &half, "XDP_RX_RING")?;
        ring::setopt(&fd, libc::XDP_TX_RING, &half, "XDP_TX_RING")?;
        let off = ring::offsets(&fd)?;
        let rx = Ring::map(&fd, &off.rx, half, libc::XDP_PGOFF_RX_RING as u64)?;
        let tx = Ring::map(&fd, &off.tx, half, libc::XDP_PGOFF_TX_RING as u64)?;
        let fill: Ring<u64> = Ring::map(&fd, &off.fr, half, libc::XDP_UMEM_PGOFF_FILL_RING)?;
        let comp = Ring::map(&fd, &off.cr, half, libc::XDP_UMEM_PGOFF_COMPLETION_RING)?;
        // Every receive chunk on the fill ring before the socket is bound.
        for k in 0..half {
            // SAFETY: an entry of the fill ring, which no one else writes
            // before its producer index is published below.
            unsafe { fill.entry(k).write(u64::from(k) * u64::from(CHUNK)) };
        }
        // Release: the entries are written before the kernel reads them.
        fill.producer().store(half, Ordering::Release);
        ring::bind(&fd, ifindex)?;
        let map = bpf::xskmap()?;
        bpf::map_put(&map, 0, fd.as_raw_fd())?;
        let prog = bpf::load(&map, proto)?;
        let (link, mode) = bpf::attach_in(&prog, ifindex, mode)?;
        Ok(XdpSocket {
            _link: link,
            _prog: prog,
            _map: map,
            rx,
            fill,
            tx: TxHalf::new(tx, comp, half, frames),
            fd,
            mode,
            counters: XdpCounters::default(),
            umem,
        })
    }

    /// The socket (readable while a received frame waits).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// How the program is attached.
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// The counters.
    pub fn counters(&self) -> XdpCounters {
        self.counters
    }

    /// Frames the kernel dropped for want of a fill chunk or of room on
    /// the rx ring (`XDP_STATISTICS`'s `rx_dropped` and `rx_ring_full`,
    /// since the socket opened).
    pub fn kernel_drops(&self) -> io::Result<u64> {
        // SAFETY: all-zero bytes are a valid `xdp_statistics` (integers).
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
        // SAFETY: `st` and `len` live across the call; the kernel writes at
        // most `len` bytes into `st`.
        crate::cvt(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                (&mut st as *mut libc::xdp_statistics).cast(),
                &mut len,
            )
        })
        .map_err(|e| ctx("getsockopt(XDP_STATISTICS)", e))?;
        Ok(st.rx_dropped + st.rx_ring_full)
    }

    /// The largest frame the socket sends.
    pub fn max_frame(&self) -> usize {
        CHUNK as usize
    }

    /// Hand each received frame waiting (at most `max`) to `f`, giving its
    /// chunk back to the fill ring after; descriptors outside their chunk
    /// are counted and skipped. Returns the descriptors taken.
    pub fn recv(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        // Relaxed: only this socket writes the consumer index.
        let cons = self.rx.consumer().load(Ordering::Relaxed);
        // Acquire: pairs with the kernel's Release of its producer index
        // after it wrote the descriptors and the frames.
        let prod = self.rx.producer().load(Ordering::Acquire);
        // At most a ring's worth, whatever the index says.
        let n = prod.wrapping_sub(cons).min(self.rx.n) as usize;
        let n = n.min(max) as u32;
        if n == 0 {
            return 0;
        }
        // The fill ring has room for every receive chunk, so for these.
        let fprod = self.fill.producer().load(Ordering::Relaxed);
        let mut put = 0u32;
        for k in 0..n {
            // SAFETY: an entry between the consumer and producer indices:
            // the kernel wrote it before publishing its index and does not
            // write it again until we publish ours.
            let d = unsafe { self.rx.entry(cons.wrapping_add(k)).read() };
            let chunk = d.addr & !u64::from(CHUNK - 1);
            let len = u64::from(d.len);
            if chunk >= self.tx.base() || d.addr + len > chunk + u64::from(CHUNK) || len == 0 {
                self.counters.bad_desc += 1;
                if chunk >= self.tx.base() {
                    continue;
                }
            } else {
                // SAFETY: the frame lies inside a receive chunk of the UMEM
                // (checked above), which the kernel handed to us and does
                // not touch until it is back on the fill ring below.
                let frame = unsafe {
                    std::slice::from_raw_parts(self.umem.ptr.add(d.addr as usize), d.len as usize)
                };
                self.counters.rx_frames += 1;
                f(frame);
            }
            // SAFETY: a fill ring entry between our producer index and the
            // kernel's consumer index plus the ring's size (the ring holds
            // every receive chunk, so there is room for each one given back).
            unsafe { self.fill.entry(fprod.wrapping_add(put)).write(chunk) };
            put += 1;
        }
        // Release: the frames are read before the kernel reuses their
        // descriptors, and the fill entries written before it takes them.
        self.rx
            .consumer()
            .store(cons.wrapping_add(n), Ordering::Release);
        self.fill
            .producer()
            .store(fprod.wrapping_add(put), Ordering::Release);
        n as usize
    }

    /// Whether a received frame waits.
    pub fn rx_ready(&self) -> bool {
        self.rx.producer().load(Ordering::Acquire) != self.rx.consumer().load(Ordering::Relaxed)
    }

    /// Place `frame` on the tx ring (sent at the next
    /// [`XdpSocket::flush`]): false, counted, when no chunk is free or the
    /// frame is not an Ethernet frame's length.
    pub fn send(&mut self, frame: &[u8]) -> bool {
        self.tx.send(self.umem.ptr, frame, &mut self.counters)
    }

    /// Ask the kernel to send what the tx ring holds (see
    /// [`XdpTx::flush`]), then take back the chunks sent.
    pub fn flush(&mut self) {
        self.tx.flush(self.fd.as_raw_fd(), &mut self.counters);
    }
}
