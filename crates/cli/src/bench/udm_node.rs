//! The node processes of `unet bench udm` (`unet bench __udm-node`): one
//! UDM node each, joined to its job by the ticket through the engine's
//! control socket, running one of the experiment's applications by polling
//! (`message_available`, `extract`; never an upcall).
//!
//! A node prints `ready` once it has joined, waits for a line on its
//! standard input (the start, so that every node of a job begins
//! together), runs, and prints `done {json}` with what it did and its
//! node's counters, read before it leaves the job.
//!
//! The applications (message handler indices below):
//!
//! - `null`: no job; spins until killed (the other job of the gang
//!   scheduler's pair).
//! - `pong`: answers every message with the same handler and no words,
//!   until a `FIN` (Table 4's round trips).
//! - `barrier`: `--count` barriers through rank 0 (arrive, then release).
//! - `enum`: every position of the triangle-peg solitaire with `--pegs`
//!   pegs a side (one hole empty at the top) reachable by jumps, searched
//!   by all nodes: a position belongs to the node its hash names, a node
//!   expands the new positions it owns and sends each successor owned by
//!   another node as one unacknowledged one-word message. A node's
//!   handler only keeps a position it has not seen (on its stack); the
//!   node expands positions when no message waits for it, and only while
//!   the network takes what it sends: with `--outbox` messages waiting to
//!   go it stops expanding and goes on taking messages (the UDM paper's
//!   sender, whose `inject` waits while the network backs up, never
//!   runs ahead of its receivers; the search's frontier stays on the
//!   nodes' stacks, not in the network or a receiver's buffer).
//!   Termination by rank 0's waves of counts (two waves in a row with
//!   every node idle and as many positions received as sent, the same
//!   both times).
//! - `kv`: the request-reply stand-in for the CRL programs: `--count`
//!   reads (70 %) and writes (30 %) of keys held by other nodes, each
//!   waiting for its reply while serving the others' requests.
//! - `synth`: the UDM paper's synth-N: groups of `--group` requests to
//!   random other nodes, uniformly random intervals averaging
//!   `--interval-ns` between sends, each request served in
//!   `--handler-ns` and answered; a group ends when all its replies are
//!   in. `--count` requests per node.
//!
//! `kv` and `synth` end with a `FIN` to every other node, and a node exits
//! only when it has every other node's `FIN` (and so has served every
//! request sent to it: each sender's messages come in order).
//!
//! `--buffer-cost-ns` adds that many nanoseconds of spinning to every
//! message the node takes from its virtual buffer (Figure 10's added cost
//! of the buffered path; zero by default, and then not looked at).
//!
//! `--time-handlers` times every message the node takes, from the start
//! of its `extract` to its handler's return (Table 6's time per handler),
//! and reports the sum and the count (`handled`, `handler_ns`); off by
//! default, and then no clock is read.

use std::collections::VecDeque;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use serde_json::json;
use unet::udm::{JobTicket, Node, UdmCounter, MAX_WORDS};
use unet::Session;

type Res<T> = Result<T, String>;

/// The applications a node can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum App {
    Null,
    Pong,
    Barrier,
    Enum,
    Kv,
    Synth,
}

impl App {
    pub fn name(self) -> &'static str {
        match self {
            App::Null => "null",
            App::Pong => "pong",
            App::Barrier => "barrier",
            App::Enum => "enum",
            App::Kv => "kv",
            App::Synth => "synth",
        }
    }
}

/// `unet bench __udm-node`.
#[derive(clap::Args, Clone, Debug)]
pub struct NodeArgs {
    #[arg(long, value_enum)]
    pub app: App,
    /// The engine's control socket.
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// The job's ticket (JOB:KEY:NODES).
    #[arg(long)]
    pub ticket: Option<String>,
    #[arg(long, default_value_t = 0)]
    pub rank: u32,
    /// barrier: barriers; kv, synth: requests per node.
    #[arg(long, default_value_t = 1000)]
    pub count: u64,
    /// enum: pegs a side.
    #[arg(long, default_value_t = 6)]
    pub pegs: u32,
    /// enum: work per position expanded, spun (ns): a search whose
    /// positions cost more to expand sends at a lower rate.
    #[arg(long, default_value_t = 0)]
    pub expand_ns: u64,
    /// synth: requests per group (N).
    #[arg(long, default_value_t = 10)]
    pub group: u64,
    /// synth: mean interval between sends (ns).
    #[arg(long, default_value_t = 2000)]
    pub interval_ns: u64,
    /// synth: time to serve one request (ns).
    #[arg(long, default_value_t = 1000)]
    pub handler_ns: u64,
    /// Added spinning per message taken from the virtual buffer (ns).
    #[arg(long, default_value_t = 0)]
    pub buffer_cost_ns: u64,
    /// enum: messages a node lets wait for the network (its fast ring
    /// full) before it stops expanding positions until they have gone.
    #[arg(long, default_value_t = OUTBOX)]
    pub outbox: usize,
    /// Seed of the node's random choices (mixed with its rank).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Time each message taken, extract and handler (Table 6).
    #[arg(long)]
    pub time_handlers: bool,
}

// Handler indices.
const H_FIN: u16 = 1;
const H_PING: u16 = 2;
const H_ARRIVE: u16 = 10;
const H_RELEASE: u16 = 11;
const H_POS: u16 = 20;
const H_QUERY: u16 = 21;
const H_REPORT: u16 = 22;
const H_DONE: u16 = 23;
const H_READ: u16 = 30;
const H_WRITE: u16 = 31;
const H_REPLY: u16 = 32;
const H_REQ: u16 = 40;
const H_ACK: u16 = 41;

/// enum's default `--outbox`: a few positions' successors.
pub const OUTBOX: usize = 64;

/// Handler of the ping-pong of Table 4 (the parent's side).
pub const PING: u16 = H_PING;
/// Ends a `pong` node.
pub const FIN: u16 = H_FIN;

pub fn run(a: NodeArgs) -> ExitCode {
    match node_main(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "unet bench __udm-node ({} rank {}): {e}",
                a.app.name(),
                a.rank
            );
            ExitCode::FAILURE
        }
    }
}

fn node_main(a: &NodeArgs) -> Res<()> {
    if a.app == App::Null {
        println!("ready");
        let mut x = 0u64;
        loop {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }
    let sock = a.socket.clone().ok_or("--socket is needed")?;
    let ticket: JobTicket = a.ticket.as_deref().ok_or("--ticket is needed")?.parse()?;
    let s = Session::connect(sock).map_err(|e| format!("connect: {e}"))?;
    let node = s
        .udm_join(ticket, a.rank)
        .map_err(|e| format!("join: {e}"))?;
    println!("ready");
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| format!("stdin: {e}"))?;
    let mut c = Ctx::new(node, a);
    let start = Instant::now();
    let extra = match a.app {
        App::Null => unreachable!("handled above"),
        App::Pong => pong(&mut c)?,
        App::Barrier => barrier(&mut c, a.count)?,
        App::Enum => enumerate(&mut c, a.pegs, Duration::from_nanos(a.expand_ns))?,
        App::Kv => kv(&mut c, a.count)?,
        App::Synth => synth(&mut c, a)?,
    };
    let elapsed = start.elapsed();
    let st = c.node.stats();
    let row = json!({
        "rank": a.rank,
        "elapsed_ns": elapsed.as_nanos() as u64,
        "fast_msgs": st.fast_msgs,
        "buffered_taken": st.buffered_taken,
        "switch_queue_full": st.switch_queue_full,
        "overflow_holds": st.overflow_holds,
        "buffered_msgs": st.engine(UdmCounter::BufferedMsgs),
        "switch_descheduled": st.engine(UdmCounter::SwitchDescheduled),
        "switch_atomicity_timeout": st.engine(UdmCounter::SwitchTimeout),
        "buffer_pages_max": st.engine(UdmCounter::BufferPagesMax),
        "buffer_held_bytes_max": st.engine(UdmCounter::BufferHeldBytesMax),
        "sent": c.sent,
        "outbox_max": c.outbox_max,
        "handled": c.handled,
        "handler_ns": c.handler_ns,
        "result": extra,
    });
    println!("done {row}");
    Ok(())
}

/// A node's loop state: messages waiting to go (handlers never wait for
/// the network: what cannot go now waits here while the node goes on
/// taking its own messages, so two nodes sending to each other never
/// block each other), and the FINs seen.
struct Ctx {
    node: Node,
    n: u32,
    rank: u32,
    outbox: VecDeque<(u32, u16, [u64; 3], usize)>,
    /// enum: the messages waiting to go at which it stops expanding; the
    /// most that ever waited.
    bound: usize,
    outbox_max: usize,
    fins: u32,
    sent: u64,
    buffer_cost: Duration,
    rng: u64,
    words: [u64; MAX_WORDS],
    /// `--time-handlers`: when the message being handled was taken (its
    /// extract began), and the messages handled and their time so far.
    timing: bool,
    taken_at: Option<Instant>,
    handled: u64,
    handler_ns: u64,
}

/// One message taken.
struct Msg {
    src: u32,
    handler: u16,
    w: [u64; 3],
}

impl Ctx {
    fn new(node: Node, a: &NodeArgs) -> Ctx {
        Ctx {
            n: node.nodes(),
            rank: node.rank(),
            node,
            outbox: VecDeque::new(),
            bound: a.outbox.max(1),
            outbox_max: 0,
            fins: 0,
            sent: 0,
            buffer_cost: Duration::from_nanos(a.buffer_cost_ns),
            rng: splitmix(a.seed ^ (a.rank as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            words: [0; MAX_WORDS],
            timing: a.time_handlers,
            taken_at: None,
            handled: 0,
            handler_ns: 0,
        }
    }

    /// Runs `handle` on `m` (taken by [`Ctx::next`]); with
    /// `--time-handlers`, counts it and the time since its extract began.
    fn run<S>(&mut self, s: &mut S, handle: Handler<S>, m: Msg) -> Res<()> {
        let r = handle(self, s, m);
        if let Some(t) = self.taken_at.take() {
            self.handled += 1;
            self.handler_ns += t.elapsed().as_nanos() as u64;
        }
        r
    }

    fn rand(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix(self.rng)
    }

    /// A random node other than this one.
    fn other(&mut self) -> u32 {
        let k = (self.rand() % (self.n as u64 - 1)) as u32;
        if k >= self.rank {
            k + 1
        } else {
            k
        }
    }

    fn send(&mut self, dest: u32, h: u16, w: &[u64]) -> Res<()> {
        let mut a = [0u64; 3];
        a[..w.len()].copy_from_slice(w);
        self.outbox.push_back((dest, h, a, w.len()));
        self.outbox_max = self.outbox_max.max(self.outbox.len());
        self.flush()
    }

    /// Whether the network takes what this node sends: fewer than the
    /// bound wait to go (after sending what can go now).
    fn room(&mut self) -> Res<bool> {
        if self.outbox.len() >= self.bound {
            self.flush()?;
        }
        Ok(self.outbox.len() < self.bound)
    }

    /// Sends what can go now, in order.
    fn flush(&mut self) -> Res<()> {
        while let Some(&(d, h, w, len)) = self.outbox.front() {
            match self.node.injectc(d, h, &w[..len]) {
                Ok(true) => {
                    self.outbox.pop_front();
                    self.sent += 1;
                }
                Ok(false) => return Ok(()),
                Err(e) => return Err(format!("inject to {d}: {e}")),
            }
        }
        Ok(())
    }

    /// Sends everything, taking messages (with `handle`) meanwhile.
    fn flush_all<S>(&mut self, s: &mut S, handle: Handler<S>) -> Res<()> {
        let mut spins = 0u32;
        while !self.outbox.is_empty() {
            self.flush()?;
            if let Some(m) = self.next()? {
                self.run(s, handle, m)?;
            } else {
                spins += 1;
                if spins.is_multiple_of(256) {
                    std::thread::yield_now();
                }
            }
        }
        Ok(())
    }

    /// The next message, if one is available (FINs are counted here and
    /// handed on too).
    fn next(&mut self) -> Res<Option<Msg>> {
        if !self.outbox.is_empty() {
            self.flush()?;
        }
        if !self.node.message_available() {
            return Ok(None);
        }
        if self.timing {
            self.taken_at = Some(Instant::now());
        }
        let before = if self.buffer_cost.is_zero() {
            0
        } else {
            self.node.stats().buffered_taken
        };
        let h = self
            .node
            .extract(&mut self.words)
            .map_err(|e| format!("extract: {e}"))?;
        if !self.buffer_cost.is_zero() && self.node.stats().buffered_taken != before {
            spin_for(self.buffer_cost);
        }
        let mut w = [0u64; 3];
        let k = h.len.min(3);
        w[..k].copy_from_slice(&self.words[..k]);
        if h.handler == H_FIN {
            self.fins += 1;
        }
        Ok(Some(Msg {
            src: h.src,
            handler: h.handler,
            w,
        }))
    }

    /// FIN to every other node, then serve (with `handle`) until every
    /// other node's FIN is in and everything is sent.
    fn finish<S>(&mut self, s: &mut S, handle: Handler<S>) -> Res<()> {
        for d in 0..self.n {
            if d != self.rank {
                self.send(d, H_FIN, &[])?;
            }
        }
        self.until(s, handle, |c, _| c.fins + 1 >= c.n)?;
        self.flush_all(s, handle)
    }

    /// Takes messages (with `handle`) until `done` says so, giving the
    /// core away now and then while nothing comes (two processes a core).
    fn until<S>(
        &mut self,
        s: &mut S,
        handle: Handler<S>,
        done: impl Fn(&Ctx, &S) -> bool,
    ) -> Res<()> {
        let mut idle = 0u32;
        while !done(self, s) {
            match self.next()? {
                Some(m) => {
                    idle = 0;
                    self.run(s, handle, m)?;
                }
                None => {
                    idle += 1;
                    if idle.is_multiple_of(1024) {
                        std::thread::yield_now();
                    }
                }
            }
        }
        Ok(())
    }
}

/// What a node does with a message: its state, the message.
type Handler<S> = fn(&mut Ctx, &mut S, Msg) -> Res<()>;

fn splitmix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Spins (the handler's work) for `d`.
pub fn spin_for(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn unexpected(m: &Msg) -> String {
    format!("unexpected handler {} from node {}", m.handler, m.src)
}

fn pong(c: &mut Ctx) -> Res<serde_json::Value> {
    let mut pings = 0u64;
    loop {
        let Some(m) = c.next()? else {
            std::hint::spin_loop();
            continue;
        };
        match m.handler {
            H_FIN => break,
            h => {
                pings += 1;
                c.node
                    .inject(m.src, h, &[])
                    .map_err(|e| format!("inject: {e}"))?;
            }
        }
    }
    Ok(json!({ "pings": pings }))
}

/// Barrier state: arrivals at rank 0 by barrier parity (a node arrives at
/// b + 1 only after b's release, so two counts are enough), the last
/// release seen elsewhere.
struct Barrier {
    arrived: [u32; 2],
    released: Option<u64>,
}

fn barrier_msg(_: &mut Ctx, s: &mut Barrier, m: Msg) -> Res<()> {
    match m.handler {
        H_ARRIVE => s.arrived[(m.w[0] & 1) as usize] += 1,
        H_RELEASE => s.released = Some(m.w[0]),
        _ => return Err(unexpected(&m)),
    }
    Ok(())
}

fn barrier(c: &mut Ctx, count: u64) -> Res<serde_json::Value> {
    let mut s = Barrier {
        arrived: [0; 2],
        released: None,
    };
    for b in 0..count {
        if c.rank == 0 {
            let p = (b & 1) as usize;
            c.until(&mut s, barrier_msg, |c, s| s.arrived[p] + 1 >= c.n)?;
            s.arrived[p] = 0;
            for d in 1..c.n {
                c.send(d, H_RELEASE, &[b])?;
            }
        } else {
            c.send(0, H_ARRIVE, &[b])?;
            c.until(&mut s, barrier_msg, |_, s| s.released == Some(b))?;
        }
    }
    c.flush_all(&mut s, barrier_msg)?;
    Ok(json!({ "barriers": count }))
}

/// The jumps of the triangle with `pegs` holes a side: (from, over, to)
/// as hole indices (row by row).
pub fn peg_moves(pegs: u32) -> Vec<(u8, u8, u8)> {
    let p = pegs as i32;
    let idx = |r: i32, c: i32| -> Option<u8> {
        (r >= 0 && r < p && c >= 0 && c <= r).then(|| (r * (r + 1) / 2 + c) as u8)
    };
    let mut v = Vec::new();
    for r in 0..p {
        for c in 0..=r {
            for (dr, dc) in [(0, 1), (0, -1), (1, 0), (-1, 0), (1, 1), (-1, -1)] {
                if let (Some(a), Some(b), Some(t)) =
                    (idx(r, c), idx(r + dr, c + dc), idx(r + 2 * dr, c + 2 * dc))
                {
                    v.push((a, b, t));
                }
            }
        }
    }
    v
}

/// The enumeration's state on one node.
struct Enum {
    moves: Vec<(u8, u8, u8)>,
    seen: Vec<u64>,
    stack: Vec<u64>,
    visited: u64,
    /// Positions sent to and received from other nodes.
    pos_sent: u64,
    pos_recv: u64,
    /// Rank 0: the wave under way, its reports so far and their sums
    /// (sent, received, all idle), and the last complete wave's sums.
    wave: u64,
    reports: u32,
    sums: (u64, u64, bool),
    last: Option<(u64, u64)>,
    done: bool,
    /// `--expand-ns`.
    expand: Duration,
}

fn owner(pos: u64, n: u32) -> u32 {
    ((pos.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % n as u64) as u32
}

/// Whether position `p` is marked in `seen` (a bit per position).
fn seen(seen: &[u64], p: u64) -> bool {
    seen[(p / 64) as usize] >> (p % 64) & 1 == 1
}

/// Positions a node expands between looks for a message.
const EXPAND_BATCH: u32 = 8;

impl Enum {
    /// Keeps position `p` to expand, unless it was seen.
    fn keep(&mut self, p: u64) {
        if !seen(&self.seen, p) {
            self.stack.push(p);
        }
    }

    /// Expands positions from the stack, new ones counted and their
    /// successors pushed (ours) or sent (another node's), until a message
    /// may be waiting (every [`EXPAND_BATCH`]), the stack is empty, or the
    /// network takes no more ([`Ctx::room`]: the rest stays on the stack).
    fn work(&mut self, c: &mut Ctx) -> Res<()> {
        let mut n = 0;
        while n < EXPAND_BATCH && c.room()? {
            let Some(p) = self.stack.pop() else {
                break;
            };
            if seen(&self.seen, p) {
                continue;
            }
            self.seen[(p / 64) as usize] |= 1 << (p % 64);
            self.visited += 1;
            n += 1;
            if !self.expand.is_zero() {
                spin_for(self.expand);
            }
            for &(a, o, t) in &self.moves {
                if p >> a & 1 == 1 && p >> o & 1 == 1 && p >> t & 1 == 0 {
                    let q = p & !(1 << a) & !(1 << o) | 1 << t;
                    let d = owner(q, c.n);
                    if d == c.rank {
                        if !seen(&self.seen, q) {
                            self.stack.push(q);
                        }
                    } else {
                        self.pos_sent += 1;
                        c.send(d, H_POS, &[q])?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Nothing to expand and nothing waiting to go.
    fn idle(&self, c: &Ctx) -> bool {
        self.stack.is_empty() && c.outbox.is_empty()
    }
}

fn enum_msg(c: &mut Ctx, s: &mut Enum, m: Msg) -> Res<()> {
    match m.handler {
        H_POS => {
            s.pos_recv += 1;
            s.keep(m.w[0]);
        }
        H_QUERY => {
            let idle = s.idle(c) as u64;
            c.send(0, H_REPORT, &[s.pos_sent, s.pos_recv, idle])?;
        }
        H_REPORT if c.rank == 0 => {
            s.reports += 1;
            s.sums.0 += m.w[0];
            s.sums.1 += m.w[1];
            s.sums.2 &= m.w[2] == 1;
        }
        H_DONE => s.done = true,
        _ => return Err(unexpected(&m)),
    }
    Ok(())
}

fn enumerate(c: &mut Ctx, pegs: u32, expand: Duration) -> Res<serde_json::Value> {
    if !(4..=8).contains(&pegs) {
        return Err(format!("--pegs {pegs}: 4 to 8"));
    }
    let holes = pegs * (pegs + 1) / 2;
    let mut s = Enum {
        moves: peg_moves(pegs),
        seen: vec![0; (1usize << holes).div_ceil(64)],
        stack: Vec::new(),
        visited: 0,
        pos_sent: 0,
        pos_recv: 0,
        wave: 0,
        reports: 0,
        sums: (0, 0, true),
        last: None,
        done: false,
        expand,
    };
    // Every peg but the top one.
    let start = ((1u64 << holes) - 1) & !1;
    if owner(start, c.n) == c.rank {
        s.stack.push(start);
    }
    let mut idle = 0u32;
    while !s.done {
        // Messages first: taking one is cheap (a position kept), so a node
        // empties its input, and its virtual buffer after a switch, faster
        // than its peers fill it.
        if let Some(m) = c.next()? {
            idle = 0;
            c.run(&mut s, enum_msg, m)?;
            continue;
        }
        if !s.stack.is_empty() && c.room()? {
            idle = 0;
            s.work(c)?;
            continue;
        }
        if c.rank == 0 && s.idle(c) && (s.wave == 0 || s.reports + 1 >= c.n) {
            if s.wave > 0 {
                // A complete wave (ours counted as we started it).
                let (ss, rr, all_idle) = s.sums;
                if all_idle && ss == rr && s.last == Some((ss, rr)) {
                    for d in 1..c.n {
                        c.send(d, H_DONE, &[])?;
                    }
                    break;
                }
                s.last = all_idle.then_some((ss, rr));
            }
            s.wave += 1;
            s.reports = 0;
            s.sums = (s.pos_sent, s.pos_recv, true);
            for d in 1..c.n {
                c.send(d, H_QUERY, &[s.wave])?;
            }
            continue;
        }
        idle += 1;
        if idle.is_multiple_of(1024) {
            std::thread::yield_now();
        }
    }
    c.flush_all(&mut s, enum_msg)?;
    Ok(
        json!({ "positions": s.visited, "pos_sent": s.pos_sent, "pos_recv": s.pos_recv, "waves": s.wave }),
    )
}

/// The key-value store's state on one node: its keys' values, and the
/// reply awaited.
struct Kv {
    values: Vec<u64>,
    reply: Option<u64>,
}

const KV_KEYS: u64 = 4096;

fn kv_msg(c: &mut Ctx, s: &mut Kv, m: Msg) -> Res<()> {
    let slot = |k: u64, n: u32| (k / n as u64) as usize % KV_KEYS as usize;
    match m.handler {
        H_READ => {
            let v = s.values[slot(m.w[0], c.n)];
            c.send(m.src, H_REPLY, &[v])?;
        }
        H_WRITE => {
            s.values[slot(m.w[0], c.n)] = m.w[1];
            c.send(m.src, H_REPLY, &[m.w[1]])?;
        }
        H_REPLY => s.reply = Some(m.w[0]),
        H_FIN => {}
        _ => return Err(unexpected(&m)),
    }
    Ok(())
}

fn kv(c: &mut Ctx, count: u64) -> Res<serde_json::Value> {
    if c.n < 2 {
        return Err("kv needs two nodes or more".into());
    }
    let mut s = Kv {
        values: vec![0; KV_KEYS as usize],
        reply: None,
    };
    let (mut reads, mut writes, mut sum) = (0u64, 0u64, 0u64);
    for i in 0..count {
        let d = c.other();
        // A key that node d holds (key % n == d).
        let key = (c.rand() % KV_KEYS) * c.n as u64 + d as u64;
        s.reply = None;
        if c.rand() % 10 < 7 {
            reads += 1;
            c.send(d, H_READ, &[key])?;
        } else {
            writes += 1;
            c.send(d, H_WRITE, &[key, (c.rank as u64) << 32 | i])?;
        }
        c.until(&mut s, kv_msg, |_, s| s.reply.is_some())?;
        sum = sum.wrapping_add(s.reply.unwrap_or(0));
    }
    c.finish(&mut s, kv_msg)?;
    Ok(json!({ "reads": reads, "writes": writes, "checksum": sum }))
}

/// synth-N's state on one node: replies awaited, requests served.
struct Synth {
    handler: Duration,
    acks: u64,
    served: u64,
}

fn synth_msg(c: &mut Ctx, s: &mut Synth, m: Msg) -> Res<()> {
    match m.handler {
        H_REQ => {
            spin_for(s.handler);
            s.served += 1;
            c.send(m.src, H_ACK, &[m.w[0]])?;
        }
        H_ACK => s.acks += 1,
        H_FIN => {}
        _ => return Err(unexpected(&m)),
    }
    Ok(())
}

fn synth(c: &mut Ctx, a: &NodeArgs) -> Res<serde_json::Value> {
    if c.n < 2 || a.group == 0 {
        return Err("synth needs two nodes or more and --group 1 or more".into());
    }
    let mut s = Synth {
        handler: Duration::from_nanos(a.handler_ns),
        acks: 0,
        served: 0,
    };
    let groups = a.count.div_ceil(a.group);
    let mut sent = 0u64;
    for _ in 0..groups {
        s.acks = 0;
        for k in 0..a.group {
            // Uniform in [0, 2 * mean]: the mean interval between sends.
            let gap = Duration::from_nanos(c.rand() % (2 * a.interval_ns + 1));
            let t = Instant::now();
            c.until(&mut s, synth_msg, |_, _| t.elapsed() >= gap)?;
            let d = c.other();
            c.send(d, H_REQ, &[k])?;
            sent += 1;
        }
        let g = a.group;
        c.until(&mut s, synth_msg, |_, s| s.acks >= g)?;
    }
    c.finish(&mut s, synth_msg)?;
    Ok(json!({ "requests": sent, "served": s.served }))
}

#[cfg(test)]
mod tests;
