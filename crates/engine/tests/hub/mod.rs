//! Shared by the tests of engines joined by a `MemoryHub` and stepped on
//! the test's thread (`transport.rs`, `wire_auth.rs`).

#![allow(dead_code)]

use std::net::SocketAddr;

use unet_abi::Geometry;
use unet_engine::invoker::RawEndpoint;
use unet_engine::Dispatcher;

/// Port `port` of the hub's host, 10.0.0.1.
pub fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], port))
}

/// The endpoints' geometry: 2 KiB buffers in a 1 MiB area.
pub fn geometry() -> Geometry {
    Geometry {
        buffer_size: 2048,
        buffer_area_size: 1 << 20,
        ..Geometry::default()
    }
}

/// Step both engines until neither has work left.
pub fn settle(a: &mut Dispatcher, b: &mut Dispatcher) {
    for _ in 0..10_000 {
        if a.step() + b.step() == 0 && a.step() + b.step() == 0 {
            return;
        }
    }
    panic!("the engines never settled");
}

/// Post the upper half of `ep`'s buffer area as free receive buffers.
pub fn post_buffers(ep: &mut RawEndpoint) {
    let g = ep.layout().geometry;
    let n = (g.buffer_area_size / g.buffer_size as u64 / 2).min(g.free_cap as u64 - 1);
    for i in 0..n {
        assert!(ep.post_free((g.buffer_area_size / 2 + i * g.buffer_size as u64) as u32));
    }
}
