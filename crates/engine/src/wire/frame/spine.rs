//! SPINE's frames (kinds `0x30..=0x3F`): the link handshake between two
//! adapters and the active messages sent over a link.
//!
//! Pure code, no I/O, as the rest of the frame format: [`SpineFrame::parse`]
//! checks a datagram completely (a message's payload borrows it), the
//! `emit_*` functions write one into a caller's buffer. Integers are
//! big-endian; the [`AmHeader`](unet_abi::spine::AmHeader) inside a
//! message's payload keeps its own little-endian layout. Every frame
//! starts with the common header of [`super`].
//!
//! ```text
//! kind 0x30, SpineOpen (32 bytes): B asks A to join the link A listens on
//! 12             16                  24                  32
//!  |   src_link   |    listen_token   |     src_token     |
//!  |     u32      |        u64        |        u64        |
//!
//! kind 0x31, SpineAccept (40 bytes): A answers with its link
//! 12             16                  24             28       32                  40
//!  |   dst_link   |       token       |   src_link   |  pad   |    accept_token   |
//!  |     u32      |        u64        |     u32      |  u32   |        u64        |
//!
//! kind 0x32, SpineRefuse (28 bytes)
//! 12             16                  24      25   28
//!  |   dst_link   |       token       | reason | pad |
//!  |     u32      |        u64        |   u8   | 3 B |
//!
//! kind 0x33, SpineClose (24 bytes)
//! 12             16                  24
//!  |   dst_link   |       token       |
//!  |     u32      |        u64        |
//!
//! kind 0x34, SpineMsg (48 bytes + payload)
//! 12             16                  24             28        30
//!  |   dst_link   |       token       |    msg_id    |frag_idx |
//!  |     u32      |        u64        |     u32      |  u16    |
//! 30        32             36             40        42        44        48
//!  |frag_cnt |   msg_len    | frag_offset  |frag_len |   pad   |   pad   | payload
//!  |  u16    |     u32      |     u32      |  u16    |  u16    |   u32   | frag_len B
//! ```
//!
//! A message is `[AmHeader (16 B)][arguments][bulk data]`, `msg_len`
//! bytes, cut into fragments of one stride as Data frames are (fragment
//! `i` at `i * stride`, every one but the last exactly `stride` bytes).
//! `token` is the one the receiver chose for the link (its `src_token` in
//! the open, its `accept_token` in the accept); `listen_token` is the one
//! the listening side's client handed out. SpineMsg is of the data path
//! (no authentication trailer with a cluster key: the token and the
//! sender's address protect it); the four handshake kinds carry the
//! trailer, as every control kind does.

use super::{FrameError, COMMON_HEADER_LEN, KIND_OFFSET, MAGIC, MAX_MESSAGE, VERSION};

/// The kind bytes reserved for SPINE.
pub const SPINE_KINDS: core::ops::RangeInclusive<u8> = 0x30..=0x3F;
/// Kind of [`SpineFrame::Open`].
pub const KIND_OPEN: u8 = 0x30;
/// Kind of [`SpineFrame::Accept`].
pub const KIND_ACCEPT: u8 = 0x31;
/// Kind of [`SpineFrame::Refuse`].
pub const KIND_REFUSE: u8 = 0x32;
/// Kind of [`SpineFrame::Close`].
pub const KIND_CLOSE: u8 = 0x33;
/// Kind of [`SpineFrame::Msg`].
pub const KIND_MSG: u8 = 0x34;

/// Length of a SpineOpen frame.
pub const OPEN_LEN: usize = 32;
/// Length of a SpineAccept frame.
pub const ACCEPT_LEN: usize = 40;
/// Length of a SpineRefuse frame.
pub const REFUSE_LEN: usize = 28;
/// Length of a SpineClose frame.
pub const CLOSE_LEN: usize = 24;
/// Length of a SpineMsg frame without its payload.
pub const MSG_HEADER_LEN: usize = 48;

/// [`SpineFrame::Refuse`]'s reason: nobody listens with that token.
pub const REFUSE_NO_LISTENER: u8 = 1;
/// [`SpineFrame::Refuse`]'s reason: the adapter holds its most links.
pub const REFUSE_FULL: u8 = 2;

/// Whether `kind` is SPINE's.
#[inline]
pub fn is_spine_kind(kind: u8) -> bool {
    SPINE_KINDS.contains(&kind)
}

/// Whether a datagram of kind `kind` is of the data path (no trailer).
#[inline]
pub fn is_data_path(kind: u8) -> bool {
    kind == KIND_MSG
}

/// A fragment (or the whole) of an active message over a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpineMsg<'a> {
    pub dst_link: u32,
    pub token: u64,
    pub msg_id: u32,
    pub frag_index: u16,
    pub frag_count: u16,
    pub msg_len: u32,
    pub frag_offset: u32,
    pub payload: &'a [u8],
}

impl SpineMsg<'_> {
    /// The sender's stride (every fragment but the last carries exactly
    /// this), or the message's length when it is whole.
    pub fn stride(&self) -> u32 {
        if self.frag_count <= 1 {
            self.msg_len
        } else if self.frag_index + 1 < self.frag_count {
            self.payload.len() as u32
        } else {
            self.frag_offset / u32::from(self.frag_index)
        }
    }
}

/// A parsed SPINE frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpineFrame<'a> {
    Open {
        src_link: u32,
        listen_token: u64,
        src_token: u64,
    },
    Accept {
        dst_link: u32,
        token: u64,
        src_link: u32,
        accept_token: u64,
    },
    Refuse {
        dst_link: u32,
        token: u64,
        reason: u8,
    },
    Close {
        dst_link: u32,
        token: u64,
    },
    Msg(SpineMsg<'a>),
}

fn rd16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn rd32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn rd64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// The frame's source engine (the common header's `src_engine`).
pub fn src_engine(b: &[u8]) -> Option<u64> {
    (b.len() >= COMMON_HEADER_LEN).then(|| rd64(b, 4))
}

impl<'a> SpineFrame<'a> {
    /// Parses and checks one datagram (without its authentication
    /// trailer): the common header, a SPINE kind, the kind's exact
    /// length, and for a message every length and its fragment's place.
    pub fn parse(b: &'a [u8]) -> Result<SpineFrame<'a>, FrameError> {
        if b.len() < COMMON_HEADER_LEN {
            return Err(FrameError::Truncated);
        }
        if rd16(b, 0) != MAGIC {
            return Err(FrameError::BadMagic);
        }
        if b[2] != VERSION {
            return Err(FrameError::BadVersion);
        }
        let kind = b[KIND_OFFSET];
        let len = match kind {
            KIND_OPEN => OPEN_LEN,
            KIND_ACCEPT => ACCEPT_LEN,
            KIND_REFUSE => REFUSE_LEN,
            KIND_CLOSE => CLOSE_LEN,
            KIND_MSG => {
                if b.len() < MSG_HEADER_LEN {
                    return Err(FrameError::Truncated);
                }
                MSG_HEADER_LEN + usize::from(rd16(b, 40))
            }
            _ => return Err(FrameError::UnknownKind),
        };
        if b.len() < len {
            return Err(FrameError::Truncated);
        }
        if b.len() > len {
            return Err(FrameError::BadLength);
        }
        // The handshake kinds' fields stand one after another from byte 12
        // (widths in bytes; accept's 4 and refuse's 3 bytes of padding
        // are read and not looked at); a field of 4 bytes, or 1, fits the
        // u32 or u8 it is cast to.
        Ok(match kind {
            KIND_OPEN => {
                let [src_link, listen_token, src_token] = fields(b, [4, 8, 8]);
                SpineFrame::Open {
                    src_link: src_link as u32,
                    listen_token,
                    src_token,
                }
            }
            KIND_ACCEPT => {
                let [dst_link, token, src_link, _, accept_token] = fields(b, [4, 8, 4, 4, 8]);
                SpineFrame::Accept {
                    dst_link: dst_link as u32,
                    token,
                    src_link: src_link as u32,
                    accept_token,
                }
            }
            KIND_REFUSE => {
                let [dst_link, token, reason] = fields(b, [4, 8, 1]);
                SpineFrame::Refuse {
                    dst_link: dst_link as u32,
                    token,
                    reason: reason as u8,
                }
            }
            KIND_CLOSE => {
                let [dst_link, token] = fields(b, [4, 8]);
                SpineFrame::Close {
                    dst_link: dst_link as u32,
                    token,
                }
            }
            _ => {
                let m = SpineMsg {
                    dst_link: rd32(b, 12),
                    token: rd64(b, 16),
                    msg_id: rd32(b, 24),
                    frag_index: rd16(b, 28),
                    frag_count: rd16(b, 30),
                    msg_len: rd32(b, 32),
                    frag_offset: rd32(b, 36),
                    payload: &b[MSG_HEADER_LEN..],
                };
                check_msg(&m)?;
                SpineFrame::Msg(m)
            }
        })
    }
}

/// A message fragment's lengths: a message of at least a header and at
/// most [`MAX_MESSAGE`] bytes, the fragment inside it and on its stride.
fn check_msg(m: &SpineMsg<'_>) -> Result<(), FrameError> {
    let (len, off, n) = (m.msg_len as usize, m.frag_offset as usize, m.payload.len());
    let ok = (unet_abi::spine::AM_HEADER_SIZE..=MAX_MESSAGE).contains(&len)
        && m.frag_count >= 1
        && m.frag_index < m.frag_count
        && off.checked_add(n).is_some_and(|e| e <= len);
    if !ok {
        return Err(FrameError::BadLength);
    }
    let placed = if m.frag_count == 1 {
        off == 0 && n == len
    } else if m.frag_index + 1 < m.frag_count {
        n > 0 && off == usize::from(m.frag_index) * n
    } else {
        // The last: it ends the message, at a whole number of strides.
        let i = usize::from(m.frag_index);
        n > 0 && off + n == len && off % i == 0 && off / i >= n
    };
    if placed {
        Ok(())
    } else {
        Err(FrameError::BadLength)
    }
}

fn head(buf: &mut [u8], kind: u8, src_engine: u64, len: usize) -> Result<(), FrameError> {
    if buf.len() < len {
        return Err(FrameError::BufferTooSmall);
    }
    buf[..len].fill(0);
    buf[0..2].copy_from_slice(&MAGIC.to_be_bytes());
    buf[2] = VERSION;
    buf[KIND_OFFSET] = kind;
    buf[4..12].copy_from_slice(&src_engine.to_be_bytes());
    Ok(())
}

/// The handshake fields of widths `widths` (bytes: 1, 2, 4 or 8), one
/// after another from byte 12 of `b`, big-endian. `b` is a frame whose
/// exact length [`SpineFrame::parse`] checked against its kind's, which
/// holds them.
fn fields<const N: usize>(b: &[u8], widths: [usize; N]) -> [u64; N] {
    let mut at = COMMON_HEADER_LEN;
    widths.map(|w| {
        let v = b[at..at + w]
            .iter()
            .fold(0u64, |v, &x| (v << 8) | u64::from(x));
        at += w;
        v
    })
}

/// Writes a handshake frame of kind `kind` and length `len`: the common
/// header, then each (value, width in bytes) of `fields` big-endian, one
/// after another from byte 12, the rest zero; returns `len`.
fn emit_handshake(
    buf: &mut [u8],
    kind: u8,
    src_engine: u64,
    len: usize,
    fields: &[(u64, usize)],
) -> Result<usize, FrameError> {
    head(buf, kind, src_engine, len)?;
    let mut at = COMMON_HEADER_LEN;
    for &(v, w) in fields {
        buf[at..at + w].copy_from_slice(&v.to_be_bytes()[8 - w..]);
        at += w;
    }
    Ok(len)
}

/// Writes a SpineOpen; returns its length.
pub fn emit_open(
    buf: &mut [u8],
    src_engine: u64,
    src_link: u32,
    listen_token: u64,
    src_token: u64,
) -> Result<usize, FrameError> {
    let f = [(src_link.into(), 4), (listen_token, 8), (src_token, 8)];
    emit_handshake(buf, KIND_OPEN, src_engine, OPEN_LEN, &f)
}

/// Writes a SpineAccept; returns its length.
pub fn emit_accept(
    buf: &mut [u8],
    src_engine: u64,
    dst_link: u32,
    token: u64,
    src_link: u32,
    accept_token: u64,
) -> Result<usize, FrameError> {
    let f = [
        (dst_link.into(), 4),
        (token, 8),
        (src_link.into(), 4),
        (0, 4),
        (accept_token, 8),
    ];
    emit_handshake(buf, KIND_ACCEPT, src_engine, ACCEPT_LEN, &f)
}

/// Writes a SpineRefuse; returns its length.
pub fn emit_refuse(
    buf: &mut [u8],
    src_engine: u64,
    dst_link: u32,
    token: u64,
    reason: u8,
) -> Result<usize, FrameError> {
    let f = [(dst_link.into(), 4), (token, 8), (reason.into(), 1)];
    emit_handshake(buf, KIND_REFUSE, src_engine, REFUSE_LEN, &f)
}

/// Writes a SpineClose; returns its length.
pub fn emit_close(
    buf: &mut [u8],
    src_engine: u64,
    dst_link: u32,
    token: u64,
) -> Result<usize, FrameError> {
    let f = [(dst_link.into(), 4), (token, 8)];
    emit_handshake(buf, KIND_CLOSE, src_engine, CLOSE_LEN, &f)
}

/// What a SpineMsg fragment says besides its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsgHead {
    pub dst_link: u32,
    pub token: u64,
    pub msg_id: u32,
    pub frag_index: u16,
    pub frag_count: u16,
    pub msg_len: u32,
    pub frag_offset: u32,
}

/// Writes a SpineMsg fragment whose payload is the concatenation of
/// `parts` (the header's bytes, the arguments, a piece of bulk data);
/// returns its length.
pub fn emit_msg(
    buf: &mut [u8],
    src_engine: u64,
    h: &MsgHead,
    parts: &[&[u8]],
) -> Result<usize, FrameError> {
    let n: usize = parts.iter().map(|p| p.len()).sum();
    let len = MSG_HEADER_LEN + n;
    if n > usize::from(u16::MAX) {
        return Err(FrameError::BadLength);
    }
    head(buf, KIND_MSG, src_engine, MSG_HEADER_LEN)?;
    if buf.len() < len {
        return Err(FrameError::BufferTooSmall);
    }
    buf[12..16].copy_from_slice(&h.dst_link.to_be_bytes());
    buf[16..24].copy_from_slice(&h.token.to_be_bytes());
    buf[24..28].copy_from_slice(&h.msg_id.to_be_bytes());
    buf[28..30].copy_from_slice(&h.frag_index.to_be_bytes());
    buf[30..32].copy_from_slice(&h.frag_count.to_be_bytes());
    buf[32..36].copy_from_slice(&h.msg_len.to_be_bytes());
    buf[36..40].copy_from_slice(&h.frag_offset.to_be_bytes());
    buf[40..42].copy_from_slice(&(n as u16).to_be_bytes());
    let mut at = MSG_HEADER_LEN;
    for p in parts {
        buf[at..at + p.len()].copy_from_slice(p);
        at += p.len();
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(payload: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; 2048];
        let h = MsgHead {
            dst_link: 7,
            token: 0xfeed,
            msg_id: 3,
            frag_index: 0,
            frag_count: 1,
            msg_len: payload.len() as u32,
            frag_offset: 0,
        };
        let n = emit_msg(&mut b, 9, &h, &[payload]).unwrap();
        b.truncate(n);
        b
    }

    #[test]
    fn every_kind_round_trips() {
        let mut b = [0u8; 64];
        let n = emit_open(&mut b, 9, 1, 2, 3).unwrap();
        assert_eq!(
            SpineFrame::parse(&b[..n]),
            Ok(SpineFrame::Open {
                src_link: 1,
                listen_token: 2,
                src_token: 3
            })
        );
        let n = emit_accept(&mut b, 9, 1, 2, 3, 4).unwrap();
        assert_eq!(
            SpineFrame::parse(&b[..n]),
            Ok(SpineFrame::Accept {
                dst_link: 1,
                token: 2,
                src_link: 3,
                accept_token: 4
            })
        );
        let n = emit_refuse(&mut b, 9, 1, 2, REFUSE_FULL).unwrap();
        assert_eq!(
            SpineFrame::parse(&b[..n]),
            Ok(SpineFrame::Refuse {
                dst_link: 1,
                token: 2,
                reason: REFUSE_FULL
            })
        );
        let n = emit_close(&mut b, 9, 1, 2).unwrap();
        assert_eq!(
            SpineFrame::parse(&b[..n]),
            Ok(SpineFrame::Close {
                dst_link: 1,
                token: 2
            })
        );
        assert_eq!(src_engine(&b[..n]), Some(9));
        let m = whole(&[5u8; 20]);
        match SpineFrame::parse(&m) {
            Ok(SpineFrame::Msg(x)) => {
                assert_eq!((x.dst_link, x.token, x.msg_id), (7, 0xfeed, 3));
                assert_eq!(x.payload, &[5u8; 20]);
                assert_eq!(x.stride(), 20);
            }
            r => panic!("{r:?}"),
        }
    }

    /// Each handshake frame is the bytes the module's diagram draws: the
    /// common header, the fields big-endian at their offsets, padding
    /// zero (over a buffer that was not).
    #[test]
    fn handshake_frames_are_the_bytes_the_diagram_draws() {
        let head = |kind: u8| {
            let mut v = MAGIC.to_be_bytes().to_vec();
            v.extend([VERSION, kind]);
            v.extend(0x0900_0000_0000_0009u64.to_be_bytes());
            v
        };
        let (link, t1, link2, t2) = (
            0x0102_0304u32,
            0x1112_1314_1516_1718u64,
            0x2122_2324u32,
            0x3132_3334_3536_3738u64,
        );
        let mut b = [0xAAu8; 64];
        let src = 0x0900_0000_0000_0009;

        let n = emit_open(&mut b, src, link, t1, t2).unwrap();
        let mut want = head(KIND_OPEN);
        want.extend(link.to_be_bytes());
        want.extend(t1.to_be_bytes());
        want.extend(t2.to_be_bytes());
        assert_eq!((n, &b[..n]), (OPEN_LEN, &want[..]));

        let n = emit_accept(&mut b, src, link, t1, link2, t2).unwrap();
        let mut want = head(KIND_ACCEPT);
        want.extend(link.to_be_bytes());
        want.extend(t1.to_be_bytes());
        want.extend(link2.to_be_bytes());
        want.extend([0; 4]);
        want.extend(t2.to_be_bytes());
        assert_eq!((n, &b[..n]), (ACCEPT_LEN, &want[..]));

        b.fill(0xAA);
        let n = emit_refuse(&mut b, src, link, t1, REFUSE_NO_LISTENER).unwrap();
        let mut want = head(KIND_REFUSE);
        want.extend(link.to_be_bytes());
        want.extend(t1.to_be_bytes());
        want.extend([REFUSE_NO_LISTENER, 0, 0, 0]);
        assert_eq!((n, &b[..n]), (REFUSE_LEN, &want[..]));

        let n = emit_close(&mut b, src, link, t1).unwrap();
        let mut want = head(KIND_CLOSE);
        want.extend(link.to_be_bytes());
        want.extend(t1.to_be_bytes());
        assert_eq!((n, &b[..n]), (CLOSE_LEN, &want[..]));

        // Too small a buffer is refused, not written past.
        let mut small = [0u8; ACCEPT_LEN - 1];
        assert_eq!(
            emit_accept(&mut small, src, link, t1, link2, t2),
            Err(FrameError::BufferTooSmall)
        );
    }

    #[test]
    fn every_cut_and_every_extra_byte_is_refused() {
        let m = whole(&[1u8; 30]);
        for n in 0..m.len() {
            assert!(SpineFrame::parse(&m[..n]).is_err(), "cut at {n}");
        }
        let mut longer = m.clone();
        longer.push(0);
        assert_eq!(SpineFrame::parse(&longer), Err(FrameError::BadLength));
        let mut b = [0u8; 64];
        let n = emit_close(&mut b, 9, 1, 2).unwrap();
        assert_eq!(SpineFrame::parse(&b[..n + 1]), Err(FrameError::BadLength));
        b[KIND_OFFSET] = 0x3F;
        assert_eq!(SpineFrame::parse(&b[..n]), Err(FrameError::UnknownKind));
    }

    #[test]
    fn fragments_off_their_place_are_refused() {
        let mut b = vec![0u8; 256];
        let frag = |b: &mut Vec<u8>, idx, cnt, len, off, n: usize| {
            let h = MsgHead {
                dst_link: 1,
                token: 1,
                msg_id: 1,
                frag_index: idx,
                frag_count: cnt,
                msg_len: len,
                frag_offset: off,
            };
            let k = emit_msg(b, 9, &h, &[&vec![0u8; n]]).unwrap();
            SpineFrame::parse(&b[..k]).map(|_| ())
        };
        // 100 bytes in strides of 40: 0..40, 40..80, 80..100.
        assert_eq!(frag(&mut b, 0, 3, 100, 0, 40), Ok(()));
        assert_eq!(frag(&mut b, 1, 3, 100, 40, 40), Ok(()));
        assert_eq!(frag(&mut b, 2, 3, 100, 80, 20), Ok(()));
        let bad = FrameError::BadLength;
        assert_eq!(frag(&mut b, 1, 3, 100, 41, 40), Err(bad));
        assert_eq!(frag(&mut b, 2, 3, 100, 80, 19), Err(bad));
        assert_eq!(frag(&mut b, 3, 3, 100, 80, 20), Err(bad));
        assert_eq!(frag(&mut b, 0, 0, 100, 0, 40), Err(bad));
        assert_eq!(
            frag(&mut b, 0, 1, 8, 0, 8),
            Err(bad),
            "shorter than a header"
        );
        assert_eq!(frag(&mut b, 0, 1, 20, 0, 16), Err(bad));
        assert_eq!(frag(&mut b, 0, 1, MAX_MESSAGE as u32 + 1, 0, 16), Err(bad));
    }
}
