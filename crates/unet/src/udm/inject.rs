//! A node's sending side: `inject` and `injectc`, the fast ring's room,
//! diverting to the engine while the receiver is buffered, and ringing the
//! engine.

use super::*;

impl Node {
    /// Send `words` to node `dest` for its handler `handler`: the whole
    /// message or nothing. Waits while the message cannot go: `dest`'s
    /// fast ring is full (until `dest` takes a message, or the engine
    /// switches it to buffered mode because it took none for the
    /// atomicity timeout), the engine is behind with this node's diverted
    /// messages, or `dest`'s virtual buffer is full (overflow control).
    pub fn inject(&mut self, dest: u32, handler: u16, words: &[u64]) -> Result<(), InjectError> {
        let mut held = false;
        let mut spins = 0u32;
        loop {
            if self.try_inject(dest, handler, words, &mut held, STALL_TELL)? {
                return Ok(());
            }
            spins += 1;
            if spins.is_multiple_of(64) && sys::peer_closed(self.session.inner.sock_fd()) {
                return Err(InjectError::EngineGone);
            }
            backoff(spins);
        }
    }

    /// [`Node::inject`] that never waits: `Ok(true)` when the message went,
    /// `Ok(false)` when it cannot go now (nothing was sent).
    pub fn injectc(&mut self, dest: u32, handler: u16, words: &[u64]) -> Result<bool, InjectError> {
        let mut held = false;
        // A caller told "not now" may not come back soon: the engine is
        // told of a full ring at once (once per receiver position).
        self.try_inject(dest, handler, words, &mut held, 1)
    }

    fn try_inject(
        &mut self,
        dest: u32,
        handler: u16,
        words: &[u64],
        held: &mut bool,
        tell_after: u32,
    ) -> Result<bool, InjectError> {
        // The view's own count of nodes (equal to `self.layout`'s): checked
        // here, it lets the compiler drop the clamp in `line(dest)`.
        if dest >= self.jseg.layout().nodes {
            return Err(InjectError::BadDest(dest));
        }
        let Some(words) = Words::new(words) else {
            return Err(InjectError::TooLong(words.len()));
        };
        loop {
            let m = self.line(dest).mode.load(Ordering::Acquire);
            if m & UDM_MODE_GONE != 0 {
                return Err(InjectError::Gone(dest));
            }
            if m & UDM_MODE_DIVERT == 0 {
                if self.fast_room(dest) {
                    self.push_fast(dest, handler, words);
                    return Ok(true);
                }
                // The fast ring is full: the network backs up and we wait
                // (or say not now) until the receiver takes a message or
                // the engine switches it to buffered mode.
                self.stalled(dest, tell_after);
                return Ok(false);
            }
            // Buffered mode: through the engine.
            if !self.divert_room() {
                return Ok(false);
            }
            if m & UDM_MODE_COUNT >= self.layout.buffer_cap as u64 {
                if !*held {
                    *held = true;
                    bump(&self.line(dest).overflow_holds);
                }
                return Ok(false);
            }
            // One more on its way, counted while divert mode holds: the
            // receiver cannot go back to the fast case before taking it.
            if self
                .line(dest)
                .mode
                .compare_exchange(m, m + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            // The receiver had none on its way before this one: it may be
            // waiting for it.
            let first = m & UDM_MODE_COUNT == 0;
            self.push_divert(dest, handler, words, first);
            return Ok(true);
        }
    }

    fn fast_room(&mut self, d: u32) -> bool {
        let i = d as usize;
        let cap = self.layout.fast_cap as u64;
        if self.out_head[i].wrapping_sub(self.out_tail[i]) < cap {
            return true;
        }
        self.out_tail[i] = self.jseg.outgoing[i].tail();
        self.out_head[i].wrapping_sub(self.out_tail[i]) < cap
    }

    /// The fast ring to `d` was found full. After `tell_after` tries with
    /// the receiver's position unchanged, tell the engine (once per
    /// position): it watches `d` and switches it to buffered mode if it
    /// takes nothing for the atomicity timeout (the paper's atomicity
    /// timer, enabled when the network is blocked). So two nodes each
    /// waiting in an inject to the other cannot deadlock. A receiver
    /// that drains its ring as it should costs the engine nothing.
    fn stalled(&mut self, d: u32, tell_after: u32) {
        let i = d as usize;
        let tail = self.out_tail[i];
        let (at, tries) = &mut self.stall[i];
        if *at != tail {
            *at = tail;
            *tries = 0;
        }
        *tries = tries.saturating_add(1);
        if *tries == tell_after {
            self.mark_rang(d);
            self.ring_engine();
        }
    }

    fn push_fast(&mut self, d: u32, handler: u16, words: Words<'_>) {
        let i = d as usize;
        let pos = self.out_head[i];
        write_msg(
            Slot::of(&self.jseg.outgoing[i], pos),
            self.rank,
            handler,
            self.diverted_to[i],
            words,
        );
        // Release: the message is visible before the new head.
        self.jseg.outgoing[i].set_head(pos + 1);
        self.out_head[i] = pos + 1;
        // Pairs with the receiver's heavy fence before it sleeps: either
        // it sees the message, or we see it sleeping.
        sys::light_fence(self.asym);
        let line = self.line(d);
        if line.rx_sleeping.load(Ordering::Relaxed) != 0 {
            line.rx_futex.fetch_add(1, Ordering::Release);
            // Every sleeper: the node's main code and its handler thread.
            sys::futex_wake(&line.rx_futex, i32::MAX);
            // A message for a node that is not running (the UDM paper's
            // mismatch-available): the engine looks at it, in case it
            // stays so (stopped) past the atomicity timeout. Only here,
            // where a wake-up is paid for anyway: the fast case of a
            // running receiver never touches the engine.
            self.mark_rang(d);
            self.ring_engine();
        }
    }

    fn divert_room(&mut self) -> bool {
        let cap = UDM_DIVERT_CAP as u64;
        if self.divert_head.wrapping_sub(self.divert_tail) < cap {
            return true;
        }
        self.divert_tail = self.nseg.divert.tail();
        self.divert_head.wrapping_sub(self.divert_tail) < cap
    }

    fn push_divert(&mut self, d: u32, handler: u16, words: Words<'_>, first: bool) {
        let pos = self.divert_head;
        write_msg(Slot::of(&self.nseg.divert, pos), d, handler, 0, words);
        self.diverted_to[d as usize] += 1;
        self.nseg.divert.set_head(pos + 1);
        self.divert_head = pos + 1;
        self.mark_rang(self.rank);
        self.ring_engine_diverted(first);
    }

    /// [`Node::ring_engine`] after handing the engine a diverted message
    /// (`first`: the receiver had no other on its way): an engine that
    /// naps (it took diverted messages a moment ago) looks again soon by
    /// itself, so it is rung only for a receiver's first (it may be
    /// waiting: it leaves buffered mode once it has taken it) or once our
    /// divert ring is half full. A stream of diverted messages to a
    /// receiver with a backlog costs no wake-up each.
    fn ring_engine_diverted(&mut self, first: bool) {
        // No fence of its own: called right after `mark_rang`, whose fence
        // already orders the divert ring's new head before the load of the
        // doorbell flag below (either the engine, arming, sees the head, or
        // we see it armed). One fence a diverted message, not two.
        match self.job_header().engine_armed.load(Ordering::Relaxed) {
            0 => return,
            UDM_ARMED_NAP if !first => {
                let half = UDM_DIVERT_CAP as u64 / 2;
                if self.divert_head.wrapping_sub(self.divert_tail) < half {
                    return;
                }
                self.divert_tail = self.nseg.divert.tail();
                if self.divert_head.wrapping_sub(self.divert_tail) < half {
                    return;
                }
            }
            _ => {}
        }
        if self.job_header().engine_armed.swap(0, Ordering::AcqRel) != 0 {
            self.doorbell.notify();
        }
    }

    /// Nothing to take, and diverted messages are on their way to us (in
    /// a sender's divert ring): ring the engine if it naps, once for each
    /// head of our buffer (a sleeping engine was rung by their sender).
    pub(super) fn pull(&mut self, head: u64) {
        if self.pulled_at == head {
            return;
        }
        fence(Ordering::SeqCst);
        if self.job_header().engine_armed.load(Ordering::Relaxed) == UDM_ARMED_NAP {
            self.pulled_at = head;
            if self.job_header().engine_armed.swap(0, Ordering::AcqRel) != 0 {
                self.doorbell.notify();
            }
        }
    }

    /// Tell the engine node `r` has something for it (after publishing
    /// what it is): the engine looks only at the nodes whose bit is set.
    pub(super) fn mark_rang(&self, r: u32) {
        let bit = 1u64 << r;
        let rang = &self.job_header().rang;
        // Pairs with the engine's fence after it swaps the word: either
        // it sees what was published before this, or this load sees its
        // swap (the bit clear) and sets the bit again. Without it, the
        // load may see the bit still set while the engine swaps it away
        // and reads the old head (a store and a later load reorder).
        fence(Ordering::SeqCst);
        if rang.load(Ordering::Relaxed) & bit == 0 {
            rang.fetch_or(bit, Ordering::AcqRel);
        }
    }

    /// Wake the engine if it sleeps: it has work from this node.
    pub(super) fn ring_engine(&self) {
        // Pairs with the engine's fence after it arms: either it sees our
        // work, or we see it armed and ring.
        fence(Ordering::SeqCst);
        let armed = &self.job_header().engine_armed;
        if armed.load(Ordering::Relaxed) != 0 && armed.swap(0, Ordering::AcqRel) != 0 {
            self.doorbell.notify();
        }
    }
}
