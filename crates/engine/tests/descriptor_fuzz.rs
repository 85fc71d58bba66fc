//! The `descriptors` fuzz target's body (`common/descriptors.rs`) over a
//! few hundred seeded random inputs and a few written ones, so that the
//! tests exercise it: a hostile endpoint's descriptors and ring scribbles
//! are each accounted for, and the honest pair keeps working.

#[path = "common/descriptors.rs"]
mod descriptors;

use descriptors::{run, OP_BYTES};

/// Run `data`; on a failure, say which input it was.
fn run_named(what: &str, data: &[u8]) {
    if std::panic::catch_unwind(|| run(data)).is_err() {
        let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
        panic!("{what} failed; its bytes: {hex}");
    }
}

/// An operation: its code and argument.
fn op(code: u8, arg: [u8; OP_BYTES - 1]) -> Vec<u8> {
    let mut v = vec![code];
    v.extend_from_slice(&arg);
    v
}

/// A push of a well-formed descriptor on tag `chan` (shaped arguments).
fn push(chan: u16, len: u32) -> Vec<u8> {
    let mut a = [0u8; OP_BYTES - 1];
    a[4..8].copy_from_slice(&len.to_le_bytes());
    a[8..10].copy_from_slice(&chan.to_le_bytes());
    op(0, a)
}

fn settle() -> Vec<u8> {
    op(5, [0; OP_BYTES - 1])
}

fn honest() -> Vec<u8> {
    op(7, [0; OP_BYTES - 1])
}

#[test]
fn written_inputs() {
    // Nothing at all.
    run_named("the empty input", &[]);
    // One of each kind of descriptor, on every tag.
    let mut one_each = Vec::new();
    for chan in 0..8 {
        for len in [0, 1, 56, 57, 3000, 4000, 70_000] {
            one_each.extend(push(chan, len));
        }
        one_each.extend(settle());
    }
    one_each.extend(honest());
    run_named("one of each", &one_each);
    // More descriptors than the ring holds, pushed without a look from
    // the engine: an impossible head, then each further push another.
    let mut overflow = Vec::new();
    for _ in 0..70 {
        overflow.extend(push(0, 100));
    }
    overflow.extend(settle());
    overflow.extend(push(0, 100));
    overflow.extend(settle());
    overflow.extend(honest());
    run_named("an overflowing ring", &overflow);
    // Messages to itself until its receive ring and buffers run out,
    // with its free ring rewritten.
    let mut itself = Vec::new();
    for k in 0..40u8 {
        itself.extend(push(1, 200 + k as u32 * 50));
        let mut a = [0u8; OP_BYTES - 1];
        a[0] = k.wrapping_mul(37);
        a[8] = 6 + k % 3; // the free ring's head, tail, an entry
        itself.extend(op(2, a));
        itself.extend(settle());
    }
    run_named("a hostile endpoint sending itself", &itself);
    // Active messages (flags 1) with no extension loaded: refused, their
    // length and buffer checked first.
    let mut ams = Vec::new();
    for len in [0, 2, 100, 70_000, u32::MAX] {
        let mut a = [0u8; OP_BYTES - 1];
        a[4..8].copy_from_slice(&len.to_le_bytes());
        a[10..12].copy_from_slice(&1u16.to_le_bytes());
        ams.extend(op(0x18, a));
        ams.extend(settle());
    }
    ams.extend(honest());
    run_named("active messages nobody handles", &ams);
}

/// Random inputs, half of them raw bytes (mostly refused descriptors and
/// impossible heads), half built operation by operation with the weights
/// and argument shapes that keep the hostile endpoint's descriptors often
/// valid (so that its messages go out, fill rings and run out of buffers).
#[test]
fn seeded_random_inputs() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..300 {
        let ops = (next() % 160) as usize;
        let mut data = Vec::with_capacity(ops * OP_BYTES);
        if i % 2 == 0 {
            data.extend((0..ops * OP_BYTES).map(|_| next() as u8));
        } else {
            for _ in 0..ops {
                // Push 40%, a run of pushes 5%, scribble 10%, post a free
                // buffer 10%, pop 10%, settle 15%, honest message 10%.
                let kind = match next() % 100 {
                    0..40 => 0,
                    40..45 => 6,
                    45..55 => 2,
                    55..65 => 3,
                    65..75 => 4,
                    75..90 => 5,
                    _ => 7,
                };
                // Each shape bit (raw offset, length, channel, flags) set
                // one time in eight.
                let mut code = kind;
                for bit in [0x08u8, 0x10, 0x20, 0x40] {
                    if next() % 8 == 0 {
                        code |= bit;
                    }
                }
                let mut arg = [0u8; OP_BYTES - 1];
                for b in arg.iter_mut() {
                    *b = next() as u8;
                }
                if kind == 0 || kind == 6 {
                    // Mostly short messages (up to 4 KiB).
                    let len = (next() % 4096) as u32;
                    arg[4..8].copy_from_slice(&len.to_le_bytes());
                }
                data.push(code);
                data.extend_from_slice(&arg);
            }
        }
        run_named(&format!("random input {i}"), &data);
    }
}
