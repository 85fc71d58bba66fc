//! Descriptor validation: a hostile endpoint pushes arbitrary send
//! descriptors and scribbles arbitrary bytes over its own ring headers; the
//! engine must neither panic nor stop serving an honest pair of endpoints.
//! The hostile endpoint holds a channel to `b`, so `b` may also receive its
//! messages (whatever they hold, on the channel `b` sees for it): the
//! honest message is the one on `b`'s channel from `a`.
#![no_main]

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use unet::*;

struct World {
    _engine: Engine,
    session: Session,
    a: Endpoint,
    b: Endpoint,
    ch: Channel,
    /// The channel on which `b` sees `a`'s messages.
    from_a: Channel,
}

fn world() -> &'static Mutex<World> {
    static W: OnceLock<Mutex<World>> = OnceLock::new();
    W.get_or_init(|| {
        let engine = Engine::start(EngineConfig::default()).expect("engine");
        let session = Session::embedded(&engine).expect("session");
        let mut a = session.create_endpoint(EndpointConfig::default()).expect("a");
        let mut b = session.create_endpoint(EndpointConfig::default()).expect("b");
        let ch = a.open_channel(b.addr(), ChannelOptions { path: PathChoice::Engine }).expect("channel");
        let from_a = loop {
            b.wait(Some(Duration::from_secs(5)));
            match b.poll_event() {
                Some(Event::ChannelOpened { channel, .. }) => break channel,
                Some(_) => {}
                None => panic!("b never saw a's channel open"),
            }
        };
        Mutex::new(World { _engine: engine, session, a, b, ch, from_a })
    })
}

fuzz_target!(|data: &[u8]| {
    let mut w = world().lock().unwrap_or_else(|p| p.into_inner());
    let cfg = EndpointConfig { managed_buffers: false, ..Default::default() };
    let mut bad = w.session.create_endpoint(cfg).expect("hostile endpoint");
    // Give it a channel, so some descriptors name a real one.
    let _ = bad.open_channel(w.b.addr(), ChannelOptions { path: PathChoice::Engine });
    let (seg, len) = bad.raw_segment();
    let g = bad.geometry();
    let layout = unet_abi::Layout::new(g).expect("layout");
    for chunk in data.chunks(17) {
        if chunk.len() < 17 {
            break;
        }
        let op = chunk[0];
        let body = &chunk[1..];
        if op & 1 == 0 {
            let d = unet_abi::SendDesc {
                offset: u32::from_le_bytes(body[0..4].try_into().unwrap()),
                len: u32::from_le_bytes(body[4..8].try_into().unwrap()),
                channel: u16::from_le_bytes(body[8..10].try_into().unwrap()) % 8,
                flags: if op & 2 == 0 { 0 } else { u16::from_le_bytes(body[10..12].try_into().unwrap()) },
                status: 0,
            };
            bad.push_raw_desc(d);
        } else {
            // Scribble 8 bytes over a ring header or a free-ring entry.
            let targets = [layout.send_off, layout.send_off + 64, layout.recv_off + 64, layout.free_off, layout.free_off + 64, layout.free_off + 192, layout.event_off + 64];
            let at = targets[(op as usize >> 1) % targets.len()] as usize;
            if at + 8 <= len {
                // SAFETY: in bounds of the hostile endpoint's own mapping.
                unsafe { std::ptr::copy_nonoverlapping(body.as_ptr(), seg.add(at), 8) };
            }
        }
    }
    drop(bad);
    // The honest pair still works.
    let World { a, b, ch, from_a, .. } = &mut *w;
    a.send_blocking(*ch, b"still here", Duration::from_secs(5)).expect("honest send");
    let mut buf = vec![0u8; unet_abi::MAX_MESSAGE];
    loop {
        let r = b.recv(&mut buf, Some(Duration::from_secs(5))).expect("the engine stopped serving honest endpoints");
        if r.channel == *from_a {
            assert_eq!(&buf[..r.len], b"still here");
            break;
        }
        // A message the hostile endpoint sent before it went: allowed.
    }
    // The hostile endpoint's channel opened and went: events b need not keep.
    while b.poll_event().is_some() {}
});
