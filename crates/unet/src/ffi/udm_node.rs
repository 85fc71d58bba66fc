//! The C ABI of UDM (`crate::udm`): jobs and nodes (`unet_udm_node`),
//! inject and extract, atomicity, and the registration of handlers run
//! as upcalls (their calls are in `upcall`). Same conventions as the
//! rest of [`crate::ffi`]; the declarations are in the UDM part of
//! `include/unet.h`.
//!
//! A node (`unet_udm_node`, [`UnetUdmNode`]) polls until its first
//! handler is registered ([`unet_udm_set_handler`]); from then on it has a
//! handler thread ([`crate::udm::UpcallNode`]) that calls the C handler
//! with a `unet_udm_upcall *` valid for that call only, through which the
//! handler extracts, disposes, peeks and injects.

use std::ffi::{c_char, c_int, c_void};
use std::time::Duration;

use super::session::{session_of, UnetSession};
use super::status::{
    c_bytes, fail, fail_error, guard, guard_value, handle_mut, handle_ref, new_handle, null,
    opt_out, out_ptr, parse_timeout, put_c_string, release, status, take, text, Answer,
    UNET_EEMPTY, UNET_EFULL, UNET_EINVAL, UNET_EIO, UNET_EPEERGONE, UNET_ETIMEDOUT, UNET_ETOOLARGE,
    UNET_ETOOSMALL, UNET_OK,
};
use crate::udm::{
    ExtractError, Header, InjectError, JobConfig, JobTicket, Message, Node, NodeStats, Upcall,
    UpcallError, UpcallNode, MAX_WORDS, UDM_COUNTERS,
};

/// Opaque handle a handler works with (`unet_udm_upcall` in C): an
/// [`Upcall`](crate::udm::Upcall) for the duration of the handler's call.
pub struct UnetUdmUpcall {
    _opaque: [u8; 0],
}

/// Most words in a UDM message.
pub const UNET_UDM_MAX_WORDS: usize = MAX_WORDS;
/// Bytes a job ticket takes as text, with its NUL (`JOB:KEY:NODES`).
pub const UNET_UDM_TICKET_MAX: usize = 48;
/// `unet_udm_beginatom` mask: no handler runs (an atomic section).
pub const UNET_UDM_ATOM_DISABLE: u32 = crate::udm::ATOM_DISABLE;
/// `unet_udm_beginatom` mask: the atomicity timer runs even with no
/// message waiting.
pub const UNET_UDM_ATOM_TIMER_FORCE: u32 = crate::udm::ATOM_TIMER_FORCE;
/// `unet_udm_upcall_error::kind`: a message for a handler index with no
/// handler.
pub const UNET_UDM_NO_HANDLER: c_int = 1;
/// `unet_udm_upcall_error::kind`: a handler returned without extracting or
/// disposing of a message (`dispose-failure`).
pub const UNET_UDM_DISPOSE_FAILURE: c_int = 2;
/// `unet_udm_upcall_error::kind`: a handler panicked (never from C).
pub const UNET_UDM_HANDLER_PANICKED: c_int = 3;

/// How a UDM job is made (`unet_udm_job_config` in C); a zero field takes
/// its default, a NULL config all of them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UnetUdmJobConfig {
    /// Nodes (0: 2).
    pub nodes: u32,
    /// Messages in each fast ring (0: 8).
    pub fast_queue: u32,
    /// Bytes of each node's virtual buffer (0: 1 MiB).
    pub buffer_size: u64,
    /// The atomicity timeout in microseconds (0: 2000).
    pub atomicity_timeout_us: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// What extract and peek say of a message (`unet_udm_header` in C).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UnetUdmHeader {
    /// The sender's rank.
    pub src: u32,
    /// The handler index.
    pub handler: u16,
    /// Words in the message.
    pub len: u16,
}

/// A node's counters (`unet_udm_stats` in C).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UnetUdmStats {
    /// Messages taken from the fast rings.
    pub fast_msgs: u64,
    /// Messages taken from the virtual buffer.
    pub buffered_taken: u64,
    /// Switches to buffered mode by a full fast ring.
    pub switch_queue_full: u64,
    /// Injects held back by overflow control.
    pub overflow_holds: u64,
    /// Handlers run as upcalls.
    pub upcalls: u64,
    /// Messages for a handler index with no handler.
    pub no_handler: u64,
    /// Handlers that returned without taking a message.
    pub dispose_failures: u64,
    /// Handlers that panicked.
    pub handler_panics: u64,
    /// The engine's counters of the node, in `unet stat`'s order.
    pub engine: [u64; UDM_COUNTERS],
}

/// An error that suspended upcalls (`unet_udm_upcall_error` in C).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UnetUdmUpcallError {
    /// [`UNET_UDM_NO_HANDLER`], [`UNET_UDM_DISPOSE_FAILURE`] or
    /// [`UNET_UDM_HANDLER_PANICKED`].
    pub kind: c_int,
    /// The message's handler index.
    pub handler: u16,
    /// Reserved, zero.
    pub reserved: u16,
    /// The message's sender.
    pub src: u32,
}

const _: () = assert!(std::mem::size_of::<UnetUdmJobConfig>() == 24);
const _: () = assert!(std::mem::size_of::<UnetUdmHeader>() == 8);
const _: () = assert!(std::mem::size_of::<UnetUdmStats>() == 8 * (8 + UDM_COUNTERS));
const _: () = assert!(std::mem::size_of::<UnetUdmUpcallError>() == 12);

/// A C handler: called on the node's handler thread.
pub type UnetUdmHandlerFn = unsafe extern "C" fn(up: *mut UnetUdmUpcall, user: *mut c_void);

enum Kind {
    Poll(Box<Node>),
    Upcall(UpcallNode),
    /// Only while turning a polling node into one with upcalls.
    Moving,
}

/// Opaque UDM node handle (`unet_udm_node` in C).
pub struct UnetUdmNode(Kind);

/// The user data of a C handler, moved to the handler thread.
struct UserData(*mut c_void);
// SAFETY: unet_udm_set_handler's contract: the handler and its user data
// may be used from the node's handler thread.
unsafe impl Send for UserData {}

fn fail_inject(e: InjectError) -> c_int {
    let code = match e {
        InjectError::BadDest(_) => UNET_EINVAL,
        InjectError::TooLong(_) => UNET_ETOOLARGE,
        InjectError::Gone(_) => UNET_EPEERGONE,
        InjectError::EngineGone => UNET_EIO,
    };
    fail(code, e.to_string())
}

/// The status of a failed extract, peek or dispose.
pub(super) fn fail_extract(e: ExtractError) -> c_int {
    let code = match e {
        ExtractError::Empty => UNET_EEMPTY,
        ExtractError::TooShort(_) => UNET_ETOOSMALL,
    };
    fail(code, e.to_string())
}

/// The node behind a handle.
///
/// # Safety
/// `n` is NULL or a live handle used by this thread only.
unsafe fn node<'a>(n: *mut UnetUdmNode) -> Result<&'a mut UnetUdmNode, c_int> {
    // SAFETY: per this function's contract.
    unsafe { handle_mut(n, "node") }
}

/// The words argument.
///
/// # Safety
/// `words` is NULL or `n` readable words.
pub(super) unsafe fn words_in<'a>(words: *const u64, n: usize) -> Result<&'a [u64], c_int> {
    if n == 0 {
        Ok(&[])
    } else if words.is_null() {
        Err(null("words"))
    } else if n > MAX_WORDS {
        Err(fail(
            UNET_ETOOLARGE,
            format!("{n} words: a message has at most {MAX_WORDS}"),
        ))
    } else {
        // SAFETY: non-NULL with n readable words per the contract.
        Ok(unsafe { std::slice::from_raw_parts(words, n) })
    }
}

/// The room for words.
///
/// # Safety
/// `words` is NULL or `cap` writable words.
unsafe fn words_out<'a>(words: *mut u64, cap: usize) -> Result<&'a mut [u64], c_int> {
    if cap == 0 {
        Ok(&mut [])
    } else if words.is_null() {
        Err(null("words"))
    } else {
        // SAFETY: non-NULL with cap writable words per the contract.
        Ok(unsafe { std::slice::from_raw_parts_mut(words, cap) })
    }
}

/// Store a header, if asked for.
///
/// # Safety
/// `out` is NULL or writable.
pub(super) unsafe fn put_header(out: *mut UnetUdmHeader, src: u32, handler: u16, len: usize) {
    // SAFETY: NULL or writable per the contract.
    if let Some(o) = unsafe { opt_out(out) } {
        o.write(UnetUdmHeader {
            src,
            handler,
            len: len as u16,
        });
    }
}

/// Extract with `f`, reporting as the C calls do.
///
/// # Safety
/// As for [`unet_udm_extract`].
pub(super) unsafe fn extract_with(
    f: impl FnOnce(&mut [u64]) -> Result<Header, ExtractError>,
    words: *mut u64,
    cap: usize,
    out: *mut UnetUdmHeader,
) -> Answer {
    // SAFETY: per the caller's contract.
    let w = unsafe { words_out(words, cap) }?;
    match f(w) {
        Ok(h) => {
            // SAFETY: per the caller's contract.
            unsafe { put_header(out, h.src, h.handler, h.len) };
            Ok(UNET_OK)
        }
        Err(ExtractError::TooShort(n)) => {
            // SAFETY: per the caller's contract.
            unsafe { put_header(out, 0, 0, n) };
            Err(fail_extract(ExtractError::TooShort(n)))
        }
        Err(e) => Err(fail_extract(e)),
    }
}

/// Peek with `f`, copying at most `cap` words.
///
/// # Safety
/// As for [`unet_udm_peek`].
pub(super) unsafe fn peek_with(
    f: impl FnOnce() -> Result<Message, ExtractError>,
    words: *mut u64,
    cap: usize,
    out: *mut UnetUdmHeader,
) -> Answer {
    // SAFETY: per the caller's contract.
    let w = unsafe { words_out(words, cap) }?;
    let m = f().map_err(fail_extract)?;
    let len = m.words().len();
    // SAFETY: per the caller's contract.
    unsafe { put_header(out, m.src, m.handler, len) };
    if w.len() < len {
        return Err(fail_extract(ExtractError::TooShort(len)));
    }
    w[..len].copy_from_slice(m.words());
    Ok(UNET_OK)
}

/// A blocking inject's status.
pub(super) fn inject_status(r: Result<(), InjectError>) -> Answer {
    r.map_err(fail_inject)?;
    Ok(UNET_OK)
}

/// A non-blocking inject's status: [`UNET_EFULL`] when it could not go.
pub(super) fn inject_result(r: Result<bool, InjectError>) -> Answer {
    match r.map_err(fail_inject)? {
        true => Ok(UNET_OK),
        false => Err(fail(UNET_EFULL, "the message cannot go now")),
    }
}

/// A dispose's status.
pub(super) fn dispose_status(r: Result<(), ExtractError>) -> Answer {
    r.map_err(fail_extract)?;
    Ok(UNET_OK)
}

impl UnetUdmNode {
    fn inject(&mut self, d: u32, h: u16, w: &[u64]) -> Result<(), InjectError> {
        match &mut self.0 {
            Kind::Poll(n) => n.inject(d, h, w),
            Kind::Upcall(n) => n.inject(d, h, w),
            Kind::Moving => Err(InjectError::EngineGone),
        }
    }
    fn injectc(&mut self, d: u32, h: u16, w: &[u64]) -> Result<bool, InjectError> {
        match &mut self.0 {
            Kind::Poll(n) => n.injectc(d, h, w),
            Kind::Upcall(n) => n.injectc(d, h, w),
            Kind::Moving => Err(InjectError::EngineGone),
        }
    }
    fn extract(&mut self, w: &mut [u64]) -> Result<Header, ExtractError> {
        match &mut self.0 {
            Kind::Poll(n) => n.extract(w),
            Kind::Upcall(n) => n.extract(w),
            Kind::Moving => Err(ExtractError::Empty),
        }
    }
    fn peek(&mut self) -> Result<Message, ExtractError> {
        match &mut self.0 {
            Kind::Poll(n) => n.peek(),
            Kind::Upcall(n) => n.peek(),
            Kind::Moving => Err(ExtractError::Empty),
        }
    }
    fn dispose(&mut self) -> Result<(), ExtractError> {
        match &mut self.0 {
            Kind::Poll(n) => n.dispose(),
            Kind::Upcall(n) => n.dispose(),
            Kind::Moving => Err(ExtractError::Empty),
        }
    }
    fn message_available(&mut self) -> bool {
        match &mut self.0 {
            Kind::Poll(n) => n.message_available(),
            Kind::Upcall(n) => n.message_available(),
            Kind::Moving => false,
        }
    }
    fn wait(&mut self, t: Option<Duration>) -> bool {
        match &mut self.0 {
            Kind::Poll(n) => n.wait(t),
            Kind::Upcall(n) => n.wait(t),
            Kind::Moving => false,
        }
    }
    fn beginatom(&mut self, m: u32) {
        match &mut self.0 {
            Kind::Poll(n) => n.beginatom(m),
            Kind::Upcall(n) => n.beginatom(m),
            Kind::Moving => {}
        }
    }
    fn endatom(&mut self, m: u32) {
        match &mut self.0 {
            Kind::Poll(n) => n.endatom(m),
            Kind::Upcall(n) => n.endatom(m),
            Kind::Moving => {}
        }
    }
    fn stats(&mut self) -> NodeStats {
        match &mut self.0 {
            Kind::Poll(n) => n.stats(),
            Kind::Upcall(n) => n.stats(),
            Kind::Moving => NodeStats::default(),
        }
    }
    fn rank(&self) -> u32 {
        match &self.0 {
            Kind::Poll(n) => n.rank(),
            Kind::Upcall(n) => n.rank(),
            Kind::Moving => u32::MAX,
        }
    }
    fn nodes(&self) -> u32 {
        match &self.0 {
            Kind::Poll(n) => n.nodes(),
            Kind::Upcall(n) => n.nodes(),
            Kind::Moving => 0,
        }
    }
}

/// Create a UDM job (`cfg` NULL: the defaults) and write its ticket,
/// `JOB:KEY:NODES`, as a NUL-terminated string into `ticket` (at least
/// [`UNET_UDM_TICKET_MAX`] bytes). Hand the ticket to the processes that
/// join. The job ends when the session closes and every node has left.
///
/// # Safety
/// `session` NULL or live; `cfg` NULL or readable; `ticket` NULL or
/// `ticket_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_job_create(
    session: *const UnetSession,
    cfg: *const UnetUdmJobConfig,
    ticket: *mut c_char,
    ticket_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract (the session and the
        // config only read).
        let (s, c) = unsafe { (session_of(session)?, cfg.as_ref()) };
        if ticket.is_null() {
            return Err(null("ticket"));
        }
        let c = c.copied().unwrap_or_default();
        let d = JobConfig::default();
        let jc = JobConfig {
            nodes: if c.nodes == 0 { d.nodes } else { c.nodes },
            fast_queue: if c.fast_queue == 0 {
                d.fast_queue
            } else {
                c.fast_queue
            },
            buffer_size: if c.buffer_size == 0 {
                d.buffer_size
            } else {
                c.buffer_size
            },
            atomicity_timeout: if c.atomicity_timeout_us == 0 {
                d.atomicity_timeout
            } else {
                Duration::from_micros(c.atomicity_timeout_us as u64)
            },
        };
        let t = s.udm_create_job(&jc).map_err(fail_error)?.to_string();
        // SAFETY: ticket is non-NULL with ticket_len writable bytes per the
        // contract.
        unsafe {
            put_c_string(&t, ticket, ticket_len, |n| {
                fail(UNET_ETOOSMALL, format!("the ticket takes {n} bytes"))
            })
        }?;
        Ok(UNET_OK)
    })
}

/// Join the job of `ticket` (as `unet_udm_job_create` wrote it) as node
/// `rank`, each rank once. A taken rank or a wrong ticket:
/// [`super::UNET_EENGINE`] (see the message).
///
/// # Safety
/// `session` NULL or live; `ticket` NULL or NUL-terminated; `out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_join(
    session: *const UnetSession,
    ticket: *const c_char,
    rank: u32,
    out: *mut *mut UnetUdmNode,
) -> c_int {
    // SAFETY: the caller's contract is this function's, and a NULL home
    // is allowed.
    unsafe { unet_udm_join_at(session, ticket, std::ptr::null(), rank, out) }
}

/// Join the job of `ticket` as node `rank` through this session's engine,
/// the job being the engine's at `home` (`"HOST:PORT"`, its UDP address;
/// NULL or empty: this engine's, as [`unet_udm_join`]): the job then
/// spans both engines (`Session::udm_join_at`). A taken rank, a wrong
/// ticket or a home that does not answer: [`super::UNET_EENGINE`] or
/// [`super::UNET_ETIMEDOUT`] (see the message); a home that does not
/// parse: [`UNET_EINVAL`].
///
/// # Safety
/// `session` NULL or live; `ticket` NULL or NUL-terminated; `home` NULL or
/// NUL-terminated; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_join_at(
    session: *const UnetSession,
    ticket: *const c_char,
    home: *const c_char,
    rank: u32,
    out: *mut *mut UnetUdmNode,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract (the session only read).
        let (out, s, ticket, home) = unsafe {
            (
                out_ptr(out, "out")?,
                session_of(session)?,
                c_bytes(ticket),
                c_bytes(home),
            )
        };
        let t: JobTicket = text(ticket.ok_or_else(|| null("ticket"))?, "ticket")?
            .parse()
            .map_err(|e| fail(UNET_EINVAL, e))?;
        let home = match home.map(|b| text(b, "home")).transpose()? {
            None | Some("") => None,
            Some(h) => Some(h.parse::<std::net::SocketAddr>().map_err(|e| {
                fail(
                    UNET_EINVAL,
                    format!("bad home {h:?} (HOST:PORT expected): {e}"),
                )
            })?),
        };
        let n = s.udm_join_at(t, home, rank).map_err(fail_error)?;
        out.write(new_handle(UnetUdmNode(Kind::Poll(Box::new(n)))));
        Ok(UNET_OK)
    })
}

/// The node's rank, or [`UNET_EINVAL`] for NULL.
///
/// # Safety
/// `node` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_rank(node: *const UnetUdmNode) -> i64 {
    guard_value(UNET_EIO as i64, || {
        // SAFETY: NULL or a live handle, only read (this function's
        // contract).
        match unsafe { handle_ref(node, "node") } {
            Ok(n) => n.rank() as i64,
            Err(c) => c as i64,
        }
    })
}

/// Nodes in the node's job, or [`UNET_EINVAL`] for NULL.
///
/// # Safety
/// `node` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_nodes(node: *const UnetUdmNode) -> i64 {
    guard_value(UNET_EIO as i64, || {
        // SAFETY: NULL or a live handle, only read (this function's
        // contract).
        match unsafe { handle_ref(node, "node") } {
            Ok(n) => n.nodes() as i64,
            Err(c) => c as i64,
        }
    })
}

/// Send `nwords` words (at most [`UNET_UDM_MAX_WORDS`]) to node `dest`'s
/// handler `handler`, the whole message or nothing, waiting while it
/// cannot go. [`UNET_EINVAL`] no such node, [`UNET_ETOOLARGE`] too many
/// words, [`UNET_EPEERGONE`] the node left or died.
///
/// # Safety
/// `node` NULL or a live handle used by this thread only; `words` NULL or
/// `nwords` readable words.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_inject(
    node: *mut UnetUdmNode,
    dest: u32,
    handler: u16,
    words: *const u64,
    nwords: usize,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (n, w) = unsafe { (self::node(node)?, words_in(words, nwords)?) };
        inject_status(n.inject(dest, handler, w))
    })
}

/// [`unet_udm_inject`] that never waits: [`UNET_EFULL`] when the message
/// cannot go now (nothing was sent).
///
/// # Safety
/// As for [`unet_udm_inject`].
#[no_mangle]
pub unsafe extern "C" fn unet_udm_injectc(
    node: *mut UnetUdmNode,
    dest: u32,
    handler: u16,
    words: *const u64,
    nwords: usize,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (n, w) = unsafe { (self::node(node)?, words_in(words, nwords)?) };
        inject_result(n.injectc(dest, handler, w))
    })
}

/// Read the next message's words into `words` (room for `cap`) and its
/// header into `*out` (NULL: not wanted), and dispose of it.
/// [`UNET_EEMPTY`] no message; [`UNET_ETOOSMALL`] fewer than its words
/// (`out->len` says how many; the message stays).
///
/// # Safety
/// `node` NULL or a live handle used by this thread only; `words` NULL or
/// `cap` writable words; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_extract(
    node: *mut UnetUdmNode,
    words: *mut u64,
    cap: usize,
    out: *mut UnetUdmHeader,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let n = unsafe { self::node(node) }?;
        // SAFETY: per this function's contract.
        unsafe { extract_with(|w| n.extract(w), words, cap, out) }
    })
}

/// Copy the next message as [`unet_udm_extract`] does, leaving it there.
///
/// # Safety
/// As for [`unet_udm_extract`].
#[no_mangle]
pub unsafe extern "C" fn unet_udm_peek(
    node: *mut UnetUdmNode,
    words: *mut u64,
    cap: usize,
    out: *mut UnetUdmHeader,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let n = unsafe { self::node(node) }?;
        // SAFETY: per this function's contract.
        unsafe { peek_with(|| n.peek(), words, cap, out) }
    })
}

/// Free the next message; [`UNET_EEMPTY`] when there is none.
///
/// # Safety
/// `node` NULL or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_dispose(node: *mut UnetUdmNode) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        dispose_status(unsafe { self::node(node) }?.dispose())
    })
}

/// The message-available flag: 1 or 0 ([`UNET_EINVAL`] for NULL).
///
/// # Safety
/// `node` NULL or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_message_available(node: *mut UnetUdmNode) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        Ok(unsafe { self::node(node) }?.message_available() as c_int)
    })
}

/// Wait at most `timeout_us` microseconds (-1: forever) for a message: 1
/// when one is available, [`UNET_ETIMEDOUT`] otherwise. With handlers, in
/// an atomic section (no handler takes it).
///
/// # Safety
/// `node` NULL or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_wait(node: *mut UnetUdmNode, timeout_us: i64) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let n = unsafe { self::node(node) }?;
        if n.wait(parse_timeout(timeout_us)?) {
            Ok(1)
        } else {
            Err(fail(UNET_ETIMEDOUT, "no message in time"))
        }
    })
}

/// Begin an atomic section: set the bits of `mask`
/// ([`UNET_UDM_ATOM_DISABLE`], [`UNET_UDM_ATOM_TIMER_FORCE`]).
///
/// # Safety
/// `node` NULL or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_beginatom(node: *mut UnetUdmNode, mask: u32) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe { self::node(node) }?.beginatom(mask);
        Ok(UNET_OK)
    })
}

/// End an atomic section: clear the bits of `mask` (and do the deferred
/// work of a handler's `atomicity-extend`).
///
/// # Safety
/// `node` NULL or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_endatom(node: *mut UnetUdmNode, mask: u32) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe { self::node(node) }?.endatom(mask);
        Ok(UNET_OK)
    })
}

/// The node's counters into `*out`.
///
/// # Safety
/// `node` NULL or a live handle used by this thread only; `out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_get_stats(
    node: *mut UnetUdmNode,
    out: *mut UnetUdmStats,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (n, out) = unsafe { (self::node(node)?, out_ptr(out, "out")?) };
        let s = n.stats();
        out.write(UnetUdmStats {
            fast_msgs: s.fast_msgs,
            buffered_taken: s.buffered_taken,
            switch_queue_full: s.switch_queue_full,
            overflow_holds: s.overflow_holds,
            upcalls: s.upcalls,
            no_handler: s.no_handler,
            dispose_failures: s.dispose_failures,
            handler_panics: s.handler_panics,
            engine: s.engine,
        });
        Ok(UNET_OK)
    })
}

/// Register `handler` (with `user`) for messages of handler index `index`;
/// NULL removes it. The first registration gives the node its handler
/// thread: from then on a message that arrives outside an atomic section
/// calls its handler on that thread, in an atomic section, with an upcall
/// handle through which it must extract or dispose of at least one
/// message. A message with no handler, or a handler that takes none,
/// suspends upcalls until [`unet_udm_take_error`].
///
/// # Safety
/// `node` NULL or a live handle used by this thread only; `handler` and
/// `user` may be used from another thread of the process, until the
/// handler is replaced or the node released.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_set_handler(
    node: *mut UnetUdmNode,
    index: u16,
    handler: Option<UnetUdmHandlerFn>,
    user: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let n = unsafe { self::node(node) }?;
        if let Kind::Poll(_) = n.0 {
            let Kind::Poll(p) = std::mem::replace(&mut n.0, Kind::Moving) else {
                unreachable!("matched above")
            };
            n.0 = Kind::Upcall((*p).into_upcalls().map_err(fail_error)?);
        }
        let Kind::Upcall(u) = &mut n.0 else {
            return Err(fail(UNET_EIO, "the node was lost turning on its upcalls"));
        };
        match handler {
            None => u.clear_handler(index),
            Some(f) => {
                let user = UserData(user);
                u.set_handler(index, move |up| {
                    let user = &user;
                    let p = (up as *mut Upcall<'_>).cast::<UnetUdmUpcall>();
                    // SAFETY: the C handler's contract (set_handler's); the
                    // upcall handle is valid for this call.
                    unsafe { f(p, user.0) }
                });
            }
        }
        Ok(UNET_OK)
    })
}

/// The error that suspended upcalls into `*out`: 1 when there was one
/// (taking it resumes upcalls), 0 when none.
///
/// # Safety
/// `node` NULL or a live handle used by this thread only; `out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_take_error(
    node: *mut UnetUdmNode,
    out: *mut UnetUdmUpcallError,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (n, out) = unsafe { (self::node(node)?, opt_out(out)) };
        let Kind::Upcall(u) = &mut n.0 else {
            return Ok(0);
        };
        let Some(e) = u.take_error() else {
            return Ok(0);
        };
        let (kind, handler, src) = match e {
            UpcallError::NoHandler { handler, src } => (UNET_UDM_NO_HANDLER, handler, src),
            UpcallError::DisposeFailure { handler, src } => {
                (UNET_UDM_DISPOSE_FAILURE, handler, src)
            }
            UpcallError::Panicked { handler, src } => (UNET_UDM_HANDLER_PANICKED, handler, src),
        };
        if let Some(o) = out {
            o.write(UnetUdmUpcallError {
                kind,
                handler,
                reserved: 0,
                src,
            });
        }
        Ok(1)
    })
}

/// Leave the job and release the handle (its handler thread stops first):
/// senders to the node get [`UNET_EPEERGONE`].
///
/// # Safety
/// `node` NULL or a handle not yet released; invalid after the call.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_leave(node: *mut UnetUdmNode) -> c_int {
    guard(|| {
        // SAFETY: a handle from unet_udm_join, released only here or in
        // unet_udm_node_free (this function's contract).
        let n = unsafe { take(node, "node") }?;
        let r = match n.0 {
            Kind::Poll(p) => p.leave(),
            Kind::Upcall(u) => u.leave(),
            Kind::Moving => Ok(()),
        };
        Ok(status(r))
    })
}

/// Release a node handle (NULL is ignored), leaving as
/// [`unet_udm_leave`] does.
///
/// # Safety
/// `node` NULL or a handle not yet released; invalid after the call.
#[no_mangle]
pub unsafe extern "C" fn unet_udm_node_free(node: *mut UnetUdmNode) {
    // SAFETY: per this function's contract.
    unsafe { release(node) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::*;
    use std::ptr;

    #[test]
    fn null_handles_are_einval() {
        // SAFETY: NULL handles and out-pointers are part of the contract.
        unsafe {
            let mut h = UnetUdmHeader::default();
            assert_eq!(
                unet_udm_extract(ptr::null_mut(), ptr::null_mut(), 0, &mut h),
                UNET_EINVAL
            );
            assert_eq!(
                unet_udm_inject(ptr::null_mut(), 0, 0, ptr::null(), 0),
                UNET_EINVAL
            );
            assert_eq!(unet_udm_upcall_dispose(ptr::null_mut()), UNET_EINVAL);
            assert_eq!(unet_udm_rank(ptr::null()), UNET_EINVAL as i64);
            assert_eq!(unet_udm_leave(ptr::null_mut()), UNET_EINVAL);
            assert_eq!(
                unet_udm_join(ptr::null(), ptr::null(), 0, ptr::null_mut()),
                UNET_EINVAL
            );
            unet_udm_node_free(ptr::null_mut());
        }
    }
}
