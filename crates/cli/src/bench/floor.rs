//! The floor: a plain single-producer/single-consumer shared-memory ring
//! between two processes with busy polling, the fastest honest way to move a
//! message from one process to another. unet's direct and engine paths are
//! judged against it.
//!
//! The shared memory is a `memfd` mapped `MAP_SHARED` by both processes (the
//! child inherits the descriptor across `exec`). It holds a control page with
//! each ring's consumer position, each in its own cache line, then two rings:
//! ring 0 carries parent → child, ring 1 child → parent.
//!
//! A ring is an array of slots sized for the run's message size: 8 + size
//! bytes rounded up to the alignment (`--floor-align`, 64 by default, so a
//! record starts a cache line). Every run gets a fresh (zeroed) ring and
//! uses one message size, so this is the variable-length byte ring with
//! records padded to the alignment, minus the wrap-around padding. A slot
//! holds an 8-byte header followed by the payload, so the header shares its
//! cache line with the first payload bytes. The header is `tag << 32 | len`,
//! with `tag = lap + 1` (lap = how many times the producer has gone round the
//! ring): the producer copies the payload in, then stores the header with
//! Release; the consumer spins on the header of the slot at its position
//! until the tag is the one it expects (a stale header is always one lap
//! old, so no zeroing is needed), copies the payload out into its own buffer
//! and publishes its new position in its own cache line with Release every
//! eighth of the ring and whenever it finds the ring empty. The producer
//! caches the consumer's position and reads the shared one only when its
//! cached value says the ring is full.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::stats::{self, Samples};
use unet_abi::copy::copy_bytes;

pub mod modes;

/// `len` flag: the peer stops after this record (stream: acknowledge first).
pub const STOP: u32 = 1 << 31;
/// `len` flag: stream receiver acknowledges and restarts its count.
pub const SYNC: u32 = 1 << 30;
const LEN_MASK: u32 = (1 << 30) - 1;

const CTRL_BYTES: usize = 4096;
/// Offsets of the two consumer positions in the control page (two cache
/// lines apart so the adjacent-line prefetcher does not pair them).
const CONS_OFF: [usize; 2] = [0, 256];
/// How long a spin may last before the peer is declared dead.
const STALL: Duration = Duration::from_secs(20);

/// A `memfd` mapped shared.
pub struct Shm {
    ptr: *mut u8,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is shared memory that another process writes
// anyway; every access goes through the rings' atomics and copies under
// their rules (one producer and one consumer per ring), whichever thread
// of this process holds each end; `ptr` stays valid until drop.
unsafe impl Send for Shm {}
// SAFETY: as for Send.
unsafe impl Sync for Shm {}

impl Shm {
    /// Creates a zero-filled shared mapping of `len` bytes (close-on-exec).
    pub fn create(len: usize) -> io::Result<Shm> {
        // SAFETY: the name is a valid NUL-terminated string; memfd_create has
        // no other preconditions.
        let fd = unsafe { libc::memfd_create(c"unet-floor".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by memfd_create and is owned by no one else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: plain syscall on a descriptor we own.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Self::map(fd, len)
    }

    /// Maps a descriptor inherited from the parent; its size is the mapping's.
    pub fn open(fd: RawFd) -> io::Result<Shm> {
        // SAFETY: the parent passed us this descriptor number and nothing else
        // in this process owns it; we take ownership exactly once.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: `st` is a plain-old-data out-parameter of the right type.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor and a valid pointer to `st`.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Self::map(fd, st.st_size as usize)
    }

    fn map(fd: OwnedFd, len: usize) -> io::Result<Shm> {
        // SAFETY: a fresh shared mapping of a descriptor we own; the kernel
        // picks the address, so no existing memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Shm {
            ptr: ptr.cast(),
            len,
            fd,
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// A second mapping of the same pages at another address (a mapping
    /// of a duplicate of the descriptor), as a second process would have.
    pub fn alias(&self) -> io::Result<Shm> {
        // SAFETY: fcntl on a descriptor we own; F_DUPFD_CLOEXEC makes a new
        // descriptor, which `open` takes ownership of.
        let fd = unsafe { libc::fcntl(self.fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Self::open(fd)
    }

    /// The address of the mapping (to tell two mappings apart).
    pub fn addr(&self) -> usize {
        self.ptr as usize
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `map`; every Producer
        // and Consumer borrowing it has been dropped (they borrow `self`).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Slot size and count of each ring, decided by the parent per run and
/// handed to the child on its command line as `slot0:n0:slot1:n1`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Geometry {
    pub slot: [usize; 2],
    pub nslots: [usize; 2],
}

impl Geometry {
    /// Ring 0 sized for `size`-byte messages in about `ring_bytes`, ring 1
    /// for `back`-byte messages (the echo or the acknowledgments); slots are
    /// multiples of `align` bytes (a power of two, 8 to 4096).
    pub fn new(size: usize, back: usize, ring_bytes: usize, align: usize) -> Geometry {
        let s0 = slot_for(size, align);
        let s1 = slot_for(back, align);
        let n0 = (ring_bytes / s0).max(2);
        let n1 = if back == size { n0 } else { 64 };
        Geometry {
            slot: [s0, s1],
            nslots: [n0, n1],
        }
    }

    fn ring_len(&self, r: usize) -> usize {
        (self.slot[r] * self.nslots[r]).next_multiple_of(4096)
    }

    fn ring_off(&self, r: usize) -> usize {
        if r == 0 {
            CTRL_BYTES
        } else {
            CTRL_BYTES + self.ring_len(0)
        }
    }

    pub fn total_len(&self) -> usize {
        CTRL_BYTES + self.ring_len(0) + self.ring_len(1)
    }

    pub fn to_arg(self) -> String {
        format!(
            "{}:{}:{}:{}",
            self.slot[0], self.nslots[0], self.slot[1], self.nslots[1]
        )
    }

    pub fn parse(s: &str) -> Result<Geometry, String> {
        let v: Vec<usize> = s
            .split(':')
            .map(|x| x.parse().map_err(|_| format!("bad geometry {s:?}")))
            .collect::<Result<_, _>>()?;
        if v.len() != 4 || v.contains(&0) || !v[0].is_multiple_of(8) || !v[2].is_multiple_of(8) {
            return Err(format!("bad geometry {s:?}"));
        }
        Ok(Geometry {
            slot: [v[0], v[2]],
            nslots: [v[1], v[3]],
        })
    }
}

fn slot_for(size: usize, align: usize) -> usize {
    (8 + size).next_multiple_of(align)
}

/// The peer stopped answering (or died).
#[derive(Debug)]
pub struct Stalled;

impl std::fmt::Display for Stalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the other process stopped answering on the floor ring")
    }
}

/// Bounded busy wait: spins on `ready`. Once a wait has lasted 5 µs it
/// yields the core every 5 µs (unet's blocking waits do the same), so that
/// two processes sharing one core do not spin against each other; it gives
/// up after `STALL`. The clock is read only every 64 spins.
#[inline(always)]
fn spin_until(mut ready: impl FnMut() -> bool) -> Result<(), Stalled> {
    const YIELD_EVERY: Duration = Duration::from_micros(5);
    let mut spins = 0u32;
    let mut start: Option<Instant> = None;
    let mut next_yield = YIELD_EVERY;
    while !ready() {
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins & 63 == 0 {
            let waited = start.get_or_insert_with(Instant::now).elapsed();
            if waited >= next_yield {
                std::thread::yield_now();
                next_yield = waited + YIELD_EVERY;
                if waited > STALL {
                    return Err(Stalled);
                }
            }
        }
    }
    Ok(())
}

pub struct Producer<'a> {
    base: *mut u8,
    slot: usize,
    nslots: u64,
    idx: usize,
    lap: u64,
    seq: u64,
    cached_cons: u64,
    cons: &'a AtomicU64,
}

pub struct Consumer<'a> {
    base: *const u8,
    slot: usize,
    nslots: usize,
    idx: usize,
    tag: u32,
    seq: u64,
    /// Publish the position every this many records (an eighth of the
    /// ring), so the shared line moves between cores rarely.
    publish_every: u32,
    unpublished: u32,
    cons: &'a AtomicU64,
}

/// Words of the control page's line at byte `off` (a multiple of 128
/// from 512, below the page's end: the consumer positions' lines are
/// below), for users of the rings that need words shared by both
/// processes (the forwarder floor's doorbell).
pub fn control_words(shm: &Shm, off: usize) -> &[AtomicU32; 16] {
    assert!(off >= 512 && off.is_multiple_of(128) && off + 64 <= CTRL_BYTES);
    // SAFETY: 64 bytes inside the control page of a live mapping, 128-byte
    // aligned; only ever accessed atomically, by both processes, and the
    // reference cannot outlive `shm`.
    unsafe { &*(shm.ptr.add(off) as *const [AtomicU32; 16]) }
}

fn cons_pos(shm: &Shm, r: usize) -> &AtomicU64 {
    // SAFETY: CONS_OFF[r] is 8-byte aligned and inside the control page of a
    // live mapping; the location is only ever accessed atomically, by both
    // processes, and the reference cannot outlive `shm`.
    unsafe { &*(shm.ptr.add(CONS_OFF[r]) as *const AtomicU64) }
}

/// The two ends of ring `r`. Each process must take only its own end.
pub fn producer(shm: &Shm, g: Geometry, r: usize) -> Producer<'_> {
    assert!(g.total_len() <= shm.len, "mapping smaller than geometry");
    Producer {
        // SAFETY: the ring lies inside the mapping (asserted above).
        base: unsafe { shm.ptr.add(g.ring_off(r)) },
        slot: g.slot[r],
        nslots: g.nslots[r] as u64,
        idx: 0,
        lap: 0,
        seq: 0,
        cached_cons: 0,
        cons: cons_pos(shm, r),
    }
}

pub fn consumer(shm: &Shm, g: Geometry, r: usize) -> Consumer<'_> {
    assert!(g.total_len() <= shm.len, "mapping smaller than geometry");
    Consumer {
        // SAFETY: the ring lies inside the mapping (asserted above).
        base: unsafe { shm.ptr.add(g.ring_off(r)) },
        slot: g.slot[r],
        nslots: g.nslots[r],
        idx: 0,
        tag: 1,
        seq: 0,
        publish_every: (g.nslots[r] / 8).max(1) as u32,
        unpublished: 0,
        cons: cons_pos(shm, r),
    }
}

impl Producer<'_> {
    /// Copies `data` into the next slot and publishes it with `flags`.
    #[inline]
    pub fn send(&mut self, data: &[u8], flags: u32) -> Result<(), Stalled> {
        assert!(data.len() + 8 <= self.slot, "record larger than its slot");
        if self.seq - self.cached_cons >= self.nslots {
            let (seq, n, cons) = (self.seq, self.nslots, self.cons);
            let mut c = self.cached_cons;
            spin_until(|| {
                c = cons.load(Ordering::Acquire);
                seq - c < n
            })?;
            self.cached_cons = c;
        }
        // SAFETY: idx < nslots, so the slot lies inside the ring. The consumer
        // has published a position past this slot's previous record (checked
        // above), so it no longer reads the payload bytes we overwrite; it
        // will not read them again until it sees the header stored below with
        // Release, which orders these writes before it.
        unsafe {
            let p = self.base.add(self.idx * self.slot);
            copy_bytes(data.as_ptr(), p.add(8), data.len());
            let hdr = (((self.lap + 1) as u32 as u64) << 32) | (data.len() as u32 | flags) as u64;
            (*(p as *const AtomicU64)).store(hdr, Ordering::Release);
        }
        self.seq += 1;
        self.idx += 1;
        if self.idx as u64 == self.nslots {
            self.idx = 0;
            self.lap += 1;
        }
        Ok(())
    }
}

impl Consumer<'_> {
    /// The next record's payload and flags if one is there, without
    /// waiting; [`Consumer::consume`] moves past it.
    #[inline]
    pub fn peek(&self) -> Option<(&[u8], u32)> {
        // SAFETY: as in recv: the slot lies inside the ring and its header
        // is only ever accessed atomically.
        let hdr_ref = unsafe { &*(self.base.add(self.idx * self.slot) as *const AtomicU64) };
        let hdr = hdr_ref.load(Ordering::Acquire);
        if (hdr >> 32) as u32 != self.tag {
            return None;
        }
        let word = hdr as u32;
        let n = ((word & LEN_MASK) as usize).min(self.slot - 8);
        // SAFETY: the Acquire load saw the producer's Release store of this
        // header, so the payload is complete; the producer does not touch
        // the slot again until we publish a position past it (consume), and
        // the slice borrows self, which consume needs mutably.
        let payload = unsafe {
            std::slice::from_raw_parts((hdr_ref as *const AtomicU64 as *const u8).add(8), n)
        };
        Some((payload, word & !LEN_MASK))
    }

    /// Move past the record [`Consumer::peek`] returned.
    #[inline]
    pub fn consume(&mut self) {
        self.seq += 1;
        self.idx += 1;
        if self.idx == self.nslots {
            self.idx = 0;
            self.tag = self.tag.wrapping_add(1);
        }
        self.unpublished += 1;
        if self.unpublished == self.publish_every {
            self.unpublished = 0;
            self.cons.store(self.seq, Ordering::Release);
        }
    }

    /// Publish the position now if it moved since the last time (a
    /// reader about to sleep).
    pub fn publish(&mut self) {
        if self.unpublished != 0 {
            self.unpublished = 0;
            self.cons.store(self.seq, Ordering::Release);
        }
    }

    /// Waits for the next record, copies its payload into `out` (truncated
    /// to `out.len()`) and returns its length and flags.
    #[inline]
    pub fn recv(&mut self, out: &mut [u8]) -> Result<(usize, u32), Stalled> {
        // SAFETY: idx < nslots, so the slot lies inside the ring; the header is
        // 8-byte aligned (slots are multiples of 8 bytes in a page-aligned
        // ring) and only ever accessed atomically.
        let hdr_ref = unsafe { &*(self.base.add(self.idx * self.slot) as *const AtomicU64) };
        let tag = self.tag;
        let mut hdr = hdr_ref.load(Ordering::Acquire);
        if (hdr >> 32) as u32 != tag {
            // Caught up with the producer: a good moment to publish.
            if self.unpublished != 0 {
                self.unpublished = 0;
                self.cons.store(self.seq, Ordering::Release);
            }
            spin_until(|| {
                hdr = hdr_ref.load(Ordering::Acquire);
                (hdr >> 32) as u32 == tag
            })?;
        }
        let word = hdr as u32;
        let len = (word & LEN_MASK) as usize;
        let n = len.min(out.len()).min(self.slot - 8);
        // SAFETY: the Acquire load above saw the producer's Release store of
        // this header, so the payload is complete, and the producer will not
        // touch the slot again until we publish a position past it below.
        unsafe {
            let p = (hdr_ref as *const AtomicU64 as *const u8).add(8);
            copy_bytes(p, out.as_mut_ptr(), n);
        }
        self.consume();
        Ok((len, word & !LEN_MASK))
    }
}

/// Parent side of a floor ping-pong: `warmup` untimed round trips, then up
/// to `iters` timed ones (each timed on its own) or until `limit` elapses.
/// `sent` is called after each record is published (the forwarder floor
/// rings its doorbell there).
pub fn pingpong(
    shm: &Shm,
    g: Geometry,
    (size, warmup, iters): (usize, usize, usize),
    limit: Duration,
    mut sent: impl FnMut(),
) -> Result<Samples, Stalled> {
    let mut tx = producer(shm, g, 0);
    let mut rx = consumer(shm, g, 1);
    let out = vec![0xa5u8; size];
    let mut inb = vec![0u8; size];
    // A closure over `sent` (statically dispatched: nothing is added to
    // the floor's round trip when it does nothing).
    let mut rt = || {
        tx.send(&out, 0)?;
        sent();
        rx.recv(&mut inb)?;
        std::hint::black_box(&mut inb);
        Ok::<(), Stalled>(())
    };
    for _ in 0..warmup {
        rt()?;
    }
    let samples = stats::time_round_trips(iters, limit, &mut rt)?;
    tx.send(&[], STOP)?;
    sent();
    Ok(samples)
}

/// Child side of a floor ping-pong: echo until STOP.
pub fn pingpong_child(shm: &Shm, g: Geometry, size: usize) -> Result<(), Stalled> {
    echo_until_stop(shm, g, size, || {})
}

/// Echo every record of ring 0 on ring 1 until STOP, calling `answered`
/// after each answer is published (the forwarder floor rings its
/// doorbell there).
pub fn echo_until_stop(
    shm: &Shm,
    g: Geometry,
    size: usize,
    mut answered: impl FnMut(),
) -> Result<(), Stalled> {
    let mut rx = consumer(shm, g, 0);
    let mut tx = producer(shm, g, 1);
    let mut buf = vec![0u8; size];
    loop {
        let (len, flags) = rx.recv(&mut buf)?;
        if flags & STOP != 0 {
            return Ok(());
        }
        tx.send(&buf[..len], 0)?;
        answered();
    }
}

/// Result of one stream run: messages the receiver acknowledged, the time
/// from the start until the final acknowledgment arrived, and the messages
/// sent meanwhile (when each send is one message the receiver counts).
pub struct StreamRun {
    pub msgs: f64,
    pub elapsed: Duration,
    pub sent: Option<u64>,
}

impl StreamRun {
    pub fn msgs_per_s(&self) -> f64 {
        self.msgs / self.elapsed.as_secs_f64()
    }

    /// The share of the messages sent that the receiver got.
    pub fn delivered(&self) -> Option<f64> {
        self.sent.filter(|&n| n > 0).map(|n| self.msgs / n as f64)
    }
}

/// Parent side (sender) of a floor stream: warm up for `warmup`, then send
/// for `dur`; with `burst > 0` wait for an acknowledgment after each burst.
pub fn stream(
    shm: &Shm,
    g: Geometry,
    size: usize,
    burst: usize,
    warmup: Duration,
    dur: Duration,
) -> Result<StreamRun, Stalled> {
    let mut tx = producer(shm, g, 0);
    let mut rx = consumer(shm, g, 1);
    let out = vec![0xa5u8; size];
    let chunk = if burst > 0 { burst } else { 256 };
    // Returns the messages sent.
    let phase = |tx: &mut Producer<'_>, rx: &mut Consumer<'_>, d: Duration| {
        let mut ack = [0u8; 8];
        let start = Instant::now();
        let mut sent = 0u64;
        loop {
            for _ in 0..chunk {
                tx.send(&out, 0)?;
            }
            sent += chunk as u64;
            if burst > 0 {
                rx.recv(&mut ack)?;
            }
            if start.elapsed() >= d {
                return Ok::<u64, Stalled>(sent);
            }
        }
    };
    phase(&mut tx, &mut rx, warmup)?;
    tx.send(&[], SYNC)?;
    wait_flag(&mut rx, SYNC)?;
    let start = Instant::now();
    let sent = phase(&mut tx, &mut rx, dur)?;
    tx.send(&[], STOP)?;
    let msgs = wait_flag(&mut rx, STOP)?;
    Ok(StreamRun {
        msgs: msgs as f64,
        elapsed: start.elapsed(),
        sent: Some(sent),
    })
}

fn wait_flag(rx: &mut Consumer<'_>, flag: u32) -> Result<u64, Stalled> {
    let mut ack = [0u8; 8];
    loop {
        let (_, f) = rx.recv(&mut ack)?;
        if f & flag != 0 {
            return Ok(u64::from_le_bytes(ack));
        }
    }
}

/// Child side (receiver) of a floor stream: copy every message out, count,
/// acknowledge every `burst` messages, on SYNC and on STOP.
pub fn stream_child(shm: &Shm, g: Geometry, size: usize, burst: usize) -> Result<(), Stalled> {
    let mut rx = consumer(shm, g, 0);
    let mut tx = producer(shm, g, 1);
    let mut buf = vec![0u8; size];
    let mut count = 0u64;
    let mut in_burst = 0usize;
    loop {
        let (_, flags) = rx.recv(&mut buf)?;
        // The payload is copied out like a real receiver's; keep the copy.
        std::hint::black_box(&mut buf);
        if flags & (SYNC | STOP) != 0 {
            tx.send(&count.to_le_bytes(), flags)?;
            if flags & STOP != 0 {
                return Ok(());
            }
            count = 0;
            in_burst = 0;
            continue;
        }
        count += 1;
        if burst > 0 {
            in_burst += 1;
            if in_burst == burst {
                in_burst = 0;
                tx.send(&count.to_le_bytes(), 0)?;
            }
        }
    }
}

/// Clears close-on-exec on `fd` so a child started now inherits it.
pub fn set_inheritable(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller owns; only the FD_CLOEXEC bit changes.
    let r = unsafe { libc::fcntl(fd, libc::F_SETFD, if on { 0 } else { libc::FD_CLOEXEC }) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_roundtrip() {
        let g = Geometry::new(64, 64, 1 << 20, 64);
        assert_eq!(g.slot, [128, 128]);
        assert_eq!(Geometry::parse(&g.to_arg()).unwrap(), g);
        let g = Geometry::new(65536, 8, 1 << 20, 64);
        assert_eq!(g.slot, [65600, 64]);
        assert!(g.nslots[0] >= 2);
        let g = Geometry::new(64, 8, 1 << 20, 32);
        assert_eq!(g.slot, [96, 32]);
        assert_eq!(Geometry::parse(&g.to_arg()).unwrap(), g);
    }

    /// A second mapping lies elsewhere but holds the same pages: a ring
    /// written through one is read through the other.
    #[test]
    fn an_alias_maps_the_same_pages_elsewhere() {
        let g = Geometry::new(64, 64, 4 * 128, 64);
        let shm = Shm::create(g.total_len()).unwrap();
        let other = shm.alias().unwrap();
        assert_ne!(shm.addr(), other.addr());
        assert_ne!(shm.fd(), other.fd());
        let mut tx = producer(&shm, g, 1);
        let mut rx = consumer(&other, g, 1);
        let mut out = [0u8; 64];
        for i in 0..10u8 {
            tx.send(&[i; 64], 0).unwrap();
            assert_eq!(rx.recv(&mut out).unwrap(), (64, 0));
            assert_eq!(out, [i; 64]);
        }
    }

    #[test]
    fn ring_in_one_process() {
        let g = Geometry::new(100, 100, 4 * 192, 64);
        let shm = Shm::create(g.total_len()).unwrap();
        let mut tx = producer(&shm, g, 0);
        let mut rx = consumer(&shm, g, 0);
        let mut out = [0u8; 100];
        for i in 0..50u8 {
            tx.send(&[i; 100][..(i as usize % 100)], 0).unwrap();
            let (n, f) = rx.recv(&mut out).unwrap();
            assert_eq!((n, f), (i as usize % 100, 0));
            assert!(out[..n].iter().all(|&b| b == i));
        }
        tx.send(&[], STOP).unwrap();
        assert_eq!(rx.recv(&mut out).unwrap(), (0, STOP));
    }
}
