//! UDM's part of the loop: the jobs' turn (divert rings, virtual
//! buffers, the atomicity timeout, see [`Jobs::poll`]), then the links'
//! to other engines ([`crate::udm::remote::poll`]). What it leaves for
//! control (the segments of departed nodes to release on the set-up
//! thread, the links' set-up frames and joins due) stays in [`Jobs`]
//! until control takes it after the turn.

use std::time::Instant;

use unet_abi::EngineCounter;

use crate::part::{Context, Part};
use crate::udm::{remote, Jobs};

impl Part for Jobs {
    // Inlined into the loop (statically dispatched, see `each_part!`):
    // a turn with no job and no port costs a few loads.
    #[inline(always)]
    fn turn(&mut self, cx: &mut Context<'_>) -> usize {
        let mut work = 0;
        if !self.is_empty() {
            work += self.poll();
            if self.visits != 0 {
                let n = std::mem::take(&mut self.visits);
                cx.counters.engine(EngineCounter::UdmNodeVisits, n);
            }
            if self.proc_reads != 0 {
                let n = std::mem::take(&mut self.proc_reads);
                cx.counters.engine(EngineCounter::UdmProcReads, n);
            }
        }
        if let Some(port) = cx.port.as_deref_mut() {
            work += remote::poll(self, port, cx.counters);
        }
        work
    }

    /// A node's atomicity-timeout look or the sweep, or a link's timer,
    /// retry or retirement.
    fn deadline(&self, cx: &Context<'_>) -> Option<Instant> {
        let jobs = self.next_deadline();
        let links = cx
            .port
            .as_deref()
            .and_then(|p| remote::next_deadline(self, p));
        jobs.into_iter().chain(links).min()
    }

    /// Every job's doorbell flag.
    fn arm(&self, on: bool) {
        Jobs::arm(self, on);
    }
}
