//! The command's arguments, and the settings a run takes from them.

use std::time::Duration;

use clap::ValueEnum;
use unet::{Reliability, VI_MAX_TRANSFER};

use super::Res;
use crate::bench::child::PathArg;
use crate::bench::stats::{self, fmt_size};

/// Round trip and one-way bandwidth between two VIs.
#[derive(clap::Args)]
#[command(after_help = "\
Runs alternate the baseline and the VIs: direct, VI, direct, VI… (--runs \
pairs); a stream's run is this process and a child it starts, a local \
ping-pong's runs are turns of one such pair (the same placement on the \
cores for both). Baseline: unet's endpoint direct path (the code of `unet \
bench pingpong|stream --path direct`). via-pingpong: each side keeps \
receive descriptors posted in a registered region, reposting each that \
completes; every round trip timed on its own, median over all round trips \
of all runs, ratio = VI / direct (lower is better; the issue's target for \
64 B: <= 1.15). via-stream: the receiver keeps --window receives posted, the \
sender --window sends outstanding; GB/s delivered into the receiver's \
registered memory, median of the runs, ratio = VI / direct (higher is \
better; target >= 0.9). ratio_paired (JSON, and the last column) is the \
median of the ratios of each VI run to the direct run beside it. \
--path remote: the baseline is TCP loopback (a TCP_NODELAY ping-pong, a bulk \
stream) and runs alternate TCP, unreliable, then each other level asked for; \
reliable rows add vs_unreliable (ratio of medians, and paired; target for \
delivery: round trip <= 1.2, stream >= 0.9), and each reliable stream is run \
again with --loss-pct dropped by each engine, its row's baseline being the \
same level without loss (target >= 0.5).")]
pub struct Args {
    /// Where the two VIs are: `local`, two processes of this host joined
    /// by a direct ring (baseline: the endpoint direct path); `remote`,
    /// two processes with an engine each, over UDP loopback (baseline: TCP
    /// loopback).
    #[arg(long, value_enum, default_value = "local")]
    pub path: ViaPath,
    /// The VIs' reliability level; `all` measures each in turn.
    #[arg(long, value_enum, default_value = "delivery")]
    pub reliability: RelArg,
    /// Ping-pong message sizes (comma list; 8, 64, 1K, 4K forms; at most
    /// 256K, the most a VI carries).
    #[arg(long, value_delimiter = ',', value_parser = stats::parse_size,
          default_value = "64,4096")]
    pub sizes: Vec<usize>,
    /// Stream message sizes (comma list, as --sizes).
    #[arg(long, value_delimiter = ',', value_parser = stats::parse_size,
          default_value = "4096")]
    pub stream_sizes: Vec<usize>,
    /// Interleaved pairs of runs (direct, VI) per point [default: 5; 1
    /// with --quick].
    #[arg(long)]
    pub runs: Option<usize>,
    /// Stream: receive descriptors the receiver keeps posted, and sends the
    /// sender keeps outstanding (its send queue's length).
    #[arg(long, default_value_t = 256,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub window: u32,
    /// Ping-pong: timed round trips per run for sizes up to 4 KiB (scaled
    /// down above) [default: 20000; 300 with --quick].
    #[arg(long)]
    pub iters: Option<usize>,
    /// Ping-pong: untimed round trips before each run [default: 1000; 30
    /// with --quick].
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Ping-pong: upper bound on the timed part of each run, in
    /// milliseconds [default: 500; 50 with --quick].
    #[arg(long)]
    pub time_ms: Option<u64>,
    /// Stream: length of the timed part of each run, in milliseconds
    /// [default: 200; 20 with --quick].
    #[arg(long)]
    pub stream_ms: Option<u64>,
    /// Stream: warm-up before each run, in milliseconds [default: 30; 5
    /// with --quick].
    #[arg(long)]
    pub stream_warmup_ms: Option<u64>,
    /// Remote streams: the share of datagrams each engine drops on purpose
    /// (seeded) in the runs of each reliable level under loss, in percent
    /// (0: no such runs).
    #[arg(long, default_value_t = 1.0,
          value_parser = parse_pct)]
    pub loss_pct: f64,
    /// Pin this process to core 0 and the other to core 1.
    #[arg(long)]
    pub pin: bool,
    /// Print one JSON object per line per measured point.
    #[arg(long)]
    pub json: bool,
    /// Short runs (for tests): the defaults marked "with --quick".
    #[arg(long)]
    pub quick: bool,
}

fn parse_pct(s: &str) -> Res<f64> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=50.0).contains(&p) => Ok(p),
        _ => Err(format!("{s:?} is not a percentage from 0 to 50")),
    }
}

/// Where the two VIs are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ViaPath {
    /// Two processes of this host, one direct ring each way.
    Local,
    /// Two engines over UDP loopback.
    #[value(alias = "udp")]
    Remote,
}

impl ViaPath {
    pub(super) fn name(self) -> &'static str {
        match self {
            ViaPath::Local => "local",
            ViaPath::Remote => "remote",
        }
    }

    /// The endpoint path measured beside it.
    pub(super) fn baseline(self) -> PathArg {
        match self {
            ViaPath::Local => PathArg::Direct,
            ViaPath::Remote => PathArg::Udp,
        }
    }
}

/// `--reliability`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RelArg {
    /// Unreliable: a send completes once the message has left.
    Unreliable,
    /// Reliable delivery: a send completes once the message reached the
    /// receiving side.
    Delivery,
    /// Reliable reception: a send completes once the receiver placed the
    /// message into a posted buffer.
    Reception,
    /// Each of the three in turn.
    All,
}

impl RelArg {
    pub(super) fn levels(self) -> Vec<Reliability> {
        match self {
            RelArg::Unreliable => vec![Reliability::Unreliable],
            RelArg::Delivery => vec![Reliability::ReliableDelivery],
            RelArg::Reception => vec![Reliability::ReliableReception],
            RelArg::All => vec![
                Reliability::Unreliable,
                Reliability::ReliableDelivery,
                Reliability::ReliableReception,
            ],
        }
    }
}

pub(super) fn rel_name(r: Reliability) -> &'static str {
    match r {
        Reliability::Unreliable => "unreliable",
        Reliability::ReliableDelivery => "delivery",
        Reliability::ReliableReception => "reception",
    }
}

/// What the options make of a run.
pub(super) struct Settings {
    pub(super) runs: usize,
    pub(super) iters: usize,
    pub(super) warmup: usize,
    pub(super) limit: Duration,
    pub(super) stream: Duration,
    pub(super) stream_warmup: Duration,
    pub(super) window: usize,
    pub(super) pin: bool,
}

impl Settings {
    pub(super) fn of(a: &Args) -> Res<Settings> {
        let q = a.quick;
        let pick =
            |v: Option<u64>, normal: u64, quick: u64| v.unwrap_or(if q { quick } else { normal });
        let runs = a.runs.unwrap_or(if q { 1 } else { 5 });
        if runs == 0 {
            return Err("--runs must be at least 1".into());
        }
        for &s in a.sizes.iter().chain(&a.stream_sizes) {
            if s > VI_MAX_TRANSFER {
                return Err(format!(
                    "size {}: a VI carries messages of at most {}",
                    fmt_size(s),
                    fmt_size(VI_MAX_TRANSFER)
                ));
            }
        }
        let iters = a.iters.unwrap_or(if q { 300 } else { 20_000 });
        if iters == 0 {
            return Err("--iters must be at least 1".into());
        }
        Ok(Settings {
            runs,
            iters,
            warmup: a.warmup.unwrap_or(if q { 30 } else { 1_000 }),
            limit: Duration::from_millis(pick(a.time_ms, 500, 50)),
            stream: Duration::from_millis(pick(a.stream_ms, 200, 20)),
            stream_warmup: Duration::from_millis(pick(a.stream_warmup_ms, 30, 5)),
            window: a.window as usize,
            pin: a.pin,
        })
    }
}
