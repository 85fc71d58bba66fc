//! SPINE's IP router (the SPINE paper, section 5.2): routing tables
//! ([`table`]), the LC-trie lookup the adapters run ([`lctrie`], walked the
//! same way by the router extension, `extensions/router/Router.java`), and a plain binary trie as
//! its reference and baseline ([`bintrie`]), and the trie's arrays put in
//! that extension's fields in a JIVE VM ([`extension`]). `unet bench
//! router lookup` measures them beside published crates.
//!
//! Modules import only those listed before them: `table`, `bintrie`,
//! `lctrie`, `extension`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bintrie;
pub mod extension;
pub mod lctrie;
pub mod table;

pub use bintrie::BinTrie;
pub use lctrie::{LcTrie, Params};
pub use table::Route;
