//! Valid programs run with expected results; integer edge cases; limits;
//! collection; natives; host access to fields.
mod common;

use common::op::*;
use common::*;
use jive::{test_natives, Class, Fault, Limits, Vm};

const BENCH8: &[u8] = include_bytes!("data/bench8.class");
const BENCH25: &[u8] = include_bytes!("data/bench25.class");

fn vm_of(bytes: &[u8], limits: Limits) -> (Class<()>, Vm<()>) {
    let c = Class::load(bytes, &test_natives::<()>(), &["test"]).expect("load");
    let vm = Vm::new(c.clone(), limits, &mut ()).expect("construct");
    (c, vm)
}

fn call(vm: &mut Vm<()>, c: &Class<()>, m: &str, args: &[i32]) -> Result<Option<i32>, Fault> {
    vm.invoke(&mut (), c.method(m).expect("method"), args)
}

/// A one-method class: run `f` with `args`.
fn run1(
    desc: &str,
    stack: u16,
    locals: u16,
    code: &[u8],
    args: &[i32],
) -> Result<Option<i32>, Fault> {
    let (c, mut vm) = vm_of(&one("f", desc, stack, locals, code), Limits::default());
    call(&mut vm, &c, "f", args)
}

#[test]
fn javac_classes_run() {
    for bytes in [BENCH8, BENCH25] {
        let (c, mut vm) = vm_of(bytes, Limits::default());
        assert_eq!(call(&mut vm, &c, "fib", &[20]), Ok(Some(6765)));
        assert_eq!(call(&mut vm, &c, "sortTest", &[1000]), Ok(Some(1001)));
        assert_eq!(call(&mut vm, &c, "nullLoop", &[1000]), Ok(Some(1000)));
        assert_eq!(call(&mut vm, &c, "nullCall", &[1000]), Ok(Some(999)));
        assert_eq!(call(&mut vm, &c, "math", &[10]), Ok(Some(30)));
        assert_eq!(
            call(&mut vm, &c, "edge", &[i32::MIN, -1]),
            Ok(Some(i32::MIN))
        );
        assert_eq!(call(&mut vm, &c, "edge", &[7, -3]), Ok(Some(17)));
        assert_eq!(call(&mut vm, &c, "sw", &[2]), Ok(Some(20)));
        assert_eq!(call(&mut vm, &c, "sw", &[9]), Ok(Some(-1)));
        assert_eq!(call(&mut vm, &c, "lsw", &[1000]), Ok(Some(20)));
        assert_eq!(call(&mut vm, &c, "lsw", &[-5]), Ok(Some(30)));
        assert_eq!(call(&mut vm, &c, "lsw", &[0]), Ok(Some(-1)));
        assert_eq!(call(&mut vm, &c, "nat", &[5]), Ok(Some(26)));
        assert_eq!(call(&mut vm, &c, "bools", &[3]), Ok(Some(103)));
        assert_eq!(call(&mut vm, &c, "bools", &[2]), Ok(Some(2)));
        assert_eq!(call(&mut vm, &c, "virt", &[5]), Ok(Some(5)));
        assert_eq!(call(&mut vm, &c, "virt", &[5]), Ok(Some(10)));
        assert_eq!(call(&mut vm, &c, "edge", &[1, 0]), Err(Fault::DivideByZero));
        let site = vm.last_fault_site().unwrap();
        assert_eq!(site.method, "edge(II)I");
        assert_eq!(site.offset, 2);
        // Still usable.
        assert_eq!(call(&mut vm, &c, "fib", &[10]), Ok(Some(55)));
    }
}

#[test]
fn integer_edge_cases() {
    let bin = |o: u8, a: i32, b: i32| {
        run1("(II)I", 2, 2, &[ILOAD_0, ILOAD_1, o, IRETURN], &[a, b])
            .unwrap()
            .unwrap()
    };
    assert_eq!(bin(IDIV, i32::MIN, -1), i32::MIN);
    assert_eq!(bin(IREM, i32::MIN, -1), 0);
    assert_eq!(bin(IDIV, -7, 2), -3);
    assert_eq!(bin(IREM, -7, 2), -1);
    assert_eq!(bin(IADD, i32::MAX, 1), i32::MIN);
    assert_eq!(bin(ISUB, i32::MIN, 1), i32::MAX);
    assert_eq!(bin(IMUL, 0x10000, 0x10000), 0);
    assert_eq!(bin(ISHL, 1, 33), 2);
    assert_eq!(bin(ISHL, 1, -1), i32::MIN);
    assert_eq!(bin(ISHR, -8, 33), -4);
    assert_eq!(bin(IUSHR, -1, 28), 15);
    assert_eq!(bin(IUSHR, -1, 32), -1);
    assert_eq!(
        run1("(II)I", 2, 2, &[ILOAD_0, ILOAD_1, IDIV, IRETURN], &[1, 0]),
        Err(Fault::DivideByZero)
    );
    assert_eq!(
        run1("(II)I", 2, 2, &[ILOAD_0, ILOAD_1, IREM, IRETURN], &[1, 0]),
        Err(Fault::DivideByZero)
    );
    let un = |o: u8, a: i32| {
        run1("(I)I", 1, 1, &[ILOAD_0, o, IRETURN], &[a])
            .unwrap()
            .unwrap()
    };
    assert_eq!(un(I2B, 0x1ff), -1);
    assert_eq!(un(I2B, 0x80), -128);
    assert_eq!(un(I2S, 0x18000), -32768);
    assert_eq!(un(INEG, i32::MIN), i32::MIN);
    // The same with constants, folded by the decoder.
    let mut a = Asm::new("T");
    a.default_init();
    let min = a.int(i32::MIN);
    a.method(
        PS,
        "d",
        "()I",
        2,
        0,
        &[LDC, lo(min), ICONST_M1, IDIV, IRETURN],
    );
    a.method(
        PS,
        "r",
        "()I",
        2,
        0,
        &[LDC, lo(min), ICONST_M1, IREM, IRETURN],
    );
    a.method(PS, "z", "()I", 2, 0, &[ICONST_1, ICONST_0, IDIV, IRETURN]);
    a.method(PS, "s", "(I)I", 2, 1, &[ICONST_3, ILOAD_0, ISUB, IRETURN]);
    a.method(PS, "k", "(I)I", 2, 1, &[ILOAD_0, ICONST_0, IDIV, IRETURN]);
    a.method(PS, "b", "()B", 1, 0, &[SIPUSH, 0x01, 0xff, IRETURN]);
    a.method(PS, "bv", "(I)Z", 1, 1, &[ILOAD_0, IRETURN]);
    let (c, mut vm) = vm_of(&a.build(), Limits::default());
    assert_eq!(call(&mut vm, &c, "d", &[]), Ok(Some(i32::MIN)));
    assert_eq!(call(&mut vm, &c, "r", &[]), Ok(Some(0)));
    assert_eq!(call(&mut vm, &c, "z", &[]), Err(Fault::DivideByZero));
    assert_eq!(call(&mut vm, &c, "s", &[10]), Ok(Some(-7)));
    assert_eq!(call(&mut vm, &c, "k", &[10]), Err(Fault::DivideByZero));
    // ireturn narrows to the declared return type.
    assert_eq!(call(&mut vm, &c, "b", &[]), Ok(Some(-1)));
    assert_eq!(call(&mut vm, &c, "bv", &[1]), Ok(Some(1)));
}

#[test]
fn array_semantics() {
    // byte[1]; a[0] = x; return a[0]  (bastore truncates, baload sign-extends)
    let code = |t: u8, st: u8, ld: u8| {
        vec![
            ICONST_1, NEWARRAY, t, ASTORE_1, ALOAD_1, ICONST_0, ILOAD_0, st, ALOAD_1, ICONST_0, ld,
            IRETURN,
        ]
    };
    let b = |x| {
        run1("(I)I", 3, 2, &code(T_BYTE, BASTORE, BALOAD), &[x])
            .unwrap()
            .unwrap()
    };
    assert_eq!(b(0x1ff), -1);
    assert_eq!(b(0x80), -128);
    assert_eq!(b(0x7f), 127);
    let z = |x| {
        run1("(I)I", 3, 2, &code(T_BOOLEAN, BASTORE, BALOAD), &[x])
            .unwrap()
            .unwrap()
    };
    assert_eq!(z(3), 1);
    assert_eq!(z(2), 0);
    let s = |x| {
        run1("(I)I", 3, 2, &code(9, SASTORE, SALOAD), &[x])
            .unwrap()
            .unwrap()
    };
    assert_eq!(s(0x18000), -32768);
    assert_eq!(s(0x7fff), 32767);
    let i = |x| {
        run1("(I)I", 3, 2, &code(T_INT, IASTORE, IALOAD), &[x])
            .unwrap()
            .unwrap()
    };
    assert_eq!(i(i32::MIN), i32::MIN);
    // Bounds, null, negative size.
    let get = [ICONST_2, NEWARRAY, T_INT, ILOAD_0, IALOAD, IRETURN];
    assert_eq!(
        run1("(I)I", 2, 1, &get, &[2]),
        Err(Fault::ArrayIndexOutOfBounds {
            index: 2,
            length: 2
        })
    );
    assert_eq!(
        run1("(I)I", 2, 1, &get, &[-1]),
        Err(Fault::ArrayIndexOutOfBounds {
            index: -1,
            length: 2
        })
    );
    assert_eq!(run1("(I)I", 2, 1, &get, &[1]), Ok(Some(0)));
    assert_eq!(
        run1("()I", 2, 0, &[ACONST_NULL, ICONST_0, IALOAD, IRETURN], &[]),
        Err(Fault::NullPointer)
    );
    assert_eq!(
        run1("()I", 1, 0, &[ACONST_NULL, ARRAYLENGTH, IRETURN], &[]),
        Err(Fault::NullPointer)
    );
    assert_eq!(
        run1(
            "(I)I",
            1,
            1,
            &[ILOAD_0, NEWARRAY, T_BYTE, ARRAYLENGTH, IRETURN],
            &[-3]
        ),
        Err(Fault::NegativeArraySize(-3))
    );
    assert_eq!(
        run1(
            "(I)I",
            1,
            1,
            &[ILOAD_0, NEWARRAY, T_BYTE, ARRAYLENGTH, IRETURN],
            &[7]
        ),
        Ok(Some(7))
    );
}

#[test]
fn stack_shuffles_and_wide() {
    let r = |code: &[u8], a, b| run1("(II)I", 6, 2, code, &[a, b]).unwrap().unwrap();
    assert_eq!(r(&[ILOAD_0, ILOAD_1, SWAP, ISUB, IRETURN], 10, 3), -7);
    // [a, b] dup_x1 -> [b, a, b]; isub -> [b, a-b]; imul
    assert_eq!(
        r(&[ILOAD_0, ILOAD_1, DUP_X1, ISUB, IMUL, IRETURN], 10, 3),
        21
    );
    // [a, b] dup2 -> [a, b, a, b]; iadd; imul; iadd -> a + b*(a+b)
    assert_eq!(
        r(&[ILOAD_0, ILOAD_1, DUP2, IADD, IMUL, IADD, IRETURN], 10, 3),
        49
    );
    // dup then store over the source local: the pending copy must survive.
    assert_eq!(
        r(
            &[ILOAD_0, DUP, ICONST_1, IADD, ISTORE_0, ILOAD_0, IADD, IRETURN],
            10,
            0
        ),
        21
    );
    assert_eq!(
        r(
            &[ILOAD_0, ILOAD_1, ISTORE_0, ISTORE_1, ILOAD_0, ILOAD_1, ISUB, IRETURN],
            10,
            3
        ),
        -7
    );
    // wide iload / wide iinc by 256
    assert_eq!(
        run1(
            "(I)I",
            1,
            1,
            &[WIDE, IINC, 0, 0, 0x01, 0x00, WIDE, ILOAD, 0, 0, IRETURN],
            &[1]
        ),
        Ok(Some(257))
    );
}

#[test]
fn hand_assembled_switch_padding() {
    // tableswitch at offsets 1..4 exercises every padding length.
    for nops in 0..4 {
        let mut code = vec![NOP; nops];
        code.push(ILOAD_0);
        let at = code.len();
        code.push(TABLESWITCH);
        while code.len() % 4 != 0 {
            code.push(0);
        }
        let table_end = code.len() + 12 + 8;
        let rel = |t: usize| ((t as i32) - at as i32).to_be_bytes();
        let dflt = table_end;
        let case1 = table_end + 2;
        code.extend_from_slice(&rel(dflt));
        code.extend_from_slice(&1i32.to_be_bytes());
        code.extend_from_slice(&2i32.to_be_bytes());
        code.extend_from_slice(&rel(case1));
        code.extend_from_slice(&rel(case1 + 2));
        code.extend_from_slice(&[ICONST_M1, IRETURN, ICONST_1, IRETURN, ICONST_2, IRETURN]);
        for (k, want) in [(0, -1), (1, 1), (2, 2), (3, -1), (i32::MIN, -1)] {
            assert_eq!(
                run1("(I)I", 1, 1, &code, &[k]),
                Ok(Some(want)),
                "pad {nops} key {k}"
            );
        }
    }
}

#[test]
fn version_45_class_runs() {
    let mut a = Asm::new("T");
    a.major = 45;
    a.default_init();
    a.method(PS, "f", "(I)I", 2, 1, &[ILOAD_0, ICONST_2, IMUL, IRETURN]);
    let (c, mut vm) = vm_of(&a.build(), Limits::default());
    assert_eq!(call(&mut vm, &c, "f", &[21]), Ok(Some(42)));
}

#[test]
fn fuel_stops_infinite_loop_and_vm_survives() {
    let limits = Limits {
        fuel: 1_000_000,
        ..Limits::default()
    };
    let (c, mut vm) = vm_of(BENCH8, limits);
    let t = std::time::Instant::now();
    assert_eq!(call(&mut vm, &c, "forever", &[]), Err(Fault::OutOfFuel));
    assert!(t.elapsed().as_secs() < 1);
    assert_eq!(vm.last_fuel_used(), 1_000_000);
    assert_eq!(call(&mut vm, &c, "fib", &[15]), Ok(Some(610)));
    // Fuel is deterministic.
    let used = vm.last_fuel_used();
    call(&mut vm, &c, "fib", &[15]).unwrap();
    assert_eq!(vm.last_fuel_used(), used);
    // Default budget: an infinite loop stops within a second (release) or a few (debug).
    let (c, mut vm) = vm_of(BENCH8, Limits::default());
    assert_eq!(call(&mut vm, &c, "forever", &[]), Err(Fault::OutOfFuel));
}

#[test]
fn depth_limit() {
    let (c, mut vm) = vm_of(BENCH8, Limits::default());
    assert_eq!(call(&mut vm, &c, "deep", &[0]), Err(Fault::StackOverflow));
    assert_eq!(vm.last_fault_site().unwrap().method, "deep(I)I");
    // qsort of 1000 reverse-ordered ints fits the default depth.
    assert_eq!(call(&mut vm, &c, "sortTest", &[1000]), Ok(Some(1001)));
    let small = Limits {
        max_depth: 10,
        ..Limits::default()
    };
    let (c, mut vm) = vm_of(BENCH8, small);
    assert_eq!(call(&mut vm, &c, "fib", &[5]), Ok(Some(5)));
    assert_eq!(call(&mut vm, &c, "fib", &[12]), Err(Fault::StackOverflow));
    assert_eq!(call(&mut vm, &c, "fib", &[5]), Ok(Some(5)));
}

#[test]
fn heap_quota_and_collection() {
    // Static fields of Bench hold ~70 bytes; allocate 1000-byte temporaries.
    let limits = Limits {
        heap_quota: 4096,
        ..Limits::default()
    };
    let (c, mut vm) = vm_of(BENCH8, limits);
    let base = vm.heap_used();
    assert!(base > 0 && base < 200, "{base}");
    // 10 000 temporaries of 1000 bytes with a 4 KiB quota: collected in-call.
    assert_eq!(call(&mut vm, &c, "alloc", &[10_000]), Ok(Some(10_000_000)));
    assert_eq!(vm.heap_used(), base);
    // nat() allocates a 4-byte temporary: freed at the end of the call.
    call(&mut vm, &c, "nat", &[1]).unwrap();
    assert_eq!(vm.heap_used(), base);
    // One array larger than the quota.
    let big = [ILOAD_0, NEWARRAY, T_INT, ARRAYLENGTH, IRETURN];
    let mut a = Asm::new("T");
    a.default_init();
    a.method(PS, "f", "(I)I", 1, 1, &big);
    let c = Class::load(&a.build(), &test_natives::<()>(), &[]).unwrap();
    let mut vm = Vm::new(c.clone(), limits, &mut ()).unwrap();
    assert_eq!(
        call(&mut vm, &c, "f", &[2000]),
        Err(Fault::HeapQuotaExceeded {
            requested: 8016,
            quota: 4096
        })
    );
    assert_eq!(call(&mut vm, &c, "f", &[100]), Ok(Some(100)));
    assert_eq!(vm.heap_used(), 0);
}

#[test]
fn arrays_reachable_from_fields_survive() {
    // static int[] keep; f(n): keep = new int[n]; g(i): return keep[i]
    let mut a = Asm::new("T");
    a.default_init();
    a.field(ACC_STATIC, "keep", "[I");
    let f = a.fref("T", "keep", "[I");
    a.method(
        PS,
        "f",
        "(I)V",
        1,
        1,
        &[ILOAD_0, NEWARRAY, T_INT, PUTSTATIC, hi(f), lo(f), RETURN],
    );
    a.method(
        PS,
        "set",
        "(II)V",
        3,
        2,
        &[GETSTATIC, hi(f), lo(f), ILOAD_0, ILOAD_1, IASTORE, RETURN],
    );
    a.method(
        PS,
        "g",
        "(I)I",
        2,
        1,
        &[GETSTATIC, hi(f), lo(f), ILOAD_0, IALOAD, IRETURN],
    );
    a.method(
        PS,
        "tmp",
        "()V",
        1,
        0,
        &[BIPUSH, 100, NEWARRAY, T_INT, POP, RETURN],
    );
    let (c, mut vm) = vm_of(&a.build(), Limits::default());
    call(&mut vm, &c, "f", &[4]).unwrap();
    call(&mut vm, &c, "set", &[3, 99]).unwrap();
    for _ in 0..10 {
        call(&mut vm, &c, "tmp", &[]).unwrap();
    }
    assert_eq!(call(&mut vm, &c, "g", &[3]), Ok(Some(99)));
    assert_eq!(vm.live_arrays(), 1);
    assert_eq!(vm.heap_used(), 16 + 16);
}

#[test]
fn host_field_access() {
    // static byte[] RxBuf; static int count; get(i) = RxBuf[i] + count
    let mut a = Asm::new("T");
    a.default_init();
    a.field(ACC_STATIC, "RxBuf", "[B");
    a.field(ACC_STATIC, "count", "I");
    a.field(ACC_STATIC, "small", "B");
    let f = a.fref("T", "RxBuf", "[B");
    let n = a.fref("T", "count", "I");
    a.method(
        PS,
        "get",
        "(I)I",
        3,
        1,
        &[
            GETSTATIC,
            hi(f),
            lo(f),
            ILOAD_0,
            BALOAD,
            GETSTATIC,
            hi(n),
            lo(n),
            IADD,
            IRETURN,
        ],
    );
    a.method(
        PS,
        "sum",
        "([B)I",
        3,
        1,
        &[
            ALOAD_0,
            ICONST_0,
            ALOAD_0,
            ARRAYLENGTH,
            INVOKESTATIC,
            0,
            0,
            IRETURN,
        ],
    );
    let bytes = a.build();
    // Patch in the native ref afterwards is awkward; build again with it.
    let mut a2 = Asm::new("T");
    a2.default_init();
    a2.field(ACC_STATIC, "RxBuf", "[B");
    a2.field(ACC_STATIC, "count", "I");
    a2.field(ACC_STATIC, "small", "B");
    let f = a2.fref("T", "RxBuf", "[B");
    let n = a2.fref("T", "count", "I");
    let s = a2.mref("unet/sle/Natives", "sum", "([BII)I");
    a2.method(
        PS,
        "get",
        "(I)I",
        3,
        1,
        &[
            GETSTATIC,
            hi(f),
            lo(f),
            ILOAD_0,
            BALOAD,
            GETSTATIC,
            hi(n),
            lo(n),
            IADD,
            IRETURN,
        ],
    );
    a2.method(
        PS,
        "sum",
        "([B)I",
        3,
        1,
        &[
            ALOAD_0,
            ICONST_0,
            ALOAD_0,
            ARRAYLENGTH,
            INVOKESTATIC,
            hi(s),
            lo(s),
            IRETURN,
        ],
    );
    a2.method(
        PS,
        "sumAt",
        "([BI)I",
        3,
        2,
        &[
            ALOAD_0,
            ILOAD_1,
            ICONST_2,
            INVOKESTATIC,
            hi(s),
            lo(s),
            IRETURN,
        ],
    );
    assert!(Class::load(&bytes, &test_natives::<()>(), &["test"]).is_err());
    let (c, mut vm) = vm_of(&a2.build(), Limits::default());
    let rx = vm.static_field("RxBuf").unwrap();
    let count = vm.static_field("count").unwrap();
    assert!(vm.array_of_field(rx).is_none());
    assert_eq!(call(&mut vm, &c, "get", &[0]), Err(Fault::NullPointer));
    let arr = vm.new_byte_array(4).unwrap();
    vm.bytes_mut(arr).unwrap().copy_from_slice(&[1, 2, -3, 4]);
    vm.set_array_field(rx, arr);
    vm.set_int_field(count, 100);
    assert_eq!(vm.get_int_field(count), 100);
    let small = vm.static_field("small").unwrap();
    vm.set_int_field(small, 0x1ff);
    assert_eq!(vm.get_int_field(small), -1);
    assert_eq!(call(&mut vm, &c, "get", &[2]), Ok(Some(97)));
    assert_eq!(vm.array_of_field(rx), Some(arr));
    assert_eq!(vm.bytes(arr).unwrap(), &[1, 2, -3, 4]);
    // Pass the array as an argument: the native sums it.
    assert_eq!(call(&mut vm, &c, "sum", &[arr.handle()]), Ok(Some(4)));
    assert_eq!(call(&mut vm, &c, "sumAt", &[arr.handle(), 1]), Ok(Some(-1)));
    assert_eq!(
        call(&mut vm, &c, "sumAt", &[arr.handle(), 3]),
        Err(Fault::ArrayIndexOutOfBounds {
            index: 5,
            length: 4
        })
    );
    assert_eq!(call(&mut vm, &c, "sum", &[0]), Err(Fault::NullPointer));
    // Bad arguments.
    assert!(matches!(
        call(&mut vm, &c, "sum", &[12345]),
        Err(Fault::BadArguments(_))
    ));
    assert!(matches!(
        call(&mut vm, &c, "get", &[]),
        Err(Fault::BadArguments(_))
    ));
    // Array field kind is checked.
    let ints = vm.new_array(jive::subset::Elem::Int, 2).unwrap();
    assert!(vm.try_set_array_field(rx, ints).is_err());
    assert_eq!(vm.array_of_field(rx), Some(arr));
    // A pinned array survives invocations without being in a field.
    let pinned = vm.new_byte_array(3).unwrap();
    assert!(vm.pin_array(pinned));
    call(&mut vm, &c, "sum", &[pinned.handle()]).unwrap();
    call(&mut vm, &c, "sum", &[pinned.handle()]).unwrap();
    assert_eq!(vm.bytes(pinned).unwrap(), &[0, 0, 0]);
    vm.unpin_array(pinned);
    // An array not stored anywhere is freed by the next invocation; its
    // reference goes stale.
    call(&mut vm, &c, "get", &[0]).unwrap();
    assert!(vm.ints(ints).is_none());
    assert!(vm.bytes(pinned).is_none());
    assert_eq!(vm.bytes(arr).unwrap(), &[1, 2, -3, 4]);
}

#[test]
fn instance_methods_and_this() {
    // int x; <init>: super(); x = 5;  get() = this.x; bump() = this.get() + 1
    let mut a = Asm::new("T");
    a.field(0, "x", "I");
    let f = a.fref("T", "x", "I");
    let o = a.mref("java/lang/Object", "<init>", "()V");
    let g = a.mref("T", "get", "()I");
    a.method(
        ACC_PUBLIC,
        "<init>",
        "()V",
        3,
        1,
        &[
            ALOAD_0,
            INVOKESPECIAL,
            hi(o),
            lo(o),
            ALOAD_0,
            ICONST_3,
            ICONST_2,
            IADD,
            PUTFIELD,
            hi(f),
            lo(f),
            RETURN,
        ],
    );
    a.method(
        ACC_PUBLIC,
        "get",
        "()I",
        1,
        1,
        &[ALOAD_0, GETFIELD, hi(f), lo(f), IRETURN],
    );
    a.method(
        ACC_PUBLIC,
        "bump",
        "()I",
        2,
        1,
        &[
            ALOAD_0,
            INVOKEVIRTUAL,
            hi(g),
            lo(g),
            ICONST_1,
            IADD,
            IRETURN,
        ],
    );
    // Null receiver: faults at run time.
    a.method(
        PS,
        "nul",
        "()I",
        1,
        0,
        &[ACONST_NULL, INVOKEVIRTUAL, hi(g), lo(g), IRETURN],
    );
    a.method(
        PS,
        "nulf",
        "()I",
        1,
        0,
        &[ACONST_NULL, GETFIELD, hi(f), lo(f), IRETURN],
    );
    // Local 0 overwritten with null, then used as the receiver.
    a.method(
        ACC_PUBLIC,
        "swap0",
        "()I",
        1,
        1,
        &[
            ACONST_NULL,
            ASTORE_0,
            ALOAD_0,
            GETFIELD,
            hi(f),
            lo(f),
            IRETURN,
        ],
    );
    let (c, mut vm) = vm_of(&a.build(), Limits::default());
    assert_eq!(call(&mut vm, &c, "get", &[]), Ok(Some(5)));
    assert_eq!(call(&mut vm, &c, "bump", &[]), Ok(Some(6)));
    assert_eq!(call(&mut vm, &c, "nul", &[]), Err(Fault::NullPointer));
    assert_eq!(call(&mut vm, &c, "nulf", &[]), Err(Fault::NullPointer));
    assert_eq!(call(&mut vm, &c, "swap0", &[]), Err(Fault::NullPointer));
    assert_eq!(call(&mut vm, &c, "get", &[]), Ok(Some(5)));
}

#[test]
fn static_constants_and_clinit() {
    let mut a = Asm::new("T");
    a.default_init();
    a.field_const(ACC_STATIC | 0x10, "K", "I", 1234);
    a.field(ACC_STATIC, "y", "I");
    let k = a.fref("T", "K", "I");
    let y = a.fref("T", "y", "I");
    a.method(
        ACC_STATIC,
        "<clinit>",
        "()V",
        1,
        0,
        &[BIPUSH, 7, PUTSTATIC, hi(y), lo(y), RETURN],
    );
    a.method(
        PS,
        "f",
        "()I",
        2,
        0,
        &[
            GETSTATIC,
            hi(k),
            lo(k),
            GETSTATIC,
            hi(y),
            lo(y),
            IADD,
            IRETURN,
        ],
    );
    let (c, mut vm) = vm_of(&a.build(), Limits::default());
    assert_eq!(call(&mut vm, &c, "f", &[]), Ok(Some(1241)));
    assert!(c.method("<clinit>").is_none());
}

#[test]
fn custom_native_domain_and_host_state() {
    struct Host {
        sent: Vec<Vec<i8>>,
    }
    fn send(h: &mut Host, cx: &mut jive::NativeCtx<'_>, a: &[i32]) -> jive::NativeResult {
        let b = cx.bytes(a[0])?;
        let n = (a[1].max(0) as usize).min(b.len());
        h.sent.push(b[..n].to_vec());
        Ok(n as i32)
    }
    fn mk(_: &mut Host, cx: &mut jive::NativeCtx<'_>, a: &[i32]) -> jive::NativeResult {
        Ok(cx.new_array(jive::subset::Elem::Byte, a[0])?)
    }
    let mut natives = test_natives::<Host>();
    natives.register("net", "unet/sle/Natives", "send", "([BI)I", send);
    natives.register("net", "unet/sle/Natives", "mk", "(I)[B", mk);
    let mut a = Asm::new("T");
    a.default_init();
    let s = a.mref("unet/sle/Natives", "send", "([BI)I");
    let m = a.mref("unet/sle/Natives", "mk", "(I)[B");
    a.method(
        PS,
        "f",
        "()I",
        4,
        0,
        &[
            ICONST_3,
            INVOKESTATIC,
            hi(m),
            lo(m),
            DUP,
            ICONST_1,
            ICONST_3,
            BASTORE,
            ICONST_2,
            INVOKESTATIC,
            hi(s),
            lo(s),
            IRETURN,
        ],
    );
    let bytes = a.build();
    assert!(Class::load(&bytes, &natives, &["test"]).is_err());
    let c = Class::load(&bytes, &natives, &["test", "net"]).unwrap();
    let mut host = Host { sent: Vec::new() };
    let mut vm = Vm::new(c.clone(), Limits::default(), &mut host).unwrap();
    assert_eq!(
        vm.invoke(&mut host, c.method("f").unwrap(), &[]),
        Ok(Some(2))
    );
    assert_eq!(host.sent, vec![vec![0, 3]]);
    assert_eq!(vm.heap_used(), 0);
}

#[test]
fn fuel_covers_straight_line_code() {
    // 50 × (x = x + 1): 50 ops without a back-edge.
    let mut code = Vec::new();
    for _ in 0..50 {
        code.extend_from_slice(&[ILOAD_0, ICONST_1, IADD, ISTORE_0]);
    }
    code.extend_from_slice(&[ILOAD_0, IRETURN]);
    let mut a = Asm::new("T");
    a.default_init();
    a.method(PS, "f", "(I)I", 2, 1, &code);
    let bytes = a.build();
    let c = Class::load(&bytes, &test_natives::<()>(), &[]).unwrap();
    let tight = Limits {
        fuel: 10,
        ..Limits::default()
    };
    let mut vm = Vm::new(c.clone(), tight, &mut ()).unwrap();
    assert_eq!(
        vm.invoke(&mut (), c.method("f").unwrap(), &[0]),
        Err(Fault::OutOfFuel)
    );
    let mut vm = Vm::new(c.clone(), Limits::default(), &mut ()).unwrap();
    assert_eq!(
        vm.invoke(&mut (), c.method("f").unwrap(), &[0]),
        Ok(Some(50))
    );
    assert!(vm.last_fuel_used() >= 50, "{}", vm.last_fuel_used());
}

#[test]
fn native_arguments_are_read_where_the_bytecode_reads_them() {
    // A native call reads its arguments straight from locals, constants and
    // fields: a field read before a call that changes the field must still
    // pass the old value, and a native with many arguments gets them all.
    fn sum10(_: &mut (), _: &mut jive::NativeCtx<'_>, a: &[i32]) -> jive::NativeResult {
        Ok(a.iter().enumerate().map(|(i, &x)| x * (i as i32 + 1)).sum())
    }
    let mut natives = test_natives::<()>();
    natives.register("many", "unet/sle/Natives", "sum10", "(IIIIIIIIII)I", sum10);
    let mut a = Asm::new("T");
    a.default_init();
    a.field(PS, "A", "[B");
    let fa = a.fref("T", "A", "[B");
    let sum = a.mref("unet/sle/Natives", "sum", "([BII)I");
    let fill = a.mref("unet/sle/Natives", "fill", "([BII)V");
    let swap = a.mref("T", "swap", "()I");
    let s10 = a.mref("unet/sle/Natives", "sum10", "(IIIIIIIIII)I");
    // init(): A = new byte[4]; fill(A, 1, 4)
    a.method(
        PS,
        "init",
        "()V",
        3,
        0,
        &[
            ICONST_4,
            NEWARRAY,
            T_BYTE,
            PUTSTATIC,
            hi(fa),
            lo(fa),
            GETSTATIC,
            hi(fa),
            lo(fa),
            ICONST_1,
            ICONST_4,
            INVOKESTATIC,
            hi(fill),
            lo(fill),
            RETURN,
        ],
    );
    // swap(): A = new byte[8]; return 4
    a.method(
        PS,
        "swap",
        "()I",
        1,
        0,
        &[
            BIPUSH,
            8,
            NEWARRAY,
            T_BYTE,
            PUTSTATIC,
            hi(fa),
            lo(fa),
            ICONST_4,
            IRETURN,
        ],
    );
    // old(): sum(A, 0, swap()) -- the array read before swap() ran.
    a.method(
        PS,
        "old",
        "()I",
        3,
        0,
        &[
            GETSTATIC,
            hi(fa),
            lo(fa),
            ICONST_0,
            INVOKESTATIC,
            hi(swap),
            lo(swap),
            INVOKESTATIC,
            hi(sum),
            lo(sum),
            IRETURN,
        ],
    );
    // cur(n): sum(A, 0, n)
    a.method(
        PS,
        "cur",
        "(I)I",
        3,
        1,
        &[
            GETSTATIC,
            hi(fa),
            lo(fa),
            ICONST_0,
            ILOAD_0,
            INVOKESTATIC,
            hi(sum),
            lo(sum),
            IRETURN,
        ],
    );
    // ten(x): sum10(x, 1, x, 2, x, 3, x, 4, x, 5)
    let mut code = Vec::new();
    for k in [ICONST_1, ICONST_2, ICONST_3, ICONST_4, ICONST_5] {
        code.extend_from_slice(&[ILOAD_0, k]);
    }
    code.extend_from_slice(&[INVOKESTATIC, hi(s10), lo(s10), IRETURN]);
    a.method(PS, "ten", "(I)I", 10, 1, &code);
    let c = Class::load(&a.build(), &natives, &["test", "many"]).unwrap();
    let reads_field = |m: &str| {
        c.decoded(c.method(m).unwrap())
            .ops
            .iter()
            .any(|o| matches!(o, jive::decode::Op::GetF { .. }))
    };
    // cur's field read is done by the call; old's must stay before swap().
    assert!(!reads_field("cur"));
    assert!(reads_field("old"));
    let mut vm = Vm::new(c.clone(), Limits::default(), &mut ()).unwrap();
    call(&mut vm, &c, "init", &[]).unwrap();
    assert_eq!(call(&mut vm, &c, "cur", &[4]), Ok(Some(4)));
    assert_eq!(call(&mut vm, &c, "old", &[]), Ok(Some(4)));
    // swap() replaced A with zeros.
    assert_eq!(call(&mut vm, &c, "cur", &[4]), Ok(Some(0)));
    assert!(matches!(
        call(&mut vm, &c, "cur", &[9]),
        Err(Fault::ArrayIndexOutOfBounds { .. })
    ));
    let want: i32 = [7, 1, 7, 2, 7, 3, 7, 4, 7, 5]
        .iter()
        .enumerate()
        .map(|(i, x)| x * (i as i32 + 1))
        .sum();
    assert_eq!(call(&mut vm, &c, "ten", &[7]), Ok(Some(want)));
}

#[test]
fn checkpoint_is_passed_once_and_changes_nothing_else() {
    // The hook runs once in an invocation that uses more fuel than the
    // checkpoint, never in one that uses less; results, fuel used and the
    // point where the budget runs out are those of a VM without one.
    fn hook(n: &mut u32) {
        *n += 1;
    }
    let c = Class::load(BENCH8, &test_natives::<u32>(), &["test"]).expect("load");
    let limits = Limits {
        fuel: 1_000_000,
        ..Limits::default()
    };
    let mut n = 0u32;
    let mut plain = Vm::new(c.clone(), limits, &mut n).unwrap();
    let mut vm = Vm::new(c.clone(), limits, &mut n).unwrap();
    for (m, arg, want) in [("fib", 15, 610), ("nat", 5, 26), ("sortTest", 300, 301)] {
        let m = c.method(m).unwrap();
        assert_eq!(plain.invoke(&mut n, m, &[arg]), Ok(Some(want)));
        let used = plain.last_fuel_used();
        assert!(used > 10, "{used}");
        for (at, calls) in [
            (1, 1),
            (used / 2, 1),
            (used - 1, 1),
            (used, 0),
            (used + 5, 0),
        ] {
            vm.set_checkpoint(at, hook);
            let mut n = 0u32;
            assert_eq!(vm.invoke(&mut n, m, &[arg]), Ok(Some(want)));
            assert_eq!(vm.last_fuel_used(), used, "checkpoint at {at}");
            assert_eq!(n, calls, "hook calls with the checkpoint at {at} of {used}");
        }
    }
    let forever = c.method("forever").unwrap();
    vm.set_checkpoint(1_000, hook);
    let mut n = 0u32;
    assert_eq!(vm.invoke(&mut n, forever, &[]), Err(Fault::OutOfFuel));
    assert_eq!(vm.last_fuel_used(), 1_000_000);
    assert_eq!(n, 1);
    vm.clear_checkpoint();
    assert_eq!(vm.invoke(&mut n, forever, &[]), Err(Fault::OutOfFuel));
    assert_eq!(n, 1);
}
