//! Generators of hostile classes that attack the limits on time: fuel that
//! did not pay for collections, loading work that grew with the number of
//! methods or with stack depth × stores, a watchdog that did not exist.
//! Each returns the bytes of a class file built with [`Asm`].
#![allow(dead_code)]

use super::op::*;
use super::*;

const ASTORE_2: u8 = 77;

/// Frame slots of every frame of [`gc_churn`]'s recursion (locals; the
/// frame adds the stack and 4 scratch slots).
pub const GC_FRAME_LOCALS: u16 = 65_000;
/// Depth of [`gc_churn`]'s recursion: `GC_DEPTH` frames of
/// `GC_FRAME_LOCALS` slots come close to the interpreter's 4 Mi slots.
pub const GC_DEPTH: i32 = 63;

/// `static int churn(int n)`: recurses from `n` (negative) up to 0 through
/// frames of [`GC_FRAME_LOCALS`] slots, then fills the heap quota `quota`
/// with one `int[]` kept in a local, leaving room for exactly one empty
/// array, and allocates empty arrays forever, dropping each: every
/// allocation but the first collects, scanning every frame slot. Call it
/// with `-GC_DEPTH`. Frame values stay negative so that no slot looks like
/// the handle of the dropped arrays.
pub fn gc_churn(quota: usize) -> Vec<u8> {
    let mut a = Asm::new("T");
    a.default_init();
    let me = a.mref("T", "churn", "(I)I");
    // Leave 24 bytes: one empty array (16) fits, two do not.
    let keep = ((quota - 16 - 24) / 4) as i32;
    let k = a.int(keep);
    let mut c = vec![
        ILOAD_0, IFNE, 0, 0, // -> rec, patched below
        LDC, k as u8, NEWARRAY, T_INT, ASTORE_1,
    ];
    let lp = c.len();
    c.extend_from_slice(&[ICONST_0, NEWARRAY, T_INT, ASTORE_2, ACONST_NULL, ASTORE_2]);
    let back = (lp as i32 - c.len() as i32) as i16;
    c.push(GOTO);
    c.extend_from_slice(&back.to_be_bytes());
    let rec = c.len();
    c[2..4].copy_from_slice(&((rec as i16 - 1).to_be_bytes()));
    c.extend_from_slice(&[
        ILOAD_0,
        ICONST_1,
        IADD,
        INVOKESTATIC,
        hi(me),
        lo(me),
        IRETURN,
    ]);
    assert!(k < 256, "ldc index");
    a.method(PS, "churn", "(I)I", 4, GC_FRAME_LOCALS, &c);
    a.build()
}

/// `static void spin()`: `goto` itself, forever.
pub fn spin() -> Vec<u8> {
    one("spin", "()V", 0, 0, &[GOTO, 0, 0])
}

/// Methods in [`many_methods`], as in the class reported.
pub const MANY_METHODS: usize = 5_080;

/// A class of [`MANY_METHODS`] static methods filling 1 MiB, each as
/// costly to verify as its size allows: a frame of 65 000 locals, and a
/// `tableswitch` whose every entry is a branch, each a merge of the whole
/// frame. Each method stays far under the verifier's per-method limit.
pub fn many_methods() -> Vec<u8> {
    many_methods_of(MANY_METHODS, 1 << 20)
}

/// [`many_methods`] with `n` methods in at most `size` bytes.
pub fn many_methods_of(n: usize, size: usize) -> Vec<u8> {
    // Bytes per method besides its code: method_info (8), the Code
    // attribute's header (6 + 8 + 2 + 2), its name in the constant pool
    // (3 + up to 5).
    let per = size / n;
    let code_len = per.saturating_sub(8 + 18 + 8 + 1).max(20);
    // iconst_0 (1), tableswitch (1 + 3 padding + 12 + 4 × k), return (1).
    let k = ((code_len - 18) / 4).max(1);
    let mut code = vec![ICONST_0, TABLESWITCH, 0, 0];
    let sw = 1usize;
    let ret = (code.len() + 12 + 4 * k) as i32;
    let rel = ret - sw as i32;
    code.extend_from_slice(&rel.to_be_bytes()); // default
    code.extend_from_slice(&0i32.to_be_bytes()); // low
    code.extend_from_slice(&(k as i32 - 1).to_be_bytes()); // high
    for _ in 0..k {
        code.extend_from_slice(&rel.to_be_bytes());
    }
    code.push(RETURN);
    let mut a = Asm::new("T");
    a.default_init();
    for i in 0..n {
        a.method(PS, &format!("m{i}"), "()V", 1, 65_000, &code);
    }
    a.build()
}

/// Methods of [`deep_stores`] (each of at most 64 KiB of code).
pub const DEEP_METHODS: usize = 16;

/// A class of about 1 MiB whose methods push `depth` copies of local 0
/// (each a pending read of the local in the pre-decoder's virtual stack)
/// and then increment the local as often as the code size allows: every
/// `iinc` is a write of the local, before which the pre-decoder looks for
/// pending reads of it.
pub fn deep_stores(depth: usize) -> Vec<u8> {
    let mut code = vec![ILOAD_0; depth];
    while code.len() + 3 < 65_000 {
        code.extend_from_slice(&[IINC, 0, 1]);
    }
    code.push(RETURN);
    let mut a = Asm::new("T");
    a.default_init();
    for i in 0..DEEP_METHODS {
        a.method(PS, &format!("m{i}"), "(I)V", depth as u16, 1, &code);
    }
    a.build()
}

/// Static fields whose `ConstantValue` does not fit their type:
/// `byte B = 300`, `short S = 70000`, `boolean Z = 7`, and methods
/// `b()B`, `s()S`, `z()Z` returning them.
pub fn wide_constants() -> Vec<u8> {
    let mut a = Asm::new("T");
    a.default_init();
    a.field_const(ACC_STATIC, "B", "B", 300);
    a.field_const(ACC_STATIC, "S", "S", 70_000);
    a.field_const(ACC_STATIC, "Z", "Z", 7);
    a.field_const(ACC_STATIC, "N", "B", -129);
    for (m, f, d) in [
        ("b", "B", "B"),
        ("s", "S", "S"),
        ("z", "Z", "Z"),
        ("n", "N", "B"),
    ] {
        let r = a.fref("T", f, d);
        let desc = format!("(){d}");
        a.method(PS, m, &desc, 1, 0, &[GETSTATIC, hi(r), lo(r), IRETURN]);
    }
    a.build()
}
