//! The control protocol: set-up messages between a client process and the
//! engine over a Unix SOCK_SEQPACKET socket (one message per packet, file
//! descriptors passed with SCM_RIGHTS). The data path never uses it.
//!
//! Every packet starts with `kind: u16, reserved: u16, req_id: u32`, then a
//! kind-specific body of little-endian fields. Replies carry the request's
//! `req_id`; notices the engine sends on its own carry `req_id` 0. Decoding
//! is total: any packet that does not parse is a [`ControlError`], counted by
//! the engine, never a panic.
#![forbid(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::net::SocketAddr;

use unet_abi::{Geometry, Reliability};

mod bytes;
mod codec;
pub mod peer;
pub mod spine;
pub mod spine_port;
pub mod spine_wire;

/// Largest control packet.
pub const MAX_PACKET: usize = 1024;
/// Longest text carried in a reply (an applet's rejection reason).
pub const MAX_TEXT: usize = 900;
/// Control protocol version, checked by `Hello`.
pub const PROTOCOL_VERSION: u32 = 1;

/// The address of an endpoint: its engine (None: this host's engine) and its
/// id in that engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EndpointAddr {
    /// UDP address of the endpoint's engine; `None` for the local engine.
    pub host: Option<SocketAddr>,
    /// Endpoint id within its engine.
    pub id: u32,
}

impl EndpointAddr {
    /// A local endpoint.
    pub fn local(id: u32) -> Self {
        EndpointAddr { host: None, id }
    }
}

impl std::fmt::Display for EndpointAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.host {
            Some(h) => write!(f, "{h}/{}", self.id),
            None => write!(f, "local/{}", self.id),
        }
    }
}

impl std::str::FromStr for EndpointAddr {
    type Err = String;
    /// `ID`, `local/ID` or `HOST:PORT/ID`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (host, id) = match s.rsplit_once('/') {
            Some((h, id)) => (Some(h), id),
            None => (None, s),
        };
        let id = id
            .parse::<u32>()
            .map_err(|e| format!("bad endpoint id {id:?}: {e}"))?;
        let host = match host {
            None | Some("local") => None,
            Some(h) => Some(
                h.parse::<SocketAddr>()
                    .map_err(|e| format!("bad host {h:?}: {e}"))?,
            ),
        };
        Ok(EndpointAddr { host, id })
    }
}

/// Which path a channel should take.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PathChoice {
    /// The direct path when both endpoints are local and need no engine
    /// processing, the engine otherwise.
    #[default]
    Auto = 0,
    /// The direct path or an error.
    Direct = 1,
    /// Always through the engine.
    Engine = 2,
}

/// Why the engine refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// The request did not parse.
    BadRequest = 1,
    /// No endpoint with that id.
    NoSuchEndpoint = 2,
    /// The destination refused the channel.
    Refused = 3,
    /// Out of memory, slots, or channel tags.
    NoResources = 4,
    /// The endpoint belongs to another client.
    NotOwner = 5,
    /// The geometry is invalid.
    BadGeometry = 6,
    /// The remote engine did not answer.
    Unreachable = 7,
    /// The direct path was asked for but cannot be used.
    DirectUnavailable = 8,
    /// No such channel.
    NoSuchChannel = 9,
    /// The engine has no UDP wire configured.
    NoWire = 10,
    /// Protocol version mismatch.
    Version = 11,
    /// An applet cannot be attached while the endpoint has direct channels.
    DirectChannelsOpen = 12,
    /// The endpoint has no applet.
    NoApplet = 13,
    /// The client's process would hold more shared memory than the
    /// engine allows one process.
    QuotaExceeded = 14,
    /// The client's process holds as many endpoints as the engine allows
    /// one process.
    EndpointQuota = 15,
    /// The client's user would hold more shared memory than the engine
    /// allows one user.
    UserQuota = 16,
    /// Another process already waits for VI connections on that
    /// discriminator.
    TagInUse = 17,
    /// Nobody waits for VI connections on that discriminator.
    NoListener = 18,
    /// The two ends of a VI connection asked for different attributes
    /// (reliability level).
    AttributesMismatch = 19,
    /// No memory region with that handle (or not this process's).
    NoSuchRegion = 20,
    /// No VI with that id (or not this process's).
    NoSuchVi = 21,
    /// The connection request is gone: the connecting side gave up, timed
    /// out or died.
    NoSuchRequest = 22,
    /// The memory handed over is not a sealed memory file of the length
    /// asked for.
    BadMemory = 23,
    /// No UDM job with that id, or the key does not match.
    NoSuchJob = 24,
    /// That rank of the UDM job is taken (joined, or gone), or outside
    /// the job.
    RankTaken = 25,
    /// The process holds as many of these objects as the engine allows
    /// one process: memory regions, VIs, discriminators it listens on,
    /// connection requests it waits on, UDM jobs or nodes, SPINE links,
    /// ports or peer queues (peer queues are capped per user too).
    ObjectQuota = 26,
    /// No SPINE extension with that id (or not this user's).
    NoSuchExtension = 27,
    /// No peer queue with that index on the adapter (or not this
    /// user's).
    NoSuchPeer = 28,
    /// The peer segment or its side was refused (not a sealed memory
    /// file of a peer segment's layout, a side not 0 or 1, or a side
    /// attached before).
    BadPeer = 29,
    /// No SPINE link with that id (or not this user's).
    NoSuchLink = 30,
    /// No SPINE port with that id (or not this user's).
    NoSuchPort = 31,
    /// No network interface of that name, or one a raw-frame port cannot
    /// open.
    NoSuchInterface = 32,
}

impl ErrorCode {
    fn from_u16(v: u16) -> Option<Self> {
        use ErrorCode::*;
        Some(match v {
            1 => BadRequest,
            2 => NoSuchEndpoint,
            3 => Refused,
            4 => NoResources,
            5 => NotOwner,
            6 => BadGeometry,
            7 => Unreachable,
            8 => DirectUnavailable,
            9 => NoSuchChannel,
            10 => NoWire,
            11 => Version,
            12 => DirectChannelsOpen,
            13 => NoApplet,
            14 => QuotaExceeded,
            15 => EndpointQuota,
            16 => UserQuota,
            17 => TagInUse,
            18 => NoListener,
            19 => AttributesMismatch,
            20 => NoSuchRegion,
            21 => NoSuchVi,
            22 => NoSuchRequest,
            23 => BadMemory,
            24 => NoSuchJob,
            25 => RankTaken,
            26 => ObjectQuota,
            27 => NoSuchExtension,
            28 => NoSuchPeer,
            29 => BadPeer,
            30 => NoSuchLink,
            31 => NoSuchPort,
            32 => NoSuchInterface,
            _ => return None,
        })
    }
}

impl ErrorCode {
    /// Whether the refusal is one of the limits the engine sets each
    /// process or user (memory, endpoints, objects), rather than a shortage of the
    /// whole engine.
    pub fn is_quota(self) -> bool {
        matches!(
            self,
            ErrorCode::QuotaExceeded
                | ErrorCode::EndpointQuota
                | ErrorCode::UserQuota
                | ErrorCode::ObjectQuota
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ErrorCode::BadRequest => "malformed request",
            ErrorCode::NoSuchEndpoint => "no such endpoint",
            ErrorCode::Refused => "the destination refused the channel",
            ErrorCode::NoResources => "the engine is out of resources",
            ErrorCode::NotOwner => "the endpoint belongs to another process",
            ErrorCode::BadGeometry => "invalid endpoint geometry",
            ErrorCode::Unreachable => "the remote engine did not answer",
            ErrorCode::DirectUnavailable => "the direct path is not available for this channel",
            ErrorCode::NoSuchChannel => "no such channel",
            ErrorCode::NoWire => "the engine has no UDP wire",
            ErrorCode::Version => "control protocol version mismatch",
            ErrorCode::DirectChannelsOpen => {
                "close the endpoint's direct channels before attaching an applet"
            }
            ErrorCode::NoApplet => "the endpoint has no applet",
            ErrorCode::QuotaExceeded => {
                "the engine's shared-memory quota for this process is used up \
                 (close endpoints or direct channels, or start the engine with \
                 a larger quota)"
            }
            ErrorCode::EndpointQuota => {
                "this process holds as many endpoints as the engine allows one \
                 process (close one, or start the engine with a larger \
                 per-process limit)"
            }
            ErrorCode::UserQuota => {
                "the engine's shared-memory quota for this user is used up \
                 (close endpoints or direct channels, or start the engine with \
                 a larger quota)"
            }
            ErrorCode::TagInUse => {
                "another process already accepts VI connections on that discriminator"
            }
            ErrorCode::NoListener => "nobody accepts VI connections on that discriminator",
            ErrorCode::AttributesMismatch => {
                "the two ends of the VI connection asked for different reliability levels"
            }
            ErrorCode::NoSuchRegion => "no such memory region",
            ErrorCode::NoSuchVi => "no such VI",
            ErrorCode::NoSuchRequest => {
                "the connection request is gone (the connecting side gave up or died)"
            }
            ErrorCode::BadMemory => {
                "the memory handed over is not a sealed memory file of the length asked for"
            }
            ErrorCode::NoSuchJob => "no such UDM job (or a wrong key)",
            ErrorCode::RankTaken => "that rank of the UDM job is taken, gone or outside the job",
            ErrorCode::ObjectQuota => {
                "this process holds as many of these objects (memory regions, VIs, \
                 discriminators, connection requests, UDM jobs or nodes, SPINE links, ports \
                 or peer queues) as the engine allows one process, or for peer queues one \
                 user (close or leave some, or start the engine with a larger per-process \
                 limit)"
            }
            ErrorCode::NoSuchExtension => "no such SPINE extension (or not this user's)",
            ErrorCode::NoSuchPeer => "no such peer queue on the adapter (or not this user's)",
            ErrorCode::BadPeer => "not a peer segment (or that side of it was attached before)",
            ErrorCode::NoSuchLink => "no such SPINE link (or not this user's)",
            ErrorCode::NoSuchPort => "no such SPINE port (or not this user's)",
            ErrorCode::NoSuchInterface => {
                "no network interface of that name (or a raw-frame port cannot open on it)"
            }
        })
    }
}

/// A request from a client.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// First message: protocol version.
    Hello {
        /// [`PROTOCOL_VERSION`].
        version: u32,
    },
    /// Create an endpoint; the reply carries the segment and doorbell fds.
    /// Encoded as kind 2 when `buffer_limit` is 0 (the format from before
    /// buffered endpoints), as kind 42 (`create_endpoint_buffered`, the
    /// same fields and the limit) otherwise; an engine that predates kind
    /// 42 refuses it (`BadRequest`) rather than create an unbuffered
    /// endpoint.
    CreateEndpoint {
        /// Requested geometry.
        geometry: Geometry,
        /// Whether others may open channels to it.
        accept: bool,
        /// Two-case delivery (UDM's, `docs/udm.md`): the limit in bytes of
        /// the endpoint's virtual buffer, where messages that find no room
        /// wait instead of being dropped; 0 for U-Net's drop (the
        /// default). The engine rounds it up to its minimum and to whole
        /// pages, and refuses more than `unet_abi::MAX_BUFFER_LIMIT`.
        buffer_limit: u64,
    },
    /// Open a channel from `endpoint` to `dst`.
    OpenChannel {
        /// Our endpoint.
        endpoint: u32,
        /// Destination.
        dst: EndpointAddr,
        /// Path preference.
        path: PathChoice,
    },
    /// Close one channel.
    CloseChannel {
        /// Our endpoint.
        endpoint: u32,
        /// Channel tag.
        channel: u16,
    },
    /// Close an endpoint and everything it holds.
    CloseEndpoint {
        /// The endpoint.
        endpoint: u32,
    },
    /// Allow or refuse channels opened to `endpoint`.
    SetAccept {
        /// The endpoint.
        endpoint: u32,
        /// New setting.
        accept: bool,
    },
    /// Ask for the counters segment (read-only) and the endpoint list.
    Stat,
    /// Attach a U-Net/SLE applet to `endpoint`; fd: a memory file holding
    /// the class file (`len` bytes). Replaces an applet already attached.
    AttachApplet {
        /// The endpoint.
        endpoint: u32,
        /// Length of the class file.
        len: u32,
        /// Work budget per invocation (0: the default).
        fuel: u64,
        /// Heap quota in bytes (0: the default).
        heap: u32,
    },
    /// Detach the applet of `endpoint`.
    DetachApplet {
        /// The endpoint.
        endpoint: u32,
    },
    /// Register a memory region (VIA); fd: a memory file of at least `len`
    /// bytes whose size is sealed. The reply is [`Reply::MemoryRegistered`].
    RegisterMemory {
        /// Length of the region in bytes.
        len: u64,
    },
    /// Deregister memory region `handle`.
    DeregisterMemory {
        /// The region's handle.
        handle: u32,
    },
    /// Accept VI connections on discriminator `tag` (VIA's
    /// `VipConnectWait`): requests come as [`Reply::ViRequest`] notices.
    ViListen {
        /// The discriminator.
        tag: u64,
    },
    /// Stop accepting VI connections on `tag`; requests not yet answered
    /// are refused.
    ViUnlisten {
        /// The discriminator.
        tag: u64,
    },
    /// Connect a VI to whoever waits on `tag` at `host` (None: this
    /// engine). Answered with [`Reply::ViConnected`] once the other side
    /// accepts, [`ErrorCode::Refused`] if it rejects, or
    /// [`ErrorCode::NoSuchRequest`] after `timeout_ms`.
    ViConnect {
        /// The remote engine, None for this one.
        host: Option<SocketAddr>,
        /// The discriminator.
        tag: u64,
        /// The VI's attributes.
        attrs: ViParams,
        /// How long the other side has to answer (0: the engine's longest).
        timeout_ms: u32,
    },
    /// Accept connection request `request` with a VI of these attributes.
    ViAccept {
        /// The request, from its [`Reply::ViRequest`].
        request: u32,
        /// The VI's attributes (must match the connecting side's).
        attrs: ViParams,
    },
    /// Reject connection request `request`.
    ViReject {
        /// The request.
        request: u32,
    },
    /// Close VI `vi`: its peer is told.
    ViClose {
        /// The VI.
        vi: u32,
    },
    /// Let the peer of local VI `vi` read region `handle` (both this
    /// client's): large sends on a local VI are read by the receiver
    /// straight from the sender's region (see [`Request::ViPeerRegion`]).
    ViGrantRegion {
        /// The VI (a local one, whose peer is granted the region).
        vi: u32,
        /// The region.
        handle: u32,
    },
    /// The memory of region `handle` of the peer of local VI `vi`, which
    /// the peer granted to it: the reply is [`Reply::PeerRegion`] with a
    /// read-only descriptor of the region's memory file.
    ViPeerRegion {
        /// This client's VI.
        vi: u32,
        /// The peer's region.
        handle: u32,
    },
    /// Create a UDM job of `nodes` nodes. The reply is [`Reply::UdmJob`]:
    /// its id and the key that lets a process join it.
    UdmCreateJob {
        /// Nodes in the job.
        nodes: u32,
        /// Capacity of each fast ring (messages; a power of two).
        fast_cap: u32,
        /// Bytes of each node's virtual buffer (a power of two): the limit
        /// of overflow control.
        buffer_size: u64,
        /// How long a node may stay atomic with messages waiting and none
        /// extracted before the engine switches it to buffered mode, in
        /// microseconds.
        atomicity_timeout_us: u32,
    },
    /// Join UDM job `job` as node `rank`. The reply is
    /// [`Reply::UdmJoined`]; fds: the job segment, the node segment, the
    /// node's virtual buffer and the job's doorbell eventfd.
    UdmJoin {
        /// The job.
        job: u32,
        /// Its key (from [`Reply::UdmJob`]).
        key: u64,
        /// The rank to take.
        rank: u32,
    },
    /// Leave UDM job `job` (node `rank`, which this client joined as).
    UdmLeave {
        /// The job.
        job: u32,
        /// The rank.
        rank: u32,
    },
    /// Join UDM job `job` of the engine at `home` (its UDP address) as
    /// node `rank`, through this engine: the job spans both. The reply,
    /// once the home engine granted the rank, is [`Reply::UdmJoined`]
    /// with the fds of [`Request::UdmJoin`] (this engine's segments of
    /// the job).
    UdmJoinRemote {
        /// The home engine's UDP address.
        home: SocketAddr,
        /// The job, as the home engine numbers it.
        job: u32,
        /// Its key.
        key: u64,
        /// The rank to take.
        rank: u32,
    },
    /// A scheduler's notice (the UDM paper's section 4.2): the nodes of
    /// job `job` in `ranks` (a bit per rank) are descheduled
    /// (`running` false: their input goes to buffered mode at once) or
    /// run again (`running` true: what was diverted to them meanwhile is
    /// taken to their buffers on the next turn). Only a process of the
    /// user that made the job may send it. The reply is
    /// [`Reply::UdmAdvice`]: overflow control's feedback.
    UdmSchedule {
        /// The job.
        job: u32,
        /// Its key.
        key: u64,
        /// The nodes the notice is about, a bit per rank.
        ranks: u64,
        /// Whether they run from now on (or are descheduled).
        running: bool,
    },
    /// Load a SPINE extension onto the adapter; fd: a memory file holding
    /// the class file (`len` bytes). Its initialiser `init(arg)` runs and
    /// installs its handlers. The reply is [`Reply::SpineLoaded`] or
    /// [`Reply::Rejected`] (why, exactly).
    SpineLoad {
        /// Length of the class file.
        len: u32,
        /// Time budget of one handler invocation, µs (0: the default,
        /// 10 µs).
        budget_us: u32,
        /// The initialiser's argument.
        arg: i32,
        /// A name for listings (at most [`MAX_NAME`] bytes).
        name: String,
        /// Domains granted besides `spine` (at most [`MAX_DOMAINS`]).
        domains: Vec<String>,
    },
    /// Unload extension `id` (one of the asking client's user; any for
    /// root).
    SpineUnload {
        /// The extension.
        id: u32,
    },
    /// List the extensions (those of the asking client's user; all for
    /// root) with their handlers' statistics: [`Reply::SpineListing`].
    SpineList,
    /// Switch the engine's event trace (SPINE's event graph) on or off;
    /// switching it on empties the ring. Answered with
    /// [`Reply::TraceState`]; only the engine's owner (or root) may ask.
    TraceSet {
        /// Record events from now on (or stop recording).
        on: bool,
        /// Events the ring holds (rounded up to a power of two; 0: keep
        /// the current size).
        capacity: u32,
    },
    /// Join a peer adapter (SPINE's peer queues): fds: the peer segment
    /// (a sealed memory file of `unet_abi::peer`'s layout) and, if
    /// known, the peer adapter's doorbell (what its
    /// [`Reply::PeerJoined`] gave). The adapter attaches `side` of the
    /// segment and answers [`Reply::PeerJoined`]. Only the engine's owner
    /// (or root) may ask.
    PeerJoin {
        /// This adapter's side of the segment: 0 or 1.
        side: u8,
    },
    /// Give peer queue `index` its peer's doorbell (fd), rung when this
    /// adapter sends to a peer that sleeps. Answered with [`Reply::Ok`].
    PeerDoorbell {
        /// The queue.
        index: u32,
    },
    /// Leave peer queue `index`: the adapter closes its side (the peer
    /// sees it dead) and forgets the queue. Answered with [`Reply::Ok`].
    PeerLeave {
        /// The queue.
        index: u32,
    },
    /// List the adapter's peer queues: [`Reply::PeerListing`].
    PeerList,
    /// Ask for the events the trace holds, oldest first. Answered with
    /// [`Reply::TraceDump`] and a memory file holding them; the trace
    /// goes on recording (or stays off) as it was.
    TraceDump,
    /// Make a SPINE link that waits for another adapter to join it over
    /// the wire, showing `token` (0: the engine picks one). Answered with
    /// [`Reply::SpineLink`]: the link's id (`DEST_WIRE`'s id for the
    /// extensions of this adapter) and the token to hand to the other
    /// side's [`Request::SpineLinkConnect`]. One connect joins it.
    SpineLinkListen {
        /// The token a connect must show (0: the engine picks one).
        token: u64,
    },
    /// Make a SPINE link to the adapter at `peer` (its UDP address) that
    /// listens with `token`. Answered at once with [`Reply::SpineLink`]
    /// (the link's id; its state is `connecting` until the peer
    /// accepts: see [`Request::SpineLinks`]).
    SpineLinkConnect {
        /// The listening adapter's UDP address.
        peer: SocketAddr,
        /// The token it listens with.
        token: u64,
    },
    /// Close SPINE link `link` (the peer is told).
    SpineLinkClose {
        /// The link.
        link: u32,
    },
    /// List the SPINE links (those of the asking client's user; all for
    /// root): [`Reply::SpineLinkListing`].
    SpineLinks,
    /// Hand extension `ext` (one of the asking client's user; any for
    /// root) a route table under number `table`; fd: a memory file
    /// holding the table (`len` bytes, an LC-trie's export format). It is
    /// checked, then replaces the extension's table of that number
    /// between two events. Answered with [`Reply::SpineTableLoaded`] or
    /// [`Reply::Rejected`] (why, exactly).
    SpineTable {
        /// The extension.
        ext: u32,
        /// The table's number.
        table: u32,
        /// Length of the table.
        len: u32,
    },
    /// Open a SPINE raw-frame port on network interface `interface`: each
    /// frame received on it becomes a bulk message for extension handler
    /// `handler` (one of this user's). Only the engine's user (or root)
    /// may. Answered with [`Reply::SpinePort`]: the port's id
    /// (`DEST_PORT`'s id for the extensions of this adapter).
    SpinePortOpen {
        /// The interface's name.
        interface: String,
        /// The extension handler that receives the port's frames.
        handler: u16,
    },
    /// Close SPINE port `port`.
    SpinePortClose {
        /// The port.
        port: u32,
    },
    /// List the SPINE ports (those of the asking client's user; all for
    /// root): [`Reply::SpinePortListing`].
    SpinePorts,
    /// Make a framebuffer of `width` by `height` pixels (4 bytes each)
    /// for extension `ext` (one of the asking process's own): a
    /// shared-memory image its handlers write with `Spine.fbWrite`,
    /// charged to the process's memory quota and freed when the
    /// extension goes. Answered with [`Reply::SpineFramebuffer`] and the
    /// segment's descriptor, or [`Reply::Rejected`] (the cap or quota by
    /// name).
    SpineFramebuffer {
        /// The extension.
        ext: u32,
        /// Pixels a row.
        width: u32,
        /// Rows.
        height: u32,
    },
    /// A read-only view of framebuffer `index` of extension `ext`, an
    /// extension of the asking client's user (any of its processes; root
    /// may view any): a viewer beside the process that made it. Costs no
    /// quota (the pixels are the owner's). Answered with
    /// [`Reply::SpineFramebufferView`] and a descriptor that maps only
    /// read-only, or [`Reply::Rejected`] (another user's extension) or
    /// [`Reply::Error`] (no such extension or framebuffer).
    SpineFramebufferView {
        /// The extension.
        ext: u32,
        /// The framebuffer's number in the extension.
        index: u32,
    },
}

/// Longest name of an extension, and of a domain, in bytes.
pub const MAX_NAME: usize = 64;
/// Most domains a load may name.
pub const MAX_DOMAINS: usize = 8;

/// The attributes of a VI that both ends must agree on, as the control
/// protocol carries them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ViParams {
    /// The reliability level.
    pub reliability: Reliability,
    /// VIA's strict behaviour: a message that finds no receive posted
    /// breaks the connection (instead of waiting for one, holding the
    /// sender back).
    pub strict_rnr: bool,
    /// How long (milliseconds) the peer of this end of an engine-carried
    /// reliable VI may stay silent while the VI waits for it before the
    /// VI breaks; 0: the engine's setting (`unet daemon
    /// --vi-break-timeout-ms`, 5 s by default). Each end has its own.
    pub break_timeout_ms: u32,
}

/// A reply or notice from the engine.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// Answer to Hello.
    Hello {
        /// Engine incarnation id.
        engine_id: u64,
        /// The engine's UDP address, if it has a wire.
        udp: Option<SocketAddr>,
    },
    /// Endpoint created; fds: segment, doorbell eventfd.
    EndpointCreated {
        /// New endpoint id.
        endpoint: u32,
    },
    /// Channel opened; fds: the connection segment when `conn_id != 0`.
    ChannelOpened {
        /// Channel tag on our side.
        channel: u16,
        /// Direct connection id, 0 for the engine path.
        conn_id: u32,
        /// 0: we are side A of the connection, 1: side B.
        side: u8,
    },
    /// Request done.
    Ok,
    /// Request refused.
    Error(ErrorCode),
    /// Counters segment (fd), number of endpoint slots, and the limits the
    /// engine sets each client.
    Stat {
        /// Endpoint slots in the counters segment.
        max_endpoints: u32,
        /// The limits in force.
        limits: Limits,
    },
    /// The applet was refused; the text says why (JIVE's reason, naming the
    /// method and bytecode offset).
    Rejected(String),
    /// A memory region was registered.
    MemoryRegistered {
        /// Its handle (what descriptors name it by).
        handle: u32,
    },
    /// The answer to [`Request::ViPeerRegion`]; fd: the region's memory
    /// file, open for reading only.
    PeerRegion {
        /// The region's length in bytes.
        len: u64,
    },
    /// A VI is connected; fd: the connection segment when `conn_id != 0`.
    ViConnected {
        /// The VI's id in the engine.
        vi: u32,
        /// The connection segment's id (0: not a direct connection).
        conn_id: u32,
        /// Our side of the segment (0 = A, the connecting side; 1 = B).
        side: u8,
    },
    /// Notice: a connection request arrived on a discriminator this client
    /// listens on; answer it with `ViAccept` or `ViReject`.
    ViRequest {
        /// The discriminator.
        tag: u64,
        /// The request's id.
        request: u32,
        /// The attributes the connecting side asked for.
        attrs: ViParams,
        /// The connecting process (0 if remote or unknown).
        pid: u32,
        /// The connecting side's engine, None for this one.
        host: Option<SocketAddr>,
    },
    /// A UDM job was created.
    UdmJob {
        /// Its id.
        job: u32,
        /// The key a process needs to join it.
        key: u64,
    },
    /// The answer to a scheduler's notice: overflow control's advice.
    UdmAdvice {
        /// The job.
        job: u32,
        /// The nodes whose virtual buffers are near their limit (three
        /// quarters full or more, or holding senders back), a bit per
        /// rank: the scheduler should let them run.
        near_full: u64,
        /// The nodes descheduled now, by the scheduler's notices.
        descheduled: u64,
    },
    /// Joined a UDM job; fds: job segment, node segment, virtual buffer,
    /// doorbell.
    UdmJoined {
        /// The job.
        job: u32,
        /// The rank taken.
        rank: u32,
    },
    /// Notice: a peer opened a direct channel to `endpoint`; fd: the
    /// connection segment.
    DirectConn {
        /// Our endpoint.
        endpoint: u32,
        /// Channel tag on our side.
        channel: u16,
        /// Connection id.
        conn_id: u32,
        /// Our side (1 = B).
        side: u8,
    },
    /// A SPINE extension is loaded.
    SpineLoaded {
        /// Its id on the adapter.
        id: u32,
        /// The handler numbers it installed (at most 64).
        handlers: Vec<u16>,
    },
    /// The answer to [`Request::SpineList`]; fd: a memory file holding
    /// the listing ([`spine::SpineListing`]), `len` bytes.
    SpineListing {
        /// Length of the listing.
        len: u32,
    },
    /// The answer to [`Request::PeerJoin`]; fd: this adapter's doorbell
    /// for the peer (an eventfd), to be handed to the peer adapter.
    PeerJoined {
        /// The index the adapter gave the queue (`DEST_PEER`'s id).
        index: u32,
    },
    /// The answer to [`Request::PeerList`]; fd: a memory file holding
    /// the listing ([`peer::PeerListing`]), `len` bytes.
    PeerListing {
        /// Length of the listing.
        len: u32,
    },
    /// The trace's state after a [`Request::TraceSet`].
    TraceState {
        /// Recording.
        on: bool,
        /// Events the ring holds.
        capacity: u32,
        /// Events recorded since the trace was last switched on.
        recorded: u64,
        /// Of those, the ones overwritten (the ring was full).
        overwritten: u64,
    },
    /// The answer to [`Request::TraceDump`]; fd: a memory file of `len`
    /// bytes holding `events` events (the engine's trace dump format).
    TraceDump {
        /// Events in the dump.
        events: u32,
        /// Bytes of the memory file.
        len: u64,
    },
    /// A SPINE link was made ([`Request::SpineLinkListen`],
    /// [`Request::SpineLinkConnect`]).
    SpineLink {
        /// Its id on this adapter.
        link: u32,
        /// The token a connect must show (a listen's; 0 for a connect).
        token: u64,
    },
    /// The answer to [`Request::SpineLinks`]; fd: a memory file holding
    /// the listing ([`spine_wire::LinkListing`]), `len` bytes.
    SpineLinkListing {
        /// Length of the listing.
        len: u32,
    },
    /// A table is installed ([`Request::SpineTable`]).
    SpineTableLoaded {
        /// Its version: loads of tables into this extension, counted
        /// from 1.
        version: u32,
        /// Bytes its arrays take (charged to the extension's table quota).
        bytes: u64,
    },
    /// A SPINE port was opened ([`Request::SpinePortOpen`]).
    SpinePort {
        /// Its id on this adapter.
        port: u32,
    },
    /// The answer to [`Request::SpinePorts`]; fd: a memory file holding
    /// the listing ([`spine_port::PortListing`]), `len` bytes.
    SpinePortListing {
        /// Length of the listing.
        len: u32,
    },
    /// A framebuffer was made ([`Request::SpineFramebuffer`]); fd: its
    /// segment, `len` bytes (the pixels, then the engine's counters).
    SpineFramebuffer {
        /// Its number in the extension (`Spine.fbWrite`'s first argument).
        index: u32,
        /// Length of the segment.
        len: u64,
    },
    /// A view of a framebuffer ([`Request::SpineFramebufferView`]); fd:
    /// its segment opened read-only, `len` bytes (the pixels, then the
    /// engine's counters).
    SpineFramebufferView {
        /// Pixels a row.
        width: u32,
        /// Rows.
        height: u32,
        /// Length of the segment.
        len: u64,
    },
}

/// The limits an engine sets its clients, as `unet stat` shows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes of shared memory one process may hold.
    pub client_memory: u64,
    /// Most bytes of shared memory the processes of one user may hold
    /// (`u64::MAX`: no limit).
    pub user_memory: u64,
    /// Most endpoints one process may hold.
    pub client_endpoints: u32,
    /// Most connections with no endpoint one process may hold.
    pub client_idle_connections: u32,
    /// Most connections with no endpoint the processes of one user may
    /// hold.
    pub user_idle_connections: u32,
    /// Most memory regions one process may hold.
    pub client_regions: u32,
    /// Most VIs one process may hold.
    pub client_vis: u32,
    /// Most discriminators one process may listen on.
    pub client_listeners: u32,
    /// Most UDM jobs one process may have made that live.
    pub client_udm_jobs: u32,
    /// Most UDM nodes one process may have joined.
    pub client_udm_nodes: u32,
    /// Bytes reserved for each VI between engines (held, out-of-order and
    /// partly received messages), charged to its process.
    pub vi_held_budget: u64,
}

/// A control packet that does not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlError {
    /// Shorter than its kind requires.
    Truncated,
    /// Unknown message kind.
    UnknownKind(u16),
    /// A field holds an impossible value.
    BadField(&'static str),
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlError::Truncated => f.write_str("truncated control packet"),
            ControlError::UnknownKind(k) => write!(f, "unknown control message kind {k}"),
            ControlError::BadField(n) => write!(f, "bad control field {n}"),
        }
    }
}

impl std::error::Error for ControlError {}
