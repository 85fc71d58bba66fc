//! The receiving side of a VI the engine carries: an accepted message
//! scattered into the next posted receive, or held (within the VI's held
//! budget) until one is posted; messages and fragments that came after a
//! gap kept and offered again in order; what the receiver holds past the
//! message it expects, for its acknowledgements (see [`super`]).

use super::*;

impl EngineVi {
    /// Scatter `msg` into the next posted receive; false if the VI broke.
    pub(super) fn place(
        &mut self,
        msg: &[u8],
        regions: &std::collections::HashMap<u32, Region>,
    ) -> bool {
        let Some(d) = self.recv_posted.pop_front() else {
            return true;
        };
        let mut pieces = [(std::ptr::null_mut::<u8>(), 0usize); VI_MAX_SEGMENTS];
        let Some((n, total)) = self.pieces(&d, regions, &mut pieces) else {
            self.count(ViCounter::BadDescriptors, 1);
            self.push_compl(false, d.id, Err(ViError::BadDescriptor));
            self.break_with(ViError::BadDescriptor, true);
            return false;
        };
        if msg.len() > total {
            self.push_compl(false, d.id, Err(ViError::TooLong));
            if self.reliability != Reliability::Unreliable {
                self.break_with(ViError::TooLong, true);
                return false;
            }
            return true;
        }
        let mut at = 0;
        for &(p, len) in &pieces[..n] {
            let k = len.min(msg.len() - at);
            // SAFETY: the piece has `len` writable bytes in a region
            // mapping (checked); k <= len and at + k <= msg.len().
            unsafe { std::ptr::copy_nonoverlapping(msg.as_ptr().add(at), p, k) };
            at += k;
        }
        self.count(ViCounter::RxMsgs, 1);
        self.count(ViCounter::RxBytes, msg.len() as u64);
        self.push_compl(false, d.id, Ok(msg.len() as u32));
        true
    }

    /// Bytes now kept for the owner (held, ahead, in reassembly).
    pub(super) fn keep(&mut self, n: u64) {
        self.kept += n;
        self.set_level(ViCounter::KeptBytes, self.kept);
    }

    /// Bytes no longer kept.
    pub(super) fn unkeep(&mut self, n: usize) {
        self.kept = self.kept.saturating_sub(n as u64);
        self.set_level(ViCounter::KeptBytes, self.kept);
    }

    /// Forget what arrived past a gap (whole or in part).
    pub(super) fn unkeep_all_ahead(&mut self) {
        let n: usize = self.ahead.iter().map(|(_, m)| m.len()).sum::<usize>()
            + self.partial.iter().map(|(_, b)| b.bytes()).sum::<usize>();
        self.ahead.clear();
        self.partial.clear();
        self.unkeep(n);
    }

    /// Kept past a gap, whole or in part: the acks say what (a [`Sack`]).
    pub(super) fn keeps_ahead(&self) -> bool {
        !self.ahead.is_empty() || !self.partial.is_empty()
    }

    /// An accepted message could not go straight into a receive: it would
    /// be held.
    pub(super) fn must_hold(&self) -> bool {
        !self.held.is_empty()
            || (self.recv_posted.is_empty()
                && !(self.rq.head() != self.rq_tail && self.recv_room()))
    }

    /// Make room for `n` more bytes in the budget, by forgetting what was
    /// kept past a gap after `seq` (the latest first; the sender resends
    /// it, the acks no longer saying it is here) and, unreliable, before
    /// it. False if there is still no room.
    pub(super) fn make_room(&mut self, n: u64, seq: u32) -> bool {
        let unreliable = self.reliability == Reliability::Unreliable;
        while self.kept + n > self.held_budget {
            let later = |s: u32| reliable::seq_lt(seq, s) || (unreliable && s != seq);
            let a = self
                .ahead
                .iter()
                .enumerate()
                .filter(|(_, (s, _))| later(*s))
                .max_by_key(|(_, (s, _))| s.wrapping_sub(seq))
                .map(|(i, (s, _))| (i, *s));
            let p = self
                .partial
                .iter()
                .enumerate()
                .filter(|(_, (s, _))| later(*s))
                .max_by_key(|(_, (s, _))| s.wrapping_sub(seq))
                .map(|(i, (s, _))| (i, *s));
            let freed = match (a, p) {
                (Some((i, sa)), Some((_, sp))) if sa.wrapping_sub(seq) >= sp.wrapping_sub(seq) => {
                    self.ahead.swap_remove(i).1.len()
                }
                (_, Some((j, _))) => self.partial.swap_remove(j).1.bytes(),
                (Some((i, _)), None) => self.ahead.swap_remove(i).1.len(),
                (None, None) => return false,
            };
            self.unkeep(freed);
        }
        true
    }

    /// Reopen a window closed for want of budget once half of it is free
    /// again (or nothing is held).
    pub(super) fn maybe_reopen(&mut self, now_ns: u64) {
        if self.rx.is_closed() && (self.held.is_empty() || self.kept <= self.held_budget / 2) {
            self.rx.reopen(now_ns);
        }
    }

    /// What the receiver keeps past the message it expects, for its acks
    /// (reliable levels, when it keeps anything).
    pub(crate) fn sack(&self) -> Option<Sack> {
        if self.reliability == Reliability::Unreliable
            || !(self.keeps_ahead() || self.rx.is_closed())
        {
            return None;
        }
        let e = self.rx.expected();
        let mut k = Sack {
            closed: self.rx.is_closed(),
            ..Sack::default()
        };
        for (s, _) in &self.ahead {
            let i = s.wrapping_sub(e).wrapping_sub(1);
            if i < 64 {
                k.ahead |= 1 << i;
            }
        }
        if let Some((_, b)) = self.partial.iter().find(|(s, _)| *s == e) {
            k.frag_base = b.first_missing();
            k.frags = b.held_from::<SACK_FRAG_WORDS>(k.frag_base);
        }
        Some(k)
    }

    /// A fragment of data message `seq` (one of several) arrived from the
    /// peer: kept until the message is complete (inside the window, and
    /// within the budget), then taken as a whole message.
    pub(crate) fn arrive_frag(
        &mut self,
        seq: u32,
        f: &FragIn,
        regions: &std::collections::HashMap<u32, Region>,
        now_ns: u64,
    ) {
        if self.state != 0 || self.draining.is_some() {
            return;
        }
        let reliable = self.reliability != Reliability::Unreliable;
        let expected = self.rx.expected();
        let past = seq.wrapping_sub(expected) >= self.rx.room();
        if reliable::seq_lt(seq, expected) || (reliable && past) {
            // Older than expected, or past the window: judged (and acked)
            // as the whole message would be.
            match self.rx.on_data(seq, now_ns) {
                DataVerdict::Duplicate => {
                    // The message once (by its first fragment), each
                    // fragment besides.
                    self.count(ViCounter::DuplicateFragments, 1);
                    if f.index == 0 {
                        self.count(ViCounter::Duplicates, 1);
                    }
                }
                DataVerdict::OverWindow if f.index == 0 => {
                    self.count(ViCounter::OverWindow, 1);
                }
                _ => {}
            }
            return;
        }
        if self.ahead.iter().any(|(s, _)| *s == seq) {
            // Already whole here: the sender resends it, the ack (soon)
            // says it need not.
            self.count(ViCounter::DuplicateFragments, 1);
            self.rx.ack_soon(now_ns, false);
            return;
        }
        if f.msg_len as usize > VI_MAX_TRANSFER {
            return self.count(ViCounter::BadFragments, 1);
        }
        let i = match self.partial.iter().position(|(s, _)| *s == seq) {
            Some(i) => i,
            None => {
                if self.ahead.len() + self.partial.len() >= AHEAD_MAX {
                    if reliable {
                        return self.count(ViCounter::OverWindow, 1);
                    }
                    // Unreliable: the oldest message in reassembly goes.
                    if let Some(j) =
                        (0..self.partial.len()).max_by_key(|&j| seq.wrapping_sub(self.partial[j].0))
                    {
                        let n = self.partial.swap_remove(j).1.bytes();
                        self.unkeep(n);
                    }
                }
                let need = FragBuf::bytes_for(f) as u64;
                if !self.make_room(need, seq) {
                    self.count(ViCounter::BudgetRefused, 1);
                    if reliable && seq == expected {
                        // What is held fills the budget: the sender waits
                        // until the owner takes some of it.
                        self.rx.close(now_ns);
                    }
                    return;
                }
                self.keep(need);
                self.partial.push((seq, FragBuf::new(f)));
                self.partial.len() - 1
            }
        };
        match self.partial[i].1.add(f) {
            Ok(true) => {
                let (_, b) = self.partial.swap_remove(i);
                self.unkeep(b.bytes());
                let msg = b.into_vec();
                self.arrive(seq, &msg, regions, now_ns);
            }
            Ok(false) => {
                // A hole before this fragment of the expected message: the
                // sender is asked at once for what is missing (once per
                // message; after that the ack tells within its delay).
                if reliable && seq == expected && self.partial[i].1.first_missing() < f.index {
                    self.rx.ask_resend(now_ns);
                    self.rx.ack_soon(now_ns, false);
                }
            }
            Err(WireDrop::DuplicateFragment) => {
                self.count(ViCounter::DuplicateFragments, 1);
                if reliable {
                    self.rx.ack_soon(now_ns, false);
                }
            }
            Err(_) => self.count(ViCounter::BadFragments, 1),
        }
    }

    /// A data message `seq` arrived from the peer.
    pub(crate) fn arrive(
        &mut self,
        seq: u32,
        msg: &[u8],
        regions: &std::collections::HashMap<u32, Region>,
        now_ns: u64,
    ) {
        // A peer that went sends nothing more: a late or replayed frame of
        // it is not taken.
        if self.state != 0 || self.draining.is_some() {
            return;
        }
        let len = msg.len() as u64;
        if self.reliability != Reliability::Unreliable
            && seq == self.rx.expected()
            && self.rx.room() > 0
            && !self.strict_rnr
            && self.must_hold()
            && !self.make_room(len, seq)
        {
            // No room in the VI's budget to hold it: the window closes
            // (the ack says so at once), and the sender resends it once
            // the owner took what is held.
            self.count(ViCounter::BudgetRefused, 1);
            self.rx.close(now_ns);
            return;
        }
        let before = self.rx.stats.lost;
        let verdict = self.rx.on_data(seq, now_ns);
        // An unreliable VI's gaps, whatever became of this message (one
        // past a full hold still shows the messages before it lost).
        let lost = self.rx.stats.lost.saturating_sub(before);
        if lost > 0 {
            self.count(ViCounter::Lost, lost);
        }
        let before = self.rx.stats.lost;
        match verdict {
            DataVerdict::Accept => {}
            DataVerdict::Duplicate => return self.count(ViCounter::Duplicates, 1),
            DataVerdict::OutOfOrder { .. } => {
                self.count(ViCounter::OutOfOrder, 1);
                // Inside the window (the receiver said so): kept once, as
                // far as the budget allows (else it comes again).
                if self.ahead.len() + self.partial.len() < AHEAD_MAX
                    && !self.ahead.iter().any(|(s, _)| *s == seq)
                {
                    if self.kept + len <= self.held_budget {
                        self.keep(len);
                        self.ahead.push((seq, msg.to_vec()));
                    } else {
                        self.count(ViCounter::BudgetRefused, 1);
                    }
                }
                return;
            }
            DataVerdict::OverWindow => return self.count(ViCounter::OverWindow, 1),
        }
        self.take_in(msg, before, regions, now_ns);
        // What came ahead of it follows, in order.
        while !self.ahead.is_empty() && self.state == 0 {
            let expected = self.rx.expected();
            let mut gone = 0;
            self.ahead.retain(|(s, m)| {
                let keep = !reliable::seq_lt(*s, expected);
                if !keep {
                    gone += m.len();
                }
                keep
            });
            self.unkeep(gone);
            let Some(i) = self.ahead.iter().position(|(s, _)| *s == expected) else {
                // Another gap before the rest: the receiver asks for it at
                // once (the first message past a gap does).
                if let Some(&(s, _)) = self.ahead.first() {
                    let _ = self.rx.on_data(s, now_ns);
                }
                break;
            };
            let (s, m) = self.ahead.swap_remove(i);
            self.unkeep(m.len());
            let before = self.rx.stats.lost;
            if self.rx.on_data(s, now_ns) == DataVerdict::Accept {
                self.take_in(&m, before, regions, now_ns);
            }
        }
        if !self.partial.is_empty() {
            // Reassembly of messages now behind: no more.
            let expected = self.rx.expected();
            let mut gone = 0;
            self.partial.retain(|(s, b)| {
                let keep = !reliable::seq_lt(*s, expected);
                if !keep {
                    gone += b.bytes();
                }
                keep
            });
            self.unkeep(gone);
            // The message now expected lost part of itself on the way:
            // ask for it at once.
            if self
                .partial
                .iter()
                .any(|(s, b)| *s == expected && b.has_hole())
            {
                self.rx.ask_resend(now_ns);
            }
        }
    }

    /// Message `msg`, just accepted, goes into a posted receive or is held
    /// (`lost_before`: the receiver's loss count before it was judged).
    pub(super) fn take_in(
        &mut self,
        msg: &[u8],
        lost_before: u64,
        regions: &std::collections::HashMap<u32, Region>,
        now_ns: u64,
    ) {
        let lost = self.rx.stats.lost.saturating_sub(lost_before);
        if lost > 0 {
            self.count(ViCounter::Lost, lost);
        }
        // Take a receive posted since the last poll.
        if self.recv_posted.is_empty() && self.rq.head() != self.rq_tail && self.recv_room() {
            let d = self.rq.read(self.rq_tail);
            self.rq_tail += 1;
            self.rq.set_tail(self.rq_tail);
            self.recv_posted.push_back(d);
        }
        if self.recv_posted.is_empty() || !self.held.is_empty() {
            if self.strict_rnr {
                self.break_with(ViError::ReceiverNotReady, true);
                return;
            }
            let len = msg.len() as u64;
            if self.reliability == Reliability::Unreliable
                && self.kept + len > self.held_budget
                && !self.make_room(len, self.rx.expected())
            {
                // Unreliable (a reliable level made room before it took
                // it): dropped, as when `hold_max` messages are held.
                self.count(ViCounter::BudgetRefused, 1);
                self.rx.placed(1, now_ns);
                return;
            }
            self.keep(len);
            self.held.push_back(msg.to_vec());
            self.count(ViCounter::HeldTotal, 1);
            self.set_level(ViCounter::Held, self.held.len() as u64);
            return;
        }
        if self.place(msg, regions) {
            self.rx.placed(1, now_ns);
            self.wake();
        }
    }
}
