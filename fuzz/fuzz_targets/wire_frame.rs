//! Parses arbitrary bytes as a wire frame. Whatever parses must emit to the
//! same length and parse back to the same frame; nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use unet_engine::wire::{Body, Frame};

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = Frame::parse(data) else {
        return;
    };
    assert_eq!(frame.len(), data.len());
    let mut out = vec![0u8; frame.len()];
    let n = frame.emit(&mut out).expect("a parsed frame emits");
    assert_eq!(n, data.len());
    assert_eq!(Frame::parse(&out), Ok(frame));
    // Only padding may differ between input and output.
    if let Body::Data(_) = frame.body {
        assert_eq!(out, data);
    }
});
