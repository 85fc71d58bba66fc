//! Bytes lent to a `byte[]` field (`Vm::lend_bytes`) in place of copying
//! them in: which fields the class's code lets be lent, and that a method
//! reading a lent field does exactly what it does on bytes copied in
//! (result, fault, fuel, fault site, what natives were given, the host's
//! window), interpreted and compiled, over a grid of offsets, lengths,
//! loan lengths and budgets; and that compiled code reads the loan in
//! place without calling the native.
#![cfg(feature = "jit")]

mod common;

use common::fast::{self, FastHost};
use common::op::*;
use common::*;
use jive::{Class, Limits, Vm};

/// Code of a method, made with the class's assembler (for its constant
/// pool).
type Code<'a> = &'a dyn Fn(&mut Asm) -> Vec<u8>;

/// A class `L` with a static `byte[] ba` (set by the host, as an applet's
/// `RxBuf` is) and the methods given as (name, code), all `(III)I`.
fn class(methods: &[(&str, Code<'_>)]) -> Class<FastHost> {
    let mut a = Asm::new("L");
    a.default_init();
    a.field(PS, "ba", "[B");
    a.field(PS, "n", "I");
    for (name, code) in methods {
        let code = code(&mut a);
        a.method(PS, name, "(III)I", 6, 4, &code);
    }
    let mut nat = jive::Natives::<FastHost>::new();
    fast::register(&mut nat, "fast");
    Class::load(&a.build(), &nat, &["fast"]).expect("load")
}

/// `nat(ba, aoff, woff, len)` for a `([BIII)V` native, then `return 0`.
fn call4(a: &mut Asm, nat: &str) -> Vec<u8> {
    let ba = a.fref("L", "ba", "[B");
    let m = a.mref("unet/sle/Natives", nat, "([BIII)V");
    vec![
        GETSTATIC,
        hi(ba),
        lo(ba),
        ILOAD_0,
        ILOAD_1,
        ILOAD_2,
        INVOKESTATIC,
        hi(m),
        lo(m),
        ICONST_0,
        IRETURN,
    ]
}

/// What `rx(aoff, woff, len)` does in the comparison: copy `ba[aoff..]`
/// to the window (`wput`), hand it to the sink (`emit`, tag 5), write the
/// window's first 3 bytes into `ba` (`wget`), hand `ba[0..8]` over again
/// (tag 6), then a prefix through the prefix sink (`emit0`, tag 7).
fn rx_code(a: &mut Asm) -> Vec<u8> {
    let ba = a.fref("L", "ba", "[B");
    let put = a.mref("unet/sle/Natives", "wput", "([BIII)V");
    let get = a.mref("unet/sle/Natives", "wget", "([BIII)V");
    let emit = a.mref("unet/sle/Natives", "emit", "([BIII)V");
    let emit0 = a.mref("unet/sle/Natives", "emit0", "([BII)V");
    #[rustfmt::skip]
    let code = vec![
        GETSTATIC, hi(ba), lo(ba), ILOAD_0, ILOAD_1, ILOAD_2, INVOKESTATIC, hi(put), lo(put),
        GETSTATIC, hi(ba), lo(ba), ILOAD_0, BIPUSH, 5, ILOAD_2, INVOKESTATIC, hi(emit), lo(emit),
        GETSTATIC, hi(ba), lo(ba), BIPUSH, 7, ILOAD_2, INVOKESTATIC, hi(emit0), lo(emit0),
        GETSTATIC, hi(ba), lo(ba), ICONST_0, ICONST_0, ICONST_3, INVOKESTATIC, hi(get), lo(get),
        GETSTATIC, hi(ba), lo(ba), ICONST_0, BIPUSH, 6, BIPUSH, 8, INVOKESTATIC, hi(emit), lo(emit),
        ICONST_0, IRETURN,
    ];
    code
}

/// A VM over `c` whose `ba` is a 100-byte array of old bytes.
fn vm(c: &Class<FastHost>, h: &mut FastHost, compiled: bool) -> Vm<FastHost> {
    let mut vm = Vm::new(c.clone(), Limits::default(), h).expect("construct");
    if compiled {
        assert!(vm.compile().expect("compile") >= 1);
    }
    let f = vm.static_field("ba").expect("ba");
    let arr = vm.new_byte_array(100).expect("array");
    vm.try_set_array_field(f, arr).expect("set");
    vm.field_bytes_mut(f).expect("bytes").fill(-3);
    vm
}

#[test]
fn only_a_field_passed_straight_to_natives_by_one_uncalled_method_may_be_lent() {
    let ba_field = |c: &Class<FastHost>| {
        let mut h = FastHost::new();
        Vm::new(c.clone(), Limits::default(), &mut h)
            .expect("construct")
            .static_field("ba")
            .expect("ba")
    };
    let lendable = |c: &Class<FastHost>, m: &str| c.lendable(ba_field(c), c.method(m).expect(m));
    let n_field = |c: &Class<FastHost>| {
        let mut h = FastHost::new();
        Vm::new(c.clone(), Limits::default(), &mut h)
            .expect("construct")
            .static_field("n")
            .expect("n")
    };

    // Passed to natives, several times, by one method: yes, for it only.
    let c = class(&[("rx", &rx_code), ("other", &|_| vec![ICONST_0, IRETURN])]);
    assert!(lendable(&c, "rx"));
    assert!(!lendable(&c, "other"));
    // With `int` work between the field and the call (`StdUnet`'s
    // `doLtoHDMA(RxBuf, i * buflen, off, chunk)`): yes.
    let c = class(&[("rx", &|a| {
        let ba = a.fref("L", "ba", "[B");
        let n = a.fref("L", "n", "I");
        let m = a.mref("unet/sle/Natives", "wput", "([BIII)V");
        #[rustfmt::skip]
        let c = vec![
            GETSTATIC, hi(ba), lo(ba), ILOAD_0, GETSTATIC, hi(n), lo(n), IMUL, ICONST_1, IADD,
            ILOAD_1, ILOAD_2, INEG, INEG, INVOKESTATIC, hi(m), lo(m), ICONST_0, IRETURN,
        ];
        c
    })]);
    assert!(lendable(&c, "rx"));
    // An int field, never.
    assert!(!c.lendable(n_field(&c), c.method("rx").unwrap()));
    // Not used at all: nothing can tell.
    let c = class(&[("rx", &|_| vec![ICONST_0, IRETURN])]);
    assert!(lendable(&c, "rx"));

    // Read by two methods.
    let c = class(&[("rx", &|a| call4(a, "wput")), ("tx", &|a| call4(a, "emit"))]);
    assert!(!lendable(&c, "rx"));
    // The reader is called by another method.
    let c = class(&[
        ("rx", &|a| call4(a, "wput")),
        ("calls", &|a| {
            let m = a.mref("L", "rx", "(III)I");
            vec![
                ILOAD_0,
                ILOAD_1,
                ILOAD_2,
                INVOKESTATIC,
                hi(m),
                lo(m),
                IRETURN,
            ]
        }),
    ]);
    assert!(!lendable(&c, "rx"));
    // Any other use of the reference: an element load, a length, a
    // store into the field, a copy on the stack, a local.
    let others: [Code<'_>; 5] = [
        &|a| {
            let ba = a.fref("L", "ba", "[B");
            vec![GETSTATIC, hi(ba), lo(ba), ICONST_0, BALOAD, IRETURN]
        },
        &|a| {
            let ba = a.fref("L", "ba", "[B");
            vec![GETSTATIC, hi(ba), lo(ba), ARRAYLENGTH, IRETURN]
        },
        &|a| {
            let ba = a.fref("L", "ba", "[B");
            let mut c = call4(a, "wput");
            c.truncate(c.len() - 2);
            c.extend([
                BIPUSH,
                8,
                NEWARRAY,
                T_BYTE,
                PUTSTATIC,
                hi(ba),
                lo(ba),
                ICONST_0,
                IRETURN,
            ]);
            c
        },
        &|a| {
            let ba = a.fref("L", "ba", "[B");
            let m = a.mref("unet/sle/Natives", "wput", "([BIII)V");
            #[rustfmt::skip]
            let c = vec![
                GETSTATIC, hi(ba), lo(ba), DUP, ILOAD_0, ILOAD_1, ILOAD_2,
                INVOKESTATIC, hi(m), lo(m), ARRAYLENGTH, IRETURN,
            ];
            c
        },
        &|a| {
            let ba = a.fref("L", "ba", "[B");
            let m = a.mref("unet/sle/Natives", "wput", "([BIII)V");
            #[rustfmt::skip]
            let c = vec![
                GETSTATIC, hi(ba), lo(ba), ASTORE_1 + 2, ALOAD_1 + 2, ILOAD_0, ILOAD_1, ILOAD_2,
                INVOKESTATIC, hi(m), lo(m), ICONST_0, IRETURN,
            ];
            c
        },
    ];
    for (i, code) in others.iter().enumerate() {
        let c = class(&[("rx", *code)]);
        assert!(!lendable(&c, "rx"), "use {i}");
        // And the VM refuses a loan of it.
        let mut h = FastHost::new();
        let mut v = vm(&c, &mut h, false);
        let f = v.static_field("ba").unwrap();
        let src = [1u8; 10];
        // SAFETY: `src` outlives the loan (none is made).
        #[allow(unsafe_code)]
        let lent = unsafe { v.lend_bytes(f, src.as_ptr(), src.len()) };
        assert!(!lent, "use {i}");
    }

    // A lendable field is lent only to an array that holds the bytes.
    let c = class(&[("rx", &rx_code)]);
    let mut h = FastHost::new();
    let mut v = vm(&c, &mut h, false);
    let f = v.static_field("ba").unwrap();
    let src = [1u8; 101];
    // SAFETY: `src` outlives both loans, each ended at once.
    #[allow(unsafe_code)]
    unsafe {
        assert!(!v.lend_bytes(f, src.as_ptr(), 101));
        assert!(v.lend_bytes(f, src.as_ptr(), 100));
    }
    v.end_lend();
}

/// The comparison: `rx` on bytes lent and on bytes copied in, interpreted
/// and compiled, agree on everything the applet and the host can see.
#[test]
fn a_method_on_lent_bytes_does_what_it_does_on_bytes_copied_in() {
    let c = class(&[("rx", &rx_code)]);
    let rx = c.method("rx").unwrap();
    // [interpreted copy, compiled copy, interpreted lent, compiled lent]
    let mut hosts: Vec<FastHost> = (0..4).map(|_| FastHost::new()).collect();
    let mut vms: Vec<Vm<FastHost>> = hosts
        .iter_mut()
        .enumerate()
        .map(|(i, h)| vm(&c, h, i % 2 == 1))
        .collect();
    let f = vms[0].static_field("ba").unwrap();
    let msg: Vec<u8> = (0..100u32).map(|i| (i * 13 + 5) as u8).collect();
    let mut compared = 0;
    for lent_len in [0usize, 3, 10, 64, 100] {
        for fuel in [2, 3, 5, 100_000] {
            for aoff in [-1, 0, 1, 9, 60, 99, 100] {
                for len in [-1, 0, 1, 5, 40, 64, 100] {
                    for woff in [0, 200] {
                        let mut seen = Vec::new();
                        for (i, (vm, h)) in vms.iter_mut().zip(hosts.iter_mut()).enumerate() {
                            vm.set_limits(Limits {
                                fuel,
                                ..Limits::default()
                            });
                            // Old bytes, then the message: lent or copied.
                            vm.field_bytes_mut(f).unwrap().fill(-3);
                            h.bound = true;
                            h.emitted.clear();
                            h.window = (0..256u32).map(|i| (i * 7 + 1) as u8).collect();
                            // SAFETY: the window and the message outlive the
                            // invocation (the loan ends after it) and are not
                            // the VM's heap.
                            #[allow(unsafe_code)]
                            unsafe {
                                vm.set_window(h.window.as_mut_ptr(), h.window.len());
                                if i >= 2 {
                                    assert!(vm.lend_bytes(f, msg.as_ptr(), lent_len));
                                } else {
                                    let b = vm.field_bytes_mut(f).unwrap();
                                    for (d, s) in b.iter_mut().zip(&msg[..lent_len]) {
                                        *d = *s as i8;
                                    }
                                }
                            }
                            let out = vm.invoke(h, rx, &[aoff, woff, len]);
                            vm.end_lend();
                            vm.clear_window();
                            seen.push((
                                out,
                                vm.last_fuel_used(),
                                vm.last_fault_site(),
                                h.emitted.clone(),
                                h.window.clone(),
                            ));
                        }
                        let what = format!("rx({aoff}, {woff}, {len}) lent {lent_len} fuel {fuel}");
                        for s in &seen[1..] {
                            assert_eq!(&seen[0], s, "{what}");
                        }
                        compared += 1;
                    }
                }
            }
        }
    }
    assert_eq!(compared, 5 * 4 * 7 * 7 * 2);
}

/// Compiled code reads a loan in place: a read within the lent bytes
/// calls no native (and leaves the array's old bytes as they were); one
/// that reaches past them, or a write, calls the native, which copies the
/// loan in first.
#[test]
fn compiled_code_reads_a_loan_in_place_and_settles_it_for_anything_else() {
    let c = class(&[("rx", &|a| call4(a, "wput"))]);
    let rx = c.method("rx").unwrap();
    let mut h = FastHost::new();
    let mut v = vm(&c, &mut h, true);
    let f = v.static_field("ba").unwrap();
    let msg: Vec<u8> = (0..64u32).map(|i| (i + 100) as u8).collect();
    h.bound = true;
    let run = |v: &mut Vm<FastHost>, h: &mut FastHost, aoff: i32, len: i32| {
        // SAFETY: the window and `msg` outlive the invocation; the loan
        // ends after it.
        #[allow(unsafe_code)]
        unsafe {
            v.set_window(h.window.as_mut_ptr(), h.window.len());
            assert!(v.lend_bytes(f, msg.as_ptr(), msg.len()));
        }
        let calls = h.native_calls;
        let out = v.invoke(h, rx, &[aoff, 0, len]);
        v.end_lend();
        v.clear_window();
        assert_eq!(out, Ok(Some(0)));
        h.native_calls - calls
    };
    // Within the loan: in place, no native, the array untouched.
    assert_eq!(run(&mut v, &mut h, 4, 60), 0);
    assert_eq!(&h.window[..60], &msg[4..64]);
    assert!(v.field_bytes(f).unwrap().iter().all(|&b| b == -3));
    // Past the loan (the array's bytes 64..70 are its old ones): the
    // native, after the loan is copied in.
    assert_eq!(run(&mut v, &mut h, 60, 10), 1);
    assert_eq!(&h.window[..4], &msg[60..64]);
    assert_eq!(&h.window[4..10], &[253u8; 6]);
    assert_eq!(&v.field_bytes(f).unwrap()[..64], bytemuck(&msg));
}

/// A null array given to a native whose first argument may be lent is
/// still a null, loan or none: compiled code faults as interpreted does.
#[test]
fn a_null_is_no_lent_array() {
    let nul = |a: &mut Asm| {
        let m = a.mref("unet/sle/Natives", "wput", "([BIII)V");
        #[rustfmt::skip]
        let c = vec![
            ACONST_NULL, ASTORE_1 + 2, ALOAD_1 + 2, ILOAD_0, ILOAD_1, ILOAD_2,
            INVOKESTATIC, hi(m), lo(m), ICONST_0, IRETURN,
        ];
        c
    };
    let c = class(&[("rx", &|a| call4(a, "wput")), ("nul", &nul)]);
    let m = c.method("nul").unwrap();
    let msg = [7u8; 64];
    let mut out = Vec::new();
    for compiled in [false, true] {
        let mut h = FastHost::new();
        h.bound = true;
        let mut v = vm(&c, &mut h, compiled);
        let f = v.static_field("ba").unwrap();
        for lend in [false, true] {
            // SAFETY: the window and `msg` outlive the invocation; the
            // loan ends after it.
            #[allow(unsafe_code)]
            unsafe {
                v.set_window(h.window.as_mut_ptr(), h.window.len());
                if lend {
                    assert!(v.lend_bytes(f, msg.as_ptr(), msg.len()));
                }
            }
            let r = v.invoke(&mut h, m, &[0, 0, 0]);
            v.end_lend();
            v.clear_window();
            assert!(r.is_err(), "compiled {compiled} lend {lend}: {r:?}");
            out.push((r, v.last_fuel_used(), v.last_fault_site()));
        }
    }
    assert!(out.iter().all(|o| *o == out[0]), "{out:?}");
}

fn bytemuck(b: &[u8]) -> Vec<i8> {
    b.iter().map(|&x| x as i8).collect()
}

/// A loan the interpreter settled (here in a `rx` too long to compile)
/// leaves nothing behind in compiled code once it ends: an array that
/// later takes the lent array's handle is read as itself by a compiled
/// fast case, not as the bytes that were lent.
#[test]
fn a_loan_settled_by_the_interpreter_ends_for_compiled_code_too() {
    // `rx`: 16 400 `iinc`s (past what JIVE compiles), then `wput(ba, ..)`.
    let long_rx = |a: &mut Asm| {
        let mut c = vec![ICONST_0, ISTORE_0 + 3];
        for _ in 0..16_400 {
            c.extend([IINC, 3, 1]);
        }
        let tail = call4(a, "wput");
        c.extend(tail);
        c
    };
    // `other`: a new `byte[100]` copied to the window with `wput`.
    let other = |a: &mut Asm| {
        let m = a.mref("unet/sle/Natives", "wput", "([BIII)V");
        #[rustfmt::skip]
        let c = vec![
            BIPUSH, 100, NEWARRAY, T_BYTE, ASTORE_1 + 2, ALOAD_1 + 2, ILOAD_0, ILOAD_1, ILOAD_2,
            INVOKESTATIC, hi(m), lo(m), ICONST_0, IRETURN,
        ];
        c
    };
    let c = class(&[("rx", &long_rx), ("other", &other)]);
    let (rx, oth) = (c.method("rx").unwrap(), c.method("other").unwrap());
    let mut h = FastHost::new();
    h.bound = true;
    let mut v = vm(&c, &mut h, true);
    assert!(!v.is_compiled(rx) && v.is_compiled(oth));
    let f = v.static_field("ba").unwrap();
    let msg = [9u8; 64];
    // SAFETY: the window and `msg` outlive the invocation; the loan ends
    // after it.
    #[allow(unsafe_code)]
    unsafe {
        v.set_window(h.window.as_mut_ptr(), h.window.len());
        assert!(v.lend_bytes(f, msg.as_ptr(), msg.len()));
    }
    assert_eq!(v.invoke(&mut h, rx, &[0, 0, 64]), Ok(Some(0)));
    assert_eq!(&h.window[..64], &msg);
    v.end_lend();
    // `ba` gets another array; the lent one is collected, and the next
    // array made takes its handle.
    let a = v.new_byte_array(100).unwrap();
    v.try_set_array_field(f, a).unwrap();
    v.collect_garbage();
    h.window.fill(1);
    assert_eq!(v.invoke(&mut h, oth, &[0, 0, 64]), Ok(Some(0)));
    v.clear_window();
    // (An `end_lend` that left the compiled context's loan in place, once
    // the interpreter had settled it, made this read the lent bytes.)
    assert_eq!(&h.window[..64], &[0u8; 64], "read as the new array");
}
