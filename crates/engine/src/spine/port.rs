//! SPINE's raw-frame ports: an adapter's `AF_PACKET` port on a Linux
//! network interface (`unet_sys::packet`), whose frames go to an
//! extension handler and which handlers send frames out of
//! (`DEST_PORT | port`).
//!
//! # Ports
//!
//! A client (the engine's user, or root) opens a port on an interface by
//! name, naming the extension handler (one of its user's) that receives
//! the port's frames; the port's id is `DEST_PORT`'s id for the handlers
//! of the adapter. Caps: [`PORTS_MAX`] per adapter, [`PORTS_PER_PROCESS`]
//! per process; a client's ports close when it goes. The control requests
//! that open, close and list ports are in `port/setup.rs`.
//!
//! # Frames in
//!
//! Each turn takes at most [`RX_BATCH`] frames from each port's receive
//! ring (what waits, up to that), and each becomes a `WireRx` event: a
//! bulk message for the port's handler, its bulk buffer holding the
//! frame, `src_kind = AM_SRC_PORT` and `src = port`, so that the handler
//! knows the ingress port and `reply` sends out of it. A frame longer than
//! a bulk buffer, or one a full pool or queue refuses, is dropped and
//! counted on the port by reason ([`PortDrop`]), as are the ring's own
//! drops (a frame longer than a slot, the kernel's drops when the ring
//! was full).
//!
//! # Frames out
//!
//! A handler's send to `DEST_PORT | port` is a `WireTx` event whose
//! argument carries [`ARG_PORT`]: the message's arguments followed by its
//! bulk data are one frame, placed on the port's transmit ring at the end
//! of the turn; each port with frames placed is flushed once (one system
//! call a turn, not a frame). A full ring, or a frame too short or too
//! long for the interface, is dropped and counted.
//!
//! The port's descriptor is watched by the engine's poller, so that an
//! idle engine sleeps and wakes on a frame.

use unet_abi::spine::{AmHeader, AM_BULK, AM_SRC_PORT, AM_SRC_SYSTEM, SYS_PORT_OUT};
use unet_sys::packet::PacketPort;

use crate::clients::{ClientId, ProcKey};
use crate::poller::Poller;
use crate::spine::events::{DropReason, Event, EventKind, EventQueue};
use crate::spine::msgs::{BufPool, MsgPool};
use crate::spine::rt::Rt;
use crate::spine::SpinePart;

/// Ports one adapter holds at most.
pub(crate) const PORTS_MAX: usize = 8;
/// Ports one process may hold at most.
pub(crate) const PORTS_PER_PROCESS: usize = 4;
/// Most frames a turn takes from one port.
pub(crate) const RX_BATCH: usize = 256;
/// An `Event::arg` bit of `WireRx` and `WireTx`: the event is a port's
/// (the rest of the word is the port's id), not a link's.
pub(crate) const ARG_PORT: u32 = 1 << 30;

/// Why a port dropped a frame, counted on the port.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortDrop {
    /// The frame is longer than a bulk buffer.
    TooLong,
    /// No bulk buffer was free.
    NoBuffer,
    /// No message slot was free.
    NoSlot,
    /// The event queue was full.
    QueueFull,
    /// The port's handler is not installed (its extension went).
    NoHandler,
    /// The frame was longer than a ring slot (cut by the kernel).
    Truncated,
    /// A ring slot's header placed its frame outside the slot.
    BadSlot,
    /// The kernel dropped it: the receive ring was full.
    Kernel,
    /// The transmit ring was full.
    TxFull,
    /// A frame sent was shorter than an Ethernet header or longer than
    /// a slot.
    TxBadLen,
    /// The kernel refused to send it.
    TxRefused,
}

impl PortDrop {
    /// Every reason, in number order.
    pub(crate) const ALL: [PortDrop; 11] = [
        PortDrop::TooLong,
        PortDrop::NoBuffer,
        PortDrop::NoSlot,
        PortDrop::QueueFull,
        PortDrop::NoHandler,
        PortDrop::Truncated,
        PortDrop::BadSlot,
        PortDrop::Kernel,
        PortDrop::TxFull,
        PortDrop::TxBadLen,
        PortDrop::TxRefused,
    ];

    /// The name the listing shows.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            PortDrop::TooLong => "too_long",
            PortDrop::NoBuffer => "no_buffer",
            PortDrop::NoSlot => "no_slot",
            PortDrop::QueueFull => "queue_full",
            PortDrop::NoHandler => "no_handler",
            PortDrop::Truncated => "truncated",
            PortDrop::BadSlot => "bad_slot",
            PortDrop::Kernel => "kernel",
            PortDrop::TxFull => "tx_full",
            PortDrop::TxBadLen => "tx_bad_len",
            PortDrop::TxRefused => "tx_refused",
        }
    }
}

/// Drops the runtime counts ([`PortDrop::TooLong`] to
/// [`PortDrop::NoHandler`]); the ring counts the others.
const OWN_DROPS: usize = 5;

/// One port.
pub(crate) struct Port {
    pub id: u32,
    pub owner: ClientId,
    pub proc: Option<ProcKey>,
    pub interface: String,
    /// The handler its frames go to.
    pub handler: u16,
    pub raw: PacketPort,
    /// Frames handed to the handler, and their bytes.
    pub frames_in: u64,
    pub bytes_in: u64,
    drops: [u64; OWN_DROPS],
}

impl Port {
    /// Its drops by reason (the ring's read now).
    pub(crate) fn drops(&mut self) -> [u64; PortDrop::ALL.len()] {
        let c = self.raw.counters();
        let mut d = [0; PortDrop::ALL.len()];
        d[..OWN_DROPS].copy_from_slice(&self.drops);
        d[PortDrop::Truncated as usize] = c.truncated;
        d[PortDrop::BadSlot as usize] = c.bad_slot;
        d[PortDrop::Kernel as usize] = c.kernel_drops;
        d[PortDrop::TxFull as usize] = c.tx_full;
        d[PortDrop::TxBadLen as usize] = c.tx_bad_len;
        d[PortDrop::TxRefused as usize] = c.tx_refused;
        d
    }
}

/// The adapter's ports (see the module documentation).
#[derive(Default)]
pub(crate) struct Ports {
    slots: Vec<Option<Port>>,
    gens: Vec<u16>,
    live: usize,
    /// Messages handlers sent to ports, to place at the end of the turn.
    pub out: Vec<(u32, u32)>,
    /// Frames were placed on a ring during the turn ([`port_out`]'s
    /// `now`), to flush at its end.
    placed: bool,
    /// A frame of arguments and bulk data laid out whole.
    scratch: Vec<u8>,
    /// How new ports send.
    pub tx: crate::config::PortTx,
    /// Slots of a new port's receive ring.
    pub rx_frames: u32,
}

impl Ports {
    /// No port yet; new ones send as `tx` says, with `rx_frames` slots
    /// of receive ring.
    pub(crate) fn new(tx: crate::config::PortTx, rx_frames: u32) -> Ports {
        Ports {
            tx,
            rx_frames,
            ..Ports::default()
        }
    }

    /// Whether a port has a frame waiting (none open: one test).
    #[inline]
    pub(crate) fn ready(&self) -> bool {
        self.live > 0 && self.iter().any(|p| p.raw.rx_ready())
    }

    /// Whether there is anything to send.
    #[inline]
    pub(crate) fn has_out(&self) -> bool {
        !self.out.is_empty() || self.placed
    }

    fn index(id: u32) -> usize {
        (id & 0xFF) as usize
    }

    /// Port `id`, if it is open.
    pub(crate) fn get(&self, id: u32) -> Option<&Port> {
        self.slots
            .get(Self::index(id))
            .and_then(|s| s.as_ref())
            .filter(|p| p.id == id)
    }

    fn get_mut(&mut self, id: u32) -> Option<&mut Port> {
        self.slots
            .get_mut(Self::index(id))
            .and_then(|s| s.as_mut())
            .filter(|p| p.id == id)
    }

    /// Every open port.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Port> {
        self.slots.iter().flatten()
    }

    /// Every open port, mutably.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Port> {
        self.slots.iter_mut().flatten()
    }

    /// Tell the runtime which ports handlers may send to.
    pub(crate) fn sync(&self, rt: &mut Rt) {
        rt.ports.clear();
        rt.ports.extend(self.iter().map(|p| p.id));
    }

    /// Enter `raw` as a new port (None: the adapter holds its most).
    pub(crate) fn add(
        &mut self,
        raw: PacketPort,
        interface: String,
        handler: u16,
        owner: ClientId,
        proc: Option<ProcKey>,
    ) -> Option<u32> {
        let i = match self.slots.iter().position(|s| s.is_none()) {
            Some(i) => i,
            None if self.slots.len() < PORTS_MAX => {
                self.slots.push(None);
                self.gens.push(0);
                self.slots.len() - 1
            }
            None => return None,
        };
        let id = i as u32 | u32::from(self.gens[i]) << 8;
        self.slots[i] = Some(Port {
            id,
            owner,
            proc,
            interface,
            handler,
            raw,
            frames_in: 0,
            bytes_in: 0,
            drops: [0; OWN_DROPS],
        });
        self.live += 1;
        Some(id)
    }

    /// Close port `id`: the poller stops watching it.
    pub(crate) fn remove(&mut self, id: u32, poller: &Poller) -> bool {
        let i = Self::index(id);
        if self.get(id).is_none() {
            return false;
        }
        let Some(p) = self.slots.get_mut(i).and_then(|s| s.take()) else {
            return false;
        };
        poller.remove(p.raw.fd());
        self.gens[i] = self.gens[i].wrapping_add(1);
        self.live -= 1;
        true
    }
}

// ---------------------------------------------------------------------
// The data path.

/// Take what the ports received (at most [`RX_BATCH`] frames each): each
/// frame a `WireRx` event for its port's handler. Returns the frames taken.
pub(crate) fn take_in(sp: &mut SpinePart) -> usize {
    let rt = &mut sp.rt;
    let mut n = 0;
    for p in sp.ports.slots.iter_mut().flatten() {
        let installed = rt
            .handlers
            .get(usize::from(p.handler))
            .is_some_and(|h| h.is_some());
        let Port {
            id,
            handler,
            raw,
            frames_in,
            bytes_in,
            drops,
            ..
        } = p;
        n += raw.recv(RX_BATCH, |frame| {
            let r = if installed {
                deliver(rt, *id, *handler, frame)
            } else {
                Err(PortDrop::NoHandler)
            };
            match r {
                Ok(()) => {
                    *frames_in += 1;
                    *bytes_in += frame.len() as u64;
                }
                Err(why) => drops[why as usize] += 1,
            }
        });
    }
    n
}

/// Frame `frame` from port `id` as a bulk message for `handler`, queued.
#[inline]
fn deliver(rt: &mut Rt, id: u32, handler: u16, frame: &[u8]) -> Result<(), PortDrop> {
    if frame.len() > rt.bufs.max_len() {
        rt.queue.count_drop(DropReason::NoBuffer);
        return Err(PortDrop::TooLong);
    }
    let hdr = AmHeader {
        handler,
        src_kind: AM_SRC_PORT,
        src: id,
        ..AmHeader::default()
    };
    let parts = RtParts {
        msgs: &mut rt.msgs,
        bufs: &mut rt.bufs,
        queue: &mut rt.queue,
        ports: &rt.ports,
    };
    queue_frame(parts, hdr, frame, EventKind::WireRx, id).map_err(|why| match why {
        Queued::NoBuffer => PortDrop::NoBuffer,
        Queued::NoSlot => PortDrop::NoSlot,
        Queued::QueueFull => PortDrop::QueueFull,
    })
}

/// Why [`queue_frame`] queued nothing (the engine's drop counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queued {
    NoBuffer,
    NoSlot,
    QueueFull,
}

/// `frame` as the bulk data of a message with header `hdr` (its flags
/// and bulk length set here), queued as an event of `kind` for port `id`:
/// a frame in from the port, or one to send out of it.
#[inline]
fn queue_frame(
    rt: RtParts<'_>,
    hdr: AmHeader,
    frame: &[u8],
    kind: EventKind,
    id: u32,
) -> Result<(), Queued> {
    let RtParts {
        msgs, bufs, queue, ..
    } = rt;
    let Some(buf) = bufs.alloc(frame) else {
        queue.count_drop(DropReason::NoBuffer);
        return Err(Queued::NoBuffer);
    };
    let hdr = AmHeader {
        flags: AM_BULK,
        bulk_len: frame.len() as u32,
        ..hdr
    };
    let Some(msg) = msgs.alloc(hdr, &[], Some(buf)) else {
        bufs.release(buf);
        queue.count_drop(DropReason::NoSlot);
        return Err(Queued::NoSlot);
    };
    let ev = Event {
        kind,
        msg,
        arg: id | ARG_PORT,
    };
    if queue.push(ev).is_err() {
        msgs.free(msg, bufs);
        return Err(Queued::QueueFull);
    }
    Ok(())
}

/// Why a message for the runtime's [`SYS_PORT_OUT`] was not queued for
/// its port (counted by the caller, on the queue or link it came from).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortOutRefused {
    /// Its arguments named no open port of this adapter, or it carried no
    /// frame.
    BadPort,
    /// No bulk buffer was free.
    NoBuffer,
    /// No message slot was free.
    NoSlot,
    /// The event queue was full.
    QueueFull,
    /// The port's transmit ring refused it: no room, or a length it does
    /// not take (counted on the port by reason, `tx_full` or
    /// `tx_bad_len`, and by the runtime as `dest_full`).
    TxRefused,
}

/// A message from a peer adapter or a link for [`SYS_PORT_OUT`]: its
/// bulk data (`bulk`) goes out of the port whose id is the first four
/// bytes of `args`, as a handler's send to `DEST_PORT | port` would, and
/// no handler runs. Whoever may send to the adapter's handlers may send
/// out of its ports (a peer queue is the engines' owner's; a link's
/// messages reach any handler), so the only check is that the port is
/// open; the frame's length is the ring's to judge.
///
/// With `now` (the adapter's ports, when its event graph is not being
/// recorded), the frame goes on the port's transmit ring at once, to
/// leave with the turn's other frames: no bulk buffer, message slot or
/// event (a copy and about a tenth of the egress adapter's work a frame
/// in the router). Without, it is the handler's send's `WireTx` event,
/// placed at the end of the turn, so that the graph shows it.
/// (`rt` as its parts: the callers hold the rest of it.)
pub(crate) fn port_out(
    rt: RtParts<'_>,
    now: Option<&mut Ports>,
    args: &[u8],
    bulk: &[u8],
) -> Result<(), PortOutRefused> {
    let id = args
        .first_chunk::<4>()
        .map(|b| u32::from_le_bytes(*b))
        .filter(|id| !bulk.is_empty() && rt.ports.contains(id));
    let Some(id) = id else {
        rt.queue.count_drop(DropReason::BadDest);
        return Err(PortOutRefused::BadPort);
    };
    if let Some(ports) = now {
        let Some(p) = ports.get_mut(id) else {
            rt.queue.count_drop(DropReason::BadDest);
            return Err(PortOutRefused::BadPort);
        };
        // The ring counts a refusal by its reason.
        if !p.raw.send(bulk) {
            rt.queue.count_drop(DropReason::DestFull);
            return Err(PortOutRefused::TxRefused);
        }
        ports.placed = true;
        return Ok(());
    }
    let hdr = AmHeader {
        handler: SYS_PORT_OUT,
        src_kind: AM_SRC_SYSTEM,
        ..AmHeader::default()
    };
    queue_frame(rt, hdr, bulk, EventKind::WireTx, id).map_err(|why| match why {
        Queued::NoBuffer => PortOutRefused::NoBuffer,
        Queued::NoSlot => PortOutRefused::NoSlot,
        Queued::QueueFull => PortOutRefused::QueueFull,
    })
}

/// The parts of [`Rt`] that [`port_out`] and [`queue_frame`] use.
pub(crate) struct RtParts<'a> {
    pub msgs: &'a mut MsgPool,
    pub bufs: &'a mut BufPool,
    pub queue: &'a mut EventQueue,
    pub ports: &'a [u32],
}

/// Place the frames handlers sent to ports on their transmit rings, and
/// flush each port that got one (or a frame [`port_out`] placed).
pub(crate) fn send_out(sp: &mut SpinePart) {
    let ports = &mut sp.ports;
    let rt = &mut sp.rt;
    let out = std::mem::take(&mut ports.out);
    let mut scratch = std::mem::take(&mut ports.scratch);
    for &(id, msg) in &out {
        let Some(p) = ports.get_mut(id) else {
            rt.queue.count_drop(DropReason::BadDest);
            rt.msgs.free(msg, &mut rt.bufs);
            continue;
        };
        let placed = match rt.msgs.get(msg) {
            Some(m) => {
                let args = m.args();
                let bulk = m.bulk.and_then(|b| rt.bufs.data(b)).unwrap_or(&[]);
                let frame = if args.is_empty() {
                    bulk
                } else if bulk.is_empty() {
                    args
                } else {
                    scratch.clear();
                    scratch.extend_from_slice(args);
                    scratch.extend_from_slice(bulk);
                    &scratch[..]
                };
                // The ring counts a refusal by its reason.
                p.raw.send(frame)
            }
            None => false,
        };
        if !placed {
            rt.queue.count_drop(DropReason::DestFull);
        }
        rt.msgs.free(msg, &mut rt.bufs);
    }
    for p in ports.iter_mut() {
        if p.raw.tx_pending() > 0 {
            p.raw.flush();
        }
    }
    ports.out = out;
    ports.out.clear();
    ports.placed = false;
    ports.scratch = scratch;
}

mod setup;

pub(crate) use setup::{drop_client, handle};

#[cfg(test)]
mod tests;
