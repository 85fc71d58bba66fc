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
//! ```
//!
//! With a cluster key, every kind but Data is followed in its datagram by
//! an authentication trailer (see [`super::auth`]); [`Frame::parse`] is
//! given the frame without it.
//!
//! Padding is written as zero and ignored on receipt; it keeps every frame a
//! multiple of 2 bytes (the Data payload starts 16-byte aligned in the
//! datagram) and leaves room for fields of later versions. Every frame must
//! fill its datagram exactly: control frames have a fixed length, and a Data
//! frame carries its payload length `frag_len`, so that any datagram cut
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
//! # Kind space
//!
//! Kinds 1..=7 are defined here. Ranges are kept for later protocols:
//! `0x10..=0x1F` VIA connections, `0x20..=0x2F` UDM, `0x30..=0x3F` SPINE
//! active messages. A receiver drops a frame of a kind it does not know and
//! counts it ([`FrameError::UnknownKind`]); that is not an error of the peer.

use core::fmt;

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

/// Byte ranges of every field, computed in one place.
mod field {
    use core::ops::Range;
    pub const MAGIC: Range<usize> = 0..2;
    pub const VERSION: usize = 2;
    pub const KIND: usize = 3;
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
}

const _: () = {
    assert!(field::data::PAYLOAD == DATA_HEADER_LEN);
    assert!(field::open_request::END == OPEN_REQUEST_LEN);
    assert!(field::open_accept::END == OPEN_ACCEPT_LEN);
    assert!(field::open_refuse::END == OPEN_REFUSE_LEN);
    assert!(field::close::END == CLOSE_LEN);
    assert!(CONFIRM_LEN == CLOSE_LEN);
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
}

impl Kind {
    /// Every kind this version defines.
    pub const ALL: [Kind; 7] = [
        Kind::Data,
        Kind::OpenRequest,
        Kind::OpenAccept,
        Kind::OpenRefuse,
        Kind::Close,
        Kind::Keepalive,
        Kind::Confirm,
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
            _ => None,
        }
    }

    /// Length of the header of this kind (the whole frame for control kinds).
    pub const fn header_len(self) -> usize {
        match self {
            Kind::Data => DATA_HEADER_LEN,
            Kind::OpenRequest => OPEN_REQUEST_LEN,
            Kind::OpenAccept => OPEN_ACCEPT_LEN,
            Kind::OpenRefuse => OPEN_REFUSE_LEN,
            Kind::Close => CLOSE_LEN,
            Kind::Keepalive => KEEPALIVE_LEN,
            Kind::Confirm => CONFIRM_LEN,
        }
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
    /// off its stride, or bytes after the end of the frame.
    BadLength,
    /// An OpenRefuse reason code this version does not define.
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
            FrameError::BadReason => "unknown refuse reason",
            FrameError::BufferTooSmall => "output buffer too small",
        })
    }
}

impl std::error::Error for FrameError {}

/// Why an endpoint refused an [`OpenRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RefuseReason {
    /// No endpoint with that id on the receiving engine.
    NoSuchEndpoint = 1,
    /// The endpoint (or an extension on it) declined.
    Refused = 2,
    /// The endpoint's channel table or the engine is full.
    NoResources = 3,
}

impl RefuseReason {
    /// The reason for a code, or `None` when this version does not define it.
    pub const fn from_u8(v: u8) -> Option<RefuseReason> {
        match v {
            1 => Some(RefuseReason::NoSuchEndpoint),
            2 => Some(RefuseReason::Refused),
            3 => Some(RefuseReason::NoResources),
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
    /// Reserved; sent as 0, carried through unchanged.
    pub flags: u16,
    /// Capability of the channel, chosen by the receiver at channel open. The
    /// engine drops a frame whose token does not match
    /// ([`WireDrop::ForgedToken`](super::WireDrop::ForgedToken)).
    pub token: u64,
    /// Per-channel sequence number chosen by the sender.
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
}

impl Data<'_> {
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
            Kind::Data => hlen + usize::from(rd16(buf, field::data::FRAG_LEN)),
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
                let d = Data {
                    dst_endpoint: rd32(buf, f::DST_ENDPOINT),
                    dst_channel: rd16(buf, f::DST_CHANNEL),
                    flags: rd16(buf, f::FLAGS),
                    token: rd64(buf, f::TOKEN),
                    msg_id: rd32(buf, f::MSG_ID),
                    frag_index: rd16(buf, f::FRAG_INDEX),
                    frag_count: rd16(buf, f::FRAG_COUNT),
                    msg_len: rd32(buf, f::MSG_LEN),
                    frag_offset: rd32(buf, f::FRAG_OFFSET),
                    payload: &buf[f::PAYLOAD..end],
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
        };
        Ok(Frame { src_engine, body })
    }

    /// Total length of this frame on the wire.
    pub fn len(&self) -> usize {
        match &self.body {
            Body::Data(d) => DATA_HEADER_LEN + d.payload.len(),
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
    /// a datagram can carry). Padding is written as zero.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, FrameError> {
        if let Body::Data(d) = &self.body {
            d.check()?;
            if d.payload.len() > MAX_DATAGRAM - DATA_HEADER_LEN {
                return Err(FrameError::BadLength);
            }
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
                buf[DATA_HEADER_LEN..].copy_from_slice(d.payload);
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
        }
        Ok(len)
    }
}

/// Writes the Data-specific header fields (offsets 12..48). `buf` is at
/// least [`DATA_HEADER_LEN`] long and the payload fits in a datagram.
fn emit_data_header(d: &Data<'_>, buf: &mut [u8]) {
    use field::data as f;
    buf[f::DST_ENDPOINT].copy_from_slice(&d.dst_endpoint.to_be_bytes());
    buf[f::DST_CHANNEL].copy_from_slice(&d.dst_channel.to_be_bytes());
    buf[f::FLAGS].copy_from_slice(&d.flags.to_be_bytes());
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
            }),
        }
    }

    fn samples() -> Vec<Frame<'static>> {
        const P: &[u8] = b"hello, wire";
        vec![
            data(P),
            data(&[]),
            Frame {
                src_engine: 1,
                body: Body::Data(Data {
                    dst_endpoint: 1,
                    dst_channel: 2,
                    flags: 0x8001,
                    token: 3,
                    msg_id: 4,
                    frag_index: 2,
                    frag_count: 3,
                    msg_len: 25,
                    frag_offset: 20,
                    payload: b"abcde",
                }),
            },
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
            Frame {
                src_engine: 3,
                body: Body::OpenRefuse(OpenRefuse {
                    request_id: 31,
                    src_endpoint: 32,
                    dst_endpoint: 33,
                    reason: RefuseReason::NoResources,
                }),
            },
            Frame {
                src_engine: 4,
                body: Body::Close(Close {
                    dst_endpoint: 41,
                    dst_channel: 42,
                    token: 43,
                }),
            },
            Frame {
                src_engine: 5,
                body: Body::Keepalive,
            },
            Frame {
                src_engine: 6,
                body: Body::Confirm(Close {
                    dst_endpoint: 61,
                    dst_channel: 62,
                    token: 63,
                }),
            },
        ]
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
        let refuse = emit_vec(&samples()[5]);
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
        for k in [0u8, 8, 0x10, 0x20, 0x30, 0xFF] {
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
        let mut r = emit_vec(&samples()[5]);
        for code in [0u8, 4, 255] {
            r[24] = code;
            assert_eq!(Frame::parse(&r), Err(FrameError::BadReason));
        }
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
