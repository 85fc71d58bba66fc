//! The systems' set-up halves as control builds them for a request:
//! [`Setup::unet`], [`Setup::via`] and [`Setup::udm`] lend each the parts
//! it changes, the clients, and what the parts outside it charge to a
//! process and its user (for the memory limits), with the set-up threads
//! behind U-Net's and UDM's `Work`; and the count across systems that
//! only control can make (a process's objects that cost descriptors).

use std::time::{Duration, Instant};

use unet_abi::udm::UdmLayout;
use unet_abi::Layout;
use unet_sys::Segment;

use super::Setup;
use crate::clients::{self, Charges, Tally};
use crate::control::setup_thread::SetupThread;
use crate::spine::framebuffer::{self, Framebuffers};
use crate::udm::setup::{self as udm_setup, UdmSetup};
use crate::udm::{Jobs, PendingJob};
use crate::unet::direct::DirectConns;
use crate::unet::endpoints::{ClientId, EndpointTable};
use crate::unet::remote::{RemoteChannels, RemoteSide};
use crate::unet::setup::{self as unet_setup, UnetSetup};
use crate::via::setup::{self as via_setup, ViaSetup};
use crate::via::vias::Vias;
use crate::wire::port::ConnIn;

/// Objects (endpoints, regions, VIs, UDM jobs and nodes) a process may
/// hold and still make more from the engine's reserve of descriptors.
const FEW_OBJECTS: u32 = 8;

/// The parts whose charges count against a process's and its user's
/// memory limits, but for those a system's set-up holds itself (None):
/// what control adds to that system's own charges.
struct Rest<'a> {
    eps: Option<&'a EndpointTable>,
    work: &'a SetupThread,
    conns: Option<&'a DirectConns>,
    vias: Option<&'a Vias>,
    udm: Option<&'a Jobs>,
    fbs: &'a Framebuffers,
}

impl Charges for Rest<'_> {
    /// The segments of the endpoints, of those being made, of the UDM
    /// jobs being made, of the direct connections, of VIA's regions and
    /// VIs, and the jobs by the process and user that made them, and the
    /// SPINE framebuffers by their extensions' owners, while they live.
    fn charge(&self, t: &mut Tally<'_>) {
        if let Some(eps) = self.eps {
            unet_setup::charge_endpoints(eps, t);
        }
        for p in self.work.pending() {
            t.add(p.client, p.layout.segment_size + p.buffer_limit, true);
        }
        for p in self.work.pending_jobs() {
            t.add(p.client, p.charge(), false);
        }
        for (owner, bytes) in self.conns.iter().flat_map(|c| c.charges()) {
            t.add(owner, bytes, false);
        }
        for (owner, bytes) in self.vias.iter().flat_map(|v| v.charges()) {
            t.add(owner, bytes, false);
        }
        for (payer, bytes) in self.udm.iter().flat_map(|u| u.charges()) {
            t.add_payer(payer.key, payer.uid, bytes);
        }
        for (owner, bytes) in self.fbs.charges() {
            t.add(owner, bytes, false);
        }
    }
}

/// The set-up threads as UDM's set-up sees them, with the charges of the
/// parts outside UDM.
struct UdmWork<'a> {
    work: &'a mut SetupThread,
    eps: &'a EndpointTable,
    conns: &'a DirectConns,
    vias: &'a Vias,
    fbs: &'a Framebuffers,
}

impl Charges for UdmWork<'_> {
    fn charge(&self, t: &mut Tally<'_>) {
        let rest = Rest {
            eps: Some(self.eps),
            work: self.work,
            conns: Some(self.conns),
            vias: Some(self.vias),
            udm: None,
            fbs: self.fbs,
        };
        rest.charge(t);
    }
}

impl udm_setup::Work for UdmWork<'_> {
    fn start_udm_job(
        &mut self,
        engine_id: u64,
        client: (ClientId, u32),
        id: u32,
        layout: UdmLayout,
        timeout: Duration,
    ) {
        self.work
            .start_udm_job(engine_id, client, id, layout, timeout);
    }

    fn start_udm_replica(
        &mut self,
        engine_id: u64,
        client: (ClientId, u32),
        id: u32,
        geometry: (UdmLayout, Duration),
        link: u32,
    ) {
        self.work
            .start_udm_replica(engine_id, client, id, geometry, link);
    }

    fn pending_jobs(&self) -> &[PendingJob] {
        self.work.pending_jobs()
    }

    fn discard_all(&mut self, size: u64, segs: Vec<Segment>) {
        self.work.discard_all(size, segs);
    }

    fn release_all(&mut self, segs: Vec<Segment>) {
        self.work.release_all(segs);
    }
}

/// The set-up threads as U-Net's set-up sees them, with the charges of
/// the parts outside U-Net.
struct UnetWork<'a> {
    work: &'a mut SetupThread,
    vias: &'a Vias,
    udm: &'a Jobs,
    fbs: &'a Framebuffers,
}

impl Charges for UnetWork<'_> {
    fn charge(&self, t: &mut Tally<'_>) {
        let rest = Rest {
            eps: None,
            work: self.work,
            conns: None,
            vias: Some(self.vias),
            udm: Some(self.udm),
            fbs: self.fbs,
        };
        rest.charge(t);
    }
}

impl unet_setup::Work for UnetWork<'_> {
    fn start_endpoint(
        &mut self,
        engine_id: u64,
        (client, req_id): (ClientId, u32),
        layout: Layout,
        params: (bool, u64),
        reserved: (usize, u32),
    ) {
        self.work
            .start(engine_id, client, req_id, layout, params, reserved);
    }

    fn discard(&mut self, seg: Segment) {
        self.work.discard(seg);
    }
}

impl Setup<'_> {
    /// The set-up of U-Net, for `f`: the U-Net parts, the set-up threads,
    /// and what U-Net reads of the rest.
    pub(crate) fn unet<T>(&mut self, f: impl FnOnce(&mut UnetSetup<'_>) -> T) -> T {
        let mut work = UnetWork {
            work: self.work,
            vias: self.vias,
            udm: self.udm,
            fbs: &self.spine.rt.fbs,
        };
        let mut u = UnetSetup {
            cfg: self.cfg,
            engine_id: self.engine_id,
            poller: self.poller,
            clients: &mut *self.server,
            work: &mut work,
            eps: self.eps,
            conns: self.conns,
            remote: self.remote.as_mut().map(RemoteSide::reborrow),
            applets: self.applets,
        };
        f(&mut u)
    }

    /// The set-up of UDM, for `f`: the UDM parts, the set-up threads, and
    /// what UDM reads of the rest.
    pub(crate) fn udm<T>(&mut self, f: impl FnOnce(&mut UdmSetup<'_>) -> T) -> T {
        let mut work = UdmWork {
            work: self.work,
            eps: self.eps,
            conns: self.conns,
            vias: self.vias,
            fbs: &self.spine.rt.fbs,
        };
        let mut u = UdmSetup {
            cfg: self.cfg,
            engine_id: self.engine_id,
            poller: self.poller,
            counters: self.eps.counters(),
            clients: &*self.server,
            work: &mut work,
            remote: self.remote.as_mut().map(RemoteSide::reborrow),
            udm: self.udm,
        };
        f(&mut u)
    }

    /// The set-up side of UDM's links to other engines: joins and their
    /// answers from the wire, closes, join retries, links to retire.
    fn udm_links(&mut self) {
        self.udm(|u| u.udm_links());
    }

    /// The set-up of VIA, for `f`: the VIA parts, and what VIA reads of
    /// the rest.
    pub(crate) fn via<T>(&mut self, f: impl FnOnce(&mut ViaSetup<'_>) -> T) -> T {
        let rest = Rest {
            eps: Some(self.eps),
            work: self.work,
            conns: None,
            vias: None,
            udm: Some(self.udm),
            fbs: &self.spine.rt.fbs,
        };
        let mut v = ViaSetup {
            cfg: self.cfg,
            engine_id: self.engine_id,
            poller: self.poller,
            counters: self.eps.counters(),
            clients: &*self.server,
            rest: &rest,
            conns: self.conns,
            remote: self.remote.as_mut().map(RemoteSide::reborrow),
            vias: self.vias,
        };
        f(&mut v)
    }

    /// Make a SPINE framebuffer (`spine/framebuffer.rs`), checked against
    /// the memory quotas with every part's charges.
    pub(super) fn spine_framebuffer(&mut self, ci: ClientId, req_id: u32, dims: (u32, u32, u32)) {
        let rest = Rest {
            eps: Some(self.eps),
            work: self.work,
            conns: Some(self.conns),
            vias: Some(self.vias),
            udm: Some(self.udm),
            fbs: &self.spine.rt.fbs,
        };
        let usage = clients::usage(&*self.server, ci, |t| rest.charge(t));
        let counters = self.eps.counters();
        framebuffer::create(
            self.spine,
            &*self.server,
            self.cfg,
            counters,
            usage,
            ci,
            req_id,
            dims,
        );
    }

    /// Act on the VIA set-up frames that came from the wire.
    fn vi_wire(&mut self, frames: Vec<ConnIn>) {
        self.via(|v| v.vi_wire(frames));
    }

    /// Answer the VI connection requests nobody accepted in time.
    fn expire_requests(&mut self, now: Instant) {
        self.via(|v| v.expire_requests(now));
    }

    /// Take the work the loop's parts left for control in a turn, in the
    /// order the turn found it: the replies owed for remote opens, VIA's
    /// set-up frames, UDM's segments to release on the set-up thread and
    /// its links' set-up, the VI connection requests and opens whose time
    /// came. What this queues on the wire leaves with the turn's flush.
    ///
    /// Called only when [`turn_left_work`] says there is something.
    pub(crate) fn after_turn(&mut self) {
        if let Some(done) = self.remote.as_mut().and_then(|w| w.take_done()) {
            self.complete(done);
        }
        if !self.vias.wire_setup.is_empty() {
            let frames = std::mem::take(&mut self.vias.wire_setup);
            self.vi_wire(frames);
        }
        if !self.udm.released.is_empty() {
            let segs = std::mem::take(&mut self.udm.released);
            self.work.release_all(segs);
        }
        if self.remote.is_some() && self.udm.remote.setup_due() {
            self.udm_links();
        }
        if self
            .vias
            .next_deadline()
            .is_some_and(|d| d <= Instant::now())
        {
            self.expire_requests(Instant::now());
        }
    }

    /// Whether client `ci`'s process holds few objects that cost the
    /// engine descriptors (endpoints, regions, VIs, UDM jobs and nodes):
    /// such a process may still make one when the engine is down to its
    /// reserve of descriptors, so that a newcomer can work while one that
    /// holds many is refused.
    pub(super) fn holds_few_objects(&self, ci: ClientId) -> bool {
        let clients = &*self.server;
        unet_setup::endpoints_of(self.eps, clients, ci)
            .saturating_add(via_setup::descriptor_objects_of(self.vias, clients, ci))
            .saturating_add(udm_setup::objects_of(self.udm, clients, ci))
            < FEW_OBJECTS
    }
}

/// Whether a turn left work for control ([`Setup::after_turn`]): replies
/// owed for remote opens, VIA's set-up frames, UDM's segments to release
/// or links to set up, a waiting request whose time ran out. A handful of
/// loads, read on every turn so that the loop builds the set-up side only
/// when it has work.
/// Inlined into both of the loop's turns (plain and traced): out of line
/// the call and its spills cost more than the loads.
#[inline(always)]
pub(crate) fn turn_left_work(chans: &RemoteChannels, vias: &Vias, udm: &Jobs, port: bool) -> bool {
    chans.has_done()
        || !vias.wire_setup.is_empty()
        || !udm.released.is_empty()
        || (port && udm.remote.setup_due())
        || (vias.has_deadlines() && vias.next_deadline().is_some_and(|d| d <= Instant::now()))
}
