//! The engine's clients as a system's set-up half sees them: who a client
//! is (its process and its user), where its replies go and which
//! endpoints it owns ([`Clients`], the control server behind it), and what its process and user hold against
//! their memory limits ([`Tally`], with [`Charges`] for what the parts of
//! the engine outside the system hold). It sits below every system, so
//! that a system's set-up module answers its requests without reaching
//! up to control; it is the only module of a system that uses this one.

use std::os::fd::RawFd;

use unet_abi::EngineCounter;
use unet_control::{ErrorCode, Reply};

use crate::config::EngineConfig;
use crate::counters::Counters;

#[cfg(test)]
pub(crate) mod fake;

/// A client: one control connection (its index in the control server).
pub(crate) type ClientId = usize;

/// Which process a client is, for the limits counted per process: its
/// process id, or (when the kernel could not tell it) the connection
/// itself (`(0, connection)`).
pub(crate) type ProcKey = (u32, usize);

/// The clients and their replies (the control server).
pub(crate) trait Clients {
    /// Send a reply (or, with `req_id` 0, a notice) to client `ci`, with
    /// the descriptors `fds`.
    fn reply(&self, ci: ClientId, req_id: u32, r: Reply, fds: &[RawFd]);
    /// Which process client `ci` is; None if there is no such client.
    fn proc_key(&self, ci: ClientId) -> Option<ProcKey>;
    /// Client `ci`'s process id (0 when unknown); None if there is no
    /// such client.
    fn pid(&self, ci: ClientId) -> Option<u32>;
    /// Client `ci`'s user id (`u32::MAX` when unknown); None if there is
    /// no such client.
    fn uid(&self, ci: ClientId) -> Option<u32>;
    /// Client slots (live or not): indices are `0..slots()`.
    fn slots(&self) -> usize;
    /// Client `ci` owns the endpoint at table index `idx` now: it is
    /// closed when the client goes (nothing if there is no such client).
    fn endpoint_owned(&mut self, ci: ClientId, idx: usize);
    /// The endpoint at table index `idx` is closed: client `ci` no longer
    /// owns it (nothing if there is no such client).
    fn endpoint_gone(&mut self, ci: ClientId, idx: usize);
}

/// What one client's process (and its user) holds: what the limits are
/// checked against.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Usage {
    /// Bytes of shared memory held by the process.
    pub memory: u64,
    /// Endpoints held by the process (with those being made).
    pub endpoints: u32,
    /// Bytes of shared memory held by the user's processes.
    pub user_memory: u64,
}

impl Usage {
    /// Whether the process and user may take `more` bytes of shared
    /// memory: the refusal (counted) if not.
    pub(crate) fn check(
        &self,
        more: u64,
        cfg: &EngineConfig,
        counters: &Counters,
    ) -> Result<(), ErrorCode> {
        if self.memory.saturating_add(more) > cfg.client_memory {
            counters.engine(EngineCounter::QuotaRefusedMemory, 1);
            return Err(ErrorCode::QuotaExceeded);
        }
        if self.user_memory.saturating_add(more) > cfg.user_memory {
            counters.engine(EngineCounter::QuotaRefusedUserMemory, 1);
            return Err(ErrorCode::UserQuota);
        }
        Ok(())
    }
}

/// The count of what one client's process and user hold, made by adding
/// every part's charges ([`Tally::add`]).
pub(crate) struct Tally<'c> {
    clients: &'c dyn Clients,
    key: Option<ProcKey>,
    uid: u32,
    usage: Usage,
}

impl<'c> Tally<'c> {
    /// Counting for client `ci`; None if there is no such client (it
    /// holds nothing).
    pub(crate) fn new(clients: &'c dyn Clients, ci: ClientId) -> Option<Tally<'c>> {
        let uid = clients.uid(ci)?;
        Some(Tally {
            clients,
            key: clients.proc_key(ci),
            uid,
            usage: Usage::default(),
        })
    }

    /// `bytes` held by client `owner` (an endpoint's, if `endpoint`).
    pub(crate) fn add(&mut self, owner: ClientId, bytes: u64, endpoint: bool) {
        let u = &mut self.usage;
        if self.clients.proc_key(owner) == self.key {
            u.memory = u.memory.saturating_add(bytes);
            u.endpoints += endpoint as u32;
        }
        if self.clients.uid(owner) == Some(self.uid) {
            u.user_memory = u.user_memory.saturating_add(bytes);
        }
    }

    /// `bytes` charged to the process `key` and the user `uid` (a UDM
    /// job's, charged for as long as it lives).
    pub(crate) fn add_payer(&mut self, key: ProcKey, uid: u32, bytes: u64) {
        let u = &mut self.usage;
        if Some(key) == self.key {
            u.memory = u.memory.saturating_add(bytes);
        }
        if uid == self.uid {
            u.user_memory = u.user_memory.saturating_add(bytes);
        }
    }

    /// What was counted.
    pub(crate) fn usage(&self) -> Usage {
        self.usage
    }
}

/// What the parts of the engine outside one system hold: a system's
/// set-up adds these to its own charges to check a client's memory
/// limits (control, which holds every part, implements it).
pub(crate) trait Charges {
    /// Add the charges of the parts outside the system to `t`.
    fn charge(&self, t: &mut Tally<'_>);
}

/// What client `ci`'s process and user hold: `parts` add their charges.
pub(crate) fn usage(clients: &dyn Clients, ci: ClientId, parts: impl FnOnce(&mut Tally)) -> Usage {
    let Some(mut t) = Tally::new(clients, ci) else {
        return Usage::default();
    };
    parts(&mut t);
    t.usage()
}
