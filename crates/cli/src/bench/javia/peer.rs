//! The Rust end (`unet bench __javia-peer`): the raw Rust VIA client
//! following the same plan as the Java ends.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use unet::{MemRegion, Session, Vi, ViAttributes, ViSeg};

use super::Res;
use crate::bench::report;
use crate::bench::stats::median_f64;

/// One end of a `unet bench javia` run with the raw Rust VIA client
/// (internal): the same plan and output as `JaviaBench`.
#[derive(clap::Args)]
pub struct PeerArgs {
    role: String,
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    #[arg(long)]
    iters: usize,
    #[arg(long)]
    warmup: usize,
    #[arg(long)]
    reps: usize,
    #[arg(long)]
    warm_bursts: usize,
    #[arg(long)]
    warm_ms: u64,
    #[arg(long)]
    bytes: u64,
    #[arg(long)]
    tag: u64,
    #[arg(long)]
    addr: Option<SocketAddr>,
    #[arg(long)]
    aeron_dir: Option<String>,
    /// Read each cache line of every message received (the ping end and
    /// the bandwidth receiver).
    #[arg(long, action = clap::ArgAction::Set)]
    read: bool,
}

pub fn run_peer(a: PeerArgs) -> ExitCode {
    report::finish(peer(a))
}

/// Receives kept posted, sends kept outstanding at most.
const POSTED: usize = 16;
const PATIENCE: Duration = Duration::from_secs(30);

fn pattern(size: usize, i: usize) -> u8 {
    (i * 7 + size) as u8
}

pub(super) fn iters_of(iters: usize, size: usize) -> usize {
    if size <= 4096 {
        iters
    } else {
        (iters * 4096 / size).max(100)
    }
}

pub(super) fn burst_of(bytes: u64, size: usize) -> usize {
    (bytes / size.max(1) as u64).clamp(64, 100_000) as usize
}

/// The raw client's end: a VI, a send region and a receive region of
/// `POSTED` slots each. Sends complete lazily: the oldest is waited for
/// only when `POSTED` are outstanding, and an echo's receive slot is
/// posted again once its send completed.
struct RustEnd {
    vi: Vi,
    tx: MemRegion,
    rx: MemRegion,
    max: usize,
    sent: u64,
    /// Outstanding sends, oldest first: the receive slot each frees.
    pending: std::collections::VecDeque<Option<usize>>,
    next_recv_id: u64,
    /// The receive slot of the last message.
    last: usize,
    /// Read every message received ([`RustEnd::recv`]).
    read: bool,
    /// What the reads summed (kept so that they are not left out).
    sum: u64,
    /// The slot of the last message received, to post again.
    to_repost: Option<usize>,
}

impl RustEnd {
    fn fill(&mut self, size: usize) -> Res<()> {
        self.reap(0)?;
        let msg: Vec<u8> = (0..size).map(|i| pattern(size, i)).collect();
        for k in 0..POSTED {
            self.tx.write(k * self.max, &msg);
        }
        Ok(())
    }

    fn completed(&mut self, c: unet::ViCompletion) -> Res<()> {
        c.status.map_err(|e| format!("a send failed: {e}"))?;
        if let Some(Some(slot)) = self.pending.pop_front() {
            self.repost(slot)?;
        }
        Ok(())
    }

    /// Takes completed sends back, waiting until fewer than `limit` are
    /// outstanding.
    fn reap(&mut self, limit: usize) -> Res<()> {
        while let Some(c) = self.vi.send_done() {
            self.completed(c)?;
        }
        while !self.pending.is_empty() && self.pending.len() >= limit {
            let c = self
                .vi
                .send_wait(Some(PATIENCE))
                .map_err(|e| format!("send_wait: {e}"))?;
            self.completed(c)?;
        }
        Ok(())
    }

    /// Sends first; then, while the message travels, posts the last
    /// message's slot again and takes completed sends back (at most
    /// `POSTED - 1` stay outstanding, so the next send's slot is free).
    fn send(&mut self, size: usize) -> Res<()> {
        let at = (self.sent as usize % POSTED) * self.max;
        self.vi
            .post_send(self.sent, &[ViSeg::new(&self.tx, at, size)])
            .map_err(|e| format!("post_send: {e}"))?;
        self.sent += 1;
        self.pending.push_back(None);
        self.repost_last()?;
        self.reap(POSTED)
    }

    /// Posts the slot of the last message received again.
    fn repost_last(&mut self) -> Res<()> {
        match self.to_repost.take() {
            Some(slot) => self.repost(slot),
            None => Ok(()),
        }
    }

    /// The next message: its receive slot and length (not posted again).
    fn take(&mut self) -> Res<(usize, usize)> {
        let c = self
            .vi
            .recv_wait(Some(PATIENCE))
            .map_err(|e| format!("recv_wait: {e}"))?;
        let len = c.status.map_err(|e| format!("a receive failed: {e}"))?;
        Ok(((c.id as usize) % POSTED, len))
    }

    /// Posts receive slot `slot` (receives complete in the order posted, so
    /// the ids, taken in turn, name the slots modulo `POSTED`).
    fn repost(&mut self, slot: usize) -> Res<()> {
        let id = self.next_recv_id;
        debug_assert_eq!(id as usize % POSTED, slot);
        self.next_recv_id += 1;
        self.vi
            .post_recv(id, &[ViSeg::new(&self.rx, slot * self.max, self.max)])
            .map_err(|e| format!("post_recv: {e}"))
    }

    /// The next message's length, every byte of it read if the plan
    /// says so; its slot is posted again after the next send (or
    /// receive).
    fn recv(&mut self) -> Res<usize> {
        self.repost_last()?;
        let (slot, len) = self.take()?;
        if self.read {
            self.sum = self
                .sum
                .wrapping_add(sum_lines(&self.rx, slot * self.max, len));
        }
        self.last = slot;
        self.to_repost = Some(slot);
        Ok(len)
    }

    /// Sends the next message back from where it landed; its slot is
    /// posted again once that send completed. An empty message ends the
    /// round trips: not echoed, its length (0) returned.
    fn echo(&mut self) -> Res<usize> {
        let (slot, len) = self.take()?;
        if len == 0 {
            self.repost(slot)?;
            return Ok(0);
        }
        self.vi
            .post_send(self.sent, &[ViSeg::new(&self.rx, slot * self.max, len)])
            .map_err(|e| format!("post_send: {e}"))?;
        self.sent += 1;
        self.pending.push_back(Some(slot));
        self.reap(POSTED / 2)?;
        Ok(len)
    }

    fn echoed(&self, size: usize) -> bool {
        let mut got = vec![0u8; size];
        self.rx.read(self.last * self.max, &mut got);
        got.iter().enumerate().all(|(i, &b)| b == pattern(size, i))
    }
}

/// Bytes between two of a message's bytes that [`sum_lines`] reads: a
/// cache line.
const LINE: usize = 64;

/// The sum of every [`LINE`]th byte of `len` bytes of `region` from `off`,
/// and of the last: a read of each cache line of a message, as a program
/// that uses it makes, with as little work per line as can be (as Javia's
/// ends and the Aeron peer make it: `JaviaBench.sum`), so that what it
/// costs is the lines' coming, not the summing.
fn sum_lines(region: &MemRegion, off: usize, len: usize) -> u64 {
    assert!(off + len <= region.len(), "a message outside its slot");
    let p = region.as_ptr();
    let mut sum = 0u64;
    let bytes = (0..len).step_by(LINE).chain(len.checked_sub(1));
    for i in bytes {
        // SAFETY: inside the region (asserted above), which lives as long
        // as `region`; the slot's receive completed and it is not posted
        // again yet, so nothing writes it meanwhile.
        sum = sum.wrapping_add(u64::from(unsafe { p.add(off + i).read() }));
    }
    sum
}

fn peer(a: PeerArgs) -> Res<()> {
    let ping = match a.role.as_str() {
        "ping" => true,
        "pong" => false,
        r => return Err(format!("role {r} is not ping or pong")),
    };
    let max = a.sizes.iter().copied().max().unwrap_or(1).max(1);
    let session =
        Session::connect_default().map_err(|e| format!("connecting to the engine: {e}"))?;
    let attrs = ViAttributes::default();
    let vi = if ping {
        session
            .vi_connect(a.addr, a.tag, &attrs, Some(PATIENCE))
            .map_err(|e| format!("vi_connect: {e}"))?
    } else {
        let server = session
            .vi_listen(a.tag)
            .map_err(|e| format!("vi_listen: {e}"))?;
        println!("ready");
        server
            .accept(&attrs, Some(PATIENCE))
            .map_err(|e| format!("accept: {e}"))?
    };
    let reg = |n| {
        session
            .register_memory(n)
            .map_err(|e| format!("register_memory: {e}"))
    };
    let mut end = RustEnd {
        vi,
        tx: reg(POSTED * max)?,
        rx: reg(POSTED * max)?,
        max,
        sent: 0,
        pending: Default::default(),
        next_recv_id: 0,
        last: 0,
        read: a.read,
        sum: 0,
        to_repost: None,
    };
    for k in 0..POSTED {
        end.repost(k)?;
    }
    let mut first = true;
    for &size in &a.sizes {
        let warm = if first { a.warmup * 5 } else { a.warmup };
        let warm_for = Duration::from_millis(if first { a.warm_ms * 5 } else { a.warm_ms });
        first = false;
        let iters = iters_of(a.iters, size);
        let burst = burst_of(a.bytes, size);
        if ping {
            end.fill(size)?;
            let t0 = Instant::now();
            let mut n = 0;
            while n < warm || t0.elapsed() < warm_for {
                end.send(size)?;
                expect(end.recv()?, size)?;
                n += 1;
            }
            let mut t = Vec::with_capacity(iters);
            for _ in 0..iters {
                let t0 = Instant::now();
                end.send(size)?;
                let got = end.recv()?;
                t.push(t0.elapsed().as_nanos() as u64);
                expect(got, size)?;
            }
            // The end of the round trips: an empty message, not echoed.
            end.send(0)?;
            if !end.echoed(size) {
                return Err(format!(
                    "the echo of a {size}-byte message differs from what was sent"
                ));
            }
            t.sort_unstable();
            println!(
                "rt {size} {} {} {}",
                t[t.len() / 2],
                t[t.len() / 10],
                t[t.len() * 9 / 10]
            );
            let mut rates = Vec::new();
            for r in 0..a.warm_bursts + a.reps {
                let t0 = Instant::now();
                for _ in 0..burst {
                    end.send(size)?;
                }
                expect(end.recv()?, 1)?;
                let dt = t0.elapsed().as_secs_f64();
                if r >= a.warm_bursts {
                    rates.push((burst * size) as f64 / dt);
                }
            }
            println!("bw {size} {:.0}", median_f64(&rates));
        } else {
            while end.echo()? != 0 {}
            end.fill(1)?;
            for _ in 0..a.warm_bursts + a.reps {
                for _ in 0..burst {
                    end.recv()?;
                }
                end.send(1)?;
            }
        }
    }
    end.reap(1)?;
    std::hint::black_box(end.sum);
    println!("done");
    Ok(())
}

fn expect(got: usize, size: usize) -> Res<()> {
    if got == size {
        Ok(())
    } else {
        Err(format!(
            "a {got}-byte message came where one of {size} bytes was due"
        ))
    }
}
