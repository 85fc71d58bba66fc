//! What an applet's natives act on: one endpoint.

use std::ptr::NonNull;

use unet_abi::RecvDesc;

/// The endpoint an applet is attached to, as its host gives it: the
/// buffer area, the queues and the channels of that endpoint only. A host
/// (the engine, or the client library for the inline placement) implements
/// this; the applet's clock and timers are its own (see
/// [`crate::Runner`]).
pub trait Port {
    /// Size of the buffer area (constant for the endpoint's lifetime: an
    /// applet reads it once, when it is loaded).
    fn area_size(&self) -> u64;
    /// The buffer area's first byte: `area_size()` bytes, readable and
    /// writable for as long as this endpoint is bound to an invocation.
    /// The natives check every range against `area_size()` and copy bytes
    /// in and out through this pointer; they never interpret the area in
    /// place (the application may write it at any time).
    fn area(&mut self) -> NonNull<u8>;
    /// The endpoint's receive buffer size (constant, as `area_size`).
    fn buffer_size(&self) -> u32;
    /// Pop a free buffer (already checked to lie in the buffer area).
    fn pop_free(&mut self) -> Option<u32>;
    /// Give a buffer back to the free queue.
    fn push_free(&mut self, off: u32) -> bool;
    /// Transmit a message on a channel this endpoint holds.
    fn tx_push(&mut self, chan: u16, data: &[u8]) -> Result<(), String>;
    /// [`Port::tx_push`]'s common case: transmit if that succeeds
    /// at once, else return false having done nothing (`tx_push` then
    /// runs, waits if it must and says why it fails). The compiled
    /// `txPush` calls this without the native's marshalling. The default
    /// always declines.
    fn try_tx_push(&mut self, _chan: u16, _data: &[u8]) -> bool {
        false
    }
    /// Push a receive descriptor to the user; false when the queue is full
    /// (the message is dropped and counted, and the buffers it names go
    /// back to the free queue). The descriptor is lent, not moved: it is
    /// 64 bytes, and through the natives' `dyn` call a move would copy it
    /// once more on its way to the queue.
    fn push_recv(&mut self, desc: &RecvDesc) -> bool;
    /// [`Port::push_recv`] of a descriptor of a `len`-byte message on
    /// channel `chan` in the one buffer at `off` (already checked to lie
    /// in the buffer area): `dmaRxd`'s common case. A host that can write
    /// it straight into its queue does so (no descriptor built and
    /// copied); the default builds one.
    fn push_recv_buffer(&mut self, chan: u16, len: u32, off: u32) -> bool {
        let mut d = RecvDesc {
            len,
            channel: chan,
            nbufs: 1,
            ..Default::default()
        };
        d.set_offset(0, off);
        self.push_recv(&d)
    }
    /// [`Port::push_recv`] of a descriptor holding `data` (at most
    /// [`unet_abi::INLINE_MAX`] bytes, which the caller checked) inline,
    /// from channel `chan`: `dmaRxdPayload`. Written straight into the
    /// queue by a host that can; the default builds a descriptor.
    fn push_recv_inline(&mut self, chan: u16, data: &[u8]) -> bool {
        let len = data.len().min(unet_abi::INLINE_MAX);
        let mut d = RecvDesc {
            len: len as u32,
            channel: chan,
            flags: unet_abi::RECV_INLINE,
            ..Default::default()
        };
        d.data[..len].copy_from_slice(&data[..len]);
        self.push_recv(&d)
    }
}
