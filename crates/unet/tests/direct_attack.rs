//! A hostile peer on the direct path: it scribbles the ring it shares with
//! a receiver (record headers with bad lengths and bad padding, random
//! bytes after them, random values in the consumer line the receiver's own
//! sends read). The receiver takes every well-formed record the peer wrote
//! before the bad one, reports the connection broken once per connection
//! (`RecvError::Broken`, counted in `direct_rx_bad`), and carries on; an
//! honest peer of the same receiver and an honest pair beside them lose
//! nothing.

mod common;

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Rng;
use unet::{
    Channel, ChannelOptions, ClientCounter, Endpoint, EndpointConfig, Engine, EngineConfig, Event,
    PathChoice, RecvError, Session,
};
use unet_abi::{record_span, record_tag, ConnHeader, CONN_HEADER_SIZE, RECORD_HEADER, RECORD_PAD};
use unet_sys::Segment;

/// Each ring of a connection (small, so that records reach its end).
const RING: u32 = 1 << 14;
const ROUNDS: u64 = 300;
/// Messages the honest peer sends the receiver each round.
const HONEST_PER_ROUND: u64 = 5;
/// Messages of the honest pair beside them.
const PAIR_MSGS: u64 = 20_000;
const T: Duration = Duration::from_secs(10);

const DIRECT: ChannelOptions = ChannelOptions {
    path: PathChoice::Direct,
};

// The scribbles are reproducible from the seed printed (common::Rng).

/// A message of the honest senders: its sequence number, then bytes made
/// from it, `len` in all.
fn honest_msg(seq: u64, len: usize) -> Vec<u8> {
    let mut m: Vec<u8> = (0..len)
        .map(|i| (seq.wrapping_mul(31).wrapping_add(i as u64 * 7)) as u8)
        .collect();
    let s = seq.to_le_bytes();
    let n = len.min(8);
    m[..n].copy_from_slice(&s[..n]);
    m
}

fn honest_len(seq: u64) -> usize {
    [8, 56, 57, 300, 1000, 4000][(seq % 6) as usize]
}

/// A second mapping of the newest direct connection of this process (the
/// one just opened), found by its memory file's name in `/proc/self/fd`:
/// what a hostile process holding the connection can write.
fn newest_connection() -> Segment {
    let mut best: Option<(u32, std::path::PathBuf)> = None;
    for e in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        let t = target.to_string_lossy();
        let Some(rest) = t.strip_prefix("/memfd:unet-conn-") else {
            continue;
        };
        let id: u32 = match rest.split(' ').next().and_then(|n| n.parse().ok()) {
            Some(id) => id,
            None => continue,
        };
        if best.as_ref().is_none_or(|(b, _)| id > *b) {
            best = Some((id, e.path()));
        }
    }
    let (_, path) = best.expect("a direct connection's segment among our descriptors");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open the connection's memory file");
    let seg = Segment::open(OwnedFd::from(f), CONN_HEADER_SIZE, true).expect("map it");
    // SAFETY: at least a header's worth of mapped, page-aligned memory.
    let h = unsafe { seg.ptr().cast::<ConnHeader>().as_ref() };
    assert_eq!(h.ring_size, RING, "the connection's ring size");
    seg
}

/// The hostile side A of a connection: writes into the A→B ring.
struct Scribbler {
    seg: Segment,
}

impl Scribbler {
    fn word(&self, off: u64) -> &AtomicU64 {
        let p = self
            .seg
            .at(CONN_HEADER_SIZE + off as usize, 8)
            .expect("inside the ring");
        // SAFETY: 8 bytes inside the mapping (checked by `at`), 8-aligned
        // (the ring is page aligned, off a multiple of 8); the receiver
        // reads the word atomically too.
        unsafe { p.cast::<AtomicU64>().as_ref() }
    }

    fn header(&self, pos: u64, len: u32) {
        let off = pos % RING as u64;
        self.word(off).store(
            record_tag(pos) as u64 | ((len as u64) << 32),
            Ordering::Release,
        );
    }

    /// Bytes at `off..off + data.len()` of the ring.
    fn bytes(&self, off: u64, data: &[u8]) {
        let p = self
            .seg
            .at(CONN_HEADER_SIZE + off as usize, data.len())
            .expect("inside the ring");
        // SAFETY: data.len() bytes inside the mapping (checked by `at`);
        // the receiver reads these bytes only after the header that
        // publishes them (Release in `header`).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p.as_ptr(), data.len()) };
    }

    /// A well-formed record at `pos`; returns the position after it.
    fn record(&self, pos: u64, data: &[u8]) -> u64 {
        self.bytes(pos % RING as u64 + RECORD_HEADER as u64, data);
        self.header(pos, data.len() as u32);
        pos + record_span(data.len()) as u64
    }

    /// Random values in the consumer line of the B→A ring: the position,
    /// sleeping flag and futex word that side B's sends read.
    fn scribble_consumer(&self, rng: &mut Rng) {
        // SAFETY: the header page is mapped; b_to_a is a line of atomics.
        let h = unsafe { &*self.seg.ptr().cast::<ConnHeader>().as_ptr() };
        h.b_to_a.position.store(rng.next(), Ordering::Release);
        h.b_to_a
            .sleeping
            .store(rng.next() as u32, Ordering::Release);
        h.b_to_a
            .futex
            .fetch_add(rng.next() as u32, Ordering::Release);
    }

    /// Random bytes from `off` to the end of the ring (tags that do not
    /// match anything the receiver looks for, but for a 2^-32 chance).
    fn noise(&self, off: u64, rng: &mut Rng) {
        let mut o = off & !7;
        while o < RING as u64 {
            self.word(o).store(rng.next(), Ordering::Relaxed);
            o += 8;
        }
    }
}

/// Receive on `r` until the hostile channel `bad` is reported broken and
/// `honest_want` messages came from the honest channel `good`: returns the
/// hostile channel's messages, checking the honest ones as they come.
fn drain_round(
    r: &mut Endpoint,
    bad_round: u64,
    good: Channel,
    next_honest: &mut u64,
    honest_want: u64,
    many: bool,
) -> Vec<(Channel, Vec<u8>)> {
    let mut buf = vec![0u8; 1 << 16];
    let mut hostile = Vec::new();
    let mut broken = false;
    let t0 = Instant::now();
    while !broken || *next_honest < honest_want {
        assert!(
            t0.elapsed() < T,
            "round {bad_round}: broken {broken}, honest {next_honest} of {honest_want}"
        );
        let mut got: Vec<(Channel, Vec<u8>)> = Vec::new();
        let res = if many {
            r.recv_many(&mut buf, 8, |m, data| {
                got.push((m.channel, data.to_vec()));
                true
            })
            .map(|_| ())
        } else {
            match r.recv(&mut buf, Some(Duration::from_millis(100))) {
                Ok(m) => {
                    got.push((m.channel, buf[..m.len].to_vec()));
                    Ok(())
                }
                Err(RecvError::Timeout) => Ok(()),
                Err(e) => Err(e),
            }
        };
        for (ch, data) in got {
            if ch == good {
                let want = honest_msg(*next_honest, honest_len(*next_honest));
                assert!(
                    data == want,
                    "round {bad_round}: honest message {next_honest} differs"
                );
                *next_honest += 1;
            } else {
                assert!(!broken, "round {bad_round}: a message after the break");
                hostile.push((ch, data));
            }
        }
        match res {
            Ok(()) => {}
            Err(RecvError::Broken(ch)) => {
                assert!(ch != good, "round {bad_round}: the honest channel broke");
                assert!(!broken, "round {bad_round}: broken twice");
                broken = true;
                hostile.push((ch, Vec::new()));
            }
            Err(e) => panic!("round {bad_round}: {e}"),
        }
        if many {
            // recv_many does not wait: give the honest sender a moment.
            std::thread::yield_now();
        }
    }
    hostile
}

/// 300 rounds against one receiver, each on a new direct connection whose
/// opener writes 0 to 3 well-formed records, then a bad one (a record
/// running past the end of the ring, padding of the wrong length, or
/// padding at the start of a lap, chosen at random), random bytes after
/// it, and random values in the consumer line the receiver's sends read;
/// the receiver sends on the channel (any outcome but a crash will do),
/// then reads with `recv` or `recv_many`. Asserts: the receiver gets
/// exactly the well-formed records, intact and in order, then one
/// `RecvError::Broken` for that channel and no message after it; its
/// `direct_rx_bad` counter is exactly the number of rounds; a send on a
/// broken channel fails with `PeerGone`; an honest peer's 5 messages a
/// round to the same receiver and an honest pair's 20 000 messages in
/// another thread all arrive intact and in order; and the receiver still
/// works on a fresh direct channel afterwards.
#[test]
fn a_peer_scribbling_the_ring_is_cut_off_and_nobody_else_notices() {
    let seed = std::env::var("UNET_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("seed {seed} (UNET_SEED={seed} repeats this run)");
    let mut rng = Rng(seed);
    let engine = Engine::start(EngineConfig {
        conn_ring_size: RING,
        ..EngineConfig::default()
    })
    .unwrap();
    let s = Session::embedded(&engine).unwrap();

    // The honest pair beside, streaming all along (at least PAIR_MSGS
    // messages, and on until the attack is over).
    let mut p = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut q = s.create_endpoint(EndpointConfig::default()).unwrap();
    let pq = p.open_channel(q.addr(), DIRECT).unwrap();
    let over = Arc::new(AtomicBool::new(false));
    let pair_total = Arc::new(AtomicU64::new(u64::MAX));
    let pair_sender = {
        let (over, total) = (over.clone(), pair_total.clone());
        std::thread::spawn(move || {
            let mut seq = 0;
            while seq < PAIR_MSGS || !over.load(Ordering::Relaxed) {
                p.send_blocking(pq, &honest_msg(seq, honest_len(seq)), T)
                    .unwrap_or_else(|e| panic!("pair message {seq}: {e}"));
                seq += 1;
            }
            total.store(seq, Ordering::Release);
            p
        })
    };
    let pair_receiver = {
        let total = pair_total.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            let mut seq = 0;
            while seq < total.load(Ordering::Acquire) {
                let r = match q.recv(&mut buf, Some(Duration::from_millis(100))) {
                    Ok(r) => r,
                    Err(RecvError::Timeout) => continue,
                    Err(e) => panic!("pair message {seq}: {e}"),
                };
                assert!(
                    buf[..r.len] == honest_msg(seq, honest_len(seq))[..],
                    "pair message {seq} differs"
                );
                seq += 1;
            }
            seq
        })
    };

    let mut r = s.create_endpoint(EndpointConfig::default()).unwrap();
    let mut honest = s.create_endpoint(EndpointConfig::default()).unwrap();
    let good_tx = honest.open_channel(r.addr(), DIRECT).unwrap();
    let mut hostile = s.create_endpoint(EndpointConfig::default()).unwrap();
    // The receiver's tag for the honest channel: from its first message.
    let mut buf = vec![0u8; 1 << 16];
    honest.send(good_tx, &honest_msg(0, honest_len(0))).unwrap();
    let good = r.recv(&mut buf, Some(T)).unwrap().channel;
    let mut next_honest = 1u64;
    let mut sent_honest = 1u64;
    let mut kinds = [0u64; 3];

    for round in 0..ROUNDS {
        let bad_tx = hostile.open_channel(r.addr(), DIRECT).unwrap();
        let sc = Scribbler {
            seg: newest_connection(),
        };
        let mut pos = 0u64;
        let mut written = Vec::new();
        for _ in 0..rng.below(4) {
            let len = 1 + rng.below(3000) as usize;
            let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            pos = sc.record(pos, &data);
            written.push(data);
        }
        let off = pos % RING as u64;
        // Padding can only be wrong by its length after a record, and
        // only by its place at the start of the ring.
        let kind = match rng.below(2) {
            0 => 0,
            _ if off == 0 => 2,
            _ => 1,
        };
        kinds[kind] += 1;
        match kind {
            // A record that runs past the end of the ring.
            0 => {
                let room = RING as u64 - off - RECORD_HEADER as u64;
                let len = room + 1 + rng.below((RECORD_PAD as u64) - room - 1);
                sc.header(pos, len as u32);
            }
            // Padding that does not end at the end of the ring.
            1 => {
                let mut pad = rng.below(RING as u64 * 2) as u32 & !7;
                if pad as u64 == RING as u64 - off {
                    pad += 8;
                }
                sc.header(pos, RECORD_PAD | pad);
            }
            // Padding at the start of a lap, of any length.
            _ => sc.header(pos, RECORD_PAD | rng.below(RING as u64 * 2) as u32),
        }
        sc.noise(off + 8, &mut rng);
        sc.scribble_consumer(&mut rng);
        for _ in 0..HONEST_PER_ROUND {
            honest
                .send_blocking(
                    good_tx,
                    &honest_msg(sent_honest, honest_len(sent_honest)),
                    T,
                )
                .unwrap();
            sent_honest += 1;
        }

        // The receiver learns of the channel (and maps the connection).
        let t0 = Instant::now();
        let opened = loop {
            match r.poll_event() {
                Some(Event::ChannelOpened { channel, .. }) if channel == good => {}
                Some(Event::ChannelOpened {
                    channel,
                    direct: true,
                    ..
                }) => break channel,
                Some(Event::ChannelOpened { .. }) => panic!("round {round}: not direct"),
                Some(_) => {}
                None => {
                    assert!(t0.elapsed() < T, "round {round}: no ChannelOpened");
                    std::thread::yield_now();
                }
            }
        };
        if round % 3 == 0 {
            // The receiver's own sends on the channel read the scribbled
            // consumer line: any outcome will do, but a crash.
            let _ = r.send(opened, b"hello?");
        }
        let many = round % 2 == 1;
        let got = drain_round(&mut r, round, good, &mut next_honest, sent_honest, many);
        let (last, msgs) = got.split_last().expect("the break");
        assert!(last.1.is_empty(), "round {round}: ends with the break");
        let bad = last.0;
        assert_eq!(bad, opened, "round {round}: the broken channel");
        assert_eq!(
            msgs.len(),
            written.len(),
            "round {round} (kind {kind}): {} records taken of the {} well-formed",
            msgs.len(),
            written.len()
        );
        for (i, ((ch, m), w)) in msgs.iter().zip(&written).enumerate() {
            assert_eq!(*ch, bad, "round {round}: record {i}'s channel");
            assert!(m == w, "round {round}: record {i} differs");
        }
        assert_eq!(
            r.send(bad, b"after"),
            Err(unet::SendError::PeerGone),
            "round {round}: a send on the broken channel"
        );
        assert_eq!(
            r.client_counter(ClientCounter::DirectRxBad),
            round + 1,
            "round {round}: direct_rx_bad"
        );
        hostile.close_channel(bad_tx).unwrap();
        drop(sc);
    }
    eprintln!(
        "bad records by kind (past the end, wrong padding, padding at a lap's start): {kinds:?}"
    );

    // The honest pair lost nothing, and the receiver still works.
    over.store(true, Ordering::Relaxed);
    let _p = pair_sender.join().unwrap();
    let pair_got = pair_receiver.join().unwrap();
    eprintln!("the honest pair exchanged {pair_got} messages meanwhile");
    assert!(pair_got >= PAIR_MSGS);
    let mut fresh = s.create_endpoint(EndpointConfig::default()).unwrap();
    let ch = fresh.open_channel(r.addr(), DIRECT).unwrap();
    fresh.send(ch, b"still there?").unwrap();
    let m = loop {
        let m = r.recv(&mut buf, Some(T)).unwrap();
        if m.channel != good {
            break m;
        }
    };
    assert_eq!(&buf[..m.len], b"still there?");
    assert_eq!(
        r.client_counter(ClientCounter::DirectRxBad),
        ROUNDS,
        "direct_rx_bad at the end"
    );
}
