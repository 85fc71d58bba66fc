//! Decodes arbitrary bytes as a control request and as a control reply.
//! Nothing may panic, and whatever decodes must encode to a packet of at
//! most `MAX_PACKET` bytes, no longer than the input, that decodes to the
//! same value (and the same request id). The same property runs in
//! `cargo test -p unet-control` over the seeds and mutated packets.
#![no_main]

use libfuzzer_sys::fuzz_target;
use unet_control::{Reply, Request, MAX_PACKET};

fuzz_target!(|data: &[u8]| {
    if let Ok((id, req)) = Request::decode(data) {
        let out = req.encode(id);
        assert!(out.len() <= MAX_PACKET && out.len() <= data.len());
        assert_eq!(Request::decode(&out), Ok((id, req)));
    }
    if let Ok((id, rep)) = Reply::decode(data) {
        let out = rep.encode(id);
        assert!(out.len() <= MAX_PACKET && out.len() <= data.len());
        assert_eq!(Reply::decode(&out), Ok((id, rep)));
    }
});
