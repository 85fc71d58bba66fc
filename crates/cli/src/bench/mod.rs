//! `unet bench …`: every figure is printed beside a baseline measured in the
//! same invocation, with the ratio.

use std::process::ExitCode;

use clap::Subcommand;

mod applet_build;
mod bars;
mod child;
mod floor;
mod forwarder;
mod host_floor;
mod javia;
mod jive;
mod net;
mod overhead;
mod plot;
mod raw_port;
mod report;
mod router;
mod spine;
pub(crate) mod spine_graph;
mod spine_peer;
mod spine_wire;
pub mod stats;
mod tcp;
mod udm;
mod udm_node;
mod udp_raw;
mod unet_paths;
mod via;
mod video;

#[derive(Subcommand)]
pub enum Command {
    /// JIVE against gcc and HotSpot: the U-Net/SLE paper's Figures 3 and 4.
    Jive(jive::Args),
    /// Round-trip time against message size (8 B to 64 KiB) on unet's
    /// direct, engine or UDP path, beside the floor ring or raw UDP.
    Pingpong(net::PingArgs),
    /// One-way bandwidth against message size, streaming or in bursts of 25
    /// with acknowledgments (the U-Net/SLE paper's Figure 6), beside the
    /// floor ring or raw UDP.
    Stream(net::StreamArgs),
    /// The floor ring between two threads, two threads on two mappings,
    /// two processes forked without exec, and two processes as `pingpong`
    /// and `stream` run it: round trip and stream of 64 B messages, each
    /// run beside the host's own floor, as a ratio to the two threads.
    Floor(floor::modes::Args),
    /// Per-message transmit and receive overhead of U-Net/SLE applets, split
    /// by step (the U-Net/SLE paper's Figure 7), beside the same steps
    /// without an applet.
    Overhead(overhead::Args),
    /// VIA: round trip and one-way bandwidth between two VIs (memory
    /// regions, posted descriptors), beside unet's endpoint direct path.
    Via(via::Args),
    /// Javia against the raw Rust VIA client and Aeron IPC: the Javia
    /// paper's Figures 1-4 (round trip and bandwidth against message size),
    /// on the local path and between two engines.
    Javia(javia::Args),
    /// UDM: the UDM paper's Tables 4 and 5 (fast and buffered path costs)
    /// and Figures 7-10 (applications and synth-N under a gang scheduler
    /// with skew).
    Udm(udm::Args),
    /// SPINE: the dispatcher's cost per event and per handler invocation
    /// (compiled and interpreted, beside a direct Rust call), the watchdog's
    /// stop time for a runaway handler, a neighbour's rate beside it, and
    /// handler ping-pong over peer queues and the wire (the rows of
    /// `spine-peer` and `spine-wire`).
    Spine(spine::Args),
    /// SPINE: handler ping-pong between two extensions on two adapters
    /// over the peer queue, beside host ping-pong on the direct path (also
    /// rows of `unet bench spine`).
    SpinePeer(spine_peer::PeerArgs),
    /// SPINE's priority effect (the SPINE paper, section 6): the same
    /// handler pipeline under two event-priority settings, each one's
    /// event graph (Chrome JSON and SVG), period, latency and receive
    /// bursts.
    SpineGraph(spine_graph::Args),
    /// A node process of a `unet bench udm` run (internal).
    #[command(name = "__udm-node", hide = true)]
    UdmNode(udm_node::NodeArgs),
    /// One end of a `unet bench javia` run with the Rust client (internal).
    #[command(name = "__javia-peer", hide = true)]
    JaviaPeer(javia::PeerArgs),
    /// The other process of a network benchmark run (internal).
    #[command(name = "__child", hide = true)]
    Child(child::ChildArgs),
    /// SPINE: a handler ping-pong between two adapters over the UDP wire,
    /// beside two host processes on the direct path and raw UDP (also rows
    /// of `unet bench spine`).
    SpineWire(spine_wire::WireArgs),
    /// SPINE's IP router: the route lookup (LC-trie in Rust and in JIVE,
    /// a binary trie, published crates) on the full table and 1 000 routes.
    Router(router::Args),
    /// SPINE's raw-frame port over a veth pair: frames per second received
    /// and sent through its rings, beside the same socket with
    /// recvmmsg/sendmmsg, 64 and 1 500 byte frames (needs root).
    Port(raw_port::Args),
    /// SPINE's video client: several test-pattern streams, then one 1080p
    /// stream at 30 frames a second, over the UDP wire into moving
    /// windows; frames lost per stream, throughput, and the client
    /// application's CPU time beside the adapters'.
    Video(video::Args),
}

pub fn run(c: Command) -> ExitCode {
    match c {
        Command::Jive(a) => jive::run(a),
        Command::Pingpong(a) => net::run_pingpong(a),
        Command::Stream(a) => net::run_stream(a),
        Command::Child(a) => net::run_child(a),
        Command::Floor(a) => floor::modes::run(a),
        Command::Overhead(a) => overhead::run(a),
        Command::Via(a) => via::run(a),
        Command::Javia(a) => javia::run(a),
        Command::JaviaPeer(a) => javia::run_peer(a),
        Command::Udm(a) => udm::run(a),
        Command::Spine(a) => spine::run(a),
        Command::SpinePeer(a) => spine_peer::run(a),
        Command::SpineGraph(a) => spine_graph::run(a),
        Command::UdmNode(a) => udm_node::run(a),
        Command::SpineWire(a) => spine_wire::run(a),
        Command::Router(a) => router::run(a),
        Command::Port(a) => raw_port::run(a),
        Command::Video(a) => video::run(a),
    }
}
