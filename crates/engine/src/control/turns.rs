//! A queue that serves its senders in turn.
//!
//! The set-up threads take their work from one of these, keyed by the
//! client that asked: a client that queues many large segments (or many
//! jobs) gets one of them made, then every other client with work waiting
//! gets one, and so on. First-come first-served would put a client's one
//! request behind the whole queue of another's.

use std::collections::VecDeque;

/// Items queued by key, handed out one key at a time in turn (each key's
/// items in the order they came).
pub(crate) struct Turns<K, T> {
    /// The keys with items waiting, the next to be served first.
    waiting: VecDeque<(K, VecDeque<T>)>,
}

impl<K: PartialEq, T> Default for Turns<K, T> {
    fn default() -> Self {
        Turns {
            waiting: VecDeque::new(),
        }
    }
}

impl<K: PartialEq, T> Turns<K, T> {
    /// Queue `item` behind `key`'s others; a key with nothing waiting
    /// joins the end of the line.
    pub(crate) fn push(&mut self, key: K, item: T) {
        match self.waiting.iter_mut().find(|(k, _)| *k == key) {
            Some((_, items)) => items.push_back(item),
            None => self.waiting.push_back((key, VecDeque::from([item]))),
        }
    }

    /// The next item: the oldest of the key whose turn it is, which then
    /// goes to the end of the line if it has more.
    pub(crate) fn pop(&mut self) -> Option<T> {
        let (key, mut items) = self.waiting.pop_front()?;
        let item = items.pop_front();
        if !items.is_empty() {
            self.waiting.push_back((key, items));
        }
        item
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_take_turns_and_each_keeps_its_order() {
        let mut t = Turns::default();
        for i in 0..4 {
            t.push('a', ('a', i));
        }
        t.push('b', ('b', 0));
        t.push('c', ('c', 0));
        t.push('b', ('b', 1));
        let order: Vec<_> = std::iter::from_fn(|| t.pop()).collect();
        assert_eq!(
            order,
            [
                ('a', 0),
                ('b', 0),
                ('c', 0),
                ('a', 1),
                ('b', 1),
                ('a', 2),
                ('a', 3)
            ]
        );
        assert!(t.pop().is_none());
    }

    /// A key that comes back after its items ran out queues behind those
    /// still waiting.
    #[test]
    fn a_returning_key_joins_the_end_of_the_line() {
        let mut t = Turns::default();
        t.push(1, 10);
        t.push(2, 20);
        t.push(2, 21);
        assert_eq!(t.pop(), Some(10));
        t.push(1, 11);
        assert_eq!(t.pop(), Some(20));
        assert_eq!(t.pop(), Some(11));
        assert_eq!(t.pop(), Some(21));
        assert_eq!(t.pop(), None);
    }
}
