//! The frame format's tests: round trips, documented offsets, truncation,
//! corruption.

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
