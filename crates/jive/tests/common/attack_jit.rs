//! Hostile classes against the compiler, generated, and a thread on a
//! stack of known size with a canary below it (`tests/attack_jit.rs` and
//! the `jive_run` fuzz target use them). Depends on `jive`'s test
//! assembler (`super`), `jive` and `libc`.

use super::op::*;
use super::{hi, lo, Asm, PS};

use jive::NATIVES_CLASS as NATIVES;

/// `ifle`, which the assembler's opcode list lacks.
const IFLE: u8 = 158;

/// Bytecode offset `to` relative to the instruction at `from`, as the four
/// bytes of a switch operand.
fn rel32(from: usize, to: usize) -> [u8; 4] {
    ((to as i64 - from as i64) as i32).to_be_bytes()
}

/// Methods `m0 .. m{methods - 1}`, each `([B)I`: `calls` times
/// `fill(a, 5, 1)` (the `test` native `fill([BII)V`, one op and one call
/// site each), then `m{i+1}(a)`, the last `a[0]` (so 5 for a non-empty
/// array). Every call site's arguments are stored on the machine stack of
/// the compiled method before the native is called.
pub fn fill_chain(methods: usize, calls: usize) -> Vec<u8> {
    let mut a = Asm::new("T");
    a.default_init();
    let fill = a.mref(NATIVES, "fill", "([BII)V");
    for m in 0..methods {
        let mut code = Vec::with_capacity(calls * 6 + 8);
        for _ in 0..calls {
            code.extend_from_slice(&[
                ALOAD_0,
                ICONST_5,
                ICONST_1,
                INVOKESTATIC,
                hi(fill),
                lo(fill),
            ]);
        }
        if m + 1 < methods {
            let next = a.mref("T", &format!("m{}", m + 1), "([B)I");
            code.extend_from_slice(&[ALOAD_0, INVOKESTATIC, hi(next), lo(next), IRETURN]);
        } else {
            code.extend_from_slice(&[ALOAD_0, ICONST_0, BALOAD, IRETURN]);
        }
        a.method(PS, &format!("m{m}"), "([B)I", 3, 1, &code);
    }
    a.build()
}

/// Most `fill` calls that fit one method's code with [`fill_chain`]'s
/// call sequence (6 bytes each).
pub const MAX_FILLS: usize = (65535 - 8) / 6;

/// Methods `big(I)I`: `n` results of `id(x)` (the `test` native), all
/// live until they are added up at the end (`n * x`), so compiled code
/// keeps them in its frame across the calls; `caller(I)I`: `big(x)`;
/// `small(I)I`: `x + 1`.
pub fn spill_heavy(n: usize) -> Vec<u8> {
    let mut a = Asm::new("T");
    a.default_init();
    let id = a.mref(NATIVES, "id", "(I)I");
    let big = a.mref("T", "big", "(I)I");
    let mut code = Vec::new();
    for _ in 0..n {
        code.extend_from_slice(&[ILOAD_0, INVOKESTATIC, hi(id), lo(id)]);
    }
    code.resize(code.len() + n - 1, IADD);
    code.push(IRETURN);
    a.method(PS, "big", "(I)I", n as u16, 1, &code);
    a.method(
        PS,
        "caller",
        "(I)I",
        1,
        1,
        &[ILOAD_0, INVOKESTATIC, hi(big), lo(big), IRETURN],
    );
    a.method(
        PS,
        "small",
        "(I)I",
        2,
        1,
        &[ILOAD_0, ICONST_1, IADD, IRETURN],
    );
    a.build()
}

/// Methods `m0 .. m{methods - 1}`, each `(I)I` and each calling the next
/// with `x + 1` (the last returns `x`), so `m0(0)` is `methods - 1`. Every
/// method declares `locals` locals: the call's argument sits past them,
/// so each frame of the chain adds `locals` slots to the interpreter's
/// frame stack.
pub fn slot_chain(methods: usize, locals: u16) -> Vec<u8> {
    let mut a = Asm::new("T");
    a.default_init();
    for m in 0..methods {
        let code = if m + 1 < methods {
            let next = a.mref("T", &format!("m{}", m + 1), "(I)I");
            vec![
                ILOAD_0,
                ICONST_1,
                IADD,
                INVOKESTATIC,
                hi(next),
                lo(next),
                IRETURN,
            ]
        } else {
            vec![ILOAD_0, IRETURN]
        };
        a.method(PS, &format!("m{m}"), "(I)I", 2, locals, &code);
    }
    a.build()
}

/// `m0(I)I`, recursive: `x <= 0 ? 0 : m0(x - 1) + 1`, declaring `locals`
/// locals, so each frame of the recursion adds `locals` slots to the
/// interpreter's frame stack.
pub fn recursion(locals: u16) -> Vec<u8> {
    let mut a = Asm::new("T");
    a.default_init();
    let me = a.mref("T", "m0", "(I)I");
    // 0 iload_0, 1 ifle 13, 4 iload_0, 5 iconst_1, 6 isub,
    // 7 invokestatic m0, 10 iconst_1, 11 iadd, 12 ireturn,
    // 13 iconst_0, 14 ireturn
    let code = vec![
        ILOAD_0,
        IFLE,
        0,
        12,
        ILOAD_0,
        ICONST_1,
        ISUB,
        INVOKESTATIC,
        hi(me),
        lo(me),
        ICONST_1,
        IADD,
        IRETURN,
        ICONST_0,
        IRETURN,
    ];
    a.method(PS, "m0", "(I)I", 2, locals.max(1), &code);
    a.build()
}

/// `f()I`: `n` times `iconst_0` with `max_stack` `n`, then a `goto` to the
/// next instruction (before a branch every stack entry is written to its
/// frame slot: `n` ops, `n` live slots), then `ireturn` (0).
pub fn wide_frame(n: u16) -> Vec<u8> {
    let mut code = vec![ICONST_0; n as usize];
    code.extend_from_slice(&[GOTO, 0, 3, IRETURN]);
    super::one("f", "()I", n, 0, &code)
}

/// `f(I)I`: `for (; n > 0; n--) switch (n) { keys: acc += 1; default: acc
/// += 2 }; return acc;` over a `lookupswitch` of `keys` sparse keys, none
/// of them positive (so every positive `n` is looked up in vain: the
/// worst case of a linear search).
pub fn sparse_switch_loop(keys: usize) -> Vec<u8> {
    // Every branch but the first goes backward (16-bit offsets reach no
    // further than 32 KiB, and the switch's table is longer):
    //  0: iconst_0; istore_1; goto loop
    //  5: end: iload_1; ireturn
    //  7: case: iinc 1 1; goto next
    // 13: default: iinc 1 2
    // 16: next: iinc 0 -1
    // 19: loop: iload_0; ifle end
    // 23: iload_0; lookupswitch (case, default)
    let mut code = vec![ICONST_0, ISTORE_1, GOTO, 0, 17];
    code.extend_from_slice(&[ILOAD_1, IRETURN]);
    code.extend_from_slice(&[IINC, 1, 1, GOTO, 0, 6]);
    code.extend_from_slice(&[IINC, 1, 2]);
    code.extend_from_slice(&[IINC, 0, 0xff]);
    code.extend_from_slice(&[ILOAD_0, IFLE, 0xff, 0xf1]);
    code.push(ILOAD_0);
    let sw = code.len();
    assert_eq!(sw, 24);
    code.push(LOOKUPSWITCH);
    while code.len() % 4 != 0 {
        code.push(0);
    }
    code.extend_from_slice(&rel32(sw, 13));
    code.extend_from_slice(&(keys as i32).to_be_bytes());
    for j in 0..keys {
        let k = -3 * (keys - j) as i32;
        code.extend_from_slice(&k.to_be_bytes());
        code.extend_from_slice(&rel32(sw, 7));
    }
    super::one("f", "(I)I", 1, 2, &code)
}

/// Most keys [`sparse_switch_loop`] fits in one method's code.
pub const MAX_SWITCH_KEYS: usize = (65535 - 36) / 8;

/// Bytes of the canary region below a [`on_stack`] thread's stack.
pub const CANARY: usize = 1 << 20;
const CANARY_BYTE: u8 = 0xa5;
const PAGE: usize = 4096;

/// Run `f` on a new thread whose stack is exactly `stack` bytes of a fresh
/// mapping, with [`CANARY`] bytes of a known pattern mapped directly below
/// it (no guard page between: code that steps past the stack's end
/// writes into the canary) and an inaccessible page below that. Returns
/// `f`'s result (`Err` with the panic message if it panicked) and whether
/// the canary is intact.
pub fn on_stack<R: Send>(stack: usize, f: impl FnOnce() -> R + Send) -> (Result<R, String>, bool) {
    assert!(stack & (PAGE - 1) == 0 && stack >= 64 * 1024);
    let total = PAGE + CANARY + stack;
    // SAFETY: a fresh anonymous private mapping; the arguments are valid.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            total,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED, "mmap");
    let base = base as *mut u8;
    // SAFETY: the first page of the mapping just made; the canary is the
    // next `CANARY` bytes of it.
    unsafe {
        assert_eq!(libc::mprotect(base.cast(), PAGE, libc::PROT_NONE), 0);
        std::ptr::write_bytes(base.add(PAGE), CANARY_BYTE, CANARY);
    }

    struct Job<'a, R> {
        f: Option<Box<dyn FnOnce() -> R + Send + 'a>>,
        out: Option<Result<R, String>>,
    }
    extern "C" fn start<R>(p: *mut libc::c_void) -> *mut libc::c_void {
        // SAFETY: `p` is the `Job` below, alive until the thread is joined
        // and touched by no other thread meanwhile.
        let job = unsafe { &mut *(p as *mut Job<'_, R>) };
        let f = job.f.take().expect("job");
        job.out = Some(
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|e| {
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            }),
        );
        std::ptr::null_mut()
    }
    let mut job: Job<'_, R> = Job {
        f: Some(Box::new(f)),
        out: None,
    };
    // SAFETY: plain pthread calls on an attribute object and a thread made
    // here; the stack is the mapping's top `stack` bytes, which nothing
    // else uses, and it stays mapped until after the join. `job` outlives
    // the thread (joined before it is read or dropped).
    let intact = unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        assert_eq!(libc::pthread_attr_init(&mut attr), 0);
        assert_eq!(
            libc::pthread_attr_setstack(&mut attr, base.add(PAGE + CANARY).cast(), stack),
            0
        );
        let mut t: libc::pthread_t = std::mem::zeroed();
        let p = &mut job as *mut Job<'_, R> as *mut libc::c_void;
        assert_eq!(libc::pthread_create(&mut t, &attr, start::<R>, p), 0);
        assert_eq!(libc::pthread_join(t, std::ptr::null_mut()), 0);
        libc::pthread_attr_destroy(&mut attr);
        let canary = std::slice::from_raw_parts(base.add(PAGE), CANARY);
        let intact = canary.iter().all(|&b| b == CANARY_BYTE);
        libc::munmap(base.cast(), total);
        intact
    };
    (job.out.take().expect("thread ran"), intact)
}

/// `f(I)I`: `n` arrays of `x` ints allocated one after the other, all
/// live on the operand stack until their lengths are added up at the end
/// (`n * x`), so every allocation writes the roots of the ones before it
/// (`n * n / 2` stores in all); with `locals` locals, of which only `x`
/// is ever written.
pub fn alloc_heavy(n: usize, locals: u16) -> Vec<u8> {
    let mut code = Vec::new();
    for _ in 0..n {
        code.extend_from_slice(&[ILOAD_0, NEWARRAY, T_INT]);
    }
    code.push(ARRAYLENGTH);
    for _ in 1..n {
        code.extend_from_slice(&[SWAP, ARRAYLENGTH, IADD]);
    }
    code.push(IRETURN);
    super::one("f", "(I)I", n as u16 + 1, locals, &code)
}
