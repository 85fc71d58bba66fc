//! Parses arbitrary bytes as a wire frame. Whatever parses must emit to the
//! same length and parse back to the same frame, emitting must be canonical,
//! and nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use unet_engine::wire::{Body, Frame, DATA_HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = Frame::parse(data) else {
        return;
    };
    assert_eq!(frame.len(), data.len());
    let mut out = vec![0u8; frame.len()];
    let n = frame.emit(&mut out).expect("a parsed frame emits");
    assert_eq!(n, data.len());
    let again = Frame::parse(&out).expect("an emitted frame parses");
    assert_eq!(again, frame);
    // Emitting is canonical: only padding may differ from the input, and
    // a second emit gives the same bytes.
    let mut out2 = vec![0u8; again.len()];
    assert_eq!(again.emit(&mut out2), Ok(n));
    assert_eq!(out2, out);
    if let Body::Data(d) = frame.body {
        let end = DATA_HEADER_LEN + d.payload.len();
        assert_eq!(out[DATA_HEADER_LEN..end], *d.payload);
        assert_eq!(out[..46], data[..46]);
        // An ack carried along: its fields as they came (the padding of
        // the trailer, and flag bits other than the NACK's, may differ).
        if d.ack.is_some() {
            assert_eq!(out[end..end + 12], data[end..end + 12]);
        } else {
            assert_eq!(end, out.len());
        }
    }
});
