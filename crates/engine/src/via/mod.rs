//! VIA: memory regions, VIs and their discriminators (`vias`), the VIs the
//! engine carries to other engines (`vi_path`: reliability, fragments,
//! the receiving side), moved on the loop's turns (`via_loop`), and the
//! set-up requests that make and break them (`setup`, with the VIs
//! across engines in `setup/engines.rs`).

pub(crate) mod setup;
pub(crate) mod vi_path;
pub(crate) mod via_loop;
pub(crate) mod vias;
