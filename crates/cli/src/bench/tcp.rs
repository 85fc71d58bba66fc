//! TCP loopback baselines for `unet bench via --path remote`: a
//! `TCP_NODELAY` ping-pong of fixed-size messages and a one-way bulk
//! stream (Nagle's coalescing on, as bulk senders leave it) written `size`
//! bytes per call. The peer is a thread of this process
//! (on core 1 with `--pin`, this thread staying on core 0), so that the
//! kernel's TCP path is what is measured beside the VIs.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use super::child::{self, DATA};
use super::floor::StreamRun;
use super::stats::{self, Samples};

type Res<T> = Result<T, String>;

fn io_err(what: &'static str) -> impl Fn(io::Error) -> String {
    move |e| format!("TCP baseline, {what}: {e}")
}

/// A listener on loopback and a connected pair (with `TCP_NODELAY` if
/// `nodelay`); the accepted side is handed to `peer`, run on its own
/// thread.
fn pair<T: Send + 'static>(
    pin: bool,
    nodelay: bool,
    peer: impl FnOnce(TcpStream) -> io::Result<T> + Send + 'static,
) -> Res<(TcpStream, thread::JoinHandle<Res<T>>)> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(io_err("bind"))?;
    let addr = l.local_addr().map_err(io_err("local address"))?;
    let t = thread::spawn(move || -> Res<T> {
        if pin {
            child::pin_to(1)?;
        }
        let (s, _) = l.accept().map_err(io_err("accept"))?;
        s.set_nodelay(nodelay).map_err(io_err("TCP_NODELAY"))?;
        peer(s).map_err(io_err("peer"))
    });
    let s = TcpStream::connect(addr).map_err(io_err("connect"))?;
    s.set_nodelay(nodelay).map_err(io_err("TCP_NODELAY"))?;
    Ok((s, t))
}

fn join<T>(t: thread::JoinHandle<Res<T>>) -> Res<T> {
    t.join()
        .map_err(|_| "TCP baseline: the peer thread panicked".to_string())?
}

/// Ping-pong: `warmup` untimed round trips, then `iters` timed ones (at
/// most `limit` long), each on its own.
pub fn pingpong(
    size: usize,
    iters: usize,
    warmup: usize,
    limit: Duration,
    pin: bool,
) -> Res<Samples> {
    let (mut s, t) = pair(pin, true, move |mut s| {
        let mut buf = vec![0u8; size];
        loop {
            match s.read_exact(&mut buf) {
                Ok(()) => s.write_all(&buf)?,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    })?;
    let msg = vec![DATA; size];
    let mut buf = vec![0u8; size];
    let mut rt = || -> io::Result<()> {
        s.write_all(&msg)?;
        s.read_exact(&mut buf)
    };
    for _ in 0..warmup {
        rt().map_err(io_err("round trip"))?;
    }
    let samples = stats::time_round_trips(iters, limit, &mut rt).map_err(io_err("round trip"))?;
    drop(s);
    join(t)?;
    Ok(samples)
}

/// Stream: write `size` bytes per call for `warmup`, then for `dur`; the
/// figure is the bytes written after the warm-up over the time until the
/// receiver, having read them all, answers the end of the stream.
pub fn stream(size: usize, warmup: Duration, dur: Duration, pin: bool) -> Res<StreamRun> {
    let (mut s, t) = pair(pin, false, |mut s| {
        let mut buf = vec![0u8; 256 << 10];
        let mut total = 0u64;
        loop {
            match s.read(&mut buf)? {
                0 => break,
                n => total += n as u64,
            }
        }
        s.write_all(&total.to_le_bytes())?;
        Ok(total)
    })?;
    let msg = vec![DATA; size];
    let mut phase = |d: Duration| -> io::Result<u64> {
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < d {
            for _ in 0..16 {
                s.write_all(&msg)?;
                n += 1;
            }
        }
        Ok(n)
    };
    let before = phase(warmup).map_err(io_err("write"))?;
    let start = Instant::now();
    let sent = phase(dur).map_err(io_err("write"))?;
    s.shutdown(std::net::Shutdown::Write)
        .map_err(io_err("shutdown"))?;
    let mut ans = [0u8; 8];
    s.read_exact(&mut ans).map_err(io_err("answer"))?;
    let elapsed = start.elapsed();
    let total = u64::from_le_bytes(ans);
    let want = (before + sent) * size as u64;
    join(t)?;
    if total != want {
        return Err(format!(
            "TCP baseline: {total} bytes arrived of {want} written"
        ));
    }
    Ok(StreamRun {
        msgs: sent as f64,
        elapsed,
        sent: Some(sent),
    })
}
