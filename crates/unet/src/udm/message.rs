//! What a node's calls give back: the header of an extracted message, a
//! peeked message, the errors of inject and extract, a node's mode and its
//! counters.

use super::{UdmCounter, MAX_WORDS, UDM_COUNTERS};

/// What [`Node::extract`](super::Node::extract) read besides the words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The sender's rank.
    pub src: u32,
    /// The handler index.
    pub handler: u16,
    /// Words in the message.
    pub len: usize,
}

/// A copy of a message ([`Node::peek`](super::Node::peek)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    /// The sender's rank.
    pub src: u32,
    /// The handler index.
    pub handler: u16,
    pub(super) len: usize,
    pub(super) words: [u64; MAX_WORDS],
}

impl Message {
    /// The data words.
    pub fn words(&self) -> &[u64] {
        &self.words[..self.len]
    }
}

/// Why an inject failed (as opposed to "not now", which `injectc` answers
/// with `Ok(false)` and `inject` waits out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectError {
    /// No such rank in the job.
    BadDest(u32),
    /// More than [`MAX_WORDS`] words.
    TooLong(usize),
    /// The destination node left or died.
    Gone(u32),
    /// The engine is gone (the control connection closed) while the
    /// message needed it.
    EngineGone,
}

impl std::fmt::Display for InjectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BadDest(d) => write!(f, "no node {d} in the job"),
            Self::TooLong(n) => write!(f, "{n} words: a message has at most {MAX_WORDS}"),
            Self::Gone(d) => write!(f, "node {d} left the job or died"),
            Self::EngineGone => f.write_str("the engine is gone"),
        }
    }
}

impl std::error::Error for InjectError {}

/// Why an extract, peek or dispose failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtractError {
    /// No message is available (the paper's `bad-dispose`: extracting with
    /// the message-available flag clear is an error).
    Empty,
    /// The caller's words hold fewer than the message's (this many); the
    /// message stays.
    TooShort(usize),
}

impl std::fmt::Display for ExtractError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Empty => f.write_str("no message is available"),
            Self::TooShort(n) => write!(f, "the message has {n} words, more than given room for"),
        }
    }
}

impl std::error::Error for ExtractError {}

/// A node's delivery mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Messages come straight from the senders.
    Fast,
    /// Messages come through the engine and the virtual buffer.
    Buffered,
    /// The node left (or the engine says it is gone).
    Gone,
}

/// What a node's counters say ([`Node::stats`](super::Node::stats)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Messages taken from the fast rings.
    pub fast_msgs: u64,
    /// Messages taken from the virtual buffer.
    pub buffered_taken: u64,
    /// Switches to buffered mode by senders that found their ring full:
    /// always 0 (a full ring makes its sender wait; only the engine
    /// switches a node).
    pub switch_queue_full: u64,
    /// Times senders were held back by overflow control.
    pub overflow_holds: u64,
    /// Handlers run as upcalls ([`UpcallNode`](super::UpcallNode)).
    pub upcalls: u64,
    /// Messages for a handler index with no handler registered.
    pub no_handler: u64,
    /// Handlers that returned without extracting or disposing of a message
    /// (the paper's `dispose-failure`).
    pub dispose_failures: u64,
    /// Handlers that panicked.
    pub handler_panics: u64,
    /// The engine's counters of the node, indexed by [`UdmCounter`].
    pub engine: [u64; UDM_COUNTERS],
}

impl NodeStats {
    /// One of the engine's counters.
    pub fn engine(&self, c: UdmCounter) -> u64 {
        self.engine[c as usize]
    }
}
