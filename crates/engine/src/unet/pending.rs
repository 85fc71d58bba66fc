//! Arrivals waiting for their applet: one queue per endpoint (its owner)
//! and a ring of the owners that have entries, so that a pass costs the
//! entries it runs and one look at each owner waiting, however many
//! entries a held-back owner has queued.
//!
//! An owner's entries run in the order they came. An owner is *held* when
//! its applet waits out a pause: the pass asks about it once (its first
//! entry is handed back, [`Step::Held`]) and goes on to the next owner; its
//! entries keep their place for a later pass. Each owner has a cap of its
//! own ([`Pending::push`]), so that one endpoint whose applet is held back
//! cannot fill the queue every endpoint shares.

use std::collections::VecDeque;

/// What a pass's step did with an entry.
pub(crate) enum Step<T> {
    /// Ran it (or dropped it): it is gone.
    Ran,
    /// Gave it back: its owner is held for the rest of the pass.
    Held(T),
}

/// Queues of entries by owner (see the module documentation).
pub(crate) struct Pending<T> {
    /// By owner (an endpoint's table index).
    queues: Vec<VecDeque<T>>,
    /// True while the owner is in `ready` or being run by a pass.
    listed: Vec<bool>,
    /// Owners with entries, in the order passes visit them.
    ready: VecDeque<usize>,
    total: usize,
    per_owner: usize,
    max: usize,
}

impl<T> Pending<T> {
    /// Queues holding at most `per_owner` entries of one owner and `max`
    /// in all.
    pub(crate) fn new(per_owner: usize, max: usize) -> Self {
        Pending {
            queues: Vec::new(),
            listed: Vec::new(),
            ready: VecDeque::new(),
            total: 0,
            per_owner,
            max,
        }
    }

    /// True if `owner` cannot queue another entry: its cap or the total
    /// cap is reached.
    #[inline]
    pub(crate) fn full(&self, owner: usize) -> bool {
        self.total >= self.max || self.queues.get(owner).map_or(0, VecDeque::len) >= self.per_owner
    }

    /// Queue `e` behind `owner`'s entries; `Err(e)` when [`Pending::full`].
    pub(crate) fn push(&mut self, owner: usize, e: T) -> Result<(), T> {
        if self.full(owner) {
            return Err(e);
        }
        if self.queues.len() <= owner {
            self.queues.resize_with(owner + 1, VecDeque::new);
            self.listed.resize(owner + 1, false);
        }
        self.queues[owner].push_back(e);
        self.total += 1;
        if !self.listed[owner] {
            self.listed[owner] = true;
            self.ready.push_back(owner);
        }
        Ok(())
    }

    /// True if `owner` has entries waiting (a new one must go behind them).
    #[inline]
    pub(crate) fn has(&self, owner: usize) -> bool {
        self.queues.get(owner).is_some_and(|q| !q.is_empty())
    }

    /// True if nothing waits.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Entries waiting, in all.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.total
    }

    fn pop(&mut self, owner: usize) -> Option<T> {
        let e = self.queues.get_mut(owner)?.pop_front()?;
        self.total -= 1;
        Some(e)
    }

    fn unpop(&mut self, owner: usize, e: T) {
        self.queues[owner].push_front(e);
        self.total += 1;
    }

    /// `owner` was visited: back in the ring if entries remain.
    fn visited(&mut self, owner: usize) {
        let q = &mut self.queues[owner];
        if q.is_empty() {
            self.listed[owner] = false;
            if q.capacity() > 64 {
                q.shrink_to_fit();
            }
        } else {
            self.ready.push_back(owner);
        }
    }
}

/// One pass over the queues that `q` finds in `cx`: each owner waiting
/// when the pass starts is visited once, in ring order, and `step(cx,
/// owner, entry)` runs its entries in order until it hands one back (the
/// owner is held: the entry goes back first in its queue) or the pass has
/// run `budget` entries. Entries queued by the steps wait for a later pass
/// unless their owner is the one being visited. Returns the entries run.
pub(crate) fn pass<C, T>(
    cx: &mut C,
    q: fn(&mut C) -> &mut Pending<T>,
    budget: usize,
    mut step: impl FnMut(&mut C, usize, T) -> Step<T>,
) -> usize {
    let mut ran = 0;
    let owners = q(cx).ready.len();
    for _ in 0..owners {
        if ran == budget {
            break;
        }
        let Some(owner) = q(cx).ready.pop_front() else {
            break;
        };
        while ran < budget {
            let Some(e) = q(cx).pop(owner) else {
                break;
            };
            match step(cx, owner, e) {
                Step::Ran => ran += 1,
                Step::Held(e) => {
                    q(cx).unpop(owner, e);
                    break;
                }
            }
        }
        q(cx).visited(owner);
    }
    ran
}

#[cfg(test)]
mod tests {
    use super::*;

    type Q = Pending<(usize, u32)>;

    fn me(q: &mut Q) -> &mut Q {
        q
    }

    /// One pass that holds nothing back: what it ran, in order.
    fn run_all(q: &mut Q) -> Vec<(usize, u32)> {
        let mut ran = Vec::new();
        pass(q, me, 256, |_, _, e| {
            ran.push(e);
            Step::Ran
        });
        ran
    }

    fn queue(entries: &[(usize, u32)]) -> Q {
        let mut q = Pending::new(1024, 4096);
        for &e in entries {
            assert!(q.push(e.0, e).is_ok());
        }
        q
    }

    /// Owner 1 is held back when the pass reaches its first entry and its
    /// pause ends right after: its later entries still wait, in order.
    #[test]
    fn a_pause_ending_during_a_pass_keeps_the_order() {
        let mut q = queue(&[(1, 0), (2, 0), (1, 1), (1, 2), (2, 1), (1, 3)]);
        let mut asked = 0;
        let mut ran = Vec::new();
        let n = pass(&mut q, me, 256, |_, o, e| {
            if o == 1 {
                asked += 1;
                if asked == 1 {
                    return Step::Held(e);
                }
            }
            ran.push(e);
            Step::Ran
        });
        assert_eq!(n, 2);
        assert_eq!(asked, 1, "a held owner is asked once per pass");
        assert_eq!(ran, [(2, 0), (2, 1)]);
        assert_eq!(q.len(), 4);
        // The next pass, the pause over: all of owner 1's, in order.
        assert_eq!(run_all(&mut q), [(1, 0), (1, 1), (1, 2), (1, 3)]);
        assert!(q.is_empty() && !q.has(1));
    }

    /// A held owner with thousands of entries costs a pass one look, not
    /// one per entry.
    #[test]
    fn a_held_owner_costs_one_look_per_pass() {
        let mut q = Pending::new(4096, 8192);
        for k in 0..4000 {
            assert!(q.push(7, (7, k)).is_ok());
        }
        assert!(q.push(3, (3, 0)).is_ok());
        for _ in 0..10 {
            let mut looks = 0;
            let n = pass(&mut q, me, 256, |_, o, e| {
                looks += 1;
                if o == 7 {
                    Step::Held(e)
                } else {
                    Step::Ran
                }
            });
            assert!(looks <= 2, "{looks} looks");
            assert!(n <= 1);
        }
        assert_eq!(q.len(), 4000);
        assert_eq!(run_all(&mut q).len(), 256);
    }

    /// One owner at its cap is refused; the others still queue, up to the
    /// total cap.
    #[test]
    fn each_owner_has_a_cap_of_its_own() {
        let mut q = Pending::new(3, 5);
        for k in 0..3 {
            assert!(q.push(1, (1, k)).is_ok());
        }
        assert_eq!(q.push(1, (1, 3)), Err((1, 3)));
        assert!(q.push(2, (2, 0)).is_ok());
        assert!(q.push(2, (2, 1)).is_ok());
        assert_eq!(q.push(4, (4, 0)), Err((4, 0)), "the total cap");
        assert_eq!(run_all(&mut q), [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1)]);
        assert!(q.push(1, (1, 3)).is_ok());
    }

    /// Random owners, arrivals between passes and during them (an entry
    /// queued by a step), budgets and pauses that start and end at any
    /// entry: every entry runs exactly once, and each owner's in the order
    /// they came.
    #[test]
    fn random_pauses_never_reorder_or_lose_an_owners_entries() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut q: Q = Pending::new(1 << 20, 1 << 20);
        let mut next = [0u32; 4];
        let mut ran: Vec<(usize, u32)> = Vec::new();
        for p in 0..2_000 {
            for _ in 0..rnd(6) {
                let o = rnd(4) as usize;
                assert!(q.push(o, (o, next[o])).is_ok());
                next[o] += 1;
            }
            // The last passes hold nothing back, so the queue drains.
            let quiet = p >= 1_990;
            let budget = 1 + rnd(8) as usize;
            let mut coin = rnd(1 << 20);
            let spawn = rnd(4) as usize;
            pass(&mut q, me, budget, |q, _, e| {
                coin = coin.rotate_left(7) ^ 0x5bd1_e995;
                if !quiet && coin % 3 == 0 {
                    return Step::Held(e);
                }
                if coin % 5 == 0 {
                    // A run that queues another arrival.
                    assert!(q.push(spawn, (spawn, next[spawn])).is_ok());
                    next[spawn] += 1;
                }
                ran.push(e);
                Step::Ran
            });
        }
        while !q.is_empty() {
            ran.extend(run_all(&mut q));
        }
        let total: u32 = next.iter().sum();
        assert_eq!(ran.len(), total as usize, "every entry runs once");
        let mut seen = [0u32; 4];
        for (o, k) in ran {
            assert_eq!(k, seen[o], "owner {o} out of order");
            seen[o] += 1;
        }
    }

    /// A pass that stops at its budget leaves the rest in order.
    #[test]
    fn a_pass_cut_by_its_budget_keeps_the_order() {
        let mut q = queue(&(0..10u32).map(|i| (i as usize % 2, i)).collect::<Vec<_>>());
        let mut ran = Vec::new();
        let n = pass(&mut q, me, 3, |_, o, e| {
            if o == 0 {
                return Step::Held(e);
            }
            ran.push(e.1);
            Step::Ran
        });
        assert_eq!(n, 3);
        assert_eq!(ran, [1, 3, 5]);
        let rest: Vec<u32> = run_all(&mut q).iter().map(|e| e.1).collect();
        assert_eq!(rest, [0, 2, 4, 6, 8, 7, 9]);
    }
}
