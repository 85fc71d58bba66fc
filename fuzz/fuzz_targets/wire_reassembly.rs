//! Feeds a sequence of frames, parsed from the input or built from its
//! fields without checks, to a `Reassembler` with small limits. It must not
//! panic, must stay within its memory budget and in-flight limit, and must
//! only hand back messages of the announced length. The fragments that
//! check are also kept as a VI keeps its own (`FragBuf`, by message id):
//! a message completes at its announced length, and what its buffer says
//! it holds (the first fragment missing, the bits a `Sack` carries)
//! agrees with itself.
#![no_main]

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};

use libfuzzer_sys::fuzz_target;
use unet_engine::wire::frag::{FragBuf, FragIn};
use unet_engine::wire::reliable::{Sack, SACK_FRAG_WORDS};
use unet_engine::wire::{Body, Data, Frame, Message, Reassembler, ReassemblyConfig};

const CFG: ReassemblyConfig = ReassemblyConfig {
    timeout_ns: 1_000,
    memory_budget: 256 << 10,
    max_in_flight: 8,
};

/// Takes `n` bytes from the front of `input`, or `None` at its end.
fn take<'a>(input: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if input.len() < n {
        return None;
    }
    let (head, rest) = input.split_at(n);
    *input = rest;
    Some(head)
}

fn u16_of(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// Messages a VI keeps in reassembly here at once.
const VI_PARTIAL_MAX: usize = 8;

/// Keep fragment `d` (if it is one of several and checks) as a VI does.
fn vi_keep(partial: &mut HashMap<u32, FragBuf>, d: &Data<'_>) {
    let Some(f) = FragIn::of(d) else {
        return;
    };
    if !partial.contains_key(&d.msg_id) && partial.len() >= VI_PARTIAL_MAX {
        return;
    }
    let b = partial.entry(d.msg_id).or_insert_with(|| FragBuf::new(&f));
    match b.add(&f) {
        Ok(true) => {
            let b = partial.remove(&d.msg_id).expect("kept");
            assert_eq!(b.first_missing(), f.count);
            assert_eq!(b.into_vec().len(), f.msg_len as usize);
        }
        Ok(false) | Err(_) => {
            let base = b.first_missing();
            let held = b.held_from::<SACK_FRAG_WORDS>(base);
            let sack = Sack {
                frag_base: base,
                frags: held,
                ..Sack::default()
            };
            // Everything before the first missing one is held, that one
            // is not.
            assert!(base == 0 || sack.has_frag(base - 1));
            assert_eq!(held[0] & 1, 0, "the first missing is not held");
            assert!(!sack.has_frag(base));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = data;
    let mut r = Reassembler::new(CFG);
    let mut now = 0u64;
    let mut payload_store = vec![0u8; 4096];
    let mut partial = HashMap::new();
    while let Some(op) = take(&mut input, 1).map(|b| b[0]) {
        now += u64::from(op >> 4) * 100;
        let src = SocketAddr::from((Ipv4Addr::LOCALHOST, 1000 + u16::from(op & 3)));
        let result = if op & 4 == 0 {
            // A raw datagram: 2-byte length, then the bytes.
            let Some(len) = take(&mut input, 2).map(u16_of) else {
                break;
            };
            let Some(dgram) = take(&mut input, usize::from(len)) else {
                break;
            };
            match Frame::parse(dgram) {
                Ok(Frame {
                    src_engine,
                    body: Body::Data(d),
                }) => {
                    vi_keep(&mut partial, &d);
                    let msg_len = d.msg_len as usize;
                    r.push(src, src_engine, &d, now)
                        .map(|m| m.map(|m| (m, msg_len)))
                }
                _ => continue,
            }
        } else {
            // Fields of a Data frame taken as they come, unchecked.
            let Some(f) = take(&mut input, 14) else { break };
            let msg_len = u32::from_be_bytes([0, f[0] & 0x0F, f[1], f[2]]);
            let frag_offset = u32::from_be_bytes([0, f[3] & 0x0F, f[4], f[5]]);
            let plen = usize::from(u16_of(&f[6..8]) & 0x0FFF);
            let fill = f[13];
            payload_store.fill(fill);
            let d = Data {
                dst_endpoint: u32::from(f[8] & 1),
                dst_channel: u16::from(f[8] >> 7),
                flags: 0,
                token: 0,
                msg_id: u32::from(f[9] & 7),
                frag_index: u16_of(&f[10..12]) & 0x3FF,
                frag_count: u16::from(f[12]) + u16::from(op & 8) * 32,
                msg_len,
                frag_offset,
                payload: &payload_store[..plen],
                ack: None,
            };
            vi_keep(&mut partial, &d);
            r.push(src, u64::from(op & 0x30), &d, now)
                .map(|m| m.map(|m| (m, msg_len as usize)))
        };
        if let Ok(Some((m, msg_len))) = result {
            assert_eq!(m.as_slice().len(), msg_len);
            if let Message::Owned(v) = m {
                r.recycle(v);
            }
        }
        assert!(r.memory_held() <= CFG.memory_budget);
        assert!(r.in_flight() <= CFG.max_in_flight);
        if op & 0xF0 == 0xF0 {
            r.expire(now);
        }
    }
    r.expire(now + CFG.timeout_ns);
    assert_eq!(r.in_flight(), 0);
});
