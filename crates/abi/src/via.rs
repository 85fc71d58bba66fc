//! The numbers of VIA (the Virtual Interface Architecture, as Javia uses
//! it) that cross a process boundary: reliability levels, error reasons
//! and the limits of a descriptor.
//!
//! A local VI is a direct connection segment (see the crate
//! documentation, "Direct connection segment") whose two sides are VIs:
//! each message is one record, gathered by the sender from its registered
//! memory and scattered by the receiver into the buffers of its next
//! posted receive descriptor. Two fields of that segment are VIA's: each
//! direction's consumer counts the messages it has placed
//! ([`ConnConsumer::placed`](crate::ConnConsumer::placed), what a send of
//! reliable reception waits for), and each side says why it broke the
//! connection ([`ConnHeader::a_error`](crate::ConnHeader::a_error), a
//! [`ViError`] code) before it marks itself closed.

/// The reliability level of a VI (VIA 1.0, section 2.5; Javia section 2.1).
/// Both ends of a connection must choose the same one.
#[repr(u8)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Reliability {
    /// A message may be lost (every loss is counted); a send completes once
    /// the message has left.
    Unreliable = 0,
    /// A send completes once the message has reached the receiving side's
    /// interface; every message arrives exactly once and in order, or the
    /// VI breaks.
    #[default]
    ReliableDelivery = 1,
    /// A send completes only once the message is in a receive buffer the
    /// receiver posted.
    ReliableReception = 2,
}

impl Reliability {
    /// Decode; `None` for an unknown number.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Unreliable,
            1 => Self::ReliableDelivery,
            2 => Self::ReliableReception,
            _ => return None,
        })
    }

    /// A short name (`unreliable`, `reliable-delivery`,
    /// `reliable-reception`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Unreliable => "unreliable",
            Self::ReliableDelivery => "reliable-delivery",
            Self::ReliableReception => "reliable-reception",
        }
    }
}

/// Why a VI is in the error state, and the status of each descriptor it
/// completed with an error. VIA makes every error of a connection
/// catastrophic: the VI stays broken, and every descriptor outstanding on
/// it completes with the reason.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ViError {
    /// The peer closed its VI, or its process died.
    PeerGone = 1,
    /// A message arrived with no receive descriptor posted, on a VI that
    /// asked for VIA's strict behaviour (`strict_rnr`).
    ReceiverNotReady = 2,
    /// A message did not fit the receive descriptor it was given.
    TooLong = 3,
    /// A descriptor named memory it may not: an unknown region handle, an
    /// offset or length past its region, too many segments, or a message
    /// longer than the VI carries.
    BadDescriptor = 4,
    /// The peer did not acknowledge in time (retransmissions exhausted).
    Timeout = 5,
    /// The peer wrote something impossible into the shared ring.
    Broken = 6,
    /// The VI was closed by its owner with descriptors outstanding.
    Closed = 7,
}

impl ViError {
    /// Every reason, in the order of their numbers.
    pub const ALL: [ViError; 7] = [
        ViError::PeerGone,
        ViError::ReceiverNotReady,
        ViError::TooLong,
        ViError::BadDescriptor,
        ViError::Timeout,
        ViError::Broken,
        ViError::Closed,
    ];

    /// Decode; `None` for 0 (no error) or an unknown number.
    pub fn from_u32(v: u32) -> Option<Self> {
        Self::ALL.get((v as usize).wrapping_sub(1)).copied()
    }

    /// A short name (`peer-gone`, `receiver-not-ready`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::PeerGone => "peer-gone",
            Self::ReceiverNotReady => "receiver-not-ready",
            Self::TooLong => "too-long",
            Self::BadDescriptor => "bad-descriptor",
            Self::Timeout => "timeout",
            Self::Broken => "broken",
            Self::Closed => "closed",
        }
    }
}

impl core::fmt::Display for ViError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::PeerGone => "the peer VI is gone (closed, or its process died)",
            Self::ReceiverNotReady => {
                "a message arrived with no receive descriptor posted (strict VIA behaviour)"
            }
            Self::TooLong => "a message was longer than the receive descriptor's buffers",
            Self::BadDescriptor => {
                "a descriptor named memory outside its registered region, an unknown \
                 region, too many segments or too many bytes"
            }
            Self::Timeout => "the peer did not acknowledge in time",
            Self::Broken => "the peer corrupted the connection",
            Self::Closed => "the VI was closed",
        })
    }
}

/// Most data segments one descriptor may gather or scatter.
pub const VI_MAX_SEGMENTS: usize = 8;
/// Largest message a VI carries (VIA's maximum transfer size).
pub const VI_MAX_TRANSFER: usize = 256 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for e in ViError::ALL {
            assert_eq!(ViError::from_u32(e as u32), Some(e));
        }
        assert_eq!(ViError::from_u32(0), None);
        assert_eq!(ViError::from_u32(8), None);
        for r in [
            Reliability::Unreliable,
            Reliability::ReliableDelivery,
            Reliability::ReliableReception,
        ] {
            assert_eq!(Reliability::from_u8(r as u8), Some(r));
        }
        assert_eq!(Reliability::from_u8(3), None);
    }
}
