//! An applet attached to an endpoint: loaded, verified, initialised, and
//! invoked for every send (`doTx`), arrival (`doRx`) and timer (`doTimer`).

use std::sync::mpsc::Receiver;
use std::time::Instant;

use jive::{Class, Fault, FieldId, Limits, MethodId, Prepared, Rejection, Vm};
use unet_abi::{FaultKind, MAX_MESSAGE, MAX_RX_BUFFERS};

use crate::clock::{ticks, ticks_to_ns, Timers, MAX_TIMERS};
use crate::natives::{bytemuck_i8, natives, passed_checkpoint, SleHost};
use crate::port::Port;
use crate::DOMAIN;

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

/// The class of a fault, for counters and the owner's event.
pub fn fault_kind(f: &Fault) -> FaultKind {
    match f {
        Fault::OutOfFuel => FaultKind::Fuel,
        Fault::ArrayIndexOutOfBounds { .. } | Fault::NullPointer | Fault::NegativeArraySize(_) => {
            FaultKind::Memory
        }
        Fault::DivideByZero => FaultKind::Arith,
        Fault::StackOverflow => FaultKind::Depth,
        Fault::HeapQuotaExceeded { .. } => FaultKind::Heap,
        Fault::Native(_) => FaultKind::Native,
        Fault::Timeout => FaultKind::Timeout,
        _ => FaultKind::Other,
    }
}

/// Statistics of one applet (like bpftool's run_cnt / run_time_ns).
#[derive(Clone, Copy, Debug, Default)]
pub struct AppletStats {
    /// doTx invocations.
    pub tx_calls: u64,
    /// doRx invocations.
    pub rx_calls: u64,
    /// doRx invocations on a message lent to `RxBuf` (not copied in).
    pub rx_lent: u64,
    /// doTimer invocations.
    pub timer_calls: u64,
    /// Total time in the applet, ns.
    pub total_ns: u64,
    /// Longest invocation, ns.
    pub max_ns: u64,
    /// Fuel used.
    pub fuel: u64,
    /// Faults by [`FaultKind`].
    pub faults: [u64; FaultKind::ALL.len()],
}

impl AppletStats {
    /// What grew since `before` (an earlier reading of the same applet's
    /// statistics); `max_ns` is the longest invocation so far, not a
    /// difference.
    pub fn since(&self, before: &AppletStats) -> AppletStats {
        let mut faults = [0; FaultKind::ALL.len()];
        for (i, f) in faults.iter_mut().enumerate() {
            *f = self.faults[i].wrapping_sub(before.faults[i]);
        }
        AppletStats {
            tx_calls: self.tx_calls.wrapping_sub(before.tx_calls),
            rx_calls: self.rx_calls.wrapping_sub(before.rx_calls),
            rx_lent: self.rx_lent.wrapping_sub(before.rx_lent),
            timer_calls: self.timer_calls.wrapping_sub(before.timer_calls),
            total_ns: self.total_ns.wrapping_sub(before.total_ns),
            max_ns: self.max_ns,
            fuel: self.fuel.wrapping_sub(before.fuel),
            faults,
        }
    }
}

/// A class file loaded and verified as an applet ([`Applet::verify`]),
/// not yet bound to an endpoint or run.
pub struct Verified {
    class: Class<SleHost>,
    do_tx: MethodId,
    do_rx: MethodId,
    do_timer: Option<MethodId>,
}

impl Verified {
    /// Whether `doRx` reads an arriving message where it is, lent to
    /// `RxBuf`, with no copy into the array: the applet's code uses
    /// `RxBuf` only in `doRx`, only to pass it to natives (`RawUnet`,
    /// `StdUnet`), or not at all ([`jive::Class::lendable`]). Otherwise
    /// each message is copied into `RxBuf` before `doRx` runs.
    pub fn lends_rx(&self) -> bool {
        self.class
            .field("RxBuf")
            .is_some_and(|f| self.class.lendable(f, self.do_rx))
    }
}

/// The shortest arriving message lent to `RxBuf` rather than copied
/// into it: a loan costs about what copying a few hundred bytes does
/// (`unet bench overhead`: lending a 1 000-byte message saves about 3 ns;
/// at 40 bytes it cost 2 ns more than the copy).
pub const LEND_MIN: usize = 256;

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
    /// Whether `doRx` may read an arriving message where it is, lent to
    /// `RxBuf` ([`Vm::lend_bytes`]), rather than copied into it: the
    /// applet's code uses `RxBuf` only in `doRx`, only as an argument of
    /// natives (as `RawUnet` does).
    lend_rx: bool,
    /// Statistics.
    pub stats: AppletStats,
    /// Faults in a row.
    pub consecutive_faults: u32,
    /// Invocations are timed when `invocations & time_mask == 0`, or when
    /// they pass the VM's checkpoint (see [`Applet::set_time_sampling`]).
    time_mask: u32,
    invocations: u32,
    /// The compiler's result, while it runs on its own thread.
    compiling: Option<Receiver<Result<jive::Compiled<SleHost>, String>>>,
    /// The buffer area the VM's window was last set to (see
    /// [`Applet::run`]); null before the first invocation.
    window: *mut u8,
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
// running it; between invocations an Applet holds no borrowed pointer. The
// VM's window (and `Applet::window`) keep an endpoint's area address
// between invocations, which nothing reads outside one, and each
// invocation checks it against the endpoint it is bound to first.
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
    /// `getFreeBufferLength` and friends). The same as
    /// [`Applet::verify`] then [`Applet::instantiate`].
    pub fn load(bytes: &[u8], limits: Limits, ep: &mut dyn Port) -> Result<Applet, AttachError> {
        Applet::instantiate(Applet::verify(bytes)?, limits, ep)
    }

    /// Load and verify a class file as an applet, touching no endpoint:
    /// the part of an attach whose work grows with the class, which a
    /// host can do on a thread of its own.
    pub fn verify(bytes: &[u8]) -> Result<Verified, AttachError> {
        let class = Class::load(bytes, &natives(), &[DOMAIN]).map_err(AttachError::Rejected)?;
        let do_tx = check_sig(&class, "doTx", &["(III)I", "(III)V"])?;
        let do_rx = check_sig(&class, "doRx", &["(II)I", "(II)V"])?;
        let do_timer = match class.method("doTimer") {
            Some(_) => Some(check_sig(&class, "doTimer", &["(I)V", "(I)I"])?),
            None => None,
        };
        Ok(Verified {
            class,
            do_tx,
            do_rx,
            do_timer,
        })
    }

    /// Initialise a verified applet for endpoint `ep`: `<clinit>` and the
    /// constructor run now, under `limits`, with `ep` bound.
    pub fn instantiate(
        v: Verified,
        limits: Limits,
        ep: &mut dyn Port,
    ) -> Result<Applet, AttachError> {
        Applet::instantiate_with(v, limits, ep, MAX_TIMERS)
    }

    /// [`Applet::instantiate`] with at most `max_timers` timers set at once
    /// (its constructor's included).
    pub(crate) fn instantiate_with(
        v: Verified,
        limits: Limits,
        ep: &mut dyn Port,
        max_timers: usize,
    ) -> Result<Applet, AttachError> {
        let lend_rx = v.lends_rx();
        let Verified {
            class,
            do_tx,
            do_rx,
            do_timer,
        } = v;
        // RxBuf is the host's receive buffer, not the applet's allocation:
        // the quota grows by its size so the applet keeps its whole quota.
        let cap = (ep.buffer_size() as usize * MAX_RX_BUFFERS).min(MAX_MESSAGE);
        let mut vm_limits = limits;
        vm_limits.heap_quota = limits.heap_quota.saturating_add(cap + 64);
        ticks_to_ns(0); // calibrate now, not during the first packet
        let timers = Timers::new(Instant::now(), max_timers);
        let mut host = SleHost::new(ep.area_size(), ep.buffer_size(), timers);
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
            lend_rx,
            stats: AppletStats::default(),
            consecutive_faults: 0,
            time_mask: 0,
            invocations: 0,
            compiling,
            window: std::ptr::null_mut(),
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

    /// Whether arriving messages of [`LEND_MIN`] bytes or more are lent to
    /// `RxBuf` ([`Verified::lends_rx`]).
    pub fn lends_rx(&self) -> bool {
        self.lend_rx
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

    #[inline(always)]
    fn run<const N: usize>(
        &mut self,
        ep: &mut dyn Port,
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
        let base = self.host.area_base.as_ptr();
        if base != self.window {
            // SAFETY: the bound endpoint's buffer area is valid for this
            // invocation (`Port::area`) and is the endpoint's
            // memory, not the VM's heap. The window stays set between
            // invocations (setting and taking it back cost each one as
            // much as a native call), but only an invocation runs code
            // that reads it, and every invocation first compares it with
            // the area of the endpoint it is bound to, here, and sets it
            // again if they differ: the window an invocation reads is
            // always the area of its own endpoint, of `self.host.area`
            // bytes (fixed for the endpoint's lifetime, `Port::area_size`).
            unsafe { self.vm.set_window(base, self.host.area as usize) };
            self.window = base;
        }
        self.host.long_since = 0;
        let r = self.vm.invoke_prepared(&mut self.host, m, args);
        self.host.unbind();
        let fuel = self.vm.last_fuel_used();
        let long = self.host.long_since != 0;
        if sampled || long {
            let from = if sampled { t } else { self.host.long_since };
            // Saturating: the counter may read lower on another core than
            // where `from` was read (a migrated thread, a virtual machine),
            // and a huge difference would wrap the sums.
            let ns = ticks_to_ns(ticks().saturating_sub(from));
            // Long invocations are all timed; short ones one in `period`.
            let weight = if long { 1 } else { self.time_mask as u64 + 1 };
            self.stats.total_ns = self
                .stats
                .total_ns
                .saturating_add(ns.saturating_mul(weight));
            self.stats.max_ns = self.stats.max_ns.max(ns);
        }
        self.stats.fuel = self.stats.fuel.saturating_add(fuel);
        match r {
            Ok(_) => {
                self.consecutive_faults = 0;
                Ok(())
            }
            Err(f) => {
                self.stats.faults[fault_kind(&f) as usize] += 1;
                self.consecutive_faults += 1;
                Err(f)
            }
        }
    }

    /// Run `doTx(length, channel, offset)` for one send descriptor.
    #[inline]
    pub fn tx(&mut self, ep: &mut dyn Port, len: u32, chan: u16, off: u32) -> Result<(), Fault> {
        self.stats.tx_calls += 1;
        self.run(ep, self.do_tx, [len as i32, chan as i32, off as i32])
    }

    /// Run `doRx(length, channel)` with the packet in `RxBuf`: lent to it
    /// where the applet allows (see `lend_rx`) and the packet has at least
    /// [`LEND_MIN`] bytes, else copied into it.
    pub fn rx(&mut self, ep: &mut dyn Port, data: &[u8], chan: u16) -> Result<(), Fault> {
        self.stats.rx_calls += 1;
        let len = data.len();
        #[allow(unsafe_code)]
        let lent = self.lend_rx
            && len >= LEND_MIN
            // SAFETY: `data` is borrowed for this whole call and the loan
            // ends before it returns; it is not this VM's heap (the host's
            // message: shared memory, the engine's own buffer, or another
            // applet's array, never this applet's, whose runner is taken
            // out while it runs, so it cannot be delivering to itself).
            && unsafe { self.vm.lend_bytes(self.rxbuf, data.as_ptr(), len) };
        if lent {
            self.stats.rx_lent += 1;
            let r = self.run(ep, self.do_rx, [len as i32, chan as i32]);
            self.vm.end_lend();
            return r;
        }
        // The common case, an `RxBuf` that holds the packet, with one
        // lookup of the field; `rx_buffer` makes a new one otherwise.
        let dst = match self.vm.field_bytes_mut(self.rxbuf) {
            Some(b) if b.len() >= len => bytemuck_i8(&mut b[..len]),
            _ => match self.rx_buffer(len) {
                Ok(b) => &mut b[..len],
                Err(f) => return Err(self.fault(f)),
            },
        };
        // `RxBuf` holds the packet (the length fits an i32: the buffer is
        // a JIVE array), and nothing runs between the copy and the call to
        // replace it.
        dst.copy_from_slice(data);
        self.run(ep, self.do_rx, [len as i32, chan as i32])
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
            return self.new_rx_buffer(min);
        }
        self.rxbuf_bytes()
    }

    /// [`Applet::rx_buffer`] when `RxBuf` is too short (or null): a new
    /// array of `min` bytes (at least 64) takes its place.
    #[cold]
    #[inline(never)]
    fn new_rx_buffer(&mut self, min: usize) -> Result<&mut [u8], Fault> {
        let a = self.vm.new_byte_array(min.max(64))?;
        self.vm.try_set_array_field(self.rxbuf, a)?;
        self.rxbuf_bytes()
    }

    /// `RxBuf`'s bytes.
    #[inline]
    fn rxbuf_bytes(&mut self) -> Result<&mut [u8], Fault> {
        match self.vm.field_bytes_mut(self.rxbuf) {
            Some(b) => Ok(bytemuck_i8(b)),
            None => Err(Fault::Internal("RxBuf is not a byte array".into())),
        }
    }

    /// Run `doRx(len, chan)` on the packet the host wrote into the first
    /// `len` bytes of [`Applet::rx_buffer`]. Faults (without running the
    /// applet) if `RxBuf` is now shorter than `len`.
    pub fn rx_in_place(&mut self, ep: &mut dyn Port, len: usize, chan: u16) -> Result<(), Fault> {
        let fits = self
            .vm
            .field_bytes(self.rxbuf)
            .is_some_and(|b| b.len() >= len);
        if !fits || len > i32::MAX as usize {
            self.stats.rx_calls += 1;
            let f = Fault::Internal(format!("RxBuf does not hold the {len}-byte packet"));
            return Err(self.fault(f));
        }
        self.rx_filled(ep, len, chan)
    }

    /// [`Applet::rx_in_place`] for a host that wrote the packet into the
    /// `RxBuf` it was just handed ([`Applet::rx_buffer`]) and nothing ran
    /// since: `len` is at most that array's length, so it is not looked
    /// up again.
    #[inline]
    pub(crate) fn rx_filled(
        &mut self,
        ep: &mut dyn Port,
        len: usize,
        chan: u16,
    ) -> Result<(), Fault> {
        self.stats.rx_calls += 1;
        // A JIVE array's length fits an i32.
        self.run(ep, self.do_rx, [len as i32, chan as i32])
    }

    /// Count a fault that happened outside an invocation.
    fn fault(&mut self, f: Fault) -> Fault {
        self.stats.faults[fault_kind(&f) as usize] += 1;
        self.consecutive_faults += 1;
        f
    }

    /// Run `doTimer(arg)`; applets without one ignore timers.
    pub fn timer(&mut self, ep: &mut dyn Port, arg: i32) -> Result<(), Fault> {
        let Some(m) = self.do_timer else {
            return Ok(());
        };
        self.stats.timer_calls += 1;
        self.run(ep, m, [arg])
    }

    /// When the applet was attached (the origin of its `now()` clock).
    pub fn epoch(&self) -> Instant {
        self.host.timers.epoch
    }

    /// Microseconds since the applet was attached (the `now()` clock).
    pub fn now_us(&self) -> i32 {
        self.host.timers.now_us()
    }

    /// The timers its `setTimer` calls set (a [`crate::Runner`] runs them
    /// as they fall due; an applet run on its own only keeps them).
    pub(crate) fn timers(&mut self) -> &mut Timers {
        &mut self.host.timers
    }

    /// Timers set and not yet run.
    pub fn timers_pending(&self) -> usize {
        self.host.timers.len()
    }

    /// When its earliest timer falls due, if one is set.
    #[inline]
    pub fn next_timer(&self) -> Option<Instant> {
        self.host.timers.next()
    }

    /// Heap bytes in use.
    pub fn heap_used(&self) -> usize {
        self.vm.heap_used()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_is_a_fault_of_its_own_kind() {
        assert_eq!(fault_kind(&Fault::Timeout), FaultKind::Timeout);
        assert_eq!(fault_kind(&Fault::OutOfFuel), FaultKind::Fuel);
        assert_eq!(
            FaultKind::Timeout.counter(),
            unet_abi::EndpointCounter::AppletFaultTimeout
        );
        assert_eq!(FaultKind::from_u32(7), FaultKind::Timeout);
        assert_eq!(FaultKind::Timeout.name(), "timeout");
    }
}
