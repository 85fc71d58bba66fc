//! The `AF_XDP` socket's shared pieces: a ring mapping, the UMEM, the
//! `SOL_XDP` options, and the transmit half (tx ring, completion ring and
//! free chunks) that [`super::XdpSocket`] and [`super::XdpTx`] share.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use super::{ctx, XdpCounters, CHUNK};

/// A new `AF_XDP` socket.
pub(super) fn socket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call with integer arguments.
    let fd =
        crate::cvt(unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })
            .map_err(|e| ctx("socket(AF_XDP)", e))?;
    // SAFETY: `fd` was just returned by `socket` and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The ring offsets of socket `fd` (`XDP_MMAP_OFFSETS`).
pub(super) fn offsets(fd: &OwnedFd) -> io::Result<libc::xdp_mmap_offsets> {
    // SAFETY: all-zero bytes are a valid `xdp_mmap_offsets` (integers).
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of_val(&off) as libc::socklen_t;
    // SAFETY: `off` and `len` live across the call; the kernel writes at
    // most `len` bytes into `off`.
    crate::cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            (&mut off as *mut libc::xdp_mmap_offsets).cast(),
            &mut len,
        )
    })
    .map_err(|e| ctx("getsockopt(XDP_MMAP_OFFSETS)", e))?;
    Ok(off)
}

/// Bind socket `fd` to queue 0 of interface `ifindex` in copy mode.
pub(super) fn bind(fd: &OwnedFd, ifindex: u32) -> io::Result<()> {
    // SAFETY: all-zero bytes are a valid `sockaddr_xdp` (integers).
    let mut sa: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
    sa.sxdp_family = libc::AF_XDP as u16;
    sa.sxdp_flags = libc::XDP_COPY;
    sa.sxdp_ifindex = ifindex;
    sa.sxdp_queue_id = 0;
    // SAFETY: `sa` lives across the call and the length is its size.
    crate::cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_xdp).cast(),
            std::mem::size_of_val(&sa) as libc::socklen_t,
        )
    })
    .map(|_| ())
    .map_err(|e| ctx("bind(AF_XDP, XDP_COPY, queue 0)", e))
}

/// `SOL_XDP` socket option `opt` set to `v`.
pub(super) fn setopt<T>(fd: &OwnedFd, opt: libc::c_int, v: &T, name: &str) -> io::Result<()> {
    // SAFETY: `v` points to a `T` that lives across the call, and the length
    // passed is its size: the kernel reads exactly that.
    crate::cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
    .map_err(|e| ctx(&format!("setsockopt({name})"), e))
}

/// One ring mapping: producer and consumer indices and `n` entries of `T`.
pub(super) struct Ring<T> {
    map: *mut u8,
    len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    desc: *mut T,
    pub(super) n: u32,
}

impl<T> Ring<T> {
    /// Map the ring at page offset `pgoff` of `fd` with offsets `off`.
    pub(super) fn map(
        fd: &OwnedFd,
        off: &libc::xdp_ring_offset,
        n: u32,
        pgoff: u64,
    ) -> io::Result<Ring<T>> {
        let len = off.desc as usize + n as usize * std::mem::size_of::<T>();
        let index_ok = |o: u64| o.is_multiple_of(4) && o + 4 <= off.desc;
        if !index_ok(off.producer) || !index_ok(off.consumer) || !off.desc.is_multiple_of(8) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "XDP_MMAP_OFFSETS: an index outside its ring",
            ));
        }
        // SAFETY: a new shared mapping of one of the socket's rings, of the
        // length its offsets and size give; nothing else in the process
        // maps it.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff as libc::off_t,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(ctx("mmap(ring)", io::Error::last_os_error()));
        }
        let map: *mut u8 = map.cast();
        // SAFETY: the offsets lie inside the mapping (checked above: the
        // indices are aligned u32 before the entries, which start 8-byte
        // aligned at `desc` and fill the rest), and the mapping lives as
        // long as the ring.
        unsafe {
            Ok(Ring {
                map,
                len,
                producer: map.add(off.producer as usize).cast(),
                consumer: map.add(off.consumer as usize).cast(),
                desc: map.add(off.desc as usize).cast(),
                n,
            })
        }
    }

    pub(super) fn producer(&self) -> &AtomicU32 {
        // SAFETY: an aligned u32 inside the live mapping, changed by the
        // kernel concurrently, so only touched as an atomic.
        unsafe { &*self.producer }
    }

    pub(super) fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.consumer }
    }

    /// Entry `i` (any index: taken modulo the ring's size).
    pub(super) fn entry(&self, i: u32) -> *mut T {
        // SAFETY: `i & (n - 1) < n` (n a power of two): inside the array.
        unsafe { self.desc.add((i & (self.n - 1)) as usize) }
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, of `len` bytes; no reference
        // into it outlives the ring.
        unsafe { libc::munmap(self.map.cast(), self.len) };
    }
}

/// The UMEM: one anonymous mapping of chunks of [`CHUNK`] bytes,
/// unmapped on drop.
pub(super) struct Umem {
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
}

impl Umem {
    /// `frames` chunks, mapped and registered with socket `fd`.
    pub(super) fn new(fd: &OwnedFd, frames: u32) -> io::Result<Umem> {
        let len = frames as usize * CHUNK as usize;
        // SAFETY: a new private anonymous mapping; nothing else refers to it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(ctx("mmap(UMEM)", io::Error::last_os_error()));
        }
        // From here the mapping is unmapped when `umem` drops, on an error
        // path too.
        let umem = Umem {
            ptr: ptr.cast(),
            len,
        };
        let reg = libc::xdp_umem_reg {
            addr: umem.ptr as u64,
            len: len as u64,
            chunk_size: CHUNK,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setopt(fd, libc::XDP_UMEM_REG, &reg, "XDP_UMEM_REG")?;
        Ok(umem)
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: the UMEM `new` mapped, of this length. It drops last of
        // its socket's fields (or on a failed open), when no slice of it
        // is alive and the socket that wrote into it is closed.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The transmit half of a socket: its tx ring, its completion ring, and
/// the transmit chunks (those from `base` to `end` of the UMEM) not on
/// the tx ring.
pub(super) struct TxHalf {
    pub(super) tx: Ring<libc::xdp_desc>,
    comp: Ring<u64>,
    base: u64,
    end: u64,
    free: Vec<u64>,
    /// Frames placed on the tx ring since the last kick.
    pending: usize,
}

impl TxHalf {
    /// The transmit half over chunks `first..end` (chunk numbers) of the
    /// UMEM, with its rings.
    pub(super) fn new(tx: Ring<libc::xdp_desc>, comp: Ring<u64>, first: u32, end: u32) -> TxHalf {
        TxHalf {
            tx,
            comp,
            base: u64::from(first) * u64::from(CHUNK),
            end: u64::from(end) * u64::from(CHUNK),
            free: (first..end)
                .map(|k| u64::from(k) * u64::from(CHUNK))
                .collect(),
            pending: 0,
        }
    }

    /// Where the transmit chunks start: below are receive chunks.
    pub(super) fn base(&self) -> u64 {
        self.base
    }

    /// Transmit chunks the kernel holds (on the tx ring or being sent).
    pub(super) fn in_flight(&self) -> usize {
        ((self.end - self.base) / u64::from(CHUNK)) as usize - self.free.len()
    }

    /// Take the chunks the kernel has sent back onto the free list.
    fn reclaim(&mut self, c: &mut XdpCounters) {
        let cons = self.comp.consumer().load(Ordering::Relaxed);
        // Acquire: pairs with the kernel's Release after its entries.
        let prod = self.comp.producer().load(Ordering::Acquire);
        let n = prod.wrapping_sub(cons).min(self.comp.n);
        for k in 0..n {
            // SAFETY: an entry the kernel published and does not rewrite
            // until our consumer index passes it.
            let a = unsafe { self.comp.entry(cons.wrapping_add(k)).read() };
            if a < self.base || a >= self.end || !a.is_multiple_of(u64::from(CHUNK)) {
                c.bad_desc += 1;
            } else {
                self.free.push(a);
            }
        }
        // Release: read before the kernel reuses the entries.
        self.comp
            .consumer()
            .store(cons.wrapping_add(n), Ordering::Release);
    }

    /// Place `frame` on the tx ring, copied into a free chunk of the UMEM
    /// at `umem`: false, counted, when no chunk is free or the frame is
    /// not an Ethernet frame's length.
    pub(super) fn send(&mut self, umem: *mut u8, frame: &[u8], c: &mut XdpCounters) -> bool {
        if frame.len() < 14 || frame.len() > CHUNK as usize {
            c.tx_bad_len += 1;
            return false;
        }
        if self.free.is_empty() {
            self.reclaim(c);
        }
        let prod = self.tx.producer().load(Ordering::Relaxed);
        // Acquire: the kernel has read the entries it consumed.
        let cons = self.tx.consumer().load(Ordering::Acquire);
        let Some(&a) = self.free.last() else {
            c.tx_full += 1;
            return false;
        };
        if prod.wrapping_sub(cons) >= self.tx.n {
            c.tx_full += 1;
            return false;
        }
        self.free.pop();
        // SAFETY: `a` is a free transmit chunk (on no ring: the kernel is
        // done with it) of the UMEM at `umem` (the caller's, of which
        // `base..end` are the transmit chunks), and the frame fits in it.
        unsafe { std::ptr::copy_nonoverlapping(frame.as_ptr(), umem.add(a as usize), frame.len()) };
        let d = libc::xdp_desc {
            addr: a,
            len: frame.len() as u32,
            options: 0,
        };
        // SAFETY: a tx entry past the kernel's consumer index (room checked
        // above), which the kernel does not read before we publish it.
        unsafe { self.tx.entry(prod).write(d) };
        // Release: the frame and its descriptor are written before the
        // kernel may read them.
        self.tx
            .producer()
            .store(prod.wrapping_add(1), Ordering::Release);
        self.pending += 1;
        c.tx_frames += 1;
        true
    }

    /// Ask the kernel (through socket `fd`) to send what the tx ring
    /// holds. In copy mode it sends at most a few dozen frames a call
    /// (answering `EAGAIN` while more wait), so this calls again until the
    /// ring is empty or the device refuses; then it takes back the chunks
    /// sent.
    pub(super) fn flush(&mut self, fd: RawFd, c: &mut XdpCounters) {
        if self.pending == 0 {
            return;
        }
        self.pending = 0;
        for _ in 0..=self.tx.n {
            // SAFETY: a `sendto` of no bytes from a null pointer to no
            // address: with a tx ring the kernel sends the ring's entries
            // and reads nothing from the (empty) buffer.
            let r = unsafe {
                libc::sendto(
                    fd,
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            let again = r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN);
            let empty = self.tx.consumer().load(Ordering::Acquire)
                == self.tx.producer().load(Ordering::Relaxed);
            if empty || !again {
                break;
            }
        }
        self.reclaim(c);
    }
}
