//! U-Net's part of the loop: the endpoints with their data path, the
//! remote channels and the applets, turned by the dispatcher as one
//! [`Part`].
//!
//! A turn takes, in this order, the buffered endpoints' waiting messages,
//! every endpoint's send ring, what came from the wire (the remote
//! channels' arrivals; the port sorts the other systems' frames to their
//! inboxes on the way), and the applets' queued arrivals and timers.
//! The send rings come before the wire: a message between two local
//! endpoints is delivered before the turn spends a receive system call.
//! What the send rings queued on the port leaves before that receive
//! (the port sends its batch before it receives), the rest when the
//! dispatcher flushes the port at the end of the turn.

use std::time::{Duration, Instant};

use crate::part::{Context, Part};
use crate::unet::applets::AppletHost;
use crate::unet::datapath::{arrive, DataPath};
use crate::unet::endpoints::EndpointTable;
use crate::unet::remote::{RemoteChannels, RemoteSide};
use crate::wire::port::WirePort;

/// How long the engine sleeps at most while a buffered endpoint has
/// messages waiting in its virtual buffer.
const BACKLOG_POLL: Duration = Duration::from_millis(1);

/// U-Net in the engine: what its turns move.
pub(crate) struct UnetPart {
    /// The endpoint table and U-Net delivery.
    pub eps: EndpointTable,
    /// The applets attached to endpoints.
    pub applets: AppletHost,
    /// The remote channels' handshake state (beside the wire's port).
    pub chans: RemoteChannels,
}

impl UnetPart {
    /// The part's turn (`Part::turn`), given the one thing of the
    /// `Context` it uses. Kept out of the loop's body: inlined there, it
    /// pushes the data path's own helpers out of line (more instructions
    /// per message). The port comes in a register: the loop builds no
    /// `Context` in memory for it.
    #[inline(never)]
    fn turn_on(&mut self, port: Option<&mut WirePort>) -> usize {
        let UnetPart {
            eps,
            applets,
            chans,
        } = self;
        let mut work = 0;
        // Buffered endpoints' waiting messages first: room that appeared
        // goes to them before anything new.
        work += eps.drain_backlogs();
        let mut dp = DataPath { eps, port, applets };
        // `poll_send_ring` passes over a free entry itself (one lookup of
        // the endpoint, not two).
        for idx in 0..dp.eps.len() {
            work += dp.poll_send_ring(idx);
        }
        // Receive from the wire; whole messages arrive at their endpoints
        // (one with buffered messages waiting moves them on first,
        // `EndpointTable::deliver_from`).
        if let Some(port) = dp.port.as_deref_mut() {
            work += RemoteSide::new(port, chans).poll(dp.eps, &mut |eps, di, id, chan, msg| {
                arrive(eps, dp.applets, di, id, chan, msg)
            });
        }
        if dp.applets.any() {
            if !dp.applets.pending.is_empty() {
                work += dp.run_pending();
            }
            if dp.applets.has_timers() {
                work += dp.run_timers();
            }
        }
        if dp.applets.has_dirty() {
            dp.flush_stats();
        }
        work
    }
}

impl Part for UnetPart {
    #[inline(always)]
    fn turn(&mut self, cx: &mut Context<'_>) -> usize {
        self.turn_on(cx.port.as_deref_mut())
    }

    /// An open's next retry, an applet's next timer or the end of its
    /// pause, and soon while a buffered endpoint has messages waiting.
    fn deadline(&self, _cx: &Context<'_>) -> Option<Instant> {
        let opens = self.chans.next_retry();
        let applets = self
            .applets
            .attached_indices()
            .iter()
            .filter_map(|&i| self.applets.runner(i).and_then(|r| r.next_deadline()))
            .min();
        // A buffered endpoint with messages waiting: its client does not
        // ring the doorbell when it makes room, so look again soon.
        let backlog = self
            .eps
            .has_backlog()
            .then(|| Instant::now() + BACKLOG_POLL);
        [opens, applets, backlog].into_iter().flatten().min()
    }

    /// Every endpoint's doorbell flag.
    fn arm(&self, on: bool) {
        if on {
            self.eps.arm();
        } else {
            self.eps.disarm();
        }
    }
}
