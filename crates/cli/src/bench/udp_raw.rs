//! The raw UDP baseline for `--path udp`: two processes on 127.0.0.1 with
//! blocking `send_to`/`recv_from`, one `send_to` per datagram. A message
//! larger than 65507 bytes (the largest UDP payload) is sent as consecutive
//! 65507-byte datagrams and reassembled by byte count.
//!
//! Both sockets get 4 MiB send and receive buffers (the usual `rmem_max`),
//! so a stream loses datagrams only when the receiver truly falls behind.
//! Stream throughput counts only bytes the receiver reports it received.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::floor::StreamRun;
use super::stats::{self, Samples};

pub const MAX_DGRAM: usize = 65507;
/// First byte of a data datagram.
const DATA: u8 = 0xa5;
/// First byte of the last datagram of a burst: the receiver acknowledges it.
const BURST_END: u8 = 0x5a;
/// One-byte control datagrams; the receiver answers `[kind, u64 bytes]`.
const SYNC: u8 = 1;
const STOP: u8 = 2;
const BUF_BYTES: libc::c_int = 4 << 20;

/// A UDP socket on an ephemeral loopback port with large buffers.
pub fn socket() -> io::Result<UdpSocket> {
    let s = UdpSocket::bind("127.0.0.1:0")?;
    for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
        // SAFETY: setsockopt on a socket we own, with a pointer to a live
        // c_int and its exact size.
        let r = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&BUF_BYTES as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(s)
}

fn send_msg(s: &UdpSocket, to: SocketAddr, msg: &[u8]) -> io::Result<()> {
    for c in msg.chunks(MAX_DGRAM) {
        s.send_to(c, to)?;
    }
    Ok(())
}

/// Receives datagrams into `buf` until `size` bytes have arrived.
fn recv_msg(s: &UdpSocket, buf: &mut [u8], size: usize) -> io::Result<SocketAddr> {
    let mut got = 0;
    loop {
        let (n, from) = s.recv_from(&mut buf[got..])?;
        got += n;
        if got >= size {
            return Ok(from);
        }
    }
}

fn msg_buf(size: usize) -> Vec<u8> {
    vec![0u8; size + MAX_DGRAM]
}

/// Parent side of a raw UDP ping-pong; each round trip is timed on its own.
pub fn pingpong(
    s: &UdpSocket,
    peer: SocketAddr,
    size: usize,
    warmup: usize,
    iters: usize,
    limit: Duration,
) -> io::Result<Samples> {
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let out = vec![DATA; size];
    let mut inb = msg_buf(size);
    for _ in 0..warmup {
        send_msg(s, peer, &out)?;
        recv_msg(s, &mut inb, size)?;
    }
    let samples = stats::time_round_trips(iters, limit, || {
        send_msg(s, peer, &out)?;
        recv_msg(s, &mut inb, size).map(|_| ())
    })?;
    s.send_to(&[], peer)?;
    Ok(samples)
}

/// Child side of a raw UDP ping-pong: echo each message until an empty datagram.
pub fn pingpong_child(s: &UdpSocket, size: usize) -> io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut buf = msg_buf(size);
    let mut got = 0;
    loop {
        let (n, from) = s.recv_from(&mut buf[got..])?;
        if n == 0 {
            return Ok(());
        }
        got += n;
        if got >= size {
            got = 0;
            send_msg(s, from, &buf[..size])?;
        }
    }
}

/// The relay floor's third process: each datagram from the parent goes on
/// to `peer` (the echoing child), each from `peer` back to the parent, with
/// blocking `recv_from` and `send_to`, until the parent's empty datagram,
/// which it passes on before it returns. The cheapest way a third party
/// can see every datagram of a round trip, as a receiving engine does.
pub fn relay_child(s: &UdpSocket, peer: SocketAddr) -> io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut buf = vec![0u8; MAX_DGRAM];
    let mut parent = None;
    loop {
        let (n, from) = s.recv_from(&mut buf)?;
        if from == peer {
            if let Some(p) = parent {
                s.send_to(&buf[..n], p)?;
            }
            continue;
        }
        parent = Some(from);
        s.send_to(&buf[..n], peer)?;
        if n == 0 {
            return Ok(());
        }
    }
}

/// Parent side (sender) of a raw UDP stream: `send_to` per datagram for
/// `dur` after a `warmup`; with `burst > 0` the last datagram of each burst
/// asks for an acknowledgment, awaited up to 10 ms (a lost one costs that).
pub fn stream(
    s: &UdpSocket,
    peer: SocketAddr,
    size: usize,
    burst: usize,
    warmup: Duration,
    dur: Duration,
) -> io::Result<StreamRun> {
    let out = vec![DATA; size];
    let mut last = out.clone();
    last[(size - 1) / MAX_DGRAM * MAX_DGRAM] = BURST_END;
    let chunk = if burst > 0 { burst } else { 64 };
    let mut ackb = [0u8; 16];
    s.set_read_timeout(Some(Duration::from_millis(10)))?;
    // Returns the messages sent.
    let phase = |d: Duration, ackb: &mut [u8]| -> io::Result<u64> {
        let start = Instant::now();
        let mut sent = 0u64;
        loop {
            for i in 0..chunk {
                let m = if burst > 0 && i + 1 == chunk {
                    &last
                } else {
                    &out
                };
                send_msg(s, peer, m)?;
            }
            sent += chunk as u64;
            if burst > 0 {
                match s.recv_from(ackb) {
                    Ok(_) => {}
                    Err(e) if is_timeout(&e) => {}
                    Err(e) => return Err(e),
                }
            }
            if start.elapsed() >= d {
                return Ok(sent);
            }
        }
    };
    phase(warmup, &mut ackb)?;
    control(s, peer, SYNC)?;
    let start = Instant::now();
    let sent = phase(dur, &mut ackb)?;
    let bytes = control(s, peer, STOP)?;
    Ok(StreamRun {
        msgs: bytes as f64 / size as f64,
        elapsed: start.elapsed(),
        sent: Some(sent),
    })
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Sends a control datagram until its answer arrives; returns the byte count.
fn control(s: &UdpSocket, peer: SocketAddr, kind: u8) -> io::Result<u64> {
    s.set_read_timeout(Some(Duration::from_millis(50)))?;
    let mut b = [0u8; 16];
    for _ in 0..100 {
        s.send_to(&[kind], peer)?;
        let deadline = Instant::now() + Duration::from_millis(50);
        while Instant::now() < deadline {
            match s.recv_from(&mut b) {
                Ok((9, _)) if b[0] == kind => {
                    s.set_read_timeout(Some(Duration::from_millis(10)))?;
                    return Ok(u64::from_le_bytes(b[1..9].try_into().unwrap()));
                }
                Ok(_) => {}
                Err(e) if is_timeout(&e) => break,
                Err(e) => return Err(e),
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        "raw UDP receiver does not answer",
    ))
}

/// Child side (receiver) of a raw UDP stream: counts data bytes, answers
/// SYNC (then restarts the count), burst ends and STOP (then exits).
pub fn stream_child(s: &UdpSocket) -> io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut buf = vec![0u8; MAX_DGRAM + 1];
    let mut bytes = 0u64;
    loop {
        let (n, from) = s.recv_from(&mut buf)?;
        if n == 1 && (buf[0] == SYNC || buf[0] == STOP) {
            let mut a = [0u8; 9];
            a[0] = buf[0];
            a[1..].copy_from_slice(&bytes.to_le_bytes());
            s.send_to(&a, from)?;
            if buf[0] == STOP {
                return Ok(());
            }
            bytes = 0;
            continue;
        }
        bytes += n as u64;
        if buf[0] == BURST_END {
            s.send_to(&[BURST_END], from)?;
        }
    }
}
