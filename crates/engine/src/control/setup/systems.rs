//! The other systems' set-up halves as control builds them for a
//! request: [`Setup::via`] and [`Setup::udm`] lend each the parts it
//! changes, the clients, and what the parts outside it charge to a
//! process and its user (for the memory limits), with the set-up threads
//! behind UDM's [`Work`]; and the counts across systems that only control
//! can make (a process's memory, its objects that cost descriptors).

use std::time::{Duration, Instant};

use unet_abi::udm::UdmLayout;
use unet_control::ErrorCode;
use unet_sys::Segment;

use super::Setup;
use crate::clients::{self, Charges, Tally, Usage};
use crate::control::setup_thread::SetupThread;
use crate::udm::setup::{self as udm_setup, UdmSetup, Work};
use crate::udm::{Jobs, PendingJob};
use crate::unet::direct::DirectConns;
use crate::unet::endpoints::{ClientId, EndpointTable};
use crate::unet::remote::ViIn;
use crate::via::setup::{self as via_setup, ViaSetup};
use crate::via::vias::Vias;

/// Objects (endpoints, regions, VIs, UDM jobs and nodes) a process may
/// hold and still make more from the engine's reserve of descriptors.
const FEW_OBJECTS: u32 = 8;

/// The parts whose charges count against a process's and its user's
/// memory limits, but for those a system's set-up holds itself (None):
/// what control adds to that system's own charges.
struct Rest<'a> {
    eps: &'a EndpointTable,
    work: &'a SetupThread,
    conns: Option<&'a DirectConns>,
    vias: Option<&'a Vias>,
    udm: Option<&'a Jobs>,
}

impl Charges for Rest<'_> {
    /// The segments of the endpoints, of those being made, of the UDM
    /// jobs being made, of the direct connections, of VIA's regions and
    /// VIs, and the jobs by the process and user that made them, while
    /// they live.
    fn charge(&self, t: &mut Tally<'_>) {
        for (_, e) in self.eps.iter() {
            t.add(e.owner, e.seg.len() as u64 + e.buffer_limit(), true);
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
    }
}

/// The set-up threads as UDM's set-up sees them, with the charges of the
/// parts outside UDM.
struct UdmWork<'a> {
    work: &'a mut SetupThread,
    eps: &'a EndpointTable,
    conns: &'a DirectConns,
    vias: &'a Vias,
}

impl Charges for UdmWork<'_> {
    fn charge(&self, t: &mut Tally<'_>) {
        let rest = Rest {
            eps: self.eps,
            work: self.work,
            conns: Some(self.conns),
            vias: Some(self.vias),
            udm: None,
        };
        rest.charge(t);
    }
}

impl Work for UdmWork<'_> {
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

impl Setup<'_> {
    /// The set-up of UDM, for `f`: the UDM parts, the set-up threads, and
    /// what UDM reads of the rest.
    pub(crate) fn udm<T>(&mut self, f: impl FnOnce(&mut UdmSetup<'_>) -> T) -> T {
        let mut work = UdmWork {
            work: self.work,
            eps: self.eps,
            conns: self.conns,
            vias: self.vias,
        };
        let mut u = UdmSetup {
            cfg: self.cfg,
            engine_id: self.engine_id,
            poller: self.poller,
            counters: self.eps.counters(),
            clients: &*self.server,
            work: &mut work,
            remote: self.remote.as_deref_mut(),
            udm: self.udm,
        };
        f(&mut u)
    }

    /// The set-up side of UDM's links to other engines: joins and their
    /// answers from the wire, closes, join retries, links to retire.
    pub(crate) fn udm_links(&mut self) {
        self.udm(|u| u.udm_links());
    }

    /// The set-up of VIA, for `f`: the VIA parts, and what VIA reads of
    /// the rest.
    pub(crate) fn via<T>(&mut self, f: impl FnOnce(&mut ViaSetup<'_>) -> T) -> T {
        let rest = Rest {
            eps: self.eps,
            work: self.work,
            conns: None,
            vias: None,
            udm: Some(self.udm),
        };
        let mut v = ViaSetup {
            cfg: self.cfg,
            engine_id: self.engine_id,
            poller: self.poller,
            counters: self.eps.counters(),
            clients: &*self.server,
            rest: &rest,
            conns: self.conns,
            remote: self.remote.as_deref_mut(),
            vias: self.vias,
        };
        f(&mut v)
    }

    /// Act on the VIA set-up frames that came from the wire.
    pub(crate) fn vi_wire(&mut self, frames: Vec<ViIn>) {
        self.via(|v| v.vi_wire(frames));
    }

    /// Answer the VI connection requests nobody accepted in time.
    pub(crate) fn expire_requests(&mut self, now: Instant) {
        self.via(|v| v.expire_requests(now));
    }

    /// Whether client `ci`'s process holds few objects that cost the
    /// engine descriptors (endpoints, regions, VIs, UDM jobs and nodes):
    /// such a process may still make one when the engine is down to its
    /// reserve of descriptors, so that a newcomer can work while one that
    /// holds many is refused.
    pub(super) fn holds_few_objects(&self, ci: ClientId) -> bool {
        let key = self.server.proc_key(ci);
        let endpoints = self
            .eps
            .iter()
            .filter(|(_, e)| self.server.proc_key(e.owner) == key)
            .count() as u32;
        let clients = &*self.server;
        endpoints
            .saturating_add(via_setup::descriptor_objects_of(self.vias, clients, ci))
            .saturating_add(udm_setup::objects_of(self.udm, clients, ci))
            < FEW_OBJECTS
    }

    /// What the process of client `ci` (over all its connections) and its
    /// user hold: the segments of their endpoints, of those being made,
    /// and of the direct connections they opened.
    pub(super) fn usage(&self, ci: ClientId) -> Usage {
        let rest = Rest {
            eps: self.eps,
            work: self.work,
            conns: Some(self.conns),
            vias: Some(self.vias),
            udm: Some(self.udm),
        };
        clients::usage(&*self.server, ci, |t| rest.charge(t))
    }

    /// Whether client `ci`'s process and user may take `more` bytes of
    /// shared memory: the refusal (counted) if not.
    pub(super) fn check_memory(&self, u: &Usage, more: u64) -> Result<(), ErrorCode> {
        u.check(more, self.cfg, self.counters())
    }
}
