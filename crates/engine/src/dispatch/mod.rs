//! The loop: the dispatcher that owns every part of the engine and turns
//! them in one thread (SPINE section 3.2), several engines' loops taking
//! turns on one thread (`group`), and invoker mode, which drives the same
//! loop on the caller's thread. The epoll set it sleeps on is
//! `crate::poller`, below every part.

pub(crate) mod dispatcher;
pub(crate) mod group;
pub mod invoker;
