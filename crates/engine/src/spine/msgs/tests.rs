//! The pools' unit tests: handles and generations, reference counts, and
//! a seeded random run of sends, keeps, releases and terminations that
//! must leak neither a message slot nor a buffer.

use super::*;
use unet_abi::spine::AM_SRC_HOST;

fn hdr(handler: u16) -> AmHeader {
    AmHeader {
        handler,
        src_kind: AM_SRC_HOST,
        ..AmHeader::default()
    }
}

#[test]
fn a_freed_message_handle_is_stale_and_its_slot_reused() {
    let mut bufs = BufPool::new(4, 64);
    let mut msgs = MsgPool::new(2);
    let a = msgs.alloc(hdr(70), b"abc", None).unwrap();
    assert_eq!(msgs.get(a).unwrap().args(), b"abc");
    assert_eq!(msgs.get(a).unwrap().hdr.args_len, 3);
    let b = msgs.alloc(hdr(71), &[], None).unwrap();
    assert!(
        msgs.alloc(hdr(72), &[], None).is_none(),
        "pool of 2 is full"
    );
    assert!(msgs.free(a, &mut bufs));
    assert!(!msgs.free(a, &mut bufs), "double free refused");
    assert!(msgs.get(a).is_none(), "stale handle names nothing");
    let c = msgs.alloc(hdr(73), &[], None).unwrap();
    assert_ne!(a, c, "the reused slot has a new generation");
    assert_eq!(a & INDEX_MASK, c & INDEX_MASK);
    assert!(msgs.get(b).is_some() && msgs.get(c).is_some());
    assert!(msgs.alloc(hdr(1), &[0; AM_ARGS_MAX + 1], None).is_none());
}

#[test]
fn handles_are_non_negative_for_every_generation() {
    for gen in [0u16, 1, 0x3FF, 0x7FF, 0xFFFF] {
        let h = handle(MAX_SLOTS - 1, gen);
        assert!((h as i32) >= 0, "gen {gen}: {h:#x}");
    }
}

#[test]
fn a_buffer_goes_back_when_its_last_reference_does() {
    let mut bufs = BufPool::new(2, 16);
    let mut msgs = MsgPool::new(4);
    assert!(bufs.alloc(&[0; 17]).is_none(), "longer than the largest");
    let b = bufs.alloc(b"data").unwrap();
    let m1 = msgs.alloc(hdr(64), &[], Some(b)).unwrap();
    assert_eq!(msgs.get(m1).unwrap().hdr.flags, AM_BULK);
    assert!(bufs.retain(b));
    let m2 = msgs.alloc(hdr(65), &[], Some(b)).unwrap();
    let mut keeps = KeepSet::new(1);
    keeps.keep(&mut bufs, b, 1).unwrap();
    assert_eq!(keeps.keep(&mut bufs, b, 1), Err(KeepError::Limit));
    assert_eq!(bufs.refs(b), 3);
    msgs.free(m1, &mut bufs);
    msgs.free(m2, &mut bufs);
    assert_eq!(bufs.live(), 1, "the keep holds it");
    assert!(keeps.release(&mut bufs, b));
    assert_eq!(bufs.live(), 0);
    assert!(bufs.data(b).is_none(), "stale");
    assert_eq!(keeps.keep(&mut bufs, b, 2), Err(KeepError::BadHandle));
    assert!(!keeps.release(&mut bufs, b));
}

#[test]
fn undo_gives_back_only_the_terminated_invocations_keeps() {
    let mut bufs = BufPool::new(4, 16);
    let mut keeps = KeepSet::new(8);
    let a = bufs.alloc(b"a").unwrap();
    let b = bufs.alloc(b"b").unwrap();
    keeps.keep(&mut bufs, a, 1).unwrap();
    keeps.keep(&mut bufs, b, 2).unwrap();
    keeps.keep(&mut bufs, a, 2).unwrap();
    bufs.release(a);
    bufs.release(b);
    assert_eq!(keeps.undo(&mut bufs, 2), 2);
    assert_eq!(bufs.live(), 1);
    assert!(bufs.data(a).is_some() && bufs.data(b).is_none());
    assert_eq!(keeps.release_all(&mut bufs), 1);
    assert_eq!(bufs.live(), 0);
}

/// xorshift64*: a seeded sequence, the same on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The references every live buffer should have: one per message that
/// refers to it, one per keep.
fn check_refs(msgs: &MsgPool, live: &[u32], bufs: &BufPool, keeps: &[KeepSet]) {
    let mut want: std::collections::HashMap<u32, u32> = Default::default();
    for &m in live {
        if let Some(b) = msgs.get(m).unwrap().bulk {
            *want.entry(b).or_default() += 1;
        }
    }
    for k in keeps {
        for &(b, _) in &k.kept {
            *want.entry(b).or_default() += 1;
        }
    }
    for (&b, &n) in &want {
        assert_eq!(bufs.refs(b), n, "buffer {b:#x}");
    }
    assert_eq!(bufs.live(), want.len(), "a buffer nothing holds is back");
}

#[test]
fn no_sequence_of_sends_keeps_releases_and_terminations_leaks() {
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut bufs = BufPool::new(16, 32);
        let mut msgs = MsgPool::new(24);
        let mut keeps: Vec<KeepSet> = (0..3).map(|_| KeepSet::new(4)).collect();
        let mut live: Vec<u32> = Vec::new();
        let mut stale: Vec<u32> = Vec::new();
        let mut inv = 0u64;
        for _ in 0..2_000 {
            match rng.below(9) {
                // A host's send: a message, bulk or not.
                0 | 1 => {
                    let bulk = if rng.below(2) == 0 {
                        bufs.alloc(&[7; 5])
                    } else {
                        None
                    };
                    match msgs.alloc(hdr(64), b"x", bulk) {
                        Some(m) => live.push(m),
                        None => {
                            if let Some(b) = bulk {
                                bufs.release(b);
                            }
                        }
                    }
                }
                // A handler's sendBulk of the buffer of a message it has.
                2 if !live.is_empty() => {
                    let m = live[rng.below(live.len())];
                    if let Some(b) = msgs.get(m).unwrap().bulk {
                        assert!(bufs.retain(b));
                        match msgs.alloc(hdr(65), &[], Some(b)) {
                            Some(n) => live.push(n),
                            None => {
                                bufs.release(b);
                            }
                        }
                    }
                }
                // An invocation keeps a message's buffer.
                3 if !live.is_empty() => {
                    let m = live[rng.below(live.len())];
                    if let Some(b) = msgs.get(m).unwrap().bulk {
                        inv += 1;
                        let e = rng.below(keeps.len());
                        let _ = keeps[e].keep(&mut bufs, b, inv);
                    }
                }
                // An extension releases one of its keeps (or a stale one).
                4 => {
                    let e = rng.below(keeps.len());
                    if !keeps[e].kept.is_empty() && rng.below(4) != 0 {
                        let (b, _) = keeps[e].kept[rng.below(keeps[e].kept.len())];
                        assert!(keeps[e].release(&mut bufs, b));
                    } else if let Some(&s) = stale.last() {
                        let _ = keeps[e].release(&mut bufs, s);
                    }
                }
                // The message's invocation ends: the runtime frees it.
                5 | 6 if !live.is_empty() => {
                    let m = live.swap_remove(rng.below(live.len()));
                    if let Some(b) = msgs.get(m).unwrap().bulk {
                        stale.push(b);
                    }
                    assert!(msgs.free(m, &mut bufs));
                    assert!(!msgs.free(m, &mut bufs));
                }
                // The last invocation was terminated: its keeps undone.
                7 => {
                    for k in keeps.iter_mut() {
                        k.undo(&mut bufs, inv);
                    }
                }
                // An extension is unloaded or its client goes.
                8 => {
                    let e = rng.below(keeps.len());
                    keeps[e].release_all(&mut bufs);
                }
                _ => {}
            }
            // Stale handles never name a live buffer's data by accident
            // unless that slot was reused with the same generation (it
            // was not: generations moved on).
            check_refs(&msgs, &live, &bufs, &keeps);
            assert_eq!(msgs.live(), live.len());
        }
        for m in live.drain(..) {
            assert!(msgs.free(m, &mut bufs));
        }
        for k in keeps.iter_mut() {
            k.release_all(&mut bufs);
        }
        assert_eq!(msgs.live(), 0, "seed {seed}: a message slot leaked");
        assert_eq!(bufs.live(), 0, "seed {seed}: a buffer leaked");
    }
}

/// A handler's `byte[]` (Java's signed bytes) becomes the message's
/// arguments bit for bit, as a host's bytes do; too long is refused.
#[test]
fn arguments_come_from_bytes_or_a_java_byte_array_bit_for_bit() {
    let mut p = MsgPool::new(4);
    let java: [i8; 4] = [-1, 0, 127, -128];
    let a = p.alloc(hdr(70), &java[..], None).unwrap();
    let b = p
        .alloc(hdr(70), &[0xFFu8, 0, 0x7F, 0x80][..], None)
        .unwrap();
    let c = p.alloc(hdr(70), b"xy", None).unwrap();
    assert_eq!(p.get(a).unwrap().args(), [0xFF, 0, 0x7F, 0x80]);
    assert_eq!(p.get(a).unwrap().args(), p.get(b).unwrap().args());
    assert_eq!(p.get(a).unwrap().hdr.args_len, 4);
    assert_eq!(p.get(c).unwrap().args(), b"xy");
    let long = [1i8; AM_ARGS_MAX + 1];
    assert_eq!(p.alloc(hdr(70), &long[..], None), None);
    assert_eq!(p.live(), 3);
}
