//! Arbitrary bytes as a JIVE class; when one loads and constructs, run
//! every int-argument method on an interpreted and on a compiled VM of the
//! class and require the same result or fault, fuel used and fault site
//! (JIVE's compiler against its interpreter, as `crates/jive/tests/jit.rs`
//! does on chosen classes).
//!
//! Besides the `test` natives, the classes may call natives that compiled
//! code performs itself in their common case: `wget`/`wput` (window copies,
//! `jive::Intrinsic`) over a window each VM's host lends, and `emit` (a
//! sink, `Natives::register_sink`). The windows and what was emitted must
//! agree too. Seeds calling them: `fuzz/seeds/` (see CONTRIBUTING.md).
#![no_main]

use jive::{test_natives, Class, Intrinsic, Limits, NativeCtx, NativeResult, Natives, Vm};
use libfuzzer_sys::fuzz_target;

mod int_params;
use int_params::int_params;

/// A VM's host: its window and what `emit` handed over.
struct Host {
    window: Vec<u8>,
    emitted: Vec<(i32, Vec<u8>)>,
}

fn w_copy(h: &mut Host, cx: &mut NativeCtx<'_>, a: &[i32], to_array: bool) -> NativeResult {
    let alen = cx.array_len(a[0])? as i64;
    let (aoff, woff, len) = (a[1] as i64, a[2] as i64, a[3] as i64);
    if aoff < 0 || woff < 0 || len < 0 || aoff + len > alen || woff + len > h.window.len() as i64 {
        return Err(Box::new(jive::Fault::Native(format!("range {a:?}"))));
    }
    cx.charge(1 + len as u64 / 64)?;
    let (aoff, woff, len) = (aoff as usize, woff as usize, len as usize);
    let arr = &mut cx.bytes_mut(a[0])?[aoff..aoff + len];
    let win = &mut h.window[woff..woff + len];
    for (x, w) in arr.iter_mut().zip(win.iter_mut()) {
        if to_array {
            *x = *w as i8;
        } else {
            *w = *x as u8;
        }
    }
    Ok(0)
}

fn w_get(h: &mut Host, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    w_copy(h, cx, a, true)
}

fn w_put(h: &mut Host, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    w_copy(h, cx, a, false)
}

/// `emit(a, aoff, x, len)`: faults on a negative `x` or a bad range, else
/// hands `a[aoff..aoff + len]` over with `x`.
fn n_emit(h: &mut Host, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let alen = cx.array_len(a[0])? as i64;
    let (aoff, x, len) = (a[1] as i64, a[2], a[3] as i64);
    if x < 0 || aoff < 0 || len < 0 || aoff + len > alen {
        return Err(Box::new(jive::Fault::Native(format!("emit {a:?}"))));
    }
    cx.charge(1 + len as u64 / 64)?;
    let b = &cx.bytes(a[0])?[aoff as usize..(aoff + len) as usize];
    h.emitted.push((x, b.iter().map(|&v| v as u8).collect()));
    Ok(0)
}

/// `emit`'s sink: its common case for even `x`, declining odd ones.
fn s_emit(h: &mut Host, bytes: &[u8], x: i32) -> bool {
    if x < 0 || x % 2 == 1 {
        return false;
    }
    h.emitted.push((x, bytes.to_vec()));
    true
}

fn natives() -> Natives<Host> {
    let mut n = test_natives::<Host>();
    let c = jive::NATIVES_CLASS;
    n.register_intrinsic("test", c, "wget", w_get, Intrinsic::WindowToArray)
        .register_intrinsic("test", c, "wput", w_put, Intrinsic::ArrayToWindow)
        .register_sink("test", c, "emit", n_emit, s_emit);
    n
}

fuzz_target!(|data: &[u8]| {
    let Ok(class) = Class::load(data, &natives(), &["test"]) else {
        return;
    };
    let limits = Limits {
        fuel: 100_000,
        max_depth: 64,
        heap_quota: 64 * 1024,
    };
    let host = || Host {
        window: (0..256u32).map(|i| (i * 7 + 1) as u8).collect(),
        emitted: Vec::new(),
    };
    let (mut h1, mut h2) = (host(), host());
    let (Ok(mut interp), Ok(mut jit)) = (
        Vm::new(class.clone(), limits, &mut h1),
        Vm::new(class.clone(), limits, &mut h2),
    ) else {
        return;
    };
    if jit.compile().is_err() {
        // The compiler may refuse a class (the machine is unsupported);
        // it must not refuse one that loaded on this target.
        panic!("a loaded class did not compile");
    }
    let Ok(file) = jive::classfile::ClassFile::parse(data) else {
        return;
    };
    for info in &file.methods {
        let Some(m) = class.method(&info.name) else {
            continue;
        };
        let Some(n) = int_params(class.method_descriptor(m)) else {
            continue;
        };
        for seed in [0i32, 1, -1, i32::MIN, i32::MAX, 200] {
            let args: Vec<i32> = (0..n).map(|i| seed.wrapping_add(i as i32)).collect();
            // Every other seed runs without a window (the natives fault).
            let lend = seed != 1;
            let mut out = Vec::new();
            for (vm, h) in [(&mut interp, &mut h1), (&mut jit, &mut h2)] {
                if lend {
                    // SAFETY: the host's window outlives the invocation and
                    // is not the VM's heap.
                    unsafe { vm.set_window(h.window.as_mut_ptr(), h.window.len()) };
                }
                let r = vm.invoke(h, m, &args);
                vm.clear_window();
                out.push((r, vm.last_fuel_used(), vm.last_fault_site()));
            }
            assert_eq!(out[0], out[1], "{}{:?}", info.name, args);
            assert!(
                h1.window == h2.window,
                "window after {}{:?}",
                info.name,
                args
            );
            assert_eq!(h1.emitted, h2.emitted, "emitted by {}{:?}", info.name, args);
        }
    }
});
