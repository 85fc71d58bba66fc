//! The counters segment, and the counters a client keeps in its own
//! segments.
//!
//! # Counters segment
//!
//! Owned and written by the engine only; `unet stat` maps it read-only.
//! See [`CountersHeader`], [`EngineCounter`] and [`EndpointCounter`].
//!
//! [`ClientCounter`] indexes the client counters of an endpoint header
//! and of a VI connection's header.

use core::mem::{offset_of, size_of};
use core::sync::atomic::{AtomicU32, AtomicU64};

use crate::{udm, PAGE, VI_COUNTERS};

/// Magic of the counters segment: `b"UNETCT01"`.
pub const COUNTERS_MAGIC: u64 = u64::from_le_bytes(*b"UNETCT01");

/// Number of client counter slots.
pub const CLIENT_COUNTERS: usize = 16;

/// Counters the client library keeps in its own segment.
#[repr(usize)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientCounter {
    /// Messages sent on direct channels (`DirectTxBytes` follows: the
    /// client library updates each pair together).
    DirectTxMsgs = 0,
    /// Bytes sent on direct channels.
    DirectTxBytes = 1,
    /// Messages received on direct channels.
    DirectRxMsgs = 2,
    /// Bytes received on direct channels.
    DirectRxBytes = 3,
    /// Direct records rejected as malformed (the peer broke the ring).
    DirectRxBad = 4,
    /// Times the client slept in a blocking wait.
    Sleeps = 5,
    /// Times the client woke a sleeping direct peer.
    PeerWakeups = 6,
    /// Invocations of an inline applet.
    AppletCalls = 7,
    /// Time spent in an inline applet, ns (one invocation in 64 is timed
    /// and counted 64 times: an estimate).
    AppletTimeNs = 8,
    /// Faults of an inline applet.
    AppletFaults = 9,
    /// Inline applet `doTx` invocations.
    AppletTxCalls = 10,
    /// Inline applet `doRx` invocations.
    AppletRxCalls = 11,
    /// Inline applet `doTimer` invocations.
    AppletTimerCalls = 12,
    /// Longest inline applet invocation, ns.
    AppletMaxNs = 13,
    /// Work (fuel) used by the inline applet.
    AppletFuel = 14,
}

impl ClientCounter {
    /// Every client counter, in slot order.
    pub const ALL: [ClientCounter; 15] = [
        Self::DirectTxMsgs,
        Self::DirectTxBytes,
        Self::DirectRxMsgs,
        Self::DirectRxBytes,
        Self::DirectRxBad,
        Self::Sleeps,
        Self::PeerWakeups,
        Self::AppletCalls,
        Self::AppletTimeNs,
        Self::AppletFaults,
        Self::AppletTxCalls,
        Self::AppletRxCalls,
        Self::AppletTimerCalls,
        Self::AppletMaxNs,
        Self::AppletFuel,
    ];
    /// Name shown by `unet stat`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::DirectTxMsgs => "direct_tx_msgs",
            Self::DirectTxBytes => "direct_tx_bytes",
            Self::DirectRxMsgs => "direct_rx_msgs",
            Self::DirectRxBytes => "direct_rx_bytes",
            Self::DirectRxBad => "direct_rx_bad",
            Self::Sleeps => "sleeps",
            Self::PeerWakeups => "peer_wakeups",
            Self::AppletCalls => "applet_calls",
            Self::AppletTimeNs => "applet_time_ns",
            Self::AppletFaults => "applet_faults",
            Self::AppletTxCalls => "applet_tx_calls",
            Self::AppletRxCalls => "applet_rx_calls",
            Self::AppletTimerCalls => "applet_timer_calls",
            Self::AppletMaxNs => "applet_max_ns",
            Self::AppletFuel => "applet_fuel",
        }
    }
}

// -------------------------------------------------------------------------
// Counters segment
// -------------------------------------------------------------------------

/// Header of the counters segment.
///
/// ```text
///  0x000 magic u64, version u32, max_endpoints u32
///  0x010 engine_id u64, pid u32, reserved u32
///  0x040 engine counters: ENGINE_COUNTERS × u64
///  0x400 endpoint slots: max_endpoints × EndpointSlot (1 KiB each):
///        0x000 live u32, endpoint_id u32, pid u32, channels_peak u32
///        0x010 counters: ENDPOINT_COUNTERS × u64 (EndpointCounter)
///        0x380 client: CLIENT_COUNTERS × u64 (ClientCounter, copied on Stat)
/// ```
#[repr(C)]
pub struct CountersHeader {
    /// [`COUNTERS_MAGIC`].
    pub magic: u64,
    /// [`VERSION`](crate::VERSION).
    pub version: u32,
    /// Number of endpoint slots.
    pub max_endpoints: u32,
    /// Engine incarnation id.
    pub engine_id: u64,
    /// Engine process id.
    pub pid: u32,
    /// Reserved.
    pub _reserved: u32,
    _pad: [u8; 32],
    /// Engine-wide counters, indexed by [`EngineCounter`].
    pub engine: [AtomicU64; ENGINE_COUNTERS],
}

/// Number of engine counter slots.
pub const ENGINE_COUNTERS: usize = 112;
/// Offset of the first endpoint slot in the counters segment.
pub const ENDPOINT_SLOTS_OFF: usize = 0x400;

/// Counters of one endpoint, owned by the engine.
#[repr(C)]
pub struct EndpointSlot {
    /// 1 while the slot describes a live endpoint.
    pub live: AtomicU32,
    /// Endpoint id.
    pub endpoint_id: AtomicU32,
    /// Process id of the owner (0 if unknown).
    pub pid: AtomicU32,
    /// The most channel tags the endpoint held at once (a high-water
    /// mark; the current count is the `ChannelsOpen` level).
    pub channels_peak: AtomicU32,
    /// Counters indexed by [`EndpointCounter`].
    pub counters: [AtomicU64; ENDPOINT_COUNTERS],
    /// The endpoint's client counters (indexed by [`ClientCounter`]), as
    /// the client library last reported them in its endpoint header: the
    /// engine copies them here when a `Stat` request comes. They are the
    /// client's word, not the engine's.
    pub client: [AtomicU64; CLIENT_COUNTERS],
}

/// Number of endpoint counter slots.
pub const ENDPOINT_COUNTERS: usize = 110;

const _: () = {
    assert!(offset_of!(CountersHeader, engine) == 0x40);
    assert!(0x40 + 8 * ENGINE_COUNTERS <= ENDPOINT_SLOTS_OFF);
    assert!(size_of::<EndpointSlot>() == 1024);
    assert!(offset_of!(EndpointSlot, client) == 0x380);
};

/// Bytes of a counters segment with `max_endpoints` endpoint slots (and
/// [`VI_SLOTS`] VI slots, then [`udm::UDM_SLOTS`] UDM node slots, after
/// them).
pub const fn counters_segment_size(max_endpoints: u32) -> usize {
    let b = udm_slots_off(max_endpoints) + udm::UDM_SLOTS * size_of::<udm::UdmSlot>();
    (b + PAGE - 1) & !(PAGE - 1)
}

/// Offset of the first UDM node slot in a counters segment with
/// `max_endpoints` endpoint slots.
pub const fn udm_slots_off(max_endpoints: u32) -> usize {
    let b = vi_slots_off(max_endpoints) + VI_SLOTS * size_of::<ViSlot>();
    (b + PAGE - 1) & !(PAGE - 1)
}

/// Number of VI slots in the counters segment: the first this many VIs
/// (by id) are shown by `unet stat`.
pub const VI_SLOTS: usize = 1024;

/// Offset of the first VI slot in a counters segment with
/// `max_endpoints` endpoint slots.
pub const fn vi_slots_off(max_endpoints: u32) -> usize {
    let b = ENDPOINT_SLOTS_OFF + max_endpoints as usize * size_of::<EndpointSlot>();
    (b + PAGE - 1) & !(PAGE - 1)
}

/// What `unet stat` shows of one VI (256 bytes), filled by the engine
/// when a `Stat` request comes.
///
/// ```text
///  0x00 live u32, vi_id u32, pid u32, state u32 (0 or a ViError code)
///  0x10 reliability u8, carried u8 (1: by the engine to another engine,
///       0: a local VI on a direct ring), strict_rnr u8, family u8
///       (0 local, 4, 6), port u16, reserved u16, peer_vi u32,
///       reserved u32
///  0x20 addr [u8; 16]  the peer engine's address
///  0x30 counters: VI_COUNTERS × u64 (ViCounter; a local VI fills the
///       first four, as its two processes count them)
/// ```
#[repr(C)]
pub struct ViSlot {
    /// 1 while the slot describes a VI.
    pub live: AtomicU32,
    /// The VI's id.
    pub vi_id: AtomicU32,
    /// Its owner's process id (0 if unknown).
    pub pid: AtomicU32,
    /// 0 while connected, else the `ViError` code.
    pub state: AtomicU32,
    /// Reliability (u8), carried (u8), strict_rnr (u8), family (u8).
    pub kind: AtomicU32,
    /// Peer engine's port (low 16 bits).
    pub port: AtomicU32,
    /// The peer VI's id (0: not known).
    pub peer_vi: AtomicU32,
    /// Reserved.
    pub _reserved: AtomicU32,
    /// The peer engine's address (IPv4 in the first 4 bytes), as 4 words.
    pub addr: [AtomicU32; 4],
    /// Counters, indexed by `ViCounter`.
    pub counters: [AtomicU64; VI_COUNTERS],
    _pad: [u8; 256 - 0x30 - 8 * VI_COUNTERS],
}

const _: () = {
    assert!(size_of::<ViSlot>() == 256);
    assert!(offset_of!(ViSlot, kind) == 0x10);
    assert!(offset_of!(ViSlot, addr) == 0x20);
    assert!(offset_of!(ViSlot, counters) == 0x30);
};

counter_enum! {
    /// Engine-wide counters.
    EngineCounter {
        /// Loop iterations that found work.
        BusyPolls = 0 => "busy_polls",
        /// Times the engine went to sleep.
        Sleeps = 1 => "sleeps",
        /// Wakeups from sleep.
        Wakeups = 2 => "wakeups",
        /// Wakeups that found nothing to do.
        SpuriousWakeups = 3 => "spurious_wakeups",
        /// Endpoints created.
        EndpointsCreated = 4 => "endpoints_created",
        /// Endpoints reclaimed (closed or owner died).
        EndpointsReclaimed = 5 => "endpoints_reclaimed",
        /// Control connections accepted.
        ControlAccepted = 6 => "control_accepted",
        /// Control connections closed.
        ControlClosed = 7 => "control_closed",
        /// Control messages refused as malformed.
        ControlBad = 8 => "control_bad",
        /// Direct connections set up.
        DirectConns = 9 => "direct_conns",
        /// Datagrams sent.
        WireTxDatagrams = 10 => "wire_tx_datagrams",
        /// Bytes sent on the wire.
        WireTxBytes = 11 => "wire_tx_bytes",
        /// Datagrams received.
        WireRxDatagrams = 12 => "wire_rx_datagrams",
        /// Bytes received from the wire.
        WireRxBytes = 13 => "wire_rx_bytes",
        /// sendmmsg calls.
        WireTxBatches = 14 => "wire_tx_batches",
        /// recvmmsg calls.
        WireRxBatches = 15 => "wire_rx_batches",
        /// Messages reassembled from several fragments.
        WireReassembled = 16 => "wire_reassembled",
        /// Wire drop: the datagram is shorter than its frame header says.
        WireDropTruncatedFrame = 17 => "wire_drop_truncated_frame",
        /// Wire drop: not a unet frame.
        WireDropBadMagic = 18 => "wire_drop_bad_magic",
        /// Wire drop: unsupported frame version.
        WireDropBadVersion = 19 => "wire_drop_bad_version",
        /// Wire drop: unknown frame kind.
        WireDropUnknownKind = 20 => "wire_drop_unknown_kind",
        /// Wire drop: inconsistent message or fragment lengths.
        WireDropBadLength = 21 => "wire_drop_bad_length",
        /// Wire drop: unknown refusal reason.
        WireDropBadReason = 22 => "wire_drop_bad_reason",
        /// Wire drop: wrong channel token or source address.
        WireDropForgedToken = 23 => "wire_drop_forged_token",
        /// Wire drop: no such endpoint.
        WireDropUnknownEndpoint = 24 => "wire_drop_unknown_endpoint",
        /// Wire drop: no such open channel.
        WireDropUnknownChannel = 25 => "wire_drop_unknown_channel",
        /// Wire drop: a message lost a fragment (one per message).
        WireDropReassemblyTimeout = 26 => "wire_drop_reassembly_timeout",
        /// Wire drop: fragment already received.
        WireDropDuplicateFragment = 27 => "wire_drop_duplicate_fragment",
        /// Wire drop: fragment disagrees with the rest of its message.
        WireDropInconsistent = 28 => "wire_drop_inconsistent",
        /// Wire drop: reassembly memory exhausted.
        WireDropMemoryBudget = 29 => "wire_drop_memory_budget",
        /// Wire drop: too many messages in reassembly.
        WireDropInFlightLimit = 30 => "wire_drop_in_flight_limit",
        /// Wire drop: datagram larger than the receive buffer.
        WireDropTruncatedDatagram = 31 => "wire_drop_truncated_datagram",
        /// Wire drop: dropped on purpose by fault injection.
        WireDropInjectedDrop = 32 => "wire_drop_injected_drop",
        /// Wire drop: the kernel refused the datagram.
        WireDropSendFailed = 33 => "wire_drop_send_failed",
        /// Wire drop: the engine's send queue was full.
        WireDropSendQueueFull = 34 => "wire_drop_send_queue_full",
        /// Wire drop: message too large for the wire.
        WireDropMessageTooLarge = 35 => "wire_drop_message_too_large",
        /// Channel-open requests received over the wire.
        WireOpenRequests = 36 => "wire_open_requests",
        /// Channel-open requests refused.
        WireOpenRefused = 37 => "wire_open_refused",
        /// Channel opens that got no answer.
        WireOpenTimeouts = 38 => "wire_open_timeouts",
        /// Sleeps taken at once, without the usual last polls, because the
        /// client just served spins on the engine's CPU (`client_cpu`): it
        /// cannot run, and answer, until the engine leaves that CPU.
        Handoffs = 39 => "handoffs",
        /// Turns cut short, and the CPU given away once (`sched_yield`),
        /// because a delivery found the receive queue or the free buffers
        /// of a client that does not sleep exhausted: it needs a CPU to
        /// catch up, perhaps this one, and what the engine would take next
        /// (send descriptors, datagrams) would only be dropped.
        ReceiverYields = 40 => "receiver_yields",
        /// Wire drop: packets the kernel dropped because the UDP socket's
        /// receive buffer was full (`SO_RXQ_OVFL`; a segmented run kept
        /// whole counts once). Learnt from the next packet that arrives,
        /// or read from the socket before the engine sleeps.
        WireDropSocketOverflow = 41 => "wire_drop_socket_overflow",
        /// Requests refused: the asking process would hold more shared
        /// memory than its quota (`client_memory`).
        QuotaRefusedMemory = 42 => "quota_refused_memory",
        /// Requests refused: the asking user's processes would hold more
        /// shared memory than the user's quota (`user_memory`).
        QuotaRefusedUserMemory = 43 => "quota_refused_user_memory",
        /// Endpoints refused: the asking process holds its most endpoints
        /// (`client_endpoints`).
        QuotaRefusedEndpoints = 44 => "quota_refused_endpoints",
        /// Connections the engine could not take because it had no file
        /// descriptor left (`EMFILE`, `ENFILE`): each was accepted on a
        /// descriptor kept in reserve and closed at once. (Should even
        /// the reserve be spent, the engine stops watching its listener
        /// until a client leaves; the connections wait in its backlog.)
        ControlDropFdLimit = 45 => "control_drop_fd_limit",
        /// `accept` on the control listener failed for another reason
        /// (out of kernel memory, a connection aborted before it was
        /// taken).
        ControlAcceptErrors = 46 => "control_accept_errors",
        /// Connections closed at once: their process (or user) already
        /// held its most idle connections, those with no endpoint
        /// (`client_idle_connections`, `user_idle_connections`).
        ControlDropIdleLimit = 47 => "control_drop_idle_limit",
        /// Zero-length control packets (refused with `BadRequest`).
        ControlDropEmpty = 48 => "control_drop_empty",
        /// Control packets longer than the protocol's largest (refused
        /// with `BadRequest`).
        ControlDropOversize = 49 => "control_drop_oversize",
        /// Replies and notices the engine could not send: the client's
        /// socket was full (it does not read it) or gone.
        ControlRepliesLost = 50 => "control_replies_lost",
        /// Wire drop: a datagram from an address that is neither on the
        /// engine's allowlist (`allow_peers`) nor a peer it opened a
        /// channel to; or an open request from an address not on the
        /// allowlist.
        WireDropPeerNotAllowed = 51 => "wire_drop_peer_not_allowed",
        /// Wire drop: with a cluster key, a control frame without a valid
        /// MAC (another key, none, or altered).
        WireDropBadMac = 52 => "wire_drop_bad_mac",
        /// Wire drop: with a cluster key, a control frame seen before, or
        /// stamped outside the replay window.
        WireDropReplay = 53 => "wire_drop_replay",
        /// Wire drop: an open refused, the peer holding its most channels
        /// (`peer_channels_max`, half-open and open).
        WireDropPeerChannelsFull = 54 => "wire_drop_peer_channels_full",
        /// Wire drop: an open refused, the peer holding its most channels
        /// accepted but not yet confirmed (`peer_half_open_max`).
        WireDropPeerHalfOpenFull = 55 => "wire_drop_peer_half_open_full",
        /// Peer engines found silent past the liveness timeout (their
        /// channels closed, their owners told).
        WirePeersSilent = 56 => "wire_peers_silent",
        /// Remote channels closed by the engine: their peer silent past the
        /// liveness timeout, or accepted and never confirmed.
        WireChannelsExpired = 57 => "wire_channels_expired",
        /// Keepalive frames sent to peers with channels.
        WireKeepalivesSent = 58 => "wire_keepalives_sent",
        /// VI connections granted (each counts once, for both its VIs).
        ViConnected = 59 => "vi_connected",
        /// VI connection requests refused: rejected by the listener, with
        /// the wrong attributes, not answered in time, or their listener
        /// gone.
        ViRefused = 60 => "vi_refused",
        /// VIs closed (by their owner, or reclaimed when it died).
        ViClosed = 61 => "vi_closed",
        /// Memory regions registered.
        MemoryRegistered = 62 => "memory_registered",
        /// Datagrams sent twice by the wire's fault injection
        /// (`wire_dup_ppm`).
        WireInjectedDuplicates = 63 => "wire_injected_duplicates",
        /// Datagrams held back behind later ones by the wire's fault
        /// injection (`wire_reorder_ppm`).
        WireInjectedReorders = 64 => "wire_injected_reorders",
        /// UDM jobs created.
        UdmJobs = 65 => "udm_jobs",
        /// UDM job creations refused: the process has made as many jobs
        /// as the engine allows one process (`client_udm_jobs`).
        QuotaRefusedUdmJobs = 72 => "quota_refused_udm_jobs",
        /// UDM joins refused: the process has joined as many nodes as the
        /// engine allows one process (`client_udm_nodes`).
        QuotaRefusedUdmNodes = 73 => "quota_refused_udm_nodes",
        /// UDM nodes the engine visited for their divert rings, buffers
        /// and the atomicity timeout (what its UDM work per turn follows).
        UdmNodeVisits = 74 => "udm_node_visits",
        /// Reads of `/proc` to tell whether a UDM node's process is
        /// stopped.
        UdmProcReads = 75 => "udm_proc_reads",
        /// Scheduler notices (UDM nodes descheduled or scheduled again)
        /// the engine acted on.
        UdmSchedNotices = 76 => "udm_sched_notices",
        /// Scheduler notices refused: no such job or a wrong key, or the
        /// sender does not run as the user that made the job.
        UdmSchedRefused = 77 => "udm_sched_refused",
        /// Overflow advice given to schedulers: a node named, in the
        /// answer to a notice, as having its virtual buffer near its limit.
        UdmOverflowAdvice = 78 => "udm_overflow_advice",
        /// Engine-carried VIs the engine visited for their queues, timers
        /// and acks (what its VI work per turn follows).
        ViVisits = 66 => "vi_visits",
        /// Memory regions refused: the process held its most
        /// (`client_regions`).
        QuotaRefusedRegions = 80 => "quota_refused_regions",
        /// VIs refused: the process held its most (`client_vis`).
        QuotaRefusedVis = 81 => "quota_refused_vis",
        /// Discriminators refused: the process listened on its most
        /// (`client_listeners`).
        QuotaRefusedListeners = 82 => "quota_refused_listeners",
        /// New objects (endpoints, regions, VIs, UDM jobs and nodes)
        /// refused: the engine's free file descriptors were down to its
        /// reserve (`fd_reserve`).
        FdReserveRefused = 83 => "fd_reserve_refused",
        /// VI connection requests refused: their connecting process or
        /// peer address had its most waiting (`vi_pending_per_peer`).
        ViPendingRefusedPeer = 84 => "vi_pending_refused_peer",
        /// VI connection requests refused: the peer's IP address had its
        /// most waiting (`vi_pending_per_ip`).
        ViPendingRefusedIp = 85 => "vi_pending_refused_ip",
        /// VI connection requests refused: the engine had its most
        /// waiting (`vi_pending_max`).
        ViPendingRefusedTotal = 86 => "vi_pending_refused_total",
        /// VI connection requests refused: their discriminator had its
        /// backlog waiting.
        ViPendingRefusedBacklog = 87 => "vi_pending_refused_backlog",
        /// Wire drop: an open refused, the peer's IP address holding its
        /// most channels (`peer_ip_channels_max`).
        WireDropPeerIpChannelsFull = 88 => "wire_drop_peer_ip_channels_full",
        /// Wire drop: an open refused, the peer's IP address holding its
        /// most channels accepted but not confirmed
        /// (`peer_ip_half_open_max`).
        WireDropPeerIpHalfOpenFull = 89 => "wire_drop_peer_ip_half_open_full",
        /// Region grants ended because the VI they were made for closed
        /// or broke.
        ViGrantsEnded = 90 => "vi_grants_ended",
        /// Peer-region lookups refused: no live connection, or no grant.
        ViPeerRegionRefused = 91 => "vi_peer_region_refused",
        /// SPINE peer joins refused: the process had its most live peer
        /// queues joined on the adapter (`PEERS_PER_PROCESS`).
        QuotaRefusedPeersProcess = 92 => "quota_refused_peers_process",
        /// SPINE peer joins refused: the processes of the user had their
        /// most live peer queues joined on the adapter
        /// (`PEERS_PER_USER`).
        QuotaRefusedPeersUser = 93 => "quota_refused_peers_user",
        /// Runs of datagrams of one size to one peer that a `sendmmsg`
        /// entry carried as one segmented send (UDP GSO; a run of one
        /// datagram is not counted). `wire_tx_datagrams` over this, with
        /// the run's datagrams, tells how much of the wire's sending the
        /// kernel segmented.
        WireGsoRuns = 94 => "wire_gso_runs",
        /// Coalesced runs that a `recvmmsg` entry brought in (UDP GRO:
        /// several datagrams of one flow in one buffer, cut back into
        /// datagrams by the engine).
        WireGroRuns = 95 => "wire_gro_runs",
    }
}

counter_enum! {
    /// Counters of one endpoint (engine side).
    EndpointCounter {
        /// Messages sent through the engine.
        TxMsgs = 0 => "tx_msgs",
        /// Bytes sent through the engine.
        TxBytes = 1 => "tx_bytes",
        /// Messages delivered to this endpoint.
        RxMsgs = 2 => "rx_msgs",
        /// Bytes delivered to this endpoint.
        RxBytes = 3 => "rx_bytes",
        /// Send descriptors rejected: channel not held.
        TxBadChannel = 4 => "tx_bad_channel",
        /// Send descriptors rejected: buffer outside the buffer area.
        TxBadBuffer = 5 => "tx_bad_buffer",
        /// Send descriptors rejected: bad length.
        TxBadLength = 6 => "tx_bad_length",
        /// Send descriptors rejected: reserved flags set.
        TxBadFlags = 7 => "tx_bad_flags",
        /// Send descriptors on a channel whose peer is gone.
        TxPeerGone = 8 => "tx_peer_gone",
        /// Ring positions found corrupt (head/tail out of range).
        RingCorrupt = 9 => "ring_corrupt",
        /// Incoming messages dropped: no free buffer.
        RxDropNoBuffer = 10 => "rx_drop_no_buffer",
        /// Incoming messages dropped: receive ring full.
        RxDropRingFull = 11 => "rx_drop_ring_full",
        /// Incoming messages dropped: too large for 14 buffers.
        RxDropTooLarge = 12 => "rx_drop_too_large",
        /// Free-ring entries rejected: offset outside the buffer area.
        FreeBadOffset = 13 => "free_bad_offset",
        /// Events dropped: event ring full.
        EventDropRingFull = 14 => "event_drop_ring_full",
        /// Times the engine woke the sleeping client.
        ClientWakeups = 15 => "client_wakeups",
        /// Doorbells rung by the client.
        Doorbells = 16 => "doorbells",
        /// Channels opened.
        ChannelsOpened = 17 => "channels_opened",
        /// Channel-open requests refused.
        ChannelsRefused = 18 => "channels_refused",
        /// Messages sent over the wire.
        WireTxMsgs = 19 => "wire_tx_msgs",
        /// Messages received from the wire.
        WireRxMsgs = 20 => "wire_rx_msgs",
        /// Send descriptors deferred: engine send budget exhausted this round.
        TxDeferred = 21 => "tx_deferred",
        /// Applet doTx invocations.
        AppletTxCalls = 22 => "applet_tx_calls",
        /// Applet doRx invocations.
        AppletRxCalls = 23 => "applet_rx_calls",
        /// Applet doTimer invocations.
        AppletTimerCalls = 24 => "applet_timer_calls",
        /// Time spent in the applet, ns: invocations that used more than
        /// 2 000 units of work are timed exactly, one short one in 64 is
        /// timed and counted 64 times (an estimate).
        AppletTimeNs = 25 => "applet_time_ns",
        /// Longest timed applet invocation, ns.
        AppletMaxNs = 26 => "applet_max_ns",
        /// Work (fuel) used by the applet.
        AppletFuel = 27 => "applet_fuel",
        /// Applet faults: work budget exhausted.
        AppletFaultFuel = 28 => "applet_fault_fuel",
        /// Applet faults: array bounds, null or negative size.
        AppletFaultMemory = 29 => "applet_fault_memory",
        /// Applet faults: division by zero.
        AppletFaultArith = 30 => "applet_fault_arith",
        /// Applet faults: call depth.
        AppletFaultDepth = 31 => "applet_fault_depth",
        /// Applet faults: heap quota.
        AppletFaultHeap = 32 => "applet_fault_heap",
        /// Applet faults: a native refused its arguments.
        AppletFaultNative = 33 => "applet_fault_native",
        /// Applet faults: other.
        AppletFaultOther = 34 => "applet_fault_other",
        /// Applets detached after repeated faults.
        AppletDetached = 35 => "applet_detached",
        /// Applets attached.
        AppletAttached = 36 => "applet_attached",
        /// Arrivals dropped: the applet's queue was full.
        AppletRxDropped = 37 => "applet_rx_dropped",
        /// A level, not a count: 1 while the attached applet runs as
        /// machine code (JIVE compiles it on a thread of its own after
        /// attach; the engine installs the code at a later invocation), 0
        /// while it runs interpreted or no applet is attached.
        AppletCompiled = 38 => "applet_compiled",
        /// Applet faults: the invocation ran past its time limit.
        AppletFaultTimeout = 39 => "applet_fault_timeout",
        /// A level, set when `unet stat` asks: the channels of the
        /// endpoint open now, their peer still there (`channels_peak`, in
        /// the slot's header, is the most channel tags it held at once,
        /// those whose peer left and that it has not closed included).
        ChannelsOpen = 40 => "channels_open",
        /// A level, set when `unet stat` asks: bytes of shared memory
        /// charged to the endpoint's process for it: its segment and the
        /// direct connections opened from it.
        MemoryBytes = 41 => "memory_bytes",
        /// Buffered endpoints (two-case delivery): messages that found no
        /// room in the receive queue or no free buffer (or came while
        /// earlier ones waited) and were put in the endpoint's virtual
        /// buffer instead of dropped.
        RxBuffered = 42 => "rx_buffered",
        /// Buffered endpoints: times a local sender was held back (its
        /// send queue not taken further) because the virtual buffer was at
        /// its limit; counted once per stall.
        RxHeld = 43 => "rx_held",
        /// Buffered endpoints: messages dropped because the virtual buffer
        /// was at its limit and their sender could not be held back (an
        /// arrival from the wire, or what an applet sends).
        RxDropBufferLimit = 44 => "rx_drop_buffer_limit",
        /// A level: pages of the virtual buffer holding memory now.
        BufferPages = 45 => "buffer_pages",
        /// A level: the most pages the virtual buffer held at once.
        BufferPagesMax = 46 => "buffer_pages_max",
        /// Pages of the virtual buffer given back to the system.
        PagesReturned = 47 => "pages_returned",
        /// A level: the virtual buffer's limit in bytes (0: not buffered,
        /// U-Net's drop).
        BufferLimit = 48 => "buffer_limit",
        /// Active messages (`SEND_AM`) handed to SPINE.
        TxAm = 49 => "tx_am",
        /// Active messages SPINE refused: no extension has the handler
        /// number, or the framing is bad.
        TxAmRefused = 50 => "tx_am_refused",
        /// Active messages SPINE could not take now (its inbox was full).
        TxAmFull = 51 => "tx_am_full",
        /// Arrivals handed to the applet's `doRx` lent to its `RxBuf`,
        /// not copied into it: messages of `unet_sle::LEND_MIN` bytes or
        /// more, for an applet whose code passes `RxBuf` only to natives,
        /// in `doRx` only.
        AppletRxLent = 52 => "applet_rx_lent",
    }
}

/// Index of the first wire-drop counter; the first
/// [`WIRE_DROP_FIRST_RUN`] wire drop reasons `r` (in the engine's
/// `WireDrop` order) are counted at `WIRE_DROP_BASE + r`, the later ones at
/// `WIRE_DROP_BASE_2 + (r - WIRE_DROP_FIRST_RUN)`. The engine names each
/// reason's counter (`WireDrop::counter`) and checks, when it compiles,
/// that it sits at this slot.
pub const WIRE_DROP_BASE: usize = 17;
/// Wire drop reasons counted from [`WIRE_DROP_BASE`] on.
pub const WIRE_DROP_FIRST_RUN: usize = 19;
/// Index of the counter of wire drop reason [`WIRE_DROP_FIRST_RUN`] (the
/// reasons added later, after other counters had taken the slots).
pub const WIRE_DROP_BASE_2: usize = 51;

/// The counter slot of wire drop reason `r` (see [`WIRE_DROP_BASE`]).
pub const fn wire_drop_slot(r: usize) -> usize {
    if r < WIRE_DROP_FIRST_RUN {
        WIRE_DROP_BASE + r
    } else {
        WIRE_DROP_BASE_2 + (r - WIRE_DROP_FIRST_RUN)
    }
}

const _: () = {
    assert!(EngineCounter::ALL.len() <= ENGINE_COUNTERS);
    assert!(EndpointCounter::ALL.len() <= ENDPOINT_COUNTERS);
};
