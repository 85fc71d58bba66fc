//! SPINE's links' set-up half: the control requests that make, close
//! and list links (kinds 52..=55), the caps, and closing a client's links
//! when it goes.

use unet_control::spine_wire::{LinkInfo, LinkListing};
use unet_control::{ErrorCode, Reply, Request};
use unet_sys as sys;

use super::{token, AdapterDrop, LinkDrop, LinkState, LINKS_PER_PROCESS};
use crate::clients::{ClientId, Clients};
use crate::spine::SpinePart;
use crate::wire::frame::spine as frame;
use crate::wire::port::WirePort;

/// Do what a link request asks and answer it.
pub(crate) fn handle(
    sp: &mut SpinePart,
    port: Option<&mut WirePort>,
    clients: &dyn Clients,
    ci: ClientId,
    req_id: u32,
    req: Request,
) {
    let r = match (req, port) {
        (Request::SpineLinks, _) => {
            let (r, fd) = list(sp, clients, ci);
            let fds: Vec<_> = fd.iter().map(std::os::fd::AsRawFd::as_raw_fd).collect();
            return clients.reply(ci, req_id, r, &fds);
        }
        (_, None) => Reply::Error(ErrorCode::NoWire),
        (Request::SpineLinkListen { token: t }, Some(_)) => {
            match make(sp, clients, ci, LinkState::Listening) {
                Ok(id) => {
                    let t = if t == 0 { token() } else { t };
                    let taken = sp.wire.iter().any(|l| {
                        l.id != id && l.state == LinkState::Listening && l.listen_token == t
                    });
                    if taken {
                        sp.wire.remove(id, None);
                        Reply::Error(ErrorCode::TagInUse)
                    } else {
                        if let Some(l) = sp.wire.get_mut(id) {
                            l.listen_token = t;
                        }
                        Reply::SpineLink { link: id, token: t }
                    }
                }
                Err(c) => Reply::Error(c),
            }
        }
        (Request::SpineLinkConnect { peer, token: t }, Some(port)) => {
            match make(sp, clients, ci, LinkState::Connecting) {
                Ok(id) if port.peer_add(peer) => {
                    let l = sp.wire.get_mut(id).expect("just made");
                    l.peer = Some(peer);
                    l.peer_held = true;
                    let (engine, mine) = (port.st.engine_id, l.my_token);
                    port.send_spine(peer, true, |b| frame::emit_open(b, engine, id, t, mine));
                    Reply::SpineLink { link: id, token: 0 }
                }
                Ok(id) => {
                    sp.wire.remove(id, None);
                    Reply::Error(ErrorCode::NoResources)
                }
                Err(c) => Reply::Error(c),
            }
        }
        (Request::SpineLinkClose { link }, Some(port)) => {
            let mine = sp.wire.get(link).is_some_and(|l| {
                let (a, b) = (clients.uid(l.owner), clients.uid(ci));
                b == Some(0) || (a.is_some() && a == b)
            });
            if mine {
                sp.wire.remove(link, Some(port));
                Reply::Ok
            } else {
                Reply::Error(ErrorCode::NoSuchLink)
            }
        }
        _ => Reply::Error(ErrorCode::BadRequest),
    };
    sp.wire.sync(&mut sp.rt);
    clients.reply(ci, req_id, r, &[]);
}

/// A new link for client `ci`, within the caps.
fn make(
    sp: &mut SpinePart,
    clients: &dyn Clients,
    ci: ClientId,
    state: LinkState,
) -> Result<u32, ErrorCode> {
    let proc = clients.proc_key(ci);
    let held = sp
        .wire
        .iter()
        .filter(|l| l.proc.is_some() && l.proc == proc)
        .count();
    if held >= LINKS_PER_PROCESS {
        return Err(ErrorCode::ObjectQuota);
    }
    sp.wire.add(state, ci, proc).ok_or(ErrorCode::NoResources)
}

/// Client `ci` is gone: its links close (their peers are told).
pub(crate) fn drop_client(sp: &mut SpinePart, mut port: Option<&mut WirePort>, ci: ClientId) {
    let ids: Vec<u32> = sp
        .wire
        .iter()
        .filter(|l| l.owner == ci)
        .map(|l| l.id)
        .collect();
    if ids.is_empty() {
        return;
    }
    for id in ids {
        sp.wire.remove(id, port.as_deref_mut());
    }
    sp.wire.sync(&mut sp.rt);
}

/// The listing for client `ci` (its user's links; every one for root).
fn list(sp: &SpinePart, c: &dyn Clients, ci: ClientId) -> (Reply, Option<std::os::fd::OwnedFd>) {
    let uid = c.uid(ci);
    let links = sp
        .wire
        .iter()
        .filter(|l| uid == Some(0) || c.uid(l.owner) == uid)
        .map(|l| LinkInfo {
            id: l.id,
            state: l.state.name().into(),
            peer: l.peer.map(|p| p.to_string()).unwrap_or_default(),
            peer_link: l.peer_link,
            pid: c.pid(l.owner).unwrap_or(0),
            msgs_in: l.msgs_in,
            msgs_out: l.msgs_out,
            port_out: l.port_out,
            bytes_in: l.bytes_in,
            bytes_out: l.bytes_out,
            drops: LinkDrop::ALL
                .iter()
                .map(|r| (r.name().to_string(), l.drops[*r as usize]))
                .collect(),
        })
        .collect();
    let listing = LinkListing {
        links,
        drops: AdapterDrop::ALL
            .iter()
            .map(|r| (r.name().to_string(), sp.wire.drops[*r as usize]))
            .collect(),
    };
    let bytes = listing.encode();
    match memory_file(&bytes) {
        Ok(fd) => (
            Reply::SpineLinkListing {
                len: bytes.len() as u32,
            },
            Some(fd),
        ),
        Err(_) => (Reply::Error(ErrorCode::NoResources), None),
    }
}

/// A sealed memory file holding `bytes` (the listing's carrier).
fn memory_file(bytes: &[u8]) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::io::Write;
    let fd = sys::Segment::create_file("unet-spine-links", bytes.len().max(1))?;
    let mut f = std::fs::File::from(fd);
    f.write_all(bytes)?;
    Ok(std::os::fd::OwnedFd::from(f))
}
