//! VIA on unet (the guide `docs/via.md`): a server and a client VI of
//! this host's engine (here an embedded one, the two ends on two threads),
//! a registered memory region, a receive posted before the send, and the
//! completions.
//!
//! ```sh
//! cargo run --release -p unet --example via
//! ```

use std::time::Duration;

use unet::{Engine, EngineConfig, Session, ViAttributes, ViSeg};

/// The discriminator the server listens on.
const TAG: u64 = 42;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::start(EngineConfig::default())?;
    let t = Some(Duration::from_secs(5));

    let session = Session::embedded(&engine)?;
    let listener = session.vi_listen(TAG)?;
    let server = std::thread::spawn(move || -> Result<Vec<u8>, String> {
        let mut vi = listener
            .accept(&ViAttributes::default(), t)
            .map_err(|e| e.to_string())?;
        let region = session
            .register_memory(1 << 16)
            .map_err(|e| e.to_string())?;
        // Where the next message goes: posted before the client sends.
        vi.post_recv(1, &[ViSeg::new(&region, 0, 4096)])
            .map_err(|e| e.to_string())?;
        let done = vi.recv_wait(t).map_err(|e| e.to_string())?;
        let len = done.status.map_err(|e| format!("{e:?}"))?;
        let mut got = vec![0u8; len];
        region.read(0, &mut got);
        Ok(got)
    });

    let client = Session::embedded(&engine)?;
    // None: this host's engine; Some(address) for another engine's.
    let mut vi = client.vi_connect(None, TAG, &ViAttributes::default(), t)?;
    let region = client.register_memory(1 << 16)?;
    region.write(8192, b"hello, VI");
    vi.post_send(2, &[ViSeg::new(&region, 8192, 9)])?; // gathered from the region
    let sent = vi.send_wait(t)?;
    println!("send completed: descriptor {} {:?}", sent.id, sent.status);

    let got = server.join().map_err(|_| "the server thread panicked")??;
    println!("the server received {:?}", std::str::from_utf8(&got)?);
    Ok(())
}
