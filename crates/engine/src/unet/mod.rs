//! U-Net: the endpoints and their data path (U-Net/SLE). Send descriptors
//! are taken from endpoint rings, checked, and sent by route: delivered
//! locally, over a direct connection's shared rings, or over a remote
//! channel on the wire; buffered endpoints keep what their free queue
//! cannot take in a virtual buffer (`backlog`). Endpoints, channels and
//! applets are set up by `setup`. Active messages for SPINE wait in
//! `am`'s inbox;, the one module of U-Net that control
//! hands requests to.

pub(crate) mod am;
pub(crate) mod applets;
pub(crate) mod backlog;
pub(crate) mod datapath;
pub(crate) mod direct;
pub(crate) mod endpoints;
pub(crate) mod part;
pub(crate) mod pending;
pub(crate) mod remote;
pub(crate) mod routes;
pub(crate) mod setup;
