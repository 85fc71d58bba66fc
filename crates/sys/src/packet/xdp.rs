//! An `AF_XDP` socket on one queue of an interface ([`XdpSocket`]), for
//! measuring the raw-frame port's `AF_PACKET` ring against it (`unet
//! bench port`): a UMEM, its fill and completion rings, a receive and a
//! transmit ring, and the XDP program that hands the queue's frames to the
//! socket, written here as eBPF instructions and loaded with the `bpf()`
//! system call (no C toolchain, no libbpf).
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
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use super::{if_index, ETH_P_ALL};

/// Bytes of a UMEM chunk: one frame.
pub const CHUNK: u32 = 2048;

// `bpf()` commands, map and program types, attach types (`linux/bpf.h`).
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
/// `ld_imm64`'s source register saying its constant is a map's descriptor.
const BPF_PSEUDO_MAP_FD: u8 = 1;
/// `bpf_redirect_map`'s helper number.
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// XDP verdicts (`enum xdp_action`).
const XDP_PASS: i32 = 2;
// Attach flags (`linux/if_link.h`).
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

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

/// The `bpf()` system call with attribute block `attr`.
fn bpf(cmd: libc::c_long, attr: &mut [u64; 16]) -> io::Result<OwnedFd> {
    // SAFETY: `attr` is a zero-padded `union bpf_attr` of the size passed
    // (128 bytes), live across the call; the kernel reads it (and for
    // these commands writes nothing into it). A command that makes an
    // object returns a new descriptor that nothing else owns.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.as_mut_ptr(),
            std::mem::size_of_val(attr),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just returned to us alone (for
    // `BPF_MAP_UPDATE_ELEM`, which returns 0, the caller does not call this).
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// Two u32 in one u64 of an attribute block (low, then high in memory).
fn pair(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | (u64::from(hi) << 32)
}

/// A one-entry `XSKMAP` (key: queue 0).
fn xskmap() -> io::Result<OwnedFd> {
    let mut a = [0u64; 16];
    // map_type, key_size; value_size, max_entries.
    a[0] = pair(BPF_MAP_TYPE_XSKMAP, 4);
    a[1] = pair(4, 1);
    bpf(BPF_MAP_CREATE, &mut a).map_err(|e| ctx("bpf(BPF_MAP_CREATE, XSKMAP)", e))
}

/// Place socket `xsk` at key `key` of map `map`.
fn map_put(map: &OwnedFd, key: u32, xsk: RawFd) -> io::Result<()> {
    let value = xsk as u32;
    let mut a = [0u64; 16];
    // map_fd (and padding), key pointer, value pointer, flags (BPF_ANY).
    a[0] = pair(map.as_raw_fd() as u32, 0);
    a[1] = &key as *const u32 as u64;
    a[2] = &value as *const u32 as u64;
    // SAFETY: as in `bpf`; `key` and `value` live across the call, and the
    // map's key and value are 4 bytes each, all the kernel reads of them.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_UPDATE_ELEM,
            a.as_mut_ptr(),
            std::mem::size_of_val(&a),
        )
    };
    if r < 0 {
        return Err(ctx("bpf(BPF_MAP_UPDATE_ELEM)", io::Error::last_os_error()));
    }
    Ok(())
}

/// One eBPF instruction: opcode, registers (dst low nibble, src high),
/// offset, immediate.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    let b = off.to_le_bytes();
    let i = imm.to_le_bytes();
    u64::from_le_bytes([code, dst | (src << 4), b[0], b[1], i[0], i[1], i[2], i[3]])
}

/// The program: frames of ethertype `proto` (all frames for
/// [`ETH_P_ALL`]) go to the socket at the frame's queue in map `map`;
/// the rest, and frames shorter than an Ethernet header, pass to the
/// kernel.
///
/// ```text
///  0  r2 = *(u32 *)(r1 + 0)        xdp_md.data
///  1  r3 = *(u32 *)(r1 + 4)        xdp_md.data_end
///  2  r4 = r2
///  3  r4 += 14
///  4  if r4 > r3 goto pass         shorter than an Ethernet header
///  5  r4 = *(u16 *)(r2 + 12)       the ethertype (network order)
///  6  if r4 != proto goto pass
///  7  r2 = *(u32 *)(r1 + 16)       xdp_md.rx_queue_index
///  8  r1 = map (ld_imm64, two slots)
/// 10  r3 = XDP_PASS                 the verdict when the queue has no socket
/// 11  call bpf_redirect_map
/// 12  exit
/// 13  pass: r0 = XDP_PASS
/// 14  exit
/// ```
fn program(map: RawFd, proto: u16) -> Vec<u64> {
    const LDXW: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
    const LDXH: u8 = 0x69; // BPF_LDX | BPF_MEM | BPF_H
    const MOV64X: u8 = 0xbf; // BPF_ALU64 | BPF_MOV | BPF_X
    const MOV64K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
    const ADD64K: u8 = 0x07; // BPF_ALU64 | BPF_ADD | BPF_K
    const JGTX: u8 = 0x2d; // BPF_JMP | BPF_JGT | BPF_X
    const JNEK: u8 = 0x55; // BPF_JMP | BPF_JNE | BPF_K
    const LDDW: u8 = 0x18; // BPF_LD | BPF_DW | BPF_IMM
    const CALL: u8 = 0x85; // BPF_JMP | BPF_CALL
    const EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT
                           // The ethertype as a u16 load of its two bytes reads it.
    let wire = i32::from(u16::from_ne_bytes(proto.to_be_bytes()));
    let mut p = vec![
        insn(LDXW, 2, 1, 0, 0),
        insn(LDXW, 3, 1, 4, 0),
        insn(MOV64X, 4, 2, 0, 0),
        insn(ADD64K, 4, 0, 0, 14),
        insn(JGTX, 4, 3, 8, 0),
        insn(LDXH, 4, 2, 12, 0),
        insn(JNEK, 4, 0, 6, wire),
    ];
    if proto == ETH_P_ALL {
        // Every frame: the test of the ethertype never jumps.
        p[6] = insn(MOV64X, 4, 4, 0, 0);
    }
    p.extend([
        insn(LDXW, 2, 1, 16, 0),
        insn(LDDW, 1, BPF_PSEUDO_MAP_FD, 0, map),
        insn(0, 0, 0, 0, 0),
        insn(MOV64K, 3, 0, 0, XDP_PASS),
        insn(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        insn(EXIT, 0, 0, 0, 0),
        insn(MOV64K, 0, 0, 0, XDP_PASS),
        insn(EXIT, 0, 0, 0, 0),
    ]);
    p
}

/// Load the program for map `map` and ethertype `proto`.
fn load(map: &OwnedFd, proto: u16) -> io::Result<OwnedFd> {
    let insns = program(map.as_raw_fd(), proto);
    let license = b"GPL\0";
    let mut log = vec![0u8; 4096];
    let mut a = [0u64; 16];
    // prog_type, insn_cnt; insns; license; log_level, log_size; log_buf;
    // kern_version, prog_flags; prog_name (16 bytes); prog_ifindex,
    // expected_attach_type.
    a[0] = pair(BPF_PROG_TYPE_XDP, insns.len() as u32);
    a[1] = insns.as_ptr() as u64;
    a[2] = license.as_ptr() as u64;
    a[3] = pair(1, log.len() as u32);
    a[4] = log.as_mut_ptr() as u64;
    a[6] = u64::from_le_bytes(*b"unet_xsk");
    a[8] = pair(0, BPF_XDP);
    bpf(BPF_PROG_LOAD, &mut a).map_err(|e| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let why = String::from_utf8_lossy(&log[..end]);
        ctx(&format!("bpf(BPF_PROG_LOAD, XDP) [{}]", why.trim()), e)
    })
}

/// Attach program `prog` to interface `ifindex` with `flags`: the link
/// (closing it detaches the program).
fn attach(prog: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut a = [0u64; 16];
    // prog_fd, target_ifindex; attach_type, flags.
    a[0] = pair(prog.as_raw_fd() as u32, ifindex);
    a[1] = pair(BPF_XDP, flags);
    bpf(BPF_LINK_CREATE, &mut a)
}

/// `SOL_XDP` socket option `opt` set to `v`.
fn setopt<T>(fd: &OwnedFd, opt: libc::c_int, v: &T, name: &str) -> io::Result<()> {
    // SAFETY: `v` points to a `T` that lives across the call, and the length
    // passed is its size: the kernel reads exactly that.
    super::super::cvt(unsafe {
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
struct Ring<T> {
    map: *mut u8,
    len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    desc: *mut T,
    n: u32,
}

impl<T> Ring<T> {
    /// Map the ring at page offset `pgoff` of `fd` with offsets `off`.
    fn map(fd: &OwnedFd, off: &libc::xdp_ring_offset, n: u32, pgoff: u64) -> io::Result<Ring<T>> {
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

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: an aligned u32 inside the live mapping, changed by the
        // kernel concurrently, so only touched as an atomic.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.consumer }
    }

    /// Entry `i` (any index: taken modulo the ring's size).
    fn entry(&self, i: u32) -> *mut T {
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
    tx: Ring<libc::xdp_desc>,
    fill: Ring<u64>,
    comp: Ring<u64>,
    fd: OwnedFd,
    /// The UMEM's start (the mapping `_umem` owns).
    umem: *mut u8,
    umem_len: usize,
    /// Chunks below this address receive; from it on they transmit.
    tx_base: u64,
    /// Transmit chunks not on the tx ring.
    free: Vec<u64>,
    /// Frames placed on the tx ring since the last kick.
    tx_pending: usize,
    mode: XdpMode,
    counters: XdpCounters,
    /// Unmapped last, after the socket closed.
    _umem: Umem,
}

// SAFETY: the mappings are owned by the socket alone (no other handle to
// them exists in the process), and every access goes through `&mut self`
// or reads the socket's own fields, so moving it to another thread moves
// sole ownership of them with it.
unsafe impl Send for XdpSocket {}

impl XdpSocket {
    /// A socket on queue 0 of interface `name` receiving ethertype `proto`
    /// (host order; [`ETH_P_ALL`] for all), with `frames` chunks (a power
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
        // SAFETY: plain system call with integer arguments.
        let fd = super::super::cvt(unsafe {
            libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0)
        })
        .map_err(|e| ctx("socket(AF_XDP)", e))?;
        // SAFETY: `fd` was just returned by `socket` and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let umem_len = frames as usize * CHUNK as usize;
        // SAFETY: a new private anonymous mapping; nothing else refers to it.
        let umem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                umem_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if umem == libc::MAP_FAILED {
            return Err(ctx("mmap(UMEM)", io::Error::last_os_error()));
        }
        let umem: *mut u8 = umem.cast();
        // From here the UMEM is unmapped when `owner` drops: on an error
        // path, or after the socket's other fields.
        let owner = Umem(umem, umem_len);
        let reg = libc::xdp_umem_reg {
            addr: umem as u64,
            len: umem_len as u64,
            chunk_size: CHUNK,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setopt(&fd, libc::XDP_UMEM_REG, &reg, "XDP_UMEM_REG")?;
        setopt(&fd, libc::XDP_UMEM_FILL_RING, &half, "XDP_UMEM_FILL_RING")?;
        setopt(
            &fd,
            libc::XDP_UMEM_COMPLETION_RING,
            &half,
            "XDP_UMEM_COMPLETION_RING",
        )?;
        setopt(&fd, libc::XDP_RX_RING, &half, "XDP_RX_RING")?;
        setopt(&fd, libc::XDP_TX_RING, &half, "XDP_TX_RING")?;
        // SAFETY: all-zero bytes are a valid `xdp_mmap_offsets` (integers).
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of_val(&off) as libc::socklen_t;
        // SAFETY: `off` and `len` live across the call; the kernel writes
        // at most `len` bytes into `off`.
        super::super::cvt(unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                (&mut off as *mut libc::xdp_mmap_offsets).cast(),
                &mut len,
            )
        })
        .map_err(|e| ctx("getsockopt(XDP_MMAP_OFFSETS)", e))?;
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
        // SAFETY: all-zero bytes are a valid `sockaddr_xdp` (integers).
        let mut sa: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
        sa.sxdp_family = libc::AF_XDP as u16;
        sa.sxdp_flags = libc::XDP_COPY;
        sa.sxdp_ifindex = ifindex;
        sa.sxdp_queue_id = 0;
        // SAFETY: `sa` lives across the call and the length is its size.
        super::super::cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of_val(&sa) as libc::socklen_t,
            )
        })
        .map_err(|e| ctx("bind(AF_XDP, XDP_COPY, queue 0)", e))?;
        let map = xskmap()?;
        map_put(&map, 0, fd.as_raw_fd())?;
        let prog = load(&map, proto)?;
        let generic = |e: Option<io::Error>| {
            attach(&prog, ifindex, XDP_FLAGS_SKB_MODE)
                .map(|l| (l, XdpMode::Generic))
                .map_err(|g| match e {
                    Some(n) => ctx(
                        &format!("bpf(BPF_LINK_CREATE, BPF_XDP) native: {n}; generic"),
                        g,
                    ),
                    None => ctx("bpf(BPF_LINK_CREATE, BPF_XDP) generic", g),
                })
        };
        let (link, mode) = match mode {
            Some(XdpMode::Generic) => generic(None)?,
            Some(XdpMode::Native) => attach(&prog, ifindex, XDP_FLAGS_DRV_MODE)
                .map(|l| (l, XdpMode::Native))
                .map_err(|e| ctx("bpf(BPF_LINK_CREATE, BPF_XDP) native", e))?,
            None => match attach(&prog, ifindex, XDP_FLAGS_DRV_MODE) {
                Ok(l) => (l, XdpMode::Native),
                Err(n) => generic(Some(n))?,
            },
        };
        let tx_base = u64::from(half) * u64::from(CHUNK);
        Ok(XdpSocket {
            _link: link,
            _prog: prog,
            _map: map,
            rx,
            tx,
            fill,
            comp,
            fd,
            umem,
            umem_len,
            tx_base,
            free: (half..frames)
                .map(|k| u64::from(k) * u64::from(CHUNK))
                .collect(),
            tx_pending: 0,
            mode,
            counters: XdpCounters::default(),
            _umem: owner,
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
        super::super::cvt(unsafe {
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
            if chunk >= self.tx_base || d.addr + len > chunk + u64::from(CHUNK) || len == 0 {
                self.counters.bad_desc += 1;
                if chunk >= self.tx_base {
                    continue;
                }
            } else {
                // SAFETY: the frame lies inside a receive chunk of the UMEM
                // (checked above), which the kernel handed to us and does
                // not touch until it is back on the fill ring below.
                let frame = unsafe {
                    std::slice::from_raw_parts(self.umem.add(d.addr as usize), d.len as usize)
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

    /// Take the chunks the kernel has sent back onto the free list.
    fn reclaim(&mut self) {
        let cons = self.comp.consumer().load(Ordering::Relaxed);
        // Acquire: pairs with the kernel's Release after its entries.
        let prod = self.comp.producer().load(Ordering::Acquire);
        let n = prod.wrapping_sub(cons).min(self.comp.n);
        for k in 0..n {
            // SAFETY: an entry the kernel published and does not rewrite
            // until our consumer index passes it.
            let a = unsafe { self.comp.entry(cons.wrapping_add(k)).read() };
            if a < self.tx_base || a >= self.umem_len as u64 || !a.is_multiple_of(u64::from(CHUNK))
            {
                self.counters.bad_desc += 1;
            } else {
                self.free.push(a);
            }
        }
        // Release: read before the kernel reuses the entries.
        self.comp
            .consumer()
            .store(cons.wrapping_add(n), Ordering::Release);
    }

    /// Place `frame` on the tx ring (sent at the next
    /// [`XdpSocket::flush`]): false, counted, when no chunk is free or the
    /// frame is not an Ethernet frame's length.
    pub fn send(&mut self, frame: &[u8]) -> bool {
        if frame.len() < 14 || frame.len() > self.max_frame() {
            self.counters.tx_bad_len += 1;
            return false;
        }
        if self.free.is_empty() {
            self.reclaim();
        }
        let prod = self.tx.producer().load(Ordering::Relaxed);
        // Acquire: the kernel has read the entries it consumed.
        let cons = self.tx.consumer().load(Ordering::Acquire);
        let Some(&a) = self.free.last() else {
            self.counters.tx_full += 1;
            return false;
        };
        if prod.wrapping_sub(cons) >= self.tx.n {
            self.counters.tx_full += 1;
            return false;
        }
        self.free.pop();
        // SAFETY: `a` is a free transmit chunk (on no ring: the kernel is
        // done with it), inside the UMEM, and the frame fits in it.
        unsafe {
            std::ptr::copy_nonoverlapping(frame.as_ptr(), self.umem.add(a as usize), frame.len())
        };
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
        self.tx_pending += 1;
        self.counters.tx_frames += 1;
        true
    }

    /// Ask the kernel to send what the tx ring holds. In copy mode it sends
    /// at most a few dozen frames a call (answering `EAGAIN` while more
    /// wait), so this calls again until the ring is empty or the device
    /// refuses; then it takes back the chunks sent.
    pub fn flush(&mut self) {
        if self.tx_pending == 0 {
            return;
        }
        self.tx_pending = 0;
        for _ in 0..=self.tx.n {
            // SAFETY: a `sendto` of no bytes from a null pointer to no
            // address: with a tx ring the kernel sends the ring's entries
            // and reads nothing from the (empty) buffer.
            let r = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
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
        self.reclaim();
    }
}

/// The UMEM mapping: unmapped on drop.
struct Umem(*mut u8, usize);

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: the UMEM `open` mapped, of this length. It drops last of
        // the socket's fields (or on a failed `open`), when no slice of it
        // is alive and the socket that wrote into it is closed.
        unsafe { libc::munmap(self.0.cast(), self.1) };
    }
}
