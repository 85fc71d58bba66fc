//! The socket of a [`UdpPort`]: binding with the offloads the kernel has,
//! `sendmmsg` of a [`SendBatch`] with segmentation and fault injection,
//! `recvmmsg` with receive coalescing cut back into datagrams, and the
//! kernel's drop count.

use super::*;

/// A non-blocking UDP socket of the engine.
pub struct UdpPort {
    sock: UdpSocket,
    cfg: PortConfig,
    rng: XorShift,
    /// `cfg.batch` receive buffers of `cfg.max_datagram` bytes each.
    rx: Vec<u8>,
    /// Counters: datagrams and bytes, system calls, and the drops of the port.
    pub stats: WireStats,
    /// The last error `sendmmsg` reported for a datagram it refused.
    pub last_send_error: Option<io::ErrorKind>,
    /// Segmentation offload in use (see [`PortConfig::gso`]).
    gso: bool,
    /// Receive coalescing in use (see [`PortConfig::gro`]).
    gro: bool,
    /// Bytes per receive buffer.
    rx_slot: usize,
    /// The kernel reports its drops at this socket (`SO_RXQ_OVFL`).
    drops_reported: bool,
    /// The kernel's drop count last seen (see [`RxControl::socket_drops`]).
    socket_drops: u32,
    /// What the last `recvmmsg` filled, one entry per receive buffer.
    rx_entries: Vec<RxEntry>,
    /// The next datagram to hand over: entry index, byte offset in it.
    rx_next: (usize, usize),
}

/// One receive buffer filled by `recvmmsg`: a datagram, or a run of them
/// (`UDP_GRO`) of `seg` bytes each (the last may be shorter).
#[derive(Clone, Copy, Debug)]
struct RxEntry {
    /// None when the datagram is dropped already (cut short by the kernel,
    /// or an unknown kind of source address).
    src: Option<SocketAddr>,
    len: usize,
    seg: usize,
    /// Datagrams in the entry.
    count: usize,
}

/// Room for the control messages of one received datagram (`UDP_GRO` and
/// `SO_RXQ_OVFL`, 24 bytes each).
const CMSG_SPACE_BYTES: usize = 64;

/// A control message buffer, aligned for `cmsghdr`.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct CmsgSpace([u8; CMSG_SPACE_BYTES]);

/// What the control messages of one received datagram say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct RxControl {
    /// `UDP_GRO`: the segment size of a coalesced run.
    gro_segment: Option<usize>,
    /// `SO_RXQ_OVFL`: how many packets the kernel had dropped at this
    /// socket (its receive buffer full) when this one was queued; a running
    /// count that wraps.
    socket_drops: Option<u32>,
}

/// Reads the control bytes the kernel wrote (walked as `CMSG_NXTHDR` does,
/// without pointers); anything malformed ends the walk.
fn parse_control(ctl: &[u8]) -> RxControl {
    const HDR: usize = size_of::<libc::cmsghdr>();
    const ALIGN: usize = size_of::<usize>();
    let mut out = RxControl::default();
    let mut off = 0;
    while off + HDR <= ctl.len() {
        let word = |at: usize, n: usize| -> Option<u64> {
            let b = ctl.get(off + at..off + at + n)?;
            let mut a = [0u8; 8];
            a[..n].copy_from_slice(b);
            Some(u64::from_ne_bytes(a) & (u64::MAX >> (64 - 8 * n)))
        };
        let Some(len) = word(0, size_of::<usize>()) else {
            break;
        };
        let len = len as usize;
        let (Some(level), Some(ty)) = (word(ALIGN, 4), word(ALIGN + 4, 4)) else {
            break;
        };
        let (level, ty) = (level as u32 as i32, ty as u32 as i32);
        if len < HDR || len > ctl.len() - off {
            break;
        }
        let data = HDR.div_ceil(ALIGN) * ALIGN;
        if len >= data + 4 {
            let v = word(data, 4).map(|v| v as u32);
            if level == libc::SOL_UDP && ty == libc::UDP_GRO {
                out.gro_segment = v.map(|v| v as usize);
            } else if level == libc::SOL_SOCKET && ty == libc::SO_RXQ_OVFL {
                out.socket_drops = v;
            }
        }
        off += len.div_ceil(ALIGN) * ALIGN;
    }
    out
}

/// Most datagrams sent as one segmented run (the kernel's
/// `UDP_MAX_SEGMENTS` is 64 on older kernels).
pub const GSO_MAX_SEGMENTS: usize = 64;

/// A control message `UDP_SEGMENT` carrying the segment size, laid out as
/// `CMSG_FIRSTHDR`/`CMSG_DATA` expect: the header, then the `u16` at
/// `CMSG_LEN(0)`.
#[derive(Clone, Copy)]
#[repr(C)]
struct SegCmsg {
    hdr: libc::cmsghdr,
    seg: u16,
}

// SAFETY: CMSG_LEN and CMSG_SPACE are pure arithmetic on their argument.
const SEG_CMSG_LEN: usize = unsafe { libc::CMSG_LEN(2) } as usize;
// SAFETY: as above.
const SEG_CMSG_SPACE: usize = unsafe { libc::CMSG_SPACE(2) } as usize;
// SAFETY: as above.
const _: () = assert!(std::mem::offset_of!(SegCmsg, seg) == unsafe { libc::CMSG_LEN(0) } as usize);
const _: () = assert!(size_of::<SegCmsg>() <= SEG_CMSG_SPACE);

impl SegCmsg {
    fn new(seg: u16) -> Self {
        // SAFETY: cmsghdr is a C struct of integers (and, on some C
        // libraries, padding fields); all-zero bytes are a valid value.
        let mut hdr: libc::cmsghdr = unsafe { std::mem::zeroed() };
        hdr.cmsg_len = SEG_CMSG_LEN as _;
        hdr.cmsg_level = libc::SOL_UDP;
        hdr.cmsg_type = libc::UDP_SEGMENT;
        SegCmsg { hdr, seg }
    }
}

/// A socket address in the form the kernel takes.
#[derive(Clone, Copy)]
#[repr(C)]
union RawAddr {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
    storage: libc::sockaddr_storage,
}

impl RawAddr {
    fn empty() -> Self {
        RawAddr {
            v6: libc::sockaddr_in6 {
                sin6_family: 0,
                sin6_port: 0,
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr { s6_addr: [0; 16] },
                sin6_scope_id: 0,
            },
        }
    }

    fn set(&mut self, a: &SocketAddr) -> libc::socklen_t {
        match a {
            SocketAddr::V4(a) => {
                self.v4 = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                size_of::<libc::sockaddr_in>() as libc::socklen_t
            }
            SocketAddr::V6(a) => {
                self.v6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                size_of::<libc::sockaddr_in6>() as libc::socklen_t
            }
        }
    }

    fn get(&self, len: libc::socklen_t) -> Option<SocketAddr> {
        // SAFETY: every variant is plain old data for which any bit pattern
        // is valid, and the union is at least as large as each of them, so
        // reading any field reads initialised bytes of the right size. The
        // family field sits at the same offset in all of them.
        let family = unsafe { self.v4.sin_family } as libc::c_int;
        let len = len as usize;
        match family {
            libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
                // SAFETY: as above; the kernel wrote an AF_INET address.
                let a = unsafe { self.v4 };
                Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes()),
                    u16::from_be(a.sin_port),
                )))
            }
            libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as above; the kernel wrote an AF_INET6 address.
                let a = unsafe { self.v6 };
                let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
                let port = u16::from_be(a.sin6_port);
                // An IPv4 peer of a dual-stack socket has one identity: its
                // IPv4 address, as when it is reached through an IPv4 socket.
                Some(match ip.to_ipv4_mapped() {
                    Some(v4) => SocketAddr::V4(SocketAddrV4::new(v4, port)),
                    None => SocketAddr::V6(SocketAddrV6::new(
                        ip,
                        port,
                        a.sin6_flowinfo,
                        a.sin6_scope_id,
                    )),
                })
            }
            _ => None,
        }
    }
}

fn empty_iovec() -> libc::iovec {
    libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }
}

fn empty_mmsghdr() -> libc::mmsghdr {
    // SAFETY: mmsghdr is a C struct of integers and raw pointers; all-zero
    // bytes are a valid value of it (null pointers, zero lengths).
    unsafe { std::mem::zeroed() }
}

/// `SO_MEMINFO` (asm-generic/socket.h, the number on the engine's targets)
/// and the length of the array it fills (`SK_MEMINFO_VARS`).
const SO_MEMINFO: libc::c_int = 55;
const SK_MEMINFO_VARS: usize = 9;

/// Receive buffer size with `UDP_GRO`: a coalesced run is at most 64 KiB.
const GRO_SLOT: usize = 65535;

/// Turns a boolean socket option on; false when the kernel refuses it.
fn enable(fd: RawFd, level: libc::c_int, option: libc::c_int) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: `fd` is an open socket owned by the caller; the option value
    // points at a live c_int whose size is passed as the length.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            option,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

impl UdpPort {
    /// Binds a non-blocking UDP socket on `addr` (port 0 picks a free one)
    /// and asks for large socket buffers (best effort: `SO_*BUFFORCE` when
    /// privileged, else capped by the system limits).
    pub fn bind(addr: SocketAddr, cfg: PortConfig) -> io::Result<UdpPort> {
        cfg.validate()?;
        let sock = UdpSocket::bind(addr)?;
        sock.set_nonblocking(true)?;
        unet_sys::set_socket_buffers(&sock, cfg.socket_buffer);
        let fd = sock.as_raw_fd();
        let gro = cfg.gro && enable(fd, libc::SOL_UDP, libc::UDP_GRO);
        let drops_reported = enable(fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL);
        let rx_slot = if gro { GRO_SLOT } else { cfg.max_datagram };
        Ok(UdpPort {
            sock,
            rng: XorShift::new(cfg.drop_seed),
            rx: vec![0; cfg.batch * rx_slot],
            gro,
            rx_slot,
            cfg,
            stats: WireStats::default(),
            last_send_error: None,
            gso: cfg.gso,
            drops_reported,
            socket_drops: 0,
            rx_entries: Vec::with_capacity(MAX_BATCH),
            rx_next: (0, 0),
        })
    }

    /// The socket, for the engine's epoll (readable: call `recv_batch`;
    /// writable after a partial send: call `send_batch` again).
    pub fn raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// The settings in force.
    pub fn config(&self) -> &PortConfig {
        &self.cfg
    }

    /// Sends what `batch` holds until it is empty or the kernel would block.
    /// Never blocks.
    ///
    /// One `sendmmsg` carries up to [`PortConfig::batch`] messages. With
    /// [`PortConfig::gso`], each message may be a run of up to
    /// [`GSO_MAX_SEGMENTS`] datagrams of one size (the last may be shorter)
    /// for one destination, contiguous in the batch (the fragments of one
    /// message are), which the kernel cuts into datagrams (`UDP_SEGMENT`).
    /// If the kernel or the route does not support it, the port turns
    /// segmentation off and carries on without.
    ///
    /// Returns the number of datagrams the kernel took. Datagrams the kernel
    /// refused (an error other than `EAGAIN`/`ENOBUFS`) are removed and
    /// counted as [`WireDrop::SendFailed`]; those dropped by fault injection
    /// as [`WireDrop::InjectedDrop`]. What remains in `batch` afterwards
    /// ([`SendBatch::len`]) was not sent yet: call again when the socket is
    /// writable. `Err` only for a broken socket (`EBADF`, `ENOTSOCK`, …).
    pub fn send_batch(&mut self, batch: &mut SendBatch) -> io::Result<usize> {
        if batch.is_empty() {
            return Ok(0);
        }
        self.stats.send_batches += 1;
        let c = &self.cfg;
        if c.drop_rate_ppm > 0 || c.dup_rate_ppm > 0 || c.reorder_rate_ppm > 0 {
            self.inject_faults(batch, Instant::now());
        } else {
            batch.judged = batch.entries.len();
        }
        // A datagram held back by injected reordering stays, last, for the
        // next call.
        let end = batch.entries.len() - usize::from(batch.held.is_some());

        let mut addrs = [RawAddr::empty(); MAX_BATCH];
        let mut iovs = [empty_iovec(); MAX_BATCH];
        let mut msgs = [empty_mmsghdr(); MAX_BATCH];
        let mut cmsgs = [SegCmsg::new(0); MAX_BATCH];
        // Per message: index of its last entry, and its number of datagrams.
        let mut last = [0usize; MAX_BATCH];
        let mut segs = [0usize; MAX_BATCH];
        let mut sent = 0;
        loop {
            while batch.head < end && batch.entries[batch.head].dropped {
                batch.head += 1;
            }
            if batch.head == end {
                if end == batch.entries.len() {
                    batch.reset();
                }
                break;
            }
            let gso = self.gso;
            let mut n = 0;
            let mut i = batch.head;
            while n < self.cfg.batch && i < end {
                let e = batch.entries[i];
                if e.dropped {
                    i += 1;
                    continue;
                }
                // Extend a run of equal-size, contiguous datagrams to one
                // destination; a shorter one ends it.
                let (mut k, mut total, mut j) = (1, e.len, i + 1);
                if gso && e.len > 0 {
                    while k < GSO_MAX_SEGMENTS && j < end {
                        let f = &batch.entries[j];
                        if f.dropped
                            || f.dst != e.dst
                            || f.start != e.start + total
                            || f.len > e.len
                            || f.len == 0
                            || total + f.len > MAX_DATAGRAM
                        {
                            break;
                        }
                        total += f.len;
                        k += 1;
                        j += 1;
                        if f.len < e.len {
                            break;
                        }
                    }
                }
                let slice = &mut batch.arena[e.start..e.start + total];
                iovs[n] = libc::iovec {
                    iov_base: slice.as_mut_ptr().cast(),
                    iov_len: slice.len(),
                };
                let alen = addrs[n].set(&e.dst);
                let m = &mut msgs[n].msg_hdr;
                m.msg_name = (&mut addrs[n] as *mut RawAddr).cast();
                m.msg_namelen = alen;
                m.msg_iov = &mut iovs[n];
                m.msg_iovlen = 1;
                if k > 1 {
                    cmsgs[n] = SegCmsg::new(e.len as u16);
                    m.msg_control = (&mut cmsgs[n] as *mut SegCmsg).cast();
                    m.msg_controllen = SEG_CMSG_SPACE as _;
                } else {
                    m.msg_control = std::ptr::null_mut();
                    m.msg_controllen = 0;
                }
                msgs[n].msg_len = 0;
                last[n] = j - 1;
                segs[n] = k;
                n += 1;
                i = j;
            }
            // SAFETY: `msgs[..n]` are initialised headers whose name, iov and
            // control pointers point into `addrs`, `iovs`, `cmsgs` and
            // `batch.arena`, all alive and not otherwise borrowed until the
            // call returns; each iov covers bytes inside the arena and each
            // control length is that of its `SegCmsg`. The kernel only reads
            // them (and writes `msg_len`).
            let rc = unsafe {
                libc::sendmmsg(
                    self.sock.as_raw_fd(),
                    msgs.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            self.stats.send_syscalls += 1;
            if rc < 0 {
                let err = io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN | libc::ENOBUFS) => break,
                    Some(libc::EBADF | libc::ENOTSOCK | libc::EFAULT) => return Err(err),
                    Some(
                        libc::EINVAL
                        | libc::EIO
                        | libc::EMSGSIZE
                        | libc::ENOPROTOOPT
                        | libc::EOPNOTSUPP,
                    ) if segs[0] > 1 => {
                        // Segmentation refused (old kernel, no checksum
                        // offload on the route): send datagram by datagram.
                        self.gso = false;
                        continue;
                    }
                    _ => {
                        // The first message was refused: drop its datagrams
                        // (one destination) and go on.
                        self.last_send_error = Some(err.kind());
                        self.stats.drops[WireDrop::SendFailed as usize] += segs[0] as u64;
                        batch.head = last[0] + 1;
                        continue;
                    }
                }
            }
            let done = (rc as usize).min(n);
            if done == 0 {
                break;
            }
            for (m, k) in msgs.iter().zip(segs).take(done) {
                self.stats.bytes_sent += u64::from(m.msg_len);
                self.stats.datagrams_sent += k as u64;
                self.stats.gso_runs += u64::from(k > 1);
                sent += k;
            }
            batch.head = last[done - 1] + 1;
        }
        Ok(sent)
    }

    /// Draws the injected faults of the datagrams queued since the last
    /// call (see the module documentation), once the datagram held back
    /// last has let those queued since go first (up to the rest of its
    /// count). `now` tells whether it waited long enough.
    fn inject_faults(&mut self, batch: &mut SendBatch, now: Instant) {
        if let Some((h, since)) = batch.held.take() {
            let queued_since = batch.entries.len() - 1 - h;
            let e = &mut batch.entries[h];
            let k = usize::from(e.hold).min(queued_since);
            e.hold -= k as u8;
            if k > 0 && !e.reordered {
                e.reordered = true;
                self.stats.injected_reorders += 1;
            }
            if e.hold > 0 && now.duration_since(since) < REORDER_HOLD_MAX {
                // Still waiting, last again.
                batch.held = Some((h + k, since));
            } else {
                e.hold = 0;
            }
            if k > 0 {
                batch.entries[h..=h + k].rotate_left(1);
                // The entries that moved up are those not judged yet.
                batch.judged = batch.judged.min(h);
            }
        }
        let c = self.cfg;
        if c.drop_rate_ppm == 0 && c.dup_rate_ppm == 0 && c.reorder_rate_ppm == 0 {
            batch.judged = batch.entries.len();
            return;
        }
        let mut i = batch.judged;
        while i < batch.entries.len() {
            let e = &mut batch.entries[i];
            if e.judged {
                i += 1;
                continue;
            }
            e.judged = true;
            let kind = batch.arena.get(e.start + 3).copied();
            if !kind
                .and_then(crate::wire::Kind::from_u8)
                .is_some_and(crate::wire::Kind::is_data_path)
            {
                i += 1;
                continue;
            }
            if self.rng.chance_ppm(c.drop_rate_ppm) {
                e.dropped = true;
                self.stats.count_drop(WireDrop::InjectedDrop);
                i += 1;
                continue;
            }
            if self.rng.chance_ppm(c.reorder_rate_ppm) {
                // Behind the next one to three datagrams.
                let want = 1 + (self.rng.next_u64() % 3) as usize;
                let last = batch.entries.len() - 1;
                let k = want.min(last - i);
                if k > 0 {
                    batch.entries[i..=i + k].rotate_left(1);
                    batch.entries[i + k].reordered = true;
                    self.stats.injected_reorders += 1;
                }
                if k < want {
                    // Now last: it waits for more. One held back before
                    // (last until now) was just passed, and goes.
                    if let Some((h, _)) = batch.held.take() {
                        debug_assert_eq!(h, last);
                        batch.entries[last - 1].hold = 0;
                    }
                    batch.entries[last].hold = (want - k) as u8;
                    batch.held = Some((last, now));
                }
                // Entry `i` is now the next one (not judged yet), or this
                // one again if nothing followed (judged: skipped).
                continue;
            }
            if self.rng.chance_ppm(c.dup_rate_ppm) {
                // The copy points at the same bytes; it is judged no further.
                let copy = *e;
                batch.entries.insert(i + 1, copy);
                if let Some((h, _)) = batch.held.as_mut() {
                    // Held back, hence last: after the copy.
                    *h += 1;
                }
                self.stats.injected_duplicates += 1;
                i += 1;
            }
            i += 1;
        }
        batch.judged = batch.entries.len();
    }

    /// Whether received runs may arrive coalesced (`UDP_GRO` accepted).
    pub fn gro_active(&self) -> bool {
        self.gro
    }

    /// Whether sends still use UDP segmentation offload (it is turned off
    /// when the kernel refuses it).
    pub fn gso_active(&self) -> bool {
        self.gso
    }

    /// Receives up to [`PortConfig::batch`] datagrams with one `recvmmsg`
    /// (non-blocking) and calls `f(source, datagram)` for each. Datagrams
    /// larger than [`PortConfig::max_datagram`] are dropped as
    /// [`WireDrop::TruncatedDatagram`]. On a dual-stack IPv6 socket, an IPv4
    /// source comes back as a plain IPv4 address (not `::ffff:a.b.c.d`).
    /// Returns the number of datagrams taken (0 when none was waiting); when
    /// it equals the batch size, more may be waiting.
    pub fn recv_batch(&mut self, mut f: impl FnMut(SocketAddr, &[u8])) -> io::Result<usize> {
        self.recv_batch_until(|src, d| {
            f(src, d);
            true
        })
    }

    /// As [`UdpPort::recv_batch`], but `f` may stop the hand-over by
    /// returning false: the datagrams after that one stay with the port and
    /// come first in the next call, before any new `recvmmsg`. Returns the
    /// number of datagrams taken in this call (handed over or dropped).
    pub fn recv_batch_until(
        &mut self,
        f: impl FnMut(SocketAddr, &[u8]) -> bool,
    ) -> io::Result<usize> {
        if self.rx_next.0 >= self.rx_entries.len() && self.receive()? == 0 {
            return Ok(0);
        }
        Ok(self.hand_over(f))
    }

    /// Reads the kernel's drop count at this socket now (`SO_MEMINFO`) and
    /// counts what it grew by. The control messages of arriving datagrams
    /// carry the same count, but only a datagram queued after the drops
    /// tells of them: this is for the end of a burst (the engine calls it
    /// before it sleeps, when datagrams came since the last call).
    pub fn sync_socket_drops(&mut self) {
        let mut info = [0u32; SK_MEMINFO_VARS];
        let mut len = size_of_val(&info) as libc::socklen_t;
        // SAFETY: `info` is a live, writable buffer of `len` bytes, and the
        // kernel writes at most `len` bytes there and the length to `len`.
        let rc = unsafe {
            libc::getsockopt(
                self.sock.as_raw_fd(),
                libc::SOL_SOCKET,
                SO_MEMINFO,
                info.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let at = libc::SK_MEMINFO_DROPS as usize;
        if rc == 0 && len as usize >= (at + 1) * size_of::<u32>() {
            self.note_socket_drops(info[at]);
        }
    }

    /// The kernel's running count of drops at this socket was `n` (it
    /// wraps): what it grew by since last seen was lost there. A count
    /// older than the one last seen (a datagram queued before an
    /// `SO_MEMINFO` reading) is ignored.
    fn note_socket_drops(&mut self, n: u32) {
        let new = n.wrapping_sub(self.socket_drops);
        if new != 0 && new < 1 << 31 {
            self.stats.socket_overflows += new as u64;
            self.socket_drops = n;
        }
    }

    /// Whether datagrams received are still waiting to be handed over.
    pub fn has_pending(&self) -> bool {
        self.rx_next.0 < self.rx_entries.len()
    }

    /// One `recvmmsg` into the receive buffers; fills `rx_entries` and
    /// counts. Returns the number of buffers filled.
    fn receive(&mut self) -> io::Result<usize> {
        self.rx_entries.clear();
        self.rx_next = (0, 0);
        let slot = self.rx_slot;
        let n = self.cfg.batch;
        let mut addrs = [RawAddr::empty(); MAX_BATCH];
        let mut iovs = [empty_iovec(); MAX_BATCH];
        let mut msgs = [empty_mmsghdr(); MAX_BATCH];
        let mut ctl = [CmsgSpace([0; CMSG_SPACE_BYTES]); MAX_BATCH];
        for (i, chunk) in self.rx.chunks_exact_mut(slot).take(n).enumerate() {
            iovs[i] = libc::iovec {
                iov_base: chunk.as_mut_ptr().cast(),
                iov_len: chunk.len(),
            };
            let m = &mut msgs[i].msg_hdr;
            m.msg_name = (&mut addrs[i] as *mut RawAddr).cast();
            m.msg_namelen = size_of::<RawAddr>() as libc::socklen_t;
            m.msg_iov = &mut iovs[i];
            m.msg_iovlen = 1;
            if self.gro || self.drops_reported {
                m.msg_control = (&mut ctl[i] as *mut CmsgSpace).cast();
                m.msg_controllen = CMSG_SPACE_BYTES as _;
            }
        }
        let rc = loop {
            // SAFETY: `msgs[..n]` point at `n` distinct, live buffers of
            // `slot` bytes in `self.rx`, at `addrs` entries large enough for
            // any socket address and at `ctl` buffers (lengths passed in
            // `msg_namelen`, `msg_controllen`); nothing else borrows them
            // during the call. The kernel writes at most those lengths. A
            // null timeout is allowed.
            let rc = unsafe {
                libc::recvmmsg(
                    self.sock.as_raw_fd(),
                    msgs.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            self.stats.recv_syscalls += 1;
            if rc >= 0 {
                break rc as usize;
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => {
                    self.stats.recv_empty += 1;
                    return Ok(0);
                }
                // An ICMP error reported for an earlier send: not about
                // anything waiting here.
                Some(libc::ECONNREFUSED | libc::EHOSTUNREACH | libc::ENETUNREACH) => return Ok(0),
                _ => return Err(err),
            }
        };
        for (i, m) in msgs.iter().enumerate().take(rc.min(n)) {
            let len = (m.msg_len as usize).min(slot);
            let h = &m.msg_hdr;
            let control = if self.gro || self.drops_reported {
                // `msg_controllen` is a size_t with glibc, a socklen_t with musl.
                #[allow(clippy::unnecessary_cast)]
                let used = (h.msg_controllen as usize).min(CMSG_SPACE_BYTES);
                parse_control(&ctl[i].0[..used])
            } else {
                RxControl::default()
            };
            if let Some(n) = control.socket_drops {
                self.note_socket_drops(n);
            }
            // With UDP_GRO, the kernel may hand over a run of datagrams of
            // one size (the last may be shorter) in one buffer.
            let seg = control
                .gro_segment
                .filter(|&g| g > 0 && self.gro)
                .unwrap_or(len.max(1));
            let count = len.div_ceil(seg).max(1);
            if count > 1 {
                self.stats.gro_runs += 1;
            }
            self.stats.datagrams_received += count as u64;
            self.stats.bytes_received += len as u64;
            let src = if h.msg_flags & libc::MSG_TRUNC != 0 {
                self.stats.drops[WireDrop::TruncatedDatagram as usize] += count as u64;
                None
            } else {
                addrs[i].get(h.msg_namelen)
            };
            self.rx_entries.push(RxEntry {
                src,
                len,
                seg,
                count,
            });
        }
        Ok(self.rx_entries.len())
    }

    /// Hands the received datagrams over from `rx_next` on, until `f`
    /// returns false or none is left. Returns the number taken.
    fn hand_over(&mut self, mut f: impl FnMut(SocketAddr, &[u8]) -> bool) -> usize {
        let size = self.cfg.max_datagram;
        let slot = self.rx_slot;
        let mut taken = 0;
        while let Some(&e) = self.rx_entries.get(self.rx_next.0) {
            let i = self.rx_next.0;
            let Some(src) = e.src else {
                taken += e.count;
                self.rx_next = (i + 1, 0);
                continue;
            };
            let buf = &self.rx[i * slot..i * slot + e.len];
            if e.len == 0 {
                taken += 1;
                self.rx_next = (i + 1, 0);
                if !f(src, buf) {
                    return taken;
                }
                continue;
            }
            // Each datagram is judged alone, as if it came by itself.
            let mut at = self.rx_next.1;
            while at < e.len {
                let end = (at + e.seg).min(e.len);
                let d = &buf[at..end];
                at = end;
                taken += 1;
                if d.len() > size {
                    self.stats.count_drop(WireDrop::TruncatedDatagram);
                } else if !f(src, d) {
                    self.rx_next = if at < e.len { (i, at) } else { (i + 1, 0) };
                    return taken;
                }
            }
            self.rx_next = (i + 1, 0);
        }
        taken
    }
}

#[cfg(test)]
mod tests;
