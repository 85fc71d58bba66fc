//! The UDP wire between engines.
//!
//! An endpoint address on the network is *(engine's UDP address:port,
//! endpoint id)*. Engines exchange frames, one per UDP datagram:
//!
//! - [`frame`]: the frame format, pure and zero-copy ([`Frame::parse`],
//!   [`Frame::emit`]). Every frame starts with a 12-byte common header
//!   (big-endian):
//!
//!   ```text
//!    0        2        3        4                                12
//!    +--------+--------+--------+--------------------------------+
//!    | magic  |version |  kind  |      src_engine (incarnation)   |
//!    | "UN"   |   1    |   u8   |              u64               |
//!    +--------+--------+--------+--------------------------------+
//!   ```
//!
//!   followed by a kind-specific part: `Data` (48-byte header, then a
//!   fragment of a message of at most [`MAX_MESSAGE`] = 1 MiB, with its
//!   offset carried explicitly), `OpenRequest`, `OpenAccept`, `OpenRefuse`,
//!   `Close`, `Keepalive` and `Confirm`; VIA's `ViOpen`, `ViAccept`,
//!   `ViRefuse`, `ViClose` and `ViAck` (kinds `0x10..=0x14`; a VI's
//!   messages are Data frames flagged [`DATA_FLAG_VI`]). With a cluster
//!   key, every kind but those of the data path (`Data`, `ViAck`:
//!   [`Kind::is_data_path`]) is followed by an authentication trailer
//!   ([`auth`]). The full layout, with every field offset, is drawn in
//!   [`frame`]. Kinds `0x15..=0x1F` are kept for VIA, `0x22..=0x2F` for
//!   UDM, `0x30..=0x3F` for SPINE; an unknown kind is a counted drop, not an
//!   error.
//! - [`frag`]: cutting messages into fragments of one stride, and the
//!   [`Reassembler`] (bounded memory, timeout eviction, a no-copy fast path
//!   for one-fragment messages).
//! - [`transport`]: the [`Transport`] interface the engine's remote side
//!   uses, so that other ports go beside UDP (a raw-frame port for SPINE's
//!   router, a second socket per adapter); [`MemoryPort`] joins engines
//!   in one process (tests, simulations).
//! - [`udp`]: the [`UdpPort`], a non-blocking socket sending a [`SendBatch`]
//!   with `sendmmsg` and receiving with `recvmmsg`, 64 datagrams per system
//!   call, using UDP segmentation and receive coalescing offloads when the
//!   kernel has them, with seeded fault injection for tests.
//! - [`reliable`]: VIA's reliability levels: acks, credit, retransmission.
//! - `port`: the engine's wire port (`WirePort`): the transport, the send
//!   batch, reassembly, admission (`admission`: allowed peers, per-peer
//!   and per-IP bounds), authentication and per-peer liveness; it checks
//!   every frame's token and sender once and sorts each frame to the
//!   system it belongs to (U-Net's remote channels, the VIs' inbox, the
//!   UDM links' inbox).
//!
//! U-Net is unreliable by design: nothing here retransmits. A lost fragment
//! loses its message, and every datagram or message that is dropped is
//! counted by reason in [`WireStats`].
//!
//! # Using it
//!
//! Send path: message → Data frames → batch → `sendmmsg`. Receive path:
//! `recvmmsg` → [`Frame::parse`] → checks against the engine's tables →
//! [`Reassembler::push`] → message.
//!
//! ```
//! use std::time::Instant;
//! use unet_engine::wire::*;
//!
//! let cfg = PortConfig::loopback(); // PortConfig::ethernet() on real links
//! let mut a = UdpPort::bind("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
//! let mut b = UdpPort::bind("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
//! let (engine_a, token) = (0x1234, 0xfeed); // incarnation id; token from OpenAccept
//!
//! // Send: all fragments of the message, or none (PushError::Full: send, retry).
//! let mut batch = SendBatch::for_port(a.config());
//! let to = DataTarget { dst_endpoint: 1, dst_channel: 0, token, flags: 0 };
//! let msg = vec![7u8; 200_000];
//! batch.push_message(b.local_addr().unwrap(), engine_a, to, 42, &msg).unwrap();
//! a.send_batch(&mut batch).unwrap(); // what EAGAIN left stays in `batch`
//!
//! // Receive: parse, check, reassemble; count every drop.
//! let mut reasm = Reassembler::new(ReassemblyConfig::default());
//! let mut drops = WireStats::default();
//! let mut got = None;
//! let t0 = Instant::now();
//! while got.is_none() && t0.elapsed().as_secs() < 5 {
//!     let now = t0.elapsed().as_nanos() as u64;
//!     b.recv_batch(|src, dgram| {
//!         let frame = match Frame::parse(dgram) {
//!             Ok(f) => f,
//!             Err(e) => return drops.count_drop(e.into()),
//!         };
//!         if let Body::Data(d) = frame.body {
//!             // The engine looks up d.dst_endpoint / d.dst_channel here and
//!             // drops (UnknownEndpoint, UnknownChannel, ForgedToken) on mismatch.
//!             if d.token != token {
//!                 return drops.count_drop(WireDrop::ForgedToken);
//!             }
//!             if let Ok(Some(m)) = reasm.push(src, frame.src_engine, &d, now) {
//!                 got = Some(m.as_slice().to_vec()); // copy into the receiver's buffers
//!                 if let Message::Owned(v) = m {
//!                     reasm.recycle(v);
//!                 }
//!             }
//!         }
//!     })
//!     .unwrap();
//!     reasm.expire(now); // on every loop turn, or at reasm.next_deadline()
//! }
//! assert_eq!(got.as_deref(), Some(&msg[..]));
//! let mut total = a.stats;
//! total.add(&b.stats);
//! total.add(&reasm.stats);
//! total.add(&drops);
//! assert_eq!(total.total_drops(), 0);
//! ```
//!
//! # Drop reasons
//!
//! [`WireDrop`] lists them; [`WireDrop::name`] gives the snake_case name
//! for counters.
//!
//! | reason | counted by | meaning |
//! |---|---|---|
//! | `truncated_frame` … `bad_reason` | engine, from [`FrameError`] | the datagram is not a valid frame |
//! | `forged_token` | engine | Data/Close whose token does not match the channel |
//! | `unknown_endpoint`, `unknown_channel` | engine | no such endpoint / open channel |
//! | `reassembly_timeout` | [`Reassembler`] | a message lost a fragment (one count per message) |
//! | `duplicate_fragment` | [`Reassembler`] | fragment already received |
//! | `inconsistent` | [`Reassembler`] | fragment disagrees with the others of its message |
//! | `memory_budget`, `in_flight_limit` | [`Reassembler`] | no room to start reassembling a message |
//! | `truncated_datagram` | [`UdpPort`] | datagram larger than the receive buffer |
//! | `injected_drop` | [`UdpPort`] | dropped on purpose by fault injection |
//! | `send_failed` | [`UdpPort`] | the kernel refused a datagram (not `EAGAIN`) |
//! | `send_queue_full` | engine | the send batch stayed full: message given up |
//! | `message_too_large` | [`SendBatch`] | message can never be queued (over 1 MiB, or over the queue) |
//! | `peer_not_allowed` | engine | from an address neither allowed nor opened to; or an open from one not allowed |
//! | `bad_mac`, `replay` | engine, with a cluster key ([`auth`]) | control frame unauthenticated, or not fresh |
//! | `peer_channels_full`, `peer_half_open_full` | engine | an open beyond the peer's bounds |
//!
//! # Trust
//!
//! Nothing read from the wire is trusted: [`Frame::parse`] checks every
//! length before anything is read, the reassembler checks every fragment
//! against its message before copying, and no input makes anything panic or
//! allocate beyond the configured budgets. Checking tokens, endpoints and
//! channels against the engine's tables is the port's job, with the tables
//! each system registers or names there.

pub mod auth;
pub mod frag;
pub mod frame;
pub mod reliable;
pub mod transport;
pub mod udp;

pub(crate) mod admission;
pub(crate) mod port;

use unet_abi::{wire_drop_slot, EngineCounter};

pub use auth::ClusterKey;
pub use frag::{
    fragment_count, fragments, FragmentError, Fragments, Message, Piece, Reassembler,
    ReassemblyConfig,
};
pub use frame::{
    Body, Close, Data, Frame, FrameError, Kind, OpenAccept, OpenRefuse, OpenRequest, RefuseReason,
    UdmAccept, UdmJoin, ViAccept, ViAck, ViClose, ViOpen, ViRefuse, DATA_FLAG_VI, DATA_HEADER_LEN,
    MAX_DATAGRAM, MAX_MESSAGE, VI_CLOSE_NORMAL,
};
pub use transport::{MemoryHub, MemoryPort, Transport};
pub use udp::{
    DataTarget, PortConfig, PushError, SendBatch, UdpPort, ETHERNET_DATAGRAM, LOOPBACK_DATAGRAM,
    MAX_BATCH, MIN_DATAGRAM,
};

/// Defines [`WireDrop`] from one list: each reason with its engine counter
/// and its name. The enum, [`WireDrop::COUNT`], [`WireDrop::ALL`],
/// [`WireDrop::name`] and [`WireDrop::counter`] all come from the same
/// lines, so a reason cannot be added to one and missed by another.
macro_rules! wire_drops {
    ($($(#[$m:meta])* $v:ident => $counter:ident, $name:literal;)*) => {
        /// Why a datagram or a message was dropped. Each has a counter in
        /// [`WireStats::drops`], indexed by `reason as usize`, and one in
        /// the engine's counters segment, [`WireDrop::counter`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum WireDrop {
            $($(#[$m])* $v,)*
        }

        impl WireDrop {
            /// Number of reasons.
            pub const COUNT: usize = [$(WireDrop::$v),*].len();

            /// Every reason, in counter-index order.
            pub const ALL: [WireDrop; WireDrop::COUNT] = [$(WireDrop::$v),*];

            /// The snake_case name, for counters and `unet stat`.
            pub const fn name(self) -> &'static str {
                match self {
                    $(WireDrop::$v => $name,)*
                }
            }

            /// The engine counter (in the counters segment) that counts
            /// this reason.
            pub const fn counter(self) -> EngineCounter {
                match self {
                    $(WireDrop::$v => EngineCounter::$counter,)*
                }
            }
        }
    };
}

wire_drops! {
    /// Datagram shorter than its frame header ([`FrameError::Truncated`]).
    TruncatedFrame => WireDropTruncatedFrame, "truncated_frame";
    /// Not a unet frame ([`FrameError::BadMagic`]).
    BadMagic => WireDropBadMagic, "bad_magic";
    /// Frame version not spoken here ([`FrameError::BadVersion`]).
    BadVersion => WireDropBadVersion, "bad_version";
    /// Frame kind not defined by this version ([`FrameError::UnknownKind`]).
    UnknownKind => WireDropUnknownKind, "unknown_kind";
    /// Inconsistent lengths in a frame, or a holding bound of 0
    /// ([`FrameError::BadLength`]).
    BadLength => WireDropBadLength, "bad_length";
    /// Unknown OpenRefuse or ViRefuse reason, or ViOpen reliability level
    /// ([`FrameError::BadReason`]).
    BadReason => WireDropBadReason, "bad_reason";
    /// Token does not match the channel: forged or stale frame.
    ForgedToken => WireDropForgedToken, "forged_token";
    /// No endpoint with the destination id.
    UnknownEndpoint => WireDropUnknownEndpoint, "unknown_endpoint";
    /// No open channel with the destination index.
    UnknownChannel => WireDropUnknownChannel, "unknown_channel";
    /// An incomplete message timed out: one count per lost message.
    ReassemblyTimeout => WireDropReassemblyTimeout, "reassembly_timeout";
    /// A fragment received twice.
    DuplicateFragment => WireDropDuplicateFragment, "duplicate_fragment";
    /// A fragment whose length, count or stride disagrees with its message.
    Inconsistent => WireDropInconsistent, "inconsistent";
    /// Reassembly memory budget exhausted: the fragment could not start a
    /// message.
    MemoryBudget => WireDropMemoryBudget, "memory_budget";
    /// Too many incomplete messages: the fragment could not start a message.
    InFlightLimit => WireDropInFlightLimit, "in_flight_limit";
    /// Received datagram larger than the port's datagram buffer.
    TruncatedDatagram => WireDropTruncatedDatagram, "truncated_datagram";
    /// Dropped by fault injection.
    InjectedDrop => WireDropInjectedDrop, "injected_drop";
    /// The kernel refused to send the datagram (an error other than `EAGAIN`).
    SendFailed => WireDropSendFailed, "send_failed";
    /// The send batch had no room for the message, and the engine gave it up.
    SendQueueFull => WireDropSendQueueFull, "send_queue_full";
    /// The message is longer than [`MAX_MESSAGE`] or cannot be fragmented
    /// with the port's datagram size.
    MessageTooLarge => WireDropMessageTooLarge, "message_too_large";
    /// From an address neither allowed (`EngineConfig::allow_peers`) nor
    /// a peer this engine opened a channel to; or an open request from an
    /// address not allowed.
    PeerNotAllowed => WireDropPeerNotAllowed, "peer_not_allowed";
    /// With a cluster key: a control frame whose MAC does not check.
    BadMac => WireDropBadMac, "bad_mac";
    /// With a cluster key: a control frame seen before or stamped outside
    /// the replay window.
    Replay => WireDropReplay, "replay";
    /// An open refused: the peer holds its most channels.
    PeerChannelsFull => WireDropPeerChannelsFull, "peer_channels_full";
    /// An open refused: the peer holds its most unconfirmed channels.
    PeerHalfOpenFull => WireDropPeerHalfOpenFull, "peer_half_open_full";
}

/// True when `counter` is `"wire_drop_"` followed by `reason`.
const fn named_after(counter: &str, reason: &str) -> bool {
    const PREFIX: &[u8] = b"wire_drop_";
    let (c, r) = (counter.as_bytes(), reason.as_bytes());
    if c.len() != PREFIX.len() + r.len() {
        return false;
    }
    let mut i = 0;
    while i < c.len() {
        let want = if i < PREFIX.len() {
            PREFIX[i]
        } else {
            r[i - PREFIX.len()]
        };
        if c[i] != want {
            return false;
        }
        i += 1;
    }
    true
}

// Checked when the crate compiles, for every reason: `ALL` is in
// discriminant order; its counter is named after it; and the counter sits
// at the slot `wire_drop_slot(reason)` of the ABI, the arithmetic callers
// that index the counters by reason rely on. A reason added with a counter
// anywhere else fails here, not in `unet stat`.
const _: () = {
    let mut i = 0;
    while i < WireDrop::COUNT {
        let w = WireDrop::ALL[i];
        assert!(w as usize == i);
        assert!(named_after(w.counter().name(), w.name()));
        assert!(w.counter() as usize == wire_drop_slot(i));
        i += 1;
    }
};

impl From<FrameError> for WireDrop {
    fn from(e: FrameError) -> WireDrop {
        match e {
            FrameError::Truncated => WireDrop::TruncatedFrame,
            FrameError::BadMagic => WireDrop::BadMagic,
            FrameError::BadVersion => WireDrop::BadVersion,
            FrameError::UnknownKind => WireDrop::UnknownKind,
            FrameError::BadLength => WireDrop::BadLength,
            FrameError::BadReason => WireDrop::BadReason,
            FrameError::BufferTooSmall => WireDrop::MessageTooLarge,
        }
    }
}

/// Plain counters of the wire. Each component ([`UdpPort`], [`Reassembler`],
/// [`SendBatch`]) keeps its own; [`WireStats::add`] sums them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WireStats {
    /// Datagrams handed to the kernel and accepted.
    pub datagrams_sent: u64,
    /// UDP payload bytes of those datagrams.
    pub bytes_sent: u64,
    /// Datagrams received (truncated ones included).
    pub datagrams_received: u64,
    /// UDP payload bytes received.
    pub bytes_received: u64,
    /// Calls of [`UdpPort::send_batch`] that had something to send.
    pub send_batches: u64,
    /// `sendmmsg` system calls.
    pub send_syscalls: u64,
    /// `recvmmsg` system calls.
    pub recv_syscalls: u64,
    /// `recvmmsg` calls that found nothing (`EAGAIN`).
    pub recv_empty: u64,
    /// Runs of datagrams sent as one with segmentation offload.
    pub gso_runs: u64,
    /// Received buffers that held a coalesced run of datagrams.
    pub gro_runs: u64,
    /// Datagrams sent twice by fault injection.
    pub injected_duplicates: u64,
    /// Datagrams held back behind later ones by fault injection.
    pub injected_reorders: u64,
    /// Messages queued for sending by [`SendBatch::push_message`].
    pub messages_queued: u64,
    /// Messages completed by the [`Reassembler`] (one-fragment ones included).
    pub messages_reassembled: u64,
    /// Drops by reason, indexed by `WireDrop as usize`.
    pub drops: [u64; WireDrop::COUNT],
    /// Packets the kernel dropped because the socket's receive buffer was
    /// full (`SO_RXQ_OVFL`): each datagram sent alone counts one, a run
    /// sent with segmentation offload and kept whole by `UDP_GRO` counts
    /// one for the run. The kernel tells the count with the next packet it
    /// queues, or when asked ([`UdpPort::sync_socket_drops`]).
    pub socket_overflows: u64,
}

impl WireStats {
    /// Counts one drop.
    #[inline]
    pub fn count_drop(&mut self, why: WireDrop) {
        self.drops[why as usize] += 1;
    }

    /// The counter of one drop reason.
    pub fn drop_count(&self, why: WireDrop) -> u64 {
        self.drops[why as usize]
    }

    /// Sum of all drop counters.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Adds every counter of `other` to `self`.
    pub fn add(&mut self, other: &WireStats) {
        self.datagrams_sent += other.datagrams_sent;
        self.bytes_sent += other.bytes_sent;
        self.datagrams_received += other.datagrams_received;
        self.bytes_received += other.bytes_received;
        self.send_batches += other.send_batches;
        self.send_syscalls += other.send_syscalls;
        self.recv_syscalls += other.recv_syscalls;
        self.recv_empty += other.recv_empty;
        self.gso_runs += other.gso_runs;
        self.gro_runs += other.gro_runs;
        self.injected_duplicates += other.injected_duplicates;
        self.injected_reorders += other.injected_reorders;
        self.messages_queued += other.messages_queued;
        self.messages_reassembled += other.messages_reassembled;
        for (a, b) in self.drops.iter_mut().zip(other.drops.iter()) {
            *a += b;
        }
        self.socket_overflows += other.socket_overflows;
    }

    /// `(name, value)` of every drop counter, in [`WireDrop::ALL`] order.
    pub fn drop_counters(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        WireDrop::ALL
            .iter()
            .map(|w| (w.name(), self.drops[*w as usize]))
    }
}

/// A small seeded generator (xorshift64*), deterministic across platforms,
/// for fault injection. Not for anything secret.
#[derive(Debug, Clone)]
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn new(seed: u64) -> Self {
        // SplitMix64 step so that small or zero seeds give a good state.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        XorShift(if z == 0 { 1 } else { z })
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// True with probability `ppm / 1_000_000`.
    pub(crate) fn chance_ppm(&mut self, ppm: u32) -> bool {
        ppm > 0 && (self.next_u64() % 1_000_000) < u64::from(ppm)
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    pub(crate) use super::XorShift;

    /// `len` bytes of a pattern that depends on `seed` and on the position,
    /// so misplaced or mixed-up bytes are detected.
    pub(crate) fn pattern(len: usize, seed: u64) -> Vec<u8> {
        let mut r = XorShift::new(seed);
        let mut v = Vec::with_capacity(len);
        while v.len() < len {
            let w = r.next_u64().to_le_bytes();
            let n = (len - v.len()).min(8);
            v.extend_from_slice(&w[..n]);
        }
        v
    }

    impl XorShift {
        /// Fisher-Yates shuffle.
        pub(crate) fn shuffle<T>(&mut self, v: &mut [T]) {
            for i in (1..v.len()).rev() {
                let j = (self.next_u64() % (i as u64 + 1)) as usize;
                v.swap(i, j);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_names_are_unique_snake_case_and_indexed() {
        let mut names = std::collections::HashSet::new();
        for (i, w) in WireDrop::ALL.iter().enumerate() {
            assert_eq!(*w as usize, i);
            let n = w.name();
            assert!(n.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{n}");
            assert!(names.insert(n), "duplicate {n}");
        }
    }

    #[test]
    fn every_reason_has_its_own_engine_counter() {
        let mut slots = std::collections::HashSet::new();
        for w in WireDrop::ALL {
            let c = w.counter();
            assert!(EngineCounter::ALL.contains(&c), "{w:?}");
            assert!(slots.insert(c as usize), "{w:?} shares {c:?}");
            assert_eq!(c.name(), format!("wire_drop_{}", w.name()));
            assert_eq!(c as usize, wire_drop_slot(w as usize));
        }
        assert_eq!(slots.len(), WireDrop::COUNT);
        assert!(!named_after("wire_drop_bad", "bad_magic"));
        assert!(!named_after("wire_drop_bad_magix", "bad_magic"));
    }

    #[test]
    fn every_frame_error_maps_to_its_own_reason() {
        let mut seen = std::collections::HashSet::new();
        for e in FrameError::ALL {
            assert!(seen.insert(WireDrop::from(e)), "{e:?}");
        }
    }

    #[test]
    fn stats_add_sums_every_counter() {
        let mut a = WireStats {
            datagrams_sent: 2,
            ..Default::default()
        };
        a.count_drop(WireDrop::BadMagic);
        let mut b = WireStats {
            datagrams_sent: 3,
            recv_empty: 1,
            ..Default::default()
        };
        b.count_drop(WireDrop::BadMagic);
        b.count_drop(WireDrop::SendFailed);
        a.add(&b);
        assert_eq!(a.datagrams_sent, 5);
        assert_eq!(a.recv_empty, 1);
        assert_eq!(a.drop_count(WireDrop::BadMagic), 2);
        assert_eq!(a.total_drops(), 3);
        assert_eq!(a.drop_counters().filter(|(_, v)| *v > 0).count(), 2);
    }

    #[test]
    fn injected_drop_rate_is_close_to_asked() {
        let mut r = XorShift::new(1);
        let n = 200_000;
        let hits = (0..n).filter(|_| r.chance_ppm(100_000)).count();
        assert!((18_000..22_000).contains(&hits), "{hits}");
        let mut r = XorShift::new(1);
        assert!(!(0..1000).any(|_| r.chance_ppm(0)));
        assert!((0..1000).all(|_| r.chance_ppm(1_000_000)));
    }
}
