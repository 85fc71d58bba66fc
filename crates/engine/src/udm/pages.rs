//! The pages of a UDM node's virtual buffer (the UDM paper's virtual
//! buffering), and where its records go (each of its message's size, a
//! pad record before one that does not fit at the end): the buffer
//! starts again at its first byte whenever the
//! engine finds it empty (`UdmNodeHeader::buf_base`, agreed with the
//! node), so a buffer used again writes the pages it kept; the engine
//! gives them back only once the buffer has been idle a while
//! ([`KeptPages`] holds the bookkeeping).

use super::*;

/// How long a node's virtual buffer must see no message written or taken
/// before the engine gives its pages back (until then it keeps them, and a
/// buffer used again writes them again).
pub(super) const PAGES_IDLE: Duration = Duration::from_millis(100);
/// A buffer idle while it holds messages is looked at again (for pages
/// its reader has left behind meanwhile, which it tells the engine of
/// without waking it) after [`PAGES_IDLE`], then less and less often while
/// its reader does not move, at least this often.
const PAGES_IDLE_MAX: Duration = Duration::from_millis(1600);

impl UdmNode {
    pub(super) fn pages_in_use(&self) -> u64 {
        self.kept.in_use()
    }

    /// The buffer has been idle: give back every page that holds no
    /// message (every page once it is empty); see [`KeptPages::give_back`].
    pub(super) fn return_pages(&mut self) {
        self.refresh_tail();
        let Some(buf) = self.buf.as_ref() else {
            return;
        };
        let rel = |p: u64| p.wrapping_sub(self.buf_base);
        let n = self
            .kept
            .give_back(buf, rel(self.buf_head), rel(self.buf_tail));
        if n > 0 {
            self.count(UdmCounter::PagesReturned, n);
            self.set(UdmCounter::BufferPages, self.pages_in_use());
        }
    }

    /// Where the next record of `rec` bytes goes in a buffer of `size`
    /// bytes (position `buf_head`): its byte offset, or None if the buffer
    /// has no room for it now. Once a turn, a buffer found empty starts
    /// again at its first byte (the node is told by `buf_base`, stored
    /// before the head that follows): a buffer used again writes the pages
    /// it kept instead of taking fresh ones. A record that does not fit
    /// before the buffer's end goes at its start, after a pad record that
    /// fills the rest (the head moves past it here; the caller moves it
    /// past the record once written).
    pub(super) fn reserve(&mut self, size: u64, rec: u64) -> Option<usize> {
        if !self.base_checked && self.buf_head != self.buf_base {
            self.base_checked = true;
            if self.buf_tail != self.buf_head {
                self.refresh_tail();
            }
            if self.buf_tail == self.buf_head {
                let back = self.buf.as_ref().map_or(0, |b| self.kept.restart(b));
                if back > 0 {
                    self.count(UdmCounter::PagesReturned, back);
                }
                self.buf_base = self.buf_head;
                if let Some(h) = self.header() {
                    h.buf_base.store(self.buf_base, Ordering::Relaxed);
                }
            }
        }
        // A power of two (the layout's check): a mask, not a division.
        let size = size.max(PAGE_BYTES).next_power_of_two();
        let mask = size - 1;
        let off = self.buf_head.wrapping_sub(self.buf_base) & mask;
        let pad = if size - off < rec { size - off } else { 0 };
        if self.buf_head - self.buf_tail + pad + rec > size {
            self.refresh_tail();
            if self.buf_head - self.buf_tail + pad + rec > size {
                return None;
            }
        }
        let file_len = self.buf.as_ref().map_or(0, |b| b.len());
        if pad > 0 {
            self.kept
                .writing(file_len, self.buf_head.wrapping_sub(self.buf_base));
            if let Some(b) = self.buf.as_ref() {
                shm::buffer_pad(b, off as usize);
            }
            self.buf_head += pad;
        }
        let rel = self.buf_head.wrapping_sub(self.buf_base);
        self.kept.writing(file_len, rel);
        self.kept.writing(file_len, rel + rec - 1);
        Some((rel & mask) as usize)
    }
}

impl Job {
    /// Node `d`'s buffer was used at `now`: its pages stay until it has
    /// been idle for [`PAGES_IDLE`].
    pub(super) fn keep_pages(&mut self, d: u32, now: Instant) {
        let node = &mut self.nodes[d as usize];
        if node.buf.is_none() || node.pages_in_use() == 0 {
            return;
        }
        let at = now + PAGES_IDLE;
        node.idle_at = Some(at);
        node.pages_every = PAGES_IDLE;
        self.kept |= 1 << d;
        self.pages_due = Some(self.pages_due.map_or(at, |p| p.min(at)));
    }

    /// Give back the pages of the buffers idle since their deadline
    /// (those holding no message: every page of an empty buffer).
    pub(super) fn idle_pages(&mut self, now: Instant) {
        let mut next: Option<Instant> = None;
        for d in bits(self.kept) {
            let node = &mut self.nodes[d as usize];
            match node.idle_at {
                Some(at) if at > now => {
                    next = Some(next.map_or(at, |n| n.min(at)));
                    continue;
                }
                Some(_) => {
                    let before = node.buf_tail;
                    node.return_pages();
                    if node.pages_in_use() > 0 {
                        // It holds messages: look again, sooner if its
                        // reader moved.
                        node.pages_every = if node.buf_tail != before {
                            PAGES_IDLE
                        } else {
                            (node.pages_every * 2).min(PAGES_IDLE_MAX)
                        };
                        let at = now + node.pages_every;
                        node.idle_at = Some(at);
                        next = Some(next.map_or(at, |n| n.min(at)));
                        continue;
                    }
                }
                None => {}
            }
            node.idle_at = None;
            self.kept &= !(1 << d);
        }
        self.pages_due = next;
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{counter, msg, msg_n, push, read_msg, ring, Reader, REC_MAX};

    /// Bytes of node `rank`'s buffer the memory has pages for.
    fn allocated(jobs: &Jobs, id: u32, rank: usize) -> u64 {
        jobs.jobs[&id].nodes[rank]
            .buf
            .as_ref()
            .unwrap()
            .allocated_bytes()
            .unwrap()
    }
    use super::*;

    /// The node's buffer head, base and the pages the engine counts.
    fn positions(jobs: &Jobs, id: u32, r: usize) -> (u64, u64, u64) {
        let h = jobs.jobs[&id].nodes[r].header().unwrap();
        (
            h.buf_head.load(Ordering::Acquire),
            h.buf_base.load(Ordering::Relaxed),
            counter(jobs, id, r, UdmCounter::BufferPages),
        )
    }

    /// Node `r` takes everything up to the head (as the library does:
    /// its tail, then a ring).
    fn take_all(jobs: &Jobs, id: u32, r: usize) -> u64 {
        let h = jobs.jobs[&id].nodes[r].header().unwrap();
        let head = h.buf_head.load(Ordering::Acquire);
        h.buf_tail.store(head, Ordering::Release);
        ring(jobs, id, r);
        head
    }

    /// A buffer that empties starts again at its first page: the pages it
    /// used stay and are written again, none is given back or taken anew
    /// while it is in use; once it has been idle a while, its pages go
    /// back.
    #[test]
    fn a_buffer_that_empties_starts_again_at_its_first_page() {
        let mut jobs = Jobs::default();
        // 64 KiB: 16 pages.
        let layout = UdmLayout::new(2, 4, 64 << 10).unwrap();
        let id = jobs.create(0, layout, Duration::from_millis(1), 1).unwrap();
        for n in &mut jobs.jobs.get_mut(&id).unwrap().nodes {
            n.state = UDM_NODE_JOINED;
        }
        let mut pos = 0;
        let mut sent = 0u64;
        let mut rd = Reader::default();
        for round in 0..20u64 {
            // 100 messages of 14 words (12 000 bytes, 3 pages) in, each
            // round.
            for _ in 0..100 {
                push(&jobs, id, 0, pos, msg_n(1, 14, sent));
                pos += 1;
                sent += 1;
                if pos % 64 == 0 {
                    jobs.poll();
                }
            }
            jobs.poll();
            let (head, base, pages) = positions(&jobs, id, 1);
            assert_eq!(head, sent * REC_MAX);
            assert_eq!(
                base,
                round * 100 * REC_MAX,
                "round {round}: started at the first byte"
            );
            assert_eq!(pages, 3, "round {round}");
            for p in round * 100..sent {
                let (src, w) = rd.take(&jobs, id, 1).unwrap();
                assert_eq!((src, w[0]), (0, p));
            }
            assert_eq!(rd.take(&jobs, id, 1), None);
            rd.tell(&jobs, id, 1);
            jobs.poll();
        }
        assert_eq!(counter(&jobs, id, 1, UdmCounter::PagesReturned), 0);
        assert_eq!(counter(&jobs, id, 1, UdmCounter::BufferPagesMax), 3);
        assert_eq!(allocated(&jobs, id, 1), 3 * 4096);
        // Idle: not before PAGES_IDLE, then every page back.
        let now = Instant::now();
        let j = jobs.jobs.get_mut(&id).unwrap();
        let mut t = Turn::default();
        j.poll(now + PAGES_IDLE / 2, &mut t);
        assert_eq!(counter(&jobs, id, 1, UdmCounter::BufferPages), 3);
        let j = jobs.jobs.get_mut(&id).unwrap();
        j.poll(now + PAGES_IDLE + Duration::from_millis(1), &mut t);
        assert_eq!(counter(&jobs, id, 1, UdmCounter::BufferPages), 0);
        assert_eq!(counter(&jobs, id, 1, UdmCounter::PagesReturned), 3);
        assert_eq!(allocated(&jobs, id, 1), 0);
        assert!(jobs.jobs[&id].pages_due.is_none());
    }

    /// A buffer idle while it holds messages gives back the pages behind
    /// its reader and keeps those holding messages.
    #[test]
    fn an_idle_buffer_keeps_the_pages_that_hold_messages() {
        let mut jobs = Jobs::default();
        let layout = UdmLayout::new(2, 4, 64 << 10).unwrap();
        let id = jobs.create(0, layout, Duration::from_millis(1), 1).unwrap();
        for n in &mut jobs.jobs.get_mut(&id).unwrap().nodes {
            n.state = UDM_NODE_JOINED;
        }
        // 200 messages of 120 bytes: 24 000 bytes, pages 0 to 5.
        for p in 0..200 {
            push(&jobs, id, 0, p, msg_n(1, 14, p));
            if p % 64 == 63 {
                jobs.poll();
            }
        }
        jobs.poll();
        assert_eq!(positions(&jobs, id, 1), (200 * REC_MAX, 0, 6));
        // 100 taken (12 000 bytes): pages 0 and 1 hold none.
        let h = jobs.jobs[&id].nodes[1].header().unwrap();
        h.buf_tail.store(100 * REC_MAX, Ordering::Release);
        ring(&jobs, id, 1);
        jobs.poll();
        let later = Instant::now() + PAGES_IDLE + Duration::from_millis(1);
        jobs.jobs
            .get_mut(&id)
            .unwrap()
            .poll(later, &mut Turn::default());
        assert_eq!(counter(&jobs, id, 1, UdmCounter::BufferPages), 4);
        assert_eq!(counter(&jobs, id, 1, UdmCounter::PagesReturned), 2);
        // More come: written after the last, in the pages kept and new
        // (36 000 bytes: pages 2 to 8).
        for p in 200..300 {
            push(&jobs, id, 0, p, msg_n(1, 14, p));
            if p % 64 == 63 {
                jobs.poll();
            }
        }
        jobs.poll();
        let mut rd = Reader {
            tail: 100 * REC_MAX,
            pads: 0,
        };
        for p in 100..300u64 {
            assert_eq!(rd.take(&jobs, id, 1).map(|(_, w)| w[0]), Some(p));
        }
        assert_eq!(counter(&jobs, id, 1, UdmCounter::BufferPages), 7);
        // Emptied: the next message starts again at the first byte, the
        // pages not at the start given back first.
        take_all(&jobs, id, 1);
        jobs.poll();
        push(&jobs, id, 0, 300, msg(1, 1, 300));
        jobs.poll();
        let end = 300 * REC_MAX;
        assert_eq!(positions(&jobs, id, 1), (end + 16, end, 1));
        assert_eq!(
            read_msg(jobs.jobs[&id].nodes[1].buf.as_ref().unwrap(), 0).1,
            vec![300]
        );
    }

    /// Nothing is lost or reordered while the engine writes messages of
    /// every size into a buffer that wraps round its file (a message that
    /// does not fit at the end goes at the start, after a pad), is emptied
    /// and starts again at its first page, and is read from concurrently
    /// (random amounts each way).
    #[test]
    fn nothing_is_lost_when_the_buffer_wraps_while_the_engine_writes() {
        let mut jobs = Jobs::default();
        // 8 KiB: 2 pages.
        let layout = UdmLayout::new(2, 4, 8192).unwrap();
        let id = jobs.create(0, layout, Duration::from_millis(1), 1).unwrap();
        for n in &mut jobs.jobs.get_mut(&id).unwrap().nodes {
            n.state = UDM_NODE_JOINED;
        }
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut sent, mut got) = (0u64, 0u64);
        let mut rd = Reader::default();
        let (mut wraps, mut restarts, mut last_base, mut told) = (0, 0, 0, 0);
        // What was sent, by sequence: its number of words.
        let mut sizes = std::collections::VecDeque::new();
        for _ in 0..20_000 {
            let j = &jobs.jobs[&id];
            let r = j.nodes[0].divert().unwrap();
            for _ in 0..rnd() % 40 {
                if sent - r.tail() >= UDM_DIVERT_CAP as u64 {
                    break;
                }
                let n = (rnd() % 15) as u16;
                r.write(sent, msg_n(1, n, sent << 4));
                r.set_head(sent + 1);
                sizes.push_back(n as usize);
                sent += 1;
            }
            ring(&jobs, id, 0);
            jobs.poll();
            let h = jobs.jobs[&id].nodes[1].header().unwrap();
            let head = h.buf_head.load(Ordering::Acquire);
            let base = h.buf_base.load(Ordering::Relaxed);
            if base != last_base {
                assert_eq!(told, base, "moved only with the buffer empty");
                restarts += 1;
                last_base = base;
            }
            if head - base > 8192 {
                wraps += 1;
            }
            let take = if rnd() % 8 == 0 { u64::MAX } else { rnd() % 48 };
            for _ in 0..take {
                let Some((src, w)) = rd.take(&jobs, id, 1) else {
                    break;
                };
                let n = sizes.pop_front().unwrap();
                let want: Vec<u64> = (0..n as u64).map(|k| (got << 4) + k).collect();
                assert_eq!((src, w), (0, want), "once, in order, whole");
                got += 1;
            }
            rd.tell(&jobs, id, 1);
            told = rd.tail;
            assert!(counter(&jobs, id, 1, UdmCounter::BufferPages) <= 2);
        }
        assert!(got > 100_000, "{got}");
        assert!(
            wraps > 100 && restarts > 100 && rd.pads > 100,
            "wraps {wraps}, restarts {restarts}, pads {}",
            rd.pads
        );
        assert_eq!(counter(&jobs, id, 1, UdmCounter::BadPosition), 0);
    }
}
