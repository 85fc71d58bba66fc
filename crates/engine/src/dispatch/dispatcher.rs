//! The dispatcher: the engine's one single-threaded, message-driven loop
//! (SPINE section 3.2), and the owner of every part of the engine.
//!
//! Each turn polls the sources — send rings of all endpoints, the wire,
//! the arrivals and timers of applets, and now and then the file
//! descriptors (control sockets, doorbells, the admin eventfd) — and runs
//! what it finds. When a turn finds nothing for `idle_spin`, the engine
//! arms every endpoint's doorbell, looks once more, and sleeps in
//! `epoll_wait` until a doorbell, a control socket, a datagram or a timer
//! wakes it. An idle engine uses no CPU.
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
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use unet_abi::EngineCounter;
use unet_sys::{self as sys, EventFd};

use crate::config::EngineConfig;
use crate::control::server::{ControlServer, Incoming};
use crate::control::setup::Setup;
use crate::control::setup_thread::SetupThread;
use crate::counters::Counters;
use crate::poller::{Poller, Token};
use crate::udm::Jobs;
use crate::unet::applets::AppletHost;
use crate::unet::datapath::{arrive, DataPath};
use crate::unet::direct::DirectConns;
use crate::unet::endpoints::EndpointTable;
use crate::unet::remote::RemoteSide;
use crate::via::vias::Vias;
use crate::wire::Transport;

/// A turn polls the file descriptors at least once in this many.
const FD_POLL_EVERY: u64 = 64;
/// How long the engine sleeps at most while a buffered endpoint has
/// messages waiting in its virtual buffer.
const BACKLOG_POLL: std::time::Duration = std::time::Duration::from_millis(1);

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
    eps: EndpointTable,
    conns: DirectConns,
    remote: Option<RemoteSide>,
    applets: AppletHost,
    /// Set-up work that takes long (making and unmapping large segments).
    work: SetupThread,
    /// VIA's regions, VIs, discriminators and waiting requests.
    vias: Vias,
    /// UDM's jobs and nodes.
    udm: Jobs,
    counters: Arc<Counters>,
    shared: Arc<Shared>,
    tokens: Vec<Token>,
    incoming: Vec<Incoming>,
    turn: u64,
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
        let remote = match (transport, cfg.udp_bind) {
            (Some(t), _) => Some(RemoteSide::new(t, &cfg, engine_id, counters.clone())),
            (None, Some(a)) => Some(RemoteSide::bind(a, &cfg, engine_id, counters.clone())?),
            (None, None) => None,
        };
        if let Some(w) = &remote {
            poller.add(w.raw_fd(), Token::Wire)?;
        }
        Ok(Dispatcher {
            eps: EndpointTable::new(cfg.max_endpoints, counters.clone()),
            applets: AppletHost::new(shared.admin.clone()),
            work: SetupThread::new(shared.admin.clone()),
            vias: Vias::default(),
            udm: Jobs::default(),
            cfg,
            engine_id,
            poller,
            server,
            conns: DirectConns::default(),
            remote,
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

    /// The engine's incarnation id.
    pub fn engine_id(&self) -> u64 {
        self.engine_id
    }

    /// The engine's UDP address, if it has a wire.
    pub fn udp_addr(&self) -> Option<SocketAddr> {
        self.remote.as_ref().map(|w| w.local_addr())
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
        self.eps.handoff = false;
        let mut work = self.poll_data();
        self.turn += 1;
        if work == 0 || self.turn.is_multiple_of(FD_POLL_EVERY) {
            work += self.poll_fds(0);
        }
        work
    }

    /// Run turns until [`crate::Engine::stop`] (or a stop through the
    /// shared state), sleeping when there is nothing to do; then reclaim
    /// everything.
    pub(crate) fn run(&mut self) {
        let mut idle_since: Option<Instant> = None;
        while !self.shared.stop.load(Ordering::Relaxed) {
            // Set by the deliveries of the last turn only.
            let handoff = std::mem::take(&mut self.eps.handoff);
            let mut work = self.poll_data();
            self.turn += 1;
            if work == 0 && handoff {
                self.counters.engine(EngineCounter::Handoffs, 1);
                self.sleep();
                idle_since = None;
                continue;
            }
            if work == 0 || self.turn.is_multiple_of(FD_POLL_EVERY) {
                work += self.poll_fds(0);
            }
            if work > 0 {
                self.counters.engine(EngineCounter::BusyPolls, 1);
                idle_since = None;
                continue;
            }
            let now = Instant::now();
            match idle_since {
                None => idle_since = Some(now),
                Some(t) if now.duration_since(t) >= self.cfg.idle_spin => {
                    self.sleep();
                    idle_since = None;
                }
                Some(_) => std::hint::spin_loop(),
            }
        }
        self.shutdown();
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
            eps: &mut self.eps,
            conns: &mut self.conns,
            remote: self.remote.as_mut(),
            applets: &mut self.applets,
            work: &mut self.work,
            vias: &mut self.vias,
            udm: &mut self.udm,
        }
    }

    fn sleep(&mut self) {
        self.eps.arm();
        crate::via::via_loop::arm(&self.vias, true);
        self.udm.arm(true);
        // Pairs with the fence a client issues between publishing a send
        // descriptor and reading `engine_armed`: either we see its
        // descriptor below, or it sees our armed flag and rings.
        fence(Ordering::SeqCst);
        if self.poll_data() > 0 {
            self.eps.disarm();
            crate::via::via_loop::arm(&self.vias, false);
            self.udm.arm(false);
            return;
        }
        if let Some(w) = self.remote.as_mut() {
            w.before_sleep();
        }
        self.counters.engine(EngineCounter::Sleeps, 1);
        let timeout = self.next_timer_ms();
        let work = self.poll_fds(timeout);
        self.counters.engine(EngineCounter::Wakeups, 1);
        self.eps.disarm();
        crate::via::via_loop::arm(&self.vias, false);
        self.udm.arm(false);
        if work == 0 && self.poll_data() == 0 {
            self.counters.engine(EngineCounter::SpuriousWakeups, 1);
        }
    }

    /// How long the engine may sleep: until the wire's next timer, an
    /// applet's next timer or the end of its pause (at most a second).
    fn next_timer_ms(&self) -> i32 {
        let wire = self.remote.as_ref().and_then(|w| w.next_deadline());
        let requests = self.vias.next_deadline();
        let vis = self
            .remote
            .as_ref()
            .and_then(|w| crate::via::via_loop::next_deadline(&self.vias, &w.port));
        let applets = self
            .applets
            .attached_indices()
            .iter()
            .filter_map(|&i| self.applets.runner(i).and_then(|r| r.next_deadline()))
            .min();
        let udm = self.udm.next_deadline();
        let links = self
            .remote
            .as_ref()
            .and_then(|w| crate::udm::remote::next_deadline(&self.udm, &w.port));
        // A buffered endpoint with messages waiting: its client does not
        // ring the doorbell when it makes room, so look again soon.
        let backlog = self
            .eps
            .has_backlog()
            .then(|| Instant::now() + BACKLOG_POLL);
        match [wire, applets, requests, vis, udm, links, backlog]
            .into_iter()
            .flatten()
            .min()
        {
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

    /// Poll every data source once. Returns the work done.
    fn poll_data(&mut self) -> usize {
        // Buffered endpoints' waiting messages first: room that appeared
        // goes to them before anything new.
        let mut work = self.eps.drain_backlogs();
        {
            let mut dp = DataPath {
                eps: &mut self.eps,
                remote: self.remote.as_mut(),
                applets: &mut self.applets,
            };
            for idx in 0..dp.eps.len() {
                if dp.eps.get(idx).is_some() {
                    work += dp.poll_send_ring(idx);
                }
            }
        }
        if self.remote.is_some() {
            work += self.poll_wire();
            work += self.poll_vis();
        }
        if !self.udm.is_empty() {
            work += self.udm.poll();
            if self.udm.visits != 0 {
                let n = std::mem::take(&mut self.udm.visits);
                self.counters.engine(EngineCounter::UdmNodeVisits, n);
            }
            if self.udm.proc_reads != 0 {
                let n = std::mem::take(&mut self.udm.proc_reads);
                self.counters.engine(EngineCounter::UdmProcReads, n);
            }
            if !self.udm.released.is_empty() {
                let segs = std::mem::take(&mut self.udm.released);
                self.work.release_all(segs);
            }
        }
        if let Some(w) = self.remote.as_mut() {
            work += crate::udm::remote::poll(&mut self.udm, &mut w.port, &self.counters);
            if self.udm.remote.setup_due() {
                self.setup().udm_links();
            }
            if let Some(w) = self.remote.as_mut() {
                w.flush();
            }
        }
        if self.applets.any() {
            let mut dp = DataPath {
                eps: &mut self.eps,
                remote: self.remote.as_mut(),
                applets: &mut self.applets,
            };
            if !dp.applets.pending.is_empty() {
                work += dp.run_pending();
            }
            if dp.applets.has_timers() {
                work += dp.run_timers();
            }
        }
        if std::mem::take(&mut self.eps.behind) {
            // A receiver is behind (see the module docs).
            self.counters.engine(EngineCounter::ReceiverYields, 1);
            std::thread::yield_now();
        }
        work
    }

    /// Move the VIs the engine carries on (their frames, descriptors,
    /// timers); set-up frames go to the control side.
    fn poll_vis(&mut self) -> usize {
        let Some(w) = self.remote.as_mut() else {
            return 0;
        };
        let inbox = &w.port.st.vis;
        if self.vias.engine.is_empty() && inbox.frames.is_empty() && inbox.silent.is_empty() {
            return 0;
        }
        let linger = self.cfg.idle_spin.as_nanos().min(u64::MAX as u128) as u64;
        let (work, setup) =
            crate::via::via_loop::poll(&mut self.vias, &mut w.port, &self.counters, linger);
        if !setup.is_empty() {
            self.setup().vi_wire(setup);
        }
        // Datagrams the VIs queued go now.
        if let Some(w) = self.remote.as_mut() {
            w.flush();
        }
        work
    }

    /// Receive from the wire; whole messages arrive at their endpoints.
    fn poll_wire(&mut self) -> usize {
        let Some(w) = self.remote.as_mut() else {
            return 0;
        };
        let applets = &mut self.applets;
        let (work, done) = w.poll(&mut self.eps, &mut |eps, di, id, chan, msg| {
            arrive(eps, applets, di, id, chan, msg)
        });
        if !done.is_empty() {
            self.setup().complete(done);
        }
        work
    }

    /// Wait up to `timeout_ms` for file-descriptor events and handle them.
    fn poll_fds(&mut self, timeout_ms: i32) -> usize {
        let mut tokens = std::mem::take(&mut self.tokens);
        self.poller.wait(&mut tokens, timeout_ms);
        let n = tokens.len();
        for &t in &tokens {
            match t {
                Token::Listener => self.server.accept(&self.poller),
                Token::Client(ci) => self.serve_client(ci),
                // Edge-triggered: nothing to read back (the counter only
                // grows; 2^64 doorbells are far away).
                Token::Doorbell(idx) => self.eps.doorbell_rung(idx),
                Token::Admin => self.admin(),
                Token::Wire => {} // read by poll_data
                // Its VI's client posted: the next turn visits it.
                Token::ViDoorbell(id) => crate::via::via_loop::touch(&mut self.vias, id as u32),
                // Its job is polled every turn; the wake-up was the point.
                Token::UdmDoorbell(_) => {}
            }
        }
        self.tokens = tokens;
        if self
            .vias
            .next_deadline()
            .is_some_and(|d| d <= Instant::now())
        {
            self.setup().expire_requests(Instant::now());
        }
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
        if self.applets.loading() {
            let done = self.applets.poll_loads();
            if !done.is_empty() {
                self.setup().finish_loads(done);
            }
        }
        if self.work.busy() {
            self.setup().finish_creates();
        }
    }
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
}
