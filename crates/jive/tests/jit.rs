//! The compiler against the interpreter: the same class in two VMs, one
//! compiled (`Vm::compile`), the same invocations on both, and after each
//! the same result or fault, fuel used, fault site and checkpoint calls,
//! over grids of arguments, fuel budgets, call-depth limits and
//! checkpoints.
#![cfg(feature = "jit")]

mod common;
/// The two VMs the tests compare (compiled tests only).
#[path = "common/twin.rs"]
mod twin;

use common::fast::{self, FastHost};
use common::op::*;
use common::*;
use jive::{test_natives, Class, Limits, Vm};
use twin::Twin;

const BENCH8: &[u8] = include_bytes!("data/bench8.class");
const BENCH25: &[u8] = include_bytes!("data/bench25.class");

const ARGS: [i32; 10] = [0, 1, 2, 3, 7, -1, -5, 1000, i32::MIN, i32::MAX];

/// Every int-only static method of the javac-compiled benchmark classes,
/// under budgets that run out at every early op, a few call-depth limits,
/// and checkpoints.
#[test]
fn javac_methods_agree_under_every_budget() {
    for bytes in [BENCH8, BENCH25] {
        let mut t = Twin::new(bytes);
        for m in [
            "nullLoop",
            "empty",
            "nullCall",
            "math",
            "edge",
            "sw",
            "lsw",
            "forever",
            "fieldRead",
            "fieldWrite",
            "arrayRead",
            "arrayWrite",
            "mathField",
            "nativeNop",
            "fib",
            "deep",
            // Allocating methods and their callers.
            "sortTest",
            "alloc",
            "nat",
            "mathArray",
            "rand",
        ] {
            assert!(t.compiled(m), "{m} should be compiled");
        }
        let methods: Vec<(String, usize)> =
            t.c.methods()
                .filter(|&m| t.c.method_is_static(m))
                .filter_map(|m| {
                    let d = t.c.method_descriptor(m);
                    let params = d.strip_prefix('(')?.split(')').next()?;
                    (params.chars().all(|c| c == 'I') && !d.ends_with(")[I"))
                        .then(|| (t.c.method_name(m).to_string(), params.len()))
                })
                .filter(|(n, _)| !n.starts_with('<'))
                .collect();
        assert!(methods.len() >= 15, "{methods:?}");
        let fuels: Vec<u64> = (0..64).chain([97, 500, 5000, 100_000]).collect();
        for &fuel in &fuels {
            for max_depth in [1, 2, 4096] {
                for cp in [None, Some(3), Some(40)] {
                    t.set(
                        Limits {
                            fuel,
                            max_depth,
                            ..Limits::default()
                        },
                        cp,
                    );
                    for (m, n) in &methods {
                        match n {
                            0 => t.check(m, &[]),
                            1 => ARGS.iter().for_each(|&a| t.check(m, &[a])),
                            _ => {
                                for &a in &ARGS {
                                    for &b in &ARGS[..6] {
                                        let mut args = vec![a, b];
                                        args.resize(*n, 3);
                                        t.check(m, &args);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(t.compared > 100_000, "{}", t.compared);
    }
}

/// A class exercising what the benchmark classes do not: every array kind
/// loaded and stored, in and out of bounds and through null, constant
/// indices, `arraylength`, narrowing field stores, natives with checked
/// arguments.
fn arrays_class() -> Vec<u8> {
    let mut a = Asm::new("A");
    a.default_init();
    let fields = [
        ("ia", "[I", T_INT),
        ("ba", "[B", T_BYTE),
        ("sa", "[S", 9),
        ("za", "[Z", T_BOOLEAN),
    ];
    let mut clinit = Vec::new();
    let mut refs = Vec::new();
    for (n, d, t) in fields {
        a.field(PS, n, d);
        let f = a.fref("A", n, d);
        refs.push(f);
        clinit.extend_from_slice(&[BIPUSH, 6, NEWARRAY, t, PUTSTATIC, hi(f), lo(f)]);
    }
    clinit.push(RETURN);
    a.method(ACC_STATIC, "<clinit>", "()V", 1, 0, &clinit);
    for (n, d) in [("fb", "B"), ("fs", "S"), ("fz", "Z")] {
        a.field(PS, n, d);
        let f = a.fref("A", n, d);
        a.method(
            PS,
            &format!("p{n}"),
            "(I)I",
            1,
            1,
            &[
                ILOAD_0,
                PUTSTATIC,
                hi(f),
                lo(f),
                GETSTATIC,
                hi(f),
                lo(f),
                IRETURN,
            ],
        );
    }
    let loads = [IALOAD, BALOAD, SALOAD, BALOAD];
    let stores = [IASTORE, BASTORE, SASTORE, BASTORE];
    for (k, &f) in refs.iter().enumerate() {
        let n = fields[k].0;
        a.method(
            PS,
            &format!("g{n}"),
            "(I)I",
            2,
            1,
            &[GETSTATIC, hi(f), lo(f), ILOAD_0, loads[k], IRETURN],
        );
        a.method(
            PS,
            &format!("s{n}"),
            "(II)I",
            3,
            2,
            &[
                GETSTATIC,
                hi(f),
                lo(f),
                ILOAD_0,
                ILOAD_1,
                stores[k],
                GETSTATIC,
                hi(f),
                lo(f),
                ILOAD_0,
                loads[k],
                IRETURN,
            ],
        );
    }
    let (ia, ba) = (refs[0], refs[1]);
    // Constant indices (fused IaLoadK / BaLoadK / IaStoreK / BaStoreK).
    a.method(
        PS,
        "k",
        "(I)I",
        4,
        1,
        &[
            GETSTATIC,
            hi(ia),
            lo(ia),
            ICONST_3,
            ILOAD_0,
            IASTORE,
            GETSTATIC,
            hi(ba),
            lo(ba),
            ICONST_2,
            ILOAD_0,
            BASTORE,
            GETSTATIC,
            hi(ia),
            lo(ia),
            ICONST_3,
            IALOAD,
            GETSTATIC,
            hi(ba),
            lo(ba),
            ICONST_2,
            BALOAD,
            IADD,
            IRETURN,
        ],
    );
    a.method(
        PS,
        "len",
        "()I",
        1,
        0,
        &[GETSTATIC, hi(ia), lo(ia), ARRAYLENGTH, IRETURN],
    );
    a.method(
        PS,
        "nul",
        "(I)I",
        2,
        1,
        &[ACONST_NULL, ILOAD_0, IALOAD, IRETURN],
    );
    a.method(
        PS,
        "nulen",
        "()I",
        1,
        0,
        &[ACONST_NULL, ARRAYLENGTH, IRETURN],
    );
    let fill = a.mref("unet/sle/Natives", "fill", "([BII)V");
    let sum = a.mref("unet/sle/Natives", "sum", "([BII)I");
    let id = a.mref("unet/sle/Natives", "id", "(I)I");
    a.method(
        PS,
        "nat",
        "(II)I",
        4,
        2,
        &[
            GETSTATIC,
            hi(ba),
            lo(ba),
            ILOAD_0,
            ILOAD_1,
            INVOKESTATIC,
            hi(fill),
            lo(fill),
            GETSTATIC,
            hi(ba),
            lo(ba),
            ILOAD_0,
            ICONST_2,
            INVOKESTATIC,
            hi(sum),
            lo(sum),
            ILOAD_1,
            INVOKESTATIC,
            hi(id),
            lo(id),
            IADD,
            IRETURN,
        ],
    );
    // A call between compiled methods, its result used.
    let g = a.mref("A", "gia", "(I)I");
    a.method(
        PS,
        "call",
        "(I)I",
        2,
        1,
        &[ILOAD_0, INVOKESTATIC, hi(g), lo(g), ILOAD_0, IADD, IRETURN],
    );
    a.build()
}

#[test]
fn arrays_fields_natives_and_calls_agree() {
    let mut t = Twin::new(&arrays_class());
    let unary = [
        "pfb", "pfs", "pfz", "gia", "gba", "gsa", "gza", "k", "nul", "call",
    ];
    let binary = ["sia", "sba", "sza", "ssa", "nat"];
    for m in unary.iter().chain(&binary).chain(&["len", "nulen"]) {
        assert!(t.compiled(m), "{m} should be compiled");
    }
    let args = [0, 1, 2, 5, 6, 7, -1, 255, 0x18000, i32::MIN, i32::MAX];
    for fuel in (0..24).chain([1000]) {
        for max_depth in [1, 4096] {
            t.set(
                Limits {
                    fuel,
                    max_depth,
                    ..Limits::default()
                },
                Some(5),
            );
            t.check("len", &[]);
            t.check("nulen", &[]);
            for &x in &args {
                for m in unary {
                    t.check(m, &[x]);
                }
                for &y in &args {
                    for m in binary {
                        t.check(m, &[x, y]);
                    }
                }
            }
        }
    }
}

#[test]
fn uncompile_goes_back_to_the_interpreter() {
    let mut t = Twin::new(BENCH25);
    assert!(t.compiled("math"));
    t.jit.uncompile();
    assert!(!t.compiled("math"));
    t.check("math", &[100]);
}

#[test]
fn code_compiled_on_another_thread_installs_in_vms_of_its_class_only() {
    let c = Class::load(BENCH25, &test_natives::<u32>(), &["test"]).expect("load");
    let other = Class::load(BENCH25, &test_natives::<u32>(), &["test"]).expect("load");
    let mut vm = Vm::new(c.clone(), Limits::default(), &mut 0).expect("construct");
    let math = c.method("math").expect("math");
    let code = {
        let c = c.clone();
        std::thread::spawn(move || c.compile())
            .join()
            .expect("compile thread")
            .expect("compile")
    };
    // The same bytes loaded again are another class: refused, no change.
    let foreign = other.compile().expect("compile");
    assert!(vm.install(foreign).is_err());
    assert!(!vm.is_compiled(math));
    assert!(vm.install(code).expect("install") >= 14);
    assert!(vm.is_compiled(math));
    assert_eq!(vm.invoke(&mut 0, math, &[10]), Ok(Some(30)));
}

/// `prepare` checks a method once; `invoke_prepared` then behaves as
/// `invoke`, and refuses a method prepared in another class.
#[test]
fn prepared_methods_are_checked_once_and_bound_to_their_class() {
    let c = Class::load(BENCH25, &test_natives::<u32>(), &["test"]).expect("load");
    let other = Class::load(BENCH25, &test_natives::<u32>(), &["test"]).expect("load");
    let math = c.method("math").expect("math");
    let mut vm = Vm::new(c.clone(), Limits::default(), &mut 0).expect("construct");
    let mut vm2 = Vm::new(other, Limits::default(), &mut 0).expect("construct");
    assert!(vm.prepare::<2>(math).is_err(), "math takes one int");
    assert!(vm.prepare::<0>(math).is_err());
    let p = vm.prepare::<1>(math).expect("prepare");
    for compiled in [false, true] {
        if compiled {
            vm.compile().expect("compile");
            assert!(vm.is_compiled(math));
        }
        for x in [0, 1, 10, -7, 1 << 20] {
            let want = vm.invoke(&mut 0, math, &[x]);
            let fuel = vm.last_fuel_used();
            assert_eq!(vm.invoke_prepared(&mut 0, p, [x]), want, "math({x})");
            assert_eq!(vm.last_fuel_used(), fuel, "fuel of math({x})");
        }
    }
    // The same bytes loaded again are another class.
    assert!(matches!(
        vm2.invoke_prepared(&mut 0, p, [1]),
        Err(jive::Fault::BadArguments(_))
    ));
}

/// Randomly mutated benchmark classes that still load (changed constants,
/// branch offsets, opcodes the verifier accepts): every int-argument
/// method, interpreted and compiled, under two budgets.
#[test]
fn mutated_classes_agree() {
    let mut rng: u64 = 0x5eed_1e55;
    let mut next = move || {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        rng >> 33
    };
    let mut compared = 0;
    let mut compiled_mutants = 0;
    for base in [BENCH8, BENCH25] {
        for _ in 0..150 {
            let mut b = base.to_vec();
            for _ in 0..1 + next() % 3 {
                let i = (next() as usize) % b.len();
                b[i] = match next() % 4 {
                    0 => next() as u8,
                    1 => b[i].wrapping_add(1),
                    2 => b[i].wrapping_sub(1),
                    _ => 0xff,
                };
            }
            let Ok(c) = Class::load(&b, &test_natives::<u32>(), &["test"]) else {
                continue;
            };
            let small = Limits {
                fuel: 20_000,
                max_depth: 64,
                heap_quota: 64 << 10,
                max_time: None,
            };
            let (Ok(interp), Ok(mut jit)) = (
                Vm::new(c.clone(), small, &mut 0),
                Vm::new(c.clone(), small, &mut 0),
            ) else {
                continue;
            };
            if jit.compile().expect("a loaded class compiles") == 0 {
                continue;
            }
            compiled_mutants += 1;
            let mut t = Twin {
                c: c.clone(),
                interp,
                jit,
                compared: 0,
            };
            let methods: Vec<_> = c.methods().collect();
            for fuel in [37, 20_000] {
                t.set(Limits { fuel, ..small }, Some(11));
                for &m in &methods {
                    let d = c.method_descriptor(m);
                    if c.method_name(m).starts_with('<') || d.contains('[') {
                        continue;
                    }
                    let n =
                        d.matches(['I', 'B', 'S', 'Z']).count() - usize::from(!d.ends_with('V'));
                    for arg in [0, 1, 7, -1, 1000] {
                        t.check(c.method_name(m), &vec![arg; n]);
                    }
                }
            }
            compared += t.compared;
        }
    }
    assert!(
        compiled_mutants > 20,
        "only {compiled_mutants} mutants compiled"
    );
    assert!(compared > 2000, "only {compared} comparisons");
}

/// A native that allocates, called from compiled code in a loop: the
/// heap's table of arrays grows (and moves) during the invocation, and
/// the compiled code keeps finding the arrays (stores, loads, lengths).
#[test]
fn arrays_allocated_by_natives_during_a_compiled_invocation() {
    fn mk(_: &mut u32, cx: &mut jive::NativeCtx<'_>, a: &[i32]) -> jive::NativeResult {
        Ok(cx.new_array(jive::subset::Elem::Byte, a[0])?)
    }
    let mut natives = test_natives::<u32>();
    natives.register("test", "unet/sle/Natives", "mk", "(I)[B", mk);
    let mut a = Asm::new("M");
    a.default_init();
    let m = a.mref("unet/sle/Natives", "mk", "(I)[B");
    const ASTORE_3: u8 = 78;
    const ALOAD_3: u8 = 45;
    // int f(int n) { int s = 0; for (int i = 0; i < n; i++) {
    //   byte[] b = mk(5); b[2] = (byte) i; s += b[2] + b.length; } return s; }
    let code = [
        ICONST_0,
        ISTORE_1,
        ICONST_0,
        ISTORE_2, // 0..4
        ILOAD_1,
        ILOAD_0,
        IF_ICMPGE,
        0,
        28, // 4: loop test, to 34
        BIPUSH,
        5,
        INVOKESTATIC,
        hi(m),
        lo(m),
        ASTORE_3, // 9
        ALOAD_3,
        ICONST_2,
        ILOAD_1,
        BASTORE, // 15
        ILOAD_2,
        ALOAD_3,
        ICONST_2,
        BALOAD,
        IADD,
        ALOAD_3,
        ARRAYLENGTH,
        IADD,
        ISTORE_2, // 19
        IINC,
        1,
        1, // 28
        GOTO,
        0xff,
        0xe5, // 31: back to 4
        ILOAD_2,
        IRETURN, // 34
    ];
    a.method(PS, "f", "(I)I", 3, 4, &code);
    let c = Class::load(&a.build(), &natives, &["test"]).expect("load");
    let mut t = Twin::of(c);
    assert!(t.compiled("f"));
    for n in [0, 1, 2, 50, 300, 300, 1000] {
        t.check("f", &[n]);
    }
    let f = t.c.method("f").expect("f");
    let want: i32 = (0..300).map(|i: i32| i as i8 as i32 + 5).sum();
    assert_eq!(t.jit.invoke(&mut 0, f, &[300]), Ok(Some(want)));
    // A quota that runs out during the loop: the native's fault, the same.
    t.set(
        Limits {
            heap_quota: 2000,
            ..Limits::default()
        },
        None,
    );
    t.check("f", &[1000]);
    let r = t.jit.invoke(&mut 0, f, &[1000]);
    assert!(
        matches!(r, Err(jive::Fault::HeapQuotaExceeded { .. })),
        "{r:?}"
    );
}

/// Intrinsic copies between a byte array and the host's window: compiled
/// and interpreted VMs agree on result, fault, fuel, fault site, the array
/// and the window over a grid of offsets, lengths, budgets and with and
/// without a window; and in the common case compiled code does not call
/// the native.
#[test]
fn intrinsic_window_copies_agree_with_their_natives() {
    let mut a = Asm::new("W");
    a.default_init();
    a.field(PS, "ba", "[B");
    let ba = a.fref("W", "ba", "[B");
    a.method(
        ACC_STATIC,
        "<clinit>",
        "()V",
        1,
        0,
        &[
            BIPUSH,
            100,
            NEWARRAY,
            T_BYTE,
            PUTSTATIC,
            hi(ba),
            lo(ba),
            RETURN,
        ],
    );
    let get = a.mref("unet/sle/Natives", "wget", "([BIII)V");
    let put = a.mref("unet/sle/Natives", "wput", "([BIII)V");
    for (name, m) in [("get", get), ("put", put)] {
        a.method(
            PS,
            name,
            "(III)I",
            4,
            3,
            &[
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
            ],
        );
    }
    a.method(
        PS,
        "nul",
        "(III)I",
        4,
        3,
        &[
            ACONST_NULL,
            ILOAD_0,
            ILOAD_1,
            ILOAD_2,
            INVOKESTATIC,
            hi(get),
            lo(get),
            ICONST_0,
            IRETURN,
        ],
    );
    let mut nat = jive::Natives::<FastHost>::new();
    fast::register(&mut nat, "fast");
    let c = Class::load(&a.build(), &nat, &["fast"]).expect("load");
    let host = FastHost::new;
    let (mut h1, mut h2) = (host(), host());
    let mut interp = Vm::new(c.clone(), Limits::default(), &mut h1).expect("construct");
    let mut jit = Vm::new(c.clone(), Limits::default(), &mut h2).expect("construct");
    assert!(jit.compile().expect("compile") >= 3);
    let field = interp.static_field("ba").expect("ba");
    let mut compared = 0;
    let mut inline = 0;
    for bound in [true, false] {
        for fuel in [0, 1, 2, 3, 4, 5, 100_000] {
            for m in ["get", "put", "nul"] {
                let id = c.method(m).expect("method");
                for aoff in [-1, 0, 1, 36, 99, 100] {
                    for woff in [-1, 0, 7, 192, 255, 256] {
                        for len in [-1, 0, 1, 5, 15, 16, 17, 40, 63, 64, 65, 100, 200] {
                            let lim = Limits {
                                fuel,
                                ..Limits::default()
                            };
                            let calls = h2.native_calls;
                            let mut r = Vec::new();
                            for (vm, h) in [(&mut interp, &mut h1), (&mut jit, &mut h2)] {
                                vm.set_limits(lim);
                                h.bound = bound;
                                if bound {
                                    // SAFETY: the host's window outlives the
                                    // invocation and is not the VM's heap.
                                    #[allow(unsafe_code)]
                                    unsafe {
                                        vm.set_window(h.window.as_mut_ptr(), h.window.len())
                                    };
                                } else {
                                    vm.clear_window();
                                }
                                let out = vm.invoke(h, id, &[aoff, woff, len]);
                                r.push((
                                    out,
                                    vm.last_fuel_used(),
                                    vm.last_fault_site(),
                                    vm.field_bytes(field).map(|b| b.to_vec()),
                                ));
                                vm.clear_window();
                            }
                            let what =
                                format!("{m}({aoff}, {woff}, {len}) fuel {fuel} bound {bound}");
                            assert_eq!(r[0], r[1], "{what}");
                            assert_eq!(h1.window, h2.window, "window after {what}");
                            if r[1].0.is_ok() && h2.native_calls == calls {
                                inline += 1;
                            }
                            compared += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(compared > 3000, "{compared}");
    // Every successful copy with fuel to spare ran inline.
    assert!(inline > 100, "only {inline} copies ran inline");
}

/// Natives with a sink (over `a[aoff..]` and over a prefix of `a`):
/// compiled and interpreted VMs agree on result,
/// fault, fuel, fault site and what was handed over, over a grid of
/// offsets, lengths, budgets and sink decisions; the sink, not the native,
/// runs in the common case; a declining sink leaves the work to the native.
#[test]
fn sinks_agree_with_their_natives() {
    let mut a = Asm::new("S");
    a.default_init();
    a.field(PS, "ba", "[B");
    let ba = a.fref("S", "ba", "[B");
    #[rustfmt::skip]
    a.method(ACC_STATIC, "<clinit>", "()V", 3, 1, &[
        // ba = new byte[100]; ba[i] = i for every i.
        BIPUSH, 100, NEWARRAY, T_BYTE, PUTSTATIC, hi(ba), lo(ba),
        ICONST_0, ISTORE_0,
        ILOAD_0, BIPUSH, 100, IF_ICMPGE, 0, 16,
        GETSTATIC, hi(ba), lo(ba), ILOAD_0, ILOAD_0, I2B, BASTORE,
        IINC, 0, 1, GOTO, 0xff, 0xf0,
        RETURN,
    ]);
    let emit = a.mref("unet/sle/Natives", "emit", "([BIII)V");
    #[rustfmt::skip]
    a.method(PS, "put", "(III)I", 4, 3, &[
        GETSTATIC, hi(ba), lo(ba), ILOAD_0, ILOAD_1, ILOAD_2,
        INVOKESTATIC, hi(emit), lo(emit), ICONST_0, IRETURN,
    ]);
    #[rustfmt::skip]
    a.method(PS, "nul", "(III)I", 4, 3, &[
        ACONST_NULL, ILOAD_0, ILOAD_1, ILOAD_2,
        INVOKESTATIC, hi(emit), lo(emit), ICONST_0, IRETURN,
    ]);
    // The prefix sink: emit0(ba, x, len), the offset unused.
    let emit0 = a.mref("unet/sle/Natives", "emit0", "([BII)V");
    #[rustfmt::skip]
    a.method(PS, "put0", "(III)I", 3, 3, &[
        GETSTATIC, hi(ba), lo(ba), ILOAD_1, ILOAD_2,
        INVOKESTATIC, hi(emit0), lo(emit0), ICONST_0, IRETURN,
    ]);
    let mut nat = jive::Natives::<FastHost>::new();
    fast::register(&mut nat, "fast");
    let c = Class::load(&a.build(), &nat, &["fast"]).expect("load");
    let (mut h1, mut h2) = (FastHost::new(), FastHost::new());
    let mut interp = Vm::new(c.clone(), Limits::default(), &mut h1).expect("construct");
    let mut jit = Vm::new(c.clone(), Limits::default(), &mut h2).expect("construct");
    assert!(jit.compile().expect("compile") >= 3);
    let mut compared = 0;
    for fuel in [0, 1, 2, 3, 4, 5, 100_000] {
        for m in ["put", "nul", "put0"] {
            let id = c.method(m).expect("method");
            for aoff in [-1, 0, 1, 36, 99, 100] {
                for x in [-1, 0, 1, 2] {
                    for len in [-1, 0, 1, 5, 64, 65, 100, 200] {
                        let lim = Limits {
                            fuel,
                            ..Limits::default()
                        };
                        let mut r = Vec::new();
                        for (vm, h) in [(&mut interp, &mut h1), (&mut jit, &mut h2)] {
                            vm.set_limits(lim);
                            let out = vm.invoke(h, id, &[aoff, x, len]);
                            r.push((out, vm.last_fuel_used(), vm.last_fault_site()));
                        }
                        let what = format!("{m}({aoff}, {x}, {len}) fuel {fuel}");
                        assert_eq!(r[0], r[1], "{what}");
                        assert_eq!(h1.emitted, h2.emitted, "handed over after {what}");
                        compared += 1;
                    }
                }
            }
        }
    }
    assert!(compared > 3000, "{compared}");
    assert!(!h1.emitted.is_empty() && h1.sink_calls == 0);
    // Both paths of the compiled code ran: the sink for even x, the
    // native for odd x (and for everything that fails a check).
    assert!(h2.sink_calls > 50, "the sink ran {} times", h2.sink_calls);
    assert_eq!(
        h2.emitted.iter().filter(|(x, _)| x % 2 == 0).count() as u32,
        h2.sink_calls,
        "every even x went through the sink"
    );
    assert!(h2.native_calls > 50);
}

/// Loops that keep the fuel register in a variable and call the fuel
/// stub at every few back-edges (a checkpoint every 3 to 50 units, the
/// clock passed thousands of times per call), with calls, natives and
/// array accesses in the loops, and a fault at an array access (a side
/// exit that does not come back: `sortTest(0)` reads `a[0]`), the fuel
/// running out inside the loops at the smaller budgets: result, fuel,
/// fault site and checkpoint calls agree with the interpreter.
#[test]
fn loops_refilled_at_every_few_back_edges_agree() {
    for bytes in [BENCH8, BENCH25] {
        let mut t = Twin::new(bytes);
        for cp in [3, 7, 50] {
            for fuel in [1_000, 12_345, 1_000_000] {
                t.set(
                    Limits {
                        fuel,
                        ..Limits::default()
                    },
                    Some(cp),
                );
                for m in [
                    "nullLoop",
                    "nullCall",
                    "arrayWrite",
                    "mathArray",
                    "nativeNop",
                    "sortTest",
                    "rand",
                ] {
                    for n in [0, 1, 5, 100, 2_000] {
                        t.check(m, &[n]);
                    }
                }
            }
        }
    }
}
