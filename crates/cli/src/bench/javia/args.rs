//! The command's arguments, the kinds and paths it measures, and the
//! plan both ends of a run follow.

use std::path::PathBuf;

use clap::ValueEnum;

use crate::bench::stats;

/// The Javia paper's Figures 1-4: round trip and bandwidth of Javia-I,
/// Javia-II, the raw Rust VIA client and Aeron IPC.
#[derive(clap::Args)]
#[command(after_help = "\
Ratios are to the raw Rust client measured in the same invocation (round \
trip: lower is better; bandwidth: higher is better). Targets: Javia-II 64 B \
round trip <= 1.1x rust and below Aeron IPC; Javia-I (copy) 64 B round trip \
<= 1.3x rust; Javia-II 4 KiB bandwidth >= 0.95x rust. Under the Javia-I \
target: what one downcall costs in a JVM here (measured first, in a JVM of \
its own), against the room the target leaves. The SVG figures go to \
--out (figure1-local.svg ... figure4-remote.svg), with the paper's numbers \
(300 MHz Pentium-II, GigaNet cards) as points beside ours.")]
pub struct Args {
    /// Message sizes (comma list; 4, 64, 1K, 32K forms; 1 byte to 32 KiB).
    #[arg(long, value_delimiter = ',', value_parser = stats::parse_size,
          default_value = "4,16,64,256,1K,4K,16K,32K")]
    pub sizes: Vec<usize>,
    /// What to measure (comma list).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "rust,copy,inplace,buffer,aeron"
    )]
    pub kinds: Vec<Kind>,
    /// The local direct path, two engines over UDP loopback, or both.
    #[arg(long, value_enum, default_value = "both")]
    pub path: PathSel,
    /// Runs of each kind, interleaved [default: 3; 1 with --quick].
    #[arg(long)]
    pub runs: Option<usize>,
    /// Timed round trips per size up to 4 KiB (fewer above) [default:
    /// 20000; 300 with --quick].
    #[arg(long)]
    pub iters: Option<usize>,
    /// Untimed round trips before each size's (five times as many before
    /// the first: the JIT compiles meanwhile) [default: 10000; 200 with
    /// --quick].
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Timed bandwidth bursts per size [default: 5; 2 with --quick].
    #[arg(long)]
    pub reps: Option<usize>,
    /// Least time the untimed round trips of each size take, in
    /// milliseconds (five times as long before the first size): a JVM
    /// compiles its round-trip path for a few tens of milliseconds, in
    /// steps, and until then a round trip takes up to ten times as long;
    /// the ping end goes on past `--warmup` round trips until this much
    /// time passed [default: 100; 0 with --quick].
    #[arg(long)]
    pub warm_ms: Option<u64>,
    /// Untimed bursts before each size's timed ones: a JVM's burst loop
    /// runs in its first compilations for a few dozen bursts; the Java
    /// ends then go on until neither JVM compiled anything for 300 ms
    /// [default: 20; 1 with --quick].
    #[arg(long)]
    pub warm_bursts: Option<usize>,
    /// Bytes in one bandwidth burst (at least 64 messages; the paper sends
    /// 15 Mbytes) [default: 15000000; 1000000 with --quick].
    #[arg(long)]
    pub bytes: Option<u64>,
    /// Receivers leave the messages they receive unread. By default the
    /// ping end and the bandwidth receiver read each cache line of every
    /// message (a sum of a byte of each), as a program that receives
    /// data does: Aeron hands a message over where it lies in its log, and
    /// without a read its ping never touches a message's bytes, where a
    /// VI places every message into a posted buffer (and the echoing end
    /// reads it either way).
    #[arg(long)]
    pub unread: bool,
    /// Few, short runs: checks that everything works, measures little.
    #[arg(long)]
    pub quick: bool,
    /// One JSON object per line instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Directory for the SVG figures.
    #[arg(long, default_value = "javia-figures")]
    pub out: PathBuf,
    /// The project's `java` directory [default: found from here or from
    /// this program's location].
    #[arg(long)]
    pub java_dir: Option<PathBuf>,
    /// libunet.so for Javia [default: beside this program].
    #[arg(long)]
    pub library: Option<PathBuf>,
    /// Use the Java classes as built; do not run Maven first.
    #[arg(long)]
    pub no_build: bool,
    /// Javia's VIs shared between threads, a lock taken on every call
    /// (Javia's default), instead of confined to the one thread that
    /// drives each end (`ViAttributes.setConfined`, no lock; the Rust
    /// client, owned by one thread, takes none either).
    #[arg(long)]
    pub shared_vis: bool,
    /// Runs the ping end on core 0 and the pong end on core 1, every
    /// thread of each (a JVM's compiler and collector threads share its
    /// end's core), as `unet bench via --pin` does.
    #[arg(long)]
    pub pin: bool,
}

/// What one run measures.
#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
pub enum Kind {
    /// The raw Rust VIA client: posted descriptors in registered memory.
    Rust,
    /// Javia-I: byte arrays copied into Javia's buffers.
    Copy,
    /// Javia-I: byte arrays handed to the library for the call.
    Inplace,
    /// Javia-II: registered buffers, no copy in Java.
    Buffer,
    /// Aeron's Java IPC (local path only).
    Aeron,
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Rust => "rust",
            Kind::Copy => "copy",
            Kind::Inplace => "inplace",
            Kind::Buffer => "buffer",
            Kind::Aeron => "aeron",
        }
    }

    pub(super) fn label(self) -> &'static str {
        match self {
            Kind::Rust => "raw Rust VIA client",
            Kind::Copy => "Javia-I (copy)",
            Kind::Inplace => "Javia-I (in place)",
            Kind::Buffer => "Javia-II",
            Kind::Aeron => "Aeron IPC",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
pub enum PathSel {
    Local,
    Remote,
    Both,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Where {
    Local,
    Remote,
}

impl Where {
    pub(super) fn name(self) -> &'static str {
        match self {
            Where::Local => "local",
            Where::Remote => "remote",
        }
    }
}

/// The plan both ends of a run follow.
pub(super) struct Plan {
    pub(super) sizes: Vec<usize>,
    pub(super) iters: usize,
    pub(super) warmup: usize,
    pub(super) reps: usize,
    pub(super) warm_bursts: usize,
    pub(super) warm_ms: u64,
    pub(super) bytes: u64,
    /// Receivers read each cache line of every message (not `--unread`).
    pub(super) read: bool,
    /// Ping on core 0, pong on core 1 (not passed to the ends).
    pub(super) pin: bool,
}

impl Plan {
    pub(super) fn args(&self) -> Vec<String> {
        let sizes: Vec<String> = self.sizes.iter().map(|s| s.to_string()).collect();
        vec![
            "--sizes".into(),
            sizes.join(","),
            "--iters".into(),
            self.iters.to_string(),
            "--warmup".into(),
            self.warmup.to_string(),
            "--reps".into(),
            self.reps.to_string(),
            "--warm-bursts".into(),
            self.warm_bursts.to_string(),
            "--warm-ms".into(),
            self.warm_ms.to_string(),
            "--bytes".into(),
            self.bytes.to_string(),
            "--read".into(),
            self.read.to_string(),
        ]
    }
}
