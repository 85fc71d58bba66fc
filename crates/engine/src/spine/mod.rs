//! SPINE: extensions as active-message handlers on the adapter (the
//! SPINE paper, sections 3 and 6). So far its memory (`msgs.rs`: the
//! message and bulk buffer pools, handles, keeps) and its event queue
//! (`events.rs`: event types, priorities, drops); the runtime that uses
//! them comes next.

// Used by the runtime's part, which lands next.
#[allow(dead_code)]
pub(crate) mod events;
#[allow(dead_code)]
pub(crate) mod msgs;
