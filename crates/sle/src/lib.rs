//! U-Net/SLE: Java applets attached to endpoints, run by JIVE on every send
//! (`doTx`) and every arrival (`doRx`), with the native methods of the
//! U-Net/SLE paper's section 2.1.
//!
//! The natives act on one endpoint through the [`Port`] trait, so the
//! same applet runs in the engine (the default placement) or in the owning
//! process's client library (the `inline` placement). Every native is
//! confined to the applet's own endpoint — its buffer area, its queues and
//! the channels it holds — and treats out-of-range offsets and lengths as a
//! fault of that invocation, never a write elsewhere.
//!
//! # Natives (domain `unet-sle`, class `unet/sle/Natives`)
//!
//! | native | meaning |
//! |---|---|
//! | `doHtoLDMA(byte[] a, int aoff, int useroff, int len)` | copy `len` bytes of the buffer area at `useroff` into `a[aoff..]` |
//! | `doLtoHDMA(byte[] a, int aoff, int useroff, int len)` | copy `a[aoff..aoff+len]` into the buffer area at `useroff` |
//! | `txPush(byte[] a, int aoff, int chan, int len)` | transmit `a[aoff..aoff+len]` on channel `chan` |
//! | `dmaRxd(int[] offsets, int chan, int len)` | push a receive descriptor naming up to 14 buffers (the array must have 14 entries) |
//! | `dmaRxdPayload(byte[] p, int chan, int len)` | push a receive descriptor with `len` ≤ 56 bytes inline |
//! | `getFreeBuffer()` | pop a free buffer's offset, or -1 |
//! | `getFreeBufferLength()` | the endpoint's buffer size |
//! | `newAlignedArray(int n)` | a new byte array of `n` bytes |
//!
//! Added for the paper's protocols (flow control, retransmission):
//!
//! | native | meaning |
//! |---|---|
//! | `now()` | a clock in microseconds (wraps at 2³¹) |
//! | `setTimer(int delayUs, int arg)` | call the applet's `doTimer(int arg)` after `delayUs` microseconds |
//! | `putFreeBuffer(int off)` | give a buffer taken with `getFreeBuffer` back to the free queue |
//! | `sendUser(int chan, int len, int useroff)` | transmit `len` bytes of the buffer area at `useroff` on `chan` without copying through the applet |

use std::time::Duration;

use jive::Limits;

mod applet;
mod clock;
mod natives;
mod port;
mod runner;

pub use applet::{fault_kind, Applet, AppletStats, AttachError, Verified, LEND_MIN};
pub use clock::now_us_since;
pub use natives::{natives, SleHost};
pub use port::Port;
pub use runner::{Outcome, Runner, RunnerConfig, RxFill};
pub use unet_abi::FaultKind;

/// The native domain applets are loaded with.
pub const DOMAIN: &str = "unet-sle";

/// Work budget per invocation of an applet unless its owner sets one:
/// 20 000 units of JIVE fuel, some tens of microseconds, far more than a
/// packet handler needs and little enough that a runaway applet cannot hold
/// up the other endpoints of its engine.
pub const DEFAULT_FUEL: u64 = 20_000;

/// Wall-clock time one invocation of an applet may take whatever work
/// budget it has left (JIVE's [`Limits::max_time`], a watchdog): 10 ms.
/// The clock is read only once an invocation has done a slice of
/// [`jive::TIME_SLICE`] units of work, so it costs the short invocations
/// nothing; it stops one whose budget, set high by its owner, does not
/// bound its time.
pub const DEFAULT_MAX_TIME: std::time::Duration = std::time::Duration::from_millis(10);

/// An applet placed in the engine whose invocations run long gets at most
/// 1/APPLET_SHARE of the engine's time.
const APPLET_SHARE: u32 = 10;
/// Invocations shorter than this are never paused after...
const APPLET_FREE: Duration = Duration::from_micros(20);

/// How long the engine holds back an applet after one of its invocations
/// that took `spent` and used `fuel` units of work: nine times as long
/// when it was long *and* busy (one that was only preempted, little work
/// done, is not the applet's fault), so that an applet gets at most a
/// tenth of the engine; `None` otherwise.
pub fn pause_after(spent: Duration, fuel: u64) -> Option<Duration> {
    (spent > APPLET_FREE && fuel > ENGINE_EXACT_FUEL).then(|| spent * (APPLET_SHARE - 1))
}

/// How long the engine holds back an applet after attaching it (loading
/// and verifying is applet work too), `spent` being the time that took.
pub fn pause_after_load(spent: Duration) -> Option<Duration> {
    (spent > APPLET_FREE).then(|| spent * (APPLET_SHARE - 1))
}

/// Applets placed in the engine have one short invocation in this many
/// timed (see [`Applet::set_time_sampling`]): the two reads of the
/// time-stamp counter cost about as much as RawUnet's whole invocation
/// where the counter is virtualised (some 20 ns each in a virtual
/// machine), so one in 64 keeps them under a nanosecond a message...
pub const ENGINE_TIME_SAMPLE: u32 = 64;
/// ...and every invocation that used more work than this timed exactly:
/// the engine holds back an applet whose invocations are long and busy
/// ([`pause_after`]); nor is an invocation that used less paused after.
pub const ENGINE_EXACT_FUEL: u64 = 2_000;

/// The limits an applet runs under by default: [`DEFAULT_FUEL`],
/// [`DEFAULT_MAX_TIME`], and JIVE's
/// default call depth and heap quota.
pub fn default_limits() -> Limits {
    Limits {
        fuel: DEFAULT_FUEL,
        max_time: Some(DEFAULT_MAX_TIME),
        ..Limits::default()
    }
}

/// Faults in a row after which an applet is detached.
pub const MAX_CONSECUTIVE_FAULTS: u32 = 16;

#[cfg(test)]
mod tests {
    use super::*;

    /// An invocation that used at most [`ENGINE_EXACT_FUEL`] is never
    /// paused after, however long it took (the runner skips the pause's
    /// arithmetic for it on that ground); one that used more and took
    /// longer than the free time is, nine times as long.
    #[test]
    fn only_a_busy_long_invocation_is_paused_after() {
        let long = Duration::from_millis(5);
        assert_eq!(pause_after(long, ENGINE_EXACT_FUEL), None);
        assert_eq!(pause_after(long, 0), None);
        assert_eq!(pause_after(APPLET_FREE, ENGINE_EXACT_FUEL + 1), None);
        assert_eq!(
            pause_after(long, ENGINE_EXACT_FUEL + 1),
            Some(long * (APPLET_SHARE - 1))
        );
    }
}
