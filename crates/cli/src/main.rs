//! The `unet` command: run the demo, a daemon, read counters, gang
//! schedule UDM jobs, benchmark, check or run JIVE applets, load SPINE
//! extensions, and run SPINE's IP router.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod applet;
mod bench;
mod daemon;
mod demo;
mod gang;
mod jdk;
mod metrics;
mod report;
mod router;
mod spine;
mod stat;
mod trace;
mod units;
mod video;

/// unet: a programmable user-level network interface.
#[derive(Parser)]
#[command(name = "unet", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the demo on an embedded engine: ping-pong and a stream over the
    /// direct path, the engine path and UDP loopback.
    Demo(demo::Args),
    /// Run an engine as a daemon that processes reach over a control socket.
    Daemon(daemon::Args),
    /// Print the counters of a running daemon (one-shot or --watch).
    Stat(stat::Args),
    /// Gang schedule UDM jobs' node processes in time slices, telling
    /// the engine which nodes run and heeding its overflow advice.
    Gang(gang::Args),
    /// Benchmarks, each beside a baseline measured in the same run.
    #[command(subcommand)]
    Bench(bench::Command),
    /// Check or run JIVE applets (Java class files).
    #[command(subcommand)]
    Applet(applet::Command),
    /// Load, unload and list SPINE extensions on a running daemon.
    #[command(subcommand)]
    Spine(spine::Command),
    /// Record a running daemon's event graph (SPINE's Figure 6): Chrome
    /// trace JSON, an SVG, and the period and latency it shows.
    Trace(trace::Args),
    /// SPINE's IP router: forwarding by an extension on a running
    /// daemon's ports, the table and the host path from this process.
    #[command(subcommand)]
    Router(router::Command),
    /// Run every command that regenerates a table or figure of the papers
    /// and write one HTML page of the results (plots, rows, the machine).
    Report(report::Args),
    /// SPINE's video client: a video server streaming frames over the UDP
    /// wire, the host application of the extension that places them in a
    /// framebuffer, and a live viewer of the framebuffer.
    #[command(subcommand)]
    Video(video::Command),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Command::Stat(_) | Command::Spine(_) | Command::Applet(_) | Command::Trace(_)
    ) {
        end_quietly_when_output_closes();
    }
    match cli.command {
        Command::Demo(a) => demo::run(a),
        Command::Daemon(a) => daemon::run(a),
        Command::Stat(a) => stat::run(a),
        Command::Gang(a) => gang::run(a),
        Command::Bench(c) => bench::run(c),
        Command::Applet(c) => applet::run(c),
        Command::Spine(c) => spine::run(c),
        Command::Trace(a) => trace::run(a),
        Command::Router(c) => router::run(c),
        Command::Report(a) => report::run(a),
        Command::Video(c) => video::run(c),
    }
}

/// Commands that print a listing stop quietly when whoever reads it stops
/// (`unet stat | head`), as other Unix tools do: SIGPIPE's default action
/// back, where Rust's runtime ignores it (a write then fails, and
/// `println!` panics). The control socket is written with `MSG_NOSIGNAL`,
/// so only a closed standard output or error raises it. Long-running
/// commands (the daemon, benchmarks, the router, the video client) keep
/// ignoring it.
fn end_quietly_when_output_closes() {
    // SAFETY: sets the disposition of SIGPIPE to its default before this
    // process starts any thread or installs any handler; `signal` with
    // SIG_DFL touches no memory of ours.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}
