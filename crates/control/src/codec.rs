//! The encoding of control packets: each direction's message kinds in one
//! table (`kinds!`), the little-endian writer and the total reader, and
//! [`Request`] and [`Reply`]'s `encode` and `decode`.

use super::*;

/// Most handler numbers a [`Reply::SpineLoaded`] carries (an extension's
/// most handlers).
const MAX_HANDLERS: usize = 64;

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
    /// A name: `u8` length and UTF-8 bytes (at most [`MAX_NAME`]).
    fn name(&mut self, s: &str) {
        let mut n = s.len().min(MAX_NAME);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.u8(n as u8);
        self.put(&s.as_bytes()[..n]);
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
    fn name(&mut self) -> Result<String, ControlError> {
        let n = self.u8()? as usize;
        if n > MAX_NAME {
            return Err(ControlError::BadField("name length"));
        }
        std::str::from_utf8(self.take(n)?)
            .map(str::to_owned)
            .map_err(|_| ControlError::BadField("name"))
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
            Request::SpineLoad {
                len,
                budget_us,
                arg,
                name,
                domains,
            } => {
                let mut w = W::new(ReqKind::SpineLoad as u16, req_id);
                w.u32(*len);
                w.u32(*budget_us);
                w.u32(*arg as u32);
                w.name(name);
                let n = domains.len().min(MAX_DOMAINS);
                w.u8(n as u8);
                for d in &domains[..n] {
                    w.name(d);
                }
                w
            }
            Request::SpineUnload { id } => {
                let mut w = W::new(ReqKind::SpineUnload as u16, req_id);
                w.u32(*id);
                w
            }
            Request::SpineList => W::new(ReqKind::SpineList as u16, req_id),
            Request::PeerJoin { side } => {
                let mut w = W::new(ReqKind::PeerJoin as u16, req_id);
                w.u8(*side);
                w
            }
            Request::PeerDoorbell { index } => {
                let mut w = W::new(ReqKind::PeerDoorbell as u16, req_id);
                w.u32(*index);
                w
            }
            Request::PeerLeave { index } => {
                let mut w = W::new(ReqKind::PeerLeave as u16, req_id);
                w.u32(*index);
                w
            }
            Request::PeerList => W::new(ReqKind::PeerList as u16, req_id),
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
            Request::TraceSet { on, capacity } => {
                let mut w = W::new(ReqKind::TraceSet as u16, req_id);
                w.u8(*on as u8);
                w.u32(*capacity);
                w
            }
            Request::TraceDump => W::new(ReqKind::TraceDump as u16, req_id),
            Request::SpineLinkListen { token } => {
                let mut w = W::new(ReqKind::SpineLinkListen as u16, req_id);
                w.u64(*token);
                w
            }
            Request::SpineLinkConnect { peer, token } => {
                let mut w = W::new(ReqKind::SpineLinkConnect as u16, req_id);
                w.addr(Some(*peer));
                w.u64(*token);
                w
            }
            Request::SpineLinkClose { link } => {
                let mut w = W::new(ReqKind::SpineLinkClose as u16, req_id);
                w.u32(*link);
                w
            }
            Request::SpineLinks => W::new(ReqKind::SpineLinks as u16, req_id),
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
            ReqKind::SpineLoad => {
                let len = r.u32()?;
                let budget_us = r.u32()?;
                let arg = r.u32()? as i32;
                let name = r.name()?;
                let n = r.u8()? as usize;
                if n > MAX_DOMAINS {
                    return Err(ControlError::BadField("domains"));
                }
                let domains = (0..n).map(|_| r.name()).collect::<Result<_, _>>()?;
                Request::SpineLoad {
                    len,
                    budget_us,
                    arg,
                    name,
                    domains,
                }
            }
            ReqKind::SpineUnload => Request::SpineUnload { id: r.u32()? },
            ReqKind::SpineList => Request::SpineList,
            ReqKind::PeerJoin => match r.u8()? {
                side @ (0 | 1) => Request::PeerJoin { side },
                _ => return Err(ControlError::BadField("side")),
            },
            ReqKind::PeerDoorbell => Request::PeerDoorbell { index: r.u32()? },
            ReqKind::PeerLeave => Request::PeerLeave { index: r.u32()? },
            ReqKind::PeerList => Request::PeerList,
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
            ReqKind::TraceSet => Request::TraceSet {
                on: r.bool()?,
                capacity: r.u32()?,
            },
            ReqKind::TraceDump => Request::TraceDump,
            ReqKind::SpineLinkListen => Request::SpineLinkListen { token: r.u64()? },
            ReqKind::SpineLinkConnect => Request::SpineLinkConnect {
                peer: r.addr()?.ok_or(ControlError::BadField("peer"))?,
                token: r.u64()?,
            },
            ReqKind::SpineLinkClose => Request::SpineLinkClose { link: r.u32()? },
            ReqKind::SpineLinks => Request::SpineLinks,
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
            Reply::SpineLoaded { id, handlers } => {
                let mut w = W::new(ReplyKind::SpineLoaded as u16, req_id);
                w.u32(*id);
                let n = handlers.len().min(MAX_HANDLERS);
                w.u8(n as u8);
                for h in &handlers[..n] {
                    w.u16(*h);
                }
                w
            }
            Reply::SpineListing { len } => {
                let mut w = W::new(ReplyKind::SpineListing as u16, req_id);
                w.u32(*len);
                w
            }
            Reply::PeerJoined { index } => {
                let mut w = W::new(ReplyKind::PeerJoined as u16, req_id);
                w.u32(*index);
                w
            }
            Reply::PeerListing { len } => {
                let mut w = W::new(ReplyKind::PeerListing as u16, req_id);
                w.u32(*len);
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
            Reply::TraceState {
                on,
                capacity,
                recorded,
                overwritten,
            } => {
                let mut w = W::new(ReplyKind::TraceState as u16, req_id);
                w.u8(*on as u8);
                w.u32(*capacity);
                w.u64(*recorded);
                w.u64(*overwritten);
                w
            }
            Reply::TraceDump { events, len } => {
                let mut w = W::new(ReplyKind::TraceDump as u16, req_id);
                w.u32(*events);
                w.u64(*len);
                w
            }
            Reply::SpineLink { link, token } => {
                let mut w = W::new(ReplyKind::SpineLink as u16, req_id);
                w.u32(*link);
                w.u64(*token);
                w
            }
            Reply::SpineLinkListing { len } => {
                let mut w = W::new(ReplyKind::SpineLinkListing as u16, req_id);
                w.u32(*len);
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
            ReplyKind::SpineLoaded => {
                let id = r.u32()?;
                let n = r.u8()? as usize;
                if n > MAX_HANDLERS {
                    return Err(ControlError::BadField("handlers"));
                }
                let handlers = (0..n).map(|_| r.u16()).collect::<Result<_, _>>()?;
                Reply::SpineLoaded { id, handlers }
            }
            ReplyKind::SpineListing => Reply::SpineListing { len: r.u32()? },
            ReplyKind::PeerJoined => Reply::PeerJoined { index: r.u32()? },
            ReplyKind::PeerListing => Reply::PeerListing { len: r.u32()? },
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
            ReplyKind::TraceState => Reply::TraceState {
                on: r.bool()?,
                capacity: r.u32()?,
                recorded: r.u64()?,
                overwritten: r.u64()?,
            },
            ReplyKind::TraceDump => Reply::TraceDump {
                events: r.u32()?,
                len: r.u64()?,
            },
            ReplyKind::SpineLink => Reply::SpineLink {
                link: r.u32()?,
                token: r.u64()?,
            },
            ReplyKind::SpineLinkListing => Reply::SpineLinkListing { len: r.u32()? },
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
                "spine_load",
                Request::SpineLoad {
                    len: 2048,
                    budget_us: 10,
                    arg: -7,
                    name: "echo é".into(),
                    domains: vec!["spine".into(), "router".into()],
                },
            ),
            ("spine_unload", Request::SpineUnload { id: 3 }),
            ("spine_list", Request::SpineList),
            ("peer_join", Request::PeerJoin { side: 1 }),
            ("peer_doorbell", Request::PeerDoorbell { index: 17 }),
            ("peer_leave", Request::PeerLeave { index: 17 }),
            ("peer_list", Request::PeerList),
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
            (
                "trace_set",
                Request::TraceSet {
                    on: true,
                    capacity: 1 << 16,
                },
            ),
            ("trace_dump", Request::TraceDump),
            (
                "spine_link_listen",
                Request::SpineLinkListen {
                    token: 0x0123_4567_89ab_cdef,
                },
            ),
            (
                "spine_link_connect",
                Request::SpineLinkConnect {
                    peer: "127.0.0.1:7700".parse().unwrap(),
                    token: 0x0123_4567_89ab_cdef,
                },
            ),
            ("spine_link_close", Request::SpineLinkClose { link: 0x102 }),
            ("spine_links", Request::SpineLinks),
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
                "reply_spine_loaded",
                Reply::SpineLoaded {
                    id: 3,
                    handlers: vec![64, 70, 1023],
                },
            ),
            ("reply_spine_listing", Reply::SpineListing { len: 4096 }),
            ("reply_peer_joined", Reply::PeerJoined { index: 17 }),
            ("reply_peer_listing", Reply::PeerListing { len: 512 }),
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
            (
                "reply_trace_state",
                Reply::TraceState {
                    on: true,
                    capacity: 1 << 16,
                    recorded: 70_000,
                    overwritten: 4_464,
                },
            ),
            (
                "reply_trace_dump",
                Reply::TraceDump {
                    events: 3,
                    len: 4096,
                },
            ),
            (
                "reply_spine_link",
                Reply::SpineLink {
                    link: 0x102,
                    token: 0x0123_4567_89ab_cdef,
                },
            ),
            (
                "reply_spine_link_listing",
                Reply::SpineLinkListing { len: 512 },
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
            Request::TraceSet {
                on: false,
                capacity: 0,
            },
            Request::TraceDump,
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
            Reply::TraceState {
                on: false,
                capacity: 1 << 20,
                recorded: u64::MAX,
                overwritten: 1,
            },
            Reply::TraceDump {
                events: 65_536,
                len: 2 << 20,
            },
        ];
        for r in reps {
            let b = r.encode(9);
            assert_eq!(Reply::decode(&b), Ok((9, r.clone())));
        }
    }

    #[test]
    fn every_error_code_round_trips() {
        for v in 1..=30u16 {
            let c = ErrorCode::from_u16(v).unwrap_or_else(|| panic!("code {v}"));
            assert_eq!(c as u16, v);
            let r = Reply::Error(c);
            assert_eq!(Reply::decode(&r.encode(3)), Ok((3, r)));
            assert!(!c.to_string().is_empty());
        }
        assert_eq!(ErrorCode::from_u16(0), None);
        assert_eq!(ErrorCode::from_u16(31), None);
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
