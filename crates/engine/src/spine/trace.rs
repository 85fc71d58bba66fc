//! SPINE's event graph (section 6, Figure 6): a bounded in-memory ring of
//! the events the engine runs, off by default and switched on and off at
//! run time (control's `TraceSet`), dumped into a memory file on request
//! (`TraceDump`), and drawn by `unet trace`.
//!
//! An event is one slice of the loop's time: its type (a system handler's
//! number, an extension handler's, or one of the loop's own parts,
//! [`LOOP_PART`] onwards), when it started and how long it ran, the
//! message or packet it belongs to, and the event that caused it (0:
//! none). That is enough to draw Figure 6 and to read off it what the
//! paper reads by eye: the period between packets and the time of one
//! packet through the adapter.
//!
//! Recording is one call on the loop's thread:
//!
//! ```text
//! let t = trace::now();
//! ... the event's work ...
//! let id = recorder.record(ty, t, trace::now(), msg, cause);
//! ```
//!
//! SPINE's turn (`mod.rs`) records each event it runs: a system
//! handler's under its number ([`EventKind`](crate::spine::events::EventKind)),
//! an extension handler's under the handler's; its message is the
//! graph's: a number a root event (a host's, the wire's or a peer's
//! message, a timer) takes from [`Recorder::items`], inherited by what
//! it queues, so that one message is followed from its arrival through
//! its handlers to its delivery. The loop's own events (the parts'
//! turns) contain SPINE's.
//!
//! Off, [`Recorder::record`] is one predictable branch (and the caller's
//! clock reads can be kept behind [`Recorder::on`]); on, it writes one
//! 24-byte slot. The clock is the CPU's time-stamp counter (a few
//! nanoseconds to read), converted to nanoseconds since the engine
//! started when the ring is dumped, against the monotonic clock over the
//! whole time since then. When the ring is full the oldest events are
//! overwritten and counted.
//!
//! A dump's cost grows with the ring (about 9 ms for 65 536 events, 170
//! ms for the largest ring, mostly fresh pages), so it is written on a
//! thread of its own: the loop hands it the ring, and answers the client
//! when the thread rings the engine's admin eventfd. One dump at a time.
//! The loop's share is a thread's start (70 us) when the trace is off,
//! as `unet trace` leaves it before it asks (the ring is handed over and
//! given back), and a copy of the ring when it is on (6 ms for 65 536
//! events).
//!
//! # The dump (a memory file, little-endian)
//!
//! ```text
//!  0 magic       [u8; 8] = "UNETTRC1"
//!  8 events      u32      events that follow, oldest first
//! 12 names       u32      type names that follow
//! 16 capacity    u32      events the ring held
//! 20 reserved    u32      zero
//! 24 recorded    u64      events recorded since the trace was switched on
//! 32 overwritten u64      of those, overwritten before this dump
//! 40 names × { ty u16, len u16, len bytes of UTF-8 }
//! .. events × 32 bytes:
//!     0 id u32, 4 ty u16, 6 items u16, 8 msg u32, 12 cause u32,
//!    16 start_ns u64 (since the engine started), 24 len_ns u64
//! ```
//!
//! # Unsafe code
//!
//! Reading the time-stamp counter (`_rdtsc`) is an `unsafe` intrinsic on
//! `x86_64` only because intrinsics are; the instruction exists on every
//! `x86_64` CPU and touches no memory.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::Arc;
use std::time::Instant;

use unet_control::{ErrorCode, Reply, Request};
use unet_sys::EventFd;

use crate::clients::ClientId;

/// The loop's own events: part `i` of the dispatcher's turn (in the
/// order the turn runs them) is type `LOOP_PART + i`. They take the top
/// of the system handlers' numbers (0..=63).
pub(crate) const LOOP_PART: u16 = 56;
/// The loop's event: control takes what a turn left for it.
pub(crate) const LOOP_CONTROL: u16 = 62;
/// The loop's event: the wire's port sends what the turn queued.
pub(crate) const LOOP_FLUSH: u16 = 63;
/// The loop's own event types are `LOOP_FIRST..=63`: SPINE's system
/// handlers are below them, extension handlers from 64.
pub const LOOP_FIRST: u16 = LOOP_PART;

/// Events a ring holds unless told otherwise.
pub const DEFAULT_CAPACITY: u32 = 1 << 16;
/// Most events a ring may hold (32 MiB of dump).
pub const MAX_CAPACITY: u32 = 1 << 20;
/// Magic of a dump.
pub const DUMP_MAGIC: [u8; 8] = *b"UNETTRC1";
const DUMP_HEADER: usize = 40;
const DUMP_EVENT: usize = 32;

/// A reading of the trace's clock (time-stamp counter ticks; see the
/// module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Stamp(u64);

/// The trace's clock now.
#[inline(always)]
pub(crate) fn now() -> Stamp {
    Stamp(ticks())
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    // SAFETY: `rdtsc` exists on every x86_64 CPU, reads a register and
    // touches no memory.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// One recorded event in the ring (24 bytes).
#[derive(Clone, Copy, Default)]
struct Slot {
    start: u64,
    len: u32,
    ty: u16,
    items: u16,
    msg: u32,
    cause: u32,
}

/// One event, as a dump carries it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceEvent {
    /// The event's id (what a later event's `cause` names); never 0.
    pub id: u32,
    /// Its type: a system handler's number, an extension handler's, or
    /// one of the loop's own.
    pub ty: u16,
    /// The message or packet it belongs to (0: none).
    pub msg: u32,
    /// The messages it handled: a loop part's turn handles `items`
    /// messages at once, numbered `msg`, `msg + 1`, ... (saturating at
    /// `u16::MAX`); 1 for any other event of a message, 0 for none.
    pub items: u16,
    /// The event that caused it (0: none).
    pub cause: u32,
    /// When it started, ns since the engine started.
    pub start_ns: u64,
    /// How long it ran, ns.
    pub len_ns: u64,
}

/// A trace: its events, oldest first, and the names of their types.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceDump {
    /// The events, oldest first.
    pub events: Vec<TraceEvent>,
    /// The names of the types, by number.
    pub names: BTreeMap<u16, String>,
    /// Events the ring held.
    pub capacity: u32,
    /// Events recorded since the trace was switched on.
    pub recorded: u64,
    /// Of those, the ones overwritten before the dump.
    pub overwritten: u64,
}

/// What a dump that does not decode has wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpError {
    /// Not a dump (the magic differs).
    BadMagic,
    /// Shorter than its header says.
    Truncated,
    /// A type name is not UTF-8.
    BadName,
}

impl std::fmt::Display for DumpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DumpError::BadMagic => "not a trace dump (bad magic)",
            DumpError::Truncated => "the trace dump is cut short",
            DumpError::BadName => "a type name in the trace dump is not UTF-8",
        })
    }
}

impl std::error::Error for DumpError {}

impl TraceDump {
    /// The dump's bytes (the layout in the module documentation).
    pub fn encode(&self) -> Vec<u8> {
        let names_len: usize = self.names.values().map(|n| 4 + n.len().min(0xffff)).sum();
        let mut b = Vec::with_capacity(DUMP_HEADER + names_len + DUMP_EVENT * self.events.len());
        b.extend_from_slice(&DUMP_MAGIC);
        b.extend_from_slice(&(self.events.len() as u32).to_le_bytes());
        b.extend_from_slice(&(self.names.len() as u32).to_le_bytes());
        b.extend_from_slice(&self.capacity.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&self.recorded.to_le_bytes());
        b.extend_from_slice(&self.overwritten.to_le_bytes());
        for (ty, name) in &self.names {
            let mut n = name.len().min(0xffff);
            while !name.is_char_boundary(n) {
                n -= 1;
            }
            b.extend_from_slice(&ty.to_le_bytes());
            b.extend_from_slice(&(n as u16).to_le_bytes());
            b.extend_from_slice(&name.as_bytes()[..n]);
        }
        for e in &self.events {
            b.extend_from_slice(&e.id.to_le_bytes());
            b.extend_from_slice(&e.ty.to_le_bytes());
            b.extend_from_slice(&e.items.to_le_bytes());
            b.extend_from_slice(&e.msg.to_le_bytes());
            b.extend_from_slice(&e.cause.to_le_bytes());
            b.extend_from_slice(&e.start_ns.to_le_bytes());
            b.extend_from_slice(&e.len_ns.to_le_bytes());
        }
        b
    }

    /// Read a dump (total: whatever the bytes, an error or a dump; bytes
    /// after the last event are ignored).
    pub fn decode(b: &[u8]) -> Result<TraceDump, DumpError> {
        let mut r = Reader { b };
        if r.take(8)? != DUMP_MAGIC {
            return Err(DumpError::BadMagic);
        }
        let events = r.u32()? as usize;
        let names = r.u32()? as usize;
        let capacity = r.u32()?;
        let _ = r.u32()?;
        let recorded = r.u64()?;
        let overwritten = r.u64()?;
        let mut d = TraceDump {
            capacity,
            recorded,
            overwritten,
            ..TraceDump::default()
        };
        for _ in 0..names {
            let ty = r.u16()?;
            let n = r.u16()? as usize;
            let name = std::str::from_utf8(r.take(n)?).map_err(|_| DumpError::BadName)?;
            d.names.insert(ty, name.to_owned());
        }
        if r.b.len() / DUMP_EVENT < events {
            return Err(DumpError::Truncated);
        }
        d.events.reserve_exact(events);
        for _ in 0..events {
            let id = r.u32()?;
            let ty = r.u16()?;
            let items = r.u16()?;
            d.events.push(TraceEvent {
                id,
                ty,
                items,
                msg: r.u32()?,
                cause: r.u32()?,
                start_ns: r.u64()?,
                len_ns: r.u64()?,
            });
        }
        Ok(d)
    }
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DumpError> {
        if self.b.len() < n {
            return Err(DumpError::Truncated);
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u16(&mut self) -> Result<u16, DumpError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, DumpError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, DumpError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
}

/// The recorder: the ring, whether it records, and the clock's base.
pub(crate) struct Recorder {
    on: bool,
    /// `capacity` slots (a power of two) once switched on; empty before.
    ring: Vec<Slot>,
    capacity: u32,
    /// Events recorded since switched on; the next goes to
    /// `ring[next % capacity]` and gets id `next + 1` (as u32).
    next: u64,
    /// Work items the loop's parts reported since switched on (the
    /// loop's events number what they handled by it).
    items: u64,
    /// The clock's base: the engine's start, read on both clocks.
    base: (Instant, u64),
    names: BTreeMap<u16, String>,
    /// The dump being written, if any.
    dumping: Option<Dumping>,
    /// Rung when a dump is written (the engine's admin eventfd).
    waker: Option<Arc<EventFd>>,
}

/// A dump being written on its thread, for a client's request.
struct Dumping {
    /// Who asked (None: the client went away meanwhile).
    to: Option<(ClientId, u32)>,
    /// What the thread wrote: sent before it rings, so that the loop,
    /// woken, finds it.
    done: Receiver<Written>,
}

/// What a dump's thread gives back: the memory file, its events and
/// bytes, and the ring it was given.
struct Written {
    file: std::io::Result<(OwnedFd, u32, u64)>,
    ring: Vec<Slot>,
}

/// A finished dump's answer: to whom, and what.
pub(crate) struct DumpAnswer {
    pub client: ClientId,
    pub req_id: u32,
    pub reply: Reply,
    pub file: Option<OwnedFd>,
}

impl Recorder {
    /// An empty recorder, off; `waker` is rung when a dump is written.
    pub(crate) fn new(waker: Option<Arc<EventFd>>) -> Recorder {
        Recorder {
            on: false,
            ring: Vec::new(),
            capacity: DEFAULT_CAPACITY,
            next: 0,
            items: 0,
            base: (Instant::now(), ticks()),
            names: BTreeMap::new(),
            dumping: None,
            waker,
        }
    }

    /// Whether events are being recorded.
    #[inline(always)]
    pub(crate) fn on(&self) -> bool {
        self.on
    }

    /// Whether a dump is being written.
    pub(crate) fn dumping(&self) -> bool {
        self.dumping.is_some()
    }

    /// Name event type `ty` (what the dump and `unet trace` call it).
    pub(crate) fn set_name(&mut self, ty: u16, name: impl Into<String>) {
        self.names.insert(ty, name.into());
    }

    /// Switch recording on (emptying the ring, `capacity` events, 0: the
    /// current size) or off (the ring is kept for a dump).
    pub(crate) fn set(&mut self, on: bool, capacity: u32) -> Result<(), ErrorCode> {
        if capacity > MAX_CAPACITY {
            return Err(ErrorCode::BadRequest);
        }
        if !on {
            self.on = false;
            return Ok(());
        }
        let cap = match capacity {
            0 => self.capacity,
            c => c.next_power_of_two(),
        };
        if self.ring.len() != cap as usize {
            self.ring = Vec::new();
            self.ring
                .try_reserve_exact(cap as usize)
                .map_err(|_| ErrorCode::NoResources)?;
            self.ring.resize(cap as usize, Slot::default());
        }
        self.capacity = cap;
        self.next = 0;
        self.items = 0;
        self.on = true;
        Ok(())
    }

    /// Record an event of type `ty` that ran from `start` to `end`,
    /// belonging to message `msg` (0: none), caused by event `cause` (0:
    /// none). Returns its id (0 when the recorder is off).
    #[inline(always)]
    pub(crate) fn record(
        &mut self,
        ty: u16,
        start: Stamp,
        end: Stamp,
        msg: u32,
        cause: u32,
    ) -> u32 {
        if !self.on {
            return 0;
        }
        self.push(ty, start, end, (msg, u16::from(msg != 0)), cause)
    }

    /// Record a loop part's turn that handled `n` work items (0: none),
    /// numbering them ([`Recorder::items`]). Returns the event's id and
    /// the number of its first item (0 for none).
    pub(crate) fn record_items(
        &mut self,
        ty: u16,
        start: Stamp,
        end: Stamp,
        n: usize,
        cause: u32,
    ) -> (u32, u32) {
        if !self.on {
            return (0, 0);
        }
        let msg = if n == 0 { 0 } else { self.items(n) };
        let items = n.min(u16::MAX as usize) as u16;
        (self.push(ty, start, end, (msg, items), cause), msg)
    }

    #[inline]
    fn push(&mut self, ty: u16, start: Stamp, end: Stamp, msg: (u32, u16), cause: u32) -> u32 {
        let seq = self.next;
        self.next += 1;
        let i = (seq as usize) & (self.ring.len().wrapping_sub(1));
        if let Some(s) = self.ring.get_mut(i) {
            *s = Slot {
                start: start.0,
                len: end.0.saturating_sub(start.0).min(u32::MAX as u64) as u32,
                ty,
                items: msg.1,
                msg: msg.0,
                cause,
            };
        }
        id_of(seq)
    }

    /// The id the next event recorded gets (what an event being run
    /// tags the events it queues with, before it is recorded itself;
    /// nothing else may be recorded meanwhile).
    #[inline(always)]
    pub(crate) fn next_id(&self) -> u32 {
        id_of(self.next)
    }

    /// Number `n` work items (of the loop's parts, or one new message of
    /// SPINE's): returns the number of the first (what the event that
    /// handled them belongs to).
    pub(crate) fn items(&mut self, n: usize) -> u32 {
        let first = self.items + 1;
        self.items += n as u64;
        first as u32
    }

    /// Events recorded since switched on, and of those the overwritten.
    pub(crate) fn counts(&self) -> (u64, u64) {
        let cap = self.ring.len() as u64;
        (self.next, self.next.saturating_sub(cap))
    }

    /// The events the ring holds, oldest first, with their times in ns
    /// since the engine started.
    #[cfg(test)]
    pub(crate) fn snapshot(&self) -> TraceDump {
        self.view().dump(&self.ring)
    }

    /// What a dump needs besides the ring.
    fn view(&self) -> View {
        let elapsed = self.base.0.elapsed().as_nanos() as f64;
        let ticks = ticks().wrapping_sub(self.base.1);
        View {
            next: self.next,
            base: self.base.1,
            ns_per_tick: if ticks == 0 {
                1.0
            } else {
                elapsed / ticks as f64
            },
            names: self.names.clone(),
        }
    }

    /// Start writing a dump for request `req_id` of `client`, on a thread
    /// (answered by [`Recorder::finished_dump`]).
    pub(crate) fn start_dump(&mut self, client: ClientId, req_id: u32) -> Result<(), ErrorCode> {
        if self.dumping.is_some() {
            return Err(ErrorCode::NoResources);
        }
        let view = self.view();
        // Off, the ring is not written: the thread takes it and gives it
        // back (a switch on meanwhile makes a new one).
        let ring = if self.on {
            self.ring.clone()
        } else {
            std::mem::take(&mut self.ring)
        };
        let waker = self.waker.clone();
        let (tx, done) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("unet-trace-dump".into())
            .spawn(move || {
                let d = view.dump(&ring);
                let b = d.encode();
                let file = dump_file(&b).map(|fd| (fd, d.events.len() as u32, b.len() as u64));
                // The loop may be gone (the engine stopped): then nobody
                // wants the dump.
                let _ = tx.send(Written { file, ring });
                if let Some(w) = waker {
                    w.notify();
                }
            });
        match thread {
            Ok(_) => {
                self.dumping = Some(Dumping {
                    to: Some((client, req_id)),
                    done,
                });
                Ok(())
            }
            Err(_) => Err(ErrorCode::NoResources),
        }
    }

    /// The answer to the dump being written, once it is.
    pub(crate) fn finished_dump(&mut self) -> Option<DumpAnswer> {
        let got = self.dumping.as_ref()?.done.try_recv();
        if matches!(got, Err(TryRecvError::Empty)) {
            return None;
        }
        let to = self.dumping.take()?.to;
        let (reply, file) = match got {
            Ok(w) => {
                if self.ring.is_empty() {
                    self.ring = w.ring;
                }
                match w.file {
                    Ok((fd, events, len)) => (Reply::TraceDump { events, len }, Some(fd)),
                    Err(_) => (Reply::Error(ErrorCode::NoResources), None),
                }
            }
            Err(_) => (Reply::Error(ErrorCode::NoResources), None),
        };
        let (client, req_id) = to?;
        Some(DumpAnswer {
            client,
            req_id,
            reply,
            file,
        })
    }

    /// Client `client` went away: the dump it asked for is not sent.
    pub(crate) fn forget(&mut self, client: ClientId) {
        if let Some(d) = &mut self.dumping {
            if d.to.is_some_and(|(c, _)| c == client) {
                d.to = None;
            }
        }
    }
}

/// What a dump needs besides the ring: how many events were recorded,
/// the clock's base and rate, the type names.
struct View {
    next: u64,
    base: u64,
    ns_per_tick: f64,
    names: BTreeMap<u16, String>,
}

impl View {
    /// The events of `ring`, oldest first, times in ns since the engine
    /// started.
    fn dump(self, ring: &[Slot]) -> TraceDump {
        let cap = ring.len() as u64;
        let overwritten = self.next.saturating_sub(cap);
        let ns = |t: u64| (t as f64 * self.ns_per_tick) as u64;
        let mask = cap.wrapping_sub(1);
        let events = (overwritten..self.next)
            .filter_map(|seq| {
                let s = ring.get((seq & mask) as usize)?;
                Some(TraceEvent {
                    id: id_of(seq),
                    ty: s.ty,
                    items: s.items,
                    msg: s.msg,
                    cause: s.cause,
                    start_ns: ns(s.start.wrapping_sub(self.base)),
                    len_ns: ns(s.len as u64),
                })
            })
            .collect();
        TraceDump {
            events,
            names: self.names,
            capacity: cap as u32,
            recorded: self.next,
            overwritten,
        }
    }
}

/// The id of the event recorded `seq`-th since the trace was switched on.
fn id_of(seq: u64) -> u32 {
    match (seq as u32).wrapping_add(1) {
        0 => 1,
        id => id,
    }
}

/// Answer trace request `req_id` of `client` (the caller checked that
/// the client may ask): the reply, or None for a dump, answered when it
/// is written ([`Recorder::finished_dump`]).
pub(crate) fn answer(
    rec: &mut Recorder,
    client: ClientId,
    req_id: u32,
    req: &Request,
) -> Option<Reply> {
    match *req {
        Request::TraceSet { on, capacity } => Some(match rec.set(on, capacity) {
            Ok(()) => {
                let (recorded, overwritten) = rec.counts();
                Reply::TraceState {
                    on: rec.on(),
                    capacity: rec.capacity,
                    recorded,
                    overwritten,
                }
            }
            Err(e) => Reply::Error(e),
        }),
        Request::TraceDump => rec.start_dump(client, req_id).err().map(Reply::Error),
        _ => Some(Reply::Error(ErrorCode::BadRequest)),
    }
}

/// A memory file holding `b`, its size sealed.
fn dump_file(b: &[u8]) -> std::io::Result<OwnedFd> {
    let fd = unet_sys::Segment::create_file("unet-trace", b.len().max(1))?;
    let f = File::from(fd);
    f.write_all_at(b, 0)?;
    Ok(f.into())
}

#[cfg(test)]
mod tests;
