//! unet's side of the network benchmarks: one function per path for the
//! driving process, and the child's half.

use std::time::Duration;

use super::floor::StreamRun;
use super::net::{ChildArgs, PathArg};
use super::stats::Samples;

/// One unet run.
#[allow(dead_code)] // read once the unet paths exist
pub struct Run {
    pub path: PathArg,
    pub size: usize,
    /// Stream: acknowledgment every `burst` messages (0: only at the end).
    pub burst: usize,
    /// Ping-pong: untimed round trips, then up to `iters` timed ones.
    pub warmup: usize,
    pub iters: usize,
    /// Ping-pong: bound on the timed part; stream: its length.
    pub limit: Duration,
    /// Stream: warm-up length.
    pub warmup_time: Duration,
    pub pin: bool,
}

fn unavailable(path: PathArg) -> String {
    format!("path {path} not available yet: the unet client library does not offer it")
}

/// Ping-pong over unet: each round trip timed on its own.
pub fn pingpong(r: &Run) -> Result<Samples, String> {
    match r.path {
        PathArg::Direct => direct_pingpong(r),
        PathArg::Engine => engine_pingpong(r),
        PathArg::Udp => udp_pingpong(r),
    }
}

/// One-way stream over unet.
pub fn stream(r: &Run) -> Result<StreamRun, String> {
    Err(unavailable(r.path))
}

fn direct_pingpong(r: &Run) -> Result<Samples, String> {
    Err(unavailable(r.path))
}

fn engine_pingpong(r: &Run) -> Result<Samples, String> {
    Err(unavailable(r.path))
}

fn udp_pingpong(r: &Run) -> Result<Samples, String> {
    Err(unavailable(r.path))
}

/// The child's half of a unet run.
pub fn child(_a: &ChildArgs, _ready: fn(&str)) -> Result<(), String> {
    Err("unet child runs are not available yet".into())
}
