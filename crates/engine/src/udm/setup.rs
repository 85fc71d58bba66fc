//! Set-up of UDM: creating jobs, joining and leaving them (see
//! [`crate::udm`]), and the set-up side of jobs that span engines
//! (`setup/links.rs`). A rank is granted here and nowhere else: a process
//! that shows the job's key gets one free rank's segments, and with them
//! the job segment that reaches the job's other nodes and no one else.
//! Control hands each UDM request to a [`UdmSetup`], which borrows the
//! UDM parts and answers through [`Clients`]; the one module of UDM that
//! talks to the clients. A job's memory is made and unmapped off the loop
//! through [`Work`] (the set-up threads).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::time::Duration;

use unet_abi::udm::*;
use unet_abi::EngineCounter;
use unet_control::{ErrorCode, Reply, Request};
use unet_sys::Segment;

use crate::clients::{self, Charges, Clients};
use crate::config::EngineConfig;
use crate::counters::Counters;
use crate::poller::{Poller, Token};
use crate::udm::{JobMemory, Jobs, Payer, PendingJob};
use crate::unet::endpoints::ClientId;
use crate::unet::remote::RemoteSide;

mod links;

/// The longest atomicity timeout a job may ask for.
const TIMEOUT_MAX: Duration = Duration::from_secs(60);

/// What UDM's set-up asks of the set-up threads: a job's memory made
/// ([`JobMemory::make`]) and unmapped off the engine's loop; and, as
/// [`Charges`], what the parts outside UDM charge to a process and its
/// user (the jobs being made among them).
pub(crate) trait Work: Charges {
    /// Start making the memory of job `id` (reserved) for client
    /// `client`'s request `req_id`; it comes back to
    /// [`UdmSetup::finish_udm_job`] when it is ready.
    fn start_udm_job(
        &mut self,
        engine_id: u64,
        client: (ClientId, u32),
        id: u32,
        layout: UdmLayout,
        timeout: Duration,
    );
    /// As [`Work::start_udm_job`], for the replica of another engine's
    /// job, joined through link `link`: it comes back marked so.
    fn start_udm_replica(
        &mut self,
        engine_id: u64,
        client: (ClientId, u32),
        id: u32,
        geometry: (UdmLayout, Duration),
        link: u32,
    );
    /// The jobs whose memory is being made.
    fn pending_jobs(&self) -> &[PendingJob];
    /// Unmap `segs`, of which `size` bytes are populated, off the loop.
    fn discard_all(&mut self, size: u64, segs: Vec<Segment>);
    /// Give the memory of `segs` back to the system and unmap them, off
    /// the loop.
    fn release_all(&mut self, segs: Vec<Segment>);
}

/// The parts a UDM request changes, and what it reads of the rest of the
/// engine, borrowed from control for one request (or one turn of the
/// links' set-up) at a time.
pub(crate) struct UdmSetup<'a> {
    pub cfg: &'a EngineConfig,
    pub engine_id: u64,
    pub poller: &'a Poller,
    pub counters: &'a Counters,
    /// The clients: who they are, where replies go.
    pub clients: &'a dyn Clients,
    /// The set-up threads, and the charges outside UDM.
    pub work: &'a mut dyn Work,
    pub remote: Option<RemoteSide<'a>>,
    pub udm: &'a mut Jobs,
}

/// The nodes client `ci`'s process has joined, over every job and
/// connection.
fn nodes_of(jobs: &Jobs, clients: &dyn Clients, ci: ClientId) -> usize {
    let key = clients.proc_key(ci);
    jobs.jobs
        .values()
        .map(|j| {
            j.nodes
                .iter()
                .filter(|n| {
                    n.state == UDM_NODE_JOINED
                        && n.client.is_some_and(|c| clients.proc_key(c) == key)
                })
                .count()
        })
        .sum()
}

/// The UDM objects client `ci`'s process holds that keep descriptors
/// open in the engine: the jobs charged to it and its joined nodes.
pub(crate) fn objects_of(jobs: &Jobs, clients: &dyn Clients, ci: ClientId) -> u32 {
    let key = clients.proc_key(ci);
    let made = jobs
        .jobs
        .values()
        .filter(|j| Some(j.payer.key) == key)
        .count();
    u32::try_from(made + nodes_of(jobs, clients, ci)).unwrap_or(u32::MAX)
}

impl UdmSetup<'_> {
    /// Whether client `ci`'s process and user may take `more` bytes of
    /// shared memory: the refusal (counted) if not.
    fn check_memory_for(&self, ci: ClientId, more: u64) -> Result<(), ErrorCode> {
        let u = clients::usage(self.clients, ci, |t| {
            self.work.charge(t);
            // Jobs by the process and user that made them, while they
            // live.
            for (payer, bytes) in self.udm.charges() {
                t.add_payer(payer.key, payer.uid, bytes);
            }
        });
        u.check(more, self.cfg, self.counters)
    }

    /// Do what a UDM request asks and answer it.
    pub(crate) fn handle_udm(
        &mut self,
        ci: ClientId,
        req_id: u32,
        req: Request,
        _fds: &mut Vec<OwnedFd>,
    ) {
        let r = match req {
            Request::UdmCreateJob {
                nodes,
                fast_cap,
                buffer_size,
                atomicity_timeout_us,
            } => {
                // Answered when the job's memory is ready (finish_udm_job).
                match self.udm_create(
                    (ci, req_id),
                    nodes,
                    fast_cap,
                    buffer_size,
                    atomicity_timeout_us,
                ) {
                    Some(r) => r,
                    None => return,
                }
            }
            Request::UdmJoin { job, key, rank } => match self.udm_join(ci, job, key, rank) {
                Ok(fds) => {
                    let raw: Vec<_> = fds.iter().map(|f| f.as_raw_fd()).collect();
                    self.clients
                        .reply(ci, req_id, Reply::UdmJoined { job, rank }, &raw);
                    return;
                }
                Err(code) => Reply::Error(code),
            },
            Request::UdmJoinRemote {
                home,
                job,
                key,
                rank,
            } => return self.udm_join_remote(ci, req_id, home, job, key, rank),
            Request::UdmSchedule {
                job,
                key,
                ranks,
                running,
            } => self.udm_schedule(ci, job, key, ranks, running),
            Request::UdmLeave { job, rank } => {
                let mine = self.udm.jobs.get(&job).and_then(|j| {
                    j.nodes
                        .get(rank as usize)
                        .filter(|n| n.client == Some(ci))
                        .map(|_| ())
                });
                match mine {
                    Some(()) => {
                        self.udm_node_gone(job, rank);
                        Reply::Ok
                    }
                    None => Reply::Error(ErrorCode::NoSuchJob),
                }
            }
            _ => Reply::Error(ErrorCode::BadRequest),
        };
        self.clients.reply(ci, req_id, r, &[]);
    }

    /// A scheduler's notice from client `ci` about the nodes `ranks` of
    /// job `job` (see `udm/sched.rs`), answered with overflow control's
    /// advice. Refused (and counted) unless the job exists and the key is
    /// its own (`NoSuchJob`), and the client runs as the user that made
    /// the job (`Rejected`, saying so).
    fn udm_schedule(
        &mut self,
        ci: ClientId,
        job: u32,
        key: u64,
        ranks: u64,
        running: bool,
    ) -> Reply {
        let uid = self.clients.uid(ci);
        let Some(j) = self.udm.jobs.get_mut(&job).filter(|j| j.key == key) else {
            self.counters.engine(EngineCounter::UdmSchedRefused, 1);
            return Reply::Error(ErrorCode::NoSuchJob);
        };
        if uid != Some(j.payer.uid) {
            self.counters.engine(EngineCounter::UdmSchedRefused, 1);
            return Reply::Rejected(format!(
                "job {job}'s scheduler must run as the user that made the job (uid {}), \
                 not uid {}",
                j.payer.uid,
                uid.map_or_else(|| "unknown".to_string(), |u| u.to_string())
            ));
        }
        j.notice(ci, ranks, running);
        let near_full = j.advice();
        self.counters.engine(EngineCounter::UdmSchedNotices, 1);
        if near_full != 0 {
            self.counters.engine(
                EngineCounter::UdmOverflowAdvice,
                near_full.count_ones() as u64,
            );
        }
        Reply::UdmAdvice {
            job,
            near_full,
            descheduled: j.descheduled,
        }
    }

    /// Start creating a UDM job for client `ci`: checked against its
    /// process's and user's memory limits, its id reserved, its memory
    /// made on the set-up thread. The reply comes when the memory is
    /// ready ([`UdmSetup::finish_udm_job`]); `Some(reply)` when the request
    /// is answered now (refused).
    fn udm_create(
        &mut self,
        (ci, req_id): (ClientId, u32),
        nodes: u32,
        fast_cap: u32,
        buffer_size: u64,
        timeout_us: u32,
    ) -> Option<Reply> {
        let Ok(layout) = UdmLayout::new(nodes, fast_cap, buffer_size) else {
            return Some(Reply::Error(ErrorCode::BadGeometry));
        };
        let timeout = Duration::from_micros(timeout_us as u64).min(TIMEOUT_MAX);
        if let Err(code) = self.check_udm_jobs(ci) {
            return Some(Reply::Error(code));
        }
        if let Err(code) = self.check_memory_for(ci, JobMemory::charge(&layout)) {
            return Some(Reply::Error(code));
        }
        let id = self.udm.reserve();
        self.work
            .start_udm_job(self.engine_id, (ci, req_id), id, layout, timeout);
        None
    }

    /// Finish a job whose memory is ready (or could not be made): it is
    /// entered, its doorbell watched, and its client gets its id and key.
    pub(crate) fn finish_udm_job(&mut self, p: PendingJob, mem: std::io::Result<JobMemory>) {
        if let Some(link) = p.replica_of {
            return self.finish_udm_replica(p, link, mem);
        }
        let (ci, req_id, id) = (p.client, p.req_id, p.id);
        let mem = match mem {
            Ok(mem) => mem,
            Err(_) => {
                self.udm.unreserve(id);
                return self
                    .clients
                    .reply(ci, req_id, Reply::Error(ErrorCode::NoResources), &[]);
            }
        };
        if let Err(mem) = self.udm.insert(id, ci, p.layout, p.timeout, mem) {
            self.work.discard_all(mem.touched(), mem.into_segments());
            return self
                .clients
                .reply(ci, req_id, Reply::Error(ErrorCode::NoResources), &[]);
        }
        let payer = self.udm_payer(ci);
        let job = self.udm.jobs.get_mut(&id).expect("just entered");
        job.payer = payer;
        let _ = self.poller.add_edge(
            job.doorbell.fd().as_raw_fd(),
            Token::UdmDoorbell(id as usize),
        );
        self.counters.engine(EngineCounter::UdmJobs, 1);
        let r = Reply::UdmJob {
            job: id,
            key: job.key,
        };
        self.clients.reply(ci, req_id, r, &[]);
    }

    /// Whether client `ci`'s process may make one more job (its jobs,
    /// made or being made, below `client_udm_jobs`): the refusal
    /// (counted) if not.
    pub(crate) fn check_udm_jobs(&self, ci: ClientId) -> Result<(), ErrorCode> {
        let key = self.clients.proc_key(ci);
        let made = self
            .udm
            .jobs
            .values()
            .filter(|j| Some(j.payer.key) == key)
            .count();
        let making = self
            .work
            .pending_jobs()
            .iter()
            .filter(|p| self.clients.proc_key(p.client) == key)
            .count();
        if made + making >= self.cfg.client_udm_jobs as usize {
            self.counters.engine(EngineCounter::QuotaRefusedUdmJobs, 1);
            return Err(ErrorCode::ObjectQuota);
        }
        Ok(())
    }

    /// Whether client `ci`'s process may join one more node (its joined
    /// nodes, over every job and connection, below `client_udm_nodes`):
    /// the refusal (counted) if not.
    fn check_udm_nodes(&self, ci: ClientId) -> Result<(), ErrorCode> {
        if nodes_of(self.udm, self.clients, ci) >= self.cfg.client_udm_nodes as usize {
            self.counters.engine(EngineCounter::QuotaRefusedUdmNodes, 1);
            return Err(ErrorCode::ObjectQuota);
        }
        Ok(())
    }

    /// Whom a job made for client `ci` is charged to: its process and
    /// user, for as long as the job lives.
    pub(crate) fn udm_payer(&self, ci: ClientId) -> Payer {
        Payer {
            key: self.clients.proc_key(ci).unwrap_or((0, ci)),
            uid: self.clients.uid(ci).unwrap_or(u32::MAX),
        }
    }

    /// Grant rank `rank` of job `job` to client `ci`: the descriptors to
    /// send it (job segment, node segment, virtual buffer, doorbell).
    pub(crate) fn udm_join(
        &mut self,
        ci: ClientId,
        job: u32,
        key: u64,
        rank: u32,
    ) -> Result<Vec<OwnedFd>, ErrorCode> {
        let pid = self.clients.pid(ci).unwrap_or(0);
        let j = self.udm.jobs.get(&job).ok_or(ErrorCode::NoSuchJob)?;
        if j.key != key {
            return Err(ErrorCode::NoSuchJob);
        }
        match j.nodes.get(rank as usize) {
            Some(n) if n.state == UDM_NODE_FREE => {}
            _ => return Err(ErrorCode::RankTaken),
        }
        self.check_udm_nodes(ci)?;
        let j = self.udm.jobs.get_mut(&job).ok_or(ErrorCode::NoSuchJob)?;
        let (nseg, buf) = j.node_fds(rank).ok_or(ErrorCode::RankTaken)?;
        let dup = |f: &std::os::fd::OwnedFd| f.try_clone().map_err(|_| ErrorCode::NoResources);
        let fds = vec![
            dup(j.seg.fd())?,
            dup(nseg.fd())?,
            dup(buf.fd())?,
            dup(j.doorbell.fd())?,
        ];
        let n = &mut j.nodes[rank as usize];
        n.state = UDM_NODE_JOINED;
        n.client = Some(ci);
        n.pid = pid;
        let line = j.line(rank);
        line.pid.store(pid, Ordering::Relaxed);
        line.state.store(UDM_NODE_JOINED, Ordering::Release);
        j.watch(rank, std::time::Instant::now());
        Ok(fds)
    }

    /// Node `rank` of `job` is gone; the job too once nobody holds it.
    fn udm_node_gone(&mut self, job: u32, rank: u32) {
        if let Some(j) = self.udm.jobs.get_mut(&job) {
            j.node_gone(rank);
        }
        self.udm_retire(job);
    }

    /// Forget job `job` if its creator and every node are gone.
    pub(crate) fn udm_retire(&mut self, job: u32) {
        if self.udm.jobs.get(&job).is_some_and(|j| j.finished()) {
            if let Some(mut j) = self.udm.jobs.remove(&job) {
                self.poller.remove(j.doorbell.fd().as_raw_fd());
                let released = std::mem::take(&mut j.released);
                if !released.is_empty() {
                    self.work.release_all(released);
                }
                // Unmapping a large job segment takes a while: off the loop.
                let size = JobMemory::touched_by(&j.layout);
                self.work.discard_all(size, j.into_segments());
            }
        }
    }

    /// Everything client `ci` held of UDM: its nodes are gone (their
    /// senders get an error, their buffers' memory is released), the jobs
    /// it created end once their nodes are gone.
    pub(crate) fn drop_client_udm(&mut self, ci: ClientId) {
        let ids: Vec<u32> = self.udm.jobs.keys().copied().collect();
        for id in ids {
            let Some(j) = self.udm.jobs.get_mut(&id) else {
                continue;
            };
            if j.owner == ci {
                j.owner_alive = false;
            }
            j.scheduler_gone(ci);
            let mine: Vec<u32> = (0..j.layout.nodes)
                .filter(|&r| j.nodes[r as usize].client == Some(ci))
                .collect();
            for r in mine {
                j.node_gone(r);
            }
            self.udm_retire(id);
        }
    }

    /// Fill the UDM slots of the counters segment (for `unet stat`): the
    /// first `UDM_SLOTS` nodes by job and rank.
    pub(crate) fn fill_udm_slots(&self) {
        let c = self.counters;
        let mut ids: Vec<u32> = self.udm.jobs.keys().copied().collect();
        ids.sort_unstable();
        let mut rows = ids.iter().flat_map(|id| {
            let j = &self.udm.jobs[id];
            (0..j.layout.nodes).map(move |r| (*id, j, r))
        });
        for i in 0..UDM_SLOTS {
            let Some(slot) = c.udm_slot(i) else {
                break;
            };
            let Some((id, j, r)) = rows.next() else {
                slot.live.store(0, Ordering::Relaxed);
                continue;
            };
            let n = &j.nodes[r as usize];
            let line = j.line(r);
            let mode = line.mode.load(Ordering::Relaxed);
            let mode = if n.state == UDM_NODE_GONE || mode & UDM_MODE_GONE != 0 {
                2
            } else if n.state == UDM_NODE_REMOTE {
                3
            } else if mode & UDM_MODE_DIVERT != 0 {
                1
            } else {
                0
            };
            slot.job.store(id, Ordering::Relaxed);
            slot.rank.store(r, Ordering::Relaxed);
            slot.pid.store(n.pid, Ordering::Relaxed);
            slot.mode.store(mode, Ordering::Relaxed);
            slot.nodes.store(j.layout.nodes, Ordering::Relaxed);
            for (k, v) in n.counters().iter().enumerate() {
                slot.counters[k].store(*v, Ordering::Relaxed);
            }
            let own = [
                line.fast_msgs.load(Ordering::Relaxed),
                line.buffered_taken.load(Ordering::Relaxed),
                line.switch_queue_full.load(Ordering::Relaxed),
                line.overflow_holds.load(Ordering::Relaxed),
                line.upcalls.load(Ordering::Relaxed),
                line.no_handler.load(Ordering::Relaxed),
                line.dispose_failures.load(Ordering::Relaxed),
                line.handler_panics.load(Ordering::Relaxed),
            ];
            for (k, v) in own.iter().enumerate() {
                slot.client[k].store(*v, Ordering::Relaxed);
            }
            slot.live.store(1, Ordering::Release);
        }
    }
}
