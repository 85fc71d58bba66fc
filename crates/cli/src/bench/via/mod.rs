//! `unet bench via`: VIA between two VIs, beside unet's endpoint path
//! that carries the same messages, measured in the same invocation.
//!
//! `--path remote`: two VIs in two processes, each with an engine of its
//! own on UDP loopback, connected by discriminator from one engine to the
//! other; the engines carry the messages with the VI's reliability level.
//! For each size, runs alternate a TCP loopback baseline (a `TCP_NODELAY`
//! ping-pong, a bulk stream; see [`super::tcp`]) and a VI of each level,
//! the unreliable one always among them: each reliable row also says how
//! it compares with the unreliable one run beside it. Streams add each
//! reliable level with `--loss-pct` of the datagrams dropped by each
//! engine (seeded), against the same level without loss. An unreliable
//! stream's figure is what was delivered.
//!
//! `--path local`: two VIs in two processes
//! of this host, connected by discriminator through an embedded engine
//! and then joined by a direct ring (no engine in the data path). The
//! baseline is unet's endpoint direct path, run by the same code as
//! `unet bench pingpong|stream --path direct`, with the same placement:
//! this process starts an embedded engine with a control socket in a
//! fresh temporary directory, and a child (`unet bench __child via-…`)
//! connects to it; `--pin` puts this process on core 0 and the child on
//! core 1. Runs alternate baseline, VI, baseline, VI… so that both see
//! the same noise. A ping-pong's runs are turns of one pair of processes:
//! the child echoes on an endpoint of its own until STOP, then on its VI
//! until STOP, and so on (END on the endpoint ends it), so that the
//! baseline and the VI see the same placement on the host's cores; a
//! stream's runs are a pair of processes each.
//!
//! Ping-pong: each side keeps receive descriptors posted in a registered
//! region and posts a new one for each that completes (this side while
//! its next message travels; the echoing side once the echo, sent from
//! the buffer it landed in, has completed). Each round trip is timed on
//! its own ([`stats::time_round_trips`](super::stats::time_round_trips)); the figure is the median over
//! the round trips of all runs, as `unet bench pingpong` reports it.
//!
//! Stream: the receiver keeps `--window` receive descriptors posted and
//! posts a new one for each that completes; the sender keeps `--window`
//! sends outstanding (its send queue full) from one registered buffer, as
//! the endpoint sender sends one buffer over and over, and takes their
//! completions back. The protocol is `unet bench stream`'s: a warm-up,
//! then SYNC (the receiver zeroes its count), the timed part, then STOP,
//! answered with the bytes placed into the receiver's registered memory
//! since SYNC; the time runs until that answer. The figure is the median
//! over runs of those bytes per second.

mod args;
mod measure;
mod peer;
mod pingpong;
mod row;
mod stream;
mod vi;

use std::process::ExitCode;

use super::child;
use super::report::{self, Progress};
use args::{Settings, ViaPath};
use measure::{pingpong_row, remote, stream_row};
use row::{Point, Row};

pub use args::Args;
pub use peer::child;

type Res<T> = Result<T, String>;

pub fn run(a: Args) -> ExitCode {
    report::finish(bench(a))
}

fn bench(a: Args) -> Res<()> {
    let s = Settings::of(&a)?;
    report::warn_if_busy();
    if s.pin {
        child::pin_to(0)?;
    }
    let prog = Progress::new();
    if !a.json {
        Row::header();
    }
    let emit = |r: Row| {
        if a.json {
            println!("{}", r.json());
        } else {
            r.line();
        }
    };
    if a.path == ViaPath::Remote {
        return remote(&a, &s, &prog, &emit);
    }
    for reliability in a.reliability.levels() {
        let point = |size| Point {
            path: a.path,
            reliability,
            size,
            s: &s,
        };
        for &size in &a.sizes {
            emit(pingpong_row(&point(size), &prog)?);
        }
        for &size in &a.stream_sizes {
            emit(stream_row(&point(size), &prog)?);
        }
    }
    Ok(())
}
