//! Leaves and `int[]` sinks (`Natives::register_leaf`,
//! `Natives::register_ints_sink`): compiled code calls the host's common
//! case directly and falls back to the native; the interpreter always
//! calls the native. Both VMs must agree on every result, fault, fuel
//! used, fault site and what the host was given.
#![cfg(feature = "jit")]

mod common;

use common::fast::{self, FastHost};
use common::op::*;
use common::*;
use jive::{Class, Limits, Vm};

/// `take(II)I` and `note(I)V` (leaves) and `ints([III)V` (an `int[]` sink
/// charging 2 units) against their natives, over budgets that run out
/// before, at and after the call, arguments the hosts decline or fault
/// on, and a null array: the leaf or the sink does the common case, the
/// native the rest.
#[test]
fn leaves_and_int_sinks_agree_with_their_natives() {
    let mut a = Asm::new("L");
    a.default_init();
    a.field(PS, "ia", "[I");
    let ia = a.fref("L", "ia", "[I");
    #[rustfmt::skip]
    a.method(ACC_STATIC, "<clinit>", "()V", 3, 0, &[
        // ia = new int[3]; ia[1] = 5; ia[2] = -9.
        ICONST_3, NEWARRAY, T_INT, PUTSTATIC, hi(ia), lo(ia),
        GETSTATIC, hi(ia), lo(ia), ICONST_1, ICONST_5, IASTORE,
        GETSTATIC, hi(ia), lo(ia), ICONST_2, BIPUSH, 0xf7, IASTORE,
        RETURN,
    ]);
    let take = a.mref("unet/sle/Natives", "take", "(II)I");
    #[rustfmt::skip]
    a.method(PS, "take2", "(II)I", 3, 2, &[
        ILOAD_0, ILOAD_1, INVOKESTATIC, hi(take), lo(take),
        // A second call, its result added: the value set by either path
        // reaches the code after it.
        ILOAD_0, ILOAD_1, INVOKESTATIC, hi(take), lo(take), IADD, IRETURN,
    ]);
    let note = a.mref("unet/sle/Natives", "note", "(I)V");
    #[rustfmt::skip]
    a.method(PS, "note", "(II)I", 1, 2, &[
        ILOAD_0, INVOKESTATIC, hi(note), lo(note), ILOAD_1, IRETURN,
    ]);
    let ints = a.mref("unet/sle/Natives", "ints", "([III)V");
    #[rustfmt::skip]
    a.method(PS, "ints", "(II)I", 3, 2, &[
        GETSTATIC, hi(ia), lo(ia), ILOAD_0, ILOAD_1,
        INVOKESTATIC, hi(ints), lo(ints), ICONST_0, IRETURN,
    ]);
    #[rustfmt::skip]
    a.method(PS, "intsNull", "(II)I", 3, 2, &[
        ACONST_NULL, ILOAD_0, ILOAD_1,
        INVOKESTATIC, hi(ints), lo(ints), ICONST_0, IRETURN,
    ]);
    let mut nat = jive::Natives::<FastHost>::new();
    fast::register(&mut nat, "fast");
    let c = Class::load(&a.build(), &nat, &["fast"]).expect("load");
    let (mut h1, mut h2) = (FastHost::new(), FastHost::new());
    let mut interp = Vm::new(c.clone(), Limits::default(), &mut h1).expect("construct");
    let mut jit = Vm::new(c.clone(), Limits::default(), &mut h2).expect("construct");
    assert!(jit.compile().expect("compile") >= 4);
    let mut compared = 0;
    for fuel in [0, 1, 2, 3, 4, 5, 6, 100_000] {
        for m in ["take2", "note", "ints", "intsNull"] {
            let id = c.method(m).expect("method");
            for x in [-1, 0, 1, 2, 4, 7, 8] {
                for y in [0, 3, -100] {
                    let lim = Limits {
                        fuel,
                        ..Limits::default()
                    };
                    let mut r = Vec::new();
                    for (vm, h) in [(&mut interp, &mut h1), (&mut jit, &mut h2)] {
                        vm.set_limits(lim);
                        let out = vm.invoke(h, id, &[x, y]);
                        r.push((out, vm.last_fuel_used(), vm.last_fault_site()));
                    }
                    let what = format!("{m}({x}, {y}) fuel {fuel}");
                    assert_eq!(r[0], r[1], "{what}");
                    assert_eq!(h1.queue, h2.queue, "queue after {what}");
                    assert_eq!(h1.noted, h2.noted, "noted after {what}");
                    assert_eq!(h1.ints, h2.ints, "ints after {what}");
                    compared += 1;
                }
            }
        }
    }
    assert!(compared > 600, "{compared}");
    // The interpreter only called the natives; the compiled code took
    // each fast case where the host accepts and the fuel covers it, and
    // the native for the rest.
    assert_eq!(h1.leaf_calls + h1.sink_calls, 0);
    assert!(
        h2.leaf_calls > 100,
        "the leaves ran {} times",
        h2.leaf_calls
    );
    assert!(h2.sink_calls > 20, "the sink ran {} times", h2.sink_calls);
    assert!(h2.native_calls > 100);
    assert!(h1.ints.iter().any(|(_, _, v)| v == &[0, 5, -9]));
    assert!(h1.noted.contains(&4) && h1.noted.contains(&7));
}
