//! Handlers and asynchronous upcalls: a node whose arriving messages run
//! their handlers, asynchronously with respect to its main code and inside
//! an atomic section, as the UDM paper's model has it.
//!
//! # How the upcall happens
//!
//! Each [`UpcallNode`] has a *handler thread* of its own. It sleeps on the
//! node's futex (the word senders and the engine already bump and wake
//! when they give a sleeping node a message, as [`Node::wait`] does) and,
//! woken, runs the handler of each waiting message. A signal to the main
//! thread was the other choice; it was left out because a signal handler
//! may run only async-signal-safe code (no allocation, no locks, none of
//! the handler's own code that a Rust closure may contain), because it
//! would interrupt the main code in the middle of a `Node` method (whose
//! state it would then need), and because a signal costs a system call per
//! message at the sender. A thread runs any code, and the main code keeps
//! running on its own core while handlers run (the paper's "some runnable
//! thread is resumed" left to the thread scheduler).
//!
//! # The atomicity word
//!
//! One atomic word of the process decides who may use the node's
//! consuming and sending state (its positions in the rings and the virtual
//! buffer, its current message). It is mirrored into the node's atomicity
//! control word in the job segment ([`UdmNodeLine::uac`]), which the
//! engine reads; the exclusion itself never trusts that word, which the
//! job's other nodes can write:
//!
//! ```text
//!  bit 0 DISABLE      the main code's atomic section (beginatom), or a
//!                     section a handler extended (with EXTEND)
//!  bit 1 TIMER_FORCE  the atomicity timer runs even with nothing waiting
//!  bit 2 HANDLER      a handler runs (the handler thread owns the node)
//!  bit 3 EXTEND       atomicity-extend: endatom does the deferred work
//!  bit 4 FAULT        upcalls suspended after an error, until taken
//!  bit 5 WANT         the handler thread waits for endatom to wake it
//! ```
//!
//! - The handler thread takes the node with a compare-and-swap from a word
//!   without DISABLE, HANDLER, EXTEND or FAULT to the same word with
//!   HANDLER (Acquire), and gives it back by clearing HANDLER (Release).
//!   Finding DISABLE (or EXTEND, FAULT) it sets WANT and sleeps.
//! - `beginatom(ATOM_DISABLE)` sets DISABLE (one fetch-or) and, only if
//!   the old word had HANDLER, waits for it to clear: once it returns, the
//!   handler thread cannot take the node until DISABLE is cleared.
//! - `endatom(ATOM_DISABLE)` clears DISABLE, EXTEND and WANT (one
//!   fetch-and) and, only if WANT or EXTEND was set, wakes the handler
//!   thread (a system call only then).
//! - A method of the main code called outside an atomic section makes one
//!   of its own around the call.
//!
//! So a handler never runs inside the main code's atomic section, two
//! handlers never run at once (one thread runs them), and the engine,
//! which reads the mirror, sees a running handler as an atomic section: a
//! handler that keeps messages waiting past the atomicity timeout has the
//! node switched to buffered mode, as a slow atomic section does.
//!
//! # Table 1 of the paper
//!
//! | operation | here |
//! |---|---|
//! | `beginatom(mask)` | UAC := UAC ∨ mask; with `interrupt-disable`, waits for a running handler to return |
//! | `endatom` with `dispose-pending` | a handler's end (its return) without an extract or dispose: [`UpcallError::DisposeFailure`], counted, the message stays, upcalls wait for [`UpcallNode::take_error`] |
//! | `endatom` with `atomicity-extend` | a handler that called [`Upcall::extend_atomicity`] returns into an atomic section of the main code; the main code's `endatom` ends it and hands the messages that waited to their handlers |
//! | `endatom` otherwise | UAC := UAC ∧ ¬mask; messages that waited run their handlers |
//! | `dispose` | in buffered mode emulated (transparent); with no message [`ExtractError::Empty`] (`bad-dispose`); else the message is freed |
//!
//! `unsafe` is allowed here: the node is shared by the main code and the
//! handler thread in an `UnsafeCell`, held by one of them at a time under
//! the atomicity word (the protocol above) rather than a lock, and the
//! handler thread keeps a pointer to the node's line beside it.

use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use unet_abi::udm::{
    UdmNodeLine, UDM_ATOM_DISABLE as DISABLE, UDM_ATOM_EXTEND as EXTEND, UDM_ATOM_FAULT as FAULT,
    UDM_ATOM_HANDLER as HANDLER, UDM_ATOM_USER, UDM_ATOM_WANT as WANT,
};
use unet_sys as sys;

use super::{ExtractError, Header, InjectError, Message, Mode, Node, NodeStats};
use crate::Error;

/// The bits that keep the handler thread out.
const BLOCK: u32 = DISABLE | HANDLER | EXTEND | FAULT;

/// A handler: called with the message that raised the upcall current.
type Handler = Box<dyn FnMut(&mut Upcall<'_>) + Send + 'static>;

/// How an [`UpcallNode`]'s handler thread waits.
#[derive(Clone, Copy, Debug)]
pub struct UpcallConfig {
    /// How long the handler thread keeps looking for messages after the
    /// last one before it sleeps on the node's futex (default 50 µs;
    /// zero: sleep at once, every upcall then costs a wake-up).
    pub spin: Duration,
}

impl Default for UpcallConfig {
    fn default() -> Self {
        UpcallConfig {
            spin: Duration::from_micros(50),
        }
    }
}

/// What went wrong with an upcall. Upcalls stop after one (the paper's
/// trap to the kernel) until the main code takes it with
/// [`UpcallNode::take_error`]; the message concerned stays current unless
/// said otherwise, for the main code to extract or dispose of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpcallError {
    /// A message for a handler index with no handler registered.
    NoHandler {
        /// The handler index.
        handler: u16,
        /// The sender's rank.
        src: u32,
    },
    /// The paper's `dispose-failure`: the handler returned without
    /// extracting or disposing of a message.
    DisposeFailure {
        /// The handler index.
        handler: u16,
        /// The sender's rank.
        src: u32,
    },
    /// The handler panicked (the message stays only if it had not taken
    /// it).
    Panicked {
        /// The handler index.
        handler: u16,
        /// The sender's rank.
        src: u32,
    },
}

impl std::fmt::Display for UpcallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoHandler { handler, src } => {
                write!(f, "a message from node {src} for handler {handler}, which is not registered")
            }
            Self::DisposeFailure { handler, src } => write!(
                f,
                "handler {handler} returned without extracting or disposing of the message from node {src}"
            ),
            Self::Panicked { handler, src } => {
                write!(f, "handler {handler} panicked on a message from node {src}")
            }
        }
    }
}

impl std::error::Error for UpcallError {}

/// What a handler works with: the node, while the handler runs in its
/// atomic section. The message that raised the upcall is current: its
/// [`header`](Upcall::header) is known, and the handler must
/// [`extract`](Upcall::extract) or [`dispose`](Upcall::dispose) of at
/// least one message before it returns (else
/// [`UpcallError::DisposeFailure`]).
pub struct Upcall<'a> {
    node: &'a mut Node,
    header: Header,
    taken: u32,
    extend: bool,
}

impl Upcall<'_> {
    /// The message that raised the upcall.
    pub fn header(&self) -> Header {
        self.header
    }

    /// This node's rank.
    pub fn rank(&self) -> u32 {
        self.node.rank()
    }

    /// Nodes in the job.
    pub fn nodes(&self) -> u32 {
        self.node.nodes()
    }

    /// The message-available flag ([`Node::message_available`]).
    pub fn message_available(&mut self) -> bool {
        self.node.message_available()
    }

    /// [`Node::extract`]: the current message's words into `words`.
    pub fn extract(&mut self, words: &mut [u64]) -> Result<Header, ExtractError> {
        let r = self.node.extract(words);
        if r.is_ok() {
            self.taken += 1;
        }
        r
    }

    /// [`Node::peek`]: a copy of the current message, which stays.
    pub fn peek(&mut self) -> Result<Message, ExtractError> {
        self.node.peek()
    }

    /// [`Node::dispose`]: free the current message.
    pub fn dispose(&mut self) -> Result<(), ExtractError> {
        let r = self.node.dispose();
        if r.is_ok() {
            self.taken += 1;
        }
        r
    }

    /// [`Node::inject`]. It may wait (overflow control) while the handler
    /// holds the node's atomic section: prefer [`Upcall::injectc`] where
    /// the destination may be this node's own sender held back.
    pub fn inject(&mut self, dest: u32, handler: u16, words: &[u64]) -> Result<(), InjectError> {
        self.node.inject(dest, handler, words)
    }

    /// [`Node::injectc`].
    pub fn injectc(&mut self, dest: u32, handler: u16, words: &[u64]) -> Result<bool, InjectError> {
        self.node.injectc(dest, handler, words)
    }

    /// The paper's `atomicity-extend`: the atomic section goes on after the
    /// handler returns, in the main code, which ends it with
    /// [`UpcallNode::endatom`]`(ATOM_DISABLE)`; that `endatom` does the
    /// deferred work (the messages that waited run their handlers). The
    /// main code sees [`UpcallNode::atomicity`] with `ATOM_DISABLE` set.
    pub fn extend_atomicity(&mut self) {
        self.extend = true;
    }
}

/// What only the owner of the atomicity word's exclusion may touch.
struct Core {
    node: Node,
    handlers: Vec<Option<Handler>>,
}

/// What the main code and the handler thread share.
struct Shared {
    /// The node and its handlers. Touched only by whoever holds the node
    /// (see [`Shared::core`]).
    core: UnsafeCell<Core>,
    /// The node's line in the job segment, which the node in `core` maps
    /// for as long as `Shared` lives.
    line: NonNull<UdmNodeLine>,
    /// The atomicity word (module documentation): in this process's own
    /// memory, mirrored into the line's `uac` for the engine.
    state: AtomicU32,
    /// The error that suspended upcalls.
    error: Mutex<Option<UpcallError>>,
    stop: AtomicBool,
    cfg: UpcallConfig,
}

// SAFETY: `core` is reached only through `Shared::core`, whose callers hold
// the node by `state` (HANDLER for the handler thread, DISABLE without
// HANDLER for the main code), so one thread at a time; the word's Acquire
// and Release order their accesses. `state` is private to the process. `line` points at atomics in a
// shared mapping that lives as long as `core`'s node. Node is Send.
unsafe impl Sync for Shared {}
// SAFETY: as above; every field is Send (the node, boxed Send handlers).
unsafe impl Send for Shared {}

const _: fn() = || {
    fn send<T: Send>() {}
    send::<Node>();
};

impl Shared {
    fn line(&self) -> &UdmNodeLine {
        // SAFETY: the line lies in the job segment the node in `core` maps,
        // and that node is dropped only with `Shared`; its fields are
        // atomics.
        unsafe { self.line.as_ref() }
    }

    /// The node and its handlers.
    ///
    /// # Safety
    /// The caller holds the node: it is the handler thread and set HANDLER,
    /// or it is the main code and DISABLE is set with HANDLER clear; and it
    /// drops the reference before giving the node back.
    #[allow(clippy::mut_from_ref)]
    unsafe fn core(&self) -> &mut Core {
        // SAFETY: exclusive per the caller's contract.
        unsafe { &mut *self.core.get() }
    }

    /// Copy `state` into the line's `uac` (what the engine reads): until
    /// the copy is the word as it is after the store, so that of two
    /// threads mirroring at once the last store is the latest value.
    fn mirror(&self) {
        let uac = &self.line().uac;
        loop {
            let v = self.state.load(Ordering::Acquire);
            uac.store(v, Ordering::Release);
            if self.state.load(Ordering::Acquire) == v {
                return;
            }
        }
    }

    /// Wake the handler thread (and whoever else sleeps on the node).
    fn kick(&self) {
        let line = self.line();
        line.rx_futex.fetch_add(1, Ordering::Release);
        sys::futex_wake(&line.rx_futex, i32::MAX);
    }
}

/// A UDM node with handlers: messages that arrive while interrupts are
/// enabled (no atomic section) run the handler registered for their index
/// on the node's handler thread, one at a time, each inside an atomic
/// section. Made by [`Node::into_upcalls`]; the same operations as
/// [`Node`], each safe to call at any time (outside an atomic section a
/// call makes a short one of its own, so it never overlaps a handler).
///
/// A handler works through its [`Upcall`], never through its own
/// `UpcallNode` (one shared with it would wait for the handler itself to
/// return: a deadlock, not a data race).
pub struct UpcallNode {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    rank: u32,
    nodes: u32,
    job: u32,
}

impl std::fmt::Debug for UpcallNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UpcallNode({} of job {})", self.rank, self.job)
    }
}

impl Node {
    /// This node with handlers and asynchronous upcalls, with the default
    /// [`UpcallConfig`]. Register handlers with [`UpcallNode::set_handler`].
    pub fn into_upcalls(self) -> Result<UpcallNode, Error> {
        self.into_upcalls_with(UpcallConfig::default())
    }

    /// [`Node::into_upcalls`] with a configuration.
    pub fn into_upcalls_with(self, cfg: UpcallConfig) -> Result<UpcallNode, Error> {
        let rank = self.rank();
        let nodes = self.nodes();
        let job = self.job();
        // The main code's bits go over to the word; our copy is not used
        // again.
        // The main code's bits stay in the word (an atomic section the
        // node is in goes on); our copy is not used until into_node.
        let line = NonNull::from(self.line(rank));
        let state = AtomicU32::new(self.uac & UDM_ATOM_USER);
        let shared = Arc::new(Shared {
            core: UnsafeCell::new(Core {
                node: self,
                handlers: Vec::new(),
            }),
            line,
            state,
            error: Mutex::new(None),
            stop: AtomicBool::new(false),
            cfg,
        });
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("udm-h{job}.{rank}"))
            .spawn(move || handler_thread(&sh))?;
        Ok(UpcallNode {
            shared,
            thread: Some(thread),
            rank,
            nodes,
            job,
        })
    }
}

impl UpcallNode {
    /// Run `f` holding the node: in the main code's atomic section if there
    /// is one, else in one made for the call.
    fn with<R>(&mut self, f: impl FnOnce(&mut Core) -> R) -> R {
        if self.shared.state.load(Ordering::Acquire) & DISABLE != 0 {
            // SAFETY: DISABLE is set, so (beginatom waited for it, or the
            // handler thread set it on giving the node back with EXTEND)
            // HANDLER is clear and cannot be set until the main code,
            // this thread, clears DISABLE.
            return f(unsafe { self.shared.core() });
        }
        self.beginatom(DISABLE);
        // SAFETY: as above, beginatom(DISABLE) has returned.
        let r = f(unsafe { self.shared.core() });
        self.endatom(DISABLE);
        r
    }

    /// Register `handler` for messages with handler index `index`
    /// (replacing any). It runs on the node's handler thread, with the
    /// message current, inside an atomic section.
    pub fn set_handler(
        &mut self,
        index: u16,
        handler: impl FnMut(&mut Upcall<'_>) + Send + 'static,
    ) {
        let h: Handler = Box::new(handler);
        self.with(|c| {
            let i = index as usize;
            if c.handlers.len() <= i {
                c.handlers.resize_with(i + 1, || None);
            }
            c.handlers[i] = Some(h);
        });
        // The messages that waited for it.
        self.shared.kick();
    }

    /// Remove the handler of `index`: its messages then stop upcalls with
    /// [`UpcallError::NoHandler`].
    pub fn clear_handler(&mut self, index: u16) {
        self.with(|c| {
            if let Some(h) = c.handlers.get_mut(index as usize) {
                *h = None;
            }
        });
    }

    /// The error that suspended upcalls, if any; taking it resumes them
    /// (extract or dispose of the message concerned first, or its handler
    /// runs again).
    pub fn take_error(&mut self) -> Option<UpcallError> {
        let e = self
            .shared
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if e.is_some() {
            let prev = self
                .shared
                .state
                .fetch_and(!(FAULT | WANT), Ordering::AcqRel);
            self.shared.mirror();
            if prev & WANT != 0 {
                self.shared.kick();
            }
        }
        e
    }

    /// Begin an atomic section: set the bits in `mask` (`ATOM_DISABLE`,
    /// `ATOM_TIMER_FORCE`). With `ATOM_DISABLE`, no handler runs until
    /// the matching [`endatom`](UpcallNode::endatom), and one that is
    /// running is waited for. One fetch-or when no handler runs.
    pub fn beginatom(&mut self, mask: u32) {
        let m = mask & UDM_ATOM_USER;
        let uac = &self.shared.state;
        let prev = uac.fetch_or(m, Ordering::AcqRel);
        self.shared.mirror();
        if m & DISABLE == 0 || prev & HANDLER == 0 {
            return;
        }
        // A handler runs: it sees DISABLE when it returns (the handler
        // thread then gives the node back and wakes us).
        let mut spins = 0u32;
        loop {
            let v = uac.load(Ordering::Acquire);
            if v & HANDLER == 0 {
                return;
            }
            spins += 1;
            if spins < 1024 {
                std::hint::spin_loop();
            } else {
                sys::futex_wait(uac, v, Some(Duration::from_millis(10)));
            }
        }
    }

    /// End an atomic section: clear the bits in `mask`. Ending
    /// `ATOM_DISABLE` after a handler's `atomicity-extend` does the
    /// deferred work, and whenever the handler thread waited for the
    /// section to end it is woken: the messages that waited run their
    /// handlers. One fetch-and otherwise.
    pub fn endatom(&mut self, mask: u32) {
        let m = mask & UDM_ATOM_USER;
        let clear = if m & DISABLE != 0 {
            m | EXTEND | WANT
        } else {
            m
        };
        let prev = self.shared.state.fetch_and(!clear, Ordering::AcqRel);
        self.shared.mirror();
        if m & DISABLE != 0 && prev & (WANT | EXTEND) != 0 {
            self.shared.kick();
        }
    }

    /// The main code's atomicity bits now (`ATOM_DISABLE` also while a
    /// section a handler extended goes on).
    pub fn atomicity(&self) -> u32 {
        self.shared.state.load(Ordering::Acquire) & UDM_ATOM_USER
    }

    /// [`Node::inject`].
    pub fn inject(&mut self, dest: u32, handler: u16, words: &[u64]) -> Result<(), InjectError> {
        self.with(|c| c.node.inject(dest, handler, words))
    }

    /// [`Node::injectc`].
    pub fn injectc(&mut self, dest: u32, handler: u16, words: &[u64]) -> Result<bool, InjectError> {
        self.with(|c| c.node.injectc(dest, handler, words))
    }

    /// [`Node::message_available`] (inside an atomic section: outside one,
    /// a handler may take the message first).
    pub fn message_available(&mut self) -> bool {
        self.with(|c| c.node.message_available())
    }

    /// [`Node::extract`].
    pub fn extract(&mut self, words: &mut [u64]) -> Result<Header, ExtractError> {
        self.with(|c| c.node.extract(words))
    }

    /// [`Node::peek`].
    pub fn peek(&mut self) -> Result<Message, ExtractError> {
        self.with(|c| c.node.peek())
    }

    /// [`Node::dispose`].
    pub fn dispose(&mut self) -> Result<(), ExtractError> {
        self.with(|c| c.node.dispose())
    }

    /// [`Node::wait`], in an atomic section (the main code's, or one made
    /// for the wait): no handler takes the message waited for.
    pub fn wait(&mut self, timeout: Option<Duration>) -> bool {
        self.with(|c| c.node.wait(timeout))
    }

    /// This node's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Nodes in the job.
    pub fn nodes(&self) -> u32 {
        self.nodes
    }

    /// The job's id.
    pub fn job(&self) -> u32 {
        self.job
    }

    /// [`Node::mode`].
    pub fn mode(&mut self) -> Mode {
        self.with(|c| c.node.mode())
    }

    /// [`Node::mode_of`].
    pub fn mode_of(&mut self, rank: u32) -> Mode {
        self.with(|c| c.node.mode_of(rank))
    }

    /// [`Node::stats`].
    pub fn stats(&mut self) -> NodeStats {
        self.with(|c| c.node.stats())
    }

    /// [`Node::buffer_memory`].
    pub fn buffer_memory(&mut self) -> std::io::Result<u64> {
        self.with(|c| c.node.buffer_memory())
    }

    /// Stop the handler thread (after the handler it runs, if any) and
    /// give back the polling node (its handlers are dropped; a pending
    /// error is dropped too).
    pub fn into_node(mut self) -> Node {
        self.stop_thread();
        let shared = self.shared.clone();
        // Our clone goes; the handler thread's went when it ended.
        drop(self);
        match Arc::try_unwrap(shared) {
            Ok(sh) => {
                let mut node = sh.core.into_inner().node;
                // The main code's bits (a section a handler extended is
                // the main code's now), in the word and our copy.
                let v = sh.state.load(Ordering::Acquire);
                node.uac = v & UDM_ATOM_USER | if v & EXTEND != 0 { DISABLE } else { 0 };
                node.line(node.rank())
                    .uac
                    .store(node.uac, Ordering::Release);
                node
            }
            Err(_) => unreachable!("the handler thread has ended: no other clone"),
        }
    }

    /// Leave the job ([`Node::leave`]), after stopping the handler thread.
    pub fn leave(mut self) -> Result<(), Error> {
        self.stop_thread();
        // SAFETY: the handler thread is gone; this is the only thread
        // left that reaches the node.
        let core = unsafe { self.shared.core() };
        core.node.leave_now()
    }

    fn stop_thread(&mut self) {
        if let Some(t) = self.thread.take() {
            self.shared.stop.store(true, Ordering::Release);
            self.shared.kick();
            let _ = t.join();
        }
    }
}

impl Drop for UpcallNode {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// The handler thread: take the node when no atomic section holds it, run
/// the handlers of the waiting messages, give it back, sleep.
fn handler_thread(sh: &Shared) {
    let line = sh.line();
    let mut idle_since: Option<Instant> = None;
    while !sh.stop.load(Ordering::Acquire) {
        let fv = line.rx_futex.load(Ordering::Acquire);
        if !acquire(sh) {
            // An atomic section (or a fault) holds the node: WANT is set,
            // the endatom that ends it bumps the futex word.
            sys::futex_wait(&line.rx_futex, fv, Some(Duration::from_millis(100)));
            continue;
        }
        // SAFETY: we set HANDLER (acquire); the reference is dropped
        // before release below.
        let core = unsafe { sh.core() };
        let out = dispatch(core, line, sh);
        match out {
            Dispatch::Ran | Dispatch::Yield => {
                idle_since = None;
                release(sh, 0);
            }
            Dispatch::Extend => {
                idle_since = None;
                release(sh, EXTEND | DISABLE);
            }
            Dispatch::Fault(e) => {
                idle_since = None;
                *sh.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                release(sh, FAULT);
            }
            Dispatch::Idle => {
                let since = *idle_since.get_or_insert_with(Instant::now);
                if since.elapsed() < sh.cfg.spin {
                    release(sh, 0);
                    std::hint::spin_loop();
                    continue;
                }
                // Sleep until a message: announce it, then look once more
                // (pairs with the senders' fence after they publish: either
                // they see us sleeping and wake us, or we see the message).
                line.rx_sleeping.fetch_add(1, Ordering::Relaxed);
                sys::heavy_fence();
                let fv = line.rx_futex.load(Ordering::Acquire);
                let again = core.node.message_available();
                release(sh, 0);
                if !again && !sh.stop.load(Ordering::Acquire) {
                    sys::futex_wait(&line.rx_futex, fv, Some(Duration::from_millis(100)));
                }
                line.rx_sleeping.fetch_sub(1, Ordering::Relaxed);
                idle_since = None;
            }
        }
    }
}

/// Take the node (set HANDLER) if no atomic section holds it; else set
/// WANT and return false.
fn acquire(sh: &Shared) -> bool {
    let uac = &sh.state;
    let mut v = uac.load(Ordering::Relaxed);
    loop {
        if v & BLOCK != 0 {
            if v & WANT != 0 {
                return false;
            }
            match uac.compare_exchange_weak(v, v | WANT, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    sh.mirror();
                    return false;
                }
                Err(now) => v = now,
            }
            continue;
        }
        // Acquire: pairs with the Release of whoever held the node last.
        match uac.compare_exchange_weak(v, v | HANDLER, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => {
                sh.mirror();
                return true;
            }
            Err(now) => v = now,
        }
    }
}

/// Give the node back: clear HANDLER, set `bits`; wake the main code if
/// it waits in beginatom.
fn release(sh: &Shared, bits: u32) {
    let uac = &sh.state;
    let mut v = uac.load(Ordering::Relaxed);
    loop {
        let new = (v & !HANDLER) | bits;
        // Release: what we did with the node is visible to the next holder.
        match uac.compare_exchange_weak(v, new, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => break,
            Err(now) => v = now,
        }
    }
    sh.mirror();
    if v & DISABLE != 0 {
        sys::futex_wake(uac, i32::MAX);
    }
}

enum Dispatch {
    /// Handlers ran; nothing more is waiting.
    Ran,
    /// Handlers ran; the main code asked for the node.
    Yield,
    /// Nothing was waiting.
    Idle,
    /// A handler extended its atomic section.
    Extend,
    /// Upcalls stop on this error.
    Fault(UpcallError),
}

/// Run the handlers of the waiting messages, one after the other, until
/// none is left, the main code asks for the node, a handler extends its
/// section, or an error.
fn dispatch(core: &mut Core, line: &UdmNodeLine, sh: &Shared) -> Dispatch {
    let mut ran = false;
    loop {
        if sh.stop.load(Ordering::Relaxed) {
            return if ran { Dispatch::Ran } else { Dispatch::Idle };
        }
        let Ok(m) = core.node.peek() else {
            return if ran { Dispatch::Ran } else { Dispatch::Idle };
        };
        let header = Header {
            src: m.src,
            handler: m.handler,
            len: m.words().len(),
        };
        let (handler, src) = (m.handler, m.src);
        let Some(Some(h)) = core.handlers.get_mut(handler as usize) else {
            bump(&line.no_handler);
            return Dispatch::Fault(UpcallError::NoHandler { handler, src });
        };
        let mut up = Upcall {
            node: &mut core.node,
            header,
            taken: 0,
            extend: false,
        };
        if !ran {
            // A handler is an atomic section the engine times.
            up.node.announce_atomic();
        }
        // The paper's message-available stub sets dispose-pending; the
        // handler's extract or dispose resets it (`taken`).
        let r = catch_unwind(AssertUnwindSafe(|| h(&mut up)));
        let (taken, extend) = (up.taken, up.extend);
        bump(&line.upcalls);
        ran = true;
        if r.is_err() {
            bump(&line.handler_panics);
            return Dispatch::Fault(UpcallError::Panicked { handler, src });
        }
        // Table 1, endatom: dispose-pending first, then atomicity-extend.
        if taken == 0 {
            bump(&line.dispose_failures);
            return Dispatch::Fault(UpcallError::DisposeFailure { handler, src });
        }
        if extend {
            return Dispatch::Extend;
        }
        if sh.state.load(Ordering::Relaxed) & DISABLE != 0 {
            return Dispatch::Yield;
        }
    }
}

/// Add one to a counter of the node's line that only its holder writes.
fn bump(c: &AtomicU64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}
