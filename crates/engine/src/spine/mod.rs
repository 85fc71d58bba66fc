//! SPINE (section 3 and 6): extensions as active-message handlers on the
//! engine. This folder holds its runtime; so far the event graph's
//! recorder (`trace.rs`).

pub(crate) mod trace;
