//! U-Net/SLE applets end to end, continued: large receive buffers, applets
//! placed inline in the client library on the direct path, a runaway
//! applet beside other endpoints, and compiled against interpreted code
//! (helpers in `applet_support`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

mod common;
use common::endpoint_counter as counter;
use unet::*;
use unet_abi::ClientCounter;
use unet_abi::EndpointCounter;

mod applet_support;
use applet_support::*;

/// An applet placed inline, with the default budget and heap.
const INLINE: AppletOptions = AppletOptions {
    placement: Placement::Inline,
    fuel: 0,
    heap: 0,
};

// ---------------------------------------------------------------------------
// Large receive buffers
// ---------------------------------------------------------------------------

#[test]
fn applets_attach_to_endpoints_with_large_buffers() {
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(with_buffers(128 << 10)).unwrap();
    let mut b = s.create_endpoint(with_buffers(128 << 10)).unwrap();
    a.attach_applet(&applet("StdUnet"), AppletOptions::default())
        .expect("StdUnet allocates 56 bytes of its own");
    b.attach_applet(&applet("StdUnet"), AppletOptions::default())
        .expect("StdUnet allocates 56 bytes of its own");
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    exchange(&mut a, &mut b, ch, &[1, 1000, 200_000], 1);
}

#[test]
fn a_full_receive_queue_does_not_lose_buffers() {
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s
        .create_endpoint(EndpointConfig {
            managed_buffers: false,
            geometry: Geometry {
                recv_cap: 2,
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
    b.attach_applet(&applet("StdUnet"), AppletOptions::default())
        .unwrap();
    for i in 0..3 {
        b.post_free(i * 8192).unwrap();
    }
    let ch = a.open_channel(b.addr(), ChannelOptions::default()).unwrap();
    // Three 1-buffer messages, room for two descriptors: the third is dropped.
    for i in 0..3 {
        a.send_blocking(ch, &pattern(i, 100), SEND_T).unwrap();
    }
    let start = Instant::now();
    while counter(&s, &b, EndpointCounter::AppletRxCalls) < 3 {
        assert!(start.elapsed() < Duration::from_secs(10), "no doRx");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(counter(&s, &b, EndpointCounter::RxDropRingFull), 1);
    assert!(b.poll_recv_desc().is_some(), "first");
    assert!(b.poll_recv_desc().is_some(), "second");
    assert!(b.poll_recv_desc().is_none());
    // Three buffers posted, two hold delivered messages: the dropped
    // message's buffer must still be free, as the engine keeps it for an
    // endpoint without an applet. One more message needs exactly it.
    a.send_blocking(ch, &pattern(3, 100), SEND_T).unwrap();
    let start = Instant::now();
    let mut delivered = false;
    while !delivered && start.elapsed() < Duration::from_secs(2) {
        delivered = b.poll_recv_desc().is_some();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(
        delivered,
        "the third buffer was lost with the dropped message"
    );
}

// ---------------------------------------------------------------------------
// Inline placement: the applet runs in the client library, on the direct path
// ---------------------------------------------------------------------------

#[test]
fn raw_unet_inline_on_the_direct_path() {
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    a.attach_applet(&applet("RawUnet"), INLINE).unwrap();
    b.attach_applet(&applet("RawUnet"), INLINE).unwrap();
    let ch = a
        .open_channel(
            b.addr(),
            ChannelOptions {
                path: PathChoice::Direct,
            },
        )
        .expect("inline applets keep the direct path");
    match next_event(&mut b, Duration::from_secs(5)) {
        Some(Event::ChannelOpened { direct, .. }) => assert!(direct),
        e => panic!("expected ChannelOpened, got {e:?}"),
    }
    let n = exchange(&mut a, &mut b, ch, RAW_SIZES, 3);
    assert!(n > 0);
    // Both sides ran their applet on every message, in this process.
    let calls = 2 * RAW_SIZES.len() as u64 * 3;
    assert!(a.client_counter(ClientCounter::AppletCalls) >= calls);
    assert!(b.client_counter(ClientCounter::AppletCalls) >= calls);
    // Per kind, as `unet stat` shows them: a's doTx ran on each of its
    // sends and its doRx on each echo.
    let sends = RAW_SIZES.len() as u64 * 3;
    assert_eq!(a.client_counter(ClientCounter::AppletTxCalls), sends);
    assert_eq!(a.client_counter(ClientCounter::AppletRxCalls), sends);
    assert_eq!(a.client_counter(ClientCounter::AppletTimerCalls), 0);
    assert_eq!(a.client_counter(ClientCounter::AppletCalls), 2 * sends);
    assert!(a.client_counter(ClientCounter::AppletFuel) > 0);
    assert!(a.client_counter(ClientCounter::DirectTxMsgs) >= calls / 2);
    // The engine ran no applet.
    assert_eq!(counter(&s, &a, EndpointCounter::AppletTxCalls), 0);
    assert_eq!(counter(&s, &b, EndpointCounter::AppletRxCalls), 0);
}

#[test]
fn an_inline_applet_that_shrinks_rxbuf_gets_a_new_one_for_each_longer_message() {
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    b.attach_applet(&applet("Shrinker"), INLINE).unwrap();
    let direct = ChannelOptions {
        path: PathChoice::Direct,
    };
    let ch = a.open_channel(b.addr(), direct).unwrap();
    let mut buf = vec![0u8; 4096];
    // After the first message RxBuf holds 8 bytes: every later message is
    // longer than the array doRx left.
    for (i, len) in [100, 9, 2000, 8, 1, 600].into_iter().enumerate() {
        let msg = pattern(i, len);
        a.send_blocking(ch, &msg, SEND_T).unwrap();
        let r = b.recv(&mut buf, Some(SEND_T)).expect("delivered by doRx");
        assert_eq!(&buf[..r.len], &msg[..], "message {i} ({len} bytes)");
    }
    assert_eq!(b.client_counter(ClientCounter::AppletRxCalls), 6);
    assert_eq!(b.client_counter(ClientCounter::AppletFaults), 0);
    assert!(b
        .poll_event()
        .is_none_or(|e| !matches!(e, Event::AppletFault { .. } | Event::AppletDetached { .. })));
}

/// A message of `len` bytes (at least 5) from sender `who`, number `seq`.
fn numbered(who: u8, seq: u32, len: usize) -> Vec<u8> {
    let mut m = vec![who];
    m.extend_from_slice(&seq.to_le_bytes());
    m.extend(pattern(seq as usize, len - 5));
    m
}

/// Receive one message on `b` and check it is the next of its sender's
/// (`next`), on the channel that sender's messages came on before
/// (`chans`); the sender's number.
fn take_numbered(
    b: &mut Endpoint,
    buf: &mut [u8],
    next: &mut [u32; 2],
    chans: &mut [Option<Channel>; 2],
) -> usize {
    let r = b.recv(buf, Some(SEND_T)).expect("delivered by doRx");
    let m = &buf[..r.len];
    let who = m[0] as usize;
    let seq = u32::from_le_bytes(m[1..5].try_into().unwrap());
    assert_eq!(seq, next[who], "sender {who}: lost or out of order");
    assert_eq!(
        m,
        &numbered(who as u8, seq, r.len)[..],
        "sender {who}, {seq}"
    );
    assert_eq!(*chans[who].get_or_insert(r.channel), r.channel);
    next[who] += 1;
    who
}

/// The inline receive takes each message from the direct connection its
/// first look found ready, looking at the connections in turn: with two
/// senders' messages waiting it alternates between them, and across the
/// rings' wraps (their padding records) nothing is lost or reordered.
#[test]
fn an_inline_receiver_takes_its_direct_connections_in_turn_across_ring_wraps() {
    let (_engine, s) = one_engine();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    b.attach_applet(&applet("RawUnet"), INLINE).unwrap();
    let direct = ChannelOptions {
        path: PathChoice::Direct,
    };
    let mut senders: Vec<(Endpoint, Channel)> = (0..2)
        .map(|_| {
            let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
            let ch = a.open_channel(b.addr(), direct).unwrap();
            (a, ch)
        })
        .collect();
    let mut buf = vec![0u8; 4096];
    let (mut next, mut chans) = ([0u32; 2], [None, None]);
    // Ten messages from each, all waiting before the first receive.
    for (who, (a, ch)) in senders.iter_mut().enumerate() {
        for seq in 0..10 {
            a.send_blocking(*ch, &numbered(who as u8, seq, 40), SEND_T)
                .unwrap();
        }
    }
    let order: Vec<usize> = (0..20)
        .map(|_| take_numbered(&mut b, &mut buf, &mut next, &mut chans))
        .collect();
    assert!(
        order.windows(2).all(|w| w[0] != w[1]),
        "not in turn: {order:?}"
    );
    assert_ne!(chans[0], chans[1]);
    // Then more than a ring's worth from each (1 MiB a direction by
    // default), of every length from 6 to 1 000 bytes, so that each ring
    // wraps, each message answered before the next is sent.
    let mut bytes = [0usize; 2];
    for i in 0..3000usize {
        for (who, (a, ch)) in senders.iter_mut().enumerate() {
            let len = 6 + (i * 37 + who * 11) % 995;
            let seq = next[who];
            a.send_blocking(*ch, &numbered(who as u8, seq, len), SEND_T)
                .unwrap();
            bytes[who] += len;
            assert_eq!(take_numbered(&mut b, &mut buf, &mut next, &mut chans), who);
        }
    }
    assert!(bytes.iter().all(|&n| n > 1 << 20), "{bytes:?}");
    assert_eq!(b.client_counter(ClientCounter::AppletRxCalls), 2 * 3010);
    assert_eq!(b.client_counter(ClientCounter::AppletFaults), 0);
}

#[test]
fn inline_buffers_go_back_at_detach() {
    // b has 8 receive buffers of 4 KiB. A 30 000-byte message fills all of
    // them through the inline StdUnet; once read they are kept for the
    // applet, and detaching must give them back to the free ring: the next
    // message, on the engine path, needs all 8 from there.
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let small = EndpointConfig {
        geometry: Geometry {
            buffer_size: 4096,
            buffer_area_size: 64 << 10,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut b = s.create_endpoint(small).unwrap();
    b.attach_applet(&applet("StdUnet"), INLINE).unwrap();
    let direct = a
        .open_channel(
            b.addr(),
            ChannelOptions {
                path: PathChoice::Direct,
            },
        )
        .unwrap();
    let engine = a
        .open_channel(
            b.addr(),
            ChannelOptions {
                path: PathChoice::Engine,
            },
        )
        .unwrap();
    let mut buf = vec![0u8; 1 << 16];
    for i in 0..3 {
        let msg = pattern(i, 30_000);
        a.send_blocking(direct, &msg, SEND_T).unwrap();
        let r = b.recv(&mut buf, Some(Duration::from_secs(10))).unwrap();
        assert_eq!(r.len, 30_000);
        assert!(buf[..r.len] == msg[..], "message {i} through the applet");
    }
    b.detach_applet().unwrap();
    let msg = pattern(9, 30_000);
    a.send_blocking(engine, &msg, SEND_T).unwrap();
    let r = b
        .recv(&mut buf, Some(Duration::from_secs(10)))
        .expect("all 8 buffers are back in the free ring");
    assert_eq!(r.len, 30_000);
    assert!(buf[..r.len] == msg[..]);
    assert_eq!(counter(&s, &b, EndpointCounter::RxDropNoBuffer), 0);
}

#[test]
fn looping_inline_applet_faults_then_is_detached() {
    let (_engine, s) = one_engine();
    let mut a = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut b = s.create_endpoint(EndpointConfig::default()).unwrap();
    let opts = AppletOptions {
        fuel: 50_000,
        ..INLINE
    };
    a.attach_applet(&applet("Spin"), opts).unwrap();
    let ch = a
        .open_channel(
            b.addr(),
            ChannelOptions {
                path: PathChoice::Direct,
            },
        )
        .unwrap();
    for i in 1..=16 {
        assert_eq!(
            a.send(ch, &pattern(i, 64)),
            Err(SendError::AppletFault),
            "send {i}"
        );
        let want = if i < 16 {
            Event::AppletFault {
                kind: FaultKind::Fuel,
            }
        } else {
            Event::AppletDetached {
                kind: FaultKind::Fuel,
            }
        };
        assert_eq!(a.poll_event(), Some(want), "send {i}");
    }
    assert_eq!(a.client_counter(ClientCounter::AppletFaults), 16);
    assert_quiet(
        &mut b,
        Duration::from_millis(20),
        "no faulted send goes out",
    );
    exchange(&mut a, &mut b, ch, &[1, 100, 5000], 2);
}

// ---------------------------------------------------------------------------
// A runaway applet does not slow down the other endpoints
// ---------------------------------------------------------------------------

/// Round trips per second between two fresh endpoints on the engine path
/// over `dur`.
fn engine_rate(s: &Session, dur: Duration) -> f64 {
    // The clients spin longer than a runaway invocation lasts, so a stall
    // of the engine does not also cost them a sleep and a wake-up.
    let cfg = EndpointConfig {
        spin: Duration::from_micros(500),
        ..EndpointConfig::default()
    };
    let (mut a, mut b, ch) = common::engine_channel(s, cfg);
    let back = match next_event(&mut b, Duration::from_secs(5)) {
        Some(Event::ChannelOpened { channel, .. }) => channel,
        e => panic!("expected ChannelOpened, got {e:?}"),
    };
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while let Ok(r) = b.recv(&mut buf, Some(Duration::from_millis(500))) {
            if b.send_blocking(back, &buf[..r.len], SEND_T).is_err() {
                break;
            }
        }
    });
    let mut buf = [0u8; 64];
    let start = std::time::Instant::now();
    let mut n = 0u64;
    while start.elapsed() < dur {
        a.send_blocking(ch, &[7u8; 64], SEND_T).unwrap();
        a.recv(&mut buf, T).expect("echo");
        n += 1;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    drop(a);
    echo.join().unwrap();
    rate
}

/// CPU time (ns) thread `tid` of this process has run, from the kernel's
/// scheduler statistics (`/proc/self/task/TID/schedstat`, first field).
fn thread_cpu_ns(tid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .expect("read the engine thread's schedstat");
    s.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .expect("schedstat's run time")
}

/// A runaway applet (it loops on every send) beside other endpoints:
/// measured from outside, by the kernel's count of the engine thread's
/// CPU time over windows where the runaway is all the engine has to do,
/// the engine runs at most 15% of the time (the applet's tenth, plus one
/// invocation of slack per window and the engine's own work for the
/// runaway's sends); it faults more than 20 times; and in windows
/// alternating without and with it, the other endpoints keep at least a
/// fifth of their engine-path round-trip rate (medians).
#[test]
fn a_runaway_applet_leaves_other_endpoints_their_rate() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let spin = applet("Spin");
    let (engine, s) = one_engine();
    let tid = engine.thread_id();
    // A hostile neighbour: while `active`, its applet loops on every send,
    // with the largest work budget the engine grants (50 times the
    // default: an invocation runs a millisecond or more, so it is the
    // engine's holding back that keeps it to its tenth); whenever it is
    // detached, it attaches it again, and it keeps sending.
    let opts = AppletOptions {
        fuel: 1_000_000,
        ..AppletOptions::default()
    };
    let active = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let (active2, stop2, s2) = (active.clone(), stop.clone(), s.clone());
    let hostile = std::thread::spawn(move || {
        let mut l = s2.create_endpoint(EndpointConfig::default()).unwrap();
        let sink = s2.create_endpoint(EndpointConfig::default()).unwrap();
        l.attach_applet(&spin, opts).unwrap();
        let ch = l
            .open_channel(sink.addr(), ChannelOptions::default())
            .unwrap();
        let mut faults = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            if active2.load(Ordering::Relaxed) {
                let _ = l.send(ch, &[1u8; 64]);
            }
            while let Some(e) = l.poll_event() {
                match e {
                    Event::AppletFault { .. } => faults += 1,
                    Event::AppletDetached { .. } => {
                        faults += 1;
                        l.attach_applet(&spin, opts).unwrap();
                    }
                    _ => {}
                }
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        faults
    });
    // Alternate windows without and with the runaway, so both see the same
    // machine; compare medians. Between them, a window where the runaway
    // is all the engine has to do: the engine thread's CPU time then is
    // what the applet costs it (the engine's own timer of the applet is
    // reported beside it, not trusted).
    let dur = Duration::from_millis(300);
    let (mut alone, mut beside) = (Vec::new(), Vec::new());
    let (mut engine_ns, mut window_ns, mut applet_ns) = (0u64, 0u64, 0u64);
    for _ in 0..3 {
        active.store(false, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(20));
        alone.push(engine_rate(&s, dur));
        active.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(20));
        let (t0, c0, a0) = (
            Instant::now(),
            thread_cpu_ns(tid),
            counter_all(&s, EndpointCounter::AppletTimeNs),
        );
        std::thread::sleep(dur);
        applet_ns += counter_all(&s, EndpointCounter::AppletTimeNs) - a0;
        engine_ns += thread_cpu_ns(tid) - c0;
        window_ns += t0.elapsed().as_nanos() as u64;
        beside.push(engine_rate(&s, dur));
    }
    stop.store(true, Ordering::Relaxed);
    let faults = hostile.join().unwrap();
    assert!(
        faults > 20,
        "the runaway applet ran and faulted ({faults} faults)"
    );
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let (alone, beside) = (median(&mut alone), median(&mut beside));
    eprintln!("engine-path round trips/s: alone {alone:.0}, beside a runaway applet {beside:.0}");
    let share = engine_ns as f64 / window_ns as f64;
    eprintln!(
        "with only the runaway applet to run, the engine thread ran {:.1}% of \
         the time (the engine timed the applet at {:.1}%)",
        100.0 * share,
        100.0 * applet_ns as f64 / window_ns as f64
    );
    // The engine's promise: an applet that runs long gets at most a tenth of
    // its time (plus one invocation of slack per window, and the engine's
    // own work for each send).
    assert!(
        share <= 0.15,
        "with only the runaway applet to run, the engine thread ran {:.1}% of the time",
        100.0 * share
    );
    // The other endpoints go on. Their rate drops by more than the applet's
    // share, as each long invocation also costs the waiting clients a
    // sleep and a wake-up; on a 2-core machine a third to a half is typical.
    assert!(
        beside >= 0.2 * alone,
        "other endpoints kept {:.0}% of their rate ({beside:.0} vs {alone:.0} round trips/s)",
        100.0 * beside / alone
    );
}

/// An endpoint for applets run directly (`unet_sle::Applet`),
/// without an engine: a buffer area, and what the applet transmitted
/// (channel 255 is not held; odd channels take the native's path).
struct MockEp {
    area: Vec<u8>,
    sent: Vec<(u16, Vec<u8>)>,
    /// Messages taken by `try_tx_push` (compiled `txPush`'s common case).
    sunk: u32,
    /// The free queue (taken from the end; `push_free` refuses beyond
    /// `free_cap`) and the receive descriptors published, as bytes.
    free: Vec<u32>,
    free_cap: usize,
    recvd: Vec<Vec<u8>>,
}

impl MockEp {
    fn new(area: Vec<u8>) -> MockEp {
        MockEp {
            area,
            sent: Vec::new(),
            sunk: 0,
            free: Vec::new(),
            free_cap: usize::MAX,
            recvd: Vec::new(),
        }
    }
}

impl unet_sle::Port for MockEp {
    fn area_size(&self) -> u64 {
        self.area.len() as u64
    }
    fn area(&mut self) -> std::ptr::NonNull<u8> {
        std::ptr::NonNull::from(self.area.as_mut_slice()).cast()
    }
    fn buffer_size(&self) -> u32 {
        2048
    }
    fn pop_free(&mut self) -> Option<u32> {
        self.free.pop()
    }
    fn push_free(&mut self, off: u32) -> bool {
        if self.free.len() >= self.free_cap {
            return false;
        }
        self.free.push(off);
        true
    }
    fn tx_push(&mut self, chan: u16, data: &[u8]) -> Result<(), String> {
        if chan == 255 {
            return Err("channel 255 is not held".into());
        }
        self.sent.push((chan, data.to_vec()));
        Ok(())
    }
    fn try_tx_push(&mut self, chan: u16, data: &[u8]) -> bool {
        if chan % 2 == 1 {
            return false;
        }
        self.sunk += 1;
        self.sent.push((chan, data.to_vec()));
        true
    }
    fn push_recv(&mut self, d: &unet_abi::RecvDesc) -> bool {
        let (len, chan, nbufs) = (d.len.to_le_bytes(), d.channel.to_le_bytes(), d.nbufs);
        self.recvd
            .push([&len[..], &chan[..], &[d.flags, nbufs], &d.data[..]].concat());
        true
    }
}

/// An applet's timers, set by its constructor and by its invocations, are
/// capped by the runner's `max_timers` (the constructor's included), and
/// run in the order they fall due, equal times in the order they were set.
#[test]
fn an_applets_timers_are_capped_and_run_in_order() {
    use unet_sle::{default_limits, Outcome, Runner, RunnerConfig};
    let class = applet("Timers");
    let mut ep = MockEp::new(vec![0; 1 << 16]);
    let cfg = |max_timers| RunnerConfig {
        max_timers,
        ..RunnerConfig::inline()
    };
    assert!(
        Runner::load(&class, default_limits(), &mut ep, cfg(0)).is_err(),
        "the constructor's timer is refused where none may be set"
    );
    let mut r = Runner::load(&class, default_limits(), &mut ep, cfg(3)).expect("load");
    assert_eq!(r.timers_pending(), 1);
    assert_eq!(r.tx(&mut ep, 2, 10, 0), Outcome::Done);
    assert_eq!(r.timers_pending(), 3);
    assert!(matches!(r.tx(&mut ep, 1, 20, 0), Outcome::Fault(_)));
    assert_eq!(r.timers_pending(), 3);
    let later = Instant::now() + Duration::from_millis(1);
    while let Some(o) = r.run_next_timer(&mut ep, later) {
        assert_eq!(o, Outcome::Done);
    }
    assert_eq!(r.timers_pending(), 0);
    let chans: Vec<u16> = ep.sent.iter().map(|(c, _)| *c).collect();
    assert_eq!(chans, [1, 10, 11]);
}

/// `ReceiverAck`'s sender keeps at most one recovery timer, however often
/// its credit runs out and an acknowledgment renews it. It used to set a
/// fresh 10 ms timer each time and leave the stale ones to fall due: a
/// sender renewing its credit every few microseconds (64-byte messages,
/// inline) reached the cap of 4 096 timers within 10 ms and faulted.
#[test]
fn receiver_ack_keeps_one_recovery_timer_however_fast_its_credit_turns() {
    use unet_sle::{default_limits, Outcome, Runner, RunnerConfig};
    let mut ep = MockEp::new(vec![0; 1 << 16]);
    let mut r = Runner::load(
        &applet("ReceiverAck"),
        default_limits(),
        &mut ep,
        RunnerConfig::inline(),
    )
    .expect("load");
    // The credit of 25 spent, and one message more waiting.
    for _ in 0..26 {
        assert_eq!(r.tx(&mut ep, 8, 2, 0), Outcome::Done);
    }
    let mut armed = Instant::now();
    for cycle in 0..5000 {
        // The acknowledgment: the credit renewed, the waiting one sent;
        // then the credit spent again, one more waiting (the sender
        // armed anew).
        assert_eq!(r.rx(&mut ep, b"A", 2), Outcome::Done, "cycle {cycle}");
        armed = Instant::now();
        for _ in 0..25 {
            assert_eq!(r.tx(&mut ep, 8, 2, 0), Outcome::Done, "cycle {cycle}");
        }
        assert!(
            r.timers_pending() <= 1,
            "cycle {cycle}: {}",
            r.timers_pending()
        );
    }
    let sent = ep.sent.len();
    assert_eq!(sent, 25 + 5000 * 25);
    // No acknowledgment now: the waiting message goes out once the sender
    // has been at zero credit for 10 ms (the one timer, long due, sets
    // itself again for the rest of the wait), and not before.
    while r.run_next_timer(&mut ep, Instant::now()).is_some() {}
    if armed.elapsed() < Duration::from_millis(9) {
        assert_eq!(ep.sent.len(), sent, "recovered early");
        assert_eq!(r.timers_pending(), 1);
    }
    std::thread::sleep(Duration::from_millis(11));
    while r.run_next_timer(&mut ep, Instant::now()).is_some() {}
    assert_eq!(ep.sent.len(), sent + 1, "not recovered after 10 ms");
    assert_eq!(r.timers_pending(), 0);
}

/// The engine's applets start interpreted and switch to JIVE's machine
/// code once the compiler's thread is done (the engine's loop never waits
/// for it), with the same behaviour before and after.
#[test]
fn engine_applets_switch_to_compiled_code_when_ready() {
    use unet_sle::{default_limits, Applet};
    let mut ep = MockEp::new(vec![0; 1 << 16]);
    let mut a = Applet::load(&applet("RawUnet"), default_limits(), &mut ep).expect("load");
    a.set_time_sampling(16, u64::MAX);
    assert!(!a.is_compiled(), "installed before any invocation");
    let t0 = Instant::now();
    let mut i = 0u32;
    while !a.is_compiled() {
        assert!(t0.elapsed() < Duration::from_secs(20), "never compiled");
        let msg = pattern(i as usize, 64);
        ep.area[4096..4096 + msg.len()].copy_from_slice(&msg);
        a.tx(&mut ep, 64, 3, 4096).expect("doTx");
        assert_eq!(ep.sent.last(), Some(&(3, msg)), "message {i}");
        i += 1;
    }
    for j in i..i + 100 {
        let msg = pattern(j as usize, 100);
        ep.area[8192..8192 + msg.len()].copy_from_slice(&msg);
        a.tx(&mut ep, 100, 4, 8192).expect("doTx, compiled");
        assert_eq!(ep.sent.last(), Some(&(4, msg)), "message {j}");
    }
    assert_eq!(a.stats.faults.iter().sum::<u64>(), 0);
}

/// The sample or test applet `name` loaded twice, each on an endpoint from
/// `fresh`: kept interpreted, and compiled (waiting for its code).
fn interpreted_and_compiled(
    name: &str,
    fresh: impl Fn() -> MockEp,
) -> ((unet_sle::Applet, MockEp), (unet_sle::Applet, MockEp)) {
    use unet_sle::{default_limits, Applet};
    let class = applet(name);
    let (mut e1, mut e2) = (fresh(), fresh());
    let mut interp = Applet::load(&class, default_limits(), &mut e1).expect("load");
    interp.keep_interpreted();
    let mut jit = Applet::load(&class, default_limits(), &mut e2).expect("load");
    jit.wait_compiled();
    assert!(jit.is_compiled() && !interp.is_compiled());
    ((interp, e1), (jit, e2))
}

/// The copy natives run inline in compiled applets (JIVE intrinsics over
/// the buffer area) and as calls in interpreted ones: the same results,
/// faults, work and buffer area over offsets and lengths in and out of
/// range.
#[test]
fn compiled_copy_natives_agree_with_interpreted_ones() {
    let ((mut interp, mut e1), (mut jit, mut e2)) = interpreted_and_compiled("Copier", || {
        MockEp::new((0..1u32 << 16).map(|i| (i * 13 + 5) as u8).collect())
    });
    let area = 1u32 << 16;
    let mut compared = 0;
    let mut ok = 0;
    for len in [0, 1, 8, 36, 64, 99, 100, 101, u32::MAX] {
        for chan in [0u16, 1, 36, 99, 100, 65535] {
            for off in [0, 5, area - 164, area - 100, area - 64, area, u32::MAX] {
                let (f1, f2) = (interp.stats.fuel, jit.stats.fuel);
                let r1 = interp.tx(&mut e1, len, chan, off);
                let r2 = jit.tx(&mut e2, len, chan, off);
                let what = format!("doTx({len}, {chan}, {off})");
                assert_eq!(r1, r2, "{what}");
                assert_eq!(
                    interp.stats.fuel - f1,
                    jit.stats.fuel - f2,
                    "work of {what}"
                );
                assert!(e1.area == e2.area, "buffer area after {what}");
                ok += usize::from(r1.is_ok());
                compared += 1;
            }
        }
    }
    assert!(
        ok > 20 && compared - ok > 100,
        "{ok} of {compared} succeeded"
    );
}

/// `txPush` hands its bytes to the endpoint's `try_tx_push` in compiled
/// applets (a JIVE sink) and goes through the native in interpreted ones
/// and whenever the endpoint declines: the same results, faults, work and
/// transmitted messages over offsets, lengths and channels in and out of
/// range, with the sink taking the common case.
#[test]
fn compiled_tx_push_agrees_with_interpreted_one() {
    let ((mut interp, mut e1), (mut jit, mut e2)) =
        interpreted_and_compiled("Copier", || MockEp::new(vec![0; 1 << 16]));
    let mut compared = 0;
    for len in [0usize, 1, 36, 64, 99, 100, 101] {
        let data = pattern(len, len);
        for aoff in [0u16, 1, 36, 99, 100, 255] {
            for chan in [0u16, 1, 2, 254, 255] {
                let (f1, f2) = (interp.stats.fuel, jit.stats.fuel);
                let r1 = interp.rx(&mut e1, &data, aoff << 8 | chan);
                let r2 = jit.rx(&mut e2, &data, aoff << 8 | chan);
                let what = format!("txPush(a, {aoff}, {chan}, {len})");
                assert_eq!(r1, r2, "{what}");
                assert_eq!(
                    interp.stats.fuel - f1,
                    jit.stats.fuel - f2,
                    "work of {what}"
                );
                assert_eq!(e1.sent, e2.sent, "transmitted after {what}");
                compared += 1;
            }
        }
    }
    let sent = e1.sent.len() as u32;
    assert!(compared == 210 && sent > 30, "{sent} of {compared} sent");
    assert_eq!(e1.sunk, 0, "interpreted txPush calls the native");
    // Every message on an even channel went through the sink.
    let even = e2.sent.iter().filter(|(c, _)| c % 2 == 0).count() as u32;
    assert!(e2.sunk > 10 && e2.sunk == even, "{} of {even}", e2.sunk);
}

/// The buffer natives (`dmaRxd`, an `int[]` sink in compiled applets;
/// `getFreeBuffer`, `getFreeBufferLength` and `putFreeBuffer`, leaves) are
/// called directly by compiled applets and through their natives by
/// interpreted ones: the same results, faults, work, receive descriptors
/// and free queue over lengths, channels and offsets in and out of range,
/// an array of the wrong size and a full free queue.
#[test]
fn compiled_buffer_natives_agree_with_interpreted_ones() {
    let ((mut interp, mut e1), (mut jit, mut e2)) = interpreted_and_compiled("Buffers", || {
        let mut e = MockEp::new(vec![0; 1 << 16]);
        e.free = vec![4096, 8192];
        e.free_cap = 6;
        e
    });
    let area = 1u32 << 16;
    let mut compared = 0;
    let mut check = |r1, r2, what: String, i: &unet_sle::Applet, j: &unet_sle::Applet| {
        assert_eq!(r1, r2, "{what}");
        assert_eq!(i.stats.fuel, j.stats.fuel, "work after {what}");
        compared += 1;
    };
    let lens = [0, 1, 56, 57, 2048, 2049, 4096, 28_672, 28_673, u32::MAX];
    for len in lens {
        for chan in [0u16, 1, 5, 999, 65535] {
            for off in [0, 2048, area - 2048, area - 2047, area, u32::MAX] {
                let what = format!("doTx({len}, {chan}, {off})");
                let r1 = interp.tx(&mut e1, len, chan, off);
                let r2 = jit.tx(&mut e2, len, chan, off);
                assert_eq!(e1.recvd, e2.recvd, "descriptors after {what}");
                assert_eq!(e1.free, e2.free, "free queue after {what}");
                check(r1, r2, what, &interp, &jit);
            }
        }
    }
    for chan in [0u16, 1, 2, 3, 100, 4095, 4096, 65535] {
        for _ in 0..4 {
            let r1 = interp.rx(&mut e1, &[1, 2, 3], chan);
            let r2 = jit.rx(&mut e2, &[1, 2, 3], chan);
            check(r1, r2, format!("doRx(3, {chan})"), &interp, &jit);
            assert_eq!(e1.free, e2.free, "free queue after doRx(3, {chan})");
        }
    }
    assert_eq!(compared, 10 * 5 * 6 + 8 * 4);
    // (14 buffers of 2 048 bytes: 28 672 is the longest message.)
    // Descriptors of one buffer and of several were published, and the
    // free queue both filled (a fault) and handed buffers out.
    assert!(e1.recvd.iter().any(|d| d[7] == 1) && e1.recvd.iter().any(|d| d[7] > 1));
    assert!(e1.recvd.len() > 20, "{} published", e1.recvd.len());
    assert!(interp.stats.faults.iter().sum::<u64>() > 100);
}
