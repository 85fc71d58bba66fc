//! `unet bench overhead`: the U-Net/SLE paper's Figure 7 — per-message
//! transmit and receive overhead of an applet, split by step, for 40-byte
//! and 1000-byte messages, beside the same path without an applet.
//!
//! Everything runs the engine's own code, in this process, through its
//! invoker mode: each configuration below is a [`Dispatcher`] of its own,
//! set up through the real control path (a [`LocalClient`] creates two
//! endpoints A and B with the same small geometry, opens an engine-path
//! channel from A to B and attaches the applet), and stepped on this
//! thread. The benchmark plays both clients by hand ([`RawEndpoint`]): it
//! pushes send descriptors on A, and between batches drains B's receive
//! ring and posts B's free buffers again. Nothing of the engine's
//! per-message code is copied here.
//!
//! - **Transmit**: the applet on A, none on B. The engine takes A's
//!   descriptors, checks them and runs A's `doTx` on each; what the
//!   applet's `txPush` sends is delivered into B's receive ring (U-Net
//!   delivery: inline, or in a free buffer of B's).
//! - **Receive**: no applet on A, the applet on B. The engine checks A's
//!   descriptors and delivers each to B through B's `doRx`, which it runs
//!   at once from the send path (nothing is queued before it), with the
//!   message lent to the applet's `RxBuf` where it is: every applet timed
//!   here passes `RxBuf` only to natives, in `doRx` only, so the engine
//!   copies nothing into it (JIVE's `Vm::lend_bytes`; an applet that
//!   reads `RxBuf` itself gets each message copied in first).
//! - **No applet** on either: the engine's plain path (descriptor checks,
//!   route, U-Net delivery into B).
//!
//! A timed batch pushes [`BATCH`] send descriptors on A (outside the
//! timing), then calls [`Dispatcher::step`] until A's send ring is drained:
//! one real turn of the engine's loop after another, so each figure
//! includes what a turn costs besides the messages (polling the send
//! rings, the applet host's checks for queued arrivals and timers, now and
//! then a poll of the file descriptors), spread over the descriptors it
//! takes: up to 64 per turn from an endpoint, fewer from one whose applet
//! used its share of the turn's work (the engine's fairness budgets;
//! RawUnet's invocations are cheap enough for all 64). A repetition is the median over
//! `--batches` batches (per message, less one clock read per batch), after
//! a few untimed ones; every figure is the median over `--reps`
//! repetitions, the variants interleaved within each repetition.
//!
//! Steps are differences between variants, each a real engine set up
//! differently:
//!
//! - `validate`: a send on a channel whose peer has closed its end (the
//!   engine marks the route gone). The engine takes the descriptor and
//!   makes every check it makes on any send (flags, length, buffer range,
//!   channel tag), looks the route up and refuses it (`PeerGone`: status
//!   written, counter counted); nothing is delivered. It is the one real
//!   path that does all the checks and no delivery (a bad tag stops
//!   before the route lookup). In the receive tables it is the sending
//!   side's share: every message here is sent by A before B gets it.
//! - `applet_call`: an applet whose `doTx`/`doRx` returns at once
//!   (`OvEmpty`) less `validate`. The engine finds the applet and calls it
//!   in one piece of code (take the runner, run, publish its statistics,
//!   put it back), so the paper's "check for classfile/setup applet call"
//!   (`find_applet`) and "call doTx and return" (`call_return`) are one
//!   row here. On receive it also holds the lending of the message to
//!   `RxBuf` (the paper's `rxbuf_copy`, which copies nothing here) and
//!   the sending side's route and counters; on both it holds the extra
//!   loop turns an applet's smaller budget costs.
//! - `null_native`: an applet calling `getFreeBufferLength()` 16 times
//!   (`OvNative`) less `OvEmpty`, per call (as in the paper, outside the
//!   sum).
//! - `dma_setup`, `data_movement`: `doHtoLDMA`/`doLtoHDMA` with length 0
//!   (`OvDma0`) less `OvEmpty`, and with the message length (`OvDma`) less
//!   `OvDma0`.
//! - `tx_push`: `txPush` (`OvPush`) less `OvEmpty`: the route, the
//!   counters and the delivery into B. `descriptor_push`: `dmaRxdPayload`
//!   or `dmaRxd` (`OvPush` on B) less `OvEmpty`. `get_free_buffer`:
//!   `getFreeBuffer` (`OvGetFree` on B) less `OvEmpty`.
//! - `end_to_end`: `RawUnet` (`applets/RawUnet.java`), per message, the
//!   whole engine path. `total` is `end_to_end` less the no-applet
//!   `total`: the overhead the applet adds per message, the figure the
//!   paper's Figure 7 reports as "Total".
//! - Without an applet: `validate` as above, `deliver` (the plain path
//!   less `validate`: the route, the counters and U-Net delivery — pop a
//!   free buffer or go inline, copy, publish the receive descriptor; one
//!   piece of engine code, not split further) and `total`. On the engine
//!   path the sender's transmit is the receiver's delivery, so the
//!   transmit and receive tables show the same measurement.
//!
//! A difference is the median over repetitions of the difference within
//! each repetition (the two variants timed moments apart), not the
//! difference of two medians: the machine's speed drifts between
//! repetitions, and a pair timed together drifts together. Differences
//! are not clamped: a small step can come out slightly negative on a
//! noisy machine. Steps of one direction add up to `end_to_end`.
//!
//! Applets placed in the engine are compiled by JIVE on a thread of their
//! own and run interpreted until the code is installed; by default the
//! benchmark runs untimed batches until the engine reports each applet
//! compiled (its `applet_compiled` counter). `--interpret` sets up the
//! engines with `applet_compile` off, which keeps them interpreted.
//!
//! Before timing, both paths are checked to do the work, against the real
//! engine: a message sent from A must arrive intact in B's receive ring
//! (inline or in the buffer named) with no applet, with `RawUnet` on A and
//! with `RawUnet` on B, and a send on the gone channel must be refused and
//! deliver nothing. Every timed batch checks the status the engine wrote
//! into each descriptor and the number of messages B received; an applet
//! fault (an event on the endpoint, or its fault counters) fails the
//! command.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::json;
use unet_abi::{
    EndpointCounter, EventKind, FaultKind, Geometry, SendDesc, SendStatus, INLINE_MAX, RECV_INLINE,
};
use unet_engine::invoker::{LocalClient, RawEndpoint};
use unet_engine::{Dispatcher, EngineConfig, PathChoice};

use super::report::Progress;
use super::stats::{clock_cost_ns, median_f64};

mod applets;
mod table;

use applets::compile;
use table::{print_table, Row};

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
    /// Draw Figure 7 as an SVG: RawUnet's steps, ours beside the paper's.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
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
    /// Keep the applets interpreted (by default the benchmark waits until
    /// the engine runs them as JIVE compiled them).
    #[arg(long)]
    pub interpret: bool,
}

/// Message sizes of the paper's Figure 7.
const SIZES: [usize; 2] = [40, 1000];
/// Messages per timed batch (at most the rings' capacity).
const BATCH: usize = 32;
/// Calls of `getFreeBufferLength()` in the null-native applet.
const NATIVE_CALLS: usize = 16;
/// The target for the overhead RawUnet adds per message, both ways (the
/// paper gives none in nanoseconds: its figures are for a 37 MHz processor).
const TARGET_NS: f64 = 30.0;

/// Receive buffers of 2 KiB, 64 of them posted from 8 KiB on (the send
/// buffer is at 0); rings of 64.
const BUF_SIZE: u32 = 2048;
const RING_CAP: u32 = 64;
const FIRST_BUF: u32 = 8192;
const GEOMETRY: Geometry = Geometry {
    buffer_size: BUF_SIZE,
    buffer_area_size: 256 << 10,
    send_cap: RING_CAP,
    recv_cap: RING_CAP,
    free_cap: RING_CAP,
    event_cap: RING_CAP,
};
/// The send buffer `doTx` reads from.
const SEND_OFF: u32 = 0;
/// How long set-up (attach, compile) may take before the command gives up.
const SETUP_LIMIT: Duration = Duration::from_secs(30);

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
// The engines
// -------------------------------------------------------------------------

/// Where a rig's applet sits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    /// On A: its `doTx` runs on every send.
    Sender,
    /// On B: its `doRx` runs on every arrival.
    Receiver,
}

/// Counter slots of A and B: a fresh engine gives its endpoints slots in
/// the order they are created (checked by [`verify`]).
const SLOT_A: usize = 0;
const SLOT_B: usize = 1;

/// One engine set up for one configuration: endpoints A and B, A's
/// engine-path channel to B, an applet on one of them or none.
struct Rig {
    name: String,
    engine: Dispatcher,
    /// The control connection the endpoints and applet belong to (the
    /// engine reclaims them when it closes).
    _client: LocalClient,
    a: RawEndpoint,
    b: RawEndpoint,
    /// A's tag for its channel to B, and B's for the same channel.
    to_b: u16,
    b_tag: u16,
    /// A's tag for a channel whose peer has closed its end, and that
    /// peer (the plain rig only).
    gone: Option<(u16, RawEndpoint)>,
    applet: Option<(&'static str, Side)>,
    /// The next receive buffer B posts (cycling over [`RING_CAP`]).
    next_buf: u32,
}

fn setup_err(rig: &str, what: &str) -> impl Fn(unet_engine::invoker::InvokerError) -> String {
    let (rig, what) = (rig.to_string(), what.to_string());
    move |e| format!("{rig}: {what}: {e}")
}

/// The tag a `ChannelOpened` event gives `ep` (set-up events only).
fn opened_tag(ep: &mut RawEndpoint, rig: &str) -> Result<u16, String> {
    while let Some(e) = ep.pop_event() {
        if e.kind == EventKind::ChannelOpened as u16 {
            return Ok(e.channel);
        }
    }
    Err(format!("{rig}: the engine told the peer of no channel"))
}

impl Rig {
    /// Set up an engine: A and B, A's channel to B, `applet` attached
    /// (through the engine's control path), and with `with_gone` a third
    /// endpoint C whose end of a channel from A is closed. The send buffer
    /// holds `pkt`; B's free ring is full.
    fn new(
        name: String,
        applet: Option<(&'static str, Side, &[u8])>,
        compile: bool,
        with_gone: bool,
        pkt: &[u8],
    ) -> Result<Rig, String> {
        let cfg = EngineConfig {
            max_endpoints: 4,
            applet_compile: compile,
            ..Default::default()
        };
        let mut engine =
            Dispatcher::new(cfg).map_err(|e| format!("{name}: cannot build an engine: {e}"))?;
        let mut client = LocalClient::new(&mut engine)
            .map_err(|e| format!("{name}: cannot connect to the engine: {e}"))?;
        let mut a = client
            .create_endpoint(&mut engine, GEOMETRY)
            .map_err(setup_err(&name, "create A"))?;
        let mut b = client
            .create_endpoint(&mut engine, GEOMETRY)
            .map_err(setup_err(&name, "create B"))?;
        let to_b = client
            .open_channel(&mut engine, a.id(), b.id(), PathChoice::Engine)
            .map_err(setup_err(&name, "open A to B"))?;
        let b_tag = opened_tag(&mut b, &name)?;
        let gone = if with_gone {
            let mut c = client
                .create_endpoint(&mut engine, GEOMETRY)
                .map_err(setup_err(&name, "create C"))?;
            let tag = client
                .open_channel(&mut engine, a.id(), c.id(), PathChoice::Engine)
                .map_err(setup_err(&name, "open A to C"))?;
            let c_tag = opened_tag(&mut c, &name)?;
            client
                .close_channel(&mut engine, c.id(), c_tag)
                .map_err(setup_err(&name, "close C's end"))?;
            Some((tag, c))
        } else {
            None
        };
        if let Some((class, side, bytes)) = applet {
            let id = match side {
                Side::Sender => a.id(),
                Side::Receiver => b.id(),
            };
            let t = Instant::now();
            client
                .attach_applet(&mut engine, id, bytes, 0, 0)
                .map_err(setup_err(&name, &format!("attach {class}")))?;
            // The engine holds a freshly attached applet back for nine
            // times what loading it took (at most the attach's time):
            // wait that out, or the first arrivals would be queued.
            std::thread::sleep(t.elapsed() * 10);
        }
        // A's notice that C's end closed.
        while a.pop_event().is_some() {}
        a.write_area(SEND_OFF as u64, pkt);
        let mut rig = Rig {
            name,
            engine,
            _client: client,
            a,
            b,
            to_b,
            b_tag,
            gone,
            applet: applet.map(|(c, s, _)| (c, s)),
            next_buf: 0,
        };
        rig.refill();
        Ok(rig)
    }

    /// B's client between batches: take every receive descriptor, then
    /// post free buffers until the ring is full (cycling over as many
    /// buffers as the ring holds, so it never names one twice). Returns
    /// the descriptors taken.
    fn refill(&mut self) -> usize {
        let mut n = 0;
        while self.b.pop_recv().is_some() {
            n += 1;
        }
        while self
            .b
            .post_free(FIRST_BUF + (self.next_buf % RING_CAP) * BUF_SIZE)
        {
            self.next_buf = self.next_buf.wrapping_add(1);
        }
        n
    }

    /// Push `n` copies of `d` on A's send ring; the position after them.
    fn push(&mut self, d: SendDesc, n: usize) -> Result<u64, String> {
        let mut end = self.a.sends_taken();
        for _ in 0..n {
            end = self
                .a
                .push_send(d)
                .ok_or_else(|| format!("{}: A's send ring is full", self.name))?
                + 1;
        }
        Ok(end)
    }

    /// Step the engine until it has taken A's descriptors up to `end`
    /// (untimed: gives up after [`SETUP_LIMIT`]).
    fn step_until(&mut self, end: u64) -> Result<(), String> {
        let t = Instant::now();
        while self.a.sends_taken() < end {
            self.engine.step();
            if t.elapsed() > SETUP_LIMIT {
                return Err(format!(
                    "{}: the engine stopped taking descriptors",
                    self.name
                ));
            }
        }
        Ok(())
    }

    /// One timed batch of `v`: [`BATCH`] descriptors pushed, then turns of
    /// the engine until it has taken them all. Returns the time of the
    /// turns, ns. Then, untimed: the statuses the engine wrote and the
    /// messages B received are checked, and B's rings made ready again.
    fn batch(&mut self, v: &Variant) -> Result<f64, String> {
        let end = self.push(v.desc, BATCH)?;
        let t = Instant::now();
        while self.a.sends_taken() < end {
            self.engine.step();
        }
        let ns = t.elapsed().as_nanos() as f64;
        for pos in end - BATCH as u64..end {
            let st = self.a.send_status(pos);
            if st != v.status as i32 {
                return Err(format!(
                    "{}: the engine answered a send with {:?} ({:?} expected)",
                    v.key,
                    SendStatus::from_i32(st),
                    v.status
                ));
            }
        }
        let got = self.refill();
        if got != v.expect {
            return Err(format!(
                "{}: B received {got} of a batch of {BATCH} messages ({} expected)",
                v.key, v.expect
            ));
        }
        Ok(ns)
    }

    /// The counter slot of the endpoint with the applet.
    fn applet_slot(&self) -> Option<usize> {
        self.applet.map(|(_, side)| match side {
            Side::Sender => SLOT_A,
            Side::Receiver => SLOT_B,
        })
    }

    /// Whether the engine runs the applet as machine code.
    fn compiled(&self) -> bool {
        self.applet_slot().is_some_and(|s| {
            self.engine
                .counters()
                .ep_value(s, EndpointCounter::AppletCompiled)
                == 1
        })
    }

    /// Untimed batches of `v` until the engine runs the applet compiled.
    fn wait_compiled(&mut self, v: &Variant) -> Result<(), String> {
        let t = Instant::now();
        while !self.compiled() {
            if t.elapsed() > SETUP_LIMIT {
                return Err(format!(
                    "{}: the engine did not run the applet compiled within {} s \
                     (--interpret measures it interpreted)",
                    self.name,
                    SETUP_LIMIT.as_secs()
                ));
            }
            self.batch(v)?;
        }
        Ok(())
    }

    /// Fail if the applet faulted, was detached or lost arrivals: the
    /// events on its endpoint and the engine's counters.
    fn check_applet(&mut self) -> Result<(), String> {
        let (Some((class, side)), Some(slot)) = (self.applet, self.applet_slot()) else {
            return Ok(());
        };
        let ep = match side {
            Side::Sender => &mut self.a,
            Side::Receiver => &mut self.b,
        };
        while let Some(e) = ep.pop_event() {
            if e.kind == EventKind::AppletFault as u16 || e.kind == EventKind::AppletDetached as u16
            {
                let kind = FaultKind::ALL.iter().find(|k| **k as u32 == e.arg);
                return Err(format!(
                    "{}: applet {class} faulted ({kind:?}) during the run; figures would be wrong",
                    self.name
                ));
            }
        }
        let c = self.engine.counters();
        let faults: u64 = FaultKind::ALL
            .iter()
            .map(|k| c.ep_value(slot, k.counter()))
            .sum();
        let detached = c.ep_value(slot, EndpointCounter::AppletDetached);
        let dropped = c.ep_value(slot, EndpointCounter::AppletRxDropped);
        if faults + detached + dropped > 0 {
            return Err(format!(
                "{}: applet {class}: {faults} faults, {detached} detached, {dropped} arrivals \
                 dropped during the run; figures would be wrong",
                self.name
            ));
        }
        Ok(())
    }
}

/// Checks, before timing, that the rig does the work being timed: a
/// message of each size sent from A arrives intact in B's receive ring
/// (inline, or in the buffer it names), a send on the gone channel is
/// refused and delivers nothing, and A's and B's counter slots are the
/// expected ones.
fn verify(rig: &mut Rig, pkt: &[u8]) -> Result<(), String> {
    let who = rig.name.clone();
    for s in SIZES {
        let end = rig.push(send_desc(s, rig.to_b), 1)?;
        rig.step_until(end)?;
        let st = rig.a.send_status(end - 1);
        if st != SendStatus::Sent as i32 {
            return Err(format!(
                "{who}: a {s}-byte send was answered {:?}",
                SendStatus::from_i32(st)
            ));
        }
        let r = rig
            .b
            .pop_recv()
            .ok_or_else(|| format!("{who}: a {s}-byte message did not arrive"))?;
        let mut got = vec![0u8; s];
        if r.flags & RECV_INLINE != 0 {
            if s <= INLINE_MAX {
                got.copy_from_slice(&r.data[..s]);
            }
        } else if r.nbufs == 1 {
            rig.b.read_area(r.offset(0) as u64, &mut got);
        }
        if r.len as usize != s || r.channel != rig.b_tag || got != pkt[..s] {
            return Err(format!("{who}: a {s}-byte message arrived wrong: {r:?}"));
        }
        if rig.refill() != 0 {
            return Err(format!("{who}: one {s}-byte send arrived more than once"));
        }
    }
    if let Some(tag) = rig.gone.as_ref().map(|g| g.0) {
        for s in SIZES {
            let end = rig.push(send_desc(s, tag), 1)?;
            rig.step_until(end)?;
            let st = rig.a.send_status(end - 1);
            let delivered = rig.refill()
                + rig
                    .gone
                    .as_mut()
                    .map_or(0, |(_, c)| std::iter::from_fn(|| c.pop_recv()).count());
            if st != SendStatus::PeerGone as i32 || delivered != 0 {
                return Err(format!(
                    "{who}: a send on the closed channel was answered {:?} and delivered \
                     {delivered} times",
                    SendStatus::from_i32(st)
                ));
            }
        }
    }
    let c = rig.engine.counters();
    let n = SIZES.len() as u64;
    if c.ep_value(SLOT_A, EndpointCounter::TxMsgs) != n
        || c.ep_value(SLOT_B, EndpointCounter::TxMsgs) != 0
        || c.ep_value(SLOT_B, EndpointCounter::RxMsgs) != n
    {
        return Err(format!(
            "{who}: A's and B's counters are not in the slots expected"
        ));
    }
    Ok(())
}

fn send_desc(len: usize, channel: u16) -> SendDesc {
    SendDesc {
        offset: SEND_OFF,
        len: len as u32,
        channel,
        ..Default::default()
    }
}

// -------------------------------------------------------------------------
// Measurement
// -------------------------------------------------------------------------

/// Applets timed on A (transmit) and on B (receive).
const TX_APPLETS: [&str; 6] = [
    "OvEmpty", "OvNative", "OvDma0", "OvDma", "OvPush", "RawUnet",
];
const RX_APPLETS: [&str; 7] = [
    "OvEmpty",
    "OvNative",
    "OvDma0",
    "OvDma",
    "OvPush",
    "OvGetFree",
    "RawUnet",
];

/// One timed variant: a rig, the descriptor A sends, and what the engine
/// must make of it.
struct Variant {
    key: String,
    rig: usize,
    desc: SendDesc,
    /// Messages B receives per batch.
    expect: usize,
    /// The status the engine writes into each descriptor.
    status: SendStatus,
}

/// Median time per message of `v` over `batches` batches of [`BATCH`]
/// (after a few untimed ones), less one clock read per batch.
fn time_variant(rig: &mut Rig, v: &Variant, batches: usize, clock_ns: f64) -> Result<f64, String> {
    let warm = 3 + batches / 10;
    let mut per = Vec::with_capacity(batches);
    for i in 0..warm + batches {
        let ns = rig.batch(v)?;
        if i >= warm {
            per.push((ns - clock_ns) / BATCH as f64);
        }
    }
    Ok(median_f64(&per))
}

/// The rigs: the plain one (no applet; a live and a gone channel), one
/// per applet on A, one per applet on B.
fn rigs(
    classes: &[(String, Vec<u8>)],
    compile: bool,
    pkt: &[u8],
    progress: &Progress,
) -> Result<Vec<Rig>, String> {
    let class = |name: &str| {
        classes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.as_slice())
            .ok_or_else(|| format!("applet {name} not compiled"))
    };
    let mut rigs = vec![Rig::new("plain".into(), None, compile, true, pkt)?];
    for (dir, side, list) in [
        ("tx", Side::Sender, &TX_APPLETS[..]),
        ("rx", Side::Receiver, &RX_APPLETS[..]),
    ] {
        for &c in list {
            progress.show(&format!("[bench overhead] attaching {c} ({dir})"));
            rigs.push(Rig::new(
                format!("{dir}.{c}"),
                Some((c, side, class(c)?)),
                compile,
                false,
                pkt,
            )?);
        }
    }
    Ok(rigs)
}

/// The variants, by size: the plain path and the gone channel, then each
/// applet on A and on B (on B, the free-buffer and DMA ones at 1000 bytes
/// only: RawUnet uses neither for a message that goes inline).
fn variants(rigs: &[Rig]) -> Result<Vec<Variant>, String> {
    let rig = |name: &str| {
        rigs.iter()
            .position(|r| r.name == name)
            .ok_or_else(|| format!("no rig {name}"))
    };
    let plain = rig("plain")?;
    let (to_b, gone) = (
        rigs[plain].to_b,
        rigs[plain]
            .gone
            .as_ref()
            .map(|g| g.0)
            .ok_or("no gone channel")?,
    );
    let delivers = |c: &str| matches!(c, "OvPush" | "RawUnet");
    let mut v = Vec::new();
    for s in SIZES {
        v.push(Variant {
            key: format!("none.{s}"),
            rig: plain,
            desc: send_desc(s, to_b),
            expect: BATCH,
            status: SendStatus::Sent,
        });
        v.push(Variant {
            key: format!("gone.{s}"),
            rig: plain,
            desc: send_desc(s, gone),
            expect: 0,
            status: SendStatus::PeerGone,
        });
        for c in TX_APPLETS {
            let r = rig(&format!("tx.{c}"))?;
            v.push(Variant {
                key: format!("tx.{c}.{s}"),
                rig: r,
                desc: send_desc(s, rigs[r].to_b),
                expect: if delivers(c) { BATCH } else { 0 },
                status: SendStatus::Sent,
            });
        }
        for c in RX_APPLETS {
            if s <= INLINE_MAX && matches!(c, "OvGetFree" | "OvDma0" | "OvDma") {
                continue;
            }
            let r = rig(&format!("rx.{c}"))?;
            v.push(Variant {
                key: format!("rx.{c}.{s}"),
                rig: r,
                desc: send_desc(s, rigs[r].to_b),
                expect: if delivers(c) { BATCH } else { 0 },
                status: SendStatus::Sent,
            });
        }
    }
    Ok(v)
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

    // Contents of the send buffer.
    let pkt: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
    let progress = Progress::new();
    let mut rigs = rigs(&classes, !a.interpret, &pkt, &progress)?;
    let vars = variants(&rigs)?;
    for name in ["plain", "tx.RawUnet", "rx.RawUnet"] {
        let r = rigs
            .iter_mut()
            .find(|r| r.name == name)
            .ok_or_else(|| format!("no rig {name}"))?;
        verify(r, &pkt)?;
    }
    if !a.interpret {
        for (i, r) in rigs.iter_mut().enumerate() {
            if r.applet.is_some() {
                progress.show(&format!("[bench overhead] waiting for JIVE ({})", r.name));
                let v = vars
                    .iter()
                    .find(|v| v.rig == i)
                    .ok_or_else(|| format!("no variant on {}", r.name))?;
                r.wait_compiled(v)?;
            }
        }
    }

    let mut results: Vec<Vec<f64>> = vec![Vec::new(); vars.len()];
    let mut clocks = Vec::new();
    for rep in 0..a.reps {
        progress.show(&format!(
            "[bench overhead] repetition {}/{}",
            rep + 1,
            a.reps
        ));
        let clock = clock_cost_ns() as f64;
        clocks.push(clock);
        for (i, v) in vars.iter().enumerate() {
            results[i].push(time_variant(&mut rigs[v.rig], v, a.batches, clock)?);
        }
        for r in &mut rigs {
            r.check_applet()?;
        }
    }
    progress.clear();
    for r in &rigs {
        if r.applet.is_some() && r.compiled() == a.interpret {
            return Err(format!(
                "{}: the applet ran {} at the end of the run",
                r.name,
                if a.interpret {
                    "compiled"
                } else {
                    "interpreted"
                }
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
    for s in SIZES {
        let t = |k: &str| med(&format!("{k}.{s}"));
        let d = |a: &str, b: &str| diff(&format!("{a}.{s}"), &format!("{b}.{s}"));
        let mut r = |dir, applet, step, ns| {
            rows.push(Row {
                dir,
                size: s,
                applet,
                step,
                ns,
            })
        };
        let validate = t("gone");
        for dir in ["tx", "rx"] {
            let k = |c: &str| format!("{dir}.{c}");
            r(dir, "RawUnet", "validate", validate);
            r(dir, "RawUnet", "applet_call", d(&k("OvEmpty"), "gone"));
            let nn = d(&k("OvNative"), &k("OvEmpty")) / NATIVE_CALLS as f64;
            r(dir, "RawUnet", "null_native", nn);
            if dir == "tx" {
                r(dir, "RawUnet", "dma_setup", d(&k("OvDma0"), &k("OvEmpty")));
                r(
                    dir,
                    "RawUnet",
                    "data_movement",
                    d(&k("OvDma"), &k("OvDma0")),
                );
                r(dir, "RawUnet", "tx_push", d(&k("OvPush"), &k("OvEmpty")));
            } else {
                if s > INLINE_MAX {
                    let gf = d(&k("OvGetFree"), &k("OvEmpty"));
                    r(dir, "RawUnet", "get_free_buffer", gf);
                    r(dir, "RawUnet", "dma_setup", d(&k("OvDma0"), &k("OvEmpty")));
                    r(
                        dir,
                        "RawUnet",
                        "data_movement",
                        d(&k("OvDma"), &k("OvDma0")),
                    );
                }
                let dp = d(&k("OvPush"), &k("OvEmpty"));
                r(dir, "RawUnet", "descriptor_push", dp);
            }
            r(dir, "RawUnet", "end_to_end", t(&k("RawUnet")));
            r(dir, "RawUnet", "total", d(&k("RawUnet"), "none"));
            r(dir, "none", "validate", validate);
            r(dir, "none", "deliver", d("none", "gone"));
            r(dir, "none", "total", t("none"));
        }
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
    if let Some(p) = &a.svg {
        table::write_svg(&rows, p)?;
    }
    Ok(())
}
