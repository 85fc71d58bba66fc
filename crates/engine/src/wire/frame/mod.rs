//! The frame format: one UDP datagram carries exactly one frame.
//!
//! Pure code, no I/O. [`Frame::parse`] checks a datagram completely and hands
//! back a [`Frame`] whose `Data` payload borrows the datagram (zero copy);
//! [`Frame::emit`] writes a frame into a caller's buffer. After a successful
//! parse every field is in range, and no method of [`Frame`] or [`Data`]
//! panics.
//!
//! All integers are big-endian (network order).
//!
//! ```text
//! Common header (12 bytes), every kind
//!  0        2        3        4                                12
//!  +--------+--------+--------+--------------------------------+
//!  | magic  |version |  kind  |           src_engine           |
//!  |  u16   |   u8   |   u8   |              u64               |
//!  +--------+--------+--------+--------------------------------+
//!  magic = 0x554E ("UN"), version = 1
//!
//! kind 1, Data (48 bytes + payload)
//! 12             16        18        20                  28             32
//!  +--------------+---------+---------+-------------------+--------------+
//!  | dst_endpoint |dst_chan | flags   |       token       |    msg_id    |
//!  |     u32      |  u16    |  u16    |        u64        |     u32      |
//!  +--------------+---------+---------+-------------------+--------------+
//! 32        34        36             40             44        46        48
//!  +---------+---------+--------------+--------------+---------+---------+---- -
//!  |frag_idx |frag_cnt |   msg_len    | frag_offset  |frag_len |   pad   | payload
//!  |  u16    |  u16    |     u32      |     u32      |  u16    |  u16    | frag_len B
//!  +---------+---------+--------------+--------------+---------+---------+---- -
//!  flags: bit 0 VI message (DATA_FLAG_VI); bit 1 an ack follows the payload
//!  (DATA_FLAG_ACK, VI messages of one fragment only); bits 2..=15 reserved,
//!  sent as 0 and carried through
//!  With DATA_FLAG_ACK, 16 more bytes after the payload (the fields of ViAck):
//!  |   cum_ack    |  cum_placed  |  window_end  | flags |pad|
//!  |     u32      |     u32      |     u32      |  u16  |u16|
//!
//! kind 2, OpenRequest (38 bytes)
//! 12             16             20             24        26                  34        36  38
//!  | src_endpoint | dst_endpoint |  request_id  |src_chan |     src_token     |  flags  |pad|
//!  |     u32      |     u32      |     u32      |  u16    |        u64        |  u16    |u16|
//!
//! kind 3, OpenAccept (38 bytes)
//! 12             16             20             24        26                  34  38
//!  |  request_id  | src_endpoint | dst_endpoint |acc_chan |    accept_token   | pad |
//!  |     u32      |     u32      |     u32      |  u16    |        u64        | u32 |
//!
//! kind 4, OpenRefuse (28 bytes)
//! 12             16             20             24      25   28
//!  |  request_id  | src_endpoint | dst_endpoint | reason | pad |
//!  |     u32      |     u32      |     u32      |   u8   | 3 B |
//!
//! kind 5, Close (28 bytes)
//! 12             16        18                  26  28
//!  | dst_endpoint |dst_chan |       token       |pad|
//!  |     u32      |  u16    |        u64        |u16|
//!
//! kind 6, Keepalive (16 bytes): the common header and 4 bytes of padding
//!
//! kind 7, Confirm (28 bytes): the layout of Close
//!
//! kind 0x10, ViOpen (40 bytes)
//! 12             16             20                  28                  36   37   38     40
//!  |  request_id  |    src_vi    |        tag        |     src_token     |rel |flg | hold |
//!  |     u32      |     u32      |        u64        |        u64        | u8 | u8 | u16  |
//!  rel (reliability): 0 unreliable, 1 reliable delivery, 2 reliable reception
//!  flg (flags): bit 0 strict receiver-not-ready; bits 1..=7 sent as 0, ignored
//!  hold: 1..=65535
//!
//! kind 0x11, ViAccept (36 bytes)
//! 12             16             20             24                  32     34  36
//!  |  request_id  |    dst_vi    |    src_vi    |    accept_token   | hold |pad|
//!  |     u32      |     u32      |     u32      |        u64        | u16  |u16|
//!  hold: 1..=65535
//!
//! kind 0x12, ViRefuse (24 bytes)
//! 12             16             20      21   24
//!  |  request_id  |    dst_vi    | reason | pad |
//!  |     u32      |     u32      |   u8   | 3 B |
//!
//! kind 0x13, ViClose (28 bytes)
//! 12             16                  24             28
//!  |    dst_vi    |       token       |    reason    |
//!  |     u32      |        u64        |     u32      |
//!  reason: 0 closed normally, else a `unet_abi::ViError` code (any value parses)
//!
//! kind 0x14, ViAck (88 bytes)
//! 12             16                  24             28             32             36      38  40
//!  |    dst_vi    |       token       |   cum_ack    |  cum_placed  |  window_end  | flags |pad|
//!  |     u32      |        u64        |     u32      |     u32      |     u32      |  u16  |u16|
//! 40        42        44        48                  56                                      88
//!  |frag_base|   pad   |   pad   |       ahead       |            frags (4 x u64)            |
//!  |   u16   |   u16   |   u32   |        u64        |                256 bits               |
//!  flags: bit 0 nack; bit 1 sack (the fields from byte 40 on mean
//!  something: a `reliable::Sack`, else they are sent as 0 and ignored);
//!  bit 2, with bit 1, the receiver closed its window (its memory for the
//!  VI is used up: `Sack::closed`); bits 3..=15 sent as 0, ignored
//!
//! kind 0x20, UdmJoin (48 bytes)
//! 12             16             20                  28             32                  40             44     46  48
//!  |  request_id  |     job      |        key        |   src_link   |     src_token     |     rank     | hold |pad|
//!  |     u32      |     u32      |        u64        |     u32      |        u64        |     u32      | u16  |u16|
//!  hold: 1..=65535
//!
//! kind 0x21, UdmAccept (64 bytes)
//! 12             16             20             24                  32             36
//!  |  request_id  |   dst_link   |   src_link   |    accept_token   |     rank     |
//!  |     u32      |     u32      |     u32      |        u64        |     u32      |
//! 36             40             44             48             52     54  56                  64
//!  |    nodes     |   fast_cap   |  buffer_cap  |  timeout_us  | hold |pad|       gone        |
//!  |     u32      |     u32      |     u32      |     u32      | u16  |u16|        u64        |
//!  hold: 1..=65535; buffer_cap in messages; gone: a bit per rank gone
//! ```
//!
//! With a cluster key, every kind but those of the data path (Data and
//! ViAck, [`Kind::is_data_path`]) is followed in its datagram by an
//! authentication trailer (see [`super::auth`]); [`Frame::parse`] is given
//! the frame without it.
//!
//! Padding is written as zero and ignored on receipt; it keeps every frame a
//! multiple of 2 bytes (the Data payload starts 16-byte aligned in the
//! datagram) and leaves room for fields of later versions. Every frame must
//! fill its datagram exactly: every kind but Data has a fixed length, and a
//! Data frame carries its payload length `frag_len`, so that any datagram cut
//! short is reported as [`FrameError::Truncated`] and any with extra bytes as
//! [`FrameError::BadLength`].
//!
//! # Fragment placement
//!
//! A Data frame carries `frag_offset`, the byte offset of its payload in the
//! message, explicitly: the receiver places bytes without knowing the
//! sender's datagram size. A sender cuts a message into fragments of one
//! *stride* `S` (its maximum fragment payload): fragment `i` of `n` has
//! `frag_offset = i * S`, every fragment but the last carries exactly `S`
//! bytes, the last carries `msg_len - (n-1) * S` bytes (at least 1), and
//! `n = ceil(msg_len / S)`. [`Frame::parse`] checks this for each frame on its
//! own ([`Data::stride`] recovers `S`); the reassembler checks that all
//! fragments of a message agree on `msg_len`, `frag_count` and stride, so
//! fragments never overlap and coverage is exact when all `n` arrived. A
//! message of 0 bytes is one fragment with an empty payload.
//!
//! # VIA
//!
//! A VI (VIA's connection) is opened by discriminator: [`ViOpen`] asks the
//! receiving engine to connect the requester's VI to whoever listens on
//! `tag`, and is answered by [`ViAccept`] or [`ViRefuse`] (matched by
//! `request_id`); [`ViClose`] says a VI is gone or broke; [`ViAck`] carries
//! the reliability state machine's acks ([`super::reliable::Ack`]). A VI's
//! messages travel in Data frames with [`DATA_FLAG_VI`] set in `flags`:
//! `dst_endpoint` then names the receiver's VI, `msg_id` is the VI's
//! sequence number, and `dst_channel` is sent as [`VI_DATA_CHANNEL`] and not read.
//! A VI's message of one fragment may carry an ack of the other direction
//! ([`DATA_FLAG_ACK`], [`Data::ack`]): a reply then acknowledges what it
//! answers without an ack datagram of its own.
//!
//! VI Data, ViAck and ViClose name the receiver's VI (`dst_vi`, or
//! `dst_endpoint` of Data) and carry the token the receiver chose for it
//! (the `src_token` of its ViOpen, or the `accept_token` of its ViAccept),
//! which the receiver checks together with the sender's address; the
//! answers to a ViOpen are matched by `request_id` and `dst_vi` and by the
//! address the open went to. Each VI has two tokens, one per direction.
//! With a cluster key the four VI control kinds are authenticated too, Data
//! and ViAck are not (see above).
//!
//! # UDM
//!
//! A UDM job spans engines through *links*, one per job and pair of
//! engines, each a reliable stream as a VI's (see `docs/udm.md`):
//! [`UdmJoin`] asks the job's home engine for a rank on behalf of a
//! process of the sending engine, showing the job's key; [`UdmAccept`]
//! grants it (with the job's geometry), a [`ViRefuse`] whose `dst_vi` is
//! the link refuses it. Afterwards the link's messages, acks and close
//! are VI Data, ViAck and ViClose frames naming the link as their VI.
//!
//! # Kind space
//!
//! Kinds 1..=7, 0x10..=0x14 and 0x20..=0x21 are defined here. Ranges are
//! kept for later protocols: `0x10..=0x1F` VIA connections (`0x15..=0x1F`
//! still free), `0x20..=0x2F` UDM (`0x22..=0x2F` still free), `0x30..=0x3F`
//! SPINE active messages. A receiver drops
//! a frame of a kind it does not know and counts it
//! ([`FrameError::UnknownKind`]); that is not an error of the peer.

use core::fmt;

use unet_abi::{Reliability, ViError};

use super::reliable::{Ack, Sack};

/// Magic number at offset 0: the bytes `"UN"`.
pub const MAGIC: u16 = 0x554E;
/// The version of the frame format this module reads and writes.
pub const VERSION: u8 = 1;
/// Largest message the wire carries, in bytes (1 MiB).
pub const MAX_MESSAGE: usize = 1 << 20;
/// Largest UDP payload of one datagram (IPv4 limit, 65535 - 8 - 20).
pub const MAX_DATAGRAM: usize = 65507;

/// Length of the header common to all kinds.
pub const COMMON_HEADER_LEN: usize = 12;
/// Offset of the `kind` byte, for those that must look at it before a
/// parse (see [`super::auth::carries_trailer`]).
pub const KIND_OFFSET: usize = 3;
/// Length of a Data frame without its payload.
pub const DATA_HEADER_LEN: usize = 48;
/// Length of an OpenRequest frame.
pub const OPEN_REQUEST_LEN: usize = 38;
/// Length of an OpenAccept frame.
pub const OPEN_ACCEPT_LEN: usize = 38;
/// Length of an OpenRefuse frame.
pub const OPEN_REFUSE_LEN: usize = 28;
/// Length of a Close frame.
pub const CLOSE_LEN: usize = 28;
/// Length of a Keepalive frame.
pub const KEEPALIVE_LEN: usize = 16;
/// Length of a Confirm frame.
pub const CONFIRM_LEN: usize = 28;
/// Length of a ViOpen frame.
pub const VI_OPEN_LEN: usize = 40;
/// Length of a ViAccept frame.
pub const VI_ACCEPT_LEN: usize = 36;
/// Length of a ViRefuse frame.
pub const VI_REFUSE_LEN: usize = 24;
/// Length of a ViClose frame.
pub const VI_CLOSE_LEN: usize = 28;
/// Length of a ViAck frame.
pub const VI_ACK_LEN: usize = 88;
/// Length of a UdmJoin frame.
pub const UDM_JOIN_LEN: usize = 48;
/// Length of a UdmAccept frame.
pub const UDM_ACCEPT_LEN: usize = 64;

/// Bit of [`Data::flags`]: the frame carries a message of a VI, not of a
/// channel. `dst_endpoint` is then the receiver's VI id, `msg_id` the VI's
/// sequence number, and `dst_channel` is sent as [`VI_DATA_CHANNEL`] and not read (see the
/// module doc, "VIA").
pub const DATA_FLAG_VI: u16 = 1 << 0;

/// Bit of the Data `flags` field on the wire: [`ACK_TRAILER_LEN`] bytes
/// after the payload carry an ack of the reverse direction
/// ([`Data::ack`]). Only with [`DATA_FLAG_VI`], on a message of one
/// fragment. [`Frame::parse`] takes it out of [`Data::flags`] into
/// [`Data::ack`]; [`Frame::emit`] sets it from `ack` (whatever `flags` holds).
pub const DATA_FLAG_ACK: u16 = 1 << 1;

/// Bytes of the ack a Data frame may carry after its payload
/// ([`DATA_FLAG_ACK`]).
pub const ACK_TRAILER_LEN: usize = 16;

/// The `dst_channel` a VI's Data frames carry: above every endpoint channel
/// (`MAX_CHANNELS`), so that the reassembler, which keys fragments by
/// endpoint and channel, never mixes a VI's fragments with an endpoint's
/// of the same id. Receivers do not read it.
pub const VI_DATA_CHANNEL: u16 = 0x8000;

/// Bit of the ViOpen `flags` byte: VIA's strict receiver-not-ready
/// ([`ViOpen::strict_rnr`]).
const VI_OPEN_FLAG_STRICT_RNR: u8 = 1 << 0;
/// Bit of the ViAck `flags` field: a NACK ([`ViAck::nack`]).
const VI_ACK_FLAG_NACK: u16 = 1 << 0;
/// Bit of the ViAck `flags` field: a selective acknowledgement follows
/// ([`ViAck::sack`]).
const VI_ACK_FLAG_SACK: u16 = 1 << 1;
/// Bit of the ViAck `flags` field, with [`VI_ACK_FLAG_SACK`]: the
/// receiver closed its window ([`Sack::closed`]).
const VI_ACK_FLAG_CLOSED: u16 = 1 << 2;

/// Byte ranges of every field, computed in one place.
mod field {
    use core::ops::Range;
    pub const MAGIC: Range<usize> = 0..2;
    pub const VERSION: usize = 2;
    pub const KIND: usize = super::KIND_OFFSET;
    pub const SRC_ENGINE: Range<usize> = 4..12;

    pub mod data {
        use core::ops::Range;
        pub const DST_ENDPOINT: Range<usize> = 12..16;
        pub const DST_CHANNEL: Range<usize> = 16..18;
        pub const FLAGS: Range<usize> = 18..20;
        pub const TOKEN: Range<usize> = 20..28;
        pub const MSG_ID: Range<usize> = 28..32;
        pub const FRAG_INDEX: Range<usize> = 32..34;
        pub const FRAG_COUNT: Range<usize> = 34..36;
        pub const MSG_LEN: Range<usize> = 36..40;
        pub const FRAG_OFFSET: Range<usize> = 40..44;
        pub const FRAG_LEN: Range<usize> = 44..46;
        pub const PAYLOAD: usize = 48;
    }
    pub mod open_request {
        use core::ops::Range;
        pub const SRC_ENDPOINT: Range<usize> = 12..16;
        pub const DST_ENDPOINT: Range<usize> = 16..20;
        pub const REQUEST_ID: Range<usize> = 20..24;
        pub const SRC_CHANNEL: Range<usize> = 24..26;
        pub const SRC_TOKEN: Range<usize> = 26..34;
        pub const FLAGS: Range<usize> = 34..36;
        pub const END: usize = 38;
    }
    pub mod open_accept {
        use core::ops::Range;
        pub const REQUEST_ID: Range<usize> = 12..16;
        pub const SRC_ENDPOINT: Range<usize> = 16..20;
        pub const DST_ENDPOINT: Range<usize> = 20..24;
        pub const ACCEPT_CHANNEL: Range<usize> = 24..26;
        pub const ACCEPT_TOKEN: Range<usize> = 26..34;
        pub const END: usize = 38;
    }
    pub mod open_refuse {
        use core::ops::Range;
        pub const REQUEST_ID: Range<usize> = 12..16;
        pub const SRC_ENDPOINT: Range<usize> = 16..20;
        pub const DST_ENDPOINT: Range<usize> = 20..24;
        pub const REASON: usize = 24;
        pub const END: usize = 28;
    }
    pub mod close {
        use core::ops::Range;
        pub const DST_ENDPOINT: Range<usize> = 12..16;
        pub const DST_CHANNEL: Range<usize> = 16..18;
        pub const TOKEN: Range<usize> = 18..26;
        pub const END: usize = 28;
    }
    pub mod vi_open {
        use core::ops::Range;
        pub const REQUEST_ID: Range<usize> = 12..16;
        pub const SRC_VI: Range<usize> = 16..20;
        pub const TAG: Range<usize> = 20..28;
        pub const SRC_TOKEN: Range<usize> = 28..36;
        pub const RELIABILITY: usize = 36;
        pub const FLAGS: usize = 37;
        pub const HOLD: Range<usize> = 38..40;
        pub const END: usize = 40;
    }
    pub mod vi_accept {
        use core::ops::Range;
        pub const REQUEST_ID: Range<usize> = 12..16;
        pub const DST_VI: Range<usize> = 16..20;
        pub const SRC_VI: Range<usize> = 20..24;
        pub const ACCEPT_TOKEN: Range<usize> = 24..32;
        pub const HOLD: Range<usize> = 32..34;
        pub const END: usize = 36;
    }
    pub mod vi_refuse {
        use core::ops::Range;
        pub const REQUEST_ID: Range<usize> = 12..16;
        pub const DST_VI: Range<usize> = 16..20;
        pub const REASON: usize = 20;
        pub const END: usize = 24;
    }
    pub mod vi_close {
        use core::ops::Range;
        pub const DST_VI: Range<usize> = 12..16;
        pub const TOKEN: Range<usize> = 16..24;
        pub const REASON: Range<usize> = 24..28;
        pub const END: usize = 28;
    }
    pub mod vi_ack {
        use core::ops::Range;
        pub const DST_VI: Range<usize> = 12..16;
        pub const TOKEN: Range<usize> = 16..24;
        pub const CUM_ACK: Range<usize> = 24..28;
        pub const CUM_PLACED: Range<usize> = 28..32;
        pub const WINDOW_END: Range<usize> = 32..36;
        pub const FLAGS: Range<usize> = 36..38;
        pub const FRAG_BASE: Range<usize> = 40..42;
        pub const AHEAD: Range<usize> = 48..56;
        pub const FRAGS: usize = 56;
        pub const END: usize = 88;
    }
    pub mod udm_join {
        use core::ops::Range;
        pub const REQUEST_ID: Range<usize> = 12..16;
        pub const JOB: Range<usize> = 16..20;
        pub const KEY: Range<usize> = 20..28;
        pub const SRC_LINK: Range<usize> = 28..32;
        pub const SRC_TOKEN: Range<usize> = 32..40;
        pub const RANK: Range<usize> = 40..44;
        pub const HOLD: Range<usize> = 44..46;
        pub const END: usize = 48;
    }
    pub mod udm_accept {
        use core::ops::Range;
        pub const REQUEST_ID: Range<usize> = 12..16;
        pub const DST_LINK: Range<usize> = 16..20;
        pub const SRC_LINK: Range<usize> = 20..24;
        pub const ACCEPT_TOKEN: Range<usize> = 24..32;
        pub const RANK: Range<usize> = 32..36;
        pub const NODES: Range<usize> = 36..40;
        pub const FAST_CAP: Range<usize> = 40..44;
        pub const BUFFER_CAP: Range<usize> = 44..48;
        pub const TIMEOUT_US: Range<usize> = 48..52;
        pub const HOLD: Range<usize> = 52..54;
        pub const GONE: Range<usize> = 56..64;
        pub const END: usize = 64;
    }
}

const _: () = {
    assert!(field::data::PAYLOAD == DATA_HEADER_LEN);
    assert!(field::open_request::END == OPEN_REQUEST_LEN);
    assert!(field::open_accept::END == OPEN_ACCEPT_LEN);
    assert!(field::open_refuse::END == OPEN_REFUSE_LEN);
    assert!(field::close::END == CLOSE_LEN);
    assert!(CONFIRM_LEN == CLOSE_LEN);
    assert!(field::vi_open::END == VI_OPEN_LEN);
    assert!(field::vi_open::HOLD.end == VI_OPEN_LEN);
    assert!(field::vi_accept::END == VI_ACCEPT_LEN);
    assert!(field::vi_refuse::END == VI_REFUSE_LEN);
    assert!(field::vi_close::END == VI_CLOSE_LEN);
    assert!(field::vi_close::REASON.end == VI_CLOSE_LEN);
    assert!(field::vi_ack::END == VI_ACK_LEN);
    assert!(field::udm_join::END == UDM_JOIN_LEN);
    assert!(field::udm_accept::END == UDM_ACCEPT_LEN);
    assert!(field::udm_accept::GONE.end == UDM_ACCEPT_LEN);
    let fixed = [
        VI_OPEN_LEN,
        VI_ACCEPT_LEN,
        VI_REFUSE_LEN,
        VI_CLOSE_LEN,
        VI_ACK_LEN,
        UDM_JOIN_LEN,
        UDM_ACCEPT_LEN,
    ];
    let mut i = 0;
    while i < fixed.len() {
        assert!(fixed[i].is_multiple_of(2));
        i += 1;
    }
    assert!(MAX_MESSAGE <= u32::MAX as usize);
    assert!(MAX_DATAGRAM - DATA_HEADER_LEN <= u16::MAX as usize);
};

/// The `kind` byte of the common header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// A fragment (or the whole) of a message for a channel.
    Data = 1,
    /// Asks a remote endpoint to open a channel back to the requester.
    OpenRequest = 2,
    /// Grants an [`Kind::OpenRequest`].
    OpenAccept = 3,
    /// Refuses an [`Kind::OpenRequest`].
    OpenRefuse = 4,
    /// Tells the peer its channel is gone.
    Close = 5,
    /// Tells a peer engine this one is alive (sent to each peer it holds
    /// channels with, every third of the liveness timeout).
    Keepalive = 6,
    /// The requester of an open confirms the accept it got: the accepting
    /// side counts the channel as half-open until then (or until a Data
    /// frame arrives on it).
    Confirm = 7,
    /// Asks a remote engine to connect a VI to whoever listens on a
    /// discriminator.
    ViOpen = 0x10,
    /// Grants a [`Kind::ViOpen`].
    ViAccept = 0x11,
    /// Refuses a [`Kind::ViOpen`].
    ViRefuse = 0x12,
    /// Tells the peer its VI is gone or broke.
    ViClose = 0x13,
    /// Acknowledges a VI's messages and advertises credit (a data-path
    /// frame, like Data).
    ViAck = 0x14,
    /// Asks a UDM job's home engine for a rank, for a process behind the
    /// sending engine.
    UdmJoin = 0x20,
    /// Grants a [`Kind::UdmJoin`].
    UdmAccept = 0x21,
}

impl Kind {
    /// Every kind this version defines.
    pub const ALL: [Kind; 14] = [
        Kind::Data,
        Kind::OpenRequest,
        Kind::OpenAccept,
        Kind::OpenRefuse,
        Kind::Close,
        Kind::Keepalive,
        Kind::Confirm,
        Kind::ViOpen,
        Kind::ViAccept,
        Kind::ViRefuse,
        Kind::ViClose,
        Kind::ViAck,
        Kind::UdmJoin,
        Kind::UdmAccept,
    ];

    /// The kind for a `kind` byte, or `None` when this version does not know it.
    pub const fn from_u8(v: u8) -> Option<Kind> {
        match v {
            1 => Some(Kind::Data),
            2 => Some(Kind::OpenRequest),
            3 => Some(Kind::OpenAccept),
            4 => Some(Kind::OpenRefuse),
            5 => Some(Kind::Close),
            6 => Some(Kind::Keepalive),
            7 => Some(Kind::Confirm),
            0x10 => Some(Kind::ViOpen),
            0x11 => Some(Kind::ViAccept),
            0x12 => Some(Kind::ViRefuse),
            0x13 => Some(Kind::ViClose),
            0x14 => Some(Kind::ViAck),
            0x20 => Some(Kind::UdmJoin),
            0x21 => Some(Kind::UdmAccept),
            _ => None,
        }
    }

    /// Length of the header of this kind (the whole frame for every kind
    /// but Data).
    pub const fn header_len(self) -> usize {
        match self {
            Kind::Data => DATA_HEADER_LEN,
            Kind::OpenRequest => OPEN_REQUEST_LEN,
            Kind::OpenAccept => OPEN_ACCEPT_LEN,
            Kind::OpenRefuse => OPEN_REFUSE_LEN,
            Kind::Close => CLOSE_LEN,
            Kind::Keepalive => KEEPALIVE_LEN,
            Kind::Confirm => CONFIRM_LEN,
            Kind::ViOpen => VI_OPEN_LEN,
            Kind::ViAccept => VI_ACCEPT_LEN,
            Kind::ViRefuse => VI_REFUSE_LEN,
            Kind::ViClose => VI_CLOSE_LEN,
            Kind::ViAck => VI_ACK_LEN,
            Kind::UdmJoin => UDM_JOIN_LEN,
            Kind::UdmAccept => UDM_ACCEPT_LEN,
        }
    }

    /// Whether this kind is of the data path: sent at a high rate and
    /// authenticated by the token it carries and the sender's address, not
    /// by the cluster key. With a key, every other kind carries the
    /// authentication trailer of [`super::auth`]. True for Data and ViAck.
    pub const fn is_data_path(self) -> bool {
        matches!(self, Kind::Data | Kind::ViAck)
    }
}

/// Length of the header of `kind` (see [`Kind::header_len`]).
pub const fn header_len(kind: Kind) -> usize {
    kind.header_len()
}

/// Why a datagram is not a valid frame. Each variant maps to one
/// [`WireDrop`](super::WireDrop) reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameError {
    /// Shorter than the common header or than the header of its kind.
    Truncated,
    /// The first two bytes are not `"UN"`.
    BadMagic,
    /// A version this code does not speak.
    BadVersion,
    /// A `kind` byte this version does not define (kept for later protocols).
    UnknownKind,
    /// Lengths disagree: `msg_len` over [`MAX_MESSAGE`], `frag_count` 0,
    /// `frag_index` not below `frag_count`, a fragment outside the message or
    /// off its stride, a holding bound (`hold` of ViOpen or ViAccept) of 0,
    /// or bytes after the end of the frame.
    BadLength,
    /// A code this version does not define: an OpenRefuse or ViRefuse
    /// reason ([`RefuseReason`]), or a ViOpen reliability level.
    BadReason,
    /// Emit only: the output buffer is too small for the frame.
    BufferTooSmall,
}

impl FrameError {
    /// Every variant.
    pub const ALL: [FrameError; 7] = [
        FrameError::Truncated,
        FrameError::BadMagic,
        FrameError::BadVersion,
        FrameError::UnknownKind,
        FrameError::BadLength,
        FrameError::BadReason,
        FrameError::BufferTooSmall,
    ];
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FrameError::Truncated => "frame truncated",
            FrameError::BadMagic => "bad magic",
            FrameError::BadVersion => "unsupported frame version",
            FrameError::UnknownKind => "unknown frame kind",
            FrameError::BadLength => "inconsistent lengths",
            FrameError::BadReason => "unknown reason or reliability code",
            FrameError::BufferTooSmall => "output buffer too small",
        })
    }
}

impl std::error::Error for FrameError {}

/// Why an endpoint refused an [`OpenRequest`], or an engine a [`ViOpen`].
///
/// Every code parses in both frames; `NoSuchEndpoint` answers only an
/// OpenRequest, `NoListener` and `AttributesMismatch` only a ViOpen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RefuseReason {
    /// No endpoint with that id on the receiving engine.
    NoSuchEndpoint = 1,
    /// The endpoint (or an extension on it), or the listener of the
    /// discriminator, declined.
    Refused = 2,
    /// The endpoint's channel table, the engine's VI table, or the engine
    /// is full.
    NoResources = 3,
    /// Nobody listens on the ViOpen's discriminator on the receiving
    /// engine.
    NoListener = 4,
    /// The listener asked for other attributes than the ViOpen (its
    /// reliability level).
    AttributesMismatch = 5,
}

impl RefuseReason {
    /// Every reason, in the order of their codes.
    pub const ALL: [RefuseReason; 5] = [
        RefuseReason::NoSuchEndpoint,
        RefuseReason::Refused,
        RefuseReason::NoResources,
        RefuseReason::NoListener,
        RefuseReason::AttributesMismatch,
    ];

    /// The reason for a code, or `None` when this version does not define it.
    pub const fn from_u8(v: u8) -> Option<RefuseReason> {
        match v {
            1 => Some(RefuseReason::NoSuchEndpoint),
            2 => Some(RefuseReason::Refused),
            3 => Some(RefuseReason::NoResources),
            4 => Some(RefuseReason::NoListener),
            5 => Some(RefuseReason::AttributesMismatch),
            _ => None,
        }
    }
}

/// A fragment of a message for channel `dst_channel` of endpoint
/// `dst_endpoint` on the receiving engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Data<'a> {
    /// Endpoint id on the receiving engine.
    pub dst_endpoint: u32,
    /// Channel index in that endpoint's table on the receiving engine.
    pub dst_channel: u16,
    /// Bit 0, [`DATA_FLAG_VI`]: a VI's message, and then `dst_endpoint` is
    /// the receiver's VI id, `msg_id` the VI's sequence number, and
    /// `dst_channel` is sent as [`VI_DATA_CHANNEL`] and not read. The other bits are
    /// reserved: sent as 0,
    /// carried through unchanged by [`Frame::parse`] and [`Frame::emit`].
    pub flags: u16,
    /// Capability of the channel (or VI), chosen by the receiver when it
    /// opened. The engine drops a frame whose token does not match
    /// ([`WireDrop::ForgedToken`](super::WireDrop::ForgedToken)).
    pub token: u64,
    /// Per-channel sequence number chosen by the sender (for a VI, its
    /// sequence number).
    pub msg_id: u32,
    /// Index of this fragment, below `frag_count`.
    pub frag_index: u16,
    /// Number of fragments of the message, at least 1.
    pub frag_count: u16,
    /// Total length of the message, at most [`MAX_MESSAGE`].
    pub msg_len: u32,
    /// Offset of `payload` in the message.
    pub frag_offset: u32,
    /// This fragment's bytes (borrowed from the datagram after a parse).
    pub payload: &'a [u8],
    /// An ack of the reverse direction carried along ([`DATA_FLAG_ACK`]):
    /// only on a VI's message of one fragment, addressed, like the
    /// message, to VI `dst_endpoint` with `token`.
    pub ack: Option<Ack>,
}

impl Data<'_> {
    /// Whether this frame carries a VI's message ([`DATA_FLAG_VI`]).
    pub fn is_vi(&self) -> bool {
        self.flags & DATA_FLAG_VI != 0
    }

    /// Whether the message fits in this one frame.
    pub fn is_whole(&self) -> bool {
        self.frag_count == 1
    }

    /// The sender's fragment stride (payload bytes of every fragment but the
    /// last). For a one-fragment message, its length. Meaningful for a frame
    /// that passed [`Frame::parse`] or [`Data::check`].
    pub fn stride(&self) -> u32 {
        if self.frag_count <= 1 {
            self.msg_len
        } else if self.frag_index + 1 < self.frag_count {
            self.payload.len() as u32
        } else {
            // frag_index >= 1 here (frag_count >= 2, last fragment).
            self.frag_offset / u32::from(self.frag_index.max(1))
        }
    }

    /// Checks the lengths of this fragment on its own (see the module doc,
    /// "Fragment placement"). `emit` and `parse` both apply it.
    pub fn check(&self) -> Result<(), FrameError> {
        let msg_len = u64::from(self.msg_len);
        let count = u64::from(self.frag_count);
        let index = u64::from(self.frag_index);
        let offset = u64::from(self.frag_offset);
        let len = self.payload.len() as u64;
        if msg_len > MAX_MESSAGE as u64 || count == 0 || index >= count {
            return Err(FrameError::BadLength);
        }
        if self.ack.is_some() && (!self.is_vi() || count != 1) {
            return Err(FrameError::BadLength);
        }
        if count == 1 {
            return if offset == 0 && len == msg_len {
                Ok(())
            } else {
                Err(FrameError::BadLength)
            };
        }
        let stride = if index + 1 < count {
            len
        } else {
            if offset % index != 0 {
                return Err(FrameError::BadLength);
            }
            offset / index
        };
        if stride == 0 || offset != index * stride {
            return Err(FrameError::BadLength);
        }
        // n = ceil(msg_len / stride) and this fragment ends inside the message
        // (the last one exactly at its end).
        if (count - 1) * stride >= msg_len || count * stride < msg_len {
            return Err(FrameError::BadLength);
        }
        let end = offset + len;
        let want_end = if index + 1 < count {
            offset + stride
        } else {
            msg_len
        };
        if end != want_end || len == 0 || len > stride {
            return Err(FrameError::BadLength);
        }
        Ok(())
    }
}

/// A request to open a channel from `src_endpoint` (sender's engine) to
/// `dst_endpoint` (receiver's engine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpenRequest {
    /// The requesting endpoint on the sending engine.
    pub src_endpoint: u32,
    /// The endpoint asked for on the receiving engine.
    pub dst_endpoint: u32,
    /// Chosen by the requester; echoed in the answer.
    pub request_id: u32,
    /// The requester's channel index for Data frames sent back to it.
    pub src_channel: u16,
    /// The token the requester expects on Data frames sent back to it.
    pub src_token: u64,
    /// Reserved for path options and applets; sent as 0.
    pub flags: u16,
}

/// Grants an [`OpenRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpenAccept {
    /// The `request_id` of the request answered.
    pub request_id: u32,
    /// The accepting endpoint (on the sender of this frame).
    pub src_endpoint: u32,
    /// The requester.
    pub dst_endpoint: u32,
    /// Channel index to put in Data frames sent to the accepting endpoint.
    pub accept_channel: u16,
    /// Token to put in those Data frames.
    pub accept_token: u64,
}

/// Refuses an [`OpenRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpenRefuse {
    /// The `request_id` of the request answered.
    pub request_id: u32,
    /// The endpoint asked for (on the sender of this frame).
    pub src_endpoint: u32,
    /// The requester.
    pub dst_endpoint: u32,
    /// Why.
    pub reason: RefuseReason,
}

/// Tells the peer that its channel `dst_channel` of `dst_endpoint` is gone.
/// The receiver checks `token` against that channel before acting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Close {
    /// Endpoint id on the receiving engine.
    pub dst_endpoint: u32,
    /// Channel index on the receiving engine.
    pub dst_channel: u16,
    /// Token of that channel.
    pub token: u64,
}

/// Asks the receiving engine to connect VI `src_vi` of the sender to the
/// process listening on discriminator `tag` (VIA's `VipConnectRequest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ViOpen {
    /// Chosen by the requester; echoed in the answer ([`ViAccept`] or
    /// [`ViRefuse`]).
    pub request_id: u32,
    /// The requester's VI id, on the sending engine: frames for it carry it
    /// as `dst_vi` (or, in Data frames, `dst_endpoint`).
    pub src_vi: u32,
    /// The discriminator a process listens on, on the receiving engine.
    pub tag: u64,
    /// The token the requester expects on every frame sent to its VI
    /// (Data, ViAck, ViClose).
    pub src_token: u64,
    /// The reliability level asked for (wire code: 0 unreliable, 1
    /// reliable delivery, 2 reliable reception; any other code is
    /// [`FrameError::BadReason`]). Both ends must choose the same one.
    pub reliability: Reliability,
    /// VIA's strict receiver-not-ready (bit 0 of the `flags` byte; the other
    /// bits are sent as 0 and ignored): a message that finds no receive
    /// posted breaks the VI instead of waiting in the holding area.
    pub strict_rnr: bool,
    /// The requester's receive holding bound: messages of this VI its
    /// engine holds before the application posts receives (the
    /// reliability machine's `hold_max`). `1..=65535`; 0 is
    /// [`FrameError::BadLength`].
    pub hold: u16,
}

/// Grants a [`ViOpen`]: the listener accepted, and its VI `src_vi` is
/// connected to the requester's VI `dst_vi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ViAccept {
    /// The `request_id` of the ViOpen answered.
    pub request_id: u32,
    /// The requester's VI (the ViOpen's `src_vi`, echoed).
    pub dst_vi: u32,
    /// The acceptor's VI id, on the sender of this frame.
    pub src_vi: u32,
    /// The token to put in every frame sent to the acceptor's VI.
    pub accept_token: u64,
    /// The acceptor's receive holding bound, as [`ViOpen::hold`]:
    /// `1..=65535`, 0 is [`FrameError::BadLength`].
    pub hold: u16,
}

/// Refuses a [`ViOpen`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ViRefuse {
    /// The `request_id` of the ViOpen answered.
    pub request_id: u32,
    /// The requester's VI (the ViOpen's `src_vi`, echoed).
    pub dst_vi: u32,
    /// Why: `Refused`, `NoResources`, `NoListener` or `AttributesMismatch`.
    pub reason: RefuseReason,
}

/// Asks a UDM job's home engine for rank `rank` of job `job`, for a
/// process behind the sending engine; the first one of a job also asks
/// for the job's link between the two engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdmJoin {
    /// Chosen by the requester; echoed in the answer.
    pub request_id: u32,
    /// The job, as its home engine numbers it.
    pub job: u32,
    /// The job's key: without it, the job does not exist.
    pub key: u64,
    /// The requester's end of the job's link (a VI id on its engine).
    pub src_link: u32,
    /// The token the requester expects on every frame to its link.
    pub src_token: u64,
    /// The rank asked for.
    pub rank: u32,
    /// The requester's receive holding bound (as [`ViOpen::hold`]).
    pub hold: u16,
}

/// Grants a [`UdmJoin`]: rank `rank` is the requester's, and the home's
/// end of the link is `src_link`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdmAccept {
    /// The `request_id` of the UdmJoin answered.
    pub request_id: u32,
    /// The requester's end of the link (the UdmJoin's `src_link`).
    pub dst_link: u32,
    /// The home's end of the link.
    pub src_link: u32,
    /// The token to put in every frame sent to the home's end.
    pub accept_token: u64,
    /// The rank granted.
    pub rank: u32,
    /// The job's nodes.
    pub nodes: u32,
    /// The job's fast ring capacity (messages).
    pub fast_cap: u32,
    /// The job's virtual buffer capacity (messages).
    pub buffer_cap: u32,
    /// The job's atomicity timeout (µs).
    pub timeout_us: u32,
    /// The home's receive holding bound (as [`ViAccept::hold`]).
    pub hold: u16,
    /// A bit per rank (rank 0 is bit 0) that is gone.
    pub gone: u64,
}

/// Tells the peer that its VI `dst_vi` is gone (closed by its peer's
/// owner) or broke. The receiver checks `token` against that VI before
/// acting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ViClose {
    /// The VI id on the receiving engine.
    pub dst_vi: u32,
    /// The token of that VI.
    pub token: u64,
    /// [`VI_CLOSE_NORMAL`] (0) when the VI was closed normally, else the
    /// code of the [`ViError`] that broke it (1..=7). Any value parses; the
    /// receiver maps one it does not know ([`ViClose::error`] gives `None`
    /// for it).
    pub reason: u32,
}

/// [`ViClose::reason`] of a VI closed normally, not broken.
pub const VI_CLOSE_NORMAL: u32 = 0;

impl ViClose {
    /// The error that broke the VI: `None` for [`VI_CLOSE_NORMAL`] or a code
    /// this version does not know.
    pub fn error(&self) -> Option<ViError> {
        ViError::from_u32(self.reason)
    }
}

/// The receiver's acknowledgement of VI `dst_vi`'s messages, with its
/// credit: an [`Ack`] of the reliability state machine addressed to a VI. A
/// data-path frame: not authenticated by the cluster key, but by `token`
/// and the sender's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ViAck {
    /// The VI id on the receiving engine (the sender of the acked messages).
    pub dst_vi: u32,
    /// The token of that VI.
    pub token: u64,
    /// [`Ack::cum_ack`]: every message before it was accepted.
    pub cum_ack: u32,
    /// [`Ack::cum_placed`]: every message before it is in a posted buffer.
    pub cum_placed: u32,
    /// [`Ack::window_end`]: the sender may send sequence numbers below it.
    pub window_end: u32,
    /// [`Ack::nack`] (bit 0 of the `flags` field; the other bits are sent as
    /// 0 and ignored): a gap was seen at `cum_ack`.
    pub nack: bool,
    /// What the receiver holds past `cum_ack` (bit 1 of `flags`), if it
    /// said.
    pub sack: Option<Sack>,
}

impl ViAck {
    /// The frame carrying `ack` to VI `dst_vi` with `token`.
    pub fn from_ack(dst_vi: u32, token: u64, ack: Ack) -> ViAck {
        ViAck {
            dst_vi,
            token,
            cum_ack: ack.cum_ack,
            cum_placed: ack.cum_placed,
            window_end: ack.window_end,
            nack: ack.nack,
            sack: None,
        }
    }

    /// The same with a selective acknowledgement.
    pub fn with_sack(self, sack: Option<Sack>) -> ViAck {
        ViAck { sack, ..self }
    }

    /// The ack this frame carries.
    pub fn ack(&self) -> Ack {
        Ack {
            cum_ack: self.cum_ack,
            cum_placed: self.cum_placed,
            window_end: self.window_end,
            nack: self.nack,
        }
    }
}

/// The kind-specific part of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// See [`Data`].
    Data(Data<'a>),
    /// See [`OpenRequest`].
    OpenRequest(OpenRequest),
    /// See [`OpenAccept`].
    OpenAccept(OpenAccept),
    /// See [`OpenRefuse`].
    OpenRefuse(OpenRefuse),
    /// See [`Close`].
    Close(Close),
    /// The sending engine is alive.
    Keepalive,
    /// Confirms an accepted open; the fields name the accepting side's
    /// channel as a [`Close`] does.
    Confirm(Close),
    /// See [`ViOpen`].
    ViOpen(ViOpen),
    /// See [`ViAccept`].
    ViAccept(ViAccept),
    /// See [`ViRefuse`].
    ViRefuse(ViRefuse),
    /// See [`ViClose`].
    ViClose(ViClose),
    /// See [`ViAck`].
    ViAck(ViAck),
    /// See [`UdmJoin`].
    UdmJoin(UdmJoin),
    /// See [`UdmAccept`].
    UdmAccept(UdmAccept),
}

impl Body<'_> {
    /// The kind byte of this body.
    pub fn kind(&self) -> Kind {
        match self {
            Body::Data(_) => Kind::Data,
            Body::OpenRequest(_) => Kind::OpenRequest,
            Body::OpenAccept(_) => Kind::OpenAccept,
            Body::OpenRefuse(_) => Kind::OpenRefuse,
            Body::Close(_) => Kind::Close,
            Body::Keepalive => Kind::Keepalive,
            Body::Confirm(_) => Kind::Confirm,
            Body::ViOpen(_) => Kind::ViOpen,
            Body::ViAccept(_) => Kind::ViAccept,
            Body::ViRefuse(_) => Kind::ViRefuse,
            Body::ViClose(_) => Kind::ViClose,
            Body::ViAck(_) => Kind::ViAck,
            Body::UdmJoin(_) => Kind::UdmJoin,
            Body::UdmAccept(_) => Kind::UdmAccept,
        }
    }
}

/// One parsed (or to-be-emitted) frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Incarnation id of the sending engine (random per engine start): a new
    /// value from the same address means the peer engine restarted.
    pub src_engine: u64,
    /// The kind-specific part.
    pub body: Body<'a>,
}

#[inline]
fn rd16(b: &[u8], r: core::ops::Range<usize>) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[r]);
    u16::from_be_bytes(a)
}
#[inline]
fn rd32(b: &[u8], r: core::ops::Range<usize>) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[r]);
    u32::from_be_bytes(a)
}
#[inline]
fn rd64(b: &[u8], r: core::ops::Range<usize>) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[r]);
    u64::from_be_bytes(a)
}

impl<'a> Frame<'a> {
    /// Parses and checks one datagram. The Data payload borrows `buf`.
    ///
    /// Checks are made in order: length of the common header, magic,
    /// version, kind, length of the kind's header, field consistency. So any
    /// strict prefix of a valid frame fails with [`FrameError::Truncated`].
    pub fn parse(buf: &'a [u8]) -> Result<Frame<'a>, FrameError> {
        if buf.len() < COMMON_HEADER_LEN {
            return Err(FrameError::Truncated);
        }
        if rd16(buf, field::MAGIC) != MAGIC {
            return Err(FrameError::BadMagic);
        }
        if buf[field::VERSION] != VERSION {
            return Err(FrameError::BadVersion);
        }
        let kind = Kind::from_u8(buf[field::KIND]).ok_or(FrameError::UnknownKind)?;
        let hlen = kind.header_len();
        if buf.len() < hlen {
            return Err(FrameError::Truncated);
        }
        let end = match kind {
            Kind::Data => {
                let acked = rd16(buf, field::data::FLAGS) & DATA_FLAG_ACK != 0;
                hlen + usize::from(rd16(buf, field::data::FRAG_LEN))
                    + if acked { ACK_TRAILER_LEN } else { 0 }
            }
            _ => hlen,
        };
        if buf.len() < end {
            return Err(FrameError::Truncated);
        }
        if buf.len() > end {
            return Err(FrameError::BadLength);
        }
        let src_engine = rd64(buf, field::SRC_ENGINE);
        let body = match kind {
            Kind::Data => {
                use field::data as f;
                let flags = rd16(buf, f::FLAGS);
                let (payload_end, ack) = if flags & DATA_FLAG_ACK != 0 {
                    let t = end - ACK_TRAILER_LEN;
                    let ack = Ack {
                        cum_ack: rd32(buf, t..t + 4),
                        cum_placed: rd32(buf, t + 4..t + 8),
                        window_end: rd32(buf, t + 8..t + 12),
                        nack: rd16(buf, t + 12..t + 14) & VI_ACK_FLAG_NACK != 0,
                    };
                    (t, Some(ack))
                } else {
                    (end, None)
                };
                let d = Data {
                    dst_endpoint: rd32(buf, f::DST_ENDPOINT),
                    dst_channel: rd16(buf, f::DST_CHANNEL),
                    flags: flags & !DATA_FLAG_ACK,
                    token: rd64(buf, f::TOKEN),
                    msg_id: rd32(buf, f::MSG_ID),
                    frag_index: rd16(buf, f::FRAG_INDEX),
                    frag_count: rd16(buf, f::FRAG_COUNT),
                    msg_len: rd32(buf, f::MSG_LEN),
                    frag_offset: rd32(buf, f::FRAG_OFFSET),
                    payload: &buf[f::PAYLOAD..payload_end],
                    ack,
                };
                d.check()?;
                Body::Data(d)
            }
            Kind::OpenRequest => {
                use field::open_request as f;
                Body::OpenRequest(OpenRequest {
                    src_endpoint: rd32(buf, f::SRC_ENDPOINT),
                    dst_endpoint: rd32(buf, f::DST_ENDPOINT),
                    request_id: rd32(buf, f::REQUEST_ID),
                    src_channel: rd16(buf, f::SRC_CHANNEL),
                    src_token: rd64(buf, f::SRC_TOKEN),
                    flags: rd16(buf, f::FLAGS),
                })
            }
            Kind::OpenAccept => {
                use field::open_accept as f;
                Body::OpenAccept(OpenAccept {
                    request_id: rd32(buf, f::REQUEST_ID),
                    src_endpoint: rd32(buf, f::SRC_ENDPOINT),
                    dst_endpoint: rd32(buf, f::DST_ENDPOINT),
                    accept_channel: rd16(buf, f::ACCEPT_CHANNEL),
                    accept_token: rd64(buf, f::ACCEPT_TOKEN),
                })
            }
            Kind::OpenRefuse => {
                use field::open_refuse as f;
                Body::OpenRefuse(OpenRefuse {
                    request_id: rd32(buf, f::REQUEST_ID),
                    src_endpoint: rd32(buf, f::SRC_ENDPOINT),
                    dst_endpoint: rd32(buf, f::DST_ENDPOINT),
                    reason: RefuseReason::from_u8(buf[f::REASON]).ok_or(FrameError::BadReason)?,
                })
            }
            Kind::Close | Kind::Confirm => {
                use field::close as f;
                let c = Close {
                    dst_endpoint: rd32(buf, f::DST_ENDPOINT),
                    dst_channel: rd16(buf, f::DST_CHANNEL),
                    token: rd64(buf, f::TOKEN),
                };
                if kind == Kind::Close {
                    Body::Close(c)
                } else {
                    Body::Confirm(c)
                }
            }
            Kind::Keepalive => Body::Keepalive,
            Kind::ViOpen => {
                use field::vi_open as f;
                Body::ViOpen(ViOpen {
                    request_id: rd32(buf, f::REQUEST_ID),
                    src_vi: rd32(buf, f::SRC_VI),
                    tag: rd64(buf, f::TAG),
                    src_token: rd64(buf, f::SRC_TOKEN),
                    reliability: Reliability::from_u8(buf[f::RELIABILITY])
                        .ok_or(FrameError::BadReason)?,
                    strict_rnr: buf[f::FLAGS] & VI_OPEN_FLAG_STRICT_RNR != 0,
                    hold: nonzero_hold(rd16(buf, f::HOLD))?,
                })
            }
            Kind::ViAccept => {
                use field::vi_accept as f;
                Body::ViAccept(ViAccept {
                    request_id: rd32(buf, f::REQUEST_ID),
                    dst_vi: rd32(buf, f::DST_VI),
                    src_vi: rd32(buf, f::SRC_VI),
                    accept_token: rd64(buf, f::ACCEPT_TOKEN),
                    hold: nonzero_hold(rd16(buf, f::HOLD))?,
                })
            }
            Kind::ViRefuse => {
                use field::vi_refuse as f;
                Body::ViRefuse(ViRefuse {
                    request_id: rd32(buf, f::REQUEST_ID),
                    dst_vi: rd32(buf, f::DST_VI),
                    reason: RefuseReason::from_u8(buf[f::REASON]).ok_or(FrameError::BadReason)?,
                })
            }
            Kind::ViClose => {
                use field::vi_close as f;
                Body::ViClose(ViClose {
                    dst_vi: rd32(buf, f::DST_VI),
                    token: rd64(buf, f::TOKEN),
                    reason: rd32(buf, f::REASON),
                })
            }
            Kind::UdmJoin => {
                use field::udm_join as f;
                Body::UdmJoin(UdmJoin {
                    request_id: rd32(buf, f::REQUEST_ID),
                    job: rd32(buf, f::JOB),
                    key: rd64(buf, f::KEY),
                    src_link: rd32(buf, f::SRC_LINK),
                    src_token: rd64(buf, f::SRC_TOKEN),
                    rank: rd32(buf, f::RANK),
                    hold: nonzero_hold(rd16(buf, f::HOLD))?,
                })
            }
            Kind::UdmAccept => {
                use field::udm_accept as f;
                Body::UdmAccept(UdmAccept {
                    request_id: rd32(buf, f::REQUEST_ID),
                    dst_link: rd32(buf, f::DST_LINK),
                    src_link: rd32(buf, f::SRC_LINK),
                    accept_token: rd64(buf, f::ACCEPT_TOKEN),
                    rank: rd32(buf, f::RANK),
                    nodes: rd32(buf, f::NODES),
                    fast_cap: rd32(buf, f::FAST_CAP),
                    buffer_cap: rd32(buf, f::BUFFER_CAP),
                    timeout_us: rd32(buf, f::TIMEOUT_US),
                    hold: nonzero_hold(rd16(buf, f::HOLD))?,
                    gone: rd64(buf, f::GONE),
                })
            }
            Kind::ViAck => {
                use field::vi_ack as f;
                Body::ViAck(ViAck {
                    dst_vi: rd32(buf, f::DST_VI),
                    token: rd64(buf, f::TOKEN),
                    cum_ack: rd32(buf, f::CUM_ACK),
                    cum_placed: rd32(buf, f::CUM_PLACED),
                    window_end: rd32(buf, f::WINDOW_END),
                    nack: rd16(buf, f::FLAGS) & VI_ACK_FLAG_NACK != 0,
                    sack: (rd16(buf, f::FLAGS) & VI_ACK_FLAG_SACK != 0).then(|| Sack {
                        ahead: rd64(buf, f::AHEAD),
                        frags: core::array::from_fn(|i| {
                            rd64(buf, f::FRAGS + 8 * i..f::FRAGS + 8 * i + 8)
                        }),
                        frag_base: rd16(buf, f::FRAG_BASE),
                        closed: rd16(buf, f::FLAGS) & VI_ACK_FLAG_CLOSED != 0,
                        tail_held: false,
                    }),
                })
            }
        };
        Ok(Frame { src_engine, body })
    }

    /// Total length of this frame on the wire.
    pub fn len(&self) -> usize {
        match &self.body {
            Body::Data(d) => {
                DATA_HEADER_LEN
                    + d.payload.len()
                    + if d.ack.is_some() { ACK_TRAILER_LEN } else { 0 }
            }
            b => b.kind().header_len(),
        }
    }

    /// Always false: a frame has at least its common header. Present for
    /// symmetry with [`Frame::len`].
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes this frame at the start of `buf` and returns its length.
    ///
    /// Fails with [`FrameError::BufferTooSmall`] when `buf` is shorter than
    /// [`Frame::len`], and with [`FrameError::BadLength`] for a Data frame
    /// that would not pass [`Frame::parse`] (or whose payload is longer than
    /// a datagram can carry) or a ViOpen or ViAccept whose `hold` is 0.
    /// Padding, and the flag bits this version does not define (but those
    /// of Data, carried through), are written as zero.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, FrameError> {
        match &self.body {
            Body::Data(d) => {
                d.check()?;
                if self.len() > MAX_DATAGRAM {
                    return Err(FrameError::BadLength);
                }
            }
            Body::ViOpen(ViOpen { hold, .. }) | Body::ViAccept(ViAccept { hold, .. }) => {
                nonzero_hold(*hold)?;
            }
            _ => {}
        }
        let len = self.len();
        let buf = buf.get_mut(..len).ok_or(FrameError::BufferTooSmall)?;
        let kind = self.body.kind();
        buf[field::MAGIC].copy_from_slice(&MAGIC.to_be_bytes());
        buf[field::VERSION] = VERSION;
        buf[field::KIND] = kind as u8;
        buf[field::SRC_ENGINE].copy_from_slice(&self.src_engine.to_be_bytes());
        match &self.body {
            Body::Data(d) => {
                emit_data_header(d, buf);
                let end = DATA_HEADER_LEN + d.payload.len();
                buf[DATA_HEADER_LEN..end].copy_from_slice(d.payload);
                if let Some(a) = d.ack {
                    let t = &mut buf[end..end + ACK_TRAILER_LEN];
                    t[0..4].copy_from_slice(&a.cum_ack.to_be_bytes());
                    t[4..8].copy_from_slice(&a.cum_placed.to_be_bytes());
                    t[8..12].copy_from_slice(&a.window_end.to_be_bytes());
                    let flags = if a.nack { VI_ACK_FLAG_NACK } else { 0 };
                    t[12..14].copy_from_slice(&flags.to_be_bytes());
                    t[14..16].fill(0);
                }
            }
            Body::OpenRequest(o) => {
                use field::open_request as f;
                buf[f::SRC_ENDPOINT].copy_from_slice(&o.src_endpoint.to_be_bytes());
                buf[f::DST_ENDPOINT].copy_from_slice(&o.dst_endpoint.to_be_bytes());
                buf[f::REQUEST_ID].copy_from_slice(&o.request_id.to_be_bytes());
                buf[f::SRC_CHANNEL].copy_from_slice(&o.src_channel.to_be_bytes());
                buf[f::SRC_TOKEN].copy_from_slice(&o.src_token.to_be_bytes());
                buf[f::FLAGS].copy_from_slice(&o.flags.to_be_bytes());
                buf[f::FLAGS.end..f::END].fill(0);
            }
            Body::OpenAccept(o) => {
                use field::open_accept as f;
                buf[f::REQUEST_ID].copy_from_slice(&o.request_id.to_be_bytes());
                buf[f::SRC_ENDPOINT].copy_from_slice(&o.src_endpoint.to_be_bytes());
                buf[f::DST_ENDPOINT].copy_from_slice(&o.dst_endpoint.to_be_bytes());
                buf[f::ACCEPT_CHANNEL].copy_from_slice(&o.accept_channel.to_be_bytes());
                buf[f::ACCEPT_TOKEN].copy_from_slice(&o.accept_token.to_be_bytes());
                buf[f::ACCEPT_TOKEN.end..f::END].fill(0);
            }
            Body::OpenRefuse(o) => {
                use field::open_refuse as f;
                buf[f::REQUEST_ID].copy_from_slice(&o.request_id.to_be_bytes());
                buf[f::SRC_ENDPOINT].copy_from_slice(&o.src_endpoint.to_be_bytes());
                buf[f::DST_ENDPOINT].copy_from_slice(&o.dst_endpoint.to_be_bytes());
                buf[f::REASON] = o.reason as u8;
                buf[f::REASON + 1..f::END].fill(0);
            }
            Body::Keepalive => buf[COMMON_HEADER_LEN..KEEPALIVE_LEN].fill(0),
            Body::Close(c) | Body::Confirm(c) => {
                use field::close as f;
                buf[f::DST_ENDPOINT].copy_from_slice(&c.dst_endpoint.to_be_bytes());
                buf[f::DST_CHANNEL].copy_from_slice(&c.dst_channel.to_be_bytes());
                buf[f::TOKEN].copy_from_slice(&c.token.to_be_bytes());
                buf[f::TOKEN.end..f::END].fill(0);
            }
            Body::ViOpen(o) => {
                use field::vi_open as f;
                buf[f::REQUEST_ID].copy_from_slice(&o.request_id.to_be_bytes());
                buf[f::SRC_VI].copy_from_slice(&o.src_vi.to_be_bytes());
                buf[f::TAG].copy_from_slice(&o.tag.to_be_bytes());
                buf[f::SRC_TOKEN].copy_from_slice(&o.src_token.to_be_bytes());
                buf[f::RELIABILITY] = o.reliability as u8;
                buf[f::FLAGS] = if o.strict_rnr {
                    VI_OPEN_FLAG_STRICT_RNR
                } else {
                    0
                };
                buf[f::HOLD].copy_from_slice(&o.hold.to_be_bytes());
            }
            Body::ViAccept(a) => {
                use field::vi_accept as f;
                buf[f::REQUEST_ID].copy_from_slice(&a.request_id.to_be_bytes());
                buf[f::DST_VI].copy_from_slice(&a.dst_vi.to_be_bytes());
                buf[f::SRC_VI].copy_from_slice(&a.src_vi.to_be_bytes());
                buf[f::ACCEPT_TOKEN].copy_from_slice(&a.accept_token.to_be_bytes());
                buf[f::HOLD].copy_from_slice(&a.hold.to_be_bytes());
                buf[f::HOLD.end..f::END].fill(0);
            }
            Body::ViRefuse(r) => {
                use field::vi_refuse as f;
                buf[f::REQUEST_ID].copy_from_slice(&r.request_id.to_be_bytes());
                buf[f::DST_VI].copy_from_slice(&r.dst_vi.to_be_bytes());
                buf[f::REASON] = r.reason as u8;
                buf[f::REASON + 1..f::END].fill(0);
            }
            Body::ViClose(c) => {
                use field::vi_close as f;
                buf[f::DST_VI].copy_from_slice(&c.dst_vi.to_be_bytes());
                buf[f::TOKEN].copy_from_slice(&c.token.to_be_bytes());
                buf[f::REASON].copy_from_slice(&c.reason.to_be_bytes());
            }
            Body::ViAck(a) => {
                use field::vi_ack as f;
                let mut flags = if a.nack { VI_ACK_FLAG_NACK } else { 0 };
                if let Some(k) = a.sack {
                    flags |= VI_ACK_FLAG_SACK;
                    if k.closed {
                        flags |= VI_ACK_FLAG_CLOSED;
                    }
                }
                buf[f::DST_VI].copy_from_slice(&a.dst_vi.to_be_bytes());
                buf[f::TOKEN].copy_from_slice(&a.token.to_be_bytes());
                buf[f::CUM_ACK].copy_from_slice(&a.cum_ack.to_be_bytes());
                buf[f::CUM_PLACED].copy_from_slice(&a.cum_placed.to_be_bytes());
                buf[f::WINDOW_END].copy_from_slice(&a.window_end.to_be_bytes());
                buf[f::FLAGS].copy_from_slice(&flags.to_be_bytes());
                buf[f::FLAGS.end..f::END].fill(0);
                if let Some(k) = a.sack {
                    buf[f::FRAG_BASE].copy_from_slice(&k.frag_base.to_be_bytes());
                    buf[f::AHEAD].copy_from_slice(&k.ahead.to_be_bytes());
                    for (i, w) in k.frags.iter().enumerate() {
                        let at = f::FRAGS + 8 * i;
                        buf[at..at + 8].copy_from_slice(&w.to_be_bytes());
                    }
                }
            }
            Body::UdmJoin(j) => {
                use field::udm_join as f;
                buf[f::REQUEST_ID].copy_from_slice(&j.request_id.to_be_bytes());
                buf[f::JOB].copy_from_slice(&j.job.to_be_bytes());
                buf[f::KEY].copy_from_slice(&j.key.to_be_bytes());
                buf[f::SRC_LINK].copy_from_slice(&j.src_link.to_be_bytes());
                buf[f::SRC_TOKEN].copy_from_slice(&j.src_token.to_be_bytes());
                buf[f::RANK].copy_from_slice(&j.rank.to_be_bytes());
                buf[f::HOLD].copy_from_slice(&j.hold.to_be_bytes());
                buf[f::HOLD.end..f::END].fill(0);
            }
            Body::UdmAccept(a) => {
                use field::udm_accept as f;
                buf[f::REQUEST_ID].copy_from_slice(&a.request_id.to_be_bytes());
                buf[f::DST_LINK].copy_from_slice(&a.dst_link.to_be_bytes());
                buf[f::SRC_LINK].copy_from_slice(&a.src_link.to_be_bytes());
                buf[f::ACCEPT_TOKEN].copy_from_slice(&a.accept_token.to_be_bytes());
                buf[f::RANK].copy_from_slice(&a.rank.to_be_bytes());
                buf[f::NODES].copy_from_slice(&a.nodes.to_be_bytes());
                buf[f::FAST_CAP].copy_from_slice(&a.fast_cap.to_be_bytes());
                buf[f::BUFFER_CAP].copy_from_slice(&a.buffer_cap.to_be_bytes());
                buf[f::TIMEOUT_US].copy_from_slice(&a.timeout_us.to_be_bytes());
                buf[f::HOLD].copy_from_slice(&a.hold.to_be_bytes());
                buf[f::HOLD.end..f::GONE.start].fill(0);
                buf[f::GONE].copy_from_slice(&a.gone.to_be_bytes());
            }
        }
        Ok(len)
    }
}

/// A holding bound read from (or written to) the wire: 0 is not one.
fn nonzero_hold(hold: u16) -> Result<u16, FrameError> {
    if hold == 0 {
        Err(FrameError::BadLength)
    } else {
        Ok(hold)
    }
}

/// Writes the Data-specific header fields (offsets 12..48). `buf` is at
/// least [`DATA_HEADER_LEN`] long and the payload fits in a datagram.
fn emit_data_header(d: &Data<'_>, buf: &mut [u8]) {
    use field::data as f;
    buf[f::DST_ENDPOINT].copy_from_slice(&d.dst_endpoint.to_be_bytes());
    buf[f::DST_CHANNEL].copy_from_slice(&d.dst_channel.to_be_bytes());
    let flags = if d.ack.is_some() {
        d.flags | DATA_FLAG_ACK
    } else {
        d.flags & !DATA_FLAG_ACK
    };
    buf[f::FLAGS].copy_from_slice(&flags.to_be_bytes());
    buf[f::TOKEN].copy_from_slice(&d.token.to_be_bytes());
    buf[f::MSG_ID].copy_from_slice(&d.msg_id.to_be_bytes());
    buf[f::FRAG_INDEX].copy_from_slice(&d.frag_index.to_be_bytes());
    buf[f::FRAG_COUNT].copy_from_slice(&d.frag_count.to_be_bytes());
    buf[f::MSG_LEN].copy_from_slice(&d.msg_len.to_be_bytes());
    buf[f::FRAG_OFFSET].copy_from_slice(&d.frag_offset.to_be_bytes());
    buf[f::FRAG_LEN].copy_from_slice(&(d.payload.len() as u16).to_be_bytes());
    buf[f::FRAG_LEN.end..f::PAYLOAD].fill(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(payload: &[u8]) -> Frame<'_> {
        Frame {
            src_engine: 0x0102_0304_0506_0708,
            body: Body::Data(Data {
                dst_endpoint: 7,
                dst_channel: 3,
                flags: 0,
                token: 0xDEAD_BEEF_CAFE_F00D,
                msg_id: 42,
                frag_index: 0,
                frag_count: 1,
                msg_len: payload.len() as u32,
                frag_offset: 0,
                payload,
                ack: None,
            }),
        }
    }

    fn vi_open() -> ViOpen {
        ViOpen {
            request_id: 0x1001,
            src_vi: 0x1002,
            tag: 0x1003_0000_0000_0004,
            src_token: 0x1005_0000_0000_0006,
            reliability: Reliability::ReliableReception,
            strict_rnr: true,
            hold: 0x1007,
        }
    }

    fn vi_accept() -> ViAccept {
        ViAccept {
            request_id: 0x1101,
            dst_vi: 0x1102,
            src_vi: 0x1103,
            accept_token: 0x1104_0000_0000_0005,
            hold: 0x1106,
        }
    }

    fn vi_ack() -> ViAck {
        ViAck {
            dst_vi: 0x1401,
            token: 0x1402_0000_0000_0003,
            cum_ack: 0x1404,
            cum_placed: 0x1405,
            window_end: 0x1406,
            nack: true,
            sack: Some(Sack {
                ahead: 0x1407,
                frags: [1, 2, 3, 0x1408],
                frag_base: 0x1409,
                closed: false,
                tail_held: false,
            }),
        }
    }

    /// One frame of each kind (and of each shape of Data), named: the
    /// seeds of the `wire_frame` fuzz target (`fuzz/seeds/wire_frame/`).
    fn named_samples() -> Vec<(&'static str, Frame<'static>)> {
        const P: &[u8] = b"hello, wire";
        vec![
            ("data", data(P)),
            ("data_empty", data(&[])),
            (
                "data_fragment",
                Frame {
                    src_engine: 1,
                    body: Body::Data(Data {
                        dst_endpoint: 1,
                        dst_channel: 2,
                        flags: 0x8000,
                        token: 3,
                        msg_id: 4,
                        frag_index: 2,
                        frag_count: 3,
                        msg_len: 25,
                        frag_offset: 20,
                        payload: b"abcde",
                        ack: None,
                    }),
                },
            ),
            (
                "open_request",
                Frame {
                    src_engine: u64::MAX,
                    body: Body::OpenRequest(OpenRequest {
                        src_endpoint: 11,
                        dst_endpoint: 12,
                        request_id: 13,
                        src_channel: 14,
                        src_token: 15,
                        flags: 16,
                    }),
                },
            ),
            (
                "open_accept",
                Frame {
                    src_engine: 2,
                    body: Body::OpenAccept(OpenAccept {
                        request_id: 21,
                        src_endpoint: 22,
                        dst_endpoint: 23,
                        accept_channel: 24,
                        accept_token: 25,
                    }),
                },
            ),
            (
                "open_refuse",
                Frame {
                    src_engine: 3,
                    body: Body::OpenRefuse(OpenRefuse {
                        request_id: 31,
                        src_endpoint: 32,
                        dst_endpoint: 33,
                        reason: RefuseReason::NoResources,
                    }),
                },
            ),
            (
                "close",
                Frame {
                    src_engine: 4,
                    body: Body::Close(Close {
                        dst_endpoint: 41,
                        dst_channel: 42,
                        token: 43,
                    }),
                },
            ),
            (
                "keepalive",
                Frame {
                    src_engine: 5,
                    body: Body::Keepalive,
                },
            ),
            (
                "confirm",
                Frame {
                    src_engine: 6,
                    body: Body::Confirm(Close {
                        dst_endpoint: 61,
                        dst_channel: 62,
                        token: 63,
                    }),
                },
            ),
            (
                "vi_open",
                Frame {
                    src_engine: 0x10,
                    body: Body::ViOpen(vi_open()),
                },
            ),
            (
                "vi_accept",
                Frame {
                    src_engine: 0x11,
                    body: Body::ViAccept(vi_accept()),
                },
            ),
            (
                "vi_refuse",
                Frame {
                    src_engine: 0x12,
                    body: Body::ViRefuse(ViRefuse {
                        request_id: 0x1201,
                        dst_vi: 0x1202,
                        reason: RefuseReason::AttributesMismatch,
                    }),
                },
            ),
            (
                "vi_close",
                Frame {
                    src_engine: 0x13,
                    body: Body::ViClose(ViClose {
                        dst_vi: 0x1301,
                        token: 0x1302_0000_0000_0003,
                        reason: ViError::Timeout as u32,
                    }),
                },
            ),
            (
                "vi_ack",
                Frame {
                    src_engine: 0x14,
                    body: Body::ViAck(vi_ack()),
                },
            ),
            (
                "udm_join",
                Frame {
                    src_engine: 0x20,
                    body: Body::UdmJoin(UdmJoin {
                        request_id: 0x2001,
                        job: 0x2002,
                        key: 0x2003_0000_0000_0004,
                        src_link: 0x8000_2005,
                        src_token: 0x2006_0000_0000_0007,
                        rank: 9,
                        hold: 64,
                    }),
                },
            ),
            (
                "udm_accept",
                Frame {
                    src_engine: 0x21,
                    body: Body::UdmAccept(UdmAccept {
                        request_id: 0x2101,
                        dst_link: 0x8000_2102,
                        src_link: 0x8000_2103,
                        accept_token: 0x2104_0000_0000_0005,
                        rank: 6,
                        nodes: 7,
                        fast_cap: 8,
                        buffer_cap: 8192,
                        timeout_us: 2000,
                        hold: 64,
                        gone: 0x80,
                    }),
                },
            ),
            (
                "data_vi",
                Frame {
                    src_engine: 0x15,
                    body: Body::Data(Data {
                        dst_endpoint: 0x1501,
                        dst_channel: 0,
                        flags: DATA_FLAG_VI,
                        token: 0x1502_0000_0000_0003,
                        msg_id: 0xFFFF_FFFF,
                        frag_index: 1,
                        frag_count: 2,
                        msg_len: 7,
                        frag_offset: 4,
                        payload: b"via",
                        ack: None,
                    }),
                },
            ),
            (
                "data_vi_ack",
                Frame {
                    src_engine: 0x16,
                    body: Body::Data(Data {
                        dst_endpoint: 0x1601,
                        dst_channel: VI_DATA_CHANNEL,
                        flags: DATA_FLAG_VI,
                        token: 0x1602_0000_0000_0004,
                        msg_id: 9,
                        frag_index: 0,
                        frag_count: 1,
                        msg_len: 5,
                        frag_offset: 0,
                        payload: b"reply",
                        ack: Some(Ack {
                            cum_ack: 0x1603,
                            cum_placed: 0x1602,
                            window_end: 0x1643,
                            nack: true,
                        }),
                    }),
                },
            ),
        ]
    }

    fn samples() -> Vec<Frame<'static>> {
        named_samples().into_iter().map(|(_, f)| f).collect()
    }

    /// The sample of `kind` (the first, for Data).
    fn sample(kind: Kind) -> Frame<'static> {
        samples()
            .into_iter()
            .find(|f| f.body.kind() == kind)
            .expect("a sample of every kind")
    }

    fn emit_vec(f: &Frame<'_>) -> Vec<u8> {
        let mut buf = vec![0xAAu8; f.len() + 10];
        let n = f.emit(&mut buf).unwrap();
        assert_eq!(n, f.len());
        buf.truncate(n);
        buf
    }

    #[test]
    fn round_trip_every_kind() {
        let mut kinds = Vec::new();
        for f in samples() {
            let bytes = emit_vec(&f);
            assert_eq!(Frame::parse(&bytes), Ok(f));
            kinds.push(f.body.kind());
        }
        for k in Kind::ALL {
            assert!(kinds.contains(&k), "{k:?} not covered");
        }
    }

    #[test]
    fn layout_is_big_endian_at_documented_offsets() {
        let bytes = emit_vec(&data(b"xy"));
        assert_eq!(&bytes[0..2], b"UN");
        assert_eq!(bytes[2], 1);
        assert_eq!(bytes[3], Kind::Data as u8);
        assert_eq!(&bytes[4..12], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&bytes[12..16], &[0, 0, 0, 7]);
        assert_eq!(&bytes[16..18], &[0, 3]);
        assert_eq!(&bytes[20..28], &0xDEAD_BEEF_CAFE_F00Du64.to_be_bytes());
        assert_eq!(&bytes[28..32], &[0, 0, 0, 42]);
        assert_eq!(&bytes[34..36], &[0, 1]);
        assert_eq!(&bytes[36..40], &[0, 0, 0, 2]);
        assert_eq!(&bytes[40..44], &[0, 0, 0, 0]);
        assert_eq!(&bytes[44..46], &[0, 2]);
        assert_eq!(&bytes[46..48], &[0, 0]);
        assert_eq!(&bytes[48..], b"xy");
        let refuse = emit_vec(&sample(Kind::OpenRefuse));
        assert_eq!(refuse[24], RefuseReason::NoResources as u8);
        assert_eq!(&refuse[25..28], &[0, 0, 0]);
    }

    #[test]
    fn every_strict_prefix_is_truncated() {
        for f in samples() {
            let bytes = emit_vec(&f);
            for n in 0..bytes.len() {
                assert_eq!(
                    Frame::parse(&bytes[..n]),
                    Err(FrameError::Truncated),
                    "{:?} prefix {n}",
                    f.body.kind()
                );
            }
        }
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        for f in samples() {
            let mut bytes = emit_vec(&f);
            bytes.push(0);
            assert_eq!(Frame::parse(&bytes), Err(FrameError::BadLength));
        }
    }

    #[test]
    fn padding_is_ignored_on_receipt() {
        for f in samples() {
            let mut bytes = emit_vec(&f);
            let pad = match f.body.kind() {
                Kind::Data => 46..48,
                Kind::OpenRequest => 36..38,
                Kind::OpenAccept => 34..38,
                Kind::OpenRefuse => 25..28,
                Kind::Close | Kind::Confirm => 26..28,
                Kind::Keepalive => 12..16,
                Kind::ViOpen => 40..40,
                Kind::ViAccept => 34..36,
                Kind::ViRefuse => 21..24,
                Kind::ViClose => 28..28,
                Kind::ViAck => 38..40,
                Kind::UdmJoin => 46..48,
                Kind::UdmAccept => 54..56,
            };
            assert!(bytes[pad.clone()].iter().all(|&b| b == 0));
            bytes[pad].fill(0xFF);
            assert_eq!(Frame::parse(&bytes), Ok(f));
        }
    }

    #[test]
    fn corrupted_header_fields() {
        let good = emit_vec(&data(b"abc"));
        let mut b = good.clone();
        b[0] = b'X';
        assert_eq!(Frame::parse(&b), Err(FrameError::BadMagic));
        let mut b = good.clone();
        b[2] = 2;
        assert_eq!(Frame::parse(&b), Err(FrameError::BadVersion));
        for k in [0u8, 8, 0x0F, 0x22, 0x30, 0xFF]
            .into_iter()
            .chain(0x15..=0x1F)
        {
            let mut b = good.clone();
            b[3] = k;
            assert_eq!(Frame::parse(&b), Err(FrameError::UnknownKind), "kind {k}");
        }
        // msg_len larger than the payload of a single fragment.
        let mut b = good.clone();
        b[39] = 4;
        assert_eq!(Frame::parse(&b), Err(FrameError::BadLength));
        // frag_count 0.
        let mut b = good.clone();
        b[35] = 0;
        assert_eq!(Frame::parse(&b), Err(FrameError::BadLength));
        // frag_index == frag_count.
        let mut b = good.clone();
        b[33] = 1;
        assert_eq!(Frame::parse(&b), Err(FrameError::BadLength));
        // nonzero offset of a single fragment.
        let mut b = good.clone();
        b[43] = 1;
        assert_eq!(Frame::parse(&b), Err(FrameError::BadLength));
        // frag_len disagreeing with the datagram, either way.
        let mut b = good.clone();
        b[45] = 4;
        assert_eq!(Frame::parse(&b), Err(FrameError::Truncated));
        let mut b = good.clone();
        b[45] = 2;
        assert_eq!(Frame::parse(&b), Err(FrameError::BadLength));
        // msg_len above MAX_MESSAGE.
        let mut b = good.clone();
        b[36..40].copy_from_slice(&(MAX_MESSAGE as u32 + 1).to_be_bytes());
        assert_eq!(Frame::parse(&b), Err(FrameError::BadLength));
        // bad refuse reason.
        let mut r = emit_vec(&sample(Kind::OpenRefuse));
        for code in [0u8, 6, 255] {
            r[24] = code;
            assert_eq!(Frame::parse(&r), Err(FrameError::BadReason));
        }
    }

    #[test]
    fn kinds_are_numbered_and_only_data_path_kinds_skip_the_mac() {
        for k in Kind::ALL {
            assert_eq!(Kind::from_u8(k as u8), Some(k));
            assert_eq!(k.is_data_path(), matches!(k, Kind::Data | Kind::ViAck));
        }
        for v in 0..=u8::MAX {
            let known =
                (1..=7).contains(&v) || (0x10..=0x14).contains(&v) || (0x20..=0x21).contains(&v);
            assert_eq!(Kind::from_u8(v).is_some(), known, "kind {v:#x}");
        }
        for r in RefuseReason::ALL {
            assert_eq!(RefuseReason::from_u8(r as u8), Some(r));
        }
        assert_eq!(RefuseReason::NoListener as u8, 4);
        assert_eq!(RefuseReason::AttributesMismatch as u8, 5);
    }

    #[test]
    fn vi_layouts_are_big_endian_at_documented_offsets() {
        let open = emit_vec(&sample(Kind::ViOpen));
        assert_eq!(open.len(), VI_OPEN_LEN);
        assert_eq!(open[3], 0x10);
        assert_eq!(&open[4..12], &0x10u64.to_be_bytes());
        assert_eq!(&open[12..16], &0x1001u32.to_be_bytes());
        assert_eq!(&open[16..20], &0x1002u32.to_be_bytes());
        assert_eq!(&open[20..28], &0x1003_0000_0000_0004u64.to_be_bytes());
        assert_eq!(&open[28..36], &0x1005_0000_0000_0006u64.to_be_bytes());
        assert_eq!(open[36], 2);
        assert_eq!(open[37], 1);
        assert_eq!(&open[38..40], &0x1007u16.to_be_bytes());

        let accept = emit_vec(&sample(Kind::ViAccept));
        assert_eq!(accept.len(), VI_ACCEPT_LEN);
        assert_eq!(accept[3], 0x11);
        assert_eq!(&accept[12..16], &0x1101u32.to_be_bytes());
        assert_eq!(&accept[16..20], &0x1102u32.to_be_bytes());
        assert_eq!(&accept[20..24], &0x1103u32.to_be_bytes());
        assert_eq!(&accept[24..32], &0x1104_0000_0000_0005u64.to_be_bytes());
        assert_eq!(&accept[32..34], &0x1106u16.to_be_bytes());
        assert_eq!(&accept[34..36], &[0, 0]);

        let refuse = emit_vec(&sample(Kind::ViRefuse));
        assert_eq!(refuse.len(), VI_REFUSE_LEN);
        assert_eq!(refuse[3], 0x12);
        assert_eq!(&refuse[12..16], &0x1201u32.to_be_bytes());
        assert_eq!(&refuse[16..20], &0x1202u32.to_be_bytes());
        assert_eq!(refuse[20], 5);
        assert_eq!(&refuse[21..24], &[0, 0, 0]);

        let close = emit_vec(&sample(Kind::ViClose));
        assert_eq!(close.len(), VI_CLOSE_LEN);
        assert_eq!(close[3], 0x13);
        assert_eq!(&close[12..16], &0x1301u32.to_be_bytes());
        assert_eq!(&close[16..24], &0x1302_0000_0000_0003u64.to_be_bytes());
        assert_eq!(&close[24..28], &5u32.to_be_bytes());

        let ack = emit_vec(&sample(Kind::ViAck));
        assert_eq!(ack.len(), VI_ACK_LEN);
        assert_eq!(ack[3], 0x14);
        assert_eq!(&ack[12..16], &0x1401u32.to_be_bytes());
        assert_eq!(&ack[16..24], &0x1402_0000_0000_0003u64.to_be_bytes());
        assert_eq!(&ack[24..28], &0x1404u32.to_be_bytes());
        assert_eq!(&ack[28..32], &0x1405u32.to_be_bytes());
        assert_eq!(&ack[32..36], &0x1406u32.to_be_bytes());
        assert_eq!(&ack[36..38], &[0, 3]);
        assert_eq!(&ack[38..40], &[0, 0]);
        assert_eq!(&ack[40..42], &0x1409u16.to_be_bytes());
        assert_eq!(&ack[42..48], &[0; 6]);
        assert_eq!(&ack[48..56], &0x1407u64.to_be_bytes());
        assert_eq!(&ack[56..64], &1u64.to_be_bytes());
        assert_eq!(&ack[80..88], &0x1408u64.to_be_bytes());
    }

    #[test]
    fn vi_open_reliability_and_flags() {
        let base = emit_vec(&sample(Kind::ViOpen));
        for (code, level) in [
            (0u8, Reliability::Unreliable),
            (1, Reliability::ReliableDelivery),
            (2, Reliability::ReliableReception),
        ] {
            let mut b = base.clone();
            b[36] = code;
            let Ok(Frame {
                body: Body::ViOpen(o),
                ..
            }) = Frame::parse(&b)
            else {
                panic!("reliability {code} parses");
            };
            assert_eq!(o.reliability, level);
        }
        for code in [3u8, 4, 0x80, 0xFF] {
            let mut b = base.clone();
            b[36] = code;
            assert_eq!(Frame::parse(&b), Err(FrameError::BadReason), "{code}");
        }
        // Bit 0 is strict receiver-not-ready; the others are ignored.
        for (flags, strict) in [(0u8, false), (1, true), (0xFE, false), (0xFF, true)] {
            let mut b = base.clone();
            b[37] = flags;
            let want = Frame {
                src_engine: 0x10,
                body: Body::ViOpen(ViOpen {
                    strict_rnr: strict,
                    ..vi_open()
                }),
            };
            assert_eq!(Frame::parse(&b), Ok(want), "flags {flags:#x}");
            // Emitted again, the unknown bits are zero.
            assert_eq!(emit_vec(&want)[37], u8::from(strict));
        }
    }

    #[test]
    fn zero_hold_is_refused_both_ways() {
        let mut open = emit_vec(&sample(Kind::ViOpen));
        open[38..40].fill(0);
        assert_eq!(Frame::parse(&open), Err(FrameError::BadLength));
        open[39] = 1;
        assert!(Frame::parse(&open).is_ok());
        open[38..40].fill(0xFF);
        assert!(Frame::parse(&open).is_ok());
        let mut accept = emit_vec(&sample(Kind::ViAccept));
        accept[32..34].fill(0);
        assert_eq!(Frame::parse(&accept), Err(FrameError::BadLength));
        let mut buf = [0u8; 64];
        let f = Frame {
            src_engine: 1,
            body: Body::ViOpen(ViOpen {
                hold: 0,
                ..vi_open()
            }),
        };
        assert_eq!(f.emit(&mut buf), Err(FrameError::BadLength));
        let f = Frame {
            src_engine: 1,
            body: Body::ViAccept(ViAccept {
                hold: 0,
                ..vi_accept()
            }),
        };
        assert_eq!(f.emit(&mut buf), Err(FrameError::BadLength));
    }

    #[test]
    fn vi_refuse_reasons_and_close_codes() {
        let base = emit_vec(&sample(Kind::ViRefuse));
        for r in RefuseReason::ALL {
            let mut b = base.clone();
            b[20] = r as u8;
            let Ok(Frame {
                body: Body::ViRefuse(v),
                ..
            }) = Frame::parse(&b)
            else {
                panic!("reason {r:?} parses");
            };
            assert_eq!(v.reason, r);
        }
        for code in [0u8, 6, 255] {
            let mut b = base.clone();
            b[20] = code;
            assert_eq!(Frame::parse(&b), Err(FrameError::BadReason), "{code}");
        }
        // Any close reason parses; the known ones map to their error.
        let base = emit_vec(&sample(Kind::ViClose));
        for reason in [VI_CLOSE_NORMAL, 1, 7, 8, 0x8000_0000, u32::MAX] {
            let mut b = base.clone();
            b[24..28].copy_from_slice(&reason.to_be_bytes());
            let Ok(Frame {
                body: Body::ViClose(c),
                ..
            }) = Frame::parse(&b)
            else {
                panic!("close reason {reason} parses");
            };
            assert_eq!(c.reason, reason);
            assert_eq!(c.error(), ViError::from_u32(reason));
            assert_eq!(c.error().is_some(), (1..=7).contains(&reason));
        }
    }

    #[test]
    fn vi_ack_carries_an_ack() {
        let a = vi_ack();
        let ack = a.ack();
        assert_eq!(
            (ack.cum_ack, ack.cum_placed, ack.window_end, ack.nack),
            (0x1404, 0x1405, 0x1406, true)
        );
        assert_eq!(ViAck::from_ack(a.dst_vi, a.token, ack).with_sack(a.sack), a);
        // Bit 0 of flags is the NACK, bit 1 the SACK, bit 2 a closed
        // window (with a SACK only); the others are ignored.
        let base = emit_vec(&sample(Kind::ViAck));
        let closed = Some(Sack {
            closed: true,
            ..vi_ack().sack.unwrap()
        });
        for (flags, nack, sack) in [
            (0u16, false, None),
            (1, true, None),
            (2, false, vi_ack().sack),
            (3, true, vi_ack().sack),
            (4, false, None),
            (6, false, closed),
            (0xFFFE, false, closed),
            (0xFFFF, true, closed),
        ] {
            let mut b = base.clone();
            b[36..38].copy_from_slice(&flags.to_be_bytes());
            let want = Frame {
                src_engine: 0x14,
                body: Body::ViAck(ViAck {
                    nack,
                    sack,
                    ..vi_ack()
                }),
            };
            assert_eq!(Frame::parse(&b), Ok(want), "flags {flags:#x}");
        }
    }

    #[test]
    fn vi_data_is_a_data_frame_with_its_flag() {
        let f = samples()
            .into_iter()
            .find(|f| matches!(f.body, Body::Data(d) if d.is_vi()))
            .expect("a VI data sample");
        let bytes = emit_vec(&f);
        assert_eq!(bytes[3], Kind::Data as u8);
        assert_eq!(&bytes[18..20], &DATA_FLAG_VI.to_be_bytes());
        assert_eq!(Frame::parse(&bytes), Ok(f));
        assert!(!matches!(data(b"x").body, Body::Data(d) if d.is_vi()));
        // The other flag bits are still carried through.
        let mut b = bytes.clone();
        b[18] = 0x80;
        let Ok(Frame {
            body: Body::Data(d),
            ..
        }) = Frame::parse(&b)
        else {
            panic!("parses");
        };
        assert!(d.is_vi());
        assert_eq!(d.flags, 0x8000 | DATA_FLAG_VI);
    }

    #[test]
    fn vi_data_carries_an_ack_after_its_payload() {
        let f = samples()
            .into_iter()
            .find(|f| matches!(f.body, Body::Data(d) if d.ack.is_some()))
            .expect("a sample with an ack");
        let Body::Data(d) = f.body else {
            unreachable!()
        };
        let bytes = emit_vec(&f);
        assert_eq!(bytes.len(), DATA_HEADER_LEN + 5 + ACK_TRAILER_LEN);
        assert_eq!(
            &bytes[18..20],
            &(DATA_FLAG_VI | DATA_FLAG_ACK).to_be_bytes()
        );
        assert_eq!(&bytes[48..53], b"reply");
        let t = &bytes[53..];
        assert_eq!(&t[0..4], &0x1603u32.to_be_bytes());
        assert_eq!(&t[4..8], &0x1602u32.to_be_bytes());
        assert_eq!(&t[8..12], &0x1643u32.to_be_bytes());
        assert_eq!(&t[12..16], &[0, 1, 0, 0]);
        // Parsed back: the flag is in `ack`, not in `flags`.
        assert_eq!(Frame::parse(&bytes), Ok(f));
        // Without the flag the trailer is bytes after the frame.
        let mut b = bytes.clone();
        b[19] &= !(DATA_FLAG_ACK as u8);
        assert_eq!(Frame::parse(&b), Err(FrameError::BadLength));
        // The flag on a channel's message, or on one fragment of several,
        // is refused both ways.
        for bad in [
            Data { flags: 0, ..d },
            Data {
                frag_count: 2,
                msg_len: 10,
                ..d
            },
        ] {
            let g = Frame {
                src_engine: 1,
                body: Body::Data(bad),
            };
            let mut buf = vec![0u8; g.len()];
            assert_eq!(g.emit(&mut buf), Err(FrameError::BadLength));
            let mut raw = emit_vec(&Frame {
                src_engine: 1,
                body: Body::Data(Data { ack: None, ..bad }),
            });
            raw[19] |= DATA_FLAG_ACK as u8;
            raw.extend_from_slice(&[0; ACK_TRAILER_LEN]);
            assert_eq!(Frame::parse(&raw), Err(FrameError::BadLength));
        }
        // A flag bit in `flags` is no ack: emit writes it from `ack`.
        let g = Frame {
            src_engine: 1,
            body: Body::Data(Data {
                flags: DATA_FLAG_VI | DATA_FLAG_ACK,
                ack: None,
                ..d
            }),
        };
        assert_eq!(emit_vec(&g).len(), DATA_HEADER_LEN + 5);
    }

    fn seeds_dir() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/wire_frame")
    }

    /// The committed seeds of the `wire_frame` fuzz target are the samples'
    /// encodings, one file per sample (`UNET_BLESS=1` rewrites them).
    #[test]
    fn fuzz_seeds_are_the_samples() {
        let dir = seeds_dir();
        if std::env::var_os("UNET_BLESS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            for (name, f) in named_samples() {
                std::fs::write(dir.join(name), emit_vec(&f)).unwrap();
            }
        }
        let mut n = 0;
        for (name, f) in named_samples() {
            let seed = std::fs::read(dir.join(name))
                .unwrap_or_else(|e| panic!("seed {name}: {e} (UNET_BLESS=1 writes it)"));
            assert_eq!(seed, emit_vec(&f), "seed {name} differs from its sample");
            assert_eq!(Frame::parse(&seed), Ok(f), "{name}");
            n += 1;
        }
        assert_eq!(n, std::fs::read_dir(&dir).unwrap().count());
    }

    fn frag(index: u16, count: u16, msg_len: u32, offset: u32, payload: &[u8]) -> Data<'_> {
        Data {
            dst_endpoint: 0,
            dst_channel: 0,
            flags: 0,
            token: 0,
            msg_id: 0,
            frag_index: index,
            frag_count: count,
            msg_len,
            frag_offset: offset,
            payload,
            ack: None,
        }
    }

    #[test]
    fn fragment_placement_rules() {
        let p10 = [0u8; 10];
        // 25 bytes at stride 10: 10 + 10 + 5.
        assert_eq!(frag(0, 3, 25, 0, &p10).check(), Ok(()));
        assert_eq!(frag(1, 3, 25, 10, &p10).check(), Ok(()));
        assert_eq!(frag(2, 3, 25, 20, &p10[..5]).check(), Ok(()));
        assert_eq!(frag(2, 3, 25, 20, &p10[..5]).stride(), 10);
        assert_eq!(frag(1, 3, 25, 10, &p10).stride(), 10);
        // Off stride, wrong count, overlong last, empty middle fragment.
        assert_eq!(frag(1, 3, 25, 9, &p10).check(), Err(FrameError::BadLength));
        assert_eq!(frag(0, 4, 25, 0, &p10).check(), Err(FrameError::BadLength));
        assert_eq!(frag(0, 2, 25, 0, &p10).check(), Err(FrameError::BadLength));
        assert_eq!(
            frag(2, 3, 25, 20, &p10[..6]).check(),
            Err(FrameError::BadLength)
        );
        assert_eq!(
            frag(2, 3, 25, 20, &p10[..4]).check(),
            Err(FrameError::BadLength)
        );
        assert_eq!(frag(0, 3, 25, 0, &[]).check(), Err(FrameError::BadLength));
        assert_eq!(
            frag(2, 3, 25, 21, &p10[..4]).check(),
            Err(FrameError::BadLength)
        );
        assert_eq!(frag(2, 3, 0, 0, &[]).check(), Err(FrameError::BadLength));
        // The last fragment of 20 bytes at stride 10 must be full.
        assert_eq!(frag(1, 2, 20, 10, &p10).check(), Ok(()));
        assert_eq!(
            frag(1, 2, 20, 10, &p10[..9]).check(),
            Err(FrameError::BadLength)
        );
        // Emit refuses what parse would refuse.
        let f = Frame {
            src_engine: 0,
            body: Body::Data(frag(1, 3, 25, 9, &p10)),
        };
        assert_eq!(f.emit(&mut [0u8; 100]), Err(FrameError::BadLength));
    }

    #[test]
    fn emit_into_short_buffer_fails() {
        for f in samples() {
            let mut buf = vec![0u8; f.len() - 1];
            assert_eq!(f.emit(&mut buf), Err(FrameError::BufferTooSmall));
        }
    }
}
