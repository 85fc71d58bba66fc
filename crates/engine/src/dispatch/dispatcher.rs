//! The dispatcher: the engine's one single-threaded, message-driven loop
//! (SPINE section 3.2), and the owner of every part of the engine.
//!
//! The loop's parts have one shape ([`crate::part::Part`], Aeron's
//! agents) and are listed once, in the order a turn runs them
//! (`each_part!`): U-Net (what came from the wire, the
//! buffered endpoints' waiting messages, every endpoint's send ring, the
//! applets' arrivals and timers), VIA (the VIs the engine carries), UDM
//! (the jobs' divert rings, the links to other engines), SPINE (the
//! hosts' active messages, then its events: handlers and deliveries to
//! host endpoints). A turn runs
//! each and adds up the work they report; then control takes, in one
//! call, what the turn left for it (frames that set connections up,
//! replies owed for remote opens, segments to release, requests whose
//! time ran out); then the wire's port is flushed, once: whatever a part
//! or control queued leaves in the turn that queued it. Now and then, and
//! whenever a turn found nothing, the file descriptors (control sockets,
//! doorbells, the admin eventfd) are polled too. When the turns find
//! nothing for `idle_spin`, the engine arms every part's wake-ups (the
//! endpoints' doorbells, those of the VIs on the turn's list, the jobs'),
//! looks once more, and sleeps in `epoll_wait` until a doorbell, a
//! control socket, a datagram or the nearest deadline of the parts and
//! the port wakes it. An idle engine uses no CPU. The wire's port is
//! received from only while it may hold something: the last receive took
//! datagrams, or the poller saw it readable since (a turn that finds the
//! poller's events receives in the same step); a port known empty is
//! looked at anyway every few turns.
//!
//! Within U-Net's part the order is the backlogs, the send rings, then
//! the wire's receive: a message between local endpoints is delivered
//! before the turn spends a receive system call, and what the send rings
//! queued on the port leaves before that receive (the port sends its
//! batch before it receives); the rest of what a turn queues leaves when
//! the dispatcher flushes the port, once, at the end of the turn. The
//! applets, which share nothing with the VIs and UDM but the port's
//! batch, run before them.
//!
//! The turn after a delivery, nothing new found, usually polls once more
//! (a client on another CPU often answers within a microsecond, which saves
//! it ringing the doorbell, a wake-up of several). Not when the client just
//! served waits on the engine's own CPU (`client_cpu`): it cannot run, let
//! alone answer, until the engine leaves that CPU, so the engine sleeps at
//! once (a *handoff*, counted).
//!
//! A delivery that finds the receiver without room (its receive queue or
//! its free buffers exhausted) drops the message, as U-Net does. If that
//! receiver's client is awake, it is behind and needs a CPU to catch up,
//! and on a machine with few cores that is often the engine's: the engine
//! then cuts the turn short (the rest of that sender's descriptors wait in
//! its queue, the rest of the datagrams received in the wire's port or the
//! socket's buffer) and yields its CPU once (counted as `receiver_yields`).
//! Without this, a fast sender kept the engine dropping for a whole time
//! slice while the receiver waited for the CPU: over UDP, 64-byte streams
//! delivered about half as many messages. A client that claims to be awake
//! and never reads costs the engine no more than a yield per turn, which
//! returns at once when nothing else wants the CPU; every turn still does
//! its work up to the first such drop.
//!
//! # Threading
//!
//! The same loop runs on the engine's own thread ([`crate::Engine`]) or
//! is stepped by its caller ([`Dispatcher::step`], Aeron's invoker mode):
//! a test, a fuzz target or a benchmark builds a [`Dispatcher`], talks to
//! it through a `LocalClient` (the `invoker` module), and calls `step` to
//! run the engine's real per-message code on its own thread,
//! deterministically.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use unet_abi::EngineCounter;
use unet_sys::{self as sys, EventFd};

use crate::config::EngineConfig;
use crate::control::server::{ControlServer, Incoming};
use crate::control::setup::{self, Setup};
use crate::control::setup_thread::SetupThread;
use crate::counters::Counters;
use crate::part::{Context, Part};
use crate::poller::{Poller, Token};
use crate::spine::trace::{self, Recorder};
use crate::spine::{SpinePart, SpineTurn};
use crate::udm::Jobs;
use crate::unet::applets::AppletHost;
use crate::unet::direct::DirectConns;
use crate::unet::endpoints::EndpointTable;
use crate::unet::part::UnetPart;
use crate::unet::remote::{self, RemoteChannels, RemoteSide};
use crate::via::vias::Vias;
use crate::wire::port::WirePort;
use crate::wire::Transport;

/// A turn polls the file descriptors at least once in this many.
const FD_POLL_EVERY: u64 = 64;

/// How long an engine that just worked keeps looking before it sleeps,
/// at least (`EngineConfig::idle_spin` may make it longer): a client on
/// another CPU that answers what it was just given within this saves a
/// doorbell, and the engine a wake-up of several microseconds (in a
/// virtual machine, tens when its CPU had halted). Turns that find nothing
/// cost a poll of the file descriptors and no system call on the wire,
/// and each gives the CPU away (`sched_yield`): when the other CPUs are
/// busy, the client or peer that will answer may be waiting for this one.
pub const LOOK_AFTER_WORK: Duration = Duration::from_micros(4);

/// What one turn of [`Dispatcher::run_turn`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Turn {
    /// Work was done: look again at once.
    Worked,
    /// Nothing to do.
    Idle,
    /// Nothing to do, and the last turn's deliveries went to a client
    /// waiting on this CPU: sleep at once, so that it can run.
    Handoff,
}

/// When a loop sleeps: the start of its run of empty turns.
#[derive(Default)]
pub(super) struct Idle {
    since: Option<Instant>,
}

impl Idle {
    /// After a turn (or a round of turns) that found `turn`: whether the
    /// loop sleeps now (at once after a handoff; after `idle_for` of empty
    /// turns otherwise).
    #[inline]
    pub(super) fn sleep_after(&mut self, turn: Turn, idle_for: Duration) -> bool {
        match turn {
            Turn::Worked => {
                self.since = None;
                false
            }
            Turn::Handoff => {
                self.since = None;
                true
            }
            Turn::Idle => {
                let now = Instant::now();
                match self.since {
                    None => {
                        self.since = Some(now);
                        false
                    }
                    Some(t) if now.duration_since(t) >= idle_for => {
                        self.since = None;
                        true
                    }
                    // A client or peer that shares this CPU (the other
                    // CPUs busy) needs it to answer: give it the CPU on
                    // every empty turn. When the CPU is the engine's
                    // alone, sched_yield returns at once.
                    Some(_) => {
                        std::thread::yield_now();
                        false
                    }
                }
            }
        }
    }
}

/// State shared between a dispatcher and the handles that reach it from
/// other threads.
pub(crate) struct Shared {
    /// Set to make the loop end.
    pub stop: AtomicBool,
    /// Rung for news: a stop, new in-process clients, a verification done.
    pub admin: Arc<EventFd>,
    /// Control sockets of in-process clients, waiting to be served.
    pub new_clients: Mutex<Vec<OwnedFd>>,
}

/// The engine: its parts and its loop (see the module documentation).
pub struct Dispatcher {
    cfg: EngineConfig,
    engine_id: u64,
    poller: Poller,
    server: ControlServer,
    /// The engine's port on the wire, if it has one: flushed once per
    /// turn.
    port: Option<WirePort>,
    /// U-Net: the endpoints, their data path and applets, the remote
    /// channels.
    unet: UnetPart,
    /// VIA's regions, VIs, discriminators and waiting requests.
    vias: Vias,
    /// UDM's jobs, nodes and links.
    udm: Jobs,
    /// SPINE: the extensions, the runtime's event queue, and the event
    /// graph's recorder (off unless control switches it on), which the
    /// loop records its own events into.
    spine: SpinePart,
    conns: DirectConns,
    /// Set-up work that takes long (making and unmapping large segments).
    work: SetupThread,
    counters: Arc<Counters>,
    shared: Arc<Shared>,
    tokens: Vec<Token>,
    incoming: Vec<Incoming>,
    turn: u64,
}

/// The names of the loop's parts in the event graph, in `each_part!`'s
/// order (part `i` records events of type `trace::LOOP_PART + i`).
const PART_NAMES: [&str; 4] = ["unet turn", "via turn", "udm turn", "spine turn"];
/// SPINE's place in that order.
const SPINE_PART: u16 = 3;

/// Run `$body` on every part of the loop (`$p`, its concrete type), in
/// the order a turn runs them, one line each, with what they are given
/// (`$cx`, a [`Context`]; its port `$port`, the engine's by default). A
/// new system is one more line here.
macro_rules! each_part {
    ($d:ident, $cx:ident, $p:ident => $body:expr) => {
        each_part!($d, $cx, $d.port.as_mut(), $p => $body)
    };
    ($d:ident, $cx:ident, $port:expr, $p:ident => $body:expr) => {{
        let mut $cx = Context {
            port: $port,
            counters: &$d.counters,
            cfg: &$d.cfg,
        };
        {
            let $p = &mut $d.unet; // the wire's arrivals, send rings, applets
            $body;
        }
        {
            let $p = &mut $d.vias; // the VIs the engine carries
            $body;
        }
        {
            let $p = &mut $d.udm; // the jobs' divert rings, the links
            $body;
        }
        {
            let $p = &mut SpineTurn {
                spine: &mut $d.spine,
                eps: &mut $d.unet.eps,
            }; // SPINE's events
            $body;
        }
    }};
}

impl Dispatcher {
    /// Build an engine: its counters, its control socket (if configured),
    /// its wire (if configured). Nothing runs until [`Dispatcher::step`]
    /// or `Dispatcher::run` (the engine's thread).
    pub fn new(cfg: EngineConfig) -> io::Result<Dispatcher> {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            admin: Arc::new(EventFd::new()?),
            new_clients: Mutex::new(Vec::new()),
        });
        Self::build(cfg, shared, None)
    }

    /// [`Dispatcher::new`] with its wire on `transport` instead of the UDP
    /// socket of [`EngineConfig::udp_bind`] (for example a
    /// [`crate::wire::MemoryPort`]: engines in one process, stepped
    /// together in a test).
    pub fn with_transport(
        cfg: EngineConfig,
        transport: Box<dyn Transport>,
    ) -> io::Result<Dispatcher> {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            admin: Arc::new(EventFd::new()?),
            new_clients: Mutex::new(Vec::new()),
        });
        Self::build(cfg, shared, Some(transport))
    }

    fn build(
        cfg: EngineConfig,
        shared: Arc<Shared>,
        transport: Option<Box<dyn Transport>>,
    ) -> io::Result<Dispatcher> {
        let engine_id = sys::random_u64() | 1;
        let poller = Poller::new()?;
        let counters = Arc::new(Counters::create(cfg.max_endpoints, engine_id)?);
        let server = ControlServer::new(&cfg, &poller, counters.clone())?;
        poller.add(shared.admin.fd().as_raw_fd(), Token::Admin)?;
        let port = match (transport, cfg.udp_bind) {
            (Some(t), _) => Some(remote::new_port(t, &cfg, engine_id, counters.clone())),
            (None, Some(a)) => Some(remote::bind_port(a, &cfg, engine_id, counters.clone())?),
            (None, None) => None,
        };
        if let Some(p) = &port {
            poller.add(p.raw_fd(), Token::Wire)?;
        }
        let mut spine = SpinePart::new(&cfg, shared.admin.clone());
        name_loop_events(&mut spine.trace);
        Ok(Dispatcher {
            unet: UnetPart {
                eps: EndpointTable::new(cfg.max_endpoints, counters.clone()),
                applets: AppletHost::new(shared.admin.clone()),
                chans: RemoteChannels::default(),
            },
            work: SetupThread::new(shared.admin.clone()),
            vias: Vias::default(),
            udm: Jobs::default(),
            spine,
            cfg,
            engine_id,
            poller,
            server,
            conns: DirectConns::default(),
            port,
            counters,
            shared,
            tokens: Vec::with_capacity(64),
            incoming: Vec::new(),
            turn: 0,
        })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The epoll set the engine sleeps on (readable while one of its
    /// sources is ready), for a loop that runs several engines.
    pub(super) fn poll_fd(&self) -> RawFd {
        self.poller.raw_fd()
    }

    /// The engine's incarnation id.
    pub fn engine_id(&self) -> u64 {
        self.engine_id
    }

    /// The engine's UDP address, if it has a wire.
    pub fn udp_addr(&self) -> Option<SocketAddr> {
        self.port.as_ref().map(|p| p.local_addr())
    }

    /// The engine's counters (what `unet stat` reads).
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// A new control connection, served like any client's (in invoker
    /// mode, from the thread that steps the engine; the other end is
    /// yours).
    pub fn connect(&mut self) -> io::Result<OwnedFd> {
        let (mine, theirs) = sys::seqpacket_pair()?;
        self.server.add_client(theirs, &self.poller);
        Ok(mine)
    }

    /// One turn of the loop, on the caller's thread, without sleeping:
    /// the data sources every turn, the file descriptors when the turn
    /// found nothing and once in a while otherwise. Returns the work done
    /// (0: nothing to do). The engine's own thread runs the same turns
    /// (`Dispatcher::run`).
    pub fn step(&mut self) -> usize {
        // Nobody sleeps in invoker mode: a handoff is of no use.
        self.unet.eps.handoff = false;
        let mut work = self.poll_data();
        self.turn += 1;
        if work == 0 || self.turn.is_multiple_of(FD_POLL_EVERY) {
            let fds = self.poll_fds(0);
            work += fds;
            // What the poller found readable on the wire is received in
            // this step, as the engine's own thread does in its next turn.
            if fds > 0 && self.port.as_ref().is_some_and(|p| p.is_readable()) {
                work += self.poll_data();
            }
        }
        work
    }

    /// Time one SPINE handler invocation in `n` from now on
    /// ([`EngineConfig::spine_time_every`](crate::EngineConfig)): 1 for
    /// exact times per invocation.
    pub fn set_spine_time_every(&mut self, n: u32) {
        self.spine.rt.set_time_every(n);
    }

    /// Run turns until [`crate::Engine::stop`] (or a stop through the
    /// shared state), sleeping when there is nothing to do; then reclaim
    /// everything.
    pub(crate) fn run(&mut self) {
        let mut idle = Idle::default();
        let idle_for = self.idle_for();
        while !self.shared.stop.load(Ordering::Relaxed) {
            let turn = self.run_turn();
            if idle.sleep_after(turn, idle_for) {
                self.sleep();
            }
        }
        self.shutdown();
    }

    /// One turn as the engine's own thread runs it: the data sources, and
    /// the file descriptors when the turn found nothing (and once in
    /// [`FD_POLL_EVERY`] otherwise).
    #[inline]
    pub(super) fn run_turn(&mut self) -> Turn {
        // Set by the deliveries of the last turn only.
        let handoff = std::mem::take(&mut self.unet.eps.handoff);
        let mut work = self.poll_data();
        self.turn += 1;
        if work == 0 && handoff {
            self.counters.engine(EngineCounter::Handoffs, 1);
            return Turn::Handoff;
        }
        if work == 0 || self.turn.is_multiple_of(FD_POLL_EVERY) {
            work += self.poll_fds(0);
        }
        if work > 0 {
            self.counters.engine(EngineCounter::BusyPolls, 1);
            Turn::Worked
        } else {
            Turn::Idle
        }
    }

    /// How long the engine keeps looking after its last work before it
    /// sleeps.
    pub(super) fn idle_for(&self) -> Duration {
        self.cfg.idle_spin.max(LOOK_AFTER_WORK)
    }

    /// Whether the engine was told to stop.
    pub(super) fn stopping(&self) -> bool {
        self.shared.stop.load(Ordering::Relaxed)
    }

    /// Reclaim everything every client held (their peers are told) and
    /// remove the control socket's file. Dropping the dispatcher does the
    /// same; doing it twice is harmless.
    pub fn shutdown(&mut self) {
        self.setup().shutdown();
    }

    fn setup(&mut self) -> Setup<'_> {
        Setup {
            cfg: &self.cfg,
            engine_id: self.engine_id,
            poller: &self.poller,
            server: &mut self.server,
            eps: &mut self.unet.eps,
            conns: &mut self.conns,
            remote: self
                .port
                .as_mut()
                .map(|p| RemoteSide::new(p, &mut self.unet.chans)),
            applets: &mut self.unet.applets,
            work: &mut self.work,
            vias: &mut self.vias,
            udm: &mut self.udm,
            spine: &mut self.spine,
        }
    }

    /// Run `f` on every part of the loop, in the order a turn runs them,
    /// with what they are given (for arming and deadlines, before the
    /// engine sleeps). A turn runs the parts through [`each_part!`]
    /// itself, statically dispatched: a part's turn runs on every turn of
    /// the loop, and its early return when it has nothing to do is inlined.
    fn each_part(&mut self, mut f: impl FnMut(&mut dyn Part, &mut Context<'_>)) {
        each_part!(self, cx, p => f(p, &mut cx));
    }

    /// Set (before the engine sleeps) or clear every part's wake-ups.
    fn arm(&mut self, on: bool) {
        self.each_part(|p, _| p.arm(on));
    }

    fn sleep(&mut self) {
        if let Some(timeout) = self.ready_to_sleep() {
            let work = self.poll_fds(timeout);
            self.woke(work);
        }
    }

    /// Arm every part's wake-ups and look once more: the longest the
    /// engine may then sleep, ms (-1: until something wakes it), or None
    /// when something came in after all (the wake-ups are cleared again).
    pub(super) fn ready_to_sleep(&mut self) -> Option<i32> {
        self.arm(true);
        // Pairs with the fence a client issues between publishing a send
        // descriptor and reading `engine_armed`: either we see its
        // descriptor below, or it sees our armed flag and rings.
        fence(Ordering::SeqCst);
        if self.poll_data() > 0 {
            self.arm(false);
            return None;
        }
        if let Some(p) = self.port.as_mut() {
            p.before_sleep();
        }
        self.counters.engine(EngineCounter::Sleeps, 1);
        Some(self.next_timer_ms())
    }

    /// [`Dispatcher::ready_to_sleep`] said yes, but the engine does not
    /// sleep after all (another engine on its thread has work).
    pub(super) fn not_sleeping(&mut self) {
        self.counters.engine(EngineCounter::Wakeups, 1);
        self.arm(false);
    }

    /// After the sleep that [`Dispatcher::ready_to_sleep`] allowed, in
    /// which the file descriptors gave `work`: clear the wake-ups, count
    /// the sleep.
    pub(super) fn woke(&mut self, work: usize) {
        self.counters.engine(EngineCounter::Wakeups, 1);
        self.arm(false);
        if work == 0 && self.poll_data() == 0 {
            self.counters.engine(EngineCounter::SpuriousWakeups, 1);
        }
    }

    /// How long the engine may sleep: until the nearest deadline of the
    /// wire's port and of the parts (at most a second).
    fn next_timer_ms(&mut self) -> i32 {
        let mut at = self.port.as_ref().and_then(|p| p.next_deadline(None));
        self.each_part(|p, cx| {
            if let Some(d) = p.deadline(cx) {
                at = Some(at.map_or(d, |a| a.min(d)));
            }
        });
        match at {
            Some(d) => {
                let now = Instant::now();
                if d <= now {
                    0
                } else {
                    (d - now).as_millis().min(1000) as i32 + 1
                }
            }
            None => -1,
        }
    }

    /// One turn of every part; then control takes what they left for it,
    /// and what they queued on the wire leaves (the one flush of the
    /// turn). Returns the work done.
    fn poll_data(&mut self) -> usize {
        if self.spine.trace.on() {
            return self.poll_data_traced();
        }
        if self.port.is_some() {
            self.poll_parts::<true>()
        } else {
            self.poll_parts::<false>()
        }
    }

    /// [`Dispatcher::poll_data`]'s turn for an engine with a port on the
    /// wire (`PORT`) or without one: every part's look at the port, and
    /// the flush, is then decided once for the turn, not once per part.
    #[inline(always)]
    fn poll_parts<const PORT: bool>(&mut self) -> usize {
        let mut work = 0;
        let port = if PORT { self.port.as_mut() } else { None };
        each_part!(self, cx, port, p => work += p.turn(&mut cx));
        if setup::turn_left_work(&self.unet.chans, &self.vias, &self.udm, PORT) {
            self.setup().after_turn();
        }
        if PORT {
            if let Some(p) = self.port.as_mut() {
                p.flush();
            }
        }
        if std::mem::take(&mut self.unet.eps.behind) {
            // A receiver is behind (see the module docs).
            self.counters.engine(EngineCounter::ReceiverYields, 1);
            std::thread::yield_now();
        }
        work
    }

    /// [`Dispatcher::poll_data`] with the turn recorded in the event
    /// graph (the trace is on): an event for each part that found work
    /// (numbered by the first work item it handled, in the order the
    /// loop handled them), for control's share of the turn and for the
    /// flush that sent something, each caused by the turn's last event
    /// before it. SPINE's turn records each of its events itself; its
    /// part's event is their container and belongs to no message. One clock read per event: an event ends where the
    /// next begins.
    #[inline(never)]
    fn poll_data_traced(&mut self) -> usize {
        let mut work = 0;
        let mut i = 0u16;
        let mut last = (0u32, 0u32); // (event, message)
        let mut t = trace::now();
        each_part!(self, cx, p => {
            let w = p.turn(&mut cx);
            let end = trace::now();
            if w > 0 {
                // SPINE's part records its events itself: its turn is
                // their container, of no message.
                let n = if i == SPINE_PART { 0 } else { w };
                last = self.spine.trace.record_items(trace::LOOP_PART + i, t, end, n, 0);
            }
            work += w;
            i += 1;
            t = end;
        });
        debug_assert_eq!(i as usize, PART_NAMES.len(), "a part without a name");
        if setup::turn_left_work(&self.unet.chans, &self.vias, &self.udm, self.port.is_some()) {
            self.setup().after_turn();
            let end = trace::now();
            let id = self
                .spine
                .trace
                .record(trace::LOOP_CONTROL, t, end, last.1, last.0);
            last.0 = id;
            t = end;
        }
        if let Some(p) = self.port.as_mut() {
            let sent = self.counters.engine_value(EngineCounter::WireTxDatagrams);
            p.flush();
            if self.counters.engine_value(EngineCounter::WireTxDatagrams) != sent {
                self.spine
                    .trace
                    .record(trace::LOOP_FLUSH, t, trace::now(), last.1, last.0);
            }
        }
        if std::mem::take(&mut self.unet.eps.behind) {
            self.counters.engine(EngineCounter::ReceiverYields, 1);
            std::thread::yield_now();
        }
        work
    }

    /// Wait up to `timeout_ms` for file-descriptor events and handle them.
    pub(super) fn poll_fds(&mut self, timeout_ms: i32) -> usize {
        let mut tokens = std::mem::take(&mut self.tokens);
        self.poller.wait(&mut tokens, timeout_ms);
        let n = tokens.len();
        for &t in &tokens {
            match t {
                Token::Listener => self.server.accept(&self.poller),
                Token::Client(ci) => self.serve_client(ci),
                // Edge-triggered: nothing to read back (the counter only
                // grows; 2^64 doorbells are far away).
                Token::Doorbell(idx) => self.unet.eps.doorbell_rung(idx),
                Token::Admin => self.admin(),
                // Read by the next turn's poll_data.
                Token::Wire => {
                    if let Some(p) = self.port.as_mut() {
                        p.readable();
                    }
                }
                // Its VI's client posted: the next turn visits it.
                Token::ViDoorbell(id) => crate::via::via_loop::touch(&mut self.vias, id as u32),
                // Its job is polled every turn; the wake-up was the point.
                Token::UdmDoorbell(_) => {}
                // A peer adapter sent, or one's process exited.
                Token::Peers => self.spine.rt.peers.woken(),
                Token::Ports => {} // read by poll_data
            }
        }
        self.tokens = tokens;
        n
    }

    /// Handle what client `ci` sent.
    fn serve_client(&mut self, ci: usize) {
        let mut incoming = std::mem::take(&mut self.incoming);
        let closed = self.server.read(ci, &mut incoming);
        let mut s = self.setup();
        for inc in incoming.drain(..) {
            s.handle(inc);
        }
        if closed {
            s.drop_client(ci);
        }
        self.incoming = incoming;
    }

    /// News from other threads: in-process clients to serve, finished
    /// verifications.
    fn admin(&mut self) {
        self.shared.admin.drain();
        let fresh: Vec<OwnedFd> = std::mem::take(
            &mut *self
                .shared
                .new_clients
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        for fd in fresh {
            self.server.add_client(fd, &self.poller);
        }
        if self.unet.applets.loading() {
            let done = self.unet.applets.poll_loads();
            if !done.is_empty() {
                self.setup().finish_loads(done);
            }
        }
        if self.spine.loads.busy() {
            self.setup().finish_spine_loads();
        }
        if self.work.busy() {
            self.setup().finish_creates();
        }
        if self.spine.trace.dumping() {
            self.setup().finish_dump();
        }
    }
}

/// Name the loop's own event types in `r`.
fn name_loop_events(r: &mut Recorder) {
    for (i, name) in PART_NAMES.iter().enumerate() {
        r.set_name(trace::LOOP_PART + i as u16, *name);
    }
    r.set_name(trace::LOOP_CONTROL, "control");
    r.set_name(trace::LOOP_FLUSH, "wire flush");
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::invoker::LocalClient;
    use std::time::Duration;
    use unet_abi::udm::UDM_MAX_NODES;
    use unet_control::{Reply, Request};

    /// The largest job segment of [`UDM_MAX_NODES`] nodes: many MiB to
    /// zero, on the large lane.
    fn big_job() -> Request {
        Request::UdmCreateJob {
            nodes: UDM_MAX_NODES,
            fast_cap: 64,
            buffer_size: 4096,
            atomicity_timeout_us: 2000,
        }
    }

    /// Step `engine` until `done` holds (at most 20 s).
    fn step_until(engine: &mut Dispatcher, mut done: impl FnMut(&Dispatcher) -> bool) {
        let t0 = Instant::now();
        while !done(engine) {
            assert!(t0.elapsed() < Duration::from_secs(20), "never happened");
            engine.step();
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// A job is made off the loop: the request is taken and its id
    /// reserved at once, the job entered (and the client answered) once
    /// its memory is ready.
    #[test]
    fn a_job_is_answered_when_its_memory_is_ready() {
        let mut engine = Dispatcher::new(EngineConfig::default()).unwrap();
        let mut c = LocalClient::new(&mut engine).unwrap();
        let req = c.send_request(&big_job(), &[]).unwrap();
        step_until(&mut engine, |e| !e.work.pending_jobs().is_empty());
        let id = engine.work.pending_jobs()[0].id;
        assert_eq!(engine.udm.reserved(), 1);
        let mut reply = None;
        step_until(&mut engine, |_| {
            reply = c.take_reply(req).unwrap();
            reply.is_some()
        });
        let Some((Reply::UdmJob { job, key }, _)) = reply else {
            panic!("not a job: {reply:?}");
        };
        assert_eq!(job, id);
        assert_eq!(engine.udm.jobs[&id].key, key);
        assert_eq!(engine.udm.reserved(), 0);
        assert!(engine.work.pending_jobs().is_empty());
        // The creator goes: the job (no node joined) is retired, its
        // segments unmapped on the set-up thread.
        drop(c);
        step_until(&mut engine, |e| e.udm.is_empty() && !e.work.busy());
    }

    /// A client that disconnects while its job is being made leaves
    /// nothing behind: no job, no reserved id, no memory charged.
    #[test]
    fn a_job_whose_client_went_away_while_it_was_made_is_not_kept() {
        let mut engine = Dispatcher::new(EngineConfig::default()).unwrap();
        let mut c = LocalClient::new(&mut engine).unwrap();
        c.send_request(&big_job(), &[]).unwrap();
        c.send_request(&big_job(), &[]).unwrap();
        step_until(&mut engine, |e| e.work.pending_jobs().len() == 2);
        assert!(engine.udm.is_empty(), "made on the loop");
        drop(c);
        step_until(&mut engine, |e| e.server.client(0).is_none());
        assert!(engine.work.pending_jobs().is_empty());
        assert_eq!(engine.udm.reserved(), 0);
        step_until(&mut engine, |e| !e.work.busy());
        assert!(engine.udm.is_empty());
        assert_eq!(engine.counters.engine_value(EngineCounter::UdmJobs), 0);
    }

    /// The wire is flushed once per turn, and what a turn queued leaves
    /// in it: messages posted on two endpoints' remote channels go in one
    /// batch at the sender's next step, and arrive at the receiver's.
    #[test]
    fn a_turn_sends_what_its_parts_queued_in_one_batch() {
        use crate::wire::{MemoryHub, PortConfig};
        use unet_abi::{Geometry, SendDesc, SendStatus};
        use unet_control::EndpointAddr;

        let hub = MemoryHub::new();
        let pc = PortConfig::loopback();
        let at = |port: u16| SocketAddr::from(([10, 0, 0, 1], port));
        let cfg = EngineConfig {
            allow_peers: vec!["10.0.0.0/24".parse().unwrap()],
            ..EngineConfig::default()
        };
        let bind = |port, cfg| {
            let t = Box::new(hub.bind(at(port), pc).unwrap());
            Dispatcher::with_transport(cfg, t).unwrap()
        };
        let (mut ea, mut eb) = (bind(1, cfg.clone()), bind(2, cfg));
        let mut ca = LocalClient::new(&mut ea).unwrap();
        let mut cb = LocalClient::new(&mut eb).unwrap();
        let g = Geometry {
            buffer_size: 2048,
            buffer_area_size: 1 << 20,
            ..Geometry::default()
        };
        let mut senders = [
            ca.create_endpoint(&mut ea, g).unwrap(),
            ca.create_endpoint(&mut ea, g).unwrap(),
        ];
        let mut b = cb.create_endpoint(&mut eb, g).unwrap();
        for i in 0..8 {
            assert!(b.post_free((1 << 19) + i * 2048));
        }
        let mut chans = Vec::new();
        for a in &senders {
            let req = Request::OpenChannel {
                endpoint: a.id(),
                dst: EndpointAddr {
                    host: Some(at(2)),
                    id: b.id(),
                },
                path: unet_control::PathChoice::Auto,
            };
            let (rep, _) = ca
                .call_while(&mut ea, &req, &[], || {
                    eb.step();
                })
                .unwrap();
            match rep {
                Reply::ChannelOpened { channel, .. } => chans.push(channel),
                r => panic!("open: {r:?}"),
            }
        }
        while ea.step() + eb.step() + ea.step() + eb.step() > 0 {}
        let batches = |e: &Dispatcher| e.counters.engine_value(EngineCounter::WireTxBatches);
        let before = batches(&ea);
        let mut posted = Vec::new();
        for (a, &channel) in senders.iter_mut().zip(&chans) {
            a.write_area(0, b"ping");
            let d = SendDesc {
                offset: 0,
                len: 4,
                channel,
                ..Default::default()
            };
            posted.push(a.push_send(d).unwrap());
        }
        ea.step();
        for (a, &pos) in senders.iter().zip(&posted) {
            assert_eq!(a.send_status(pos), SendStatus::Sent as i32);
        }
        assert_eq!(batches(&ea), before + 1, "one flush for the turn");
        eb.step();
        assert!(b.pop_recv().is_some() && b.pop_recv().is_some());
    }
}
