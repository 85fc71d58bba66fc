//! Set-up: the control plane's half of every request. A request read
//! from a client is checked against the descriptor reserve, answered here
//! when it spans the systems (Hello, Stat, the event trace), and otherwise handed to the
//! set-up half of the system it belongs to: U-Net's
//! ([`crate::unet::setup::UnetSetup`]), VIA's or UDM's (each built in
//! `setup/systems.rs`), or SPINE's. When a client goes, each system is asked to drop
//! what the client held; at shutdown, every client is reclaimed. The data
//! path never waits for set-up work, and each system's set-up half is
//! given the parts it changes for one request at a time.

use std::os::fd::AsRawFd;

use unet_abi::*;
use unet_control::{self as control, ErrorCode, Reply, Request};

use crate::config::EngineConfig;
use crate::control::server::{ControlServer, Incoming};
use crate::control::setup_thread::{Done, SetupThread};
use crate::counters::Counters;
use crate::poller::Poller;
use crate::spine::peers;
use crate::spine::setup::SpineSetup;
use crate::spine::trace;
use crate::spine::SpinePart;
use crate::udm::Jobs;
use crate::unet::applets::{AppletHost, Loaded};
use crate::unet::direct::DirectConns;
use crate::unet::endpoints::{ClientId, EndpointTable};
use crate::unet::remote::{Completion, RemoteSide};
use crate::via::vias::Vias;

mod systems;

pub(crate) use systems::turn_left_work;

/// The parts a set-up request changes, borrowed from the dispatcher.
pub(crate) struct Setup<'a> {
    pub cfg: &'a EngineConfig,
    pub engine_id: u64,
    pub poller: &'a Poller,
    pub server: &'a mut ControlServer,
    pub eps: &'a mut EndpointTable,
    pub conns: &'a mut DirectConns,
    pub remote: Option<RemoteSide<'a>>,
    pub applets: &'a mut AppletHost,
    pub work: &'a mut SetupThread,
    pub vias: &'a mut Vias,
    pub udm: &'a mut Jobs,
    /// SPINE, and the event graph's recorder it holds.
    pub spine: &'a mut SpinePart,
}

impl Setup<'_> {
    fn counters(&self) -> &Counters {
        self.eps.counters()
    }

    /// The engine's UDP address, if it has a wire.
    pub(crate) fn udp_addr(&self) -> Option<std::net::SocketAddr> {
        self.remote.as_ref().map(|w| w.local_addr())
    }

    fn reply(&self, ci: ClientId, req_id: u32, r: Reply) {
        self.server.reply(ci, req_id, r, &[]);
    }

    /// Send the replies owed for remote opens.
    pub(crate) fn complete(&mut self, done: Vec<Completion>) {
        self.unet(|u| u.complete(done));
    }

    /// Do what a request asks and answer it.
    pub(crate) fn handle(&mut self, inc: Incoming) {
        let Incoming {
            client: ci,
            req_id,
            req,
            mut fds,
        } = inc;
        if costs_descriptors(&req) && self.server.fds_short() && !self.holds_few_objects(ci) {
            // The engine's last descriptors are for others: new clients
            // and those that hold little.
            self.counters().engine(EngineCounter::FdReserveRefused, 1);
            self.reply(ci, req_id, Reply::Error(ErrorCode::NoResources));
            return;
        }
        match req {
            Request::RegisterMemory { .. }
            | Request::DeregisterMemory { .. }
            | Request::ViListen { .. }
            | Request::ViUnlisten { .. }
            | Request::ViConnect { .. }
            | Request::ViAccept { .. }
            | Request::ViReject { .. }
            | Request::ViClose { .. }
            | Request::ViGrantRegion { .. }
            | Request::ViPeerRegion { .. } => self.via(|v| v.handle_via(ci, req_id, req, &mut fds)),
            Request::UdmCreateJob { .. }
            | Request::UdmJoin { .. }
            | Request::UdmLeave { .. }
            | Request::UdmSchedule { .. }
            | Request::UdmJoinRemote { .. } => {
                self.udm(|u| u.handle_udm(ci, req_id, req, &mut fds))
            }
            Request::CreateEndpoint { .. }
            | Request::OpenChannel { .. }
            | Request::CloseChannel { .. }
            | Request::CloseEndpoint { .. }
            | Request::SetAccept { .. }
            | Request::AttachApplet { .. }
            | Request::DetachApplet { .. } => {
                self.unet(|u| u.handle_unet(ci, req_id, req, &mut fds))
            }
            Request::Hello { version } => {
                let r = if version == control::PROTOCOL_VERSION {
                    Reply::Hello {
                        engine_id: self.engine_id,
                        udp: self.udp_addr(),
                    }
                } else {
                    Reply::Error(ErrorCode::Version)
                };
                self.reply(ci, req_id, r);
            }
            Request::Stat => self.stat(ci, req_id),
            Request::SpineLoad { .. }
            | Request::SpineUnload { .. }
            | Request::SpineList
            | Request::SpineTable { .. } => {
                self.spine_setup().handle_spine(ci, req_id, req, &mut fds)
            }
            Request::SpineFramebuffer { ext, width, height } => {
                self.spine_framebuffer(ci, req_id, (ext, width, height))
            }
            Request::SpineFramebufferView { ext, index } => {
                crate::spine::framebuffer::view(self.spine, &*self.server, ci, req_id, (ext, index))
            }
            Request::PeerJoin { .. }
            | Request::PeerDoorbell { .. }
            | Request::PeerLeave { .. }
            | Request::PeerList => {
                // A peer queue reaches every handler of the adapter: the
                // owner's only.
                if !self.owner(ci) {
                    return self.reply(ci, req_id, Reply::Error(ErrorCode::NotOwner));
                }
                let counters = self.eps.counters();
                let peers = &mut self.spine.rt.peers;
                let (r, fd) = peers::handle(
                    peers,
                    self.poller,
                    &*self.server,
                    counters,
                    ci,
                    req,
                    &mut fds,
                );
                let fds: Vec<_> = fd.iter().map(|f| f.as_raw_fd()).collect();
                self.server.reply(ci, req_id, r, &fds);
            }
            Request::SpineLinkListen { .. }
            | Request::SpineLinkConnect { .. }
            | Request::SpineLinkClose { .. }
            | Request::SpineLinks => {
                let port = self.remote.as_mut().map(|r| &mut *r.port);
                crate::spine::wire::handle(self.spine, port, &*self.server, ci, req_id, req)
            }
            Request::SpinePortOpen { .. }
            | Request::SpinePortClose { .. }
            | Request::SpinePorts => {
                crate::spine::port::handle(self.spine, self.poller, &*self.server, ci, req_id, req)
            }
            Request::TraceSet { .. } | Request::TraceDump => {
                // Events time every client's messages: the owner's only.
                if !self.owner(ci) {
                    return self.reply(ci, req_id, Reply::Error(ErrorCode::NotOwner));
                }
                if let Some(r) = trace::answer(&mut self.spine.trace, ci, req_id, &req) {
                    self.reply(ci, req_id, r);
                }
            }
        }
    }

    /// Whether client `ci` runs as the engine's user (or root).
    fn owner(&self, ci: ClientId) -> bool {
        self.server
            .client(ci)
            .is_some_and(|c| c.uid == 0 || c.uid == unet_sys::effective_uid())
    }

    fn stat(&mut self, ci: ClientId, req_id: u32) {
        if !self.owner(ci) {
            return self.reply(ci, req_id, Reply::Error(ErrorCode::NotOwner));
        }
        self.unet(|u| u.fill_endpoint_slots());
        self.via(|v| v.fill_vi_slots());
        self.udm(|u| u.fill_udm_slots());
        let r = Reply::Stat {
            max_endpoints: self.cfg.max_endpoints,
            limits: self.cfg.limits(),
        };
        self.server.reply(ci, req_id, r, &[self.counters().fd()]);
    }

    /// Finish the creations whose memory is ready: an endpoint is entered
    /// and its client gets the segment and the doorbell
    /// ([`crate::unet::setup::UnetSetup::finish_create`]); a UDM job is entered and its client
    /// gets its id and key
    /// ([`crate::udm::setup::UdmSetup::finish_udm_job`]).
    pub(crate) fn finish_creates(&mut self) {
        for done in self.work.poll() {
            match done {
                Done::Endpoint(p, seg) => self.unet(|u| u.finish_create(p, seg)),
                Done::UdmJob(p, mem) => self.udm(|u| u.finish_udm_job(p, mem)),
            }
        }
    }

    /// Answer the trace dump that was written, if one was.
    pub(crate) fn finish_dump(&mut self) {
        if let Some(a) = self.spine.trace.finished_dump() {
            let fds: Vec<_> = a.file.iter().map(|f| f.as_raw_fd()).collect();
            self.server.reply(a.client, a.req_id, a.reply, &fds);
        }
    }

    /// Finish the attaches whose class is verified
    /// ([`crate::unet::setup::UnetSetup::finish_loads`]).
    pub(crate) fn finish_loads(&mut self, loaded: Vec<Loaded>) {
        self.unet(|u| u.finish_loads(loaded));
    }

    /// Finish the SPINE loads whose class is verified
    /// ([`crate::spine::setup::SpineSetup::finish_loads`]).
    pub(crate) fn finish_spine_loads(&mut self) {
        self.spine_setup().finish_loads();
    }

    /// The set-up of SPINE: the runtime, the endpoint table (whose inbox
    /// learns the handler numbers) and the clients.
    fn spine_setup(&mut self) -> SpineSetup<'_> {
        self.spine.set_bulk_max(self.eps);
        SpineSetup {
            spine: self.spine,
            eps: self.eps,
            clients: &mut *self.server,
        }
    }

    /// A client's control connection closed: the process is gone or done.
    /// Reclaim everything it held and tell its peers.
    pub(crate) fn drop_client(&mut self, ci: ClientId) {
        let Some(endpoints) = self.server.remove(ci, self.poller) else {
            return;
        };
        self.unet(|u| {
            for idx in endpoints {
                u.close_endpoint(idx);
            }
        });
        self.spine_setup().drop_client(ci);
        let port = self.remote.as_mut().map(|r| &mut *r.port);
        crate::spine::wire::drop_client(self.spine, port, ci);
        crate::spine::port::drop_client(self.spine, self.poller, ci);
        self.via(|v| v.drop_client_vias(ci));
        self.spine.trace.forget(ci);
        self.udm(|u| u.drop_client_udm(ci));
        self.unet(|u| u.drop_client_unet(ci));
        let (endpoints, jobs) = self.work.forget_client(ci);
        self.unet(|u| u.creates_forgotten(endpoints));
        for p in jobs {
            self.udm.unreserve(p.id);
            if let Some(link) = p.replica_of {
                self.udm(|u| u.udm_replica_abandoned(link));
            }
        }
    }

    /// Reclaim every client (the engine stops).
    pub(crate) fn shutdown(&mut self) {
        for ci in 0..self.server.len() {
            self.drop_client(ci);
        }
        self.server.unlink();
    }
}

/// Whether doing `req` keeps descriptors open in the engine (a segment,
/// a doorbell): refused when the engine is down to its reserve.
fn costs_descriptors(req: &Request) -> bool {
    matches!(
        req,
        Request::CreateEndpoint { .. }
            | Request::OpenChannel { .. }
            | Request::RegisterMemory { .. }
            | Request::ViConnect { .. }
            | Request::ViAccept { .. }
            | Request::UdmCreateJob { .. }
            | Request::UdmJoin { .. }
            | Request::UdmJoinRemote { .. }
            | Request::PeerJoin { .. }
            | Request::SpinePortOpen { .. }
    )
}
