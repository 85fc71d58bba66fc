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

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use unet_abi::{Geometry, Reliability};

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
    /// connection requests it waits on, UDM jobs or nodes.
    ObjectQuota = 26,
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
                 discriminators, connection requests, UDM jobs or nodes) as the engine \
                 allows one process (close some, or start the engine with a larger \
                 per-process limit)"
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
}

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

impl ViParams {
    fn put(&self, w: &mut W) {
        w.u8(self.reliability as u8);
        w.u8(self.strict_rnr as u8);
        w.u32(self.break_timeout_ms);
    }
    fn get(r: &mut R<'_>) -> Result<ViParams, ControlError> {
        let reliability =
            Reliability::from_u8(r.u8()?).ok_or(ControlError::BadField("reliability"))?;
        Ok(ViParams {
            reliability,
            strict_rnr: r.bool()?,
            break_timeout_ms: r.u32()?,
        })
    }
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

/// Declares the message kinds of one direction: an enum whose
/// discriminants are the kinds' numbers on the wire, each written here
/// once (the compiler refuses two kinds of one number), and the lookup
/// from a number. `encode` writes `Kind::X as u16`; `decode` matches on
/// the kind looked up, so a kind with no decoding does not build.
macro_rules! kinds {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $n:literal),* $(,)? }) => {
        $(#[$m])*
        #[repr(u16)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        enum $name { $($(#[$vm])* $v = $n),* }
        impl $name {
            /// Every kind, in the table's order.
            #[cfg(test)]
            const ALL: &'static [$name] = &[$($name::$v),*];
            /// The kind numbered `k`, if any.
            fn from_u16(k: u16) -> Option<$name> {
                match k {
                    $($n => Some($name::$v),)*
                    _ => None,
                }
            }
        }
    };
}

kinds! {
    /// The kinds of [`Request`], as the packet header numbers them.
    ReqKind {
        /// [`Request::Hello`].
        Hello = 1,
        /// [`Request::CreateEndpoint`] with no buffer limit.
        CreateEndpoint = 2,
        /// [`Request::OpenChannel`].
        OpenChannel = 3,
        /// [`Request::CloseChannel`].
        CloseChannel = 4,
        /// [`Request::CloseEndpoint`].
        CloseEndpoint = 5,
        /// [`Request::SetAccept`].
        SetAccept = 6,
        /// [`Request::Stat`].
        Stat = 7,
        /// [`Request::AttachApplet`].
        AttachApplet = 8,
        /// [`Request::DetachApplet`].
        DetachApplet = 9,
        /// [`Request::RegisterMemory`].
        RegisterMemory = 10,
        /// [`Request::DeregisterMemory`].
        DeregisterMemory = 11,
        /// [`Request::ViListen`].
        ViListen = 12,
        /// [`Request::ViUnlisten`].
        ViUnlisten = 13,
        /// [`Request::ViConnect`].
        ViConnect = 14,
        /// [`Request::ViAccept`].
        ViAccept = 15,
        /// [`Request::ViReject`].
        ViReject = 16,
        /// [`Request::ViClose`].
        ViClose = 17,
        /// [`Request::UdmCreateJob`].
        UdmCreateJob = 18,
        /// [`Request::UdmJoin`].
        UdmJoin = 19,
        /// [`Request::UdmLeave`].
        UdmLeave = 20,
        /// [`Request::UdmJoinRemote`].
        UdmJoinRemote = 30,
        /// [`Request::ViGrantRegion`].
        ViGrantRegion = 40,
        /// [`Request::ViPeerRegion`].
        ViPeerRegion = 41,
        /// [`Request::CreateEndpoint`] with a buffer limit (not 0).
        CreateEndpointBuffered = 42,
    }
}

kinds! {
    /// The kinds of [`Reply`], as the packet header numbers them.
    ReplyKind {
        /// [`Reply::Hello`].
        Hello = 101,
        /// [`Reply::EndpointCreated`].
        EndpointCreated = 102,
        /// [`Reply::ChannelOpened`].
        ChannelOpened = 103,
        /// [`Reply::Ok`].
        Ok = 104,
        /// [`Reply::Error`].
        Error = 105,
        /// [`Reply::Stat`].
        Stat = 106,
        /// [`Reply::DirectConn`].
        DirectConn = 107,
        /// [`Reply::Rejected`].
        Rejected = 108,
        /// [`Reply::MemoryRegistered`].
        MemoryRegistered = 109,
        /// [`Reply::ViConnected`].
        ViConnected = 110,
        /// [`Reply::ViRequest`].
        ViRequest = 111,
        /// [`Reply::UdmJob`].
        UdmJob = 112,
        /// [`Reply::UdmJoined`].
        UdmJoined = 113,
        /// [`Reply::PeerRegion`].
        PeerRegion = 140,
    }
}

struct W {
    buf: [u8; MAX_PACKET],
    len: usize,
}

impl W {
    fn new(kind: u16, req_id: u32) -> W {
        let mut w = W {
            buf: [0; MAX_PACKET],
            len: 0,
        };
        w.u16(kind);
        w.u16(0);
        w.u32(req_id);
        w
    }
    fn put(&mut self, b: &[u8]) {
        self.buf[self.len..self.len + b.len()].copy_from_slice(b);
        self.len += b.len();
    }
    fn u8(&mut self, v: u8) {
        self.put(&[v]);
    }
    fn u16(&mut self, v: u16) {
        self.put(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.put(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.put(&v.to_le_bytes());
    }
    fn addr(&mut self, a: Option<SocketAddr>) {
        match a {
            None => {
                self.u8(0);
                self.put(&[0; 18]);
            }
            Some(SocketAddr::V4(v)) => {
                self.u8(4);
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&v.ip().octets());
                self.put(&b);
                self.u16(v.port());
            }
            Some(SocketAddr::V6(v)) => {
                self.u8(6);
                self.put(&v.ip().octets());
                self.u16(v.port());
            }
        }
    }
    fn done(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

struct R<'a> {
    b: &'a [u8],
}

impl<'a> R<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ControlError> {
        if self.b.len() < n {
            return Err(ControlError::Truncated);
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8, ControlError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, ControlError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, ControlError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, ControlError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn addr(&mut self) -> Result<Option<SocketAddr>, ControlError> {
        let fam = self.u8()?;
        let raw = self.take(16)?;
        let port = self.u16()?;
        match fam {
            0 => Ok(None),
            4 => Ok(Some(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3])),
                port,
            ))),
            6 => {
                let mut o = [0u8; 16];
                o.copy_from_slice(raw);
                Ok(Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(o)), port)))
            }
            _ => Err(ControlError::BadField("address family")),
        }
    }
    fn bool(&mut self) -> Result<bool, ControlError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(ControlError::BadField("bool")),
        }
    }
}

fn header(b: &[u8]) -> Result<(u16, u32, R<'_>), ControlError> {
    let mut r = R { b };
    let kind = r.u16()?;
    let _ = r.u16()?;
    let id = r.u32()?;
    Ok((kind, id, r))
}

impl Request {
    /// Encode with `req_id` into `out`; returns the bytes.
    pub fn encode(&self, req_id: u32) -> Vec<u8> {
        let w = match self {
            Request::Hello { version } => {
                let mut w = W::new(ReqKind::Hello as u16, req_id);
                w.u32(*version);
                w
            }
            Request::CreateEndpoint {
                geometry: g,
                accept,
                buffer_limit,
            } => {
                let kind = if *buffer_limit == 0 {
                    ReqKind::CreateEndpoint
                } else {
                    ReqKind::CreateEndpointBuffered
                };
                let mut w = W::new(kind as u16, req_id);
                w.u32(g.buffer_size);
                w.u64(g.buffer_area_size);
                w.u32(g.send_cap);
                w.u32(g.recv_cap);
                w.u32(g.free_cap);
                w.u32(g.event_cap);
                w.u8(*accept as u8);
                if *buffer_limit != 0 {
                    w.u64(*buffer_limit);
                }
                w
            }
            Request::OpenChannel {
                endpoint,
                dst,
                path,
            } => {
                let mut w = W::new(ReqKind::OpenChannel as u16, req_id);
                w.u32(*endpoint);
                w.addr(dst.host);
                w.u32(dst.id);
                w.u8(*path as u8);
                w
            }
            Request::CloseChannel { endpoint, channel } => {
                let mut w = W::new(ReqKind::CloseChannel as u16, req_id);
                w.u32(*endpoint);
                w.u16(*channel);
                w
            }
            Request::CloseEndpoint { endpoint } => {
                let mut w = W::new(ReqKind::CloseEndpoint as u16, req_id);
                w.u32(*endpoint);
                w
            }
            Request::SetAccept { endpoint, accept } => {
                let mut w = W::new(ReqKind::SetAccept as u16, req_id);
                w.u32(*endpoint);
                w.u8(*accept as u8);
                w
            }
            Request::Stat => W::new(ReqKind::Stat as u16, req_id),
            Request::AttachApplet {
                endpoint,
                len,
                fuel,
                heap,
            } => {
                let mut w = W::new(ReqKind::AttachApplet as u16, req_id);
                w.u32(*endpoint);
                w.u32(*len);
                w.u64(*fuel);
                w.u32(*heap);
                w
            }
            Request::DetachApplet { endpoint } => {
                let mut w = W::new(ReqKind::DetachApplet as u16, req_id);
                w.u32(*endpoint);
                w
            }
            Request::RegisterMemory { len } => {
                let mut w = W::new(ReqKind::RegisterMemory as u16, req_id);
                w.u64(*len);
                w
            }
            Request::DeregisterMemory { handle } => {
                let mut w = W::new(ReqKind::DeregisterMemory as u16, req_id);
                w.u32(*handle);
                w
            }
            Request::ViListen { tag } => {
                let mut w = W::new(ReqKind::ViListen as u16, req_id);
                w.u64(*tag);
                w
            }
            Request::ViUnlisten { tag } => {
                let mut w = W::new(ReqKind::ViUnlisten as u16, req_id);
                w.u64(*tag);
                w
            }
            Request::ViConnect {
                host,
                tag,
                attrs,
                timeout_ms,
            } => {
                let mut w = W::new(ReqKind::ViConnect as u16, req_id);
                w.addr(*host);
                w.u64(*tag);
                attrs.put(&mut w);
                w.u32(*timeout_ms);
                w
            }
            Request::ViAccept { request, attrs } => {
                let mut w = W::new(ReqKind::ViAccept as u16, req_id);
                w.u32(*request);
                attrs.put(&mut w);
                w
            }
            Request::ViReject { request } => {
                let mut w = W::new(ReqKind::ViReject as u16, req_id);
                w.u32(*request);
                w
            }
            Request::ViClose { vi } => {
                let mut w = W::new(ReqKind::ViClose as u16, req_id);
                w.u32(*vi);
                w
            }
            Request::ViGrantRegion { vi, handle } => {
                let mut w = W::new(ReqKind::ViGrantRegion as u16, req_id);
                w.u32(*vi);
                w.u32(*handle);
                w
            }
            Request::ViPeerRegion { vi, handle } => {
                let mut w = W::new(ReqKind::ViPeerRegion as u16, req_id);
                w.u32(*vi);
                w.u32(*handle);
                w
            }
            Request::UdmCreateJob {
                nodes,
                fast_cap,
                buffer_size,
                atomicity_timeout_us,
            } => {
                let mut w = W::new(ReqKind::UdmCreateJob as u16, req_id);
                w.u32(*nodes);
                w.u32(*fast_cap);
                w.u64(*buffer_size);
                w.u32(*atomicity_timeout_us);
                w
            }
            Request::UdmJoin { job, key, rank } => {
                let mut w = W::new(ReqKind::UdmJoin as u16, req_id);
                w.u32(*job);
                w.u64(*key);
                w.u32(*rank);
                w
            }
            Request::UdmLeave { job, rank } => {
                let mut w = W::new(ReqKind::UdmLeave as u16, req_id);
                w.u32(*job);
                w.u32(*rank);
                w
            }
            Request::UdmJoinRemote {
                home,
                job,
                key,
                rank,
            } => {
                let mut w = W::new(ReqKind::UdmJoinRemote as u16, req_id);
                w.addr(Some(*home));
                w.u32(*job);
                w.u64(*key);
                w.u32(*rank);
                w
            }
        };
        w.done().to_vec()
    }

    /// The request id of a packet that may not decode (or was cut
    /// short): the engine echoes it in its `BadRequest` reply, so that
    /// the client can match the reply. None when the packet is too short
    /// to hold one, or holds 0 (reserved for notices).
    pub fn peek_id(b: &[u8]) -> Option<u32> {
        let id = u32::from_le_bytes(b.get(4..8)?.try_into().ok()?);
        (id != 0).then_some(id)
    }

    /// Decode a packet into `(req_id, request)`.
    pub fn decode(b: &[u8]) -> Result<(u32, Request), ControlError> {
        let (k, id, mut r) = header(b)?;
        let kind = ReqKind::from_u16(k).ok_or(ControlError::UnknownKind(k))?;
        let req = match kind {
            ReqKind::Hello => Request::Hello { version: r.u32()? },
            ReqKind::CreateEndpoint | ReqKind::CreateEndpointBuffered => {
                let geometry = Geometry {
                    buffer_size: r.u32()?,
                    buffer_area_size: r.u64()?,
                    send_cap: r.u32()?,
                    recv_cap: r.u32()?,
                    free_cap: r.u32()?,
                    event_cap: r.u32()?,
                };
                let accept = r.bool()?;
                let buffer_limit = if kind == ReqKind::CreateEndpointBuffered {
                    match r.u64()? {
                        // Kind 2 says "not buffered".
                        0 => return Err(ControlError::BadField("buffer limit")),
                        l => l,
                    }
                } else {
                    0
                };
                Request::CreateEndpoint {
                    geometry,
                    accept,
                    buffer_limit,
                }
            }
            ReqKind::OpenChannel => {
                let endpoint = r.u32()?;
                let host = r.addr()?;
                let id = r.u32()?;
                let path = match r.u8()? {
                    0 => PathChoice::Auto,
                    1 => PathChoice::Direct,
                    2 => PathChoice::Engine,
                    _ => return Err(ControlError::BadField("path")),
                };
                Request::OpenChannel {
                    endpoint,
                    dst: EndpointAddr { host, id },
                    path,
                }
            }
            ReqKind::CloseChannel => Request::CloseChannel {
                endpoint: r.u32()?,
                channel: r.u16()?,
            },
            ReqKind::CloseEndpoint => Request::CloseEndpoint { endpoint: r.u32()? },
            ReqKind::SetAccept => Request::SetAccept {
                endpoint: r.u32()?,
                accept: r.bool()?,
            },
            ReqKind::Stat => Request::Stat,
            ReqKind::AttachApplet => Request::AttachApplet {
                endpoint: r.u32()?,
                len: r.u32()?,
                fuel: r.u64()?,
                heap: r.u32()?,
            },
            ReqKind::DetachApplet => Request::DetachApplet { endpoint: r.u32()? },
            ReqKind::RegisterMemory => Request::RegisterMemory { len: r.u64()? },
            ReqKind::DeregisterMemory => Request::DeregisterMemory { handle: r.u32()? },
            ReqKind::ViListen => Request::ViListen { tag: r.u64()? },
            ReqKind::ViUnlisten => Request::ViUnlisten { tag: r.u64()? },
            ReqKind::ViConnect => Request::ViConnect {
                host: r.addr()?,
                tag: r.u64()?,
                attrs: ViParams::get(&mut r)?,
                timeout_ms: r.u32()?,
            },
            ReqKind::ViAccept => Request::ViAccept {
                request: r.u32()?,
                attrs: ViParams::get(&mut r)?,
            },
            ReqKind::ViReject => Request::ViReject { request: r.u32()? },
            ReqKind::ViClose => Request::ViClose { vi: r.u32()? },
            ReqKind::ViGrantRegion => Request::ViGrantRegion {
                vi: r.u32()?,
                handle: r.u32()?,
            },
            ReqKind::ViPeerRegion => Request::ViPeerRegion {
                vi: r.u32()?,
                handle: r.u32()?,
            },
            ReqKind::UdmCreateJob => Request::UdmCreateJob {
                nodes: r.u32()?,
                fast_cap: r.u32()?,
                buffer_size: r.u64()?,
                atomicity_timeout_us: r.u32()?,
            },
            ReqKind::UdmJoin => Request::UdmJoin {
                job: r.u32()?,
                key: r.u64()?,
                rank: r.u32()?,
            },
            ReqKind::UdmLeave => Request::UdmLeave {
                job: r.u32()?,
                rank: r.u32()?,
            },
            ReqKind::UdmJoinRemote => Request::UdmJoinRemote {
                home: r.addr()?.ok_or(ControlError::BadField("home"))?,
                job: r.u32()?,
                key: r.u64()?,
                rank: r.u32()?,
            },
        };
        Ok((id, req))
    }
}

impl Reply {
    /// Encode with `req_id`.
    pub fn encode(&self, req_id: u32) -> Vec<u8> {
        let w = match self {
            Reply::Hello { engine_id, udp } => {
                let mut w = W::new(ReplyKind::Hello as u16, req_id);
                w.u64(*engine_id);
                w.addr(*udp);
                w
            }
            Reply::EndpointCreated { endpoint } => {
                let mut w = W::new(ReplyKind::EndpointCreated as u16, req_id);
                w.u32(*endpoint);
                w
            }
            Reply::ChannelOpened {
                channel,
                conn_id,
                side,
            } => {
                let mut w = W::new(ReplyKind::ChannelOpened as u16, req_id);
                w.u16(*channel);
                w.u32(*conn_id);
                w.u8(*side);
                w
            }
            Reply::Ok => W::new(ReplyKind::Ok as u16, req_id),
            Reply::Error(code) => {
                let mut w = W::new(ReplyKind::Error as u16, req_id);
                w.u16(*code as u16);
                w
            }
            Reply::Stat {
                max_endpoints,
                limits,
            } => {
                let mut w = W::new(ReplyKind::Stat as u16, req_id);
                w.u32(*max_endpoints);
                w.u64(limits.client_memory);
                w.u64(limits.user_memory);
                w.u32(limits.client_endpoints);
                w.u32(limits.client_idle_connections);
                w.u32(limits.user_idle_connections);
                w.u32(limits.client_regions);
                w.u32(limits.client_vis);
                w.u32(limits.client_listeners);
                w.u32(limits.client_udm_jobs);
                w.u32(limits.client_udm_nodes);
                w.u64(limits.vi_held_budget);
                w
            }
            Reply::Rejected(text) => {
                let mut w = W::new(ReplyKind::Rejected as u16, req_id);
                let mut n = text.len().min(MAX_TEXT);
                while !text.is_char_boundary(n) {
                    n -= 1;
                }
                w.u16(n as u16);
                w.put(&text.as_bytes()[..n]);
                w
            }
            Reply::MemoryRegistered { handle } => {
                let mut w = W::new(ReplyKind::MemoryRegistered as u16, req_id);
                w.u32(*handle);
                w
            }
            Reply::PeerRegion { len } => {
                let mut w = W::new(ReplyKind::PeerRegion as u16, req_id);
                w.u64(*len);
                w
            }
            Reply::ViConnected { vi, conn_id, side } => {
                let mut w = W::new(ReplyKind::ViConnected as u16, req_id);
                w.u32(*vi);
                w.u32(*conn_id);
                w.u8(*side);
                w
            }
            Reply::ViRequest {
                tag,
                request,
                attrs,
                pid,
                host,
            } => {
                let mut w = W::new(ReplyKind::ViRequest as u16, req_id);
                w.u64(*tag);
                w.u32(*request);
                attrs.put(&mut w);
                w.u32(*pid);
                w.addr(*host);
                w
            }
            Reply::UdmJob { job, key } => {
                let mut w = W::new(ReplyKind::UdmJob as u16, req_id);
                w.u32(*job);
                w.u64(*key);
                w
            }
            Reply::UdmJoined { job, rank } => {
                let mut w = W::new(ReplyKind::UdmJoined as u16, req_id);
                w.u32(*job);
                w.u32(*rank);
                w
            }
            Reply::DirectConn {
                endpoint,
                channel,
                conn_id,
                side,
            } => {
                let mut w = W::new(ReplyKind::DirectConn as u16, req_id);
                w.u32(*endpoint);
                w.u16(*channel);
                w.u32(*conn_id);
                w.u8(*side);
                w
            }
        };
        w.done().to_vec()
    }

    /// Decode a packet into `(req_id, reply)`.
    pub fn decode(b: &[u8]) -> Result<(u32, Reply), ControlError> {
        let (k, id, mut r) = header(b)?;
        let rep = match ReplyKind::from_u16(k).ok_or(ControlError::UnknownKind(k))? {
            ReplyKind::Hello => Reply::Hello {
                engine_id: r.u64()?,
                udp: r.addr()?,
            },
            ReplyKind::EndpointCreated => Reply::EndpointCreated { endpoint: r.u32()? },
            ReplyKind::ChannelOpened => Reply::ChannelOpened {
                channel: r.u16()?,
                conn_id: r.u32()?,
                side: r.u8()?,
            },
            ReplyKind::Ok => Reply::Ok,
            ReplyKind::Error => Reply::Error(
                ErrorCode::from_u16(r.u16()?).ok_or(ControlError::BadField("error code"))?,
            ),
            ReplyKind::Stat => Reply::Stat {
                max_endpoints: r.u32()?,
                limits: Limits {
                    client_memory: r.u64()?,
                    user_memory: r.u64()?,
                    client_endpoints: r.u32()?,
                    client_idle_connections: r.u32()?,
                    user_idle_connections: r.u32()?,
                    client_regions: r.u32()?,
                    client_vis: r.u32()?,
                    client_listeners: r.u32()?,
                    client_udm_jobs: r.u32()?,
                    client_udm_nodes: r.u32()?,
                    vi_held_budget: r.u64()?,
                },
            },
            ReplyKind::DirectConn => Reply::DirectConn {
                endpoint: r.u32()?,
                channel: r.u16()?,
                conn_id: r.u32()?,
                side: r.u8()?,
            },
            ReplyKind::MemoryRegistered => Reply::MemoryRegistered { handle: r.u32()? },
            ReplyKind::PeerRegion => Reply::PeerRegion { len: r.u64()? },
            ReplyKind::UdmJob => Reply::UdmJob {
                job: r.u32()?,
                key: r.u64()?,
            },
            ReplyKind::UdmJoined => Reply::UdmJoined {
                job: r.u32()?,
                rank: r.u32()?,
            },
            ReplyKind::ViConnected => Reply::ViConnected {
                vi: r.u32()?,
                conn_id: r.u32()?,
                side: r.u8()?,
            },
            ReplyKind::ViRequest => Reply::ViRequest {
                tag: r.u64()?,
                request: r.u32()?,
                attrs: ViParams::get(&mut r)?,
                pid: r.u32()?,
                host: r.addr()?,
            },
            ReplyKind::Rejected => {
                let n = r.u16()? as usize;
                if n > MAX_TEXT {
                    return Err(ControlError::BadField("text length"));
                }
                // Text the engine encodes is UTF-8 (cut at a character
                // boundary). Anything else is refused rather than replaced
                // (a replacement character is three bytes: the text could
                // outgrow MAX_TEXT and not encode back to itself).
                let text =
                    std::str::from_utf8(r.take(n)?).map_err(|_| ControlError::BadField("text"))?;
                Reply::Rejected(text.to_owned())
            }
        };
        Ok((id, rep))
    }
}

/// The control fuzz target's property, for the tests: `b` decoded as a
/// request and as a reply never panics, and whatever decodes encodes to a
/// packet of at most [`MAX_PACKET`] bytes that decodes to the same value.
#[cfg(test)]
fn round_trips(b: &[u8]) {
    if let Ok((id, req)) = Request::decode(b) {
        let e = req.encode(id);
        assert!(e.len() <= MAX_PACKET && e.len() <= b.len(), "{req:?}");
        assert_eq!(Request::decode(&e), Ok((id, req)), "from {b:02x?}");
    }
    if let Ok((id, rep)) = Reply::decode(b) {
        let e = rep.encode(id);
        assert!(e.len() <= MAX_PACKET && e.len() <= b.len(), "{rep:?}");
        assert_eq!(Reply::decode(&e), Ok((id, rep)), "from {b:02x?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The limits the samples' `Stat` replies carry.
    fn sample_limits() -> Limits {
        Limits {
            client_memory: 4 << 30,
            user_memory: u64::MAX,
            client_endpoints: 16,
            client_idle_connections: 32,
            user_idle_connections: 128,
            client_regions: 1024,
            client_vis: 1024,
            client_listeners: 64,
            client_udm_jobs: 32,
            client_udm_nodes: 256,
            vi_held_budget: 4 << 20,
        }
    }

    /// One of each request and reply, the seeds of the control fuzz target
    /// (`fuzz/seeds/control/`).
    fn samples() -> Vec<(&'static str, Vec<u8>)> {
        let reqs = [
            ("hello", Request::Hello { version: 1 }),
            (
                "create_endpoint",
                Request::CreateEndpoint {
                    geometry: Geometry::default(),
                    accept: true,
                    buffer_limit: 0,
                },
            ),
            (
                "create_endpoint_buffered",
                Request::CreateEndpoint {
                    geometry: Geometry::default(),
                    accept: true,
                    buffer_limit: 16 << 20,
                },
            ),
            (
                "open_channel_v4",
                Request::OpenChannel {
                    endpoint: 3,
                    dst: EndpointAddr {
                        host: Some("10.0.0.1:7000".parse().unwrap()),
                        id: 9,
                    },
                    path: PathChoice::Engine,
                },
            ),
            (
                "open_channel_v6",
                Request::OpenChannel {
                    endpoint: 3,
                    dst: EndpointAddr {
                        host: Some("[::1]:7000".parse().unwrap()),
                        id: 9,
                    },
                    path: PathChoice::Direct,
                },
            ),
            (
                "open_channel_local",
                Request::OpenChannel {
                    endpoint: 1,
                    dst: EndpointAddr::local(2),
                    path: PathChoice::Auto,
                },
            ),
            (
                "close_channel",
                Request::CloseChannel {
                    endpoint: 1,
                    channel: 2,
                },
            ),
            ("close_endpoint", Request::CloseEndpoint { endpoint: 1 }),
            (
                "set_accept",
                Request::SetAccept {
                    endpoint: 1,
                    accept: false,
                },
            ),
            ("stat", Request::Stat),
            (
                "attach_applet",
                Request::AttachApplet {
                    endpoint: 1,
                    len: 700,
                    fuel: 5,
                    heap: 9,
                },
            ),
            ("detach_applet", Request::DetachApplet { endpoint: 1 }),
            ("register_memory", Request::RegisterMemory { len: 1 << 20 }),
            ("deregister_memory", Request::DeregisterMemory { handle: 3 }),
            ("vi_listen", Request::ViListen { tag: 42 }),
            ("vi_unlisten", Request::ViUnlisten { tag: 42 }),
            (
                "vi_connect",
                Request::ViConnect {
                    host: Some("127.0.0.1:7700".parse().unwrap()),
                    tag: 42,
                    attrs: ViParams {
                        reliability: Reliability::ReliableReception,
                        strict_rnr: true,
                        break_timeout_ms: 0,
                    },
                    timeout_ms: 5000,
                },
            ),
            (
                "vi_accept",
                Request::ViAccept {
                    request: 7,
                    attrs: ViParams::default(),
                },
            ),
            ("vi_reject", Request::ViReject { request: 7 }),
            ("vi_close", Request::ViClose { vi: 5 }),
            (
                "vi_grant_region",
                Request::ViGrantRegion { vi: 5, handle: 9 },
            ),
            ("vi_peer_region", Request::ViPeerRegion { vi: 5, handle: 9 }),
            (
                "udm_create_job",
                Request::UdmCreateJob {
                    nodes: 4,
                    fast_cap: 8,
                    buffer_size: 1 << 20,
                    atomicity_timeout_us: 2000,
                },
            ),
            (
                "udm_join",
                Request::UdmJoin {
                    job: 1,
                    key: 0x1234_5678_9abc_def0,
                    rank: 3,
                },
            ),
            ("udm_leave", Request::UdmLeave { job: 1, rank: 3 }),
            (
                "udm_join_remote",
                Request::UdmJoinRemote {
                    home: "127.0.0.1:9".parse().unwrap(),
                    job: 1,
                    key: 0x1234_5678_9abc_def0,
                    rank: 3,
                },
            ),
        ];
        let reps = [
            (
                "reply_hello",
                Reply::Hello {
                    engine_id: 5,
                    udp: Some("127.0.0.1:9".parse().unwrap()),
                },
            ),
            (
                "reply_endpoint_created",
                Reply::EndpointCreated { endpoint: 4 },
            ),
            (
                "reply_channel_opened",
                Reply::ChannelOpened {
                    channel: 1,
                    conn_id: 2,
                    side: 1,
                },
            ),
            ("reply_ok", Reply::Ok),
            ("reply_error", Reply::Error(ErrorCode::QuotaExceeded)),
            (
                "reply_stat",
                Reply::Stat {
                    max_endpoints: 64,
                    limits: sample_limits(),
                },
            ),
            (
                "reply_rejected",
                Reply::Rejected("method run: bytecode 12: stack underflow é".into()),
            ),
            (
                "reply_memory_registered",
                Reply::MemoryRegistered { handle: 3 },
            ),
            ("reply_peer_region", Reply::PeerRegion { len: 1 << 20 }),
            (
                "reply_vi_connected",
                Reply::ViConnected {
                    vi: 5,
                    conn_id: 6,
                    side: 1,
                },
            ),
            (
                "reply_vi_request",
                Reply::ViRequest {
                    tag: 42,
                    request: 7,
                    attrs: ViParams {
                        reliability: Reliability::Unreliable,
                        strict_rnr: false,
                        break_timeout_ms: 250,
                    },
                    pid: 1234,
                    host: None,
                },
            ),
            (
                "reply_udm_job",
                Reply::UdmJob {
                    job: 1,
                    key: 0x1234_5678_9abc_def0,
                },
            ),
            ("reply_udm_joined", Reply::UdmJoined { job: 1, rank: 3 }),
            (
                "reply_direct_conn",
                Reply::DirectConn {
                    endpoint: 1,
                    channel: 2,
                    conn_id: 3,
                    side: 1,
                },
            ),
        ];
        let mut v: Vec<(&str, Vec<u8>)> = reqs.iter().map(|(n, r)| (*n, r.encode(17))).collect();
        v.extend(reps.iter().map(|(n, r)| (*n, r.encode(17))));
        v
    }

    fn seeds_dir() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/control")
    }

    /// The committed seeds are the samples' encodings (`UNET_BLESS=1`
    /// rewrites them), and each round-trips.
    #[test]
    fn fuzz_seeds_are_the_samples_and_round_trip() {
        let dir = seeds_dir();
        if std::env::var_os("UNET_BLESS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            for (name, b) in samples() {
                std::fs::write(dir.join(name), b).unwrap();
            }
        }
        let mut n = 0;
        for (name, b) in samples() {
            let seed = std::fs::read(dir.join(name))
                .unwrap_or_else(|e| panic!("seed {name}: {e} (UNET_BLESS=1 writes it)"));
            assert_eq!(seed, b, "seed {name} differs from its sample");
            assert!(
                Request::decode(&b).is_ok() || Reply::decode(&b).is_ok(),
                "{name}"
            );
            round_trips(&b);
            n += 1;
        }
        assert_eq!(n, std::fs::read_dir(&dir).unwrap().count());
    }

    /// Each kind of the table has its sample (so its seed), and no number
    /// is both a request's and a reply's kind.
    #[test]
    fn every_kind_has_a_sample_and_the_directions_do_not_share_numbers() {
        let kinds: std::collections::BTreeSet<u16> = samples()
            .iter()
            .map(|(_, b)| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        for k in ReqKind::ALL {
            assert!(kinds.contains(&(*k as u16)), "no sample of {k:?}");
            assert_eq!(ReqKind::from_u16(*k as u16), Some(*k));
            assert_eq!(ReplyKind::from_u16(*k as u16), None, "{k:?}");
        }
        for k in ReplyKind::ALL {
            assert!(kinds.contains(&(*k as u16)), "no sample of {k:?}");
            assert_eq!(ReplyKind::from_u16(*k as u16), Some(*k));
        }
        assert_eq!(kinds.len(), ReqKind::ALL.len() + ReplyKind::ALL.len());
    }

    /// xorshift64*: a fixed sequence, so a failure replays.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// The fuzz target's property over a few thousand packets: random
    /// ones, and the samples mutated (bytes changed, cut, extended, kinds
    /// swapped).
    #[test]
    fn random_and_mutated_packets_decode_totally_and_round_trip() {
        let samples = samples();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut decoded = 0;
        for i in 0..20_000 {
            let mut b = if i % 4 == 0 {
                let len = rng.below(48);
                (0..len).map(|_| rng.next() as u8).collect()
            } else {
                samples[rng.below(samples.len())].1.clone()
            };
            for _ in 0..1 + rng.below(4) {
                match rng.below(6) {
                    0 if !b.is_empty() => {
                        let at = rng.below(b.len());
                        b[at] = rng.next() as u8;
                    }
                    1 if !b.is_empty() => {
                        let at = rng.below(b.len());
                        b[at] ^= 1 << rng.below(8);
                    }
                    2 => b.truncate(rng.below(b.len() + 1)),
                    3 => b.extend((0..rng.below(16)).map(|_| rng.next() as u8)),
                    4 if b.len() >= 2 => {
                        // Another kind: one of the defined ones, or near them.
                        let kinds = [0u16, 1, 5, 9, 10, 100, 101, 105, 108, 109];
                        let k = kinds[rng.below(kinds.len())];
                        b[..2].copy_from_slice(&k.to_le_bytes());
                    }
                    5 if b.len() > 10 => {
                        // A text length or address family byte set large.
                        let at = 8 + rng.below(3);
                        b[at] = 0xff;
                    }
                    _ => {}
                }
            }
            round_trips(&b);
            decoded += (Request::decode(&b).is_ok() || Reply::decode(&b).is_ok()) as u32;
        }
        // The mutations keep many packets valid: the round trip is tried.
        assert!(decoded > 2_000, "only {decoded} packets decoded");
    }

    #[test]
    fn rejected_text_that_is_not_utf8_is_refused() {
        let mut b = Reply::Rejected("abc".into()).encode(1);
        let n = b.len();
        b[n - 1] = 0xff;
        assert_eq!(Reply::decode(&b), Err(ControlError::BadField("text")));
        // Before, this decoded lossily to 900 replacement characters, which
        // encode to 900 bytes of 300 of them: not the same reply.
        let mut b = W::new(ReplyKind::Rejected as u16, 1);
        b.u16(MAX_TEXT as u16);
        b.put(&[0xff; MAX_TEXT]);
        assert_eq!(Reply::decode(b.done()), Err(ControlError::BadField("text")));
        round_trips(b.done());
    }

    #[test]
    fn requests_round_trip_and_prefixes_fail() {
        let reqs = [
            Request::Hello { version: 1 },
            Request::CreateEndpoint {
                geometry: Geometry::default(),
                accept: true,
                buffer_limit: 0,
            },
            Request::CreateEndpoint {
                geometry: Geometry::default(),
                accept: false,
                buffer_limit: 1 << 20,
            },
            Request::OpenChannel {
                endpoint: 3,
                dst: EndpointAddr {
                    host: Some("10.0.0.1:7000".parse().unwrap()),
                    id: 9,
                },
                path: PathChoice::Engine,
            },
            Request::OpenChannel {
                endpoint: 3,
                dst: EndpointAddr {
                    host: Some("[::1]:7000".parse().unwrap()),
                    id: 9,
                },
                path: PathChoice::Direct,
            },
            Request::CloseChannel {
                endpoint: 1,
                channel: 2,
            },
            Request::CloseEndpoint { endpoint: 1 },
            Request::SetAccept {
                endpoint: 1,
                accept: false,
            },
            Request::Stat,
            Request::AttachApplet {
                endpoint: 1,
                len: 700,
                fuel: 5,
                heap: 9,
            },
            Request::DetachApplet { endpoint: 1 },
        ];
        for r in reqs {
            let b = r.encode(77);
            assert_eq!(Request::decode(&b), Ok((77, r.clone())));
            for cut in 0..b.len() {
                assert!(Request::decode(&b[..cut]).is_err(), "{r:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn replies_round_trip() {
        let reps = [
            Reply::Hello {
                engine_id: 5,
                udp: Some("127.0.0.1:9".parse().unwrap()),
            },
            Reply::EndpointCreated { endpoint: 4 },
            Reply::ChannelOpened {
                channel: 1,
                conn_id: 2,
                side: 1,
            },
            Reply::Ok,
            Reply::Error(ErrorCode::Refused),
            Reply::Stat {
                max_endpoints: 64,
                limits: sample_limits(),
            },
            Reply::DirectConn {
                endpoint: 1,
                channel: 2,
                conn_id: 3,
                side: 1,
            },
        ];
        for r in reps {
            let b = r.encode(9);
            assert_eq!(Reply::decode(&b), Ok((9, r.clone())));
        }
    }

    #[test]
    fn every_error_code_round_trips() {
        for v in 1..=26u16 {
            let c = ErrorCode::from_u16(v).unwrap_or_else(|| panic!("code {v}"));
            assert_eq!(c as u16, v);
            let r = Reply::Error(c);
            assert_eq!(Reply::decode(&r.encode(3)), Ok((3, r)));
            assert!(!c.to_string().is_empty());
        }
        assert_eq!(ErrorCode::from_u16(0), None);
        assert_eq!(ErrorCode::from_u16(27), None);
    }

    #[test]
    fn garbage_is_an_error() {
        assert_eq!(
            Request::decode(&[0xff, 0xff, 0, 0, 0, 0, 0, 0]),
            Err(ControlError::UnknownKind(0xffff))
        );
        let mut b = Request::SetAccept {
            endpoint: 1,
            accept: true,
        }
        .encode(1);
        *b.last_mut().unwrap() = 7;
        assert_eq!(Request::decode(&b), Err(ControlError::BadField("bool")));
    }

    #[test]
    fn endpoint_addr_parses() {
        assert_eq!("5".parse::<EndpointAddr>().unwrap(), EndpointAddr::local(5));
        assert_eq!(
            "local/5".parse::<EndpointAddr>().unwrap(),
            EndpointAddr::local(5)
        );
        let a: EndpointAddr = "127.0.0.1:7000/3".parse().unwrap();
        assert_eq!(a.host, Some("127.0.0.1:7000".parse().unwrap()));
        assert!("x/3".parse::<EndpointAddr>().is_err());
    }
}
