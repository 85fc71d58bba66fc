//! Route tables for SPINE extensions: the host application builds a
//! table (an LC-trie's export, `unet_router::LcTrie::to_le_bytes`) and
//! hands it to an extension under a number; the extension's handlers read
//! it with `Spine.table(n, part)`. A newer load of the same number
//! replaces the table between two of the extension's invocations, so an
//! update switches atomically (the SPINE paper's router, section 5.2).

use std::os::fd::AsRawFd;

use unet_control::{Reply, Request};
use unet_sys as sys;

use crate::{Error, Session};

/// A table the extension now has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableLoaded {
    /// Its version: tables loaded into this extension, counted from 1
    /// (what `Spine.table(n, TABLE_META)[1]` reads).
    pub version: u32,
    /// Bytes its arrays take, charged to the extension's table quota.
    pub bytes: u64,
}

impl Session {
    /// Hand extension `ext` (one of this user's) `table` under number `n`
    /// (0 to 15), replacing the one it had. Refused with
    /// [`Error::Rejected`] and the exact reason: bytes that are not a
    /// whole, consistent export, a number out of range, or over the
    /// table quotas (32 MiB an extension and 64 MiB the extensions of a
    /// process, replaced tables still referenced included).
    pub fn load_table(&self, ext: u32, n: u32, table: &[u8]) -> Result<TableLoaded, Error> {
        let len = u32::try_from(table.len())
            .map_err(|_| Error::Rejected(format!("a table of {} bytes", table.len())))?;
        let seg = sys::Segment::create("unet-table", table.len().max(1))?;
        // The fresh segment has at least table.len() bytes.
        let copied = crate::shm::write(&seg, 0, table);
        debug_assert!(copied);
        let req = Request::SpineTable { ext, table: n, len };
        match self
            .inner
            .request_with_fds(&req, &[seg.fd().as_raw_fd()])?
            .0
        {
            Reply::SpineTableLoaded { version, bytes } => Ok(TableLoaded { version, bytes }),
            Reply::Rejected(why) => Err(Error::Rejected(why)),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to a table load: {r:?}"
            ))),
        }
    }
}
