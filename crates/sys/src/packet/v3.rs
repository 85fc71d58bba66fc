//! A `TPACKET_V3` receive ring (blocks of frames), for measuring the
//! raw-frame port's choice of `TPACKET_V2` against it (`unet bench
//! port`): the same `AF_PACKET` socket, receive only.
//!
//! The kernel fills a block with frames one after another and hands the
//! whole block over (`block_status` becomes `TP_STATUS_USER`) when it is
//! full or when its retire timer fires; the reader walks the block's
//! frames (`tp_next_offset`) and gives the block back. Every offset and
//! length read from a block is checked against the block before a frame
//! is read.
//!
//! ```text
//!  block ─┬ tpacket_block_desc: version, offset_to_priv,
//!         │   block_status (8), num_pkts (12), offset_to_first_pkt (16),
//!         │   blk_len (20), seq_num, timestamps
//!         ├ tpacket3_hdr (at offset_to_first_pkt): tp_next_offset (0),
//!         │   tp_snaplen (12), tp_len (16), tp_status (20), tp_mac (24)
//!         │   ... frame at tp_mac ...
//!         ├ tpacket3_hdr (at + tp_next_offset) ...
//! ```

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use super::{bind, if_index, raw_socket, setopt, Mapping, PACKET_RX_RING, PACKET_VERSION};

const TPACKET_V3: libc::c_int = 2;
const TP_STATUS_USER: u32 = 1;
/// `struct tpacket3_hdr`'s size: the least a frame's header takes.
const HDR3: usize = 48;

/// A `TPACKET_V3` receive ring on one interface.
pub struct BlockRing {
    fd: OwnedFd,
    map: Mapping,
    block: usize,
    blocks: usize,
    head: usize,
    /// Frames whose offsets or lengths did not fit their block, dropped.
    pub bad: u64,
}

// SAFETY: the mapping is owned by the ring alone; every access goes
// through `&mut self` (or `&self` for a status read), so moving the ring
// to another thread moves sole ownership of the mapping with it.
unsafe impl Send for BlockRing {}

impl BlockRing {
    /// A ring of `blocks` blocks of `block` bytes (a multiple of the page
    /// size) on interface `name`, receiving `protocol`, each block handed
    /// over when full or `retire_ms` after its first frame.
    pub fn open(
        name: &str,
        protocol: u16,
        block: u32,
        blocks: u32,
        retire_ms: u32,
    ) -> io::Result<BlockRing> {
        let ifindex = if_index(name)?;
        let fd = raw_socket()?;
        setopt(&fd, PACKET_VERSION, &TPACKET_V3)?;
        // tpacket_req3: block size, blocks, frame size, frames, retire
        // timeout (ms), private bytes, features.
        let frame = 2048u32;
        let req = [
            block,
            blocks,
            frame,
            block / frame * blocks,
            retire_ms,
            0,
            0,
        ];
        setopt(&fd, PACKET_RX_RING, &req)?;
        let len = block as usize * blocks as usize;
        let map = Mapping::of(&fd, len)?;
        let r = BlockRing {
            fd,
            map,
            block: block as usize,
            blocks: blocks as usize,
            head: 0,
            bad: 0,
        };
        bind(&r.fd, ifindex, protocol)?;
        Ok(r)
    }

    /// The socket (readable while a block waits).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Block `i`'s bytes.
    fn block_bytes(&self, i: usize) -> &[u8] {
        debug_assert!(i < self.blocks);
        // SAFETY: block `i < blocks` lies inside the mapping of `block *
        // blocks` bytes; it is read only while its status says it is ours
        // (the kernel does not write it until it is given back).
        unsafe { std::slice::from_raw_parts(self.map.ptr.add(i * self.block), self.block) }
    }

    /// Block `i`'s status word.
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: the status is the u32 at byte 8 of a page-aligned block
        // inside the mapping, aligned; the kernel changes it concurrently,
        // so it is touched only as an atomic.
        unsafe { &*(self.map.ptr.add(i * self.block + 8) as *const AtomicU32) }
    }

    /// Hand every frame of the blocks that wait (stopping between blocks
    /// once `max` frames were handed) to `f`, giving each block back after.
    /// Returns the frames handed.
    pub fn recv(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let mut n = 0;
        while n < max {
            let i = self.head;
            // Acquire: pairs with the kernel's release of the block.
            if self.status(i).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                break;
            }
            let b = self.block_bytes(i);
            let word = |at: usize| -> Option<u32> {
                b.get(at..at + 4)
                    .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            };
            let count = word(12).unwrap_or(0);
            let mut off = word(16).unwrap_or(0) as usize;
            let mut bad = 0;
            for _ in 0..count {
                let (Some(next), Some(snap), Some(mac)) =
                    (word(off), word(off + 12), word(off + 24))
                else {
                    bad += 1;
                    break;
                };
                let (snap, mac) = (snap as usize, (mac & 0xFFFF) as usize);
                match b.get(off + mac..off + mac + snap) {
                    Some(frame) if mac >= HDR3 => {
                        f(frame);
                        n += 1;
                    }
                    _ => bad += 1,
                }
                if next == 0 {
                    break;
                }
                off += next as usize;
            }
            self.bad += bad;
            // Release: our reads of the block happen before the kernel
            // takes it back.
            self.status(i).store(0, Ordering::Release);
            self.head = (i + 1) % self.blocks;
        }
        n
    }
}
