//! The ring primitives over real memory: positions, wrap-around, the
//! two-consumer claim of the free ring, and the layout of an endpoint.
#![deny(clippy::undocumented_unsafe_blocks)]

use std::ptr::NonNull;

use unet_abi::ring::Ring;
use unet_abi::*;

#[repr(C, align(4096))]
struct Mem([u8; 8192]);

fn ring<T: ShmSafe>(mem: &mut Mem, cap: u32) -> Ring<T> {
    // SAFETY: the buffer is 4096-aligned and large enough for a header and
    // `cap` small entries; it outlives the ring in each test.
    unsafe { Ring::from_raw(NonNull::new(mem.0.as_mut_ptr()).unwrap(), cap) }
}

#[test]
fn entries_wrap_and_positions_grow() {
    let mut m = Box::new(Mem([0; 8192]));
    let r: Ring<SendDesc> = ring(&mut m, 4);
    r.init(16);
    assert_eq!(r.capacity(), 4);
    for pos in 0..10u64 {
        let d = SendDesc {
            offset: pos as u32 * 64,
            len: 10 + pos as u32,
            channel: pos as u16,
            flags: 0,
            status: 0,
        };
        r.write(pos, d);
        r.set_head(pos + 1);
        assert_eq!(r.head() - r.tail(), 1);
        assert_eq!(r.read(pos), d);
        r.set_tail(pos + 1);
    }
    // Position 9 lives in slot 1: the same memory as position 5.
    assert_eq!(r.read(5).len, 19);
    // The header fields sit where the layout says.
    assert_eq!(u64::from_le_bytes(m.0[0..8].try_into().unwrap()), 10);
    assert_eq!(u64::from_le_bytes(m.0[64..72].try_into().unwrap()), 10);
    assert_eq!(u32::from_le_bytes(m.0[128..132].try_into().unwrap()), 4);
    assert_eq!(u32::from_le_bytes(m.0[132..136].try_into().unwrap()), 16);
}

#[test]
fn only_one_consumer_claims_an_entry() {
    let mut m = Box::new(Mem([0; 8192]));
    let r: Ring<u32> = ring(&mut m, 8);
    r.init(4);
    r.write(0, 4096);
    r.set_head(1);
    let t = r.tail();
    assert!(r.cas_tail(t), "first claim wins");
    assert!(!r.cas_tail(t), "a second claim of the same position fails");
    assert_eq!(r.tail(), 1);
}

#[test]
fn layout_rejects_bad_geometry_and_places_everything_in_order() {
    let g = Geometry::default();
    let l = Layout::new(g).unwrap();
    assert!(l.send_off >= ENDPOINT_HEADER_SIZE as u64);
    assert!(l.recv_off >= l.send_off + ring_bytes(g.send_cap, 16) as u64);
    assert!(l.free_off >= l.recv_off + ring_bytes(g.recv_cap, 64) as u64);
    assert!(l.event_off >= l.free_off + ring_bytes(g.free_cap, 4) as u64);
    assert_eq!(l.buffer_area_off % PAGE as u64, 0);
    assert_eq!(l.segment_size, l.buffer_area_off + g.buffer_area_size);
    for (bad, want) in [
        (
            Geometry { send_cap: 3, ..g },
            GeometryError::BadRingCapacity(3),
        ),
        (
            Geometry {
                recv_cap: 1 << 20,
                ..g
            },
            GeometryError::BadRingCapacity(1 << 20),
        ),
        (
            Geometry {
                buffer_size: 100,
                ..g
            },
            GeometryError::BadBufferSize(100),
        ),
        (
            Geometry {
                buffer_area_size: 5000,
                ..g
            },
            GeometryError::BadBufferArea(5000),
        ),
    ] {
        assert_eq!(Layout::new(bad), Err(want));
    }
}

#[test]
fn record_geometry_of_the_direct_ring() {
    assert_eq!(record_span(0), RECORD_ALIGN);
    assert_eq!(record_span(24), 32);
    assert_eq!(record_span(25), 64);
    assert_eq!(record_span(64), 96);
    assert_ne!(record_tag(0), 0, "zeroed memory is never a ready record");
    assert_ne!(
        record_tag(0),
        record_tag(1 << 20),
        "a lap later the tag differs"
    );
}

#[test]
fn buffers_spanned_is_the_rounded_up_quotient() {
    for bs in [1usize, 7, 64, 2048, 8192] {
        for len in 0..=bs * (MAX_RX_BUFFERS + 3) {
            let want = len.div_ceil(bs).clamp(1, MAX_RX_BUFFERS + 1);
            assert_eq!(buffers_spanned(len, bs), want, "len {len}, buffers of {bs}");
        }
    }
    assert_eq!(buffers_spanned(MAX_MESSAGE, 1), MAX_RX_BUFFERS + 1);
}

/// A descriptor written in place over a slot full of old bytes equals the
/// one built whole: header, offsets, and the rest of `data` zeroed.
#[test]
fn a_descriptor_written_in_place_equals_one_built_whole() {
    use unet_abi::{RecvDesc, RecvSlot, INLINE_MAX, RECV_INLINE};
    let mut old = RecvDesc {
        len: 0xdead_beef,
        channel: 0xffff,
        flags: 0xff,
        nbufs: 0xff,
        data: [0xa5; INLINE_MAX],
    };
    // Three buffers.
    let mut want = RecvDesc {
        len: 3000,
        channel: 7,
        nbufs: 3,
        ..Default::default()
    };
    for (i, off) in [4096, 8192, 65536].into_iter().enumerate() {
        want.set_offset(i, off);
    }
    // SAFETY: `old` is a live, aligned RecvDesc nobody else reads.
    let slot = unsafe { RecvSlot::new(&mut old) };
    for (i, off) in [4096, 8192, 65536].into_iter().enumerate() {
        slot.set_offset(i, off);
    }
    slot.finish(3000, 7, 0, 3, 12);
    assert_eq!(old, want);

    // Inline: the payload's bytes kept, the rest zeroed.
    let mut old = RecvDesc {
        data: [0x5a; INLINE_MAX],
        ..Default::default()
    };
    let mut want = RecvDesc {
        len: 5,
        channel: 9,
        flags: RECV_INLINE,
        ..Default::default()
    };
    want.data[..5].copy_from_slice(b"hello");
    // SAFETY: as above.
    let slot = unsafe { RecvSlot::new(&mut old) };
    // SAFETY: data() has INLINE_MAX >= 5 bytes.
    unsafe { core::ptr::copy_nonoverlapping(b"hello".as_ptr(), slot.data(), 5) };
    slot.finish(5, 9, RECV_INLINE, 0, 5);
    assert_eq!(old, want);
}
