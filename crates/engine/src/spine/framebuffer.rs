//! Framebuffers an extension writes (the SPINE paper, section 5.1: the
//! video extension places arriving image data straight into the frame
//! buffer). A host process asks its engine for a framebuffer for one of
//! its own extensions: a shared-memory image of `width` by `height`
//! pixels, 4 bytes each, row after row, that the engine makes (a memory
//! file whose size is sealed, so that no client can shrink it under the
//! engine's mapping), maps for the extension and hands the client to map
//! read-only or read-write. The extension's handlers copy bytes of a bulk
//! buffer into it with `Spine.fbWrite(fb, fbOffset, buf, bufOffset,
//! len)` and set a range to one pixel value with `Spine.fbFill(fb,
//! fbOffset, len, value)` (`natives.rs`); every offset and length is checked against the
//! framebuffer and the buffer, and a write out of range writes nothing:
//! it returns [`E_RANGE`] and is counted (`refused`). Nothing is ever
//! written outside the pixels.
//!
//! After the pixels (at [`Framebuffer::counters_at`], a multiple of 64)
//! the engine keeps the framebuffer's counters for the client to read,
//! little-endian `u64`s: writes done, bytes written, writes refused. The
//! engine only stores them, never reads them back.
//!
//! Caps: [`FBS_PER_EXT`] framebuffers an extension, [`FB_BYTES_MAX`]
//! bytes of pixels each, [`FB_SIDE_MAX`] pixels a side; each is charged
//! to the memory quota of the process that owns the extension (as its
//! endpoints are) and freed when the extension goes. A refusal names the
//! cap or the quota.
//!
//! A second, read-only view of a framebuffer ([`view`]) goes to any
//! process of the extension's user (a viewer beside the host
//! application; root may view any): the engine re-opens the memory file
//! read-only (`/proc/self/fd/N`, `O_RDONLY`), so that the descriptor it
//! hands maps only read-only. A view costs no quota (the pixels are
//! charged to the owner) and the engine keeps nothing for it, so there
//! is nothing to cap; once the extension goes no view is given (one
//! already mapped stays readable until dropped, as the owner's does).

#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use unet_control::{ErrorCode, Reply};
use unet_sys::Segment;

use crate::clients::{ClientId, Clients, Usage};
use crate::config::EngineConfig;
use crate::spine::SpinePart;

/// Framebuffers one extension may have.
pub(crate) const FBS_PER_EXT: usize = 2;
/// Bytes of pixels one framebuffer may have: 64 MiB (a 4096 by 4096
/// image).
pub(crate) const FB_BYTES_MAX: u64 = 64 << 20;
/// Pixels a side (width or height) at most.
pub(crate) const FB_SIDE_MAX: u32 = 16384;
/// Bytes a pixel.
pub(crate) const PIXEL_BYTES: u64 = 4;
/// What `fbWrite` and `fbFill` return for a framebuffer the extension does not have,
/// or a range outside the framebuffer or the buffer.
pub(crate) const E_RANGE: i32 = -6;

/// Counters after the pixels: writes, bytes, refused.
const COUNTERS: usize = 3;
/// Bytes kept for the counters.
const COUNTERS_BYTES: usize = 64;

/// One framebuffer: the engine's mapping and what it counted.
pub(crate) struct Framebuffer {
    seg: Segment,
    /// Bytes of pixels (`width * height * 4`).
    pixels: usize,
    /// Pixels a row, and rows.
    pub width: u32,
    pub height: u32,
    /// The client whose process it is charged to.
    pub owner: ClientId,
    writes: u64,
    bytes: u64,
    refused: u64,
}

impl Framebuffer {
    /// Where the counters start: the pixels' length rounded up to 64.
    pub(crate) fn counters_at(pixels: usize) -> usize {
        pixels.div_ceil(COUNTERS_BYTES) * COUNTERS_BYTES
    }

    /// The segment's length for `pixels` bytes of pixels.
    fn segment_len(pixels: usize) -> usize {
        Self::counters_at(pixels) + COUNTERS_BYTES
    }

    /// What it is charged: its whole segment.
    fn charge(&self) -> u64 {
        self.seg.len() as u64
    }

    /// Store the counters where the client reads them.
    fn publish(&self) {
        let at = Self::counters_at(self.pixels);
        for (i, v) in [self.writes, self.bytes, self.refused]
            .into_iter()
            .enumerate()
            .take(COUNTERS)
        {
            if let Some(p) = self.seg.at(at + 8 * i, 8) {
                // SAFETY: `p` is 8 bytes inside the mapping (checked by
                // `at`) at a multiple of 8 from its page-aligned start, so
                // aligned for an AtomicU64; the memory is shared, and an
                // atomic store is sound whatever another process does
                // with it.
                let a = unsafe { AtomicU64::from_ptr(p.as_ptr().cast::<u64>()) };
                a.store(v.to_le(), Ordering::Relaxed);
            }
        }
    }

    /// Copy `src` to `off` bytes into the pixels: the length copied, or
    /// [`E_RANGE`] (counted, nothing written) when it would not lie
    /// wholly inside them.
    pub(crate) fn write(&mut self, off: i32, src: &[u8]) -> i32 {
        let fits = usize::try_from(off)
            .ok()
            .and_then(|o| Some((o, o.checked_add(src.len())?)))
            .filter(|&(_, end)| end <= self.pixels);
        let Some((o, _)) = fits else {
            self.refused += 1;
            self.publish();
            return E_RANGE;
        };
        if let Some(dst) = self.seg.at(o, src.len()) {
            // SAFETY: `[o, o + src.len())` lies inside the pixels, inside
            // the mapping (checked above and by `at`); `src` is the
            // runtime's own buffer, not in this segment, so they do not
            // overlap. The memory is shared with the client, whose
            // accesses never make a byte copy unsound.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_ptr(), src.len()) };
        }
        self.writes += 1;
        self.bytes += src.len() as u64;
        self.publish();
        src.len() as i32
    }

    /// Set `len` bytes from `off` into the pixels to `value`'s bytes
    /// (little-endian, a pixel at a time from `off`): `len`, or
    /// [`E_RANGE`] (counted, nothing written) when they would not lie
    /// wholly inside the pixels.
    pub(crate) fn fill(&mut self, off: i32, len: i32, value: i32) -> i32 {
        let fits = usize::try_from(off)
            .ok()
            .zip(usize::try_from(len).ok())
            .filter(|&(o, n)| o.checked_add(n).is_some_and(|end| end <= self.pixels));
        let Some((o, n)) = fits else {
            return self.refuse();
        };
        let pattern = value.to_le_bytes();
        let mut chunk = [0u8; 256];
        for (i, b) in chunk.iter_mut().enumerate() {
            *b = pattern[i % 4];
        }
        let mut done = 0;
        while done < n {
            let k = (n - done).min(chunk.len());
            // The pattern keeps its phase: every chunk but the last is a
            // multiple of 4 bytes.
            if let Some(dst) = self.seg.at(o + done, k) {
                // SAFETY: `[o + done, o + done + k)` lies inside the
                // pixels, inside the mapping (checked above and by `at`);
                // `chunk` is on this stack, not in the segment. The memory
                // is shared with the client, whose accesses never make a
                // byte copy unsound.
                unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), dst.as_ptr(), k) };
            }
            done += k;
        }
        self.writes += 1;
        self.bytes += n as u64;
        self.publish();
        len
    }

    /// Its memory file opened again read-only (through `/proc/self/fd`,
    /// so a new open file description): a mapping of it with
    /// `PROT_WRITE` fails.
    fn read_only(&self) -> std::io::Result<OwnedFd> {
        let path = format!("/proc/self/fd/{}", self.seg.fd().as_raw_fd());
        Ok(std::fs::File::open(path)?.into())
    }

    /// A refused write before the framebuffer could be reached (a range
    /// outside the buffer).
    pub(crate) fn refuse(&mut self) -> i32 {
        self.refused += 1;
        self.publish();
        E_RANGE
    }
}

/// Every extension's framebuffers, by extension slot.
#[derive(Default)]
pub(crate) struct Framebuffers {
    by_slot: Vec<Vec<Framebuffer>>,
    /// `fbWrite`s naming a framebuffer their extension does not have.
    pub no_such: u64,
}

impl Framebuffers {
    /// Framebuffer `n` of the extension in `slot`.
    pub(crate) fn get_mut(&mut self, slot: usize, n: i32) -> Option<&mut Framebuffer> {
        let n = usize::try_from(n).ok()?;
        self.by_slot.get_mut(slot)?.get_mut(n)
    }

    /// The extension in `slot` went: its framebuffers are unmapped (the
    /// memory goes with the client's last mapping).
    pub(crate) fn clear(&mut self, slot: usize) {
        if let Some(v) = self.by_slot.get_mut(slot) {
            v.clear();
        }
    }

    /// What each framebuffer charges, and to which client's process.
    pub(crate) fn charges(&self) -> impl Iterator<Item = (ClientId, u64)> + '_ {
        self.by_slot.iter().flatten().map(|f| (f.owner, f.charge()))
    }

    fn add(&mut self, slot: usize, fb: Framebuffer) -> usize {
        if self.by_slot.len() <= slot {
            self.by_slot.resize_with(slot + 1, Vec::new);
        }
        self.by_slot[slot].push(fb);
        self.by_slot[slot].len() - 1
    }

    fn count(&self, slot: usize) -> usize {
        self.by_slot.get(slot).map_or(0, Vec::len)
    }
}

/// Make a framebuffer of `width` by `height` for extension `ext`, asked
/// by client `ci`, whose process and user hold `usage` (every part's
/// charges, framebuffers included): answered with the segment's
/// descriptor, or refused by name.
#[allow(clippy::too_many_arguments)]
pub(crate) fn create(
    spine: &mut SpinePart,
    clients: &dyn Clients,
    cfg: &EngineConfig,
    counters: &crate::counters::Counters,
    usage: Usage,
    ci: ClientId,
    req_id: u32,
    (ext, width, height): (u32, u32, u32),
) {
    let r = make(
        spine,
        clients,
        cfg,
        counters,
        usage,
        ci,
        (ext, width, height),
    );
    match r {
        Ok((index, fd, len)) => clients.reply(
            ci,
            req_id,
            Reply::SpineFramebuffer {
                index: index as u32,
                len: len as u64,
            },
            &[fd],
        ),
        Err(r) => clients.reply(ci, req_id, r, &[]),
    }
}

fn make(
    spine: &mut SpinePart,
    clients: &dyn Clients,
    cfg: &EngineConfig,
    counters: &crate::counters::Counters,
    usage: Usage,
    ci: ClientId,
    (ext, width, height): (u32, u32, u32),
) -> Result<(usize, std::os::fd::RawFd, usize), Reply> {
    // One of the asking process's own extensions.
    let me = clients.proc_key(ci);
    let slot = spine
        .exts
        .iter()
        .position(|x| {
            x.as_ref()
                .is_some_and(|x| x.id == ext && clients.proc_key(x.owner) == me)
        })
        .ok_or(Reply::Error(ErrorCode::NoSuchExtension))?;
    if width == 0 || height == 0 || width > FB_SIDE_MAX || height > FB_SIDE_MAX {
        return Err(Reply::Rejected(format!(
            "a framebuffer of {width} by {height} pixels: each side 1 to {FB_SIDE_MAX}"
        )));
    }
    let pixels = u64::from(width) * u64::from(height) * PIXEL_BYTES;
    if pixels > FB_BYTES_MAX {
        return Err(Reply::Rejected(format!(
            "a framebuffer of {pixels} bytes is over the framebuffer cap of {FB_BYTES_MAX} bytes"
        )));
    }
    // Charged to the extension's owner, which it lives no longer than.
    let owner = spine.exts[slot].as_ref().map_or(ci, |x| x.owner);
    let fbs = &mut spine.rt.fbs;
    if fbs.count(slot) >= FBS_PER_EXT {
        return Err(Reply::Rejected(format!(
            "extension {ext} has {FBS_PER_EXT} framebuffers, the cap an extension"
        )));
    }
    let len = Framebuffer::segment_len(pixels as usize);
    if let Err(code) = usage.check(len as u64, cfg, counters) {
        let why = if code == ErrorCode::UserQuota {
            format!(
                "a framebuffer of {len} bytes is over the user's memory quota (user_memory): \
                 its processes hold {} of {}",
                usage.user_memory, cfg.user_memory
            )
        } else {
            format!(
                "a framebuffer of {len} bytes is over the process's memory quota \
                 (client_memory): it holds {} of {}",
                usage.memory, cfg.client_memory
            )
        };
        return Err(Reply::Rejected(why));
    }
    // Not populated here: touching 64 MiB would hold up the engine's
    // loop for milliseconds. The client's mapping populates the pages
    // (in its own process); the engine's mapping takes a minor fault at
    // a page's first write.
    let seg = Segment::create_sparse("unet-framebuffer", len)
        .map_err(|_| Reply::Error(ErrorCode::NoResources))?;
    let fb = Framebuffer {
        seg,
        pixels: pixels as usize,
        width,
        height,
        owner,
        writes: 0,
        bytes: 0,
        refused: 0,
    };
    let index = fbs.add(slot, fb);
    let fd = fbs.by_slot[slot][index].seg.fd().as_raw_fd();
    Ok((index, fd, len))
}

/// Answer client `ci`'s request for a read-only view of framebuffer
/// `index` of extension `ext`: the descriptor of its memory file opened
/// read-only, or refused by name.
pub(crate) fn view(
    spine: &SpinePart,
    clients: &dyn Clients,
    ci: ClientId,
    req_id: u32,
    (ext, index): (u32, u32),
) {
    let exts = spine
        .exts
        .iter()
        .enumerate()
        .filter_map(|(slot, x)| x.as_ref().map(|x| (slot, x.id, x.owner)));
    let r = viewable(&spine.rt.fbs, exts, clients, ci, (ext, index)).and_then(|fb| {
        let fd = fb
            .read_only()
            .map_err(|_| Reply::Error(ErrorCode::NoResources))?;
        let reply = Reply::SpineFramebufferView {
            width: fb.width,
            height: fb.height,
            len: fb.seg.len() as u64,
        };
        Ok((reply, fd))
    });
    match r {
        // The descriptor is closed here once the reply carried it.
        Ok((reply, fd)) => clients.reply(ci, req_id, reply, &[fd.as_raw_fd()]),
        Err(r) => clients.reply(ci, req_id, r, &[]),
    }
}

/// Framebuffer `index` of extension `ext` (among `exts`: slot, id and
/// owner of each loaded extension) if client `ci` may view it: the
/// extension's user's (or root's); refused by name otherwise.
fn viewable<'a>(
    fbs: &'a Framebuffers,
    mut exts: impl Iterator<Item = (usize, u32, ClientId)>,
    clients: &dyn Clients,
    ci: ClientId,
    (ext, index): (u32, u32),
) -> Result<&'a Framebuffer, Reply> {
    let (slot, _, owner) = exts
        .find(|&(_, id, _)| id == ext)
        .ok_or(Reply::Error(ErrorCode::NoSuchExtension))?;
    // `u32::MAX`: the kernel did not tell the user; nobody's.
    let uid = clients.uid(ci).filter(|&u| u != u32::MAX);
    if uid != Some(0) && (uid.is_none() || clients.uid(owner) != uid) {
        return Err(Reply::Rejected(format!(
            "extension {ext} is another user's: only its user views its framebuffers"
        )));
    }
    let n = fbs.count(slot);
    usize::try_from(index)
        .ok()
        .and_then(|i| fbs.by_slot.get(slot)?.get(i))
        .ok_or_else(|| {
            Reply::Rejected(format!(
                "extension {ext} has {n} framebuffers: no framebuffer {index}"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::fake::Users;

    fn fb(owner: ClientId) -> Framebuffer {
        let pixels = 4 * 4 * PIXEL_BYTES as usize;
        Framebuffer {
            seg: Segment::create_sparse("test-fb", Framebuffer::segment_len(pixels)).unwrap(),
            pixels,
            width: 4,
            height: 4,
            owner,
            writes: 0,
            bytes: 0,
            refused: 0,
        }
    }

    #[test]
    fn a_view_goes_to_the_extensions_user_and_root_and_maps_only_read_only() {
        // Clients: 0 and 1 of user 1000 (the owner and its viewer), 2 of
        // user 1001, 3 root, 4 of a user the kernel did not tell.
        let users = Users::new(vec![1000, 1000, 1001, 0, u32::MAX]);
        let mut fbs = Framebuffers::default();
        fbs.add(2, fb(0));
        let exts = || [(2, 7, 0)].into_iter();
        let ask = |ci, ext, index| viewable(&fbs, exts(), &users, ci, (ext, index)).map(|_| ());
        assert_eq!(ask(0, 7, 0), Ok(()));
        assert_eq!(ask(1, 7, 0), Ok(()), "another process of the user");
        assert_eq!(ask(3, 7, 0), Ok(()), "root");
        for ci in [2, 4] {
            match ask(ci, 7, 0) {
                Err(Reply::Rejected(why)) => assert!(why.contains("another user's"), "{why}"),
                r => panic!("client {ci}: {r:?}"),
            }
        }
        assert_eq!(ask(1, 8, 0), Err(Reply::Error(ErrorCode::NoSuchExtension)));
        match ask(1, 7, 1) {
            Err(Reply::Rejected(why)) => {
                assert_eq!(why, "extension 7 has 1 framebuffers: no framebuffer 1")
            }
            r => panic!("{r:?}"),
        }
        // The descriptor maps read-only, and only so.
        let fd = fbs.by_slot[2][0].read_only().unwrap();
        let len = fbs.by_slot[2][0].seg.len();
        let dup = fd.try_clone().unwrap();
        assert!(Segment::open(dup, len, true).is_err(), "a writable mapping");
        let ro = Segment::open(fd, len, false).unwrap();
        assert_eq!(fbs.by_slot[2][0].write(0, &[9, 8, 7, 6]), 4);
        let mut b = [0u8; 4];
        // SAFETY: 4 bytes at the start of a mapping of at least 64.
        unsafe { std::ptr::copy_nonoverlapping(ro.ptr().as_ptr(), b.as_mut_ptr(), 4) };
        assert_eq!(b, [9, 8, 7, 6], "the view sees the engine's writes");
        assert!(users.replies.borrow().is_empty());
    }
}
