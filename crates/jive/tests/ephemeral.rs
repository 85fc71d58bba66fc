//! Method-name literals and SPINE's `EPHEMERAL` rule at load
//! ([`LoadRules::handlers_ephemeral`]): data-driven rejections, one per rule
//! and per path (direct, through a helper, through two levels, through
//! recursion), with their exact messages, and classes that are accepted.
mod common;

use common::op::*;
use common::*;
use jive::{test_natives, Class, Limits, LoadRules, NativeCtx, NativeResult, Natives, Vm};

const SPINE: &str = "unet/spine/Spine";

/// The host of the tests: the method index the last `addHandler` got.
#[derive(Default)]
struct Host {
    handler: i32,
    number: i32,
}

fn add_handler(h: &mut Host, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    h.handler = a[0];
    h.number = a[1];
    Ok(1)
}

fn arg_int(_: &mut Host, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    Ok(a[0].wrapping_add(a[1]))
}

/// `test` (not ephemeral) and a `spine` domain: `addHandler` not
/// ephemeral, `argInt` ephemeral, `named` (an ephemeral native taking a
/// method name second) and `giveName` (returning a String: never loads).
fn natives() -> Natives<Host> {
    let mut n = test_natives::<Host>();
    n.register(
        "spine",
        SPINE,
        "addHandler",
        "(Ljava/lang/String;II)Z",
        add_handler,
    )
    .register_ephemeral("spine", SPINE, "argInt", "(II)I", arg_int)
    .register_ephemeral("spine", SPINE, "named", "(ILjava/lang/String;)I", arg_int)
    .register_ephemeral("spine", SPINE, "giveName", "()Ljava/lang/String;", arg_int);
    n
}

const RULES: LoadRules = LoadRules {
    handlers_ephemeral: true,
};

fn load(bytes: &[u8], rules: LoadRules) -> Result<Class<Host>, jive::Rejection> {
    Class::load_with(bytes, &natives(), &["test", "spine"], &rules)
}

/// A class `T` whose `init(I)V` installs `onPing` (`addHandler("onPing",
/// 70, 0)`), with the methods `more` adds.
fn class(more: impl FnOnce(&mut Asm)) -> Vec<u8> {
    let mut a = Asm::new("T");
    a.default_init();
    let s = a.string("onPing");
    let add = a.mref(SPINE, "addHandler", "(Ljava/lang/String;II)Z");
    a.method(
        PS,
        "init",
        "(I)V",
        3,
        1,
        &[
            LDC,
            lo(s),
            BIPUSH,
            70,
            ICONST_0,
            INVOKESTATIC,
            hi(add),
            lo(add),
            POP,
            RETURN,
        ],
    );
    more(&mut a);
    a.build()
}

fn call(a: &mut Asm, c: &str, n: &str, d: &str) -> [u8; 3] {
    let r = a.mref(c, n, d);
    [INVOKESTATIC, hi(r), lo(r)]
}

fn code(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// `nop` of the `test` domain, which is not ephemeral.
fn nop(a: &mut Asm) -> [u8; 3] {
    call(a, "unet/sle/Natives", "nop", "()V")
}

fn alloc() -> [u8; 4] {
    [ICONST_4, NEWARRAY, T_INT, POP]
}

/// Each case: the class and the exact rejection.
fn handler_cases() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    vec![
        (
            "non-ephemeral native, direct",
            class(|a| {
                let n = nop(a);
                a.method(PS, "onPing", "(II)V", 1, 2, &code(&[&[ICONST_0, POP], &n, &[RETURN]]));
            }),
            "class rejected: handler onPing: calls unet/sle/Natives.nop (not ephemeral) at offset 2 of onPing",
        ),
        (
            "non-ephemeral native, through a helper",
            class(|a| {
                let h = call(a, "T", "helper", "()V");
                a.method(PS, "onPing", "(II)V", 1, 2, &code(&[&h, &[RETURN]]));
                let s = a.string("onPing");
                let add = call(a, SPINE, "addHandler", "(Ljava/lang/String;II)Z");
                a.method(
                    PS,
                    "helper",
                    "()V",
                    3,
                    0,
                    &code(&[&[NOP, NOP, NOP, NOP, NOP, NOP, LDC, lo(s), ICONST_1, ICONST_0], &add, &[POP, RETURN]]),
                );
            }),
            "class rejected: handler onPing: calls unet/spine/Spine.addHandler (not ephemeral) at offset 10 of helper",
        ),
        (
            "non-ephemeral native, two levels down",
            class(|a| {
                let h = call(a, "T", "one", "(I)I");
                a.method(PS, "onPing", "(II)V", 1, 2, &code(&[&[ILOAD_0], &h, &[POP, RETURN]]));
                let t = call(a, "T", "two", "()V");
                a.method(PS, "one", "(I)I", 1, 1, &code(&[&t, &[ILOAD_0, IRETURN]]));
                let n = nop(a);
                a.method(PS, "two", "()V", 1, 0, &code(&[&[NOP], &n, &[RETURN]]));
            }),
            "class rejected: handler onPing: calls unet/sle/Natives.nop (not ephemeral) at offset 1 of two",
        ),
        (
            "non-ephemeral native, after recursion",
            class(|a| {
                let r = call(a, "T", "rec", "(I)V");
                a.method(PS, "onPing", "(II)V", 1, 2, &code(&[&[ILOAD_0], &r, &[RETURN]]));
                let n = nop(a);
                // rec(x): if (x != 0) rec(x - 1); nop();
                a.method(
                    PS,
                    "rec",
                    "(I)V",
                    2,
                    1,
                    &code(&[&[ILOAD_0, IFEQ, 0, 9, ILOAD_0, ICONST_1, ISUB], &r, &n, &[RETURN]]),
                );
            }),
            "class rejected: handler onPing: calls unet/sle/Natives.nop (not ephemeral) at offset 10 of rec",
        ),
        (
            "non-ephemeral native, mutual recursion",
            class(|a| {
                let p = call(a, "T", "ping", "()V");
                a.method(PS, "onPing", "(II)V", 1, 2, &code(&[&p, &[RETURN]]));
                let q = call(a, "T", "pong", "()V");
                a.method(PS, "ping", "()V", 1, 0, &code(&[&q, &[RETURN]]));
                let n = nop(a);
                a.method(PS, "pong", "()V", 1, 0, &code(&[&p, &n, &[RETURN]]));
            }),
            "class rejected: handler onPing: calls unet/sle/Natives.nop (not ephemeral) at offset 3 of pong",
        ),
        (
            "allocation, direct",
            class(|a| {
                a.method(PS, "onPing", "(II)V", 1, 2, &code(&[&[NOP], &alloc(), &[RETURN]]));
            }),
            "class rejected: handler onPing: allocates (newarray) at offset 2 of onPing",
        ),
        (
            "allocation, through a helper",
            class(|a| {
                let h = call(a, "T", "scratch", "()V");
                a.method(PS, "onPing", "(II)V", 1, 2, &code(&[&h, &[RETURN]]));
                a.method(PS, "scratch", "()V", 1, 0, &code(&[&alloc(), &[RETURN]]));
            }),
            "class rejected: handler onPing: allocates (newarray) at offset 1 of scratch",
        ),
        (
            "allocation, two levels down",
            class(|a| {
                let h = call(a, "T", "one", "()V");
                a.method(PS, "onPing", "(II)V", 1, 2, &code(&[&h, &[RETURN]]));
                let t = call(a, "T", "two", "()V");
                a.method(PS, "one", "()V", 1, 0, &code(&[&t, &[RETURN]]));
                a.method(PS, "two", "()V", 1, 0, &code(&[&[NOP, NOP], &alloc(), &[RETURN]]));
            }),
            "class rejected: handler onPing: allocates (newarray) at offset 3 of two",
        ),
        (
            "allocation, after recursion",
            class(|a| {
                let r = call(a, "T", "rec", "(I)V");
                a.method(PS, "onPing", "(II)V", 1, 2, &code(&[&[ILOAD_0], &r, &[RETURN]]));
                a.method(
                    PS,
                    "rec",
                    "(I)V",
                    2,
                    1,
                    &code(&[&[ILOAD_0, IFEQ, 0, 9, ILOAD_0, ICONST_1, ISUB], &r, &alloc(), &[RETURN]]),
                );
            }),
            "class rejected: handler onPing: allocates (newarray) at offset 11 of rec",
        ),
        (
            "a second handler, named by a native of a handler",
            class(|a| {
                let s = a.string("onPong");
                let named = call(a, SPINE, "named", "(ILjava/lang/String;)I");
                a.method(
                    PS,
                    "onPing",
                    "(II)V",
                    2,
                    2,
                    &code(&[&[ILOAD_0, LDC, lo(s)], &named, &[POP, RETURN]]),
                );
                a.method(PS, "onPong", "(II)V", 1, 2, &code(&[&alloc(), &[RETURN]]));
            }),
            "class rejected: handler onPong: allocates (newarray) at offset 1 of onPong",
        ),
    ]
}

#[test]
fn handlers_breaking_the_rule_are_rejected_with_exact_messages() {
    for (what, bytes, want) in handler_cases() {
        match load(&bytes, RULES) {
            Ok(_) => panic!("{what}: accepted, expected {want:?}"),
            Err(e) => assert_eq!(e.to_string(), want, "{what}"),
        }
        // Without the rule the same class loads: the default rules are
        // unchanged.
        let c = load(&bytes, LoadRules::default())
            .unwrap_or_else(|e| panic!("{what}: default rules reject: {e}"));
        assert!(!c.handlers().is_empty(), "{what}: no handlers");
    }
}

#[test]
fn handlers_calling_ephemeral_natives_and_own_helpers_are_accepted() {
    let bytes = class(|a| {
        a.field(ACC_STATIC, "count", "I");
        a.field(ACC_STATIC, "scratch", "[I");
        let count = a.fref("T", "count", "I");
        let h = call(a, "T", "helper", "(I)I");
        a.method(
            PS,
            "onPing",
            "(II)V",
            3,
            2,
            &code(&[&[ILOAD_1], &h, &[POP, RETURN]]),
        );
        let arg = call(a, SPINE, "argInt", "(II)I");
        let rec = call(a, "T", "helper", "(I)I");
        // helper(x): count += argInt(x, 1); return x == 0 ? 0 : helper(x - 1)
        a.method(
            PS,
            "helper",
            "(I)I",
            3,
            1,
            &code(&[
                &[GETSTATIC, hi(count), lo(count), ILOAD_0, ICONST_1],
                &arg,
                &[IADD, PUTSTATIC, hi(count), lo(count)],
                &[
                    ILOAD_0, IFNE, 0, 5, ICONST_0, IRETURN, ILOAD_0, ICONST_1, ISUB,
                ],
                &rec,
                &[IRETURN],
            ]),
        );
        // A method that is no handler may allocate and call anything.
        let n = nop(a);
        let scratch = a.fref("T", "scratch", "[I");
        a.method(
            PS,
            "setup",
            "()V",
            1,
            0,
            &code(&[
                &n,
                &[
                    ICONST_4,
                    NEWARRAY,
                    T_INT,
                    PUTSTATIC,
                    hi(scratch),
                    lo(scratch),
                    RETURN,
                ],
            ]),
        );
    });
    let c = load(&bytes, RULES).unwrap_or_else(|e| panic!("rejected: {e}"));
    let on_ping = c.method("onPing").unwrap();
    assert_eq!(c.handlers(), vec![on_ping]);
    assert_eq!(c.method_at(on_ping.index()), Some(on_ping));
    assert_eq!(c.method_at(u32::MAX), None);
    // `init` passes onPing's index, interpreted and compiled alike.
    for compiled in [false, true] {
        let mut host = Host::default();
        let mut vm = Vm::new(c.clone(), Limits::default(), &mut host).unwrap();
        if compiled && cfg!(feature = "jit") {
            vm.compile().unwrap();
        }
        vm.invoke(&mut host, c.method("init").unwrap(), &[0])
            .unwrap();
        assert_eq!((host.handler, host.number), (on_ping.index() as i32, 70));
        vm.invoke(&mut host, on_ping, &[0, 3]).unwrap();
        let f = c.field("count").unwrap();
        assert_eq!(vm.get_int_field(f), 4 + 3 + 2 + 1);
    }
}

/// Method names wherever they are not a native's `String` argument.
#[test]
fn strings_other_than_method_names_are_rejected_with_exact_messages() {
    let with = |f: &dyn Fn(&mut Asm)| {
        let mut a = Asm::new("T");
        a.default_init();
        f(&mut a);
        a.build()
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "a literal naming no method",
            with(&|a| {
                let s = a.string("onPong");
                a.method(PS, "f", "()V", 1, 0, &[NOP, LDC, lo(s), POP, RETURN]);
            }),
            "method f()V at offset 1: ldc of a string is not supported (only as the name of a static (II)V method of this class): \"onPong\" names no method",
        ),
        (
            "a literal naming a method of another descriptor",
            with(&|a| {
                a.method(PS, "g", "(I)V", 0, 1, &[RETURN]);
                let s = a.string("g");
                let add = call(a, SPINE, "addHandler", "(Ljava/lang/String;II)Z");
                a.method(PS, "f", "()V", 3, 0, &code(&[&[LDC, lo(s), ICONST_0, ICONST_0], &add, &[POP, RETURN]]));
            }),
            "method f()V at offset 0: ldc of a string is not supported (only as the name of a static (II)V method of this class): \"g\" names g(I)V",
        ),
        (
            "a literal naming an instance method",
            with(&|a| {
                a.method(ACC_PUBLIC, "onPong", "(II)V", 0, 3, &[RETURN]);
                let s = a.string("onPong");
                a.method(PS, "f", "()V", 1, 0, &[LDC, lo(s), POP, RETURN]);
            }),
            "method f()V at offset 0: ldc of a string is not supported (only as the name of a static (II)V method of this class): \"onPong\" names onPong(II)V, which is not static",
        ),
        (
            "a method name popped",
            with(&|a| {
                a.method(PS, "onPing", "(II)V", 0, 2, &[RETURN]);
                let s = a.string("onPing");
                a.method(PS, "f", "()V", 1, 0, &[LDC, lo(s), POP, RETURN]);
            }),
            "method f()V at offset 2: pop of the method name \"onPing\": a method name may only be passed to a native",
        ),
        (
            "a method name duplicated",
            with(&|a| {
                a.method(PS, "onPing", "(II)V", 0, 2, &[RETURN]);
                let s = a.string("onPing");
                a.method(PS, "f", "()V", 2, 0, &[LDC, lo(s), DUP, POP, POP, RETURN]);
            }),
            "method f()V at offset 2: dup of the method name \"onPing\": a method name may only be passed to a native",
        ),
        (
            "a method name stored in a local",
            with(&|a| {
                a.method(PS, "onPing", "(II)V", 0, 2, &[RETURN]);
                let s = a.string("onPing");
                a.method(PS, "f", "()V", 1, 1, &[LDC, lo(s), ASTORE_0, RETURN]);
            }),
            "method f()V at offset 2: astore of a method name",
        ),
        (
            "a method name as an int argument",
            with(&|a| {
                a.method(PS, "onPing", "(II)V", 0, 2, &[RETURN]);
                let s = a.string("onPing");
                let arg = call(a, SPINE, "argInt", "(II)I");
                a.method(PS, "f", "()V", 2, 0, &code(&[&[LDC, lo(s), ICONST_0], &arg, &[POP, RETURN]]));
            }),
            "method f()V at offset 3: expected int on the stack, found a method name",
        ),
        (
            "an int as a method name",
            with(&|a| {
                let add = call(a, SPINE, "addHandler", "(Ljava/lang/String;II)Z");
                a.method(PS, "f", "()V", 3, 0, &code(&[&[ICONST_0, ICONST_0, ICONST_0], &add, &[POP, RETURN]]));
            }),
            "method f()V at offset 3: argument 1 of a native expects a method name (a string literal), found int",
        ),
        (
            "a native returning a String",
            with(&|a| {
                let g = call(a, SPINE, "giveName", "()Ljava/lang/String;");
                a.method(PS, "f", "()V", 1, 0, &code(&[&g, &[POP, RETURN]]));
            }),
            "method f()V at offset 0: native unet/spine/Spine.giveName()Ljava/lang/String;: object type java/lang/String is not supported",
        ),
        (
            "a String field",
            with(&|a| a.field(ACC_STATIC, "name", "Ljava/lang/String;")),
            "class rejected: field name Ljava/lang/String;: object type java/lang/String is not supported",
        ),
        (
            "a String parameter of the class's own method",
            with(&|a| a.method(PS, "g", "(Ljava/lang/String;)V", 0, 1, &[RETURN])),
            "method g(Ljava/lang/String;)V: object type java/lang/String is not supported",
        ),
    ];
    for (what, bytes, want) in cases {
        for rules in [LoadRules::default(), RULES] {
            match load(&bytes, rules) {
                Ok(_) => panic!("{what}: accepted, expected {want:?}"),
                Err(e) => assert_eq!(e.to_string(), want, "{what}"),
            }
        }
    }
}

#[test]
fn a_handler_named_only_in_unreachable_code_is_no_handler() {
    let bytes = class(|a| {
        a.method(PS, "onPing", "(II)V", 1, 2, &[RETURN]);
        let s = a.string("onPong");
        let add = call(a, SPINE, "addHandler", "(Ljava/lang/String;II)Z");
        a.method(
            PS,
            "f",
            "()V",
            3,
            0,
            &code(&[
                &[RETURN, LDC, lo(s), ICONST_0, ICONST_0],
                &add,
                &[POP, RETURN],
            ]),
        );
        a.method(PS, "onPong", "(II)V", 1, 2, &code(&[&alloc(), &[RETURN]]));
    });
    let c = load(&bytes, RULES).unwrap_or_else(|e| panic!("rejected: {e}"));
    assert_eq!(c.handlers(), vec![c.method("onPing").unwrap()]);
}
