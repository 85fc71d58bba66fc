//! Natives whose common case compiled code performs itself (window
//! copies, sinks, leaves), and their host: what the compiler's fast cases are
//! compared against, in `tests/jit.rs` and in the `jive_jit` fuzz target
//! (which includes this file). Depends on `jive` only.

use jive::{Fault, Intrinsic, NativeCtx, NativeResult, Natives, NATIVES_CLASS};

/// A VM's host: the memory lent as its window, what `emit` handed over,
/// and how often the natives and the sink ran.
pub struct FastHost {
    pub window: Vec<u8>,
    /// Whether the window is lent (the copy natives fault when not).
    pub bound: bool,
    pub emitted: Vec<(i32, Vec<u8>)>,
    pub native_calls: u32,
    pub sink_calls: u32,
    /// What `take` hands out (from the end), what `note` and `ints` were
    /// given, and how often a leaf or the `int[]` sink did the work.
    pub queue: Vec<i32>,
    pub noted: Vec<i32>,
    pub ints: Vec<(i32, i32, Vec<i32>)>,
    pub leaf_calls: u32,
}

impl FastHost {
    /// A 256-byte window of a known pattern, not lent, nothing emitted.
    pub fn new() -> FastHost {
        FastHost {
            window: (0..256u32).map(|i| (i * 7 + 1) as u8).collect(),
            bound: false,
            emitted: Vec::new(),
            native_calls: 0,
            sink_calls: 0,
            queue: (0..600).map(|i| i * 3).collect(),
            noted: Vec::new(),
            ints: Vec::new(),
            leaf_calls: 0,
        }
    }
}

/// Register in `domain`: `wget` and `wput` (`([BIII)V`, window copies as
/// [`Intrinsic`]s), `emit` (`([BIII)V`, with a sink) and `emit0`
/// (`([BII)V`, with the same sink over a prefix of the array), `take`
/// (`(II)I`) and `note` (`(I)V`) with leaves, and `ints` (`([III)V`) with
/// an `int[]` sink charging 2 units.
pub fn register(n: &mut Natives<FastHost>, domain: &str) {
    n.register_intrinsic(
        domain,
        NATIVES_CLASS,
        "wget",
        w_get,
        Intrinsic::WindowToArray,
    )
    .register_intrinsic(
        domain,
        NATIVES_CLASS,
        "wput",
        w_put,
        Intrinsic::ArrayToWindow,
    )
    .register_sink(domain, NATIVES_CLASS, "emit", n_emit, s_emit)
    .register_sink_prefix(domain, NATIVES_CLASS, "emit0", n_emit0, s_emit)
    .register_leaf(domain, NATIVES_CLASS, "take", "(II)I", n_take, l_take)
    .register_leaf(domain, NATIVES_CLASS, "note", "(I)V", n_note, l_note)
    .register_ints_sink(domain, NATIVES_CLASS, "ints", n_ints, s_ints, 2);
}

/// The natives behind the intrinsics: what compiled code does inline in
/// their common case, and the faults otherwise.
fn w_copy(h: &mut FastHost, cx: &mut NativeCtx<'_>, a: &[i32], to_array: bool) -> NativeResult {
    h.native_calls += 1;
    if !h.bound {
        return Err(Box::new(jive::Fault::Native("no window".into())));
    }
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

fn w_get(h: &mut FastHost, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    w_copy(h, cx, a, true)
}

fn w_put(h: &mut FastHost, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    w_copy(h, cx, a, false)
}

/// `emit(a, aoff, x, len)`, the native behind the sink: faults on a
/// negative `x` or a bad range, else charges `1 + len / 64` and hands
/// `a[aoff..aoff + len]` over with `x`.
fn n_emit(h: &mut FastHost, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    h.native_calls += 1;
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

/// `emit0(a, x, len)`: `emit(a, 0, x, len)`, behind a prefix sink.
fn n_emit0(h: &mut FastHost, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    n_emit(h, cx, &[a[0], 0, a[1], a[2]])
}

/// The sink: the native's common case for even `x`; declines odd ones
/// (and negative ones, which the native faults on).
fn s_emit(h: &mut FastHost, bytes: &[u8], x: i32) -> bool {
    if x < 0 || x % 2 == 1 {
        return false;
    }
    h.sink_calls += 1;
    h.emitted.push((x, bytes.to_vec()));
    true
}

/// `take(x, y)`: faults on a negative `x`, else the next queued value (-1
/// when none is left) plus `y`.
fn n_take(h: &mut FastHost, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    h.native_calls += 1;
    if a[0] < 0 {
        return Err(Box::new(Fault::Native(format!("take {a:?}"))));
    }
    Ok(h.queue.pop().unwrap_or(-1).wrapping_add(a[1]))
}

/// `take`'s leaf: its common case for even `x`; declines odd ones (and
/// negative ones, which the native faults on).
fn l_take(h: &mut FastHost, a: [i32; 3]) -> Option<i32> {
    if a[0] < 0 || a[0] % 2 == 1 {
        return None;
    }
    h.leaf_calls += 1;
    Some(h.queue.pop().unwrap_or(-1).wrapping_add(a[1]))
}

/// `note(x)`: faults on a negative `x`, else keeps it.
fn n_note(h: &mut FastHost, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    h.native_calls += 1;
    if a[0] < 0 {
        return Err(Box::new(Fault::Native(format!("note {a:?}"))));
    }
    h.noted.push(a[0]);
    Ok(0)
}

/// `note`'s leaf, for multiples of 4.
fn l_note(h: &mut FastHost, a: [i32; 3]) -> Option<i32> {
    if a[0] < 0 || a[0] % 4 != 0 {
        return None;
    }
    h.leaf_calls += 1;
    h.noted.push(a[0]);
    Some(0)
}

/// `ints(a, x, y)`: faults on a null `a` or a negative `x`, else charges
/// one unit more than the call and keeps `x`, `y` and `a`'s elements.
fn n_ints(h: &mut FastHost, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    h.native_calls += 1;
    let v = cx.ints(a[0])?.to_vec();
    if a[1] < 0 {
        return Err(Box::new(Fault::Native(format!("ints {a:?}"))));
    }
    cx.charge(1)?;
    h.ints.push((a[1], a[2], v));
    Ok(0)
}

/// `ints`'s sink, for even `x`.
fn s_ints(h: &mut FastHost, a: &[i32], x: i32, y: i32) -> bool {
    if x < 0 || x % 2 == 1 {
        return false;
    }
    h.sink_calls += 1;
    h.ints.push((x, y, a.to_vec()));
    true
}
