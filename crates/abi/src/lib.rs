//! The shared-memory ABI of unet: every byte that a client, the engine, a
//! direct-path peer or `unet stat` reads or writes in shared memory is laid
//! out here, and only here.
//!
//! Java and C bindings follow this module field by field; the golden vector
//! ([`golden`]) is a small segment built by this module whose bytes every
//! language checks.
//!
//! All multi-byte fields are little-endian (the native order of every
//! supported host) and naturally aligned. Positions in rings are `u64` byte or
//! entry counts that only grow, so they never wrap in practice and an index is
//! `position % capacity` (capacities are powers of two).
//!
//! # Where each layout lives
//!
//! - [`endpoint`]: the endpoint segment (header, the descriptors of its
//!   four rings, geometry and layout);
//! - [`ring`]: the ring header every descriptor ring starts with, its
//!   protocol and [`ring::Ring`], the view that reads and writes it;
//! - [`conn`]: the direct connection segment (its header and the
//!   records of its byte rings);
//! - [`counters`]: the counters segment and the client counters;
//! - [`via`]: the segment of a VI the engine carries;
//! - [`udm`]: UDM's job and node segments, virtual buffers and the
//!   header word of a message;
//! - [`spine`]: SPINE's active-message header and its host framing;
//! - [`peer`]: the peer segment that joins two adapters (SPINE's
//!   peer-to-peer message queues);
//! - [`copy`]: copying into and out of shared memory;
//! - [`view`]: the checked mappings of an endpoint's and a VI's rings,
//!   of a direct connection's segment, and of UDM's job and node
//!   segments;
//! - [`golden`]: the golden test vector.
//!
//! Every public item of `endpoint`, `conn` and `counters`, and the
//! ring header, is also at the crate's root (`unet_abi::EndpointHeader`).

#![no_std]
#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

/// A counter enum with its slot numbers and the names `unet stat` shows
/// (used by this module and its submodules).
macro_rules! counter_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $n:expr => $s:expr),* $(,)? }) => {
        $(#[$m])*
        #[repr(usize)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name { $($(#[$vm])* $v = $n),* }
        impl $name {
            /// Every counter, in slot order.
            pub const ALL: &'static [$name] = &[$($name::$v),*];
            /// Name shown by `unet stat`.
            pub const fn name(self) -> &'static str { match self { $($name::$v => $s),* } }
        }
    };
}

pub mod conn;
pub mod copy;
pub mod counters;
pub mod endpoint;
pub mod golden;
pub mod peer;
pub mod ring;
pub mod spine;
pub mod udm;
pub mod via;
pub mod view;

pub use conn::*;
pub use counters::*;
pub use endpoint::*;
pub use ring::{ring_bytes, RingHeader, RING_HEADER_SIZE};
pub use via::{
    Reliability, ViCompl, ViCounter, ViDesc, ViError, ViHeader, ViLayout, ViSegDesc, VI_COUNTERS,
    VI_HEADER_SIZE, VI_MAGIC, VI_MAX_SEGMENTS, VI_MAX_TRANSFER,
};

/// ABI version; bump on any layout change.
pub const VERSION: u32 = 1;

/// Size of a cache line, the unit of separation between fields written by
/// different parties.
pub const CACHE_LINE: usize = 64;
/// Page size assumed for segment geometry.
pub const PAGE: usize = 4096;
/// Largest message unet carries on any path.
pub const MAX_MESSAGE: usize = 1 << 20;

/// Marker for types that may live in shared memory: `#[repr(C)]`, no
/// pointers, no padding that matters, valid for any bit pattern written by a
/// hostile peer (integers and atomics only).
///
/// # Safety
/// Implementors must be plain old data: every bit pattern is a valid value.
pub unsafe trait ShmSafe: Copy {}

// SAFETY: an integer.
unsafe impl ShmSafe for u32 {}
