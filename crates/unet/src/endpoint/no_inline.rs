//! A build without the inline placement (feature `inline` off): no applet
//! ever runs in this process, and the library links neither JIVE nor its
//! compiler. An inline attach is refused with a clear error; nothing else
//! changes.

use std::collections::VecDeque;
use std::time::Instant;

use unet_abi::RecvDesc;

use super::{Endpoint, Recv};
use crate::{AppletOptions, Channel, Error, RecvError, SendError};

/// Never constructed: without the feature no inline applet exists.
pub(super) enum InlineRunner {}

/// An endpoint's inline applet (never one) and what it delivered (never
/// anything).
#[derive(Default)]
pub(super) struct InlineState {
    pub(super) runner: Option<Box<InlineRunner>>,
    pub(super) rx: bool,
    pub(super) rxq: VecDeque<RecvDesc>,
}

impl Endpoint {
    pub(super) fn attach_inline(
        &mut self,
        _class: &[u8],
        _opts: AppletOptions,
    ) -> Result<(), Error> {
        Err(Error::Unsupported(
            "this build of the unet library has no inline placement \
             (it was built without the `inline` feature); attach the applet \
             with Placement::Engine"
                .into(),
        ))
    }

    pub(super) fn end_inline(&mut self) {
        self.inline.rx = !self.inline.rxq.is_empty();
    }

    #[inline]
    pub(super) fn inline_timer_at(&self) -> Option<Instant> {
        match self.inline.runner.as_deref() {
            Some(r) => match *r {},
            None => None,
        }
    }

    pub(super) fn flush_counters(&mut self) {}

    pub(super) fn send_inline(&mut self, _ch: Channel, _data: &[u8]) -> Result<(), SendError> {
        Err(SendError::AppletFault)
    }

    pub(super) fn try_recv_inline(&mut self, buf: &mut [u8]) -> Result<Option<Recv>, RecvError> {
        self.inline.rx = false;
        self.try_recv_plain(buf)
    }
}
