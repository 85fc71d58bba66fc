//! The XDP program that hands a queue's frames to an `AF_XDP` socket,
//! written as eBPF instructions and loaded with the `bpf()` system call
//! (no C toolchain, no libbpf), its `XSKMAP`, and its attachment.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::super::ETH_P_ALL;
use super::{ctx, XdpMode};

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
pub(super) fn xskmap() -> io::Result<OwnedFd> {
    let mut a = [0u64; 16];
    // map_type, key_size; value_size, max_entries.
    a[0] = pair(BPF_MAP_TYPE_XSKMAP, 4);
    a[1] = pair(4, 1);
    bpf(BPF_MAP_CREATE, &mut a).map_err(|e| ctx("bpf(BPF_MAP_CREATE, XSKMAP)", e))
}

/// Place socket `xsk` at key `key` of map `map`.
pub(super) fn map_put(map: &OwnedFd, key: u32, xsk: RawFd) -> io::Result<()> {
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
pub(super) fn load(map: &OwnedFd, proto: u16) -> io::Result<OwnedFd> {
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

/// Attach program `prog` to interface `ifindex` in `mode` (`None`: the
/// driver's own mode where it has one, else generic): the link, and the
/// mode it is attached in.
pub(super) fn attach_in(
    prog: &OwnedFd,
    ifindex: u32,
    mode: Option<XdpMode>,
) -> io::Result<(OwnedFd, XdpMode)> {
    let generic = |e: Option<io::Error>| {
        attach(prog, ifindex, XDP_FLAGS_SKB_MODE)
            .map(|l| (l, XdpMode::Generic))
            .map_err(|g| match e {
                Some(n) => ctx(
                    &format!("bpf(BPF_LINK_CREATE, BPF_XDP) native: {n}; generic"),
                    g,
                ),
                None => ctx("bpf(BPF_LINK_CREATE, BPF_XDP) generic", g),
            })
    };
    match mode {
        Some(XdpMode::Generic) => generic(None),
        Some(XdpMode::Native) => attach(prog, ifindex, XDP_FLAGS_DRV_MODE)
            .map(|l| (l, XdpMode::Native))
            .map_err(|e| ctx("bpf(BPF_LINK_CREATE, BPF_XDP) native", e)),
        None => match attach(prog, ifindex, XDP_FLAGS_DRV_MODE) {
            Ok(l) => Ok((l, XdpMode::Native)),
            Err(n) => generic(Some(n)),
        },
    }
}
