//! Malformed and out-of-subset class files: each must be rejected, without
//! panicking, with the expected reason.
mod common;

use common::op::*;
use common::*;
use jive::{test_natives, Class, Natives};

fn load(bytes: &[u8]) -> Result<Class<()>, jive::Rejection> {
    Class::load(bytes, &test_natives::<()>(), &["test"])
}

#[track_caller]
fn rejects(bytes: &[u8], want: &str) -> jive::Rejection {
    match load(bytes) {
        Ok(_) => panic!("accepted, expected rejection containing {want:?}"),
        Err(e) => {
            let s = e.to_string();
            assert!(
                s.contains(want),
                "rejection {s:?} does not contain {want:?}"
            );
            e
        }
    }
}

#[track_caller]
fn rejects_code(desc: &str, stack: u16, locals: u16, code: &[u8], want: &str) -> jive::Rejection {
    rejects(&one("f", desc, stack, locals, code), want)
}

#[test]
fn valid_minimal_class_loads() {
    let c = load(&one("f", "()I", 1, 0, &[ICONST_1, IRETURN])).unwrap();
    assert_eq!(c.name(), "T");
    assert_eq!(c.method_descriptor(c.method("f").unwrap()), "()I");
}

#[test]
fn bad_magic() {
    let mut b = one("f", "()V", 0, 0, &[RETURN]);
    b[0] = 0xCB;
    rejects(&b, "bad magic 0xCBFEBABE");
}

#[test]
fn every_prefix_is_rejected_without_panic() {
    let mut a = Asm::new("T");
    a.default_init();
    a.field(ACC_STATIC, "x", "I");
    a.field_const(ACC_STATIC | 0x10, "K", "I", 7);
    a.method(PS, "f", "(I)I", 2, 1, &[ILOAD_0, ICONST_1, IADD, IRETURN]);
    let b = a.build();
    assert!(load(&b).is_ok());
    for n in 0..b.len() {
        assert!(load(&b[..n]).is_err(), "prefix of {n} bytes accepted");
    }
    // Trailing garbage too.
    let mut c = b.clone();
    c.push(0);
    rejects(&c, "trailing bytes");
}

#[test]
fn every_single_byte_corruption_is_handled() {
    let mut a = Asm::new("T");
    a.default_init();
    a.field(ACC_STATIC, "arr", "[I");
    let f = a.fref("T", "arr", "[I");
    a.method(
        PS,
        "f",
        "(I)I",
        3,
        1,
        &[GETSTATIC, hi(f), lo(f), ILOAD_0, IALOAD, IRETURN],
    );
    let b = a.build();
    assert!(load(&b).is_ok());
    for i in 0..b.len() {
        for v in [0u8, 1, 0x7f, 0x80, 0xff] {
            let mut c = b.clone();
            c[i] = v;
            let _ = load(&c); // must not panic
        }
    }
}

#[test]
fn unsupported_versions() {
    let mut a = Asm::new("T");
    a.major = 44;
    rejects(&a.build(), "unsupported class file version 44");
    a.major = 70;
    rejects(&a.build(), "unsupported class file version 70");
    // JDK 1.1 and JDK 25 are fine.
    for v in [45, 69] {
        let mut a = Asm::new("T");
        a.major = v;
        a.default_init();
        assert!(load(&a.build()).is_ok(), "version {v}");
    }
}

#[test]
fn huge_counts() {
    // Constant pool count 65535 with a tiny file.
    let mut b = vec![0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 52, 0xFF, 0xFF];
    b.extend_from_slice(&[1, 0, 1, b'A']);
    rejects(&b, "constant pool count 65535 exceeds the file size");
    // Method count 65535: patch the methods_count of a class with no methods.
    let a = Asm::new("T");
    let mut b = a.build();
    let n = b.len();
    b[n - 4] = 0xFF;
    b[n - 3] = 0xFF;
    rejects(&b, "method count 65535 exceeds the file size");
    // Oversized file.
    rejects(&vec![0u8; (1 << 20) + 1], "exceeds the 1048576 byte limit");
}

#[test]
fn bad_constant_pool_indices() {
    rejects_code(
        "()V",
        1,
        0,
        &[GETSTATIC, 0x03, 0xE7, POP, RETURN],
        "constant pool entry 999 is not a field reference",
    );
    rejects_code(
        "()I",
        1,
        0,
        &[LDC, 250, IRETURN],
        "bad constant pool index 250",
    );
    // A Class entry pointing at a non-Utf8 entry.
    let mut a = Asm::new("T");
    a.this = 999;
    rejects(&a.build(), "bad constant pool index 999");
}

#[test]
fn type_confusion() {
    rejects_code(
        "([B)I",
        1,
        1,
        &[ALOAD_0, IRETURN],
        "expected int on the stack, found byte[]",
    );
    rejects_code(
        "(I)I",
        2,
        1,
        &[ILOAD_0, ICONST_0, IALOAD, IRETURN],
        "array load expects int[], found int",
    );
    rejects_code(
        "([I)I",
        2,
        1,
        &[ALOAD_0, ICONST_0, BALOAD, IRETURN],
        "expects byte[] or boolean[], found int[]",
    );
    rejects_code(
        "(I)V",
        1,
        1,
        &[ALOAD_0, POP, RETURN],
        "aload of local 0, which holds int",
    );
    // this is not an array
    let mut a = Asm::new("T");
    a.default_init();
    a.method(
        ACC_PUBLIC,
        "g",
        "()I",
        1,
        1,
        &[ALOAD_0, ARRAYLENGTH, IRETURN],
    );
    rejects(&a.build(), "arraylength expects");
}

#[test]
fn stack_underflow_and_overflow() {
    let e = rejects_code(
        "()I",
        2,
        0,
        &[ICONST_1, IADD, IRETURN],
        "operand stack underflow",
    );
    assert_eq!(e.method.as_deref(), Some("f()I"));
    assert_eq!(e.offset, Some(1));
    rejects_code(
        "()I",
        1,
        0,
        &[ICONST_1, ICONST_1, IADD, IRETURN],
        "operand stack overflow (max_stack 1)",
    );
}

#[test]
fn bad_branch_targets() {
    // goto +1 lands inside the goto's own operand.
    rejects_code(
        "()V",
        0,
        0,
        &[GOTO, 0, 1, RETURN],
        "branch target 1 is not the start of an instruction",
    );
    rejects_code(
        "()V",
        0,
        0,
        &[GOTO, 0, 10, RETURN],
        "branch target 10 is outside the code",
    );
    rejects_code(
        "()V",
        0,
        0,
        &[NOP, GOTO, 0xFF, 0xFE, RETURN],
        "branch target -1 is outside the code",
    );
}

#[test]
fn uninitialised_locals() {
    rejects_code(
        "()I",
        1,
        2,
        &[ILOAD_1, IRETURN],
        "iload of local 1, which holds an unusable value",
    );
    rejects_code(
        "()I",
        1,
        1,
        &[ILOAD_2, IRETURN],
        "local 2 is outside max_locals 1",
    );
    rejects_code(
        "(II)I",
        1,
        1,
        &[ICONST_0, IRETURN],
        "arguments do not fit in max_locals 1",
    );
}

#[test]
fn inconsistent_merges() {
    // One path pushes an extra value before the join.
    rejects_code(
        "(I)I",
        2,
        1,
        &[ICONST_0, ILOAD_0, IFEQ, 0, 4, ICONST_1, IRETURN],
        "stack height differs where paths merge",
    );
    // Local 1 is an int on one path and an array on the other: unusable after.
    rejects_code(
        "(I)I",
        1,
        2,
        &[
            ICONST_0, ISTORE_1, ILOAD_0, IFEQ, 0, 7, ICONST_1, NEWARRAY, T_INT, ASTORE_1, ILOAD_1,
            IRETURN,
        ],
        "which holds an unusable value",
    );
    // Stack types differ: int vs array.
    rejects_code(
        "(I)I",
        1,
        1,
        &[
            ILOAD_0, IFEQ, 0, 9, ICONST_1, GOTO, 0, 8, NOP, NOP, ICONST_0, NEWARRAY, T_INT, POP,
            ICONST_0, IRETURN,
        ],
        "stack types differ where paths merge",
    );
}

#[test]
fn wrong_return_and_falling_off() {
    rejects_code(
        "()I",
        0,
        0,
        &[RETURN],
        "return instruction does not match the return type of ()I",
    );
    rejects_code("()V", 1, 0, &[ICONST_0, IRETURN], "does not match");
    rejects_code(
        "()[I",
        1,
        0,
        &[ICONST_0, NEWARRAY, T_BYTE, ARETURN],
        "expected int[] on the stack, found byte[]",
    );
    rejects_code(
        "()V",
        1,
        0,
        &[ICONST_0, POP],
        "falls off the end of the code",
    );
}

#[test]
fn invalid_and_unsupported_opcodes() {
    rejects_code("()V", 0, 0, &[0xCB, RETURN], "invalid opcode 203");
    rejects_code("()V", 0, 0, &[0xFE, RETURN], "invalid opcode 254");
    rejects_code(
        "()V",
        2,
        0,
        &[LCONST_0, RETURN],
        "lconst_0 is not supported",
    );
    rejects_code(
        "()V",
        1,
        1,
        &[ICONST_0, I2C, POP, RETURN],
        "i2c is not supported",
    );
    rejects_code(
        "()V",
        1,
        1,
        &[ACONST_NULL, ATHROW],
        "athrow is not supported",
    );
    rejects_code(
        "()V",
        1,
        1,
        &[ACONST_NULL, MONITORENTER, RETURN],
        "monitorenter is not supported",
    );
    rejects_code("()V", 1, 1, &[JSR, 0, 3, RETURN], "jsr is not supported");
    rejects_code(
        "()V",
        1,
        1,
        &[INVOKEDYNAMIC, 0, 1, 0, 0, RETURN],
        "invokedynamic is not supported",
    );
    rejects_code(
        "()V",
        1,
        1,
        &[NEW, 0, 1, POP, RETURN],
        "new is not supported",
    );
    rejects_code(
        "()V",
        1,
        1,
        &[ICONST_1, ANEWARRAY, 0, 1, POP, RETURN],
        "anewarray is not supported",
    );
    rejects_code(
        "()V",
        1,
        1,
        &[ICONST_1, NEWARRAY, 5, POP, RETURN],
        "newarray of char is not supported",
    );
    rejects_code(
        "()V",
        1,
        1,
        &[WIDE, 0x16, 0, 0, RETURN],
        "wide lload is not supported",
    );
    // Truncated operand at the end of the code.
    rejects_code(
        "()V",
        1,
        1,
        &[RETURN, SIPUSH, 0],
        "instruction runs past the end of the code",
    );
}

#[test]
fn ldc_of_string_is_rejected() {
    let mut a = Asm::new("T");
    a.default_init();
    let s = a.string("hi");
    a.method(PS, "f", "()V", 1, 0, &[LDC, lo(s), POP, RETURN]);
    rejects(&a.build(), "ldc of a string is not supported");
}

#[test]
fn foreign_members_are_rejected() {
    let mut a = Asm::new("T");
    a.default_init();
    let f = a.fref("java/lang/System", "out", "Ljava/io/PrintStream;");
    a.method(
        PS,
        "foo",
        "(I)I",
        1,
        1,
        &[
            NOP,
            NOP,
            NOP,
            NOP,
            NOP,
            NOP,
            NOP,
            NOP,
            NOP,
            NOP,
            NOP,
            NOP,
            GETSTATIC,
            hi(f),
            lo(f),
            POP,
            ILOAD_0,
            IRETURN,
        ],
    );
    let e = rejects(
        &a.build(),
        "method foo(I)I at offset 12: getstatic java/lang/System.out is not a field of this class",
    );
    assert_eq!(e.offset, Some(12));

    let mut a = Asm::new("T");
    a.default_init();
    let m = a.mref("java/lang/Math", "abs", "(I)I");
    a.method(
        PS,
        "f",
        "(I)I",
        1,
        1,
        &[ILOAD_0, INVOKESTATIC, hi(m), lo(m), IRETURN],
    );
    rejects(
        &a.build(),
        "invokestatic java/lang/Math.abs(I)I is not a method of this class",
    );

    // Own field with the wrong descriptor, or wrong staticness.
    let mut a = Asm::new("T");
    a.default_init();
    a.field(ACC_STATIC, "x", "I");
    let f = a.fref("T", "x", "B");
    a.method(PS, "f", "()I", 1, 0, &[GETSTATIC, hi(f), lo(f), IRETURN]);
    rejects(&a.build(), "descriptor B does not match the field's I");
    let mut a = Asm::new("T");
    a.default_init();
    a.field(0, "x", "I");
    let f = a.fref("T", "x", "I");
    a.method(PS, "f", "()I", 1, 0, &[GETSTATIC, hi(f), lo(f), IRETURN]);
    rejects(&a.build(), "field is not static");
}

#[test]
fn class_level_subset() {
    let mut a = Asm::new("T");
    a.super_class = a.class("java/lang/Thread");
    rejects(
        &a.build(),
        "superclass java/lang/Thread is not java/lang/Object",
    );
    let mut a = Asm::new("T");
    let i = a.class("java/lang/Runnable");
    a.interfaces.push(i);
    rejects(&a.build(), "interfaces are not supported");
    let mut a = Asm::new("T");
    a.field(ACC_STATIC, "c", "C");
    rejects(&a.build(), "type char is not supported");
    let mut a = Asm::new("T");
    a.field(ACC_STATIC, "s", "Ljava/lang/String;");
    rejects(&a.build(), "object type java/lang/String is not supported");
    let mut a = Asm::new("T");
    a.field(ACC_STATIC, "m", "[[I");
    rejects(&a.build(), "multi-dimensional arrays are not supported");
    let mut a = Asm::new("T");
    a.method(PS, "f", "(J)V", 0, 2, &[RETURN]);
    rejects(&a.build(), "type long is not supported");
    let mut a = Asm::new("T");
    a.method(PS, "f", "()V", 0, 0, &[RETURN]);
    a.method(PS, "f", "(I)V", 0, 1, &[RETURN]);
    rejects(&a.build(), "overloading is not supported");
    let mut a = Asm::new("T");
    a.method_nocode(PS | ACC_NATIVE, "f", "()V");
    rejects(&a.build(), "native methods of the applet are not supported");
    let mut a = Asm::new("T");
    a.method_ex(PS, "f", "()V", 0, 0, &[RETURN], 1);
    rejects(&a.build(), "exception handlers are not supported");
    let mut a = Asm::new("T");
    a.method(ACC_PUBLIC, "<init>", "(I)V", 1, 2, &[RETURN]);
    rejects(&a.build(), "the constructor must be <init>()V");
}

#[test]
fn constructor_rules() {
    // No super call.
    let mut a = Asm::new("T");
    a.method(ACC_PUBLIC, "<init>", "()V", 1, 1, &[RETURN]);
    rejects(&a.build(), "<init> returns without calling Object.<init>");
    // Field use before the super call.
    let mut a = Asm::new("T");
    a.field(0, "x", "I");
    let f = a.fref("T", "x", "I");
    let o = a.mref("java/lang/Object", "<init>", "()V");
    a.method(
        ACC_PUBLIC,
        "<init>",
        "()V",
        2,
        1,
        &[
            ALOAD_0,
            ICONST_1,
            PUTFIELD,
            hi(f),
            lo(f),
            ALOAD_0,
            INVOKESPECIAL,
            hi(o),
            lo(o),
            RETURN,
        ],
    );
    rejects(
        &a.build(),
        "this is used before the Object.<init> super call",
    );
    // Super call twice.
    let mut a = Asm::new("T");
    let o = a.mref("java/lang/Object", "<init>", "()V");
    a.method(
        ACC_PUBLIC,
        "<init>",
        "()V",
        1,
        1,
        &[
            ALOAD_0,
            INVOKESPECIAL,
            hi(o),
            lo(o),
            ALOAD_0,
            INVOKESPECIAL,
            hi(o),
            lo(o),
            RETURN,
        ],
    );
    rejects(&a.build(), "Object.<init> must be called once");
    // Object.<init> outside the constructor.
    let mut a = Asm::new("T");
    a.default_init();
    let o = a.mref("java/lang/Object", "<init>", "()V");
    a.method(
        ACC_PUBLIC,
        "g",
        "()V",
        1,
        1,
        &[ALOAD_0, INVOKESPECIAL, hi(o), lo(o), RETURN],
    );
    rejects(&a.build(), "only allowed as the super call of <init>");
}

#[test]
fn switches() {
    // lookupswitch with unsorted keys (offset 0, padding 3 bytes).
    let code = [
        ILOAD_0,
        LOOKUPSWITCH,
        0,
        0, // pad to 4
        0,
        0,
        0,
        27, // default
        0,
        0,
        0,
        2, // npairs
        0,
        0,
        0,
        5,
        0,
        0,
        0,
        27, //
        0,
        0,
        0,
        1,
        0,
        0,
        0,
        27, //
        ICONST_0,
        IRETURN,
    ];
    rejects_code("(I)I", 1, 1, &code, "lookupswitch keys are not sorted");
    let code = [
        ILOAD_0,
        TABLESWITCH,
        0,
        0,
        0,
        0,
        0,
        27,
        0,
        0,
        0,
        5,
        0,
        0,
        0,
        1,
        ICONST_0,
        IRETURN,
    ];
    rejects_code("(I)I", 1, 1, &code, "tableswitch high 1 < low 5");
}

#[test]
fn natives_need_granted_domains() {
    let mut a = Asm::new("T");
    a.default_init();
    let m = a.mref("unet/sle/Natives", "nop", "()V");
    a.method(PS, "f", "()V", 0, 0, &[INVOKESTATIC, hi(m), lo(m), RETURN]);
    let b = a.build();
    let n = test_natives::<()>();
    assert!(Class::load(&b, &n, &["test"]).is_ok());
    let e = Class::load(&b, &n, &["dma"]).unwrap_err();
    assert!(
        e.to_string()
            .contains("native unet/sle/Natives.nop()V is in domain \"test\", which is not granted"),
        "{e}"
    );
    let e = Class::load(&b, &Natives::<()>::new(), &["test"]).unwrap_err();
    assert!(
        e.to_string()
            .contains("not a method of this class or a granted native"),
        "{e}"
    );
    // Unknown native of a known natives class.
    let mut a = Asm::new("T");
    a.default_init();
    let m = a.mref("unet/sle/Natives", "launch", "()V");
    a.method(PS, "f", "()V", 0, 0, &[INVOKESTATIC, hi(m), lo(m), RETURN]);
    let e = Class::load(&a.build(), &n, &["test"]).unwrap_err();
    assert!(
        e.to_string()
            .contains("no such native method is registered"),
        "{e}"
    );
    // Wrong argument type to a native.
    let mut a = Asm::new("T");
    a.default_init();
    let m = a.mref("unet/sle/Natives", "sum", "([BII)I");
    a.method(
        PS,
        "f",
        "()I",
        3,
        0,
        &[
            ICONST_0,
            ICONST_0,
            ICONST_0,
            INVOKESTATIC,
            hi(m),
            lo(m),
            IRETURN,
        ],
    );
    let e = Class::load(&a.build(), &n, &["test"]).unwrap_err();
    assert!(
        e.to_string()
            .contains("expected byte[] on the stack, found int"),
        "{e}"
    );
}

#[test]
fn calls_check_descriptors_and_kinds() {
    let mut a = Asm::new("T");
    a.default_init();
    a.method(PS, "g", "(I)I", 1, 1, &[ILOAD_0, IRETURN]);
    let m = a.mref("T", "g", "(I)I");
    a.method(PS, "f", "()I", 1, 0, &[INVOKESTATIC, hi(m), lo(m), IRETURN]);
    rejects(&a.build(), "operand stack underflow");
    let mut a = Asm::new("T");
    a.default_init();
    a.method(PS, "g", "(I)I", 1, 1, &[ILOAD_0, IRETURN]);
    let m = a.mref("T", "g", "(I)I");
    a.method(
        PS,
        "f",
        "()I",
        2,
        0,
        &[ICONST_0, INVOKEVIRTUAL, hi(m), lo(m), IRETURN],
    );
    rejects(&a.build(), "invokevirtual T.g(I)I: method is static");
    let mut a = Asm::new("T");
    a.default_init();
    a.method(PS, "g", "(I)I", 1, 1, &[ILOAD_0, IRETURN]);
    let m = a.mref("T", "g", "(B)I");
    a.method(
        PS,
        "f",
        "()I",
        1,
        0,
        &[ICONST_0, INVOKESTATIC, hi(m), lo(m), IRETURN],
    );
    rejects(&a.build(), "descriptor does not match");
    // Calling an instance method on null is fine to verify (faults at run time),
    // but on an int is not.
    let mut a = Asm::new("T");
    a.default_init();
    a.method(ACC_PUBLIC, "g", "()I", 1, 1, &[ICONST_0, IRETURN]);
    let m = a.mref("T", "g", "()I");
    a.method(
        PS,
        "f",
        "()I",
        1,
        0,
        &[ICONST_0, INVOKEVIRTUAL, hi(m), lo(m), IRETURN],
    );
    rejects(
        &a.build(),
        "expected the applet instance on the stack, found int",
    );
}
