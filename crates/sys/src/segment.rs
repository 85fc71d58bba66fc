//! Shared-memory segments: an anonymous memory file mapped read-write
//! and shared, checked once, with its pointer arithmetic in one place.

use std::io;
use std::os::fd::OwnedFd;
use std::ptr::NonNull;

use rustix::fs::{MemfdFlags, SealFlags};

use crate::retry;

/// A shared-memory segment: an anonymous memory file (nothing appears in
/// `/dev/shm` or anywhere else; the memory goes away with the last mapping
/// and descriptor) mapped read-write, shared.
pub struct Segment {
    /// The mapping (`ptr` points into it); unmapped when the segment is
    /// dropped.
    _map: memmap2::MmapRaw,
    /// The start of `map`, kept so that `ptr()` costs a load, not a test.
    ptr: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
}

/// Bytes per system call when a segment's pages are faulted in or let go
/// (see [`Segment::populate`]): 2 MiB, a multiple of every page size.
const MM_CHUNK: usize = 2 << 20;

impl Drop for Segment {
    fn drop(&mut self) {
        // Unmapping a large segment in one call holds the process's mapping
        // lock while every page is taken out of the page tables. Take them
        // out first, MM_CHUNK bytes per call, each under the lock briefly;
        // the unmap that follows (dropping `_map`) then has nothing left to
        // take out. The pages stay in the memory file (a shared mapping
        // loses nothing), which is freed with its last descriptor.
        if self.len <= MM_CHUNK {
            return;
        }
        let mut off = 0;
        while off < self.len {
            let n = MM_CHUNK.min(self.len - off);
            // SAFETY: [off, off + n) lies inside our mapping and starts page
            // aligned (as in `populate`); MADV_DONTNEED on a shared mapping
            // drops only this mapping's page-table entries, never the data,
            // and nothing uses the mapping any more (we are dropping it).
            unsafe { libc::madvise(self.ptr.as_ptr().add(off).cast(), n, libc::MADV_DONTNEED) };
            off += n;
        }
    }
}

// SAFETY: `ptr` points into `map`, which the segment owns and which stays
// mapped until the segment is dropped; the segment itself hands out only
// pointers, and all accesses through them are atomics, volatile
// reads/writes or byte copies by the code that owns it (the memory is
// shared with other processes anyway).
unsafe impl Send for Segment {}
// SAFETY: as above: `&Segment` gives nothing but the pointer, the length
// and the descriptor.
unsafe impl Sync for Segment {}

impl Segment {
    /// Create a zero-filled segment of `len` bytes named `name` (the name is
    /// only a label visible in `/proc/PID/fd`).
    pub fn create(name: &str, len: usize) -> io::Result<Segment> {
        Self::map(Self::create_file(name, len)?, len, true)
    }

    /// Create a zero-filled memory file of `len` bytes, its size sealed,
    /// without mapping it (nothing is committed until it is mapped with
    /// [`Segment::open`]).
    pub fn create_file(name: &str, len: usize) -> io::Result<OwnedFd> {
        let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        rustix::fs::ftruncate(&fd, len as u64)?;
        // Seal the size: whoever receives this descriptor cannot shrink the
        // file under our mapping (which would make our accesses fault).
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
        Ok(fd)
    }

    /// Read up to `max` bytes from the start of a memory file received from
    /// an untrusted process, without mapping it (the sender could shrink a
    /// mapped file and make our reads fault). Refuses anything that is not a
    /// memory file (reads of which never block).
    pub fn read_untrusted(fd: &OwnedFd, max: usize) -> io::Result<Vec<u8>> {
        // F_GET_SEALS only succeeds on memory files.
        if rustix::fs::fcntl_get_seals(fd).is_err() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a memory file",
            ));
        }
        let mut buf = vec![0u8; max];
        let mut got = 0;
        while got < max {
            let n = retry(|| Ok(rustix::io::pread(fd, &mut buf[got..], got as u64)?));
            match n {
                Ok(n) if n > 0 => got += n,
                _ => break,
            }
        }
        buf.truncate(got);
        Ok(buf)
    }

    /// The length of a memory file received from an untrusted process, if
    /// its size is sealed against shrinking (so that a mapping of it can
    /// never fault); None for anything else.
    pub fn sealed_len(fd: &OwnedFd) -> Option<u64> {
        let seals = rustix::fs::fcntl_get_seals(fd).ok()?;
        if !seals.contains(SealFlags::SHRINK) {
            return None;
        }
        Some(rustix::fs::fstat(fd).ok()?.st_size.max(0) as u64)
    }

    /// Map a segment received from another process. The size is taken from
    /// the file and must be at least `min_len`.
    pub fn open(fd: OwnedFd, min_len: usize, writable: bool) -> io::Result<Segment> {
        Self::open_with(fd, min_len, writable, true)
    }

    fn open_with(
        fd: OwnedFd,
        min_len: usize,
        writable: bool,
        populate: bool,
    ) -> io::Result<Segment> {
        let len = rustix::fs::fstat(&fd)?.st_size as usize;
        if len < min_len || len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("segment of {len} bytes is smaller than {min_len}"),
            ));
        }
        Self::map_with(fd, len, writable, populate)
    }

    /// Map a memory file received from another process without touching
    /// its pages (a large region costs nothing until used; its owner has
    /// usually touched the pages already). Refuses a file whose size is
    /// not sealed against shrinking, or shorter than `len`.
    pub fn open_sealed(fd: OwnedFd, len: usize) -> io::Result<Segment> {
        match Self::sealed_len(&fd) {
            Some(n) if n >= len as u64 && len > 0 => Self::map_with(fd, len, true, false),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a sealed memory file of that length",
            )),
        }
    }

    /// Create a segment of `len` bytes whose pages are neither touched
    /// nor reserved until written (a UDM virtual buffer: address space
    /// reserved up front, memory taken on demand and given back with
    /// [`Segment::punch_hole`]). Its size is sealed.
    pub fn create_sparse(name: &str, len: usize) -> io::Result<Segment> {
        Self::map_with(Self::create_file(name, len)?, len, true, false)
    }

    /// Map a segment received from another process without touching its
    /// pages (for a sparse one: a first read of a page it never wrote
    /// would allocate it). The size is taken from the file and must be at
    /// least `min_len`.
    pub fn open_unpopulated(fd: OwnedFd, min_len: usize, writable: bool) -> io::Result<Segment> {
        Self::open_with(fd, min_len, writable, false)
    }

    /// Give the pages of `[off, off + len)` back to the system: they read
    /// as zeros afterwards, in every mapping of the file, and take no
    /// memory until written again. Out-of-range parts are ignored.
    pub fn punch_hole(&self, off: usize, len: usize) -> io::Result<()> {
        let end = off.saturating_add(len).min(self.len);
        if off >= end {
            return Ok(());
        }
        retry(|| {
            Ok(rustix::fs::fallocate(
                &self.fd,
                rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE,
                off as u64,
                (end - off) as u64,
            )?)
        })
    }

    /// Bytes of memory the file holds now (its allocated blocks).
    pub fn allocated_bytes(&self) -> io::Result<u64> {
        Ok(rustix::fs::fstat(&self.fd)?.st_blocks.max(0) as u64 * 512)
    }

    fn map(fd: OwnedFd, len: usize, writable: bool) -> io::Result<Segment> {
        Self::map_with(fd, len, writable, true)
    }

    fn map_with(fd: OwnedFd, len: usize, writable: bool, populate: bool) -> io::Result<Segment> {
        let mut opts = memmap2::MmapOptions::new();
        opts.len(len);
        // Shared mappings, at an address the kernel picks.
        let map = if writable {
            opts.map_raw(&fd)?
        } else {
            opts.map_raw_read_only(&fd)?
        };
        let ptr = NonNull::new(map.as_mut_ptr())
            .ok_or_else(|| io::Error::other("segment mapped at address 0"))?;
        let seg = Segment {
            _map: map,
            ptr,
            len,
            fd,
        };
        if populate {
            // Populate now: a first touch on the data path would cost a
            // page fault of microseconds in the middle of a message.
            seg.populate(writable)?;
        }
        Ok(seg)
    }

    /// Fault every page of the mapping in, [`MM_CHUNK`] bytes per system
    /// call. `MAP_POPULATE` would do it in one call that holds the
    /// process's mapping lock for the whole segment (about a second for
    /// 1 GiB): every other `mmap` or `munmap` of the process (another
    /// endpoint's segment being made, the allocator growing its heap)
    /// would wait that long.
    fn populate(&self, writable: bool) -> io::Result<()> {
        let advice = if writable {
            libc::MADV_POPULATE_WRITE
        } else {
            libc::MADV_POPULATE_READ
        };
        let mut off = 0;
        while off < self.len {
            let n = MM_CHUNK.min(self.len - off);
            // SAFETY: [off, off + n) lies inside our mapping (off < len,
            // n <= len - off), and off is a multiple of MM_CHUNK, itself a
            // multiple of the page size, so the start is page aligned.
            // Populating changes no byte of it.
            let r = unsafe { libc::madvise(self.ptr.as_ptr().add(off).cast(), n, advice) };
            if r == 0 {
                off += n;
                continue;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) | Some(libc::EAGAIN) => continue,
                // A kernel older than 5.14 has no MADV_POPULATE_*: touch
                // one byte of each page instead (a fault each, on the
                // mapping lock briefly).
                Some(libc::EINVAL) => {
                    for page in (off..self.len).step_by(4096) {
                        // SAFETY: page < len, inside our mapping; a volatile
                        // read of a byte of shared memory, whatever its
                        // value, is sound.
                        unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(page)) };
                    }
                    return Ok(());
                }
                _ => return Err(e),
            }
        }
        Ok(())
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
            // SAFETY: off <= len (checked), so the result lies inside the
            // mapping or one past its end, and is not null.
            Some(unsafe { self.ptr.add(off) })
        } else {
            None
        }
    }
}
