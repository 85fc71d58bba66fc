//! The few operating-system facilities unet needs: shared-memory segments
//! (`memfd` + `mmap`), futexes, eventfds, epoll, and file-descriptor passing
//! over Unix sockets. Every `unsafe` block here wraps one system call or one
//! access to a mapping this module created and checked.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

pub fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_isize(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Run a system call again while a signal interrupts it (EINTR): a process
/// that takes signals (timers, profilers) must not see our calls fail.
pub fn retry<T>(mut call: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match call() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}

/// A shared-memory segment: an anonymous memory file (nothing appears in
/// `/dev/shm` or anywhere else; the memory goes away with the last mapping
/// and descriptor) mapped read-write, shared.
pub struct Segment {
    fd: OwnedFd,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all accesses through it go via
// atomics, volatile reads/writes or byte copies by the code that owns it.
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

impl Segment {
    /// Create a zero-filled segment of `len` bytes named `name` (the name is
    /// only a label visible in `/proc/PID/fd`).
    pub fn create(name: &str, len: usize) -> io::Result<Segment> {
        let cname = std::ffi::CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: memfd_create reads a NUL-terminated string we own.
        let fd = cvt(unsafe {
            libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
        })?;
        // SAFETY: fd is a fresh descriptor that we now own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: ftruncate on our own descriptor.
        cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) })?;
        // Seal the size: whoever receives this descriptor cannot shrink the
        // file under our mapping (which would make our accesses fault).
        // SAFETY: fcntl on our own descriptor.
        cvt(unsafe {
            libc::fcntl(
                fd.as_raw_fd(),
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
            )
        })?;
        Self::map(fd, len, true)
    }

    /// Read up to `max` bytes from the start of a memory file received from
    /// an untrusted process, without mapping it (the sender could shrink a
    /// mapped file and make our reads fault). Refuses anything that is not a
    /// memory file (reads of which never block).
    pub fn read_untrusted(fd: &OwnedFd, max: usize) -> io::Result<Vec<u8>> {
        // SAFETY: fcntl on a descriptor we hold; F_GET_SEALS only succeeds
        // on memory files.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) } < 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a memory file",
            ));
        }
        let mut buf = vec![0u8; max];
        let mut got = 0;
        while got < max {
            let n = retry(|| {
                // SAFETY: pread into the unfilled part of our buffer.
                cvt_isize(unsafe {
                    libc::pread(
                        fd.as_raw_fd(),
                        buf[got..].as_mut_ptr() as *mut libc::c_void,
                        max - got,
                        got as libc::off_t,
                    )
                })
            });
            match n {
                Ok(n) if n > 0 => got += n,
                _ => break,
            }
        }
        buf.truncate(got);
        Ok(buf)
    }

    /// Map a segment received from another process. The size is taken from
    /// the file and must be at least `min_len`.
    pub fn open(fd: OwnedFd, min_len: usize, writable: bool) -> io::Result<Segment> {
        // SAFETY: fstat fills a stat struct we own.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor and out-pointer.
        cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
        let len = st.st_size as usize;
        if len < min_len || len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("segment of {len} bytes is smaller than {min_len}"),
            ));
        }
        Self::map(fd, len, writable)
    }

    fn map(fd: OwnedFd, len: usize, writable: bool) -> io::Result<Segment> {
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: mapping a descriptor we own; the kernel picks the address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                // Populate now: a first touch on the data path would cost a
                // page fault of microseconds in the middle of a message.
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p as *mut u8).ok_or_else(io::Error::last_os_error)?;
        Ok(Segment { fd, ptr, len })
    }

    /// Base address (page aligned).
    pub fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Never empty; present for clippy's sake.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The memory file, to pass to another process.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }
    /// A pointer `off` bytes in, if `off + size` fits.
    pub fn at(&self, off: usize, size: usize) -> Option<NonNull<u8>> {
        if off.checked_add(size)? <= self.len {
            // SAFETY: in bounds of the mapping.
            Some(unsafe { self.ptr.add(off) })
        } else {
            None
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what map() mapped; nothing refers to it
        // after the owner drops the Segment.
        unsafe {
            libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len);
        }
    }
}

/// Sleep on a futex word in shared memory while it holds `expected`, at most
/// `timeout` (None: until woken).
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT (shared) on a valid aligned u32; the kernel only
    // reads it. Errors (EAGAIN, EINTR, ETIMEDOUT) all mean "re-check".
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            tsp,
            std::ptr::null::<u32>(),
            0,
        );
    }
}

/// The CPU the calling thread runs on now (it may move at any moment: a
/// hint), or `u32::MAX` if the kernel cannot say.
#[inline]
pub fn current_cpu() -> u32 {
    // SAFETY: sched_getcpu has no preconditions (a vDSO call on Linux).
    let c = unsafe { libc::sched_getcpu() };
    if c < 0 {
        u32::MAX
    } else {
        c as u32
    }
}

/// Wake up to `n` sleepers on a futex word.
pub fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: FUTEX_WAKE on a valid aligned u32; never blocks.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            n,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0,
        );
    }
}

#[repr(C)]
struct FutexWaitv {
    val: u64,
    uaddr: u64,
    flags: u32,
    reserved: u32,
}

const FUTEX2_SIZE_U32: u32 = 0x02;
const SYS_FUTEX_WAITV: libc::c_long = 449;

/// Sleep until any of the words changes from its expected value (Linux
/// `futex_waitv`), at most `timeout`. Falls back to waiting on the first word
/// with a short timeout when the kernel lacks `futex_waitv`.
pub fn futex_wait_any(words: &[(&AtomicU32, u32)], timeout: Option<Duration>) {
    if words.is_empty() {
        return;
    }
    if words.len() == 1 {
        return futex_wait(words[0].0, words[0].1, timeout);
    }
    let v: Vec<FutexWaitv> = words
        .iter()
        .take(128)
        .map(|(w, e)| FutexWaitv {
            val: *e as u64,
            uaddr: w.as_ptr() as u64,
            flags: FUTEX2_SIZE_U32,
            reserved: 0,
        })
        .collect();
    // futex_waitv takes an absolute CLOCK_MONOTONIC deadline.
    let deadline = timeout.map(|d| {
        // SAFETY: clock_gettime fills a timespec we own.
        let mut now: libc::timespec = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        let total = now.tv_nsec as u128 + d.as_nanos();
        libc::timespec {
            tv_sec: now.tv_sec + (total / 1_000_000_000) as libc::time_t,
            tv_nsec: (total % 1_000_000_000) as libc::c_long,
        }
    });
    let tsp = deadline
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: the vector and deadline outlive the call; each uaddr is a valid
    // aligned u32 in memory that stays mapped (borrowed for the call).
    let r = unsafe {
        libc::syscall(
            SYS_FUTEX_WAITV,
            v.as_ptr(),
            v.len() as u32,
            0u32,
            tsp,
            libc::CLOCK_MONOTONIC,
        )
    };
    if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
        futex_wait(
            words[0].0,
            words[0].1,
            Some(
                timeout
                    .unwrap_or(Duration::from_millis(1))
                    .min(Duration::from_millis(1)),
            ),
        );
    }
}

/// A counter-mode eventfd, the doorbell a client rings to wake the engine.
pub struct EventFd(OwnedFd);

impl EventFd {
    /// A non-blocking eventfd.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd creates a new descriptor we own.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: fresh descriptor.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
    /// Wrap a received descriptor.
    pub fn from_fd(fd: OwnedFd) -> EventFd {
        EventFd(fd)
    }
    /// Ring: add one. Never blocks (non-blocking; a full counter is fine).
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a local.
        unsafe {
            libc::write(
                self.0.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            );
        }
    }
    /// Reset to zero; returns the count read.
    pub fn drain(&self) -> u64 {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a local; non-blocking.
        let r = unsafe {
            libc::read(
                self.0.as_raw_fd(),
                &mut v as *mut u64 as *mut libc::c_void,
                8,
            )
        };
        if r == 8 {
            v
        } else {
            0
        }
    }
    /// The descriptor.
    pub fn fd(&self) -> &OwnedFd {
        &self.0
    }
}

/// An epoll instance.
pub struct Epoll(OwnedFd);

impl Epoll {
    /// Create.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: creates a new descriptor we own.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: fresh descriptor.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
    /// Watch `fd` for input, reporting `token`.
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: valid epoll fd and event struct.
        cvt(unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
        Ok(())
    }
    /// Watch `fd` for input, edge-triggered: each new write to an eventfd
    /// is reported, and nothing needs to be read back.
    pub fn add_edge(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: token,
        };
        // SAFETY: valid epoll fd and event struct.
        cvt(unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
        Ok(())
    }

    /// Stop watching `fd`.
    pub fn remove(&self, fd: RawFd) {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: valid epoll fd; errors (not registered) are harmless.
        unsafe {
            libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, &mut ev);
        }
    }
    /// Wait up to `timeout_ms` (-1: forever); fills `out` with tokens.
    pub fn wait(&self, out: &mut Vec<u64>, timeout_ms: i32) -> io::Result<()> {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
        // SAFETY: the buffer holds 64 events.
        let n = unsafe { libc::epoll_wait(self.0.as_raw_fd(), evs.as_mut_ptr(), 64, timeout_ms) };
        out.clear();
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(());
            }
            return Err(e);
        }
        out.extend(evs[..n as usize].iter().map(|e| e.u64));
        Ok(())
    }
}

/// Most descriptors passed in one control message.
pub const MAX_FDS: usize = 4;

/// Send one packet with optional descriptors on a SOCK_SEQPACKET socket.
/// Non-blocking when the socket is; returns the error otherwise.
pub fn send_packet(sock: RawFd, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let mut cbuf = [0u64; 8]; // 64 bytes, aligned, room for CMSG_SPACE(4 fds)
                              // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    let fds = &fds[..fds.len().min(MAX_FDS)];
    if !fds.is_empty() {
        let bytes = std::mem::size_of_val(fds) as u32;
        msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        // SAFETY: CMSG_SPACE is a pure computation.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(bytes) } as usize;
        // SAFETY: msg_control points at cbuf, which is large enough for one
        // cmsghdr with up to MAX_FDS descriptors (checked by CMSG_SPACE above
        // being <= 64 for 4 ints).
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(bytes) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr(),
                libc::CMSG_DATA(c) as *mut RawFd,
                fds.len(),
            );
        }
    }
    // A packet interrupted before it was sent is sent again (a datagram
    // socket sends all of it or nothing).
    // SAFETY: msg points to live buffers for the duration of the call.
    retry(|| cvt_isize(unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) })).map(|_| ())
}

/// Receive one packet and any descriptors passed with it. Returns the
/// number of bytes (0 means the peer closed). Descriptors beyond
/// [`MAX_FDS`] are closed.
pub fn recv_packet(
    sock: RawFd,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
    nonblocking: bool,
) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut cbuf = [0u64; 16];
    // SAFETY: zeroed msghdr is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&cbuf);
    let flags = libc::MSG_CMSG_CLOEXEC | if nonblocking { libc::MSG_DONTWAIT } else { 0 };
    // SAFETY: msg points to live buffers.
    let n = retry(|| cvt_isize(unsafe { libc::recvmsg(sock, &mut msg, flags) }))?;
    // SAFETY: walking the control messages the kernel wrote into cbuf, with
    // the libc CMSG macros that bound each step by msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c) as *const RawFd;
                let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    let fd = OwnedFd::from_raw_fd(data.add(i).read_unaligned());
                    if fds.len() < MAX_FDS {
                        fds.push(fd);
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "control packet truncated",
        ));
    }
    Ok(n)
}

/// The Unix socket address of `path` (an error when the path is too long
/// for `sun_path`).
pub fn unix_addr(path: &std::path::Path) -> io::Result<libc::sockaddr_un> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "control socket path too long",
        ));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(addr)
}

/// A connected pair of SOCK_SEQPACKET sockets (the embedded engine's control
/// channel).
pub fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair fills two descriptors we then own.
    cvt(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // SAFETY: fresh descriptors.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Make a descriptor non-blocking.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller owns.
    let fl = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) })?;
    Ok(())
}

/// Process id and user id of the peer of a Unix socket.
pub fn peer_cred(fd: RawFd) -> Option<(u32, u32)> {
    // SAFETY: ucred is plain data.
    let mut c: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most len bytes into c.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut c as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0).then_some((c.pid as u32, c.uid))
}

/// A random 64-bit value from the kernel (for engine ids and channel tokens).
pub fn random_u64() -> u64 {
    let mut v: u64 = 0;
    // SAFETY: getrandom writes 8 bytes into a local.
    let r = unsafe { libc::getrandom(&mut v as *mut u64 as *mut libc::c_void, 8, 0) };
    if r == 8 {
        v
    } else {
        // Fall back to time and address entropy; tokens still differ per
        // channel because callers mix in a counter.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        t ^ (&v as *const u64 as u64).rotate_left(32)
    }
}

const MEMBARRIER_CMD_QUERY: libc::c_int = 0;
const MEMBARRIER_CMD_GLOBAL_EXPEDITED: libc::c_int = 1 << 1;
const MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED: libc::c_int = 1 << 2;

fn membarrier(cmd: libc::c_int) -> libc::c_long {
    // SAFETY: membarrier takes two integers and touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0u32, 0i32) }
}

/// Whether this process uses asymmetric fences: the hot side of a
/// store-then-check handshake (a producer publishing a record, then looking
/// whether its consumer sleeps) needs only a compiler fence, because the
/// cold side (a consumer about to sleep) makes every registered thread
/// execute a full barrier with `membarrier(GLOBAL_EXPEDITED)`. Decided, and
/// the process registered, on first use; false when the kernel lacks it.
pub fn asymmetric_fences() -> bool {
    static ASYM: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ASYM.get_or_init(|| {
        let need = (MEMBARRIER_CMD_GLOBAL_EXPEDITED | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED)
            as libc::c_long;
        let q = membarrier(MEMBARRIER_CMD_QUERY);
        q >= 0 && q & need == need && membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0
    })
}

/// The hot side's fence (see [`asymmetric_fences`]): a compiler fence when
/// the cold side will issue the heavy barrier, a full fence otherwise.
#[inline]
pub fn light_fence(asymmetric: bool) {
    if asymmetric {
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    } else {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }
}

/// The cold side's fence: a full barrier here and on every thread of every
/// process that registered for asymmetric fences (so their light fences
/// behave as full ones with respect to us), plus a local full fence.
pub fn heavy_fence() {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    let _ = membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Connect a SOCK_SEQPACKET socket to a daemon's control socket.
pub fn connect_seqpacket(path: &std::path::Path) -> io::Result<OwnedFd> {
    let addr = unix_addr(path)?;
    // SAFETY: creates a descriptor we own.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor.
    let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // A Unix-domain connect a signal interrupted (waiting for room in the
    // listener's backlog) left the socket unconnected: `retry` tries again.
    retry(|| {
        // SAFETY: valid sockaddr_un and its size.
        cvt(unsafe {
            libc::connect(
                fd.as_raw_fd(),
                &addr as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_un>() as u32,
            )
        })
    })?;
    Ok(fd)
}

/// Listen on a Unix SOCK_SEQPACKET socket at `path` (non-blocking), removing
/// a stale socket file that nobody answers on; refused if an engine listens
/// there already.
pub fn listen_seqpacket(path: &std::path::Path) -> io::Result<OwnedFd> {
    let addr = unix_addr(path)?;
    // A stale socket file from a dead daemon: remove it if nobody answers.
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() || connect_seqpacket(path).is_ok()
        {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("an engine already listens on {}", path.display()),
            ));
        }
        let _ = std::fs::remove_file(path);
    }
    // SAFETY: socket() creates a descriptor we own.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor.
    let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // SAFETY: bind/listen with a valid sockaddr_un of the given size.
    unsafe {
        if libc::bind(
            fd.as_raw_fd(),
            &addr as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_un>() as u32,
        ) < 0
        {
            return Err(io::Error::last_os_error());
        }
        if libc::listen(fd.as_raw_fd(), 128) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_segment_cannot_be_resized_by_whoever_holds_it() {
        let seg = Segment::create("t", 8192).unwrap();
        for len in [0, 4096, 1 << 20] {
            // SAFETY: ftruncate on a descriptor we hold.
            let r = unsafe { libc::ftruncate(seg.fd().as_raw_fd(), len) };
            assert_eq!(r, -1, "resizing to {len} must fail");
        }
        assert_eq!(seg.len(), 8192);
    }

    #[test]
    fn untrusted_reads_take_memory_files_only() {
        let seg = Segment::create("t", 100).unwrap();
        // SAFETY: the segment has 100 writable bytes.
        unsafe { seg.ptr().as_ptr().write_bytes(7, 100) };
        let b = Segment::read_untrusted(seg.fd(), 100).unwrap();
        assert_eq!(b, vec![7u8; 100]);
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        let fd: OwnedFd = f.into();
        assert!(Segment::read_untrusted(&fd, 10).is_err());
    }
}
