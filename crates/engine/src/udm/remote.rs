//! UDM jobs that span engines: the *links* between them (see
//! `docs/udm.md`, "Across engines").
//!
//! A job lives on its *home* engine (where it was created). A process
//! behind another engine joins a rank through its own engine, which asks
//! the home engine for it ([`UdmJoin`](crate::wire::frame::UdmJoin), with
//! the job's key) and, the first time, makes the job's *replica*: a job
//! segment of the same geometry in
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
//! Trust: the wire's port checks a link's token and peer address on every
//! frame for it (before a fragment is reassembled, as a VI's) and sorts
//! the links' frames into their own inbox; here every record is checked
//! before use: its length, its destination in the job, and its source,
//! which must be a rank that lives behind the link it came on (a peer
//! speaks only for its own nodes). What fails is counted and dropped.
//!
//! This file is the links' data path; their set-up (joins, grants and
//! refusals, replicas, retiring a link) is in `udm/setup/links.rs`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use unet_abi::udm::*;

use crate::counters::Counters;
use crate::udm::link::{Link, Links};
use crate::udm::{Append, Job, Jobs, RemoteMsg, OUTBOX_MAX};
use crate::via::vi_path::{Outgoing, RemoteVi};
use crate::wire::frame::ViAck;
use crate::wire::port::{ConnIn, WirePort};
use crate::wire::reliable::{
    self, DataVerdict, RelConfig, RelReceiver, RelSender, Reliability, SeqRange,
};
use crate::wire::WireDrop;

use crate::udm::link::{AHEAD_MAX, BATCH_MAX, HOLD};
pub(crate) use crate::wire::port::LINK_BIT;
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
    pub(crate) fn new(job: Option<u32>, peer: RemoteVi, connected: bool) -> Link {
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
    fn flush(&mut self, w: &mut WirePort, now: u64) -> bool {
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
        if w.send_conn(Outgoing {
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
    fn push(&mut self, r: &Rec, w: &mut WirePort, now: u64) -> bool {
        if self.batch.len() + r.len() > BATCH_MAX && !self.flush(w, now) {
            return false;
        }
        r.emit(&mut self.batch);
        true
    }

    /// Resend the wire messages of `range`; counts each record's source's
    /// retransmission in `job`.
    fn resend(&mut self, range: SeqRange, w: &mut WirePort, job: Option<&mut Job>) {
        let mut job = job;
        for (seq, bytes) in &self.inflight {
            if !range.contains(*seq) {
                continue;
            }
            w.send_conn(Outgoing {
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
    pub(crate) fn new_link_id(&mut self) -> u32 {
        loop {
            self.next_link = self.next_link.wrapping_add(1) & !LINK_BIT;
            let id = self.next_link | LINK_BIT;
            if self.next_link != 0 && !self.links.contains_key(&id) {
                return id;
            }
        }
    }

    pub(crate) fn new_open_id(&mut self) -> u32 {
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

/// Take the links' frames from their inbox of the wire's port (their
/// token and sender checked there): messages and acks are handled here,
/// the others (joins, their answers, closes) kept for the set-up side;
/// the peers found silent noted.
fn take_frames(jobs: &mut Jobs, w: &mut WirePort) -> Vec<ConnIn> {
    let l = &mut jobs.remote;
    let inbox = &mut w.st.links;
    l.silent.append(&mut inbox.silent);
    let mut data = Vec::new();
    for f in std::mem::take(&mut inbox.frames) {
        match f {
            ConnIn::Data { .. } | ConnIn::Ack(..) => data.push(f),
            _ => l.setup.push(f),
        }
    }
    data
}

/// Handle the messages and acks that came for links.
fn link_frames(jobs: &mut Jobs, data: Vec<ConnIn>, w: &mut WirePort, now: u64) -> usize {
    let Jobs {
        jobs: all, remote, ..
    } = jobs;
    let links = &mut remote.links;
    let mut work = 0;
    for f in data {
        work += 1;
        match f {
            ConnIn::Data {
                dst_vi, seq, msg, ..
            } => match links.get_mut(&dst_vi) {
                Some(l) if l.connected => {
                    if !l.arrive(seq, msg, now) {
                        w.st.drop(WireDrop::BadLength);
                    }
                }
                Some(_) => w.st.drop(WireDrop::ForgedToken),
                None => w.st.drop(WireDrop::UnknownEndpoint),
            },
            ConnIn::Ack(a) => match links.get_mut(&a.dst_vi) {
                Some(l) if l.connected => {
                    let out = l.tx.on_ack(a.ack(), now);
                    for _ in 0..out.completed {
                        l.inflight.pop_front();
                    }
                    if let Some(r) = out.retransmit {
                        let job = l.job.and_then(|j| all.get_mut(&j));
                        l.resend(r, w, job);
                    }
                }
                Some(_) => w.st.drop(WireDrop::ForgedToken),
                None => w.st.drop(WireDrop::UnknownEndpoint),
            },
            _ => {}
        }
    }
    for addr in std::mem::take(&mut remote.silent) {
        for l in links.values_mut() {
            if l.peer.addr == addr && l.dead.is_none() {
                l.dead = Some(false);
            }
        }
    }
    work
}

/// Move every link on: frames from the wire, deliveries, the outboxes,
/// timers and acks. Returns the work done.
pub(crate) fn poll(jobs: &mut Jobs, w: &mut WirePort, counters: &Counters) -> usize {
    let data = take_frames(jobs, w);
    if jobs.remote.links.is_empty() {
        // Frames to links that do not exist (any more).
        let stray = data.len();
        counters.engine(WireDrop::UnknownEndpoint.counter(), stray as u64);
        jobs.remote.silent.clear();
        return stray;
    }
    let now = w.clock_ns();
    let mut work = link_frames(jobs, data, w, now);
    let Jobs {
        jobs: all, remote, ..
    } = jobs;
    let Links { links, routes, .. } = remote;
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
            w.send_ack(
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
pub(crate) fn next_deadline(jobs: &Jobs, w: &WirePort) -> Option<Instant> {
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
