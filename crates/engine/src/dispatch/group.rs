//! Several engines on one thread.
//!
//! The paper's adapters each had a processor. A host with fewer cores
//! than adapters (SPINE's two-adapter router on a two-core machine, whose
//! other core the traffic's source holds) would otherwise run one engine
//! thread per adapter on the same core, and every frame one adapter hands
//! the other over their peer queue would wait for the scheduler to switch
//! from one thread to the other. A [`Group`] runs the adapters' loops in
//! turn on one thread instead: each engine keeps everything of its own
//! (its control socket, parts, counters, ports and peer queues; its
//! clients cannot tell), and only the thread is shared.
//!
//! A round runs one turn of every engine, in order
//! ([`Dispatcher::run_turn`]). When a whole round found nothing for the
//! longest of the engines' idle times (or a handoff asks for the CPU),
//! every engine arms its wake-ups and looks once more
//! ([`Dispatcher::ready_to_sleep`]); if none found anything, the thread
//! sleeps on one epoll set that watches each engine's own, until the
//! nearest of their deadlines, and then lets each engine take what woke
//! it.

use std::io;
use unet_sys::Epoll;

use super::dispatcher::{Dispatcher, Idle, Turn};

/// Engines run in turn on one thread (module documentation).
pub(crate) struct Group {
    engines: Vec<Dispatcher>,
    /// Watches every engine's epoll set.
    epoll: Epoll,
    ready: Vec<u64>,
}

impl Group {
    pub(crate) fn new(engines: Vec<Dispatcher>) -> io::Result<Group> {
        let epoll = Epoll::new()?;
        for (i, d) in engines.iter().enumerate() {
            epoll.add(d.poll_fd(), i as u64)?;
        }
        Ok(Group {
            engines,
            epoll,
            ready: Vec::with_capacity(8),
        })
    }

    /// Run rounds until any engine is told to stop; then reclaim
    /// everything of every engine.
    pub(crate) fn run(&mut self) {
        let idle_for = self
            .engines
            .iter()
            .map(Dispatcher::idle_for)
            .max()
            .unwrap_or_default();
        let mut idle = Idle::default();
        while !self.engines.iter().any(Dispatcher::stopping) {
            // The round's work: any engine's, else any handoff.
            let mut round = Turn::Idle;
            for d in &mut self.engines {
                match d.run_turn() {
                    Turn::Worked => round = Turn::Worked,
                    Turn::Handoff if round == Turn::Idle => round = Turn::Handoff,
                    _ => {}
                }
            }
            if idle.sleep_after(round, idle_for) {
                self.sleep();
            }
        }
        for d in &mut self.engines {
            d.shutdown();
        }
    }

    /// Sleep until something wakes one of the engines or the nearest of
    /// their deadlines, unless one of them finds work as it arms.
    fn sleep(&mut self) {
        let mut timeout = -1;
        for i in 0..self.engines.len() {
            match self.engines[i].ready_to_sleep() {
                Some(t) => timeout = nearer(timeout, t),
                None => {
                    for d in &mut self.engines[..i] {
                        d.not_sleeping();
                    }
                    return;
                }
            }
        }
        // An error (none is expected of a set this thread owns) is a
        // wake-up: every engine looks at its sources below.
        let _ = self.epoll.wait(&mut self.ready, timeout);
        for d in &mut self.engines {
            let work = d.poll_fds(0);
            d.woke(work);
        }
    }
}

/// The nearer of two timeouts in ms (negative: none).
fn nearer(a: i32, b: i32) -> i32 {
    match (a < 0, b < 0) {
        (true, _) => b,
        (_, true) => a,
        _ => a.min(b),
    }
}

#[cfg(test)]
mod tests {
    use super::nearer;

    #[test]
    fn the_nearer_timeout_wins_and_none_is_forever() {
        assert_eq!(nearer(-1, -1), -1);
        assert_eq!(nearer(-1, 5), 5);
        assert_eq!(nearer(7, -1), 7);
        assert_eq!(nearer(7, 0), 0);
        assert_eq!(nearer(3, 9), 3);
    }
}
