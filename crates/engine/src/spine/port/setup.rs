//! SPINE's ports' set-up half: the control requests that open, close and
//! list raw-frame ports (kinds 56..=58), the caps, and closing a client's
//! ports when it goes.
//!
//! A port reads every frame of an interface, so only the engine's user
//! (or root) may open one, and only for a handler of an extension of its
//! own user.

use std::os::fd::AsRawFd;

use unet_control::spine_port::{PortInfo, PortListing};
use unet_control::{ErrorCode, Reply, Request};
use unet_sys::packet::{PacketPort, RingConfig, TxPath};

use crate::config::PortTx;

use super::{PortDrop, PORTS_PER_PROCESS};
use crate::clients::{ClientId, Clients};
use crate::poller::{Poller, Token};
use crate::spine::SpinePart;

/// Do what a port request asks and answer it.
pub(crate) fn handle(
    sp: &mut SpinePart,
    poller: &Poller,
    clients: &dyn Clients,
    ci: ClientId,
    req_id: u32,
    req: Request,
) {
    let r = match req {
        Request::SpinePorts => {
            let (r, fd) = list(sp, clients, ci);
            let fds: Vec<_> = fd.iter().map(|f| f.as_raw_fd()).collect();
            return clients.reply(ci, req_id, r, &fds);
        }
        Request::SpinePortOpen { interface, handler } => {
            match open(sp, poller, clients, ci, interface, handler) {
                Ok(port) => Reply::SpinePort { port },
                Err(c) => Reply::Error(c),
            }
        }
        Request::SpinePortClose { port } => {
            let mine = sp.ports.get(port).is_some_and(|p| {
                let (a, b) = (clients.uid(p.owner), clients.uid(ci));
                b == Some(0) || (a.is_some() && a == b)
            });
            if mine && sp.ports.remove(port, poller) {
                Reply::Ok
            } else {
                Reply::Error(ErrorCode::NoSuchPort)
            }
        }
        _ => Reply::Error(ErrorCode::BadRequest),
    };
    sp.ports.sync(&mut sp.rt);
    clients.reply(ci, req_id, r, &[]);
}

/// Open a port on `interface` for client `ci`, its frames for `handler`:
/// within the caps, watched by the poller.
fn open(
    sp: &mut SpinePart,
    poller: &Poller,
    clients: &dyn Clients,
    ci: ClientId,
    interface: String,
    handler: u16,
) -> Result<u32, ErrorCode> {
    let uid = clients.uid(ci);
    if uid != Some(0) && uid != Some(unet_sys::effective_uid()) {
        return Err(ErrorCode::NotOwner);
    }
    // The handler must be installed, by an extension of the client's user.
    let owner = sp
        .rt
        .handlers
        .get(usize::from(handler))
        .copied()
        .flatten()
        .and_then(|e| sp.exts.get(e.slot as usize))
        .and_then(|x| x.as_ref())
        .map(|x| x.owner);
    let theirs = owner.is_some_and(|o| uid == Some(0) || clients.uid(o) == uid);
    if !theirs {
        return Err(ErrorCode::NoSuchExtension);
    }
    let proc = clients.proc_key(ci);
    let held = sp
        .ports
        .iter()
        .filter(|p| p.proc.is_some() && p.proc == proc)
        .count();
    if held >= PORTS_PER_PROCESS {
        return Err(ErrorCode::ObjectQuota);
    }
    if sp.ports.iter().count() >= super::PORTS_MAX {
        return Err(ErrorCode::NoResources);
    }
    let raw = open_raw(&interface, sp.ports.tx, sp.ports.rx_frames).map_err(|e| {
        match e.raw_os_error() {
            Some(libc::ENODEV) | Some(libc::EINVAL) | Some(libc::ENXIO) => {
                ErrorCode::NoSuchInterface
            }
            Some(libc::EPERM) | Some(libc::EACCES) => ErrorCode::NotOwner,
            _ => ErrorCode::NoResources,
        }
    })?;
    poller
        .add(raw.fd(), Token::Ports)
        .map_err(|_| ErrorCode::NoResources)?;
    let fd = raw.fd();
    match sp.ports.add(raw, interface, handler, ci, proc) {
        Some(id) => Ok(id),
        None => {
            poller.remove(fd);
            Err(ErrorCode::NoResources)
        }
    }
}

/// The port on `interface`, sending as `tx` asks: with
/// [`PortTx::Auto`], over `AF_XDP` where the kernel gives a socket, else
/// over the transmit ring; `rx_frames` slots of receive ring.
fn open_raw(interface: &str, tx: PortTx, rx_frames: u32) -> std::io::Result<PacketPort> {
    let cfg = |tx| RingConfig {
        tx,
        rx_frames,
        ..RingConfig::default()
    };
    match tx {
        PortTx::Ring => PacketPort::open(interface, cfg(TxPath::Ring)),
        PortTx::Xdp => PacketPort::open(interface, cfg(TxPath::Xdp)),
        PortTx::Auto => PacketPort::open(interface, cfg(TxPath::Xdp))
            .or_else(|_| PacketPort::open(interface, cfg(TxPath::Ring))),
    }
}

/// Client `ci` is gone: its ports close.
pub(crate) fn drop_client(sp: &mut SpinePart, poller: &Poller, ci: ClientId) {
    let ids: Vec<u32> = sp
        .ports
        .iter()
        .filter(|p| p.owner == ci)
        .map(|p| p.id)
        .collect();
    if ids.is_empty() {
        return;
    }
    for id in ids {
        sp.ports.remove(id, poller);
    }
    sp.ports.sync(&mut sp.rt);
}

/// The listing for client `ci` (its user's ports; every one for root).
fn list(
    sp: &mut SpinePart,
    c: &dyn Clients,
    ci: ClientId,
) -> (Reply, Option<std::os::fd::OwnedFd>) {
    let uid = c.uid(ci);
    let ports = sp
        .ports
        .iter_mut()
        .filter(|p| uid == Some(0) || c.uid(p.owner) == uid)
        .map(|p| {
            let drops = p.drops();
            let tx = p.raw.counters();
            PortInfo {
                id: p.id,
                interface: p.interface.clone(),
                tx: match p.raw.tx_path() {
                    TxPath::Xdp => "af_xdp",
                    TxPath::Ring => "tx_ring",
                }
                .to_string(),
                handler: p.handler,
                pid: c.pid(p.owner).unwrap_or(0),
                frames_in: p.frames_in,
                frames_out: tx.tx_frames,
                bytes_in: p.bytes_in,
                bytes_out: tx.tx_bytes,
                drops: PortDrop::ALL
                    .iter()
                    .map(|r| (r.name().to_string(), drops[*r as usize]))
                    .collect(),
            }
        })
        .collect();
    let bytes = PortListing { ports }.encode();
    match crate::spine::setup::memory_file(&bytes) {
        Ok(fd) => (
            Reply::SpinePortListing {
                len: bytes.len() as u32,
            },
            Some(fd),
        ),
        Err(_) => (Reply::Error(ErrorCode::NoResources), None),
    }
}
