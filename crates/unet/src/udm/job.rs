//! Making and joining a UDM job: how a job is made ([`JobConfig`]), the
//! ticket its processes join with ([`JobTicket`]), the session's calls
//! that create a job and join it as a node, and a scheduler's notices
//! about the job's nodes ([`Session::udm_schedule`], answered with
//! [`Advice`]).

use std::time::Duration;

use unet_abi::udm::{UDM_BUFFER_DEFAULT, UDM_FAST_CAP_DEFAULT};
use unet_control::{Reply, Request};

use super::Node;
use crate::{Error, Session};

/// How a job is made.
#[derive(Clone, Debug)]
pub struct JobConfig {
    /// Nodes in the job (1..=[`MAX_NODES`](super::MAX_NODES)).
    pub nodes: u32,
    /// Messages each fast ring holds (one ring per sender and receiver; a
    /// power of two in 2..=1024; default 8): the paper's network interface
    /// buffer. A sender that finds its ring full waits (`injectc`: not
    /// now), as a blocked network makes it.
    pub fast_queue: u32,
    /// Bytes of each node's virtual buffer (a power of two, 4 KiB to
    /// 1 GiB; default 1 MiB, 8192 messages): reserved, taken only as used,
    /// and the limit of overflow control.
    pub buffer_size: u64,
    /// How long a node with messages waiting may extract none (atomic,
    /// blocked in its own inject, stopped, or simply not extracting)
    /// before the engine switches it to buffered mode (default 2 ms).
    pub atomicity_timeout: Duration,
}

impl Default for JobConfig {
    fn default() -> Self {
        JobConfig {
            nodes: 2,
            fast_queue: UDM_FAST_CAP_DEFAULT,
            buffer_size: UDM_BUFFER_DEFAULT,
            atomicity_timeout: Duration::from_millis(2),
        }
    }
}

/// What a process needs to join a job: its id and key. Pass it to the
/// job's other processes (it prints as `JOB:KEY` and parses back); whoever
/// holds it may take a free rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct JobTicket {
    /// The job's id in its engine.
    pub job: u32,
    /// The job's key.
    pub key: u64,
    /// Nodes in the job.
    pub nodes: u32,
}

impl std::fmt::Display for JobTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{:016x}:{}", self.job, self.key, self.nodes)
    }
}

impl std::str::FromStr for JobTicket {
    type Err = String;
    /// `JOB:KEY:NODES` (the key in hex), as `Display` prints it.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut it = s.split(':');
        let (Some(j), Some(k), Some(n), None) = (it.next(), it.next(), it.next(), it.next()) else {
            return Err(format!("{s:?} is not JOB:KEY:NODES"));
        };
        Ok(JobTicket {
            job: j.parse().map_err(|e| format!("job {j:?}: {e}"))?,
            key: u64::from_str_radix(k, 16).map_err(|e| format!("key {k:?}: {e}"))?,
            nodes: n.parse().map_err(|e| format!("nodes {n:?}: {e}"))?,
        })
    }
}

/// Overflow control's advice, the engine's answer to a scheduler's
/// notice ([`Session::udm_schedule`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Advice {
    /// The nodes whose virtual buffers are near their limit (three
    /// quarters full or more, or holding senders back), a bit per rank:
    /// a scheduler should let them run (the UDM paper: gang schedule the
    /// job) before their senders are held.
    pub near_full: u64,
    /// The nodes the job's scheduler has descheduled now.
    pub descheduled: u64,
}

impl Session {
    /// A scheduler's notice (the UDM paper's section 4.2): the nodes of
    /// the job in `ranks` (a bit per rank) are descheduled (`running`
    /// false: the engine switches their input to buffered mode at once)
    /// or run again (`running` true: what was diverted to them meanwhile
    /// reaches their buffers at once). Only a process of the user that
    /// made the job may send it ([`Error::Rejected`], saying why,
    /// otherwise; a wrong key is `NoSuchJob`).
    /// While a job has a scheduler, the engine never reads `/proc` for
    /// its nodes. The answer is overflow control's [`Advice`].
    pub fn udm_schedule(
        &self,
        ticket: JobTicket,
        ranks: u64,
        running: bool,
    ) -> Result<Advice, Error> {
        let req = Request::UdmSchedule {
            job: ticket.job,
            key: ticket.key,
            ranks,
            running,
        };
        match self.inner.request(&req)?.0 {
            Reply::UdmAdvice {
                job,
                near_full,
                descheduled,
            } if job == ticket.job => Ok(Advice {
                near_full,
                descheduled,
            }),
            Reply::Error(c) => Err(c.into()),
            Reply::Rejected(why) => Err(Error::Rejected(why)),
            r => Err(Error::Protocol(format!(
                "unexpected answer to a udm schedule notice: {r:?}"
            ))),
        }
    }

    /// Create a UDM job; join it with [`Session::udm_join`] (from this
    /// process or others, with the ticket). The job ends when this session
    /// closes and every node has left.
    pub fn udm_create_job(&self, cfg: &JobConfig) -> Result<JobTicket, Error> {
        let us = cfg.atomicity_timeout.as_micros().min(u32::MAX as u128) as u32;
        let req = Request::UdmCreateJob {
            nodes: cfg.nodes,
            fast_cap: cfg.fast_queue,
            buffer_size: cfg.buffer_size,
            atomicity_timeout_us: us,
        };
        match self.inner.request(&req)?.0 {
            Reply::UdmJob { job, key } => Ok(JobTicket {
                job,
                key,
                nodes: cfg.nodes,
            }),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to udm create: {r:?}"
            ))),
        }
    }

    /// Join a job as node `rank` (each rank once) through this session's
    /// engine, the job being `home`'s (its UDP address; None: this
    /// engine's): the job then spans both engines (`docs/udm.md`, "Across
    /// engines"). [`Node::job`] is the job's id at this engine.
    pub fn udm_join_at(
        &self,
        ticket: JobTicket,
        home: Option<std::net::SocketAddr>,
        rank: u32,
    ) -> Result<Node, Error> {
        let Some(home) = home else {
            return self.udm_join(ticket, rank);
        };
        let req = Request::UdmJoinRemote {
            home,
            job: ticket.job,
            key: ticket.key,
            rank,
        };
        // The home engine answers within its join retries (about 2 s).
        match self.inner.request_waiting(&req, Duration::from_secs(5))? {
            (Reply::UdmJoined { job, rank: got }, fds) if got == rank => {
                Node::open(self.clone(), job, rank, fds)
            }
            (Reply::Error(c), _) => Err(c.into()),
            (r, _) => Err(Error::Protocol(format!(
                "unexpected answer to udm join: {r:?}"
            ))),
        }
    }

    /// Join a job as node `rank` (each rank once).
    pub fn udm_join(&self, ticket: JobTicket, rank: u32) -> Result<Node, Error> {
        let req = Request::UdmJoin {
            job: ticket.job,
            key: ticket.key,
            rank,
        };
        let (r, fds) = self.inner.request(&req)?;
        match r {
            Reply::UdmJoined { job, rank: got } if job == ticket.job && got == rank => {
                Node::open(self.clone(), job, rank, fds)
            }
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to udm join: {r:?}"
            ))),
        }
    }
}
