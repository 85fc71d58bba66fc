//! VIA between local processes: connection set-up by discriminator,
//! memory regions, gathering sends and scattering receives, the three
//! reliability levels, a message with no receive posted (held by default,
//! a broken VI with the strict option), completion queues, the error
//! state, and a peer killed mid-stream (memory regions held and kept:
//! `via_regions.rs`).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use unet::*;

mod via_support;
use via_support::*;

#[test]
fn connect_accept_and_every_size_gathered_and_scattered() {
    let (_e, s1, s2) = engine();
    for r in [
        Reliability::Unreliable,
        Reliability::ReliableDelivery,
        Reliability::ReliableReception,
    ] {
        let (mut a, mut b) = connect(&s1, &s2, 7, attrs(r), attrs(r));
        assert!(a.is_direct() && b.is_direct(), "a local pair, straight");
        let ra = s1.register_memory(1 << 20).unwrap();
        let rb = s2.register_memory(1 << 20).unwrap();
        for (i, len) in [0usize, 1, 56, 57, 1000, 4096, 65536, VI_MAX_TRANSFER]
            .into_iter()
            .enumerate()
        {
            let data = pattern(i, len);
            // Three pieces at scattered offsets, gathered into one message.
            let (p1, p2) = (len / 3, 2 * len / 3);
            ra.write(100, &data[..p1]);
            ra.write(300_000, &data[p1..p2]);
            ra.write(700_000, &data[p2..]);
            // Two receive pieces of odd sizes.
            let half = len / 2 + 1;
            b.post_recv(
                i as u64,
                &[ViSeg::new(&rb, 5, half), ViSeg::new(&rb, 500_000, len)],
            )
            .unwrap();
            a.post_send(
                i as u64 + 100,
                &[
                    ViSeg::new(&ra, 100, p1),
                    ViSeg::new(&ra, 300_000, p2 - p1),
                    ViSeg::new(&ra, 700_000, len - p2),
                ],
            )
            .unwrap();
            let c = b.recv_wait(T).unwrap();
            assert_eq!(
                c,
                ViCompletion {
                    id: i as u64,
                    status: Ok(len)
                },
                "{r:?} {len}"
            );
            let mut got = vec![0u8; len];
            let first = half.min(len);
            rb.read(5, &mut got[..first]);
            rb.read(500_000, &mut got[first..]);
            assert_eq!(got, data, "{r:?} {len}");
            let s = a.send_wait(T).unwrap();
            assert_eq!(
                s,
                ViCompletion {
                    id: i as u64 + 100,
                    status: Ok(len)
                }
            );
        }
        assert_eq!(a.state(), ViState::Connected);
        let st = b.stats();
        assert_eq!(st.rx_msgs, 8);
        assert_eq!(a.stats().tx_msgs, 8);
        drop((a, b));
    }
}

#[test]
fn refused_unknown_mismatched_and_taken_discriminators() {
    let (_e, s1, s2) = engine();
    let d = ViAttributes::default();
    // Nobody listens.
    let e = s1.vi_connect(None, 99, &d, T).unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::NoListener), "{e}");
    // Another process's discriminator... here another session's.
    let server = s2.vi_listen(5).unwrap();
    let e = s1.vi_listen(5).err().expect("taken");
    assert_eq!(code(&e), Some(ErrorCode::TagInUse));
    // Rejected.
    let c = s1.clone();
    let t = thread::spawn(move || c.vi_connect(None, 5, &ViAttributes::default(), T));
    let req = server.wait_request(T).unwrap();
    assert_eq!(req.reliability(), Reliability::ReliableDelivery);
    assert_eq!(req.pid(), std::process::id());
    req.reject().unwrap();
    let e = t.join().unwrap().unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::Refused), "{e}");
    // Different reliability levels: both refused.
    let c = s1.clone();
    let t = thread::spawn(move || c.vi_connect(None, 5, &attrs(Reliability::Unreliable), T));
    let e = server
        .accept(&attrs(Reliability::ReliableReception), T)
        .unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::AttributesMismatch), "{e}");
    let e = t.join().unwrap().unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::AttributesMismatch), "{e}");
    // A request nobody answers in time.
    let e = s1
        .vi_connect(None, 5, &d, Some(Duration::from_millis(200)))
        .unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::NoSuchRequest), "{e}");
    // The server learnt of it, but it is gone by now.
    let late = server.wait_request(T).unwrap();
    let e = late.accept(&d).unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::NoSuchRequest), "{e}");
    // A server nobody asks: its wait ends with the time it waited, named
    // as such (not as an engine that does not answer).
    let e = server
        .wait_request(Some(Duration::from_millis(50)))
        .err()
        .expect("no request");
    assert!(
        matches!(e, Error::NoRequest(t) if t == Duration::from_millis(50)),
        "{e:?}"
    );
    assert_eq!(e.to_string(), "no connection request came within 50 ms");
    // Once the server is dropped, the discriminator is free again.
    drop(server);
    let again = s1.vi_listen(5).unwrap();
    drop(again);
}

#[test]
fn messages_with_no_receive_posted_wait_in_order_and_the_sender_is_held_back() {
    // 1 KiB: copied into the ring, which fills; 4 KiB: read by the
    // receiver from the sender's region, so every send waits for it.
    for len in [1024, 4096] {
        held_back(len);
    }
}

fn held_back(len: usize) {
    let (_e, s1, s2) = engine();
    let (mut a, mut b) = connect_deep(&s1, &s2, 11);
    const N: usize = 2000;
    let pulled = len >= unet::via::PULL_MIN;
    let ra = s1.register_memory(N * len).unwrap();
    let rb = s2.register_memory(N * len).unwrap();
    for i in 0..N {
        ra.write(i * len, &pattern(i, len));
        a.post_send(i as u64, &[ViSeg::new(&ra, i * len, len)])
            .unwrap();
    }
    // Nothing fails, nothing is dropped, the VI stays up. Copied through
    // the ring, 2 MB cannot fit it: some sends wait in the send queue.
    // Read from the region, no send completes before it is read.
    let mut done = 0;
    while let Some(s) = a.send_done() {
        assert_eq!(s.status, Ok(len));
        done += 1;
    }
    if pulled {
        assert_eq!(done, 0, "{len} B: sends completed before they were read");
    } else {
        assert!(
            done > 0 && done < N,
            "{len} B: {done} sends completed of {N}"
        );
    }
    assert_eq!(b.state(), ViState::Connected);
    assert_eq!(a.state(), ViState::Connected);
    // Now the receiver posts: everything arrives, in order.
    for i in 0..N {
        b.post_recv(i as u64, &[ViSeg::new(&rb, i * len, len)])
            .unwrap();
    }
    for i in 0..N {
        let c = b.recv_wait(T).unwrap();
        assert_eq!(
            c,
            ViCompletion {
                id: i as u64,
                status: Ok(len)
            }
        );
        // The sender moves on as the receiver drains.
        while let Some(s) = a.send_done() {
            assert_eq!(s.status, Ok(len));
            done += 1;
        }
    }
    while done < N {
        assert_eq!(a.send_wait(T).unwrap().status, Ok(len));
        done += 1;
    }
    let mut got = vec![0u8; len];
    for i in 0..N {
        rb.read(i * len, &mut got);
        assert_eq!(got, pattern(i, len), "{len} B: message {i}");
    }
    assert!(b.stats().rx_not_posted >= 1);
    if !pulled {
        assert!(a.stats().tx_full >= 1);
    }
}

#[test]
fn strict_receiver_not_ready_breaks_both_sides() {
    let (_e, s1, s2) = engine();
    let strict = ViAttributes {
        strict_rnr: true,
        ..ViAttributes::default()
    };
    let (mut a, mut b) = connect(&s1, &s2, 12, ViAttributes::default(), strict);
    let ra = s1.register_memory(4096).unwrap();
    a.post_send(1, &[ViSeg::new(&ra, 0, 64)]).unwrap();
    assert_eq!(a.send_wait(T).unwrap().status, Ok(64));
    // The receiver finds a message and nothing posted.
    assert_eq!(b.state(), ViState::Error(ViError::ReceiverNotReady));
    // Posting now completes at once with the reason.
    let rb = s2.register_memory(4096).unwrap();
    b.post_recv(9, &[ViSeg::new(&rb, 0, 64)]).unwrap();
    assert_eq!(
        b.recv_wait(T).unwrap(),
        ViCompletion {
            id: 9,
            status: Err(ViError::ReceiverNotReady)
        }
    );
    // The sender is told why, and its next send fails with it.
    a.post_send(2, &[ViSeg::new(&ra, 0, 64)]).unwrap();
    assert_eq!(
        a.send_wait(T).unwrap(),
        ViCompletion {
            id: 2,
            status: Err(ViError::ReceiverNotReady)
        }
    );
    assert_eq!(a.state(), ViState::Error(ViError::ReceiverNotReady));
}

#[test]
fn reliable_reception_completes_only_once_the_receiver_placed_it() {
    let (_e, s1, s2) = engine();
    let rr = attrs(Reliability::ReliableReception);
    let (mut a, mut b) = connect(&s1, &s2, 13, rr.clone(), rr);
    let ra = s1.register_memory(4096).unwrap();
    let rb = s2.register_memory(4096).unwrap();
    a.post_send(1, &[ViSeg::new(&ra, 0, 100)]).unwrap();
    thread::sleep(Duration::from_millis(20));
    assert_eq!(
        a.send_done(),
        None,
        "completed before the receiver placed it"
    );
    assert_eq!(
        a.send_wait(Some(Duration::from_millis(50))),
        Err(WaitError::Timeout)
    );
    b.post_recv(1, &[ViSeg::new(&rb, 0, 100)]).unwrap();
    assert_eq!(b.recv_wait(T).unwrap().status, Ok(100));
    assert_eq!(a.send_wait(T).unwrap().status, Ok(100));
    // Reliable delivery, by contrast, completes once in the ring.
    let (mut c, _d) = connect(
        &s1,
        &s2,
        14,
        ViAttributes::default(),
        ViAttributes::default(),
    );
    c.post_send(1, &[ViSeg::new(&ra, 0, 100)]).unwrap();
    assert_eq!(c.send_wait(T).unwrap().status, Ok(100));
}

#[test]
fn a_bad_descriptor_breaks_its_vi_only() {
    let (_e, s1, s2) = engine();
    let (mut a, mut b) = connect(
        &s1,
        &s2,
        16,
        ViAttributes::default(),
        ViAttributes::default(),
    );
    let (mut c, d) = connect(
        &s1,
        &s2,
        17,
        ViAttributes::default(),
        ViAttributes::default(),
    );
    let ra = s1.register_memory(4096).unwrap();
    let rb = s2.register_memory(4096).unwrap();
    let other = s2.register_memory(4096).unwrap();
    b.post_recv(1, &[ViSeg::new(&rb, 0, 4096)]).unwrap();
    // Past the end of the region.
    a.post_send(1, &[ViSeg::new(&ra, 4000, 200)]).unwrap();
    assert_eq!(
        a.send_wait(T).unwrap(),
        ViCompletion {
            id: 1,
            status: Err(ViError::BadDescriptor)
        }
    );
    assert_eq!(a.state(), ViState::Error(ViError::BadDescriptor));
    // Its peer is told, its posted receive completes with the reason.
    assert_eq!(
        b.recv_wait(T).unwrap(),
        ViCompletion {
            id: 1,
            status: Err(ViError::BadDescriptor)
        }
    );
    // A region of another session is not this VI's to use.
    c.post_send(1, &[ViSeg::new(&other, 0, 10)]).unwrap();
    assert_eq!(c.send_wait(T).unwrap().status, Err(ViError::BadDescriptor));
    // Too many segments.
    let (mut e, mut f) = connect(
        &s1,
        &s2,
        18,
        ViAttributes::default(),
        ViAttributes::default(),
    );
    let segs: Vec<ViSeg> = (0..VI_MAX_SEGMENTS + 1)
        .map(|i| ViSeg::new(&ra, i, 1))
        .collect();
    e.post_send(1, &segs).unwrap();
    assert_eq!(e.send_wait(T).unwrap().status, Err(ViError::BadDescriptor));
    drop((c, d));
    // An honest pair beside them carries on.
    let (mut g, mut h) = connect(
        &s1,
        &s2,
        19,
        ViAttributes::default(),
        ViAttributes::default(),
    );
    h.post_recv(1, &[ViSeg::new(&rb, 0, 100)]).unwrap();
    g.post_send(1, &[ViSeg::new(&ra, 0, 100)]).unwrap();
    assert_eq!(h.recv_wait(T).unwrap().status, Ok(100));
    assert_eq!(f.state(), ViState::Error(ViError::BadDescriptor));
}

#[test]
fn a_receive_too_small_fails_and_breaks_a_reliable_vi() {
    let (_e, s1, s2) = engine();
    let (mut a, mut b) = connect(
        &s1,
        &s2,
        20,
        ViAttributes::default(),
        ViAttributes::default(),
    );
    let ra = s1.register_memory(4096).unwrap();
    let rb = s2.register_memory(4096).unwrap();
    b.post_recv(1, &[ViSeg::new(&rb, 0, 10)]).unwrap();
    b.post_recv(2, &[ViSeg::new(&rb, 0, 100)]).unwrap();
    a.post_send(1, &[ViSeg::new(&ra, 0, 11)]).unwrap();
    assert_eq!(b.recv_wait(T).unwrap().status, Err(ViError::TooLong));
    assert_eq!(b.recv_wait(T).unwrap().status, Err(ViError::TooLong));
    assert_eq!(b.state(), ViState::Error(ViError::TooLong));
    // Unreliable: the message is dropped and counted, the VI carries on.
    let u = attrs(Reliability::Unreliable);
    let (mut c, mut d) = connect(&s1, &s2, 21, u.clone(), u);
    d.post_recv(1, &[ViSeg::new(&rb, 0, 10)]).unwrap();
    d.post_recv(2, &[ViSeg::new(&rb, 0, 100)]).unwrap();
    c.post_send(1, &[ViSeg::new(&ra, 0, 11)]).unwrap();
    c.post_send(2, &[ViSeg::new(&ra, 0, 12)]).unwrap();
    assert_eq!(d.recv_wait(T).unwrap().status, Err(ViError::TooLong));
    assert_eq!(
        d.recv_wait(T).unwrap(),
        ViCompletion {
            id: 2,
            status: Ok(12)
        }
    );
    assert_eq!(d.stats().rx_dropped, 1);
    assert_eq!(d.state(), ViState::Connected);
}

#[test]
fn completion_queues_report_every_completion_in_order() {
    let (_e, s1, s2) = engine();
    let cq = CompletionQueue::new();
    let scq = CompletionQueue::new();
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for k in 0..3u64 {
        let (a, b) = connect(
            &s1,
            &s2,
            30 + k,
            ViAttributes {
                send_cq: Some(scq.clone()),
                ..ViAttributes::default()
            },
            ViAttributes {
                recv_cq: Some(cq.clone()),
                ..ViAttributes::default()
            },
        );
        senders.push(a);
        receivers.push(b);
    }
    let ra = s1.register_memory(1 << 16).unwrap();
    let rb = s2.register_memory(1 << 16).unwrap();
    // One message at a time, VIs in a known order: the queue says which.
    let order = [2usize, 0, 1, 1, 2, 0, 0, 2];
    for (n, &k) in order.iter().enumerate() {
        receivers[k]
            .post_recv(n as u64, &[ViSeg::new(&rb, 0, 64)])
            .unwrap();
        senders[k]
            .post_send(n as u64, &[ViSeg::new(&ra, 0, 8 + n)])
            .unwrap();
        let (vi, q) = cq.wait(T).expect("an entry");
        assert_eq!((vi, q), (receivers[k].id(), ViQueue::Recv));
        let c = receivers[k].recv_done().expect("its completion");
        assert_eq!(
            c,
            ViCompletion {
                id: n as u64,
                status: Ok(8 + n)
            }
        );
        let (vi, q) = scq.wait(T).expect("a send entry");
        assert_eq!((vi, q), (senders[k].id(), ViQueue::Send));
        assert_eq!(senders[k].send_done().unwrap().id, n as u64);
    }
    assert_eq!(cq.done(), None);
    // Many at once, from three threads: none lost, each VI's in order.
    const PER: usize = 3000;
    let handles: Vec<_> = senders
        .into_iter()
        .enumerate()
        .map(|(k, mut a)| {
            let ra = s1.register_memory(4096).unwrap();
            let scq = scq.clone();
            thread::spawn(move || {
                for i in 0..PER {
                    ra.write(0, &(i as u64 * 10 + k as u64).to_le_bytes());
                    a.post_send(i as u64, &[ViSeg::new(&ra, 0, 8)]).unwrap();
                    // Take completions as the send queue reports them.
                    while scq.done().is_some() {}
                    while a.send_done().is_some() {}
                }
                a
            })
        })
        .collect();
    let mut next = [0usize; 3];
    let mut total = 0;
    let mut posted = [0usize; 3];
    let start = Instant::now();
    while total < 3 * PER {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "stuck at {total}"
        );
        for k in 0..3 {
            while posted[k] < PER && posted[k] - next[k] < 64 {
                let off = (k * 64 + posted[k] % 64) * 8;
                receivers[k]
                    .post_recv(posted[k] as u64, &[ViSeg::new(&rb, off, 8)])
                    .unwrap();
                posted[k] += 1;
            }
        }
        let Some((vi, q)) = cq.wait(Some(Duration::from_millis(100))) else {
            continue;
        };
        assert_eq!(q, ViQueue::Recv);
        let k = receivers
            .iter()
            .position(|r| r.id() == vi)
            .expect("one of ours");
        let c = receivers[k].recv_done().expect("the completion it reports");
        assert_eq!(
            c,
            ViCompletion {
                id: next[k] as u64,
                status: Ok(8)
            }
        );
        let off = (k * 64 + next[k] % 64) * 8;
        let mut v = [0u8; 8];
        rb.read(off, &mut v);
        assert_eq!(u64::from_le_bytes(v), next[k] as u64 * 10 + k as u64);
        next[k] += 1;
        total += 1;
    }
    assert_eq!(next, [PER; 3]);
    assert_eq!(cq.done(), None);
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn closing_completes_outstanding_descriptors_and_tells_the_peer() {
    let (_e, s1, s2) = engine();
    let (a, mut b) = connect(
        &s1,
        &s2,
        40,
        ViAttributes::default(),
        ViAttributes::default(),
    );
    let rb = s2.register_memory(4096).unwrap();
    b.post_recv(1, &[ViSeg::new(&rb, 0, 64)]).unwrap();
    b.post_recv(2, &[ViSeg::new(&rb, 64, 64)]).unwrap();
    a.close().unwrap();
    for id in [1, 2] {
        assert_eq!(
            b.recv_wait(T).unwrap(),
            ViCompletion {
                id,
                status: Err(ViError::PeerGone)
            }
        );
    }
    assert_eq!(
        b.recv_wait(T),
        Err(WaitError::Empty(Some(ViError::PeerGone)))
    );
    // The discriminator takes a new connection.
    let (mut c, mut d) = connect(
        &s1,
        &s2,
        40,
        ViAttributes::default(),
        ViAttributes::default(),
    );
    let ra = s1.register_memory(4096).unwrap();
    d.post_recv(1, &[ViSeg::new(&rb, 0, 64)]).unwrap();
    c.post_send(1, &[ViSeg::new(&ra, 0, 64)]).unwrap();
    assert_eq!(d.recv_wait(T).unwrap().status, Ok(64));
}

// -------------------------------------------------------------------------
// A peer killed mid-stream
// -------------------------------------------------------------------------

const KILL_TAG: u64 = 77;

/// The role of the child process (`UNET_VI_CHILD` = the engine's socket,
/// `UNET_VI_CHILD_LEN` = the message size): connect a VI to `KILL_TAG`
/// and send numbered messages as fast as the receiver takes them, until
/// it is killed.
#[test]
fn child() {
    let Some(sock) = std::env::var_os("UNET_VI_CHILD") else {
        return;
    };
    let s = Session::connect(PathBuf::from(sock)).expect("connect");
    let mut vi = s
        .vi_connect(None, KILL_TAG, &ViAttributes::default(), T)
        .expect("vi");
    // A buffer is not to be touched until its send completes: twice as
    // many slots as sends can be outstanding, so that the slot written
    // (before the post, which may find the queue full) is never one an
    // outstanding send still reads.
    let len: usize = std::env::var("UNET_VI_CHILD_LEN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let slots = 2 * ViAttributes::default().send_queue as usize;
    let r = s.register_memory(slots * len).unwrap();
    let mut i = 0u64;
    loop {
        let at = (i as usize % slots) * len;
        r.write(at, &i.to_le_bytes());
        match vi.post_send(i, &[ViSeg::new(&r, at, len)]) {
            Ok(()) => i += 1,
            Err(PostError::QueueFull) => {
                let _ = vi.send_wait(T);
            }
        }
        while vi.send_done().is_some() {}
        if vi.state() != ViState::Connected {
            // The test is over (or failed): no spinning orphan.
            std::process::exit(0);
        }
    }
}

/// Kills the child when the test ends, however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_peer_killed_mid_stream_breaks_the_vi_and_nothing_completes_as_success() {
    // Copied through the ring, and read from the killed sender's region.
    for len in [1024, 4096] {
        killed_mid_stream(len);
    }
}

fn killed_mid_stream(len: usize) {
    let sock: PathBuf =
        std::env::temp_dir().join(format!("unet-via-kill-{}-{len}.sock", std::process::id()));
    let engine = Engine::start(EngineConfig {
        control_socket: Some(sock.clone()),
        ..Default::default()
    })
    .unwrap();
    let s = Session::embedded(&engine).unwrap();
    let server = s.vi_listen(KILL_TAG).unwrap();
    let mut child = KillOnDrop(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child", "--nocapture", "--test-threads=1"])
            .env("UNET_VI_CHILD", &sock)
            .env("UNET_VI_CHILD_LEN", len.to_string())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut vi = server.accept(&ViAttributes::default(), T).unwrap();
    let r = s.register_memory(64 * len).unwrap();
    for i in 0..64u64 {
        vi.post_recv(i, &[ViSeg::new(&r, i as usize * len, len)])
            .unwrap();
    }
    let mut next = 0u64;
    let mut killed_at = None;
    let mut errors = 0;
    loop {
        match vi.recv_wait(Some(Duration::from_secs(10))) {
            Ok(c) => match c.status {
                Ok(got) => {
                    assert!(errors == 0, "a success after an error");
                    assert_eq!(got, len);
                    let mut v = [0u8; 8];
                    r.read((c.id % 64) as usize * len, &mut v);
                    assert_eq!(u64::from_le_bytes(v), next, "in order, once");
                    next += 1;
                    vi.post_recv(
                        c.id + 64,
                        &[ViSeg::new(&r, (c.id % 64) as usize * len, len)],
                    )
                    .unwrap();
                    if next == 20_000 {
                        child.0.kill().unwrap();
                        killed_at = Some(Instant::now());
                    }
                }
                Err(e) => {
                    assert_eq!(e, ViError::PeerGone);
                    errors += 1;
                }
            },
            Err(WaitError::Empty(Some(ViError::PeerGone))) => break,
            Err(e) => panic!("after {next} messages: {e}"),
        }
    }
    let took = killed_at.expect("killed").elapsed();
    child.0.wait().unwrap();
    assert_eq!(
        errors, 64,
        "every outstanding receive completes with an error"
    );
    assert!(
        took < Duration::from_secs(2),
        "the error state took {took:?}"
    );
    assert_eq!(vi.state(), ViState::Error(ViError::PeerGone));
    eprintln!("{len} B: {next} messages, then the error state {took:?} after the kill");
    // The same discriminator takes a new connection.
    let s2 = Session::embedded(&engine).unwrap();
    let c2 = s2.clone();
    let t = thread::spawn(move || c2.vi_connect(None, KILL_TAG, &ViAttributes::default(), T));
    let mut v2 = server.accept(&ViAttributes::default(), T).unwrap();
    let mut v1 = t.join().unwrap().unwrap();
    v2.post_recv(1, &[ViSeg::new(&r, 0, 64)]).unwrap();
    let r1 = s2.register_memory(64).unwrap();
    v1.post_send(1, &[ViSeg::new(&r1, 0, 64)]).unwrap();
    assert_eq!(v2.recv_wait(T).unwrap().status, Ok(64));
}

#[test]
fn sends_copied_from_plain_memory_go_now_or_not_at_all() {
    let (_e, s1, s2) = engine();
    let (mut a, mut b) = connect_deep(&s1, &s2, 31);
    const LEN: usize = 4096;
    let ra = s1.register_memory(LEN).unwrap();
    let rb = s2.register_memory(4096 * LEN).unwrap();
    // Copied sends fill the ring (no receive posted) until it refuses;
    // nothing is sent when it refuses.
    let mut n = 0usize;
    while a.send_copied(n as u64, &pattern(n, LEN)) {
        n += 1;
        assert!(n < 4096, "the ring never filled");
    }
    assert!(n > 0);
    // A posted send waits behind them; while it does, copied sends are
    // refused (they would overtake it).
    ra.write(0, &pattern(n, LEN));
    a.post_send(n as u64, &[ViSeg::new(&ra, 0, LEN)]).unwrap();
    assert!(!a.send_copied(n as u64 + 1, &pattern(n + 1, LEN)));
    for i in 0..=n {
        b.post_recv(i as u64, &[ViSeg::new(&rb, i * LEN, LEN)])
            .unwrap();
    }
    // The sender's library moves its queued send into the ring as it
    // takes completions (no engine on the local path).
    let mut sends = Vec::new();
    for i in 0..=n {
        while let Some(c) = a.send_done() {
            sends.push(c);
        }
        assert_eq!(b.recv_wait(T).unwrap().status, Ok(LEN), "message {i}");
    }
    while sends.len() <= n {
        sends.push(a.send_wait(T).unwrap());
    }
    for (i, c) in sends.iter().enumerate() {
        assert_eq!((c.id, c.status), (i as u64, Ok(LEN)), "send {i}");
    }
    let mut got = vec![0u8; LEN];
    for i in 0..=n {
        rb.read(i * LEN, &mut got);
        assert_eq!(got, pattern(i, LEN), "message {i}");
    }
    // An empty queue again: a copied send goes at once.
    b.post_recv(0, &[ViSeg::new(&rb, 0, LEN)]).unwrap();
    assert!(a.send_copied(7, b"plain"));
    assert_eq!(b.recv_wait(T).unwrap().status, Ok(5));
    rb.read(0, &mut got[..5]);
    assert_eq!(&got[..5], b"plain");
}

/// Sends copied through the ring and sends the receiver reads from the
/// sender's region, interleaved: on every level, with the send queue
/// reporting to a completion queue, every send completes once, in the
/// order posted, every receive gets its own message whole, and a sender
/// may reuse a buffer as soon as its send completed.
#[test]
fn copied_and_referenced_sends_interleave_in_order_on_every_level() {
    use unet::via::PULL_MIN;
    // Below, at and above the threshold; the last ones gathered from two
    // segments of two regions.
    let sizes = [64, PULL_MIN - 1, PULL_MIN, 100, 9000, 70_000, 1, 4096];
    const N: usize = 400;
    const SLOT: usize = 80 << 10;
    let levels = [
        Reliability::Unreliable,
        Reliability::ReliableDelivery,
        Reliability::ReliableReception,
    ];
    for (t, level) in levels.into_iter().enumerate() {
        let (_e, s1, s2) = engine();
        let scq = CompletionQueue::new();
        let (mut a, mut b) = connect(
            &s1,
            &s2,
            60 + t as u64,
            ViAttributes {
                reliability: level,
                send_queue: 16,
                send_cq: Some(scq.clone()),
                ..ViAttributes::default()
            },
            ViAttributes {
                reliability: level,
                recv_queue: 16,
                ..ViAttributes::default()
            },
        );
        // The sender's data: one buffer of each size, rewritten for each
        // message once the previous send from it completed.
        let r1 = s1.register_memory(sizes.len() * SLOT).unwrap();
        let r2 = s1.register_memory(SLOT).unwrap();
        let rb = s2.register_memory(16 * SLOT).unwrap();
        let receiver = thread::spawn(move || {
            for k in 0..16 {
                b.post_recv(k, &[ViSeg::new(&rb, k as usize * SLOT, SLOT)])
                    .unwrap();
            }
            let mut got = vec![0u8; SLOT];
            for i in 0..N {
                let c = b.recv_wait(T).expect("a receive");
                let k = c.id as usize;
                assert_eq!(k, i % 16, "receives complete in order");
                let len = sizes[i % sizes.len()];
                assert_eq!(c.status, Ok(len), "message {i}");
                rb.read(k * SLOT, &mut got[..len]);
                assert!(
                    got[..len] == pattern(i, len)[..],
                    "{level:?}: message {i} ({len} B)"
                );
                b.post_recv(k as u64, &[ViSeg::new(&rb, k * SLOT, SLOT)])
                    .unwrap();
            }
            b
        });
        let mut in_use = [false; 8];
        let mut completed = 0;
        let take = |a: &mut Vi, in_use: &mut [bool; 8], completed: &mut usize| {
            let (vi, q) = scq.wait(T).expect("a send entry");
            assert_eq!((vi, q), (a.id(), ViQueue::Send));
            let c = a.send_done().expect("its completion");
            assert_eq!(
                c.id as usize, *completed,
                "{level:?}: sends complete in order"
            );
            let j = *completed % sizes.len();
            assert_eq!(c.status, Ok(sizes[j]));
            in_use[j] = false;
            *completed += 1;
        };
        for i in 0..N {
            let j = i % sizes.len();
            let len = sizes[j];
            // A buffer is rewritten only once its last send completed.
            while in_use[j] || i - completed >= 16 {
                take(&mut a, &mut in_use, &mut completed);
            }
            let data = pattern(i, len);
            if len > 9000 {
                let half = len / 2;
                r1.write(j * SLOT, &data[..half]);
                r2.write(0, &data[half..]);
                let segs = [
                    ViSeg::new(&r1, j * SLOT, half),
                    ViSeg::new(&r2, 0, len - half),
                ];
                a.post_send(i as u64, &segs).unwrap();
            } else {
                r1.write(j * SLOT, &data);
                a.post_send(i as u64, &[ViSeg::new(&r1, j * SLOT, len)])
                    .unwrap();
            }
            in_use[j] = true;
        }
        while completed < N {
            take(&mut a, &mut in_use, &mut completed);
        }
        let mut b = receiver.join().unwrap();
        assert_eq!(a.state(), ViState::Connected);
        assert_eq!(b.state(), ViState::Connected);
        assert_eq!(b.stats().rx_msgs, N as u64);
    }
}
