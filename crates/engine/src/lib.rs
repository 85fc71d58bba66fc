//! placeholder
pub mod wire;
