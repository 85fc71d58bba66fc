//! Control: the control server (clients, their sockets and credentials),
//! what each set-up request does and the reclaiming of a client that
//! goes, and the set-up threads that do the work whose cost grows with
//! the memory it touches. Each system's own set-up requests live in its
//! folder (`via/setup.rs`, `udm/setup.rs`): the set-up here hands a
//! request to that system's set-up half (`ViaSetup`, `UdmSetup`), which
//! borrows the parts it changes and reaches the clients and the rest of
//! the engine only through `crate::clients` and the small traits its own
//! folder defines; no system imports this folder.

pub(crate) mod server;
pub(crate) mod setup;
pub(crate) mod setup_thread;
pub(crate) mod turns;
