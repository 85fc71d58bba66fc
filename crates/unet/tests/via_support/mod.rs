//! What the VIA tests share: engines and sessions, VI pairs connected
//! by discriminator, message patterns and error codes.
#![allow(dead_code)] // not every test binary uses every helper

use std::thread;
use std::time::Duration;

use unet::*;

pub const T: Option<Duration> = Some(Duration::from_secs(10));

pub fn attrs(r: Reliability) -> ViAttributes {
    ViAttributes {
        reliability: r,
        ..ViAttributes::default()
    }
}

/// Connect a VI of `a` from `sa` to a VI of `b` accepted by `sb` on `tag`.
pub fn connect(sa: &Session, sb: &Session, tag: u64, a: ViAttributes, b: ViAttributes) -> (Vi, Vi) {
    let server = sb.vi_listen(tag).expect("listen");
    let sa = sa.clone();
    let t = thread::spawn(move || sa.vi_connect(None, tag, &a, T));
    let vb = server.accept(&b, T).expect("accept");
    let va = t.join().unwrap().expect("connect");
    (va, vb)
}

/// As [`connect`], with 4096 descriptors on the sender's send queue and on
/// the receiver's receive queue.
pub fn connect_deep(sa: &Session, sb: &Session, tag: u64) -> (Vi, Vi) {
    let send = ViAttributes {
        send_queue: 4096,
        ..ViAttributes::default()
    };
    let recv = ViAttributes {
        recv_queue: 4096,
        ..ViAttributes::default()
    };
    connect(sa, sb, tag, send, recv)
}

pub fn engine() -> (Engine, Session, Session) {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s1 = Session::embedded(&e).unwrap();
    let s2 = Session::embedded(&e).unwrap();
    (e, s1, s2)
}

pub fn pattern(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
}

pub fn code(e: &Error) -> Option<ErrorCode> {
    unet::via::engine_code(e)
}
