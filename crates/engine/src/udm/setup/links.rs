//! The set-up side of UDM jobs that span engines (see
//! [`crate::udm::remote`] for the links' data path): a client's join of a
//! rank at another engine (its [`UdmJoin`] retried until answered), the
//! home's grant or refusal of a join from another engine, the job's
//! replica made for the first join through a link, and links retired.
//! Every frame is checked against the join or link it names before it is
//! used.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use unet_abi::udm::*;
use unet_abi::EngineCounter;
use unet_control::{ErrorCode, Reply};

use super::UdmSetup;
use crate::poller::Token;
use crate::udm::link::{JoinOpen, Link, HOLD};
use crate::udm::{JobMemory, PendingJob};
use crate::unet::endpoints::ClientId;
use crate::via::vi_path::RemoteVi;
use crate::wire::frame::{UdmAccept, UdmJoin, ViClose, ViRefuse, VI_CLOSE_NORMAL};
use crate::wire::port::ConnIn;
use crate::wire::port::LINK_BIT;
use crate::wire::{Body, RefuseReason, WireDrop};

/// Retransmit interval of an unanswered join, and the attempts.
const JOIN_RETRY: Duration = Duration::from_millis(200);
const JOIN_TRIES: u32 = 10;

impl UdmSetup<'_> {
    /// A client asks to join rank `rank` of job `job` at engine `home`.
    pub(crate) fn udm_join_remote(
        &mut self,
        ci: ClientId,
        req_id: u32,
        home: SocketAddr,
        job: u32,
        key: u64,
        rank: u32,
    ) {
        let Some(w) = self.remote.as_mut() else {
            return self.udm_reply(ci, req_id, Err(ErrorCode::Unreachable));
        };
        if crate::via::vias::is_local(Some(home), Some(w.local_addr())) {
            let r = self.udm_join(ci, job, key, rank);
            return self.udm_reply_fds(ci, req_id, job, rank, r);
        }
        // One link per (home, job).
        let links = &mut self.udm.remote;
        let existing = links
            .links
            .iter()
            .find(|(_, l)| l.peer.addr == home && l.home_job == Some(job) && l.dead.is_none())
            .map(|(&id, _)| id);
        let lid = match existing {
            Some(id) => id,
            None => {
                if !w.vi_peer_add(home) {
                    return self.udm_reply(ci, req_id, Err(ErrorCode::NoResources));
                }
                let id = links.new_link_id();
                let my_token = unet_sys::random_u64();
                let peer = RemoteVi {
                    addr: home,
                    vi: 0,
                    peer_token: 0,
                    my_token,
                };
                let mut l = Link::new(None, peer, false);
                l.home_job = Some(job);
                links.links.insert(id, l);
                w.vi_route(id, Some((home, my_token)));
                id
            }
        };
        let open = links.new_open_id();
        links.opens.insert(
            open,
            JoinOpen {
                client: ci,
                req_id,
                home,
                job,
                key,
                rank,
                link: lid,
                next_try: Instant::now() + JOIN_RETRY,
                tries: 1,
            },
        );
        self.send_join(open);
    }

    fn send_join(&mut self, open: u32) {
        let Some(o) = self.udm.remote.opens.get(&open) else {
            return;
        };
        let Some(l) = self.udm.remote.links.get(&o.link) else {
            return;
        };
        let f = UdmJoin {
            request_id: open,
            job: o.job,
            key: o.key,
            src_link: o.link,
            src_token: l.peer.my_token,
            rank: o.rank,
            hold: HOLD,
        };
        let home = o.home;
        if let Some(w) = self.remote.as_mut() {
            w.send_vi_control(home, Body::UdmJoin(f));
        }
    }

    fn udm_reply(&mut self, ci: ClientId, req_id: u32, r: Result<(), ErrorCode>) {
        let reply = match r {
            Ok(()) => Reply::Ok,
            Err(c) => Reply::Error(c),
        };
        self.clients.reply(ci, req_id, reply, &[]);
    }

    fn udm_reply_fds(
        &mut self,
        ci: ClientId,
        req_id: u32,
        job: u32,
        rank: u32,
        r: Result<Vec<std::os::fd::OwnedFd>, ErrorCode>,
    ) {
        match r {
            Ok(fds) => {
                let raw: Vec<_> = fds.iter().map(|f| f.as_raw_fd()).collect();
                self.clients
                    .reply(ci, req_id, Reply::UdmJoined { job, rank }, &raw);
            }
            Err(c) => self.clients.reply(ci, req_id, Reply::Error(c), &[]),
        }
    }

    /// The set-up side of links: joins and their answers from the wire,
    /// closes, join retries, links to retire.
    pub(crate) fn udm_links(&mut self) {
        for f in std::mem::take(&mut self.udm.remote.setup) {
            match f {
                ConnIn::UdmJoin(from, j) => self.udm_join_from(from, j),
                ConnIn::UdmAccept(from, a) => self.udm_accepted(from, a),
                ConnIn::Refuse(from, r) => self.udm_refused(from, r),
                // Its token and sender were checked by the wire's port.
                ConnIn::Close(c) => match self.udm.remote.links.get_mut(&c.dst_vi) {
                    Some(l) if l.connected => {
                        l.dead = Some(false);
                    }
                    Some(_) => self.count_forged_udm(),
                    None => self.counters.engine(WireDrop::UnknownEndpoint.counter(), 1),
                },
                _ => {}
            }
        }
        // Joins not answered: again, or given up.
        let now = Instant::now();
        let due: Vec<u32> = self
            .udm
            .remote
            .opens
            .iter()
            .filter(|(_, o)| o.next_try <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            let o = self.udm.remote.opens.get_mut(&id).expect("listed");
            if o.tries >= JOIN_TRIES {
                let o = self.udm.remote.opens.remove(&id).expect("listed");
                self.udm_reply(o.client, o.req_id, Err(ErrorCode::Unreachable));
                self.forget_unused_link(o.link);
                continue;
            }
            o.tries += 1;
            o.next_try = now + JOIN_RETRY;
            self.send_join(id);
        }
        // Links to retire.
        let dead: Vec<(u32, bool)> = self
            .udm
            .remote
            .links
            .iter()
            .filter_map(|(&id, l)| l.dead.map(|tell| (id, tell)))
            .collect();
        for (id, tell) in dead {
            self.retire_link(id, tell);
        }
    }

    fn count_forged_udm(&self) {
        self.counters.engine(WireDrop::ForgedToken.counter(), 1);
    }

    /// Forget link `id`: tell its peer if asked, mark the ranks behind it
    /// gone, and the job retires if nothing holds it any more.
    fn retire_link(&mut self, id: u32, tell: bool) {
        let Some(mut l) = self.udm.remote.links.remove(&id) else {
            return;
        };
        // Joins waiting for a replica still being made: it will not come.
        for (o, _) in l.making.take().into_iter().flatten() {
            self.udm_reply(o.client, o.req_id, Err(ErrorCode::Unreachable));
        }
        if let Some(w) = self.remote.as_mut() {
            w.vi_route(id, None);
            w.vi_peer_remove(l.peer.addr);
            if tell && l.connected {
                w.send_vi_control(
                    l.peer.addr,
                    Body::ViClose(ViClose {
                        dst_vi: l.peer.vi,
                        token: l.peer.peer_token,
                        reason: VI_CLOSE_NORMAL,
                    }),
                );
            }
        }
        let Some(jid) = l.job else {
            return;
        };
        let behind: Vec<u32> = self
            .udm
            .remote
            .routes
            .get(&jid)
            .map(|r| {
                (0..r.len() as u32)
                    .filter(|&k| r[k as usize] == id)
                    .collect()
            })
            .unwrap_or_default();
        if let Some(j) = self.udm.jobs.get_mut(&jid) {
            for r in behind {
                if j.nodes[r as usize].state == UDM_NODE_REMOTE {
                    j.node_gone(r);
                }
            }
        }
        if !self.udm.remote.links.values().any(|l| l.job == Some(jid)) {
            self.udm.remote.routes.remove(&jid);
        }
        self.udm_retire(jid);
    }

    /// A link made for joins that all failed, never connected: forget it.
    fn forget_unused_link(&mut self, id: u32) {
        let used = self.udm.remote.opens.values().any(|o| o.link == id)
            || self.udm.remote.links.get(&id).is_none_or(|l| l.connected);
        if !used {
            self.retire_link(id, false);
        }
    }

    /// A UdmJoin from `from` (an allowed peer): grant the rank to a node
    /// behind it, or refuse.
    fn udm_join_from(&mut self, from: SocketAddr, j: UdmJoin) {
        let refuse = |s: &mut Self, reason: RefuseReason| {
            if let Some(w) = s.remote.as_mut() {
                w.send_vi_control(
                    from,
                    Body::ViRefuse(ViRefuse {
                        request_id: j.request_id,
                        dst_vi: j.src_link,
                        reason,
                    }),
                );
            }
        };
        let Some(job) = self.udm.jobs.get(&j.job) else {
            return refuse(self, RefuseReason::NoSuchEndpoint);
        };
        if job.key != j.key {
            // As if the job did not exist (and counted: a forgery, or a
            // stale ticket).
            self.count_forged_udm();
            return refuse(self, RefuseReason::NoSuchEndpoint);
        }
        if j.src_link & LINK_BIT == 0 || j.rank >= job.layout.nodes {
            return refuse(self, RefuseReason::Refused);
        }
        let nodes = job.layout.nodes;
        let gone: u64 = (0..nodes)
            .filter(|&r| job.nodes[r as usize].state == UDM_NODE_GONE)
            .fold(0, |m, r| m | 1 << r);
        let (fast_cap, buffer_cap, timeout_us) = (
            job.layout.fast_cap,
            job.layout.buffer_cap,
            job.timeout.as_micros().min(u32::MAX as u128) as u32,
        );
        let links = &mut self.udm.remote;
        let found = links
            .links
            .iter()
            .find(|(_, l)| l.job == Some(j.job) && l.peer.addr == from && l.peer.vi == j.src_link)
            .map(|(&id, _)| id);
        let lid = match found {
            Some(id) => id,
            None => {
                let Some(w) = self.remote.as_mut() else {
                    return;
                };
                if !w.vi_peer_add(from) {
                    return refuse(self, RefuseReason::NoResources);
                }
                let links = &mut self.udm.remote;
                let id = links.new_link_id();
                let peer = RemoteVi {
                    addr: from,
                    vi: j.src_link,
                    peer_token: j.src_token,
                    my_token: unet_sys::random_u64(),
                };
                let mut l = Link::new(Some(j.job), peer, true);
                l.announced = gone;
                links.links.insert(id, l);
                links
                    .routes
                    .entry(j.job)
                    .or_insert_with(|| vec![0; nodes as usize]);
                w.vi_route(id, Some((from, peer.my_token)));
                id
            }
        };
        let links = &mut self.udm.remote;
        let my_token = links.links[&lid].peer.my_token;
        let route = links
            .routes
            .entry(j.job)
            .or_insert_with(|| vec![0; nodes as usize]);
        let job = self.udm.jobs.get_mut(&j.job).expect("looked up");
        match job.nodes[j.rank as usize].state {
            UDM_NODE_FREE => {
                job.set_remote(j.rank);
                route[j.rank as usize] = lid;
            }
            UDM_NODE_REMOTE if route[j.rank as usize] == lid => {}
            _ => return refuse(self, RefuseReason::Refused),
        }
        if let Some(w) = self.remote.as_mut() {
            w.send_vi_control(
                from,
                Body::UdmAccept(UdmAccept {
                    request_id: j.request_id,
                    dst_link: j.src_link,
                    src_link: lid,
                    accept_token: my_token,
                    rank: j.rank,
                    nodes,
                    fast_cap,
                    buffer_cap,
                    timeout_us,
                    hold: HOLD,
                    gone,
                }),
            );
        }
    }

    /// The home granted a join of ours: make the job's replica here (the
    /// first time), and hand the rank to the client.
    fn udm_accepted(&mut self, from: SocketAddr, a: UdmAccept) {
        let ok = self
            .udm
            .remote
            .opens
            .get(&a.request_id)
            .is_some_and(|o| o.home == from && o.link == a.dst_link);
        if !ok {
            return self.count_forged_udm();
        }
        let o = self.udm.remote.opens.remove(&a.request_id).expect("found");
        let Some(l) = self.udm.remote.links.get_mut(&o.link) else {
            return self.udm_reply(o.client, o.req_id, Err(ErrorCode::Unreachable));
        };
        if !l.connected {
            l.peer.vi = a.src_link;
            l.peer.peer_token = a.accept_token;
            l.connected = true;
        } else if l.peer.vi != a.src_link || l.peer.peer_token != a.accept_token {
            self.udm.remote.opens.insert(a.request_id, o);
            return self.count_forged_udm();
        }
        let local = match (l.job, l.making.as_mut()) {
            (Some(id), _) => id,
            (None, Some(waiting)) => return waiting.push((o, a)),
            (None, None) => {
                let link = o.link;
                match self.start_replica(&o, &a) {
                    Ok(()) => {
                        if let Some(l) = self.udm.remote.links.get_mut(&link) {
                            l.making = Some(vec![(o, a)]);
                        }
                    }
                    Err(code) => {
                        self.udm_reply(o.client, o.req_id, Err(code));
                        self.retire_link(link, true);
                    }
                }
                return;
            }
        };
        self.finish_accept(o, a, local);
    }

    /// Hand rank `a.rank` of job `local` (the replica here) to the client
    /// of the join `o`, which the home granted.
    fn finish_accept(&mut self, o: JoinOpen, a: UdmAccept, local: u32) {
        let Some(job) = self.udm.jobs.get_mut(&local) else {
            return self.udm_reply(o.client, o.req_id, Err(ErrorCode::NoSuchJob));
        };
        if a.rank >= job.layout.nodes || job.nodes[a.rank as usize].state != UDM_NODE_REMOTE {
            return self.udm_reply(o.client, o.req_id, Err(ErrorCode::RankTaken));
        }
        job.set_free(a.rank);
        let key = job.key;
        if let Some(r) = self.udm.remote.routes.get_mut(&local) {
            r[a.rank as usize] = 0;
        }
        let r = self.udm_join(o.client, local, key, a.rank);
        self.udm_reply_fds(o.client, o.req_id, local, a.rank, r);
    }

    /// Start making the replica of a home's job, for the join `o` the
    /// home granted with `a`, on the set-up thread (it can be as large as
    /// any job: made on the loop, it would hold up every client's
    /// traffic); [`UdmSetup::finish_udm_replica`] enters it when ready. It
    /// is charged to the joining client, as a job it made.
    fn start_replica(&mut self, o: &JoinOpen, a: &UdmAccept) -> Result<(), ErrorCode> {
        let buffer = a.buffer_cap as u64 * std::mem::size_of::<UdmMsg>() as u64;
        let layout =
            UdmLayout::new(a.nodes, a.fast_cap, buffer).map_err(|_| ErrorCode::BadGeometry)?;
        self.check_udm_jobs(o.client)?;
        self.check_memory_for(o.client, JobMemory::charge(&layout))?;
        let timeout = Duration::from_micros(a.timeout_us as u64).min(Duration::from_secs(60));
        let id = self.udm.reserve();
        self.work.start_udm_replica(
            self.engine_id,
            (o.client, o.req_id),
            id,
            (layout, timeout),
            o.link,
        );
        Ok(())
    }

    /// A replica's memory is ready (or could not be made): enter it, every
    /// rank remote (behind its link) or gone, and hand the joins granted
    /// meanwhile to their clients. If the link went away meanwhile, the
    /// memory is unmapped and its id given back.
    pub(crate) fn finish_udm_replica(
        &mut self,
        p: PendingJob,
        link: u32,
        mem: std::io::Result<JobMemory>,
    ) {
        let waiting = self
            .udm
            .remote
            .links
            .get_mut(&link)
            .and_then(|l| l.making.take());
        let Some(waiting) = waiting.filter(|w| !w.is_empty()) else {
            self.udm.unreserve(p.id);
            if let Ok(mem) = mem {
                self.work.discard_all(mem.touched(), mem.into_segments());
            }
            return;
        };
        let entered = match mem {
            Ok(mem) => match self.udm.insert(p.id, p.client, p.layout, p.timeout, mem) {
                Ok(()) => true,
                Err(mem) => {
                    self.work.discard_all(mem.touched(), mem.into_segments());
                    false
                }
            },
            Err(_) => {
                self.udm.unreserve(p.id);
                false
            }
        };
        if !entered {
            for (o, _) in waiting {
                self.udm_reply(o.client, o.req_id, Err(ErrorCode::NoResources));
            }
            return self.retire_link(link, true);
        }
        let id = p.id;
        let gone = waiting[0].1.gone;
        let payer = self.udm_payer(p.client);
        let job = self.udm.jobs.get_mut(&id).expect("just entered");
        job.payer = payer;
        let _ = self.poller.add_edge(
            job.doorbell.fd().as_raw_fd(),
            Token::UdmDoorbell(id as usize),
        );
        for r in 0..p.layout.nodes {
            if gone & (1 << r) != 0 {
                job.node_gone(r);
            } else {
                job.set_remote(r);
            }
        }
        self.counters.engine(EngineCounter::UdmJobs, 1);
        self.udm
            .remote
            .routes
            .insert(id, vec![link; p.layout.nodes as usize]);
        if let Some(l) = self.udm.remote.links.get_mut(&link) {
            l.job = Some(id);
            l.announced = gone;
        }
        for (o, a) in waiting {
            self.finish_accept(o, a, id);
        }
    }

    /// The client whose join started the replica for `link` went away
    /// while it was being made (its memory is unmapped when ready): the
    /// joins waiting for it fail, and the link goes.
    pub(crate) fn udm_replica_abandoned(&mut self, link: u32) {
        self.retire_link(link, true);
    }

    /// A home refused a join of ours.
    fn udm_refused(&mut self, from: SocketAddr, r: ViRefuse) {
        let ok = self
            .udm
            .remote
            .opens
            .get(&r.request_id)
            .is_some_and(|o| o.home == from && o.link == r.dst_vi);
        if !ok {
            return self.count_forged_udm();
        }
        let o = self.udm.remote.opens.remove(&r.request_id).expect("found");
        let code = match r.reason {
            RefuseReason::NoSuchEndpoint => ErrorCode::NoSuchJob,
            RefuseReason::NoResources => ErrorCode::NoResources,
            _ => ErrorCode::RankTaken,
        };
        self.udm_reply(o.client, o.req_id, Err(code));
        self.forget_unused_link(o.link);
    }
}
