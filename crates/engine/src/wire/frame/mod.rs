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
//! SPINE: its links and active messages, `0x30..=0x34` ([`spine`], parsed
//! apart from [`Frame`]: the port hands a datagram of those kinds to
//! SPINE when [`Frame::parse`] does not know its kind). A receiver drops
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

mod body;
mod codec;
pub mod spine;

pub use body::{
    Body, Close, Data, Frame, OpenAccept, OpenRefuse, OpenRequest, UdmAccept, UdmJoin, ViAccept,
    ViAck, ViClose, ViOpen, ViRefuse, VI_CLOSE_NORMAL,
};

#[cfg(test)]
mod tests;
