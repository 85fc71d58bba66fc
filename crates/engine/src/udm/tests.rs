//! The UDM part's tests: hostile divert entries, full buffers, nodes that
//! go, scribbling nodes, reserved ids, the sweep and idle nodes.

use super::*;

/// A job of 2 nodes, both joined (as set-up would do).
pub(super) fn job() -> (Jobs, u32) {
    let mut jobs = Jobs::default();
    let layout = UdmLayout::new(2, 4, 4096).unwrap();
    let id = jobs.create(0, layout, Duration::from_millis(1), 1).unwrap();
    let j = jobs.jobs.get_mut(&id).unwrap();
    for n in &mut j.nodes {
        n.state = UDM_NODE_JOINED;
    }
    (jobs, id)
}

pub(super) fn msg(dest: u32, nwords: u16, w0: u64) -> UdmMsg {
    let mut m = UdmMsg {
        peer: dest,
        nwords,
        ..UdmMsg::default()
    };
    m.words[0] = w0;
    m
}

/// Push `m` into node `s`'s divert ring as a client would.
pub(super) fn push(jobs: &Jobs, id: u32, s: usize, pos: u64, m: UdmMsg) {
    let j = &jobs.jobs[&id];
    let r = j.nodes[s].divert().unwrap();
    r.write(pos, m);
    r.set_head(pos + 1);
    ring(jobs, id, s);
}

/// Mark node `s` as having rung, as the client library does.
pub(super) fn ring(jobs: &Jobs, id: u32, s: usize) {
    jobs.jobs[&id]
        .header()
        .rang
        .fetch_or(1 << s, Ordering::AcqRel);
}

pub(super) fn counter(jobs: &Jobs, id: u32, r: usize, c: UdmCounter) -> u64 {
    jobs.jobs[&id].nodes[r].counters[c as usize]
}

#[test]
fn hostile_divert_entries_and_positions_are_counted_not_obeyed() {
    let (mut jobs, id) = job();
    push(&jobs, id, 0, 0, msg(7, 1, 0)); // no node 7
    push(&jobs, id, 0, 1, msg(1, 15, 0)); // too many words
    push(&jobs, id, 0, 2, msg(1, 1, 42)); // fine
    jobs.poll();
    assert_eq!(counter(&jobs, id, 0, UdmCounter::DropBadDest), 1);
    assert_eq!(counter(&jobs, id, 0, UdmCounter::DropBadLength), 1);
    assert_eq!(counter(&jobs, id, 1, UdmCounter::BufferedMsgs), 1);
    let j = &jobs.jobs[&id];
    let h = j.nodes[1].header().unwrap();
    assert_eq!(
        h.buf_head.load(Ordering::Acquire),
        16,
        "a record of one word"
    );
    let (m, w) = read_msg(j.nodes[1].buf.as_ref().unwrap(), 0);
    assert_eq!(
        (m.peer, m.nwords, w[0]),
        (0, 1, 42),
        "stamped with its source"
    );

    // An impossible head: ignored, counted once.
    let r = j.nodes[0].divert().unwrap();
    r.set_head(1 << 40);
    ring(&jobs, id, 0);
    jobs.poll();
    ring(&jobs, id, 0);
    jobs.poll();
    assert_eq!(counter(&jobs, id, 0, UdmCounter::BadPosition), 1);
    assert_eq!(counter(&jobs, id, 1, UdmCounter::BufferedMsgs), 1);

    // An impossible buffer tail (past the head): ignored.
    let j = &jobs.jobs[&id];
    j.nodes[1]
        .header()
        .unwrap()
        .buf_tail
        .store(99, Ordering::Release);
    jobs.jobs.get_mut(&id).unwrap().nodes[1].refresh_tail();
    assert_eq!(counter(&jobs, id, 1, UdmCounter::BadPosition), 1);
    assert_eq!(jobs.jobs[&id].nodes[1].buf_tail, 0);
}

#[test]
fn a_full_buffer_leaves_messages_in_the_senders_ring() {
    let (mut jobs, id) = job();
    // 4096 bytes: 34 records of 14 words (120 bytes). Push 40.
    for i in 0..40 {
        push(&jobs, id, 0, i, msg_n(1, 14, i * 100));
    }
    jobs.poll();
    assert_eq!(counter(&jobs, id, 1, UdmCounter::BufferedMsgs), 34);
    assert_eq!(counter(&jobs, id, 1, UdmCounter::BufferFull), 1);
    assert_eq!(jobs.jobs[&id].nodes[0].divert_tail, 34);
    // The node takes 10: the rest go in, after a pad at the end, from
    // the buffer's start, in order.
    let mut rd = Reader::default();
    for i in 0..10u64 {
        assert_eq!(
            rd.take(&jobs, id, 1),
            Some((0, (0..14).map(|k| i * 100 + k).collect()))
        );
    }
    rd.tell(&jobs, id, 1);
    jobs.poll();
    assert_eq!(counter(&jobs, id, 1, UdmCounter::BufferedMsgs), 40);
    let h = jobs.jobs[&id].nodes[1].header().unwrap();
    assert_eq!(
        h.buf_head.load(Ordering::Acquire),
        4096 + 6 * 120,
        "a pad of 16 bytes"
    );
    for i in 10..40u64 {
        let (src, w) = rd.take(&jobs, id, 1).unwrap();
        assert_eq!((src, w[0], w[13]), (0, i * 100, i * 100 + 13));
    }
    assert_eq!(rd.take(&jobs, id, 1), None);
    // A node gone: what is sent to it is dropped and counted; its
    // buffer, 30 messages in it, is handed over to be given back off
    // the loop, not emptied here.
    jobs.jobs.get_mut(&id).unwrap().node_gone(1);
    let j = &jobs.jobs[&id];
    assert!(j.nodes[1].buf.is_none());
    assert_eq!(j.released.len(), 1);
    let (_, w) = read_msg(&j.released[0], 5 * 120);
    assert_eq!(w[0], 3900, "its pages still there");
    push(&jobs, id, 0, 40, msg(1, 1, 0));
    jobs.poll();
    assert!(jobs.jobs[&id].released.is_empty());
    assert_eq!(jobs.released.len(), 1, "gathered for the set-up thread");
    assert_eq!(counter(&jobs, id, 0, UdmCounter::DropDestGone), 1);
    let line = jobs.jobs[&id].line(1);
    assert_ne!(line.mode.load(Ordering::Acquire) & UDM_MODE_GONE, 0);
}

#[test]
fn what_a_node_injected_before_it_went_is_still_delivered_and_nothing_after() {
    let (mut jobs, id) = job();
    // 40 messages, more than node 1's buffer holds (34 of 14 words): the
    // rest wait in node 0's divert ring when node 0 leaves.
    for i in 0..40 {
        push(&jobs, id, 0, i, msg_n(1, 14, i));
    }
    jobs.jobs.get_mut(&id).unwrap().node_gone(0);
    // Written after it went (a process that left without exiting):
    // never delivered.
    push(&jobs, id, 0, 40, msg(1, 1, 99));
    jobs.poll();
    assert_eq!(counter(&jobs, id, 1, UdmCounter::BufferedMsgs), 34);
    assert!(jobs.jobs[&id].nodes[0].seg.is_some(), "still draining");
    let mut rd = Reader::default();
    for i in 0..34 {
        assert_eq!(rd.take(&jobs, id, 1).map(|(s, w)| (s, w[0])), Some((0, i)));
    }
    rd.tell(&jobs, id, 1);
    jobs.poll();
    assert_eq!(counter(&jobs, id, 1, UdmCounter::BufferedMsgs), 40);
    for i in 34..40 {
        assert_eq!(rd.take(&jobs, id, 1).map(|(s, w)| (s, w[0])), Some((0, i)));
    }
    assert_eq!(rd.take(&jobs, id, 1), None);
    let j = &jobs.jobs[&id];
    assert!(j.nodes[0].seg.is_none(), "drained: the segment is released");
    jobs.poll();
    assert_eq!(counter(&jobs, id, 1, UdmCounter::BufferedMsgs), 40);
}

/// A node scribbling over its divert ring, its positions and the job's
/// node lines does not make the engine panic, and does not stop an
/// honest node's messages from arriving whole and in order.
#[test]
fn a_scribbling_node_does_not_disturb_an_honest_pair() {
    let mut jobs = Jobs::default();
    let layout = UdmLayout::new(3, 4, 8192).unwrap();
    let id = jobs.create(0, layout, Duration::from_millis(1), 1).unwrap();
    for n in &mut jobs.jobs.get_mut(&id).unwrap().nodes {
        n.state = UDM_NODE_JOINED;
    }
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut sent, mut got, mut honest_head) = (0u64, 0u64, 0u64);
    let mut rd = Reader::default();
    for _ in 0..20_000 {
        let j = &jobs.jobs[&id];
        // Node 0: anything at all.
        let hostile = j.nodes[0].divert().unwrap();
        match rnd() % 6 {
            0 => hostile.set_head(rnd() % 200),
            1 => hostile.set_head(rnd()),
            2 => {
                let v = rnd();
                let mut m = msg((v % 5) as u32, (v >> 8) as u16 % 20, v);
                m.handler = (v >> 32) as u16;
                hostile.write(rnd(), m);
            }
            3 => j.nodes[1]
                .header()
                .unwrap()
                .buf_tail
                .store(rnd() % 100, Ordering::Release),
            4 => j
                .line((rnd() % 3) as u32)
                .mode
                .store(rnd(), Ordering::Release),
            _ => {}
        }
        // Whatever it did, it (and for all it knows, the others) rang.
        ring(&jobs, id, (rnd() % 3) as usize);
        // Node 1 sends to node 2 while its ring has room.
        let honest = j.nodes[1].divert().unwrap();
        if honest_head - honest.tail() < UDM_DIVERT_CAP as u64 {
            honest.write(honest_head, msg(2, 2, sent));
            honest_head += 1;
            honest.set_head(honest_head);
            ring(&jobs, id, 1);
            sent += 1;
        }
        jobs.poll();
        // Node 2 takes what came, keeping node 1's.
        while let Some((src, w)) = rd.take(&jobs, id, 2) {
            if src == 1 {
                assert_eq!((w.len(), w[0]), (2, got), "in order, whole");
                got += 1;
            }
        }
        rd.tell(&jobs, id, 2);
    }
    assert!(
        got > 10_000 && sent - got <= UDM_DIVERT_CAP as u64 + 64,
        "sent {sent}, got {got}"
    );
    let c = &jobs.jobs[&id].nodes[0].counters;
    assert!(c[UdmCounter::BadPosition as usize] > 0, "{c:?}");
    assert!(c[UdmCounter::DropBadDest as usize] + c[UdmCounter::DropBadLength as usize] > 0);
}

/// An id reserved while a job's memory is made is not given to
/// another job; memory that does not fit its layout is refused (and
/// handed back to be unmapped).
#[test]
fn a_reserved_id_is_kept_and_memory_must_fit() {
    let mut jobs = Jobs::default();
    let layout = UdmLayout::new(2, 4, 4096).unwrap();
    let t = Duration::from_millis(1);
    let r = jobs.reserve();
    // The next pick would be r again.
    jobs.next_id = r - 1;
    let other = jobs.create(0, layout, t, 1).unwrap();
    assert_ne!(other, r);
    let wrong = UdmLayout::new(3, 4, 4096).unwrap();
    let mem = JobMemory::make(&wrong, r, 1).unwrap();
    assert!(jobs.insert(r, 0, layout, t, mem).is_err());
    assert!(!jobs.jobs.contains_key(&r));
    let r = jobs.reserve();
    let mem = JobMemory::make(&layout, r, 1).unwrap();
    assert!(jobs.insert(r, 7, layout, t, mem).is_ok());
    assert_eq!(jobs.jobs[&r].owner, 7);
    assert_eq!(jobs.jobs[&r].header().job_id, r);
    // A retired job's segments: the job's, and each node's two.
    let j = jobs.jobs.remove(&r).unwrap();
    assert_eq!(j.into_segments().len(), 1 + 2 * 2);
}

/// A sender held by a full destination is let go when that
/// destination goes, without ringing again: its message for it is
/// dropped, the next (for another node) delivered.
#[test]
fn a_sender_held_by_a_node_that_goes_is_let_go() {
    let mut jobs = Jobs::default();
    let layout = UdmLayout::new(3, 4, 4096).unwrap();
    let id = jobs.create(0, layout, Duration::from_millis(1), 1).unwrap();
    for n in &mut jobs.jobs.get_mut(&id).unwrap().nodes {
        n.state = UDM_NODE_JOINED;
    }
    for i in 0..35 {
        push(&jobs, id, 0, i, msg(1, 14, i));
    }
    push(&jobs, id, 0, 35, msg(2, 1, 7));
    jobs.poll();
    assert_eq!(counter(&jobs, id, 1, UdmCounter::BufferedMsgs), 34);
    assert_eq!(counter(&jobs, id, 2, UdmCounter::BufferedMsgs), 0);
    jobs.poll();
    assert_eq!(counter(&jobs, id, 2, UdmCounter::BufferedMsgs), 0, "held");
    jobs.jobs.get_mut(&id).unwrap().node_gone(1);
    jobs.poll();
    assert_eq!(counter(&jobs, id, 0, UdmCounter::DropDestGone), 1);
    assert_eq!(counter(&jobs, id, 2, UdmCounter::BufferedMsgs), 1);
}

/// A message handed to the engine whose ring was lost (the rang word
/// cleared by a node of the job, or a ring the engine swapped away
/// before the message's head was visible to it) is not left in its
/// divert ring for good: the once-a-second sweep finds it and the
/// next turn delivers it.
#[test]
fn a_message_whose_ring_was_lost_is_taken_by_the_sweep() {
    let mut jobs = Jobs::default();
    let layout = UdmLayout::new(2, 4, 4096).unwrap();
    let id = jobs.create(0, layout, Duration::from_millis(1), 1).unwrap();
    let now = Instant::now();
    let j = jobs.jobs.get_mut(&id).unwrap();
    for r in 0..2 {
        j.nodes[r as usize].state = UDM_NODE_JOINED;
        j.watch(r, now);
    }
    let j = &jobs.jobs[&id];
    let r = j.nodes[0].divert().unwrap();
    r.write(0, msg(1, 1, 7));
    r.set_head(1);
    for _ in 0..100 {
        jobs.poll();
    }
    assert_eq!(counter(&jobs, id, 1, UdmCounter::BufferedMsgs), 0);
    // The sweep's second has come.
    jobs.sweep_at = Some(Instant::now());
    for _ in 0..3 {
        jobs.poll();
    }
    assert_eq!(counter(&jobs, id, 1, UdmCounter::BufferedMsgs), 1);
}

/// The engine's UDM work per turn follows what rang, not the nodes
/// that exist: beside 4 jobs of 64 joined nodes that do nothing, a
/// turn visits none of them; a node that rings is visited alone; the
/// atomicity-timeout looks of many nodes at once are spread over
/// turns by the budget.
#[test]
fn idle_nodes_cost_a_turn_nothing() {
    let mut jobs = Jobs::default();
    let layout = UdmLayout::new(64, 8, 4096).unwrap();
    let t = Duration::from_millis(2);
    let ids: Vec<u32> = (0..4)
        .map(|_| jobs.create(0, layout, t, 1).unwrap())
        .collect();
    let now = Instant::now();
    for id in &ids {
        let j = jobs.jobs.get_mut(id).unwrap();
        for r in 0..64 {
            j.nodes[r as usize].state = UDM_NODE_JOINED;
            j.watch(r, now);
        }
    }
    // The first looks after the joins, within the budget a turn.
    let mut turns = 0;
    while jobs.jobs.values().any(|j| j.watch != 0) {
        let before = jobs.visits;
        jobs.poll();
        // 64 rings read for a node with nothing waiting: two a turn.
        assert!(jobs.visits - before <= 2, "{}", jobs.visits - before);
        turns += 1;
        assert!(turns < 1000);
    }
    assert_eq!(jobs.next_deadline().map(|d| d > Instant::now()), Some(true));
    let before = jobs.visits;
    for _ in 0..10_000 {
        jobs.poll();
    }
    assert_eq!(jobs.visits - before, 0, "idle nodes visited");
    // One message handed to the engine: its sender alone is visited
    // (then judged: it is in the fast case, not atomic, so let be).
    push(&jobs, ids[2], 5, 0, msg(6, 1, 42));
    let before = jobs.visits;
    jobs.poll();
    assert_eq!(jobs.visits - before, 2, "drained, then judged");
    assert_eq!(counter(&jobs, ids[2], 6, UdmCounter::BufferedMsgs), 1);
    let before = jobs.visits;
    for _ in 0..1000 {
        jobs.poll();
    }
    assert_eq!(jobs.visits - before, 0);
}

/// The record at byte `off` of a virtual buffer: its header and words.
pub(super) fn read_msg(buf: &Segment, off: u64) -> (UdmHeader, Vec<u64>) {
    shm::buffered(buf, off as usize).unwrap()
}

/// Bytes of the largest message's record.
pub(super) const REC_MAX: u64 = udm_record_bytes(UDM_MAX_WORDS);

/// A virtual buffer's reader, as the client library reads it: from its
/// tail, past pad records, to the head.
#[derive(Default)]
pub(super) struct Reader {
    pub tail: u64,
    /// Pad records passed.
    pub pads: u64,
}

impl Reader {
    /// The next message of node `r` (its source, words), if any, past
    /// pads: its tail moves past it (the node's header is not told).
    pub(super) fn take(&mut self, jobs: &Jobs, id: u32, r: usize) -> Option<(u32, Vec<u64>)> {
        let n = &jobs.jobs[&id].nodes[r];
        let size = jobs.jobs[&id].layout.buffer_size;
        let h = n.header().unwrap();
        let head = h.buf_head.load(Ordering::Acquire);
        let base = h.buf_base.load(Ordering::Relaxed);
        while self.tail < head {
            let off = (self.tail - base) % size;
            let (hdr, words) = read_msg(n.buf.as_ref().unwrap(), off);
            if hdr.nwords == UDM_PAD {
                assert!(
                    size - off < REC_MAX,
                    "a pad only where a record may not fit"
                );
                self.tail += size - off;
                self.pads += 1;
                continue;
            }
            assert_eq!(hdr.nwords as usize, words.len());
            self.tail += udm_record_bytes(words.len());
            return Some((hdr.peer, words));
        }
        None
    }

    /// Tell the engine our tail, as the library does.
    pub(super) fn tell(&self, jobs: &Jobs, id: u32, r: usize) {
        let h = jobs.jobs[&id].nodes[r].header().unwrap();
        h.buf_tail.store(self.tail, Ordering::Release);
        ring(jobs, id, r);
    }
}

/// A message to `dest` of `nwords` words, word `i` being `w0 + i`.
pub(super) fn msg_n(dest: u32, nwords: u16, w0: u64) -> UdmMsg {
    let mut m = msg(dest, nwords, w0);
    for (i, w) in m.words.iter_mut().enumerate() {
        *w = w0 + i as u64;
    }
    m
}
