//! The host program of the worked SPINE example (`extensions/Echo.java`):
//! load the extension onto an embedded engine, then, from one endpoint,
//! ping its echo handler, send a message through two handlers in turn
//! (no host on the path between them), and send a bulk message whose
//! buffer comes back with its first byte incremented; then print the
//! handlers' statistics.
//!
//! ```text
//! javac --release 8 -sourcepath java/applet-sdk/src/main/java -d /tmp extensions/Echo.java
//! cargo run -p unet --example spine_echo -- /tmp/Echo.class
//! ```

use std::time::{Duration, Instant};

use unet::spine::{split_am, ExtensionOptions};
use unet::{Endpoint, EndpointConfig, Engine, EngineConfig, Session};

/// The handler numbers start here (Echo's `init` argument).
const BASE: u16 = 100;

/// An active message: handler number, arguments, bulk data.
type Am = (u16, Vec<u8>, Vec<u8>);

fn recv_am(ep: &mut Endpoint) -> Result<Am, Box<dyn std::error::Error>> {
    let mut buf = vec![0u8; 1 << 16];
    let r = ep.recv(&mut buf, Some(Duration::from_secs(5)))?;
    if !r.am() {
        return Err("a message that is not an active message".into());
    }
    let (a, b) = split_am(&buf[..r.len]).ok_or("bad framing")?;
    Ok((r.handler().unwrap_or(u16::MAX), a.to_vec(), b.to_vec()))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: spine_echo Echo.class")?;
    let class = std::fs::read(&path)?;
    let engine = Engine::start(EngineConfig::default())?;
    let session = Session::embedded(&engine)?;
    let ext = session.load_extension(
        &class,
        ExtensionOptions {
            arg: BASE as i32,
            ..ExtensionOptions::named("echo")
        },
    )?;
    println!(
        "loaded extension {} with handlers {:?}",
        ext.id, ext.handlers
    );
    let mut ep = session.create_endpoint(EndpointConfig::default())?;

    let rounds = 10_000u32;
    let t = Instant::now();
    for i in 0..rounds {
        let ping = i.to_le_bytes();
        while ep.send_am(BASE, &ping, &[]).is_err() {
            std::thread::yield_now();
        }
        let (h, args, _) = recv_am(&mut ep)?;
        assert_eq!((h, &args[..]), (BASE, &ping[..]));
    }
    let rtt = t.elapsed() / rounds;
    println!("echo: {rounds} round trips, {rtt:?} each (host -> handler -> host)");

    ep.send_am(BASE + 1, b"two hops", &[])?;
    let (h, args, _) = recv_am(&mut ep)?;
    println!(
        "forward: handler {h} answered {:?} (host -> onForward -> onDeliver -> host)",
        String::from_utf8_lossy(&args)
    );

    let data = vec![41u8; 4096];
    ep.send_am(BASE + 3, b"bulk", &data)?;
    let (h, _, bulk) = recv_am(&mut ep)?;
    println!(
        "bulk: handler {h} returned {} bytes, first byte {}",
        bulk.len(),
        bulk[0]
    );

    for x in session.list_extensions()?.extensions {
        for h in x.handlers {
            let avg = h.total_ns.checked_div(h.invocations).unwrap_or(0);
            println!(
                "  handler {} {:<10} {:>6} invocations, {avg} ns each, {} terminated",
                h.number,
                h.method,
                h.invocations,
                h.terminated()
            );
        }
    }
    Ok(())
}
