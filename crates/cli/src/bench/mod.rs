//! `unet bench …`: every figure is printed beside a baseline measured in the
//! same invocation, with the ratio.

use std::process::ExitCode;

use clap::Subcommand;

mod jive;

#[derive(Subcommand)]
pub enum Command {
    /// JIVE against gcc and HotSpot: the U-Net/SLE paper's Figures 3 and 4.
    Jive(jive::Args),
}

pub fn run(c: Command) -> ExitCode {
    match c {
        Command::Jive(a) => jive::run(a),
    }
}
