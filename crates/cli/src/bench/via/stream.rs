//! The VI stream: the sending side and its control messages.

use std::time::{Duration, Instant};

use unet::{PostError, Reliability, Vi, ViAttributes, ViSeg, WaitError};

use super::row::Point;
use super::vi::{
    attrs, done, line_up, post_err, send_next, Side, Slots, ANSWER, CTRL_ID, CTRL_POSTED, DATA_ID,
    RESEND,
};
use super::Res;
use crate::bench::child::{ChildKind, DATA, PATIENCE, STOP, SYNC};
use crate::bench::floor::StreamRun;

/// A one-way stream between two VIs (this process sends), with
/// `drop_ppm` of the datagrams lost (remote only).
///
/// Region: the message at 0, the control message, then the receive slots
/// for the answers.
pub(super) fn vi_stream(p: &Point, drop_ppm: u32) -> Res<StreamRun> {
    let window = p.s.window;
    let side = Side::start(p.path, drop_ppm)?;
    let ch = side.spawn(ChildKind::ViaStream, p.size, window, p.s.pin)?;
    let size = p.size;
    let res = (|| {
        let (mut vi, _) = side.connect(
            &ch,
            &ViAttributes {
                send_queue: window as u32,
                ..attrs(p.reliability)
            },
        )?;
        let ctrl_at = line_up(size);
        let base = ctrl_at + 64;
        let len = base + CTRL_POSTED * 64;
        let region = side.register(len)?;
        let rx = Slots {
            region: &region,
            base,
            stride: 64,
            n: CTRL_POSTED,
        };
        region.write(0, &vec![DATA; size]);
        rx.post_all(&mut vi)?;
        let mut tx = Sender {
            vi,
            data: [ViSeg::new(&region, 0, size)],
            window,
            outstanding: 0,
            seq: 0,
        };
        tx.phase(p.s.stream_warmup)?;
        tx.control(SYNC, &rx, ctrl_at)?;
        let start = Instant::now();
        let sent = tx.phase(p.s.stream)?;
        let bytes = tx.control(STOP, &rx, ctrl_at)?;
        let elapsed = start.elapsed();
        // Only an unreliable VI may lose messages (it counts them).
        let lossy = p.reliability == Reliability::Unreliable;
        if bytes > sent * size as u64 || (!lossy && bytes != sent * size as u64) {
            return Err(format!(
                "VI stream: {bytes} bytes placed of {} sent",
                sent * size as u64
            ));
        }
        Ok(StreamRun {
            msgs: bytes as f64 / size as f64,
            elapsed,
            sent: Some(sent),
        })
    })();
    ch.wait(res)
}

/// A stream's sending VI.
struct Sender<'r> {
    vi: Vi,
    data: [ViSeg<'r>; 1],
    window: usize,
    /// Sends posted and not yet taken back.
    outstanding: usize,
    /// The last control message's number.
    seq: u8,
}

impl Sender<'_> {
    /// Keeps the send queue full for `d`, taking completions back;
    /// returns the data messages posted.
    fn phase(&mut self, d: Duration) -> Res<u64> {
        let start = Instant::now();
        let (mut sent, mut idle, mut rounds) = (0u64, 0u32, 0u32);
        loop {
            while self.outstanding < self.window {
                match self.vi.post_send(DATA_ID, &self.data) {
                    Ok(()) => {
                        self.outstanding += 1;
                        sent += 1;
                    }
                    Err(PostError::QueueFull) => break,
                }
            }
            let before = self.outstanding;
            while let Some(c) = self.vi.send_done() {
                done(c, "send")?;
                self.outstanding -= 1;
            }
            if self.outstanding < before {
                idle = 0;
            } else {
                // Nothing completed: the ring is full. Give the core up
                // now and then, for when the receiver shares it (as the
                // endpoint's blocking send does).
                idle += 1;
                if idle.is_multiple_of(64) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            rounds += 1;
            if rounds.is_multiple_of(16) && start.elapsed() >= d {
                return Ok(sent);
            }
        }
    }

    /// Sends control message `[kind, seq]` (after every data message
    /// posted), waits until every send completed and the receiver
    /// answered `[kind, seq, u64 bytes]`; returns the bytes it counted.
    /// An unreliable VI may lose the message or its answer: it is sent
    /// again after [`RESEND`] without an answer, and answers to earlier
    /// ones are passed over.
    fn control(&mut self, kind: u8, rx: &Slots, at: usize) -> Res<u64> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let start = Instant::now();
        loop {
            while self.outstanding >= self.window {
                send_next(&mut self.vi)?;
                self.outstanding -= 1;
            }
            // The previous control message's send has completed (below).
            rx.region.write(at, &[kind, seq]);
            self.vi
                .post_send(CTRL_ID, &[ViSeg::new(rx.region, at, 2)])
                .map_err(post_err("post_send"))?;
            self.outstanding += 1;
            // Every send in the ring first: a VI waiting on its receive
            // queue sleeps on the receive ring, which room in the send
            // ring does not wake.
            while self.outstanding > 0 {
                send_next(&mut self.vi)?;
                self.outstanding -= 1;
            }
            let sent_at = Instant::now();
            while sent_at.elapsed() < RESEND {
                let c = match self.vi.recv_wait(Some(RESEND)) {
                    Ok(c) => c,
                    Err(WaitError::Timeout) => break,
                    Err(e) => return Err(format!("VI receive: {e}")),
                };
                let (k, n) = done(c, "receive")?;
                let mut b = [0u8; ANSWER];
                if n == ANSWER {
                    rx.region.read(rx.offset(k), &mut b);
                }
                rx.post(&mut self.vi, k)?;
                if n != ANSWER {
                    return Err(format!("VI stream: a bad answer to control message {kind}"));
                }
                if b[..2] == [kind, seq] {
                    return Ok(u64::from_le_bytes(b[2..].try_into().expect("8 bytes")));
                }
                // An answer to an earlier control message sent twice:
                // passed over.
            }
            if start.elapsed() > PATIENCE {
                return Err(format!("VI stream: no answer to control message {kind}"));
            }
        }
    }
}
