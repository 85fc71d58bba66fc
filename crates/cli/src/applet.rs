//! `unet applet check|run`.

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum Command {}

pub fn run(c: Command) -> ExitCode {
    match c {}
}
