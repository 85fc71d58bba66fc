//! U-Net's part of the loop: the endpoints with their data path, the
//! remote channels and the applets, turned by the dispatcher as one
//! [`Part`].
//!
//! A turn takes, in this order, what came from the wire (the remote
//! channels' arrivals; the port sorts the other systems' frames to their
//! inboxes on the way), the buffered endpoints' waiting messages, every
//! endpoint's send ring, and the applets' queued arrivals and timers.
//! The wire comes first so that what the send rings queue on the port
//! leaves at the end of the same turn, when the dispatcher flushes it,
//! without a receive in between (the dispatcher's docs).

use std::time::{Duration, Instant};

use crate::part::{Context, Part};
use crate::unet::applets::AppletHost;
use crate::unet::datapath::{arrive, DataPath};
use crate::unet::endpoints::EndpointTable;
use crate::unet::remote::{RemoteChannels, RemoteSide};

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

impl Part for UnetPart {
    fn turn(&mut self, cx: &mut Context<'_>) -> usize {
        let UnetPart {
            eps,
            applets,
            chans,
        } = self;
        let mut work = 0;
        // Receive from the wire; whole messages arrive at their endpoints.
        if let Some(port) = cx.port.as_deref_mut() {
            work += RemoteSide::new(port, chans).poll(eps, &mut |eps, di, id, chan, msg| {
                arrive(eps, applets, di, id, chan, msg)
            });
        }
        // Buffered endpoints' waiting messages before the send rings:
        // room that appeared goes to them before anything new (a message
        // from the wire to such an endpoint moved them on first itself,
        // `EndpointTable::deliver_from`).
        work += eps.drain_backlogs();
        let mut dp = DataPath {
            eps,
            port: cx.port.as_deref_mut(),
            applets,
        };
        for idx in 0..dp.eps.len() {
            if dp.eps.get(idx).is_some() {
                work += dp.poll_send_ring(idx);
            }
        }
        if dp.applets.any() {
            if !dp.applets.pending.is_empty() {
                work += dp.run_pending();
            }
            if dp.applets.has_timers() {
                work += dp.run_timers();
            }
        }
        work
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
