//! The C ABI of an endpoint (`unet_endpoint`): its configuration,
//! channels and applets, messages, U-Net's descriptor queues and its
//! events.

use std::ffi::{c_char, c_int, c_void};
use std::mem::MaybeUninit;
use std::time::Duration;

use unet_abi::{Geometry, RecvDesc, SendStatus};
use unet_control::{EndpointAddr, PathChoice};

use super::session::{session_of, UnetSession};
use super::status::{
    bytes_in, bytes_out, c_bytes, fail, fail_error, guard, guard_value, handle_mut, handle_ref,
    new_handle, null, opt_out, out_ptr, release, status, text, timeout, Answer, UNET_EBADBUF,
    UNET_EBADCHAN, UNET_EENGINE, UNET_EFULL, UNET_EINVAL, UNET_EIO, UNET_EPEERGONE, UNET_ETIMEDOUT,
    UNET_ETOOLARGE, UNET_ETOOSMALL, UNET_OK,
};
use crate::endpoint::{Channel, ChannelOptions, Endpoint, EndpointConfig, Event};
use crate::{RecvError, SendError};

/// `unet_recv_desc::flags`: the payload is inline in `data`.
pub const UNET_RECV_INLINE: u8 = unet_abi::RECV_INLINE;
/// Largest inline payload, the size of `unet_recv_desc::data`.
pub const UNET_INLINE_MAX: usize = unet_abi::INLINE_MAX;
/// Most buffers one received message spans.
pub const UNET_MAX_RX_BUFFERS: usize = unet_abi::MAX_RX_BUFFERS;
/// `unet_push_send`'s position for a direct channel (sent at once).
pub const UNET_POS_SENT: u64 = u64::MAX;

/// `unet_open_channel` path: direct when possible, else the engine.
pub const UNET_PATH_AUTO: c_int = PathChoice::Auto as c_int;
/// `unet_open_channel` path: the direct path or an error.
pub const UNET_PATH_DIRECT: c_int = PathChoice::Direct as c_int;
/// `unet_open_channel` path: always through the engine.
pub const UNET_PATH_ENGINE: c_int = PathChoice::Engine as c_int;

/// `unet_event::kind`: a peer opened a channel to this endpoint.
pub const UNET_EVENT_CHANNEL_OPENED: u32 = 1;
/// `unet_event::kind`: the peer of a channel is gone.
pub const UNET_EVENT_PEER_GONE: u32 = 2;
/// `unet_event::kind`: an applet invocation faulted (`peer_endpoint` holds
/// the fault class).
pub const UNET_EVENT_APPLET_FAULT: u32 = 5;
/// `unet_event::kind`: the applet was detached after repeated faults
/// (`peer_endpoint` holds the fault class).
pub const UNET_EVENT_APPLET_DETACHED: u32 = 6;

/// Opaque endpoint handle (`unet_endpoint` in C).
pub struct UnetEndpoint(Endpoint);

/// Options of a new endpoint (`unet_endpoint_config` in C). Numeric fields
/// that are 0 take their default; `accept` and `managed_buffers` are taken
/// as given (non-zero is true). [`unet_endpoint_config_init`] fills in the
/// defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct UnetEndpointConfig {
    /// Size of the buffer area in bytes (a multiple of 4096).
    pub buffer_area_size: u64,
    /// Size of each receive buffer (a multiple of 64).
    pub buffer_size: u32,
    /// Send queue capacity (a power of two).
    pub send_cap: u32,
    /// Receive queue capacity (a power of two).
    pub recv_cap: u32,
    /// Free queue capacity (a power of two).
    pub free_cap: u32,
    /// Event queue capacity (a power of two).
    pub event_cap: u32,
    /// Accept channels opened by others.
    pub accept: c_int,
    /// Let the library manage the buffer area (`unet_send`); 0 to drive the
    /// queues with `unet_push_send`, `unet_poll_recv_desc`, `unet_post_free`.
    pub managed_buffers: c_int,
}

/// A channel event (`unet_event` in C), 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UnetEvent {
    /// [`UNET_EVENT_CHANNEL_OPENED`] or [`UNET_EVENT_PEER_GONE`].
    pub kind: u32,
    /// The channel concerned (this endpoint's tag for it).
    pub channel: u16,
    /// Whether the channel uses the direct path (opened events).
    pub direct: u8,
    /// The peer's engine address family: 0 local, 4 IPv4, 6 IPv6.
    pub peer_family: u8,
    /// The peer's endpoint id (opened events).
    pub peer_endpoint: u32,
    /// The peer engine's UDP port (0 when local).
    pub peer_port: u16,
    /// Reserved, zero.
    pub reserved: u16,
    /// The peer engine's IP address (IPv4 in the first 4 bytes).
    pub peer_addr: [u8; 16],
}

const _: () = assert!(std::mem::size_of::<UnetEndpointConfig>() == 40);
const _: () = assert!(std::mem::size_of::<UnetEvent>() == 32);
const _: () = assert!(std::mem::size_of::<RecvDesc>() == 64);
const _: () = assert!(std::mem::align_of::<RecvDesc>() == 64);

/// The endpoint behind a handle.
///
/// # Safety
/// `ep` is NULL or a handle from [`unet_endpoint_create`] not yet closed,
/// used by this thread only for the duration of the call.
unsafe fn endpoint<'a>(ep: *mut UnetEndpoint) -> Result<&'a mut Endpoint, c_int> {
    // SAFETY: per this function's contract.
    Ok(&mut unsafe { handle_mut(ep, "endpoint") }?.0)
}

fn fail_send(e: SendError) -> c_int {
    let code = match e {
        SendError::Full => UNET_EFULL,
        SendError::BadChannel => UNET_EBADCHAN,
        SendError::PeerGone => UNET_EPEERGONE,
        SendError::TooLarge => UNET_ETOOLARGE,
        SendError::BadBuffer => UNET_EBADBUF,
        SendError::AppletFault => UNET_EENGINE,
        SendError::Unmanaged => UNET_EINVAL,
    };
    fail(code, e.to_string())
}

/// A timeout in nanoseconds: -1 is forever (None).
fn parse_timeout_ns(t: i64) -> Result<Option<Duration>, c_int> {
    timeout(t, Duration::from_nanos)
}

// -------------------------------------------------------------------------
// Endpoints
// -------------------------------------------------------------------------

fn default_config() -> UnetEndpointConfig {
    let g = Geometry::default();
    let d = EndpointConfig::default();
    UnetEndpointConfig {
        buffer_area_size: g.buffer_area_size,
        buffer_size: g.buffer_size,
        send_cap: g.send_cap,
        recv_cap: g.recv_cap,
        free_cap: g.free_cap,
        event_cap: g.event_cap,
        accept: d.accept as c_int,
        managed_buffers: d.managed_buffers as c_int,
    }
}

/// Fill `cfg` with the defaults (8 KiB buffers, a 4 MiB buffer area, 1024
/// entry queues, 256 events, accepting, managed buffers).
///
/// # Safety
/// `cfg` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_endpoint_config_init(cfg: *mut UnetEndpointConfig) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe { out_ptr(cfg, "cfg") }?.write(default_config());
        Ok(UNET_OK)
    })
}

/// Create an endpoint on `session` with `cfg` (NULL: the defaults).
///
/// # Safety
/// `session` is NULL or a live handle; `cfg` is NULL or readable; `out` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_endpoint_create(
    session: *const UnetSession,
    cfg: *const UnetEndpointConfig,
    out: *mut *mut UnetEndpoint,
) -> c_int {
    // SAFETY: the caller's contract is this function's.
    unsafe { create_endpoint(session, cfg, None, out) }
}

/// Create a *buffered* endpoint on `session` with `cfg` (NULL: the
/// defaults): two-case delivery, a message that finds no room waiting in
/// a virtual buffer of `buffer_limit` bytes (0: the default, 16 MiB) in
/// the engine instead of being dropped (`docs/udm.md`, "U-Net endpoints
/// with two-case delivery"). [`UNET_EINVAL`] for a limit above 1 GiB.
///
/// # Safety
/// As [`unet_endpoint_create`].
#[no_mangle]
pub unsafe extern "C" fn unet_endpoint_create_buffered(
    session: *const UnetSession,
    cfg: *const UnetEndpointConfig,
    buffer_limit: u64,
    out: *mut *mut UnetEndpoint,
) -> c_int {
    let limit = if buffer_limit == 0 {
        crate::endpoint::BUFFERED_DEFAULT
    } else {
        buffer_limit
    };
    // SAFETY: the caller's contract is this function's.
    unsafe { create_endpoint(session, cfg, Some(limit), out) }
}

/// The two create calls.
///
/// # Safety
/// As [`unet_endpoint_create`].
unsafe fn create_endpoint(
    session: *const UnetSession,
    cfg: *const UnetEndpointConfig,
    buffered: Option<u64>,
    out: *mut *mut UnetEndpoint,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract (the session and the config
        // only read).
        let (out, s, c) = unsafe { (out_ptr(out, "out")?, session_of(session)?, cfg.as_ref()) };
        let c = c.copied().unwrap_or_else(default_config);
        let d = default_config();
        let pick = |v: u32, dv: u32| if v == 0 { dv } else { v };
        let geometry = Geometry {
            buffer_size: pick(c.buffer_size, d.buffer_size),
            buffer_area_size: if c.buffer_area_size == 0 {
                d.buffer_area_size
            } else {
                c.buffer_area_size
            },
            send_cap: pick(c.send_cap, d.send_cap),
            recv_cap: pick(c.recv_cap, d.recv_cap),
            free_cap: pick(c.free_cap, d.free_cap),
            event_cap: pick(c.event_cap, d.event_cap),
        };
        let rc = EndpointConfig {
            geometry,
            accept: c.accept != 0,
            managed_buffers: c.managed_buffers != 0,
            buffered,
            ..Default::default()
        };
        let ep = s.create_endpoint(rc).map_err(fail_error)?;
        out.write(new_handle(UnetEndpoint(ep)));
        Ok(UNET_OK)
    })
}

/// Close an endpoint (its peers see its channels gone) and release the
/// handle. NULL is ignored.
///
/// # Safety
/// `ep` is NULL or a handle not yet closed; invalid after the call.
#[no_mangle]
pub unsafe extern "C" fn unet_endpoint_close(ep: *mut UnetEndpoint) {
    // SAFETY: per this function's contract.
    unsafe { release(ep) }
}

/// The endpoint's id in its engine (what peers pass to
/// [`unet_open_channel`]), or [`UNET_EINVAL`] for NULL.
///
/// # Safety
/// `ep` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_endpoint_id(ep: *const UnetEndpoint) -> i64 {
    guard_value(UNET_EIO as i64, || {
        // SAFETY: NULL or a live handle per the contract, only read here.
        match unsafe { handle_ref(ep, "endpoint") } {
            Ok(e) => e.0.id() as i64,
            Err(c) => c as i64,
        }
    })
}

/// The configuration the endpoint was created with (defaults filled in).
///
/// # Safety
/// `ep` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_endpoint_get_config(
    ep: *mut UnetEndpoint,
    out: *mut UnetEndpointConfig,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (ep, out) = unsafe { (endpoint(ep)?, out_ptr(out, "out")?) };
        let g = ep.geometry();
        out.write(UnetEndpointConfig {
            buffer_area_size: g.buffer_area_size,
            buffer_size: g.buffer_size,
            send_cap: g.send_cap,
            recv_cap: g.recv_cap,
            free_cap: g.free_cap,
            event_cap: g.event_cap,
            accept: -1,
            managed_buffers: -1,
        });
        Ok(UNET_OK)
    })
}

/// Accept (non-zero) or refuse (0) channels opened to this endpoint from
/// now on.
///
/// # Safety
/// `ep` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_endpoint_set_accept(ep: *mut UnetEndpoint, accept: c_int) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = unsafe { endpoint(ep) }?;
        Ok(status(ep.set_accept(accept != 0)))
    })
}

// -------------------------------------------------------------------------
// Channels
// -------------------------------------------------------------------------

/// Open a channel to `addr`: `"ID"` or `"local/ID"` for an endpoint of the
/// same engine, `"HOST:PORT/ID"` for one behind another engine's UDP wire.
/// `path`: 0 automatic, 1 direct (or fail), 2 through the engine. Stores
/// the channel tag in `*out_channel`.
///
/// # Safety
/// `ep` is NULL or a live handle; `addr` NULL or NUL-terminated;
/// `out_channel` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_open_channel(
    ep: *mut UnetEndpoint,
    addr: *const c_char,
    path: c_int,
    out_channel: *mut u16,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (ep, out_channel, addr) = unsafe {
            (
                endpoint(ep)?,
                out_ptr(out_channel, "out_channel")?,
                c_bytes(addr),
            )
        };
        let a = text(addr.ok_or_else(|| null("addr"))?, "addr")?;
        let dst: EndpointAddr = a
            .parse()
            .map_err(|e| fail(UNET_EINVAL, format!("bad address {a:?}: {e}")))?;
        let path = match path {
            UNET_PATH_AUTO => PathChoice::Auto,
            UNET_PATH_DIRECT => PathChoice::Direct,
            UNET_PATH_ENGINE => PathChoice::Engine,
            p => return Err(fail(UNET_EINVAL, format!("bad path choice {p}"))),
        };
        let ch = ep
            .open_channel(dst, ChannelOptions { path })
            .map_err(fail_error)?;
        out_channel.write(ch.0);
        Ok(UNET_OK)
    })
}

/// Close a channel; its peer sees it gone.
///
/// # Safety
/// `ep` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_close_channel(ep: *mut UnetEndpoint, channel: u16) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = unsafe { endpoint(ep) }?;
        Ok(status(ep.close_channel(Channel(channel))))
    })
}

/// Attach a U-Net/SLE applet (`len` bytes of a Java class file) to the
/// endpoint; `fuel` and `heap` set the work budget per invocation and the
/// heap quota (0: defaults). [`UNET_EREJECTED`](super::UNET_EREJECTED) when JIVE refuses the class
/// (the reason is in `unet_last_error_message`).
///
/// # Safety
/// `ep` is NULL or a live handle; `class` NULL or `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn unet_attach_applet(
    ep: *mut UnetEndpoint,
    class: *const c_void,
    len: usize,
    fuel: u64,
    heap: u32,
    placement: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = unsafe { endpoint(ep) }?;
        if class.is_null() {
            return Err(null("class"));
        }
        // SAFETY: non-NULL with len readable bytes per the contract.
        let bytes = unsafe { bytes_in(class, len, "class") }?;
        let placement = if placement == 1 {
            crate::Placement::Inline
        } else {
            crate::Placement::Engine
        };
        let opts = crate::AppletOptions {
            fuel,
            heap,
            placement,
        };
        Ok(status(ep.attach_applet(bytes, opts)))
    })
}

/// Detach the endpoint's applet.
///
/// # Safety
/// `ep` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_detach_applet(ep: *mut UnetEndpoint) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = unsafe { endpoint(ep) }?;
        Ok(status(ep.detach_applet()))
    })
}

// -------------------------------------------------------------------------
// Messages
// -------------------------------------------------------------------------

/// Send a copy of `len` bytes at `data` on `channel` (managed buffers, or
/// any direct channel). [`UNET_EFULL`] means retry later.
///
/// # Safety
/// `ep` is NULL or a live handle; `data` is NULL or `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn unet_send(
    ep: *mut UnetEndpoint,
    channel: u16,
    data: *const c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (ep, msg) = unsafe { (endpoint(ep)?, bytes_in(data, len, "data")?) };
        ep.send(Channel(channel), msg).map_err(fail_send)?;
        Ok(UNET_OK)
    })
}

/// One message of a batch for [`unet_send_many`]: `len` bytes at `data`
/// (`data` may be NULL when `len` is 0).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UnetMsg {
    pub data: *const c_void,
    pub len: usize,
}

/// A [`UnetMsg`] whose bytes were checked readable: made only by
/// [`unet_send_many`] for the duration of its call.
#[repr(transparent)]
struct CheckedMsg(UnetMsg);

impl AsRef<[u8]> for CheckedMsg {
    fn as_ref(&self) -> &[u8] {
        if self.0.len == 0 {
            return &[];
        }
        // SAFETY: a CheckedMsg exists only inside unet_send_many, whose
        // contract makes `data` `len` readable bytes for the whole call, and
        // which checked it non-NULL.
        unsafe { std::slice::from_raw_parts(self.0.data.cast::<u8>(), self.0.len) }
    }
}

/// Send a copy of each of the `n` messages at `msgs` on `channel`, in
/// order, until one does not go; `*out_sent` is set to how many went.
/// Returns 0 when at least one went (or `n` is 0), else the status of the
/// first ([`UNET_EFULL`]: retry later). On a direct channel a batch costs
/// less per message than [`unet_send`] in a loop.
///
/// # Safety
/// `ep` is NULL or a live handle; `msgs` is NULL or `n` readable
/// [`UnetMsg`]s, each `data` NULL or `len` readable bytes; `out_sent` NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_send_many(
    ep: *mut UnetEndpoint,
    channel: u16,
    msgs: *const UnetMsg,
    n: usize,
    out_sent: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (ep, out_sent) = unsafe { (endpoint(ep)?, out_ptr(out_sent, "out_sent")?) };
        let out_sent = out_sent.write(0);
        let msgs: &[CheckedMsg] = if n == 0 {
            &[]
        } else if msgs.is_null() {
            return Err(null("msgs"));
        } else {
            // SAFETY: non-NULL with n readable UnetMsgs per the contract;
            // CheckedMsg is a transparent wrapper of UnetMsg.
            unsafe { std::slice::from_raw_parts(msgs.cast::<CheckedMsg>(), n) }
        };
        if let Some(i) = msgs.iter().position(|m| m.0.len > 0 && m.0.data.is_null()) {
            return Err(fail(UNET_EINVAL, format!("msgs[{i}].data is NULL")));
        }
        *out_sent = ep.send_many(Channel(channel), msgs).map_err(fail_send)?;
        Ok(UNET_OK)
    })
}

/// What [`unet_recv_many`] calls for each message: its bytes (in the
/// caller's buffer), length and channel; nonzero to go on, 0 to stop after
/// this one.
pub type UnetRecvFn =
    unsafe extern "C" fn(ctx: *mut c_void, data: *const c_void, len: usize, channel: u16) -> c_int;

/// Take up to `limit` messages that are already waiting, without waiting:
/// each is copied into `buf` (`cap` bytes) and handed to `f` with `ctx`.
/// `*out_count` is set to how many `f` was given. Returns 0, or a negative
/// status as for [`unet_try_recv`] (a message too large for `buf` ends a
/// batch before it; the next call returns [`UNET_ETOOSMALL`] for it).
///
/// # Safety
/// `ep` is NULL or a live handle; `buf` NULL or `cap` writable bytes; `f`
/// NULL or a function safe to call with `ctx` and bytes that stay valid
/// until it returns; `out_count` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_recv_many(
    ep: *mut UnetEndpoint,
    buf: *mut c_void,
    cap: usize,
    limit: usize,
    f: Option<UnetRecvFn>,
    ctx: *mut c_void,
    out_count: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = unsafe { endpoint(ep) }?;
        let f = f.ok_or_else(|| null("f"))?;
        // SAFETY: per this function's contract.
        let (out_count, b) = unsafe {
            (
                out_ptr(out_count, "out_count")?,
                bytes_out(buf, cap, "buf")?,
            )
        };
        let mut handed = 0;
        let r = ep.recv_many(b, limit, |r, m| {
            handed += 1;
            // SAFETY: f is callable with ctx per the contract; m is valid
            // for the call.
            unsafe { f(ctx, m.as_ptr().cast(), m.len(), r.channel.0) != 0 }
        });
        out_count.write(handed);
        match r {
            Ok(_) => Ok(UNET_OK),
            Err(e) => recv_result(Err(e), &mut MaybeUninit::uninit(), None),
        }
    })
}

/// What a receive gives C: 1 with `*out_len` (and `*out_channel`) set, 0
/// for none, or the failure's status.
fn recv_result(
    r: Result<Option<crate::Recv>, RecvError>,
    out_len: &mut MaybeUninit<usize>,
    out_channel: Option<&mut MaybeUninit<u16>>,
) -> Answer {
    match r {
        Ok(Some(m)) => {
            out_len.write(m.len);
            if let Some(c) = out_channel {
                c.write(m.channel.0);
            }
            Ok(1)
        }
        Ok(None) => {
            out_len.write(0);
            Ok(0)
        }
        Err(RecvError::BufferTooSmall(n)) => {
            out_len.write(n);
            Err(fail(
                UNET_ETOOSMALL,
                RecvError::BufferTooSmall(n).to_string(),
            ))
        }
        Err(RecvError::Timeout) => Err(fail(UNET_ETIMEDOUT, "timed out")),
        Err(e @ RecvError::Broken(ch)) => {
            if let Some(c) = out_channel {
                c.write(ch.0);
            }
            Err(fail(UNET_EPEERGONE, e.to_string()))
        }
    }
}

/// Take the next message if one is waiting, copying it into `buf` (`cap`
/// bytes). Returns 1 with `*out_len` and `*out_channel` set when a message
/// was received, 0 when none is waiting, or a negative status:
/// [`UNET_ETOOSMALL`] with the needed size in `*out_len` (the message stays
/// queued), [`UNET_EPEERGONE`] with the channel in `*out_channel` when a
/// direct peer broke the connection. `out_channel` may be NULL.
///
/// # Safety
/// `ep` is NULL or a live handle; `buf` NULL or `cap` writable bytes;
/// `out_len` NULL or writable; `out_channel` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_try_recv(
    ep: *mut UnetEndpoint,
    buf: *mut c_void,
    cap: usize,
    out_len: *mut usize,
    out_channel: *mut u16,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (ep, out_len, out_channel, b) = unsafe {
            (
                endpoint(ep)?,
                out_ptr(out_len, "out_len")?,
                opt_out(out_channel),
                bytes_out(buf, cap, "buf")?,
            )
        };
        recv_result(ep.try_recv(b), out_len, out_channel)
    })
}

/// Receive the next message into `buf`, waiting at most `timeout_ns`
/// nanoseconds (-1: forever; 0: do not wait). Returns 0 with `*out_len` and
/// `*out_channel` set, [`UNET_ETIMEDOUT`] when nothing came, or another
/// negative status as for [`unet_try_recv`].
///
/// # Safety
/// As for [`unet_try_recv`].
#[no_mangle]
pub unsafe extern "C" fn unet_recv(
    ep: *mut UnetEndpoint,
    buf: *mut c_void,
    cap: usize,
    timeout_ns: i64,
    out_len: *mut usize,
    out_channel: *mut u16,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (ep, out_len, out_channel) = unsafe {
            (
                endpoint(ep)?,
                out_ptr(out_len, "out_len")?,
                opt_out(out_channel),
            )
        };
        let timeout = parse_timeout_ns(timeout_ns)?;
        // SAFETY: per this function's contract.
        let b = unsafe { bytes_out(buf, cap, "buf") }?;
        match recv_result(ep.recv(b, timeout).map(Some), out_len, out_channel) {
            Ok(1) => Ok(UNET_OK),
            r => r,
        }
    })
}

/// Wait until a message or an event is waiting, at most `timeout_ns`
/// nanoseconds (-1: forever). Returns 1 when something is waiting, 0 on
/// timeout.
///
/// # Safety
/// `ep` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_wait(ep: *mut UnetEndpoint, timeout_ns: i64) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = unsafe { endpoint(ep) }?;
        let timeout = parse_timeout_ns(timeout_ns)?;
        Ok(ep.wait(timeout) as c_int)
    })
}

// -------------------------------------------------------------------------
// The descriptor level (U-Net's queues)
// -------------------------------------------------------------------------

/// U-Net's transmit: send `len` bytes at `offset` of the buffer area on
/// `channel`. On an engine channel this pushes a send descriptor and stores
/// its queue position in `*out_pos` (see [`unet_send_status`]); the buffer
/// must stay untouched until the status is no longer pending. On a direct
/// channel the bytes are copied at once and the position is `UINT64_MAX`.
/// `out_pos` may be NULL.
///
/// # Safety
/// `ep` is NULL or a live handle; `out_pos` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_push_send(
    ep: *mut UnetEndpoint,
    channel: u16,
    offset: u32,
    len: u32,
    out_pos: *mut u64,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (ep, out_pos) = unsafe { (endpoint(ep)?, opt_out(out_pos)) };
        let pos = ep
            .push_send(Channel(channel), offset, len)
            .map_err(fail_send)?;
        if let Some(p) = out_pos {
            p.write(pos);
        }
        Ok(UNET_OK)
    })
}

/// Completion of the send descriptor at `pos` (from [`unet_push_send`]):
/// 1 sent, 0 pending, or the negative status the engine gave it
/// ([`UNET_EBADCHAN`], [`UNET_EBADBUF`], [`UNET_ETOOLARGE`],
/// [`UNET_EPEERGONE`], [`UNET_EINVAL`] for reserved flags).
///
/// # Safety
/// `ep` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_send_status(ep: *mut UnetEndpoint, pos: u64) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = unsafe { endpoint(ep) }?;
        Ok(match ep.send_status(pos) {
            SendStatus::Sent => 1,
            SendStatus::Pending => 0,
            SendStatus::BadChannel => fail(UNET_EBADCHAN, "send descriptor: bad channel"),
            SendStatus::BadBuffer => fail(UNET_EBADBUF, "send descriptor: bad buffer"),
            SendStatus::BadLength => fail(UNET_ETOOLARGE, "send descriptor: bad length"),
            SendStatus::PeerGone => fail(UNET_EPEERGONE, "send descriptor: peer gone"),
            SendStatus::BadFlags => fail(UNET_EINVAL, "send descriptor: reserved flags"),
            SendStatus::AppletFault => fail(UNET_EENGINE, "send descriptor: the applet faulted"),
            SendStatus::SpineFull => fail(UNET_EFULL, "send descriptor: SPINE is full"),
            SendStatus::SpineRefused => fail(UNET_EENGINE, "send descriptor: SPINE refused it"),
        })
    })
}

/// U-Net's receive: copy the next receive descriptor to `*out` and return
/// 1, or return 0 when none is waiting. For endpoints with
/// `managed_buffers = 0`: the buffers a descriptor names are the
/// application's until it posts them again with [`unet_post_free`].
///
/// # Safety
/// `ep` is NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_poll_recv_desc(ep: *mut UnetEndpoint, out: *mut RecvDesc) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = unsafe { endpoint(ep) }?;
        if out.is_null() {
            return Err(null("out"));
        }
        match ep.poll_recv_desc() {
            Some(d) => {
                // SAFETY: non-NULL and writable per the contract. An
                // unaligned write, so C callers need not honour align 64.
                unsafe { out.write_unaligned(d) };
                Ok(1)
            }
            None => Ok(0),
        }
    })
}

/// Post a free receive buffer at `offset` of the buffer area (a whole
/// buffer must fit). [`UNET_EBADBUF`] when outside the area,
/// [`UNET_EFULL`] when the free queue is full.
///
/// # Safety
/// `ep` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_post_free(ep: *mut UnetEndpoint, offset: u32) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = unsafe { endpoint(ep) }?;
        let g = ep.geometry();
        if offset as u64 + g.buffer_size as u64 > g.buffer_area_size {
            return Err(fail(
                UNET_EBADBUF,
                format!("free buffer offset {offset} outside the buffer area"),
            ));
        }
        ep.post_free(offset)
            .map_err(|e| fail(UNET_EFULL, e.to_string()))?;
        Ok(UNET_OK)
    })
}

fn check_area(ep: &Endpoint, offset: u32, len: usize) -> Result<(), c_int> {
    let area = ep.geometry().buffer_area_size;
    if offset as u64 + len as u64 > area {
        return Err(fail(
            UNET_EBADBUF,
            format!("{len} bytes at {offset} outside the buffer area of {area}"),
        ));
    }
    Ok(())
}

/// Copy `len` bytes from `data` into the buffer area at `offset`.
/// [`UNET_EBADBUF`] when the range is outside the area.
///
/// # Safety
/// `ep` is NULL or a live handle; `data` NULL or `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn unet_write_buffer(
    ep: *mut UnetEndpoint,
    offset: u32,
    data: *const c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = unsafe { endpoint(ep) }?;
        check_area(ep, offset, len)?;
        // SAFETY: per this function's contract.
        let src = unsafe { bytes_in(data, len, "data") }?;
        if !src.is_empty() {
            ep.write_buffer(offset, src);
        }
        Ok(UNET_OK)
    })
}

/// Copy `len` bytes of the buffer area at `offset` into `buf`.
/// [`UNET_EBADBUF`] when the range is outside the area.
///
/// # Safety
/// `ep` is NULL or a live handle; `buf` NULL or `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn unet_read_buffer(
    ep: *mut UnetEndpoint,
    offset: u32,
    buf: *mut c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let ep = unsafe { endpoint(ep) }?;
        check_area(ep, offset, len)?;
        // SAFETY: per this function's contract.
        let dst = unsafe { bytes_out(buf, len, "buf") }?;
        ep.read_buffer(offset, dst);
        Ok(UNET_OK)
    })
}

// -------------------------------------------------------------------------
// Events
// -------------------------------------------------------------------------

/// The next channel event: copies it to `*out` and returns 1, or returns 0
/// when there is none.
///
/// # Safety
/// `ep` is NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_poll_event(ep: *mut UnetEndpoint, out: *mut UnetEvent) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (ep, out) = unsafe { (endpoint(ep)?, out_ptr(out, "out")?) };
        let ev = match ep.poll_event() {
            None => return Ok(0),
            Some(Event::AppletFault { kind }) => UnetEvent {
                kind: UNET_EVENT_APPLET_FAULT,
                peer_endpoint: kind as u32,
                ..Default::default()
            },
            Some(Event::AppletDetached { kind }) => UnetEvent {
                kind: UNET_EVENT_APPLET_DETACHED,
                peer_endpoint: kind as u32,
                ..Default::default()
            },
            Some(Event::PeerGone { channel }) => UnetEvent {
                kind: UNET_EVENT_PEER_GONE,
                channel: channel.0,
                ..Default::default()
            },
            Some(Event::ChannelOpened {
                channel,
                peer,
                direct,
            }) => {
                let mut e = UnetEvent {
                    kind: UNET_EVENT_CHANNEL_OPENED,
                    channel: channel.0,
                    direct: direct as u8,
                    peer_endpoint: peer.id,
                    ..Default::default()
                };
                match peer.host {
                    Some(std::net::SocketAddr::V4(a)) => {
                        e.peer_family = 4;
                        e.peer_port = a.port();
                        e.peer_addr[..4].copy_from_slice(&a.ip().octets());
                    }
                    Some(std::net::SocketAddr::V6(a)) => {
                        e.peer_family = 6;
                        e.peer_port = a.port();
                        e.peer_addr = a.ip().octets();
                    }
                    None => {}
                }
                e
            }
        };
        out.write(ev);
        Ok(1)
    })
}
