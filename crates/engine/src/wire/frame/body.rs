//! The kinds' parts of a frame: [`Data`], the channel handshake, VIA's and
//! UDM's frames, [`Body`] and [`Frame`].

use super::*;

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
    /// ([`WireDrop::ForgedToken`](crate::wire::WireDrop::ForgedToken)).
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
