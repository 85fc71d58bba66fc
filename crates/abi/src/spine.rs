//! SPINE's active messages: the header every message carries (in the
//! runtime's 256-byte message slots, in peer queues and on the wire), and
//! how a host endpoint frames one in its buffer area.
//!
//! # The message header
//!
//! ```text
//!  0 handler:  u16   handler number at the destination
//!  2 flags:    u16   AM_BULK: a data buffer follows the arguments
//!  4 args_len: u16   0..=240
//!  6 src_kind: u8    AM_SRC_HOST, _WIRE, _PEER, _HANDLER, _SYSTEM or _PORT
//!  7 reserved: u8    zero
//!  8 src:      u32   endpoint id / peer index / link id / extension id / port id
//! 12 bulk_len: u32   bytes of bulk data (0 unless AM_BULK)
//! ```
//!
//! A *small* message is one 256-byte slot: this header and up to
//! [`AM_ARGS_MAX`] bytes of arguments. A *bulk* message is a small one
//! plus a reference to a data buffer of `bulk_len` bytes.
//!
//! # Host framing
//!
//! A send descriptor with `flags = SEND_AM` and `channel =` the handler
//! number carries, at its buffer-area offset,
//!
//! ```text
//!  0 args_len: u16 LE
//!  2 args:     args_len bytes
//!    bulk:     the rest of the message (len - 2 - args_len bytes)
//! ```
//!
//! and the engine hands it to SPINE instead of routing it. An active
//! message for a host endpoint arrives as a receive descriptor with
//! `flags |= RECV_AM`, `channel =` the handler number, and its payload in
//! the same framing.

use core::mem::{offset_of, size_of};

/// Bytes of arguments a message carries at most.
pub const AM_ARGS_MAX: usize = 240;
/// Size of one message slot (header and arguments).
pub const AM_SLOT: usize = 256;
/// Size of [`AmHeader`].
pub const AM_HEADER_SIZE: usize = 16;
/// Bytes before the arguments in the host framing (`args_len`).
pub const AM_FRAME_PREFIX: usize = 2;

/// [`AmHeader::flags`]: a data buffer follows the arguments.
pub const AM_BULK: u16 = 1;

/// [`AmHeader::src_kind`]: a host endpoint (src = endpoint id).
pub const AM_SRC_HOST: u8 = 1;
/// [`AmHeader::src_kind`]: the wire (src = link id).
pub const AM_SRC_WIRE: u8 = 2;
/// [`AmHeader::src_kind`]: a peer adapter (src = peer index).
pub const AM_SRC_PEER: u8 = 3;
/// [`AmHeader::src_kind`]: a handler of this adapter (src = extension id).
pub const AM_SRC_HANDLER: u8 = 4;
/// [`AmHeader::src_kind`]: the runtime itself.
pub const AM_SRC_SYSTEM: u8 = 5;
/// [`AmHeader::src_kind`]: a raw-frame port of this adapter (src = port
/// id; the message's bulk data is the frame). The runtime makes these
/// messages itself: [`AmHeader::check`], which judges headers that came
/// from elsewhere, does not accept the kind.
pub const AM_SRC_PORT: u8 = 6;

/// `SendDesc::flags`: the message is an active message for SPINE (the
/// channel field holds the handler number).
pub const SEND_AM: u16 = 1;
/// `RecvDesc::flags`: the message is an active message (the channel
/// field holds the handler number).
pub const RECV_AM: u8 = 2;

/// Highest handler number.
pub const SPINE_MAX_HANDLER: u16 = 1023;
/// Lowest handler number an extension may take (those below are the
/// runtime's system handlers).
pub const SPINE_FIRST_EXT_HANDLER: u16 = 64;
/// The runtime's own handler for a message from a peer adapter or over a
/// link: its bulk data goes out of the raw-frame port of this adapter that
/// its first four argument bytes name (a port id, little-endian), as a
/// handler's send to `DEST_PORT | port` would, with no handler run (the
/// egress half of SPINE's router: the dispatcher routes the message to the
/// network).
pub const SYS_PORT_OUT: u16 = 1;

/// Destination kinds (`(kind << 24) | id`): a handler of this adapter.
pub const DEST_LOCAL: u32 = 0;
/// Destination kind: an endpoint of this adapter.
pub const DEST_HOST: u32 = 1;
/// Destination kind: a peer adapter on this host.
pub const DEST_PEER: u32 = 2;
/// Destination kind: a remote adapter over the wire (a link id).
pub const DEST_WIRE: u32 = 3;
/// Destination kind: a raw-frame port of this adapter (a port id): the
/// message's arguments followed by its bulk data go out as one frame.
pub const DEST_PORT: u32 = 4;

/// The header of an active message (layout in the module doc).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AmHeader {
    /// Handler number at the destination.
    pub handler: u16,
    /// [`AM_BULK`] or 0.
    pub flags: u16,
    /// Bytes of arguments (`0..=AM_ARGS_MAX`).
    pub args_len: u16,
    /// Who sent it (`AM_SRC_*`).
    pub src_kind: u8,
    /// Zero.
    pub reserved: u8,
    /// The sender's id within its kind.
    pub src: u32,
    /// Bytes of bulk data (0 unless [`AM_BULK`]).
    pub bulk_len: u32,
}

// SAFETY: integers only, no padding (asserted): every bit pattern is a
// valid header.
unsafe impl crate::ShmSafe for AmHeader {}

impl AmHeader {
    /// The header's 16 bytes, little-endian.
    pub fn to_bytes(&self) -> [u8; AM_HEADER_SIZE] {
        let mut b = [0u8; AM_HEADER_SIZE];
        b[0..2].copy_from_slice(&self.handler.to_le_bytes());
        b[2..4].copy_from_slice(&self.flags.to_le_bytes());
        b[4..6].copy_from_slice(&self.args_len.to_le_bytes());
        b[6] = self.src_kind;
        b[7] = self.reserved;
        b[8..12].copy_from_slice(&self.src.to_le_bytes());
        b[12..16].copy_from_slice(&self.bulk_len.to_le_bytes());
        b
    }

    /// Read a header from its 16 bytes (any bytes are a header; check it
    /// with [`AmHeader::check`]).
    pub fn from_bytes(b: &[u8; AM_HEADER_SIZE]) -> AmHeader {
        AmHeader {
            handler: u16::from_le_bytes([b[0], b[1]]),
            flags: u16::from_le_bytes([b[2], b[3]]),
            args_len: u16::from_le_bytes([b[4], b[5]]),
            src_kind: b[6],
            reserved: b[7],
            src: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
            bulk_len: u32::from_le_bytes([b[12], b[13], b[14], b[15]]),
        }
    }

    /// Whether the header is one the runtime accepts: a handler number in
    /// range, no unknown flag, arguments that fit a slot, a known source
    /// kind, bulk data only with [`AM_BULK`].
    pub fn check(&self) -> bool {
        self.handler <= SPINE_MAX_HANDLER
            && self.flags & !AM_BULK == 0
            && self.args_len as usize <= AM_ARGS_MAX
            && (AM_SRC_HOST..=AM_SRC_SYSTEM).contains(&self.src_kind)
            && self.reserved == 0
            && (self.flags & AM_BULK != 0 || self.bulk_len == 0)
    }
}

/// A destination word: `(kind << 24) | id`.
#[inline]
pub const fn dest(kind: u32, id: u32) -> u32 {
    (kind << 24) | (id & 0x00FF_FFFF)
}

const _: () = {
    assert!(size_of::<AmHeader>() == AM_HEADER_SIZE);
    assert!(offset_of!(AmHeader, handler) == 0);
    assert!(offset_of!(AmHeader, flags) == 2);
    assert!(offset_of!(AmHeader, args_len) == 4);
    assert!(offset_of!(AmHeader, src_kind) == 6);
    assert!(offset_of!(AmHeader, reserved) == 7);
    assert!(offset_of!(AmHeader, src) == 8);
    assert!(offset_of!(AmHeader, bulk_len) == 12);
    assert!(AM_HEADER_SIZE + AM_ARGS_MAX == AM_SLOT);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bytes_are_the_documented_layout() {
        let h = AmHeader {
            handler: 0x0102,
            flags: AM_BULK,
            args_len: 240,
            src_kind: AM_SRC_PEER,
            reserved: 0,
            src: 0x0a0b_0c0d,
            bulk_len: 4096,
        };
        let b = h.to_bytes();
        assert_eq!(
            b,
            [0x02, 0x01, 0x01, 0x00, 0xf0, 0x00, 3, 0, 0x0d, 0x0c, 0x0b, 0x0a, 0x00, 0x10, 0, 0]
        );
        assert_eq!(AmHeader::from_bytes(&b), h);
        assert!(h.check());
    }

    #[test]
    fn check_rejects_each_bad_field() {
        let good = AmHeader {
            handler: 64,
            args_len: 8,
            src_kind: AM_SRC_HOST,
            ..AmHeader::default()
        };
        assert!(good.check());
        let bad = [
            AmHeader {
                handler: SPINE_MAX_HANDLER + 1,
                ..good
            },
            AmHeader { flags: 2, ..good },
            AmHeader {
                args_len: AM_ARGS_MAX as u16 + 1,
                ..good
            },
            AmHeader {
                src_kind: 0,
                ..good
            },
            AmHeader {
                src_kind: AM_SRC_SYSTEM + 1,
                ..good
            },
            AmHeader {
                reserved: 1,
                ..good
            },
            AmHeader {
                bulk_len: 1,
                ..good
            },
        ];
        for (i, h) in bad.iter().enumerate() {
            assert!(!h.check(), "case {i}: {h:?}");
        }
    }

    #[test]
    fn dest_packs_kind_and_id() {
        assert_eq!(dest(DEST_HOST, 7), 0x0100_0007);
        assert_eq!(dest(DEST_WIRE, 0x0123_4567), 0x0323_4567);
    }
}
