//! The C ABI of a VI's data path lent to a binding (`unet_vi_direct`):
//! for language bindings whose calls into the library cost more than the
//! ring's own work, which then read and write a local VI's rings
//! themselves until they hand the path back.

use std::ffi::c_int;
use std::ptr;
use std::time::Duration;

use super::region::{region, UnetRegion};
use super::status::{
    fail, guard, handle_mut, handle_ref, null, out_ptr, UNET_EINUSE, UNET_EINVAL, UNET_ENOTSUP,
    UNET_EREFUSED, UNET_OK,
};
use super::vi::{vi, UnetVi};
use crate::via::{pull_min_bytes, DirectReturn, LendRefusal};

/// A local VI's data path as lent out by [`unet_vi_direct_lend`]
/// (`unet_vi_direct` in C): its two rings and the lines of the connection
/// the borrower reads and writes, then what it starts from and hands
/// back. The rings follow the direct path's layout (`unet_abi`: records
/// of an 8-byte header, tag `(position >> 3) + 1` in its low half, length
/// and the `RECORD_PAD`/`RECORD_REF` flags in its high half, 32-byte
/// aligned); what the peer writes is untrusted.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct UnetViDirect {
    /// The ring this side sends on.
    pub tx: *mut u8,
    /// The ring this side receives from.
    pub rx: *const u8,
    /// Bytes in each ring (a power of two).
    pub ring_size: u64,
    /// The largest payload of one record.
    pub max_len: u64,
    /// Messages of this many bytes or more go as references to the
    /// sender's region: the library's, not the borrower's.
    pub pull_min: u64,
    /// The peer's consumer position of `tx` (read with acquire).
    pub tx_consumed: *const u64,
    /// The peer's sleeping flag (read after a full fence that follows the
    /// publishing store; set: call [`unet_vi_direct_wake`]).
    pub tx_sleeping: *const u32,
    /// This side's consumer position of `rx` (written with release).
    pub rx_consumed: *mut u64,
    /// Non-zero once the peer closed.
    pub peer_closed: *const u32,
    /// Messages and bytes sent on the direct path (two words, this
    /// process's only writer while lent: `unet stat` reads them).
    pub tx_counters: *mut u64,
    /// Messages and bytes received.
    pub rx_counters: *mut u64,
    /// The next position to write in `tx`; the borrower moves it on.
    pub tx_pos: u64,
    /// The next position to read in `rx`; the borrower moves it on.
    pub rx_pos: u64,
    /// The position last published in `rx_consumed`.
    pub rx_published: u64,
    /// Messages the borrower sent (0 when lent; it counts up).
    pub sent: u64,
    /// Their bytes.
    pub sent_bytes: u64,
    /// Messages the borrower placed into its receives.
    pub received: u64,
    /// Their bytes.
    pub received_bytes: u64,
    /// Times a send found the ring full.
    pub tx_full: u64,
    /// The peer's count of this side's messages it has placed (read with
    /// acquire): a message sent as a reference completes once it reaches
    /// the message's number.
    pub tx_placed: *const u64,
    /// This side's count of messages placed (written with release once a
    /// reference's data is copied; then the peer is woken if it sleeps).
    pub rx_placed: *mut u64,
    /// Messages the VI sent before the lending: the borrower's sends are
    /// numbered on from it (its first is `sent_base + 1`).
    pub sent_base: u64,
    /// Messages placed before the lending (this side's count is
    /// `placed_base + received`).
    pub placed_base: u64,
    /// For [`unet_vi_direct_sleep`]: wake once `*tx_placed` reaches this
    /// too (0: not waited for).
    pub wait_placed: u64,
    /// For [`unet_vi_direct_return`]: sends in the ring the peer has not
    /// placed yet, oldest first (NULL when none), which the library then
    /// completes.
    pub unplaced: *const UnetViUnplaced,
    /// How many.
    pub nunplaced: u64,
    /// 1 when this process takes part in asymmetric fences (the peer's
    /// sleeping side makes every such thread execute a full barrier before
    /// it sleeps): then a compiler barrier between publishing and reading
    /// `tx_sleeping` is enough; 0: a full fence is needed there.
    pub asymmetric: u64,
    /// For [`unet_vi_direct_lend`], set by the caller: where the numbers
    /// of the receives posted go (they become the borrower's, in order),
    /// and room for how many (NULL and 0: lend only with none posted).
    pub recv_ids: *mut u64,
    /// That room.
    pub recv_cap: u64,
    /// How many receives were posted, their numbers in `recv_ids`.
    pub nrecv: u64,
}

/// A send the peer has not placed yet, handed back with a lent data path
/// (`unet_vi_unplaced` in C).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UnetViUnplaced {
    /// The descriptor's number (its completion's id).
    pub id: u64,
    /// Its length.
    pub len: u64,
    /// The message's number: it completes once the peer has placed as many.
    pub seq: u64,
}

/// Lend the VI's data path to the caller, which then reads and writes the
/// rings itself (language bindings whose calls into the library cost more
/// than the ring's own work): 0 with `*out` filled. Receives posted become
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<UnetViDirect>() == 240);
const _: () = assert!(std::mem::size_of::<UnetViUnplaced>() == 24);

/// The VI behind a handle, whose data path must be lent.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only for the
/// duration of the call.
unsafe fn lent<'a>(vi: *mut UnetVi) -> Result<&'a mut UnetVi, c_int> {
    // SAFETY: per this function's contract.
    let h = unsafe { handle_mut(vi, "vi") }?;
    if !h.lent {
        return Err(not_lent());
    }
    Ok(h)
}

fn not_lent() -> c_int {
    fail(UNET_EINVAL, "the VI's data path is not lent")
}

/// Lend the VI's data path to the caller, which then reads and writes the
/// rings itself (language bindings whose calls into the library cost more
/// than the ring's own work): 0 with `*out` filled. Receives posted become
/// the borrower's: their numbers, in order, in `out->recv_ids` (room for
/// `out->recv_cap`, set by the caller), how many in `out->nrecv` (their
/// memory is the borrower's to keep registered from then on).
/// [`UNET_EINUSE`] while sends are posted or completions untaken (take
/// them, then try again), or more receives are posted than `recv_cap`;
/// [`UNET_ENOTSUP`] for a VI that can never lend it (between engines,
/// with a completion queue, of reliable reception, strict about receives
/// not posted, or broken). Until [`unet_vi_direct_return`] every other
/// call on the VI but [`unet_vi_direct_sleep`], [`unet_vi_direct_wake`],
/// [`unet_vi_direct_grant`], [`unet_vi_direct_peer_region`],
/// [`unet_vi_id`](super::unet_vi_id), [`unet_vi_is_direct`](super::unet_vi_is_direct), [`unet_vi_close`](super::unet_vi_close) and
/// [`unet_vi_free`](super::unet_vi_free) fails with [`UNET_EINUSE`]. The pointers stay valid
/// until the VI is closed.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only; `out` NULL or
/// readable and writable, its `recv_ids` NULL or `recv_cap` writable
/// numbers.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_direct_lend(vi: *mut UnetVi, out: *mut UnetViDirect) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract (refuses a lent VI).
        let v = unsafe { self::vi(vi) }?;
        if out.is_null() {
            return Err(null("out"));
        }
        // SAFETY: non-NULL and readable (writable) per the contract.
        let (ids, cap) = unsafe { ((*out).recv_ids, (*out).recv_cap) };
        let ids: &mut [u64] = if ids.is_null() || cap == 0 {
            &mut []
        } else {
            // SAFETY: recv_cap writable numbers at recv_ids per the
            // contract; a receive queue holds far fewer than u32::MAX.
            unsafe { std::slice::from_raw_parts_mut(ids, cap.min(u64::from(u32::MAX)) as usize) }
        };
        let (l, nrecv) = match v.lend_direct(ids) {
            Ok(l) => l,
            Err(LendRefusal::Busy) => {
                return Err(fail(
                    UNET_EINUSE,
                    "sends are posted, completions untaken or more receives posted than \
                     recv_cap on this VI",
                ))
            }
            Err(LendRefusal::Never) => {
                return Err(fail(
                    UNET_ENOTSUP,
                    "this VI's data path cannot be lent (between engines, with a completion \
                     queue, of reliable reception, strict about receives not posted, or broken)",
                ))
            }
        };
        let (c, sent_base, placed_base) = (l.conn, l.sent, l.placed);
        let d = UnetViDirect {
            tx: c.tx,
            rx: c.rx,
            ring_size: c.size,
            max_len: c.max_len,
            pull_min: pull_min_bytes(),
            tx_consumed: c.tx_consumed.cast(),
            tx_sleeping: c.tx_sleeping.cast(),
            rx_consumed: c.rx_consumed.cast_mut().cast(),
            peer_closed: c.peer_closed.cast(),
            tx_counters: c.tx_counters.cast_mut().cast(),
            rx_counters: c.rx_counters.cast_mut().cast(),
            tx_pos: c.tx_pos,
            rx_pos: c.rx_pos,
            rx_published: c.rx_published,
            sent: 0,
            sent_bytes: 0,
            received: 0,
            received_bytes: 0,
            tx_full: 0,
            tx_placed: c.tx_placed.cast(),
            rx_placed: c.rx_placed.cast_mut().cast(),
            sent_base,
            placed_base,
            wait_placed: 0,
            unplaced: ptr::null(),
            nunplaced: 0,
            asymmetric: u64::from(unet_sys::asymmetric_fences()),
            recv_ids: ids.as_mut_ptr(),
            recv_cap: ids.len() as u64,
            nrecv: nrecv as u64,
        };
        // SAFETY: out is non-NULL and writable, and vi a live handle
        // (self::vi accepted it), per the contract.
        unsafe {
            out.write(d);
            (*vi).lent = true;
        }
        Ok(UNET_OK)
    })
}

/// Hand a lent data path back: the positions and counts in `*d` (the
/// borrower's, from [`unet_vi_direct_lend`]) become the VI's. Positions
/// the ring's rules cannot produce break the VI ([`UNET_VI_BROKEN`](super::UNET_VI_BROKEN)).
/// 0, or [`UNET_EINVAL`] when the VI is not lent (or for NULL).
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only; `d` NULL or
/// readable.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_direct_return(vi: *mut UnetVi, d: *const UnetViDirect) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (h, d) = unsafe { (handle_mut(vi, "vi")?, handle_ref(d, "d")?) };
        if !h.lent {
            return Err(not_lent());
        }
        let unplaced: &[UnetViUnplaced] = if d.nunplaced == 0 {
            &[]
        } else if d.unplaced.is_null() {
            return Err(null("d->unplaced"));
        } else if d.nunplaced > u64::from(u32::MAX) {
            return Err(fail(UNET_EINVAL, "d->nunplaced is impossibly large"));
        } else {
            // SAFETY: non-NULL with nunplaced readable entries per the
            // contract (a count past what a VI could have outstanding is
            // refused above).
            unsafe { std::slice::from_raw_parts(d.unplaced, d.nunplaced as usize) }
        };
        h.lent = false;
        h.vi.take_back_direct(&DirectReturn {
            tx_pos: d.tx_pos,
            rx_pos: d.rx_pos,
            rx_published: d.rx_published,
            sent: d.sent,
            sent_bytes: d.sent_bytes,
            received: d.received,
            received_bytes: d.received_bytes,
            tx_full: d.tx_full,
            unplaced: unplaced
                .iter()
                .map(|u| (u.id, usize::try_from(u.len).unwrap_or(usize::MAX), u.seq))
                .collect(),
        });
        Ok(UNET_OK)
    })
}

/// Sleep, for the borrower of a lent data path, until a record is at
/// `d->rx_pos` in the receiving ring, the peer closes, or `timeout_us`
/// microseconds pass (at most a second; a wake-up may also be spurious:
/// look at the ring again). `d->rx_pos` is published to the peer first
/// (and becomes `d->rx_published`). 0, or [`UNET_EINVAL`] when the VI is
/// not lent or `d->rx_pos` is not a position the borrower can have
/// reached.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only; `d` NULL or
/// readable and writable.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_direct_sleep(
    vi: *mut UnetVi,
    d: *mut UnetViDirect,
    timeout_us: i64,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (h, d) = unsafe { (handle_mut(vi, "vi")?, handle_mut(d, "d")?) };
        if !h.lent {
            return Err(not_lent());
        }
        let t = Duration::from_micros(timeout_us.clamp(0, 1_000_000) as u64);
        if !h.vi.sleep_lent(d.rx_pos, d.wait_placed, t) {
            return Err(fail(
                UNET_EINVAL,
                "rx_pos is not a position the borrower can have reached",
            ));
        }
        d.rx_published = d.rx_pos;
        Ok(UNET_OK)
    })
}

/// Grant `region` to the peer of a lent data path, for the borrower's
/// sends by reference (once per region and VI; later calls answer at
/// once). 0; [`UNET_EREFUSED`] when the engine refused (send by copy
/// then) or the region belongs to another session; [`UNET_EINVAL`] when
/// the VI is not lent.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only; `region` NULL
/// or a live handle.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_direct_grant(vi: *mut UnetVi, region: *const UnetRegion) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let (h, r) = unsafe { (handle_mut(vi, "vi")?, self::region(region)?) };
        if !h.lent {
            return Err(not_lent());
        }
        if h.vi.grant_lent(r) {
            Ok(UNET_OK)
        } else {
            Err(fail(
                UNET_EREFUSED,
                "the region cannot be granted to the VI's peer",
            ))
        }
    })
}

/// The peer's region `handle` (from a reference record), mapped for
/// reading, for the borrower of a lent data path: 0 with its address in
/// `*ptr`, its length in `*len`, and in `*evicted` the handle of a region
/// the library unmapped to make room for it (it keeps a bounded number;
/// forget that one's memory), or -1. A region's memory stays mapped until
/// it is unmapped so or the path is returned. [`UNET_EREFUSED`] when the
/// engine refuses it (the record is then the library's to report);
/// [`UNET_EINVAL`] when the VI is not lent.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only; `ptr`, `len`
/// and `evicted` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_direct_peer_region(
    vi: *mut UnetVi,
    handle: u32,
    ptr: *mut *const u8,
    len: *mut u64,
    evicted: *mut i64,
) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        let h = unsafe { handle_mut(vi, "vi") }?;
        if ptr.is_null() || len.is_null() || evicted.is_null() {
            return Err(null("ptr, len or evicted"));
        }
        // SAFETY: all three non-NULL (checked above) and writable per the
        // contract.
        let (ptr, len, evicted) = unsafe {
            (
                out_ptr(ptr, "ptr")?,
                out_ptr(len, "len")?,
                out_ptr(evicted, "evicted")?,
            )
        };
        if !h.lent {
            return Err(not_lent());
        }
        let (p, n, gone) =
            h.vi.peer_region_lent(handle)
                .ok_or_else(|| fail(UNET_EREFUSED, "the peer's region cannot be mapped"))?;
        ptr.write(p);
        len.write(n as u64);
        evicted.write(gone.map_or(-1, i64::from));
        Ok(UNET_OK)
    })
}

/// Wake the peer of a lent data path, which the borrower found asleep
/// (its sleeping flag set) after publishing a record. 0, or
/// [`UNET_EINVAL`] when the VI is not lent.
///
/// # Safety
/// `vi` is NULL or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn unet_vi_direct_wake(vi: *mut UnetVi) -> c_int {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe { lent(vi) }?.vi.wake_direct_peer();
        Ok(UNET_OK)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::*;
    use crate::via::{Reliability, Vi, ViAttributes, ViSeg};
    use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
    use unet_abi::{record_span, record_tag, RECORD_HEADER, RECORD_PAD};

    /// A borrower of a lent data path, as a binding would write one: the
    /// ring's rules, nothing of the library's.
    struct Borrower {
        d: UnetViDirect,
        /// The peer slept when the last send was published.
        asleep: bool,
    }

    impl Borrower {
        fn hdr(ring: *const u8, off: u64) -> &'static AtomicU64 {
            // SAFETY: off is 8-aligned and inside the ring (callers mask it).
            unsafe { &*(ring.add(off as usize) as *const AtomicU64) }
        }

        /// Send `data` (one record; padding at the end of a lap); false
        /// when the ring has no room.
        fn send(&mut self, data: &[u8]) -> bool {
            let d = &mut self.d;
            let span = record_span(data.len()) as u64;
            let off = d.tx_pos & (d.ring_size - 1);
            let pad = if off + span > d.ring_size {
                d.ring_size - off
            } else {
                0
            };
            // SAFETY: the lent pointer to the peer's consumer line.
            let consumed = unsafe { &*(d.tx_consumed as *const AtomicU64) }.load(Ordering::Acquire);
            if d.tx_pos + pad + span > consumed + d.ring_size {
                d.tx_full += 1;
                return false;
            }
            if pad > 0 {
                let h = record_tag(d.tx_pos) as u64 | (((RECORD_PAD | pad as u32) as u64) << 32);
                Self::hdr(d.tx, off).store(h, Ordering::Release);
                d.tx_pos += pad;
            }
            let off = d.tx_pos & (d.ring_size - 1);
            // SAFETY: the record fits in the ring from off (checked above).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr(),
                    d.tx.add(off as usize + RECORD_HEADER),
                    data.len(),
                )
            };
            let h = record_tag(d.tx_pos) as u64 | ((data.len() as u64) << 32);
            Self::hdr(d.tx, off).store(h, Ordering::Release);
            d.tx_pos += span;
            d.sent += 1;
            d.sent_bytes += data.len() as u64;
            fence(Ordering::SeqCst);
            // SAFETY: the lent pointer to the peer's sleeping flag.
            self.asleep =
                unsafe { &*(d.tx_sleeping as *const AtomicU32) }.load(Ordering::Relaxed) != 0;
            true
        }

        /// The next message, copied into `buf`; None when the ring is empty.
        fn recv(&mut self, buf: &mut [u8]) -> Option<usize> {
            let d = &mut self.d;
            loop {
                let off = d.rx_pos & (d.ring_size - 1);
                let h = Self::hdr(d.rx, off).load(Ordering::Acquire);
                if h as u32 != record_tag(d.rx_pos) {
                    return None;
                }
                let len = (h >> 32) as u32;
                if len & RECORD_PAD != 0 {
                    d.rx_pos += (len & !RECORD_PAD) as u64;
                    continue;
                }
                let len = len as usize;
                // SAFETY: a test's own peer wrote a record inside the ring.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        d.rx.add(off as usize + RECORD_HEADER),
                        buf.as_mut_ptr(),
                        len,
                    )
                };
                d.rx_pos += record_span(len) as u64;
                d.received += 1;
                d.received_bytes += len as u64;
                // SAFETY: the lent pointer to our consumer line.
                unsafe { &*(d.rx_consumed as *const AtomicU64) }.store(d.rx_pos, Ordering::Release);
                d.rx_published = d.rx_pos;
                return Some(len);
            }
        }
    }

    /// An engine and a connected pair: `(engine, a, b, a's session, b's)`.
    fn pair(r: Reliability) -> (crate::Engine, Vi, Vi, crate::Session, crate::Session) {
        let e = crate::Engine::start(crate::EngineConfig::default()).unwrap();
        let s1 = crate::Session::embedded(&e).unwrap();
        let s2 = crate::Session::embedded(&e).unwrap();
        let attrs = ViAttributes {
            reliability: r,
            ..ViAttributes::default()
        };
        let server = s2.vi_listen(9).unwrap();
        let (s, a) = (s1.clone(), attrs.clone());
        let t = std::thread::spawn(move || s.vi_connect(None, 9, &a, None));
        let b = server.accept(&attrs, None).unwrap();
        let a = t.join().unwrap().unwrap();
        (e, a, b, s1, s2)
    }

    #[test]
    fn a_lent_data_path_carries_messages_both_ways_and_the_vi_goes_on_where_it_stopped() {
        let (_e, a, mut b, sa, sb) = pair(Reliability::ReliableDelivery);
        let h = Box::into_raw(Box::new(UnetVi { vi: a, lent: false }));
        let rb = sb.register_memory(1 << 16).unwrap();
        let mut c = UnetViCompletion::default();
        let mut d = std::mem::MaybeUninit::<UnetViDirect>::zeroed();
        // SAFETY: h is a live handle used by this thread only; d writable.
        unsafe {
            assert_eq!(unet_vi_direct_lend(h, d.as_mut_ptr()), UNET_OK);
            let mut w = Borrower {
                d: d.assume_init(),
                asleep: false,
            };
            assert_eq!(w.d.pull_min, crate::via::pull_min_bytes());
            // Lent: the VI refuses everything else, and a second lending.
            assert_eq!(unet_vi_send_done(h, &mut c), UNET_EINUSE);
            assert_eq!(unet_vi_direct_lend(h, d.as_mut_ptr()), UNET_EINUSE);
            // Messages across several laps of the ring (padding included),
            // the peer taking them as they come.
            let mut buf = vec![0u8; 4096];
            let mut i = 0usize;
            while w.d.tx_pos < 3 * w.d.ring_size {
                i += 1;
                let msg: Vec<u8> = (0..(i * 37) % 1500).map(|j| (i + j) as u8).collect();
                b.post_recv(i as u64, &[ViSeg::new(&rb, 0, 4096)]).unwrap();
                while !w.send(&msg) {
                    std::hint::spin_loop();
                }
                let got = b.recv_wait(Some(Duration::from_secs(5))).unwrap();
                assert_eq!(got.status, Ok(msg.len()));
                let mut back = vec![0u8; msg.len()];
                rb.read(0, &mut back);
                assert_eq!(back, msg, "message {i}");
                // And back the other way, into the borrower's hands.
                b.post_send(i as u64, &[ViSeg::new(&rb, 0, msg.len())])
                    .unwrap();
                let n = loop {
                    if let Some(n) = w.recv(&mut buf) {
                        break n;
                    }
                    std::hint::spin_loop();
                };
                assert_eq!(&buf[..n], &msg[..]);
                assert_eq!(
                    b.send_wait(Some(Duration::from_secs(5))).unwrap().status,
                    Ok(n)
                );
            }
            // Sleeping: an empty ring until the time is up; a message
            // sent meanwhile wakes the borrower.
            let t0 = std::time::Instant::now();
            assert_eq!(unet_vi_direct_sleep(h, &mut w.d, 20_000), UNET_OK);
            assert!(t0.elapsed() >= Duration::from_millis(10), "slept");
            assert_eq!(w.d.rx_published, w.d.rx_pos);
            let waker = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                b.post_send(0, &[ViSeg::new(&rb, 0, 3)]).unwrap();
                (b, rb)
            });
            let t0 = std::time::Instant::now();
            while w.recv(&mut buf).is_none() {
                assert_eq!(unet_vi_direct_sleep(h, &mut w.d, 1_000_000), UNET_OK);
            }
            assert!(
                t0.elapsed() < Duration::from_millis(900),
                "woken by the message"
            );
            let (mut b, rb) = waker.join().unwrap();
            assert_eq!(
                b.send_wait(Some(Duration::from_secs(5))).unwrap().status,
                Ok(3)
            );
            let mut bad = UnetViDirect {
                rx_pos: w.d.rx_pos + 8,
                ..w.d
            };
            assert_eq!(unet_vi_direct_sleep(h, &mut bad, 0), UNET_EINVAL);
            assert_eq!(unet_vi_direct_return(h, &w.d), UNET_OK);
            assert_eq!(
                unet_vi_direct_return(h, &w.d),
                UNET_EINVAL,
                "not lent any more"
            );
            // The library goes on from the borrower's positions.
            let ra = sa.register_memory(4096).unwrap();
            ra.write(0, b"after");
            let seg = UnetViSeg {
                region: Box::into_raw(Box::new(UnetRegion(Some(ra)))),
                offset: 0,
                len: 5,
            };
            b.post_recv(7, &[ViSeg::new(&rb, 0, 4096)]).unwrap();
            assert_eq!(unet_vi_post_send(h, 1, &seg, 1), UNET_OK);
            assert_eq!(
                b.recv_wait(Some(Duration::from_secs(5))).unwrap().status,
                Ok(5)
            );
            assert_eq!(unet_vi_send_wait(h, 5_000_000, &mut c), UNET_OK);
            rb.write(0, b"reply!");
            b.post_send(8, &[ViSeg::new(&rb, 0, 6)]).unwrap();
            let seg2 = UnetViSeg { len: 4096, ..seg };
            assert_eq!(unet_vi_post_recv(h, 2, &seg2, 1), UNET_OK);
            assert_eq!(unet_vi_recv_wait(h, 5_000_000, &mut c), UNET_OK);
            assert_eq!((c.status, c.len), (0, 6));
            let mut st = std::mem::MaybeUninit::<UnetViStats>::uninit();
            assert_eq!(unet_vi_get_stats(h, st.as_mut_ptr()), UNET_OK);
            let st = st.assume_init();
            let n = i as u64 + 1;
            assert_eq!(
                (st.tx_msgs, st.rx_msgs),
                (n, n + 1),
                "the borrower's counted too"
            );
            unet_region_free(seg.region);
            unet_vi_free(h);
        }
    }

    #[test]
    fn lending_waits_for_an_idle_vi_and_refuses_what_cannot_be_lent() {
        let (_e, mut a, _b, sa, _sb) = pair(Reliability::ReliableDelivery);
        let ra = sa.register_memory(4096).unwrap();
        a.post_recv(1, &[ViSeg::new(&ra, 0, 4096)]).unwrap();
        let h = Box::into_raw(Box::new(UnetVi { vi: a, lent: false }));
        let mut d = std::mem::MaybeUninit::<UnetViDirect>::zeroed();
        // SAFETY: h is a live handle used by this thread only.
        unsafe {
            assert_eq!(
                unet_vi_direct_lend(h, d.as_mut_ptr()),
                UNET_EINUSE,
                "a receive is posted, and no room for its number"
            );
            // With room, the receive posted becomes the borrower's.
            let mut ids = [0u64; 4];
            (*d.as_mut_ptr()).recv_ids = ids.as_mut_ptr();
            (*d.as_mut_ptr()).recv_cap = 4;
            assert_eq!(unet_vi_direct_lend(h, d.as_mut_ptr()), UNET_OK);
            assert_eq!((*d.as_ptr()).nrecv, 1);
            assert_eq!(ids[0], 1);
            assert_eq!(unet_vi_direct_return(h, d.as_ptr()), UNET_OK);
            let mut c = UnetViCompletion::default();
            assert_eq!(
                unet_vi_recv_done(h, &mut c),
                0,
                "nothing posted in the library any more"
            );
            assert_eq!(unet_vi_direct_wake(h), UNET_EINVAL, "not lent");
            unet_vi_free(h);
        }
        let (_e2, a, _b2, _sa, _sb) = pair(Reliability::ReliableReception);
        let h = Box::into_raw(Box::new(UnetVi { vi: a, lent: false }));
        // SAFETY: as above.
        unsafe {
            assert_eq!(unet_vi_direct_lend(h, d.as_mut_ptr()), UNET_ENOTSUP);
            unet_vi_free(h);
        }
    }

    #[test]
    fn positions_handed_back_against_the_rules_break_the_vi() {
        let (_e, a, _b, _sa, _sb) = pair(Reliability::Unreliable);
        let h = Box::into_raw(Box::new(UnetVi { vi: a, lent: false }));
        let mut d = std::mem::MaybeUninit::<UnetViDirect>::zeroed();
        // SAFETY: h is a live handle used by this thread only.
        unsafe {
            assert_eq!(unet_vi_direct_lend(h, d.as_mut_ptr()), UNET_OK);
            let mut d = d.assume_init();
            d.tx_pos += 8; // not on a record boundary
            assert_eq!(unet_vi_direct_return(h, &d), UNET_OK);
            assert_eq!(unet_vi_state(h), UNET_VI_BROKEN);
            unet_vi_free(h);
        }
    }
}
