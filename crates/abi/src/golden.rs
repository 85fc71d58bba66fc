//! The golden test vector: a small endpoint segment with known contents.
//!
//! [`write_golden`] builds it through this crate's layout; the committed file
//! `crates/abi/golden/endpoint_v1.hex` holds the expected bytes (hex, 32 bytes
//! a line). Every language binding parses that file with its own reading of
//! the layout and checks the values listed in [`GOLDEN_FACTS`].

use core::ptr::NonNull;

use crate::view::EndpointView;
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
    let Some(base) = NonNull::new(buf.as_mut_ptr()) else {
        return false;
    };
    if l.segment_size as usize != GOLDEN_LEN {
        return false;
    }
    // SAFETY: buf is 4096-aligned, GOLDEN_LEN long (the segment's size)
    // and ours alone; the view's rings do not outlive this call.
    let Ok(view) = (unsafe { EndpointView::init(base, GOLDEN_LEN, &l, 7, 0x0123_4567_89ab_cdef) })
    else {
        return false;
    };
    let EndpointView {
        send,
        recv,
        free,
        events: event,
        buffer_area,
        ..
    } = view;
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
    // SAFETY: 512 + 4 bytes lie inside the buffer area (4096 bytes).
    unsafe { buffer_area.add(512).as_ptr().copy_from(b"ABCD".as_ptr(), 4) };
    true
}
