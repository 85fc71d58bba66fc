use super::*;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

const RING: u32 = 4096;

/// A connection segment as the engine makes it.
fn conn_segment() -> Segment {
    let seg = Segment::create("test-conn", conn_segment_size(RING)).unwrap();
    // SAFETY: a fresh zeroed segment of conn_segment_size(RING) bytes,
    // not shared yet; the view goes before the segment.
    unsafe { unet_abi::view::ConnView::init(seg.ptr(), seg.len(), RING, 0, 0, 0) }.unwrap();
    seg
}

/// Counters that outlive every connection of a test.
fn counters() -> &'static [AtomicU64; CLIENT_COUNTERS] {
    Box::leak(Box::new(std::array::from_fn(|_| AtomicU64::new(0))))
}

/// Side B of a connection over `seg` (the receiver under test), and a
/// second mapping of the same memory through which the test writes the
/// A→B ring as a hostile side A would.
fn receiver(seg: &Segment) -> (DirectConn, Segment) {
    let b = Segment::open(seg.fd().try_clone().unwrap(), 0, true).unwrap();
    let raw = Segment::open(seg.fd().try_clone().unwrap(), 0, true).unwrap();
    let rx = DirectConn::open(b, 0, true, counters()).unwrap();
    (rx, raw)
}

/// Write the record header `h` at byte `off` of the A→B ring of `raw`.
fn write_header(raw: &Segment, off: u64, h: u64) {
    let p = raw.at(CONN_HEADER_SIZE + off as usize, 8).unwrap();
    // SAFETY: 8 bytes inside the mapped ring (checked by `at`), 8-byte
    // aligned (the ring is page aligned and off a multiple of 8); the
    // receiver reads the word atomically too.
    unsafe { p.cast::<AtomicU64>().as_ref() }.store(h, Ordering::Release);
}

fn pad_header(pos: u64, pad: u64) -> u64 {
    (record_tag(pos) as u64) | (((RECORD_PAD | pad as u32) as u64) << 32)
}

/// Byte `j` of golden message `i`.
fn golden_byte(i: usize, j: usize) -> u8 {
    (i * 37 + j * 11 + 5) as u8
}

/// The golden direct ring: side A's ring as its sends left it. Five
/// records (a 5-byte one, 100 bytes, a reference, 2000 and 1500
/// bytes), the first four consumed, then a 400-byte record that does
/// not fit before the end (padding, then the record at the start of
/// the next lap, over the first ones) and a reference. A reader that
/// starts at [`GOLDEN_RING_START`] finds the 1500-byte message, the
/// padding, the 400-byte message, the reference, then nothing.
fn golden_ring() -> Vec<u8> {
    let seg = conn_segment();
    let a = Segment::open(seg.fd().try_clone().unwrap(), 0, true).unwrap();
    let mut tx = DirectConn::open(a, 0, false, counters()).unwrap();
    let msg = |i: usize, n: usize| (0..n).map(|j| golden_byte(i, j)).collect::<Vec<u8>>();
    let reference = |h: u32, n: u32, off: u64| {
        let mut r = h.to_le_bytes().to_vec();
        r.extend_from_slice(&n.to_le_bytes());
        r.extend_from_slice(&off.to_le_bytes());
        r
    };
    tx.send(b"hello").unwrap();
    tx.send(&msg(1, 100)).unwrap();
    tx.send_ref(&reference(7, 3000, 64)).unwrap();
    tx.send(&msg(3, 2000)).unwrap();
    tx.send(&msg(4, 1500)).unwrap();
    assert_eq!(tx.tx_pos, 3744);
    // The consumer has read the first four records.
    tx.tx_consumer()
        .position
        .store(GOLDEN_RING_START, Ordering::Release);
    tx.send(&msg(5, 400)).unwrap();
    tx.send_ref(&reference(9, 2048, 4096)).unwrap();
    assert_eq!(tx.tx_pos, 4096 + 416 + 32);
    let ring = seg.at(CONN_HEADER_SIZE, RING as usize).unwrap();
    // SAFETY: RING bytes inside the mapping (checked by `at`).
    unsafe { std::slice::from_raw_parts(ring.as_ptr(), RING as usize) }.to_vec()
}

/// Where a reader of the golden ring starts.
const GOLDEN_RING_START: u64 = 2208;

const GOLDEN_RING_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../abi/golden/direct_ring_v1.hex"
);

/// The golden direct ring equals the committed vector
/// (`crates/abi/golden/direct_ring_v1.hex`, which Javia's tests read
/// with their own reading of the record format); `UNET_BLESS=1`
/// rewrites it after a deliberate change. Read from its start, it
/// gives back what was sent.
#[test]
fn the_golden_ring_matches_the_committed_vector_and_reads_back() {
    let bytes = golden_ring();
    let hex: String = bytes
        .chunks(32)
        .map(|l| l.iter().map(|x| format!("{x:02x}")).collect::<String>() + "\n")
        .collect();
    if std::env::var_os("UNET_BLESS").is_some() {
        std::fs::write(GOLDEN_RING_PATH, &hex).unwrap();
    }
    let committed = std::fs::read_to_string(GOLDEN_RING_PATH).expect("golden ring file");
    assert!(
        committed == hex,
        "the golden ring differs from {GOLDEN_RING_PATH}"
    );
    // Read back through a receiver placed where the golden reader starts.
    let seg = conn_segment();
    let (mut rx, raw) = receiver(&seg);
    let ring = raw.at(CONN_HEADER_SIZE, RING as usize).unwrap();
    // SAFETY: RING writable bytes inside the mapping (checked by `at`);
    // the receiver reads them only after this copy.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ring.as_ptr(), bytes.len()) };
    rx.rx_pos = GOLDEN_RING_START;
    let mut got = Vec::new();
    loop {
        let mut rec = None;
        match rx.recv_vi_with(|src, is_ref| {
            // SAFETY: the ring has src.len() readable bytes at src.
            rec = Some((
                unsafe { std::slice::from_raw_parts(src.as_ptr(), src.len()) }.to_vec(),
                is_ref,
            ));
            Ok(())
        }) {
            DirectRecv::Message(_) => got.push(rec.unwrap()),
            DirectRecv::Empty => break,
            _ => panic!("the golden ring reads broken"),
        }
    }
    let lens: Vec<(usize, bool)> = got.iter().map(|(m, r)| (m.len(), *r)).collect();
    assert_eq!(lens, [(1500, false), (400, false), (16, true)]);
    assert!(got[0]
        .0
        .iter()
        .enumerate()
        .all(|(j, &b)| b == golden_byte(4, j)));
    assert!(got[1]
        .0
        .iter()
        .enumerate()
        .all(|(j, &b)| b == golden_byte(5, j)));
    assert_eq!(&got[2].0[..8], &[9, 0, 0, 0, 0, 8, 0, 0]);
}

#[test]
fn padding_at_the_end_of_a_lap_is_skipped_and_padding_twice_is_broken() {
    let seg = conn_segment();
    let (mut rx, raw) = receiver(&seg);
    let mut tx = DirectConn::open(
        Segment::open(seg.fd().try_clone().unwrap(), 0, true).unwrap(),
        0,
        false,
        counters(),
    )
    .unwrap();
    // Three records of 1536 bytes: the third does not fit after 3072
    // and follows 1024 bytes of padding, at the start of lap 1.
    let mut buf = vec![0u8; 2048];
    for i in 0..3u8 {
        tx.send(&[i; 1500]).unwrap();
        match rx.recv(&mut buf) {
            DirectRecv::Message(1500) => assert_eq!(buf[..1500], [i; 1500]),
            _ => panic!("message {i} not received"),
        }
    }
    assert_eq!(rx.rx_pos, 4096 + 1536);
    assert!(matches!(rx.recv(&mut buf), DirectRecv::Empty));
    // A hostile side A: padding to the end of lap 1, then padding
    // again at the start of lap 2, where no padding can be.
    write_header(&raw, 1536, pad_header(4096 + 1536, 4096 - 1536));
    write_header(&raw, 0, pad_header(2 * 4096, 4096));
    assert_eq!(rx.recv_many(&mut buf, 8, |_| true), 0);
    assert!(!rx.broken, "recv_many leaves the report to recv");
    assert!(matches!(rx.recv(&mut buf), DirectRecv::Broken));
    assert!(rx.broken);
    assert!(matches!(rx.recv(&mut buf), DirectRecv::Broken));
    assert_eq!(rx.recv_many(&mut buf, 8, |_| true), 0);
}

/// The word at byte `off` of the A→B ring of `raw`.
fn ring_word(raw: &Segment, off: u64) -> u64 {
    let p = raw.at(CONN_HEADER_SIZE + off as usize, 8).unwrap();
    // SAFETY: as in write_header.
    unsafe { p.cast::<AtomicU64>().as_ref() }.load(Ordering::Acquire)
}

/// Both sides of a connection over `seg`: A (the sender under test)
/// and B.
fn pair(seg: &Segment) -> (DirectConn, DirectConn) {
    let open = |side_b| {
        let m = Segment::open(seg.fd().try_clone().unwrap(), 0, true).unwrap();
        DirectConn::open(m, 0, side_b, counters()).unwrap()
    };
    (open(false), open(true))
}

#[test]
fn a_send_that_answers_takes_the_next_records_lines_without_making_a_record() {
    let seg = conn_segment();
    let (mut a, mut b) = pair(&seg);
    let (_, raw) = receiver(&seg);
    let mut buf = vec![0u8; 4096];
    // Sends with nothing received between them take nothing ahead.
    a.send(&[1; 64]).unwrap();
    a.send(&[2; 64]).unwrap();
    assert_eq!(ring_word(&raw, 256), 0);
    for i in 1..=2u8 {
        assert!(matches!(b.recv(&mut buf), DirectRecv::Message(64)));
        assert_eq!(buf[..64], [i; 64]);
    }
    // An answer (A read B's message; its record at 192): the line
    // after the next header's (288) is taken for the next 64-byte
    // record, [288, 384); the next header's line is not.
    b.send(b"ask").unwrap();
    assert!(matches!(a.recv(&mut buf), DirectRecv::Message(3)));
    a.send(&[3; 64]).unwrap();
    assert_eq!(ring_word(&raw, 320), (record_tag(320) ^ NOT_A_TAG) as u64);
    assert_eq!(ring_word(&raw, 384), 0);
    assert!(matches!(b.recv(&mut buf), DirectRecv::Message(64)));
    assert_eq!(buf[..64], [3; 64]);
    assert!(matches!(b.recv(&mut buf), DirectRecv::Empty));
    assert_eq!(b.rx_pos, 288);
    // Read from the taken line itself, it is no record either.
    let (mut other, _) = receiver(&seg);
    other.rx_pos = 320;
    assert!(matches!(other.recv(&mut buf), DirectRecv::Empty));
    assert!(!other.broken);
}

#[test]
fn lines_the_reader_has_not_read_are_not_taken_ahead() {
    let seg = conn_segment();
    let (mut a, mut b) = pair(&seg);
    let (_, raw) = receiver(&seg);
    let mut buf = vec![0u8; 4096];
    // The second lap; B has read the first up to 224, so A may write
    // up to 8192 + 224.
    let at = 2 * RING as u64;
    (a.tx_pos, a.tx_limit, a.tx_fit, b.rx_pos) = (at, at, at, at);
    a.tx_consumer()
        .position
        .store(at - RING as u64 + 224, Ordering::Release);
    a.send(&[1; 64]).unwrap();
    assert!(matches!(b.recv(&mut buf), DirectRecv::Message(64)));
    b.send(b"ask").unwrap();
    assert!(matches!(a.recv(&mut buf), DirectRecv::Message(3)));
    write_header(&raw, 256, 7);
    // Ends at 8384; the next record's line 8448 (ring offset 256) is
    // past what B has freed.
    a.send(&[2; 64]).unwrap();
    assert_eq!(ring_word(&raw, 256), 7);
    assert!(matches!(b.recv(&mut buf), DirectRecv::Message(64)));
    assert_eq!(buf[..64], [2; 64]);
}

#[test]
fn padding_that_starts_a_lap_is_broken() {
    let seg = conn_segment();
    let (mut rx, raw) = receiver(&seg);
    write_header(&raw, 0, pad_header(0, 4096));
    let mut buf = vec![0u8; 64];
    assert!(matches!(rx.recv(&mut buf), DirectRecv::Broken));
}

/// A peer that rewrites the record header at the start of the ring as
/// fast as it can, as padding of a whole lap tagged for one lap after
/// another, can carry a receiver that skips padding around the ring
/// for as long as it likes, no message ever arriving. The receiver must
/// find the connection broken within a bounded time instead.
#[test]
fn a_peer_rewriting_padding_cannot_keep_the_receiver_spinning() {
    const LAPS: u64 = 1024;
    let seg = conn_segment();
    let (mut rx, raw) = receiver(&seg);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let t0 = Instant::now();
            // Bounded on its own too: a receiver it holds is let go and
            // the test fails, not hangs.
            while !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(10) {
                // Lap after lap, each rewritten many times so that a
                // polling receiver sees every one; then from lap 0
                // again, so that a receiver that missed its lap (it
                // was not running) is offered it once more.
                for lap in 0..LAPS {
                    let h = pad_header(lap * RING as u64, RING as u64);
                    for _ in 0..256 {
                        write_header(&raw, 0, h);
                    }
                }
            }
        })
    };
    let mut buf = vec![0u8; 64];
    let t0 = Instant::now();
    let mut longest = Duration::ZERO;
    let mut outcome = None;
    while t0.elapsed() < Duration::from_secs(5) {
        let t = Instant::now();
        let r = rx.recv(&mut buf);
        longest = longest.max(t.elapsed());
        match r {
            DirectRecv::Empty => {}
            DirectRecv::Broken => {
                outcome = Some(t0.elapsed());
                break;
            }
            DirectRecv::Message(n) | DirectRecv::TooSmall(n) => {
                panic!("a message of {n} bytes from a peer that wrote none")
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let laps = rx.rx_pos / RING as u64;
    let took = outcome.unwrap_or_else(|| {
        panic!(
            "the receiver never found the connection broken: the peer \
             carried it {laps} laps through padding (longest call {longest:?})"
        )
    });
    assert!(rx.broken);
    assert_eq!(laps, 0, "skipped {laps} laps of padding");
    assert!(took < Duration::from_secs(5));
    assert!(
        longest < Duration::from_secs(1),
        "one call took {longest:?}"
    );
}
