//! A first-in first-out queue whose slots are reused in place.
//!
//! A VI's queues hold descriptors and completions between the call that
//! posts them and the one that takes them back, millions of times a
//! second. `VecDeque::push_back` takes its value by move, which the
//! compiler builds on the stack and then copies; that copy reads back
//! bytes just written by narrower stores, which costs a store-forwarding
//! stall of a dozen cycles on each push. Here a value is written straight
//! into its slot ([`Fifo::push_slot`]) and a slot taken from the front is
//! read in place ([`Fifo::pop_front`]), and slots keep what they own (a
//! descriptor's vector of pieces keeps its capacity) for their next use.

/// A FIFO of `T` in a ring of reused slots; it grows (doubling) only when
/// full.
pub(crate) struct Fifo<T> {
    slots: Vec<T>,
    /// Index of the front slot.
    head: usize,
    len: usize,
}

impl<T: Default> Fifo<T> {
    /// An empty queue with room for `n` entries before it grows.
    pub(crate) fn with_capacity(n: usize) -> Fifo<T> {
        Fifo {
            slots: (0..n.max(1).next_power_of_two())
                .map(|_| T::default())
                .collect(),
            head: 0,
            len: 0,
        }
    }

    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The front entry.
    #[inline(always)]
    pub(crate) fn front(&self) -> Option<&T> {
        if self.len == 0 {
            return None;
        }
        self.slots.get(self.head)
    }

    /// The entries, front to back.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        (0..self.len).map(move |i| &self.slots[(self.head + i) & self.mask()])
    }

    /// A new entry at the back: the slot to fill in (it holds whatever its
    /// last use left there).
    #[inline(always)]
    pub(crate) fn push_slot(&mut self) -> &mut T {
        if self.len == self.slots.len() {
            self.grow();
        }
        let i = (self.head + self.len) & self.mask();
        self.len += 1;
        &mut self.slots[i]
    }

    /// Take the front entry: its slot, valid until the next push.
    #[inline(always)]
    pub(crate) fn pop_front(&mut self) -> Option<&mut T> {
        if self.len == 0 {
            return None;
        }
        let i = self.head;
        self.head = (i + 1) & self.mask();
        self.len -= 1;
        self.slots.get_mut(i)
    }

    /// Double the ring, keeping the entries in order from slot 0.
    #[cold]
    fn grow(&mut self) {
        let n = self.slots.len();
        let mut slots = Vec::with_capacity(2 * n);
        for i in 0..n {
            slots.push(std::mem::take(&mut self.slots[(self.head + i) & (n - 1)]));
        }
        slots.resize_with(2 * n, T::default);
        self.slots = slots;
        self.head = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::Fifo;

    #[test]
    fn keeps_order_across_wraps_and_growth() {
        let mut q: Fifo<u64> = Fifo::with_capacity(3);
        let (mut next_in, mut next_out) = (0u64, 0u64);
        // Uneven pushes and pops wrap the ring and make it grow twice.
        for round in 0..200u64 {
            for _ in 0..(round % 7) {
                *q.push_slot() = next_in;
                next_in += 1;
            }
            for _ in 0..(round % 5) {
                match q.pop_front() {
                    Some(v) => {
                        assert_eq!(*v, next_out);
                        next_out += 1;
                    }
                    None => assert_eq!(next_in, next_out),
                }
            }
            assert_eq!(q.len() as u64, next_in - next_out);
            assert_eq!(q.front().copied(), (next_in > next_out).then_some(next_out));
            assert!(q.iter().copied().eq(next_out..next_in));
        }
        while let Some(v) = q.pop_front() {
            assert_eq!(*v, next_out);
            next_out += 1;
        }
        assert_eq!(next_in, next_out);
        assert!(q.is_empty());
    }
}
