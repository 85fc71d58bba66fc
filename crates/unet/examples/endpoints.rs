//! U-Net's endpoints and channels on an embedded engine (the guide
//! `docs/unet.md`): two endpoints, a channel on the direct path (a ring
//! shared by the two ends, no engine on the way) and one carried by the
//! engine, a message each way, a batch, and what the counters say.
//!
//! ```sh
//! cargo run --release -p unet --example endpoints
//! ```

use std::time::Duration;

use unet::{ChannelOptions, EndpointConfig, Engine, EngineConfig, PathChoice, Session};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::start(EngineConfig::default())?; // or a daemon: Session::connect(path)
    let session = Session::embedded(&engine)?;
    let mut a = session.create_endpoint(EndpointConfig::default())?;
    let mut b = session.create_endpoint(EndpointConfig::default())?;
    let t = Some(Duration::from_secs(5));
    let mut buf = [0u8; 256];

    // Both ends are local: the channel takes the direct path.
    let direct = a.open_channel(b.addr(), ChannelOptions::default())?;
    a.send(direct, b"hello over the direct path")?;
    let r = b.recv(&mut buf, t)?; // spins briefly, then sleeps on a futex
    println!(
        "b got {:?} on channel {:?}",
        std::str::from_utf8(&buf[..r.len])?,
        r.channel
    );

    // The answer goes back on b's channel to a.
    let back = b.open_channel(a.addr(), ChannelOptions::default())?;
    b.send(back, b"and back")?;
    let r = a.recv(&mut buf, t)?;
    println!("a got {:?}", std::str::from_utf8(&buf[..r.len])?);

    // The same through the engine (what a channel to another host takes).
    let carried = a.open_channel(
        b.addr(),
        ChannelOptions {
            path: PathChoice::Engine,
        },
    )?;
    a.send(carried, b"through the engine")?;
    let r = b.recv(&mut buf, t)?;
    println!(
        "b got {:?} through the engine",
        std::str::from_utf8(&buf[..r.len])?
    );

    // A batch per call.
    let msgs: Vec<Vec<u8>> = (0..8u8).map(|i| vec![i; 16]).collect();
    let sent = a.send_many(direct, &msgs)?;
    let mut got = 0;
    while got < sent {
        b.recv(&mut buf, t)?;
        got += 1;
    }
    println!("a batch of {sent} sent in one call, {got} received");
    Ok(())
}
