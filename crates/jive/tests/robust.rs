//! Robustness: randomly mutated class files never panic the loader, and
//! those that still load never panic the VM (faults only).
mod common;

use common::op::*;
use common::*;
use jive::{test_natives, Class, Limits, Vm};

const BENCH8: &[u8] = include_bytes!("data/bench8.class");
const BENCH25: &[u8] = include_bytes!("data/bench25.class");

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

fn exercise(bytes: &[u8]) -> (usize, usize) {
    let natives = test_natives::<()>();
    let Ok(c) = Class::load(bytes, &natives, &["test"]) else {
        return (0, 0);
    };
    let limits = Limits {
        fuel: 20_000,
        max_depth: 64,
        heap_quota: 64 << 10,
        max_time: None,
    };
    let Ok(mut vm) = Vm::new(c.clone(), limits, &mut ()) else {
        return (1, 0);
    };
    let mut runs = 0;
    for m in c.methods().collect::<Vec<_>>() {
        let n = c.method_descriptor(m).matches(['I', 'B', 'S', 'Z']).count();
        for arg in [0, 1, 7, -1, 1000] {
            let args = vec![arg; n];
            let _ = vm.invoke(&mut (), m, &args);
            runs += 1;
        }
    }
    (1, runs)
}

#[test]
fn mutated_classes_never_panic() {
    let mut rng = Lcg(0x5eed);
    let mut loaded = 0;
    let mut runs = 0;
    for base in [BENCH8, BENCH25] {
        for _ in 0..1500 {
            let mut b = base.to_vec();
            let k = 1 + rng.next() % 4;
            for _ in 0..k {
                let i = (rng.next() as usize) % b.len();
                b[i] = match rng.next() % 4 {
                    0 => rng.next() as u8,
                    1 => b[i].wrapping_add(1),
                    2 => b[i].wrapping_sub(1),
                    _ => 0xff,
                };
            }
            let (l, r) = exercise(&b);
            loaded += l;
            runs += r;
        }
    }
    // Many mutations hit code or constants and still load: the VM ran them.
    assert!(loaded > 100, "only {loaded} mutants loaded");
    assert!(runs > 1000, "only {runs} runs");
}

#[test]
fn fused_adds_and_fields() {
    let mut a = Asm::new("T");
    a.default_init();
    a.field(ACC_STATIC, "f", "I");
    let f = a.fref("T", "f", "I");
    a.method(
        PS,
        "set",
        "(I)V",
        1,
        1,
        &[ILOAD_0, PUTSTATIC, hi(f), lo(f), RETURN],
    );
    a.method(
        PS,
        "sum4",
        "(IIII)I",
        2,
        4,
        &[ILOAD_0, ILOAD_1, IADD, ILOAD_2, IADD, 29, IADD, IRETURN],
    );
    a.method(
        PS,
        "sum7",
        "(IIII)I",
        2,
        4,
        &[
            ILOAD_0, ILOAD_1, IADD, ILOAD_2, IADD, 29, IADD, ILOAD_0, IADD, ILOAD_1, IADD, ILOAD_2,
            IADD, IRETURN,
        ],
    );
    // (a+b) + ((a+b)+c): the dup'ed partial sum must not be fused away.
    a.method(
        PS,
        "dupsum",
        "(III)I",
        3,
        3,
        &[ILOAD_0, ILOAD_1, IADD, DUP, ILOAD_2, IADD, IADD, IRETURN],
    );
    a.method(
        PS,
        "ff",
        "()I",
        2,
        0,
        &[
            GETSTATIC,
            hi(f),
            lo(f),
            GETSTATIC,
            hi(f),
            lo(f),
            IADD,
            IRETURN,
        ],
    );
    a.method(
        PS,
        "lf",
        "(I)I",
        2,
        1,
        &[ILOAD_0, GETSTATIC, hi(f), lo(f), IADD, IRETURN],
    );
    a.method(
        PS,
        "fl",
        "(I)I",
        2,
        1,
        &[GETSTATIC, hi(f), lo(f), ILOAD_0, IADD, IRETURN],
    );
    a.method(
        PS,
        "fsub",
        "(I)I",
        2,
        1,
        &[GETSTATIC, hi(f), lo(f), ILOAD_0, ISUB, IRETURN],
    );
    a.method(
        PS,
        "karr",
        "(I)I",
        3,
        2,
        &[
            ICONST_3, NEWARRAY, T_INT, ASTORE_1, ALOAD_1, ICONST_2, ILOAD_0, IASTORE, ALOAD_1,
            ICONST_2, IALOAD, ALOAD_1, ICONST_1, IALOAD, IADD, IRETURN,
        ],
    );
    a.method(
        PS,
        "kbad",
        "()I",
        2,
        0,
        &[ICONST_2, NEWARRAY, T_INT, ICONST_5, IALOAD, IRETURN],
    );
    a.method(
        PS,
        "kbyte",
        "(I)I",
        3,
        2,
        &[
            ICONST_1, NEWARRAY, T_BYTE, ASTORE_1, ALOAD_1, ICONST_0, ILOAD_0, BASTORE, ALOAD_1,
            ICONST_0, BALOAD, IRETURN,
        ],
    );
    let c = Class::load(&a.build(), &test_natives::<()>(), &[]).unwrap();
    let mut vm = Vm::new(c.clone(), Limits::default(), &mut ()).unwrap();
    let mut call = |m: &str, args: &[i32]| vm.invoke(&mut (), c.method(m).unwrap(), args);
    call("set", &[5]).unwrap();
    assert_eq!(call("sum4", &[1, 10, 100, 1000]), Ok(Some(1111)));
    assert_eq!(call("sum4", &[i32::MAX, 1, 0, 0]), Ok(Some(i32::MIN)));
    assert_eq!(call("sum7", &[1, 10, 100, 1000]), Ok(Some(1222)));
    assert_eq!(call("dupsum", &[1, 10, 100]), Ok(Some(122)));
    assert_eq!(call("ff", &[]), Ok(Some(10)));
    assert_eq!(call("lf", &[3]), Ok(Some(8)));
    assert_eq!(call("fl", &[3]), Ok(Some(8)));
    assert_eq!(call("fsub", &[3]), Ok(Some(2)));
    assert_eq!(call("karr", &[42]), Ok(Some(42)));
    assert_eq!(
        call("kbad", &[]),
        Err(jive::Fault::ArrayIndexOutOfBounds {
            index: 5,
            length: 2
        })
    );
    assert_eq!(call("kbyte", &[0x180]), Ok(Some(-128)));
}

#[test]
fn division_by_constants() {
    let mut a = Asm::new("T");
    a.default_init();
    let divisors: [i32; 8] = [7, -7, 3, 1000003, 2, -1, 1, 65536];
    for (i, d) in divisors.iter().enumerate() {
        let k = a.int(*d);
        a.method(
            PS,
            &format!("d{i}"),
            "(I)I",
            2,
            1,
            &[ILOAD_0, LDC, lo(k), IDIV, IRETURN],
        );
        a.method(
            PS,
            &format!("r{i}"),
            "(I)I",
            2,
            1,
            &[ILOAD_0, LDC, lo(k), IREM, IRETURN],
        );
    }
    let c = Class::load(&a.build(), &test_natives::<()>(), &[]).unwrap();
    let mut vm = Vm::new(c.clone(), Limits::default(), &mut ()).unwrap();
    for (i, d) in divisors.iter().enumerate() {
        for n in [
            0,
            1,
            -1,
            6,
            7,
            8,
            -6,
            -7,
            -8,
            1_000_003,
            i32::MAX,
            i32::MIN,
            123_456_789,
        ] {
            let q = vm.invoke(&mut (), c.method(&format!("d{i}")).unwrap(), &[n]);
            let r = vm.invoke(&mut (), c.method(&format!("r{i}")).unwrap(), &[n]);
            assert_eq!(q, Ok(Some(n.wrapping_div(*d))), "{n} / {d}");
            assert_eq!(r, Ok(Some(n.wrapping_rem(*d))), "{n} % {d}");
        }
    }
}

#[test]
fn large_branchy_method_loads_quickly() {
    // 8000 conditional branches over 200 locals, all reachable: verification
    // work stays bounded.
    let mut code = Vec::new();
    for _ in 0..8000 {
        code.extend_from_slice(&[ILOAD_0, IFEQ, 0, 3]);
    }
    code.extend_from_slice(&[ICONST_0, IRETURN]);
    let mut a = Asm::new("T");
    a.default_init();
    a.method(PS, "f", "(I)I", 1, 200, &code);
    let t = std::time::Instant::now();
    let r = Class::load(&a.build(), &test_natives::<()>(), &[]);
    let dt = t.elapsed();
    assert!(r.is_ok(), "{r:?}");
    assert!(dt.as_secs() < 5, "{dt:?}");
    let c = r.unwrap();
    let mut vm = Vm::new(c.clone(), Limits::default(), &mut ()).unwrap();
    assert_eq!(
        vm.invoke(&mut (), c.method("f").unwrap(), &[1]),
        Ok(Some(0))
    );
}
