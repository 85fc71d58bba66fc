//! The `spine` domain: the natives of class `unet/spine/Spine` that
//! extensions call (their plain-Java twins are in the applet SDK,
//! `unet/spine/Spine.java`).
//!
//! Every handle a native takes is checked on every use: a message handle
//! is valid only during the invocation it was given to, a buffer handle
//! only while the invocation holds the buffer (its message's bulk buffer,
//! or one its extension keeps). A forged or stale handle, or an array
//! range outside its array, is a fault of the invocation (counted, the
//! invocation stopped); a full queue or pool, a bad destination or a
//! limit is an error code (negative) the handler may act on.
//!
//! `addHandler` is the one non-ephemeral native: only an initialiser may
//! call it. `timer` is ephemeral: an initialiser or a handler sets one
//! (`timers.rs`).

use jive::{Fault, NativeCtx, NativeResult, Natives};
use unet_abi::spine::{AM_ARGS_MAX, SPINE_FIRST_EXT_HANDLER};

use crate::spine::events::Tag;
use crate::spine::framebuffer::E_RANGE;
use crate::spine::msgs::KeepError;
use crate::spine::rt::{reply_dest, Rt, Wanted, E_LIMIT, HANDLERS_PER_EXT, NO_MSG};
use crate::spine::tables::PARTS;
use crate::spine::timers::Timer;

/// The domain's name, granted to every extension.
pub(crate) const DOMAIN: &str = "spine";
/// The class that holds the natives.
pub(crate) const CLASS: &str = "unet/spine/Spine";

fn fault(what: &str) -> Box<Fault> {
    Box::new(Fault::Native(what.to_string()))
}

/// The running invocation's message, if `h` is it.
fn msg(rt: &mut Rt, h: i32) -> Result<&crate::spine::msgs::Msg, Box<Fault>> {
    let h = h as u32;
    if h != rt.cur.msg || h == NO_MSG {
        rt.bad_handles += 1;
        return Err(fault("not the message of this invocation"));
    }
    rt.msgs
        .get(h)
        .ok_or_else(|| fault("not the message of this invocation"))
}

/// [`msg`] without counting a bad handle: `None` for one (the leaves'
/// check; the native they fall back to counts it and faults).
fn msg_leaf(rt: &Rt, h: i32) -> Option<&crate::spine::msgs::Msg> {
    let h = h as u32;
    if h != rt.cur.msg || h == NO_MSG {
        return None;
    }
    rt.msgs.get(h)
}

/// Check buffer handle `b` against what the invocation holds.
fn held(rt: &mut Rt, b: i32) -> Result<u32, Box<Fault>> {
    if b < 0 || !rt.holds(b as u32) {
        rt.bad_handles += 1;
        return Err(fault("not a buffer this invocation holds"));
    }
    Ok(b as u32)
}

/// `a[off..off + len]` of a `byte[]` argument, checked.
fn range(cx: &NativeCtx<'_>, a: i32, off: i32, len: i32) -> Result<(usize, usize), Box<Fault>> {
    let n = cx.bytes(a)?.len();
    if off < 0 || len < 0 || off as usize + len as usize > n {
        return Err(Box::new(Fault::ArrayIndexOutOfBounds {
            index: off.saturating_add(len),
            length: n as i32,
        }));
    }
    Ok((off as usize, len as usize))
}

fn copy_charge(cx: &mut NativeCtx<'_>, len: usize) -> Result<(), Box<Fault>> {
    cx.charge(1 + len as u64 / 64)?;
    Ok(())
}

fn add_handler(rt: &mut Rt, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let (method, number, context) = (a[0], a[1], a[2]);
    let limit = rt.handler_limit;
    let Some(wanted) = rt.installing.as_mut() else {
        return Err(fault("addHandler is for the initialiser only"));
    };
    let refuse = |rt: &mut Rt, why: String| {
        if rt.install_error.is_none() {
            rt.install_error = Some(why);
        }
        Ok(0)
    };
    if number < i32::from(SPINE_FIRST_EXT_HANDLER) || number >= i32::from(limit) {
        let why = format!(
            "handler number {number} is out of range ({SPINE_FIRST_EXT_HANDLER}..={})",
            limit - 1
        );
        return refuse(rt, why);
    }
    let number = number as u16;
    if wanted.iter().any(|w| w.number == number) || rt.handlers[number as usize].is_some() {
        return refuse(rt, format!("handler number {number} is taken"));
    }
    if wanted.len() >= HANDLERS_PER_EXT {
        return refuse(
            rt,
            format!("more than {HANDLERS_PER_EXT} handlers in one extension"),
        );
    }
    wanted.push(Wanted {
        method: method as u32,
        number,
        context,
    });
    Ok(1)
}

fn args_length(rt: &mut Rt, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    Ok(i32::from(msg(rt, a[0])?.hdr.args_len))
}

fn arg_byte(rt: &mut Rt, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let m = msg(rt, a[0])?;
    let args = m.args();
    usize::try_from(a[1])
        .ok()
        .and_then(|i| args.get(i))
        .map(|&b| i32::from(b))
        .ok_or_else(|| fault("argument byte out of range"))
}

fn arg_int(rt: &mut Rt, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let m = msg(rt, a[0])?;
    let args = m.args();
    usize::try_from(a[1])
        .ok()
        .and_then(|o| args.get(o..o.checked_add(4)?))
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| fault("argument int out of range"))
}

fn read_args(rt: &mut Rt, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let (off, len) = range(cx, a[2], a[3], a[4])?;
    let m = msg(rt, a[0])?;
    let args = m.args();
    let from = usize::try_from(a[1]).map_err(|_| fault("negative argument offset"))?;
    let src = args.get(from..).unwrap_or(&[]);
    let n = src.len().min(len);
    copy_charge(cx, n)?;
    let dst = cx.bytes_mut(a[2])?;
    for (d, s) in dst[off..off + n].iter_mut().zip(src) {
        *d = *s as i8;
    }
    Ok(n as i32)
}

fn source(rt: &mut Rt, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let m = msg(rt, a[0])?;
    Ok(reply_dest(m.hdr.src_kind, m.hdr.src) as i32)
}

fn bulk(rt: &mut Rt, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    Ok(msg(rt, a[0])?.bulk.map_or(-1, |b| b as i32))
}

fn buffer_length(rt: &mut Rt, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let b = held(rt, a[0])?;
    Ok(rt.bufs.data(b).map_or(0, |d| d.len() as i32))
}

// The leaves of `source`, `bulk` and `bufferLength` (see
// `jive::Natives::register_leaf`): what the native returns for a good
// handle, and `None`, having done nothing, for a bad one, whose fault and
// count the native then makes.

fn l_source(rt: &mut Rt, a: [i32; 3]) -> Option<i32> {
    let m = msg_leaf(rt, a[0])?;
    Some(reply_dest(m.hdr.src_kind, m.hdr.src) as i32)
}

fn l_bulk(rt: &mut Rt, a: [i32; 3]) -> Option<i32> {
    Some(msg_leaf(rt, a[0])?.bulk.map_or(-1, |b| b as i32))
}

fn l_buffer_length(rt: &mut Rt, a: [i32; 3]) -> Option<i32> {
    let b = a[0];
    if b < 0 || !rt.holds(b as u32) {
        return None;
    }
    Some(rt.bufs.data(b as u32).map_or(0, |d| d.len() as i32))
}

fn read_buffer(rt: &mut Rt, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let b = held(rt, a[0])?;
    let (off, len) = range(cx, a[2], a[3], a[4])?;
    let from = usize::try_from(a[1]).map_err(|_| fault("negative buffer offset"))?;
    let data = rt.bufs.data(b).unwrap_or(&[]);
    let src = data.get(from..).unwrap_or(&[]);
    let n = src.len().min(len);
    copy_charge(cx, n)?;
    let dst = cx.bytes_mut(a[2])?;
    for (d, s) in dst[off..off + n].iter_mut().zip(src) {
        *d = *s as i8;
    }
    Ok(n as i32)
}

fn write_buffer(rt: &mut Rt, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let b = held(rt, a[0])?;
    let (off, len) = range(cx, a[2], a[3], a[4])?;
    let from = usize::try_from(a[1]).map_err(|_| fault("negative buffer offset"))?;
    let src = cx.bytes(a[2])?;
    let data = rt.bufs.data_mut(b).unwrap_or(&mut []);
    let dst = data.get_mut(from..).unwrap_or(&mut []);
    let n = dst.len().min(len);
    for (d, s) in dst[..n].iter_mut().zip(&src[off..off + n]) {
        *d = *s as u8;
    }
    copy_charge(cx, n)?;
    Ok(n as i32)
}

fn keep(rt: &mut Rt, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let b = held(rt, a[0])?;
    let inv = rt.cur.inv;
    let Some(k) = rt.keeps.get_mut(rt.cur.slot as usize) else {
        return Err(fault("no extension runs"));
    };
    match k.keep(&mut rt.bufs, b, inv) {
        Ok(()) => Ok(0),
        Err(KeepError::Limit) => {
            rt.keeps_refused += 1;
            Ok(E_LIMIT)
        }
        Err(KeepError::BadHandle) => Err(fault("not a live buffer")),
    }
}

fn release(rt: &mut Rt, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let slot = rt.cur.slot as usize;
    let ok = a[0] >= 0
        && rt
            .keeps
            .get_mut(slot)
            .is_some_and(|k| k.release(&mut rt.bufs, a[0] as u32));
    if !ok {
        rt.bad_handles += 1;
        return Err(fault("not a buffer this extension keeps"));
    }
    Ok(0)
}

/// Where the arguments of a send are in the array (at most 240 bytes),
/// charged; `None` if they are too long. The message copies them straight
/// from the array.
fn send_args(
    cx: &mut NativeCtx<'_>,
    arr: i32,
    off: i32,
    len: i32,
) -> Result<Option<(usize, usize)>, Box<Fault>> {
    let (off, len) = range(cx, arr, off, len)?;
    if len > AM_ARGS_MAX {
        return Ok(None);
    }
    copy_charge(cx, len)?;
    Ok(Some((off, off + len)))
}

fn handler_number(h: i32) -> Option<u16> {
    u16::try_from(h).ok()
}

fn send(rt: &mut Rt, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let Some((from, to)) = send_args(cx, a[2], a[3], a[4])? else {
        return Ok(E_LIMIT);
    };
    let Some(h) = handler_number(a[1]) else {
        return Ok(crate::spine::rt::E_BAD_DEST);
    };
    Ok(rt.send(a[0] as u32, h, &cx.bytes(a[2])?[from..to], None))
}

fn send_bulk(rt: &mut Rt, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let b = held(rt, a[5])?;
    let Some((from, to)) = send_args(cx, a[2], a[3], a[4])? else {
        return Ok(E_LIMIT);
    };
    let Some(h) = handler_number(a[1]) else {
        return Ok(crate::spine::rt::E_BAD_DEST);
    };
    let args = &cx.bytes(a[2])?[from..to];
    // The new message holds its own reference.
    rt.bufs.retain(b);
    Ok(rt.send(a[0] as u32, h, args, Some(b)))
}

fn reply(rt: &mut Rt, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let m = msg(rt, a[0])?;
    let dest = reply_dest(m.hdr.src_kind, m.hdr.src) as i32;
    send(rt, cx, &[dest, a[1], a[2], a[3], a[4]])
}

/// `timer(micros, method, context)`: run `method` with `context` and an
/// empty message in `micros` (0, or `E_LIMIT`).
fn timer(rt: &mut Rt, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    if rt.cur.slot == u32::MAX {
        return Err(fault("no extension runs"));
    }
    let t = Timer {
        slot: rt.cur.slot,
        ext_id: rt.cur.ext_id,
        method: a[1] as u32,
        context: a[2],
        // Caused by the event running now; a message of its own.
        tag: Tag {
            cause: rt.queue.current().cause,
            msg: 0,
        },
    };
    Ok(rt.timers.set(a[0], t))
}

/// `table(n, part)`: part `part` of the current version of the running
/// extension's route table `n` (`tables.rs`), null when there is none; a
/// part that does not exist is a fault.
fn table(rt: &mut Rt, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let Some(part) = usize::try_from(a[1]).ok().filter(|&p| p < PARTS) else {
        return Err(fault(&format!(
            "no table part {} (0 to {})",
            a[1],
            PARTS - 1
        )));
    };
    Ok(rt.tables.part(rt.cur.slot as usize, a[0], part))
}

/// `fbWrite(fb, fbOffset, buf, bufOffset, len)`: copy `len` bytes of
/// held buffer `buf` from `bufOffset` into the running extension's
/// framebuffer `fb` at `fbOffset` (`framebuffer.rs`): `len`, or
/// `E_RANGE` (counted, nothing written) for a framebuffer it does not
/// have or a range outside the framebuffer or the buffer. A buffer it
/// does not hold is a fault, as for every native.
fn fb_write(rt: &mut Rt, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let b = held(rt, a[2])?;
    let slot = rt.cur.slot as usize;
    let Some(fb) = rt.fbs.get_mut(slot, a[0]) else {
        rt.fbs.no_such += 1;
        return Ok(E_RANGE);
    };
    let data = rt.bufs.data(b).unwrap_or(&[]);
    let src = usize::try_from(a[3])
        .ok()
        .zip(usize::try_from(a[4]).ok())
        .and_then(|(o, n)| data.get(o..o.checked_add(n)?));
    let Some(src) = src else {
        return Ok(fb.refuse());
    };
    copy_charge(cx, src.len())?;
    Ok(fb.write(a[1], src))
}

/// `fbFill(fb, fbOffset, len, value)`: set `len` bytes of the running
/// extension's framebuffer `fb` from `fbOffset` to pixel `value`
/// (`framebuffer.rs`): `len`, or `E_RANGE` (counted, nothing written).
fn fb_fill(rt: &mut Rt, cx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let slot = rt.cur.slot as usize;
    let Some(fb) = rt.fbs.get_mut(slot, a[0]) else {
        rt.fbs.no_such += 1;
        return Ok(E_RANGE);
    };
    let r = fb.fill(a[1], a[2], a[3]);
    if r > 0 {
        copy_charge(cx, r as usize)?;
    }
    Ok(r)
}

/// `fbWidth(fb)`, `fbHeight(fb)`: the running extension's framebuffer
/// `fb`'s pixels a row and rows, or `E_RANGE` when it has no such
/// framebuffer.
fn fb_width(rt: &mut Rt, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let slot = rt.cur.slot as usize;
    Ok(rt
        .fbs
        .get_mut(slot, a[0])
        .map_or(E_RANGE, |f| f.width as i32))
}

fn fb_height(rt: &mut Rt, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let slot = rt.cur.slot as usize;
    Ok(rt
        .fbs
        .get_mut(slot, a[0])
        .map_or(E_RANGE, |f| f.height as i32))
}

fn now_micros(rt: &mut Rt, _: &mut NativeCtx<'_>, _: &[i32]) -> NativeResult {
    Ok(rt.now_micros())
}

/// The `spine` domain.
pub(crate) fn natives() -> Natives<Rt> {
    let mut n = Natives::new();
    n.register(
        DOMAIN,
        CLASS,
        "addHandler",
        "(Ljava/lang/String;II)Z",
        add_handler,
    );
    for (name, desc, f) in [
        ("argsLength", "(I)I", args_length as jive::NativeFn<Rt>),
        ("argByte", "(II)I", arg_byte),
        ("argInt", "(II)I", arg_int),
        ("readArgs", "(II[BII)I", read_args),
        ("readBuffer", "(II[BII)I", read_buffer),
        ("writeBuffer", "(II[BII)I", write_buffer),
        ("keep", "(I)I", keep),
        ("release", "(I)V", release),
        ("send", "(II[BII)I", send),
        ("sendBulk", "(II[BIII)I", send_bulk),
        ("reply", "(II[BII)I", reply),
        ("nowMicros", "()I", now_micros),
        ("timer", "(ILjava/lang/String;I)I", timer),
        ("table", "(II)[I", table),
        ("fbWrite", "(IIIII)I", fb_write),
        ("fbFill", "(IIII)I", fb_fill),
        ("fbWidth", "(I)I", fb_width),
        ("fbHeight", "(I)I", fb_height),
    ] {
        n.register_ephemeral(DOMAIN, CLASS, name, desc, f);
    }
    // On every frame's path: compiled code calls their leaves directly.
    n.register_ephemeral_leaf(DOMAIN, CLASS, "source", "(I)I", source, l_source)
        .register_ephemeral_leaf(DOMAIN, CLASS, "bulk", "(I)I", bulk, l_bulk)
        .register_ephemeral_leaf(
            DOMAIN,
            CLASS,
            "bufferLength",
            "(I)I",
            buffer_length,
            l_buffer_length,
        );
    n
}
