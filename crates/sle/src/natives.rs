//! The U-Net/SLE natives: each confined to the bound endpoint (see the
//! crate documentation for the table).

use std::ptr::NonNull;

use jive::subset::Elem;
use jive::{Fault, Intrinsic, NativeCtx, NativeResult, Natives, NATIVES_CLASS};
use unet_abi::copy::copy_bytes;
use unet_abi::{RecvDesc, INLINE_MAX, MAX_MESSAGE, MAX_RX_BUFFERS};

use crate::clock::ticks;
use crate::clock::Timers;
use crate::port::Port;
use crate::DOMAIN;

/// The host state natives receive: the endpoint of the running invocation.
pub struct SleHost {
    /// The endpoint bound to the running invocation: the host's own
    /// [`Port`], with nothing between (each native's first loads are its
    /// fields).
    ep: Option<NonNull<dyn Port>>,
    /// [`crate::Port::area`] of the bound endpoint (dangling while none is
    /// bound; natives check `ep` first).
    pub(crate) area_base: NonNull<u8>,
    /// [`ticks`] when the running invocation passed the VM's checkpoint
    /// (it is a long one), 0 before.
    pub(crate) long_since: u64,
    /// The endpoint's buffer area size and receive buffer size, read once
    /// at load: the natives check ranges against them without a call.
    pub(crate) area: u64,
    pub(crate) bufsize: u32,
    /// The applet's clock and timers (`now`, `setTimer`).
    pub(crate) timers: Timers,
}

/// The VM's checkpoint hook: the invocation has used more than the exact
/// timing threshold; note when.
pub(crate) fn passed_checkpoint(h: &mut SleHost) {
    h.long_since = ticks().max(1);
}

impl SleHost {
    /// A host for an endpoint with a buffer area of `area` bytes and
    /// receive buffers of `bufsize` bytes, with `timers`; nothing bound
    /// yet.
    pub(crate) fn new(area: u64, bufsize: u32, timers: Timers) -> SleHost {
        SleHost {
            ep: None,
            area_base: NonNull::dangling(),
            long_since: 0,
            area,
            bufsize,
            timers,
        }
    }

    /// Bind `ep` for one invocation (see [`SleHost::ep`]).
    #[inline]
    pub(crate) fn bind(&mut self, ep: &mut dyn Port) {
        self.area_base = ep.area();
        self.ep = Some(erase(ep));
    }

    #[inline]
    pub(crate) fn unbind(&mut self) {
        self.ep = None;
        self.area_base = NonNull::dangling();
    }

    /// `len` bytes of the buffer area at `off`, for a native that checked
    /// `off + len <= area` (and that an endpoint is bound).
    #[inline]
    fn area_ptr(&self, off: u64) -> *mut u8 {
        debug_assert!(self.ep.is_some() && off <= self.area);
        // SAFETY: off <= area size (the caller's range check), inside the
        // bound endpoint's buffer area (Port::area's contract).
        unsafe { self.area_base.as_ptr().add(off as usize) }
    }

    fn ep(&mut self) -> Result<&mut dyn Port, Fault> {
        match self.ep {
            // SAFETY: `ep` is set by `SleHost::bind` from a live
            // `&mut dyn Port` for exactly the duration of one
            // invocation and cleared before that borrow ends; the VM is
            // single-threaded, so no other reference exists meanwhile.
            Some(mut p) => Ok(unsafe { p.as_mut() }),
            None => Err(Fault::Native("no endpoint bound to this invocation".into())),
        }
    }
}

#[inline]
fn range(what: &str, off: i32, len: i32, limit: u64) -> Result<(u64, usize), Fault> {
    if off < 0 || len < 0 || off as u64 + len as u64 > limit {
        return Err(bad_range(what, off, len, limit));
    }
    Ok((off as u64, len as usize))
}

#[cold]
#[inline(never)]
fn bad_range(what: &str, off: i32, len: i32, limit: u64) -> Fault {
    Fault::Native(format!("{what} range {off}+{len} outside 0..{limit}"))
}

#[inline]
fn charge(ctx: &mut NativeCtx<'_>, bytes: usize) -> Result<(), Fault> {
    ctx.charge(1 + bytes as u64 / 64)
}

fn n_h_to_l(h: &mut SleHost, ctx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    h.ep()?;
    let alen = ctx.array_len(a[0])? as u64;
    let (aoff, len) = range("array", a[1], a[3], alen)?;
    let (uoff, _) = range("buffer area", a[2], a[3], h.area)?;
    charge(ctx, len)?;
    let dst = &mut ctx.bytes_mut(a[0])?[aoff as usize..aoff as usize + len];
    // SAFETY: `uoff + len` is inside the buffer area (checked above); `dst`
    // is the applet's array, which is not in the buffer area.
    unsafe { copy_bytes(h.area_ptr(uoff), dst.as_mut_ptr() as *mut u8, len) };
    Ok(0)
}

fn n_l_to_h(h: &mut SleHost, ctx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    h.ep()?;
    let alen = ctx.array_len(a[0])? as u64;
    let (aoff, len) = range("array", a[1], a[3], alen)?;
    let (uoff, _) = range("buffer area", a[2], a[3], h.area)?;
    charge(ctx, len)?;
    let src = &ctx.bytes(a[0])?[aoff as usize..aoff as usize + len];
    // SAFETY: as in n_h_to_l, in the other direction.
    unsafe { copy_bytes(src.as_ptr() as *const u8, h.area_ptr(uoff), len) };
    Ok(0)
}

fn n_tx_push(h: &mut SleHost, ctx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let ep = h.ep()?;
    let alen = ctx.array_len(a[0])? as u64;
    let (aoff, len) = range("array", a[1], a[3], alen)?;
    if len == 0 || len > MAX_MESSAGE {
        return Err(Box::new(bad_push_len(len)));
    }
    let Ok(chan) = u16::try_from(a[2]) else {
        return Err(Box::new(bad_channel(a[2])));
    };
    charge(ctx, len)?;
    let src = &ctx.bytes(a[0])?[aoff as usize..aoff as usize + len];
    ep.tx_push(chan, bytemuck_i8_ref(src))
        .map_err(Fault::Native)?;
    Ok(0)
}

/// `txPush`'s sink (see [`jive::Natives::register_sink`]): the common
/// case, a held channel that takes the message at once.
fn s_tx_push(h: &mut SleHost, data: &[u8], chan: i32) -> bool {
    let Ok(chan) = u16::try_from(chan) else {
        return false;
    };
    if data.is_empty() || data.len() > MAX_MESSAGE || h.ep.is_none() {
        return false;
    }
    h.ep().is_ok_and(|ep| ep.try_tx_push(chan, data))
}

#[cold]
#[inline(never)]
fn bad_push_len(len: usize) -> Fault {
    Fault::Native(format!("txPush length {len} not in 1..={MAX_MESSAGE}"))
}

#[cold]
#[inline(never)]
fn bad_channel(c: i32) -> Fault {
    Fault::Native(format!("bad channel {c}"))
}

fn n_send_user(h: &mut SleHost, ctx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let area = h.area;
    h.ep()?;
    let chan = u16::try_from(a[0]).map_err(|_| Fault::Native(format!("bad channel {}", a[0])))?;
    let (uoff, len) = range("buffer area", a[2], a[1], area)?;
    if len == 0 || len > MAX_MESSAGE {
        return Err(Box::new(Fault::Native(format!(
            "sendUser length {len} not in 1..={MAX_MESSAGE}"
        ))));
    }
    charge(ctx, len)?;
    let mut tmp = vec![0u8; len];
    // SAFETY: `uoff + len` is inside the buffer area (checked above).
    unsafe { copy_bytes(h.area_ptr(uoff), tmp.as_mut_ptr(), len) };
    h.ep()?.tx_push(chan, &tmp).map_err(Fault::Native)?;
    Ok(0)
}

fn n_dma_rxd(h: &mut SleHost, ctx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let (area, bufsize) = (h.area, h.bufsize);
    let ep = h.ep()?;
    let d = rxd(ctx.ints(a[0])?, a[1], a[2], bufsize, area)?;
    charge(ctx, 0)?;
    d.push(ep);
    Ok(0)
}

/// `dmaRxd`'s sink (see [`jive::Natives::register_ints_sink`]): what the
/// native does when nothing faults (two units in all: the call's and one).
fn s_dma_rxd(h: &mut SleHost, offs: &[i32], chan: i32, len: i32) -> bool {
    let (area, bufsize) = (h.area, h.bufsize);
    let Ok(ep) = h.ep() else {
        return false;
    };
    match rxd(offs, chan, len, bufsize, area) {
        Ok(d) => {
            d.push(ep);
            true
        }
        Err(_) => false,
    }
}

/// The receive descriptor `dmaRxd(offs, chan, len)` publishes, checked.
enum Rxd {
    /// The common case: one buffer, written in place by the host
    /// ([`Port::push_recv_buffer`]).
    One { chan: u16, len: u32, off: u32 },
    /// Several buffers.
    Spanned(RecvDesc),
}

impl Rxd {
    /// Push it to the user (dropped and counted by the host if the queue
    /// is full, as `dmaRxd` documents).
    #[inline(always)]
    fn push(self, ep: &mut dyn Port) {
        match self {
            Rxd::One { chan, len, off } => ep.push_recv_buffer(chan, len, off),
            Rxd::Spanned(d) => ep.push_recv(&d),
        };
    }
}

/// `dmaRxd(offs, chan, len)`'s descriptor, checked: `offs` names the
/// buffers, each inside the buffer area. Inlined into both callers: the
/// sink drops the fault without building a result.
#[inline(always)]
fn rxd(offs: &[i32], chan: i32, len: i32, bufsize: u32, area: u64) -> Result<Rxd, Fault> {
    if offs.len() != MAX_RX_BUFFERS {
        return Err(bad_offsets(offs.len()));
    }
    let Ok(chan) = u16::try_from(chan) else {
        return Err(bad_channel(chan));
    };
    let bs = bufsize as i64;
    if len <= 0 || len as i64 > bs * MAX_RX_BUFFERS as i64 {
        return Err(bad_rxd_len(len, bs));
    }
    if len as i64 > bs {
        return spanned(chan, len as u32, offs, bufsize, area).map(Rxd::Spanned);
    }
    // One buffer, the common case: one range check, one offset.
    range("receive buffer", offs[0], bs as i32, area)?;
    Ok(Rxd::One {
        chan,
        len: len as u32,
        off: offs[0] as u32,
    })
}

/// [`rxd`]'s descriptor of a `len`-byte message spanning several buffers:
/// their offsets, each checked. Out of line: the rare case, kept out of
/// the one-buffer path that both callers inline.
#[inline(never)]
fn spanned(chan: u16, len: u32, offs: &[i32], bufsize: u32, area: u64) -> Result<RecvDesc, Fault> {
    let nbufs = unet_abi::buffers_spanned(len as usize, bufsize as usize);
    let mut d = RecvDesc {
        len,
        channel: chan,
        nbufs: nbufs as u8,
        ..Default::default()
    };
    for (i, &o) in offs[..nbufs].iter().enumerate() {
        range("receive buffer", o, bufsize as i32, area)?;
        d.set_offset(i, o as u32);
    }
    Ok(d)
}

#[cold]
#[inline(never)]
fn bad_offsets(n: usize) -> Fault {
    Fault::Native(format!(
        "dmaRxd needs an int[{MAX_RX_BUFFERS}], got int[{n}]"
    ))
}

#[cold]
#[inline(never)]
fn bad_rxd_len(len: i32, bs: i64) -> Fault {
    Fault::Native(format!(
        "dmaRxd length {len} not in 1..={}",
        bs * MAX_RX_BUFFERS as i64
    ))
}

fn n_dma_rxd_payload(h: &mut SleHost, ctx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let ep = h.ep()?;
    let p = ctx.bytes(a[0])?;
    let chan = u16::try_from(a[1]).map_err(|_| Fault::Native(format!("bad channel {}", a[1])))?;
    let len = a[2];
    if len < 0 || len as usize > INLINE_MAX || len as usize > p.len() {
        return Err(Box::new(Fault::Native(format!(
            "dmaRxdPayload length {len} not in 0..={INLINE_MAX} (array of {})",
            p.len()
        ))));
    }
    let mut d = [0u8; INLINE_MAX];
    let d = &mut d[..len as usize];
    d.copy_from_slice(bytemuck_i8_ref(&p[..len as usize]));
    charge(ctx, 0)?;
    ep.push_recv_inline(chan, d);
    Ok(0)
}

/// `dmaRxdPayload`'s sink (see [`jive::Natives::register_sink_prefix`]):
/// the common case, a length the descriptor holds inline. It charges what
/// the native does (one unit: `1 + len / 64` for `len <= 56`).
fn s_dma_rxd_payload(h: &mut SleHost, data: &[u8], chan: i32) -> bool {
    let Ok(chan) = u16::try_from(chan) else {
        return false;
    };
    if data.len() > INLINE_MAX || h.ep.is_none() {
        return false;
    }
    h.ep().is_ok_and(|ep| {
        ep.push_recv_inline(chan, data);
        true
    })
}

fn n_get_free(h: &mut SleHost, _: &mut NativeCtx<'_>, _: &[i32]) -> NativeResult {
    Ok(h.ep()?.pop_free().map_or(-1, |o| o as i32))
}

/// `getFreeBuffer`'s leaf (see [`jive::Natives::register_leaf`]).
fn l_get_free(h: &mut SleHost, _: [i32; 3]) -> Option<i32> {
    Some(h.ep().ok()?.pop_free().map_or(-1, |o| o as i32))
}

fn n_put_free(h: &mut SleHost, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    let (area, bufsize) = (h.area, h.bufsize);
    let ep = h.ep()?;
    let bs = bufsize as i32;
    range("free buffer", a[0], bs, area)?;
    if !ep.push_free(a[0] as u32) {
        return Err(Box::new(Fault::Native("free queue full".into())));
    }
    Ok(0)
}

/// `putFreeBuffer`'s leaf: a buffer inside the area onto a free queue
/// with room (a full queue leaves the fault to the native).
fn l_put_free(h: &mut SleHost, a: [i32; 3]) -> Option<i32> {
    let (area, bufsize) = (h.area, h.bufsize);
    let ep = h.ep().ok()?;
    range("free buffer", a[0], bufsize as i32, area).ok()?;
    ep.push_free(a[0] as u32).then_some(0)
}

fn n_free_len(h: &mut SleHost, _: &mut NativeCtx<'_>, _: &[i32]) -> NativeResult {
    h.ep()?;
    Ok(h.bufsize as i32)
}

/// `getFreeBufferLength`'s leaf.
fn l_free_len(h: &mut SleHost, _: [i32; 3]) -> Option<i32> {
    h.ep.is_some().then_some(h.bufsize as i32)
}

fn n_new_aligned(_: &mut SleHost, ctx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    Ok(ctx.new_array(Elem::Byte, a[0])?)
}

fn n_now(h: &mut SleHost, _: &mut NativeCtx<'_>, _: &[i32]) -> NativeResult {
    h.ep()?;
    Ok(h.timers.now_us())
}

fn n_set_timer(h: &mut SleHost, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    if a[0] < 0 {
        return Err(Box::new(Fault::Native(format!(
            "negative timer delay {}",
            a[0]
        ))));
    }
    h.ep()?;
    h.timers.set(a[0] as u32, a[1]).map_err(Fault::Native)?;
    Ok(0)
}

pub(crate) fn bytemuck_i8(s: &mut [i8]) -> &mut [u8] {
    // SAFETY: i8 and u8 have the same size, alignment and validity.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut u8, s.len()) }
}

fn bytemuck_i8_ref(s: &[i8]) -> &[u8] {
    // SAFETY: i8 and u8 have the same size, alignment and validity.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, s.len()) }
}

/// The U-Net/SLE natives, in domain [`DOMAIN`].
pub fn natives() -> Natives<SleHost> {
    let mut n = Natives::new();
    let c = NATIVES_CLASS;
    // The two copies are JIVE intrinsics over the buffer area, which each
    // invocation lends the VM as its window (`Applet::run`): compiled
    // applets copy in place when every check passes, and call these
    // natives (which do the same then, and fault otherwise) when not.
    n.register_intrinsic(DOMAIN, c, "doHtoLDMA", n_h_to_l, Intrinsic::WindowToArray)
        .register_intrinsic(DOMAIN, c, "doLtoHDMA", n_l_to_h, Intrinsic::ArrayToWindow)
        .register_sink(DOMAIN, c, "txPush", n_tx_push, s_tx_push)
        .register_ints_sink(DOMAIN, c, "dmaRxd", n_dma_rxd, s_dma_rxd, 2)
        .register_sink_prefix(
            DOMAIN,
            c,
            "dmaRxdPayload",
            n_dma_rxd_payload,
            s_dma_rxd_payload,
        )
        .register_leaf(DOMAIN, c, "getFreeBuffer", "()I", n_get_free, l_get_free)
        .register_leaf(
            DOMAIN,
            c,
            "getFreeBufferLength",
            "()I",
            n_free_len,
            l_free_len,
        )
        .register(DOMAIN, c, "newAlignedArray", "(I)[B", n_new_aligned)
        .register(DOMAIN, c, "now", "()I", n_now)
        .register(DOMAIN, c, "setTimer", "(II)V", n_set_timer)
        .register_leaf(DOMAIN, c, "putFreeBuffer", "(I)V", n_put_free, l_put_free)
        .register(DOMAIN, c, "sendUser", "(III)V", n_send_user);
    n
}

fn erase(ep: &mut dyn Port) -> NonNull<dyn Port> {
    let p: NonNull<dyn Port + '_> = NonNull::from(ep);
    // SAFETY: only the lifetime bound of the trait object is erased; the
    // pointer is stored for the duration of one call that the borrow
    // outlives (see SleHost::ep) and cleared right after.
    unsafe { std::mem::transmute::<NonNull<dyn Port + '_>, NonNull<dyn Port + 'static>>(p) }
}
