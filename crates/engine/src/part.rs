//! The one shape every part of the loop has (Aeron's agents): a part
//! does a turn's work and says how much, names the next time it needs a
//! turn while the engine sleeps, and arms the wake-ups its clients use
//! before the engine sleeps.
//!
//! The dispatcher holds its parts in one list and, each turn, runs them
//! in order with a [`Context`] (what lies below every system: the wire's
//! port, the counters, the configuration); then control takes the work a
//! turn left for it (frames that set up connections, replies owed), and
//! the dispatcher flushes the port once. Before it sleeps it arms every
//! part, looks at each once more, and sleeps until the nearest of their
//! deadlines. A new system is one more part in that list, nothing else.
//!
//! A part is called a handful of times per turn, never per message. The
//! turn itself calls each part statically (the dispatcher's `each_part!`
//! lists them): a part with nothing to do returns at once, and that test
//! is inlined into the loop; control takes a turn's leftovers only when
//! `turn_left_work` says there are some.

use std::time::Instant;

use crate::config::EngineConfig;
use crate::counters::Counters;
use crate::wire::port::WirePort;

/// What every part is given for a turn (and for its deadline).
pub(crate) struct Context<'a> {
    /// The engine's port on the wire, if it has one. What a part queues
    /// on it leaves when the dispatcher flushes it, at the end of the
    /// turn.
    pub port: Option<&'a mut WirePort>,
    pub counters: &'a Counters,
    pub cfg: &'a EngineConfig,
}

/// A part of the engine's loop.
pub(crate) trait Part {
    /// One turn: what came for the part, what its clients posted, its
    /// timers that are due. Returns the work done (0: nothing, the engine
    /// may go to sleep). Work for the control side is left in the part,
    /// for control to take after the turn.
    fn turn(&mut self, cx: &mut Context<'_>) -> usize;

    /// The earliest time the part needs a turn while nothing wakes the
    /// engine (None: only when something does).
    fn deadline(&self, cx: &Context<'_>) -> Option<Instant>;

    /// Set (`on`, before the engine sleeps) or clear (after it woke) the
    /// flags that tell the part's clients to ring its doorbells.
    fn arm(&self, on: bool);
}
