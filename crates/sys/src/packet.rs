//! Raw-frame ports on a Linux network interface: an `AF_PACKET` socket
//! bound to one interface, with memory-mapped receive and transmit rings
//! ([`PacketPort`]), and the same socket without rings, batched with
//! `recvmmsg`/`sendmmsg` ([`PacketSocket`]: the baseline the port is
//! measured against).
//!
//! # The rings
//!
//! The port asks the kernel for `TPACKET_V2` rings: fixed frame slots, one
//! frame each, so that a frame is handed back the moment it is read (the
//! V3 block rings batch many frames a block and hand a block over when it
//! is full or its timer fires, which adds the timer's latency to a lone
//! small frame). The receive ring and the transmit ring belong to two
//! sockets of their own, each mapped: the receiving socket is bound to the
//! port's protocol and watched by the caller's poller; the sending one is
//! bound to no protocol (it receives nothing) and watched by nobody, so
//! that the release of each sent frame (which wakes the socket's waiters)
//! finds no waiter to wake:
//!
//! ```text
//!  rx map ─┬─ rx slot 0 ─┬ tpacket2_hdr (32 B) ┬ sockaddr_ll ┬ pad ┬ frame (at tp_mac) ┐
//!          │  rx slot 1  │  ...                                                       │ frame_size
//!          │  ...        │                                                            │
//!  tx map ─┼─ tx slot 0 ─┼ tpacket2_hdr (32 B) ┬ frame (at 32) ─────────────────────────┘
//!          │  ...        │
//! ```
//!
//! Each slot's first word, `tp_status`, says who owns it. A receive slot
//! is the kernel's (`TP_STATUS_KERNEL`) until it holds a frame
//! (`TP_STATUS_USER`); the port reads it and gives it back. A transmit
//! slot is the port's (`TP_STATUS_AVAILABLE`) until it writes a frame and
//! marks it `TP_STATUS_SEND_REQUEST`; a `send` system call then sends every
//! marked slot, and the kernel marks each available again (or
//! `TP_STATUS_WRONG_FORMAT`). The status word is read with `Acquire` (the
//! slot's contents are the kernel's writes before it set the status) and
//! written with `Release` (the port's reads or writes of the slot happen
//! before the kernel sees the slot as its own).
//!
//! # Trust
//!
//! The mapping is shared with the kernel, which is trusted, but the port
//! still checks what a slot says before it reads the frame: the frame
//! (`tp_mac`, `tp_snaplen`) must lie inside its slot and past the header,
//! and a frame the kernel cut short (`tp_snaplen < tp_len`: longer than a
//! slot holds) is dropped and counted, never handed on as if whole. The
//! kernel's own drops (ring full) are read from `PACKET_STATISTICS`.
//!
//! A received frame whose TCP or UDP checksum a local sender's offload
//! left to do (`TP_STATUS_CSUMNOTREADY`: veth) is completed in its slot
//! (`packet/csum.rs`) before it is handed on, so that it can be forwarded.
//! Frames the interface sends (ours and the kernel's) are not received
//! (`PACKET_IGNORE_OUTGOING`). A VLAN tag the kernel took off a received
//! frame is not put back.
//!
//! A port can send over a transmit-only `AF_XDP` socket instead of its
//! transmit ring ([`TxPath::Xdp`], `packet/xdp/tx.rs`): the kernel copies
//! each frame into a linear buffer and hands it to the driver past the
//! queueing discipline, where the ring's frames are fragments of the
//! ring's pages, which veth copies again into pages of their own.
//!
//! `packet/v3.rs` holds a `TPACKET_V3` receive ring (blocks of frames),
//! which `unet bench port` measures the port's V2 ring against, and
//! `packet/xdp.rs` an `AF_XDP` socket, measured beside them.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

/// `TPACKET_ALIGN(sizeof(struct tpacket2_hdr))`: where a transmit slot's
/// frame starts, and the least `tp_mac` of a received one.
const HDR: usize = 32;
/// The `TPACKET_V2` version number.
const TPACKET_V2: libc::c_int = 1;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_LOSING: u32 = 1 << 2;
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_SENDING: u32 = 2;
const TP_STATUS_WRONG_FORMAT: u32 = 4;
const SOL_PACKET: libc::c_int = 263;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_TX_RING: libc::c_int = 13;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// Bytes of a ring block (a multiple of the page size).
const BLOCK: u32 = 1 << 16;
/// Every Ethernet protocol.
pub const ETH_P_ALL: u16 = 0x0003;

/// The rings' sizes.
#[derive(Clone, Copy, Debug)]
pub struct RingConfig {
    /// Bytes of a slot (a multiple of 16, at least 128, at most 64 KiB):
    /// a received frame longer than `frame_size - 66` is dropped,
    /// counted `truncated`.
    pub frame_size: u32,
    /// Receive slots (rounded up to fill whole blocks).
    pub rx_frames: u32,
    /// Transmit slots (rounded up to fill whole blocks).
    pub tx_frames: u32,
    /// The Ethernet protocol received (host order): [`ETH_P_ALL`] for all.
    pub protocol: u16,
    /// How frames go out.
    pub tx: TxPath,
}

/// How a [`PacketPort`] sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxPath {
    /// A `TPACKET_V2` transmit ring on an `AF_PACKET` socket of its own.
    Ring,
    /// A transmit-only `AF_XDP` socket in copy mode ([`xdp::XdpTx`], with
    /// `tx_frames` chunks, rounded up to a power of two): one linear copy
    /// a frame, past the queueing discipline.
    Xdp,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            frame_size: 2048,
            rx_frames: 1024,
            tx_frames: 512,
            protocol: ETH_P_ALL,
            tx: TxPath::Ring,
        }
    }
}

/// What a port counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Frames handed to the caller.
    pub rx_frames: u64,
    /// Bytes of them.
    pub rx_bytes: u64,
    /// Frames placed on the transmit ring.
    pub tx_frames: u64,
    /// Bytes of them.
    pub tx_bytes: u64,
    /// Frames longer than a slot holds, dropped.
    pub truncated: u64,
    /// Slots whose header placed the frame outside the slot, dropped.
    pub bad_slot: u64,
    /// Frames not sent: the transmit ring was full.
    pub tx_full: u64,
    /// Frames not sent: longer than a slot, or shorter than an Ethernet
    /// header.
    pub tx_bad_len: u64,
    /// Frames the kernel refused to send (`TP_STATUS_WRONG_FORMAT`).
    pub tx_refused: u64,
    /// Frames the kernel dropped because the receive ring was full
    /// (`PACKET_STATISTICS`'s `tp_drops`, summed over reads).
    pub kernel_drops: u64,
    /// Received frames whose TCP or UDP checksum the port completed
    /// (`TP_STATUS_CSUMNOTREADY`: a local sender's offload left it).
    pub csum_completed: u64,
}

/// The index of interface `name` (`ENODEV` when there is none).
pub fn if_index(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c` is a NUL-terminated string that lives across the call;
    // the call only reads it.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(i)
    }
}

/// A new non-blocking `AF_PACKET` raw socket taking no protocol yet (so
/// that nothing queues on it before its rings are set).
fn raw_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call with integer arguments.
    let fd = super::cvt(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` was just returned by `socket` and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Set socket option `opt` of level `SOL_PACKET` to `v`.
fn setopt<T>(fd: &OwnedFd, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a `T` that lives across the call, and the length
    // passed is its size: the kernel reads exactly that.
    super::cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            SOL_PACKET,
            opt,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// Bind `fd` to interface `ifindex` for protocol `protocol` (host order).
fn bind(fd: &OwnedFd, ifindex: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: all-zero bytes are a valid `sockaddr_ll` (integers and arrays).
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: `sll` lives across the call and the length is its size.
    super::cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// `PACKET_STATISTICS` of `fd`: (packets, drops) since the last read (the
/// kernel zeroes them on each read).
fn statistics(fd: &OwnedFd) -> io::Result<(u32, u32)> {
    let mut st = [0u32; 2];
    let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
    // SAFETY: `st` and `len` live across the call; the kernel writes at most
    // `len` bytes (the size of `struct tpacket_stats`, two u32) into `st`.
    super::cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            SOL_PACKET,
            PACKET_STATISTICS,
            st.as_mut_ptr().cast(),
            &mut len,
        )
    })?;
    Ok((st[0], st[1]))
}

/// An `AF_PACKET` port on one interface with memory-mapped `TPACKET_V2`
/// receive and transmit rings (see the module documentation). One owner
/// uses it at a time (`&mut self`); its descriptor is readable while a
/// received frame waits.
pub struct PacketPort {
    /// The receiving socket (its ring in `rx`).
    fd: OwnedFd,
    ifindex: u32,
    rx: Mapping,
    frame_size: usize,
    rx_n: usize,
    rx_head: usize,
    tx: Tx,
    /// Frames placed but not yet kicked.
    tx_pending: usize,
    counters: PortCounters,
}

/// A port's way out.
enum Tx {
    /// The sending socket, bound to no protocol, with its transmit ring
    /// (`n` slots, the next one to fill at `head`).
    Ring {
        fd: OwnedFd,
        map: Mapping,
        n: usize,
        head: usize,
    },
    Xdp(xdp::XdpTx),
}

// SAFETY: the mapping is owned by the port alone (no other handle to it
// exists in the process), and every access goes through `&mut self` or
// reads the port's own fields, so moving the port to another thread moves
// sole ownership of the mapping with it.
unsafe impl Send for PacketPort {}

/// Ring geometry: (block size, blocks, frames) for `frames` slots of
/// `frame_size` bytes.
fn geometry(frame_size: u32, frames: u32) -> (u32, u32, u32) {
    let block = BLOCK.max(frame_size);
    let per = block / frame_size;
    let blocks = frames.max(1).div_ceil(per);
    (block, blocks, blocks * per)
}

impl PacketPort {
    /// A port on interface `name` (non-blocking, its rings mapped, bound).
    /// Needs `CAP_NET_RAW`.
    pub fn open(name: &str, cfg: RingConfig) -> io::Result<PacketPort> {
        let fs = cfg.frame_size;
        if !(128..=BLOCK).contains(&fs) || !fs.is_multiple_of(16) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let ifindex = if_index(name)?;
        let fd = raw_socket()?;
        setopt(&fd, PACKET_VERSION, &TPACKET_V2)?;
        // Kernels before 4.20 do not know it: their port sees its own frames.
        let _ = setopt(&fd, PACKET_IGNORE_OUTGOING, &1 as &libc::c_int);
        let (rb, rblocks, rx_n) = geometry(fs, cfg.rx_frames);
        setopt(&fd, PACKET_RX_RING, &[rb, rblocks, fs, rx_n])?;
        let rx = Mapping::of(&fd, rb as usize * rblocks as usize)?;
        let tx = match cfg.tx {
            TxPath::Ring => {
                let tx_fd = raw_socket()?;
                setopt(&tx_fd, PACKET_VERSION, &TPACKET_V2)?;
                let (tb, tblocks, tx_n) = geometry(fs, cfg.tx_frames);
                setopt(&tx_fd, PACKET_TX_RING, &[tb, tblocks, fs, tx_n])?;
                let map = Mapping::of(&tx_fd, tb as usize * tblocks as usize)?;
                // Protocol 0: the sending socket takes no frame in.
                bind(&tx_fd, ifindex, 0)?;
                Tx::Ring {
                    fd: tx_fd,
                    map,
                    n: tx_n as usize,
                    head: 0,
                }
            }
            TxPath::Xdp => {
                let n = cfg.tx_frames.clamp(16, 65536).next_power_of_two();
                Tx::Xdp(xdp::XdpTx::open(name, n)?)
            }
        };
        bind(&fd, ifindex, cfg.protocol)?;
        Ok(PacketPort {
            fd,
            ifindex,
            rx,
            frame_size: fs as usize,
            rx_n: rx_n as usize,
            rx_head: 0,
            tx,
            tx_pending: 0,
            counters: PortCounters::default(),
        })
    }

    /// How the port sends.
    pub fn tx_path(&self) -> TxPath {
        match self.tx {
            Tx::Ring { .. } => TxPath::Ring,
            Tx::Xdp(_) => TxPath::Xdp,
        }
    }

    /// The socket (readable while a received frame waits): for a poller.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The interface's index.
    pub fn if_index(&self) -> u32 {
        self.ifindex
    }

    /// The largest frame the port sends.
    pub fn max_frame(&self) -> usize {
        match &self.tx {
            Tx::Ring { .. } => self.frame_size - HDR,
            Tx::Xdp(x) => x.max_frame().min(self.frame_size - HDR),
        }
    }

    /// Receive slot `i`.
    #[inline]
    fn slot(&self, i: usize) -> *mut u8 {
        ring_slot(&self.rx, self.frame_size, i, self.rx_n)
    }

    /// Receive slot `i`'s status word.
    #[inline]
    fn status(&self, i: usize) -> &AtomicU32 {
        slot_status(self.slot(i))
    }

    /// A u32 of slot `i`'s header at byte `off` (below [`HDR`]).
    #[inline]
    fn hdr_u32(&self, i: usize, off: usize) -> u32 {
        debug_assert!(off + 4 <= HDR);
        // SAFETY: inside the slot's header (off + 4 <= 32 <= frame_size),
        // at a multiple of 4 from the slot's 16-byte aligned start; read
        // by value, only while the slot's status says it is ours.
        unsafe { self.slot(i).add(off).cast::<u32>().read_volatile() }
    }

    /// Hand each received frame waiting (at most `max`) to `f`, giving its
    /// slot back after; frames that fail the slot checks are counted and
    /// skipped. Returns the slots taken (frames handed on and dropped).
    pub fn recv(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let mut n = 0;
        while n < max {
            let i = self.rx_head;
            // Acquire: pairs with the kernel's write of the status after
            // it wrote the frame and the header.
            let st = self.status(i).load(Ordering::Acquire);
            if st & TP_STATUS_USER == 0 {
                break;
            }
            if st & TP_STATUS_LOSING != 0 {
                self.read_drops();
            }
            let len = self.hdr_u32(i, 4) as usize;
            let snap = self.hdr_u32(i, 8) as usize;
            // tp_mac: the u16 at byte 12 (the first two bytes of that word
            // in memory, whatever the byte order).
            let w = self.hdr_u32(i, 12).to_ne_bytes();
            let mac = usize::from(u16::from_ne_bytes([w[0], w[1]]));
            if mac < HDR || mac.saturating_add(snap) > self.frame_size {
                self.counters.bad_slot += 1;
            } else if snap < len {
                self.counters.truncated += 1;
            } else {
                // SAFETY: `mac + snap <= frame_size` (checked above), so the
                // bytes lie inside slot `i`, which the kernel handed to us
                // (status USER) and does not touch until we give it back
                // below, after `f` returns; nothing else refers to them.
                let frame = unsafe { std::slice::from_raw_parts_mut(self.slot(i).add(mac), snap) };
                if st & TP_STATUS_CSUMNOTREADY != 0 && csum::complete(frame) {
                    self.counters.csum_completed += 1;
                }
                self.counters.rx_frames += 1;
                self.counters.rx_bytes += snap as u64;
                f(frame);
            }
            // Release: our reads of the slot happen before the kernel
            // sees it as its own again.
            self.status(i).store(TP_STATUS_KERNEL, Ordering::Release);
            self.rx_head = (i + 1) % self.rx_n;
            n += 1;
        }
        n
    }

    /// Whether a received frame waits.
    pub fn rx_ready(&self) -> bool {
        self.status(self.rx_head).load(Ordering::Acquire) & TP_STATUS_USER != 0
    }

    /// Place `frame` on the way out (sent at the next
    /// [`PacketPort::flush`]): false, counted, when the transmit ring (or
    /// the `AF_XDP` socket's chunks) is full or the frame is not an
    /// Ethernet frame's length.
    pub fn send(&mut self, frame: &[u8]) -> bool {
        if frame.len() < 14 || frame.len() > self.max_frame() {
            self.counters.tx_bad_len += 1;
            return false;
        }
        let fs = self.frame_size;
        match &mut self.tx {
            Tx::Xdp(x) => {
                if !x.send(frame) {
                    self.counters.tx_full += 1;
                    return false;
                }
            }
            Tx::Ring { map, n, head, .. } => {
                let s = ring_slot(map, fs, *head, *n);
                let status = slot_status(s);
                let st = status.load(Ordering::Acquire);
                if st & TP_STATUS_WRONG_FORMAT != 0 {
                    self.counters.tx_refused += 1;
                } else if st != TP_STATUS_AVAILABLE {
                    // Still the kernel's (queued or being sent).
                    self.counters.tx_full += 1;
                    return false;
                }
                // SAFETY: the slot is ours (status AVAILABLE or
                // WRONG_FORMAT: the kernel is done with it); the frame's
                // bytes go at HDR, and `HDR + frame.len() <= frame_size`
                // (checked above), inside the slot.
                unsafe {
                    std::ptr::copy_nonoverlapping(frame.as_ptr(), s.add(HDR), frame.len());
                    s.add(4).cast::<u32>().write_volatile(frame.len() as u32);
                    s.add(8).cast::<u32>().write_volatile(frame.len() as u32);
                }
                // Release: the frame and its lengths are written before the
                // kernel may take the slot.
                status.store(TP_STATUS_SEND_REQUEST, Ordering::Release);
                *head = (*head + 1) % *n;
            }
        }
        self.tx_pending += 1;
        self.counters.tx_frames += 1;
        self.counters.tx_bytes += frame.len() as u64;
        true
    }

    /// Frames placed since the last flush.
    pub fn tx_pending(&self) -> usize {
        self.tx_pending
    }

    /// Ask the kernel to send what is placed (not waiting for it). A full
    /// device queue leaves the frames placed for the next flush.
    pub fn flush(&mut self) {
        if self.tx_pending == 0 {
            return;
        }
        self.tx_pending = 0;
        match &mut self.tx {
            Tx::Xdp(x) => x.flush(),
            Tx::Ring { fd, .. } => {
                // SAFETY: a send of no bytes from a null pointer: with a
                // transmit ring the kernel sends the ring's marked slots
                // and reads nothing from the (empty) buffer.
                let _ =
                    unsafe { libc::send(fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
            }
        }
    }

    /// Frames placed that the kernel has not yet sent.
    pub fn tx_in_flight(&self) -> usize {
        match &self.tx {
            Tx::Xdp(x) => x.in_flight(),
            Tx::Ring { map, n, .. } => (0..*n)
                .filter(|&k| {
                    let s = slot_status(ring_slot(map, self.frame_size, k, *n));
                    s.load(Ordering::Acquire) & (TP_STATUS_SEND_REQUEST | TP_STATUS_SENDING) != 0
                })
                .count(),
        }
    }

    /// Add the kernel's drops since the last read to the counters.
    fn read_drops(&mut self) {
        if let Ok((_, drops)) = statistics(&self.fd) {
            self.counters.kernel_drops += u64::from(drops);
        }
    }

    /// The counters, the kernel's drops read now.
    pub fn counters(&mut self) -> PortCounters {
        self.read_drops();
        self.counters
    }
}

/// Slot `k` of a ring of `n` slots of `frame_size` bytes mapped at `map`.
#[inline]
fn ring_slot(map: &Mapping, frame_size: usize, k: usize, n: usize) -> *mut u8 {
    debug_assert!(k < n && (k + 1) * frame_size <= map.len);
    // SAFETY: `k` is below the ring's slot count (callers index with `% n`
    // or below `n`), and a ring's slots fill its mapping (`geometry`), so
    // the offset lies inside the mapping.
    unsafe { map.ptr.add(k * frame_size) }
}

/// The status word at the start of slot `s` (from [`ring_slot`]).
#[inline]
fn slot_status<'a>(s: *mut u8) -> &'a AtomicU32 {
    // SAFETY: a slot starts on a 16-byte boundary of a page-aligned
    // mapping, so its first word is an aligned u32 that lives as long as
    // the mapping, which outlives every use of the reference (its callers
    // hold the port); the kernel changes it concurrently, which is why it
    // is read and written only as an atomic.
    unsafe { &*(s as *const AtomicU32) }
}

/// A ring's shared mapping of a packet socket, unmapped on drop.
pub(crate) struct Mapping {
    pub(crate) ptr: *mut u8,
    len: usize,
}

impl Mapping {
    /// Map the `len` bytes of `fd`'s ring (read-write, shared).
    pub(crate) fn of(fd: &OwnedFd, len: usize) -> io::Result<Mapping> {
        // SAFETY: a new shared mapping of the socket's ring, of exactly the
        // length the ring asked for; nothing else in the process maps it.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: map.cast(),
            len,
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `of`, of `len` bytes; no slice of it
        // outlives a call of the port that owns it (they borrow `&mut
        // self`).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Most frames one [`PacketSocket`] batch moves.
pub const BATCH_MAX: usize = 64;

/// An `AF_PACKET` socket on one interface without rings: frames move by
/// `recvmmsg`/`sendmmsg`, copied through the caller's buffers.
pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: u32,
}

impl PacketSocket {
    /// A socket on interface `name` receiving `protocol` (host order).
    pub fn open(name: &str, protocol: u16) -> io::Result<PacketSocket> {
        let ifindex = if_index(name)?;
        let fd = raw_socket()?;
        let _ = setopt(&fd, PACKET_IGNORE_OUTGOING, &1 as &libc::c_int);
        bind(&fd, ifindex, protocol)?;
        Ok(PacketSocket { fd, ifindex })
    }

    /// The socket.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Receive up to `bufs.len()` (at most [`BATCH_MAX`]) frames, one into
    /// each buffer, their lengths into `lens`: the frames received (0 when
    /// none waits). A frame longer than its buffer is cut to it.
    pub fn recv_batch(&self, bufs: &mut [Vec<u8>], lens: &mut [usize]) -> io::Result<usize> {
        let n = bufs.len().min(lens.len()).min(BATCH_MAX);
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; BATCH_MAX];
        // SAFETY: all-zero bytes are a valid `mmsghdr` (pointers null,
        // lengths 0).
        let mut hdrs: [libc::mmsghdr; BATCH_MAX] = unsafe { std::mem::zeroed() };
        for k in 0..n {
            iov[k].iov_base = bufs[k].as_mut_ptr().cast();
            iov[k].iov_len = bufs[k].len();
            hdrs[k].msg_hdr.msg_iov = &mut iov[k];
            hdrs[k].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: the first `n` headers each name one iovec of a live buffer
        // of the length given; the kernel writes only inside them and into
        // the headers' `msg_len`.
        let r = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock {
                Ok(0)
            } else {
                Err(e)
            };
        }
        let got = r as usize;
        for k in 0..got {
            lens[k] = (hdrs[k].msg_len as usize).min(bufs[k].len());
        }
        Ok(got)
    }

    /// Send up to [`BATCH_MAX`] frames in one call: the frames sent (0
    /// when the socket's buffer is full).
    pub fn send_batch(&self, frames: &[&[u8]]) -> io::Result<usize> {
        let n = frames.len().min(BATCH_MAX);
        // SAFETY: all-zero bytes are a valid `sockaddr_ll`.
        let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        to.sll_family = libc::AF_PACKET as u16;
        to.sll_ifindex = self.ifindex as i32;
        to.sll_halen = 6;
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; BATCH_MAX];
        // SAFETY: all-zero bytes are a valid `mmsghdr`.
        let mut hdrs: [libc::mmsghdr; BATCH_MAX] = unsafe { std::mem::zeroed() };
        for k in 0..n {
            iov[k].iov_base = frames[k].as_ptr() as *mut _;
            iov[k].iov_len = frames[k].len();
            hdrs[k].msg_hdr.msg_iov = &mut iov[k];
            hdrs[k].msg_hdr.msg_iovlen = 1;
            hdrs[k].msg_hdr.msg_name = (&mut to as *mut libc::sockaddr_ll).cast();
            hdrs[k].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        }
        // SAFETY: the first `n` headers name live frames and the live
        // address `to`; the kernel only reads them (and writes `msg_len`).
        let r = unsafe {
            libc::sendmmsg(
                self.fd.as_raw_fd(),
                hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock {
                Ok(0)
            } else {
                Err(e)
            };
        }
        Ok(r as usize)
    }

    /// The kernel's drops since the last read (`PACKET_STATISTICS`).
    pub fn kernel_drops(&self) -> u64 {
        statistics(&self.fd).map_or(0, |(_, d)| u64::from(d))
    }
}

impl std::os::fd::AsFd for PacketSocket {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

pub mod csum;
pub mod v3;
pub mod xdp;

#[cfg(test)]
mod tests;
