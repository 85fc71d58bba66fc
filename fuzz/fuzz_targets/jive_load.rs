//! Load and verify arbitrary bytes as a JIVE class with the `test` domain
//! granted: the answer is a class or a rejection, never a panic.
#![no_main]

use jive::{test_natives, Class};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let natives = test_natives::<()>();
    if let Ok(class) = Class::load(data, &natives, &["test"]) {
        // A loaded class answers questions about itself without panicking.
        let _ = class.name();
    }
});
