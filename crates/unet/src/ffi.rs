//! The C ABI: `extern "C"` functions over the Rust API, for other languages
//! to bind. The header is `include/unet.h`; the two must match exactly.
//!
//! Conventions:
//!
//! * Objects are opaque handles (`unet_engine*`, `unet_session*`,
//!   `unet_endpoint*`, and VIA's `unet_region*`, `unet_cq*`, `unet_vi*`,
//!   ...): boxed Rust values, created by `*_start`, `*_connect`,
//!   `*_embedded`, `*_create`, `*_listen` or `unet_register_memory` and
//!   released by the matching `*_stop`, `*_close` or `*_free`, which accept
//!   NULL.
//! * Functions return an `int`: 0 (or 1 for "got one" where documented) on
//!   success, a negative [`UNET_EFULL`]… status on failure. The thread's last
//!   failure is described by [`unet_last_error_message`].
//! * Every pointer is checked for NULL ([`UNET_EINVAL`]); no panic crosses
//!   the boundary (it is reported as [`UNET_EIO`]).
//! * An endpoint or a VI must be used by one thread at a time. A session,
//!   an engine, a memory region, a completion queue and a VI server may be
//!   shared between threads.
//!
//! One module per object: `status` (the status codes, the last error and
//! the checks every entry point makes), `engine`, `session`, `endpoint`,
//! VIA's `region`, `cq`, `vi_server` (with its connection requests and
//! `unet_vi_connect`), `vi` and `vi_direct` (a VI's data path lent to a
//! binding), and UDM's `udm_node` and `upcall`. Everything is exported
//! from here.
//!
//! `unsafe` is allowed here: every entry point takes raw pointers from its
//! caller, and is exported unmangled.

mod cq;
mod endpoint;
mod engine;
mod region;
mod session;
mod status;
mod udm_node;
mod upcall;
mod vi;
mod vi_direct;
mod vi_server;

pub use cq::*;
pub use endpoint::*;
pub use engine::*;
pub use region::*;
pub use session::*;
pub use status::*;
pub use udm_node::*;
pub use upcall::*;
pub use vi::*;
pub use vi_direct::*;
pub use vi_server::*;

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;
    use std::ptr;

    #[test]
    fn null_pointers_are_einval() {
        // SAFETY: NULL handles and out-pointers are part of the contract.
        unsafe {
            assert_eq!(
                unet_engine_start(ptr::null(), ptr::null(), ptr::null_mut()),
                UNET_EINVAL
            );
            assert_eq!(unet_send(ptr::null_mut(), 0, ptr::null(), 0), UNET_EINVAL);
            assert_eq!(unet_endpoint_id(ptr::null()), UNET_EINVAL as i64);
            assert_eq!(unet_engine_udp_port(ptr::null()), UNET_EINVAL);
            unet_engine_stop(ptr::null_mut());
            unet_session_close(ptr::null_mut());
            unet_endpoint_close(ptr::null_mut());
        }
        // SAFETY: the message is a NUL-terminated string owned by this thread.
        let m = unsafe { CStr::from_ptr(unet_last_error_message()) };
        assert!(!m.to_bytes().is_empty());
    }
}
