//! Clients for unit tests: each client is a process of its own (process
//! id `100 + client`) of the user the test names, and the replies they
//! were sent are kept.

use std::cell::RefCell;
use std::os::fd::RawFd;

use unet_control::Reply;

use super::{ClientId, Clients, ProcKey};

/// Clients of the users `uids` (by client id), the replies they got.
pub(crate) struct Users {
    pub uids: Vec<u32>,
    /// Client, reply and how many descriptors it carried.
    pub replies: RefCell<Vec<(ClientId, Reply, usize)>>,
}

impl Users {
    /// Clients `0..uids.len()`, client `i` of user `uids[i]`.
    pub(crate) fn new(uids: Vec<u32>) -> Users {
        Users {
            uids,
            replies: RefCell::new(Vec::new()),
        }
    }
}

impl Clients for Users {
    fn reply(&self, ci: ClientId, _req_id: u32, r: Reply, fds: &[RawFd]) {
        self.replies.borrow_mut().push((ci, r, fds.len()));
    }
    fn proc_key(&self, ci: ClientId) -> Option<ProcKey> {
        self.pid(ci).map(|pid| (pid, usize::MAX))
    }
    fn pid(&self, ci: ClientId) -> Option<u32> {
        (ci < self.uids.len()).then_some(ci as u32 + 100)
    }
    fn uid(&self, ci: ClientId) -> Option<u32> {
        self.uids.get(ci).copied()
    }
    fn slots(&self) -> usize {
        self.uids.len()
    }
    fn endpoint_owned(&mut self, _ci: ClientId, _idx: usize) {}
    fn endpoint_gone(&mut self, _ci: ClientId, _idx: usize) {}
}
