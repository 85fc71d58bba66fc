//! The few operating-system facilities unet needs: shared-memory segments
//! (`memfd` + `mmap`), futexes, eventfds, epoll, and file-descriptor passing
//! over Unix sockets (`unix.rs`); raw-frame ports on network interfaces
//! (`packet.rs`).
//!
//! The system calls go through `rustix` (and the mappings through
//! `memmap2`), whose wrappers are safe. What remains `unsafe` here is what no
//! safe wrapper gives with the same behaviour, each block with its reason:
//! lending a descriptor a caller names by number, the segment's pointer
//! arithmetic (`segment.rs`), the raw-frame port's socket calls and
//! rings (`packet.rs`), and two calls made through `libc` (`SO_PEERCRED`, whose
//! process id may be 0, and `sched_getcpu`, which C libraries answer
//! without a system call).
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod packet;
mod segment;
mod unix;

pub use segment::Segment;
pub use unix::{
    accept, connect_seqpacket, connect_seqpacket_timeout, listen_seqpacket, peer_closed, peer_cred,
    recv_packet, recv_packet_checked, send_packet, seqpacket_pair, set_socket_buffers, unix_addr,
    Received, MAX_FDS,
};

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use rustix::event::{epoll, eventfd, EventfdFlags};
use rustix::fs::OFlags;
use rustix::io::Errno;
use rustix::thread::futex;
use rustix::thread::{MembarrierCommand, MembarrierQuery};
use rustix::time::{ClockId, Timespec};

pub fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
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

/// The descriptor numbered `fd`, lent for the length of one call of this
/// module. The public functions that take a `RawFd` take a descriptor that
/// their caller holds open across the call (a socket or eventfd it owns);
/// the borrow is used inside the call only and never kept. A negative
/// number is `EBADF`, as the kernel would say.
fn lend<'a>(fd: RawFd) -> io::Result<BorrowedFd<'a>> {
    if fd < 0 {
        return Err(Errno::BADF.into());
    }
    // SAFETY: `fd` is not -1 (checked), and the caller keeps it open for
    // the call the borrow is used in (see above). Should a caller pass a
    // number it does not hold, the system call fails with EBADF or acts on
    // whichever file has that number, exactly as the raw call would: the
    // kernel touches no memory of ours through a descriptor number.
    Ok(unsafe { BorrowedFd::borrow_raw(fd) })
}

/// A `Timespec` of `d` (seconds capped at what the kernel takes).
fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as _,
        tv_nsec: d.subsec_nanos() as _,
    }
}

/// A new descriptor of the file `fd` refers to, open for reading only
/// (through `/proc/self/fd`): whoever gets it can map the file's memory
/// but never write it, whatever the original descriptor allowed.
pub fn reopen_read_only(fd: &OwnedFd) -> io::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    Ok(rustix::fs::open(
        path.as_str(),
        OFlags::RDONLY | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?)
}

/// Raise this process's soft limit of open files (`RLIMIT_NOFILE`) to its
/// hard limit; the soft limit now in force.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we pass and nothing else.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) })?;
    if r.rlim_cur < r.rlim_max {
        let want = libc::rlimit {
            rlim_cur: r.rlim_max,
            rlim_max: r.rlim_max,
        };
        // SAFETY: setrlimit reads the struct we pass and nothing else.
        if cvt(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) }).is_ok() {
            r.rlim_cur = r.rlim_max;
        }
    }
    Ok(r.rlim_cur)
}

/// This process's soft limit of open files (`RLIMIT_NOFILE`).
pub fn nofile_limit() -> io::Result<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we pass and nothing else.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) })?;
    Ok(r.rlim_cur)
}

/// How many file descriptors this process has open (the entries of
/// `/proc/self/fd`, less the one that reads it).
pub fn open_fds() -> io::Result<u64> {
    let n = std::fs::read_dir("/proc/self/fd")?.count() as u64;
    Ok(n.saturating_sub(1))
}

/// Sleep on a futex word in shared memory while it holds `expected`, at most
/// `timeout` (None: until woken). False when a signal handler interrupted
/// the sleep.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> bool {
    let ts = timeout.map(timespec);
    // FUTEX_WAIT, shared (no FUTEX_PRIVATE_FLAG: the word may be in memory
    // another process maps). Errors (EAGAIN, EINTR, ETIMEDOUT) all mean
    // "re-check"; EINTR also that a handler ran.
    futex::wait(word, futex::Flags::empty(), expected, ts.as_ref()) != Err(Errno::INTR)
}

/// The CPU the calling thread runs on now (it may move at any moment: a
/// hint), or `u32::MAX` if the kernel cannot say.
#[inline]
pub fn current_cpu() -> u32 {
    // Through the C library, which answers from the thread's restartable
    // sequence area or the vDSO without a system call: this runs once per
    // message sent (`rustix::thread::sched_getcpu` makes the system call).
    // SAFETY: sched_getcpu takes no arguments and touches no memory of ours.
    let c = unsafe { libc::sched_getcpu() };
    if c < 0 {
        u32::MAX
    } else {
        c as u32
    }
}

/// Wake up to `n` sleepers on a futex word.
pub fn futex_wake(word: &AtomicU32, n: i32) {
    // FUTEX_WAKE, shared; never blocks. The count goes to the kernel as the
    // int it is.
    let _ = futex::wake(word, futex::Flags::empty(), n as u32);
}

/// Sleep until any of the words changes from its expected value (Linux
/// `futex_waitv`), at most `timeout`. Falls back to waiting on the first word
/// with a short timeout when the kernel lacks `futex_waitv`. False when a
/// signal handler interrupted the sleep.
pub fn futex_wait_any(words: &[(&AtomicU32, u32)], timeout: Option<Duration>) -> bool {
    if words.is_empty() {
        return true;
    }
    if words.len() == 1 {
        return futex_wait(words[0].0, words[0].1, timeout);
    }
    let v: Vec<futex::Wait> = words
        .iter()
        .take(128)
        .map(|(w, e)| {
            let mut f = futex::Wait::new();
            f.val = *e as u64;
            f.uaddr = futex::WaitPtr::new(w.as_ptr().cast());
            f.flags = futex::WaitFlags::SIZE_U32;
            f
        })
        .collect();
    // futex_waitv takes an absolute CLOCK_MONOTONIC deadline.
    let deadline = timeout.map(|d| {
        let now = rustix::time::clock_gettime(ClockId::Monotonic);
        let total = now.tv_nsec as u128 + d.as_nanos();
        Timespec {
            tv_sec: now.tv_sec + (total / 1_000_000_000) as i64,
            tv_nsec: (total % 1_000_000_000) as _,
        }
    });
    let r = futex::waitv(
        &v,
        futex::WaitvFlags::empty(),
        deadline.as_ref(),
        ClockId::Monotonic,
    );
    if r == Err(Errno::NOSYS) {
        return futex_wait(
            words[0].0,
            words[0].1,
            Some(
                timeout
                    .unwrap_or(Duration::from_millis(1))
                    .min(Duration::from_millis(1)),
            ),
        );
    }
    r != Err(Errno::INTR)
}

/// A counter-mode eventfd, the doorbell a client rings to wake the engine.
pub struct EventFd(OwnedFd);

impl EventFd {
    /// A non-blocking eventfd.
    pub fn new() -> io::Result<EventFd> {
        Ok(EventFd(eventfd(
            0,
            EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC,
        )?))
    }
    /// Wrap a received descriptor.
    pub fn from_fd(fd: OwnedFd) -> EventFd {
        EventFd(fd)
    }
    /// Ring: add one. Never blocks (non-blocking; a full counter is fine).
    pub fn notify(&self) {
        let _ = rustix::io::write(&self.0, &1u64.to_ne_bytes());
    }
    /// Reset to zero; returns the count read.
    pub fn drain(&self) -> u64 {
        let mut v = [0u8; 8];
        match rustix::io::read(&self.0, &mut v) {
            Ok(8) => u64::from_ne_bytes(v),
            _ => 0,
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
        Ok(Epoll(epoll::create(epoll::CreateFlags::CLOEXEC)?))
    }
    /// Its descriptor (readable while a source it watches is ready: an
    /// epoll set may be watched by another).
    pub fn fd(&self) -> &OwnedFd {
        &self.0
    }
    /// Watch `fd` for input, reporting `token`.
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        epoll::add(
            &self.0,
            lend(fd)?,
            epoll::EventData::new_u64(token),
            epoll::EventFlags::IN,
        )?;
        Ok(())
    }
    /// Watch `fd` for input, edge-triggered: each new write to an eventfd
    /// is reported, and nothing needs to be read back.
    pub fn add_edge(&self, fd: RawFd, token: u64) -> io::Result<()> {
        epoll::add(
            &self.0,
            lend(fd)?,
            epoll::EventData::new_u64(token),
            epoll::EventFlags::IN | epoll::EventFlags::ET,
        )?;
        Ok(())
    }

    /// Stop watching `fd`.
    pub fn remove(&self, fd: RawFd) {
        // Errors (not registered) are harmless.
        if let Ok(fd) = lend(fd) {
            let _ = epoll::delete(&self.0, fd);
        }
    }
    /// Wait up to `timeout_ms` (negative: forever); fills `out` with tokens.
    pub fn wait(&self, out: &mut Vec<u64>, timeout_ms: i32) -> io::Result<()> {
        let mut evs = [MaybeUninit::<epoll::Event>::uninit(); 64];
        let timeout = (timeout_ms >= 0).then(|| timespec(Duration::from_millis(timeout_ms as u64)));
        out.clear();
        match epoll::wait(&self.0, &mut evs, timeout.as_ref()) {
            Ok((got, _)) => {
                out.extend(got.iter().map(|e| e.data.u64()));
                Ok(())
            }
            Err(Errno::INTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Make a descriptor non-blocking.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    let fd = lend(fd)?;
    let fl = rustix::fs::fcntl_getfl(fd)?;
    rustix::fs::fcntl_setfl(fd, fl | OFlags::NONBLOCK)?;
    Ok(())
}

/// A random 64-bit value from the kernel (for engine ids and channel tokens).
pub fn random_u64() -> u64 {
    let mut v = [0u8; 8];
    match rustix::rand::getrandom(&mut v, rustix::rand::GetRandomFlags::empty()) {
        Ok(8) => u64::from_ne_bytes(v),
        _ => {
            // Fall back to time and address entropy; tokens still differ per
            // channel because callers mix in a counter.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            t ^ (v.as_ptr() as u64).rotate_left(32)
        }
    }
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
        let q: MembarrierQuery = rustix::thread::membarrier_query();
        q.contains_command(MembarrierCommand::GlobalExpedited)
            && q.contains_command(MembarrierCommand::RegisterGlobalExpedited)
            && rustix::thread::membarrier(MembarrierCommand::RegisterGlobalExpedited).is_ok()
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
    let _ = rustix::thread::membarrier(MembarrierCommand::GlobalExpedited);
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Whether process `pid` is stopped (by a signal such as SIGSTOP, or
/// traced): its state in `/proc/PID/stat` is `T` or `t`. False when it
/// cannot be read (gone, or another pid namespace).
pub fn process_stopped(pid: u32) -> bool {
    let Ok(s) = std::fs::read(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "PID (COMM) STATE ...": COMM may hold anything but ends at the last ')'.
    let Some(close) = s.iter().rposition(|&b| b == b')') else {
        return false;
    };
    matches!(s.get(close + 2), Some(b'T') | Some(b't'))
}

/// A descriptor of process `pid` (`pidfd_open`) that polls readable
/// once the process has exited: a watcher can wait on it in `epoll` or
/// test it with [`wait_readable`]. `ESRCH` when no such process exists.
pub fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or(Errno::INVAL)?;
    Ok(rustix::process::pidfd_open(
        pid,
        rustix::process::PidfdFlags::empty(),
    )?)
}

/// The calling thread's id (`gettid`), as `/proc/self/task/` names it.
pub fn thread_id() -> u32 {
    rustix::thread::gettid().as_raw_nonzero().get() as u32
}

/// Wait until `fd` is readable (or its peer hung up), at most `timeout`
/// (None: forever). Returns false when the time ran out.
pub fn wait_readable(fd: RawFd, timeout: Option<Duration>) -> io::Result<bool> {
    let fd = lend(fd)?;
    let ts = timeout.map(|t| Timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: t.subsec_nanos() as _,
    });
    let mut fds = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::IN,
    )];
    // An interrupted wait is not retried: the caller looks at its clock
    // and waits again for what is left.
    match rustix::event::poll(&mut fds, ts.as_ref()) {
        Ok(n) => Ok(n > 0),
        Err(Errno::INTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Lower the calling thread's scheduling priority to nice 5: for
/// background work, such as zeroing the pages of a large segment, that
/// should leave the CPU to threads on a data path, yet still finish while
/// those threads spin. (At nice 19 a thread gets under 2 % of a CPU beside
/// a thread that spins at nice 0: with a client spinning on each core, a
/// 128 MiB endpoint took over five seconds to make instead of a tenth of
/// one. At nice 5 it gets about a quarter, and an unprivileged thread
/// cannot take a lowered priority back.) Linux keeps a nice value per
/// thread; other threads of the process are not touched.
pub fn lower_thread_priority() -> io::Result<()> {
    Ok(rustix::process::setpriority_process(
        Some(rustix::thread::gettid()),
        5,
    )?)
}

/// The effective user id of this process.
pub fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::sync::atomic::Ordering;
    use std::time::Instant;

    #[test]
    fn a_shared_segment_cannot_be_resized_by_whoever_holds_it() {
        let seg = Segment::create("t", 8192).unwrap();
        for len in [0, 4096, 1 << 20] {
            assert!(
                rustix::fs::ftruncate(seg.fd(), len).is_err(),
                "resizing to {len} must fail"
            );
        }
        assert_eq!(seg.len(), 8192);
        assert_eq!(rustix::fs::fstat(seg.fd()).unwrap().st_size, 8192);
    }

    #[test]
    fn untrusted_reads_take_memory_files_only() {
        let seg = Segment::create("t", 100).unwrap();
        // SAFETY: the segment has 100 writable bytes.
        unsafe { seg.ptr().as_ptr().write_bytes(7, 100) };
        let b = Segment::read_untrusted(seg.fd(), 100).unwrap();
        assert_eq!(b, vec![7u8; 100]);
        assert_eq!(Segment::read_untrusted(seg.fd(), 500).unwrap().len(), 100);
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        let fd: OwnedFd = f.into();
        let e = Segment::read_untrusted(&fd, 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn a_segment_opened_from_its_descriptor_shares_the_memory() {
        let seg = Segment::create("t", 8192).unwrap();
        assert_eq!(seg.ptr().as_ptr() as usize % 4096, 0);
        let other = Segment::open(seg.fd().try_clone().unwrap(), 4096, true).unwrap();
        assert_eq!(other.len(), 8192);
        // SAFETY: both map the same 8192 bytes; offset 100 is inside.
        unsafe {
            seg.ptr().as_ptr().add(100).write(42);
            assert_eq!(other.ptr().as_ptr().add(100).read(), 42);
        }
        let ro = Segment::open(seg.fd().try_clone().unwrap(), 1, false).unwrap();
        // SAFETY: as above, read only.
        assert_eq!(unsafe { ro.ptr().as_ptr().add(100).read() }, 42);
        let e = Segment::open(seg.fd().try_clone().unwrap(), 8193, true)
            .err()
            .unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(seg.at(8192, 0).is_some());
        assert!(seg.at(8000, 193).is_none());
        assert!(seg.at(usize::MAX, 2).is_none());
        assert!(Segment::create("bad\0name", 10).is_err());
    }

    #[test]
    fn eventfds_count_and_epoll_reports_them() {
        let ep = Epoll::new().unwrap();
        let a = EventFd::new().unwrap();
        let b = EventFd::new().unwrap();
        ep.add(a.fd().as_raw_fd(), 7).unwrap();
        ep.add_edge(b.fd().as_raw_fd(), 9).unwrap();
        let mut out = vec![1, 2, 3];
        ep.wait(&mut out, 0).unwrap();
        assert!(out.is_empty());
        a.notify();
        a.notify();
        b.notify();
        ep.wait(&mut out, -1).unwrap();
        out.sort();
        assert_eq!(out, vec![7, 9]);
        // Level-triggered: reported until drained; edge-triggered: once.
        ep.wait(&mut out, 0).unwrap();
        assert_eq!(out, vec![7]);
        assert_eq!(a.drain(), 2);
        assert_eq!(a.drain(), 0);
        ep.wait(&mut out, 0).unwrap();
        assert!(out.is_empty());
        ep.remove(b.fd().as_raw_fd());
        b.notify();
        let t = Instant::now();
        ep.wait(&mut out, 20).unwrap();
        assert!(out.is_empty());
        assert!(t.elapsed() >= Duration::from_millis(15));
        ep.remove(-1);
        assert!(ep.add(-1, 0).is_err());
    }

    #[test]
    fn futexes_wait_and_wake() {
        let w = std::sync::Arc::new(AtomicU32::new(0));
        // A value that differs: no sleep.
        let t = Instant::now();
        futex_wait(&w, 1, Some(Duration::from_secs(5)));
        assert!(t.elapsed() < Duration::from_secs(1));
        // A timeout.
        let t = Instant::now();
        futex_wait(&w, 0, Some(Duration::from_millis(20)));
        assert!(t.elapsed() >= Duration::from_millis(15));
        // Woken by another thread.
        let w2 = w.clone();
        let h = std::thread::spawn(move || {
            while w2.load(Ordering::Acquire) == 0 {
                futex_wait(&w2, 0, Some(Duration::from_secs(5)));
            }
        });
        std::thread::sleep(Duration::from_millis(10));
        w.store(1, Ordering::Release);
        futex_wake(&w, i32::MAX);
        h.join().unwrap();
        // Any of several words.
        let words = [AtomicU32::new(0), AtomicU32::new(0)];
        let t = Instant::now();
        futex_wait_any(
            &[(&words[0], 0), (&words[1], 0)],
            Some(Duration::from_millis(20)),
        );
        assert!(t.elapsed() >= Duration::from_millis(15));
        let t = Instant::now();
        futex_wait_any(
            &[(&words[0], 0), (&words[1], 3)],
            Some(Duration::from_secs(5)),
        );
        assert!(t.elapsed() < Duration::from_secs(1));
        futex_wait_any(&[], None);
    }

    #[test]
    fn small_helpers() {
        assert_ne!(random_u64(), random_u64());
        let cpu = current_cpu();
        assert!(cpu < 4096, "cpu {cpu}");
        asymmetric_fences();
        light_fence(true);
        light_fence(false);
        heavy_fence();
        let mut n = 0;
        let r: io::Result<()> = retry(|| {
            n += 1;
            if n < 3 {
                Err(io::ErrorKind::Interrupted.into())
            } else {
                Ok(())
            }
        });
        assert!(r.is_ok());
        assert_eq!(n, 3);
        assert!(cvt(-1).is_err());
        assert_eq!(cvt(3).unwrap(), 3);
    }

    #[test]
    fn a_pidfd_polls_readable_once_its_process_exits() {
        use std::os::fd::AsRawFd;
        let me = pidfd_open(std::process::id()).unwrap();
        assert!(!wait_readable(me.as_raw_fd(), Some(Duration::ZERO)).unwrap());
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let fd = pidfd_open(child.id()).unwrap();
        assert!(!wait_readable(fd.as_raw_fd(), Some(Duration::ZERO)).unwrap());
        child.kill().unwrap();
        assert!(wait_readable(fd.as_raw_fd(), Some(Duration::from_secs(10))).unwrap());
        child.wait().unwrap();
        assert!(pidfd_open(0).is_err());
        assert!(pidfd_open(u32::MAX).is_err());
    }
}
