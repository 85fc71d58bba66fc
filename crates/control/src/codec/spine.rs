//! SPINE's kinds of control packet: loading, unloading and listing
//! extensions, their route tables and framebuffers, the peer queues, the links over
//! the wire, the raw-frame ports and the event trace, each request and
//! reply's body. [`super`] dispatches by kind
//! and writes and reads the header.

use super::*;

/// Most handler numbers a [`Reply::SpineLoaded`] carries (an extension's
/// most handlers).
const MAX_HANDLERS: usize = 64;

/// `req`, one of SPINE's requests, encoded with `req_id`.
pub(super) fn encode_request(req: &Request, req_id: u32) -> W {
    match req {
        Request::SpineLoad {
            len,
            budget_us,
            arg,
            name,
            domains,
        } => {
            let mut w = packet(ReqKind::SpineLoad as u16, req_id);
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
            let mut w = packet(ReqKind::SpineUnload as u16, req_id);
            w.u32(*id);
            w
        }
        Request::SpineList => packet(ReqKind::SpineList as u16, req_id),
        Request::PeerJoin { side } => {
            let mut w = packet(ReqKind::PeerJoin as u16, req_id);
            w.u8(*side);
            w
        }
        Request::PeerDoorbell { index } => {
            let mut w = packet(ReqKind::PeerDoorbell as u16, req_id);
            w.u32(*index);
            w
        }
        Request::PeerLeave { index } => {
            let mut w = packet(ReqKind::PeerLeave as u16, req_id);
            w.u32(*index);
            w
        }
        Request::PeerList => packet(ReqKind::PeerList as u16, req_id),
        Request::TraceSet { on, capacity } => {
            let mut w = packet(ReqKind::TraceSet as u16, req_id);
            w.u8(*on as u8);
            w.u32(*capacity);
            w
        }
        Request::TraceDump => packet(ReqKind::TraceDump as u16, req_id),
        Request::SpineLinkListen { token } => {
            let mut w = packet(ReqKind::SpineLinkListen as u16, req_id);
            w.u64(*token);
            w
        }
        Request::SpineLinkConnect { peer, token } => {
            let mut w = packet(ReqKind::SpineLinkConnect as u16, req_id);
            w.addr(Some(*peer));
            w.u64(*token);
            w
        }
        Request::SpineLinkClose { link } => {
            let mut w = packet(ReqKind::SpineLinkClose as u16, req_id);
            w.u32(*link);
            w
        }
        Request::SpineLinks => packet(ReqKind::SpineLinks as u16, req_id),
        Request::SpineTable { ext, table, len } => {
            let mut w = packet(ReqKind::SpineTable as u16, req_id);
            w.u32(*ext);
            w.u32(*table);
            w.u32(*len);
            w
        }
        Request::SpineFramebuffer { ext, width, height } => {
            let mut w = packet(ReqKind::SpineFramebuffer as u16, req_id);
            w.u32(*ext);
            w.u32(*width);
            w.u32(*height);
            w
        }
        Request::SpineFramebufferView { ext, index } => {
            let mut w = packet(ReqKind::SpineFramebufferView as u16, req_id);
            w.u32(*ext);
            w.u32(*index);
            w
        }
        Request::SpinePortOpen { interface, handler } => {
            let mut w = packet(ReqKind::SpinePortOpen as u16, req_id);
            w.name(interface);
            w.u16(*handler);
            w
        }
        Request::SpinePortClose { port } => {
            let mut w = packet(ReqKind::SpinePortClose as u16, req_id);
            w.u32(*port);
            w
        }
        Request::SpinePorts => packet(ReqKind::SpinePorts as u16, req_id),
        // Not SPINE's (the dispatch sends none here): a packet of kind 0,
        // which no side decodes.
        _ => packet(0, req_id),
    }
}

/// The body of a SPINE request of kind `kind`, read from `r`.
pub(super) fn decode_request(kind: ReqKind, r: &mut R<'_>) -> Result<Request, ControlError> {
    Ok(match kind {
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
        ReqKind::SpineTable => Request::SpineTable {
            ext: r.u32()?,
            table: r.u32()?,
            len: r.u32()?,
        },
        ReqKind::SpineFramebuffer => Request::SpineFramebuffer {
            ext: r.u32()?,
            width: r.u32()?,
            height: r.u32()?,
        },
        ReqKind::SpineFramebufferView => Request::SpineFramebufferView {
            ext: r.u32()?,
            index: r.u32()?,
        },
        ReqKind::SpinePortOpen => Request::SpinePortOpen {
            interface: r.name()?,
            handler: r.u16()?,
        },
        ReqKind::SpinePortClose => Request::SpinePortClose { port: r.u32()? },
        ReqKind::SpinePorts => Request::SpinePorts,
        _ => return Err(ControlError::UnknownKind(kind as u16)),
    })
}

/// `rep`, one of SPINE's replies, encoded with `req_id`.
pub(super) fn encode_reply(rep: &Reply, req_id: u32) -> W {
    match rep {
        Reply::SpineLoaded { id, handlers } => {
            let mut w = packet(ReplyKind::SpineLoaded as u16, req_id);
            w.u32(*id);
            let n = handlers.len().min(MAX_HANDLERS);
            w.u8(n as u8);
            for h in &handlers[..n] {
                w.u16(*h);
            }
            w
        }
        Reply::SpineListing { len } => {
            let mut w = packet(ReplyKind::SpineListing as u16, req_id);
            w.u32(*len);
            w
        }
        Reply::PeerJoined { index } => {
            let mut w = packet(ReplyKind::PeerJoined as u16, req_id);
            w.u32(*index);
            w
        }
        Reply::PeerListing { len } => {
            let mut w = packet(ReplyKind::PeerListing as u16, req_id);
            w.u32(*len);
            w
        }
        Reply::TraceState {
            on,
            capacity,
            recorded,
            overwritten,
        } => {
            let mut w = packet(ReplyKind::TraceState as u16, req_id);
            w.u8(*on as u8);
            w.u32(*capacity);
            w.u64(*recorded);
            w.u64(*overwritten);
            w
        }
        Reply::TraceDump { events, len } => {
            let mut w = packet(ReplyKind::TraceDump as u16, req_id);
            w.u32(*events);
            w.u64(*len);
            w
        }
        Reply::SpineLink { link, token } => {
            let mut w = packet(ReplyKind::SpineLink as u16, req_id);
            w.u32(*link);
            w.u64(*token);
            w
        }
        Reply::SpineLinkListing { len } => {
            let mut w = packet(ReplyKind::SpineLinkListing as u16, req_id);
            w.u32(*len);
            w
        }
        Reply::SpineTableLoaded { version, bytes } => {
            let mut w = packet(ReplyKind::SpineTableLoaded as u16, req_id);
            w.u32(*version);
            w.u64(*bytes);
            w
        }
        Reply::SpineFramebuffer { index, len } => {
            let mut w = packet(ReplyKind::SpineFramebuffer as u16, req_id);
            w.u32(*index);
            w.u64(*len);
            w
        }
        Reply::SpineFramebufferView { width, height, len } => {
            let mut w = packet(ReplyKind::SpineFramebufferView as u16, req_id);
            w.u32(*width);
            w.u32(*height);
            w.u64(*len);
            w
        }
        Reply::SpinePort { port } => {
            let mut w = packet(ReplyKind::SpinePort as u16, req_id);
            w.u32(*port);
            w
        }
        Reply::SpinePortListing { len } => {
            let mut w = packet(ReplyKind::SpinePortListing as u16, req_id);
            w.u32(*len);
            w
        }
        // Not SPINE's (the dispatch sends none here): a packet of kind 0,
        // which no side decodes.
        _ => packet(0, req_id),
    }
}

/// The body of a SPINE reply of kind `kind`, read from `r`.
pub(super) fn decode_reply(kind: ReplyKind, r: &mut R<'_>) -> Result<Reply, ControlError> {
    Ok(match kind {
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
        ReplyKind::SpineTableLoaded => Reply::SpineTableLoaded {
            version: r.u32()?,
            bytes: r.u64()?,
        },
        ReplyKind::SpineFramebuffer => Reply::SpineFramebuffer {
            index: r.u32()?,
            len: r.u64()?,
        },
        ReplyKind::SpineFramebufferView => Reply::SpineFramebufferView {
            width: r.u32()?,
            height: r.u32()?,
            len: r.u64()?,
        },
        ReplyKind::SpinePort => Reply::SpinePort { port: r.u32()? },
        ReplyKind::SpinePortListing => Reply::SpinePortListing { len: r.u32()? },
        _ => return Err(ControlError::UnknownKind(kind as u16)),
    })
}
