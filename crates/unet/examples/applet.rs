//! U-Net/SLE's applets (the guide `docs/applets.md`): the sample applet
//! `applets/PingPong.java` attached to two endpoints in the engine, and a
//! run of round trips between the two applets that never reaches either
//! process; the initiator's applet reports the run when it is done.
//!
//! ```sh
//! javac --release 8 -sourcepath java/applet-sdk/src/main/java -d /tmp applets/PingPong.java
//! cargo run --release -p unet --example applet -- /tmp/PingPong.class
//! ```

use std::time::Duration;

use unet::{AppletOptions, ChannelOptions, EndpointConfig, Engine, EngineConfig, Session};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: applet PingPong.class (compiled against java/applet-sdk)")?;
    let class = std::fs::read(&path).map_err(|e| format!("{path}: {e}"))?;
    let engine = Engine::start(EngineConfig::default())?;
    let session = Session::embedded(&engine)?;
    let mut a = session.create_endpoint(EndpointConfig::default())?;
    let mut b = session.create_endpoint(EndpointConfig::default())?;
    // JIVE verifies the class; a refusal says why and leaves the endpoint
    // as it was.
    a.attach_applet(&class, AppletOptions::default())?;
    b.attach_applet(&class, AppletOptions::default())?;
    let ch = a.open_channel(b.addr(), ChannelOptions::default())?;

    // A run: N round trips (big-endian) and the payload that travels.
    let rounds: u32 = 1000;
    let mut msg = rounds.to_be_bytes().to_vec();
    msg.extend_from_slice(&[7u8; 60]);
    a.send_blocking(ch, &msg, Duration::from_secs(5))?;
    let mut buf = [0u8; 64];
    let r = a.recv(&mut buf, Some(Duration::from_secs(10)))?;
    let be = |at: usize| u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
    if r.len != 12 {
        return Err(format!("a report of {} bytes, not 12", r.len).into());
    }
    println!(
        "{} round trips between the applets in {} us by the applet's clock, {} bad pongs",
        be(0),
        be(4),
        be(8)
    );
    if be(0) != rounds || be(8) != 0 {
        return Err("the run did not complete cleanly".into());
    }
    Ok(())
}
