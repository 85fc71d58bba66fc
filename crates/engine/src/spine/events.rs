//! SPINE's one event queue: every piece of the adapter's work (an active
//! message from a host, one from the wire or a peer, a delivery to a host
//! endpoint, a forward to a peer or the wire, a timer) and every
//! invocation of an extension's handler is an event, run by one loop.
//!
//! Each event type has a priority (0 runs first; configurable:
//! `EngineConfig::spine_priorities`); events of one priority run in the
//! order they were queued. The queue is bounded: an event that does not
//! fit is refused and the caller counts the drop ([`DropReason`]).
//!
//! For the event graph (`trace.rs`) each queued event carries a [`Tag`]:
//! the event that queued it and the message of the graph it belongs to.
//! The loop sets [`EventQueue::set_current`] around each event it runs,
//! so whoever pushes during that event (a native, a system handler)
//! tags without knowing it; with the trace off the current tag stays
//! zero and the tag is one store more per push.

use std::collections::VecDeque;

use crate::config::SPINE_EVENT_TYPES;

/// The types of event. The system handlers (the adapter's own work) and
/// `Handler` (an extension's handler).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventKind {
    /// An active message a host endpoint sent.
    HostTx = 0,
    /// An active message from the wire.
    WireRx = 1,
    /// An active message from a peer adapter.
    PeerRx = 2,
    /// Deliver a message to a host endpoint.
    DeliverHost = 3,
    /// Forward a message to a peer adapter.
    PeerTx = 4,
    /// Send a message over the wire.
    WireTx = 5,
    /// A timer is due.
    Timer = 6,
    /// Run an extension's handler on a message.
    Handler = 7,
}

/// Number of event types.
pub(crate) const EVENT_KINDS: usize = 8;

impl EventKind {
    /// Every type, in number order.
    pub(crate) const ALL: [EventKind; EVENT_KINDS] = [
        EventKind::HostTx,
        EventKind::WireRx,
        EventKind::PeerRx,
        EventKind::DeliverHost,
        EventKind::PeerTx,
        EventKind::WireTx,
        EventKind::Timer,
        EventKind::Handler,
    ];

    /// The name `unet stat` and the daemon's flag use.
    pub(crate) const fn name(self) -> &'static str {
        SPINE_EVENT_TYPES[self as usize]
    }
}

/// Number of priority levels (priorities are `0..LEVELS`).
pub(crate) const LEVELS: usize = 8;

/// One event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Event {
    pub kind: EventKind,
    /// The message it concerns (a message handle), or 0.
    pub msg: u32,
    /// Type-specific: the destination of a delivery or a forward, the
    /// timer's extension.
    pub arg: u32,
}

/// What the event graph knows of a queued event: the event that queued
/// it and the message of the graph it belongs to (0: none; a root event
/// starts a message of its own when it runs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tag {
    /// The trace id of the event that queued it.
    pub cause: u32,
    /// The graph's message number.
    pub msg: u32,
}

/// Why SPINE dropped something, counted.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DropReason {
    /// The event queue was full.
    QueueFull = 0,
    /// No message slot was free.
    NoSlot = 1,
    /// No bulk buffer was free, or the data was longer than a buffer.
    NoBuffer = 2,
    /// No handler has the message's number.
    NoHandler = 3,
    /// The destination is not one the adapter has.
    BadDest = 4,
    /// The destination could not take it (its receive queue or free
    /// buffers ran out).
    DestFull = 5,
    /// The message's framing was bad.
    BadFrame = 6,
    /// The handler's extension is gone or stopped.
    Dead = 7,
    /// The sending extension has its most messages in flight
    /// ([`crate::spine::msgs::EXT_MSGS_MAX`]).
    ExtLimit = 8,
}

/// Number of drop reasons.
pub(crate) const DROP_REASONS: usize = 9;

impl DropReason {
    /// Every reason, in number order.
    pub(crate) const ALL: [DropReason; DROP_REASONS] = [
        DropReason::QueueFull,
        DropReason::NoSlot,
        DropReason::NoBuffer,
        DropReason::NoHandler,
        DropReason::BadDest,
        DropReason::DestFull,
        DropReason::BadFrame,
        DropReason::Dead,
        DropReason::ExtLimit,
    ];

    /// The name `unet stat` shows.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queue_full",
            DropReason::NoSlot => "no_slot",
            DropReason::NoBuffer => "no_buffer",
            DropReason::NoHandler => "no_handler",
            DropReason::BadDest => "bad_dest",
            DropReason::DestFull => "dest_full",
            DropReason::BadFrame => "bad_frame",
            DropReason::Dead => "dead",
            DropReason::ExtLimit => "ext_limit",
        }
    }
}

/// The event queue (see the module documentation).
pub(crate) struct EventQueue {
    levels: [VecDeque<(Event, Tag)>; LEVELS],
    /// The tag of what pushes now (the running event's, when traced).
    current: Tag,
    /// Priority of each event type.
    prio: [u8; EVENT_KINDS],
    /// Bitmask of the non-empty levels.
    busy: u8,
    len: usize,
    cap: usize,
    /// Events run, by type.
    pub run: [u64; EVENT_KINDS],
    /// Drops, by [`DropReason`].
    pub drops: [u64; DROP_REASONS],
}

impl EventQueue {
    /// A queue of at most `cap` events, with a priority per event type
    /// (values above the lowest level are taken as the lowest).
    pub(crate) fn new(cap: usize, prio: [u8; EVENT_KINDS]) -> EventQueue {
        EventQueue {
            levels: Default::default(),
            current: Tag::default(),
            prio: prio.map(|p| p.min(LEVELS as u8 - 1)),
            busy: 0,
            len: 0,
            cap,
            run: [0; EVENT_KINDS],
            drops: [0; DROP_REASONS],
        }
    }

    /// Events queued.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Queue `ev`; when the queue is full it is handed back (the caller
    /// frees what it held) and the drop is counted.
    #[inline]
    pub(crate) fn push(&mut self, ev: Event) -> Result<(), Event> {
        self.push_tagged(ev, self.current)
    }

    /// [`EventQueue::push`] with a tag of its own (a timer's: the event
    /// that set it).
    pub(crate) fn push_tagged(&mut self, ev: Event, tag: Tag) -> Result<(), Event> {
        if self.len >= self.cap {
            self.count_drop(DropReason::QueueFull);
            return Err(ev);
        }
        let level = self.prio[ev.kind as usize];
        self.levels[level as usize].push_back((ev, tag));
        self.busy |= 1 << level;
        self.len += 1;
        Ok(())
    }

    /// The next event: the oldest of the most urgent priority.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Event> {
        self.pop_tagged().map(|(ev, _)| ev)
    }

    /// [`EventQueue::pop`] with the event's tag.
    #[inline]
    pub(crate) fn pop_tagged(&mut self) -> Option<(Event, Tag)> {
        if self.busy == 0 {
            return None;
        }
        let level = self.busy.trailing_zeros() as usize;
        let q = &mut self.levels[level];
        let (ev, tag) = q.pop_front()?;
        if q.is_empty() {
            self.busy &= !(1 << level);
        }
        self.len -= 1;
        self.run[ev.kind as usize] += 1;
        Some((ev, tag))
    }

    /// The tag of what is pushed from now on (the default: none).
    #[inline]
    pub(crate) fn set_current(&mut self, tag: Tag) {
        self.current = tag;
    }

    /// The tag of what is pushed now.
    #[inline]
    pub(crate) fn current(&self) -> Tag {
        self.current
    }

    /// Count a drop.
    #[inline]
    pub(crate) fn count_drop(&mut self, r: DropReason) {
        self.drops[r as usize] += 1;
    }

    /// Take out every queued event that `gone` says belongs to what is
    /// going (an extension unloaded), handing each to `f`.
    pub(crate) fn purge(&mut self, mut gone: impl FnMut(&Event) -> bool, mut f: impl FnMut(Event)) {
        for (level, q) in self.levels.iter_mut().enumerate() {
            let before = q.len();
            q.retain(|(ev, _)| {
                if gone(ev) {
                    f(*ev);
                    false
                } else {
                    true
                }
            });
            self.len -= before - q.len();
            if q.is_empty() {
                self.busy &= !(1 << level);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{parse_spine_priorities, DEFAULT_SPINE_PRIORITIES as DEFAULT_PRIORITIES};

    fn ev(kind: EventKind, msg: u32) -> Event {
        Event { kind, msg, arg: 0 }
    }

    #[test]
    fn events_run_by_priority_then_in_order() {
        let mut q = EventQueue::new(16, DEFAULT_PRIORITIES);
        q.push(ev(EventKind::HostTx, 1)).unwrap();
        q.push(ev(EventKind::Handler, 2)).unwrap();
        q.push(ev(EventKind::DeliverHost, 3)).unwrap();
        q.push(ev(EventKind::HostTx, 4)).unwrap();
        q.push(ev(EventKind::PeerTx, 5)).unwrap();
        let order: Vec<u32> = std::iter::from_fn(|| q.pop()).map(|e| e.msg).collect();
        assert_eq!(order, [3, 5, 2, 1, 4]);
        assert!(q.is_empty());
        assert_eq!(q.run[EventKind::HostTx as usize], 2);
    }

    #[test]
    fn the_priorities_are_the_configured_ones() {
        let mut prio = DEFAULT_PRIORITIES;
        prio[EventKind::HostTx as usize] = 0;
        prio[EventKind::DeliverHost as usize] = 5;
        let mut q = EventQueue::new(16, prio);
        q.push(ev(EventKind::DeliverHost, 1)).unwrap();
        q.push(ev(EventKind::HostTx, 2)).unwrap();
        assert_eq!(q.pop().unwrap().msg, 2);
        assert_eq!(q.pop().unwrap().msg, 1);
    }

    #[test]
    fn a_full_queue_hands_the_event_back_and_counts_it() {
        let mut q = EventQueue::new(2, DEFAULT_PRIORITIES);
        q.push(ev(EventKind::Timer, 1)).unwrap();
        q.push(ev(EventKind::Timer, 2)).unwrap();
        assert_eq!(
            q.push(ev(EventKind::Timer, 3)),
            Err(ev(EventKind::Timer, 3))
        );
        assert_eq!(q.drops[DropReason::QueueFull as usize], 1);
        assert_eq!(q.len(), 2);
        q.pop();
        q.push(ev(EventKind::Timer, 4)).unwrap();
    }

    #[test]
    fn events_carry_the_tag_current_when_they_were_pushed() {
        let mut q = EventQueue::new(8, DEFAULT_PRIORITIES);
        q.push(ev(EventKind::HostTx, 1)).unwrap();
        let t = Tag { cause: 7, msg: 3 };
        q.set_current(t);
        q.push(ev(EventKind::Handler, 2)).unwrap();
        q.set_current(Tag::default());
        q.push_tagged(ev(EventKind::Timer, 3), Tag { cause: 9, msg: 0 })
            .unwrap();
        assert_eq!(
            q.pop_tagged(),
            Some((ev(EventKind::Timer, 3), Tag { cause: 9, msg: 0 }))
        );
        assert_eq!(q.pop_tagged(), Some((ev(EventKind::Handler, 2), t)));
        assert_eq!(
            q.pop_tagged(),
            Some((ev(EventKind::HostTx, 1), Tag::default()))
        );
    }

    #[test]
    fn purge_takes_out_only_what_goes() {
        let mut q = EventQueue::new(8, DEFAULT_PRIORITIES);
        for i in 0..6 {
            let kind = if i % 2 == 0 {
                EventKind::Handler
            } else {
                EventKind::DeliverHost
            };
            q.push(ev(kind, i)).unwrap();
        }
        let mut out = Vec::new();
        q.purge(|e| e.msg % 3 == 0, |e| out.push(e.msg));
        assert_eq!(out.len(), 2);
        assert_eq!(q.len(), 4);
        let left: Vec<u32> = std::iter::from_fn(|| q.pop()).map(|e| e.msg).collect();
        assert_eq!(left, [1, 5, 2, 4]);
    }

    #[test]
    fn priorities_parse_with_exact_errors() {
        let p = parse_spine_priorities("host_tx=0, handler=7", DEFAULT_PRIORITIES).unwrap();
        assert_eq!(p[EventKind::HostTx as usize], 0);
        assert_eq!(p[EventKind::Handler as usize], 7);
        assert_eq!(p[EventKind::Timer as usize], 1);
        assert_eq!(
            parse_spine_priorities("timer=8", DEFAULT_PRIORITIES).unwrap_err(),
            "\"timer=8\": a priority is 0..=7"
        );
        assert!(parse_spine_priorities("nope=1", DEFAULT_PRIORITIES)
            .unwrap_err()
            .starts_with("\"nope\": not an event type (host_tx, "));
        assert_eq!(
            parse_spine_priorities("timer", DEFAULT_PRIORITIES).unwrap_err(),
            "\"timer\": expected type=priority"
        );
        for (k, name) in EventKind::ALL.iter().zip(SPINE_EVENT_TYPES) {
            assert_eq!(k.name(), name);
        }
    }
}
