//! The counters segment: engine-wide and per-endpoint counters in shared
//! memory, written by the engine thread only (plain load + store, no
//! read-modify-write needed with one writer) and read live by `unet stat`.
//!
//! `unsafe` is allowed here: the counters segment is shared memory, its
//! header and slots reached through pointers into the mapping.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

use unet_abi::*;

use unet_sys::Segment;

/// The engine's counters.
pub struct Counters {
    seg: Segment,
    max_endpoints: u32,
    /// A read-only descriptor of the same memory, the one `unet stat` gets
    /// (it cannot map it writable).
    ro: std::os::fd::OwnedFd,
}

impl Counters {
    /// Create a counters segment with `max_endpoints` endpoint slots.
    pub fn create(max_endpoints: u32, engine_id: u64) -> io::Result<Counters> {
        let seg = Segment::create("unet-counters", counters_segment_size(max_endpoints))?;
        // SAFETY: fresh zeroed segment large enough for the header; not
        // shared yet.
        unsafe {
            let h = seg.ptr().as_ptr() as *mut CountersHeader;
            (*h).magic = COUNTERS_MAGIC;
            (*h).version = VERSION;
            (*h).max_endpoints = max_endpoints;
            (*h).engine_id = engine_id;
            (*h).pid = std::process::id();
        }
        // Opened read-only (and close-on-exec, as std opens every file).
        let ro = std::fs::File::open(format!("/proc/self/fd/{}", seg.fd().as_raw_fd()))?.into();
        Ok(Counters {
            seg,
            max_endpoints,
            ro,
        })
    }

    fn header(&self) -> &CountersHeader {
        // SAFETY: the segment starts with a CountersHeader we initialised.
        unsafe { self.seg.ptr().cast::<CountersHeader>().as_ref() }
    }

    /// The counters of the endpoint in slot `i` (None when out of range).
    #[inline]
    pub(crate) fn slot(&self, i: usize) -> Option<&EndpointSlot> {
        if i >= self.max_endpoints as usize {
            return None;
        }
        let off = ENDPOINT_SLOTS_OFF + i * std::mem::size_of::<EndpointSlot>();
        // SAFETY: i < max_endpoints, so the slot lies inside the segment
        // (counters_segment_size); slots are 8-byte aligned.
        Some(unsafe { self.seg.ptr().add(off).cast::<EndpointSlot>().as_ref() })
    }

    /// Add `n` to an engine counter.
    #[inline]
    pub fn engine(&self, c: EngineCounter, n: u64) {
        self.engine_idx(c as usize, n);
    }

    /// Add `n` to engine counter number `i` (ignored when out of range).
    #[inline]
    pub fn engine_idx(&self, i: usize, n: u64) {
        if let Some(a) = self.header().engine.get(i) {
            a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        }
    }

    /// Read an engine counter.
    pub fn engine_value(&self, c: EngineCounter) -> u64 {
        self.header().engine[c as usize].load(Ordering::Relaxed)
    }

    /// Add `n` to a counter of the endpoint in `slot`.
    #[inline]
    pub fn ep(&self, slot: usize, c: EndpointCounter, n: u64) {
        if let Some(s) = self.slot(slot) {
            let a = &s.counters[c as usize];
            a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        }
    }

    /// Set a level (a counter that is not a count, such as
    /// `AppletCompiled`) of the endpoint in `slot`.
    #[inline]
    pub fn set_ep(&self, slot: usize, c: EndpointCounter, v: u64) {
        if let Some(s) = self.slot(slot) {
            s.counters[c as usize].store(v, Ordering::Relaxed);
        }
    }

    /// Read a counter of the endpoint in `slot`.
    pub fn ep_value(&self, slot: usize, c: EndpointCounter) -> u64 {
        self.slot(slot)
            .map_or(0, |s| s.counters[c as usize].load(Ordering::Relaxed))
    }

    /// Copy an endpoint's client counters (read from its header: the
    /// client's word, any value) into its slot, for `unet stat`.
    pub fn mirror_client(&self, slot: usize, client: &[AtomicU64; CLIENT_COUNTERS]) {
        if let Some(s) = self.slot(slot) {
            for (dst, src) in s.client.iter().zip(client) {
                dst.store(src.load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
    }

    /// Claim a slot for a new endpoint: counters reset, then marked live.
    pub fn open_slot(&self, slot: usize, endpoint_id: u32, pid: u32) {
        if let Some(s) = self.slot(slot) {
            for c in s.counters.iter().chain(&s.client) {
                c.store(0, Ordering::Relaxed);
            }
            s.endpoint_id.store(endpoint_id, Ordering::Relaxed);
            s.pid.store(pid, Ordering::Relaxed);
            s.channels_peak.store(0, Ordering::Relaxed);
            s.live.store(1, Ordering::Release);
        }
    }

    /// Record the most channel tags an endpoint held at once.
    pub fn set_channels_peak(&self, slot: usize, n: u32) {
        if let Some(s) = self.slot(slot) {
            s.channels_peak.store(n, Ordering::Relaxed);
        }
    }

    /// The endpoint id in `slot`, if the slot is live.
    pub fn slot_endpoint(&self, slot: usize) -> Option<u32> {
        let s = self.slot(slot)?;
        (s.live.load(Ordering::Acquire) != 0).then(|| s.endpoint_id.load(Ordering::Relaxed))
    }

    /// The most channel tags the endpoint in `slot` held at once.
    pub fn channels_peak(&self, slot: usize) -> u32 {
        self.slot(slot)
            .map_or(0, |s| s.channels_peak.load(Ordering::Relaxed))
    }

    /// Release a slot.
    pub fn close_slot(&self, slot: usize) {
        if let Some(s) = self.slot(slot) {
            s.live.store(0, Ordering::Release);
        }
    }

    /// VI slot `i` (< [`VI_SLOTS`]), for `unet stat`.
    pub(crate) fn vi_slot(&self, i: usize) -> Option<&ViSlot> {
        if i >= VI_SLOTS {
            return None;
        }
        let off = vi_slots_off(self.max_endpoints) + i * std::mem::size_of::<ViSlot>();
        // SAFETY: i < VI_SLOTS, so the slot lies inside the segment
        // (counters_segment_size); slots are 8-byte aligned; all atomics.
        Some(unsafe { self.seg.ptr().add(off).cast::<ViSlot>().as_ref() })
    }

    /// UDM node slot `i` (< [`udm::UDM_SLOTS`]), for `unet stat`.
    pub(crate) fn udm_slot(&self, i: usize) -> Option<&udm::UdmSlot> {
        if i >= udm::UDM_SLOTS {
            return None;
        }
        let off = udm_slots_off(self.max_endpoints) + i * std::mem::size_of::<udm::UdmSlot>();
        // SAFETY: i < UDM_SLOTS, so the slot lies inside the segment
        // (counters_segment_size); slots are 8-byte aligned; all atomics.
        Some(unsafe { self.seg.ptr().add(off).cast::<udm::UdmSlot>().as_ref() })
    }

    /// A read-only descriptor of the segment (sent to `unet stat`).
    pub fn fd(&self) -> RawFd {
        self.ro.as_raw_fd()
    }
}
