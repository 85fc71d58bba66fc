//! `unet demo`: an embedded engine, two endpoints, a ping-pong and a short
//! stream over the direct path, the engine path and UDP loopback.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use unet::{
    ChannelOptions, Endpoint, EndpointConfig, Engine, EngineConfig, Event, PathChoice, Session,
};

#[derive(clap::Args)]
pub struct Args {
    /// Round trips per ping-pong.
    #[arg(long, default_value_t = 20_000)]
    pub rounds: usize,
    /// Seconds per stream.
    #[arg(long, default_value_t = 0.5)]
    pub stream_secs: f64,
}

const TIMEOUT: Option<Duration> = Some(Duration::from_secs(10));
/// Messages a stream sender may have unacknowledged.
const WINDOW: u64 = 512;
/// The receiver acknowledges every this many messages.
const ACK_EVERY: u64 = 128;

struct Row {
    path: &'static str,
    rtt_median_us: f64,
    rtt_p99_us: f64,
    small_mps: f64,
    big_gbps: f64,
}

pub fn run(a: Args) -> ExitCode {
    match demo(&a) {
        Ok(rows) => {
            println!();
            println!(
                "{:<8} {:>18} {:>14} {:>20} {:>18}",
                "path", "64 B round trip", "p99", "64 B stream", "4 KiB stream"
            );
            for r in rows {
                println!(
                    "{:<8} {:>15.2} µs {:>11.2} µs {:>13.2} Mmsg/s {:>13.2} GB/s",
                    r.path,
                    r.rtt_median_us,
                    r.rtt_p99_us,
                    r.small_mps / 1e6,
                    r.big_gbps
                );
            }
            println!("\nEvery message was checked byte for byte. `unet bench` measures against baselines.");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("unet demo: {e}");
            ExitCode::from(1)
        }
    }
}

fn demo(a: &Args) -> Result<Vec<Row>, Box<dyn std::error::Error>> {
    let mut rows = Vec::new();
    let engine = Engine::start(EngineConfig::default())?;
    let session = Session::embedded(&engine)?;
    for (name, path) in [
        ("direct", PathChoice::Direct),
        ("engine", PathChoice::Engine),
    ] {
        eprintln!("unet demo: {name} path …");
        let a_ep = session.create_endpoint(EndpointConfig::default())?;
        let b_ep = session.create_endpoint(EndpointConfig::default())?;
        rows.push(measure(name, a_ep, b_ep, path, a)?);
    }
    eprintln!("unet demo: UDP loopback between two engines …");
    let udp = EngineConfig {
        udp_bind: Some("127.0.0.1:0".parse()?),
        max_datagram: 65000,
        ..Default::default()
    };
    let e1 = Engine::start(udp.clone())?;
    let e2 = Engine::start(udp)?;
    let a_ep = Session::embedded(&e1)?.create_endpoint(EndpointConfig::default())?;
    let b_ep = Session::embedded(&e2)?.create_endpoint(EndpointConfig::default())?;
    rows.push(measure("udp", a_ep, b_ep, PathChoice::Auto, a)?);
    Ok(rows)
}

/// The demo's message content: the sequence number (8 bytes, little
/// endian), then bytes `seq + i` (as u8) for each position `i`. Written
/// and checked in straight-line loops the compiler vectorizes, so the
/// checks cost little beside the transfer the demo measures.
fn fill(buf: &mut [u8], seq: u64) {
    let n = buf.len().min(8);
    buf[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
    let s = seq as u8;
    for (i, b) in buf.iter_mut().enumerate().skip(8) {
        *b = s.wrapping_add(i as u8);
    }
}

fn check(buf: &[u8], seq: u64) -> Result<(), String> {
    let n = buf.len().min(8);
    let s = seq as u8;
    let diff = buf
        .iter()
        .enumerate()
        .skip(8)
        .fold(0u8, |acc, (i, &b)| acc | (b ^ s.wrapping_add(i as u8)));
    if buf[..n] != seq.to_le_bytes()[..n] || diff != 0 {
        return Err(format!(
            "message {seq} of {} bytes arrived damaged",
            buf.len()
        ));
    }
    Ok(())
}

fn measure(
    name: &'static str,
    mut a: Endpoint,
    mut b: Endpoint,
    path: PathChoice,
    args: &Args,
) -> Result<Row, Box<dyn std::error::Error>> {
    let ch = a.open_channel(b.addr(), ChannelOptions { path })?;
    // B learns its channel back to A from the ChannelOpened event.
    let deadline = Instant::now() + Duration::from_secs(5);
    let back = loop {
        if let Some(Event::ChannelOpened { channel, .. }) = b.poll_event() {
            break channel;
        }
        if Instant::now() > deadline {
            return Err("the peer never saw the channel open".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let rounds = args.rounds;
    let secs = args.stream_secs;
    // B: echo `rounds` messages, then sink two streams, acknowledging.
    let echo = std::thread::spawn(move || -> Result<Endpoint, String> {
        let mut buf = vec![0u8; 1 << 17];
        for _ in 0..rounds {
            let r = b.recv(&mut buf, TIMEOUT).map_err(|e| e.to_string())?;
            b.send_blocking(back, &buf[..r.len], Duration::from_secs(10))
                .map_err(|e| e.to_string())?;
        }
        for _ in 0..2 {
            let mut n: u64 = 0;
            loop {
                let r = b.recv(&mut buf, TIMEOUT).map_err(|e| e.to_string())?;
                if r.len == 1 {
                    break; // end of stream
                }
                let seq = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
                if seq != n {
                    // Unreliable paths may lose messages; order is kept.
                    if seq < n {
                        return Err(format!("stream went backwards: {seq} after {n}"));
                    }
                    n = seq;
                }
                check(&buf[..r.len], seq)?;
                n += 1;
                if n.is_multiple_of(ACK_EVERY) {
                    b.send_blocking(back, &n.to_le_bytes(), Duration::from_secs(10))
                        .map_err(|e| e.to_string())?;
                }
            }
            // The final count: 16 bytes, so it is never taken for an ack.
            let mut fin = [0u8; 16];
            fin[..8].copy_from_slice(&n.to_le_bytes());
            b.send_blocking(back, &fin, Duration::from_secs(10))
                .map_err(|e| e.to_string())?;
        }
        Ok(b)
    });

    let mut buf = vec![0u8; 1 << 17];
    let mut msg = vec![0u8; 64];
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..rounds {
        fill(&mut msg, i as u64);
        let t = Instant::now();
        a.send_blocking(ch, &msg, Duration::from_secs(10))?;
        let r = a.recv(&mut buf, TIMEOUT)?;
        samples.push(t.elapsed());
        check(&buf[..r.len], i as u64)?;
    }
    samples.sort();
    let warm = &samples[samples.len() / 10..];
    let med = warm[warm.len() / 2].as_secs_f64() * 1e6;
    let p99 = warm[warm.len() * 99 / 100].as_secs_f64() * 1e6;

    let small = stream(&mut a, ch, 64, secs, &mut buf)?;
    let big = stream(&mut a, ch, 4096, secs, &mut buf)?;
    echo.join().map_err(|_| "echo thread panicked")??;
    Ok(Row {
        path: name,
        rtt_median_us: med,
        rtt_p99_us: p99,
        small_mps: small,
        big_gbps: big * 4096.0 / 1e9,
    })
}

/// Stream `size`-byte messages for `secs` with a window of unacknowledged
/// messages; returns messages per second that arrived.
fn stream(
    a: &mut Endpoint,
    ch: unet::Channel,
    size: usize,
    secs: f64,
    buf: &mut [u8],
) -> Result<f64, Box<dyn std::error::Error>> {
    let mut msg = vec![0u8; size];
    let start = Instant::now();
    let (mut sent, mut acked) = (0u64, 0u64);
    while start.elapsed().as_secs_f64() < secs {
        if sent - acked < WINDOW {
            fill(&mut msg, sent);
            match a.send(ch, &msg) {
                Ok(()) => sent += 1,
                Err(unet::SendError::Full) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if let Some(r) = a.try_recv(buf)? {
            if r.len == 8 {
                acked = acked.max(u64::from_le_bytes(buf[..8].try_into()?));
            }
        } else if sent - acked >= WINDOW {
            // Acks lost on an unreliable path: don't stall forever.
            if !a.wait(Some(Duration::from_millis(50))) {
                acked = sent;
            }
        }
    }
    a.send_blocking(ch, &[0u8], Duration::from_secs(10))?;
    // Final count from the receiver.
    let received = loop {
        let r = a.recv(buf, TIMEOUT)?;
        if r.len == 16 {
            break u64::from_le_bytes(buf[..8].try_into()?);
        }
    };
    let took = start.elapsed().as_secs_f64();
    Ok(received as f64 / took)
}

#[cfg(test)]
mod tests {
    use super::{check, fill};

    #[test]
    fn check_accepts_what_fill_wrote_and_finds_any_damaged_byte() {
        for len in [1usize, 7, 8, 9, 64, 300, 4096] {
            for seq in [0u64, 1, 255, 256, 0x0123_4567_89ab_cdef] {
                let mut m = vec![0u8; len];
                fill(&mut m, seq);
                assert_eq!(check(&m, seq), Ok(()), "len {len} seq {seq}");
                if len >= 8 {
                    assert!(check(&m, seq + 1).is_err(), "another sequence number");
                }
                for at in [0, len / 2, len - 1] {
                    let mut bad = m.clone();
                    bad[at] ^= 0x10;
                    assert!(check(&bad, seq).is_err(), "len {len} byte {at}");
                }
            }
        }
    }
}
