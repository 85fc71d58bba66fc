//! `unet bench overhead`: the U-Net/SLE paper's Figure 7 — per-message
//! transmit and receive overhead of an applet, split by step, for 40-byte
//! and 1000-byte messages, beside the same path without an applet.
//!
//! Everything runs in this process on a copy of the engine's per-message
//! code (`process_send`, `deliver`, `rx_now`, `run_pending_rx`,
//! `run_applet` and the `SleEndpoint` of `crates/engine/src/core.rs`, which
//! are private to the engine), over the same kinds of memory the engine
//! uses:
//!
//! - one [`Segment`] holding the endpoint's buffer area (256 KiB: a send
//!   buffer at 0, 64 receive buffers of 2 KiB from 8 KiB on), its free ring
//!   (`Ring<u32>`, 64 entries) and its receive ring (`Ring<RecvDesc>`, 64
//!   entries);
//! - a transmit sink: every transmitted packet (the no-applet send and the
//!   applet's `txPush`) is copied into it, as the engine copies a packet
//!   into its receiver or wire buffer;
//! - the engine's queue of arrivals waiting for an applet (`VecDeque` of
//!   pooled `Vec<u8>`s), with the same copy into it. An arrival from the
//!   engine's send path finds it empty, so its `doRx` runs at once on the
//!   message copied straight into `RxBuf`, as in the engine.
//!
//! Each variant is timed in batches of [`BATCH`] messages, the rings reset
//! between batches outside the timing; a repetition is the median over
//! `--batches` batches (per message, less one clock read per batch), and
//! every figure is the median over `--reps` repetitions, the variants
//! interleaved within each repetition.
//!
//! Steps are differences between variants: an applet whose `doTx`/`doRx`
//! returns at once (`call_return` less the engine's wrapper alone,
//! `find_applet`), one calling `getFreeBufferLength()` 16 times
//! (`null_native`, per call), one calling `doHtoLDMA`/`doLtoHDMA` with
//! length 0 (`dma_setup`) and with the message length (`data_movement`,
//! the rest), one calling `txPush` or `dmaRxdPayload`/`dmaRxd` (`tx_push`,
//! `descriptor_push`, including the sink copy or ring write they do), one
//! calling `getFreeBuffer` (`get_free_buffer`), and `RawUnet`
//! (`applets/RawUnet.java`) end to end through the engine path
//! (`end_to_end`). `total` is `end_to_end` less the no-applet `total`: the
//! overhead the applet adds per message, the figure the paper's Figure 7
//! reports as "Total". A difference is the median over repetitions of the
//! difference within each repetition (the two variants timed moments
//! apart), not the difference of two medians: the machine's speed drifts
//! between repetitions, and a pair timed together drifts together.
//! Differences are not clamped: a small step can come out slightly
//! negative on a noisy machine.
//!
//! Besides the paper's steps: `validate` (transmit; the descriptor checks
//! the engine makes before looking for an applet) and `rxbuf_copy`
//! (receive; the arriving message copied into the applet's `RxBuf`, which
//! the micro applets' `doRx` variants find already filled).
//! `find_applet` is one measurement (the engine's wrapper around an
//! invocation, with no applet code run), shown for both directions. Steps
//! of one direction add up to `end_to_end`; `null_native` is per call and,
//! as in the paper, outside the sum. `tx_push` and `descriptor_push`
//! include the sink copy and the ring write the no-applet path does too,
//! which `total` subtracts.
//!
//! Before timing, both paths are checked to do the work: a sent message
//! must reach the sink intact and an arrival must come out of the receive
//! ring (inline or in the buffer named) equal to what was sent. An applet
//! fault during the run fails the command.

use std::collections::VecDeque;
use std::hint::black_box;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use unet_abi::ring::Ring;
use unet_abi::RING_HEADER_SIZE;
use unet_abi::{RecvDesc, SendDesc, INLINE_MAX, MAX_MESSAGE, MAX_RX_BUFFERS, RECV_INLINE};
use unet_sle::{self as sle, Applet, SleEndpoint};
use unet_sys::Segment;

use super::applet_build;
use super::report::Progress;
use super::stats::{clock_cost_ns, median_f64};

#[derive(clap::Args)]
pub struct Args {
    /// Repetitions of every measurement; medians are reported.
    #[arg(long, default_value_t = 7)]
    pub reps: usize,
    /// Timed batches (of 32 messages) per variant and repetition.
    #[arg(long, default_value_t = 300)]
    pub batches: usize,
    /// A fast, rough run (3 repetitions of 30 batches), for tests.
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object per step.
    #[arg(long)]
    pub json: bool,
    /// Directory holding RawUnet.java (default: the source checkout's
    /// `applets/`).
    #[arg(long, value_name = "DIR")]
    pub applets_dir: Option<PathBuf>,
    /// Source directory of the applet SDK (default: the source checkout's
    /// `java/applet-sdk/src/main/java`).
    #[arg(long, value_name = "DIR")]
    pub sdk_dir: Option<PathBuf>,
    /// Keep the temporary build directory and print its path.
    #[arg(long)]
    pub keep: bool,
    /// Run the applets interpreted (by default they run as JIVE compiles
    /// them, as in the engine once its compiler thread is done).
    #[arg(long)]
    pub interpret: bool,
}

/// Message sizes of the paper's Figure 7.
const SIZES: [usize; 2] = [40, 1000];
/// Messages per timed batch (at most the free and receive ring capacity).
const BATCH: usize = 32;
/// Calls of `getFreeBufferLength()` in the null-native applet.
const NATIVE_CALLS: usize = 16;
/// The paper's target for the overhead RawUnet adds per message, both ways.
const TARGET_NS: f64 = 150.0;

const AREA_SIZE: usize = 256 << 10;
const BUF_SIZE: u32 = 2048;
const NBUFS: u32 = 64;
const FIRST_BUF: u32 = 8192;
const RING_CAP: u32 = 64;
const FREE_RING_AT: usize = AREA_SIZE;
const RECV_RING_AT: usize = AREA_SIZE + 4096;
const SEG_SIZE: usize = AREA_SIZE + 4096 + RING_HEADER_SIZE + RING_CAP as usize * 64;
/// The send buffer `doTx` reads from.
const SEND_OFF: u32 = 0;
/// The channel every message goes out on or arrives from.
const CHAN: u16 = 1;

// Counter slots, as the engine's per-endpoint counters.
const C_TX_MSGS: usize = 0;
const C_TX_BYTES: usize = 1;
const C_RX_MSGS: usize = 2;
const C_RX_BYTES: usize = 3;
const C_RX_DROP: usize = 4;
const C_APPLET_TX: usize = 5;
const C_APPLET_RX: usize = 6;
const C_APPLET_TIMER: usize = 7;
const C_APPLET_NS: usize = 8;
const C_APPLET_FUEL: usize = 9;
const C_APPLET_MAX: usize = 10;
const C_FAULT: usize = 11;
const NCOUNTERS: usize = 16;

pub fn run(a: Args) -> ExitCode {
    match bench(a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("unet bench overhead: {e}");
            ExitCode::from(1)
        }
    }
}

// -------------------------------------------------------------------------
// The endpoint and the engine's per-message code
// -------------------------------------------------------------------------

/// One endpoint, as the engine keeps it.
struct Ep {
    id: u32,
    slot: usize,
    area: NonNull<u8>,
    area_size: u64,
    buffer_size: u32,
    free: Ring<u32>,
    recv: Ring<RecvDesc>,
    recv_head: u64,
    spare: Vec<u32>,
    /// Channels held (true) by index.
    channels: Vec<bool>,
    applet: Option<Box<Applet>>,
    applet_pause: Option<Instant>,
    client_sleeping: AtomicU32,
}

/// The engine's state the per-message paths touch.
struct Host {
    eps: Vec<Option<Ep>>,
    counters: Vec<AtomicU64>,
    /// Where transmitted packets are copied.
    sink: Vec<u8>,
    pending_rx: VecDeque<(usize, u32, u16, Vec<u8>)>,
    rx_pool: Vec<Vec<u8>>,
    /// Owns the memory `eps[0]`'s area and rings point into; dropped last.
    _seg: Segment,
}

impl Host {
    fn new() -> Result<Host, String> {
        let seg = Segment::create("unet-bench-overhead", SEG_SIZE)
            .map_err(|e| format!("cannot create the buffer segment: {e}"))?;
        let at = |off: usize, len: usize| {
            seg.at(off, len)
                .ok_or_else(|| format!("segment layout: {off}+{len} outside {SEG_SIZE}"))
        };
        let area = at(0, AREA_SIZE)?;
        let free_hdr = at(FREE_RING_AT, RING_HEADER_SIZE + RING_CAP as usize * 4)?;
        let recv_hdr = at(RECV_RING_AT, RING_HEADER_SIZE + RING_CAP as usize * 64)?;
        // SAFETY: both headers lie inside `seg` (checked by `at`), are
        // 64-byte aligned (page-aligned base, offsets multiples of 4096) and
        // followed by RING_CAP (a power of two) entries; `seg` lives in the
        // same Host as the rings and is dropped after them (fields drop in
        // declaration order, `_seg` last).
        let (free, recv) = unsafe {
            (
                Ring::<u32>::from_raw(free_hdr, RING_CAP),
                Ring::<RecvDesc>::from_raw(recv_hdr, RING_CAP),
            )
        };
        free.init(4);
        recv.init(std::mem::size_of::<RecvDesc>() as u32);
        let ep = Ep {
            id: 7,
            slot: 0,
            area,
            area_size: AREA_SIZE as u64,
            buffer_size: BUF_SIZE,
            free,
            recv,
            recv_head: 0,
            spare: Vec::with_capacity(RING_CAP as usize),
            channels: vec![false, true],
            applet: None,
            applet_pause: None,
            client_sleeping: AtomicU32::new(0),
        };
        let mut h = Host {
            eps: vec![Some(ep)],
            counters: (0..NCOUNTERS).map(|_| AtomicU64::new(0)).collect(),
            sink: vec![0; 4096],
            pending_rx: VecDeque::with_capacity(64),
            rx_pool: Vec::with_capacity(64),
            _seg: seg,
        };
        h.reset();
        Ok(h)
    }

    fn ep(&mut self) -> &mut Ep {
        self.eps[0].as_mut().expect("the endpoint is live")
    }

    /// The client's side, between batches: consume every receive
    /// descriptor and post all receive buffers to the free ring again.
    fn reset(&mut self) {
        while let Some((_, _, _, b)) = self.pending_rx.pop_front() {
            self.rx_pool.push(b);
        }
        let ep = self.ep();
        ep.recv.set_tail(ep.recv_head);
        ep.spare.clear();
        ep.applet_pause = None;
        let t = ep.free.tail();
        for i in 0..NBUFS {
            ep.free.write(t + i as u64, FIRST_BUF + i * BUF_SIZE);
        }
        ep.free.set_head(t + NBUFS as u64);
    }

    fn count(&self, slot: usize, c: usize, n: u64) {
        let a = &self.counters[slot * NCOUNTERS + c];
        a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    fn read_area(ep: &Ep, off: u64, out: &mut [u8]) {
        assert!(off + out.len() as u64 <= ep.area_size);
        // SAFETY: off + len is inside the area (asserted), which is inside
        // the live segment; `out` is a distinct Rust slice.
        unsafe {
            std::ptr::copy(
                ep.area.as_ptr().add(off as usize),
                out.as_mut_ptr(),
                out.len(),
            )
        };
    }

    fn write_area(ep: &Ep, off: u64, data: &[u8]) {
        assert!(off + data.len() as u64 <= ep.area_size);
        // SAFETY: as in read_area, in the other direction.
        unsafe {
            std::ptr::copy(
                data.as_ptr(),
                ep.area.as_ptr().add(off as usize),
                data.len(),
            )
        };
    }

    /// The engine's `process_send` descriptor checks; the channel on success.
    fn validate(&self, idx: usize, d: SendDesc) -> Option<u16> {
        let ep = self.eps[idx].as_ref()?;
        if d.flags != 0 || d.len == 0 || d.len as usize > MAX_MESSAGE {
            return None;
        }
        if d.offset as u64 + d.len as u64 > ep.area_size {
            return None;
        }
        match ep.channels.get(d.channel as usize) {
            Some(true) => Some(d.channel),
            _ => None,
        }
    }

    /// The no-applet send's copy: counters, then the packet into the sink.
    fn send_copy(&mut self, idx: usize, d: SendDesc) {
        let ep = self.eps[idx].as_ref().expect("live");
        let slot = ep.slot;
        let (off, len) = (d.offset as u64, d.len as usize);
        Self::read_area(ep, off, &mut self.sink[..len]);
        self.count(slot, C_TX_MSGS, 1);
        self.count(slot, C_TX_BYTES, len as u64);
    }

    /// The engine's `process_send`.
    fn process_send(&mut self, idx: usize, d: SendDesc) -> bool {
        if self.validate(idx, d).is_none() {
            return false;
        }
        if self.eps[idx].as_ref().is_some_and(|e| e.applet.is_some()) {
            return self.run_applet(idx, |a, e| a.tx(e, d.len, d.channel, d.offset));
        }
        self.send_copy(idx, d);
        true
    }

    /// An applet's txPush (the engine's `transmit`).
    fn transmit(&mut self, idx: usize, chan: u16, data: &[u8]) -> Result<(), String> {
        if self.transmit_held(idx, chan, data) {
            return Ok(());
        }
        Err(format!("channel {chan} is not held by this endpoint"))
    }

    /// The engine's `transmit_held` (compiled `txPush`'s common case).
    fn transmit_held(&mut self, idx: usize, chan: u16, data: &[u8]) -> bool {
        let Some(ep) = self.eps[idx].as_ref() else {
            return false;
        };
        let slot = ep.slot;
        if ep.channels.get(chan as usize) != Some(&true) {
            return false;
        }
        self.count(slot, C_TX_MSGS, 1);
        self.count(slot, C_TX_BYTES, data.len() as u64);
        self.sink[..data.len()].copy_from_slice(data);
        true
    }

    /// The engine's `deliver`.
    fn deliver(&mut self, di: usize, dst_id: u32, chan: u16, src: &[u8]) -> bool {
        let Some(dst) = self.eps.get_mut(di).and_then(|e| e.as_mut()) else {
            return false;
        };
        if dst.id != dst_id {
            return false;
        }
        if dst.applet.is_some() {
            let paused = dst.applet_pause.is_some_and(|t| Instant::now() < t);
            if self.pending_rx.is_empty() && !paused && self.rx_now(di, chan, src) {
                return true;
            }
            if self.pending_rx.len() >= 4096 {
                return false;
            }
            let mut buf = self.rx_pool.pop().unwrap_or_default();
            buf.clear();
            buf.extend_from_slice(src);
            self.pending_rx.push_back((di, dst_id, chan, buf));
            return true;
        }
        if dst.recv_head.wrapping_sub(dst.recv.tail()) >= RING_CAP as u64 {
            let slot = dst.slot;
            self.count(slot, C_RX_DROP, 1);
            return false;
        }
        let desc = match Self::rx_copy(dst, chan, src) {
            Some(d) => d,
            None => {
                let slot = dst.slot;
                self.count(slot, C_RX_DROP, 1);
                return false;
            }
        };
        Self::push_recv_desc(dst, &self.counters, desc)
    }

    /// The engine's `rx_now`: the arrival copied once, straight into the
    /// applet's `RxBuf`, and `doRx` run on it.
    fn rx_now(&mut self, di: usize, chan: u16, src: &[u8]) -> bool {
        let Some(applet) = self.eps[di].as_mut().and_then(|e| e.applet.as_mut()) else {
            return false;
        };
        let Ok(buf) = applet.rx_buffer(src.len()) else {
            return false;
        };
        buf[..src.len()].copy_from_slice(src);
        self.run_applet(di, |a, e| a.rx_in_place(e, src.len(), chan));
        true
    }

    /// `deliver`'s buffer part: inline, or popped free buffers and the copy.
    fn rx_copy(dst: &mut Ep, chan: u16, src: &[u8]) -> Option<RecvDesc> {
        let len = src.len();
        let mut desc = RecvDesc {
            len: len as u32,
            channel: chan,
            ..Default::default()
        };
        if len <= INLINE_MAX {
            desc.flags = RECV_INLINE;
            desc.data[..len].copy_from_slice(src);
            return Some(desc);
        }
        let bs = dst.buffer_size as usize;
        let nbufs = unet_abi::buffers_spanned(len, bs);
        if nbufs > MAX_RX_BUFFERS {
            return None;
        }
        let mut got = [0u32; MAX_RX_BUFFERS];
        for i in 0..nbufs {
            match pop_free(dst) {
                Some(o) => got[i] = o,
                None => {
                    dst.spare.extend_from_slice(&got[..i]);
                    return None;
                }
            }
        }
        for (i, &off) in got[..nbufs].iter().enumerate() {
            let n = bs.min(len - i * bs);
            Self::write_area(dst, off as u64, &src[i * bs..i * bs + n]);
            desc.set_offset(i, off);
        }
        desc.nbufs = nbufs as u8;
        Some(desc)
    }

    /// Push a receive descriptor (the engine's `push_recv` of an applet,
    /// and the end of `deliver`): ring space, write, publish, count, wake.
    fn push_recv_desc(ep: &mut Ep, counters: &[AtomicU64], desc: RecvDesc) -> bool {
        let count = |c: usize, n: u64| {
            let a = &counters[ep.slot * NCOUNTERS + c];
            a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        };
        if ep.recv_head.wrapping_sub(ep.recv.tail()) >= RING_CAP as u64 {
            count(C_RX_DROP, 1);
            if desc.flags & RECV_INLINE == 0 {
                for i in 0..(desc.nbufs as usize).min(MAX_RX_BUFFERS) {
                    ep.spare.push(desc.offset(i));
                }
            }
            return false;
        }
        ep.recv.write(ep.recv_head, desc);
        ep.recv_head += 1;
        ep.recv.set_head(ep.recv_head);
        count(C_RX_MSGS, 1);
        count(C_RX_BYTES, desc.len as u64);
        fence(Ordering::SeqCst);
        if ep.client_sleeping.load(Ordering::Relaxed) != 0 {
            // No client sleeps here; the engine would wake it.
            count(C_FAULT, 1);
        }
        true
    }

    /// The engine's `run_pending_rx` for the arrivals queued by `deliver`;
    /// with `run` false, only its bookkeeping (the applet is not called).
    fn run_pending_rx(&mut self, run: bool) -> usize {
        let mut n = 0;
        let todo = self.pending_rx.len().min(256);
        for _ in 0..todo {
            let Some((idx, id, chan, buf)) = self.pending_rx.pop_front() else {
                break;
            };
            let live = self
                .eps
                .get(idx)
                .and_then(|e| e.as_ref())
                .is_some_and(|e| e.id == id);
            let paused = live
                && self.eps[idx]
                    .as_ref()
                    .and_then(|e| e.applet_pause)
                    .is_some_and(|t| Instant::now() < t);
            if paused {
                self.pending_rx.push_back((idx, id, chan, buf));
                continue;
            }
            if live && run && self.eps[idx].as_ref().is_some_and(|e| e.applet.is_some()) {
                self.run_applet(idx, |a, e| a.rx(e, &buf, chan));
            }
            if self.rx_pool.len() < 64 {
                self.rx_pool.push(buf);
            }
            n += 1;
        }
        n
    }

    /// The engine's `run_applet`: take the applet out of the endpoint, run
    /// `f` with the endpoint's view, account, put it back.
    fn run_applet(
        &mut self,
        idx: usize,
        f: impl FnOnce(&mut Applet, &mut dyn SleEndpoint) -> Result<(), jive::Fault>,
    ) -> bool {
        let Some(mut applet) = self.eps[idx].as_mut().and_then(|e| e.applet.take()) else {
            return false;
        };
        let before = applet.stats;
        let epoch = applet.epoch();
        let r = {
            let mut e = View {
                host: self,
                idx,
                epoch,
            };
            f(&mut applet, &mut e)
        };
        let Some(ep) = self.eps[idx].as_mut() else {
            return r.is_ok();
        };
        let spent = Duration::from_nanos(applet.stats.total_ns - before.total_ns);
        if let Some(p) = sle::pause_after(spent, applet.stats.fuel - before.fuel) {
            ep.applet_pause = Some(Instant::now() + p);
        }
        let slot = ep.slot;
        let s = applet.stats;
        let ok = r.is_ok();
        ep.applet = Some(applet);
        self.count(slot, C_APPLET_TX, s.tx_calls - before.tx_calls);
        self.count(slot, C_APPLET_RX, s.rx_calls - before.rx_calls);
        self.count(slot, C_APPLET_TIMER, s.timer_calls - before.timer_calls);
        self.count(slot, C_APPLET_NS, s.total_ns - before.total_ns);
        self.count(slot, C_APPLET_FUEL, s.fuel - before.fuel);
        let max = self.counters[slot * NCOUNTERS + C_APPLET_MAX].load(Ordering::Relaxed);
        if s.max_ns > max {
            self.count(slot, C_APPLET_MAX, s.max_ns - max);
        }
        if !ok {
            self.count(slot, C_FAULT, 1);
        }
        ok
    }
}

/// The engine's `pop_free`: the stash first, then the free ring (claimed by
/// compare-and-swap, offsets checked).
fn pop_free(ep: &mut Ep) -> Option<u32> {
    if let Some(o) = ep.spare.pop() {
        return Some(o);
    }
    let limit = ep.area_size - ep.buffer_size as u64;
    for _ in 0..8 {
        let t = ep.free.tail();
        let h = ep.free.head();
        let n = h.wrapping_sub(t);
        if n == 0 || n > RING_CAP as u64 {
            return None;
        }
        let off = ep.free.read(t);
        if ep.free.cas_tail(t) {
            if off as u64 > limit {
                continue;
            }
            return Some(off);
        }
    }
    None
}

/// The endpoint as an applet's natives see it (the engine's `EngineEp`).
struct View<'a> {
    host: &'a mut Host,
    idx: usize,
    epoch: Instant,
}

impl View<'_> {
    fn ep(&self) -> &Ep {
        self.host.eps[self.idx].as_ref().expect("live")
    }
    fn ep_mut(&mut self) -> &mut Ep {
        self.host.eps[self.idx].as_mut().expect("live")
    }
}

impl unet_sle::Port for View<'_> {
    fn area_size(&self) -> u64 {
        self.ep().area_size
    }
    fn area(&mut self) -> NonNull<u8> {
        self.ep().area
    }
    fn buffer_size(&self) -> u32 {
        self.ep().buffer_size
    }
    fn pop_free(&mut self) -> Option<u32> {
        pop_free(self.ep_mut())
    }
    fn push_free(&mut self, off: u32) -> bool {
        let ep = self.ep_mut();
        if ep.spare.len() >= RING_CAP as usize {
            return false;
        }
        ep.spare.push(off);
        true
    }
    fn tx_push(&mut self, chan: u16, data: &[u8]) -> Result<(), String> {
        self.host.transmit(self.idx, chan, data)
    }
    fn try_tx_push(&mut self, chan: u16, data: &[u8]) -> bool {
        self.host.transmit_held(self.idx, chan, data)
    }
    fn push_recv(&mut self, desc: RecvDesc) -> bool {
        let h = &mut *self.host;
        let ep = h.eps[self.idx].as_mut().expect("live");
        Host::push_recv_desc(ep, &h.counters, desc)
    }
}

impl SleEndpoint for View<'_> {
    fn now_us(&self) -> i32 {
        sle::now_us_since(self.epoch)
    }
    fn set_timer(&mut self, _delay_us: u32, _arg: i32) -> Result<(), String> {
        Err("timers are not part of this benchmark".into())
    }
}

// -------------------------------------------------------------------------
// The applets
// -------------------------------------------------------------------------

/// (class, doTx body, doRx body) of the micro applets.
const MICRO: [(&str, &str, &str); 6] = [
    ("OvEmpty", "return 0;", "return 0;"),
    ("OvNative", NATIVE16, NATIVE16),
    (
        "OvDma0",
        "doHtoLDMA(TxBuf, 0, off, 0); return 0;",
        "doLtoHDMA(RxBuf, 0, 4096, 0); return 0;",
    ),
    (
        "OvDma",
        "doHtoLDMA(TxBuf, 0, off, length); return 0;",
        "doLtoHDMA(RxBuf, 0, 4096, length); return 0;",
    ),
    (
        "OvPush",
        "txPush(TxBuf, 0, channel, length); return 0;",
        "if (length <= 56) { dmaRxdPayload(RxBuf, channel, length); } \
         else { offsets[0] = 4096; dmaRxd(offsets, channel, length); } return 0;",
    ),
    (
        "OvGetFree",
        "return 0;",
        "int o = getFreeBuffer(); if (o == -1) return 0; return 0;",
    ),
];

const NATIVE16: &str = "getFreeBufferLength(); getFreeBufferLength(); getFreeBufferLength(); \
    getFreeBufferLength(); getFreeBufferLength(); getFreeBufferLength(); \
    getFreeBufferLength(); getFreeBufferLength(); getFreeBufferLength(); \
    getFreeBufferLength(); getFreeBufferLength(); getFreeBufferLength(); \
    getFreeBufferLength(); getFreeBufferLength(); getFreeBufferLength(); \
    getFreeBufferLength(); return 0;";

fn micro_source(class: &str, tx: &str, rx: &str) -> String {
    format!(
        "import static unet.sle.Natives.*;\n\n\
         public class {class} {{\n\
         \x20 public static byte[] TxBuf;\n\
         \x20 public static byte[] RxBuf;\n\
         \x20 public static int[] offsets;\n\n\
         \x20 {class}() {{\n\
         \x20   TxBuf = newAlignedArray(4096);\n\
         \x20   offsets = new int[14];\n\
         \x20 }}\n\n\
         \x20 private static int doTx(int length, int channel, int off) {{\n\
         \x20   {tx}\n\
         \x20 }}\n\n\
         \x20 private static int doRx(int length, int channel) {{\n\
         \x20   {rx}\n\
         \x20 }}\n\
         }}\n"
    )
}

/// Compiles the micro applets and RawUnet; their class files by name.
fn compile(a: &Args) -> Result<Vec<(String, Vec<u8>)>, String> {
    let (mut files, sdk) =
        applet_build::sources(a.applets_dir.as_deref(), a.sdk_dir.as_deref(), &["RawUnet"])?;
    let tmp = applet_build::BuildDir::new("overhead", a.keep)?;
    let src = tmp.path.join("src");
    let classes = tmp.path.join("classes");
    std::fs::create_dir_all(&src).map_err(|e| format!("{}: {e}", src.display()))?;
    for (class, tx, rx) in MICRO {
        let p = src.join(format!("{class}.java"));
        std::fs::write(&p, micro_source(class, tx, rx))
            .map_err(|e| format!("{}: {e}", p.display()))?;
        files.push(p);
    }
    applet_build::javac(&sdk, &classes, &files)?;
    let mut out = Vec::new();
    for name in MICRO.iter().map(|m| m.0).chain(["RawUnet"]) {
        let p = classes.join(format!("{name}.class"));
        let bytes = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        out.push((name.to_string(), bytes));
    }
    Ok(out)
}

// -------------------------------------------------------------------------
// Measurement
// -------------------------------------------------------------------------

/// Median time per message of `op` over `batches` batches of [`BATCH`]
/// (after a few untimed ones), the state reset between batches.
fn time_op(h: &mut Host, batches: usize, clock_ns: f64, op: &mut dyn FnMut(&mut Host)) -> f64 {
    let warm = 3 + batches / 10;
    let mut v = Vec::with_capacity(batches);
    for i in 0..warm + batches {
        h.reset();
        let t = Instant::now();
        for _ in 0..BATCH {
            op(h);
        }
        let ns = t.elapsed().as_nanos() as f64;
        if i >= warm {
            v.push((ns - clock_ns) / BATCH as f64);
        }
    }
    median_f64(&v)
}

/// One timed variant: an applet to attach (or none) and the operation.
struct Variant<'a> {
    key: String,
    applet: Option<&'static str>,
    op: Box<dyn FnMut(&mut Host) + 'a>,
}

fn send_desc(len: usize) -> SendDesc {
    SendDesc {
        offset: SEND_OFF,
        len: len as u32,
        channel: CHAN,
        ..Default::default()
    }
}

fn variants(pkt: &[u8]) -> Vec<Variant<'_>> {
    let mut v: Vec<Variant<'_>> = Vec::new();
    fn push<'a>(
        v: &mut Vec<Variant<'a>>,
        key: String,
        applet: Option<&'static str>,
        op: Box<dyn FnMut(&mut Host) + 'a>,
    ) {
        v.push(Variant { key, applet, op })
    }
    macro_rules! add {
        ($k:expr, $a:expr, $op:expr $(,)?) => {
            push(&mut v, $k, $a, $op)
        };
    }
    add!(
        "wrap".into(),
        Some("OvEmpty"),
        Box::new(|h| {
            black_box(h.run_applet(0, |_, _| Ok(())));
        }),
    );
    for s in SIZES {
        let d = send_desc(s);
        let data = &pkt[..s];
        add!(
            format!("tx.{s}.validate"),
            None,
            Box::new(move |h| {
                black_box(h.validate(0, black_box(d)));
            }),
        );
        add!(
            format!("tx.{s}.copy"),
            None,
            Box::new(move |h| h.send_copy(0, black_box(d))),
        );
        add!(
            format!("tx.{s}.none"),
            None,
            Box::new(move |h| {
                black_box(h.process_send(0, black_box(d)));
            }),
        );
        for class in ["OvEmpty", "OvNative", "OvDma0", "OvDma", "OvPush"] {
            add!(
                format!("tx.{s}.{class}"),
                Some(class),
                Box::new(move |h| {
                    black_box(h.run_applet(0, |a, e| a.tx(e, d.len, d.channel, d.offset)));
                }),
            );
        }
        add!(
            format!("tx.{s}.RawUnet"),
            Some("RawUnet"),
            Box::new(move |h| {
                black_box(h.process_send(0, black_box(d)));
            }),
        );

        if s > INLINE_MAX {
            add!(
                format!("rx.{s}.get_free"),
                None,
                Box::new(|h| {
                    black_box(pop_free(h.ep()));
                }),
            );
        }
        add!(
            format!("rx.{s}.copy"),
            None,
            Box::new(move |h| {
                let ep = h.ep();
                if data.len() <= INLINE_MAX {
                    let mut desc = RecvDesc::default();
                    desc.data[..data.len()].copy_from_slice(black_box(data));
                    black_box(&desc);
                } else {
                    Host::write_area(ep, black_box(FIRST_BUF as u64), data);
                }
            }),
        );
        add!(
            format!("rx.{s}.push"),
            None,
            Box::new(move |h| {
                let desc = RecvDesc {
                    len: data.len() as u32,
                    channel: CHAN,
                    ..Default::default()
                };
                let hh = &mut *h;
                let ep = hh.eps[0].as_mut().expect("live");
                black_box(Host::push_recv_desc(ep, &hh.counters, black_box(desc)));
            }),
        );
        add!(
            format!("rx.{s}.none"),
            None,
            Box::new(move |h| {
                black_box(h.deliver(0, 7, CHAN, black_box(data)));
            }),
        );
        add!(
            format!("rx.{s}.rxbuf"),
            Some("OvEmpty"),
            Box::new(move |h| {
                if let Some(Ok(b)) = h.ep().applet.as_mut().map(|a| a.rx_buffer(data.len())) {
                    b[..data.len()].copy_from_slice(black_box(data));
                }
            }),
        );
        for class in [
            "OvEmpty",
            "OvNative",
            "OvDma0",
            "OvDma",
            "OvPush",
            "OvGetFree",
        ] {
            add!(
                format!("rx.{s}.{class}"),
                Some(class),
                Box::new(move |h| {
                    black_box(h.run_applet(0, |a, e| a.rx_in_place(e, data.len(), CHAN)));
                }),
            );
        }
        add!(
            format!("rx.{s}.RawUnet"),
            Some("RawUnet"),
            Box::new(move |h| {
                h.deliver(0, 7, CHAN, black_box(data));
                black_box(h.run_pending_rx(true));
            }),
        );
    }
    v
}

/// Checks, before timing, that both paths do the work being timed: with
/// and without RawUnet, a sent message lands in the sink and an arriving one
/// in a receive descriptor (inline, or in the buffer it names).
fn verify(h: &mut Host, raw: Box<Applet>, pkt: &[u8]) -> Result<Box<Applet>, String> {
    let mut raw = Some(raw);
    for with_applet in [false, true] {
        let who = if with_applet { "RawUnet" } else { "no applet" };
        h.ep().applet = if with_applet { raw.take() } else { None };
        for s in SIZES {
            h.reset();
            h.sink.fill(0);
            if !h.process_send(0, send_desc(s)) || h.sink[..s] != pkt[..s] {
                return Err(format!(
                    "{who}: a {s}-byte send did not reach the sink intact"
                ));
            }
            if !h.deliver(0, 7, CHAN, &pkt[..s]) {
                return Err(format!("{who}: a {s}-byte arrival was dropped"));
            }
            h.run_pending_rx(true);
            let ep = h.ep();
            if ep.recv_head != ep.recv.tail() + 1 {
                return Err(format!("{who}: a {s}-byte arrival pushed no descriptor"));
            }
            let d = ep.recv.read(ep.recv_head - 1);
            let mut got = vec![0u8; s];
            if d.flags & RECV_INLINE != 0 {
                got.copy_from_slice(&d.data[..s.min(INLINE_MAX)]);
            } else if d.nbufs == 1 {
                Host::read_area(ep, d.offset(0) as u64, &mut got);
            }
            if d.len as usize != s || d.channel != CHAN || got != pkt[..s] {
                return Err(format!(
                    "{who}: a {s}-byte arrival was received wrong: {d:?}"
                ));
            }
        }
        if with_applet {
            raw = h.ep().applet.take();
        }
    }
    h.reset();
    raw.ok_or_else(|| "RawUnet was detached while being checked".to_string())
}

/// One reported step.
struct Row {
    dir: &'static str,
    size: usize,
    applet: &'static str,
    step: &'static str,
    ns: f64,
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn bench(mut a: Args) -> Result<(), String> {
    if a.quick {
        a.reps = 3;
        a.batches = 30;
    }
    a.reps = a.reps.max(1);
    a.batches = a.batches.max(1);
    let classes = compile(&a)?;

    let mut h = Host::new()?;
    let mut loaded: Vec<(String, Option<Box<Applet>>)> = Vec::new();
    for (name, bytes) in &classes {
        let mut view = View {
            host: &mut h,
            idx: 0,
            epoch: Instant::now(),
        };
        let mut applet = Applet::load(bytes, sle::default_limits(), &mut view)
            .map_err(|e| format!("{name}: {e}"))?;
        if a.interpret {
            applet.keep_interpreted();
        } else {
            applet.wait_compiled();
        }
        // Timed as the engine times the applets placed in it.
        applet.set_time_sampling(sle::ENGINE_TIME_SAMPLE, sle::ENGINE_EXACT_FUEL);
        loaded.push((name.clone(), Some(Box::new(applet))));
    }

    // Contents of the send buffer and of the arriving packets.
    let pkt: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
    Host::write_area(h.ep(), SEND_OFF as u64, &pkt[..1000]);

    let raw = loaded
        .iter_mut()
        .find(|(n, _)| n == "RawUnet")
        .and_then(|(_, a)| a.take())
        .ok_or("RawUnet not loaded")?;
    let raw = verify(&mut h, raw, &pkt)?;
    if let Some(slot) = loaded.iter_mut().find(|(n, _)| n == "RawUnet") {
        slot.1 = Some(raw);
    }

    let mut vars = variants(&pkt);
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); vars.len()];
    let progress = Progress::new();
    let mut clocks = Vec::new();
    for rep in 0..a.reps {
        progress.show(&format!(
            "[bench overhead] repetition {}/{}",
            rep + 1,
            a.reps
        ));
        let clock = clock_cost_ns() as f64;
        clocks.push(clock);
        for (i, var) in vars.iter_mut().enumerate() {
            if let Some(name) = var.applet {
                let slot = loaded
                    .iter_mut()
                    .find(|(n, _)| n == name)
                    .ok_or_else(|| format!("applet {name} not loaded"))?;
                h.ep().applet = slot.1.take();
            }
            results[i].push(time_op(&mut h, a.batches, clock, &mut var.op));
            if let Some(name) = var.applet {
                let back = h.ep().applet.take();
                if let Some(slot) = loaded.iter_mut().find(|(n, _)| n == name) {
                    slot.1 = back;
                }
            }
        }
    }
    progress.clear();
    for (name, applet) in &loaded {
        let faults: u64 = applet.as_ref().map_or(0, |x| x.stats.faults.iter().sum());
        if faults > 0 {
            return Err(format!(
                "applet {name} faulted {faults} times during the run; figures would be wrong"
            ));
        }
    }
    let idx = |key: &str| -> usize {
        vars.iter()
            .position(|v| v.key == key)
            .unwrap_or_else(|| panic!("no variant {key}"))
    };
    let med = |key: &str| -> f64 { median_f64(&results[idx(key)]) };
    // Variant `a` less variant `b`, paired by repetition.
    let diff = |a: &str, b: &str| -> f64 {
        let (a, b) = (&results[idx(a)], &results[idx(b)]);
        let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
        median_f64(&d)
    };

    let mut rows = Vec::new();
    let wrap = med("wrap");
    for s in SIZES {
        let t = |k: &str| med(&format!("tx.{s}.{k}"));
        let td = |a: &str, b: &str| diff(&format!("tx.{s}.{a}"), &format!("tx.{s}.{b}"));
        let mut r = |dir, applet, step, ns| {
            rows.push(Row {
                dir,
                size: s,
                applet,
                step,
                ns,
            })
        };
        let (raw, none) = (t("RawUnet"), t("none"));
        r("tx", "RawUnet", "validate", t("validate"));
        r("tx", "RawUnet", "find_applet", wrap);
        r(
            "tx",
            "RawUnet",
            "call_return",
            diff(&format!("tx.{s}.OvEmpty"), "wrap"),
        );
        let nn = td("OvNative", "OvEmpty") / NATIVE_CALLS as f64;
        r("tx", "RawUnet", "null_native", nn);
        r("tx", "RawUnet", "dma_setup", td("OvDma0", "OvEmpty"));
        r("tx", "RawUnet", "data_movement", td("OvDma", "OvDma0"));
        r("tx", "RawUnet", "tx_push", td("OvPush", "OvEmpty"));
        r("tx", "RawUnet", "end_to_end", raw);
        r("tx", "RawUnet", "total", td("RawUnet", "none"));
        r("tx", "none", "validate", t("validate"));
        r("tx", "none", "copy", t("copy"));
        r("tx", "none", "total", none);

        let x = |k: &str| med(&format!("rx.{s}.{k}"));
        let xd = |a: &str, b: &str| diff(&format!("rx.{s}.{a}"), &format!("rx.{s}.{b}"));
        let (raw, none) = (x("RawUnet"), x("none"));
        r("rx", "RawUnet", "rxbuf_copy", x("rxbuf"));
        r("rx", "RawUnet", "find_applet", wrap);
        r(
            "rx",
            "RawUnet",
            "call_return",
            diff(&format!("rx.{s}.OvEmpty"), "wrap"),
        );
        let nn = xd("OvNative", "OvEmpty") / NATIVE_CALLS as f64;
        r("rx", "RawUnet", "null_native", nn);
        if s > INLINE_MAX {
            r(
                "rx",
                "RawUnet",
                "get_free_buffer",
                xd("OvGetFree", "OvEmpty"),
            );
            r("rx", "RawUnet", "dma_setup", xd("OvDma0", "OvEmpty"));
            r("rx", "RawUnet", "data_movement", xd("OvDma", "OvDma0"));
        }
        r("rx", "RawUnet", "descriptor_push", xd("OvPush", "OvEmpty"));
        r("rx", "RawUnet", "end_to_end", raw);
        r("rx", "RawUnet", "total", xd("RawUnet", "none"));
        if s > INLINE_MAX {
            r("rx", "none", "get_free_buffer", x("get_free"));
        }
        r("rx", "none", "copy", x("copy"));
        r("rx", "none", "descriptor_push", x("push"));
        r("rx", "none", "total", none);
    }

    let load = load_average();
    let clock_ns = median_f64(&clocks);
    if a.json {
        let mut out = std::io::stdout().lock();
        for r in &rows {
            let target = (r.step == "total" && r.applet != "none").then_some(TARGET_NS);
            let _ = writeln!(
                out,
                "{}",
                json!({
                    "bench": "overhead",
                    "direction": r.dir,
                    "size": r.size,
                    "applet": r.applet,
                    "step": r.step,
                    "ns": r.ns,
                    "target_ns": target,
                    "reps": a.reps,
                    "batches": a.batches,
                    "batch": BATCH,
                    "load_average": load,
                    "clock_ns": clock_ns,
                    "jive": if a.interpret { "interpreted" } else { "compiled" },
                })
            );
        }
    } else {
        print_table(&rows, &a, &load, clock_ns);
    }
    Ok(())
}

/// Order of the steps in the table.
const STEP_ORDER: [&str; 13] = [
    "validate",
    "rxbuf_copy",
    "find_applet",
    "call_return",
    "null_native",
    "get_free_buffer",
    "dma_setup",
    "data_movement",
    "copy",
    "tx_push",
    "descriptor_push",
    "end_to_end",
    "total",
];

/// The paper's Figure 7 (LanAI, µs), 40-byte / 1000-byte, for the steps
/// that have a counterpart there.
fn paper(dir: &str, step: &str) -> &'static str {
    match (dir, step) {
        ("tx", "find_applet") => "0.7 / 0.7",
        ("tx", "call_return") => "3.9 / 3.9",
        ("tx", "null_native") | ("rx", "null_native") => "(5.5 / 5.5)",
        ("tx", "dma_setup") => "11.8 / 11.8",
        ("tx", "tx_push") => "8.1 / 8.1",
        ("tx", "total") => "24.5 / 24.5",
        ("rx", "find_applet") => "0.6 / 0.6",
        ("rx", "call_return") => "3.2 / 3.2",
        ("rx", "get_free_buffer") => "- / 5.85",
        ("rx", "dma_setup") => "- / 11.8",
        ("rx", "descriptor_push") => "12.9 / 21.0",
        ("rx", "total") => "16.7 / 42.5",
        _ => "",
    }
}

fn print_table(rows: &[Row], a: &Args, load: &str, clock_ns: f64) {
    println!(
        "U-Net/SLE per-message overhead, ns: median of {} repetitions x {} batches of {} \
         (load average {load}; one clock read {clock_ns:.0} ns); applets {}",
        a.reps,
        a.batches,
        BATCH,
        if a.interpret {
            "interpreted (--interpret)"
        } else {
            "compiled by JIVE"
        }
    );
    for (dir, title) in [("tx", "Transmit"), ("rx", "Receive")] {
        for applet in ["RawUnet", "none"] {
            println!();
            let who = if applet == "none" {
                "no applet".to_string()
            } else {
                format!("{applet} applet")
            };
            let paper_head = if applet == "none" { "" } else { "paper, us" };
            let head = format!(
                "{:<36} {:>9} {:>9}   {paper_head}",
                format!("{title} overhead, {who}"),
                "40-byte",
                "1000-byte"
            );
            println!("{}", head.trim_end());
            let steps = STEP_ORDER.iter().copied().filter(|step| {
                rows.iter()
                    .any(|r| r.dir == dir && r.applet == applet && r.step == *step)
            });
            for step in steps {
                let cell = |size: usize| {
                    rows.iter()
                        .find(|r| {
                            r.dir == dir && r.applet == applet && r.step == step && r.size == size
                        })
                        .map_or("-".to_string(), |r| format!("{:.1}", r.ns))
                };
                let label = match step {
                    "total" if applet != "none" => "total (added)",
                    "null_native" => "(null_native)",
                    s => s,
                };
                let mut line = format!("  {label:<34} {:>9} {:>9}", cell(SIZES[0]), cell(SIZES[1]));
                if applet != "none" {
                    line.push_str(&format!("   {}", paper(dir, step)));
                }
                if step == "total" && applet != "none" {
                    let ok = SIZES.iter().all(|&s| {
                        rows.iter().any(|r| {
                            r.dir == dir
                                && r.applet == applet
                                && r.step == "total"
                                && r.size == s
                                && r.ns <= TARGET_NS
                        })
                    });
                    line.push_str(&format!(
                        "   target <= {TARGET_NS:.0} ns: {}",
                        if ok { "met" } else { "NOT met" }
                    ));
                }
                println!("{}", line.trim_end());
            }
        }
    }
    println!();
    println!(
        "end_to_end: RawUnet through the engine path; total (added) = end_to_end - no-applet total."
    );
    println!(
        "Each step and total is the median over repetitions of a difference taken within one repetition."
    );
    println!("(null_native) is per call and, as in the paper, not part of the sum.");
}
