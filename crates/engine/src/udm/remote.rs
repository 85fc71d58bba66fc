//! UDM jobs that span engines: the *links* between them (see
//! `docs/udm.md`, "Across engines").
//!
//! A job lives on its *home* engine (where it was created). A process
//! behind another engine joins a rank through its own engine, which asks
//! the home engine for it ([`UdmJoin`], with the job's key) and, the first
//! time, makes the job's *replica*: a job segment of the same geometry in
//! which every rank not joined here is marked remote
//! ([`UDM_NODE_REMOTE`]). Its memory is made on the set-up thread, as any
//! job's; grants that come meanwhile wait on the link
//! ([`crate::udm::link::Link::making`]) and are handed out once it is
//! entered. Between the two engines the job has one link, a
//! reliable stream carried exactly as a VI's messages are (VI Data,
//! ViAck and ViClose frames naming the link as their VI, the sequence
//! numbers, acknowledgements, window and retransmission of
//! [`crate::wire::reliable`]). The home relays between the links of
//! different engines.
//!
//! Sending: a remote rank's mode word stays in divert mode, so local
//! senders hand the engine what they send to it (their divert rings, as
//! in the buffered case); the engine moves those messages to the job's
//! outbox ([`crate::udm::Job::outbox`]) and from there, packed as
//! records, into the link's next wire message as its window allows. With
//! the window closed the outbox fills, the divert rings stay full, and
//! the senders are held back: nothing is dropped.
//!
//! Receiving: each accepted wire message is kept, in order, until each of
//! its records is delivered: appended to the destination's virtual
//! buffer as a sender would ([`crate::udm::Job::append`]), or relayed.
//! A destination whose buffer is at its limit stops delivery: the link
//! keeps its messages, the window it grants closes, the sending engine's
//! outbox and its senders wait.
//!
//! Trust: the wire checks a link's token and peer address before a
//! fragment is reassembled (as a VI's); here every record is checked
//! before use: its length, its destination in the job, and its source,
//! which must be a rank that lives behind the link it came on (a peer
//! speaks only for its own nodes). What fails is counted and dropped.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use unet_abi::udm::*;
use unet_abi::EngineCounter;
use unet_control::{ErrorCode, Reply};

use crate::control::setup::Setup;
use crate::control::setup_thread::PendingJob;
use crate::counters::Counters;
use crate::poller::Token;
use crate::udm::link::{JoinOpen, Link, Links};
use crate::udm::{Append, Job, JobMemory, Jobs, RemoteMsg, OUTBOX_MAX};
use crate::unet::endpoints::ClientId;
use crate::unet::remote::{RemoteSide, ViIn};
use crate::via::vi_path::{Outgoing, RemoteVi};
use crate::wire::frame::{UdmAccept, UdmJoin, ViAck, ViClose, ViRefuse, VI_CLOSE_NORMAL};
use crate::wire::reliable::{
    self, DataVerdict, RelConfig, RelReceiver, RelSender, Reliability, SeqRange,
};
use crate::wire::{Body, RefuseReason, WireDrop};

use crate::udm::link::{AHEAD_MAX, BATCH_MAX, HOLD};
pub(crate) use crate::via::vias::LINK_BIT;
/// Retransmit interval of an unanswered join, and the attempts.
const JOIN_RETRY: Duration = Duration::from_millis(200);
const JOIN_TRIES: u32 = 10;
/// How soon a link with messages waiting (for room in a buffer, in the
/// outbox or the window) is looked at again while the engine sleeps.
const RETRY_SOON: Duration = Duration::from_millis(1);

/// A record: a message.
const REC_MSG: u8 = 1;
/// A record: rank `src` is gone.
const REC_GONE: u8 = 2;
/// Bytes of a record's header: kind u8, nwords u8, handler u16, src u32,
/// dst u32, 4 bytes reserved (little-endian); then `nwords` words of 8.
const REC_HEADER: usize = 16;

/// One record of a wire message, checked for length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rec {
    kind: u8,
    handler: u16,
    src: u32,
    dst: u32,
    nwords: usize,
    words: [u64; UDM_MAX_WORDS],
}

impl Rec {
    fn len(&self) -> usize {
        REC_HEADER + self.nwords * 8
    }

    /// The record at the start of `b`; None if it is not one.
    fn parse(b: &[u8]) -> Option<Rec> {
        let h = b.get(..REC_HEADER)?;
        let kind = h[0];
        let nwords = h[1] as usize;
        if !(kind == REC_MSG || kind == REC_GONE) || nwords > UDM_MAX_WORDS {
            return None;
        }
        let body = b.get(REC_HEADER..REC_HEADER + nwords * 8)?;
        let mut words = [0u64; UDM_MAX_WORDS];
        for (w, c) in words.iter_mut().zip(body.chunks_exact(8)) {
            *w = u64::from_le_bytes(c.try_into().ok()?);
        }
        Some(Rec {
            kind,
            handler: u16::from_le_bytes([h[2], h[3]]),
            src: u32::from_le_bytes(h[4..8].try_into().ok()?),
            dst: u32::from_le_bytes(h[8..12].try_into().ok()?),
            nwords,
            words,
        })
    }

    fn emit(&self, out: &mut Vec<u8>) {
        out.push(self.kind);
        out.push(self.nwords as u8);
        out.extend_from_slice(&self.handler.to_le_bytes());
        out.extend_from_slice(&self.src.to_le_bytes());
        out.extend_from_slice(&self.dst.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        for w in &self.words[..self.nwords] {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }

    fn msg(m: &RemoteMsg) -> Rec {
        Rec {
            kind: REC_MSG,
            handler: m.handler,
            src: m.src,
            dst: m.dst,
            nwords: (m.nwords as usize).min(UDM_MAX_WORDS),
            words: m.words,
        }
    }

    fn gone(rank: u32) -> Rec {
        Rec {
            kind: REC_GONE,
            handler: 0,
            src: rank,
            dst: 0,
            nwords: 0,
            words: [0; UDM_MAX_WORDS],
        }
    }
}

/// The records of a wire message, until one does not parse.
fn records(b: &[u8]) -> impl Iterator<Item = Rec> + '_ {
    let mut off = 0;
    std::iter::from_fn(move || {
        let r = Rec::parse(b.get(off..)?)?;
        off += r.len();
        Some(r)
    })
}

impl Link {
    fn new(job: Option<u32>, peer: RemoteVi, connected: bool) -> Link {
        let cfg = RelConfig {
            hold_max: HOLD as u32,
            ..RelConfig::default()
        };
        let level = Reliability::ReliableDelivery;
        Link {
            job,
            making: None,
            home_job: None,
            peer,
            connected,
            tx: RelSender::new(cfg, level, 0),
            rx: RelReceiver::new(cfg, level, 0),
            inflight: VecDeque::new(),
            batch: Vec::new(),
            inq: VecDeque::new(),
            in_off: 0,
            ahead: Vec::new(),
            announced: 0,
            dead: None,
        }
    }

    /// Send the batch as the next wire message; false if the window (or
    /// the link's state) does not allow it now.
    fn flush(&mut self, w: &mut RemoteSide, now: u64) -> bool {
        if self.batch.is_empty() {
            return true;
        }
        if !self.connected || self.dead.is_some() || !self.tx.can_send() {
            return false;
        }
        let Some(seq) = self.tx.on_send(now) else {
            return false;
        };
        let ack = self.rx.pending_ack();
        if w.send_vi(Outgoing {
            to: self.peer,
            seq,
            bytes: &self.batch,
            ack,
            held: None,
        }) {
            self.rx.make_ack();
        }
        self.inflight
            .push_back((seq, std::mem::take(&mut self.batch)));
        true
    }

    /// Add a record to the batch (sending the batch first if it is full);
    /// false if it cannot go now.
    fn push(&mut self, r: &Rec, w: &mut RemoteSide, now: u64) -> bool {
        if self.batch.len() + r.len() > BATCH_MAX && !self.flush(w, now) {
            return false;
        }
        r.emit(&mut self.batch);
        true
    }

    /// Resend the wire messages of `range`; counts each record's source's
    /// retransmission in `job`.
    fn resend(&mut self, range: SeqRange, w: &mut RemoteSide, job: Option<&mut Job>) {
        let mut job = job;
        for (seq, bytes) in &self.inflight {
            if !range.contains(*seq) {
                continue;
            }
            w.send_vi(Outgoing {
                to: self.peer,
                seq: *seq,
                bytes,
                ack: None,
                held: None,
            });
            if let Some(j) = job.as_deref_mut() {
                for r in records(bytes).filter(|r| r.kind == REC_MSG) {
                    if let Some(n) = j.nodes.get_mut(r.src as usize) {
                        n.count(UdmCounter::WireRetransmits, 1);
                    }
                }
            }
        }
    }

    /// Wire message `seq` arrived; false if refused as longer than a
    /// link's wire message (`BATCH_MAX`: not an honest peer's), so that
    /// what a link keeps stays within [`LINK_KEPT_MAX`](crate::udm::link::LINK_KEPT_MAX).
    fn arrive(&mut self, seq: u32, msg: Vec<u8>, now: u64) -> bool {
        if msg.len() > BATCH_MAX {
            return false;
        }
        match self.rx.on_data(seq, now) {
            DataVerdict::Accept => self.inq.push_back(msg),
            DataVerdict::Duplicate => return true,
            DataVerdict::OutOfOrder { .. } => {
                if self.ahead.len() < AHEAD_MAX && !self.ahead.iter().any(|(s, _)| *s == seq) {
                    self.ahead.push((seq, msg));
                }
                return true;
            }
            DataVerdict::OverWindow => return true,
        }
        // What came ahead of it follows, in order.
        while !self.ahead.is_empty() {
            let expected = self.rx.expected();
            self.ahead.retain(|(s, _)| !reliable::seq_lt(*s, expected));
            let Some(i) = self.ahead.iter().position(|(s, _)| *s == expected) else {
                if let Some(&(s, _)) = self.ahead.first() {
                    let _ = self.rx.on_data(s, now);
                }
                break;
            };
            let (s, m) = self.ahead.swap_remove(i);
            if self.rx.on_data(s, now) == DataVerdict::Accept {
                self.inq.push_back(m);
            }
        }
        true
    }

    /// Bytes of wire messages it keeps (accepted, and arrived after a gap).
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.inq.iter().map(Vec::len).sum::<usize>()
            + self.ahead.iter().map(|(_, m)| m.len()).sum::<usize>()
    }

    fn deadline(&self) -> Option<u64> {
        if self.dead.is_some() {
            return None;
        }
        [self.tx.next_deadline(), self.rx.ack_deadline()]
            .into_iter()
            .flatten()
            .min()
    }
}

impl Links {
    fn new_link_id(&mut self) -> u32 {
        loop {
            self.next_link = self.next_link.wrapping_add(1) & !LINK_BIT;
            let id = self.next_link | LINK_BIT;
            if self.next_link != 0 && !self.links.contains_key(&id) {
                return id;
            }
        }
    }

    fn new_open_id(&mut self) -> u32 {
        loop {
            self.next_open = self.next_open.wrapping_add(1);
            if self.next_open != 0 && !self.opens.contains_key(&self.next_open) {
                return self.next_open;
            }
        }
    }

    /// Whether anything is to be done on the set-up side.
    pub(crate) fn setup_due(&self) -> bool {
        !self.setup.is_empty()
            || !self.opens.is_empty()
            || self.links.values().any(|l| l.dead.is_some())
    }
}

/// Take the frames for links out of what the wire brought (before the
/// VIs see it), and note the peers found silent.
pub(crate) fn take_frames(jobs: &mut Jobs, w: &mut RemoteSide) {
    let l = &mut jobs.remote;
    l.silent.extend(w.silent.iter().copied());
    if w.vi_in.is_empty() {
        return;
    }
    for f in std::mem::take(&mut w.vi_in) {
        match f {
            ViIn::Data { dst_vi, .. } if dst_vi & LINK_BIT != 0 => l.data.push(f),
            ViIn::Ack(_, a) if a.dst_vi & LINK_BIT != 0 => l.data.push(f),
            ViIn::Close(_, c) if c.dst_vi & LINK_BIT != 0 => l.setup.push(f),
            ViIn::Refuse(_, r) if r.dst_vi & LINK_BIT != 0 => l.setup.push(f),
            ViIn::UdmJoin(..) | ViIn::UdmAccept(..) => l.setup.push(f),
            other => w.vi_in.push(other),
        }
    }
}

/// Move every link on: frames from the wire, deliveries, the outboxes,
/// timers and acks. Returns the work done.
pub(crate) fn poll(jobs: &mut Jobs, w: &mut RemoteSide, counters: &Counters) -> usize {
    if jobs.remote.links.is_empty() {
        // Frames to links that do not exist (any more).
        let stray = std::mem::take(&mut jobs.remote.data).len();
        counters.engine(WireDrop::UnknownEndpoint.counter(), stray as u64);
        jobs.remote.silent.clear();
        return stray;
    }
    let now = w.clock_ns();
    let Jobs {
        jobs: all, remote, ..
    } = jobs;
    let Links {
        links,
        routes,
        data,
        silent,
        ..
    } = remote;
    let mut work = 0;
    let forged = |c: &Counters| c.engine(WireDrop::ForgedToken.counter(), 1);
    for f in std::mem::take(data) {
        work += 1;
        match f {
            ViIn::Data {
                from,
                dst_vi,
                token,
                seq,
                msg,
            } => match links.get_mut(&dst_vi) {
                Some(l) if l.connected && l.peer.my_token == token && l.peer.addr == from => {
                    if !l.arrive(seq, msg, now) {
                        counters.engine(WireDrop::BadLength.counter(), 1);
                    }
                }
                Some(_) => forged(counters),
                None => counters.engine(WireDrop::UnknownEndpoint.counter(), 1),
            },
            ViIn::Ack(from, a) => match links.get_mut(&a.dst_vi) {
                Some(l) if l.connected && l.peer.my_token == a.token && l.peer.addr == from => {
                    let out = l.tx.on_ack(a.ack(), now);
                    for _ in 0..out.completed {
                        l.inflight.pop_front();
                    }
                    if let Some(r) = out.retransmit {
                        let job = l.job.and_then(|j| all.get_mut(&j));
                        l.resend(r, w, job);
                    }
                }
                Some(_) => forged(counters),
                None => counters.engine(WireDrop::UnknownEndpoint.counter(), 1),
            },
            _ => {}
        }
    }
    for addr in std::mem::take(silent) {
        for l in links.values_mut() {
            if l.peer.addr == addr && l.dead.is_none() {
                l.dead = Some(false);
            }
        }
    }
    // Deliveries, announcements and the outbox, job by job.
    let mut ids: Vec<u32> = links.keys().copied().collect();
    ids.sort_unstable();
    for (&jid, route) in routes.iter() {
        let Some(job) = all.get_mut(&jid) else {
            for l in links.values_mut().filter(|l| l.job == Some(jid)) {
                l.dead.get_or_insert(true);
            }
            continue;
        };
        let mut touched = 0u64;
        for &lid in &ids {
            let Some(l) = links.get_mut(&lid) else {
                continue;
            };
            if l.job != Some(jid) || l.dead.is_some() {
                continue;
            }
            work += deliver(l, lid, job, route, now, counters, &mut touched);
        }
        for d in 0..job.layout.nodes {
            if touched & (1 << d) != 0 {
                job.publish(d);
            }
        }
        // Ranks gone here (or behind another link), told to each link.
        let gone: u64 = (0..job.layout.nodes)
            .filter(|&r| job.nodes[r as usize].state == UDM_NODE_GONE)
            .fold(0, |m, r| m | 1 << r);
        for &lid in &ids {
            let Some(l) = links.get_mut(&lid) else {
                continue;
            };
            if l.job != Some(jid) || !l.connected || l.dead.is_some() {
                continue;
            }
            let new = gone & !l.announced;
            for r in (0..job.layout.nodes).filter(|&r| new & (1 << r) != 0) {
                if route.get(r as usize) == Some(&lid) {
                    l.announced |= 1 << r;
                    continue;
                }
                if !l.push(&Rec::gone(r), w, now) {
                    break;
                }
                l.announced |= 1 << r;
                work += 1;
            }
        }
        while let Some(m) = job.outbox.front() {
            let lid = route.get(m.dst as usize).copied().unwrap_or(0);
            let Some(l) = links.get_mut(&lid).filter(|l| l.dead.is_none()) else {
                // No link (any more) to its node: it is gone.
                let (src, dst, counted) = (m.src as usize, m.dst, m.counted);
                if let Some(n) = job.nodes.get_mut(src) {
                    n.count(UdmCounter::DropDestGone, 1);
                }
                job.outbox.pop_front();
                if counted {
                    job.uncount(dst);
                }
                continue;
            };
            if !l.connected || !l.push(&Rec::msg(m), w, now) {
                break;
            }
            let (src, dst, counted) = (m.src as usize, m.dst, m.counted);
            if let Some(n) = job.nodes.get_mut(src) {
                n.count(UdmCounter::WireTx, 1);
            }
            job.outbox.pop_front();
            if counted {
                job.uncount(dst);
            }
            work += 1;
        }
        for &lid in &ids {
            if let Some(l) = links.get_mut(&lid).filter(|l| l.job == Some(jid)) {
                l.flush(w, now);
            }
        }
    }
    // Timers and acks.
    for l in links.values_mut() {
        if l.dead.is_some() || !l.connected {
            continue;
        }
        match l.tx.poll_timer(now) {
            reliable::TimerOutcome::Nothing => {}
            reliable::TimerOutcome::Retransmit(r) => {
                let job = l.job.and_then(|j| all.get_mut(&j));
                l.resend(r, w, job);
            }
            reliable::TimerOutcome::Probe { seq } => {
                if seq != l.tx.next_seq() {
                    let job = l.job.and_then(|j| all.get_mut(&j));
                    let r = SeqRange {
                        from: seq,
                        to: seq.wrapping_add(1),
                    };
                    l.resend(r, w, job);
                }
            }
            reliable::TimerOutcome::Broken(_) => {
                l.dead = Some(true);
            }
        }
        if l.rx.ack_due(now) {
            let ack = l.rx.make_ack();
            w.send_vi_ack(
                l.peer.addr,
                ViAck::from_ack(l.peer.vi, l.peer.peer_token, ack),
            );
        }
    }
    work
}

/// Deliver what link `lid` accepted, in order, as far as the
/// destinations take it. Returns the records handled.
fn deliver(
    l: &mut Link,
    lid: u32,
    job: &mut Job,
    route: &[u32],
    now: u64,
    counters: &Counters,
    touched: &mut u64,
) -> usize {
    let nodes = job.layout.nodes;
    let mut placed = 0;
    let mut work = 0;
    while let Some(front) = l.inq.front() {
        if l.in_off >= front.len() {
            l.inq.pop_front();
            l.in_off = 0;
            placed += 1;
            continue;
        }
        let Some(r) = Rec::parse(&front[l.in_off..]) else {
            // A peer that garbles its stream loses the rest of the message.
            counters.engine(WireDrop::BadLength.counter(), 1);
            l.inq.pop_front();
            l.in_off = 0;
            placed += 1;
            continue;
        };
        // A peer speaks only for the nodes that live behind it.
        if r.src >= nodes || route.get(r.src as usize) != Some(&lid) {
            counters.engine(WireDrop::ForgedToken.counter(), 1);
            l.in_off += r.len();
            continue;
        }
        if r.kind == REC_GONE {
            if job.nodes[r.src as usize].state == UDM_NODE_REMOTE {
                job.node_gone(r.src);
            }
            l.in_off += r.len();
            work += 1;
            continue;
        }
        if r.dst >= nodes {
            job.nodes[r.src as usize].count(UdmCounter::DropBadDest, 1);
            l.in_off += r.len();
            continue;
        }
        if job.nodes[r.dst as usize].state == UDM_NODE_REMOTE {
            // Behind another link: relayed (never back where it came from).
            if route.get(r.dst as usize) == Some(&lid) {
                job.nodes[r.src as usize].count(UdmCounter::DropBadDest, 1);
                l.in_off += r.len();
                continue;
            }
            if job.outbox.len() >= OUTBOX_MAX {
                break;
            }
            job.outbox.push_back(RemoteMsg {
                src: r.src,
                dst: r.dst,
                handler: r.handler,
                nwords: r.nwords as u16,
                words: r.words,
                counted: false,
            });
        } else {
            match job.append(r.dst, r.src, r.handler, &r.words[..r.nwords]) {
                Append::Done => {
                    *touched |= 1 << r.dst;
                    job.nodes[r.dst as usize].count(UdmCounter::WireRx, 1);
                }
                Append::Full => break,
                Append::Gone => job.nodes[r.src as usize].count(UdmCounter::DropDestGone, 1),
            }
        }
        l.in_off += r.len();
        work += 1;
    }
    if placed > 0 {
        l.rx.placed(placed, now);
    }
    work
}

/// The earliest time a link is to be looked at again.
pub(crate) fn next_deadline(jobs: &Jobs, w: &RemoteSide) -> Option<Instant> {
    let l = &jobs.remote;
    if l.links.is_empty() && l.opens.is_empty() {
        return None;
    }
    let now = Instant::now();
    let waiting = l
        .links
        .values()
        .any(|k| !k.inq.is_empty() || !k.batch.is_empty())
        || jobs.jobs.values().any(|j| !j.outbox.is_empty());
    let soon = waiting.then(|| now + RETRY_SOON);
    let clock = w.clock_ns();
    let timers = l
        .links
        .values()
        .filter_map(|k| k.deadline())
        .min()
        .map(|ns| now + Duration::from_nanos(ns.saturating_sub(clock)));
    let opens = l.opens.values().map(|o| o.next_try).min();
    let dead = l.links.values().any(|k| k.dead.is_some()).then_some(now);
    [soon, timers, opens, dead].into_iter().flatten().min()
}

impl Setup<'_> {
    /// A client asks to join rank `rank` of job `job` at engine `home`.
    pub(crate) fn udm_join_remote(
        &mut self,
        ci: ClientId,
        req_id: u32,
        home: SocketAddr,
        job: u32,
        key: u64,
        rank: u32,
    ) {
        let Some(w) = self.remote.as_deref_mut() else {
            return self.udm_reply(ci, req_id, Err(ErrorCode::Unreachable));
        };
        if crate::via::vias::is_local(Some(home), Some(w.local_addr())) {
            let r = self.udm_join(ci, job, key, rank);
            return self.udm_reply_fds(ci, req_id, job, rank, r);
        }
        // One link per (home, job).
        let links = &mut self.udm.remote;
        let existing = links
            .links
            .iter()
            .find(|(_, l)| l.peer.addr == home && l.home_job == Some(job) && l.dead.is_none())
            .map(|(&id, _)| id);
        let lid = match existing {
            Some(id) => id,
            None => {
                if !w.vi_peer_add(home) {
                    return self.udm_reply(ci, req_id, Err(ErrorCode::NoResources));
                }
                let id = links.new_link_id();
                let my_token = unet_sys::random_u64();
                let peer = RemoteVi {
                    addr: home,
                    vi: 0,
                    peer_token: 0,
                    my_token,
                };
                let mut l = Link::new(None, peer, false);
                l.home_job = Some(job);
                links.links.insert(id, l);
                w.vi_route(id, Some((home, my_token)));
                id
            }
        };
        let open = links.new_open_id();
        links.opens.insert(
            open,
            JoinOpen {
                client: ci,
                req_id,
                home,
                job,
                key,
                rank,
                link: lid,
                next_try: Instant::now() + JOIN_RETRY,
                tries: 1,
            },
        );
        self.send_join(open);
    }

    fn send_join(&mut self, open: u32) {
        let Some(o) = self.udm.remote.opens.get(&open) else {
            return;
        };
        let Some(l) = self.udm.remote.links.get(&o.link) else {
            return;
        };
        let f = UdmJoin {
            request_id: open,
            job: o.job,
            key: o.key,
            src_link: o.link,
            src_token: l.peer.my_token,
            rank: o.rank,
            hold: HOLD,
        };
        let home = o.home;
        if let Some(w) = self.remote.as_deref_mut() {
            w.send_vi_control(home, Body::UdmJoin(f));
        }
    }

    fn udm_reply(&mut self, ci: ClientId, req_id: u32, r: Result<(), ErrorCode>) {
        let reply = match r {
            Ok(()) => Reply::Ok,
            Err(c) => Reply::Error(c),
        };
        self.server.reply(ci, req_id, reply, &[]);
    }

    fn udm_reply_fds(
        &mut self,
        ci: ClientId,
        req_id: u32,
        job: u32,
        rank: u32,
        r: Result<Vec<std::os::fd::OwnedFd>, ErrorCode>,
    ) {
        match r {
            Ok(fds) => {
                let raw: Vec<_> = fds.iter().map(|f| f.as_raw_fd()).collect();
                self.server
                    .reply(ci, req_id, Reply::UdmJoined { job, rank }, &raw);
            }
            Err(c) => self.server.reply(ci, req_id, Reply::Error(c), &[]),
        }
    }

    /// The set-up side of links: joins and their answers from the wire,
    /// closes, join retries, links to retire.
    pub(crate) fn udm_links(&mut self) {
        for f in std::mem::take(&mut self.udm.remote.setup) {
            match f {
                ViIn::UdmJoin(from, j) => self.udm_join_from(from, j),
                ViIn::UdmAccept(from, a) => self.udm_accepted(from, a),
                ViIn::Refuse(from, r) => self.udm_refused(from, r),
                ViIn::Close(from, c) => match self.udm.remote.links.get_mut(&c.dst_vi) {
                    Some(l) if l.connected && l.peer.my_token == c.token && l.peer.addr == from => {
                        l.dead = Some(false);
                    }
                    Some(_) => self.count_forged_udm(),
                    None => self
                        .eps
                        .counters()
                        .engine(WireDrop::UnknownEndpoint.counter(), 1),
                },
                _ => {}
            }
        }
        // Joins not answered: again, or given up.
        let now = Instant::now();
        let due: Vec<u32> = self
            .udm
            .remote
            .opens
            .iter()
            .filter(|(_, o)| o.next_try <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            let o = self.udm.remote.opens.get_mut(&id).expect("listed");
            if o.tries >= JOIN_TRIES {
                let o = self.udm.remote.opens.remove(&id).expect("listed");
                self.udm_reply(o.client, o.req_id, Err(ErrorCode::Unreachable));
                self.forget_unused_link(o.link);
                continue;
            }
            o.tries += 1;
            o.next_try = now + JOIN_RETRY;
            self.send_join(id);
        }
        // Links to retire.
        let dead: Vec<(u32, bool)> = self
            .udm
            .remote
            .links
            .iter()
            .filter_map(|(&id, l)| l.dead.map(|tell| (id, tell)))
            .collect();
        for (id, tell) in dead {
            self.retire_link(id, tell);
        }
    }

    fn count_forged_udm(&self) {
        self.eps
            .counters()
            .engine(WireDrop::ForgedToken.counter(), 1);
    }

    /// Forget link `id`: tell its peer if asked, mark the ranks behind it
    /// gone, and the job retires if nothing holds it any more.
    fn retire_link(&mut self, id: u32, tell: bool) {
        let Some(mut l) = self.udm.remote.links.remove(&id) else {
            return;
        };
        // Joins waiting for a replica still being made: it will not come.
        for (o, _) in l.making.take().into_iter().flatten() {
            self.udm_reply(o.client, o.req_id, Err(ErrorCode::Unreachable));
        }
        if let Some(w) = self.remote.as_deref_mut() {
            w.vi_route(id, None);
            w.vi_peer_remove(l.peer.addr);
            if tell && l.connected {
                w.send_vi_control(
                    l.peer.addr,
                    Body::ViClose(ViClose {
                        dst_vi: l.peer.vi,
                        token: l.peer.peer_token,
                        reason: VI_CLOSE_NORMAL,
                    }),
                );
            }
        }
        let Some(jid) = l.job else {
            return;
        };
        let behind: Vec<u32> = self
            .udm
            .remote
            .routes
            .get(&jid)
            .map(|r| {
                (0..r.len() as u32)
                    .filter(|&k| r[k as usize] == id)
                    .collect()
            })
            .unwrap_or_default();
        if let Some(j) = self.udm.jobs.get_mut(&jid) {
            for r in behind {
                if j.nodes[r as usize].state == UDM_NODE_REMOTE {
                    j.node_gone(r);
                }
            }
        }
        if !self.udm.remote.links.values().any(|l| l.job == Some(jid)) {
            self.udm.remote.routes.remove(&jid);
        }
        self.udm_retire(jid);
    }

    /// A link made for joins that all failed, never connected: forget it.
    fn forget_unused_link(&mut self, id: u32) {
        let used = self.udm.remote.opens.values().any(|o| o.link == id)
            || self.udm.remote.links.get(&id).is_none_or(|l| l.connected);
        if !used {
            self.retire_link(id, false);
        }
    }

    /// A UdmJoin from `from` (an allowed peer): grant the rank to a node
    /// behind it, or refuse.
    fn udm_join_from(&mut self, from: SocketAddr, j: UdmJoin) {
        let refuse = |s: &mut Self, reason: RefuseReason| {
            if let Some(w) = s.remote.as_deref_mut() {
                w.send_vi_control(
                    from,
                    Body::ViRefuse(ViRefuse {
                        request_id: j.request_id,
                        dst_vi: j.src_link,
                        reason,
                    }),
                );
            }
        };
        let Some(job) = self.udm.jobs.get(&j.job) else {
            return refuse(self, RefuseReason::NoSuchEndpoint);
        };
        if job.key != j.key {
            // As if the job did not exist (and counted: a forgery, or a
            // stale ticket).
            self.count_forged_udm();
            return refuse(self, RefuseReason::NoSuchEndpoint);
        }
        if j.src_link & LINK_BIT == 0 || j.rank >= job.layout.nodes {
            return refuse(self, RefuseReason::Refused);
        }
        let nodes = job.layout.nodes;
        let gone: u64 = (0..nodes)
            .filter(|&r| job.nodes[r as usize].state == UDM_NODE_GONE)
            .fold(0, |m, r| m | 1 << r);
        let (fast_cap, buffer_cap, timeout_us) = (
            job.layout.fast_cap,
            job.layout.buffer_cap,
            job.timeout.as_micros().min(u32::MAX as u128) as u32,
        );
        let links = &mut self.udm.remote;
        let found = links
            .links
            .iter()
            .find(|(_, l)| l.job == Some(j.job) && l.peer.addr == from && l.peer.vi == j.src_link)
            .map(|(&id, _)| id);
        let lid = match found {
            Some(id) => id,
            None => {
                let Some(w) = self.remote.as_deref_mut() else {
                    return;
                };
                if !w.vi_peer_add(from) {
                    return refuse(self, RefuseReason::NoResources);
                }
                let links = &mut self.udm.remote;
                let id = links.new_link_id();
                let peer = RemoteVi {
                    addr: from,
                    vi: j.src_link,
                    peer_token: j.src_token,
                    my_token: unet_sys::random_u64(),
                };
                let mut l = Link::new(Some(j.job), peer, true);
                l.announced = gone;
                links.links.insert(id, l);
                links
                    .routes
                    .entry(j.job)
                    .or_insert_with(|| vec![0; nodes as usize]);
                w.vi_route(id, Some((from, peer.my_token)));
                id
            }
        };
        let links = &mut self.udm.remote;
        let my_token = links.links[&lid].peer.my_token;
        let route = links
            .routes
            .entry(j.job)
            .or_insert_with(|| vec![0; nodes as usize]);
        let job = self.udm.jobs.get_mut(&j.job).expect("looked up");
        match job.nodes[j.rank as usize].state {
            UDM_NODE_FREE => {
                job.set_remote(j.rank);
                route[j.rank as usize] = lid;
            }
            UDM_NODE_REMOTE if route[j.rank as usize] == lid => {}
            _ => return refuse(self, RefuseReason::Refused),
        }
        if let Some(w) = self.remote.as_deref_mut() {
            w.send_vi_control(
                from,
                Body::UdmAccept(UdmAccept {
                    request_id: j.request_id,
                    dst_link: j.src_link,
                    src_link: lid,
                    accept_token: my_token,
                    rank: j.rank,
                    nodes,
                    fast_cap,
                    buffer_cap,
                    timeout_us,
                    hold: HOLD,
                    gone,
                }),
            );
        }
    }

    /// The home granted a join of ours: make the job's replica here (the
    /// first time), and hand the rank to the client.
    fn udm_accepted(&mut self, from: SocketAddr, a: UdmAccept) {
        let ok = self
            .udm
            .remote
            .opens
            .get(&a.request_id)
            .is_some_and(|o| o.home == from && o.link == a.dst_link);
        if !ok {
            return self.count_forged_udm();
        }
        let o = self.udm.remote.opens.remove(&a.request_id).expect("found");
        let Some(l) = self.udm.remote.links.get_mut(&o.link) else {
            return self.udm_reply(o.client, o.req_id, Err(ErrorCode::Unreachable));
        };
        if !l.connected {
            l.peer.vi = a.src_link;
            l.peer.peer_token = a.accept_token;
            l.connected = true;
        } else if l.peer.vi != a.src_link || l.peer.peer_token != a.accept_token {
            self.udm.remote.opens.insert(a.request_id, o);
            return self.count_forged_udm();
        }
        let local = match (l.job, l.making.as_mut()) {
            (Some(id), _) => id,
            (None, Some(waiting)) => return waiting.push((o, a)),
            (None, None) => {
                let link = o.link;
                match self.start_replica(&o, &a) {
                    Ok(()) => {
                        if let Some(l) = self.udm.remote.links.get_mut(&link) {
                            l.making = Some(vec![(o, a)]);
                        }
                    }
                    Err(code) => {
                        self.udm_reply(o.client, o.req_id, Err(code));
                        self.retire_link(link, true);
                    }
                }
                return;
            }
        };
        self.finish_accept(o, a, local);
    }

    /// Hand rank `a.rank` of job `local` (the replica here) to the client
    /// of the join `o`, which the home granted.
    fn finish_accept(&mut self, o: JoinOpen, a: UdmAccept, local: u32) {
        let Some(job) = self.udm.jobs.get_mut(&local) else {
            return self.udm_reply(o.client, o.req_id, Err(ErrorCode::NoSuchJob));
        };
        if a.rank >= job.layout.nodes || job.nodes[a.rank as usize].state != UDM_NODE_REMOTE {
            return self.udm_reply(o.client, o.req_id, Err(ErrorCode::RankTaken));
        }
        job.set_free(a.rank);
        let key = job.key;
        if let Some(r) = self.udm.remote.routes.get_mut(&local) {
            r[a.rank as usize] = 0;
        }
        let r = self.udm_join(o.client, local, key, a.rank);
        self.udm_reply_fds(o.client, o.req_id, local, a.rank, r);
    }

    /// Start making the replica of a home's job, for the join `o` the
    /// home granted with `a`, on the set-up thread (it can be as large as
    /// any job: made on the loop, it would hold up every client's
    /// traffic); [`Setup::finish_udm_replica`] enters it when ready. It
    /// is charged to the joining client, as a job it made.
    fn start_replica(&mut self, o: &JoinOpen, a: &UdmAccept) -> Result<(), ErrorCode> {
        let buffer = a.buffer_cap as u64 * std::mem::size_of::<UdmMsg>() as u64;
        let layout =
            UdmLayout::new(a.nodes, a.fast_cap, buffer).map_err(|_| ErrorCode::BadGeometry)?;
        self.check_udm_jobs(o.client)?;
        self.check_memory_for(o.client, JobMemory::charge(&layout))?;
        let timeout = Duration::from_micros(a.timeout_us as u64).min(Duration::from_secs(60));
        let id = self.udm.reserve();
        self.work.start_udm_replica(
            self.engine_id,
            (o.client, o.req_id),
            id,
            (layout, timeout),
            o.link,
        );
        Ok(())
    }

    /// A replica's memory is ready (or could not be made): enter it, every
    /// rank remote (behind its link) or gone, and hand the joins granted
    /// meanwhile to their clients. If the link went away meanwhile, the
    /// memory is unmapped and its id given back.
    pub(crate) fn finish_udm_replica(
        &mut self,
        p: PendingJob,
        link: u32,
        mem: std::io::Result<JobMemory>,
    ) {
        let waiting = self
            .udm
            .remote
            .links
            .get_mut(&link)
            .and_then(|l| l.making.take());
        let Some(waiting) = waiting.filter(|w| !w.is_empty()) else {
            self.udm.unreserve(p.id);
            if let Ok(mem) = mem {
                self.work.discard_all(mem.touched(), mem.into_segments());
            }
            return;
        };
        let entered = match mem {
            Ok(mem) => match self.udm.insert(p.id, p.client, p.layout, p.timeout, mem) {
                Ok(()) => true,
                Err(mem) => {
                    self.work.discard_all(mem.touched(), mem.into_segments());
                    false
                }
            },
            Err(_) => {
                self.udm.unreserve(p.id);
                false
            }
        };
        if !entered {
            for (o, _) in waiting {
                self.udm_reply(o.client, o.req_id, Err(ErrorCode::NoResources));
            }
            return self.retire_link(link, true);
        }
        let id = p.id;
        let gone = waiting[0].1.gone;
        let payer = self.udm_payer(p.client);
        let job = self.udm.jobs.get_mut(&id).expect("just entered");
        job.payer = payer;
        let _ = self.poller.add_edge(
            job.doorbell.fd().as_raw_fd(),
            Token::UdmDoorbell(id as usize),
        );
        for r in 0..p.layout.nodes {
            if gone & (1 << r) != 0 {
                job.node_gone(r);
            } else {
                job.set_remote(r);
            }
        }
        self.eps.counters().engine(EngineCounter::UdmJobs, 1);
        self.udm
            .remote
            .routes
            .insert(id, vec![link; p.layout.nodes as usize]);
        if let Some(l) = self.udm.remote.links.get_mut(&link) {
            l.job = Some(id);
            l.announced = gone;
        }
        for (o, a) in waiting {
            self.finish_accept(o, a, id);
        }
    }

    /// The client whose join started the replica for `link` went away
    /// while it was being made (its memory is unmapped when ready): the
    /// joins waiting for it fail, and the link goes.
    pub(crate) fn udm_replica_abandoned(&mut self, link: u32) {
        self.retire_link(link, true);
    }

    /// A home refused a join of ours.
    fn udm_refused(&mut self, from: SocketAddr, r: ViRefuse) {
        let ok = self
            .udm
            .remote
            .opens
            .get(&r.request_id)
            .is_some_and(|o| o.home == from && o.link == r.dst_vi);
        if !ok {
            return self.count_forged_udm();
        }
        let o = self.udm.remote.opens.remove(&r.request_id).expect("found");
        let code = match r.reason {
            RefuseReason::NoSuchEndpoint => ErrorCode::NoSuchJob,
            RefuseReason::NoResources => ErrorCode::NoResources,
            _ => ErrorCode::RankTaken,
        };
        self.udm_reply(o.client, o.req_id, Err(code));
        self.forget_unused_link(o.link);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udm::link::LINK_KEPT_MAX;

    #[test]
    fn a_link_keeps_at_most_its_bound() {
        let peer = RemoteVi {
            addr: "127.0.0.1:9".parse().unwrap(),
            vi: 1,
            peer_token: 2,
            my_token: 3,
        };
        let mut l = Link::new(Some(1), peer, true);
        // A wire message longer than any a link sends: refused.
        assert!(!l.arrive(0, vec![0; BATCH_MAX + 1], 0));
        assert_eq!(l.kept(), 0);
        // A peer that never lets its messages be delivered, sending the
        // longest ones in and past its window: what is kept stays bounded.
        for seq in (0..200u32).rev() {
            assert!(l.arrive(seq, vec![0; BATCH_MAX], 1));
            assert!(l.kept() <= LINK_KEPT_MAX);
        }
        assert_eq!(l.inq.len(), usize::from(HOLD));
        assert!(l.kept() <= LINK_KEPT_MAX);
    }

    #[test]
    fn records_round_trip_and_garbage_is_refused() {
        let mut m = RemoteMsg {
            src: 3,
            dst: 1,
            handler: 0xBEEF,
            nwords: 14,
            words: [0; UDM_MAX_WORDS],
            counted: false,
        };
        for (i, w) in m.words.iter_mut().enumerate() {
            *w = 0x0101_0101_0101_0101 * i as u64;
        }
        let mut b = Vec::new();
        Rec::msg(&m).emit(&mut b);
        Rec::gone(5).emit(&mut b);
        m.nwords = 0;
        Rec::msg(&m).emit(&mut b);
        let got: Vec<Rec> = records(&b).collect();
        assert_eq!(got.len(), 3);
        assert_eq!((got[0].src, got[0].dst, got[0].handler), (3, 1, 0xBEEF));
        assert_eq!(got[0].words[13], 0x0101_0101_0101_0101 * 13);
        assert_eq!((got[1].kind, got[1].src), (REC_GONE, 5));
        assert_eq!((got[2].kind, got[2].nwords), (REC_MSG, 0));
        // Cut short, too many words, an unknown kind: not a record.
        assert_eq!(Rec::parse(&b[..REC_HEADER + 8]), None);
        let mut bad = b.clone();
        bad[1] = 15;
        assert_eq!(Rec::parse(&bad), None);
        bad[1] = 1;
        bad[0] = 9;
        assert_eq!(Rec::parse(&bad), None);
        // Every prefix and every byte flipped: no panic.
        for n in 0..b.len() {
            let _ = records(&b[..n]).count();
            let mut c = b.clone();
            c[n] ^= 0xFF;
            let _ = records(&c).count();
        }
    }
}
