//! The shared memory of UDM (User Direct Messaging, as the UDM paper
//! defines it): jobs of nodes that `inject` and `extract` small messages,
//! delivered directly in the common case and through a virtual buffer
//! kept by the engine otherwise (two-case delivery).
//!
//! # Job segment
//!
//! Made by the engine when a job is created, mapped by every node of the
//! job (and by nobody else: that is the protection between jobs) and by
//! the engine.
//!
//! ```text
//!  0x0000 UdmJobHeader: identity and geometry (read-only), doorbell line,
//!         the rang word (a bit per node with something for the engine)
//!  0x1000 node lines: nodes × UdmNodeLine (256 B each)
//!         (page aligned) fast rings: nodes × nodes rings of
//!         RingHeader + fast_cap × UdmMsg; ring (r, s) carries the
//!         messages of sender s to receiver r
//! ```
//!
//! A fast ring has one producer (the sender) and one consumer (the
//! receiver): push and pop as in the ring protocol ([`crate::ring`]).
//! The checked mappings of both segments (`UdmJobView`, `UdmNodeView`)
//! are with the other views, in the `view` module.
//!
//! # Node segment
//!
//! One per node, mapped by that node's process and the engine only.
//!
//! ```text
//!  0x0000 UdmNodeHeader: identity and geometry (read-only), the virtual
//!         buffer's positions, the engine's counters of the node
//!  0x1000 divert ring: RingHeader + divert_cap × UdmMsg   node → engine
//! ```
//!
//! # Virtual buffer
//!
//! One memory file per node, `buffer_cap × 128` bytes reserved and never
//! touched until used. It holds *records* of the message's size: the
//! header word (as [`UdmHeader`], the peer the source), then the
//! message's words, 8 to 120 bytes ([`udm_record_bytes`]). Positions are
//! in bytes: the engine writes at [`UdmNodeHeader::buf_head`], the node
//! reads (it maps the file read-only) and advances
//! [`UdmNodeHeader::buf_tail`]; the record at position `p` is at byte
//! `(p - buf_base) % buffer_size` ([`UdmNodeHeader::buf_base`], moved to
//! the head only while the buffer is empty, so a buffer used again starts
//! again at its first page). A record never runs past the file's end: one
//! that does not fit there is preceded by a *pad* record (`nwords` =
//! [`UDM_PAD`]) that fills the rest, and goes at the start. The engine
//! gives back the pages once the buffer has been idle a while.
//!
//! ```text
//!  byte 0                                                   buffer_size
//!  | hdr w0 | hdr | hdr w0 w1 w2 | ... | hdr w0 | PAD ........ |
//!    ^ buf_tail (the next to read)              ^ buf_head: the next
//!                                               record (3 words) does not
//!                                               fit, so a pad, and it goes
//!                                               at byte 0
//! ```
//!
//! # The mode word
//!
//! [`UdmNodeLine::mode`] holds the node's delivery mode and the count of
//! messages diverted to it and not yet extracted:
//!
//! ```text
//!  bit 63  UDM_MODE_GONE     the node is gone (set by the engine)
//!  bit 62  UDM_MODE_DIVERT   buffered ("divert") mode
//!  bits 0..32                diverted messages not yet disposed of
//! ```
//!
//! A sender writes a fast ring only while it reads divert clear. In divert
//! mode it adds one to the count with a compare-and-swap that needs the
//! divert bit still set, and only then hands the message to the engine.
//! The receiver clears the divert bit (a compare-and-swap that keeps the
//! count) once it runs and finds its buffer empty, even while diverted
//! messages are on their way to it: each fast message carries in its
//! `stamp` how many messages its sender diverted to the receiver before
//! it, and the receiver takes it only after taking as many buffered
//! messages from that sender, so a sender's fast message never overtakes
//! its diverted ones. Only the engine sets the divert bit. `docs/udm.md`
//! gives the whole argument.

use core::mem::{offset_of, size_of};
use core::sync::atomic::{AtomicU32, AtomicU64};

use crate::{ring_bytes, PAGE};

/// Most data words in a message (besides its handler index).
pub const UDM_MAX_WORDS: usize = 14;
/// Most nodes in a job.
pub const UDM_MAX_NODES: u32 = 64;
/// Default capacity of each fast ring (messages).
pub const UDM_FAST_CAP_DEFAULT: u32 = 8;
/// Capacity of a node's divert ring (messages).
pub const UDM_DIVERT_CAP: u32 = 256;
/// Default size of a node's virtual buffer (bytes reserved).
pub const UDM_BUFFER_DEFAULT: u64 = 1 << 20;
/// Largest virtual buffer of one node.
pub const UDM_BUFFER_MAX: u64 = 1 << 30;
/// Largest job segment (its `nodes²` fast rings): the engine makes it,
/// and touches every page of it, when the job is created.
pub const UDM_JOB_SEGMENT_MAX: u64 = 64 << 20;
/// Messages of the largest size per page of a virtual buffer (smaller
/// ones take less: [`udm_record_bytes`]).
pub const UDM_MSGS_PER_PAGE: u64 = (PAGE / size_of::<UdmMsg>()) as u64;
/// `nwords` of a virtual buffer's pad record: nothing more before the
/// buffer's end, the next record is at its start.
pub const UDM_PAD: u16 = 0xFFFF;

/// Bytes of a virtual buffer's record of `nwords` words: its header word
/// and the words.
#[inline]
pub const fn udm_record_bytes(nwords: usize) -> u64 {
    8 * (1 + nwords as u64)
}

/// Magic of a job segment: `b"UNETUJ01"`.
pub const UDM_JOB_MAGIC: u64 = u64::from_le_bytes(*b"UNETUJ01");
/// Magic of a node segment: `b"UNETUN01"`.
pub const UDM_NODE_MAGIC: u64 = u64::from_le_bytes(*b"UNETUN01");

/// [`UdmNodeLine::mode`]: the node is gone.
pub const UDM_MODE_GONE: u64 = 1 << 63;
/// [`UdmNodeLine::mode`]: buffered ("divert") mode.
pub const UDM_MODE_DIVERT: u64 = 1 << 62;
/// [`UdmNodeLine::mode`]: the count of diverted, not yet disposed messages.
pub const UDM_MODE_COUNT: u64 = 0xFFFF_FFFF;

/// [`UdmJobHeader::engine_armed`]: the engine sleeps until rung (or its
/// next deadline).
pub const UDM_ARMED_SLEEP: u32 = 1;
/// [`UdmJobHeader::engine_armed`]: the engine naps: it took diverted
/// messages a moment ago and looks again within a few milliseconds.
pub const UDM_ARMED_NAP: u32 = 2;

/// `UdmNodeLine::state`: nobody has joined as this rank yet.
pub const UDM_NODE_FREE: u32 = 0;
/// `UdmNodeLine::state`: a process has joined as this rank.
pub const UDM_NODE_JOINED: u32 = 1;
/// `UdmNodeLine::state`: the node left or died.
pub const UDM_NODE_GONE: u32 = 2;
/// `UdmNodeLine::state`: the node lives behind another engine; its mode
/// word stays in divert mode, so that what is sent to it goes through
/// this engine and over the wire.
pub const UDM_NODE_REMOTE: u32 = 3;

/// [`UdmNodeLine::uac`]: interrupts disabled (an atomic section; the
/// paper's user `interrupt-disable` bit).
pub const UDM_ATOM_DISABLE: u32 = 1;
/// [`UdmNodeLine::uac`]: the atomicity timer runs even with no message
/// waiting (the paper's `timer-force`).
pub const UDM_ATOM_TIMER_FORCE: u32 = 2;
/// The bits `beginatom` and `endatom` may change.
pub const UDM_ATOM_USER: u32 = UDM_ATOM_DISABLE | UDM_ATOM_TIMER_FORCE;
/// [`UdmNodeLine::uac`]: a handler runs (an upcall's atomic section; set
/// by the node's handler thread with a compare-and-swap from "no
/// atomicity bit", so never inside the main code's atomic section). The
/// engine counts it as atomic for the atomicity timeout.
pub const UDM_ATOM_HANDLER: u32 = 4;
/// [`UdmNodeLine::uac`]: the paper's `atomicity-extend`: a handler
/// returned with its atomic section extended (set with
/// [`UDM_ATOM_DISABLE`]); the main code's `endatom` ends it and does the
/// deferred work (hands the waiting messages to their handlers).
pub const UDM_ATOM_EXTEND: u32 = 8;
/// [`UdmNodeLine::uac`]: upcalls are suspended after a handler error (no
/// handler for a message, a `dispose-failure`, a panic) until the main
/// code takes the error.
pub const UDM_ATOM_FAULT: u32 = 16;
/// [`UdmNodeLine::uac`]: the handler thread waits for the atomic section
/// to end: the `endatom` that clears [`UDM_ATOM_DISABLE`] wakes it.
pub const UDM_ATOM_WANT: u32 = 32;

/// One message, in a fast ring, a divert ring or a virtual buffer.
///
/// ```text
///  0 peer: u32       the source rank (fast ring, buffer) or the
///                    destination rank (divert ring)
///  4 handler: u16    the handler index
///  6 nwords: u16     0..=UDM_MAX_WORDS
///  8 stamp: u64      in a fast ring, the messages its sender diverted
///                    to this receiver before it (the receiver takes it
///                    only after as many buffered ones from that sender);
///                    zero elsewhere
/// 16 words: [u64; 14]
/// ```
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdmMsg {
    /// Source rank, or destination rank in a divert ring.
    pub peer: u32,
    /// Handler index.
    pub handler: u16,
    /// Words used.
    pub nwords: u16,
    /// In a fast ring: the messages the sender diverted to the receiver
    /// before this one. Zero elsewhere.
    pub stamp: u64,
    /// The data words.
    pub words: [u64; UDM_MAX_WORDS],
}

// SAFETY: a repr(C) struct of integers; any bit pattern is a valid value.
unsafe impl crate::ShmSafe for UdmMsg {}

/// The first 8 bytes of a [`UdmMsg`] (`peer`, `handler`, `nwords`) as the
/// one little-endian word they are read and written as: a writer stores
/// the words first and this word last, in one store; a reader loads it
/// once and checks it before use. The one place the word is packed and
/// unpacked.
///
/// ```text
///  bits  0..32  peer
///  bits 32..48  handler
///  bits 48..64  nwords (unchecked: a peer may write anything)
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdmHeader {
    /// [`UdmMsg::peer`].
    pub peer: u32,
    /// [`UdmMsg::handler`].
    pub handler: u16,
    /// [`UdmMsg::nwords`].
    pub nwords: u16,
}

impl UdmHeader {
    /// The header word.
    #[inline]
    pub const fn pack(self) -> u64 {
        self.peer as u64 | (self.handler as u64) << 32 | (self.nwords as u64) << 48
    }

    /// The fields of a header word.
    #[inline]
    pub const fn unpack(word: u64) -> UdmHeader {
        UdmHeader {
            peer: word as u32,
            handler: (word >> 32) as u16,
            nwords: (word >> 48) as u16,
        }
    }
}

/// The first page of a job segment.
#[repr(C, align(4096))]
pub struct UdmJobHeader {
    /// [`UDM_JOB_MAGIC`].
    pub magic: u64,
    /// [`crate::VERSION`].
    pub version: u32,
    /// Size of this header (a page).
    pub header_size: u32,
    /// Total size of the segment.
    pub segment_size: u64,
    /// The job's id in its engine.
    pub job_id: u32,
    /// Nodes in the job.
    pub nodes: u32,
    /// Capacity of each fast ring.
    pub fast_cap: u32,
    /// Capacity of each node's virtual buffer (messages of the largest
    /// size: the limit of the count in a mode word).
    pub buffer_cap: u32,
    /// Capacity of each node's divert ring.
    pub divert_cap: u32,
    /// Reserved, zero.
    pub _reserved0: u32,
    /// Offset of the first [`UdmNodeLine`].
    pub lines_off: u64,
    /// Offset of the first fast ring.
    pub rings_off: u64,
    /// Bytes of one fast ring.
    pub ring_bytes: u64,
    /// Engine incarnation id.
    pub engine_id: u64,
    _pad0: [u8; 0x100 - 0x50],
    /// Doorbell line (0x100): the engine sets it before it sleeps, to
    /// [`UDM_ARMED_SLEEP`] or, when it has just taken diverted messages,
    /// to [`UDM_ARMED_NAP`]; a node that hands it work swaps it to 0 and,
    /// if it was set, writes the job's eventfd. A napping engine looks
    /// again within a few milliseconds whether rung or not: a sender
    /// handing it a diverted message does not ring it then (unless its
    /// divert ring is half full), a receiver waiting for a diverted
    /// message does.
    pub engine_armed: AtomicU32,
    _pad1: [u8; 0x140 - 0x104],
    /// The nodes that have something for the engine (0x140), a bit per
    /// rank: a node sets its bit after it hands the engine a message
    /// (its divert ring) or moves its buffer's tail, or beginatom; a
    /// sender sets the destination's bit when it finds it asleep with a
    /// message for it. The engine swaps it to zero and looks at those
    /// nodes only (and at those it left work in): an idle node costs it
    /// nothing.
    pub rang: AtomicU64,
    _pad2: [u8; 4096 - 0x148],
}

/// What the nodes of a job share about one node (256 bytes).
#[repr(C, align(64))]
pub struct UdmNodeLine {
    /// The mode word (see the module documentation).
    pub mode: AtomicU64,
    /// Threads of the node that sleep (or are about to) on `rx_futex`:
    /// its main code, its handler thread.
    pub rx_sleeping: AtomicU32,
    /// Futex word the node sleeps on; whoever gives it a message
    /// increments it and wakes it.
    pub rx_futex: AtomicU32,
    /// [`UDM_NODE_FREE`], [`UDM_NODE_JOINED`], [`UDM_NODE_GONE`] or
    /// [`UDM_NODE_REMOTE`] (written by the engine).
    pub state: AtomicU32,
    /// The node's process id (written by the engine).
    pub pid: AtomicU32,
    _pad0: [u8; 40],
    /// Times a sender found its fast ring to this node full and switched
    /// the node to buffered mode (counted by the senders: their word).
    /// Always 0 now: a full ring makes its sender wait, and only the
    /// engine switches a node (kept for the layout).
    pub switch_queue_full: AtomicU64,
    /// Times a sender was held back by this node's overflow control
    /// (counted by the senders).
    pub overflow_holds: AtomicU64,
    _pad1: [u8; 48],
    /// The atomicity control bits (`UDM_ATOM_*`), written by the node: its
    /// main code's (`beginatom`, `endatom`) and, when it has handlers, its
    /// handler thread's (the upcall's state, kept in the process and
    /// copied here for the engine).
    pub uac: AtomicU32,
    /// Reserved.
    pub _reserved: AtomicU32,
    /// Messages the node took from its fast rings (its word).
    pub fast_msgs: AtomicU64,
    /// Messages the node took from its virtual buffer (its word).
    pub buffered_taken: AtomicU64,
    /// Handlers the node ran as upcalls (its word).
    pub upcalls: AtomicU64,
    /// Messages that raised an upcall for a handler index with no handler
    /// (its word).
    pub no_handler: AtomicU64,
    /// Handlers that returned without extracting or disposing of a message
    /// (the paper's `dispose-failure`; its word).
    pub dispose_failures: AtomicU64,
    /// Handlers that panicked (its word).
    pub handler_panics: AtomicU64,
    _pad2: [u8; 8],
    _pad3: [u8; 64],
}

/// The first page of a node segment.
#[repr(C, align(4096))]
pub struct UdmNodeHeader {
    /// [`UDM_NODE_MAGIC`].
    pub magic: u64,
    /// [`crate::VERSION`].
    pub version: u32,
    /// Size of this header (a page).
    pub header_size: u32,
    /// Total size of the segment.
    pub segment_size: u64,
    /// The job's id.
    pub job_id: u32,
    /// This node's rank.
    pub rank: u32,
    /// Capacity of the divert ring.
    pub divert_cap: u32,
    /// Capacity of the virtual buffer (messages).
    pub buffer_cap: u32,
    /// Offset of the divert ring's header.
    pub divert_off: u64,
    /// Engine incarnation id.
    pub engine_id: u64,
    _pad0: [u8; 0x100 - 0x38],
    /// Virtual buffer: bytes the engine has written (records and pads: its
    /// position; the engine stores it with Release after writing them).
    pub buf_head: AtomicU64,
    /// Virtual buffer: the position (bytes) whose record is at the
    /// buffer's first byte (the record at `p` is at byte
    /// `(p - buf_base) % buffer_size`).
    /// The engine moves it to the head only while the buffer is empty
    /// (the node's tail at the head), so that a buffer used again starts
    /// again at its first page, whose memory it kept; it stores it before
    /// the head that follows (Release), and a node reads it after a head
    /// it loaded with Acquire.
    pub buf_base: AtomicU64,
    _pad1: [u8; 48],
    /// Virtual buffer: bytes the node has read past (the records it
    /// disposed of, and pads).
    pub buf_tail: AtomicU64,
    _pad2: [u8; 56],
    /// The engine's counters of the node (0x180), indexed by
    /// [`UdmCounter`].
    pub counters: [AtomicU64; UDM_COUNTERS],
    _pad3: [u8; 4096 - 0x180 - 8 * UDM_COUNTERS],
}

/// Number of engine counter slots of a node.
pub const UDM_COUNTERS: usize = 16;

const _: () = {
    assert!(size_of::<UdmMsg>() == 128);
    assert!(offset_of!(UdmMsg, handler) == 4);
    assert!(offset_of!(UdmMsg, nwords) == 6);
    assert!(offset_of!(UdmMsg, stamp) == 8);
    assert!(offset_of!(UdmMsg, words) == 16);
    assert!(size_of::<UdmJobHeader>() == PAGE);
    assert!(offset_of!(UdmJobHeader, job_id) == 0x18);
    assert!(offset_of!(UdmJobHeader, fast_cap) == 0x20);
    assert!(offset_of!(UdmJobHeader, divert_cap) == 0x28);
    assert!(offset_of!(UdmJobHeader, lines_off) == 0x30);
    assert!(offset_of!(UdmJobHeader, engine_id) == 0x48);
    assert!(offset_of!(UdmJobHeader, engine_armed) == 0x100);
    assert!(offset_of!(UdmJobHeader, rang) == 0x140);
    assert!(size_of::<UdmNodeLine>() == 256);
    assert!(offset_of!(UdmNodeLine, rx_sleeping) == 8);
    assert!(offset_of!(UdmNodeLine, rx_futex) == 12);
    assert!(offset_of!(UdmNodeLine, state) == 16);
    assert!(offset_of!(UdmNodeLine, switch_queue_full) == 0x40);
    assert!(offset_of!(UdmNodeLine, overflow_holds) == 0x48);
    assert!(offset_of!(UdmNodeLine, uac) == 0x80);
    assert!(offset_of!(UdmNodeLine, fast_msgs) == 0x88);
    assert!(offset_of!(UdmNodeLine, buffered_taken) == 0x90);
    assert!(offset_of!(UdmNodeLine, upcalls) == 0x98);
    assert!(offset_of!(UdmNodeLine, handler_panics) == 0xB0);
    assert!(size_of::<UdmNodeHeader>() == PAGE);
    assert!(offset_of!(UdmNodeHeader, rank) == 0x1C);
    assert!(offset_of!(UdmNodeHeader, divert_off) == 0x28);
    assert!(offset_of!(UdmNodeHeader, buf_head) == 0x100);
    assert!(offset_of!(UdmNodeHeader, buf_base) == 0x108);
    assert!(offset_of!(UdmNodeHeader, buf_tail) == 0x140);
    assert!(offset_of!(UdmNodeHeader, counters) == 0x180);
};

/// Offsets of everything in a job's segments. The one place they are
/// computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdmLayout {
    /// Nodes in the job.
    pub nodes: u32,
    /// Capacity of each fast ring.
    pub fast_cap: u32,
    /// Capacity of each virtual buffer (messages).
    pub buffer_cap: u32,
    /// Offset of the node lines in the job segment.
    pub lines_off: u64,
    /// Offset of the fast rings in the job segment.
    pub rings_off: u64,
    /// Bytes of one fast ring.
    pub ring_bytes: u64,
    /// Size of the job segment.
    pub job_size: u64,
    /// Offset of the divert ring in a node segment.
    pub divert_off: u64,
    /// Size of a node segment.
    pub node_size: u64,
    /// Bytes of a virtual buffer.
    pub buffer_size: u64,
}

/// Why a job's geometry was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdmGeometryError {
    /// Nodes not in 1..=[`UDM_MAX_NODES`].
    Nodes(u32),
    /// Fast ring capacity not a power of two in 2..=1024.
    FastCap(u32),
    /// Buffer size not a power of two in one page..=[`UDM_BUFFER_MAX`].
    Buffer(u64),
    /// The job segment would be larger than [`UDM_JOB_SEGMENT_MAX`] (this
    /// many bytes): fewer nodes or smaller fast rings.
    TooLarge(u64),
}

impl core::fmt::Display for UdmGeometryError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Nodes(n) => write!(f, "{n} nodes: a job has 1 to {UDM_MAX_NODES}"),
            Self::FastCap(c) => {
                write!(f, "fast queue of {c} messages: a power of two in 2..=1024")
            }
            Self::Buffer(b) => write!(
                f,
                "virtual buffer of {b} bytes: a power of two from {PAGE} to {UDM_BUFFER_MAX}"
            ),
            Self::TooLarge(b) => write!(
                f,
                "the job's fast rings would take {b} bytes, more than {UDM_JOB_SEGMENT_MAX}"
            ),
        }
    }
}

impl UdmLayout {
    /// The layout of a job of `nodes` nodes with fast rings of `fast_cap`
    /// messages and virtual buffers of `buffer_size` bytes.
    pub fn new(nodes: u32, fast_cap: u32, buffer_size: u64) -> Result<UdmLayout, UdmGeometryError> {
        if nodes == 0 || nodes > UDM_MAX_NODES {
            return Err(UdmGeometryError::Nodes(nodes));
        }
        if !fast_cap.is_power_of_two() || !(2..=1024).contains(&fast_cap) {
            return Err(UdmGeometryError::FastCap(fast_cap));
        }
        if !buffer_size.is_power_of_two()
            || buffer_size < PAGE as u64
            || buffer_size > UDM_BUFFER_MAX
        {
            return Err(UdmGeometryError::Buffer(buffer_size));
        }
        let page = PAGE as u64;
        let lines_off = page;
        let lines_end = lines_off + nodes as u64 * size_of::<UdmNodeLine>() as u64;
        let rings_off = lines_end.div_ceil(page) * page;
        let ring = ring_bytes(fast_cap, size_of::<UdmMsg>()) as u64;
        let job_end = rings_off + (nodes as u64 * nodes as u64) * ring;
        if job_end > UDM_JOB_SEGMENT_MAX {
            return Err(UdmGeometryError::TooLarge(job_end));
        }
        let divert_off = page;
        let node_end = divert_off + ring_bytes(UDM_DIVERT_CAP, size_of::<UdmMsg>()) as u64;
        Ok(UdmLayout {
            nodes,
            fast_cap,
            buffer_cap: (buffer_size / size_of::<UdmMsg>() as u64) as u32,
            lines_off,
            rings_off,
            ring_bytes: ring,
            job_size: job_end.div_ceil(page) * page,
            divert_off,
            node_size: node_end.div_ceil(page) * page,
            buffer_size,
        })
    }

    /// Offset of node `rank`'s line in the job segment.
    pub fn line_off(&self, rank: u32) -> u64 {
        self.lines_off + rank as u64 * size_of::<UdmNodeLine>() as u64
    }

    /// Offset of the fast ring from sender `src` to receiver `dst`.
    pub fn ring_off(&self, dst: u32, src: u32) -> u64 {
        self.rings_off + (dst as u64 * self.nodes as u64 + src as u64) * self.ring_bytes
    }
}

counter_enum! {
    /// The engine's counters of a node ([`UdmNodeHeader::counters`]).
    UdmCounter {
        /// Messages the engine appended to the node's virtual buffer (the
        /// buffered case).
        BufferedMsgs = 0 => "buffered_msgs",
        /// Switches to buffered mode by the engine: the node had messages
        /// waiting and took none for the atomicity timeout (atomic,
        /// blocked in its own inject, or not extracting).
        SwitchTimeout = 1 => "switch_atomicity_timeout",
        /// Switches to buffered mode by the engine: the node was
        /// descheduled (stopped) with messages waiting.
        SwitchDescheduled = 2 => "switch_descheduled",
        /// A level: pages of the virtual buffer in use now.
        BufferPages = 3 => "buffer_pages",
        /// The most pages of the virtual buffer in use at once.
        BufferPagesMax = 4 => "buffer_pages_max",
        /// Pages of the virtual buffer given back to the system.
        PagesReturned = 5 => "pages_returned",
        /// Times a message for the node waited in its sender's divert ring
        /// because the node's virtual buffer was full.
        BufferFull = 6 => "buffer_full",
        /// Messages the node handed the engine dropped: destination rank
        /// outside the job.
        DropBadDest = 7 => "drop_bad_dest",
        /// Messages the node handed the engine dropped: more than
        /// `UDM_MAX_WORDS` words.
        DropBadLength = 8 => "drop_bad_length",
        /// Messages the node handed the engine dropped: their destination
        /// is gone.
        DropDestGone = 9 => "drop_dest_gone",
        /// Positions found impossible in the node's shared memory (divert
        /// ring head, virtual buffer tail): ignored.
        BadPosition = 10 => "bad_position",
        /// Messages from the node that this engine put on the wire to
        /// another engine (counted once each, retransmissions aside).
        WireTx = 11 => "wire_tx",
        /// Messages to the node that came over the wire from another
        /// engine.
        WireRx = 12 => "wire_rx",
        /// Messages from the node that the wire carried again (the link
        /// resent the wire message that held them).
        WireRetransmits = 13 => "wire_retransmits",
        /// Times the engine advised the job's scheduler that the node's
        /// virtual buffer is near its limit (overflow control's feedback).
        OverflowAdvice = 14 => "overflow_advice",
        /// The most bytes the node's virtual buffer held at once (its
        /// records and pads), as the engine saw them when it wrote (the
        /// node's tail as read on that turn: at most a turn's writes too
        /// many): the memory its messages needed, 4096 bytes a page.
        BufferHeldBytesMax = 15 => "buffer_held_bytes_max",
    }
}

counter_enum! {
    /// What the nodes count of a node themselves ([`UdmNodeLine`]): their
    /// word, shown beside the engine's.
    UdmClientCounter {
        /// Messages the node took from its fast rings (the fast case).
        FastMsgs = 0 => "fast_msgs",
        /// Messages the node took from its virtual buffer.
        BufferedTaken = 1 => "buffered_taken",
        /// Switches to buffered mode by a sender whose fast ring was full
        /// (always 0: a full ring makes its sender wait).
        SwitchQueueFull = 2 => "switch_queue_full",
        /// Senders held back by overflow control.
        OverflowHolds = 3 => "overflow_holds",
        /// Handlers run as upcalls.
        Upcalls = 4 => "upcalls",
        /// Messages for a handler index with no handler (upcalls then
        /// wait until the main code takes the error).
        NoHandler = 5 => "upcall_no_handler",
        /// Handlers that returned without extracting or disposing of a
        /// message (the paper's `dispose-failure`).
        DisposeFailures = 6 => "upcall_dispose_failures",
        /// Handlers that panicked.
        HandlerPanics = 7 => "upcall_panics",
    }
}

const _: () = assert!(UdmCounter::ALL.len() <= UDM_COUNTERS);

/// Number of UDM node slots in the counters segment: the first this many
/// nodes (by job, then rank) are shown by `unet stat`.
pub const UDM_SLOTS: usize = 256;
/// Self-reported counter slots in a [`UdmSlot`].
pub const UDM_CLIENT_COUNTERS: usize = 8;

/// What `unet stat` shows of one UDM node (256 bytes), filled by the
/// engine when a `Stat` request comes.
///
/// ```text
///  0x00 live u32, job u32, rank u32, pid u32
///  0x10 mode u32 (0 fast, 1 buffered, 2 gone), nodes u32, reserved u64
///  0x20 counters: UDM_COUNTERS × u64 (UdmCounter)
///  0xA0 client: UDM_CLIENT_COUNTERS × u64 (UdmClientCounter)
/// ```
#[repr(C)]
pub struct UdmSlot {
    /// 1 while the slot describes a node.
    pub live: AtomicU32,
    /// The job's id.
    pub job: AtomicU32,
    /// The node's rank.
    pub rank: AtomicU32,
    /// Its process id (0 if not joined).
    pub pid: AtomicU32,
    /// 0 fast, 1 buffered, 2 gone.
    pub mode: AtomicU32,
    /// Nodes in the job.
    pub nodes: AtomicU32,
    /// Reserved.
    pub _reserved: AtomicU64,
    /// The engine's counters, indexed by [`UdmCounter`].
    pub counters: [AtomicU64; UDM_COUNTERS],
    /// The nodes' own counts, indexed by [`UdmClientCounter`].
    pub client: [AtomicU64; UDM_CLIENT_COUNTERS],
    _pad: [u8; 256 - 0x20 - 8 * UDM_COUNTERS - 8 * UDM_CLIENT_COUNTERS],
}

const _: () = {
    assert!(size_of::<UdmSlot>() == 256);
    assert!(offset_of!(UdmSlot, counters) == 0x20);
    assert!(offset_of!(UdmSlot, client) == 0xA0);
    assert!(UdmClientCounter::ALL.len() <= UDM_CLIENT_COUNTERS);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_word_is_the_first_eight_bytes_of_a_message() {
        let h = UdmHeader {
            peer: 0x0102_0304,
            handler: 0x0506,
            nwords: 0x0708,
        };
        assert_eq!(h.pack(), 0x0708_0506_0102_0304);
        assert_eq!(UdmHeader::unpack(h.pack()), h);
        let m = UdmMsg {
            peer: h.peer,
            handler: h.handler,
            nwords: h.nwords,
            ..UdmMsg::default()
        };
        // SAFETY: a UdmMsg is at least 8 bytes, aligned for a u64.
        let word = unsafe { (&m as *const UdmMsg).cast::<u64>().read() };
        assert_eq!(word, h.pack());
    }

    #[test]
    fn layouts_are_checked_and_fit() {
        assert_eq!(UdmLayout::new(0, 8, 4096), Err(UdmGeometryError::Nodes(0)));
        assert_eq!(
            UdmLayout::new(65, 8, 4096),
            Err(UdmGeometryError::Nodes(65))
        );
        assert_eq!(
            UdmLayout::new(2, 3, 4096),
            Err(UdmGeometryError::FastCap(3))
        );
        assert_eq!(
            UdmLayout::new(2, 8, 5000),
            Err(UdmGeometryError::Buffer(5000))
        );
        let l = UdmLayout::new(3, 8, 1 << 20).unwrap();
        assert_eq!(l.buffer_cap, 8192);
        assert_eq!(l.rings_off % PAGE as u64, 0);
        assert!(l.line_off(2) + 256 <= l.rings_off);
        assert!(l.ring_off(2, 2) + l.ring_bytes <= l.job_size);
        assert_eq!(l.ring_off(1, 0), l.rings_off + 3 * l.ring_bytes);
        assert!(l.divert_off + 192 + UDM_DIVERT_CAP as u64 * 128 <= l.node_size);
        assert_eq!(UDM_MSGS_PER_PAGE, 32);
        // The largest job with the default rings fits; with the largest
        // rings it does not.
        assert!(UdmLayout::new(UDM_MAX_NODES, UDM_FAST_CAP_DEFAULT, 1 << 20).is_ok());
        assert!(matches!(
            UdmLayout::new(UDM_MAX_NODES, 1024, 1 << 20),
            Err(UdmGeometryError::TooLarge(_))
        ));
    }
}
