//! VIA: virtual interfaces, memory regions and completion queues (the
//! Virtual Interface Architecture as the Javia papers use it, section 2.1).
//!
//! A [`Vi`] is one end of a connection, with a send queue and a receive
//! queue of descriptors. Connections follow VIA (and `java.net.Socket`): a
//! process listens on a *discriminator* ([`Session::vi_listen`]), another
//! asks to connect to it ([`Session::vi_connect`]), the first accepts or
//! rejects ([`ViServer::accept`], [`ConnRequest`]); the engine grants the
//! connection, and only the two VIs it made can use it.
//!
//! Data lives in [`MemRegion`]s, shared memory registered with the engine.
//! A descriptor names its data as segments *(region, offset, length)*
//! ([`ViSeg`]), gathered into one message on send and scattered on
//! receive; each is checked against its region before anything is
//! copied. A descriptor completes with a status ([`ViCompletion`]);
//! several VIs' queues may report to one [`CompletionQueue`].
//!
//! Two local VIs share a direct connection: one ring each way, mapped by
//! the two processes only, no engine in between. The sender copies its
//! segments straight into the ring, the receiver straight from the ring
//! into the buffers of its next posted receive descriptor: one copy on
//! each side and no staging buffer. The ring never loses a message, so
//! every reliability level holds; a send of reliable reception completes
//! when the receiver has placed the message.
//!
//! A message that finds no receive posted waits in the ring (up to the
//! ring's size; then the sender's descriptors wait in its send queue):
//! nothing is lost and the connection stays up. With
//! [`ViAttributes::strict_rnr`] the receiving VI breaks instead, as VIA
//! does. Every error is VIA's *error state*: the VI stays broken, every
//! outstanding descriptor completes with the reason, and the peer is told.
//!
//! The folder, in the order a descriptor meets it:
//!
//! - `region`: memory registered with the engine ([`MemRegion`]), the
//!   segments a descriptor names in it ([`ViSeg`]), and the regions a VI's
//!   posted descriptors hold;
//! - `desc`: descriptors and completions ([`ViCompletion`], [`ViQueue`],
//!   [`ViState`], [`PostError`], [`WaitError`]), a posted descriptor
//!   resolved into pieces, and reading a large message from the peer's
//!   regions;
//! - `cq`: completion queues ([`CompletionQueue`]);
//! - `vi_core`: the VI core, its queues and counters ([`ViStats`]),
//!   posting, completing, breaking, and lending a local VI's data path;
//! - `direct_path`: a local VI's ring shared with its peer, sends into it
//!   and receives placed from it;
//! - `engine_side`: the queues of a VI the engine carries to another
//!   engine;
//! - `vi`: the VI itself ([`Vi`]), its core owned or shared with
//!   completion queues;
//! - `connect`: setting up ([`Session::register_memory`],
//!   [`Session::vi_listen`], [`Session::vi_connect`], [`ViServer`],
//!   [`ConnRequest`]).
//!
//! [`Session::vi_listen`]: crate::Session::vi_listen
//! [`Session::vi_connect`]: crate::Session::vi_connect
//! [`Session::register_memory`]: crate::Session::register_memory

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

pub use unet_abi::{Reliability, ViError, VI_MAX_SEGMENTS, VI_MAX_TRANSFER};
use unet_control::ViParams;

mod connect;
mod cq;
#[allow(unsafe_code)]
mod desc;
mod direct_path;
mod engine_side;
mod region;
mod vi;
mod vi_core;

pub use connect::{engine_code, ConnRequest, ViServer};
pub use cq::CompletionQueue;
pub(crate) use desc::pull_min_bytes;
pub use desc::{PostError, ViCompletion, ViQueue, ViState, WaitError, PULL_MIN};
pub use region::{MemRegion, ViSeg};
pub use vi::Vi;
pub use vi_core::ViStats;
pub(crate) use vi_core::{DirectReturn, LendRefusal};

/// How a VI is made. Both ends must ask for the same reliability level.
#[derive(Clone, Debug)]
pub struct ViAttributes {
    /// The reliability level (default: reliable delivery).
    pub reliability: Reliability,
    /// VIA's strict behaviour: a message that arrives with no receive
    /// posted breaks the VI ([`ViError::ReceiverNotReady`]) instead of
    /// waiting for one.
    pub strict_rnr: bool,
    /// Most send descriptors outstanding (posted and not yet taken back
    /// with [`Vi::send_done`]).
    pub send_queue: u32,
    /// Most receive descriptors outstanding.
    pub recv_queue: u32,
    /// How long a blocking wait spins before it sleeps, at least: a VI
    /// whose waits have lately lasted longer spins up to twice their
    /// recent mean, at most [`ViAttributes::SPIN_ADAPT_MAX`] (0: never
    /// spin).
    pub spin: Duration,
    /// The completion queue the send queue reports to (VIA's
    /// `VipCreateVi`), if any.
    pub send_cq: Option<CompletionQueue>,
    /// The completion queue the receive queue reports to, if any.
    pub recv_cq: Option<CompletionQueue>,
    /// How long the peer of a VI carried between engines may stay silent
    /// while the VI waits for it (reliable levels) before the VI breaks
    /// with [`ViError::Timeout`]; `Duration::ZERO` (the default): the
    /// engine's setting (5 s unless its daemon says otherwise). Rounded
    /// up to milliseconds.
    pub break_timeout: Duration,
}

impl Default for ViAttributes {
    fn default() -> Self {
        ViAttributes {
            reliability: Reliability::ReliableDelivery,
            strict_rnr: false,
            send_queue: 1024,
            recv_queue: 1024,
            spin: Duration::from_micros(50),
            send_cq: None,
            recv_cq: None,
            break_timeout: Duration::ZERO,
        }
    }
}

impl ViAttributes {
    /// The longest a wait spins when it adapts to the waits before it.
    pub const SPIN_ADAPT_MAX: Duration = Duration::from_micros(250);

    pub(crate) fn params(&self) -> ViParams {
        ViParams {
            reliability: self.reliability,
            strict_rnr: self.strict_rnr,
            break_timeout_ms: self
                .break_timeout
                .as_nanos()
                .div_ceil(1_000_000)
                .min(u128::from(u32::MAX)) as u32,
        }
    }
}

/// Lock `m`, taking it over if a holder panicked.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
