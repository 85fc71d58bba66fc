//! The golden test vector: a small endpoint segment with known contents.
//!
//! [`write_golden`] builds it through this crate's layout; the committed file
//! `crates/abi/golden/endpoint_v1.hex` holds the expected bytes (hex, 32 bytes
//! a line). Every language binding parses that file with its own reading of
//! the layout and checks the values listed in [`GOLDEN_FACTS`].

use core::mem::size_of;
use core::ptr::NonNull;
use core::sync::atomic::Ordering;

use crate::ring::Ring;
use crate::*;

/// Geometry of the golden segment.
pub const GOLDEN_GEOMETRY: Geometry = Geometry {
    buffer_size: 256,
    buffer_area_size: 4096,
    send_cap: 4,
    recv_cap: 2,
    free_cap: 8,
    event_cap: 2,
};

/// Facts about the golden segment that each binding checks, as
/// `(name, byte offset, size in bytes, value)`.
pub const GOLDEN_FACTS: &[(&str, usize, usize, u64)] = &[
    ("magic", 0, 8, ENDPOINT_MAGIC),
    ("version", 8, 4, VERSION as u64),
    ("header_size", 12, 4, 4096),
    ("segment_size", 0x10, 8, 12288),
    ("endpoint_id", 0x18, 4, 7),
    ("buffer_size", 0x20, 4, 256),
    ("send_cap", 0x24, 4, 4),
    ("recv_cap", 0x28, 4, 2),
    ("free_cap", 0x2c, 4, 8),
    ("event_cap", 0x30, 4, 2),
    ("send_off", 0x38, 8, 4096),
    ("recv_off", 0x40, 8, 4352),
    ("free_off", 0x48, 8, 4672),
    ("event_off", 0x50, 8, 4928),
    ("buffer_area_off", 0x58, 8, 8192),
    ("buffer_area_size", 0x60, 8, 4096),
    ("engine_id", 0x68, 8, 0x0123_4567_89ab_cdef),
    ("send.head", 4096, 8, 1),
    ("send.tail", 4096 + 64, 8, 0),
    ("send.capacity", 4096 + 128, 4, 4),
    ("send.entry_size", 4096 + 132, 4, 16),
    ("send[0].offset", 4096 + 192, 4, 512),
    ("send[0].len", 4096 + 196, 4, 100),
    ("send[0].channel", 4096 + 200, 2, 3),
    ("send[0].status", 4096 + 204, 4, 1),
    ("recv.head", 4352, 8, 2),
    ("recv[0].len", 4352 + 192, 4, 5),
    ("recv[0].channel", 4352 + 196, 2, 3),
    ("recv[0].flags", 4352 + 198, 1, RECV_INLINE as u64),
    ("recv[0].data[0..5]", 4352 + 200, 5, 0x6f_6c_6c_65_68),
    ("recv[1].len", 4352 + 256, 4, 300),
    ("recv[1].channel", 4352 + 260, 2, 9),
    ("recv[1].nbufs", 4352 + 263, 1, 2),
    ("recv[1].offset[0]", 4352 + 264, 4, 1024),
    ("recv[1].offset[1]", 4352 + 268, 4, 1280),
    ("free.head", 4672, 8, 3),
    ("free[2]", 4672 + 192 + 8, 4, 2048),
    ("event.head", 4928, 8, 1),
    (
        "event[0].kind",
        4928 + 192,
        2,
        EventKind::ChannelOpened as u64,
    ),
    ("event[0].channel", 4928 + 194, 2, 9),
    ("event[0].peer_endpoint", 4928 + 196, 4, 42),
    ("event[0].port", 4928 + 200, 2, 7700),
    ("event[0].family", 4928 + 202, 2, 4),
    ("event[0].addr[0..4]", 4928 + 208, 4, 0x0100_007f),
    ("buffer[512..516]", 8192 + 512, 4, 0x44_43_42_41),
];

/// Size of the golden segment.
pub const GOLDEN_LEN: usize = 12288;

/// Fill `buf` (exactly [`GOLDEN_LEN`] bytes, 4096-aligned) with the golden
/// segment. Returns false if `buf` has the wrong size or alignment.
pub fn write_golden(buf: &mut [u8]) -> bool {
    if buf.len() != GOLDEN_LEN || !(buf.as_ptr() as usize).is_multiple_of(PAGE) {
        return false;
    }
    buf.fill(0);
    let Ok(l) = Layout::new(GOLDEN_GEOMETRY) else {
        return false;
    };
    let base = buf.as_mut_ptr();
    // SAFETY: buf is 4096-aligned and GOLDEN_LEN long, which holds the
    // header (checked by layout: segment_size == GOLDEN_LEN below).
    unsafe {
        if l.segment_size as usize != GOLDEN_LEN {
            return false;
        }
        let h = base as *mut EndpointHeader;
        (*h).magic = ENDPOINT_MAGIC;
        (*h).version = VERSION;
        (*h).header_size = ENDPOINT_HEADER_SIZE as u32;
        (*h).segment_size = l.segment_size;
        (*h).endpoint_id = 7;
        (*h).buffer_size = l.geometry.buffer_size;
        (*h).send_cap = l.geometry.send_cap;
        (*h).recv_cap = l.geometry.recv_cap;
        (*h).free_cap = l.geometry.free_cap;
        (*h).event_cap = l.geometry.event_cap;
        (*h).send_off = l.send_off;
        (*h).recv_off = l.recv_off;
        (*h).free_off = l.free_off;
        (*h).event_off = l.event_off;
        (*h).buffer_area_off = l.buffer_area_off;
        (*h).buffer_area_size = l.geometry.buffer_area_size;
        (*h).engine_id = 0x0123_4567_89ab_cdef;
        let at = |off: u64| NonNull::new_unchecked(base.add(off as usize));
        let send: Ring<SendDesc> = Ring::from_raw(at(l.send_off), l.geometry.send_cap);
        let recv: Ring<RecvDesc> = Ring::from_raw(at(l.recv_off), l.geometry.recv_cap);
        let free: Ring<u32> = Ring::from_raw(at(l.free_off), l.geometry.free_cap);
        let event: Ring<EventDesc> = Ring::from_raw(at(l.event_off), l.geometry.event_cap);
        send.init(size_of::<SendDesc>() as u32);
        recv.init(size_of::<RecvDesc>() as u32);
        free.init(4);
        event.init(size_of::<EventDesc>() as u32);
        send.write(
            0,
            SendDesc {
                offset: 512,
                len: 100,
                channel: 3,
                flags: 0,
                status: 1,
            },
        );
        send.set_head(1);
        let mut small = RecvDesc {
            len: 5,
            channel: 3,
            flags: RECV_INLINE,
            ..Default::default()
        };
        small.data[..5].copy_from_slice(b"hello");
        recv.write(0, small);
        let mut big = RecvDesc {
            len: 300,
            channel: 9,
            nbufs: 2,
            ..Default::default()
        };
        big.set_offset(0, 1024);
        big.set_offset(1, 1280);
        recv.write(1, big);
        recv.set_head(2);
        for (i, off) in [1536u32, 1792, 2048].into_iter().enumerate() {
            free.write(i as u64, off);
        }
        free.set_head(3);
        event.write(
            0,
            EventDesc {
                kind: EventKind::ChannelOpened as u16,
                channel: 9,
                peer_endpoint: 42,
                port: 7700,
                family: 4,
                arg: 0,
                addr: [127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            },
        );
        event.set_head(1);
        (*h).engine_armed.store(0, Ordering::Relaxed);
        base.add(l.buffer_area_off as usize + 512)
            .copy_from(b"ABCD".as_ptr(), 4);
    }
    true
}
