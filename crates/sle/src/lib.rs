//! U-Net/SLE: Java applets attached to endpoints, run by JIVE on every send
//! (`doTx`) and every arrival (`doRx`), with the native methods of the
//! U-Net/SLE paper's section 2.1.
//!
//! The natives act on one endpoint through the [`SleEndpoint`] trait, so the
//! same applet runs in the engine (the default placement) or in the owning
//! process's client library (the `inline` placement). Every native is
//! confined to the applet's own endpoint — its buffer area, its queues and
//! the channels it holds — and treats out-of-range offsets and lengths as a
//! fault of that invocation, never a write elsewhere.
//!
//! # Natives (domain `unet-sle`, class `unet/sle/Natives`)
//!
//! | native | meaning |
//! |---|---|
//! | `doHtoLDMA(byte[] a, int aoff, int useroff, int len)` | copy `len` bytes of the buffer area at `useroff` into `a[aoff..]` |
//! | `doLtoHDMA(byte[] a, int aoff, int useroff, int len)` | copy `a[aoff..aoff+len]` into the buffer area at `useroff` |
//! | `txPush(byte[] a, int aoff, int chan, int len)` | transmit `a[aoff..aoff+len]` on channel `chan` |
//! | `dmaRxd(int[] offsets, int chan, int len)` | push a receive descriptor naming up to 14 buffers (the array must have 14 entries) |
//! | `dmaRxdPayload(byte[] p, int chan, int len)` | push a receive descriptor with `len` ≤ 56 bytes inline |
//! | `getFreeBuffer()` | pop a free buffer's offset, or -1 |
//! | `getFreeBufferLength()` | the endpoint's buffer size |
//! | `newAlignedArray(int n)` | a new byte array of `n` bytes |
//!
//! Added for the paper's protocols (flow control, retransmission):
//!
//! | native | meaning |
//! |---|---|
//! | `now()` | a clock in microseconds (wraps at 2³¹) |
//! | `setTimer(int delayUs, int arg)` | call the applet's `doTimer(int arg)` after `delayUs` microseconds |
//! | `putFreeBuffer(int off)` | give a buffer taken with `getFreeBuffer` back to the free queue |
//! | `sendUser(int chan, int len, int useroff)` | transmit `len` bytes of the buffer area at `useroff` on `chan` without copying through the applet |

use std::ptr::NonNull;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use jive::subset::Elem;
use jive::{
    Class, Fault, FieldId, Intrinsic, Limits, MethodId, NativeCtx, NativeResult, Natives, Prepared,
    Rejection, Vm, NATIVES_CLASS,
};
use unet_abi::copy::copy_bytes;
use unet_abi::{RecvDesc, INLINE_MAX, MAX_MESSAGE, MAX_RX_BUFFERS, RECV_INLINE};

/// The native domain applets are loaded with.
pub const DOMAIN: &str = "unet-sle";

/// Work budget per invocation of an applet unless its owner sets one:
/// 20 000 units of JIVE fuel, some tens of microseconds, far more than a
/// packet handler needs and little enough that a runaway applet cannot hold
/// up the other endpoints of its engine.
pub const DEFAULT_FUEL: u64 = 20_000;

/// An applet placed in the engine whose invocations run long gets at most
/// 1/APPLET_SHARE of the engine's time.
const APPLET_SHARE: u32 = 10;
/// Invocations shorter than this are never paused after...
const APPLET_FREE: Duration = Duration::from_micros(20);

/// How long the engine holds back an applet after one of its invocations
/// that took `spent` and used `fuel` units of work: nine times as long
/// when it was long *and* busy (one that was only preempted, little work
/// done, is not the applet's fault), so that an applet gets at most a
/// tenth of the engine; `None` otherwise.
pub fn pause_after(spent: Duration, fuel: u64) -> Option<Duration> {
    (spent > APPLET_FREE && fuel > ENGINE_EXACT_FUEL).then(|| spent * (APPLET_SHARE - 1))
}

/// How long the engine holds back an applet after attaching it (loading
/// and verifying is applet work too), `spent` being the time that took.
pub fn pause_after_load(spent: Duration) -> Option<Duration> {
    (spent > APPLET_FREE).then(|| spent * (APPLET_SHARE - 1))
}

/// Applets placed in the engine have one short invocation in this many
/// timed (see [`Applet::set_time_sampling`])...
pub const ENGINE_TIME_SAMPLE: u32 = 16;
/// ...and every invocation that used more work than this timed exactly:
/// the engine holds back an applet whose invocations are long and busy
/// ([`pause_after`]); nor is an invocation that used less paused after.
pub const ENGINE_EXACT_FUEL: u64 = 2_000;

/// The limits an applet runs under by default: [`DEFAULT_FUEL`], and JIVE's
/// default call depth and heap quota.
pub fn default_limits() -> Limits {
    Limits {
        fuel: DEFAULT_FUEL,
        ..Limits::default()
    }
}

/// Faults in a row after which an applet is detached.
pub const MAX_CONSECUTIVE_FAULTS: u32 = 16;

/// One endpoint, as an applet's natives see it.
pub trait SleEndpoint {
    /// Size of the buffer area (constant for the endpoint's lifetime: an
    /// applet reads it once, when it is loaded).
    fn area_size(&self) -> u64;
    /// The buffer area's first byte: `area_size()` bytes, readable and
    /// writable for as long as this endpoint is bound to an invocation.
    /// The natives check every range against `area_size()` and copy bytes
    /// in and out through this pointer; they never interpret the area in
    /// place (the application may write it at any time).
    fn area(&mut self) -> NonNull<u8>;
    /// The endpoint's receive buffer size (constant, as `area_size`).
    fn buffer_size(&self) -> u32;
    /// Pop a free buffer (already checked to lie in the buffer area).
    fn pop_free(&mut self) -> Option<u32>;
    /// Give a buffer back to the free queue.
    fn push_free(&mut self, off: u32) -> bool;
    /// Transmit a message on a channel this endpoint holds.
    fn tx_push(&mut self, chan: u16, data: &[u8]) -> Result<(), String>;
    /// [`SleEndpoint::tx_push`]'s common case: transmit if that succeeds
    /// at once, else return false having done nothing (`tx_push` then
    /// runs, waits if it must and says why it fails). The compiled
    /// `txPush` calls this without the native's marshalling. The default
    /// always declines.
    fn try_tx_push(&mut self, _chan: u16, _data: &[u8]) -> bool {
        false
    }
    /// Push a receive descriptor to the user; false when the queue is full
    /// (the message is dropped and counted, and the buffers it names go
    /// back to the free queue).
    fn push_recv(&mut self, desc: RecvDesc) -> bool;
    /// Microseconds since some start.
    fn now_us(&self) -> i32;
    /// Call `doTimer(arg)` after `delay_us`.
    fn set_timer(&mut self, delay_us: u32, arg: i32) -> Result<(), String>;
}

/// The host state natives receive: the endpoint of the running invocation.
pub struct SleHost {
    ep: Option<NonNull<dyn SleEndpoint>>,
    /// [`SleEndpoint::area`] of the bound endpoint (dangling while none is
    /// bound; natives check `ep` first).
    area_base: NonNull<u8>,
    /// [`ticks`] when the running invocation passed the VM's checkpoint
    /// (it is a long one), 0 before.
    long_since: u64,
    /// The endpoint's buffer area size and receive buffer size, read once
    /// at load: the natives check ranges against them without a call.
    area: u64,
    bufsize: u32,
}

/// The VM's checkpoint hook: the invocation has used more than the exact
/// timing threshold; note when.
fn passed_checkpoint(h: &mut SleHost) {
    h.long_since = ticks().max(1);
}

impl SleHost {
    /// Bind `ep` for one invocation (see [`SleHost::ep`]).
    #[inline]
    fn bind(&mut self, ep: &mut dyn SleEndpoint) {
        self.area_base = ep.area();
        self.ep = Some(erase(ep));
    }

    #[inline]
    fn unbind(&mut self) {
        self.ep = None;
        self.area_base = NonNull::dangling();
    }

    /// `len` bytes of the buffer area at `off`, for a native that checked
    /// `off + len <= area` (and that an endpoint is bound).
    #[inline]
    fn area_ptr(&self, off: u64) -> *mut u8 {
        debug_assert!(self.ep.is_some() && off <= self.area);
        // SAFETY: off <= area size (the caller's range check), inside the
        // bound endpoint's buffer area (SleEndpoint::area's contract).
        unsafe { self.area_base.as_ptr().add(off as usize) }
    }

    fn ep(&mut self) -> Result<&mut dyn SleEndpoint, Fault> {
        match self.ep {
            // SAFETY: `ep` is set by `SleHost::bind` from a live
            // `&mut dyn SleEndpoint` for exactly the duration of one
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
    let offs = ctx.ints(a[0])?;
    if offs.len() != MAX_RX_BUFFERS {
        return Err(Box::new(Fault::Native(format!(
            "dmaRxd needs an int[{MAX_RX_BUFFERS}], got int[{}]",
            offs.len()
        ))));
    }
    let Ok(chan) = u16::try_from(a[1]) else {
        return Err(Box::new(bad_channel(a[1])));
    };
    let len = a[2];
    let bs = bufsize as i64;
    if len <= 0 || len as i64 > bs * MAX_RX_BUFFERS as i64 {
        return Err(Box::new(Fault::Native(format!(
            "dmaRxd length {len} not in 1..={}",
            bs * MAX_RX_BUFFERS as i64
        ))));
    }
    let nbufs = unet_abi::buffers_spanned(len as usize, bs as usize);
    let mut d = RecvDesc {
        len: len as u32,
        channel: chan,
        nbufs: nbufs as u8,
        ..Default::default()
    };
    for (i, &o) in offs[..nbufs].iter().enumerate() {
        range("receive buffer", o, bs as i32, area)?;
        d.set_offset(i, o as u32);
    }
    charge(ctx, 0)?;
    ep.push_recv(d);
    Ok(0)
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
    let mut d = RecvDesc {
        len: len as u32,
        channel: chan,
        flags: RECV_INLINE,
        ..Default::default()
    };
    d.data[..len as usize].copy_from_slice(bytemuck_i8_ref(&p[..len as usize]));
    charge(ctx, 0)?;
    ep.push_recv(d);
    Ok(0)
}

fn n_get_free(h: &mut SleHost, _: &mut NativeCtx<'_>, _: &[i32]) -> NativeResult {
    Ok(h.ep()?.pop_free().map_or(-1, |o| o as i32))
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

fn n_free_len(h: &mut SleHost, _: &mut NativeCtx<'_>, _: &[i32]) -> NativeResult {
    h.ep()?;
    Ok(h.bufsize as i32)
}

fn n_new_aligned(_: &mut SleHost, ctx: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    Ok(ctx.new_array(Elem::Byte, a[0])?)
}

fn n_now(h: &mut SleHost, _: &mut NativeCtx<'_>, _: &[i32]) -> NativeResult {
    Ok(h.ep()?.now_us())
}

fn n_set_timer(h: &mut SleHost, _: &mut NativeCtx<'_>, a: &[i32]) -> NativeResult {
    if a[0] < 0 {
        return Err(Box::new(Fault::Native(format!(
            "negative timer delay {}",
            a[0]
        ))));
    }
    h.ep()?
        .set_timer(a[0] as u32, a[1])
        .map_err(Fault::Native)?;
    Ok(0)
}

fn bytemuck_i8(s: &mut [i8]) -> &mut [u8] {
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
        .register(DOMAIN, c, "dmaRxd", "([III)V", n_dma_rxd)
        .register(DOMAIN, c, "dmaRxdPayload", "([BII)V", n_dma_rxd_payload)
        .register(DOMAIN, c, "getFreeBuffer", "()I", n_get_free)
        .register(DOMAIN, c, "getFreeBufferLength", "()I", n_free_len)
        .register(DOMAIN, c, "newAlignedArray", "(I)[B", n_new_aligned)
        .register(DOMAIN, c, "now", "()I", n_now)
        .register(DOMAIN, c, "setTimer", "(II)V", n_set_timer)
        .register(DOMAIN, c, "putFreeBuffer", "(I)V", n_put_free)
        .register(DOMAIN, c, "sendUser", "(III)V", n_send_user);
    n
}

/// Why an applet was refused at attach.
#[derive(Debug)]
pub enum AttachError {
    /// JIVE refused the class.
    Rejected(Rejection),
    /// The class lacks what U-Net/SLE needs.
    Shape(String),
    /// The constructor or static initializer faulted.
    Init(Fault),
}

impl std::fmt::Display for AttachError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttachError::Rejected(r) => write!(f, "rejected: {r}"),
            AttachError::Shape(s) => write!(f, "rejected: {s}"),
            AttachError::Init(x) => write!(f, "constructor faulted: {x}"),
        }
    }
}

/// Classes of faults counted per applet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Work budget exhausted (the watchdog).
    Fuel = 0,
    /// Array bounds, null, negative size.
    Memory = 1,
    /// Division by zero.
    Arith = 2,
    /// Call depth.
    Depth = 3,
    /// Heap quota.
    Heap = 4,
    /// A native refused its arguments.
    Native = 5,
    /// Anything else.
    Other = 6,
}

impl FaultKind {
    /// Classify a fault.
    pub fn of(f: &Fault) -> FaultKind {
        match f {
            Fault::OutOfFuel => FaultKind::Fuel,
            Fault::ArrayIndexOutOfBounds { .. }
            | Fault::NullPointer
            | Fault::NegativeArraySize(_) => FaultKind::Memory,
            Fault::DivideByZero => FaultKind::Arith,
            Fault::StackOverflow => FaultKind::Depth,
            Fault::HeapQuotaExceeded { .. } => FaultKind::Heap,
            Fault::Native(_) => FaultKind::Native,
            _ => FaultKind::Other,
        }
    }
}

/// Statistics of one applet (like bpftool's run_cnt / run_time_ns).
#[derive(Clone, Copy, Debug, Default)]
pub struct AppletStats {
    /// doTx invocations.
    pub tx_calls: u64,
    /// doRx invocations.
    pub rx_calls: u64,
    /// doTimer invocations.
    pub timer_calls: u64,
    /// Total time in the applet, ns.
    pub total_ns: u64,
    /// Longest invocation, ns.
    pub max_ns: u64,
    /// Fuel used.
    pub fuel: u64,
    /// Faults by [`FaultKind`].
    pub faults: [u64; 7],
}

static NEXT_APPLET_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// An applet attached to an endpoint.
pub struct Applet {
    /// Unique per attach (timers of a replaced applet never reach its
    /// successor).
    pub id: u64,
    vm: Vm<SleHost>,
    host: SleHost,
    do_tx: Prepared<3>,
    do_rx: Prepared<2>,
    do_timer: Option<Prepared<1>>,
    /// `doTx` and `doRx` (for [`Applet::is_compiled`]).
    methods: [MethodId; 2],
    /// Whether both run as machine code (set when code is installed).
    compiled: bool,
    rxbuf: FieldId,
    /// Statistics.
    pub stats: AppletStats,
    /// Faults in a row.
    pub consecutive_faults: u32,
    epoch: Instant,
    /// Invocations are timed when `invocations & time_mask == 0`, or when
    /// they pass the VM's checkpoint (see [`Applet::set_time_sampling`]).
    time_mask: u32,
    invocations: u32,
    /// The compiler's result, while it runs on its own thread.
    compiling: Option<Receiver<Result<jive::Compiled<SleHost>, String>>>,
}

/// Compile `class` on a thread of its own; `None` if no thread could be
/// started (the applet then stays interpreted).
fn compile_in_background(
    class: &Class<SleHost>,
) -> Option<Receiver<Result<jive::Compiled<SleHost>, String>>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let class = class.clone();
    std::thread::Builder::new()
        .name("jive-compile".into())
        .spawn(move || {
            let _ = tx.send(class.compile());
        })
        .ok()?;
    Some(rx)
}

// SAFETY: SleHost's pointer is only set during an invocation on the thread
// running it; between invocations an Applet holds no borrowed pointer.
unsafe impl Send for Applet {}

fn check_sig(c: &Class<SleHost>, name: &str, want: &[&str]) -> Result<MethodId, AttachError> {
    let m = c
        .method(name)
        .ok_or_else(|| AttachError::Shape(format!("the applet has no {name} method")))?;
    let d = c.method_descriptor(m);
    if !want.contains(&d) {
        return Err(AttachError::Shape(format!(
            "{name} has descriptor {d}, expected one of {want:?}"
        )));
    }
    Ok(m)
}

impl Applet {
    /// Load, verify and initialise an applet: `<clinit>` and the
    /// constructor run now, with `ep` bound (so the constructor may call
    /// `getFreeBufferLength` and friends).
    pub fn load(
        bytes: &[u8],
        limits: Limits,
        ep: &mut dyn SleEndpoint,
    ) -> Result<Applet, AttachError> {
        let class = Class::load(bytes, &natives(), &[DOMAIN]).map_err(AttachError::Rejected)?;
        let do_tx = check_sig(&class, "doTx", &["(III)I", "(III)V"])?;
        let do_rx = check_sig(&class, "doRx", &["(II)I", "(II)V"])?;
        let do_timer = match class.method("doTimer") {
            Some(_) => Some(check_sig(&class, "doTimer", &["(I)V", "(I)I"])?),
            None => None,
        };
        // RxBuf is the host's receive buffer, not the applet's allocation:
        // the quota grows by its size so the applet keeps its whole quota.
        let cap = (ep.buffer_size() as usize * MAX_RX_BUFFERS).min(MAX_MESSAGE);
        let mut vm_limits = limits;
        vm_limits.heap_quota = limits.heap_quota.saturating_add(cap + 64);
        ticks_to_ns(0); // calibrate now, not during the first packet
        let mut host = SleHost {
            ep: None,
            area_base: NonNull::dangling(),
            long_since: 0,
            area: ep.area_size(),
            bufsize: ep.buffer_size(),
        };
        host.bind(ep);
        let vm = Vm::new(class, vm_limits, &mut host);
        host.unbind();
        let mut vm = vm.map_err(AttachError::Init)?;
        let shape = |f: Fault| AttachError::Shape(f.to_string());
        let prepared = (
            vm.prepare(do_tx).map_err(shape)?,
            vm.prepare(do_rx).map_err(shape)?,
            do_timer.map(|m| vm.prepare(m)).transpose().map_err(shape)?,
        );
        let compiling = compile_in_background(vm.class());
        let rxbuf = vm.static_field("RxBuf").ok_or_else(|| {
            AttachError::Shape("the applet has no static byte[] RxBuf field".into())
        })?;
        let arr = vm.new_byte_array(cap).map_err(|f| {
            AttachError::Shape(format!("cannot allocate RxBuf of {cap} bytes: {f}"))
        })?;
        vm.try_set_array_field(rxbuf, arr)
            .map_err(|_| AttachError::Shape("RxBuf is not a byte[] field".into()))?;
        Ok(Applet {
            id: NEXT_APPLET_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            vm,
            host,
            do_tx: prepared.0,
            do_rx: prepared.1,
            do_timer: prepared.2,
            methods: [do_tx, do_rx],
            compiled: false,
            rxbuf,
            stats: AppletStats::default(),
            consecutive_faults: 0,
            epoch: Instant::now(),
            time_mask: 0,
            invocations: 0,
            compiling,
        })
    }

    /// Wait for the applet's machine code (see [`Applet::is_compiled`])
    /// and install it now. For hosts where a few milliseconds at attach
    /// time cost nothing and the first invocations should already run
    /// compiled (the client library's inline placement, benchmarks).
    pub fn wait_compiled(&mut self) {
        if let Some(rx) = self.compiling.take() {
            if let Ok(Ok(code)) = rx.recv() {
                let _ = self.vm.install(code);
                self.note_compiled();
            }
        }
    }

    /// Keep the applet interpreted: the compiler's result is dropped when
    /// it comes. The behaviour is the same either way; benchmarks compare
    /// the two.
    pub fn keep_interpreted(&mut self) {
        self.compiling = None;
    }

    /// Whether `doTx` and `doRx` run as machine code. An applet is compiled
    /// on a thread of its own when it is loaded (JIVE's compiler takes some
    /// milliseconds, which must not stall the engine's loop) and runs
    /// interpreted until the code is installed, at a sampled invocation
    /// after it is ready. Methods JIVE leaves interpreted (those that
    /// allocate or recurse) stay so.
    #[inline]
    pub fn is_compiled(&self) -> bool {
        self.compiled
    }

    fn note_compiled(&mut self) {
        self.compiled = self.methods.iter().all(|&m| self.vm.is_compiled(m));
    }

    /// Install the compiled code if the compiler has finished.
    #[cold]
    fn poll_compiled(&mut self) {
        let Some(rx) = &self.compiling else {
            return;
        };
        match rx.try_recv() {
            Err(std::sync::mpsc::TryRecvError::Empty) => {}
            Ok(Ok(code)) => {
                let _ = self.vm.install(code);
                self.note_compiled();
                self.compiling = None;
            }
            // The compiler refused the class (or its thread is gone): the
            // applet stays interpreted, which is the same behaviour.
            Ok(Err(_)) | Err(_) => self.compiling = None,
        }
    }

    /// Time one invocation in `period` (a power of two; 1, the default,
    /// times every one), and every invocation that used more than
    /// `exact_fuel` units of work (`u64::MAX`: none but the sampled ones).
    /// Reading the clock twice costs about as much as a small applet's
    /// whole invocation, so a placement that needs the time of long
    /// invocations only samples the short ones: [`AppletStats::total_ns`]
    /// then adds the long ones exactly and `period` times each sampled
    /// short one (an estimate), and [`AppletStats::max_ns`] is the longest
    /// timed one. A long invocation that is not sampled is timed from the
    /// moment it passes `exact_fuel` (the VM's checkpoint reads the clock
    /// then), so short ones read no clock at all; its time leaves out its
    /// first `exact_fuel` units of work.
    pub fn set_time_sampling(&mut self, period: u32, exact_fuel: u64) {
        self.time_mask = period.max(1).next_power_of_two() - 1;
        if exact_fuel == u64::MAX {
            self.vm.clear_checkpoint();
        } else {
            self.vm.set_checkpoint(exact_fuel, passed_checkpoint);
        }
    }

    #[inline]
    fn run<const N: usize>(
        &mut self,
        ep: &mut dyn SleEndpoint,
        m: Prepared<N>,
        args: [i32; N],
    ) -> Result<(), Fault> {
        let sampled = self.invocations & self.time_mask == 0;
        self.invocations = self.invocations.wrapping_add(1);
        if sampled && self.compiling.is_some() {
            self.poll_compiled();
        }
        let t = if sampled { ticks() } else { 0 };
        self.host.bind(ep);
        // SAFETY: the bound endpoint's buffer area is valid for this
        // invocation (`SleEndpoint::area`) and is the endpoint's memory,
        // not the VM's heap; the window is taken back before the borrow of
        // `ep` ends.
        unsafe {
            self.vm
                .set_window(self.host.area_base.as_ptr(), self.host.area as usize)
        };
        self.host.long_since = 0;
        let r = self.vm.invoke_prepared(&mut self.host, m, args);
        self.vm.clear_window();
        self.host.unbind();
        let fuel = self.vm.last_fuel_used();
        let long = self.host.long_since != 0;
        if sampled || long {
            let from = if sampled { t } else { self.host.long_since };
            let ns = ticks_to_ns(ticks().wrapping_sub(from));
            // Long invocations are all timed; short ones one in `period`.
            let weight = if long { 1 } else { self.time_mask as u64 + 1 };
            self.stats.total_ns += ns * weight;
            self.stats.max_ns = self.stats.max_ns.max(ns);
        }
        self.stats.fuel += fuel;
        match r {
            Ok(_) => {
                self.consecutive_faults = 0;
                Ok(())
            }
            Err(f) => {
                self.stats.faults[FaultKind::of(&f) as usize] += 1;
                self.consecutive_faults += 1;
                Err(f)
            }
        }
    }

    /// Run `doTx(length, channel, offset)` for one send descriptor.
    pub fn tx(
        &mut self,
        ep: &mut dyn SleEndpoint,
        len: u32,
        chan: u16,
        off: u32,
    ) -> Result<(), Fault> {
        self.stats.tx_calls += 1;
        self.run(ep, self.do_tx, [len as i32, chan as i32, off as i32])
    }

    /// Run `doRx(length, channel)` with the packet in `RxBuf`.
    pub fn rx(&mut self, ep: &mut dyn SleEndpoint, data: &[u8], chan: u16) -> Result<(), Fault> {
        match self.rx_buffer(data.len()) {
            Ok(b) => b[..data.len()].copy_from_slice(data),
            Err(f) => {
                self.stats.rx_calls += 1;
                return Err(self.fault(f));
            }
        }
        self.rx_in_place(ep, data.len(), chan)
    }

    /// `RxBuf` as bytes, at least `min` long, for the host to write an
    /// arriving packet into (then [`Applet::rx_in_place`]): the arriving
    /// bytes are copied once, straight into the array `doRx` reads. If the
    /// applet replaced `RxBuf` with a shorter array (or null), a new one of
    /// `min` bytes (at least 64) takes its place.
    pub fn rx_buffer(&mut self, min: usize) -> Result<&mut [u8], Fault> {
        if self
            .vm
            .field_bytes(self.rxbuf)
            .is_none_or(|b| b.len() < min)
        {
            let a = self.vm.new_byte_array(min.max(64))?;
            self.vm.try_set_array_field(self.rxbuf, a)?;
        }
        match self.vm.field_bytes_mut(self.rxbuf) {
            Some(b) => Ok(bytemuck_i8(b)),
            None => Err(Fault::Internal("RxBuf is not a byte array".into())),
        }
    }

    /// Run `doRx(len, chan)` on the packet the host wrote into the first
    /// `len` bytes of [`Applet::rx_buffer`]. Faults (without running the
    /// applet) if `RxBuf` is now shorter than `len`.
    pub fn rx_in_place(
        &mut self,
        ep: &mut dyn SleEndpoint,
        len: usize,
        chan: u16,
    ) -> Result<(), Fault> {
        self.stats.rx_calls += 1;
        let fits = self
            .vm
            .field_bytes(self.rxbuf)
            .is_some_and(|b| b.len() >= len);
        if !fits || len > i32::MAX as usize {
            let f = Fault::Internal(format!("RxBuf does not hold the {len}-byte packet"));
            return Err(self.fault(f));
        }
        self.run(ep, self.do_rx, [len as i32, chan as i32])
    }

    /// Count a fault that happened outside an invocation.
    fn fault(&mut self, f: Fault) -> Fault {
        self.stats.faults[FaultKind::of(&f) as usize] += 1;
        self.consecutive_faults += 1;
        f
    }

    /// Run `doTimer(arg)`; applets without one ignore timers.
    pub fn timer(&mut self, ep: &mut dyn SleEndpoint, arg: i32) -> Result<(), Fault> {
        let Some(m) = self.do_timer else {
            return Ok(());
        };
        self.stats.timer_calls += 1;
        self.run(ep, m, [arg])
    }

    /// When the applet was attached (the origin of its `now()` clock).
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// Microseconds since the applet was attached (the `now()` clock).
    pub fn now_us(&self) -> i32 {
        (self.epoch.elapsed().as_micros() as u64 & 0x7fff_ffff) as i32
    }

    /// Heap bytes in use.
    pub fn heap_used(&self) -> usize {
        self.vm.heap_used()
    }
}

/// The `now()` clock of an applet attached at `epoch`: microseconds,
/// wrapping at 2^31.
pub fn now_us_since(epoch: Instant) -> i32 {
    (epoch.elapsed().as_micros() as u64 & 0x7fff_ffff) as i32
}

/// A cheap timestamp for per-invocation statistics: the time-stamp counter
/// on x86-64 (a few nanoseconds to read, where a clock read costs ~30),
/// nanoseconds since a fixed start elsewhere.
#[inline]
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions; it only reads a counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Convert a difference of [`ticks`] to nanoseconds (calibrated once
/// against the monotonic clock over 2 ms).
fn ticks_to_ns(d: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        static NS_PER_TICK: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
        let f = *NS_PER_TICK.get_or_init(|| {
            let (t0, c0) = (Instant::now(), ticks());
            while t0.elapsed() < std::time::Duration::from_millis(2) {
                std::hint::spin_loop();
            }
            let (ns, c) = (t0.elapsed().as_nanos() as f64, ticks().wrapping_sub(c0));
            if c == 0 {
                1.0
            } else {
                ns / c as f64
            }
        });
        (d as f64 * f) as u64
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        d
    }
}

fn erase(ep: &mut dyn SleEndpoint) -> NonNull<dyn SleEndpoint> {
    let p: NonNull<dyn SleEndpoint + '_> = NonNull::from(ep);
    // SAFETY: only the lifetime bound of the trait object is erased; the
    // pointer is stored for the duration of one call that the borrow
    // outlives (see SleHost::ep) and cleared right after.
    unsafe {
        std::mem::transmute::<NonNull<dyn SleEndpoint + '_>, NonNull<dyn SleEndpoint + 'static>>(p)
    }
}
