//! Framebuffers for SPINE extensions (the SPINE paper, section 5.1: the
//! video extension writes arriving rows straight into the frame buffer).
//! A host process asks its engine for a framebuffer for one of its own
//! extensions; the engine makes the shared-memory image, maps it for the
//! extension, whose handlers write it with `Spine.fbWrite`, and hands it
//! here to map read-only or read-write. It is charged to the process's
//! memory quota and freed when the extension goes (the mapping here
//! stays readable until dropped).
//!
//! Another process of the same user (a viewer) maps an existing
//! framebuffer read-only with [`Session::spine_framebuffer_view`]: the
//! engine hands a descriptor that cannot be mapped writable.

use unet_control::{Reply, Request};
use unet_sys as sys;

use crate::{Error, Session};

/// Bytes a pixel.
pub const PIXEL_BYTES: usize = 4;
/// Framebuffers an extension may have.
pub const FBS_PER_EXT: usize = 2;
/// Bytes of pixels a framebuffer may have at most.
pub const FB_BYTES_MAX: usize = 64 << 20;

/// What the engine counted of a framebuffer's writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FbCounters {
    /// `fbWrite`s done.
    pub writes: u64,
    /// Bytes they wrote.
    pub bytes: u64,
    /// `fbWrite`s refused (a range outside the framebuffer or the
    /// buffer): nothing written.
    pub refused: u64,
}

/// A framebuffer mapped in this process: `width` by `height` pixels of 4
/// bytes, row after row, then the engine's counters.
pub struct Framebuffer {
    seg: sys::Segment,
    index: u32,
    width: u32,
    height: u32,
    writable: bool,
}

impl Framebuffer {
    /// Its number in the extension (`Spine.fbWrite`'s first argument).
    pub fn index(&self) -> u32 {
        self.index
    }
    /// Pixels a row.
    pub fn width(&self) -> u32 {
        self.width
    }
    /// Rows.
    pub fn height(&self) -> u32 {
        self.height
    }
    /// Bytes of pixels.
    pub fn pixel_bytes(&self) -> usize {
        self.width as usize * self.height as usize * PIXEL_BYTES
    }
    /// Bytes from `off` into `buf`; false (nothing read) if they are not
    /// all pixels.
    pub fn read(&self, off: usize, buf: &mut [u8]) -> bool {
        off.checked_add(buf.len())
            .is_some_and(|end| end <= self.pixel_bytes())
            && crate::shm::read(&self.seg, off, buf)
    }
    /// A copy of every pixel, little-endian words, row after row.
    pub fn pixels(&self) -> Vec<u32> {
        let mut b = vec![0u8; self.pixel_bytes()];
        self.read(0, &mut b);
        b.chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }
    /// Write `data` at `off` (a mapping made read-write; the host's own
    /// drawing, such as a background); false (nothing written) if it does
    /// not lie wholly in the pixels, or the mapping is read-only.
    pub fn write(&self, off: usize, data: &[u8]) -> bool {
        self.writable
            && off
                .checked_add(data.len())
                .is_some_and(|end| end <= self.pixel_bytes())
            && crate::shm::write(&self.seg, off, data)
    }
    /// The memory file behind the mapping (as the engine handed it: for
    /// a view, opened read-only, so that no mapping of it can write).
    pub fn fd(&self) -> &std::os::fd::OwnedFd {
        self.seg.fd()
    }
    /// What the engine counted.
    pub fn counters(&self) -> FbCounters {
        let at = self.pixel_bytes().div_ceil(64) * 64;
        let mut b = [0u8; 24];
        crate::shm::read(&self.seg, at, &mut b);
        let word = |i: usize| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap_or([0; 8]));
        FbCounters {
            writes: word(0),
            bytes: word(1),
            refused: word(2),
        }
    }
}

impl Session {
    /// Make a framebuffer of `width` by `height` pixels for extension
    /// `ext` (one of this process's own), mapped read-write if
    /// `writable`. Refused with [`Error::Rejected`] naming the cap or the
    /// quota: sides of 1 to 16 384 pixels, [`FB_BYTES_MAX`] bytes,
    /// [`FBS_PER_EXT`] an extension, the process's and user's memory
    /// quotas.
    pub fn spine_framebuffer(
        &self,
        ext: u32,
        width: u32,
        height: u32,
        writable: bool,
    ) -> Result<Framebuffer, Error> {
        let req = Request::SpineFramebuffer { ext, width, height };
        let (r, mut fds) = self.inner.request(&req)?;
        match r {
            Reply::SpineFramebuffer { index, len } if !fds.is_empty() => {
                let pixels = width as usize * height as usize * PIXEL_BYTES;
                let len = usize::try_from(len).unwrap_or(0);
                if len < pixels.div_ceil(64) * 64 + 24 {
                    return Err(Error::Protocol(format!(
                        "a framebuffer segment of {len} bytes for {width} by {height}"
                    )));
                }
                let seg = sys::Segment::open(fds.remove(0), len, writable)?;
                Ok(Framebuffer {
                    seg,
                    index,
                    width,
                    height,
                    writable,
                })
            }
            Reply::Rejected(why) => Err(Error::Rejected(why)),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to a framebuffer request: {r:?}"
            ))),
        }
    }

    /// A read-only view of framebuffer `index` of extension `ext`, one
    /// of this user's extensions (made by this process or another of the
    /// user's): mapped read-only, as the engine hands it (a descriptor
    /// that cannot be mapped writable), so [`Framebuffer::write`] writes
    /// nothing. Refused with [`Error::Rejected`] for another user's
    /// extension or a framebuffer it does not have, and
    /// `Error::Engine(NoSuchExtension)` for an extension not loaded (or
    /// gone: a view mapped before stays readable).
    pub fn spine_framebuffer_view(&self, ext: u32, index: u32) -> Result<Framebuffer, Error> {
        let req = Request::SpineFramebufferView { ext, index };
        let (r, mut fds) = self.inner.request(&req)?;
        match r {
            Reply::SpineFramebufferView { width, height, len } if !fds.is_empty() => {
                let pixels = u64::from(width) * u64::from(height) * PIXEL_BYTES as u64;
                let pixels = usize::try_from(pixels).unwrap_or(usize::MAX);
                let len = usize::try_from(len).unwrap_or(0);
                if pixels > FB_BYTES_MAX || len < pixels.div_ceil(64) * 64 + 24 {
                    return Err(Error::Protocol(format!(
                        "a framebuffer segment of {len} bytes for {width} by {height}"
                    )));
                }
                let seg = sys::Segment::open(fds.remove(0), len, false)?;
                Ok(Framebuffer {
                    seg,
                    index,
                    width,
                    height,
                    writable: false,
                })
            }
            Reply::Rejected(why) => Err(Error::Rejected(why)),
            Reply::Error(c) => Err(c.into()),
            r => Err(Error::Protocol(format!(
                "unexpected answer to a framebuffer view request: {r:?}"
            ))),
        }
    }
}
