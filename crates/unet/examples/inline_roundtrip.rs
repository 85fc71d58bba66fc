//! Round trips between two endpoints of one process on the direct path,
//! each with an applet placed inline (or none), on one thread: what the
//! inline placement adds to a round trip, without a second core, spinning
//! or waking.
//!
//! ```sh
//! javac --release 8 -sourcepath java/applet-sdk/src/main/java -d /tmp applets/RawUnet.java
//! cargo run --release -p unet --example inline_roundtrip -- /tmp/RawUnet.class 64 1000000
//! cargo run --release -p unet --example inline_roundtrip -- none 64 1000000
//! ```
//!
//! Prints the time per round trip (A sends, B takes it and sends it back,
//! A takes the answer: two sends, two receives, and with an applet two
//! `doTx` and two `doRx`). Under `valgrind --tool=callgrind`, the
//! instruction count of a run less that of a run with fewer round trips is
//! the count per round trip.

use std::time::{Duration, Instant};

use unet::{
    AppletOptions, ChannelOptions, EndpointConfig, Engine, EngineConfig, PathChoice, Placement,
    Session,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: inline_roundtrip (CLASS | none) [SIZE] [ROUND_TRIPS]";
    let class = args.next().ok_or(usage)?;
    let size: usize = args.next().map_or(Ok(64), |s| s.parse())?;
    let rounds: u64 = args.next().map_or(Ok(1_000_000), |s| s.parse())?;
    let engine = Engine::start(EngineConfig::default())?;
    let session = Session::embedded(&engine)?;
    let mut a = session.create_endpoint(EndpointConfig::default())?;
    let mut b = session.create_endpoint(EndpointConfig::default())?;
    if class != "none" {
        let bytes = std::fs::read(&class).map_err(|e| format!("{class}: {e}"))?;
        let inline = AppletOptions {
            placement: Placement::Inline,
            ..Default::default()
        };
        a.attach_applet(&bytes, inline)?;
        b.attach_applet(&bytes, inline)?;
    }
    let direct = ChannelOptions {
        path: PathChoice::Direct,
    };
    let ab = a.open_channel(b.addr(), direct)?;
    let msg = vec![7u8; size];
    let mut buf = vec![0u8; size.max(64)];
    let wait = Some(Duration::from_secs(5));
    // B learns of the channel with the first message; its answer goes back
    // on the channel the message came in on.
    a.send_blocking(ab, &msg, Duration::from_secs(5))?;
    let ba = b.recv(&mut buf, wait)?.channel;
    b.send_blocking(ba, &msg, Duration::from_secs(5))?;
    a.recv(&mut buf, wait)?;
    let start = Instant::now();
    for _ in 0..rounds {
        a.send(ab, &msg)?;
        let r = b.recv(&mut buf, wait)?;
        b.send(ba, &buf[..r.len])?;
        let r = a.recv(&mut buf, wait)?;
        if r.len != size {
            return Err(format!("an answer of {} bytes, not {size}", r.len).into());
        }
    }
    let ns = start.elapsed().as_nanos() as f64 / rounds as f64;
    let what = if class == "none" { "no applet" } else { &class };
    println!("{what}, {size} B: {ns:.1} ns per round trip ({rounds} round trips)");
    Ok(())
}
