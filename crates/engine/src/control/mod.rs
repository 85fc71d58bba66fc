//! Control: the control server (clients, their sockets and credentials),
//! what each set-up request does and the reclaiming of a client that
//! goes, and the set-up threads that do the work whose cost grows with
//! the memory it touches. Each system's own set-up requests live in its
//! folder (`via/setup.rs`, `udm/setup.rs`); only those modules talk to
//! the set-up code here.

pub(crate) mod server;
pub(crate) mod setup;
pub(crate) mod setup_thread;
pub(crate) mod turns;
