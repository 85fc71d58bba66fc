//! The encoding of control packets: each direction's message kinds in one
//! table (`kinds!`), the packet's header, and [`Request`] and [`Reply`]'s
//! `encode` and `decode`, which dispatch by kind (SPINE's kinds' bodies
//! are in `spine`), written with the crate's writer and reader.

use super::*;
use crate::bytes::{R, W};

mod spine;
#[cfg(test)]
mod tests;

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
        pub(crate) enum $name { $($(#[$vm])* $v = $n),* }
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
        /// [`Request::UdmSchedule`].
        UdmSchedule = 76,
        /// [`Request::ViGrantRegion`].
        ViGrantRegion = 40,
        /// [`Request::ViPeerRegion`].
        ViPeerRegion = 41,
        /// [`Request::CreateEndpoint`] with a buffer limit (not 0).
        CreateEndpointBuffered = 42,
        /// [`Request::SpineLoad`].
        SpineLoad = 48,
        /// [`Request::SpineUnload`].
        SpineUnload = 49,
        /// [`Request::SpineList`].
        SpineList = 50,
        /// [`Request::PeerJoin`].
        PeerJoin = 64,
        /// [`Request::PeerDoorbell`].
        PeerDoorbell = 65,
        /// [`Request::PeerLeave`].
        PeerLeave = 66,
        /// [`Request::PeerList`].
        PeerList = 67,
        /// [`Request::SpineLinkListen`].
        SpineLinkListen = 52,
        /// [`Request::SpineLinkConnect`].
        SpineLinkConnect = 53,
        /// [`Request::SpineLinkClose`].
        SpineLinkClose = 54,
        /// [`Request::SpineLinks`].
        SpineLinks = 55,
        /// [`Request::SpinePortOpen`].
        SpinePortOpen = 56,
        /// [`Request::SpinePortClose`].
        SpinePortClose = 57,
        /// [`Request::SpinePorts`].
        SpinePorts = 58,
        /// [`Request::SpineTable`].
        SpineTable = 59,
        /// [`Request::SpineFramebuffer`].
        SpineFramebuffer = 60,
        /// [`Request::SpineFramebufferView`].
        SpineFramebufferView = 61,
        /// [`Request::TraceSet`].
        TraceSet = 72,
        /// [`Request::TraceDump`].
        TraceDump = 73,
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
        /// [`Reply::UdmAdvice`].
        UdmAdvice = 170,
        /// [`Reply::PeerRegion`].
        PeerRegion = 140,
        /// [`Reply::SpineLoaded`].
        SpineLoaded = 148,
        /// [`Reply::SpineListing`].
        SpineListing = 149,
        /// [`Reply::PeerJoined`].
        PeerJoined = 164,
        /// [`Reply::PeerListing`].
        PeerListing = 165,
        /// [`Reply::SpineLink`].
        SpineLink = 152,
        /// [`Reply::SpineLinkListing`].
        SpineLinkListing = 155,
        /// [`Reply::SpinePort`].
        SpinePort = 156,
        /// [`Reply::SpinePortListing`].
        SpinePortListing = 157,
        /// [`Reply::SpineTableLoaded`].
        SpineTableLoaded = 158,
        /// [`Reply::SpineFramebuffer`].
        SpineFramebuffer = 159,
        /// [`Reply::SpineFramebufferView`].
        SpineFramebufferView = 160,
        /// [`Reply::TraceState`].
        TraceState = 74,
        /// [`Reply::TraceDump`].
        TraceDump = 75,
    }
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

/// A packet's writer, its header written: kind, reserved, request id.
fn packet(kind: u16, req_id: u32) -> W {
    let mut w = W::default();
    w.u16(kind);
    w.u16(0);
    w.u32(req_id);
    w
}

fn header(b: &[u8]) -> Result<(u16, u32, R<'_>), ControlError> {
    let mut r = R::new(b);
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
                let mut w = packet(ReqKind::Hello as u16, req_id);
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
                let mut w = packet(kind as u16, req_id);
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
                let mut w = packet(ReqKind::OpenChannel as u16, req_id);
                w.u32(*endpoint);
                w.addr(dst.host);
                w.u32(dst.id);
                w.u8(*path as u8);
                w
            }
            Request::CloseChannel { endpoint, channel } => {
                let mut w = packet(ReqKind::CloseChannel as u16, req_id);
                w.u32(*endpoint);
                w.u16(*channel);
                w
            }
            Request::CloseEndpoint { endpoint } => {
                let mut w = packet(ReqKind::CloseEndpoint as u16, req_id);
                w.u32(*endpoint);
                w
            }
            Request::SetAccept { endpoint, accept } => {
                let mut w = packet(ReqKind::SetAccept as u16, req_id);
                w.u32(*endpoint);
                w.u8(*accept as u8);
                w
            }
            Request::Stat => packet(ReqKind::Stat as u16, req_id),
            Request::AttachApplet {
                endpoint,
                len,
                fuel,
                heap,
            } => {
                let mut w = packet(ReqKind::AttachApplet as u16, req_id);
                w.u32(*endpoint);
                w.u32(*len);
                w.u64(*fuel);
                w.u32(*heap);
                w
            }
            Request::DetachApplet { endpoint } => {
                let mut w = packet(ReqKind::DetachApplet as u16, req_id);
                w.u32(*endpoint);
                w
            }
            Request::RegisterMemory { len } => {
                let mut w = packet(ReqKind::RegisterMemory as u16, req_id);
                w.u64(*len);
                w
            }
            Request::DeregisterMemory { handle } => {
                let mut w = packet(ReqKind::DeregisterMemory as u16, req_id);
                w.u32(*handle);
                w
            }
            Request::ViListen { tag } => {
                let mut w = packet(ReqKind::ViListen as u16, req_id);
                w.u64(*tag);
                w
            }
            Request::ViUnlisten { tag } => {
                let mut w = packet(ReqKind::ViUnlisten as u16, req_id);
                w.u64(*tag);
                w
            }
            Request::ViConnect {
                host,
                tag,
                attrs,
                timeout_ms,
            } => {
                let mut w = packet(ReqKind::ViConnect as u16, req_id);
                w.addr(*host);
                w.u64(*tag);
                attrs.put(&mut w);
                w.u32(*timeout_ms);
                w
            }
            Request::ViAccept { request, attrs } => {
                let mut w = packet(ReqKind::ViAccept as u16, req_id);
                w.u32(*request);
                attrs.put(&mut w);
                w
            }
            Request::ViReject { request } => {
                let mut w = packet(ReqKind::ViReject as u16, req_id);
                w.u32(*request);
                w
            }
            Request::ViClose { vi } => {
                let mut w = packet(ReqKind::ViClose as u16, req_id);
                w.u32(*vi);
                w
            }
            Request::ViGrantRegion { vi, handle } => {
                let mut w = packet(ReqKind::ViGrantRegion as u16, req_id);
                w.u32(*vi);
                w.u32(*handle);
                w
            }
            Request::ViPeerRegion { vi, handle } => {
                let mut w = packet(ReqKind::ViPeerRegion as u16, req_id);
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
                let mut w = packet(ReqKind::UdmCreateJob as u16, req_id);
                w.u32(*nodes);
                w.u32(*fast_cap);
                w.u64(*buffer_size);
                w.u32(*atomicity_timeout_us);
                w
            }
            Request::UdmJoin { job, key, rank } => {
                let mut w = packet(ReqKind::UdmJoin as u16, req_id);
                w.u32(*job);
                w.u64(*key);
                w.u32(*rank);
                w
            }
            Request::UdmLeave { job, rank } => {
                let mut w = packet(ReqKind::UdmLeave as u16, req_id);
                w.u32(*job);
                w.u32(*rank);
                w
            }
            Request::UdmSchedule {
                job,
                key,
                ranks,
                running,
            } => {
                let mut w = packet(ReqKind::UdmSchedule as u16, req_id);
                w.u32(*job);
                w.u64(*key);
                w.u64(*ranks);
                w.u8(*running as u8);
                w
            }
            Request::UdmJoinRemote {
                home,
                job,
                key,
                rank,
            } => {
                let mut w = packet(ReqKind::UdmJoinRemote as u16, req_id);
                w.addr(Some(*home));
                w.u32(*job);
                w.u64(*key);
                w.u32(*rank);
                w
            }
            Request::SpineLoad { .. }
            | Request::SpineUnload { .. }
            | Request::SpineList
            | Request::PeerJoin { .. }
            | Request::PeerDoorbell { .. }
            | Request::PeerLeave { .. }
            | Request::PeerList
            | Request::TraceSet { .. }
            | Request::TraceDump
            | Request::SpineLinkListen { .. }
            | Request::SpineLinkConnect { .. }
            | Request::SpineLinkClose { .. }
            | Request::SpineLinks
            | Request::SpineTable { .. }
            | Request::SpineFramebuffer { .. }
            | Request::SpineFramebufferView { .. }
            | Request::SpinePortOpen { .. }
            | Request::SpinePortClose { .. }
            | Request::SpinePorts => spine::encode_request(self, req_id),
        };
        w.into_vec()
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
            ReqKind::UdmSchedule => Request::UdmSchedule {
                job: r.u32()?,
                key: r.u64()?,
                ranks: r.u64()?,
                running: r.bool()?,
            },
            ReqKind::UdmJoinRemote => Request::UdmJoinRemote {
                home: r.addr()?.ok_or(ControlError::BadField("home"))?,
                job: r.u32()?,
                key: r.u64()?,
                rank: r.u32()?,
            },
            ReqKind::SpineLoad
            | ReqKind::SpineUnload
            | ReqKind::SpineList
            | ReqKind::PeerJoin
            | ReqKind::PeerDoorbell
            | ReqKind::PeerLeave
            | ReqKind::PeerList
            | ReqKind::TraceSet
            | ReqKind::TraceDump
            | ReqKind::SpineLinkListen
            | ReqKind::SpineLinkConnect
            | ReqKind::SpineLinkClose
            | ReqKind::SpineLinks
            | ReqKind::SpineTable
            | ReqKind::SpineFramebuffer
            | ReqKind::SpineFramebufferView
            | ReqKind::SpinePortOpen
            | ReqKind::SpinePortClose
            | ReqKind::SpinePorts => spine::decode_request(kind, &mut r)?,
        };
        Ok((id, req))
    }
}

impl Reply {
    /// Encode with `req_id`.
    pub fn encode(&self, req_id: u32) -> Vec<u8> {
        let w = match self {
            Reply::Hello { engine_id, udp } => {
                let mut w = packet(ReplyKind::Hello as u16, req_id);
                w.u64(*engine_id);
                w.addr(*udp);
                w
            }
            Reply::EndpointCreated { endpoint } => {
                let mut w = packet(ReplyKind::EndpointCreated as u16, req_id);
                w.u32(*endpoint);
                w
            }
            Reply::ChannelOpened {
                channel,
                conn_id,
                side,
            } => {
                let mut w = packet(ReplyKind::ChannelOpened as u16, req_id);
                w.u16(*channel);
                w.u32(*conn_id);
                w.u8(*side);
                w
            }
            Reply::Ok => packet(ReplyKind::Ok as u16, req_id),
            Reply::Error(code) => {
                let mut w = packet(ReplyKind::Error as u16, req_id);
                w.u16(*code as u16);
                w
            }
            Reply::Stat {
                max_endpoints,
                limits,
            } => {
                let mut w = packet(ReplyKind::Stat as u16, req_id);
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
                let mut w = packet(ReplyKind::Rejected as u16, req_id);
                let text = crate::bytes::cut(text, MAX_TEXT);
                w.u16(text.len() as u16);
                w.put(text.as_bytes());
                w
            }
            Reply::MemoryRegistered { handle } => {
                let mut w = packet(ReplyKind::MemoryRegistered as u16, req_id);
                w.u32(*handle);
                w
            }
            Reply::PeerRegion { len } => {
                let mut w = packet(ReplyKind::PeerRegion as u16, req_id);
                w.u64(*len);
                w
            }
            Reply::ViConnected { vi, conn_id, side } => {
                let mut w = packet(ReplyKind::ViConnected as u16, req_id);
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
                let mut w = packet(ReplyKind::ViRequest as u16, req_id);
                w.u64(*tag);
                w.u32(*request);
                attrs.put(&mut w);
                w.u32(*pid);
                w.addr(*host);
                w
            }
            Reply::UdmJob { job, key } => {
                let mut w = packet(ReplyKind::UdmJob as u16, req_id);
                w.u32(*job);
                w.u64(*key);
                w
            }
            Reply::UdmAdvice {
                job,
                near_full,
                descheduled,
            } => {
                let mut w = packet(ReplyKind::UdmAdvice as u16, req_id);
                w.u32(*job);
                w.u64(*near_full);
                w.u64(*descheduled);
                w
            }
            Reply::UdmJoined { job, rank } => {
                let mut w = packet(ReplyKind::UdmJoined as u16, req_id);
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
                let mut w = packet(ReplyKind::DirectConn as u16, req_id);
                w.u32(*endpoint);
                w.u16(*channel);
                w.u32(*conn_id);
                w.u8(*side);
                w
            }
            Reply::SpineLoaded { .. }
            | Reply::SpineListing { .. }
            | Reply::PeerJoined { .. }
            | Reply::PeerListing { .. }
            | Reply::TraceState { .. }
            | Reply::TraceDump { .. }
            | Reply::SpineLink { .. }
            | Reply::SpineLinkListing { .. }
            | Reply::SpineTableLoaded { .. }
            | Reply::SpineFramebuffer { .. }
            | Reply::SpineFramebufferView { .. }
            | Reply::SpinePort { .. }
            | Reply::SpinePortListing { .. } => spine::encode_reply(self, req_id),
        };
        w.into_vec()
    }

    /// Decode a packet into `(req_id, reply)`.
    pub fn decode(b: &[u8]) -> Result<(u32, Reply), ControlError> {
        let (k, id, mut r) = header(b)?;
        let kind = ReplyKind::from_u16(k).ok_or(ControlError::UnknownKind(k))?;
        let rep = match kind {
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
            ReplyKind::UdmAdvice => Reply::UdmAdvice {
                job: r.u32()?,
                near_full: r.u64()?,
                descheduled: r.u64()?,
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
            ReplyKind::SpineLoaded
            | ReplyKind::SpineListing
            | ReplyKind::PeerJoined
            | ReplyKind::PeerListing
            | ReplyKind::TraceState
            | ReplyKind::TraceDump
            | ReplyKind::SpineLink
            | ReplyKind::SpineLinkListing
            | ReplyKind::SpineTableLoaded
            | ReplyKind::SpineFramebuffer
            | ReplyKind::SpineFramebufferView
            | ReplyKind::SpinePort
            | ReplyKind::SpinePortListing => spine::decode_reply(kind, &mut r)?,
        };
        Ok((id, rep))
    }
}
