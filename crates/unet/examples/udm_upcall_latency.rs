//! A null UDM message one way, received by polling and by an upcall
//! (`unet::udm::bench::upcall_latency`), on an engine in this process:
//!
//! ```sh
//! cargo run --release -p unet --example udm_upcall_latency [ROUNDS]
//! ```

use unet::{Engine, EngineConfig, Session};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(20_000);
    let e = Engine::start(EngineConfig::default())?;
    let s = Session::embedded(&e)?;
    let m = unet::udm::bench::upcall_latency(&s, rounds)?;
    println!("rounds per column          {}", m.rounds);
    println!(
        "round trip, polling        {:>8.0} ns",
        m.poll_round_trip_ns
    );
    println!(
        "round trip, upcall (spin)  {:>8.0} ns",
        m.upcall_round_trip_ns
    );
    println!(
        "round trip, upcall (wake)  {:>8.0} ns",
        m.upcall_wake_round_trip_ns
    );
    println!("one way, polling           {:>8.0} ns", m.poll_ns);
    println!(
        "one way, upcall (spin)     {:>8.0} ns  ({:.2}x polling)",
        m.upcall_ns,
        m.upcall_ns / m.poll_ns
    );
    println!(
        "one way, upcall (wake)     {:>8.0} ns  ({:.2}x polling)",
        m.upcall_wake_ns,
        m.upcall_wake_ns / m.poll_ns
    );
    Ok(())
}
