//! [`Frame::parse`] and [`Frame::emit`]: every kind read and written at
//! the offsets of [`field`], every length checked first.

use super::*;

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
