//! SPINE: extensions as active-message handlers on the adapter, and the
//! peer-to-peer message queues between adapters on one host.

pub(crate) mod peer;
